"""Tensor parallelism (Megatron-LM): one transformer block split over t GPUs.

Shoeybi et al. 2019, "Megatron-LM: training multi-billion parameter language models
using model parallelism", Sec. 3: the attention heads and the MLP's inner dimension are
split over the t GPUs of a tensor-parallel group, so a block needs two all-reduces of its
b x s x h activations in the forward pass (after the attention's output projection and
after the MLP's second matrix: the g operator) and two in the backward pass (the f
operators before them). With sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2)
each all-reduce becomes a reduce-scatter, and an all-gather comes before each half (a ring
all-reduce is a reduce-scatter and an all-gather), with the layer norms and dropouts split
over the sequence. These collectives sit on the critical path: the next matrix
multiplication needs their result. Each half's first linear layer (column-parallel: the
attention's QKV projection, the MLP's first matrix) keeps only its sequence shard of the
input it gathered, so the backward pass gathers that input again for the weight
gradient: one all-gather more per half, started with the half's backward compute and
overlapped with it, which the half's reduce-scatter waits for (the paper's "extra
all-gather in the backward pass"; Megatron-LM's
``LinearWithGradAccumulationAndAsyncCommunication.backward``,
``megatron/core/tensor_parallel/layers.py``, overlaps it with the input gradient's matrix
multiplication). A block then moves 10 (t-1)/t b s h activations per GPU forward and
backward with sequence parallelism, 8 (t-1)/t b s h in its four all-reduces without
(each of ``Precision.activation_bytes``).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from simpy.events import Event

from simcoll.checks import COUNTER_LIMIT, flag, integer, largest_input, shown
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
    check_ranks,
    check_world,
)
from simcoll.training.model import GPU, H100, Layer, Model
from simcoll.training.streams import Recorder, Span

__all__ = ["TensorParallelLayer", "tensor_parallel_layer", "block_pass"]


def block_pass(comm: Comm, group: Comm | None, rec: Recorder, rank: int, layer: Layer,
               seconds: float, pass_name: str, activation_elements: int, itemsize: int,
               sequence_parallel: bool, how: Mapping[str, Any],
               label: str) -> Generator[Event, Any, None]:
    """One block's forward or backward pass on one GPU of its tensor-parallel ``group``
    (None: no tensor parallelism): two halves of compute, each with its collectives
    (``how``: their algorithm and its parameters; with sequence parallelism a backward
    half gathers its first layer's input again during its compute: see the module)."""
    halves = [layer.attention_share, 1 - layer.attention_share]
    if pass_name != "forward":
        halves.reverse()
    t = 1 if group is None else group.size
    full = buffer_of(activation_elements, itemsize)
    shard = buffer_of(activation_elements // t, itemsize)
    for k, share in enumerate(halves):
        part = f"{label} {'attention' if (k == 0) == (pass_name == 'forward') else 'MLP'}"
        if group is not None and sequence_parallel:
            yield rec.on_stream(comm, rank, "tp", "all_gather",
                                partial(group.all_gather, shard, **how),
                                nbytes=shard.nbytes, label=part)
        computed = rec.compute(comm, rank, seconds * share, pass_name, part)
        if group is None:
            yield computed
        elif sequence_parallel:
            after = [computed]
            if pass_name != "forward":
                after.append(rec.on_stream(comm, rank, "tp", "all_gather",
                                           partial(group.all_gather, shard, **how),
                                           nbytes=shard.nbytes, label=f"{part} input"))
            yield rec.on_stream(comm, rank, "tp", "reduce_scatter",
                                partial(group.reduce_scatter, full, **how),
                                after=after, nbytes=full.nbytes, label=part)
        else:
            yield rec.on_stream(comm, rank, "tp", "all_reduce",
                                partial(group.all_reduce, full, **how),
                                after=[computed], nbytes=full.nbytes, label=part)


@dataclass(frozen=True)
class TensorParallelLayer:
    """One transformer block's forward and backward pass on a tensor-parallel group.

    Attributes:
        tp, sequence_parallel, ranks: what ran where.
        forward_time, backward_time, time: seconds (time = forward + backward).
        compute_time: seconds of compute per GPU (the block's FLOPs / t).
        communication_time: seconds the group spent in its collectives, per GPU (all
            exposed but the backward pass's all-gathers of the first layers' inputs with
            sequence parallelism, which run beside the compute).
        bytes_sent: bytes each GPU of the group sent.
        run, spans: the simulation and every span.
    """

    tp: int
    sequence_parallel: bool
    ranks: tuple[int, ...]
    forward_time: float
    backward_time: float
    time: float
    compute_time: float
    communication_time: float
    bytes_sent: np.ndarray
    run: RunResult
    spans: tuple[Span, ...]


def _program(comm: Comm, rec: Recorder, ranks: Sequence[int], layer: Layer,
             times: tuple[float, float], elements: int, itemsize: int, sp: bool,
             how: Mapping[str, Any], marks: dict[str, float]) -> Generator[Event, Any, float]:
    if comm.rank not in ranks:
        return 0.0
    group = comm.group(ranks).fresh_context() if len(ranks) > 1 else None
    for pass_name, seconds in zip(("forward", "backward"), times):
        yield from block_pass(comm, group, rec, comm.rank, layer, seconds, pass_name,
                              elements, itemsize, sp, how, layer.name)
        marks[pass_name] = max(marks.get(pass_name, 0.0), comm.now)
    return comm.now


def tensor_parallel_layer(model: Model, topology: Topology, *, tp: int, sequences: int = 1,
                          sequence_parallel: bool = False, ranks: Sequence[int] | None = None,
                          gpu: GPU = H100, algorithm: str = "ring", network: str = "flow",
                          algorithm_params: Mapping[str, Any] | None = None
                          ) -> TensorParallelLayer:
    """Simulate one of ``model``'s transformer blocks, forward and backward, split over
    ``tp`` GPUs, for ``sequences`` sequences.

    Args:
        tp: t, the tensor-parallel group size.
        sequences: b, sequences in the micro-batch.
        sequence_parallel: all-gather / reduce-scatter instead of all-reduce.
        ranks: the group's GPUs (default 0..t-1: inside a node on the DGX presets;
            e.g. ``[0, 8]`` puts it across two nodes).
        gpu, algorithm, network: the GPUs' rate, the collectives' algorithm, the network
            model.
        algorithm_params: parameters of that algorithm for every collective of the step
            (e.g. ``{"proto": "Simple"}`` or ``{"collnet": 1}`` with ``algorithm="nccl"``;
            ``collnet=1`` needs collectives over every GPU of the machine), checked
            before the run (a value a buffer's size bounds, as a ring's ``chunks``,
            against the smallest input of each collective of the step).

    Raises:
        InvalidInputError: a model without transformer blocks, bad sizes, ranks or
            algorithm (or a parameter value it refuses for the layer's collectives: a
            ring's chunks above their elements; or a choice of the machine it cannot
            make: NCCL's algo='nvls' without NVLS), t not dividing the model's attention
            heads, key / value heads or MLP width, (with sequence parallelism) a
            sequence length not divisible by t, or activations past what the int64
            traffic counters hold (one collective's input, or what a GPU sends over the
            layer).
    """
    topology = check_topology(topology)
    check_model(model, gpu)
    t = integer(tp, "tp", minimum=1)
    b = integer(sequences, "sequences", minimum=1)
    model.heads_per_gpu(t)
    sequence_parallel = flag(sequence_parallel, "sequence_parallel")
    runs = [] if t == 1 else ["all_gather", "reduce_scatter"] if sequence_parallel \
        else ["all_reduce"]  # one GPU runs no collective
    how = check_algorithm(algorithm, runs, algorithm_params, hosts=len(topology.hosts))
    block = next((layer for layer in model.layers if layer.block), None)
    if block is None:
        raise InvalidInputError(f"{model.name} has no transformer block to split")
    elements = b * model.seq_len * model.hidden
    # Each of the layer's collectives takes the activations (or a share of them), and
    # sends at most twice its input: (2, or with sequence parallelism 4) x 2 passes.
    activations = model.activation_bytes(b)
    check_collective_input(activations, t, f"sequences={shown(b)} make activations that "
                           f"each of the layer's tensor-parallel collectives takes",
                           f"use sequences <= {largest_input(t) // max(activations // b, 1)}")
    most = 2 * (4 if sequence_parallel else 2) * 2 * activations
    if t > 1 and most >= COUNTER_LIMIT:
        raise InvalidInputError(
            f"sequences={shown(b)} make a GPU send up to {shown(most)} bytes in the "
            f"layer's tensor-parallel collectives, which could overflow the int64 traffic "
            f"counters; use sequences < {-(-COUNTER_LIMIT // (most // b))}")
    if sequence_parallel and model.seq_len % t:  # it splits the sequence, as step() does
        raise InvalidInputError(f"sequence parallelism needs tp={t} to divide "
                                f"seq_len={model.seq_len}")
    chosen = check_ranks(topology, ranks, t, "tp")
    check_world(how, list(chosen) == list(range(topology.nranks)), f"the group {chosen}")
    itemsize = model.precision.activation_bytes
    check_groups(how, topology, [("the tensor-parallel group", runs, chosen)], {
        "all_reduce": buffer_of(elements, itemsize),
        "reduce_scatter": buffer_of(elements, itemsize),
        "all_gather": buffer_of(elements // t, itemsize)})
    fraction = b / model.batch / t
    times = (gpu.seconds(block.forward_flops * fraction),
             gpu.seconds(block.backward_flops * fraction))
    rec, marks = Recorder(), dict[str, float]()
    run = run_program(topology, _program, rec, chosen, block, times, elements,
                      itemsize, sequence_parallel, how,
                      marks, network=network, until=STEP_UNTIL)
    comm_time = sum(s.end - s.start for s in rec.spans if s.stream == "tp") / t
    return TensorParallelLayer(
        tp=t, sequence_parallel=sequence_parallel, ranks=tuple(chosen),
        forward_time=marks["forward"], backward_time=marks["backward"] - marks["forward"],
        time=marks["backward"], compute_time=sum(times), communication_time=comm_time,
        bytes_sent=run.bytes_sent[chosen], run=run, spans=tuple(rec.spans))
