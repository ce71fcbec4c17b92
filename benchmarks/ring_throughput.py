"""Message throughput: data-free ring all_reduce on ``switch(N)`` against a bare SimPy floor.

Each case runs in its own subprocess, so peak memory (``ru_maxrss``) is that case's alone.
The subprocess first runs simcoll, reads its peak RSS, then runs the baseline: the same
number of message events with the least possible work (N SimPy processes passing tokens
through ``simpy.Store`` objects, one timeout per message, 2(N-1) messages per rank).

    python benchmarks/ring_throughput.py            # N = 64, 256, 1024
    python benchmarks/ring_throughput.py 64 256 4096
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import simpy


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


def ring_case(n: int, network: str, nbytes: str) -> dict:
    """Run one data-free ring all_reduce and its baseline in this process."""
    import simcoll as sc

    topo = sc.topology.switch(n)
    start = time.perf_counter()
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=nbytes, network=network)
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    base = baseline(n, 2 * (n - 1))
    return {"n": n, "network": network, "nbytes": nbytes, "messages": res.messages,
            "wall": wall, "base": base, "rss": rss, "sim_time": res.time}


def in_subprocess(fn: str, *args: object, module: str = "ring_throughput") -> dict:
    """Run ``module.fn(*args)`` in a fresh interpreter; return its JSON result."""
    here = str(Path(__file__).resolve().parent)
    code = (f"import json, sys; sys.path.insert(0, {here!r}); import {module} as m; "
            f"print(json.dumps(m.{fn}(*{args!r})))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def row(case: dict) -> str:
    rate = case["messages"] / case["wall"]
    return (f"ring {case['network']:<10} N={case['n']:<5} {case['messages']:>10,d} msgs "
            f"{case['wall']:8.2f} s {rate / 1e3:8.1f} kmsg/s  peak {case['rss'] / 2**20:7.1f} MiB"
            f"  baseline {case['base']:7.2f} s  ratio {case['wall'] / case['base']:.2f}")


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [64, 256, 1024]
    for n in sizes:
        for network in ("flow", "analytical"):
            print(row(in_subprocess("ring_case", n, network, "1GiB")), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
