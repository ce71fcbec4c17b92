"""NCCL's PAT reduce_scatter and all_gather (one GPU per node).

Expected values come from numpy, from NCCL's PAT code worked through by hand
(src/include/collectives.h of NCCL 2.30.7), and from its tuner's formulas
(src/graph/tuning.cc: PAT latency 8 + log2i(nodes) x 14 / 3.5 + 2.8 x ranks us, bus
bandwidth 0.75 of the network's, taken as the algorithm bandwidth).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.pat_schedule import schedule
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.algorithms.nccl.tuner import choose
from simcoll.errors import InvalidInputError

US = 1e-6


def one_gpu_per_node(nodes: int) -> sc.topology.Topology:
    """Nodes of one GPU each: GPU -(300 GB/s, 1 us)- node switch -(25 GB/s, 2 us)- core."""
    return sc.topology.cluster(nodes, 1)


@pytest.mark.parametrize("nranks", [2, 3, 5, 6, 7, 8, 12, 13, 16, 33])
@pytest.mark.parametrize("count, channels", [(1, 1), (37, 2), (70_000, 1), (40_000, 3)])
def test_pat_reduce_scatter_and_all_gather_give_numpy_s_results(nranks, count, channels):
    # 70,000 int64 per block make 560 kB: two chunks of NCCL's 512 KiB at most.
    topo = one_gpu_per_node(nranks)
    rng = np.random.default_rng(nranks * 7919 + count)
    data = [rng.integers(-1000, 1000, size=nranks * count + nranks // 2) for _ in range(nranks)]
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", data=data, algo="pat",
                      channels=channels)
    assert res.params["algo"] == "pat" and res.params["proto"] == "Simple"
    total = np.sum(np.stack(data).astype(np.int64), axis=0)
    for r, block in enumerate(np.array_split(total, nranks)):  # uneven blocks
        np.testing.assert_array_equal(res.outputs[r], block)
    own = [x[:count] for x in data]
    res = sc.simulate(topo, "all_gather", algorithm="nccl", data=own, algo="pat",
                      channels=channels)
    for r in range(nranks):
        np.testing.assert_array_equal(res.outputs[r], np.concatenate(own))


@pytest.mark.parametrize("op, reference", [("max", np.max), ("min", np.min),
                                           ("product", np.prod)])
def test_pat_reduce_scatter_applies_every_op(op, reference):
    nranks = 6
    rng = np.random.default_rng(3)
    data = [rng.uniform(0.5, 1.5, size=6 * 500).astype(np.float64) for _ in range(nranks)]
    res = sc.simulate(one_gpu_per_node(nranks), "reduce_scatter", algorithm="nccl",
                      data=data, algo="pat", channels=2, op=op)
    expected = np.array_split(reference(np.stack(data), axis=0), nranks)
    for r in range(nranks):
        np.testing.assert_allclose(res.outputs[r], expected[r], rtol=1e-12)


@pytest.mark.parametrize("nranks", [2, 3, 6, 8, 11])
@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_pat_moves_what_a_ring_moves_in_log_p_messages_for_small_buffers(nranks, collective):
    block = 64  # bytes per rank's block: every block fits one aggregated step
    nbytes = block * nranks if collective == "reduce_scatter" else block
    res = sc.simulate(one_gpu_per_node(nranks), collective, algorithm="nccl", nbytes=nbytes,
                      algo="pat", channels=1)
    # Every block reaches every rank once along a binomial tree: p - 1 blocks in and
    # out per rank, as a ring; aggregated, one message per dimension: ceil(log2 p).
    expected = np.full(nranks, (nranks - 1) * block)
    np.testing.assert_array_equal(res.bytes_sent, expected)
    np.testing.assert_array_equal(res.bytes_received, expected)
    assert res.messages == nranks * math.ceil(math.log2(nranks))


def test_the_wire_carries_the_slots_that_skipped_ops_leave_empty():
    # p = 6: aggFactor 4, aggDelta 2 (8 / 4). Phase 0 of reduce_scatter sends the blocks
    # s = mirrorInvert(a, 4) x 2 + 1 = 7, 5, 3, 1 into slots a = 0..3 of one step on
    # dimension 0; s = 7 >= 6 is skipped, and NCCL's proxy sends the step up to its last
    # slot: 4 blocks' worth for 3 blocks. Dimension 1 holds block s = 2 at slot 1 (2
    # blocks' worth), dimension 2 block 4 at slot 0 (1): 7 blocks' worth on the wire for
    # the 5 blocks of payload.
    nranks, block = 6, 4
    res = sc.simulate(one_gpu_per_node(nranks), "reduce_scatter", algorithm="nccl",
                      nbytes=nranks * block, algo="pat", channels=1)
    np.testing.assert_array_equal(res.bytes_sent, np.full(nranks, 5 * block))
    for r in range(nranks):
        assert res.link_bytes[(f"gpu{r}", f"node{r}")] == 7 * block


def test_pat_steps_cost_nccl_s_step_latency_one_dimension_after_another():
    # all_gather of 4 bytes per rank on 8 nodes, one channel: rank r sends its block to
    # r - 4, then {own, r+4's} to r - 2 once r+4's has come, then four blocks to r - 1:
    # 3 steps one after the other, each 14 us (NCCL's PAT step over the network, more
    # than the route's 1 + 2 + 2 + 1 us), after the 8 us launch, plus 4, 8 and 16 bytes
    # through the 25 GB/s uplinks.
    res = sc.simulate(one_gpu_per_node(8), "all_gather", algorithm="nccl", nbytes=4,
                      algo="pat", channels=1)
    assert res.time == pytest.approx(8 * US + 3 * 14 * US + (4 + 8 + 16) / 25e9, rel=1e-9)


def test_data_free_and_data_mode_take_the_same_time():
    topo = one_gpu_per_node(5)
    data = [np.ones(5 * 30_000, dtype=np.float32) for _ in range(5)]
    with_data = sc.simulate(topo, "reduce_scatter", algorithm="nccl", data=data, algo="pat")
    data_free = sc.simulate(topo, "reduce_scatter", algorithm="nccl",
                            nbytes=data[0].nbytes, algo="pat")
    assert with_data.time == data_free.time
    assert with_data.messages == data_free.messages
    np.testing.assert_array_equal(with_data.bytes_sent, data_free.bytes_sent)


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_every_connection_sends_as_many_steps_as_its_peer_receives(collective):
    # NCCL's proxy counts each dimension's steps from the same ops on both sides; the
    # schedule is the same on every rank, so sends and receives match per dimension.
    for nranks in range(2, 70):
        for count, chunk in ((1, 16384), (5000, 16384), (300_000, 131072), (9, 4)):
            plan = schedule(collective, nranks, count, chunk, 4)
            assert plan.sends == plan.recvs
            assert len(plan.sends) == math.ceil(math.log2(nranks))


def test_the_tuner_picks_pat_where_its_log_latency_wins():
    def machine(nodes):
        return describe(one_gpu_per_node(nodes), tuple(range(nodes)))
    # 16 nodes, 8 bytes: PAT 8 + log2i(16) x 14 / 3.5 + 16 x 2.8 = 68.8 us; a ring with
    # LL 6.6 + 15 x 5.0 = 81.6 us (one GPU per node: the tree's network latency). PAT's
    # bus bandwidth: 0.75 of NCCL's graph, 1 channel at 24 GB/s through the 25 GB/s
    # link, run on 2 channels.
    sixteen = machine(16)
    pat = (8 + 4 * 14 / 3.5 + 16 * 2.8 + 8 / (1000 * 24 * 0.75)) * US
    assert predict(sixteen, "all_gather", 8, "pat", "Simple", 16) == pytest.approx(
        pat, rel=1e-12)
    chosen = choose(sixteen, "all_gather", 8)
    assert (chosen.algo, chosen.proto, chosen.channels) == ("pat", "Simple", 2)
    # 8 nodes: PAT 8 + 3 x 4 + 8 x 2.8 = 42.4 us, the LL ring 6.6 + 7 x 5.0 = 41.6 us.
    assert choose(machine(8), "reduce_scatter", 8).algo == "ring"
    # 1 GiB on 16 nodes: the ring's algorithm bandwidth 24 x 16 / 15 GB/s beats PAT's
    # 0.75 x 24.
    assert choose(sixteen, "reduce_scatter", 1 << 30).algo == "ring"


def test_pat_only_runs_with_one_gpu_per_node_and_never_averages():
    with pytest.raises(InvalidInputError, match=r"algo='pat' cannot run all_gather.*one GPU"):
        sc.simulate(sc.topology.dgx_h100(2), "all_gather", algorithm="nccl", nbytes=1024,
                    algo="pat")
    topo = one_gpu_per_node(16)
    assert sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=1024).params[
        "algo"] == "pat"
    averaged = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=1024, op="avg")
    assert averaged.params["algo"] == "ring"
    # one GPU per node already: only the average is named (it also said "PAT needs one
    # GPU per node")
    with pytest.raises(InvalidInputError, match=r"\(NCCL leaves PAT out of reduce_scatter's "
                                                r"op=avg\)$"):
        sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=1024, op="avg",
                    algo="pat")
    with pytest.raises(InvalidInputError, match=r"\(PAT needs one GPU per node; NCCL leaves "
                                                r"PAT out of reduce_scatter's op=avg\)$"):
        sc.simulate(sc.topology.dgx_h100(2), "reduce_scatter", algorithm="nccl",
                    nbytes=1024, op="avg", algo="pat")


def random_one_gpu_nodes(seed: int) -> sc.topology.Topology:
    """Servers of one GPU each under a random tree of switches (or, half the time, a
    cycle of switches), links of uneven bandwidths (5 to 100 GB/s) and latencies (0.1 to
    5 us), GPUs with uneven reduction rates."""
    rng = np.random.default_rng(seed)
    topo = sc.topology.Topology(f"random {seed}")
    switches = [topo.add_switch() for _ in range(int(rng.integers(1, 6)))]

    def link(u: str, v: str) -> None:
        topo.add_link(u, v, bandwidth=float(rng.uniform(5, 100)) * 1e9,
                      latency=float(rng.uniform(0.1, 5)) * 1e-6)
    for k in range(1, len(switches)):
        parent = int(rng.integers(0, k))
        link(switches[k], switches[parent])
        if k == len(switches) - 1 and parent != 0 and seed % 2:
            link(switches[k], switches[0])  # a cycle: routes take the shortest way round
    for node in range(int(rng.integers(2, 12))):
        gpu = topo.add_gpu(node=node, reduce_bandwidth=float(rng.uniform(50, 500)) * 1e9)
        link(gpu, switches[int(rng.integers(0, len(switches)))])
    return topo


@pytest.mark.parametrize("seed", range(12))
def test_pat_on_random_machines_is_right_moves_a_ring_s_bytes_and_waits_its_steps(seed):
    topo = random_one_gpu_nodes(seed)
    p = topo.nranks
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 3000))
    data = [rng.standard_normal(p * count) for _ in range(p)]
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", data=data, algo="pat",
                      channels=int(rng.integers(1, 4)))
    expected = np.array_split(np.sum(np.stack(data), axis=0), p)
    for r in range(p):
        np.testing.assert_allclose(res.outputs[r], expected[r], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(res.bytes_sent, np.full(p, (p - 1) * count * 8))
    np.testing.assert_array_equal(res.bytes_received, np.full(p, (p - 1) * count * 8))
    # Each dimension's step waits for the one before it: the launch (8 us) and
    # ceil(log2 p) steps of at least NCCL's 14 us each.
    assert res.time >= (8 + math.ceil(math.log2(p)) * 14) * US * (1 - 1e-12)
    own = [x[:count] for x in data]
    res = sc.simulate(topo, "all_gather", algorithm="nccl", data=own, algo="pat")
    for r in range(p):
        np.testing.assert_array_equal(res.outputs[r], np.concatenate(own))


MiB = 1 << 20


def _sizes_sent_by(result, rank):
    return Counter(e.nbytes for e in result.trace if e.kind == "message" and e.rank == rank)


def test_pat_reduce_scatter_chunks_a_channel_by_all_ranks_bytes():
    """Guards against the chunk computed from counts[c] x itemsize, not p x that.
    16 MiB reduce_scatter on 4 one-GPU nodes, one channel: nBytes = 4 x 4 MiB = 16 MiB,
    512 KiB x 16 = 8 MiB <= 16 MiB, so the chunk stays 512 KiB; rank 0 sends the 3
    other ranks' 4 MiB blocks, 3 x 8 = 24 chunks of 512 KiB. From a rank's 4 MiB alone
    the chunk would halve to 256 KiB (48 messages)."""
    res = sc.simulate(sc.topology.cluster(4, 1), "reduce_scatter", algorithm="nccl",
                      nbytes=16 * MiB, dtype=np.uint8, algo="pat", channels=1, trace=True)
    assert res.params["channels"] == 1
    assert _sizes_sent_by(res, 0) == Counter({512 << 10: 24})


def test_pat_all_gather_chunks_a_channel_by_all_ranks_bytes():
    """4 MiB a rank all_gather on 4 one-GPU nodes, one channel: nBytes =
    4 x 4 MiB = 16 MiB, 512 KiB x 32 = 16 MiB, not above: 512 KiB chunks; rank 0 sends
    3 ranks' 4 MiB, 24 chunks. From 4 MiB alone: 128 KiB chunks (96 messages)."""
    res = sc.simulate(sc.topology.cluster(4, 1), "all_gather", algorithm="nccl",
                      nbytes=4 * MiB, dtype=np.uint8, algo="pat", channels=1, trace=True)
    assert _sizes_sent_by(res, 0) == Counter({512 << 10: 24})
