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

What the check costs. Element-wise collectives (all_reduce, reduce) are checked in blocks
of :data:`_BLOCK` elements, so temporaries stay in cache. An output whose bytes equal an
output already checked against the same reference (every rank's all_reduce, all_gather
and broadcast output has one reference) gets that output's verdict without a second
check, and an output byte for byte equal to its reference needs nothing else. For sums,
an element within ``2 p eps * |reference|`` is within the bound (``|sum x_i| <= sum
|x_i|``): ``sum_i |x_i|`` is computed only for the elements that are not.
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
    """Per-output error bounds; ``None`` where the result must be exact (what the command
    line's ``#wrong`` counts against; :func:`compare` applies the same bounds)."""
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
_SHARED = ("all_reduce", "all_gather", "broadcast", "all_gatherv")
"""Collectives whose reference is one array for every rank."""


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bytes (NaN payloads and
    signed zeros included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a is b:
        return True
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                                   np.ascontiguousarray(b).view(np.uint8)))
    nbytes = a.nbytes
    # Compared as the widest unsigned words that tile the buffer: numpy compares those
    # many times faster than bytes.
    word = next(w for w in (np.uint64, np.uint32, np.uint16, np.uint8)
                if nbytes % np.dtype(w).itemsize == 0)
    return bool(np.array_equal(a.reshape(-1).view(word), b.reshape(-1).view(word)))


def _exact(out: np.ndarray, ref: np.ndarray) -> tuple[bool, float]:
    """(out equals ref element for element, NaN matching NaN; the largest difference)."""
    if ref.dtype == out.dtype and same_bytes(out, ref):
        return True, 0.0
    same = out == ref.astype(out.dtype)
    if is_float(out.dtype):
        same |= np.isnan(out) & np.isnan(ref)
    error = np.where(same, 0.0, np.abs(out.astype(np.float64) - ref.astype(np.float64)))
    return bool(np.all(same)), float(np.nan_to_num(error, nan=np.inf, posinf=np.inf).max())


def _bounded(coll: Collective, inputs: list[np.ndarray], out: np.ndarray, ref: np.ndarray,
             op: ReduceOp, root: int, rank: int) -> tuple[bool, float]:
    """Compare rank ``rank``'s floating-point reduction with its reference under the
    rounding bound (exactly where the reference is not finite)."""
    p = len(inputs)
    eps, tiny = float_info(inputs[0].dtype)
    scale = 2 * p * eps
    offset = 0.0 if op is ReduceOp.PRODUCT else tiny
    wide = out.astype(ref.dtype)
    error = np.abs(wide - ref)
    finite = np.isfinite(ref)
    all_finite = bool(finite.all())
    if not all_finite:
        exact = (wide == ref) | (np.isnan(wide) & np.isnan(ref))
        error = np.where(finite, error, np.where(exact, 0.0, np.inf))
    worst = float(np.nan_to_num(error, nan=np.inf, posinf=np.inf).max())
    # For PRODUCT this is the bound; for sums a lower bound of it (|sum x| <= sum |x|).
    within = error <= scale * np.abs(ref) + offset
    if not all_finite:
        within = np.where(finite, within, exact)
    if within.all():
        return True, worst
    if op is ReduceOp.PRODUCT or not np.all(within | finite):
        return False, worst
    where = np.flatnonzero(~within)
    if coll.name in _ELEMENTWISE:
        magnitude = coll.reference(_Magnitudes([x[where] for x in inputs]), op, root)[rank]
    else:
        full = coll.reference(_Magnitudes(inputs), op, root)[rank]
        magnitude = None if full is None else full.reshape(-1)[where]
    assert magnitude is not None
    return bool(np.all(error[where] <= scale * magnitude + offset)), worst


def _compare_arrays(coll: Collective, inputs: list[np.ndarray], outputs: list[np.ndarray | None],
                    op: ReduceOp, root: int) -> tuple[bool, float]:
    """Compare outputs already known to have the reference's shape and dtype."""
    refs = coll.reference(inputs, op, root)
    inexact = coll.reduces and is_float(inputs[0].dtype)
    ok, worst = True, 0.0
    for rank, (out, ref) in enumerate(zip(outputs, refs)):
        if ref is None or out is None or out.size == 0:
            continue
        if inexact and op not in (ReduceOp.MIN, ReduceOp.MAX):
            same, error = _bounded(coll, inputs, out, ref, op, root, rank)
        else:
            same, error = _exact(out, ref)
        ok, worst = ok and same, max(worst, error)
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
    if coll.name in _SHARED:
        # One reference for all: check the first output, and every other output that
        # differs from it in some byte; the others share its verdict.
        first = next((out for out in checked if out is not None), None)
        checked = [out if out is None or first is None or out is first
                   or not same_bytes(out, first) else None for out in checked]
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
