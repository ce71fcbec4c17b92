"""A flow in flight, and the processor-sharing group (flows behind one bottleneck link).

See :mod:`simcoll.network.flow` for when a flow is in which regime.
"""

from __future__ import annotations

from heapq import heappush
from typing import Any

from simpy.events import Event

from simcoll.engine import cancel
from simcoll.network.base import Arrival

__all__ = ["Flow", "Group"]


class Flow:
    """One message's bytes in flight.

    ``remaining``, ``rate`` and ``updated`` (bytes left at ``updated`` when draining at
    ``rate``) hold for a reserved flow and, when it is handed over, for a flow leaving a
    group; the general regime keeps its flows' own copies in arrays (``slot``).
    """

    __slots__ = ("links", "remaining", "bottleneck", "rate", "updated", "event",
                 "on_arrival", "token", "start", "finish", "reserved", "group", "key",
                 "slot", "src", "dst")

    def __init__(self, links: tuple[int, ...], nbytes: float, bottleneck: float,
                 on_arrival: Arrival, token: Any, src: int, dst: int | tuple[int, ...]):
        self.src = src
        self.dst = dst
        """One endpoint, or a tuple of them for a multicast."""
        self.links = links
        self.remaining = nbytes
        self.bottleneck = bottleneck
        self.rate = 0.0
        self.updated = 0.0
        self.event: Event | None = None
        """A reserved flow's own completion."""
        self.on_arrival = on_arrival
        self.token = token
        self.start = 0.0
        """When a reserved flow starts draining."""
        self.finish = 0.0
        """When a reserved flow's last byte arrives (the instant of ``event``)."""
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
        if flow.event is not None:
            cancel(flow.event)
            flow.event = None
        flow.key = self.virtual + remaining
        self.seq += 1
        heappush(self.heap, (flow.key, self.seq, flow))
