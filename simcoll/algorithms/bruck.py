"""Bruck algorithms: ceil(log2 p) steps at distances 1, 2, 4, ... for any number of ranks.

Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all
communications in multiport message-passing systems", IEEE TPDS 8(11), 1997; as used in
MPICH (Thakur, Rabenseifner & Gropp 2005) for short all-gathers and all-to-alls.
"""

from __future__ import annotations

from simcoll.algorithms.registry import register

__all__ = ["bruck_all_gather", "bruck_all_to_all"]


@register("all_gather", "bruck")
def bruck_all_gather(comm, x):
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
    split = (p - r) * count
    return comm.join([held[split:], held[:split]])


@register("all_to_all", "bruck")
def bruck_all_to_all(comm, x):
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
    p, r = comm.size, comm.rank
    q, big = divmod(len(x), p)
    chunks = comm.split_buffer(x, p)
    dist = 1
    while dist < p:
        slots = [i for i in range(dist, p) if i & dist]
        packed = comm.join([chunks[(r + i) % p] for i in slots])
        got = yield comm.sendrecv(packed, dst=(r + dist) % p, src=(r - dist) % p)
        start = 0
        for i in slots:
            # The block came from rank r - dist, bound for (r - dist) + (i without bits < k).
            dest = (r - dist + (i & -dist)) % p
            size = q + (dest < big)
            chunks[(r + i) % p] = got[start:start + size]
            start += size
        dist *= 2
    return comm.join([chunks[(2 * r - j) % p] for j in range(p)])
