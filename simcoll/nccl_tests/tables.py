"""What a read nccl-tests table is: its result types (:class:`NcclTestsTable` of
:class:`NcclTestsRow` of :class:`Measurement`), the names its columns hold (``PROGRAMS``,
``ITEMSIZE``, ``NO_REDOP``), and :func:`nccl_shape`, the count and size columns of a size
simulated.

Shared with the sibling modules: ``NO_REDOP``, besides the public names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from simcoll import optional
from simcoll.checks import integer
from simcoll.collectives import Collective, collective
from simcoll.errors import InvalidInputError
from simcoll.units import parse_size

__all__ = ["Measurement", "NcclTestsRow", "NcclTestsTable", "nccl_shape", "ITEMSIZE",
           "PROGRAMS", "NO_REDOP"]

PROGRAMS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
            "reduce_scatter": "reduce_scatter", "broadcast": "broadcast",
            "reduce": "reduce", "alltoall": "all_to_all", "gather": "gather",
            "scatter": "scatter", "sendrecv": "sendrecv", "hypercube": "hypercube",
            "alltoallv": "alltoallv"}
"""nccl-tests program stem (``all_reduce`` of ``all_reduce_perf``) -> collective name in
simcoll's vocabulary (``sendrecv``, ``hypercube`` and ``alltoallv``, nccl-tests 2.19's
weighted all-to-all, have no simcoll collective)."""

ITEMSIZE = {"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2,
            "float16": 2, "bfloat16": 2, "bf16": 2, "int32": 4, "uint32": 4, "int": 4,
            "float": 4, "float32": 4, "int64": 8, "uint64": 8, "double": 8, "float64": 8}
"""Bytes per element of the type names nccl-tests (with NCCL 1: ``char``, ``int``) and
numpy print."""

NO_REDOP = (None, "none")
"""A row's redop where its collective reduces nothing (None: no column, or left blank)."""


@dataclass(frozen=True)
class Measurement:
    """One block of a row: nccl-tests' units, us and GB/s (10^9 bytes per second).

    Attributes:
        time_us: 0 or more, finite: ``0.00`` is printed for a row of size 0 (nothing moves:
            nccl-tests and ``simcoll run`` print such rows for sizes under one element
            per rank) and for a time under 0.005 us (``simcoll run`` on links without
            latency).
        wrong: ``#wrong`` (elements that failed the check), or in old versions the
            ``error`` column (largest error); None where the table says ``N/A``.
    """

    time_us: float
    algbw: float
    busbw: float
    wrong: float | None

    @property
    def time(self) -> float:
        """The time in seconds (a division, correctly rounded: 20.00 us is 2e-05 s)."""
        return self.time_us / 1e6


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of a table.

    Attributes:
        size: the size column, bytes (nccl-tests': the larger of a rank's send and
            receive buffers).
        count: elements, as printed.
        redop: ``sum``, ``none`` ... or None when the table has no redop column or the
            row leaves it blank.
        root: the root rank (-1 where the collective has none), or None when the table
            has no root column.
        out_of_place, in_place: the two blocks; None when the table lacks that block.
        line: the row's line number in the text (from 1).
    """

    size: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Measurement | None
    in_place: Measurement | None
    line: int

    def measurement(self, place: str = "out_of_place") -> Measurement:
        """The ``place`` block (``"out_of_place"`` or ``"in_place"``).

        Raises:
            InvalidInputError: an unknown place, or a row without that block.
        """
        if place not in ("out_of_place", "in_place"):
            raise InvalidInputError(f"place {place!r} is not 'out_of_place' or 'in_place'")
        found: Measurement | None = getattr(self, place)
        if found is None:
            raise InvalidInputError(f"the row of size {self.size} (line {self.line}) has "
                                    f"no {place.replace('_', '-')} block")
        return found


def _bound(size: int | str, name: str) -> int:
    try:
        return parse_size(size)
    except ValueError as exc:
        raise InvalidInputError(f"{name}={size!r} is not accepted: {exc}") from None


@dataclass(frozen=True)
class NcclTestsTable:
    """One run of an nccl-tests program, as :func:`~simcoll.nccl_tests.parse` read it.

    Attributes:
        rows: one per size, in printed order.
        collective: simcoll's name (``all_reduce``, ``all_to_all``, ...), from the
            ``Collective test starting`` line, the program named in the text, simcoll's
            own header, or the argument of :func:`~simcoll.nccl_tests.parse`; None if none says.
        nranks: ranks listed under ``# Using devices`` (or simcoll's ``nRanks``); where
            the list is missing or cut short (its ranks do not run 0 .. n - 1), what a
            rank-share collective's rows give (all_gather, reduce_scatter, all_to_all,
            gather, scatter: size / (count x itemsize), where every row agrees), or
            the rank count whose bus bandwidth factor alone fits every row's busbw /
            algbw (2 (n - 1) / n for all_reduce, ...; not broadcast's or reduce's 1);
            else None.
        devices: the device name of each listed rank, in rank order.
        hosts: the host of each listed rank, in rank order.
        settings: the ``# nThread ...`` line as ``{"nThread": 1, "minBytes": 8, ...,
            "step": 2, "step_kind": "factor"}``: each value under its name as printed
            (``"agg iters"``, ``"single_test"``: a name with an underscore whole).
        nccl_version: ``"2.26.2"`` when the text prints it.
        avg_busbw: the ``# Avg bus bandwidth`` footer in GB/s, if present.
        out_of_bounds: the ``# Out of bounds values`` count, if present.
        error_column: True where the blocks end in old versions' ``error`` column (the
            largest error, which is above 0 in a correct run), not in ``#wrong`` (a
            count of wrong elements, 0 in a correct run).
        communicators: how many communicators ran at once (``NCCL_TESTS_SPLIT`` or
            ``NCCL_TESTS_SPLIT_MASK``: the ``Group`` column of ``# Using devices``);
            ``nranks``, ``devices`` and ``hosts`` are then those of the first one, whose
            size nccl-tests' bandwidths count.
        simcoll_run: for a table ``simcoll run`` printed, what it simulated, as its first
            line says (``ring, network flow, params: chunks=4``); None for nccl-tests'.
        cputime: True where the time columns are titled ``cputime`` (nccl-tests ``-C 1``):
            the host's time to launch the operations, not theirs (algbw and busbw still
            come from the elapsed time), which ``compare`` and ``calibrate`` refuse.
    """

    rows: tuple[NcclTestsRow, ...]
    collective: str | None = None
    nranks: int | None = None
    devices: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    nccl_version: str | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    error_column: bool = False
    communicators: int = 1
    simcoll_run: str | None = None
    cputime: bool = False

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[NcclTestsRow]:
        return iter(self.rows)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The size column, bytes."""
        return tuple(r.size for r in self.rows)

    def wrong_rows(self, place: str = "out_of_place") -> tuple[bool, ...]:
        """Per row, whether its ``place`` block has ``#wrong`` above 0: nccl-tests found
        wrong values in what that run computed (never for a table with the old ``error``
        column, whose values are above 0 in correct runs too). A table of ``-d all`` or
        ``-o all`` holds a size once per type or op, each row with its own ``#wrong``.

        Raises:
            InvalidInputError: an unknown place, or a row without that block.
        """
        return tuple(not self.error_column and (r.measurement(place).wrong or 0) > 0
                     for r in self.rows)

    def wrong_sizes(self, place: str = "out_of_place") -> tuple[int, ...]:
        """The sizes of the :meth:`wrong_rows` (a size once per such row).

        Raises:
            InvalidInputError: an unknown place, or a row without that block.
        """
        return tuple(r.size for r, bad in zip(self.rows, self.wrong_rows(place)) if bad)

    def between(self, low: int | str = 0, high: int | str | None = None) -> NcclTestsTable:
        """The same table with only the rows whose size lies in [low, high] (bytes, or
        size strings such as ``"1MiB"``).

        Raises:
            InvalidInputError: a bound that is not a size, or ``low`` above ``high``.
        """
        lo = _bound(low, "low")
        hi = None if high is None else _bound(high, "high")
        if hi is not None and lo > hi:
            raise InvalidInputError(f"between({low!r}, {high!r}): low is above high")
        keep = tuple(r for r in self.rows if r.size >= lo and (hi is None or r.size <= hi))
        return dataclasses.replace(self, rows=keep)

    def to_pandas(self) -> Any:
        """One DataFrame row per size: the head columns, then ``time_us``, ``algbw``,
        ``busbw``, ``wrong`` (out-of-place) and ``in_place_time_us`` ... (in-place).

        Raises:
            ImportError: pandas is missing (``pip install "simcoll[pandas]"``).
        """
        pd = optional.pandas("NcclTestsTable.to_pandas")
        records = []
        for r in self.rows:
            record: dict[str, Any] = {"size": r.size, "count": r.count, "type": r.type,
                                      "redop": r.redop, "root": r.root}
            for prefix, block in (("", r.out_of_place), ("in_place_", r.in_place)):
                if block is not None:
                    record.update({f"{prefix}time_us": block.time_us,
                                   f"{prefix}algbw": block.algbw,
                                   f"{prefix}busbw": block.busbw,
                                   f"{prefix}wrong": block.wrong})
            records.append(record)
        return pd.DataFrame.from_records(records)


_SPLIT = ("reduce_scatter", "all_to_all", "scatter")
"""Collectives whose size column is a rank's input, cut into p blocks."""


def nccl_shape(coll: Collective | str, p: int, size: int, itemsize: int,
               aligned: bool = False) -> tuple[int, int, int]:
    """``(nbytes, count, size)``: simulate's per-rank input bytes, nccl-tests' count and
    size columns, for a requested size in bytes (rounded down to whole elements). With
    ``aligned``, a collective that cuts its buffer into p blocks rounds each block down
    to whole 16 bytes, as nccl-tests does since 2.13.12 (``(count/nranks) &
    ~(16/eltSize - 1)`` in src/all_gather.cu and its siblings; a log read back gives its
    sizes as they ran). ``coll`` a :class:`~simcoll.collectives.Collective` or its name.

    Raises:
        InvalidInputError: an unknown collective, p or itemsize not an integer >= 1, or
            size not an integer >= 0.
    """
    if not isinstance(coll, Collective):
        coll = collective(coll)
    p = integer(p, "p", minimum=1)
    size = integer(size, "size", minimum=0)
    itemsize = integer(itemsize, "itemsize", minimum=1)
    count = size // itemsize
    per = count // p
    if aligned and 16 % itemsize == 0:
        per &= ~(16 // itemsize - 1)
    # all_gather, gather: the output is p blocks (asked at p = 2, so that one rank's
    # block is rounded too, as nccl-tests rounds it)
    if coll.size_factor(2) != 1:
        return per * itemsize, per, per * p * itemsize
    if coll.name in _SPLIT:
        return per * p * itemsize, per, per * p * itemsize
    return count * itemsize, count, count * itemsize
