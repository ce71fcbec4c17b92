"""SI units and size parsing.

Every quantity in simcoll is in seconds, bytes or bytes per second. These constants make
inputs readable (``100 * GB`` per second, ``1 * us``) and ``parse_size`` reads sizes the
way nccl-tests and users write them (``"256MiB"``, ``"1G"``, ``"4096"``).
"""

from __future__ import annotations

import math
import re

from simcoll.errors import InvalidInputError

__all__ = ["KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "Gbps", "s", "ms", "us", "ns",
           "parse_size"]

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
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Return the number of bytes that ``text`` names.

    Decimal suffixes (K, KB, M, MB, G, GB, T, TB) are powers of 1000, binary ones (KiB,
    MiB, GiB, TiB) powers of 1024; a bare number is bytes. Case is ignored but in the
    final B: a lowercase b is a bit (``"100Mb"`` is what a link rate counts in), and
    is refused rather than read as bytes.

    Raises:
        InvalidInputError: (a ``ValueError``) the text is not a size, names bits, or names
            a fractional or infinite number of bytes.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise InvalidInputError(f"size {text} is negative; sizes are >= 0 bytes")
        return text
    match = _SIZE_RE.match(str(text))
    if match is not None and match.group(2).endswith("b"):
        number, prefix = match.group(1), match.group(2)[:-1].rstrip("iI").upper()
        instead = f"{number}{prefix}B or {number}{prefix}iB" if prefix else f"{number}B"
        raise InvalidInputError(f"cannot read size {text!r}: a lowercase b is a bit, and sizes "
                         f"are bytes; write {instead}")
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise InvalidInputError(
            f"cannot read size {text!r}; write a number with an optional unit "
            f"(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. '256MiB'")
    value = float(match.group(1)) * _SIZE_UNITS[unit]
    if not math.isfinite(value):
        raise InvalidInputError(f"size {text!r} is too large to count in bytes")
    if value != int(value):
        raise InvalidInputError(f"size {text!r} is {value} bytes, not a whole number of bytes")
    return int(value)
