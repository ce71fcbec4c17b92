"""State shared by the communicators of one simulation: message matching and timelines.

Messages are matched MPI-style: a receive from ``src`` with ``tag`` takes the oldest
unclaimed message that ``src`` sent to it with that tag, in send order, whatever order the
network delivers them in (non-overtaking). A transfer starts as soon as it is sent
(eager); its send event fires when the last byte arrives.

Events that complete at the moment they are created, or that nobody waits on yet when
they complete, are marked processed directly instead of going through SimPy's queue
(:mod:`simcoll.engine`): a process that yields a processed event resumes at once with its
value. This keeps free reductions and already-arrived receives off the event queue.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Generator, Iterable
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import simpy
from simpy.events import PENDING, Event, Timeout

from simcoll.buffers import memory_owner
from simcoll.engine import AT_ONCE, ProgramProcess, RunStop, complete, done_event
from simcoll.errors import AlgorithmError, LinkFailureError, message_of
from simcoll.memory import CHECK_EVERY, MEMORY_MASK, check_memory_left
from simcoll.network.base import Network
from simcoll.topology.graph import MulticastVia, Via

__all__ = ["Runtime", "TracingRuntime", "TraceEvent"]


@dataclass(frozen=True)
class TraceEvent:
    """One span of a traced run: a message (``rank`` sent ``nbytes`` to ``peer``, from the
    send to the arrival of its last byte; ``via``: the devices its route was bound to
    pass, if any), or a reduction or compute span on ``rank``.

    A message's span splits in two at ``moving``, the instant its bytes began to move:
    before it, the route's ``latency`` (as it stood when the message was handed to the
    network) and the delay its sender asked for beyond it (a protocol's step), or, where
    ``queued``, the wait for the message ahead of it on its connection (an ordered
    message, :meth:`simcoll.comm.Comm.send`), whose arrival is ``moving``; after it,
    ``wire_bytes`` crossing the route (the payload, or a protocol's framing of it).
    ``moving`` is None for reductions and compute spans; a message that a failed link
    moved to a route of more latency waits that route's extra latency after ``moving``
    (:func:`simcoll.network.rerouting.change_link`). ``links``: the directed links
    its bytes were handed to, as the network routed it then (around links failed when it
    was sent; if a link fails while it is in flight, its remaining bytes take a detour,
    which ``Result.link_bytes`` counts but ``links`` does not: it keeps the first
    route); a multicast's tree on its first destination's event and ``()`` on the
    others, as each byte crosses each link of the tree once; None where the run was
    timed without the network (:mod:`simcoll.lone_flows`). ``context``: a message's
    matching context (0 on a communicator's own; a group and each
    :meth:`~simcoll.comm.Comm.fresh_context`, as of a collective started from a rank
    program, have their own), part of its connection's key with ``rank``, ``peer`` and
    ``tag``. ``woke_sender``, ``woke_receiver``: whether its arrival resumed what waited
    on its send at ``rank`` and on its receive at ``peer`` (a program; or a wait on
    several events, which resumes at the last of them): False where nothing waited on it
    yet (a program still asleep, computing or not started, that took it later at once),
    or where the rest of what it waited on was still to come (a ``sendrecv``'s other
    half, a multicast's other destinations). ``bandwidths``: where link faults
    (:class:`simcoll.Faults`) had changed links by the message's arrival, each changed
    directed link with its bandwidth averaged over the span the message's bytes moved
    (``moving`` to ``end``; 0 while failed); every other link had its nominal bandwidth
    (:meth:`~simcoll.topology.graph.Topology.bandwidth_of`).
    """

    kind: str
    rank: int
    peer: int | None
    tag: Any
    nbytes: int
    start: float
    end: float
    via: Via | None = None
    moving: float | None = None
    latency: float = 0.0
    queued: bool = False
    wire_bytes: int | None = None
    links: tuple[int, ...] | None = None
    context: int = 0
    woke_sender: bool = False
    woke_receiver: bool = False
    bandwidths: tuple[tuple[int, float], ...] = ()


class Joint(Event):
    """Fires when both halves of a sendrecv are done, with the received payload.

    Its constructor sets SimPy's three event fields itself (what ``Event.__init__``
    does) rather than calling it: one call less on every message of a ring or tree.
    """

    __slots__ = ("pending", "payload")

    def __init__(self, env: simpy.Environment, pending: int, payload: Any = None):
        self.env = env
        self.callbacks = []
        self._value = PENDING
        self.pending = pending
        self.payload = payload


class Message:
    """One point-to-point message: its payload, and who to tell when it arrives."""

    __slots__ = ("payload", "arrived", "receiver", "sender", "src", "dst", "tag")

    def __init__(self, payload: Any, sender: Event, src: int, dst: int, tag: Any):
        self.payload = payload
        self.arrived = False
        self.receiver: Event | None = None
        self.sender = sender
        self.src = src
        self.dst = dst
        self.tag = tag


_SWEEP_FROM = 1 << 14
"""Channels a run holds before it first drops the empty ones."""


class Channel:
    """Messages from one source to one destination with one tag, in send order."""

    __slots__ = ("unclaimed", "waiting")

    def __init__(self) -> None:
        self.unclaimed: deque[Message] = deque()
        self.waiting: deque[Event] = deque()


class Runtime:
    """Everything the communicators of one run share."""

    def __init__(self, env: simpy.Environment, network: Network, nranks: int,
                 reduce_bandwidth: list[float], nodes: tuple[int, ...] | None = None,
                 max_instant: int = 10**9, inputs: tuple[np.ndarray, ...] = (),
                 hosts: int = 0, attached: dict[int, tuple[int, ...]] | None = None,
                 max_same_instant: int = 10**9):
        self.env = env
        self.network = network
        network.watch = self._watch
        self._posted = 0
        """Timed events and receives made by programs, counted by batches of CHECK_EVERY
        (see :meth:`_count_posted`)."""
        self._posted_at: tuple[int, float] = (-1, -1.0)
        self._posted_run = 0
        self.nranks = nranks
        self.hosts = hosts
        """Number of server hosts (addresses nranks .. nranks + hosts - 1); in-network
        devices follow them."""
        self.attached = attached or {}
        """GPU ranks directly linked to each in-network device (by address)."""
        self.reducer: dict[int, int] = {}
        """Each GPU rank's in-network device: the first (by address) it is linked to."""
        for device in sorted(self.attached):
            for gpu in self.attached[device]:
                self.reducer.setdefault(gpu, device)
        self._indexes: dict[tuple[int, ...], dict[int, int]] = {}
        self.nodes = nodes if nodes is not None else (0,) * nranks
        self.endpoints = len(reduce_bandwidth)
        self.reduce_bandwidth = reduce_bandwidth
        self.reduce_free_at = [0.0] * self.endpoints
        self._shared: dict[int, _SharedPool] = {}
        """Each endpoint's shared reductions in progress (:meth:`shared_reduce`)."""
        self.compute_free_at = [0.0] * self.endpoints
        self.compute_scale: list[float] | None = None
        """Each endpoint's compute slow-down factor (None: all 1)."""
        self.channels: dict[tuple, Channel] = {}
        self._in_order: dict[tuple, deque[tuple[Message, int, float, int | None,
                                                Via | None]]] = {}
        """Connections with an ordered message in flight: the ones queued behind it."""
        self._multicasts_in_order: dict[
            tuple, deque[tuple[list[Message], int, float, MulticastVia | None]]] = {}
        """The same for ordered multicasts, by (context, source, destinations, tag)."""
        self._sweep_at = _SWEEP_FROM
        self._arrive = self.arrive
        self.contexts: dict[tuple, int] = {}
        self.context_members: dict[int, tuple[int, ...]] = {}
        """Each matching context's members (endpoints), and which of them made it: a
        deadlock names the members that never did."""
        self.context_made: dict[int, set[int]] = {}
        self.instant_left = max_instant
        self.stop: RunStop | None = None
        """The limit :meth:`done` raised inside a program, kept: a program that caught
        it (a bare ``except:``) and ran on still stops the run."""
        self._given_dead_event: set[simpy.Process] = set()
        """The programs already handed an event that never fires after the stop."""
        self.max_same_instant = max_same_instant
        self._instant_at = 0.0
        self._same_instant = 0
        self.inputs = frozenset(id(memory_owner(x)) for x in inputs)
        """The arrays handed to the ranks as inputs: nothing changes them during the run,
        so read-only views of them travel without a copy."""
        self.programs: list[tuple[ProgramProcess, str, int]] = []
        """Every program started, with the label errors name it by and its endpoint."""
        self._counts: dict[Any, int] = {}
        self._said: dict[Any, tuple[int, Any]] = {}
        self.what = "the run"
        """What is being simulated, for error messages (e.g. "all_reduce/ring")."""

    # -- programs ------------------------------------------------------------------------
    def index_of(self, members: tuple[int, ...]) -> dict[int, int]:
        """``{world rank: rank in members}`` for a group's GPU members, built once per
        member list."""
        index = self._indexes.get(members)
        if index is None:
            index = self._indexes[members] = {g: i for i, g in enumerate(members)}
        return index

    def made_context(self, context: int, members: tuple[int, ...], address: int) -> None:
        """Record that ``address`` made matching context ``context`` of ``members``."""
        self.context_members[context] = members
        self.context_made.setdefault(context, set()).add(address)

    def absent_from(self, contexts: Iterable[int]) -> list[str]:
        """For each of ``contexts`` some member never made: ``rank 3 never made matching
        context 1 (fresh context 1 of the world)``."""
        out = []
        for context in sorted(set(contexts) - {0}):
            made = self.context_made.get(context, set())
            missing = [a for a in self.context_members.get(context, ()) if a not in made]
            if missing:
                who = ", ".join(str(a) for a in missing)
                out.append(f"rank{'s' if len(missing) > 1 else ''} {who} never made matching "
                           f"context {context} ({self._made(context)}): "
                           f"{'they' if len(missing) > 1 else 'it'} ended or "
                           f"{'wait' if len(missing) > 1 else 'waits'} elsewhere")
        return out

    def count(self, key: Any) -> int:
        """How many times ``key`` was counted before (0 the first time), then count it."""
        number = self._counts.get(key, 0)
        self._counts[key] = number + 1
        return number

    def first_said(self, key: Any, rank: int, value: Any) -> tuple[int, Any]:
        """The first rank to say something under ``key`` and what it said (``rank`` and
        ``value`` if this is the first time)."""
        return self._said.setdefault(key, (rank, value))


    def start(self, program: Generator[Any, Any, Any], label: str,
              address: int) -> ProgramProcess:
        """Run ``program`` as a process of its own, on endpoint ``address``.

        An exception inside it (GeneratorExit and a program's own BaseException too) ends
        the run with an :class:`AlgorithmError` naming ``label``; KeyboardInterrupt,
        SystemExit and MemoryError leave at once as themselves
        (:class:`~simcoll.engine.ProgramProcess`), and a run limit and a
        :class:`LinkFailureError` (a message with no route around failed links) pass
        through as themselves.
        """
        process = ProgramProcess(self.env, program)
        process.spin_limit = self.max_same_instant
        process.callbacks.append(lambda event: self._raise_failure(event, label))
        self.programs.append((process, label, address))
        return process

    def _raise_failure(self, event: Event, label: str) -> None:
        if event.ok:
            return
        exc = cast(BaseException, event.value)
        event.defused = True
        if isinstance(exc, (LinkFailureError, RunStop, *AT_ONCE)):
            raise exc  # a link failure is the machine's, a run limit or Ctrl-C the run's
        raise AlgorithmError(f"{label} raised {type(exc).__name__} in {self.what}: "
                             f"{message_of(exc)}") from exc

    # -- messages ------------------------------------------------------------------------
    def _new_channel(self, key: tuple) -> Channel:
        """A new channel for ``key``. Each time the table has doubled since the last
        sweep, the channels left empty are dropped first: a run holds O(channels in use)
        of them, not one per pair it ever used (an all-to-all's p^2), at an amortized
        O(1) per channel made."""
        channels = self.channels
        if len(channels) >= self._sweep_at:
            for stale in [k for k, c in channels.items() if not (c.unclaimed or c.waiting)]:
                del channels[stale]
            self._sweep_at = max(_SWEEP_FROM, 2 * len(channels))
        channel = channels[key] = Channel()
        return channel

    def post_send(self, key: tuple, payload: Any, nbytes: int, src: int, dst: int,
                  tag: Any, sender: Event, delay: float = 0.0,
                  wire_bytes: int | None = None, ordered: bool = False,
                  via: Via | None = None) -> Message:
        """Queue a message on the channel ``key`` (or hand it to a receive waiting there)
        and start its transfer (``ordered`` and ``via``: see :meth:`Comm.send`).
        ``Comm.sendrecv`` does the same inline for its unordered messages, as it does
        :meth:`post_recv`: a change here is a change there."""
        message = self._matched(key, Message(payload, sender, src, dst, tag))
        if ordered:
            self._send_in_order(key, message, nbytes, delay, wire_bytes, via)
        else:
            self.network.transfer(src, dst, nbytes, self._arrive, message, delay, wire_bytes,
                                  via)
        return message

    def _matched(self, key: tuple, message: Message) -> Message:
        """``message``, handed to the receive waiting on channel ``key`` if there is one
        (MPI's non-overtaking order), else left there for the next receive."""
        channel = self.channels.get(key)
        if channel is None:
            channel = self._new_channel(key)
        if channel.waiting:
            message.receiver = channel.waiting.popleft()
        else:
            channel.unclaimed.append(message)
        return message

    def _send_in_order(self, key: tuple, message: Message, nbytes: int, delay: float,
                       wire_bytes: int | None, via: Via | None = None) -> None:
        """Hand an ordered message to the network now if its connection has nothing in
        flight, else queue it until the one ahead arrives (:meth:`Comm.send`)."""
        queue = self._in_order.get(key)
        if queue is None:
            self._in_order[key] = deque()
            self.network.transfer(message.src, message.dst, nbytes, self._arrive_in_order,
                                  (key, message), delay, wire_bytes, via)
        else:
            queue.append((message, nbytes, self.env._now + delay, wire_bytes, via))

    def _arrive_in_order(self, token: tuple[tuple, Message]) -> None:
        """An ordered message arrived: the next of its connection starts moving now, or
        once its own latency has run (counted from when it was sent: the route's latency
        and its delay), whichever is later."""
        key, message = token
        queue = self._in_order[key]
        if queue:
            self._next_in_order(key, queue.popleft())
        else:
            del self._in_order[key]
        self._arrive(message)

    def _next_in_order(self, key: tuple, queued: tuple[Message, int, float, int | None,
                                                      Via | None]) -> None:
        """Hand the next ordered message of connection ``key`` to the network."""
        after, nbytes, ready, wire_bytes, via = queued
        latency = self.network.route(after.src, after.dst, via)[1]
        wait = max(ready + latency - self.env._now, 0.0)
        self.network.transfer(after.src, after.dst, nbytes, self._arrive_in_order,
                              (key, after), wait - latency, wire_bytes, via)

    def post_multicast(self, keys: list[tuple], payload: Any, nbytes: int, src: int,
                       dsts: tuple[int, ...], tag: Any, sender: Joint,
                       delay: float = 0.0, ordered: bool = False,
                       via: MulticastVia | None = None) -> list[Message]:
        """One message per destination, delivered together by one network multicast
        (``ordered``: moving once the previous ordered multicast of this source to these
        destinations with this tag has arrived, as :meth:`Comm.send` orders messages;
        ``via``: the devices each destination's route passes, see
        :meth:`Comm.multicast`)."""
        messages = [self._matched(key, Message(payload, sender, src, dst, tag))
                    for key, dst in zip(keys, dsts)]
        if not ordered:
            self.network.multicast(src, dsts, nbytes, self._arrive_all, messages, delay, via)
            return messages
        key = (keys[0][0], src, dsts, tag)
        queue = self._multicasts_in_order.get(key)
        if queue is None:
            self._multicasts_in_order[key] = deque()
            self.network.multicast(src, dsts, nbytes, self._multicast_in_order,
                                   (key, messages), delay, via)
        else:
            queue.append((messages, nbytes, self.env._now + delay, via))
        return messages

    def _multicast_in_order(self, token: tuple[tuple, list[Message]]) -> None:
        """An ordered multicast arrived everywhere: the next one of its source, targets
        and tag starts moving, as :meth:`_arrive_in_order` does for a connection."""
        key, messages = token
        queue = self._multicasts_in_order[key]
        if queue:
            self._next_multicast_in_order(key, queue.popleft())
        else:
            del self._multicasts_in_order[key]
        self._arrive_all(messages)

    def _next_multicast_in_order(self, key: tuple, queued: tuple[
            list[Message], int, float, MulticastVia | None]) -> None:
        """Hand the next ordered multicast of ``key`` to the network."""
        after, nbytes, ready, via = queued
        src, dsts = key[1], key[2]
        latency = self.network.route(src, dsts, via)[1]
        wait = max(ready + latency - self.env._now, 0.0)
        self.network.multicast(src, dsts, nbytes, self._multicast_in_order,
                               (key, after), wait - latency, via)

    def _arrive_all(self, messages: list[Message]) -> None:
        for message in messages:
            self.arrive(message)

    def post_recv(self, key: tuple, receiver: Event) -> Any:
        """Bind ``receiver`` to the next message of the channel; return the payload if it
        has already arrived (then ``receiver`` is left untouched), else ``PENDING``."""
        self._posted += 1
        if not self._posted & MEMORY_MASK:
            self._count_posted()
        channel = self.channels.get(key)
        if channel is None:
            channel = self._new_channel(key)
        if channel.unclaimed:
            message = channel.unclaimed.popleft()
            if message.arrived:
                return message.payload
            message.receiver = receiver
        else:
            channel.waiting.append(receiver)
        return PENDING

    def arrive(self, message: Message) -> None:
        message.arrived = True
        receiver = message.receiver
        if receiver is not None:
            if type(receiver) is Joint:
                receiver.payload = message.payload
                receiver.pending -= 1
                if receiver.pending == 0:
                    complete(receiver, receiver.payload)
            else:
                complete(receiver, message.payload)
        sender = message.sender
        if type(sender) is Joint:
            sender.pending -= 1
            if sender.pending == 0:
                complete(sender, sender.payload)
        else:
            complete(sender, None)

    # -- local work ----------------------------------------------------------------------
    def reduce_delay(self, endpoint: int, nbytes: int) -> float:
        """Reserve the endpoint's reduction engine for ``nbytes``; return the wait + work."""
        bandwidth = self.reduce_bandwidth[endpoint]
        if bandwidth == math.inf:
            return 0.0
        now = self.env._now
        end = max(now, self.reduce_free_at[endpoint]) + nbytes / bandwidth
        self.reduce_free_at[endpoint] = end
        return end - now

    def shared_reduce(self, endpoint: int, nbytes: int, value: Any) -> Event:
        """An event that fires with ``value`` once ``nbytes`` of reduction are done on the
        endpoint at an even share of its rate with its other shared reductions in
        progress (processor sharing: each of k at once runs at rate / k, recomputed as
        they come and go), as NCCL's channels reduce on threads of their own; the
        one-at-a-time engine (:meth:`reduce_delay`) is not used."""
        bandwidth = self.reduce_bandwidth[endpoint]
        if bandwidth == math.inf or nbytes == 0:
            return self.done(value)
        pool = self._shared.get(endpoint)
        if pool is None:
            pool = self._shared[endpoint] = _SharedPool()
        self._advance(pool, bandwidth)
        self._posted += 1
        if not self._posted & MEMORY_MASK:
            self._count_posted()
        event = Event(self.env)
        pool.jobs.append(_SharedJob(float(nbytes), nbytes, self.env._now, event, value))
        if not pool.planning:
            # Plan once every reduction asked at this instant is in: equal ones asked
            # together end together.
            pool.planning = True
            plan = Timeout(self.env, 0.0)
            plan.callbacks.append(lambda _: self._plan(endpoint))
        return event

    def _advance(self, pool: _SharedPool, bandwidth: float) -> None:
        """Take from each job of ``pool`` the bytes its share did since it last moved."""
        now = self.env._now
        if pool.jobs and now > pool.at:
            done = (now - pool.at) * bandwidth / len(pool.jobs)
            for job in pool.jobs:
                job.left -= done
        pool.at = now

    def _plan(self, endpoint: int) -> None:
        """Finish the jobs that are done and time the next to end (an earlier timing no
        longer holds once jobs come or go: its version is passed over).

        A job is done when what is left of it would not move the clock: late in a long
        run the clock's rounding leaves a few bytes that no timer can take. It is done
        too when under 1e-12 of its bytes are left, what the float sums of its shares may
        leave over; a job joined that close to its end so ends up to 1e-12 of its time
        early (1 ns for a job of 1000 s)."""
        pool = self._shared[endpoint]
        pool.planning = False
        bandwidth = self.reduce_bandwidth[endpoint]
        self._advance(pool, bandwidth)
        now, sharing = self.env._now, len(pool.jobs)
        finished = [job for job in pool.jobs if job.left <= 1e-12 * job.nbytes
                    or now + job.left * sharing / bandwidth <= now]
        if finished:
            pool.jobs = [job for job in pool.jobs if job not in finished]
            for job in finished:
                self._shared_done(endpoint, job.nbytes, job.start, now)
                complete(job.event, job.value)
        pool.version += 1
        if pool.jobs:
            version = pool.version
            timer = Timeout(self.env, min(job.left for job in pool.jobs) * len(pool.jobs)
                            / bandwidth)
            timer.callbacks.append(lambda _: self._plan(endpoint)
                                   if pool.version == version else None)

    def _shared_done(self, endpoint: int, nbytes: int, start: float, end: float) -> None:
        """A shared reduction ended (the tracing runtime records it)."""

    def compute_delay(self, endpoint: int, seconds: float) -> float:
        """Reserve the endpoint's compute stream for ``seconds`` of work (longer on a slow
        GPU); return the wait + work."""
        if self.compute_scale is not None:
            seconds *= self.compute_scale[endpoint]
        now = self.env._now
        end = max(now, self.compute_free_at[endpoint]) + seconds
        self.compute_free_at[endpoint] = end
        return end - now

    def sleep(self, endpoint: int, seconds: float) -> Event:
        """An event that fires ``seconds`` from now: a program of ``endpoint`` asleep."""
        return self.after(seconds, None)

    def after(self, delay: float, value: Any) -> Event:
        """An event that fires ``delay`` seconds from now with ``value``."""
        if delay == 0:
            return self.done(value)
        self._posted += 1
        if not self._posted & MEMORY_MASK:
            self._count_posted()
        return Timeout(self.env, delay, value)

    def _watch(self) -> None:
        """Every :data:`~simcoll.memory.CHECK_EVERY` messages: look at the memory left,
        and count them as made (:meth:`_count_posted`)."""
        check_memory_left()
        self._count_posted()

    def _count_posted(self) -> None:
        """Count :data:`~simcoll.memory.CHECK_EVERY` messages, timed events (sleeps,
        compute, reductions) or receives as made by the program running now: a program
        that makes them in a loop without yielding never lets time pass, and nothing
        reaches the event loop that counts events. More than ``max_same_instant`` of them
        with no program resumed and no time passed in between stop the run (a program
        may make up to as many in one go, then wait for them)."""
        now = self.env._now
        key = (ProgramProcess.resumes, now)
        if key == self._posted_at:
            self._posted_run += CHECK_EVERY
            if self._posted_run > self.max_same_instant:
                self.stop = RunStop("posted", now, self.env.active_process)
                raise self.stop
        else:
            self._posted_at, self._posted_run = key, CHECK_EVERY

    def _count_instant(self) -> None:
        """Count one event at the present instant; stop the run beyond
        ``max_same_instant`` in a row."""
        now = self.env._now
        if now == self._instant_at:
            self._same_instant += 1
            if self._same_instant > self.max_same_instant:
                self.stop = RunStop("instant", now)
                raise self.stop
        else:
            self._instant_at, self._same_instant = now, 0

    def done(self, value: Any) -> Event:
        """An already-processed event: work that took no time. Such events never reach the
        event loop, so they are counted here: a rank program that spins on them forever
        hits the run's event limit like one that spins on timed events, and more than
        ``max_same_instant`` of them at one instant stop the run as the event loop's
        would. Once the run has stopped, a program's first call returns an event that
        never fires, so a program that caught the stop waits there until the run ends
        with it; its next call raises the stop again, so a program that keeps calling
        without yielding (a second rank spinning at the instant the limit was met) stops
        too. Programs closed after the run (no program active) only get the event: their
        cleanup code runs, and the run's own error stands."""
        if self.stop is not None:
            process = self.env.active_process
            if process is not None:
                if process in self._given_dead_event:
                    raise self.stop
                self._given_dead_event.add(process)
            return Event(self.env)
        self.instant_left -= 1
        if self.instant_left < 0:
            self.stop = RunStop("events", self.env._now)
            raise self.stop
        self._count_instant()
        return done_event(self.env, value)

    # -- end of run ----------------------------------------------------------------------
    def waiting_receives(self) -> dict[int, list[str]]:
        """What each endpoint is blocked on: receives posted that no message matched."""
        waits: dict[int, list[str]] = {}
        for dst, text in self.receives_waiting().values():
            if text not in waits.setdefault(dst, []):
                waits[dst].append(text)
        return waits

    def receives_waiting(self) -> dict[Event, tuple[int, str]]:
        """Each receive posted that no message matched: its event, its endpoint and what it
        waits for (``recv from 1 (tag 0)``)."""
        out: dict[Event, tuple[int, str]] = {}
        running = {address for _, _, address in self.programs}
        for (context, src, dst, tag), channel in self.channels.items():
            where = self.context_named(context)
            # a peer off by one reaches a host or an in-network device, as for messages
            absent = "" if src in running else \
                f"; {self.network.topology.endpoint_name(src)} runs no program"
            for event in channel.waiting:
                out[event] = (dst, f"recv from {src} (tag {tag!r}{absent}){where}")
        return out

    def context_named(self, context: int) -> str:
        """`` in matching context 2 (group [0, 1])`` as errors name a context (nothing for
        the world's own, 0): the group that made it, or whose n-th fresh context it is
        (a started collective's, a training step's stream)."""
        return "" if context == 0 else f" in matching context {context} ({self._made(context)})"

    def _made(self, context: int) -> str:
        """What made ``context``: ``group [0, 1]``, ``fresh context 1 of the world``."""
        if context == 0:
            return "the world"
        key = next(key for key, number in self.contexts.items() if number == context)
        if key[0] == "group":
            return f"group {list(key[2])}"
        return f"fresh context {key[2] + 1} of {self._made(key[1])}"

    def unclaimed_messages(self) -> list[tuple[int, Message]]:
        """Every message that arrived and was not received, with its matching context."""
        return [(context, m) for (context, _, _, _), ch in self.channels.items()
                for m in ch.unclaimed]


def _wakes(event: Event | None, ahead: int = 0) -> bool:
    """Whether a message's part of ``event``, delivered after ``ahead`` other parts of it
    from now, resumes what waits on it: something does, and for a joint event (a
    ``sendrecv``, a multicast's send) this is its last part."""
    return bool(event is not None and event.callbacks
                and (type(event) is not Joint or event.pending == 1 + ahead))


class _SharedJob:
    """A shared reduction in progress: bytes left, its size and start, and what to fire
    with what when it ends."""

    __slots__ = ("left", "nbytes", "start", "event", "value")

    def __init__(self, left: float, nbytes: int, start: float, event: Event, value: Any):
        self.left, self.nbytes, self.start, self.event, self.value = \
            left, nbytes, start, event, value


class _SharedPool:
    """An endpoint's shared reductions: the jobs, when their bytes were last taken, the
    version of the timing planned, and whether a plan is due at this instant."""

    __slots__ = ("jobs", "at", "version", "planning")

    def __init__(self) -> None:
        self.jobs: list[_SharedJob] = []
        self.at = 0.0
        self.version = 0
        self.planning = False


class _Sent:
    """What a traced message was sent with, until it arrives."""

    __slots__ = ("start", "nbytes", "via", "wire", "latency", "moving", "queued", "links",
                 "context")

    def __init__(self, start: float, nbytes: int, via: Via | None, wire: int,
                 latency: float, moving: float | None, links: tuple[int, ...],
                 context: int) -> None:
        self.start, self.nbytes, self.via, self.wire = start, nbytes, via, wire
        self.latency, self.moving, self.queued = latency, moving, False
        self.links, self.context = links, context


class TracingRuntime(Runtime):
    """A runtime that also records every message and compute span, every reduction that
    takes time (one of no time is not recorded), when each
    message's bytes began to move, and what its arrival woke (:class:`TraceEvent`), and
    every sleep (kind "sleep"), apart."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.events: list[TraceEvent] = []
        self.sleeps: list[TraceEvent] = []
        self._sent: dict[Message, _Sent] = {}
        self._drawn = 0.0
        self._seen_jitter: Any = None
        self._reduce_ends: dict[int, float] = {}
        self._compute_ends: dict[int, float] = {}
        self._recorded: set[Message] = set()
        """Messages traced ahead of their arrival's delivery (:meth:`_record_ahead`)."""
        self._parts: dict[Joint, list[tuple[int, int]]] = {}
        """Joint events waited on and not yet complete: their messages traced so far
        (index in ``events``, 0 for the sender's side, 1 for the receiver's)."""
        self._changes: dict[int, list[tuple[float, float]]] = {}
        """Bandwidths link faults gave directed links: (from when, bytes/s), in order."""
        change = self.network.change_link

        def changed(index: int, factor: float) -> None:
            change(index, factor)
            for d in (2 * index, 2 * index + 1):
                self._changes.setdefault(d, []).append(
                    (self.env._now, self.network.topology.bandwidth_of(d) * factor))
        # The fault plan calls the network's method when a link changes: see it here.
        self.network.change_link = changed  # type: ignore[method-assign]

    def _watch_jitter(self) -> None:
        """Before a message is handed to the network: see the jitter it draws, which
        delays its bytes as its latency does."""
        self._drawn = 0.0
        jitter = self.network.jitter
        if jitter is not None and jitter is not self._seen_jitter:
            def seen() -> float:
                self._drawn = jitter()
                return self._drawn
            self.network.jitter = self._seen_jitter = seen

    def _moving(self, now: float, latency: float, delay: float) -> float:
        """When bytes handed over at ``now`` begin to move: the network's sum."""
        return now + ((latency + delay) + self._drawn)

    def post_send(self, key: tuple, payload: Any, nbytes: int, src: int, dst: int,
                  tag: Any, sender: Event, delay: float = 0.0,
                  wire_bytes: int | None = None, ordered: bool = False,
                  via: Via | None = None) -> Message:
        start = self.env._now
        behind = ordered and key in self._in_order
        self._watch_jitter()
        message = super().post_send(key, payload, nbytes, src, dst, tag, sender, delay,
                                    wire_bytes, ordered, via)
        # Every message arrives through an event (even an empty one on a route without
        # latency), so it is recorded here before it arrives.
        links, latency, _ = self.network.route(src, dst, via)
        self._sent[message] = _Sent(
            start, nbytes, via, nbytes if wire_bytes is None else wire_bytes, latency,
            None if behind else self._moving(start, latency, delay), links, key[0])
        return message

    def _arrive_in_order(self, token: tuple[tuple, Message]) -> None:
        self._record_ahead(token[1])  # recorded before the next one is handed over
        super()._arrive_in_order(token)

    def _next_in_order(self, key: tuple, queued: tuple[Message, int, float, int | None,
                                                      Via | None]) -> None:
        after, ready, via = queued[0], queued[2], queued[4]
        records = self._handing([after], self.network.route(after.src, after.dst, via),
                                ready)
        super()._next_in_order(key, queued)
        self._drew(records)

    def _handing(self, messages: list[Message],
                 route: tuple[tuple[int, ...], float, float], ready: float) -> list[_Sent]:
        """Ordered ``messages`` are about to be handed to the network, the one ahead
        having arrived, onto ``route`` (links, latency, bandwidth) as it stands now: their
        bytes move after what is left of their latency, counted from ``ready`` (when
        they were sent, plus their delay), or at once (``queued``). Returns their
        records, for the jitter the network is about to draw."""
        now = self.env._now
        links, latency, _ = route
        wait = max(ready + latency - now, 0.0)
        records = [r for r in map(self._sent.get, messages) if r is not None]
        for k, record in enumerate(records):
            record.links = links if k == 0 else ()
            record.latency = latency
            record.moving = now + (latency + (wait - latency))
            record.queued = ready + latency < now
        self._watch_jitter()
        return records

    def _drew(self, records: list[_Sent]) -> None:
        """The network drew jitter for ``records`` as it took them: it delays their
        bytes as their latency does."""
        if self._drawn:
            for record in records:
                assert record.moving is not None
                record.moving += self._drawn

    def post_multicast(self, keys: list[tuple], payload: Any, nbytes: int, src: int,
                       dsts: tuple[int, ...], tag: Any, sender: Joint,
                       delay: float = 0.0, ordered: bool = False,
                       via: MulticastVia | None = None) -> list[Message]:
        start = self.env._now
        behind = ordered and (keys[0][0], src, dsts, tag) in self._multicasts_in_order
        self._watch_jitter()
        messages = super().post_multicast(keys, payload, nbytes, src, dsts, tag, sender,
                                          delay, ordered, via)
        links, latency, _ = self.network.route(src, dsts, via)
        moving = None if behind else self._moving(start, latency, delay)
        for k, message in enumerate(messages):
            self._sent[message] = _Sent(start, nbytes, None if via is None else via[k],
                                        nbytes, latency, moving, links if k == 0 else (),
                                        keys[0][0])
        return messages

    def _multicast_in_order(self, token: tuple[tuple, list[Message]]) -> None:
        for k, message in enumerate(token[1]):  # delivered in this order
            self._record_ahead(message, k)
        super()._multicast_in_order(token)

    def _next_multicast_in_order(self, key: tuple, queued: tuple[
            list[Message], int, float, MulticastVia | None]) -> None:
        after, ready, via = queued[0], queued[2], queued[3]
        records = self._handing(after, self.network.route(key[1], key[2], via), ready)
        super()._next_multicast_in_order(key, queued)
        self._drew(records)

    def arrive(self, message: Message) -> None:
        if message in self._recorded:
            self._recorded.discard(message)
        else:
            self._record(message)
        super().arrive(message)

    def _record_ahead(self, message: Message, ahead: int = 0) -> None:
        """Trace ``message`` before its arrival is delivered, which then skips it
        (``ahead``: messages of its multicast to be delivered before it)."""
        self._record(message, ahead)
        self._recorded.add(message)

    def _record(self, message: Message, ahead: int = 0) -> None:
        """Trace ``message``, which arrives now (``ahead``: as :meth:`_record_ahead`)."""
        now = self.env._now
        record = self._sent.pop(message)
        woke = (_wakes(message.sender, ahead), _wakes(message.receiver))
        moving = now if record.moving is None else min(record.moving, now)
        index = len(self.events)
        self.events.append(TraceEvent(
            "message", message.src, message.dst, message.tag, record.nbytes, record.start,
            now, record.via, moving, record.latency, record.queued, record.wire,
            record.links, record.context, woke[0], woke[1], self._bandwidths(moving, now)))
        for side, event in enumerate((message.sender, message.receiver)):
            if type(event) is Joint and event.callbacks:
                self._joint_part(event, index, side, woke[side])

    def _joint_part(self, joint: Joint, index: int, side: int, last: bool) -> None:
        """Note a traced message of a joint event waited on; when it is the last, the
        parts that arrived at the same instant woke the program with it (each is as
        critical by time), while those that came earlier woke nothing."""
        if not last:
            self._parts.setdefault(joint, []).append((index, side))
            return
        now = self.env._now
        for i, part_side in self._parts.pop(joint, []):
            part = self.events[i]
            if part.end == now:
                self.events[i] = (replace(part, woke_sender=True) if part_side == 0
                                  else replace(part, woke_receiver=True))

    def _bandwidths(self, start: float, end: float) -> tuple[tuple[int, float], ...]:
        """Each directed link a link fault has changed, with its bandwidth averaged over
        ``[start, end]`` (where ``start == end``: as it stood just before ``end``)."""
        out = []
        for d, steps in self._changes.items():
            level, t, area = self.network.topology.bandwidth_of(d), start, 0.0
            for at, bandwidth in steps:
                if at >= end:
                    break
                if at > t:
                    area += level * (at - t)
                    t = at
                level = bandwidth
            out.append((d, level if t == start else (area + level * (end - t)) / (end - start)))
        return tuple(out)

    def reduce_delay(self, endpoint: int, nbytes: int) -> float:
        start = self._engine_start(self.reduce_free_at, self._reduce_ends, endpoint)
        delay = super().reduce_delay(endpoint, nbytes)
        if delay:
            end = self._reduce_ends[endpoint] = self.env._now + delay
            self.events.append(TraceEvent("reduce", endpoint, None, None, nbytes, start, end))
        return delay

    def _shared_done(self, endpoint: int, nbytes: int, start: float, end: float) -> None:
        self.events.append(TraceEvent("reduce", endpoint, None, None, nbytes, start, end))

    def sleep(self, endpoint: int, seconds: float) -> Event:
        if seconds > 0:
            now = self.env._now
            self.sleeps.append(TraceEvent("sleep", endpoint, None, None, 0, now, now + seconds))
        return super().sleep(endpoint, seconds)

    def compute_delay(self, endpoint: int, seconds: float) -> float:
        start = self._engine_start(self.compute_free_at, self._compute_ends, endpoint)
        delay = super().compute_delay(endpoint, seconds)
        end = self._compute_ends[endpoint] = self.env._now + delay
        self.events.append(TraceEvent("compute", endpoint, None, None, 0, start, end))
        return delay

    def _engine_start(self, free_at: list[float], ends: dict[int, float],
                      endpoint: int) -> float:
        """When work asked of an engine (reductions or compute) now starts: now, or where
        it queues, when the work ahead ends, as traced (the instant its event fires,
        which may differ from ``free_at`` in the last bit)."""
        now = self.env._now
        return now if free_at[endpoint] <= now else ends[endpoint]
