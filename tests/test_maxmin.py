"""The two progressive-filling solvers (pure Python and numpy) against each other and an
independent max-min reference, on random link sets, routes and capacities (ties and
equal capacities included), and on cases worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import _fair_rates

from simcoll.network.maxmin import fill, fill_arrays


def arrays(routes: list[tuple[int, ...]], capacity: list[float]) -> np.ndarray:
    """``fill_arrays`` on a padded matrix of ``routes``."""
    pad = len(capacity)
    width = max(len(r) for r in routes)
    links = np.full((len(routes), width), pad, dtype=np.intp)
    for i, route in enumerate(routes):
        links[i, :len(route)] = route
    return fill_arrays(links, np.array([*capacity, np.inf]))


def maxmin_is_fair(routes, capacity, rates, rel=1e-9):
    """Every flow has a bottleneck: a full link on which no flow is faster (the definition
    of max-min fairness), and no link carries more than its capacity."""
    load = [0.0] * len(capacity)
    for route, rate in zip(routes, rates):
        for d in route:
            load[d] += rate
    for d, c in enumerate(capacity):
        assert load[d] <= c * (1 + rel)
    for route, rate in zip(routes, rates):
        assert any(load[d] >= capacity[d] * (1 - rel)
                   and all(r <= rate * (1 + rel) for rt, r in zip(routes, rates) if d in rt)
                   for d in route)


SMALL = [1.0, 2.0, 3.0, 2.5e9, 1e10, 7e10]
"""Small integers make exact ties; the others, rates like real links'."""


@st.composite
def problems(draw, capacities=SMALL):
    links = draw(st.integers(1, 12))
    levels = draw(st.lists(st.sampled_from(capacities), min_size=links, max_size=links))
    routes = draw(st.lists(st.lists(st.integers(0, links - 1), min_size=1, max_size=5,
                                    unique=True).map(tuple), min_size=1, max_size=80))
    return routes, levels


@settings(max_examples=400, deadline=None)
@given(problems())
def test_both_solvers_give_the_same_rates_to_1e_12(problem):
    routes, capacity = problem
    python = np.array(fill(routes, dict(enumerate(capacity))))
    vectorized = arrays(routes, capacity)
    np.testing.assert_allclose(vectorized, python, rtol=1e-12, atol=0)


@settings(max_examples=200, deadline=None)
@given(problems([1e9, 2.5e9, 1e10, 4e10, 1e11]))
def test_both_solvers_match_an_independent_reference(problem):
    # The reference sums its level step by step, so it is only as precise as 1e-9 of the
    # largest rate: capacities here stay within two orders of magnitude.
    routes, capacity = problem
    expected = _fair_rates(dict(enumerate(routes)), capacity)
    expected = [expected[i] for i in range(len(routes))]
    for rates in (fill(routes, dict(enumerate(capacity))), arrays(routes, capacity)):
        np.testing.assert_allclose(rates, expected, rtol=1e-9)
        maxmin_is_fair(routes, capacity, rates)


def test_hand_worked_chain():
    # Links 0 (3 B/s), 1 (4 B/s), 2 (10 B/s). Flows: a on 0+1, b on 0, c on 1+2, d on 2.
    # Link 0 fills first at 1.5 (a, b); link 1 then has 4 - 1.5 = 2.5 for c alone, and
    # link 2 gives d what c leaves: 10 - 2.5 = 7.5.
    routes = [(0, 1), (0,), (1, 2), (2,)]
    capacity = [3.0, 4.0, 10.0]
    expected = [1.5, 1.5, 2.5, 7.5]
    assert fill(routes, dict(enumerate(capacity))) == expected
    np.testing.assert_array_equal(arrays(routes, capacity), expected)


def test_a_switch_all_to_all_is_one_level():
    # 4 ranks on a switch, every rank to every other: 3 flows on every up and down link,
    # each gets exactly a third of 12 B/s, and no rate differs from another by an ulp.
    p = 4
    routes = [(2 * i, 2 * j + 1) for i in range(p) for j in range(p) if i != j]
    rates = arrays(routes, [12.0] * (2 * p))
    assert set(rates.tolist()) == {4.0}


@pytest.mark.parametrize("seed", range(3))
def test_large_random_components_agree(seed):
    # Thousands of flows on a switch, as an uneven all-to-all leaves them mid-run.
    rng = np.random.default_rng(seed)
    p = 48
    routes = [(2 * i, 2 * j + 1) for i in range(p) for j in range(p)
              if i != j and rng.random() < 0.6]
    capacity = rng.choice([1e10, 2.5e10, 1e11], 2 * p).tolist()
    python = np.array(fill(routes, dict(enumerate(capacity))))
    np.testing.assert_allclose(arrays(routes, capacity), python, rtol=1e-12, atol=0)
    maxmin_is_fair(routes, capacity, python)
