"""The per-message fast paths of ``Comm`` against the runtime's own methods.

``Comm.sendrecv`` matches messages itself and ``Comm.reduce`` hands a free reduction
straight to ``Runtime.done`` when the runtime is the plain one; with ``Comm.fast`` off, or
under the tracing runtime, everything goes through the runtime's methods. Every field of a
result must be the same either way, on random hand-built machines, in both modes.
"""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll import lone_flows
from simcoll.comm import Comm
from simcoll.programs import run_program
from tests.machines import KINDS, random_machine

CASES = [("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring"),
         ("all_reduce", "recursive_doubling"), ("all_reduce", "rabenseifner"),
         ("reduce_scatter", "recursive_halving"), ("all_to_all", "bruck"),
         ("all_gather", "bruck"), ("barrier", "dissemination"), ("reduce", "ring")]


def _run(monkeypatch, fast: bool, *args, **kwargs) -> sc.Result:
    """``simulate`` through the rank programs, with the fast paths on or off."""
    with monkeypatch.context() as m:
        m.setattr(lone_flows, "enabled", False)
        m.setattr(Comm, "fast", fast)
        return sc.simulate(*args, **kwargs)


def _same(a: sc.Result, b: sc.Result, traced: bool = False) -> None:
    """Every field of two results equal, exactly (the trace apart, if ``traced``)."""
    assert a.to_dict() == b.to_dict()
    assert np.array_equal(a.rank_times, b.rank_times)
    assert a.time == b.time and a.correct == b.correct and a.max_error == b.max_error
    if not traced:
        assert a.trace == b.trace
    assert (a.outputs is None) == (b.outputs is None)
    for x, y in zip(a.outputs or (), b.outputs or (), strict=True):
        assert (x is None) == (y is None)
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def _kwargs(rng: np.random.Generator, topo: sc.Topology, collective: str, algorithm: str,
            data: bool, network: str) -> dict:
    p = topo.nranks
    count = int(rng.integers(1, 20)) * 8 * p
    kwargs: dict = dict(algorithm=algorithm, network=network)
    if collective == "barrier":
        return kwargs
    if data:
        kwargs["data"] = [rng.standard_normal(count).astype(np.float32) for _ in range(p)]
    else:
        kwargs["nbytes"] = 4 * count
    if algorithm == "ring" and collective != "reduce":
        kwargs["chunks"] = int(rng.integers(1, 3))
    return kwargs


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(6))
def test_fast_paths_give_the_runtime_methods_result(monkeypatch, kind, seed):
    """Random machines (free and timed reductions, hosts or not), data-free and data mode,
    both network models: the same result with the fast paths on and off."""
    rng = np.random.default_rng(seed)
    topo = random_machine(kind, 300 + seed, hosts=seed % 2)
    for i, (collective, algorithm) in enumerate(CASES):
        if algorithm in ("recursive_doubling", "rabenseifner", "recursive_halving") \
                and topo.nranks & (topo.nranks - 1):
            continue
        kwargs = _kwargs(rng, topo, collective, algorithm, data=(seed + i) % 2 == 0,
                         network=("flow", "analytical")[(seed + i) % 3 == 0])
        fast = _run(monkeypatch, True, topo, collective, **kwargs)
        _same(fast, _run(monkeypatch, False, topo, collective, **kwargs))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_traced_runs_give_the_untraced_result(monkeypatch, kind, seed):
    """The tracing runtime never takes the fast paths: its runs agree with untraced ones
    on every field but the trace."""
    rng = np.random.default_rng(100 + seed)
    topo = random_machine(kind, 400 + seed, hosts=seed % 2)
    for collective, algorithm in CASES[:3]:
        kwargs = _kwargs(rng, topo, collective, algorithm, data=seed % 2 == 0, network="flow")
        untraced = _run(monkeypatch, True, topo, collective, **kwargs)
        traced = _run(monkeypatch, True, topo, collective, trace=True, **kwargs)
        assert traced.trace and untraced.trace is None
        _same(traced, untraced, traced=True)


@pytest.mark.parametrize("fast", [True, False])
def test_a_program_spinning_on_free_reductions_stops_at_the_event_limit(monkeypatch, fast):
    monkeypatch.setattr(Comm, "fast", fast)

    def spinning(comm: Comm, x):
        while True:
            x = yield comm.reduce(x, x, sc.ReduceOp.SUM)

    topo = sc.topology.switch(2)
    assert all(topo.device(topo.endpoint_name(r)).reduce_bandwidth == np.inf
               for r in range(2))
    with pytest.raises(sc.RunLimitError, match=r"event limit max_events=5000"):
        run_program(topo, spinning, sc.VirtualBuffer.of(16, np.float32), max_events=5000)


def test_sendrecv_matches_messages_posted_through_the_runtime_methods(monkeypatch):
    """A receive posted by ``recv`` meets a message sent by ``sendrecv``'s fast path, and a
    message sent by ``send`` meets its receive, in order, on the same channels."""
    def program(comm: Comm, x):
        if comm.rank == 0:
            first = comm.send(x * 1, dst=1)
            got = yield comm.sendrecv(x * 2, dst=1, src=1)
            yield first
            return got
        early = comm.recv(src=0)
        got = yield comm.sendrecv(x * 3, dst=0, src=0)
        return (yield early), got

    x = np.arange(4, dtype=np.float32)
    outputs = run_program(sc.topology.switch(2), program, x).outputs
    assert np.array_equal(outputs[0], x * 3)
    first, second = outputs[1]
    assert np.array_equal(first, x) and np.array_equal(second, x * 2)
