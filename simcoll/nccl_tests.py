"""Read the tables that nccl-tests' ``*_perf`` programs print (and ``simcoll run`` prints).

``parse(text)`` turns one run's output into an :class:`NcclTestsTable`: the header (the
program, the ``# nThread ...`` settings, the devices of every rank, the NCCL version when
printed), one :class:`NcclTestsRow` per size with its out-of-place and in-place
:class:`Measurement`, and the footer (``# Out of bounds values``, ``# Avg bus
bandwidth``). ``parse_all(text)`` reads a log holding several runs.

The layout follows ``src/util.cu`` of NVIDIA/nccl-tests 2.19.6: ``size count type redop
root``, then per block ``time algbw busbw #wrong`` (out-of-place, then in-place). Older
versions print no ``root`` column (and no ``redop`` for collectives without one) and an
``error`` column (the largest error, e.g. ``2e-07``) instead of ``#wrong``; the column
titles say which layout a table has, and without titles the number of fields does.
``simcoll run`` prints one block, titled ``simulated``, read as the out-of-place one.

Lines that MPI launchers prefix (``[0] ``, ``[1,0]<stdout>:``, ``srun -l``'s `` 0: ``)
are read without their prefix; log lines between the rows (``NCCL INFO ...``) are
skipped. A line that starts like a result row but is not one is an error naming its
line number. nccl-tests 2.0.x prints the footer without its ``#``; both forms are read. A
run that failed (nccl-tests' ``Test NCCL failure``, ``Test CUDA failure`` or ``.. host pid
N: Test failure`` lines) is an error that quotes the line and says after which size the
table stops.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from simcoll.collectives import Collective
from simcoll.errors import InvalidInputError
from simcoll.units import parse_size

__all__ = ["Measurement", "NcclTestsRow", "NcclTestsTable", "parse", "parse_all", "nccl_shape",
           "ITEMSIZE", "PROGRAMS"]

PROGRAMS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
            "reduce_scatter": "reduce_scatter", "broadcast": "broadcast",
            "reduce": "reduce", "alltoall": "all_to_all", "gather": "gather",
            "scatter": "scatter", "sendrecv": "sendrecv", "hypercube": "hypercube"}
"""nccl-tests program stem (``all_reduce`` of ``all_reduce_perf``) -> collective name in
simcoll's vocabulary (``sendrecv`` and ``hypercube`` have no simcoll collective)."""

ITEMSIZE = {"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2,
            "float16": 2, "bfloat16": 2, "bf16": 2, "int32": 4, "uint32": 4, "float": 4,
            "float32": 4, "int64": 8, "uint64": 8, "double": 8, "float64": 8}
"""Bytes per element of the type names nccl-tests (and numpy) print."""

_PREFIX = re.compile(r"\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?[ \t]?")
_SRUN = re.compile(r"^\s*\d+: ")
_ROW_START = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)\s+(?:\S+\s+){5}\S")
_FAILURE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b")
_FOOTERS = ("Out of bounds values", "Avg bus bandwidth")
_PROGRAM = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_SIMCOLL = re.compile(r"^simcoll \S+: (\w+) / ")
_DEVICE = re.compile(r"^Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+"
                     r"(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$")
_SETTINGS = re.compile(r"^(?:nThread|nGpus\(perProc\))\s")
_SETTING = re.compile(r"([A-Za-z][A-Za-z ()]*?)\s*:?\s+(-?\d+)(?:\((\w+)\))?")
_VERSION_LINE = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_LIBRARY_CODE = re.compile(r"nccl-library=(\d+)")
_BLOCK = ("time", "algbw", "busbw", "wrong")
_HEAD = ("size", "count", "type", "redop", "root")
_ALIASES = {"cputime": "time", "#wrong": "wrong", "error": "wrong"}
_EXTRA = {"i_min", "i_max", "i_p99", "i_cv%"}


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
        redop: ``sum``, ``none`` ... or None when the table has no redop column.
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
    """Where each field sits in a row: head column names, then the blocks' columns."""

    head: tuple[str, ...]
    blocks: tuple[str, ...]
    block_width: int = 4
    block_columns: tuple[str, ...] = _BLOCK
    error_column: bool = False

    @property
    def width(self) -> int:
        return len(self.head) + self.block_width * len(self.blocks)


@dataclass
class _Run:
    """What has been read of one run so far."""

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


def parse(text: str, *, collective: str | None = None) -> NcclTestsTable:
    """Read one nccl-tests run (or ``simcoll run``'s table) into an NcclTestsTable.

    Args:
        text: the printed output, as a string.
        collective: the collective, when the text does not name it (``all_reduce`` or
            the program's name, ``all_reduce_perf``); it must agree with the text's.

    Returns:
        The table; its rows in printed order.

    Raises:
        InvalidInputError: no result rows; more than one run (use :func:`parse_all`); a
            row that does not fit the column layout (or whose time is not a finite
            number), naming its line number and what was expected; a failed run
            (nccl-tests' ``Test NCCL failure`` / ``Test failure`` lines), quoting the
            line and naming the last complete row; a ``collective`` that disagrees with
            the text.
    """
    runs = _parse_runs(text, collective)
    if len(runs) > 1:
        raise InvalidInputError(f"the text holds {len(runs)} runs (the second starts at "
                                f"line {runs[1][0]}); parse_all reads each")
    return runs[0][1]


def parse_all(text: str, *, collective: str | None = None) -> list[NcclTestsTable]:
    """Read every run in ``text`` (a log of several ``*_perf`` programs or runs).

    A run ends at its footer, or where a new header starts after rows were read.

    Raises:
        InvalidInputError: as :func:`parse`; also when no run has a result row.
    """
    return [table for _, table in _parse_runs(text, collective)]


def _parse_runs(text: str, collective: str | None) -> list[tuple[int, NcclTestsTable]]:
    """Each run's first line and table."""
    if not isinstance(text, str):
        raise InvalidInputError(f"parse takes the printed text as a str, not "
                                f"{type(text).__name__}")
    wanted = _collective_name(collective) if collective is not None else None
    runs: list[_Run] = []
    run = _Run(start=1)
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_prefix(raw)
        stripped = line.strip()
        if not stripped:
            continue
        starts_run = _starts_run(stripped)
        if starts_run and (run.rows or run.finished):
            runs.append(run)
            run = _Run(start=number)
        if _FAILURE.search(stripped):
            after = f"after the row of size {run.rows[-1].size} (line {run.rows[-1].line})" \
                if run.rows else "before any result row"
            raise InvalidInputError(f"line {number}: nccl-tests reported a failure: "
                                    f"{stripped!r}; its table stops {after}: to use the "
                                    f"rows before it, keep only the lines before line "
                                    f"{number}")
        if stripped.startswith("#"):
            _read_comment(run, stripped.lstrip("#").strip(), number)
        elif stripped.startswith(_FOOTERS):   # nccl-tests 2.0.x: the footer without '#'
            _read_comment(run, stripped, number)
        elif _ROW_START.match(line):
            if run.finished:
                runs.append(run)
                run = _Run(start=number, program=run.program)
            run.rows.append(_read_row(run, line, number))
        else:
            _read_log_line(run, stripped)
    runs.append(run)
    tables = [(r.start, _table(r, wanted)) for r in runs if r.rows]
    if not tables:
        raise InvalidInputError(
            "no result rows found: expected nccl-tests' table, rows of 'size count type "
            "redop root' then 'time algbw busbw #wrong' per block, under the column titles "
            "'#  size  count  type  redop  root  time  algbw  busbw  #wrong ...'")
    return tables


def _strip_prefix(raw: str) -> str:
    """The line without an MPI launcher's rank prefix (also where one interrupts it)."""
    line = raw.rstrip("\r\n")
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
    elif body.split()[:2] == ["size", "count"]:
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
    """A line outside the table (a command, a log line): only versions and programs."""
    version = _VERSION_LINE.search(stripped)
    if version:
        run.version = version.group(1)
    if run.program is None and not run.rows:
        program = _PROGRAM.search(stripped)
        if program and program.group(1) in PROGRAMS:
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
    names = [_ALIASES.get(w, w) for w in words]
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
            f"{', '.join(sorted(_EXTRA))}" + (f"; unknown: {', '.join(unknown)}" if unknown
                                              else ""))
    count = len(rest) // width
    blocks = _block_names(titles, count)
    return _Layout(tuple(head), blocks, width, columns, "error" in words)


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


def _read_row(run: _Run, line: str, number: int) -> NcclTestsRow:
    fields = line.split()
    if run.layout is None:
        run.layout = _layout_from_row(fields, number)
    layout = run.layout
    if len(fields) != layout.width:
        expected = " ".join(layout.head + layout.block_columns * len(layout.blocks))
        raise InvalidInputError(f"line {number}: expected {layout.width} fields ({expected}), "
                                f"found {len(fields)}: {line.strip()!r}")
    head = dict(zip(layout.head, fields))
    size = _whole(head["size"], number, "size")
    count = _whole(head["count"], number, "count")
    root = _whole(head["root"], number, "root", signed=True) if "root" in head else None
    blocks: dict[str, Measurement] = {}
    for i, name in enumerate(layout.blocks):
        start = len(layout.head) + i * layout.block_width
        values = dict(zip(layout.block_columns, fields[start:start + layout.block_width]))
        blocks[name] = Measurement(
            _number(values["time"], number, "the time (us)", finite=True),
            _number(values["algbw"], number, "algbw (GB/s)"),
            _number(values["busbw"], number, "busbw (GB/s)"),
            _wrong(values.get("wrong", "N/A"), number))
    return NcclTestsRow(size, count, head["type"], head.get("redop"), root,
                        blocks.get("out_of_place"), blocks.get("in_place"), number)


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
    found = _collective_name(run.program, strict=False) if run.program else None
    if found is None:
        found = _from_layout(run.rows)
    if wanted is not None and found is not None and wanted != found:
        raise InvalidInputError(f"collective {wanted!r} was given, but the run starting at "
                                f"line {run.start} is {found!r}")
    ranks = sorted(run.ranks)
    nranks = len(ranks) if ranks else run.simcoll_ranks
    # without column titles, an error column shows in values that are not counts
    error_column = run.layout is not None and run.layout.error_column or any(
        m is not None and m.wrong is not None and not m.wrong.is_integer()
        for r in run.rows for m in (r.out_of_place, r.in_place))
    return NcclTestsTable(tuple(run.rows), wanted or found, nranks,
                          tuple(run.ranks[r][1] for r in ranks),
                          tuple(run.ranks[r][0] for r in ranks), run.settings, run.version,
                          run.avg_busbw, run.out_of_bounds, error_column)


def _from_layout(rows: list[NcclTestsRow]) -> str | None:
    """The collective the columns alone give away: a root of 0 or more means broadcast
    (no reduction) or reduce; anything else is ambiguous."""
    first = rows[0]
    if first.root is not None and first.root >= 0 and first.redop is not None:
        return "broadcast" if first.redop == "none" else "reduce"
    return None


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
