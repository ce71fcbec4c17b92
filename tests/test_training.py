"""DDP-style bucketed all-reduce overlapped with the backward pass."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, make_data, reference_network

import simcoll as sc
from simcoll import cost
from simcoll.training import data_parallel_step


def ring_time(p, nbytes):
    return 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * nbytes * (BETA + GAMMA / 2)


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("buckets", [1, 4, 16])
@pytest.mark.parametrize("compute_per_bucket_vs_allreduce", [0.0, 0.5, 1.0, 3.0])
def test_step_time_is_the_overlap_formula(p, buckets, compute_per_bucket_vs_allreduce):
    m = 4 * p * buckets * 4096
    t_a = ring_time(p, m // buckets)
    t_c = compute_per_bucket_vs_allreduce * t_a
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="bucketed", nbytes=m,
                      buckets=buckets, compute=t_c * buckets)
    expected = t_c + t_a + (buckets - 1) * max(t_c, t_a)
    assert res.time == pytest.approx(expected, rel=1e-9)
    assert res.time == pytest.approx(cost.predict(
        "all_reduce", "bucketed", p=p, nbytes=m, alpha=ALPHA, beta=BETA, gamma=GAMMA,
        buckets=buckets, compute=t_c * buckets), rel=1e-9)
    np.testing.assert_array_equal(res.bytes_sent, [2 * (p - 1) * m // p] * p)


FLAT = [name for _, name in sc.list_algorithms("all_reduce")
        if name not in ("bucketed", "parameter_server", "hierarchical")
        and sc.get_algorithm("all_reduce", name).fn.__module__.startswith("simcoll.")]


@pytest.mark.parametrize("inner", FLAT)
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 6, 8, 12])
def test_bucketed_time_equals_the_model_wherever_it_claims_exactness(inner, p):
    claimed = 0
    for buckets in (1, 3, 4):
        nbytes = 4 * p * buckets * 1000
        t_a = cost.predict("all_reduce", inner, p=p, nbytes=nbytes // buckets, alpha=ALPHA,
                           beta=BETA, gamma=GAMMA)
        for compute in (0.0, 0.5 * t_a * buckets, 4 * t_a * buckets):
            params = dict(buckets=buckets, compute=compute, inner=inner)
            res = sc.simulate(reference_network(p), "all_reduce", algorithm="bucketed",
                              nbytes=nbytes, **params)
            if cost.is_exact("all_reduce", "bucketed", p=p, nbytes=nbytes, itemsize=4,
                             **params):
                claimed += 1
                t_c = compute / buckets
                expected = t_c + t_a + (buckets - 1) * max(t_c, t_a)
                assert res.time == pytest.approx(expected, rel=1e-9, abs=1e-18), params
    single = cost.is_exact("all_reduce", inner, p=p, nbytes=4 * p * 1000, itemsize=4)
    assert (claimed > 0) == single


@pytest.mark.parametrize("inner", ["ring", "recursive_doubling", "tree", "direct"])
@pytest.mark.parametrize("p", [3, 4])
def test_bucketed_result_and_traffic(inner, p):
    data = make_data(p, 1003, "float32")
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="bucketed", data=data,
                      buckets=5, compute=1e-5, inner=inner, op="avg")
    assert res.correct
    model = cost.traffic("all_reduce", "bucketed", p=p, nbytes=4 * 1003, buckets=5,
                         inner=inner)
    np.testing.assert_array_equal(res.bytes_sent, model.sent)


def test_ddp_step_hides_communication_behind_a_long_backward_pass():
    topo = reference_network(8)
    grads = 100 * sc.MiB
    bucket_time = ring_time(8, 4 * sc.MiB)
    slow = data_parallel_step(topo, gradient_bytes=grads, forward=1e-3, backward=1.0,
                              bucket_bytes=4 * sc.MiB)
    assert slow.buckets == 25
    # Only the last bucket's all-reduce sticks out of a long backward pass.
    assert slow.exposed_communication == pytest.approx(bucket_time, rel=1e-9)
    assert slow.step_time == pytest.approx(1e-3 + 1.0 + bucket_time, rel=1e-9)
    fast = data_parallel_step(topo, gradient_bytes=grads, forward=1e-3, backward=1e-4,
                              bucket_bytes=4 * sc.MiB)
    # A short backward pass hides behind communication instead.
    assert fast.allreduce.time == pytest.approx(1e-4 / 25 + 25 * bucket_time, rel=1e-9)


@pytest.mark.parametrize("kwargs, match", [
    (dict(bucket_bytes=0), "bucket_bytes=0"),
    (dict(gradient_bytes=0), "gradient_bytes=0"),
    (dict(algorithm="rnig"), "algorithm='rnig' is not accepted; use one of .*'ring'"),
    (dict(algorithm="bucketed"), "algorithm='bucketed' is not accepted"),
    (dict(gradient_bytes=6), "gradient_bytes=6 is not a whole number of float32 elements"),
    (dict(bucket_bytes=1), "bucket_bytes=1 would cut the gradients into 8 buckets, more "
                           "than their 2 float32 elements; use bucket_bytes >= 4"),
    (dict(buckets=3), "sets buckets= itself; give bucket_bytes="),
    (dict(compute=1.0), "sets compute= itself; give backward="),
    (dict(inner="ring"), "sets inner= itself; give algorithm="),
    (dict(nbytes=12), "sets nbytes= itself; give gradient_bytes="),
    (dict(data=[np.ones(3, np.float32)] * 2), "gradient_bytes=8 but data= holds 12 bytes"),
    (dict(faults=sc.Faults(slow={1: 4.0})), "does not take faults=: its forward pass is not "
                                            "simulated"),
])
def test_bad_data_parallel_step_arguments_name_its_own(kwargs, match):
    args = dict(gradient_bytes=8, forward=0, backward=0) | kwargs
    with pytest.raises(sc.InvalidInputError, match=match):
        data_parallel_step(reference_network(2), **args)


def test_data_parallel_step_takes_the_buckets_of_its_data():
    data = [np.full(1000, float(r), np.float32) for r in range(4)]
    step = data_parallel_step(reference_network(4), gradient_bytes=4000, forward=0,
                              backward=1e-3, bucket_bytes=1000, data=data)
    assert step.buckets == 4
    assert step.allreduce.correct
    np.testing.assert_array_equal(step.allreduce.outputs[0], np.full(1000, 1.5, np.float32))


def test_bad_training_arguments():
    with pytest.raises(sc.InvalidInputError, match="buckets=0"):
        sc.simulate(reference_network(2), "all_reduce", algorithm="bucketed", nbytes=8,
                    buckets=0)
    with pytest.raises(sc.InvalidInputError, match="inner='bucketed'"):
        sc.simulate(reference_network(2), "all_reduce", algorithm="bucketed", nbytes=8,
                    inner="bucketed")


@pytest.mark.parametrize("p, buckets", [(4, 3), (5, 4)])
def test_inner_params_reach_every_bucket(p, buckets):
    m = 4 * p * buckets * 96
    plain = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=m // buckets)
    chunked = sc.simulate(reference_network(p), "all_reduce", algorithm="ring",
                          nbytes=m // buckets, chunks=4)
    assert chunked.time != pytest.approx(plain.time)
    t_a = chunked.time
    t_c = 0.5 * t_a
    data = make_data(p, m // 4, "float32")
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="bucketed", data=data,
                      buckets=buckets, compute=t_c * buckets, inner="ring",
                      inner_params="chunks=4")
    assert res.params["inner_params"] == {"chunks": 4}
    assert res.time == pytest.approx(t_c + t_a + (buckets - 1) * max(t_c, t_a), rel=1e-9)
    assert res.correct
    np.testing.assert_array_equal(res.bytes_sent, [buckets * plain.bytes_sent[0]] * p)
    assert res.time == pytest.approx(cost.predict(
        "all_reduce", "bucketed", p=p, nbytes=m, alpha=ALPHA, beta=BETA, gamma=GAMMA,
        buckets=buckets, compute=t_c * buckets, inner="ring", inner_params={"chunks": 4}),
        rel=1e-9)


def test_data_parallel_step_passes_algorithm_params_to_each_bucket():
    topo = sc.topology.dgx_a100(2)
    grads = 16 * sc.MiB
    times = {}
    for proto in ("LL", "Simple"):
        alone = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=grads, proto=proto,
                            op="avg")
        step = data_parallel_step(topo, gradient_bytes=grads, forward=1e-3, backward=2e-3,
                                  bucket_bytes=grads, algorithm="nccl",
                                  algorithm_params={"proto": proto})
        # One bucket: it starts when the backward pass ends and takes what it takes alone.
        assert step.buckets == 1
        assert step.step_time == pytest.approx(1e-3 + 2e-3 + alone.time, rel=1e-9)
        times[proto] = step.step_time
    assert times["LL"] > times["Simple"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(inner_params={"chunk": 2}), r"inner_params for inner='ring': all_reduce/ring does "
                                      r"not take parameter\(s\) \['chunk'\]"),
    (dict(inner_params={"chunks": 9}), "inner_params for inner='ring': chunks=9 is more than "
                                       "the 8 elements"),
    (dict(inner_params=[("chunks", 2)]), r"inner_params=\[\('chunks', 2\)\] is not accepted; "
                                         r"use a dict"),
    (dict(inner_params="chunks"), "inner_params='chunks' is not accepted"),
    (dict(inner_params={"chunks": 2}, inner="nccl", buckets=1),
     r"all_reduce/nccl does not take parameter\(s\) \['chunks'\]"),
])
def test_bad_inner_params(kwargs, match):
    args = dict(buckets=2, inner="ring") | kwargs
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.simulate(reference_network(2), "all_reduce", algorithm="bucketed",
                    nbytes=4 * 17, **args)


def test_an_inner_nccl_refusal_names_inner_params_and_the_ring_estimate_is_the_formula():
    """bucketed's cost model passes an inner NCCL refusal on under inner's name: NCCL's
    tuner runs its tree for a 4 MiB bucket on 16 GPUs at 450 GB/s, where the estimate is
    the ring's; with inner_params={'algo': 'ring'} the time is t_c + t_a + (B-1)
    max(t_c, t_a), t_a the ring's estimate of one bucket."""
    kw = dict(p=16, nbytes=1 << 24, alpha=1e-6, beta=1 / 450e9, inner="nccl", buckets=4,
              compute=4e-4)
    with pytest.raises(sc.InvalidInputError,
                       match=r"^inner='nccl', whose parameters bucketed takes in "
                             r"inner_params, for a bucket: on the reference network of 16 "
                             r"GPUs .* runs tree \(LL128\) for all_reduce of 4194304 B .*"
                             r"give algo='ring'"):
        sc.cost.predict("all_reduce", "bucketed", **kw)
    for query in (sc.cost.traffic, sc.cost.is_exact):
        query("all_reduce", "bucketed", p=16, nbytes=1 << 24, inner="nccl", buckets=4)
    t_a = sc.cost.predict("all_reduce", "nccl", p=16, nbytes=1 << 22, alpha=1e-6,
                          beta=1 / 450e9, algo="ring")
    t_c = 1e-4
    assert sc.cost.predict("all_reduce", "bucketed", inner_params={"algo": "ring"},
                           **kw) == pytest.approx(t_c + t_a + 3 * max(t_c, t_a), rel=1e-12)


def test_an_inner_models_refusal_of_traffic_or_exactness_is_named_under_inner():
    """bucketed passes a refusal of its inner algorithm's traffic and is_exact queries on
    under inner's name, as it does its time's (an inner whose models refuse a size)."""
    from simcoll.cost import CostModel

    def refusing(p, nbytes, itemsize):
        raise sc.InvalidInputError(f"no model for {nbytes} B")

    def exactness(p, nbytes, itemsize):
        raise sc.InvalidInputError(f"no exactness for {nbytes} B")

    sc.register("all_reduce", "test_refusing_inner",
                cost=CostModel(time=lambda p, nbytes, alpha, beta, gamma: 0.0,
                               traffic=refusing, exact=exactness))(
        lambda comm, x, *, op: (yield from ()) or x)
    for query, buckets, words in ((sc.cost.traffic, 4, "no model for 1024 B"),
                                  (sc.cost.is_exact, 1, "no exactness for 4096 B")):
        with pytest.raises(sc.InvalidInputError,
                           match=rf"^inner='test_refusing_inner', whose parameters bucketed "
                                 rf"takes in inner_params, for a bucket: {words}$"):
            query("all_reduce", "bucketed", p=4, nbytes=4096, buckets=buckets,
                  inner="test_refusing_inner")


def test_data_parallel_step_refuses_algorithm_params_that_are_not_a_dict():
    with pytest.raises(sc.InvalidInputError, match="algorithm_params='proto=LL' is not "
                                                   "accepted; give a dict"):
        data_parallel_step(reference_network(2), gradient_bytes=8, forward=0, backward=0,
                           algorithm_params="proto=LL")
    with pytest.raises(sc.InvalidInputError, match="sets inner_params= itself; give "
                                                   "algorithm_params="):
        data_parallel_step(reference_network(2), gradient_bytes=8, forward=0, backward=0,
                           inner_params={})


def test_data_parallel_step_checks_algorithm_params_on_its_smallest_bucket_by_their_name():
    """1026 float32 elements in buckets of at most 256 (1024 B): 5 buckets of 206, 205,
    205, 205 and 205 elements; a ring's chunks may not pass the smallest's 205, and the
    refusal names the step's algorithm_params, not the bucketed run's inner_params."""
    def step(chunks):
        return data_parallel_step(sc.topology.switch(4), gradient_bytes=4 * 1026,
                                  bucket_bytes=1024, forward=0, backward=0,
                                  algorithm="ring", algorithm_params={"chunks": chunks})
    assert step(205).buckets == 5
    with pytest.raises(sc.InvalidInputError,
                       match=r"^algorithm_params for algorithm='ring': chunks=206 is more "
                             r"than the 205 elements"):
        step(206)


def test_data_parallel_step_refuses_a_choice_the_tuner_cannot_make_before_the_run(monkeypatch):
    """algo='nvls' on one DGX A100 (no switch that reduces): NCCL's tuner refused it once
    the first bucket's all-reduce started, an AlgorithmError naming the bucketed run's
    started program; it is refused before the run, naming algorithm_params. A choice it
    can make (algo='ring') still runs."""
    import simcoll.training.bucketed_step as bucketed_step

    def step(params):
        return data_parallel_step(sc.topology.dgx_a100(1), gradient_bytes=1 << 20,
                                  bucket_bytes=1 << 18, forward=0, backward=0,
                                  algorithm="nccl", algorithm_params=params)

    assert step({"algo": "ring"}).allreduce.params["inner_params"] == {"algo": "ring"}

    def ran(*args, **kwargs):
        raise AssertionError("the step ran")

    monkeypatch.setattr(bucketed_step, "simulate", ran)
    with pytest.raises(sc.InvalidInputError,
                       match=r"^algorithm_params for algorithm='nccl': algo='nvls' cannot run "
                             r"all_reduce on this machine; it can run ring, tree"):
        step({"algo": "nvls"})


def test_a_bucket_size_in_mib_where_bytes_were_meant_is_refused_before_the_run():
    """bucket_bytes=25 (PyTorch's bucket_cap_mb=25 typed as bytes) on 1.4 GB made 56
    million bucket programs and ran out of memory; at most 100,000 buckets run, which
    1.4 GB reaches at 14,000 bytes a bucket."""
    topo = sc.topology.switch(4)
    grads = 1_400_000_000
    with pytest.raises(sc.InvalidInputError, match=r"^bucket_bytes=25 would cut the "
                                                   r"1400000000 gradient bytes into 56000000 "
                                                   r"buckets; at most 100000 are simulated: "
                                                   r"use bucket_bytes >= 14000 "):
        data_parallel_step(topo, gradient_bytes=grads, forward=0.1, backward=0.2,
                           bucket_bytes=25)
    with pytest.raises(sc.InvalidInputError, match=r"buckets=100001 is not accepted"):
        sc.simulate(topo, "all_reduce", algorithm="bucketed", nbytes=4 * 100_001,
                    buckets=100_001)


def test_mut_the_bucket_limit_admits_exactly_max_buckets(monkeypatch):
    """At most MAX_BUCKETS buckets run: exactly that many run, one more is refused. The
    limit is lowered to 4 so that the run is short: 16 bytes of float32 gradients in
    4-byte buckets are 4 buckets (accepted); under a limit of 3 they are refused (4 > 3),
    and the smallest bucket size that fits is ceil(16 / 3) = 6 bytes."""
    import simcoll.training.bucketed_step as step

    topo = sc.topology.switch(2)
    monkeypatch.setattr(step, "MAX_BUCKETS", 4)
    data_parallel_step(topo, gradient_bytes=16, forward=0.0, backward=0.0, bucket_bytes=4)
    monkeypatch.setattr(step, "MAX_BUCKETS", 3)
    with pytest.raises(sc.InvalidInputError, match=r"into 4 buckets; at most 3 are "
                                                   r"simulated: use bucket_bytes >= 6 "):
        data_parallel_step(topo, gradient_bytes=16, forward=0.0, backward=0.0,
                           bucket_bytes=4)


def test_mut_the_bucket_size_suggested_is_the_smallest_that_fits():
    """1,400,000,004 gradient bytes (350,000,001 float32): 14,000-byte buckets are
    ceil(1,400,000,004 / 14,000) = 100,001, one too many; 14,001-byte ones are 99,993. So
    the suggestion is ceil(1,400,000,004 / 100,000) = 14,001, and 14,000 is refused."""
    topo = sc.topology.switch(4)
    grads = 1_400_000_004
    assert -(-grads // 14_000) == 100_001 and -(-grads // 14_001) <= 100_000
    with pytest.raises(sc.InvalidInputError, match=r"use bucket_bytes >= 14001 "):
        data_parallel_step(topo, gradient_bytes=grads, forward=0.1, backward=0.2,
                           bucket_bytes=25)
    with pytest.raises(sc.InvalidInputError, match=r"into 100001 buckets; at most 100000"):
        data_parallel_step(topo, gradient_bytes=grads, forward=0.1, backward=0.2,
                           bucket_bytes=14_000)
