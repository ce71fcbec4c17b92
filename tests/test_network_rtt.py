"""The "flow_rtt" network model (links shared in proportion to 1 / route latency) against
times worked out by hand, the "flow" model where every competing route has the same
latency, and an independent weighted max-min reference on random machines."""

from __future__ import annotations

import json
from unittest import mock

import machines
import numpy as np
import pytest
import simpy
from conftest import V_COLLECTIVES, compensated_sum, draw_case, register_probe, run_flows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simcoll as sc
import simcoll.network.general as general
from simcoll.cli import main
from simcoll.errors import InvalidInputError
from simcoll.network import NETWORKS, FlowRttNetwork
from simcoll.network.maxmin import fill
from simcoll.network.regimes import Flow
from simcoll.network.weighted import fill_arrays_weighted, fill_weighted

POSITIVE_LATENCIES = [1e-7, 5e-7, 1e-6, 3e-6]


class Vectorized(FlowRttNetwork):
    """flow_rtt with every re-solve over numpy arrays, however few flows."""

    vectorized_from = 0


class GeneralOnly(FlowRttNetwork):
    """flow_rtt with every flow in the general regime (no reservations either)."""

    fast = False


def positive_machine(kind: str, seed: int, **kwargs) -> sc.Topology:
    """A random machine of ``tests/machines.py`` whose links all have a latency > 0."""
    with mock.patch.object(machines, "LATENCIES", POSITIVE_LATENCIES):
        return machines.random_machine(kind, seed, **kwargs)


def vee(bandwidth=1e9, latency_a=1e-6, latency_b=3e-6) -> sc.Topology:
    """gpu0 and gpu1 reach gpu2 through switch0; only switch0->gpu2 (``bandwidth``, no
    latency) limits anything, so the route latencies are ``latency_a`` and ``latency_b``."""
    topo = sc.Topology("vee")
    a, b, d = topo.add_gpu(), topo.add_gpu(), topo.add_gpu()
    s = topo.add_switch()
    topo.add_link(a, s, bandwidth=1e12, latency=latency_a)
    topo.add_link(b, s, bandwidth=1e12, latency=latency_b)
    topo.add_link(s, d, bandwidth=bandwidth)
    return topo


# -- by hand ---------------------------------------------------------------------------
def test_two_flows_of_latencies_1_and_3_share_a_link_3_to_1():
    # gpu0->gpu2 (route latency 1 us, 0.75 MB) starts at 2 us, gpu1->gpu2 (3 us, 1 MB) at
    # 0: both drain from 3 us. Weights 1/1 and 1/3: the 1 GB/s link splits 0.75 : 0.25
    # GB/s. The short one ends after 0.75e6 / 0.75e9 = 1 ms, at 1.003 ms; the long one
    # has sent 0.25 MB by then and drains its 0.75 MB left alone at 1 GB/s: 0.75 ms more,
    # 1.753 ms. Equal shares ("flow") end the short one at 3 us + 1.5 ms instead.
    flows = [(2e-6, 0, 2, 750_000), (0.0, 1, 2, 1_000_000)]
    assert run_flows(vee(), flows, "flow_rtt") == pytest.approx([1.003e-3, 1.753e-3],
                                                                rel=1e-9)
    assert run_flows(vee(), flows, "flow") == pytest.approx([1.503e-3, 1.753e-3], rel=1e-9)


def test_three_flows_of_different_latencies_on_two_links():
    # Line g0 -(1 GB/s, 1 us)- g1 -(2 GB/s, 2 us)- g2. f1: g0->g1 (latency 1 us, weight 1),
    # f2: g0->g2 (3 us, weight 1/3), f3: g1->g2 (2 us, weight 1/2), started at 2, 0 and
    # 1 us so that all drain from 3 us. Link 01: 1 GB/s over weight 4/3 = 0.75 per unit;
    # link 12: 2 GB/s over 5/6 = 2.4 per unit. Link 01 fills first: f1 = 0.75, f2 = 0.25
    # GB/s; f3 takes the 1.75 GB/s link 12 has left. f1 (0.75 GB) ends 1 s in. Then
    # link 01 offers f2 1 GB/s over weight 1/3 = 3 per unit, link 12 2 GB/s over 5/6 =
    # 2.4 per unit: f2 = 0.8, f3 = 1.2 GB/s. f2 (0.65 GB) has 0.4 GB left: ends 1.5 s in.
    # f3 (4.35 GB) has sent 1.75 + 0.6 = 2.35 GB: its 2 GB left alone at 2 GB/s end
    # 2.5 s in.
    topo = sc.Topology("line")
    g0, g1, g2 = topo.add_gpu(), topo.add_gpu(), topo.add_gpu()
    topo.add_link(g0, g1, bandwidth=1e9, latency=1e-6)
    topo.add_link(g1, g2, bandwidth=2e9, latency=2e-6)
    flows = [(2e-6, 0, 1, 0.75e9), (0.0, 0, 2, 0.65e9), (1e-6, 1, 2, 4.35e9)]
    expected = [3e-6 + 1.0, 3e-6 + 1.5, 3e-6 + 2.5]
    for network in ("flow_rtt", GeneralOnly, Vectorized):
        assert run_flows(topo, flows, network) == pytest.approx(expected, rel=1e-9)


def test_a_flow_alone_takes_latency_plus_size_over_bottleneck():
    topo = vee(bandwidth=2e9)
    assert run_flows(topo, [(0.0, 1, 2, 10**6)], "flow_rtt") == pytest.approx(
        [3e-6 + 10**6 / 2e9], rel=1e-12)


register_probe("all_to_all", "_rtt_sends", plan=())(machines.planned_sends)


def arrivals(res: sc.Result) -> dict[int, float]:
    return {e.rank: e.end for e in res.trace if e.kind == "message"}


def test_a_link_that_slows_down_under_weighted_flows():
    # As in the 3:1 case, both drain from 3 us at 0.75 and 0.25 GB/s. At 3 us + 0.5 ms the
    # shared link drops to 0.5 GB/s: the short one has 0.375 MB left at 0.375 GB/s, 1 ms
    # more; the long one has sent 0.125 + 0.125 MB by then and its 0.75 MB left take
    # 1.5 ms alone at 0.5 GB/s: 3 us + 3 ms.
    t0 = 3e-6
    faults = sc.Faults(links=[sc.LinkFault("switch0", "gpu2", at=t0 + 0.5e-3, factor=0.5)])
    plan = ((2e-6, 0, 2, 750_000), (0.0, 1, 2, 1_000_000))
    res = sc.simulate(vee(), "all_to_all", algorithm="_rtt_sends", nbytes=3,
                      dtype=np.uint8, plan=plan, faults=faults, trace=True,
                      network="flow_rtt")
    got = arrivals(res)
    assert [got[0], got[1]] == pytest.approx([t0 + 1.5e-3, t0 + 3e-3], rel=1e-9)
    assert res.time == pytest.approx(t0 + 3e-3, rel=1e-9)


def test_a_failed_link_moves_a_flow_to_a_route_of_another_weight():
    # gpu0 reaches gpu2 through switch0 (1 us, then the shared 1 GB/s link) or, once
    # gpu0-switch0 fails, through switch1 (3 us) and the same link: its weight drops from
    # 1/1 to 1/3 per us. gpu1 (route latency 1 us) shares the link with it. Both start
    # draining at 1 us at 0.5 GB/s each (equal latencies); at 1 us + 1 ms gpu0's flow moves
    # (0.5 MB left of 1 MB) and waits out the 2 us its new route adds, while gpu1's drains
    # 2,000 B alone at 1 GB/s; then the link splits 1/3 : 1 per us, 0.25 : 0.75 GB/s;
    # gpu1's 498,000 B left end 0.664 ms later, when gpu0's flow has 500,000 - 166,000 =
    # 334,000 B left, drained alone at 1 GB/s in 0.334 ms: it arrives at 1 us + 2 ms.
    topo = sc.Topology("detour")
    a, b, d = topo.add_gpu(), topo.add_gpu(), topo.add_gpu()
    s0, s1, s2 = topo.add_switch(), topo.add_switch(), topo.add_switch()
    topo.add_link(a, s0, bandwidth=1e12, latency=0.5e-6)
    topo.add_link(a, s1, bandwidth=1e12, latency=1.5e-6)
    topo.add_link(s0, s2, bandwidth=1e12, latency=0.5e-6)
    topo.add_link(s1, s2, bandwidth=1e12, latency=1.5e-6)
    topo.add_link(b, s2, bandwidth=1e12, latency=1e-6)
    topo.add_link(s2, d, bandwidth=1e9)
    t0 = 1e-6
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "switch0", at=t0 + 1e-3, factor=0)])
    plan = ((0.0, 0, 2, 1_000_000), (0.0, 1, 2, 1_000_000))
    res = sc.simulate(topo, "all_to_all", algorithm="_rtt_sends", nbytes=3,
                      dtype=np.uint8, plan=plan, faults=faults, trace=True,
                      network="flow_rtt")
    got = arrivals(res)
    assert [got[0], got[1]] == pytest.approx([t0 + 2e-3, t0 + 1e-3 + 2e-6 + 0.664e-3],
                                             rel=1e-9)


# -- zero latency ----------------------------------------------------------------------
def test_a_route_of_zero_latency_is_refused_by_name():
    topo = sc.Topology("line")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    topo.add_link(g0, g1, bandwidth=1e9)
    with pytest.raises(InvalidInputError, match=r"route gpu0->gpu1 has latency 0 "
                       r"\(links \('gpu0', 'gpu1'\)\); give these links a latency > 0, "
                       r"or use network='flow'"):
        sc.simulate(topo, "all_to_all", algorithm="direct", nbytes=64, network="flow_rtt")


def test_a_route_too_short_to_weigh_is_refused_before_the_run():
    """1 / 2e-310 s overflows to infinity, and two flows of 1e-308 s links sum their
    weights past float's range: the pure solver looped for ever (0 x inf is NaN, so no
    link bound a flow) and the numpy one raised 'need at least one array to
    concatenate'."""
    for latency in (1e-310, 1e-308 / 2):
        topo = sc.Topology("tiny")
        hub = topo.add_switch()
        for _ in range(3):
            topo.add_link(topo.add_gpu(), hub, bandwidth=1e9, latency=latency)
        with pytest.raises(InvalidInputError, match=r"route gpu0->gpu1 has latency [0-9.e-]+ "
                                                    r"s, under 1e-300 s, whose weight could "
                                                    r"overflow .*give these links a latency "
                                                    r"of at least 1e-300 s"):
            sc.simulate(topo, "all_to_all", algorithm="direct", nbytes=3, dtype=np.uint8,
                        network="flow_rtt")
    topo = sc.Topology("short")
    hub = topo.add_switch()
    for _ in range(3):
        topo.add_link(topo.add_gpu(), hub, bandwidth=1e9, latency=1e-300)
    res = sc.simulate(topo, "all_to_all", algorithm="direct", nbytes=3000, dtype=np.uint8,
                      network="flow_rtt")
    # two 1000 B flows into each GPU's link share its 1 GB/s evenly: 2 us
    assert res.time == pytest.approx(2e-6, rel=1e-9)


@pytest.mark.parametrize("order", [(0, 1, 2), (1, 0, 2), (2, 1, 0)])
def test_a_chain_of_zero_latency_links_is_refused_before_the_run_whatever_their_order(order):
    """gpu0 - s1 - s2 - gpu1, every link of latency 0, added in the given order. Added
    from gpu0 on, the grouping of the ends that such links join cut s2 off (its path
    halving rebound a name before setting its parent): the model was built, and the
    route was refused only by the first send, mid-run, as the program's error."""
    topo = sc.Topology("chain")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    s1, s2 = topo.add_switch("s1"), topo.add_switch("s2")
    links = [(g0, s1), (s1, s2), (s2, g1)]
    for i in order:
        topo.add_link(*links[i], bandwidth=1e9, latency=0.0)

    def late_send(comm):
        if comm.rank == 0:
            yield comm.sleep(5e-3)
            yield comm.send(np.zeros(10, np.uint8), 1)
        else:
            yield comm.recv(0)

    with pytest.raises(InvalidInputError, match=r"^network 'flow_rtt' .* route gpu0->gpu1 "
                                                r"has latency 0"):
        sc.run_program(topo, late_send, network="flow_rtt")


def test_zero_latency_links_are_fine_on_routes_of_positive_latency():
    # switch0->gpu2 has latency 0 in vee(); every route also crosses a link of 1 or 3 us.
    assert run_flows(vee(), [(0.0, 0, 2, 10**6)], "flow_rtt") == pytest.approx(
        [1e-6 + 1e-3], rel=1e-12)
    # With gpu1-switch0 of zero latency too, gpu1->gpu2 is refused when the model is
    # built, before any message (even one that does not take that route) moves.
    with pytest.raises(InvalidInputError, match="route gpu1->gpu2 has latency 0"):
        run_flows(vee(latency_b=0.0), [(0.0, 0, 2, 10**6)], "flow_rtt")


def test_a_zero_latency_route_picked_by_via_is_refused_by_the_send_that_takes_it():
    """gpu0 - A - gpu1 (0 and 1 us) is the route the model checks when it is built;
    gpu0 - B - C - gpu1 (all 0 us) is known only when a send asks for it with via='B'.
    That send is refused, naming the route and its links, as the rank's error (the
    README says so); the run does not go on with an infinite weight."""
    topo = sc.Topology("via")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    a, b, c = topo.add_switch("A"), topo.add_switch("B"), topo.add_switch("C")
    topo.add_link(g0, a, bandwidth=1e9, latency=0.0)
    topo.add_link(a, g1, bandwidth=1e9, latency=1e-6)
    for u, v in ((g0, b), (b, c), (c, g1)):
        topo.add_link(u, v, bandwidth=1e9, latency=0.0)

    def program(via):
        def send_late(comm):
            if comm.rank == 0:
                yield comm.sleep(5e-3)
                yield comm.send(np.zeros(10, np.uint8), 1, via=via)
            else:
                yield comm.recv(0)
        return send_late

    # Without via, the message takes gpu0 - A - gpu1: 1 us, then 10 B at 1 GB/s.
    assert sc.run_program(topo, program(None), network="flow_rtt").time == pytest.approx(
        5e-3 + 1e-6 + 1e-8, rel=1e-12)
    with pytest.raises(sc.errors.AlgorithmError,
                       match=r"rank 0 raised InvalidInputError.* route gpu0->gpu1 has "
                             r"latency 0 \(links \('gpu0', 'B'\), \('B', 'C'\), "
                             r"\('C', 'gpu1'\)\)"):
        sc.run_program(topo, program("B"), network="flow_rtt")


# -- the weighted solvers ----------------------------------------------------------------
def weighted_reference(routes, capacity, weights):
    """Weighted progressive filling the slow way: raise a common level, each unfrozen
    flow's rate being its weight times the level, until a link fills; freeze its flows."""
    rates: dict[int, float] = {}
    left = {d: capacity[d] for links in routes for d in links}
    level = 0.0
    while len(rates) < len(routes):
        users = {d: [i for i, links in enumerate(routes) if d in links and i not in rates]
                 for d in left}
        step = min(left[d] / sum(weights[i] for i in u) for d, u in users.items() if u)
        level += step
        for d, u in users.items():
            left[d] -= step * sum(weights[i] for i in u)
        for d, u in users.items():
            if u and left[d] <= 1e-9 * capacity[d]:
                for i in u:
                    rates.setdefault(i, weights[i] * level)
    return [rates[i] for i in range(len(routes))]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), links=st.integers(1, 6), flows=st.integers(1, 12))
def test_weighted_solvers_match_the_slow_reference(data, links, flows):
    capacity = data.draw(st.lists(st.sampled_from([1.0, 2.5, 4.0, 10.0]), min_size=links,
                                  max_size=links), label="capacity")
    routes = [sorted(set(data.draw(st.lists(st.integers(0, links - 1), min_size=1,
                                            max_size=3), label="route")))
              for _ in range(flows)]
    weights = data.draw(st.lists(st.sampled_from([1 / 3, 0.5, 1.0, 2.0, 1e6, 1e7]),
                                 min_size=flows, max_size=flows), label="weights")
    expected = weighted_reference(routes, capacity, weights)
    # A rate can be what a link has left after much larger ones: it is then exact to
    # rounding relative to the link's capacity, not to itself.
    atol = 1e-12 * max(capacity)
    python = fill_weighted(routes, dict(enumerate(capacity)), weights)
    np.testing.assert_allclose(python, expected, rtol=1e-9, atol=atol)
    width = max(len(r) for r in routes)
    matrix = np.array([r + [links] * (width - len(r)) for r in routes], dtype=np.intp)
    arrays = fill_arrays_weighted(matrix, np.array([*capacity, np.inf]), np.array(weights))
    np.testing.assert_allclose(arrays, expected, rtol=1e-9, atol=atol)
    # Equal weights: plain max-min fairness.
    same = fill_weighted(routes, dict(enumerate(capacity)), [0.25] * flows)
    np.testing.assert_allclose(same, fill(routes, dict(enumerate(capacity))), rtol=1e-12)


# -- random machines -------------------------------------------------------------------
def weighted_arrivals(topo: sc.Topology, flows) -> list[float]:
    """Arrival times of ``(start, src, dst, nbytes)`` flows under flow_rtt, the slow way:
    the tests' fluid simulation (``machines.maxmin_arrivals``) with every draining flow at
    its weighted max-min fair rate (weight 1 / route latency, :func:`weighted_reference`)."""
    return machines.maxmin_arrivals(
        topo, flows, lambda routes, capacity: weighted_reference(
            [r.links for r in routes], capacity, [1 / r.latency for r in routes]))


flow = st.tuples(st.floats(0, 2e-6), st.integers(0, 8), st.integers(0, 8),
                 st.sampled_from([0, 1, 1000, 10**5, 10**6, 3 * 10**6]))


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(machines.KINDS), seed=st.integers(0, 10**6),
       flows=st.lists(flow, min_size=1, max_size=14))
def test_flow_rtt_matches_an_independent_weighted_reference(kind, seed, flows):
    topo = positive_machine(kind, seed)
    p = topo.nranks
    flows = [(t, s % p, d % p, n) for t, s, d, n in flows if s % p != d % p]
    if not flows:
        return
    expected = weighted_arrivals(topo, flows)
    for network in ("flow_rtt", GeneralOnly, Vectorized):
        np.testing.assert_allclose(run_flows(topo, flows, network), expected, rtol=1e-9,
                                   atol=1e-15)


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(machines.KINDS), seed=st.integers(0, 10**6),
       flows=st.lists(flow, min_size=1, max_size=14))
def test_equal_route_latencies_share_as_the_flow_model(kind, seed, flows):
    # Every link 1 us: routes of as many hops have equal latencies. Keep the flows of the
    # most common hop count.
    with mock.patch.object(machines, "LATENCIES", [1e-6]):
        topo = machines.random_machine(kind, seed)
    p = topo.nranks
    flows = [(t, s % p, d % p, n) for t, s, d, n in flows if s % p != d % p]
    if not flows:
        return
    hops = [len(topo.route(s, d).links) for _, s, d, _ in flows]
    common = max(set(hops), key=hops.count)
    flows = [f for f, h in zip(flows, hops) if h == common]
    np.testing.assert_allclose(run_flows(topo, flows, "flow_rtt"), run_flows(topo, flows),
                               rtol=1e-9, atol=1e-15)


PAIRS = [pair for pair in sc.list_algorithms()
         if sc.get_algorithm(*pair).fn.__module__.startswith("simcoll.")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(machines.KINDS), seed=st.integers(0, 10**6),
       pair=st.sampled_from(PAIRS), count=st.integers(0, 3000), hosts=st.integers(0, 2),
       data=st.data())
def test_time_is_the_last_activity_and_traffic_is_the_flow_models(kind, seed, pair, count,
                                                                   hosts, data):
    coll, alg = pair
    topo = positive_machine(kind, seed, hosts=hosts)
    kwargs = draw_case(data, pair, topo.nranks, hosts, servers_on_gpus=False)
    nbytes: object = 0 if coll == "barrier" else 4 * count
    if coll in V_COLLECTIVES:  # sizes per rank (per pair for all_to_allv), zeros included
        shape = (topo.nranks,) * (2 if coll == "all_to_allv" else 1)
        size = int(np.prod(shape))
        counts = data.draw(st.lists(st.integers(0, count), min_size=size, max_size=size),
                           label="counts")
        nbytes = 4 * np.asarray(counts).reshape(shape)
    rtt = sc.simulate(topo, coll, algorithm=alg, nbytes=nbytes, trace=True,
                      network="flow_rtt", **kwargs)
    flow = sc.simulate(topo, coll, algorithm=alg, nbytes=nbytes, **kwargs)
    assert rtt.time == machines.last_activity(rtt)
    assert rtt.network == "flow_rtt"
    assert_same_traffic(rtt, flow)


def assert_same_traffic(a: sc.Result, b: sc.Result) -> None:
    np.testing.assert_array_equal(a.bytes_sent, b.bytes_sent)
    np.testing.assert_array_equal(a.bytes_received, b.bytes_received)
    np.testing.assert_array_equal(a.host_bytes_sent, b.host_bytes_sent)
    np.testing.assert_array_equal(a.host_bytes_received, b.host_bytes_received)
    assert a.link_bytes == b.link_bytes
    assert a.messages == b.messages


# -- collectives and the command line ----------------------------------------------------
@pytest.mark.parametrize("coll, alg", [("all_reduce", "ring"), ("all_to_all", "pairwise")])
def test_collectives_on_a_fat_tree_move_the_flow_models_bytes(coll, alg):
    # 4 nodes of 4 GPUs, 2 leaves, 2:1 oversubscribed: intra-node routes (2 us) and
    # inter-node ones (7 us or more) compete for the node switches' links.
    topo = sc.topology.fat_tree(4, 4, leaf_radix=4, oversubscription=2)
    rng = np.random.default_rng(7)
    data = [rng.standard_normal(16 * 4096).astype(np.float32) for _ in range(16)]
    rtt = sc.simulate(topo, coll, algorithm=alg, data=data, network="flow_rtt")
    flow = sc.simulate(topo, coll, algorithm=alg, data=data)
    assert rtt.correct is True and flow.correct is True
    assert_same_traffic(rtt, flow)
    if coll == "all_to_all":
        # Short intra-node routes get more of the shared links: the times differ.
        assert rtt.time != pytest.approx(flow.time, rel=1e-6)


def test_flow_rtt_is_registered_and_the_cli_runs_it(capsys):
    assert NETWORKS["flow_rtt"] is FlowRttNetwork
    status = main(["run", "--topology", "cluster:2x2", "--collective", "all_to_all",
                   "--algorithm", "direct", "--size", "1M", "--network", "flow_rtt",
                   "--json"])
    record = json.loads(capsys.readouterr().out)
    res = sc.simulate(sc.topology.cluster(2, 2), "all_to_all", algorithm="direct",
                      nbytes=2**20, network="flow_rtt")
    assert status == 0 and record["network"] == "flow_rtt"
    assert record["time"] == res.time


def test_a_route_of_exactly_the_smallest_latency_is_weighed():
    """SMALLEST_LATENCY (1e-300 s) is the least route latency weighed, the bound the
    refusal asks for ('of at least 1e-300 s'): two GPUs on one 1 GB/s link of 1e-300 s
    each send 1000 B, one per direction: 1 us (mutant: <= refused this route)."""
    topo = sc.Topology("direct")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=1e9, latency=1e-300)
    res = sc.simulate(topo, "all_to_all", algorithm="direct", nbytes=2000, dtype=np.uint8,
                      network="flow_rtt")
    assert res.time == pytest.approx(1e-6, rel=1e-9)


def test_a_flows_weight_is_its_penalties_summed_left_to_right_whatever_sum_does(monkeypatch):
    """A flow over links of penalties 1e-6, 3e-7 and 1e-7 (flow_rtt's route latencies)
    weighs 1 / ((1e-6 + 3e-7) + 1e-7) = 1 / 1.3999999999999997e-06, the sum taken link
    by link. On Python 3.11 sum() adds left to right too, so the module is given a
    compensating sum() (3.12's behaviour): the weight must not move to 1 / 1.4e-06."""
    monkeypatch.setattr(general, "sum", compensated_sum, raising=False)
    regime = general.GeneralFlows(simpy.Environment(), [1.0, 1.0, 1.0], lambda event: None,
                                  penalty=[1e-6, 3e-7, 1e-7])
    flow = Flow((0, 1, 2), 100.0, 1.0, None, None, 0, 1)
    regime.add(flow, 100.0)
    summed = (1e-6 + 3e-7) + 1e-7
    assert summed == 1.3999999999999997e-06
    assert 1.0 / summed != 1.0 / 1.4e-06
    assert regime.weight[flow.slot] == 1.0 / summed


def test_a_multicast_tree_of_zero_latency_is_named_as_the_multicast_s():
    """Under routing="ecmp" a multicast's tree leg can cross only links of no latency
    where the unicast route between the same GPUs (which the build checks) has some: the
    send refuses it, and named it "the route gpu1->gpu0", which t.route(1, 0) is not."""
    topo = sc.Topology("e", routing="ecmp")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    l0, l1, l2 = topo.add_switch(), topo.add_switch(), topo.add_switch()
    s3, s4 = topo.add_switch(), topo.add_switch()
    for u, v, latency in [(l0, s3, 1e-6), (l0, s4, 0.0), (l1, s3, 0.0), (l1, s4, 0.0),
                          (l2, s3, 0.0), (l2, s4, 0.0), (g0, l0, 0.0), (g1, l1, 0.0)]:
        topo.add_link(u, v, bandwidth=1e9, latency=latency)
    assert topo.route(1, 0).latency == 1e-6 and topo.route(1, 0, multicast=True).latency == 0

    def program(comm):
        if comm.rank == 1:
            yield comm.multicast(np.zeros(1000, dtype=np.uint8), [0])
        else:
            yield comm.recv(1)

    with pytest.raises(sc.AlgorithmError, match=r"rank 1 raised InvalidInputError in "
                                                r"program: network 'flow_rtt' weighs each "
                                                r"flow by 1 / its route's latency, and the "
                                                r"multicast tree gpu1->gpu0 has latency 0"):
        sc.run_program(topo, program, network="flow_rtt")
