"""Recursive doubling: in round k rank r pairs up with rank r ^ 2^k and exchanges everything.

All-reduce: whole-buffer exchange and reduce, log2 p rounds, with MPICH's fold (see
:mod:`simcoll.algorithms.fold`) for other p. All-gather: MPICH's algorithm for any p.
Every reduction puts the lower-numbered side's buffer on the left, so each element is
reduced in one fixed order and every rank of an all-reduce gets the same bits.

Times are for the single-port alpha-beta reference network, exact for p a power of two.
For other p they are estimates that ignore link sharing: the ranks that skip the fold run
ahead and their messages share links with late ones, so the simulation is slower, by
about 5-15 % for p < 16 and up to about 40 % for p near 1000 with large buffers. Traffic
is exact for every p and size.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

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
from simcoll.buffers import Buffer
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram, Steps

__all__ = ["recursive_doubling_all_reduce", "recursive_doubling_all_gather"]


# -- all_reduce --------------------------------------------------------------------------
def _all_reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """log2 p (alpha + n beta + n gamma) for p a power of two (Thakur et al. 2005), any n.

    Otherwise the fold adds alpha + n beta + n gamma before and alpha + n beta after the
    log2 p' rounds (an estimate).
    """
    p2, rem = pow2_split(p)
    rounds = p2.bit_length() - 1
    back = alpha + nbytes * beta if rem else 0.0
    return (fold_time(p, nbytes, alpha, beta, gamma)
            + rounds * (alpha + nbytes * (beta + gamma)) + back)


def _all_reduce_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    count = nbytes // itemsize
    p2, rem = pow2_split(p)
    sent, received = fold_elements(p, count)
    rounds = p2.bit_length() - 1
    for new in range(p2):
        r = real_rank(new, rem)
        sent[r] += rounds * count
        received[r] += rounds * count
    sent[0:2 * rem:2] += count
    received[1:2 * rem:2] += count
    return gpu_traffic(sent * itemsize, received * itemsize)


def _exact_pow2(p: int, nbytes: int, itemsize: int) -> bool:
    return is_pow2(p)


@register("all_reduce", "recursive_doubling", cost=CostModel(
    time=_all_reduce_time, traffic=_all_reduce_traffic, exact=_exact_pow2,
    ends_together=True))
def recursive_doubling_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp) -> BufferProgram:
    """Recursive-doubling all-reduce: log2 p rounds of whole-buffer exchange and reduce.

    In round k (mask 2^k) rank r swaps its whole buffer with rank r ^ 2^k and reduces.
    Non-power-of-two p: MPICH's fold (:mod:`simcoll.algorithms.fold`).

    Cost for p a power of two (Thakur et al. 2005): log2 p (alpha + n beta + n gamma);
    each rank sends and receives n log2 p bytes. Otherwise, with L = log2 p':
    (L + 2)(alpha + n beta) + (L + 1) n gamma when no two messages share a link; in the
    simulation the survivors that skipped the fold send early and share links with it, so
    this is an estimate. Folded-out ranks send and receive n bytes, their partners
    (L + 1) n, the other ranks L n.
    """
    p2, rem = pow2_split(comm.size)
    new, acc = yield from fold_in(comm, x, op)
    if new is not None:
        mask = 1
        while mask < p2:
            peer = new ^ mask
            other = real_rank(peer, rem)
            got = yield comm.sendrecv(acc, dst=other, src=other, tag=("doubling", mask))
            acc = yield (comm.reduce(acc, got, op) if new < peer else comm.reduce(got, acc, op))
            mask *= 2
    return (yield from fold_out(comm, acc))


# -- all_gather --------------------------------------------------------------------------
def _messages(p: int) -> Iterator[tuple[int, int, int]]:
    """(src, dst, blocks) of every message of MPICH's recursive-doubling all-gather."""
    for mask in distances(p):
        for r in range(p):
            if r ^ mask < p:
                group = r & ~(mask - 1)
                yield r, r ^ mask, min(group + mask, p) - group
        for group in range(0, p, 2 * mask):
            present = p - (group + mask)
            if not 0 < present < mask:
                continue
            for dist in distances(mask):
                for r in range(group, group + mask):
                    rel = r & (2 * dist - 1)
                    if not r & dist and rel < present <= rel + dist:
                        yield r, r + dist, present


def _all_gather_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    for src, dst, blocks in _messages(p):
        sent[src] += blocks * nbytes
        received[dst] += blocks * nbytes
    return gpu_traffic(sent, received)


def _all_gather_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """log2 p alpha + (p-1) n beta (Thakur et al. 2005), exact for p a power of two.

    Otherwise (derived here) the sum, over masks 2^k < p, of the exchange
    alpha + 2^k n beta plus, when the partner group holds only ``present`` < 2^k ranks,
    alpha + present n beta for each halving step that passes blocks on (those of
    distance d > present / 2): the critical path without link sharing, an estimate.
    """
    total = 0.0
    for mask in distances(p):
        total += alpha + mask * nbytes * beta
        present = p - ((p - 1) & ~(2 * mask - 1)) - mask
        if 0 < present < mask:
            steps = sum(1 for d in distances(mask) if 2 * d > present)
            total += steps * (alpha + present * nbytes * beta)
    return total


def _pass_on(comm: Comm, buf: Buffer, mask: int, present: int, count: int) -> Steps:
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


@register("all_gather", "recursive_doubling", cost=CostModel(
    time=_all_gather_time, traffic=_all_gather_traffic, exact=_exact_pow2,
    ends_together=True))
def recursive_doubling_all_gather(comm: Comm, x: Buffer) -> BufferProgram:
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
