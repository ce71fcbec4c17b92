"""Export a traced run (``simulate(..., trace=True)``) as a Chrome / Perfetto trace.

Open the JSON file in https://ui.perfetto.dev (or chrome://tracing). Each rank (and
server host, and in-network device) is a process row. A message is an async span on its
sender, from the send to the arrival of its last byte (messages may overlap, so they are
async spans rather than thread slices; its arguments hold its payload and wire bytes, its
tag and matching context, which tell apart the messages of collectives run side by side,
and when its bytes began to move), with a flow arrow to an instant "from <sender>" on the
receiver at the arrival. A multicast is one span per destination, each holding the whole
payload: a sender's spans add up to its bytes once per destination, where the result's
``bytes_sent`` (``host_bytes_sent`` for a server host or an in-network device) counts a
multicast once. A program's sleeps (``comm.sleep``: a
launch latency, a protocol's pacing) are not drawn on the ranks' rows; where they hold
the run back they are the critical path's ``wait`` segments. Reductions and compute spans
sit on threads of their own (reductions that overlap, as NCCL's channels' do, on ``reduce
2``, ``reduce 3``, ...). Given the topology, a "links" process adds a counter track per
directed link: its load in bytes/s over time, taking each message at its average rate
from when its bytes began to move to its arrival (see :mod:`simcoll.link_load`). A
"critical path" process, listed first, holds the run's critical path segment by segment
(:mod:`simcoll.critical_path`; given the topology, each transfer names the narrowest link
of its route). Times are in microseconds, as the format requires.

The arrows are flow events of the format's second version (``bind_id`` with ``flow_out``
on the send span, ``flow_in`` on the arrival), because the first version's ``s`` / ``f``
events bind only to thread slices, which cannot hold overlapping messages.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from simcoll.critical_path import CriticalPath, critical_path, narrowest_link
from simcoll.errors import InvalidInputError
from simcoll.files import output_path, write_atomically
from simcoll.link_load import drawn_loads, rate_steps, warn_where_drawn_differs
from simcoll.result import Result, RunResult, traced_events
from simcoll.runtime import TraceEvent
from simcoll.topology.graph import Topology

__all__ = ["to_chrome", "save_chrome", "endpoint_label", "TraceEvent"]

_THREADS = {"message": 0, "reduce": 1, "compute": 2}


def endpoint_label(result: RunResult, pid: int, topology: Topology | None) -> str:
    """An endpoint's name in traces and timelines: ``rank r``; given the topology,
    ``host h`` or ``in-network device NAME``; else ``endpoint e`` (a host or an
    in-network device, which the result alone does not tell apart)."""
    if pid < result.nranks:
        return f"rank {pid}"
    if topology is None:
        return f"endpoint {pid} (host or in-network device)"
    hosts = len(topology.hosts)
    if pid < result.nranks + hosts:
        return f"host {pid - result.nranks}"
    return f"in-network device {topology.endpoint_name(pid)}"


def _names(result: RunResult, endpoints: int, topology: Topology | None,
           lanes: dict[int, int]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    extra = max(lanes.values(), default=0) - len(_THREADS) + 1
    for pid in range(endpoints):
        name = endpoint_label(result, pid, topology)
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                       "args": {"sort_index": pid}})
        for thread, tid in _THREADS.items():
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": thread}})
        for k in range(extra):
            events.append({"ph": "M", "name": "thread_name", "pid": pid,
                           "tid": len(_THREADS) + k, "args": {"name": f"reduce {k + 2}"}})
    return events


def _reduce_lanes(trace: Sequence[TraceEvent]) -> dict[int, int]:
    """A thread for each reduction that overlaps another of its endpoint (shared ones,
    as NCCL's channels run, or one beside the one-at-a-time engine): the format needs
    a thread's slices to nest. Packed first-fit as a timeline's lanes, in microseconds
    as written (``reduce``, then ``reduce 2``, ... numbered after the other threads);
    the index of every reduction not on ``reduce``'s own thread, and its thread."""
    from simcoll.plot.style import lanes  # here: simcoll.plot imports this module

    by_endpoint: dict[int, list[int]] = {}
    for i, e in enumerate(trace):
        if e.kind == "reduce":
            by_endpoint.setdefault(e.rank, []).append(i)
    threads: dict[int, int] = {}
    for indices in by_endpoint.values():
        packed = lanes(indices, lambda i: (trace[i].start * 1e6, trace[i].end * 1e6))
        for k, lane in enumerate(packed[1:]):
            threads.update(dict.fromkeys(lane, len(_THREADS) + k))
    return threads


def _belongs(path: Any, result: RunResult, trace: Sequence[TraceEvent]) -> bool:
    """Whether ``path`` can be ``result``'s critical path: a CriticalPath of its time
    and rank count, each of whose messages, reductions and compute spans the trace
    holds between the same endpoints (a path of another run of the same time, such as
    a broadcast from another root, is not)."""
    if not isinstance(path, CriticalPath) or (path.time, path.nranks) != (
            result.time, result.nranks):
        return False
    messages = {(e.rank, e.peer, e.tag) for e in trace if e.kind == "message"}
    work = {(e.kind, e.rank) for e in trace if e.kind != "message"}
    return all((s.endpoint, s.peer, s.tag) in messages if s.peer is not None
               else s.kind == "wait" or (s.kind, s.endpoint) in work
               for s in path.segments)


def _counters(result: RunResult, topology: Topology, pid: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "links"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}]
    loads = drawn_loads(result, topology)
    warn_where_drawn_differs(loads, result.link_bytes)
    for load in loads:
        times, rates = rate_steps(load)
        if times[0] > 0:
            events.append({"ph": "C", "name": load.name, "pid": pid, "ts": 0.0,
                           "args": {"bytes/s": 0.0}})
        for t, rate in zip(times, rates):
            events.append({"ph": "C", "name": load.name, "pid": pid, "ts": t * 1e6,
                           "args": {"bytes/s": float(rate)}})
    return events


def _critical(path: CriticalPath, topology: Topology | None, pid: int
              ) -> list[dict[str, Any]]:
    """A "critical path" row: the run's critical path, segment by segment
    (:mod:`simcoll.critical_path`)."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "critical path"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": -1}}]
    for s in path.segments:
        where = f"{s.endpoint}->{s.peer}" if s.peer is not None else f"on {s.endpoint}"
        args: dict[str, Any] = {"endpoint": s.endpoint, "bytes": s.nbytes}
        if s.peer is not None:
            args.update(peer=s.peer, wire_bytes=s.wire_bytes, tag=repr(s.tag))
        if s.kind == "latency":
            args["route_latency_us"] = s.route_latency * 1e6
        if s.kind == "transfer" and topology is not None:
            args["narrowest_link"] = narrowest_link(topology, s)
        start, end = s.start * 1e6, s.end * 1e6  # as rounded where the next begins
        events.append({"ph": "X", "cat": "critical path", "name": f"{s.kind} {where}",
                       "pid": pid, "tid": 0, "ts": start, "dur": end - start,
                       "args": args})
    return events


def to_chrome(result: RunResult, topology: Topology | None = None,
              path: CriticalPath | None = None) -> dict[str, Any]:
    """The Chrome trace-event JSON object of a traced result. Its ``otherData`` says what
    ran: the collective, algorithm, bytes and (a rooted collective's) root, or
    ``program``; the topology's name, the ranks and the time in seconds.

    Args:
        result: a result of ``simulate(..., trace=True)``.
        topology: the topology it ran on; when given, a counter track per directed link
            that carried bytes is added.
        path: the result's critical path, where it was found already (else it is).

    Raises:
        InvalidInputError: the result was simulated without ``trace=True``,
            ``topology`` is not the one it ran on, or ``path`` is not the critical path
            of this run.
    """
    trace = traced_events(result)
    if path is not None and not _belongs(path, result, trace):
        raise InvalidInputError(f"path={path!r:.60} is not the critical path of this run; "
                                f"give sc.critical_path(result) or None")
    endpoints = max([result.nranks + len(result.host_bytes_sent)]
                    + [max(e.rank, e.peer or 0) + 1 for e in trace])
    counters = _counters(result, topology, endpoints) if topology is not None else []
    counters += _critical(path or critical_path(result), topology, endpoints + 1)
    lanes = _reduce_lanes(trace)
    events = _names(result, endpoints, topology, lanes)
    for i, e in enumerate(trace):
        start, end = e.start * 1e6, e.end * 1e6
        tid = lanes.get(i, _THREADS[e.kind])
        if e.kind == "message":
            common = {"cat": "message", "id": i, "pid": e.rank, "tid": tid,
                      "name": f"to {e.peer}"}
            args = {"bytes": e.nbytes, "tag": repr(e.tag), "dst": e.peer,
                    "context": e.context,
                    "wire_bytes": e.nbytes if e.wire_bytes is None else e.wire_bytes,
                    "moving_us": None if e.moving is None else e.moving * 1e6}
            events.append({**common, "ph": "b", "ts": start, "args": args,
                           "bind_id": i, "flow_out": True})
            events.append({**common, "ph": "e", "ts": end})
            events.append({"ph": "n", "cat": "message", "id": f"arrival {i}",
                           "pid": e.peer, "tid": tid, "name": f"from {e.rank}", "ts": end,
                           "args": {"bytes": e.nbytes, "tag": repr(e.tag), "src": e.rank},
                           "bind_id": i, "flow_in": True})
        else:
            events.append({"ph": "X", "cat": e.kind, "name": e.kind, "pid": e.rank,
                           "tid": tid, "ts": start, "dur": end - start,
                           "args": {"bytes": e.nbytes}})
    what = ({"collective": result.collective, "algorithm": result.algorithm,
             "nbytes": result.nbytes, **({} if result.root is None else {"root": result.root})}
            if isinstance(result, Result) else {"program": True})
    return {"traceEvents": events + counters, "displayTimeUnit": "ns",
            "otherData": {**what, "topology": result.topology, "nranks": result.nranks,
                          "time_s": result.time}}


def save_chrome(result: RunResult, path: str | os.PathLike,
                topology: Topology | None = None,
                critical: CriticalPath | None = None) -> None:
    """Write :func:`to_chrome` to ``path`` (via a temporary file, then renamed);
    ``critical``: the result's critical path, where it was found already.

    Raises:
        InvalidInputError: as :func:`to_chrome`, or a ``path`` that is not a file path,
            a directory or in a folder that does not exist (before any work).
    """
    out = output_path(path, "path", example="trace.json")
    text = json.dumps(to_chrome(result, topology, critical))
    write_atomically(out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
