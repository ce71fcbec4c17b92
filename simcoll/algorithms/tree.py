"""Binomial-tree algorithms (MPICH), van de Geijn's broadcast and the dissemination barrier.

Rooted algorithms work on relative ranks v = (rank - root) mod p, so the root is v = 0.
In the binomial tree over v, the parent of v > 0 is v minus its lowest set bit, and the
children of v are v + m for every power of two m below that bit (below p for the root)
with v + m < p. Any p >= 1 works; for p a power of two the tree is complete.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005; Barnett, Gupta, Payne, Shuler, van de Geijn & Watts,
"Interprocessor collective communication library (InterCom)", SHPCC 1994; Hensgen,
Finkel & Manber, "Two algorithms for barrier synchronization", IJPP 17(1), 1988.
"""

from __future__ import annotations

from collections.abc import Iterator

from simcoll.algorithms.registry import register
from simcoll.ops import ReduceOp

__all__ = ["binomial_broadcast", "scatter_allgather_broadcast", "binomial_reduce",
           "tree_all_reduce", "binomial_gather", "binomial_scatter",
           "dissemination_barrier", "binomial_children", "binomial_parent"]

_REDUCE, _BROADCAST = "reduce", "broadcast"


def binomial_parent(v: int) -> int:
    """Parent of relative rank v > 0: v without its lowest set bit."""
    return v & (v - 1)


def binomial_children(v: int, p: int) -> Iterator[tuple[int, int]]:
    """(child, mask) pairs of relative rank v, largest subtree first.

    The subtree of child c = v + mask holds the relative ranks c .. min(c + mask, p) - 1.
    """
    top = v & -v if v else 1 << max(p - 1, 0).bit_length()
    mask = top >> 1
    while mask:
        if v + mask < p:
            yield v + mask, mask
        mask >>= 1


def _bcast(comm, x, root, tag=0):
    """Binomial broadcast body: receive from the parent, then send to each child in turn."""
    p = comm.size
    v = (comm.rank - root) % p
    if v:
        x = yield comm.recv(src=(binomial_parent(v) + root) % p, tag=tag)
    for child, _ in binomial_children(v, p):
        yield comm.send(x, dst=(child + root) % p, tag=tag)
    return x


def _reduce(comm, x, op, root, tag=0):
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


@register("broadcast", "binomial")
def binomial_broadcast(comm, x, *, root=0):
    """Binomial-tree broadcast (MPICH's short-message broadcast).

    Each rank receives x from its parent, then sends it to its children one at a time,
    largest subtree first, waiting for each send to arrive before the next.

    Cost: ceil(log2 p) (alpha + n beta) for every p >= 1 (the root sends ceil(log2 p)
    messages back to back). Each non-root rank receives n bytes; a rank with c children
    sends c n bytes (the root ceil(log2 p) n). Source: Thakur et al. 2005.
    """
    return (yield from _bcast(comm, x, root))


@register("broadcast", "scatter_allgather")
def scatter_allgather_broadcast(comm, x, *, root=0):
    """Van de Geijn broadcast: binomial scatter of p blocks, then a ring all-gather.

    x is cut into p blocks as np.array_split does (the first count % p blocks get one
    more element; with fewer elements than ranks the last blocks are empty and travel as
    zero-byte messages). Relative rank v owns block v; the binomial scatter hands each
    child the contiguous blocks of its subtree, largest subtree first. Then p - 1 ring
    steps in relative order pass the blocks on until every rank holds all of them.

    Cost with count divisible by p: scatter ceil(log2 p) alpha + (p-1)/p n beta, then
    all-gather (p-1)(alpha + n/p beta), in total
    (ceil(log2 p) + p - 1) alpha + 2 (p-1)/p n beta; exact for p a power of two. For
    other p a rank that finishes the scatter early may start its ring send while its
    ring neighbour is still receiving its scatter blocks, so the time can be larger.
    Bytes: each non-root rank receives its subtree's blocks, then every block but its
    own in the ring; each rank sends every block but its right neighbour's in the ring.
    Source: Barnett et al. 1994; Thakur et al. 2005 (MPICH's long-message broadcast).
    """
    p = comm.size
    if p == 1:
        return x
    v = (comm.rank - root) % p
    blocks = comm.split_buffer(x, p)
    start = [0]
    for j in range(p):
        start.append(start[-1] + len(blocks[j]))
    if v:
        own = min(v & -v, p - v)
        got = yield comm.recv(src=(binomial_parent(v) + root) % p)
        for j in range(v, v + own):
            blocks[j] = got[start[j] - start[v]:start[j + 1] - start[v]]
        held, base = got, start[v]
    else:
        held, base = x, 0
    for child, mask in binomial_children(v, p):
        end = min(child + mask, p)
        yield comm.send(held[start[child] - base:start[end] - base], dst=(child + root) % p)
    right, left = (comm.rank + 1) % p, (comm.rank - 1) % p
    for step in range(p - 1):
        send, keep = (v - step) % p, (v - step - 1) % p
        blocks[keep] = yield comm.sendrecv(blocks[send], dst=right, src=left)
    return comm.join(blocks)


@register("reduce", "binomial")
def binomial_reduce(comm, x, *, op=ReduceOp.SUM, root=0):
    """Binomial-tree reduce (MPICH's short-message reduce).

    Each rank receives its children's partial results, smallest subtree first, reduces
    each into its own as it arrives, and sends the result to its parent.

    Cost: ceil(log2 p) (alpha + n beta + n gamma) for p a power of two. For other p some
    children send to the same parent at once and share its link; the model then follows
    the tree's critical path as if they did not (an estimate). Each non-root rank sends
    n bytes; a rank with c children receives c n bytes. Source: Thakur et al. 2005.
    """
    return (yield from _reduce(comm, x, op, root))


@register("all_reduce", "tree")
def tree_all_reduce(comm, x, *, op=ReduceOp.SUM):
    """Binomial reduce to rank 0, then binomial broadcast from rank 0.

    Cost: ceil(log2 p) (2 alpha + 2 n beta + n gamma) for p a power of two; otherwise
    the reduce is estimated as in ``reduce/binomial`` and the broadcast is exact. Each
    rank sends and receives (c + 1) n bytes where c is its number of children (rank 0:
    ceil(log2 p) n each way). Source: Thakur et al. 2005.
    """
    acc = yield from _reduce(comm, x, op, 0, tag=_REDUCE)
    return (yield from _bcast(comm, x if acc is None else acc, 0, tag=_BROADCAST))


@register("gather", "binomial")
def binomial_gather(comm, x, *, root=0):
    """Binomial-tree gather (MPICH): subtrees are collected bottom up and sent as one.

    Each rank receives its children's subtree buffers, smallest subtree first, appends
    them to its own x (relative rank order), and sends the lot to its parent. The root
    puts the p blocks back in rank order.

    Cost: ceil(log2 p) alpha + (p-1) n beta, exact for p a power of two (children's
    messages reach a parent one after another). For other p some children send to the
    same parent at once and share its link; the formula is then an estimate. A rank
    whose subtree holds s ranks sends s n bytes to its parent and receives (s-1) n
    bytes. Source: Thakur et al. 2005.
    """
    p = comm.size
    v = (comm.rank - root) % p
    blocks = [x]
    for child, mask in reversed(list(binomial_children(v, p))):
        got = yield comm.recv(src=(child + root) % p)
        blocks.extend(comm.split_buffer(got, min(mask, p - child)))
    if v:
        yield comm.send(comm.join(blocks), dst=(binomial_parent(v) + root) % p)
        return None
    return comm.join(blocks[p - root:] + blocks[:p - root])


@register("scatter", "binomial")
def binomial_scatter(comm, x, *, root=0):
    """Binomial-tree scatter (MPICH): each rank passes its children their subtree's blocks.

    The root's x is cut into p blocks as np.array_split does; rank r gets block r.
    Relative rank v receives the blocks of its subtree (relative ranks v .. v + s - 1, as
    one message) and sends each child its part, largest subtree first, one at a time.

    Cost: ceil(log2 p) alpha + (p-1)/p n beta, exact for every p when count is divisible
    by p (no link is ever shared; the root's chain of sends is the critical path). A rank
    whose subtree holds blocks B receives B's bytes and sends B's bytes less its own.
    Source: Thakur et al. 2005.
    """
    p = comm.size
    v = (comm.rank - root) % p
    blocks = comm.split_buffer(x, p)
    size = [len(blocks[(j + root) % p]) for j in range(p)]
    if v == 0:
        held = [blocks[(j + root) % p] for j in range(p)]
    else:
        got = yield comm.recv(src=(binomial_parent(v) + root) % p)
        held, at = [], 0
        for j in range(v, v + min(v & -v, p - v)):
            held.append(got[at:at + size[j]])
            at += size[j]
    for child, mask in binomial_children(v, p):
        part = held[child - v:min(child + mask, p) - v]
        yield comm.send(comm.join(part), dst=(child + root) % p)
    return held[0]


@register("barrier", "dissemination")
def dissemination_barrier(comm, x):
    """Dissemination barrier: in round k each rank signals rank + 2^k, waits for rank - 2^k.

    After ceil(log2 p) rounds every rank has heard, directly or not, from every other.
    Messages carry no data (``None``). Cost: ceil(log2 p) alpha for every p. Each rank
    sends and receives ceil(log2 p) zero-byte messages. Source: Hensgen, Finkel & Manber
    1988.
    """
    p, r = comm.size, comm.rank
    distance, round_ = 1, 0
    while distance < p:
        yield comm.sendrecv(None, dst=(r + distance) % p, src=(r - distance) % p, tag=round_)
        distance, round_ = 2 * distance, round_ + 1
    return None
