"""Data mode for ``simcoll run -c``: the input arrays, a memory check before any of them
is made, and nccl-tests' ``#wrong``, the number of elements that fail the numpy check."""

from __future__ import annotations

import math

import numpy as np

from simcoll.check import wrong_elements
from simcoll.cli.options import CommandLineError
from simcoll.collectives import Collective
from simcoll.dtypes import float_info, is_float
from simcoll.memory import data_mode_bytes, shortfall
from simcoll.ops import ReduceOp
from simcoll.result import Result

__all__ = ["inputs", "check_memory", "count_wrong"]


def inputs(p: int, count: int, dtype: np.dtype,
           op: ReduceOp = ReduceOp.SUM) -> list[np.ndarray]:
    """One array of ``count`` elements per rank, seeded by the rank, of small random
    integers, as nccl-tests checks with values whose reductions are exact: integers
    (overflow wraps exactly); floats from -k to k with ``p k <= 2^t`` (k at most 8, t the
    dtype's significand bits), so that a sum (an average, for p a power of two) comes out
    exactly in any order and ``#wrong`` counts any difference (:mod:`simcoll.check`:
    a bfloat16 sum of 128 random normal values may be off by half of ``sum |x_i|``, which
    let a lost rank pass); for a product, -1 and 1. Where ``p > 2^t`` (fp8 beyond 8 or
    16 ranks) no whole numbers sum exactly in every order, and the rounding bound
    applies."""
    out = []
    if is_float(dtype):
        top = 2 ** (round(-math.log2(float_info(dtype).eps)) + 1)
        k = max(1, min(8, top // p))
    for rank in range(p):
        rng = np.random.default_rng(rank)
        if not is_float(dtype):
            low = 0 if dtype.kind == "u" else -8
            out.append(rng.integers(low, 8, size=count, dtype=dtype))
        elif op is ReduceOp.PRODUCT:
            out.append(rng.choice(np.array([-1.0, 1.0]), size=count).astype(dtype))
        else:
            out.append(rng.integers(-k, k + 1, size=count).astype(dtype))
    return out


def check_memory(coll: Collective, p: int, count: int, itemsize: int, option: str) -> None:
    """Refuse a data-mode run whose arrays could not fit in this machine's memory (the
    library's rule, :func:`simcoll.memory.data_mode_bytes`, for inputs of ``count``
    elements on ``p`` ranks). The refusal says to lower ``option``, the one that gave
    the size (``-e``, ``--size``).

    Raises:
        CommandLineError: the arrays need more than the physical memory.
    """
    problem = shortfall(data_mode_bytes(coll, p, count, itemsize))
    if problem:
        raise CommandLineError(
            f"-c moves real arrays: {coll.name} on {p} ranks {problem}; lower {option} or "
            f"run without -c (data-free)")


def count_wrong(coll: Collective, data: list[np.ndarray], result: Result, op: ReduceOp,
                root: int) -> int:
    """Elements of the checked outputs outside the bounds ``simcoll.check`` allows.

    0 when the run was found correct, at least 1 when it was not; an output of the wrong
    shape or dtype counts every element it should have had.
    """
    if result.correct:
        return 0
    with np.errstate(invalid="ignore", over="ignore"):
        return max(wrong_elements(coll, data, result.outputs or [], op, root), 1)
