"""Compare a simulation's outputs with the numpy reference.

Integer results and data movement (gather, broadcast, all-to-all, ...) must match exactly:
integer arithmetic in a fixed dtype is modular, so any reduction order gives the same bits.
Floating-point reductions may differ from the float64 reference by rounding: for SUM and
AVG every element must lie within ``2 p eps * sum_i |x_i|`` of it (the classic bound on a
sum of p terms in any order, Higham 2002, section 4.2, doubled for margin), for PRODUCT
within ``2 p eps * |reference|``; MIN and MAX are exact.
"""

from __future__ import annotations

import numpy as np

from simcoll.collectives import Collective
from simcoll.ops import ReduceOp

__all__ = ["compare"]


def _bounds(coll: Collective, inputs: list[np.ndarray], op: ReduceOp, root: int,
            refs: list[np.ndarray | None]) -> list[np.ndarray | None]:
    p = len(inputs)
    eps = float(np.finfo(inputs[0].dtype).eps)
    if op in (ReduceOp.MIN, ReduceOp.MAX):
        return [None if r is None else np.zeros(r.shape) for r in refs]
    if op is ReduceOp.PRODUCT:
        return [None if r is None else 2 * p * eps * np.abs(r) for r in refs]
    mags = coll.reference([np.abs(x.astype(np.float64)) for x in inputs], op, root)
    tiny = float(np.finfo(inputs[0].dtype).smallest_normal)
    return [None if m is None else 2 * p * eps * m + tiny for m in mags]


def compare(coll: Collective, inputs: list[np.ndarray], outputs: list, op: ReduceOp,
            root: int) -> tuple[bool, float]:
    """Return (every checked output matches, largest absolute error)."""
    refs = coll.reference(inputs, op, root)
    dtype = inputs[0].dtype if inputs else None
    inexact = coll.reduces and dtype is not None and dtype.kind == "f"
    bounds = _bounds(coll, inputs, op, root, refs) if inexact else [None] * len(refs)
    ok, worst = True, 0.0
    for out, ref, bound in zip(outputs, refs, bounds):
        if ref is None:
            continue
        if not isinstance(out, np.ndarray) or out.dtype != dtype or out.shape != ref.shape:
            ok = False
            continue
        if out.size == 0:
            continue
        diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        worst = max(worst, float(np.nanmax(diff)))
        if bound is None:
            ok = ok and bool(np.array_equal(out, ref.astype(dtype), equal_nan=True))
        else:
            ok = ok and bool(np.all(diff <= bound))
    return ok, worst
