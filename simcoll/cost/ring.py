"""Cost models of the ring family (``simcoll.algorithms.ring``): all_reduce,
reduce_scatter and all_gather, each with ``chunks=K`` pipelining.

Notation: n = ``nbytes`` (each rank's input), N = (p-1) K piece steps per ring phase,
c = alpha + n beta / (p K) one piece message and g = n gamma / (p K) one piece reduction
(for all_gather a piece is n / K bytes).

Derivation of the pipelined times (K >= 2). A rank sends piece i (in order: step by step,
piece by piece) once piece i-1's exchange is done and, from the second step on, once the
reduction of the piece it forwards (piece i-K) is done; reductions run one at a time in
arrival order. On the reference network every rank follows the same timeline, so the
finishing time is the longest path through these dependencies: link steps cost c each,
reductions g each, and leaving the reduction engine jumps K pieces ahead for one c. For
K >= 2 no path gains from leaving and re-entering the engine, so the longest path either
stays on the link (reduce-scatter: N c + g, all-reduce: 2 N c) or runs through all N
reductions from the first piece received (reduce-scatter: c + N g, all-reduce:
c + N g + (N - K + 1) c). With K = 1 every step waits for its reduction: the classic
sums. Times are exact when every piece has the same size (count divisible by p K; by K for
all_gather); traffic is exact for every size.
"""

from __future__ import annotations

import numpy as np

from simcoll.cost import Traffic, cost_model

__all__ = ["all_reduce_time", "reduce_scatter_time", "all_gather_time"]


def _blocks(p: int, nbytes: int, itemsize: int) -> np.ndarray:
    """Bytes of each of the p blocks, cut by elements as ``np.array_split`` does."""
    q, extra = divmod(nbytes // itemsize, p)
    return (q + (np.arange(p) < extra)).astype(np.int64) * itemsize


def _all_reduce_traffic(p: int, nbytes: int, itemsize: int, *, chunks: int = 1) -> Traffic:
    """Rank r sends every block but r+1 (reduce-scatter) and but r+2 (all-gather)."""
    b = _blocks(p, nbytes, itemsize)
    sent = 2 * (nbytes // itemsize) * itemsize - np.roll(b, -1) - np.roll(b, -2)
    received = np.roll(sent, 1)
    return Traffic(sent, received, np.zeros(0, np.int64), np.zeros(0, np.int64))


def _reduce_scatter_traffic(p: int, nbytes: int, itemsize: int, *,
                            chunks: int = 1) -> Traffic:
    """Rank r sends every block but block r and receives every block but block r-1."""
    b = _blocks(p, nbytes, itemsize)
    total = (nbytes // itemsize) * itemsize
    return Traffic(total - b, total - np.roll(b, 1), np.zeros(0, np.int64),
                   np.zeros(0, np.int64))


def _all_gather_traffic(p: int, nbytes: int, itemsize: int, *, chunks: int = 1) -> Traffic:
    each = np.full(p, (p - 1) * (nbytes // itemsize) * itemsize, dtype=np.int64)
    return Traffic(each, each.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64))


def _even(p: int, nbytes: int, itemsize: int, *, chunks: int = 1) -> bool:
    return (nbytes // itemsize) % (p * chunks) == 0


def _even_pieces(p: int, nbytes: int, itemsize: int, *, chunks: int = 1) -> bool:
    return (nbytes // itemsize) % chunks == 0


def _piece(p: int, nbytes: int, alpha: float, beta: float, gamma: float,
           chunks: int) -> tuple[int, float, float]:
    """(N, c, g): piece steps per phase, one piece message, one piece reduction."""
    piece = nbytes / (p * chunks)
    return (p - 1) * chunks, alpha + piece * beta, piece * gamma


@cost_model("all_reduce", "ring", traffic=_all_reduce_traffic, exact=_even)
def all_reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                    chunks: int = 1) -> float:
    """K = 1: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Patarasuk & Yuan 2009).

    K >= 2: max(2 N c, (N - K + 2) c + N g) (module docstring): the reductions hide
    behind the transfers while g <= c (roughly), leaving 2(p-1) K alpha + 2 (p-1)/p n beta.
    """
    if p == 1:
        return 0.0
    n_steps, c, g = _piece(p, nbytes, alpha, beta, gamma, chunks)
    if chunks == 1:
        return n_steps * (2 * c + g)
    return max(2 * n_steps * c, (n_steps - chunks + 2) * c + n_steps * g)


@cost_model("reduce_scatter", "ring", traffic=_reduce_scatter_traffic, exact=_even)
def reduce_scatter_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                        chunks: int = 1) -> float:
    """K = 1: (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma (Thakur et al. 2005).

    K >= 2: c + g + (N - 1) max(c, g) (module docstring): the slower of link and reduction
    engine is never idle.
    """
    if p == 1:
        return 0.0
    n_steps, c, g = _piece(p, nbytes, alpha, beta, gamma, chunks)
    if chunks == 1:
        return n_steps * (c + g)
    return c + g + (n_steps - 1) * max(c, g)


@cost_model("all_gather", "ring", traffic=_all_gather_traffic, exact=_even_pieces)
def all_gather_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                    chunks: int = 1) -> float:
    """(p-1) K alpha + (p-1) n beta (Thakur et al. 2005 for K = 1); n = input per rank."""
    return (p - 1) * (chunks * alpha + nbytes * beta)
