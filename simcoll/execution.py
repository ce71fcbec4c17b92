"""One run on a machine: the environment, the network, the runtime and their programs.

``simulate`` (one collective) and ``run_program`` (any rank program) both build an
:class:`Execution`, start programs on it and run it. Everything is checked when it is
built, before any program starts; running it either returns with every program finished
or raises (deadlock, lost messages, a failing program, a limit).
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from typing import Any

import numpy as np
import simpy
from simpy.events import Event

from simcoll.checks import flag
from simcoll.comm import Comm
from simcoll.engine import InvalidYield, RunStop, run
from simcoll.errors import (
    AlgorithmError,
    DeadlockError,
    InvalidInputError,
    RunLimitError,
    UnmatchedMessageError,
)
from simcoll.faults import Faults
from simcoll.inputs import check_limits
from simcoll.network import network_class
from simcoll.runtime import Runtime, TracingRuntime
from simcoll.topology.graph import Topology

__all__ = ["Execution"]

Program = Generator[Event, Any, Any]


RUN_GC_THRESHOLDS = (200_000, 50, 50)
"""The cyclic garbage collector's thresholds during a run (``gc.set_threshold``): a young
collection per 200,000 new objects, not Python's 700, and older ones rarer still.
Collections at these thresholds took no measurable time in runs where Python's defaults
cost about a quarter of the run (2026-12-06)."""

class _Collector:
    """The runs going on in this process (threads may overlap them, a rank program may
    start one) and the collector's thresholds the first of them found."""

    lock = threading.Lock()
    runs = 0
    found: tuple[int, ...] = ()


def _forked() -> None:
    """In a process forked while another thread ran (a sweep's worker): no run goes on in
    it, its collector's thresholds are the ones found, and the lock, which the fork may
    have copied held (the worker then waited on it for ever), is a new one."""
    if _Collector.runs:
        gc.set_threshold(*_Collector.found)
    _Collector.lock = threading.Lock()
    _Collector.runs = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


@contextlib.contextmanager
def _collector_for_runs() -> Iterator[None]:
    """:data:`RUN_GC_THRESHOLDS` while any run goes on; the thresholds found before, once
    none does (the first run of two overlapping ones to end restored them under the
    other, which left them at these for good when it ended)."""
    with _Collector.lock:
        if _Collector.runs == 0:
            _Collector.found = gc.get_threshold()
            gc.set_threshold(*RUN_GC_THRESHOLDS)
        _Collector.runs += 1
    try:
        yield
    finally:
        with _Collector.lock:
            _Collector.runs -= 1
            if _Collector.runs == 0:
                gc.set_threshold(*_Collector.found)


def _exact_g(value: float) -> str:
    """``value`` as ``:g`` writes it where that reads back as ``value`` (``until=1 s``),
    else in full (``0.9999999999999999``, which ``:g`` writes as 1)."""
    text = f"{value:g}"
    return text if float(text) == value else repr(float(value))


def _past(instant: float, limit: float) -> str:
    """``instant`` (after ``limit``) to 9 digits, or in full where those would read as
    the limit or before it (1.0000000000000007 past until=1, not "t=1 s")."""
    text = f"{instant:.9g}"
    return text if float(text) > limit else repr(float(instant))


def same_instant_limit(max_events: int, endpoints: int) -> int:
    """How many events in a row a run may process at one simulated instant before it is
    taken for a loop of operations that take no time: max_events / 1000, at least
    10^6 + 64 e^2 (e endpoints: ranks, server hosts, in-network switches; a direct
    all-to-all of equal messages can end e^2 messages of a few events each at one
    instant), and never more than max_events. With
    the default max_events (10^9) a program spinning on ``compute(0)`` stops after about
    a second instead of a quarter of an hour."""
    return min(max_events, max(10**6 + 64 * endpoints**2, max_events // 1000))


class Execution:
    """A machine ready to run programs.

    Attributes:
        topology, network, runtime, env: what the run is made of.
        rank_times: the instant each rank's program returned (0 until it does).
        end: the instant the run ended, if it was timed without its events.
    """

    def __init__(self, topology: Topology, *, network: str = "flow", trace: bool = False,
                 until: float = 1e6, max_events: int = 10**9, faults: Faults | None = None,
                 inputs: tuple[np.ndarray, ...] = (), what: str = "the run"):
        net_cls = network_class(network)
        trace = flag(trace, "trace")
        self.until, self.max_events = check_limits(until, max_events)
        if faults is not None and not isinstance(faults, Faults):
            raise InvalidInputError(f"faults={faults!r} is not accepted; pass a simcoll.Faults")
        self._plan = None if faults is None else faults.checked(topology)
        self.topology = topology
        p = topology.nranks
        endpoints = topology.endpoints
        self.env = env = simpy.Environment(initial_time=0.0)  # times are floats from the start
        self.network = net_cls(env, topology, endpoints)
        reduce_bw = [topology.device(topology.endpoint_name(a)).reduce_bandwidth
                     for a in range(endpoints)]
        if self._plan is not None:
            reduce_bw = self._plan.reduce_bandwidths(reduce_bw)
            self._plan.install(self.network)
        self.runtime = (TracingRuntime if trace else Runtime)(
            env, self.network, p, reduce_bw, topology.gpu_nodes, self.max_events, inputs,
            len(topology.hosts), _attached(topology),
            max_same_instant=same_instant_limit(self.max_events, endpoints))
        self.runtime.what = what
        if self._plan is not None:
            self.runtime.compute_scale = self._plan.compute_scale(endpoints)
        self.rank_times = np.zeros(p)
        self.end: float | None = None
        """The run's end when it was timed without events (:mod:`simcoll.lone_flows`)."""

    @property
    def faulty(self) -> bool:
        """Whether faults (failures, slow or late GPUs, jitter) are planned."""
        return self._plan is not None

    @property
    def faults(self) -> dict[str, Any] | None:
        """The faults planned, JSON-ready (:meth:`simcoll.faults._Plan.to_dict`), or None
        where none would change the run (``Faults()``)."""
        return None if self._plan is None else self._plan.to_dict(self.topology) or None

    @property
    def time(self) -> float:
        """Simulated seconds until the last real activity of the finished run: its last
        event, or the end of compute or a reduction a rank started and did not wait for
        (the GPU is busy until then all the same)."""
        if self.end is not None:
            return self.end
        rt = self.runtime
        return max(self.env.now, max(rt.compute_free_at, default=0.0),
                   max(rt.reduce_free_at, default=0.0))

    def start_ranks(self, program_of: Callable[[Comm], Program]) -> list[simpy.Process]:
        """Start ``program_of(comm)`` on every rank (a late rank's starts late)."""
        procs: list[simpy.Process] = []
        for r in range(self.topology.nranks):
            program = program_of(Comm(self.runtime, r))
            if self._plan is not None:
                program = self._plan.delayed(r, program, self.env)
            proc = self.runtime.start(program, f"rank {r}", r)
            proc.callbacks.append(self._finished(r))
            procs.append(proc)
        return procs

    def start_hosts(self, program_of: Callable[[Comm], Program | None]) -> None:
        """Start ``program_of(comm)`` on every server host that gets a program."""
        p = self.topology.nranks
        for h in range(p, p + len(self.topology.hosts)):
            program = program_of(Comm(self.runtime, h))
            if program is not None:
                self.runtime.start(program, f"host {self.topology.endpoint_name(h)}", h)

    def start_in_network(self, program_of: Callable[[Comm], Program | None]) -> None:
        """Start ``program_of(comm)`` on every in-network device that gets a program."""
        first = self.topology.nranks + len(self.topology.hosts)
        for address in range(first, self.topology.endpoints):
            program = program_of(Comm(self.runtime, address))
            if program is not None:
                name = self.topology.endpoint_name(address)
                self.runtime.start(program, f"in-network device {name}", address)

    def _finished(self, rank: int) -> Callable[[Event], None]:
        def record(event: Event) -> None:
            self.rank_times[rank] = event.env.now
        return record

    def run(self) -> None:
        """Run every program to its end; where the run fails, close the programs left
        suspended, so that their ``finally`` and ``except`` code runs now, not when garbage
        collection reaches them outside any run (where one that yields printed "generator
        ignored GeneratorExit").

        Raises:
            AlgorithmError: a program raised, or yielded something that is not an event.
            RunLimitError: past ``until`` seconds or ``max_events`` events.
            DeadlockError: programs still waiting when no event is left.
            UnmatchedMessageError: messages sent but never received.
        """
        try:
            self._run_programs()
        except BaseException:
            for process, _, _ in self.runtime.programs:
                if process.is_alive:
                    # a program's own cleanup that fails (or exits) leaves the run's error
                    # standing; Ctrl-C still stops it at once
                    with contextlib.suppress(Exception, SystemExit):
                        process._generator.close()
            raise

    def _run_programs(self) -> None:
        # The cyclic garbage collector runs rarely: the event loop's many short-lived
        # objects triggered collections that cost about a quarter of a data-free run, but
        # it cannot be off, as it was: SimPy's conditions are reference cycles, which a
        # program's chain of "|" that never fires leaves behind (a double binary tree of
        # 256 ranks and 64 chunks, when it chained "|", peaked at 231 MiB, not 158).
        rt = self.runtime
        with _collector_for_runs():
            try:
                run(self.env, until=self.until, max_events=self.max_events,
                    max_same_instant=rt.max_same_instant)
                if rt.stop is not None:   # raised in a program, which caught it
                    raise rt.stop
            except InvalidYield as exc:
                label = next((label for proc, label, _ in rt.programs if proc is exc.process),
                             "a rank")
                raise AlgorithmError(f"{label} in {rt.what} yielded something that is not an "
                                     f"event ({exc}); yield what comm returns") from None
            except RunStop as stop:
                running = [label for proc, label, _ in rt.programs if _unreturned(proc)]
                shown = ", ".join(running[:16]) + (f" and {len(running) - 16} more"
                                                    if len(running) > 16 else "")
                if stop.reason == "instant":
                    raise RunLimitError(
                        f"{rt.what} processed {rt.max_same_instant} events in a row at "
                        f"t={stop.now:.9g} s without simulated time passing, with "
                        f"{shown or 'no program'} still running: a loop of operations that take "
                        f"no time (compute(0), empty messages over links without latency, an "
                        f"event yielded again after it fired)? A "
                        f"run meant to do that many at one instant needs max_events above "
                        f"1000 times as many (the limit at one instant is "
                        f"max_events / 1000, at least 10^6 + 64 e^2 for e endpoints: ranks, "
                        f"server hosts and in-network switches)", running) from None
                if stop.reason == "posted":
                    looping = next((label for proc, label, _ in rt.programs
                                    if proc is stop.process), "a program")
                    raise RunLimitError(
                        f"{rt.what}: {looping} made more than {rt.max_same_instant} sleeps, "
                        f"computes, reductions, sends or receives at t={stop.now:.9g} s "
                        f"without yielding to wait for any, with {shown or 'no program'} "
                        f"still running: a loop that forgot to yield what comm returns? A "
                        f"program meant to make that many at once needs max_events above "
                        f"1000 times as many (the limit is max_events / 1000, at least "
                        f"10^6 + 64 e^2 for e endpoints)", running) from None
                if not math.isfinite(stop.now):
                    raise RunLimitError(
                        f"{rt.what} reached times past the float range (its next event falls "
                        f"at t={stop.now:g} s) with {shown or 'no program'} still running: "
                        f"link latencies or bandwidths so extreme that a route's latency or a "
                        f"transfer's time overflowed; give values a run's times can hold",
                        running) from None
                limit = (f"the simulated-time limit until={_exact_g(self.until)} s: its next event "
                         f"falls at t={_past(stop.now, self.until)} s,"
                         if stop.reason == "time"
                         else f"the event limit max_events={self.max_events} at "
                              f"t={stop.now:.9g} s")
                waits = rt.waiting_receives()
                blocked = [f"{label}'s {'; '.join(waits[address])}"
                           for proc, label, address in rt.programs
                           if _unreturned(proc) and address in waits]
                # a program polling for a message that never comes runs into a limit,
                # not into a deadlock: say what it waited for, as a deadlock does
                pending = "" if not blocked else (
                    f" (waiting on receives no message matched: {'; '.join(blocked[:16])}"
                    f"{f' and {len(blocked) - 16} more' if len(blocked) > 16 else ''})")
                raise RunLimitError(f"{rt.what} reached {limit} with "
                                    f"{shown or 'no program'} still running{pending}; raise "
                                    f"the limit if the run is meant to be that long",
                                    running) from None
        self._raise_if_unfinished()
        if not self.time <= self.until * (1 + 1e-12):  # work not waited for, past it
            # (a computed end may lie an ulp past the instant of its event)
            raise RunLimitError(
                f"{rt.what} reached the simulated-time limit until={_exact_g(self.until)} s: "
                f"compute or a reduction a program started and did not wait for ends at "
                f"t={self.time:.9g} s; raise the limit if the run is meant to be that long",
                [])

    def _raise_if_unfinished(self) -> None:
        rt = self.runtime
        stuck = [(proc, label, address) for proc, label, address in rt.programs
                 if proc.is_alive]
        if stuck:
            waits = rt.waiting_receives()
            waiting = {address: "; ".join(waits.get(address, ["an event that never fires"]))
                       for _, _, address in stuck}
            labels = {proc: label for proc, label, _ in stuck}
            own_receives = {event: text for event, (_, text) in rt.receives_waiting().items()}

            def started(event: simpy.Event, address: int, nested: bool = False) -> str | None:
                """What a program waiting for ``event`` waits for where that can be told:
                a program it started to end, a receive of its own, or a condition's
                (``&``, ``|``) parts that have not fired, other parts read as the
                endpoint's waiting receives; None where none is known."""
                if isinstance(event, simpy.events.Condition):
                    # SimPy keeps a condition's events in ``_events`` and offers no other
                    # way to read them.
                    parts = [started(e, address, True) for e in event._events
                             if not e.triggered]
                    named = [part for part in parts if part is not None]
                    if not named:
                        return None
                    if len(named) < len(parts):
                        named.append(waiting[address])
                    either = event._evaluate is simpy.events.Condition.any_events
                    text = (" or " if either else " and ").join(named)
                    return f"({text})" if nested and len(named) > 1 else text
                label = labels.get(event)  # type: ignore[call-overload]
                return f"{label} to end" if label is not None else own_receives.get(event)

            def blocked_on(proc: simpy.Process, address: int) -> str:
                # A program waits for what it yielded, not for every receive of its
                # endpoint (those of the programs it started among them).
                return started(proc.target, address) or waiting[address]

            shown = "; ".join(f"{label} waits for {blocked_on(proc, address)}"
                              for proc, label, address in stuck[:16])
            more = f" (and {len(stuck) - 16} more)" if len(stuck) > 16 else ""
            # Messages that arrived and no receive took: often the other half of the
            # deadlock (a tag or source that does not match, a peer off by one).
            unclaimed = rt.unclaimed_messages()
            sent = "" if not unclaimed else (
                f"; arrived and not received: {self._messages(unclaimed)}")
            absent = rt.absent_from([context for (context, _, _, _), channel
                                     in rt.channels.items() if channel.waiting]
                                    + [context for context, _ in unclaimed])
            never = "".join(f"; {text}" for text in absent)
            raise DeadlockError(f"deadlock in {rt.what} at t={self.env.now:.9g} s: "
                                f"{shown}{more}{sent}{never}", waiting)
        unclaimed = rt.unclaimed_messages()
        if unclaimed:
            names: dict[int, str] = {}
            for _, label, address in rt.programs:   # a main program before those it started
                names.setdefault(address, label)
            receivers = sorted({names[m.dst] for _, m in unclaimed[:16] if m.dst in names})
            idle = sorted({m.dst for _, m in unclaimed[:16] if m.dst not in names})
            why = []
            if receivers:
                why.append(f"{', '.join(receivers)} returned without receiving "
                           f"{'it' if len(unclaimed) == 1 else 'them'} (a recv missing, or "
                           f"a tag or source that does not match the send's)")
            if idle:
                why.append("a peer off by one?")
            raise UnmatchedMessageError(
                f"{rt.what} finished with {len(unclaimed)} message(s) never received: "
                f"{self._messages(unclaimed)}; {'; '.join(why)}")
        posted = rt.receives_waiting()
        if posted:
            owners: dict[int, str] = {}
            for _, label, address in rt.programs:
                owners.setdefault(address, label)
            alike = Counter(posted.values())   # (endpoint, receive): how many posted
            receives = [f"{owners.get(dst, f'endpoint {dst}')}'s {recv}"
                        + (f" x {count}" if count > 1 else "")
                        for (dst, recv), count in sorted(alike.items(),
                                                         key=lambda item: item[0][0])]
            more = f" (and {len(receives) - 16} more)" if len(receives) > 16 else ""
            raise UnmatchedMessageError(
                f"{rt.what} finished with {len(posted)} receive(s) no message matched: "
                f"{'; '.join(receives[:16])}{more}; a send missing, or a tag or source that "
                f"does not match (every receive posted must be matched, waited on or not, "
                f"as MPI asks of a program before it finalizes)")

    def _messages(self, messages: list[tuple[int, Any]]) -> str:
        """``(context, message)`` pairs as ``src->dst (tag t)`` (``in matching context c``
        where not the user's, as waiting receives are named), alike ones counted
        (``x 7``), the first 16 kinds; an endpoint that runs no program named (a peer off
        by one reaches a host or an in-network device)."""
        kinds = Counter((m.src, m.dst, repr(m.tag), context) for context, m in messages)
        running = {address for _, _, address in self.runtime.programs}
        shown = ", ".join(
            f"{src}->{dst} (tag {tag}{self.runtime.context_named(context)}"
            f"{'' if dst in running else f'; {self.topology.endpoint_name(dst)} runs no program'})"
            f"{f' x {n}' if n > 1 else ''}"
            for (src, dst, tag, context), n in list(kinds.items())[:16])
        return shown + (f" and {len(kinds) - 16} more kinds" if len(kinds) > 16 else "")

    @property
    def trace(self) -> tuple[Any, ...] | None:
        """Every message and compute span and every reduction that took time, if traced, in
        the order they ended
        (a reduction or compute span is recorded when it starts, its end known)."""
        rt = self.runtime
        if not isinstance(rt, TracingRuntime):
            return None
        return tuple(sorted(rt.events, key=lambda event: event.end))

    @property
    def sleeps(self) -> tuple[Any, ...] | None:
        """Every sleep a program took, if traced, in the order they began."""
        rt = self.runtime
        return tuple(rt.sleeps) if isinstance(rt, TracingRuntime) else None


def _unreturned(process: simpy.Process) -> bool:
    """Whether ``process``'s program had not returned when a run limit stopped the run:
    it still runs, or the limit stopped it from inside (a program that spins on
    instant events meets the limit itself, and every other one that does so before the
    run stops dies of it too)."""
    return process.is_alive or (not process.ok and isinstance(process.value, RunStop))


def _attached(topology: Topology) -> dict[int, tuple[int, ...]]:
    """The GPU ranks directly linked to each in-network device, by endpoint address."""
    ranks = {name: r for r, name in enumerate(topology.gpus)}
    return {topology.address(device): tuple(ranks[n] for n in topology.neighbors(device)
                                            if n in ranks)
            for device in topology.in_network}
