"""ZeRO stages 0-3 and FSDP: memory per GPU, and the communication each stage really does.

Rajbhandari et al. 2020, "ZeRO: memory optimizations toward training trillion parameter
models" (Sec. 5 and Figure 1). With Psi parameters, N data-parallel GPUs and
mixed-precision Adam (2 bytes per fp16 parameter, 2 per fp16 gradient, K = 12 bytes of
optimizer state), each GPU holds

* stage 0 (plain data parallelism): (2 + 2 + K) Psi;
* stage 1 (optimizer states partitioned, P_os): 2 Psi + 2 Psi + K Psi / N;
* stage 2 (+ gradients, P_os+g): 2 Psi + (2 + K) Psi / N;
* stage 3 (+ parameters, P_os+g+p; FSDP's FULL_SHARD): (2 + 2 + K) Psi / N.

Per step each GPU sends, in parameters (Sec. 7): stage 0 an all-reduce, 2 Psi (N-1)/N;
stages 1 and 2 a reduce-scatter of the gradients and an all-gather of the updated
parameters, also 2 Psi (N-1)/N; stage 3 an all-gather of the parameters in the forward
pass, another in the backward pass and a reduce-scatter of the gradients, 3 Psi (N-1)/N.
That is one micro-batch per step (:func:`zero_step`); with m micro-batches stages 2 and 3,
which hold only a gradient shard, reduce-scatter after each of them, m Psi (N-1)/N of
gradients (DeepSpeed does; :func:`simcoll.training.step` models it).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from simpy.events import Event

from simcoll.checks import flag, integer
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
    padded,
    step_end,
)
from simcoll.training.model import GPU, H100, Model, per_layer_seconds
from simcoll.training.streams import Breakdown, Recorder, Span, breakdown

__all__ = ["ZeroMemory", "zero_memory", "ZeroStep", "zero_step"]


@dataclass(frozen=True)
class ZeroMemory:
    """Bytes of model state on one GPU (the largest shard where Psi / N is not whole).

    Attributes:
        params, gradients, optimizer_states: bytes of each.
    """

    params: int
    gradients: int
    optimizer_states: int

    @property
    def total(self) -> int:
        """All model-state bytes on the GPU."""
        return self.params + self.gradients + self.optimizer_states


def zero_memory(params: int, world_size: int, stage: int, k: int = 12, *,
                param_bytes: int = 2, grad_bytes: int = 2) -> ZeroMemory:
    """Model-state bytes per GPU under ZeRO ``stage`` (see the module docstring).

    A partitioned state takes ceil(Psi / N) parameters' worth on each GPU (the largest
    shard when Psi does not divide evenly).

    Args:
        params: Psi, the number of parameters.
        world_size: N, the data-parallel GPUs the states are partitioned over.
        stage: 0, 1, 2 or 3.
        k: optimizer-state bytes per parameter (12 for mixed-precision Adam).
        param_bytes, grad_bytes: bytes per parameter and per gradient (2 for fp16).

    Raises:
        InvalidInputError: a stage other than 0-3, or a negative or non-integer size (a
            Model instead of its parameter count named as such).
    """
    if isinstance(params, Model):
        p = params.precision
        raise InvalidInputError(
            f"zero_memory takes Psi, a number of parameters, not the Model {params.name!r}; "
            f"pass model.params, with k=model.precision.optimizer_bytes ({p.optimizer_bytes}), "
            f"param_bytes={p.param_bytes} and grad_bytes={p.grad_bytes} for its precision")
    psi = integer(params, "params", minimum=0)
    n = integer(world_size, "world_size", minimum=1)
    stage = integer(stage, "stage", minimum=0, maximum=3, what="ZeRO stage")
    k = integer(k, "k", minimum=0, what="optimizer bytes per parameter")
    param_bytes = integer(param_bytes, "param_bytes", minimum=0)
    grad_bytes = integer(grad_bytes, "grad_bytes", minimum=0)
    return kept_memory(psi, -(-psi // n), stage, k, param_bytes=param_bytes,
                       grad_bytes=grad_bytes)


def kept_memory(whole: int, shard: int, stage: int, k: int, *, param_bytes: int,
                grad_bytes: int) -> ZeroMemory:
    """Model-state bytes of a GPU that keeps ``whole`` parameters' worth of each state
    ZeRO ``stage`` leaves whole and ``shard`` of each state it partitions (a run's
    shards, padded as its collectives pad them); values as :func:`zero_memory` checks
    them."""
    return ZeroMemory(params=param_bytes * (shard if stage >= 3 else whole),
                      gradients=grad_bytes * (shard if stage >= 2 else whole),
                      optimizer_states=k * (shard if stage >= 1 else whole))


@dataclass(frozen=True)
class ZeroStep:
    """One simulated ZeRO / FSDP step on every GPU of a machine.

    Attributes:
        stage: the ZeRO stage.
        step_time, compute_time: seconds (compute: forward + backward on one GPU).
        exposed: seconds the compute stream waited per communication stream
            (``"all_reduce"``, ``"reduce_scatter"``, ``"all_gather"``), averaged over GPUs.
        bytes_sent: bytes each GPU sent (the run's counters).
        communicated_params: the paper's volume in parameters, 2 Psi (stages 0-2) or
            3 Psi (stage 3), with Psi padded to whole shards where the stage pads; a
            ring-based algorithm sends (N-1)/N of it, times the bytes per element.
        memory: model-state bytes per GPU (the shards it keeps: Psi padded as the run's
            collectives pad it, divided by N, for the states the stage partitions).
        gathered: stage 3: the most bytes of whole layers one GPU held at once on top of
            ``memory``, read from the spans: a layer's parameters from the start of
            their all-gather to the end of the forward or backward pass that used them
            (FSDP frees them then), its gradients from the start of its backward pass to
            the end of their reduce-scatter (a pass that takes no time, such as an
            embedding's, runs once the pass before it has ended and its parameters are
            there, and holds its parameters until the gradients it makes exist, as one
            that takes time does); with ``prefetch``, the next layer's are gathered
            while this one computes (a layer's backward copy once its forward one is
            freed). 0 for stages 0-2, which keep whole parameters and gradients in
            ``memory``, and on one GPU, whose shards are the whole layers (FSDP then
            shards nothing).
        breakdown, run, spans: where the time went, the simulation, every span.
    """

    stage: int
    step_time: float
    compute_time: float
    exposed: dict[str, float]
    bytes_sent: Any
    communicated_params: int
    memory: ZeroMemory
    gathered: int
    breakdown: Breakdown
    run: RunResult
    spans: tuple[Span, ...]


def _bucketed(comm: Comm, rec: Recorder, times: list[tuple[float, float]],
              names: list[str], buckets: list[tuple[int, int]], stage: int,
              how: Mapping[str, Any], grad_bytes: int,
              param_bytes: int) -> Generator[Event, Any, float]:
    """Stages 0-2: backward with bucketed all-reduce (0) or reduce-scatter (1, 2) of
    gradients as each bucket fills, then (1, 2) an all-gather of every bucket's updated
    parameter shard."""
    r, n = comm.rank, comm.size
    for (fwd, _), name in zip(times, names):
        rec.compute(comm, r, fwd, "forward", name)
    done: dict[int, Event] = {}
    for i in reversed(range(len(times))):
        done[i] = rec.compute(comm, r, times[i][1], "backward", names[i])
    reduce_stream, gather_stream = comm.fresh_context(), comm.fresh_context()
    previous: list[Event] = []
    for k, (first_layer, elements) in enumerate(buckets):
        buf = buffer_of(elements, grad_bytes)
        kind = "all_reduce" if stage == 0 else "reduce_scatter"
        op = partial(reduce_stream.collective, kind, buf, **how)
        previous = [rec.on_stream(comm, r, kind, kind, op, after=[done[first_layer],
                                                                  *previous],
                                  nbytes=buf.nbytes, label=f"bucket {k}")]
    if stage > 0:
        for k, (_, elements) in enumerate(buckets):
            shard = buffer_of(elements // n, param_bytes)
            previous = [rec.on_stream(
                comm, r, "all_gather", "all_gather",
                partial(gather_stream.all_gather, shard, **how),
                after=[done[0], *previous], nbytes=shard.nbytes,
                label=f"bucket {k}")]
    yield done[0]
    # SimPy sends each event's value into the generator, which a plain
    # iterator cannot take, so no `yield from` over a sequence here.
    for event in previous:
        yield event
    return comm.now


def _sharded(comm: Comm, rec: Recorder, times: list[tuple[float, float]], names: list[str],
             units: list[int], how: Mapping[str, Any], grad_bytes: int, param_bytes: int,
             prefetch: bool) -> Generator[Event, Any, float]:
    """Stage 3 / FSDP: each layer's parameters all-gathered just before its forward and
    again before its backward, and its gradients reduce-scattered after its backward.
    With ``prefetch`` each pass starts the next gather as it begins, except a layer's
    backward gather during its own forward: that one starts when the forward ends
    (under the next pass, if that pass has no parameters, such as GPT's logits)."""
    r, n = comm.rank, comm.size
    gather_stream, reduce_stream = comm.fresh_context(), comm.fresh_context()
    passes = [("forward", i) for i in range(len(times))] + \
             [("backward", i) for i in reversed(range(len(times)))]
    needs = [j for j, (_, i) in enumerate(passes) if units[i]]
    gathered: dict[int, Event] = {}
    last_gather: list[Event] = []
    last_reduce: list[Event] = []

    def gather(j: int) -> None:
        if j in gathered:
            return
        pass_name, i = passes[j]
        shard = buffer_of(units[i] // n, param_bytes)
        gathered[j] = rec.on_stream(
            comm, r, "all_gather", "all_gather",
            partial(gather_stream.all_gather, shard, **how),
            after=list(last_gather), nbytes=shard.nbytes,
            label=f"{names[i]} ({pass_name})")
        last_gather[:] = [gathered[j]]

    if prefetch and needs:
        gather(needs[0])
    for j, (pass_name, i) in enumerate(passes):
        if units[i]:
            gather(j)
        if prefetch:
            later = [x for x in needs if x > j]
            # not the backward of this very layer: its forward copy is held until the
            # forward ends, and FSDP gathers one copy at a time (a pass after it gathers it)
            if later and passes[later[0]][1] != i:
                gather(later[0])
        if units[i]:
            yield gathered[j]
        seconds = times[i][0] if pass_name == "forward" else times[i][1]
        computed = rec.compute(comm, r, seconds, pass_name, names[i])
        if pass_name == "backward" and units[i]:
            grads = buffer_of(units[i], grad_bytes)
            last_reduce[:] = [rec.on_stream(
                comm, r, "reduce_scatter", "reduce_scatter",
                partial(reduce_stream.reduce_scatter, grads, **how),
                after=[computed, *last_reduce], nbytes=grads.nbytes,
                label=names[i])]
        yield computed
    # SimPy sends each event's value into the generator, which a plain
    # iterator cannot take, so no `yield from` over a sequence here.
    for event in last_reduce:
        yield event
    return comm.now


def zero_step(model: Model, topology: Topology, *, stage: int, gpu: GPU = H100,
              algorithm: str = "ring", bucket_cap_mb: float = 25, first_bucket_mb: float = 1,
              prefetch: bool = True, network: str = "flow",
              algorithm_params: Mapping[str, Any] | None = None) -> ZeroStep:
    """Simulate one ZeRO ``stage`` step of ``model`` on every GPU of ``topology``.

    Stage 0 is DDP (buckets all-reduced as the backward pass fills them). Stages 1 and 2
    reduce-scatter the same buckets as they fill, then all-gather every bucket's updated
    parameters after the step (their communication is the same; they differ in memory).
    Stage 3 (FSDP) all-gathers each layer's parameters just in time in the forward pass
    and again in the backward pass, the next layer's while this one computes
    (``prefetch``), and reduce-scatters each layer's gradients after its backward, on
    separate all-gather and reduce-scatter streams. Sharded buffers are padded to a
    multiple of the GPU count, as FSDP pads its flat parameters. Gradients travel in
    ``model.precision.grad_bytes``, parameters in ``param_bytes``.

    Args:
        stage: 0, 1, 2 or 3.
        gpu: the GPUs' rate; algorithm: the algorithm of every collective (it must be
            registered for each collective the stage uses, as ``"ring"`` is).
        bucket_cap_mb, first_bucket_mb: bucket limits for stages 0-2 (MiB).
        prefetch: stage 3 only: all-gather the next layer while this one computes (a
            layer's backward gather waits until its own forward ends, which frees its
            forward copy).
        algorithm_params: parameters of that algorithm for every collective of the step
            (e.g. ``{"proto": "Simple"}`` or ``{"collnet": 1}`` with ``algorithm="nccl"``;
            ``collnet=1`` needs collectives over every GPU of the machine), checked
            before the run (a value a buffer's size bounds, as a ring's ``chunks``,
            against the smallest input of each collective of the step).

    Raises:
        InvalidInputError: a stage other than 0-3, an algorithm not registered for the
            stage's collectives or a parameter it does not take (or a value it refuses
            for the step's smallest collective: a ring's chunks; or a choice of the
            machine it cannot make: NCCL's algo='nvls' without NVLS), bucket limits that are
            not numbers of MiB > 0 (checked at every stage), or a collective whose input
            could overflow the int64 traffic counters.
    """
    topology = check_topology(topology)
    check_model(model, gpu)
    stage = integer(stage, "stage", minimum=0, maximum=3, what="ZeRO stage")
    prefetch = flag(prefetch, "prefetch")
    bucket_limits(bucket_cap_mb, first_bucket_mb)
    collectives = ["all_reduce"] if stage == 0 else ["reduce_scatter", "all_gather"]
    how = check_algorithm(algorithm, collectives, algorithm_params, hosts=len(topology.hosts))
    n = topology.nranks
    precision = model.precision
    grad_bytes, param_bytes = precision.grad_bytes, precision.param_bytes
    tensors = [(i, t) for i, layer in enumerate(model.layers) for t in layer.tensors]
    grouped = [] if stage == 3 else ddp_buckets(
        [t * grad_bytes for _, t in tensors], bucket_cap_mb=bucket_cap_mb,
        first_bucket_mb=first_bucket_mb)
    sizes = [sum(tensors[k][1] for k in bucket) for bucket in grouped]   # elements
    units = [padded(layer.params, n) if layer.params else 0 for layer in model.layers]
    largest = max(layer.params for layer in model.layers) if stage == 3 else max(
        sizes, default=0)
    # each collective's smallest input, for the parameters a buffer's size bounds
    inputs = [u for u in units if u] if stage == 3 else [
        padded(s, n) if stage else s for s in sizes]
    least = min(inputs, default=0)
    check_groups(how, topology, [("the GPUs", collectives, range(n))], {
        "all_reduce": buffer_of(least, grad_bytes),
        "reduce_scatter": buffer_of(least, grad_bytes),
        "all_gather": buffer_of(least // n, param_bytes)} if inputs else None)
    what = f"{model.name}'s largest {'layer' if stage == 3 else 'bucket'}"
    elements = padded(largest, n) if stage else largest
    check_collective_input(elements * grad_bytes, n, f"{what}'s gradients",
                           "use a smaller model or fewer GPUs")
    if stage:
        check_collective_input(elements // n * param_bytes, n,
                               f"{what}'s parameter shard each GPU adds to the all-gather",
                               "use a smaller model or fewer GPUs")
    times = per_layer_seconds(model.layers, gpu, 1.0)
    names = [layer.name for layer in model.layers]
    rec = Recorder()
    if stage < 3:
        buckets = [(min(tensors[k][0] for k in bucket), size if stage == 0 else padded(size, n))
                   for bucket, size in zip(grouped, sizes)]
        run = run_program(topology, _bucketed, rec, times, names, buckets, stage, how,
                          grad_bytes, param_bytes, network=network, until=STEP_UNTIL)
        # An all-reduce moves 2 Psi (N-1)/N (a reduce-scatter and an all-gather), as
        # do stages 1 and 2's reduce-scatter and all-gather.
        partitioned = sum(e for _, e in buckets)
        communicated = 2 * partitioned
    else:
        run = run_program(topology, _sharded, rec, times, names, units, how, grad_bytes,
                          param_bytes, prefetch, network=network, until=STEP_UNTIL)
        partitioned = sum(units)
        communicated = 3 * partitioned
    compute = sum_in_order(f + b for f, b in times)
    gathered = 0 if stage < 3 or n == 1 else _most_gathered(
        rec.spans, n, times, units, param_bytes, grad_bytes, prefetch=prefetch)
    step = step_end(run.time, compute)
    parts = breakdown(rec.spans, range(n), step)
    return ZeroStep(stage=stage, step_time=step, compute_time=compute,
                    exposed=parts.exposed, bytes_sent=run.bytes_sent,
                    communicated_params=communicated,
                    memory=kept_memory(model.params, partitioned // n, stage,
                                       precision.optimizer_bytes, param_bytes=param_bytes,
                                       grad_bytes=grad_bytes),
                    gathered=gathered, breakdown=parts, run=run, spans=tuple(rec.spans))


def _most_gathered(spans: list[Span], n: int, times: list[tuple[float, float]],
                   units: list[int], param_bytes: int, grad_bytes: int, *,
                   prefetch: bool) -> int:
    """The most bytes of whole layers any GPU held at once (see ``ZeroStep.gathered``).

    Each stream runs in order, so a rank's spans of each kind pair with the passes that
    made them: the compute spans with the passes that take time (forward, then backward
    in reverse), the all-gathers with the passes of layers with parameters, the
    reduce-scatters with those layers' backward passes. A pass that takes no time runs
    at the instant the program reaches it and its parameters are there: the later of the
    end of the pass before it and the end of its all-gather."""
    layers = len(times)
    passes = [(0, i) for i in range(layers)] + [(1, i) for i in reversed(range(layers))]
    needs = [j for j, (_, i) in enumerate(passes) if units[i]]
    started = {k: _gather_started(k, needs, passes, prefetch) for k in needs}
    most = 0
    for rank in range(n):
        mine = [s for s in spans if s.rank == rank]
        timed = [j for j, (b, i) in enumerate(passes) if times[i][b] > 0]
        computed = dict(zip(timed, (s for s in mine if s.stream == "compute")))
        gathers = dict(zip(needs, (s for s in mine if s.kind == "all_gather")))
        reduced = dict(zip([j for j in needs if passes[j][0] == 1],
                           (s for s in mine if s.kind == "reduce_scatter")))
        ran: list[tuple[float, float]] = []  # each pass's (start, end)
        for j in range(len(passes)):
            used = computed.get(j)
            if used is not None:
                ran.append((used.start, used.end))
            else:
                reached = ran[-1][1] if ran else 0.0
                instant = max(reached, gathers[j].end) if j in gathers else reached
                ran.append((instant, instant))
        # (instant, order, bytes): at one instant what is freed goes first (order -1),
        # but the parameters of pass j that takes no time, which go as it ends (order
        # 2 j + 1): after the gradients it made and the gathers the program started by
        # then (order 2 x the pass that started them), before those it started later
        changes = []
        for j, gather in gathers.items():
            held = units[passes[j][1]] * param_bytes
            instant = ran[j][0] == ran[j][1]
            changes += [(gather.start, 2 * started[j], held),
                        (ran[j][1], 2 * j + 1 if instant else -1, -held)]
        for j, reduce in reduced.items():
            held = units[passes[j][1]] * grad_bytes
            changes += [(ran[j][0], 2 * j, held), (reduce.end, -1, -held)]
        total = 0
        for _, _, change in sorted(changes):
            total += change
            most = max(most, total)
    return most


def _gather_started(k: int, needs: list[int], passes: list[tuple[int, int]],
                    prefetch: bool) -> int:
    """The pass at whose start :func:`_sharded` starts pass ``k``'s all-gather: ``k``
    itself, or with ``prefetch`` the pass of the gather before it (the first pass for
    the first gather), or the one after that where both are one layer's (its backward
    copy waits for its forward one to go)."""
    if not prefetch:
        return k
    before = [j for j in needs if j < k]
    if not before:
        return 0
    return min(k, before[-1] + (passes[before[-1]][1] == passes[k][1]))
