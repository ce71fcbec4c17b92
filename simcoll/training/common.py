"""Helpers the training steps share: gradient buffers, DDP's bucket assignment, rank lists."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from simcoll.algorithms.bucketed import refuse_step_model
from simcoll.algorithms.registry import algorithms, get_algorithm
from simcoll.buffers import VirtualBuffer
from simcoll.checks import integer, largest_input, real, shown
from simcoll.collectives import collective as collective_spec
from simcoll.errors import InvalidInputError
from simcoll.ops import ReduceOp
from simcoll.topology.graph import Topology
from simcoll.training.model import GPU, Model
from simcoll.units import MiB

__all__ = ["buffer_of", "bucket_limits", "ddp_buckets", "check_model",
           "check_ranks", "padded", "check_algorithm", "check_groups", "check_world"]


def buffer_of(elements: int, itemsize: int) -> VirtualBuffer:
    """A data-free buffer of ``elements`` elements of ``itemsize`` bytes (a float type
    where there is one of that size, else bytes)."""
    if itemsize in (2, 4, 8):
        return VirtualBuffer.of(elements, np.dtype(f"f{itemsize}"))
    return VirtualBuffer.of(elements * itemsize, np.uint8)


def padded(elements: int, parts: int) -> int:
    """``elements`` rounded up to a multiple of ``parts`` (equal shards, as FSDP's flat
    parameters are padded)."""
    return -(-elements // parts) * parts


STEP_UNTIL = math.inf
"""A training step's simulated-time limit: none. A step lasts what its compute and
traffic take (a GPU's ``peak_flops`` given in TFLOP/s shows as a step of years, not as a
limit its caller cannot raise); a run that never ends still stops at the event limit."""


def step_end(run_time: float, compute: float) -> float:
    """A step's time: the run's, or ``compute`` where the two agree to rounding (the
    clock adds the same spans in another order; on one GPU it can end an ulp before or
    after their sum, which must read as no communication, neither negative nor a
    scaling efficiency an ulp below 1)."""
    return compute if math.isclose(run_time, compute, rel_tol=1e-12) else run_time


def bucket_limits(bucket_cap_mb: Any, first_bucket_mb: Any) -> tuple[float, float]:
    """DDP's bucket limits in bytes, the first bucket's then the others'.

    Raises:
        InvalidInputError: a limit that is not a number of MiB > 0 (``inf``: no limit).
    """
    return (real(first_bucket_mb, "first_bucket_mb", strict=True, allow_inf=True,
                 what="MiB") * MiB,
            real(bucket_cap_mb, "bucket_cap_mb", strict=True, allow_inf=True, what="MiB") * MiB)


def ddp_buckets(tensor_bytes: Sequence[int], *, bucket_cap_mb: float = 25,
                first_bucket_mb: float = 1) -> list[list[int]]:
    """PyTorch DDP's bucket assignment: tensor indices, buckets in reduction order.

    The buckets DDP's reducer rebuilds after the first iteration and keeps from the
    second on (``Reducer::rebuild_buckets``, with
    ``torch.distributed._compute_bucket_assignment_by_size``; Li et al. 2020, Sec.
    3.2.3); the first iteration reduces every gradient in one bucket by default. The
    tensors are taken in reverse order (roughly the order the backward pass produces
    their gradients), each is added to the open bucket, and the bucket is closed once
    it holds at least its limit: ``first_bucket_mb`` MiB for the first bucket,
    ``bucket_cap_mb`` MiB for the others (``inf``: no limit, one bucket). A tensor is
    never split. Recent PyTorch gives the first bucket 1 MiB only where
    ``bucket_cap_mb`` is left at its default, and the cap given otherwise: pass
    ``first_bucket_mb=bucket_cap_mb`` to follow it.

    Raises:
        InvalidInputError: a limit that is not a number > 0 (Python or numpy), or
            ``tensor_bytes`` that is not a sequence of whole numbers of bytes >= 0.
    """
    listed = (tensor_bytes.ndim == 1 if isinstance(tensor_bytes, np.ndarray) else
              isinstance(tensor_bytes, Sequence) and not isinstance(tensor_bytes, (str, bytes)))
    if not listed:
        raise InvalidInputError(f"tensor_bytes={tensor_bytes!r} is not accepted; give a "
                                f"list of each tensor's size in bytes")
    sizes = [integer(size, f"tensor_bytes[{i}]", minimum=0, what="bytes")
             for i, size in enumerate(tensor_bytes)]
    limits = bucket_limits(bucket_cap_mb, first_bucket_mb)
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index in reversed(range(len(sizes))):
        current.append(index)
        size += sizes[index]
        if size >= limits[min(len(buckets), 1)]:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def check_model(model: Any, gpu: Any) -> None:
    """Refuse, before any run, a ``model`` that is not a :class:`Model` and a ``gpu``
    that is not a :class:`GPU`.

    Raises:
        InvalidInputError: naming the value and what is accepted.
    """
    if not isinstance(model, Model):
        raise InvalidInputError(f"model={model!r} is not accepted; give a "
                                f"simcoll.training.Model (e.g. training.gpt(...), "
                                f"training.llama_7b())")
    if not isinstance(gpu, GPU):
        raise InvalidInputError(f"gpu={gpu!r} is not accepted; give a simcoll.training.GPU "
                                f"(training.H100, training.A100 or GPU(name, peak_flops))")


def check_collective_input(nbytes: int, ranks: int, what: str, fix: str) -> None:
    """Refuse, before the run, a step whose collective over ``ranks`` GPUs would take an
    input of ``nbytes`` (``what``: which, in the user's terms; ``fix``: how to mend it)
    past what the int64 traffic counters hold (:func:`simcoll.inputs.check_counters`),
    which the collective itself would refuse inside the run.

    Raises:
        InvalidInputError: naming ``what``, the bytes, the limit and ``fix``.
    """
    if ranks > 1 and nbytes > largest_input(ranks):
        raise InvalidInputError(
            f"{what}, {shown(nbytes)} bytes, in a collective over {ranks} GPUs could "
            f"overflow the int64 traffic counters (at most {largest_input(ranks)} bytes); "
            f"{fix}")


def check_algorithm(algorithm: str, collectives: Sequence[str],
                    params: Mapping[str, Any] | None = None, *,
                    hosts: int = 0) -> dict[str, Any]:
    """Refuse, before any run, an algorithm that is not registered for every one of
    ``collectives``, that runs programs on the machine's ``hosts`` server hosts (a
    training step starts its collectives on GPU ranks; without hosts a parameter
    server's servers are ranks), or parameters it does not take; return the keywords
    every collective of the step passes: ``algorithm`` and ``params``, normalized.

    A step that runs no collective (one GPU per group) passes no ``collectives``: the
    name must then be an algorithm's, of any collective, with parameters it takes for
    one it is registered for (all_reduce where it is).

    Raises:
        UnknownAlgorithmError: naming the algorithms registered for that collective.
        InvalidInputError: an algorithm that runs programs on server hosts or models a
            backward pass of its own (``bucketed``), or a
            parameter it does not take for one of ``collectives`` or a value it refuses.
    """
    if params is not None and not isinstance(params, Mapping):
        raise InvalidInputError(f"algorithm_params={params!r} is not accepted; give a dict "
                                f"of the algorithm's parameters, e.g. {{'proto': 'Simple'}}")
    given = dict(params or {})
    normalized: dict[str, Any] = {}
    for collective in collectives or [_one_collective_of(algorithm)]:
        spec = get_algorithm(collective, algorithm)
        refuse_step_model(algorithm)
        if spec.host is not None and hosts:
            raise InvalidInputError(f"algorithm={algorithm!r} runs programs on this "
                                    f"machine's server hosts; a training step's "
                                    f"{collective} runs on GPU ranks only (on a machine "
                                    f"without server hosts its servers are ranks)")
        normalized = spec.normalized(given)
    return {"algorithm": algorithm, **normalized}


def _one_collective_of(algorithm: str) -> str:
    """A collective ``algorithm`` is registered for, all_reduce where it is: where a step
    runs no collective (one GPU per group) the name must still be an algorithm's, with
    parameters it takes for that collective (an algorithm of other collectives than the
    step's would run is not refused: nothing runs it)."""
    have = sorted((c != "all_reduce", c) for c, name in algorithms() if name == algorithm)
    return have[0][1] if have else "all_reduce"  # unknown: all_reduce's names are listed


_ANY_COUNT = 2**62
"""Elements per rank for :func:`check_groups` where a collective's sizes are not given:
its group's shape is checked, not its sizes."""


def check_groups(how: Mapping[str, Any], topology: Topology,
                 groups: Iterable[tuple[str, Sequence[str], Sequence[int]]],
                 smallest: Mapping[str, VirtualBuffer] | None = None) -> None:
    """Refuse, before the run, an algorithm that cannot run on one of a step's groups of
    GPUs (``hierarchical`` on a group with more GPUs on one node than another, say), or
    parameters it refuses for the smallest input a collective of the step takes (a
    ring's ``chunks`` above its elements), or with which its choice of the machine fails
    (``resolve``: NCCL's tuner, for ``algo="nvls"`` on a group NVLS cannot reach), as a
    run on those ranks would refuse them once started: each ``(what, collectives,
    ranks)`` is checked for every collective it runs (``how``: what
    :func:`check_algorithm` returned), on the buffer ``smallest[collective]`` where given
    (a sum where the collective reduces), one group of each shape (its members' nodes
    numbered in order of first appearance: GPUs 0-3 of node 0 and 4-7 of node 1 make
    the shape of GPUs 8-11 of node 2 and 12-15 of node 3) and, for the machine's
    choice, each group's first of a shape.

    Raises:
        InvalidInputError: naming the group (``what`` and its ranks) and the reason.
    """
    algorithm = how["algorithm"]
    params = {k: v for k, v in how.items() if k != "algorithm"}
    nodes = topology.gpu_nodes
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for what, collectives, ranks in groups:
        relabel: dict[int, int] = {}
        shape = tuple(relabel.setdefault(nodes[r], len(relabel)) for r in ranks)
        for collective in collectives:
            if (collective, shape) in seen:
                continue
            seen.add((collective, shape))
            buffer = (smallest or {}).get(collective)
            spec = get_algorithm(collective, algorithm)
            try:
                spec.check(len(ranks), _ANY_COUNT if buffer is None else buffer.count, 0,
                           shape, params)
                if buffer is not None and spec.resolve is not None:
                    spec.resolved(topology, tuple(ranks), buffer, params,
                                  ReduceOp.SUM if collective_spec(collective).reduces
                                  else None, started=True)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{what} {list(ranks)} ({collective}): {exc}") from None


def check_world(how: dict[str, Any], spans_machine: bool, where: str) -> None:
    """Refuse ``collnet=1`` (NCCL's SHARP algorithms) where a step's collectives run on
    groups smaller than the machine: the SHARP switches' programs see GPUs by world rank.

    Raises:
        InvalidInputError: naming ``where`` the groups are.
    """
    if how.get("collnet") and not spans_machine:
        raise InvalidInputError(f"algorithm_params collnet=1 needs collectives over every "
                                f"GPU of the machine in rank order (SHARP switches see "
                                f"GPUs by world rank); {where} does not")


def check_ranks(topology: Topology, ranks: Sequence[int] | None, count: int,
                name: str) -> list[int]:
    """``ranks`` (default ``0..count-1``) as distinct GPU ranks of ``topology``.

    Raises:
        InvalidInputError: the wrong number of ranks, a repeated one or one out of range.
    """
    if ranks is None:
        if count > topology.nranks:
            raise InvalidInputError(f"{name}={count} needs {count} GPUs; {topology.name} has "
                                    f"{topology.nranks}")
        return list(range(count))
    if not isinstance(ranks, (Sequence, np.ndarray)) or isinstance(ranks, (str, bytes)) or (
            isinstance(ranks, np.ndarray) and ranks.ndim != 1):
        raise InvalidInputError(f"ranks={ranks!r} is not accepted; give a list of {count} "
                                f"distinct GPU ranks of {topology.name} ({name}={count})")
    chosen = [integer(r, "rank", minimum=0, maximum=topology.nranks - 1) for r in ranks]
    if len(chosen) != count or len(set(chosen)) != count:
        raise InvalidInputError(f"ranks={list(ranks)!r} is not accepted; give {count} "
                                f"distinct GPU ranks of {topology.name} ({name}={count})")
    return chosen
