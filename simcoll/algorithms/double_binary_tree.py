"""NCCL's double binary tree all-reduce: half the buffer pipelined up and down each tree.

Each half of the buffer is cut into K = ``chunks`` pieces as np.array_split does (empty
pieces travel as zero-byte messages when a default K exceeds the element count). Each
rank keeps at most one message in flight per destination and stream, so pieces flow
back to back.

Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth broadcast, reduction and
scan", Parallel Computing 35(12), 2009, as NCCL 2.4 builds it (src/graph/trees.cc:
ncclGetBtree, ncclGetDtree).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from simpy.events import AnyOf, Event

from simcoll.algorithms.params import Int
from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, Chunks, block_bytes, split
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic, processor_sharing
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram, Steps

__all__ = ["double_binary_tree_all_reduce", "binary_tree", "double_binary_tree"]

Tree = list[tuple[int | None, list[int]]]

CHUNKS = {"chunks": Int(8, minimum=1, at_most_elements=True,
                        doc="pieces each half of the buffer travels in")}


def binary_tree(p: int, r: int) -> tuple[int | None, list[int]]:
    """(parent, children) of rank r in NCCL's binary tree over 0..p-1 (ncclGetBtree).

    Rank 0 is the root, with one child: the largest power of two below p. Rank r > 0 with
    lowest set bit b has parent (r - b) + 2b if that is < p, else r - b, and children
    r - b/2 and r + d for the largest d in b/2, b/4, ..., 1 with r + d < p. Odd ranks are
    leaves.
    """
    if r == 0:
        return None, ([1 << (p - 1).bit_length() - 1] if p > 1 else [])
    bit = r & -r
    parent = (r ^ bit) | (bit << 1)
    if parent >= p:
        parent = r ^ bit
    children = []
    half = bit >> 1
    if half:
        children.append(r - half)
        while half and r + half >= p:
            half >>= 1
        if half:
            children.append(r + half)
    return parent, children


def double_binary_tree(p: int, r: int, tree: int) -> tuple[int | None, list[int]]:
    """(parent, children) of rank r in tree 0 or 1 of NCCL's double binary tree.

    Tree 1 is tree 0 mirrored (rank r plays p - 1 - r) for even p, shifted (r plays
    r - 1) for odd p. Mirroring swaps odd and even, so for even p every rank is a leaf
    in one tree; for odd p that holds for every rank but 0, interior in both.
    """
    if tree == 0:
        return binary_tree(p, r)
    there: Callable[[int], int]
    back: Callable[[int], int]
    if p % 2 == 0:
        there = back = lambda q: p - 1 - q
    else:
        there, back = (lambda q: (q - 1) % p), (lambda q: (q + 1) % p)
    parent, children = binary_tree(p, there(r))
    return (None if parent is None else back(parent)), [back(c) for c in children]


def _reduce_piece(comm: Comm, piece: Buffer, children: list[int], op: ReduceOp,
                  tag: int) -> Steps:
    arriving = [comm.recv(src=c, tag=tag) for c in children]
    acc = piece
    for event in arriving:
        got = yield event
        acc = yield comm.reduce(acc, got, op)
    return acc


def _up(comm: Comm, parts: Chunks, parent: int, children: list[int], op: ReduceOp,
        tag: int) -> Steps:
    """A non-root rank: reduce each piece with its children's, send it to the parent."""
    sending: list[Event] = []
    for part in list(parts):
        acc = yield from _reduce_piece(comm, part, children, op, tag)
        for event in sending:
            yield event
        sending = [comm.send(acc, dst=parent, tag=tag)]
    for event in sending:
        yield event


def _down(comm: Comm, parts: Chunks, parent: int, children: list[int], tag: int) -> Steps:
    """A non-root rank: take each reduced piece from the parent, pass it to the children."""
    sending: list[Event] = []
    for k in range(len(parts)):
        parts[k] = yield comm.recv(src=parent, tag=tag)
        for event in sending:
            yield event
        sending = [comm.send(parts[k], dst=c, tag=tag) for c in children]
    for event in sending:
        yield event


def _root(comm: Comm, parts: Chunks, children: list[int], op: ReduceOp, tag: int) -> Steps:
    """The root: finish each piece's reduction and start it down the tree."""
    sending: list[Event] = []
    for k in range(len(parts)):
        parts[k] = yield from _reduce_piece(comm, parts[k], children, op, tag)
        for event in sending:
            yield event
        sending = [comm.send(parts[k], dst=c, tag=tag) for c in children]
    for event in sending:
        yield event


def _side_by_side(programs: Sequence[Steps]) -> Steps:
    """Run sub-programs of one rank concurrently; each yields events that comm returned.

    Waits for whichever pending event is processed first (one SimPy ``AnyOf`` over them:
    a chain of ``|`` left its inner conditions, never triggered, alive in reference
    cycles to the end of the run) and resumes the sub-programs whose events are done,
    as NCCL runs each tree on its own channel.
    """
    waiting: dict[Event, Steps] = {}

    def advance(program: Steps, value: Any) -> None:
        try:
            waiting[program.send(value)] = program
        except StopIteration:
            pass

    for program in programs:
        advance(program, None)
    while waiting:
        yield AnyOf(next(iter(waiting)).env, list(waiting))
        for event in [e for e in waiting if e.processed]:
            advance(waiting.pop(event), event.value)


# -- cost model --------------------------------------------------------------------------
def _trees(p: int) -> list[Tree]:
    return [[double_binary_tree(p, r, t) for r in range(p)] for t in (0, 1)]


def _traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """For each tree, its half times the rank's edges in it (children, and the parent)."""
    halves = block_bytes(nbytes, 2, itemsize)
    moved = np.zeros(p, dtype=np.int64)
    if p > 1:
        for half, tree in zip(halves, _trees(p)):
            for r, (parent, children) in enumerate(tree):
                moved[r] += half * (len(children) + (parent is not None))
    return gpu_traffic(moved, moved)


def _one_piece_tree_time(tree: Tree, piece: float, alpha: float, beta: float,
                         gamma: float) -> float:
    """One piece up a tree and back down, links shared only within the tree."""
    def up(v: int) -> float:
        children = tree[v][1]
        arrive = processor_sharing([(up(c) + alpha, piece * beta) for c in children])
        now = 0.0
        for t in arrive:
            now = max(now, t) + piece * gamma
        return now

    def down(v: int, start: float) -> float:
        children = tree[v][1]
        reach = start + alpha + len(children) * piece * beta
        return max((down(c, reach) for c in children), default=start)

    root = next(r for r, (parent, _) in enumerate(tree) if parent is None)
    return down(root, up(root))


def _exact(p: int, nbytes: int, itemsize: int, *, chunks: int) -> bool:
    return p == 1 or (chunks == 1 and (nbytes // itemsize) % 2 == 0)


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
          chunks: int) -> float:
    """Fill + (K - 1) max(alpha + d c beta, e c gamma), with c = n / (2K) (ours).

    Fill is one piece's trip up and down the slower tree, each parent's incoming link
    shared by its children's pieces (processor sharing) and its outgoing link by its
    sends to them. Then one piece per period leaves each tree: d is the largest number of
    tree edges at one rank, summed over both trees (4 for even p >= 4: interior in one
    tree, leaf in the other), so each link carries d c bytes per period, and the message
    latency of an edge is not hidden (one piece in flight per edge); e is the largest
    number of children at one rank, whose pieces it reduces each period.

    Exact for K = 1 and an even element count (the trees then never delay each other's
    critical path; checked for every p <= 64). Otherwise an estimate: over p <= 32,
    K <= 32, 4 KB .. 64 MB, alpha = 1 us, beta from 1 / (100 GB/s) to 1 ns a byte and
    gamma from 0 to beta, the simulated time was 0.68 .. 1.29 times this (a sweep of
    2026-12-05). It is below 1 where the two trees' streams on a link hide each other's
    latency, which the estimate charges every period (p = 2 and many pieces: 0.688
    at K = 32), and above 1 for small p and few pieces, where the chain of pieces waiting
    on each other, not a steady period, sets the time (p = 3, K = 2: 1.29).
    """
    if p == 1:
        return 0.0
    piece = nbytes / (2 * chunks)
    trees = _trees(p)
    fill = max(_one_piece_tree_time(tree, piece, alpha, beta, gamma) for tree in trees)
    edges = max(sum(len(t[r][1]) + (t[r][0] is not None) for t in trees) for r in range(p))
    children = max(sum(len(t[r][1]) for t in trees) for r in range(p))
    return fill + (chunks - 1) * max(alpha + edges * piece * beta, children * piece * gamma)


@register("all_reduce", "double_binary_tree", params=CHUNKS, cost=CostModel(
    time=_time, traffic=_traffic, exact=_exact))
def double_binary_tree_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp,
                                  chunks: int) -> BufferProgram:
    """NCCL's double binary tree all-reduce: half the buffer on each of two trees.

    x is cut in two halves (np.array_split); half t is reduced up tree t and broadcast
    back down it, in K = ``chunks`` pieces per half. The two trees are complementary
    (see ``double_binary_tree``), and a rank runs up to four streams at once: up and
    down on each tree. Pieces go up as soon as the children's pieces are reduced in, and
    down as soon as they arrive; the up and down streams of a tree use opposite link
    directions, so they overlap. A rank sending to two children sends to both at once,
    sharing its link.

    Cost (ours, see the cost model), with c = n / (2K) bytes per piece: one piece's trip
    up and down the slower tree, then K - 1 periods of max(alpha + d c beta, e c gamma),
    where d is the most tree edges at one rank over both trees (4 for even p >= 4) and
    e the most children. Exact for K = 1 and an even element count; otherwise an
    estimate the simulation lands within 0.68 .. 1.29 of (see the cost model). Bytes
    per rank, sent and received alike: for each tree, its half times the rank's edges in
    it (children, plus one for the parent). Source: Sanders, Speck & Traeff 2009;
    NCCL 2.4.
    """
    p, r = comm.size, comm.rank
    if p == 1:
        return x
    halves = split(x, 2)
    results, programs = [], []
    for t in (0, 1):
        parent, children = double_binary_tree(p, r, t)
        parts = split(halves[t], chunks)
        results.append(parts)
        if parent is None:
            programs.append(_root(comm, parts, children, op, t))
        else:
            programs.append(_up(comm, parts, parent, children, op, t))
            programs.append(_down(comm, parts, parent, children, t))
    yield from _side_by_side(programs)
    return comm.join([comm.join(parts) for parts in results])
