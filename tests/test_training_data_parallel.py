"""Data parallelism three ways: DDP's buckets by hand, step times against the alpha-beta
formulas, overlap never slower, and traffic against 2 (N-1)/N of the gradients."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, RunReached, reference_network, run_reached

import simcoll as sc
from simcoll import training as tr

UNIT = tr.GPU("1 FLOP/s", 1.0)  # FLOPs are seconds: times written by hand below
MiB = sc.MiB


def ring_time(p, nbytes):
    """Ring all-reduce on the reference network (Patarasuk & Yuan 2009)."""
    return 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * nbytes * BETA + (p - 1) / p * nbytes * GAMMA


def four_layers(forward=1e-3, backward=4e-3, mib=2):
    """Four layers of one fp16 tensor of ``mib`` MiB each; times in seconds."""
    elements = mib * MiB // 2
    return tr.Model("four", tuple(tr.Layer(f"l{i}", (elements,), forward, backward)
                                  for i in range(4)), batch=1, seq_len=1, hidden=1, heads=1)


def test_ddp_bucket_assignment_by_hand():
    sizes = [3 * MiB, 10 * MiB, 20 * MiB, MiB // 2, int(0.7 * MiB)]
    # Reverse order: 0.7 + 0.5 >= 1 MiB closes the first bucket; 20 + 10 >= 25 the
    # second; 3 MiB is left over.
    assert tr.ddp_buckets(sizes) == [[4, 3], [2, 1], [0]]
    assert tr.ddp_buckets([MiB] * 3, bucket_cap_mb=1) == [[2], [1], [0]]
    assert tr.ddp_buckets([1, 1, 1], first_bucket_mb=25) == [[2, 1, 0]]
    assert tr.ddp_buckets([]) == []
    # numpy numbers and arrays as Python's; inf: no limit, one bucket after the first.
    assert tr.ddp_buckets(np.array([MiB] * 3), bucket_cap_mb=np.float32(1)) == [[2], [1], [0]]
    assert tr.ddp_buckets([MiB] * 3, bucket_cap_mb=np.inf) == [[2], [1, 0]]
    with pytest.raises(sc.InvalidInputError, match="bucket_cap_mb=0"):
        tr.ddp_buckets([1], bucket_cap_mb=0)
    for bad in (None, 5, "ab", np.zeros((2, 2))):
        with pytest.raises(sc.InvalidInputError, match="tensor_bytes="):
            tr.ddp_buckets(bad)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_three_ways_against_the_formulas(p):
    topo = reference_network(p)
    model = four_layers()
    fwd, bwd, n = 4e-3, 16e-3, 2 * MiB
    t_a = ring_time(p, n)
    assert t_a < 4e-3  # each bucket's all-reduce fits inside a layer's backward
    ddp = tr.data_parallel(model, topo, gpu=UNIT, bucket_cap_mb=2)
    assert ddp.all_reduces == (n,) * 4
    assert ddp.step_time == pytest.approx(fwd + bwd + t_a, rel=1e-9)
    assert ddp.exposed_communication == pytest.approx(t_a, rel=1e-9)
    fused = tr.data_parallel(model, topo, strategy="fused", gpu=UNIT)
    assert fused.all_reduces == (4 * n,)
    assert fused.step_time == pytest.approx(fwd + bwd + ring_time(p, 4 * n), rel=1e-9)
    loop = tr.data_parallel(model, topo, strategy="loop", gpu=UNIT)
    assert loop.all_reduces == (n,) * 4
    assert loop.step_time == pytest.approx(fwd + bwd + 4 * t_a, rel=1e-9)
    for res, name in ((ddp, "ddp"), (fused, "fused"), (loop, "loop")):
        assert res.strategy == name
        assert {s.rank for s in res.spans} == set(range(p))
        assert sum(1 for s in res.spans if s.rank == 0 and s.stream == "dp") == len(
            res.all_reduces)
        assert res.compute_time == pytest.approx(fwd + bwd, rel=1e-12)
        assert res.scaling_efficiency == pytest.approx((fwd + bwd) / res.step_time)
        np.testing.assert_array_equal(res.run.bytes_sent, [2 * (p - 1) * 4 * n // p] * p)
        assert res.breakdown.compute == pytest.approx(fwd + bwd, rel=1e-9)
        assert res.breakdown.exposed_total + res.breakdown.idle == pytest.approx(
            res.exposed_communication, rel=1e-9)
    # DDP hides the first three buckets' all-reduces behind the next layers' backward
    # passes and exposes the last; fused and loop all-reduce after the backward pass
    assert ddp.hidden_communication == pytest.approx(3 * t_a, rel=1e-9)
    assert ddp.breakdown.hidden == {"dp": ddp.hidden_communication}
    assert fused.hidden_communication == loop.hidden_communication == 0.0


def test_ddp_first_bucket_is_one_mib():
    model = four_layers(mib=1)
    res = tr.data_parallel(model, reference_network(2), gpu=UNIT, bucket_cap_mb=2.5)
    # 1 MiB fills the first bucket alone; then 3 x 1 MiB stay under 2.5 MiB until the end.
    assert res.all_reduces == (MiB, 3 * MiB)


MODELS = [four_layers(), four_layers(forward=1e-5, backward=1e-5),
          tr.gpt(4, 256, 8, 128, 1000, batch=2)]


@pytest.mark.parametrize("model", MODELS, ids=["slow", "fast", "gpt"])
@pytest.mark.parametrize("topology", [reference_network(4), sc.topology.dgx_a100(2),
                                      sc.topology.ring(3)], ids=["switch", "dgx", "ring"])
@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling", "tree"])
def test_overlap_is_never_slower(model, topology, algorithm):
    gpu = UNIT if model.name == "four" else tr.A100
    kwargs = dict(gpu=gpu, algorithm=algorithm, bucket_cap_mb=1)
    overlapped = tr.data_parallel(model, topology, **kwargs)
    after = tr.data_parallel(model, topology, overlap=False, **kwargs)
    assert overlapped.step_time <= after.step_time * (1 + 1e-12)
    assert overlapped.all_reduces == after.all_reduces
    np.testing.assert_array_equal(overlapped.run.bytes_sent, after.run.bytes_sent)


def test_no_exposed_communication_when_it_is_free():
    free = sc.topology.switch(4, bandwidth=1e300, latency=0)
    for strategy in ("loop", "fused", "ddp"):
        res = tr.data_parallel(four_layers(), free, strategy=strategy, gpu=UNIT)
        assert res.exposed_communication == pytest.approx(0.0, abs=1e-15)
        assert res.scaling_efficiency == pytest.approx(1.0)


def test_exposed_communication_is_only_the_last_bucket_when_backward_is_long():
    # 100 GB/s and 1 us: a 2 MiB all-reduce takes ~55 us against 10 ms of backward per
    # layer; only the last bucket, launched when the backward pass ends, is exposed.
    topo = reference_network(8)
    res = tr.data_parallel(four_layers(backward=10e-3), topo, gpu=UNIT, bucket_cap_mb=2)
    assert res.exposed_communication == pytest.approx(ring_time(8, 2 * MiB), rel=1e-9)
    assert res.exposed_communication < 0.01 * 10e-3


def test_one_gpu_scales_perfectly():
    res = tr.data_parallel(four_layers(), sc.topology.switch(1), gpu=UNIT)
    assert res.step_time == pytest.approx(res.compute_time)
    assert res.scaling_efficiency == pytest.approx(1.0)
    assert res.run.bytes_sent.tolist() == [0]


@pytest.mark.parametrize("strategy", ["loop", "fused", "ddp"])
def test_one_gpu_exposes_no_communication_exactly(strategy):
    # A GPT-like model whose layer times the clock adds in another order than their
    # sum: the step ended 1.7e-18 s before the compute, read as negative communication
    # and an efficiency of 1.0000000000000002. Nothing is communicated on one GPU.
    model = tr.gpt(layers=4, hidden=1024, heads=16, seq_len=1024, vocab=32000, batch=4)
    res = tr.data_parallel(model, sc.topology.switch(1), gpu=tr.A100, strategy=strategy)
    assert res.exposed_communication == 0.0 and res.scaling_efficiency == 1.0
    step = tr.data_parallel_step(sc.topology.switch(1), gradient_bytes=4_000_000 * 11,
                                 forward=1e-3, backward=7e-3 * 11, bucket_bytes=10**6)
    assert step.exposed_communication == 0.0


def test_refusals():
    with pytest.raises(sc.InvalidInputError, match="strategy='zero'"):
        tr.data_parallel(four_layers(), sc.topology.switch(2), strategy="zero")
    with pytest.raises(sc.InvalidInputError, match="first_bucket_mb=-1"):
        tr.data_parallel(four_layers(), sc.topology.switch(2), first_bucket_mb=-1)


def test_a_parameter_server_averages_a_step_where_its_servers_are_ranks():
    # Without server hosts the server is rank 0 (servers=None): one fused all-reduce of
    # G bytes of fp16 gradients sends rank 0 (p-1) G in and out and each worker G, as
    # the parameter server's formula says. It was refused as needing server hosts.
    model = tr.gpt(layers=2, hidden=256, heads=4, seq_len=128, vocab=1000, batch=2)
    grads = model.params * 2
    dp = tr.data_parallel(model, sc.topology.switch(4), strategy="fused", gpu=tr.A100,
                          algorithm="parameter_server")
    assert dp.run.bytes_sent.tolist() == [3 * grads, grads, grads, grads]
    assert dp.run.bytes_received.tolist() == [3 * grads, grads, grads, grads]
    with pytest.raises(sc.InvalidInputError, match="runs programs on this machine's server "
                                                   "hosts"):
        tr.data_parallel(model, sc.topology.switch(4, servers=1), strategy="fused",
                         gpu=tr.A100, algorithm="parameter_server")


def test_an_all_reduce_of_exactly_the_largest_input_is_not_refused(monkeypatch):
    """3 GPUs: 2 x 3^2 x n < 2^63 for n up to (2^63 - 1) // 18 = 512409557603043100
    bytes, 256204778801521550 two-byte gradients (accepted); one gradient more is
    refused."""
    monkeypatch.setattr("simcoll.training.data_parallelism.run_program", run_reached)
    n = 256204778801521550
    edge = tr.Model("edge", (tr.Layer("a", (n,), 1.0, 1.0),), 3, 1, 1, 1)
    with pytest.raises(RunReached):
        tr.data_parallel(edge, sc.topology.switch(3))
    past = tr.Model("past", (tr.Layer("a", (n + 1,), 1.0, 1.0),), 3, 1, 1, 1)
    with pytest.raises(sc.InvalidInputError,
                       match=r"^past's largest all-reduce of gradients, 512409557603043102 "
                             r"bytes, in a collective over 3 GPUs could overflow the int64 "
                             r"traffic counters \(at most 512409557603043100 bytes\)"):
        tr.data_parallel(past, sc.topology.switch(3))
