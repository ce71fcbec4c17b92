"""Direct algorithms: every rank messages every peer at once, in one or two rounds.

Each round issues all p-1 messages of a rank concurrently, so on the reference network
they share the rank's link and all arrive together: one alpha per round instead of one
per message (the flow model overlaps latencies; the single-port alpha-beta model of
Thakur, Rabenseifner & Gropp 2005 would charge (p-1) alpha). This is how NCCL's and
MPICH's "isend/irecv to everyone" all-to-all and scattered collectives behave.

Times (derived here for the flow model on the reference network): a round in which every
rank sends k messages at once and receives k at once shares each link max-min fairly
among them, so a round of k equal messages of m bytes takes alpha + k m beta. With uneven
blocks (count not divisible by p) every receiver still drains its p-1 equal blocks, so
the formulas take m as the largest block, ceil(count/p) elements (n/p for even blocks):
the ranks that receive it finish last. Its receivers' links stay full: their p-1 flows
are each a 1/(p-1) share from the start, since no link carries more than p-1 flows. So
the reduce-scatter and all-to-all times are exact for every size, but the ranks finish
apart where blocks are uneven. The all-reduce's time is an estimate there: ranks with
smaller blocks start its second round early, and their messages share links with the
late ones. On the reference network with alpha = 1 us, beta = 1 ns and gamma = 0 to 4 ns
per byte, 1000 runs of random uneven counts (1 to 20000 elements, a third of them fewer
than p) on 2 to 40 ranks matched it within 0.1 %; without latency (alpha = 0) they took
up to 1.25 times it.
"""

from __future__ import annotations

import numpy as np

from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, block_bytes, repeat, split
from simcoll.comm import Comm
from simcoll.cost.model import (
    CostModel,
    Traffic,
    even_blocks,
    exchange_traffic,
    gpu_traffic,
    largest_block,
)
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram, Steps

__all__ = ["direct_all_reduce", "direct_reduce_scatter", "direct_all_gather",
           "direct_all_to_all"]


def _scatter_reduce(comm: Comm, x: Buffer, op: ReduceOp) -> Steps:
    """Send block j of x to rank j for every j at once; reduce block ``rank`` in rank order.

    Reducing x_0 op x_1 op ... op x_{p-1} makes the result independent of arrival order.
    """
    p, r = comm.size, comm.rank
    chunks = split(x, p)
    for peer in range(p):
        if peer != r:
            comm.send(chunks[peer], dst=peer)
    acc = None
    for peer in range(p):
        got = chunks[r] if peer == r else (yield comm.recv(src=peer))
        acc = got if acc is None else (yield comm.reduce(acc, got, op))
    return acc


def _reduce_scatter_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                         itemsize: int) -> float:
    """alpha + (p-1) m (beta + gamma) for p > 1, else 0; m the largest block (n/p when
    count divides by p: alpha + (p-1)/p n (beta + gamma)).

    All blocks arrive at alpha + (p-1) m beta, then p-1 reductions of m bytes follow.
    Exact for every size (module docstring).
    """
    if p == 1:
        return 0.0
    return alpha + (p - 1) * largest_block(nbytes, p, itemsize) * (beta + gamma)


# Not ends_together: with uneven blocks the ranks with smaller blocks finish first.
@register("reduce_scatter", "direct", cost=CostModel(
    time=_reduce_scatter_time, traffic=exchange_traffic))
def direct_reduce_scatter(comm: Comm, x: Buffer, *, op: ReduceOp) -> BufferProgram:
    """Direct reduce-scatter: send block j to rank j for all j at once, reduce in rank order.

    With m = n/p: each rank's p-1 sends share its link and its p-1 receives share its
    link, so all blocks arrive at alpha + (p-1) m beta; then p-1 reductions of m bytes.
    Cost: alpha + (p-1)/p n beta + (p-1)/p n gamma (derived here; with uneven blocks the
    largest block, ceil(count/p) elements, replaces m, exactly). Each rank sends
    n - m_r bytes and receives (p-1) m_r bytes, m_r the size of its own block r.
    """
    return (yield from _scatter_reduce(comm, x, op))


def _all_reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                     itemsize: int) -> float:
    """2 alpha + 2 (p-1) m beta + (p-1) m gamma for p > 1, else 0; m the largest block
    (n/p when count divides by p: 2 alpha + 2 (p-1)/p n beta + (p-1)/p n gamma).

    Round 1 (direct reduce-scatter) ends at alpha + (p-1) m (beta + gamma); all ranks
    start round 2 together and its p-1 sends of m bytes take alpha + (p-1) m beta.
    Exact when count is divisible by p; otherwise the ranks with smaller blocks start
    round 2 early and their messages share links with the late ones, so this is an
    estimate.
    """
    if p == 1:
        return 0.0
    share = (p - 1) * largest_block(nbytes, p, itemsize)
    return 2 * alpha + 2 * share * beta + share * gamma


def _all_reduce_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    blocks = block_bytes(nbytes, p, itemsize)
    volume = blocks.sum() - blocks + (p - 1) * blocks
    return gpu_traffic(volume, volume)


@register("all_reduce", "direct", cost=CostModel(
    time=_all_reduce_time, traffic=_all_reduce_traffic, exact=even_blocks,
    ends_together=True))
def direct_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp) -> BufferProgram:
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
    blocks = split(x, p)
    blocks[r] = mine
    for peer in range(p):
        if peer != r:
            blocks[peer] = yield comm.recv(src=peer, tag=1)
    return comm.join(blocks)


def _all_gather_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """alpha + (p-1) n beta for p > 1, else 0; exact for every size."""
    if p == 1:
        return 0.0
    return alpha + (p - 1) * nbytes * beta


def _all_gather_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    volume = np.full(p, (p - 1) * nbytes)
    return gpu_traffic(volume, volume)


@register("all_gather", "direct", cost=CostModel(
    time=_all_gather_time, traffic=_all_gather_traffic, ends_together=True))
def direct_all_gather(comm: Comm, x: Buffer) -> BufferProgram:
    """Direct all-gather: send x to all p-1 peers at once, concatenate in rank order.

    Cost: alpha + (p-1) n beta (derived here: the p-1 sends share the link). Each rank
    sends and receives (p-1) n bytes, the all-gather lower bound.
    """
    p, r = comm.size, comm.rank
    for peer in range(p):
        if peer != r:
            comm.send(x, dst=peer)
    blocks = repeat(x, p)
    for peer in range(p):
        if peer != r:
            blocks[peer] = yield comm.recv(src=peer)
    return comm.join(blocks)


def _all_to_all_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                     itemsize: int) -> float:
    """alpha + (p-1) m beta for p > 1, else 0; m the largest block (n/p when count
    divides by p: alpha + (p-1)/p n beta).

    Exact for every size (module docstring).
    """
    if p == 1:
        return 0.0
    return alpha + (p - 1) * largest_block(nbytes, p, itemsize) * beta


# Not ends_together: with uneven blocks the ranks with smaller blocks finish first.
@register("all_to_all", "direct", cost=CostModel(
    time=_all_to_all_time, traffic=exchange_traffic))
def direct_all_to_all(comm: Comm, x: Buffer) -> BufferProgram:
    """Direct all-to-all: send block j of x to rank j for all j at once (p^2 flows).

    Cost: alpha + (p-1)/p n beta (derived here; with uneven blocks the largest block,
    ceil(count/p) elements, replaces n/p, exactly). Rank r sends n - m_r bytes and
    receives (p-1) m_r bytes, m_r the size of block r.
    """
    p, r = comm.size, comm.rank
    chunks = split(x, p)
    for peer in range(p):
        if peer != r:
            comm.send(chunks[peer], dst=peer)
    blocks = repeat(chunks[r], p)
    for peer in range(p):
        if peer != r:
            blocks[peer] = yield comm.recv(src=peer)
    return comm.join(blocks)
