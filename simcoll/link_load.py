"""Load on each directed link over time, worked out from a traced run's messages.

A trace records each message's sender, receiver, size and span, and the instant its bytes
began to move (after its latency, or behind the message ahead of it on its connection),
not the rates the network model gave it moment by moment. Here each message is taken to
move its wire bytes (the payload, or a protocol's framing of it: what the links carry and
``Result.link_bytes`` counts) at one average rate, ``wire_bytes / (end - moving)``, from
that instant to its arrival, on every directed link of its route. That is exact for a
message alone on its links (the flow model drains it at one rate), and an approximation
under contention (the flow model re-shares bandwidth whenever a flow starts or ends).
Each message is drawn on the links the network handed it to (``TraceEvent.links``:
around failed links, a multicast's tree once), so a link's rate integrates to exactly
the bytes it carried, except for a message in flight when a link on its route failed:
it is drawn on its first route, where the network moved its remaining bytes around.

Used by the Chrome export's counter tracks and by ``simcoll.plot.link_utilization``.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from simcoll.checks import shown
from simcoll.errors import InvalidInputError
from simcoll.inputs import check_topology
from simcoll.result import RunResult, traced_events
from simcoll.topology.graph import Topology
from simcoll.topology.io import topology_hash

__all__ = ["LinkLoad", "link_loads", "drawn_loads", "warn_where_drawn_differs", "rate_steps",
           "binned_bytes", "check_ran_on"]


@dataclass(frozen=True)
class LinkLoad:
    """The messages that crossed one directed link.

    Attributes:
        link: ``(from_device, to_device)``.
        bandwidth: the link's bandwidth in bytes/s (one direction).
        starts, ends: each message's transfer, from when its bytes began to move to its
            arrival, in seconds.
        rates: each message's average rate over its transfer, bytes/s.
    """

    link: tuple[str, str]
    bandwidth: float
    starts: np.ndarray
    ends: np.ndarray
    rates: np.ndarray

    @property
    def name(self) -> str:
        """``"gpu0->switch"``, as ``Result.to_dict`` writes link keys."""
        return f"{self.link[0]}->{self.link[1]}"


def check_ran_on(result: RunResult, topology: Topology) -> None:
    """Refuse a result without a trace, or a topology other than the one it ran on."""
    traced_events(result)
    check_topology(topology)
    # Past the GPUs a result counts every other endpoint: hosts, then in-network devices.
    others = len(result.host_bytes_sent)
    if (topology.name != result.topology or topology.nranks != result.nranks
            or topology.endpoints != topology.nranks + others):
        raise InvalidInputError(
            f"topology {topology.name!r} ({topology.nranks} ranks, "
            f"{topology.endpoints - topology.nranks} other endpoints) is not the one the "
            f"result ran on ({result.topology!r}, {result.nranks} ranks, {others} other "
            f"endpoints); pass that topology")
    if result.topology_hash not in (None, topology_hash(topology)):
        raise InvalidInputError(
            f"topology {topology.name!r} has the name and shape of the one the result ran "
            f"on but other devices or links (bandwidths, latencies); pass that topology")


def link_loads(result: RunResult, topology: Topology) -> list[LinkLoad]:
    """Every directed link that carried bytes, with the messages that crossed it.

    Args:
        result: a traced result (``simulate(..., trace=True)``).
        topology: the topology it ran on (routes come from ``topology.route``, through
            the devices a message was bound to pass).

    Returns:
        One :class:`LinkLoad` per directed link with traffic, in the topology's link order.

    Raises:
        InvalidInputError: the result has no trace, or ran on another topology.

    Warns:
        UserWarning: where the bytes drawn on a link differ from those the network
            counted on it (``Result.link_bytes``): a link failed under messages in
            flight, or before their bytes moved, and each is drawn on the route it was
            handed to, not on the detour that carried its bytes. The warning names the
            links, most off first.
    """
    loads = drawn_loads(result, topology)
    warn_where_drawn_differs(loads, result.link_bytes)
    return loads


def drawn_loads(result: RunResult, topology: Topology) -> list[LinkLoad]:
    """:func:`link_loads` without its warning (for callers that give it themselves)."""
    check_ran_on(result, topology)
    spans: dict[int, list[tuple[float, float, float]]] = {}
    for e in result.trace or ():
        if e.kind != "message" or e.peer is None:
            continue
        start = e.start if e.moving is None else e.moving
        wire = e.nbytes if e.wire_bytes is None else e.wire_bytes
        # An empty message, or one that took no time, moved no bytes over any span.
        if wire == 0 or e.end <= start:
            continue
        rate = wire / (e.end - start)
        route = e.links if e.links is not None else \
            topology.route(e.rank, e.peer, via=e.via).links
        for index in route:
            spans.setdefault(index, []).append((start, e.end, rate))
    bandwidths = topology.directed_bandwidths()
    loads = []
    for index in sorted(spans):
        s, t, r = (np.array(column, dtype=float) for column in zip(*spans[index]))
        loads.append(LinkLoad(topology.directed_link(index), bandwidths[index], s, t, r))
    return loads


def warn_where_drawn_differs(loads: list[LinkLoad],
                             counted: dict[tuple[str, str], int]) -> None:
    """Warn where the bytes drawn on links are not what the network ``counted`` on them
    (``Result.link_bytes``), naming the links most off first, at the first line outside
    simcoll that led here."""
    drawn = {load.link: float(np.sum(load.rates * (load.ends - load.starts)))
             for load in loads}
    off = sorted(((abs(drawn.get(link, 0.0) - counted.get(link, 0)), link)
                  for link in drawn.keys() | {k for k, v in counted.items() if v}
                  if not np.isclose(drawn.get(link, 0.0), counted.get(link, 0),
                                    rtol=1e-6, atol=1.0)), reverse=True)
    if off:
        shown = ", ".join(f"{u}->{v} ({drawn.get((u, v), 0.0):.0f} drawn, "
                          f"{counted.get((u, v), 0)} counted)" for _, (u, v) in off[:4])
        warnings.warn(f"{len(off)} directed link(s) drawn with other bytes than the network "
                      f"counted on them: {shown}{', ...' if len(off) > 4 else ''}; a link "
                      f"failed under messages in flight, which are drawn on the route they "
                      f"were handed to, not on the detour that carried their bytes",
                      stacklevel=_outside_simcoll())


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep   # simcoll/


def _outside_simcoll() -> int:
    """The ``stacklevel`` of the first caller outside simcoll, for a warning raised by
    the function that calls this."""
    frame, level = sys._getframe(2), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def rate_steps(load: LinkLoad) -> tuple[np.ndarray, np.ndarray]:
    """The link's total rate as a step function.

    Returns:
        ``(times, rates)``: from ``times[i]`` until ``times[i+1]`` the link carries
        ``rates[i]`` bytes/s. The times are every start and end, sorted and distinct; the
        last rate is 0. Each rate is summed afresh from the messages in flight (no running
        sum), so it is never negative and exactly 0 when none is.
    """
    times = np.unique(np.concatenate([load.starts, load.ends]))
    rates = np.empty(times.size)
    if not times.size:   # a load of no messages: no steps
        return times, rates
    # Blocks of times keep the (times x messages) mask near a million cells.
    step = max(1, 1_000_000 // load.rates.size)
    for i in range(0, times.size, step):
        t = times[i:i + step, None]
        active = (load.starts[None, :] <= t) & (load.ends[None, :] > t)
        rates[i:i + step] = np.where(active, load.rates[None, :], 0.0).sum(axis=1)
    return times, rates


def binned_bytes(load: LinkLoad, edges: np.ndarray) -> np.ndarray:
    """Bytes the link carried in each time bin ``[edges[i], edges[i+1])``.

    Each message contributes its rate times its overlap with the bin, so the bins sum to
    every byte whose span lies inside ``edges[0]..edges[-1]``. The bytes carried up to a
    time are piecewise linear in it, with a corner at every start and end: the curve is
    summed at the corners and read at the edges (memory in messages plus bins, not
    their product).

    Raises:
        InvalidInputError: ``edges`` not a 1-D array of finite, increasing times (one
            edge or none are taken: they make no bins).
    """
    refused = InvalidInputError(f"binned_bytes: edges must be finite times in increasing "
                                f"order, in one row; got {shown(edges)}")
    try:
        given = np.asarray(edges)
    except (TypeError, ValueError):   # ragged rows
        raise refused from None
    if given.dtype.kind not in "iuf":   # not numbers: strings, booleans, objects
        raise refused
    edges = given.astype(float)
    if edges.ndim != 1 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
        raise refused
    if not load.rates.size:   # a load of no messages carried nothing
        return np.zeros(max(edges.size - 1, 0))
    corners = np.concatenate([load.starts, load.ends])
    order = np.argsort(corners, kind="stable")
    corners = corners[order]
    slope = np.cumsum(np.concatenate([load.rates, -load.rates])[order])
    carried = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(corners))])
    return np.diff(np.interp(edges, corners, carried))
