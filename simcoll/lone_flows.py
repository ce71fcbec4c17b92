"""Runs in which no message ever shares a link, timed over arrays instead of events.

In a ring every rank sends to its right neighbour only, one message at a time (a rank's
next send waits for its previous ``sendrecv``; the uneven rings send no message for an
empty block). When no two of the p routes rank ->
rank + 1 cross a directed link, no two messages are ever on one link at once, and the
flow model times each message as it times any flow alone on its links: it arrives
``latency + bytes / bottleneck`` after it was sent, whatever the other ranks do. The
analytical model times every message that way on any route. The timing of such an
algorithm's run is then a recurrence over its steps, one numpy operation per step for every
rank at once, instead of p messages through SimPy, the communicator and the network:

* a ``sendrecv`` of step s: rank r's message arrives at ``a_r = t_r + (lat_r + b_r /
  bw_r)`` and rank r goes on at ``t_r = max(a_r, a_{r-1})``, when its own message has
  arrived and its left neighbour's has;
* a reduction: ``end_r = max(t_r, free_r) + b / reduce_bandwidth_r``, one at a time per
  GPU, ready at ``t_r + (end_r - t_r)``;
* waiting for a reduction: ``t_r = max(t_r, ready_r)``;
* an uneven ring's step: as a ``sendrecv``, without the message of an empty block
  (rank r goes on at the latest of ``t_r`` and the arrivals it waits for).

Each line does the floating-point operations the event-driven run does, in its order
(``network.flow`` reserves a lone flow at ``now + (latency + wire / bandwidth)``,
``Runtime.reduce_delay`` returns ``end - now``), so times are equal bit for bit, and so
are the counters (every message's bytes on its sender, its receiver and each link of its
route). ``tests/test_lone_flows.py`` compares every field of the result with the
event-driven run on random machines.

In data mode the algorithm's ``outputs`` (registered with the timeline) compute what the
rank programs return, block by block, with the same operations in the same order
(:mod:`simcoll.algorithms.ring_outputs`), so the outputs are the same bit for bit too.

It runs only where it is exact and nothing is lost by skipping the events: runs of an
algorithm registered with a ``timeline`` (the rings, and the hierarchical all-reduce on
one node; in data mode, with ``outputs`` too), without trace, faults or jitter, on the
analytical model or on the flow models' lone-flow path, with every message non-empty
and each message taking time, and within ``until`` and ``max_events``; anywhere else
``simulate`` runs the rank programs. Set ``simcoll.lone_flows.enabled = False`` to always
run them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from simcoll.runtime import TracingRuntime

if TYPE_CHECKING:
    from simcoll.execution import Execution

__all__ = ["Lanes", "NotLone", "enabled", "time_without_events"]

enabled = True
"""Time eligible runs over arrays (``False``: always run the rank programs)."""

EVENTS_PER_MESSAGE = 4
"""At most this many events per message (its arrival, a reduction, an instant one) in
the event-driven run of a timeline algorithm, besides :data:`EVENTS_PER_RANK`: runs whose
``max_events`` could be reached are left to it, so that they stop as they would there."""

EVENTS_PER_RANK = 2
"""Events of each rank's program besides its messages' (its start and its end)."""


class NotLone(Exception):
    """A step the array recurrence does not time exactly (an empty message), or a run it
    does not cover (a hierarchical all_reduce across nodes)."""


class Lanes:
    """Every rank's clock and reduction engine, advanced one ring step at a time.

    Attributes:
        nodes: the node of each rank (the topology's ``node``, as ``comm.node_of`` gives
            it), for a timeline that is exact on one node only.
        clock: the instant each rank's program has reached (seconds).
        sent: payload bytes each rank has sent to its right neighbour.
        messages: messages sent so far.
    """

    def __init__(self, latency: NDArray[np.float64], bandwidth: NDArray[np.float64],
                 reduce_bandwidth: NDArray[np.float64], itemsize: int,
                 nodes: tuple[int, ...]):
        self.p = len(latency)
        self.itemsize = itemsize
        self.nodes = nodes
        self._latency = latency
        self._bandwidth = bandwidth
        self._reduce_bandwidth = reduce_bandwidth
        self._reduce_free = np.zeros(self.p)
        self.clock = np.zeros(self.p)
        self.sent = np.zeros(self.p, dtype=np.int64)
        self.messages = 0

    def sendrecv(self, counts: NDArray[np.int64]) -> None:
        """Rank r sends ``counts[r]`` elements to rank r + 1 and receives from r - 1.

        Raises:
            NotLone: a message is empty (the event-driven run delivers those apart).
        """
        if counts.min() <= 0:
            raise NotLone("an empty message")
        arrival = self._send(counts)
        self.clock = np.maximum(arrival, np.roll(arrival, 1))
        self.messages += self.p

    def exchange(self, counts: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Rank r sends ``counts[r]`` elements to rank r + 1 and receives from r - 1, as
        ``uneven_exchange.exchange`` does: an empty block is no message (a rank then only
        receives, only sends, or goes on at once). Returns which ranks received."""
        sending = counts > 0
        arrival = np.where(sending, self._send(counts), -np.inf)
        received = np.roll(sending, 1)
        self.clock = np.maximum(self.clock, np.maximum(arrival, np.roll(arrival, 1)))
        self.messages += int(sending.sum())
        return received

    def _send(self, counts: NDArray[np.int64]) -> NDArray[np.float64]:
        """Each rank's message of ``counts`` elements, sent now: its arrival instants."""
        nbytes = counts * self.itemsize
        self.sent += nbytes
        return self.clock + (self._latency + nbytes / self._bandwidth)

    def reduce(self, counts: NDArray[np.int64],
               where: NDArray[np.bool_] | None = None) -> NDArray[np.float64]:
        """Start a reduction of ``counts[r]`` elements on every rank now (on the ranks of
        ``where`` only, if given); return the instants they are ready (now where none
        starts). An infinitely fast engine is ready at once (its ``free`` never passes
        the clock, which only grows)."""
        now = self.clock
        end = np.maximum(now, self._reduce_free) + counts * self.itemsize / self._reduce_bandwidth
        if where is not None:
            end = np.where(where, end, self._reduce_free)
            self._reduce_free = end
            return np.where(where, now + (end - now), now)
        self._reduce_free = end
        return now + (end - now)

    def wait(self, ready: NDArray[np.float64]) -> None:
        """Every rank waits for its event of ``ready``."""
        self.clock = np.maximum(self.clock, ready)


Timeline = Callable[..., None]
"""``timeline(lanes, count, **params)``: an algorithm's data-free run as steps of
:class:`Lanes`, for buffers of ``count`` elements per rank (a v-collective's also takes
``splits``, as its program does)."""


def time_without_events(run: Execution, timeline: Timeline | None, count: int,
                        itemsize: int, params: dict[str, Any]) -> bool:
    """Time ``run`` (nothing started on it yet) with ``timeline`` if that is exact (see
    the module docstring): set its counters, rank times and end, and return True; else
    leave it untouched and return False."""
    topology, network = run.topology, run.network
    p = topology.nranks
    if (not enabled or timeline is None or p < 2 or run.faulty
            or isinstance(run.runtime, TracingRuntime)):
        return False
    routes = [network.route(r, (r + 1) % p) for r in range(p)]
    if not network.times_alone([links for links, _, _ in routes]):
        return False
    latency = np.array([route[1] for route in routes])
    bandwidth = np.array([route[2] for route in routes])
    if not np.all((latency > 0) | (bandwidth < np.inf)):
        return False
    reduce_bandwidth = np.array(run.runtime.reduce_bandwidth[:p], dtype=np.float64)
    lanes = Lanes(latency, bandwidth, reduce_bandwidth, itemsize, run.runtime.nodes[:p])
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # times past the float range
            timeline(lanes, count, **params)                # go to the event loop, below
    except NotLone:
        return False
    end = float(lanes.clock.max())
    if not end < run.until or (EVENTS_PER_MESSAGE * lanes.messages
                            + EVENTS_PER_RANK * p > run.max_events):
        return False
    sent = lanes.sent.tolist()
    for r, (links, _, _) in enumerate(routes):
        network.sent[r] += sent[r]
        network.received[(r + 1) % p] += sent[r]
        for d in links:
            network.link_bytes[d] += sent[r]
    network.messages += lanes.messages
    run.rank_times[:] = lanes.clock
    run.end = end
    return True
