"""Split a log into runs, line by line: launchers' rank prefixes and byte-order marks
dropped; each run's header (program, ``# nThread ...`` settings, devices, NCCL version),
column titles, rows and footer gathered, from their ``#`` lines or from the same lines
without their ``#`` (a log pasted into markdown, which reads ``# ...`` as a heading:
:func:`_bare_header`); failures kept in their run; a new run started at a header after
rows, or where rows turn to another run's without one.

Shared with the sibling modules: ``Run`` (what was read of one run) and ``split_runs``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from simcoll.errors import InvalidInputError
from simcoll.nccl_tests.rows import (
    Layout,
    layout_from_row,
    layout_from_titles,
    prints_error_column,
    read_number,
    read_row,
)
from simcoll.nccl_tests.tables import ITEMSIZE, NO_REDOP, PROGRAMS, NcclTestsRow

__all__ = ["Run", "split_runs", "version_of"]

_PREFIX = re.compile(r"\[(?:[\w.-]+@)?\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?[ \t]?")
"""An MPI launcher's rank tag: ``[0] ``, Open MPI 4's ``[1,0]<stdout>:`` and Open MPI 5's
(PRRTE's) ``[prterun-node0-4242@1,0]<stdout>: ``, its job's name before the ``@``."""
_SRUN = re.compile(r"^\s*\d+: ")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]")
"""An RFC 3339 time stamp a log collector writes first (``kubectl logs --timestamps``)."""
_HOST = re.compile(r"^(?:[A-Za-z][\w.-]*|\d{1,3}(?:\.\d{1,3}){3}): ")
"""A host name (or IPv4 address) a parallel shell writes first (pdsh, clush:
``node01: ``); taken off only before what nccl-tests prints (:func:`_printed_by_nccl_tests`), so a
script's ``Nodes: 2 x 8 GPUs`` stays a log line and nccl-tests' own failure lines, which
start with the host, are quoted whole."""
_ROW_START = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)\s+(?:\S+\s+){5}\S")
_CUT_ROW = re.compile(r"^\s*\d+\s+\d+\s+(?:" + "|".join(ITEMSIZE) + r")(?:\s|$)")
"""The size, count and type a result row starts with (where it has too few fields)."""
_FAILURE = re.compile(r"\bTest (?:(?:NCCL |CUDA )?failure|timeout)\b")
_FOOTERS = ("Out of bounds values", "Avg bus bandwidth")
_PROGRAM = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_LAUNCH = re.compile(r"\b[a-z_]+?_perf(?:_mpi)?(?:\s+-|\s*(?:$|[|<>&;]|\d>))")
"""A program run: its name followed by an option, a shell's redirection or pipe, or last
on the line."""
_SIMCOLL = re.compile(r"^simcoll \S+: (\w+) / (.*)$")
_DEVICE = re.compile(r"^Rank\s+(\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?(?:Pid\s+\d+\s+)?on\s+"
                     r"(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$")
_SETTINGS = re.compile(r"^(?:nThread|nGpus\(perProc\))\s")
_SETTING = re.compile(r"([A-Za-z][A-Za-z_ ()]*?)\s*:?\s+(-?\d+)(?:\((\w+)\))?")
"""A setting: its name as printed (``agg iters``, ``single_test``), its value, and the
step's kind (``2(factor)``)."""
_VERSION_LINE = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_BARE_HEADER = re.compile(r"^(?:Using devices|Collective test (?:starting|concluded): \S+"
                          r"|nccl-tests version \d+\.\d+\.\d+\b.*|nRanks \d+ minBytes \d+ .*)$")
"""Header lines nccl-tests (or ``simcoll run``) prints after a ``#``, as they read where it
was lost (see :func:`_bare_header`); the device, simcoll and column title lines are
matched on their own patterns."""
_BLOCK_TITLES = frozenset({"out-of-place", "in-place", "simulated"})
_LIBRARY_CODE = re.compile(r"nccl-library=(\d+)")


@dataclass
class Run:
    """What has been read of one run so far.

    Attributes:
        named_at: the line a program was read from where no header named it (before
            nccl-tests 2.16.7: the command that ran it), else None.
        guessed_at: that line, where it only mentions the program (``built
            all_gather_perf``, not ``./all_gather_perf -b 8``): a guess a collective the
            caller names overrides; else None.
        next_program: a program named (on a command line) after this run's rows, which
            the next run takes (``next_guessed_at``: that line).
        error: the first error in the run's lines, raised when its table is asked for.
    """

    start: int
    program: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    groups: dict[int, int] = field(default_factory=dict)
    """Each listed rank's communicator (``Group``), where the lines say."""
    titles: tuple[str, ...] | None = None
    layout: Layout | None = None
    rows: list[NcclTestsRow] = field(default_factory=list)
    version: str | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    simcoll_ranks: int | None = None
    simcoll_run: str | None = None
    """What ``simcoll run`` printed its table of: ``ring, network flow, params: none``."""
    finished: bool = False
    named_at: int | None = None
    guessed_at: int | None = None
    next_program: str | None = None
    next_named_at: int | None = None
    next_guessed_at: int | None = None
    error: InvalidInputError | None = None
    row_names: list[str] | None = None
    """How messages name each row where not by its line: a JSON report's ``results[i]``
    (with its line where the report has several)."""


def split_runs(text: str) -> list[Run]:
    """The runs of ``text`` that have rows or failed, each with its first error, if any."""
    if not isinstance(text, str):
        how = (" (bytes: .decode() them first)" if isinstance(text, (bytes, bytearray))
               else " (a file: pass its path.read_text())" if isinstance(text, os.PathLike)
               else "")
        raise InvalidInputError(f"an nccl-tests log is read as its printed text, a str, not "
                                f"{type(text).__name__}{how}")
    scanner = _Scanner()
    for number, raw in _lines(text):
        scanner.read(raw, number)
    runs = [r for r in (*scanner.runs, scanner.run) if r.rows or r.error]
    if not runs:
        raise InvalidInputError(
            "no result rows found: expected nccl-tests' table, rows of 'size count type "
            "redop root' then 'time algbw busbw #wrong' per block, under the column titles "
            "'#  size  count  type  redop  root  time  algbw  busbw  #wrong ...'")
    return runs


def _lines(text: str) -> list[tuple[int, str]]:
    """``text``'s lines with their numbers as editors and ``grep -n`` give them: cut at
    each newline, or at each carriage return in a text without newlines (old Mac line
    ends). A carriage return inside a line (a progress line written over) cuts it into
    pieces of the same number; form feeds and other separators stay inside."""
    if "\n" not in text:
        return list(enumerate(text.split("\r"), start=1))
    return [(number, piece) for number, line in enumerate(text.split("\n"), start=1)
            for piece in line.rstrip("\r").split("\r")]


class _Scanner:
    """Reads a text line by line into runs: ``runs`` done, ``run`` being read."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.run = Run(start=1)
        self.hashed = False
        """Whether a line kept its ``#``: from then on the text is no markdown paste that
        lost them, and a line without one is no header (a launcher's ``Rank 8 on ...``)."""

    def new_run(self, number: int, program: str | None = None, named_at: int | None = None,
                guessed_at: int | None = None) -> None:
        """Start the next run at line ``number``."""
        done = self.run
        self.runs.append(done)
        if done.next_program:
            program, named_at = done.next_program, done.next_named_at
            guessed_at = done.next_guessed_at
        self.run = Run(start=number, program=program, named_at=named_at,
                       guessed_at=guessed_at)

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
            self.hashed = True
            _read_comment(run, stripped.lstrip("#").strip(), number)
        elif stripped.startswith(_FOOTERS) or _SETTINGS.match(stripped):   # 1.x: no '#'
            _read_comment(run, stripped, number)
        elif not self.hashed and _bare_header(stripped, number, listing=not run.rows):
            # a '#' lost in markdown
            _read_comment(run, stripped, number)
        elif _ROW_START.match(line):
            self.read_result_row(line, number)
        elif _CUT_ROW.match(line):
            raise InvalidInputError(
                f"line {number}: a result row cut short ({len(stripped.split())} fields): "
                f"{stripped!r}; the run stopped inside it (killed?), or another "
                f"process's output cut it in two (join its parts): to use the rows "
                f"before it, keep only the lines before line {number}")
        else:
            _read_log_line(run, stripped, number)

    def read_result_row(self, line: str, number: int) -> None:
        """A result row: of the run being read, or the first of another (after a footer,
        read as the run before it was)."""
        if self.run.finished:
            done = self.run
            self.new_run(number, done.program, done.named_at, done.guessed_at)
            self.run.layout = None if done.layout is None else dataclasses.replace(done.layout)
        row = self.row_in_layout(line, number)
        if _restarts(self.run, row):
            self.new_run(number)
            row = self.row_in_layout(line, number)
        self.run.rows.append(row)

    def row_in_layout(self, line: str, number: int) -> NcclTestsRow:
        """``line`` read in the layout of the run being read, which its first row gives
        where no column titles did; a row whose fields give another layout than the
        first's starts another run (runs without their headers between them: an
        all_reduce's redop where a broadcast prints its root, or a blank redop)."""
        layout = self.run.layout
        if layout is None or not layout.titled:
            own = layout_from_row(line, number)
            # a row of other blocks than the run's is cut short (or corrupted): read_row
            # refuses it in the run's layout; one of other columns starts a run of its
            # own (or, first in a run after a footer, replaces the layout it inherited)
            if layout is not None and own.blocks == layout.blocks and own.head != layout.head:
                if self.run.rows:
                    self.new_run(number)
                layout = None
            if layout is None:
                layout = self.run.layout = own
            if not layout.error_column and prints_error_column(layout, line):
                layout = self.run.layout = dataclasses.replace(layout, error_column=True)
        return read_row(layout, line, number)


def _failure(run: Run, stripped: str, number: int) -> str:
    after = f"after the row of size {run.rows[-1].size} (line {run.rows[-1].line})" \
        if run.rows else "before any result row"
    return (f"line {number}: nccl-tests reported a failure: {stripped!r}; its table stops "
            f"{after}: to use the rows before it, keep only the lines before line {number}")


def _restarts(run: Run, row: NcclTestsRow) -> bool:
    """Whether ``row`` is another run's, where no header came between: its redop turns
    between none and a reduction, or its size falls below the previous row's of the same
    type, redop and root (a run of several types, redops or roots sweeps each in turn)
    where the run has no column titles (under its titles, those are its ``-N`` cycles)."""
    if not run.rows:
        return False
    last = run.rows[-1]
    if (last.redop in NO_REDOP) != (row.redop in NO_REDOP):
        return True
    titled = run.layout is not None and run.layout.titled
    return not titled and row.size < last.size and \
        (row.type, row.redop, row.root) == (last.type, last.redop, last.root)


def _printed_by_nccl_tests(text: str) -> bool:
    """``text`` starts as nccl-tests' lines do: a ``#`` line, a row's size, count and
    type, 1.x's settings and footers without their ``#``, or an MPI launcher's rank
    prefix before them."""
    body = text.lstrip()
    return (body.startswith(("#", *_FOOTERS)) or bool(_CUT_ROW.match(body))
            or bool(_SETTINGS.match(body)) or bool(_PREFIX.match(body)))


def _strip_prefix(raw: str) -> str:
    """The line without a byte-order mark, a log collector's time stamp, a parallel
    shell's host name, or an MPI launcher's rank prefix (also where one interrupts
    it)."""
    line = raw.rstrip("\r\n").lstrip("\ufeff")
    match = _STAMP.match(line)
    if match:
        line = line[match.end():]
    match = _HOST.match(line)
    if match and _printed_by_nccl_tests(line[match.end():]):
        line = line[match.end():]
    match = _PREFIX.match(line.lstrip())
    if match:
        return _PREFIX.sub(" ", line.lstrip()[match.end():])
    srun = _SRUN.match(line)
    return line[srun.end():] if srun else line


def _starts_run(stripped: str) -> bool:
    body = stripped.lstrip("#").strip()
    return (body.startswith("Collective test starting") or body.startswith("nccl-tests version")
            or bool(_SETTINGS.match(body)) or body.startswith("simcoll "))


def _bare_header(stripped: str, number: int, listing: bool) -> bool:
    """Whether ``stripped`` is a header line of nccl-tests (or ``simcoll run``) whose
    ``#`` was lost, as markdown loses it (it reads ``# ...`` as a heading): only a line
    that matches a header whole (``Using devices``, a device line as :data:`_DEVICE`
    reads it while the run is ``listing`` its devices, before its rows, the version,
    ``Collective test starting: ...``, simcoll's own first lines, the block titles,
    column titles whose layout reads) is one; any other line, a row's or a log's, is
    read as it was."""
    words = stripped.split()
    if words[:2] in (["size", "count"], ["bytes", "N"]):
        try:
            layout_from_titles(words, None, number)
        except InvalidInputError:
            return False
        return True
    return (bool(_BARE_HEADER.match(stripped) or listing and _DEVICE.match(stripped)
                 or _SIMCOLL.match(stripped)) or set(words) <= _BLOCK_TITLES)


def _read_comment(run: Run, body: str, number: int) -> None:
    """A ``#`` line's text after its ``#`` (or a header line that lost it): header,
    column titles, or footer."""
    if body.startswith("Collective test starting:"):
        run.program = body.partition(":")[2].strip()
        run.named_at = run.guessed_at = None
    elif body.startswith("nccl-tests version"):
        code = _LIBRARY_CODE.search(body)
        if code:
            run.version = version_of(int(code.group(1)))
    elif _SETTINGS.match(body):
        run.settings = _read_settings(body)
    elif body.startswith("simcoll "):
        match = _SIMCOLL.match(body)
        if match:
            run.program, run.simcoll_run = match.group(1), match.group(2).strip()
            run.named_at = run.guessed_at = None
    elif body.startswith("nRanks "):
        fields = body.split()
        if len(fields) > 1 and fields[1].isdigit():
            run.simcoll_ranks = int(fields[1])
    elif body.startswith("Rank "):
        device = _DEVICE.match(body)
        if device:
            rank = int(device.group(1))
            run.ranks[rank] = (device.group(3), device.group(5))
            if device.group("group") is not None:
                run.groups[rank] = int(device.group("group"))
    elif "out-of-place" in body or body == "simulated":
        run.titles = tuple(w for w in body.split() if w in ("out-of-place", "in-place",
                                                            "simulated"))
    elif body.split()[:2] in (["size", "count"], ["bytes", "N"]):
        run.layout = layout_from_titles(body.split(), run.titles, number)
    elif body.startswith("Out of bounds values"):
        value = body.partition(":")[2].split()
        if value and value[0].isdigit():
            run.out_of_bounds = int(value[0])
    elif body.startswith("Avg bus bandwidth"):
        value = body.partition(":")[2].split()
        if value:   # a log cut inside the footer has no number: a run without its footer
            run.avg_busbw = read_number(value[0], number, "the average bus bandwidth")
            run.finished = True


def _read_log_line(run: Run, stripped: str, number: int) -> None:
    """A line outside the table (a command, a log line): only versions and programs; a
    program named after the run's rows is the next run's (the command that starts it).
    A line naming several programs (``built all_gather_perf all_reduce_perf``) names
    none; one naming a program it does not run (no option after it, not last) only
    guesses it."""
    version = _VERSION_LINE.search(stripped)
    if version:
        run.version = version.group(1)
    names = {m.group(1) for m in _PROGRAM.finditer(stripped)} & set(PROGRAMS)
    if len(names) != 1:
        return
    program = names.pop()
    guessed = None if _LAUNCH.search(stripped) else number
    if run.rows or run.finished:
        run.next_program, run.next_named_at, run.next_guessed_at = program, number, guessed
    elif run.program is None:
        run.program, run.named_at, run.guessed_at = program, number, guessed


def version_of(code: int) -> str:
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
