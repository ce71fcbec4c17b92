"""Traces record every message, reduction and compute span, and export to Chrome JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, NO_FORMULA, reference_network, register_probe

import simcoll as sc
from simcoll.trace import save_chrome, to_chrome


def test_ring_trace_holds_every_message_and_reduction_with_its_times():
    p, m = 4, 4 * 4 * 1024
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=m,
                      trace=True)
    messages = [e for e in res.trace if e.kind == "message"]
    reductions = [e for e in res.trace if e.kind == "reduce"]
    assert len(messages) == res.messages == 2 * p * (p - 1)
    for e in messages:
        assert e.peer == (e.rank + 1) % p and e.nbytes == m // p
        assert e.end - e.start == pytest.approx(ALPHA + m / p * BETA, rel=1e-9)
    sent = np.bincount([e.rank for e in messages], weights=[e.nbytes for e in messages])
    np.testing.assert_array_equal(sent, res.bytes_sent)
    assert len(reductions) == p * (p - 1)
    for e in reductions:
        assert e.end - e.start == pytest.approx(m / p * GAMMA, rel=1e-9)
    assert max(e.end for e in res.trace) == pytest.approx(res.time, rel=1e-12)


def test_compute_spans_are_traced_and_untraced_runs_have_none():
    @sc.register("all_reduce", "test_traced_compute", cost=NO_FORMULA)
    def busy(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(3e-6)
        yield comm.compute(2e-6)
        return x

    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_traced_compute",
                      nbytes=8, trace=True)
    spans = sorted((e.rank, e.start, e.end) for e in res.trace if e.kind == "compute")
    np.testing.assert_allclose(spans, [(0, 0, 3e-6), (0, 3e-6, 5e-6), (1, 0, 3e-6),
                                       (1, 3e-6, 5e-6)], rtol=1e-12, atol=1e-18)
    assert sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring",
                       nbytes=8).trace is None


def test_chrome_export(tmp_path):
    res = sc.simulate(reference_network(3), "all_reduce", algorithm="ring", nbytes=1200,
                      trace=True)
    path = tmp_path / "ring.json"
    save_chrome(res, path)
    assert [p.name for p in tmp_path.iterdir()] == ["ring.json"]
    events = json.loads(path.read_text())["traceEvents"]
    begins = [e for e in events if e["ph"] == "b"]
    ends = [e for e in events if e["ph"] == "e"]
    assert len(begins) == len(ends) == res.messages
    # Every async begin has its end: same category, id and process, not before it.
    end_of = {(e["cat"], e["id"], e["pid"]): e for e in ends}
    assert len(end_of) == len(ends)
    messages = [e for e in res.trace if e.kind == "message"]
    for b, message in zip(begins, messages):
        e = end_of[(b["cat"], b["id"], b["pid"])]
        assert (b["pid"], b["args"]["dst"], b["args"]["bytes"]) == (
            message.rank, message.peer, message.nbytes)
        assert (b["ts"], e["ts"]) == pytest.approx((message.start * 1e6, message.end * 1e6))
    assert {e["pid"] for e in begins} == {0, 1, 2}
    spans = [e for e in events if e["ph"] == "X" and e["cat"] != "critical path"]
    assert len(spans) == 3 * 2 and all(e["name"] == "reduce" for e in spans)
    # The critical path's row: 2(p - 1) messages, each a latency and a transfer, and
    # the p - 1 reductions of the reduce-scatter's steps between them.
    critical = [e["name"].split()[0] for e in events if e.get("cat") == "critical path"]
    assert sorted(critical) == sorted(["latency", "transfer"] * 4 + ["reduce"] * 2)
    assert max(e["ts"] for e in ends) == pytest.approx(res.time * 1e6)
    assert not [e for e in events if e["ph"] == "C"]
    untraced = sc.simulate(reference_network(3), "all_reduce", algorithm="ring", nbytes=12)
    with pytest.raises(sc.InvalidInputError, match="trace=True"):
        to_chrome(untraced)


def _slices_nest(events):
    """Whether every thread's complete slices ("X") nest, as the format needs: each
    begins after the one before it ends, or ends within it."""
    by_thread = {}
    for e in events:
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for slices in by_thread.values():
        open_ends = []
        for start, end in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                return False
            open_ends.append(end)
    return True


@pytest.mark.parametrize("machine, nbytes", [(sc.topology.dgx_a100(1), 4 * 2**20),
                                             (sc.topology.dgx_h100(1), 16 * 2**20)])
def test_overlapping_reductions_take_threads_of_their_own(machine, nbytes):
    """NCCL's channels reduce side by side (shared=True): their slices overlapped on one
    "reduce" thread, which Perfetto cannot draw. The critical path's row nests too
    (its durations were rounded apart from the next segment's start)."""
    res = sc.simulate(machine, "all_reduce", algorithm="nccl", nbytes=nbytes,
                      algo="ring", trace=True)
    events = to_chrome(res, machine)["traceEvents"]
    assert _slices_nest(events)
    reductions = [e for e in events if e["ph"] == "X" and e["cat"] == "reduce"]
    traced = [e for e in res.trace if e.kind == "reduce"]
    assert sorted((e["pid"], e["ts"], e["ts"] + e["dur"]) for e in reductions) == sorted(
        (e.rank, e.start * 1e6, e.end * 1e6) for e in traced)
    lanes = {e["tid"] for e in reductions}
    assert len(lanes) > 1  # they did overlap
    named = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(named[(e["pid"], e["tid"])].startswith("reduce") for e in reductions)


def test_rows_are_named_ranks_hosts_and_in_network_devices():
    """NVLS on one DGX H100: the NVSwitch reduces, and its row was named "host 0" (the
    machine has no host), and the link counters refused the machine itself, counting its
    NVSwitch as a host it does not have. Given the topology, rows are now ranks, hosts,
    then in-network devices by name, and the counters come; without it, what the result
    cannot tell apart is an endpoint. A parameter server's hosts keep their names."""
    topo = sc.topology.dgx_h100(1)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=8 << 20, algo="nvls",
                      trace=True)

    def rows(result, topology=None):
        return {e["pid"]: e["args"]["name"] for e in to_chrome(result, topology)["traceEvents"]
                if e["ph"] == "M" and e["name"] == "process_name"
                and e["args"]["name"] not in ("links", "critical path")}

    assert rows(res, topo) == {**{r: f"rank {r}" for r in range(8)},
                               8: "in-network device nvswitch0"}
    assert rows(res)[8] == "endpoint 8 (host or in-network device)"
    counters = [e for e in to_chrome(res, topo)["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in counters} == (
        {f"gpu{r}->nvswitch0" for r in range(8)} | {f"nvswitch0->gpu{r}" for r in range(8)})
    servers = sc.topology.switch(3, servers=2)
    ps = sc.simulate(servers, "all_reduce", algorithm="parameter_server", nbytes=1200,
                     trace=True)
    assert rows(ps, servers) == {0: "rank 0", 1: "rank 1", 2: "rank 2", 3: "host 0",
                                 4: "host 1"}


def test_flow_arrows_lead_from_each_send_to_its_arrival_at_the_receiver():
    res = sc.simulate(reference_network(4), "all_reduce", algorithm="naive", nbytes=4096,
                      trace=True)
    events = to_chrome(res)["traceEvents"]
    outs = [e for e in events if e.get("flow_out")]
    ins = {e["bind_id"]: e for e in events if e.get("flow_in")}
    assert len(outs) == len(ins) == res.messages == 4 * 3
    assert len({e["bind_id"] for e in outs}) == len(outs)
    end_of = {(e["cat"], e["id"], e["pid"]): e for e in events if e["ph"] == "e"}
    for out in outs:
        assert out["ph"] == "b"
        arrival = ins[out["bind_id"]]
        assert arrival["ph"] == "n" and arrival["pid"] == out["args"]["dst"]
        assert arrival["args"]["src"] == out["pid"] and arrival["name"] == f"from {out['pid']}"
        assert arrival["ts"] == end_of[(out["cat"], out["id"], out["pid"])]["ts"]
    # Async ids (and so Perfetto's tracks) of sends and arrivals never collide.
    ids = [(e["cat"], e["id"]) for e in events if e["ph"] in "bn"]
    assert len(set(ids)) == len(ids)


def counter_tracks(events) -> dict[str, list[tuple[float, float]]]:
    tracks: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        if e["ph"] == "C":
            tracks.setdefault(e["name"], []).append((e["ts"], e["args"]["bytes/s"]))
    return {name: sorted(points) for name, points in tracks.items()}


def test_link_counters_integrate_to_the_bytes_each_link_carried():
    topo = reference_network(4)
    for algorithm in ("ring", "naive", "parameter_server"):
        res = sc.simulate(topo, "all_reduce", algorithm=algorithm, nbytes=4096, trace=True)
        trace = json.loads(json.dumps(to_chrome(res, topo)))
        tracks = counter_tracks(trace["traceEvents"])
        carried = {f"{u}->{v}": b for (u, v), b in res.link_bytes.items() if b}
        assert sorted(tracks) == sorted(carried)
        for name, points in tracks.items():
            ts = [t for t, _ in points]
            rates = [r for _, r in points]
            assert ts == sorted(set(ts)) and ts[0] == 0.0
            assert min(rates) >= 0 and rates[-1] == 0
            assert ts[-1] <= res.time * 1e6 * (1 + 1e-12)
            area = sum(r * (t1 - t0) / 1e6 for (t0, r), (t1, _) in zip(points, points[1:]))
            assert area == pytest.approx(carried[name], rel=1e-9), (algorithm, name)
        links = [e for e in trace["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"
                 and e["args"]["name"] == "links"]
        assert [e["pid"] for e in links] == [4]


def test_link_counters_count_what_a_protocol_puts_on_the_wire():
    """LL writes 8 data bytes in each 16-byte line, LL128 120 in each 128 (16 lines a warp:
    1,920 in 2,048, which the 61,440-byte messages here fill whole): the counters carried
    only the payload, half of what an LL ring's links carry."""
    topo = sc.topology.dgx_h100(1)
    for proto, wire_per_data in (("LL", 16 / 8), ("LL128", 128 / 120), ("Simple", 1.0)):
        res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=15 * 2**16,
                          algo="ring", proto=proto, channels=2, trace=True)
        tracks = counter_tracks(to_chrome(res, topo)["traceEvents"])
        carried = {f"{u}->{v}": b for (u, v), b in res.link_bytes.items() if b}
        assert sorted(tracks) == sorted(carried)
        for name, points in tracks.items():
            area = sum(r * (t1 - t0) / 1e6 for (t0, r), (t1, _) in zip(points, points[1:]))
            assert area == pytest.approx(carried[name], rel=1e-9), (proto, name)
        # The Chrome messages carry both sizes and the instant the bytes began to move.
        begins = [e for e in to_chrome(res, topo)["traceEvents"] if e["ph"] == "b"]
        assert sum(b["args"]["wire_bytes"] for b in begins) == sum(carried[
            f"gpu{r}->nvswitch0"] for r in range(8))
        assert all(b["ts"] <= b["args"]["moving_us"] for b in begins)
        # Each GPU's uplink carries its payload in the protocol's lines.
        for r in range(8):
            assert carried[f"gpu{r}->nvswitch0"] == pytest.approx(
                res.bytes_sent[r] * wire_per_data, rel=1e-9), (proto, r)


def test_a_lone_message_counts_its_rate_on_each_link_of_its_route_after_its_latency():
    @register_probe("all_reduce", "test_trace_lone_message")
    def lone(comm, x, *, op):
        if comm.rank == 0:
            yield comm.compute(2e-6)
            yield comm.send(x, dst=2)
        elif comm.rank == 2:
            yield comm.recv(src=0)
        return x

    topo = sc.topology.switch(3, bandwidth=1e9, latency=0.5e-6)
    res = sc.simulate(topo, "all_reduce", algorithm="test_trace_lone_message", nbytes=3000,
                      trace=True)
    tracks = counter_tracks(to_chrome(res, topo)["traceEvents"])
    # Sent at 2 us; 2 links of 0.5 us; then 3000 B at 1 GB/s from 3 to 6 us, the whole
    # bandwidth of both links.
    for name in ("gpu0->switch", "switch->gpu2"):
        (t0, r0), (t1, r1), (t2, r2) = tracks[name]
        assert (t0, r0, r2) == (0.0, 0.0, 0.0)
        assert (t1, r1, t2) == pytest.approx((3.0, 1e9, 6.0), rel=1e-9)
    assert sorted(tracks) == ["gpu0->switch", "switch->gpu2"]
    with pytest.raises(sc.InvalidInputError, match="not the one the result ran on"):
        to_chrome(res, sc.topology.switch(4))


def test_a_message_s_chrome_arguments_name_its_matching_context():
    """Two all_reduces started side by side send messages with the same sender,
    receiver and tag; their matching contexts (TraceEvent.context) tell them apart in
    the export, as they do on the critical path."""
    def two_at_once(comm, x):
        first = comm.all_reduce(x, algorithm="ring")
        second = comm.all_reduce(x, algorithm="ring")
        yield first
        yield second

    res = sc.run_program(sc.topology.switch(2), two_at_once,
                         sc.VirtualBuffer.of(1024, np.float32), trace=True)
    sends = [e for e in to_chrome(res)["traceEvents"] if e.get("ph") == "b"]
    contexts = {e.context for e in res.trace if e.kind == "message"}
    assert len(contexts) == 2
    assert sorted(e["args"]["context"] for e in sends) == sorted(
        e.context for e in res.trace if e.kind == "message")


def test_a_rank_programs_run_exports_to_chrome_too(tmp_path):
    # It raised AttributeError: a RunResult has no collective.
    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.ones(4), 1)
        else:
            yield comm.recv(0)

    res = sc.run_program(sc.topology.switch(2), program, trace=True)
    path = tmp_path / "program.json"
    save_chrome(res, path)
    data = json.loads(path.read_text())
    assert data["otherData"] == {"program": True, "topology": "switch(2)", "nranks": 2,
                                 "time_s": res.time}
    sends = [e for e in data["traceEvents"] if e.get("ph") == "b"]
    assert len(sends) == 1 and sends[0]["args"]["bytes"] == 32


def test_trace_times_are_floats_from_the_first_instant():
    """SimPy's clock starts at the integer 0: events at t = 0 had start=0, an int, where
    TraceEvent types it float."""
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=8,
                      trace=True)
    assert res.trace[0].start == 0.0
    assert all(type(e.start) is float and type(e.end) is float for e in res.trace)


def test_mut_a_root_of_rank_0_is_named_in_the_traces_other_data():
    """otherData names a rooted run's root: rank 0 too (a falsy root is still a root);
    an unrooted collective has none."""
    topo = reference_network(4)
    for root in (0, 3):
        res = sc.simulate(topo, "broadcast", algorithm="binomial", nbytes=4096, root=root,
                          trace=True)
        assert to_chrome(res)["otherData"]["root"] == root
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096, trace=True)
    assert "root" not in to_chrome(res)["otherData"]
