"""Runs timed over arrays (``simcoll.lone_flows``) against the event-driven run.

Where no ring message can share a link, ``simulate`` times a ring run step by step over
arrays (and, in data mode, computes its outputs block by block). Every field of its result
must be what the rank programs give through SimPy and the network, on random hand-built
machines, and where sharing is possible it must not be used at all.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest

import simcoll as sc
from simcoll import lone_flows
from simcoll.algorithms import registry
from simcoll.algorithms.registry import get_algorithm
from simcoll.dtypes import as_dtype
from simcoll.errors import AlgorithmError, RunLimitError
from tests.machines import KINDS, random_machine

RING = ("all_reduce", "reduce_scatter", "all_gather")
simulate_module = sys.modules["simcoll.simulate"]   # the package's name is the function


@pytest.fixture
def timed(monkeypatch):
    """Record whether each ``simulate`` call was timed over arrays."""
    calls: list[bool] = []
    original = simulate_module.time_without_events

    def recording(*args, **kwargs):
        calls.append(original(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(simulate_module, "time_without_events", recording)
    return calls


def _event_driven(monkeypatch, *args, **kwargs) -> sc.Result:
    with monkeypatch.context() as m:
        m.setattr(lone_flows, "enabled", False)
        return sc.simulate(*args, **kwargs)


def _same(a: sc.Result, b: sc.Result) -> None:
    """Every field of two results equal, exactly."""
    assert a.to_dict() == b.to_dict()
    assert np.array_equal(a.rank_times, b.rank_times)
    assert a.time == b.time and a.algbw == b.algbw and a.busbw == b.busbw
    assert a.outputs is None and b.outputs is None and a.trace is None and b.trace is None


def _disjoint(topo: sc.Topology) -> bool:
    """Whether the routes rank -> rank + 1 cross every directed link at most once
    (worked out here from the topology's routes)."""
    p = topo.nranks
    links = [d for r in range(p) for d in topo.route(r, (r + 1) % p).links]
    return len(links) == len(set(links))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(12))
def test_random_machines_give_the_event_driven_result(monkeypatch, timed, kind, seed):
    rng = np.random.default_rng(seed)
    topo = random_machine(kind, seed, hosts=seed % 2)
    p = topo.nranks
    collective = RING[seed % 3]
    chunks = int(rng.integers(1, 4))
    count = int(rng.integers(p * chunks, 40 * p * chunks))
    dtype = ("float32", "float16", "float64")[seed % 3]
    nbytes = count * np.dtype(dtype).itemsize
    for network in ("flow", "analytical"):
        args = (topo, collective)
        kwargs = dict(algorithm="ring", nbytes=nbytes, dtype=dtype, network=network,
                      chunks=chunks)
        fast = sc.simulate(*args, **kwargs)
        assert timed[-1] == (network == "analytical" or _disjoint(topo))
        _same(fast, _event_driven(monkeypatch, *args, **kwargs))


def test_the_random_machines_include_many_with_disjoint_ring_routes():
    """The test above times its analytical runs over arrays and its flow runs where
    the ring's routes are disjoint: a good share of them (22 of 48), else it would check
    little there."""
    disjoint = sum(_disjoint(random_machine(kind, seed, hosts=seed % 2)) for kind in KINDS
                   for seed in range(12))
    assert disjoint >= 16


@pytest.mark.parametrize("seed", range(6))
def test_flow_rtt_on_cycles_with_latencies(monkeypatch, timed, seed):
    rng = np.random.default_rng(100 + seed)
    p = int(rng.integers(3, 9))
    topo = sc.Topology(f"cycle-{seed}")
    names = [topo.add_gpu(reduce_bandwidth=float(rng.choice([1e10, 1e11, np.inf])))
             for _ in range(p)]
    for a, b in zip(names, names[1:] + names[:1]):
        topo.add_link(a, b, bandwidth=float(rng.choice([1e9, 1e10, 5e10])),
                      latency=float(rng.choice([1e-7, 1e-6, 5e-6])))
    kwargs = dict(algorithm="ring", nbytes=4 * p * 1000 + 4 * seed, network="flow_rtt",
                  chunks=1 + seed % 3)
    fast = sc.simulate(topo, "all_reduce", **kwargs)
    assert timed[-1]
    _same(fast, _event_driven(monkeypatch, topo, "all_reduce", **kwargs))


def test_a_switch_by_hand(timed):
    """4 GPUs on a switch, 1 us and 100 GB/s per link, reductions at 1 TB/s, 4 MB float32:
    a block is 1 MB; a message crosses two links, c = 2 + 10 = 12 us; a reduction
    g = 1 us. With one piece every reduce-scatter step waits for its reduction:
    3 (c + g) + 3 c = 75 us; each rank sends 2 x 3 blocks."""
    topo = sc.Topology("star")
    topo.add_switch("s")
    for _ in range(4):
        topo.add_link(topo.add_gpu(reduce_bandwidth=1e12), "s", bandwidth=100e9,
                      latency=1e-6)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4_000_000)
    assert timed == [True]
    assert res.time == pytest.approx(75e-6, rel=1e-12)
    assert np.allclose(res.rank_times, 75e-6, rtol=1e-12)
    assert res.bytes_sent.tolist() == [6_000_000] * 4
    assert res.bytes_received.tolist() == [6_000_000] * 4
    assert res.messages == 24
    assert res.link_bytes[("gpu0", "s")] == 6_000_000
    assert res.link_bytes[("s", "gpu1")] == 6_000_000


def test_uneven_neighbours_by_hand(monkeypatch, timed):
    """A cycle of 3 GPUs whose links take 1, 1 and 3 us for the 8-byte message (latency;
    the bytes take 8 fs at 1 PB/s):
    an all_gather's rank r waits for its own message and its left neighbour's.
    Step 1: arrivals 1, 1, 3 -> ranks go on at 3, 1, 3. Step 2: arrivals 4, 2, 6 ->
    6, 4, 6."""
    topo = sc.Topology("uneven")
    g = [topo.add_gpu() for _ in range(3)]
    for (a, b), latency in zip([(g[0], g[1]), (g[1], g[2]), (g[2], g[0])],
                               [1e-6, 1e-6, 3e-6]):
        topo.add_link(a, b, bandwidth=1e15, latency=latency)
    res = sc.simulate(topo, "all_gather", algorithm="ring", nbytes=8)
    assert timed == [True]
    assert res.rank_times == pytest.approx([6e-6, 4e-6, 6e-6], rel=1e-8)
    assert res.time == pytest.approx(6e-6, rel=1e-8)
    _same(res, _event_driven(monkeypatch, topo, "all_gather", algorithm="ring", nbytes=8))


def test_shared_links_run_the_rank_programs(monkeypatch, timed):
    """Two switches joined by one link, the GPUs alternating between them: every ring
    message crosses the middle link, so the flow model shares it and the rank programs
    run; the analytical model ignores sharing and is timed over arrays."""
    topo = sc.Topology("dumbbell")
    topo.add_switch("a")
    topo.add_switch("b")
    topo.add_link("a", "b", bandwidth=50e9, latency=1e-6)
    for i in range(6):
        topo.add_link(topo.add_gpu(), "ab"[i % 2], bandwidth=100e9, latency=1e-6)
    assert not _disjoint(topo)
    flow = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=6 << 20)
    analytical = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=6 << 20,
                             network="analytical")
    assert timed == [False, True]
    assert flow.time > analytical.time
    _same(analytical, _event_driven(monkeypatch, topo, "all_reduce", algorithm="ring",
                                    nbytes=6 << 20, network="analytical"))


@pytest.mark.parametrize("case", ["empty pieces", "trace", "jitter", "one rank",
                                  "other algorithm"])
def test_what_is_left_to_the_rank_programs(timed, case):
    topo = sc.topology.switch(4 if case != "one rank" else 1)
    kwargs: dict = dict(algorithm="ring", nbytes=4 << 10)
    if case == "empty pieces":
        kwargs.update(nbytes=4 * 7, chunks=2)      # 7 elements: some of the 8 pieces empty
    elif case == "trace":
        kwargs["trace"] = True
    elif case == "jitter":
        kwargs["faults"] = sc.Faults(jitter=1e-6, seed=1)
    elif case == "other algorithm":
        kwargs["algorithm"] = "naive"
    res = sc.simulate(topo, "all_reduce", **kwargs)
    assert not any(timed)
    assert res.time >= 0


def test_limits_stop_as_the_event_driven_run_does(timed):
    topo = sc.topology.switch(8)
    with pytest.raises(RunLimitError, match="until="):
        sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 20, until=1e-6)
    with pytest.raises(RunLimitError, match="max_events="):
        sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 20, max_events=3)
    assert timed == [False, False]


@pytest.mark.parametrize("collective", ["all_gatherv", "reduce_scatterv"])
@pytest.mark.parametrize("p, splits, limit", [(2, [0, 1], 4), (8, [0] * 8, 15)])
def test_the_event_limit_counts_the_programs_start_and_end(collective, p, splits, limit):
    """The rank programs of these runs take one event more than ``limit`` (p starts and
    p ends, and one message for [0, 1]): they stop there, and so must the arrays' path,
    which counted 4 events a message alone and returned a Result."""
    kwargs = dict(algorithm="ring", nbytes=[4 * s for s in splits], max_events=limit)
    with pytest.raises(RunLimitError, match=f"max_events={limit} "):
        sc.simulate(sc.topology.ring(p), collective, **kwargs)
    lone_flows.enabled = False
    try:
        with pytest.raises(RunLimitError, match=f"max_events={limit} "):
            sc.simulate(sc.topology.ring(p), collective, **kwargs)
        assert sc.simulate(sc.topology.ring(p), collective,
                           **{**kwargs, "max_events": limit + 1}).time >= 0
    finally:
        lone_flows.enabled = True


@pytest.mark.parametrize("collective", RING)
@pytest.mark.parametrize("chunks", [1, 3])
def test_reductions_slower_than_links(monkeypatch, timed, collective, chunks):
    """Engines of 1 to 3 GB/s behind 100 GB/s links: pieces queue on the engines and ranks
    wait for them, unevenly (each GPU its own rate)."""
    topo = sc.Topology("slow-engines")
    topo.add_switch("s")
    for i in range(5):
        topo.add_link(topo.add_gpu(reduce_bandwidth=(1 + i % 3) * 1e9), "s",
                      bandwidth=100e9, latency=(1 + i) * 1e-7)
    kwargs = dict(algorithm="ring", nbytes=4 * 5 * chunks * 997, chunks=chunks)
    fast = sc.simulate(topo, collective, **kwargs)
    assert timed == [True]
    _same(fast, _event_driven(monkeypatch, topo, collective, **kwargs))
    if collective != "all_gather":
        # Every rank reduces 4 blocks of 997 x chunks float32, at 3 GB/s at best.
        assert fast.time > 4 * (4 * 997 * chunks) / 3e9


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(6))
def test_uneven_rings_on_random_machines(monkeypatch, timed, kind, seed):
    """all_gatherv and reduce_scatterv rings, blocks of random sizes with empty ones (an
    empty block is no message: a rank then only sends, only receives, or goes on)."""
    rng = np.random.default_rng(1000 + seed)
    topo = random_machine(kind, 50 + seed, hosts=seed % 2)
    p = topo.nranks
    counts = rng.integers(0, 3000, size=p) * (rng.random(p) < 0.7)
    for collective in ("all_gatherv", "reduce_scatterv"):
        for network in ("flow", "analytical"):
            kwargs = dict(algorithm="ring", nbytes=[4 * int(c) for c in counts],
                          network=network)
            fast = sc.simulate(topo, collective, **kwargs)
            assert timed[-1] == (network == "analytical" or _disjoint(topo))
            _same(fast, _event_driven(monkeypatch, topo, collective, **kwargs))
            assert fast.splits == tuple(int(c) for c in counts)


def test_uneven_ring_by_hand(timed):
    """3 GPUs on a switch, links of 1 us and 1 GB/s: an all_gatherv of blocks 1000, 0 and
    2000 bytes. Step 0: rank 0 sends 1000 B (arrives at 2 + 1 us), rank 1 nothing, rank 2
    2000 B (2 + 2 us): ranks go on at 4 (block 2 from rank 2), 3 (block 0) and 4 us (its
    own message; block 1 is empty). Step 1: rank 0 forwards block 2 (sent at 4, arrives
    4 + 4 = 8 us), rank 1 block 0 (sent at 3, arrives 6 us), rank 2 nothing: rank 0 ends
    at 8, rank 1 at 8 (block 2 from rank 0), rank 2 at 6. Rank 0 sends 3000 B, rank 1
    1000 B, rank 2 2000 B."""
    topo = sc.Topology("three")
    topo.add_switch("s")
    for _ in range(3):
        topo.add_link(topo.add_gpu(), "s", bandwidth=1e9, latency=1e-6)
    res = sc.simulate(topo, "all_gatherv", algorithm="ring", nbytes=[1000, 0, 2000],
                      dtype="uint8")
    assert timed == [True]
    assert res.rank_times == pytest.approx([8e-6, 8e-6, 6e-6], rel=1e-12)
    assert res.time == pytest.approx(8e-6, rel=1e-12)
    assert res.bytes_sent.tolist() == [3000, 1000, 2000]
    assert res.bytes_received.tolist() == [2000, 3000, 1000]
    assert res.messages == 4


@pytest.mark.parametrize("machine, lone", [
    (lambda: sc.topology.dgx_h100(2), True), (lambda: sc.topology.dgx_a100(2), True),
    (lambda: sc.topology.cluster(2, 4), True), (lambda: sc.topology.torus((4, 4)), True),
    (lambda: sc.topology.pcie_node(8, gen=4, p2p=False), False)])
def test_the_machines_the_readme_names(monkeypatch, timed, machine, lone):
    """The README lists these as timed over arrays or not (their ring routes share no
    link, or do); either way the result is the event-driven run's."""
    topo = machine()
    assert _disjoint(topo) == lone
    fast = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 20)
    assert timed == [lone]
    _same(fast, _event_driven(monkeypatch, topo, "all_reduce", algorithm="ring",
                              nbytes=1 << 20))


# -- data mode: outputs computed block by block ---------------------------------------------
DTYPES = ("float32", "float64", "float16", "int32", "int8", "bfloat16")
OPS = ("sum", "avg", "product", "min", "max")


def _inputs(rng: np.random.Generator, counts: list[int], dtype: str) -> list[np.ndarray]:
    """Random arrays of ``counts`` elements: small integers (whose products wrap in the
    narrow integer types) or normal floats."""
    if dtype.startswith("int"):
        return [rng.integers(-9, 10, size=c).astype(dtype) for c in counts]
    return [rng.standard_normal(c).astype(as_dtype(dtype)) for c in counts]


def _same_data(a: sc.Result, b: sc.Result) -> None:
    """Every field equal, and every rank's output the same bytes, each rank's its own
    writeable array."""
    assert a.to_dict() == b.to_dict()
    assert np.array_equal(a.rank_times, b.rank_times)
    assert a.correct is True and b.correct is True and a.max_error == b.max_error
    assert a.outputs is not None and b.outputs is not None
    for x, y in zip(a.outputs, b.outputs, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        assert x.flags.writeable and x.base is None
    assert len({id(x) for x in a.outputs}) == len(a.outputs)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(8))
def test_data_mode_gives_the_rank_programs_outputs(monkeypatch, timed, kind, seed):
    """Ring runs with real arrays on random machines: where the ring routes are disjoint
    the run is timed over arrays and its outputs computed block by block; every field
    and every output byte is what the rank programs give."""
    rng = np.random.default_rng(2000 + seed)
    topo = random_machine(kind, 200 + seed, hosts=seed % 2)
    p = topo.nranks
    collective = (*RING, "all_gatherv", "reduce_scatterv")[seed % 5]
    dtype = DTYPES[(seed + KINDS.index(kind)) % len(DTYPES)]
    op = OPS[seed % len(OPS)]
    kwargs: dict = dict(algorithm="ring", network=("flow", "analytical")[seed % 2])
    if collective in RING:
        chunks = int(rng.integers(1, 4))
        kwargs.update(chunks=chunks, data=_inputs(rng, [int(rng.integers(
            p * chunks, 30 * p * chunks))] * p, dtype))
    elif collective == "all_gatherv":
        kwargs["data"] = _inputs(rng, [int(c) for c in rng.integers(1, 300, size=p)], dtype)
    else:
        splits = [int(c) for c in rng.integers(0, 300, size=p) * (rng.random(p) < 0.7)]
        splits[0] += 1
        kwargs.update(splits=splits, data=_inputs(rng, [sum(splits)] * p, dtype))
    if collective in ("all_reduce", "reduce_scatter", "reduce_scatterv"):
        kwargs["op"] = op
    fast = sc.simulate(topo, collective, **kwargs)
    assert timed[-1] == (kwargs["network"] == "analytical" or _disjoint(topo))
    _same_data(fast, _event_driven(monkeypatch, topo, collective, **kwargs))


@pytest.mark.parametrize("op", ["sum", "avg"])
def test_data_mode_all_reduce_by_hand(timed, op):
    """3 GPUs on a switch, integers 0..5 per rank: rank r holds r * 10 + i. A ring all_reduce
    sums each element over the ranks: 3 i + 30 (AVG: i + 10, exact in int32); every rank
    gets its own copy."""
    topo = sc.topology.switch(3)
    data = [np.arange(6, dtype=np.int32) + 10 * r for r in range(3)]
    res = sc.simulate(topo, "all_reduce", algorithm="ring", data=data, op=op)
    assert timed == [True]
    expected = 3 * np.arange(6) + 30 if op == "sum" else np.arange(6) + 10
    assert res.correct is True and res.max_error == 0.0
    assert res.outputs is not None
    for out in res.outputs:
        assert out.dtype == np.int32 and out.tolist() == expected.tolist()
    res.outputs[0][0] = -1
    assert res.outputs[1][0] == expected[0] and data[0][0] == 0


def test_data_mode_float_order_is_the_rings(timed):
    """float32 values whose sum depends on the order: block c of a 3-rank ring
    all_reduce is reduced as x_{c+2} + (x_{c+1} + x_c). With 1e8, -1e8 and 1 at element 0
    of ranks 0, 1, 2 (block 0, starting at rank 0): 1 + (-1e8 + 1e8) = 1; an order that
    adds 1 to 1e8 first would lose it (1e8 + 1 rounds to 1e8 in float32). Element 1 (block
    1, from rank 1): x_0 + (x_2 + x_1) = 1e8 + (1 + -1e8) = 0 in float32, since
    1 - 1e8 rounds to -1e8."""
    topo = sc.topology.switch(3)
    column = np.array([1e8, -1e8, 1.0], dtype=np.float32)
    data = [np.array([column[r], column[r], 0.0], dtype=np.float32) for r in range(3)]
    res = sc.simulate(topo, "all_reduce", algorithm="ring", data=data)
    assert timed == [True]
    assert res.outputs is not None
    assert [out.tolist() for out in res.outputs] == [[1.0, 0.0, 0.0]] * 3
    assert res.correct is True and res.max_error == 1.0


def test_data_mode_without_outputs_runs_the_rank_programs(monkeypatch, timed):
    """``outputs=`` needs ``timeline=``; an algorithm with a timeline but no outputs is
    timed over arrays without data only (here the ring, registered again without
    them)."""
    ring = get_algorithm("all_reduce", "ring")
    with pytest.raises(TypeError, match="outputs= computes a run that timeline= times"):
        sc.register("all_reduce", "outputs-only", cost=ring.cost, params=ring.params,
                    outputs=ring.outputs)
    monkeypatch.setitem(registry._REGISTRY, ("all_reduce", "timeline-only"),
                        replace(ring, name="timeline-only", outputs=None))
    topo = sc.topology.switch(4)
    data = [np.full(8, r, np.float32) for r in range(4)]
    res = sc.simulate(topo, "all_reduce", algorithm="timeline-only", data=data)
    assert timed == [] and res.correct is True
    assert res.outputs is not None and res.outputs[3].tolist() == [6.0] * 8
    sc.simulate(topo, "all_reduce", algorithm="timeline-only", nbytes=32)
    assert timed == [True]


@pytest.mark.parametrize("collective", ["all_gatherv", "reduce_scatterv"])
def test_a_run_that_just_fits_max_events_is_still_timed_over_arrays(timed, collective):
    """Eight ranks with nothing to send take 2p = 16 events (each program's start and
    end) and no message: max_events=16 is enough, exactly, and the arrays' path times the
    run, as it does with more to spare; at 15 it leaves the run to the events."""
    kwargs = dict(algorithm="ring", nbytes=[0] * 8)
    for limit in (16, 17):
        assert sc.simulate(sc.topology.ring(8), collective, max_events=limit,
                           **kwargs).time >= 0
    assert timed == [True, True]
    with pytest.raises(RunLimitError, match="max_events=15 "):
        sc.simulate(sc.topology.ring(8), collective, max_events=15, **kwargs)
    assert timed == [True, True, False]


def test_an_algorithm_with_a_host_program_runs_it_in_the_event_loop():
    """A ring registered with a timeline and a host program (busy for 1 ms): the array
    path timed the GPUs' ring alone, 4 us, and never started the host's program."""
    from simcoll.algorithms import ring_timelines

    ring = get_algorithm("all_gather", "ring")

    def host(comm, *, chunks):
        yield comm.compute(1e-3)

    @sc.register("all_gather", "ring_with_busy_host", cost=ring.cost, params=ring.params,
                 timeline=ring_timelines.all_gather, host=host)
    def program(comm, x, *, chunks):
        return (yield from ring.fn(comm, x, chunks=chunks))

    topo = sc.Topology("hosted")
    topo.add_switch("s")
    for _ in range(3):
        topo.add_link(topo.add_gpu(), "s", bandwidth=1e10, latency=1e-6)
    topo.add_link(topo.add_host(), "s", bandwidth=1e10, latency=1e-6)
    res = sc.simulate(topo, "all_gather", algorithm="ring_with_busy_host", nbytes=64)
    assert res.time == pytest.approx(1e-3, rel=1e-12)


def test_a_bad_outputs_function_is_refused_on_the_array_path_too():
    """outputs= (what the array path gives as the ranks' outputs) returning float64
    arrays of shape (1, 6) for float32 inputs: the event path refuses such a return of
    a rank program, the array path handed it on as the outputs (and the check found
    them wrong, max_error inf). The rank programs, which the event path runs, return
    the right arrays."""
    from simcoll.algorithms import ring_timelines

    ring = get_algorithm("all_reduce", "ring")

    def outputs(inputs, *, op, chunks):
        total = np.sum(inputs, axis=0, dtype=np.float64)
        return [total.reshape(1, -1)] * len(inputs)

    @sc.register("all_reduce", "ring_bad_outputs", cost=ring.cost, params=ring.params,
                 timeline=ring_timelines.all_reduce, outputs=outputs)
    def program(comm, x, *, op, chunks):
        return (yield from ring.fn(comm, x, op=op, chunks=chunks))

    data = [np.arange(6, dtype=np.float32) + r for r in range(3)]
    with pytest.raises(sc.AlgorithmError, match=r"^rank 0 in all_reduce/ring_bad_outputs "
                                                r"returned a float64 array of shape \(1, 6\)"):
        sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="ring_bad_outputs",
                    data=data)
    lone_flows.enabled = False
    try:
        res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="ring_bad_outputs",
                          data=data)
    finally:
        lone_flows.enabled = True
    assert res.correct and res.outputs[0].shape == (6,)




def _mut2_star(reduce_bandwidth=None):
    """Three GPUs on one switch (10 GB/s, 1 us links); the switch computes in the
    network where ``reduce_bandwidth`` is given."""
    topo = sc.Topology("mut2-star")
    topo.add_switch("s", reduce_bandwidth=reduce_bandwidth)
    for _ in range(3):
        topo.add_link(topo.add_gpu(), "s", bandwidth=1e10, latency=1e-6)
    return topo


def test_mut2_an_algorithm_with_an_in_network_program_runs_it_in_the_event_loop():
    """A ring registered with a timeline and an in-network program that keeps the
    switch busy 1 ms: the run ends when the switch's program does, at 1 ms (the GPUs'
    ring of 64 B takes a few us). Timed by the GPUs' timeline alone it gave ~4 us and
    never started the switch's program."""
    ring = get_algorithm("all_gather", "ring")

    def device(comm, like, *, chunks):
        yield comm.compute(1e-3)

    @sc.register("all_gather", "ring_with_busy_switch_mut2", cost=ring.cost,
                 params=ring.params, timeline=sc.algorithms.ring_timelines.all_gather,
                 in_network=device, replace=True)
    def program(comm, x, *, chunks):
        return (yield from ring.fn(comm, x, chunks=chunks))

    res = sc.simulate(_mut2_star(reduce_bandwidth=1e12), "all_gather",
                      algorithm="ring_with_busy_switch_mut2", nbytes=64)
    assert res.time == pytest.approx(1e-3, rel=1e-12)


def test_mut2_a_data_free_run_refuses_a_program_that_returns_the_wrong_count():
    """A data-free all_gather on 4 ranks of 16 float32 each leaves 64 elements on every
    rank; a program that returns its 16-element input is refused as in data mode (the
    check ran after the data-free return, so the run passed with time 1 us)."""
    ring = get_algorithm("all_gather", "ring")

    @sc.register("all_gather", "returns_its_input_mut2", cost=ring.cost,
                 params=ring.params, replace=True)
    def program(comm, x, *, chunks):
        yield comm.compute(1e-6)
        return x

    for kwargs in (dict(nbytes=64), dict(data=[np.ones(16, np.float32)] * 4)):
        with pytest.raises(AlgorithmError, match=r"rank 0 in all_gather/returns_its_input_mut2"
                                                 r" returned .*its output is 64 float32 "
                                                 r"elements"):
            sc.simulate(sc.topology.ring(4), "all_gather", algorithm="returns_its_input_mut2",
                        **kwargs)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_hierarchical_on_one_node_gives_the_rank_programs_result(monkeypatch, timed, kind,
                                                                 seed):
    """A hierarchical all_reduce on one node is a ring reduce-scatter, a cross-node
    all-reduce of one rank (no message) and a ring all-gather: timed over arrays where the
    ring's routes are disjoint, with every field and output byte of the rank programs',
    whatever the cross-node algorithm."""
    rng = np.random.default_rng(3000 + seed)
    topo = random_machine(kind, 300 + seed, hosts=seed % 2)
    p = topo.nranks
    network = ("flow", "analytical")[seed % 2]
    choices = registry.get_algorithm("all_reduce", "hierarchical").params["inter"].choices
    inter = choices[(seed + KINDS.index(kind)) % len(choices)]
    count = int(rng.integers(p, 30 * p))
    kwargs: dict = dict(algorithm="hierarchical", network=network, inter=inter)
    fast = sc.simulate(topo, "all_reduce", nbytes=4 * count, **kwargs)
    assert timed[-1] == (network == "analytical" or _disjoint(topo))
    _same(fast, _event_driven(monkeypatch, topo, "all_reduce", nbytes=4 * count, **kwargs))
    dtype = DTYPES[(seed + KINDS.index(kind)) % len(DTYPES)]
    kwargs.update(op=OPS[seed % len(OPS)], data=_inputs(rng, [count] * p, dtype))
    fast = sc.simulate(topo, "all_reduce", **kwargs)
    assert timed[-1] == (network == "analytical" or _disjoint(topo))
    _same_data(fast, _event_driven(monkeypatch, topo, "all_reduce", **kwargs))


def test_hierarchical_across_nodes_runs_the_rank_programs(timed):
    """Across nodes the G cross-node all-reduces share the nodes' uplinks: never timed
    over arrays, even on the analytical model, which times every flow alone. Two nodes of
    two GPUs, 1 us and 1 GB/s everywhere, 8 float32 per rank (the ring across nodes of
    2 ranks each): the reduce-scatter inside a node moves a 16-byte block in 2 + 0.016 us
    (GPU, switch, GPU); across nodes the ring sends an 8-byte half-block twice over four
    links (GPU, node switch, network, node switch, GPU): 2 (4 + 0.008) us; then the
    all-gather's 2.016 us: 12.048 us in all."""
    topo = sc.topology.cluster(nodes=2, gpus_per_node=2, intra_bandwidth=1e9,
                               intra_latency=1e-6, inter_bandwidth=1e9, inter_latency=1e-6)
    data = [np.arange(8, dtype=np.float32) * (r + 1) for r in range(4)]
    res = sc.simulate(topo, "all_reduce", algorithm="hierarchical", data=data,
                      network="analytical")
    assert not any(timed)
    assert res.correct is True
    assert res.time == pytest.approx(12.048e-6, rel=1e-12)
