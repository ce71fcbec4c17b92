"""The critical path of a traced run: the chain of activities that set its time.

``Result.time`` is when the last activity ended. Walking back from it, each activity
waited for something that ended just when it began, on the same endpoint: a message's
bytes moved once its latency had run (the route's, plus the delay its sender asked for
beyond it: a protocol's step, and any jitter drawn for it) or once the message ahead of
it on its connection had arrived (on its connection: from its sender to its receiver in
its matching context with its tag); the message was sent when its sender's program
resumed, because a message arrived there, a reduction or compute span ended, or a
message it sent arrived; a message that took no time (empty, on a route without latency)
passes the walk on to its sender at the same instant. An arrival counts only where it
woke what waited on it (``TraceEvent.woke_receiver``, ``woke_sender``): one that came
while the program slept, computed or had not started yet woke nothing. A program that
slept (``comm.sleep``: a launch latency, a protocol's pacing; ``RunResult.sleeps``)
waited from when its sleep began: a ``wait``. Where nothing ended at that instant (a
late start) the endpoint waited since the last instant it ran (a send, an arrival it
woke to, a reduction, compute span or sleep ending) or since time 0. The walk stops at
time 0. An endpoint's programs (a rank's, and the collectives it started) count as one
where they meet: an arrival, a reduction or a compute span ending on it may have woken
any of them.

The segments tile ``[0, Result.time]`` exactly: each one ends where the next begins, so
their durations add up to the run's time, and each is a route's latency, bytes crossing a
route, a reduction, a compute span or a wait, on a named endpoint. Where several
activities ended at one instant the walk takes one of them (an arrival at the endpoint
first, then its own reductions and compute, then a message it sent; among those, one
with the tag of the message it leads to): each of them is equally critical by time.

A message's transfer is put down to its route's narrowest link
(:meth:`CriticalPath.by_link`): the one that left it the least bandwidth over the
transfer: a link's bandwidth (where link faults, :class:`simcoll.Faults`, changed it,
averaged over the transfer's span, 0 while failed) times the message's share of the bytes
the link carried over that span (:attr:`Segment.shares`, from every traced message at its
average rate, as :mod:`simcoll.link_load` draws them), so a link shared with other
transfers (an incast's last hop) counts at what they left it; on
``network="analytical"``, where links are not shared (each message moves at its route's
least bandwidth), at its whole bandwidth. Its average rate (:attr:`Segment.rate`) is
lower than that where a protocol's rate held the message back. The split of a message at
the instant its bytes began to move takes the route's latency as it stood when the
message was handed to the network. A link that fails under a message moves the bytes it
has not yet sent to the route around the failed links, after the latency that route has
beyond the one they left (:func:`simcoll.network.rerouting.change_link`): its transfer
holds that wait and the time those bytes took (an empty message's latency holds it); its
links, and so its narrowest link, stay those of the route it was handed to, the failed
one among them.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcoll.checks import integer
from simcoll.errors import InvalidInputError
from simcoll.inputs import check_topology
from simcoll.result import RunResult, traced_events
from simcoll.runtime import TraceEvent
from simcoll.topology.graph import Topology
from simcoll.topology.io import topology_hash

__all__ = ["Segment", "CriticalPath", "critical_path", "narrowest_link"]

KINDS = ("transfer", "latency", "reduce", "compute", "wait")
"""What a segment of the path is, in the order summaries list them."""


@dataclass(frozen=True)
class Segment:
    """One stretch of the critical path.

    Attributes:
        kind: ``"transfer"`` (a message's bytes crossing its route), ``"latency"`` (a
            message waiting out its route's latency and its sender's delay),
            ``"reduce"``, ``"compute"``, or ``"wait"`` (the endpoint's program slept, or
            had not started).
        endpoint: where it happened: a message's sender, else the endpoint (an address:
            ranks first, then hosts, then in-network devices).
        peer: a message's receiver (None otherwise).
        start, end: seconds.
        nbytes: a message's payload or a reduction's bytes (0 otherwise).
        wire_bytes: bytes a transfer put on each link of its route.
        route_latency: for ``"latency"``, the part that is the route's own latency; the
            rest is the delay its sender asked for and any jitter
            (:class:`simcoll.Faults`) drawn for it.
        tag: a message's tag.
        via: the devices a message's route was bound to pass, if any.
        links: a transfer's directed links, as the network routed it
            (``TraceEvent.links``; a multicast's whole tree, whose slowest branch sets
            the rate of every copy), where the trace has them.
        bandwidths: a transfer's links that link faults changed, with their bandwidth
            averaged over it (``TraceEvent.bandwidths``); others had their nominal one.
        shares: a transfer's links that other messages crossed during it, with its
            share of the bytes each carried over the transfer's span (every message at
            its average rate); it had the others to itself (all of them on
            ``network="analytical"``, which shares no link).
    """

    kind: str
    endpoint: int
    peer: int | None
    start: float
    end: float
    nbytes: int = 0
    wire_bytes: int = 0
    route_latency: float = 0.0
    tag: Any = None
    via: Any = None
    links: tuple[int, ...] | None = None
    bandwidths: tuple[tuple[int, float], ...] = ()
    shares: tuple[tuple[int, float], ...] = ()

    @property
    def duration(self) -> float:
        """Seconds."""
        return self.end - self.start

    @property
    def rate(self) -> float:
        """A transfer's wire bytes per second over its span (0 for other kinds)."""
        return self.wire_bytes / self.duration if self.kind == "transfer" else 0.0


@dataclass(frozen=True)
class CriticalPath:
    """The chain of segments that sets a run's time (:func:`critical_path`).

    Attributes:
        time: the run's time (``Result.time``), where the path ends.
        segments: from time 0 to ``time``, each ending where the next begins.
        topology, nranks, topology_hash: the name, rank count and digest
            (``Result.topology_hash``) of the topology the run took (the methods that
            take a topology check it is that one).
    """

    time: float
    segments: tuple[Segment, ...]
    topology: str = ""
    nranks: int = 0
    topology_hash: str | None = None

    def _check(self, topology: Topology) -> None:
        check_topology(topology)
        if (topology.name, topology.nranks) != (self.topology, self.nranks):
            raise InvalidInputError(
                f"topology {topology.name!r} ({topology.nranks} ranks) is not the one the "
                f"run took ({self.topology!r}, {self.nranks} ranks); pass that topology")
        if self.topology_hash not in (None, topology_hash(topology)):
            raise InvalidInputError(
                f"topology {topology.name!r} has the name and rank count of the one the run "
                f"took but other devices or links (bandwidths, latencies); pass that "
                f"topology")

    def totals(self) -> dict[str, float]:
        """Seconds of the path in each kind of segment (every kind, 0 where absent)."""
        out = dict.fromkeys(KINDS, 0.0)
        for s in self.segments:
            out[s.kind] += s.duration
        return out

    def messages(self) -> int:
        """How many messages the path goes through: each has a latency segment, a
        transfer segment or both (its latency, then its bytes), and an empty one only
        its latency."""
        count = 0
        for before, s in zip((None, *self.segments), self.segments):
            # an empty message's latency may end where the transfer of the message queued
            # behind it on its connection begins: the sizes tell the two apart
            own_latency = (before is not None and before.kind == "latency"
                           and s.kind == "transfer" and before.end == s.start
                           and (before.endpoint, before.peer, before.tag, before.nbytes,
                                before.wire_bytes)
                           == (s.endpoint, s.peer, s.tag, s.nbytes, s.wire_bytes))
            count += s.peer is not None and not own_latency
        return count

    def by_endpoint(self, kind: str) -> dict[int, float]:
        """Seconds of the path in segments of ``kind`` by endpoint (a message's sender),
        most first."""
        if kind not in KINDS:
            raise InvalidInputError(f"kind={kind!r} is not a kind of segment; one of "
                                    f"{', '.join(KINDS)}")
        out: dict[int, float] = {}
        for s in self.segments:
            if s.kind == kind:
                out[s.endpoint] = out.get(s.endpoint, 0.0) + s.duration
        return dict(sorted(out.items(), key=lambda item: -item[1]))

    def by_link(self, topology: Topology) -> dict[str, float]:
        """Seconds of transfer on the path by the narrowest directed link of each
        message's route over its transfer (:func:`narrowest_link`, which counts the
        share other transfers left it of a shared link; ``"gpu0->switch"``), most
        first."""
        self._check(topology)
        out: dict[str, float] = {}
        for s in self.segments:
            if s.kind == "transfer" and s.peer is not None:
                name = narrowest_link(topology, s)
                out[name] = out.get(name, 0.0) + s.duration
        return dict(sorted(out.items(), key=lambda item: -item[1]))

    def to_dict(self, topology: Topology | None = None) -> dict[str, Any]:
        """A JSON-ready record: the time, seconds by kind, by endpoint for each kind
        present (addresses as keys; given the topology, device names), by narrowest
        link (given the topology), and every segment."""
        def name(endpoint: int | None) -> Any:
            if endpoint is None or topology is None:
                return endpoint
            return topology.endpoint_name(endpoint)

        if topology is not None:
            self._check(topology)
        totals = self.totals()
        return {
            "time": self.time,
            "totals": totals,
            "by_endpoint": {kind: {str(name(e)): seconds
                                   for e, seconds in self.by_endpoint(kind).items()}
                            for kind in KINDS if totals[kind] > 0},
            **({"by_link": self.by_link(topology)} if topology is not None else {}),
            "segments": [{"kind": s.kind, "endpoint": name(s.endpoint),
                          "peer": name(s.peer), "start": s.start, "end": s.end,
                          "bytes": s.nbytes, "wire_bytes": s.wire_bytes,
                          "route_latency": s.route_latency, "tag": repr(s.tag)}
                         for s in self.segments],
        }

    def summary(self, topology: Topology | None = None, links: int = 5) -> str:
        """The path in a few lines: its seconds by kind (for reductions, compute and
        waits, with the endpoint that spent the most of them), then (given the topology)
        the links its transfers were limited by, at most ``links`` of them.

        Raises:
            InvalidInputError: another topology than the run's, or ``links`` not a count
                >= 0.
        """
        links = integer(links, "links", minimum=0)
        if topology is not None:
            self._check(topology)
        totals = self.totals()
        segments, messages = len(self.segments), self.messages()
        lines = [f"critical path of {self.time * 1e6:.3f} us: {segments} "
                 f"segment{'s' * (segments != 1)} through {messages} "
                 f"message{'s' * (messages != 1)}"]
        for kind in KINDS:
            if totals[kind] > 0:
                share = totals[kind] / self.time
                where = ""
                if kind in ("reduce", "compute", "wait"):
                    (endpoint, seconds), *others = self.by_endpoint(kind).items()
                    name = f"endpoint {endpoint}" if topology is None \
                        else topology.endpoint_name(endpoint)
                    where = f", {seconds * 1e6:.3f} us on {name}" + \
                        (f" (+{len(others)} more)" if others else "")
                lines.append(f"  {kind:<9}{totals[kind] * 1e6:12.3f} us {share:6.1%}  "
                             f"{_KIND_NOTES[kind]}{where}")
        if topology is not None and totals["transfer"] > 0:
            lines.append("  transfers by the narrowest link of their route:")
            for name, seconds in list(self.by_link(topology).items())[:links]:
                lines.append(f"    {name:<24}{seconds * 1e6:12.3f} us")
        return "\n".join(lines)


_KIND_NOTES = {
    "transfer": "bytes crossing routes",
    "latency": "route latencies, protocol steps and jitter",
    "reduce": "reductions",
    "compute": "compute",
    "wait": "asleep or not yet started (launch, pacing)",
}


def narrowest_link(topology: Topology, segment: Segment) -> str:
    """The directed link that left a message segment the least bandwidth on its route
    (``"gpu0->switch"``; the first of several as narrow): its bandwidth (for a link
    that link faults changed, averaged over the transfer: :attr:`Segment.bandwidths`)
    times the segment's share of the bytes it carried meanwhile
    (:attr:`Segment.shares`)."""
    if segment.peer is None:
        raise InvalidInputError(f"a {segment.kind} segment crosses no route")
    links = segment.links or topology.route(segment.endpoint, segment.peer,
                                            via=segment.via).links
    changed, shares = dict(segment.bandwidths), dict(segment.shares)
    index = min(links, key=lambda d: changed.get(d, topology.bandwidth_of(d))
                * shares.get(d, 1.0))
    a, b = topology.directed_link(index)
    return f"{a}->{b}"


class _Index:
    """The trace's activities by the endpoints they touch and the instants they end."""

    def __init__(self, events: Sequence[TraceEvent], sleeps: Sequence[TraceEvent]) -> None:
        self.events = [*events, *sleeps]
        self.ended: dict[tuple[int, float], list[tuple[int, int]]] = {}
        self.instant: dict[tuple[int, float], list[int]] = {}
        """Messages that took no time (empty, on a route without latency), by receiver
        and instant."""
        self.connections: dict[tuple[int, int, int | None, Any], list[int]] = {}
        """Messages by matching context, sender, receiver and tag, in the order they
        arrived."""
        self.place: dict[int, int] = {}
        """Each message's place in its connection's list."""
        running: dict[int, list[float]] = {}
        for i, e in enumerate(self.events):
            if e.kind == "message":
                same = self.connections.setdefault((e.context, e.rank, e.peer, e.tag), [])
                self.place[i] = len(same)
                same.append(i)
            # What took no time moved the clock nowhere: the walk skips it (and so never
            # meets an activity that ended where it began). An arrival that woke nothing
            # did not let a program run.
            lasted = e.end > e.start
            if e.kind == "message":
                assert e.peer is not None
                if e.woke_receiver:
                    if lasted:
                        self.ended.setdefault((e.peer, e.end), []).append((0, i))
                    else:
                        self.instant.setdefault((e.peer, e.end), []).append(i)
                    running.setdefault(e.peer, []).append(e.end)
                if e.woke_sender:
                    if lasted:
                        self.ended.setdefault((e.rank, e.end), []).append((2, i))
                    running.setdefault(e.rank, []).append(e.end)
                running.setdefault(e.rank, []).append(e.start)
            else:
                if lasted:
                    self.ended.setdefault((e.rank, e.end), []).append(
                        (3 if e.kind == "sleep" else 1, i))
                running.setdefault(e.rank, []).append(e.end)
                if e.kind == "sleep":
                    running[e.rank].append(e.start)
        self.running = {k: sorted(v) for k, v in running.items()}

    def woke(self, endpoint: int, t: float, tag: Any) -> int | None:
        """The activity whose end let ``endpoint``'s program run at ``t``, if any."""
        found = self.ended.get((endpoint, t))
        if not found:
            return None
        return min(found, key=lambda c: (c[0], self.events[c[1]].tag != tag, c[1]))[1]

    def relayed(self, endpoint: int, t: float, tag: Any,
                seen: set[tuple[int, float]]) -> int | None:
        """A message that took no time and reached ``endpoint`` at ``t`` from an
        endpoint not yet passed at ``t``: its sender ran at ``t`` for the same reason."""
        found = [i for i in self.instant.get((endpoint, t), ())
                 if (self.events[i].rank, t) not in seen]
        if not found:
            return None
        return min(found, key=lambda i: (self.events[i].tag != tag, i))

    def ran_before(self, endpoint: int, t: float) -> float:
        """The last instant before ``t`` at which ``endpoint``'s program ran (a send, an
        arrival that woke it, the end of a reduction or compute span); 0 if none."""
        instants = self.running.get(endpoint, [])
        k = bisect.bisect_left(instants, t)
        return instants[k - 1] if k else 0.0


def critical_path(result: RunResult) -> CriticalPath:
    """The critical path of a traced run.

    Args:
        result: a result of ``simulate(..., trace=True)`` or ``run_program(...,
            trace=True)``.

    Returns:
        The segments from time 0 to ``result.time``, each ending where the next begins
        (see the module's description).

    Raises:
        InvalidInputError: not a run's result, or one without a trace.
    """
    trace = traced_events(result)
    index = _Index(trace, result.sleeps or ())
    # the analytical network shares no link: every message has its route to itself
    carried = None if result.network == "analytical" else _LinkBytes(trace)
    segments: list[Segment] = []
    t = result.time
    # The activity that ended the run: a message before any other, a sleep last (a
    # started program's or an in-network device's, whose main program may have returned
    # long before; a rank's main program's, on the rank that returned last, first).
    endpoint = int(result.rank_times.argmax())
    events = index.events
    last = [i for i, e in enumerate(events) if e.end == t and e.end > e.start]
    current = min(last, key=lambda i: (events[i].kind != "message", events[i].kind == "sleep",
                                       events[i].rank != endpoint, i)) if last else None
    if current is None:
        current = index.woke(endpoint, t, None)
    tag: Any = None
    seen: set[tuple[int, float]] = set()
    while t > 0:
        if current is None:
            seen.add((endpoint, t))
            relay = index.relayed(endpoint, t, tag, seen)
            if relay is not None:   # woken by a message of no time: follow its sender
                endpoint, tag = trace[relay].rank, trace[relay].tag
                current = index.woke(endpoint, t, tag)
                continue
            begun = index.ran_before(endpoint, t)
            segments.append(Segment("wait", endpoint, None, begun, t))
            t = begun
            current = index.woke(endpoint, t, tag) if t > 0 else None
            continue
        e = index.events[current]
        if e.kind == "sleep":
            segments.append(Segment("wait", e.rank, None, e.start, e.end))
            endpoint, t, tag = e.rank, e.start, None
        elif e.kind != "message":
            segments.append(Segment(e.kind, e.rank, None, e.start, e.end, e.nbytes))
            endpoint, t, tag = e.rank, e.start, None
        else:
            wire = e.nbytes if e.wire_bytes is None else e.wire_bytes
            # An empty message has no bytes to cross: its time is latency, a detour's
            # extra latency (a link failed under it) included.
            moving = e.end if e.moving is None or (wire == 0 and not e.queued) else e.moving
            if moving < e.end:
                tree = trace[_first_destination(trace, current)]
                segments.append(Segment("transfer", e.rank, e.peer, moving, e.end, e.nbytes,
                                        wire, tag=e.tag, via=e.via, links=tree.links,
                                        bandwidths=tree.bandwidths,
                                        shares=() if carried is None else carried.shares(
                                            tree.links, moving, e.end, wire)))
            if e.queued:
                current = _ahead(index, current, moving)
                ahead = trace[current].end
                if ahead < moving:   # the jitter drawn as the slice ahead arrived
                    segments.append(Segment("latency", e.rank, e.peer, ahead, moving,
                                            e.nbytes, wire, 0.0, e.tag, e.via))
                t = ahead
                continue
            if e.start < moving:
                segments.append(Segment("latency", e.rank, e.peer, e.start, moving,
                                        e.nbytes, wire, min(e.latency, moving - e.start),
                                        e.tag, e.via))
            endpoint, t, tag = e.rank, e.start, e.tag
        current = index.woke(endpoint, t, tag) if t > 0 else None
    segments.reverse()
    return CriticalPath(result.time, tuple(_merged_waits(segments)), result.topology,
                        result.nranks, result.topology_hash)


class _LinkBytes:
    """The bytes every traced message put on each directed link up to any instant, each
    message at its average rate from when its bytes began to move to its arrival (as
    :mod:`simcoll.link_load` draws them): a piecewise-linear curve per link."""

    def __init__(self, trace: Sequence[TraceEvent]) -> None:
        spans: dict[int, list[tuple[float, float, float]]] = {}
        for e in trace:
            start = e.start if e.moving is None else e.moving
            wire = e.nbytes if e.wire_bytes is None else e.wire_bytes
            if e.kind != "message" or not e.links or wire == 0 or e.end <= start:
                continue
            for d in e.links:
                spans.setdefault(d, []).append((start, e.end, wire / (e.end - start)))
        self.curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for d, rows in spans.items():
            starts, ends, rates = (np.array(column) for column in zip(*rows))
            corners = np.concatenate([starts, ends])
            order = np.argsort(corners, kind="stable")
            corners = corners[order]
            slope = np.cumsum(np.concatenate([rates, -rates])[order])
            self.curves[d] = (corners, np.concatenate(
                [[0.0], np.cumsum(slope[:-1] * np.diff(corners))]))

    def shares(self, links: tuple[int, ...] | None, start: float, end: float,
               wire: int) -> tuple[tuple[int, float], ...]:
        """Of ``links``, those that carried more than ``wire`` bytes from ``start`` to
        ``end``, with ``wire``'s share of what they carried."""
        out = []
        for d in links or ():
            if d not in self.curves:   # a transfer of no wire bytes
                continue
            corners, carried = self.curves[d]
            total = float(np.interp(end, corners, carried) - np.interp(start, corners, carried))
            if total > wire * (1 + 1e-9):
                out.append((d, wire / total))
        return tuple(out)


def _first_destination(trace: Sequence[TraceEvent], i: int) -> int:
    """The event holding the links of message ``i``: itself, or where it is a
    multicast's later destination (``links`` ``()``), its first destination's, which
    the trace holds just before its others, with the multicast's tree."""
    e, j = trace[i], i
    while e.links == () and j > 0:
        before = trace[j - 1]
        if (before.kind, before.rank, before.tag, before.start, before.end, before.context
                ) != ("message", e.rank, e.tag, e.start, e.end, e.context):
            break
        j -= 1
        if before.links:
            return j
    return i


def _merged_waits(segments: list[Segment]) -> list[Segment]:
    """Back-to-back waits of one endpoint as one."""
    out: list[Segment] = []
    for s in segments:
        if out and s.kind == out[-1].kind == "wait" and s.endpoint == out[-1].endpoint:
            out[-1] = Segment("wait", s.endpoint, None, out[-1].start, s.end)
        else:
            out.append(s)
    return out


def _ahead(index: _Index, behind: int, handed: float) -> int:
    """The message ahead of message ``behind`` on its connection (from its sender to its
    receiver in its matching context with its tag): the last to arrive before it, by
    ``handed`` (when ``behind`` was handed to the network: the arrival it waited for;
    its bytes move after the jitter drawn for it, if any)."""
    e = index.events[behind]
    same = index.connections[(e.context, e.rank, e.peer, e.tag)]
    k = index.place[behind]
    while k > 0 and index.events[same[k - 1]].end > handed:
        k -= 1
    if k == 0:
        raise InvalidInputError(f"the trace has no message from {e.rank} to {e.peer} with "
                                f"tag {e.tag!r} arriving by {handed!r}, which the one sent "
                                f"at {e.start!r} waited for: not a trace simcoll made")
    return same[k - 1]
