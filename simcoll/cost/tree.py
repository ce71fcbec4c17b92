"""Cost models of the binomial-tree family (simcoll.algorithms.tree).

Times are for the single-port alpha-beta reference network; n is each rank's input in
bytes (the root's whole buffer for scatter) and L = ceil(log2 p). Traffic is exact for
every p, root and size: it walks each algorithm's tree with blocks cut by elements as
np.array_split does.

Binomial reduce and gather are exact for every p by the following argument (ours). Each
rank sends one message, to its parent, so only a parent's incoming link is ever shared,
and only by its children's messages; k messages draining there at once get 1/k of it
each (max-min fairness when every other link on their path is idle), which is egalitarian
processor sharing. A subtree's time depends only on its size s, and the subtrees of a
binomial tree of size s have sizes min(m, s - m) for m = 1, 2, 4, ... < s; so the time is
a recursion over sizes that replays processor sharing at each parent. For p a power of
two no two children overlap and the recursion reduces to the closed forms in the
docstrings.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from simcoll.algorithms.tree import binomial_children, binomial_parent
from simcoll.cost import Traffic, cost_model

__all__ = ["binomial_broadcast", "scatter_allgather_broadcast", "binomial_reduce",
           "tree_all_reduce", "binomial_gather", "binomial_scatter",
           "dissemination_barrier", "processor_sharing"]


def _steps(p: int) -> int:
    return (p - 1).bit_length()


def _traffic(sent: np.ndarray, received: np.ndarray) -> Traffic:
    empty = np.zeros(0, dtype=np.int64)
    return Traffic(sent, received, empty, empty)


def _block_bytes(count: int, p: int, itemsize: int) -> np.ndarray:
    q, r = divmod(count, p)
    return np.array([(q + (j < r)) * itemsize for j in range(p)], dtype=np.int64)


def _subtree(v: int, p: int) -> int:
    """Number of relative ranks in the subtree of v."""
    return p if v == 0 else min(v & -v, p - v)


def _rel_to_abs(values: np.ndarray, root: int) -> np.ndarray:
    """Reorder per-relative-rank values into rank order."""
    return np.roll(values, root)


def processor_sharing(jobs: list[tuple[float, float]]) -> list[float]:
    """Finish times of jobs (release time, work) served by one server shared equally.

    Every active job gets 1/k of the server while k jobs are active (egalitarian
    processor sharing); work is in seconds at the full rate.
    """
    order = sorted(range(len(jobs)), key=lambda i: jobs[i][0])
    finish = [0.0] * len(jobs)
    active: dict[int, float] = {}
    now, k = 0.0, 0
    while k < len(order) or active:
        release = jobs[order[k]][0] if k < len(order) else math.inf
        first = min(active, key=active.__getitem__) if active else -1
        done = now + active[first] * len(active) if active else math.inf
        if release <= done:
            served = (release - now) / len(active) if active else 0.0
            active = {i: w - served for i, w in active.items()}
            now = release
            active[order[k]] = jobs[order[k]][1]
            k += 1
        else:
            served = active.pop(first)
            finish[first] = now = done
            active = {i: w - served for i, w in active.items()}
    return finish


# -- broadcast ---------------------------------------------------------------------------
def _binomial_broadcast_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    sent = np.array([nbytes * len(list(binomial_children(v, p))) for v in range(p)],
                    dtype=np.int64)
    received = np.full(p, nbytes, dtype=np.int64)
    received[0] = 0
    return _traffic(_rel_to_abs(sent, root), _rel_to_abs(received, root))


@cost_model("broadcast", "binomial", traffic=_binomial_broadcast_traffic)
def binomial_broadcast(p, nbytes, alpha, beta, gamma, **params) -> float:
    """L (alpha + n beta), exact for every p (Thakur et al. 2005)."""
    return _steps(p) * (alpha + nbytes * beta)


def _scatter_allgather_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    block = _block_bytes(nbytes // itemsize, p, itemsize)
    start = np.concatenate([[0], np.cumsum(block)])
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    if p > 1:
        for v in range(1, p):
            piece = start[v + _subtree(v, p)] - start[v]
            sent[binomial_parent(v)] += piece
            received[v] += piece
        everything = start[-1]
        sent += everything - np.roll(block, -1)
        received += everything - block
    return _traffic(_rel_to_abs(sent, root), _rel_to_abs(received, root))


def _divisible(p, nbytes, itemsize, **params) -> bool:
    return (nbytes // itemsize) % p == 0


@cost_model("broadcast", "scatter_allgather", traffic=_scatter_allgather_traffic,
            exact=_divisible)
def scatter_allgather_broadcast(p, nbytes, alpha, beta, gamma, **params) -> float:
    """(L + p - 1) alpha + 2 (p-1)/p n beta (Thakur et al. 2005).

    Exact for every p when the element count divides by p (derivation ours). The scatter
    alone takes L alpha + (p-1)/p n beta: the root's back-to-back sends are its critical
    path. No link is ever shared: a rank's left ring neighbour is, in the scatter, either
    its parent (which sends to it last) or reached only after it, so the neighbour's
    first ring message never overlaps the rank's scatter message. A ring step then ends
    at max(own previous step, left neighbour's previous step) + alpha + n/p beta, and
    after p - 1 steps every rank has waited for the slowest scatter finish, the root's.
    """
    if p == 1:
        return 0.0
    return (_steps(p) + p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta


# -- reduce and all_reduce ---------------------------------------------------------------
def _up_traffic(p: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per relative rank: one n-byte message to the parent, one from each child."""
    sent = np.full(p, nbytes, dtype=np.int64)
    sent[0] = 0
    received = np.array([nbytes * len(list(binomial_children(v, p))) for v in range(p)],
                        dtype=np.int64)
    return sent, received


def _binomial_reduce_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    sent, received = _up_traffic(p, nbytes)
    return _traffic(_rel_to_abs(sent, root), _rel_to_abs(received, root))


@lru_cache(maxsize=4096)
def _reduce_time(size: int, alpha: float, beta: float, gamma: float, nbytes: int) -> float:
    """When the root of a binomial subtree of ``size`` ranks holds its reduced buffer."""
    children = [min(m, size - m) for m in (1 << k for k in range(_steps(size)))]
    arrive = processor_sharing([(_reduce_time(s, alpha, beta, gamma, nbytes) + alpha,
                                 nbytes * beta) for s in children])
    now = 0.0
    for t in arrive:
        now = max(now, t) + nbytes * gamma
    return now


@cost_model("reduce", "binomial", traffic=_binomial_reduce_traffic)
def binomial_reduce(p, nbytes, alpha, beta, gamma, **params) -> float:
    """L (alpha + n beta + n gamma) for p a power of two (Thakur et al. 2005).

    Other p: the processor-sharing recursion of the module docstring (exact).
    """
    return _reduce_time(p, alpha, beta, gamma, nbytes)


def _tree_all_reduce_traffic(p, nbytes, itemsize, **params) -> Traffic:
    up_sent, up_received = _up_traffic(p, nbytes)
    down = _binomial_broadcast_traffic(p, nbytes, itemsize)
    return _traffic(up_sent + down.sent, up_received + down.received)


@cost_model("all_reduce", "tree", traffic=_tree_all_reduce_traffic)
def tree_all_reduce(p, nbytes, alpha, beta, gamma, **params) -> float:
    """L (2 alpha + 2 n beta + n gamma) for p a power of two (Thakur et al. 2005).

    Other p: the exact binomial reduce time, then L (alpha + n beta); the broadcast
    starts when the root has every message, so nothing overlaps.
    """
    return _reduce_time(p, alpha, beta, gamma, nbytes) + binomial_broadcast(
        p, nbytes, alpha, beta, gamma)


# -- gather and scatter ------------------------------------------------------------------
def _binomial_gather_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    size = np.array([_subtree(v, p) for v in range(p)], dtype=np.int64)
    sent = size * nbytes
    sent[0] = 0
    received = (size - 1) * nbytes
    return _traffic(_rel_to_abs(sent, root), _rel_to_abs(received, root))


@lru_cache(maxsize=4096)
def _gather_time(size: int, alpha: float, beta: float, nbytes: int) -> float:
    """When the root of a binomial subtree of ``size`` ranks holds all its blocks."""
    children = [min(m, size - m) for m in (1 << k for k in range(_steps(size)))]
    arrive = processor_sharing([(_gather_time(s, alpha, beta, nbytes) + alpha,
                                 s * nbytes * beta) for s in children])
    return max(arrive, default=0.0)


@cost_model("gather", "binomial", traffic=_binomial_gather_traffic)
def binomial_gather(p, nbytes, alpha, beta, gamma, **params) -> float:
    """L alpha + (p-1) n beta for p a power of two (Thakur et al. 2005).

    Other p: the processor-sharing recursion of the module docstring (exact).
    """
    return _gather_time(p, alpha, beta, nbytes)


def _binomial_scatter_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    block = _rel_to_abs(_block_bytes(nbytes // itemsize, p, itemsize), -root)
    start = np.concatenate([[0], np.cumsum(block)])
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    for v in range(1, p):
        piece = start[v + _subtree(v, p)] - start[v]
        sent[binomial_parent(v)] += piece
        received[v] += piece
    return _traffic(_rel_to_abs(sent, root), _rel_to_abs(received, root))


@cost_model("scatter", "binomial", traffic=_binomial_scatter_traffic, exact=_divisible)
def binomial_scatter(p, nbytes, alpha, beta, gamma, **params) -> float:
    """L alpha + (p-1)/p n beta (Thakur et al. 2005); exact for every p when the element
    count divides by p.

    Derivation (ours) for other p: every rank receives once and sends one message at a
    time, so no link is shared. The root sends L messages carrying p-1 blocks back to
    back. A child with mask m then has at most log2 m sends of at most m - 1 blocks left,
    while the root still has exactly log2 m sends of m - 1 blocks (its smaller subtrees
    are complete), so by induction no rank finishes after the root.
    """
    return _steps(p) * alpha + (p - 1) / p * nbytes * beta


# -- barrier -----------------------------------------------------------------------------
def _barrier_traffic(p, nbytes, itemsize, **params) -> Traffic:
    zero = np.zeros(p, dtype=np.int64)
    return _traffic(zero, zero.copy())


@cost_model("barrier", "dissemination", traffic=_barrier_traffic)
def dissemination_barrier(p, nbytes, alpha, beta, gamma, **params) -> float:
    """L alpha for every p: L rounds of one zero-byte message each way (Hensgen et al.
    1988)."""
    return _steps(p) * alpha
