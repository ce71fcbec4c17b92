"""A small multilayer perceptron in float64 numpy, with its forward and backward passes
written out layer by layer, so that distributed strategies can run any part of them.

Layer ``l`` maps ``x`` (samples x ``sizes[l]``) to ``x @ W.T + b`` with ``W`` of shape
(``sizes[l+1]``, ``sizes[l]``), as ``torch.nn.Linear`` stores it; every layer but the last
is followed by the activation. The loss is the mean over the batch, so the gradient of a
batch is the mean of its samples' gradients, which is what makes data parallelism exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcoll.checks import integer
from simcoll.errors import InvalidInputError
from simcoll.memory import shortfall

__all__ = ["MLP", "Params", "LayerCache", "ACTIVATIONS", "LOSSES"]

Params = dict[str, NDArray[np.float64]]
"""Named tensors in parameter order: ``layer0.weight, layer0.bias, layer1.weight, ...``."""

ACTIVATIONS = ("tanh", "relu")
LOSSES = ("mse", "cross_entropy")


@dataclass(frozen=True)
class LayerCache:
    """What one layer's forward pass keeps for its backward pass.

    Attributes:
        x: the layer's input.
        out: its output (after the activation, if it has one).
    """

    x: NDArray[np.float64]
    out: NDArray[np.float64]


@dataclass(frozen=True)
class MLP:
    """A multilayer perceptron: ``sizes[0]`` inputs, ``sizes[-1]`` outputs.

    Attributes:
        sizes: the width of every layer boundary, inputs first (at least two entries).
        activation: ``"tanh"`` (smooth: the default, since float rounding never flips
            it) or ``"relu"``, applied after every layer but the last.
        loss: ``"mse"`` (mean over samples and outputs of the squared error, as
            ``torch.nn.MSELoss``) or ``"cross_entropy"`` (softmax cross-entropy with
            integer class targets, mean over samples).
    """

    sizes: tuple[int, ...]
    activation: str = "tanh"
    loss: str = "mse"

    def __post_init__(self) -> None:
        if not isinstance(self.sizes, (Sequence, np.ndarray)) \
                or isinstance(self.sizes, (str, bytes)) \
                or (isinstance(self.sizes, np.ndarray) and self.sizes.ndim != 1) \
                or len(self.sizes) < 2:
            raise InvalidInputError(f"sizes={self.sizes!r} is not accepted; give the widths "
                                    f"of every layer boundary in order (a list or tuple), "
                                    f"at least (inputs, outputs)")
        object.__setattr__(self, "sizes", tuple(
            integer(s, f"sizes[{i}]", minimum=1) for i, s in enumerate(self.sizes)))
        if self.activation not in ACTIVATIONS:
            raise InvalidInputError(f"activation={self.activation!r} is not accepted; "
                                    f"use one of {', '.join(ACTIVATIONS)}")
        if self.loss not in LOSSES:
            raise InvalidInputError(f"loss={self.loss!r} is not accepted; "
                                    f"use one of {', '.join(LOSSES)}")
        if self.loss == "cross_entropy" and self.sizes[-1] < 2:
            raise InvalidInputError(f"loss='cross_entropy' needs at least 2 outputs (classes), "
                                    f"got sizes[-1]={self.sizes[-1]}")

    @property
    def layers(self) -> int:
        """Number of linear layers."""
        return len(self.sizes) - 1

    @staticmethod
    def names(layer: int) -> tuple[str, str]:
        """The names of a layer's weight and bias."""
        return f"layer{layer}.weight", f"layer{layer}.bias"

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Every parameter's name, in parameter order."""
        return tuple(name for layer in range(self.layers) for name in self.names(layer))

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's shape, in parameter order."""
        out: dict[str, tuple[int, ...]] = {}
        for layer in range(self.layers):
            w, b = self.names(layer)
            out[w] = (self.sizes[layer + 1], self.sizes[layer])
            out[b] = (self.sizes[layer + 1],)
        return out

    def init(self, seed: int = 0) -> Params:
        """Parameters drawn as ``torch.nn.Linear`` draws them: U(-k, k), k = 1/sqrt(fan_in).

        Returns read-only arrays, so no strategy can change the starting point of another.

        Raises:
            InvalidInputError: a seed that is not an integer >= 0, or parameters past
                this process's memory.
        """
        rng = np.random.default_rng(integer(seed, "seed", minimum=0))
        shapes = self.shapes()
        short = shortfall(8 * sum(math.prod(shape) for shape in shapes.values()),
                          "its float64 parameters alone")
        if short is not None:
            raise InvalidInputError(f"MLP({self.sizes}).init() {short}; use narrower layers")
        params: Params = {}
        for layer in range(self.layers):
            bound = 1.0 / np.sqrt(self.sizes[layer])
            for name in self.names(layer):
                params[name] = rng.uniform(-bound, bound, size=shapes[name])
                params[name].flags.writeable = False
        return params

    # -- one layer ---------------------------------------------------------------------
    def activated(self, layer: int) -> bool:
        """Whether the activation follows ``layer`` (every layer but the last)."""
        return layer < self.layers - 1

    def activate(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The activation function."""
        return np.tanh(z) if self.activation == "tanh" else np.maximum(z, 0.0)

    def activation_grad(self, out: NDArray[np.float64],
                        grad_out: NDArray[np.float64]) -> NDArray[np.float64]:
        """The gradient before the activation, from its output and the gradient after it."""
        if self.activation == "tanh":
            return grad_out * (1.0 - out * out)
        return grad_out * (out > 0.0)

    def forward_layer(self, layer: int, weight: NDArray[np.float64],
                      bias: NDArray[np.float64],
                      x: NDArray[np.float64]) -> tuple[NDArray[np.float64], LayerCache]:
        """One layer's output, and what its backward pass needs."""
        z = x @ weight.T + bias
        out = self.activate(z) if self.activated(layer) else z
        return out, LayerCache(x, out)

    def backward_layer(self, layer: int, weight: NDArray[np.float64], cache: LayerCache,
                       grad_out: NDArray[np.float64], *, input_grad: bool = True,
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                  NDArray[np.float64] | None]:
        """Gradients of a layer's weight and bias, and of its input (if ``input_grad``).

        Args:
            grad_out: the loss's gradient with respect to the layer's output.
        """
        dz = self.activation_grad(cache.out, grad_out) if self.activated(layer) else grad_out
        grad_x = dz @ weight if input_grad else None
        return dz.T @ cache.x, dz.sum(axis=0), grad_x

    # -- the loss ----------------------------------------------------------------------
    def loss_and_grad(self, out: NDArray[np.float64],
                      target: NDArray) -> tuple[float, NDArray[np.float64]]:
        """The mean loss over the samples of ``out`` and its gradient with respect to it."""
        samples = out.shape[0]
        if self.loss == "mse":
            diff = out - target
            return float(np.mean(diff * diff)), (2.0 / diff.size) * diff
        shifted = out - out.max(axis=1, keepdims=True)
        log_z = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        log_p = shifted - log_z
        rows = np.arange(samples)
        loss = -float(np.mean(log_p[rows, target]))
        grad = np.exp(log_p)
        grad[rows, target] -= 1.0
        return loss, grad / samples

    # -- the whole network -------------------------------------------------------------
    def gradients(self, params: Params, x: NDArray[np.float64],
                  target: NDArray) -> tuple[float, Params]:
        """The mean loss over a batch and the gradient of every parameter."""
        caches = []
        h = x
        for layer in range(self.layers):
            w, b = self.names(layer)
            h, cache = self.forward_layer(layer, params[w], params[b], h)
            caches.append(cache)
        loss, grad = self.loss_and_grad(h, target)
        grads: Params = {}
        for layer in reversed(range(self.layers)):
            w, b = self.names(layer)
            grads[w], grads[b], grad_in = self.backward_layer(layer, params[w], caches[layer],
                                                              grad, input_grad=layer > 0)
            if grad_in is not None:
                grad = grad_in
        return loss, {name: grads[name] for name in self.parameter_names}

    # -- compute cost ------------------------------------------------------------------
    def forward_flops(self, layer: int, samples: int) -> int:
        """Multiply-add FLOPs of one layer's forward pass on ``samples`` samples."""
        return 2 * samples * self.sizes[layer] * self.sizes[layer + 1]

    def backward_flops(self, layer: int, samples: int) -> int:
        """FLOPs of one layer's backward pass: the weight gradient, and the input gradient
        except for the first layer (the data needs none)."""
        return self.forward_flops(layer, samples) * (2 if layer > 0 else 1)
