"""Data parallelism: every GPU holds the whole model, takes an equal share of the batch,
and averages its gradients with the others before the same update.

Two ways to average: the plain loop (after the backward pass, one all_reduce per
parameter tensor, each waited for, then a division by the number of GPUs), and PyTorch
DDP's buckets (Li et al., VLDB 2020): gradients are grouped into buckets in reverse
parameter order, and each bucket is flattened and all-reduced as soon as the backward
pass has produced all of it, while the backward pass goes on.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from functools import partial
from typing import Any

import numpy as np

from simcoll.checks import size
from simcoll.comm import Comm
from simcoll.numeric.checks import (
    DEFAULT_FLOP_RATE,
    check_algorithm,
    check_flop_rate,
    check_job,
    local_batch,
)
from simcoll.numeric.job import TrainingJob, check_model
from simcoll.numeric.mlp import MLP, Params
from simcoll.numeric.passes import (
    flatten,
    forward_backward,
    in_turn,
    optimizer_step,
    share,
    unflatten,
)
from simcoll.numeric.results import StepRecord, TrainingRun, collect
from simcoll.programs import run_program
from simcoll.topology.graph import Topology
from simcoll.training.common import ddp_buckets as buckets_of
from simcoll.units import MiB

__all__ = ["data_parallel", "ddp", "ddp_buckets"]


def data_parallel(topology: Topology, job: TrainingJob, *, algorithm: str = "ring",
                  flop_rate: float = DEFAULT_FLOP_RATE, network: str = "flow",
                  trace: bool = False) -> TrainingRun:
    """Train ``job`` data-parallel with the plain loop: every GPU of ``topology`` is a
    replica; after the backward pass each gradient tensor is all-reduced (summed) in
    parameter order, each waited for, and divided by the number of GPUs.

    Args:
        algorithm: the registered all_reduce algorithm.
        flop_rate: FLOP/s of each GPU; each layer's forward and backward pass takes its
            matrix products' FLOPs at this rate on the GPU's compute stream.
        network, trace: as for :func:`simcoll.simulate`.

    Returns:
        The run; every rank holds (``held``) the whole model under the parameter names.

    Raises:
        InvalidInputError: the batch does not split evenly across the GPUs, an unknown or
            host-based algorithm, a bad ``flop_rate``.
    """
    topology = check_job(topology, job)
    p = topology.nranks
    local_batch(job, p)
    check_algorithm("all_reduce", algorithm, topology.gpu_nodes, _largest(job.params),
                    len(topology.hosts))
    res = run_program(topology, _plain_rank, job, algorithm, check_flop_rate(flop_rate),
                      network=network, trace=trace)
    return collect("data_parallel", res, lambda held: held[0])


def ddp(topology: Topology, job: TrainingJob, *, bucket_bytes: int | str = 25 * MiB,
        algorithm: str = "ring", flop_rate: float = DEFAULT_FLOP_RATE, network: str = "flow",
        trace: bool = False) -> TrainingRun:
    """Train ``job`` data-parallel with DDP's buckets (see :func:`ddp_buckets`): each
    bucket's flattened gradients are all-reduced (summed) as soon as the backward pass
    has produced them and the bucket before has been, one after another on one
    communication stream beside the backward pass, then divided by the number of GPUs.

    Args:
        bucket_bytes: DDP's ``bucket_cap_mb`` in bytes, or a size such as ``"25MiB"``
            (25 MiB, PyTorch's cap; the first bucket has this cap too, as recent
            PyTorch gives it where ``bucket_cap_mb`` is passed; left at its default,
            PyTorch's first bucket is 1 MiB). The buckets are those DDP uses from its
            second iteration on (:func:`~simcoll.training.ddp_buckets`), every step.
        algorithm, flop_rate, network, trace: as for :func:`data_parallel`.

    Returns:
        The run; every rank holds the whole model under the parameter names.

    Raises:
        InvalidInputError: as for :func:`data_parallel`, or ``bucket_bytes`` below 1.
    """
    topology = check_job(topology, job)
    local_batch(job, topology.nranks)
    buckets = ddp_buckets(job.model, bucket_bytes)
    check_algorithm("all_reduce", algorithm, topology.gpu_nodes, _largest(job.params),
                    len(topology.hosts))
    res = run_program(topology, _ddp_rank, job, buckets, algorithm,
                      check_flop_rate(flop_rate), network=network, trace=trace)
    return collect("ddp", res, lambda held: held[0])


def ddp_buckets(model: MLP, bucket_bytes: int | str) -> tuple[tuple[str, ...], ...]:
    """DDP's buckets: the parameter names in reverse order, cut after each name that brings
    its bucket to ``bucket_bytes`` or more (float64 gradients, 8 bytes per element):
    :func:`simcoll.training.ddp_buckets` with the first bucket's limit the others'.

    Raises:
        InvalidInputError: ``model`` is not an :class:`MLP`, or ``bucket_bytes`` is not
            a size (bytes, or a string such as ``"25MiB"``) >= 1.
    """
    check_model(model)
    cap = size(bucket_bytes, "bucket_bytes", minimum=1, what="bytes per bucket") / MiB
    shapes, names = model.shapes(), model.parameter_names
    sizes = [8 * int(np.prod(shapes[name])) for name in names]
    return tuple(tuple(names[i] for i in bucket)
                 for bucket in buckets_of(sizes, bucket_cap_mb=cap, first_bucket_mb=cap))


def _largest(params: Params) -> int:
    return max(v.size for v in params.values())


def _plain_rank(comm: Comm, job: TrainingJob, algorithm: str,
                flop_rate: float) -> Generator[Any, Any, list[StepRecord]]:
    model, optimizer, p = job.model, job.optimizer, comm.size
    params = dict(job.params)
    states = {name: optimizer.init(value) for name, value in params.items()}
    records = []
    for batch in job.batches:
        mine = batch.rows(*share(batch.samples, p, comm.rank))
        loss, grads = yield from forward_backward(comm, model, params, mine, flop_rate)
        for name in model.parameter_names:
            summed = yield comm.all_reduce(grads[name].ravel(), algorithm=algorithm)
            grads[name] = summed.reshape(grads[name].shape) / p
        params, states = optimizer_step(optimizer, params, grads, states)
        records.append(StepRecord(params, loss, comm.now))
    return records


class _Reducer:
    """One step's buckets: each goes out once all its gradients exist and the bucket
    before it has been all-reduced, in bucket order, as DDP's reducer launches them on
    its process group's one communication stream (one layer may complete several
    buckets at once)."""

    def __init__(self, comm: Comm, model: MLP, buckets: Sequence[tuple[str, ...]],
                 algorithm: str):
        self.comm, self.model, self.buckets, self.algorithm = comm, model, buckets, algorithm
        self.ready: Params = {}
        self.handles: list[Any] = []

    def layer_done(self, layer: int, dw: np.ndarray, db: np.ndarray) -> None:
        """Take a layer's gradients and start every bucket they complete."""
        self.ready.update(zip(self.model.names(layer), (dw, db)))
        buckets, handles = self.buckets, self.handles
        while len(handles) < len(buckets) and all(n in self.ready
                                                  for n in buckets[len(handles)]):
            flat = flatten([self.ready[n] for n in buckets[len(handles)]])
            handles.append(in_turn(self.comm, handles[-1] if handles else None,
                                   partial(self.comm.all_reduce, flat,
                                           algorithm=self.algorithm)))


def _ddp_rank(comm: Comm, job: TrainingJob, buckets: Sequence[tuple[str, ...]],
              algorithm: str, flop_rate: float) -> Generator[Any, Any, list[StepRecord]]:
    model, optimizer, p = job.model, job.optimizer, comm.size
    shapes = model.shapes()
    params = dict(job.params)
    states = {name: optimizer.init(value) for name, value in params.items()}
    records = []
    for batch in job.batches:
        mine = batch.rows(*share(batch.samples, p, comm.rank))
        reducer = _Reducer(comm, model, buckets, algorithm)
        loss, _ = yield from forward_backward(comm, model, params, mine, flop_rate,
                                              reducer.layer_done)
        grads: Params = {}
        for names, handle in zip(buckets, reducer.handles):
            summed = yield handle
            for name, tensor in zip(names, unflatten(summed, [shapes[n] for n in names])):
                grads[name] = tensor / p
        params, states = optimizer_step(optimizer, params, grads, states)
        records.append(StepRecord(params, loss, comm.now))
    return records
