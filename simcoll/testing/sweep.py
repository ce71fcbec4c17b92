"""``sweep``: parametrize a pytest test over the product of several axes."""

from __future__ import annotations

import itertools
import re
import reprlib
from collections.abc import Callable, Iterable
from typing import Any

from simcoll.errors import InvalidInputError

__all__ = ["sweep"]


def _label(value: Any) -> str:
    """A value as its test id shows it: its name where it has one, else its text, with
    any memory address (``<object at 0x7f...>``) cut out, so that ids are the same in
    every process (pytest-xdist's collection, ``--lf`` and ``--deselect`` compare them)."""
    names = [getattr(value, attribute, None) for attribute in ("__name__", "name")]
    text = next((n for n in names if isinstance(n, str) and n), str(value))
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def _values(name: str, values: Any) -> list[Any]:
    """An axis's values as a list: any iterable but a string, with at least one value."""
    shown = f"sweep axis {name}={reprlib.repr(values)} is not accepted"
    if isinstance(values, (str, bytes)):
        raise InvalidInputError(f"{shown}: a string is not a list of values; write "
                                f"{name}=[{values!r}] for one value")
    try:
        listed = list(values)
    except TypeError:
        raise InvalidInputError(f"{shown}: give a list of values, e.g. "
                                f"{name}=[{values!r}]") from None
    if not listed:
        raise InvalidInputError(f"sweep axis {name!r} has no values")
    return listed


def sweep(**axes: Iterable[Any]) -> Callable:
    """Run the decorated test once per combination of the axes' values.

    ``@sweep(p=[2, 4, 8], nbytes=[1 << 10, 1 << 20])`` is
    ``pytest.mark.parametrize`` over the 6 pairs, with ids like ``p=4-nbytes=1024``.
    Each axis is an iterable of values other than a string (``p=[5]``, not ``p=5`` or
    ``p="248"``). Decorators stack (the product again). pytest is imported only here, so
    simcoll itself never needs it.

    Raises:
        InvalidInputError: (a ``ValueError``, when the test module is imported) no axis,
            an axis that is a string or not iterable, or an axis without values.
    """
    import pytest

    if not axes:
        raise InvalidInputError("sweep needs at least one axis, e.g. sweep(p=[2, 4, 8])")
    names = list(axes)
    values = [_values(name, vals) for name, vals in axes.items()]
    combos = list(itertools.product(*values))
    ids = ["-".join(f"{n}={_label(v)}" for n, v in zip(names, combo)) for combo in combos]
    return pytest.mark.parametrize(names, combos, ids=ids)
