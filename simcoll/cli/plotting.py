"""``simcoll plot``: a sweep's records drawn by ``sc.plot.scaling`` into PNG, SVG or PDF."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simcoll.cli.options import PICTURES, CommandLineError, check_output
from simcoll.plot import scaling

__all__ = ["add_parser", "read_records"]

_NEEDED = ("collective", "algorithm", "nranks", "nbytes", "time", "algbw", "busbw")


def add_parser(sub: Any) -> None:
    """Add ``plot`` to the subcommands."""
    p = sub.add_parser("plot", help="a sweep's records to a PNG / SVG / PDF plot",
                       description="Plot the records of 'simcoll sweep' (or 'simcoll run "
                                   "--json'): y against x, one line per algorithm.")
    p.add_argument("records", help="a .jsonl (JSON lines) or .json (list) file of records")
    p.add_argument("--output", required=True, metavar="PATH",
                   help="the picture: .png, .svg or .pdf")
    p.add_argument("--x", default="nranks", choices=("nranks", "nbytes"),
                   help="nranks (default) or nbytes")
    p.add_argument("--y", default="busbw", choices=("busbw", "algbw", "time"),
                   help="busbw (default), algbw or time")
    p.set_defaults(handler=_run)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records from a JSON-lines or JSON file, as ``Result.to_dict()`` writes them,
    failed sweep points (records with an ``error``) included.

    Raises:
        CommandLineError: an unreadable file, a bad line (named), or a record without the
            fields a plot needs.
    """
    if path.suffix.lower() == ".csv":
        raise CommandLineError(f"{path}: plot reads the records of a .jsonl or .json file "
                               f"(simcoll sweep --output points.jsonl), not CSV")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandLineError(f"cannot read {path}: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            lines = (" (a .json file holds one JSON list; name a file of JSON lines .jsonl)"
                     if exc.msg == "Extra data" else "")
            raise CommandLineError(f"{path}, line {exc.lineno}: not valid JSON: {exc.msg}"
                                   f"{lines}") from None
        if not isinstance(items, list):
            raise CommandLineError(f"{path}: expected a JSON list of records")
        rows = list(enumerate(items, start=1))
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise CommandLineError(f"{path}, line {n}: not valid JSON: {exc.msg}"
                                       ) from None
    records = []
    for n, item in rows:
        if isinstance(item, dict) and item.get("error"):
            records.append(item)
            continue
        missing = [k for k in _NEEDED if not isinstance(item, dict) or k not in item]
        if missing:
            raise CommandLineError(f"{path}: record {n} lacks {', '.join(missing)}; give "
                                   f"the output of 'simcoll sweep' or 'simcoll run --json'")
        records.append(item)
    if all(r.get("error") for r in records):
        raise CommandLineError(f"{path} holds no records of points that ran")
    return records


def _run(args: argparse.Namespace) -> int:
    out = check_output(args.output, PICTURES)
    records = read_records(Path(args.records))
    figure = scaling(records, x=args.x, y=args.y, save=out)
    drawn = sum(len(line.get_xdata()) for line in figure.axes[0].get_lines()
                if line.get_gid() == "simulated")
    failed = sum(1 for r in records if r.get("error"))
    notes = [f"{failed} failed"] if failed else []
    if drawn < len(records) - failed:
        notes.append(f"{len(records) - failed - drawn} left out: a time, size or bandwidth "
                     f"of 0, as on one rank, or a point run again")
    left = f" ({'; '.join(notes)})" if notes else ""
    print(f"{drawn} of {len(records)} records plotted to {out}{left}")
    return 0
