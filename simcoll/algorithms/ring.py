"""Ring algorithms: each rank talks only to its two neighbours on a logical ring.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 69(2), 2009; Thakur, Rabenseifner & Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), 2005.
"""

from __future__ import annotations

from simcoll.algorithms.registry import register
from simcoll.ops import ReduceOp

__all__ = ["ring_all_reduce"]


@register("all_reduce", "ring")
def ring_all_reduce(comm, x, *, op=ReduceOp.SUM):
    """Ring all-reduce: a ring reduce-scatter, then a ring all-gather.

    The buffer is cut into p chunks. In step s of the reduce-scatter, rank r sends chunk
    (r - s) mod p to rank r+1 and reduces the chunk it gets from rank r-1 into its own;
    after p-1 steps rank r holds the fully reduced chunk (r + 1) mod p. The all-gather then
    passes the reduced chunks around the ring for p-1 more steps.

    Cost: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Patarasuk & Yuan 2009).
    Each rank sends and receives 2(p-1)/p n bytes, the all-reduce bandwidth lower bound.
    """
    p, r = comm.size, comm.rank
    chunks = comm.split_buffer(x, p)
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(p - 1):
        send, keep = (r - step) % p, (r - step - 1) % p
        got = yield comm.sendrecv(chunks[send], dst=right, src=left)
        chunks[keep] = yield comm.reduce(chunks[keep], got, op)
    for step in range(p - 1):
        send, keep = (r - step + 1) % p, (r - step) % p
        chunks[keep] = yield comm.sendrecv(chunks[send], dst=right, src=left)
    return comm.join(chunks)
