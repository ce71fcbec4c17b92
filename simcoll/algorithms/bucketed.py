"""Bucketed all-reduce overlapped with compute: the gradient all-reduce of PyTorch DDP.

DDP (Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
Training", VLDB 2020) groups gradients into buckets and all-reduces each bucket as soon as
the backward pass has produced it, while the backward pass goes on with the next one. Here
the backward pass is ``compute`` seconds spread evenly over the buckets on each GPU's
compute stream, and the buckets are reduced one after another on the communication stream
(as NCCL runs them on one stream) with the flat all_reduce algorithm ``inner``.
"""

from __future__ import annotations

from simcoll.algorithms.registry import get_algorithm, register
from simcoll.errors import InvalidInputError, UnknownAlgorithmError
from simcoll.ops import ReduceOp

__all__ = ["bucketed_all_reduce"]

_NOT_INNER = ("bucketed", "parameter_server", "hierarchical")


def validate(p, count, hosts, *, buckets=1, compute=0.0, inner="ring"):
    """Refuse bucket counts, compute times and inner algorithms that make no sense."""
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise InvalidInputError(f"buckets={buckets!r} is not accepted; use an integer >= 1")
    if not (isinstance(compute, (int, float)) and compute >= 0):
        raise InvalidInputError(f"compute={compute!r} is not accepted; use seconds >= 0")
    if inner in _NOT_INNER:
        raise InvalidInputError(f"inner={inner!r} is not accepted; use a flat all_reduce "
                                f"algorithm such as 'ring'")
    try:
        get_algorithm("all_reduce", inner)
    except UnknownAlgorithmError as exc:
        raise InvalidInputError(f"inner={inner!r}: {exc}") from None


@register("all_reduce", "bucketed", validate=validate)
def bucketed_all_reduce(comm, x, *, op=ReduceOp.SUM, buckets=1, compute=0.0, inner="ring"):
    """All-reduce ``buckets`` pieces of x, each as soon as ``compute / buckets`` of compute
    for it is done, on a stream of its own while the compute stream goes on.

    With t_c = compute / B per bucket and t_a the time of ``inner`` on one bucket of n/B
    bytes, bucket i is ready at (i+1) t_c and its reduction starts when both it is ready
    and bucket i-1 is reduced, so (derived here) the step takes
    t_c + t_a + (B-1) max(t_c, t_a): communication hides behind compute except for the
    last bucket when t_a <= t_c, and compute hides behind communication otherwise. Each
    rank sends what ``inner`` sends for each bucket.

    Args:
        buckets: number of buckets B (pieces cut as np.array_split does).
        compute: seconds of backward compute on each GPU, spread evenly over the buckets.
        inner: the flat all_reduce algorithm that reduces each bucket.
    """
    reduce_bucket = get_algorithm("all_reduce", inner).fn
    pieces = comm.split_buffer(x, buckets)
    ready = [comm.compute(compute / buckets) for _ in range(buckets)]
    reduced = []
    for piece, produced in zip(pieces, ready):
        yield produced
        reduced.append((yield from reduce_bucket(comm, piece, op=op)))
    return comm.join(reduced)
