"""The flow model's general regime: flows kept in arrays, one pending completion for all.

Every general flow has a row: its route (padded), its rate, the bytes it had left at its
last update and when that was, and its finishing instant. A single event is pending, at
the earliest finishing instant; when rates change only that event is moved (the old one
cancelled: it stays in SimPy's queue but never fires), so a re-solve costs one queue
entry however many flows changed rate.

Re-solving starts from the lowest level that can have changed (:attr:`GeneralFlows.floor`).
In progressive filling a flow frozen below level x is frozen by links that fill below x,
and a flow leaving the network only lowers the load of its own links, which do not fill
before its rate r: every flow slower than r keeps its rate, and the flows at r or faster
are re-solved on what the slower ones leave of each link. Flows arriving, links changing
capacity and groups dissolving re-solve everything (floor 0).

Weighted sharing (``penalty`` given, the ``"flow_rtt"`` model): a flow's weight is the
inverse of the summed penalty of its links, and rates are re-solved by weighted
progressive filling (:mod:`simcoll.network.weighted`). The floor is then a level (rate
per unit weight), not a rate, and the argument above holds for levels unchanged.

Flows on one route are solved once (from :data:`GROUP_FROM` flows in a re-solve). Many
general flows often cross exactly the same links (the slices in flight of one NCCL
connection, channels whose paths coincide), and max-min fairness, weighted or not, gives
flows with the same links the same rate (per unit weight; flows on one route have one
weight): progressive filling freezes every unfrozen flow of a link in the same pass.
Each row keeps an id of its route (given when the flow joins: a route only changes when
a link fault moves the flow, which takes it out and adds it back), the re-solve groups
the flows it solves by route id, solves one row per route counted as many times as it
occurs (the ``multiplicity`` of :func:`~simcoll.network.maxmin.fill` and its siblings),
and hands each flow its route's rate. The numpy solvers then compute the ungrouped
solve's numbers exactly (unweighted) or up to rounding of sums of weights, the pure
Python ones up to rounding (see :mod:`simcoll.network.maxmin`); a solve costs as much
as its distinct routes, not its flows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import simpy
from simpy.events import Event

from simcoll.engine import cancel, schedule_at
from simcoll.network import compiled
from simcoll.network.maxmin import CROSSOVER, TIE, fill, fill_arrays
from simcoll.network.regimes import Flow
from simcoll.network.weighted import fill_arrays_weighted, fill_weighted
from simcoll.sums import sum_in_order

__all__ = ["GROUP_FROM", "GeneralFlows"]

GROUP_FROM = 16
"""Flows in a re-solve from which they are grouped by route (measured:
``benchmarks/solvers.py``); ``sys.maxsize`` never groups."""


class GeneralFlows:
    """Flows in the general regime, and their single pending completion.

    Args:
        env: the simulation environment.
        capacity: bytes/s of each directed link.
        due: called by the pending completion event at its instant.
        vectorized_from: re-solve with :func:`~simcoll.network.maxmin.fill_arrays` from
            this many flows on, with :func:`~simcoll.network.maxmin.fill` below.
        penalty: if given, each directed link's sharing penalty (> 0 summed over any
            flow's links): a flow's weight is ``1 / sum(penalty[d] for d in its links)``
            and rates are weighted max-min fair; if None, plain max-min fair.
    """

    def __init__(self, env: simpy.Environment, capacity: list[float],
                 due: Callable[[Event], None], vectorized_from: int = CROSSOVER,
                 penalty: Sequence[float] | None = None):
        self.env = env
        self.vectorized_from = vectorized_from
        self._pad = len(capacity)
        self.capacity = np.array([*capacity, np.inf])
        self._marks = np.full(len(self.capacity), -1, dtype=np.int64)
        """Scratch for the compiled re-solve (:mod:`simcoll.network.resolve_kernel`)."""
        self._due = due
        self.flows: list[Flow | None] = []
        self.used = np.zeros(0, dtype=bool)
        self.links = np.zeros((0, 1), dtype=np.intp)
        self.rate = np.zeros(0)
        self.remaining = np.zeros(0)
        self.updated = np.zeros(0)
        self.finish = np.zeros(0)
        self._penalty = None if penalty is None else list(penalty)
        self.weight: np.ndarray | None = None if penalty is None else np.zeros(0)
        """Each row's weight (weighted sharing only; 1 in unused rows)."""
        self.route = np.zeros(0, dtype=np.intp)
        """Each row's route id: rows with one id have the same links."""
        self._route_ids: dict[tuple[int, ...], int] = {}
        self._free: list[int] = []
        self.count = 0
        self.floor = np.inf
        """Rates at or above this level must be re-solved (inf: nothing to do)."""
        self.pending: Event | None = None
        self.pending_at = np.inf

    # -- membership ----------------------------------------------------------------------
    def _grow(self, width: int) -> None:
        size = max(16, 2 * len(self.flows)) if not self._free else len(self.flows)
        width = max(width, self.links.shape[1])
        old = len(self.flows)
        links = np.full((size, width), self._pad, dtype=np.intp)
        links[:old, :self.links.shape[1]] = self.links
        self.links = links
        for name in ("rate", "remaining", "updated"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(size - old)]))
        self.finish = np.concatenate([self.finish, np.full(size - old, np.inf)])
        self.used = np.concatenate([self.used, np.zeros(size - old, dtype=bool)])
        self.route = np.concatenate([self.route, np.zeros(size - old, dtype=np.intp)])
        if self.weight is not None:
            self.weight = np.concatenate([self.weight, np.ones(size - old)])
        self.flows.extend([None] * (size - old))
        self._free.extend(range(size - 1, old - 1, -1))

    def add(self, flow: Flow, remaining: float, rate: float = 0.0, updated: float = 0.0,
            finish: float = np.inf) -> None:
        """Take ``flow`` in, with ``remaining`` bytes left at ``updated`` at ``rate``,
        finishing at ``finish`` (inf: not solved yet); everything is re-solved."""
        links = flow.links
        if not self._free or len(links) > self.links.shape[1]:
            self._grow(len(links))
        slot = self._free.pop()
        row = self.links[slot]
        row[:len(links)] = links
        row[len(links):] = self._pad
        self.rate[slot] = rate
        self.remaining[slot] = remaining
        self.updated[slot] = updated
        self.finish[slot] = finish
        self.used[slot] = True
        ids = self._route_ids
        self.route[slot] = ids.setdefault(links, len(ids))
        if self.weight is not None:
            penalty = self._penalty
            assert penalty is not None
            self.weight[slot] = 1.0 / sum_in_order(penalty[d] for d in links)
        self.flows[slot] = flow
        flow.slot = slot
        self.count += 1
        self.floor = 0.0

    def _release(self, slot: int) -> None:
        self.used[slot] = False
        self.finish[slot] = np.inf
        self.rate[slot] = 0.0
        self.flows[slot] = None
        self._free.append(slot)
        self.count -= 1

    def level(self, flow: Flow) -> float:
        """``flow``'s rate per unit weight (its rate, without weights)."""
        slot = flow.slot
        if self.weight is None:
            return float(self.rate[slot])
        return float(self.rate[slot] / self.weight[slot])

    def left(self, flow: Flow, now: float) -> float:
        """Bytes ``flow`` has still to send at ``now``."""
        slot = flow.slot
        return float(self.remaining[slot] - self.rate[slot] * (now - self.updated[slot]))

    def take(self, flow: Flow, now: float) -> float:
        """Remove ``flow`` (leaving the regime, not finished); return its bytes left and
        set ``flow.rate`` to its last rate. The caller says what to re-solve."""
        slot = flow.slot
        left = self.left(flow, now)
        flow.rate = float(self.rate[slot])
        at = self.finish[slot]
        self._release(slot)
        flow.slot = -1
        if at == self.pending_at:
            self.rearm()
        return left

    def pop_due(self, now: float) -> list[Flow]:
        """Remove and return the flows finishing at ``now`` (the pending event fired)."""
        self.pending = None
        self.pending_at = np.inf
        done = []
        level = self.rate if self.weight is None else self.rate / self.weight
        for slot in np.flatnonzero(self.finish <= now).tolist():
            flow = self.flows[slot]
            assert flow is not None
            self.floor = min(self.floor, float(level[slot]))
            self._release(slot)
            flow.slot = -1
            done.append(flow)
        return done

    def changed(self, level: float) -> None:
        """Rates at or above ``level`` may have changed."""
        if level < self.floor:
            self.floor = level

    def set_capacity(self, link: int, capacity: float) -> None:
        self.capacity[link] = capacity
        self.floor = 0.0

    # -- solving -------------------------------------------------------------------------
    def solve(self, now: float) -> None:
        """Re-solve the rates at or above :attr:`floor`, then move the pending completion
        to the earliest finishing instant."""
        floor, self.floor = self.floor, np.inf
        if floor == np.inf or not self.count:
            self.rearm()
            return
        resolve = compiled.solver("resolve")
        if resolve is not None:
            weight = self.weight  # unweighted: the rates stand in, unread
            self.rearm(resolve(self.links, self.used, self.rate, self.remaining, self.updated,
                               self.finish, self.route, self.capacity,
                               self.rate if weight is None else weight, weight is not None,
                               floor, now, TIE, GROUP_FROM, self.vectorized_from,
                               len(self._route_ids), self._marks))
            return
        used = self.used
        weight = self.weight
        if floor > 0:
            cutoff = floor * (1 - 4 * TIE)
            level = self.rate if weight is None else self.rate / weight
            free = used & (level >= cutoff)
            fixed = np.flatnonzero(used & (level < cutoff))
        else:
            free = used
            fixed = np.zeros(0, dtype=np.intp)
        chosen = np.flatnonzero(free)
        capacity = self.capacity
        if len(fixed):
            load = np.bincount(self.links[fixed].ravel(),
                               weights=np.repeat(self.rate[fixed], self.links.shape[1]),
                               minlength=len(capacity))
            capacity = capacity - load
        rates = (self._fill(chosen, capacity, len(chosen)) if len(chosen) < GROUP_FROM
                 else self._fill_grouped(chosen, capacity))
        old = self.rate[chosen]
        self.remaining[chosen] -= old * (now - self.updated[chosen])
        self.updated[chosen] = now
        moved = (rates != old) | (self.finish[chosen] == np.inf)
        slots = chosen[moved]
        new = rates[moved]
        self.rate[slots] = new
        left = self.remaining[slots]
        delay = np.zeros(len(slots))
        np.divide(left, new, out=delay, where=left > 0)
        self.finish[slots] = now + delay
        self.rearm()

    def _fill_grouped(self, chosen: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """:meth:`_fill` of one flow per route among ``chosen``, counted as many times as
        its route occurs; each flow gets its route's rate."""
        ids = self.route[chosen]
        if len(self._route_ids) <= 8 * len(ids):
            # Route ids are few: count them directly, no sort.
            occurs = np.bincount(ids)
            present = np.flatnonzero(occurs)
            if len(present) == len(ids):
                return self._fill(chosen, capacity, len(ids))
            one = np.empty(len(occurs), dtype=np.intp)
            one[ids] = chosen
            by_id = np.empty(len(occurs))
            by_id[present] = self._fill(one[present], capacity, len(ids), occurs[present])
            return by_id[ids]
        _, first, inverse, multiplicity = np.unique(ids, return_index=True,
                                                    return_inverse=True, return_counts=True)
        return self._fill(chosen[first], capacity, len(ids), multiplicity)[inverse]

    def _fill(self, slots: np.ndarray, capacity: np.ndarray, flows: int,
              multiplicity: np.ndarray | None = None) -> np.ndarray:
        """Rates of the flows in ``slots`` on links that can carry ``capacity``, each
        standing for ``multiplicity`` flows with its links (None: one), ``flows`` in
        all: the pure Python solver below :attr:`vectorized_from` flows (measured on
        grouped problems too), the numpy one from there on. The work counts toward
        loading the compiled re-solve (:data:`compiled.WARMUP`)."""
        weight = self.weight
        compiled.add_work(len(slots) * self.links.shape[1])
        if flows < self.vectorized_from:
            rows = self.flows
            routes = [flow.links for flow in (rows[s] for s in slots.tolist()) if flow]
            involved = sorted({d for route in routes for d in route})
            left = dict(zip(involved, capacity[involved].tolist()))
            many = None if multiplicity is None else multiplicity.tolist()
            return np.array(fill(routes, left, many) if weight is None
                            else fill_weighted(routes, left, weight[slots].tolist(), many))
        routes_matrix, capacity = self._compact(self.links[slots], capacity)
        return (fill_arrays(routes_matrix, capacity, multiplicity) if weight is None
                else fill_arrays_weighted(routes_matrix, capacity, weight[slots],
                                          multiplicity))

    def _compact(self, routes_matrix: np.ndarray, capacity: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The rows and capacities renumbered to the links the rows cross (in index
        order, the padding link last) where the machine has many more links, so that a
        pass costs O(flows), not O(links of the machine)."""
        if self._pad <= 8 * routes_matrix.size:
            return routes_matrix, capacity
        links, inverse = np.unique(np.append(routes_matrix.ravel(), self._pad),
                                   return_inverse=True)
        return inverse[:-1].reshape(routes_matrix.shape), capacity[links]

    def rearm(self, at: float | None = None) -> None:
        """Keep exactly one completion pending, at the earliest finishing instant (``at``,
        where the caller knows it)."""
        if at is None:
            at = float(self.finish.min()) if self.count else np.inf
        if at == self.pending_at:
            return
        if self.pending is not None:
            cancel(self.pending)
            self.pending = None
        self.pending_at = at
        if at < np.inf:
            self.pending = schedule_at(self.env, at, self._due)
