"""A 3D-parallel training step: data, tensor and pipeline parallelism (and ZeRO) at once.

Narayanan et al. 2021, "Efficient large-scale language model training on GPU clusters
using Megatron-LM": t-way tensor parallelism inside a node (its all-reduces are on the
critical path and want NVLink), p pipeline stages across nodes (point-to-point traffic
only at stage boundaries), and d data-parallel replicas outermost. Each replica
splits its B / d sequences into m micro-batches run by the pipeline schedule (1F1B by
default); every block's forward and backward runs on its tensor-parallel group with the
group's collectives (:func:`simcoll.training.tensor.block_pass`). With full activation
recomputation a block's backward pass first runs its forward again, with the forward's
tensor-parallel collectives: Megatron-LM's ``CheckpointFunction.backward``
(``megatron/core/tensor_parallel/random.py``) calls the block's own forward, whose
row-parallel layers all-reduce (or reduce-scatter) as in the first forward. Between
stages each GPU of a tensor-parallel group sends its peer of the next stage 1/t of a
micro-batch's activations (and the previous stage 1/t of their gradients): the share it
holds with sequence parallelism; without it, a scatter that the receiving group
all-gathers over its NVLink (Sec. 4.1, "scatter/gather"), so that the link between
stages carries b s h / t per GPU, not b s h.

The gradients are reduced over the data-parallel group layer by layer as the backward
pass produces them, on a stream of their own. With Psi the parameters of a GPU's stage
and tensor shard, each GPU sends, through a ring, per step:

* ZeRO stage 0 and 1 hold the full gradients (``zero_memory``), so they accumulate them
  over the m micro-batches and reduce once, overlapped with the last micro-batch's
  backward pass: stage 0 all-reduces, 2 Psi (d-1)/d elements; stage 1 reduce-scatters,
  Psi (d-1)/d, then all-gathers the updated parameters, Psi (d-1)/d;
* ZeRO stages 2 and 3 hold only a 1/d shard of the gradients, so each micro-batch's
  gradients are reduce-scattered after its backward pass: m Psi (d-1)/d; stage 2 then
  all-gathers the updated parameters once, Psi (d-1)/d, and stage 3 gathers each
  layer's parameters before every pass of every micro-batch, 2 m Psi (d-1)/d.

That is what DeepSpeed does: its ZeRO-1/2 optimizer reduces a gradient from its backward
hook ``if self.partition_gradients or self.is_gradient_accumulation_boundary``
(``deepspeed/runtime/zero/stage_1_and_2.py``, ``reduce_ready_partitions_and_remove_grads``;
DeepSpeed PR #338, "Zero stage 2 communicates during non gradient accumulation
boundaries as well"), its ZeRO-3 optimizer from every backward hook (``stage3.py``).
DeepSpeed's pipeline engine refuses stages 2 and 3 ("ZeRO-2 and ZeRO-3 are
incompatible with pipeline parallelism", ``deepspeed/runtime/pipe/engine.py``); this
model runs them with a pipeline too, a reduce-scatter per micro-batch.

A model whose output layer shares the word embedding (``Model.tied_embedding``, GPT's V h)
keeps, with more than one stage, a copy of it on the last stage, a parameter of that
stage (its memory, and its gradient in the stage's data-parallel reduction); once the
data-parallel reductions are done, each GPU of the first stage and its peer of the last
all-reduce that weight's gradient, V h / t elements, so both copies take the same step:
Megatron-LM's ``LanguageModule.setup_embeddings_and_output_layer`` ("maintain
duplicated embedding weights in post processing stage") and ``_allreduce_word_embedding_grads``
over the embedding group (``megatron/core/distributed/finalize_model_grads.py``, after
``finish_grad_sync``; ZeRO stages 1 and 2 all-gather the updated parameters after it).

Simplifications, each small next to what is modelled: embeddings and the output layer
are split over the tensor-parallel group without their own (small) collectives (Megatron
keeps the position embedding, the layer norms and the row-parallel biases whole on
every GPU of the group); the optimizer step is not charged.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from simpy.events import Event

from simcoll.checks import COUNTER_LIMIT, flag, integer, shown
from simcoll.comm import Comm
from simcoll.errors import InvalidInputError
from simcoll.inputs import check_topology
from simcoll.programs import run_program
from simcoll.result import RunResult
from simcoll.topology.graph import Topology
from simcoll.training.common import (
    STEP_UNTIL,
    buffer_of,
    check_algorithm,
    check_collective_input,
    check_groups,
    check_model,
    check_world,
    padded,
)
from simcoll.training.model import (
    GPU,
    H100,
    Layer,
    Model,
    per_layer_seconds,
    split_blocks,
)
from simcoll.training.pipeline import (
    SCHEDULES,
    micro_batch_count,
    schedule_of,
    send_in_order,
)
from simcoll.training.streams import Breakdown, Recorder, Span, breakdown
from simcoll.training.tensor import block_pass
from simcoll.training.zero import ZeroMemory, kept_memory

__all__ = ["Placement", "Step", "step"]

DIMENSIONS = ("tp", "pp", "dp")
KIND_OF_STREAM = {"tp": "tp", "pp": "pp", "dp": "dp", "dp_gather": "dp"}


@dataclass(frozen=True)
class Placement:
    """Which GPU holds which (data-parallel replica, pipeline stage, tensor shard).

    ``order`` lists the dimensions innermost first: ``("tp", "pp", "dp")`` (the default)
    gives consecutive ranks to a tensor-parallel group (inside a node on the DGX
    presets), then steps through the stages, then the replicas.
    """

    dp: int
    tp: int
    pp: int
    order: tuple[str, ...] = DIMENSIONS

    def __post_init__(self) -> None:
        for name in DIMENSIONS:
            object.__setattr__(self, name, integer(getattr(self, name), name, minimum=1))
        object.__setattr__(self, "order", _order(self.order))

    def rank(self, d: int, s: int, t: int) -> int:
        """The GPU of replica ``d``, stage ``s``, tensor shard ``t``.

        Raises:
            InvalidInputError: a coordinate outside its dimension.
        """
        coords = {"dp": d, "pp": s, "tp": t}
        sizes = {"dp": self.dp, "pp": self.pp, "tp": self.tp}
        for (dim, value), name in zip(coords.items(), ("d", "s", "t")):
            integer(value, name, minimum=0, maximum=sizes[dim] - 1, what=f"{dim} coordinate")
        rank, stride = 0, 1
        for dim in self.order:
            rank += coords[dim] * stride
            stride *= sizes[dim]
        return rank

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(replica, stage, tensor shard) of ``rank``.

        Raises:
            InvalidInputError: a rank outside ``0 .. dp x tp x pp - 1``.
        """
        rank = integer(rank, "rank", minimum=0, maximum=self.dp * self.tp * self.pp - 1)
        sizes = {"dp": self.dp, "pp": self.pp, "tp": self.tp}
        coords = {}
        for dim in self.order:
            rank, coords[dim] = divmod(rank, sizes[dim])
        return coords["dp"], coords["pp"], coords["tp"]


def _order(order: Any) -> tuple[str, ...]:
    """``order`` as a tuple naming each of 'tp', 'pp' and 'dp' once.

    Raises:
        InvalidInputError: anything else.
    """
    listed = isinstance(order, (tuple, list)) and all(isinstance(x, str) for x in order)
    if not listed or sorted(order) != sorted(DIMENSIONS):
        raise InvalidInputError(f"order={order!r} is not accepted; list 'tp', 'pp' and "
                                f"'dp' once each, innermost first")
    return tuple(order)


@dataclass(frozen=True)
class Step:
    """One simulated 3D-parallel training step.

    Attributes:
        dp, tp, pp, zero_stage, micro_batches, schedule: the configuration.
        placement: which GPU runs which shard.
        step_time: seconds, the first forward to the last collective.
        compute_time: busy seconds of the compute stream, averaged over the GPUs.
        exposed: per kind (``"tp"``, ``"pp"``, ``"dp"``), seconds the compute stream
            waited while that kind of communication ran, averaged over the GPUs (``"dp"``
            holds the first and last stages' all-reduce of a tied embedding too, and
            ``"tp"`` the all-gather a receiving stage's tensor-parallel group runs on
            what the stage before it sent, 1/t from each GPU).
        idle: seconds the compute stream waited with nothing to wait for (the pipeline
            bubble), averaged; ``step_time = compute_time + sum(exposed) + idle``.
        memory: model-state bytes per GPU of each stage (ZeRO over the replicas: with
            stages 2 and 3 a gradient shard, as each micro-batch is reduce-scattered).
        activation_memory: bytes of stored activations per GPU of each stage at its
            peak of micro-batches in flight.
        memory_per_gpu: the most bytes one GPU holds (model states + activations).
        gpu_memory: the GPU's bytes of device memory (``GPU.memory``; None: not said).
        model_flops: FLOPs of the iteration without recomputation.
        mfu: model FLOPs utilisation, model_flops / (step_time x GPUs x peak).
        breakdown: the same per stream (``"dp_gather"`` apart from ``"dp"``).
        run, spans: the simulation and every span, for :func:`plot_timeline`.
    """

    dp: int
    tp: int
    pp: int
    zero_stage: int
    micro_batches: int
    schedule: str
    placement: Placement
    step_time: float
    compute_time: float
    exposed: dict[str, float]
    idle: float
    memory: tuple[ZeroMemory, ...]
    activation_memory: tuple[float, ...]
    memory_per_gpu: float
    gpu_memory: float | None
    model_flops: float
    mfu: float
    breakdown: Breakdown
    run: RunResult = field(repr=False)
    spans: tuple[Span, ...] = field(repr=False)

    @property
    def fits(self) -> bool | None:
        """Whether the model states and stored activations fit the GPU's memory (None
        where the GPU does not say how much it has). They are a lower bound on what a GPU
        holds: the CUDA context, workspaces, the collectives' buffers, fragmentation and
        ZeRO-3's gathered layers come on top, so False means the step cannot run as
        configured, True that it may."""
        return None if self.gpu_memory is None else self.memory_per_gpu <= self.gpu_memory


@dataclass
class _Config:
    """What every rank program of one step shares."""

    placement: Placement
    stages: list[list[Layer]]
    seconds: list[list[tuple[float, float]]]
    micro_batches: int
    schedule: str
    zero_stage: int
    sequence_parallel: bool
    recompute: bool
    elements: int
    tied_embedding: int
    activation_bytes: int
    grad_bytes: int
    param_bytes: int
    how: dict[str, Any]
    rec: Recorder
    in_flight: dict[int, int] = field(default_factory=dict)


def _groups(comm: Comm, pl: Placement, d: int, s: int, t: int) -> tuple[Any, ...]:
    """This GPU's tensor-parallel group and data-parallel streams (reduce, gather).

    A group's matching context depends on its members and on how many groups over them
    the rank made before (once each here), and each stream is the group's first or
    second fresh context, so the members agree on all of them."""
    tp_group = None
    if pl.tp > 1:
        tp_group = comm.group([pl.rank(d, s, tt) for tt in range(pl.tp)]).fresh_context()
    if pl.dp == 1:
        return tp_group, None, None
    dp_group = comm.group([pl.rank(dd, s, t) for dd in range(pl.dp)])
    return tp_group, dp_group.fresh_context(), dp_group.fresh_context()


def _program(comm: Comm, cfg: _Config) -> Generator[Event, Any, float]:
    pl, rec, r = cfg.placement, cfg.rec, comm.rank
    d, s, t = pl.coords(r)
    tp_group, dp_reduce, dp_gather = _groups(comm, pl, d, s, t)
    tied = cfg.tied_embedding if pl.pp > 1 and s in (0, pl.pp - 1) else 0
    layers, seconds = cfg.stages[s], cfg.seconds[s]
    dp, zero = pl.dp, cfg.zero_stage
    # Per layer, this GPU's parameters (its tensor shard), padded to whole DP shards
    # where ZeRO shards them (stage 0 all-reduces them as they are, as zero_step does).
    shard_params = [(padded(-(-x.params // pl.tp), dp) if zero else -(-x.params // pl.tp))
                    if x.params else 0 for x in layers]
    # Each GPU of a tensor-parallel group sends its 1/t of the activations (or their
    # gradients) to its peer of the next stage: with sequence parallelism the share it
    # holds; without, a scatter its receiver all-gathers over the group (Narayanan et
    # al. 2021, Sec. 4.1, "scatter/gather").
    message = cfg.elements // pl.tp
    gathered_after_recv = tp_group is not None and not cfg.sequence_parallel

    def received(tag: tuple[str, int]) -> Generator[Event, Any, None]:
        yield comm.recv(pl.rank(d, s - 1 if tag[0] == "act" else s + 1, t), tag=tag)
        if gathered_after_recv:
            assert tp_group is not None
            shard = buffer_of(message, cfg.activation_bytes)
            yield rec.on_stream(comm, r, "tp", "all_gather",
                                partial(tp_group.all_gather, shard, **cfg.how),
                                nbytes=shard.nbytes,
                                label=f"{'activation' if tag[0] == 'act' else 'gradient'} "
                                      f"mb{tag[1]} gather")
    last_reduce: list[Event] = []
    last_gather: list[Event] = []
    sent: dict[int, Event] = {}   # the last send to the next stage's and the previous one's
    order = schedule_of(cfg.schedule, pl.pp, s, cfg.micro_batches)
    final_backward = max(k for k, (kind, _) in enumerate(order) if kind == "B")
    live = peak = 0

    def gather(k: int, label: str) -> Event:
        shard = buffer_of(shard_params[k] // dp, cfg.param_bytes)
        last_gather[:] = [rec.on_stream(
            comm, r, "dp_gather", "all_gather",
            partial(dp_gather.all_gather, shard, **cfg.how),
            after=list(last_gather), nbytes=shard.nbytes, label=label)]
        return last_gather[0]

    def run_pass(pass_name: str, j: int, reduce: bool) -> Generator[Event, Any, None]:
        indices = list(range(len(layers)))
        if pass_name != "forward":
            indices.reverse()
        gathered: dict[int, Event] = {}
        sharded = zero == 3 and dp_gather is not None
        for n, k in enumerate(indices):
            layer = layers[k]
            label = f"{layer.name} mb{j}"
            if sharded and shard_params[k]:
                if k not in gathered:
                    gathered[k] = gather(k, label)
                upcoming = next((x for x in indices[n + 1:] if shard_params[x]), None)
                if upcoming is not None:
                    gathered[upcoming] = gather(upcoming, f"{layers[upcoming].name} mb{j}")
                yield gathered[k]
            time = seconds[k][0] if pass_name == "forward" else seconds[k][1]
            if layer.block:
                if pass_name != "forward" and cfg.recompute:
                    yield from block_pass(comm, tp_group, rec, r, layer, seconds[k][0],
                                          "forward", cfg.elements, cfg.activation_bytes,
                                          cfg.sequence_parallel, cfg.how,
                                          f"{label} recompute")
                yield from block_pass(comm, tp_group, rec, r, layer, time, pass_name,
                                      cfg.elements, cfg.activation_bytes,
                                      cfg.sequence_parallel, cfg.how, label)
            else:
                yield rec.compute(comm, r, time, pass_name, label)
            if reduce and dp_reduce is not None and shard_params[k]:
                grads = buffer_of(shard_params[k], cfg.grad_bytes)
                kind = "all_reduce" if zero == 0 else "reduce_scatter"
                last_reduce[:] = [rec.on_stream(
                    comm, r, "dp", kind,
                    partial(dp_reduce.collective, kind, grads, **cfg.how),
                    after=list(last_reduce), nbytes=grads.nbytes,
                    label=label if zero >= 2 else layer.name)]

    for k, (pass_name, j) in enumerate(order):
        if pass_name == "F":
            if s > 0:
                yield from received(("act", j))
            live += 1
            peak = max(peak, live)
            yield from run_pass("forward", j, False)
            if s < pl.pp - 1:
                send_in_order(comm, rec, pl.rank(d, s + 1, t),
                              buffer_of(message, cfg.activation_bytes), ("act", j),
                              label=f"activation mb{j}", sent=sent)
        else:
            if s < pl.pp - 1:
                yield from received(("grad", j))
            # ZeRO-2 and 3 keep only their gradient shard, so every micro-batch's
            # gradients are reduce-scattered; stages 0 and 1 accumulate the full
            # gradients and reduce them once, after the last backward pass.
            yield from run_pass("backward", j, zero >= 2 or k == final_backward)
            live -= 1
            if s > 0:
                send_in_order(comm, rec, pl.rank(d, s - 1, t),
                              buffer_of(message, cfg.activation_bytes), ("grad", j),
                              label=f"gradient mb{j}", sent=sent)
    cfg.in_flight[s] = max(cfg.in_flight.get(s, 0), peak)
    if tied:
        embedding = comm.group([pl.rank(d, 0, t), pl.rank(d, pl.pp - 1, t)]).fresh_context()
        grads = buffer_of(-(-tied // pl.tp), cfg.grad_bytes)
        last_reduce[:] = [rec.on_stream(
            comm, r, "dp", "all_reduce", partial(embedding.all_reduce, grads, **cfg.how),
            after=list(last_reduce), nbytes=grads.nbytes, label="tied embedding")]
    if zero in (1, 2) and dp_gather is not None:
        for k, params in enumerate(shard_params):
            if params:
                shard = buffer_of(params // dp, cfg.param_bytes)
                last_gather[:] = [rec.on_stream(
                    comm, r, "dp_gather", "all_gather",
                    partial(dp_gather.all_gather, shard, **cfg.how),
                    after=[*last_reduce, *last_gather], nbytes=shard.nbytes,
                    label=layers[k].name)]
    # SimPy sends each event's value into the generator, which a plain
    # iterator cannot take, so no `yield from` over a sequence here.
    for event in (*sent.values(), *last_reduce, *last_gather):
        yield event
    return comm.now


def _checked(model: Model, topology: Topology, dp: int, tp: int, pp: int, zero_stage: int,
             micro_batches: int, schedule: str, order: Sequence[str],
             sequence_parallel: bool, algorithm: str, params: Mapping[str, Any] | None
             ) -> tuple[int, int, int, int, int, tuple[str, ...], dict[str, Any]]:
    dp = integer(dp, "dp", minimum=1)
    tp = integer(tp, "tp", minimum=1)
    pp = integer(pp, "pp", minimum=1)
    zero_stage = integer(zero_stage, "zero_stage", minimum=0, maximum=3, what="ZeRO stage")
    m = micro_batch_count(micro_batches)
    if dp * tp * pp != topology.nranks:
        raise InvalidInputError(f"dp x tp x pp = {dp} x {tp} x {pp} = {dp * tp * pp} GPUs, "
                                f"but {topology.name} has {topology.nranks}; choose sizes "
                                f"whose product is {topology.nranks}")
    if schedule not in SCHEDULES:
        raise InvalidInputError(f"schedule={schedule!r} is not accepted; use one of "
                                f"{', '.join(map(repr, SCHEDULES))}")
    order = _order(order)
    if model.batch % dp:   # no micro_batches can mend it
        raise InvalidInputError(
            f"dp={dp} does not divide the batch: {model.batch} sequences over {dp} "
            f"data-parallel replicas leaves {model.batch / dp:g} per replica; give the "
            f"model a batch that is a multiple of {dp}, or a smaller dp")
    if model.batch % (dp * m):
        raise InvalidInputError(
            f"micro_batches={m} does not divide the batch: {model.batch} sequences over "
            f"dp={dp} replicas leaves {model.batch / dp:g} per replica, which does not "
            f"split into {m} equal micro-batches")
    model.heads_per_gpu(tp)
    tied = pp > 1 and model.tied_embedding > 0
    collectives = set(_dp_runs(zero_stage)) if dp > 1 else set()
    if tp > 1:
        collectives |= set(_tp_runs(sequence_parallel, pp))
    if tied:
        collectives.add("all_reduce")
    how = check_algorithm(algorithm, sorted(collectives), params,
                          hosts=len(topology.hosts))
    # With dp = tp = 1 the only collective is a tied embedding's, over the first and last
    # stages: the whole machine only where they are all of it.
    check_world(how, dp == topology.nranks or tp == topology.nranks
                or (dp == tp == 1 and (not tied or pp == topology.nranks == 2)),
                f"dp={dp}, tp={tp}, pp={pp}"
                + (" (the tied embedding's all-reduce joins only the first and last stages)"
                   if tied and dp == tp == 1 else ""))
    placement = Placement(dp, tp, pp, order)
    tp_runs, dp_runs = _tp_runs(sequence_parallel, pp), _dp_runs(zero_stage)
    check_groups(how, topology, [*(_tp_groups(placement, tp_runs) if tp > 1 else []),
                                 *(_dp_groups(placement, dp_runs, range(pp)) if dp > 1 else []),
                                 *(_embedding_groups(placement) if tied else [])])
    if sequence_parallel and model.seq_len % tp:
        raise InvalidInputError(f"sequence parallelism needs tp={tp} to divide "
                                f"seq_len={model.seq_len}")
    return dp, tp, pp, zero_stage, m, tuple(order), how


def _tp_runs(sequence_parallel: bool, pp: int) -> tuple[str, ...]:
    """The collectives of a tensor-parallel group: a block's all-reduces (with sequence
    parallelism all-gathers and reduce-scatters), and across stages the all-gather of
    what a stage receives."""
    return ("all_gather", "reduce_scatter") if sequence_parallel else \
        ("all_reduce", *(("all_gather",) if pp > 1 else ()))


def _dp_runs(zero_stage: int) -> tuple[str, ...]:
    """The collectives of a data-parallel group at ``zero_stage``."""
    return ("all_reduce",) if zero_stage == 0 else ("reduce_scatter", "all_gather")


_Group = tuple[str, tuple[str, ...], list[int]]
"""What a group is called, the collectives it runs and its ranks, for :func:`check_groups`."""


def _tp_groups(pl: Placement, runs: tuple[str, ...]) -> list[_Group]:
    """Every tensor-parallel group (one per replica and stage), running ``runs``."""
    return [("the tensor-parallel group", runs, [pl.rank(d, s, t) for t in range(pl.tp)])
            for d in range(pl.dp) for s in range(pl.pp)]


def _dp_groups(pl: Placement, runs: tuple[str, ...], stages: Iterable[int]) -> list[_Group]:
    """The data-parallel groups of ``stages`` (one per stage and shard), running ``runs``."""
    return [("the data-parallel group", runs, [pl.rank(d, s, t) for d in range(pl.dp)])
            for s in stages for t in range(pl.tp)]


def _embedding_groups(pl: Placement) -> list[_Group]:
    """The tied embedding's groups: a replica's shard on its first and last stages."""
    return [("the embedding group", ("all_reduce",), [pl.rank(d, 0, t), pl.rank(d, pl.pp - 1, t)])
            for d in range(pl.dp) for t in range(pl.tp)]


def _check_inputs(how: Mapping[str, Any], topology: Topology, model: Model,
                  stages: list[list[Layer]], pl: Placement, zero_stage: int,
                  sequence_parallel: bool, elements: int) -> None:
    """Refuse, before the run, parameters an algorithm refuses for the smallest input of
    a collective of the step (a ring's ``chunks`` above its elements), group by group as
    :func:`_program` sizes them: a micro-batch's ``elements`` of activations (a 1/tp
    shard all-gathered) over each tensor-parallel group, each stage's layers' gradient
    shards (and with ZeRO their parameter shards) over its data-parallel groups, the tied
    embedding's gradient over the first and last stages.

    Raises:
        InvalidInputError: naming the group, as :func:`check_groups` does.
    """
    dp, tp, pp = pl.dp, pl.tp, pl.pp
    precision = model.precision
    if tp > 1:
        act = precision.activation_bytes
        check_groups(how, topology, _tp_groups(pl, _tp_runs(sequence_parallel, pp)),
                     {"all_reduce": buffer_of(elements, act),
                      "reduce_scatter": buffer_of(elements, act),
                      "all_gather": buffer_of(elements // tp, act)})
    for s, layers in enumerate(stages if dp > 1 else []):
        shards = [-(-x.params // tp) for x in layers if x.params]
        if not shards:   # a stage of no parameters runs no data-parallel collective
            continue
        least = min(padded(x, dp) if zero_stage else x for x in shards)
        check_groups(how, topology, _dp_groups(pl, _dp_runs(zero_stage), [s]),
                     {"all_reduce": buffer_of(least, precision.grad_bytes),
                      "reduce_scatter": buffer_of(least, precision.grad_bytes),
                      "all_gather": buffer_of(least // dp, precision.param_bytes)})
    if pp > 1 and model.tied_embedding:
        shard = buffer_of(-(-model.tied_embedding // tp), precision.grad_bytes)
        check_groups(how, topology, _embedding_groups(pl), {"all_reduce": shard})


def _check_sizes(model: Model, stages: list[list[Layer]], dp: int, tp: int, m: int,
                 sequence_parallel: bool, zero_stage: int, recompute: bool) -> None:
    """Refuse a step whose traffic could pass the int64 counters: a layer's gradients
    (and with ZeRO the shard of its parameters gathered) over the data-parallel group, a
    micro-batch's activations over the tensor-parallel group, or a stage's sends (its m
    micro-batches' activations and their gradients), or what a GPU sends in its stage's
    tensor-parallel collectives, at most twice their inputs: (2 or, with sequence
    parallelism, 4) x (2 or, recomputing, 3) per block and micro-batch.

    Raises:
        InvalidInputError: naming the model's layer or the batch, and what to change.
    """
    precision = model.precision
    layer = max((x for layers in stages for x in layers), key=lambda x: x.params)
    shard = -(-layer.params // tp)   # the layer's tensor shard, padded as ZeRO pads it
    elements = padded(shard, dp) if zero_stage else shard
    check_collective_input(
        elements * precision.grad_bytes, dp,
        f"the gradients of {model.name}'s layer {layer.name!r} (over tp={tp})",
        "use a smaller model or more tensor-parallel GPUs")
    if zero_stage:
        check_collective_input(
            elements // dp * precision.param_bytes, dp,
            f"the parameter shard of {model.name}'s layer {layer.name!r} each GPU adds to "
            f"the all-gather (over tp={tp})",
            "use a smaller model or more tensor-parallel GPUs")
    if len(stages) > 1 and model.tied_embedding:
        check_collective_input(
            -(-model.tied_embedding // tp) * precision.grad_bytes, 2,
            f"the gradient of {model.name}'s tied word embedding (over tp={tp})",
            "use a smaller vocabulary or more tensor-parallel GPUs")
    sequences = model.batch // (dp * m)
    check_collective_input(
        model.activation_bytes(sequences), tp,
        f"the activations of a micro-batch of {sequences} sequences (batch={model.batch} "
        f"over dp={dp} and micro_batches={m}), a block's tensor-parallel collective's input",
        "use more micro-batches or a smaller batch")
    blocks = max(sum(x.block for x in layers) for layers in stages)
    collectives = (4 if sequence_parallel else 2) * (3 if recompute else 2)
    most = 2 * blocks * m * collectives * model.activation_bytes(sequences)
    if tp > 1 and most >= COUNTER_LIMIT:
        raise InvalidInputError(
            f"batch={model.batch} over dp={dp} makes a GPU send up to {shown(most)} bytes "
            f"in its tensor-parallel collectives ({blocks} blocks x {m} micro-batches x "
            f"{collectives} collectives), which could overflow the int64 traffic "
            f"counters; use a smaller batch or more stages")
    sent = 2 * m * (-(-sequences * model.seq_len * model.hidden // tp)) \
        * precision.activation_bytes
    if len(stages) > 1 and sent >= COUNTER_LIMIT:
        raise InvalidInputError(
            f"batch={model.batch} over dp={dp} makes a pipeline stage send {shown(sent)} "
            f"bytes of activations and their gradients, which could overflow the int64 "
            f"traffic counters; use a smaller batch")


def step(model: Model, topology: Topology, *, dp: int, tp: int = 1, pp: int = 1,
         zero_stage: int = 0, micro_batches: int = 1, schedule: str = "1f1b",
         sequence_parallel: bool = False, recompute: bool = False, gpu: GPU = H100,
         order: Sequence[str] = DIMENSIONS, algorithm: str = "ring",
         network: str = "flow", algorithm_params: Mapping[str, Any] | None = None) -> Step:
    """Simulate one training step of ``model`` with ``dp x tp x pp`` parallelism.

    ``model.batch`` is the global batch B; each replica runs B / dp sequences in
    ``micro_batches`` micro-batches of B / (dp m). Everything is checked before the run.

    Args:
        dp, tp, pp: data-parallel replicas, tensor-parallel group size, pipeline stages;
            their product must be the topology's GPU count.
        zero_stage: ZeRO over the data-parallel group (0: all-reduce of gradients;
            stages 0 and 1 reduce the gradients once per step, stages 2 and 3 after
            every micro-batch: see the module docstring).
        micro_batches: m per replica.
        schedule: ``"1f1b"`` or ``"gpipe"``.
        sequence_parallel: Megatron's sequence parallelism in the tensor-parallel group.
        recompute: full activation recomputation (one more forward pass per block in
            the backward pass, with its tensor-parallel collectives: 2 more all-reduces
            per block, or 2 more all-gathers and reduce-scatters with sequence
            parallelism; only each block's input is kept).
        gpu: the GPUs' rate and peak (MFU).
        order: the placement, innermost dimension first (default TP inside nodes, PP
            across, DP outermost).
        algorithm: the algorithm of every collective; network: the network model.
        algorithm_params: parameters of that algorithm for every collective of the step
            (e.g. ``{"proto": "Simple"}`` or ``{"collnet": 1}`` with ``algorithm="nccl"``;
            ``collnet=1`` needs collectives over every GPU of the machine), checked
            before the run (a value a buffer's size bounds, as a ring's ``chunks``,
            against the smallest input of each collective of the step).

    Raises:
        InvalidInputError: dp x tp x pp not the GPU count, micro-batches that do not
            divide the batch, more stages than blocks, tp not dividing the heads, the
            key / value heads or the MLP width, an unknown schedule or algorithm (or a
            parameter value it refuses for a group's smallest collective: a ring's
            chunks above its elements; or a choice of a group's machine it cannot make:
            NCCL's algo='nvls' across nodes), a bad order, or a collective's input or a
            stage's sends that could overflow the int64 traffic counters.
    """
    topology = check_topology(topology)
    check_model(model, gpu)
    sequence_parallel = flag(sequence_parallel, "sequence_parallel")
    recompute = flag(recompute, "recompute")
    dp, tp, pp, zero_stage, m, order, how = _checked(
        model, topology, dp, tp, pp, zero_stage, micro_batches, schedule, order,
        sequence_parallel, algorithm, algorithm_params)
    stages = split_blocks(model, pp, name="pp")
    if pp > 1 and model.tied_embedding:  # the last stage's copy of the word embedding
        last = stages[-1][-1]
        stages[-1][-1] = replace(last, tensors=(*last.tensors, model.tied_embedding))
    sequences = model.batch // (dp * m)
    _check_sizes(model, stages, dp, tp, m, sequence_parallel, zero_stage, recompute)
    fraction = sequences / model.batch / tp
    seconds = [per_layer_seconds(layers, gpu, fraction) for layers in stages]
    placement = Placement(dp, tp, pp, order)
    precision = model.precision
    _check_inputs(how, topology, model, stages, placement, zero_stage, sequence_parallel,
                  sequences * model.seq_len * model.hidden)
    cfg = _Config(placement, stages, seconds, m, schedule, zero_stage, sequence_parallel,
                  recompute, sequences * model.seq_len * model.hidden,
                  model.tied_embedding, precision.activation_bytes, precision.grad_bytes,
                  precision.param_bytes, how, Recorder())
    run = run_program(topology, _program, cfg, network=network, until=STEP_UNTIL)
    step_time = run.time
    parts = breakdown(cfg.rec.spans, range(topology.nranks), step_time)
    exposed: dict[str, float] = {}
    for stream, seconds_exposed in parts.exposed.items():
        kind = KIND_OF_STREAM.get(stream, stream)
        exposed[kind] = exposed.get(kind, 0.0) + seconds_exposed
    # A GPU keeps its tensor shard of each layer whole, or of it the DP shard (each
    # layer padded to whole DP shards, as the run moves it).
    memory = tuple(kept_memory(sum(-(-x.params // tp) for x in layers),
                               sum(padded(-(-x.params // tp), dp) for x in layers) // dp,
                               zero_stage, precision.optimizer_bytes,
                               param_bytes=precision.param_bytes,
                               grad_bytes=precision.grad_bytes) for layers in stages)
    activations = tuple(
        cfg.in_flight[s] * sum(model.block_activation_memory(
            sequences, tp=tp, sequence_parallel=sequence_parallel, recompute=recompute)
            for x in layers if x.block) for s, layers in enumerate(stages))
    model_flops = model.flops
    return Step(
        dp=dp, tp=tp, pp=pp, zero_stage=zero_stage, micro_batches=m, schedule=schedule,
        placement=placement, step_time=step_time, compute_time=parts.compute,
        exposed=exposed, idle=parts.idle, memory=memory, activation_memory=activations,
        memory_per_gpu=max(mem.total + act for mem, act in zip(memory, activations)),
        gpu_memory=gpu.memory, model_flops=model_flops,
        mfu=model_flops / (step_time * topology.nranks * gpu.peak_flops) if step_time > 0
        else 0.0,  # a model of no FLOPs: nothing done, in no time
        breakdown=parts, run=run, spans=tuple(cfg.rec.spans))
