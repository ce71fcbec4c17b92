"""What NCCL's tuner reads off the servers' CPU (``Topology.cpu``), and how it rounds tree
depths. Expected values are worked out by hand from NCCL 2.30.7's src/graph/tuning.cc:

* ``llMaxBws`` across nodes is indexed by CPU vendor, not GPU generation: Intel (and any
  CPU but AMD) 39.0 GB/s on 2 nodes and 20.4 beyond, AMD 22.5 and 19.0; one node reads
  its GPU generation's row (Hopper: 141.0).
* ``getNetOverhead``: 1 us per network step on Intel, 2 us on AMD, times 3 for Simple; a
  ring's intra-node steps across nodes cost at least that.
* Tree latencies count ``log2i(nNodes)`` levels (log2 rounded down) and
  ``nRanks / nNodes - 1`` GPUs of a chain.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.protocols import channel_rate
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.errors import TopologyError
from simcoll.topology.io import from_dict, load, save, to_dict

US = 1e-6
MIB = 1 << 20


def h100(nodes: int, cpu: str):
    return describe(sc.topology.dgx_h100(nodes, cpu=cpu), tuple(range(8 * nodes)))


@pytest.mark.parametrize("cpu, cap, overhead", [("intel", 39.0, 1.0), ("amd", 22.5, 2.0),
                                                ("arm", 39.0, 1.0), ("unknown", 39.0, 1.0)])
def test_a_ring_with_ll_on_two_nodes_is_capped_and_delayed_by_the_cpu(cpu, cap, overhead):
    machine = h100(2, cpu)
    assert machine.cpu == cpu
    p, steps, net_steps = 16, 30, 2
    bw = min(machine.intra_bw, machine.inter_bw) / 1e9
    assert bw * 0.5 > cap  # the cap binds: 370.8 GB/s NVLink, 8 x 50 GB/s NICs
    # LL ring: base 6.6 us; 28 steps inside nodes at max(0.6 us NVLink, the overhead),
    # 2 network steps of 2.7 us.
    latency = 6.6 + (steps - net_steps) * max(0.6, overhead) + net_steps * 2.7
    expected = (latency + MIB / (1000 * cap * p / steps)) * US
    assert predict(machine, "all_reduce", MIB, "ring", "LL", 16) == pytest.approx(
        expected, rel=1e-12)


@pytest.mark.parametrize("nodes, intel, amd", [(1, 141.0, 141.0), (2, 39.0, 22.5),
                                               (3, 20.4, 19.0), (8, 20.4, 19.0)])
def test_the_ll_rate_of_a_channel_shares_the_cpus_cap(nodes, intel, amd):
    for cpu, cap in (("intel", intel), ("amd", amd)):
        for algo in ("ring", "tree"):
            assert channel_rate("LL", algo, "hopper", nodes, 4, cpu) == pytest.approx(
                cap * 1e9 / 4, rel=1e-12)


def test_the_presets_name_their_cpus_and_a_run_reads_them():
    assert sc.topology.dgx_a100(2).cpu == "amd"      # 2 x AMD EPYC 7742
    assert sc.topology.dgx_h100(2).cpu == "intel"    # 2 x Intel Xeon 8480C
    assert sc.topology.switch(4).cpu == "unknown"
    # A rate-bound LL ring across two nodes runs slower with AMD's cap (22.5 GB/s
    # against 39.0), everything else the same.
    times = {cpu: sc.simulate(sc.topology.dgx_h100(2, cpu=cpu), "all_reduce",
                              algorithm="nccl", nbytes=4 * MIB, algo="ring", proto="LL",
                              channels=2).time for cpu in ("intel", "amd")}
    assert times["amd"] > 1.4 * times["intel"]


def test_tree_latency_counts_whole_levels_and_whole_gpus_per_node():
    machine = h100(3, "intel")                       # 24 GPUs: log2i(3) = 1 level
    # Below 64 bytes NCCL applies no tree correction, so time is linear in size there
    # and the latency is 2 t(32) - t(64) (64 bytes: correction factor 1.0 for LL).
    def latency(proto: str) -> float:
        t32, t64 = (predict(machine, "all_reduce", n, "tree", proto, 16) for n in (32, 64))
        return (2 * t32 - t64) / US
    # LL: base 6.8 + 2 ((8 - 1) x 0.6 NVLink + 1 x 5.0 network) = 25.2 us.
    assert latency("LL") == pytest.approx(6.8 + 2 * (7 * 0.6 + 1 * 5.0), rel=1e-9)
    uneven = describe(sc.topology.cluster(3, 3), tuple(range(8)))  # 3 + 3 + 2 GPUs
    # nRanks / nNodes = 8 // 3 = 2 GPUs per chain; intra-node hops over the cluster's
    # links count as NVLink or PCI as describe() reads them.
    hw = {"nvlink": 0.6, "pci": 1.0}[uneven.intra]
    t32, t64 = (predict(uneven, "all_reduce", n, "tree", "LL", 4) for n in (32, 64))
    assert (2 * t32 - t64) / US == pytest.approx(6.8 + 2 * ((2 - 1) * hw + 1 * 5.0),
                                                 rel=1e-9)


def test_a_topology_keeps_its_cpu_through_files_and_specs(tmp_path):
    topo = sc.topology.switch(4)
    topo.cpu = "amd"
    assert to_dict(topo)["cpu"] == "amd"
    assert from_dict(to_dict(topo)).cpu == "amd"
    assert "cpu" not in to_dict(sc.topology.switch(4))
    for suffix in (".json", ".yaml"):
        path = tmp_path / f"machine{suffix}"
        save(topo, path)
        assert load(path).cpu == "amd"
    assert sc.topology.from_spec("dgx_h100:nodes=2,cpu=amd").cpu == "amd"


def test_an_unknown_cpu_is_refused_with_what_is_accepted(tmp_path):
    with pytest.raises(TopologyError, match=r"cpu='via' is not accepted.*'intel', 'amd'"):
        sc.topology.dgx_a100(1, cpu="via")
    topo = sc.topology.switch(2)
    with pytest.raises(TopologyError, match="cpu="):
        topo.cpu = "Intel"
    assert topo.cpu == "unknown"
    data = to_dict(topo)
    data["cpu"] = "sparc"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TopologyError, match=r"cpu.*expected one of intel, amd, arm"):
        load(path)


def test_a_node_with_one_gpu_counts_085_of_the_trees_bus_bandwidth():
    """tuning.cc: ``if (a == TREE && maxTreePattern == NCCL_TOPO_PATTERN_TREE) busBw *=
    .85``; search.cc gives a node of one GPU that pattern. On cluster(4, 1), whose nodes
    reach the network at 25 GB/s, NCCL's search finds 1 channel at 24 GB/s: the tree's
    Simple bus bandwidth is min(0.92 x 24, 1 channel x 17.8) = 17.8 GB/s times 0.85,
    15.13 GB/s, so at 1 GiB its predicted time less its latency (at 8 B) grows by
    1 / 0.85; a ring's does not."""
    cluster = describe(sc.topology.cluster(4, 1), tuple(range(4)))
    assert cluster.lone_gpu_node and cluster.plain_tree and cluster.inter_bw == 25e9
    plain = dataclasses.replace(cluster, plain_tree=False)
    for algo, factor in (("tree", 1 / 0.85), ("ring", 1.0)):
        def moving(machine, algo=algo):
            return (predict(machine, "all_reduce", 1 << 30, algo, "Simple", 16)
                    - predict(machine, "all_reduce", 8, algo, "Simple", 16))
        assert moving(cluster) == pytest.approx(moving(plain) * factor, rel=1e-9)
    # The tree's algbw is half its bus bandwidth: 1 GiB over 15.13 / 2 GB/s.
    assert predict(cluster, "all_reduce", 1 << 30, "tree", "Simple", 16) - predict(
        cluster, "all_reduce", 8, "tree", "Simple", 16) == pytest.approx(
        ((1 << 30) - 8) / (17.8e9 * 0.85 / 2), rel=1e-6)
    assert not h100(2, "intel").lone_gpu_node
    # Three GPUs of one node and one of the other: the lone one sets the pattern.
    uneven = describe(sc.topology.dgx_h100(2), (0, 1, 2, 8))
    assert uneven.nnodes == 2 and uneven.lone_gpu_node and uneven.plain_tree
    # Ampere nodes of several GPUs keep the balanced tree
    assert not describe(sc.topology.dgx_a100(2), tuple(range(16))).plain_tree


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_broadcast_and_reduce_add_one_steps_latency(collective):
    """tuning.cc: a broadcast or reduce ring whose channels keep one GPU order
    (``sameChannels``, as NCCL's search finds on one node and across nodes of one GPU)
    costs its launch plus one step's latency: the node's link class on one node (NVLink
    ring: 0.6, 1.9, 3.4 us), the network's ring across nodes of one GPU (2.7, 4.0,
    14.0 us). Where the channels enter a node at different GPUs (a NIC per GPU, as on
    DGX H100: sameChannels 0), a step's latency per rank, the network ring's (2.7, 4.0)
    or for Simple the tree's (14.0): 16 steps on two nodes of 8."""
    base = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
    for machine, steps, step in (
            (describe(sc.topology.dgx_a100(1), tuple(range(8))), 1, (0.6, 1.9, 3.4)),
            (h100(2, "intel"), 16, (2.7, 4.0, 14.0)),
            (describe(sc.topology.cluster(4, 1), tuple(range(4))), 1, (2.7, 4.0, 14.0))):
        for proto, lat in zip(("LL", "LL128", "Simple"), step):
            assert predict(machine, collective, 0, "ring", proto, 16) == pytest.approx(
                (base[proto] + steps * lat) * US, rel=1e-12)
    # So on one DGX A100 a broadcast of 1 MiB runs Simple: 11.8 us + 1 MiB at 240 GB/s
    # (16.2 us) against LL's 7.2 + 1 MiB at 87.7 GB/s (19.2) and LL128's 15.9 + 1 MiB
    # at 0.92 x 240 (20.6); with p steps of latency it was LL (23.4 against 33.9, 40.0).
    res = sc.simulate(sc.topology.dgx_a100(1), collective, algorithm="nccl", nbytes=MIB)
    assert res.params["proto"] == "Simple"


def two_by_two(cpu: str) -> sc.Topology:
    """2 nodes of 2 GPUs on an NVSwitch (links of 10 ns), a 50 GB/s NIC per GPU: route
    latencies far below NCCL's step latencies, so the steps set the time."""
    topo = sc.Topology(f"2 x 2, {cpu}")
    topo.cpu = cpu
    core = topo.add_switch("core")
    for node in range(2):
        nvswitch = topo.add_switch(f"nvswitch{node}")
        for _ in range(2):
            gpu, nic = topo.add_gpu(node=node), topo.add_nic()
            topo.add_link(gpu, nvswitch, bandwidth=200e9, latency=1e-8, kind="nvlink")
            topo.add_link(gpu, nic, bandwidth=60e9, latency=1e-8, kind="pcie")
            topo.add_link(nic, core, bandwidth=50e9, latency=1e-8, kind="ib")
    return topo


def _critical_steps(hops: int, intra: float, inter: float) -> float:
    """The longest chain of ``hops`` consecutive steps round the ring of ``two_by_two``,
    whose hops go inside a node, across, inside, across."""
    kinds = (intra, inter, intra, inter)
    return max(sum(kinds[(k + h) % 4] for h in range(hops)) for k in range(4))


@pytest.mark.parametrize("proto, nvlink, net, intel, amd", [
    ("LL", 0.6, 2.7, 1.0, 2.0), ("LL128", 1.9, 4.0, 1.0, 2.0),
    ("Simple", 3.4, 14.0, 3.0, 6.0)])
@pytest.mark.parametrize("collective, hops", [
    ("all_reduce", 6), ("reduce_scatter", 3), ("all_gather", 3)])
def test_a_rings_steps_inside_nodes_cost_at_least_the_network_post_overhead(
        collective, hops, proto, nvlink, net, intel, amd):
    """A ring that crosses nodes pays NCCL's network post overhead on its steps inside
    nodes as well (``getNetOverhead``: 1 us on Intel, 2 on AMD, 3x for Simple; NCCL's
    tuner: "Inter-node rings still have to launch nsteps * net overhead"), where it is
    more than NVLink's step latency. 8 bytes on one channel: a run takes its longest
    chain of 2 (p - 1) or p - 1 steps (NVLink's or the overhead inside a node, the
    network's across), so AMD's run and Intel's differ by their chains' difference; on
    one node the CPU changes nothing."""
    runs = {cpu: sc.simulate(two_by_two(cpu), collective, algorithm="nccl", nbytes=8,
                             algo="ring", proto=proto, channels=1)
            for cpu in ("intel", "amd")}
    chains = {cpu: _critical_steps(hops, max(nvlink, overhead), net)
              for cpu, overhead in (("intel", intel), ("amd", amd))}
    # abs: the threads' write of a 4-byte slice at each CPU's LL rate (under 0.2 ns) is
    # not in the hand-worked chains
    assert runs["amd"].time - runs["intel"].time == pytest.approx(
        (chains["amd"] - chains["intel"]) * US, abs=2e-10)
    assert runs["intel"].time >= chains["intel"] * US
    one_node = {cpu: sc.simulate(sc.topology.dgx_h100(1, cpu=cpu), collective,
                                 algorithm="nccl", nbytes=8, algo="ring", proto=proto,
                                 channels=1).time for cpu in ("intel", "amd")}
    assert one_node["intel"] == one_node["amd"]
