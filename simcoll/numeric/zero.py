"""ZeRO stages 1, 2 and 3 (Rajbhandari et al., SC 2020) with sharded Adam, on real tensors.

Every GPU is a data-parallel replica with an equal share of the batch. Each layer's
weight and bias are flattened into one vector, padded with zeros to a multiple of the GPU
count (as FSDP pads its flat parameters) and cut into equal shards: GPU r owns shard r of
every layer, and keeps the optimizer state of that shard only. What each stage moves:

* stage 1: each layer's flat gradient is reduce-scattered (summed) as soon as the
  backward pass has produced it, alongside the rest of the backward pass (as DeepSpeed's
  ``stage_1_and_2.py`` reduces from its backward hooks at a gradient-accumulation
  boundary, every step here), so GPU r receives the sum of shard r; it divides by the GPU
  count, updates its shard with its own optimizer state, and the updated shards are
  all-gathered into the whole model on every GPU;
* stage 2: the same collectives at the same times; only the shard of each gradient is
  kept, which changes the memory a GPU needs, not what moves;
* stage 3: GPUs hold only their shards of the parameters. Each layer's parameters are
  all-gathered just before its forward pass and again before its backward pass (the next
  all-gather is started before the current layer computes: prefetch; the last layer's
  backward one once its forward is done, as FSDP frees a layer's forward copy first),
  and each layer's gradient is reduce-scattered as soon as it exists; nothing is
  gathered after the update.

Per step and GPU, with ``n`` padded elements in all and a ring, stages 1 and 2 send
``2 (p-1)/p n`` elements and stage 3 sends ``3 (p-1)/p n``, the paper's 2 Psi and 3 Psi.
The reduce-scatters run one after another on one communication stream, and so do the
all-gathers on another (:func:`~simcoll.numeric.passes.in_turn`), as NCCL runs the
collectives of a stream, and as ``simcoll.training.zero_step`` times them.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from functools import partial
from typing import Any

import numpy as np

from simcoll.checks import integer
from simcoll.comm import Comm
from simcoll.numeric.checks import (
    DEFAULT_FLOP_RATE,
    check_algorithm,
    check_flop_rate,
    check_job,
    local_batch,
)
from simcoll.numeric.job import TrainingJob
from simcoll.numeric.mlp import MLP, Params
from simcoll.numeric.passes import (
    backward_layers,
    flatten,
    forward_backward,
    forward_layers,
    in_turn,
    padded,
    share,
    unflatten,
)
from simcoll.numeric.results import StepRecord, TrainingRun, collect
from simcoll.programs import run_program
from simcoll.topology.graph import Topology

__all__ = ["zero", "shard_name"]

Array = np.ndarray


def shard_name(layer: int) -> str:
    """The name under which a stage-3 rank holds its shard of ``layer``'s flat parameters."""
    return f"layer{integer(layer, 'layer', minimum=0)}.shard"


def zero(topology: Topology, job: TrainingJob, *, stage: int, reduce_scatter: str = "ring",
         all_gather: str = "ring", flop_rate: float = DEFAULT_FLOP_RATE,
         network: str = "flow", trace: bool = False) -> TrainingRun:
    """Train ``job`` with ZeRO ``stage`` (1, 2 or 3) on every GPU of ``topology``.

    Args:
        stage: 1 (optimizer state sharded), 2 (+ gradients), 3 (+ parameters); see the
            module docstring for the collectives each uses. Stage 0 is
            :func:`~simcoll.numeric.data_parallel`.
        reduce_scatter, all_gather: the registered algorithms of those collectives.
        flop_rate, network, trace: as for :func:`~simcoll.numeric.data_parallel`.

    Returns:
        The run. After each step, stage 1 and 2 ranks hold the whole model under the
        parameter names; stage 3 ranks hold, under ``shard_name(layer)``, their shard of
        each layer's padded flat vector (weight then bias, row-major).

    Raises:
        InvalidInputError: a stage other than 1, 2 or 3, a batch that does not split
            evenly across the GPUs, unknown or host-based algorithms, a bad ``flop_rate``.
    """
    topology = check_job(topology, job)
    stage = integer(stage, "stage", minimum=1, maximum=3,
                    what="the ZeRO stage; stage 0 is simcoll.numeric.data_parallel")
    p = topology.nranks
    local_batch(job, p)
    largest = max(_flat_size(job.model, layer) for layer in range(job.model.layers))
    check_algorithm("reduce_scatter", reduce_scatter, topology.gpu_nodes, largest,
                    len(topology.hosts))
    check_algorithm("all_gather", all_gather, topology.gpu_nodes, -(-largest // p),
                    len(topology.hosts))
    program = _stage3_rank if stage == 3 else _stage12_rank
    res = run_program(topology, program, job, reduce_scatter, all_gather,
                      check_flop_rate(flop_rate), network=network, trace=trace)
    if stage < 3:
        return collect(f"zero{stage}", res, lambda held: held[0])
    return collect("zero3", res, lambda held: _assemble(job.model, held))


def _flat_size(model: MLP, layer: int) -> int:
    return model.sizes[layer + 1] * (model.sizes[layer] + 1)


def _layer_shapes(model: MLP, layer: int) -> list[tuple[int, ...]]:
    shapes = model.shapes()
    return [shapes[name] for name in model.names(layer)]


def _layer_params(model: MLP, layer: int, flat: Array) -> Params:
    """A layer's weight and bias from its (possibly padded) flat vector."""
    size = _flat_size(model, layer)
    return dict(zip(model.names(layer), unflatten(flat[:size], _layer_shapes(model, layer))))


def _assemble(model: MLP, held: Sequence[Params]) -> Params:
    params: Params = {}
    for layer in range(model.layers):
        flat = np.concatenate([h[shard_name(layer)] for h in held])
        params.update(_layer_params(model, layer, flat))
    return params


def _shard(flat: Array, parts: int, index: int) -> Array:
    full = padded(flat, parts)
    return full[slice(*share(full.size, parts, index))]


def _stage12_rank(comm: Comm, job: TrainingJob, rs_algorithm: str,
                  ag_algorithm: str, flop_rate: float
                  ) -> Generator[Any, Any, list[StepRecord]]:
    model, optimizer, p, r = job.model, job.optimizer, comm.size, comm.rank
    layers = range(model.layers)
    params = dict(job.params)
    shards = {i: _shard(flatten([params[n] for n in model.names(i)]), p, r) for i in layers}
    states: dict[int, Any] = {i: optimizer.init(shards[i]) for i in layers}
    records = []
    scattered: dict[int, Any] = {}

    def scatter(layer: int, dw: Array, db: Array) -> None:
        previous = scattered[min(scattered)] if scattered else None  # the last one started
        scattered[layer] = in_turn(comm, previous, partial(
            comm.reduce_scatter, padded(flatten([dw, db]), p), algorithm=rs_algorithm))

    for batch in job.batches:
        scattered.clear()
        mine = batch.rows(*share(batch.samples, p, r))
        loss, _ = yield from forward_backward(comm, model, params, mine, flop_rate, scatter)
        for layer in reversed(layers):
            grad = (yield scattered[layer]) / p
            shards[layer], states[layer] = optimizer.update(shards[layer], grad, states[layer])
        gathered: dict[int, Any] = {}
        for i in layers:
            gathered[i] = in_turn(comm, gathered.get(i - 1), partial(
                comm.all_gather, shards[i], algorithm=ag_algorithm))
        params = {}
        for layer in layers:
            params.update(_layer_params(model, layer, (yield gathered[layer])))
        records.append(StepRecord(params, loss, comm.now))
    return records


def _stage3_rank(comm: Comm, job: TrainingJob, rs_algorithm: str,
                 ag_algorithm: str, flop_rate: float
                 ) -> Generator[Any, Any, list[StepRecord]]:
    model, optimizer, p, r = job.model, job.optimizer, comm.size, comm.rank
    last = model.layers - 1
    shards = {i: _shard(flatten([job.params[n] for n in model.names(i)]), p, r)
              for i in range(model.layers)}
    states: dict[int, Any] = {i: optimizer.init(shards[i]) for i in shards}
    records = []
    stream: dict[str, Any] = {}   # the last collective started on each stream
    # each stream matches its collectives in a context of its own: a rank starts its
    # next gather and its next reduce-scatter as its own earlier ones end, in an order
    # other ranks need not share
    gather_stream, reduce_stream = comm.fresh_context(), comm.fresh_context()

    def gather(layer: int) -> Any:
        stream["gather"] = in_turn(gather_stream, stream.get("gather"), partial(
            gather_stream.all_gather, shards[layer], algorithm=ag_algorithm))
        return stream["gather"]

    for batch in job.batches:
        mine = batch.rows(*share(batch.samples, p, r))
        caches = []
        out, ahead = mine.x, gather(0)
        for layer in range(model.layers):
            # the next layer's gather starts before this one computes (prefetch)
            current, ahead = ahead, gather(layer + 1) if layer < last else None
            weights = _layer_params(model, layer, (yield current))
            out, (cache,) = yield from forward_layers(comm, model, weights, [layer], out,
                                                      flop_rate)
            caches.append(cache)
        # the last layer again for the backward pass, once its forward has let its
        # parameters go (FSDP holds one gathered copy of a layer at a time)
        ahead = gather(last)
        loss, grad = model.loss_and_grad(out, mine.target)
        scattered = {}
        for layer in reversed(range(model.layers)):
            current, ahead = ahead, gather(layer - 1) if layer > 0 else None
            weights = _layer_params(model, layer, (yield current))
            grads, grad_in = yield from backward_layers(comm, model, weights, [layer],
                                                        [caches[layer]], grad, flop_rate)
            scattered[layer] = stream["scatter"] = in_turn(
                reduce_stream, stream.get("scatter"), partial(
                    reduce_stream.reduce_scatter, padded(flatten(list(grads.values())), p),
                    algorithm=rs_algorithm))
            if grad_in is not None:
                grad = grad_in
        for layer in reversed(range(model.layers)):
            summed = (yield scattered[layer]) / p
            shards[layer], states[layer] = optimizer.update(shards[layer], summed,
                                                            states[layer])
        records.append(StepRecord({shard_name(i): shards[i] for i in shards}, loss, comm.now))
    return records
