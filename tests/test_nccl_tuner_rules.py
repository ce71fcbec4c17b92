"""The rules by which NCCL's tuner switches algorithms on and off, and its corrections for
GPU generations and CPUs, on machines the presets can describe: each expected value from
NCCL's source (2.30.7 at HEAD of NVIDIA/nccl, 2.26.2 at tag v2.26.2-1), worked out by hand
or by a reference model of ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime`` /
``topoGetAlgoInfo`` written apart from simcoll (its figures quoted where they are used)."""

from __future__ import annotations

import dataclasses

import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import Machine, describe
from simcoll.algorithms.nccl.tune_model import (
    collnet_graphs_of,
    comm_channels,
    max_channels,
    nvls_graph_of,
    predict,
)
from simcoll.algorithms.nccl.tuner import candidates, choose

US = 1e-6
MIB = 1 << 20


def test_2_26_2_runs_nvls_reduce_scatter_and_all_gather_on_one_node_only():
    """2.26.2's ``topoGetAlgoInfo`` (src/enqueue.cc:1672) skips NVLS for all_gather and
    reduce_scatter across nodes ("we only support single-node NVLS allgather and
    reducescatter"); 2.30.7 runs it through SHARP with collnet=1. On two DGX H100 with
    SHARP, 2.26.2 then picks CollNet Direct for a 1 MiB reduce_scatter: latency
    2 (3.7 + 7 x 0.4) + 31 = 44 us and 1 MiB at ppn x 48 GB/s x 0.85 (its corrective ratio
    at 8 GPUs a node), on 2 channels: 44 + 1048576 / 326.4e3 = 47.2125 us."""
    topo = sc.topology.dgx_h100(2, sharp=True)
    machine = describe(topo, tuple(range(16)))
    assert "nvls" in candidates(machine, "reduce_scatter", collnet=1, tuner="2.30.7")
    for collective in ("reduce_scatter", "all_gather"):
        assert "nvls" not in candidates(machine, collective, collnet=1, tuner="2.26.2")
    old = choose(machine, "reduce_scatter", MIB, collnet=1, tuner="2.26.2")
    assert (old.algo, old.proto, old.channels) == ("collnet_direct", "Simple", 2)
    assert old.predicted == pytest.approx((44 + MIB / 326.4e3) * US, rel=1e-6)
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=MIB, collnet=1,
                      tuner="2.26.2")
    assert res.params["algo"] == "collnet_direct"
    with pytest.raises(sc.InvalidInputError,
                       match="NCCL 2.26.2 runs NVLS all_gather on one node of at most 32"):
        sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=MIB, collnet=1,
                    tuner="2.26.2", algo="nvls")


def test_nvls_and_collnet_direct_gathers_across_nodes_need_a_head_per_gpu():
    """tuning.cc (2.30.7, 350-369) zeroes NVLS's and CollNet Direct's all_gather and
    reduce_scatter across nodes where a node holds more GPUs than ``collNetHeadsNum``,
    which is the NVLS graph's heads where NVLS is supported (coll_net.cc:1707-1724). Two
    DGX H100 of 2 NICs each: the NVLS graph has one head per NIC, 2 for 8 GPUs, so
    neither runs, and NCCL's ring does (as in 2.26.2, whose CollNet Direct needs
    ``ppn <= collNetHeadsNum`` too); all_reduce keeps both."""
    topo = sc.topology.dgx_h100(2, nics_per_node=2, sharp=True)
    machine = describe(topo, tuple(range(16)))
    for tuner in ("2.30.7", "2.26.2"):
        for collective in ("reduce_scatter", "all_gather"):
            assert candidates(machine, collective, collnet=1, tuner=tuner) == ("ring",)
    assert {"nvls", "collnet_direct"} <= set(candidates(machine, "all_reduce", collnet=1))
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=MIB, collnet=1)
    assert res.params["algo"] == "ring"
    for algo in ("nvls", "collnet_direct"):
        with pytest.raises(sc.InvalidInputError,
                           match="run reduce_scatter with a head per GPU only, and its graph "
                                 "has 2 for 8 GPUs a node"):
            sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=MIB, collnet=1,
                        algo=algo)


def test_no_nvls_gathers_on_more_than_32_gpus_of_a_node():
    """``NCCL_MAX_NVLS_ARITY`` is 32 (src/include/device.h): 2.30.7 skips NVLS for every
    collective but all_reduce where a node holds more GPUs (enqueue.cc:2004-2006), 2.26.2
    where the communicator does. One NVLink domain of 64 GPUs on reducing NVSwitches runs
    its reduce_scatter and all_gather on rings, its all_reduce on NVLS still."""
    topo = sc.topology.dgx(1, gpus_per_node=64, nvlink_bandwidth=450 * sc.GB,
                           pcie_bandwidth=64 * sc.GB, nic_bandwidth=50 * sc.GB,
                           nvswitch_reduce_bandwidth=2e12)
    machine = describe(topo, tuple(range(64)))
    assert machine.nvls
    for tuner in ("2.30.7", "2.26.2"):
        assert candidates(machine, "reduce_scatter", tuner=tuner) == ("ring",)
        assert candidates(machine, "all_gather", tuner=tuner) == ("ring",)
        assert "nvls" in candidates(machine, "all_reduce", tuner=tuner)
    with pytest.raises(sc.InvalidInputError,
                       match="NCCL runs NVLS reduce_scatter on at most 32 GPUs of a node"):
        sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=64 * MIB, algo="nvls")


# treeCorrectionFactor[NCCL_PROTO_SIMPLE] of 2.30.7's tuning.cc, by log2(bytes / 64)
SIMPLE_CORRECTION = (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8,
                     .7, .7, .8, .9, .9, .9)


@pytest.mark.parametrize("log_size", [14, 16, 18, 20, 23])
def test_blackwell_on_x86_corrects_nvls_tree_as_the_tree(log_size):
    """2.30.7's ``ncclTopoGetAlgoTime`` (tuning.cc:643-646) multiplies NVLS-tree
    all_reduce's bandwidth by the tree's correction factor for the size on compute
    capability 10.0 and newer with x86 CPUs. The same machine with ARM CPUs (nothing else
    in NVLS-tree's Simple prediction depends on the CPU) is uncorrected; the latency is
    the time of an empty buffer."""
    nbytes = 64 << log_size
    ranks = tuple(range(16))
    x86 = describe(sc.topology.dgx_h100(2), ranks, "blackwell")
    assert x86.cpu == "intel"
    arm = dataclasses.replace(x86, cpu="arm")
    latency = predict(x86, "all_reduce", 0, "nvls_tree", "Simple", 32)
    corrected = predict(x86, "all_reduce", nbytes, "nvls_tree", "Simple", 32) - latency
    plain = predict(arm, "all_reduce", nbytes, "nvls_tree", "Simple", 32) - latency
    assert corrected == pytest.approx(plain / SIMPLE_CORRECTION[log_size], rel=1e-12)
    hopper = describe(sc.topology.dgx_h100(2), ranks)
    assert predict(hopper, "all_reduce", nbytes, "nvls_tree", "Simple", 16) == predict(
        dataclasses.replace(hopper, cpu="arm"), "all_reduce", nbytes, "nvls_tree", "Simple", 16)


def test_blackwell_nvls_tree_correction_changes_the_choice():
    """A reference model of 2.30.7's tuner (written from tuning.cc and enqueue.cc apart from
    simcoll) puts on dgx_h100(2) with arch="blackwell": at 16 MiB the ring with LL128 at
    173.504 us against NVLS-tree's corrected 175.243; uncorrected, NVLS-tree (142.7 us)
    won. At 4 MiB NVLS-tree's corrected 93.911 us wins: the tree with LL128 took 48.500 us
    + 41.387 us of bytes (89.887) in that model, which counted the balanced tree pattern;
    one NIC per GPU gives the plain one (test_the_plain_tree_pattern_...), whose 0.85 of
    the bus bandwidth makes it 48.500 + 41.387 / 0.85 = 97.190 us."""
    machine = describe(sc.topology.dgx_h100(2), tuple(range(16)), "blackwell")
    expected = {4 * MIB: ("nvls_tree", "Simple", 32, 93.911),
                16 * MIB: ("ring", "LL128", 16, 173.504)}
    for nbytes, (algo, proto, channels, predicted) in expected.items():
        choice = choose(machine, "all_reduce", nbytes)
        assert (choice.algo, choice.proto, choice.channels) == (algo, proto, channels)
        assert choice.predicted == pytest.approx(predicted * US, rel=1e-5)
    assert predict(machine, "all_reduce", 4 * MIB, "tree", "LL128", 16) == \
        pytest.approx((48.500 + 41.387 / 0.85) * US, rel=1e-5)


def test_volta_rings_plateau_at_1_9_times_their_latency():
    """``lat *= comm->minCompCap < 80 ? 1.9 : 1.4`` (tuning.cc, both releases) for
    multi-node ring all_reduce with Simple from 64 bytes per channel and rank. Three sizes
    on dgx_a100(2) as Volta: below the plateau the time is L + n / B; above it 1.9 L +
    n / B; two sizes above give B, the one below L."""
    machine = describe(sc.topology.dgx_a100(2), tuple(range(16)), "volta")

    def ring(nbytes: int) -> float:
        return predict(machine, "all_reduce", nbytes, "ring", "Simple", 16)

    small = 1024  # 1024 / (16 channels x 16 ranks) = 4 < 64 bytes
    per_byte = (ring(2 * MIB) - ring(MIB)) / MIB
    latency = ring(small) - small * per_byte
    assert ring(MIB) - MIB * per_byte == pytest.approx(1.9 * latency, rel=1e-9)
    ampere = dataclasses.replace(machine, arch="ampere")
    per_byte = (predict(ampere, "all_reduce", 2 * MIB, "ring", "Simple", 16)
                - predict(ampere, "all_reduce", MIB, "ring", "Simple", 16)) / MIB
    latency = predict(ampere, "all_reduce", small, "ring", "Simple", 16) - small * per_byte
    assert predict(ampere, "all_reduce", MIB, "ring", "Simple", 16) - MIB * per_byte == \
        pytest.approx(1.4 * latency, rel=1e-9)


def test_collnet_direct_trims_channels_by_its_graphs_heads():
    """``topoGetAlgoInfo`` (enqueue.cc:2073-2083) trims CollNet Direct's channels while
    nBytes < nc x 640 threads x nHeads x threshold (512, halved at 12 = 8 + 4 and at 6 =
    4 + 2 channels), nHeads being the CollNet Direct graph's heads, one per NIC. Two DGX
    A100 with 4 NICs each (4 heads for 8 GPUs) and collnet=1 open 12 channels; 1 MiB:
    down to 8 (threshold 256 from 12), then at 6 the threshold halves to 128, 5 x 640 x 4
    x 128 = 1,638,400 > 1 MiB gives 4, and 3 x 640 x 4 x 128 = 983,040 <= 1 MiB stops at
    3 (with 8 heads, 2). The reference model gives 6 at 4 MiB."""
    topo = sc.topology.dgx_a100(2, nics_per_node=4, sharp=True)
    machine = describe(topo, tuple(range(16)))
    for nbytes, channels in ((MIB, 3), (4 * MIB, 6)):
        choice = choose(machine, "all_reduce", nbytes, collnet=1)
        assert (choice.algo, choice.channels) == ("collnet_direct", channels)


@pytest.mark.parametrize("collective, algo", [("broadcast", "tree"), ("reduce", "nvls"),
                                              ("all_reduce", "pat"),
                                              ("all_gather", "collnet_chain")])
@pytest.mark.parametrize("gpus", [1, 2])
def test_an_algorithm_a_collective_never_runs_is_refused_as_such(collective, algo, gpus):
    """NCCL_ALGO takes every algorithm's name, but NCCL has no broadcast on a tree, no PAT
    all_reduce, ... (``ncclAlgoStr`` against each function's algorithms in enqueue.cc).
    Named alone, such an algorithm was refused with hints about the machine (collnet=1
    for a broadcast, one GPU per node for a PAT all_reduce), and on one rank it ran and
    was reported as run; it is refused as one the collective never runs, on any rank
    count. In a list with one the collective runs, it is passed over."""
    topo = sc.topology.switch(gpus)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^algo='{algo}': NCCL never runs {collective} with it; it runs "
                             rf"{collective} with ring"):
        sc.simulate(topo, collective, algorithm="nccl", nbytes=1 << 16, algo=algo)
    listed = sc.simulate(topo, collective, algorithm="nccl", nbytes=1 << 16,
                         algo=f"{algo},ring")
    assert listed.params["algo"] == "ring"


def test_2_26_2_counts_collnet_heads_on_the_direct_graph():
    """2.26.2's ``ncclCollNetSetup`` takes ``collNetHeadsNum`` from the CollNet Direct
    graph always (coll_net.cc at v2.26.2-1: ``directGraph``), 2.30.7 from the NVLS graph
    where NVLS is supported. Two H100 nodes with 60 GB/s of NVLink and NICs of 100 GB/s:
    the searches give the NVLS graph 8 heads and the Direct graph 4, for 8 GPUs a node;
    so 2.30.7 runs CollNet Direct reduce_scatter and 2.26.2 does not."""
    topo = sc.topology.dgx_h100(2, sharp=True, nvlink_bandwidth=60e9, nic_bandwidth=100e9)
    machine = describe(topo, tuple(range(16)))
    assert nvls_graph_of(machine).channels == 8
    assert collnet_graphs_of(machine)[0].channels == 4
    assert "collnet_direct" in candidates(machine, "reduce_scatter", collnet=1, tuner="2.30.7")
    assert "collnet_direct" not in candidates(machine, "reduce_scatter", collnet=1,
                                              tuner="2.26.2")


def test_on_a_tie_the_tuner_keeps_nccls_first_pair(monkeypatch):
    """NCCL compares algorithms in its enum's order (tree, ring, CollNet, NVLS, NVLS-tree,
    PAT), protocols as LL, LL128, Simple, and keeps only a strictly faster pair: where
    every pair predicts the same time it runs a tree with LL. simcoll walked the ring
    first."""
    from simcoll.algorithms.nccl import tuner

    machine = describe(sc.topology.dgx_h100(2), tuple(range(16)))
    monkeypatch.setattr(tuner, "predict", lambda *args, **kwargs: 1e-3)
    chosen = tuner.choose(machine, "all_reduce", 1 << 20)
    assert (chosen.algo, chosen.proto) == ("tree", "LL")
    chosen = tuner.choose(machine, "all_gather", 1 << 20)
    assert (chosen.algo, chosen.proto) == ("ring", "LL")


# Machines built field by field, so every input of NCCL's formulas is written here;
# expected times are NCCL 2.30.7's tuning.cc formulas worked out by hand.


US = 1e-6
GIB = 1 << 30

# One A100 node: 8 GPUs at 240 GB/s of NVLink, NCCL's graph 12 channels x 20 GB/s.
A100_NODE = Machine(8, 1, "nvlink", 240e9, 0.0, False, "ampere", cpu="amd", channels=24,
                    graph_channels=12, graph_channel_bw=20e9, tree_channel_bw=20e9)
# Two nodes of 2 A100 each, one 24 GB/s NIC per GPU, Intel CPUs; 2 graph channels.
A100_2X2 = Machine(4, 2, "nvlink", 240e9, 48e9, False, "ampere", rails=2, cpu="intel",
                   channels=4, graph_channels=2, graph_channel_bw=24e9, tree_channel_bw=24e9)
# Two DGX A100 (8 graph channels x 24 GB/s, trees 30 GB/s on 2 nodes), AMD CPUs.
A100_2X8 = Machine(16, 2, "nvlink", 240e9, 192e9, False, "ampere", rails=8, cpu="amd",
                   channels=16, graph_channels=8, graph_channel_bw=24e9,
                   tree_channel_bw=30e9)


@pytest.mark.parametrize(("proto", "latency", "bus"), [
    # tree latency: baseLat + 2 ((ppn - 1) x hwLat[NVLINK][TREE] + log2i(1) x net)
    # busBw = min(12 x 20 x 0.92, 12 x perChMaxTreeBw 24.0) = 220.8 GB/s, then
    ("Simple", 8.4 + 2 * 7 * 4.0, min(12 * 20 * 0.92, 12 * 24.0)),
    # LL: min(busBw / 3.8, llMaxBw 87.7 of Ampere on one node)
    ("LL", 6.8 + 2 * 7 * 0.6, min(min(12 * 20 * 0.92, 12 * 24.0) / 3.8, 87.7)),
    # LL128 on one node: min(busBw x 7/9, 12 x perChMaxTreeLL128Bw 20.0)
    ("LL128", 14.0 + 2 * 7 * 1.25, min(min(12 * 20 * 0.92, 12 * 24.0) * 7 / 9, 12 * 20.0)),
])
def test_one_node_tree_bus_bandwidth_below_its_per_channel_caps(proto, latency, bus):
    """Where 0.92 x the graph's bandwidth is under perChMaxTreeBw, NCCL's tree keeps 0.92
    of it; algbw = busBw / 2; no treeCorrectionFactor at 1 GiB (log2(2^30 / 64) = 24 is
    past the table's 23 entries the tree reads)."""
    assert predict(A100_NODE, "all_reduce", GIB, "tree", proto, 24) == \
        pytest.approx((latency + GIB / (1000 * bus * 0.5)) * US, rel=1e-12)


def test_tree_ll128_across_nodes_counts_120_of_128():
    """Across nodes LL128 trees take 120/128 of busBw (7/9 on one node only): two DGX
    A100, busBw = min(8 x 30 x 0.92, 8 x 23.6) = 188.8, x 120/128 = 177, capped at
    8 x perChMaxTreeLL128Bw 20 = 160 GB/s. Latency 14 + 2 (7 x 1.25 + 1 x 8.5)."""
    bus = min(min(8 * 30 * 0.92, 8 * 23.6) * 120 / 128, 8 * 20.0)
    assert bus == 160.0
    assert predict(A100_2X8, "all_reduce", GIB, "tree", "LL128", 16) == \
        pytest.approx((14.0 + 2 * (7 * 1.25 + 8.5) + GIB / (1000 * bus * 0.5)) * US,
                      rel=1e-12)


@pytest.mark.parametrize(("collective", "steps", "inter_steps"), [
    ("all_reduce", 2 * 3, 2 * 1),      # nInterSteps = 2 (nNodes - 1) for all_reduce
    ("reduce_scatter", 3, 1),          # nNodes - 1 for the others
    ("all_gather", 3, 1),
])
def test_rings_of_two_gpus_per_node_charge_ring_network_steps(collective, steps,
                                                               inter_steps):
    """tuning.cc: a ring's latency across nodes is baseLat + (nsteps - nInterSteps) x
    max(intraLat, netOverhead) + nInterSteps x hwLat[NET][RING]; the tree's network step
    only with ppn == 1. LL on 2 x 2 A100, Intel (netOverhead 1 us for LL): intraLat
    max(0.6, 1.0) = 1.0, interLat 2.7. busBw = min(llMaxBw 39.0, 2 x 24 x 0.5) = 24,
    algbw = busBw x nRanks / nsteps."""
    latency = 6.6 + (steps - inter_steps) * 1.0 + inter_steps * 2.7
    algbw = 24.0 * 4 / steps
    assert predict(A100_2X2, collective, GIB, "ring", "LL", 4) == \
        pytest.approx((latency + GIB / (1000 * algbw)) * US, rel=1e-12)


def test_p2p_across_nodes_takes_the_lesser_of_nvlink_and_the_network():
    """The p2p prediction reported for all_to_all: bus = algbw = min(bwIntra, bwInter)
    across nodes (240 against 192 GB/s on two DGX A100); latency baseLat[RING] +
    (nRanks - 1) x hwLat[NVLINK][RING] = 8.4 + 15 x 3.4 us for Simple."""
    assert predict(A100_2X8, "all_to_all", GIB, "p2p", "Simple", 16) == \
        pytest.approx((8.4 + 15 * 3.4 + GIB / (1000 * 192.0)) * US, rel=1e-12)


def test_2_26_2_collnet_direct_gathers_interpolate_the_ratio_by_gpus_per_node():
    """2.26.2's CollNet Direct reduce_scatter / all_gather: ppn x bwIntra x a ratio from
    0.95 at one GPU a node to 0.85 at 8, linear in ppn - 1: at 4 GPUs a node 0.95 - 0.1 x
    3/7. DGX A100 nodes with 4 GPUs each: the Direct graph's bwIntra 48 GB/s (raised to
    2 x its 24 GB/s NICs), bwInter 24. 2.30.7: ppn x min(48, 0.9 x 24). Latency
    2 (3.7 + 3 x 0.4) + 31 = 40.8 us."""
    machine = describe(sc.topology.dgx_a100(2, sharp=True), (0, 1, 2, 3, 8, 9, 10, 11))
    assert machine.ppn == 4
    ratio = 0.95 - 0.1 * 3 / 7
    for collective in ("reduce_scatter", "all_gather"):
        assert predict(machine, collective, GIB, "collnet_direct", "Simple", 16,
                       "2.26.2") == pytest.approx(
            (40.8 + GIB / (1000 * 4 * 48 * ratio)) * US, rel=1e-12)
        assert predict(machine, collective, GIB, "collnet_direct", "Simple", 16) == \
            pytest.approx((40.8 + GIB / (1000 * 4 * 0.9 * 24)) * US, rel=1e-12)


@pytest.mark.parametrize(("nbytes", "factor"), [
    (63, 1.0),              # under 64 bytes NCCL reads no treeCorrectionFactor
    (64, 0.9),              # log2i(64 >> 6) = 0: treeCorrectionFactor[SIMPLE][0] = .9
    (64 << 22, 0.9),        # log2i = 22 < 23: the last entry the tree reads, .9
    (64 << 23, 1.0),        # log2i = 23: past the tree's 23 entries, no correction
])
def test_tree_size_correction_edges(nbytes, factor):
    """``if (a == TREE && coll == AllReduce && logSize < 23) bw *= treeCorrectionFactor
    [p][logSize]`` with ``logSize = log2i(nBytes >> 6)`` for nBytes >= 64. Tree Simple
    on one A100 node: latency 8.4 + 2 x 7 x 4.0 us, algbw = min(220.8, 288) / 2."""
    algbw = min(12 * 20 * 0.92, 12 * 24.0) * 0.5 * factor
    assert predict(A100_NODE, "all_reduce", nbytes, "tree", "Simple", 24) == \
        pytest.approx((8.4 + 2 * 7 * 4.0 + nbytes / (1000 * algbw)) * US, rel=1e-12)


@pytest.mark.parametrize(("nbytes", "plateau"), [
    (64 * 16 * 16 - 1, 1.0),   # nBytes / (nChannels x nRanks) just under 64
    (64 * 16 * 16, 1.4),       # exactly 64: the plateau applies (>=), Ampere's 1.4
])
def test_ring_plateau_starts_at_exactly_64_bytes_per_channel_and_rank(nbytes, plateau):
    """tuning.cc: ``if (a == RING && p == SIMPLE && nNodes > 1 && coll == AllReduce &&
    nBytes / (nChannels * nRanks) >= 64) lat *= minCompCap < 80 ? 1.9 : 1.4``. Two DGX
    A100 (AMD: netOverhead 3 x 2 us for Simple), 16 channels: latency 8.4 + (30 - 2) x
    max(3.4, 6.0) + 2 x 14.0 = 204.4 us; busBw 8 x 24, algbw x 16 / 30."""
    latency = (8.4 + 28 * 6.0 + 2 * 14.0) * plateau
    assert predict(A100_2X8, "all_reduce", nbytes, "ring", "Simple", 16) == \
        pytest.approx((latency + nbytes / (1000 * 8 * 24 * 16 / 30)) * US, rel=1e-12)


def test_blackwell_with_amd_cpus_corrects_nvls_tree_as_with_intel():
    """tuning.cc (2.30.7) corrects NVLS-tree on compute capability 10.0+ with x86 CPUs,
    AMD's as Intel's; ARM's not. At 64 << 12 bytes the factor is .5, so the bandwidth
    term doubles against ARM's. Latency: hwLat[NVLINK][NVLS_TREE] 25 + 2 x log2i(2) x
    hwLat[NET][NVLS_TREE] 20.9 us."""
    nbytes = 64 << 12
    intel = describe(sc.topology.dgx_h100(2), tuple(range(16)), "blackwell")
    amd, arm = (dataclasses.replace(intel, cpu=c) for c in ("amd", "arm"))
    latency = (25 + 2 * 20.9) * US
    plain = predict(arm, "all_reduce", nbytes, "nvls_tree", "Simple", 32) - latency
    for machine in (amd, intel):
        corrected = predict(machine, "all_reduce", nbytes, "nvls_tree", "Simple", 32)
        assert corrected - latency == pytest.approx(plain / 0.5, rel=1e-9)


def test_p2p_latency_is_one_step_to_every_other_peer():
    """One node of 8 A100: baseLat[RING][SIMPLE] 8.4 + 7 x hwLat[NVLINK][RING] 3.4 us;
    bus = algbw = bwIntra 240 GB/s."""
    assert predict(A100_NODE, "all_to_all", GIB, "p2p", "Simple", 24) == \
        pytest.approx((8.4 + 7 * 3.4 + GIB / (1000 * 240.0)) * US, rel=1e-12)


# treeCorrectionFactor of NCCL's tuning.cc (its 23 entries per protocol, LL, LL128, Simple)
TREE_CORRECTION_NCCL = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9,
              .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
               .7, .8, .9, .9),
}
# The one-node A100 tree's bus bandwidth and latency by protocol (worked above).
_TREE_BUS = {"Simple": 220.8, "LL": 220.8 / 3.8, "LL128": 220.8 * 7 / 9}
_TREE_LAT = {"Simple": 8.4 + 2 * 7 * 4.0, "LL": 6.8 + 2 * 7 * 0.6, "LL128": 14.0 + 2 * 7 * 1.25}


@pytest.mark.parametrize("proto", ["LL", "LL128", "Simple"])
@pytest.mark.parametrize("log_size", range(23))
def test_tree_correction_factor_at_every_size(proto, log_size):
    nbytes = 64 << log_size
    algbw = _TREE_BUS[proto] * 0.5 * TREE_CORRECTION_NCCL[proto][log_size]
    assert predict(A100_NODE, "all_reduce", nbytes, "tree", proto, 24) == \
        pytest.approx((_TREE_LAT[proto] + nbytes / (1000 * algbw)) * US, rel=1e-12)


def test_hopper_ring_ll128_beyond_two_nodes_caps_at_36_7_per_channel():
    """perChMaxRingLL128Bws[HOPPER][2] = 36.7: four DGX H100, 8 graph channels x 48 GB/s:
    min(384 x 0.92, 8 x 36.7) = 293.6 GB/s, algbw x 32 / 62. Latency: 14 + (62 - 6) x
    max(hwLat[NVLINK][RING][LL128] 1.9, netOverhead 1.0) + 6 x hwLat[NET][RING][LL128] 4.0."""
    machine = Machine(32, 4, "nvlink", 370.8e9, 384e9, True, "hopper", rails=8,
                      cpu="intel", channels=16, graph_channels=8, graph_channel_bw=48e9,
                      tree_channel_bw=48e9)
    bus = min(8 * 48 * 0.92, 8 * 36.7)
    assert predict(machine, "all_reduce", GIB, "ring", "LL128", 16) == pytest.approx(
        (14 + 56 * 1.9 + 6 * 4.0 + GIB / (1000 * bus * 32 / 62)) * US, rel=1e-12)


def test_the_plain_tree_pattern_on_hopper_nodes_with_a_nic_per_gpu():
    """NCCL's tree search tries the balanced tree first, whose channels have their first
    two GPUs reach one NIC (search.cc: ``backToNet`` 0, then ``nextBackToNet`` 1, the
    same NIC) at the nearest path type (PIX); with one NIC per GPU none does, and from
    Hopper on (``ccMin >= 90``) the search takes the plain tree
    (``NCCL_TOPO_PATTERN_TREE``) before any farther path, so the tuner counts 0.85 of
    the tree's bus bandwidth (tuning.cc). Two GPUs per NIC (nics_per_node=4: a PCIe
    switch holds two GPUs and their NIC) keep the balanced tree; so do Ampere (which
    raises the path type instead) and one node (no network). On dgx_h100(2) at 512 KiB
    NCCL 2.26.2's choice then moves from the tree with LL128 to NVLS-tree, as nccl-tests
    #309's table, measured with 2.26.2, times it (-28% with the tree, -7% with
    NVLS-tree); 2.30.7's, whose NVLS-tree pays more network latency, stays a tree."""
    for topo, plain in ((sc.topology.dgx_h100(2), True), (sc.topology.dgx_h100(8), True),
                        (sc.topology.dgx_h100(2, nics_per_node=4), False),
                        (sc.topology.dgx_a100(2), False), (sc.topology.dgx_h100(1), False)):
        assert describe(topo, tuple(range(topo.nranks))).plain_tree is plain, topo.name
    machine = describe(sc.topology.dgx_h100(2), tuple(range(16)))
    balanced = dataclasses.replace(machine, plain_tree=False)
    def moved(m: Machine, proto: str) -> float:   # 1 GiB more, past the size corrections
        return (predict(m, "all_reduce", 2 << 30, "tree", proto, 16)
                - predict(m, "all_reduce", 1 << 30, "tree", proto, 16))

    for proto in ("LL", "LL128", "Simple"):
        assert moved(machine, proto) == pytest.approx(moved(balanced, proto) / 0.85,
                                                      rel=1e-12)
    assert [choose(m, "all_reduce", 512 * 1024, tuner=tuner).algo
            for tuner in ("2.26.2", "2.30.7") for m in (balanced, machine)] == \
        ["tree", "nvls_tree", "tree", "tree"]


def _hopper_nodes(layout: list[str], nodes: int = 2) -> sc.Topology:
    """Nodes of H100s on an NVSwitch, each GPU on a PCIe switch under the node's CPU:
    'own' puts a NIC of its own on that switch, 'sw:k' a switch k shared with the GPUs
    of that label and one NIC, 'far' no NIC; the NICs join one network switch."""
    topo = sc.Topology("hopper nodes")
    core = topo.add_switch("core")
    for n in range(nodes):
        nvswitch = topo.add_switch(f"nvswitch{n}", reduce_bandwidth=2e12)
        cpu = topo.add_host(f"cpu{n}")
        shared: dict[str, str] = {}
        for i, kind in enumerate(layout):
            gpu = topo.add_gpu(node=n)
            topo.add_link(gpu, nvswitch, bandwidth=450e9, kind="nvlink")
            if kind in shared:
                topo.add_link(gpu, shared[kind], bandwidth=64e9, kind="pcie")
                continue
            pcie = topo.add_switch(f"pcie{n}_{i}")
            topo.add_link(pcie, cpu, bandwidth=64e9, kind="pcie")
            topo.add_link(gpu, pcie, bandwidth=64e9, kind="pcie")
            if kind != "far":
                nic = topo.add_nic()
                topo.add_link(nic, pcie, bandwidth=64e9, kind="pcie")
                topo.add_link(nic, core, bandwidth=50e9, latency=2e-6, kind="ib")
                if kind.startswith("sw:"):
                    shared[kind] = pcie
    return topo


@pytest.mark.parametrize("layout, plain", [
    (["own"] * 8, True),                                  # a NIC per GPU
    ([f"sw:{i // 2}" for i in range(8)], False),          # two GPUs per NIC
    (["sw:0", "sw:0"] + ["own"] * 6, True),               # only GPUs 0 and 1 share one
    (["own"] * 4 + ["far"] * 4, True),   # 4 - 7 reach the NICs through the CPU only
])
def test_the_plain_tree_pattern_counts_the_nics_at_the_nodes_best_reach(layout, plain):
    """The balanced tree must find as many channels as the ring, each with its first two
    GPUs on one NIC at the node's best path type: a NIC of one GPU's own (GPUs 2 - 7
    below, or GPUs 0 - 3 where the others reach them only through the CPU) leaves it
    short, and Hopper takes the plain tree."""
    topo = _hopper_nodes(layout)
    assert describe(topo, tuple(range(16)), "hopper").plain_tree is plain


def test_nics_out_of_reach_keep_the_balanced_tree():
    """A node whose GPUs all reach its NIC only far (past the NIC search's reach) gives no
    GPU a NIC of its own: every GPU meets the NIC alike, the balanced tree's first two
    GPUs share it, and no 0.85 is counted."""
    topo = sc.Topology("far NIC")
    core = topo.add_switch("core")
    for n in range(2):
        nvswitch = topo.add_switch(f"nvswitch{n}", reduce_bandwidth=2e12)
        chain = [topo.add_host(f"cpu{n}_{k}") for k in range(4)]
        for a, b in zip(chain, chain[1:]):
            topo.add_link(a, b, bandwidth=64e9, kind="pcie")
        for _ in range(4):
            gpu = topo.add_gpu(node=n)
            topo.add_link(gpu, nvswitch, bandwidth=450e9, kind="nvlink")
            topo.add_link(gpu, chain[0], bandwidth=64e9, kind="pcie")
        nic = topo.add_nic()
        topo.add_link(nic, chain[-1], bandwidth=64e9, kind="pcie")
        topo.add_link(nic, core, bandwidth=50e9, latency=2e-6, kind="ib")
    assert not describe(topo, tuple(range(8)), "hopper").plain_tree


def test_the_communicators_channel_count_leaves_nvls_alone_but_across_nodes():
    """channels= is NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS: the communicator's count.
    NCCL 2.30.7 runs NVLS on one node and NVLS-tree on comm->nvlsChannels (16 on Hopper,
    nvls_channels= as NCCL_NVLS_NCHANNELS), NVLS across nodes on min(nvlsChannels,
    nChannels) (topoGetAlgoInfo, src/enqueue.cc); rings keep the count given."""
    one, two = describe(sc.topology.dgx_h100(1), tuple(range(8))), \
        describe(sc.topology.dgx_h100(2, sharp=True), tuple(range(16)))
    size = 256 << 20
    assert choose(one, "all_reduce", size, algo="nvls", channels=4).channels == 16
    assert choose(one, "all_reduce", size, algo="nvls", channels=4,
                  nvls_channels=8).channels == 8
    assert choose(one, "all_reduce", size, algo="ring", channels=4,
                  nvls_channels=8).channels == 4
    assert choose(two, "all_reduce", size, algo="nvls_tree", channels=4).channels == 16
    assert choose(two, "all_reduce", size, algo="nvls", collnet=1, channels=4).channels == 4
    assert choose(two, "all_reduce", size, algo="nvls", collnet=1,
                  channels=32).channels == 16
    assert choose(two, "all_reduce", size, algo="nvls", collnet=1, channels=32,
                  nvls_channels=24).channels == 24
    # 2.26.2 takes NVLS's own count across nodes too
    assert choose(two, "all_reduce", size, algo="nvls", collnet=1, channels=4,
                  tuner="2.26.2").channels == 16
    with pytest.raises(sc.InvalidInputError, match="nvls_channels=65 is not accepted"):
        choose(one, "all_reduce", size, nvls_channels=65)
    # a run: the pair's count leaves one node's NVLS as it was
    topo = sc.topology.dgx_h100(1)
    own = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size, algo="nvls")
    pinned = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size, algo="nvls",
                         channels=4)
    fewer = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size, algo="nvls",
                        nvls_channels=4)
    assert (pinned.time, pinned.params["channels"]) == (own.time, 16)
    assert fewer.params["channels"] == 4 and fewer.time != own.time


def _two_nodes():
    return describe(sc.topology.dgx_h100(2, sharp=True), tuple(range(16)))


def test_nvls_across_nodes_caps_a_given_nvls_count_at_the_communicators():
    """NVLS across nodes runs on min(nvlsChannels, nChannels) (topoGetAlgoInfo, enqueue.cc
    2.30.7) even where NCCL_NVLS_NCHANNELS sets nvlsChannels: min(8, 4) = 4."""
    two = _two_nodes()
    assert max_channels(two, "nvls", comm=4, nvls=8) == 4
    assert choose(two, "all_reduce", 256 << 20, algo="nvls", collnet=1, channels=4,
                  nvls_channels=8).channels == 4


def test_a_given_communicator_count_is_what_rings_and_trees_run_on():
    """max_channels' documented ``comm`` (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS):
    rings and trees run on comm->nChannels, the count given (3, not the searched 16)."""
    two = _two_nodes()
    assert comm_channels(two) != 3
    assert max_channels(two, "ring", comm=3) == 3
    assert max_channels(two, "tree", comm=3) == 3
