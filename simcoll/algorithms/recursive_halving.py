"""Recursive halving: the reduce-scatter, and Rabenseifner's all-reduce and reduce built on it.

At distance d = p/2, ..., 1 a rank keeps the half of its block range that holds its own
block, sends the other half to rank r ^ d and reduces the half it receives. Rabenseifner
follows it with a recursive-doubling all-gather (all-reduce) or a binomial gather (reduce).
Other p use MPICH's fold (:mod:`simcoll.algorithms.fold`). Every reduction puts the
lower-numbered side's buffer on the left, so each element is reduced in one fixed order.

Times are for the single-port alpha-beta reference network, exact for p a power of two
and a count divisible by p; otherwise p' replaces p and the fold's messages are added, an
estimate that ignores link sharing (see :mod:`simcoll.algorithms.recursive_doubling`).
Traffic is exact for every p and size (blocks cut as np.array_split does).

Rabenseifner, "Optimization of collective reduction operations", ICCS 2004; Thakur,
Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 19(1), 2005.
"""

from __future__ import annotations

from collections.abc import Callable

from simcoll.algorithms.fold import (
    distances,
    fold_elements,
    fold_in,
    fold_out,
    fold_time,
    is_pow2,
    pow2_split,
    real_rank,
)
from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, block_start
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram, Program, Steps

__all__ = ["rabenseifner_all_reduce", "recursive_halving_reduce_scatter",
           "rabenseifner_reduce"]

Offsets = Callable[[int], int]


def _halving(comm: Comm, buf: Buffer, new: int, p2: int, rem: int, offset: Offsets,
             op: ReduceOp) -> Steps:
    """Recursive-halving reduce-scatter among the p2 survivors.

    ``buf`` holds blocks 0..p2-1, block j starting at element ``offset(j)``. At distance
    d = p2/2, ..., 1 each survivor keeps the half (of its current range) holding its own
    block, sends the other half to new rank ``new ^ d`` and reduces what comes back.
    Returns block ``new``, fully reduced over the survivors.
    """
    lo, dist = 0, p2 // 2
    while dist:
        peer = new ^ dist
        mid = lo + dist
        cut = offset(mid) - offset(lo)
        lower = new < peer
        keep, give = (buf[:cut], buf[cut:]) if lower else (buf[cut:], buf[:cut])
        if not lower:
            lo = mid
        other = real_rank(peer, rem)
        got = yield comm.sendrecv(give, dst=other, src=other, tag=("halving", dist))
        buf = yield (comm.reduce(keep, got, op) if lower else comm.reduce(got, keep, op))
        dist //= 2
    return buf


def _doubling(comm: Comm, buf: Buffer, new: int, p2: int, rem: int) -> Steps:
    """Recursive-doubling all-gather among the p2 survivors, each holding block ``new``."""
    dist = 1
    while dist < p2:
        peer = new ^ dist
        other = real_rank(peer, rem)
        got = yield comm.sendrecv(buf, dst=other, src=other, tag=("doubling", dist))
        buf = comm.join([buf, got] if new < peer else [got, buf])
        dist *= 2
    return buf


def _gather(comm: Comm, buf: Buffer, new: int, root: int, p2: int, rem: int) -> Steps:
    """Binomial gather of the survivors' blocks to survivor ``root``; None elsewhere.

    At distance d = 1, 2, ..., p2/2 a survivor whose new rank differs from ``root`` in bit
    d (and in no lower bit) sends the blocks it holds, an aligned range of d blocks, to
    new rank ``new ^ d`` and stops; the receiver appends them to its range.
    """
    rel, dist = new ^ root, 1
    while dist < p2:
        peer = new ^ dist
        if rel & dist:
            comm.send(buf, dst=real_rank(peer, rem), tag=("gather", dist))
            return None
        got = yield comm.recv(src=real_rank(peer, rem), tag=("gather", dist))
        buf = comm.join([buf, got] if new < peer else [got, buf])
        dist *= 2
    return buf


# -- traffic helpers ---------------------------------------------------------------------
def _group(offset: Offsets, i: int, size: int) -> int:
    """Elements in the aligned group of ``size`` blocks that holds block ``i``."""
    lo = i & ~(size - 1)
    return offset(lo + size) - offset(lo)


def _halving_elements(p2: int, offset: Offsets, new: int) -> tuple[int, int]:
    """(sent, received) elements of survivor ``new`` in the recursive halving."""
    total = offset(p2) - offset(0)
    own = offset(new + 1) - offset(new)
    return total - own, sum(_group(offset, new, d) for d in distances(p2))


def _exact(p: int, nbytes: int, itemsize: int) -> bool:
    return is_pow2(p) and (nbytes // itemsize) % p == 0


def _survivor(root: int, rem: int) -> int:
    """The survivor of the fold that stands for ``root``."""
    return root // 2 if root < 2 * rem else root - rem


# -- all_reduce / rabenseifner -----------------------------------------------------------
def _all_reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Thakur et al. 2005;
    Rabenseifner 2004), exact for p a power of two and n divisible by p.

    Otherwise p' replaces p and the fold adds alpha + n beta + n gamma before and
    alpha + n beta after (an estimate).
    """
    p2, rem = pow2_split(p)
    rounds = p2.bit_length() - 1
    back = alpha + nbytes * beta if rem else 0.0
    return (fold_time(p, nbytes, alpha, beta, gamma) + 2 * rounds * alpha
            + (p2 - 1) / p2 * nbytes * (2 * beta + gamma) + back)


def _all_reduce_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    count = nbytes // itemsize
    p2, rem = pow2_split(p)
    sent, received = fold_elements(p, count)
    for new in range(p2):
        r = real_rank(new, rem)
        give, get = _halving_elements(p2, lambda j: block_start(count, p2, j), new)
        # The all-gather mirrors the halving: it sends what the halving received.
        sent[r] += give + get
        received[r] += get + give
    sent[0:2 * rem:2] += count
    received[1:2 * rem:2] += count
    return gpu_traffic(sent * itemsize, received * itemsize)


@register("all_reduce", "rabenseifner", cost=CostModel(
    time=_all_reduce_time, traffic=_all_reduce_traffic, exact=_exact, ends_together=True))
def rabenseifner_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp) -> BufferProgram:
    """Rabenseifner all-reduce: recursive-halving reduce-scatter, recursive-doubling all-gather.

    The buffer is cut into p' blocks (np.array_split). The halving leaves survivor i with
    block i reduced over all ranks; the doubling gathers the blocks everywhere.
    Non-power-of-two p: MPICH's fold.

    Cost for p a power of two and n divisible by p (Thakur et al. 2005; Rabenseifner 2004):
    2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma; each rank sends and receives
    2 (p-1)/p n bytes. Otherwise, with L = log2 p' and the fold:
    2 (L + 1) alpha + (2 + 2 (p'-1)/p') n beta + (1 + (p'-1)/p') n gamma (an estimate).
    """
    p2, rem = pow2_split(comm.size)
    new, acc = yield from fold_in(comm, x, op)
    if new is not None:
        count = len(x)
        acc = yield from _halving(comm, acc, new, p2, rem,
                                  lambda j: block_start(count, p2, j), op)
        acc = yield from _doubling(comm, acc, new, p2, rem)
    return (yield from fold_out(comm, acc))


# -- reduce_scatter / recursive_halving --------------------------------------------------
def _reduce_scatter_time(p: int, nbytes: int, alpha: float, beta: float,
                         gamma: float) -> float:
    """log2 p alpha + (p-1)/p n (beta + gamma) (Thakur et al. 2005), exact for p a power
    of two and n divisible by p.

    Otherwise p' replaces p, the fold adds alpha + n beta + n gamma before and
    alpha + n/p beta (block 2i+1 sent to its rank) after (an estimate).
    """
    p2, rem = pow2_split(p)
    rounds = p2.bit_length() - 1
    back = alpha + nbytes / p * beta if rem else 0.0
    return (fold_time(p, nbytes, alpha, beta, gamma) + rounds * alpha
            + (p2 - 1) / p2 * nbytes * (beta + gamma) + back)


def _reduce_scatter_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    count = nbytes // itemsize
    p2, rem = pow2_split(p)
    sent, received = fold_elements(p, count)
    for new in range(p2):
        r = real_rank(new, rem)
        give, get = _halving_elements(
            p2, lambda j: block_start(count, p, real_rank(j, rem)), new)
        sent[r] += give
        received[r] += get
    for r in range(1, 2 * rem, 2):
        block = block_start(count, p, r + 1) - block_start(count, p, r)
        sent[r - 1] += block
        received[r] += block
    return gpu_traffic(sent * itemsize, received * itemsize)


@register("reduce_scatter", "recursive_halving", cost=CostModel(
    time=_reduce_scatter_time, traffic=_reduce_scatter_traffic, exact=_exact,
    ends_together=True))
def recursive_halving_reduce_scatter(comm: Comm, x: Buffer, *, op: ReduceOp) -> BufferProgram:
    """Recursive-halving reduce-scatter: exchange half the range with distance p/2, ..., 1.

    At distance d rank r keeps the half of its current block range that holds block r,
    sends the other half to rank r ^ d and reduces the half it receives; after log2 p
    rounds it holds block r (np.array_split(x, p)[r]) reduced over all ranks.
    Non-power-of-two p: the fold of :mod:`~simcoll.algorithms.fold` (MPICH's
    reduce-scatter folds the mirror way, its even ranks sending to rank + 1: the same
    times, the bytes swapped within each pair); survivor i < rem works for the two blocks
    2i and 2i+1 and sends block 2i+1 to rank 2i+1 at the end.

    Cost for p a power of two and n divisible by p (Thakur et al. 2005):
    log2 p alpha + (p-1)/p n (beta + gamma); each rank sends and receives (p-1)/p n
    bytes. Otherwise, with L = log2 p': (L + 2) alpha + (1 + (p'-1)/p' + 1/p) n beta
    + (1 + (p'-1)/p') n gamma (an estimate).
    """
    p, r = comm.size, comm.rank
    p2, rem = pow2_split(p)
    count = len(x)
    new, acc = yield from fold_in(comm, x, op)
    if new is None:
        return (yield comm.recv(src=r - 1, tag="unfold"))
    acc = yield from _halving(comm, acc, new, p2, rem,
                              lambda j: block_start(count, p, real_rank(j, rem)), op)
    if r >= 2 * rem:
        return acc
    cut = block_start(count, p, r + 1) - block_start(count, p, r)
    comm.send(acc[cut:], dst=r + 1, tag="unfold")
    return acc[:cut]


# -- reduce / rabenseifner ---------------------------------------------------------------
def _reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                 root: int) -> float:
    """2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Thakur et al. 2005), exact
    for p a power of two and n divisible by p, any root.

    Otherwise p' replaces p, the fold adds alpha + n beta + n gamma, and a folded-out
    root (odd, < 2 rem) alpha + n beta more (an estimate).
    """
    p2, rem = pow2_split(p)
    rounds = p2.bit_length() - 1
    forward = alpha + nbytes * beta if root < 2 * rem and root % 2 else 0.0
    return (fold_time(p, nbytes, alpha, beta, gamma) + 2 * rounds * alpha
            + (p2 - 1) / p2 * nbytes * (2 * beta + gamma) + forward)


def _reduce_traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    count = nbytes // itemsize
    p2, rem = pow2_split(p)
    sent, received = fold_elements(p, count)

    def offset(j: int) -> int:
        return block_start(count, p2, j)

    survivor = _survivor(root, rem)
    for new in range(p2):
        r = real_rank(new, rem)
        give, get = _halving_elements(p2, offset, new)
        sent[r] += give
        received[r] += get
        rel = new ^ survivor
        low = rel & -rel if rel else p2
        received[r] += sum(_group(offset, new ^ d, d) for d in distances(low))
        if rel:
            sent[r] += _group(offset, new, low)
    if real_rank(survivor, rem) != root:
        sent[root - 1] += count
        received[root] += count
    return gpu_traffic(sent * itemsize, received * itemsize)


@register("reduce", "rabenseifner", cost=CostModel(
    time=_reduce_time, traffic=_reduce_traffic, exact=_exact))
def rabenseifner_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, root: int) -> Program:
    """Rabenseifner reduce: recursive-halving reduce-scatter, then binomial gather to root.

    The buffer is cut into p' blocks; after the halving survivor i holds block i reduced
    over all ranks, and a binomial tree (distances 1, 2, ..., p'/2) gathers the blocks
    to the survivor of ``root``. Non-power-of-two p: MPICH's fold; when ``root`` itself
    is folded out (odd, < 2 rem), rank root-1 gathers and forwards the result to it.

    Cost for p a power of two and n divisible by p (Thakur et al. 2005):
    2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma; the root receives
    2 (p-1)/p n bytes. Otherwise, with L = log2 p': (2 L + 1) alpha
    + (1 + 2 (p'-1)/p') n beta + (1 + (p'-1)/p') n gamma, plus alpha + n beta if root
    is folded out (an estimate).
    """
    r = comm.rank
    p2, rem = pow2_split(comm.size)
    new, acc = yield from fold_in(comm, x, op)
    if new is None:
        return (yield comm.recv(src=r - 1, tag="root")) if r == root else None
    count = len(x)
    acc = yield from _halving(comm, acc, new, p2, rem, lambda j: block_start(count, p2, j),
                              op)
    survivor = _survivor(root, rem)
    acc = yield from _gather(comm, acc, new, survivor, p2, rem)
    if new != survivor or r == root:
        return acc
    comm.send(acc, dst=root, tag="root")
    return None
