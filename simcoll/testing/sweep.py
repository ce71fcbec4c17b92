"""``sweep``: parametrize a pytest test over the product of several axes."""

from __future__ import annotations

import itertools
import re
import reprlib
from collections.abc import Callable, Iterable, Mapping
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
    """An axis's values as a list: any iterable but a string, a set or a mapping, with at
    least one value."""
    shown = f"sweep axis {name}={reprlib.repr(values)} is not accepted"
    if isinstance(values, (str, bytes)):
        raise InvalidInputError(f"{shown}: a string is not a list of values; write "
                                f"{name}=[{values!r}] for one value")
    if isinstance(values, (set, frozenset)):
        raise InvalidInputError(f"{shown}: a set's order may differ between processes "
                                f"(pytest-xdist's workers would collect other tests); give "
                                f"a list, e.g. sorted(...)")
    if isinstance(values, Mapping):
        raise InvalidInputError(f"{shown}: a mapping iterates over its keys; give list(d) "
                                f"or list(d.values())")
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
    Each axis is an iterable of values other than a string, a set or a mapping
    (``p=[5]``, not ``p=5``, ``p="248"`` or ``p={2, 4}``; a dict's ``.keys()`` is
    taken). A value may be a
    ``pytest.param`` of one value: its marks go to every combination it is in, its ``id``
    stands for the value in their ids. Decorators
    stack (the product again). pytest is imported only here, so simcoll itself never
    needs it.

    Raises:
        InvalidInputError: (a ``ValueError``, when the test module is imported) no axis,
            an axis that is a string, a set, a mapping or not iterable, an axis without
            values, or a ``pytest.param`` of other than one value.
    """
    import pytest

    if not axes:
        raise InvalidInputError("sweep needs at least one axis, e.g. sweep(p=[2, 4, 8])")
    names = list(axes)
    values = [[_unwrapped(name, v) for v in _values(name, vals)]
              for name, vals in axes.items()]
    combos: list[Any] = []
    ids = []
    for combo in itertools.product(*values):
        ids.append("-".join(f"{n}={_label(v) if shown is None else shown}"
                            for n, (v, _, shown) in zip(names, combo)))
        given = tuple(v for v, _, _ in combo)
        marks = [mark for _, marked, _ in combo for mark in marked]
        combos.append(pytest.param(*given, marks=marks) if marks else given)
    return pytest.mark.parametrize(names, combos, ids=ids)


def _unwrapped(name: str, value: Any) -> tuple[Any, tuple[Any, ...], str | None]:
    """An axis's value, its marks and its id: a ``pytest.param``'s one value, marks and
    id, or the value itself, none and None."""
    import pytest

    if not isinstance(value, type(pytest.param(None))):
        return value, (), None
    if len(value.values) != 1:
        raise InvalidInputError(f"sweep axis {name} holds {value!r:.100}; a pytest.param "
                                f"in an axis holds one value")
    return value.values[0], tuple(value.marks), \
        value.id if isinstance(value.id, str) else None
