"""Read the tables that nccl-tests' ``*_perf`` programs print (and ``simcoll run`` prints).

``parse(text)`` turns one run's output into an :class:`NcclTestsTable`: the header (the
program, the ``# nThread ...`` settings, the devices of every rank, the NCCL version when
printed), one :class:`NcclTestsRow` per size with its out-of-place and in-place
:class:`Measurement`, and the footer (``# Out of bounds values``, ``# Avg bus
bandwidth``). ``parse_all(text)`` reads a log holding several runs, ``parse(text, run=K)``
the K-th of them, and ``count_runs(text)`` counts them.

The layout follows ``src/util.cu`` of NVIDIA/nccl-tests 2.19.6: ``size count type redop
root``, then per block ``time algbw busbw #wrong`` (out-of-place, then in-place), and with
``-S 1`` a timestamp at the end of the row, which is left out. Older versions print no
``root`` column (and no ``redop`` for collectives without one) and an ``error`` column
(the largest error, e.g. ``2e-07``) instead of ``#wrong``; 2.10 to 2.13.3 leave the redop
of the collectives without one blank (as hypercube still does), read as None. nccl-tests
1.x titles its columns ``bytes N type op ... res``, prints its settings and footer without
their ``#`` and its times in milliseconds, which are read in microseconds like the
others'. The column titles say which layout a table has, and without titles the number
of fields does. ``simcoll run`` prints one block, titled ``simulated``, read as the
out-of-place one.

Every row is cross-checked: its size must be its count of elements of its type (times
the ranks for the collectives whose count is one rank's share, where the header lists
them), and its algbw its size over its time, to the rounding of the printed numbers. A
collective prints ``none`` for redop where it reduces nothing and a reduction (``sum``
...) where it does: a row that says otherwise is an error naming its line. Where no
header comes between two runs (``grep -v '^#'``), a row whose redop changes between
``none`` and a reduction, or (without column titles) whose size falls below the previous
one's of the same type, redop and root, starts another run.

Lines that MPI launchers prefix (``[0] ``, ``[1,0]<stdout>:``, ``srun -l``'s `` 0: ``)
are read without their prefix, and a byte-order mark is dropped; log lines between the
rows (``NCCL INFO ...``) are skipped. A line that starts like a result row but is not
one (a row cut short included) is an error naming its line number. A run that failed
(nccl-tests' ``Test NCCL failure``, ``Test CUDA failure`` or ``.. host pid N: Test
failure`` lines) is an error that quotes the line and says after which size the table
stops; the other runs of the log can still be read with ``parse(text, run=K)``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from simcoll.checks import integer
from simcoll.collectives import Collective
from simcoll.errors import InvalidInputError
from simcoll.units import parse_size

__all__ = ["Measurement", "NcclTestsRow", "NcclTestsTable", "parse", "parse_all", "count_runs",
           "nccl_shape", "ITEMSIZE", "PROGRAMS"]

PROGRAMS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
            "reduce_scatter": "reduce_scatter", "broadcast": "broadcast",
            "reduce": "reduce", "alltoall": "all_to_all", "gather": "gather",
            "scatter": "scatter", "sendrecv": "sendrecv", "hypercube": "hypercube"}
"""nccl-tests program stem (``all_reduce`` of ``all_reduce_perf``) -> collective name in
simcoll's vocabulary (``sendrecv`` and ``hypercube`` have no simcoll collective)."""

ITEMSIZE = {"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2,
            "float16": 2, "bfloat16": 2, "bf16": 2, "int32": 4, "uint32": 4, "int": 4,
            "float": 4, "float32": 4, "int64": 8, "uint64": 8, "double": 8, "float64": 8}
"""Bytes per element of the type names nccl-tests (with NCCL 1: ``char``, ``int``) and
numpy print."""

_PREFIX = re.compile(r"\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?[ \t]?")
_SRUN = re.compile(r"^\s*\d+: ")
_ROW_START = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)\s+(?:\S+\s+){5}\S")
_CUT_ROW = re.compile(r"^\s*\d+\s+\d+\s+(?:" + "|".join(ITEMSIZE) + r")(?:\s|$)")
"""The size, count and type a result row starts with (where it has too few fields)."""
_FAILURE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b")
_FOOTERS = ("Out of bounds values", "Avg bus bandwidth")
_PROGRAM = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_SIMCOLL = re.compile(r"^simcoll \S+: (\w+) / ")
_DEVICE = re.compile(r"^Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+"
                     r"device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$")
_SETTINGS = re.compile(r"^(?:nThread|nGpus\(perProc\))\s")
_SETTING = re.compile(r"([A-Za-z][A-Za-z ()]*?)\s*:?\s+(-?\d+)(?:\((\w+)\))?")
_VERSION_LINE = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_LIBRARY_CODE = re.compile(r"nccl-library=(\d+)")
_DATE, _CLOCK = re.compile(r"\d{4}-\d\d-\d\d"), re.compile(r"\d\d:\d\d:\d\d")
_BLOCK = ("time", "algbw", "busbw", "wrong")
_HEAD = ("size", "count", "type", "redop", "root")
_ALIASES = {"cputime": "time", "#wrong": "wrong", "error": "wrong",
            "bytes": "size", "N": "count", "op": "redop", "res": "wrong"}   # 1.x: the last 4
_EXTRA = {"i_min", "i_max", "i_p99", "i_cv%"}
_NO_REDOP = (None, "none")
"""A row's redop where its collective reduces nothing (None: no column, or left blank)."""
_REDUCING = frozenset({"all_reduce", "reduce", "reduce_scatter"})
_NOT_REDUCING = frozenset({"all_gather", "all_to_all", "broadcast", "gather", "scatter",
                           "hypercube"})
_WHOLE = frozenset({"all_reduce", "broadcast", "reduce", "sendrecv"})
"""Collectives whose size column is their count of elements."""
_SHARE = frozenset({"all_gather", "reduce_scatter", "all_to_all", "gather", "scatter",
                    "hypercube"})
"""Collectives whose count column is one rank's share: the size column is nranks times it."""


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
        """The time in seconds."""
        return self.time_us * 1e-6


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
    """One run of an nccl-tests program, as :func:`parse` read it.

    Attributes:
        rows: one per size, in printed order.
        collective: simcoll's name (``all_reduce``, ``all_to_all``, ...), from the
            ``Collective test starting`` line, the program named in the text, simcoll's
            own header, or the argument of :func:`parse`; None if none says.
        nranks: ranks listed under ``# Using devices`` (or simcoll's ``nRanks``); None
            when the text lists none.
        devices: the device name of each listed rank, in rank order.
        hosts: the host of each listed rank, in rank order.
        settings: the ``# nThread ...`` line as ``{"nThread": 1, "minBytes": 8, ...,
            "step": 2, "step_kind": "factor"}``.
        nccl_version: ``"2.26.2"`` when the text prints it.
        avg_busbw: the ``# Avg bus bandwidth`` footer in GB/s, if present.
        out_of_bounds: the ``# Out of bounds values`` count, if present.
        error_column: True where the blocks end in old versions' ``error`` column (the
            largest error, which is above 0 in a correct run), not in ``#wrong`` (a
            count of wrong elements, 0 in a correct run).
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

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[NcclTestsRow]:
        return iter(self.rows)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The size column, bytes."""
        return tuple(r.size for r in self.rows)

    def wrong_sizes(self, place: str = "out_of_place") -> tuple[int, ...]:
        """The sizes whose ``place`` block has ``#wrong`` above 0: nccl-tests found wrong
        values in what that run computed (none for a table with the old ``error``
        column, whose values are above 0 in correct runs too).

        Raises:
            InvalidInputError: an unknown place, or a row without that block.
        """
        if self.error_column:
            return ()
        return tuple(r.size for r in self.rows
                     if (r.measurement(place).wrong or 0) > 0)

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
        try:
            import pandas as pd  # type: ignore[import-untyped]
        except ImportError as err:
            raise ImportError('NcclTestsTable.to_pandas needs pandas: pip install '
                              '"simcoll[pandas]"') from err
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


@dataclass
class _Layout:
    """Where each field sits in a row: head column names, then the blocks' columns.

    Attributes:
        time_shift: the decimal places the time column's unit is above a microsecond's
            (3: nccl-tests 1.x's milliseconds).
        cputime: the time column is ``-C 1``'s CPU time, which algbw does not come from.
        titled: read from column titles (else from the first row's fields).
    """

    head: tuple[str, ...]
    blocks: tuple[str, ...]
    block_width: int = 4
    block_columns: tuple[str, ...] = _BLOCK
    error_column: bool = False
    time_shift: int = 0
    cputime: bool = False
    titled: bool = False

    @property
    def width(self) -> int:
        return len(self.head) + self.block_width * len(self.blocks)


@dataclass
class _Run:
    """What has been read of one run so far.

    Attributes:
        next_program: a program named (on a command line) after this run's rows, which
            the next run takes.
        error: the first error in the run's lines, raised when its table is asked for.
    """

    start: int
    program: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    titles: tuple[str, ...] | None = None
    layout: _Layout | None = None
    rows: list[NcclTestsRow] = field(default_factory=list)
    version: str | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    simcoll_ranks: int | None = None
    finished: bool = False
    next_program: str | None = None
    error: InvalidInputError | None = None


def parse(text: str, *, collective: str | None = None,
          run: int | None = None) -> NcclTestsTable:
    """Read one nccl-tests run (or ``simcoll run``'s table) into an NcclTestsTable.

    Args:
        text: the printed output, as a string.
        collective: the collective, when the text does not name it (``all_reduce`` or
            the program's name, ``all_reduce_perf``); it must agree with the text's, and
            it takes the place of what the columns alone suggest.
        run: which run of a text holding several to read (1 is the first); the others'
            failures and malformed rows do not matter. None: the text must hold one.

    Returns:
        The table; its rows in printed order.

    Raises:
        InvalidInputError: no result rows; more than one run without ``run`` (use
            :func:`parse_all`), or a ``run`` beyond them; a row that does not fit the
            column layout (or whose time is not a finite number, or whose size or algbw
            contradicts its count or time), naming its line number and what was
            expected; a failed run (nccl-tests' ``Test NCCL failure`` / ``Test failure``
            lines), quoting the line and naming the last complete row; a ``collective``
            that disagrees with the text, or that does not print the rows' redop.
    """
    runs = _runs(text)
    if run is None and len(runs) > 1:
        raise InvalidInputError(f"the text holds {len(runs)} runs (the second starts at "
                                f"line {runs[1].start}); parse_all reads each, parse(text, "
                                f"run=K) one of them (1..{len(runs)})")
    index = 1 if run is None else integer(run, "run", minimum=1, maximum=len(runs),
                                          what=f"the text holds {len(runs)} run(s)")
    return _table(runs[index - 1], _wanted(collective))


def parse_all(text: str, *, collective: str | None = None) -> list[NcclTestsTable]:
    """Read every run in ``text`` (a log of several ``*_perf`` programs or runs).

    A run ends at its footer, or where a new header starts after rows were read, or
    where its rows turn to another run's (see the module's notes).

    Raises:
        InvalidInputError: as :func:`parse` for any of the runs; also when no run has a
            result row.
    """
    wanted = _wanted(collective)
    return [_table(run, wanted) for run in _runs(text)]


def count_runs(text: str) -> int:
    """How many runs ``text`` holds (those that failed included): :func:`parse`'s
    ``run`` takes 1 to this.

    Raises:
        InvalidInputError: ``text`` is not a str, or holds no result row (nor a failed
            run).
    """
    return len(_runs(text))


def _wanted(collective: str | None) -> str | None:
    return None if collective is None else _collective_name(collective)


def _runs(text: str) -> list[_Run]:
    """The runs of ``text`` that have rows or failed, each with its first error, if any."""
    if not isinstance(text, str):
        raise InvalidInputError(f"parse takes the printed text as a str, not "
                                f"{type(text).__name__}")
    scanner = _Scanner()
    for number, raw in enumerate(text.splitlines(), start=1):
        scanner.read(raw, number)
    runs = [r for r in (*scanner.runs, scanner.run) if r.rows or r.error]
    if not runs:
        raise InvalidInputError(
            "no result rows found: expected nccl-tests' table, rows of 'size count type "
            "redop root' then 'time algbw busbw #wrong' per block, under the column titles "
            "'#  size  count  type  redop  root  time  algbw  busbw  #wrong ...'")
    return runs


class _Scanner:
    """Reads a text line by line into runs: ``runs`` done, ``run`` being read."""

    def __init__(self) -> None:
        self.runs: list[_Run] = []
        self.run = _Run(start=1)

    def new_run(self, number: int, program: str | None = None) -> None:
        """Start the next run at line ``number``."""
        self.runs.append(self.run)
        self.run = _Run(start=number, program=self.run.next_program or program)

    def read(self, raw: str, number: int) -> None:
        """One line; an error is kept in its run, whose later lines are skipped."""
        line = _strip_prefix(raw)
        stripped = line.strip()
        if not stripped:
            return
        run = self.run
        if (_starts_run(stripped) and (run.rows or run.finished or run.error)) or (
                run.finished and _FAILURE.search(stripped)):
            self.new_run(number)
        if self.run.error is None:
            try:
                self.read_line(line, stripped, number)
            except InvalidInputError as err:
                self.run.error = err

    def read_line(self, line: str, stripped: str, number: int) -> None:
        """A line of the run being read: a failure, a comment, a row, or a log line."""
        run = self.run
        if _FAILURE.search(stripped):
            raise InvalidInputError(_failure(run, stripped, number))
        if stripped.startswith("#"):
            _read_comment(run, stripped.lstrip("#").strip(), number)
        elif stripped.startswith(_FOOTERS) or _SETTINGS.match(stripped):   # 1.x: no '#'
            _read_comment(run, stripped, number)
        elif _ROW_START.match(line):
            self.read_row(line, number)
        elif _CUT_ROW.match(line):
            raise InvalidInputError(
                f"line {number}: a result row cut short ({len(stripped.split())} fields): "
                f"{stripped!r}; the run stopped inside it (killed?): to use the rows "
                f"before it, keep only the lines before line {number}")
        else:
            _read_log_line(run, stripped)

    def read_row(self, line: str, number: int) -> None:
        """A result row: of the run being read, or the first of another (after a footer,
        read as the run before it was)."""
        if self.run.finished:
            done = self.run
            self.new_run(number, done.program)
            self.run.layout = done.layout
        row = _read_row(self.run, line, number)
        if _restarts(self.run, row):
            self.new_run(number)
            row = _read_row(self.run, line, number)
        self.run.rows.append(row)


def _failure(run: _Run, stripped: str, number: int) -> str:
    after = f"after the row of size {run.rows[-1].size} (line {run.rows[-1].line})" \
        if run.rows else "before any result row"
    return (f"line {number}: nccl-tests reported a failure: {stripped!r}; its table stops "
            f"{after}: to use the rows before it, keep only the lines before line {number}")


def _restarts(run: _Run, row: NcclTestsRow) -> bool:
    """Whether ``row`` is another run's, where no header came between: its redop turns
    between none and a reduction, or its size falls below the previous row's of the same
    type, redop and root (a run of several types, redops or roots sweeps each in turn)
    where the run has no column titles (under its titles, those are its ``-N`` cycles)."""
    if not run.rows:
        return False
    last = run.rows[-1]
    if (last.redop in _NO_REDOP) != (row.redop in _NO_REDOP):
        return True
    titled = run.layout is not None and run.layout.titled
    return not titled and row.size < last.size and \
        (row.type, row.redop, row.root) == (last.type, last.redop, last.root)


def _strip_prefix(raw: str) -> str:
    """The line without a byte-order mark or an MPI launcher's rank prefix (also where
    one interrupts it)."""
    line = raw.rstrip("\r\n").lstrip("\ufeff")
    match = _PREFIX.match(line.lstrip())
    if match:
        return _PREFIX.sub(" ", line.lstrip()[match.end():])
    srun = _SRUN.match(line)
    return line[srun.end():] if srun else line


def _starts_run(stripped: str) -> bool:
    body = stripped.lstrip("#").strip()
    return (body.startswith("Collective test starting") or body.startswith("nccl-tests version")
            or bool(_SETTINGS.match(body)) or body.startswith("simcoll "))


def _read_comment(run: _Run, body: str, number: int) -> None:
    """A ``#`` line: header, column titles, or footer."""
    if body.startswith("Collective test starting:"):
        run.program = body.partition(":")[2].strip()
    elif body.startswith("nccl-tests version"):
        code = _LIBRARY_CODE.search(body)
        if code:
            run.version = _version_of(int(code.group(1)))
    elif _SETTINGS.match(body):
        run.settings = _read_settings(body)
    elif body.startswith("simcoll "):
        match = _SIMCOLL.match(body)
        if match:
            run.program = match.group(1)
    elif body.startswith("nRanks "):
        fields = body.split()
        if len(fields) > 1 and fields[1].isdigit():
            run.simcoll_ranks = int(fields[1])
    elif body.startswith("Rank "):
        device = _DEVICE.match(body)
        if device:
            run.ranks[int(device.group(1))] = (device.group(2), device.group(4))
    elif "out-of-place" in body or body == "simulated":
        run.titles = tuple(w for w in body.split() if w in ("out-of-place", "in-place",
                                                            "simulated"))
    elif body.split()[:2] in (["size", "count"], ["bytes", "N"]):
        run.layout = _layout_from_titles(body.split(), run.titles, number)
    elif body.startswith("Out of bounds values"):
        value = body.partition(":")[2].split()
        if value and value[0].isdigit():
            run.out_of_bounds = int(value[0])
    elif body.startswith("Avg bus bandwidth"):
        value = body.partition(":")[2].split()
        if not value:
            raise InvalidInputError(f"line {number}: expected a number after "
                                    f"'# Avg bus bandwidth :', found nothing")
        run.avg_busbw = _number(value[0], number, "the average bus bandwidth")
        run.finished = True


def _read_log_line(run: _Run, stripped: str) -> None:
    """A line outside the table (a command, a log line): only versions and programs; a
    program named after the run's rows is the next run's (the command that starts it)."""
    version = _VERSION_LINE.search(stripped)
    if version:
        run.version = version.group(1)
    program = _PROGRAM.search(stripped)
    if program and program.group(1) in PROGRAMS:
        if run.rows or run.finished:
            run.next_program = program.group(1)
        elif run.program is None:
            run.program = program.group(1)


def _version_of(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.28.3" (major * 10000 + minor * 100 + patch since 2.9)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _read_settings(body: str) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for name, value, kind in _SETTING.findall(body):
        key = name.strip()
        settings[key] = int(value)
        if kind:
            settings["step_kind"] = kind
    return settings


def _layout_from_titles(words: list[str], titles: tuple[str, ...] | None,
                        number: int) -> _Layout:
    """The layout the column titles give: 2.x's ``size count ...``, or 1.x's ``bytes N
    type op ... res``, whose times are in milliseconds."""
    shown = words[:-1] if words[-1] == "timestamp" else words   # -S 1: rows end in one
    names = [_ALIASES.get(w, w) for w in shown]
    head = []
    for name in names:
        if name not in _HEAD:
            break
        head.append(name)
    rest = names[len(head):]
    if "time" not in rest:
        raise InvalidInputError(f"line {number}: expected column titles 'size count type "
                                f"[redop] [root] time algbw busbw #wrong ...', found "
                                f"{' '.join(words)!r}")
    width = rest.index("time", 1) if rest.count("time") > 1 else len(rest)
    columns = tuple(rest[:width])
    unknown = [n for n in columns if n not in _BLOCK and n not in _EXTRA]
    if unknown or columns[:3] != _BLOCK[:3] or len(rest) % width:
        raise InvalidInputError(
            f"line {number}: cannot read the column titles {' '.join(words)!r}: each block "
            f"should be 'time algbw busbw #wrong' (or 'error'), optionally followed by "
            f"{', '.join(sorted(_EXTRA))}, and the row by 'timestamp'"
            + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    count = len(rest) // width
    return _Layout(tuple(head), _block_names(titles, count), width, columns,
                   error_column="error" in words or "res" in words,
                   time_shift=3 if words[0] == "bytes" else 0,
                   cputime="cputime" in words, titled=True)


def _block_names(titles: tuple[str, ...] | None, count: int) -> tuple[str, ...]:
    """Which block is which: the titles line's order, else out-of-place then in-place."""
    named = [{"out-of-place": "out_of_place", "in-place": "in_place",
              "simulated": "out_of_place"}[t] for t in titles or ()]
    if len(named) == count and len(set(named)) == count:
        return tuple(named)
    return ("out_of_place", "in_place")[:count]


def _layout_from_row(fields: list[str], number: int) -> _Layout:
    """No column titles: the number of fields says how many head columns and blocks."""
    for blocks in (2, 1):
        head = len(fields) - 4 * blocks
        if 3 <= head <= 5:
            if head == 3:
                names: tuple[str, ...] = ("size", "count", "type")
            elif head == 5:
                names = _HEAD
            else:
                names = ("size", "count", "type",
                         "root" if _is_int(fields[3]) else "redop")
            return _Layout(names, ("out_of_place", "in_place")[:blocks])
    raise InvalidInputError(
        f"line {number}: a result row has {len(fields)} fields; expected 'size count type "
        f"[redop] [root]' then one or two blocks of 'time algbw busbw #wrong' (7 to 13 "
        f"fields)")


def _is_int(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", text))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_row(run: _Run, line: str, number: int) -> NcclTestsRow:
    fields = _without_timestamp(line.split())
    if run.layout is None:
        run.layout = _layout_from_row(fields, number)
    layout = _row_layout(run.layout, fields)
    if len(fields) != layout.width:
        expected = " ".join(layout.head + layout.block_columns * len(layout.blocks))
        raise InvalidInputError(f"line {number}: expected {layout.width} fields ({expected}), "
                                f"found {len(fields)}: {line.strip()!r}")
    head = dict(zip(layout.head, fields))
    size = _whole(head["size"], number, "size")
    count = _whole(head["count"], number, "count")
    root = _whole(head["root"], number, "root", signed=True) if "root" in head else None
    blocks = {name: _measurement(layout, fields[start:start + layout.block_width], size,
                                 number)
              for name, start in zip(layout.blocks, range(len(layout.head), layout.width,
                                                          layout.block_width))}
    return NcclTestsRow(size, count, head["type"], head.get("redop"), root,
                        blocks.get("out_of_place"), blocks.get("in_place"), number)


def _without_timestamp(fields: list[str]) -> list[str]:
    """A row's fields without the timestamp ``-S 1`` ends it with (``%21s`` of
    ``YYYY-mm-dd HH:MM:SS``, nccl-tests 2.17.6 on)."""
    if len(fields) > 2 and _DATE.fullmatch(fields[-2]) and _CLOCK.fullmatch(fields[-1]):
        return fields[:-2]
    return fields


def _row_layout(layout: _Layout, fields: list[str]) -> _Layout:
    """The titled layout, or the same without its redop column for a row one field short
    that left the redop blank (``%6s`` of ""): the field after it is a number."""
    if layout.titled and "redop" in layout.head and len(fields) == layout.width - 1 \
            and _is_number(fields[layout.head.index("redop")]):
        return dataclasses.replace(layout, head=tuple(n for n in layout.head if n != "redop"))
    return layout


def _measurement(layout: _Layout, fields: list[str], size: int, number: int) -> Measurement:
    """One block of a row, its time in microseconds, its algbw checked against it."""
    values = dict(zip(layout.block_columns, fields))
    unit = "ms" if layout.time_shift == 3 else "us"
    time = _number(values["time"], number, f"the time ({unit})", finite=True)
    if layout.time_shift:   # the printed digits, moved: 0.072 ms is 72 us exactly
        time = float(Decimal(values["time"]).scaleb(layout.time_shift))
    algbw = _number(values["algbw"], number, "algbw (GB/s)")
    if not layout.cputime:
        _check_algbw(size, values["time"], values["algbw"], layout, number)
    return Measurement(time, algbw, _number(values["busbw"], number, "busbw (GB/s)"),
                       _wrong(values.get("wrong", "N/A"), number))


def _half_step(text: str) -> float:
    """Half a unit of the last digit printed: ``10.02`` -> 0.005, ``1.2e+04`` -> 500."""
    mantissa, _, exponent = text.lower().partition("e")
    return 0.5 * 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))


def _check_algbw(size: int, time_text: str, algbw_text: str, layout: _Layout,
                 number: int) -> None:
    """algbw is size / time, to the rounding of both printed numbers. nccl-tests before
    2.10 printed (p - 1) / p of it for all_gather and reduce_scatter, as hypercube still
    does: half of it is let through (and 0, a single rank's)."""
    shift = layout.time_shift
    time_us, step = float(time_text) * 10.0 ** shift, _half_step(time_text) * 10.0 ** shift
    algbw, rounding = float(algbw_text), _half_step(algbw_text)
    slowest = size / (time_us + step) / 1e3
    fastest = size / (time_us - step) / 1e3 if time_us > step else math.inf
    if algbw - rounding <= fastest * (1 + 1e-9) and (
            algbw == 0 or algbw + rounding >= slowest / 2 * (1 - 1e-9)):
        return
    implied = size / time_us / 1e3 if time_us else math.inf
    untitled = "" if layout.titled else (
        "; or, as the log has no column titles here, a time in milliseconds (nccl-tests "
        "1.x, titled 'bytes N type ...') or -C 1's cputime, which algbw does not come "
        "from: keep the titles, which say so")
    raise InvalidInputError(
        f"line {number}: algbw {algbw_text} GB/s is not size / time = {size} B / "
        f"{time_us:g} us = {implied:.4g} GB/s, to the rounding of the printed numbers: a "
        f"corrupted row (another process's output inside it?){untitled}")


def _whole(text: str, number: int, what: str, *, signed: bool = False) -> int:
    if not (_is_int(text) if signed else text.isdigit()):
        raise InvalidInputError(f"line {number}: expected a whole number for {what}, found "
                                f"{text!r}")
    return int(text)


def _number(text: str, number: int, what: str, *, positive: bool = False,
            finite: bool = False) -> float:
    """A number of a row or footer: never NaN or negative; with ``finite``, never infinite
    (a time; ``simcoll run`` prints an algbw of ``inf`` for a time of 0)."""
    try:
        value = float(text)
    except ValueError:
        raise InvalidInputError(f"line {number}: expected a number for {what}, found "
                                f"{text!r}") from None
    if math.isinf(value) and finite:
        raise InvalidInputError(f"line {number}: expected a finite number for {what}, found "
                                f"{text!r}")
    if math.isnan(value) or value < 0 or (positive and value == 0):
        sign = "positive" if positive else "non-negative"
        raise InvalidInputError(f"line {number}: expected a {sign} number for {what}, found "
                                f"{text!r}")
    return value


def _wrong(text: str, number: int) -> float | None:
    if text == "N/A":
        return None
    return _number(text.rstrip("*"), number, "#wrong (a count, an error, or N/A)")


def _collective_name(name: str, *, strict: bool = True) -> str:
    """simcoll's name for a program (``alltoall_perf_mpi``) or collective name.

    Raises:
        InvalidInputError: with ``strict``, a name that is neither.
    """
    stem = re.sub(r"_perf(?:_mpi)?$", "", name.strip())
    if stem in PROGRAMS:
        return PROGRAMS[stem]
    if stem in PROGRAMS.values() or not strict:
        return stem
    raise InvalidInputError(f"collective {name!r} is not an nccl-tests program or a "
                            f"collective name; known: {', '.join(sorted(PROGRAMS.values()))}")


def _table(run: _Run, wanted: str | None) -> NcclTestsTable:
    """The run's table: the collective its text names, else ``wanted``, else the one its
    columns give away; every row checked against it."""
    if run.error is not None:
        raise run.error
    named = _collective_name(run.program, strict=False) if run.program else None
    if wanted is not None and named is not None and wanted != named:
        raise InvalidInputError(f"collective {wanted!r} was given, but the run starting at "
                                f"line {run.start} is {named!r}")
    ranks = sorted(run.ranks)
    nranks = len(ranks) if ranks else run.simcoll_ranks
    collective = named or wanted or _from_layout(run.rows, nranks)
    for row in run.rows:
        _check_redop(row, collective)
        _check_size(row, collective, nranks)
    # without column titles, an error column shows in values that are not counts
    error_column = run.layout is not None and run.layout.error_column or any(
        m is not None and m.wrong is not None and not m.wrong.is_integer()
        for r in run.rows for m in (r.out_of_place, r.in_place))
    return NcclTestsTable(tuple(run.rows), collective, nranks,
                          tuple(run.ranks[r][1] for r in ranks),
                          tuple(run.ranks[r][0] for r in ranks), run.settings, run.version,
                          run.avg_busbw, run.out_of_bounds, error_column)


def _from_layout(rows: list[NcclTestsRow], nranks: int | None) -> str | None:
    """The collective the columns alone give away, where they have a root of 0 or more:
    a reduction (not none) is reduce's, the only one to print one. Broadcast, gather and
    scatter print the same columns (none and the root since nccl-tests 2.13, the root
    alone before), but only broadcast's size is its count of elements, on more than one
    rank. Anything else is ambiguous."""
    first = rows[0]
    if first.root is None or first.root < 0:
        return None
    if first.redop not in _NO_REDOP:
        return "reduce"
    whole = [r.size == r.count * ITEMSIZE[r.type] for r in rows
             if r.count and r.type in ITEMSIZE]
    return "broadcast" if whole and all(whole) and nranks != 1 else None


def _check_redop(row: NcclTestsRow, collective: str | None) -> None:
    """A collective that reduces prints a reduction as its redop, one that does not
    prints none (or nothing)."""
    if collective in _REDUCING and row.redop == "none" or \
            collective in _NOT_REDUCING and row.redop not in _NO_REDOP:
        prints = "a reduction (sum, prod, max, min, avg)" if collective in _REDUCING \
            else "none"
        raise InvalidInputError(
            f"line {row.line}: redop {row.redop!r}, where {collective} prints {prints}: the "
            f"row is another run's (runs without their headers between them?), or the "
            f"collective is another; split the log, or name the collective it measured")


def _check_size(row: NcclTestsRow, collective: str | None, nranks: int | None) -> None:
    """The size is the count of elements (times the ranks for a rank's share), or a
    whole multiple of it where the collective or the ranks are unknown."""
    itemsize = ITEMSIZE.get(row.type)
    if itemsize is None:
        return
    element = row.count * itemsize
    factor = 1 if collective in _WHOLE else nranks if collective in _SHARE else None
    if factor is not None:
        expected = f"= {element * factor} B"
        fits = row.size == element * factor
    else:
        expected = "or a whole multiple of it"
        fits = row.size % element == 0 if element else row.size == 0
    if not fits:
        ranks = f" x {factor} ranks" if collective in _SHARE and factor else ""
        raise InvalidInputError(
            f"line {row.line}: size {row.size} B is not its count {row.count} x {itemsize} B "
            f"({row.type}){ranks} {expected}: a corrupted row (another process's output "
            f"inside it?); fix or drop the line")


_SPLIT = ("reduce_scatter", "all_to_all", "scatter")
"""Collectives whose size column is a rank's input, cut into p blocks."""


def nccl_shape(coll: Collective, p: int, size: int, itemsize: int) -> tuple[int, int, int]:
    """``(nbytes, count, size)``: simulate's per-rank input bytes, nccl-tests' count and
    size columns, for a requested size in bytes (rounded down to whole elements)."""
    count = size // itemsize
    if coll.size_factor(p) != 1:
        per = count // p
        return per * itemsize, per, per * p * itemsize
    if coll.name in _SPLIT:
        per = count // p
        return per * p * itemsize, per, per * p * itemsize
    return count * itemsize, count, count * itemsize
