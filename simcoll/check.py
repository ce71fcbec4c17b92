"""Compare a simulation's outputs with the numpy reference.

Integer results and data movement (gather, broadcast, all-to-all, ...) must match exactly:
integer arithmetic in a fixed dtype is modular, so any reduction order gives the same bits.
Floating-point reductions are checked against a reference computed in float64 (in the
input's own dtype if it is wider, such as ``longdouble``) and may differ from it by
rounding: for SUM and AVG every element must lie within ``2 p eps * sum_i |x_i|`` of it
(the classic bound on a sum of p terms in any order, Higham 2002, section 4.2, doubled for
margin), for PRODUCT within ``2 p eps * |reference|``; MIN and MAX are exact. ``eps`` is the
dtype's own (``ml_dtypes.finfo`` for bfloat16 and fp8, which ``np.finfo`` does not know),
so each dtype is checked in its own precision. Where the reference is infinite or NaN (the
inputs hold infinities or NaNs) every order of the reduction gives that same value, so it
must match exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simcoll.collectives import Collective
from simcoll.dtypes import float_info, is_float
from simcoll.ops import ReduceOp

__all__ = ["compare"]


class _Magnitudes(Sequence):
    """|x| in float64 for each input, made one at a time when the reference reads it."""

    def __init__(self, inputs: list[np.ndarray]):
        self._inputs = inputs

    def __len__(self) -> int:
        return len(self._inputs)

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        x = self._inputs[index]
        return np.abs(x).astype(np.result_type(x.dtype, np.float64))


Bound = tuple[np.ndarray, float, float]
"""``(array, scale, offset)``: an element may be off by ``scale * |array| + offset``."""


def _bounds(coll: Collective, inputs: list[np.ndarray], op: ReduceOp, root: int,
            refs: list[np.ndarray | None]) -> list[Bound | None]:
    """Per-output error bounds; ``None`` where the result must be exact."""
    p = len(inputs)
    if op in (ReduceOp.MIN, ReduceOp.MAX):
        return [None] * len(refs)
    eps, tiny = float_info(inputs[0].dtype)
    if op is ReduceOp.PRODUCT:
        return [None if r is None else (r, 2 * p * eps, 0.0) for r in refs]
    mags = coll.reference(_Magnitudes(inputs), op, root)
    return [None if m is None else (m, 2 * p * eps, tiny) for m in mags]


_BLOCK = 1 << 16
"""Elements checked at a time where the reference is element-wise: temporaries stay small
and in cache."""
_ELEMENTWISE = ("all_reduce", "reduce")


def _compare_arrays(coll: Collective, inputs: list[np.ndarray], outputs: list[np.ndarray | None],
                    op: ReduceOp, root: int) -> tuple[bool, float]:
    """Compare outputs already known to have the reference's shape and dtype."""
    refs = coll.reference(inputs, op, root)
    inexact = coll.reduces and is_float(inputs[0].dtype)
    bounds = _bounds(coll, inputs, op, root, refs) if inexact else [None] * len(refs)
    ok, worst = True, 0.0
    for out, ref, bound in zip(outputs, refs, bounds):
        if ref is None or out is None or out.size == 0:
            continue
        if bound is None:
            same = out == ref.astype(out.dtype)
            if is_float(out.dtype):
                same |= np.isnan(out) & np.isnan(ref)
            error = np.where(same, 0.0, np.abs(out.astype(np.float64) - ref.astype(np.float64)))
        else:
            wide = out.astype(ref.dtype)
            finite = np.isfinite(ref)
            exact = (wide == ref) | (np.isnan(wide) & np.isnan(ref))
            array, scale, offset = bound
            error = np.where(finite, np.abs(wide - ref), np.where(exact, 0.0, np.inf))
            same = np.where(finite, error <= scale * np.abs(array) + offset, exact)
        ok = ok and bool(np.all(same))
        worst = max(worst, float(np.nan_to_num(error, nan=np.inf).max()))
    return ok, worst


def compare(coll: Collective, inputs: list[np.ndarray], outputs: list, op: ReduceOp,
            root: int) -> tuple[bool, float]:
    """Return (every checked output matches, largest absolute error)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _compare(coll, inputs, outputs, op, root)


def _compare(coll: Collective, inputs: list[np.ndarray], outputs: list, op: ReduceOp,
             root: int) -> tuple[bool, float]:
    p = len(inputs)
    dtype = inputs[0].dtype
    count = inputs[0].size
    ok = True
    checked: list[np.ndarray | None] = []
    for rank, out in enumerate(outputs):
        expected = coll.out_count(p, count, rank, root)
        if expected is None:
            checked.append(None)
        elif (not isinstance(out, np.ndarray) or out.dtype != dtype
              or out.shape != (expected,)):
            ok = False
            checked.append(None)
        else:
            checked.append(out)
    if coll.name not in _ELEMENTWISE:
        same, worst = _compare_arrays(coll, inputs, checked, op, root)
        return ok and same, worst
    worst = 0.0
    for start in range(0, count, _BLOCK):
        piece = slice(start, start + _BLOCK)
        same, error = _compare_arrays(coll, [x[piece] for x in inputs],
                                      [None if o is None else o[piece] for o in checked],
                                      op, root)
        ok, worst = ok and same, max(worst, error)
    return ok, worst
