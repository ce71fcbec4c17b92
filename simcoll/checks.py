"""Checks for numbers given by users: one rule everywhere a count or a quantity is taken.

Counts accept Python and numpy integers and return a plain ``int``; quantities accept
Python and numpy reals and return a ``float``. Booleans and strings are refused for both
(``True`` is not a bandwidth, ``"1e9"`` is not a count), as are NaN and, unless allowed,
infinity; sizes in bytes also take size strings (``"25MiB"``), as ``simulate``'s
``nbytes=`` does. Every refusal names the value and what would be accepted, with the error class
of the caller's layer (``TopologyError`` for machines, ``InvalidInputError`` for runs).
"""

from __future__ import annotations

import math
import sys
from typing import Any, TypeAlias

import numpy as np

from simcoll.errors import InvalidInputError, SimCollError
from simcoll.units import parse_size

__all__ = ["Count", "flag", "integer", "real", "size", "text", "shown", "huge", "as_float",
           "COUNTER_LIMIT", "largest_input", "octal_looking"]

Count: TypeAlias = int | np.integer[Any]
"""A count a user gives (ranks, nodes, GPUs): Python's int or numpy's, as :func:`integer`
takes it (``np.arange`` gives numpy's)."""

_DIGITS_SHOWN = 30
"""The most digits of an integer a message shows whole; longer ones are abbreviated."""
_TEXT_SHOWN = 100
"""The most characters of a value a message shows; longer ones are cut."""


def shown(value: Any) -> str:
    """``repr(value)`` for a message, an integer of more than 30 digits abbreviated to
    its first and last digits and its length (``13582985...5376 (332 digits)``), in a
    tuple or list too, and anything whose text runs past :data:`_TEXT_SHOWN` characters
    cut there (``Model(name='Llama 7B', layers=(Layer(... (a Model)``): a model or a
    long list given where a number goes would otherwise fill the message."""
    text = _in_full(value)
    if len(text) <= _TEXT_SHOWN:
        return text
    what = f"a {type(value).__name__}" + (f" of {len(value)} items"
                                           if type(value) in (tuple, list) else "")
    return f"{text[:_TEXT_SHOWN - 20]}... ({what})"


def _in_full(value: Any) -> str:
    """:func:`shown` without the cut."""
    if type(value) in (tuple, list):
        inner = ", ".join(map(shown, value))
        if type(value) is list:
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if type(value) is int:
        digits = str(abs(value))
        if len(digits) > _DIGITS_SHOWN:
            sign = "-" if value < 0 else ""
            return f"{sign}{digits[:8]}...{digits[-4:]} ({len(digits)} digits)"
    if isinstance(value, np.generic) and value.ndim == 0 and value.dtype.kind in "biu":
        return repr(value.item())  # 9, not np.int64(9)
    if isinstance(value, np.floating):
        return str(value)  # nan, 1.1 at the value's own precision (not np.float32(1.1))
    return repr(value)


def _subject(name: str, value: Any) -> str:
    """``chunks=0`` for a parameter name, ``latency of link ('a', 'b') = -1.0`` otherwise."""
    return f"{name}={shown(value)}" if name.isidentifier() else f"{name} = {shown(value)}"


COUNTER_LIMIT = 2**63
"""Traffic counters are int64 (``Result.bytes_sent``, ...)."""


def largest_input(p: int) -> int:
    """The largest input, in bytes, :func:`simcoll.inputs.check_counters` accepts on
    ``p`` ranks: the largest n with 2 p^2 n < 2^63."""
    return (COUNTER_LIMIT - 1) // (2 * p * p)


FLOAT_OVERFLOW = 2**1024 - 2**970
"""The least integer ``float()`` cannot hold: half an ulp above the largest float,
(2 - 2^-52) x 2^1023, it rounds to 2^1024 (an OverflowError)."""


def octal_looking(text: str) -> bool:
    """Whether ``text`` is a whole number with a leading zero (``010``, ``-07``; not ``0``
    or ``00``), which C's strtol reads as octal and Python's int() as decimal."""
    digits = text.strip().lstrip("+-")
    return digits[:1] == "0" and digits[1:].isdigit() and bool(digits.strip("0"))


def huge(value: Any) -> bool:
    """Whether ``value`` is a Python integer beyond float's range (no float holds it)."""
    return type(value) is int and abs(value) >= FLOAT_OVERFLOW


def as_float(value: Any) -> float:
    """``float(value)``, a Python integer past float's range as an infinity of its sign
    (as infinite as 1e400 is), where ``float`` raises OverflowError."""
    return float(value) if not huge(value) else math.inf if value > 0 else -math.inf


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def flag(value: Any, name: str, *, error: type[SimCollError] = InvalidInputError) -> bool:
    """``value`` as a ``bool``: ``True`` or ``False`` (numpy's too) and nothing else, since
    ``"no"``, ``"False"`` or 1 would pass an ``if`` as a choice the caller did not write.

    Raises:
        ``error``: anything but a bool.
    """
    if not _is_bool(value):
        raise error(f"{_subject(name, value)} is not accepted; use True or False")
    return bool(value)


def integer(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None,
            error: type[SimCollError] = InvalidInputError, what: str = "") -> int:
    """``value`` as an ``int`` within ``[minimum, maximum]``.

    Raises:
        ``error``: not an integer (bools and strings included), or out of range.
    """
    given = value
    ok = not _is_bool(value) and isinstance(value, (int, np.integer))
    if ok:
        value = int(value)
        ok = (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    if not ok:
        bounds = " ".join(filter(None, [
            f">= {minimum}" if minimum is not None else "",
            "and" if minimum is not None and maximum is not None else "",
            f"<= {maximum}" if maximum is not None else ""]))
        raise error(f"{_subject(name, given)} is not accepted; use an integer"
                    f"{' ' + bounds if bounds else ''}{' (' + what + ')' if what else ''}")
    return value


def size(value: Any, name: str, *, minimum: int = 0,
         error: type[SimCollError] = InvalidInputError, what: str = "bytes") -> int:
    """``value``, a size in bytes, as an ``int`` >= ``minimum``: an integer (numpy's too),
    a whole float, or a size string read exactly (``"25MiB"``, ``"1e6"``; see
    :func:`simcoll.units.parse_size`).

    Raises:
        ``error``: anything else (bools included), or a size below ``minimum``.
    """
    if isinstance(value, str):
        try:
            value = parse_size(value)
        except InvalidInputError as exc:
            raise error(f"{name}={value!r} is not accepted: {exc}") from None
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) \
            and float(value).is_integer():
        value = int(value)
    return integer(value, name, minimum=minimum, error=error,
                   what=f"{what}, or a size such as '25MiB'")


def real(value: Any, name: str, *, minimum: float = 0.0, strict: bool = False,
         allow_inf: bool = False, error: type[SimCollError] = InvalidInputError,
         what: str = "") -> float:
    """``value`` as a ``float`` >= ``minimum`` (> with ``strict``).

    A strictly positive quantity must also be a normal float (>= 2.2e-308): its inverse,
    which times are made of, would otherwise overflow to infinity.

    Raises:
        ``error``: not a real number (bools and strings included), NaN, infinite where
            not allowed, or out of range.
    """
    given = value
    ok = not _is_bool(value) and isinstance(value, (int, float, np.integer, np.floating))
    if ok:
        # An integer beyond float's range is as infinite as 1e400.
        value = as_float(value)
        ok = (not math.isnan(value) and (allow_inf or not math.isinf(value))
              and (value > minimum if strict else value >= minimum)
              and not (strict and minimum == 0 and value < sys.float_info.min))
    if not ok:
        bound = f"{'>' if strict else '>='} {minimum:g}"
        if strict and minimum == 0 and isinstance(value, float) and 0 < value < 1:
            bound = f">= {sys.float_info.min:.3g} (smaller ones overflow when inverted)"
        finite = " or inf" if allow_inf else ", finite"
        raise error(f"{_subject(name, given)} is not accepted; use a number {bound}{finite}"
                    f"{' (' + what + ')' if what else ''}")
    return value


def text(value: Any, name: str, *, error: type[SimCollError] = InvalidInputError,
         what: str = "") -> str:
    """``value`` as a non-empty ``str`` (a label such as a link's kind).

    Raises:
        ``error``: anything but a non-empty string (None, a number, a list, ``""``).
    """
    if not isinstance(value, str) or not value:
        raise error(f"{_subject(name, value)} is not accepted; use a non-empty string"
                    f"{' (' + what + ')' if what else ''}")
    return value
