"""``simcoll sweep``: a grid of algorithms x rank counts x sizes, through ``sc.sweep``."""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from simcoll.algorithms.registry import get_algorithm
from simcoll.cli.options import (
    SIZE_HELP,
    CommandLineError,
    add_run_options,
    check_output,
    parse_bytes,
    resolve_dtype,
    run_kwargs,
)
from simcoll.errors import InvalidInputError
from simcoll.files import write_atomically
from simcoll.sweep import load_results, sweep
from simcoll.sweep.records import point_key
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
    p.add_argument("--algorithms", required=True, type=_names, metavar="A,B,...",
                   help="algorithms to compare, e.g. ring,naive")
    p.add_argument("--ranks", required=True, type=_ints, metavar="P,Q,...",
                   help="values of {p} in --topology, e.g. 2,4,8,16")
    p.add_argument("--sizes", required=True, type=_sizes, metavar="S,T,...",
                   help=f"each rank's input buffer (simulate's nbytes), e.g. 1M,64M; "
                        f"{SIZE_HELP}")
    p.add_argument("--workers", type=int, default=1, help="processes to use (default 1)")
    p.add_argument("--output", metavar="PATH",
                   help="write .csv, .json or .jsonl (default: CSV on standard output); "
                        "finished points are kept in PATH.partial.jsonl until the end")
    p.add_argument("--json", action="store_true",
                   help="JSON lines instead of CSV on standard output")
    p.set_defaults(handler=_run)


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} given twice; give each once")
    return names


def _ints(text: str) -> list[int]:
    try:
        values = [int(t) for t in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole numbers, "
                                         f"e.g. 2,4,8") from None
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
    """
    if "{p}" in spec or is_file_spec(spec):
        return spec  # a file is one machine: --ranks must be its GPU count
    name, colon, args = spec.partition(":")
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


def _csv(records: list[dict[str, Any]]) -> str:
    """One row per record: its scalar fields, ``params`` and ``chosen`` as JSON, and
    ``error`` as ``"ErrorType: message"``."""
    ran = [r for r in records if r["error"] is None] or records
    fields = [k for k, v in ran[0].items() if not isinstance(v, (list, dict))
              or k in _JSON_COLUMNS]
    if "error" not in fields:
        fields.append("error")
    out = io.StringIO()
    writer = csv.DictWriter(out, fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for record in records:
        error = record["error"]
        writer.writerow({**record, **{k: json.dumps(record[k]) for k in _JSON_COLUMNS
                                      if k in record},
                         "error": None if error is None
                         else f"{error['type']}: {error['message']}"})
    return out.getvalue()


_JSON_COLUMNS = ("params", "chosen")


def _run(args: argparse.Namespace) -> int:
    if args.json and args.output:
        raise CommandLineError("--json writes JSON lines to standard output; with --output "
                               "the file's extension (.csv, .json, .jsonl) chooses")
    spec = template(args.topology)
    kwargs = run_kwargs(args)
    kwargs["dtype"] = dtype = resolve_dtype(args.dtype)
    for size in args.sizes:
        if size % dtype.itemsize:
            raise CommandLineError(f"--sizes: {size} bytes is not a whole number of "
                                   f"{dtype} elements ({dtype.itemsize} bytes each)")
    for algorithm in args.algorithms:
        get_algorithm(args.collective, algorithm)
    if "{p}" not in spec:
        nranks = from_spec(spec).nranks
        if args.ranks != [nranks]:
            raise CommandLineError(f"--topology {spec} is one machine of {nranks} GPUs; "
                                   f"give --ranks {nranks} (or a builder with {{p}})")
    values: dict[int, int] = {}
    for p in args.ranks:
        nranks = topology_for(spec, p).nranks
        if nranks in values:
            raise CommandLineError(f"--ranks: {{p}}={values[nranks]} and {{p}}={p} both build "
                                   f"{nranks} GPUs; give each machine once")
        values[nranks] = p
    out = check_output(args.output, _FORMATS) if args.output else None
    partial = None if out is None else out.with_name(out.name + ".partial.jsonl")
    earlier = _earlier_points(partial, out)
    factory = functools.partial(_topology_of_ranks, spec, tuple(values.items()))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a truncated line: _earlier_points said so
            results = sweep(factory, args.collective, algorithms=args.algorithms,
                            ranks=list(values), sizes=args.sizes, workers=args.workers,
                            save=partial, progress=False, **kwargs)
    except BaseException:
        if partial is not None and len(_saved(partial)) > len(earlier):
            print(f"the points finished so far are in {partial}", file=sys.stderr)
        raise
    grid = [p for _ in args.algorithms for p in args.ranks for _ in args.sizes]
    records = [{**r, "spec": spec.replace("{p}", str(p))}
               for r, p in zip(results.records, grid)]
    failed = sum(1 for r in records if r["error"] is not None)
    if failed:
        print(f"{failed} of {len(records)} points failed (their records say why)",
              file=sys.stderr)
    status = 1 if failed else 0
    if out is None:
        sys.stdout.write("".join(json.dumps(r) + "\n" for r in records) if args.json
                         else _csv(records))
        return status
    text = {".csv": lambda: _csv(records),
            ".json": lambda: json.dumps(records, indent=1) + "\n",
            ".jsonl": lambda: "".join(json.dumps(r) + "\n" for r in records)}
    write_atomically(out, lambda tmp: tmp.write_text(text[out.suffix.lower()]()))
    print(f"{len(records)} points written to {out}", file=sys.stderr)
    if partial is not None:
        ours = {point_key(r) for r in results.records}
        others = sum(1 for key in _saved(partial) if key not in ours)
        if others:
            print(f"{partial} also holds {others} finished point(s) of another grid; it is "
                  f"kept (sc.load_results reads it)", file=sys.stderr)
        else:
            partial.unlink(missing_ok=True)
    return status


def _saved(partial: Path) -> set[tuple[Any, ...]]:
    """The points ``partial`` holds (none if it is missing or not a sweep's file)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a truncated last line: said at the start
            return {point_key(r) for r in load_results(partial).records}
    except (InvalidInputError, OSError):
        return set()


def _earlier_points(partial: Path | None, out: Path | None) -> set[tuple[Any, ...]]:
    """The points an earlier sweep to ``out`` left in ``partial``, saying so.

    Raises:
        CommandLineError: ``partial`` is there but is not a sweep's file.
    """
    if partial is None or not partial.exists():
        return set()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = load_results(partial).records
    except InvalidInputError as exc:
        raise CommandLineError(f"{partial}, where a sweep to {out} keeps its finished "
                               f"points, is not a sweep's file ({exc}); delete it or give "
                               f"another --output") from None
    for warning in caught:
        print(f"simcoll sweep: note: {warning.message}", file=sys.stderr)
    if records:
        print(f"simcoll sweep: {len(records)} finished point(s) read from {partial}",
              file=sys.stderr)
    return {point_key(r) for r in records}
