"""Link faults in the flow model: a link slowed down or failed in the middle of a run.

Every flow crossing the link is first brought to the general regime exactly as of now;
a degraded link is re-solved with its new capacity, and the flows of a failed one move to
the shortest route around the failed links.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcoll.errors import InvalidInputError, LinkFailureError
from simcoll.network.regimes import Flow

if TYPE_CHECKING:
    from simcoll.network.flow import FlowNetwork

__all__ = ["change_link"]


def change_link(net: FlowNetwork, index: int, factor: float) -> None:
    """Set link ``index`` of ``net`` to ``factor`` times its nominal bandwidth, both
    directions, from now on (needs :meth:`FlowNetwork.track_flows`).

    Every flow crossing the link is first brought to the general regime (its
    reservation or processor-sharing group undone, exactly as of now). A degraded link
    is then re-solved with its new capacity; a failed link given a ``factor`` above 0
    comes back at that capacity for messages sent from now on (flows already moved
    around it stay on their routes). A failed one (``factor == 0``) moves each
    of its flows to the shortest route around the failed links, from the failure on:
    the bytes it has not yet sent cross the new route (and are counted there) as if the
    message had been sent that way, so they wait out the new route's extra latency: its
    latency less the most latency the message has met so far (its first route's, or a
    longer one it was moved to before), if more. A message still in its latency phase
    starts that much later (where the new route has more latency, it arrives as one sent
    that way from the start), one draining pauses that long first, an empty one arrives
    that much later; a route of less latency gives no time back. A flow whose last byte
    is across (less than half a byte left) stays and arrives as it would have.

    Raises:
        LinkFailureError: no route around the failed links exists for some flows;
            names the link and those messages.
        InvalidInputError: the network refuses the route around them for a flow
            (``flow_rtt``: a route of zero latency, which only a flow bound ``via``
            devices can meet here, the others' are checked before the run); names the
            link, the message and the network's reason.
    """
    if net._in_flight is None:
        raise RuntimeError("change_link needs track_flows() before the run starts")
    now = net.env._now
    directed = (2 * index, 2 * index + 1)
    affected = [f for f in net._in_flight if directed[0] in f.links
                or directed[1] in f.links]
    for flow in affected:
        if flow.reserved:
            net._unreserve(flow, now)
        if flow.group is not None:
            net._dissolve(flow.group, now)
    net._routes.clear()
    if factor > 0:
        net._failed = net._failed - {index}
        for d in directed:
            net._capacity[d] = net.topology.bandwidth_of(d) * factor
            net._general.set_capacity(d, net._capacity[d])
        for flow in affected:
            flow.bottleneck = min(net._capacity[d] for d in flow.links)
    else:
        net._failed = net._failed | {index}
        lost, moves = [], []
        for flow in affected:
            if flow.slot >= 0 and round(net._general.left(flow, now)) == 0:
                continue  # its last byte is across: it arrives as it would have
            try:
                moves.append((flow, net._route(flow.src, flow.dst, flow.via)))
            except LinkFailureError:  # no route around the failed links
                lost.append(flow)
            except InvalidInputError as err:  # a route the network refuses (flow_rtt's)
                raise _refused(net, directed[0], now, flow, err) from None
        for empty in net._empty_in_flight:  # in its latency phase: nothing to move
            if directed[0] in empty.links or directed[1] in empty.links:
                try:
                    empty.links, latency, _ = net._route(empty.src, empty.dst, empty.via)
                    empty.start += _extra_latency(empty, latency)
                except LinkFailureError:
                    lost.append(empty)
                except InvalidInputError as err:
                    raise _refused(net, directed[0], now, empty, err) from None
        # Every moved flow leaves its old links before any starts on its new ones: one
        # started first would otherwise share links with one not yet moved (and might
        # group with it, in a regime the move does not undo).
        lifted = [(flow, route, _lift(net, flow, now)) for flow, route in moves]
        for flow, (links, latency, _), draining in lifted:
            _place(net, flow, links, draining, _extra_latency(flow, latency))
        if lost:
            u, v = net.topology.directed_link(directed[0])
            shown = ", ".join(f"{_describe(net, f)} ({_left(net, f, now):.0f} bytes left)"
                              for f in lost[:16])
            raise LinkFailureError(
                f"link ({u!r}, {v!r}) failed at t={now:.9g} s and no route goes around "
                f"it for {len(lost)} message(s) in flight: {shown}", (u, v),
                [(f.src, f.dst) for f in lost])
    net._defer()

def _describe(net: FlowNetwork, flow: Flow) -> str:
    """``gpu0->gpu1`` (``gpu0->gpu1+gpu2`` for a multicast)."""
    name = net.topology.endpoint_name
    dsts = flow.dst if isinstance(flow.dst, tuple) else (flow.dst,)
    return f"{name(flow.src)}->{'+'.join(name(d) for d in dsts)}"

def _refused(net: FlowNetwork, directed: int, now: float, flow: Flow,
             err: InvalidInputError) -> InvalidInputError:
    """The error for a flow in flight that a failure of ``directed`` would move onto a
    route the network refuses: names the link, the instant, the message and why."""
    u, v = net.topology.directed_link(directed)
    return InvalidInputError(f"link ({u!r}, {v!r}) failed at t={now:.9g} s and the message "
                             f"{_describe(net, flow)} in flight{_bound(flow)} moves around "
                             f"it: {err}")


def _bound(flow: Flow) -> str:
    """`` (bound through 'nic0')`` for a flow sent ``via`` devices, else nothing."""
    if flow.via is None:
        return ""
    vias = flow.via if isinstance(flow.dst, tuple) else (flow.via,)
    shown = "; ".join(repr(v) for v in vias if v is not None)
    return f" (bound through {shown})" if shown else ""


def _left(net: FlowNetwork, flow: Flow, now: float) -> float:
    """Bytes ``flow`` (general, or in its latency phase) has still to send at ``now``."""
    if flow.slot >= 0:
        return net._general.left(flow, now)
    return flow.remaining

def _lift(net: FlowNetwork, flow: Flow, now: float) -> bool:
    """Take ``flow`` (general, or in its latency phase) off its links as of ``now``, its
    unsent bytes uncounted there; return whether it was draining."""
    on_link, load, counted = net._on_link, net._load, net.link_bytes
    draining = flow.slot >= 0
    if draining:
        level = net._general.level(flow)
        flow.remaining = net._general.take(flow, now)
        flow.updated = now
        net._general.changed(level)
    left = round(flow.remaining)
    for d in flow.links:
        load[d] -= 1
        counted[d] -= left
        if draining:
            del on_link[d][flow]
    return draining


def _extra_latency(flow: Flow, latency: float) -> float:
    """How much more latency than it has met so far ``flow`` meets on a new route of
    ``latency`` (0 if no more); a route of less latency leaves its timing (and what it
    has met) as it was, so a move back does not charge the difference again."""
    extra = max(latency - flow.latency, 0.0)
    flow.latency = max(flow.latency, latency)
    return extra


def _place(net: FlowNetwork, flow: Flow, links: tuple[int, ...], draining: bool,
           extra: float) -> None:
    """Send the rest of a lifted ``flow`` along ``links`` from now on, ``extra``
    seconds later than it would have: a draining flow pauses that long, one in its
    latency phase (waiting to start) starts that much later."""
    load, counted = net._load, net.link_bytes
    left = round(flow.remaining)
    flow.links = links
    flow.bottleneck = min(net._capacity[d] for d in links)
    for d in links:
        load[d] += 1
        counted[d] += left
    if not extra:
        if draining:
            net._activate(flow)
    elif draining:
        net._starting.add(flow, extra)
    else:
        assert flow.batch is not None
        when = flow.batch.when
        net._starting.remove(flow)
        net._starting.add_at(flow, when + extra)
