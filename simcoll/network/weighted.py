"""Weighted max-min fair rates (weighted progressive filling), for the ``"flow_rtt"`` model.

Flow i has a weight w_i > 0. Every unfrozen flow's rate grows as w_i times a common
*level*; a link fills when ``capacity left / (sum of the weights of its unfrozen flows)``
is the least over all links, and its flows freeze at w_i times that level. The rates are
the weighted max-min fair allocation: no flow can get more without taking from a flow
whose rate per unit weight is no higher. With every w_i equal this is plain max-min
fairness (:mod:`simcoll.network.maxmin`), up to rounding.

The two solvers do the passes of :func:`~simcoll.network.maxmin.fill` and
:func:`~simcoll.network.maxmin.fill_arrays` with sums of weights in place of counts of
flows (the same costs: O(F R + I L) in pure Python, a dozen numpy calls per bottleneck
level over arrays), and the same tie rule (:data:`~simcoll.network.maxmin.TIE`). A link
keeps a count of its unfrozen flows too, so that it stops limiting anything when the
count, not a sum of weights that rounding may leave a few ulps from zero, reaches zero.

A link's sum of weights is kept by subtracting the weights of the flows that freeze. When
that leaves less than :data:`REFRESH` of the sum before (a heavy flow left, light ones
remain), the difference has lost digits (rounding error of the old sum over a small new
one), so the sum is recomputed over the link's unfrozen flows. A sum can only shrink by
that factor a few times (log of the ratio of the heaviest to the lightest weight over
log 1/REFRESH), so this keeps the costs above.

Both take an optional ``multiplicity``, as the unweighted solvers do: row i stands for
that many flows with route i and weight ``weights[i]``, each of which gets row i's rate.
Flows with the same links get the same rate per unit weight (a link's unfrozen flows all
freeze in one pass at one level), so m flows of weight w on one route count on each of
its links as weight m w, m flows, and take m times their rate when they freeze. The
sums of weights then differ from the ungrouped ones by rounding only (m w once against
w added m times), well inside :data:`~simcoll.network.maxmin.TIE`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from simcoll.network.maxmin import TIE, flows_on, incidence, unfrozen_on
from simcoll.sums import sum_in_order

__all__ = ["REFRESH", "fill_weighted", "fill_arrays_weighted"]

REFRESH = 1e-3
"""A link's sum of unfrozen weights is recomputed when a subtraction leaves less than
this fraction of it."""


def fill_weighted(routes: Sequence[Sequence[int]], capacity: Mapping[int, float],
                  weights: Sequence[float],
                  multiplicity: Sequence[int] | None = None) -> list[float]:
    """Weighted max-min fair rates of flows with the given routes.

    Args:
        routes: each flow's directed links (at least one each).
        capacity: bytes/s each link of the routes can still carry.
        weights: each flow's weight (> 0), in the order of ``routes``.
        multiplicity: how many flows each route stands for (None: one each).

    Returns:
        Each flow's rate (its weight times the level at which it froze), in the order of
        ``routes``.
    """
    on_link: dict[int, list[int]] = {}
    for i, links in enumerate(routes):
        for d in links:
            on_link.setdefault(d, []).append(i)
    left = {d: capacity[d] for d in on_link}
    if multiplicity is None:
        multiplicity = [1] * len(routes)
        mass = weights
    else:
        mass = [w * m for w, m in zip(weights, multiplicity)]
    unfrozen = {d: sum(multiplicity[i] for i in flows) for d, flows in on_link.items()}
    weight = {d: sum_in_order(mass[i] for i in flows) for d, flows in on_link.items()}
    rates = [-1.0] * len(routes)
    frozen = 0
    while frozen < len(routes):
        share = min(left[d] / weight[d] for d, count in unfrozen.items() if count)
        level = share + abs(share) * TIE
        share = max(share, 0.0)
        tied = [d for d, count in unfrozen.items()
                if count and left[d] <= level * weight[d]]
        if not tied:   # a NaN share (a weight past float's range): it would loop for ever
            raise ValueError("max-min solve stopped: no link is a bottleneck")
        for bottleneck in tied:
            for i in on_link[bottleneck]:
                if rates[i] < 0:
                    rate = rates[i] = weights[i] * share
                    frozen += 1
                    many, w = multiplicity[i], mass[i]
                    taken = rate * many
                    for d in routes[i]:
                        left[d] -= taken
                        before = weight[d]
                        weight[d] = before - w
                        unfrozen[d] -= many
                        if weight[d] < before * REFRESH and unfrozen[d]:
                            weight[d] = sum_in_order(mass[j] for j in on_link[d] if rates[j] < 0)
    return rates


def fill_arrays_weighted(links: NDArray[np.intp], capacity: NDArray[np.float64],
                         weights: NDArray[np.float64],
                         multiplicity: NDArray[np.intp] | None = None) -> NDArray[np.float64]:
    """Weighted max-min fair rates, vectorized: the same passes as :func:`fill_weighted`.

    Args:
        links: ``(flows, R)`` link indices, each row one flow's route padded with
            ``len(capacity) - 1`` (a link that never limits anything).
        capacity: bytes/s each link can still carry, the padding link last.
        weights: each flow's weight (> 0), in row order.
        multiplicity: how many flows each row stands for (None: one each).

    Returns:
        Each flow's rate, in row order.
    """
    flows, width = links.shape
    size = len(capacity)
    flat, counts, owner, start = incidence(links, size)
    if multiplicity is None:
        count = counts.astype(np.float64)
        mass = weights
    else:
        count = flows_on(flat, multiplicity, width, size)
        mass = weights * multiplicity
    weight = np.bincount(flat, weights=np.repeat(mass, width), minlength=size)
    left = capacity.astype(np.float64, copy=True)
    # A link no unfrozen flow crosses (the padding link among them) has share inf / 0.
    count[size - 1] = 0.0
    left[count == 0.0] = np.inf
    weight[count == 0.0] = 0.0
    frozen = np.zeros(flows, dtype=bool)
    rates = np.empty(flows)
    remaining = flows
    with np.errstate(divide="ignore", invalid="ignore"):
        while remaining:
            shares = left / weight
            least = int(shares.argmin())
            share = float(shares[least])
            level = share + abs(share) * TIE
            tied = np.flatnonzero(left <= level * weight)
            if not len(tied):   # a NaN share (a weight past float's range): no link fills
                raise ValueError("max-min solve stopped: no link is a bottleneck")
            members = unfrozen_on(tied, least, owner, start, frozen)
            share = max(share, 0.0)
            frozen[members] = True
            rates[members] = weights[members] * share
            remaining -= len(members)
            crossed = links[members].ravel()
            crossed_count: NDArray[np.intp] | NDArray[np.float64]
            if multiplicity is None:
                crossed_count = np.bincount(crossed, minlength=size)
                taken = rates[members]
            else:
                crossed_count = flows_on(crossed, multiplicity[members], width, size)
                taken = rates[members] * multiplicity[members]
            crossed_count[size - 1] = 0
            crossed_weight = np.bincount(crossed, weights=np.repeat(mass[members], width),
                                         minlength=size)
            left -= np.bincount(crossed, weights=np.repeat(taken, width), minlength=size)
            before = weight.copy()
            weight -= crossed_weight
            count -= crossed_count
            empty = count == 0.0
            left[empty] = np.inf
            weight[empty] = 0.0
            for d in np.flatnonzero((weight < before * REFRESH) & ~empty).tolist():
                rows_on = owner[start[d]:start[d + 1]]
                weight[d] = mass[rows_on[~frozen[rows_on]]].sum()
    return rates
