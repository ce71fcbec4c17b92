"""Every registered algorithm, checked three ways against its cost model.

For each (collective, algorithm) pair: the result matches numpy, per-rank traffic equals
``cost.traffic``, the time on the alpha-beta reference network equals ``cost.predict`` to
1e-9 relative wherever the model says it is exact, and is never below ``lower_bound``.
An algorithm registered without a cost model fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, STOCK_PAIRS, make_data, reference_network
from reference import assert_outputs_match

import simcoll as sc
from simcoll import cost

# The v-collectives are left out: they take sizes per rank (conftest.V_COLLECTIVES).
PAIRS = STOCK_PAIRS
RANKS = [1, 2, 3, 4, 5, 8, 16]


def ids(pair):
    return "/".join(pair)


def run(pair, p, **kwargs):
    coll, alg = pair
    if sc.COLLECTIVES[coll].rooted:
        kwargs.setdefault("root", p // 2)
    return sc.simulate(reference_network(p), coll, algorithm=alg, **kwargs)


def model_params(pair, p, kwargs):
    params = {k: v for k, v in kwargs.items() if k not in ("data", "nbytes", "op", "dtype")}
    if sc.COLLECTIVES[pair[0]].rooted:
        params.setdefault("root", p // 2)
    return params


def test_every_algorithm_has_a_cost_model():
    assert set(PAIRS) <= set(cost.models())
    for pair in PAIRS:
        assert isinstance(sc.get_algorithm(*pair).cost, cost.CostModel), pair


@pytest.mark.parametrize("pair", PAIRS, ids=ids)
@pytest.mark.parametrize("p", RANKS)
def test_result_matches_numpy(pair, p):
    coll = sc.COLLECTIVES[pair[0]]
    ops = [sc.ReduceOp.SUM, sc.ReduceOp.MAX, sc.ReduceOp.AVG] if coll.reduces else [None]
    for count in sorted({8 * p, 8 * p + 3, max(p - 1, 1)}):
        for dtype in ("float32", "int64"):
            for op in ops:
                kwargs = {"op": op} if op else {}
                data = make_data(p, 0 if pair[0] == "barrier" else count, dtype)
                before = [x.copy() for x in data]
                res = run(pair, p, data=data, **kwargs)
                assert res.correct, (count, dtype, op, res.max_error)
                # res.correct is simcoll's own check: numpy's reference too
                assert_outputs_match(res, data, op or sc.ReduceOp.SUM, root=p // 2)
                for x, y in zip(data, before):
                    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("pair", PAIRS, ids=ids)
@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("count_per_rank", [1 << 12, 1001])
def test_traffic_and_time_match_the_cost_model(pair, p, count_per_rank):
    coll = pair[0]
    nbytes = 0 if coll == "barrier" else 4 * p * count_per_rank
    res = run(pair, p, nbytes=nbytes)
    params = model_params(pair, p, {})
    expected = cost.traffic(coll, pair[1], p=p, nbytes=nbytes, itemsize=4, **params)
    np.testing.assert_array_equal(res.bytes_sent, expected.sent)
    np.testing.assert_array_equal(res.bytes_received, expected.received)
    bound = cost.lower_bound(coll, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA, gamma=GAMMA,
                             itemsize=4)
    assert res.time >= bound.total * (1 - 1e-12)
    if cost.is_exact(coll, pair[1], p=p, nbytes=nbytes, itemsize=4, **params):
        predicted = cost.predict(coll, pair[1], p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                                 gamma=GAMMA, **params)
        assert res.time == pytest.approx(predicted, rel=1e-9, abs=1e-18)
        if sc.get_algorithm(*pair).cost.ends_together:
            # What composite algorithms (bucketed) rely on: no rank finishes early.
            assert np.ptp(res.rank_times) <= 1e-9 * res.time, res.rank_times


@pytest.mark.parametrize("pair", PAIRS, ids=ids)
def test_data_free_and_data_mode_agree(pair):
    p, count = 5, 203
    data = make_data(p, 0 if pair[0] == "barrier" else count, "float32")
    a = run(pair, p, data=data)
    b = run(pair, p, nbytes=data[0].nbytes)
    assert a.time == b.time and a.messages == b.messages
    np.testing.assert_array_equal(a.bytes_sent, b.bytes_sent)
    np.testing.assert_array_equal(a.bytes_received, b.bytes_received)


def test_unknown_cost_model_lists_known_ones():
    with pytest.raises(sc.UnknownAlgorithmError, match="no cost model for all_reduce/nope.*"
                                                       "all_reduce/ring"):
        cost.predict("all_reduce", "nope", p=4, nbytes=8, alpha=1, beta=1)
