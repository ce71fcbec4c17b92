"""The "flow" network model (the default): max-min fair sharing of directed links.

A message waits the summed latency of its route, then drains its bytes as a flow that
crosses every directed link of the route at once. Active flows share each link max-min
fairly (progressive filling, as in SimGrid's flow-level model without its TCP correction
factors, reverse-route cross-traffic and window bound, on split-duplex links, for routes
of equal latency: see the README's "The network model"): a flow alone on its path drains
at the path's least bandwidth, so it takes exactly ``sum(latency) + nbytes /
min(bandwidth)``; k equal flows on one link get 1/k each.

How rates are kept up to date, and what it costs. Each directed link keeps the set of
flows draining across it, and a count of the flows in flight on it (draining, or still in
their latency phase). A draining flow is in one of three regimes:

* **Alone.** A flow sent while nothing at all is in flight on its links (the common case
  of rings and trees) is *reserved*: it completes at ``latency + nbytes / bottleneck``,
  in one SimPy event shared with every flow that completes at that instant (a ring step's
  p messages: one event; :class:`~simcoll.network.regimes.Batches`), and nothing else.
  Flows that wait out their latency start draining in the same way, one event per
  instant. If another flow starts draining on one of its links before it ends,
  the reservation is turned back into what the general regime would hold at that moment
  (draining at the bottleneck since its start, or still in its latency phase), which is
  exact because nothing shared its links until then. A flow that starts draining on idle
  links is reserved the same way, from that instant.
* **Single bottleneck (processor sharing).** When every flow of a component crosses one
  link L whose bandwidth is the least on each of their routes (incast: many senders to
  one receiver), max-min fairness gives every flow ``capacity(L) / n``: every other link
  d carries at most n of these flows and has at least L's bandwidth. The group keeps a
  virtual clock (bytes served to each member since the group formed) and a heap of the
  members' finishing values, so a flow joining or leaving costs O(log n) and only one
  completion event is pending for the whole group. A flow may join when L is on its route,
  L is its bottleneck, and every flow on its links is a member.
* **General.** Otherwise the flow joins the general regime
  (:mod:`simcoll.network.general`): every general flow is a row of arrays, and their
  rates are re-solved by progressive filling (:mod:`simcoll.network.maxmin`: repeatedly
  take the link with the smallest fair share, freeze its flows at that share, subtract
  them from their other links; in pure Python for a few flows, over numpy arrays for
  many). A flow that ends re-solves only the flows at least as fast as it was: slower
  ones cannot change. Re-solving is deferred to the end of the current instant (an event
  of priority :data:`simcoll.engine.LATE`): all starts and ends at one simulated time are
  solved once (exact, since rates only matter over intervals of positive length). A flow
  whose rate did not change keeps its finishing instant, and only one completion is
  pending for the whole regime, at the earliest finishing instant: when rates change it
  is moved (the old event cancelled with :func:`simcoll.engine.cancel`: it stays in
  SimPy's queue but the run loop drops it without moving the clock). Flows that start
  together on the same links with the same size (a bulk-synchronous step such as an
  all-to-all) get the same rate and end at the same instant: one event for all of them.

Groups touched by a flow that cannot join them are dissolved into the general regime, once
(O(n)). Link faults are in :mod:`simcoll.network.rerouting`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from heapq import heappop
from typing import Any

import simpy
from simpy.events import NORMAL, Event, Timeout

from simcoll.engine import LATE, cancel, schedule_at
from simcoll.memory import MEMORY_MASK
from simcoll.network.base import Arrival, Network, handed_out
from simcoll.network.general import GeneralFlows
from simcoll.network.maxmin import CROSSOVER
from simcoll.network.regimes import Batches, Flow, Group
from simcoll.network.rerouting import change_link
from simcoll.topology.graph import MulticastVia, Topology, Via

__all__ = ["FlowNetwork"]


class FlowNetwork(Network):
    """Max-min fair flow-level model; see the module docstring for the algorithm."""

    name = "flow"
    fast = True
    """Use the alone and single-bottleneck regimes; ``False`` sends every flow through the
    general solver (for tests that compare the two)."""
    vectorized_from = CROSSOVER
    """Flows in a re-solve from which the numpy solver is used (0: always; tests)."""
    groups = True
    """Serve flows behind one bottleneck link as a processor-sharing group (equal shares
    for all: a model that weighs flows turns it off)."""

    def __init__(self, env: simpy.Environment, topology: Topology, endpoints: int):
        super().__init__(env, topology, endpoints)
        self._on_link: list[dict[Flow, None]] = [{} for _ in self._capacity]
        """The flows draining across each link, reserved ones excepted."""
        self._owner: list[Flow | None] = [None] * len(self._capacity)
        """The reserved flow on each link, if any (it is alone there): a list, not one
        dict per link, because every message of a ring or tree is reserved."""
        self._load = [0] * len(self._capacity)
        self._general = GeneralFlows(env, self._capacity, self._general_due,
                                     self.vectorized_from, self._penalties())
        self._ending = Batches(env, self._finish)
        self._starting = Batches(env, self._start)
        self._settling = False
        self._waking: dict[Group, None] = {}
        self._in_flight: dict[Flow, None] | None = None
        """Every flow in flight, kept only when link faults are planned."""
        self._empty_in_flight: dict[Flow, None] = {}
        """Empty messages in their latency phase, kept only when link faults are planned:
        a failed link with no route around it stops them as it stops the others."""

    def _penalties(self) -> list[float] | None:
        """Each directed link's sharing penalty, for weighted sharing (None: unweighted,
        every flow's share is equal)."""
        return None

    def track_flows(self, planned: Sequence[tuple[float, int, float]] = ()) -> None:
        """Keep the set of flows in flight, which link faults need to find the flows
        crossing a link."""
        self._in_flight = {}

    def times_alone(self, routes: list[tuple[int, ...]]) -> bool:
        """Where no two routes cross one directed link, without jitter or link faults:
        every message is then a flow alone on its links, reserved at its bottleneck."""
        if not self.fast or self.jitter is not None or self._in_flight is not None:
            return False
        crossed = [link for links in routes for link in links]
        return len(crossed) == len(set(crossed))

    # -- starting ------------------------------------------------------------------------
    def transfer(self, src: int, dst: int, nbytes: int, on_arrival: Arrival,
                 token: Any, delay: float = 0.0, wire_bytes: int | None = None,
                 via: Via | None = None) -> None:
        """Move ``nbytes`` of payload from ``src`` to ``dst``; call ``on_arrival(token)``
        on arrival (``delay`` and ``wire_bytes`` as for :meth:`Network.transfer`).

        The base class's counting and launching, in one call: this is every message's
        path, and a flow alone on idle links is reserved right here.
        """
        if via is None:
            links, latency, bandwidth = self._routes.get((src, dst)) or self._route(src, dst)
        else:
            links, latency, bandwidth = self.route(src, dst, via)
        wire = nbytes if wire_bytes is None else wire_bytes
        self.sent[src] += nbytes
        self.received[dst] += nbytes
        self.messages += 1
        if not self.messages & MEMORY_MASK:
            self.watch()
        link_bytes, load = self.link_bytes, self._load
        idle = wire > 0 and self.fast
        for d in links:
            link_bytes[d] += wire
            if load[d]:
                idle = False
        latency += delay
        if self.jitter is not None:
            latency += self.jitter()
        if not idle or self._in_flight is not None:
            self._launch(src, dst, wire, links, latency, bandwidth, on_arrival, token, via)
            return
        flow = Flow(links, wire, bandwidth, on_arrival, token, src, dst)
        owner = self._owner
        for d in links:
            load[d] = 1
            owner[d] = flow
        # _reserve, inline: every message of a ring or tree comes this way.
        flow.reserved = True
        flow.start = flow.updated = self.env._now + latency
        flow.rate = bandwidth
        flow.finish = self._ending.add(flow, latency + wire / bandwidth)

    def _launch(self, src: int, dst: int | tuple[int, ...], nbytes: int,
                links: tuple[int, ...], latency: float, bandwidth: float,
                on_arrival: Arrival, token: Any, via: Via | MulticastVia | None = None
                ) -> None:
        env = self.env
        if nbytes <= 0:
            # Through an event even at zero latency: a program spinning on empty messages
            # then runs through the event loop, whose limits stop it.
            if self._in_flight is None:
                self._arrive_after(latency, on_arrival, token)
                return
            empty = Flow(links, 0, math.inf, on_arrival, token, src, dst)
            empty.via = via
            empty.latency = self.route(src, dst, via)[1]
            empty.start = env._now + latency
            self._empty_in_flight[empty] = None
            self._arrive_after(latency, self._empty_arrived, empty)
            return
        flow = Flow(links, nbytes, bandwidth, on_arrival, token, src, dst)
        flow.via = via
        if self._in_flight is not None:
            flow.latency = self.route(src, dst, via)[1]
            self._in_flight[flow] = None
        load = self._load
        for d in links:
            if load[d]:
                break
        else:
            if self.fast:
                owner = self._owner
                for d in links:
                    load[d] = 1
                    owner[d] = flow
                self._reserve(flow, env._now + latency, latency + nbytes / bandwidth)
                return
        for d in links:
            load[d] += 1
        if latency > 0:
            self._starting.add(flow, latency)
        else:
            self._activate(flow)

    def _empty_arrived(self, empty: Flow) -> None:
        if empty.start > self.env._now:  # moved to a route of more latency meanwhile
            schedule_at(self.env, empty.start, self._empty_moved, empty, NORMAL)
            return
        del self._empty_in_flight[empty]
        empty.on_arrival(empty.token)

    def _empty_moved(self, event: Event) -> None:
        self._empty_arrived(event._value)

    def _reserve(self, flow: Flow, start: float, delay: float) -> None:
        """Give ``flow`` (alone on its links, drains from ``start`` at its bottleneck) a
        completion ``delay`` seconds from now, shared with the flows ending then."""
        flow.reserved = True
        flow.start = flow.updated = start
        flow.rate = flow.bottleneck
        flow.finish = self._ending.add(flow, delay)

    def _start(self, flows: list[Flow]) -> None:
        for flow in flows:
            self._activate(flow)

    def _unreserve(self, flow: Flow, now: float) -> None:
        """Turn a reservation into the state the general regime would hold at ``now``."""
        flow.reserved = False
        self._ending.remove(flow)
        owner = self._owner
        for d in flow.links:
            owner[d] = None
        if flow.start <= now:
            on_link = self._on_link
            for d in flow.links:
                on_link[d][flow] = None
            self._general.add(flow, flow.remaining, flow.rate, flow.start, flow.finish)
            return
        self._starting.add_at(flow, flow.start)

    def _activate(self, flow: Flow) -> None:
        now = self.env._now
        on_link, owner = self._on_link, self._owner
        flow.updated = now
        group: Group | None = None
        general: Flow | None = None
        mixed = False
        for d in flow.links:
            reserved = owner[d]
            if reserved is not None:
                self._unreserve(reserved, now)
            flows = on_link[d]
            if not flows:
                continue
            first = next(iter(flows))
            if first.group is not None:
                if group is None:
                    group = first.group
                elif group is not first.group:
                    mixed = True
            elif len(flows) == 1 and (general is None or general is first):
                general = first
            else:
                mixed = True
        if group is None and general is None and not mixed and self.fast:
            for d in flow.links:
                owner[d] = flow
            self._reserve(flow, now, flow.remaining / flow.bottleneck)
            return
        if not mixed and self.fast and self.groups:
            if group is not None and general is None:
                if self._capacity[group.link] == flow.bottleneck and group.link in flow.links:
                    self._join(group, flow, now)
                    return
            elif group is None and general is not None and self._pair(general, flow, now):
                return
        self._go_general(flow, now)

    def _pair(self, other: Flow, flow: Flow, now: float) -> bool:
        """Form a group of ``other`` (alone on its links) and ``flow`` if they qualify."""
        if other.bottleneck != flow.bottleneck:
            return False
        on_link = self._on_link
        for d in other.links:
            if len(on_link[d]) != 1:
                return False
        capacity = self._capacity
        for d in flow.links:
            if capacity[d] == flow.bottleneck and d in other.links:
                break
        else:
            return False
        group = Group(d, capacity[d], now)
        group.push(other, self._general.take(other, now))
        self._join(group, flow, now)
        return True

    def _join(self, group: Group, flow: Flow, now: float) -> None:
        group.advance(now)
        group.push(flow, flow.remaining)
        on_link = self._on_link
        for d in flow.links:
            on_link[d][flow] = None
        # Woken once at the end of the instant, however many flows join it now.
        if group.event is not None:
            cancel(group.event)
            group.event = None
        self._waking[group] = None
        self._defer()

    def _wake(self, group: Group) -> None:
        """Schedule the group's next completion."""
        heap = group.heap
        delay = (heap[0][0] - group.virtual) * len(heap) / group.capacity
        if group.event is not None:
            cancel(group.event)
        event = group.event = Timeout(self.env, delay if delay > 0 else 0.0, group)
        event.callbacks.append(self._group_finish)

    def _group_finish(self, event: Timeout) -> None:
        group = event._value
        group.event = None
        heap = group.heap
        key = heap[0][0]
        group.virtual = key
        group.stamp = self.env._now
        on_link, load = self._on_link, self._load
        done = []
        while heap and heap[0][0] <= key:
            flow = heappop(heap)[2]
            flow.group = None
            for d in flow.links:
                del on_link[d][flow]
                load[d] -= 1
            done.append(flow)
            if self._in_flight is not None:
                del self._in_flight[flow]
        if heap:
            self._wake(group)
        for flow in handed_out(done):
            flow.on_arrival(flow.token)

    def _dissolve(self, group: Group, now: float) -> None:
        """Hand the group's members to the general regime (they keep their rates)."""
        group.advance(now)
        rate = group.capacity / len(group.heap)
        for key, _, flow in group.heap:
            flow.group = None
            self._general.add(flow, key - group.virtual, rate, now)
        group.heap = []
        if group.event is not None:
            cancel(group.event)
            group.event = None

    def _go_general(self, flow: Flow, now: float) -> None:
        on_link = self._on_link
        for d in flow.links:
            flows = on_link[d]
            if flows:
                first = next(iter(flows))
                if first.group is not None:
                    self._dissolve(first.group, now)
            flows[flow] = None
        self._general.add(flow, flow.remaining, 0.0, now)
        self._defer()

    # -- draining ------------------------------------------------------------------------
    def _finish(self, flows: list[Flow]) -> None:
        """Reserved flows' completions (nothing shared their links)."""
        owner, load, in_flight = self._owner, self._load, self._in_flight
        for flow in flows:
            if in_flight is not None:
                del in_flight[flow]
            for d in flow.links:
                owner[d] = None
                load[d] -= 1
        for flow in handed_out(flows):
            flow.on_arrival(flow.token)

    def _general_due(self, _event: Event) -> None:
        """The general regime's pending completion: deliver the flows that end now, then
        re-solve (this event runs after everything else at its instant)."""
        done = self._general.pop_due(self.env._now)
        on_link, load = self._on_link, self._load
        in_flight = self._in_flight
        for flow in done:
            for d in flow.links:
                del on_link[d][flow]
                load[d] -= 1
            if in_flight is not None:
                del in_flight[flow]
        settling = self._settling
        self._settling = True
        for flow in handed_out(done):
            flow.on_arrival(flow.token)
        if not settling:
            self._settle(_event)

    def _defer(self) -> None:
        """Re-solve once, after everything else at this instant."""
        if not self._settling:
            self._settling = True
            schedule_at(self.env, self.env._now, self._settle, priority=LATE)

    def _settle(self, _event: Event) -> None:
        self._settling = False
        waking, self._waking = self._waking, {}
        for group in waking:
            if group.heap:
                self._wake(group)
        self._general.solve(self.env._now)

    # -- faults --------------------------------------------------------------------------
    def change_link(self, index: int, factor: float) -> None:
        """Set link ``index`` to ``factor`` times its nominal bandwidth, both directions,
        from now on (needs :meth:`track_flows`); see
        :func:`simcoll.network.rerouting.change_link`.

        Raises:
            LinkFailureError: no route around the failed links exists for some flows;
                names the link and those messages.
        """
        change_link(self, index, factor)
