"""The large property run: 10,000 random cases, outside the default test run.

    python -m pytest -m slow tests/test_large_property_run.py

Each case draws a machine (tree, cycle, leaf-spine or random graph, uneven bandwidths and
latencies, sometimes server hosts), a registered algorithm, a size, a dtype and an op,
runs it in data mode, and checks the outputs against the tests' own reference, the traffic
against the cost model's, and the time against the last real activity; one case in four
also runs with every flow through the general solver and compares every rank's time.

Then 2,000 rings (even and uneven, half of them in data mode) on random machines: the run
``simulate`` times over arrays where it can (``simcoll.lone_flows``) against the rank
programs' run, every field of the result, outputs included.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STOCK_PAIRS, V_COLLECTIVES, draw_case, make_data
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from machines import KINDS, random_machine
from reference import assert_outputs_match

import simcoll as sc
from simcoll import cost
from simcoll.network import NETWORKS
from simcoll.network.flow import FlowNetwork

# The v-collectives are left out: they take sizes per rank (conftest.V_COLLECTIVES).
PAIRS = STOCK_PAIRS
DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64",
          "uint64"]


class GeneralOnly(FlowNetwork):
    name = "flow_general"
    fast = False


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(pair=st.sampled_from(PAIRS), kind=st.sampled_from(KINDS),
       machine=st.integers(0, 10**9), hosts=st.integers(0, 2), count=st.integers(0, 500),
       dtype=st.sampled_from(DTYPES), op=st.sampled_from(list(sc.ReduceOp)),
       seed=st.integers(0, 2**32 - 1), general=st.integers(0, 3), data=st.data())
def test_ten_thousand_random_cases(pair, kind, machine, hosts, count, dtype, op, seed,
                                   general, data):
    coll, alg = pair
    assume(alg != "nccl" or dtype != "int16")  # NCCL has no int16 (refused)
    topo = random_machine(kind, machine, hosts=hosts, gpus=data.draw(st.integers(1, 12)))
    p = topo.nranks
    kwargs = draw_case(data, pair, p, hosts)
    reduces = sc.COLLECTIVES[coll].reduces
    inputs = make_data(p, 0 if coll == "barrier" else count, dtype, op, seed,
                       full_range=True)
    res = sc.simulate(topo, coll, algorithm=alg, data=inputs, trace=True,
                      **({"op": op} if reduces else {}), **kwargs)
    assert res.correct, res.max_error
    assert_outputs_match(res, inputs, op, kwargs.get("root", 0))
    ends = [e.end for e in res.trace if e.kind == "message"]
    assert res.time == max([*ends, *res.rank_times.tolist()])
    params = dict(kwargs, **({"hosts": len(topo.hosts)} if alg == "parameter_server" else {}))
    model = cost.traffic(coll, alg, p=p, nbytes=inputs[0].nbytes,
                         itemsize=np.dtype(dtype).itemsize, **params)
    np.testing.assert_array_equal(res.bytes_sent, model.sent)
    np.testing.assert_array_equal(res.bytes_received, model.received)
    if alg == "parameter_server":
        np.testing.assert_array_equal(res.host_bytes_sent, model.host_sent)
        np.testing.assert_array_equal(res.host_bytes_received, model.host_received)
    if general == 0:
        NETWORKS["flow_general"] = GeneralOnly
        try:
            other = sc.simulate(topo, coll, algorithm=alg, data=inputs, network="flow_general",
                                **({"op": op} if reduces else {}), **kwargs)
        finally:
            del NETWORKS["flow_general"]
        np.testing.assert_allclose(other.rank_times, res.rank_times, rtol=1e-9, atol=1e-18)


RINGS = [("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring"),
         ("all_gatherv", "ring"), ("reduce_scatterv", "ring")]


@pytest.mark.slow
@settings(max_examples=2_000, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(pair=st.sampled_from(RINGS), kind=st.sampled_from(KINDS),
       machine=st.integers(0, 10**9), hosts=st.integers(0, 2), count=st.integers(1, 5000),
       chunks=st.integers(1, 4), network=st.sampled_from(["flow", "analytical"]),
       dtype=st.sampled_from(["float32", "float64", "float16", "int8"]),
       with_data=st.booleans(), op=st.sampled_from(list(sc.ReduceOp)),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_rings_timed_over_arrays_match_their_rank_programs(pair, kind, machine, hosts,
                                                           count, chunks, network, dtype,
                                                           with_data, op, seed, data):
    """Rings on random machines, half of them in data mode: the run timed over arrays,
    wherever simulate takes it, gives every field of the rank programs' run, outputs
    included, bit for bit (``simcoll.lone_flows``, ``algorithms/ring_outputs.py``); in
    data mode the outputs also match the tests' own reference."""
    coll, alg = pair
    topo = random_machine(kind, machine, hosts=hosts, gpus=data.draw(st.integers(2, 12)))
    p = topo.nranks
    itemsize = np.dtype(dtype).itemsize
    kwargs: dict = dict(algorithm=alg, network=network)
    blocks: list[int] | None = None
    if coll in V_COLLECTIVES:
        blocks = data.draw(st.lists(st.integers(0, count), min_size=p, max_size=p))
    else:
        kwargs["chunks"] = min(chunks, count)
    if not with_data:
        kwargs.update(dtype=dtype, nbytes=[itemsize * b for b in blocks] if blocks is not None
                      else itemsize * count)
    elif coll == "all_gatherv":
        assert blocks is not None
        kwargs["data"] = [x[:b] for x, b in zip(make_data(p, max(blocks), dtype, op, seed,
                                                           full_range=True), blocks)]
    else:
        kwargs["data"] = make_data(p, count if blocks is None else sum(blocks), dtype, op,
                                   seed, full_range=True)
        if blocks is not None:
            kwargs["splits"] = blocks
    if with_data and sc.COLLECTIVES[coll].reduces:
        kwargs["op"] = op
    fast = sc.simulate(topo, coll, **kwargs)
    sc.lone_flows.enabled = False
    try:
        slow = sc.simulate(topo, coll, **kwargs)
    finally:
        sc.lone_flows.enabled = True
    assert fast.to_dict() == slow.to_dict()
    assert np.array_equal(fast.rank_times, slow.rank_times)
    if with_data:
        assert fast.correct and fast.max_error == slow.max_error
        assert [x.tobytes() for x in fast.outputs] == [x.tobytes() for x in slow.outputs]
        assert_outputs_match(fast, kwargs["data"], op, 0)
