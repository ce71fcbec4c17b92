"""Optimizers as element-wise functions of (parameter, gradient, state).

Because every update is element-wise, updating a shard of a tensor gives exactly the
elements that updating the whole tensor would: that is what lets ZeRO keep each rank's
optimizer state for its own shard only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
from numpy.typing import NDArray

from simcoll.checks import real, shown
from simcoll.errors import InvalidInputError

__all__ = ["SGD", "Adam", "AdamState", "Optimizer", "check_optimizer"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class SGD:
    """Plain stochastic gradient descent: ``p - lr * g``.

    Attributes:
        lr: the learning rate (> 0).
    """

    lr: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", real(self.lr, "lr", strict=True))

    def init(self, param: Array) -> None:
        """SGD keeps no state."""
        return None

    def update(self, param: Array, grad: Array, state: None) -> tuple[Array, None]:
        """The updated parameter (a new array) and the state (none)."""
        return param - self.lr * grad, None


@dataclass(frozen=True)
class AdamState:
    """Adam's state for one tensor (or one shard of it).

    Attributes:
        step: number of updates done.
        m, v: the running first and second moment estimates.
    """

    step: int
    m: Array
    v: Array


@dataclass(frozen=True)
class Adam:
    """Adam, as Algorithm 1 of Kingma & Ba (ICLR 2015) writes it.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, then
    ``p - lr * m_hat / (sqrt(v_hat) + eps)`` with ``m_hat = m / (1 - b1^t)`` and
    ``v_hat = v / (1 - b2^t)``.

    Attributes:
        lr: the step size (> 0).
        beta1, beta2: the moments' decay rates, in [0, 1).
        eps: added to the denominator (> 0).
    """

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", real(self.lr, "lr", strict=True))
        object.__setattr__(self, "eps", real(self.eps, "eps", strict=True))
        for name in ("beta1", "beta2"):
            given = getattr(self, name)
            try:
                value = real(given, name)
            except InvalidInputError:
                value = math.nan
            if not 0.0 <= value < 1.0:
                raise InvalidInputError(f"{name}={shown(given)} is not accepted; use a "
                                        f"number in [0, 1)")
            object.__setattr__(self, name, value)

    def init(self, param: Array) -> AdamState:
        """Zero moments for a tensor shaped as ``param``."""
        return AdamState(0, np.zeros_like(param), np.zeros_like(param))

    def update(self, param: Array, grad: Array, state: AdamState) -> tuple[Array, AdamState]:
        """The updated parameter (a new array) and the new state."""
        t = state.step + 1
        m = self.beta1 * state.m + (1.0 - self.beta1) * grad
        v = self.beta2 * state.v + (1.0 - self.beta2) * (grad * grad)
        m_hat = m / (1.0 - self.beta1 ** t)
        v_hat = v / (1.0 - self.beta2 ** t)
        return param - self.lr * m_hat / (np.sqrt(v_hat) + self.eps), AdamState(t, m, v)


Optimizer = Union[SGD, Adam]  # noqa: UP007 (a runtime alias on 3.10)


def check_optimizer(optimizer: Any) -> Optimizer:
    """``optimizer`` if it is one of simcoll.numeric's optimizers.

    Raises:
        InvalidInputError: anything else.
    """
    if not isinstance(optimizer, (SGD, Adam)):
        raise InvalidInputError(f"optimizer={optimizer!r} is not accepted; use "
                                f"simcoll.numeric.SGD(lr=...) or simcoll.numeric.Adam(...)")
    return optimizer
