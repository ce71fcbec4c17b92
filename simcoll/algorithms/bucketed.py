"""Bucketed all-reduce overlapped with compute: the gradient all-reduce of PyTorch DDP.

DDP (Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
Training", VLDB 2020) groups gradients into buckets and all-reduces each bucket as soon as
the backward pass has produced it, while the backward pass goes on with the next one. Here
the backward pass is ``compute`` seconds spread evenly over the buckets on each GPU's
compute stream, and the buckets are reduced one after another on the communication stream
(as NCCL runs them on one stream) with the flat all_reduce algorithm ``inner``.

Cost model (ours): bucket i of B is ready at (i+1) t_c, t_c = compute / B, and takes t_a
(the ``inner`` algorithm's time on n/B bytes) once the previous bucket is done, so the
last bucket ends at t_c + t_a + (B-1) max(t_c, t_a). Exact where ``inner``'s model is
exact for a bucket, the element count divides by B, and ``inner`` ends every rank at the
same instant (its model's ``ends_together``), or B = 1. With an inner algorithm whose ranks
finish apart (trees), a rank that finishes bucket i early starts bucket i+1 before the
rest, which the bucket-after-bucket sum does not see.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from simpy.events import Event

from simcoll import cost
from simcoll.algorithms.params import Choice, Int, Keywords, Real
from simcoll.algorithms.registry import algorithms, get_algorithm, register
from simcoll.buffers import Buffer, block_bytes, split
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, largest_block
from simcoll.errors import InvalidInputError
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram

__all__ = ["bucketed_all_reduce", "check_inner_params", "refuse_step_model"]

_NOT_INNER = ("bucketed", "parameter_server", "hierarchical")


def refuse_step_model(algorithm: str) -> None:
    """Refuse ``bucketed`` as the all_reduce of a training step: it models a backward
    pass itself, and its compute would queue behind the step's own on the GPU's one
    stream (the step's buckets then wait for the whole backward pass).

    Raises:
        InvalidInputError: ``algorithm`` is ``"bucketed"``.
    """
    if algorithm == "bucketed":
        raise InvalidInputError(
            "algorithm='bucketed' models a backward pass of its own (its compute queues "
            "behind the step's on the GPU's one stream); a training step models its "
            "buckets and compute itself: give the all_reduce that reduces each bucket, "
            "such as 'ring' or 'nccl'")


def _flat_all_reduce() -> list[str]:
    """All-reduce algorithms that can reduce one bucket: all but the composite ones."""
    return [name for _, name in algorithms("all_reduce") if name not in _NOT_INNER]


MAX_BUCKETS = 100_000
"""Buckets a run takes at most: each is a program of its own on every GPU (about 0.7 ms
and 10 KB a bucket on 4 GPUs, and some 11 - 19 ms and 70 KB on 32: 100,000 there take
half an hour and about 7 GB), and a bucket size typed in MiB where bytes were meant (25
for 25 MiB) would cut a model's gradients into tens of millions of them."""

PARAMS = {
    "buckets": Int(1, minimum=1, maximum=MAX_BUCKETS, at_most_elements=True,
                   doc="buckets B the buffer is cut into"),
    "compute": Real(0.0, minimum=0.0,
                    doc="seconds of backward compute per GPU, spread over the buckets"),
    "inner": Choice("ring", _flat_all_reduce,
                    doc="all_reduce algorithm that reduces each bucket: any but "
                        + ", ".join(_NOT_INNER) + ", which are not flat"),
    "inner_params": Keywords(doc="the inner algorithm's parameters for every bucket",
                             algorithm_param="inner"),
}


def check_inner_params(p: int, count: int, hosts: int, nodes: tuple[int, ...], buckets: int,
                       inner: str, params: dict[str, Any]) -> None:
    """Refuse ``params`` unless ``inner`` takes them for the smallest of ``buckets``
    buckets of ``count`` elements in all, ``count // buckets`` elements.

    Raises:
        InvalidInputError: as the inner algorithm's check says.
    """
    get_algorithm("all_reduce", inner).check(p, count // buckets, hosts, nodes, params)


def _validate(p: int, count: int, hosts: int, *, nodes: tuple[int, ...], buckets: int,
              inner: str, inner_params: dict[str, Any]) -> None:
    """Refuse inner parameters the inner algorithm does not take, or that it refuses for
    a bucket (:func:`check_inner_params`)."""
    try:
        check_inner_params(p, count, hosts, nodes, buckets, inner, inner_params)
    except InvalidInputError as exc:
        raise InvalidInputError(f"inner_params for inner={inner!r}: {exc}") from None


@contextmanager
def _inner_refusals(inner: str) -> Iterator[None]:
    """Name ``inner`` and where its parameters go in a refusal of its cost model (one
    that says "give algo='ring'" means inner_params={'algo': 'ring'} here)."""
    try:
        yield
    except InvalidInputError as exc:
        raise InvalidInputError(f"inner={inner!r}, whose parameters bucketed takes in "
                                f"inner_params, for a bucket: {exc}") from None


def _traffic(p: int, nbytes: int, itemsize: int, *, buckets: int, inner: str,
             inner_params: dict[str, Any]) -> Traffic:
    _validate(p, nbytes // itemsize, 0, nodes=(), buckets=buckets, inner=inner,
              inner_params=inner_params)
    with _inner_refusals(inner):
        parts = [cost.traffic("all_reduce", inner, p=p, nbytes=int(b), itemsize=itemsize,
                              **inner_params)
                 for b in block_bytes(nbytes, buckets, itemsize)]
    return Traffic(*(sum(getattr(t, f) for t in parts)
                     for f in ("sent", "received", "host_sent", "host_received")))


def _exact(p: int, nbytes: int, itemsize: int, *, buckets: int, inner: str,
           inner_params: dict[str, Any]) -> bool:
    _validate(p, nbytes // itemsize, 0, nodes=(), buckets=buckets, inner=inner,
              inner_params=inner_params)
    with _inner_refusals(inner):
        return ((nbytes // itemsize) % buckets == 0
                and (buckets == 1 or get_algorithm("all_reduce", inner).cost.ends_together)
                and cost.is_exact("all_reduce", inner, p=p, nbytes=nbytes // buckets,
                                  itemsize=itemsize, **inner_params))


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *, buckets: int,
          compute: float, inner: str, inner_params: dict[str, Any], itemsize: int) -> float:
    """t_c + t_a + (B-1) max(t_c, t_a), with t_c = compute / B and t_a = ``inner``'s
    predicted time for a bucket, n / B bytes (the largest, ceil(count / B) elements,
    where B does not divide the count)."""
    _validate(p, nbytes // itemsize, 0, nodes=(), buckets=buckets, inner=inner,
              inner_params=inner_params)
    t_c = compute / buckets
    with _inner_refusals(inner):
        t_a = cost.predict("all_reduce", inner, p=p,
                           nbytes=largest_block(nbytes, buckets, itemsize), alpha=alpha,
                           beta=beta, gamma=gamma, itemsize=itemsize, **inner_params)
    return t_c + t_a + (buckets - 1) * max(t_c, t_a)


@register("all_reduce", "bucketed", params=PARAMS, validate=_validate,
          cost=CostModel(time=_time, traffic=_traffic, exact=_exact))
def bucketed_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, buckets: int,
                        compute: float, inner: str,
                        inner_params: dict[str, Any]) -> BufferProgram:
    """All-reduce ``buckets`` pieces of x, each as soon as ``compute / buckets`` of compute
    for it is done, on a communication stream of its own (a started program, each bucket a
    started collective) while the compute stream goes on.

    With t_c = compute / B per bucket and t_a the time of ``inner`` on one bucket of n/B
    bytes, bucket i is ready at (i+1) t_c and its reduction starts when both it is ready
    and bucket i-1 is reduced, so (derived here) the step takes
    t_c + t_a + (B-1) max(t_c, t_a): communication hides behind compute except for the
    last bucket when t_a <= t_c, and compute hides behind communication otherwise. Each
    rank sends what ``inner`` sends for each bucket.
    """
    last: Event | None = None
    handles = []
    for piece in split(x, buckets):
        yield comm.compute(compute / buckets)  # the backward pass produces this bucket
        last = comm.start(_after(last, comm, piece, inner, inner_params, op))
        handles.append(last)
    reduced = []
    for handle in handles:
        reduced.append((yield handle))
    return comm.join(reduced)


def _after(previous: Event | None, comm: Comm, piece: Buffer, inner: str,
           inner_params: dict[str, Any], op: ReduceOp) -> BufferProgram:
    """The communication stream's next bucket: its all-reduce starts once the previous
    bucket's is done (one stream, as NCCL runs them), and returns the bucket's sum."""
    if previous is not None:
        yield previous
    return (yield comm.all_reduce(piece, algorithm=inner, op=op.combining, **inner_params))
