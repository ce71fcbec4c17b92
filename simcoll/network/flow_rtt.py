"""The "flow_rtt" network model: links shared in proportion to 1 / route latency.

The flow model (:mod:`simcoll.network.flow`) with one change: flows that compete for a
link share it in proportion to their *weights*, and a flow's weight is the inverse of
its route's latency (the sum of the latencies of the directed links it crosses). Rates
are weighted max-min fair (weighted progressive filling,
:mod:`simcoll.network.weighted`): on each link the share per unit weight is the capacity
left over the summed weight of its unfrozen flows, and the link where that share is least
freezes its flows at ``weight * share``. Two flows of route latencies 1 us and 3 us alone
on one link get 3/4 and 1/4 of it. A flow alone on its path still takes exactly
``sum(latency) + nbytes / min(bandwidth)``, and flows of equal route latencies share as in
the flow model. This is how TCP-like transports (Ethernet, RoCE without perfect
congestion control) share a bottleneck, short round trips getting more; credit-based
fabrics (NVLink, InfiniBand) are closer to the flow model's equal shares.

Source: SimGrid's CM02 model (Casanova & Marchal, LIP RR-2002-40), as implemented in
SimGrid's ``src/kernel/resource/models/network_cm02.cpp`` (``NetworkCm02Model::
communicate``: a flow's *sharing penalty* is its route's latency, the lmm solver gives it
a share proportional to 1 / penalty) and documented at
https://simgrid.org/doc/latest/Models.html. What differs from SimGrid:

* No ``weight_S`` term: LV08 (SimGrid's default, ``network/weight-S = 20537``) adds
  ``weight_S / bandwidth`` per link of the route to the penalty; CM02 (``weight-S = 0``)
  does not, and neither does this model. No latency or bandwidth correction factors
  (LV08's 13.01 and 0.97), no TCP window bound (``network/TCP-gamma``), no cross-traffic
  of acknowledgements on the reverse route (``network/crosstraffic``).
* Routes of zero latency are refused: their weight would be infinite (and so are those
  under ``SMALLEST_LATENCY``, 1e-300 s, whose weights summed over a link's flows could
  overflow to infinity, which no share can be computed from). SimGrid gives a
  flow whose route has zero latency a penalty of 1 (as if its route took one second);
  here the model, when it is built (before the run), raises
  :class:`~simcoll.errors.InvalidInputError` naming such a route and its links: give
  those links a latency, or use ``network="flow"``. (It checks the routes between the
  endpoints that links of zero latency join, the only ones that can be of zero latency,
  and again as each planned link failure would leave them. A route a program picks
  with ``via=``, and under ``routing="ecmp"`` a multicast's tree, whose legs may differ
  from those unicast routes, is known only when its message is sent: that send raises
  the error, which the run reports as the rank's
  :class:`~simcoll.errors.AlgorithmError`.)
* A multicast's weight is the inverse of the summed latency of every link of its tree.
* After a link fault moves a flow to another route, its weight follows the new route.

Cost. A flow alone on its links is reserved exactly as in the flow model (its rate is
its bottleneck whatever its weight), but flows behind one bottleneck link are not served
as a processor-sharing group (that regime assumes equal shares): every contended flow is
in the general regime, so each start or end among n contended flows costs a weighted
re-solve, O(n R) for routes of R links, instead of the group's O(log n). An incast of n
equal messages costs O(n^2) here against O(n log n) in the flow model.
"""

from __future__ import annotations

from collections.abc import Sequence

import simpy

from simcoll.errors import InvalidInputError, LinkFailureError
from simcoll.network.flow import FlowNetwork
from simcoll.topology.graph import MulticastVia, Topology, Via

__all__ = ["FlowRttNetwork", "SMALLEST_LATENCY"]

SMALLEST_LATENCY = 1e-300
"""The least route latency weighed (seconds): weights of 1 / latency stay below 1e300, so
a link's summed weights stay finite for any number of flows a run can hold."""


class FlowRttNetwork(FlowNetwork):
    """Weighted max-min sharing, a flow's weight the inverse of its route's latency; see
    the module docstring."""

    name = "flow_rtt"
    groups = False

    def __init__(self, env: simpy.Environment, topology: Topology, endpoints: int):
        """Raises:
            InvalidInputError: a route between two endpoints has latency 0 (or under
                ``SMALLEST_LATENCY``).
        """
        super().__init__(env, topology, endpoints)
        self._check_zero_latency_routes(endpoints)

    def _check_zero_latency_routes(self, endpoints: int) -> None:
        """Find every route of zero latency (or under ``SMALLEST_LATENCY``) now, before
        the run: such a route crosses only links under it, so its ends are joined by
        such links. Group the
        endpoints by the components that links of zero latency form and route each pair
        of a group (the routes are kept for the run; a pair that failed links leave
        without a route is the run's to report, if a message takes it)."""
        topo = self.topology
        parent: dict[str, str] = {}

        def root(name: str) -> str:
            while parent.setdefault(name, name) != name:
                parent[name] = parent[parent[name]]  # path halving
                name = parent[name]
            return name

        for link in topo.links:
            if link.latency < SMALLEST_LATENCY:
                parent[root(link.u)] = root(link.v)
        groups: dict[str, list[int]] = {}
        for address in range(endpoints):
            name = topo.endpoint_name(address)
            if name in parent:
                groups.setdefault(root(name), []).append(address)
        for members in groups.values():
            for src in members:
                for dst in members:
                    if src != dst and (src, dst) not in self._routes:
                        try:
                            self._route(src, dst)
                        except LinkFailureError:
                            continue

    def track_flows(self, planned: Sequence[tuple[float, int, float]] = ()) -> None:
        """As :meth:`FlowNetwork.track_flows`, and find now, before the run, every route
        of zero latency (or under ``SMALLEST_LATENCY``) that the links ``planned`` to fail
        would leave as the way around them, after each failure and each restore that
        leaves others failed.

        Raises:
            InvalidInputError: such a route; names it, its links and the failure.
        """
        super().track_flows(planned)
        failed: frozenset[int] = frozenset()
        seen: set[frozenset[int]] = set()
        # After each change, as each failure moves the flows crossing its link at once
        # (one restored at the same instant moves them all the same), and messages sent
        # after a restore take the routes around the links still failed.
        for at, index, factor in planned:
            failed = failed | {index} if factor == 0 else failed - {index}
            if not failed or failed in seen:
                continue
            seen.add(failed)
            self._failed, kept = failed, self._routes
            self._routes = {}
            try:
                self._check_zero_latency_routes(len(self.sent))
            except InvalidInputError as err:
                shown = ", ".join(repr((self.topology.links[i].u, self.topology.links[i].v))
                                  for i in sorted(failed))
                raise InvalidInputError(f"once link(s) {shown} have failed at t={at:.9g} s "
                                        f"(planned, whether or not the run lasts that "
                                        f"long), {err}") from None
            finally:
                self._failed, self._routes = frozenset(), kept

    def _penalties(self) -> list[float]:
        """Each directed link's latency: a flow's weight is 1 / their sum over its links."""
        return [link.latency for link in self.topology.links for _ in (0, 1)]

    def _route(self, src: int, dst: int | tuple[int, ...], via: Via | MulticastVia | None = None
               ) -> tuple[tuple[int, ...], float, float]:
        """The route as :meth:`Network._route` finds it, refused if it crosses links and
        its latency is zero (its weight would be infinite).

        Raises:
            InvalidInputError: the route's latency is zero; names it and its links.
        """
        entry = super()._route(src, dst, via)
        links, latency, _ = entry
        if links and latency < SMALLEST_LATENCY:
            del self._routes[(src, dst) if via is None else (src, dst, via)]
            topo = self.topology
            dsts = dst if isinstance(dst, tuple) else (dst,)
            shown = ", ".join(repr(topo.directed_link(d)) for d in links)
            said, least = ("0", "> 0") if latency <= 0 else (
                f"{latency:g} s, under {SMALLEST_LATENCY:g} s, whose weight could overflow",
                f"of at least {SMALLEST_LATENCY:g} s")
            raise InvalidInputError(
                f"network 'flow_rtt' weighs each flow by 1 / its route's latency, and the "
                f"{'multicast tree' if isinstance(dst, tuple) else 'route'} "
                f"{topo.endpoint_name(src)}->"
                f"{'+'.join(topo.endpoint_name(d) for d in dsts)} has latency {said} (links "
                f"{shown}); give these links a latency {least}, or use network='flow'")
        return entry
