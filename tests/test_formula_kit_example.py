"""The formula-test kit as the README shows it: pin an algorithm's formula in a few lines.

Uses only the public API: ``simcoll.simulate``, ``simcoll.register``, ``simcoll.cost``
and ``simcoll.testing`` (with the ``simcoll_reference`` fixture of its pytest plugin).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import simcoll as sc
from simcoll import cost, register, simulate
from simcoll.cost import CostModel, gpu_traffic
from simcoll.testing import (
    AlphaBeta,
    alpha_beta_network,
    assert_matches_model,
    assert_time,
    assert_traffic,
    sweep,
)

ALPHA, BETA = 1e-6, 1e-11


def direct_time(p, nbytes, alpha, beta, gamma):
    """alpha + (p-1) n beta: the p-1 messages of a rank share its link (0 for p = 1)."""
    return alpha + (p - 1) * nbytes * beta if p > 1 else 0.0


def direct_traffic(p, nbytes, itemsize):
    """Every rank sends and receives (p-1) n bytes."""
    each = np.full(p, (p - 1) * nbytes)
    return gpu_traffic(each, each)


@register("all_gather", "direct_example",
          cost=CostModel(time=direct_time, traffic=direct_traffic))
def direct_all_gather(comm, x):
    """Every rank sends its x straight to every other rank at once.

    Cost: alpha + (p-1) n beta (the p-1 messages share each link). Each rank sends and
    receives (p-1) n bytes.
    """
    for peer in range(comm.size):
        if peer != comm.rank:
            comm.send(x, dst=peer)
    blocks = []
    for peer in range(comm.size):
        blocks.append(x if peer == comm.rank else (yield comm.recv(src=peer)))
    return comm.join(blocks)


@sweep(p=[2, 4, 8], nbytes=[1 << 10, 1 << 20, 64 << 20])
def test_ring_all_reduce_matches_its_formula(p, nbytes):
    net = alpha_beta_network(p, alpha=ALPHA, beta=BETA)
    res = simulate(net, "all_reduce", algorithm="ring", nbytes=nbytes)
    assert_traffic(res, sent=2 * (p - 1) / p * nbytes, received=2 * (p - 1) / p * nbytes)
    assert_time(res, 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * nbytes * BETA, rtol=1e-9)


@sweep(p=[1, 3, 5], nbytes=[0, 4, 1 << 16])
def test_my_algorithm_matches_its_formula(p, nbytes):
    net = alpha_beta_network(p, alpha=ALPHA, beta=BETA)
    res = simulate(net, "all_gather", algorithm="direct_example", nbytes=nbytes)
    assert_traffic(res, sent=(p - 1) * nbytes, received=(p - 1) * nbytes)
    assert_time(res, (ALPHA + (p - 1) * nbytes * BETA) if p > 1 else 0.0)


@sweep(chunks=[1, 2, 4], p=[3, 8])
def test_ring_matches_the_cost_model(simcoll_reference, p, chunks):
    res = simulate(simcoll_reference.network(p), "all_reduce", algorithm="ring",
                   nbytes=p * chunks * 4096, chunks=chunks)
    simcoll_reference.check(res)


def test_a_wrong_time_formula_fails_with_both_values_side_by_side():
    res = simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=4096)
    wrong = 2 * 3 * ALPHA + 3 / 4 * 4096 * BETA  # forgot the all-gather's bytes
    right = 2 * 3 * ALPHA + 2 * 3 / 4 * 4096 * BETA
    with pytest.raises(AssertionError, match=(
            rf"(?s)time of all_reduce/ring \(p=4, nbytes=4096\).*"
            rf"expected +{wrong:.12g} s\n +simulated +{right:.12g} s")):
        assert_time(res, wrong)


def test_a_wrong_traffic_formula_names_the_ranks_that_differ():
    res = simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), "all_gather",
                   algorithm="direct_example", nbytes=100)
    with pytest.raises(AssertionError, match=(
            r"(?s)bytes_received: 2 of 4 ranks differ\n"
            r" +rank +expected +simulated +difference\n"
            r" +1 +400 +300 +-100\n +3 +200 +300 +\+100")):
        assert_traffic(res, sent=300, received=[300, 400, 300, 200])


def slow_direct_time(p, nbytes, alpha, beta, gamma):
    """A wrong model: (p-1) alpha, as if the messages went one after another."""
    return (p - 1) * alpha + (p - 1) * nbytes * beta if p > 1 else 0.0


register("all_gather", "direct_wrong_model",
         cost=CostModel(time=slow_direct_time, traffic=direct_traffic))(direct_all_gather)


def test_a_wrong_model_is_caught_by_assert_matches_model():
    res = simulate(alpha_beta_network(8, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=8 << 10)
    assert_matches_model(res, alpha=ALPHA, beta=BETA)
    wrong = simulate(alpha_beta_network(8, alpha=ALPHA, beta=BETA), "all_gather",
                     algorithm="direct_wrong_model", nbytes=1000)
    with pytest.raises(AssertionError, match=r"expected +7\.07e-06 s\n +simulated +1\.07e-"
                                             r"06 s"):
        assert_matches_model(wrong, alpha=ALPHA, beta=BETA)


def test_a_run_on_another_machine_or_constants_is_refused_by_assert_matches_model():
    """Constants other than the run's (alpha twice the network's, beta given as a
    bandwidth), or a switch of other links: the check's verdict would not be the
    model's. A run on the analytical network, whose messages share no link, neither."""
    res = simulate(alpha_beta_network(6, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="recursive_doubling", nbytes=4096)
    for alpha, beta in ((2 * ALPHA, BETA), (ALPHA, 1 / BETA)):
        with pytest.raises(sc.InvalidInputError, match=(
                r"^all_reduce/recursive_doubling \(p=6, nbytes=4096\) did not run on the "
                r"reference network of alpha=.*; run it on alpha_beta_network\(6, alpha=")):
            assert_matches_model(res, alpha=alpha, beta=beta)
    slower = simulate(sc.topology.switch(6, bandwidth=1e10, latency=5 * ALPHA / 2),
                      "all_reduce", algorithm="recursive_doubling", nbytes=4096)
    with pytest.raises(sc.InvalidInputError, match="did not run on the reference network"):
        assert_matches_model(slower, alpha=ALPHA, beta=BETA)
    # the same machine built from its rates: 1 / (1 / X) is not X for 162 of the whole
    # numbers of GB/s up to 1000 (8 GB/s among them), and it is the reference network
    for gbps in (1, 8, 333):
        typed = simulate(sc.topology.switch(4, bandwidth=gbps * 1e9, latency=ALPHA / 2,
                                            reduce_bandwidth=3e11), "all_reduce",
                         algorithm="ring", nbytes=4096)
        assert_matches_model(typed, alpha=ALPHA, beta=1 / (gbps * 1e9), gamma=1 / 3e11)
    flat = simulate(alpha_beta_network(8, alpha=ALPHA, beta=BETA), "all_reduce",
                    algorithm="naive", nbytes=4096, network="analytical")
    with pytest.raises(sc.InvalidInputError, match="ran on network='analytical'"):
        assert_matches_model(flat, alpha=ALPHA, beta=BETA)


def test_assert_matches_model_takes_the_root_of_a_rooted_run(simcoll_reference):
    """A binomial broadcast from rank 3 of 4, by hand: rank 3 sends 1000 bytes to each of
    two ranks, rank 1 (two ranks on from the root) to one more. The models are asked for
    the run's root (``res.root``) unless told, and a root other than the run's is
    refused."""
    res = simulate(simcoll_reference.network(4), "broadcast", algorithm="binomial",
                   nbytes=1000, root=3)
    assert_traffic(res, sent=[0, 1000, 0, 2000], received=[1000, 1000, 1000, 0])
    constants = dict(alpha=ALPHA, beta=BETA, gamma=simcoll_reference.gamma)
    assert_matches_model(res, **constants, root=3)
    assert_matches_model(res, **constants)
    simcoll_reference.check(res, root=3)
    with pytest.raises(sc.InvalidInputError, match=r"root=0 is not the root of the run"):
        assert_matches_model(res, **constants, root=0)


@sweep(p=[1, 2, 5], nbytes=[0, 12, 4096])
def test_my_algorithm_matches_its_registered_cost_model(simcoll_reference, p, nbytes):
    res = simulate(simcoll_reference.network(p), "all_gather", algorithm="direct_example",
                   nbytes=nbytes)
    simcoll_reference.check(res)


def test_sweep_needs_values():
    with pytest.raises(ValueError, match="axis 'p' has no values"):
        sweep(p=[], nbytes=[1])


def test_the_kit_refuses_constants_and_tolerances_no_formula_has():
    """A negative alpha made a negative prediction, which assert_matches_model then
    reported as the simulation differing from the formula; AlphaBeta(alpha=-1) was
    taken; an rtol of -1 failed a time that matched to the bit."""
    res = simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=4096)
    for bad in (dict(alpha=-ALPHA), dict(beta=math.nan), dict(gamma=math.inf)):
        name, value = next(iter(bad.items()))
        kwargs = {"alpha": ALPHA, "beta": BETA, "gamma": 0.0, **bad}
        with pytest.raises(sc.InvalidInputError, match=f"^{name}={value!r} is not accepted"):
            cost.predict("all_reduce", "ring", p=4, nbytes=4096, **kwargs)
        with pytest.raises(sc.InvalidInputError, match=f"^{name}={value!r} is not accepted"):
            cost.lower_bound("all_reduce", p=4, nbytes=4096, **kwargs)
        with pytest.raises(sc.InvalidInputError, match=f"^{name}={value!r} is not accepted"):
            assert_matches_model(res, **kwargs)
        with pytest.raises(sc.TopologyError, match=f"^{name}={value!r} is not accepted"):
            alpha_beta_network(4, **kwargs)
        with pytest.raises(sc.TopologyError, match=f"^{name}={value!r} is not accepted"):
            AlphaBeta(**kwargs)
    with pytest.raises(sc.TopologyError, match="^beta=0 is not accepted; use a number > 0"):
        alpha_beta_network(4, alpha=ALPHA, beta=0)
    assert cost.predict("all_reduce", "ring", p=4, nbytes=4096, alpha=ALPHA, beta=0.0) > 0
    for tolerance in (dict(rtol=-1.0), dict(atol=math.nan)):
        with pytest.raises(sc.InvalidInputError, match="is not accepted"):
            assert_time(res, res.time, **tolerance)
    with pytest.raises(sc.InvalidInputError, match="^expected=-1.0 is not accepted"):
        assert_time(res, -1.0)
    with pytest.raises(sc.InvalidInputError, match="^rtol=-1 is not accepted"):
        assert_traffic(res, sent=0, rtol=-1)
    assert_time(res, res.time, rtol=0.0)


def test_rates_a_float_step_either_way_from_the_constants_are_the_reference_network():
    """switch(4, bandwidth=X, reduce_bandwidth=R) checked with beta=1/X, gamma=1/R:
    1 / (1 / X) is a float step above X for 33 GB/s (below it for 8 GB/s), and the
    reduction rates 33e9 and 8e9 come back a step off too; each is the machine the
    constants describe, and must pass (a neighbour only one way, or none for the
    reduction rate, refused it)."""
    import math

    for gbps, rate in ((33, 33e9), (33, 8e9), (8, 33e9)):
        bandwidth = gbps * 1e9
        back = 1 / (1 / bandwidth)
        assert back != bandwidth and abs(back - bandwidth) == abs(
            math.nextafter(back, bandwidth) - back)   # exactly one float step apart
        assert 1 / (1 / rate) != rate
        typed = simulate(sc.topology.switch(4, bandwidth=bandwidth, latency=ALPHA / 2,
                                            reduce_bandwidth=rate), "all_reduce",
                         algorithm="ring", nbytes=4096)
        assert_matches_model(typed, alpha=ALPHA, beta=1 / bandwidth, gamma=1 / rate)
    assert 1 / (1 / 33e9) > 33e9 and 1 / (1 / 8e9) < 8e9


def test_a_latency_a_float_step_either_way_from_half_alpha_is_the_reference_network():
    """switch(8, latency=500 * sc.ns) checked with alpha=1 * sc.us was refused as another
    machine: 500 * 1e-9 is one float step above 1e-6 / 2 (and 2.3e-6 one above
    4.6 * 1e-6 / 2, as the spec 2.3us is). Two steps off, or a latency truly other, is
    still refused."""
    import math

    assert 500 * 1e-9 == math.nextafter(1e-6 / 2, 1.0)
    assert 2.3e-6 == math.nextafter(4.6 * 1e-6 / 2, 1.0)
    for latency, alpha in ((500 * 1e-9, 1e-6), (2.3e-6, 4.6 * 1e-6)):
        res = simulate(sc.topology.switch(8, bandwidth=100e9, latency=latency),
                       "all_reduce", algorithm="ring", nbytes=1 << 20)
        assert_matches_model(res, alpha=alpha, beta=1 / 100e9)
    farther = math.nextafter(math.nextafter(1e-6 / 2, 1.0), 1.0)
    for latency in (farther, 0.6e-6):
        res = simulate(sc.topology.switch(8, bandwidth=100e9, latency=latency),
                       "all_reduce", algorithm="ring", nbytes=1 << 20)
        with pytest.raises(sc.InvalidInputError, match=r"whose links or constants differ "
                                                       r"by more than a float step"):
            assert_matches_model(res, alpha=1e-6, beta=1 / 100e9)
