"""Property-based checks (hypothesis): any algorithm, rank count, size and dtype gives the
numpy result and the cost model's traffic; the flow model's shortcuts never change times."""

from __future__ import annotations

import numpy as np
from conftest import make_data, reference_network, run_flows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simcoll as sc
from simcoll import cost
from simcoll.network.flow import FlowNetwork

PAIRS = [pair for pair in sc.list_algorithms()
         if sc.get_algorithm(*pair).fn.__module__.startswith("simcoll.")]
OPS = [sc.ReduceOp.SUM, sc.ReduceOp.MIN, sc.ReduceOp.MAX, sc.ReduceOp.AVG]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(PAIRS), p=st.integers(1, 9), count=st.integers(0, 40),
       dtype=st.sampled_from(["float32", "float64", "int32", "int16"]),
       op=st.sampled_from(OPS), seed=st.integers(0, 2**16), data=st.data())
def test_any_run_is_correct_and_moves_the_modelled_bytes(pair, p, count, dtype, op, seed,
                                                        data):
    coll, alg = pair
    collective = sc.COLLECTIVES[coll]
    kwargs = {"op": op} if collective.reduces else {}
    if collective.rooted:
        kwargs["root"] = data.draw(st.integers(0, p - 1), label="root")
    inputs = make_data(p, 0 if coll == "barrier" else count, dtype, op, seed)
    res = sc.simulate(reference_network(p), coll, algorithm=alg, data=inputs, **kwargs)
    assert res.correct, res.max_error
    params = {"root": kwargs["root"]} if collective.rooted else {}
    itemsize = np.dtype(dtype).itemsize
    model = cost.traffic(coll, alg, p=p, nbytes=inputs[0].nbytes, itemsize=itemsize,
                         **params)
    np.testing.assert_array_equal(res.bytes_sent, model.sent)
    np.testing.assert_array_equal(res.bytes_received, model.received)


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
