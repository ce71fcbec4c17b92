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

Both take an optional ``multiplicity``: row i then stands for that many flows with route
i, each of which gets row i's rate. Flows with the same links get the same max-min rate
(every pass freezes all the unfrozen flows of a link, so flows on the same links freeze
in the same pass, at the same share), so a set of flows can be solved as its distinct
routes, each counted as many times as it occurs: a link's count of unfrozen flows is the
sum of the multiplicities of its unfrozen rows, and a row frozen at share s takes
multiplicity times s from each of its links. In :func:`fill_arrays` these are the very
numbers the ungrouped solve computes (counts are integers, exact in float64, and a
pass subtracts count times share from each link either way), so its rates and its ties
are the ungrouped ones bit for bit; :func:`fill` subtracts ``m * s`` once where the
ungrouped solve subtracts s m times, which differs by rounding only (a few ulps).
The general regime groups its flows this way (:mod:`simcoll.network.general`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["TIE", "CROSSOVER", "fill", "fill_arrays", "incidence", "unfrozen_on", "flows_on"]

TIE = 1e-12
"""Links whose fair share is within this relative distance of the least one are
bottlenecks of the same level. Without it, rounding in the subtractions splits one level
into rates a few ulps apart, and flows that should end together end at many instants."""

CROSSOVER = 512
"""Flows in one solve from which :func:`fill_arrays` beats :func:`fill` (measured)."""


def fill(routes: Sequence[Sequence[int]], capacity: Mapping[int, float],
         multiplicity: Sequence[int] | None = None) -> list[float]:
    """Max-min fair rates of flows with the given routes.

    Args:
        routes: each flow's directed links (at least one each).
        capacity: bytes/s each link of the routes can still carry.
        multiplicity: how many flows each route stands for (None: one each).

    Returns:
        Each flow's rate (each route's per-flow rate), in the order of ``routes``.
    """
    on_link: dict[int, list[int]] = {}
    for i, links in enumerate(routes):
        for d in links:
            on_link.setdefault(d, []).append(i)
    left = {d: capacity[d] for d in on_link}
    if multiplicity is None:
        multiplicity = [1] * len(routes)
        unfrozen = {d: len(flows) for d, flows in on_link.items()}
    else:
        unfrozen = {d: sum(multiplicity[i] for i in flows) for d, flows in on_link.items()}
    rates = [-1.0] * len(routes)
    frozen = 0
    while frozen < len(routes):
        share = min(left[d] / count for d, count in unfrozen.items())
        level = share + abs(share) * TIE
        share = max(share, 0.0)
        tied = [d for d, count in unfrozen.items() if left[d] <= level * count]
        for bottleneck in tied:
            for i in on_link[bottleneck]:
                if rates[i] < 0:
                    rates[i] = share
                    frozen += 1
                    many = multiplicity[i]
                    taken = share * many
                    for d in routes[i]:
                        left[d] -= taken
                        count = unfrozen[d] - many
                        if count:
                            unfrozen[d] = count
                        else:
                            # A link with no unfrozen flow limits nothing any more.
                            del unfrozen[d]
    return rates


def fill_arrays(links: NDArray[np.intp], capacity: NDArray[np.float64],
                multiplicity: NDArray[np.intp] | None = None) -> NDArray[np.float64]:
    """Max-min fair rates, vectorized: the same passes as :func:`fill`.

    Each pass costs a dozen numpy calls on arrays of the links and of the flows it
    freezes (found through the link-to-flow incidence in CSR form), not of all flows.

    Args:
        links: ``(flows, R)`` link indices, each row one flow's route padded with
            ``len(capacity) - 1`` (a link that never limits anything).
        capacity: bytes/s each link can still carry, the padding link last.
        multiplicity: how many flows each row stands for (None: one each).

    Returns:
        Each flow's rate (each row's per-flow rate), in row order.
    """
    flows, width = links.shape
    size = len(capacity)
    flat, counts, owner, bounds = incidence(links, size)
    count: NDArray[np.float64] | NDArray[np.intp]
    if multiplicity is None:
        count = counts.astype(np.float64)
    else:
        row_flows = np.repeat(multiplicity.astype(np.float64), width).reshape(flows, width)
        count = np.bincount(flat, weights=row_flows.ravel(), minlength=size)
    left = capacity.astype(np.float64, copy=True)
    # A link no unfrozen flow crosses (the padding link among them) has share inf.
    count[size - 1] = 0.0
    left[count == 0.0] = np.inf
    frozen = np.zeros(flows, dtype=bool)
    rates = np.empty(flows)
    remaining = flows
    with np.errstate(divide="ignore", invalid="ignore"):
        while remaining:
            shares = left / count
            least = int(shares.argmin())
            share = float(shares[least])
            level = share + abs(share) * TIE
            tied = (left <= level * count).nonzero()[0]
            members = unfrozen_on(tied, least, owner, bounds, frozen)
            share = max(share, 0.0)
            frozen[members] = True
            rates[members] = share
            remaining -= len(members)
            crossed: NDArray[np.intp] | NDArray[np.float64]
            if multiplicity is None:
                crossed = np.bincount(links[members].ravel(), minlength=size)
            else:
                crossed = np.bincount(links[members].ravel(), weights=row_flows[members].ravel(),
                                      minlength=size)
            crossed[size - 1] = 0
            left -= crossed * share
            count -= crossed
            left[count == 0.0] = np.inf
    return rates


def incidence(links: NDArray[np.intp], size: int
              ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], list[int]]:
    """The flow-link incidence of padded routes ``links`` over ``size`` links: the routes
    flattened, the rows on each link, and in CSR form the rows crossing each link
    (``owner[bounds[d]:bounds[d + 1]]`` for link d)."""
    width = links.shape[1]
    flat = links.ravel()
    counts = np.bincount(flat, minlength=size)
    owner = np.argsort(flat, kind="stable") // width
    start = np.zeros(size + 1, dtype=np.intp)
    np.cumsum(counts, out=start[1:])
    return flat, counts, owner, start.tolist()


def unfrozen_on(tied: NDArray[np.intp], least: int, owner: NDArray[np.intp],
                bounds: list[int], frozen: NDArray[np.bool_]) -> NDArray[np.intp]:
    """The rows not yet frozen that cross a link of ``tied`` (``least`` when it is the
    only one), each once."""
    if len(tied) == 1:
        members = owner[bounds[least]:bounds[least + 1]]
        return members[~frozen[members]]
    reached = np.zeros(len(frozen), dtype=bool)
    reached[np.concatenate([owner[bounds[d]:bounds[d + 1]] for d in tied.tolist()])] = True
    return np.flatnonzero(reached & ~frozen)


def flows_on(flat: NDArray[np.intp], multiplicity: NDArray[np.intp], width: int,
             size: int) -> NDArray[np.float64]:
    """Flows on each of ``size`` links, for rows of ``width`` links flattened into
    ``flat``, row i standing for ``multiplicity[i]`` flows (integers: exact sums)."""
    counted = np.bincount(flat, weights=np.repeat(multiplicity, width), minlength=size)
    return counted.astype(np.float64, copy=False)
