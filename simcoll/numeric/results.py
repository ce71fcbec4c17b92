"""What a training run returns: the parameters after every step, as every rank holds them
and assembled into the whole model, the loss of every step and the simulated time each
step took."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simcoll.numeric.mlp import Params
from simcoll.result import RunResult

__all__ = ["StepRecord", "TrainingRun", "ReferenceRun", "collect"]


@dataclass(frozen=True)
class StepRecord:
    """What one rank reports at the end of one step (built inside the rank program).

    Attributes:
        held: the parameters this rank holds after the step's update: whole tensors,
            or its pieces of them, named as the strategy documents.
        loss: the mean loss over the samples this rank computed the loss of in the step,
            or None if it computed none (a pipeline stage before the last).
        end: the simulated instant the rank finished the step, in seconds.
    """

    held: Params
    loss: float | None
    end: float


@dataclass(frozen=True)
class ReferenceRun:
    """Single-process, full-batch training: what every strategy must reproduce.

    Attributes:
        params: the whole model after each step.
        losses: the mean loss over each step's batch, before the step's update.
    """

    params: tuple[Params, ...]
    losses: tuple[float, ...]


@dataclass(frozen=True)
class TrainingRun:
    """A training run on the simulated machine.

    Attributes:
        strategy: which strategy ran (``"data_parallel"``, ``"ddp"``, ``"zero1"``, ...).
        params: the whole model after each step, assembled from what the ranks hold (the
            first data-parallel replica's copy where ranks hold copies).
        held: ``held[step][rank]``: what each rank holds after each step (see the
            strategy's docstring for how pieces are named).
        losses: the mean loss over each step's global batch, before its update (the mean
            of the ranks' reported losses: every reporting rank saw as many samples).
        step_times: simulated seconds each step took: the last rank's end of the step
            minus the last rank's end of the step before (the first from 0).
        run: the simulation (traffic per rank and per link, messages, trace).
    """

    strategy: str
    params: tuple[Params, ...]
    held: tuple[tuple[Params, ...], ...]
    losses: tuple[float, ...]
    step_times: tuple[float, ...]
    run: RunResult

    @property
    def time(self) -> float:
        """Simulated seconds of the whole run."""
        return self.run.time

    @property
    def steps(self) -> int:
        """Number of steps trained."""
        return len(self.params)


def collect(strategy: str, run: RunResult,
            assemble: Callable[[Sequence[Params]], Params]) -> TrainingRun:
    """Turn the ranks' step records (``run.outputs``) into a :class:`TrainingRun`.

    Args:
        assemble: builds the whole model from every rank's holding after one step.
    """
    records: list[list[StepRecord]] = list(run.outputs or [])
    steps = len(records[0])
    held = tuple(tuple(rank[s].held for rank in records) for s in range(steps))
    losses = []
    for s in range(steps):
        reported = [loss for rank in records if (loss := rank[s].loss) is not None]
        losses.append(sum(reported) / len(reported))
    ends = [max(rank[s].end for rank in records) for s in range(steps)]
    step_times = tuple(end - before for end, before in zip(ends, [0.0] + ends[:-1]))
    return TrainingRun(strategy, tuple(assemble(h) for h in held), held, tuple(losses),
                       step_times, run)
