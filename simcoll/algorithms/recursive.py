"""Recursive doubling and halving: ranks pair up with the rank whose number differs in one bit.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005; Rabenseifner, "Optimization of collective reduction
operations", ICCS 2004.

Non-power-of-two rank counts use MPICH's fold (Thakur et al. 2005, section 4.5): with
p' the largest power of two <= p and rem = p - p', the first 2 rem ranks pair up, each
odd rank 2i+1 sends its buffer to rank 2i, which reduces it (rank 2i's buffer on the
left); the p' survivors (rank 2i as new rank i for i < rem, rank r >= 2 rem as new rank
r - rem) run the power-of-two algorithm; then rank 2i sends rank 2i+1 its result. The
all-gather instead uses MPICH's own non-power-of-two recursive doubling (see
:func:`recursive_doubling_all_gather`).

Every reduction puts the lower-numbered side's buffer on the left, so each element is
reduced in one fixed order and every rank of an all-reduce gets the same bits.
"""

from __future__ import annotations

from collections.abc import Callable

from simcoll.algorithms.registry import register
from simcoll.ops import ReduceOp

__all__ = ["recursive_doubling_all_reduce", "rabenseifner_all_reduce",
           "recursive_halving_reduce_scatter", "recursive_doubling_all_gather",
           "rabenseifner_reduce"]


def _pow2_split(p: int) -> tuple[int, int]:
    """(p', rem): the largest power of two p' <= p, and p - p'."""
    p2 = 1 << (p.bit_length() - 1)
    return p2, p - p2


def _offset(count: int, parts: int, i: int) -> int:
    """First element of block ``i`` when ``count`` elements are cut as np.array_split does."""
    q, r = divmod(count, parts)
    return i * q + min(i, r)


def _real(new: int, rem: int) -> int:
    """The rank behind survivor ``new`` of the fold."""
    return 2 * new if new < rem else new + rem


def _fold_in(comm, x, op):
    """MPICH fold: odd rank 2i+1 < 2 rem gives its buffer to rank 2i, which reduces it.

    Returns (new rank, buffer); the new rank is None for the ranks folded out.
    """
    r = comm.rank
    rem = _pow2_split(comm.size)[1]
    if r >= 2 * rem:
        return r - rem, x
    if r % 2:
        comm.send(x, dst=r - 1, tag="fold")
        return None, x
    got = yield comm.recv(src=r + 1, tag="fold")
    return r // 2, (yield comm.reduce(x, got, op))


def _fold_out(comm, result):
    """Undo the fold: rank 2i sends ``result`` to rank 2i+1; returns this rank's result."""
    r = comm.rank
    rem = _pow2_split(comm.size)[1]
    if r >= 2 * rem:
        return result
    if r % 2:
        return (yield comm.recv(src=r - 1, tag="unfold"))
    comm.send(result, dst=r + 1, tag="unfold")
    return result


def _halving(comm, buf, new: int, p2: int, rem: int, offset: Callable[[int], int], op):
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
        other = _real(peer, rem)
        got = yield comm.sendrecv(give, dst=other, src=other, tag=("halving", dist))
        buf = yield (comm.reduce(keep, got, op) if lower else comm.reduce(got, keep, op))
        dist //= 2
    return buf


def _doubling(comm, buf, new: int, p2: int, rem: int):
    """Recursive-doubling all-gather among the p2 survivors, each holding block ``new``."""
    dist = 1
    while dist < p2:
        peer = new ^ dist
        other = _real(peer, rem)
        got = yield comm.sendrecv(buf, dst=other, src=other, tag=("doubling", dist))
        buf = comm.join([buf, got] if new < peer else [got, buf])
        dist *= 2
    return buf


def _gather(comm, buf, new: int, root: int, p2: int, rem: int):
    """Binomial gather of the survivors' blocks to survivor ``root``; None elsewhere.

    At distance d = 1, 2, ..., p2/2 a survivor whose new rank differs from ``root`` in bit
    d (and in no lower bit) sends the blocks it holds, an aligned range of d blocks, to
    new rank ``new ^ d`` and stops; the receiver appends them to its range.
    """
    rel, dist = new ^ root, 1
    while dist < p2:
        peer = new ^ dist
        if rel & dist:
            comm.send(buf, dst=_real(peer, rem), tag=("gather", dist))
            return None
        got = yield comm.recv(src=_real(peer, rem), tag=("gather", dist))
        buf = comm.join([buf, got] if new < peer else [got, buf])
        dist *= 2
    return buf


@register("all_reduce", "recursive_doubling")
def recursive_doubling_all_reduce(comm, x, *, op=ReduceOp.SUM):
    """Recursive-doubling all-reduce: log2 p rounds of whole-buffer exchange and reduce.

    In round k (mask 2^k) rank r swaps its whole buffer with rank r ^ 2^k and reduces.
    Non-power-of-two p: MPICH's fold (module docstring).

    Cost for p a power of two (Thakur et al. 2005): log2 p (alpha + n beta + n gamma);
    each rank sends and receives n log2 p bytes. Otherwise, with L = log2 p':
    (L + 2)(alpha + n beta) + (L + 1) n gamma when no two messages share a link; in the
    simulation the survivors that skipped the fold send early and share links with it, so
    this is an estimate. Folded-out ranks send and receive n bytes, their partners
    (L + 1) n, the other ranks L n.
    """
    p = comm.size
    p2, rem = _pow2_split(p)
    new, acc = yield from _fold_in(comm, x, op)
    if new is not None:
        mask = 1
        while mask < p2:
            peer = new ^ mask
            other = _real(peer, rem)
            got = yield comm.sendrecv(acc, dst=other, src=other, tag=("doubling", mask))
            acc = yield (comm.reduce(acc, got, op) if new < peer else comm.reduce(got, acc, op))
            mask *= 2
    return (yield from _fold_out(comm, acc))


@register("all_reduce", "rabenseifner")
def rabenseifner_all_reduce(comm, x, *, op=ReduceOp.SUM):
    """Rabenseifner all-reduce: recursive-halving reduce-scatter, recursive-doubling all-gather.

    The buffer is cut into p' blocks (np.array_split). The halving leaves survivor i with
    block i reduced over all ranks; the doubling gathers the blocks everywhere.
    Non-power-of-two p: MPICH's fold (module docstring).

    Cost for p a power of two and n divisible by p (Thakur et al. 2005; Rabenseifner 2004):
    2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma; each rank sends and receives
    2 (p-1)/p n bytes. Otherwise, with L = log2 p' and the fold:
    2 (L + 1) alpha + (2 + 2 (p'-1)/p') n beta + (1 + (p'-1)/p') n gamma (an estimate).
    """
    p2, rem = _pow2_split(comm.size)
    new, acc = yield from _fold_in(comm, x, op)
    if new is not None:
        count = len(x)
        acc = yield from _halving(comm, acc, new, p2, rem,
                                  lambda j: _offset(count, p2, j), op)
        acc = yield from _doubling(comm, acc, new, p2, rem)
    return (yield from _fold_out(comm, acc))


@register("reduce_scatter", "recursive_halving")
def recursive_halving_reduce_scatter(comm, x, *, op=ReduceOp.SUM):
    """Recursive-halving reduce-scatter: exchange half the range with distance p/2, ..., 1.

    At distance d rank r keeps the half of its current block range that holds block r,
    sends the other half to rank r ^ d and reduces the half it receives; after log2 p
    rounds it holds block r (np.array_split(x, p)[r]) reduced over all ranks.
    Non-power-of-two p: MPICH's fold (module docstring); survivor i < rem works for the
    two blocks 2i and 2i+1 and sends block 2i+1 to rank 2i+1 at the end.

    Cost for p a power of two and n divisible by p (Thakur et al. 2005):
    log2 p alpha + (p-1)/p n (beta + gamma); each rank sends and receives (p-1)/p n
    bytes. Otherwise, with L = log2 p': (L + 2) alpha + (1 + (p'-1)/p' + 1/p) n beta
    + (1 + (p'-1)/p') n gamma (an estimate).
    """
    p, r = comm.size, comm.rank
    p2, rem = _pow2_split(p)
    count = len(x)
    new, acc = yield from _fold_in(comm, x, op)
    if new is None:
        return (yield comm.recv(src=r - 1, tag="unfold"))
    acc = yield from _halving(comm, acc, new, p2, rem,
                              lambda j: _offset(count, p, _real(j, rem)), op)
    if r >= 2 * rem:
        return acc
    cut = _offset(count, p, r + 1) - _offset(count, p, r)
    comm.send(acc[cut:], dst=r + 1, tag="unfold")
    return acc[:cut]


@register("all_gather", "recursive_doubling")
def recursive_doubling_all_gather(comm, x):
    """Recursive-doubling all-gather: log2 p exchanges of everything gathered so far.

    At mask 2^k rank r swaps its blocks with rank r ^ 2^k, so it holds the blocks of the
    aligned group of 2^(k+1) ranks around it. For p not a power of two this is MPICH's
    algorithm (Thakur et al. 2005): where the partner group is only partly there, the
    ranks that had a partner pass the partner group's blocks on to the others of their
    group by recursive halving inside it.

    Cost for p a power of two (Thakur et al. 2005): log2 p alpha + (p-1) n beta; each rank
    sends and receives (p-1) n bytes. Otherwise ceil(log2 p) alpha + (p-1) n beta plus
    the extra messages of the halving steps (an estimate); every rank still receives
    (p-1) n bytes and sends what its partners need.
    """
    p, r = comm.size, comm.rank
    count = len(x)
    buf, mask = x, 1
    while mask < p:
        dst = r ^ mask
        if dst < p:
            got = yield comm.sendrecv(buf, dst=dst, src=dst, tag=("doubling", mask))
            buf = comm.join([buf, got] if r < dst else [got, buf])
        group = r & ~(mask - 1)
        present = p - (group + mask)
        if not r & mask and 0 < present < mask:
            buf = yield from _pass_on(comm, buf, mask, present, count)
        mask *= 2
    return buf


def _pass_on(comm, buf, mask: int, present: int, count: int):
    """Inside an aligned group of ``mask`` ranks, the first ``present`` of which hold the
    partner group's ``present`` blocks, hand those blocks to the rest (MPICH)."""
    r = comm.rank
    dist = mask // 2
    while dist:
        rel = r & (2 * dist - 1)
        if not r & dist and rel < present <= rel + dist:
            comm.send(buf[mask * count:], dst=r + dist, tag=("pass", mask, dist))
        elif r & dist and rel - dist < present <= rel:
            got = yield comm.recv(src=r - dist, tag=("pass", mask, dist))
            buf = comm.join([buf, got])
        dist //= 2
    return buf


@register("reduce", "rabenseifner")
def rabenseifner_reduce(comm, x, *, op=ReduceOp.SUM, root=0):
    """Rabenseifner reduce: recursive-halving reduce-scatter, then binomial gather to root.

    The buffer is cut into p' blocks; after the halving survivor i holds block i reduced
    over all ranks, and a binomial tree (distances 1, 2, ..., p'/2) gathers the blocks
    to the survivor of ``root``. Non-power-of-two p: MPICH's fold (module docstring);
    when ``root`` itself is folded out (odd, < 2 rem), rank root-1 gathers and forwards
    the result to it.

    Cost for p a power of two and n divisible by p (Thakur et al. 2005):
    2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma; the root receives
    2 (p-1)/p n bytes. Otherwise, with L = log2 p': (2 L + 1) alpha
    + (1 + 2 (p'-1)/p') n beta + (1 + (p'-1)/p') n gamma, plus alpha + n beta if root
    is folded out (an estimate).
    """
    r = comm.rank
    p2, rem = _pow2_split(comm.size)
    new, acc = yield from _fold_in(comm, x, op)
    if new is None:
        return (yield comm.recv(src=r - 1, tag="root")) if r == root else None
    count = len(x)
    acc = yield from _halving(comm, acc, new, p2, rem, lambda j: _offset(count, p2, j), op)
    survivor = root // 2 if root < 2 * rem else root - rem
    acc = yield from _gather(comm, acc, new, survivor, p2, rem)
    if new != survivor or r == root:
        return acc
    comm.send(acc, dst=root, tag="root")
    return None
