"""Forward and backward passes inside a rank program: each layer first keeps the GPU's
compute stream busy for its FLOPs at the GPU's rate, then computes its numbers in numpy.
Also the small tensor helpers the strategies share (flattening, optimizer steps)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcoll.comm import Comm
from simcoll.numeric.job import Batch
from simcoll.numeric.mlp import MLP, LayerCache, Params
from simcoll.numeric.optim import Optimizer

__all__ = ["forward_layers", "backward_layers", "forward_backward", "flatten", "unflatten",
           "optimizer_step", "padded", "share", "in_turn"]

Array = NDArray[np.float64]
Proc = Generator[Any, Any, Any]
LayerHook = Callable[[int, Array, Array], None]


def forward_layers(comm: Comm, model: MLP, params: Params, layers: Sequence[int], x: Array,
                   flop_rate: float) -> Generator[Any, Any, tuple[Array, list[LayerCache]]]:
    """Run ``layers`` (consecutive) forward on ``x``; returns the output and the caches."""
    caches = []
    for layer in layers:
        yield comm.compute(model.forward_flops(layer, x.shape[0]) / flop_rate)
        w, b = model.names(layer)
        x, cache = model.forward_layer(layer, params[w], params[b], x)
        caches.append(cache)
    return x, caches


def backward_layers(comm: Comm, model: MLP, params: Params, layers: Sequence[int],
                    caches: Sequence[LayerCache], grad: Array, flop_rate: float,
                    on_layer: LayerHook | None = None,
                    ) -> Generator[Any, Any, tuple[Params, Array | None]]:
    """Run ``layers`` backward, last first, from the gradient of their output.

    Args:
        on_layer: called as ``on_layer(layer, weight_grad, bias_grad)`` the moment a
            layer's gradients exist (DDP and ZeRO-2 start collectives there).

    Returns:
        The gradients of the layers' parameters (parameter order) and the gradient of the
        first layer's input (None for layer 0: the data needs none).
    """
    grads: Params = {}
    for layer, cache in zip(reversed(layers), reversed(caches)):
        yield comm.compute(model.backward_flops(layer, cache.x.shape[0]) / flop_rate)
        w, b = model.names(layer)
        dw, db, grad_in = model.backward_layer(layer, params[w], cache, grad,
                                               input_grad=layer > 0)
        grads[w], grads[b] = dw, db
        if on_layer is not None:
            on_layer(layer, dw, db)
        if grad_in is not None:
            grad = grad_in
    names = [n for layer in layers for n in model.names(layer)]
    return {n: grads[n] for n in names}, (grad if layers[0] > 0 else None)


def forward_backward(comm: Comm, model: MLP, params: Params, batch: Batch, flop_rate: float,
                     on_layer: LayerHook | None = None,
                     ) -> Generator[Any, Any, tuple[float, Params]]:
    """The whole network forward and backward on ``batch``: its mean loss and gradients."""
    layers = range(model.layers)
    out, caches = yield from forward_layers(comm, model, params, layers, batch.x, flop_rate)
    loss, grad = model.loss_and_grad(out, batch.target)
    grads, _ = yield from backward_layers(comm, model, params, layers, caches, grad,
                                          flop_rate, on_layer)
    return loss, grads


def share(samples: int, parts: int, index: int) -> tuple[int, int]:
    """The rows ``[start, stop)`` of part ``index`` of ``samples`` cut into equal parts."""
    size = samples // parts
    return index * size, (index + 1) * size


def flatten(tensors: Sequence[Array]) -> Array:
    """The tensors' elements one after the other, as one new 1-D array."""
    return np.concatenate([t.ravel() for t in tensors])


def unflatten(flat: Array, shapes: Sequence[tuple[int, ...]]) -> list[Array]:
    """Cut ``flat`` back into tensors of ``shapes`` (views of it)."""
    out, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        out.append(flat[start:start + size].reshape(shape))
        start += size
    return out


def padded(flat: Array, parts: int) -> Array:
    """``flat`` with zeros appended up to a multiple of ``parts`` elements, as FSDP pads its
    flat parameters so that every rank's shard has the same size."""
    pad = -flat.size % parts
    return np.concatenate([flat, np.zeros(pad)]) if pad else flat


def optimizer_step(optimizer: Optimizer, params: Params, grads: Params,
                   states: dict[str, Any]) -> tuple[Params, dict[str, Any]]:
    """Every tensor of ``params`` updated with its gradient; new dicts, inputs untouched."""
    new_params: Params = {}
    new_states: dict[str, Any] = {}
    for name, value in params.items():
        new_params[name], new_states[name] = optimizer.update(value, grads[name], states[name])
    return new_params, new_states


def in_turn(comm: Comm, previous: Any, collective: Callable[[], Any]) -> Any:
    """``collective()`` started once ``previous`` (the collective before it on the same
    communication stream, or None) is done, as NCCL runs the collectives of one stream
    one after another; returns what waiting on it gives, the collective's output."""
    def after() -> Proc:
        if previous is not None:
            yield previous
        return (yield collective())
    return comm.start(after())
