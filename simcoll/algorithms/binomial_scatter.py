"""Binomial-tree scatter and gather (MPICH), and van de Geijn's scatter-allgather broadcast.

Trees as in :mod:`simcoll.algorithms.binomial_tree`: relative ranks v = (rank - root) mod
p, the subtree of v holds relative ranks v .. v + subtree_size(v, p) - 1. Blocks are cut as
np.array_split does, and every rank keeps O(1) state besides the buffers it holds (in
data-free mode the sizes of any block follow from the element count in O(1)).

Times are for the single-port alpha-beta reference network; n is each rank's input in
bytes (the root's whole buffer for scatter) and L = ceil(log2 p). Traffic is exact for
every p, root and size. Binomial gather is exact for every p by the processor-sharing
argument of :mod:`simcoll.algorithms.binomial_tree`.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005; Barnett, Gupta, Payne, Shuler, van de Geijn & Watts,
"Interprocessor collective communication library (InterCom)", SHPCC 1994.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from simcoll.algorithms.binomial_tree import (
    binomial_children,
    binomial_parent,
    subtree_size,
    tree_steps,
)
from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, block_bytes, block_start, split
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, even_blocks, gpu_traffic, processor_sharing
from simcoll.typing import BufferProgram, Program

__all__ = ["binomial_gather", "binomial_scatter", "scatter_allgather_broadcast"]


def _subtree_traffic(p: int, block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sent, received) per relative rank when each rank receives, from its parent, the
    blocks of its subtree (``block[j]``: bytes of relative block j)."""
    start = np.concatenate([[0], np.cumsum(block)])
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    for v in range(1, p):
        piece = start[v + subtree_size(v, p)] - start[v]
        sent[binomial_parent(v)] += piece
        received[v] += piece
    return sent, received


# -- gather ------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def _gather_time(size: int, alpha: float, beta: float, nbytes: int) -> float:
    """When the root of a binomial subtree of ``size`` ranks holds all its blocks."""
    children = [min(m, size - m) for m in (1 << k for k in range(tree_steps(size)))]
    arrive = processor_sharing([(_gather_time(s, alpha, beta, nbytes) + alpha,
                                 s * nbytes * beta) for s in children])
    return max(arrive, default=0.0)


def _binomial_gather_time(p: int, nbytes: int, alpha: float, beta: float,
                          gamma: float) -> float:
    """L alpha + (p-1) n beta for p a power of two (Thakur et al. 2005).

    Other p: the processor-sharing recursion (exact).
    """
    return _gather_time(p, alpha, beta, nbytes)


def _gather_traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    size = np.array([subtree_size(v, p) for v in range(p)], dtype=np.int64)
    sent = size * nbytes
    sent[0] = 0
    return gpu_traffic(np.roll(sent, root), np.roll((size - 1) * nbytes, root))


@register("gather", "binomial", cost=CostModel(
    time=_binomial_gather_time, traffic=_gather_traffic))
def binomial_gather(comm: Comm, x: Buffer, *, root: int) -> Program:
    """Binomial-tree gather (MPICH): subtrees are collected bottom up and sent as one.

    Each rank receives its children's subtree buffers, smallest subtree first, appends
    them to its own x (relative rank order), and sends the lot to its parent. The root
    puts the p blocks back in rank order.

    Cost: ceil(log2 p) alpha + (p-1) n beta for p a power of two (children's messages
    reach a parent one after another); for other p some children send to the same
    parent at once and share its link, which the model replays. A rank whose subtree
    holds s ranks sends s n bytes to its parent and receives (s-1) n bytes. Source:
    Thakur et al. 2005.
    """
    p = comm.size
    v = (comm.rank - root) % p
    pieces = [x]
    for child, _ in reversed(list(binomial_children(v, p))):
        pieces.append((yield comm.recv(src=(child + root) % p)))
    if v:
        yield comm.send(comm.join(pieces), dst=(binomial_parent(v) + root) % p)
        return None
    return comm.join(_rotated(pieces, (p - root) * len(x)))


def _rotated(pieces: list[Buffer], at: int) -> list[Buffer]:
    """The pieces of a buffer, reordered to start at element ``at`` (cut where needed)."""
    for i, piece in enumerate(pieces):
        if at < len(piece) or i == len(pieces) - 1:
            return [piece[at:], *pieces[i + 1:], *pieces[:i], piece[:at]]
        at -= len(piece)
    return pieces


# -- scatter -----------------------------------------------------------------------------
def _scatter_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """L alpha + (p-1)/p n beta (Thakur et al. 2005); exact for every p when the element
    count divides by p (uneven blocks: 0.998-1.010 times it at alpha = 1 us, beta = 1 ns,
    2 to 40 ranks; 0.78-3.09 times without latency).

    Derivation (ours) for other p: every rank receives once and sends one message at a
    time, so no link is shared. The root sends L messages carrying p-1 blocks back to
    back. A child with mask m then has at most log2 m sends of at most m - 1 blocks left,
    while the root still has exactly log2 m sends of m - 1 blocks (its smaller subtrees
    are complete), so by induction no rank finishes after the root.
    """
    return tree_steps(p) * alpha + (p - 1) / p * nbytes * beta


def _scatter_traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    sent, received = _subtree_traffic(p, np.roll(block_bytes(nbytes, p, itemsize), -root))
    return gpu_traffic(np.roll(sent, root), np.roll(received, root))


@register("scatter", "binomial", cost=CostModel(
    time=_scatter_time, traffic=_scatter_traffic, exact=even_blocks))
def binomial_scatter(comm: Comm, x: Buffer, *, root: int) -> BufferProgram:
    """Binomial-tree scatter (MPICH): each rank passes its children their subtree's blocks.

    The root's x is cut into p blocks as np.array_split does; rank r gets block r.
    Relative rank v receives the blocks of its subtree (relative ranks v .. v + s - 1, as
    one message) and sends each child its part, farthest child first
    (:func:`~simcoll.algorithms.binomial_tree.binomial_children`), one at a time.

    Cost: ceil(log2 p) alpha + (p-1)/p n beta, exact for every p when count is divisible
    by p (no link is ever shared; the root's chain of sends is the critical path). A rank
    whose subtree holds blocks B receives B's bytes and sends B's bytes less its own.
    Source: Thakur et al. 2005.
    """
    p = comm.size
    v = (comm.rank - root) % p
    count = len(x)
    first = block_start(count, p, root)

    def start(j: int) -> int:
        """First element of relative block j in the blocks laid out in relative order."""
        end = root + j
        if end <= p:
            return block_start(count, p, end) - first
        return count - first + block_start(count, p, end - p)

    if v == 0:
        # The root lays its blocks out in relative order once; every message is a slice.
        held = comm.join([x[first:], x[:first]]) if root else x
        base = 0
    else:
        held = yield comm.recv(src=(binomial_parent(v) + root) % p)
        base = start(v)
    for child, mask in binomial_children(v, p):
        end = min(child + mask, p)
        yield comm.send(held[start(child) - base:start(end) - base], dst=(child + root) % p)
    return held[:start(v + 1) - base]


# -- broadcast ---------------------------------------------------------------------------
def _scatter_allgather_time(p: int, nbytes: int, alpha: float, beta: float,
                            gamma: float) -> float:
    """(L + p - 1) alpha + 2 (p-1)/p n beta (Thakur et al. 2005).

    Exact for every p when the element count divides by p (derivation ours); with uneven
    blocks 1.000-1.003 times it at alpha = 1 us (beta = 1 ns, 2 to 40 ranks), up to 19.5
    times without latency (one element on 39 ranks: its block makes p - 1 ring steps
    whole, not as n/p bytes). The scatter
    alone takes L alpha + (p-1)/p n beta: the root's back-to-back sends are its critical
    path. No link is ever shared: a rank's left ring neighbour is, in the scatter, either
    its parent (which sends to it last) or reached only after it, so the neighbour's
    first ring message never overlaps the rank's scatter message. A ring step then ends
    at max(own previous step, left neighbour's previous step) + alpha + n/p beta, and
    after p - 1 steps every rank has waited for the slowest scatter finish, the root's.
    """
    if p == 1:
        return 0.0
    return (tree_steps(p) + p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta


def _scatter_allgather_traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    block = block_bytes(nbytes, p, itemsize)
    sent, received = _subtree_traffic(p, block)
    if p > 1:
        everything = block.sum()
        sent += everything - np.roll(block, -1)
        received += everything - block
    return gpu_traffic(np.roll(sent, root), np.roll(received, root))


@register("broadcast", "scatter_allgather", cost=CostModel(
    time=_scatter_allgather_time, traffic=_scatter_allgather_traffic, exact=even_blocks,
    ends_together=True))
def scatter_allgather_broadcast(comm: Comm, x: Buffer, *, root: int) -> BufferProgram:
    """Van de Geijn broadcast: binomial scatter of p blocks, then a ring all-gather.

    x is cut into p blocks as np.array_split does (the first count % p blocks get one
    more element; with fewer elements than ranks the last blocks are empty and travel as
    zero-byte messages). Relative rank v owns block v; the binomial scatter hands each
    child the contiguous blocks of its subtree, farthest child first. Then p - 1 ring
    steps in relative order pass the blocks on until every rank holds all of them.

    Cost with count divisible by p: scatter ceil(log2 p) alpha + (p-1)/p n beta, then
    all-gather (p-1)(alpha + n/p beta), in total
    (ceil(log2 p) + p - 1) alpha + 2 (p-1)/p n beta, for every p (see the cost model).
    Bytes: each non-root rank receives its subtree's blocks, then every block but its
    own in the ring; each rank sends every block but its right neighbour's in the ring.
    Source: Barnett et al. 1994; Thakur et al. 2005 (MPICH's long-message broadcast).
    """
    p = comm.size
    if p == 1:
        return x
    v = (comm.rank - root) % p
    count = len(x)
    blocks = split(x, p)
    def start(j: int) -> int:
        return block_start(count, p, j)

    if v:
        got = yield comm.recv(src=(binomial_parent(v) + root) % p)
        held, base = got, start(v)
        for j in range(v, v + subtree_size(v, p)):
            blocks[j] = got[start(j) - base:start(j + 1) - base]
    else:
        held, base = x, 0
    for child, mask in binomial_children(v, p):
        end = min(child + mask, p)
        yield comm.send(held[start(child) - base:start(end) - base], dst=(child + root) % p)
    right, left = (comm.rank + 1) % p, (comm.rank - 1) % p
    for step in range(p - 1):
        send, keep = (v - step) % p, (v - step - 1) % p
        blocks[keep] = yield comm.sendrecv(blocks[send], dst=right, src=left)
    return comm.join(blocks)
