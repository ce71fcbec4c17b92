"""Direct all_gatherv and reduce_scatterv: every rank messages every peer at once.

``splits`` holds c_0, ..., c_{p-1} (elements); the cost models get the same counts in bytes
(``nbytes``, an int64 array) and n = sum c_r. A block of zero elements travels as no
message (both sides know its size).

Time (derived here for the flow model on the reference network, exact for every size):
all_gatherv: every rank that sends, sends p - 1 equal messages, and no rank hears from more
than p - 1 peers, so every message drains at 1/(p-1) of a link from start to end and the
last arrives at alpha + (p-1) max_r c_r beta. reduce_scatterv: the same turned around,
every rank hears p - 1 equal messages (its block, from each peer) and sends to at most
p - 1, so rank r has its p - 1 blocks at alpha + (p-1) c_r beta and reduces them in rank
order in (p-1) c_r gamma. As the even direct algorithms (``direct.py``) with exact blocks.
"""

from __future__ import annotations

from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, split_counts
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.cost.uneven import Bytes
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram

__all__ = ["direct_all_gatherv", "direct_reduce_scatterv"]

Counts = tuple[int, ...]


def _all_gatherv_time(p: int, nbytes: Bytes, alpha: float, beta: float,
                      gamma: float) -> float:
    """alpha + (p-1) max_r c_r beta for p > 1 (0 if nothing moves); exact."""
    largest = int(nbytes.max())
    return alpha + (p - 1) * largest * beta if p > 1 and largest else 0.0


def _all_gatherv_traffic(p: int, nbytes: Bytes, itemsize: int) -> Traffic:
    """Rank r sends its c_r to p - 1 peers and receives everyone else's n - c_r."""
    return gpu_traffic((p - 1) * nbytes, int(nbytes.sum()) - nbytes)


@register("all_gatherv", "direct", cost=CostModel(
    time=_all_gatherv_time, traffic=_all_gatherv_traffic))
def direct_all_gatherv(comm: Comm, x: Buffer, *, splits: Counts) -> BufferProgram:
    """Direct all_gatherv: send x to all p - 1 peers at once, concatenate in rank order.

    Cost: alpha + (p-1) max_r c_r beta (module docstring; the even direct all_gather's
    alpha + (p-1) n beta with n per rank). Rank r sends (p-1) c_r and receives n - c_r.
    """
    p, r = comm.size, comm.rank
    if splits[r]:
        for peer in range(p):
            if peer != r:
                comm.send(x, dst=peer)
    blocks = [x[:0]] * p
    blocks[r] = x
    for peer in range(p):
        if peer != r and splits[peer]:
            blocks[peer] = yield comm.recv(src=peer)
    return comm.join(blocks)


def _reduce_scatterv_time(p: int, nbytes: Bytes, alpha: float, beta: float,
                          gamma: float) -> float:
    """alpha + (p-1) max_r c_r (beta + gamma) for p > 1 (0 if nothing moves); exact."""
    largest = int(nbytes.max())
    return alpha + (p - 1) * largest * (beta + gamma) if p > 1 and largest else 0.0


def _reduce_scatterv_traffic(p: int, nbytes: Bytes, itemsize: int) -> Traffic:
    """Rank r sends every block but its own, n - c_r, and receives (p-1) c_r."""
    return gpu_traffic(int(nbytes.sum()) - nbytes, (p - 1) * nbytes)


@register("reduce_scatterv", "direct", cost=CostModel(
    time=_reduce_scatterv_time, traffic=_reduce_scatterv_traffic))
def direct_reduce_scatterv(comm: Comm, x: Buffer, *, op: ReduceOp,
                           splits: Counts) -> BufferProgram:
    """Direct reduce_scatterv: send block j of x to rank j for every j at once; reduce
    block ``rank`` in rank order, x_0 op x_1 op ... op x_{p-1} (as the even direct
    reduce_scatter), so the result does not depend on arrival order.

    Cost: alpha + (p-1) max_r c_r (beta + gamma) (module docstring). Rank r sends n - c_r
    and receives (p-1) c_r bytes.
    """
    p, r = comm.size, comm.rank
    mine = split_counts(x, splits)
    for peer in range(p):
        if peer != r and splits[peer]:
            comm.send(mine[peer], dst=peer)
    if not splits[r]:
        return mine[r]
    acc: Buffer | None = None
    for peer in range(p):
        got = mine[r] if peer == r else (yield comm.recv(src=peer))
        acc = got if acc is None else (yield comm.reduce(acc, got, op))
    assert acc is not None
    return acc
