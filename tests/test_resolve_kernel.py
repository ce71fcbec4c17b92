"""The one-call re-solve (simcoll.network.resolve_kernel) leaves the general regime in the
state its numpy path does, bit for bit: random sequences of flows joining, leaving,
finishing and links changing capacity, applied to two regimes, one re-solving each way."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simcoll.network import compiled, resolve_kernel, weighted_kernels
from simcoll.network.general import GeneralFlows
from simcoll.network.regimes import Flow

FIELDS = ("rate", "remaining", "updated", "finish", "used")


def _plain(kind, work=0):
    """compiled.solver as it would be with the kernel uncompiled."""
    return resolve_kernel.resolve if kind == "resolve" else None


def _none(kind, work=0):
    return None


def _scenario(seed: int, regime: GeneralFlows, rng_links: int) -> list[str]:
    """Drive ``regime`` through a random sequence (the same for one seed); return a log
    of its state after each solve, as byte strings of its arrays."""
    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, min(4, rng_links) + 1))
    pool = [tuple(int(d) for d in rng.choice(rng_links, size=int(rng.integers(1, width + 1)),
                                              replace=False))
            for _ in range(int(rng.integers(1, 40)))]
    flows: list[Flow] = []
    now = 0.0
    states = []
    for _ in range(int(rng.integers(2, 12))):
        action = rng.integers(0, 5)
        if action <= 1 or not flows:
            for _ in range(int(rng.integers(1, 30))):
                links = pool[int(rng.integers(len(pool)))]
                flow = Flow(links, 0.0, 1.0, None, None, 0, 1)
                regime.add(flow, float(rng.integers(1, 10**6)))
                flows.append(flow)
        elif action == 2:
            for flow in rng.permutation(np.array(flows, dtype=object))[
                    :int(rng.integers(1, len(flows) + 1))]:
                regime.changed(regime.level(flow))
                regime.take(flow, now)
                flows.remove(flow)
        elif action == 3:
            now = float(regime.finish.min())
            if now < np.inf:
                for flow in regime.pop_due(now):
                    flows.remove(flow)
        else:
            link = int(rng.integers(rng_links))
            regime.set_capacity(link, float(rng.choice([0.5, 1.0, 3.0, 7.0])))
        regime.solve(now)
        states.append(b"".join(getattr(regime, f).tobytes() for f in FIELDS)
                      + np.float64(regime.pending_at).tobytes())
    return states


def _regime(links: int, vectorized_from: int, weighted: bool) -> GeneralFlows:
    rng = np.random.default_rng(links)
    capacity = [float(c) for c in rng.choice([1.0, 2.0, 3.0, 8.0], size=links)]
    # flow_rtt's penalties: route latencies, so weights 1 / (sum of a route's) differ.
    penalty = [float(p) for p in rng.choice([1e-6, 2.5e-6, 7e-7], size=links)] \
        if weighted else None
    return GeneralFlows(simpy.Environment(), capacity, lambda event: None,
                        vectorized_from=vectorized_from, penalty=penalty)


def _compare(monkeypatch, seed: int, links: int, vectorized_from: int, weighted: bool,
             kernel) -> None:
    monkeypatch.setattr(compiled, "solver", _none)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = _scenario(seed, _regime(links, vectorized_from, weighted), links)
        monkeypatch.setattr(compiled, "solver", kernel)
        got = _scenario(seed, _regime(links, vectorized_from, weighted), links)
    assert got == expected


def _plain_solvers(monkeypatch) -> None:
    """The kernel calling the uncompiled solvers, even once a test has compiled them."""
    for name in ("fill_rows", "fill_arrays_rows"):
        monkeypatch.setattr(resolve_kernel, name, getattr(compiled, name))
    for name in ("fill_weighted_rows", "fill_arrays_weighted_rows"):
        monkeypatch.setattr(resolve_kernel, name, getattr(weighted_kernels, name))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), links=st.sampled_from([3, 6, 12, 400]),
       vectorized_from=st.sampled_from([1, 8, 10**9]), weighted=st.booleans())
def test_the_uncompiled_kernel_is_the_numpy_path_bit_for_bit(seed, links, vectorized_from,
                                                             weighted):
    # 400 links: the chosen rows cross few of them, so the kernel renumbers them (as
    # _compact does); vectorized_from picks the Python-order or the numpy-order solver;
    # weighted, flow_rtt's weighted sharing.
    with pytest.MonkeyPatch.context() as monkeypatch:
        _plain_solvers(monkeypatch)
        _compare(monkeypatch, seed, links, vectorized_from, weighted, _plain)


def test_many_route_ids_group_through_unique_in_id_order(monkeypatch):
    # More route ids than 8 x the chosen flows: the numpy path groups with np.unique, in
    # route-id order even where every route occurs once. Ids 0..199 are given, then only
    # 20 flows stay, on routes given in decreasing id order.
    _plain_solvers(monkeypatch)

    def run() -> tuple[bytes, float]:
        regime = _regime(30, 10**9, False)
        distinct = list(itertools.permutations(range(30), 2))[:200]
        gone = []
        for links in distinct:
            flow = Flow(links, 0.0, 1.0, None, None, 0, 1)
            regime.add(flow, 1000.0)
            gone.append(flow)
        for flow in gone:
            regime.take(flow, 0.0)
        for i, links in enumerate(reversed(distinct[:20])):
            regime.add(Flow(links, 0.0, 1.0, None, None, 0, 1), 100.0 + i)
        regime.solve(0.0)
        assert len(regime._route_ids) > 8 * regime.count
        return b"".join(getattr(regime, f).tobytes() for f in FIELDS), regime.pending_at

    monkeypatch.setattr(compiled, "solver", _none)
    expected = run()
    monkeypatch.setattr(compiled, "solver", _plain)
    assert run() == expected


def test_a_hand_worked_resolve_with_a_floor():
    # Links 0 (4 B/s) and 1 (10 B/s). a on 0, b on 0 and 1, c on 1; a and b drain at
    # 2 B/s, c at a stale 9 B/s. With floor 5 only c is re-solved, on what a and b leave
    # of link 1: 10 - 2 = 8 B/s. All held 16, 16 and 40 bytes at 0; at now = 1 c has
    # 40 - 9 = 31 left, which at 8 B/s takes 3.875 s more.
    links = np.array([[0, 2], [0, 1], [1, 2]], dtype=np.intp)
    capacity = np.array([4.0, 10.0, np.inf])
    rate = np.array([2.0, 2.0, 9.0])
    remaining = np.array([16.0, 16.0, 40.0])
    updated = np.zeros(3)
    finish = np.array([8.0, 8.0, 40.0 / 9.0])
    used = np.ones(3, dtype=bool)
    route = np.arange(3)
    marks = np.full(3, -1, dtype=np.int64)
    earliest = resolve_kernel.resolve(links, used, rate, remaining, updated, finish, route,
                                      capacity, rate, False, 5.0, 1.0, 1e-9, 16, 10**9, 3,
                                      marks)
    assert rate.tolist() == [2.0, 2.0, 8.0]
    assert remaining.tolist() == [16.0, 16.0, 31.0]
    assert updated.tolist() == [0.0, 0.0, 1.0]
    assert finish.tolist() == [8.0, 8.0, 4.875]
    assert earliest == 4.875
    assert capacity.tolist() == [4.0, 10.0, np.inf]  # what the fixed rows use is not kept
    assert marks.tolist() == [-1, -1, -1]


numba_only = pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not installed")


@numba_only
@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), links=st.sampled_from([3, 6, 12, 400]),
       vectorized_from=st.sampled_from([1, 8, 10**9]), weighted=st.booleans())
def test_the_compiled_kernel_is_the_numpy_path_bit_for_bit(seed, links, vectorized_from,
                                                           weighted):
    kernel = compiled.solver("resolve", compiled.WARMUP)
    assert kernel is not None
    with pytest.MonkeyPatch.context() as monkeypatch:
        _compare(monkeypatch, seed, links, vectorized_from, weighted,
                 lambda kind, work=0: kernel if kind == "resolve" else None)
