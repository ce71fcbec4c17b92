"""Reduction operators, named and behaving as in ``torch.distributed.ReduceOp``."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from simcoll.buffers import sealed
from simcoll.dtypes import float_info, is_float

__all__ = ["ReduceOp", "SATURATING"]

_UFUNCS = {"SUM": np.add, "PRODUCT": np.multiply, "MIN": np.fmin, "MAX": np.fmax,
           "AVG": np.add}

SATURATING = ("float8_e4m3fn", "float8_e5m2")
"""The element types NCCL's sums and products saturate (:meth:`ReduceOp.combine`)."""


class ReduceOp(enum.Enum):
    """An element-wise reduction. ``op(a, b)`` combines two buffers.

    ``AVG`` combines like ``SUM``, as NCCL's ``ncclAvg`` does (``hostToDevRedOp`` in
    src/enqueue.cc): a floating dtype's inputs are each multiplied by ``1/p`` rounded to
    the dtype before they are summed (``ncclDevPreMulSum``: no partial sum can overflow
    where the mean does not), an integer dtype's sum is divided by ``p`` once at the end
    (``ncclDevSumPostDiv``, truncating toward zero, as C does).

    fp8 sums and products are computed as NCCL computes them (``FuncSum`` /
    ``FuncProd`` of ``__nv_fp8_e4m3`` and ``__nv_fp8_e5m2``): in half precision, then
    converted back saturating (the fp8 constructors' ``__NV_SATFINITE``), so a result past
    the largest finite number, infinity included, is that number (448 in e4m3, 57,344 in
    e5m2), and NaN stays NaN.

    ``MIN`` and ``MAX`` pass over NaN, as NCCL's ``fminf`` / ``fmaxf`` (``__hmin`` /
    ``__hmax`` for 16-bit and 8-bit floats; ``FuncMinMax`` in src/device/reduce_kernel.h)
    do: an element is NaN only where every input is (numpy's ``fmin`` / ``fmax``).
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"

    @classmethod
    def _missing_(cls, value: object) -> ReduceOp:
        """``ReduceOp("SUM")`` and ``ReduceOp("prod")`` as :meth:`parse` reads them (an
        unknown name is an InvalidInputError, a ValueError too)."""
        return cls.parse(value)  # type: ignore[arg-type]

    @property
    def ufunc(self) -> np.ufunc:
        """The numpy ufunc that combines two buffers for this op."""
        return _UFUNCS[self.name]

    def __call__(self, a: Any, b: Any) -> Any:
        return self.combine(a, b)

    def combine(self, a: Any, b: Any, out: np.ndarray | None = None) -> Any:
        """``a`` combined with ``b`` element-wise (into ``out`` if given) in their dtype;
        fp8 sums and products in half precision, saturated back to fp8 (see the class)."""
        ufunc = _UFUNCS[self.name]
        dtype = getattr(a, "dtype", None)
        if dtype is None or dtype.name not in SATURATING or ufunc in (np.fmin, np.fmax):
            return ufunc(a, b) if out is None else ufunc(a, b, out=out)
        largest = float_info(dtype).largest
        with np.errstate(over="ignore", invalid="ignore"):  # past half's range: inf
            wide = ufunc(np.asarray(a, np.float16), np.asarray(b, np.float16))
        wide = np.clip(wide, -largest, largest)   # NaN stays NaN
        if out is None:
            return wide.astype(dtype)
        out[...] = wide
        return out

    @property
    def combining(self) -> ReduceOp:
        """The op that combines buffers: SUM for AVG (whose scaling comes before, see
        :meth:`prepare`, or whose division after, see :meth:`finish`), the op itself
        otherwise. An algorithm built from other collectives passes this to them, so that
        AVG is scaled or divided once, by whoever starts the collective."""
        return ReduceOp.SUM if self is ReduceOp.AVG else self

    def prepare(self, x: Any, p: int) -> Any:
        """A rank's input as the reduction combines it: for ``AVG`` of a floating dtype,
        ``x`` times ``1/p`` rounded to the dtype, as NCCL's ``ncclDevPreMulSum`` applies
        it where it first reads each input element (the scalar is ``float(1.0 / p)``
        converted to the dtype, ``1.0 / p`` itself for float64; the product rounded once
        to the dtype), read-only for good (:func:`simcoll.buffers.sealed`); ``x`` itself
        otherwise (other ops, integers, sizes-only buffers).
        """
        if self is not ReduceOp.AVG or not isinstance(x, np.ndarray) or not is_float(x.dtype):
            return x
        if x.dtype.itemsize >= 8:  # float64 (and longdouble): 1 / p in the dtype itself
            scalar = x.dtype.type(1) / x.dtype.type(p)
        else:  # NCCL's float(1.0 / nRanks), converted to the dtype
            scalar = x.dtype.type(np.float32(1.0 / p))
        return sealed(x * scalar)

    def finish(self, total: np.ndarray, p: int) -> np.ndarray:
        """A rank's output from its combined buffer: ``AVG`` of an integer dtype divides
        by ``p``; other ops, and ``AVG`` of a floating dtype (whose inputs
        :meth:`prepare` scaled), return ``total`` unchanged.

        Integer averages truncate toward zero, as C's division does: the magnitude is
        divided in uint64, where every integer's magnitude fits (``abs`` of the dtype's
        minimum does not fit the dtype itself), then the sign is put back.
        """
        if self is not ReduceOp.AVG or is_float(total.dtype):
            return total
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
            hint = " (did you mean AVG?)" if name.strip() in ("MEAN", "AVERAGE") else ""
            raise InvalidInputError(f"unknown reduction op {op!r}{hint}; use one of "
                                    f"{names}") from None
