"""Data mode for ``simcoll run -c``: the input arrays, a memory check before any of them
is made, and nccl-tests' ``#wrong``, the number of elements that fail the numpy check."""

from __future__ import annotations

import numpy as np

from simcoll.check import wrong_elements
from simcoll.cli.options import CommandLineError
from simcoll.collectives import Collective
from simcoll.dtypes import is_float
from simcoll.memory import data_mode_bytes, shortfall
from simcoll.ops import ReduceOp
from simcoll.result import Result

__all__ = ["inputs", "check_memory", "count_wrong"]


def inputs(p: int, count: int, dtype: np.dtype) -> list[np.ndarray]:
    """One array of ``count`` elements per rank, seeded by the rank: standard normal
    floats, or small integers (so products stay readable; overflow would wrap exactly)."""
    out = []
    for rank in range(p):
        rng = np.random.default_rng(rank)
        if is_float(dtype):
            out.append(rng.standard_normal(count).astype(dtype))
        else:
            low = 0 if dtype.kind == "u" else -8
            out.append(rng.integers(low, 8, size=count, dtype=dtype))
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
