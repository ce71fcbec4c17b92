"""Simulate every size of a measured nccl-tests table and set the two side by side.

``compare(topology, table, algorithm="nccl")`` answers "how close does this machine
land on my log, before any fitting?": each row's size is simulated in data-free mode
with the row's element type, op (for the reductions) and root (for the rooted
collectives), as nccl-tests ran it (:func:`simulated_dtype`, :func:`simulated_op`), and
the result
holds the measured and simulated time and busbw per size, the relative time error
(simulated / measured - 1), the geometric-mean |time error| (exp(mean |ln(simulated /
measured)|) - 1: the factor by which the times differ on average, less 1, so that rows all
at -50% give 100%), and what the algorithm chose at each size (NCCL's algorithm, protocol
and channels). :func:`simcoll.calibrate` fits constants on the same per-size
simulations.
"""

from __future__ import annotations

import contextlib
import math
import pickle
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcoll import optional
from simcoll.algorithms.registry import get_algorithm
from simcoll.checks import integer, shown
from simcoll.collectives import Collective
from simcoll.collectives import collective as get_collective
from simcoll.dtypes import as_dtype
from simcoll.errors import InvalidInputError, SimCollError, message_of
from simcoll.nccl_tests import ITEMSIZE, NcclTestsTable, nccl_shape
from simcoll.nccl_tests.tables import NO_REDOP
from simcoll.ops import ReduceOp
from simcoll.processes import local_pool
from simcoll.progress import check_progress, progress_bar
from simcoll.simulate import simulate
from simcoll.topology.graph import Topology

__all__ = ["Comparison", "compare", "geomean_error"]

CHOICES = ("algo", "proto", "channels")
"""The parameters that say what an algorithm chose for a size (NCCL's), where it has them."""


def geomean_error(simulated: Sequence[float], measured: Sequence[float]) -> float:
    """The geometric-mean |time error|: exp(mean |ln(simulated / measured)|) - 1 over the
    sizes' times, i.e. the geometric mean of the factors by which the simulated and
    measured times differ (the larger over the smaller), less 1. A time off by a factor of
    2 counts as 100% whether it is twice (error +100%) or half (-50%) the measured one.
    Taken from the times' logarithms, not from their relative errors (which round to
    -100% where a time is below 1e-16 of the other); ``inf`` where one time is 0 and the
    other not, or the factor is past a float's range.

    Raises:
        ValueError: no times, or not as many simulated as measured.
    """
    logs = [_log_factor(s, m) for s, m in zip(simulated, measured, strict=True)]
    if not logs:
        raise ValueError("geomean_error needs one time or more")
    try:
        return math.exp(sum(logs) / len(logs)) - 1
    except OverflowError:
        return math.inf


def _log_factor(simulated: float, measured: float) -> float:
    """|ln(simulated / measured)|: 0 where both are 0, ``inf`` where one is."""
    if simulated and measured:
        return abs(math.log(simulated) - math.log(measured))
    return 0.0 if simulated == measured else math.inf


def size_width(sizes: Sequence[int]) -> int:
    """The width of a report's size column: 10, or the longest size's digits."""
    return max([10, *(len(str(size)) for size in sizes)])


def geomean_line(label: str, simulated_series: Sequence[Sequence[float]],
                 measured: Sequence[float], words: Sequence[str], tail: str) -> list[str]:
    """The report lines that print :func:`geomean_error` (of each series of simulated
    times against ``measured``, named by ``words``) and say what it is."""
    found = [geomean_error(s, measured) for s in simulated_series]
    shown = ", ".join(f"{g:.1%}{' ' + w if w else ''}" for g, w in zip(found, words))
    factors = ", ".join(f"{1 + g:.3f}{' ' + w if w else ''}" for g, w in zip(found, words))
    return [f"{label}: {shown} {tail}",
            f"  = exp(mean |ln(simulated / measured)|) - 1: on average the times differ "
            f"by a factor of {factors}"]


@dataclass(frozen=True)
class SizeRun:
    """How one row of a table is simulated: ``simulate``'s per-rank bytes, dtype and
    keyword arguments (the root of a rooted collective, the op of a reduction)."""

    nbytes: int
    dtype: np.dtype[Any]
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)


_TYPE_NAMES = {"char": "int8", "int": "int32", "half": "float16", "float": "float32",
               "double": "float64", "bf16": "bfloat16", "f8e4m3": "float8_e4m3fn",
               "f8e5m2": "float8_e5m2"}
"""numpy's (and ml_dtypes') names of the element types nccl-tests prints otherwise."""

_OPS = {"sum": ReduceOp.SUM, "prod": ReduceOp.PRODUCT, "max": ReduceOp.MAX,
        "min": ReduceOp.MIN, "avg": ReduceOp.AVG, "mulsum": ReduceOp.AVG}
"""The op each of nccl-tests' redop names is simulated with: its own; ``mulsum`` (a
PreMulSum, ``ncclRedOpCreatePreMulSum``) as an average, which NCCL computes as one, so
that NCCL's rules for its algorithms (no NVLS, SHARP as a sum) see what it ran."""


def simulated_dtype(type_name: str) -> np.dtype[Any]:
    """The dtype a row of nccl-tests' ``type_name`` is simulated with: its own (bfloat16
    and the FP8 types with ml_dtypes installed), so NCCL's rules for it hold (no FP8
    reduction before Hopper, FP8 rings penalised, SHARP's types); where simcoll has no
    such type, the one of its size among uint8, float16, float32 and float64 (float32
    for a name not in :data:`simcoll.nccl_tests.ITEMSIZE`, which :func:`size_runs`
    refuses)."""
    try:
        return as_dtype(_TYPE_NAMES.get(type_name, type_name))
    except InvalidInputError:
        itemsize = ITEMSIZE.get(type_name, 4)
        return np.dtype({1: np.uint8, 2: np.float16, 4: np.float32, 8: np.float64}[itemsize])


def simulated_op(redop: str | None) -> ReduceOp | None:
    """The op a row of nccl-tests' ``redop`` is simulated with (:data:`_OPS`); None
    where it names none (a collective that reduces nothing, a table without the column:
    the run's default, a sum; a name nccl-tests does not print, which :func:`size_runs`
    refuses)."""
    return None if redop is None else _OPS.get(redop)


def check_rows(table: NcclTestsTable, coll: Collective) -> None:
    """Refuse a row whose type or redop nccl-tests does not print.

    Raises:
        InvalidInputError: naming the row's size and line, and what is known.
    """
    for row in table.rows:
        if row.type not in ITEMSIZE:
            raise InvalidInputError(f"the row of size {row.size} (line {row.line}) has type "
                                    f"{row.type!r}, none nccl-tests prints; known: "
                                    f"{', '.join(ITEMSIZE)}")
        if coll.reduces and row.redop not in NO_REDOP and row.redop not in _OPS:
            raise InvalidInputError(f"the row of size {row.size} (line {row.line}) has redop "
                                    f"{row.redop!r}, none nccl-tests prints; known: "
                                    f"{', '.join(_OPS)}")


def size_runs(table: NcclTestsTable, coll: Collective, topology: Topology) -> list[SizeRun]:
    """One :class:`SizeRun` per row of ``table`` on ``topology``.

    Raises:
        InvalidInputError: an empty table, one measured on another rank count or on one
            GPU, a size that gives a rank no whole element, or a root beyond the
            machine's ranks.
    """
    if not table.rows:
        raise InvalidInputError("the table has no rows")
    if topology.nranks == 1:
        raise InvalidInputError("the machine has one GPU: a collective there moves nothing "
                                "and simulates in no time, where nccl-tests times a copy "
                                "in the GPU's memory; compare a table of 2 or more ranks")
    if table.nranks is not None and table.nranks != topology.nranks:
        split = "" if table.communicators == 1 else (
            f" (communicators of {table.nranks}, {table.communicators} of them at once: "
            f"NCCL_TESTS_SPLIT; build the machine of one)")
        raise InvalidInputError(f"the table was measured on {table.nranks} ranks{split}, but "
                                f"the machine has {topology.nranks}")
    check_rows(table, coll)
    runs = []
    for row in table.rows:
        dtype = simulated_dtype(row.type)
        nbytes, _, _ = nccl_shape(coll, topology.nranks, row.size, dtype.itemsize)
        root = row.root if coll.rooted and row.root is not None and row.root >= 0 else None
        if root is not None and root >= topology.nranks:
            raise InvalidInputError(f"the row of size {row.size} (line {row.line}) has root "
                                    f"{root}, but the machine has {topology.nranks} ranks")
        kwargs: dict[str, Any] = {} if root is None else {"root": root}
        op = simulated_op(row.redop) if coll.reduces else None
        if op is not None:
            kwargs["op"] = op
        runs.append(SizeRun(nbytes, dtype, kwargs))
    empty = [row.size for row, run in zip(table.rows, runs) if run.nbytes == 0]
    if empty:
        raise InvalidInputError(f"sizes {empty} give each of the {topology.nranks} ranks no "
                                f"whole element of {coll.name}; drop them with "
                                f"table.between(low=...) (on the command line, "
                                f"--min-size)")
    return runs


def measured_times(table: NcclTestsTable, place: str) -> list[float]:
    """The ``place`` block's time of each row, seconds.

    Raises:
        InvalidInputError: an unknown place, a row without that block, a time that is
            not above 0 (a hand-built row; the parser reads 0 only for sizes of 0), or a
            table of ``-C 1``'s CPU times.
    """
    if table.cputime:
        raise InvalidInputError("the table's times are nccl-tests -C 1's cputime: the host's "
                                "time to launch the operations, not the time they took; "
                                "use a log run without -C (or with -C 0)")
    times = []
    for row in table.rows:
        time = row.measurement(place).time
        if not time > 0:
            raise InvalidInputError(f"the row of size {row.size} (line {row.line}) has an "
                                    f"{place.replace('_', '-')} time of {time!r} s; a time "
                                    f"above 0 is needed to compare with")
        times.append(time)
    return times


def table_collective(table: NcclTestsTable, collective: str | None) -> Collective:
    """The collective to simulate: ``collective``, else the one the table measured.

    Raises:
        InvalidInputError: ``table`` is not a parsed table, neither names one, or
            ``collective`` is not the one the table names.
        UnknownCollectiveError: the name is not a collective.
    """
    if not isinstance(table, NcclTestsTable):
        raise InvalidInputError(f"table={table!r:.80} is not accepted; give a parsed nccl-tests "
                                f"table (simcoll.nccl_tests.parse(text))")
    if collective is not None and not isinstance(collective, str):
        raise InvalidInputError(f"collective={shown(collective)} is not accepted; give a "
                                f"collective's name, or None for the table's")
    name = table.collective if collective is None else collective
    if name is None:
        raise InvalidInputError("the table does not say which collective it measured; pass "
                                "collective='all_reduce' (or the one measured)")
    check_simulated(name)
    coll = get_collective(name)
    measured = table.collective
    if collective is not None and measured is not None:
        with contextlib.suppress(SimCollError):   # sendrecv: no simcoll collective
            measured = get_collective(measured).name
        if measured != coll.name:
            raise InvalidInputError(f"collective {collective!r} was given, but the table "
                                    f"measured {table.collective!r}")
    return coll


_NOT_SIMULATED = ("sendrecv", "hypercube", "alltoallv")
"""nccl-tests programs with no simcoll collective (``alltoallv`` sends a pattern of its
own, weighted by distance, that ``all_to_allv`` would need as a matrix)."""


def check_simulated(name: str) -> None:
    """Refuse a table of an nccl-tests program simcoll has no collective for.

    Raises:
        InvalidInputError: naming the program.
    """
    if name in _NOT_SIMULATED:
        raise InvalidInputError(f"the table measured nccl-tests' {name}_perf, which is no "
                                f"collective simcoll simulates (nor are "
                                f"{', '.join(n for n in _NOT_SIMULATED if n != name)}); "
                                f"parse reads it, compare and calibrate cannot run it")


_FROM_ROWS = ("nbytes", "dtype", "op", "root", "src", "dst", "data", "splits")
"""simulate()'s arguments that each row of a table gives (its size, type, op and root;
its runs are data-free)."""


def check_row_arguments(simulate_kwargs: Mapping[str, Any]) -> None:
    """Refuse arguments of simulate() that the rows give (:data:`_FROM_ROWS`).

    Raises:
        InvalidInputError: naming them.
    """
    given = [f"{name}=" for name in _FROM_ROWS if name in simulate_kwargs]
    if given:
        raise InvalidInputError(f"{', '.join(given)} cannot be given: each row of the table "
                                f"gives its run's size, type, op and root (and its runs are "
                                f"data-free); leave {'it' if len(given) == 1 else 'them'} "
                                f"out")


Timed = tuple[float, dict[str, Any]]
"""One size's simulated time (seconds) and run parameters (:attr:`simcoll.Result.params`)."""


def _timed(topology: Topology, collective: str, algorithm: str, nbytes: int,
           dtype: np.dtype[Any], kwargs: Mapping[str, Any]) -> Timed:
    result = simulate(topology, collective, algorithm=algorithm, nbytes=nbytes, dtype=dtype,
                      **kwargs)
    return result.time, dict(result.params)


def check_workers(workers: Any) -> int:
    """``workers`` as an int >= 1.

    Raises:
        InvalidInputError: naming the value and what is accepted.
    """
    return integer(workers, "workers", minimum=1,
                   what="processes that simulate the sizes; 1 runs them here")


def check_picklable(topology: Topology, simulate_kwargs: Mapping[str, Any]) -> None:
    """Refuse, before any work, a machine or parameters worker processes cannot receive.

    Raises:
        InvalidInputError: naming what failed and what to do.
    """
    try:
        pickle.dumps((topology, dict(simulate_kwargs)))
    except Exception as exc:
        raise InvalidInputError(f"the machine or the parameters cannot be sent to worker "
                                f"processes ({type(exc).__name__}: {exc}); use workers=1 "
                                f"or a topology and parameters that pickle") from None


def run_sizes(topology: Topology, coll: Collective, runs: Sequence[SizeRun], algorithm: str,
              bar: Any = None, pool: Executor | None = None,
              **simulate_kwargs: Any) -> list[Timed]:
    """Each size simulated, data-free, on ``topology``: in this process, or spread over
    ``pool``'s processes (the same simulations, so the same times); a step of ``bar`` per
    size, where there is one. ``pool`` is a :func:`simcoll.processes.local_pool`, which
    ends the sizes queued and running itself when this raises (Ctrl-C included)."""
    calls = [(topology, coll.name, algorithm, run.nbytes, run.dtype,
              {**run.kwargs, **simulate_kwargs}) for run in runs]
    futures = [] if pool is None else [pool.submit(_timed, *call) for call in calls]
    results = (_timed(*call) for call in calls) if pool is None else \
        (future.result() for future in futures)
    done = []
    try:
        for result in results:
            done.append(result)
            if bar is not None:
                bar.update()
    except SimCollError as exc:   # a size that cannot run: the others queued need not either
        for future in futures:
            future.cancel()
        if len(exc.args) == 1 and not isinstance(exc, InvalidInputError):
            # a run's failure at a size (a run limit), not a refusal of its arguments:
            # the size goes in the message, which the command line prints and a
            # worker's pickle keeps (str(self)), not in a note, which neither does
            failed = runs[len(done)]
            exc.args = (f"at size {failed.nbytes} B ({failed.dtype}): {message_of(exc)}",)
        raise
    return done


Setting = tuple[str, str | None, int | None]
"""A table row's element type, redop and root, as the table printed them."""


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found: a table's measured times beside the simulated ones.

    Attributes:
        collective, algorithm: what was simulated.
        topology: the machine's name.
        nranks: the machine's ranks.
        place: the table's block compared, ``"out_of_place"`` or ``"in_place"``.
        sizes: the table's size column (bytes).
        measured, simulated: the times per size, seconds.
        measured_busbw: the table's busbw per size, bytes per second.
        busbw_factor: nccl-tests' bus factor of the collective on ``nranks`` ranks.
        params: each size's run parameters (:attr:`simcoll.Result.params`), what the
            algorithm chose included.
        wrong: the sizes whose ``#wrong`` was above 0 (nccl-tests found wrong values
            there); compared all the same, and named in the report.
        settings: each row's element type, redop and root as the table printed them
            (a table of ``-d all`` or ``-o all`` holds a size once per type or op; the
            report then shows them).
        wrong_rows: per row, whether its ``#wrong`` was above 0 (where a size comes once
            per type or op, which of its rows; the report names their settings).
    """

    collective: str
    algorithm: str
    topology: str
    nranks: int
    place: str
    sizes: tuple[int, ...]
    measured: tuple[float, ...]
    simulated: tuple[float, ...]
    measured_busbw: tuple[float, ...]
    busbw_factor: float
    params: tuple[Mapping[str, Any], ...] = field(hash=False)
    wrong: tuple[int, ...] = ()
    settings: tuple[Setting, ...] = ()
    wrong_rows: tuple[bool, ...] = ()

    @property
    def error(self) -> tuple[float, ...]:
        """(simulated - measured) / measured per size: below 0 where the simulation is
        faster than the measured run."""
        return tuple(s / m - 1 for s, m in zip(self.simulated, self.measured))

    @property
    def geomean_error(self) -> float:
        """The geometric-mean |time error|, exp(mean |ln(simulated / measured)|) - 1 over
        the sizes: the factor by which the times differ on average, less 1 (see
        :func:`geomean_error`)."""
        return geomean_error(self.simulated, self.measured)

    @property
    def simulated_busbw(self) -> tuple[float, ...]:
        """nccl-tests' busbw of each simulated time (size / time x the bus factor),
        bytes per second."""
        return tuple(size / t * self.busbw_factor for size, t in zip(self.sizes, self.simulated))

    @property
    def choices(self) -> tuple[str, ...]:
        """What the algorithm ran at each size, as ``"nvls_tree Simple 16"`` (its
        ``algo``, ``proto`` and ``channels``, where it has them), else ``""``."""
        return tuple(" ".join(str(p[k]) for k in CHOICES if k in p) for p in self.params)

    def report(self) -> str:
        """The sizes measured and simulated, as text: per size the error simulated /
        measured - 1, then the geometric-mean |time error| and what it is, and the sizes
        with ``#wrong`` above 0."""
        keys = [k for k in CHOICES if any(k in p for p in self.params)]
        named, choices = aligned(keys, [[str(p.get(k, "-")) for k in keys]
                                        for p in self.params]) if keys else ("", [""] * len(
                                            self.params))
        width = size_width(self.sizes)
        # Where rows differ in type, redop or root (-d all, -o all), each row says its own.
        settings, shown = setting_columns(self.settings, len(self.sizes))
        varied = bool(settings)
        head = f"{settings}  " if varied else ""
        lines = [" " * width + " " * len(head) + "        time (us)                     "
                 "busbw (GB/s)",
                 f"{'size':>{width}}  {head}   measured   simulated     error     measured   "
                 f"simulated  " + named]
        for size, what, m, s, e, bm, bs, chosen in zip(
                self.sizes, shown, self.measured, self.simulated, self.error,
                self.measured_busbw, self.simulated_busbw, choices):
            label = f"{what}  " if varied else ""
            lines.append(f"{size:>{width}d}  {label}{m * 1e6:>11.2f} {s * 1e6:>11.2f}  "
                         f"{e:>+8.1%}  {bm / 1e9:>11.2f} {bs / 1e9:>11.2f}  {chosen}")
        lines = [line.rstrip() for line in lines]
        lines += [""] + geomean_line(
            "geometric-mean |time error|", [self.simulated], self.measured, [""],
            f"over {counted_rows(self.sizes)} "
            f"({self.collective}, {self.algorithm} on "
            f"{self.topology}, {self.place.replace('_', '-')} times)")
        if self.wrong:
            rows = wrong_labels(self.sizes, shown)
            lines.append(wrong_note([n for n, bad in zip(rows, self.wrong_rows) if bad]
                                    or self.wrong, "compared all the same"))
        return "\n".join(lines)

    def to_pandas(self) -> Any:
        """One DataFrame row per row of the table: ``size`` (then ``type``, ``redop`` and
        ``root`` where the rows' settings differ, as in a table of ``-d all``, which holds
        a size once per type), ``measured`` and ``simulated`` (seconds), ``error``,
        ``measured_busbw`` and ``simulated_busbw`` (bytes per second), and the
        algorithm's choices (``algo``, ``proto``, ``channels``) where it has them.

        Raises:
            ImportError: pandas is missing (``pip install "simcoll[pandas]"``).
        """
        pd = optional.pandas("Comparison.to_pandas")
        columns: dict[str, Any] = {"size": list(self.sizes)}
        if settings_differ(self.settings, len(self.sizes)):
            columns.update(zip(SETTING_HEADS, map(list, zip(*self.settings))))
        columns |= {
            "measured": list(self.measured),
            "simulated": list(self.simulated), "error": list(self.error),
            "measured_busbw": list(self.measured_busbw),
            "simulated_busbw": list(self.simulated_busbw)}
        for key in CHOICES:
            if any(key in p for p in self.params):
                columns[key] = [p.get(key) for p in self.params]
        return pd.DataFrame(columns)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: every field and the derived columns."""
        return {"collective": self.collective, "algorithm": self.algorithm,
                "topology": self.topology, "nranks": self.nranks, "place": self.place,
                "sizes": list(self.sizes),
                "measured": list(self.measured), "simulated": list(self.simulated),
                "error": list(self.error), "geomean_error": self.geomean_error,
                "measured_busbw": list(self.measured_busbw),
                "simulated_busbw": list(self.simulated_busbw),
                "busbw_factor": self.busbw_factor,
                "params": [dict(p) for p in self.params], "wrong": list(self.wrong),
                "settings": [list(x) for x in self.settings],
                "wrong_rows": list(self.wrong_rows)}


def counted_rows(sizes: Sequence[int]) -> str:
    """``5 sizes``, or ``120 rows`` where a size repeats (nccl-tests' ``-d all``: a row
    per type)."""
    unit = "size" if len(set(sizes)) == len(sizes) else "row"
    return f"{len(sizes)} {unit}{'' if len(sizes) == 1 else 's'}"


def aligned(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> tuple[str, list[str]]:
    """``heads`` and each row of words (one per head) in columns as wide as their widest,
    the head's included, joined by a space: ``("type     redop root", [...])``."""
    widths = [max(len(head), *(len(row[i]) for row in rows)) for i, head in enumerate(heads)]

    def line(words: Sequence[str]) -> str:
        return " ".join(w.ljust(width) for w, width in zip(words, widths))

    return line(heads), [line(row) for row in rows]


SETTING_HEADS = ("type", "redop", "root")


def setting_columns(settings: Sequence[Setting], rows: int) -> tuple[str, list[str]]:
    """The head (``type redop root``) and each of ``rows`` rows' type, redop and root as
    a report prints them (``-`` for none), in columns as wide as their widest (the
    head's words included); ``""`` and all ``""`` where the rows agree in them (a
    report then leaves them out) or ``settings`` does not give one per row."""
    if not settings_differ(settings, rows):
        return "", [""] * rows
    return aligned(SETTING_HEADS, [setting_words(s) for s in settings])


def settings_differ(settings: Sequence[Setting], rows: int) -> bool:
    """Whether ``settings`` gives each of ``rows`` rows its own and they differ (a table
    of ``-d all`` or ``-o all``), so that a report or a DataFrame must tell them apart."""
    return len(settings) == rows and len(set(settings)) > 1


def setting_words(setting: Setting) -> list[str]:
    """A row's type, redop and root as reports and plots write them (``-`` for none)."""
    dtype, op, root = setting
    return [dtype, op or "-", "-" if root is None or root < 0 else str(root)]


def wrong_labels(sizes: Sequence[int], labels: Sequence[str]) -> list[int | str]:
    """The sizes of the rows whose ``#wrong`` is above 0 as :func:`wrong_note` names
    them: with their labels of :func:`setting_columns` where those are not empty."""
    return [f"{size} ({' '.join(label.split())})" if label else size
            for size, label in zip(sizes, labels)]


def wrong_note(sizes: Sequence[int | str], then: str) -> str:
    """The note on the sizes (or rows, named) whose ``#wrong`` is above 0, and ``then``
    what was done."""
    return (f"note: nccl-tests found wrong values (#wrong > 0) at size{'s' * (len(sizes) > 1)} "
            f"{', '.join(str(s) for s in sizes)}: that run computed a wrong result there; "
            f"{then}")


def compare(topology: Topology, table: NcclTestsTable, *, collective: str | None = None,
            algorithm: str = "ring", place: str = "out_of_place",
            progress: bool | None = None, workers: int = 1,
            **simulate_kwargs: Any) -> Comparison:
    """Simulate every size of ``table`` on ``topology`` and set it beside the measured one.

    Args:
        topology: the machine.
        table: the measurements, from :func:`simcoll.nccl_tests.parse`.
        collective: the collective simulated; by default the table's.
        algorithm: the registered algorithm to simulate (``"nccl"``: NCCL's own choice
            per size; pass ``tuner=table.nccl_version`` to choose as that release does).
        place: the table's block to compare with, ``"out_of_place"`` or ``"in_place"``.
        progress: a tqdm progress bar of the sizes on stderr; ``None`` shows it when
            stderr is a terminal.
        workers: local processes that simulate the sizes (1: in this process); each
            size's simulation is the same either way, and so is the result.
        **simulate_kwargs: passed to :func:`simcoll.simulate` (``network=``, algorithm
            parameters, ...).

    Returns:
        The times, busbw and choices per size, the error, and the sizes where the
        table counted wrong values (``#wrong`` above 0), which the report names.

    Raises:
        InvalidInputError: an empty table, a table without ``place``'s block or measured
            on another rank count, a size that gives a rank no whole element, a time not
            above 0 (or of -C 1's CPU time), a root beyond the machine's ranks, a
            collective the table does not name, a ``progress`` that is not True, False or
            None, ``workers`` that is not an integer >= 1, a ``collective`` other than
            the one the table names, or
            (with workers) a machine or parameters that do not pickle; all before the
            first simulation.
        UnknownAlgorithmError: ``algorithm`` is not registered for the collective,
            before the first simulation.
        SimCollError: a size's run failed (a :class:`~simcoll.errors.RunLimitError`
            past ``until=``, say), its message beginning with the size and type.
    """
    if not isinstance(topology, Topology):
        raise InvalidInputError(f"topology={topology!r} is not a Topology; build one with "
                                f"sc.topology (a preset or a builder)")
    check_row_arguments(simulate_kwargs)
    coll = table_collective(table, collective)
    runs = size_runs(table, coll, topology)
    times = measured_times(table, place)
    get_algorithm(coll.name, algorithm)   # an unknown one named as such, not at a size
    check_progress(progress)
    workers = check_workers(workers)
    if workers > 1:
        check_picklable(topology, simulate_kwargs)
    with progress_bar(progress, total=len(runs), desc=f"compare {coll.name}",
                      unit="size") as bar, local_pool(min(workers, len(runs))) as pool:
        timed = run_sizes(topology, coll, runs, algorithm, bar, pool, **simulate_kwargs)
    return Comparison(coll.name, algorithm, topology.name, topology.nranks, place,
                      table.sizes, tuple(times), tuple(t for t, _ in timed),
                      tuple(row.measurement(place).busbw * 1e9 for row in table.rows),
                      float(coll.busbw_factor(topology.nranks)),
                      tuple(params for _, params in timed), table.wrong_sizes(place),
                      tuple((row.type, row.redop, row.root) for row in table.rows),
                      table.wrong_rows(place))
