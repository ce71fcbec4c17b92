"""The flow model's shortcuts (reserved lone flows, single-bottleneck groups, deferred
re-solving) against its general path, on cases that do and do not trigger them."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import run_flows

import simcoll as sc
from simcoll.network.flow import FlowNetwork


class GeneralFlowNetwork(FlowNetwork):
    fast = False


@pytest.fixture
def calls(monkeypatch):
    """Count calls of the shortcut entry points."""
    counts = {"unreserve": 0, "join": 0, "dissolve": 0}
    for name in ("_unreserve", "_join", "_dissolve"):
        original = getattr(FlowNetwork, name)

        def wrapper(self, *args, _original=original, _name=name[1:]):
            counts[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(FlowNetwork, name, wrapper)
    return counts


def compare(topo, flows):
    fast = run_flows(topo, flows)
    general = run_flows(topo, flows, GeneralFlowNetwork)
    assert fast == pytest.approx(general, rel=1e-9, abs=1e-15)
    return fast


def test_lone_flows_take_one_event_and_match(calls):
    topo = sc.topology.switch(4, bandwidth=1e9, latency=1e-6)
    times = compare(topo, [(0.0, 0, 1, 1e6), (0.0, 2, 3, 2e6), (5e-3, 0, 1, 1e6)])
    assert times == pytest.approx([2e-6 + 1e-3, 2e-6 + 2e-3, 5e-3 + 2e-6 + 1e-3], rel=1e-12)
    assert calls["unreserve"] == 0 and calls["join"] == 0


@pytest.mark.parametrize("second_start", [0.0, 1e-6, 1.5e-6, 2e-6, 3e-6, 5e-4, 2e-3])
def test_a_reservation_broken_before_or_after_it_drains(calls, second_start):
    # Flow a is reserved; b shares a's sending link and starts draining either before a
    # starts draining (a still in its latency phase) or while a drains, or after a ended.
    topo = sc.topology.switch(3, bandwidth=1e9, latency=1e-6)
    compare(topo, [(0.0, 0, 1, 1e6), (second_start, 0, 2, 5e5)])
    if second_start < 1e-3:
        assert calls["unreserve"] == 1


@pytest.mark.parametrize("k", [2, 3, 10, 50])
def test_incast_forms_one_group_and_matches(calls, k):
    # Staggered starts and sizes: every arrival and departure changes everyone's rate.
    topo = sc.topology.switch(k + 1, bandwidth=10e9, latency=0.5e-6)
    rng = random.Random(k)
    flows = [(rng.uniform(0, 1e-4), src, k, rng.randint(1, 10) * 1e6) for src in range(k)]
    compare(topo, flows)
    assert calls["join"] >= 1


def test_incast_on_a_slower_server_link_groups_and_matches(calls):
    topo = sc.topology.switch(6, bandwidth=10e9, latency=1e-6, servers=1,
                              server_bandwidth=4e9)
    flows = [(i * 1e-5, i, 6, (i + 1) * 1e5) for i in range(6)]
    compare(topo, flows)
    assert calls["join"] == 5


def test_a_group_is_dissolved_by_a_flow_that_cannot_join(calls):
    # Incast to rank 4, then 0 -> 5 shares rank 0's sending link but not the server link.
    topo = sc.topology.switch(6, bandwidth=1e9, latency=1e-6)
    flows = [(0.0, i, 4, 1e6) for i in range(4)] + [(3e-4, 0, 5, 2e6), (5e-4, 1, 4, 1e5)]
    compare(topo, flows)
    assert calls["dissolve"] >= 1


def test_group_needs_its_link_to_be_every_members_bottleneck():
    # Rank 0's uplink is slower than the server link: 0 -> 3 is bottlenecked elsewhere.
    topo = sc.Topology("mixed")
    gpus = [topo.add_gpu() for _ in range(4)]
    sw = topo.add_switch()
    for i, g in enumerate(gpus):
        topo.add_link(g, sw, bandwidth=0.5e9 if i == 0 else 1e9, latency=1e-6)
    compare(topo, [(0.0, 0, 3, 1e6), (0.0, 1, 3, 1e6), (1e-4, 2, 3, 1e6)])


@pytest.mark.parametrize("seed", range(6))
def test_random_traffic_on_a_cluster_matches(seed):
    rng = random.Random(seed)
    topo = sc.topology.cluster(3, 4, intra_bandwidth=100e9, intra_latency=1e-6,
                               inter_bandwidth=25e9, inter_latency=2e-6)
    flows = []
    for _ in range(60):
        src, dst = rng.sample(range(12), 2)
        flows.append((rng.choice([0.0, rng.uniform(0, 1e-4)]), src, dst,
                      rng.choice([0, rng.randint(1, 10**7)])))
    compare(topo, flows)


@pytest.mark.parametrize("collective,algorithm,p,params", [
    ("all_reduce", "ring", 8, {}),
    ("all_reduce", "ring", 5, {}),
    ("all_reduce", "parameter_server", 9, {}),
    ("all_reduce", "naive", 6, {}),
    ("all_to_all", "direct", 7, {}),
])
@pytest.mark.parametrize("count", [1000, 1003])
def test_simulations_match_the_general_path(monkeypatch, collective, algorithm, p, params,
                                            count):
    topo = sc.topology.switch(p, bandwidth=100e9, latency=0.5e-6, reduce_bandwidth=400e9)
    rng = np.random.default_rng(p)
    data = [rng.standard_normal(count).astype(np.float32) for _ in range(p)]
    fast = sc.simulate(topo, collective, algorithm=algorithm, data=data, **params)
    monkeypatch.setattr(FlowNetwork, "fast", False)
    general = sc.simulate(topo, collective, algorithm=algorithm, data=data, **params)
    assert fast.correct and general.correct
    assert fast.time == pytest.approx(general.time, rel=1e-9)
    assert np.allclose(fast.rank_times, general.rank_times, rtol=1e-9)
    assert (fast.bytes_sent == general.bytes_sent).all()
    assert fast.messages == general.messages
