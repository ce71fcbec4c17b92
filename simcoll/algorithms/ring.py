"""Ring algorithms: each rank talks only to its two neighbours on a logical ring.

Every ring algorithm here takes ``chunks=K``: each block that travels around the ring is cut
into K pieces (``np.array_split`` sizing) sent one after another, so that the reduction of
one piece overlaps the transfer of the next (as NCCL's ring moves a block in slices).
A rank has one piece in flight per direction at a time; the piece k it forwards in
step s+1 is the piece k it received (and reduced) in step s, so it waits for that
reduction only. ``chunks=1`` is the classic unpipelined ring.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 69(2), 2009; Thakur, Rabenseifner & Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), 2005.
"""

from __future__ import annotations

from simcoll.algorithms.registry import register
from simcoll.errors import InvalidInputError
from simcoll.ops import ReduceOp

__all__ = ["ring_all_reduce", "ring_reduce_scatter", "ring_all_gather"]


def validate(p, count, hosts, *, chunks=1):
    """Refuse piece counts other than positive integers."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise InvalidInputError(f"chunks={chunks!r} is not accepted; use an integer >= 1 "
                                f"(pieces each ring block is cut into)")


def _cut(comm, block, pieces):
    """A block's pieces, as a list (no split for a single piece: the unpipelined ring)."""
    return [block] if pieces == 1 else list(comm.split_buffer(block, pieces))


def _glue(comm, pieces):
    """One buffer from a step's pieces (no copy for a single piece)."""
    return pieces[0] if len(pieces) == 1 else comm.join(pieces)


def _reduce_scatter_steps(comm, blocks, op, pieces, start):
    """p - 1 pipelined ring reduce-scatter steps over the p ``blocks``.

    In step s rank r sends block (start + r - s) mod p and reduces the block it receives
    into its block (start + r - s - 1) mod p, so it ends with block (start + r + 1) mod p
    fully reduced. Returns ``(sent, ready)``: ``ready`` holds one reduction event per piece
    of that block (``None`` when p == 1, the block then being ``sent``).
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    send = _cut(comm, blocks[(start + r) % p], pieces)
    ready = None
    for step in range(p - 1):
        mine = _cut(comm, blocks[(start + r - step - 1) % p], pieces)
        reductions = []
        for k in range(pieces):
            if ready is not None:
                send[k] = yield ready[k]
            got = yield comm.sendrecv(send[k], dst=right, src=left)
            # Not yielded here: the reduction runs while the next pieces travel.
            reductions.append(comm.reduce(mine[k], got, op))
        ready = reductions
    return send, ready


def _all_gather_steps(comm, blocks, pieces, start, send, ready=None):
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


@register("all_reduce", "ring", validate=validate)
def ring_all_reduce(comm, x, *, op=ReduceOp.SUM, chunks=1):
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

    Args:
        chunks: pieces each block is cut into (K >= 1).
    """
    blocks = comm.split_buffer(x, comm.size)
    send, ready = yield from _reduce_scatter_steps(comm, blocks, op, chunks, 0)
    yield from _all_gather_steps(comm, blocks, chunks, 1, send, ready)
    return comm.join(blocks)


@register("reduce_scatter", "ring", validate=validate)
def ring_reduce_scatter(comm, x, *, op=ReduceOp.SUM, chunks=1):
    """Ring reduce-scatter: p - 1 ring steps leave rank r with block r of the reduction.

    The schedule of the all-reduce's first phase, shifted by one block: in step s rank r
    sends block (r - s - 1) mod p and reduces into block (r - s - 2) mod p, so its last
    reduction completes block r. With ``chunks=K`` every block travels as K pieces.

    Cost, with N, c and g as for the ring all-reduce: K = 1: (p-1) alpha + (p-1)/p n beta
    + (p-1)/p n gamma (Thakur et al. 2005); K >= 2: c + g + (N - 1) max(c, g) (derived
    here: the link or the reduction engine, whichever is slower per piece, is never idle).
    Rank r sends every block but block r and receives every block but block r - 1:
    (p-1)/p n bytes each way for sizes divisible by p.

    Args:
        chunks: pieces each block is cut into (K >= 1).
    """
    blocks = comm.split_buffer(x, comm.size)
    send, ready = yield from _reduce_scatter_steps(comm, blocks, op, chunks, -1)
    if ready is not None:
        for k in range(chunks):
            send[k] = yield ready[k]
    return comm.join(send)


@register("all_gather", "ring", validate=validate)
def ring_all_gather(comm, x, *, chunks=1):
    """Ring all-gather: in step s rank r forwards block (r - s) mod p to rank r + 1.

    Rank r's input is block r of the output; after p - 1 steps every rank holds all p
    blocks, concatenated in rank order. With ``chunks=K`` every block travels as K pieces
    (which only adds latency on a single-port network: there is nothing to overlap).

    Cost: (p-1) K alpha + (p-1) n beta (Thakur et al. 2005 for K = 1), n = each rank's
    input bytes. Each rank sends and receives (p-1) n bytes.

    Args:
        chunks: pieces each block is cut into (K >= 1).
    """
    p = comm.size
    # A p-block output buffer; in data-free mode its blocks cost O(1) memory.
    blocks = comm.split_buffer(comm.join([x] * p), p)
    send = _cut(comm, x, chunks)
    yield from _all_gather_steps(comm, blocks, chunks, 0, send)
    return comm.join(blocks)
