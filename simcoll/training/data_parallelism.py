"""Data parallelism three ways: a loop of all-reduces, one fused all-reduce, and DDP.

Every GPU holds the whole model, runs forward and backward on its own share of the batch,
and the gradients are summed over the GPUs (then divided by their number) so that every
copy takes the same optimizer step:

* ``"loop"``: after the backward pass, one all-reduce per parameter tensor in the
  model's order, one after the other (the hand-written loop
  ``for p in model.parameters(): dist.all_reduce(p.grad)``, then ``p.grad /= size``);
* ``"fused"``: after the backward pass, one all-reduce of all gradients at once;
* ``"ddp"``: PyTorch DDP (Li et al. 2020, "PyTorch Distributed: Experiences on
  Accelerating Data Parallel Training"): gradients in buckets (``bucket_cap_mb`` 25,
  first bucket 1 MiB, tensors in reverse order), each bucket all-reduced as soon as the
  backward pass has produced all of its gradients, on one communication stream (bucket
  i's all-reduce starts after bucket i-1's), while the backward pass goes on.

The division by the world size is element-wise work on the GPU and is not charged.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from simpy.events import Event

from simcoll.checks import flag
from simcoll.comm import Comm
from simcoll.errors import InvalidInputError
from simcoll.inputs import check_topology
from simcoll.programs import run_program
from simcoll.result import RunResult
from simcoll.sums import sum_in_order
from simcoll.topology.graph import Topology
from simcoll.training.common import (
    STEP_UNTIL,
    bucket_limits,
    buffer_of,
    check_algorithm,
    check_collective_input,
    check_groups,
    check_model,
    ddp_buckets,
    step_end,
)
from simcoll.training.model import GPU, H100, Model, per_layer_seconds
from simcoll.training.streams import Breakdown, Recorder, Span, breakdown

__all__ = ["DataParallelResult", "data_parallel", "STRATEGIES"]

STRATEGIES = ("loop", "fused", "ddp")


@dataclass(frozen=True)
class DataParallelResult:
    """One simulated data-parallel step (every GPU runs ``model.batch`` sequences).

    Attributes:
        strategy: ``"loop"``, ``"fused"`` or ``"ddp"``.
        step_time: from the first forward to the last gradient reduced, seconds.
        compute_time: forward + backward on one GPU, seconds (the step time on one GPU).
        exposed_communication: ``step_time - compute_time``, seconds.
        hidden_communication: seconds the all-reduces ran while the GPU computed
            (``breakdown.hidden["dp"]``, averaged over the GPUs): with
            ``breakdown.exposed["dp"]``, the all-reduces' busy time
            (``exposed_communication`` also counts the time a GPU waited for others
            with no all-reduce of its own under way, ``breakdown.idle``).
        scaling_efficiency: ``compute_time / step_time``: the throughput of N GPUs over
            N times that of one (weak scaling, the per-GPU batch fixed).
        all_reduces: bytes of each all-reduce, in the order they ran.
        breakdown: compute, exposed communication (stream ``"dp"``) and idle time.
        run: the simulation (traffic, rank times).
        spans: every compute and all-reduce span, per rank.
    """

    strategy: str
    step_time: float
    compute_time: float
    exposed_communication: float
    hidden_communication: float
    scaling_efficiency: float
    all_reduces: tuple[int, ...]
    breakdown: Breakdown
    run: RunResult
    spans: tuple[Span, ...]


def _groups(model: Model, strategy: str, bucket_cap_mb: float,
            first_bucket_mb: float) -> list[list[tuple[int, int]]]:
    """(layer, tensor size) of each all-reduce, in the order they run."""
    tensors = [(i, n) for i, layer in enumerate(model.layers) for n in layer.tensors]
    if strategy == "loop":
        return [[t] for t in tensors]
    if strategy == "fused":
        return [tensors] if tensors else []
    grad = model.precision.grad_bytes
    return [[tensors[k] for k in bucket]
            for bucket in ddp_buckets([n * grad for _, n in tensors],
                                      bucket_cap_mb=bucket_cap_mb,
                                      first_bucket_mb=first_bucket_mb)]


def _program(comm: Comm, rec: Recorder, times: list[tuple[float, float]], names: list[str],
             groups: list[list[tuple[int, int]]], overlap: bool, how: Mapping[str, Any],
             itemsize: int) -> Generator[Event, Any, float]:
    r = comm.rank
    for (fwd, _), name in zip(times, names):
        rec.compute(comm, r, fwd, "forward", name)
    done: dict[int, Event] = {}
    for i in reversed(range(len(times))):
        done[i] = rec.compute(comm, r, times[i][1], "backward", names[i])
    stream = comm.fresh_context()
    previous: list[Event] = []
    for k, group in enumerate(groups):
        elements = sum(n for _, n in group)
        # Overlapped, a bucket waits for the layer that produces its last gradient;
        # otherwise for the whole backward pass (layer 0's backward ends it).
        ready = done[min(i for i, _ in group)] if overlap else done[0]
        buf = buffer_of(elements, itemsize)
        previous = [rec.on_stream(
            comm, r, "dp", "all_reduce",
            partial(stream.all_reduce, buf, **how),
            after=[ready, *previous], nbytes=elements * itemsize, label=f"all-reduce {k}")]
    yield done[0]
    # SimPy sends each event's value into the generator, which a plain
    # iterator cannot take, so no `yield from` over a sequence here.
    for event in previous:
        yield event
    return comm.now


def data_parallel(model: Model, topology: Topology, *, strategy: str = "ddp",
                  gpu: GPU = H100, algorithm: str = "ring", bucket_cap_mb: float = 25,
                  first_bucket_mb: float = 1, overlap: bool = True,
                  network: str = "flow",
                  algorithm_params: Mapping[str, Any] | None = None) -> DataParallelResult:
    """Simulate one data-parallel step of ``model`` on every GPU of ``topology``.

    Args:
        model: the model; each GPU runs ``model.batch`` sequences (use
            ``model.with_batch(b)`` to change it).
        strategy: ``"loop"``, ``"fused"`` or ``"ddp"`` (see the module docstring).
        gpu: the GPUs' rate (compute time = FLOPs / rate).
        algorithm: any registered all_reduce algorithm that runs on ranks, but ``bucketed``
            (which models a backward pass of its own).
        bucket_cap_mb, first_bucket_mb: DDP's bucket limits in MiB.
        overlap: DDP only: launch each bucket as soon as it is full (True, as DDP does)
            or all of them after the backward pass (False, for comparison).
        network: network model.
        algorithm_params: parameters of that algorithm for every collective of the step
            (e.g. ``{"proto": "Simple"}`` or ``{"collnet": 1}`` with ``algorithm="nccl"``;
            ``collnet=1`` needs collectives over every GPU of the machine), checked
            before the run (a value a buffer's size bounds, as a ring's ``chunks``,
            against the smallest input of each collective of the step).

    Raises:
        InvalidInputError: an unknown strategy or all_reduce algorithm (one that needs
            server hosts included), a parameter it does not take (or a value it refuses
            for the step's smallest all-reduce: a ring's chunks; or a choice of the
            machine it cannot make: NCCL's algo='nvls' without NVLS), bad bucket limits, or
            an all-reduce whose input could overflow the int64 traffic counters.
    """
    topology = check_topology(topology)
    check_model(model, gpu)
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"strategy={strategy!r} is not accepted; use one of "
                                f"{', '.join(map(repr, STRATEGIES))}")
    overlap = flag(overlap, "overlap")
    bucket_limits(bucket_cap_mb, first_bucket_mb)   # every strategy, as zero_step does
    how = check_algorithm(algorithm, ["all_reduce"], algorithm_params,
                          hosts=len(topology.hosts))
    groups = _groups(model, strategy, bucket_cap_mb, first_bucket_mb)
    itemsize = model.precision.grad_bytes
    smallest = min((buffer_of(sum(n for _, n in g), itemsize) for g in groups),
                   key=lambda buffer: buffer.count, default=None)
    check_groups(how, topology, [("the GPUs", ["all_reduce"], range(topology.nranks))],
                 None if smallest is None else {"all_reduce": smallest})
    check_collective_input(max((sum(n for _, n in g) for g in groups), default=0)
                           * model.precision.grad_bytes, topology.nranks,
                           f"{model.name}'s largest all-reduce of gradients",
                           "use a smaller model or fewer GPUs")
    times = per_layer_seconds(model.layers, gpu, 1.0)
    names = [layer.name for layer in model.layers]
    rec = Recorder()
    run = run_program(topology, _program, rec, times, names, groups,
                      strategy == "ddp" and overlap, how, itemsize,
                      network=network, until=STEP_UNTIL)
    compute = sum_in_order(f + b for f, b in times)
    step = step_end(run.time, compute)
    parts = breakdown(rec.spans, range(topology.nranks), step)
    return DataParallelResult(
        strategy=strategy, step_time=step, compute_time=compute,
        exposed_communication=step - compute,
        hidden_communication=parts.hidden.get("dp", 0.0),
        scaling_efficiency=compute / step if step > 0 else 1.0,
        all_reduces=tuple(sum(n for _, n in g) * itemsize for g in groups),
        breakdown=parts, run=run, spans=tuple(rec.spans))
