"""The weighted solvers for numba (simcoll.network.weighted_kernels) give the pure weighted
solvers' rates bit for bit: uncompiled on random problems (whether numba is installed or
not), compiled where numba is; numpy's pairwise summation is followed to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compensated_sum
from hypothesis import given, settings
from hypothesis import strategies as st
from test_maxmin import problems
from test_route_grouping import padded

import simcoll.network.weighted as weighted
from simcoll.network import compiled, weighted_kernels
from simcoll.network.weighted import fill_arrays_weighted, fill_weighted


@st.composite
def weighted_problems(draw):
    """A test_maxmin problem with a weight per route spanning nine orders of magnitude
    (so that a heavy flow leaving a link makes its sum of weights recomputed) and how many
    flows each route stands for (None: one each)."""
    routes, capacity = draw(problems())
    weights = draw(st.lists(st.sampled_from([1e-6, 3e-4, 0.1, 1.0, 7.0, 1e3]),
                            min_size=len(routes), max_size=len(routes)))
    many = draw(st.none() | st.lists(st.integers(1, 9), min_size=len(routes),
                                     max_size=len(routes)))
    return routes, capacity, weights, many


def _pure(routes, capacity, weights, many):
    python = np.array(fill_weighted(routes, dict(enumerate(capacity)), weights, many))
    with np.errstate(divide="ignore", invalid="ignore"):
        arrays = fill_arrays_weighted(padded(routes, len(capacity)),
                                      np.array([*capacity, np.inf]), np.array(weights),
                                      None if many is None else np.array(many))
    return python, arrays


def _arguments(routes, capacity, weights, many):
    multiplicity = np.ones(len(routes)) if many is None else np.array(many, dtype=float)
    return (padded(routes, len(capacity)), np.array([*capacity, np.inf]), np.array(weights),
            multiplicity)


@settings(max_examples=300, deadline=None)
@given(weighted_problems())
def test_uncompiled_weighted_solvers_are_the_pure_ones_bit_for_bit(problem):
    python, arrays = _pure(*problem)
    args = _arguments(*problem)
    np.testing.assert_array_equal(weighted_kernels.fill_weighted_rows(*args), python)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(weighted_kernels.fill_arrays_weighted_rows(*args),
                                      arrays)


def test_the_problems_recompute_sums_of_weights():
    # A link of capacity 1 carries a flow of weight 1000 and two of weight 1e-6 on it
    # alone; a second link (capacity 1e-3) holds the heavy flow back, so it freezes
    # first and leaves a sum of 2e-6 < 1e-3 x 1000.000002: recomputed as 1e-6 + 1e-6.
    routes = [(0, 1), (0,), (0,)]
    args = _arguments(routes, [1.0, 1e-3], [1e3, 1e-6, 1e-6], None)
    python, arrays = _pure(routes, [1.0, 1e-3], [1e3, 1e-6, 1e-6], None)
    # The heavy flow gets link 1's capacity; the light ones share what is left of link 0.
    assert python[0] == pytest.approx(1e-3, rel=1e-12)
    assert python[1] == python[2] == pytest.approx((1.0 - 1e-3) / 2, rel=1e-12)
    np.testing.assert_array_equal(weighted_kernels.fill_weighted_rows(*args), python)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(weighted_kernels.fill_arrays_weighted_rows(*args),
                                      arrays)


@pytest.mark.parametrize("n", [*range(0, 40), 127, 128, 129, 135, 136, 255, 256, 257,
                               1000, 4097, 65_537])
def test_pairwise_sum_is_numpys_sum(n):
    rng = np.random.default_rng(n)
    values = rng.standard_normal(n + 3) * 10.0 ** rng.integers(-9, 9, n + 3)
    assert weighted_kernels.pairwise_sum(values, 3, n) == values[3:].sum()


@pytest.mark.parametrize("n", [1, 7, 8, 9, 128, 200])
def test_pairwise_sum_keeps_numpys_signed_zeros(n):
    for values in (np.full(n, -0.0), np.full(n, 0.0), np.array([-0.0, 0.0] * n)[:n]):
        assert np.float64(weighted_kernels.pairwise_sum(values, 0, n)).tobytes() == \
            values.sum().tobytes()


numba_only = pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not installed")


@numba_only
@settings(max_examples=300, deadline=None)
@given(weighted_problems())
def test_compiled_weighted_solvers_are_the_pure_ones_bit_for_bit(problem):
    # Work of WARMUP loads the compiled solvers whatever the process did before.
    rows = compiled.solver("weighted_rows", compiled.WARMUP)
    vectorized = compiled.solver("weighted_arrays", compiled.WARMUP)
    assert rows is not None and vectorized is not None
    python, arrays = _pure(*problem)
    args = _arguments(*problem)
    np.testing.assert_array_equal(rows(*args), python)
    np.testing.assert_array_equal(vectorized(*args), arrays)


def test_a_links_weight_is_summed_left_to_right_whatever_sum_does(monkeypatch):
    """Three flows of weights 0.1, 0.2, 0.3 share one link of capacity 1: each gets its
    weight over the link's total weight, the total taken left to right as the compiled
    solver takes it, (0.1 + 0.2) + 0.3 = 0.6000000000000001. On Python 3.11 sum() adds
    left to right too, so the weighted module is given a compensating sum() (3.12's
    behaviour): the rates must not move (0.1 / 0.6 would give 0.16666666666666669)."""
    monkeypatch.setattr(weighted, "sum", compensated_sum, raising=False)
    weights = [0.1, 0.2, 0.3]
    total = (0.1 + 0.2) + 0.3
    assert total == 0.6000000000000001
    rates = weighted.fill_weighted([[0], [0], [0]], {0: 1.0}, weights)
    assert rates[:2] == [0.1 / total, 0.2 / total]   # 0.1666...66, 0.333...33
    assert rates[:2] == [0.16666666666666666, 0.3333333333333333]
    assert abs(rates[2] - 0.5) <= 2e-16


def test_a_links_refreshed_weight_is_summed_left_to_right_whatever_sum_does(monkeypatch):
    """Flow 0 (weight 1000) crosses link 0 (capacity 10) and link 1 (capacity 1e-3),
    which freezes it first at 1e-3; link 0's unfrozen weight then falls from 1000.6 to
    about 0.6, under REFRESH (1e-3) of what it was, and is summed again over flows 1-3
    (weights 0.1, 0.2, 0.3), left to right: 0.6000000000000001. Their rates are w x
    (10 - 1e-3) / that sum, worked out here by hand; with the module given a compensating
    sum() (3.12's behaviour) they must not move (a compensated 0.6 gives
    1.6665000000000003 for flow 1)."""
    monkeypatch.setattr(weighted, "sum", compensated_sum, raising=False)
    weights = [1000.0, 0.1, 0.2, 0.3]
    rates = weighted.fill_weighted([[0, 1], [0], [0], [0]], {0: 10.0, 1: 1e-3}, weights)
    level = (10.0 - 1e-3) / ((0.1 + 0.2) + 0.3)
    assert rates == [1e-3, 0.1 * level, 0.2 * level, 0.3 * level]
    assert rates[1] == 1.6665
