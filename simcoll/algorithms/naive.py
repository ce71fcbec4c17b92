"""Naive all-reduce: every rank sends its whole buffer to every other rank."""

from __future__ import annotations

import numpy as np

from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram

__all__ = ["naive_all_reduce"]


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """alpha + (p-1) n beta + (p-1) n gamma: p-1 equal flows share each link, then the p-1
    reductions run one after another (0 for p = 1)."""
    if p == 1:
        return 0.0
    return alpha + (p - 1) * nbytes * (beta + gamma)


def _traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    each = np.full(p, (p - 1) * (nbytes // itemsize) * itemsize, dtype=np.int64)
    return gpu_traffic(each, each)


@register("all_reduce", "naive", cost=CostModel(time=_time, traffic=_traffic,
                                                ends_together=True))
def naive_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp) -> BufferProgram:
    """Naive all-reduce: send x to all p-1 peers at once, reduce what arrives in rank order.

    Reducing in rank order (x_0 op x_1 op ... op x_{p-1}) gives every rank the same bits.

    Cost on the single-port alpha-beta network (derived here): the p-1 sends of each rank
    share its link, as do the p-1 receives, so every message drains at 1/((p-1) beta) and
    all arrive together; then p-1 reductions run one after another:
    alpha + (p-1) n beta + (p-1) n gamma. Each rank sends and receives (p-1) n bytes.
    """
    p, r = comm.size, comm.rank
    for peer in range(p):
        if peer != r:
            comm.send(x, dst=peer)
    # ((x_0 op x_1) op x_2) ... on every rank, this rank's own x in its place.
    acc = x if r == 0 else (yield comm.recv(src=0))
    for peer in range(1, p):
        got = x if peer == r else (yield comm.recv(src=peer))
        acc = yield comm.reduce(acc, got, op)
    return acc
