"""Pipelined algorithms: the buffer travels in ``chunks`` pieces along a chain or a tree.

A buffer is cut into K = ``chunks`` pieces as np.array_split does (the first count % K
pieces get one more element; with fewer elements than K the last pieces are empty and
travel as zero-byte messages, so the schedule never depends on the size). Each rank keeps
at most one message in flight per destination: it waits for piece k to arrive before
sending piece k + 1 over the same edge, so pieces flow back to back.

Chains: Thakur, Rabenseifner & Gropp, IJHPCA 19(1), 2005 (pipelined broadcast and reduce).
Double binary tree: Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth
broadcast, reduction and scan", Parallel Computing 35(12), 2009, as NCCL 2.4 builds it
(src/graph/trees.cc: ncclGetBtree, ncclGetDtree).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Generator, Sequence

from simcoll.algorithms.registry import register
from simcoll.errors import InvalidInputError
from simcoll.ops import ReduceOp

__all__ = ["pipeline_broadcast", "ring_reduce", "double_binary_tree_all_reduce",
           "binary_tree", "double_binary_tree", "DEFAULT_CHUNKS"]

DEFAULT_CHUNKS = 8


def _validate(p, count, hosts, *, chunks=DEFAULT_CHUNKS):
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise InvalidInputError(f"chunks={chunks!r} is not accepted; use an integer >= 1")


@register("broadcast", "pipeline", validate=_validate)
def pipeline_broadcast(comm, x, *, root=0, chunks=DEFAULT_CHUNKS):
    """Pipelined chain broadcast: root -> root+1 -> ... -> root-1, in K pieces.

    The root sends the pieces one after another; every other rank forwards each piece
    to the next rank as soon as it has it (and its previous forward has arrived).

    Cost: (p - 2 + K)(alpha + n/K beta) for p >= 2 when K divides the element count.
    With uneven pieces (the first count % K one element larger, c the largest in bytes)
    it is (p - 2 + K) alpha + (n + (p-2) c) beta: a flow shop whose pieces take the same
    time at every hop. Each rank but the last sends n bytes; each but the root receives
    n bytes. Source: Thakur et al. 2005.
    """
    p = comm.size
    if p == 1:
        return x
    v = (comm.rank - root) % p
    parts = comm.split_buffer(x, chunks)
    nxt, prev = (comm.rank + 1) % p, (comm.rank - 1) % p
    if v == 0:
        for part in parts:
            yield comm.send(part, dst=nxt)
        return x
    for k in range(len(parts)):
        parts[k] = yield comm.recv(src=prev)
        if v < p - 1:
            yield comm.send(parts[k], dst=nxt)
    return comm.join(parts)


@register("reduce", "ring", validate=_validate)
def ring_reduce(comm, x, *, op=ReduceOp.SUM, root=0, chunks=DEFAULT_CHUNKS):
    """Pipelined chain reduce toward the root: root-1 -> root-2 -> ... -> root, in K pieces.

    The rank farthest from the root (root - 1 mod p) sends its pieces one after another.
    Every other rank reduces each incoming piece into its own and passes it on; piece
    k + 1 is reduced while piece k is still on the wire. The root keeps the result.

    Cost, with T = alpha + n/K beta per hop and R = n/K gamma per reduction, for p >= 2
    when K divides the element count: (p-1)(T + R) + (K-1) max(T, R) (a flow shop of
    p - 1 links and p - 1 reduction engines, every piece taking the same time on each).
    Each rank but the root sends n bytes; each but root - 1 receives n bytes. Source:
    Thakur et al. 2005 (pipelined reduce).
    """
    p = comm.size
    if p == 1:
        return x
    v = (comm.rank - root) % p
    parts = comm.split_buffer(x, chunks)
    toward, away = (comm.rank - 1) % p, (comm.rank + 1) % p
    if v == p - 1:
        for part in parts:
            yield comm.send(part, dst=toward)
        return None
    sending = None
    for k in range(len(parts)):
        got = yield comm.recv(src=away)
        acc = yield comm.reduce(parts[k], got, op)
        if v == 0:
            parts[k] = acc
            continue
        if sending is not None:
            yield sending
        sending = comm.send(acc, dst=toward)
    if v:
        yield sending
        return None
    return comm.join(parts)


# -- double binary tree ------------------------------------------------------------------
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
    if p % 2 == 0:
        def there(q):
            return p - 1 - q
        back = there
    else:
        def there(q):
            return (q - 1) % p

        def back(q):
            return (q + 1) % p
    parent, children = binary_tree(p, there(r))
    return (None if parent is None else back(parent)), [back(c) for c in children]


def _reduce_piece(comm, piece, children, op, tag):
    arriving = [comm.recv(src=c, tag=tag) for c in children]
    acc = piece
    for event in arriving:
        got = yield event
        acc = yield comm.reduce(acc, got, op)
    return acc


def _up(comm, parts, parent, children, op, tag):
    """A non-root rank: reduce each piece with its children's, send it to the parent."""
    sending = None
    for part in list(parts):
        acc = yield from _reduce_piece(comm, part, children, op, tag)
        if sending is not None:
            yield sending
        sending = comm.send(acc, dst=parent, tag=tag)
    yield sending


def _down(comm, parts, parent, children, tag):
    """A non-root rank: take each reduced piece from the parent, pass it to the children."""
    sending: list = []
    for k in range(len(parts)):
        parts[k] = yield comm.recv(src=parent, tag=tag)
        for event in sending:
            yield event
        sending = [comm.send(parts[k], dst=c, tag=tag) for c in children]
    for event in sending:
        yield event


def _root(comm, parts, children, op, tag):
    """The root: finish each piece's reduction and start it down the tree."""
    sending: list = []
    for k in range(len(parts)):
        parts[k] = yield from _reduce_piece(comm, parts[k], children, op, tag)
        for event in sending:
            yield event
        sending = [comm.send(parts[k], dst=c, tag=tag) for c in children]
    for event in sending:
        yield event


def _side_by_side(programs: Sequence[Generator]):
    """Run sub-programs of one rank concurrently; each yields events that comm returned.

    Waits for whichever pending event is processed first (SimPy's ``|``) and resumes the
    sub-programs whose events are done, as NCCL runs each tree on its own channel.
    """
    waiting: dict = {}

    def advance(program, value):
        try:
            waiting[program.send(value)] = program
        except StopIteration:
            pass

    for program in programs:
        advance(program, None)
    while waiting:
        yield functools.reduce(operator.or_, waiting)
        for event in [e for e in waiting if e.processed]:
            advance(waiting.pop(event), event.value)


@register("all_reduce", "double_binary_tree", validate=_validate)
def double_binary_tree_all_reduce(comm, x, *, op=ReduceOp.SUM, chunks=DEFAULT_CHUNKS):
    """NCCL's double binary tree all-reduce: half the buffer on each of two trees.

    x is cut in two halves (np.array_split); half t is reduced up tree t and broadcast
    back down it, in K = ``chunks`` pieces per half. The two trees are complementary
    (see ``double_binary_tree``), and a rank runs up to four streams at once: up and
    down on each tree. Pieces go up as soon as the children's
    pieces are reduced in, and down as soon as they arrive; the up and down streams of a
    tree use opposite link directions, so they overlap. A rank sending to two children
    sends to both at once, sharing its link.

    Cost (ours, ``simcoll.cost.pipeline``), with c = n / (2K) bytes per piece: one
    piece's trip up and down the slower tree, then K - 1 periods of
    max(alpha + d c beta, e c gamma), where d is the most tree edges at one rank over
    both trees (4 for even p >= 4) and e the most children. Exact for K = 1 and an even
    element count; otherwise an estimate within about 0.89 .. 1.21 of the simulation.
    Bytes per rank, sent and received alike: for each tree, its half times the rank's
    edges in it (children, plus one for the parent). Source: Sanders, Speck & Traeff 2009; NCCL 2.4.
    """
    p, r = comm.size, comm.rank
    if p == 1:
        return x
    halves = comm.split_buffer(x, 2)
    results, programs = [], []
    for t in (0, 1):
        parent, children = double_binary_tree(p, r, t)
        parts = comm.split_buffer(halves[t], chunks)
        results.append(parts)
        if parent is None:
            programs.append(_root(comm, parts, children, op, t))
        else:
            programs.append(_up(comm, parts, parent, children, op, t))
            programs.append(_down(comm, parts, parent, children, t))
    yield from _side_by_side(programs)
    return comm.join([comm.join(parts) for parts in results])
