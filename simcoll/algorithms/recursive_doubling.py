"""Recursive doubling: in round k rank r pairs up with rank r ^ 2^k and exchanges everything.

All-reduce: whole-buffer exchange and reduce, log2 p rounds, with MPICH's fold (see
:mod:`simcoll.algorithms.fold`) for other p. All-gather: MPICH's algorithm for any p.
Every reduction puts the lower-numbered side's buffer on the left, so each element is
reduced in one fixed order and every rank of an all-reduce gets the same bits.

Times are for the single-port alpha-beta reference network, exact for p a power of two.
For other p they are estimates that ignore link sharing (the all-gather's is exact on the
analytical network, which has none): the ranks that skip the fold (the all-gather: the
pass-on) run ahead, and their messages share links with late ones. At p = 3, say, rank
2's message to rank 0 shares rank 0's downlink with the fold, so without reductions the
all-reduce takes 3 alpha + 4 n beta against the estimate's 3 (alpha + n beta). Simulated
time / estimate, measured on the reference network with alpha = 1 us, beta = 1 ns per
byte and gamma = 0 (reduce with root 0; ``tests/test_recursive.py`` checks the table):

    nbytes  collective/algorithm              p=3    p=7    p=13   p=513
    64 MiB  all_reduce/recursive_doubling     1.333  1.500  1.400  1.545
    64 MiB  all_reduce/rabenseifner           1.167  1.214  1.233  1.250
    64 MiB  reduce_scatter/recursive_halving  1.273  1.358  1.458  1.506
    64 MiB  reduce/rabenseifner               1.250  1.300  1.318  1.333
    64 MiB  all_gather/recursive_doubling     1.250  1.300  1.250  1.221
    64 B    all_reduce/recursive_doubling     1.020  1.015  1.012  1.005
    64 B    all_reduce/rabenseifner           1.008  1.005  1.004  1.019
    64 B    reduce_scatter/recursive_halving  1.010  1.010  1.011  1.005
    64 B    reduce/rabenseifner               1.010  1.006  1.004  0.997
    64 B    all_gather/recursive_doubling     1.020  1.023  1.031  1.028

Over all p = 3..63 that are not powers of two these five run 1.13-1.63 times their
estimate with 64 MiB and 0.99-1.15 times with 64 B (with beta = 0.1 ns and gamma =
0.03 ns per byte, 64 MiB: 1.11-1.53): the estimates hold within 15 % for latency-bound
sizes, while large buffers take up to 1.63 times the estimate
(reduce_scatter/recursive_halving at p = 39), a little more on more ranks (1.68 at
p = 159). Only the reduce with 64 B ran faster than its estimate (0.995 for every
p >= 33, and at p = 513), its 16 elements leaving most blocks empty. Traffic is exact
for every p and size.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

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
def _exchanges(p: int, mask: int) -> Iterator[tuple[int, int, int]]:
    """(src, dst, blocks) of the exchange at ``mask``: rank r sends the blocks of its
    aligned group of ``mask`` ranks to r ^ mask, where that rank exists."""
    for r in range(p):
        if r ^ mask < p:
            group = r & ~(mask - 1)
            yield r, r ^ mask, min(group + mask, p) - group


def _passes(p: int, mask: int) -> Iterator[tuple[int, int, int]]:
    """(src, dst, blocks) of the pass-on after the exchange at ``mask``, in the order the
    ranks send them (distance mask/2 first): where a partner group holds only
    ``present`` < mask ranks, their blocks go on to the rest of the group (MPICH)."""
    for group in range(0, p, 2 * mask):
        present = p - (group + mask)
        if not 0 < present < mask:
            continue
        for dist in reversed(list(distances(mask))):
            for r in range(group, group + mask):
                rel = r & (2 * dist - 1)
                if not r & dist and rel < present <= rel + dist:
                    yield r, r + dist, present


def _all_gather_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    for mask in distances(p):
        for src, dst, blocks in chain(_exchanges(p, mask), _passes(p, mask)):
            sent[src] += blocks * nbytes
            received[dst] += blocks * nbytes
    return gpu_traffic(sent, received)


def _all_gather_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """log2 p alpha + (p-1) n beta (Thakur et al. 2005), exact for p a power of two.

    Otherwise (derived here) the critical path without link sharing, each message of m
    blocks costing alpha + m n beta however many messages share a link: rank by rank,
    an exchange ends for both partners when the later of their two messages arrives,
    and a pass-on message arrives alpha + present n beta after its sender has the
    blocks (the sender goes on at once). The time is the last rank's end: exact on the
    analytical network, an estimate on the reference network, where messages share
    links.
    """
    ready = [0.0] * p
    for mask in distances(p):
        start = list(ready)
        for src, dst, blocks in _exchanges(p, mask):
            arrival = start[src] + alpha + blocks * nbytes * beta
            ready[src] = max(ready[src], arrival)
            ready[dst] = max(ready[dst], arrival)
        for src, dst, blocks in _passes(p, mask):
            ready[dst] = max(ready[dst], ready[src] + alpha + blocks * nbytes * beta)
    return max(ready)


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
    sends and receives (p-1) n bytes. Otherwise the schedule's critical path without link
    sharing (the model's time; exact on the analytical network, an estimate on the
    reference network); every rank still receives (p-1) n bytes and sends what its
    partners need (p = 3: rank 0 sends 4 n).
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
