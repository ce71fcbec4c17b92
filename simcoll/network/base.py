"""The seam between communicators and network models, and the traffic counters.

A network model turns "``nbytes`` from endpoint ``src`` to endpoint ``dst``" into a call of
``on_arrival(token)`` at the simulated time the last byte arrives. Models differ only in
how they compute that time; all count traffic the same way, here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import simpy
from simpy.events import Timeout

from simcoll.errors import InvalidInputError
from simcoll.topology.graph import Topology

__all__ = ["Network", "Arrival"]

Arrival = Callable[[Any], None]


class Network:
    """Base class: routes, traffic counters, and the ``transfer`` interface.

    Attributes:
        sent: payload bytes each endpoint injected (ranks first, then hosts).
        received: payload bytes addressed to each endpoint.
        link_bytes: bytes that crossed each directed link (index as in ``Route.links``).
        messages: number of point-to-point messages.
    """

    name: ClassVar[str] = "base"

    def __init__(self, env: simpy.Environment, topology: Topology, endpoints: int):
        self.env = env
        self.topology = topology
        self.sent = [0] * endpoints
        self.received = [0] * endpoints
        self.link_bytes = [0] * (2 * len(topology.links))
        self.messages = 0
        self.jitter: Callable[[], float] | None = None
        """Extra latency drawn for each message (random per-message jitter), if set."""
        self._capacity = topology.directed_bandwidths()
        self._failed: frozenset[int] = frozenset()
        self._routes: dict[tuple[int, int], tuple[tuple[int, ...], float, float]] = {}

    def _route(self, src: int, dst: int) -> tuple[tuple[int, ...], float, float]:
        """(directed links, latency, least bandwidth) of the route, as links stand now."""
        route = self.topology.route(src, dst, avoid=self._failed)
        capacity = self._capacity
        bandwidth = min((capacity[d] for d in route.links), default=route.bandwidth)
        entry = self._routes[(src, dst)] = (route.links, route.latency, bandwidth)
        return entry

    def track_flows(self) -> None:
        """Prepare for :meth:`change_link` (called before the run starts).

        Raises:
            InvalidInputError: this network model does not model link faults.
        """
        raise InvalidInputError(f"the {self.name!r} network model does not model link "
                                f"faults; use network='flow'")

    def change_link(self, index: int, factor: float) -> None:
        """Set link ``index`` to ``factor`` times its nominal bandwidth (both directions)
        from now on; ``factor == 0`` fails it, and later messages route around it."""
        raise NotImplementedError

    def _count(self, src: int, dst: int, nbytes: int,
               links: tuple[int, ...]) -> None:
        self.sent[src] += nbytes
        self.received[dst] += nbytes
        self.messages += 1
        link_bytes = self.link_bytes
        for d in links:
            link_bytes[d] += nbytes

    def _arrive_after(self, delay: float, on_arrival: Arrival, token: Any) -> None:
        """Call ``on_arrival(token)`` ``delay`` seconds from now."""
        Timeout(self.env, delay, (on_arrival, token)).callbacks.append(_deliver)

    def transfer(self, src: int, dst: int, nbytes: int, on_arrival: Arrival,
                 token: Any) -> None:
        """Move ``nbytes`` from ``src`` to ``dst``; call ``on_arrival(token)`` on arrival."""
        raise NotImplementedError


def _deliver(event: Timeout) -> None:
    on_arrival, token = event._value
    on_arrival(token)
