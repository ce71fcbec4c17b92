"""NCCL on hand-built machines the presets never make: nodes of one GPU next to nodes of
several, nodes of different sizes, and an in-network device next to the NVSwitch. Each
case crashed (an IndexError, a ValueError) before 2026-12-04; found by running every
collective on random machines."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from machines import random_nodes

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.algorithms.nccl.tuner import candidates, choose


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


def test_nvls_is_left_out_where_a_node_holds_one_gpu():
    """NCCL 2.30.7: ``ncclNvlsInit`` leaves NVLS off on a node of one GPU, so that node's
    NVLS graph has no channel, and every rank keeps the fewest channels any rank found
    (init.cc): none, NVLS off everywhere. The tuner leaves it out, and a run that names
    it is refused with the reason, where it raised an IndexError before."""
    topo = nvls_nodes((1, 3))
    machine = _machine(topo)
    assert machine.nvls
    assert "nvls_tree" not in candidates(machine, "all_reduce")
    assert candidates(_machine(nvls_nodes((2, 2))), "all_reduce") == (
        "ring", "tree", "nvls_tree")
    with pytest.raises(sc.InvalidInputError,
                       match="NCCL runs no NVLS where a node holds one GPU"):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20, algo="nvls_tree")
    data = [np.arange(12, dtype=np.int64) * (r + 1) for r in range(topo.nranks)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data)
    assert res.correct and res.params["algo"] in ("ring", "tree")
    np.testing.assert_array_equal(res.outputs[0], sum(data))


def test_nvls_tree_on_nodes_of_different_sizes_has_the_smallest_nodes_count_of_heads():
    """Nodes of 4 and 2 GPUs: NCCL keeps as many NVLS heads as the smallest node has GPUs
    (2; init.cc cuts every rank's NVLS graph to the fewest channels, connect.cc takes each
    channel's first GPU as a head), and GPUs that head nothing only push and take results
    back (``headRank == -1``, src/device/all_reduce.h). By hand, n bytes over 16 channels
    and 2 heads: every GPU pushes n into its NVSwitch and gets n multicast back; a head
    also gets its block from the switch and hands it back, n / 2 each way; a head's NIC
    carries n / 2 each way (in each channel one node's head sends its block up the tree
    of two nodes, the other's sends it down, and the root alternates with the channel),
    and the NICs of GPUs 2 and 3 carry nothing. Before 2026-12-04 the tuner left NVLS out
    on such nodes and a run that named it was refused."""
    topo = nvls_nodes((4, 2))
    assert "nvls_tree" in candidates(_machine(topo), "all_reduce")
    n = 1 << 20
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="nvls_tree")
    assert res.params["algo"] == "nvls_tree" and res.params["channels"] == 16
    heads = {"gpu0", "gpu1", "gpu4", "gpu5"}
    for r, gpu in enumerate(topo.gpus):
        switch = f"nvswitch{0 if r < 4 else 1}"
        own = n // 2 if gpu in heads else 0
        assert res.link_bytes[(gpu, switch)] == n + own
        assert res.link_bytes[(switch, gpu)] == n + own
        assert res.link_bytes[(gpu, f"nic{r}")] == own
        assert res.link_bytes[(f"nic{r}", gpu)] == own
    data = [np.random.default_rng(r).integers(-50, 50, 5000) for r in range(topo.nranks)]
    checked = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, algo="nvls_tree")
    assert checked.correct
    for out in checked.outputs:
        np.testing.assert_array_equal(out, np.sum(data, axis=0))
    # Three nodes, the smallest last, three channels: the heads are GPUs 0 and 1 of each.
    odd = nvls_nodes((3, 5, 2))
    data = [np.random.default_rng(r).integers(-50, 50, 999) for r in range(odd.nranks)]
    res = sc.simulate(odd, "all_reduce", algorithm="nccl", data=data, algo="nvls_tree",
                      channels=3)
    assert res.correct
    np.testing.assert_array_equal(res.outputs[7], np.sum(data, axis=0))
    idle = [f"gpu{r}" for r in (2, 5, 6, 7)]  # neither of the first two of their node
    assert all(res.link_bytes[(gpu, f"nic{gpu[3:]}")] == 0 for gpu in idle)


def test_the_tuner_counts_only_the_nvls_heads_network_on_nodes_of_different_sizes():
    """Nodes of 4, 4 and 2 GPUs, each GPU with its own 50 GB/s NIC: a node reaches the
    next at 4 x 50 GB/s, its 2 NVLS heads at 2 x 50 GB/s. NCCL's NVLS graph has a head
    per NIC of the smallest node (2), each at the fastest speed of Hopper's array within
    its NIC: 48, and NCCL 2.30.7's NVLS-tree bus bandwidth is 2 channels x the least of
    48 x 0.85 x 1/2 x 2 = 40.8 (NVLS), 48 (the network) and 45.5 GB/s: 81.6 GB/s. Were
    the heads' NICs 20 GB/s each, the graph would run at 20: 2 x 20 x 0.85 = 34 GB/s,
    and over 10 ranks an all_reduce of 1 GB (at bus x 10 / 18) takes 18/10 x (1/34 -
    1/81.6) ns per byte more; the other GPUs' NICs do not count."""
    machine = _machine(nvls_nodes((4, 4, 2)))
    assert machine.inter_bw == 4 * 50e9
    assert machine.heads_inter_bw == 2 * 50e9
    assert machine.smallest_node == 2
    slow_heads = dataclasses.replace(machine, heads_inter_bw=2 * 20e9)
    slower = predict(slow_heads, "all_reduce", 10**9, "nvls_tree", "Simple", 16, "2.30.7") - \
        predict(machine, "all_reduce", 10**9, "nvls_tree", "Simple", 16, "2.30.7")
    assert slower == pytest.approx(10**9 * 18 / 10 * (1 / 34e9 - 1 / 81.6e9), rel=1e-12)
    every_nic = dataclasses.replace(slow_heads, inter_bw=4 * 20e9, heads_inter_bw=None)
    assert predict(every_nic, "all_reduce", 10**9, "nvls_tree", "Simple", 16, "2.30.7") == \
        predict(slow_heads, "all_reduce", 10**9, "nvls_tree", "Simple", 16, "2.30.7")
    even = _machine(nvls_nodes((4, 4)))
    assert even.heads_inter_bw == even.inter_bw == 4 * 50e9
    assert even.smallest_node == 4


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


@pytest.mark.parametrize("algo", ["nvls", "nvls_tree"])
def test_nvls_is_refused_where_one_switch_serves_two_nodes(algo):
    """Two nodes of 2 GPUs on one reducing switch: the refusal of NVLS said NVLS-tree
    could run, and NVLS-tree deadlocked (the switch reduced over all four GPUs and sent
    blocks to node 0's owners only). NCCL's NVLS has one NVLink domain per node; both
    are refused, saying why, and a ring runs."""
    topo = sc.Topology("two nodes, one switch")
    gpus = [topo.add_gpu(node=i // 2) for i in range(4)]
    switch = topo.add_switch("sw", reduce_bandwidth=1e12)
    for gpu in gpus:
        topo.add_link(gpu, switch, bandwidth=100e9, kind="nvlink")
    assert not _machine(topo).nvls
    with pytest.raises(sc.InvalidInputError, match="NVLS needs the GPUs of each node on one "
                                                   "in-network NVSwitch of their own; here "
                                                   "'sw' serves two nodes, those of ranks 0 "
                                                   "and 2"):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=4096, algo=algo)
    data = [np.arange(1024, dtype=np.float32) * (r + 1) for r in range(4)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data)
    assert res.correct and not res.params["algo"].startswith("nvls")


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


def nic_nodes(where: str) -> sc.Topology:
    """Two nodes of 2 GPUs on NVLink with one 50 GB/s NIC each, the NIC on the node's
    host (``where="host"``: GPU -> CPU -> NIC, NCCL's PHB), on a CPU's root complex as
    the PCIe presets build it (``"cpu"``: a switch linked to host memory, PHB too) or on
    the node's second GPU (``"gpu"``: the first GPU reaches it over NVLink through the
    second, NCCL's PXN)."""
    topo = sc.Topology(f"nic on {where}")
    core = topo.add_switch("core")
    for node in range(2):
        nvswitch = topo.add_switch(f"nvswitch{node}")
        gpus = [topo.add_gpu(node=node) for _ in range(2)]
        nic = topo.add_nic()
        for gpu in gpus:
            topo.add_link(gpu, nvswitch, bandwidth=200e9, latency=1e-6, kind="nvlink")
        if where in ("host", "cpu"):
            host = topo.add_host() if where == "host" else topo.add_switch()
            if where == "cpu":
                topo.add_link(host, topo.add_switch(), bandwidth=200e9, kind="memory")
            for gpu in gpus:
                topo.add_link(gpu, host, bandwidth=24e9, latency=1e-6, kind="pcie")
            topo.add_link(host, nic, bandwidth=24e9, latency=1e-6, kind="pcie")
        else:
            topo.add_link(gpus[1], nic, bandwidth=24e9, latency=1e-6, kind="pcie")
        topo.add_link(nic, core, bandwidth=50e9, latency=2e-6, kind="ib")
    return topo


@pytest.mark.parametrize(("where", "path", "ampere", "hopper"), [
    ("host", "phb", False, False),   # beyond PXB and PXN: never by default
    ("cpu", "phb", False, False),
    ("gpu", "pxn", False, True),     # PXN: from Hopper on only
])
def test_ll128_is_on_by_default_only_as_far_from_the_nic_as_nccl_allows(
        where, path, ampere, hopper):
    """NCCL 2.30.7 (tuning.cc) enables LL128 by default up to ``typeInter`` PATH_PXB, or
    PATH_PXN from compute capability 9.0: a NIC behind the CPU turns it off everywhere,
    one reached through another GPU turns it off on Ampere only. Where it is off, the
    tuner never picks it (allowed, it picks it at one of 64 KiB, 1 MiB and 4 MiB on these
    nodes), and naming it turns it on, as NCCL_PROTO does."""
    topo = nic_nodes(where)
    ranks = tuple(range(4))
    for arch, enabled in (("ampere", ampere), ("hopper", hopper)):
        machine = describe(topo, ranks, arch)
        assert machine.nic_path == path
        assert machine.ll128_by_default is enabled
        allowed = dataclasses.replace(machine, nic_path="pxb")
        assert allowed.ll128_by_default
        sizes = (64 << 10, 1 << 20, 4 << 20)
        protos = {choose(machine, "all_reduce", size).proto for size in sizes}
        assert ("LL128" in protos) is enabled
        assert "LL128" in {choose(allowed, "all_reduce", size).proto for size in sizes}
        assert choose(machine, "all_reduce", 1 << 20, proto="LL128").proto == "LL128"
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20,
                      arch="ampere")
    assert res.params["proto"] != "LL128"


def test_a_nic_on_the_gpus_own_pcie_path_keeps_ll128():
    # The DGX presets: GPU i -> NIC i over PCIe (NCCL's PIX).
    for topo in (sc.topology.dgx_a100(2), sc.topology.dgx_h100(2),
                 sc.topology.dgx_a100(2, nics_per_node=4)):
        machine = describe(topo, tuple(range(16)))
        assert machine.nic_path == "pxb" and machine.ll128_by_default


def mirrored(topo: sc.Topology) -> sc.Topology:
    """The same machine with every link written from its other end: ``u`` and ``v``
    swapped, and with them ``bandwidth`` and ``back_bandwidth``."""
    data = sc.topology.to_dict(topo)
    for link in data["links"]:
        link["u"], link["v"] = link["v"], link["u"]
        if "back_bandwidth" in link:
            link["bandwidth"], link["back_bandwidth"] = link["back_bandwidth"], link["bandwidth"]
    return sc.topology.from_dict(data)


def assert_same_nccl_run(one: sc.Topology, other: sc.Topology, nbytes: int) -> None:
    """NCCL's machine, and a run's parameters, time and bytes on every directed link,
    are the same on ``one`` and ``other``."""
    ranks = tuple(range(one.nranks))
    assert describe(one, ranks) == describe(other, ranks)
    a, b = (sc.simulate(t, "all_reduce", algorithm="nccl", nbytes=nbytes)
            for t in (one, other))
    assert (a.params, a.time, a.link_bytes) == (b.params, b.time, b.link_bytes)


def lopsided_gpus(kind: str) -> sc.Topology:
    """4 GPUs on one switch, each sending at 20 GB/s and taking in at 200 GB/s."""
    topo = sc.Topology("lopsided")
    gpus = [topo.add_gpu() for _ in range(4)]
    sw = topo.add_switch("sw")
    for gpu in gpus:
        topo.add_link(gpu, sw, bandwidth=20e9, back_bandwidth=200e9, kind=kind,
                      latency=1e-6)
    return topo


@pytest.mark.parametrize("kind", ["nvlink", "pcie"])
def test_nccl_sees_a_lopsided_link_the_same_whichever_end_comes_first(kind):
    """A route gpu0 -> sw -> gpu1 leaves gpu0 at 20 GB/s and enters gpu1, which NCCL
    knows at the figure it reads off gpu1 (its link away, 20 GB/s; ncclTopoConnectNodes
    adds it each way): 20 GB/s. By hand (Ampere's speed array): 1 channel at 20, the
    first speed within 20 and carrying a GPU's whole 20; not doubled below 25; run
    twice: 2. Written from the switch's end the search read 200 GB/s and ran 20."""
    topo = lopsided_gpus(kind)
    machine = describe(topo, (0, 1, 2, 3))
    assert (machine.intra_bw, machine.graph_channels, machine.graph_channel_bw,
            machine.channels) == (20e9, 1, 20e9, 2)
    assert_same_nccl_run(topo, mirrored(topo), 16 << 20)


def test_a_lopsided_gpu_link_across_nodes_is_read_the_same_both_ways():
    """Two nodes of one GPU, each GPU on a link to its NIC at 20 GB/s out and 100 in,
    the NICs at 25 GB/s on one switch: the route leaves gpu0 at 20 and enters gpu1 at
    gpu1's 20, so the network share is 20 GB/s, and one channel at 20 (within the
    GPU's own 20; Ampere's inter speeds), run twice."""
    topo = sc.Topology("two lopsided nodes")
    core = topo.add_switch("core")
    for node in range(2):
        gpu, nic = topo.add_gpu(node=node), topo.add_nic()
        topo.add_link(gpu, nic, bandwidth=20e9, back_bandwidth=100e9, kind="pcie")
        topo.add_link(nic, core, bandwidth=25e9, kind="ib")
    machine = describe(topo, (0, 1))
    assert (machine.inter_bw, machine.graph_channels, machine.graph_channel_bw,
            machine.channels) == (20e9, 1, 20e9, 2)
    assert_same_nccl_run(topo, mirrored(topo), 4 << 20)


def test_pcie_without_p2p_gives_nccl_the_links_rate_whichever_end_comes_first():
    """pcie_node(p2p=False) on Gen5: a GPU's link carries 48 GB/s out and 35.2 in (its
    SMs' reads of host memory), which NCCL does not know of: its search sees 48 both
    ways, 4 channels (2 in the graph) at 20 GB/s (test_nccl_search's hand count)."""
    topo = sc.topology.pcie_node(4, gen=5, p2p=False, gpus_per_switch=1)
    for machine in (describe(topo, (0, 1, 2, 3)), describe(mirrored(topo), (0, 1, 2, 3))):
        assert (machine.intra_bw, machine.channels, machine.graph_channels,
                machine.graph_channel_bw) == (48e9, 4, 2, 20e9)
    assert_same_nccl_run(topo, mirrored(topo), 16 << 20)


@pytest.mark.parametrize("memory_bandwidth", [204.8e9, 40e9, 20e9])
def test_nccl_reads_a_staged_route_without_its_host_memory_link(memory_bandwidth):
    """NCCL's topology has no host memory link: the GPUs of pcie_node(p2p=False) reach
    each other at their Gen4 x16 PCIe rate, 24 GB/s, however slow the memory. The memory
    link's half of 20 GB/s made the tuner read 10 GB/s (all_to_all of 64 MiB predicted
    6759 us against 2844)."""
    topo = sc.topology.pcie_node(8, p2p=False, memory_bandwidth=memory_bandwidth)
    assert describe(topo, tuple(range(8))).intra_bw == 24e9


@pytest.mark.parametrize("seed", range(12))
def test_random_lopsided_servers_give_nccl_the_same_run_written_either_way(seed):
    """Random servers (``machines.random_nodes``) whose links, one in two, carry a tenth
    to ten times their rate back: written from either end, NCCL finds the same machine
    and runs the same all_reduce."""
    data = sc.topology.to_dict(random_nodes(seed))
    rng = np.random.default_rng(seed)
    for link in data["links"]:
        if rng.random() < 0.5:
            link["back_bandwidth"] = link["bandwidth"] * float(rng.choice([0.1, 0.5, 3, 10]))
    topo = sc.topology.from_dict(data)
    assert_same_nccl_run(topo, mirrored(topo), 1 << 20)


@pytest.mark.parametrize("machine", ["cluster", "fat_tree"])
def test_a_tree_on_nodes_of_one_nic_runs_both_trees_of_the_double_binary_tree(machine):
    """4 nodes of 2 GPUs and one 12.5 GB/s NIC each: NCCL's search finds one channel
    (n = 1) and duplicates it, channel 0 on tree 0 and channel 1 on tree 1 (connectTrees
    in src/graph/connect.cc). Channel c ran on tree (c div G) mod 2, G = 2 GPUs a node:
    both on tree 0, whose interior node sent 3 M out of its NIC. With both
    trees each node is interior in at most one: NICs send 1, 2, 2, 1 x M (every tree
    edge carries each tree's half up and down: 2 trees x 3 edges x 2 x M/2 = 6 M in
    all), and the run takes at least 2 M / B, and less than the 3 M / B tree 0 alone
    takes at least."""
    m, bw = 1 << 24, 12.5e9
    topo = (sc.topology.cluster(4, 2, inter_bandwidth=bw) if machine == "cluster" else
            sc.topology.fat_tree(4, 2, leaf_radix=4))
    assert describe(topo, tuple(range(8))).graph_channels == 1
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=m, algo="tree",
                      proto="Simple")
    assert res.params["channels"] == 2
    out = sorted((u, b) for (u, v), b in res.link_bytes.items()
                 if (u.startswith("node") and v == "network")
                 or (u.startswith("nic") and v.startswith("leaf")))
    assert [b for _, b in out] == [m, 2 * m, 2 * m, m]
    if machine == "cluster":
        assert 2 * m / bw < res.time < 3 * m / bw


def test_a_tree_on_nodes_of_one_nic_keeps_every_channels_chain_at_the_first_gpu():
    """4 nodes of 2 GPUs and one NIC each: NCCL's search finds one channel (n = 1), and
    channels c and c + n duplicate its chain, so both channels' chains start at local GPU
    (c mod n) mod G = 0 (connectTrees, src/graph/connect.cc). The second GPU of a node is
    then never a head: it sends only its own part up, M / 2 on each of the 2 channels,
    M in all; a head sends its part down plus the tree's network traffic."""
    m = 1 << 24
    topo = sc.topology.cluster(4, 2, inter_bandwidth=12.5e9)
    assert describe(topo, tuple(range(8))).graph_channels == 1
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=m, algo="tree",
                      proto="Simple")
    assert res.params["channels"] == 2
    for node in range(4):
        assert res.link_bytes[(f"gpu{2 * node + 1}", f"node{node}")] == m
        assert res.link_bytes[(f"gpu{2 * node}", f"node{node}")] > m


def nic_sharing_nodes(*nodes: list[list[int]]) -> sc.Topology:
    """Nodes on one NVSwitch each (200 GB/s per GPU); ``nodes[j][g]`` lists the NICs GPU g
    of node j reaches through a PCIe switch of its own NIC (two hops: GPU -> switch ->
    NIC), so GPUs listing one NIC share it as their nearest."""
    topo = sc.Topology("nic sharing")
    core = topo.add_switch("core")
    for node, gpus_nics in enumerate(nodes):
        nvswitch = topo.add_switch(f"nvswitch{node}", reduce_bandwidth=2e12)
        count = 1 + max(k for nics in gpus_nics for k in nics)
        pcie = []
        for k in range(count):
            sw, nic = topo.add_switch(f"pcie{node}_{k}"), topo.add_nic(f"nic{node}_{k}")
            topo.add_link(sw, nic, bandwidth=60e9, latency=1e-7, kind="pcie")
            topo.add_link(nic, core, bandwidth=50e9, latency=2e-6, kind="ib")
            pcie.append(sw)
        for nics in gpus_nics:
            gpu = topo.add_gpu(node=node)
            topo.add_link(gpu, nvswitch, bandwidth=200e9, latency=1e-6, kind="nvlink")
            for k in nics:
                topo.add_link(gpu, pcie[k], bandwidth=60e9, latency=1e-7, kind="pcie")
    return topo


@pytest.mark.parametrize("nodes, plain", [
    (([[0], [0]], [[0], [1]]), True),        # node 1 has a NIC per GPU
    (([[0], [1]], [[0], [0]]), True),
    (([[0], [0]], [[0], [0]]), False),
    (([[0], [1]], [[0], [1]]), True),
    (([[0], [1], [0]], [[0], [1], [0]]), True),    # GPUs 0 and 2 share NIC 0, NIC 1 is GPU 1's
    (([[0, 2], [1], [0, 1, 2]], [[0, 2], [1], [0, 1, 2]]), False),   # every NIC shared
    (([[0], [0, 1]], [[0], [0, 1]]), True),        # GPU 1 also near NIC 0; NIC 1 its own
    (([[0, 1], [1]], [[0, 1], [1]]), True),        # GPU 0 also near NIC 1; NIC 0 its own
])
def test_the_plain_tree_pattern_where_any_node_has_no_nic_two_gpus_share(nodes, plain):
    """NCCL keeps the largest tree pattern any rank found (init.cc: ``maxTreePattern =
    std::max(maxTreePattern, allGather3Data[i].graphInfo[NCCL_ALGO_TREE].pattern)``, the
    plain tree, 3, above the balanced one, 1): on Hopper one node where a GPU has a
    nearest NIC of its own gives the plain tree to all, whichever node it is (the
    balanced tree, a channel's first two GPUs on one NIC, then finds fewer channels
    than the ring). A node keeps the balanced tree where every NIC a GPU has nearest is
    another GPU's too (adjacent or not, one of several)."""
    topo = nic_sharing_nodes(*nodes)
    assert describe(topo, tuple(range(topo.nranks)), "hopper").plain_tree is plain
    # Ampere keeps the balanced tree wherever a node has more than one GPU
    assert describe(topo, tuple(range(topo.nranks)), "ampere").plain_tree is False


def test_nvls_refusal_names_what_is_missing():
    """The refusal of NVLS said what NVLS needs but not what the machine lacks: on a
    hand-built machine the user had to find the GPU or switch. It names it: a GPU linked
    to no in-network device (a DGX A100's NVSwitches do not reduce), a node split over
    two reducing switches."""
    with pytest.raises(sc.InvalidInputError, match=r"here GPU 'gpu0' is linked to no "
                                                   r"switch that reduces \(in-network "
                                                   r"device\)"):
        sc.simulate(sc.topology.dgx_a100(1), "all_reduce", algorithm="nccl", nbytes=4096,
                    algo="nvls")
    topo = sc.Topology("one node, two switches")
    gpus = [topo.add_gpu() for _ in range(4)]
    halves = [topo.add_switch(name, reduce_bandwidth=1e12) for name in ("b", "a")]
    for i, gpu in enumerate(gpus):
        topo.add_link(gpu, halves[i // 2], bandwidth=100e9, kind="nvlink")
    topo.add_link(*halves, bandwidth=100e9)
    assert _machine(topo).nvls_missing == "the node of rank 0 has its GPUs on 'a' and 'b'"
    with pytest.raises(sc.InvalidInputError, match=r"here the node of rank 0 has its GPUs "
                                                   r"on 'a' and 'b'"):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=4096, algo="nvls")
    assert _machine(sc.topology.dgx_h100(2)).nvls_missing == ""
