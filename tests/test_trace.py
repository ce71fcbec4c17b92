"""Traces record every message, reduction and compute span, and export to Chrome JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, NO_FORMULA, reference_network

import simcoll as sc
from simcoll.trace import save_chrome, to_chrome


def test_ring_trace_holds_every_message_and_reduction_with_its_times():
    p, m = 4, 4 * 4 * 1024
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=m,
                      trace=True)
    messages = [e for e in res.trace if e.kind == "message"]
    reductions = [e for e in res.trace if e.kind == "reduce"]
    assert len(messages) == res.messages == 2 * p * (p - 1)
    for e in messages:
        assert e.peer == (e.rank + 1) % p and e.nbytes == m // p
        assert e.end - e.start == pytest.approx(ALPHA + m / p * BETA, rel=1e-9)
    sent = np.bincount([e.rank for e in messages], weights=[e.nbytes for e in messages])
    np.testing.assert_array_equal(sent, res.bytes_sent)
    assert len(reductions) == p * (p - 1)
    for e in reductions:
        assert e.end - e.start == pytest.approx(m / p * GAMMA, rel=1e-9)
    assert max(e.end for e in res.trace) == pytest.approx(res.time, rel=1e-12)


def test_compute_spans_are_traced_and_untraced_runs_have_none():
    @sc.register("all_reduce", "test_traced_compute", cost=NO_FORMULA)
    def busy(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(3e-6)
        yield comm.compute(2e-6)
        return x

    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_traced_compute",
                      nbytes=8, trace=True)
    spans = sorted((e.rank, e.start, e.end) for e in res.trace if e.kind == "compute")
    np.testing.assert_allclose(spans, [(0, 0, 3e-6), (0, 3e-6, 5e-6), (1, 0, 3e-6),
                                       (1, 3e-6, 5e-6)], rtol=1e-12, atol=1e-18)
    assert sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring",
                       nbytes=8).trace is None


def test_chrome_export(tmp_path):
    res = sc.simulate(reference_network(3), "all_reduce", algorithm="ring", nbytes=1200,
                      trace=True)
    path = tmp_path / "ring.json"
    save_chrome(res, path)
    events = json.loads(path.read_text())["traceEvents"]
    begins = [e for e in events if e["ph"] == "b"]
    ends = [e for e in events if e["ph"] == "e"]
    assert len(begins) == len(ends) == res.messages
    assert {e["pid"] for e in begins} == {0, 1, 2}
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == 3 * 2 and all(e["name"] == "reduce" for e in spans)
    assert max(e["ts"] for e in ends) == pytest.approx(res.time * 1e6)
    untraced = sc.simulate(reference_network(3), "all_reduce", algorithm="ring", nbytes=12)
    with pytest.raises(sc.InvalidInputError, match="trace=True"):
        to_chrome(untraced)
