"""``simcoll compare``: simulate every size of an nccl-tests log on a machine and print
measured beside simulated (:func:`simcoll.comparison.compare`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from simcoll.cli.json_out import json_text
from simcoll.cli.logs import add_log_arguments, machine_notes, read_table, simulate_kwargs
from simcoll.cli.options import PICTURES, Once, check_output
from simcoll.comparison import compare, counted_rows
from simcoll.topology.spec import from_spec

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add ``compare`` to the subcommands."""
    p = sub.add_parser(
        "compare", help="an nccl-tests log beside the same sizes simulated",
        description="Read an nccl-tests log (all_reduce_perf and its siblings, or 'simcoll "
                    "run'), simulate each of its sizes on --topology with --algorithm, and "
                    "print the measured and simulated time and busbw per size, the time "
                    "error (simulated / measured - 1), what the algorithm chose, the "
                    "geometric-mean |time error| (exp(mean |ln(simulated / measured)|) - 1: "
                    "the factor the times differ by on average, less 1) and the sizes where "
                    "nccl-tests found wrong values (or --json). 'simcoll calibrate' fits "
                    "constants to the same log.")
    add_log_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--plot", metavar="PATH", action=Once,
                   help="also draw busbw against size, measured and simulated, and the "
                        "simulated over the measured time (PNG, SVG or PDF)")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    measured, notes = read_table(args)
    kwargs, choices = simulate_kwargs(args, measured)
    notes += choices
    machine = from_spec(args.topology)
    notes += machine_notes(measured, machine)
    figure = None if args.plot is None else check_output(args.plot, PICTURES, "--plot")
    found = compare(machine, measured, algorithm=args.algorithm,
                    place="in_place" if args.in_place else "out_of_place",
                    workers=args.workers, **kwargs)
    if figure is not None:
        from simcoll.plot import comparison

        comparison(found, save=figure)
        # after the table (or on standard error, beside the JSON): what was written, as
        # plot, trace and sweep say theirs
        said = f"# figure written to {figure}"
        if args.json:
            print(said, file=sys.stderr)
    if args.json:
        print(json_text({**found.to_dict(), "spec": args.topology, "log": args.log,
                         "notes": notes}))
        return 0
    print(f"# simcoll compare: {found.collective} / {args.algorithm} on {args.topology}, "
          f"{counted_rows(found.sizes)} of {args.log}" + "".join(f"; {n}" for n in notes))
    print(found.report())
    if figure is not None:
        print(said)
    return 0
