"""Cost models of the pairwise-exchange algorithms (``simcoll.algorithms.pairwise``).

Thakur, Rabenseifner & Gropp 2005. Each of the p-1 steps moves one block each way per
rank; with equal blocks all ranks stay in lockstep and the formulas are exact. With
uneven blocks ranks drift apart and may receive two steps' blocks at once, so the time
with m = n/p is an estimate there.
"""

from __future__ import annotations

from simcoll.cost import cost_model
from simcoll.cost.direct import divisible, scatter_traffic

__all__ = ["pairwise_reduce_scatter", "pairwise_all_to_all"]


@cost_model("reduce_scatter", "pairwise", traffic=scatter_traffic, exact=divisible)
def pairwise_reduce_scatter(p, nbytes, alpha, beta, gamma, **params):
    """(p-1) (alpha + n/p beta + n/p gamma): each step is a sendrecv, then a reduction."""
    block = nbytes / p
    return (p - 1) * (alpha + block * beta + block * gamma)


@cost_model("all_to_all", "pairwise", traffic=scatter_traffic, exact=divisible)
def pairwise_all_to_all(p, nbytes, alpha, beta, gamma, **params):
    """(p-1) (alpha + n/p beta)."""
    return (p - 1) * (alpha + nbytes / p * beta)
