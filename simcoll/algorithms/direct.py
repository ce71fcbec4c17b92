"""Direct algorithms: every rank messages every peer at once, in one or two rounds.

Each round issues all p-1 messages of a rank concurrently, so on the reference network
they share the rank's link and all arrive together: one alpha per round instead of one
per message (the flow model overlaps latencies; the single-port alpha-beta model of
Thakur, Rabenseifner & Gropp 2005 would charge (p-1) alpha). This is how NCCL's and
MPICH's "isend/irecv to everyone" all-to-all and scattered collectives behave.
"""

from __future__ import annotations

from simcoll.algorithms.registry import register
from simcoll.ops import ReduceOp

__all__ = ["direct_all_reduce", "direct_reduce_scatter", "direct_all_gather",
           "direct_all_to_all"]


def _scatter_reduce(comm, x, op):
    """Send block j of x to rank j for every j at once; reduce block ``rank`` in rank order.

    Reducing x_0 op x_1 op ... op x_{p-1} makes the result independent of arrival order.
    """
    p, r = comm.size, comm.rank
    chunks = comm.split_buffer(x, p)
    for peer in range(p):
        if peer != r:
            comm.send(chunks[peer], dst=peer)
    acc = None
    for peer in range(p):
        got = chunks[r] if peer == r else (yield comm.recv(src=peer))
        acc = got if acc is None else (yield comm.reduce(acc, got, op))
    return acc


@register("reduce_scatter", "direct")
def direct_reduce_scatter(comm, x, *, op=ReduceOp.SUM):
    """Direct reduce-scatter: send block j to rank j for all j at once, reduce in rank order.

    With m = n/p: each rank's p-1 sends share its link and its p-1 receives share its
    link, so all blocks arrive at alpha + (p-1) m beta; then p-1 reductions of m bytes.
    Cost: alpha + (p-1)/p n beta + (p-1)/p n gamma (derived here; with uneven blocks the
    largest block, ceil(count/p) elements, replaces m). Each rank sends n - m bytes and
    receives (p-1) m bytes, its own block m.
    """
    return (yield from _scatter_reduce(comm, x, op))


@register("all_reduce", "direct")
def direct_all_reduce(comm, x, *, op=ReduceOp.SUM):
    """Direct all-reduce: a direct reduce-scatter, then every rank sends its share to all.

    Rank r reduces block r from the p-1 blocks its peers send it at once (in rank order),
    then sends the reduced block to all p-1 peers at once and joins the blocks it gets.
    Cost on the reference network (derived here; each round's p-1 messages share a link):
    2 alpha + 2 (p-1)/p n beta + (p-1)/p n gamma, the bandwidth-optimal volume in two
    latencies. Each rank sends and receives (n - m) + (p-1) m bytes, m its own block.
    """
    p, r = comm.size, comm.rank
    mine = yield from _scatter_reduce(comm, x, op)
    for peer in range(p):
        if peer != r:
            comm.send(mine, dst=peer, tag=1)
    blocks = []
    for peer in range(p):
        blocks.append(mine if peer == r else (yield comm.recv(src=peer, tag=1)))
    return comm.join(blocks)


@register("all_gather", "direct")
def direct_all_gather(comm, x):
    """Direct all-gather: send x to all p-1 peers at once, concatenate in rank order.

    Cost: alpha + (p-1) n beta (derived here: the p-1 sends share the link). Each rank
    sends and receives (p-1) n bytes, the all-gather lower bound.
    """
    p, r = comm.size, comm.rank
    for peer in range(p):
        if peer != r:
            comm.send(x, dst=peer)
    blocks = []
    for peer in range(p):
        blocks.append(x if peer == r else (yield comm.recv(src=peer)))
    return comm.join(blocks)


@register("all_to_all", "direct")
def direct_all_to_all(comm, x):
    """Direct all-to-all: send block j of x to rank j for all j at once (p^2 flows).

    Cost: alpha + (p-1)/p n beta (derived here; with uneven blocks the largest block,
    ceil(count/p) elements, replaces n/p). Rank r sends n - m_r bytes and receives
    (p-1) m_r bytes, m_r the size of block r.
    """
    p, r = comm.size, comm.rank
    chunks = comm.split_buffer(x, p)
    for peer in range(p):
        if peer != r:
            comm.send(chunks[peer], dst=peer)
    blocks = []
    for peer in range(p):
        blocks.append(chunks[r] if peer == r else (yield comm.recv(src=peer)))
    return comm.join(blocks)
