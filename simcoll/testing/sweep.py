"""``sweep``: parametrize a pytest test over the product of several axes."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["sweep"]


def _label(value: Any) -> str:
    return getattr(value, "__name__", None) or getattr(value, "name", None) or str(value)


def sweep(**axes: Iterable[Any]) -> Callable:
    """Run the decorated test once per combination of the axes' values.

    ``@sweep(p=[2, 4, 8], nbytes=[1 << 10, 1 << 20])`` is
    ``pytest.mark.parametrize`` over the 6 pairs, with ids like ``p=4-nbytes=1024``.
    Decorators stack (the product again). pytest is imported only here, so simcoll itself
    never needs it.

    Raises:
        ValueError: no axis, or an axis without values.
    """
    import pytest

    if not axes:
        raise ValueError("sweep needs at least one axis, e.g. sweep(p=[2, 4, 8])")
    names = list(axes)
    values = {name: list(vals) for name, vals in axes.items()}
    empty = [name for name, vals in values.items() if not vals]
    if empty:
        raise ValueError(f"sweep axis {empty[0]!r} has no values")
    combos = list(itertools.product(*values.values()))
    ids = ["-".join(f"{n}={_label(v)}" for n, v in zip(names, combo)) for combo in combos]
    return pytest.mark.parametrize(names, combos, ids=ids)
