"""Cost models of the pipelined family (simcoll.algorithms.pipeline).

Times are for the single-port alpha-beta reference network; n is each rank's input in
bytes and K = ``chunks`` (default 8). A buffer travels in K pieces as np.array_split cuts
it (empty pieces included), so the formulas are exact when K divides the element count;
otherwise the largest piece is up to one element more than n/K and they are close
estimates. Traffic is exact for every p, root and size.
"""

from __future__ import annotations

import numpy as np

from simcoll.algorithms.pipeline import DEFAULT_CHUNKS, double_binary_tree
from simcoll.cost import Traffic, cost_model
from simcoll.cost.tree import processor_sharing

__all__ = ["pipeline_broadcast", "ring_reduce", "double_binary_tree_all_reduce"]


def _traffic(sent: np.ndarray, received: np.ndarray) -> Traffic:
    empty = np.zeros(0, dtype=np.int64)
    return Traffic(sent, received, empty, empty)


def _chain(p: int, nbytes: int, root: int, first: int, last: int) -> Traffic:
    """Every relative rank but ``last`` sends n bytes; every one but ``first`` receives."""
    sent = np.full(p, nbytes, dtype=np.int64)
    received = np.full(p, nbytes, dtype=np.int64)
    sent[last % p] = 0
    received[first % p] = 0
    return _traffic(np.roll(sent, root), np.roll(received, root))


def _even_pieces(p, nbytes, itemsize, *, chunks=DEFAULT_CHUNKS, **params) -> bool:
    return p == 1 or (nbytes // itemsize) % chunks == 0


def _broadcast_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    return _chain(p, nbytes, root, first=0, last=p - 1)


@cost_model("broadcast", "pipeline", traffic=_broadcast_traffic, exact=_even_pieces)
def pipeline_broadcast(p, nbytes, alpha, beta, gamma, *, chunks=DEFAULT_CHUNKS,
                       **params) -> float:
    """(p - 2 + K)(alpha + n/K beta) for p >= 2 (Thakur et al. 2005).

    The first piece needs p - 1 hops, then one piece arrives per hop time.
    """
    if p == 1:
        return 0.0
    return (p - 2 + chunks) * (alpha + nbytes / chunks * beta)


def _reduce_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    return _chain(p, nbytes, root, first=p - 1, last=0)


@cost_model("reduce", "ring", traffic=_reduce_traffic, exact=_even_pieces)
def ring_reduce(p, nbytes, alpha, beta, gamma, *, chunks=DEFAULT_CHUNKS, **params) -> float:
    """(p-1)(T + R) + (K-1) max(T, R) with T = alpha + n/K beta, R = n/K gamma, p >= 2.

    Derivation (ours): the pieces cross p - 1 links and p - 1 reduction engines in the
    same order, each piece taking T on every link and R on every engine: a flow shop of
    identical jobs, whose makespan is the sum of one job's stage times plus K - 1 times
    the slowest stage. A rank reduces piece k + 1 while sending piece k, so a link and an
    engine never wait for each other beyond that.
    """
    if p == 1:
        return 0.0
    hop = alpha + nbytes / chunks * beta
    reduction = nbytes / chunks * gamma
    return (p - 1) * (hop + reduction) + (chunks - 1) * max(hop, reduction)


# -- double binary tree ------------------------------------------------------------------
def _trees(p: int) -> list[list[tuple[int | None, list[int]]]]:
    return [[double_binary_tree(p, r, t) for r in range(p)] for t in (0, 1)]


def _dbt_traffic(p, nbytes, itemsize, **params) -> Traffic:
    count = nbytes // itemsize
    halves = [(count // 2 + count % 2) * itemsize, count // 2 * itemsize]
    moved = np.zeros(p, dtype=np.int64)
    if p > 1:
        for half, tree in zip(halves, _trees(p)):
            for r, (parent, children) in enumerate(tree):
                moved[r] += half * (len(children) + (parent is not None))
    return _traffic(moved, moved.copy())


def _one_piece_tree_time(tree, piece: float, alpha: float, beta: float,
                         gamma: float) -> float:
    """One piece up a tree and back down, links shared only within the tree."""
    def up(v: int) -> float:
        children = tree[v][1]
        arrive = processor_sharing([(up(c) + alpha, piece * beta) for c in children])
        now = 0.0
        for t in arrive:
            now = max(now, t) + piece * gamma
        return now

    def down(v: int, start: float) -> float:
        children = tree[v][1]
        reach = start + alpha + len(children) * piece * beta
        return max((down(c, reach) for c in children), default=start)

    root = next(r for r, (parent, _) in enumerate(tree) if parent is None)
    return down(root, up(root))


def _dbt_exact(p, nbytes, itemsize, *, chunks=DEFAULT_CHUNKS, **params) -> bool:
    return p == 1 or (chunks == 1 and (nbytes // itemsize) % 2 == 0)


@cost_model("all_reduce", "double_binary_tree", traffic=_dbt_traffic, exact=_dbt_exact)
def double_binary_tree_all_reduce(p, nbytes, alpha, beta, gamma, *,
                                  chunks=DEFAULT_CHUNKS, **params) -> float:
    """Fill + (K - 1) max(alpha + d c beta, e c gamma), with c = n / (2K) (ours).

    Fill is one piece's trip up and down the slower tree, each parent's incoming link
    shared by its children's pieces (processor sharing) and its outgoing link by its
    sends to them. Then one piece per period leaves each tree: d is the largest number of
    tree edges at one rank, summed over both trees (4 for even p >= 4: interior in one
    tree, leaf in the other), so each link carries d c bytes per period, and the message
    latency of an edge is not hidden (one piece in flight per edge); e is the largest
    number of children at one rank, whose pieces it reduces each period.

    Exact for K = 1 and an even element count (the trees then never delay each other's
    critical path; checked for every p <= 64). Otherwise an estimate: over p <= 32,
    K <= 32 and 4 KB .. 64 MB the simulated time is 0.89 .. 1.21 times this; the error
    comes from the two trees' pieces sharing links out of step, and is largest for
    small odd p, where rank 0 is interior in both trees.
    """
    if p == 1:
        return 0.0
    piece = nbytes / (2 * chunks)
    trees = _trees(p)
    fill = max(_one_piece_tree_time(tree, piece, alpha, beta, gamma) for tree in trees)
    edges = max(sum(len(t[r][1]) + (t[r][0] is not None) for t in trees) for r in range(p))
    children = max(sum(len(t[r][1]) for t in trees) for r in range(p))
    return fill + (chunks - 1) * max(alpha + edges * piece * beta, children * piece * gamma)
