"""NCCL on hand-built machines the presets never make: nodes of one GPU next to nodes of
several, nodes of different sizes, and an in-network device next to the NVSwitch. Each
case crashed (an IndexError, a ValueError) before 2026-12-04; found by running every
collective on random machines."""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.tuner import candidates


def nvls_nodes(sizes: tuple[int, ...], sharp: bool = False) -> sc.Topology:
    """Nodes of ``sizes`` GPUs, each on an NVLink SHARP switch (200 GB/s per GPU), each
    GPU with a 50 GB/s NIC on one network switch (a SHARP switch with ``sharp``)."""
    topo = sc.Topology(f"nodes {sizes}")
    core = topo.add_switch("core", reduce_bandwidth=1e12 if sharp else None)
    for node, size in enumerate(sizes):
        nvswitch = topo.add_switch(f"nvswitch{node}", reduce_bandwidth=2e12)
        for _ in range(size):
            gpu = topo.add_gpu(node=node)
            nic = topo.add_nic()
            topo.add_link(gpu, nvswitch, bandwidth=200e9, latency=1e-6, kind="nvlink")
            topo.add_link(gpu, nic, bandwidth=60e9, latency=1e-7, kind="pcie")
            topo.add_link(nic, core, bandwidth=50e9, latency=2e-6, kind="ib")
    return topo


def _machine(topo):
    return describe(topo, tuple(range(topo.nranks)))


@pytest.mark.parametrize(("sizes", "reason"), [
    ((1, 3), "NCCL runs no NVLS where a node holds one GPU"),
    ((4, 2), "simcoll runs NVLS only on nodes of equal GPU counts"),
])
def test_nvls_is_left_out_where_a_node_is_alone_or_the_nodes_differ(sizes, reason):
    """NCCL 2.30.7: ``ncclNvlsInit`` leaves NVLS off on a node of one GPU, so that node's
    NVLS graph has no channel, and every rank keeps the fewest channels any rank found
    (init.cc): none, NVLS off everywhere. With nodes of different sizes NCCL gives NVLS as
    many heads as the smallest node has GPUs, which simcoll's NVLS-tree (one head per
    local GPU, paired across nodes) does not model: the tuner leaves it out, and a run
    that names it is refused with the reason, where it raised an IndexError before."""
    topo = nvls_nodes(sizes)
    machine = _machine(topo)
    assert machine.nvls
    assert "nvls_tree" not in candidates(machine, "all_reduce")
    assert candidates(_machine(nvls_nodes((2, 2))), "all_reduce") == (
        "ring", "tree", "nvls_tree")
    with pytest.raises(sc.InvalidInputError, match=reason):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20, algo="nvls_tree")
    data = [np.arange(12, dtype=np.int64) * (r + 1) for r in range(topo.nranks)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data)
    assert res.correct and res.params["algo"] in ("ring", "tree")
    np.testing.assert_array_equal(res.outputs[0], sum(data))


def node_with_a_reducing_nic(nic_first: bool) -> tuple[sc.Topology, list[str]]:
    """4 GPUs on a reducing NVSwitch (200 GB/s each) and a reducing NIC on GPU 0, the
    NIC added before the NVSwitch or after it (the first in-network device a GPU is
    linked to reduces its data)."""
    topo = sc.Topology("NVLS node with a reducing NIC")
    if nic_first:
        topo.add_nic("nic", reduce_bandwidth=1e12)
    topo.add_switch("nvswitch", reduce_bandwidth=2e12)
    if not nic_first:
        topo.add_nic("nic", reduce_bandwidth=1e12)
    gpus = [topo.add_gpu() for _ in range(4)]
    for gpu in gpus:
        topo.add_link(gpu, "nvswitch", bandwidth=200e9, latency=1e-6, kind="nvlink")
    topo.add_link(gpus[0], "nic", bandwidth=60e9, latency=1e-7, kind="pcie")
    return topo, gpus


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_nvls_inside_a_node_leaves_a_reducing_nic_alone(collective):
    """One node of 4 GPUs on an NVLS switch, a NIC on GPU 0 that can reduce, and a
    SHARP switch behind the NIC: three in-network devices. The NVSwitch's reduce_scatter /
    all_gather program ran on every in-network device: on one linked to no GPU it raised
    a ValueError (max() of nothing; found on a random machine), and on this NIC it waited
    for slices GPU 0 sends to the NVSwitch, a deadlock. Now only the device that is the
    GPUs' NVLS switch runs it: the result is numpy's, and only the NVLink links carry
    bytes, as NVLS moves them."""
    topo, gpus = node_with_a_reducing_nic(nic_first=False)
    topo.add_switch("sharp", reduce_bandwidth=1e12)  # linked to no GPU
    topo.add_link("nic", "sharp", bandwidth=50e9, latency=1e-6, kind="ib")
    p, count = 4, 4 * 6
    data = [np.arange(count, dtype=np.int32) + 1000 * r for r in range(p)]
    res = sc.simulate(topo, collective, algorithm="nccl", data=data, algo="nvls")
    assert res.correct and res.params["algo"] == "nvls"
    for r in range(p):
        expected = (sum(data)[r * 6:(r + 1) * 6] if collective == "reduce_scatter"
                    else np.concatenate(data))
        np.testing.assert_array_equal(res.outputs[r], expected)
    # NVLS traffic, Simple (no framing): a reduce_scatter GPU pushes its 96 bytes and
    # gets its reduced 24 back; an all_gather GPU pushes its 96 and gets all 4 parts.
    up, down = (96, 24) if collective == "reduce_scatter" else (96, 384)
    expected_links = {(gpus[0], "nic"): 0, ("nic", gpus[0]): 0, ("nic", "sharp"): 0,
                      ("sharp", "nic"): 0}
    for gpu in gpus:
        expected_links[(gpu, "nvswitch")] = up
        expected_links[("nvswitch", gpu)] = down
    assert res.link_bytes == expected_links


def test_nvls_needs_one_switch_for_the_gpus_of_a_node():
    """A reducing NIC added before the NVSwitch and linked to GPU 0 is the first
    in-network device GPU 0 finds, so it would be GPU 0's NVLS switch and the NVSwitch
    the other three's: no switch would see all four GPUs' data. NCCL needs one NVSwitch
    for the node; the tuner no longer counts this node as NVLS-capable, and a run naming
    NVLS is refused."""
    topo, _ = node_with_a_reducing_nic(nic_first=True)
    assert not _machine(topo).nvls
    with pytest.raises(sc.InvalidInputError,
                       match="NVLS needs the GPUs of each node on one in-network NVSwitch"):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20, algo="nvls")
    # One NVSwitch for the node, the NIC added after it: NVLS again.
    assert _machine(node_with_a_reducing_nic(nic_first=False)[0]).nvls


def test_collnet_on_nodes_of_different_sizes_is_refused_with_the_reason():
    """SHARP trees pair local GPU g of every node (simcoll's ``sharp_groups``), so nodes of
    2 and 4 GPUs on SHARP switches get no CollNet; the refusal names the condition."""
    topo = nvls_nodes((2, 4), sharp=True)
    with pytest.raises(sc.InvalidInputError, match="nodes of equal GPU counts"):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20,
                    algo="collnet_direct", collnet=1)
    same = sc.simulate(nvls_nodes((2, 2), sharp=True), "all_reduce", algorithm="nccl",
                       nbytes=1 << 20, algo="collnet_direct", collnet=1)
    assert same.params["algo"] == "collnet_direct"


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather"])
def test_nvls_on_one_gpu_returns_at_once(collective):
    """One GPU on an NVLS switch, NVLS named: the GPU has nothing to move and returns its
    buffer, but the switch's program still waited for its slices: a deadlock. Now the
    switch runs nothing: time 0, no byte on the link, the input back."""
    topo = sc.Topology("one GPU")
    gpu = topo.add_gpu()
    nvswitch = topo.add_switch("nvswitch", reduce_bandwidth=1e12)
    topo.add_link(gpu, nvswitch, bandwidth=100e9, latency=1e-6, kind="nvlink")
    data = [np.arange(6, dtype=np.float32)]
    res = sc.simulate(topo, collective, algorithm="nccl", data=data, algo="nvls")
    assert res.correct and res.time == 0
    assert set(res.link_bytes.values()) == {0}
    np.testing.assert_array_equal(res.outputs[0], data[0])


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather",
                                        "broadcast", "reduce", "all_to_all"])
@pytest.mark.parametrize("preset", ["dgx_h100(1)", "dgx_h100(2)"])
def test_an_empty_nccl_collective_is_discarded(collective, preset):
    """NCCL 2.30.7 discards a collective of 0 elements before planning it ("Empty
    collectives can be discarded", ``taskAppend`` in src/enqueue.cc): no kernel, no
    byte. It took the protocol's base latency here (20.6 us for an all_reduce on one DGX
    H100, and NVLS's switch programs ran); now it takes no time and moves nothing, and
    its bandwidths are 0, as nccl-tests prints them for 0 bytes."""
    nodes = int(preset[-2])
    topo = sc.topology.dgx_h100(nodes)
    kwargs = {"root": 3} if sc.COLLECTIVES[collective].rooted else {}
    nvls = "nvls" if nodes == 1 else "nvls_tree"
    for algo in ("auto", nvls) if collective == "all_reduce" else ("auto",):
        res = sc.simulate(topo, collective, algorithm="nccl",
                          data=[np.zeros(0, np.float32)] * topo.nranks, algo=algo, **kwargs)
        assert res.correct and res.time == 0 and (res.algbw, res.busbw) == (0, 0)
        assert res.bytes_sent.sum() == 0 and set(res.link_bytes.values()) == {0}
    one = sc.simulate(topo, collective, algorithm="nccl", nbytes=4, **kwargs)
    assert one.time > 0
    # The cost model agrees: nothing for nothing, NCCL's launch and steps for 4 bytes.
    assert sc.cost.predict(collective, "nccl", p=topo.nranks, nbytes=0, alpha=1e-6,
                           beta=1e-10, **kwargs) == 0
    assert sc.cost.predict(collective, "nccl", p=topo.nranks, nbytes=4, alpha=1e-6,
                           beta=1e-10, **kwargs) > 0
