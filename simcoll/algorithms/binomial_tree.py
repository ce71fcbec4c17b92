"""Binomial-tree broadcast and reduce (MPICH), and the tree all-reduce built from them.

Rooted algorithms work on relative ranks v = (rank - root) mod p, so the root is v = 0.
In the binomial tree over v, the parent of v > 0 is v minus its lowest set bit, and the
children of v are v + m for every power of two m below that bit (below p for the root)
with v + m < p. Any p >= 1 works; for p a power of two the tree is complete.

Times are for the single-port alpha-beta reference network; n is each rank's input in
bytes and L = ceil(log2 p). Traffic is exact for every p, root and size. Binomial reduce
is exact for every p by this argument (ours): each rank sends one message, to its parent,
so only a parent's incoming link is ever shared, and only by its children's messages;
k messages draining there at once get 1/k of it each (max-min fairness when every other
link on their path is idle), which is egalitarian processor sharing. A subtree's time
depends only on its size s, and the subtrees of a binomial tree of size s have sizes
min(m, s - m) for m = 1, 2, 4, ... < s; so the time is a recursion over sizes that
replays processor sharing at each parent. For p a power of two no two children overlap
and the recursion reduces to the closed forms in the docstrings.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic, processor_sharing
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram, Program, Steps

__all__ = ["binomial_broadcast", "binomial_reduce", "tree_all_reduce", "binomial_children",
           "binomial_parent", "subtree_size", "tree_steps"]

_REDUCE, _BROADCAST = "reduce", "broadcast"


def binomial_parent(v: int) -> int:
    """Parent of relative rank v > 0: v without its lowest set bit."""
    return v & (v - 1)


def binomial_children(v: int, p: int) -> Iterator[tuple[int, int]]:
    """(child, mask) pairs of relative rank v, farthest child (largest mask) first, as
    MPICH orders them: the largest subtree first where p is a power of two (on 5 ranks
    rank 0's children are 4, of a subtree of one rank, then 2, of two).

    The subtree of child c = v + mask holds the relative ranks c .. min(c + mask, p) - 1.
    """
    top = v & -v if v else 1 << max(p - 1, 0).bit_length()
    mask = top >> 1
    while mask:
        if v + mask < p:
            yield v + mask, mask
        mask >>= 1


def subtree_size(v: int, p: int) -> int:
    """Number of relative ranks in the subtree of v."""
    return p if v == 0 else min(v & -v, p - v)


def tree_steps(p: int) -> int:
    """L = ceil(log2 p): the depth of the binomial tree over p ranks."""
    return (p - 1).bit_length()


def _bcast(comm: Comm, x: Buffer, root: int, tag: object = 0) -> Steps:
    """Binomial broadcast body: receive from the parent, then send to each child in turn."""
    p = comm.size
    v = (comm.rank - root) % p
    if v:
        x = yield comm.recv(src=(binomial_parent(v) + root) % p, tag=tag)
    for child, _ in binomial_children(v, p):
        yield comm.send(x, dst=(child + root) % p, tag=tag)
    return x


def _reduce(comm: Comm, x: Buffer, op: ReduceOp, root: int, tag: object = 0) -> Steps:
    """Binomial reduce body: fold in each child's subtree (smallest first), send up."""
    p = comm.size
    v = (comm.rank - root) % p
    acc = x
    for child, _ in reversed(list(binomial_children(v, p))):
        got = yield comm.recv(src=(child + root) % p, tag=tag)
        acc = yield comm.reduce(acc, got, op)
    if v:
        yield comm.send(acc, dst=(binomial_parent(v) + root) % p, tag=tag)
        return None
    return acc


def _fan_out(p: int, nbytes: int) -> NDArray[np.int64]:
    """Per relative rank: n bytes for each child (one message down to each)."""
    return np.array([nbytes * len(list(binomial_children(v, p))) for v in range(p)],
                    dtype=np.int64)


# -- broadcast ---------------------------------------------------------------------------
def _broadcast_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """L (alpha + n beta), exact for every p (Thakur et al. 2005)."""
    return tree_steps(p) * (alpha + nbytes * beta)


def _broadcast_traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    received = np.full(p, nbytes, dtype=np.int64)
    received[0] = 0
    return gpu_traffic(np.roll(_fan_out(p, nbytes), root), np.roll(received, root))


@register("broadcast", "binomial", cost=CostModel(
    time=_broadcast_time, traffic=_broadcast_traffic))
def binomial_broadcast(comm: Comm, x: Buffer, *, root: int) -> BufferProgram:
    """Binomial-tree broadcast (MPICH's short-message broadcast).

    Each rank receives x from its parent, then sends it to its children one at a time,
    farthest first (:func:`binomial_children`), waiting for each send to arrive before
    the next.

    Cost: ceil(log2 p) (alpha + n beta) for every p >= 1 (the root sends ceil(log2 p)
    messages back to back). Each non-root rank receives n bytes; a rank with c children
    sends c n bytes (the root ceil(log2 p) n). Source: Thakur et al. 2005.
    """
    return (yield from _bcast(comm, x, root))


# -- reduce ------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def _reduce_time(size: int, alpha: float, beta: float, gamma: float, nbytes: int) -> float:
    """When the root of a binomial subtree of ``size`` ranks holds its reduced buffer."""
    children = [min(m, size - m) for m in (1 << k for k in range(tree_steps(size)))]
    arrive = processor_sharing([(_reduce_time(s, alpha, beta, gamma, nbytes) + alpha,
                                 nbytes * beta) for s in children])
    now = 0.0
    for t in arrive:
        now = max(now, t) + nbytes * gamma
    return now


def _binomial_reduce_time(p: int, nbytes: int, alpha: float, beta: float,
                          gamma: float) -> float:
    """L (alpha + n beta + n gamma) for p a power of two (Thakur et al. 2005).

    Other p: the processor-sharing recursion of the module docstring (exact).
    """
    return _reduce_time(p, alpha, beta, gamma, nbytes)


def _up(p: int, nbytes: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per relative rank: one n-byte message to the parent, one from each child."""
    sent = np.full(p, nbytes, dtype=np.int64)
    sent[0] = 0
    return sent, _fan_out(p, nbytes)


def _reduce_traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    sent, received = _up(p, nbytes)
    return gpu_traffic(np.roll(sent, root), np.roll(received, root))


@register("reduce", "binomial", cost=CostModel(
    time=_binomial_reduce_time, traffic=_reduce_traffic))
def binomial_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, root: int) -> Program:
    """Binomial-tree reduce (MPICH's short-message reduce).

    Each rank receives its children's partial results, smallest subtree first, reduces
    each into its own as it arrives, and sends the result to its parent.

    Cost: ceil(log2 p) (alpha + n beta + n gamma) for p a power of two; for other p
    some children send to the same parent at once and share its link, and the model
    replays that processor sharing (module docstring). Each non-root rank sends n bytes;
    a rank with c children receives c n bytes. Source: Thakur et al. 2005.
    """
    return (yield from _reduce(comm, x, op, root))


# -- all_reduce --------------------------------------------------------------------------
def _all_reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """L (2 alpha + 2 n beta + n gamma) for p a power of two (Thakur et al. 2005).

    Other p: the exact binomial reduce time, then L (alpha + n beta); the broadcast
    starts when the root has every message, so nothing overlaps.
    """
    return (_reduce_time(p, alpha, beta, gamma, nbytes)
            + _broadcast_time(p, nbytes, alpha, beta, gamma))


def _all_reduce_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    up_sent, up_received = _up(p, nbytes)
    down = _broadcast_traffic(p, nbytes, itemsize, root=0)
    return gpu_traffic(up_sent + down.sent, up_received + down.received)


@register("all_reduce", "tree", cost=CostModel(
    time=_all_reduce_time, traffic=_all_reduce_traffic))
def tree_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp) -> BufferProgram:
    """Binomial reduce to rank 0, then binomial broadcast from rank 0.

    Cost: ceil(log2 p) (2 alpha + 2 n beta + n gamma) for p a power of two; otherwise
    the exact binomial reduce time of ``reduce/binomial``, then the broadcast's
    ceil(log2 p) (alpha + n beta). Each rank sends and receives (c + 1) n bytes where c
    is its number of children (rank 0: ceil(log2 p) n each way). Source: Thakur et al.
    2005.
    """
    acc = yield from _reduce(comm, x, op, 0, tag=_REDUCE)
    return (yield from _bcast(comm, x if acc is None else acc, 0, tag=_BROADCAST))
