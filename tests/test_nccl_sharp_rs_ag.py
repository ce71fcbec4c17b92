"""reduce_scatter and all_gather across nodes through SHARP (``collnet=1``): NVLS and
CollNet Direct. The result against numpy, every GPU's bytes on NVLink and on its NIC
worked out by hand, NCCL's predictions and choice, and SHARP trees of two levels (leaves
joined by a spine)."""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.sharp import rail_plan, rail_steps
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.algorithms.nccl.tuner import candidates

N_NODES, G = 2, 8
P = N_NODES * G


def sharp_pods(nodes: int, gpus: int, per_leaf: int, seed: int | None = None) -> sc.Topology:
    """``nodes`` nodes of ``gpus`` GPUs on an NVLS switch; each GPU's NIC on its rail's
    leaf for ``per_leaf`` nodes at a time, the leaves on one spine; leaves and spine
    reduce (SHARP). With a ``seed``, every link's bandwidth and latency and every
    switch's reduction rate are drawn at random."""
    rng = np.random.default_rng(seed)

    def bw(fixed: float) -> float:
        return fixed if seed is None else float(rng.choice([5e9, 2e10, 5e10, 2e11, 6e11]))

    def lat(fixed: float) -> float:
        return fixed if seed is None else float(rng.choice([0.0, 1e-7, 1e-6]))

    topo = sc.Topology(f"{nodes} x {gpus} in pods of {per_leaf}")
    spine = topo.add_switch("spine", reduce_bandwidth=bw(1e13) * 10)
    leaves: dict[tuple[int, int], str] = {}
    for node in range(nodes):
        nvswitch = topo.add_switch(f"nvswitch{node}", reduce_bandwidth=bw(2e12) * 10)
        for local in range(gpus):
            pod = (node // per_leaf, local)
            if pod not in leaves:
                leaves[pod] = topo.add_switch(f"leaf{pod[0]}_{local}",
                                              reduce_bandwidth=bw(1e13) * 10)
                topo.add_link(leaves[pod], spine, bandwidth=bw(100e9), latency=lat(1e-6),
                              kind="ib")
            gpu = topo.add_gpu(node=node)
            nic = topo.add_nic()
            topo.add_link(gpu, nvswitch, bandwidth=bw(300e9), latency=lat(5e-7),
                          kind="nvlink")
            topo.add_link(gpu, nic, bandwidth=bw(60e9), latency=lat(5e-7), kind="pcie")
            topo.add_link(nic, leaves[pod], bandwidth=bw(50e9), latency=lat(1e-6), kind="ib")
    return topo


def _inputs(p: int, count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-1000, 1000, count).astype(np.int64) for _ in range(p)]


@pytest.mark.parametrize("channels", [2, 3, 16])
@pytest.mark.parametrize("topo", [sc.topology.dgx_h100(2, sharp=True),
                                  sharp_pods(4, 2, per_leaf=2), sharp_pods(3, 3, per_leaf=2)],
                         ids=["dgx_h100(2)", "4x2 two leaves per rail", "3x3 uneven pods"])
def test_nvls_across_nodes_gives_numpys_result(topo, channels):
    """Blocks of 1000 / p elements (not a multiple of the slices), several slices per
    block at 70,001 elements."""
    p = topo.nranks
    for count in (1000, 70_001 * p):
        data = _inputs(p, count, seed=count)
        total = np.sum(data, axis=0)
        res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", data=data, algo="nvls",
                          collnet=1, channels=channels)
        assert res.params["algo"] == "nvls" and res.correct
        for r, block in enumerate(np.array_split(total, p)):
            np.testing.assert_array_equal(res.outputs[r], block)
        mine = _inputs(p, count // p, seed=count + 1)
        res = sc.simulate(topo, "all_gather", algorithm="nccl", data=mine, algo="nvls",
                          collnet=1, channels=channels)
        assert res.correct
        for out in res.outputs:
            np.testing.assert_array_equal(out, np.concatenate(mine))


def test_nvls_reduce_scatter_across_nodes_moves_what_its_heads_own():
    """Two DGX H100 (N = 2 nodes of G = 8), an input of n bytes: every GPU pushes n into
    its NVSwitch and gets back the node's sums of its rail's N blocks, N n / p = n / 8; it
    sends those N blocks through its NIC and receives its own block, n / p = n / 16."""
    topo = sc.topology.dgx_h100(N_NODES, sharp=True)
    n = 1 << 22
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=n, algo="nvls",
                      collnet=1)
    assert res.params["channels"] == 16
    for r in range(P):
        gpu, switch, nic = f"gpu{r}", f"nvswitch{r // G}", f"nic{r}"
        assert res.link_bytes[(gpu, switch)] == n
        assert res.link_bytes[(switch, gpu)] == N_NODES * n // P
        assert res.link_bytes[(gpu, nic)] == N_NODES * n // P
        assert res.link_bytes[(nic, gpu)] == n // P
        assert res.bytes_sent[r] == n + N_NODES * n // P


def test_nvls_all_gather_across_nodes_moves_what_its_heads_own():
    """An all_gather of m bytes per GPU: a GPU sends its m through its NIC and receives
    its rail's N parts, pushes those N m into the NVSwitch and receives all p m."""
    topo = sc.topology.dgx_h100(N_NODES, sharp=True)
    m = 1 << 18
    res = sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=m, algo="nvls", collnet=1)
    for r in range(P):
        gpu, switch, nic = f"gpu{r}", f"nvswitch{r // G}", f"nic{r}"
        assert res.link_bytes[(gpu, nic)] == m
        assert res.link_bytes[(nic, gpu)] == N_NODES * m
        assert res.link_bytes[(gpu, switch)] == N_NODES * m
        assert res.link_bytes[(switch, gpu)] == P * m


def test_a_two_level_sharp_tree_carries_each_slice_once_between_leaf_and_spine():
    """Four nodes of 2 GPUs, two nodes per leaf: for a reduce_scatter each leaf sends up
    the sum of its two nodes' copies of every block of its rail (N n / p per rail), and
    the spine sends each leaf only the blocks of its own nodes (2 n / p per rail); for an
    all_gather each leaf sends up its two nodes' parts and gets every part back down."""
    topo = sharp_pods(4, 2, per_leaf=2)
    p, n = topo.nranks, 1 << 20
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=n, algo="nvls",
                      collnet=1)
    for leaf in ("leaf0_0", "leaf0_1", "leaf1_0", "leaf1_1"):
        assert res.link_bytes[(leaf, "spine")] == 4 * n // p
        assert res.link_bytes[("spine", leaf)] == 2 * n // p
    m = 1 << 16
    res = sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=m, algo="nvls", collnet=1)
    for leaf in ("leaf0_0", "leaf0_1", "leaf1_0", "leaf1_1"):
        assert res.link_bytes[(leaf, "spine")] == 2 * m
        assert res.link_bytes[("spine", leaf)] == 4 * m


def test_nvls_runs_on_one_channel_under_either_tuner():
    """NCCL gives NVLS no bandwidth where its NVLS graph has under 2 channels
    ("NVLS/NVLStree needs at least 2 channels", tuning.cc 2.30.7): the graph's heads, not
    the channels the kernel runs on (NCCL_NVLS_NCHANNELS=1 runs). simcoll refused
    channels=1 with tuner 2.30.7 and ran it with 2.26.2, whose choice alone differs."""
    for collnet, topo in ((0, sc.topology.dgx_h100(1)),
                          (1, sc.topology.dgx_h100(N_NODES, sharp=True))):
        runs = [sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20,
                            algo="nvls", collnet=collnet, nvls_channels=1, tuner=tuner)
                for tuner in ("2.30.7", "2.26.2")]
        assert [run.params["channels"] for run in runs] == [1, 1]
        assert runs[0].time == runs[1].time and runs[0].link_bytes == runs[1].link_bytes
        # every GPU pushes n into its NVSwitch and takes n back, and its eighth of the
        # node's sum too (from the switch and back: on one node straight back, across
        # nodes after SHARP)
        assert runs[0].link_bytes[("gpu0", "nvswitch0")] == (1 << 20) + (1 << 17)
        sixteen = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20,
                              algo="nvls", collnet=collnet, nvls_channels=16)
        if collnet:   # across nodes: as many bytes on 16 channels as on one
            assert runs[0].link_bytes == sixteen.link_bytes
        else:   # one node: each channel's 64 KiB in 4 pieces of 16 KiB, for GPUs 0 - 3
            for g in range(8):
                assert sixteen.link_bytes[(f"gpu{g}", "nvswitch0")] == \
                    (1 << 20) + (16 * (1 << 14) if g < 4 else 0)


def test_the_tuner_runs_nvls_across_nodes_only_with_collnet():
    """NCCL 2.30.7 gives NVLS reduce_scatter and all_gather across nodes a bandwidth only
    with NCCL_COLLNET_ENABLE=1 and a CollNet plugin that reduce-scatters and all-gathers
    (``ncclTopoTuneModel``). At 1 MiB on two SHARP-joined DGX H100 NVLS runs where it is
    named (NCCL_ALGO=NVLS) with collnet, and between NVLS and the ring without collnet
    the ring runs. With every algorithm CollNet Direct runs: 44 us + 1 MiB at 345.6
    GB/s = 47.0 us, against NVLS's 43 us + 1 MiB at 208.25 GB/s = 48.0 us and the ring
    with LL128's 47.9 us."""
    topo = sc.topology.dgx_h100(N_NODES, sharp=True)
    for collective, nbytes in (("reduce_scatter", 1 << 20), ("all_gather", (1 << 20) // P)):
        on = sc.simulate(topo, collective, algorithm="nccl", nbytes=nbytes, collnet=1,
                         algo="nvls")
        off = sc.simulate(topo, collective, algorithm="nccl", nbytes=nbytes, algo="nvls,ring")
        every = sc.simulate(topo, collective, algorithm="nccl", nbytes=nbytes, collnet=1)
        assert on.params["algo"] == "nvls" and on.params["collnet"] == 1
        assert off.params["algo"] == "ring"
        assert every.params["algo"] == "collnet_direct"


def test_nccls_prediction_for_nvls_across_nodes():
    """NCCL 2.30.7's model: latency 25 us (NVLink) + 18 us (network); bus bandwidth its
    NVLS graph's 8 channels (one per head) x the least of their 40 GB/s inside a node x
    0.85 x 7/8 (one channel's share left out) x (ppn - 1) / ppn, 26.03 GB/s, and their
    48 GB/s to the network, not converted to an algorithm bandwidth for these
    collectives. At 1 GiB: 43 us + 2^30 / 208.25 GB/s."""
    machine = describe(sc.topology.dgx_h100(N_NODES, sharp=True), tuple(range(P)))
    expected = 43e-6 + 2**30 / (8 * 40e9 * 0.85 * 7 / 8 * 7 / 8)
    for collective in ("reduce_scatter", "all_gather"):
        assert predict(machine, collective, 2**30, "nvls", "Simple", 16) == \
            pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("algo", ["nvls", "collnet_direct"])
@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_started_sharp_reduce_scatter_and_all_gather_run_as_at_the_top_level(collective,
                                                                              algo):
    """Started from rank programs on the world communicator, the NVSwitches' and the SHARP
    switches' programs start with the collective: time, outputs and traffic are the
    top-level run's."""
    topo = sc.topology.dgx_h100(N_NODES, sharp=True)
    x = [np.arange(P * 1000, dtype=np.int32) * (r + 1) for r in range(P)]

    def program(comm):
        out = yield comm.collective(collective, x[comm.rank], algorithm="nccl", algo=algo,
                                    collnet=1)
        return out

    started = sc.run_program(topo, program)
    top = sc.simulate(topo, collective, algorithm="nccl", data=x, algo=algo, collnet=1)
    assert top.correct and started.time == top.time
    assert started.link_bytes == top.link_bytes
    for r in range(P):
        np.testing.assert_array_equal(started.outputs[r], top.outputs[r])


@pytest.mark.parametrize("seed", range(12))
def test_sharp_collectives_on_random_sharp_pods(seed):
    """NVLS or CollNet Direct on random pods (2 to 5 nodes of 2 to 4 GPUs, 1 to all nodes
    per leaf, every rate and latency at random): numpy's result, the data-free run's time
    and traffic, and no faster than its busiest link allows. 200 such machines ran
    clean for each before this test kept 12."""
    rng = np.random.default_rng(seed)
    nodes, gpus = int(rng.integers(2, 6)), int(rng.integers(2, 5))
    topo = sharp_pods(nodes, gpus, per_leaf=int(rng.integers(1, nodes + 1)), seed=seed)
    p = topo.nranks
    capacity = {}
    for link in topo.links:
        capacity[(link.u, link.v)] = capacity[(link.v, link.u)] = link.bandwidth
    for collective in ("reduce_scatter", "all_gather", "all_reduce"):
        algo = str(rng.choice(["nvls", "collnet_direct"]))
        channels = int(rng.integers(2, 6))
        count = int(rng.choice([1, 7 * p + 3, int(rng.integers(1, 60000))]))
        if collective == "reduce_scatter":
            count = max(1, count // p) * p
        network = str(rng.choice(["flow", "analytical"]))
        data = [np.random.default_rng(31 * seed + r).integers(-100, 100, count)
                for r in range(p)]
        try:
            res = sc.simulate(topo, collective, algorithm="nccl", data=data, network=network,
                              algo=algo, collnet=1, channels=channels)
        except sc.InvalidInputError as refusal:  # NCCL runs them with a head per GPU only
            assert collective != "all_reduce" and "with a head per GPU only" in str(refusal)
            continue
        assert res.correct, (collective, algo, channels, network)
        free = sc.simulate(topo, collective, algorithm="nccl", nbytes=count * 8,
                           dtype=np.int64, network=network, algo=algo, collnet=1,
                           channels=channels)
        assert free.time == res.time and free.link_bytes == res.link_bytes
        if network == "flow":
            busiest = max(b / capacity[key] for key, b in res.link_bytes.items())
            assert res.time >= busiest * (1 - 1e-12)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("topo", [sc.topology.dgx_a100(2, sharp=True),
                                  sharp_pods(4, 2, per_leaf=2), sharp_pods(3, 3, per_leaf=2)],
                         ids=["dgx_a100(2)", "4x2 two leaves per rail", "3x3 uneven pods"])
def test_collnet_direct_across_nodes_gives_numpys_result(topo, channels):
    p = topo.nranks
    for count in (1000, 40_001 * p):
        data = _inputs(p, count, seed=count)
        res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", data=data,
                          algo="collnet_direct", collnet=1, channels=channels)
        assert res.params["algo"] == "collnet_direct" and res.correct
        for r, block in enumerate(np.array_split(np.sum(data, axis=0), p)):
            np.testing.assert_array_equal(res.outputs[r], block)
        mine = _inputs(p, count // p, seed=count + 1)
        res = sc.simulate(topo, "all_gather", algorithm="nccl", data=mine,
                          algo="collnet_direct", collnet=1, channels=channels)
        assert res.correct
        for out in res.outputs:
            np.testing.assert_array_equal(out, np.concatenate(mine))


def test_collnet_direct_moves_what_its_heads_own():
    """Two DGX A100 (no NVLS: the GPUs scatter and gather over NVLink themselves). A
    reduce_scatter of n bytes: a GPU sends every other local GPU its rail's N blocks,
    (G - 1) N n / p = 7 n / 8 in all, and receives as much; it sends its rail's sums
    through its NIC, N n / p = n / 8, and receives its block, n / 16. An all_gather of m
    bytes: m up the NIC, N m down; each of the N m it passes to the G - 1 others, and
    it takes (G - 1) N m from them."""
    topo = sc.topology.dgx_a100(N_NODES, sharp=True)
    n, m = 1 << 22, 1 << 18
    rs = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=n,
                     algo="collnet_direct", collnet=1)
    ag = sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=m, algo="collnet_direct",
                     collnet=1)
    for r in range(P):
        gpu, switch, nic = f"gpu{r}", f"nvswitch{r // G}", f"nic{r}"
        assert rs.link_bytes[(gpu, switch)] == rs.link_bytes[(switch, gpu)] == \
            (G - 1) * N_NODES * n // P
        assert rs.link_bytes[(gpu, nic)] == N_NODES * n // P
        assert rs.link_bytes[(nic, gpu)] == n // P
        assert ag.link_bytes[(gpu, nic)] == m
        assert ag.link_bytes[(nic, gpu)] == N_NODES * m
        assert ag.link_bytes[(gpu, switch)] == ag.link_bytes[(switch, gpu)] == \
            (G - 1) * N_NODES * m


def test_nccls_prediction_for_collnet_direct_reduce_scatter_and_all_gather():
    """NCCL 2.30.7 (tuning.cc): ppn x the lesser of the channel's bandwidth and 0.9 of
    its NIC's, not converted to an algorithm bandwidth; latency 2 (3.7 + 7 x 0.4) + 31 =
    44 us. On DGX A100 a GPU reaches its NIC at 24 GB/s (NCCL's PCIe Gen4 x16), so 8 x
    21.6 GB/s. 2.26.2: ppn x the Direct graph's bwIntra (48 GB/s, which its search
    raises from 24 as a head's NVLink carries 2 x 48 of its 240) x 0.85 at 8 GPUs per
    node."""
    topo = sc.topology.dgx_a100(N_NODES, sharp=True)
    nic = next(link.bandwidth for link in topo.links if (link.u, link.v) == ("gpu0", "nic0"))
    assert nic == 24e9
    machine = describe(topo, tuple(range(P)))
    for collective in ("reduce_scatter", "all_gather"):
        assert predict(machine, collective, 2**30, "collnet_direct", "Simple", 16) == \
            pytest.approx(44e-6 + 2**30 / (G * 0.9 * nic), rel=1e-12)
        assert predict(machine, collective, 2**30, "collnet_direct", "Simple", 16,
                       "2.26.2") == pytest.approx(44e-6 + 2**30 / (G * 48e9 * 0.85), rel=1e-12)


def test_collnet_direct_reduce_scatter_needs_a_head_per_gpu():
    """Without NVLS NCCL's CollNet heads are one per NIC of its collnet graph, and it
    runs CollNet reduce_scatter and all_gather only with a head per GPU ("AllGather/
    ReduceScatter requires 1:1 GPU:NIC"): 4 NICs for 8 A100 leave them out (all_reduce
    keeps CollNet Direct), and naming it is refused with the reason."""
    topo = sc.topology.dgx_a100(N_NODES, sharp=True, nics_per_node=4)
    machine = describe(topo, tuple(range(P)))
    assert machine.rails == 4
    assert "collnet_direct" not in candidates(machine, "reduce_scatter", collnet=1)
    assert "collnet_direct" in candidates(machine, "all_reduce", collnet=1)
    with pytest.raises(sc.InvalidInputError, match="run all_gather with a head per GPU only, "
                                                   "and its graph has 4 for 8 GPUs a node"):
        sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=1 << 16,
                    algo="collnet_direct", collnet=1)


def test_the_tuner_picks_collnet_direct_for_mid_sizes_on_a100_with_sharp():
    """DGX A100 has no NVLS; with collnet=1 NCCL's model puts CollNet Direct's 44 us and
    172.8 GB/s against the ring's (15 steps, the lesser of NVLink and the node's 8 NICs):
    CollNet Direct at 1 MiB, the ring at 256 MiB, and the ring at every size without
    collnet."""
    topo = sc.topology.dgx_a100(N_NODES, sharp=True)
    for collective, scale in (("reduce_scatter", 1), ("all_gather", P)):
        mid = sc.simulate(topo, collective, algorithm="nccl", nbytes=(1 << 20) // scale,
                          collnet=1)
        large = sc.simulate(topo, collective, algorithm="nccl", nbytes=(1 << 28) // scale,
                            collnet=1)
        off = sc.simulate(topo, collective, algorithm="nccl", nbytes=(1 << 20) // scale)
        assert mid.params["algo"] == "collnet_direct"
        assert large.params["algo"] == "ring" and off.params["algo"] == "ring"


def test_the_rail_plan_cuts_a_rails_blocks_together_as_nccl_does():
    """Two nodes of 2 GPUs, blocks of 3 elements, chunks of 4, 2 channels. Rail 0 is
    ranks 0 and 2 (local GPU 0 of each node): the range [block 0 | block 2] of 6
    elements makes chunk 0 = all of block 0 and the first element of block 2 (channel 0)
    and chunk 1 = the rest of block 2 (channel 1); rail 1 the same with ranks 1 and 3."""
    plan = rail_plan({0: 3, 1: 3, 2: 3, 3: 3}, [[0, 1], [2, 3]], channels=2, chunk=4)
    assert plan == [{0: [[(0, 0, 3), (2, 0, 1)]], 1: [[(1, 0, 3), (3, 0, 1)]]},
                    {0: [[(2, 1, 3)]], 1: [[(3, 1, 3)]]}]
    assert rail_steps(plan[0]) == [(0, 0), (1, 0)]
    # an empty block adds nothing; a rail of empty blocks has no chunk
    assert rail_plan({0: 0, 1: 2, 2: 0, 3: 2}, [[0, 1], [2, 3]], 1, 4) == \
        [{1: [[(1, 0, 2), (3, 0, 2)]]}]


def test_nvls_across_nodes_moves_one_message_per_chunk_and_hop():
    """16 MiB reduce_scatter on two DGX H100 (16 channels): a rail's range is 2 blocks of
    1 MiB, 16 chunks of 128 KiB, one per channel, none spanning two blocks. Pushes: 16
    GPUs x 8 rails x 16 chunks = 2,048; NVSwitch to heads: 2 x 128; heads to SHARP:
    16 x 16; SHARP to heads: 128 (one piece each): 2,688 messages. An all_gather of the
    same output: each head sends 8 pieces up (128), SHARP multicasts 128 chunks, the
    heads push 256 and the NVSwitches multicast 256: 768."""
    topo = sc.topology.dgx_h100(N_NODES, sharp=True)
    rs = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=16 << 20, algo="nvls",
                     collnet=1)
    ag = sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=(16 << 20) // P,
                     algo="nvls", collnet=1)
    assert rs.params["channels"] == ag.params["channels"] == 16
    assert rs.messages == 2048 + 256 + 256 + 128
    assert ag.messages == 128 + 128 + 256 + 256


def test_a_product_through_sharp_is_refused_for_that_reason_alone():
    """With collnet=1 given, the refusal of a product added "CollNet needs collnet=1"."""
    with pytest.raises(sc.InvalidInputError) as refused:
        sc.simulate(sc.topology.dgx_h100(2, sharp=True), "reduce_scatter", algorithm="nccl",
                    nbytes=1 << 20, algo="collnet_direct", collnet=1, op="prod")
    assert "never a product" in str(refused.value)
    assert "CollNet needs collnet=1" not in str(refused.value)


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_a_forced_collnet_without_sharp_switches_says_so_whatever_the_op(op):
    """On nodes joined by plain switches a product's refusal gave only SHARP's ops (and
    "NCCL then runs as without collnet", where the forced run is refused): changing the
    op to a sum was refused again, for the reason not given."""
    with pytest.raises(sc.InvalidInputError) as refused:
        sc.simulate(sc.topology.cluster(4, 1), "all_reduce", algorithm="nccl", nbytes=4096,
                    op=op, algo="collnet_direct", collnet=1)
    said = str(refused.value)
    assert "(CollNet needs nodes joined by switches that reduce, InfiniBand SHARP's: e.g. " \
           "dgx_a100(2, sharp=True))" in said
    assert ("never a product" in said) == (op == "prod")
    assert "without collnet" not in said


@pytest.mark.parametrize("machine, algo, floor", [
    # NVLS: every GPU takes the whole 1 GiB output from the NVSwitch at 370.8 GB/s
    # (its NIC brings only an eighth of it, 2^27 B at 48 GB/s of PCIe: 2796 us)
    (lambda: sc.topology.dgx_h100(2, sharp=True), "nvls", 2**30 / 370.8e9),
    # CollNet Direct: a head takes its rail's two nodes' share through its NIC, 2 x 2^30 /
    # 16 B at the 24 GB/s of PCIe (its NVLink brings 7 x 2^27 B at 240 GB/s: 3914 us)
    (lambda: sc.topology.dgx_a100(2, sharp=True), "collnet_direct", 2**27 / 24e9),
])
def test_all_gather_through_sharp_relays_while_it_sends(machine, algo, floor):
    """NCCL's threads send a GPU's own data to the network and relay what SHARP sends
    back at the same time (all_gather.h). The GPU relayed nothing until its last send
    had left: 1 GiB took 4168.7 us (NVLS; 1.44 x its link floor) and 6177.6 us (CollNet
    Direct; 1.10 x)."""
    res = sc.simulate(machine(), "all_gather", algorithm="nccl", nbytes=2**30 // P,
                      algo=algo, collnet=1)
    assert floor <= res.time <= 1.07 * floor


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_nvls_through_sharp_where_the_nvswitch_links_its_gpus_out_of_rank_order(collective):
    """The NVSwitch's local index h must be the h-th GPU of its node by rank, as the
    GPUs number themselves, whatever order its links were added in: a machine file that
    lists gpu1's NVLink before gpu0's must still give every rank its own block. Exact
    integers: each rank adds its own bit."""
    d = sc.topology.to_dict(sc.topology.dgx_h100(2, sharp=True))
    links = d["links"]
    nv = [i for i, link in enumerate(links) if link["v"] in ("nvswitch0", "nvswitch1")]
    for a in nv[0:8], nv[8:16]:   # each node's GPU-NVSwitch links, last GPU first
        picked = [links[i] for i in a]
        for i, link in zip(a, reversed(picked)):
            links[i] = link
    topo = sc.topology.from_dict(d)
    p, block = 16, 4096
    x = {r: np.arange(p * block, dtype=np.int64) * 65536 + (1 << r) for r in range(p)}
    own = {r: np.arange(block, dtype=np.int64) * 65536 + (1 << r) for r in range(p)}

    def program(comm):
        data = x[comm.rank] if collective == "reduce_scatter" else own[comm.rank]
        return (yield comm.collective(collective, data, algorithm="nccl", algo="nvls",
                                      collnet=1))

    res = sc.run_program(topo, program)
    for r in range(p):
        if collective == "reduce_scatter":
            expected = (np.arange(r * block, (r + 1) * block, dtype=np.int64) * 65536 * p
                        + (1 << p) - 1)
        else:
            expected = np.concatenate([own[m] for m in range(p)])
        np.testing.assert_array_equal(res.outputs[r], expected)
