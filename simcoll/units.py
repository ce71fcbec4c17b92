"""SI units and size parsing.

Every quantity in simcoll is in seconds, bytes or bytes per second. These constants make
inputs readable (``100 * GB`` per second, ``1 * us``) and ``parse_size`` reads sizes the
way nccl-tests and users write them (``"256MiB"``, ``"1G"``, ``"4096"``).
"""

from __future__ import annotations

import decimal
import math
import numbers
import re
from decimal import Decimal
from fractions import Fraction

from simcoll.errors import InvalidInputError

__all__ = ["KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "Gbps", "s", "ms", "us", "ns",
           "parse_size", "exact_number", "significant"]

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
Gbps = 1e9 / 8
"""One gigabit per second, in bytes per second."""

s = 1.0
ms = 1e-3
us = 1e-6
ns = 1e-9

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": KB, "kb": KB, "m": MB, "mb": MB, "g": GB, "gb": GB, "t": TB, "tb": TB,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
}
_SIZE_RE = re.compile(r"^\s*([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?\s*([a-zA-Z]*)\s*$",
                      re.ASCII)
_NOT_FINITE_RE = re.compile(r"^\s*[+-]?(?:inf(?:inity)?|nan)\s*$", re.IGNORECASE)
_MAX_EXPONENT = 40
"""The largest power of ten, up or down, a size string may name (1e40 bytes is beyond
any count)."""
_MAX_DIGITS = 4000
"""The most digits a size's number may have (Python's int() reads at most 4300)."""


def significant(mantissa: str) -> str:
    """``mantissa`` (digits, maybe with a point) without the zeros that do not count:
    leading ones of its whole part, trailing ones of its fraction."""
    whole, point, fraction = mantissa.partition(".")
    fraction = fraction.rstrip("0")
    return (whole.lstrip("0") or "0") + ("." + fraction if point and fraction else "")


def exact_number(mantissa: str, exponent: str | None) -> Fraction | None:
    """``mantissa`` (digits, maybe with a point) times ten to ``exponent``, exactly; None
    where the exponent lies beyond +-:data:`_MAX_EXPONENT` (no count of bytes). Callers
    refuse a :func:`significant` mantissa of more than :data:`_MAX_DIGITS` digits first
    (Python reads at most 4300 into an int)."""
    value = Fraction(significant(mantissa))
    if exponent and value:
        digits = exponent.lstrip("+-").lstrip("0")
        if len(digits) > 2 or int(digits or "0") > _MAX_EXPONENT:
            return None
        power = int(exponent)
        value *= Fraction(10) ** power
    return value


def _names_a_size(unit: str) -> bool:
    """Whether ``unit`` is a size's unit, or one in bits (``Kb``): a size once signed."""
    unit = unit.lower()
    return unit in _SIZE_UNITS or unit.endswith("b") and unit[:-1].rstrip("i") + "b" \
        in _SIZE_UNITS


def parse_size(text: str | int | float) -> int:
    """Return the number of bytes that ``text`` names, exactly.

    Decimal suffixes (K, KB, M, MB, G, GB, T, TB) are powers of 1000, binary ones (KiB,
    MiB, GiB, TiB) powers of 1024; a bare number is bytes, with an exponent if wanted
    (``"1e6"``). Case is ignored but in the final B: a lowercase b is a bit
    (``"100Mb"`` is what a link rate counts in), and is refused rather than read as
    bytes. A number (int, float, numpy's) is bytes: a whole one, -0.0 (and ``"-0"``) as 0.

    Raises:
        InvalidInputError: (a ``ValueError``) the text is not a size, names bits, or names
            a fractional, negative or infinite number of bytes.
    """
    if isinstance(text, numbers.Integral) and not isinstance(text, bool):
        if text < 0:
            raise InvalidInputError(f"size {text} is negative; sizes are >= 0 bytes")
        return int(text)
    if isinstance(text, numbers.Rational) and not isinstance(text, bool):
        exact = Fraction(text.numerator, text.denominator)
        if exact.denominator != 1:
            raise InvalidInputError(f"size {text!r} is not a whole number of bytes")
        if exact < 0:
            raise InvalidInputError(f"size {text!r} is negative; sizes are >= 0 bytes")
        return int(exact)
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        number = float(text)
        if not math.isfinite(number):
            raise InvalidInputError(f"size {text!r} is not a finite number of bytes")
        if not number.is_integer():
            raise InvalidInputError(f"size {text!r} is not a whole number of bytes")
        if number < 0:
            raise InvalidInputError(f"size {text!r} is negative; sizes are >= 0 bytes")
        return int(number)
    match = _SIZE_RE.match(str(text))
    if match is None and _NOT_FINITE_RE.match(str(text)):
        raise InvalidInputError(f"size {text!r} is not a finite number of bytes")
    if match is not None and len(significant(match.group(2))) > _MAX_DIGITS:
        raise InvalidInputError(f"size {str(text)[:20]!r}... has more than {_MAX_DIGITS} "
                                f"significant digits: give a whole number of bytes below "
                                f"10^{_MAX_DIGITS}")
    if match is not None and match.group(1) == "-" and significant(match.group(2)) != "0" \
            and _names_a_size(match.group(4)):
        raise InvalidInputError(f"size {text!r} is negative; sizes are >= 0 bytes")
    if match is not None and match.group(4).endswith("b"):
        number_text = match.group(2) + (f"e{match.group(3)}" if match.group(3) else "")
        prefix = match.group(4)[:-1].rstrip("iI").upper()
        instead = f"{number_text}{prefix}B or {number_text}{prefix}iB" if prefix \
            else f"{number_text}B"
        raise InvalidInputError(f"cannot read size {text!r}: a lowercase b is a bit, and sizes "
                                f"are bytes; write {instead}")
    unit = match.group(4).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise InvalidInputError(
            f"cannot read size {text!r}; write a number with an optional unit "
            f"(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. '256MiB' or '1e6'")
    value = exact_number(match.group(2), match.group(3))
    if value is None:
        raise InvalidInputError(f"size {text!r} has an exponent beyond +-{_MAX_EXPONENT}; "
                                f"sizes are whole numbers of bytes")
    value *= _SIZE_UNITS[unit]
    if value.denominator != 1:
        with decimal.localcontext() as exact:
            # a decimal times powers of 10 and 2: its expansion ends; show all of it
            exact.prec = len(str(value.numerator)) + len(str(value.denominator)) + 2
            shown = (Decimal(value.numerator) / Decimal(value.denominator)).normalize()
        raise InvalidInputError(f"size {text!r} is {shown:f} bytes, not a whole "
                                f"number of bytes")
    return int(value)
