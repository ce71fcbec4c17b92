"""The "flow" network model (the default): max-min fair sharing of directed links.

A message waits the summed latency of its route, then drains its bytes as a flow that
crosses every directed link of the route at once. Active flows share each link max-min
fairly (progressive filling, as in SimGrid's flow-level model without its TCP correction
factors): a flow alone on its path drains at the path's least bandwidth, so it takes
exactly ``sum(latency) + nbytes / min(bandwidth)``; k equal flows on one link get 1/k each.

How rates are kept up to date, and what it costs:

* Each directed link keeps the ordered set of flows draining across it.
* When a flow starts draining and every link on its route is idle, its rate is the route's
  bottleneck and nothing else changes: O(route length).
* Otherwise, and whenever a flow ends while other flows share one of its links, only the
  *component* of flows that share links with it, transitively, can change rate. That
  component is found by a graph search and re-solved by progressive filling: repeatedly
  take the link with the smallest fair share (remaining capacity / unfrozen flows), freeze
  its flows at that share, and subtract them from their other links. Cost
  O(F * R + I * L) for a component of F flows on L links with routes of R links, where I
  (the number of distinct bottleneck levels) is 1 in the common cases (incast, all-to-all
  on a switch).
* A flow whose rate did not change keeps its scheduled completion. A flow whose rate
  changed gets a new completion event; the stale one is recognised and ignored when it
  fires (SimPy events cannot be cancelled).
"""

from __future__ import annotations

from typing import Any

import simpy
from simpy.events import Timeout

from simcoll.network.base import Arrival, Network
from simcoll.topology.graph import Topology

__all__ = ["FlowNetwork"]


class _Flow:
    __slots__ = ("links", "remaining", "bottleneck", "rate", "updated", "event",
                 "on_arrival", "token")

    def __init__(self, links: tuple[int, ...], nbytes: float, bottleneck: float,
                 on_arrival: Arrival, token: Any):
        self.links = links
        self.remaining = nbytes
        self.bottleneck = bottleneck
        self.rate = 0.0
        self.updated = 0.0
        self.event: Timeout | None = None
        self.on_arrival = on_arrival
        self.token = token


class FlowNetwork(Network):
    """Max-min fair flow-level model; see the module docstring for the algorithm."""

    name = "flow"

    def __init__(self, env: simpy.Environment, topology: Topology, endpoints: int):
        super().__init__(env, topology, endpoints)
        self._capacity = topology.directed_bandwidths()
        self._on_link: list[dict[_Flow, None]] = [{} for _ in self._capacity]

    def transfer(self, src: int, dst: int, nbytes: int, on_arrival: Arrival,
                 token: Any) -> None:
        entry = self._routes.get((src, dst)) or self._route(src, dst)
        links, latency, bandwidth = entry
        self._count(src, dst, nbytes, links)
        flow = _Flow(links, nbytes, bandwidth, on_arrival, token)
        if latency > 0:
            Timeout(self.env, latency, flow).callbacks.append(self._start)
        else:
            self._activate(flow)

    def _start(self, event: Timeout) -> None:
        self._activate(event._value)

    def _activate(self, flow: _Flow) -> None:
        if flow.remaining <= 0:
            flow.on_arrival(flow.token)
            return
        on_link = self._on_link
        shared = False
        for d in flow.links:
            flows = on_link[d]
            if flows:
                shared = True
            flows[flow] = None
        flow.updated = self.env._now
        if shared:
            self._rebalance((flow,))
        else:
            flow.rate = flow.bottleneck
            self._schedule(flow)

    def _schedule(self, flow: _Flow) -> None:
        remaining = flow.remaining
        delay = remaining / flow.rate if remaining > 0 else 0.0
        event = flow.event = Timeout(self.env, delay, flow)
        event.callbacks.append(self._finish)

    def _finish(self, event: Timeout) -> None:
        flow = event._value
        if flow.event is not event:
            return
        on_link = self._on_link
        neighbours: list[_Flow] = []
        for d in flow.links:
            flows = on_link[d]
            del flows[flow]
            if flows:
                neighbours.extend(flows)
        if neighbours:
            self._rebalance(neighbours)
        flow.on_arrival(flow.token)

    def _rebalance(self, seeds) -> None:
        """Re-solve max-min rates for the component of flows that share links with seeds."""
        now = self.env._now
        on_link = self._on_link
        component: dict[_Flow, None] = {}
        links: dict[int, None] = {}
        stack = list(seeds)
        while stack:
            flow = stack.pop()
            if flow in component:
                continue
            component[flow] = None
            for d in flow.links:
                if d not in links:
                    links[d] = None
                    stack.extend(g for g in on_link[d] if g not in component)
        for flow in component:
            flow.remaining -= flow.rate * (now - flow.updated)
            flow.updated = now
        capacity = {d: self._capacity[d] for d in links}
        unfrozen = {d: len(on_link[d]) for d in links}
        rates: dict[_Flow, float] = {}
        while len(rates) < len(component):
            bottleneck, share = -1, float("inf")
            for d, count in unfrozen.items():
                if count and capacity[d] < share * count:
                    bottleneck, share = d, capacity[d] / count
            share = max(share, 0.0)
            for flow in on_link[bottleneck]:
                if flow not in rates:
                    rates[flow] = share
                    for d in flow.links:
                        capacity[d] -= share
                        unfrozen[d] -= 1
        for flow, rate in rates.items():
            if rate != flow.rate or flow.event is None:
                flow.rate = rate
                self._schedule(flow)
