"""The seam between communicators and network models, and the traffic counters.

A network model turns "``nbytes`` from endpoint ``src`` to endpoint ``dst``" into a call of
``on_arrival(token)`` at the simulated time the last byte arrives. Models differ only in
how they compute that time; all count traffic the same way, here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar, cast

import simpy
from simpy.events import Timeout

from simcoll.errors import InvalidInputError, LinkFailureError, NoRouteError
from simcoll.memory import MEMORY_MASK, check_memory_left
from simcoll.topology.graph import ROUTES_KEPT, MulticastVia, Topology, Via

__all__ = ["Network", "Arrival", "handed_out"]

T = TypeVar("T")


def handed_out(items: list[T]) -> Iterator[T]:
    """``items`` in order, each dropped from the list as it is handed out: an arrival's
    delivery runs its receiver at once, whose next sends would otherwise find every
    arrival delivered before it still held (a direct all_reduce's p(p-1) first-round
    messages alive through its second round: 1.4 GiB on 512 ranks, not 1.2)."""
    items.reverse()
    while items:
        yield items.pop()


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
        self.watch: Callable[[], None] = check_memory_left
        """Called every :data:`~simcoll.memory.CHECK_EVERY` messages: looks at the memory
        left (the runtime adds its count of work made at one instant)."""
        self._capacity = topology.directed_bandwidths()
        self._failed: frozenset[int] = frozenset()
        self._routes: dict[tuple[Any, ...], tuple[tuple[int, ...], float, float]] = {}
        """Routes as links stand now, by (source, destination) and by (source,
        destination, devices passed) for routes bound to devices."""
        self._arriving: dict[float, list[tuple[Arrival, Any]]] = {}

    def _route(self, src: int, dst: int | tuple[int, ...], via: Via | MulticastVia | None = None
               ) -> tuple[tuple[int, ...], float, float]:
        """(directed links, latency, least bandwidth) of the route, as links stand now
        (through the device or devices ``via`` if given: see :meth:`Topology.route`).

        For a tuple of destinations (a multicast) the links are the union of the routes,
        each once, and the latency is the longest route's; ``via`` then gives each
        destination's (:data:`~simcoll.topology.graph.MulticastVia`).
        """
        links: list[int] = []
        latency = 0.0
        targets = dst if isinstance(dst, tuple) else (dst,)
        vias = cast("MulticastVia", via) if isinstance(dst, tuple) and via is not None \
            else (cast("Via | None", via),) * len(targets)
        for d, bound in zip(targets, vias):
            try:
                route = self.topology.route(src, d, avoid=self._failed, via=bound,
                                            multicast=isinstance(dst, tuple))
            except NoRouteError:
                if not self._failed:
                    raise
                raise self._cut_off(src, d, bound, isinstance(dst, tuple)) from None
            latency = max(latency, route.latency)
            links.extend(link for link in route.links if link not in links)
        capacity = self._capacity
        bandwidth = min((capacity[d] for d in links), default=math.inf)
        if len(self._routes) >= ROUTES_KEPT:
            self._routes.clear()
        entry = self._routes[(src, dst) if via is None else (src, dst, via)] = (
            tuple(links), latency, bandwidth)
        return entry

    def _cut_off(self, src: int, dst: int, via: Via | None = None,
                 multicast: bool = False) -> LinkFailureError | NoRouteError:
        """The error for a message sent from ``src`` to ``dst`` (through ``via``) after
        failed links left no route between them: it names the first failed link of the
        route the message would take on the healthy machine; where the healthy machine
        has no such route either (the failures are not the cause), its own error."""
        failed = self._failed
        try:
            healthy = self.topology.route(src, dst, via=via, multicast=multicast).links
        except NoRouteError as error:
            return error
        link = next((d >> 1 for d in healthy if d >> 1 in failed), min(failed))
        u, v = self.topology.links[link].u, self.topology.links[link].v
        name = self.topology.endpoint_name
        bound = "" if via is None else \
            f" through {', '.join(map(repr, (via,) if isinstance(via, str) else via))}"
        return LinkFailureError(
            f"no route from {name(src)!r} to {name(dst)!r}{bound} around the failed links "
            f"for a message sent at t={self.env.now:.9g} s: link ({u!r}, {v!r}) failed",
            (u, v), [(src, dst)])

    def route(self, src: int, dst: int | tuple[int, ...], via: Via | MulticastVia | None = None
              ) -> tuple[tuple[int, ...], float, float]:
        """(directed links, latency, least bandwidth) of the route from ``src`` to ``dst``
        that a message sent now takes (to a tuple of destinations: a multicast's, see
        :meth:`_route`; through the device or devices ``via`` if given)."""
        if via is None:
            return self._routes.get((src, dst)) or self._route(src, dst)
        return self._routes.get((src, dst, via)) or self._route(src, dst, via)

    def times_alone(self, routes: list[tuple[int, ...]]) -> bool:
        """Whether every message on one of ``routes`` (directed links), each route
        carrying one message at a time and nothing else in flight, arrives exactly
        ``latency + nbytes / least bandwidth`` after it is sent (see
        :mod:`simcoll.lone_flows`)."""
        return False

    def multicast(self, src: int, dsts: tuple[int, ...], nbytes: int, on_arrival: Arrival,
                  token: Any, delay: float = 0.0, via: MulticastVia | None = None) -> None:
        """Move ``nbytes`` from ``src`` to every endpoint of ``dsts`` as one message that
        the network replicates where the routes part: each byte crosses each link of the
        union of the routes once. ``on_arrival(token)`` is called once, when every
        destination has the last byte (after the longest route's latency, plus ``delay``
        as for :meth:`transfer`). ``via`` gives the devices each destination's route
        passes (None: the shortest routes)."""
        links, latency, bandwidth = self.route(src, dsts, via)
        self.sent[src] += nbytes
        for d in dsts:
            self.received[d] += nbytes
        self.messages += 1
        if not self.messages & MEMORY_MASK:
            self.watch()
        for d in links:
            self.link_bytes[d] += nbytes
        latency += delay
        if self.jitter is not None:
            latency += self.jitter()
        self._launch(src, dsts, nbytes, links, latency, bandwidth, on_arrival, token, via)

    def _launch(self, src: int, dst: int | tuple[int, ...], nbytes: int,
                links: tuple[int, ...], latency: float, bandwidth: float,
                on_arrival: Arrival, token: Any, via: Via | MulticastVia | None = None
                ) -> None:
        """Deliver a counted message: call ``on_arrival(token)`` when its bytes are in
        (``via``: the devices its route was bound to, which a reroute keeps)."""
        raise NotImplementedError

    def track_flows(self, planned: Sequence[tuple[float, int, float]] = ()) -> None:
        """Prepare for :meth:`change_link` (called before the run starts) with the link
        faults ``planned`` as ``(at, link index, factor)`` in the order they happen.

        Raises:
            InvalidInputError: this network model does not model link faults.
        """
        raise InvalidInputError(f"the {self.name!r} network model does not model link "
                                f"faults; use network='flow' or 'flow_rtt'")

    def change_link(self, index: int, factor: float) -> None:
        """Set link ``index`` to ``factor`` times its nominal bandwidth (both directions)
        from now on; ``factor == 0`` fails it, and later messages route around it."""
        raise NotImplementedError

    def _count(self, src: int, dst: int, nbytes: int, links: tuple[int, ...],
               wire_bytes: int) -> None:
        self.sent[src] += nbytes
        self.received[dst] += nbytes
        self.messages += 1
        if not self.messages & MEMORY_MASK:
            self.watch()
        link_bytes = self.link_bytes
        for d in links:
            link_bytes[d] += wire_bytes

    def _arrive_after(self, delay: float, on_arrival: Arrival, token: Any) -> None:
        """Call ``on_arrival(token)`` ``delay`` seconds from now. Arrivals at one instant
        share one event and are delivered in the order they were sent."""
        when = self.env._now + delay
        batch = self._arriving.get(when)
        if batch is None:
            batch = self._arriving[when] = []
            Timeout(self.env, delay, when).callbacks.append(self._deliver)
        batch.append((on_arrival, token))

    def _deliver(self, event: Timeout) -> None:
        for on_arrival, token in handed_out(self._arriving.pop(event._value)):
            on_arrival(token)

    def transfer(self, src: int, dst: int, nbytes: int, on_arrival: Arrival,
                 token: Any, delay: float = 0.0, wire_bytes: int | None = None,
                 via: Via | None = None) -> None:
        """Move ``nbytes`` of payload from ``src`` to ``dst``; call ``on_arrival(token)``
        on arrival.

        A protocol may put more bytes on the wire than the payload (``wire_bytes``: what
        crosses every link and takes its time; the payload is what the endpoints count)
        and wait ``delay`` seconds more than the route's latency before the bytes move
        (a per-step overhead). A negative ``delay``, down to minus the route's latency,
        starts the bytes sooner: an ordered message whose latency ran while the one ahead
        of it moved (:meth:`simcoll.comm.Comm.send`). ``via`` binds the route to pass
        that device, or those devices in order (:meth:`Topology.route`).
        """
        links, latency, bandwidth = self.route(src, dst, via)
        wire = nbytes if wire_bytes is None else wire_bytes
        self._count(src, dst, nbytes, links, wire)
        latency += delay
        if self.jitter is not None:
            latency += self.jitter()
        self._launch(src, dst, wire, links, latency, bandwidth, on_arrival, token, via)

