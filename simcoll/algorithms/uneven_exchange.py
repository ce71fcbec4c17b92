"""all_to_allv: every rank sends its own amount to every other (MoE token routing).

``splits`` is the p x p matrix S of elements, S[i][j] from rank i to rank j; the cost
models get it in bytes (``nbytes``, an int64 matrix). A pair with nothing to exchange
sends no message (both sides know S), as MPICH's ``MPIR_Alltoallv_intra_scattered`` skips
zero counts. Notation: sent_r and received_r are the bytes rank r sends to and receives
from others (the off-diagonal row and column sums of S).

Sources: MPICH's Alltoallv posts isend / irecv to every peer at once ("scattered",
``direct`` here); Thakur, Rabenseifner & Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), 2005, pairwise exchange for long all-to-alls, which
Open MPI's ``ompi_coll_base_alltoallv_intra_pairwise`` applies to Alltoallv
(``pairwise`` here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, split_counts
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.cost.uneven import Bytes, off_diagonal, pair_loads
from simcoll.typing import BufferProgram, Steps

__all__ = ["direct_all_to_allv", "pairwise_all_to_allv", "exchange"]

Matrix = tuple[tuple[int, ...], ...]


def exchange(comm: Comm, data: Buffer, dst: int, src: int, sending: int,
             receiving: int) -> Steps:
    """Send ``data`` to ``dst`` if ``sending`` elements go there and receive from ``src``
    if ``receiving`` come from there, at once; return what arrived (None if nothing)."""
    if sending and receiving:
        got: Any = yield comm.sendrecv(data, dst=dst, src=src)
        return got
    if sending:
        yield comm.send(data, dst=dst)
    elif receiving:
        got = yield comm.recv(src=src)
        return got
    return None


def _traffic(p: int, nbytes: Bytes, itemsize: int) -> Traffic:
    """sent_r and received_r: every off-diagonal entry moves once, straight to its rank."""
    return gpu_traffic(*pair_loads(nbytes))


def _direct_time(p: int, nbytes: Bytes, alpha: float, beta: float, gamma: float) -> float:
    """alpha + beta max_r max(sent_r, received_r); 0 if nothing moves.

    The busiest link bounds every schedule from below (a message waits alpha before it
    drains). All messages start at once and share links max-min fairly; when every rank
    that receives hears from the same number k of peers, k equal messages each (or, the
    same turned around, every rank that sends sends k equal messages) and no rank sends to
    (hears from) more than k, every message drains at 1/k of a link from start to end,
    and the bound is the time (derived here; the even all_to_all is the case k = p - 1).
    """
    sent, received = pair_loads(nbytes)
    most = int(max(sent.max(), received.max()))
    return alpha + most * beta if most else 0.0


def _uniform_columns(moved: Bytes) -> bool:
    """Every column's nonzero entries are equal, every nonzero column has k of them and
    no row has more than k."""
    nonzero = moved > 0
    per_column, per_row = nonzero.sum(axis=0), nonzero.sum(axis=1)
    k = per_column.max()
    if np.any((per_column != k) & (per_column != 0)) or per_row.max() > k:
        return False
    smallest = np.where(nonzero, moved, np.iinfo(np.int64).max).min(axis=0)
    return bool(np.all((per_column == 0) | (smallest == moved.max(axis=0))))


def _direct_exact(p: int, nbytes: Bytes, itemsize: int) -> bool:
    moved = off_diagonal(nbytes)
    return _uniform_columns(moved) or _uniform_columns(moved.T)


@register("all_to_allv", "direct", cost=CostModel(
    time=_direct_time, traffic=_traffic, exact=_direct_exact))
def direct_all_to_allv(comm: Comm, x: Buffer, *, splits: Matrix) -> BufferProgram:
    """Direct all_to_allv: rank r sends block j of x to rank j for every j at once.

    Cost: alpha + beta max_r max(sent_r, received_r) (the busiest link; exact when every
    receiver hears k equal messages and no rank sends more than k messages, or every
    sender sends k equal messages and no rank hears more than k, see ``_direct_time``; a
    lower bound otherwise). Rank r sends sent_r and receives received_r bytes.
    """
    p, r = comm.size, comm.rank
    mine = split_counts(x, splits[r])
    for peer in range(p):
        if peer != r and splits[r][peer]:
            comm.send(mine[peer], dst=peer)
    blocks = [x[:0]] * p
    blocks[r] = mine[r]
    for peer in range(p):
        if peer != r and splits[peer][r]:
            blocks[peer] = yield comm.recv(src=peer)
    return comm.join(blocks)


def _rounds(nbytes: Bytes) -> Bytes:
    """Round k (row k - 1): what each rank r sends to rank r + k, S[r][(r + k) mod p]."""
    p = len(nbytes)
    ranks = np.arange(p)
    return np.array([nbytes[ranks, (ranks + k) % p] for k in range(1, p)],
                    dtype=np.int64).reshape(max(p - 1, 0), p)


def _pairwise_time(p: int, nbytes: Bytes, alpha: float, beta: float, gamma: float) -> float:
    """sum over rounds k = 1..p-1 with m_k > 0 of (alpha + m_k beta), m_k = max_r
    S[r][(r+k) mod p], the round's largest message.

    Exact when every round's messages have one size (the even all_to_all's
    (p-1)(alpha + n/p beta) among them): the ranks then move in lockstep. Otherwise an
    estimate, neither a lower nor an upper bound: ranks that skip empty rounds run ahead
    and later rounds collide at a receiver (random dense matrices on the reference network
    took 0.42-1.79 times it; a mixture-of-experts pattern of hot experts, about 3 MB a
    rank on 10 ranks at alpha = 1 us, 1.82 times; a sparse one can take as little as
    1/(p-1) of it, its one-message rounds overlapping).
    """
    largest = _rounds(nbytes).max(axis=1, initial=0)
    return float(np.sum(np.where(largest > 0, alpha + largest * beta, 0.0)))


def _pairwise_exact(p: int, nbytes: Bytes, itemsize: int) -> bool:
    rounds = _rounds(nbytes)
    return bool(np.all(rounds == rounds[:, :1])) if p > 1 else True


@register("all_to_allv", "pairwise", cost=CostModel(
    time=_pairwise_time, traffic=_traffic, exact=_pairwise_exact, ends_together=True))
def pairwise_all_to_allv(comm: Comm, x: Buffer, *, splits: Matrix) -> BufferProgram:
    """Pairwise-exchange all_to_allv: in round k = 1..p-1 rank r sends its block for
    (r + k) mod p and receives from (r - k) mod p (a send or receive of nothing is left
    out).

    Cost: sum over rounds of (alpha + m_k beta), m_k the round's largest message (exact
    when each round's messages are equal; Thakur et al. 2005 for the even case,
    (p-1)(alpha + n/p beta)). Rank r sends sent_r and receives received_r bytes.
    """
    p, r = comm.size, comm.rank
    mine = split_counts(x, splits[r])
    blocks = [x[:0]] * p
    blocks[r] = mine[r]
    for k in range(1, p):
        dst, src = (r + k) % p, (r - k) % p
        got = yield from exchange(comm, mine[dst], dst, src, splits[r][dst], splits[src][r])
        if got is not None:
            blocks[src] = got
    return comm.join(blocks)
