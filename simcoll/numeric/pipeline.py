"""Pipeline parallelism with micro-batches and gradient accumulation, on real tensors.

The layers are cut into consecutive stages, one GPU each; a data-parallel replica is
``stages`` consecutive ranks (rank = replica x stages + stage). Each replica takes an
equal share of the batch and cuts it into ``micro_batches`` equal micro-batches. A stage
receives a micro-batch's activations from the stage before it, runs its layers and sends
its output on; in the backward pass it receives the gradient of its output from the stage
after it and sends the gradient of its input back. Each stage sums its gradients over
the micro-batches and divides by their number (each micro-batch's loss is a mean), then
the replicas of the stage average them with one all_reduce of the stage's flattened
gradients, and every GPU updates its own layers.

Schedules: ``"gpipe"`` (Huang et al., NeurIPS 2019: every micro-batch forward, then every
one backward, last first) and ``"1f1b"`` (Narayanan et al., SC 2021: stage s runs
``stages - s - 1`` forwards ahead, then alternates one forward and one backward).
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
from simcoll.numeric.job import TrainingJob
from simcoll.numeric.mlp import Params
from simcoll.numeric.passes import (
    backward_layers,
    flatten,
    forward_layers,
    optimizer_step,
    share,
    unflatten,
)
from simcoll.numeric.results import StepRecord, TrainingRun, collect
from simcoll.programs import run_program
from simcoll.topology.graph import Topology
from simcoll.training.pipeline import SCHEDULES, check_schedule, schedule_of

__all__ = ["pipeline", "pipeline_schedule", "stage_layers", "SCHEDULES"]


def _checked_stages(layers: int, stages: int) -> int:
    """``stages`` as an int, if every stage of a model of ``layers`` layers gets one."""
    stages = integer(stages, "stages", minimum=1)
    if stages > layers:
        raise InvalidInputError(f"stages={stages} is more than the model's {layers} layers; "
                                f"use 1..{layers} stages")
    return stages


def stage_layers(layers: int, stages: int) -> tuple[tuple[int, ...], ...]:
    """The layers of each stage: consecutive, as even as ``np.array_split`` cuts them.

    Raises:
        InvalidInputError: fewer than one layer, or stages not in 1..layers.
    """
    layers = integer(layers, "layers", minimum=1)
    stages = _checked_stages(layers, stages)
    return tuple(tuple(int(i) for i in part) for part in np.array_split(range(layers), stages))


def pipeline_schedule(schedule: str, stages: int, stage: int,
                      micro_batches: int) -> tuple[tuple[str, int], ...]:
    """:func:`simcoll.training.schedule_of` as a tuple: the order in which ``stage``
    runs its passes, ``("F", i)`` micro-batch i's forward pass, ``("B", i)`` its
    backward pass.

    Raises:
        InvalidInputError: an unknown schedule, a stage not in 0..stages - 1, or fewer
            than one micro-batch.
    """
    return tuple(schedule_of(schedule, stages, stage, micro_batches))


def pipeline(topology: Topology, job: TrainingJob, *, stages: int = 2,
             micro_batches: int = 4, schedule: str = "gpipe", algorithm: str = "ring",
             flop_rate: float = DEFAULT_FLOP_RATE, network: str = "flow",
             trace: bool = False) -> TrainingRun:
    """Train ``job`` with ``stages`` pipeline stages and as many data-parallel replicas as
    the GPUs of ``topology`` allow (its GPU count / ``stages``).

    Args:
        stages: pipeline stages (1 .. the model's layer count).
        micro_batches: micro-batches each replica cuts its share of the batch into.
        schedule: ``"gpipe"`` or ``"1f1b"`` (same numbers, different timing).
        algorithm: the all_reduce algorithm that averages a stage's gradients across
            replicas.
        flop_rate, network, trace: as for :func:`~simcoll.numeric.data_parallel`.

    Returns:
        The run; each rank holds its stage's layers under the parameter names.

    Raises:
        InvalidInputError: more stages than layers, a GPU count that is not a multiple of
            ``stages``, a batch that does not split evenly across the replicas or a share
            that ``micro_batches`` does not divide, an unknown schedule or algorithm, or an
            algorithm one of the data-parallel groups refuses.
    """
    topology = check_job(topology, job)
    layers = job.model.layers
    stages = _checked_stages(layers, stages)
    check_schedule(schedule)
    replicas = data_parallel_degree(topology, stages, "stages")
    local_batch(job, replicas, micro_batches)
    check_algorithm_on_groups("all_reduce", algorithm, topology,
                 [[d * stages + s for d in range(replicas)] for s in range(stages)],
                 sum(v.size for v in job.params.values()))
    res = run_program(topology, _stage_rank, job, stages, micro_batches, schedule, algorithm,
                      check_flop_rate(flop_rate), network=network, trace=trace)

    def assemble(held: Sequence[Params]) -> Params:
        merged = {k: v for h in held[:stages] for k, v in h.items()}
        return {name: merged[name] for name in job.model.parameter_names}

    return collect(f"pipeline-{schedule}", res, assemble)


def _stage_rank(comm: Comm, job: TrainingJob, stages: int, micro_batches: int,
                schedule: str, algorithm: str,
                flop_rate: float) -> Generator[Any, Any, list[StepRecord]]:
    model, optimizer = job.model, job.optimizer
    replicas = comm.size // stages
    replica, stage = divmod(comm.rank, stages)
    layers = stage_layers(model.layers, stages)[stage]
    names = [n for layer in layers for n in model.names(layer)]
    shapes = model.shapes()
    params = {n: job.params[n] for n in names}
    states = {n: optimizer.init(v) for n, v in params.items()}
    group = comm.group([d * stages + stage for d in range(replicas)])
    first, last = stage == 0, stage == stages - 1
    order = pipeline_schedule(schedule, stages, stage, micro_batches)
    records = []
    for batch in job.batches:
        mine = batch.rows(*share(batch.samples, replicas, replica))
        caches: dict[int, Any] = {}
        output_grads: dict[int, Any] = {}
        losses: list[float] = []
        total = np.zeros(sum(params[n].size for n in names))
        for kind, i in order:
            if kind == "F":
                micro = mine.rows(*share(mine.samples, micro_batches, i))
                x = micro.x if first else (yield comm.recv(comm.rank - 1, tag=("act", i)))
                out, caches[i] = yield from forward_layers(comm, model, params, layers, x,
                                                           flop_rate)
                if last:
                    loss, output_grads[i] = model.loss_and_grad(out, micro.target)
                    losses.append(loss)
                else:
                    comm.send(out, comm.rank + 1, tag=("act", i))
                continue
            grad = output_grads.pop(i) if last else (
                yield comm.recv(comm.rank + 1, tag=("grad", i)))
            grads, grad_in = yield from backward_layers(comm, model, params, layers,
                                                        caches.pop(i), grad, flop_rate)
            flat = flatten([grads[n] for n in names])
            total = total + flat
            if not first:
                comm.send(grad_in, comm.rank - 1, tag=("grad", i))
        summed = yield group.all_reduce(total / micro_batches, algorithm=algorithm)
        averaged = dict(zip(names, unflatten(summed / replicas, [shapes[n] for n in names])))
        params, states = optimizer_step(optimizer, params, averaged, states)
        records.append(StepRecord(params, sum(losses) / len(losses) if last else None,
                                  comm.now))
    return records
