"""Links whose two directions differ (``back_bandwidth``), and the PCIe server whose GPUs
read staged data from host memory slower than they write it (``pcie_node(p2p=False)``).
Times are worked out by hand from the links' rates."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_flows
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import KINDS, maxmin_arrivals, random_machine

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe

N = 10**6
LAT = 1e-6


def pair(forward: float = 10e9, back: float | None = 2e9) -> sc.Topology:
    topo = sc.Topology("pair")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=forward, latency=LAT, back_bandwidth=back)
    return topo


def one_way(comm, x, *, src):
    if comm.rank == src:
        yield comm.send(x, 1 - src)
        return x
    return (yield comm.recv(src))


@pytest.mark.parametrize("network", ["flow", "analytical", "flow_rtt"])
@pytest.mark.parametrize(("src", "rate"), [(0, 10e9), (1, 2e9)])
def test_each_direction_moves_at_its_own_rate(network, src, rate):
    topo = pair()
    res = sc.run_program(topo, one_way, sc.VirtualBuffer.of(N, np.uint8), src=src,
                         network=network)
    assert res.time == pytest.approx(LAT + N / rate, rel=1e-12)
    assert topo.route(src, 1 - src).bandwidth == rate
    assert topo.directed_bandwidths() == [10e9, 2e9]


def test_a_slowed_link_keeps_each_directions_own_rate():
    """Halved at t = 0 (a fault of factor 0.5), the back direction runs at 1 GB/s."""
    faults = sc.Faults(links=(sc.LinkFault("gpu0", "gpu1", at=0.0, factor=0.5),))
    res = sc.run_program(pair(), one_way, sc.VirtualBuffer.of(N, np.uint8), src=1,
                         faults=faults)
    assert res.time == pytest.approx(LAT + N / 1e9, rel=1e-12)


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
def test_a_topology_file_keeps_the_back_bandwidth(tmp_path, suffix):
    path = tmp_path / f"pair{suffix}"
    sc.topology.save(pair(), path)
    back = sc.topology.load(path)
    assert back.links[0].back == 2e9 and back.links[0].bandwidth == 10e9
    symmetric = tmp_path / f"sym{suffix}"
    sc.topology.save(pair(back=None), symmetric)
    assert "back_bandwidth" not in symmetric.read_text()
    assert sc.topology.load(symmetric).links[0].back is None


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "fast"])
def test_a_bad_back_bandwidth_is_refused_naming_it(bad):
    topo = sc.Topology("bad")
    a, b = topo.add_gpu(), topo.add_gpu()
    with pytest.raises(sc.TopologyError, match="back_bandwidth of link"):
        topo.add_link(a, b, bandwidth=1e9, back_bandwidth=bad)


def test_gpus_without_p2p_read_staged_data_at_the_measured_rate():
    """pcie_node(p2p=False), one GPU per switch: a message from GPU 0 to GPU 1 goes up
    GPU 0's links into host memory and down GPU 1's. On Gen5 every link carries NCCL's
    48 GB/s but the last one, into GPU 1, which its SMs read at nvbandwidth's 35.2 GB/s;
    on Gen4 the measured read rate (25.13 GB/s) is above NCCL's 24, so nothing changes;
    with P2P the GPUs read no host memory."""
    gen5 = sc.topology.pcie_node(2, gen=5, p2p=False, gpus_per_switch=1)
    res = sc.run_program(gen5, one_way, sc.VirtualBuffer.of(N, np.uint8), src=0)
    latency = gen5.route(0, 1).latency
    assert res.time == pytest.approx(latency + N / 35.2e9, rel=1e-12)
    into = next(link for link in gen5.links if (link.u, link.v) == ("gpu1", "pcie1"))
    assert (into.bandwidth, into.back) == (48e9, 35.2e9)
    for topo in (sc.topology.pcie_node(2, gen=4, p2p=False),
                 sc.topology.pcie_node(2, gen=3, p2p=False),
                 sc.topology.pcie_node(2, gen=5, p2p=True)):
        assert all(link.back is None for link in topo.links)
    chosen = sc.topology.pcie_node(2, gen=4, p2p=False, host_read_bandwidth=10e9)
    assert {link.back for link in chosen.links if link.u.startswith("gpu")} == {10e9}
    with pytest.raises(sc.TopologyError, match="host_read_bandwidth=.* with p2p=True"):
        sc.topology.pcie_node(2, gen=5, p2p=True, host_read_bandwidth=10e9)
    for bad in (0, -1.0, "fast", float("inf")):
        with pytest.raises(sc.TopologyError, match="host_read_bandwidth"):
            sc.topology.pcie_node(2, gen=5, p2p=False, host_read_bandwidth=bad)


def test_host_memory_shares_its_peak_between_staged_writes_and_reads():
    """pcie_node(8, gen=5, p2p=False), one GPU per root port, no latencies, free
    reductions: a ring all_reduce's 8 staged messages each cross host memory once in and
    once out, and DRAM's 204.8 GB/s is one figure for reads and writes together, so each
    message moves at 204.8 / 2 / 8 = 12.8 GB/s (below PCIe's 48 and the SMs' 35.2): 2 (8 - 1)
    steps of M / 8 bytes. Counting the peak in each direction doubled the rate."""
    topo = sc.topology.pcie_node(8, gen=5, p2p=False, gpus_per_switch=1, pcie_latency=0,
                                 memory_latency=0, reduce_bandwidth=float("inf"))
    m = 8 << 20
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=m)
    assert res.time == pytest.approx(2 * 7 * (m / 8) / 12.8e9, rel=1e-12)


def test_nccls_tuner_reads_the_links_nominal_rate():
    """NCCL's topology knows one rate per PCI link: the tuner reads 48 GB/s between two
    Gen5 GPUs without P2P, not the 35.2 GB/s the receiving GPU reads at."""
    machine = describe(sc.topology.pcie_node(4, gen=5, p2p=False, gpus_per_switch=1),
                       (0, 1, 2, 3))
    assert machine.intra_bw == 48e9


def lopsided(kind: str, seed: int) -> sc.Topology:
    """A random machine (:func:`machines.random_machine`) whose links, one in two, carry
    a different rate back, from a tenth to ten times the forward one."""
    data = sc.topology.to_dict(random_machine(kind, seed))
    rng = np.random.default_rng(seed)
    for link in data["links"]:
        if rng.random() < 0.5:
            link["back_bandwidth"] = link["bandwidth"] * float(rng.choice([0.1, 0.5, 3, 10]))
    return sc.topology.from_dict(data)


flow = st.tuples(st.floats(0, 2e-6), st.integers(0, 8), st.integers(0, 8),
                 st.sampled_from([0, 1000, 10**5, 10**6]))


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 10**6),
       flows=st.lists(flow, min_size=1, max_size=10))
def test_lopsided_machines_match_the_max_min_reference(kind, seed, flows):
    """Flows on random machines with uneven directions, against the tests' fluid max-min
    reference fed each direction's own rate."""
    topo = lopsided(kind, seed)
    p = topo.nranks
    flows = [(t, s % p, d % p, n) for t, s, d, n in flows if s % p != d % p]
    if not flows:
        return
    np.testing.assert_allclose(run_flows(topo, flows), maxmin_arrivals(topo, flows),
                               rtol=1e-9, atol=1e-15)
