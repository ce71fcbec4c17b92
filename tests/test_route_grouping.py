"""Flows grouped by route in the general regime's re-solves: each solver given one row per
route and its multiplicity against the same solver given every flow (random instances
with many duplicate routes, ties included, weighted and unweighted), and whole runs with
grouping on and off (an NCCL all_reduce on two DGX H100 nodes, flow and flow_rtt; flows
rerouted around a failed link, against a hand-worked time)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import _fair_rates

import simcoll as sc
from simcoll.network import FlowNetwork, compiled, general
from simcoll.network.maxmin import fill, fill_arrays
from simcoll.network.rerouting import change_link
from simcoll.network.weighted import fill_arrays_weighted, fill_weighted

SMALL = [1.0, 2.0, 3.0, 2.5e9, 1e10, 7e10]
"""Small integers make exact ties; the others, rates like real links'."""


@st.composite
def duplicated(draw, capacities=SMALL):
    """(routes of every flow, capacity, weight of each distinct route): a few distinct
    routes, each flow one of them, so most routes occur many times."""
    links = draw(st.integers(1, 10))
    capacity = draw(st.lists(st.sampled_from(capacities), min_size=links, max_size=links))
    distinct = draw(st.lists(st.lists(st.integers(0, links - 1), min_size=1, max_size=5,
                                      unique=True).map(tuple), min_size=1, max_size=8,
                             unique=True))
    which = draw(st.lists(st.integers(0, len(distinct) - 1), min_size=1, max_size=120))
    weights = draw(st.lists(st.sampled_from([0.5, 1.0, 1 / 3, 2.0, 7.25]),
                            min_size=len(distinct), max_size=len(distinct)))
    return [distinct[i] for i in which], capacity, weights, which


def grouped(which: list[int]) -> tuple[list[int], list[int], np.ndarray]:
    """(one flow index per route present, its multiplicity, each flow's route position),
    counted by hand, not with the numpy calls the solver uses."""
    first: dict[int, int] = {}
    many: dict[int, int] = {}
    for i, route in enumerate(which):
        first.setdefault(route, i)
        many[route] = many.get(route, 0) + 1
    present = list(first)
    position = {route: k for k, route in enumerate(present)}
    return ([first[r] for r in present], [many[r] for r in present],
            np.array([position[r] for r in which]))


def padded(routes: list[tuple[int, ...]], pad: int) -> np.ndarray:
    width = max(len(r) for r in routes)
    links = np.full((len(routes), width), pad, dtype=np.intp)
    for i, route in enumerate(routes):
        links[i, :len(route)] = route
    return links


@settings(max_examples=400, deadline=None)
@given(duplicated())
def test_grouped_max_min_rates_are_the_ungrouped_ones(problem):
    routes, capacity, _, which = problem
    first, many, position = grouped(which)
    reps = [routes[i] for i in first]
    limits = dict(enumerate(capacity))
    cap = np.array([*capacity, np.inf])
    python = np.array(fill(routes, limits))
    np.testing.assert_allclose(np.array(fill(reps, limits, many))[position], python,
                               rtol=1e-12, atol=0)
    # The numpy solver does the very arithmetic of the ungrouped solve: equal bit for bit.
    vectorized = fill_arrays(padded(routes, len(capacity)), cap)
    grouped_rates = fill_arrays(padded(reps, len(capacity)), cap, np.array(many))
    np.testing.assert_array_equal(grouped_rates[position], vectorized)


@settings(max_examples=150, deadline=None)
@given(duplicated([1e9, 2.5e9, 1e10, 4e10, 1e11]))
def test_grouped_rates_match_the_independent_reference(problem):
    routes, capacity, _, which = problem
    first, many, position = grouped(which)
    reps = [routes[i] for i in first]
    expected = _fair_rates(dict(enumerate(routes)), capacity)
    expected = [expected[i] for i in range(len(routes))]
    np.testing.assert_allclose(np.array(fill(reps, dict(enumerate(capacity)), many))[position],
                               expected, rtol=1e-9)
    rates = fill_arrays(padded(reps, len(capacity)), np.array([*capacity, np.inf]),
                        np.array(many))
    np.testing.assert_allclose(rates[position], expected, rtol=1e-9)


@settings(max_examples=400, deadline=None)
@given(duplicated())
def test_grouped_weighted_rates_are_the_ungrouped_ones(problem):
    routes, capacity, route_weights, which = problem
    weights = [route_weights[i] for i in which]
    first, many, position = grouped(which)
    reps = [routes[i] for i in first]
    rep_weights = [weights[i] for i in first]
    limits = dict(enumerate(capacity))
    cap = np.array([*capacity, np.inf])
    python = np.array(fill_weighted(routes, limits, weights))
    vectorized = fill_arrays_weighted(padded(routes, len(capacity)), cap, np.array(weights))
    np.testing.assert_allclose(vectorized, python, rtol=1e-12, atol=0)
    np.testing.assert_allclose(np.array(fill_weighted(reps, limits, rep_weights,
                                                      many))[position],
                               python, rtol=1e-12, atol=0)
    rates = fill_arrays_weighted(padded(reps, len(capacity)), cap, np.array(rep_weights),
                                 np.array(many))
    np.testing.assert_allclose(rates[position], python, rtol=1e-12, atol=0)


def test_hand_worked_grouped_chain():
    # Link 0 (6 B/s) carries 2 flows on route (0, 1) and 1 on (0,): share 2; link 1
    # (5 B/s) carries those 2 and 2 more on (1,): share 1.25, the least. Its 4 flows
    # freeze at 1.25; link 0 leaves 6 - 2 x 1.25 = 3.5 to its flow on (0,).
    routes, many = [(0, 1), (0,), (1,)], [2, 1, 2]
    assert fill(routes, {0: 6.0, 1: 5.0}, many) == [1.25, 3.5, 1.25]
    rates = fill_arrays(padded(routes, 2), np.array([6.0, 5.0, np.inf]), np.array(many))
    np.testing.assert_array_equal(rates, [1.25, 3.5, 1.25])


def nccl_run(network: str, monkeypatch, group_from: int) -> sc.Result:
    monkeypatch.setattr(general, "GROUP_FROM", group_from)
    return sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl",
                       nbytes="32MiB", network=network)


@pytest.fixture
def grouped_solves(monkeypatch) -> list[tuple[int, int]]:
    """(flows, distinct routes) of every grouped re-solve of the numpy path (the compiled
    re-solve, which test_resolve_kernel checks against it, is turned off)."""
    monkeypatch.setattr(compiled, "AVAILABLE", False)
    seen: list[tuple[int, int]] = []
    solve = general.GeneralFlows._fill_grouped

    def spy(self, chosen, capacity):
        seen.append((len(chosen), len(set(self.route[chosen].tolist()))))
        return solve(self, chosen, capacity)

    monkeypatch.setattr(general.GeneralFlows, "_fill_grouped", spy)
    return seen


@pytest.mark.parametrize(("network", "vectorized_from"),
                         [("flow", FlowNetwork.vectorized_from), ("flow", 0),
                          ("flow_rtt", FlowNetwork.vectorized_from), ("flow_rtt", 0)])
def test_nccl_all_reduce_takes_the_same_time_grouped_or_not(network, vectorized_from,
                                                            monkeypatch, grouped_solves):
    monkeypatch.setattr(FlowNetwork, "vectorized_from", vectorized_from)
    ungrouped = nccl_run(network, monkeypatch, sys.maxsize)
    assert not grouped_solves
    grouped_result = nccl_run(network, monkeypatch, 0)
    # Grouping happened, and it merged flows: some re-solve had fewer routes than flows.
    assert any(routes < flows for flows, routes in grouped_solves)
    assert grouped_result.messages == ungrouped.messages
    assert grouped_result.time == pytest.approx(ungrouped.time, rel=1e-12, abs=0)
    np.testing.assert_allclose(grouped_result.rank_times, ungrouped.rank_times, rtol=1e-12)
    if network == "flow" and vectorized_from == 0:
        # Unweighted numpy re-solves are the ungrouped ones bit for bit.
        assert grouped_result.time == ungrouped.time


class GeneralOnly(FlowNetwork):
    """Every flow in the general regime."""

    fast = False


def arrivals_around_a_failure(topo: sc.Topology) -> list[float]:
    """Arrival times of 20 flows of 0.1 GB gpu0 -> gpu1 and 20 gpu2 -> gpu1, all in the
    general regime, link 0 failing at 1 s."""
    env = simpy.Environment()
    net = GeneralOnly(env, topo, topo.nranks)
    net.track_flows()
    arrived: list[float] = []
    for src in [0] * 20 + [2] * 20:
        net.transfer(src, 1, 10**8, lambda _token: arrived.append(env.now), None)
    env.timeout(1.0).callbacks.append(lambda _event: change_link(net, 0, 0.0))
    env.run()
    return arrived


def test_rerouted_flows_are_regrouped_on_their_new_route(monkeypatch, grouped_solves):
    # A ring of 4 GPUs, links of 1 GB/s, no latency. 20 flows of 0.1 GB go gpu0 -> gpu1
    # and 20 go gpu2 -> gpu1, each 20 sharing one link: 0.05 GB/s each. At 1 s each has
    # 0.05 GB left and link gpu0-gpu1 fails: the first 20 go round by gpu3 and gpu2, and
    # all 40 share link gpu2 -> gpu1 at 0.025 GB/s: 2 s more, every flow ends at 3 s.
    topo = sc.Topology("ring")
    gpus = [topo.add_gpu() for _ in range(4)]
    for a, b in zip(gpus, gpus[1:] + gpus[:1]):
        topo.add_link(a, b, bandwidth=1e9)
    for group_from in (sys.maxsize, 0):
        monkeypatch.setattr(general, "GROUP_FROM", group_from)
        np.testing.assert_allclose(arrivals_around_a_failure(topo), [3.0] * 40, rtol=1e-12)
    assert any(routes == 2 and flows == 40 for flows, routes in grouped_solves)
