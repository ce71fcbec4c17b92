"""Message throughput: data-free ring all_reduce on ``switch(N)`` against three floors.

Each case runs in its own subprocess, so peak memory (``ru_maxrss``) is that case's alone.
simcoll runs the ring's rank programs (``programs``) or, as ``sc.simulate`` does by
default where no message shares a link, times it over arrays (``arrays``,
``simcoll.lone_flows``). The subprocess first runs simcoll, reads its peak RSS, then
runs the floors, each with the same number of messages (2(N-1) per rank):

* ``timeout``: N SimPy processes, each yielding one ``env.timeout`` per message (one event
  and one process resume per message: the least a SimPy simulation of the ring can do);
* ``heapq``: the same schedule as a plain ``heapq`` loop (one push and one pop per
  message, no SimPy);
* ``store``: N SimPy processes passing tokens around a ring of ``simpy.Store`` objects,
  one timeout per message (three events per message; the README's former floor).

    python benchmarks/ring_throughput.py            # N = 64, 256, 1024
    python benchmarks/ring_throughput.py 64 256 4096
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import simpy
from interrupts import INTERRUPTED, run_main


def timeout_floor(n: int, steps: int) -> float:
    """Wall seconds for ``n`` SimPy processes yielding ``steps`` timeouts each."""
    env = simpy.Environment()

    def rank():
        for _ in range(steps):
            yield env.timeout(1e-6)

    for _ in range(n):
        env.process(rank())
    start = time.perf_counter()
    env.run()
    return time.perf_counter() - start


def heapq_floor(n: int, steps: int) -> float:
    """Wall seconds for the same schedule as a bare heapq loop: pop a rank's next
    message, push the one after it."""
    start = time.perf_counter()
    queue = [(1e-6, r, 1) for r in range(n)]
    heapq.heapify(queue)
    pop, push = heapq.heappop, heapq.heappush
    while queue:
        when, r, step = pop(queue)
        if step < steps:
            push(queue, (when + 1e-6, r, step + 1))
    return time.perf_counter() - start


def baseline(n: int, steps: int) -> float:
    """Wall seconds for ``n`` ranks x ``steps`` token passes through simpy.Store rings."""
    env = simpy.Environment()
    stores = [simpy.Store(env) for _ in range(n)]

    def rank(r: int):
        right, mine = stores[(r + 1) % n], stores[r]
        for s in range(steps):
            yield env.timeout(1e-6)
            right.put(s)
            yield mine.get()

    for r in range(n):
        env.process(rank(r))
    start = time.perf_counter()
    env.run()
    return time.perf_counter() - start


def count_events() -> list[int]:
    """Make every later run record how many events it put on SimPy's queue (processed or
    cancelled) in the returned list's only element."""
    import simcoll.execution as execution

    counted = [0]
    run = execution.run

    def counting(env, **limits):
        done = run(env, **limits)
        counted[0] = next(env._eid)
        return done

    execution.run = counting
    return counted


def ring_case(n: int, network: str, nbytes: str, arrays: bool = False) -> dict:
    """Run one data-free ring all_reduce and its baseline in this process: its rank
    programs, or (``arrays``) timed over arrays as ``sc.simulate`` does by default
    (``simcoll.lone_flows``)."""
    import simcoll as sc

    sc.lone_flows.enabled = arrays
    topo = sc.topology.switch(n)
    events = count_events()
    start = time.perf_counter()
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=nbytes, network=network)
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    steps = 2 * (n - 1)
    floors = {"timeout": timeout_floor(n, steps), "heapq": heapq_floor(n, steps)}
    floors["store"] = baseline(n, steps) if n <= 1024 else None
    return {"n": n, "network": network, "arrays": arrays, "nbytes": nbytes,
            "messages": res.messages,
            "wall": wall, "base": floors["timeout"], "floors": floors, "rss": rss,
            "sim_time": res.time, "events": events[0]}


def uneven_ring_case(n: int, arrays: bool) -> dict:
    """A data-free ring all_gatherv on ``switch(n)`` with blocks of 0 to 400 KB drawn at
    random (seed 0), through its rank programs or timed over arrays."""
    import numpy as np

    import simcoll as sc

    sc.lone_flows.enabled = arrays
    topo = sc.topology.switch(n)
    blocks = [4 * int(c) for c in np.random.default_rng(0).integers(0, 100_000, n)]
    start = time.perf_counter()
    res = sc.simulate(topo, "all_gatherv", algorithm="ring", nbytes=blocks)
    return {"n": n, "arrays": arrays, "messages": res.messages,
            "wall": time.perf_counter() - start, "sim_time": res.time}


def in_subprocess(fn: str, *args: object, module: str = "ring_throughput",
                  env: dict[str, str] | None = None) -> dict:
    """Run ``module.fn(*args)`` in a fresh interpreter (with ``env`` added to the
    environment); return its JSON result."""
    here = str(Path(__file__).resolve().parent)
    code = (f"import json, sys; sys.path.insert(0, {here!r}); import {module} as m; "
            f"from interrupts import run_main; "
            f"run_main(lambda: print(json.dumps(m.{fn}(*{args!r}))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})
    if done.returncode == INTERRUPTED:
        raise KeyboardInterrupt
    if done.returncode:
        raise RuntimeError(f"{module}.{fn}{args!r} failed (exit status {done.returncode}):\n"
                           + "\n".join(done.stderr.strip().splitlines()[-15:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(case: dict) -> str:
    rate = case["messages"] / case["wall"]
    floors = "  ".join(f"{name} {t:.2f} s (x{case['wall'] / t:.2f})"
                       for name, t in case["floors"].items() if t)
    path = "arrays" if case["arrays"] else "programs"
    return (f"ring {case['network']:<10} {path:<8} N={case['n']:<5} "
            f"{case['messages']:>10,d} msgs "
            f"{case['wall']:8.2f} s {rate / 1e3:8.1f} kmsg/s "
            f"{case['events'] / case['messages']:.2f} events/msg  "
            f"peak {case['rss'] / 2**20:7.1f} MiB  floors: {floors}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[64, 256, 1024], metavar="N",
                        help="ring sizes (ranks of switch(N)); default 64 256 1024")
    sizes = parser.parse_args(argv).sizes
    for n in sizes:
        if n < 2:
            parser.error(f"N={n}: a ring needs 2 ranks or more")
    for n in sizes:
        for network in ("flow", "analytical"):
            for arrays in (False, True):
                print(row(in_subprocess("ring_case", n, network, "1GiB", arrays)), flush=True)


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1:]))
