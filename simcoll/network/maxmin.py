"""Max-min fair rates by progressive filling, in pure Python and over numpy arrays.

Both solvers take the flows' routes (directed link indices) and what each link can still
carry, and return every flow's rate: repeatedly take the link with the smallest fair share
(capacity left / flows on it not yet frozen), freeze its flows at that share, and subtract
them from every other link they cross. Links whose share is within :data:`TIE` (relative)
of the smallest are frozen in the same pass, at the smallest share.

:func:`fill` loops over Python dicts and costs O(F R + I L) for F flows with routes of R
links over L links with I bottleneck levels; :func:`fill_arrays` does the same passes with
numpy over a padded flow-link incidence matrix and the link-to-flow incidence in CSR form,
so a pass costs a dozen numpy calls whatever the number of flows it freezes. The pure
Python solver is faster below about :data:`CROSSOVER` flows (``benchmarks/solvers.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["TIE", "CROSSOVER", "fill", "fill_arrays"]

TIE = 1e-12
"""Links whose fair share is within this relative distance of the least one are
bottlenecks of the same level. Without it, rounding in the subtractions splits one level
into rates a few ulps apart, and flows that should end together end at many instants."""

CROSSOVER = 48
"""Flows in one solve from which :func:`fill_arrays` beats :func:`fill` (measured)."""


def fill(routes: Sequence[Sequence[int]], capacity: Mapping[int, float]) -> list[float]:
    """Max-min fair rates of flows with the given routes.

    Args:
        routes: each flow's directed links (at least one each).
        capacity: bytes/s each link of the routes can still carry.

    Returns:
        Each flow's rate, in the order of ``routes``.
    """
    on_link: dict[int, list[int]] = {}
    for i, links in enumerate(routes):
        for d in links:
            on_link.setdefault(d, []).append(i)
    left = {d: capacity[d] for d in on_link}
    unfrozen = {d: len(flows) for d, flows in on_link.items()}
    rates = [-1.0] * len(routes)
    frozen = 0
    while frozen < len(routes):
        share = min(left[d] / count for d, count in unfrozen.items() if count)
        level = share + abs(share) * TIE
        share = max(share, 0.0)
        tied = [d for d, count in unfrozen.items() if count and left[d] <= level * count]
        for bottleneck in tied:
            for i in on_link[bottleneck]:
                if rates[i] < 0:
                    rates[i] = share
                    frozen += 1
                    for d in routes[i]:
                        left[d] -= share
                        unfrozen[d] -= 1
    return rates


def fill_arrays(links: NDArray[np.intp], capacity: NDArray[np.float64]) -> NDArray[np.float64]:
    """Max-min fair rates, vectorized: many bottleneck links frozen per pass.

    A link whose share is the least among every link its unfrozen flows cross (within
    :data:`TIE`) is filled at that share in progressive filling whatever happens
    elsewhere: shares only grow as flows freeze, so nothing can freeze its flows earlier.
    Every such link of a pass is frozen at once; the global least share and those tied
    with it are frozen at exactly the least one, as :func:`fill` does.

    Args:
        links: ``(flows, R)`` link indices, each row one flow's route padded with
            ``len(capacity) - 1`` (a link that never limits anything).
        capacity: bytes/s each link can still carry, the padding link last.

    Returns:
        Each flow's rate, in row order.
    """
    flows, width = links.shape
    size = len(capacity)
    pad = size - 1
    count = np.bincount(links.ravel(), minlength=size).astype(np.float64)
    left = capacity.astype(np.float64, copy=True)
    left[count == 0.0] = np.inf
    left[pad] = np.inf
    rates = np.empty(flows)
    alive = np.arange(flows)
    # One row per hop: reductions over a route run along contiguous rows.
    routes = np.ascontiguousarray(links.T)
    with np.errstate(divide="ignore", invalid="ignore"):
        while len(alive):
            shares = left / count
            crossed = shares[routes]
            tightest = np.minimum.reduce(crossed, axis=0)
            # A link is not a local bottleneck if one of its flows crosses a tighter link.
            looser = crossed > tightest * (1 + TIE)
            local = np.bincount(routes[looser], minlength=size) == 0
            local[pad] = False
            done = np.logical_or.reduce(local[routes], axis=0)
            least = float(tightest.min())
            rate = tightest[done]
            rate[rate <= least + abs(least) * TIE] = least
            np.maximum(rate, 0.0, out=rate)
            rates[alive[done]] = rate
            frozen = routes[:, done]
            left -= np.bincount(frozen.ravel(), weights=np.tile(rate, width),
                                minlength=size)
            count -= np.bincount(frozen.ravel(), minlength=size)
            left[count == 0.0] = np.inf
            keep = ~done
            alive = alive[keep]
            routes = routes[:, keep]
    return rates
