"""Streams of a training step: what each GPU computed and communicated, and when.

A step is a rank program that keeps the GPU's compute stream busy (``comm.compute``)
and runs its collectives and point-to-point transfers on communication streams, each a
chain of started programs (a stream runs one operation at a time, in the order the
program issued them, as a CUDA stream does). :class:`Recorder` notes every operation as
a :class:`Span`; :func:`breakdown` turns the spans into where each GPU's time went.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from simpy.events import Event

from simcoll.comm import Comm

__all__ = ["Span", "Recorder", "Breakdown", "breakdown"]

COMPUTE = "compute"


@dataclass(frozen=True)
class Span:
    """One operation on one GPU's stream.

    Attributes:
        rank: the GPU (world rank).
        stream: ``"compute"`` or a communication stream (``"dp"``, ``"tp"``, ``"pp"``,
            ``"all_gather"``, ...).
        kind: what ran (``"forward"``, ``"backward"``, ``"all_reduce"``, ``"send"``, ...).
        start, end: seconds.
        nbytes: bytes this GPU put in (its buffer for a collective, the payload of a send).
        label: which layer, bucket or micro-batch.
    """

    rank: int
    stream: str
    kind: str
    start: float
    end: float
    nbytes: int = 0
    label: str = ""


class Recorder:
    """Collects the spans of one run (shared by every rank program of the run)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._compute_free: dict[int, float] = {}

    def compute(self, comm: Comm, rank: int, seconds: float, kind: str,
                label: str = "") -> Event:
        """Queue ``seconds`` of work on ``rank``'s compute stream; return its event."""
        start = max(comm.now, self._compute_free.get(rank, 0.0))
        self._compute_free[rank] = start + seconds
        if seconds > 0:
            self.spans.append(Span(rank, COMPUTE, kind, start, start + seconds, 0, label))
        return comm.compute(seconds)

    def on_stream(self, comm: Comm, rank: int, stream: str, kind: str,
                  operation: Callable[[], Event], *, after: Sequence[Event] = (),
                  nbytes: int = 0, label: str = "") -> Event:
        """Start ``operation()`` on a stream of ``rank`` once every event in ``after`` has
        fired (put the stream's previous operation there to keep the stream in order).

        ``operation`` is called only then, so collectives are started on every member in
        the order of their streams. Returns the event of the operation's result.
        """
        return comm.start(self._run(comm, rank, stream, kind, operation, after, nbytes,
                                    label))

    def _run(self, comm: Comm, rank: int, stream: str, kind: str,
             operation: Callable[[], Event], after: Sequence[Event], nbytes: int,
             label: str) -> Generator[Event, Any, Any]:
        # SimPy sends each event's value into the generator, which a plain
        # iterator cannot take, so no `yield from` over a sequence here.
        for event in after:
            yield event
        start = comm.now
        out = yield operation()
        self.spans.append(Span(rank, stream, kind, start, comm.now, nbytes, label))
        return out


@dataclass(frozen=True)
class Breakdown:
    """Where the GPUs' time went during a step, averaged over the GPUs that took part.

    ``step_time = compute + sum(exposed.values()) + idle`` for every GPU, and so for the
    averages.

    Attributes:
        compute: seconds the compute stream was busy.
        exposed: per communication stream, seconds during which the compute stream
            waited while that stream worked (split evenly between streams working at
            once).
        idle: seconds the compute stream waited with no communication under way (a
            pipeline bubble, or waiting for a slower GPU).
        hidden: per communication stream, seconds during which it worked while the
            compute stream did (each stream counted whole, however many worked at
            once): the communication the compute hid. A stream's busy time is its
            ``hidden`` plus its share of ``exposed`` where it worked alone.
    """

    compute: float
    exposed: dict[str, float]
    idle: float
    hidden: dict[str, float] = field(default_factory=dict)

    @property
    def exposed_total(self) -> float:
        """Seconds of exposed communication, all streams together."""
        return sum(self.exposed.values())


def _rank_breakdown(spans: Sequence[Span], step: float) -> tuple[
        float, dict[str, float], float, dict[str, float]]:
    edges = {0.0, step}
    for s in spans:
        edges.add(min(max(s.start, 0.0), step))
        edges.add(min(max(s.end, 0.0), step))
    points = sorted(edges)
    index = {t: i for i, t in enumerate(points)}
    # active[stream][i] counts spans of that stream covering [points[i], points[i+1]).
    active: dict[str, list[int]] = {}
    for s in spans:
        lo, hi = index[min(max(s.start, 0.0), step)], index[min(max(s.end, 0.0), step)]
        if lo == hi:
            continue
        if s.stream not in active:   # not setdefault: its default would be built per span
            active[s.stream] = [0] * (len(points) + 1)
        row = active[s.stream]
        row[lo] += 1
        row[hi] -= 1
    running = {name: 0 for name in active}
    compute, idle = 0.0, 0.0
    exposed: dict[str, float] = {name: 0.0 for name in active if name != COMPUTE}
    hidden = dict(exposed)
    for i in range(len(points) - 1):
        for name, row in active.items():
            running[name] += row[i]
        width = points[i + 1] - points[i]
        if running.get(COMPUTE, 0) > 0:
            compute += width
            for name in hidden:
                if running[name] > 0:
                    hidden[name] += width
            continue
        busy = [name for name in exposed if running[name] > 0]
        if busy:
            for name in busy:
                exposed[name] += width / len(busy)
        else:
            idle += width
    return compute, exposed, idle, hidden


def breakdown(spans: Sequence[Span], ranks: Sequence[int], step_time: float) -> Breakdown:
    """The averaged :class:`Breakdown` of ``ranks`` over ``[0, step_time]``."""
    by_rank: dict[int, list[Span]] = {r: [] for r in ranks}
    for s in spans:
        if s.rank in by_rank:
            by_rank[s.rank].append(s)
    compute, idle = 0.0, 0.0
    exposed: dict[str, float] = {}
    hidden: dict[str, float] = {}
    for r in ranks:
        c, e, i, h = _rank_breakdown(by_rank[r], step_time)
        compute += c
        idle += i
        for name, t in e.items():
            exposed[name] = exposed.get(name, 0.0) + t
        for name, t in h.items():
            hidden[name] = hidden.get(name, 0.0) + t
    n = max(1, len(ranks))
    return Breakdown(compute / n, {k: v / n for k, v in sorted(exposed.items())}, idle / n,
                     {k: v / n for k, v in sorted(hidden.items())})
