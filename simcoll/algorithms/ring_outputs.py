"""What the ring programs of :mod:`simcoll.algorithms.ring` and
:mod:`simcoll.algorithms.uneven_ring` return in data mode, computed block by block.

Where ``simulate`` times a ring over arrays (:mod:`simcoll.lone_flows`), these give the
outputs, with the reductions each block goes through in the rank programs, in their
order and with their operands in their order: a block that starts at rank f becomes
``op(x_{f+p-1}, ... op(x_{f+2}, op(x_{f+1}, x_f)))``, each rank combining its own data
with what arrived (``comm.reduce(mine, got, op)``). The ops are element-wise, so cutting
a block into pieces (``chunks=``) changes nothing, and the outputs equal the rank
programs' bit for bit. Data movement is one concatenation. An output that every rank
shares (all_reduce, all_gather) is one array, listed once per rank; ``simulate`` checks
it once and hands each rank its own copy.

Each function takes the ranks' inputs and the program's keywords.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from simcoll.buffers import block_counts
from simcoll.ops import ReduceOp

__all__ = ["all_reduce", "reduce_scatter", "all_gather", "all_gatherv", "reduce_scatterv",
           "reduce_scatter_then_all_gather"]

Arrays = Sequence[np.ndarray]


def _reduce_block(inputs: Arrays, op: ReduceOp, first: int, lo: int, hi: int,
                  out: np.ndarray) -> None:
    """Elements ``lo:hi`` reduced along the ring from rank ``first``, into ``out``."""
    p = len(inputs)
    op.combine(inputs[(first + 1) % p][lo:hi], inputs[first][lo:hi], out=out)
    for k in range(2, p):
        op.combine(inputs[(first + k) % p][lo:hi], out, out=out)


def _reduced_blocks(inputs: Arrays, op: ReduceOp, counts: NDArray[np.int64], start: int,
                    into: np.ndarray | None = None) -> list[np.ndarray]:
    """Each block c of ``counts`` reduced from rank ``c - start`` (the ring
    reduce-scatter's ``start``): as its own array, or as consecutive pieces of ``into``."""
    p = len(inputs)
    blocks = []
    hi = 0
    for c, n in enumerate(counts.tolist()):
        lo, hi = hi, hi + n
        out = np.empty(n, dtype=inputs[0].dtype) if into is None else into[lo:hi]
        if n:
            _reduce_block(inputs, op, (c - start) % p, lo, hi, out)
        blocks.append(out)
    return blocks


def all_reduce(inputs: Arrays, *, op: ReduceOp, chunks: int) -> list[np.ndarray]:
    """``ring.ring_all_reduce``: block c starts at rank c; every rank gets all blocks."""
    p, count = len(inputs), inputs[0].size
    full = np.empty(count, dtype=inputs[0].dtype)
    _reduced_blocks(inputs, op, block_counts(count, p), 0, full)
    return [full] * p


def reduce_scatter(inputs: Arrays, *, op: ReduceOp, chunks: int) -> list[np.ndarray]:
    """``ring.ring_reduce_scatter``: block c starts at rank c + 1 and ends at rank c."""
    return _reduced_blocks(inputs, op, block_counts(inputs[0].size, len(inputs)), -1)


def reduce_scatter_then_all_gather(inputs: Arrays, *, op: ReduceOp) -> list[np.ndarray]:
    """``ring.ring_reduce_scatter``, then ``ring.ring_all_gather`` of its blocks: every
    rank gets block c reduced from rank c + 1 (the hierarchical all-reduce on one node)."""
    return [np.concatenate(reduce_scatter(inputs, op=op, chunks=1))] * len(inputs)


def all_gather(inputs: Arrays, *, chunks: int) -> list[np.ndarray]:
    """``ring.ring_all_gather``: every rank gets the inputs in rank order."""
    return [np.concatenate(inputs)] * len(inputs)


def all_gatherv(inputs: Arrays, *, splits: tuple[int, ...]) -> list[np.ndarray]:
    """``uneven_ring.ring_all_gatherv``: every rank gets the inputs in rank order."""
    return [np.concatenate(inputs)] * len(inputs)


def reduce_scatterv(inputs: Arrays, *, op: ReduceOp,
                    splits: tuple[int, ...]) -> list[np.ndarray]:
    """``uneven_ring.ring_reduce_scatterv``: as the even ring's, with blocks of
    ``splits`` (an empty block is empty at its rank)."""
    return _reduced_blocks(inputs, op, np.array(splits, dtype=np.int64), -1)
