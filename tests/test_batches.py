"""Bulk-synchronous steps: flows that start or end at one instant share one event, and the
times are those of the general path (every flow through the general solver) and of the
formulas worked out here."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from conftest import run_flows

import simcoll as sc
from simcoll.network.flow import FlowNetwork


class GeneralOnly(FlowNetwork):
    fast = False


def start_together(topo, flows, network=FlowNetwork):
    """Start every ``(src, dst, nbytes)`` transfer at t = 0 from one callback; return the
    arrival times and how many events went on SimPy's queue."""
    env = simpy.Environment()
    net = network(env, topo, topo.nranks)
    arrived: dict[int, float] = {}

    def start(_event):
        for i, (src, dst, nbytes) in enumerate(flows):
            net.transfer(src, dst, nbytes, lambda i: arrived.__setitem__(i, env.now), i)

    env.timeout(0).callbacks.append(start)
    before = next(env._eid)
    env.run()
    return [arrived[i] for i in range(len(flows))], next(env._eid) - before - 1


@pytest.mark.parametrize("p", [3, 4, 8, 16])
def test_an_all_to_all_step_starts_and_ends_with_one_event_each(p):
    # Every rank sends n bytes to every other at once on switch(p): each up and down
    # link carries p - 1 flows, so every flow drains at B / (p - 1) after the route's
    # latency 2 L: all end at 2 L + n (p - 1) / B.
    bandwidth, latency, n = 1e9, 1e-6, 10**6
    topo = sc.topology.switch(p, bandwidth=bandwidth, latency=latency)
    flows = [(i, j, n) for i in range(p) for j in range(p) if i != j]
    times, events = start_together(topo, flows)
    expected = 2 * latency + n * (p - 1) / bandwidth
    np.testing.assert_allclose(times, expected, rtol=1e-12)
    general, general_events = start_together(topo, flows, GeneralOnly)
    np.testing.assert_allclose(times, general, rtol=1e-12)
    # Whatever p: one start for every flow after the latency, one re-solve, one completion
    # for all; the fast path also reserved the first flow alone at its send (its
    # completion cancelled when the second flow shared its link).
    assert general_events == 3
    assert events == 4


@pytest.mark.parametrize("p", [2, 5, 64])
def test_a_ring_step_on_disjoint_links_ends_with_one_event(p):
    bandwidth, latency, n = 25e9, 0.5e-6, 3 * 10**6
    topo = sc.topology.switch(p, bandwidth=bandwidth, latency=latency)
    flows = [(i, (i + 1) % p, n) for i in range(p)]
    times, events = start_together(topo, flows)
    np.testing.assert_allclose(times, 2 * latency + n / bandwidth, rtol=1e-12)
    assert events == 1


def test_a_flow_leaving_a_shared_completion_keeps_the_others_on_time():
    # Flows 0->1 and 2->3 are reserved alone and share one completion instant; 4->1 then
    # shares 0->1's down link, so 0->1 leaves the batch for the general regime while 2->3
    # still ends at the batch's instant.
    topo = sc.topology.switch(5, bandwidth=1e9, latency=1e-6)
    flows = [(0.0, 0, 1, 10**6), (0.0, 2, 3, 10**6), (2e-4, 4, 1, 10**6)]
    fast = run_flows(topo, flows)
    assert fast[1] == pytest.approx(2e-6 + 1e-3, rel=1e-12)
    # Hand-worked: 0->1 drains alone from 2 us to 202 us (0.2 MB), then both share the
    # down link at 0.5 GB/s: 0->1's last 0.8 MB take 1.6 ms, to 1.802 ms; 4->1 has then
    # 0.2 MB left at full speed: 2.002 ms.
    assert fast[0] == pytest.approx(1.802e-3, rel=1e-9)
    assert fast[2] == pytest.approx(2.002e-3, rel=1e-9)
    assert fast == pytest.approx(run_flows(topo, flows, GeneralOnly), rel=1e-12)


@pytest.mark.parametrize("algorithm", ["direct", "pairwise"])
def test_all_to_all_simulations_match_the_general_path(monkeypatch, algorithm):
    topo = sc.topology.switch(12, bandwidth=50e9, latency=1e-6)
    rng = np.random.default_rng(7)
    data = [rng.standard_normal(12 * 1000).astype(np.float32) for _ in range(12)]
    fast = sc.simulate(topo, "all_to_all", algorithm=algorithm, data=data)
    monkeypatch.setattr(FlowNetwork, "fast", False)
    general = sc.simulate(topo, "all_to_all", algorithm=algorithm, data=data)
    assert fast.correct and general.correct
    np.testing.assert_allclose(fast.rank_times, general.rank_times, rtol=1e-12)
    assert fast.time == pytest.approx(general.time, rel=1e-12)
    np.testing.assert_array_equal(fast.bytes_sent, general.bytes_sent)
