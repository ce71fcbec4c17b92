"""The tests' own reference for every collective, written apart from simcoll's.

simcoll checks its outputs against ``simcoll.collectives`` (``Result.correct``); these
tests must not lean on that code alone. Here integers are combined in exact Python
arithmetic and wrapped into the dtype afterwards (what modular arithmetic in the dtype
gives, in any order), integer AVG truncates toward zero as C does, and floats are combined
in float64 (``longdouble`` for wider inputs), with the rounding allowance of a p-term sum
in the dtype's own precision (ml_dtypes' bfloat16 and fp8 included, with ml_dtypes.finfo).
"""

from __future__ import annotations

import math

import numpy as np

import simcoll as sc

ML_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def is_float(dtype: np.dtype) -> bool:
    """numpy's floats and the ml_dtypes floats (whose numpy kind is 'V')."""
    return dtype.kind == "f" or dtype.name in ML_FLOATS


def float_info(dtype: np.dtype):
    """finfo of a float dtype; ml_dtypes' own for its types, which np.finfo refuses."""
    if dtype.kind == "f":
        return np.finfo(dtype)
    import ml_dtypes

    return ml_dtypes.finfo(dtype)


def _wrap(value: int, dtype: np.dtype) -> int:
    info = np.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return (value - int(info.min)) % span + int(info.min)


def _combine_ints(columns: list[list[int]], op: sc.ReduceOp, dtype: np.dtype) -> np.ndarray:
    out = []
    for values in zip(*columns):
        if op in (sc.ReduceOp.SUM, sc.ReduceOp.AVG):
            v = _wrap(sum(values), dtype)
            if op is sc.ReduceOp.AVG:
                v = abs(v) // len(values) * (1 if v >= 0 else -1)
        elif op is sc.ReduceOp.PRODUCT:
            v = _wrap(math.prod(values), dtype)
        else:
            v = min(values) if op is sc.ReduceOp.MIN else max(values)
        out.append(v)
    return np.array(out, dtype=dtype)


def reduced(inputs: list[np.ndarray], op: sc.ReduceOp) -> np.ndarray:
    """The element-wise reduction of all inputs (exact for integers, float64 for floats)."""
    dtype = inputs[0].dtype
    if dtype.kind in "iu":
        return _combine_ints([x.tolist() for x in inputs], op, dtype)
    stack = np.stack(inputs).astype(np.result_type(dtype, np.float64))
    if op is sc.ReduceOp.SUM:
        return stack.sum(axis=0)
    if op is sc.ReduceOp.AVG:
        return stack.sum(axis=0) / len(inputs)
    if op is sc.ReduceOp.PRODUCT:
        return stack.prod(axis=0)
    # NCCL's fminf / fmaxf: a NaN loses to any number; NaN only where every input is
    missing = np.isnan(stack)
    if op is sc.ReduceOp.MIN:
        out = np.where(missing, np.inf, stack).min(axis=0)
    else:
        out = np.where(missing, -np.inf, stack).max(axis=0)
    return np.where(missing.all(axis=0), np.nan, out)


def _blocks(x: np.ndarray, p: int) -> list[np.ndarray]:
    """x cut into p consecutive blocks, the first ``len(x) % p`` one element longer."""
    q, r = divmod(len(x), p)
    edges = [0]
    for i in range(p):
        edges.append(edges[-1] + q + (i < r))
    return [x[edges[i]:edges[i + 1]] for i in range(p)]


def _cut(x: np.ndarray, counts) -> list[np.ndarray]:
    """x cut into consecutive blocks of ``counts`` elements (which must use all of x)."""
    out, start = [], 0
    for c in counts:
        out.append(x[start:start + int(c)])
        start += int(c)
    assert start == len(x), (list(counts), len(x))
    return out


def expected_outputs(collective: str, inputs: list[np.ndarray], op: sc.ReduceOp,
                     root: int = 0, splits=None) -> list[np.ndarray | None]:
    """Every rank's expected output (None where the collective leaves it unspecified);
    ``splits`` are a v-collective's sizes in elements."""
    p = len(inputs)
    if collective == "all_gatherv":
        return [np.concatenate(inputs)] * p
    if collective == "reduce_scatterv":
        return _cut(reduced(inputs, op), splits)
    if collective == "all_to_allv":
        blocks = [_cut(x, row) for x, row in zip(inputs, splits)]
        return [np.concatenate([blocks[i][j] for i in range(p)]) for j in range(p)]
    if collective == "all_reduce":
        return [reduced(inputs, op)] * p
    if collective == "reduce_scatter":
        return _blocks(reduced(inputs, op), p)
    if collective == "reduce":
        return [reduced(inputs, op) if r == root else None for r in range(p)]
    if collective == "all_gather":
        return [np.concatenate(inputs)] * p
    if collective == "gather":
        return [np.concatenate(inputs) if r == root else None for r in range(p)]
    if collective == "broadcast":
        return [inputs[root]] * p
    if collective == "scatter":
        return _blocks(inputs[root], p)
    if collective == "all_to_all":
        blocks = [_blocks(x, p) for x in inputs]
        return [np.concatenate([blocks[j][r] for j in range(p)]) for r in range(p)]
    if collective == "barrier":
        return [None] * p
    raise ValueError(collective)


def assert_outputs_match(res: sc.Result, inputs: list[np.ndarray], op: sc.ReduceOp,
                         root: int = 0) -> None:
    """Every rank's output has the input dtype, the expected length and the expected
    values: exact for integers and data movement, within rounding for float reductions."""
    coll = sc.COLLECTIVES[res.collective]
    p = len(inputs)
    dtype = inputs[0].dtype
    splits = res.splits
    magnitudes = expected_outputs(res.collective, [np.abs(x.astype(np.float64))
                                                   for x in inputs], sc.ReduceOp.SUM, root,
                                  splits) \
        if coll.reduces and is_float(dtype) else None
    # strict: an output list shorter than p would have left the missing ranks unchecked
    for rank, (out, ref) in enumerate(zip(res.outputs, expected_outputs(
            res.collective, inputs, op, root, splits), strict=True)):
        if ref is None:
            continue
        assert out.dtype == dtype and out.shape == ref.shape, (rank, out.dtype, out.shape)
        if magnitudes is None or op in (sc.ReduceOp.MIN, sc.ReduceOp.MAX):
            np.testing.assert_array_equal(out, ref.astype(dtype), err_msg=f"rank {rank}")
        else:
            info = float_info(dtype)
            eps = float(info.eps)
            scale = np.abs(ref) if op is sc.ReduceOp.PRODUCT else magnitudes[rank]
            if op is sc.ReduceOp.AVG:
                scale = scale / p
            # p - 1 additions in any order, plus the rounding of the dtype's own result
            allowed = (p + 1) * eps * scale + float(info.smallest_normal)
            error = np.abs(out.astype(ref.dtype) - ref)
            assert np.all(error <= allowed), (rank, float(error.max()))
