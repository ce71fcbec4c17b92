"""Routes bound to pass a device (``Comm.send(via=)``): NCCL binds each channel to a NIC
where a GPU has several, which a shortest path alone never spreads over. Times and bytes
worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import register_probe

import simcoll as sc
from simcoll.comm import Comm

GB = 10**9


def two_nics(slow_second: bool = False, backup: bool = False) -> sc.Topology:
    """gpu0 with two NICs on one switch, gpu1 behind it: 100 GB/s links (gpu0 -> nic1
    at 10 GB/s with ``slow_second``); ``backup`` adds a second switch that only nic0
    reaches, with its own link to gpu1."""
    topo = sc.Topology("two nics")
    a, b = topo.add_gpu(), topo.add_gpu()
    nic0, nic1 = topo.add_nic("nic0"), topo.add_nic("nic1")
    switch = topo.add_switch("s0")
    topo.add_link(a, nic0, bandwidth=100 * GB, latency=1e-6)
    topo.add_link(a, nic1, bandwidth=(10 if slow_second else 100) * GB, latency=1e-6)
    topo.add_link(nic0, switch, bandwidth=100 * GB, latency=1e-6)
    topo.add_link(nic1, switch, bandwidth=100 * GB, latency=1e-6)
    topo.add_link(switch, b, bandwidth=100 * GB, latency=1e-6)
    if backup:
        spare = topo.add_switch("s1")
        topo.add_link(nic0, spare, bandwidth=100 * GB, latency=1e-6)
        topo.add_link(spare, b, bandwidth=100 * GB, latency=1e-6)
    return topo


def _sends(comm: Comm, x, *, vias=(), each=0, ordered=False, op=sc.ReduceOp.SUM):
    """gpu0 sends one message of ``each`` bytes to gpu1 per entry of ``vias``, at once."""
    if comm.rank == 0:
        events = [comm.send(sc.VirtualBuffer.of(each, np.uint8), 1, tag=i, via=via,
                            ordered=ordered) for i, via in enumerate(vias)]
        for event in events:
            yield event
    else:
        for i in range(len(vias)):
            yield comm.recv(0, tag=i)
    return x


def run(topo, vias, nbytes=GB, faults=None, ordered=False, trace=False):
    register_probe("all_reduce", "_via_sends")(_sends)
    return sc.simulate(topo, "all_reduce", algorithm="_via_sends", nbytes=8, faults=faults,
                       vias=tuple(vias), each=nbytes, ordered=ordered, trace=trace)


def test_without_via_both_messages_share_the_first_nic():
    # Shortest paths tie and the first link added wins: both cross nic0, 2 GB over its
    # 100 GB/s: 20 ms after 3 us of latency.
    res = run(two_nics(), [None, None])
    assert res.time == pytest.approx(3e-6 + 2 * GB / (100 * GB), rel=1e-12)
    assert res.link_bytes[("gpu0", "nic0")] == 2 * GB
    assert res.link_bytes[("gpu0", "nic1")] == 0


def test_via_spreads_two_messages_over_two_nics():
    res = run(two_nics(), ["nic0", "nic1"])
    # Each NIC carries one 1 GB message; they meet on s0 -> gpu1, which both share:
    # 2 GB over 100 GB/s there, as before, but each NIC now carries one.
    assert res.link_bytes[("gpu0", "nic0")] == GB
    assert res.link_bytes[("gpu0", "nic1")] == GB
    assert res.link_bytes[("s0", "gpu1")] == 2 * GB
    assert res.time == pytest.approx(3e-6 + 2 * GB / (100 * GB), rel=1e-12)


def test_a_route_via_a_slow_nic_takes_its_rate():
    res = run(two_nics(slow_second=True), ["nic1"])
    assert res.time == pytest.approx(3e-6 + GB / (10 * GB), rel=1e-12)
    assert res.link_bytes[("gpu0", "nic0")] == 0
    assert res.link_bytes[("nic1", "s0")] == GB


def test_ordered_messages_keep_their_nic():
    # Two ordered 1 GB messages via nic1 (10 GB/s): one after the other, 0.2 s.
    res = run(two_nics(slow_second=True), ["nic1", "nic1"], ordered=True)
    assert res.link_bytes[("gpu0", "nic1")] == 2 * GB
    assert res.time == pytest.approx(2 * GB / (10 * GB) + 3e-6, rel=1e-9)


def test_a_rerouted_flow_still_passes_its_nic():
    # 1 GB via nic1 (10 GB/s into it), moving from 3 us on: s0 -> gpu1 fails at 50 ms,
    # when 10 GB/s x (50 ms - 3 us) have crossed it. The rest keeps passing nic1, then
    # reaches nic0 (back through gpu0 or through s0: 2 hops either way) and s1, still at
    # 10 GB/s, after the 5 - 3 us of latency that route adds: the flow ends at
    # 0.1 s + 5 us; over nic0 alone it would end some 45 ms sooner.
    faults = sc.Faults(links=[sc.LinkFault("s0", "gpu1", at=0.05)])
    res = run(two_nics(slow_second=True, backup=True), ["nic1"], faults=faults)
    assert res.time == pytest.approx(0.1 + 5e-6, rel=1e-9)
    moved = round(10 * GB * (0.05 - 3e-6))
    assert res.link_bytes[("gpu0", "nic1")] == GB
    assert res.link_bytes[("s0", "gpu1")] == moved
    assert res.link_bytes[("s1", "gpu1")] == GB - moved
    assert res.link_bytes[("nic1", "s0")] + res.link_bytes[("nic1", "gpu0")] == GB
    assert res.link_bytes[("nic0", "s1")] == GB - moved


def test_an_unknown_via_is_refused_naming_it():
    with pytest.raises(sc.AlgorithmError, match="via=.nic9. names no device"):
        run(two_nics(), ["nic9"])


def test_a_route_that_crosses_a_link_twice_one_way_is_refused():
    """gpu0 - a - b - gpu1, with x1 off b and x2 off a: via ('x1', 'x2') goes a -> b to
    reach x1, back to a for x2, then a -> b again. The network counted the 1000 bytes
    once on a -> b and shared the link as if crossed once (10 us where the route's own
    latency is 9 us plus the transfer); it is refused, naming the link."""
    topo = sc.Topology("via twice")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    a, b, x1, x2 = (topo.add_switch(n) for n in ("a", "b", "x1", "x2"))
    for u, v in ((g0, a), (a, b), (b, g1), (b, x1), (a, x2)):
        topo.add_link(u, v, bandwidth=1e9, latency=1e-6)
    with pytest.raises(sc.TopologyError, match=r"route from 'gpu0' to 'gpu1' through "
                       r"\('x1', 'x2'\) crosses link \('a', 'b'\) twice in one direction"):
        topo.route(0, 1, via=("x1", "x2"))
    # through x1 alone it crosses a -> b once, and b -> x1, x1 -> b: both directions once
    assert topo.route(0, 1, via="x1").latency == pytest.approx(5e-6)
    # With an unrelated link failed, the same route was reported as "no route around
    # the failed links", naming that link.
    spare = topo.add_switch("spare")
    topo.add_link(b, spare, bandwidth=1e9, latency=1e-6)

    def via_twice(comm):
        if comm.rank == 0:
            yield comm.sleep(1e-6)
            yield comm.send(np.zeros(8, np.uint8), 1, via=("x1", "x2"))
        else:
            yield comm.recv(0)

    with pytest.raises(sc.AlgorithmError, match=r"crosses link \('a', 'b'\) twice in one "
                                                r"direction") as info:
        sc.run_program(topo, via_twice,
                       faults=sc.Faults(links=[sc.LinkFault("b", "spare", at=0.0)]))
    assert "failed" not in str(info.value)


def test_a_trace_keeps_each_messages_nic():
    # The trace records the devices a message was bound to, so link loads put it on its
    # NIC's links: 1 GB each over nic0 and nic1, sharing s0 -> gpu1.
    from simcoll.link_load import link_loads

    topo = two_nics()
    res = run(topo, ["nic0", ("nic1", "s0")], trace=True)
    assert {e.tag: e.via for e in res.trace if e.kind == "message"} == {
        0: "nic0", 1: ("nic1", "s0")}
    loads = {load.link: load for load in link_loads(res, topo)}
    for link in [("gpu0", "nic0"), ("gpu0", "nic1"), ("nic1", "s0"), ("s0", "gpu1")]:
        load = loads[link]
        moved = float(np.sum(load.rates * (load.ends - load.starts)))
        assert moved == pytest.approx(res.link_bytes[link], rel=1e-9), link


def two_nics_two_receivers(slow_second: bool = False) -> sc.Topology:
    """``two_nics`` with a third GPU, gpu2, behind s0 as gpu1 is."""
    topo = two_nics(slow_second)
    topo.add_link(topo.add_gpu(), "s0", bandwidth=100 * GB, latency=1e-6)
    return topo


def _multicasts(comm: Comm, x, *, vias=None, each=0, count=1, ordered=False,
                op=sc.ReduceOp.SUM):
    """gpu0 multicasts ``count`` messages of ``each`` bytes to gpu1 and gpu2, at once,
    routed through ``vias`` (one per destination)."""
    if comm.rank == 0:
        events = [comm.multicast(sc.VirtualBuffer.of(each, np.uint8), [1, 2], tag=0,
                                 via=vias, ordered=ordered) for _ in range(count)]
        for event in events:
            yield event
    else:
        for _ in range(count):
            yield comm.recv(0, tag=0)
    return x


def run_multicast(topo, vias, count=1, ordered=False, trace=False):
    register_probe("all_reduce", "_via_multicasts")(_multicasts)
    return sc.simulate(topo, "all_reduce", algorithm="_via_multicasts", nbytes=8,
                       vias=vias, each=GB, count=count, ordered=ordered, trace=trace)


def test_a_multicast_reaches_each_destination_through_its_own_via():
    """gpu1's copy is bound to nic1 (10 GB/s into it), gpu2's takes the shortest route
    (nic0): the union of the two routes carries each byte once per link, and the one
    message moves at the slowest link of the union, 10 GB/s, after the longer route's
    3 us. Unbound, both copies share nic0 and move at 100 GB/s."""
    res = run_multicast(two_nics_two_receivers(slow_second=True), ("nic1", None))
    for link in [("gpu0", "nic0"), ("nic0", "s0"), ("gpu0", "nic1"), ("nic1", "s0"),
                 ("s0", "gpu1"), ("s0", "gpu2")]:
        assert res.link_bytes[link] == GB, link
    assert res.time == pytest.approx(3e-6 + GB / (10 * GB), rel=1e-12)
    plain = run_multicast(two_nics_two_receivers(slow_second=True), None)
    assert plain.link_bytes[("gpu0", "nic1")] == 0
    assert plain.time == pytest.approx(3e-6 + GB / (100 * GB), rel=1e-12)


def test_ordered_multicasts_keep_their_vias_and_the_trace_records_them():
    # Two ordered 1 GB multicasts with both copies bound to nic1 (10 GB/s): one after
    # the other, 0.2 s; nic0 carries nothing, and each traced copy names nic1.
    res = run_multicast(two_nics_two_receivers(slow_second=True), ("nic1", "nic1"),
                        count=2, ordered=True, trace=True)
    assert res.link_bytes[("gpu0", "nic1")] == 2 * GB
    assert res.link_bytes[("gpu0", "nic0")] == 0
    assert res.time == pytest.approx(2 * GB / (10 * GB) + 3e-6, rel=1e-9)
    copies = [e for e in res.trace if e.kind == "message"]
    assert len(copies) == 4 and {e.via for e in copies} == {"nic1"}


@pytest.mark.parametrize(("vias", "message"), [
    (("nic1",), r"gives 1 routes for 2 destinations"),
    (("nic1", "nic9"), r"via=.*nic9.* names no device"),
])
def test_a_multicasts_bad_via_is_refused(vias, message):
    with pytest.raises(sc.AlgorithmError, match=message):
        run_multicast(two_nics_two_receivers(), vias)
