"""Real numpy training through the simulated collectives (simcoll.numeric).

Every strategy must give, after every step, the parameters of single-process full-batch
training to float64 rounding; ranks holding copies must hold the very same numbers; each
step must report its simulated time. The reference trainer is itself checked against
finite differences and hand-worked optimizer steps, and times and traffic against
formulas worked out here.
"""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcoll as sc
from simcoll.numeric import (
    MLP,
    SGD,
    Adam,
    Batch,
    TrainingJob,
    data_parallel,
    ddp,
    ddp_buckets,
    pipeline,
    pipeline_schedule,
    shard_name,
    stage_layers,
    synthetic_batches,
    tensor_parallel,
    tp_pieces,
    train_reference,
    zero,
)
from simcoll.testing import alpha_beta_network

MODEL = MLP((8, 16, 16, 8))            # every tensor's size divides by 8
TP_MODEL = MLP((8, 16, 12, 16, 8))     # two column / row pairs
GPUS = [1, 2, 4, 8]
ALGORITHMS = ["ring", "recursive_doubling"]


def job_for(model: MLP, *, batch: int = 128, steps: int = 3, optimizer=None, seed: int = 0):
    return TrainingJob.synthetic(model, batch=batch, steps=steps,
                                 optimizer=optimizer or Adam(lr=1e-2), seed=seed)


JOB = job_for(MODEL)
REF = train_reference(JOB)
TP_JOB = job_for(TP_MODEL)
TP_REF = train_reference(TP_JOB)


def assert_close(actual, expected):
    """Equal to float64 rounding: the runs sum gradients in another order than the one
    process does (a ring's), a few ulps apart, and Adam's step divides a gradient by
    the root of its running square, so where one is near 0 the ulps grow: after 3 steps
    a parameter of 0.44 came 5.1e-13 from the reference (widths 5-4-6-3-6, ddp over 3
    replicas). Parameters are of order 1, so 1e-12 absolute still tells any real error."""
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


def assert_matches_reference(run, ref, job):
    """Parameters after every step and every step's loss equal the reference's, and every
    step reports a positive simulated time; the steps add up to the run."""
    assert run.steps == len(ref.params) == job.steps
    for step in range(job.steps):
        assert list(run.params[step]) == list(job.model.parameter_names)
        for name, expected in ref.params[step].items():
            assert run.params[step][name].shape == expected.shape
            assert_close(run.params[step][name], expected)
    np.testing.assert_allclose(run.losses, ref.losses, rtol=1e-12)
    assert len(run.step_times) == job.steps
    assert all(t > 0 for t in run.step_times)
    assert sum(run.step_times) == pytest.approx(run.time, rel=1e-12)


def assert_same_holdings(run, ranks):
    """The ranks hold exactly the same tensors (bit for bit) after every step."""
    for held in run.held:
        first = held[ranks[0]]
        for r in ranks[1:]:
            assert list(held[r]) == list(first)
            for name in first:
                np.testing.assert_array_equal(held[r][name], first[name])


def flop_seconds(model: MLP, samples: int, rate: float) -> float:
    """Forward 2*b*in*out per layer; backward twice that, once for the first layer."""
    total = 0
    for i in range(model.layers):
        fwd = 2 * samples * model.sizes[i] * model.sizes[i + 1]
        total += fwd + (2 * fwd if i > 0 else fwd)
    return total / rate


# -- the source material's example: 4 GPUs, 128 samples, 32 each -------------------------

def test_four_gpus_take_32_of_128_samples_each_and_step_like_one_process():
    alpha, beta, rate = 2e-6, 1e-11, 1e10
    topo = alpha_beta_network(4, alpha=alpha, beta=beta)
    run = data_parallel(topo, JOB, algorithm="ring", flop_rate=rate)
    assert JOB.batch == 128
    assert_matches_reference(run, REF, JOB)
    assert_same_holdings(run, [0, 1, 2, 3])
    # One ring all_reduce per tensor after the backward pass of 32 samples, each waited for.
    sizes = [v.size for v in JOB.params.values()]
    ring = sum(2 * 3 * alpha + 2 * 3 / 4 * 8 * n * beta for n in sizes)
    for t in run.step_times:
        assert t == pytest.approx(flop_seconds(MODEL, 32, rate) + ring, rel=1e-9)
    np.testing.assert_array_equal(run.run.bytes_sent, [3 * 2 * 3 * 8 * sum(sizes) // 4] * 4)


# -- the reference trainer, checked on its own ---------------------------------------------

@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_gradients_match_finite_differences(activation, loss):
    model = MLP((3, 5, 4, 3), activation=activation, loss=loss)
    job = job_for(model, batch=6, steps=1)
    params = {k: v.copy() for k, v in job.params.items()}
    batch = job.batches[0]
    value, grads = model.gradients(params, batch.x, batch.target)
    h = 1e-6
    for name, tensor in params.items():
        numeric = np.zeros_like(tensor)
        for idx in np.ndindex(tensor.shape):
            saved = tensor[idx]
            tensor[idx] = saved + h
            up, _ = model.gradients(params, batch.x, batch.target)
            tensor[idx] = saved - h
            down, _ = model.gradients(params, batch.x, batch.target)
            tensor[idx] = saved
            numeric[idx] = (up - down) / (2 * h)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-9)
    out = batch.x
    for i in range(model.layers):
        out = out @ params[f"layer{i}.weight"].T + params[f"layer{i}.bias"]
        if i < model.layers - 1:
            out = np.tanh(out) if activation == "tanh" else np.maximum(out, 0)
    if loss == "mse":
        expected = np.mean((out - batch.target) ** 2)
    else:
        p = np.exp(out) / np.exp(out).sum(axis=1, keepdims=True)
        expected = -np.mean(np.log(p[np.arange(6), batch.target]))
    assert value == pytest.approx(expected, rel=1e-12)


def test_adam_steps_worked_by_hand():
    adam = Adam(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    p0 = np.array([1.0, -2.0])
    state = adam.init(p0)
    p1, state = adam.update(p0, np.array([0.5, -4.0]), state)
    # t = 1: m_hat = g and v_hat = g^2, so the step is lr * g / (|g| + eps).
    assert_close(p1, [1.0 - 0.1 * 0.5 / (0.5 + 1e-8), -2.0 + 0.1 * 4.0 / (4.0 + 1e-8)])
    p2, state = adam.update(p1, np.array([-0.25, 0.0]), state)
    m = np.array([0.9 * 0.05 + 0.1 * -0.25, 0.9 * -0.4])
    v = np.array([0.999 * 0.00025 + 0.001 * 0.0625, 0.999 * 0.016])
    expected = p1 - 0.1 * (m / 0.19) / (np.sqrt(v / (1 - 0.999 ** 2)) + 1e-8)
    assert_close(p2, expected)
    assert state.step == 2
    assert_close(state.m, m)
    assert_close(state.v, v)


def test_reference_sgd_step_follows_the_full_batch_gradient():
    model = MLP((3, 4, 2))
    job = job_for(model, batch=10, steps=2, optimizer=SGD(lr=0.5))
    ref = train_reference(job)
    params = dict(job.params)
    for step, batch in enumerate(job.batches):
        # The full-batch gradient is the mean of the per-sample gradients.
        per_sample = [model.gradients(params, batch.x[i:i + 1], batch.target[i:i + 1])[1]
                      for i in range(10)]
        params = {k: v - 0.5 * np.mean([g[k] for g in per_sample], axis=0)
                  for k, v in params.items()}
        for k in params:
            np.testing.assert_allclose(ref.params[step][k], params[k], rtol=1e-13,
                                       atol=1e-15)
    assert not np.allclose(ref.params[-1]["layer0.weight"], job.params["layer0.weight"])


# -- data parallel: the plain loop and DDP ---------------------------------------------------

@pytest.mark.parametrize("p", GPUS)
@pytest.mark.parametrize("algorithm", ALGORITHMS + ["tree"])
def test_data_parallel_plain_loop_equals_full_batch(p, algorithm):
    run = data_parallel(sc.topology.switch(p), JOB, algorithm=algorithm)
    assert run.strategy == "data_parallel"
    assert_matches_reference(run, REF, JOB)
    assert_same_holdings(run, list(range(p)))


@pytest.mark.parametrize("p", GPUS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_ddp_buckets_equal_full_batch(p, algorithm):
    run = ddp(sc.topology.switch(p), JOB, algorithm=algorithm, bucket_bytes=1000)
    assert run.strategy == "ddp"
    assert_matches_reference(run, REF, JOB)
    assert_same_holdings(run, list(range(p)))
    # Three buckets, each launched once, one all_reduce each: ring sends 2(p-1)/p of each.
    if algorithm == "ring":
        total = sum(v.size for v in JOB.params.values())
        assert run.run.bytes_sent.sum() == 3 * 2 * (p - 1) * 8 * total


def test_ddp_buckets_follow_reverse_parameter_order():
    # 8-byte gradients: layer2 is 64 + 1024 bytes, layer1 128 + 2048, layer0 128 + 1024.
    assert ddp_buckets(MODEL, 1000) == (
        ("layer2.bias", "layer2.weight"), ("layer1.bias", "layer1.weight"),
        ("layer0.bias", "layer0.weight"))
    assert ddp_buckets(MODEL, 1088) == ddp_buckets(MODEL, 1000)
    assert ddp_buckets(MODEL, 1089) == (
        ("layer2.bias", "layer2.weight", "layer1.bias"), ("layer1.weight",),
        ("layer0.bias", "layer0.weight"))
    assert ddp_buckets(MODEL, 25 * sc.MiB) == (tuple(reversed(MODEL.parameter_names)),)
    assert ddp_buckets(MODEL, 1) == tuple((n,) for n in reversed(MODEL.parameter_names))


def test_ddp_exposes_only_the_last_bucket_when_backward_is_slow():
    alpha, beta, rate, p = 2e-6, 1e-11, 1e8, 4
    topo = alpha_beta_network(p, alpha=alpha, beta=beta)
    run = ddp(topo, JOB, algorithm="ring", bucket_bytes=1000, flop_rate=rate)
    last_bucket = 8 * (16 * 8 + 16)          # layer0's weight and bias
    exposed = 2 * (p - 1) * alpha + 2 * (p - 1) / p * last_bucket * beta
    for t in run.step_times:
        assert t == pytest.approx(flop_seconds(MODEL, 32, rate) + exposed, rel=1e-9)


def test_ddp_buckets_go_out_one_after_another():
    """Free compute, a bucket per tensor: DDP's six all-reduces run in a row on one
    stream, as the plain loop's do after the backward pass: each a ring of 2(p-1) steps
    of alpha + its block's bytes. They ran side by side, six latency-bound rings in the
    time of one."""
    alpha, beta, p = 2e-6, 1e-11, 4
    topo = alpha_beta_network(p, alpha=alpha, beta=beta)
    assert len(ddp_buckets(MODEL, 1)) == 6
    # a ring's step moves its largest block: ceil(n / p) float64s
    one_after_another = sum(2 * (p - 1) * (alpha + math.ceil(value.size / p) * 8 * beta)
                            for value in JOB.params.values())
    run = ddp(topo, JOB, algorithm="ring", bucket_bytes=1, flop_rate=math.inf)
    plain = data_parallel(topo, JOB, algorithm="ring", flop_rate=math.inf)
    for a, b in zip(run.step_times, plain.step_times):
        assert a == pytest.approx(one_after_another, rel=1e-9)
        assert b == pytest.approx(one_after_another, rel=1e-9)


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("rate", [1e8, 1e12])
def test_ddp_is_faster_than_the_plain_loop(p, algorithm, rate):
    topo = alpha_beta_network(p, alpha=2e-6, beta=1e-11)
    plain = data_parallel(topo, JOB, algorithm=algorithm, flop_rate=rate)
    bucketed = ddp(topo, JOB, algorithm=algorithm, bucket_bytes=1000, flop_rate=rate)
    for a, b in zip(bucketed.step_times, plain.step_times):
        assert a < b
    # Grouping tensors into buckets changes when bytes move, not how many.
    assert plain.run.bytes_sent.sum() == bucketed.run.bytes_sent.sum()


# -- ZeRO ---------------------------------------------------------------------------------

def expected_shard(params, layer, p, r):
    """Shard r of the layer's weight-then-bias vector, zero-padded to a multiple of p."""
    flat = np.concatenate([params[f"layer{layer}.weight"].ravel(),
                           params[f"layer{layer}.bias"]])
    size = math.ceil(flat.size / p)
    flat = np.concatenate([flat, np.zeros(size * p - flat.size)])
    return flat[r * size:(r + 1) * size]


ZERO_ALGORITHMS = [("ring", "ring"), ("recursive_halving", "recursive_doubling")]


@pytest.mark.parametrize("p", GPUS)
@pytest.mark.parametrize("stage", [1, 2, 3])
@pytest.mark.parametrize("algorithms", ZERO_ALGORITHMS)
def test_zero_stages_equal_full_batch(p, stage, algorithms):
    rs, ag = algorithms
    run = zero(sc.topology.switch(p), JOB, stage=stage, reduce_scatter=rs, all_gather=ag)
    assert run.strategy == f"zero{stage}"
    assert_matches_reference(run, REF, JOB)
    if stage < 3:
        assert_same_holdings(run, list(range(p)))
        return
    for step, held in enumerate(run.held):
        for r in range(p):
            assert list(held[r]) == [shard_name(i) for i in range(MODEL.layers)]
            for layer in range(MODEL.layers):
                assert_close(held[r][shard_name(layer)],
                             expected_shard(REF.params[step], layer, p, r))


@pytest.mark.parametrize("topology, rs, ag", [
    (sc.topology.cluster(2, 4), "ring", "bruck"),
    (sc.topology.switch(6), "nccl", "recursive_doubling"),
    (sc.topology.ring(5), "recursive_halving", "direct")])
def test_zero3_gathers_and_reduce_scatters_started_in_other_orders_on_other_ranks(
        topology, rs, ag):
    """Stage 3 starts each layer's gather and reduce-scatter as the one before it on
    its stream ends; where ranks end them at other times (bruck, recursive doubling on 6
    GPUs, two nodes) a rank may start a gather where another starts a reduce-scatter:
    the run paired them and failed, and must instead train as one process does."""
    model = MLP((16, 64, 64, 64, 4))
    job = job_for(model, batch=120, steps=2)
    run = zero(topology, job, stage=3, reduce_scatter=rs, all_gather=ag)
    assert_matches_reference(run, train_reference(job), job)


def test_zero3_pads_shards_that_do_not_divide():
    model = MLP((3, 5, 2))                  # layers of 20 and 12 elements
    job = job_for(model, batch=24)
    ref = train_reference(job)
    run = zero(sc.topology.switch(8), job, stage=3)
    assert_matches_reference(run, ref, job)
    assert [h[shard_name(0)].size for h in run.held[0]] == [3] * 8
    assert [h[shard_name(1)].size for h in run.held[0]] == [2] * 8
    for step, held in enumerate(run.held):
        for r in range(8):
            for layer in range(2):
                assert_close(held[r][shard_name(layer)],
                             expected_shard(ref.params[step], layer, 8, r))
    # The padding stays zero: its gradient is zero and so is its Adam step.
    assert np.all(run.held[-1][7][shard_name(0)][-1:] == 0.0)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_zero_traffic_is_2_psi_for_stages_1_and_2_and_3_psi_for_stage_3(p):
    psi = sum(v.size for v in JOB.params.values())       # 552, every layer divides by 8
    for stage, volume in [(1, 2), (2, 2), (3, 3)]:
        run = zero(sc.topology.switch(p), JOB, stage=stage)
        per_step = volume * (p - 1) * 8 * psi // p
        np.testing.assert_array_equal(run.run.bytes_sent, [JOB.steps * per_step] * p)
        np.testing.assert_array_equal(run.run.bytes_received, [JOB.steps * per_step] * p)


def test_zero1_and_zero2_overlap_their_reduce_scatters_with_backward():
    """Both reduce-scatter each layer's gradient from the backward pass (DeepSpeed's
    stage_1_and_2.py does so at every gradient-accumulation boundary): the same time, and
    less than the backward pass followed by every reduce-scatter, which stage 1 took."""
    alpha, beta, p, rate = 2e-6, 1e-11, 4, 1e8
    topo = alpha_beta_network(p, alpha=alpha, beta=beta)
    one, two = (zero(topo, JOB, stage=s, flop_rate=rate) for s in (1, 2))
    assert one.step_times == two.step_times
    sizes, local = MODEL.sizes, JOB.batches[0].samples // p
    flops = sum(2 * local * i * o * (3 if layer else 2)   # forward, then backward
                for layer, (i, o) in enumerate(zip(sizes, sizes[1:])))
    rings = sum(2 * (p - 1) * (alpha + math.ceil(o * (i + 1) / p) * 8 * beta)
                for i, o in zip(sizes, sizes[1:]))
    assert all(t < flops / rate + rings for t in one.step_times)


def test_numeric_steps_take_the_time_of_the_step_models():
    """The numeric strategies and simcoll.training's step models, written apart, on the
    same MLP, machine and collectives (a layer's weight and bias as one tensor for ZeRO,
    one bucket per layer): the same step time. ZeRO-1 once reduce-scattered after the
    backward pass (2.9% slower than zero_step); ZeRO-3's backward gather of the last
    layer, which both take once that layer's forward is done, differed by 0.23% while
    one of them took it during that forward."""
    sizes, p, batch, rate = (512, 1024, 1024, 1024, 512), 4, 512, 10e12
    topo = sc.topology.switch(p, bandwidth=10 * sc.GB, latency=5 * sc.us)
    job = TrainingJob.synthetic(MLP(sizes), batch=batch, steps=1, optimizer=SGD(0.1))
    gpu = sc.training.GPU("sim", rate)
    precision = sc.training.Precision(param_bytes=8, grad_bytes=8, optimizer_bytes=0,
                                      activation_bytes=8)

    def model(flat: bool) -> sc.training.Model:
        layers = []
        for layer, (i, o) in enumerate(zip(sizes, sizes[1:])):
            flops = 2 * (batch // p) * i * o
            tensors = (o * (i + 1),) if flat else (o * i, o)
            layers.append(sc.training.Layer(f"l{layer}", tensors, flops,
                                            flops * (2 if layer else 1)))
        return sc.training.Model("mlp", tuple(layers), batch=1, seq_len=1, hidden=1, heads=1,
                                 precision=precision)

    pairs = [(data_parallel(topo, job, flop_rate=rate),
              sc.training.data_parallel(model(False), topo, strategy="loop", gpu=gpu))]
    for cap in (25 * sc.MiB, 4 * sc.MiB, 1):
        pairs.append((ddp(topo, job, bucket_bytes=cap, flop_rate=rate),
                      sc.training.data_parallel(model(False), topo, strategy="ddp", gpu=gpu,
                                                bucket_cap_mb=cap / sc.MiB,
                                                first_bucket_mb=cap / sc.MiB)))
    for stage in (1, 2, 3):
        pairs.append((zero(topo, job, stage=stage, flop_rate=rate),
                      sc.training.zero_step(model(True), topo, stage=stage, gpu=gpu,
                                            bucket_cap_mb=1e-9, first_bucket_mb=1e-9)))
    for numeric, step in pairs:
        assert numeric.step_times[0] == pytest.approx(step.step_time, rel=1e-9)


# -- pipeline -----------------------------------------------------------------------------

@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_two_stage_pipeline_equals_full_batch(p, schedule, algorithm):
    run = pipeline(sc.topology.switch(p), JOB, stages=2, micro_batches=4, schedule=schedule,
                   algorithm=algorithm)
    assert run.strategy == f"pipeline-{schedule}"
    assert_matches_reference(run, REF, JOB)
    stage_names = [["layer0.weight", "layer0.bias", "layer1.weight", "layer1.bias"],
                   ["layer2.weight", "layer2.bias"]]
    for step, held in enumerate(run.held):
        for r in range(p):
            assert list(held[r]) == stage_names[r % 2]
            for name in stage_names[r % 2]:
                assert_close(held[r][name], REF.params[step][name])
    for stage in (0, 1):
        assert_same_holdings(run, list(range(stage, p, 2)))


def test_pipeline_sends_activations_forward_and_their_gradients_back():
    run = pipeline(sc.topology.switch(2), JOB, stages=2, micro_batches=4)
    # Every sample's 16 activations at the cut go forward once, their gradients back once.
    per_step = 128 * 16 * 8
    np.testing.assert_array_equal(run.run.bytes_sent, [3 * per_step] * 2)
    assert run.run.messages == 3 * 2 * 4


def test_pipeline_schedules_by_hand():
    assert pipeline_schedule("gpipe", 2, 0, 3) == (
        ("F", 0), ("F", 1), ("F", 2), ("B", 2), ("B", 1), ("B", 0))
    assert pipeline_schedule("1f1b", 2, 0, 4) == (
        ("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3))
    assert pipeline_schedule("1f1b", 2, 1, 4) == (
        ("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3))
    for stages in (2, 3, 4):
        for stage in range(stages):
            order = pipeline_schedule("1f1b", stages, stage, 8)
            in_flight = np.cumsum([1 if kind == "F" else -1 for kind, _ in order])
            assert in_flight.max() == stages - stage
            assert sorted(order) == sorted(pipeline_schedule("gpipe", stages, stage, 8))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_time_is_the_schedule_critical_path_when_communication_is_free(schedule):
    rate, m = 1e9, 4
    topo = sc.topology.switch(2, bandwidth=1e30, latency=0.0)
    run = pipeline(topo, JOB, stages=2, micro_batches=m, schedule=schedule, flop_rate=rate)
    b = 32                                          # samples per micro-batch
    forward = [(2 * b * 8 * 16 + 2 * b * 16 * 16) / rate, 2 * b * 16 * 8 / rate]
    backward = [(2 * b * 8 * 16 + 4 * b * 16 * 16) / rate, 4 * b * 16 * 8 / rate]
    orders = {"gpipe": [[("F", i) for i in range(m)] + [("B", i) for i in (3, 2, 1, 0)]] * 2,
              "1f1b": [[("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3),
                        ("B", 2), ("B", 3)],
                       [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2),
                        ("F", 3), ("B", 3)]]}[schedule]
    # Longest path: an op starts when its stage is free and its input exists.
    end: dict = {}
    pending = [list(orders[0]), list(orders[1])]
    free = [0.0, 0.0]
    while pending[0] or pending[1]:
        for s in (0, 1):
            while pending[s]:
                kind, i = pending[s][0]
                need = (kind, s - 1, i) if kind == "F" and s == 1 else \
                    (kind, s + 1, i) if kind == "B" and s == 0 else None
                if need is not None and need not in end:
                    break
                start = max(free[s], end.get(need, 0.0))
                free[s] = end[(kind, s, i)] = start + (forward if kind == "F" else backward)[s]
                pending[s].pop(0)
    for t in run.step_times:
        assert t == pytest.approx(max(free), rel=1e-9)


# -- tensor parallel ----------------------------------------------------------------------

def expected_pieces(params, index):
    """2-way Megatron split of TP_MODEL: rows of layers 0 and 2, columns of 1 and 3."""
    rows = slice(8 * index, 8 * index + 8)
    return {"layer0.weight": params["layer0.weight"][rows], "layer0.bias":
            params["layer0.bias"][rows], "layer1.weight": params["layer1.weight"][:, rows],
            "layer1.bias": params["layer1.bias"], "layer2.weight":
            params["layer2.weight"][rows], "layer2.bias": params["layer2.bias"][rows],
            "layer3.weight": params["layer3.weight"][:, rows],
            "layer3.bias": params["layer3.bias"]}


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_two_way_tensor_parallel_equals_full_batch(p, algorithm):
    run = tensor_parallel(sc.topology.switch(p), TP_JOB, tp=2, algorithm=algorithm)
    assert run.strategy == "tensor_parallel"
    assert_matches_reference(run, TP_REF, TP_JOB)
    for step, held in enumerate(run.held):
        for r in range(p):
            expected = expected_pieces(TP_REF.params[step], r % 2)
            assert list(held[r]) == list(expected)
            for name, value in expected.items():
                assert held[r][name].shape == value.shape
                assert_close(held[r][name], value)
    for index in (0, 1):
        assert_same_holdings(run, list(range(index, p, 2)))


def test_tensor_parallel_all_reduces_once_forward_and_once_backward_per_pair():
    run = tensor_parallel(sc.topology.switch(2), TP_JOB, tp=2, algorithm="ring")
    # Forward: the 128 x 12 output of pair 0 and the 128 x 8 output of pair 1; backward:
    # the 128 x 12 input gradient of pair 1 (pair 0's input is the data). A 2-rank ring
    # sends half of each buffer twice, so a whole buffer per rank, in two messages.
    per_step = 8 * (128 * 12 + 128 * 8 + 128 * 12)
    np.testing.assert_array_equal(run.run.bytes_sent, [3 * per_step] * 2)
    assert run.run.messages == 3 * 3 * 2 * 2


# -- other models and optimizers -----------------------------------------------------------

STRATEGIES = {
    "data_parallel": lambda topo, job: data_parallel(topo, job, algorithm="tree"),
    "ddp": lambda topo, job: ddp(topo, job, bucket_bytes=1),
    "zero1": lambda topo, job: zero(topo, job, stage=1),
    "zero3": lambda topo, job: zero(topo, job, stage=3),
    "pipeline": lambda topo, job: pipeline(topo, job, stages=2, micro_batches=2),
    "tensor_parallel": lambda topo, job: tensor_parallel(topo, job, tp=2),
}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_cross_entropy_relu_and_sgd_train_the_same(strategy):
    model = MLP((6, 8, 8, 6, 4), loss="cross_entropy", activation="relu")
    job = job_for(model, batch=32, optimizer=SGD(lr=0.3), seed=3)
    ref = train_reference(job)
    run = STRATEGIES[strategy](sc.topology.switch(4), job)
    assert_matches_reference(run, ref, job)
    assert ref.losses[-1] < ref.losses[0]


def test_three_stage_pipeline_and_four_way_tensor_parallel():
    four_layers = MLP((8, 16, 12, 16, 8))
    job = job_for(four_layers)
    ref = train_reference(job)
    assert_matches_reference(pipeline(sc.topology.switch(6), job, stages=3, micro_batches=2,
                                      schedule="1f1b"), ref, job)
    assert_matches_reference(tensor_parallel(sc.topology.switch(8), job, tp=4), ref, job)


# -- bad input, refused before the run -----------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: stage_layers(3, 0), r"stages=0 is not accepted"),
    (lambda: stage_layers(3, 5), r"stages=5 is more than the model's 3 layers"),
    (lambda: stage_layers(0, 1), r"layers=0 is not accepted"),
    (lambda: pipeline_schedule("zb", 2, 0, 4), r"schedule='zb' is not accepted"),
    (lambda: pipeline_schedule("gpipe", 2, 2, 4), r"stage=2 is not accepted; use an integer "
                                                  r">= 0 and <= 1"),
    (lambda: pipeline_schedule("1f1b", 2, 0, 0), r"micro_batches=0 is not accepted"),
    (lambda: tp_pieces(MODEL, JOB.params, 2, 0), r"3 layers, use an even number"),
    (lambda: tp_pieces(TP_JOB.model, TP_JOB.params, 2, 2), r"index=2 is not accepted; use "
                                                          r"an integer >= 0 and <= 1"),
    (lambda: tp_pieces(TP_JOB.model, TP_JOB.params, 32, 0), r"tp=32 is more than 16"),
    (lambda: shard_name(-1), r"layer=-1 is not accepted"),
    (lambda: tp_pieces("mlp", TP_JOB.params, 2, 0), r"^model='mlp' is not accepted; use a "
                                                   r"simcoll.numeric.MLP"),
    (lambda: tp_pieces(TP_JOB.model, {"w": 1.0}, 2, 0), r"^params must be a dict of "
                                                       r"layer0.weight, .*; got \['w'\]"),
    (lambda: TrainingJob.synthetic("mlp", batch=8, steps=1, optimizer=SGD(lr=0.1)),
     r"^model='mlp' is not accepted"),
    (lambda: synthetic_batches("mlp", batch=8, steps=1), r"^model='mlp' is not accepted"),
    (lambda: ddp_buckets("mlp", 100), r"^model='mlp' is not accepted"),
])
def test_the_exported_helpers_refuse_what_their_runs_refuse(call, match):
    """stage_layers(3, 5) gave two empty stages, pipeline_schedule('zb', ...) a 1F1B
    order, tp_pieces an IndexError (a KeyError for params of other names),
    shard_name(-1) 'layer-1.shard'; a model that is not an MLP gave TrainingJob.synthetic,
    synthetic_batches and ddp_buckets an AttributeError."""
    with pytest.raises(sc.InvalidInputError, match=match):
        call()


def test_bad_configurations_are_refused_with_clear_errors():
    four = sc.topology.switch(4)
    odd_batch = job_for(MODEL, batch=30)
    with pytest.raises(sc.InvalidInputError, match=r"30 samples.*4 data-parallel"):
        data_parallel(four, odd_batch)
    with pytest.raises(sc.InvalidInputError, match=r"30 samples.*4 data-parallel"):
        zero(four, odd_batch, stage=2)
    with pytest.raises(sc.InvalidInputError, match=r"micro_batches=3 does not divide the 64"):
        pipeline(four, JOB, stages=2, micro_batches=3)
    with pytest.raises(sc.InvalidInputError, match=r"stages=4 is more than the model's 3"):
        pipeline(four, JOB, stages=4)
    with pytest.raises(sc.InvalidInputError, match=r"stages=3 does not divide the 4 GPUs"):
        pipeline(four, JOB, stages=3)
    with pytest.raises(sc.InvalidInputError, match=r"schedule='zb'"):
        pipeline(four, JOB, schedule="zb")
    with pytest.raises(sc.InvalidInputError, match=r"3 layers, use an even number"):
        tensor_parallel(four, JOB)
    with pytest.raises(sc.InvalidInputError, match=r"tp=3 does not divide the 4 GPUs"):
        tensor_parallel(four, TP_JOB, tp=3)
    with pytest.raises(sc.InvalidInputError, match=r"tp=32 is more than 16"):
        tensor_parallel(sc.topology.switch(32), TP_JOB, tp=32)
    for stage in (0, 4, True):
        with pytest.raises(sc.InvalidInputError, match=r"stage="):
            zero(four, JOB, stage=stage)
    with pytest.raises(sc.UnknownAlgorithmError, match=r"'rign'.*ring"):
        data_parallel(four, JOB, algorithm="rign")
    with pytest.raises(sc.UnknownAlgorithmError, match=r"all_gather"):
        zero(four, JOB, stage=1, all_gather="recursive_halving")
    with pytest.raises(sc.InvalidInputError, match=r"parameter_server.*server hosts"):
        ddp(sc.topology.switch(4, servers=1), JOB, algorithm="parameter_server")
    with pytest.raises(sc.InvalidInputError, match=r"flop_rate=0"):
        data_parallel(four, JOB, flop_rate=0)
    with pytest.raises(sc.InvalidInputError, match=r"bucket_bytes=0"):
        ddp(four, JOB, bucket_bytes=0)
    with pytest.raises(sc.InvalidInputError, match=r"TrainingJob"):
        data_parallel(four, REF)


def _gpus_on_nodes(nodes):
    """A switch with one GPU per entry of ``nodes``, on that node."""
    topo = sc.Topology("interleaved")
    hub = topo.add_switch("sw")
    for node in nodes:
        topo.add_link(topo.add_gpu(node=node), hub, bandwidth=100e9, latency=1e-6)
    return topo


GROUPED_RUNS = {
    "pipeline": lambda topo, algorithm: pipeline(topo, job_for(MODEL, batch=12), stages=2,
                                                 micro_batches=2, algorithm=algorithm),
    "tensor_parallel": lambda topo, algorithm: tensor_parallel(
        topo, job_for(TP_MODEL, batch=12), tp=2, algorithm=algorithm),
}
"""The strategies that run collectives on groups of ranks, on a machine and algorithm."""


@pytest.mark.parametrize("strategy", GROUPED_RUNS)
def test_every_group_is_checked_before_the_run(strategy):
    """Ranks 0, 2, 4 sit on nodes 0, 1, 2 (one GPU each: hierarchical takes them) and
    ranks 1, 3, 5 on nodes 0, 0, 1 (two GPUs on one node, one on the other: it refuses
    them); the second group, not only the first, is checked before anything runs."""
    with pytest.raises(sc.InvalidInputError,
                       match=r"group of ranks \[1, 3, 5\]: hierarchical.*same number"):
        GROUPED_RUNS[strategy](_gpus_on_nodes([0, 0, 1, 0, 2, 1]), "hierarchical")


def test_bad_models_and_jobs_are_refused():
    with pytest.raises(sc.InvalidInputError, match=r"sizes=\(4,\)"):
        MLP((4,))
    with pytest.raises(sc.InvalidInputError, match=r"sizes\[1\] = 0"):
        MLP((4, 0, 2))
    with pytest.raises(sc.InvalidInputError, match=r"activation='gelu'"):
        MLP((4, 2), activation="gelu")
    with pytest.raises(sc.InvalidInputError, match=r"loss='l1'"):
        MLP((4, 2), loss="l1")
    with pytest.raises(sc.InvalidInputError, match=r"lr=-1"):
        Adam(lr=-1)
    for name, value in [("beta2", 1.0), ("beta1", -0.5), ("beta2", float("nan")),
                        ("beta1", "0.9"), ("beta1", True)]:
        # every refusal gives the range (a negative or NaN one said ">= 0, finite")
        with pytest.raises(sc.InvalidInputError,
                           match=rf"^{name}={value!r} is not accepted; use a number in "
                                 rf"\[0, 1\)$"):
            Adam(**{name: value})
    with pytest.raises(sc.InvalidInputError, match=r"optimizer="):
        TrainingJob(MODEL, JOB.params, JOB.batches, "adam")
    bad = dict(JOB.params, **{"layer0.bias": np.zeros(3)})
    with pytest.raises(sc.InvalidInputError, match=r"layer0.bias.*\(3,\).*\(16,\)"):
        TrainingJob(MODEL, bad, JOB.batches, Adam())
    short = Batch(np.zeros((4, 7)), np.zeros((4, 8)))
    with pytest.raises(sc.InvalidInputError, match=r"batches\[0\].x has shape \(4, 7\)"):
        TrainingJob(MODEL, JOB.params, (short,), Adam())
    # a 0-d x gave an IndexError; a 1-D one was measured against a sample count read from
    # its feature axis ("needs (8, 8)")
    for x in (np.array(1.0), np.zeros(8)):
        with pytest.raises(sc.InvalidInputError, match=rf"^batches\[0\].x has shape "
                                                       rf"{re.escape(str(x.shape))}; give a "
                                                       rf"2-D array, samples x 8 inputs$"):
            TrainingJob(MODEL, JOB.params, (Batch(x, np.zeros((1, 8))),), Adam())
    with pytest.raises(sc.InvalidInputError, match=r"non-empty"):
        TrainingJob(MODEL, JOB.params, (), Adam())
    ce = MLP((8, 3), loss="cross_entropy")
    with pytest.raises(sc.InvalidInputError, match=r"class indices outside 0..2"):
        TrainingJob(ce, ce.init(), (Batch(np.zeros((2, 8)), np.array([0, 3])),), Adam())


def test_jobs_cannot_be_changed_by_a_run():
    params = {k: v.copy() for k, v in JOB.params.items()}
    data_parallel(sc.topology.switch(2), JOB)
    zero(sc.topology.switch(2), JOB, stage=3)
    for name, value in params.items():
        np.testing.assert_array_equal(JOB.params[name], value)
        assert not JOB.params[name].flags.writeable


# -- random shapes: uneven shards, uneven tensor-parallel splits, odd GPU counts -----------

@settings(max_examples=25, deadline=None)
@given(widths=st.lists(st.integers(2, 7), min_size=5, max_size=5),
       layers=st.sampled_from([2, 4]), replicas=st.integers(1, 3), per_replica=st.integers(1, 3),
       strategy=st.sampled_from(["ddp", "zero2", "zero3", "pipeline", "tensor_parallel"]),
       algorithm=st.sampled_from(["ring", "recursive_doubling", "tree", "direct"]),
       zero_algorithms=st.sampled_from(ZERO_ALGORITHMS + [("pairwise", "bruck"),
                                                          ("direct", "direct")]))
def test_random_shapes_train_like_one_process(widths, layers, replicas, per_replica, strategy,
                                              algorithm, zero_algorithms):
    model = MLP(tuple(widths[:layers + 1]))
    model_parallel = 2 if strategy in ("pipeline", "tensor_parallel") else 1
    job = job_for(model, batch=replicas * per_replica * 2, steps=2, seed=sum(widths))
    topo = sc.topology.switch(replicas * model_parallel)
    if strategy == "ddp":
        run = ddp(topo, job, bucket_bytes=8 * widths[0], algorithm=algorithm)
    elif strategy.startswith("zero"):
        rs, ag = zero_algorithms
        run = zero(topo, job, stage=int(strategy[-1]), reduce_scatter=rs, all_gather=ag)
    elif strategy == "pipeline":
        run = pipeline(topo, job, stages=2, micro_batches=2, algorithm=algorithm)
    else:
        run = tensor_parallel(topo, job, tp=2, algorithm=algorithm)
    assert_matches_reference(run, train_reference(job), job)


@pytest.mark.parametrize("make, match", [
    (lambda m: TrainingJob(m, m.init(0), [Batch(np.zeros((0, 4)), np.zeros((0, 2)))],
                           SGD(0.1)), "batches\\[0\\] has no sample"),
    (lambda m: TrainingJob(m, m.init(0), [Batch([[0.0] * 4] * 2, np.zeros((2, 2)))],
                           SGD(0.1)), "holds list inputs and ndarray targets"),
    (lambda m: m.init(-1), "seed=-1 is not accepted"),
    # NaN or infinities trained every rank to NaN without an error.
    (lambda m: TrainingJob(m, m.init(0), [Batch(np.array([[0.0, 1.0, np.nan, 0.0]] * 2),
                                                np.zeros((2, 2)))], SGD(0.1)),
     r"batches\[0\].x holds 2 NaN or infinite value\(s\), the first nan at index \(0, 2\)"),
    (lambda m: TrainingJob(m, m.init(0), [Batch(np.zeros((2, 4)),
                                                np.array([[0.0, np.inf], [0.0, 0.0]]))],
                           SGD(0.1)), r"batches\[0\].target holds 1 .* inf at index \(0, 1\)"),
    (lambda m: TrainingJob(m, dict(m.init(0), **{"layer0.bias": np.array([0.0, -np.inf])}),
                           [Batch(np.zeros((2, 4)), np.zeros((2, 2)))], SGD(0.1)),
     r"params\['layer0.bias'\] holds 1 .* -inf at index \(1,\)"),
    (lambda m: TrainingJob.synthetic(m, batch=2, steps=1, optimizer=SGD(0.1), seed=1.5),
     "seed=1.5 is not accepted"),
])
def test_jobs_that_cannot_train_are_refused_by_name(make, match):
    # An empty batch divided by zero inside every strategy; the others raised numpy's or
    # Python's own errors.
    with pytest.raises(sc.InvalidInputError, match=match):
        make(MLP((4, 2)))


def test_a_parameter_server_trains_like_one_process_where_its_servers_are_ranks():
    # On a machine without server hosts the server is rank 0: the loop and DDP average
    # the gradients through it and train as the one-process reference does (they were
    # refused as needing server hosts).
    four = sc.topology.switch(4)
    assert_matches_reference(data_parallel(four, JOB, algorithm="parameter_server"), REF, JOB)
    assert_matches_reference(ddp(four, JOB, algorithm="parameter_server"), REF, JOB)


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_runs_its_layers_collectives_one_after_another(stage):
    """Free compute: a step is every layer's reduce-scatter, then every layer's
    all-gather, each a ring of p - 1 steps of alpha + its largest block, in a row on their
    streams (stage 2 starts the reduce-scatters during the backward pass, which takes no
    time here). They ran side by side, the layers in one layer's time."""
    alpha, beta, p = 2e-6, 1e-11, 4
    topo = alpha_beta_network(p, alpha=alpha, beta=beta)
    layers = [np.concatenate([JOB.params[f"layer{i}.weight"].ravel(),
                              JOB.params[f"layer{i}.bias"]]).size
              for i in range(MODEL.layers)]
    one_after_another = sum(2 * (p - 1) * (alpha + math.ceil(n / p) * 8 * beta)
                            for n in layers)
    run = zero(topo, JOB, stage=stage, flop_rate=math.inf)
    for t in run.step_times:
        assert t == pytest.approx(one_after_another, rel=1e-9)


def test_a_job_takes_exactly_the_models_float64_params_as_read_only_copies():
    """TrainingJob's checks moved to check_model and checked_params: a model that is not
    an MLP, params with a name too many or of float32, are refused by name, and the job
    keeps read-only copies, not the caller's arrays."""
    with pytest.raises(sc.InvalidInputError, match=r"^model='mlp' is not accepted; use a "
                                                   r"simcoll.numeric.MLP$"):
        TrainingJob("mlp", JOB.params, JOB.batches, Adam())
    extra = {**JOB.params, "layer3.weight": np.zeros((8, 8))}
    with pytest.raises(sc.InvalidInputError, match=r"^params must be a dict of "
                                                   r"layer0.weight, .*; got \[.*'layer3.weight'"):
        TrainingJob(MODEL, extra, JOB.batches, Adam())
    single = {name: value.astype(np.float32) for name, value in JOB.params.items()}
    with pytest.raises(sc.InvalidInputError,
                       match=r"^params\['layer0.weight'\] has shape \(16, 8\) and dtype "
                             r"float32; the model needs \(16, 8\), float64$"):
        TrainingJob(MODEL, single, JOB.batches, Adam())
    mine = {name: value.copy() for name, value in JOB.params.items()}
    job = TrainingJob(MODEL, mine, JOB.batches, Adam())
    mine["layer0.weight"][...] = 0.0   # the caller's array, not the job's
    assert not any(value.flags.writeable for value in job.params.values())
    np.testing.assert_array_equal(job.params["layer0.weight"], JOB.params["layer0.weight"])


def test_params_of_keys_that_do_not_sort_together_are_refused_by_name():
    with pytest.raises(sc.InvalidInputError, match=r"^params must be a dict of layer0.weight, "
                                                   r"layer0.bias for \(4, 2\); got \[1, "
                                                   r"'layer0.weight'\]$"):
        TrainingJob(MLP((4, 2)), {1: np.zeros(2), "layer0.weight": np.zeros((2, 4))},
                    JOB.batches, Adam())


def test_a_model_past_memory_is_refused_before_its_parameters_are_drawn(monkeypatch):
    """MLP((3, 4, 2)) has 4 x 3 + 4 + 2 x 4 + 2 = 26 float64 parameters, 208 bytes: drawn
    where 208 bytes are free, refused where 207 are (a model of 10^14 parameters raised
    numpy's MemoryError, or met the out-of-memory killer)."""
    from simcoll import memory
    monkeypatch.setattr(memory, "memory_limit", lambda: (208, "this machine's"))
    assert sum(v.size for v in MLP((3, 4, 2)).init().values()) == 26
    monkeypatch.setattr(memory, "memory_limit", lambda: (207, "this machine's"))
    with pytest.raises(sc.InvalidInputError,
                       match=r"^MLP\(\(3, 4, 2\)\).init\(\) needs about 0.000000194 GiB for "
                             r"its float64 parameters alone, more than this machine's "
                             r"0.000000193 GiB; use narrower layers$"):
        MLP((3, 4, 2)).init()


def test_tp_pieces_takes_params_as_a_job_takes_them():
    """tp_pieces reads params through checked_params: nested lists of floats are taken
    as a job takes them (cut as the arrays are), float32 is refused by name."""
    want = tp_pieces(TP_JOB.model, TP_JOB.params, 2, 1)
    got = tp_pieces(TP_JOB.model, {k: v.tolist() for k, v in TP_JOB.params.items()}, 2, 1)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    with pytest.raises(sc.InvalidInputError, match=r"^params\['layer0.weight'\] has shape "
                                                   r"\(16, 8\) and dtype float32"):
        tp_pieces(TP_JOB.model, {k: v.astype(np.float32) for k, v in TP_JOB.params.items()},
                  2, 0)


def test_tensor_parallel_ranks_hold_views_of_the_jobs_parameters(monkeypatch):
    """Each rank's pieces are views of the job's checked, read-only arrays: they were cut
    from a copy tp_pieces made per rank (a whole model held on every rank)."""
    module = sys.modules["simcoll.numeric.tensor_parallel"]   # the name is the function's
    copies = []
    real = module.checked_params
    monkeypatch.setattr(module, "checked_params",
                        lambda *args: copies.append(1) or real(*args))
    views = []
    real_pieces = module._pieces

    def pieces(model, params, tp, index):
        out = real_pieces(model, params, tp, index)
        views.append(all(np.shares_memory(out[name], params[name]) and
                         params[name] is TP_JOB.params[name] for name in out))
        return out

    monkeypatch.setattr(module, "_pieces", pieces)
    run = tensor_parallel(sc.topology.switch(4), TP_JOB, tp=2)
    assert copies == [] and views == [True] * 4
    assert_matches_reference(run, train_reference(TP_JOB), TP_JOB)


def test_a_tensor_parallel_group_is_checked_before_the_run():
    """tp=3 on nodes 0, 0, 1, 2, 3, 4: the tensor-parallel group of ranks 0-2 sits 2 + 1
    on two nodes, which hierarchical refuses; the data-parallel pairs (0, 3), (1, 4),
    (2, 5) sit one GPU a node (mutant: only the data-parallel groups checked, and the
    run went ahead)."""
    with pytest.raises(sc.InvalidInputError,
                       match=r"group of ranks \[0, 1, 2\]: hierarchical.*same number"):
        tensor_parallel(_gpus_on_nodes([0, 0, 1, 2, 3, 4]), job_for(TP_MODEL, batch=12), tp=3,
                        algorithm="hierarchical")


@pytest.mark.parametrize("strategy", GROUPED_RUNS)
def test_an_unknown_algorithm_is_refused_as_unknown_not_as_a_groups(strategy):
    """An unknown name is no group's refusal: UnknownAlgorithmError, listing the known
    ones, without 'the group of ranks' (mutant: every InvalidInputError wrapped as a
    group's plain InvalidInputError)."""
    with pytest.raises(sc.UnknownAlgorithmError, match=r"^unknown algorithm "
                                                       r"'no_such_algorithm' for 'all_reduce'"):
        GROUPED_RUNS[strategy](_gpus_on_nodes([0, 0, 1, 1]), "no_such_algorithm")
