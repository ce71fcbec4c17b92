"""``simcoll run``: nccl-tests' ``*_perf`` on a simulated machine, one row per size."""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from simcoll.algorithms.registry import get_algorithm
from simcoll.cli import checking, json_out, nccl_flags, table
from simcoll.cli.nccl_env import nccl_environment, tests_min_bw
from simcoll.cli.options import (
    SIZE_HELP,
    CommandLineError,
    Once,
    add_run_options,
    check_output,
    check_root_rank,
    default_algorithm,
    parse_bytes,
    plural,
    refuse_overflow,
    resolve_dtype,
    run_kwargs,
    run_settings,
    whole,
)
from simcoll.cli.waiting import still_running
from simcoll.cli.writing import ctrl_c_held
from simcoll.collectives import collective as get_collective
from simcoll.errors import InvalidInputError, TopologyError
from simcoll.inputs import check_inputs
from simcoll.nccl_tests import nccl_shape
from simcoll.ops import ReduceOp
from simcoll.simulate import simulate
from simcoll.topology.graph import Topology
from simcoll.topology.spec import from_spec

__all__ = ["add_parser", "sizes", "chosen", "nccl_graphs"]

MAX_SIZES = 10_000
"""Collectives whose buffer nccl-tests cuts into one block per rank: it rounds the size
down to whole blocks and reports the block's count (``*GetCollByteCount``)."""
_NCCL_NAMES = {"float16": "half", "float32": "float", "float64": "double",
               "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
_NCCL_OPS = {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "AVG": "avg"}
_CSV_FIELDS = ["collective", "algorithm", "spec", "network", "nranks", "size", "count",
               "type", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps", "wrong"]

DESCRIPTION = "\n\n".join(textwrap.fill(text, 88) for text in [
    "Simulate one collective over a range of sizes and print nccl-tests' table.",
    "Sizes follow nccl-tests: -b/-e give the size column, the larger of a rank's send and "
    "receive buffers (all_gather and gather: p times each rank's input); sizes grow by -f "
    f"(a factor) or else by -i (bytes). {SIZE_HELP}.",
    "Without -c the run is data-free (sizes only) and #wrong is N/A; with -c every rank "
    "moves real random arrays (whole numbers that reduce exactly in any order) and #wrong "
    "counts elements that fail the numpy check.",
    "Exit status: 0, 1 if a check failed (the numpy check, or NCCL_TESTS_MIN_BW's: an "
    "average busbw below 0.9 times it), the simulation did (a run limit reached) or a "
    "write did (a full disk), 2 for bad "
    "arguments (or a run out of memory), 130 on Ctrl-C, 141 if standard output was closed "
    "(| head), as a shell reports a command that SIGINT or SIGPIPE ended."])


def add_parser(sub: Any) -> None:
    """Add ``run`` to the subcommands."""
    p = sub.add_parser("run", help="nccl-tests' *_perf on a simulated machine",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p, every=True)
    p.add_argument("-b", "--minbytes", type=parse_bytes, metavar="SIZE",
                   help="smallest size (default 32M)")
    p.add_argument("-e", "--maxbytes", type=parse_bytes, metavar="SIZE",
                   help="largest size (default 32M, or -b where that is larger)")
    p.add_argument("-i", "--stepbytes", type=parse_bytes, default=2**20, metavar="SIZE",
                   help="size increment when -f is 0 or 1 (default 1M)")
    p.add_argument("-f", "--stepfactor", type=whole, default=1, metavar="N",
                   help="size multiplication factor (default 1; 0 or 1: add -i instead, as "
                        "nccl-tests does)")
    p.add_argument("--size", type=parse_bytes, action=Once,
                   help="one size (same as -b SIZE -e SIZE)")
    p.add_argument("-c", "--check", nargs="?", type=whole, const=1, default=0,
                   metavar="N",
                   help="data mode: move real arrays and check them with numpy (-c, or "
                        "-c N >= 1: nccl-tests' check iterations, which a simulation "
                        "repeats identically; -c 0: off, the default)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print CSV instead of the table")
    out.add_argument("--json", action="store_true",
                     help="print one JSON object per size (JSON lines)")
    nccl_flags.add_options(p)
    p.set_defaults(handler=run, topology=None)


def sizes(minbytes: int, maxbytes: int, stepbytes: int, stepfactor: int) -> list[int]:
    """nccl-tests' size loop: from -b while <= -e, times -f if -f > 1, else plus -i
    (-f 0 is -f 1, as nccl-tests multiplies only where the factor is above 1).

    Raises:
        CommandLineError: -b above -e, a loop that would not grow, or over 10,000 sizes.
    """
    stepfactor = max(stepfactor, 1)
    if minbytes > maxbytes:
        raise CommandLineError(f"invalid sizes: -b {minbytes} is larger than -e {maxbytes}")
    if minbytes < maxbytes and (stepfactor == 1 and stepbytes == 0 or
                                stepfactor > 1 and minbytes == 0):
        raise CommandLineError("the sizes never grow: use -b >= 1 with -f, or -i >= 1")
    steps = (maxbytes - minbytes) // stepbytes if stepfactor == 1 and stepbytes else 0
    if steps >= MAX_SIZES:
        raise CommandLineError(f"-b {minbytes} -e {maxbytes} -i {stepbytes} gives "
                               f"{steps + 1} sizes; at most {MAX_SIZES}: raise -i or use -f")
    out = [minbytes]
    while True:
        nxt = out[-1] * stepfactor if stepfactor > 1 else out[-1] + stepbytes
        if nxt > maxbytes or nxt == out[-1]:
            return out
        out.append(nxt)


def _bounds(args: argparse.Namespace) -> tuple[int, int]:
    """The smallest and largest size asked for (``-b`` / ``-e``, or ``--size`` for both;
    none for a barrier, which moves no data: 0 if given, as a sweep's --sizes)."""
    if args.collective == "barrier":
        if any((args.size, args.minbytes, args.maxbytes)):
            raise CommandLineError("a barrier moves no data; leave out --size, -b and -e "
                                   "(or give 0)")
        return 0, 0
    if args.size is not None:
        if args.minbytes is not None or args.maxbytes is not None:
            raise CommandLineError("give --size or -b/-e, not both")
        return args.size, args.size
    low = 32 * 2**20 if args.minbytes is None else args.minbytes
    high = max(low, 32 * 2**20) if args.maxbytes is None else args.maxbytes
    if args.minbytes is None and high < low:
        raise CommandLineError(f"invalid sizes: -e {high} is below -b's default, 32M "
                               f"({low}); give -b too")
    return low, high


def _requested(args: argparse.Namespace) -> list[int]:
    low, high = _bounds(args)
    if args.size is not None:
        return [args.size]
    return sizes(low, high, args.stepbytes, args.stepfactor)


ALL_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
             "bfloat16", "f8e4m3", "f8e5m2")
"""``-d all``: nccl-tests' types, in its order (``test_typenames``)."""
ALL_OPS = ("sum", "prod", "max", "min", "avg")
"""``-o all``: nccl-tests' reductions, in its order (``test_opnames``, without its
``mulsum``, a pre-multiplied sum, which ``-o mulsum`` runs as ``avg``)."""
_MULSUM_LEFT_OUT = ("# left out: mulsum: a pre-multiplied sum, which costs what avg does "
                    "(NCCL computes avg as one); -o mulsum runs it as avg")


def _settings(args: argparse.Namespace, p: int) -> list[tuple[str, str | None, int | None]]:
    """The (type, op, root) of each part of the table: one, or with ``-d all``,
    ``-o all`` or ``-r all`` every combination, as nccl-tests loops them (types, then
    ops, then roots)."""
    types = ALL_TYPES if args.dtype == "all" else (args.dtype,)
    ops = ALL_OPS if args.op == "all" else (args.op,)
    roots = range(p) if args.root == "all" else (args.root,)
    return [(t, o, r) for t in types for o in ops for r in roots]


EVERY = ("dtype", "op", "root")
"""The options that take ``all``."""


Rows = Iterator[tuple[table.Row, dict[str, Any]]]


def _parts(args: argparse.Namespace, topo: Topology, kwargs: dict[str, Any],
           requested: list[int], parts: list[tuple[tuple[table.Row, dict[str, Any]], Rows]],
           skipped: list[str]) -> None:
    """Fill ``parts`` with each (type, op, root) part's first row and the rest of its
    rows, every size checked and the first row simulated before any is printed (a stop
    meanwhile leaves those done in ``parts``); with ``-d all``, ``-o all`` or ``-r all``,
    ``skipped`` with the notes on the parts this run cannot simulate (an element type
    that needs ml_dtypes, one the algorithm or NCCL refuses), which are left out as
    nccl-tests leaves out the types its NCCL lacks.

    Raises:
        CommandLineError: a part that cannot run where it was named alone.
    """
    for dtype, op, root in _settings(args, topo.nranks):
        settings = argparse.Namespace(**{**vars(args), "dtype": dtype, "op": op, "root": root})
        rows = _rows(settings, topo, {**kwargs, **run_kwargs(settings)}, requested)
        try:
            first = next(rows)
        except (InvalidInputError, CommandLineError) as exc:
            if all(getattr(args, key) != "all" for key in EVERY):
                raise
            what = " ".join(str(v) for v in (dtype, op, root) if v is not None)
            skipped.append(f"# left out: {what}: {exc}")
            continue
        parts.append((first, rows))
    if not parts:
        raise CommandLineError("nothing -d / -o / -r name can run here:\n"
                               + "\n".join(skipped))


def _rows(args: argparse.Namespace, topo: Topology, kwargs: dict[str, Any],
          requested: list[int]) -> Iterator[tuple[table.Row, dict[str, Any]]]:
    """Simulate each size; yield its table row and its JSON record."""
    coll = get_collective(args.collective)
    dtype = resolve_dtype(args.dtype)
    p = topo.nranks
    shapes = [nccl_shape(coll, p, s, dtype.itemsize, aligned=True) for s in (
        [0] if coll.name == "barrier" else requested)]
    option = "-e" if args.size is None else "--size"
    if args.check:
        checking.check_memory(coll, p, max(nbytes for nbytes, _, _ in shapes) // dtype.itemsize,
                              dtype.itemsize, option)
    for nbytes, _, size in shapes:  # every size before the first row
        refuse_overflow(option, size, nbytes, p, coll.size_factor(p))
        try:
            check_inputs(p, None, nbytes, dtype, coll)
        except InvalidInputError as exc:
            raise CommandLineError(f"size {size} bytes: {exc}") from None
    op = kwargs.get("op", ReduceOp.SUM)
    root = kwargs.get("root", 0)
    type_name = _NCCL_NAMES.get(dtype.name, dtype.name)
    for nbytes, count, size in shapes:
        data = None
        with still_running(f"{args.collective} of {size} B"):
            if args.check:
                data = checking.inputs(p, nbytes // dtype.itemsize, dtype, op)
                res = simulate(topo, args.collective, algorithm=args.algorithm, data=data,
                               **kwargs)
            else:
                res = simulate(topo, args.collective, algorithm=args.algorithm,
                               nbytes=nbytes, dtype=dtype, **kwargs)
        wrong = None if data is None else checking.count_wrong(coll, data, res, op, root)
        row = table.Row(size, count, type_name,
                        _NCCL_OPS[op.name] if coll.reduces else "none",
                        root if coll.rooted else -1, res.time * 1e6, res.algbw / 1e9,
                        res.busbw / 1e9, wrong)
        record = {"spec": topo.spec, "size": size, "count": count,
                  "type": type_name, "redop": row.redop,
                  "root": root if coll.rooted else None, "time_us": row.time_us,
                  "algbw_GBps": json_out.finite_or_none(row.algbw),
                  "busbw_GBps": json_out.finite_or_none(row.busbw),
                  "wrong": wrong, **res.to_dict()}
        yield row, record


def _preamble(args: argparse.Namespace, topo: Topology, kwargs: dict[str, Any]) -> list[str]:
    from simcoll import __version__

    settings = run_settings(args.algorithm, kwargs["network"], args.param)
    spec = get_algorithm(args.collective, args.algorithm)
    given = {k for k, _ in args.param}
    if spec.resolve is None:  # NCCL's choices are listed after the table instead
        defaults = " ".join(f"{k}={v}" for k, v in spec.defaults.items() if k not in given)
        settings += f" (defaults: {defaults})" if defaults else ""
    low, high = _bounds(args)  # as given, as nccl-tests prints them
    step = f"{args.stepfactor}(factor)" if args.stepfactor > 1 else f"{args.stepbytes}(bytes)"
    return [f"# simcoll {__version__}: {args.collective} / {settings}",
            f"# topology {topo.spec} ({topo.name}: {plural(topo.nranks, 'rank')}, "
            f"{plural(len(topo.devices), 'device')}, {plural(len(topo.links), 'link')})",
            f"# nRanks {topo.nranks} minBytes {low} maxBytes {high} "
            f"step: {step} validation: {args.check}"]


def _not_applying(args: argparse.Namespace) -> list[str]:
    """Notes on ``-o`` for a collective that does not reduce and ``-r`` for one without a
    root, which nccl-tests takes and ignores (its programs pass "none" and -1), now
    dropped; and on ``-o mulsum``, run as ``avg``."""
    coll = get_collective(args.collective)
    lines = []
    if args.op is not None and not coll.reduces:
        lines.append(f"# -o {args.op}: {coll.name} does not reduce; ignored, as nccl-tests "
                     f"ignores it")
        args.op = None
    if args.root is not None and not coll.rooted:
        lines.append(f"# -r {args.root_text or args.root}: {coll.name} has no root; "
                     f"ignored, as nccl-tests ignores it")
        args.root = None
    if args.op is not None and args.op.lower() == "mulsum":
        lines.append("# -o mulsum: a pre-multiplied sum, run as avg, which NCCL computes as "
                     "one at the same cost")
    return lines


def chosen(records: list[dict[str, Any]], given: Mapping[str, Any],
           defaults: Mapping[str, Any]) -> list[str]:
    """The parameters a run chose itself (``algorithm="nccl"``'s algo, proto, channels,
    arch, intra), as ``#`` lines after the table: those equal at every size (wrapped at 88
    columns), then one row per size for those that vary, with its type, redop and root
    where ``-d all``, ``-o all`` or ``-r all`` ran several. Neither those that ran as
    ``given`` (normalized) at every size nor those left at their ``defaults`` at every
    size are listed (``--json`` has them all): a given ``channels`` that NVLS did not run
    on is; nothing when nothing else is left.
    """
    ran_as_given = {k for k, v in given.items()
                    if all(r["params"].get(k) == v for r in records)}
    picked = [{k: v for k, v in r["params"].items() if k not in ran_as_given}
              for r in records]
    names = [k for k in picked[0] if all(k in p for p in picked)
             and any(k not in defaults or p[k] != defaults[k] for p in picked)] \
        if picked else []
    if not names:
        return []
    fixed = [k for k in names if all(p[k] == picked[0][k] for p in picked)]
    varying = [k for k in names if k not in fixed]
    lines = ["# parameters the algorithm chose (in --json's params):"]
    if fixed:
        lines += textwrap.wrap(" ".join(f"{k}={picked[0][k]}" for k in fixed), width=88,
                               initial_indent="#   at every size: ",
                               subsequent_indent="#     ", break_long_words=False)
    if varying:
        # the table's columns that tell the parts of -d / -o / -r all apart
        parts = [k for k in ("type", "redop", "root")
                 if len({str(r[k]).strip() for r in records}) > 1]
        columns = [*parts, *varying]
        shown = [{**{k: str(r[k]).strip() for k in parts}, **p}
                 for r, p in zip(records, picked)]
        widths = [max(len(k), *(len(str(p[k])) for p in shown)) for k in columns]
        lines.append(f"# {'size (B)':>12}  " + "  ".join(
            f"{k:>{w}}" for k, w in zip(columns, widths)))
        for record, p in zip(records, shown):
            lines.append(f"# {record['size']:12d}  " + "  ".join(
                f"{p[k]!s:>{w}}" for k, w in zip(columns, widths)))
    lines.append("#")
    return lines


def nccl_graphs(topo: Topology, records: list[dict[str, Any]]) -> list[str]:
    """For ``algorithm="nccl"``, the graphs of NCCL's topology search its tuner reasoned
    on, as ``#`` lines in the terms of NCCL's ``NCCL_DEBUG=INFO`` log (channels, speed
    inside a node / to the network), to set beside a real run's log."""
    if not records or records[0]["algorithm"] != "nccl" or "arch" not in records[0]["params"]:
        return []
    from simcoll.algorithms.nccl.report import graph_lines

    params = records[0]["params"]
    lines = graph_lines(topo, params["arch"], params["tuner"])
    if not lines:
        return []
    return (["# NCCL's search here (its NCCL_DEBUG=INFO log prints \"nChannels N, bw "
             "intra/inter\" in GB/s):"] + [f"#   {line}" for line in lines] + ["#"])


def run(args: argparse.Namespace) -> int:
    """Run ``simcoll run``; every argument is checked before the first line is printed.

    Returns:
        0, or 1 if any size failed the numpy check or the average busbw failed
        ``NCCL_TESTS_MIN_BW``'s.
    """
    shaped = args.topology is None and nccl_flags.shape_spec(args)
    if args.topology is None:  # --topology "" is given, and refused as from_spec refuses it
        args.topology = shaped or "switch:8"
    report_path = None if args.output_file is None else check_output(
        args.output_file, (".json",), "-J", topology=args.topology)
    try:
        topo = from_spec(args.topology)
    except TopologyError as exc:
        if not shaped:
            raise
        raise CommandLineError(f"-t {args.nthreads or 1} -g {args.ngpus or 1} (without "
                               f"--topology: {shaped}): {exc}") from None
    # torch's names as the collective's own, which the table's head and -J report give
    # (a log parse and compare read back)
    args.collective = get_collective(args.collective).name
    notes = nccl_flags.notes(args, topo.nranks) + _not_applying(args)
    # -o all and -r all refused where one op or root would be (no reduction, no root)
    run_kwargs(argparse.Namespace(**{**vars(args), "op": "sum" if args.op == "all" else args.op,
                                     "root": 0 if args.root == "all" else args.root}))
    check_root_rank(args, topo, every=True)
    if args.algorithm is None:
        args.algorithm = default_algorithm(args.collective)
    from_environment, read = nccl_environment(
        os.environ, get_algorithm(args.collective, args.algorithm), args.param,
        checks_min_bw=True)
    args.param = [*args.param, *from_environment]
    notes += read
    min_bw = tests_min_bw(os.environ)
    if min_bw is not None:
        notes.append(f"# NCCL_TESTS_MIN_BW={min_bw:g} in the environment: the average busbw "
                     f"passes from {0.9 * min_bw:g} GB/s (0.9 times it, as nccl-tests checks)")
    kwargs = run_kwargs(argparse.Namespace(**{**vars(args), "op": None, "root": None}))
    requested = _requested(args)
    parts: list[tuple[tuple[table.Row, dict[str, Any]], Rows]] = []
    skipped: list[str] = []
    report = None if report_path is None else _report(report_path, args, topo, kwargs,
                                                      min_bw)
    done: list[table.Row] = [] if report is None else report.rows
    records: list[dict[str, Any]] = []
    writer = csv.writer(sys.stdout, lineterminator="\n") if args.csv else None

    def begin() -> None:
        """The table's head (or the CSV's), and the notes."""
        if args.op == "all":
            skipped.append(_MULSUM_LEFT_OUT)
        if writer is not None:
            writer.writerow(_CSV_FIELDS)
        elif not args.json:
            print("\n".join(_preamble(args, topo, kwargs) + notes + skipped
                            + table.header()))
        if (notes or skipped) and (args.csv or args.json):
            print("\n".join(notes + skipped), file=sys.stderr)

    try:
        try:
            _parts(args, topo, kwargs, requested, parts, skipped)
        except BaseException:
            if parts:   # stopped among the parts' first rows: those done are kept
                begin()
                _print_rows(args, [iter([first]) for first, _ in parts], done, records,
                            topo, writer)
            raise
        begin()
        _print_rows(args, [itertools.chain([first], rest) for first, rest in parts], done,
                    records, topo, writer)
    except BaseException as exc:
        if report is not None and done:
            report.write(exc)
        raise
    if report is not None:
        report.write()
    if not args.csv and not args.json:
        spec = get_algorithm(args.collective, args.algorithm)
        print("\n".join(table.footer(done, min_bw)
                        + chosen(records, spec.normalized(dict(args.param)), spec.defaults)
                        + nccl_graphs(topo, records)))
    failed = min_bw is not None and table.fails_min_bw(table.average_busbw(done), min_bw)
    if min_bw is not None and (args.csv or args.json):   # the verdict the footer carries
        print(table.footer(done, min_bw)[1], file=sys.stderr)
    return 1 if failed or any(r.wrong for r in done) else 0


def _report(path: Path, args: argparse.Namespace, topo: Topology,
            kwargs: dict[str, Any], min_bw: float | None) -> json_out.Report:
    """The -J report of this run, its rows to come."""
    low, high = _bounds(args)
    step = ("step_factor", args.stepfactor) if args.stepfactor > 1 else \
        ("step_bytes", args.stepbytes)
    simulated = {"collective": args.collective,
                 "settings": run_settings(args.algorithm, kwargs["network"], args.param),
                 "topology": topo.spec}
    return json_out.Report(path, args.argv, topo, simulated, (low, high), step,
                           args.check, per_iter=args.nccl_per_iter_timing == 1,
                           min_bw=min_bw)


def _print_rows(args: argparse.Namespace, parts: list[Rows],
                done: list[table.Row], records: list[dict[str, Any]], topo: Topology,
                writer: Any) -> None:
    """Simulate and print each row (the table's, a CSV line or a JSON record) as it is
    done, keeping it in ``done`` and ``records``; a line is written whole (Ctrl-C waits
    for its end: :func:`~simcoll.cli.writing.ctrl_c_held`)."""
    for row, record in itertools.chain.from_iterable(parts):
        done.append(row)
        records.append(record)
        with ctrl_c_held():
            if args.json:
                print(json.dumps(record), flush=True)
            elif writer is not None:
                writer.writerow([record["collective"], record["algorithm"], topo.spec,
                                 record["network"], record["nranks"], row.size, row.count,
                                 row.type, row.redop, row.root, row.time_us,
                                 *("" if value is None else value for value in
                                   (record["algbw_GBps"], record["busbw_GBps"], row.wrong))])
                sys.stdout.flush()
            else:
                print(table.row(row), flush=True)
