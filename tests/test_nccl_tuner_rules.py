"""The rules by which NCCL's tuner switches algorithms on and off, and its corrections for
GPU generations and CPUs, on machines the presets can describe: each expected value from
NCCL's source (2.30.7 at HEAD of NVIDIA/nccl, 2.26.2 at tag v2.26.2-1), worked out by hand
or by a reference model of ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime`` /
``topoGetAlgoInfo`` written apart from simcoll (its figures quoted where they are used)."""

from __future__ import annotations

import dataclasses

import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.tune_model import collnet_graphs_of, nvls_graph_of, predict
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
    simcoll) puts on dgx_h100(2) with arch="blackwell": at 4 MiB the tree with LL128 at
    89.887 us against NVLS-tree's corrected 93.911; at 16 MiB the ring with LL128 at
    173.504 us against 175.243. Uncorrected, NVLS-tree (85.8 and 142.7 us) won both."""
    machine = describe(sc.topology.dgx_h100(2), tuple(range(16)), "blackwell")
    expected = {4 * MIB: ("tree", 89.887), 16 * MIB: ("ring", 173.504)}
    for nbytes, (algo, predicted) in expected.items():
        choice = choose(machine, "all_reduce", nbytes)
        assert (choice.algo, choice.proto, choice.channels) == (algo, "LL128", 16)
        assert choice.predicted == pytest.approx(predicted * US, rel=1e-5)
    assert predict(machine, "all_reduce", 4 * MIB, "nvls_tree", "Simple", 32) == \
        pytest.approx(93.911 * US, rel=1e-5)


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
