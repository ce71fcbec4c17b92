"""NVLS across nodes through InfiniBand SHARP switches (``collnet=1``, NCCL_COLLNET_ENABLE).

Expected values are worked out by hand from the topology's figures and NCCL 2.30.7's
src/graph/tuning.cc (NVLS across nodes: latency hwLat[NVLink][NVLS] + hwLat[NET][NVLS],
25 + 18 us; bus bandwidth min(bwIntra x 0.85 x (c - 1)/c x 2, bwInter); disabled unless
collnet is enabled), and from the algorithm's streams: every GPU pushes its whole buffer
into its NVSwitch, owns one block of n / G, sends it to its rail's SHARP switch and back,
and gets the whole result from its NVSwitch's multicast.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_data
from reference import assert_outputs_match

import simcoll as sc
from simcoll.algorithms.nccl.machine import SharpTree, describe, sharp_groups
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.algorithms.nccl.tuner import choose

US = 1e-6
MIB = 1 << 20
PCIE, NDR, NVLINK = 48e9, 50e9, 370.8e9      # dgx_h100's defaults, bytes/s


def test_the_preset_makes_its_switches_reduce():
    topo = sc.topology.dgx_h100(4, sharp=True)
    assert set(topo.in_network) == {f"nvswitch{n}" for n in range(4)} | {
        f"leaf{r}" for r in range(8)} | {"spine"}
    assert not {"leaf0", "spine"} & set(sc.topology.dgx_h100(4).in_network)
    big = sc.topology.dgx_h100(33, sharp=True)            # two leaf groups and a spine
    assert {"spine", "leaf0_0", "leaf7_1"} <= set(big.in_network)
    with pytest.raises(sc.TopologyError, match="sharp='yes'"):
        sc.topology.dgx_h100(2, sharp="yes")


def test_the_tuner_sees_sharp_only_across_nodes_of_a_sharp_fabric():
    assert describe(sc.topology.dgx_h100(2, sharp=True), tuple(range(16))).sharp
    assert not describe(sc.topology.dgx_h100(2), tuple(range(16))).sharp
    assert not describe(sc.topology.dgx_h100(1, sharp=True), tuple(range(8))).sharp
    groups = sharp_groups(sc.topology.dgx_h100(3, sharp=True), tuple(range(24)))
    assert groups == {g: SharpTree({f"leaf{g}": (g, 8 + g, 16 + g)}, None) for g in range(8)}
    # 33 nodes: leaf group 0 holds nodes 0-31, group 1 node 32; the spine joins them.
    big = sharp_groups(sc.topology.dgx_h100(33, sharp=True), tuple(range(264)))
    assert big is not None and big[5] == SharpTree(
        {"leaf5_0": tuple(range(5, 256, 8)), "leaf5_1": (261,)}, "spine")
    saved = sc.topology.from_dict(sc.topology.to_dict(sc.topology.dgx_h100(3, sharp=True)))
    assert sharp_groups(saved, tuple(range(24))) == groups


def test_eight_nodes_with_collnet_pick_nvls_across_nodes_at_1_gib():
    machine = describe(sc.topology.dgx_h100(8, sharp=True), tuple(range(64)))
    inter = 8 * min(PCIE, NDR) / 1e9           # GB/s: 8 rails, each bounded by its PCIe
    assert machine.inter_bw / 1e9 == pytest.approx(inter, rel=1e-12)
    # NCCL's NVLS graph: 8 heads at 40 GB/s inside a node (9 x 40 within a GPU's NVLink),
    # 48 to the network: 8 x min(40 x 0.85 x 7/8 x 2, 48) = 384 GB/s.
    nvls_bus = 8 * min(40 * 0.85 * 7 / 8 * 2, inter / 8)          # = inter, 384
    expected = (25 + 18 + (1 << 30) / (1000 * nvls_bus * 64 / 126)) * US
    pick = choose(machine, "all_reduce", 1 << 30, collnet=1)
    assert (pick.algo, pick.proto, pick.channels) == ("nvls", "Simple", 16)
    assert pick.predicted == pytest.approx(expected, rel=1e-12)
    # NVLS-tree is capped at 45.5 GB/s a channel beyond 2 nodes (8 x 45.5 = 364 GB/s) and
    # takes 2 log2(8) network steps of 20.9 us; without collnet NCCL disables NVLS across
    # nodes.
    tree = predict(machine, "all_reduce", 1 << 30, "nvls_tree", "Simple", 16)
    assert tree == pytest.approx(
        (25 + 2 * 3 * 20.9 + (1 << 30) / (1000 * 364 * 64 / 126)) * US, rel=1e-12)
    assert choose(machine, "all_reduce", 1 << 30).algo == "nvls_tree"
    # NCCL 2.26.2: NVLS takes 8 channels x min(bwIntra, bwInter) = 8 x 40 = 320 GB/s,
    # converted at 5/6.
    old = choose(machine, "all_reduce", 1 << 30, collnet=1, tuner="2.26.2")
    assert (old.algo, old.proto) == ("nvls", "Simple")
    assert old.predicted == pytest.approx(
        (25 + 18 + (1 << 30) / (1000 * 320 * 5 / 6)) * US, rel=1e-12)


def test_two_nodes_keep_nvls_tree_at_large_sizes_and_nvls_is_all_reduce_only():
    machine = describe(sc.topology.dgx_h100(2, sharp=True), tuple(range(16)))
    # On 2 nodes NVLS-tree's network share doubles: min(590.96, 2 x 384) beats NVLS's 384.
    assert choose(machine, "all_reduce", 1 << 30, collnet=1).algo == "nvls_tree"
    for collective in ("reduce_scatter", "all_gather"):
        assert choose(machine, collective, 1 << 30, collnet=1).algo == "ring"
    with pytest.raises(sc.InvalidInputError, match="needs collnet=1 and a SHARP fabric"):
        sc.simulate(sc.topology.dgx_h100(2, sharp=True), "all_reduce", algorithm="nccl",
                    nbytes=MIB, algo="nvls")
    with pytest.raises(sc.InvalidInputError, match="needs collnet=1 and a SHARP fabric"):
        sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl",
                    nbytes=MIB, algo="nvls", collnet=1)


@pytest.mark.parametrize("nodes", [2, 3])
def test_nvls_across_nodes_reduces_right_and_moves_what_the_streams_say(nodes):
    p = 8 * nodes
    count = 16 * 8 * 1000                       # 1000 floats per block per channel
    inputs = make_data(p, count, "float32")
    res = sc.simulate(sc.topology.dgx_h100(nodes, sharp=True), "all_reduce",
                      algorithm="nccl", data=inputs, algo="nvls", collnet=1)
    assert res.correct and res.params["algo"] == "nvls" and res.params["collnet"] == 1
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    for out in res.outputs:
        np.testing.assert_allclose(out, exact, rtol=1e-5, atol=1e-4)
    n = count * 4
    # n into the switch + n/8 back to it + n/8 to the SHARP switch, and the mirror image.
    assert res.bytes_sent.tolist() == [n + n // 4] * p
    assert res.bytes_received.tolist() == [n + n // 4] * p
    for node in range(nodes):
        for g in range(8):
            gpu, nic = f"gpu{8 * node + g}", f"nic{8 * node + g}"
            assert res.link_bytes[(gpu, f"nvswitch{node}")] == n + n // 8
            assert res.link_bytes[(f"nvswitch{node}", gpu)] == n + n // 8
            for link in ((gpu, nic), (nic, gpu), (nic, f"leaf{g}"), (f"leaf{g}", nic)):
                assert res.link_bytes[link] == n // 8


def test_nvls_across_nodes_takes_the_same_time_on_any_number_of_nodes_and_its_bound():
    n = 256 * MIB
    times = [sc.simulate(sc.topology.dgx_h100(nodes, sharp=True), "all_reduce",
                         algorithm="nccl", nbytes=n, algo="nvls", collnet=1).time
             for nodes in (2, 3, 4)]
    assert times[0] == times[1] == times[2]
    # No faster than its latency plus its busiest resource: the NVSwitch reduces 7 n
    # at 1.86 TB/s, more than NVLink's 9n/8 at 370.8 GB/s and the NIC's n/8 at 48 GB/s.
    bound = (25 + 18) * US + max(7 * n / 1.86e12, 9 * n / 8 / NVLINK, n / 8 / PCIE)
    assert bound < times[0] < 1.2 * bound


def test_across_leaf_groups_the_spine_reduces_what_the_leaves_reduced():
    # 3 nodes on 4-port leaves: nodes 0 and 1 under leaf<r>_0, node 2 under leaf<r>_1.
    topo = sc.topology.dgx_h100(3, sharp=True, leaf_radix=4)
    count = 16 * 8 * 500
    inputs = make_data(24, count, "float32")
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo="nvls",
                      collnet=1)
    assert res.correct
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    n = count * 4
    for r in range(8):
        for group, nodes in ((0, (0, 1)), (1, (2,))):
            leaf = f"leaf{r}_{group}"
            # each leaf sends the spine its block once, reduced, and gets it back once
            assert res.link_bytes[(leaf, "spine")] == res.link_bytes[("spine", leaf)] == n // 8
            for node in nodes:
                nic = f"nic{8 * node + r}"
                assert res.link_bytes[(nic, leaf)] == res.link_bytes[(leaf, nic)] == n // 8
    # the extra hop through the spine costs time; the flat fabric does not
    flat = sc.simulate(sc.topology.dgx_h100(3, sharp=True), "all_reduce", algorithm="nccl",
                       nbytes=n, algo="nvls", collnet=1)
    assert res.time > flat.time


def two_rail_machine(shared: bool, plain: bool = False) -> sc.Topology:
    """Two nodes of two GPUs on an in-network NVSwitch each, one NIC per GPU; the NICs of
    rail r on SHARP switch ``sharp<r>`` (or all on ``sharp0`` if ``shared``; rail 1 on
    the plain switch ``core`` if ``plain``), the SHARP switches joined by ``core``.
    Uneven bandwidths and latencies."""
    topo = sc.Topology("two_rails")
    core = topo.add_switch("core")
    sharps = [topo.add_switch(f"sharp{r}", reduce_bandwidth=float("inf"))
              for r in range(1 if shared else 2)]
    for s, sw in enumerate(sharps):
        topo.add_link(sw, core, bandwidth=80e9, latency=(1 + s) * US)
    for node in range(2):
        nvs = topo.add_switch(f"nvs{node}", reduce_bandwidth=500e9)
        for g in range(2):
            gpu = topo.add_gpu(f"g{node}{g}", node=node)
            nic = topo.add_nic(f"n{node}{g}")
            topo.add_link(gpu, nvs, bandwidth=(200 + 50 * g) * 1e9, latency=0.3 * US)
            topo.add_link(gpu, nic, bandwidth=30e9, latency=(1 + node) * US)
            leaf = core if plain and g == 1 else sharps[0 if shared else g]
            topo.add_link(nic, leaf, bandwidth=(20 + 5 * g) * 1e9, latency=2 * US)
    return topo


@pytest.mark.parametrize("shared", [False, True])
def test_nvls_across_nodes_on_a_hand_built_machine(shared):
    topo = two_rail_machine(shared)
    groups = sharp_groups(topo, (0, 1, 2, 3))
    assert groups == {0: SharpTree({"sharp0": (0, 2)}, None),
                      1: SharpTree({"sharp0" if shared else "sharp1": (1, 3)}, None)}
    # NCCL's channels: a ring graph of 2 (one per rail), doubled to 4; with collnet=1
    # half as many again, as CollNet Chain's graph is faster inside a node (2 GPUs on
    # 200 GB/s NVLink) than to the network (NICs of 20 and 25 GB/s): 6; NVLS across nodes
    # runs on at most those (its own 16 on one node).
    count = 6 * 2 * 500
    inputs = make_data(4, count, "float64")
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo="nvls",
                      collnet=1, arch="hopper")
    assert res.params["channels"] == 6
    assert res.correct
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    n = count * 8
    for node in range(2):
        for g in range(2):
            rail = "sharp0" if shared else f"sharp{g}"
            assert res.link_bytes[(f"n{node}{g}", rail)] == n // 2
            assert res.link_bytes[(rail, f"n{node}{g}")] == n // 2
    assert res.link_bytes.get(("sharp0", "core"), 0) == 0   # nothing crosses the core


def test_without_one_sharp_switch_per_rail_nvls_does_not_run_across_nodes():
    topo = two_rail_machine(False, plain=True)   # rail 1 crosses no SHARP switch
    assert sharp_groups(topo, (0, 1, 2, 3)) is None
    with pytest.raises(sc.InvalidInputError, match="needs collnet=1 and a SHARP fabric"):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=MIB, algo="nvls",
                    collnet=1, arch="hopper")


def test_the_sharp_trees_follow_the_machine_when_it_changes():
    topo = two_rail_machine(False)
    assert sharp_groups(topo, (0, 1, 2, 3)) is not None
    generation = topo.generation
    topo.add_link("n01", "n11", bandwidth=10e9)      # rail 1 now meets without its switch
    assert topo.generation != generation
    assert sharp_groups(topo, (0, 1, 2, 3)) is None


def test_collnet_chain_on_more_than_8_gpus_a_node_runs_with_2_26_2s_tuner_only():
    """NCCL 2.26.2's updateCollCostTable leaves out only CollNet Direct above 8 local
    ranks (NCCL_MAX_DIRECT_ARITY + 1); 2.30.7 leaves out Chain there too ("Disable
    CollNet Chain for more than 8 local GPUs"). Two SHARP nodes of 16 GPUs each."""
    from simcoll.algorithms.nccl.machine import describe
    from simcoll.algorithms.nccl.tuner import candidates
    from simcoll.topology.presets.dgx import dgx

    topo = dgx(2, nvlink_bandwidth=370.8e9, pcie_bandwidth=48e9, nic_bandwidth=50e9,
               gpus_per_node=16, sharp=True, nvswitch_reduce_bandwidth=1.86e12)
    machine = describe(topo, tuple(range(32)), "auto")
    old = candidates(machine, "all_reduce", collnet=1, tuner="2.26.2")
    new = candidates(machine, "all_reduce", collnet=1, tuner="2.30.7")
    assert "collnet_chain" in old and "collnet_direct" not in old
    assert "collnet_chain" not in new and "collnet_direct" not in new
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(64) for _ in range(32)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, collnet=1,
                      tuner="2.26.2", algo="collnet_chain")
    assert res.correct and res.params["algo"] == "collnet_chain"


@pytest.mark.parametrize("tuner", ["2.26.2", "2.30.7"])
def test_collnet_chain_runs_on_exactly_8_gpus_a_node_with_either_tuner(tuner):
    # 2.30.7 leaves Chain out above 8 local GPUs only: 8 (NCCL_MAX_DIRECT_ARITY + 1)
    # still runs it, as it does Direct
    from simcoll.algorithms.nccl.machine import describe
    from simcoll.algorithms.nccl.tuner import candidates
    from simcoll.topology.presets.dgx import dgx

    topo = dgx(2, nvlink_bandwidth=370.8e9, pcie_bandwidth=48e9, nic_bandwidth=50e9,
               gpus_per_node=8, sharp=True, nvswitch_reduce_bandwidth=1.86e12)
    machine = describe(topo, tuple(range(16)), "auto")
    found = candidates(machine, "all_reduce", collnet=1, tuner=tuner)
    assert "collnet_chain" in found and "collnet_direct" in found
