"""``simcoll list``: collectives, algorithms with their time formula and parameters, and
the topology builders and presets with theirs."""

from __future__ import annotations

import argparse
import inspect
import re
import shutil
import textwrap
from typing import Any

from simcoll.algorithms.registry import algorithms, get_algorithm
from simcoll.collectives import ALIASES, COLLECTIVES
from simcoll.topology.catalog import builders, describe

__all__ = ["add_parser"]

_WHAT = ("collectives", "algorithms", "topologies")


def add_parser(sub: Any) -> None:
    """Add ``list`` to the subcommands."""
    p = sub.add_parser("list", help="collectives, algorithms and topology builders",
                       description="List the collectives, the algorithms with their time "
                                   "on the alpha-beta reference network (from simcoll.cost) "
                                   "and parameters, and the topology builders and presets "
                                   "with theirs.")
    p.add_argument("what", nargs="?", choices=_WHAT, metavar="SECTION",
                   help=f"list only this section: {', '.join(_WHAT)}")
    p.set_defaults(handler=_run)


def _formulas(collective: str, algorithm: str) -> list[str]:
    """The paragraphs of the algorithm's cost model, each on one line: the formula, and
    what its terms are, where it is exact and how close an estimate comes (the summary
    alone left some without a formula: a parameter server's, a chain's)."""
    doc = inspect.getdoc(get_algorithm(collective, algorithm).cost.time) or ""
    return [re.sub(r":\w+:`([^`]*)`", r"\1", " ".join(paragraph.split())).replace("``", "")
            for paragraph in doc.split("\n\n") if paragraph.strip()]


def _signature(collective: str, name: str) -> str:
    spec = get_algorithm(collective, name)
    return ", ".join(f"{name}={value!r}" for name, value in spec.defaults.items())


def _collectives() -> list[str]:
    lines = ["Collectives (torch.distributed names; --op for those that reduce, --root for "
             "those with a root):"]
    for name, coll in COLLECTIVES.items():
        flags = [f for f, on in (("reduces", coll.reduces), ("root", coll.rooted)) if on]
        flags += [f"also {alias}" for alias, target in ALIASES.items() if target == name]
        flags += [f"sizes per {'pair' if coll.uneven.matrix else 'rank'}, Python only"] \
            if coll.uneven is not None else []
        lines.append(f"  {name:<15} {', '.join(flags)}".rstrip())
    return lines


def _algorithms(width: int) -> list[str]:
    lines = ["Algorithms (time on the alpha-beta reference network: p ranks, n bytes per "
             "rank (for a v-collective, the sum of its blocks; all_to_allv's formulas read "
             "each rank's sent_r and received_r); --param NAME=VALUE sets a "
             "parameter):"]
    current = None
    for collective, name in algorithms():
        if collective != current:
            current = collective
            lines.append(f"  {collective}")
        params = _signature(collective, name)
        lines.append(f"    {name:<21} {params}".rstrip())
        for paragraph in _formulas(collective, name):
            lines.extend(textwrap.wrap(paragraph, width, initial_indent=" " * 8,
                                       subsequent_indent=" " * 8, break_on_hyphens=False))
    return lines


def _topologies(width: int) -> list[str]:
    lines = textwrap.wrap(
        "Topologies (--topology NAME:ARGS, e.g. switch:ranks=8,bandwidth=100GB/s; rates "
        "like 100GB/s or 400Gbps, times like 1us; ranks= stands for n; a default of none "
        "is worked out from the other arguments, as the builder's docstring says; or a "
        "topology file: .json, .yaml, .yml, .toml, or an ASTRA-sim network .yml):", width)
    for name in builders():
        lines.extend(textwrap.wrap(describe(name), width, initial_indent="  ",
                                   subsequent_indent=" " * 6))
    return lines


def _run(args: argparse.Namespace) -> int:
    width = max(60, min(100, shutil.get_terminal_size().columns))
    sections = {"collectives": _collectives, "algorithms": lambda: _algorithms(width),
                "topologies": lambda: _topologies(width)}
    chosen = [args.what] if args.what else list(_WHAT)
    print("\n\n".join("\n".join(sections[name]()) for name in chosen))
    return 0
