"""Dissemination barrier: in round k each rank signals rank + 2^k and waits for rank - 2^k.

Hensgen, Finkel & Manber, "Two algorithms for barrier synchronization", IJPP 17(1), 1988.
"""

from __future__ import annotations

import numpy as np

from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.typing import Program

__all__ = ["dissemination_barrier"]


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """L alpha for every p, L = ceil(log2 p): L rounds of one zero-byte message each way."""
    return (p - 1).bit_length() * alpha


def _traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    zero = np.zeros(p, dtype=np.int64)
    return gpu_traffic(zero, zero)


@register("barrier", "dissemination", cost=CostModel(time=_time, traffic=_traffic,
                                                     ends_together=True))
def dissemination_barrier(comm: Comm, x: Buffer) -> Program:
    """Dissemination barrier: in round k each rank signals rank + 2^k, waits for rank - 2^k.

    After ceil(log2 p) rounds every rank has heard, directly or not, from every other.
    Messages carry no data (``None``). Cost: ceil(log2 p) alpha for every p. Each rank
    sends and receives ceil(log2 p) zero-byte messages. Source: Hensgen, Finkel & Manber
    1988.
    """
    p, r = comm.size, comm.rank
    distance, round_ = 1, 0
    while distance < p:
        yield comm.sendrecv(None, dst=(r + distance) % p, src=(r - distance) % p, tag=round_)
        distance, round_ = 2 * distance, round_ + 1
    return None
