"""Read and write link rates and times with their units: ``100GB/s``, ``400Gbps``, ``1us``.

Topology specs (``switch:bandwidth=100GB/s``) and topology files share these readers. A
plain number is SI (bytes per second, seconds). Rates: ``B/s`` or ``Bps`` for bytes and
``b/s`` or ``bps`` for bits, after an optional prefix ``K``, ``M``, ``G``, ``T`` (powers
of 1000) or ``Ki``, ``Mi``, ``Gi``, ``Ti`` (powers of 1024), case ignored; so ``GB/s`` is
10^9 bytes/s and ``Gb/s`` is 10^9 bits/s. Times: ``s``, ``ms``, ``us`` (or ``µs``, with
the micro sign or the Greek mu), ``ns``. A time below the least positive float
(``1e-400s``) reads as 0, a valid latency; a rate there is refused, as 0 bytes/s is.
"""

from __future__ import annotations

import math
import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any

from simcoll.checks import FLOAT_OVERFLOW

__all__ = ["parse_rate", "parse_time", "parse_number", "format_rate", "format_time"]

_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?i:inf(?:inity)?))"
"""A decimal number, or infinity spelt as ``float`` reads it (``inf``, ``INF``,
``Infinity``: any case), as JSON's ``Infinity`` is read too."""
_QUANTITY_RE = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµμ/]*)\s*$", re.ASCII)
_DECIMAL_PREFIXES = {"": 0, "k": 3, "m": 6, "g": 9, "t": 12}
"""Powers of ten: applied to the number as written (``Decimal.scaleb``), so ``0.1us`` is
the float nearest 1e-7, as the literal ``0.1e-6`` is; a float times or over a power of
ten would round twice."""
_BINARY_PREFIXES = {"ki": 10, "mi": 20, "gi": 30, "ti": 40}
"""Powers of two, applied to the number as written too (then rounded once)."""
_RATE_UNIT_RE = re.compile(r"^([kKmMgGtT][iI]?)?(B/s|Bps|b/s|bps)$")
_TIME_EXPONENTS = {"": 0, "s": 0, "ms": -3, "us": -6, "µs": -6, "μs": -6, "ns": -9}
_RATE_HELP = "a rate such as 100GB/s, 400Gbps or 25e9 (bytes/s)"
_TIME_HELP = "a time such as 1us, 500ns, 2ms or 1e-6 (seconds)"


def _split(text: Any, what: str) -> tuple[Decimal | float, str]:
    """The number (exact, as a Decimal, where written as text) and the unit."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not {what}")
    if isinstance(text, (int, float)):
        # An integer beyond float's range is as infinite as 1e400 written out.
        if type(text) is int and abs(text) >= FLOAT_OVERFLOW:
            return (math.inf if text > 0 else -math.inf), ""
        return float(text), ""
    match = _QUANTITY_RE.match(str(text))
    if match is None:
        raise ValueError(f"{text!r} is not {what}")
    try:
        return Decimal(match.group(1)), match.group(2)
    except InvalidOperation:
        # an exponent of 19 digits or more, past decimal's MAX_EMAX (18 digits): as far
        # past float's range, read as float reads it (0 or infinity), but a number not 0
        # below the least float is refused by its caller as 1e-400 is
        value = float(match.group(1))
        if value == 0 and any(d in "123456789" for d in match.group(1).lower().split("e")[0]):
            return Decimal((0, (1,), MIN_EMIN)), match.group(2)   # not 0, rounds to 0
        return value, match.group(2)


_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])
"""Decimal arithmetic without rounding or traps, whatever the caller's decimal context:
a number as written is scaled exactly, then rounded once by ``float`` (to infinity past
its range, as ``float("1e400")`` is)."""


def _times_ten_to(value: Decimal | float, exponent: int) -> float:
    """``value`` x 10^exponent, rounded once to a float."""
    return float(value) if exponent == 0 else float(Decimal(value).scaleb(exponent, _EXACT))


def parse_rate(text: Any) -> float:
    """Bytes per second named by ``text`` (a number is bytes/s already).

    Raises:
        ValueError: ``text`` is not a rate, or one that is not 0 but rounds to 0 (a
            float holds none so small); the message shows accepted forms.
    """
    value, unit = _split(text, _RATE_HELP)
    match = _RATE_UNIT_RE.match(unit) if unit else None
    if unit and match is None:
        raise ValueError(f"{text!r} has unit {unit!r}, not a rate unit; write {_RATE_HELP}")
    prefix = (match.group(1) or "").lower() if match else ""
    exact = Decimal(value)
    if match and match.group(2) in ("b/s", "bps"):
        exact = _EXACT.multiply(exact, Decimal("0.125"))
    if prefix in _BINARY_PREFIXES:
        rate = float(_EXACT.multiply(exact, _EXACT.power(2, _BINARY_PREFIXES[prefix])))
    else:
        rate = _times_ten_to(exact, _DECIMAL_PREFIXES[prefix])
    if rate == 0 and exact:
        raise ValueError(f"{text!r} rounds to 0 bytes/s, below the least positive float "
                         f"(about 4.9e-324); write {_RATE_HELP}")
    return rate


def parse_time(text: Any) -> float:
    """Seconds named by ``text`` (a number is seconds already).

    Raises:
        ValueError: ``text`` is not a time; the message shows accepted forms.
    """
    value, unit = _split(text, _TIME_HELP)
    if unit not in _TIME_EXPONENTS:
        raise ValueError(f"{text!r} has unit {unit!r}, not a time unit; write {_TIME_HELP}")
    return _times_ten_to(value, _TIME_EXPONENTS[unit])


def parse_number(text: Any) -> float:
    """A plain number (``inf`` allowed), as written in a spec or file.

    Raises:
        ValueError: ``text`` is not a number.
    """
    value, unit = _split(text, "a number")
    if unit:
        raise ValueError(f"{text!r} is not a plain number (unexpected unit {unit!r})")
    return float(value)


def _scaled(value: float, units: list[tuple[float, str]], digits: int) -> str:
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    for scale, name in units:
        if abs(value) >= scale * (1 - 1e-12):
            return f"{value / scale:.{digits}g}{name}"
    scale, name = units[-1]
    return f"{value / scale:.{digits}g}{name}"


def format_rate(value: float, digits: int = 12) -> str:
    """``1e11`` -> ``"100GB/s"``: the largest SI prefix that keeps the number >= 1, to
    ``digits`` significant digits."""
    return _scaled(value, [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"),
                           (1.0, "B/s")], digits)


def format_time(value: float, digits: int = 12) -> str:
    """``1e-6`` -> ``"1us"``: the largest unit that keeps the number >= 1, to ``digits``
    significant digits."""
    return _scaled(value, [(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")], digits)
