"""Calibrated against measured: how well one nccl-tests log predicts the sizes it left out.

For each public table of nccl_public.py, on the same machine as nccl_tests_compare.py
builds for it, ``sc.calibrate`` fits the two costs of a run that NCCL's own model leaves
to the machine: ``launch_overhead`` (seconds added to each collective's launch) and
``step_latency_scale`` (a factor on NCCL's per-step latencies). The fit sees every other
size of the table (the 1st, 3rd, 5th, ...); the sizes between are held out, simulated
with the fitted costs and compared with what was measured. The tuner does not see
either cost, so NCCL's choice per size is the one nccl_tests_compare.py prints.

    python benchmarks/nccl_calibrated.py                       # every table to 256 MiB
    python benchmarks/nccl_calibrated.py --tables a100x8_oci --max-size 1GiB
    python benchmarks/nccl_calibrated.py --starts 4   # four fits per table, the best kept
    python benchmarks/nccl_calibrated.py --loss soft_l1   # spikes pull the fits less
    python benchmarks/nccl_calibrated.py --workers 2      # each trial's sizes on 2 processes

Per table it prints the fitted costs, the geometric-mean |time error| (exp(mean |log
(simulated / measured)|) - 1: the factor the times differ by on average, less 1, so sizes
all at -50% give 100%) of the defaults and of the fit on the fitted sizes and on
the held-out ones, then each size's error; then, for two tables of one cluster at two
node counts, the larger one predicted with the costs fitted to the smaller. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interrupts import run_main  # noqa: E402
from nccl_public import TABLES, PublicTable, table  # noqa: E402
from nccl_tests_compare import (  # noqa: E402
    GEOMEAN,
    geomean,
    machine,
    run_params,
    selected_tables,
    size_argument,
)

import simcoll as sc  # noqa: E402
from simcoll.calibration import LOSSES  # noqa: E402

FREE = {"launch_overhead": (5e-6, 0.0, 500e-6), "step_latency_scale": (1.0, 0.05, 20.0)}
"""Where each fit starts and its bounds: 0 to 500 us, 1/20 to 20 times NCCL's steps."""

TRANSFERS = (("h100x16_ndr_default", "h100x64_ndr_default"),)
"""Tables of one cluster at two sizes (nccl-tests #309: 2 and 8 DGX H100 nodes): the
costs fitted to the first, used to predict the second."""

MAX_TRIALS = 40
"""The most trial points a fit may simulate (scipy stops earlier when it converges)."""


Logs = tuple[list[float], list[float], list[float]]


def calibrate_table(public: PublicTable, max_size: float, starts: int = 1,
                    loss: str = "linear", workers: int = 1) -> tuple[Logs, dict[str, Any]]:
    """Fit one table's even rows, print the result; return the log errors of the
    defaults (every size), of the fit on its own sizes and on the held-out ones, and the
    fitted costs."""
    topo, call, _ = machine(public)
    params = run_params(public, "nccl")
    measured = table(public)
    rows = tuple(r for r in measured.rows if r.size <= max_size)
    fitted_rows, held_rows = rows[::2], rows[1::2]
    print(f"\n== {public.id}: {call}, all_reduce / nccl {params or ''}")
    print(f"   fitted on {len(fitted_rows)} sizes, {len(held_rows)} held out "
          f"(up to {rows[-1].size} B)")
    started = time.perf_counter()
    fit = sc.calibrate(lambda: topo, dataclasses.replace(measured, rows=fitted_rows),
                       algorithm="nccl", free=FREE,
                       max_evaluations=MAX_TRIALS * starts * len(fitted_rows),
                       starts=starts, loss=loss, workers=workers, **params)
    costs: dict[str, Any] = dict(fit.params)
    shown = ", ".join(f"{k} {v * 1e6:.2f} us" if k == "launch_overhead" else f"{k} {v:.3f}"
                      for k, v in costs.items())
    budget = "; stopped at its budget" if "max_evaluations" in fit.message else ""
    print(f"   fitted: {shown} ({fit.evaluations} simulations{budget}, "
          f"{time.perf_counter() - started:.0f} s)")
    print(f"   {'size (B)':>12} {'measured us':>12} {'default us':>11} {'calibrated us':>14} "
          f"{'error before':>13} {'error after':>12}")
    before: list[float] = []
    fitted: list[float] = []
    held: list[float] = []
    for i, row in enumerate(rows):
        plain = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=row.size,
                            **params).time
        tuned = fit.after[i // 2] if i % 2 == 0 else sc.simulate(
            topo, "all_reduce", algorithm="nccl", nbytes=row.size, **params, **costs).time
        true = row.measurement().time
        before.append(math.log(plain / true))
        (fitted if i % 2 == 0 else held).append(math.log(tuned / true))
        print(f"   {row.size:>12d} {true * 1e6:>12.2f} {plain * 1e6:>11.2f} "
              f"{tuned * 1e6:>14.2f} {plain / true - 1:>+13.1%} {tuned / true - 1:>+12.1%}"
              f"{'' if i % 2 == 0 else '  held out'}")
    print(f"   geometric-mean |time error| ({GEOMEAN}): defaults {geomean(before):.1%}; "
          f"calibrated {geomean(fitted):.1%} on the fitted sizes, {geomean(held):.1%} held "
          f"out")
    return (before, fitted, held), costs


def transfer(source: str, target: PublicTable, costs: dict[str, Any],
             max_size: float) -> None:
    """Print ``target``'s sizes simulated with its defaults and with the costs fitted to
    ``source``, against what was measured."""
    topo, call, _ = machine(target)
    params = run_params(target, "nccl")
    print(f"\n== {target.id} ({call}) with the costs fitted to {source}")
    print(f"   {'size (B)':>12} {'measured us':>12} {'default us':>11} {'transferred us':>15} "
          f"{'error before':>13} {'error after':>12}")
    before, after = [], []
    for size, true_us, _, _ in (row for row in target.rows if row[0] <= max_size):
        plain, moved = (sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size,
                                    **params, **extra).time * 1e6
                        for extra in ({}, costs))
        before.append(math.log(plain / true_us))
        after.append(math.log(moved / true_us))
        print(f"   {size:>12d} {true_us:>12.2f} {plain:>11.2f} {moved:>15.2f} "
              f"{plain / true_us - 1:>+13.1%} {moved / true_us - 1:>+12.1%}")
    print(f"   geometric-mean |time error| ({GEOMEAN}): defaults {geomean(before):.1%}, "
          f"with {source}'s costs {geomean(after):.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", help="comma-separated table ids (default: all): "
                                         + ", ".join(t.id for t in TABLES))
    parser.add_argument("--max-size", type=size_argument, default=256 * 2**20,
                        help="fit and check sizes up to this (default: 256 MiB)")
    parser.add_argument("--starts", type=int, default=1,
                        help="fits per table, from the initial costs and from random "
                             "points (sc.calibrate's starts=; default: 1)")
    parser.add_argument("--loss", default="linear",
                        choices=LOSSES,
                        help="sc.calibrate's loss: least squares, or a robust loss that "
                             "lets outlying sizes pull less (default: linear)")
    parser.add_argument("--workers", type=int, default=1,
                        help="local processes that simulate each trial point's sizes "
                             "(sc.calibrate's workers=; the same fits; default: 1)")
    args = parser.parse_args(argv)
    if args.starts < 1:
        parser.error(f"--starts {args.starts}: use an integer >= 1")
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: use an integer >= 1")
    try:
        import scipy  # noqa: F401  (sc.calibrate's, checked before any table)
    except ImportError:
        parser.error('sc.calibrate needs scipy: pip install "simcoll[calibrate]"')
    chosen = selected_tables(parser, args.tables)
    started = time.perf_counter()
    totals: list[list[float]] = [[], [], []]
    lines = []
    fitted: dict[str, dict[str, Any]] = {}
    for public in chosen:
        if sum(row[0] <= args.max_size for row in public.rows) < 4:
            print(f"\n== {public.id}: fewer than four sizes up to --max-size; skipped")
            continue
        logs, fitted[public.id] = calibrate_table(public, args.max_size, args.starts,
                                                  args.loss, args.workers)
        for total, part in zip(totals, logs):
            total.extend(part)
        lines.append(f"   {public.id:<22} {geomean(logs[0]):>9.1%} {geomean(logs[1]):>9.1%} "
                     f"{geomean(logs[2]):>9.1%}")
    if not lines:
        return 1
    for source, target in TRANSFERS:
        if source in fitted and target in fitted:
            transfer(source, next(t for t in TABLES if t.id == target), fitted[source],
                     args.max_size)
    print(f"\n== summary: geometric-mean |time error| ({GEOMEAN}: the factor the times "
          f"differ by on average, less 1), all_reduce / nccl")
    print(f"   {'table':<22} {'defaults':>9} {'fitted':>9} {'held out':>9}")
    print("\n".join(lines))
    print(f"   {'all tables':<22} {geomean(totals[0]):>9.1%} {geomean(totals[1]):>9.1%} "
          f"{geomean(totals[2]):>9.1%}")
    print(f"   ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    run_main(main)
