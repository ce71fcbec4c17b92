"""The progress bar of long jobs (sweeps, comparisons, calibrations): tqdm's, on standard
error, shown when asked for or, by default, when standard error is a terminal."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from simcoll.errors import InvalidInputError

__all__ = ["check_progress", "progress_bar"]


def check_progress(progress: Any) -> None:
    """Refuse a ``progress`` that is not True, False or None.

    Raises:
        InvalidInputError: naming the value and what is accepted.
    """
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise InvalidInputError(f"progress={progress!r} is not accepted; use True, False or "
                                f"None (on when stderr is a terminal)")


def shown(progress: bool | None) -> bool:
    """Whether the bar shows: ``progress``, or where it is None, whether standard error
    is a terminal."""
    if progress is not None:
        return bool(progress)
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(progress: bool | None, *, total: int | None, desc: str, unit: str,
                 initial: int = 0, postfix: dict[str, Any] | None = None) -> Any:
    """A tqdm bar on standard error (disabled unless :func:`shown`); use it as a context
    manager."""
    from tqdm import tqdm  # type: ignore[import-untyped]  # imported late: import simcoll stays light

    return tqdm(total=total, initial=initial, unit=unit, desc=desc,
                disable=not shown(progress), file=sys.stderr, postfix=postfix)
