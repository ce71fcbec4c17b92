"""Closed-form alpha-beta-gamma cost models, one per registered algorithm.

All formulas are for the single-port alpha-beta reference network of DESIGN.md
(``switch(p, bandwidth=1/beta, latency=alpha/2)``, every GPU with
``reduce_bandwidth=1/gamma``): a message of n bytes costs alpha + n beta, each rank sends
one and receives one message at full speed at a time, and reducing n bytes costs n gamma.
``nbytes`` is always each rank's input buffer size, as in ``simulate``.

Models live in one module per algorithm family and register with :func:`cost_model`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcoll.errors import InvalidInputError, UnknownAlgorithmError

__all__ = ["CostModel", "Traffic", "Bounds", "cost_model", "predict", "traffic",
           "lower_bound", "models"]


@dataclass(frozen=True)
class Traffic:
    """Payload bytes each rank (and server host) sends and receives."""

    sent: np.ndarray
    received: np.ndarray
    host_sent: np.ndarray
    host_received: np.ndarray


@dataclass(frozen=True)
class CostModel:
    """A registered model.

    Attributes:
        time: ``time(p, nbytes, alpha, beta, gamma, **params) -> seconds``.
        traffic: ``traffic(p, nbytes, itemsize, **params) -> Traffic``; exact in bytes for
            every size (chunks are cut by elements, as ``np.array_split`` does).
        exact: ``exact(p, nbytes, itemsize, **params) -> bool``: whether ``time`` is exact
            (not just an estimate) on the reference network for these arguments.
    """

    collective: str
    algorithm: str
    time: Callable[..., float]
    traffic: Callable[..., Traffic]
    exact: Callable[..., bool]


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on a collective's time (Chan et al. 2007), in seconds.

    Attributes:
        latency: ceil(log2 p) alpha, the latency bound of single-port algorithms (one
            message in flight per rank at a time).
        bandwidth: bytes a rank must move, times beta.
        computation: bytes a rank must reduce, times gamma.
        message: alpha if any message is needed (p > 1), else 0.
    """

    latency: float
    bandwidth: float
    computation: float
    message: float

    @property
    def total(self) -> float:
        """A bound that holds on the reference network for every algorithm.

        A message drains only after its latency, and a link moves at most 1/beta bytes/s,
        so no collective ends before ``message + bandwidth``, nor before its reductions.
        ``latency`` is left out: the network lets a rank overlap the latencies of
        concurrent messages (direct and naive algorithms do), so it binds only
        single-port algorithms.
        """
        return max(self.message + self.bandwidth, self.computation)


_MODELS: dict[tuple[str, str], CostModel] = {}


def cost_model(collective: str, algorithm: str, *, traffic: Callable[..., Traffic],
               exact: Callable[..., bool] | None = None) -> Callable:
    """Decorator on the time formula: register a model for ``(collective, algorithm)``.

    ``exact`` defaults to "exact for every argument".
    """
    def decorator(time: Callable[..., float]) -> Callable[..., float]:
        _MODELS[(collective, algorithm)] = CostModel(
            collective, algorithm, time, traffic, exact or (lambda *a, **k: True))
        return time

    return decorator


def models() -> list[tuple[str, str]]:
    """Every ``(collective, algorithm)`` pair with a cost model, sorted."""
    return sorted(_MODELS)


def _model(collective: str, algorithm: str) -> CostModel:
    try:
        return _MODELS[(collective, algorithm)]
    except KeyError:
        known = ", ".join(f"{c}/{a}" for c, a in models())
        raise UnknownAlgorithmError(
            f"no cost model for {collective}/{algorithm}; known: {known}") from None


def _check(p: int, nbytes: int) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise InvalidInputError(f"p={p!r} is not accepted; use an integer >= 1")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise InvalidInputError(f"nbytes={nbytes!r} is not accepted; use an integer >= 0")


def predict(collective: str, algorithm: str, *, p: int, nbytes: int, alpha: float,
            beta: float, gamma: float = 0.0, **params: Any) -> float:
    """Predicted seconds on the alpha-beta reference network.

    Raises:
        UnknownAlgorithmError: no model for the pair; the message lists the known ones.
    """
    model = _model(collective, algorithm)
    _check(p, nbytes)
    return float(model.time(p, nbytes, alpha, beta, gamma, **params))


def traffic(collective: str, algorithm: str, *, p: int, nbytes: int, itemsize: int = 4,
            **params: Any) -> Traffic:
    """Bytes each rank sends and receives (exact, for elements of ``itemsize`` bytes)."""
    model = _model(collective, algorithm)
    _check(p, nbytes)
    return model.traffic(p, nbytes, itemsize, **params)


def is_exact(collective: str, algorithm: str, *, p: int, nbytes: int, itemsize: int = 4,
             **params: Any) -> bool:
    """Whether ``predict`` is exact (not an estimate) for these arguments."""
    return bool(_model(collective, algorithm).exact(p, nbytes, itemsize, **params))


def lower_bound(collective: str, *, p: int, nbytes: int, alpha: float, beta: float,
                gamma: float = 0.0, itemsize: int = 1) -> Bounds:
    """Latency, bandwidth and computation lower bounds (Chan et al. 2007, table 1).

    With n the per-rank input bytes and L = ceil(log2 p) (a message at most doubles the
    ranks that know something per round), the single-port latency bound is L alpha for
    every collective. Bandwidth bounds: all_reduce 2 (p-1)/p n beta (Patarasuk & Yuan 2009);
    reduce_scatter and all_to_all (p-1)/p n beta; scatter (n - b) beta, where b is the
    largest block the root may keep (ceil(count/p) elements of ``itemsize`` bytes, as
    ``np.array_split`` cuts); all_gather and gather (p-1) n beta (each rank receives every
    other rank's n bytes); broadcast and reduce n beta. Computation bounds: (p-1)/p n gamma
    for all_reduce, reduce_scatter and reduce, 0 otherwise.
    """
    _check(p, nbytes)
    if p == 1:
        return Bounds(0.0, 0.0, 0.0, 0.0)
    steps = int(np.ceil(np.log2(p)))
    frac = (p - 1) / p
    n = nbytes
    table = {
        "all_reduce": (steps, 2 * frac * n, frac * n),
        "reduce_scatter": (steps, frac * n, frac * n),
        "all_gather": (steps, (p - 1) * n, 0.0),
        "broadcast": (steps, n, 0.0),
        "reduce": (steps, n, frac * n),
        "all_to_all": (steps, frac * n, 0.0),
        "gather": (steps, (p - 1) * n, 0.0),
        "scatter": (steps, n - -(-(n // itemsize) // p) * itemsize, 0.0),
        "barrier": (steps, 0.0, 0.0),
    }
    if collective not in table:
        raise InvalidInputError(f"no lower bound for collective {collective!r}; known: "
                                f"{', '.join(table)}")
    lat, bw, comp = table[collective]
    return Bounds(lat * alpha, bw * beta, comp * gamma, alpha)


# The models register themselves on import; they need the names above, so they come last.
from simcoll.cost import (  # noqa: E402, F401
    basic,
    bruck,
    bucketed,
    direct,
    hierarchical,
    pairwise,
    pipeline,
    recursive,
    ring,
    tree,
)
