"""The channels NCCL's topology search gives rings and trees (src/graph/search.cc and
connect.cc of NCCL 2.30.7), worked out by hand from its speed arrays, and the counts
NCCL's own logs print ("NCCL INFO 24 coll channels, ..."): 24 on one node of 8 A100 or
8 H100, 16 on two DGX H100 nodes with a 400 Gb/s NIC per GPU. Before 2026-12-04 every
NVLink machine ran 16."""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.node_search import gpu_total_bw, nccl_rate
from simcoll.algorithms.nccl.protocols import channel_rate
from simcoll.algorithms.nccl.report import graph_lines
from simcoll.algorithms.nccl.search import (
    HeadsGraph,
    Searched,
    across_nodes_channels,
    collnet_direct_graph,
    fewest,
    nvls_graph,
    one_node_channels,
    postset,
)
from simcoll.algorithms.nccl.tune_model import collnet_graphs_of, max_channels, predict
from simcoll.topology.graph import Topology
from simcoll.topology.presets.dgx import dgx

GBS = 1e9


@pytest.mark.parametrize(("arch", "nvlink", "expected"), [
    # 12 NVLinks of 20 GB/s: 6 channels at 40 fill 240; doubled (Ampere doubles from 25
    # GB/s on) to 12 at 20, the graph's; every ring twice: 24.
    ("ampere", 240.0, (12, 24, 20.0)),
    # 18 links of 20.6 GB/s: 6 at 60 (360; 7 at 50, 9 at 40, 12 at 30 carry no more, and
    # 24 is below 0.49 of 60); 60 >= 50, so doubled to 12 at 30; twice: 24.
    ("hopper", 370.8, (12, 24, 30.0)),
    # 18 links of 40.1 GB/s: 8 at 90 (720; 9 at 80, 12 at 60, 16 at 45 carry no more);
    # doubled to 16 at 45; twice: 32.
    ("blackwell", 721.8, (16, 32, 45.0)),
    # 100 GB/s: 1 at 60, 2 at 50 fill it; doubled to 4 at 25, not raised (3 at 30 do not
    # fit 4); twice: 8.
    ("hopper", 100.0, (4, 8, 25.0)),
    # 100 GB/s on Ampere: 2 at 40, 3 at 30 (90), 5 at 20 fill it; 20 < 25: not doubled;
    # not raised (3 at 30); twice: 10.
    ("ampere", 100.0, (5, 10, 20.0)),
])
def test_one_node_by_hand(arch, nvlink, expected):
    assert one_node_channels(arch, nvlink) == expected


def test_across_nodes_by_hand():
    # 6 NICs of 50 GB/s under Hopper: one channel each at 48 (288 GB/s; 12 at 24 carry
    # no more); below 50 with more than 4 channels: not doubled; twice: 12, and NCCL
    # doubles Hopper rings across nodes again under 16 channels above 45 GB/s: 24.
    routes = [[(i, 50.0)] for i in range(6)]
    assert across_nodes_channels("hopper", 370.8, 8, routes) == (6, 24, 48.0)
    # The same on Ampere (below 50 GB/s only Hopper on keeps more than 4 channels): 6 at
    # 48, doubled to 12 at 24 (6 at 28 would not keep 12), twice: 24, no second
    # doubling before Hopper.
    assert across_nodes_channels("ampere", 370.8, 8, routes) == (12, 24, 24.0)
    # With 240 GB/s of NVLink the node's GPUs carry 7 of 8 GPUs' share of each channel:
    # at 48 GB/s 240 x 8 / (7 x 48) = 5.7, so 5; doubled to 10 at 24; twice: 20.
    assert across_nodes_channels("ampere", 240.0, 8, routes) == (10, 20, 24.0)
    # Two routes sharing a 24 GB/s link to 12.5 GB/s NICs: one channel each at 12 (the
    # fastest speed within a NIC), below 25: not doubled.
    shared = [[(0, 24.0), (1, 12.5)], [(0, 24.0), (2, 12.5)]]
    assert across_nodes_channels("ampere", 240.0, 1, shared) == (2, 4, 12.0)


@pytest.mark.parametrize(("topo", "expected"), [
    # Public NCCL logs: "24 coll channels" on one node of 8 H100 or 8 A100.
    (sc.topology.dgx_a100(1), 24),
    (sc.topology.dgx_h100(1), 24),
    # "16 coll channels" on 2 x 8 H100: 8 at 48 GB/s, one per 50 GB/s NIC; not doubled
    # below 50 GB/s; twice: 16 (not under 16 for the Hopper doubling).
    (sc.topology.dgx_h100(2), 16),
    (sc.topology.dgx_h100(8), 16),
    # DGX A100: NICs of 25 GB/s behind 24 GB/s PCIe links: 8 at 24, not doubled: 16.
    (sc.topology.dgx_a100(2), 16),
    # 16 x 100 Gb/s RoCE: 16 at 12 (two per GPU's 24 GB/s link), not doubled: 32.
    (sc.topology.dgx_a100(2, nics_per_node=16, nic_bandwidth=12.5 * GBS), 32),
    # Two GPUs per 25 GB/s NIC: 4 channels at 24, not doubled: 8.
    (sc.topology.dgx_a100(2, nics_per_node=4), 8),
])
def test_presets_run_nccls_channels(topo, expected):
    machine = describe(topo, tuple(range(topo.nranks)))
    assert machine.channels == expected
    assert machine.graph_channels == expected // 2  # none doubled a second time
    assert max_channels(machine, "ring") == max_channels(machine, "tree") == expected


@pytest.mark.parametrize(("topo", "arch", "expected"), [
    # 8 GPUs, 4 per Gen4 switch (24 GB/s links), peer to peer: a ring crosses each link
    # once each way, so 24 // speed channels: 1 at 20, 18, 15, 2 at 12 fill 24; below 25
    # not doubled, 15 does not fit 2; twice: 4.
    (sc.topology.pcie_node(8), "ampere", (4, 2, 12.0)),
    # The same without peer to peer: every hop goes up to the CPU and down, so each
    # uplink carries 4 hops each way, 24 // (4 x speed): none from 20 to 7, 1 at 6 (5 and
    # 4 no more, 2 at 3 only as much, 3 the last speed); twice: 2 (public logs of 8 RTX
    # 4090 through SHM: "2 coll channels").
    (sc.topology.pcie_node(8, p2p=False), "ampere", (2, 1, 6.0)),
    # 3 GPUs on one switch without peer to peer: 3 hops each way on the uplink: 1 at 7,
    # 2 at 4 (8 > 7; 3 gives 6); twice: 4.
    (sc.topology.pcie_node(3, p2p=False), "ampere", (4, 2, 4.0)),
    # 4 GPUs each on its own Gen5 root port (48 GB/s) without peer to peer: each link
    # once each way; 1 at 40 (30 no more, 2 at 20 only as much, 18 below 0.49 of 40);
    # 40 >= 25: doubled to 2 at 20, 30 does not fit 2; twice: 4.
    (sc.topology.pcie_node(4, gen=5, p2p=False, gpus_per_switch=1), "ampere",
     (4, 2, 20.0)),
    # Two sockets joined at NCCL's 16 GB/s for AMD, Gen5 switches: the socket link
    # carries one hop each way; none from 40 to 18, 1 at 15 (12 down to 9 no more, 7
    # below 0.49 of 15); not doubled; twice: 2.
    (sc.topology.pcie_node(8, gen=5, sockets=2), "ampere", (2, 1, 15.0)),
    # Blackwell's speeds (an RTX 5090 is compute capability 12.0) on two sockets joined
    # at 55.6 GB/s: 1 at 45, 40, 30, 2 at 24 fill 48; twice: 4 (public logs of 8 RTX
    # 5090 with peer to peer: 4).
    (sc.topology.pcie_node(8, gen=5, sockets=2, inter_socket_bandwidth=55.6 * GBS),
     "blackwell", (4, 2, 24.0)),
])
def test_one_node_over_pci_by_hand(topo, arch, expected):
    machine = describe(topo, tuple(range(topo.nranks)), arch=arch)
    assert (machine.channels, machine.graph_channels,
            machine.graph_channel_bw / GBS) == pytest.approx(expected, rel=1e-12)
    assert max_channels(machine, "ring") == expected[0]


def test_intel_root_complexes_weigh_pci_links_by_nccls_overhead():
    """NCCL's search takes 6/5 of a channel's speed on the PCI links of a path through
    an Intel CPU's root complex within a socket (``INTEL_P2P_OVERHEAD``). pcie_node(8)
    with Intel CPUs: the hops from one switch to the other cross GPU 3's and GPU 7's
    links, the uplinks and the links down at 1.2 x speed, so 24 // (1.2 x speed): 1 at
    20 (2 only at 10, no more), not doubled; twice: 2. Without peer to peer each uplink
    carries 4 x 1.2 x speed: 1 at 5, 2 run. AMD (or an unnamed vendor) keeps 4 and 2;
    across sockets (NCCL's PATH_SYS) the hops take no overhead."""
    def machine(cpu, **kwargs):
        topo = sc.topology.pcie_node(8, **kwargs)
        topo.cpu = cpu
        found = describe(topo, tuple(range(8)))
        return found.channels, found.graph_channels, found.graph_channel_bw / GBS

    assert machine("intel") == (2, 1, 20.0)
    assert machine("intel", p2p=False) == (2, 1, 5.0)
    assert machine("amd") == (4, 2, 12.0)
    assert machine("amd", p2p=False) == (2, 1, 6.0)
    assert machine("intel", gen=5, sockets=2, inter_socket_bandwidth=55.6 * GBS) == \
        machine("amd", gen=5, sockets=2, inter_socket_bandwidth=55.6 * GBS) == (4, 2, 20.0)


def _two_pci_nodes(nics: int, cpu: str = "unknown") -> Topology:
    """Two nodes of 4 GPUs, 2 on each of 2 PCIe switches (24 GB/s links) under one CPU,
    and a 100 Gb/s NIC (12.5 GB/s) on each of the first ``nics`` switches."""
    topo = Topology("two PCI nodes")
    net = topo.add_switch("net")
    for node in range(2):
        cpu_name = topo.add_switch(f"cpu{node}")
        topo.add_link(cpu_name, topo.add_switch(f"memory{node}"), bandwidth=200 * GBS,
                      kind="memory")
        for s in range(2):
            sw = topo.add_switch(f"pcie{node}.{s}")
            topo.add_link(sw, cpu_name, bandwidth=24 * GBS, kind="pcie")
            for g in range(2):
                topo.add_link(topo.add_gpu(f"gpu{node}.{2 * s + g}", node=node), sw,
                              bandwidth=24 * GBS, kind="pcie")
            if s < nics:
                nic = topo.add_nic(f"nic{node}.{s}")
                topo.add_link(sw, nic, bandwidth=24 * GBS, kind="pcie")
                topo.add_link(nic, net, bandwidth=12.5 * GBS, kind="ib")
    topo.cpu = cpu
    return topo


@pytest.mark.parametrize(("topo", "expected"), [
    # NCCL's pattern NET -> GPU 0 -> 1 -> 2 -> 3 -> NET: each channel takes the hops
    # 0 -> 1 -> 2 -> 3 (1 -> 2 up switch 0's uplink and down switch 1's) and leaves GPU 3
    # for the NIC on switch 0 (up switch 1's, down switch 0's): one crossing of each
    # uplink each way. The NIC (12.5 GB/s) bounds it: 1 at 12 (10, 9, 7 carry less, 2 at
    # 6 as much, 5 is below 0.49 of 12); not doubled below 25; twice: 2.
    (_two_pci_nodes(1), (2, 1, 12.0, 12.0)),
    # The tree (2 nodes) keeps that speed inside the node: GPU 0's own link carries
    # its way to the NIC at 12 and the hop to GPU 1 at a raised 15 (27 > 24); so below.
    # A NIC on each switch: channel 0 leaves by NIC 0 (through the CPU), channel 1 by
    # NIC 1 (from GPU 3's own switch), and enters the next node by its NIC 1, up switch
    # 1's uplink and down switch 0's there. Switch 0's uplink up carries the hop 1 -> 2
    # of both: 2 x 12 = 24, full; 2 at 12 carry a GPU's whole 24 GB/s: the search stops.
    (_two_pci_nodes(2), (4, 2, 12.0, 12.0)),
    # Intel CPUs: the hop 1 -> 2 and channel 0's way from GPU 3 to NIC 0 cross a root
    # complex, so their PCI links take 1.2 x the speed. At 12 the second channel does
    # not fit GPU 3's link (1.2 x 12 + 12 > 24) nor NIC 0 (taken): 1 at 12; at 10 both
    # fit (switch 0's uplink up: 2 x 1.2 x 10 = 24): 2 at 10 = 20, more; 9, 7, 6 and 5
    # give no more, 4 is below 0.49 of 10; not raised to 12; twice: 4.
    (_two_pci_nodes(2, cpu="intel"), (4, 2, 10.0, 10.0)),
    # The route from GPU 3 to the next node through the node switch's 25 GB/s uplink:
    # 1 at 24, not doubled below 25, 28 does not fit; twice: 2 (4 before 2026-12-04,
    # when the search across nodes over PCI was not modelled). The tree's chain crosses
    # 300 GB/s links only: its speed inside the node rises to 28, 30 and 48 (twice 24).
    (sc.topology.cluster(2, 4, intra_kind="pcie"), (2, 1, 24.0, 48.0)),
])
def test_across_nodes_over_pci_by_hand(topo, expected):
    machine = describe(topo, tuple(range(8)))
    assert machine.intra == "pci"
    assert (machine.channels, machine.graph_channels, machine.graph_channel_bw / GBS,
            machine.tree_channel_bw / GBS) == pytest.approx(expected, rel=1e-12)
    assert max_channels(machine, "ring") == expected[0]


def test_two_servers_of_four_pci_gpus_and_four_10g_nics_as_nccls_log():
    """NCCL issue #601 (2021): two servers of 4 GPUs on two CPU sockets (a GPU's path to
    the other GPU of its socket PHB at 12 GB/s, across sockets SYS at 6), two 10 GbE
    NICs (1.25 GB/s) on each socket, NCCL's log: "Pattern 4, crossNic 0, nChannels 4,
    speed 1.200000/1.200000", one channel per NIC. By hand: the NICs bound the speed
    (1.2, the fastest within 1.25); each NIC carries one channel, and the socket link
    carries the hop GPU 1 -> 2 of all four (4.8 of 6) one way and the ways from GPU 3
    to the first socket's NICs (2.4) the other; 0.24 is below 0.49 of 1.2; not
    doubled; twice: 8."""
    topo = Topology("issue 601")
    net = topo.add_switch("ethernet")
    for node in range(2):
        cpus = []
        for s in range(2):
            cpu = topo.add_switch(f"cpu{node}.{s}")
            topo.add_link(cpu, topo.add_switch(f"memory{node}.{s}"), bandwidth=100 * GBS,
                          kind="memory")
            cpus.append(cpu)
            for g in range(2):
                topo.add_link(topo.add_gpu(f"gpu{node}.{2 * s + g}", node=node), cpu,
                              bandwidth=12 * GBS, kind="pcie")
            for k in range(2):
                nic = topo.add_nic(f"nic{node}.{2 * s + k}")
                topo.add_link(nic, cpu, bandwidth=12 * GBS, kind="pcie")
                topo.add_link(nic, net, bandwidth=1.25 * GBS, kind="ethernet")
        topo.add_link(cpus[0], cpus[1], bandwidth=6 * GBS, kind="inter_socket")
    machine = describe(topo, tuple(range(8)))
    assert (machine.channels, machine.graph_channels,
            machine.graph_channel_bw / GBS) == pytest.approx((8, 4, 1.2), rel=1e-12)
    # Each GPU reaches its NICs through its CPU's root complex: NCCL's PATH_PHB.
    assert machine.nic_path == "phb"


def test_uneven_nodes_keep_the_fewest_channels_any_node_found():
    """NCCL searches each node's graph on its own GPUs and NICs, and every rank keeps
    the fewest channels and the lowest speed any found (init.cc). GPUs 0-2 of one DGX
    H100 and GPU 8 of the other: node 0's three GPUs all reach GPU 8's one NIC (48 GB/s
    to NCCL's Hopper speeds): 1 at 48 (2 at 24 as much), doubled (one channel is not
    more than 4) to 2 at 24; GPU 8 alone finds the same (as one GPU of each of 4 nodes
    does below); twice: 4 (16 before 2026-12-04). The tree graph inside a node: node 0
    raises 24 to 48 (2 x 48 x 2 hops within 3 x 370.8), GPU 8 has no chain: 48. Where
    both nodes hold several GPUs (8 and 4) each finds 8 channels at 24: 16 run."""
    machine = describe(sc.topology.dgx_h100(2), (0, 1, 2, 8))
    assert (machine.channels, machine.graph_channels, machine.graph_channel_bw / GBS,
            machine.tree_channel_bw / GBS) == (4, 2, 24.0, 48.0)
    assert machine.lone_gpu_node and machine.uneven_nodes
    machine = describe(sc.topology.dgx_h100(2), tuple(range(12)))
    assert (machine.channels, machine.graph_channels,
            machine.graph_channel_bw / GBS) == (16, 8, 24.0)


def _two_nodes(nvlink: tuple[float, float], nic: float = 48 * GBS,
               net: float = 50 * GBS) -> Topology:
    """Two nodes of 4 GPUs on an NVSwitch each (links of ``nvlink[node]`` bytes/s), a
    PCIe NIC of ``nic`` bytes/s per GPU and a network of ``net``."""
    topo = Topology(f"two nodes {nvlink}")
    fabric = topo.add_switch()
    for node, bandwidth in enumerate(nvlink):
        nvswitch = topo.add_switch()
        for _ in range(4):
            gpu = topo.add_gpu(node=node)
            topo.add_link(gpu, nvswitch, bandwidth=bandwidth, latency=5e-7, kind="nvswitch")
            card = topo.add_nic()
            topo.add_link(gpu, card, bandwidth=nic, latency=1e-6, kind="pcie")
            topo.add_link(card, fabric, bandwidth=net, latency=1e-6, kind="ib")
    return topo


def test_nodes_of_one_size_but_other_links_are_each_searched():
    """Every rank keeps the fewest channels and the lowest speed any node found (init.cc),
    so a node of slow NVLink slows both, whichever comes first. Nodes of one size were
    taken to be alike: the fast node first, its search alone counted."""
    def found(topo: Topology) -> tuple:
        m = describe(topo, tuple(range(8)), "hopper")
        return m.channels, m.graph_channels, m.graph_channel_bw, m.tree_channel_bw

    fast, slow = 240 * GBS, 40 * GBS
    both_slow, both_fast = found(_two_nodes((slow, slow))), found(_two_nodes((fast, fast)))
    assert both_slow != both_fast   # the slow links change what a search finds
    assert found(_two_nodes((fast, slow))) == found(_two_nodes((slow, fast))) == both_slow
    # NCCL keeps the lowest bwIntra any rank found: the slow node's 40 GB/s.
    for order in ((fast, slow), (slow, fast)):
        assert describe(_two_nodes(order), tuple(range(8)), "hopper").intra_bw == slow


def _nic_behind_cpu(behind: tuple[bool, bool]) -> Topology:
    """Two nodes of 2 GPUs on an NVSwitch, each GPU with a NIC on its own PCIe switch, or
    (``behind[node]``) reached through a CPU's root complex (a switch linked to host
    memory)."""
    topo = Topology(f"nic behind cpu {behind}")
    fabric = topo.add_switch()
    for node, through_cpu in enumerate(behind):
        nvswitch, cpu, memory = topo.add_switch(), topo.add_switch(), topo.add_switch()
        topo.add_link(cpu, memory, bandwidth=200 * GBS, kind="memory")
        for _ in range(2):
            gpu = topo.add_gpu(node=node)
            topo.add_link(gpu, nvswitch, bandwidth=240 * GBS, kind="nvswitch")
            pcie, nic = topo.add_switch(), topo.add_nic()
            topo.add_link(gpu, pcie, bandwidth=24 * GBS, kind="pcie")
            topo.add_link(pcie, cpu, bandwidth=24 * GBS, kind="pcie")
            topo.add_link(cpu if through_cpu else pcie, nic, bandwidth=24 * GBS,
                          kind="pcie")
            topo.add_link(nic, fabric, bandwidth=25 * GBS, kind="ib")
    return topo


def test_the_farthest_nic_path_of_any_node_counts():
    """NCCL keeps the farthest typeInter any rank's graph found (init.cc): a node whose
    NICs hang off the CPU (PATH_PHB) makes it "phb" whichever node comes first; a node's
    own NICs behind its PCIe switches are "pxb". Only the first node was read."""
    def path(behind: tuple[bool, bool]) -> str:
        return describe(_nic_behind_cpu(behind), tuple(range(4)), "hopper").nic_path

    assert path((False, False)) == "pxb" and path((True, True)) == "phb"
    assert path((False, True)) == path((True, False)) == "phb"


def test_fewest_takes_each_least_then_doubles_as_postset():
    found = [Searched(8, 16, 48.0), Searched(2, 4, 24.0), Searched(6, 24, 30.0)]
    assert fewest(found, "ampere") == Searched(2, 4, 24.0)
    # Hopper doubles again where fewer than 16 run above 45 GB/s.
    assert fewest([Searched(4, 16, 48.0), Searched(6, 12, 48.0)], "hopper") == \
        Searched(4, 16, 48.0)
    assert fewest([Searched(4, 16, 48.0), Searched(6, 12, 45.0)], "hopper") == \
        Searched(4, 8, 45.0)


@pytest.mark.parametrize(("topo", "ranks", "expected"), [
    # One GPU per node, 25 GB/s to the network: 1 channel at 24 (the fastest speed within
    # 25; 12 x 2 carry no more, 10 is below 0.49 of 24), not doubled below 25; twice: 2.
    # A public log of two such nodes (24 GB/s PCIe to a 25 GB/s NIC): "maxBw 24.0
    # totalBw 24.0", "Pattern 4, crossNic 0, nChannels 1, bw 24.000000/24.000000", "2
    # coll channels".
    (sc.topology.cluster(4, 1), range(4), (2, 1, 24.0)),
    # 50 GB/s to the network on Ampere: 1 at 48, doubled to 2 at 24 (1 channel is not
    # more than 4), 28 does not fit 2; twice: 4.
    (sc.topology.cluster(2, 1, inter_bandwidth=50 * GBS), range(2), (4, 2, 24.0)),
    # One H100 of each of 4 DGX H100 nodes, its own 400 Gb/s NIC: 1 at 48 (Hopper keeps
    # more than 4 channels below 50, not 1), doubled to 2 at 24; twice: 4, not doubled
    # again (24 is not above 45).
    (sc.topology.dgx_h100(4), (0, 8, 16, 24), (4, 2, 24.0)),
])
def test_nodes_of_one_gpu_by_hand(topo, ranks, expected):
    machine = describe(topo, tuple(ranks))
    assert (machine.channels, machine.graph_channels,
            machine.graph_channel_bw / GBS) == pytest.approx(expected, rel=1e-12)
    assert max_channels(machine, "tree") == expected[0]


@pytest.mark.parametrize("nbytes, channels", [(32764, 1), (32768, 2), (48 << 10, 2)])
def test_a_slow_ring_trims_simple_by_its_256_threads(nbytes, channels):
    """pcie_node(8, p2p=False): NCCL's ring graph is 1 channel of 6 GB/s, at most PCI_BW
    (12 GB/s), so ring Simple runs 256 threads a channel (``simpleDefaultThreads``,
    tuning.cc) and keeps 2 channels from 2 x 256 x 64 = 32 KiB; 512 threads would keep
    1 up to 64 KiB."""
    res = sc.simulate(sc.topology.pcie_node(8, p2p=False), "all_reduce", algorithm="nccl",
                      nbytes=nbytes, algo="ring", proto="Simple")
    assert res.params["channels"] == channels


def test_a_fast_ring_trims_simple_by_its_512_threads():
    """One DGX A100 (24 channels of 12 x 20 GB/s graph channels, far above PCI_BW): 512
    threads a channel, so 64 KiB keeps 65,536 / (512 x 64) = 2 channels, 96 KiB 3."""
    topo = sc.topology.dgx_a100(1)
    for nbytes, channels in ((64 << 10, 2), (96 << 10, 3), ((96 << 10) - 4, 2)):
        res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=nbytes, algo="ring",
                          proto="Simple")
        assert res.params["channels"] == channels


def test_collnet_adds_half_the_channels_where_chain_is_faster_inside_a_node():
    """NCCL_COLLNET_ENABLE=1 on 2 DGX A100 with SHARP: CollNet Chain's graph moves 30
    GB/s inside a node against 24 to the network, and a node holds 8 GPUs, so NCCL opens
    16 + 16 / 2 = 24 channels for every algorithm (ncclTopoPostset, connect.cc); on DGX
    H100 nodes (48 GB/s both ways) it keeps 16. NVLS across nodes runs on at most the
    communicator's channels: on DGX H100 nodes of two NICs (ring graph 4 x 24 GB/s,
    doubled to 8; Chain 48 inside against 24 out: 12) 12 of its 16 (2.30.7; 2.26.2's
    tuner runs its 16)."""
    a100 = sc.topology.dgx_a100(2, sharp=True)
    for algo in ("ring", "tree", "collnet_chain", "collnet_direct"):
        res = sc.simulate(a100, "all_reduce", algorithm="nccl", nbytes=1 << 30, algo=algo,
                          collnet=1)
        assert res.params["channels"] == 24, algo
    plain = sc.simulate(a100, "all_reduce", algorithm="nccl", nbytes=1 << 30, algo="ring")
    assert plain.params["channels"] == 16
    assert graph_lines(a100)[0] == \
        "ring    nChannels 8, bw 24.0/24.0; 16 coll channels (24 with collnet=1)"
    h100 = sc.simulate(sc.topology.dgx_h100(2, sharp=True), "all_reduce", algorithm="nccl",
                       nbytes=1 << 30, algo="ring", collnet=1)
    assert h100.params["channels"] == 16
    two_nics = sc.topology.dgx_h100(2, nics_per_node=2, sharp=True)
    machine = describe(two_nics, tuple(range(16)))
    assert (machine.graph_channels, machine.channels, machine.graph_channel_bw / GBS) == \
        (4, 8, 24)
    for tuner, channels in (("2.30.7", 12), ("2.26.2", 16)):
        res = sc.simulate(two_nics, "all_reduce", algorithm="nccl", nbytes=64 << 20,
                          algo="nvls", collnet=1, tuner=tuner)
        assert res.params["channels"] == channels, tuner


@pytest.mark.parametrize("nvlink, graph", [(20, (1, 20.0)), (30, (2, 15.0)), (40, (2, 20.0))])
def test_a_ring_across_nodes_runs_no_faster_than_a_gpu_s_nvlink(nvlink, graph):
    """A channel across nodes leaves 3 of a node's 4 GPUs over their own NVLink, so n
    channels put ceil(3n / 4) on some GPU's link (NCCL's search takes a channel's speed
    on every link it crosses). By hand down Ampere's speeds (24, 20, 18, 15, ...; the
    NICs' 24 GB/s first): at 20 GB/s of NVLink one channel of 24 does not fit, one of 20
    does (two would put two on a GPU); at 30, one of 24 or 20, two of 15 (30 in all);
    at 40, two of 20. The search pooled the node's NVLink and gave 1 x 24, 2 x 20 and
    2 x 24."""
    topo = _two_nodes((nvlink * GBS, nvlink * GBS), nic=24 * GBS, net=25 * GBS)
    machine = describe(topo, tuple(range(8)))
    assert (machine.graph_channels, machine.graph_channel_bw / GBS) == graph
    # The tree graph's pass 2 raises its speed inside a node only while its chains fit
    # the same way: at 20 GB/s one chain of 24 does not; at 30 two of 18 put two on a
    # GPU (36); at 40 two of 24 (48). It stays at the ring's speed (it rose to 24, 20
    # and 24 with the node's NVLink pooled).
    assert machine.tree_channel_bw == machine.graph_channel_bw


def test_collnet_s_extra_channels_come_before_blackwell_s_doubling():
    """ncclTopoPostset doubles the ring graph's channels, adds half as many with
    CollNet, and only then doubles again from Hopper on where fewer than 16 run above
    45 GB/s: 2 Blackwell nodes of 6 GPUs, each with a 50 GB/s NIC (ring graph 6 x 48),
    run 12 -> 24 without CollNet, 12 -> 18 with it (18 is not below 16), not 24 + 12."""
    topo = dgx(2, nvlink_bandwidth=900 * GBS, pcie_bandwidth=48 * GBS,
               nic_bandwidth=50 * GBS, gpus_per_node=6, nics_per_node=6, sharp=True,
               nvswitch_reduce_bandwidth=1.86e12)
    machine = describe(topo, tuple(range(12)), "blackwell")
    assert (machine.graph_channels, machine.graph_channel_bw / GBS) == (6, 48.0)
    channels = [sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 30,
                            algo="ring", proto="Simple", arch="blackwell",
                            collnet=collnet).params["channels"] for collnet in (0, 1)]
    assert channels == [24, 18]


def test_a_node_without_peer_to_peer_runs_two_channels_and_sums_right():
    """pcie_node(8, p2p=False): NCCL's tuner reasons on 1 channel at 6 GB/s (a ring
    with Simple: a GiB more takes 2^30 / (6 GB/s x 8 / 14) more), and 64 MiB runs on 2
    channels; a data run's output is numpy's."""
    topo = sc.topology.pcie_node(8, p2p=False)
    machine = describe(topo, tuple(range(8)))
    gib = 1 << 30
    step = (predict(machine, "all_reduce", 2 * gib, "ring", "Simple", 2)
            - predict(machine, "all_reduce", gib, "ring", "Simple", 2))
    assert step == pytest.approx(gib / (6e9 * 8 / 14), rel=1e-9)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=64 << 20)
    assert res.params["channels"] == 2
    rng = np.random.default_rng(5)
    data = [rng.standard_normal(1 << 12) for _ in range(8)]
    checked = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data)
    assert checked.correct
    np.testing.assert_allclose(checked.outputs[6], np.sum(data, axis=0), rtol=0, atol=1e-12)


def test_a_large_ring_runs_on_nccls_channels_and_sums_right():
    """1 GiB on one DGX A100 runs on all 24 channels (n / 24 a channel: every GPU's
    NVLink out carries 2 (p - 1) / p x n, whatever the count), and a data run's output is
    numpy's."""
    topo = sc.topology.dgx_a100(1)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 30)
    assert (res.params["algo"], res.params["channels"]) == ("ring", 24)
    assert res.link_bytes[("gpu0", "nvswitch0")] == 2 * 7 * (1 << 30) // 8
    rng = np.random.default_rng(4)
    data = [rng.standard_normal(1 << 15) for _ in range(8)]
    checked = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, algo="ring",
                          proto="Simple", channels=24)
    assert checked.correct
    np.testing.assert_allclose(checked.outputs[3], np.sum(data, axis=0), rtol=0, atol=1e-12)


def test_the_tuners_caps_count_the_graphs_channels():
    """NCCL's tuner caps a tree's bus bandwidth at the ring graph's channels times a
    channel's cap (tuning.cc: ``graphs[a]->nChannels * perChMaxTreeBw``), whatever the
    run opens. On dgx_h100(2), 8 graph channels at 48 GB/s: min(384 x 0.92, 8 x 41.4) =
    331.2 GB/s, then with LL128 min(331.2 x 120/128, 8 x 36.7) = 293.6, times 0.85 for the
    plain tree pattern (one NIC per GPU); a tree's algbw is half its bus bandwidth. Two
    sizes past the tree's correction factors differ by 1 GiB over it. With 16 channels
    counted the cap would be 310.5 GB/s."""
    machine = describe(sc.topology.dgx_h100(2), tuple(range(16)))
    assert machine.graph_channels == 8
    gib = 1 << 30
    for channels in (16, 4):  # NCCL_MAX_NCHANNELS does not change the graph it counts
        step = (predict(machine, "all_reduce", 2 * gib, "tree", "LL128", channels)
                - predict(machine, "all_reduce", gib, "tree", "LL128", channels))
        assert step == pytest.approx(gib / (1000 * 293.6 * 0.85 / 2) * 1e-6, rel=1e-9)


@pytest.mark.parametrize(("topo", "bus"), [
    # One H100 node: 12 graph channels at 30 GB/s, 360 GB/s (not the 370.8 of its links).
    (sc.topology.dgx_h100(1), 12 * 30.0),
    # Two DGX H100: 8 at 48, 384 GB/s (above the 370.8 of a GPU's NVLink).
    (sc.topology.dgx_h100(2), 8 * 48.0),
])
def test_the_tuners_ring_bandwidth_is_the_graphs_channels_times_their_speed(topo, bus):
    """NCCL's bus bandwidth of a ring with Simple is ``graphs[a]->nChannels * bw``
    (tuning.cc), its algbw bus x p / (2 (p - 1)) for all_reduce: a GiB more takes
    1 GiB / algbw more."""
    machine = describe(topo, tuple(range(topo.nranks)))
    p, gib = topo.nranks, 1 << 30
    step = (predict(machine, "all_reduce", 2 * gib, "ring", "Simple", 16)
            - predict(machine, "all_reduce", gib, "ring", "Simple", 16))
    assert step == pytest.approx(gib / (bus * 1e9 * p / (2 * (p - 1))), rel=1e-9)


@pytest.mark.parametrize(("topo", "ranks", "tree"), [
    # Two nodes of one GPU, 1 ring channel at 24 GB/s: no chain inside a node, so the
    # tree's bwIntra rises 28, 30, 48 and stops at twice 24 (a public log of such a
    # pair: "Pattern 3, crossNic 0, nChannels 1, bw 48.000000/24.000000").
    (sc.topology.cluster(2, 1), range(2), 48.0),
    # Four such nodes: the tuner reads bwInter beyond two nodes, the ring's 24.
    (sc.topology.cluster(4, 1), range(4), 24.0),
    # Two DGX A100, 8 channels at 24: chains of 8 x 28 = 224 and 8 x 30 = 240 GB/s fit a
    # GPU's 240 of NVLink, 8 x 48 does not: 30.
    (sc.topology.dgx_a100(2), range(16), 30.0),
    # 16 x 100 Gb/s: 16 channels at 12; 16 x 15 = 240 fits, 16 x 18 does not: 15.
    (sc.topology.dgx_a100(2, nics_per_node=16, nic_bandwidth=12.5 * GBS), range(16), 15.0),
    # Two DGX H100: 48 is the fastest speed there is.
    (sc.topology.dgx_h100(2), range(16), 48.0),
    # One node: the ring's.
    (sc.topology.dgx_a100(1), range(8), 20.0),
])
def test_the_tree_graphs_speed_by_hand(topo, ranks, tree):
    assert describe(topo, tuple(ranks)).tree_channel_bw == tree * GBS


def test_the_tuners_tree_bandwidth_on_two_nodes_reads_the_tree_graph():
    """tuning.cc reads ``bwIntra`` on two nodes: on dgx_a100(2) a tree's Simple bus
    bandwidth is min(8 x 30 x 0.92, 8 x 23.6) = 188.8 GB/s (with the ring's 24 it would
    be 176.6), its algbw half that."""
    machine = describe(sc.topology.dgx_a100(2), tuple(range(16)))
    gib = 1 << 30
    step = (predict(machine, "all_reduce", 2 * gib, "tree", "Simple", 16)
            - predict(machine, "all_reduce", gib, "tree", "Simple", 16))
    assert step == pytest.approx(gib / (188.8e9 / 2), rel=1e-9)


def test_a_channel_that_runs_moves_its_share_of_a_graph_channels_cap():
    """NCCL runs each graph channel twice (``ncclTopoPostset``), so a running channel of
    a ring with LL128 on dgx_h100(2) moves at most half of ``perChMaxRingLL128Bws``' 36.7
    GB/s: 64 MiB on one channel takes 2 (p - 1) / p x n at 18.35 GB/s and the last
    slice's way to its last rank (its steps' latencies, some 20 us, and as much again
    where a block's last chunk is smaller than its full ones: 7 slices of 576,000 bytes
    and 162,304), within 0.6%; a channel at the whole 36.7 GB/s would take half as
    long."""
    n = 64 << 20
    res = sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl", nbytes=n,
                      algo="ring", proto="LL128", channels=1)
    paced = 2 * 15 / 16 * n / 18.35e9
    assert paced < res.time < 1.006 * paced
    assert channel_rate("LL128", "ring", "hopper", 2, 1, share=0.5) == 18.35e9


@pytest.mark.parametrize(("args", "expected"), [
    # One node of 8 H100 (370.8 GB/s each): every GPU heads a channel; a channel takes its
    # speed on every GPU's NVLink, twice on its head's, so 9 x speed must fit. The search
    # starts at 40 (8 x 60 and 8 x 50 exceed 370.8), and 9 x 40 = 360 fits.
    # Pass 2 raises bwInter while below 2 x 40: 50, 60, the array's top.
    (("hopper", 370.8, 8), HeadsGraph(8, 40.0, 60.0)),
    # Across DGX H100 nodes (8 NICs of 48 GB/s): 6 at 48 (7 x 48 = 336; 8 x 48 = 384 is
    # over), 7 at 45, 8 at 40, every head used: done. bwInter then rises to 42, 45, 48.
    (("hopper", 370.8, 8, 8, 48.0), HeadsGraph(8, 40.0, 48.0)),
    # 4 NICs: 4 heads at most, at 48 already (5 x 48 fits).
    (("hopper", 370.8, 8, 4, 48.0), HeadsGraph(4, 48.0, 48.0)),
    # Blackwell, one node of 721.8 GB/s: 8 x 90 = 720 is within it, but 9 x 90 = 810
    # is not; 9 x 80 = 720 fits. bwInter: 90.
    (("blackwell", 721.8, 8), HeadsGraph(8, 80.0, 90.0)),
    # 25 GB/s NICs on Hopper: the first speed within them is 24; 9 x 24 fits.
    (("hopper", 370.8, 8, 8, 25.0), HeadsGraph(8, 24.0, 24.0)),
    # 20 GB/s of NVLink for 8 GPUs on one node: 9 x 3 (the slowest speed) = 27 > 20.
    (("hopper", 20.0, 8), HeadsGraph(0, 0.0, 0.0)),
])
def test_the_nvls_graph_by_hand(args, expected):
    assert nvls_graph(*args) == expected


def random_pci_node(seed: int) -> sc.topology.Topology:
    """One node: a root complex and a random tree of PCIe switches under it, GPUs on
    random switches, each link of 12, 24 or 48 GB/s (uneven), with random latencies."""
    rng = np.random.default_rng(seed)
    topo = sc.topology.Topology(f"pci {seed}")
    switches = [topo.add_switch("root")]
    for _ in range(int(rng.integers(0, 4))):
        sw = topo.add_switch()
        topo.add_link(sw, switches[int(rng.integers(len(switches)))], kind="pcie",
                      bandwidth=float(rng.choice([12, 24, 48])) * GBS,
                      latency=float(rng.uniform(0.1, 2)) * 1e-6)
        switches.append(sw)
    for _ in range(int(rng.integers(2, 9))):
        topo.add_link(topo.add_gpu(), switches[int(rng.integers(len(switches)))],
                      kind="pcie", bandwidth=float(rng.choice([12, 24, 48])) * GBS,
                      latency=float(rng.uniform(0.1, 2)) * 1e-6)
    return topo


@pytest.mark.parametrize("seed", range(40))
def test_the_pci_search_keeps_every_link_within_its_bandwidth(seed):
    """On random PCI nodes, worked out independently of the search: the ring over the
    GPUs in rank order loads each directed link once per hop crossing it; the graph's
    channels at their speed fit every link; no faster speed of the array carries as
    many (pass 2 raised the speed as far as it goes); the speed is one of the array's or
    half of one (``ncclTopoDupChannels``); every graph channel runs twice."""
    topo = random_pci_node(seed)
    p = topo.nranks
    machine = describe(topo, tuple(range(p)))
    uses: dict[int, int] = {}
    for r in range(p):
        for d in topo.route(r, (r + 1) % p).links:
            uses[d] = uses.get(d, 0) + 1
    bandwidth = {d: topo.links[d >> 1].bandwidth / GBS for d in uses}
    speed, graph = machine.graph_channel_bw / GBS, machine.graph_channels

    def carried(v):
        return min(32, min(int(bandwidth[d] * (1 + 1e-9) // (n * v)) for d, n in uses.items()))

    speeds = sc.algorithms.nccl.search.INTRA_SPEEDS["ampere"]
    assert graph >= 1 and machine.channels == 2 * graph
    assert speed in speeds or 2 * speed in speeds
    assert carried(speed) >= graph
    assert all(carried(v) < graph for v in speeds if v > speed)


def random_pci_nodes(seed: int) -> sc.topology.Topology:
    """Two alike nodes: each a random tree of PCIe switches under a root, GPUs and one
    NIC on random switches, links of 12, 24 or 48 GB/s (the NIC's to the network 12.5,
    25 or 50), both NICs on one network switch."""
    rng = np.random.default_rng(seed)
    parents = [int(rng.integers(k + 1)) for k in range(int(rng.integers(0, 4)))]
    rates = [float(rng.choice([12, 24, 48])) for _ in range(16)]
    homes = [int(rng.integers(len(parents) + 1)) for _ in range(int(rng.integers(2, 6)))]
    nic_home, nic_rate = int(rng.integers(len(parents) + 1)), float(rng.choice([12.5, 25, 50]))
    topo = sc.topology.Topology(f"pci nodes {seed}")
    net = topo.add_switch("net")
    for node in range(2):
        switches = [topo.add_switch(f"root{node}")]
        for k, parent in enumerate(parents):
            sw = topo.add_switch()
            topo.add_link(sw, switches[parent], kind="pcie", bandwidth=rates[k] * GBS)
            switches.append(sw)
        for g, home in enumerate(homes):
            topo.add_link(topo.add_gpu(node=node), switches[home], kind="pcie",
                          bandwidth=rates[4 + g] * GBS)
        nic = topo.add_nic(f"nic{node}")
        topo.add_link(nic, switches[nic_home], kind="pcie", bandwidth=rates[10] * GBS)
        topo.add_link(nic, net, kind="ib", bandwidth=nic_rate * GBS)
    return topo


@pytest.mark.parametrize("seed", range(40))
def test_the_search_across_pci_nodes_keeps_every_link_within_its_bandwidth(seed):
    """On two random PCI nodes of one NIC each, worked out independently of the search:
    a channel crosses node 0's hops from its first GPU to its last and the route from
    the last to node 1's first GPU (through both NICs); the graph's channels at their
    speed fit every link; no faster speed of the array carries as many; the speed is
    one of the array's or half of one; every graph channel runs twice."""
    topo = random_pci_nodes(seed)
    g = topo.nranks // 2
    machine = describe(topo, tuple(range(2 * g)))
    uses: dict[int, int] = {}
    for a, b in [(r, r + 1) for r in range(g - 1)] + [(g - 1, g)]:
        for d in topo.route(a, b).links:
            uses[d] = uses.get(d, 0) + 1
    bandwidth = {d: topo.bandwidth_of(d) / GBS for d in uses}
    speed, graph = machine.graph_channel_bw / GBS, machine.graph_channels

    def carried(v):
        return min(32, min(int(bandwidth[d] * (1 + 1e-9) // (n * v)) for d, n in uses.items()))

    speeds = sc.algorithms.nccl.search.INTER_SPEEDS["ampere"]
    assert machine.intra == "pci" and graph >= 1 and machine.channels == 2 * graph
    assert speed in speeds or 2 * speed in speeds
    assert carried(speed) >= graph
    assert all(carried(v) < graph for v in speeds if v > speed)


@pytest.mark.parametrize("seed", range(200))
def test_the_nvls_graph_fits_its_links(seed):
    """Random NVLink and NIC bandwidths: an NVLS graph's heads never exceed the GPUs,
    the NICs or 32; every GPU's NVLink carries its channels and its head's second share
    ((n + 1) x bwIntra); across nodes each head's NIC carries both speeds; a node's
    graph has every GPU head a channel, or none where even the slowest speed does not
    fit; bwInter never drops below bwIntra."""
    rng = np.random.default_rng(seed)
    arch = str(rng.choice(["hopper", "blackwell"]))
    nvlink = float(rng.uniform(10, 1000))
    gpus = int(rng.integers(2, 17))
    nics = int(rng.choice([0, int(rng.integers(1, 17))]))
    nic = float(rng.uniform(0.05, 120)) if nics else 0.0
    found = nvls_graph(arch, nvlink, gpus, nics, nic)
    speeds = sc.algorithms.nccl.search.INTER_SPEEDS[arch] if nics else \
        sc.algorithms.nccl.search.INTRA_SPEEDS[arch]
    if found.channels == 0:
        assert found == HeadsGraph(0, 0.0, 0.0)
        slowest = min(speeds)
        assert (gpus + 1) * slowest > nvlink if not nics else (
            nic < slowest or 2 * slowest > nvlink)
        return
    assert found.channels <= min(32, gpus, nics or gpus)
    assert (found.channels + 1) * found.intra <= nvlink * (1 + 1e-9)
    assert found.intra in speeds and found.inter in speeds
    assert found.intra <= found.inter
    if nics:
        assert found.inter <= nic * (1 + 1e-9)
    else:
        assert found.channels == gpus


@pytest.mark.parametrize(("args", "expected"), [
    # DGX A100 nodes, 8 NICs at 24 GB/s: 8 heads at 24 (a head's NVLink carries 24 x (1
    # + 7/7) of 240); not doubled below 25; bwIntra rises 28, 30, 48 (2 x 48 = 96 fits),
    # where it reaches twice 24.
    (("ampere", 240.0, 8, 8, 24.0), HeadsGraph(8, 48.0, 24.0)),
    # DGX H100 nodes, NICs of 48: 8 heads at 48, Hopper's fastest: nothing to raise.
    (("hopper", 370.8, 8, 8, 48.0), HeadsGraph(8, 48.0, 48.0)),
    # 4 NICs for 8 A100: 4 heads (a head carries 24 x (1 + 3/7)), bwIntra up to 48.
    (("ampere", 240.0, 8, 4, 24.0), HeadsGraph(4, 48.0, 24.0)),
    # 12.5 GB/s NICs on Ampere: 8 heads at 12; bwIntra 15, 18, 20, 24 (twice 12).
    (("ampere", 240.0, 8, 8, 12.5), HeadsGraph(8, 24.0, 12.0)),
    # 60 GB/s of NVLink for 8 GPUs, 48 GB/s NICs: at 48 a head of n channels carries
    # 48 x (1 + (n - 1) / 7), so 2 fit; 2 x 48 = 96 is already a GPU's 60: the search
    # stops there. Doubled (2 channels, not more than 4): 4 at 24; bwIntra rises 28, 30,
    # 40, 42 (a head of 4 carries 42 x 10/7 = 60), not 45.
    (("hopper", 60.0, 8, 8, 48.0), HeadsGraph(4, 42.0, 24.0)),
])
def test_the_collnet_direct_graph_by_hand(args, expected):
    assert collnet_direct_graph(*args) == expected


def test_the_tuner_reads_both_collnet_graphs_of_two_dgx_a100():
    direct, chain = collnet_graphs_of(describe(sc.topology.dgx_a100(2, sharp=True),
                                               tuple(range(16))))
    assert direct == HeadsGraph(8, 48.0, 24.0)
    # Chain: the ring graph's 8 channels at 24, raised while 8 x speed x 7/8 fits 240.
    assert chain == HeadsGraph(8, 30.0, 24.0)


def test_postset_caps_channels_at_maxchannels_64():
    """connect.cc ``ncclTopoPostset``: every ring twice, ``std::min(MAXCHANNELS,
    nChannels * 2)``, CollNet's half again, also capped at MAXCHANNELS = 64
    (src/include/device.h)."""
    assert postset(24, 20.0, "ampere", False) == 48
    assert postset(24, 20.0, "ampere", False, collnet=True) == 64    # 48 + 24 capped
    assert postset(40, 20.0, "ampere", False) == 64


def test_intel_across_sockets_takes_no_p2p_overhead_on_pcie_gen4():
    """search.cc weighs PCI links by INTEL_P2P_OVERHEAD only on paths through an Intel
    root complex within one socket (PATH_PHB), not across sockets (PATH_SYS): two-socket
    PCIe Gen4 servers search alike with Intel and AMD CPUs. (Gen5 has the slack to hide
    the 6/5; Gen4 does not.)"""

    def machine(cpu):
        topo = sc.topology.pcie_node(8, gen=4, sockets=2, inter_socket_bandwidth=100e9)
        topo.cpu = cpu
        found = describe(topo, tuple(range(8)))
        return found.channels, found.graph_channels, found.graph_channel_bw

    assert machine("intel") == machine("amd")


def test_nccl_reads_a_direct_gpu_link_the_way_it_is_crossed():
    """Between two GPUs a lopsided NVLink is read in the direction a route crosses it
    (the way into a GPU from a non-GPU device is the exception, read off the GPU)."""
    topo = sc.Topology("two gpus")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=100e9, back_bandwidth=40e9, kind="nvlink")
    forward = topo.route(0, 1).links[0]
    backward = topo.route(1, 0).links[0]
    assert nccl_rate(topo, forward) == 100e9
    assert nccl_rate(topo, backward) == 40e9


def test_a_gpus_total_bandwidth_is_the_larger_of_its_nvlinks_and_its_pci_link():
    """getTotalBw (src/graph/search.cc): ``std::max(pciBw, nvlinkBw)``, the NVLinks
    summed; not their sum with PCI. A GPU with 2 NVLinks of 50 GB/s and a 24 GB/s PCIe
    link: 100 GB/s; with 2 of 10 GB/s: 24."""
    for nvlink, expected in ((50e9, 100e9), (10e9, 24e9)):
        topo = sc.Topology("gpu")
        g, x, y = topo.add_gpu(), topo.add_gpu(), topo.add_gpu()
        sw = topo.add_switch()
        topo.add_link(g, x, bandwidth=nvlink, kind="nvlink")
        topo.add_link(g, y, bandwidth=nvlink, kind="nvlink")
        topo.add_link(g, sw, bandwidth=24e9, kind="pcie")
        assert gpu_total_bw(topo, 0) == expected
