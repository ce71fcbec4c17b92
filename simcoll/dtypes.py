"""Element types: numpy's integers and floats, and the low-precision floats of ml_dtypes.

numpy has no bfloat16 or fp8; ml_dtypes (the package JAX uses) adds them as numpy dtypes
whose arrays take numpy's ufuncs, so reductions run on them like on any float. They are
optional (``pip install "simcoll[ml_dtypes]"``): a name such as ``"bfloat16"`` imports the
package only when asked for, and a missing package gets an error naming the extra.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from simcoll.errors import InvalidInputError

__all__ = ["LOW_PRECISION", "as_dtype", "is_float", "float_info"]

LOW_PRECISION = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
"""The ml_dtypes floats simcoll accepts, by the names numpy gives their dtypes."""


class FloatInfo(NamedTuple):
    """What the rounding bounds need of a floating dtype."""

    eps: float
    smallest_normal: float
    largest: float


def _ml_dtypes(name: str) -> Any:
    try:
        import ml_dtypes
    except ImportError:
        raise InvalidInputError(f"dtype {name!r} needs the ml_dtypes package: pip install "
                                f"\"simcoll[ml_dtypes]\"") from None
    return ml_dtypes


def _lookup(dtype: Any, where: str) -> np.dtype:
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError):   # numpy parses 'i4,,' as Python: SyntaxError
        if isinstance(dtype, str) and dtype in LOW_PRECISION:
            return np.dtype(getattr(_ml_dtypes(dtype), dtype))
        hint = meant_name(dtype)
        raise InvalidInputError(f"{where}={dtype!r} is not a numpy dtype{hint}; use an integer "
                                f"or floating dtype such as 'float32', or one of "
                                f"{', '.join(LOW_PRECISION)}") from None


_SHORT_NAMES = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
                "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
                "fp8_e5m2": "float8_e5m2", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
                "bfloat": "bfloat16"}
"""Short names of element types that numpy does not know, and the names it does (not
``f8``: numpy's code for float64)."""


def meant_name(name: Any) -> str:
    """`` (did you mean 'bfloat16'?)`` for a short name numpy does not know (bf16, fp8,
    ...), else an empty string."""
    meant = _SHORT_NAMES.get(name.strip().lower()) if isinstance(name, str) else None
    return f" (did you mean {meant!r}?)" if meant else ""


def is_float(dtype: np.dtype) -> bool:
    """True for numpy's floating dtypes and the ml_dtypes floats simcoll accepts."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name in LOW_PRECISION)


def as_dtype(dtype: Any, where: str = "dtype") -> np.dtype:
    """The element type ``dtype`` names, if simcoll can reduce it.

    Args:
        dtype: a numpy dtype or type, an ml_dtypes type (``ml_dtypes.bfloat16``), or a
            name (``"float32"``, ``"bfloat16"``, ``"float8_e4m3fn"``, ...).
        where: how the value is named in error messages.

    Returns:
        The numpy dtype, in this machine's byte order.

    Raises:
        InvalidInputError: None, not a dtype, not an integer or floating type, a foreign
            byte order, or an ml_dtypes name without ml_dtypes installed.
    """
    if dtype is None:
        raise InvalidInputError(f"{where}=None is not accepted; name an integer or floating "
                                f"dtype such as 'float32'")
    dt = _lookup(dtype, where)
    if dt.kind not in "iu" and not is_float(dt):
        raise InvalidInputError(f"{where} {dt} is not accepted; use one of numpy's integer "
                                f"or floating dtypes (int8 to uint64, float16 to float64 or "
                                f"longdouble) or ml_dtypes' {', '.join(LOW_PRECISION)}")
    if not dt.isnative:
        raise InvalidInputError(
            f"{where} {dt.str} is not in this machine's byte order; convert it first "
            f"(x.astype(x.dtype.newbyteorder('=')))")
    return dt


def float_info(dtype: np.dtype) -> FloatInfo:
    """Machine epsilon, smallest normal and largest finite number of a floating dtype,
    from ``np.finfo`` or, for the ml_dtypes floats (which ``np.finfo`` does not know),
    ``ml_dtypes.finfo``."""
    info = np.finfo(dtype) if dtype.kind == "f" else _ml_dtypes(dtype.name).finfo(dtype)
    return FloatInfo(float(info.eps), float(info.smallest_normal), float(info.max))
