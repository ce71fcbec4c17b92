"""The simcoll benchmark suite: one table of figures and ratios (issues 4 and 12), never
timed tests.

    python benchmarks/run.py            # everything, N = 4096 included (13 to 22 minutes here)
    python benchmarks/run.py --quick    # without N = 4096, switch(128), p = 2000, 8 GiB NCCL
    python benchmarks/run.py --only=5,6 # some sections only (1, 2, 3, 3b, 4, 5, 6, 7, 8)

Every case runs in its own subprocess, so its peak RSS is its own. Ratios are measured in
the same subprocess as the case they compare:

* ring rows: the ring's rank programs, then the same ring timed over arrays as
  ``sc.simulate`` does by default where no message shares a link
  (``simcoll.lone_flows``), and an uneven ring (all_gatherv) both ways; wall time over
  the one-timeout-per-message SimPy ring (N processes, each
  yielding one ``env.timeout`` per message), then over a plain ``heapq`` loop of the same
  schedule and over the former floor (tokens through a ring of ``simpy.Store``s, three
  events per message); ``ev/msg`` is the events simcoll put on SimPy's queue per message
  (processed or cancelled);
* contended rows (sections 2 and 3b) run with the compiled max-min solvers where numba
  is installed, and once more with the pure ones (``SIMCOLL_NO_JIT=1``); the solvers are
  compiled (and cached) before the first row;
* SimGrid rows: the same case through SimGrid's Python API (``simgrid_cases.py``, run by
  the interpreter that has Debian's ``python3-simgrid``) and on its C++ engine
  (``simgrid_cases.cpp``, built with g++ where SimGrid's headers are: Debian's
  ``libsimgrid-dev``), in the same run, when present; the ratio is simcoll's wall time
  over SimGrid's. The uneven all-to-all also runs a second time in its process: the
  first run pays for loading numba and its cached machine code (about 0.6 s here), the
  second does not;
* data rows: wall time over the numpy floor, the work any ring all_reduce must do: per
  rank, one ``np.add`` into a new array for each of the p-1 chunks it reduces, and every
  element of its output written once (see ``numpy_floor``). The floor runs first, then
  the simulation twice, then twice with the numpy check, then twice with the check
  through the rank programs (``sc.lone_flows.enabled = False``, the path every data-mode
  ring took before commit 0ee898e), then the floor again; the faster run of each
  counts, so all work on memory the process has already touched. The first runs of each
  (the floor's, then the simulation's, each touching new memory) are shown too, and so
  is the ratio to ``copies_floor``, the narrower floor of issue 4's wording. Last, the
  check alone (``simcoll.check.compare`` on one run's outputs, which allocates no large
  array) on one thread and on ``check.WORKERS``, best of 2 each.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time

import numpy as np
from interrupts import run_main
from ring_throughput import count_events, in_subprocess, ring_case
from workloads import simgrid, simgrid_binary, simgrid_cpp

from simcoll.network import compiled

JIT = compiled.AVAILABLE
"""Whether numba compiles the max-min solvers here; the contended rows then run a second
time with the pure solvers."""
NO_JIT = {"SIMCOLL_NO_JIT": "1"}

__all__ = ["ring_case", "contention_case", "nccl_case", "traced_case", "data_case",
           "compile_case", "sweep_case"]


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _staggered_incast(comm, x, *, op=None):
    """Every worker sends the server a different size, so every departure changes rates."""
    p, r = comm.size, comm.rank
    server = comm.hosts[0]
    del op
    if r < p:
        yield comm.send(x[: len(x) * (r + 1) // p], dst=server)
    return x


def _server(comm, *, op=None):
    for w in range(comm.size):
        yield comm.recv(src=w)


def _staggered_model():
    """The incast's cost model: the server's link is busy until every byte is in."""
    from simcoll.cost import CostModel, Traffic

    def sent(p, nbytes, itemsize):
        count = nbytes // itemsize
        return np.array([count * (r + 1) // p * itemsize for r in range(p)], dtype=np.int64)

    def time(p, nbytes, alpha, beta, gamma):
        return alpha + int(sent(p, nbytes, 1).sum()) * beta

    def traffic(p, nbytes, itemsize):
        out = sent(p, nbytes, itemsize)
        return Traffic(out, np.zeros(p, np.int64), np.zeros(1, np.int64),
                       np.array([out.sum()], np.int64))

    def exact(p, nbytes, itemsize):
        return (nbytes // itemsize) % p == 0

    return CostModel(time=time, traffic=traffic, exact=exact)


def contention_case(kind: str, n: int, fast: bool = True) -> dict:
    """Incast (parameter_server, or staggered sizes) or all_to_all direct on switch(n)."""
    import simcoll as sc
    from simcoll.algorithms.registry import register
    from simcoll.network.flow import FlowNetwork

    FlowNetwork.fast = fast
    if kind == "staggered incast":
        register("all_reduce", "bench_staggered_incast", host=_server,
                 cost=_staggered_model())(_staggered_incast)
        topo = sc.topology.switch(n, servers=1)
        args = ("all_reduce", "bench_staggered_incast")
    elif kind == "parameter_server":
        topo = sc.topology.switch(n, servers=1)
        args = ("all_reduce", "parameter_server")
    else:
        import simcoll.algorithms.direct  # noqa: F401
        topo = sc.topology.switch(n)
        args = ("all_to_all", "direct")
    events = count_events()
    start = time.perf_counter()
    res = sc.simulate(topo, args[0], algorithm=args[1], nbytes=64 * 2**20)
    wall = time.perf_counter() - start
    return {"kind": kind, "n": n, "fast": fast, "flows": res.messages, "wall": wall,
            "messages": res.messages, "events": events[0], "rss": _rss()}


def nccl_case(nodes: int, nbytes: int, grouped: bool = True, network: str = "flow",
              collective: str = "all_reduce") -> dict:
    """NCCL's ``collective`` (all_reduce by default: 16 channels, up to 8 slices in flight
    per connection) on ``dgx_h100(nodes)``; ``grouped=False`` re-solves every flow, not
    one per route."""
    import simcoll as sc
    from simcoll.network import general

    if not grouped:
        general.GROUP_FROM = sys.maxsize
    topo = sc.topology.dgx_h100(nodes)
    events = count_events()
    start = time.perf_counter()
    res = sc.simulate(topo, collective, algorithm="nccl", nbytes=nbytes, network=network)
    wall = time.perf_counter() - start
    return {"wall": wall, "messages": res.messages, "events": events[0], "rss": _rss(),
            "time": res.time, "algo": res.params["algo"], "proto": res.params["proto"]}


def traced_case(nodes: int, nbytes: int) -> dict:
    """NCCL's all_reduce on ``dgx_h100(nodes)`` untraced (once to warm up, then timed),
    then traced, then its critical path (``sc.critical_path``) found, in one process."""
    import simcoll as sc

    topo = sc.topology.dgx_h100(nodes)
    sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=nbytes)
    start = time.perf_counter()
    sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=nbytes)
    untraced = time.perf_counter() - start
    start = time.perf_counter()
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=nbytes, trace=True)
    traced = time.perf_counter() - start
    start = time.perf_counter()
    path = sc.critical_path(res)
    walk = time.perf_counter() - start
    return {"untraced": untraced, "traced": traced, "walk": walk, "messages": res.messages,
            "events": len(res.trace or ()), "segments": len(path.segments), "rss": _rss()}


def numpy_floor(data: list[np.ndarray]) -> float:
    """Seconds numpy needs for the work any ring all_reduce must do, in one process.

    Per rank: one ``np.add`` into a new array for each of the p-1 chunks it reduces, and
    every element of its output written once (its reduced chunk and the p-1 chunks it
    gathers, copied into a new output array); all outputs stay alive to the end, as a
    simulation's outputs do.
    """
    p = len(data)
    start = time.perf_counter()
    outputs = []
    for x in data:
        chunks = np.array_split(x, p)
        reduced = chunks[0]
        for s in range(1, p):
            reduced = np.add(reduced, chunks[s])
        out = np.empty_like(x)
        for s, piece in enumerate(np.array_split(out, p)):
            piece[...] = reduced if s == 0 else chunks[s]
        outputs.append(out)
    return time.perf_counter() - start


def copies_floor(data: list[np.ndarray]) -> float:
    """The issue's narrower floor: per rank, copy each of the 2(p-1) chunks a ring
    all_reduce receives and add each of the p-1 it reduces, every result discarded at
    once (so numpy reuses the same cache-hot memory and no output is built)."""
    p = len(data)
    start = time.perf_counter()
    for x in data:
        chunks = np.array_split(x, p)
        for s in range(p - 1):
            got = chunks[(s + 1) % p].copy()
            np.add(chunks[s], got)
        for s in range(p - 1):
            chunks[s].copy()
    return time.perf_counter() - start


def data_case(p: int, nbytes: int) -> dict:
    """Ring all_reduce in data mode (with and without the correctness check) vs the floor."""
    import simcoll as sc

    rng = np.random.default_rng(0)
    data = [rng.standard_normal(nbytes // 4, dtype=np.float32) for _ in range(p)]
    topo = sc.topology.switch(p)

    def timed(check: bool, arrays: bool = True) -> float:
        sc.lone_flows.enabled = arrays
        try:
            start = time.perf_counter()
            res = sc.simulate(topo, "all_reduce", algorithm="ring", data=data, check=check)
            assert check is False or res.correct
            return time.perf_counter() - start
        finally:
            sc.lone_flows.enabled = True

    def check_alone(workers: int) -> float:
        """Best of 2: the check of one run's outputs on ``workers`` threads."""
        from simcoll import check
        from simcoll.collectives import COLLECTIVES
        from simcoll.ops import ReduceOp

        default, check.WORKERS = check.WORKERS, workers
        try:
            walls = []
            for _ in range(2):
                start = time.perf_counter()
                assert check.compare(COLLECTIVES["all_reduce"], data, outputs, ReduceOp.SUM,
                                     0)[0]
                walls.append(time.perf_counter() - start)
            return min(walls)
        finally:
            check.WORKERS = default

    from simcoll.check import WORKERS

    floor_cold = numpy_floor(data)
    cold = timed(False)
    warm = min(cold, timed(False))
    checked = min(timed(True), timed(True))
    programs = min(timed(True, arrays=False), timed(True, arrays=False))
    floor = min(floor_cold, numpy_floor(data))
    discarded = min(copies_floor(data) for _ in range(2))
    outputs = sc.simulate(topo, "all_reduce", algorithm="ring", data=data).outputs
    return {"p": p, "nbytes": nbytes, "cold": cold, "wall": warm, "wall_checked": checked,
            "programs_checked": programs,
            "floor": floor, "floor_cold": floor_cold, "floor_discarded": discarded,
            "check_serial": check_alone(1), "check_threads": check_alone(WORKERS),
            "workers": WORKERS, "rss": _rss()}


def memory_case(collective: str, algorithm: str, p: int) -> dict:
    """One data-free collective (40 MB per rank; rooted ones at rank p / 2) on
    ``switch(p)``; peak RSS counts from after the topology is built, so it is the run's
    own."""
    import simcoll as sc

    topo = sc.topology.switch(p)
    before = _rss()
    start = time.perf_counter()
    root = None if collective == "all_to_all" else p // 2
    res = sc.simulate(topo, collective, algorithm=algorithm, nbytes=40 * 10**6, root=root)
    return {"messages": res.messages, "wall": time.perf_counter() - start,
            "rss": _rss(), "run_rss": _rss() - before}


def compile_case() -> dict:
    """Compile (or load from numba's cache) the max-min solvers and the general regime's
    re-solve, on a small problem."""
    import numba

    from simcoll.network import compiled

    start = time.perf_counter()
    for kind in ("rows", "arrays"):
        solve = compiled.solver(kind, compiled.WARMUP)
        assert solve is not None
        solve(np.array([[0, 1]]), np.array([1.0, np.inf]), None)
    resolve = compiled.solver("resolve")
    assert resolve is not None
    for weighted in (False, True):
        resolve(np.array([[0, 1]]), np.ones(1, dtype=bool), np.zeros(1), np.ones(1),
                np.zeros(1), np.full(1, np.inf), np.zeros(1, dtype=np.intp),
                np.array([1.0, np.inf]), np.ones(1), weighted, 0.0, 0.0, 1e-9, 16, 512, 1,
                np.full(2, -1, dtype=np.int64))
    return {"wall": time.perf_counter() - start, "numba": numba.__version__}


def sweep_case(workers: int) -> dict:
    """200 small data-free simulations through simcoll.sweep."""
    import simcoll as sc
    from simcoll.sweep import sweep

    algorithms = ["ring", "naive", "parameter_server", "recursive_doubling"]
    sizes = [2**k for k in range(10, 30, 2)]
    start = time.perf_counter()
    results = sweep(sc.topology.switch, "all_reduce", algorithms=algorithms,
                    ranks=[2, 4, 8, 16, 32], sizes=sizes, workers=workers)
    return {"workers": workers, "points": len(results), "wall": time.perf_counter() - start}


def _line(case, work, wall, rate="", rss=0, floor=0.0, events=""):
    ratio = f"{wall / floor:7.2f}" if floor else ""
    floor_s = f"{floor:9.2f}" if floor else ""
    memory = f"{rss / 2**20:9.0f}" if rss else f"{'':9}"
    print(f"{case:<46}{work:>16}{wall:9.2f}{rate:>16}{events:>7}{memory}{floor_s}{ratio}",
          flush=True)


def _per_message(c):
    return f"{c['events'] / c['messages']:.2f}"


def _rings(quick: bool) -> None:
    print("-- 1. ring all_reduce 1 GiB data-free on switch(N): its rank programs, then timed "
          "over arrays (sc.simulate's default here); floor = one SimPy timeout per message, "
          "then heapq, then simpy.Store ring")
    for n in (64, 256, 1024) + (() if quick else (4096,)):
        for network in ("flow", "analytical") if n < 4096 else ("flow",):
            for arrays in (False, True):
                c = in_subprocess("ring_case", n, network, "1GiB", arrays)
                if network == "flow" and arrays:
                    arrays_flow = c
                elif network == "flow":
                    flow = c
                floors = c["floors"]
                path = "arrays" if arrays else "programs"
                _line(f"ring N={n} {network}, {path}", f"{c['messages']:,} msgs", c["wall"],
                      f"{c['messages'] / c['wall'] / 1e3:.0f} kmsg/s", c["rss"],
                      floors["timeout"], _per_message(c))
                _line("  same vs plain heapq loop", "", c["wall"], floor=floors["heapq"])
                if floors["store"] and not arrays:
                    _line("  same vs simpy.Store ring", "", c["wall"], floor=floors["store"])
        if n <= 256:
            g = simgrid("ring", n)
            if g:
                _line(f"  SimGrid {_simgrid_version()} Python API, same ring", "", g["wall"],
                      f"{g['messages'] / g['wall'] / 1e3:.0f} kmsg/s")
        g = simgrid_cpp("ring", n) if n <= 1024 else None
        if g:
            _line(f"  SimGrid {g['version']} C++, same ring", "", g["wall"],
                  f"{g['messages'] / g['wall'] / 1e3:.0f} kmsg/s", g["rss"])
            print(f"  simulated: SimGrid {g['time'] * 1e3:.6f} ms, simcoll's flow programs "
                  f"{flow['sim_time'] * 1e3:.6f} ms and arrays "
                  f"{arrays_flow['sim_time'] * 1e3:.6f} ms")
            for label, case in (("programs", flow), ("arrays", arrays_flow)):
                _line(f"  flow, {label}, vs SimGrid C++", "", case["wall"], floor=g["wall"])

    for arrays in (False, True):
        c = in_subprocess("uneven_ring_case", 1024, arrays)
        _line(f"all_gatherv ring N=1024, {'arrays' if arrays else 'programs'}",
              f"{c['messages']:,} msgs", c["wall"],
              f"{c['messages'] / c['wall'] / 1e3:.0f} kmsg/s")
        print(f"  simulated {c['sim_time'] * 1e3:.9f} ms")


def _all_to_allv(quick: bool) -> None:
    print("-- 2. uneven all-to-all (rank i sends (1 + ((7i + 13j) mod 97)/97) x 65536 float32 "
          "to rank j, all at once), flow model")
    for n in (64,) + (() if quick else (128,)):
        c = in_subprocess("alltoallv_case", n, "flow", True, module="workloads")
        _line(f"all_to_allv-like switch({n})", f"{c['messages']:,} msgs", c["wall"],
              f"{c['wall'] / c['messages'] * 1e6:.0f} us/msg", c["rss"], 0, _per_message(c))
        _line("  same, run again in that process", "", c["warm"],
              f"{c['warm'] / c['messages'] * 1e6:.0f} us/msg")
        if JIT:
            pure = in_subprocess("alltoallv_case", n, module="workloads", env=NO_JIT)
            _line("  same, pure solvers (SIMCOLL_NO_JIT=1)", "", pure["wall"],
                  f"{pure['wall'] / pure['messages'] * 1e6:.0f} us/msg", pure["rss"], 0,
                  _per_message(pure))
        if n == 64:
            for env, label in ((None, ""), (NO_JIT, ", pure solvers")) if JIT else \
                    ((None, ", pure solvers"),):
                rtt = in_subprocess("alltoallv_case", n, "flow_rtt", module="workloads",
                                    env=env)
                _line(f"  same, network flow_rtt{label}", "", rtt["wall"],
                      f"{rtt['wall'] / rtt['messages'] * 1e6:.0f} us/msg", rtt["rss"], 0,
                      _per_message(rtt))
        g = simgrid("alltoallv", n)
        if g:
            _line(f"  SimGrid {_simgrid_version()} Python API, same case", "", g["wall"],
                  f"{g['wall'] / g['messages'] * 1e6:.0f} us/msg")
            _line(f"  simulated time simcoll {c['time'] * 1e6:.3f} us, SimGrid "
                  f"{g['time'] * 1e6:.3f} us", "", c["wall"], floor=g["wall"])
        g = simgrid_cpp("alltoallv", n)
        if g:
            _line(f"  SimGrid {g['version']} C++, same case", "", g["wall"],
                  f"{g['wall'] / g['messages'] * 1e6:.0f} us/msg", g["rss"])
            _line(f"  simulated time simcoll {c['time'] * 1e6:.3f} us, SimGrid "
                  f"{g['time'] * 1e6:.3f} us", "", c["wall"], floor=g["wall"])
            _line("  simcoll's second run against SimGrid C++", "", c["warm"],
                  floor=g["wall"])


def _contention(quick: bool) -> None:
    print("-- 3. contention, 64 MiB per rank, flow model (us/flow = wall / flows)")
    for kind, sizes in (("parameter_server", (256, 1024)), ("staggered incast", (256, 1024)),
                        ("all_to_all direct", (64, 256))):
        for n in sizes:
            for fast in (True, False) if kind == "staggered incast" else (True,):
                c = in_subprocess("contention_case", kind, n, fast, module="run")
                label = f"{kind} N={n}" + ("" if fast else " (general solver only)")
                _line(label, f"{c['flows']:,} flows", c["wall"],
                      f"{c['wall'] / c['flows'] * 1e6:.1f} us/flow", c["rss"], 0,
                      _per_message(c))


def _nccl(quick: bool) -> None:
    print("-- 3b. NCCL model on dgx_h100(8), 64 MiB: all_reduce of 64 GPUs, 16 channels, "
          "up to 8 slices in flight per connection (general solver, flows grouped by route; "
          "then without grouping; then traced, and its critical path); all_to_all of 64 MiB "
          "on dgx_h100(32)"
          + ("" if quick else "; then 8 GiB, NCCL's choice there"))
    for grouped, env in ((True, None), (False, None)) + (((True, NO_JIT),) if JIT else ()):
        c = in_subprocess("nccl_case", 8, 64 * 2**20, grouped, module="run", env=env)
        label = "nccl all_reduce dgx_h100(8)" + ("" if grouped else " (ungrouped)") + (
            ", pure solvers" if env else "")
        _line(label, f"{c['messages']:,} msgs", c["wall"],
              f"{c['wall'] / c['messages'] * 1e6:.0f} us/msg", c["rss"], 0, _per_message(c))
    for env in (None,) + ((NO_JIT,) if JIT else ()):
        c = in_subprocess("nccl_case", 8, 64 * 2**20, True, "flow_rtt", module="run", env=env)
        label = "nccl all_reduce dgx_h100(8), flow_rtt" + (
            ", pure solvers" if env or not JIT else "")
        _line(label, f"{c['messages']:,} msgs", c["wall"],
              f"{c['wall'] / c['messages'] * 1e6:.0f} us/msg", c["rss"], 0, _per_message(c))
    c = in_subprocess("traced_case", 8, 64 * 2**20, module="run")
    _line("same, traced (floor: untraced)", f"{c['events']:,} events", c["traced"],
          f"{c['traced'] / c['messages'] * 1e6:.0f} us/msg", c["rss"], c["untraced"])
    _line("its critical path (sc.critical_path)", f"{c['segments']:,} segments", c["walk"],
          f"{c['walk'] / c['events'] * 1e6:.1f} us/event")
    # p2p to every peer, cross-rail parts through PXN proxies: 256 x 255 routes
    c = in_subprocess("nccl_case", 32, 64 * 2**20, True, "flow", "all_to_all", module="run")
    _line("nccl all_to_all dgx_h100(32), 256 GPUs", f"{c['messages']:,} msgs", c["wall"],
          f"{c['wall'] / c['messages'] * 1e6:.0f} us/msg", c["rss"], 0, _per_message(c))
    if quick:
        return
    c = in_subprocess("nccl_case", 8, 8 * 2**30, module="run")
    _line(f"same at 8 GiB ({c['algo']}, {c['proto']})", f"{c['messages']:,} msgs", c["wall"],
          f"{c['wall'] / c['messages'] * 1e6:.0f} us/msg", c["rss"], 0, _per_message(c))


def _mixed(quick: bool) -> None:
    print("-- 4. mixed training step on dgx_h100(4): TP all_reduce 32 MiB in each node, "
          "MoE uneven all-to-all (x1/4) over 32 GPUs, DP ring all_reduce 256 MiB, concurrent")
    c = in_subprocess("mixed_case", 4, module="workloads")
    _line("mixed step dgx_h100(4)", f"{c['messages']:,} msgs", c["wall"],
          f"{c['wall'] / c['messages'] * 1e6:.0f} us/msg", c["rss"], 0, _per_message(c))


def _data(quick: bool) -> None:
    print("-- 5. data mode, ring all_reduce float32; floor = numpy adds + output writes "
          "(best of 2; first run; narrow floor; with the numpy check, over arrays and "
          "through the rank programs; the check alone)")
    for p, nbytes in ((8, 256 * 2**20), (64, 16 * 2**20)):
        c = in_subprocess("data_case", p, nbytes, module="run")
        label = f"ring data p={p} {nbytes >> 20} MiB"
        _line(label, "", c["wall"], "", c["rss"], c["floor"])
        _line(f"{label}, first run", "", c["cold"], "", c["rss"], c["floor_cold"])
        _line(f"{label}, narrow floor", "", c["wall"], "", c["rss"], c["floor_discarded"])
        _line(f"{label}, check=True", "", c["wall_checked"], "", c["rss"], c["floor"])
        _line(f"{label}, check=True, programs", "", c["programs_checked"], "", c["rss"],
              c["floor"])
        _line(f"{label}, check only, 1 thread", "", c["check_serial"], "", 0, c["floor"])
        _line(f"{label}, check only, {c['workers']} threads", "", c["check_threads"], "", 0,
              c["floor"])


def _memory(quick: bool) -> None:
    print("-- 6. memory in data-free mode, 40 MB per rank on switch(p): rooted collectives "
          f"at p = 10,000, the pairwise all_to_all (p^2 messages) at p = 500 to "
          f"{'1,000' if quick else '2,000'}; peak MiB of the whole process, the run's own in "
          f"the rate column")
    cases = [("scatter", "binomial", 10_000), ("broadcast", "binomial", 10_000),
             ("gather", "binomial", 10_000), ("all_to_all", "pairwise", 500),
             ("all_to_all", "pairwise", 1000)] + ([] if quick else [
             ("all_to_all", "pairwise", 2000)])
    for collective, algorithm, p in cases:
        c = in_subprocess("memory_case", collective, algorithm, p, module="run")
        _line(f"{collective} {algorithm} p={p}", f"{c['messages']:,} msgs", c["wall"],
              f"+{c['run_rss'] / 2**20:.0f} MiB", c["rss"], 0)


def _topology(quick: bool) -> None:
    print("-- 7. topology building")
    c = in_subprocess("build_case", 32768, module="workloads")
    _line("sc.topology.switch(32768)", f"{c['links']:,} links", c["wall"], "", c["rss"])


def _sweep(quick: bool) -> None:
    print("-- 8. sweep of 200 small simulations (simcoll.sweep)")
    for workers in (1, 2):
        c = in_subprocess("sweep_case", workers, module="run")
        _line(f"sweep workers={workers}", f"{c['points']} sims", c["wall"],
              f"{c['points'] / c['wall']:.0f} sims/s")


SECTIONS = {"1": _rings, "2": _all_to_allv, "3": _contention, "3b": _nccl, "4": _mixed,
            "5": _data, "6": _memory, "7": _topology, "8": _sweep}
"""The sections of the table, in its order (``--only=`` picks some)."""


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true",
                        help="without N = 4096, switch(128), p = 2000 and 8 GiB NCCL")
    parser.add_argument("--only", type=lambda text: text.split(","), default=list(SECTIONS),
                        metavar="S,...", help=f"some sections only ({', '.join(SECTIONS)})")
    args = parser.parse_args(argv)
    quick, only = args.quick, args.only
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        parser.error(f"--only: no section {', '.join(unknown)}; sections are "
                     f"{', '.join(SECTIONS)}")
    print(f"simcoll benchmarks on {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, {_cpus()} CPUs")
    print(f"{'case':<46}{'work':>16}{'wall s':>9}{'rate':>16}{'ev/msg':>7}{'peak MiB':>9}"
          f"{'floor s':>9}{'ratio':>7}")
    python_api, cpp = simgrid("version", 0) is not None, simgrid_binary() is not None
    if not (python_api or cpp):
        print("(no SimGrid here, neither its Python bindings nor its C++ headers: the "
              "SimGrid rows are left out)")
    elif not python_api:
        print("(no SimGrid Python bindings here: the rows of SimGrid's Python API are left "
              "out)")
    elif not cpp:
        print("(no g++ or SimGrid C++ headers here: the rows of SimGrid's C++ engine are "
              "left out)")
    if JIT:
        c = in_subprocess("compile_case", module="run")
        print(f"(numba {c['numba']} compiled the max-min solvers in {c['wall']:.1f} s, or "
              f"loaded them from its cache)")
    for key in SECTIONS:
        if key in only:
            SECTIONS[key](quick)


def _simgrid_version() -> str:
    g = simgrid("version", 0)
    return g["version"] if g else "?"


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1:]))
