"""``simcoll sweep``: a grid of algorithms x rank counts x sizes, through ``sc.sweep``."""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from simcoll.algorithms.registry import get_algorithm
from simcoll.cli.nccl_env import MIN_BW, nccl_variables
from simcoll.cli.options import (
    SIZE_HELP,
    SWEEP_OPTIONS,
    CommandLineError,
    Once,
    add_run_options,
    check_output,
    parse_bytes,
    plural,
    processes,
    refuse_overflow,
    resolve_dtype,
    run_kwargs,
)
from simcoll.cli.writing import ctrl_c_held
from simcoll.collectives import collective as get_collective
from simcoll.errors import InvalidInputError
from simcoll.files import sibling, write_atomically
from simcoll.sweep import load_results
from simcoll.sweep.driver import stream
from simcoll.sweep.grid import make_grid
from simcoll.sweep.records import point_key
from simcoll.sweep.storage import remove_unless_open
from simcoll.topology.catalog import parameters
from simcoll.topology.graph import Topology
from simcoll.topology.spec import from_spec, is_file_spec

__all__ = ["add_parser", "topology_for", "template"]

_FORMATS = (".csv", ".json", ".jsonl")


def add_parser(sub: Any) -> None:
    """Add ``sweep`` to the subcommands."""
    p = sub.add_parser("sweep", help="a grid of algorithms x ranks x sizes to CSV / JSON",
                       description="Simulate every algorithm x rank count x size in "
                                   "data-free mode (with sc.sweep) and write one record per "
                                   "point. {p} in --topology stands for each value of "
                                   "--ranks; builders whose first parameter is n (switch, "
                                   "ring, fully_connected) get it there by default.")
    add_run_options(p, sweep=True)
    p.add_argument("--algorithms", required=True, type=_names, metavar="A,B,...", action=Once,
                   help="algorithms to compare, e.g. ring,naive")
    p.add_argument("--ranks", required=True, type=_ints, metavar="P,Q,...", action=Once,
                   help="values of {p} in --topology, e.g. 2,4,8,16")
    p.add_argument("--sizes", required=True, type=_sizes, metavar="S,T,...", action=Once,
                   help=f"each rank's input buffer (simulate's nbytes), e.g. 1M,64M; "
                        f"{SIZE_HELP}")
    p.add_argument("--workers", action=Once, type=processes, default=1, metavar="N",
                   help="processes to use (default 1)")
    p.add_argument("--output", metavar="PATH", action=Once,
                   help="write .csv, .json or .jsonl at the end (default: CSV on standard "
                        "output, a row per point as it finishes, in grid order); finished "
                        "points are kept in PATH.partial.jsonl until the end (its name "
                        "shortened where the folder takes no name that long)")
    p.add_argument("--json", action="store_true",
                   help="JSON lines instead of CSV on standard output, also a line per "
                        "point as it finishes")
    p.set_defaults(handler=_run)


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",")]
    if "" in names:
        raise argparse.ArgumentTypeError(f"{text!r} has an empty entry; give names or "
                                         f"numbers separated by single commas")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} given twice; give each once")
    return names


def _ints(text: str) -> list[int]:
    names = _names(text)
    if not all(t.isascii() and t.isdigit() for t in names):
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole numbers (digits "
                                         f"0-9), e.g. 2,4,8")
    padded = [t for t in names if len(t) > 1 and t.startswith("0")]
    if padded:   # 10 to Python, 8 to C's strtol, as NCCL's variables and -r are read
        raise argparse.ArgumentTypeError(f"{padded[0]!r} has a leading zero; write the "
                                         f"number without it")
    values = [int(t) for t in names]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give whole numbers >= 1")
    return values


def _sizes(text: str) -> list[int]:
    sizes = [parse_bytes(t) for t in _names(text)]
    if len(set(sizes)) < len(sizes):
        raise argparse.ArgumentTypeError(f"{text!r} gives a size twice; give each once")
    return sizes


def template(spec: str) -> str:
    """``spec`` with a ``{p}`` where each rank count goes (a topology file as it is).

    Raises:
        CommandLineError: a builder without ``{p}`` whose first parameter is not ``n`` (or
            whose ``n`` is already given).
        TopologyError: an empty spec, or an argument between two commas is empty
            (naming ``spec``).
    """
    if not spec.strip():
        from_spec(spec)  # refused as 'simcoll run' refuses it
    if "{p}" in spec or is_file_spec(spec):
        return spec  # a file is one machine: --ranks must be its GPU count
    name, colon, args = spec.partition(":")
    if any(not a.strip() for a in args.split(",")[:-1]):
        from_spec(spec)  # an empty argument: refused as typed, as 'simcoll run' refuses it
    example = "'cluster:nodes={p},gpus_per_node=8'"
    first = parameters(name.strip())[0].name
    keys = {a.partition("=")[0].strip() for a in args.split(",") if "=" in a}
    positional = any("=" not in a for a in args.split(",") if a.strip())
    if first == "n" and not positional and not keys & {"n", "ranks"}:
        return f"{name}:{{p}}" + (f",{args}" if args.strip() else "")
    raise CommandLineError(f"--topology {spec!r} does not say where the rank count goes; "
                           f"write {{p}} in it, e.g. {example}")


def topology_for(spec_template: str, p: int) -> Topology:
    """The topology for one value of ``{p}``."""
    return from_spec(spec_template.replace("{p}", str(p)))


def _topology_of_ranks(spec_template: str, values: tuple[tuple[int, int], ...],
                       nranks: int) -> Topology:
    """The topology with ``nranks`` GPUs: ``{p}`` is the value that builds that many
    (``sc.sweep`` counts ranks; ``{p}`` may count nodes)."""
    return topology_for(spec_template, dict(values)[nranks])


class _CsvRows:
    """CSV rows of records, written to ``out`` as they come: their scalar fields,
    ``params`` and ``chosen`` as JSON, and ``error`` as ``"ErrorType: message"``. The
    columns are those of the first record that ran: failed records before it wait for it
    (or for :meth:`close`, if none ran)."""

    def __init__(self, out: TextIO):
        self._out = out
        self._writer: csv.DictWriter[str] | None = None
        self._waiting: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        """Write ``record``'s row (and those waiting), or keep a failure until a record
        that ran gives the columns."""
        if self._writer is None and record["error"] is not None:
            self._waiting.append(record)
            return
        if self._writer is None:
            self._start(record)
        self._row(record)

    def close(self) -> None:
        """Write the rows still waiting: every record failed; the first gives the
        columns."""
        if self._writer is None and self._waiting:
            self._start(self._waiting[0])

    def _start(self, first: dict[str, Any]) -> None:
        fields = [k for k, v in first.items() if not isinstance(v, (list, dict))
                  or k in _JSON_COLUMNS]
        if "error" not in fields:
            fields.append("error")
        self._writer = csv.DictWriter(self._out, fields, extrasaction="ignore",
                                      lineterminator="\n")
        self._writer.writeheader()
        waiting, self._waiting = self._waiting, []
        for record in waiting:
            self._row(record)

    def _row(self, record: dict[str, Any]) -> None:
        assert self._writer is not None
        error = record["error"]
        self._writer.writerow({**record, **{k: json.dumps(record[k]) for k in _JSON_COLUMNS
                                            if k in record},
                               "error": None if error is None
                               else f"{error['type']}: {error['message']}"})


_JSON_COLUMNS = ("params", "chosen")


def _csv(records: list[dict[str, Any]]) -> str:
    """The CSV table of ``records`` (:class:`_CsvRows`)."""
    out = io.StringIO()
    rows = _CsvRows(out)
    for record in records:
        rows.add(record)
    rows.close()
    return out.getvalue()


class _Printer:
    """Records on standard output as the sweep hands them over, as JSON lines or CSV
    rows, each with its point's ``spec`` and flushed at once, so that the lines of the
    points finished before a Ctrl-C stay."""

    def __init__(self, as_json: bool, spec: str, values: dict[int, int]):
        self._spec, self._values = spec, values
        self._text = io.StringIO()
        self._rows = None if as_json else _CsvRows(self._text)

    def __call__(self, record: dict[str, Any]) -> None:
        """Print ``record`` (a CSV row may wait for the columns, see :class:`_CsvRows`)."""
        record = _with_spec(record, self._spec, self._values)
        if self._rows is None:
            self._text.write(json.dumps(record) + "\n")
        else:
            self._rows.add(record)
        self._print()

    def close(self) -> None:
        """Print the CSV rows still waiting (when no point ran)."""
        if self._rows is not None:
            self._rows.close()
            self._print()

    def _print(self) -> None:
        """Write out what is waiting, whole: Ctrl-C waits until it is flushed (an
        interrupt inside a buffered write can garble the line, a record being some 20 kB
        on 256 ranks, and one between taking and writing it would lose it)."""
        with ctrl_c_held():
            text = self._text.getvalue()
            self._text.seek(0)
            self._text.truncate()
            sys.stdout.write(text)
            sys.stdout.flush()


def _progress(out: Path | None) -> bool | None:
    """The sweep's bar: on a terminal (None: where standard error is one), but not
    between the lines a sweep without --output prints to a terminal."""
    isatty = getattr(sys.stdout, "isatty", None)
    return None if out is not None or not (isatty and isatty()) else False


def _with_spec(record: dict[str, Any], spec: str, values: dict[int, int]) -> dict[str, Any]:
    """``record`` with the spec of its machine: ``{p}`` is the value that built its
    rank count."""
    return {**record, "spec": spec.replace("{p}", str(values[record["nranks"]]))}


def _run(args: argparse.Namespace) -> int:
    if args.json and args.output is not None:
        raise CommandLineError("--json writes JSON lines to standard output; with --output "
                               "the file's extension (.csv, .json, .jsonl) chooses")
    spec = template(args.topology)
    kwargs = run_kwargs(args, SWEEP_OPTIONS)
    kwargs["dtype"] = dtype = resolve_dtype(args.dtype)
    if get_collective(args.collective).name == "barrier" and any(args.sizes):
        raise CommandLineError("a barrier moves no data; give --sizes 0")
    for size in args.sizes:
        if size % dtype.itemsize:
            raise CommandLineError(f"--sizes: {size} bytes is not a whole number of "
                                   f"{dtype} elements ({dtype.itemsize} bytes each)")
    for algorithm in args.algorithms:
        get_algorithm(args.collective, algorithm)
    values = _machines(spec, args.ranks)
    if kwargs.get("root", 0) < 0:
        raise CommandLineError(f"--root {kwargs['root']} is not a rank; give a root from 0 "
                               f"to {min(values) - 1}")
    outside = sorted(p for p in values if kwargs.get("root", 0) >= p)
    if outside:
        raise CommandLineError(f"--root {kwargs['root']} is not a rank of the machine of "
                               f"{outside[0]} ranks (--ranks {values[outside[0]]}); give a "
                               f"root below {min(values)}")
    for size in args.sizes:
        refuse_overflow("--sizes", size, size, max(values))
    out = None if args.output is None else check_output(args.output, _FORMATS,
                                                        topology=spec)
    unread = [name for name in nccl_variables(os.environ) if name != MIN_BW]
    if unread and "nccl" in args.algorithms:
        print(f"simcoll sweep: note: {', '.join(unread)} in the environment: not read by a "
              f"sweep (give nccl's choices with --param, such as --param proto=Simple)",
              file=sys.stderr)
    partial = None if out is None else sibling(out, suffix=".partial.jsonl")
    factory = functools.partial(_topology_of_ranks, spec, tuple(values.items()))
    axes = {"algorithms": args.algorithms, "ranks": list(values), "sizes": args.sizes}
    earlier = _earlier_points(partial, out, lambda: set(make_grid(
        factory, args.collective, **axes, kwargs=dict(kwargs)).order))
    printer = _Printer(args.json, spec, values) if out is None else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a truncated line: _earlier_points said so
            results = stream(printer or (lambda record: None), factory, args.collective,
                             **axes, workers=args.workers, save=partial,
                             progress=_progress(out),
                             **kwargs)
    except BaseException:
        if printer is not None:
            printer.close()  # failed points printed as CSV wait for a point that ran
        if partial is not None and len(_saved(partial)) > len(earlier):
            print(f"the points finished so far are in {partial}", file=sys.stderr)
        raise
    records = [_with_spec(r, spec, values) for r in results.records]
    if printer is not None:
        printer.close()
    else:
        assert out is not None and partial is not None
        _write_final(out, partial, records)
        _keep_others(partial, results.records)
    failed = sum(1 for r in records if r["error"] is not None)
    if failed:
        print(f"{failed} of {plural(len(records), 'point')} failed (their records say why)",
              file=sys.stderr)
    return 1 if failed else 0


def _machines(spec: str, ranks: list[int]) -> dict[int, int]:
    """The value of ``{p}`` in ``spec`` that builds each rank count, by rank count.

    Raises:
        CommandLineError: a topology file whose GPU count is not ``ranks``, or two values
            of ``ranks`` that build as many GPUs.
    """
    if "{p}" not in spec:
        nranks = from_spec(spec).nranks
        if ranks != [nranks]:
            raise CommandLineError(f"--topology {spec} is one machine of {nranks} GPUs; "
                                   f"give --ranks {nranks} (or a builder with {{p}})")
    values: dict[int, int] = {}
    for p in ranks:
        nranks = topology_for(spec, p).nranks
        if nranks in values:
            raise CommandLineError(f"--ranks: {{p}}={values[nranks]} and {{p}}={p} both build "
                                   f"{nranks} GPUs; give each machine once")
        values[nranks] = p
    return values


def _write(out: Path, records: list[dict[str, Any]]) -> None:
    """Write ``records`` to ``out``, in the format its extension names, saying so."""
    text = {".csv": lambda: _csv(records),
            ".json": lambda: json.dumps(records, indent=1) + "\n",
            ".jsonl": lambda: "".join(json.dumps(r) + "\n" for r in records)}
    write_atomically(out, lambda tmp: tmp.write_text(text[out.suffix.lower()](), encoding="utf-8"))
    print(f"{plural(len(records), 'point')} written to {out}", file=sys.stderr)


def _write_final(out: Path, partial: Path, records: list[dict[str, Any]]) -> None:
    """Write ``records`` to ``out`` (:func:`_write`); where that fails, say that the
    points are kept in ``partial``, which a sweep to ``out`` resumes from."""
    try:
        _write(out, records)
    except BaseException:
        print(f"the finished points are kept in {partial} (a sweep to {out} resumes from "
              f"it)", file=sys.stderr)
        raise


def _keep_others(partial: Path, records: tuple[dict[str, Any], ...]) -> None:
    """Delete ``partial``, unless it holds points of another grid than ``records``' or
    another sweep has it open (then keep it, saying so)."""
    ours = {point_key(r) for r in records}
    others = sum(1 for key in _saved(partial) if key not in ours)
    if others:
        print(f"{partial} also holds {plural(others, 'finished point')} of another grid; "
              f"it is kept (sc.load_results reads it)", file=sys.stderr)
    elif not remove_unless_open(partial):
        print(f"{partial} is kept: another sweep has it open, or it could not be locked "
              f"(sc.load_results reads it)", file=sys.stderr)


def _saved(partial: Path) -> set[tuple[Any, ...]]:
    """The points ``partial`` holds (none if it is missing or not a sweep's file)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a truncated last line: said at the start
            return {point_key(r) for r in load_results(partial).records}
    except (InvalidInputError, OSError):
        return set()


def _earlier_points(partial: Path | None, out: Path | None,
                    grid: Callable[[], set[tuple[Any, ...]]]) -> set[tuple[Any, ...]]:
    """The points an earlier sweep to ``out`` left in ``partial``, saying how many of them
    are of this ``grid`` (a function giving its points' keys).

    Raises:
        CommandLineError: ``partial`` is there but is a directory or not a sweep's file.
    """
    if partial is None or not partial.exists():
        return set()
    where = f"{partial}, where a sweep to {out} keeps its finished points,"
    if partial.is_dir():
        raise CommandLineError(f"{where} is a directory; move it away or give another "
                               f"--output")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = load_results(partial).records
    except InvalidInputError as exc:
        raise CommandLineError(f"{where} is not a sweep's file ({exc}); delete it or give "
                               f"another --output") from None
    for warning in caught:
        print(f"simcoll sweep: note: {warning.message}", file=sys.stderr)
    keys = {point_key(r) for r in records}
    if keys:
        print(f"simcoll sweep: {partial} holds {plural(len(keys), 'finished point')}, "
              f"{len(keys & grid())} of this grid (not run again)", file=sys.stderr)
    return keys
