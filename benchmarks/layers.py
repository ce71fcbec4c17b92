"""Where a data-free ring message's wall time goes: the ring run through each layer in turn.

Every row runs the same schedule, N ranks each sending 2(N-1) messages to the right and
receiving as many from the left, and adds one layer to the row before it:

1. ``timeout``: one SimPy timeout per message (the one-timeout SimPy ring of run.py);
2. ``engine``: simcoll's engine without simcoll: one event per ring step for all ranks,
   whose callback resumes every rank in it (``simcoll.engine.complete``), run by
   ``simcoll.engine.run``; each rank yields a fresh event per message;
3. ``comm, analytical``: a bare ring program through ``sc.run_program``: one
   ``comm.sendrecv`` per message (communicator, message matching, ``Joint`` events,
   arrivals), on the analytical network;
4. ``comm, flow``: the same program on the flow network (routes, traffic counters, flows
   reserved alone on their links, one batch per instant);
5. ``ring all_reduce``: ``sc.simulate(..., algorithm="ring")`` on the flow network, its
   rank programs run (``simcoll.lone_flows.enabled = False``): the ring algorithm's
   blocks, reductions and bookkeeping, and simulate's own set-up and result.

A last row, apart from the layers, is what ``sc.simulate`` does by default on this
machine: it times the ring over arrays (``simcoll.lone_flows``), every step for all
ranks at once, without SimPy.

Each row is the best of ``--repeat`` runs in one process, rows alternated, and is shown
against the row before it and against the first.

    python benchmarks/layers.py              # N = 256
    python benchmarks/layers.py 256 1024 --repeat 3
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import simpy
from interrupts import run_main
from ring_throughput import timeout_floor
from simpy.events import Event, Timeout

import simcoll as sc
from simcoll.buffers import VirtualBuffer
from simcoll.engine import complete, run

__all__ = ["engine_floor", "comm_ring", "LAYERS"]


def engine_floor(n: int, steps: int) -> float:
    """Wall seconds for ``n`` processes that each yield ``steps`` fresh events, all of a
    step's events completed by one timeout's callback, through simcoll's run loop."""
    env = simpy.Environment()
    step: list[Event] = []

    def fire(event: Timeout) -> None:
        for waiting in event._value:
            complete(waiting, None)

    def rank():
        for _ in range(steps):
            event = Event(env)
            step.append(event)
            if len(step) == n:
                Timeout(env, 1e-6, list(step)).callbacks.append(fire)
                step.clear()
            yield event

    for _ in range(n):
        env.process(rank())
    start = time.perf_counter()
    run(env, until=float("inf"), max_events=10**12, max_same_instant=10**12)
    return time.perf_counter() - start


def _ring_program(comm, chunk: VirtualBuffer, steps: int):
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    for _ in range(steps):
        yield comm.sendrecv(chunk, dst=right, src=left)


def comm_ring(n: int, steps: int, network: str) -> float:
    """Wall seconds for a bare sendrecv ring (one ``comm.sendrecv`` per message) of 1 GiB /
    ``n`` chunks on ``switch(n)``, through ``sc.run_program``."""
    topo = sc.topology.switch(n)
    chunk = VirtualBuffer.of((1 << 30) // n // 4, np.float32)
    start = time.perf_counter()
    sc.run_program(topo, _ring_program, chunk, steps, network=network)
    return time.perf_counter() - start


def _ring_all_reduce(n: int, arrays: bool = False) -> float:
    topo = sc.topology.switch(n)
    sc.lone_flows.enabled = arrays
    start = time.perf_counter()
    sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 30)
    wall = time.perf_counter() - start
    sc.lone_flows.enabled = True
    return wall


LAYERS: list[tuple[str, Callable[[int, int], float]]] = [
    ("one SimPy timeout per message", timeout_floor),
    ("engine: one event per step, ranks resumed in it", engine_floor),
    ("comm.sendrecv ring, analytical network", lambda n, s: comm_ring(n, s, "analytical")),
    ("comm.sendrecv ring, flow network", lambda n, s: comm_ring(n, s, "flow")),
    ("ring all_reduce (sc.simulate), flow network", lambda n, s: _ring_all_reduce(n)),
]
"""The layers, each adding to the one before it."""
ARRAYS = ("ring all_reduce timed over arrays (the default)",
          lambda n, s: _ring_all_reduce(n, arrays=True))
"""Apart from the layers: what ``sc.simulate`` does on this ring by default."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[256], help="rank counts N")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (best counts)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: use an integer >= 1")
    for n in args.sizes:
        if n < 2:
            parser.error(f"N={n}: a ring needs 2 ranks or more")
    for n in args.sizes:
        steps = 2 * (n - 1)
        messages = n * steps
        _ring_all_reduce(min(n, 8))  # imports and first-call costs out of the way
        rows = [*LAYERS, ARRAYS]
        best = [float("inf")] * len(rows)
        for _ in range(args.repeat):
            for i, (_, layer) in enumerate(rows):
                best[i] = min(best[i], layer(n, steps))
        print(f"ring of N = {n} ranks, {messages:,} messages, best of {args.repeat}")
        print(f"{'layer':<50}{'wall s':>8}{'us/msg':>8}{'added us/msg':>14}{'x first':>9}")
        for i, (label, _) in enumerate(rows):
            added = ("" if i in (0, len(LAYERS))
                     else f"{(best[i] - best[i - 1]) / messages * 1e6:14.2f}")
            print(f"{label:<50}{best[i]:8.3f}{best[i] / messages * 1e6:8.2f}{added:>14}"
                  f"{best[i] / best[0]:9.2f}")


if __name__ == "__main__":
    run_main(main)
