"""A flow in flight, the processor-sharing group (flows behind one bottleneck link), and
batches (flows that share one event because something happens to them at one instant).

See :mod:`simcoll.network.flow` for when a flow is in which regime.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL, Event, Timeout

from simcoll.engine import cancel, schedule_at
from simcoll.network.base import Arrival
from simcoll.topology.graph import MulticastVia, Via

__all__ = ["Flow", "Group", "Batches"]


class Flow:
    """One message's bytes in flight.

    ``remaining``, ``rate`` and ``updated`` (bytes left at ``updated`` when draining at
    ``rate``) hold for a reserved flow and, when it is handed over, for a flow leaving a
    group; the general regime keeps its flows' own copies in arrays (``slot``).
    """

    __slots__ = ("links", "remaining", "bottleneck", "rate", "updated", "batch",
                 "on_arrival", "token", "start", "finish", "reserved", "group", "key",
                 "slot", "src", "dst", "via", "latency")

    latency: float
    """The most latency it has met: its route's, or a longer one's it was moved to. Set
    only where link faults are planned (``FlowNetwork._launch``), so that every message
    does not pay for it: a reroute makes it wait out what a new route has beyond it."""

    def __init__(self, links: tuple[int, ...], nbytes: float, bottleneck: float,
                 on_arrival: Arrival, token: Any, src: int, dst: int | tuple[int, ...]):
        self.src = src
        self.dst = dst
        """One endpoint, or a tuple of them for a multicast."""
        self.via: Via | MulticastVia | None = None
        """The devices the route was bound to pass (``Comm.send(via=)``), kept when the
        flow is rerouted around a failed link."""
        self.links = links
        self.remaining = nbytes
        self.bottleneck = bottleneck
        self.rate = 0.0
        self.updated = 0.0
        self.batch: Batch | None = None
        """The batch of a reserved flow's completion, or of a flow's start."""
        self.on_arrival = on_arrival
        self.token = token
        self.start = 0.0
        """When a reserved flow starts draining."""
        self.finish = 0.0
        """When a reserved flow's last byte arrives (the instant of its batch)."""
        self.reserved = False
        self.group: Group | None = None
        self.key = 0.0
        self.slot = -1
        """Row of the general regime's arrays, or -1 outside it."""


class Group:
    """Flows that all share bottleneck link ``link`` and nothing else: processor sharing.

    ``virtual`` is the number of bytes each member has been served since the group formed,
    as of time ``stamp``; a member finishes when ``virtual`` reaches its ``key``. One
    completion event (``event``) is pending for the whole group.
    """

    __slots__ = ("link", "capacity", "heap", "virtual", "stamp", "event", "seq")

    def __init__(self, link: int, capacity: float, now: float):
        self.link = link
        self.capacity = capacity
        self.heap: list[tuple[float, int, Flow]] = []
        self.virtual = 0.0
        self.stamp = now
        self.event: Event | None = None
        self.seq = 0

    def advance(self, now: float) -> None:
        """Bring ``virtual`` up to ``now``."""
        if self.heap:
            self.virtual += self.capacity / len(self.heap) * (now - self.stamp)
        self.stamp = now

    def push(self, flow: Flow, remaining: float) -> None:
        """Add ``flow`` with ``remaining`` bytes to send (after :meth:`advance`)."""
        flow.group = self
        flow.key = self.virtual + remaining
        self.seq += 1
        heappush(self.heap, (flow.key, self.seq, flow))


class Batch:
    """Flows waiting for one event: ``live`` of them still count on it."""

    __slots__ = ("event", "flows", "live", "when")

    def __init__(self, event: Event, when: float):
        self.event = event
        self.when = when
        self.flows: list[Flow] = []
        self.live = 0


class Batches:
    """One event per instant for every flow that something happens to at that instant.

    A ring's step ends every rank's message at the same instant and an all-to-all starts
    every flow at one instant after the same latency: one SimPy event serves them all,
    and ``handle`` gets the flows in the order they were added.
    """

    def __init__(self, env: simpy.Environment, handle: Callable[[list[Flow]], None]):
        self.env = env
        self._handle = handle
        self._pending: dict[float, Batch] = {}

    def add(self, flow: Flow, delay: float) -> float:
        """Add ``flow`` to the batch ``delay`` seconds from now; return that instant."""
        when = self.env._now + delay
        batch = self._pending.get(when)
        if batch is None:
            event = Timeout(self.env, delay, when)
            event.callbacks.append(self._fire)
            batch = self._pending[when] = Batch(event, when)
        batch.flows.append(flow)
        batch.live += 1
        flow.batch = batch
        return when

    def add_at(self, flow: Flow, when: float) -> None:
        """Add ``flow`` to the batch at instant ``when`` exactly."""
        batch = self._pending.get(when)
        if batch is None:
            event = schedule_at(self.env, when, self._fire, when, NORMAL)
            batch = self._pending[when] = Batch(event, when)
        batch.flows.append(flow)
        batch.live += 1
        flow.batch = batch

    def remove(self, flow: Flow) -> None:
        """Take ``flow`` out of its batch; an emptied batch's event is cancelled."""
        batch = flow.batch
        assert batch is not None
        flow.batch = None
        batch.live -= 1
        if not batch.live:
            cancel(batch.event)
            del self._pending[batch.when]

    def _fire(self, event: Event) -> None:
        batch = self._pending.pop(event._value)
        flows = []
        for flow in batch.flows:
            # A flow taken out and added back to the same instant is listed twice.
            if flow.batch is batch:
                flow.batch = None
                flows.append(flow)
        self._handle(flows)
