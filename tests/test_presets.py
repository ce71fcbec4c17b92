"""The presets against the published figures they claim, field by field, and runs on them.

Every expected number below is written from its source, not read from the code:

* NVLink: 12 (A100) and 18 (H100) links of 25 GB/s per direction (A100 / H100
  architecture whitepapers); NCCL 2.30.7 counts 20.0 and 20.6 GB/s per link
  (src/graph/topo.h: SM80_NVLINK_BW, SM90_NVLINK_BW).
* PCIe x16 per direction: 8 / 16 / 32 GT/s per lane with 128b/130b encoding (PCI-SIG base
  specifications 3.0 / 4.0 / 5.0); NCCL counts 60 / 120 / 240 x 100 Mb/s per lane and
  width * speed / 80 GB/s (src/graph/topo.cc): 12 / 24 / 48 GB/s.
* NICs: HDR 200 Gb/s, NDR 400 Gb/s, 100 Gb/s; NCCL takes mbps / 8000 GB/s.
* GPU memory: A100 SXM4 80GB 2,039 GB/s, A100 PCIe 80GB 1,935 GB/s, H100 SXM5 3.35 TB/s
  (NVIDIA datasheets); reductions at memory / 3.
* Leaves: 40-port HDR (20 nodes each), 64-port NDR (32 nodes each).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

import simcoll as sc
from simcoll.comm import Comm
from simcoll.topology import presets

GB = 1e9
US = 1e-6
A100_NVLINK = 12 * 20.0 * GB          # NCCL's usable figure
A100_NVLINK_NOMINAL = 12 * 25 * GB
H100_NVLINK = 18 * 20.6 * GB
H100_NVLINK_NOMINAL = 18 * 25 * GB
PCIE_NCCL = {3: 12 * GB, 4: 24 * GB, 5: 48 * GB}
PCIE_NOMINAL = {g: 16 * rate * 128 / 130 / 8 for g, rate in ((3, 8e9), (4, 16e9), (5, 32e9))}
HDR, NDR, E100 = 200e9 / 8, 400e9 / 8, 100e9 / 8
A100_REDUCE, H100_REDUCE, A100_PCIE_REDUCE = 2039 * GB / 3, 3350 * GB / 3, 1935 * GB / 3
NVLINK_LAT, PCIE_LAT, NET_LAT = 0.5 * US, 1 * US, 1.5 * US


def kinds(topo):
    return Counter(d.kind for d in topo.devices)


def link_kinds(topo):
    return Counter(link.kind for link in topo.links)


def path(topo, a, b):
    return [topo.directed_link(d) for d in topo.route(a, b).links]


def link(topo, u, v):
    return topo.links[topo.link_index(u, v)]


# --- the figures -----------------------------------------------------------------------------

def test_hardware_figures_match_their_sources():
    for gen in (3, 4, 5):
        assert presets.pcie_x16(gen) == pytest.approx(PCIE_NOMINAL[gen], rel=1e-12)
        assert presets.pcie_x16_nccl(gen) == pytest.approx(PCIE_NCCL[gen], rel=1e-12)
    # The rounded figures datasheets quote for x16: 15.75, 31.5, 63 GB/s.
    assert [round(presets.pcie_x16(g) / GB, 2) for g in (3, 4, 5)] == [15.75, 31.51, 63.02]
    a100, h100, pcie = presets.A100_SXM, presets.H100_SXM, presets.A100_PCIE
    assert (a100.nvlink_bandwidth, a100.nvlink_bandwidth_nccl) == pytest.approx(
        (A100_NVLINK_NOMINAL, A100_NVLINK))
    assert (h100.nvlink_bandwidth, h100.nvlink_bandwidth_nccl) == pytest.approx(
        (H100_NVLINK_NOMINAL, H100_NVLINK))
    assert (a100.pcie_gen, h100.pcie_gen, pcie.pcie_gen) == (4, 5, 4)
    assert a100.reduce_bandwidth == pytest.approx(A100_REDUCE)
    assert h100.reduce_bandwidth == pytest.approx(H100_REDUCE)
    assert pcie.reduce_bandwidth == pytest.approx(A100_PCIE_REDUCE)
    # RTX 5090: 512-bit GDDR7 at 28 Gb/s per pin = 1,792 GB/s; PCIe Gen5; no NVLink.
    rtx = presets.RTX_5090
    assert rtx.memory_bandwidth == pytest.approx(512 * 28e9 / 8)
    assert rtx.reduce_bandwidth == pytest.approx(512 * 28e9 / 8 / 3)
    assert (rtx.pcie_gen, rtx.nvlink_links, rtx.nvlink_bandwidth) == (5, 0, 0)
    assert presets.reduce_bandwidth_of(3e12) == pytest.approx(1e12)
    with pytest.raises(sc.TopologyError, match=r"gen=6 is not accepted.*3, 4 or 5"):
        presets.pcie_x16(6)


# --- DGX A100 / H100 -------------------------------------------------------------------------

def test_one_dgx_a100_is_eight_gpus_on_nvswitch():
    topo = sc.topology.dgx_a100(1)
    assert topo.name == "dgx_a100x1"
    assert kinds(topo) == {"gpu": 8, "switch": 1}
    assert topo.gpus == tuple(f"gpu{i}" for i in range(8))
    assert topo.gpu_nodes == (0,) * 8
    assert topo.in_network == ()
    for i, gpu in enumerate(topo.gpus):
        assert topo.device(gpu).reduce_bandwidth == pytest.approx(A100_REDUCE)
        assert topo.links[i] == sc.topology.Link(gpu, "nvswitch0", pytest.approx(A100_NVLINK),
                                                 NVLINK_LAT, "nvlink")
    assert len(topo.links) == 8


def test_one_dgx_h100_switch_reduces_in_the_network():
    topo = sc.topology.dgx_h100()
    assert kinds(topo) == {"gpu": 8, "switch": 1}
    assert link_kinds(topo) == {"nvlink": 8}
    assert all(link.bandwidth == pytest.approx(H100_NVLINK) for link in topo.links)
    nvs = topo.device("nvswitch0")
    assert nvs.in_network and topo.in_network == ("nvswitch0",)
    # Line rate: 7 pairwise reductions per result byte at the GPUs' NVLink rate.
    # Fitted to nccl-tests #290's NVLS all_reduce (see presets/dgx.py).
    assert nvs.reduce_bandwidth == pytest.approx(1.86e12)
    assert topo.address("nvswitch0") == 8
    assert all(topo.device(g).reduce_bandwidth == pytest.approx(H100_REDUCE)
               for g in topo.gpus)
    plain = sc.topology.dgx_h100(nvls=False)
    assert plain.in_network == () and not plain.device("nvswitch0").in_network
    nominal = sc.topology.dgx_h100(nvlink_bandwidth=450 * sc.GB)
    assert {link.bandwidth for link in nominal.links} == {H100_NVLINK_NOMINAL}
    assert nominal.device("nvswitch0").reduce_bandwidth == pytest.approx(1.86e12)
    assert sc.topology.dgx_h100(nvswitch_reduce_bandwidth=1e12).device(
        "nvswitch0").reduce_bandwidth == 1e12
    assert sc.topology.dgx_h100(nvswitch_reduce_bandwidth=None).device(
        "nvswitch0").reduce_bandwidth == pytest.approx(1.86e12)


def test_listing_shows_the_nvswitch_reduction_rate_it_builds():
    """`simcoll list` shows what a default dgx_h100 builds: a reducing switch, not
    ``none`` (a forwarding one)."""
    from simcoll.topology.catalog import describe
    assert "nvswitch_reduce_bandwidth=1.86TB/s" in describe("dgx_h100")


@pytest.mark.parametrize("preset, nvlink, pcie, nic, reduce_bw, per_leaf", [
    (sc.topology.dgx_a100, A100_NVLINK, PCIE_NCCL[4], HDR, A100_REDUCE, 20),
    (sc.topology.dgx_h100, H100_NVLINK, PCIE_NCCL[5], NDR, H100_REDUCE, 32),
])
def test_two_dgx_nodes_every_device_and_link(preset, nvlink, pcie, nic, reduce_bw, per_leaf):
    topo = preset(2)
    # 16 GPUs, 2 NVSwitches, 16 NICs, 8 rail leaves and the spine.
    assert kinds(topo) == {"gpu": 16, "nic": 16, "switch": 2 + 8 + 1}
    assert link_kinds(topo) == {"nvlink": 16, "pcie": 16, "ib": 16 + 8}
    assert topo.gpu_nodes == (0,) * 8 + (1,) * 8
    assert topo.gpus == tuple(f"gpu{r}" for r in range(16))
    for r in range(16):
        node, local = divmod(r, 8)
        gpu = f"gpu{r}"
        assert topo.device(gpu).reduce_bandwidth == pytest.approx(reduce_bw)
        assert link(topo, gpu, f"nvswitch{node}") == sc.topology.Link(
            gpu, f"nvswitch{node}", pytest.approx(nvlink), NVLINK_LAT, "nvlink")
        assert link(topo, gpu, f"nic{r}") == sc.topology.Link(gpu, f"nic{r}", pcie, PCIE_LAT,
                                                              "pcie")
        assert link(topo, f"nic{r}", f"leaf{local}") == sc.topology.Link(
            f"nic{r}", f"leaf{local}", nic, NET_LAT, "ib")
    for rail in range(8):
        assert link(topo, f"leaf{rail}", "spine") == sc.topology.Link(
            f"leaf{rail}", "spine", pytest.approx(per_leaf * nic), NET_LAT, "ib")
        assert sorted(topo.neighbors(f"leaf{rail}")) == sorted(
            [f"nic{rail}", f"nic{8 + rail}", "spine"])


def test_same_rail_peers_meet_on_one_leaf_cross_rail_peers_go_by_nvlink_first():
    topo = sc.topology.dgx_h100(2)
    for i in range(8):
        assert path(topo, i, 8 + i) == [(f"gpu{i}", f"nic{i}"), (f"nic{i}", f"leaf{i}"),
                                        (f"leaf{i}", f"nic{8 + i}"),
                                        (f"nic{8 + i}", f"gpu{8 + i}")]
        assert path(topo, 8 + i, i)[1] == (f"nic{8 + i}", f"leaf{i}")
        route = topo.route(i, 8 + i)
        assert route.latency == pytest.approx(2 * PCIE_LAT + 2 * NET_LAT)
        assert route.bandwidth == PCIE_NCCL[5]  # Gen5 x16 (48) < NDR (50)
    # Cross-rail: NVLink to the local GPU on the peer's rail, then that rail (PXN's path).
    assert path(topo, 0, 11) == [("gpu0", "nvswitch0"), ("nvswitch0", "gpu3"),
                                 ("gpu3", "nic3"), ("nic3", "leaf3"), ("leaf3", "nic11"),
                                 ("nic11", "gpu11")]
    cross = topo.route(0, 11)
    assert cross.latency == pytest.approx(2 * NVLINK_LAT + 2 * PCIE_LAT + 2 * NET_LAT)
    assert cross.bandwidth == PCIE_NCCL[5]
    assert path(topo, 2, 5) == [("gpu2", "nvswitch0"), ("nvswitch0", "gpu5")]
    assert topo.route(2, 5).bandwidth == pytest.approx(H100_NVLINK)


def test_nodes_beyond_one_leaf_reach_each_other_through_the_spine():
    topo = sc.topology.dgx_a100(21)  # 20 nodes per 40-port leaf: two leaf groups
    assert kinds(topo)["switch"] == 21 + 2 * 8 + 1
    assert "leaf0_0" in topo.neighbors("nic0") and "leaf0_1" in topo.neighbors("nic160")
    assert path(topo, 0, 8 * 19) == [("gpu0", "nic0"), ("nic0", "leaf0_0"),
                                     ("leaf0_0", "nic152"), ("nic152", "gpu152")]
    assert path(topo, 0, 160) == [("gpu0", "nic0"), ("nic0", "leaf0_0"), ("leaf0_0", "spine"),
                                  ("spine", "leaf0_1"), ("leaf0_1", "nic160"),
                                  ("nic160", "gpu160")]
    assert link(topo, "leaf0_1", "spine").bandwidth == 20 * HDR
    # Cross-rail between groups: straight up rail 0's leaf and down rail 1's.
    assert path(topo, 0, 161)[2:4] == [("leaf0_0", "spine"), ("spine", "leaf1_1")]


def test_sixteen_100g_nics_two_per_gpu_behind_its_own_pcie_switch():
    topo = sc.topology.dgx_a100(2, nics_per_node=16, nic_bandwidth=100 * sc.Gbps)
    assert kinds(topo) == {"gpu": 16, "nic": 32, "switch": 2 + 16 + 16 + 1}
    assert link_kinds(topo) == {"nvlink": 16, "pcie": 16 + 32, "ib": 32 + 16}
    for node in range(2):
        for g in range(8):
            sw = f"pcie{node}_{g}"
            assert sorted(topo.neighbors(sw)) == sorted(
                [f"gpu{8 * node + g}", f"nic{16 * node + 2 * g}", f"nic{16 * node + 2 * g + 1}"])
            assert link(topo, f"gpu{8 * node + g}", sw).latency == PCIE_LAT / 2
    for rail in range(16):
        assert sorted(topo.neighbors(f"leaf{rail}")) == sorted(
            [f"nic{rail}", f"nic{16 + rail}", "spine"])
        assert link(topo, f"nic{rail}", f"leaf{rail}").bandwidth == E100
    assert path(topo, 1, 9) == [("gpu1", "pcie0_1"), ("pcie0_1", "nic2"), ("nic2", "leaf2"),
                                ("leaf2", "nic18"), ("nic18", "pcie1_1"), ("pcie1_1", "gpu9")]
    route = topo.route(1, 9)
    assert route.bandwidth == E100
    assert route.latency == pytest.approx(2 * PCIE_LAT + 2 * NET_LAT)


def test_fewer_nics_than_gpus_are_shared():
    topo = sc.topology.dgx_a100(2, nics_per_node=4)
    assert kinds(topo) == {"gpu": 16, "nic": 8, "switch": 2 + 8 + 4 + 1}
    assert sorted(topo.neighbors("pcie1_3")) == ["gpu14", "gpu15", "nic7"]
    assert path(topo, 1, 9)[:3] == [("gpu1", "pcie0_0"), ("pcie0_0", "nic0"), ("nic0", "leaf0")]


@pytest.mark.parametrize("kwargs, words", [
    (dict(nics_per_node=3), ["nics_per_node=3", "multiple or a divisor of 8"]),
    (dict(nics_per_node=0), ["nics_per_node=0", ">= 1"]),
    (dict(leaf_radix=1), ["leaf_radix=1", ">= 2"]),
    (dict(oversubscription=0.0), ["oversubscription=0.0", ">= 1"]),
    # half the oversubscription a non-blocking fat tree has: uplinks faster than the ports
    (dict(oversubscription=0.5), ["oversubscription=0.5", ">= 1"]),
    (dict(nic_bandwidth=-1.0), ["-1.0"]),
])
def test_bad_dgx_arguments_are_refused(kwargs, words):
    with pytest.raises(sc.TopologyError) as err:
        sc.topology.dgx_a100(2, **kwargs)
    for word in words:
        assert word in str(err.value)


@pytest.mark.parametrize("name", [5, "", None])
def test_dgx_refuses_a_name_that_is_no_string(name):
    # name=5 built a machine named "5x2", name="" one named "x2"
    with pytest.raises(sc.TopologyError, match=rf"^name={name!r} is not accepted; give a "
                                               r"string that is not empty"):
        sc.topology.dgx(2, nvlink_bandwidth=1e11, pcie_bandwidth=1e10, nic_bandwidth=1e10,
                        name=name)


def test_nvls_off_refuses_a_reduction_rate():
    with pytest.raises(sc.TopologyError,
                       match=r"nvswitch_reduce_bandwidth=1000000000000.0 .*nvls=False"):
        sc.topology.dgx_h100(nvls=False, nvswitch_reduce_bandwidth=1e12)


# --- fat tree ---------------------------------------------------------------------------------

def test_fat_tree_shape_and_oversubscription_halves_the_uplinks():
    full = sc.topology.fat_tree(4, 2, leaf_radix=4)
    half = sc.topology.fat_tree(4, 2, leaf_radix=4, oversubscription=2.0)
    for topo, up in ((full, 2 * E100), (half, E100)):
        assert kinds(topo) == {"gpu": 8, "nic": 4, "switch": 4 + 2 + 1}
        assert topo.gpu_nodes == (0, 0, 1, 1, 2, 2, 3, 3)
        assert link(topo, "leaf0_0", "spine").bandwidth == up
        assert link(topo, "leaf0_1", "spine").bandwidth == up
        assert link(topo, "nic2", "leaf0_1").bandwidth == E100
    assert path(full, 0, 2) == [("gpu0", "node0"), ("node0", "nic0"), ("nic0", "leaf0_0"),
                                ("leaf0_0", "nic1"), ("nic1", "node1"), ("node1", "gpu2")]
    assert [v for _, v in path(full, 0, 7)] == ["node0", "nic0", "leaf0_0", "spine",
                                                "leaf0_1", "nic3", "node3", "gpu7"]
    assert kinds(sc.topology.fat_tree(2, 4)) == {"gpu": 8, "nic": 2, "switch": 2 + 1}


@pytest.mark.parametrize("build", [sc.topology.dgx_a100, sc.topology.dgx_h100,
                                   lambda nodes, **kw: sc.topology.fat_tree(nodes, 2, **kw)])
@pytest.mark.parametrize(("kwargs", "shown", "uplink"), [
    (dict(leaf_radix=2**1100), "leaf_radix=13582985...5376 (332 digits)", "inf"),
    (dict(leaf_radix=10**300), "leaf_radix=10000000...0000 (301 digits)", "inf"),
    (dict(leaf_radix=2, oversubscription=1e300, nic_bandwidth=1e-300),
     "oversubscription=1e+300", "0"),
    # the uplink is computed as it is built, radix x rate first: 5e299 x 5e10 / 1e300
    # would be 2.5e10 in another order, but the links would be built with inf
    (dict(leaf_radix=10**300, oversubscription=1e300), "oversubscription=1e+300", "inf")])
def test_a_leaf_uplink_beyond_a_float_is_refused_naming_radix_and_ratio(
        build, kwargs, shown, uplink, monkeypatch):
    """A leaf's uplink is leaf_radix // 2 x nic_bandwidth / oversubscription: 2**1100
    ports raised an OverflowError, and a ratio of 1e-300 (refused since as below 1) named
    the internal link ('leaf0', 'spine') after half the machine was built. Both are refused before
    anything is built, naming the two parameters and the range the uplink must keep
    (a normal float: 1 x 1e-300 / 1e300 is 1e-600, 0 as a float)."""
    monkeypatch.setattr(sc.Topology, "_add", lambda *a, **k: pytest.fail("built first"))
    with pytest.raises(sc.TopologyError) as info:
        build(2, **kwargs)
    message = str(info.value)
    assert message.startswith("leaf_radix=") and shown in message
    assert f"would be {uplink} bytes/s (computed in that order); keep it between 2.23e-308 " \
        f"and 1.8e+308" in message


def test_a_leaf_uplink_shared_by_spines_is_checked_as_each_link_is_built(monkeypatch):
    """With k spines a leaf's link to each carries 1/k of its uplink; a ratio that leaves
    the whole uplink a normal float (2 x 1e-300 / 1e5 = 2e-305) but each link a subnormal
    one (2e-305 / 1e4) was refused by no check, and the machine built with links of a
    rate no float division keeps exact."""
    monkeypatch.setattr(sc.Topology, "_add", lambda *a, **k: pytest.fail("built first"))
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.fat_tree(4, 2, leaf_radix=4, nic_bandwidth=1e-300, oversubscription=1e5,
                             spines=10_000)
    message = str(info.value)
    assert message.startswith("leaf_radix=4 with oversubscription=100000.0 is not accepted")
    assert "/ oversubscription / spines (10000), would be 2e-309 bytes/s" in message


def _pairs(pairs, n):
    """Each (src, dst) in ``pairs`` sends n bytes at time 0."""
    sends = dict(pairs)
    recvs = {d: s for s, d in pairs}

    def program(comm: Comm, _):
        events = []
        if comm.rank in sends:
            events.append(comm.send(sc.VirtualBuffer.of(n, np.uint8), sends[comm.rank]))
        if comm.rank in recvs:
            events.append(comm.recv(recvs[comm.rank]))
        # Not ``yield from``: SimPy sends each event's value back, which a list cannot take.
        for event in events:  # noqa: UP028
            yield event
    return program


def test_oversubscription_halves_what_two_flows_across_the_spine_get():
    n = 10**8
    pairs = [(0, 4), (2, 6)]  # nodes 0 and 1 (leaf 0) to nodes 2 and 3 (leaf 1)
    latency = 2 * 1 * US + 2 * 1 * US + 4 * NET_LAT  # GPU-node, node-NIC, 4 network hops
    full = sc.run_program(sc.topology.fat_tree(4, 2, leaf_radix=4), _pairs(pairs, n), None)
    half = sc.run_program(sc.topology.fat_tree(4, 2, leaf_radix=4, oversubscription=2.0),
                          _pairs(pairs, n), None)
    # Full: each flow has its own NIC (12.5 GB/s) and half of a 25 GB/s uplink.
    assert full.time == pytest.approx(latency + n / E100, rel=1e-12)
    # Oversubscribed 2:1: the 12.5 GB/s uplink is shared by both flows.
    assert half.time == pytest.approx(latency + n / (E100 / 2), rel=1e-12)


# --- PCIe server ------------------------------------------------------------------------------

@pytest.mark.parametrize("gen", [3, 4, 5])
def test_pcie_node_every_device_and_link(gen):
    topo = sc.topology.pcie_node(8, gen)
    assert kinds(topo) == {"gpu": 8, "switch": 1 + 1 + 2}
    assert link_kinds(topo) == {"pcie": 8 + 2, "memory": 1}
    assert topo.gpu_nodes == (0,) * 8
    for r in range(8):
        assert link(topo, f"gpu{r}", f"pcie{r // 4}") == sc.topology.Link(
            f"gpu{r}", f"pcie{r // 4}", PCIE_NCCL[gen], PCIE_LAT / 2, "pcie")
        assert topo.device(f"gpu{r}").reduce_bandwidth == pytest.approx(A100_PCIE_REDUCE)
        assert topo.device(f"gpu{r}").staging is None
    for j in range(2):
        assert link(topo, f"pcie{j}", "cpu0").bandwidth == PCIE_NCCL[gen]
    # EPYC 7002: 8 x 25.6 GB/s of DDR4-3200 for reads and writes together, half each way
    assert link(topo, "cpu0", "memory0").bandwidth == pytest.approx(8 * 25.6 * GB / 2)
    nominal = sc.topology.pcie_node(8, gen, pcie_bandwidth=presets.pcie_x16(gen))
    assert all(lk.bandwidth == pytest.approx(PCIE_NOMINAL[gen])
               for lk in nominal.links if lk.kind == "pcie")


def test_pcie_node_routes_with_and_without_peer_to_peer():
    p2p = sc.topology.pcie_node(8, 4)
    assert path(p2p, 0, 1) == [("gpu0", "pcie0"), ("pcie0", "gpu1")]
    assert path(p2p, 0, 5) == [("gpu0", "pcie0"), ("pcie0", "cpu0"), ("cpu0", "pcie1"),
                               ("pcie1", "gpu5")]
    shm = sc.topology.pcie_node(8, 4, p2p=False)
    assert all(shm.device(g).staging == "memory0" for g in shm.gpus)
    assert path(shm, 0, 1) == [("gpu0", "pcie0"), ("pcie0", "cpu0"), ("cpu0", "memory0"),
                               ("memory0", "cpu0"), ("cpu0", "pcie0"), ("pcie0", "gpu1")]
    assert shm.route(0, 1).latency == pytest.approx(2 * PCIE_LAT + 2 * 0.1 * US)
    assert shm.route(0, 1).bandwidth == PCIE_NCCL[4]
    assert path(shm, 6, 2)[:4] == [("gpu6", "pcie1"), ("pcie1", "cpu0"), ("cpu0", "memory0"),
                                   ("memory0", "cpu0")]
    two = sc.topology.pcie_node(8, 4, p2p=False, sockets=2)
    assert kinds(two) == {"gpu": 8, "switch": 2 + 2 + 2}
    assert link(two, "cpu0", "cpu1") == sc.topology.Link("cpu0", "cpu1", 16 * GB, 0.5 * US,
                                                         "inter_socket")
    assert two.device("gpu5").staging == "memory1"
    # Staged in the sender's memory, then across the sockets to the receiver.
    assert path(two, 0, 5) == [("gpu0", "pcie0"), ("pcie0", "cpu0"), ("cpu0", "memory0"),
                               ("memory0", "cpu0"), ("cpu0", "cpu1"), ("cpu1", "pcie1"),
                               ("pcie1", "gpu5")]
    assert path(sc.topology.pcie_node(8, 4, sockets=2), 0, 5) == [
        ("gpu0", "pcie0"), ("pcie0", "cpu0"), ("cpu0", "cpu1"), ("cpu1", "pcie1"),
        ("pcie1", "gpu5")]


def test_without_peer_to_peer_a_switch_uplink_carries_all_its_gpus_traffic():
    n = 10**8
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]  # four GPUs of one PCIe switch
    p2p = sc.run_program(sc.topology.pcie_node(8, 4), _pairs(ring, n), None)
    shm = sc.run_program(sc.topology.pcie_node(8, 4, p2p=False), _pairs(ring, n), None)
    # Peer to peer: each flow has its own links into and out of the switch.
    assert p2p.time == pytest.approx(PCIE_LAT + n / PCIE_NCCL[4], rel=1e-12)
    # Through host memory: all four share the uplink, each way, at a quarter of 24 GB/s.
    assert shm.time == pytest.approx(2 * PCIE_LAT + 2 * 0.1 * US + 4 * n / PCIE_NCCL[4],
                                     rel=1e-12)
    assert shm.link_bytes[("pcie0", "cpu0")] == shm.link_bytes[("cpu0", "pcie0")] == 4 * n
    assert shm.link_bytes[("cpu0", "memory0")] == shm.link_bytes[("memory0", "cpu0")] == 4 * n
    assert ("pcie0", "cpu0") not in p2p.link_bytes or p2p.link_bytes[("pcie0", "cpu0")] == 0


@pytest.mark.parametrize("kwargs, words", [
    (dict(gen=2), ["gen=2", "3, 4 or 5"]),
    (dict(sockets=3), ["sockets=3", "1 or 2"]),
    (dict(gpus=0), ["gpus=0"]),
    (dict(gpus_per_switch=0), ["gpus_per_switch=0"]),
    (dict(p2p="no"), ["p2p='no'", "True or False"]),
    # with both rates given, gen went into the machine's name unchecked
    # ("pcie_node(8, genbanana, no p2p)")
    *[(dict(gen=gen, p2p=False, pcie_bandwidth=24e9, host_read_bandwidth=20e9),
       [f"gen={gen!r} is not accepted", "3, 4 or 5"]) for gen in (9, "banana", 2.5, None)],
    # one PCIe switch and two sockets built a second socket with no GPU under it
    (dict(gpus=3, sockets=2), ["sockets=2 is not accepted for gpus=3 and gpus_per_switch=4",
                               "one PCIe switch"]),
    (dict(gpus=1, sockets=2), ["sockets=2 is not accepted for gpus=1"]),
    # halving it for the memory link failed midway, naming the link ('cpu0', 'memory0')
    (dict(memory_bandwidth=3e-308), ["memory_bandwidth=3e-308 is not accepted",
                                     "half of it each way"]),
])
def test_bad_pcie_node_arguments_are_refused(kwargs, words):
    with pytest.raises(sc.TopologyError) as err:
        sc.topology.pcie_node(**kwargs)
    for word in words:
        assert word in str(err.value)


def test_staging_survives_files_and_specs(tmp_path):
    topo = sc.topology.from_spec("pcie_node:4,5,false,gpus_per_switch=2,sockets=2")
    assert topo.spec == "pcie_node:gpus=4,gen=5,p2p=false,gpus_per_switch=2,sockets=2"
    assert [topo.device(g).staging for g in topo.gpus] == ["memory0"] * 2 + ["memory1"] * 2
    for suffix in (".json", ".yaml", ".toml"):
        sc.topology.save(topo, tmp_path / f"m{suffix}")
        again = sc.topology.load(tmp_path / f"m{suffix}")
        assert again.devices == topo.devices and again.links == topo.links
        assert path(again, 0, 3) == path(topo, 0, 3)


def test_staging_through_a_device_no_link_reaches_is_refused_on_load(tmp_path):
    # GPU a stages through mem, a switch with no link: a run failed later with "no route
    # from 'a' to 'b'", which did not say why.
    spec = tmp_path / "m.yaml"
    spec.write_text("devices: [{name: a, kind: gpu, staging: mem}, {name: b, kind: gpu},\n"
                    "          {name: mem, kind: switch}]\n"
                    "links: [{u: a, v: b, bandwidth: 1GB/s}]\n")
    with pytest.raises(sc.TopologyError, match="GPU 'a' stages its messages through 'mem', "
                                               "which no link connects to the GPUs"):
        sc.topology.load(spec)


def test_staging_through_an_unknown_device_is_refused():
    topo = sc.Topology("t")
    a = topo.add_gpu(staging="nowhere")
    b = topo.add_gpu()
    topo.add_link(a, b, bandwidth=1e9)
    with pytest.raises(sc.TopologyError, match="'gpu0' stages its messages through 'nowhere'"):
        topo.validate()
    with pytest.raises(sc.TopologyError, match="'nowhere'"):
        topo.route(0, 1)
    with pytest.raises(sc.TopologyError, match="staging of 'g' = 'g' is not accepted"):
        sc.Topology().add_gpu("g", staging="g")
    with pytest.raises(sc.TopologyError, match=r"devices\[0\].staging.*GPUs only"):
        sc.topology.from_dict({"devices": [{"name": "s", "kind": "switch", "staging": "x"}],
                               "links": []})


# --- runs on every preset ---------------------------------------------------------------------

MACHINES = {
    "dgx_a100(1)": lambda: sc.topology.dgx_a100(1),
    "dgx_a100(2)": lambda: sc.topology.dgx_a100(2),
    "dgx_h100(2)": lambda: sc.topology.dgx_h100(2),
    "dgx_a100 16x100G": lambda: sc.topology.dgx_a100(2, nics_per_node=16,
                                                     nic_bandwidth=100 * sc.Gbps),
    "pcie_node no p2p": lambda: sc.topology.pcie_node(8, 4, False),
    "pcie_node 2 sockets": lambda: sc.topology.pcie_node(6, 3, sockets=2, gpus_per_switch=2),
    "fat_tree": lambda: sc.topology.fat_tree(3, 2, leaf_radix=4, oversubscription=2.0),
}


@pytest.mark.parametrize("name", MACHINES)
def test_ring_all_reduce_runs_right_on_every_preset(name):
    topo = MACHINES[name]()
    p = topo.nranks
    rng = np.random.default_rng(7)
    data = [rng.integers(-1000, 1000, 1003).astype(np.float64) for _ in range(p)]
    res = sc.simulate(topo, "all_reduce", algorithm="ring", data=data)
    expected = np.sum(np.stack(data), axis=0)  # integers in float64: exact
    assert res.correct
    for out in res.outputs:
        np.testing.assert_array_equal(out, expected)
    assert res.time > 0
    assert res.bytes_sent.sum() == res.bytes_received.sum()


def test_one_message_across_the_fabric_by_hand():
    n = 64 * 2**20
    h100 = sc.topology.dgx_h100(2)
    one = sc.run_program(h100, _pairs([(0, 8)], n), None)
    assert one.time == pytest.approx(2 * PCIE_LAT + 2 * NET_LAT + n / PCIE_NCCL[5], rel=1e-12)
    cross = sc.run_program(h100, _pairs([(0, 9)], n), None)
    assert cross.time == pytest.approx(2 * NVLINK_LAT + 2 * PCIE_LAT + 2 * NET_LAT
                                       + n / PCIE_NCCL[5], rel=1e-12)
    far = sc.run_program(sc.topology.dgx_a100(21), _pairs([(0, 160)], n), None)
    assert far.time == pytest.approx(2 * PCIE_LAT + 4 * NET_LAT + n / PCIE_NCCL[4], rel=1e-12)
    inside = sc.run_program(sc.topology.dgx_a100(1), _pairs([(0, 5)], n), None)
    assert inside.time == pytest.approx(2 * NVLINK_LAT + n / A100_NVLINK, rel=1e-12)


def _push(comm: Comm, inputs):
    switch = comm.reducer_of(comm.rank)
    yield comm.send(inputs[comm.rank], switch)
    return (yield comm.recv(switch))


def _reduce_and_multicast(comm: Comm, _):
    gpus = comm.attached(comm.rank)
    total = yield comm.recv(gpus[0])
    for g in gpus[1:]:
        total = yield comm.reduce(total, (yield comm.recv(g)), sc.ReduceOp.SUM)
    yield comm.multicast(total, gpus)


def test_the_h100_nvswitch_reduces_what_its_gpus_push():
    topo = sc.topology.dgx_h100(1)
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-50, 50, 4096).astype(np.float64) for _ in range(8)]
    res = sc.run_program(topo, _push, inputs, in_network=_reduce_and_multicast)
    expected = np.sum(np.stack(inputs), axis=0)
    for out in res.outputs[:8]:
        np.testing.assert_array_equal(out, expected)
    n = inputs[0].nbytes
    # Pushes arrive together after one hop; 7 reductions of n bytes at 1.86 TB/s;
    # one multicast hop back.
    assert res.time == pytest.approx(2 * (NVLINK_LAT + n / H100_NVLINK)
                                     + 7 * n / 1.86e12, rel=1e-12)
    assert math.isinf(sc.topology.dgx_a100(1).device("nvswitch0").reduce_bandwidth)


def test_a_fat_tree_of_too_many_spine_links_is_refused_before_it_is_built(monkeypatch):
    # 4096 one-GPU nodes, 2 to a leaf (leaf_radix 4): 2048 leaves, each joined to each of
    # 1024 spines: 2^21 leaf-spine links, plus 3 x 4096 below, above the builder's 2^21
    def built(*args, **kwargs):
        raise AssertionError("building started")

    monkeypatch.setattr(sc.Topology, "add_link", built)
    monkeypatch.setattr(sc.Topology, "add_switch", built)
    with pytest.raises(sc.TopologyError, match="spines=1,?024 is not accepted"):
        sc.topology.fat_tree(4096, gpus_per_node=1, leaf_radix=4, spines=1024)


# 10**400: an OverflowError dividing the uplink by it
@pytest.mark.parametrize("spines", [0, -1, True, 1.5, "2", 10**400])
def test_fat_tree_refuses_a_spine_count_that_is_not_one_or_more(spines):
    with pytest.raises(sc.TopologyError, match=r"spines=.* is not accepted"):
        sc.topology.fat_tree(4, gpus_per_node=1, leaf_radix=2, spines=spines)


def test_the_fat_tree_size_check_counts_what_is_built():
    # 2 nodes of 1 GPU, one to a leaf: 2 node switches, 2 GPUs, 2 NICs, 2 leaves and the
    # spines: 8 + 2,097,146 = 2,097,154 devices, above 2^21
    with pytest.raises(sc.TopologyError, match=r"2,?097,?154 devices"):
        sc.topology.fat_tree(2, gpus_per_node=1, leaf_radix=2, spines=2**21 - 6)
    # 4096 one-GPU nodes on 2 leaves of radix 4096 and 1024 spines: 3 x 4096 links below
    # the leaves and 2 x 1024 above (it was refused as "up to 4,206,592 links")
    topo = sc.topology.fat_tree(4096, gpus_per_node=1, leaf_radix=4096, spines=1024)
    assert len(topo.links) == 3 * 4096 + 2 * 1024
    assert len(topo.devices) == 3 * 4096 + 2 + 1024
    # one node: no leaf, no spine, whatever the count
    assert len(sc.topology.fat_tree(1, spines=2**21).devices) == 1 + 8


def test_sharp_with_several_spines_is_refused():
    # NCCL's CollNet reduces at one SHARP root; with two spines collnet=1 ran a ring
    with pytest.raises(sc.TopologyError, match="sharp=True with spines=2 is not accepted"):
        sc.topology.fat_tree(8, gpus_per_node=2, leaf_radix=4, spines=2, sharp=True)
    # one leaf (or one node) builds no spine: nothing to refuse
    one_leaf = sc.topology.fat_tree(2, gpus_per_node=2, leaf_radix=8, spines=2, sharp=True)
    assert not any(d.name.startswith("spine") for d in one_leaf.devices)
    assert sc.topology.fat_tree(1, spines=2, sharp=True).nranks == 8


@pytest.mark.parametrize("spines", [1, 2, 4])
def test_each_leaf_spine_link_carries_its_share_of_the_leafs_uplink(spines):
    """8 one-GPU nodes on leaves of radix 4 (2 nodes each: 4 leaves), 2:1 oversubscribed,
    50 GB/s NICs: a leaf's uplink is 2 x 50 / 2 = 50 GB/s, split over its links to the
    spines: 50 / spines GB/s each, one link from each leaf to each spine."""
    topo = sc.topology.fat_tree(8, gpus_per_node=1, leaf_radix=4, oversubscription=2.0,
                                nic_bandwidth=50e9, spines=spines)
    up = [link for link in topo.links
          if sorted(end.rstrip("0123456789_") for end in (link.u, link.v))
          == ["leaf", "spine"]]
    assert len(up) == 4 * spines
    for link in up:
        assert link.bandwidth == 2 * 50e9 / 2.0 / spines


@pytest.mark.parametrize("gpus, per_switch", [(3, 2), (5, 4), (7, 4)])
def test_pcie_node_takes_two_sockets_where_a_partial_switch_lands_on_the_second(gpus,
                                                                              per_switch):
    """ceil(gpus / per_switch) switches: 3 GPUs 2 to a switch make 2 switches, one per
    socket, so sockets=2 holds a GPU on each (the refusal is for one switch only)."""
    topo = sc.topology.pcie_node(gpus, gpus_per_switch=per_switch, sockets=2)
    assert topo.nranks == gpus
    kinds = [topo.links[d >> 1].kind for d in topo.route(0, gpus - 1).links]
    assert "inter_socket" in kinds          # the last GPU sits under the other socket
    with pytest.raises(sc.TopologyError, match="sockets=2 is not accepted"):
        sc.topology.pcie_node(per_switch, gpus_per_switch=per_switch, sockets=2)
