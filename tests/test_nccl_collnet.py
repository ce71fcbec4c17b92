"""NCCL's CollNet Direct and Chain over InfiniBand SHARP (``collnet=1``).

Expected values are worked out by hand from NCCL 2.30.7 (src/graph/tuning.cc: CollNet's
latencies, 0 base + 2 (3.7 + 0.4 (ppn - 1)) + 31 us for Direct and 2 (ppn - 1) 2.8 + 30
us for Chain; its bus bandwidth, the graph's, here the lesser of NVLink and the NICs,
Direct's divided by its GPU / NIC factor and times 0.85 from Hopper on, then halved into
algorithm bandwidth; src/enqueue.cc: the channel and chunk tuning), and from the
algorithms' messages: Direct scatters (G - 1)/G n to the other heads and sends as much
back, a head sends its block n/G through its NIC each way; Chain moves every slice once
up and once down the node's chain, and the head's part through its NIC.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from conftest import make_data
from reference import assert_outputs_match

import simcoll as sc
from simcoll.algorithms.nccl.collnet import chunk_bytes
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.algorithms.nccl.tuner import candidates, choose, trim_channels

US = 1e-6
MIB = 1 << 20


def a100(nodes: int):
    return describe(sc.topology.dgx_a100(nodes, sharp=True), tuple(range(8 * nodes)))


def test_collnet_runs_only_where_enabled_on_a_sharp_fabric():
    machine = a100(2)
    assert machine.sharp and machine.rails == 8
    assert "collnet_direct" not in candidates(machine, "all_reduce")
    assert {"collnet_direct", "collnet_chain"} <= set(candidates(machine, "all_reduce", 1))
    assert not {"collnet_direct", "collnet_chain"} & set(
        candidates(describe(sc.topology.dgx_a100(2), tuple(range(16))), "all_reduce", 1))
    # reduce_scatter and all_gather: CollNet Direct (a head per GPU here), never Chain
    assert "collnet_direct" in candidates(machine, "reduce_scatter", 1)
    assert "collnet_chain" not in candidates(machine, "all_gather", 1)
    assert "collnet_direct" not in candidates(machine, "reduce_scatter")
    # 16 GPUs per node are more than CollNet's 8 (NCCL_MAX_DIRECT_ARITY + 1)
    wide = sc.topology.dgx(2, nvlink_bandwidth=240e9, pcie_bandwidth=24e9,
                           nic_bandwidth=25e9, gpus_per_node=16, sharp=True)
    assert not {"collnet_direct", "collnet_chain"} & set(
        candidates(describe(wide, tuple(range(32))), "all_reduce", 1))
    with pytest.raises(sc.InvalidInputError, match="CollNet needs collnet=1"):
        sc.simulate(sc.topology.dgx_a100(2, sharp=True), "all_reduce", algorithm="nccl",
                    nbytes=MIB, algo="collnet_chain")


def test_two_a100_nodes_pick_collnet_direct_at_64_mib_and_1_gib():
    """NCCL reads its CollNet graphs' speed inside a node (``bwIntra``). Direct: 8 heads,
    one per NIC at 24 GB/s to the network; its search raises bwIntra to 28, 30 and 48,
    as a head's NVLink carries 2 x 48 of its 240 GB/s: 8 x 48 = 384 GB/s (factor 1:
    a NIC per GPU; no 0.85 before Hopper). Chain: the ring graph's 8 channels at 24,
    raised to 28 and 30 (8 x 30 x 7/8 = 210 fits a GPU's 240, 8 x 48 x 7/8 = 336 does
    not): 240 GB/s. Both algbw half their bus bandwidth."""
    machine = a100(2)
    direct = 2 * (3.7 + 7 * 0.4) + 31                  # 44 us
    chain = 2 * 7 * 2.8 + 30                           # 69.2 us
    for nbytes in (64 * MIB, 1 << 30):
        assert predict(machine, "all_reduce", nbytes, "collnet_direct", "Simple", 16) == \
            pytest.approx((direct + nbytes / (1000 * 384 / 2)) * US, rel=1e-12)
        assert predict(machine, "all_reduce", nbytes, "collnet_chain", "Simple", 16) == \
            pytest.approx((chain + nbytes / (1000 * 240 / 2)) * US, rel=1e-12)
        assert predict(machine, "all_reduce", nbytes, "collnet_direct", "LL", 16) == float("inf")
    # The ring's latency, (8.4 + 28 x 3.4 + 2 x 14) x 1.4, is higher, its bandwidth
    # (8 x 24 x 16 / 30 = 102.4 GB/s) lower than Direct's 192: Direct wins at both.
    assert choose(machine, "all_reduce", 64 * MIB, collnet=1).algo == "collnet_direct"
    assert choose(machine, "all_reduce", 1 << 30, collnet=1).algo == "collnet_direct"


def test_collnet_direct_on_hopper_counts_085_and_the_gpu_nic_ratio():
    # DGX H100: 8 heads at 48 GB/s (Hopper's fastest), not raised: 8 x 48 x 0.85.
    h100 = describe(sc.topology.dgx_h100(2, sharp=True), tuple(range(16)))
    bus = 8 * 48.0 * 0.85
    assert predict(h100, "all_reduce", 1 << 30, "collnet_direct", "Simple", 16) == \
        pytest.approx((44 + (1 << 30) / (1000 * bus / 2)) * US, rel=1e-12)
    # 4 NICs for 8 GPUs: 4 heads, at 24 GB/s to the network and 48 inside a node (a head
    # carries 48 x (1 + 3/7) of its 240 GB/s); factor 2 - (2 - 1) / 2 = 1.5.
    half = sc.topology.dgx_a100(2, nics_per_node=4, sharp=True)
    machine = describe(half, tuple(range(16)))
    assert machine.rails == 4
    assert predict(machine, "all_reduce", 1 << 30, "collnet_direct", "Simple", 16) == \
        pytest.approx((44 + (1 << 30) / (1000 * 4 * 48 / 1.5 / 2)) * US, rel=1e-12)


def test_channel_trimming_and_chunks_as_worked_out_by_hand():
    # Direct, 1 MiB, 8 heads: 16 -> 8 (threshold 512 -> 256 at 12), -> 4 (128 at 6),
    # -> 2 (64 at 3), where 2 x 640 x 8 x 64 = 655,360 <= 1 MiB.
    assert trim_channels(MIB, "collnet_direct", "Simple", 16, 16, 8) == 2
    # 1 GiB is more than 16 x 640 x 8 x 512 bytes (42 MB): all 16 channels stay.
    assert trim_channels(1 << 30, "collnet_direct", "Simple", 16, 16, 8) == 16
    # Chain: one channel per 640 x 512 = 327,680 bytes: 1 MiB keeps 3.
    assert trim_channels(MIB, "collnet_chain", "Simple", 16, 16, 8) == 3
    # Direct's chunk at 1 MiB on 2 channels of 8 heads: 512 -> 128 KiB (fewer than 128
    # chunks per head), -> 32 KiB (fewer than 16). At 1 GiB on 16 channels of 8 heads:
    # 1 GiB / (128 x 512 KiB) = 16 < 128, so 128 KiB (the first floor), where
    # 1 GiB / (128 x 128 KiB) = 64 >= 16 stops the other halvings.
    assert chunk_bytes("collnet_direct", MIB, 2, 8) == 32 * 1024
    assert chunk_bytes("collnet_direct", 1 << 30, 16, 8) == 128 * 1024
    # Chain at 64 MiB on 16 channels, depth 8: 64 MiB / (16 x 256 KiB) = 16 < 512 -> 128
    # KiB (32 < 512, stop at 128 KiB), 32 < 64 -> 64 KiB (64 >= 64, stop).
    assert chunk_bytes("collnet_chain", 64 * MIB, 16, 8) == 64 * 1024


@pytest.mark.parametrize("algo", ["collnet_direct", "collnet_chain"])
@pytest.mark.parametrize("machine", ["a100x2", "a100x3_two_leaves"])
def test_collnet_reduces_right_and_moves_what_its_messages_say(algo, machine):
    nodes = 2 if machine == "a100x2" else 3
    topo = sc.topology.dgx_a100(nodes, sharp=True, leaf_radix=40 if nodes == 2 else 4)
    p = 8 * nodes
    count = 16 * 8 * 2000
    inputs = make_data(p, count, "float32")
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo=algo,
                      collnet=1, channels=16)
    assert res.correct and res.params["algo"] == algo
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    for out in res.outputs:
        np.testing.assert_allclose(out, exact, rtol=1e-5, atol=1e-4)
    n, g = count * 4, 8
    nvlink_out = [res.link_bytes[(f"gpu{r}", f"nvswitch{r // g}")] for r in range(p)]
    nic_up = [res.link_bytes[(f"nic{r}", res_leaf(topo, r))] for r in range(p)]
    nic_down = [res.link_bytes[(res_leaf(topo, r), f"nic{r}")] for r in range(p)]
    if algo == "collnet_direct":
        # (G-1)/G n scattered, (G-1) blocks of n/G sent back; a block each way per NIC
        assert nvlink_out == [2 * (g - 1) * n // g] * p
        assert nic_up == nic_down == [n // g] * p
        assert res.bytes_sent.tolist() == [2 * (g - 1) * n // g + n // g] * p
    else:
        # per channel a chain of G GPUs: G - 1 parts up and G - 1 down per node; each
        # GPU heads 2 of the 16 channels (c mod 8) and sends their parts to its NIC
        for node in range(nodes):
            assert sum(nvlink_out[node * g:(node + 1) * g]) == 2 * (g - 1) * n
        assert nic_up == nic_down == [2 * n // 16] * p


def res_leaf(topo: sc.Topology, rank: int) -> str:
    """The leaf NIC ``rank`` hangs on (dgx_a100: one NIC per GPU, NIC r on rail r mod 8)."""
    return next(d for d in topo.neighbors(f"nic{rank}") if d.startswith("leaf"))


def test_collnet_direct_takes_the_same_time_on_any_number_of_nodes_under_one_leaf():
    times = [sc.simulate(sc.topology.dgx_a100(nodes, sharp=True), "all_reduce",
                         algorithm="nccl", nbytes=16 * MIB, algo="collnet_direct",
                         collnet=1).time for nodes in (2, 4, 8)]
    assert times[0] == times[1] == times[2]
    # no faster than its latency and its NIC: n/8 at 24 GB/s each way through PCIe
    assert times[0] > 44 * US + 16 * MIB / 8 / 24e9


def random_sharp_machine(seed: int) -> tuple[sc.Topology, int, int]:
    """Nodes of GPUs on an in-network NVSwitch each, one NIC per GPU, rail r's NICs on
    SHARP leaves of at most ``per_leaf`` nodes, leaves joined by a SHARP spine; every
    bandwidth and latency drawn at random. Returns it, its nodes and GPUs per node."""
    rng = np.random.default_rng(seed)
    nodes, g = int(rng.integers(2, 6)), int(rng.integers(1, 5))
    per_leaf = int(rng.integers(1, nodes + 1))
    topo = sc.Topology(f"random_sharp_{seed}")
    spine = topo.add_switch("spine", reduce_bandwidth=float("inf"))
    leaves = {}
    for node in range(nodes):
        nvs = topo.add_switch(f"nvs{node}", reduce_bandwidth=float(rng.uniform(100, 900)) * 1e9)
        for local in range(g):
            gpu = topo.add_gpu(f"g{node}_{local}", node=node,
                               reduce_bandwidth=float(rng.uniform(50, 500)) * 1e9)
            nic = topo.add_nic(f"n{node}_{local}")
            topo.add_link(gpu, nvs, bandwidth=float(rng.uniform(50, 400)) * 1e9,
                          latency=float(rng.uniform(0.1, 1)) * US, kind="nvlink")
            topo.add_link(gpu, nic, bandwidth=float(rng.uniform(10, 60)) * 1e9,
                          latency=float(rng.uniform(0.5, 2)) * US)
            key = (node // per_leaf, local)
            if key not in leaves:
                leaves[key] = topo.add_switch(f"leaf{local}_{key[0]}",
                                              reduce_bandwidth=float("inf"))
                topo.add_link(leaves[key], spine, bandwidth=float(rng.uniform(20, 200)) * 1e9,
                              latency=float(rng.uniform(0.5, 3)) * US)
            topo.add_link(nic, leaves[key], bandwidth=float(rng.uniform(10, 60)) * 1e9,
                          latency=float(rng.uniform(0.5, 3)) * US)
    return topo, nodes, g


@pytest.mark.parametrize("seed", range(6))
def test_sharp_algorithms_on_random_machines(seed):
    topo, nodes, g = random_sharp_machine(seed)
    p = nodes * g
    rng = np.random.default_rng(100 + seed)
    count = int(rng.integers(1, 5000))
    inputs = make_data(p, count, "float64", seed=seed)
    exact = np.sum(inputs, axis=0)
    if g == 1:  # NCCL runs no NVLS where a node holds one GPU (test_nccl_hand_built.py)
        with pytest.raises(sc.InvalidInputError, match="no NVLS where a node holds one GPU"):
            sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo="nvls",
                        collnet=1, arch="hopper")
    for algo in ("collnet_chain", "collnet_direct") + (("nvls",) if g > 1 else ()):
        channels = int(rng.integers(2 if algo == "nvls" else 1, 5))  # NVLS needs 2
        res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo=algo,
                          collnet=1, channels=channels, arch="hopper")
        assert res.correct and res.params["algo"] == algo, (seed, algo)
        assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
        for out in res.outputs:
            np.testing.assert_allclose(out, exact, rtol=1e-12, atol=1e-9)
        # every GPU's NIC carries the same bytes up as down: what goes up to SHARP comes
        # back reduced, slice for slice
        for node in range(nodes):
            for local in range(g):
                gpu, nic = f"g{node}_{local}", f"n{node}_{local}"
                assert res.link_bytes.get((gpu, nic), 0) == res.link_bytes.get((nic, gpu), 0)
        # over the whole machine, each node sends the buffer once up to SHARP
        up = sum(res.link_bytes.get((f"g{node}_{local}", f"n{node}_{local}"), 0)
                 for node in range(nodes) for local in range(g))
        assert up == nodes * count * 8, (seed, algo)


@pytest.mark.parametrize("algo", ["auto", "collnet_direct", "collnet_chain", "nvls"])
def test_started_sharp_collectives_run_on_the_world_and_are_refused_on_groups(algo):
    """Started from rank programs on the world communicator, what collnet=1 enables runs
    as at the top level (NCCL's choice is NVLS across nodes here): the SHARP switches'
    programs start with the collective; time, outputs and traffic are the top-level
    run's. Those programs see GPUs by world rank, so a group that reorders or leaves out
    GPUs is refused, before the run, with the way out."""
    topo = sc.topology.dgx_h100(2, sharp=True)
    x = [np.arange(2**16, dtype=np.float32) % 13 * (r + 1) for r in range(16)]

    def program(comm):
        out = yield comm.all_reduce(x[comm.rank], algorithm="nccl", algo=algo, collnet=1)
        return out

    top = sc.simulate(topo, "all_reduce", algorithm="nccl", data=x, algo=algo, collnet=1)
    started = sc.run_program(topo, program)
    assert top.correct and started.time == top.time
    assert started.link_bytes == top.link_bytes
    for r in range(16):
        np.testing.assert_array_equal(started.outputs[r], top.outputs[r])

    def reversed_group(comm):
        group = comm.group(list(range(15, -1, -1)))
        out = yield group.all_reduce(x[comm.rank], algorithm="nccl", algo=algo, collnet=1)
        return out

    with pytest.raises(sc.AlgorithmError, match="collnet=1 runs programs on SHARP switches, "
                                                "which see GPUs and devices by world address"):
        sc.run_program(topo, reversed_group)


@pytest.mark.parametrize("algo", ["collnet_direct", "collnet_chain"])
def test_collnet_on_a_generic_fat_tree_sends_each_node_buffer_once_through_its_nic(algo):
    # 3 servers of 4 GPUs, one NIC each, on 4-port leaves (2 nodes per leaf) and a spine
    topo = sc.topology.fat_tree(3, 4, sharp=True, leaf_radix=4)
    with pytest.raises(sc.TopologyError, match="sharp=1 is not accepted"):
        sc.topology.fat_tree(3, 4, sharp=1)
    machine = describe(topo, tuple(range(12)))
    assert machine.sharp and machine.rails == 1    # one NIC serves the node's 4 GPUs
    count = 16 * 4 * 300
    inputs = make_data(12, count, "float32")
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo=algo,
                      collnet=1, channels=16)
    assert res.correct
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    n = count * 4
    for node, leaf in ((0, "leaf0_0"), (1, "leaf0_0"), (2, "leaf0_1")):
        assert res.link_bytes[(f"nic{node}", leaf)] == res.link_bytes[(leaf, f"nic{node}")] == n
    for leaf in ("leaf0_0", "leaf0_1"):
        assert res.link_bytes[(leaf, "spine")] == res.link_bytes[("spine", leaf)] == n


@pytest.mark.parametrize("algo", ["collnet_direct", "collnet_chain"])
def test_one_gpu_per_node_pays_the_trees_network_step_as_nccls_tuner_counts_it(algo):
    """tuning.cc: "With ppn=1 latencies are fully exposed, use the Tree network latency"
    (14 us for Simple, not CollNet's 31 or 30). The tuner predicted 14.3 us and picked
    CollNet; the run charged the 31 us step and took 35.2 us."""
    topo = sc.topology.fat_tree(4, 1, sharp=True)   # one GPU and NIC per node, one leaf
    n = 4096
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo=algo, collnet=1)
    assert res.params["channels"] == 1
    # By hand: the GPU's route to its leaf is 1 us (NVSwitch) + 1 us (PCIe) + 1.5 us (IB)
    # = 3.5 us and its narrowest link the 12.5 GB/s NIC. Up: the 14 us step (longer than
    # the route's 3.5) and the bytes; the SHARP leaf reduces in no time; down: 3.5 us and
    # the bytes. Nothing moves inside a node of one GPU.
    up = Fraction(14, 10**6) + Fraction(n) / Fraction(12_500_000_000)
    down = Fraction(35, 10**7) + Fraction(n) / Fraction(12_500_000_000)
    assert res.time == pytest.approx(float(up + down), rel=1e-12)
    # and the tuner's 14.34 us is within 30% of the run (which took 2.5 x it, 35.2 us,
    # before)
    machine = describe(topo, tuple(range(4)))
    assert predict(machine, "all_reduce", n, algo, "Simple", 1) == pytest.approx(
        res.time, rel=0.3)
    # two GPUs per node keep CollNet's own network step: 31 us (Direct) or 30 (Chain)
    two = sc.topology.fat_tree(2, 2, sharp=True)
    assert sc.simulate(two, "all_reduce", algorithm="nccl", nbytes=n, algo=algo, collnet=1,
                       channels=1).time > (30 if algo == "collnet_chain" else 31) * US


@pytest.mark.parametrize("op, dtype, arch, collnet_runs", [
    ("sum", "float32", "ampere", True),
    ("avg", "float32", "ampere", True),      # NCCL hands SHARP an average as a sum
    ("max", "int32", "ampere", True),
    ("prod", "float32", "ampere", False),    # the plugin's opConvert: sum, max, min only
    ("sum", "int8", "ampere", False),        # 8-bit and bfloat16 need SHARP v3 (NDR)
    ("sum", "bfloat16", "ampere", False),
    ("sum", "int8", "hopper", True),
    ("min", "bfloat16", "hopper", True),
    ("prod", "float64", "hopper", False),
])
def test_collnet_runs_only_what_sharp_reduces(op, dtype, arch, collnet_runs):
    # The nccl-rdma-sharp plugin's ncclSharpReduceSupport fills NCCL's
    # collNetSupportMatrix; a reduction it refuses runs the algorithm it would run with
    # NCCL_COLLNET_ENABLE=0, on the communicator's channels, which collnet=1 set up: on
    # DGX A100 nodes half as many again as the 16 of the rings (CollNet Chain's graph,
    # 8 channels at 30 GB/s inside a node against 24 to the network), on DGX H100 nodes
    # the same 16 (48 GB/s both ways).
    topo = (sc.topology.dgx_a100 if arch == "ampere" else sc.topology.dgx_h100)(
        2, sharp=True)
    args = dict(algorithm="nccl", nbytes=64 * MIB, op=op, dtype=dtype)
    if collnet_runs:
        forced = sc.simulate(topo, "all_reduce", collnet=1, algo="collnet_chain", **args)
        assert forced.params["algo"] == "collnet_chain"
    else:
        with pytest.raises(sc.InvalidInputError, match="SHARP computes sums"):
            sc.simulate(topo, "all_reduce", collnet=1, algo="collnet_chain", **args)
        on = sc.simulate(topo, "all_reduce", collnet=1, **args)
        off = sc.simulate(topo, "all_reduce", collnet=0, **args)
        assert on.params["algo"] == off.params["algo"] == "ring"
        assert (on.params["channels"], off.params["channels"]) == (
            (24, 16) if arch == "ampere" else (16, 16))
        # the same ring on both, but for what a channel's threads take to write its
        # slices of LL128 (at its share of the per-channel cap) where the links do not
        # hide it, which differs with the channel count by under 0.2%, and for NCCL's
        # cut in 16 KiB cells: 16 channels of 256 on 16, 23 of 171 and one of 163 on 24
        # (0.2% above an even share)
        assert on.time == pytest.approx(off.time, rel=5e-3)


def test_a_forced_collnet_of_a_product_is_refused_naming_what_sharp_computes():
    with pytest.raises(sc.InvalidInputError, match=r"algo='collnet_direct' cannot run "
                                                   r"all_reduce on this machine; it can run "
                                                   r"ring, tree \(SHARP computes sums"):
        sc.simulate(sc.topology.dgx_a100(2, sharp=True), "all_reduce", algorithm="nccl",
                    nbytes=64 * MIB, collnet=1, op="prod", algo="collnet_direct")


def test_a_refused_collnet_names_what_is_missing():
    """The refusal listed every requirement whatever failed ("CollNet needs collnet=1,
    ... a SHARP fabric ..." with collnet=1 given on one node)."""
    wide = sc.topology.dgx(2, nvlink_bandwidth=240e9, pcie_bandwidth=24e9,
                           nic_bandwidth=25e9, gpus_per_node=16, sharp=True)
    for topo, kwargs, missing in (
            (sc.topology.dgx_a100(2), {"collnet": 1}, "nodes joined by switches that reduce"),
            (sc.topology.dgx_a100(1, sharp=True), {"collnet": 1}, "two nodes or more"),
            (sc.topology.dgx_a100(2, sharp=True), {}, "collnet=1"),
            (wide, {"collnet": 1}, "at most 8 GPUs per node")):
        with pytest.raises(sc.InvalidInputError) as refused:
            sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=MIB,
                        algo="collnet_direct", **kwargs)
        said = str(refused.value)
        assert f"(CollNet needs {missing}" in said and said.count("CollNet needs") == 1
        # one need at a time here: none of the others is named
        others = {"collnet=1", "switches that reduce", "two nodes", "8 GPUs"}
        assert not {word for word in others if word in said} - {
            word for word in others if word in missing}


def test_collnet_direct_needs_an_nvswitch_as_in_nccl():
    """tuning.cc: ``if (nvsCount == 0 && a == NCCL_ALGO_COLLNET_DIRECT) disable = 1``.
    Two GPUs per node joined by a direct NVLink (no NVSwitch) ran CollNet Direct."""
    topo = _nvlinked_pairs()
    assert candidates(describe(topo, (0, 1, 2, 3)), "all_reduce", 1) == (
        "ring", "tree", "collnet_chain")
    with pytest.raises(sc.InvalidInputError, match=r"can run ring, tree, collnet_chain "
                                                   r"\(CollNet needs an NVSwitch inside a "
                                                   r"node for Direct\)"):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=16384, collnet=1,
                    algo="collnet_direct")
    # the NVSwitch presets keep it
    assert "collnet_direct" in candidates(a100(2), "all_reduce", 1)


def test_collnet_direct_is_left_out_on_single_gpu_nodes_without_an_nvswitch():
    """NCCL counts the NVSwitch nodes of its topology whatever the GPUs per node; four
    PCIe-only nodes of one GPU under a SHARP switch ran CollNet Direct for all three
    collectives (only nodes of two GPUs or more were looked at)."""
    topo = sc.Topology("four PCIe nodes of one GPU")
    leaf = topo.add_switch("leaf", reduce_bandwidth=1e12)
    for node in range(4):
        gpu, nic = topo.add_gpu(node=node), topo.add_nic(f"nic{node}")
        topo.add_link(gpu, nic, bandwidth=24e9, latency=1 * US, kind="pcie")
        topo.add_link(nic, leaf, bandwidth=25e9, latency=1 * US, kind="ib")
    for collective in ("all_reduce", "reduce_scatter", "all_gather"):
        res = sc.simulate(topo, collective, algorithm="nccl", nbytes=4096, collnet=1)
        assert res.params["algo"] != "collnet_direct" and res.correct is None
    assert "collnet_direct" not in candidates(describe(topo, (0, 1, 2, 3)), "all_reduce", 1)
    # a node's switch over NVLink keeps it, one GPU a node or eight
    for nodes, per_node in ((4, 1), (2, 4)):
        machine = describe(sc.topology.fat_tree(nodes, per_node, sharp=True),
                           tuple(range(nodes * per_node)))
        assert "collnet_direct" in candidates(machine, "all_reduce", 1)


def test_collnet_direct_refused_for_a_forced_pci_intra_says_so():
    with pytest.raises(sc.InvalidInputError,
                       match=r"CollNet needs NVLink between a node's GPUs for Direct "
                             r"\(intra='pci' here\)"):
        sc.simulate(sc.topology.fat_tree(2, 4, sharp=True), "all_reduce", algorithm="nccl",
                    nbytes=MIB, algo="collnet_direct", collnet=1, intra="pci")


@pytest.mark.parametrize("collective, up_bytes, down_bytes", [
    ("reduce_scatter", 4096, 1024),   # sends its whole input, gets its reduced block back
    ("all_gather", 4096, 4 * 4096),   # sends its own block, gets every rank's back
])
def test_one_gpu_per_node_gathers_pay_the_trees_network_step(collective, up_bytes, down_bytes):
    """tuning.cc: "With ppn=1 latencies are fully exposed, use the Tree network latency":
    CollNet Direct's reduce_scatter and all_gather on one GPU per node take the tree's
    14 us network step (Simple), not CollNet Direct's 31 us, as its all_reduce does."""
    topo = sc.topology.fat_tree(4, 1, sharp=True)   # one GPU and NIC per node, one leaf
    res = sc.simulate(topo, collective, algorithm="nccl", nbytes=4096, algo="collnet_direct",
                      collnet=1)
    assert res.params["channels"] == 1
    # By hand: route GPU -> leaf is 1 us (NVSwitch) + 1 us (PCIe) + 1.5 us (IB) = 3.5 us,
    # narrowest link the 12.5 GB/s NIC. Up: the 14 us step (longer than the route's
    # 3.5 us) and the bytes; the SHARP leaf reduces in no time; down: 3.5 us and the bytes.
    nic = Fraction(12_500_000_000)
    up = Fraction(14, 10**6) + up_bytes / nic
    down = Fraction(35, 10**7) + down_bytes / nic
    assert res.time == pytest.approx(float(up + down), rel=1e-12)


def test_a_pcie_switch_is_no_nvswitch_for_collnet_direct():
    """tuning.cc disables CollNet Direct where ``ncclTopoGetNvsCount`` finds no NVS node;
    a PCIe switch between a GPU and its NIC is none, even where the node's GPUs meet over
    a direct NVLink (the route between them all NVLink)."""
    machine = describe(_nvlinked_pairs(behind_pcie_switch=True), (0, 1, 2, 3))
    assert machine.intra == "nvlink"      # the pair's own route is its NVLink
    assert not machine.nvswitch
    assert "collnet_direct" not in candidates(machine, "all_reduce", 1)
    assert "collnet_chain" in candidates(machine, "all_reduce", 1)


def test_chain_on_more_than_8_gpus_per_node_is_refused_by_2_30_7_only():
    """2.30.7 holds CollNet Chain to at most 8 GPUs a node (NCCL_MAX_DIRECT_ARITY + 1) and
    says so; 2.26.2 runs Chain on any node (its enqueue.cc ``updateCollCostTable``)."""
    wide = sc.topology.dgx(2, nvlink_bandwidth=240e9, pcie_bandwidth=24e9,
                           nic_bandwidth=25e9, gpus_per_node=16, sharp=True)
    with pytest.raises(sc.InvalidInputError) as refused:
        sc.simulate(wide, "all_reduce", algorithm="nccl", nbytes=1 << 20,
                    algo="collnet_chain", collnet=1, tuner="2.30.7")
    assert "(CollNet needs at most 8 GPUs per node" in str(refused.value)
    res = sc.simulate(wide, "all_reduce", algorithm="nccl", nbytes=1 << 20,
                      algo="collnet_chain", collnet=1, tuner="2.26.2")
    assert res.params["algo"] == "collnet_chain"


def _nvlinked_pairs(behind_pcie_switch: bool = False):
    """Two nodes of two GPUs joined by a direct NVLink (no NVSwitch), a NIC per GPU on
    one SHARP leaf, each NIC linked to its GPU or to a PCIe switch both GPUs are on."""
    topo = sc.Topology("two NVLinked pairs on a SHARP leaf")
    leaf = topo.add_switch("leaf", reduce_bandwidth=float("inf"))
    for node in range(2):
        pair = [topo.add_gpu(f"g{node}_{i}", node=node) for i in range(2)]
        topo.add_link(pair[0], pair[1], bandwidth=100e9, latency=0.5 * US, kind="nvlink")
        pci = topo.add_switch(f"pci{node}") if behind_pcie_switch else None
        for i in range(2):
            nic = topo.add_nic(f"n{node}_{i}")
            if pci is None:
                topo.add_link(pair[i], nic, bandwidth=24e9, latency=1 * US)
            else:
                topo.add_link(pair[i], pci, bandwidth=24e9, latency=1 * US, kind="pcie")
                topo.add_link(pci, nic, bandwidth=24e9, latency=1 * US, kind="pcie")
            topo.add_link(nic, leaf, bandwidth=25e9, latency=1.5 * US)
    return topo


def test_a_refused_chain_does_not_ask_for_direct_s_nvswitch():
    """Only Direct needs an NVSwitch (tuning.cc's nvsCount rule names
    NCCL_ALGO_COLLNET_DIRECT alone): Chain refused for want of collnet=1 on a machine
    without one names collnet=1 and nothing of Direct's."""
    with pytest.raises(sc.InvalidInputError) as refused:
        sc.simulate(_nvlinked_pairs(), "all_reduce", algorithm="nccl", nbytes=16384,
                    algo="collnet_chain")
    said = str(refused.value)
    assert "(CollNet needs collnet=1, as NCCL_COLLNET_ENABLE=1 asks)" in said
    assert "NVSwitch" not in said


def test_a_refused_collnet_off_sharp_shows_how_to_build_a_sharp_fabric():
    with pytest.raises(sc.InvalidInputError, match=r"e\.g\. dgx_a100\(2, sharp=True\)"):
        sc.simulate(sc.topology.dgx_a100(2), "all_reduce", algorithm="nccl",
                    nbytes=1 << 20, algo="collnet_direct", collnet=1)
