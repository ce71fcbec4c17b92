"""NCCL's all_to_all: sends and receives whose protocol and parts follow addP2pToPlan
(src/enqueue.cc of NCCL 2.30.7), not the collective tuner.

Before 2026-12-04 simcoll chose an all_to_all's protocol with the collective tuner's
model, which gives every protocol of a send the same bandwidth, so LL (the least latency)
won at every size and the run paid LL's 8-byte flag per 8 bytes of data: half the
bandwidth NCCL reaches. NCCL runs LL only up to 16 KiB per channel of a send.
"""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.p2p import channels_per_peer, parts, protocol
from simcoll.algorithms.nccl.tune_model import max_channels

KiB, MiB = 1 << 10, 1 << 20


def _machine(topo):
    return describe(topo, tuple(range(topo.nranks)), "auto")


def test_channels_per_peer_by_hand():
    """paths.cc and scheduleP2pTasksToPlan, worked out:

    * dgx_h100(2): a peer across the network gets max(1 NIC, ceil(48 GB/s / 14)) = 4
      channels, a peer over NVLink 2 x 18 links; the least, 4, is a power of 2; 4 x
      ceil(16 ranks / 8) = 8 <= 16 p2p channels, so nChannelsMax = 4; nChannelsMin halves
      from 4 while it times 16 ranks exceeds 16: 1.
    * dgx_h100(1): 2 x 18 = 36, rounded up to 64, kept within the 16 p2p channels: 16;
      nChannelsMin: 16 -> 8 -> 4 -> 2 (2 x 8 ranks = 16 does not exceed 16).
    * dgx_h100(1) with its 24 ring channels (NCCL's search): 32 p2p channels, as NCCL's
      logs print them ("32 p2p channels"), so 32, and nChannelsMin 32 -> ... -> 4.
    * pcie_node(8): 2 over PCI, within the 4 p2p channels of PCI rings: 2; 2 x 8 > 4: 1.
    * pcie_node(2): 2 and 2 (2 x 2 ranks = 4 does not exceed 4).
    """
    assert channels_per_peer(_machine(sc.topology.dgx_h100(2)), 16) == (1, 4)
    assert channels_per_peer(_machine(sc.topology.dgx_h100(1)), 16) == (2, 16)
    assert channels_per_peer(_machine(sc.topology.dgx_h100(1)), 24) == (4, 32)
    assert channels_per_peer(_machine(sc.topology.pcie_node(8)), 4) == (1, 2)
    assert channels_per_peer(_machine(sc.topology.pcie_node(2)), 4) == (2, 2)


@pytest.mark.parametrize(("preset", "nbytes", "count", "proto"), [
    # Across nodes the parts are 64 KiB to 128 KiB (half a 128 KiB chunk to one chunk).
    ("dgx_h100(2)", 16 * KiB, 1, "LL"),
    ("dgx_h100(2)", 16 * KiB + 4, 1, "Simple"),
    ("dgx_h100(2)", 128 * KiB, 1, "Simple"),
    # 1 MiB on 1 channel is a part of 1 MiB > 128 KiB: 2 channels, then 4 (the most).
    ("dgx_h100(2)", MiB, 4, "Simple"),
    # One node of NVLink: parts of 64 KiB (512 KiB / 8) up to 16 MiB (32 chunks), on at
    # least 4 channels (32 p2p channels over 8 ranks), doubled past 16 MiB a part.
    ("dgx_h100(1)", 8 * KiB, 1, "LL"),
    ("dgx_h100(1)", 128 * KiB, 2, "Simple"),
    ("dgx_h100(1)", 32 * MiB, 4, "Simple"),
    ("dgx_h100(1)", 64 * MiB, 4, "Simple"),
    ("dgx_h100(1)", 64 * MiB + 4, 8, "Simple"),
    # PCI: parts of 16 KiB (128 KiB / 8); two ranks may use 2 channels, so LL holds up to
    # 2 x 16 KiB there, and up to 16 KiB with 8 ranks (1 channel).
    ("pcie_node(2)", 32 * KiB, 2, "LL"),
    ("pcie_node(2)", 32 * KiB + 4, 2, "Simple"),
    ("pcie_node(8)", 16 * KiB, 1, "LL"),
    ("pcie_node(8)", 16 * KiB + 4, 1, "Simple"),
])
def test_parts_and_protocol_of_a_send_by_hand(preset, nbytes, count, proto):
    topo = sc.topology.from_spec(preset.replace("(", ":").rstrip(")"))
    machine = _machine(topo)
    low, high = channels_per_peer(machine, max_channels(machine, "ring"))
    assert parts(machine, nbytes, low, high) == count
    assert protocol(nbytes, count) == proto
    res = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=nbytes * topo.nranks)
    assert (res.params["algo"], res.params["proto"], res.params["channels"]) == (
        "p2p", proto, count)


def test_a_large_all_to_all_runs_simple_at_twice_lls_rate():
    """On one switch of 100 GB/s links, 8 ranks x 8 MiB: with Simple each rank's link
    carries its 7 blocks of 1 MiB at the link's rate; LL would put 16 bytes on the wire
    per 8 of data (twice the bytes). The default picks Simple and takes what a forced
    Simple takes; each rank sends 7/8 of its buffer."""
    topo = sc.topology.switch(8, bandwidth=100e9, latency=0.0)
    auto = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=8 * MiB)
    simple = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=8 * MiB, proto="simple")
    ll = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=8 * MiB, proto="ll")
    assert auto.params["proto"] == "Simple" and auto.time == simple.time
    assert list(auto.bytes_sent) == [7 * MiB] * 8
    wire = 7 * MiB / 100e9
    assert wire < auto.time < wire * 1.01 + 20e-6
    assert ll.time > 1.9 * wire


def test_data_moves_right_with_either_protocol():
    """Rank r ends with block r of every rank, in rank order (numpy in float64)."""
    topo = sc.topology.dgx_h100(2)
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(16 * 5) for _ in range(16)]
    for proto in ("ll", "simple"):
        res = sc.simulate(topo, "all_to_all", algorithm="nccl", data=data, proto=proto)
        assert res.correct and res.params["proto"] == proto.capitalize().replace("Ll", "LL")
        for r in range(16):
            expected = np.concatenate([data[s][5 * r:5 * r + 5] for s in range(16)])
            assert np.array_equal(res.outputs[r], expected)


def test_refusals_name_what_is_accepted():
    topo = sc.topology.dgx_h100(1)
    with pytest.raises(sc.InvalidInputError, match="proto='LL128' cannot run all_to_all: "
                                                   "NCCL's sends and receives run LL or "
                                                   "Simple, never LL128"):
        sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=MiB, proto="LL128")
    # as NCCL_PROTO, LL128 can be left out or listed with others (refused before)
    for proto, runs in (("^LL128", "Simple"), ("LL128,LL", "LL"), ("^Simple", "LL")):
        res = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=MiB, proto=proto)
        assert res.params["proto"] == runs, proto
    with pytest.raises(sc.InvalidInputError, match="algo='ring'"):
        sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=MiB, algo="ring")
    with pytest.raises(sc.InvalidInputError, match="never LL128"):
        protocol(MiB, 1, "LL128")


def test_cost_model_by_hand():
    """The reference network as NCCL sees it (one node of NVLink at 1/beta): each peer's
    128 KiB goes in 2 parts of 64 KiB, above 2 x 16 KiB, so Simple: launch 8.4 us, one
    step of max(alpha, 3.4 us) (Simple ring over NVLink, tuning.cc), and 7/8 of the
    buffer at beta."""
    t = sc.cost.predict("all_to_all", "nccl", p=8, nbytes=MiB, alpha=1e-6, beta=1e-9)
    assert t == pytest.approx(8.4e-6 + 3.4e-6 + 7 / 8 * MiB * 1e-9, rel=1e-12)


def _uneven_nodes() -> sc.Topology:
    """Node 0 holds one GPU, node 1 three on an NVLink switch (100 GB/s per GPU), one NIC
    per node (25 GB/s) on a network switch."""
    topo = sc.Topology("1 + 3 GPUs")
    core = topo.add_switch("core")
    gpus = []
    for node, count in enumerate((1, 3)):
        sw = topo.add_switch(f"nvswitch{node}")
        nic = topo.add_nic(f"nic{node}")
        for _ in range(count):
            gpus.append(topo.add_gpu(node=node))
            topo.add_link(gpus[-1], sw, bandwidth=100e9, latency=1e-6, kind="nvlink")
        topo.add_link(nic, gpus[-count], bandwidth=50e9, latency=1e-7, kind="pcie")
        topo.add_link(nic, core, bandwidth=25e9, latency=2e-6, kind="ib")
    return topo


def test_a_first_node_with_one_gpu_does_not_hide_the_links_inside_the_others():
    """The tuner read a node's inside from the first node, and a node of one GPU has no
    inside: its NVLink bandwidth came out infinite, and an all_to_all raised an
    OverflowError working out its channels per peer (int(inf / 20.0 GB/s per link)).
    The node with three GPUs tells: NVLink at 100 GB/s, 100 / 20 = 5 links, so
    2 x 5 = 10 channels toward a peer on NVLink, and max(1 NIC, ceil(25 / 14)) = 2 toward
    one across the network; the least, 2, is a power of 2, and 2 x ceil(4 / 8) = 2 fits
    the 16 p2p channels."""
    topo = _uneven_nodes()
    machine = _machine(topo)
    assert (machine.intra, machine.intra_bw, machine.nnodes) == ("nvlink", 100e9, 2)
    assert channels_per_peer(machine, 16) == (2, 2)
    data = [np.arange(8, dtype=np.int32) + 100 * r for r in range(4)]
    res = sc.simulate(topo, "all_to_all", algorithm="nccl", data=data)
    assert res.correct
    for r in range(4):
        np.testing.assert_array_equal(
            res.outputs[r], np.concatenate([data[s][2 * r:2 * r + 2] for s in range(4)]))


def test_arm_blackwell_hosts_send_twice_the_network_chunk():
    """NCCL 2.30.7 (computeBuffSizes in src/init.cc) doubles the network p2p chunk, 128 to
    256 KiB, on Arm CPUs with Blackwell GPUs. addP2pToPlan doubles a 1 MiB send's
    channels from 1 while its part is above one chunk, at most to high: with 128 KiB
    chunks 1 MiB -> 512, 256, 128 KiB on 8 channels; with 256 KiB chunks 4."""
    from simcoll.algorithms.nccl.machine import Machine

    def machine(cpu: str, arch: str) -> Machine:
        return Machine(8, 2, "nvlink", 1.8e12, 4e11, True, arch, cpu=cpu, rails=4)

    assert parts(machine("intel", "blackwell"), 1 << 20, 1, 8) == 8
    assert parts(machine("arm", "hopper"), 1 << 20, 1, 8) == 8
    assert parts(machine("arm", "blackwell"), 1 << 20, 1, 8) == 4


def test_sends_to_another_node_run_simple_whatever_the_protocol():
    """NCCL allocates no LL buffer for point-to-point connections over the network
    (net.cc, NCCL_ALLOC_P2P_NET_LL_BUFFERS=0 by default), so addP2pToPlan runs a send to a
    peer on another node Simple; inside a node LL where it fits. cluster(2, 2), 1 KiB to
    each peer: GPU 0 puts 2 x 1 KiB on the wire for its local peer (LL) and 1 KiB for each
    of the two remote ones; its node sends 2 GPUs x 2 remote blocks of 1 KiB over the
    network (LL had doubled them)."""
    topo = sc.topology.cluster(2, 2)
    res = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=4 * KiB)
    assert res.params["proto"] == "LL"
    assert res.link_bytes[("gpu0", "node0")] == 2 * KiB + 2 * KiB
    assert res.link_bytes[("node0", "network")] == 4 * KiB
    assert res.link_bytes[("network", "node1")] == 4 * KiB
    forced = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=4 * KiB, proto="ll")
    assert forced.link_bytes == res.link_bytes
    # every peer across the network: the choice is Simple
    apart = sc.simulate(sc.topology.cluster(4, 1), "all_to_all", algorithm="nccl",
                        nbytes=4 * KiB)
    assert apart.params["proto"] == "Simple"
    assert apart.link_bytes[("gpu0", "node0")] == 3 * KiB


@pytest.mark.parametrize("proto, base", [("LL", 6.6e-6), ("Simple", 8.4e-6)])
def test_a_send_to_another_node_costs_simples_network_hop_whatever_the_protocol(proto, base):
    # cluster(2, 2), 16 B to each peer, no contention: NCCL's ring base latency of the
    # protocol (LL 6.6 us, Simple 8.4 us), then the slowest send, a remote one: Simple's
    # network hop (14 us; LL's is 2.7 us, but the connection has no LL buffer), and
    # nanoseconds of bytes
    res = sc.simulate(sc.topology.cluster(2, 2), "all_to_all", algorithm="nccl", nbytes=64,
                      proto=proto, network="analytical")
    assert res.params["proto"] == proto
    assert res.time == pytest.approx(base + 14e-6, abs=0.01e-6)


@pytest.mark.parametrize("proto", ["ll", "LL"])
def test_ll_forced_where_every_peer_is_across_the_network_still_runs_simple(proto):
    # cluster(4, 1): every send leaves the node, over connections with no LL buffer;
    # GPU 0 puts its 3 blocks of 1 KiB on the wire unframed (LL would send 6 KiB)
    res = sc.simulate(sc.topology.cluster(4, 1), "all_to_all", algorithm="nccl",
                      nbytes=4 * KiB, proto=proto)
    assert res.params["proto"] == "Simple"
    assert res.link_bytes[("gpu0", "node0")] == 3 * KiB
