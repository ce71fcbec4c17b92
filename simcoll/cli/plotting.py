"""``simcoll plot``: a sweep's records drawn by ``sc.plot.scaling`` into PNG, SVG or PDF."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from simcoll.cli.options import PICTURES, CommandLineError, Once, check_output
from simcoll.errors import InvalidInputError
from simcoll.plot import scaling
from simcoll.plot.records import from_mapping, is_failed_record
from simcoll.sweep.records import IDENTITY, point_key

__all__ = ["add_parser", "read_records"]

_NEEDED = ("collective", "algorithm", "nranks", "nbytes", "time", "algbw", "busbw")


def add_parser(sub: Any) -> None:
    """Add ``plot`` to the subcommands."""
    p = sub.add_parser("plot", help="a sweep's records to a PNG / SVG / PDF plot",
                       description="Plot the records of 'simcoll sweep' (or 'simcoll run "
                                   "--json'): y against x, one line per algorithm.")
    p.add_argument("records", help="a .jsonl (JSON lines) or .json (list) file of records")
    p.add_argument("--output", required=True, metavar="PATH", action=Once,
                   help="the picture: .png, .svg or .pdf")
    p.add_argument("--x", action=Once, default=None, choices=("nranks", "nbytes"),
                   help="nranks or nbytes (default: nbytes where every record has one "
                        "rank count and there are several sizes, as in 'simcoll run', "
                        "else nranks)")
    p.add_argument("--y", action=Once, default="busbw",
                   choices=("busbw", "algbw", "time", "bytes_sent"),
                   help="busbw (default), algbw, time, or bytes_sent (the most bytes one "
                        "GPU or server host sent)")
    p.set_defaults(handler=_run)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records from a JSON-lines or JSON file, as ``Result.to_dict()`` writes them,
    failed sweep points (records with an ``error``) included. A cut-off last line, as a
    sweep stopped while writing it leaves, is ignored with a note on standard error, and
    a sweep point saved twice (a failure run again with ``retry_failed=True``) is read as
    last saved, as ``sc.load_results`` reads them.

    Raises:
        CommandLineError: an unreadable file, a bad line (named, with the column), or a
            record without the fields a plot needs.
    """
    if path.suffix.lower() == ".csv":
        raise CommandLineError(f"{path}: plot reads the records of a .jsonl or .json file "
                               f"(simcoll sweep --output points.jsonl), not CSV")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandLineError(f"cannot read {path}: {exc}") from None
    listed = path.suffix.lower() == ".json"
    read, unit = (_json_list, "item") if listed else (_json_lines, "line")
    records = []
    for n, item in read(path, text):
        if isinstance(item, dict) and is_failed_record(item):
            records.append(item)
            continue
        missing = [k for k in _NEEDED if not isinstance(item, dict) or k not in item]
        if missing:
            raise CommandLineError(f"{path}, {unit} {n}: lacks {', '.join(missing)}; give "
                                   f"the output of 'simcoll sweep' or 'simcoll run --json'")
        try:
            from_mapping(f"{path}, {unit} {n}:", item)
        except InvalidInputError as exc:
            raise CommandLineError(str(exc)) from None
        records.append(item)
    records = _last_of_each_point(records)
    if all(is_failed_record(r) for r in records):
        raise CommandLineError(f"{path} holds no records of points that ran")
    return records


def _last_of_each_point(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records, each point (a record with every field of a sweep point's identity,
    :data:`~simcoll.sweep.records.IDENTITY`, as sweeps and ``simcoll run --json`` write
    them) kept as last saved, where it was last saved; records without them as they
    are. A point is what was asked for: a ``simcoll run --json`` line's ``requested``
    parameters where it has them (its ``params`` are what the algorithm chose, which
    runs that asked for different ones may share)."""
    def asked(r: dict[str, Any]) -> tuple[Any, ...]:
        return point_key({**r, "params": r.get("requested", r["params"])})

    last = {asked(r): n for n, r in enumerate(records) if set(IDENTITY) <= set(r)}
    return [r for n, r in enumerate(records)
            if not set(IDENTITY) <= set(r) or last[asked(r)] == n]


def _json_error(exc: json.JSONDecodeError) -> str:
    """json's message with the column it is about (``exc.msg`` alone may end in "at")."""
    column = f"column {exc.colno}"
    return f"{exc.msg} {column}" if exc.msg.endswith(" at") else f"{exc.msg} at {column}"


_NOT_RECORDS = ("; plot reads the JSON records that 'simcoll sweep' and 'simcoll run --json' "
                "write (a table that 'simcoll run' prints is text: run it with --json)")


def _unlike_json(text: str) -> str:
    """:data:`_NOT_RECORDS` where ``text`` does not even start as JSON does (an
    nccl-tests or ``simcoll run`` table), else ""."""
    start = text.lstrip("\ufeff \t\r\n")
    return "" if not start or start.startswith(("{", "[")) else _NOT_RECORDS


def _json_list(path: Path, text: str) -> list[tuple[int, Any]]:
    """The numbered items of a .json file's list.

    Raises:
        CommandLineError: not valid JSON (named by line and column), or not a list.
    """
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = (" (a .json file holds one JSON list; name a file of JSON lines .jsonl)"
                 if exc.msg == "Extra data" else "")
        raise CommandLineError(f"{path}, line {exc.lineno}: not valid JSON: "
                               f"{_json_error(exc)}{lines}{_unlike_json(text)}") from None
    if not isinstance(items, list):
        raise CommandLineError(f"{path}: expected a JSON list of records")
    return list(enumerate(items, start=1))


def _json_lines(path: Path, text: str) -> list[tuple[int, Any]]:
    """The numbered objects of a .jsonl file, but a cut-off last line: a record's start
    without its newline, which is ignored with a note.

    Raises:
        CommandLineError: a line that is not valid JSON (named by line and column).
    """
    lines = text.splitlines()
    rows = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append((n, json.loads(line)))
        except json.JSONDecodeError as exc:
            if n == len(lines) and not text.endswith("\n") and line.startswith("{"):
                print(f"simcoll plot: note: {path}: ignored a cut-off last line "
                      f"({len(line.encode())} bytes), as a sweep stopped while writing it "
                      f"leaves", file=sys.stderr)
                break
            raise CommandLineError(f"{path}, line {n}: not valid JSON: {_json_error(exc)}"
                                   f"{_unlike_json(line)}") from None
    return rows


def _run(args: argparse.Namespace) -> int:
    out = check_output(args.output, PICTURES)
    records = read_records(Path(args.records))
    x = args.x
    if x is None:
        ran = [r for r in records if not is_failed_record(r)]
        one_count = len({r.get("nranks") for r in ran}) == 1
        x = "nbytes" if one_count and len({r.get("nbytes") for r in ran}) > 1 else "nranks"
    figure = scaling(records, x=x, y=args.y, save=out)
    drawn = sum(int(np.size(line.get_xdata())) for line in figure.axes[0].get_lines()
                if line.get_gid() == "simulated")
    failures = sum(1 for r in records if is_failed_record(r))
    notes = [f"{failures} failed"] if failures else []
    if drawn < len(records) - failures:
        notes.append(f"{len(records) - failures - drawn} left out: a time, size or bandwidth "
                     f"of 0, as on one rank, or a point run again")
    left = f" ({'; '.join(notes)})" if notes else ""
    print(f"{drawn} of {len(records)} records plotted to {out}{left}")
    return 0
