"""Benchmark workloads beyond one collective: an uneven all-to-all (MoE-like), a mixed
training step on DGX H100 nodes, topology building, and the same cases in SimGrid.

Each ``*_case`` function runs in its own subprocess (``ring_throughput.in_subprocess``)
and returns a dict of what it measured.
"""

from __future__ import annotations

import functools
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from ring_throughput import count_events

__all__ = ["alltoallv", "alltoallv_case", "mixed_case", "build_case", "simgrid", "simgrid_cpp"]

SIMGRID_PYTHON = "/usr/bin/python3"
"""An interpreter with SimGrid's Python bindings (Debian's python3-simgrid)."""


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def uneven_count(i: int, j: int) -> int:
    """float32 elements rank i sends rank j: (1 + ((7i + 13j) mod 97) / 97) x 65536."""
    return int((1 + ((7 * i + 13 * j) % 97) / 97) * 65536)


def alltoallv(comm, scale: float = 1.0):
    """Rank program: send every other rank its uneven share at once, then receive all."""
    import simcoll as sc

    p, r = comm.size, comm.rank
    waits = [comm.send(sc.VirtualBuffer.of(int(uneven_count(r, j) * scale), np.float32), j)
             for j in range(p) if j != r]
    waits += [comm.recv(j) for j in range(p) if j != r]
    # Not ``yield from``: SimPy sends each event's value back, which a list cannot take.
    for event in waits:  # noqa: UP028
        yield event


def alltoallv_case(n: int, network: str = "flow", again: bool = False) -> dict:
    """The uneven all-to-all on ``switch(n)``: wall time, events per message, memory.

    With ``again``, the same case runs a second time in this process, and ``warm`` is
    that run's wall time: what the case costs once numba and its cached machine code are
    loaded and simcoll's own first-call costs are paid (a sweep's second point)."""
    import simcoll as sc

    topo = sc.topology.switch(n)
    events = count_events()
    start = time.perf_counter()
    res = sc.run_program(topo, alltoallv, network=network)
    wall = time.perf_counter() - start
    case = {"n": n, "wall": wall, "messages": res.messages, "events": events[0],
            "time": res.time, "rss": _rss()}
    if again:
        start = time.perf_counter()
        warm = sc.run_program(sc.topology.switch(n), alltoallv, network=network)
        case["warm"] = time.perf_counter() - start
        if warm.time != res.time:
            raise RuntimeError(f"the second run ended at {warm.time!r}, not {res.time!r}")
    return case


def training_step(comm, gradient: int, activation: int):
    """Rank program of a training-step-like mix on DGX nodes of 8 GPUs: after a forward
    pass, a tensor-parallel all_reduce of ``activation`` float32 inside the node, an uneven
    MoE all-to-all over every GPU and a data-parallel ring all_reduce of ``gradient``
    float32 across nodes (GPUs with the same local index), all started at once."""
    import simcoll as sc

    r, p = comm.rank, comm.size
    node, local = divmod(r, 8)
    tensor = comm.group([node * 8 + i for i in range(8)])
    data = comm.group([k * 8 + local for k in range(p // 8)])
    yield comm.compute(1e-4)
    moe = comm.start(alltoallv(comm, scale=0.25))
    tp = tensor.all_reduce(sc.VirtualBuffer.of(activation, np.float32))
    dp = data.all_reduce(sc.VirtualBuffer.of(gradient, np.float32), algorithm="ring")
    yield tp
    yield moe
    yield dp


def mixed_case(nodes: int) -> dict:
    """``training_step`` on ``dgx_h100(nodes)``: wall time and events per message."""
    import simcoll as sc

    topo = sc.topology.dgx_h100(nodes)
    events = count_events()
    start = time.perf_counter()
    res = sc.run_program(topo, training_step, 64 * 2**20, 8 * 2**20)
    wall = time.perf_counter() - start
    return {"nodes": nodes, "wall": wall, "messages": res.messages, "events": events[0],
            "time": res.time, "rss": _rss()}


def build_case(n: int) -> dict:
    """Seconds to build ``switch(n)``."""
    import simcoll as sc

    start = time.perf_counter()
    topo = sc.topology.switch(n)
    return {"n": n, "wall": time.perf_counter() - start, "links": len(topo.links),
            "rss": _rss()}


def simgrid(kind: str, n: int) -> dict | None:
    """The same case through SimGrid's Python API (``simgrid_cases.py``), or None if no
    interpreter here has SimGrid's bindings (asked once, by its ``version`` case)."""
    if shutil.which(SIMGRID_PYTHON) is None or (kind != "version" and not _bindings()):
        return None
    script = Path(__file__).resolve().parent / "simgrid_cases.py"
    done = subprocess.run([SIMGRID_PYTHON, str(script), kind, str(n)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        if kind != "version":   # "version" failing is the bindings missing: run.py says so
            _failed("SimGrid's Python API", kind, n, done.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


@functools.cache
def _bindings() -> bool:
    """Whether SIMGRID_PYTHON imports SimGrid's bindings."""
    return simgrid("version", 0) is not None


def _failed(engine: str, kind: str, n: int, stderr: str) -> None:
    """Say that a SimGrid case failed, and how, where its row is then left out."""
    last = (stderr.strip().splitlines() or ["no message"])[-1]
    print(f"({engine} failed on {kind} {n}: {last}; its figures are left out)",
          file=sys.stderr)


def simgrid_cpp(kind: str, n: int) -> dict | None:
    """The same case on SimGrid's C++ engine (``simgrid_cases.cpp``), or None if it cannot
    be built here (no g++, or no SimGrid headers: Debian's libsimgrid-dev)."""
    binary = simgrid_binary()
    if binary is None:
        return None
    done = subprocess.run([str(binary), kind, str(n)], capture_output=True, text=True)
    if done.returncode != 0:
        _failed("SimGrid's C++ engine", kind, n, done.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


@functools.cache
def simgrid_binary() -> Path | None:
    """``simgrid_cases.cpp`` compiled once per version of its source (kept in the temp
    directory), or None if it does not build here."""
    compiler = shutil.which("g++")
    if compiler is None:
        return None
    source = Path(__file__).resolve().parent / "simgrid_cases.cpp"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    binary = Path(tempfile.gettempdir()) / f"simcoll-simgrid-cases-{digest}"
    if not binary.exists():
        done = subprocess.run([compiler, "-O2", "-o", str(binary), str(source), "-lsimgrid"],
                              capture_output=True)
        if done.returncode != 0:
            return None
    return binary

