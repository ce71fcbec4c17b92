"""Single-process, full-batch training: the numbers every distributed strategy must give."""

from __future__ import annotations

from typing import Any

from simcoll.errors import InvalidInputError
from simcoll.numeric.job import TrainingJob
from simcoll.numeric.mlp import Params
from simcoll.numeric.results import ReferenceRun

__all__ = ["train_reference"]


def train_reference(job: TrainingJob) -> ReferenceRun:
    """Train ``job`` in one process: each step's gradient is that of its whole batch.

    Returns:
        The model after each step and each step's loss (before its update).

    Raises:
        InvalidInputError: ``job`` is not a TrainingJob.
    """
    if not isinstance(job, TrainingJob):
        raise InvalidInputError(f"job={job!r:.80} is not accepted; use a "
                                f"simcoll.numeric.TrainingJob")
    model, optimizer = job.model, job.optimizer
    params: Params = dict(job.params)
    states: dict[str, Any] = {name: optimizer.init(value) for name, value in params.items()}
    history, losses = [], []
    for batch in job.batches:
        loss, grads = model.gradients(params, batch.x, batch.target)
        for name in model.parameter_names:
            params[name], states[name] = optimizer.update(params[name], grads[name],
                                                          states[name])
        history.append(dict(params))
        losses.append(loss)
    return ReferenceRun(tuple(history), tuple(losses))
