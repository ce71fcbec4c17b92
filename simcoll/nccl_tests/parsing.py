"""``parse``, ``parse_all`` and ``count_runs``: each run of a log made a table, the
collective it measured named (by its text, the caller, or its columns) and every row
checked against it (its redop, and its size against its count).
"""

from __future__ import annotations

import math
import re

from simcoll.checks import integer, shown
from simcoll.collectives import ALIASES, COLLECTIVES
from simcoll.errors import InvalidInputError
from simcoll.nccl_tests.json_report import looks_like_json, read_json
from simcoll.nccl_tests.scanning import Run, split_runs
from simcoll.nccl_tests.tables import ITEMSIZE, NO_REDOP, PROGRAMS, NcclTestsRow, NcclTestsTable

__all__ = ["parse", "parse_all", "count_runs"]

_REDUCING = frozenset({"all_reduce", "reduce", "reduce_scatter"})
_NOT_REDUCING = frozenset({"all_gather", "all_to_all", "broadcast", "gather", "scatter",
                           "hypercube"})
_WHOLE = frozenset({"all_reduce", "broadcast", "reduce", "sendrecv"})
"""Collectives whose size column is their count of elements."""
_SHARE = frozenset({"all_gather", "reduce_scatter", "all_to_all", "gather", "scatter",
                    "hypercube"})
"""Collectives whose count column is one rank's share: the size column is nranks times it."""


def parse(text: str, *, collective: str | None = None,
          run: int | None = None) -> NcclTestsTable:
    """Read one nccl-tests run (or ``simcoll run``'s table) into an NcclTestsTable.

    Args:
        text: the printed output, as a string (or nccl-tests' JSON report, ``-J``).
        collective: the collective, when the text does not name it (``all_reduce`` or
            the program's name, ``all_reduce_perf``); it must agree with the text's, and
            it takes the place of what the columns alone suggest.
        run: which run of a text holding several to read (1 is the first); the others'
            failures and malformed rows do not matter. None: the text must hold one.

    Returns:
        The table; its rows in printed order.

    Raises:
        InvalidInputError: no result rows (a JSON report whose ``results`` is empty
            included); more than one run without ``run`` (use :func:`parse_all`), or a
            ``run`` beyond them; a row that does not fit the column layout (or whose time
            is not a finite number, or whose size or algbw contradicts its count or
            time), naming its line number (a JSON report's row: ``results[i]``) and what
            was expected; a failed run (nccl-tests' ``Test NCCL failure`` / ``Test failure``
            lines), quoting the line and naming the last complete row; a ``collective``
            that disagrees with the text, or that does not print the rows' redop.
    """
    wanted = _wanted(collective)
    runs = _runs(text)
    if run is None and len(runs) > 1:
        raise InvalidInputError(f"the text holds {len(runs)} runs (the second starts at "
                                f"line {runs[1].start}); parse_all reads each, parse(text, "
                                f"run=K) one of them (1..{len(runs)})")
    index = 1 if run is None else integer(run, "run", minimum=1, maximum=len(runs),
                                          what=f"the text holds {len(runs)} run(s)")
    return _table(runs[index - 1], wanted)


def parse_all(text: str, *, collective: str | None = None) -> list[NcclTestsTable]:
    """Read every run in ``text`` (a log of several ``*_perf`` programs or runs).

    A run ends at its footer, or where a new header starts after rows were read, or
    where its rows turn to another run's (see :mod:`simcoll.nccl_tests`).

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
            run), as a JSON report with no results does.
    """
    return len(_runs(text))


def _runs(text: str) -> list[Run]:
    """The runs of a printed log, or the one of nccl-tests' JSON report (``-J``)."""
    if isinstance(text, str) and looks_like_json(text):
        return [read_json(text)]
    return split_runs(text)


def _wanted(collective: str | None) -> str | None:
    if collective is not None and not isinstance(collective, str):
        raise InvalidInputError(f"collective={shown(collective)} is not accepted; give an "
                                f"nccl-tests program or collective name "
                                f"(all_reduce_perf, all_reduce), or None for the one the "
                                f"text names")
    return None if collective is None else _collective_name(collective)


def _collective_name(name: str, *, strict: bool = True) -> str:
    """simcoll's name for a program (``alltoall_perf_mpi``) or collective name (torch's
    too: ``reduce_scatter_tensor``, which older simcoll tables name).

    Raises:
        InvalidInputError: with ``strict``, a name that is neither.
    """
    stem = re.sub(r"_perf(?:_mpi)?$", "", name.strip())
    if stem in PROGRAMS:
        return PROGRAMS[stem]
    if stem in ALIASES:
        return ALIASES[stem]
    if stem in PROGRAMS.values() or not strict:
        return stem
    raise InvalidInputError(f"collective {name!r} is not an nccl-tests program or a "
                            f"collective name; known: {', '.join(sorted(PROGRAMS.values()))}")


def _table(run: Run, wanted: str | None) -> NcclTestsTable:
    """The run's table: the collective its text names, else ``wanted``, else the one its
    columns give away; every row checked against it."""
    if run.error is not None:
        if run.titles is None and not run.rows:   # no table began: likely no log at all
            raise InvalidInputError(f"{run.error} (and no nccl-tests column titles came "
                                    f"before it: is this an nccl-tests log?)") from None
        raise run.error
    named = _collective_name(run.program, strict=False) if run.program else None
    if wanted is not None and named is not None and wanted != named:
        if run.guessed_at is None:
            where = "" if run.named_at is None else f" (line {run.named_at} runs it)"
            raise InvalidInputError(f"collective {wanted!r} was given, but the run starting "
                                    f"at line {run.start} is {named!r}{where}")
        named = None   # a program a log line named: the collective given wins
    ranks, communicators = _first_communicator(run)
    # a device list cut short (pasted logs keep a few lines) names ranks beyond its length
    listed = ranks and sorted(run.ranks) == list(range(len(run.ranks)))
    nranks = len(ranks) if listed else run.simcoll_ranks
    collective = named or wanted or _from_layout(run.rows, nranks)
    if nranks is None and collective in _SHARE:
        nranks = _implied_ranks(run.rows)
    if nranks is None:
        nranks = _bandwidth_ranks(run.rows, collective)
    report = run.row_names is not None
    for index, row in enumerate(run.rows):
        where = run.row_names[index] if run.row_names else f"line {row.line}"
        _check_redop(row, collective, where, report)
        _check_root(row, collective, where, report)
        _check_size(row, collective, nranks, where, report)
    # without column titles, an error column shows in values that are not counts
    error_column = run.layout is not None and run.layout.error_column or any(
        m is not None and m.wrong is not None and not m.wrong.is_integer()
        for r in run.rows for m in (r.out_of_place, r.in_place))
    return NcclTestsTable(tuple(run.rows), collective, nranks,
                          tuple(run.ranks[r][1] for r in ranks),
                          tuple(run.ranks[r][0] for r in ranks), run.settings, run.version,
                          run.avg_busbw, run.out_of_bounds, error_column, communicators,
                          run.simcoll_run, run.layout is not None and run.layout.cputime)


def _first_communicator(run: Run) -> tuple[list[int], int]:
    """The listed ranks of the run's first communicator, in order, and how many ran: a
    run split with ``NCCL_TESTS_SPLIT`` (or ``_MASK``) lists every process with its
    ``Group``, and times and bandwidths are those of communicators of that size.

    Raises:
        InvalidInputError: communicators of different sizes (no one rank count fits).
    """
    ranks = sorted(run.ranks)
    groups = {run.groups.get(r, 0) for r in ranks}
    if len(groups) <= 1:
        return ranks, 1
    members = {g: [r for r in ranks if run.groups.get(r, 0) == g] for g in sorted(groups)}
    sizes = sorted({len(m) for m in members.values()})
    if len(sizes) > 1:
        raise InvalidInputError(
            f"the run starting at line {run.start} split its {len(ranks)} ranks into "
            f"{len(groups)} communicators of different sizes ({', '.join(map(str, sizes))} "
            f"ranks; NCCL_TESTS_SPLIT), whose times do not share one rank count")
    return members[run.groups.get(ranks[0], 0)], len(groups)


def _implied_ranks(rows: list[NcclTestsRow]) -> int | None:
    """The ranks a rank-share collective's rows give, size / (count x itemsize), where
    every row with elements gives the same whole number; else None. One rank is not
    taken from rows whose bus bandwidth is above 0 (a rank-share collective's factor,
    (n - 1) / n, is 0 on one rank): their size is their count, as another collective's
    is."""
    found = set()
    for row in rows:
        if row.count and row.type in ITEMSIZE:
            whole, rest = divmod(row.size, row.count * ITEMSIZE[row.type])
            found.add(whole if rest == 0 else 0)
    ranks = found.pop() if len(found) == 1 and 0 not in found else None
    moving = any(m is not None and m.busbw > 0 for r in rows for m in (r.out_of_place,
                                                                        r.in_place))
    return None if ranks == 1 and moving else ranks


_MOST_RANKS = 1 << 24
"""The most ranks :func:`_bandwidth_ranks` considers."""


def _printed_half_step(value: float) -> float:
    """At least half a unit of the last digit nccl-tests prints ``value`` with: two
    decimals below 1000 GB/s, then one, none, an exponent (``getFloatStr`` in
    src/util.cu, 2.19.6: six characters, ``%6.2f`` while they hold it, then ``%6.1f``,
    ``%6.0f``, ``%6.0e``; 2.17.3 - 2.19.5 cut digits to fit six characters alike;
    releases before 2.17.3 always ``%6.2f``, a finer step this bounds)."""
    if not math.isfinite(value):   # inf: simcoll run's algbw of a time printed 0.00
        return math.inf
    for digits, below in ((2, 999.995), (1, 9999.95), (0, 999999.5)):
        if abs(value) < below:
            return 0.5 * 10.0 ** -digits
    return 0.5 * 10.0 ** math.floor(math.log10(abs(value)))


def _bandwidth_ranks(rows: list[NcclTestsRow], collective: str | None) -> int | None:
    """The rank count the rows' busbw / algbw give, where every row's ratio, as
    printed (each off by up to half its last digit: 0.005 below 1000 GB/s, 0.05 from
    1000, :func:`_printed_half_step`), fits nccl-tests' bus bandwidth
    factor of one rank count alone (all_reduce's 2 (n - 1) / n, all_gather's (n - 1) / n
    ...; ``*GetBw`` in nccl-tests' src/*.cu); else None (a factor that does not depend on
    n, as broadcast's, or rows too small to tell: algbw 0.00)."""
    coll = COLLECTIVES.get(collective or "")
    if coll is None or coll.busbw_factor(2) == coll.busbw_factor(3):
        return None
    factor = coll.busbw_factor

    def first(at_least: float) -> int:
        """The smallest n whose factor reaches ``at_least`` (past the range if none)."""
        low, high = 2, _MOST_RANKS + 1
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if factor(mid) >= at_least else (mid + 1, high)
        return low

    low, high, seen = 2, _MOST_RANKS, False
    for row in rows:
        for block in (row.out_of_place, row.in_place):
            if block is None:
                continue
            a, b = _printed_half_step(block.algbw), _printed_half_step(block.busbw)
            if block.algbw <= a:
                continue
            least = (block.busbw - b) / (block.algbw + a) * (1 - 1e-12)
            most = (block.busbw + b) / (block.algbw - a) * (1 + 1e-12)
            low = max(low, first(least))
            high = min(high, first(math.nextafter(most, math.inf)) - 1)
            seen = True
    return low if seen and low == high else None


def _from_layout(rows: list[NcclTestsRow], nranks: int | None) -> str | None:
    """The collective the columns alone give away, where they have a root of 0 or more:
    a reduction (not none) is reduce's, the only one to print one. Broadcast, gather and
    scatter print the same columns (none and the root since nccl-tests 2.13, the root
    alone before), but only broadcast's size is its count of elements, on more than one
    rank. Anything else is ambiguous."""
    first = rows[0]
    if first.root is None or first.root < 0:
        return None
    if first.redop not in NO_REDOP:
        return "reduce"
    whole = [r.size == r.count * ITEMSIZE[r.type] for r in rows
             if r.count and r.type in ITEMSIZE]
    return "broadcast" if whole and all(whole) and nranks != 1 else None


def _another_run(report: bool) -> str:
    """Why a row does not fit its collective, and what to do: a printed log's row may
    be another run's; a JSON report holds one run."""
    if report:
        return ("the result is another collective's (a report edited by hand?), or the "
                "collective is another; fix or drop the result, or name the collective "
                "the report measured")
    return ("the row is another run's (runs without their headers between them?), or the "
            "collective is another; split the log, or name the collective it measured")


def _check_redop(row: NcclTestsRow, collective: str | None, where: str,
                 report: bool) -> None:
    """A collective that reduces prints a reduction as its redop, one that does not
    prints none (or nothing). ``where`` names the row in the message (``line 12``,
    ``results[3]``); ``report``: it is a JSON report's."""
    if collective in _REDUCING and row.redop == "none" or \
            collective in _NOT_REDUCING and row.redop not in NO_REDOP:
        prints = "a reduction (sum, prod, max, min, avg)" if collective in _REDUCING \
            else "none"
        raise InvalidInputError(f"{where}: redop {row.redop!r}, where {collective} prints "
                                f"{prints}: {_another_run(report)}")


_ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
_UNROOTED = frozenset({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv",
                       "hypercube"})


def _check_root(row: NcclTestsRow, collective: str | None, where: str,
                report: bool) -> None:
    """A rooted collective prints its root, a rank (each in turn with ``-r -1``), the
    others -1 (the root nccl-tests' ``TimeTest`` is given, src/*.cu); ``where`` and
    ``report`` as :func:`_check_redop` takes them."""
    if row.root is None or (collective not in _ROOTED and collective not in _UNROOTED):
        return
    if (collective in _ROOTED) != (row.root >= 0):
        prints = "its root, a rank (0 or more)" if collective in _ROOTED else "-1"
        raise InvalidInputError(f"{where}: root {row.root}, where {collective} prints "
                                f"{prints}: {_another_run(report)}")


def _check_size(row: NcclTestsRow, collective: str | None, nranks: int | None,
                where: str, report: bool) -> None:
    """The size is the count of elements (times the ranks for a rank's share), or a
    whole multiple of it where the collective or the ranks are unknown; alltoallv's is
    the largest send or receive total of a rank, its count a base the rows do not show
    (0 with a matrix file), so it is not checked. ``where`` and ``report`` as
    :func:`_check_redop` takes them."""
    itemsize = ITEMSIZE.get(row.type)
    if itemsize is None or collective == "alltoallv":
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
        cause = "a corrupted or hand-edited report" if report else \
            "a corrupted row (another process's output inside it?)"
        raise InvalidInputError(
            f"{where}: size {row.size} B is not its count {row.count} x {itemsize} B "
            f"({row.type}){ranks} {expected}: {cause}"
            f"{', or a device list cut short' if ranks else ''}; fix or drop "
            f"{'the result' if report else 'the line'}")
