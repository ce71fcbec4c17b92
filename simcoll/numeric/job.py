"""What a training run trains: the model, its starting parameters, one batch per step and
the optimizer, checked once so that every strategy starts from the same, valid job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcoll.checks import integer, shown
from simcoll.errors import InvalidInputError
from simcoll.memory import shortfall
from simcoll.numeric.mlp import MLP, Params
from simcoll.numeric.optim import Optimizer, check_optimizer

__all__ = ["Batch", "TrainingJob", "check_model", "checked_params", "synthetic_batches"]


def check_model(model: Any) -> MLP:
    """``model`` itself, refused with a clear error unless it is an :class:`MLP`."""
    if not isinstance(model, MLP):
        raise InvalidInputError(f"model={model!r:.100} is not accepted; use a "
                                f"simcoll.numeric.MLP")
    return model


def _read_only(array: NDArray) -> NDArray:
    out = np.array(array, copy=True)
    out.flags.writeable = False
    return out


def _check_finite(array: NDArray, where: str) -> None:
    """Refuse NaN and infinities, which would train every rank to NaN without an error."""
    bad = array.size - int(np.isfinite(array).sum())
    if bad:
        first = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise InvalidInputError(f"{where} holds {bad} NaN or infinite value(s), the first "
                                f"{float(array[first])} at index {first}; give finite numbers")


@dataclass(frozen=True)
class Batch:
    """One step's global batch.

    Attributes:
        x: inputs, samples x inputs, float64.
        target: samples x outputs (float64) for ``mse``, or one class index per sample
            (int64) for ``cross_entropy``.
    """

    x: NDArray[np.float64]
    target: NDArray

    @property
    def samples(self) -> int:
        """Number of samples."""
        return int(self.x.shape[0])

    def rows(self, start: int, stop: int) -> Batch:
        """Samples ``start`` to ``stop`` (a view: no copy)."""
        return Batch(self.x[start:stop], self.target[start:stop])


def checked_params(model: MLP, params: Any) -> Params:
    """``params`` as read-only float64 copies in parameter order, refused with a clear
    error unless they are a dict of exactly ``model``'s parameters, of their shapes, finite."""
    shapes = model.shapes()
    if not isinstance(params, dict) or set(params) != set(shapes):
        got = sorted(params, key=str) if isinstance(params, dict) else type(params).__name__
        raise InvalidInputError(f"params must be a dict of {', '.join(shapes)} for "
                                f"{model.sizes}; got {got}")
    out: Params = {}
    for name, shape in shapes.items():
        value = np.asarray(params[name])
        if value.shape != shape or value.dtype != np.float64:
            raise InvalidInputError(f"params[{name!r}] has shape {value.shape} and dtype "
                                    f"{value.dtype}; the model needs {shape}, float64")
        _check_finite(value, f"params[{name!r}]")
        out[name] = _read_only(value)
    return out


def synthetic_batches(model: MLP, *, batch: int, steps: int, seed: int = 0) -> tuple[Batch, ...]:
    """``steps`` batches of ``batch`` samples for ``model``, drawn from a seeded generator.

    Inputs are standard normal; the targets come from a fixed random "teacher" map, so
    there is something to learn: ``tanh(x A)`` plus a little noise for ``mse``, the index of
    the largest entry of ``x A`` for ``cross_entropy``.

    Raises:
        InvalidInputError: ``model`` not an :class:`MLP`, ``batch`` or ``steps`` below 1,
            or batches past this process's memory.
    """
    check_model(model)
    batch = integer(batch, "batch", minimum=1, what="samples per step")
    steps = integer(steps, "steps", minimum=1)
    rng = np.random.default_rng(integer(seed, "seed", minimum=0))
    n_in, n_out = model.sizes[0], model.sizes[-1]
    short = shortfall(steps * batch * (n_in + n_out) * 8)   # float64 inputs and targets
    if short is not None:
        raise InvalidInputError(f"synthetic_batches(batch={shown(batch)}, "
                                f"steps={shown(steps)}) {short}; use fewer samples")
    teacher = rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)
    out = []
    for _ in range(steps):
        x = rng.standard_normal((batch, n_in))
        scores = x @ teacher
        if model.loss == "mse":
            target: NDArray = np.tanh(scores) + 0.1 * rng.standard_normal((batch, n_out))
        else:
            target = np.argmax(scores, axis=1).astype(np.int64)
        out.append(Batch(_read_only(x), _read_only(target)))
    return tuple(out)


@dataclass(frozen=True)
class TrainingJob:
    """A model, where its training starts, and what it sees in each step.

    Attributes:
        model: the network.
        params: the starting parameters (read-only copies, in parameter order).
        batches: one global batch per step, all of the same number of samples.
        optimizer: :class:`~simcoll.numeric.SGD` or :class:`~simcoll.numeric.Adam`.
    """

    model: MLP
    params: Params
    batches: tuple[Batch, ...]
    optimizer: Optimizer

    def __post_init__(self) -> None:
        check_model(self.model)
        check_optimizer(self.optimizer)
        object.__setattr__(self, "params", checked_params(self.model, self.params))
        object.__setattr__(self, "batches", self._checked_batches(self.batches))

    @classmethod
    def synthetic(cls, model: MLP, *, batch: int, steps: int, optimizer: Optimizer,
                  seed: int = 0) -> TrainingJob:
        """A job on :func:`synthetic_batches`, starting from ``model.init(seed)``.

        Raises:
            InvalidInputError: ``model`` not an :class:`MLP`, a seed that is not an
                integer >= 0, or bad sizes.
        """
        check_model(model)
        seed = integer(seed, "seed", minimum=0)
        return cls(model, model.init(seed), synthetic_batches(model, batch=batch, steps=steps,
                                                              seed=seed + 1), optimizer)

    @property
    def steps(self) -> int:
        """Number of training steps (one per batch)."""
        return len(self.batches)

    @property
    def batch(self) -> int:
        """Samples in every step's global batch."""
        return self.batches[0].samples

    def _checked_batches(self, batches: Any) -> tuple[Batch, ...]:
        if not isinstance(batches, Sequence) or len(batches) == 0 \
                or not all(isinstance(b, Batch) for b in batches):
            raise InvalidInputError(f"batches must be a non-empty sequence of "
                                    f"simcoll.numeric.Batch, one per step; got {batches!r:.80}")
        for step, b in enumerate(batches):
            if not isinstance(b.x, np.ndarray) or not isinstance(b.target, np.ndarray):
                raise InvalidInputError(f"batches[{step}] holds {type(b.x).__name__} inputs "
                                        f"and {type(b.target).__name__} targets; give numpy "
                                        f"arrays")
            if b.x.ndim != 2:
                raise InvalidInputError(f"batches[{step}].x has shape {b.x.shape}; give a "
                                        f"2-D array, samples x {self.model.sizes[0]} inputs")
        samples = batches[0].samples
        if samples < 1:
            raise InvalidInputError("batches[0] has no sample; a step needs at least one")
        n_in, n_out = self.model.sizes[0], self.model.sizes[-1]
        target_shape = (samples, n_out) if self.model.loss == "mse" else (samples,)
        for step, b in enumerate(batches):
            if b.x.shape != (samples, n_in) or b.x.dtype != np.float64:
                raise InvalidInputError(f"batches[{step}].x has shape {b.x.shape} and dtype "
                                        f"{b.x.dtype}; every batch needs ({samples}, {n_in}) "
                                        f"float64")
            _check_finite(b.x, f"batches[{step}].x")
            kind = np.float64 if self.model.loss == "mse" else np.int64
            if b.target.shape != target_shape or b.target.dtype != kind:
                raise InvalidInputError(f"batches[{step}].target has shape {b.target.shape} "
                                        f"and dtype {b.target.dtype}; {self.model.loss} needs "
                                        f"{target_shape} {np.dtype(kind).name}")
            if kind is np.float64:
                _check_finite(b.target, f"batches[{step}].target")
            if self.model.loss == "cross_entropy" and samples and (
                    b.target.min() < 0 or b.target.max() >= n_out):
                raise InvalidInputError(f"batches[{step}].target holds class indices outside "
                                        f"0..{n_out - 1}")
        return tuple(Batch(_read_only(b.x), _read_only(b.target)) for b in batches)
