"""Bruck algorithms: ceil(log2 p) steps at distances 1, 2, 4, ... for any number of ranks.

Both run ceil(log2 p) steps in which every rank sends one message and receives one; when
all ranks' messages in a step have the same size the ranks stay in lockstep and the sums
below are exact.

Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all
communications in multiport message-passing systems", IEEE TPDS 8(11), 1997; as used in
MPICH (Thakur, Rabenseifner & Gropp 2005) for short all-gathers and all-to-alls.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, VirtualBuffer, block_size, split, split_sizes
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, even_blocks, gpu_traffic
from simcoll.typing import BufferProgram

__all__ = ["bruck_all_gather", "bruck_all_to_all", "slots_with_bit"]


def _distances(p: int) -> list[int]:
    """1, 2, 4, ... below p: one per step."""
    return [1 << k for k in range(max(p - 1, 0).bit_length())]


def slots_with_bit(p: int, dist: int) -> int:
    """How many of 0..p-1 have the bit ``dist`` (a power of two) set."""
    return (p // (2 * dist)) * dist + max(0, p % (2 * dist) - dist)


# -- all_gather --------------------------------------------------------------------------
def _all_gather_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """ceil(log2 p) alpha + (p-1) n beta; exact for every size (all messages of a step
    have the same size)."""
    return len(_distances(p)) * alpha + (p - 1) * nbytes * beta


def _all_gather_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    volume = np.full(p, (p - 1) * nbytes)
    return gpu_traffic(volume, volume)


@register("all_gather", "bruck", cost=CostModel(
    time=_all_gather_time, traffic=_all_gather_traffic, ends_together=True))
def bruck_all_gather(comm: Comm, x: Buffer) -> BufferProgram:
    """Bruck concatenation all-gather, any p.

    Rank r holds the blocks of ranks r, r+1, ... (mod p) contiguously. In step k it sends
    its first min(2^k, p - 2^k) blocks to rank r - 2^k and appends the ones it receives
    from rank r + 2^k; after ceil(log2 p) steps it holds all p blocks and rotates them
    locally into rank order (free: no data moves between ranks).

    Cost: ceil(log2 p) alpha + (p-1) n beta (Bruck et al. 1997). Each rank sends and
    receives (p-1) n bytes.
    """
    p, r = comm.size, comm.rank
    count = len(x)
    held, dist = x, 1
    while dist < p:
        blocks = min(dist, p - dist)
        got = yield comm.sendrecv(held[:blocks * count], dst=(r - dist) % p,
                                  src=(r + dist) % p)
        held = comm.join([held, got])
        dist *= 2
    split_at = (p - r) * count
    return comm.join([held[split_at:], held[:split_at]])


# -- all_to_all --------------------------------------------------------------------------
def _all_to_all_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """Sum over steps at distance d of alpha + c_d n/p beta, c_d the slots with bit d set.

    Exact when count is divisible by p; with uneven blocks a step's messages differ in
    size between ranks and n/p is an estimate of the block size: 1.000-1.023 times it on
    the reference network with alpha = 1 us (beta = 1 ns, gamma 0 to 4 ns, 2 to 40
    ranks, 1 to 20000 elements), up to 15 times without latency (one element on 38
    ranks: its block crosses whole, not as n/p bytes).
    """
    return sum(alpha + slots_with_bit(p, d) * nbytes / p * beta for d in _distances(p))


def _all_to_all_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """Exact bytes of the index algorithm for array_split blocks.

    In the step at distance d, rank t forwards slot i (bit d set) to t + d; that block is
    bound for rank t + (i with the bits below d cleared), so its size is that rank's
    block. The first ``big`` ranks' blocks hold one extra element; for each rank the
    number of forwarded blocks bound for them is counted with a circular difference array.
    """
    count = nbytes // itemsize
    small, big = split_sizes(count, p)
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    for dist in _distances(p):
        slots = np.arange(dist, p)
        slots = slots[(slots & dist) != 0]
        step = np.full(p, len(slots) * small, dtype=np.int64)
        if big:
            starts = (-(slots & -dist)) % p
            diff = np.zeros(2 * p + 1, dtype=np.int64)
            np.add.at(diff, starts, 1)
            np.add.at(diff, starts + big, -1)
            inside = np.cumsum(diff)[:2 * p]
            step += inside[:p] + inside[p:]
        sent += step * itemsize
        received += np.roll(step, dist) * itemsize
    return gpu_traffic(sent, received)


def _slots(p: int, dist: int) -> Iterator[int]:
    """The slots 0..p-1 whose index has the bit ``dist`` set, in order."""
    return (i for i in range(dist, p) if i & dist)


def _bruck_all_to_all_counts(comm: Comm, x: VirtualBuffer) -> BufferProgram:
    """:func:`bruck_all_to_all` without data: the blocks' element counts in one array by
    position, each step's message the sum of its slots' counts. The blocks one by one
    took about p/2 Python operations a step per rank whatever the size: 7.8 s for the
    10,240 messages of 1024 ranks, where the all_gather's Bruck takes 0.34 s."""
    p, r = comm.size, comm.rank
    small, big = split_sizes(x.count, p)
    counts = small + (np.arange(p) < big)   # position j holds block j, as split cuts it
    dist = 1
    while dist < p:
        slots = np.arange(dist, p)
        slots = slots[(slots & dist) != 0]
        positions = (r + slots) % p
        packed = VirtualBuffer.of(int(counts[positions].sum()), x.dtype)
        yield comm.sendrecv(packed, dst=(r + dist) % p, src=(r - dist) % p)
        # from rank r - dist, bound for (r - dist) + (i without its bits below dist)
        counts[positions] = small + ((r - dist + (slots & -dist)) % p < big)
        dist *= 2
    return VirtualBuffer.of(int(counts.sum()), x.dtype)


@register("all_to_all", "bruck", cost=CostModel(
    time=_all_to_all_time, traffic=_all_to_all_traffic, exact=even_blocks,
    ends_together=True))
def bruck_all_to_all(comm: Comm, x: Buffer) -> BufferProgram:
    """Bruck index all-to-all, any p.

    After a local rotation, slot i of rank r holds the block rank r sends to rank r+i. In
    step k every rank sends the blocks of all slots whose index has bit k set to rank
    r + 2^k (packed into one message) and puts the ones it receives from rank r - 2^k in
    the same slots. A block in slot i thus travels i ranks: slot i of rank r ends up
    holding the block from rank r - i, and an inverse rotation puts it in place.

    Rotations are index arithmetic here: slot i is stored at position (r + i) mod p, so
    blocks keep the array_split sizing of their position where they can (O(1) state per
    rank in data-free mode for evenly dividing sizes).

    Cost: sum over steps k of (alpha + c_k n/p beta), with c_k the number of i < p with
    bit k set: ceil(log2 p) alpha + sum_k c_k n/p beta, about log2(p)/2 n beta (Bruck et
    al. 1997; Thakur et al. 2005). Bytes per rank: sum_k of the blocks it forwards.
    """
    if type(x) is VirtualBuffer:
        return (yield from _bruck_all_to_all_counts(comm, x))
    p, r = comm.size, comm.rank
    count = len(x)
    chunks = split(x, p)
    dist = 1
    while dist < p:
        packed = comm.join([chunks[(r + i) % p] for i in _slots(p, dist)])
        got = yield comm.sendrecv(packed, dst=(r + dist) % p, src=(r - dist) % p)
        start = 0
        for i in _slots(p, dist):
            # The block came from rank r - dist, bound for (r - dist) + (i without bits < k).
            size = block_size(count, p, (r - dist + (i & -dist)) % p)
            chunks[(r + i) % p] = got[start:start + size]
            start += size
        dist *= 2
    return comm.join([chunks[(2 * r - j) % p] for j in range(p)])
