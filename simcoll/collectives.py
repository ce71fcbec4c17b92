"""What each collective computes: its numpy reference, its buffer sizes and busbw factor.

Inputs and outputs follow torch.distributed, with ``np.array_split`` sizing wherever a
buffer is cut into p blocks that do not divide evenly:

* ``all_reduce``: x -> op over every rank's x.
* ``reduce_scatter``: x -> block ``rank`` of the op over every rank's x.
* ``all_gather``: x -> every rank's x, concatenated in rank order.
* ``broadcast(root)``: x -> root's x.
* ``reduce(root)``: x -> on root, the op over every rank's x (other ranks' outputs unchecked).
* ``all_to_all``: x cut into p blocks -> block ``rank`` of every rank's x, concatenated.
* ``gather(root)``: x -> on root, every rank's x concatenated (others unchecked).
* ``scatter(root)``: root's x cut into p blocks -> block ``rank``.
* ``barrier``: no data.

algbw and busbw follow nccl-tests' PERFORMANCE.md: algbw = S / time with S the per-rank
buffer (``nbytes``) except for all_gather and gather, whose S is ``p * nbytes``; busbw =
algbw * factor(p).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simcoll.buffers import block_size
from simcoll.errors import UnknownCollectiveError
from simcoll.ops import ReduceOp

__all__ = ["Collective", "COLLECTIVES", "collective"]

Arrays = Sequence[np.ndarray]
Outputs = list[np.ndarray | None]


@dataclass(frozen=True)
class Collective:
    """A collective's contract. ``reference(inputs, op, root)`` gives every rank's output
    (``None`` where unchecked); ``out_count(p, count, rank, root)`` its element count."""

    name: str
    reduces: bool
    rooted: bool
    reference: Callable[[Arrays, ReduceOp, int], Outputs]
    out_count: Callable[[int, int, int, int], int | None]
    size_factor: Callable[[int], int]
    busbw_factor: Callable[[int], float]


def _combine(inputs: Arrays, op: ReduceOp) -> np.ndarray:
    """The op over all inputs, in float64 for floats (the dtype itself for wider ones), in
    the dtype (modular) for integers; AVG divides the sum once, integers toward zero."""
    first = inputs[0]
    wide = np.result_type(first.dtype, np.float64) if first.dtype.kind == "f" else first.dtype
    acc = first.astype(wide, copy=True)
    for i in range(1, len(inputs)):
        op.ufunc(acc, inputs[i].astype(wide, copy=False), out=acc)
    if op is not ReduceOp.AVG:
        return acc
    p = len(inputs)
    if acc.dtype.kind == "f":
        return acc / p
    # Written apart from ReduceOp.finish (the output path) so that the check does not
    # compare that code with itself: floor division, then one step back toward zero where
    # a negative sum did not divide evenly.
    total = acc.astype(np.uint64 if acc.dtype.kind == "u" else np.int64)
    floor = total // total.dtype.type(p)
    inexact = (floor * total.dtype.type(p) != total) & (total < 0)
    return (floor + inexact.astype(total.dtype)).astype(acc.dtype)


# The references cut buffers with numpy itself, not with simcoll.buffers (which the
# algorithms use), so that the check never compares that code with itself.


def _all_reduce(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out = _combine(inputs, op)
    return [out] * len(inputs)


def _reduce_scatter(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [*np.array_split(_combine(inputs, op), len(inputs))]


def _all_gather(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out = np.concatenate(inputs)
    return [out] * len(inputs)


def _broadcast(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [inputs[root]] * len(inputs)


def _reduce(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out: list[np.ndarray | None] = [None] * len(inputs)
    out[root] = _combine(inputs, op)
    return out


def _all_to_all(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    p = len(inputs)
    blocks = [np.array_split(x, p) for x in inputs]
    return [np.concatenate([blocks[j][r] for j in range(p)]) for r in range(p)]


def _gather(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out: list[np.ndarray | None] = [None] * len(inputs)
    out[root] = np.concatenate(inputs)
    return out


def _scatter(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [*np.array_split(inputs[root], len(inputs))]


def _barrier(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [None] * len(inputs)


def _fraction(p: int) -> float:
    return (p - 1) / p


COLLECTIVES: dict[str, Collective] = {c.name: c for c in [
    Collective("all_reduce", True, False, _all_reduce, lambda p, n, r, root: n,
               lambda p: 1, lambda p: 2 * (p - 1) / p),
    Collective("reduce_scatter", True, False, _reduce_scatter,
               lambda p, n, r, root: block_size(n, p, r), lambda p: 1, _fraction),
    Collective("all_gather", False, False, _all_gather, lambda p, n, r, root: p * n,
               lambda p: p, _fraction),
    Collective("broadcast", False, True, _broadcast, lambda p, n, r, root: n,
               lambda p: 1, lambda p: 1.0),
    Collective("reduce", True, True, _reduce,
               lambda p, n, r, root: n if r == root else None, lambda p: 1, lambda p: 1.0),
    Collective("all_to_all", False, False, _all_to_all,
               lambda p, n, r, root: p * block_size(n, p, r), lambda p: 1, _fraction),
    Collective("gather", False, True, _gather,
               lambda p, n, r, root: p * n if r == root else None, lambda p: p, _fraction),
    Collective("scatter", False, True, _scatter,
               lambda p, n, r, root: block_size(n, p, r), lambda p: 1, _fraction),
    Collective("barrier", False, False, _barrier, lambda p, n, r, root: None,
               lambda p: 1, lambda p: 1.0),
]}


def collective(name: str) -> Collective:
    """The collective called ``name``.

    Raises:
        UnknownCollectiveError: listing the known collectives.
    """
    try:
        return COLLECTIVES[name]
    except (KeyError, TypeError):
        raise UnknownCollectiveError(
            f"unknown collective {name!r}; known collectives: {', '.join(COLLECTIVES)}"
        ) from None
