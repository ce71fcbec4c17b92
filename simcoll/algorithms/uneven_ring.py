"""Ring all_gatherv and reduce_scatterv: the ring algorithms with blocks of any size.

``splits`` holds c_0, ..., c_{p-1} (elements); the cost models get the same counts in bytes
(``nbytes``, an int64 array) and n = sum c_r. Block r is rank r's input (all_gatherv) or
rank r's output (reduce_scatterv). A block of zero elements travels as no message: both
neighbours know its size, as MPICH's ring Allgatherv only sends and receives what is there.

Time (derived here, exact for every size on the reference network): each rank's next
message leaves only after its previous step is done, so every message is alone on its
links and the steps follow the recurrence of :func:`simcoll.cost.uneven.ring_finish`.
With equal blocks it is the even ring's (p-1)(alpha + n/p beta [+ n/p gamma]).

Sources: Thakur, Rabenseifner & Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), 2005 (ring all-gather, which MPICH's
``MPIR_Allgatherv_intra_ring`` runs with uneven blocks); Patarasuk & Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009 (the ring
reduce-scatter phase).
"""

from __future__ import annotations

import numpy as np

from simcoll.algorithms import ring_outputs, ring_timelines
from simcoll.algorithms.registry import register
from simcoll.algorithms.uneven_exchange import exchange
from simcoll.buffers import Buffer, split_counts
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.cost.uneven import Bytes, ring_finish
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram

__all__ = ["ring_all_gatherv", "ring_reduce_scatterv"]

Counts = tuple[int, ...]


def _all_gatherv_time(p: int, nbytes: Bytes, alpha: float, beta: float,
                      gamma: float) -> float:
    """max_r T_{p-2}[r] of ``ring_finish`` with step s sending block r - s; equal blocks
    of n/p: (p-1)(alpha + n/p beta). Exact for every size."""
    return float(ring_finish(nbytes, 0, alpha, beta, 0.0).max(initial=0.0))


def _all_gatherv_traffic(p: int, nbytes: Bytes, itemsize: int) -> Traffic:
    """Rank r sends every block but r + 1 and receives every block but its own."""
    total = int(nbytes.sum())
    return gpu_traffic(total - np.roll(nbytes, -1), total - nbytes)


@register("all_gatherv", "ring", timeline=ring_timelines.all_gatherv,
          outputs=ring_outputs.all_gatherv, cost=CostModel(
    time=_all_gatherv_time, traffic=_all_gatherv_traffic))
def ring_all_gatherv(comm: Comm, x: Buffer, *, splits: Counts) -> BufferProgram:
    """Ring all_gatherv: in step s = 0..p-2 rank r forwards block (r - s) mod p to r + 1
    and receives block (r - s - 1) mod p from r - 1.

    Cost: the ring recurrence (module docstring), (p-1)(alpha + n/p beta) for equal
    blocks (Thakur et al. 2005). Rank r sends n - c_{r+1} and receives n - c_r bytes.
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    blocks = [x[:0]] * p
    blocks[r] = x
    for step in range(p - 1):
        out, incoming = (r - step) % p, (r - step - 1) % p
        got = yield from exchange(comm, blocks[out], right, left, splits[out],
                                  splits[incoming])
        if got is not None:
            blocks[incoming] = got
    return comm.join(blocks)


def _reduce_scatterv_time(p: int, nbytes: Bytes, alpha: float, beta: float,
                          gamma: float) -> float:
    """max_r T_{p-2}[r] of ``ring_finish`` with step s sending block r - s - 1 and
    reducing block r - s - 2; equal blocks of n/p: (p-1)(alpha + n/p beta + n/p gamma).
    Exact for every size."""
    return float(ring_finish(nbytes, -1, alpha, beta, gamma).max(initial=0.0))


def _reduce_scatterv_traffic(p: int, nbytes: Bytes, itemsize: int) -> Traffic:
    """Rank r sends every block but its own and receives every block but r - 1."""
    total = int(nbytes.sum())
    return gpu_traffic(total - nbytes, total - np.roll(nbytes, 1))


@register("reduce_scatterv", "ring", timeline=ring_timelines.reduce_scatterv,
          outputs=ring_outputs.reduce_scatterv,
          cost=CostModel(time=_reduce_scatterv_time, traffic=_reduce_scatterv_traffic))
def ring_reduce_scatterv(comm: Comm, x: Buffer, *, op: ReduceOp,
                         splits: Counts) -> BufferProgram:
    """Ring reduce_scatterv: in step s = 0..p-2 rank r sends its partial block
    (r - s - 1) mod p to r + 1, receives block (r - s - 2) mod p from r - 1 and reduces
    its own data into it (``own op received``, the even ring's order); after p - 1 steps
    it holds block r, fully reduced.

    Cost: the ring recurrence with reductions (module docstring), (p-1)(alpha + n/p beta +
    n/p gamma) for equal blocks (as Thakur et al. 2005 cost a pairwise exchange). Rank r
    sends n - c_r and receives n - c_{r-1} bytes.
    """
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    mine = split_counts(x, splits)
    send = mine[(r - 1) % p]
    for step in range(p - 1):
        out, incoming = (r - step - 1) % p, (r - step - 2) % p
        got = yield from exchange(comm, send, right, left, splits[out], splits[incoming])
        send = mine[incoming] if got is None else (yield comm.reduce(mine[incoming], got, op))
    return send
