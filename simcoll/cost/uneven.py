"""Formula pieces the v-collectives' cost models share, and their lower bounds.

A v-collective's model is given ``nbytes`` as an int64 array: p bytes per rank
(all_gatherv: each rank's input c_r; reduce_scatterv: each rank's output block c_r, the
input being n = sum c_r) or the p x p matrix of bytes per pair (all_to_allv: S[i][j] from
rank i to rank j). Their algorithms send no message of zero bytes: both sides know the
sizes, so a pair with nothing to exchange skips the message (as MPICH's Alltoallv and ring
Allgatherv do), and a message costs alpha + m beta only if m > 0.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Bytes", "message_time", "off_diagonal", "pair_loads", "ring_finish",
           "uneven_bounds"]

Bytes = NDArray[np.int64]


def message_time(sizes: NDArray[np.int64], alpha: float, beta: float) -> NDArray[np.float64]:
    """alpha + m beta per message of m > 0 bytes, 0 where nothing is sent."""
    return np.where(sizes > 0, alpha + sizes * beta, 0.0)


def off_diagonal(matrix: Bytes) -> Bytes:
    """The matrix with its diagonal (what each rank keeps) set to zero."""
    out = np.array(matrix, dtype=np.int64)
    np.fill_diagonal(out, 0)
    return out


def pair_loads(matrix: Bytes) -> tuple[Bytes, Bytes]:
    """(bytes each rank sends to others, bytes each receives from others)."""
    moved = off_diagonal(matrix)
    return moved.sum(axis=1), moved.sum(axis=0)


def ring_finish(blocks: Bytes, offset: int, alpha: float, beta: float,
                gamma: float) -> NDArray[np.float64]:
    """The instant each rank ends p - 1 ring steps over uneven blocks (derived here).

    In step s rank r sends block (r - s + offset) mod p to rank r + 1 and receives block
    (r - s - 1 + offset) mod p from rank r - 1, then reduces it (gamma per byte; 0 for
    all_gather). A rank starts step s once step s - 1 is done, its reduction included: its
    send has arrived and so has what it received. On the reference network every message
    is then alone on its links (a rank's next message leaves only after its previous one
    arrived), so with T_s[r] the end of step s, d(m) = alpha + m beta (0 if m = 0) and
    m_out, m_in the blocks sent and received:

        T_s[r] = max(T_{s-1}[r] + d(m_out), T_{s-1}[r-1] + d(m_in)) + m_in gamma

    (the second term only if m_in > 0): exact, for every size.
    """
    p = len(blocks)
    ranks = np.arange(p)
    done = np.zeros(p)
    for step in range(p - 1):
        out = blocks[(ranks - step + offset) % p]
        incoming = np.roll(out, 1)
        sent = done + message_time(out, alpha, beta)
        heard = np.where(incoming > 0, np.roll(done, 1) + message_time(incoming, alpha, beta),
                         done)
        done = np.maximum(sent, heard) + incoming * gamma
    return done


def uneven_bounds(collective: str, p: int, nbytes: Bytes,
                  engines: int) -> tuple[int, float, float, bool]:
    """(latency steps, bandwidth bytes, computation bytes, whether any message is needed)
    of a v-collective (Chan et al. 2007's arguments with uneven sizes, derived here).

    Bandwidth, the most any rank must move one way: all_gatherv: rank r sends its c_r
    bytes and receives the n - c_r of the others; reduce_scatterv: rank r receives c_r
    bytes (its block needs the others' data) and sends n - c_r (every other block needs
    its data); all_to_allv: what it sends to and receives from others. Computation:
    reduce_scatterv's (p-1) n reduced bytes shared by the ``engines`` that can reduce
    (the p ranks' and any server hosts'), (p-1) n / engines.
    Latency: with single-port steps the ranks whose data a rank holds (or that hold its
    data) at most double per step: ceil(log2 p) for all_gatherv and reduce_scatterv,
    ceil(log2 (k + 1)) for all_to_allv, k the most peers one rank sends to or hears from.
    """
    if p == 1:
        return 0, 0.0, 0.0, False
    if collective == "all_to_allv":
        sent, received = pair_loads(nbytes)
        moved = off_diagonal(nbytes) > 0
        peers = int(max(moved.sum(axis=0).max(), moved.sum(axis=1).max()))
        computation = 0.0
    else:
        total = int(nbytes.sum())
        own, others = nbytes, total - nbytes
        sent, received = (own, others) if collective == "all_gatherv" else (others, own)
        peers = p - 1
        computation = (p - 1) * total / engines if collective == "reduce_scatterv" else 0.0
    bandwidth = float(max(sent.max(), received.max()))
    moves = bandwidth > 0
    return (peers.bit_length() if moves else 0), bandwidth, computation, moves
