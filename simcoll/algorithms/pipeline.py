"""Pipelined chain broadcast: the buffer travels root -> root+1 -> ... -> root-1 in pieces.

A buffer is cut into K = ``chunks`` pieces as np.array_split does (the first count % K
pieces get one more element; when a default K exceeds the element count the last pieces
are empty and travel as zero-byte messages, so the schedule never depends on the size).
Each rank keeps at most one message in flight per destination: it waits for piece k to
arrive before sending piece k + 1, so pieces flow back to back. The mirror image, the
pipelined reduce toward the root, is ``reduce/ring`` (:mod:`simcoll.algorithms.ring`).

The linear pipeline is a classic of broadcasting on a chain; its cost here is derived in
this module (a proportionate flow shop: every piece takes the same time at every hop).
"""

from __future__ import annotations

import numpy as np

from simcoll.algorithms.params import Int
from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, split
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, always_exact, gpu_traffic, largest_block
from simcoll.typing import BufferProgram

__all__ = ["pipeline_broadcast"]

CHUNKS = {"chunks": Int(8, minimum=1, at_most_elements=True,
                        doc="pieces the buffer travels in")}


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
          chunks: int, itemsize: int) -> float:
    """(p - 2 + K) alpha + (n + (p - 2) c) beta for p >= 2, c the largest piece in bytes:
    (p - 2 + K)(alpha + n/K beta) when K divides the element count.

    Derivation (ours): the K pieces cross p - 1 hops in order, piece k taking
    alpha + s_k beta at each: a proportionate flow shop, whose makespan is the sum of
    the pieces' times plus p - 2 times the longest piece's.
    """
    if p == 1:
        return 0.0
    largest = largest_block(nbytes, chunks, itemsize)
    return (p - 2 + chunks) * alpha + (nbytes + (p - 2) * largest) * beta


def _traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
    """Every rank but root - 1 sends n bytes; every rank but the root receives n bytes."""
    sent = np.full(p, nbytes, dtype=np.int64)
    received = sent.copy()
    sent[(root - 1) % p] = 0
    received[root] = 0
    return gpu_traffic(sent, received)


@register("broadcast", "pipeline", params=CHUNKS,
          cost=CostModel(time=_time, traffic=_traffic, exact=always_exact))
def pipeline_broadcast(comm: Comm, x: Buffer, *, root: int, chunks: int) -> BufferProgram:
    """Pipelined chain broadcast: root -> root+1 -> ... -> root-1, in K pieces.

    The root sends the pieces one after another; every other rank forwards each piece
    to the next rank as soon as it has it (and its previous forward has arrived).

    Cost: (p - 2 + K)(alpha + n/K beta) for p >= 2 when K divides the element count.
    With uneven pieces (the first count % K one element larger, c the largest in bytes)
    it is (p - 2 + K) alpha + (n + (p-2) c) beta: a flow shop whose pieces take the same
    time at every hop (derived here), exact for every count. Each rank but the last
    sends n bytes; each but the root receives n bytes.
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
