"""Tensor-parallel linear layers as Megatron-LM splits an MLP block (Shoeybi et al. 2019).

Layers are taken in pairs (0, 1), (2, 3), ...: the first of a pair is column-parallel
(GPU t of a tensor-parallel group holds rows t of its weight and bias, the output
features, and applies the activation to its own features, with no communication), the
second row-parallel (GPU t holds the matching columns of its weight, so its product is a
partial sum). One all_reduce in the forward pass sums the partial products (then the
bias, held whole by every GPU, is added); in the backward pass the column-parallel layer's
input gradient is a partial sum too, and one all_reduce sums it, for every pair but the
first (whose input is the data, which needs no gradient).

A data-parallel replica is ``tp`` consecutive ranks (rank = replica x tp + t); the
replicas take equal shares of the batch, and the GPUs holding the same pieces average
their gradients with one all_reduce of their flattened gradients.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from simcoll.checks import integer
from simcoll.comm import Comm
from simcoll.errors import InvalidInputError
from simcoll.numeric.checks import (
    DEFAULT_FLOP_RATE,
    check_algorithm_on_groups,
    check_flop_rate,
    check_job,
    data_parallel_degree,
    local_batch,
)
from simcoll.numeric.job import TrainingJob, check_model, checked_params
from simcoll.numeric.mlp import MLP, LayerCache, Params
from simcoll.numeric.passes import flatten, optimizer_step, share, unflatten
from simcoll.numeric.results import StepRecord, TrainingRun, collect
from simcoll.programs import run_program
from simcoll.topology.graph import Topology

__all__ = ["tensor_parallel", "tp_pieces"]

Array = np.ndarray


def _checked_tp(model: MLP, tp: int) -> int:
    """``tp`` as an int, if ``model`` pairs its layers and every column-parallel layer
    has an output for each of the ``tp`` GPUs."""
    tp = integer(tp, "tp", minimum=1)
    if model.layers % 2:
        raise InvalidInputError(f"tensor parallelism pairs a column-parallel layer with a "
                                f"row-parallel one; the model has {model.layers} layers, "
                                f"use an even number")
    narrowest = min(model.sizes[1::2])
    if tp > narrowest:
        raise InvalidInputError(f"tp={tp} is more than {narrowest}, the narrowest "
                                f"column-parallel output; use tp <= {narrowest}")
    return tp


def tp_pieces(model: MLP, params: Params, tp: int, index: int) -> Params:
    """The pieces of ``params`` that GPU ``index`` of a tensor-parallel group holds.

    The output features of each column-parallel layer are cut as ``np.array_split``
    cuts them; ``index`` gets rows of its weight and bias and the matching columns of the
    next layer's weight, and the whole bias of that next layer.

    Raises:
        InvalidInputError: ``model`` not an :class:`MLP`, ``params`` not its parameters
            (as :class:`~simcoll.numeric.TrainingJob` takes them), a ``tp``
            :func:`tensor_parallel` refuses, or an index not in 0..tp - 1.
    """
    params = checked_params(check_model(model), params)
    tp = _checked_tp(model, tp)
    return _pieces(model, params, tp, integer(index, "index", minimum=0, maximum=tp - 1))


def _pieces(model: MLP, params: Params, tp: int, index: int) -> Params:
    """:func:`tp_pieces` of checked arguments: views of ``params``, no copy."""
    out: Params = {}
    for col in range(0, model.layers, 2):
        rows = np.array_split(np.arange(model.sizes[col + 1]), tp)[index]
        cw, cb = model.names(col)
        rw, rb = model.names(col + 1)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        out[cw], out[cb] = params[cw][lo:hi], params[cb][lo:hi]
        out[rw], out[rb] = params[rw][:, lo:hi], params[rb]
    return {name: out[name] for name in model.parameter_names}


def tensor_parallel(topology: Topology, job: TrainingJob, *, tp: int = 2,
                    algorithm: str = "ring", flop_rate: float = DEFAULT_FLOP_RATE,
                    network: str = "flow", trace: bool = False) -> TrainingRun:
    """Train ``job`` with ``tp``-way tensor-parallel layer pairs and as many data-parallel
    replicas as the GPUs of ``topology`` allow (its GPU count / ``tp``).

    Args:
        tp: GPUs per tensor-parallel group (at most the width of every column-parallel
            layer's output).
        algorithm: the all_reduce algorithm, inside the tensor-parallel groups and across
            the replicas.
        flop_rate, network, trace: as for :func:`~simcoll.numeric.data_parallel`; each
            GPU does 1/tp of every layer's FLOPs.

    Returns:
        The run; each rank holds its pieces (:func:`tp_pieces`) under the parameter names.

    Raises:
        InvalidInputError: an odd number of layers, ``tp`` above a column-parallel layer's
            width, a GPU count that is not a multiple of ``tp``, a batch that does not
            split evenly across the replicas, an unknown algorithm, or one a tensor- or
            data-parallel group refuses.
    """
    topology = check_job(topology, job)
    model = job.model
    tp = _checked_tp(model, tp)
    replicas = data_parallel_degree(topology, tp, "tp")
    local_batch(job, replicas)
    count = sum(v.size for v in job.params.values())
    check_algorithm_on_groups("all_reduce", algorithm, topology,
                 [list(range(r * tp, (r + 1) * tp)) for r in range(replicas)]
                 + [[d * tp + j for d in range(replicas)] for j in range(tp)], count)
    res = run_program(topology, _tp_rank, job, tp, algorithm, check_flop_rate(flop_rate),
                      network=network, trace=trace)
    return collect("tensor_parallel", res, lambda held: _assemble(model, held[:tp]))


def _assemble(model: MLP, pieces: Sequence[Params]) -> Params:
    out: Params = {}
    for col in range(0, model.layers, 2):
        cw, cb = model.names(col)
        rw, rb = model.names(col + 1)
        out[cw] = np.concatenate([p[cw] for p in pieces], axis=0)
        out[cb] = np.concatenate([p[cb] for p in pieces])
        out[rw] = np.concatenate([p[rw] for p in pieces], axis=1)
        out[rb] = pieces[0][rb]
    return {name: out[name] for name in model.parameter_names}


def _tp_rank(comm: Comm, job: TrainingJob, tp: int, algorithm: str,
             flop_rate: float) -> Generator[Any, Any, list[StepRecord]]:
    model, optimizer = job.model, job.optimizer
    replicas = comm.size // tp
    replica, index = divmod(comm.rank, tp)
    tp_group = comm.group([replica * tp + j for j in range(tp)])
    dp_group = comm.group([d * tp + index for d in range(replicas)])
    params = _pieces(model, job.params, tp, index)   # the job's checked, read-only arrays
    states = {n: optimizer.init(v) for n, v in params.items()}
    names = model.parameter_names
    records = []
    for batch in job.batches:
        mine = batch.rows(*share(batch.samples, replicas, replica))
        samples = mine.samples
        x = mine.x
        caches: list[LayerCache] = []
        for col in range(0, model.layers, 2):
            row = col + 1
            cw, cb = model.names(col)
            rw, rb = model.names(row)
            yield comm.compute(model.forward_flops(col, samples) / tp / flop_rate)
            a, cache = model.forward_layer(col, params[cw], params[cb], x)
            yield comm.compute(model.forward_flops(row, samples) / tp / flop_rate)
            partial = a @ params[rw].T
            summed = yield tp_group.all_reduce(partial.ravel(), algorithm=algorithm)
            z = summed.reshape(partial.shape) + params[rb]
            x = model.activate(z) if model.activated(row) else z
            caches += [cache, LayerCache(a, x)]
        loss, grad = model.loss_and_grad(x, mine.target)
        grads: Params = {}
        for col in reversed(range(0, model.layers, 2)):
            row = col + 1
            cw, cb = model.names(col)
            rw, rb = model.names(row)
            yield comm.compute(model.backward_flops(row, samples) / tp / flop_rate)
            grads[rw], grads[rb], grad_a = model.backward_layer(row, params[rw], caches[row],
                                                                grad)
            assert grad_a is not None  # a row-parallel layer is never layer 0
            yield comm.compute(model.backward_flops(col, samples) / tp / flop_rate)
            grads[cw], grads[cb], partial_in = model.backward_layer(
                col, params[cw], caches[col], grad_a, input_grad=col > 0)
            if partial_in is not None:
                grad = (yield tp_group.all_reduce(partial_in.ravel(), algorithm=algorithm)
                        ).reshape(partial_in.shape)
        flat = yield dp_group.all_reduce(flatten([grads[n] for n in names]),
                                         algorithm=algorithm)
        averaged = dict(zip(names, unflatten(flat / replicas, [params[n].shape
                                                              for n in names])))
        params, states = optimizer_step(optimizer, params, averaged, states)
        records.append(StepRecord(params, loss, comm.now))
    return records
