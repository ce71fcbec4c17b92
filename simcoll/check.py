"""Compare a simulation's outputs with the numpy reference.

Integer results and data movement (gather, broadcast, all-to-all, ...) must match
exactly (moved floats with the sign of their zeros): integer arithmetic in a fixed dtype
is modular, so any reduction order gives the same bits. Floating-point reductions are
checked against a reference computed in float64 (in the input's own dtype if it is
wider, such as ``longdouble``) and may differ from it by what rounding can do, each
dtype in its own precision (u: its unit roundoff, eps / 2, from ``ml_dtypes.finfo`` for
bfloat16 and fp8, which ``np.finfo`` does not know; r: the reference's; q = p - 1
operations): for SUM every element must lie within ``q (u + r) sum_i |x_i|`` of it (a
sum of p terms in any order is off by at most ``q u sum |x_i|``, Jeannerod and Rump
2013, with no term for underflow: additions below the smallest normal number are exact;
the float64 reference is off by its own share); for AVG, whose inputs are each scaled by
c = 1/p rounded to the dtype before they are summed, as NCCL does for floating dtypes,
within ``q u sum |c x_i| + (u |c| + |c - 1/p|) sum |x_i|`` plus half a subnormal step
per input (a product below the smallest normal number rounds by that much) and the
reference's share; for PRODUCT within ``((1 + u)^q - 1) |reference| + q eta (1 + u)^q
prod_i max(1, |x_i|)``: each of the q multiplications rounds by a factor within u of 1
and, where its result falls below the smallest normal number (gradual underflow), by up
to ``eta = eps * smallest normal`` more (the smallest subnormal step; Higham 2002,
chapter 2), which the factors multiplied in later can grow by at most their product
where it exceeds 1. MIN and MAX are exact, and so is an element whose inputs are all
integers whose magnitudes sum to at most 2^t (t the dtype's significand bits, 8 for
bfloat16; below 2^t for float64 and wider, whose magnitudes the check sums in their own
precision), or for PRODUCT multiply to at most that (for AVG: sum, with p a power of
two, whose scale 1/p is then exact): every partial result of any order is then an integer
the dtype holds, so it must equal the reference (``simcoll run -c`` draws such inputs,
as nccl-tests checks with values whose reductions are exact: with random normal values
the bound let a bfloat16 all_reduce over 128 ranks that lost a rank pass). In fp8 even
this bound is wide: with e4m3's u
= 1/16, a sum over 8 ranks may be off by 7/16 of ``sum |x_i|``, so an output of zeros
passes wherever ``|sum x_i|`` is below that (the bound the check used before 2026-12-05,
``2 p eps sum |x_i|``, reached ``sum |x_i|`` from 2 ranks in e5m2 and 4 in e4m3, so that
zeros or a rank's own input passed). Where a partial result can pass the dtype's
largest finite number in some order, an element may come out infinite (float16's
60000 + 60000 - 60000 summed left to right), of the sign of the partial results that
can pass it, or NaN where both signs can (inf - inf), and a finite one must still lie
within the bound: for SUM and AVG, upward where the positive terms' sum, downward where
the negative terms' magnitudes, plus the rounding bound ``q u sum |x_i|``, pass it
(AVG's terms once scaled; a partial sum adds a subset of the terms, so where they
cancel, as in 60000 - 60000, no order overflows), for PRODUCT (either sign, or NaN)
where the factors above 1 multiply past it once rounded q times (an infinity of the
product's sign; NaN where a partial product can also underflow to 0). fp8 sums and
products saturate at their largest finite number M instead, as NCCL's do, and may come
back down (448 + 448 - 448 is 0 left to right in e4m3): there a finite element must
lie in the range a saturated order reaches, no NaN comes of finite inputs
(:func:`_saturated_sums`, :func:`_saturated_products`; every association of 3 and 4
ranks of large fp8 inputs lands in it, tests/test_check.py). Where the reference is
infinite or NaN, an element must match it, or be a value another order gives: NaN for
a sum with +inf among its inputs where the finite terms can overflow to -inf (inf -
inf), and that +inf where the reference is such a NaN (M + M - inf in float64, which
an order meeting -inf first keeps at -inf); a product's NaN where its finite factors
can underflow to 0 (0 x inf), and its infinity of the factors' signs where the
reference is such a NaN and no factor is 0; in fp8 what the saturated ranges give with
an infinite input clamped at its first combine (never an infinity, once two inputs
combine); where every input is finite, the float64 reference itself
overflowed where the exact value need not, and the element is not checked.

What the check costs. Element-wise collectives (all_reduce, reduce) are checked in blocks
of :data:`_BLOCK` elements, so temporaries stay in cache, the blocks spread over up to
:data:`WORKERS` threads (numpy releases the GIL in its loops; the verdict and the largest
error do not depend on the order in which blocks finish). An output whose bytes equal an
output already checked against the same reference (every rank's all_reduce, all_gather
and broadcast output has one reference) gets that output's verdict without a second
check, and an output byte for byte equal to its reference needs nothing else. An element
within a multiple of ``|reference|`` that no bound falls below (``q (u + r)`` for sums,
as ``|sum x_i| <= sum |x_i|``) is within its bound: ``sum_i |x_i|``, or the product's
underflow term, is computed only for the elements that are not.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from simcoll.collectives import Collective
from simcoll.dtypes import float_info, is_float
from simcoll.ops import SATURATING, ReduceOp

__all__ = ["compare", "wrong_elements"]


class _Magnitudes(Sequence):
    """|x| in float64 for each input, made one at a time when the reference reads it;
    with ``floor=1``, max(1, |x|): the most a factor can grow an error."""

    def __init__(self, inputs: list[np.ndarray], floor: float = 0.0):
        self._inputs = inputs
        self._floor = floor

    def __len__(self) -> int:
        return len(self._inputs)

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        x = self._inputs[index]
        magnitude = np.abs(x).astype(np.result_type(x.dtype, np.float64))
        return np.maximum(magnitude, self._floor, out=magnitude) if self._floor else magnitude


def _growths(inputs: list[np.ndarray]) -> _Magnitudes:
    return _Magnitudes(inputs, floor=1.0)


def _shrinks(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """min(1, |x|) in float64 for each input (1 where not finite): multiplied, the most a
    product's factors below 1 can shrink a partial product."""
    return [np.where(np.isfinite(x), np.minimum(np.abs(x.astype(np.float64)), 1.0), 1.0)
            for x in inputs]


class _NotWhole(Sequence):
    """1.0 where an input is not a finite integer, else 0.0, for each input, made one at a
    time when the reference reads it (summed: how many of an element's inputs are not)."""

    def __init__(self, inputs: list[np.ndarray]):
        self._inputs = inputs

    def __len__(self) -> int:
        return len(self._inputs)

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        x = self._inputs[index].astype(np.result_type(self._inputs[index].dtype, np.float64))
        with np.errstate(invalid="ignore"):
            return (~(np.isfinite(x) & (x == np.trunc(x)))).astype(np.float64)


def _exactly(op: ReduceOp, p: int, dtype: np.dtype, reach: np.ndarray,
             not_whole: np.ndarray) -> np.ndarray:
    """Where every order of the reduction gives the reference exactly: each input an
    integer (``not_whole`` counts those that are not) and, for SUM, ``sum |x_i| <= 2^t``
    (t the dtype's significand bits: every partial sum, a sum of some of the terms, is
    then an integer the dtype holds, and each addition is exact); for PRODUCT ``prod_i
    max(1, |x_i|) <= 2^t`` (every partial product is such an integer, or 0); for AVG the
    same as SUM where the scale c = 1/p is exact and a normal number (p a power of two:
    ``c x_i`` and every partial sum are then such integers times c)."""
    whole = _whole_range(op, p, dtype)
    if whole is None:
        return np.zeros(np.shape(reach), dtype=bool)
    top, factor = whole
    total = reach * factor
    # The reach is summed (multiplied) in the reference's precision: where that is no
    # wider than the dtype's (float64, longdouble), a total past 2^t can round down to
    # 2^t itself (2^53 + 1 + 1 is 2^53 in float64), never below it, so only a total
    # below 2^t is known to be exact.
    within = total < top if _bits(np.result_type(dtype, np.float64)) <= _bits(dtype) \
        else total <= top
    return (not_whole == 0) & within


def _bits(dtype: np.dtype) -> int:
    """t: a floating dtype's significand bits, the implicit one included."""
    return round(-math.log2(float_info(dtype).eps)) + 1


def _whole_range(op: ReduceOp, p: int, dtype: np.dtype) -> tuple[float, float] | None:
    """``(2^t, factor)`` of :func:`_exactly`: the largest whole total the dtype holds
    exactly, and what turns a reach (or a reference) into that total (p for AVG's mean,
    else 1); None for an AVG whose scale 1/p is not exact, which no input makes exact
    (p not a power of two: 1/p rounded in float64 would compare equal to itself), or not
    a normal number of the dtype."""
    top = 2.0 ** _bits(dtype)
    if op is not ReduceOp.AVG:
        return top, 1.0
    exact_scale = p & (p - 1) == 0 and _avg_scale(dtype, p) == 1 / p
    return (top, float(p)) if exact_scale and 1 / p >= float_info(dtype).smallest_normal \
        else None


def _underflow(p: int, eps: float, tiny: float, growth: np.ndarray,
               grown: float) -> np.ndarray:
    """A product's error from gradual underflow: (p - 1) multiplications, each off by up
    to the smallest subnormal step ``eps * tiny``, grown by the factors after it and by
    the roundings (``grown``)."""
    return (p - 1) * (eps * tiny) * grown * growth


def _avg_scale(dtype: np.dtype, p: int) -> float:
    """The 1/p every input of a floating AVG is multiplied by, as the run applies it
    (:meth:`ReduceOp.prepare`: rounded, for narrow dtypes through float32)."""
    return float(ReduceOp.AVG.prepare(np.ones(1, dtype), p)[0])


def _allowed(op: ReduceOp, p: int, dtype: np.dtype, ref: np.ndarray, reach: np.ndarray,
             not_whole: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(limit, overflow)`` per element: how far it may lie from ``ref``, and where it may
    come out infinite or NaN instead. ``reach`` is the magnitudes' sum (their mean for
    AVG) or the product's growth factors; ``not_whole``, how many of each element's
    inputs are not integers: an element that every order computes exactly
    (:func:`_exactly`) must equal ``ref`` (limit 0, no overflow).

    With u the dtype's unit roundoff (eps / 2) and r the reference's (float64's, or the
    dtype's own where wider), q = p - 1 operations round: a sum in any order is off by
    at most ``q u sum|x|`` (Jeannerod and Rump 2013; additions below the smallest normal
    number are exact), the float64 reference by ``q r sum|x|``. AVG first rounds each
    product ``c x`` with c = 1/p in the dtype: off from x / p by ``(u |c| + |c - 1/p|)
    |x|``, plus half a subnormal step where it falls below the smallest normal number.
    A product is off by a factor within ``(1 + u)^q``, plus what underflow adds.
    ``overflow``: where the partial results may pass the dtype's largest finite number
    (the magnitudes, once rounded q times, do); for sums a first sieve, which the signed
    sums narrow where terms cancel (:func:`_reaches`).
    """
    limit, overflow = _rounding(op, p, dtype, ref, reach)
    exact = _exactly(op, p, dtype, reach, not_whole)
    return np.where(exact, 0.0, limit), overflow & ~exact


def _maybe_exact(op: ReduceOp, p: int, dtype: np.dtype, ref: np.ndarray,
                 error: np.ndarray) -> np.ndarray:
    """Elements off their reference that every order might compute exactly
    (:func:`_exactly`): only where the reference is whole (times p for AVG, with its exact
    scale) and within the dtype's whole numbers."""
    whole = _whole_range(op, p, dtype)
    if whole is None:
        return np.zeros(ref.shape, dtype=bool)
    top, factor = whole
    total = ref * factor
    with np.errstate(invalid="ignore"):
        return (error > 0) & (total == np.trunc(total)) & (np.abs(total) <= top)


def _rounding(op: ReduceOp, p: int, dtype: np.dtype, ref: np.ndarray,
              reach: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_allowed` for any inputs: the rounding bound and where overflow is
    possible."""
    eps, tiny, largest = float_info(dtype)
    u, r, q = eps / 2, float(np.finfo(ref.dtype).eps) / 2, p - 1
    growth = _growth(u, q)
    grown = 1 + growth
    slack = 1 + 4 * p * r  # the check's own float64 sums and subtraction
    if op is ReduceOp.PRODUCT:
        limit = (growth + p * r) * slack * np.abs(ref)
        return limit + _underflow(p, eps, tiny, reach, grown), reach * grown > largest
    if op is ReduceOp.AVG:
        # sum |x| = p reach, not formed: near the largest number it would overflow
        c = _avg_scale(dtype, p)
        half_step = p * eps * tiny / 2
        scaled = abs(c) * p * (1 + u) * reach + half_step  # sum |c x|, rounded
        limit = (q * u * scaled + (u * abs(c) + abs(c - 1 / p)) * p * reach + half_step
                 + p * r * reach) * slack
        return limit, scaled * grown > largest
    return q * (u + r) * slack * reach, reach * grown > largest


def _growth(u: float, q: int) -> float:
    """(1 + u)^q - 1, which float64 cannot compute as written where u is its own unit
    roundoff (1 + 2^-53 rounds to 1, and the bound to 0)."""
    return math.expm1(q * math.log1p(u))


def _quick(op: ReduceOp, p: int, dtype: np.dtype, ref_dtype: np.dtype) -> float:
    """A factor k with ``k |reference|`` within every element's limit (:func:`_allowed`;
    ``|sum x| <= sum |x|``): an element that close needs no magnitudes computed."""
    u, r, q = float_info(dtype).eps / 2, float(np.finfo(ref_dtype).eps) / 2, p - 1
    if op is ReduceOp.PRODUCT:
        return _growth(u, q)
    if op is ReduceOp.AVG:
        return q * u * (1 - u) * abs(_avg_scale(dtype, p)) * p / (1 + p * r)
    return q * (u + r)


def _reach(op: ReduceOp) -> Callable[[list[np.ndarray]], Sequence]:
    """What :func:`_allowed` reads of the inputs: growths for PRODUCT, else magnitudes."""
    return _growths if op is ReduceOp.PRODUCT else _Magnitudes


Bound = tuple[np.ndarray, np.ndarray]
"""``(limit, overflow)`` of :func:`_allowed` for one output."""


def _bounds(coll: Collective, inputs: list[np.ndarray], op: ReduceOp, root: int,
            refs: list[np.ndarray | None]) -> list[Bound | None]:
    """Per-output error bounds; ``None`` where the result must be exact (what the command
    line's ``#wrong`` counts against; :func:`compare` applies the same bounds)."""
    if op in (ReduceOp.MIN, ReduceOp.MAX):
        return [None] * len(refs)
    dtype = inputs[0].dtype
    reaches = coll.reference(_reach(op)(inputs), op, root)
    not_whole = coll.reference(_NotWhole(inputs), ReduceOp.SUM, root)
    return [None if r is None or reach is None or whole is None else
            _allowed(op, len(inputs), dtype, r, reach, whole)
            for r, reach, whole in zip(refs, reaches, not_whole)]


_BLOCK = 1 << 16
"""Elements checked at a time where the reference is element-wise: temporaries stay small
and in cache."""
WORKERS = min(8, os.cpu_count() or 1)
"""Threads a large check spreads its blocks and byte comparisons over."""
_PARALLEL_FROM = 4 * _BLOCK
"""Elements per output from which a check uses threads (below, starting them costs more
than they save)."""

_T = TypeVar("_T")
_R = TypeVar("_R")


def _spread(work: Callable[[_T], _R], items: Sequence[_T], elements: int) -> list[_R]:
    """``[work(item) for item in items]``, on :data:`WORKERS` threads where ``elements``
    (per output) make it worth it. An exception (KeyboardInterrupt included) cancels the
    items not started and is raised once the running ones end (one block each)."""
    if WORKERS == 1 or elements < _PARALLEL_FROM or len(items) < 2:
        return [work(item) for item in items]
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(work, item) for item in items]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
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


def _exact(out: np.ndarray, ref: np.ndarray, moved: bool = False) -> tuple[bool, float]:
    """(out equals ref element for element, NaN matching NaN; the largest difference).
    ``moved``: data moved, not reduced, whose zeros keep their sign too (a reduction's
    MIN or MAX of -0.0 and 0.0 may give either)."""
    if ref.dtype == out.dtype and same_bytes(out, ref):
        return True, 0.0
    same = _equal(out, ref, moved)
    wide_out, wide_ref = out.astype(np.float64), ref.astype(np.float64)
    error = np.where(same, 0.0, np.abs(wide_out - wide_ref))
    if out.dtype.kind in "iu" and ref.dtype.kind in "iu":
        # float64 holds integers exactly up to 2^53: past it, the difference in Python's
        # integers (2^62 + 1 for 2^62 had an error of 0)
        past = ~same & ((np.abs(wide_out) > 2.0**53) | (np.abs(wide_ref) > 2.0**53))
        error[past] = [float(abs(int(a) - int(b)))
                       for a, b in zip(out[past].tolist(), ref[past].tolist())]
    return bool(np.all(same)), _largest(error)


def _equal(out: np.ndarray, ref: np.ndarray, moved: bool) -> np.ndarray:
    """Per element, as :func:`_exact` judges it."""
    same = out == ref.astype(out.dtype)
    if is_float(out.dtype):
        if moved:
            same &= np.signbit(out) == np.signbit(ref)
        same |= np.isnan(out) & np.isnan(ref)
    return same


def _verdicts(out: np.ndarray, ref: np.ndarray, limit: np.ndarray, overflow: np.ndarray,
              odd: Callable[[np.ndarray, np.ndarray, np.ndarray],
                            tuple[np.ndarray, np.ndarray]],
              overflows: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
              ) -> np.ndarray:
    """Per element of a rounded reduction: within its limit, or, where the reduction may
    overflow (``overflow`` from the magnitudes), what ``overflows(mask, values, refs)``
    finds an order can give (:func:`_overflows`: not finite, of a sign a partial result
    reaches; in fp8, which saturates, a finite value in the range a saturated order
    reaches). Where the reference itself is not finite (``odd(mask, values, refs)`` tells, for
    those elements, whether every input is finite and whether the value found is one
    another order can give, :func:`_non_finite_cases`): that same value, or one of
    those; anything where every input is finite, as the reference then overflowed in
    float64 itself where the exact value need not (1.5e308 + 1.5e308 - 1.5e308)."""
    error = np.abs(out.astype(ref.dtype) - ref)
    ok = error <= limit
    wide = out.astype(np.float64)
    # fp8 sums and products saturate (ReduceOp.combine): finite values may come of an
    # overflow too
    if out.dtype.name in SATURATING:
        maybe = overflow & ~ok
    else:
        maybe = overflow & ~np.isfinite(out) & ~ok
    if maybe.any():
        ok[maybe] = overflows(maybe, wide[maybe], ref[maybe])
    finite = np.isfinite(ref)
    if not finite.all():
        mask = ~finite
        same = _equal(out[mask].astype(ref.dtype), ref[mask], moved=False)
        if out.dtype.name in SATURATING:   # a combine clamps an infinity: odd() says where
            same &= ~np.isinf(wide[mask])
        if not same.all():
            all_finite, other = odd(mask, wide[mask], ref[mask])
            same |= all_finite | other
        ok[mask] = same
    return ok


def _overflows(coll: Collective, inputs: list[np.ndarray], op: ReduceOp, root: int,
               rank: int, where: np.ndarray | None
               ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """For :func:`_verdicts`: given a mask over the output elements at flat indices
    ``where`` (all, if None), the values found there and their references, whether an
    order of the reduction can give each. SUM and AVG by the signed sums
    (:func:`_signed_parts`): +inf where a partial result can pass the largest number
    upward, -inf downward, NaN (inf - inf) where both can; a PRODUCT (whose factors'
    growth gave the flag) an infinity of its sign, NaN where a partial product can also
    underflow to 0 (0 x inf). fp8 sums and products saturate: no NaN comes of finite
    inputs, and a finite value must lie in the range a saturated order reaches
    (:func:`_saturated_sums`, :func:`_saturated_products`)."""
    saturating = inputs[0].dtype.name in SATURATING
    p = len(inputs)

    def overflows(mask: np.ndarray, values: np.ndarray, refs: np.ndarray) -> np.ndarray:
        chosen = np.flatnonzero(mask) if where is None else where[mask]
        if op is ReduceOp.PRODUCT:
            shrink = _picked(coll, _shrinks, inputs, ReduceOp.PRODUCT, root, rank, chosen)
            if not saturating:   # inf of the product's sign; NaN as inf x 0, where a
                eps, tiny, _ = float_info(inputs[0].dtype)   # partial can reach 0
                return np.where(np.isnan(values), shrink < eps * tiny,
                                np.sign(values) * np.sign(refs) > 0)
            growth = _picked(coll, _growths, inputs, ReduceOp.PRODUCT, root, rank, chosen)
            return _saturated_products(values, refs, growth, shrink, p, inputs[0].dtype)
        positive, negative = _signed_parts(coll, inputs, op, root, rank, chosen)
        if saturating:
            low, high = _saturated_sums(positive, negative, p, inputs[0].dtype)
            return ~np.isnan(values) & (low <= values) & (values <= high)
        up, down = _reaches(positive, negative, p, inputs[0].dtype)
        largest = float_info(inputs[0].dtype).largest
        up, down = up > largest, down > largest
        return np.where(np.isnan(values), up & down, np.where(values > 0, up, down))
    return overflows


def _saturation_growth(p: int, dtype: np.dtype) -> float:
    """gamma_q = (1 + u)^q - 1 for a saturating (fp8) dtype, u its unit roundoff plus
    half precision's, which NCCL adds in before it rounds to fp8 (two roundings), and
    q = p - 1 combines."""
    return _growth(float_info(dtype).eps / 2 + 2.0 ** -11, p - 1)


def _saturated_sums(positive: np.ndarray, negative: np.ndarray, p: int, dtype: np.dtype
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The range a saturating (fp8) sum of terms whose positive ones add up to P and
    negative ones to -N can come out in, in any order. Each computed partial sum is its
    terms times factors within gamma of 1 (Higham 2002, chapter 4), so it lies within
    ``[P (1 - gamma) - N (1 + gamma), P (1 + gamma) - N (1 - gamma)]`` where nothing
    saturates; a partial clamped at the largest number M loses what it had past it, at
    most ``P (1 + gamma) - M`` over the whole reduction (by induction over the combines:
    a clamp at M leaves what a subtree could still lose), which only later negative
    terms bring to light, and a clamp at -M gains at most ``N (1 + gamma) - M``. With
    only positive terms a clamped partial stays at M: the sum is at least
    ``min(M, P (1 - gamma))``; with only negative ones at most ``max(-M, -N (1 -
    gamma))``."""
    gamma = _saturation_growth(p, dtype)
    largest = float_info(dtype).largest
    pad = 4 * p * float(np.finfo(np.float64).eps) * (positive + negative)
    low = np.where(negative > 0,
                   positive * (1 - gamma) - negative * (1 + gamma)
                   - np.maximum(0.0, positive * (1 + gamma) - largest),
                   np.minimum(largest, positive * (1 - gamma)))
    high = np.where(positive > 0,
                    positive * (1 + gamma) - negative * (1 - gamma)
                    + np.maximum(0.0, negative * (1 + gamma) - largest),
                    np.maximum(-largest, -negative * (1 - gamma)))
    return np.maximum(low - pad, -largest), np.minimum(high + pad, largest)


def _saturated_products(values: np.ndarray, refs: np.ndarray, growth: np.ndarray,
                        shrink: np.ndarray, p: int, dtype: np.dtype) -> np.ndarray:
    """Whether a saturating (fp8) product can come out at ``values`` where the exact
    one is ``refs``: of its sign (rounding keeps a product's sign), at most ``|ref| (1 +
    gamma)`` and the largest number M, and at least ``|ref| min(1, M / (B (1 +
    gamma))) / (1 + gamma)``, B the factors above 1 multiplied (``growth``): a clamp at
    M divides a partial product by at most what it had past M, which only the factors
    below 1 multiplied in later bring to light (by induction over the combines, as
    :func:`_saturated_sums`); less the subnormal steps a product below the smallest
    normal number may round by (:func:`_underflow`), where one can: where the factors
    below 1 (``shrink``, multiplied) take a partial product there."""
    eps, tiny, largest = float_info(dtype)
    grown = 1 + _saturation_growth(p, dtype)
    magnitude, found = np.abs(refs), np.abs(values)
    slack = 1 + 4 * p * float(np.finfo(np.float64).eps)
    step = np.where(shrink < tiny * grown, _underflow(p, eps, tiny, growth, grown), 0.0)
    least = magnitude * np.minimum(1.0, largest / (growth * grown)) / grown / slack - step
    most = np.minimum(largest, magnitude * grown * slack + step)
    return (~np.isnan(values) & (found >= least) & (found <= most)
            & (np.sign(values) * np.sign(refs) >= 0))


def _non_finite_cases(coll: Collective, inputs: list[np.ndarray], op: ReduceOp, root: int,
                      rank: int, where: np.ndarray | None, mask: np.ndarray,
                      values: np.ndarray, refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the output elements of rank ``rank`` at flat indices ``where`` (all, if None)
    picked by ``mask``, whose references ``refs`` are not finite, and the ``values``
    found there:
    whether every input is finite, and whether another order can give the value. A
    sum with +inf among its inputs (and no -inf, else the reference is NaN) is +inf in
    every order, or NaN where the finite terms' partial sums can overflow downward
    (-inf first, then inf - inf); -inf likewise. A product: NaN where the finite
    factors can take a partial product to 0 (0 x inf), never the other infinity. In fp8,
    which saturates, an infinite input is clamped at the first combine, and later terms
    may bring the result back down: a sum lies in the range :func:`_saturated_sums`
    gives with it counted as a term past every sum of the others; a product, of the
    reference's sign, between the largest number M and M times the finite factors below
    1, each rounding taken out (as :func:`_saturated_products`); with a 0 too, NaN (0 x
    inf) or 0 (the infinity clamped first), and NaN or 0 where the finite factors can
    take a partial product to 0."""
    chosen = np.flatnonzero(mask) if where is None else where[mask]
    dtype = inputs[0].dtype
    eps, tiny, largest = float_info(dtype)
    saturating = dtype.name in SATURATING

    def reduced(of: Callable[[list[np.ndarray]], list[np.ndarray]],
                how: ReduceOp) -> np.ndarray:
        return np.asarray(_picked(coll, of, inputs, how, root, rank, chosen))

    def some_input(test: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Whether ``test`` holds for some input of each element."""
        return reduced(lambda xs: [test(x).astype(np.float64) for x in xs], ReduceOp.MAX) > 0

    all_finite = reduced(_non_finite, ReduceOp.MAX) == 0
    alone = len(inputs) == 1   # nothing combined: the input itself, an infinity too
    nan_input = some_input(np.isnan)
    if op is ReduceOp.PRODUCT:
        small = reduced(_shrinks, ReduceOp.PRODUCT)
        if saturating:   # |inf x rest| clamps to M, times what the factors below 1 take
            big = reduced(lambda xs: [np.where(np.isfinite(x), np.maximum(np.abs(x), 1.0),
                                               1.0).astype(np.float64) for x in xs],
                          ReduceOp.PRODUCT)
            saturated = 1 + _saturation_growth(len(inputs), dtype)
            slack = 1 + 4 * len(inputs) * float(np.finfo(np.float64).eps)
            least = (largest * small / saturated**2 / slack
                     - _underflow(len(inputs), eps, tiny, big, saturated))
            found = np.abs(values)
            # 0 x inf: NaN, or 0 where the infinity was clamped before the 0 came in
            return all_finite, ((alone & (values == refs))
                                | (~np.isnan(values) & (least <= found) & (found <= largest)
                                 & (np.sign(values) * np.sign(refs) >= 0))
                                | ((values == 0) & ((np.isnan(refs) & ~nan_input)
                                                     | (small < eps * tiny)))
                                | (np.isnan(values) & (small < eps * tiny)))
        # an infinite factor keeps the product infinite and of the reference's sign
        # (which _equal took); NaN comes only of inf x 0, where a partial can reach 0.
        # Where the reference is that NaN (its float64 partials underflowed to 0) and no
        # factor is 0 or NaN, the exact product is infinite, of the factors' signs: an
        # order that meets the infinity first keeps it
        zero = some_input(lambda x: x == 0)
        signs = reduced(lambda xs: [np.sign(x.astype(np.float64)) for x in xs],
                        ReduceOp.PRODUCT)
        exact = np.isnan(refs) & ~nan_input & ~zero & (values == signs * np.inf)
        return all_finite, (np.isnan(values) & (small < eps * tiny)) | exact
    if saturating:   # an infinity counts as more than every other term can take back
        past = (2 + (1 + _saturation_growth(len(inputs), dtype)) * len(inputs)) * largest
        positive, negative = _signed_parts(coll, inputs, op, root, rank, chosen,
                                           infinite=past)
        low, high = _saturated_sums(positive, negative, len(inputs), dtype)
        return all_finite, ((alone & (values == refs))
                            | (~np.isnan(values) & (low <= values) & (values <= high)))
    positive, negative = _signed_parts(coll, inputs, op, root, rank, chosen)
    up, down = _reaches(positive, negative, len(inputs), dtype)
    other = np.where(refs > 0, down > largest, up > largest)
    # Where the reference is NaN though no input is and the infinite ones share a sign,
    # its float64 partials overflowed into the other infinity (M + M - inf): the exact
    # sum is that sign's infinity, which an order that meets the infinity first gives
    above, below = some_input(lambda x: x == np.inf), some_input(lambda x: x == -np.inf)
    exact = (np.isnan(refs) & ~nan_input & (above != below)
             & (values == np.where(above, np.inf, -np.inf)))
    return all_finite, (np.isnan(values) & other) | exact


def _signed_parts(coll: Collective, inputs: list[np.ndarray], op: ReduceOp, root: int,
                  rank: int, chosen: np.ndarray, infinite: float = 0.0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """For rank ``rank``'s output elements at flat indices ``chosen`` of a SUM or AVG:
    P and N, the sums of the positive terms and of the negative ones' magnitudes, in
    float64; an infinite input counts as ``infinite`` (0: left out), NaN as nothing.
    AVG's terms are ``c x`` rounded: at most ``|c| (1 + u) |x|`` plus half a subnormal
    step each."""
    dtype = inputs[0].dtype
    p = len(inputs)
    eps, tiny, _ = float_info(dtype)

    def part(sign: float) -> np.ndarray:
        def terms(xs: list[np.ndarray]) -> list[np.ndarray]:
            out = []
            for x in xs:
                signed = sign * x.astype(np.float64)
                out.append(np.where(np.isfinite(signed), np.maximum(signed, 0.0),
                                    np.where(signed > 0, infinite, 0.0)))
            return out
        return np.asarray(_picked(coll, terms, inputs, ReduceOp.SUM, root, rank, chosen))

    positive, negative = part(1.0), part(-1.0)
    if op is ReduceOp.AVG:
        c, half_step = abs(_avg_scale(dtype, p)), p * eps * tiny / 2
        scale = c * (1 + eps / 2)   # no terms of a sign: nothing to scale or round
        positive = np.where(positive > 0, scale * positive + half_step, 0.0)
        negative = np.where(negative > 0, scale * negative + half_step, 0.0)
    return positive, negative


def _reaches(positive: np.ndarray, negative: np.ndarray, p: int, dtype: np.dtype
             ) -> tuple[np.ndarray, np.ndarray]:
    """How far up and down a partial sum of terms whose positive ones add up to P and
    negative ones to -N can reach in some order (an overflow where past the dtype's
    largest finite number): a partial sum adds a subset of the terms, so it lies
    between -N and P, and rounds by at most ``q u (P + N)`` (:func:`_allowed`): it
    reaches ``P + q u (P + N)`` up and ``N + q u (P + N)`` down; where terms cancel
    (60000 - 60000 in float16) that stays below the largest number even where
    ``P + N`` does not, and no order overflows."""
    u, q = float_info(dtype).eps / 2, p - 1
    ref_eps = float(np.finfo(np.float64).eps)
    rounding = q * u * (positive + negative)
    safety = 1 + 4 * p * ref_eps
    return (positive + rounding) * safety, (negative + rounding) * safety


def wrong_elements(coll: Collective, inputs: list[np.ndarray], outputs: list, op: ReduceOp,
                   root: int) -> int:
    """How many elements of the outputs :func:`compare` finds wrong: by the rounding
    bound, or exactly; an output of the wrong type, dtype or shape counts every element
    it should have had."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _wrong_elements(coll, inputs, outputs, op, root)


def _wrong_elements(coll: Collective, inputs: list[np.ndarray], outputs: list, op: ReduceOp,
                    root: int) -> int:
    refs = coll.reference(inputs, op, root)
    rounded = coll.reduces and is_float(inputs[0].dtype) and op not in (ReduceOp.MIN,
                                                                          ReduceOp.MAX)
    bounds = _bounds(coll, inputs, op, root, refs) if rounded else [None] * len(refs)
    wrong = 0
    for rank, (out, ref, bound) in enumerate(zip(outputs, refs, bounds)):
        if ref is None:
            continue
        if not isinstance(out, np.ndarray) or out.shape != ref.shape or \
                out.dtype != inputs[0].dtype:
            wrong += ref.size
        elif bound is None:
            wrong += int(np.count_nonzero(~_equal(out, ref, moved=not coll.reduces)))
        else:
            wrong += int(np.count_nonzero(~_verdicts(
                out, ref, *bound,
                functools.partial(_non_finite_cases, coll, inputs, op, root, rank, None),
                _overflows(coll, inputs, op, root, rank, None))))
    return wrong


def _largest(error: np.ndarray) -> float:
    """The largest element of a non-empty array, NaN counting as infinite."""
    worst = float(error.max())
    return math.inf if worst != worst else worst


def _bounded(coll: Collective, inputs: list[np.ndarray], out: np.ndarray, ref: np.ndarray,
             op: ReduceOp, root: int, rank: int) -> tuple[bool, float]:
    """Compare rank ``rank``'s floating-point reduction with its reference under the
    rounding bound (:func:`_verdicts`)."""
    p = len(inputs)
    scale = _quick(op, p, inputs[0].dtype, ref.dtype)
    # |out - ref|, |ref| and the bound computed in place: each pass reuses its array.
    error = out.astype(ref.dtype)
    np.subtract(error, ref, out=error)
    np.abs(error, out=error)
    worst = _largest(error)
    # Every difference finite implies every reference element finite.
    all_finite = worst < math.inf or bool(np.isfinite(ref).all())
    if not all_finite:
        finite = np.isfinite(ref)
        exact = _equal(out.astype(ref.dtype), ref, moved=False)
        if p > 1 and inputs[0].dtype.name in SATURATING:   # combines clamp infinities
            exact &= ~np.isinf(out)
        error = np.where(finite, error, np.where(exact, 0.0, np.inf))
        worst = _largest(error)
    # A lower bound of the bound (for sums |sum x| <= sum |x|; the offset left out): an
    # element that misses it gets the full bound below.
    bound = np.abs(ref)
    bound *= scale
    within = error <= bound
    # ... unless every order may compute the element exactly (its bound is then 0), as
    # only a whole reference can tell (a whole multiple of 1/p for AVG)
    within &= ~_maybe_exact(op, p, inputs[0].dtype, ref, error)
    if not all_finite:
        within = np.where(finite, within, exact)
    if within.all():
        return True, worst
    where = np.flatnonzero(~within)
    reach = _picked(coll, _reach(op), inputs, op, root, rank, where)
    not_whole = _picked(coll, _NotWhole, inputs, ReduceOp.SUM, root, rank, where)
    picked = ref.reshape(-1)[where]
    limit, overflow = _allowed(op, p, inputs[0].dtype, picked, reach, not_whole)
    return bool(np.all(_verdicts(out.reshape(-1)[where], picked, limit, overflow,
                                 functools.partial(_non_finite_cases, coll, inputs, op, root,
                                                   rank, where),
                                 _overflows(coll, inputs, op, root, rank, where)))), worst


def _non_finite(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """1.0 where an input is infinite or NaN, else 0.0 (reduced by MAX: whether any input
    of an output element is)."""
    return [(~np.isfinite(x)).astype(np.float64) for x in inputs]


def _picked(coll: Collective, of: Callable[[list[np.ndarray]], Sequence],
            inputs: list[np.ndarray], op: ReduceOp, root: int, rank: int,
            where: np.ndarray) -> np.ndarray:
    """Rank ``rank``'s reference over ``of(inputs)`` (magnitudes, growths) at the flat
    indices ``where`` of its output; element-wise collectives compute only those."""
    if coll.name in _ELEMENTWISE:
        picked = coll.reference(of([x[where] for x in inputs]), op, root)[rank]
    else:
        full = coll.reference(of(inputs), op, root)[rank]
        picked = None if full is None else full.reshape(-1)[where]
    assert picked is not None
    return picked


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
            same, error = _exact(out, ref, moved=not coll.reduces)
        ok, worst = ok and same, max(worst, error)
    return ok, worst


def compare(coll: Collective, inputs: list[np.ndarray], outputs: list, op: ReduceOp,
            root: int) -> tuple[bool, float]:
    """Return (every checked output matches, largest absolute error); the error is
    infinite where an output is not an array of the expected dtype and length (there is
    nothing to compare it with element by element)."""
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
        at = next((rank for rank, out in enumerate(checked) if out is not None), None)
        if at is not None:
            first = checked[at]
            assert first is not None
            differs = _spread(lambda out: out is not None and not same_bytes(out, first),
                              checked, first.size)
            checked = [out if rank == at or different else None
                       for rank, (out, different) in enumerate(zip(checked, differs))]
    unreadable = math.inf if not ok else 0.0
    if coll.name not in _ELEMENTWISE:
        same, worst = _compare_arrays(coll, inputs, checked, op, root)
        return ok and same, max(worst, unreadable)

    def block(start: int) -> tuple[bool, float]:
        piece = slice(start, start + _BLOCK)
        with np.errstate(invalid="ignore", over="ignore"):  # per thread
            return _compare_arrays(coll, [x[piece] for x in inputs],
                                   [None if o is None else o[piece] for o in checked],
                                   op, root)

    verdicts = _spread(block, range(0, count, _BLOCK), count)
    return (ok and all(same for same, _ in verdicts),
            max(max((error for _, error in verdicts), default=0.0), unreadable))
