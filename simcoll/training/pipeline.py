"""Pipeline parallelism: p stages, m micro-batches, GPipe or 1F1B, over the topology.

Stage s runs on one GPU; it receives each micro-batch's activations from stage s-1,
runs its forward pass and sends its output to stage s+1; in the backward pass it
receives the gradient of its output from stage s+1 and sends the gradient of its input
to stage s-1. The schedules (Narayanan et al. 2021, "Efficient large-scale language
model training on GPU clusters using Megatron-LM", Sec. 2.2):

* ``"gpipe"`` (Huang et al. 2019): every forward, then every backward (last micro-batch
  first); each stage holds the activations of all m micro-batches at once.
* ``"1f1b"`` (PipeDream-Flush, Narayanan et al. 2019/2021): stage s runs
  min(p - s - 1, m) warm-up forwards, then alternates one forward and one backward, then
  finishes the remaining backwards; it holds at most p - s micro-batches at once.

With equal stages and free communication both take (m + p - 1)(t_f + t_b), so the
pipeline bubble, the fraction of GPU time spent idle, is (p - 1) / (m + p - 1).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from simpy.events import Event

from simcoll.buffers import VirtualBuffer
from simcoll.checks import integer, real, shown, size
from simcoll.comm import Comm
from simcoll.errors import InvalidInputError
from simcoll.inputs import COUNTER_LIMIT, check_topology
from simcoll.programs import run_program
from simcoll.result import RunResult
from simcoll.topology.graph import Topology
from simcoll.training.common import STEP_UNTIL, buffer_of, check_ranks
from simcoll.training.streams import Breakdown, Recorder, Span, breakdown

__all__ = ["PipelineStep", "pipeline_step", "schedule_of", "SCHEDULES", "micro_batch_count",
           "send_in_order"]

SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class PipelineStep:
    """One simulated pipeline step (every micro-batch forward and backward once).

    Attributes:
        schedule, stages, micro_batches: what ran.
        step_time: seconds until the last backward of any stage (stage 0's, the last to
            finish) and every message.
        bubble_fraction: 1 - (busy GPU time) / (stages x step_time), measured from the
            simulated timeline.
        peak_in_flight: per stage, the most micro-batches whose forward had started and
            whose backward had not finished.
        activation_memory: per stage, ``peak_in_flight x`` the activation bytes a stage
            keeps per micro-batch.
        ranks: the GPU of each stage.
        breakdown: compute, exposed communication (stream ``"pp"``) and idle time,
            averaged over the stages.
        run, spans: the simulation and every compute and transfer span.
    """

    schedule: str
    stages: int
    micro_batches: int
    step_time: float
    bubble_fraction: float
    peak_in_flight: tuple[int, ...]
    activation_memory: tuple[float, ...]
    ranks: tuple[int, ...]
    breakdown: Breakdown
    run: RunResult
    spans: tuple[Span, ...]


def check_schedule(schedule: str) -> None:
    """Refuse a schedule other than :data:`SCHEDULES`."""
    if schedule not in SCHEDULES:
        raise InvalidInputError(f"schedule={schedule!r} is not accepted; use one of "
                                f"{', '.join(map(repr, SCHEDULES))}")


MAX_MICRO_BATCHES = 100_000
"""The most micro-batches a step may have: a schedule lists every one's forward and
backward pass per stage, and 2**70 of them filled the memory before any error."""


def micro_batch_count(micro_batches: Any) -> int:
    """``micro_batches`` as an int from 1 to :data:`MAX_MICRO_BATCHES`.

    Raises:
        InvalidInputError: naming the value and what is accepted.
    """
    return integer(micro_batches, "micro_batches", minimum=1, maximum=MAX_MICRO_BATCHES)


def schedule_of(schedule: str, stages: int, stage: int,
                micro_batches: int) -> list[tuple[str, int]]:
    """The order in which ``stage`` runs its passes: ``("F", j)`` is micro-batch j's
    forward pass, ``("B", j)`` its backward pass. GPipe runs every forward, then every
    backward (Huang et al. 2019); 1F1B runs ``stages - stage - 1`` forwards ahead, then
    alternates (PipeDream-Flush, Narayanan et al. 2021).

    Raises:
        InvalidInputError: an unknown schedule, a stage not in 0..stages - 1, or fewer
            than one micro-batch.
    """
    check_schedule(schedule)
    stages = integer(stages, "stages", minimum=1)
    stage = integer(stage, "stage", minimum=0, maximum=stages - 1)
    m = micro_batch_count(micro_batches)
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in reversed(range(m))]
    warmup = min(stages - stage - 1, m)
    order = [("F", j) for j in range(warmup)]
    for i in range(m - warmup):
        order += [("F", warmup + i), ("B", i)]
    return order + [("B", j) for j in range(m - warmup, m)]


class _Stage:
    """What one stage needs to run its schedule inside a rank program."""

    def __init__(self, rec: Recorder, ranks: Sequence[int], forward: Sequence[float],
                 backward: Sequence[float], message_bytes: int, itemsize: int):
        self.rec, self.ranks = rec, list(ranks)
        self.forward, self.backward = forward, backward
        self.message_bytes, self.itemsize = message_bytes, itemsize
        self.in_flight: dict[int, int] = {}


def send_in_order(comm: Comm, rec: Recorder, peer: int, buf: VirtualBuffer,
                  tag: tuple[str, int], *, label: str, sent: dict[int, Event]) -> None:
    """Send one activation (or its gradient) to ``peer`` once the stage's previous send
    to it, ``sent[peer]``, is done, and record it on both GPUs: a stage's sends to one
    peer run one at a time, in the order issued, as on the stream of the pair's NCCL
    communicator (a send started beside the previous one would take half the link and
    delay it). ``sent[peer]`` becomes this send's event."""
    previous = sent.get(peer)

    def transfer() -> Generator[Event, Any, None]:
        if previous is not None:
            yield previous
        start = comm.now
        yield comm.send(buf, peer, tag=tag)
        rec.spans.append(Span(comm.rank, "pp", "send", start, comm.now, buf.nbytes, label))
        rec.spans.append(Span(peer, "pp", "recv", start, comm.now, buf.nbytes, label))

    sent[peer] = comm.start(transfer())


def _program(comm: Comm, stage: _Stage, schedule: str,
             micro_batches: int) -> Generator[Event, Any, float]:
    r = comm.rank
    if r not in stage.ranks:
        return 0.0
    s, p = stage.ranks.index(r), len(stage.ranks)
    rec = stage.rec
    sent: dict[int, Event] = {}   # the last send to each peer
    message = stage.message_bytes // stage.itemsize
    live = peak = 0
    for pass_name, j in schedule_of(schedule, p, s, micro_batches):
        if pass_name == "F":
            if s > 0:
                yield comm.recv(stage.ranks[s - 1], tag=("act", j))
            live += 1
            peak = max(peak, live)
            yield rec.compute(comm, r, stage.forward[s], "forward", f"micro-batch {j}")
            if s < p - 1:
                send_in_order(comm, rec, stage.ranks[s + 1],
                              buffer_of(message, stage.itemsize), ("act", j),
                              label=f"activation {j}", sent=sent)
        else:
            if s < p - 1:
                yield comm.recv(stage.ranks[s + 1], tag=("grad", j))
            yield rec.compute(comm, r, stage.backward[s], "backward", f"micro-batch {j}")
            live -= 1
            if s > 0:
                send_in_order(comm, rec, stage.ranks[s - 1],
                              buffer_of(message, stage.itemsize), ("grad", j),
                              label=f"gradient {j}", sent=sent)
    stage.in_flight[s] = peak
    # SimPy sends each event's value into the generator, which a plain
    # iterator cannot take, so no `yield from` over a sequence here.
    for event in sent.values():
        yield event
    return comm.now


def _per_stage(value: float | Sequence[float], stages: int, name: str) -> list[float]:
    if isinstance(value, (int, float, np.integer, np.floating)):
        return [real(value, name, what="seconds per micro-batch")] * stages
    listed = (value.ndim == 1 if isinstance(value, np.ndarray) else
              isinstance(value, Sequence) and not isinstance(value, (str, bytes)))
    if not listed or len(value) != stages:
        raise InvalidInputError(f"{name}={value!r} is not accepted; give seconds per "
                                f"micro-batch, one number or one per stage ({stages})")
    return [real(v, f"{name}[{i}]", what="seconds per micro-batch")
            for i, v in enumerate(value)]


def pipeline_step(topology: Topology, *, stages: int, micro_batches: int,
                  forward: float | Sequence[float], backward: float | Sequence[float],
                  activation_bytes: int | str, schedule: str = "1f1b",
                  activation_memory: float | str | None = None,
                  ranks: Sequence[int] | None = None, itemsize: int = 2,
                  network: str = "flow") -> PipelineStep:
    """Simulate one pipeline-parallel step.

    Args:
        stages: p, one GPU each.
        micro_batches: m.
        forward, backward: seconds per micro-batch on each stage (one number for every
            stage, or one per stage).
        activation_bytes: bytes of the activations one micro-batch sends from a stage to
            the next (its gradient travels back with the same size), or a size such as
            ``"16MiB"``.
        schedule: ``"gpipe"`` or ``"1f1b"``.
        activation_memory: bytes a stage keeps per micro-batch in flight, or a size
            such as ``"1GiB"`` (default ``activation_bytes``).
        ranks: the GPU of each stage (default 0..p-1).
        itemsize: bytes per element of the activations.

    Raises:
        InvalidInputError: an unknown schedule, stages or micro-batches below 1, bad
            times or ranks, or ``activation_bytes`` negative or not a whole number of
            elements (0 is taken: transfers that cost their latency alone).
    """
    topology = check_topology(topology)
    check_schedule(schedule)
    p = integer(stages, "stages", minimum=1)
    m = micro_batch_count(micro_batches)
    nbytes = size(activation_bytes, "activation_bytes")
    itemsize = integer(itemsize, "itemsize", minimum=1, what="bytes per element")
    if nbytes % itemsize:
        raise InvalidInputError(f"activation_bytes={nbytes} is not a whole number of "
                                f"{itemsize}-byte elements")
    # each of the m micro-batches crosses each of the p - 1 stage boundaries twice
    # (activations forward, gradients back): no counter passes 2 m (p - 1) bytes per byte
    crossings = 2 * m * (p - 1)
    if crossings and crossings * nbytes >= COUNTER_LIMIT:
        raise InvalidInputError(f"activation_bytes={shown(nbytes)} over {m} micro-batches "
                                f"and {p} stages could overflow the int64 traffic "
                                f"counters; use activation_bytes < "
                                f"{-(-COUNTER_LIMIT // crossings)}")
    kept = nbytes if activation_memory is None else (
        size(activation_memory, "activation_memory") if isinstance(activation_memory, str)
        else real(activation_memory, "activation_memory", what="bytes"))
    chosen = check_ranks(topology, ranks, p, "stages")
    stage = _Stage(Recorder(), chosen, _per_stage(forward, p, "forward"),
                   _per_stage(backward, p, "backward"), nbytes, itemsize)
    run = run_program(topology, _program, stage, schedule, m, network=network,
                      until=STEP_UNTIL)
    step = max(float(run.rank_times[r]) for r in chosen)
    spans = stage.rec.spans
    busy = sum(s.end - s.start for s in spans if s.stream == "compute")
    peaks = tuple(stage.in_flight[s] for s in range(p))
    return PipelineStep(
        schedule=schedule, stages=p, micro_batches=m, step_time=step,
        bubble_fraction=1 - busy / (p * step) if step > 0 else 0.0,
        peak_in_flight=peaks, activation_memory=tuple(k * kept for k in peaks),
        ranks=tuple(chosen), breakdown=breakdown(spans, chosen, step), run=run,
        spans=tuple(spans))
