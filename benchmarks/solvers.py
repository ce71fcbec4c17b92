"""Pure-Python against numpy progressive filling: where the crossover lies; and both
compiled with numba (``simcoll.network.compiled``), where it is installed.

Each problem is what an uneven all-to-all on ``switch(p)`` leaves mid-run: a random share
of the p (p - 1) flows, each crossing its sender's up link and its receiver's down link,
on links of one bandwidth or of three (more bottleneck levels). The solvers run on the
same problems in this process, best of several runs each (the compiled ones after a first
call that compiles them or loads them from numba's cache).

Then the same problems with every route taken by ``copies`` flows (as the slices in
flight of one NCCL connection are): each solver on every flow, against each solver on
one row per route with its multiplicity, the grouping (``np.unique`` of route ids) timed
with it.

    python benchmarks/solvers.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from interrupts import run_main

from simcoll.network import compiled
from simcoll.network.general import GROUP_FROM
from simcoll.network.maxmin import CROSSOVER, fill, fill_arrays


def problem(p: int, share: float, rng: np.random.Generator, kinds: int):
    routes = [(2 * i, 2 * j + 1) for i in range(p) for j in range(p)
              if i != j and rng.random() < share]
    capacity = rng.choice([1e10, 2.5e10, 1e11][:kinds], 2 * p).tolist()
    return routes, capacity


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def compare(p: int, share: float, kinds: int, seed: int = 0
            ) -> tuple[int, float, float, float | None, float | None]:
    """(flows, Python s, numpy s, compiled Python-order s, compiled numpy-order s) for one
    problem; the compiled times are None without numba."""
    routes, capacity = problem(p, share, np.random.default_rng(seed), kinds)
    links = np.array(routes, dtype=np.intp)
    cap = np.array([*capacity, np.inf])
    mapping = dict(enumerate(capacity))
    repeat = 20 if len(routes) < 500 else 5
    python = best(lambda: fill(routes, mapping), repeat)
    vectorized = best(lambda: fill_arrays(links, cap), repeat)
    rows = compiled.solver("rows", compiled.WARMUP)
    arrays = compiled.solver("arrays", compiled.WARMUP)
    if rows is None or arrays is None:
        return len(routes), python, vectorized, None, None
    rows(links, cap, None)
    arrays(links, cap, None)
    return (len(routes), python, vectorized, best(lambda: rows(links, cap, None), repeat),
            best(lambda: arrays(links, cap, None), repeat))


def compare_grouped(p: int, share: float, kinds: int, copies: int,
                    seed: int = 0) -> tuple[int, int, float, float, float, float]:
    """(flows, routes, Python s, Python grouped s, numpy s, numpy grouped s)."""
    routes, capacity = problem(p, share, np.random.default_rng(seed), kinds)
    ids = np.repeat(np.arange(len(routes)), copies)
    every = [routes[i] for i in ids.tolist()]
    links = np.array(every, dtype=np.intp)
    cap = np.array([*capacity, np.inf])
    mapping = dict(enumerate(capacity))

    def grouped_python():
        _, first, inverse, many = np.unique(ids, return_index=True, return_inverse=True,
                                            return_counts=True)
        rows = [every[i] for i in first.tolist()]
        return np.array(fill(rows, mapping, many.tolist()))[inverse]

    def grouped_numpy():
        _, first, inverse, many = np.unique(ids, return_index=True, return_inverse=True,
                                            return_counts=True)
        return fill_arrays(links[first], cap, many)[inverse]

    repeat = 10 if len(every) < 2000 else 3
    return (len(every), len(routes), best(lambda: fill(every, mapping), repeat),
            best(grouped_python, repeat), best(lambda: fill_arrays(links, cap), repeat),
            best(grouped_numpy, repeat))


def main() -> None:
    argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split())).parse_args()
    print(f"{'links':>14}{'flows':>7}{'python ms':>11}{'numpy ms':>10}{'numpy/python':>14}"
          f"{'compiled: python order ms':>27}{'numpy order ms':>16}")
    for kinds in (1, 3):
        for p, share in ((3, 1.0), (4, 1.0), (6, 0.8), (8, 0.8), (12, 0.5), (16, 0.5),
                         (24, 0.5), (32, 0.5), (48, 0.5), (64, 0.5), (96, 0.5)):
            flows, python, vectorized, rows, arrays = compare(p, share, kinds)
            label = "equal" if kinds == 1 else "3 bandwidths"
            jit = (f"{rows * 1e3:>27.3f}{arrays * 1e3:>16.3f}" if rows is not None
                   and arrays is not None else f"{'(no numba)':>27}")
            print(f"{label:>14}{flows:>7}{python * 1e3:>11.3f}{vectorized * 1e3:>10.3f}"
                  f"{vectorized / python:>14.2f}{jit}", flush=True)
    print(f"simcoll uses numpy from {CROSSOVER} flows on (simcoll.network.maxmin.CROSSOVER)")
    print(f"{'links':>14}{'flows':>7}{'routes':>7}{'python ms':>11}{'grouped':>9}"
          f"{'numpy ms':>10}{'grouped':>9}")
    for kinds in (1, 3):
        for p, share, copies in ((4, 1.0, 2), (4, 1.0, 8), (8, 0.8, 2), (8, 0.8, 8),
                                 (16, 0.5, 4), (16, 0.5, 8), (32, 0.5, 8)):
            flows, routes, python, python_g, vectorized, vectorized_g = compare_grouped(
                p, share, kinds, copies)
            label = "equal" if kinds == 1 else "3 bandwidths"
            print(f"{label:>14}{flows:>7}{routes:>7}{python * 1e3:>11.3f}"
                  f"{python_g * 1e3:>9.3f}{vectorized * 1e3:>10.3f}{vectorized_g * 1e3:>9.3f}",
                  flush=True)
    print(f"simcoll groups by route from {GROUP_FROM} flows on "
          "(simcoll.network.general.GROUP_FROM)")


if __name__ == "__main__":
    run_main(main)
