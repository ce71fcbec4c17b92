"""Reduction operators, named and behaving as in ``torch.distributed.ReduceOp``."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from simcoll.dtypes import is_float

__all__ = ["ReduceOp"]

_UFUNCS = {"SUM": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
           "AVG": np.add}


class ReduceOp(enum.Enum):
    """An element-wise reduction. ``op(a, b)`` combines two buffers.

    ``AVG`` combines like ``SUM``; the collective divides the final sum by the number of
    ranks once, as NCCL's ``ncclAvg`` does (integer dtypes truncate toward zero, as C does).
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"

    @property
    def ufunc(self) -> np.ufunc:
        """The numpy ufunc that combines two buffers for this op."""
        return _UFUNCS[self.name]

    def __call__(self, a: Any, b: Any) -> Any:
        return _UFUNCS[self.name](a, b)

    @property
    def combining(self) -> ReduceOp:
        """The op that combines buffers: SUM for AVG (whose division comes once, at the
        end), the op itself otherwise. An algorithm built from other collectives passes
        this to them, so that AVG is divided once, by whoever returns the final output."""
        return ReduceOp.SUM if self is ReduceOp.AVG else self

    def finish(self, total: np.ndarray, p: int) -> np.ndarray:
        """A rank's output from its combined buffer: ``AVG`` divides by ``p``; other ops
        return ``total`` unchanged.

        Integer averages truncate toward zero, as C's division does: the magnitude is
        divided in uint64, where every integer's magnitude fits (``abs`` of the dtype's
        minimum does not fit the dtype itself), then the sign is put back.
        """
        if self is not ReduceOp.AVG:
            return total
        if total.dtype.kind == "f":
            return total / total.dtype.type(p)
        if is_float(total.dtype):
            # bfloat16 and fp8 divide in float32: p itself may not fit fp8 (e4m3 stops at 448).
            return (total.astype(np.float32) / np.float32(p)).astype(total.dtype)
        if total.dtype.kind == "u":
            return (total.astype(np.uint64) // np.uint64(p)).astype(total.dtype)
        wide = total.astype(np.int64)
        magnitude = np.where(wide < 0, -(wide.view(np.uint64)), wide.view(np.uint64))
        quotient = (magnitude // np.uint64(p)).view(np.int64)
        return np.where(wide < 0, -quotient, quotient).astype(total.dtype)

    @classmethod
    def parse(cls, op: ReduceOp | str) -> ReduceOp:
        """Accept a ReduceOp or its name in any case (``"sum"``, ``"SUM"``, ...), and
        ``"prod"``, NCCL's and MPI's name for the product."""
        from simcoll.errors import InvalidInputError

        if isinstance(op, ReduceOp):
            return op
        name = str(op).upper()
        try:
            return cls["PRODUCT" if name == "PROD" else name]
        except KeyError:
            names = ", ".join(m.name for m in cls)
            raise InvalidInputError(f"unknown reduction op {op!r}; use one of {names}") from None
