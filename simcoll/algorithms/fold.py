"""The fold of rank counts that are not powers of two, shared by the recursive families.

With p' the largest power of two <= p and rem = p - p', the first 2 rem ranks pair up:
each odd rank 2i+1 sends its buffer to rank 2i, which reduces it (rank 2i's buffer on the
left); the p' survivors (rank 2i as new rank i for i < rem, rank r >= 2 rem as new rank
r - rem) run the power-of-two algorithm; then rank 2i sends rank 2i+1 its result
(Thakur, Rabenseifner & Gropp, IJHPCA 19(1), 2005). MPICH's Rabenseifner reduce folds so;
its all-reduce (``MPIR_Allreduce_intra_reduce_scatter_allgather``) and its
reduce-scatter (``MPIR_Reduce_scatter_intra_recursive_halving``) fold the mirror way,
the even ranks below 2 rem sending to rank + 1, which gives the same times and the same
bytes per rank, mirrored within each pair. Programs and their cost models use the
helpers here.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from simcoll.buffers import Buffer
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["pow2_split", "is_pow2", "real_rank", "distances", "fold_in", "fold_out",
           "fold_elements", "fold_time"]


def pow2_split(p: int) -> tuple[int, int]:
    """(p', rem): the largest power of two p' <= p, and p - p'."""
    p2 = 1 << (p.bit_length() - 1)
    return p2, p - p2


def is_pow2(p: int) -> bool:
    """Whether p is a power of two."""
    return p & (p - 1) == 0


def real_rank(new: int, rem: int) -> int:
    """The rank behind survivor ``new`` of the fold."""
    return 2 * new if new < rem else new + rem


def distances(p: int) -> Iterator[int]:
    """Distances 1, 2, 4, ... below p."""
    d = 1
    while d < p:
        yield d
        d *= 2


def fold_in(comm: Comm, x: Buffer, op: ReduceOp) -> Steps:
    """Odd rank 2i+1 < 2 rem gives its buffer to rank 2i, which reduces it.

    Returns (new rank, buffer); the new rank is None for the ranks folded out.
    """
    r = comm.rank
    rem = pow2_split(comm.size)[1]
    if r >= 2 * rem:
        return r - rem, x
    if r % 2:
        comm.send(x, dst=r - 1, tag="fold")
        return None, x
    got = yield comm.recv(src=r + 1, tag="fold")
    return r // 2, (yield comm.reduce(x, got, op))


def fold_out(comm: Comm, result: Buffer) -> Steps:
    """Undo the fold: rank 2i sends ``result`` to rank 2i+1; returns this rank's result."""
    r = comm.rank
    rem = pow2_split(comm.size)[1]
    if r >= 2 * rem:
        return result
    if r % 2:
        return (yield comm.recv(src=r - 1, tag="unfold"))
    comm.send(result, dst=r + 1, tag="unfold")
    return result


def fold_elements(p: int, count: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(sent, received) elements of the fold in: odd ranks 2i+1 < 2 rem send the whole
    buffer to 2i."""
    rem = pow2_split(p)[1]
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    sent[1:2 * rem:2] = count
    received[0:2 * rem:2] = count
    return sent, received


def fold_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """The fold in, alpha + n beta + n gamma, when p is not a power of two (else 0)."""
    return 0.0 if is_pow2(p) else alpha + nbytes * (beta + gamma)
