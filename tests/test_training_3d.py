"""Tensor parallelism and the 3D-parallel step: traffic and times against formulas,
placements, memory, MFU, the time identity, the timeline, and refusals before the run."""

from __future__ import annotations

from dataclasses import replace

import matplotlib
import numpy as np
import pytest
from conftest import (
    ALPHA,
    BETA,
    GAMMA,
    NO_FORMULA,
    RunReached,
    reference_network,
    run_reached,
)

import simcoll as sc
import simcoll.training.parallel3d as parallel3d
from simcoll import training as tr
from simcoll.errors import InvalidInputError
from simcoll.training.model import Precision
from simcoll.training.streams import Span

matplotlib.use("Agg")
UNIT = tr.GPU("1 FLOP/s", 1.0)


def ring_time(p, nbytes):
    return 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * nbytes * BETA + (p - 1) / p * nbytes * GAMMA


def uniform(blocks, seconds_fwd=1e-3, params=4096, batch=8):
    """``blocks`` equal blocks of one tensor each; forward FLOPs are seconds on UNIT."""
    layer = [tr.Layer(f"b{i}", (params,), seconds_fwd, 2 * seconds_fwd, block=True)
             for i in range(blocks)]
    return tr.Model("uniform", tuple(layer), batch=batch, seq_len=16, hidden=64, heads=8)


@pytest.mark.parametrize("t", [2, 4, 8])
@pytest.mark.parametrize("sp", [False, True])
def test_tensor_parallel_traffic(t, sp):
    model = tr.gpt(2, 256, 8, 64, 1000, batch=2)
    res = tr.tensor_parallel_layer(model, sc.topology.switch(t), tp=t, sequences=2,
                                   sequence_parallel=sp)
    bsh = 2 * 64 * 256 * 2  # bytes of b x s x h fp16
    # Four ring all-reduces, 2 (t-1)/t bsh each; or, with sequence parallelism, four
    # reduce-scatters and four all-gathers, (t-1)/t bsh each, and the backward pass's two
    # all-gathers of the column-parallel layers' inputs (Megatron-LM's
    # LinearWithGradAccumulationAndAsyncCommunication.backward): 10 in all.
    halves = 10 if sp else 8
    np.testing.assert_array_equal(res.bytes_sent, [halves * (t - 1) * bsh // t] * t)
    kinds = sorted(s.kind for s in res.spans if s.rank == 0 and s.stream == "tp")
    assert kinds == (["all_gather"] * 6 + ["reduce_scatter"] * 4 if sp else ["all_reduce"] * 4)
    assert res.time == pytest.approx(res.forward_time + res.backward_time)


@pytest.mark.parametrize("rate", [1e12, 1e18])
def test_sequence_parallel_times_on_the_reference_network(rate):
    """t = 2. Forward, each half: an all-gather of the b s h / t shard, the half's compute,
    a reduce-scatter of b s h. Backward, each half: the all-gather, then the half's
    compute beside the all-gather of its first layer's input, then the reduce-scatter,
    which waits for both. At 1e12 FLOP/s the compute hides that all-gather; at 1e18 the
    all-gather is what the reduce-scatter waits for."""
    t = 2
    model = tr.gpt(1, 128, 4, 32, 100, batch=1)
    res = tr.tensor_parallel_layer(model, reference_network(t), tp=t,
                                   gpu=tr.GPU("gpu", rate), sequence_parallel=True)
    block = model.layers[1]
    bsh = 32 * 128 * 2
    ag = (t - 1) * (ALPHA + bsh / t * BETA)                   # ring all_gather, n = bsh / t
    rs = (t - 1) * (ALPHA + bsh / t * BETA + bsh / t * GAMMA)  # ring reduce_scatter
    fwd, bwd = block.forward_flops / t / rate, block.backward_flops / t / rate
    share = block.attention_share
    assert res.forward_time == pytest.approx(2 * ag + fwd + 2 * rs, rel=1e-9)
    assert res.backward_time == pytest.approx(
        2 * ag + max(bwd * (1 - share), ag) + max(bwd * share, ag) + 2 * rs, rel=1e-9)
    assert res.communication_time == pytest.approx(6 * ag + 4 * rs, rel=1e-9)


@pytest.mark.parametrize("t", [2, 4])
def test_tensor_parallel_time_on_the_reference_network(t):
    model = tr.gpt(1, 128, 4, 32, 100, batch=1)
    gpu = tr.GPU("slow", 1e12)
    res = tr.tensor_parallel_layer(model, reference_network(t), tp=t, gpu=gpu)
    block = model.layers[1]
    bsh = 32 * 128 * 2
    fwd = block.forward_flops / t / 1e12
    assert res.compute_time == pytest.approx(3 * fwd)
    assert res.forward_time == pytest.approx(fwd + 2 * ring_time(t, bsh), rel=1e-9)
    assert res.time == pytest.approx(3 * fwd + 4 * ring_time(t, bsh), rel=1e-9)
    assert res.communication_time == pytest.approx(4 * ring_time(t, bsh), rel=1e-9)


def test_tensor_parallel_inside_a_node_beats_across_nodes():
    topo = sc.topology.dgx_h100(2)
    model = tr.llama_7b()
    inside = tr.tensor_parallel_layer(model, topo, tp=2, ranks=[0, 1])
    across = tr.tensor_parallel_layer(model, topo, tp=2, ranks=[0, 8])
    assert inside.communication_time * 5 < across.communication_time
    np.testing.assert_array_equal(inside.bytes_sent, across.bytes_sent)
    assert inside.compute_time == across.compute_time
    alone = tr.tensor_parallel_layer(model, topo, tp=1)
    assert alone.communication_time == 0 and alone.time == pytest.approx(alone.compute_time)


def test_placement_round_trip_and_default_order():
    pl = tr.Placement(dp=2, tp=4, pp=3)
    ranks = [pl.rank(d, s, t) for d in range(2) for s in range(3) for t in range(4)]
    assert sorted(ranks) == list(range(24))
    assert all(pl.coords(pl.rank(d, s, t)) == (d, s, t)
               for d in range(2) for s in range(3) for t in range(4))
    assert [pl.rank(0, 0, t) for t in range(4)] == [0, 1, 2, 3]  # TP consecutive
    assert [pl.rank(0, s, 0) for s in range(3)] == [0, 4, 8]
    assert [pl.rank(d, 0, 0) for d in range(2)] == [0, 12]
    other = tr.Placement(dp=2, tp=4, pp=3, order=("dp", "tp", "pp"))
    assert [other.rank(d, 0, 0) for d in range(2)] == [0, 1]


@pytest.mark.parametrize("p,m,schedule", [(2, 4, "1f1b"), (4, 4, "gpipe"), (4, 8, "1f1b"),
                                          (3, 2, "1f1b")])
def test_pipeline_in_the_3d_step_has_the_textbook_bubble(p, m, schedule):
    free = sc.topology.switch(p, bandwidth=1e300, latency=0)
    model = uniform(2 * p, batch=m)
    res = tr.step(model, free, dp=1, pp=p, micro_batches=m, schedule=schedule, gpu=UNIT)
    tf, tb = 2 * 1e-3 / m, 2 * 2e-3 / m  # two blocks per stage, 1/m of the batch
    assert res.step_time == pytest.approx((m + p - 1) * (tf + tb), rel=1e-9)
    assert res.idle == pytest.approx((p - 1) * (tf + tb), rel=1e-9)
    assert res.exposed == {}
    assert res.mfu == pytest.approx(m / (m + p - 1), rel=1e-9)


def test_mfu_is_the_efficiency_when_communication_is_free():
    free = sc.topology.switch(4, bandwidth=1e300, latency=0)
    gpu = tr.GPU("half", 1e12, efficiency=0.5)
    res = tr.step(tr.gpt(4, 64, 4, 16, 128, batch=8), free, dp=4, gpu=gpu)
    assert res.mfu == pytest.approx(0.5, rel=1e-9)
    with_recompute = tr.step(tr.gpt(4, 64, 4, 16, 128, batch=8), free, dp=4, gpu=gpu,
                             recompute=True)
    assert with_recompute.mfu < res.mfu


def test_recomputation_runs_narayanan_equation_3():
    # One GPU runs all of it: busy time x rate = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
    b, s, n, h, v = 2, 32, 3, 64, 200
    res = tr.step(tr.gpt(n, h, 4, s, v, batch=b), sc.topology.switch(1), dp=1,
                  recompute=True, gpu=tr.GPU("1 GFLOP/s", 1e9))
    assert res.compute_time * 1e9 == pytest.approx(
        96 * b * s * n * h * h * (1 + s / (6 * h) + v / (16 * n * h)), rel=1e-12)


@pytest.mark.parametrize("t,m", [(2, 1), (4, 2)])
def test_tensor_parallel_traffic_in_the_3d_step(t, m):
    model = tr.gpt(3, 64, 4, 16, 128, batch=4)
    res = tr.step(model, sc.topology.switch(t), dp=1, tp=t, micro_batches=m)
    bsh = 4 // m * 16 * 64 * 2
    expected = m * 3 * 4 * 2 * (t - 1) * bsh // t
    np.testing.assert_array_equal(res.run.bytes_sent, [expected] * t)
    assert set(res.exposed) == {"tp"}


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_data_parallel_traffic_in_the_3d_step(zero):
    d = 4
    model = tr.gpt(2, 64, 4, 16, 128, batch=8)
    res = tr.step(model, sc.topology.switch(d), dp=d, zero_stage=zero, micro_batches=2)
    psi = model.params
    # ZeRO 0 and 1 reduce once per step (all-reduce 2 Psi; reduce-scatter Psi and
    # all-gather Psi); ZeRO 2 reduce-scatters each of the two micro-batches and gathers
    # once, (2 + 1) Psi; stage 3 gathers every layer in each pass of each micro-batch and
    # reduce-scatters each micro-batch: (2 x 2 + 2) Psi.
    volume = {0: 2, 1: 2, 2: 3, 3: 6}[zero] * psi
    np.testing.assert_array_equal(res.run.bytes_sent, [volume * (d - 1) // d * 2] * d)
    assert res.memory == (tr.zero_memory(psi, d, zero),)
    assert res.step_time == pytest.approx(res.compute_time + sum(res.exposed.values())
                                          + res.idle, rel=1e-9)


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("activation_bytes", [1, 2, 4])
def test_data_parallel_traffic_ignores_activations_and_takes_each_size(zero, activation_bytes):
    # Without tensor or pipeline parallelism no activation crosses the network: the
    # gradients move grad_bytes per element, ZeRO's parameter gathers param_bytes.
    d, param_bytes, grad_bytes = 4, 2, 4
    model = tr.gpt(2, 64, 4, 16, 128, batch=8, precision=tr.Precision(
        param_bytes=param_bytes, grad_bytes=grad_bytes, activation_bytes=activation_bytes))
    res = tr.step(model, sc.topology.switch(d), dp=d, zero_stage=zero, micro_batches=2)
    share = model.params * (d - 1) // d
    gathers = {0: 0, 1: 1, 2: 1, 3: 4}[zero]  # stage 3: two passes of two micro-batches
    reduce = {0: 2, 1: 1, 2: 2, 3: 2}[zero] * share  # stages 2, 3: one per micro-batch
    expected = reduce * grad_bytes + gathers * share * param_bytes
    np.testing.assert_array_equal(res.run.bytes_sent, [expected] * d)


def test_the_7b_step_on_four_dgx_h100():
    model = tr.llama_7b(batch=16)
    res = tr.step(model, sc.topology.dgx_h100(4), dp=2, tp=8, pp=2, micro_batches=2,
                  sequence_parallel=True)
    assert (res.dp, res.tp, res.pp, res.micro_batches) == (2, 8, 2, 2)
    assert res.step_time == pytest.approx(res.compute_time + sum(res.exposed.values())
                                          + res.idle, rel=1e-9)
    assert set(res.exposed) == {"tp", "pp", "dp"}
    assert 0 < res.mfu < 1
    assert res.mfu == pytest.approx(model.flops / (res.step_time * 32 * tr.H100.peak_flops))
    stages = tr.split_blocks(model, 2)
    for s, layers in enumerate(stages):
        params = -(-sum(x.params for x in layers) // 8)
        assert res.memory[s] == tr.zero_memory(params, 2, 0)
        per_block = model.block_activation_memory(4, tp=8, sequence_parallel=True)
        blocks = sum(x.block for x in layers)
        assert res.activation_memory[s] == pytest.approx(min(2 - s, 2) * blocks * per_block)
    assert res.memory_per_gpu == max(m.total + a for m, a in
                                     zip(res.memory, res.activation_memory))
    # TP inside nodes: GPU 0's tensor-parallel peers are 1..7, its next stage GPU 8.
    assert {s.rank for s in res.spans if s.stream == "tp"} == set(range(32))
    fig = tr.plot_timeline(res, ranks=[0, 8])
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[:2] == ["GPU 0 compute", "TP"] and "GPU 8 compute" in labels
    assert {"PP", "DP"} <= set(labels)


def test_a_step_with_nccl_collectives_runs_on_an_h100_node():
    """NCCL's tuner put the tensor-parallel all_reduces on NVLS, whose NVSwitch program a
    started collective could not run, and the step raised; now the switch's program
    starts with them: the same compute as with the plain ring, other communication
    times, and the step still the compute plus what is exposed."""
    model = tr.llama_7b(batch=2, seq_len=128)
    topo = sc.topology.dgx_h100(1)
    nccl = tr.step(model, topo, dp=2, tp=4, algorithm="nccl")
    ring = tr.step(model, topo, dp=2, tp=4, algorithm="ring")
    assert nccl.step_time == pytest.approx(nccl.compute_time + sum(nccl.exposed.values())
                                           + nccl.idle, rel=1e-9)
    assert nccl.compute_time == pytest.approx(ring.compute_time, rel=1e-12)
    assert nccl.exposed["tp"] != ring.exposed["tp"]


def _never_run(*args, **kwargs):
    raise AssertionError("the step ran although its configuration is bad")


@pytest.mark.parametrize("kwargs,match", [
    (dict(dp=2, tp=2, pp=1), r"dp x tp x pp = 2 x 2 x 1 = 4 GPUs, but .* has 8"),
    (dict(dp=2, tp=2, pp=2, micro_batches=3), "micro_batches=3 does not divide the batch"),
    (dict(dp=1, tp=1, pp=8), "pp=8 pipeline stages is more than the 4 transformer blocks"),
    (dict(dp=8, micro_batches=2), "micro_batches=2 does not divide the batch"),
    # batch 6 over 4 replicas: no micro_batches mends it (the refusal named micro_batches=1)
    (dict(dp=4, tp=2, pp=1, batch=6), r"dp=4 does not divide the batch: 6 sequences over 4 "
                                      r"data-parallel replicas leaves 1.5 per replica; give "
                                      r"the model a batch that is a multiple of 4"),
    (dict(dp=1, tp=8, pp=1), "tp=8 does not divide the 4 attention heads"),
    (dict(dp=2, tp=2, pp=2, zero_stage=4), "zero_stage=4"),
    (dict(dp=2, tp=2, pp=2, schedule="zb"), "schedule='zb'"),
    (dict(dp=2, tp=2, pp=2, order=("tp", "dp")), "order=\\('tp', 'dp'\\)"),
    (dict(dp=2, tp=2, pp=2, order=None), "order=None is not accepted"),
    (dict(dp=0, tp=8, pp=1), "dp=0"),
])
def test_bad_configurations_are_refused_before_the_run(monkeypatch, kwargs, match):
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", _never_run)
    model = tr.gpt(4, 64, 4, 16, 128, batch=kwargs.pop("batch", 8))
    with pytest.raises(sc.InvalidInputError, match=match):
        tr.step(model, sc.topology.switch(8), **kwargs)


def test_timeline_refusals():
    with pytest.raises(sc.InvalidInputError, match="no spans"):
        tr.plot_timeline(object())
    res = tr.pipeline_step(sc.topology.switch(2), stages=2, micro_batches=1, forward=1e-3,
                           backward=1e-3, activation_bytes=8)
    with pytest.raises(sc.InvalidInputError, match=r"ranks=\[5\]"):
        tr.plot_timeline(res, ranks=[5])
    for ranks in ([0, 0], 0, []):
        with pytest.raises(sc.InvalidInputError, match="distinct GPUs that took part"):
            tr.plot_timeline(res, ranks=ranks)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(sc.InvalidInputError, match=f"max_ranks={bad!r}"):
            tr.plot_timeline(res, max_ranks=bad)
    # a raw AttributeError ('int' object has no attribute ...) from matplotlib's wrapping
    with pytest.raises(sc.InvalidInputError, match=r"^title=5 is not accepted; give a str"):
        tr.plot_timeline(res, title=5)


@pytest.mark.parametrize("call", [
    lambda: tr.data_parallel(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2),
                             algorithm="nope"),
    lambda: tr.zero_step(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2), stage=3,
                         algorithm="bruck"),  # an all_gather algorithm, no reduce_scatter
    lambda: tr.tensor_parallel_layer(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2), tp=2,
                                     algorithm="nope"),
    lambda: tr.step(tr.gpt(2, 64, 4, 16, 128, batch=2), sc.topology.switch(2), dp=2,
                    algorithm="nope"),
])
def test_unknown_algorithms_are_refused_before_the_run(monkeypatch, call):
    for module in ("data_parallelism", "zero", "tensor", "parallel3d"):
        monkeypatch.setattr(f"simcoll.training.{module}.run_program", _never_run)
    with pytest.raises(sc.UnknownAlgorithmError):
        call()


def test_algorithms_that_need_server_hosts_are_refused():
    with pytest.raises(sc.InvalidInputError, match="server hosts"):
        tr.data_parallel(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2, servers=1),
                         algorithm="parameter_server")


def test_timeline_titles_say_what_ran():
    model = tr.gpt(2, 64, 4, 16, 128, batch=8)
    layer = tr.tensor_parallel_layer(model, sc.topology.switch(4), tp=4)
    assert tr.plot_timeline(layer).axes[0].get_title().startswith(
        "one transformer block, forward and backward, over tp=4: ")
    pipe = tr.pipeline_step(sc.topology.switch(2), stages=2, micro_batches=4, forward=1e-3,
                            backward=2e-3, activation_bytes=8)
    assert tr.plot_timeline(pipe).axes[0].get_title().startswith(
        "pipeline step (2 stages, 4 micro-batches, 1f1b): ")
    step = tr.step(model, sc.topology.switch(4), dp=2, tp=2, micro_batches=2)
    assert tr.plot_timeline(step).axes[0].get_title().startswith(
        "training step (dp=2, tp=2, pp=1, ZeRO 0, 2 micro-batches, 1f1b): ")


def test_a_crowded_timeline_names_each_gpu_once():
    # 32 GPUs x 2 streams: 64 row labels touched each other.
    model = tr.gpt(2, 64, 4, 16, 128, batch=64)
    res = tr.data_parallel(model, sc.topology.switch(64))
    labels = [t.get_text() for t in
              tr.plot_timeline(res, max_ranks=32).axes[0].get_yticklabels()]
    assert labels == [f"GPU {r}" for r in range(32)]
    # past 40 bands, every k-th: 64 GPUs, every other one, and the last
    labels = [t.get_text() for t in
              tr.plot_timeline(res, max_ranks=64).axes[0].get_yticklabels()]
    assert labels == [f"GPU {r}" for r in range(0, 64, 2)] + ["GPU 63"]
    few = [t.get_text() for t in tr.plot_timeline(res, max_ranks=2).axes[0].get_yticklabels()]
    assert few == ["GPU 0 compute", "DP", "GPU 1 compute", "DP"]


def test_a_step_says_whether_its_states_fit_the_gpu():
    # Llama 7B (6,738,415,616 parameters) with mixed-precision Adam keeps 16 bytes per
    # parameter (Rajbhandari et al. 2020): 107.8 GB, more than an H100's 81,559 MiB
    # (85.5 GB) on its own; ZeRO-3 over 8 GPUs keeps an eighth, 13.5 GB, which fits only
    # with activations recomputed (README, "A 3D-parallel step").
    model = tr.llama_7b(batch=8)
    assert tr.H100.memory == 81_559 * 2**20 and tr.A100.memory == 80 * 2**30
    plain = tr.step(model, sc.topology.dgx_h100(1), dp=8, recompute=True)
    assert plain.memory[0].total == 16 * 6_738_415_616
    assert plain.memory_per_gpu > tr.H100.memory and plain.fits is False
    # Without recomputation a GPU stores Korthikanti et al.'s s b h (34 + 5 a s / h) bytes
    # per block (b = 1 sequence, a = 32 heads, s = h = 4096) for 32 blocks: 104.2 GB.
    stored = tr.step(model, sc.topology.dgx_h100(1), dp=8, zero_stage=3)
    assert stored.activation_memory[0] == 32 * 4096 * 4096 * (34 + 5 * 32)
    assert stored.memory[0].total == 16 * 6_738_415_616 // 8 and stored.fits is False
    sharded = tr.step(model, sc.topology.dgx_h100(1), dp=8, zero_stage=3, recompute=True)
    assert sharded.memory[0].total == 16 * 6_738_415_616 // 8
    assert sharded.memory_per_gpu <= tr.H100.memory and sharded.fits is True
    unknown = tr.step(model, sc.topology.dgx_h100(1), dp=8, zero_stage=3, recompute=True,
                      gpu=tr.GPU("mine", 1e15))
    assert unknown.gpu_memory is None and unknown.fits is None
    with pytest.raises(sc.InvalidInputError, match="memory=0 is not accepted"):
        tr.GPU("none", 1e15, memory=0)


def rs_time(p, nbytes):
    """A ring reduce-scatter of ``nbytes`` per rank: p - 1 steps of n/p, each reduced."""
    return (p - 1) * (ALPHA + nbytes / p * BETA + nbytes / p * GAMMA)


def ag_time(p, nbytes):
    """A ring all-gather of an ``nbytes`` shard per rank: p - 1 steps of it."""
    return (p - 1) * (ALPHA + nbytes * BETA)


@pytest.mark.parametrize("zero,m", [(2, 2), (2, 4), (3, 3)])
def test_zero_2_and_3_reduce_scatter_every_micro_batch(zero, m):
    # DeepSpeed's ZeRO-2/3 keep a 1/d gradient shard, so each micro-batch's gradients are
    # reduce-scattered after its backward pass: m reduce-scatters of every layer, not one.
    d = 4
    model = tr.gpt(2, 64, 4, 16, 128, batch=4 * m)
    res = tr.step(model, sc.topology.switch(d), dp=d, zero_stage=zero, micro_batches=m)
    reduced = sorted(s.label for s in res.spans if s.rank == 0 and s.stream == "dp")
    assert reduced == sorted(f"{name} mb{j}" for name in ("embedding", "block0", "block1")
                             for j in range(m))
    # Gradient bytes match the shard the memory counts: 2 bytes x ceil(Psi / d).
    psi = model.params  # every layer's tensors divide by 4: no padding
    assert res.memory[0].gradients == 2 * psi // d
    gathers = 1 if zero == 2 else 2 * m
    np.testing.assert_array_equal(res.run.bytes_sent,
                                  [(m + gathers) * psi * (d - 1) // d * 2] * d)


def test_zero_2_micro_batch_reduce_scatters_on_the_reference_network():
    # One block of 4096 fp16 parameters, d = 2, m = 2 micro-batches of 2 sequences; the
    # passes are short next to a reduce-scatter, so the step is the first micro-batch's
    # passes, the two reduce-scatters back to back and the all-gather of the parameters.
    d, fwd = 2, 1e-7
    res = tr.step(uniform(1, seconds_fwd=fwd), reference_network(d), dp=d, zero_stage=2,
                  micro_batches=2, gpu=UNIT)
    tf, tb = fwd / 4, 2 * fwd / 4  # 2 of the 8 sequences per micro-batch
    expected = tf + tb + 2 * rs_time(d, 4096 * 2) + ag_time(d, 4096 // d * 2)
    assert res.step_time == pytest.approx(expected, rel=1e-9)
    assert res.exposed["dp"] == pytest.approx(expected - 2 * (tf + tb), rel=1e-9)


@pytest.mark.parametrize("sp", [False, True])
def test_recomputation_runs_the_forward_collectives_again(sp):
    # Each block's backward pass first reruns its forward: 2 + 2 + 2 all-reduces (or
    # all-gather / reduce-scatter pairs, the same bytes, and the backward pass's two
    # all-gathers of the column-parallel layers' inputs) instead of 2 + 2.
    t, m = 2, 2
    model = tr.gpt(3, 64, 4, 16, 128, batch=4)
    res = tr.step(model, sc.topology.switch(t), dp=1, tp=t, micro_batches=m,
                  sequence_parallel=sp, recompute=True)
    bsh = 4 // m * 16 * 64 * 2
    halves = 6 * 2 + (2 if sp else 0)
    np.testing.assert_array_equal(res.run.bytes_sent,
                                  [m * 3 * halves * (t - 1) * bsh // t] * t)
    per_rank = 6 * 2 + 2 if sp else 6
    assert sum(s.rank == 0 and s.stream == "tp" for s in res.spans) == m * 3 * per_rank


def test_recomputation_time_with_tensor_parallelism_on_the_reference_network():
    # One block over t = 2: forward (compute + 2 all-reduces), then in the backward pass
    # the recomputed forward (the same again) and the backward (2 x compute + 2
    # all-reduces); the logits run forward and backward without collectives.
    t = 2
    model = tr.gpt(1, 128, 4, 32, 100, batch=1)
    rate = 1e12
    res = tr.step(model, reference_network(t), dp=1, tp=t, recompute=True,
                  gpu=tr.GPU("slow", rate))
    block, logits = model.layers[1], model.layers[2]
    fwd = block.forward_flops / t / rate
    logits_fwd = logits.forward_flops / t / rate
    ring = ring_time(t, 32 * 128 * 2)
    assert res.step_time == pytest.approx(4 * fwd + 3 * logits_fwd + 6 * ring, rel=1e-9)
    assert res.exposed["tp"] == pytest.approx(6 * ring, rel=1e-9)


def test_timeline_refuses_booleans_as_ranks():
    res = tr.pipeline_step(sc.topology.switch(2), stages=2, micro_batches=1, forward=1e-3,
                           backward=1e-3, activation_bytes=8)
    for ranks in ([True], [0, True], [np.bool_(True)]):
        with pytest.raises(sc.InvalidInputError, match="distinct GPUs that took part"):
            tr.plot_timeline(res, ranks=ranks)
    labels = tr.plot_timeline(res, ranks=[np.int64(1)]).axes[0].get_yticklabels()
    assert labels[0].get_text() == "GPU 1 compute"


def test_timeline_of_a_step_that_takes_no_time_is_refused_as_a_run_that_takes_none():
    # It drew empty 0-1 ns axes, where sc.plot.timeline refuses a run that took no time.
    res = tr.pipeline_step(sc.topology.switch(2, latency=0), stages=2, micro_batches=2,
                           forward=0, backward=0, activation_bytes=0)
    assert res.step_time == 0
    with pytest.raises(sc.InvalidInputError, match="took no time.*nothing to draw"):
        tr.plot_timeline(res)
    alone = sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="ring", nbytes=8,
                        trace=True)
    with pytest.raises(sc.InvalidInputError, match="took no time.*nothing to draw"):
        sc.plot.timeline(alone)


def test_both_timelines_take_the_same_ranks():
    """Duplicates refused by both (sc.plot.timeline drew rank 0 twice), numpy arrays
    taken by both (sc.plot.timeline refused them)."""
    pipe = tr.pipeline_step(sc.topology.switch(4), stages=4, micro_batches=2, forward=1e-3,
                            backward=1e-3, activation_bytes=8)
    run = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=1024,
                      trace=True)
    for draw in (lambda r: tr.plot_timeline(pipe, ranks=r),
                 lambda r: sc.plot.timeline(run, ranks=r)):
        for bad in ([0, 0, 3], np.array([1, 1]), [1.0], "01"):
            with pytest.raises(sc.InvalidInputError, match="distinct"):
                draw(bad)
        labels = [t.get_text() for t in draw(np.array([3, 1])).axes[0].get_yticklabels()]
        assert labels[0] in ("GPU 3 compute", "rank 3") and ("rank 1" in labels
                                                             or "GPU 1 compute" in labels)


def test_a_pipeline_s_send_and_receive_are_told_apart():
    pipe = tr.pipeline_step(sc.topology.switch(4), stages=4, micro_batches=8, forward=1e-3,
                            backward=2e-3, activation_bytes=32 * sc.MiB, schedule="1f1b")
    ax = tr.plot_timeline(pipe).axes[0]
    colours = {t.get_text(): h.get_facecolor()[:3] for t, h in
               zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    send, recv = np.array(colours["send"]), np.array(colours["receive"])
    grey = np.array([0.299, 0.587, 0.114])
    # apart in colour and in grayscale (they were two purples, 0.1 apart in lightness)
    assert np.abs(send - recv).max() > 0.25 and abs(grey @ send - grey @ recv) > 0.15


def test_a_timeline_of_hundreds_of_gpus_names_every_kth_and_rules_no_bands():
    spans = [Span(g, "compute", "forward", 0.0, 1e-3 * (1 + g % 3)) for g in range(512)]
    spans += [Span(g, "dp", "all_reduce", 1e-3, 4e-3) for g in range(512)]

    class Step:
        pass

    step = Step()
    step.spans = spans
    ax = tr.plot_timeline(step, max_ranks=512).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # one in 13 (512 / 13 <= 40 bands named), from the first
    assert labels == [f"GPU {g}" for g in range(0, 512, 13)]
    assert not ax.get_lines()          # no band rules drawn over the bars
    few = tr.plot_timeline(step, max_ranks=8).axes[0]
    assert len(few.get_lines()) == 7   # eight bands, ruled apart


def test_a_timeline_on_the_caller_s_axes_keeps_its_legend_inside():
    import matplotlib.pyplot as plt

    pipe = tr.pipeline_step(sc.topology.switch(2), stages=2, micro_batches=2, forward=1e-3,
                            backward=1e-3, activation_bytes=8)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    tr.plot_timeline(pipe, ax=left)
    fig.canvas.draw()
    box, frame = left.get_legend().get_window_extent(), left.get_window_extent()
    assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1
    assert left.get_window_extent().width > 0.3 * fig.bbox.width
    plt.close(fig)


_SMALL = tr.gpt(layers=2, hidden=64, heads=4, seq_len=16, vocab=100, batch=4)


@pytest.mark.parametrize("run", [
    lambda t: tr.data_parallel(_SMALL, t),
    lambda t: tr.zero_step(_SMALL, t, stage=1),
    lambda t: tr.step(_SMALL, t, dp=1),
    lambda t: tr.pipeline_step(t, stages=2, micro_batches=2, forward=1, backward=1,
                               activation_bytes=2),
    lambda t: tr.tensor_parallel_layer(_SMALL, t, tp=2),
])
def test_training_steps_refuse_a_spec_or_none_for_a_topology(run):
    """They read topology.nranks or .hosts first and raised AttributeError."""
    with pytest.raises(sc.InvalidInputError, match=r"topology='switch:4' is a spec, not a "
                                                   r"Topology; build it with"):
        run("switch:4")
    with pytest.raises(sc.InvalidInputError, match="must be a simcoll Topology"):
        run(None)


def test_a_step_of_a_model_without_flops_has_no_mfu():
    """A step that takes no time (no FLOPs, one GPU) divided by zero for its MFU."""
    flat = tr.Model("flat", (tr.Layer("x", (10,), 0.0, 0.0, block=True),), batch=4,
                    seq_len=8, hidden=8, heads=1)
    done = tr.step(flat, reference_network(1), dp=1)
    assert (done.step_time, done.mfu) == (0.0, 0.0)


@pytest.mark.parametrize("sp", [False, True])
def test_pipeline_sends_are_scattered_over_the_tensor_parallel_group(sp):
    """Megatron's scatter/gather (Narayanan et al. 2021, Sec. 4.1): each of the t GPUs of
    a tensor-parallel group sends 1/t of a micro-batch's activations, b s h x 2 bytes /
    t, to its peer of the next stage (and the gradients back), which all-gathers them
    over its group; with sequence parallelism a GPU holds that share already. Without
    it every GPU sent the whole b s h: t times the traffic between stages."""
    model = tr.gpt(layers=2, hidden=1024, heads=16, seq_len=1024, vocab=1000, batch=2)
    done = tr.step(model, reference_network(4), dp=1, tp=2, pp=2, micro_batches=2,
                   sequence_parallel=sp)
    sent: dict[int, int] = {}
    for span in done.spans:
        if span.stream == "pp" and span.kind == "send":
            sent[span.rank] = sent.get(span.rank, 0) + span.nbytes
    # 2 micro-batches of one sequence: 1024 x 1024 elements of 2 bytes, halved
    assert sent == dict.fromkeys(range(4), 2 * 1024 * 1024 * 2 // 2)
    gathers = [span for span in done.spans if span.stream == "tp"
               and span.label.endswith("gather") and "mb" in span.label]
    assert len(gathers) == (0 if sp else 2 * 2 * 2)   # a gather per receive, per GPU of 4


def test_sequence_parallelism_needs_tp_to_divide_the_sequence_everywhere():
    """It splits the sequence: step() refused seq_len 18 on tp=4 while
    tensor_parallel_layer took it (it checked b s h only)."""
    model = tr.gpt(layers=2, hidden=64, heads=4, seq_len=18, vocab=100, batch=4)
    for run in (lambda: tr.tensor_parallel_layer(model, reference_network(4), tp=4,
                                                 sequence_parallel=True),
                lambda: tr.step(model, reference_network(4), dp=1, tp=4,
                                sequence_parallel=True)):
        with pytest.raises(sc.InvalidInputError, match="needs tp=4 to divide seq_len=18"):
            run()
    with pytest.raises(sc.InvalidInputError, match="no spans to draw; pass the result of "
                                                   "data_parallel, zero_step"):
        tr.plot_timeline(tr.data_parallel_step(reference_network(2), gradient_bytes=8,
                                               forward=1e-6, backward=1e-6))


def test_an_algorithm_without_the_pipeline_s_gather_is_refused_before_the_run():
    """Without sequence parallelism a pipeline of tensor-parallel stages all-gathers what
    it receives, so the step's algorithm must run all_gather too: "tree" passed the
    checks and the run died inside."""
    model = tr.gpt(layers=2, hidden=256, heads=8, seq_len=64, vocab=1000, batch=4)
    with pytest.raises(sc.InvalidInputError, match="all_gather"):
        tr.step(model, sc.topology.switch(4), dp=1, tp=2, pp=2, micro_batches=2,
                algorithm="tree")
    done = tr.step(model, sc.topology.switch(2), dp=1, tp=2, pp=1, algorithm="tree")
    assert done.step_time > 0     # no pipeline, no gather: the tree runs as before


@pytest.mark.parametrize("activation_bytes", [8, 2 * 10**9])
def test_a_bar_narrower_than_a_pixel_keeps_an_edge_of_its_own_colour(activation_bytes):
    # a pipeline step whose transfers last ~1e-6 of it (8 B) or 0.02 s of its 9.04 s (2 GB
    # over switch(2)'s links: between a 2000th and the 200th that makes a bar narrow):
    # drawn as 0.6 px, some were not drawn at all; each now has an edge of its colour,
    # the wide ones a white outline
    from matplotlib.colors import to_rgba

    pipe = tr.pipeline_step(sc.topology.switch(2), stages=2, micro_batches=2, forward=1.0,
                            backward=2.0, activation_bytes=activation_bytes)
    fig = tr.plot_timeline(pipe)
    narrow = wide = 0
    for bars in fig.axes[0].collections:
        for (x0, x1), edge, width, face in zip(
                [(p.vertices[:, 0].min(), p.vertices[:, 0].max()) for p in bars.get_paths()],
                bars.get_edgecolors(), bars.get_linewidths(), bars.get_facecolors()):
            if x1 - x0 < pipe.step_time / 200:
                narrow += 1
                assert tuple(edge) == tuple(face) and width == 0.6
            else:
                wide += 1
                assert tuple(edge) == to_rgba("white")
    assert narrow >= 4 and wide >= 4   # the transfers, and the compute passes
    matplotlib.pyplot.close(fig)


def test_sequence_parallel_spans_record_each_collective_s_own_buffer():
    """Span.nbytes is the GPU's buffer for a collective: b s h = 2 x 64 x 256 fp16 =
    65,536 bytes for each reduce-scatter, its t = 4 shard, 16,384, for every all-gather,
    the backward pass's gathers of the first layers' inputs among them (six gathers, four
    reduce-scatters per GPU)."""
    t = 4
    model = tr.gpt(2, 256, 8, 64, 1000, batch=2)
    res = tr.tensor_parallel_layer(model, sc.topology.switch(t), tp=t, sequences=2,
                                   sequence_parallel=True)
    bsh = 2 * 64 * 256 * 2
    for rank in range(t):
        spans = [s for s in res.spans if s.rank == rank and s.stream == "tp"]
        assert sorted((s.kind, s.nbytes) for s in spans) == \
            [("all_gather", bsh // t)] * 6 + [("reduce_scatter", bsh)] * 4


def test_the_backward_input_gathers_are_told_apart_from_the_half_s_gather():
    """In the backward pass each half runs two all-gathers (the half's input shard, and
    its first layer's input again beside the compute): within a pass no two spans of one
    GPU's tp stream share kind and label, in either pass."""
    t = 2
    model = tr.gpt(2, 256, 8, 64, 1000, batch=2)
    res = tr.tensor_parallel_layer(model, sc.topology.switch(t), tp=t, sequences=2,
                                   sequence_parallel=True)
    spans = [s for s in res.spans if s.rank == 0 and s.stream == "tp"]
    forward = [(s.kind, s.label) for s in spans if s.start < res.forward_time]
    backward = [(s.kind, s.label) for s in spans if s.start >= res.forward_time]
    assert len(forward) == 4 and len(backward) == 6
    assert len(set(forward)) == 4 and len(set(backward)) == 6


def test_a_tied_embedding_has_a_copy_on_the_last_stage_all_reduced_with_the_first():
    """GPT, h = 64, V = 128, s = 16, two blocks on two stages, two replicas: stage 0
    holds the embedding (V h + s h = 9,216) and a block (12 h^2 + 13 h = 49,984), stage 1
    a block and its copy of the word embedding (V h = 8,192: Megatron-LM keeps one there).
    Every GPU sends, in 2-byte elements: two micro-batches of 2 x 16 x 64 activations (or
    their gradients) to its peer stage, its stage's gradients all-reduced with its other
    replica (a ring of 2 sends them once) and the copy's gradient all-reduced with its
    peer stage (once too)."""
    h, v, s = 64, 128, 16
    model = tr.gpt(2, h, 4, s, v, batch=8)
    assert model.tied_embedding == v * h
    first, last = v * h + s * h + 12 * h * h + 13 * h, 12 * h * h + 13 * h + v * h
    res = tr.step(model, sc.topology.switch(4), dp=2, pp=2, micro_batches=2)
    # ZeRO 0, mixed-precision Adam: 2 + 2 + 12 bytes a parameter, nothing sharded
    assert [(m.params, m.gradients, m.optimizer_states) for m in res.memory] == [
        (2 * first, 2 * first, 12 * first), (2 * last, 2 * last, 12 * last)]
    pipeline = 2 * (2 * s * h) * 2
    stage = [pipeline + 2 * first + 2 * v * h, pipeline + 2 * last + 2 * v * h]
    # ranks: stage innermost, then replica (tp = 1)
    np.testing.assert_array_equal(res.run.bytes_sent, stage * 2)
    tied = [x for x in res.spans if x.label == "tied embedding"]
    assert sorted(x.rank for x in tied) == [0, 1, 2, 3]
    assert {(x.stream, x.kind, x.nbytes) for x in tied} == {("dp", "all_reduce", 2 * v * h)}
    # an untied model of the same layers (tied_embedding=0) holds no copy
    plain = tr.step(replace(model, tied_embedding=0), sc.topology.switch(4), dp=2, pp=2,
                    micro_batches=2)
    assert plain.memory[1].total == 16 * (12 * h * h + 13 * h)


def test_the_tied_embeddings_all_reduce_ends_the_step_on_the_reference_network():
    """One replica, two stages: the first stage's last backward pass ends its compute,
    then the two stages all-reduce V h / t gradient elements (2 bytes each), a ring of 2,
    which ends the step exactly that long after (splitting the copy over tp = 2 halves
    it); the last stage starts it as soon as its own backward passes (their compute and
    tensor-parallel all-reduces) are done."""
    model = tr.gpt(2, 64, 4, 16, 128, batch=4)
    for tp in (1, 2):
        tied = tr.step(model, reference_network(2 * tp), dp=1, tp=tp, pp=2, micro_batches=2,
                       gpu=tr.GPU("slow", 1e12))
        nbytes = 2 * 128 * 64 // tp
        spans = [x for x in tied.spans if x.label == "tied embedding"]
        assert len(spans) == 2 * tp and all(x.nbytes == nbytes for x in spans)
        for rank in range(2 * tp):
            computed = max(x.end for x in tied.spans
                           if x.rank == rank and x.stream in ("compute", "tp"))
            assert [x.start for x in spans if x.rank == rank] == [computed]
        first_stage = max(x.end for x in tied.spans if x.stream in ("compute", "tp"))
        assert tied.step_time == pytest.approx(first_stage + ring_time(2, nbytes), rel=1e-12)
        assert all(x.end == pytest.approx(tied.step_time, rel=1e-12) for x in spans)


def test_only_the_collectives_a_step_runs_need_the_algorithm():
    """No data-parallel all_gather runs with dp = 1 (ZeRO or not), an untied pure pipeline
    and a tensor-parallel layer on one GPU run no collective: algorithms without those
    collectives were refused. (A negative tied_embedding is refused too.)"""
    gpu = tr.GPU("g", 1e12)
    model = tr.gpt(4, 64, 4, 32, 100, batch=8)
    res = tr.step(model, sc.topology.switch(4), dp=1, tp=4, zero_stage=1, algorithm="tree",
                  gpu=gpu)
    assert {x.kind for x in res.spans if x.stream != "compute"} == {"all_reduce"}
    untied = replace(model, tied_embedding=0)
    res = tr.step(untied, sc.topology.switch(4), dp=1, pp=4, algorithm="pairwise", gpu=gpu)
    assert {x.stream for x in res.spans} == {"compute", "pp"}
    with pytest.raises(sc.UnknownAlgorithmError, match="'pairwise' for 'all_reduce'"):
        tr.step(model, sc.topology.switch(4), dp=1, pp=4, algorithm="pairwise", gpu=gpu)
    with pytest.raises(sc.InvalidInputError, match=r"tied_embedding=-1"):
        replace(model, tied_embedding=-1)
    alone = tr.tensor_parallel_layer(model, sc.topology.switch(4), tp=1, gpu=gpu,
                                     sequence_parallel=True, algorithm="rabenseifner")
    assert alone.communication_time == 0
    with pytest.raises(sc.UnknownAlgorithmError, match="'rabenseifner' for 'all_gather'"):
        tr.tensor_parallel_layer(model, sc.topology.switch(4), tp=2, gpu=gpu,
                                 sequence_parallel=True, algorithm="rabenseifner")


_HUGE = tr.Model("huge", (tr.Layer("a", (2**62,), 1.0, 1.0),), 2, 1, 1, 1)


@pytest.mark.parametrize("call, match", [
    (lambda: tr.data_parallel(_HUGE, sc.topology.switch(2)),
     r"^huge's largest all-reduce of gradients, 9223372036854775808 bytes, in a collective "
     r"over 2 GPUs could overflow the int64 traffic counters \(at most 1152921504606846975 "
     r"bytes\)"),
    (lambda: tr.zero_step(_HUGE, sc.topology.switch(2), stage=3),
     r"^huge's largest layer's gradients, 9223372036854775808 bytes"),
    (lambda: tr.zero_step(_HUGE, sc.topology.switch(2), stage=1),
     r"^huge's largest bucket's gradients, 9223372036854775808 bytes"),
    (lambda: tr.step(_HUGE, sc.topology.switch(2), dp=2),
     r"^the gradients of huge's layer 'a' \(over tp=1\), 9223372036854775808 bytes"),
    (lambda: tr.step(tr.gpt(2, 64, 4, 32, 100, batch=2**50), sc.topology.switch(2), dp=1,
                     tp=2),
     r"^the activations of a micro-batch of 1125899906842624 sequences \(batch=1125899906842"
     r"624 over dp=1 and micro_batches=1\), a block's tensor-parallel collective's input, "
     rf"{2**50 * 32 * 64 * 2} bytes"),
    (lambda: tr.step(tr.gpt(2, 64, 4, 32, 100, batch=2**60), sc.topology.switch(2), dp=1,
                     pp=2),
     rf"^batch={2**60} over dp=1 makes a pipeline stage send {2 * 2**60 * 32 * 64 * 2} bytes"),
])
def test_steps_past_the_traffic_counters_are_refused_before_the_run(monkeypatch, call, match):
    """They failed inside the run, as an AlgorithmError naming internal programs, or
    after it; a collective over p GPUs takes inputs of at most (2^63 - 1) // (2 p^2)
    bytes, and a GPU's sends must stay below 2^63."""
    for module in ("data_parallelism", "zero", "parallel3d"):
        monkeypatch.setattr(f"simcoll.training.{module}.run_program", _never_run)
    with pytest.raises(sc.InvalidInputError, match=match):
        call()


def test_parameters_wider_than_gradients_are_checked_as_the_shard_each_gpu_gathers(
        monkeypatch):
    """4-byte parameters, 2-byte gradients, a layer of 2^58 elements on 2 GPUs (inputs of
    at most 2^60 - 1 bytes): its gradients are 2^59 bytes and each GPU's gathered shard
    2^59 too, so the step may run; it was refused for 2^60 bytes "of gradients" (the
    whole layer at the parameters' 4 bytes, which no collective takes). A layer twice as
    large is refused for its gradients, 2^60 bytes."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    monkeypatch.setattr("simcoll.training.zero.run_program", run_reached)
    precision = tr.Precision(param_bytes=4, grad_bytes=2)
    for elements, refused in ((2**58, False), (2**59, True)):
        model = tr.Model("big", (tr.Layer("a", (elements,), 1.0, 1.0, block=True),), 2, 1,
                         1, 1, precision=precision)
        for call, kwargs in ((tr.step, dict(dp=2, zero_stage=1)), (tr.zero_step, dict(stage=3))):
            with pytest.raises(sc.InvalidInputError if refused else RunReached) as info:
                call(model, sc.topology.switch(2), **kwargs)
            if refused:
                text = str(info.value)
                assert "gradients" in text and f", {2**60} bytes, in a collective" in text


_G = tr.GPU("g", 1e12)


def test_a_tied_embedding_not_divisible_by_tp_is_all_reduced_in_whole_shards():
    """tied_embedding = 8191 elements over tp = 2: each GPU of the first and last stage
    holds ceil(8191 / 2) = 4096 of them, 8192 bytes of gradient (not 4095: 8190)."""
    model = replace(tr.gpt(2, 64, 4, 16, 128, batch=4), tied_embedding=8191)
    res = tr.step(model, sc.topology.switch(4), dp=1, tp=2, pp=2, micro_batches=2, gpu=_G)
    tied = [x for x in res.spans if x.label == "tied embedding"]
    assert sorted((x.rank, x.nbytes) for x in tied) == [(r, 8192) for r in range(4)]


def test_the_tied_embeddings_all_reduce_waits_for_the_data_parallel_reductions():
    """Two replicas of two stages: each GPU all-reduces the tied embedding's gradient
    once its data-parallel reductions are done (Megatron-LM, after finish_grad_sync)."""
    model = tr.gpt(2, 64, 4, 16, 128, batch=8)
    res = tr.step(model, sc.topology.switch(4), dp=2, pp=2, micro_batches=2, gpu=_G)
    for rank in range(4):
        tied = [x for x in res.spans if x.rank == rank and x.label == "tied embedding"]
        reductions = [x.end for x in res.spans if x.rank == rank and x.stream == "dp"
                      and x.label != "tied embedding"]
        assert len(tied) == 1 and reductions
        assert tied[0].start >= max(reductions)


def test_three_stages_all_reduce_the_tied_embedding_between_the_first_and_last_only():
    """pp = 3, one replica: GPUs 0 and 2 all-reduce V h = 128 x 64 elements (16,384 bytes,
    a ring of 2 sends it once); the middle stage takes no part. Each stage sends two
    micro-batches of 2 x 16 x 64 activations (4096 bytes) on, and their gradients back:
    24,576, 16,384 and 24,576 bytes."""
    model = tr.gpt(3, 64, 4, 16, 128, batch=4)
    res = tr.step(model, sc.topology.switch(3), dp=1, pp=3, micro_batches=2, gpu=_G)
    tied = [x for x in res.spans if x.label == "tied embedding"]
    assert sorted((x.rank, x.nbytes) for x in tied) == [(0, 16384), (2, 16384)]
    assert res.run.bytes_sent.tolist() == [8192 + 16384, 2 * 8192, 8192 + 16384]


def test_an_algorithm_the_embedding_group_cannot_run_is_refused_before_the_run(monkeypatch):
    """dp = tp = 1, two stages: the embedding group [0, 1] is the only one with a
    collective; parameter_server with servers=3 cannot run on its 2 GPUs (it failed in
    the run, as an AlgorithmError naming rank 1's program)."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    model = tr.gpt(2, 64, 4, 16, 128, batch=4)
    with pytest.raises(sc.InvalidInputError,
                       match=r"^the embedding group \[0, 1\] \(all_reduce\): servers=3 is more "
                             r"than the machine's p=2 ranks"):
        tr.step(model, sc.topology.switch(2), dp=1, pp=2, algorithm="parameter_server",
                algorithm_params={"servers": 3}, gpu=_G)


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_a_micro_batchs_activations_are_checked_as_one_collectives_input(
        monkeypatch, sequence_parallel):
    """tp = 4 takes inputs of at most (2^63 - 1) // 32 = 2^58 - 1 bytes; every collective
    of a block takes a micro-batch's activations (or a share of them). 2^46 sequences of
    32 x 64 two-byte elements are 2^58 bytes: refused; one sequence fewer runs (it was
    refused at 4 or 5 times the activations, which no collective takes), its GPUs
    sending under 2 x 2 blocks x (4 or 8) collectives x 2^58 < 2^63 bytes."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    topo = sc.topology.switch(4)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^the activations of a micro-batch of {2**46} sequences .* "
                             rf"tensor-parallel collective's input, {2**58} bytes"):
        tr.step(tr.gpt(2, 64, 4, 32, 100, batch=2**46), topo, dp=1, tp=4,
                sequence_parallel=sequence_parallel)
    with pytest.raises(RunReached):
        tr.step(tr.gpt(2, 64, 4, 32, 100, batch=2**46 - 1), topo, dp=1, tp=4,
                sequence_parallel=sequence_parallel)


def test_a_tied_embeddings_all_reduce_is_checked_against_the_counters_without_replicas(
        monkeypatch):
    """dp = 1, two stages: no data-parallel group, but the first and last stages
    all-reduce V h / t gradient elements: 2^59 two-byte elements are 2^60 bytes, past
    (2^63 - 1) // 8 for 2 GPUs (it failed inside the run); over tp = 2, 2^59 bytes run."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    model = replace(tr.gpt(2, 64, 4, 16, 128, batch=2), tied_embedding=2**59)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^the gradient of GPT l=2 h=64's tied word embedding \(over "
                             rf"tp=1\), {2**60} bytes, in a collective over 2 GPUs"):
        tr.step(model, sc.topology.switch(2), dp=1, pp=2, gpu=_G)
    with pytest.raises(RunReached):
        tr.step(model, sc.topology.switch(4), dp=1, tp=2, pp=2, gpu=_G)


def test_collnet_takes_a_tied_embeddings_all_reduce_only_over_the_whole_machine(monkeypatch):
    """collnet=1 runs collectives over every GPU of the machine: with dp = tp = 1 the only
    one is the tied embedding's, over the first and last stages, which is the machine
    only with two stages on two GPUs; pp = 3 was let through and failed in the run."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    topo = sc.topology.dgx_h100(1, sharp=True)
    model = tr.gpt(8, 256, 8, 64, 512, batch=8)
    with pytest.raises(sc.InvalidInputError,
                       match=r"collnet=1 needs collectives over every GPU .* dp=1, tp=1, pp=8 "
                             r"\(the tied embedding's all-reduce joins only the first and "
                             r"last stages\) does not"):
        tr.step(model, topo, dp=1, tp=1, pp=8, micro_batches=8, algorithm="nccl",
                algorithm_params={"collnet": 1}, gpu=_G)
    with pytest.raises(RunReached):   # untied: no collective at all
        tr.step(replace(model, tied_embedding=0), topo, dp=1, tp=1, pp=8, micro_batches=8,
                algorithm="nccl", algorithm_params={"collnet": 1}, gpu=_G)


def test_a_stage_sending_exactly_2_to_the_63_bytes_is_refused(monkeypatch):
    """2^50 sequences of 32 x 64 two-byte elements, sent on and their gradients back:
    2 x 2^50 x 2^11 x 2 = 2^63 bytes, one past the int64 counters; a sequence fewer
    sends 2^63 - 2^13 and runs."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^batch={2**50} over dp=1 makes a pipeline stage send "
                             rf"{2**63} bytes"):
        tr.step(tr.gpt(2, 64, 4, 32, 100, batch=2**50), sc.topology.switch(2), dp=1, pp=2)
    with pytest.raises(RunReached):
        tr.step(tr.gpt(2, 64, 4, 32, 100, batch=2**50 - 1), sc.topology.switch(2), dp=1,
                pp=2)


def test_one_stage_sends_nothing_so_a_huge_batch_is_not_refused_for_sends(monkeypatch):
    """pp = 1 (and dp = tp = 1): no pipeline sends and no collective, whatever the batch."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    with pytest.raises(RunReached):
        tr.step(tr.gpt(2, 64, 4, 32, 100, batch=2**60), sc.topology.switch(1), dp=1)


def test_a_layers_gradients_are_checked_as_tensor_parallelism_splits_them(monkeypatch):
    """A layer of 2^59 elements, 2 bytes each, over dp = 2 (inputs of at most 2^60 - 1
    bytes): whole (tp = 1) its 2^60 bytes are refused; split over tp = 2, each GPU's
    2^59 bytes are not."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    model = tr.Model("wide", (tr.Layer("a", (2**59,), 1.0, 1.0),), 2, 1, 2, 2)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^the gradients of wide's layer 'a' \(over tp=1\), {2**60} bytes"):
        tr.step(model, sc.topology.switch(2), dp=2)
    with pytest.raises(RunReached):
        tr.step(model, sc.topology.switch(4), dp=2, tp=2)


@pytest.mark.parametrize("sequence_parallel, recompute, collectives",
                         [(False, False, 4), (True, False, 8), (True, True, 12)])
def test_what_a_gpu_sends_in_its_tensor_parallel_collectives_is_checked_before_the_run(
        monkeypatch, sequence_parallel, recompute, collectives):
    """Each collective's input may fit while a GPU's sends over the step pass 2^63 (the
    run then failed after it, naming an internal program): 2 blocks, one micro-batch of
    a bytes, each collective sending at most 2a: 2 x 2 x collectives x a against 2^63,
    with a = 2^46 sequences x 32 x 64 x 2 bytes = 2^58: 2^62 runs, 2^63 and more do not."""
    monkeypatch.setattr("simcoll.training.parallel3d.run_program", run_reached)
    a = 2**58
    model = tr.gpt(2, 64, 4, 32, 100, batch=2**46)
    most = 2 * 2 * collectives * a
    if most >= 2**63:
        with pytest.raises(sc.InvalidInputError,
                           match=rf"^batch={2**46} over dp=1 makes a GPU send up to {most} "
                                 rf"bytes in its tensor-parallel collectives \(2 blocks x 1 "
                                 rf"micro-batches x {collectives} collectives\)"):
            tr.step(model, sc.topology.switch(2), dp=1, tp=2,
                    sequence_parallel=sequence_parallel, recompute=recompute)
    else:
        with pytest.raises(RunReached):
            tr.step(model, sc.topology.switch(2), dp=1, tp=2,
                    sequence_parallel=sequence_parallel, recompute=recompute)


def _one_node_only(p, count, hosts, *, nodes):
    """Refuses a group whose GPUs are not all on one node (a shape check, as
    hierarchical's unequal-nodes check is)."""
    if len(set(nodes)) > 1:
        raise InvalidInputError(f"one node only, got nodes {list(nodes)}")


def _gather(comm, x):
    yield comm.sleep(0.0)
    return x


def _reduce(comm, x, *, op):
    yield comm.sleep(0.0)
    return x


class _Ran(Exception):
    pass


def _stop(*args, **kwargs):
    raise _Ran


@pytest.fixture
def one_node_algorithm():
    for collective, program in (("all_reduce", _reduce), ("all_gather", _gather)):
        sc.register(collective, "test_one_node", cost=NO_FORMULA, validate=_one_node_only,
                    replace=True)(program)
    yield "test_one_node"


def test_a_later_stages_tensor_parallel_group_is_checked_too(monkeypatch,
                                                            one_node_algorithm):
    """cluster(3, 4): ranks 0-3 on node 0, 4-7 on node 1, 8-11 on node 2. tp = 3 and
    pp = 4, tp innermost: stage 0's group is ranks 0-2 (node 0 alone), stage 1's ranks
    3-5 (nodes 0 and 1). An algorithm that runs only inside a node is refused before
    the run for stage 1's group, not only checked on stage 0's (every stage's groups,
    one per replica and stage)."""
    monkeypatch.setattr(parallel3d, "run_program", _stop)
    model = tr.gpt(4, 48, 3, 16, 126, batch=4)
    with pytest.raises(InvalidInputError,
                       match=r"^the tensor-parallel group \[3, 4, 5\] \((all_reduce|"
                             r"all_gather)\): one node only, got nodes \[0, 1, 1\]"):
        tr.step(model, sc.topology.cluster(3, 4), dp=1, tp=3, pp=4,
                algorithm=one_node_algorithm, order=("tp", "dp", "pp"),
                gpu=tr.GPU("g", 1e12))


@pytest.fixture
def one_node_sharded_algorithm():
    """all_reduce anywhere; reduce_scatter and all_gather (ZeRO's data-parallel
    collectives) inside one node only."""
    sc.register("all_reduce", "test_one_node_zero", cost=NO_FORMULA, replace=True)(_reduce)
    for collective, program in (("reduce_scatter", _reduce), ("all_gather", _gather)):
        sc.register(collective, "test_one_node_zero", cost=NO_FORMULA,
                    validate=_one_node_only, replace=True)(program)
    yield "test_one_node_zero"


def test_every_shards_data_parallel_group_is_checked(monkeypatch, one_node_sharded_algorithm):
    """cluster(2, 3): ranks 0-2 on node 0, 3-5 on node 1. dp = 2, tp = 3, dp innermost
    (rank = d + 2 t): shard 0's data-parallel group is ranks 0, 1 (node 0), shard 1's
    ranks 2, 3 (nodes 0 and 1), shard 2's 4, 5. ZeRO stage 1 runs reduce_scatter and
    all_gather over them, which this algorithm runs inside a node only: refused for
    shard 1's group before the run, not only checked on shard 0's."""
    monkeypatch.setattr(parallel3d, "run_program", _stop)
    model = tr.gpt(4, 48, 3, 16, 126, batch=4)
    with pytest.raises(InvalidInputError,
                       match=r"^the data-parallel group \[2, 3\] \((reduce_scatter|"
                             r"all_gather)\): one node only, got nodes \[0, 1\]"):
        tr.step(model, sc.topology.cluster(2, 3), dp=2, tp=3, zero_stage=1,
                algorithm=one_node_sharded_algorithm, order=("dp", "tp", "pp"),
                gpu=tr.GPU("g", 1e12))


def test_a_tied_embedding_that_tp_does_not_divide_is_checked_by_its_shard_of_the_run(
        monkeypatch):
    """A tied embedding of 5 elements over tp = 2: the run all-reduces shards of
    ceil(5 / 2) = 3 elements (buffer_of(-(-5 // 2), ...)) between the first and last
    stages, so a ring's chunks=3 suits every embedding group and runs, while chunks=4 is
    refused before the run, naming the embedding group and its 3 elements (checked by a
    shard of 5 // 2 = 2, chunks=3 was refused although the run could take it)."""
    monkeypatch.setattr(parallel3d, "run_program", _stop)
    model = replace(tr.gpt(2, 64, 4, 16, 128, batch=2), tied_embedding=5)
    with pytest.raises(_Ran):
        tr.step(model, sc.topology.switch(4), dp=1, tp=2, pp=2, algorithm="ring",
                algorithm_params={"chunks": 3}, gpu=tr.GPU("g", 1e12))
    with pytest.raises(InvalidInputError, match=r"^the embedding group \[\d+, \d+\] "
                                                r"\(all_reduce\): chunks=4 is more than the "
                                                r"3 elements"):
        tr.step(model, sc.topology.switch(4), dp=1, tp=2, pp=2, algorithm="ring",
                algorithm_params={"chunks": 4}, gpu=tr.GPU("g", 1e12))


def test_a_tied_embeddings_all_reduce_is_checked_as_a_buffer_of_gradient_bytes(monkeypatch):
    """Gradients of 3 bytes (no float type has that size: the run's buffer is bytes,
    3 x 5 = 15 elements for a tied embedding of 5) and parameters of 2: the first and
    last stages' all-reduce takes 15 elements, so chunks=15 runs and chunks=16 is
    refused naming them (checked as 5 float16 parameters, chunks=6 was refused)."""
    monkeypatch.setattr(parallel3d, "run_program", _stop)
    precision = Precision(param_bytes=2, grad_bytes=3)
    model = replace(tr.gpt(2, 64, 4, 16, 128, batch=2, precision=precision),
                    tied_embedding=5)
    with pytest.raises(_Ran):
        tr.step(model, sc.topology.switch(2), dp=1, pp=2, algorithm="ring",
                algorithm_params={"chunks": 15}, gpu=tr.GPU("g", 1e12))
    with pytest.raises(InvalidInputError, match=r"^the embedding group \[0, 1\] "
                                                r"\(all_reduce\): chunks=16 is more than the "
                                                r"15 elements"):
        tr.step(model, sc.topology.switch(2), dp=1, pp=2, algorithm="ring",
                algorithm_params={"chunks": 16}, gpu=tr.GPU("g", 1e12))


def _pairs_on_one_node(p, count, hosts, *, nodes):
    """Refuses a group of two GPUs on two nodes; larger groups anywhere."""
    if p == 2 and nodes[0] != nodes[1]:
        raise InvalidInputError(f"a pair on one node only, got nodes {list(nodes)}")


@pytest.fixture
def pair_algorithm():
    sc.register("all_reduce", "test_pairs", cost=NO_FORMULA, validate=_pairs_on_one_node,
                replace=True)(_reduce)
    sc.register("all_gather", "test_pairs", cost=NO_FORMULA, replace=True)(_gather)
    yield "test_pairs"


def test_every_shards_embedding_group_is_checked(monkeypatch, pair_algorithm):
    """cluster(2, 3): ranks 0-2 on node 0, 3-5 on node 1. tp = 3, pp = 2, pp innermost
    (rank = s + 2 t): shard t's tied-embedding group is its first and last stages'
    GPUs, ranks 2t and 2t + 1: [0, 1] on node 0, [2, 3] across the nodes, [4, 5] on
    node 1. An algorithm that runs a pair only inside a node is refused for shard 1's
    group before the run, not only checked on shard 0's (the tensor-parallel groups,
    of 3 GPUs, pass)."""
    monkeypatch.setattr(parallel3d, "run_program", _stop)
    model = tr.gpt(4, 48, 3, 16, 126, batch=4)
    with pytest.raises(InvalidInputError,
                       match=r"^the embedding group \[2, 3\] \(all_reduce\): a pair on one "
                             r"node only, got nodes \[0, 1\]"):
        tr.step(model, sc.topology.cluster(2, 3), dp=1, tp=3, pp=2,
                algorithm=pair_algorithm, order=("pp", "tp", "dp"), gpu=tr.GPU("g", 1e12))
