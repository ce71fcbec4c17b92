"""The event loop, and where simcoll reaches below SimPy's public API (elsewhere only
:class:`simcoll.runtime.Joint`'s constructor, which sets an event's fields itself as
:func:`done_event` does).

Rank programs are plain SimPy processes: generators that yield SimPy events. Every
message, reduction and flow completion goes through the few helpers here, so they use
SimPy's event fields directly where the public API would cost an extra trip through the
event queue per message (SimPy's ``Event.succeed`` always schedules; its events cannot be
cancelled; ``Environment.run`` moves the clock for events nobody waits on):

* :func:`done_event`: an event that is already processed; a process that yields it
  resumes at once, without a trip through the queue.
* :func:`complete`: trigger an event and process it at once: a process waiting on it
  resumes without a trip through the queue (an arrival completes the receive it ends).
* :func:`cancel`: forget an event that was scheduled but must no longer do anything (a
  flow completion superseded by a rate change). It keeps its place in the queue (SimPy
  offers no removal) but loses its callbacks.
* :func:`schedule_at`: an event at an absolute instant, exactly (SimPy's ``Timeout`` adds
  a delay to the clock, which rounds), optionally after everything else at that instant
  (priority :data:`LATE`): the flow model settles all the changes of one instant once.
* :func:`schedule_background`: an event that changes the machine (a link fault) without
  being activity of the run: once nothing else is left to happen it is dropped, and so
  is one past the time limit.
* :class:`ProgramProcess`: SimPy's ``Process`` for a rank program, except that
  KeyboardInterrupt, SystemExit and MemoryError raised inside the program leave the run
  at once, as themselves, and a yield of something that is not an event raises
  :class:`InvalidYield`.
* :func:`run`: SimPy's ``Environment.run`` loop with two differences. An event that
  nobody waits on (a cancelled one, or a timeout no process yielded) is dropped without
  moving the clock, and so is a background event after which nothing else would
  happen, so ``env.now`` after the run is the instant of the last event that did
  something: the last message delivered or the last process resumed. And the run
  stops with :class:`~simcoll.errors.RunLimitError` past a simulated time or an event
  count, so a program that never ends cannot hang the caller.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.events import Event, EventPriority, Process

__all__ = ["done_event", "complete", "cancel", "schedule_at", "schedule_background", "run",
           "ProgramProcess", "RunStop", "InvalidYield", "AT_ONCE", "LATE"]

LATE = 2
"""Priority of events that run after every other event of their instant (SimPy's own
events use 0, urgent, and 1, normal)."""

AT_ONCE = (KeyboardInterrupt, SystemExit, MemoryError)
"""What a program raises that ends the run at once and reaches the caller as itself: the
user's Ctrl-C or exit, and the machine running out of memory (never the program's
fault)."""


def done_event(env: simpy.Environment, value: Any = None) -> Event:
    """An event that is already processed: yielding it resumes at once with ``value``.

    Its fields are set here, in the order ``Event.__init__`` sets them (so that it shares
    the attribute layout of every other event), without calling it: one call less on
    every free reduction of a ring.
    """
    event = Event.__new__(Event)
    event.env = env
    event.callbacks = None  # type: ignore[assignment]  # SimPy's mark of "processed"
    event._value = value
    event._ok = True
    return event


def complete(event: Event, value: Any) -> None:
    """Trigger ``event`` with ``value`` and process it now: a process waiting on it resumes
    at once (a process that yields it later resumes at once too).

    Only a network or timer callback completes events this way (no process is running):
    a process that completes an event for another (a message on a route of zero length
    and zero latency) schedules it, so that processes never run inside each other.
    """
    event._ok = True
    event._value = value
    callbacks = event.callbacks
    event.callbacks = None  # type: ignore[assignment]  # processed, as above
    if callbacks:
        env = event.env
        if env._active_proc is not None:
            event.callbacks = callbacks
            env.schedule(event)
            return
        for callback in callbacks:
            callback(event)


def cancel(event: Event) -> None:
    """Make a scheduled event do nothing when its time comes, and not move the clock."""
    event.callbacks = []


def schedule_at(env: simpy.Environment, when: float, callback: Callable[[Event], None],
                value: Any = None, priority: int = LATE) -> Event:
    """Schedule an event at exactly ``when`` (not before now) that calls ``callback``."""
    event = Event(env)
    event._ok = True
    event._value = value
    event.callbacks.append(callback)
    heappush(env._queue, (when, EventPriority(priority), next(env._eid), event))
    return event


class Background(Event):
    """An event that changes the machine but is not activity of the run
    (:func:`schedule_background`)."""


def schedule_background(env: simpy.Environment, when: float,
                        callback: Callable[[Event], None]) -> Event:
    """Schedule ``callback`` at exactly ``when``, before every event of that instant that
    is already scheduled or scheduled later, the start of the programs at 0 included
    (the machine is changed from ``when`` on), as background: :func:`run` drops it where
    no other event is left to happen (every program has ended or waits for ever, and
    nothing is in flight) and where it lies past the time limit."""
    event = Background(env)
    event._ok = True
    event._value = None
    event.callbacks.append(callback)
    heappush(env._queue, (when, EventPriority(-1), next(env._eid), event))
    return event


class RunStop(BaseException):
    """Raised by :func:`run` when a limit is reached; ``reason`` says which, ``now`` the
    instant it stopped at (for ``"time"``: the next event's, beyond the limit).

    A BaseException, as GeneratorExit is: the runtime raises it inside a rank program
    (work that took no time past a limit), and a program's ``except Exception`` must not
    swallow the run's stop."""

    def __init__(self, reason: str, now: float, process: Process | None = None):
        super().__init__(reason)
        self.reason = reason
        self.now = now
        self.process = process
        """The program running when it was raised inside one (None otherwise)."""


class InvalidYield(Exception):
    """A process yielded something that is not an event; ``process`` is the culprit."""

    def __init__(self, process: Process, detail: str):
        super().__init__(detail)
        self.process = process


class ProgramProcess(Process):
    """A rank program's process: SimPy's, resumed by its own :meth:`_resume`.

    SimPy's ``Process`` catches every exception its generator raises and schedules it as
    the process's failure, so every other process due at that instant runs first (a
    Ctrl-C inside programs busy in Python loops took one press per rank), and reads
    ``__traceback__.tb_next`` of it (an AttributeError on a MemoryError raised without
    a traceback). Here :data:`AT_ONCE` leaves at once, as itself, and a yield of
    something that is not an event raises :class:`InvalidYield` naming the line (SimPy
    reads the program's source file to say so, which a program typed at ``python -c``
    or in a notebook does not have).
    """

    spin_limit = 10**9
    """The most times in a row the program may yield an event that has fired and that it
    yielded before in that row (the run's ``max_same_instant``, which the runtime sets):
    each resumes it at once, at one instant, without the event loop, so a program
    waiting again and again on handles it keeps (one, or a polling loop over several)
    stops the run as a loop at one instant does. Different events that have fired (a
    million sends waited on after they all arrived) are work, not a loop."""
    resumes = 0
    """Resumptions of any program so far: what a program makes between two of them at
    one instant it made without yielding (see ``Runtime._count_posted``)."""

    def _resume(self, event: Event) -> None:
        """Resume the program with ``event``'s value (or throw its failure into it) and
        run it to its next yield of an event not yet processed, or to its end.

        Raises:
            RunStop: it yielded processed events it had yielded before in the row more
                than :attr:`spin_limit` times.
        """
        env = self.env
        env._active_proc = self
        ProgramProcess.resumes += 1
        generator = self._generator
        spins = 0
        yielded: set[int] | None = None   # the processed events yielded in this row, by id
        while True:
            try:
                if event._ok:
                    event = generator.send(event._value)
                else:
                    event = generator.throw(_thrown(event))
            except StopIteration as stop:
                self._end(True, stop.value)
                return
            except AT_ONCE:
                raise
            except BaseException as exc:
                self._end(False, _stripped(exc))
                return
            try:
                callbacks = event.callbacks
            except AttributeError:
                raise InvalidYield(self, _where(generator)) from None
            if callbacks is not None:
                callbacks.append(self._resume)
                self._target = event
                env._active_proc = None
                return
            key = id(event)
            if yielded is None:   # made only once the row holds one (most hold none)
                yielded = {key}
            elif key in yielded:
                spins += 1
            else:
                yielded.add(key)
            if spins > self.spin_limit:
                env._active_proc = None
                raise RunStop("instant", env._now)

    def _end(self, ok: bool, value: Any) -> None:
        """The program returned ``value`` (``ok``) or raised it: this process fires."""
        self._ok = ok
        self._value = value
        self._target = None  # type: ignore[assignment]  # SimPy's mark of "ended"
        self.env._active_proc = None
        self.env.schedule(self)


def _thrown(event: Event) -> BaseException:
    """What to throw into a program that waited on the failed ``event``: a copy of its
    exception of its own (as SimPy does, so that programs do not change each other's
    tracebacks), caused by the original; the failure is then handled."""
    event._defused = True
    original = event._value
    exc = type(original)(*original.args)
    exc.__cause__ = original
    return exc


def _stripped(exc: BaseException) -> BaseException:
    """``exc`` without the traceback's first frame, :meth:`ProgramProcess._resume`'s own
    (it may have no traceback at all)."""
    traceback = exc.__traceback__
    return exc if traceback is None else exc.with_traceback(traceback.tb_next)


def _where(generator: Any) -> str:
    """Where ``generator`` (or the one it delegates to with ``yield from``) stopped."""
    while inspect.isgenerator(getattr(generator, "gi_yieldfrom", None)):
        generator = generator.gi_yieldfrom
    frame = getattr(generator, "gi_frame", None)
    return "at an unknown line" if frame is None else \
        f"at {frame.f_code.co_filename}, line {frame.f_lineno}"


def run(env: simpy.Environment, *, until: float, max_events: int,
        max_same_instant: int) -> int:
    """Process events until none is left; return how many were processed.

    Raises:
        RunStop: the next event lies beyond ``until`` seconds, ``max_events`` events were
            processed, or more than ``max_same_instant`` in a row at one instant (a loop
            of operations that take no time).
        InvalidYield: a process yielded something that is not an event.
    """
    queue = env._queue
    processed = 0
    same_instant = 0
    until = min(until, sys.float_info.max)   # an infinite time stops even until=inf
    while queue:
        when, _, _, event = heappop(queue)
        callbacks = event.callbacks
        event.callbacks = None  # type: ignore[assignment]  # processed, as SimPy's step does
        if not callbacks:
            if not event._ok and not hasattr(event, "_defused"):
                raise event._value
            continue
        if event.__class__ is Background and (not when <= until or not _foreground(queue)):
            continue
        if not when <= until:   # past it, or past the floats (times that overflowed)
            raise RunStop("time", when)
        if processed >= max_events:
            raise RunStop("events", env._now)
        if when == env._now:
            same_instant += 1
            if same_instant > max_same_instant:
                raise RunStop("instant", when)
        else:
            same_instant = 0
        env._now = when
        processed += 1
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            raise event._value
    return processed


def _foreground(queue: list[tuple[float, Any, int, Event]]) -> bool:
    """Whether ``queue`` holds an event that is not background and that something waits
    on: what could still happen in the run."""
    return any(event.callbacks and event.__class__ is not Background
               for _, _, _, event in queue)
