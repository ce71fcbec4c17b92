"""Pipelined chain broadcast: the buffer travels root -> root+1 -> ... -> root-1 in pieces.

A buffer is cut into K = ``chunks`` pieces as np.array_split does (the first count % K
pieces get one more element; when a default K exceeds the element count the last pieces
are empty and travel as zero-byte messages, so the schedule never depends on the size).
Each rank keeps at most one message in flight per destination: it waits for piece k to
arrive before sending piece k + 1, so pieces flow back to back. The mirror image, the
pipelined reduce toward the root, is ``reduce/ring`` (:mod:`simcoll.algorithms.ring`).

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005 (pipelined broadcast).
"""

from __future__ import annotations

import numpy as np

from simcoll.algorithms.params import Int
from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, split
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.typing import BufferProgram

__all__ = ["pipeline_broadcast"]

CHUNKS = {"chunks": Int(8, minimum=1, at_most_elements=True,
                        doc="pieces the buffer travels in")}


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
          chunks: int) -> float:
    """(p - 2 + K)(alpha + n/K beta) for p >= 2 (Thakur et al. 2005).

    The first piece needs p - 1 hops, then one piece arrives per hop time.
    """
    if p == 1:
        return 0.0
    return (p - 2 + chunks) * (alpha + nbytes / chunks * beta)


def _traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    """Every rank but root - 1 sends n bytes; every rank but the root receives n bytes."""
    sent = np.full(p, nbytes, dtype=np.int64)
    received = sent.copy()
    sent[(root - 1) % p] = 0
    received[root] = 0
    return gpu_traffic(sent, received)


def _exact(p: int, nbytes: int, itemsize: int, *, chunks: int) -> bool:
    return p == 1 or (nbytes // itemsize) % chunks == 0


@register("broadcast", "pipeline", params=CHUNKS,
          cost=CostModel(time=_time, traffic=_traffic, exact=_exact))
def pipeline_broadcast(comm: Comm, x: Buffer, *, root: int, chunks: int) -> BufferProgram:
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
    parts = split(x, chunks)
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
