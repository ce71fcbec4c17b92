"""Property-based checks (hypothesis): any algorithm, machine, rank count, size, dtype and op
gives the tests' own reference result (``reference.py``, not simcoll's checker) and the
cost model's traffic; the flow model's shortcuts never change times."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STOCK_PAIRS, draw_case, make_data, reference_network, run_flows
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from machines import KINDS, random_machine
from reference import assert_outputs_match

import simcoll as sc
from simcoll import cost
from simcoll.network.flow import FlowNetwork

# The v-collectives are left out: they take sizes per rank (conftest.V_COLLECTIVES).
PAIRS = STOCK_PAIRS
OPS = list(sc.ReduceOp)
DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64",
          "uint64"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(PAIRS), p=st.integers(1, 17), count=st.integers(0, 300),
       dtype=st.sampled_from(DTYPES), op=st.sampled_from(OPS), seed=st.integers(0, 2**16),
       data=st.data())
def test_any_run_gives_the_reference_result_and_the_modelled_bytes(pair, p, count, dtype,
                                                                   op, seed, data):
    coll, alg = pair
    assume(alg != "nccl" or dtype != "int16")  # NCCL has no int16 (refused)
    collective = sc.COLLECTIVES[coll]
    kwargs = draw_case(data, pair, p)
    if collective.reduces:
        kwargs["op"] = op
    inputs = make_data(p, 0 if coll == "barrier" else count, dtype, op, seed,
                       full_range=True)
    res = sc.simulate(reference_network(p), coll, algorithm=alg, data=inputs, **kwargs)
    assert res.correct, res.max_error
    assert_outputs_match(res, inputs, op, kwargs.get("root", 0))
    params = {k: v for k, v in kwargs.items() if k != "op"}
    model = cost.traffic(coll, alg, p=p, nbytes=inputs[0].nbytes,
                         itemsize=np.dtype(dtype).itemsize, **params)
    np.testing.assert_array_equal(res.bytes_sent, model.sent)
    np.testing.assert_array_equal(res.bytes_received, model.received)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(PAIRS), kind=st.sampled_from(KINDS), machine=st.integers(0, 10**6),
       hosts=st.integers(0, 2), count=st.integers(0, 200), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(OPS), seed=st.integers(0, 2**16), data=st.data())
def test_results_do_not_depend_on_the_machine(pair, kind, machine, hosts, count, dtype, op,
                                              seed, data):
    coll, alg = pair
    assume(alg != "nccl" or dtype != "int16")  # NCCL has no int16 (refused)
    topo = random_machine(kind, machine, hosts=hosts)
    kwargs = draw_case(data, pair, topo.nranks, hosts)
    if sc.COLLECTIVES[coll].reduces:
        kwargs["op"] = op
    inputs = make_data(topo.nranks, 0 if coll == "barrier" else count, dtype, op, seed,
                       full_range=True)
    res = sc.simulate(topo, coll, algorithm=alg, data=inputs, **kwargs)
    assert res.correct, res.max_error
    assert_outputs_match(res, inputs, op, kwargs.get("root", 0))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_avg_of_a_sum_that_wraps_to_the_dtype_minimum(dtype):
    # Two ranks of -2^(b-2) sum to -2^(b-1), the dtype's minimum; the average is
    # -2^(b-2) again (np.abs of the minimum overflows, which once gave +2^(b-2)).
    quarter = np.iinfo(dtype).min // 2
    inputs = [np.array([quarter, -7, 7], dtype=dtype)] * 2
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", data=inputs,
                      op="avg")
    for out in res.outputs:
        assert out.tolist() == [quarter, -7, 7]
    assert res.correct


def test_integer_avg_truncates_toward_zero_where_the_sum_wraps():
    # int8, 3 ranks: -128 * 3 = -384 wraps to -128, and -128 / 3 truncates to -42;
    # 127 * 3 = 381 wraps to 125, and 125 / 3 truncates to 41.
    inputs = [np.array([-128, 127, -5, 5], dtype=np.int8)] * 3
    res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="naive", data=inputs,
                      op="avg")
    assert res.outputs[0].tolist() == [-42, 41, -5, 5]
    assert res.correct


class GeneralOnly(FlowNetwork):
    fast = False


flow = st.tuples(st.floats(0, 3), st.integers(0, 4), st.integers(0, 4),
                 st.integers(0, 3).map(lambda k: [0, 1, 10**6, 7 * 10**6][k]))


@settings(max_examples=200, deadline=None)
@given(flows=st.lists(flow, min_size=1, max_size=12),
       bandwidths=st.lists(st.sampled_from([1e6, 2e6, 5e6]), min_size=6, max_size=6))
def test_flow_shortcuts_agree_with_the_general_solver(flows, bandwidths):
    topo = sc.Topology("two switches")
    a, b = topo.add_switch("a"), topo.add_switch("b")
    topo.add_link(a, b, bandwidth=bandwidths[5], latency=0.25)
    for i in range(5):
        topo.add_link(topo.add_gpu(), a if i < 3 else b, bandwidth=bandwidths[i],
                      latency=0.1 * i)
    flows = [(t, s, d, n) for t, s, d, n in flows if s != d]
    if not flows:
        return
    fast = run_flows(topo, flows)
    general = run_flows(topo, flows, GeneralOnly)
    np.testing.assert_allclose(fast, general, rtol=1e-9)


class Vectorized(GeneralOnly):
    vectorized_from = 0


@settings(max_examples=200, deadline=None)
@given(flows=st.lists(flow, min_size=1, max_size=12),
       bandwidths=st.lists(st.sampled_from([1e6, 2e6, 5e6]), min_size=6, max_size=6))
def test_vectorized_general_solver_agrees_with_the_shortcuts(flows, bandwidths):
    topo = sc.Topology("two switches")
    a, b = topo.add_switch("a"), topo.add_switch("b")
    topo.add_link(a, b, bandwidth=bandwidths[5], latency=0.25)
    for i in range(5):
        topo.add_link(topo.add_gpu(), a if i < 3 else b, bandwidth=bandwidths[i],
                      latency=0.1 * i)
    flows = [(t, s, d, n) for t, s, d, n in flows if s != d]
    if not flows:
        return
    np.testing.assert_allclose(run_flows(topo, flows, Vectorized), run_flows(topo, flows),
                               rtol=1e-9)
    np.testing.assert_allclose(run_flows(topo, flows, Vectorized),
                               run_flows(topo, flows, GeneralOnly), rtol=1e-12)
