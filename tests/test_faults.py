"""Faults and stragglers: links that fail or slow down mid-run, slow and late GPUs, and
per-message jitter, checked against hand-worked times and against equivalent runs built
without them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, make_data, reference_network, register_probe
from machines import planned_sends
from reference import assert_outputs_match

import simcoll as sc
from simcoll.buffers import VirtualBuffer
from simcoll.comm import Comm

register_probe("all_to_all", "_sends", plan=())(planned_sends)


def line(n=2, bandwidth=1e9):
    topo = sc.Topology("line")
    gpus = [topo.add_gpu() for _ in range(n)]
    for a, b in zip(gpus, gpus[1:]):
        topo.add_link(a, b, bandwidth=bandwidth)
    return topo


def run(topo, plan, faults, **kwargs):
    return sc.simulate(topo, "all_to_all", algorithm="_sends", nbytes=topo.nranks,
                       dtype=np.uint8, plan=tuple(plan), faults=faults, trace=True, **kwargs)


def test_a_link_that_slows_down_mid_message():
    # 1 GB at 1 GB/s; at 0.5 s the link drops to 0.5 GB/s: 0.5 GB left take 1 s more.
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.5, factor=0.5)])
    res = run(line(), [(0, 0, 1, 10**9)], faults)
    assert res.time == pytest.approx(1.5, rel=1e-12)


def test_a_link_that_slows_down_under_an_incast_group():
    # Three 1 GB flows into gpu3 through one switch share its 3 GB/s link (1 GB/s each,
    # a processor-sharing group). At 0.5 s that link drops to 1 GB/s: the 0.5 GB each
    # has left drains at 1/3 GB/s, 1.5 s more.
    topo = sc.Topology("star")
    sw = topo.add_switch()
    for i in range(4):
        topo.add_link(topo.add_gpu(), sw, bandwidth=3e9 if i == 3 else 10e9)
    faults = sc.Faults(links=[sc.LinkFault("gpu3", "switch0", at=0.5, factor=1 / 3)])
    res = run(topo, [(0, s, 3, 10**9) for s in range(3)], faults)
    assert res.time == pytest.approx(2.0, rel=1e-12)
    np.testing.assert_allclose(res.rank_times, [2.0, 2.0, 2.0, 2.0], rtol=1e-12)


def four_gpu_cycle():
    topo = sc.Topology("cycle")
    gpus = [topo.add_gpu() for _ in range(4)]
    for i in range(4):
        topo.add_link(gpus[i], gpus[(i + 1) % 4], bandwidth=1e9)
    return topo


def test_a_failed_link_moves_its_flow_around_the_ring():
    # gpu0 -> gpu1 (1 GB at 1 GB/s) over their direct link, which fails at 0.25 s: the
    # 0.75 GB left go 0 -> 3 -> 2 -> 1, still at 1 GB/s: arrival at 1.0 s.
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.25)])
    res = run(four_gpu_cycle(), [(0, 0, 1, 10**9)], faults)
    assert res.time == pytest.approx(1.0, rel=1e-12)
    assert res.link_bytes[("gpu0", "gpu1")] == 25 * 10**7
    for hop in [("gpu0", "gpu3"), ("gpu3", "gpu2"), ("gpu2", "gpu1")]:
        assert res.link_bytes[hop] == 75 * 10**7, hop
    assert res.bytes_sent[0] == 10**9 and res.bytes_received[1] == 10**9


def test_messages_sent_after_a_failure_take_the_route_around_it():
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.1)])
    res = run(four_gpu_cycle(), [(0.2, 0, 1, 10**9)], faults)
    # Three hops, no latency, 1 GB/s: 1 s from its start at 0.2 s.
    assert res.time == pytest.approx(1.2, rel=1e-12)
    assert res.link_bytes[("gpu0", "gpu1")] == 0


def test_a_failed_link_with_no_way_around_ends_the_run_naming_it():
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.5)])
    with pytest.raises(sc.LinkFailureError, match=r"link \('gpu0', 'gpu1'\) failed at "
                                                  r"t=0.5 s .* gpu0->gpu1 \(500000000 bytes "
                                                  r"left\)") as info:
        run(line(), [(0, 0, 1, 10**9)], faults)
    assert info.value.link == ("gpu0", "gpu1") and info.value.lost == [(0, 1)]


@pytest.mark.parametrize("at", [1.0, float(np.nextafter(1.0, 0.0))])
def test_a_link_failing_as_the_last_byte_crosses_it_loses_nothing(at):
    """10^9 bytes at 1 GB/s over a line with no way around its one link: the last byte
    crosses at 1 s. A failure at that instant (or one ulp before, 2e-7 bytes left) ended
    the run with a LinkFailureError for "0 bytes left"; the message arrives at 1 s, and
    a failure 1 ns before still loses its last byte."""
    res = run(line(), [(0, 0, 1, 10**9)], sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=at)]))
    assert res.time == 1.0 and res.link_bytes[("gpu0", "gpu1")] == 10**9
    with pytest.raises(sc.LinkFailureError, match=r"gpu0->gpu1 \(1 bytes left\)"):
        run(line(), [(0, 0, 1, 10**9)], sc.Faults(links=[sc.LinkFault("gpu0", "gpu1",
                                                                     at=1.0 - 1e-9)]))


@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
def test_an_empty_message_in_its_latency_phase_is_stopped_by_a_failure_like_any(network):
    """Two GPUs, one link of 10 us, failing at 5 us: a barrier's empty messages are on
    it, with no way around. They arrived at 10 us as if nothing had failed; they end the
    run naming the link, as a 1-byte message does. On a triangle the third GPU is the
    way around, and an empty message arrives as if sent that way: at 20 us, 10 us after
    the direct link's 10 us."""
    pair = sc.Topology("pair")
    a, b = pair.add_gpu(), pair.add_gpu()
    pair.add_link(a, b, bandwidth=1e9, latency=10e-6)
    faults = sc.Faults(links=[sc.LinkFault(a, b, at=5e-6)])
    with pytest.raises(sc.LinkFailureError, match=r"link \('gpu0', 'gpu1'\) failed at t=5e-06 "
                       r"s .* 2 message\(s\) in flight: gpu0->gpu1 \(0 bytes left\), "
                       r"gpu1->gpu0 \(0 bytes left\)") as info:
        sc.simulate(pair, "barrier", algorithm="dissemination", faults=faults, network=network)
    assert info.value.lost == [(0, 1), (1, 0)]
    triangle = sc.Topology("triangle")
    x, y, z = (triangle.add_gpu() for _ in range(3))
    for u, v in ((x, y), (y, z), (z, x)):
        triangle.add_link(u, v, bandwidth=1e9, latency=10e-6)
    res = sc.run_program(triangle, _empty_message_0_to_1, network=network,
                         faults=sc.Faults(links=[sc.LinkFault(x, y, at=5e-6)]))
    assert res.time == pytest.approx(20e-6, rel=1e-12)


def _empty_message_0_to_1(comm):
    if comm.rank == 0:
        yield comm.send(np.zeros(0, np.uint8), 1)
    elif comm.rank == 1:
        yield comm.recv(0)


def test_a_message_sent_after_a_failure_with_no_way_around_ends_the_run_naming_it():
    """A line gpu0 - gpu1 - gpu2 whose link (gpu1, gpu2) fails at 0.1 s, before gpu0 sends
    to gpu2 at 0.2 s: the message has no route. It ended the run with an AlgorithmError
    wrapping the topology's "no route" (found on random machines); it is a link failure
    like one under a message in flight, and says so."""
    faults = sc.Faults(links=[sc.LinkFault("gpu1", "gpu2", at=0.1)])
    with pytest.raises(sc.LinkFailureError, match=r"no route from 'gpu0' to 'gpu2' around "
                       r"the failed links for a message sent at t=0.2 s: link \('gpu1', "
                       r"'gpu2'\) failed") as info:
        run(line(3), [(0.2, 0, 2, 10)], faults)
    assert info.value.link == ("gpu1", "gpu2") and info.value.lost == [(0, 2)]


def test_a_failed_link_comes_back_for_messages_sent_after_it_does():
    # Failed from 0, back at full bandwidth at 0.1 s: a 1 GB message sent at 0.2 s takes
    # the direct link again, 1 s at 1 GB/s.
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.0),
                              sc.LinkFault("gpu0", "gpu1", at=0.1, factor=1.0)])
    res = run(four_gpu_cycle(), [(0.2, 0, 1, 10**9)], faults)
    assert res.time == pytest.approx(1.2, rel=1e-12)
    assert res.link_bytes[("gpu0", "gpu1")] == 10**9 and res.link_bytes[("gpu0", "gpu3")] == 0


def test_faults_of_one_link_at_one_instant_hold_in_the_order_given():
    # Failed, then half bandwidth, both at 0: the half bandwidth holds (2 s for 1 GB);
    # given the other way round, the failure holds (1 s around the cycle).
    fail, half = sc.LinkFault("gpu0", "gpu1", at=0.0), sc.LinkFault("gpu0", "gpu1", at=0.0,
                                                                  factor=0.5)
    last_half = run(four_gpu_cycle(), [(0, 0, 1, 10**9)], sc.Faults(links=[fail, half]))
    assert last_half.time == pytest.approx(2.0, rel=1e-12)
    assert last_half.link_bytes[("gpu0", "gpu1")] == 10**9
    last_fail = run(four_gpu_cycle(), [(0, 0, 1, 10**9)], sc.Faults(links=[half, fail]))
    assert last_fail.time == pytest.approx(1.0, rel=1e-12)
    assert last_fail.link_bytes[("gpu0", "gpu1")] == 0


def test_a_link_failed_at_zero_is_down_for_the_first_messages():
    # A ring of 1 us links: gpu0 -> gpu1 at t = 0 goes round the other three links and
    # pays their 3 us of latency, as one sent 1 ns later does.
    topo = sc.topology.ring(4, bandwidth=1e9, latency=1e-6)
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.0)])
    res = run(topo, [(0, 0, 1, 10**6)], faults)
    assert res.time == pytest.approx(3e-6 + 1e-3, rel=1e-12)
    assert res.link_bytes[("gpu0", "gpu1")] == 0


@pytest.mark.parametrize("at", [1.0, 2e6])
def test_a_fault_after_the_run_leaves_its_time_and_its_errors_alone(at):
    # A ring all_reduce of 1 MB on 4 GPUs at 1 GB/s and 1 us a hop (two hops through the
    # switch): 6 steps of 2 us + 250 kB / 1 GB/s = 1.512 ms; a slow-down at 1 s (or past
    # the time limit) comes after it and changes nothing.
    topo = sc.topology.switch(4, bandwidth=1e9, latency=1e-6)
    slow_later = sc.Faults(links=[sc.LinkFault("gpu0", "switch", at=at, factor=0.5)])
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=10**6, faults=slow_later)
    assert res.time == pytest.approx(6 * (2e-6 + 250e-6), rel=1e-12)
    assert res.busbw == pytest.approx(1.5 * 10**6 / res.time, rel=1e-12)

    def deadlocked(comm):
        yield comm.recv((comm.rank + 1) % comm.size)
    with pytest.raises(sc.DeadlockError, match=r"at t=0 s"):
        sc.run_program(topo, deadlocked, faults=slow_later)


def test_collectives_stay_correct_when_links_fail_and_slow_down():
    # A leaf-spine fabric with two spines: the failure of one leaf-spine link leaves a
    # way around; every output still matches the reference.
    topo = sc.Topology("leaf-spine")
    leaves = [topo.add_switch(f"leaf{i}") for i in range(2)]
    spines = [topo.add_switch(f"spine{i}") for i in range(2)]
    for leaf in leaves:
        for spine in spines:
            topo.add_link(leaf, spine, bandwidth=2e9, latency=1e-6)
    for i in range(6):
        topo.add_link(topo.add_gpu(), leaves[i % 2], bandwidth=4e9, latency=1e-6)
    inputs = make_data(6, 4000, "float64")
    for when in [0.0, 1e-6, 5e-6, 2e-5]:
        faults = sc.Faults(links=[sc.LinkFault("leaf0", "spine0", at=when),
                                  sc.LinkFault("leaf1", "spine1", at=when / 2, factor=0.3)])
        res = sc.simulate(topo, "all_reduce", algorithm="ring", data=inputs, faults=faults,
                          trace=True)
        assert res.correct
        assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
        ends = [e.end for e in res.trace if e.kind == "message"]
        assert res.time == max([*ends, *res.rank_times])
        healthy = sc.simulate(topo, "all_reduce", algorithm="ring", data=inputs)
        assert res.time > healthy.time
        assert res.link_bytes[("leaf0", "spine0")] < healthy.link_bytes[("leaf0", "spine0")]


@pytest.mark.parametrize("factor", [1.5, 4.0])
def test_a_slow_gpu_is_a_gpu_with_slower_reductions_and_compute(factor):
    p, slow = 5, 2
    faults = sc.Faults(slow={slow: factor})
    # The same machine built with that GPU's reduction bandwidth divided by the factor.
    topo = sc.Topology("built slow")
    sw = topo.add_switch()
    for r in range(p):
        bw = 1 / GAMMA / (factor if r == slow else 1)
        topo.add_link(topo.add_gpu(reduce_bandwidth=bw), sw, bandwidth=1 / BETA,
                      latency=ALPHA / 2)
    for alg in ["ring", "tree", "rabenseifner"]:
        a = sc.simulate(reference_network(p), "all_reduce", algorithm=alg, nbytes=4 * 8000,
                        faults=faults)
        b = sc.simulate(topo, "all_reduce", algorithm=alg, nbytes=4 * 8000)
        assert a.time == pytest.approx(b.time, rel=1e-12), alg
        np.testing.assert_allclose(a.rank_times, b.rank_times, rtol=1e-12)
    # Compute too: DDP's backward pass on the slow GPU takes factor times as long.
    step = sc.simulate(reference_network(p), "all_reduce", algorithm="bucketed",
                       nbytes=4 * 8000, compute=1e-3, faults=faults)
    assert step.rank_times[slow] >= factor * 1e-3


@register_probe("all_reduce", "_ring_after_compute", rank=0, delay=0.0)
def ring_after_compute(comm: Comm, x, *, op, rank, delay):
    """The ring, with rank ``rank`` first busy for ``delay`` seconds."""
    if comm.rank == rank:
        yield comm.compute(delay)
    return (yield from sc.get_algorithm("all_reduce", "ring").program(comm, x, op=op))


@pytest.mark.parametrize("late", [1e-7, 3e-6, 1e-4])
def test_a_late_gpu_is_a_gpu_that_starts_with_idle_time(late):
    p = 6
    a = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=4 * 6000,
                    faults=sc.Faults(late={4: late}))
    b = sc.simulate(reference_network(p), "all_reduce", algorithm="_ring_after_compute",
                    nbytes=4 * 6000, rank=4, delay=late)
    assert a.time == pytest.approx(b.time, rel=1e-12)
    np.testing.assert_allclose(a.rank_times, b.rank_times, rtol=1e-12)
    assert a.time >= late + sc.simulate(reference_network(p), "all_reduce", algorithm="ring",
                                        nbytes=4 * 6000).time * 0.5


def test_jitter_is_a_seeded_uniform_extra_latency_per_message():
    topo = sc.topology.switch(2, bandwidth=1e9, latency=1e-6)
    base = run(topo, [(0, 0, 1, 1000)], None).time
    for seed in range(5):
        res = run(topo, [(0, 0, 1, 1000)], sc.Faults(jitter=1e-6, seed=seed))
        draw = np.random.default_rng(seed).uniform(0.0, 1e-6)
        assert res.time == pytest.approx(base + draw, rel=1e-12)
    a = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                    faults=sc.Faults(jitter=2e-6, seed=7))
    b = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                    faults=sc.Faults(jitter=2e-6, seed=7))
    c = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                    faults=sc.Faults(jitter=2e-6, seed=8))
    assert a.time == b.time != c.time


@pytest.mark.parametrize("faults, match", [
    (sc.Faults(links=[sc.LinkFault("gpu0", "gpu3", at=0)]),
     r"no link between 'gpu0' and 'gpu3'; 'gpu0' links to 'switch'$"),
    (sc.Faults(links=[sc.LinkFault("gpu0", "switch0", at=0)]),
     r"unknown device 'switch0' in link \('gpu0', 'switch0'\); known devices: 'switch', "
     r"'gpu0', 'gpu1', 'gpu2', 'gpu3'$"),
    (sc.Faults(links=[sc.LinkFault(["gpu0"], "switch", at=0)]),
     r"link end \['gpu0'\] is not a device name; give a name such as 'switch'"),
    (sc.Faults(slow={7: 2.0}), r"faults.slow rank = 7 is not accepted; use an integer >= 0 "
                               r"and <= 3$"),
    (sc.Faults(late={4: 0.0}), r"faults.late rank = 4 is not accepted"),
    ("slow", r"faults='slow' is not accepted"),
    # A factor that overflowed the link's rate to infinity delivered the rest at once; one
    # that left it at 5e-315 bytes/s overflowed the finish time into a "deadlock".
    (sc.Faults(links=[sc.LinkFault("gpu0", "switch", at=0, factor=1e300)]),
     r"LinkFault factor=1e\+300 leaves link \('gpu0', 'switch'\) at inf bytes/s; give 0 \(the "
     r"link fails\) or a factor that leaves it a finite rate of at least 1 byte/s each way"),
    (sc.Faults(links=[sc.LinkFault("gpu0", "switch", at=0, factor=5e-324)]),
     r"factor=5e-324 leaves link \('gpu0', 'switch'\) at 4.94066e-313 bytes/s"),
    (sc.Faults(links=[sc.LinkFault("gpu0", "switch", at=0, factor=0.5e-11)]),
     r"factor=5e-12 leaves link \('gpu0', 'switch'\) at 0.5 bytes/s"),
])
def test_faults_that_do_not_fit_the_machine_are_refused_before_the_run(faults, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=64,
                    faults=faults)


@pytest.mark.parametrize("make, match", [
    (lambda: sc.LinkFault("gpu0", "switch", at=-1), r"^LinkFault at = -1 is not accepted; "
                                                    r"use a number >= 0, finite \(seconds\)$"),
    (lambda: sc.LinkFault("gpu0", "switch", at=0, factor=-0.5),
     r"^LinkFault factor = -0.5 is not accepted; use a number >= 0, finite \(0 fails"),
    (lambda: sc.LinkFault("gpu0", "switch", at=float("inf")), r"LinkFault at = inf"),
    (lambda: sc.LinkFault("gpu0", "switch", at="1ms"), r"LinkFault at = '1ms'"),
    (lambda: sc.Faults(slow={-1: 2.0}), r"^faults.slow rank = -1 is not accepted; use an "
                                        r"integer >= 0$"),
    (lambda: sc.Faults(slow={"0": 2.0}), r"^faults.slow rank = '0' is not accepted"),
    (lambda: sc.Faults(slow={1: 0.0}), r"faults.slow\[1\] = 0.0 is not accepted"),
    (lambda: sc.Faults(late={0: -1e-6}), r"faults.late\[0\] = -1e-06 is not accepted"),
    (lambda: sc.Faults(late={1.0: 1e-6}), r"faults.late rank = 1.0 is not accepted"),
    (lambda: sc.Faults(jitter=float("nan")), r"faults.jitter = nan is not accepted"),
    (lambda: sc.Faults(seed=-3), r"^faults.seed = -3 is not accepted; use an integer >= 0$"),
    (lambda: sc.Faults(links=sc.LinkFault("gpu0", "switch", at=0)),
     r"faults.links=LinkFault\(.*\) is not accepted; give a list of LinkFault"),
    (lambda: sc.Faults(links=None), r"faults.links=None is not accepted"),
    (lambda: sc.Faults(links=[("gpu0", "switch", 0)]),
     r"^faults.links holds \('gpu0', 'switch', 0\); give LinkFault\(u, v, at=\.\.\., "),
    (lambda: sc.Faults(slow=[2.0, 2.0]),
     r"faults.slow=\[2.0, 2.0\] is not accepted; give a dict \{rank: factor\}$"),
    (lambda: sc.Faults(late=None), r"faults.late=None is not accepted; give a dict "
                                   r"\{rank: seconds\}$"),
])
def test_faults_are_checked_as_they_are_made(make, match):
    # Whatever does not depend on the machine is refused at once, not at the first run.
    with pytest.raises(sc.InvalidInputError, match=match):
        make()


def test_faults_changed_after_they_were_made_are_checked_again_by_the_run():
    faults = sc.Faults(slow={1: 2.0})
    faults.slow[1] = -2.0
    with pytest.raises(sc.InvalidInputError, match=r"faults.slow\[1\] = -2.0 is not"):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=64,
                    faults=faults)
    # a link list grown by something else than a LinkFault failed with "faults.links:
    # 'tuple' object has no attribute 'u'"
    faults = sc.Faults(links=[])
    faults.links.append(("gpu0", "switch", 0))
    with pytest.raises(sc.InvalidInputError,
                       match=r"^faults.links holds \('gpu0', 'switch', 0\); give LinkFault\("):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=64,
                    faults=faults)


def test_flow_rtt_refuses_a_zero_latency_way_around_a_planned_failure_before_the_run():
    """gpu0 - gpu1 directly (1 us), and through a switch on links of latency 0: the healthy
    route weighs 1 / 1 us, but once the direct link fails the way around has latency 0,
    an infinite weight. The run raised that halfway (or, failing at 0, as the program's
    error); it is refused before the run, naming the failure."""
    topo, a, b, _ = _zero_detour()
    for at in (0.0, 5e-4):
        faults = sc.Faults(links=[sc.LinkFault(a, b, at=at)])
        with pytest.raises(sc.InvalidInputError,
                           match=rf"^once link\(s\) \('gpu0', 'gpu1'\) have failed at t={at:g} "
                                 r"s \(planned, whether or not the run lasts that long\), "
                                 r"network 'flow_rtt' .* route gpu0->gpu1 has latency 0 "
                                 r"\(links \('gpu0', 'switch0'\), \('switch0', 'gpu1'\)\)"):
            sc.run_program(topo, _empty_message_0_to_1, network="flow_rtt", faults=faults)
    # flow weighs no route: the same failure runs
    assert sc.run_program(topo, _empty_message_0_to_1, network="flow",
                          faults=sc.Faults(links=[sc.LinkFault(a, b, at=0.0)])).time == 0.0


def test_a_result_says_what_faults_it_ran_under_and_the_model_check_refuses_it():
    """A faulted run's Result and its to_dict() read as a healthy one's, and
    assert_matches_model then failed on a 50% time difference without a word of why."""
    from simcoll.testing import alpha_beta_network, assert_matches_model

    topo = alpha_beta_network(4, alpha=1e-6, beta=1e-9)
    faults = sc.Faults(links=[sc.LinkFault("switch", "gpu2", at=2e-6, factor=0.25)],
                       slow={3: 2.0, 1: 1.5}, late={0: 1e-6}, jitter=1e-7, seed=4)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096, faults=faults)
    expected = {"links": [{"link": ["gpu2", "switch"], "at": 2e-6, "factor": 0.25}],
                "slow": {"1": 1.5, "3": 2.0}, "late": {"0": 1e-6}, "jitter": 1e-7,
                "seed": 4}
    assert res.faults == expected
    assert json.loads(json.dumps(res.to_dict()))["faults"] == expected
    with pytest.raises(sc.InvalidInputError, match=r"^this run had faults \(.*'slow'.*\), "
                                                   r"which the cost model does not describe"):
        assert_matches_model(res, alpha=1e-6, beta=1e-9)
    # a slow-down of 1 and a lateness of 0 change nothing: a sweep's baseline of
    # slow={r: f} at f = 1 was refused as a run with faults
    for healthy in (None, sc.Faults(), sc.Faults(slow={0: 1.0}, late={2: 0.0})):
        run = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096, faults=healthy)
        assert run.faults is None and "faults" not in run.to_dict()
        assert_matches_model(run, alpha=1e-6, beta=1e-9)
    partly = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                         faults=sc.Faults(slow={0: 1.0, 1: 2.0}, late={2: 0.0}))
    assert partly.faults == {"slow": {"1": 2.0}}


def test_a_link_set_to_its_own_rate_is_no_fault_and_a_restore_is():
    """LinkFault(factor=1) on a link at its nominal rate changes nothing: it was recorded
    as a fault (refused by assert_matches_model, a line of its own in plots, refused by
    the analytical model), where slow=1 and late=0 are left out. A restore after a
    slow-down stays; a second one, with the link already back, does not."""
    from simcoll.testing import alpha_beta_network, assert_matches_model

    topo = alpha_beta_network(4, alpha=1e-6, beta=1e-9)
    healthy = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096)
    for network in ("flow", "flow_rtt", "analytical"):
        same = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                           network=network, faults=sc.Faults(links=[
                               sc.LinkFault("gpu0", "switch", at=at, factor=1.0)
                               for at in (0.0, 1e-6, 10.0)]))
        assert same.faults is None and "faults" not in same.to_dict()
        assert (same.time, same.link_bytes) == (healthy.time, healthy.link_bytes)
        if network != "analytical":   # which the model check refuses, faults or not
            assert_matches_model(same, alpha=1e-6, beta=1e-9)
    restored = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096, faults=sc.Faults(
        links=[sc.LinkFault("switch", "gpu1", at=3e-6, factor=1.0),
               sc.LinkFault("gpu1", "switch", at=1e-6, factor=0.5),
               sc.LinkFault("switch", "gpu1", at=2e-6, factor=1.0),
               sc.LinkFault("gpu0", "switch", at=2e-6, factor=1.0)]))
    assert restored.faults == {"links": [
        {"link": ["gpu1", "switch"], "at": 1e-6, "factor": 0.5},
        {"link": ["gpu1", "switch"], "at": 2e-6, "factor": 1.0}]}
    assert restored.time > healthy.time


def test_link_faults_need_the_flow_model():
    with pytest.raises(sc.InvalidInputError, match=r"'analytical' network model does not "
                                                   r"model link faults; use network='flow' or "
                                                   r"'flow_rtt'"):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=64,
                    network="analytical",
                    faults=sc.Faults(links=[sc.LinkFault("gpu0", "switch", at=0)]))


@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
def test_flows_sharing_a_bottleneck_move_together_around_a_failed_link(network):
    # a -> b over a -s1- s3 (or a -s2- s3), then s3 -> b at 1 GB/s (10 GB/s elsewhere,
    # 1 us a link). Two messages of 2 MB and 4 MB share s3 -> b at 0.5 GB/s each from
    # 3 us; s1 - s3 fails at 300 us, when each has sent 297 us x 0.5 GB/s = 148,500 B;
    # both move around it through s2, still sharing s3 -> b: the 2 MB one ends at
    # 300 us + 1,851,500 B / 0.5 GB/s = 4.003 ms, the 4 MB one has 2,000,000 B left then
    # and ends 2 ms later, at 6.003 ms. (Moved one at a time, the first moved grouped
    # with the second still on its old route, and the run stopped with a KeyError.)
    topo = sc.Topology("diamond")
    a, b = topo.add_gpu("a"), topo.add_gpu("b")
    s1, s2, s3 = (topo.add_switch(name) for name in ("s1", "s2", "s3"))
    for u, v in ((a, s1), (s1, s3), (a, s2), (s2, s3)):
        topo.add_link(u, v, bandwidth=10e9, latency=1e-6)
    topo.add_link(s3, b, bandwidth=1e9, latency=1e-6)

    def two_messages(comm):
        if comm.rank == 0:
            first = comm.send(VirtualBuffer.of(2_000_000, np.uint8), 1, tag=1)
            second = comm.send(VirtualBuffer.of(4_000_000, np.uint8), 1, tag=2)
            yield first
            yield second
        else:
            yield comm.recv(0, tag=1)
            yield comm.recv(0, tag=2)

    faults = sc.Faults(links=[sc.LinkFault("s1", "s3", at=300e-6, factor=0.0)])
    res = sc.run_program(topo, two_messages, network=network, trace=True, faults=faults)
    assert sorted(e.end for e in res.trace) == pytest.approx([4.003e-3, 6.003e-3],
                                                              rel=1e-12)
    assert res.link_bytes[("a", "s1")] == res.link_bytes[("s1", "s3")] == 297_000
    assert res.link_bytes[("a", "s2")] == res.link_bytes[("s2", "s3")] == 5_703_000
    assert res.link_bytes[("s3", "b")] == 6_000_000


def _pair(latency=10e-6, back=None):
    topo = sc.Topology("pair")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=1e9, latency=latency, back_bandwidth=back)
    return topo, a, b


def test_a_factor_is_checked_against_both_directions_of_a_link():
    """1 GB/s one way and 1 kB/s back: a factor of 1e-4 leaves the back direction at
    0.1 bytes/s, refused as the forward one would be; 1e-3 leaves it exactly 1 byte/s."""
    topo, a, b = _pair(back=1e3)
    with pytest.raises(sc.InvalidInputError, match=r"factor=0.0001 leaves link \('gpu0', "
                                                   r"'gpu1'\) at 0.1 bytes/s"):
        sc.run_program(topo, _empty_message_0_to_1,
                       faults=sc.Faults(links=[sc.LinkFault(a, b, at=0, factor=1e-4)]))
    sc.run_program(topo, _empty_message_0_to_1,
                   faults=sc.Faults(links=[sc.LinkFault(a, b, at=0, factor=1e-3)]))


def _empty_then_compute(comm):
    if comm.rank == 0:
        yield comm.send(np.zeros(0, np.uint8), 1)
        yield comm.compute(30e-6)
    else:
        yield comm.recv(0)


@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
def test_empty_messages_under_failures_take_their_new_route_and_are_gone_once_arrived(network):
    """A triangle of 10 us links. An empty message gpu0 -> gpu1 sent at 0 moves around
    a failure of (gpu0, gpu1) at 3 us onto gpu0 - gpu2 - gpu1; when (gpu2, gpu1) fails
    at 6 us it has no way left: the run ends naming that link. And an empty message that
    has arrived (at 10 us) is not stopped by a failure at 20 us: the run ends at 40 us."""
    triangle = sc.Topology("triangle")
    x, y, z = (triangle.add_gpu() for _ in range(3))
    for u, v in ((x, y), (y, z), (z, x)):
        triangle.add_link(u, v, bandwidth=1e9, latency=10e-6)
    twice = sc.Faults(links=[sc.LinkFault(x, y, at=3e-6), sc.LinkFault(z, y, at=6e-6)])
    with pytest.raises(sc.LinkFailureError, match=r"link \('gpu1', 'gpu2'\) failed at "
                                                  r"t=6e-06 s .* gpu0->gpu1 \(0 bytes left\)"):
        sc.run_program(triangle, _empty_message_0_to_1, network=network, faults=twice)
    topo, a, b = _pair()
    res = sc.run_program(topo, _empty_then_compute, network=network,
                         faults=sc.Faults(links=[sc.LinkFault(a, b, at=20e-6)]))
    assert res.time == pytest.approx(40e-6, rel=1e-12)


def _zero_detour():
    topo = sc.Topology("zero_detour")
    a, b = topo.add_gpu(), topo.add_gpu()
    s = topo.add_switch()
    topo.add_link(a, b, bandwidth=1e9, latency=1e-6)
    topo.add_link(a, s, bandwidth=1e9, latency=0.0)
    topo.add_link(s, b, bandwidth=1e9, latency=0.0)
    return topo, a, b, s


def test_flow_rtt_checks_each_failure_with_the_links_failed_and_restored_by_then():
    """gpu0 - gpu1 directly (1 us) and through switch0 on links of latency 0. (s, b)
    fails at 1 ms and comes back at 2 ms; (a, b) fails at 3 ms: the zero-latency way
    around is open again then, and refused before the run. With (s, b) still down, a
    failure of (a, b) leaves no route at all, which is the run's to report if a message
    takes it; this one arrives at 1 us, and the run goes on."""
    topo, a, b, s = _zero_detour()
    back = sc.Faults(links=[sc.LinkFault(s, b, at=1e-3), sc.LinkFault(s, b, at=2e-3, factor=1.0),
                            sc.LinkFault(a, b, at=3e-3)])
    with pytest.raises(sc.InvalidInputError, match=r"have failed at t=0.003 s .* route "
                                                   r"gpu0->gpu1 has latency 0"):
        sc.run_program(topo, _empty_message_0_to_1, network="flow_rtt", faults=back)
    cut = sc.Faults(links=[sc.LinkFault(s, b, at=1e-3), sc.LinkFault(a, b, at=2e-3)])
    assert sc.run_program(topo, _empty_message_0_to_1, network="flow_rtt",
                          faults=cut).time == pytest.approx(1e-6)


def test_flow_rtt_checks_the_links_a_restore_leaves_failed():
    """(s, b) fails at 1 ms, (a, b) at 2 ms (no route then: the run's to report), and
    (s, b) comes back at 3 ms: from then on the only way from gpu0 to gpu1 is the one of
    zero latency, which a message sent at 4 ms would take. Only the sets after each
    failure were checked, so the run started and that send failed as an error of rank
    0's program, naming no fault; it is refused before the run, naming the link still
    failed and the instant."""
    topo, a, b, s = _zero_detour()
    faults = sc.Faults(links=[sc.LinkFault(s, b, at=1e-3), sc.LinkFault(a, b, at=2e-3),
                              sc.LinkFault(s, b, at=3e-3, factor=1.0)])
    started = []

    def late(comm):
        started.append(comm.rank)
        yield comm.sleep(4e-3)
        yield from _empty_message_0_to_1(comm)

    with pytest.raises(sc.InvalidInputError, match=r"^once link\(s\) \('gpu0', 'gpu1'\) have "
                                                   r"failed at t=0.003 s .* route gpu0->gpu1 "
                                                   r"has latency 0"):
        sc.run_program(topo, late, network="flow_rtt", faults=faults)
    assert started == []


def _bound_detour():
    """gpu0 - S - gpu1 (1 us each) and S - V (1 us); V is also reached from gpu0 by A
    and reaches gpu1 by B on links of latency 0."""
    topo = sc.Topology("bound_detour")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    for name in "SAVB":
        topo.add_switch(name)
    for u, v, latency in [(g0, "S", 1e-6), ("S", g1, 1e-6), ("S", "V", 1e-6),
                          (g0, "A", 0.0), ("A", "V", 0.0), ("V", "B", 0.0), ("B", g1, 0.0)]:
        topo.add_link(u, v, bandwidth=1e9, latency=latency)
    return topo


def _sent_through(via, nbytes, after=0.0):
    """A program: rank 0 sends ``nbytes`` to rank 1 bound through ``via``, ``after``
    seconds in."""
    def program(comm):
        if comm.rank == 0:
            if after:
                yield comm.sleep(after)
            yield comm.send(sc.VirtualBuffer(nbytes, np.uint8), 1, via=via)
        else:
            yield comm.recv(0)
    return program


def test_flow_rtt_names_the_failure_that_moves_a_bound_flow_onto_a_route_of_zero_latency():
    """A message bound through V (gpu0 - S - V - S - gpu1, 4 us) is in flight when (S, V)
    fails at 20 us: the way to V around it crosses only links of latency 0, which flow_rtt
    cannot weigh. A bound route is known only when it is sent, so it is refused then,
    naming the failure, the message and its binding (a bare InvalidInputError naming
    neither came out of the fault's event)."""
    faults = sc.Faults(links=[sc.LinkFault("S", "V", at=20e-6)])
    with pytest.raises(sc.InvalidInputError, match=r"^link \('S', 'V'\) failed at t=2e-05 s "
                                                   r"and the message gpu0->gpu1 in flight "
                                                   r"\(bound through 'V'\) moves around it: "
                                                   r"network 'flow_rtt' weighs"):
        sc.run_program(_bound_detour(), _sent_through("V", 100_000), network="flow_rtt",
                       faults=faults)
    # on the flow model the rest of the bytes take the detour: 4 us, 20 us at 1 GB/s
    # (16 kB sent), then 84 kB at 1 GB/s on A - V - B
    assert sc.run_program(_bound_detour(), _sent_through("V", 100_000), faults=faults).time \
        == pytest.approx(4e-6 + 100e-6, rel=1e-12)


def test_a_bound_message_with_no_route_left_names_a_failed_link_of_its_bound_route():
    """gpu0 - a - b - gpu1 is the direct way, and a - s1 - b the one through s1; a spur
    (a, c) is on neither. With (a, c), (a, s1) and (b, s1) failed, a message bound
    through s1 has no route: the error named the spur (the lowest failed link, as the
    route found without the binding crosses none), and not the binding."""
    topo = sc.Topology("via_spur")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    for name in ("a", "b", "s1", "c"):
        topo.add_switch(name)
    for u, v in [("a", "c"), (g0, "a"), (g1, "b"), ("a", "b"), ("a", "s1"), ("b", "s1")]:
        topo.add_link(u, v, bandwidth=1e9, latency=1e-6)

    bound = _sent_through("s1", 1000, after=10e-6)
    faults = sc.Faults(links=[sc.LinkFault("a", "c", at=1e-6),
                              sc.LinkFault("a", "s1", at=1e-6),
                              sc.LinkFault("b", "s1", at=1e-6)])
    with pytest.raises(sc.LinkFailureError) as info:
        sc.run_program(topo, bound, faults=faults)
    assert info.value.link == ("a", "s1")
    assert "no route from 'gpu0' to 'gpu1' through 's1' around the failed links" in \
        str(info.value)
    assert "link ('a', 's1') failed" in str(info.value)


def test_flow_rtt_names_the_failure_that_moves_a_bound_empty_message_onto_zero_latency():
    """The same for a message of no bytes, still in its latency phase when (S, V) fails:
    a bare InvalidInputError came out of the fault's event."""
    faults = sc.Faults(links=[sc.LinkFault("S", "V", at=1e-6)])
    with pytest.raises(sc.InvalidInputError, match=r"^link \('S', 'V'\) failed at t=1e-06 s "
                                                   r"and the message gpu0->gpu1 in flight "
                                                   r"\(bound through 'V'\) moves around it"):
        sc.run_program(_bound_detour(), _sent_through("V", 0), network="flow_rtt",
                       faults=faults)
    # on the flow model it arrives when its route's 4 us of latency are over
    assert sc.run_program(_bound_detour(), _sent_through("V", 0), faults=faults).time == \
        pytest.approx(4e-6)


def test_a_bound_message_whose_device_no_route_reaches_is_not_blamed_on_failures():
    """A message bound through z, on an island of its own, has no route on the healthy
    machine either: with a link failed elsewhere the error said "around the failed
    links", blaming failures that are not the cause; it reads as without them."""
    topo = sc.Topology("via_island")
    g0, g1 = topo.add_gpu(), topo.add_gpu()
    for name in ("a", "b", "s1", "z", "w"):
        topo.add_switch(name)
    for u, v in [(g0, "a"), (g1, "b"), ("a", "b"), ("a", "s1"), ("b", "s1"), ("z", "w")]:
        topo.add_link(u, v, bandwidth=1e9, latency=1e-6)

    bound = _sent_through("z", 1000, after=10e-6)
    messages = []
    for faults in (None, sc.Faults(links=[sc.LinkFault("a", "s1", at=1e-6)])):
        with pytest.raises(sc.AlgorithmError) as info:
            sc.run_program(topo, bound, faults=faults)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "no route from 'gpu0' to 'gpu1' through 'z'" in messages[1]
    assert "failed" not in messages[1]


def test_a_slow_down_so_small_that_the_reduction_rate_overflows_is_refused():
    """slow={1: 1e-300} turned rank 1's 1e12 bytes/s into infinity: free reductions, with
    no word. 1e12 / 1e-300 overflows; 1e12 / 1e-3 does not."""
    topo = sc.topology.switch(4, reduce_bandwidth=1e12)
    with pytest.raises(sc.InvalidInputError, match=r"^faults\.slow\[1\]=1e-300 is not "
                                                   r"accepted: rank 1's reduction rate"):
        sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                    faults=sc.Faults(slow={1: 1e-300}))
    fast = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                       faults=sc.Faults(slow={1: 1e-3}))
    free = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=4096)
    assert fast.time > free.time   # the other ranks still reduce at 1e12 bytes/s


def test_mut_the_factor_a_refused_slow_down_suggests_is_accepted():
    """The refusal names the smallest factor to use: 1e12 / 1.7976931348623157e308 =
    5.5627e-297, so a factor of 5.56e-297 (the bound to 3 digits) still overflows
    (1e12 / 5.56e-297 = 1.7986e308 > the largest float), and the suggestion must be above
    it; the factor suggested, used, runs."""
    import re
    from fractions import Fraction

    topo = sc.topology.switch(4, reduce_bandwidth=1e12)
    with pytest.raises(sc.InvalidInputError) as caught:
        sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                    faults=sc.Faults(slow={1: 1e-300}))
    factor = float(re.search(r"use a factor >= (\S+)$", str(caught.value)).group(1))
    largest = Fraction(1.7976931348623157e308)
    assert Fraction(10**12) / Fraction(5.56e-297) > largest     # too small a factor
    assert Fraction(10**12) / Fraction(factor) < largest
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                      faults=sc.Faults(slow={1: factor}))
    assert res.time > 0


def _one_message(nbytes):
    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(nbytes, np.uint8), 1)
        elif comm.rank == 1:
            yield comm.recv(0)
    return program


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
def test_a_message_moved_off_a_failed_link_arrives_as_if_sent_around_it(seed, network):
    """gpu0 -> gpu1 on a 4-cycle of random bandwidths and latencies, its link failing at
    a random instant: the bytes not yet across take gpu0 -> gpu3 -> gpu2 -> gpu1 after
    the latency that route has beyond the direct one (none if it has less), so a
    message failed in its latency phase arrives as one sent around from the start.
    Worked out here from the two routes alone."""
    rng = np.random.default_rng(seed)
    latency = rng.uniform(0.1e-6, 5e-6, 4) * (rng.random(4) < 0.8)
    bandwidth = rng.uniform(1e9, 100e9, 4)
    nbytes = int(rng.choice([0, 1, int(rng.integers(2, 2_000_000))]))
    topo = sc.Topology("cycle")
    gpus = [topo.add_gpu() for _ in range(4)]
    for i in range(4):
        topo.add_link(gpus[i], gpus[(i + 1) % 4], bandwidth=float(bandwidth[i]),
                      latency=float(latency[i]) + (network == "flow_rtt") * 1e-7)
    lat = latency + (network == "flow_rtt") * 1e-7
    direct_latency, direct_bw = lat[0], bandwidth[0]
    around_latency, around_bw = lat[1] + lat[2] + lat[3], bandwidth[1:].min()
    unharmed = direct_latency + nbytes / direct_bw
    at = float(rng.uniform(0, 1.2 * unharmed))
    extra = max(around_latency - direct_latency, 0.0)
    sent = 0.0 if at < direct_latency else (at - direct_latency) * direct_bw
    if at == 0:  # (unharmed == 0) a fault at 0 holds from the start
        expected, across = around_latency + nbytes / around_bw, 0
    elif at >= unharmed or (nbytes and at >= direct_latency and nbytes - sent < 0.5):
        expected, across = unharmed, nbytes
    elif at < direct_latency:
        expected, across = direct_latency + extra + nbytes / around_bw, 0
    else:
        expected = at + extra + (nbytes - sent) / around_bw
        across = nbytes - round(nbytes - sent)
    res = sc.run_program(topo, _one_message(nbytes), network=network,
                         faults=sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=at)]))
    assert res.time == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert res.link_bytes[("gpu0", "gpu1")] == across
    for hop in [("gpu0", "gpu3"), ("gpu3", "gpu2"), ("gpu2", "gpu1")]:
        assert res.link_bytes[hop] == nbytes - across, hop


@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
def test_a_message_moved_twice_waits_out_each_new_routes_extra_latency(network):
    """gpu0 reaches gpu1 directly (1 us), through switch0 (2 hops, 2 us) or through
    switch1 and switch2 (3 hops, 3 us), every link 1 GB/s. 1 MB leaves at 1 us; the
    direct link fails at 0.5 ms with 499,000 B across: the 501,000 B left wait 1 us for
    the route through switch0, and while they wait gpu0 - switch0 fails too (0.5005 ms):
    one more microsecond, then 0.501 ms of draining: 1.003 ms, as if sent the longest
    way from the start."""
    topo = sc.Topology("three ways")
    a, b = topo.add_gpu(), topo.add_gpu()
    s0, s1, s2 = topo.add_switch(), topo.add_switch(), topo.add_switch()
    for u, v in [(a, b), (a, s0), (s0, b), (a, s1), (s1, s2), (s2, b)]:
        topo.add_link(u, v, bandwidth=1e9, latency=1e-6)
    faults = sc.Faults(links=[sc.LinkFault(a, b, at=0.5e-3), sc.LinkFault(a, s0, at=0.5005e-3)])
    res = sc.run_program(topo, _one_message(1_000_000), network=network, faults=faults)
    assert res.time == pytest.approx(1.003e-3, rel=1e-12)
    assert res.link_bytes[(a, b)] == 499_000
    assert res.link_bytes[(a, s0)] == res.link_bytes[(s0, b)] == 0
    assert res.link_bytes[(a, s1)] == res.link_bytes[(s2, b)] == 501_000


@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
@pytest.mark.parametrize("nbytes, at, expected", [
    # 1 MB draining from 5 us: moved to the switch (2 us: no wait, nothing given back),
    # the direct link restored, the switch's link failed: back on the direct link, whose
    # 5 us it has met already: 1005 us, as unharmed (it was charged 3 us again: 1008)
    (1_000_000, (100e-6, 200e-6, 300e-6), 1005e-6),
    # the same in the latency phase: 5 us and 6 us, as unharmed (they gave 8 and 9)
    (0, (1e-6, 2e-6, 3e-6), 5e-6), (1000, (1e-6, 2e-6, 3e-6), 6e-6),
])
def test_a_message_moved_back_to_a_route_it_met_pays_its_latency_once(network, nbytes, at,
                                                                     expected):
    """gpu0 - gpu1 directly (5 us) or through switch0 (1 + 1 us), 1 GB/s everywhere: the
    direct link fails, comes back, and the switch's link fails."""
    topo = sc.Topology("back")
    a, b = topo.add_gpu(), topo.add_gpu()
    s = topo.add_switch()
    topo.add_link(a, b, bandwidth=1e9, latency=5e-6)
    topo.add_link(a, s, bandwidth=1e9, latency=1e-6)
    topo.add_link(s, b, bandwidth=1e9, latency=1e-6)
    faults = sc.Faults(links=[sc.LinkFault(a, b, at=at[0]),
                              sc.LinkFault(a, b, at=at[1], factor=1.0),
                              sc.LinkFault(a, s, at=at[2])])
    res = sc.run_program(topo, _one_message(nbytes), network=network, faults=faults)
    assert res.time == pytest.approx(expected, rel=1e-12)


def _delayed_message_0_to_1(nbytes, delay):
    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(nbytes, np.uint8), 1, delay=delay)
        elif comm.rank == 1:
            yield comm.recv(0)
    return program


@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
@pytest.mark.parametrize("nbytes", [0, 1000])
def test_a_delayed_message_moved_in_its_latency_phase_arrives_as_if_sent_around(network,
                                                                                nbytes):
    """A triangle of 10 us, 1 GB/s links; gpu0 sends gpu1 ``nbytes`` with delay=5 us and
    the direct link fails at 3 us, in the message's latency phase (10 + 5 us). It arrives
    as one sent the long way (20 us) from the start: 5 + 20 us, plus 1 us for 1000 B.
    The extra latency is the routes' difference, 10 us: the send's delay is not latency
    the message met on its first route (counted so, it waited 5 us too little)."""
    tri = sc.Topology("triangle")
    g = [tri.add_gpu() for _ in range(3)]
    for u, v in [(0, 1), (0, 2), (2, 1)]:
        tri.add_link(g[u], g[v], bandwidth=1e9, latency=10e-6)
    res = sc.run_program(tri, _delayed_message_0_to_1(nbytes, 5e-6), network=network,
                         faults=sc.Faults(links=[sc.LinkFault(g[0], g[1], at=3e-6)]))
    assert res.time == pytest.approx(5e-6 + 20e-6 + nbytes / 1e9, rel=1e-12)
