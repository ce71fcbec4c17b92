"""Pairwise-exchange algorithms: p-1 steps, in step s rank r sends to r+s, hears from r-s.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005 (reduce-scatter for long messages, all-to-all for long
messages). Every rank sends and receives one block per step, so a single-port network
carries each step at full speed.
"""

from __future__ import annotations

from simcoll.algorithms.registry import register
from simcoll.ops import ReduceOp

__all__ = ["pairwise_reduce_scatter", "pairwise_all_to_all"]


@register("reduce_scatter", "pairwise")
def pairwise_reduce_scatter(comm, x, *, op=ReduceOp.SUM):
    """Pairwise-exchange reduce-scatter (MPICH's long-message reduce-scatter).

    In step s = 1..p-1 rank r sends block (r+s) mod p to rank (r+s) mod p, receives its
    own block r from rank (r-s) mod p and reduces it into its partial result.

    Cost: (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma (Thakur et al. 2005). Each rank
    sends n - m bytes and receives (p-1) m bytes, m = its own block.
    """
    p, r = comm.size, comm.rank
    chunks = comm.split_buffer(x, p)
    acc = chunks[r]
    for step in range(1, p):
        dst, src = (r + step) % p, (r - step) % p
        got = yield comm.sendrecv(chunks[dst], dst=dst, src=src)
        acc = yield comm.reduce(acc, got, op)
    return acc


@register("all_to_all", "pairwise")
def pairwise_all_to_all(comm, x):
    """Pairwise-exchange all-to-all (MPICH's long-message all-to-all, any p).

    In step s = 1..p-1 rank r sends block (r+s) mod p to rank (r+s) mod p and receives
    block r of rank (r-s) mod p.

    Cost: (p-1) alpha + (p-1)/p n beta (Thakur et al. 2005). Rank r sends n - m_r bytes
    and receives (p-1) m_r bytes, m_r the size of block r.
    """
    p, r = comm.size, comm.rank
    chunks = comm.split_buffer(x, p)
    blocks = [chunks[r]] * p
    for step in range(1, p):
        dst, src = (r + step) % p, (r - step) % p
        blocks[src] = yield comm.sendrecv(chunks[dst], dst=dst, src=src)
    return comm.join(blocks)
