"""The sizes of the v-collectives (all_gatherv, reduce_scatterv, all_to_allv), checked.

A v-collective's shape is ``splits``: p element counts, or a p x p matrix of them for
all_to_allv (what each collective means by them: :mod:`simcoll.collectives`). Users give
it as ``splits=`` in elements beside ``data=`` (all_gatherv reads it from the arrays'
lengths), or as ``nbytes=`` in bytes (data-free mode); cost-model queries take the same
bytes. Every function here refuses a bad value with an ``InvalidInputError`` naming it and
what is accepted, and returns plain Python ints (splits) or an int64 array (bytes).
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcoll.checks import largest_input, shown
from simcoll.collectives import Collective, Splits
from simcoll.errors import InvalidInputError
from simcoll.units import parse_size

__all__ = ["V_COLLECTIVES", "what_it_takes", "check_splits", "check_nbytes",
           "splits_of_arrays", "refuse_sizes_of_even", "as_splits", "abbreviated",
           "first_partial", "whole_number"]

V_COLLECTIVES = ("all_gatherv", "reduce_scatterv", "all_to_allv")


def what_it_takes(coll: Collective, unit: str) -> str:
    """The shape ``coll`` takes, in words (``unit``: "elements" or "bytes")."""
    assert coll.uneven is not None
    if coll.uneven.matrix:
        return (f"a p x p matrix of {unit} (row i: what rank i sends to ranks 0..p-1), "
                f"non-negative whole numbers")
    what = ("each rank's input" if coll.name == "all_gatherv"
            else "each rank's output block (the input is their sum)")
    return f"a sequence of p non-negative whole numbers, {what} in {unit}"


def abbreviated(value: Any) -> str:
    """``value`` (sizes, splits, a matrix) for an error message, as a list whose long
    rows are cut to their first entries (``reprlib``), so a message stays short at any p."""
    if isinstance(value, np.ndarray) and value.ndim:
        value = value.tolist()
    return reprlib.repr(list(value) if isinstance(value, tuple) else value)


def _is_sequence(value: Any) -> bool:
    """A list, tuple or array of at least one dimension (a 0-d array is one number)."""
    if isinstance(value, np.ndarray):
        return value.ndim > 0
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


_ENTRY_LIMIT = 2**62
"""Entries at or above this are refused before they reach an int64 array (the counters'
own bound, checked later on whole inputs, is lower still)."""


def whole_number(value: Any) -> int | None:
    """``value`` as an int if it is a non-negative whole number (an int, a float such as
    16.0, a Fraction of denominator 1, numpy's, or a 0-d array of one), else None."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 and value >= 0 else None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer,
                                                                     float, np.floating)):
        return None
    if isinstance(value, (float, np.floating)) and not (math.isfinite(value)
                                                        and float(value).is_integer()):
        return None
    return int(value) if value >= 0 else None


def _whole_array(value: Any, shape: tuple[int, ...]) -> NDArray[np.int64] | None:
    """A plain numpy array of ``shape`` whose every entry is a whole number in 0..2^62,
    as int64, checked at once (a p x p matrix is a million entries at p = 1024); None
    for anything else, which :func:`_counts` checks entry by entry, naming the first bad
    one."""
    if type(value) is not np.ndarray or value.shape != shape:   # a masked array, a matrix
        return None
    if value.dtype.kind in "iu":
        fine = (value >= 0) & (value < _ENTRY_LIMIT)
    elif value.dtype.kind == "f":
        value = value.astype(np.float64)   # 2^62 is past float16's range
        with np.errstate(invalid="ignore"):
            fine = np.isfinite(value) & (value >= 0) & (value < _ENTRY_LIMIT) \
                & (value == np.floor(value))
    else:
        return None
    return value.astype(np.int64) if bool(fine.all()) else None


def _counts(value: Any, name: str, p: int, coll: Collective, unit: str) -> NDArray[np.int64]:
    """``value`` as an int64 array of the collective's shape for p ranks."""
    assert coll.uneven is not None
    matrix = coll.uneven.matrix
    whole = _whole_array(value, (p, p) if matrix else (p,))
    if whole is not None:
        return whole
    accepted = what_it_takes(coll, unit)
    if not _is_sequence(value):
        raise InvalidInputError(f"{name}={abbreviated(value)} is not accepted: {coll.name} "
                                f"takes {accepted}, here with p={p}")
    rows = list(value)
    if len(rows) != p:
        raise InvalidInputError(f"{name} has {len(rows)} {'rows' if matrix else 'entries'} "
                                f"but there are {p} ranks; {coll.name} takes {accepted}")
    if matrix:
        for i, row in enumerate(rows):
            if not _is_sequence(row) or len(row) != p:
                raise InvalidInputError(
                    f"{name}[{i}]={abbreviated(row)} is not a row of {p} entries; "
                    f"{coll.name} takes {accepted}")
    flat = [(f"{name}[{i}][{j}]", v) for i, row in enumerate(rows) for j, v in enumerate(row)] \
        if matrix else [(f"{name}[{i}]", v) for i, v in enumerate(rows)]
    out = []
    for where, v in flat:
        if isinstance(v, str) and unit == "bytes":
            try:
                c: int | None = parse_size(v)
            except InvalidInputError as err:
                raise InvalidInputError(f"{where}={v!r} is not accepted: {err}") from None
        else:
            c = whole_number(v)
        if c is None:
            raise InvalidInputError(f"{where}={shown(v)} is not accepted; {coll.name} takes "
                                    f"{accepted}")
        if c >= _ENTRY_LIMIT:
            raise InvalidInputError(
                f"{where}={shown(v)} could overflow the int64 traffic counters; a rank's "
                f"input on {p} ranks must be below {largest_input(p) + 1} bytes")
        out.append(c)
    return np.array(out, dtype=np.int64).reshape((p, p) if matrix else (p,))


def as_splits(counts: NDArray[np.int64]) -> Splits:
    """An int64 array of sizes as splits: a tuple of ints (of tuples for a matrix)."""
    if counts.ndim == 2:
        return tuple(map(tuple, counts.tolist()))
    return tuple(counts.tolist())


def check_splits(coll: Collective, splits: Any, p: int) -> Splits:
    """``splits`` (elements) for ``coll`` on p ranks, as a tuple (of tuples).

    Raises:
        InvalidInputError: ``splits`` for a collective that takes none, a wrong shape, an
            entry that is not a non-negative whole number.
    """
    if coll.uneven is None:
        raise InvalidInputError(f"splits={abbreviated(splits)} is not accepted: {coll.name} "
                                f"takes no splits (only {', '.join(V_COLLECTIVES)} do)")
    return as_splits(_counts(splits, "splits", p, coll, "elements"))


def check_nbytes(coll: Collective, nbytes: Any, p: int,
                 itemsize: int | None = None) -> NDArray[np.int64]:
    """``nbytes`` of a v-collective (bytes per rank or per pair) as an int64 array.

    Raises:
        InvalidInputError: a single size, a wrong shape, an entry that is not a
            non-negative whole number (16 and 16.0 are taken), or (given ``itemsize``)
            not a whole number of elements.
    """
    assert coll.uneven is not None
    counts = _counts(nbytes, "nbytes", p, coll, "bytes")
    partial = None if itemsize is None else first_partial(counts, itemsize)
    if partial is not None:
        raise InvalidInputError(f"nbytes{partial[0]}={partial[1]} is not a multiple of "
                                f"the item size ({itemsize} bytes); every entry must be "
                                f"whole elements")
    return counts


def first_partial(counts: NDArray[np.int64], itemsize: int) -> tuple[str, int] | None:
    """The first entry of ``counts`` that is not a multiple of ``itemsize``, as its index
    (``"[i]"``, ``"[i][j]"``, ``""`` for a single size) and value; None if there is none."""
    remainders = np.asarray(counts) % itemsize
    if not np.any(remainders):
        return None
    where = tuple(int(i) for i in np.argwhere(remainders)[0])
    return "".join(f"[{i}]" for i in where), int(np.asarray(counts)[where])


def refuse_sizes_of_even(coll: Collective, nbytes: Any) -> None:
    """Refuse a sequence ``nbytes`` for a collective that takes one size."""
    if coll.uneven is None and _is_sequence(nbytes):
        raise InvalidInputError(
            f"nbytes={abbreviated(nbytes)} is not accepted: {coll.name} takes one size (each "
            f"rank's input in bytes, or a size string like '256MiB'); sizes per rank or per "
            f"pair are for {', '.join(V_COLLECTIVES)}")


def splits_of_arrays(coll: Collective, arrays: list[np.ndarray], splits: Any) -> Splits:
    """The splits of a data-mode run: ``splits=`` checked against the arrays' lengths
    (all_gatherv may leave it out: the lengths are its counts).

    Raises:
        InvalidInputError: no splits where they are needed, or splits that do not add up
            to the arrays' lengths.
    """
    assert coll.uneven is not None
    p = len(arrays)
    lengths = [int(x.size) for x in arrays]
    if splits is None:
        if coll.name == "all_gatherv":
            return tuple(lengths)
        raise InvalidInputError(f"{coll.name} with data= needs splits=: "
                                f"{what_it_takes(coll, 'elements')}")
    checked = check_splits(coll, splits, p)
    needed = coll.uneven.inputs(checked)
    for r, (length, need) in enumerate(zip(lengths, needed)):
        if length != need:
            raise InvalidInputError(
                f"data[{r}] has {length} elements but splits={abbreviated(checked)} give "
                f"rank {r} an input of {need}; the splits must add up to each rank's array")
    return checked
