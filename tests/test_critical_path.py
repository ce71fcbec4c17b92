"""The critical path of a traced run: hand-worked chains, the split of each message at
the instant its bytes began to move, and on random machines a path that tiles the run's
time with segments the trace accounts for."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import (
    ALPHA,
    BETA,
    GAMMA,
    STOCK_PAIRS,
    draw_case,
    reference_network,
    register_probe,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machines import KINDS, random_machine

import simcoll as sc
from simcoll.cli import main
from simcoll.critical_path import Segment, narrowest_link
from simcoll.trace import to_chrome

MiB = 2**20


@register_probe("all_reduce", "test_critical_ordered", cuts=((0, 1),), delays=(0.0,),
                sleep=0.0, wire=0)
def ordered_slices(comm, x, *, op, cuts, delays, sleep, wire):
    """Rank 0 sleeps ``sleep``, then sends rank 1 the slices ``x[a:b]`` of ``cuts`` at
    once, in order on one connection, each with its delay (and ``wire`` bytes on the
    wire if given); rank 1 receives them."""
    if comm.rank == 0:
        if sleep:
            yield comm.sleep(sleep)
        sent = [comm.send(x[a:b], dst=1, ordered=True, delay=d, wire_bytes=wire or None)
                for (a, b), d in zip(cuts, delays)]
        for event in sent:
            yield event
    else:
        for _ in cuts:
            yield comm.recv(0)
    return x


def _ordered_run(nbytes: int, **params) -> sc.Result:
    """``ordered_slices`` on two GPUs of a switch: 1 GB/s links of 0.5 us each."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)
    return sc.simulate(topo, "all_reduce", algorithm="test_critical_ordered", nbytes=nbytes,
                       dtype=np.uint8, trace=True, **params)


def _tiles(path: sc.CriticalPath, time: float) -> None:
    """The segments run from 0 to ``time``, each where the one before ended."""
    segments = path.segments
    assert segments[0].start == 0.0 and segments[-1].end == time
    assert all(a.end == b.start for a, b in zip(segments, segments[1:]))
    assert all(s.end > s.start for s in segments)
    assert sum(path.totals().values()) == pytest.approx(time, rel=1e-12)


def _kinds(path: sc.CriticalPath) -> list[tuple[str, int, int | None]]:
    return [(s.kind, s.endpoint, s.peer) for s in path.segments]


def test_a_compute_then_a_message_then_a_reduction_worked_out_by_hand():
    @register_probe("all_reduce", "test_critical_chain")
    def chain(comm, x, *, op):
        if comm.rank == 0:
            yield comm.compute(2e-6)
            yield comm.send(x, dst=1)
        else:
            got = yield comm.recv(0)
            yield comm.reduce(x, got, op)
        return x

    # Two GPUs on a switch: 1 GB/s links of 0.5 us each, reductions at 4 GB/s.
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6, reduce_bandwidth=4e9)
    res = sc.simulate(topo, "all_reduce", algorithm="test_critical_chain", nbytes=4000,
                      trace=True)
    path = sc.critical_path(res)
    assert _kinds(path) == [("compute", 0, None), ("latency", 0, 1), ("transfer", 0, 1),
                            ("reduce", 1, None)]
    # compute 2 us; two links' latency 1 us; 4000 B at 1 GB/s 4 us; 4000 B at 4 GB/s 1 us.
    ends = [s.end for s in path.segments]
    np.testing.assert_allclose(ends, [2e-6, 3e-6, 7e-6, 8e-6], rtol=1e-12)
    assert res.time == pytest.approx(8e-6, rel=1e-12)
    _tiles(path, res.time)
    latency, transfer = path.segments[1:3]
    assert latency.route_latency == pytest.approx(1e-6, rel=1e-12)
    assert (transfer.nbytes, transfer.wire_bytes) == (4000, 4000)
    assert transfer.rate == pytest.approx(1e9, rel=1e-9) and latency.rate == 0.0
    assert path.messages() == 1
    np.testing.assert_allclose([path.totals()[k] for k in ("transfer", "latency", "reduce",
                                                           "compute", "wait")],
                               [4e-6, 1e-6, 1e-6, 2e-6, 0.0], rtol=1e-12, atol=1e-18)
    assert narrowest_link(topo, transfer) == "gpu0->switch"
    with pytest.raises(sc.InvalidInputError, match="crosses no route"):
        narrowest_link(topo, path.segments[0])


def test_ordered_slices_queue_behind_each_other_and_a_sleep_is_a_wait():
    res = _ordered_run(3000, cuts=((0, 1000), (1000, 2000), (2000, 3000)),
                       delays=(0.25e-6,) * 3, sleep=3e-6, wire=1500)
    path = sc.critical_path(res)
    # Slept 3 us; the first slice waits out 1 us of route and 0.25 us of delay; each
    # slice puts 1500 wire bytes at 1 GB/s (1.5 us) once the one ahead has arrived.
    assert _kinds(path) == [("wait", 0, None), ("latency", 0, 1)] + [("transfer", 0, 1)] * 3
    np.testing.assert_allclose([s.end for s in path.segments],
                               [3e-6, 4.25e-6, 5.75e-6, 7.25e-6, 8.75e-6], rtol=1e-12)
    assert path.segments[1].route_latency == pytest.approx(1e-6, rel=1e-12)
    assert [s.nbytes for s in path.segments[2:]] == [1000] * 3
    _tiles(path, res.time)
    messages = [e for e in res.trace if e.kind == "message"]
    assert [e.queued for e in messages] == [False, True, True]
    assert all(e.latency == pytest.approx(1e-6, rel=1e-12) for e in messages)


def _side_program_sleeps_last(comm):
    def side():
        yield comm.compute(1e-6)
        yield comm.sleep(3e-6)
    if comm.rank == 1:
        comm.start(side())
    else:
        yield comm.compute(2e-6)


def _device_sleeps_around_its_compute(comm):
    yield comm.sleep(5e-6)
    yield comm.compute(1e-6)
    yield comm.sleep(2e-6)


def _nothing(comm):
    yield from ()


def test_a_run_that_ends_in_a_started_program_s_or_a_device_s_sleep_ends_its_path_there():
    """Rank 1 starts a program (1 us of compute, then 3 us asleep) and returns; rank 0
    computes 2 us: the run ends at 4 us, in rank 1's sleep. The path put it down to
    rank 0's compute and a wait of rank 0 from 2 to 4 us (rank 0 had returned at 2 us).
    A switch's own program (5 us asleep, 1 us of compute, 2 us asleep) was one wait of
    gpu0 over the whole 8 us, its compute missing."""
    res = sc.run_program(sc.topology.switch(2, bandwidth=10e9, latency=1e-6),
                         _side_program_sleeps_last, trace=True)
    path = sc.critical_path(res)
    assert [(s.kind, s.endpoint, s.start, s.end) for s in path.segments] == [
        ("compute", 1, 0.0, pytest.approx(1e-6)), ("wait", 1, pytest.approx(1e-6), 4e-6)]
    topo = sc.Topology("device")
    switch = topo.add_switch(reduce_bandwidth=1e9)
    for gpu in (topo.add_gpu(), topo.add_gpu()):
        topo.add_link(gpu, switch, bandwidth=10e9, latency=1e-6)
    res = sc.run_program(topo, _nothing, trace=True,
                         in_network=_device_sleeps_around_its_compute)
    path = sc.critical_path(res)
    assert [(s.kind, s.endpoint) for s in path.segments] == [("wait", 2), ("compute", 2),
                                                              ("wait", 2)]
    np.testing.assert_allclose([s.end for s in path.segments], [5e-6, 6e-6, 8e-6], rtol=1e-12)
    _tiles(path, res.time)


def _sendrecv_numpy_wire(comm):
    peer = 1 - comm.rank
    return (yield comm.sendrecv(np.zeros(1000, np.uint8), peer, peer,
                                wire_bytes=np.int64(5000), delay=np.float64(1e-6)))


def test_numpy_wire_bytes_leave_every_export_json_ready(tmp_path):
    """send(wire_bytes=np.int64(...)) is accepted, but the number stayed numpy's: the
    Chrome export, the path's to_dict and the Result's to_dict could not be written as
    JSON (a bare TypeError)."""
    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(1000, np.uint8), 1, wire_bytes=np.int64(5000),
                            delay=np.float64(1e-6))
        else:
            yield comm.recv(0)

    res = sc.run_program(sc.topology.switch(2, bandwidth=1e9, latency=1e-6), program,
                         trace=True)
    paired = sc.run_program(sc.topology.switch(2, bandwidth=1e9, latency=1e-6),
                            _sendrecv_numpy_wire, trace=True)
    assert {type(e.wire_bytes) for e in paired.trace if e.kind == "message"} == {int}
    json.dumps(paired.to_dict())
    json.dumps(sc.critical_path(paired).to_dict())
    message = next(e for e in res.trace if e.kind == "message")
    assert type(message.wire_bytes) is int and message.wire_bytes == 5000
    json.dumps(res.to_dict())
    json.dumps(sc.critical_path(res).to_dict())
    json.dumps(to_chrome(res, sc.topology.switch(2, bandwidth=1e9, latency=1e-6)))
    # 2 links of 1 us, 1 us of delay, 5000 wire bytes at 1 GB/s
    assert res.time == pytest.approx(2e-6 + 1e-6 + 5e-6, rel=1e-12)


def test_jitter_drawn_as_the_slice_ahead_arrives_is_latency_on_the_path():
    res = _ordered_run(3000, cuts=((0, 1000), (1000, 2000), (2000, 3000)),
                       delays=(0.0,) * 3, faults=sc.Faults(jitter=1e-6, seed=3))
    path = sc.critical_path(res)
    _tiles(path, res.time)
    # Each slice waits for the one ahead, then for the jitter drawn for it (up to 1 us),
    # then puts its 1000 bytes on 1 GB/s links: 1 us each.
    assert [s.kind for s in path.segments] == ["latency", "transfer"] * 3
    messages = [e for e in res.trace if e.kind == "message"]
    assert [e.queued for e in messages] == [False, True, True]
    for later, ahead in zip(messages[1:], messages):
        assert 0 < later.moving - ahead.end <= 1e-6
    for s in path.segments:
        if s.kind == "transfer":
            assert s.duration == pytest.approx(1e-6, rel=1e-9)
    first, *jitters = [s for s in path.segments if s.kind == "latency"]
    assert first.route_latency == pytest.approx(1e-6, rel=1e-12)
    assert [s.route_latency for s in jitters] == [0.0, 0.0]


def test_a_slice_whose_own_delay_outlasts_the_one_ahead_waits_its_latency():
    res = _ordered_run(2000, cuts=((0, 1000), (1000, 2000)), delays=(0.0, 5e-6))
    # The first slice arrives at 1 + 1 = 2 us; the second's latency runs from its send
    # at 0 to 1 + 5 = 6 us, then its 1000 bytes take 1 us: the path is that latency.
    path = sc.critical_path(res)
    assert _kinds(path) == [("latency", 0, 1), ("transfer", 0, 1)]
    np.testing.assert_allclose([s.end for s in path.segments], [6e-6, 7e-6], rtol=1e-12)
    assert [e.queued for e in res.trace if e.kind == "message"] == [False, False]


def test_ring_on_the_reference_network_is_its_steps_latencies_and_transfers():
    p, m = 4, 4 * MiB
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=m,
                      trace=True)
    path = sc.critical_path(res)
    _tiles(path, res.time)
    totals = path.totals()
    # 2(p - 1) steps on the path, each alpha, then m/p bytes at 1/beta; p - 1 of them
    # end in a reduction of m/p bytes (the reduce-scatter's); waits and compute: none.
    assert path.messages() == 2 * (p - 1)
    assert totals["latency"] == pytest.approx(2 * (p - 1) * ALPHA, rel=1e-9)
    assert totals["transfer"] == pytest.approx(2 * (p - 1) * m / p * BETA, rel=1e-9)
    assert totals["wait"] == totals["compute"] == 0.0
    assert res.time == pytest.approx(totals["latency"] + totals["transfer"]
                                     + totals["reduce"], rel=1e-12)
    for e in res.trace:
        if e.kind == "message":
            assert e.moving - e.start == pytest.approx(ALPHA, rel=1e-9)
            assert e.end - e.moving == pytest.approx(e.nbytes * BETA, rel=1e-9)


def test_nccl_launch_overhead_lands_on_the_path_as_a_wait_and_nothing_else_moves():
    topo = sc.topology.dgx_h100(1)
    base = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 * MiB, trace=True)
    late = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 * MiB, trace=True,
                       launch_overhead=7e-6)
    a, b = sc.critical_path(base), sc.critical_path(late)
    _tiles(a, base.time)
    _tiles(b, late.time)
    assert a.segments[0].kind == "wait"
    assert b.totals()["wait"] - a.totals()["wait"] == pytest.approx(7e-6, rel=1e-9)
    for kind in ("transfer", "latency", "reduce", "compute"):
        assert b.totals()[kind] == pytest.approx(a.totals()[kind], rel=1e-9, abs=1e-15)


def test_jitter_delays_a_message_s_bytes_as_its_latency_does():
    @register_probe("all_reduce", "test_critical_jitter")
    def pairs(comm, x, *, op):
        if comm.rank % 2 == 0:
            for _ in range(4):
                yield comm.send(x, dst=comm.rank + 1)
        else:
            for _ in range(4):
                yield comm.recv(comm.rank - 1)
        return x

    topo = sc.topology.switch(4, bandwidth=1e9, latency=0.5e-6)
    res = sc.simulate(topo, "all_reduce", algorithm="test_critical_jitter", nbytes=4000,
                      dtype=np.uint8, trace=True, network="analytical",
                      faults=sc.Faults(jitter=3e-6, seed=5))
    messages = [e for e in res.trace if e.kind == "message"]
    lags = [e.moving - e.start - e.latency for e in messages]
    assert min(lags) >= 0 and max(lags) <= 3e-6 and len(set(lags)) > 1
    for e in messages:  # alone on its route: the bytes take their size over 1 GB/s
        assert e.end - e.moving == pytest.approx(4000 / 1e9, rel=1e-9)
    _tiles(sc.critical_path(res), res.time)


def test_a_multicast_s_arrivals_split_at_the_same_instant():
    topo = sc.topology.dgx_h100(1)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=4 * MiB, algo="nvls",
                      trace=True)
    path = sc.critical_path(res)
    _tiles(path, res.time)
    switch = topo.endpoints - 1
    downs = [e for e in res.trace if e.kind == "message" and e.rank == switch]
    # A multicast reaches every GPU at once: its messages share a send and a start.
    by_send: dict[tuple, set] = {}
    for e in downs:
        by_send.setdefault((e.start, e.end, e.tag), set()).add(e.moving)
    assert all(len(movings) == 1 for movings in by_send.values())
    assert len(by_send) < len(downs)


def test_chrome_export_has_the_path_as_a_row_and_the_cli_prints_it(tmp_path, capsys):
    topo = sc.topology.switch(4)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=MiB, trace=True)
    trace = to_chrome(res, topo)
    rows = [e for e in trace["traceEvents"] if e.get("cat") == "critical path"]
    path = sc.critical_path(res)
    assert [r["name"].split()[0] for r in rows] == [s.kind for s in path.segments]
    assert sum(r["dur"] for r in rows) == pytest.approx(res.time * 1e6, rel=1e-9)
    assert {r["args"]["narrowest_link"] for r in rows if r["name"].startswith("transfer")} \
        <= {f"gpu{i}->switch" for i in range(4)} | {f"switch->gpu{i}" for i in range(4)}
    names = [e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"]
    assert names.count("critical path") == 1
    out = tmp_path / "ring.json"
    assert main(["trace", "--topology", "switch:4", "--size", "1M", "--output",
                 str(out)]) == 0
    printed = capsys.readouterr().out
    assert "critical path of " in printed and "transfer" in printed
    saved = json.loads(out.read_text())["traceEvents"]
    assert [e["name"] for e in saved if e.get("cat") == "critical path"] == \
        [r["name"] for r in rows]


def test_a_message_of_no_time_passes_the_walk_to_its_sender():
    @register_probe("all_reduce", "test_critical_no_time")
    def handoff(comm, x, *, op):
        if comm.rank == 0:
            yield comm.compute(2e-6)
            yield comm.send(x[:0], dst=1)
        else:
            yield comm.recv(0)
            yield comm.compute(3e-6)
        return x

    # Links without latency: the empty message arrives the instant it is sent, and rank
    # 1 computes from 2 to 5 us because rank 0 computed until 2 us, not because it slept.
    topo = sc.topology.switch(2, latency=0.0)
    res = sc.simulate(topo, "all_reduce", algorithm="test_critical_no_time", nbytes=8,
                      dtype=np.uint8, trace=True)
    path = sc.critical_path(res)
    assert _kinds(path) == [("compute", 0, None), ("compute", 1, None)]
    np.testing.assert_allclose([s.end for s in path.segments], [2e-6, 5e-6], rtol=1e-12)
    assert path.messages() == 0


def test_a_barrier_s_path_is_its_empty_messages_latencies():
    # Dissemination on 8 ranks: 3 rounds of empty messages over 2 links of 1 us each.
    topo = sc.topology.switch(8, latency=1e-6)
    res = sc.simulate(topo, "barrier", algorithm="dissemination", nbytes=0, trace=True)
    path = sc.critical_path(res)
    _tiles(path, res.time)
    assert [s.kind for s in path.segments] == ["latency"] * 3
    assert path.messages() == 3 and res.time == pytest.approx(6e-6, rel=1e-12)


def test_an_untraced_result_is_refused_by_name():
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=64)
    with pytest.raises(sc.InvalidInputError, match="trace=True"):
        sc.critical_path(res)


PAIRS = STOCK_PAIRS


def _accounted(res: sc.Result, s: Segment) -> bool:
    """Whether the trace holds the activity a segment stands for."""
    if s.kind == "wait":
        return True
    for e in res.trace:
        if s.kind in ("reduce", "compute"):
            if (e.kind, e.rank, e.start, e.end) == (s.kind, s.endpoint, s.start, s.end):
                return True
        elif e.kind == "message" and (e.rank, e.peer, e.tag) == (s.endpoint, s.peer, s.tag):
            if s.kind == "transfer" and (e.moving, e.end) == (s.start, s.end):
                return True
            # A latency: the message's own, from its send; or, queued, the jitter drawn
            # for it after the one ahead arrived.
            if s.kind == "latency" and s.end == e.moving and (
                    s.start == e.start if not e.queued else s.route_latency == 0.0):
                return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 10**6), pair=st.sampled_from(PAIRS),
       count=st.integers(0, 3000), hosts=st.integers(0, 2),
       jitter=st.sampled_from([0.0, 0.0, 2e-6]), data=st.data())
def test_on_random_machines_the_path_tiles_the_time_with_traced_activity(
        kind, seed, pair, count, hosts, jitter, data):
    coll, alg = pair
    topo = random_machine(kind, seed, hosts=hosts)
    p = topo.nranks
    kwargs = draw_case(data, pair, p, hosts, servers_on_gpus=False)
    if jitter:
        kwargs["faults"] = sc.Faults(jitter=jitter, seed=seed)
    nbytes = 0 if coll == "barrier" else 4 * count
    res = sc.simulate(topo, coll, algorithm=alg, nbytes=nbytes, trace=True, **kwargs)
    for e in res.trace:
        if e.kind == "message":
            assert e.start <= e.moving <= e.end
            if not e.queued:
                assert e.moving >= e.start + e.latency * (1 - 1e-12)
            # Its bytes cannot have crossed the route faster than its narrowest link.
            if e.wire_bytes and e.peer != e.rank:
                narrowest = topo.route(e.rank, e.peer, via=e.via).bandwidth
                assert e.wire_bytes <= (e.end - e.moving) * narrowest * (1 + 1e-9), e
    path = sc.critical_path(res)
    if res.time == 0:
        assert path.segments == ()
        return
    _tiles(path, res.time)
    for s in path.segments:
        assert _accounted(res, s), s
    # The walk goes back along what each segment waited for: a transfer follows its
    # own latency or the message ahead on its connection; anything else (and a transfer
    # of no latency) follows an activity that ended at its endpoint: a message it sent
    # or received (a message of no bytes ends with its latency), a reduction or compute
    # span, or its own wait; or at an endpoint that messages of no time at that instant
    # reached it from.
    for a, b in zip(path.segments, path.segments[1:]):
        same_connection = (a.endpoint, a.peer, a.tag) == (b.endpoint, b.peer, b.tag)
        if b.kind == "transfer" and not same_connection:
            assert any(e.kind == "message" and e.moving == e.start == b.start
                       and (e.rank, e.peer, e.tag) == (b.endpoint, b.peer, b.tag)
                       for e in res.trace), (a, b)
        if not same_connection:
            reached = {a.endpoint, a.peer}
            for _ in range(len(res.trace)):
                more = {e.peer for e in res.trace if e.kind == "message"
                        and e.start == e.end == a.end and e.rank in reached}
                if more <= reached:
                    break
                reached |= more
            assert b.endpoint in reached, (a, b)


def test_a_program_s_compute_and_collective_chain_through_the_slowest_rank():
    def step(comm, x):
        # Rank 2 computes longest before the all_reduce; every rank computes 5 us after.
        yield comm.compute(10e-6 if comm.rank == 2 else 4e-6)
        reduced = yield comm.all_reduce(x, algorithm="ring")
        yield comm.compute(5e-6)
        return reduced

    topo = reference_network(4)
    x = sc.VirtualBuffer.of(4 * MiB, np.uint8)
    res = sc.run_program(topo, step, x, trace=True)
    path = sc.critical_path(res)
    _tiles(path, res.time)
    # The ring cannot start its steps before rank 2 has computed: the path begins with
    # its 10 us, ends with 5 us of compute, and between them runs the ring's 2(p - 1)
    # steps and the p - 1 reductions of its reduce-scatter.
    assert (path.segments[0].kind, path.segments[0].endpoint) == ("compute", 2)
    assert path.segments[-1].kind == "compute"
    assert path.totals()["compute"] == pytest.approx(15e-6, rel=1e-12)
    assert path.by_endpoint("compute")[2] >= 10e-6
    assert path.messages() == 2 * 3
    assert res.time == pytest.approx(15e-6 + 6 * (ALPHA + MiB * BETA) + 3 * MiB * GAMMA,
                                     rel=1e-9)
    assert path.totals()["reduce"] == pytest.approx(3 * MiB * GAMMA, rel=1e-9)
    with pytest.raises(sc.InvalidInputError, match="not a kind of segment; one of"):
        path.by_endpoint("sleep")


def test_empty_slices_queued_behind_one_arrive_with_it_and_the_walk_ends():
    res = _ordered_run(1000, cuts=((0, 1000), (1000, 1000), (1000, 1000)), delays=(0.0,) * 3)
    # The empty slices move once the first has arrived (at 1 + 1 = 2 us) and take no
    # time: all three arrive at 2 us, and the path is the first's latency and bytes.
    ends = [e.end for e in res.trace if e.kind == "message"]
    np.testing.assert_allclose(ends, [2e-6] * 3, rtol=1e-12)
    path = sc.critical_path(res)
    assert _kinds(path) == [("latency", 0, 1), ("transfer", 0, 1)]
    _tiles(path, res.time)


def test_the_path_as_json_from_python_and_from_the_command_line(tmp_path, capsys):
    topo = sc.topology.switch(4, bandwidth=1e9, latency=0.5e-6, reduce_bandwidth=4e9)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4000, dtype=np.uint8,
                      trace=True)
    path = sc.critical_path(res)
    record = json.loads(json.dumps(path.to_dict(topo)))
    assert record["time"] == res.time
    assert sum(record["totals"].values()) == pytest.approx(res.time, rel=1e-12)
    assert len(record["segments"]) == len(path.segments)
    first = record["segments"][0]
    assert (first["kind"], first["endpoint"], first["peer"]) == (
        path.segments[0].kind, f"gpu{path.segments[0].endpoint}",
        f"gpu{path.segments[0].peer}")
    # 6 steps of 1000 bytes at 1 GB/s; 3 reductions of 1000 bytes at 4 GB/s.
    assert record["totals"]["transfer"] == pytest.approx(6e-6, rel=1e-9)
    assert sum(record["by_endpoint"]["reduce"].values()) == pytest.approx(0.75e-6, rel=1e-9)
    assert sum(record["by_link"].values()) == pytest.approx(6e-6, rel=1e-9)
    assert "by_link" not in path.to_dict()
    for wrong in (sc.topology.switch(5), sc.topology.ring(4)):
        for use in (path.to_dict, path.summary, path.by_link):
            with pytest.raises(sc.InvalidInputError, match="not the one the run took"):
                use(wrong)
    assert main(["trace", "--topology", "switch:4", "--size", "1K", "--output",
                 str(tmp_path / "t.json"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["collective"] == "all_reduce" and printed["trace"].endswith("t.json")
    assert sum(printed["critical_path"]["totals"].values()) == pytest.approx(
        printed["time"], rel=1e-12)


def test_a_summary_takes_a_count_of_links_and_an_export_its_own_runs_path():
    from simcoll.trace import to_chrome

    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=64,
                      trace=True)
    other = sc.simulate(sc.topology.ring(3), "all_reduce", algorithm="ring", nbytes=48,
                        trace=True)
    for links in ("a", -1, 1.5):
        with pytest.raises(sc.InvalidInputError, match=f"links={links!r} is not accepted"):
            sc.critical_path(res).summary(links=links)
    for path in ("x", sc.critical_path(other)):
        with pytest.raises(sc.InvalidInputError, match="is not the critical path of this run"):
            to_chrome(res, path=path)
    assert to_chrome(res, path=sc.critical_path(res)) == to_chrome(res)
    # A broadcast from root 1 takes as long as one from root 0 on a switch, and its path
    # was taken for the other's.
    machine = sc.topology.switch(4, bandwidth=1e9, latency=0.5e-6)
    root0, root1 = (sc.simulate(machine, "broadcast", algorithm="binomial", nbytes=4096,
                                root=root, trace=True) for root in (0, 1))
    assert root0.time == root1.time
    with pytest.raises(sc.InvalidInputError, match="is not the critical path of this run"):
        to_chrome(root1, path=sc.critical_path(root0))


def _ping_pong(comm, held):
    """Rank 0 sends 1 MB to rank 1 and waits for 1 MB back; rank 1 is held 30 us
    (``held``: "late" by the fault plan, "sleep" or "compute") before it receives."""
    if comm.rank == 0:
        yield comm.send(np.zeros(1_000_000, np.uint8), 1)
        yield comm.recv(1)
    else:
        if held == "sleep":
            yield comm.sleep(30e-6)
        elif held == "compute":
            yield comm.compute(30e-6)
        yield comm.recv(0)
        yield comm.send(np.zeros(1_000_000, np.uint8), 0)


@pytest.mark.parametrize("held", ["late", "sleep", "compute"])
def test_an_arrival_the_receiver_did_not_wait_for_is_not_on_the_path(held):
    topo = sc.topology.switch(2, bandwidth=100e9, latency=1e-6)
    faults = sc.Faults(late={1: 30e-6}) if held == "late" else None
    res = sc.run_program(topo, _ping_pong, held, trace=True, faults=faults)
    # 0 -> 1 arrives at 2 x 1 us + 1e6 B / 100 GB/s = 12 us, while rank 1 is held until
    # 30 us: it woke nothing there. Rank 1 then answers: 2 us of latency, 10 us of bytes,
    # 42 us in all; the first message is off the path (any size gives 42 us). Each
    # sender waits on its send.
    there, back = [e for e in res.trace if e.kind == "message"]
    assert (there.woke_sender, there.woke_receiver) == (True, False)
    assert (back.woke_sender, back.woke_receiver) == (True, True)
    path = sc.critical_path(res)
    first = "compute" if held == "compute" else "wait"
    assert _kinds(path) == [(first, 1, None), ("latency", 1, 0), ("transfer", 1, 0)]
    np.testing.assert_allclose([s.end for s in path.segments], [30e-6, 32e-6, 42e-6],
                               rtol=1e-12)
    _tiles(path, res.time)


def test_a_message_of_no_time_that_lands_during_a_sleep_passes_nothing_on():
    topo = sc.Topology("no latency")
    gpus = [topo.add_gpu() for _ in range(3)]
    switch = topo.add_switch("switch")
    for gpu in gpus:
        topo.add_link(gpu, switch, bandwidth=100e9)
    empty = np.zeros(0, np.uint8)

    def relay(comm):
        if comm.rank == 0:
            yield comm.compute(5e-6)
            yield comm.send(empty, 1)
        elif comm.rank == 1:
            yield comm.recv(0)
            yield comm.send(empty, 2)
        else:
            yield comm.compute(1e-6)
            yield comm.sleep(9e-6)
            yield comm.recv(1)
            yield comm.compute(3e-6)

    res = sc.run_program(topo, relay, trace=True)
    # The empty messages reach rank 2 at 5 us, while it sleeps from 1 to 1 + 9 = 10 us;
    # it computes 10 to 13 us: its own compute, sleep and compute are the path.
    path = sc.critical_path(res)
    assert _kinds(path) == [("compute", 2, None), ("wait", 2, None), ("compute", 2, None)]
    np.testing.assert_allclose([s.end for s in path.segments], [1e-6, 10e-6, 13e-6],
                               rtol=1e-12)


def test_the_message_ahead_of_an_ordered_one_is_on_its_own_matching_context():
    def two_contexts(comm):
        other = comm.fresh_context()
        if comm.rank == 0:
            a1 = comm.send(np.zeros(1_000_000, np.uint8), 1, ordered=True)
            a2 = comm.send(np.zeros(1000, np.uint8), 1, ordered=True)  # behind a1
            yield comm.sleep(11e-6)
            b1 = other.send(np.zeros(10, np.uint8), 1, ordered=True)  # same tag, peer
            for event in (a1, a2, b1):
                yield event
        else:
            yield comm.recv(0)
            yield comm.recv(0)
            yield other.recv(0)

    topo = sc.topology.switch(2, bandwidth=100e9, latency=1e-6)
    res = sc.run_program(topo, two_contexts, trace=True,
                         faults=sc.Faults(jitter=4e-6, seed=2))
    # The jitter of each message, drawn as it is handed to the network: a1 at 0, b1 at
    # 11 us, a2 when a1 arrives (j1 = 1.046, j2 = 1.194, j3 = 3.257 us).
    rng = np.random.default_rng(2)
    j1, j2, j3 = (rng.uniform(0.0, 4e-6) for _ in range(3))
    # a1: 2 us of latency + j1, then 1e6 B at 100 GB/s (10 us): ends at 13.046 us.
    # b1: sent at 11 us, + 2 us + j2, then 10 B (0.1 ns): ends at 14.194 us.
    # a2: moves j3 after a1 arrives (16.303 us), then 1000 B (10 ns): ends at 16.313 us.
    a1_end = 2e-6 + j1 + 10e-6
    a2_moving = a1_end + j3
    a1, a2, b1 = sorted((e for e in res.trace if e.kind == "message"),
                        key=lambda e: -e.nbytes)
    assert (a1.context, a2.context) == (0, 0) and b1.context != 0
    assert b1.end == pytest.approx(13e-6 + j2 + 0.1e-9, rel=1e-9)
    assert a1.end < b1.end < a2.moving
    assert res.time == pytest.approx(a2_moving + 10e-9, rel=1e-9)
    # a2 waited for a1, not for b1 (another context's, which arrived in between).
    path = sc.critical_path(res)
    assert [(s.kind, s.nbytes) for s in path.segments] == [
        ("latency", 1_000_000), ("transfer", 1_000_000), ("latency", 1000),
        ("transfer", 1000)]
    np.testing.assert_allclose([s.end for s in path.segments],
                               [2e-6 + j1, a1_end, a2_moving, a2_moving + 10e-9], rtol=1e-9)
    assert path.totals()["wait"] == 0.0
    _tiles(path, res.time)


def _chain(factor: float, at: float) -> tuple[sc.Topology, sc.RunResult]:
    """1 MB from gpu0 to gpu1 over gpu0 -(100 GB/s)- sw -(50 GB/s)- gpu1, 1 us per link,
    with gpu0-sw at ``factor`` times its bandwidth from ``at`` on."""
    topo = sc.Topology("chain")
    gpu0, gpu1, switch = topo.add_gpu(), topo.add_gpu(), topo.add_switch("sw")
    topo.add_link(gpu0, switch, bandwidth=100e9, latency=1e-6)
    topo.add_link(switch, gpu1, bandwidth=50e9, latency=1e-6)

    def send(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(1_000_000, np.uint8), 1)
        else:
            yield comm.recv(0)

    faults = sc.Faults(links=[sc.LinkFault(gpu0, "sw", at=at, factor=factor)])
    return topo, sc.run_program(topo, send, trace=True, faults=faults)


@pytest.mark.parametrize("factor, at, time, mean, narrowest", [
    # From 0, gpu0->sw runs at 10 GB/s: 2 us + 1e6 B / 10 GB/s = 102 us, all of it
    # limited by gpu0->sw (sw->gpu1: 50 GB/s).
    (0.1, 0.0, 102e-6, 10e9, "gpu0->sw"),
    # The bytes move from 2 us at 50 GB/s (sw->gpu1); at 12 us 500 kB are left, and
    # gpu0->sw drops to 20 GB/s: 25 us more, the end at 37 us. Over the 35 us of bytes
    # gpu0->sw averaged (100 x 10 + 20 x 25) / 35 = 42.857 GB/s, below sw->gpu1's 50.
    (0.2, 12e-6, 37e-6, 1500e9 / 35, "gpu0->sw"),
    # Down to 50 GB/s at 12 us it limits nothing: 500 kB at 50 GB/s end at 22 us, and
    # gpu0->sw averaged (100 x 10 + 50 x 10) / 20 = 75 GB/s: sw->gpu1 stays narrowest.
    (0.5, 12e-6, 22e-6, 75e9, "sw->gpu1"),
])
def test_the_narrowest_link_is_by_the_bandwidth_a_link_fault_left(factor, at, time, mean,
                                                                  narrowest):
    topo, res = _chain(factor, at)
    assert res.time == pytest.approx(time, rel=1e-9)
    (message,) = res.trace
    out, back = 0, 1  # directed links of link 0 (gpu0-sw): gpu0->sw, sw->gpu0
    assert topo.directed_link(out) == ("gpu0", "sw")
    assert [d for d, _ in message.bandwidths] == [out, back]
    np.testing.assert_allclose([b for _, b in message.bandwidths], [mean, mean], rtol=1e-9)
    path = sc.critical_path(res)
    transfer = path.segments[-1]
    assert transfer.kind == "transfer" and narrowest_link(topo, transfer) == narrowest
    assert path.by_link(topo) == {narrowest: pytest.approx(time - 2e-6, rel=1e-9)}
    assert list(path.to_dict(topo)["by_link"]) == [narrowest]
    assert f"    {narrowest:<24}" in path.summary(topo)
    rows = [e for e in to_chrome(res, topo)["traceEvents"]
            if e.get("cat") == "critical path" and e["name"].startswith("transfer")]
    assert [r["args"]["narrowest_link"] for r in rows] == [narrowest]


def test_a_message_moved_off_a_failed_link_waits_out_its_new_routes_extra_latency():
    topo = sc.topology.ring(4, bandwidth=100e9, latency=1e-6)

    def send(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(1_000_000, np.uint8), 1)
        elif comm.rank == 1:
            yield comm.recv(0)

    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=5e-6)])
    res = sc.run_program(topo, send, trace=True, faults=faults)
    # 1 us of latency, then 1e6 B at 100 GB/s; at 5 us the 600 kB left move to
    # gpu0 -> gpu3 -> gpu2 -> gpu1 (100 GB/s), after the 3 - 1 us of latency it adds:
    # 13 us, as when sent that way from the start.
    assert res.time == pytest.approx(13e-6, rel=1e-12)
    path = sc.critical_path(res)
    assert [s.kind for s in path.segments] == ["latency", "transfer"]
    np.testing.assert_allclose([s.end for s in path.segments], [1e-6, 13e-6], rtol=1e-12)
    assert path.segments[0].route_latency == pytest.approx(1e-6, rel=1e-12)
    # Its links stay the route it was handed to: gpu0->gpu1, at 100 GB/s for 4 us and 0
    # for 8 us, (100 x 4 + 0 x 8) / 12 = 33.3 GB/s over the transfer.
    transfer = path.segments[1]
    assert [topo.directed_link(d) for d in transfer.links] == [("gpu0", "gpu1")]
    assert dict(transfer.bandwidths)[transfer.links[0]] == pytest.approx(400e9 / 12,
                                                                         rel=1e-9)
    assert narrowest_link(topo, transfer) == "gpu0->gpu1"


def test_a_ring_step_is_put_down_to_the_message_from_the_previous_rank():
    # Each ring step's sendrecv ends when its send and its receive arrive, at one instant
    # on a symmetric switch: both woke the rank, and the walk takes the arrival (the data
    # the next reduction needs), so the path runs round the ring: 1->2, reduce on 2,
    # 2->3, ..., one message per step of the 2 (p - 1) = 6, not one rank's own sends.
    topo = sc.topology.switch(4, bandwidth=100 * sc.GB, latency=1 * sc.us,
                              reduce_bandwidth=200 * sc.GB)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4 << 20, trace=True)
    sent = [(s.endpoint, s.peer) for s in sc.critical_path(res).segments
            if s.kind == "transfer"]
    assert len(sent) == 6
    assert all(peer == (src + 1) % 4 for src, peer in sent)
    assert all(nxt[0] == prev[1] for prev, nxt in zip(sent, sent[1:]))


@pytest.mark.parametrize("compute", [20e-6, 1e-6])
def test_a_sleep_of_one_program_is_not_put_down_to_another_s_compute(compute):
    """Rank 0 starts a program that sleeps 25 us (a launch) and then sends 4 KiB, and
    computes meanwhile: the run takes 25 + 2 (two links of 1 us) + 4096 B / 100 GB/s us
    whatever it computes, so the path is that sleep, the route's latency and the bytes.
    The walk took the compute's end for what woke the sender, and put 20 us of compute
    on the path."""
    def launch_beside_compute(comm):
        if comm.rank == 0:
            def launched():
                yield comm.sleep(25e-6)
                yield comm.send(np.zeros(1024, np.float32), 1)
            sending = comm.start(launched())
            yield comm.compute(compute)
            yield sending
        else:
            yield comm.recv(0)

    topo = sc.topology.switch(2, bandwidth=100e9, latency=1e-6)
    res = sc.run_program(topo, launch_beside_compute, trace=True)
    assert res.time == pytest.approx(25e-6 + 2e-6 + 4096 / 100e9, rel=1e-12)
    assert [(s.kind, s.rank) for s in res.sleeps] == [("sleep", 0)]
    assert (res.sleeps[0].start, res.sleeps[0].end) == pytest.approx((0.0, 25e-6), abs=1e-18)
    path = sc.critical_path(res)
    _tiles(path, res.time)
    assert [(s.kind, s.endpoint) for s in path.segments] == \
        [("wait", 0), ("latency", 0), ("transfer", 0)]
    assert path.segments[0].end == pytest.approx(25e-6, rel=1e-12)
    assert path.totals()["compute"] == 0.0


def test_a_ddp_step_s_path_holds_only_the_compute_its_collectives_do_not_hide():
    """4 buckets of 50 us of backward compute, each followed by NCCL's all_reduce of its
    16 MiB on one DGX H100, which takes longer than a bucket's compute: the step is the
    first bucket's 50 us, then the four all_reduces back to back, and only those 50 us
    of compute are critical (the path held three buckets' 150 us, and left out the first
    all_reduce)."""
    one = sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl",
                      nbytes=16 << 20)
    assert one.time > 50e-6
    res = sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="bucketed",
                      nbytes=64 << 20, buckets=4, compute=200e-6, inner="nccl", trace=True)
    assert res.time == pytest.approx(50e-6 + 4 * one.time, rel=1e-9)
    path = sc.critical_path(res)
    _tiles(path, res.time)
    assert path.totals()["compute"] == pytest.approx(50e-6, rel=1e-12)


def _sleeps_or_computes(comm):
    if comm.rank == 0:
        yield comm.sleep(2e-6)
    else:
        yield comm.compute(2e-6)


def _side_compute_on_0(comm, then_sleep):
    def side():
        yield comm.compute(3e-6)
    if comm.rank == 0:
        comm.start(side())
    elif then_sleep:
        yield comm.sleep(1e-6)
        yield comm.compute(2e-6)
    else:
        yield comm.compute(3e-6)


def _message_and_compute_end_together(comm, arrival):
    if comm.rank == 1:
        yield comm.send(np.zeros(10_000, np.uint8), 0)
    else:
        yield comm.compute(arrival)
        yield comm.recv(1)


def test_the_activity_that_ends_the_run_by_the_documented_order():
    """What ends at the run's end, worked out on switch(2) (10 GB/s, 1 us a link):
    * a compute before a sleep (rank 1's 2 us of compute, not rank 0's 2 us asleep);
    * among equals, the rank whose program returned last (rank 1's own compute, not rank
      0's started program's, which ends at 3 us as well), and with it its own sleep
      before its compute;
    * a message before anything else: 10,000 bytes take 2 us of route and 1 us of
      transfer, and rank 0 computes exactly until they arrive."""
    topo = sc.topology.switch(2, bandwidth=10e9, latency=1e-6)

    def path(program, *args):
        res = sc.run_program(topo, program, *args, trace=True)
        return [(s.kind, s.endpoint, pytest.approx(s.start, abs=1e-15),
                 pytest.approx(s.end, abs=1e-15)) for s in sc.critical_path(res).segments]

    assert path(_sleeps_or_computes) == [("compute", 1, 0.0, 2e-6)]
    assert path(_side_compute_on_0, False) == [("compute", 1, 0.0, 3e-6)]
    assert path(_side_compute_on_0, True) == [("wait", 1, 0.0, 1e-6),
                                              ("compute", 1, 1e-6, 3e-6)]
    assert path(_message_and_compute_end_together, 3e-6) == [
        ("latency", 1, 0.0, 2e-6), ("transfer", 1, 2e-6, 3e-6)]


def test_a_topology_of_the_same_name_and_shape_but_other_links_is_refused():
    """Builders leave bandwidths out of a name: switch(4) at 25 GB/s is not the
    switch(4) at 100 GB/s a run took, and its loads and narrowest links would be wrong.
    A topology rebuilt the same (another object) is the one; one changed after the run
    is not."""
    from simcoll.link_load import link_loads
    from simcoll.plot import link_utilization

    ran_on = sc.topology.switch(4, bandwidth=100e9)
    res = sc.simulate(ran_on, "all_reduce", algorithm="ring", nbytes=1 << 20, trace=True)
    path = sc.critical_path(res)
    slower = sc.topology.switch(4, bandwidth=25e9)
    assert slower.name == ran_on.name
    for use in (path.summary, path.by_link, path.to_dict):
        with pytest.raises(sc.InvalidInputError, match=r"^topology 'switch\(4\)' has the name "
                                                       r"and rank count of the one the run "
                                                       r"took but other devices or links"):
            use(slower)
    for use in (lambda t: link_loads(res, t), lambda t: link_utilization(res, t),
                lambda t: to_chrome(res, t)):
        with pytest.raises(sc.InvalidInputError, match=r"^topology 'switch\(4\)' has the name "
                                                       r"and shape of the one the result ran "
                                                       r"on but other devices or links"):
            use(slower)
    again = sc.topology.switch(4, bandwidth=100e9)
    assert sum(path.by_link(again).values()) == pytest.approx(path.totals()["transfer"])
    assert len(link_loads(res, again)) == 8
    ran_on.add_link("gpu0", "gpu1", bandwidth=1e9)
    with pytest.raises(sc.InvalidInputError, match="other devices or links"):
        path.by_link(ran_on)
    # a record written without the digest is taken by its name and shape, as before
    unknown = dataclasses.replace(res, topology_hash=None)
    assert len(link_loads(unknown, slower)) == 8


def _multicast_over_branches(copies):
    """gpu0 multicasts 1 MB to gpus 1 .. ``copies`` behind one switch, gpu1's branch at
    10 GB/s and the others' at 100 GB/s (1 us a link); the last destination computes
    1 us after its copy, so the critical path runs through that copy. Returns the
    topology and the traced run."""
    t = sc.Topology(f"branches{copies}")
    g = [t.add_gpu() for _ in range(copies + 1)]
    s = t.add_switch()
    t.add_link(g[0], s, bandwidth=100e9, latency=1e-6)
    for k in range(1, copies + 1):
        t.add_link(s, g[k], bandwidth=10e9 if k == 1 else 100e9, latency=1e-6)

    def program(comm):
        if comm.rank == 0:
            yield comm.multicast(np.zeros(250_000, np.float32), list(range(1, copies + 1)))
        elif comm.rank == copies:
            yield comm.recv(0)
            yield comm.compute(1e-6)
        else:
            yield comm.recv(0)

    return t, sc.run_program(t, program, trace=True)


def test_a_multicasts_later_copy_is_put_down_to_the_narrowest_link_of_its_tree():
    """A multicast drains as one flow at its slowest branch's share: the copy to gpu2
    (over 100 GB/s links) moved at the 10 GB/s of gpu1's branch, which is where its
    transfer's time goes, not to gpu0's 100 GB/s uplink its own route starts with."""
    t, res = _multicast_over_branches(2)
    assert [e.links for e in res.trace[:2]] == [(0, 2, 4), ()]
    path = sc.critical_path(res)
    (transfer,) = [s for s in path.segments if s.kind == "transfer"]
    assert transfer.peer == 2 and transfer.duration == pytest.approx(1e6 / 10e9, rel=1e-9)
    assert transfer.links == (0, 2, 4)
    assert narrowest_link(t, transfer) == "switch0->gpu1"
    assert path.by_link(t) == {"switch0->gpu1": pytest.approx(1e-4, rel=1e-9)}


def test_an_empty_ordered_messages_latency_and_the_next_ones_transfer_are_two_messages():
    """An empty message's 5 us (2 us of route latency, 3 us of delay) ends where the
    transfer of the 1000 B queued behind it begins: the path goes through both."""
    t = sc.topology.switch(2, bandwidth=1e9, latency=1e-6)

    def program(comm):
        if comm.rank == 0:
            a = comm.send(np.zeros(0, np.float32), 1, ordered=True, delay=3e-6)
            b = comm.send(np.zeros(250, np.float32), 1, ordered=True)
            yield a
            yield b
        else:
            yield comm.recv(0)
            yield comm.recv(0)

    path = sc.critical_path(sc.run_program(t, program, trace=True))
    assert [(s.kind, s.nbytes) for s in path.segments] == [("latency", 0), ("transfer", 1000)]
    assert path.segments[0].duration == pytest.approx(5e-6, rel=1e-9)
    assert path.messages() == 2
    assert "through 2 messages" in path.summary(t)


def test_a_multicasts_third_copy_takes_the_tree_of_its_first_not_its_seconds_empty_links():
    """A multicast to three GPUs: the trace holds the tree on the first destination's
    event and () on the second's and third's. The path through gpu3's copy must walk
    back past the second destination (its links () too) to the first: its transfer has
    the whole tree (g0->s, s->g1, s->g2, s->g3: directed links 0, 2, 4, 6) and moved at
    the 10 GB/s of gpu1's branch, 1 MB in 1e-4 s."""
    t, res = _multicast_over_branches(3)
    assert [e.links for e in res.trace[:3]] == [(0, 2, 4, 6), (), ()]
    path = sc.critical_path(res)
    (transfer,) = [s for s in path.segments if s.kind == "transfer"]
    assert transfer.peer == 3 and transfer.duration == pytest.approx(1e6 / 10e9, rel=1e-9)
    assert transfer.links == (0, 2, 4, 6)
    assert narrowest_link(t, transfer) == "switch0->gpu1"


def _computes_alone(comm):
    if comm.rank == 0:
        yield comm.compute(2e-6)


def _one_message(comm):
    if comm.rank == 0:
        yield comm.send(np.zeros(1000, np.uint8), 1)
    else:
        yield comm.recv(0)


def test_the_summary_counts_one_segment_and_one_message_in_the_singular():
    """A path of one compute span: '1 segment through 0 messages'; one message of 1000 B
    over 1 us and 10 GB/s: its latency then its bytes, '2 segments through 1 message'
    (mutants: 'segments' and 'messages' whatever the count)."""
    topo = sc.topology.switch(2, bandwidth=10e9, latency=0.5e-6)
    path = sc.critical_path(sc.run_program(topo, _computes_alone, trace=True))
    assert [s.kind for s in path.segments] == ["compute"]
    assert path.summary().splitlines()[0] == \
        "critical path of 2.000 us: 1 segment through 0 messages"
    path = sc.critical_path(sc.run_program(topo, _one_message, trace=True))
    assert [s.kind for s in path.segments] == ["latency", "transfer"]
    assert path.summary().splitlines()[0].endswith(": 2 segments through 1 message")


def _star(up: float, down0: float) -> sc.Topology:
    topo = sc.Topology("star")
    gpus = [topo.add_gpu() for _ in range(4)]
    switch = topo.add_switch("sw")
    for i, gpu in enumerate(gpus):
        topo.add_link(gpu, switch, bandwidth=up, latency=1e-6,
                      back_bandwidth=down0 if i == 0 else up)
    return topo


def _incast(comm):
    if comm.rank == 0:
        for event in [comm.recv(r) for r in range(1, comm.size)]:
            yield event
    else:
        yield comm.send(np.zeros(1_000_000, np.uint8), 0)


@pytest.mark.parametrize("up, down0, time_us, transfer_us", [
    # 3 MB into gpu0 at once: sw->gpu0 carries 3 MB in 3 MB / down0 (two hops of 1 us
    # before), each sender's uplink 1 MB of it; a link left each message down0 / 3.
    (100e9, 100e9, 32.0, 30.0),
    (200e9, 100e9, 32.0, 30.0),
    (100e9, 200e9, 17.0, 15.0),   # 200 / 3 = 66.7 GB/s, still below the uplinks' 100
])
def test_an_incasts_transfer_is_put_down_to_the_shared_last_hop(up, down0, time_us,
                                                                 transfer_us):
    """Three GPUs send 1 MB each to gpu0 at once. The shared sw->gpu0 sets the time
    (doubling it halves the transfer; doubling the uplinks changes nothing), but by_link
    named the sender's uplink gpu1->sw, the first of the links of least bandwidth."""
    topo = _star(up, down0)
    res = sc.run_program(topo, _incast, trace=True)
    assert res.time == pytest.approx(time_us * 1e-6, rel=1e-12)
    path = sc.critical_path(res)
    [transfer] = [s for s in path.segments if s.kind == "transfer"]
    sw_gpu0 = topo.route(1, 0).links[1]
    assert transfer.shares == ((sw_gpu0, pytest.approx(1 / 3, rel=1e-9)),)
    assert narrowest_link(topo, transfer) == "sw->gpu0"
    assert path.by_link(topo) == {"sw->gpu0": pytest.approx(transfer_us * 1e-6, rel=1e-9)}


def test_an_empty_message_moved_off_a_failed_link_waits_its_detour_as_latency():
    """A triangle of 10 us links: an empty message from gpu0 to gpu1, whose link fails at
    5 us, goes round by gpu2 and arrives at 20 us. Its extra 10 us were a 0-byte
    "transfer" put down to the failed link; they are latency, as the rest of its time."""
    topo = sc.Topology("triangle")
    gpus = [topo.add_gpu() for _ in range(3)]
    for u, v in [(0, 1), (1, 2), (0, 2)]:
        topo.add_link(gpus[u], gpus[v], bandwidth=1e9, latency=10e-6)

    def send(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(0, np.uint8), 1)
        elif comm.rank == 1:
            yield comm.recv(0)

    res = sc.run_program(topo, send, trace=True,
                         faults=sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=5e-6)]))
    assert res.time == pytest.approx(20e-6, rel=1e-12)
    path = sc.critical_path(res)
    assert [(s.kind, s.start, s.end) for s in path.segments] == [
        ("latency", 0.0, pytest.approx(20e-6, rel=1e-12))]
    assert path.segments[0].route_latency == pytest.approx(10e-6, rel=1e-12)
    assert path.by_link(topo) == {}


def _uneven_incast_star() -> sc.Topology:
    """gpu0 - gpu3 on a switch, their links at 80, 50, 100 and 100 GB/s, 1 us each."""
    topo = sc.Topology("uneven star")
    gpus = [topo.add_gpu(f"gpu{i}") for i in range(4)]
    switch = topo.add_switch("sw")
    for gpu, bandwidth in zip(gpus, (80e9, 50e9, 100e9, 100e9)):
        topo.add_link(gpu, switch, bandwidth=bandwidth, latency=1e-6)
    return topo


def _megabyte_incast(comm):
    if comm.rank == 0:
        for event in [comm.recv(r) for r in (1, 2, 3)]:
            yield event
    else:
        yield comm.send(np.zeros(1_000_000, np.uint8), 0)


@pytest.mark.parametrize("network", ["analytical", "flow", "flow_rtt"])
def test_an_incasts_critical_transfer_is_put_down_to_the_link_that_held_it(network):
    """gpu1, gpu2 and gpu3 send 1 MB each into gpu0 at once. The analytical network
    shares no link: gpu1's moves at its route's least bandwidth (its 50 GB/s uplink),
    20 us after two 1 us hops, and the path put it down to sw->gpu0 at a third of 80 GB/s
    (the shares a sharing network would give), a link that did not hold it back. On the
    networks that share links, routes of equal latency give each message a third of
    sw->gpu0 (max-min and 1 / latency alike: 26.7 GB/s, below gpu1's uplink), all ending
    at 2 us + 3 MB / 80 GB/s = 39.5 us, and the critical transfer is put down to
    sw->gpu0 at its third, with shares recorded."""
    topo = _uneven_incast_star()
    res = sc.run_program(topo, _megabyte_incast, trace=True, network=network)
    path = sc.critical_path(res)
    [transfer] = [s for s in path.segments if s.kind == "transfer"]
    if network == "analytical":
        assert res.time == pytest.approx(2e-6 + 1e6 / 50e9, rel=1e-12)
        assert transfer.shares == ()
        assert narrowest_link(topo, transfer) == "gpu1->sw"
        assert path.by_link(topo) == {"gpu1->sw": pytest.approx(20e-6, rel=1e-9)}
    else:
        assert res.time == pytest.approx(2e-6 + 3e6 / 80e9, rel=1e-9)
        assert transfer.shares != ()
        assert narrowest_link(topo, transfer) == "sw->gpu0"
