"""Ring algorithms: each rank talks only to its two neighbours on a logical ring.

Every ring algorithm here takes ``chunks=K``: each block that travels around the ring is cut
into K pieces (``np.array_split`` sizing) sent one after another, so that the reduction of
one piece overlaps the transfer of the next (as NCCL's ring moves a block in slices).
A rank has one piece in flight per direction at a time; the piece k it forwards in
step s+1 is the piece k it received (and reduced) in step s, so it waits for that
reduction only. ``chunks=1`` is the classic unpipelined ring. The ring reduce is the same
pipeline along the open chain root-1 -> root-2 -> ... -> root.

Cost notation: n = ``nbytes`` (each rank's input), N = (p-1) K piece steps per ring phase,
c = alpha + n beta / (p K) one piece message and g = n gamma / (p K) one piece reduction
(for all_gather a piece is n / K bytes).

Derivation of the pipelined times (K >= 2, ours). A rank sends piece i (in order: step
by step, piece by piece) once piece i-1's exchange is done and, from the second step on,
once the reduction of the piece it forwards (piece i-K) is done; reductions run one at a
time in arrival order. On the reference network every rank follows the same timeline, so
the finishing time is the longest path through these dependencies: link steps cost c
each, reductions g each, and leaving the reduction engine jumps K pieces ahead for one c.
For K >= 2 no path gains from leaving and re-entering the engine, so the longest path
either stays on the link (reduce-scatter: N c + g, all-reduce: 2 N c) or runs through all
N reductions from the first piece received (reduce-scatter: c + N g, all-reduce:
c + N g + (N - K + 1) c). With K = 1 every step waits for its reduction: the classic sums.
Times are exact when every piece has the same size (count divisible by p K; by K for
all_gather and reduce); traffic is exact for every size. Elsewhere the all-reduce and
reduce-scatter times take a K-th of the largest block, ceil(count/p) elements, as a piece.
With K = 1 that is the largest block's trip around the ring, which no path through the
steps outlasts: the runs took exactly this at every uneven size tried, but their ranks
finish apart, so ``is_exact`` claims only even blocks (where they finish together, as
the bucketed all-reduce needs). With K = 2..6, alpha = 1 us, beta = 1 ns and gamma = 0
to 4 ns per byte, several hundred runs of random uneven counts (1 to 20000 elements, a
third of them fewer than p) on 2 to 40 ranks took 0.996-1.000 times the estimate;
without latency (alpha = 0), 0.64-1.99 times (a wider sweep of the same ranges), as tiny
buffers' empty pieces cost nothing, a piece of a block of fewer than K elements is a
whole element where the estimate takes a fraction of one, and uneven pieces fall out of
step.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 69(2), 2009; Thakur, Rabenseifner & Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), 2005.
"""

from __future__ import annotations

import numpy as np
from simpy.events import Event

from simcoll.algorithms import ring_outputs, ring_timelines
from simcoll.algorithms.params import Int
from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, Chunks, block_bytes, repeat, split
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic, largest_block
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram, Program, Steps

__all__ = ["ring_all_reduce", "ring_reduce_scatter", "ring_all_gather", "ring_reduce"]

CHUNKS = {"chunks": Int(1, minimum=1, at_most_elements=True,
                        doc="pieces each ring block is cut into")}
REDUCE_CHUNKS = {"chunks": Int(8, minimum=1, at_most_elements=True,
                               doc="pieces the buffer travels in")}


def _cut(block: Buffer, pieces: int) -> list[Buffer]:
    """A block's pieces, as a list (no split for a single piece: the unpipelined ring)."""
    return [block] if pieces == 1 else list(split(block, pieces))


def _glue(comm: Comm, pieces: list[Buffer]) -> Buffer:
    """One buffer from a step's pieces (no copy for a single piece)."""
    return pieces[0] if len(pieces) == 1 else comm.join(pieces)


def _reduce_scatter_steps(comm: Comm, blocks: Chunks, op: ReduceOp, pieces: int,
                          start: int) -> Steps:
    """p - 1 pipelined ring reduce-scatter steps over the p ``blocks``.

    In step s rank r sends block (start + r - s) mod p and reduces the block it receives
    into its block (start + r - s - 1) mod p, so it ends with block (start + r + 1) mod p
    fully reduced. Returns ``(sent, ready)``: ``ready`` holds one reduction event per piece
    of that block (``None`` when p == 1, the block then being ``sent``).
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    send = _cut(blocks[(start + r) % p], pieces)
    ready: list[Event] | None = None
    for step in range(p - 1):
        mine = _cut(blocks[(start + r - step - 1) % p], pieces)
        reductions = []
        for k in range(pieces):
            if ready is not None:
                send[k] = yield ready[k]
            got = yield comm.sendrecv(send[k], dst=right, src=left)
            # Not yielded here: the reduction runs while the next pieces travel.
            reductions.append(comm.reduce(mine[k], got, op))
        ready = reductions
    return send, ready


def _all_gather_steps(comm: Comm, blocks: Chunks, pieces: int, start: int, send: list[Buffer],
                      ready: list[Event] | None = None) -> Steps:
    """p - 1 pipelined ring all-gather steps that fill the p ``blocks``.

    In step s rank r sends block (start + r - s) mod p, whose pieces are ``send`` in step 0
    (replaced by the values of the ``ready`` events once they fire, if given), and receives
    block (start + r - s - 1) mod p.
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(p - 1):
        got = []
        for k in range(pieces):
            if ready is not None:
                send[k] = yield ready[k]
            got.append((yield comm.sendrecv(send[k], dst=right, src=left)))
        if ready is not None:
            blocks[(start + r) % p] = _glue(comm, send)
            ready = None
        blocks[(start + r - step - 1) % p] = _glue(comm, got)
        send = got


# -- cost models -------------------------------------------------------------------------
def _piece(p: int, nbytes: int, alpha: float, beta: float, gamma: float, chunks: int,
           itemsize: int) -> tuple[int, float, float]:
    """(N, c, g): piece steps per phase, one piece message, one piece reduction, for a
    K-th of the largest block, ceil(count/p) elements (n / (p K) when count divides by p).
    """
    piece = largest_block(nbytes, p, itemsize) / chunks
    return (p - 1) * chunks, alpha + piece * beta, piece * gamma


def _all_reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                     chunks: int, itemsize: int) -> float:
    """K = 1: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Patarasuk & Yuan 2009).

    K >= 2: max(2 N c, (N - K + 2) c + N g) (module docstring): the reductions hide
    behind the transfers while g <= c (roughly), leaving 2(p-1) K alpha + 2 (p-1)/p n beta.
    """
    if p == 1:
        return 0.0
    n_steps, c, g = _piece(p, nbytes, alpha, beta, gamma, chunks, itemsize)
    if chunks == 1:
        return n_steps * (2 * c + g)
    return max(2 * n_steps * c, (n_steps - chunks + 2) * c + n_steps * g)


def _all_reduce_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """Rank r sends every block but r+1 (reduce-scatter) and but r+2 (all-gather)."""
    b = block_bytes(nbytes, p, itemsize)
    sent = 2 * int(b.sum()) - np.roll(b, -1) - np.roll(b, -2)
    return gpu_traffic(sent, np.roll(sent, 1))


def _even_blocks(p: int, nbytes: int, itemsize: int, *, chunks: int) -> bool:
    return (nbytes // itemsize) % (p * chunks) == 0


def _even_pieces(p: int, nbytes: int, itemsize: int, *, chunks: int) -> bool:
    return p == 1 or (nbytes // itemsize) % chunks == 0


@register("all_reduce", "ring", params=CHUNKS, timeline=ring_timelines.all_reduce,
          outputs=ring_outputs.all_reduce,
          cost=CostModel(
    time=_all_reduce_time, traffic=_all_reduce_traffic, exact=_even_blocks,
    ends_together=True))
def ring_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, chunks: int) -> BufferProgram:
    """Ring all-reduce: a ring reduce-scatter, then a ring all-gather.

    The buffer is cut into p blocks. In step s of the reduce-scatter, rank r sends block
    (r - s) mod p to rank r+1 and reduces the block it gets from rank r-1 into its own;
    after p-1 steps rank r holds the fully reduced block (r + 1) mod p. The all-gather then
    passes the reduced blocks around the ring for p-1 more steps. With ``chunks=K`` every
    block travels as K pipelined pieces (see the module docstring).

    Cost, with N = (p-1) K piece steps per phase, c = alpha + n beta / (p K) per piece
    message and g = n gamma / (p K) per piece reduction:

    * K = 1: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Patarasuk & Yuan 2009);
    * K >= 2: max(2 N c, (N - K + 2) c + N g) (derived here, as the longest path of the
      schedule: either the link is never idle, 2(p-1) K alpha + 2 (p-1)/p n beta with the
      reductions hidden, or, when a piece reduction outlasts a piece message, the
      reductions run back to back from the first piece received to the last).

    Each rank sends and receives 2(p-1)/p n bytes, the all-reduce bandwidth lower bound.
    """
    blocks = split(x, comm.size)
    send, ready = yield from _reduce_scatter_steps(comm, blocks, op, chunks, 0)
    yield from _all_gather_steps(comm, blocks, chunks, 1, send, ready)
    return comm.join(blocks)


def _reduce_scatter_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                         chunks: int, itemsize: int) -> float:
    """K = 1: (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma (the cost Thakur et al. 2005
    give MPICH's pairwise-exchange reduce-scatter; the ring's schedule is Patarasuk & Yuan's).

    K >= 2: c + g + (N - 1) max(c, g) (module docstring): the slower of link and reduction
    engine is never idle.
    """
    if p == 1:
        return 0.0
    n_steps, c, g = _piece(p, nbytes, alpha, beta, gamma, chunks, itemsize)
    if chunks == 1:
        return n_steps * (c + g)
    return c + g + (n_steps - 1) * max(c, g)


def _reduce_scatter_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """Rank r sends every block but block r and receives every block but block r-1."""
    b = block_bytes(nbytes, p, itemsize)
    total = int(b.sum())
    return gpu_traffic(total - b, total - np.roll(b, 1))


@register("reduce_scatter", "ring", params=CHUNKS, timeline=ring_timelines.reduce_scatter,
          outputs=ring_outputs.reduce_scatter,
          cost=CostModel(
    time=_reduce_scatter_time, traffic=_reduce_scatter_traffic, exact=_even_blocks,
    ends_together=True))
def ring_reduce_scatter(comm: Comm, x: Buffer, *, op: ReduceOp, chunks: int) -> BufferProgram:
    """Ring reduce-scatter: p - 1 ring steps leave rank r with block r of the reduction.

    The schedule of the all-reduce's first phase, shifted by one block: in step s rank r
    sends block (r - s - 1) mod p and reduces into block (r - s - 2) mod p, so its last
    reduction completes block r. With ``chunks=K`` every block travels as K pieces.

    Cost, with N, c and g as for the ring all-reduce: K = 1: (p-1) alpha + (p-1)/p n beta
    + (p-1)/p n gamma (the cost of Thakur et al. 2005's pairwise exchange); K >= 2:
    c + g + (N - 1) max(c, g) (derived here: the link or the reduction engine, whichever
    is slower per piece, is never idle).
    Rank r sends every block but block r and receives every block but block r - 1:
    (p-1)/p n bytes each way for sizes divisible by p.
    """
    blocks = split(x, comm.size)
    send, ready = yield from _reduce_scatter_steps(comm, blocks, op, chunks, -1)
    if ready is not None:
        for k in range(chunks):
            send[k] = yield ready[k]
    return comm.join(send)


def _all_gather_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                     chunks: int) -> float:
    """(p-1) K alpha + (p-1) n beta (Thakur et al. 2005 for K = 1); n = input per rank."""
    return (p - 1) * (chunks * alpha + nbytes * beta)


def _all_gather_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    each = np.full(p, (p - 1) * (nbytes // itemsize) * itemsize, dtype=np.int64)
    return gpu_traffic(each, each)


@register("all_gather", "ring", params=CHUNKS, timeline=ring_timelines.all_gather,
          outputs=ring_outputs.all_gather,
          cost=CostModel(
    time=_all_gather_time, traffic=_all_gather_traffic, exact=_even_pieces,
    ends_together=True))
def ring_all_gather(comm: Comm, x: Buffer, *, chunks: int) -> BufferProgram:
    """Ring all-gather: in step s rank r forwards block (r - s) mod p to rank r + 1.

    Rank r's input is block r of the output; after p - 1 steps every rank holds all p
    blocks, concatenated in rank order. With ``chunks=K`` every block travels as K pieces
    (which only adds latency on a single-port network: there is nothing to overlap).

    Cost: (p-1) K alpha + (p-1) n beta (Thakur et al. 2005 for K = 1), n = each rank's
    input bytes. Each rank sends and receives (p-1) n bytes.
    """
    blocks = repeat(x, comm.size)
    send = _cut(x, chunks)
    yield from _all_gather_steps(comm, blocks, chunks, 0, send)
    return comm.join(blocks)


def _reduce_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                 chunks: int) -> float:
    """(p-1)(T + R) + (K-1) max(T, R) with T = alpha + n/K beta, R = n/K gamma, p >= 2;
    exact where K divides the element count, else the mean piece's estimate (0.997-1.010
    times it at alpha = 1 us, beta = 1 ns, 2 to 40 ranks, gamma 0 to 2.5 ns; up to 1.55
    without latency).

    Derivation (ours): the pieces cross p - 1 links and p - 1 reduction engines in the
    same order, each piece taking T on every link and R on every engine: a flow shop of
    identical jobs, whose makespan is the sum of one job's stage times plus K - 1 times
    the slowest stage. A rank reduces piece k + 1 while sending piece k, so a link and an
    engine never wait for each other beyond that.
    """
    if p == 1:
        return 0.0
    hop = alpha + nbytes / chunks * beta
    reduction = nbytes / chunks * gamma
    return (p - 1) * (hop + reduction) + (chunks - 1) * max(hop, reduction)


def _reduce_traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    """Every rank but the root sends n bytes; every rank but root - 1 receives n bytes."""
    sent = np.full(p, nbytes, dtype=np.int64)
    received = sent.copy()
    sent[root] = 0
    received[(root - 1) % p] = 0
    return gpu_traffic(sent, received)


@register("reduce", "ring", params=REDUCE_CHUNKS, cost=CostModel(
    time=_reduce_time, traffic=_reduce_traffic, exact=_even_pieces))
def ring_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, root: int, chunks: int) -> Program:
    """Pipelined ring reduce toward the root: root-1 -> root-2 -> ... -> root, in K pieces.

    The rank farthest from the root (root - 1 mod p) sends its pieces one after another.
    Every other rank reduces each incoming piece into its own and passes it on; piece
    k + 1 is reduced while piece k is still on the wire. The root keeps the result.

    Cost, with T = alpha + n/K beta per hop and R = n/K gamma per reduction, for p >= 2
    when K divides the element count: (p-1)(T + R) + (K-1) max(T, R) (a flow shop of
    p - 1 links and p - 1 reduction engines, every piece taking the same time on each).
    Each rank but the root sends n bytes; each but root - 1 receives n bytes (the
    pipelined chain, derived here).
    """
    p = comm.size
    if p == 1:
        return x
    v = (comm.rank - root) % p
    parts = split(x, chunks)
    toward, away = (comm.rank - 1) % p, (comm.rank + 1) % p
    if v == p - 1:
        for part in parts:
            yield comm.send(part, dst=toward)
        return None
    sending: list[Event] = []
    for k in range(len(parts)):
        got = yield comm.recv(src=away)
        acc = yield comm.reduce(parts[k], got, op)
        if v == 0:
            parts[k] = acc
            continue
        for event in sending:
            yield event
        sending = [comm.send(acc, dst=toward)]
    for event in sending:
        yield event
    return None if v else comm.join(parts)
