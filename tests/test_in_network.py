"""Devices that compute inside the network: a switch that reduces and multicasts (NVLS,
SHARP), and multicast messages whose bytes cross each link once."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_data

import simcoll as sc
from simcoll.comm import Comm

LAT, BW = 1e-6, 1e10


def star(p, *, reduce_bandwidth=None):
    topo = sc.Topology("star")
    sw = topo.add_switch("sw", reduce_bandwidth=reduce_bandwidth)
    for _ in range(p):
        topo.add_link(topo.add_gpu(), sw, bandwidth=BW, latency=LAT)
    return topo


def one_to_all(comm: Comm, x, *, multicast):
    if comm.rank == 0:
        others = range(1, comm.size)
        if multicast:
            yield comm.multicast(x, others)
        else:
            for peer in others:
                comm.send(x, peer)
        return x
    return (yield comm.recv(0))


@pytest.mark.parametrize("p", [2, 3, 5])
def test_a_multicast_crosses_each_link_once(p):
    n = 10**6
    x = sc.VirtualBuffer.of(n, np.uint8)
    multi = sc.run_program(star(p), one_to_all, x, multicast=True)
    uni = sc.run_program(star(p), one_to_all, x, multicast=False)
    assert multi.link_bytes[("gpu0", "sw")] == n
    assert uni.link_bytes[("gpu0", "sw")] == (p - 1) * n
    for r in range(1, p):
        assert multi.link_bytes[("sw", f"gpu{r}")] == n
    assert multi.bytes_sent.tolist() == [n] + [0] * (p - 1)
    assert multi.bytes_received.tolist() == [0] + [n] * (p - 1)
    assert multi.messages == 1 and uni.messages == p - 1
    # One flow over the union of the routes: two hops of latency, n bytes at BW.
    assert multi.time == pytest.approx(2 * LAT + n / BW, rel=1e-12)
    assert uni.time == pytest.approx(2 * LAT + (p - 1) * n / BW, rel=1e-12)


@pytest.mark.parametrize("ordered", [False, True])
def test_ordered_multicasts_move_one_after_the_other(ordered):
    """Three multicasts of n bytes from GPU 0 to GPUs 1 and 2 of a star, sent at once.
    Unordered they share the links and all arrive at 2 LAT + 3 n / BW; ordered, each
    moves once the one ahead has arrived (its latency ran meanwhile), so they arrive at
    2 LAT + n / BW, + 2 n / BW and + 3 n / BW, one after the other."""
    n = 10**6
    arrivals: dict[int, list[float]] = {1: [], 2: []}

    def program(comm: Comm, x):
        if comm.rank == 0:
            sent = [comm.multicast(x, [1, 2], ordered=ordered) for _ in range(3)]
            for event in sent:
                yield event
            return x
        for _ in range(3):
            yield comm.recv(0)
            arrivals[comm.rank].append(comm.now)
        return x

    res = sc.run_program(star(3), program, sc.VirtualBuffer.of(n, np.uint8))
    step = n / BW
    expected = [2 * LAT + k * step for k in (1, 2, 3)] if ordered else [2 * LAT + 3 * step] * 3
    for rank in (1, 2):
        assert arrivals[rank] == pytest.approx(expected, rel=1e-12)
    assert res.time == pytest.approx(2 * LAT + 3 * step, rel=1e-12)
    assert res.link_bytes[("gpu0", "sw")] == 3 * n


def test_multicast_data_arrives_intact_and_is_a_snapshot():
    def program(comm: Comm, x):
        if comm.rank == 0:
            buf = np.arange(6, dtype=np.int32)
            sent = comm.multicast(buf, [1, 2])
            buf[:] = 0  # after the send: receivers must not see it
            yield sent
            return x
        return (yield comm.recv(0))

    res = sc.run_program(star(3), program, None)
    assert res.outputs[1].tolist() == res.outputs[2].tolist() == list(range(6))


def gpu_side(comm: Comm, x, *, op=sc.ReduceOp.SUM):
    """Push the buffer into the switch; get the switch's result back."""
    switch = comm.reducer_of(comm.rank)
    yield comm.send(x, switch)
    return (yield comm.recv(switch))


def switch_side(comm: Comm, x, *, op=sc.ReduceOp.SUM):
    """Reduce what every attached GPU pushes, then multicast the result to all of them."""
    gpus = comm.attached(comm.rank)
    total = yield comm.recv(gpus[0])
    for g in gpus[1:]:
        total = yield comm.reduce(total, (yield comm.recv(g)), op)
    yield comm.multicast(total, gpus)


@pytest.mark.parametrize("p", [2, 4, 7])
def test_a_switch_that_reduces_gives_the_all_reduce(p):
    inputs = make_data(p, 1000, "float64")
    reduce_bw = 5e10
    res = sc.run_program(star(p, reduce_bandwidth=reduce_bw), _program_with_inputs(inputs),
                         None, in_network=_device_program)
    expected = np.sum(np.stack(inputs), axis=0)
    for out in res.outputs:
        np.testing.assert_allclose(out, expected, rtol=1e-12)
    n = inputs[0].nbytes
    # Every GPU sends n and receives n; the switch receives p n and sends n once.
    assert res.bytes_sent.tolist() == [n] * p and res.bytes_received.tolist() == [n] * p
    for r in range(p):
        assert res.link_bytes[(f"gpu{r}", "sw")] == n
        assert res.link_bytes[("sw", f"gpu{r}")] == n
    # Hand-worked: all pushes arrive together at LAT + n/BW, the switch makes p - 1
    # reductions of n bytes one after another, then one multicast: LAT + n/BW.
    assert res.time == pytest.approx(2 * (LAT + n / BW) + (p - 1) * n / reduce_bw, rel=1e-12)


def _program_with_inputs(inputs):
    def program(comm: Comm, _):
        return (yield from gpu_side(comm, inputs[comm.rank]))
    return program


def _device_program(comm: Comm, _):
    yield from switch_side(comm, None)


def test_in_network_devices_are_endpoints_after_the_hosts():
    topo = sc.Topology("mixed")
    a = topo.add_switch("a", reduce_bandwidth=1e11)
    topo.add_switch("plain")
    topo.add_link(a, "plain", bandwidth=1e9)
    g = [topo.add_gpu() for _ in range(3)]
    h = topo.add_host()
    for name in (*g, h):
        topo.add_link(name, a if name != g[2] else "plain", bandwidth=1e9)
    assert topo.in_network == ("a",)
    assert topo.endpoints == 5 and topo.endpoint_name(4) == "a" and topo.address("a") == 4
    seen = {}

    def look(comm: Comm, _):
        seen[comm.rank] = (comm.hosts, comm.in_network, comm.reducer_of(comm.rank))
        yield from ()

    sc.run_program(topo, look, None)
    assert seen == {0: ((3,), (4,), 4), 1: ((3,), (4,), 4), 2: ((3,), (4,), None)}
    with pytest.raises(sc.TopologyError, match="'plain' is not an endpoint"):
        topo.address("plain")


def test_multicast_refuses_bad_destinations():
    def bad(comm: Comm, x, *, dsts):
        if comm.rank == 0:
            yield comm.multicast(x, dsts)
        return x

    for dsts, match in [([], "at least one destination"), ([1, 1], "lists a rank twice"),
                        ([0, 1], "is this rank itself"), ([9], "out of range")]:
        with pytest.raises(sc.AlgorithmError, match=match):
            sc.run_program(star(2), bad, None, dsts=dsts)
