"""``simcoll calibrate``: fit a machine's constants to an nccl-tests log
(:func:`simcoll.calibrate`), and say how to run the calibrated machine."""

from __future__ import annotations

import argparse
import re
from typing import Any

import numpy as np

from simcoll.calibration import LOSSES, Calibration, algorithm_constants, calibrate
from simcoll.cli.json_out import json_text
from simcoll.cli.logs import add_log_arguments, machine_notes, read_table, simulate_kwargs
from simcoll.cli.options import CommandLineError, Once, resolve_dtype
from simcoll.cli.run import sizes as run_sizes
from simcoll.collectives import collective as get_collective
from simcoll.comparison import counted_rows, simulated_dtype, simulated_op
from simcoll.errors import InvalidInputError, TopologyError
from simcoll.nccl_tests import NcclTestsTable
from simcoll.ops import ReduceOp
from simcoll.topology.catalog import parameters
from simcoll.topology.quantities import parse_number, parse_rate, parse_time
from simcoll.topology.spec import from_spec, is_file_spec, with_arguments

__all__ = ["add_parser", "free_values", "parse_free"]


def add_parser(sub: Any) -> None:
    """Add ``calibrate`` to the subcommands."""
    p = sub.add_parser(
        "calibrate", help="fit a machine's constants to an nccl-tests log",
        description="Read an nccl-tests log (all_reduce_perf and its siblings, or 'simcoll "
                    "run'), simulate each of its sizes on --topology, and fit the --free "
                    "constants (the builder's, such as bandwidth or nvlink_latency, or the "
                    "algorithm's, such as NCCL's launch_overhead) by least squares on the "
                    "log of the time, leaving out sizes where nccl-tests found wrong values. "
                    "Prints each constant (saying which moved no simulated time where it "
                    "started, or ended on a bound), each size's error before and after, and "
                    "the geometric-mean |time error| (or --json).")
    add_log_arguments(p)
    p.add_argument("--free", action="append", type=parse_free, required=True,
                   metavar="NAME=INITIAL:LOW:HIGH",
                   help="a constant to fit, where it starts and its bounds, with units "
                        "where they help: bandwidth=50GB/s:1GB/s:1TB/s, latency=1us:10ns:"
                        "100us, launch_overhead=5us:0:1ms, step_latency_scale=1:0.05:20 "
                        "(repeatable; a bandwidth takes a rate, a latency a time; with a "
                        "topology file, only the algorithm's)")
    p.add_argument("--starts", action=Once, type=int, default=1,
                   help="fits from the initial constants and from random points, the best "
                        "kept (default: 1)")
    p.add_argument("--seed", action=Once, type=int, default=None,
                   help="the random starts' seed, with --starts above 1 (default: 0)")
    p.add_argument("--loss", action=Once, default="linear", choices=LOSSES,
                   help="least squares (linear) or a robust loss that lets a one-off spike "
                        "pull less (default: linear)")
    p.add_argument("--loss-scale", action=Once, type=float, default=None,
                   help="where a robust loss bends, in log time, with a --loss other than "
                        "linear (default: 0.1)")
    p.add_argument("--max-evaluations", action=Once, type=int, default=20_000, metavar="N",
                   help="the most simulations the fit may run (default: 20000)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(handler=_run)


def parse_free(text: str) -> tuple[str, tuple[str, str, str]]:
    """``bandwidth=50GB/s:1GB/s:1TB/s`` -> ("bandwidth", ("50GB/s", "1GB/s", "1TB/s"));
    each value a plain number, a rate or a time with its unit (:func:`free_values` checks
    the unit against the constant)."""
    name, eq, values = text.partition("=")
    parts = values.split(":")
    if not eq or not name.strip().isidentifier() or len(parts) != 3:
        raise argparse.ArgumentTypeError(f"--free {text!r} is not NAME=INITIAL:LOW:HIGH, "
                                         f"e.g. --free bandwidth=50GB/s:1GB/s:1TB/s")
    for part in parts:
        if not any(_reads(read, part.strip()) for read in (parse_number, parse_rate,
                                                            parse_time)):
            raise argparse.ArgumentTypeError(
                f"--free {text!r}: {part.strip()!r} is not a number, a rate (50GB/s, "
                f"400Gbps) or a time (1us, 500ns)")
    return name.strip(), (parts[0].strip(), parts[1].strip(), parts[2].strip())


def _reads(read: Any, part: str) -> bool:
    try:
        read(part)
    except ValueError:
        return False
    return True


def free_values(name: str, parts: tuple[str, str, str],
                kind: str) -> tuple[float, float, float]:
    """The three values of ``--free name=...`` in the unit of the constant's ``kind``: a
    ``rate`` or a ``time`` (a builder's, checked as topology specs check them, or an
    algorithm's in seconds), ``float`` (a plain number), or ``any`` (a number, a rate or
    a time: a name the fit will refuse).

    Raises:
        CommandLineError: a value in another unit, naming it and what is accepted.
    """
    reads = {"rate": (parse_rate,), "time": (parse_time,), "float": (parse_number,)}.get(
        kind, (parse_number, parse_rate, parse_time))
    values = []
    for part in parts:
        for read in reads:
            try:
                values.append(read(part))
                break
            except ValueError as err:
                problem = str(err)
        else:
            raise CommandLineError(f"--free {name}={':'.join(parts)}: {problem}")
    return values[0], values[1], values[2]


def _algorithm_kinds(collective: str, algorithm: str) -> dict[str, str]:
    """The kind of each numeric parameter of the algorithm: ``time`` where its doc gives
    it in seconds (NCCL's ``launch_overhead``), else ``float`` (``step_latency_scale``)."""
    return {name: "time" if spec.doc.startswith("seconds") else "float"
            for name, spec in algorithm_constants(collective, algorithm).items()}


def _kinds(spec: str) -> dict[str, str]:
    """The kind of each parameter of the spec's builder (none for a file, or a name that
    is no builder: the fit says so)."""
    if is_file_spec(spec):
        return {}
    try:
        return {p.name: p.kind for p in parameters(spec.partition(":")[0].strip())}
    except TopologyError:
        return {}


def _run(args: argparse.Namespace) -> int:
    measured, notes = read_table(args)
    collective = measured.collective or "all_reduce"   # read_table refuses None
    kinds = {**_algorithm_kinds(collective, args.algorithm), **_kinds(args.topology)}
    names = [name for name, _ in args.free]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CommandLineError(f"--free {', '.join(twice)} is given twice; give each "
                               f"constant once")
    free = {name: free_values(name, parts, kinds.get(name, "any"))
            for name, parts in args.free}
    if args.starts < 1:
        raise CommandLineError(f"--starts {args.starts} is not accepted; give 1 or more")
    least = 2 * len(measured.rows)   # calibrate's least: each size at the start, then once
    if args.max_evaluations < least:
        raise CommandLineError(f"--max-evaluations {args.max_evaluations} is not accepted; "
                               f"give {least} or more (the {len(measured.rows)} sizes at the "
                               f"initial constants, then at one trial point)")
    if args.starts > args.max_evaluations:
        raise CommandLineError(f"--starts {args.starts} is not accepted; give 1 to "
                               f"{args.max_evaluations} (each start runs a simulation at least, "
                               f"within --max-evaluations)")
    if args.loss_scale is not None and not 0 < args.loss_scale < float("inf"):
        raise CommandLineError(f"--loss-scale {args.loss_scale:g} is not accepted; give a finite "
                               f"number above 0")
    if args.seed is not None and args.starts == 1:
        raise CommandLineError("--seed draws the random starts; with --starts 1 the fit "
                               "starts from the initial constants alone: give --starts N")
    if args.loss_scale is not None and args.loss == "linear":
        raise CommandLineError("--loss-scale is where a robust loss bends; the linear loss "
                               "has none: give --loss " + " or ".join(
                                   repr(loss) for loss in LOSSES if loss != "linear"))
    fixed = sorted(set(free) & {name for name, _ in args.param})
    if fixed:
        raise CommandLineError(f"--free {fixed[0]} and --param {fixed[0]}: a constant is "
                               f"either fitted or fixed; drop one of them")
    kwargs, choices = simulate_kwargs(args, measured)
    notes += choices
    build: Any = args.topology
    if set(free) <= set(algorithm_constants(collective, args.algorithm)):
        # The machine stays as it is: any spec or file.
        machine = from_spec(args.topology)
        build = lambda: machine  # noqa: E731
    try:
        fit = calibrate(build, measured, free=free, collective=collective,
                        algorithm=args.algorithm,
                        place="in_place" if args.in_place else "out_of_place",
                        max_evaluations=args.max_evaluations, starts=args.starts,
                        seed=args.seed or 0, loss=args.loss,
                        loss_scale=0.1 if args.loss_scale is None else args.loss_scale,
                        workers=args.workers, **kwargs)
    except InvalidInputError as exc:   # named as the option gave it, not as free['name']
        given = dict(args.free)
        named = re.match(r"free\['(\w+)'\]( =[^:]*)?:? ", str(exc))
        if named is None or named[1] not in given:
            raise
        raise CommandLineError(f"--free {named[1]}={':'.join(given[named[1]])}: "
                               f"{str(exc)[named.end():]}") from None
    command, caveats = _command(fit, args, kwargs, measured)
    notes += machine_notes(measured, fit.topology) + caveats
    if args.json:
        print(json_text({**_record(fit), "command": command, "notes": notes + fit.notes}))
        return 0
    print(f"# simcoll calibrate: {collective} / {args.algorithm} on {args.topology}, "
          f"{counted_rows(fit.sizes)} of {args.log}" + "".join(f"; {n}" for n in notes))
    print(fit.report(kinds))
    print(f"\nrun the calibrated machine with: {command}")
    return 0


def _command(fit: Calibration, args: argparse.Namespace, kwargs: dict[str, Any],
             measured: NcclTestsTable) -> tuple[str, list[str]]:
    """The ``simcoll run`` command of the calibrated machine, which simulates what the
    fit did (the log's sizes, collective, element type and root; the fitted constants
    to every digit, so that it gives the fit's times), and a note where the rows have
    several types or roots (the first row's are named) or sizes no size loop makes."""
    machine = {k: v for k, v in fit.values.items() if k not in fit.params}
    spec = with_arguments(args.topology, machine) if machine else args.topology
    params = {**{k: v for k, v in kwargs.items() if k != "network"}, **fit.params}
    collective = measured.collective or "all_reduce"   # read_table refuses None
    run, caveats = _run_options(collective, measured)
    loop, uneven = _size_options(sorted({row.size for row in measured.rows}))
    return (f"simcoll run --topology '{spec}'{loop} --collective {collective} --algorithm "
            f"{args.algorithm}" + run
            + "".join(f" --param {k}={float(v)!r}" if isinstance(v, float) else
                      f" --param {k}={v}" for k, v in params.items())
            + (f" --network {args.network}" if args.network != "flow" else "")), \
        caveats + uneven


def _size_options(found: list[int]) -> tuple[str, list[str]]:
    """``simcoll run``'s size loop over the log's sizes ``found`` (sorted, distinct):
    ``-b -e -f`` where each is a whole multiple of the last, ``-b -e -i`` where they
    step evenly; else ``-b -e`` and a note that the command runs another set of sizes."""
    low, high = found[0], found[-1]
    if len(found) == 1:
        return f" -b {low} -e {high}", []
    factor, step = (found[1] // low if low else 0), found[1] - low

    def makes(stepbytes: int, stepfactor: int) -> bool:
        try:
            return run_sizes(low, high, stepbytes, stepfactor) == found
        except CommandLineError:   # a loop of more sizes than run takes: not the log's
            return False

    if factor > 1 and makes(0, factor):
        return f" -b {low} -e {high} -f {factor}", []
    if makes(step, 1):
        return f" -b {low} -e {high} -i {step}", []
    loop = "-f 2" if low else f"-i {high}"
    return (f" -b {low} -e {high} {loop}",
            [f"no -f or -i loop makes the log's {len(found)} sizes: the command runs "
             f"{low} to {high} bytes with {loop}"])


def _run_options(collective: str, measured: NcclTestsTable) -> tuple[str, list[str]]:
    """``simcoll run``'s ``-d`` (the log's element type where ``run -d`` reads it and it
    is not the default, float32; else the type of its size the comparison simulated),
    ``-o`` (for a reduction other than a sum: the op the comparison simulated) and ``-r``
    (for a rooted collective whose rows name their root) of the log's first row, and a
    note where other rows have another."""
    coll = get_collective(collective)
    dtypes = list(dict.fromkeys(_type_option(row.type) for row in measured.rows))
    ops = list(dict.fromkeys("prod" if op is ReduceOp.PRODUCT else op.name.lower()
                             for op in map(simulated_op, (row.redop for row in measured.rows))
                             if op is not None)) if coll.reduces else []
    roots = list(dict.fromkeys(row.root for row in measured.rows
                               if row.root is not None and row.root >= 0)) \
        if coll.rooted else []
    options = (f" -d {dtypes[0]}" if dtypes[0] != "float32" else "") + (
        f" -o {ops[0]}" if ops and ops[0] != "sum" else "") + (
        f" -r {roots[0]}" if roots else "")
    caveats = [f"the log's rows have {len(found)} {what} ({', '.join(map(str, found))}): "
               f"the command runs the first row's" for what, found in
               (("dtypes", dtypes), ("ops", ops), ("roots", roots)) if len(found) > 1]
    return options, caveats


def _type_option(type_name: str) -> str:
    """``run -d``'s name for a log's element type: its own where ``run -d`` reads it
    (``bfloat16``, ``int32``, ``f8e4m3``, ...), ``float32`` for float, else the type of
    its size the comparison simulates."""
    try:
        found = resolve_dtype(type_name)
    except (CommandLineError, InvalidInputError):
        return simulated_dtype(type_name).name
    return "float32" if found == np.dtype(np.float32) else type_name


def _record(fit: Calibration) -> dict[str, Any]:
    """The fit as JSON-ready values."""
    return {"values": {k: float(v) for k, v in fit.values.items()},
            "initial": {k: float(v) for k, v in fit.initial.items()},
            "params": {k: float(v) for k, v in fit.params.items()},
            "sizes": list(fit.sizes), "measured": list(fit.measured),
            "before": list(fit.before), "after": list(fit.after),
            "error_before": list(fit.error_before), "error_after": list(fit.error_after),
            "evaluations": fit.evaluations, "message": fit.message,
            "bounds": {k: [float(low), float(high)] for k, (low, high) in fit.bounds.items()},
            "unmoved": list(fit.unmoved),
            "probed": {k: float(v) for k, v in fit.probed.items()}, "on_bound": fit.on_bound,
            "left_out": list(fit.left_out), "undetermined": fit.undetermined,
            "traded_off": list(fit.traded_off),
            "settings": [list(x) for x in fit.settings],
            "left_out_settings": [list(x) for x in fit.left_out_settings],
            "unsimulated": [dict(point) for point in fit.unsimulated],
            "past_limits": list(fit.past_limits), "stalled_at": fit.stalled_at}
