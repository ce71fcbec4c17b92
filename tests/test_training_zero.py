"""ZeRO memory against the paper's Figure 1 and hand-worked values; each stage's
measured traffic against 2 Psi / 3 Psi with the exact (N-1)/N factors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import RunReached, run_reached

import simcoll as sc
from simcoll import training as tr
from simcoll.training.streams import Span
from simcoll.training.zero import _most_gathered


def test_figure_1_of_the_zero_paper():
    # Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N = 64, K = 12.
    psi, n = 7_500_000_000, 64
    expected = {0: 120e9, 1: 31.4e9, 2: 16.6e9, 3: 1.9e9}  # as printed, GB
    exact = {0: 16 * psi, 1: 4 * psi + 12 * psi / n, 2: 2 * psi + 14 * psi / n,
             3: 16 * psi / n}
    for stage in range(4):
        mem = tr.zero_memory(psi, n, stage)
        assert mem.total == pytest.approx(exact[stage], rel=1e-12)
        assert mem.total == pytest.approx(expected[stage], abs=0.05e9)
        assert mem.total == mem.params + mem.gradients + mem.optimizer_states


@pytest.mark.parametrize("psi,n,stage,k,expected", [
    # (params, gradients, optimizer states), worked by hand; 1000 / 3 -> shards of 334.
    (1000, 3, 0, 12, (2000, 2000, 12000)),
    (1000, 3, 1, 12, (2000, 2000, 12 * 334)),
    (1000, 3, 2, 12, (2000, 2 * 334, 12 * 334)),
    (1000, 3, 3, 12, (2 * 334, 2 * 334, 12 * 334)),
    (1000, 1, 3, 12, (2000, 2000, 12000)),
    (1024, 8, 2, 12, (2048, 256, 1536)),
    (1024, 8, 3, 8, (256, 256, 1024)),
    (10, 16, 3, 12, (2, 2, 12)),
    (0, 4, 3, 12, (0, 0, 0)),
])
def test_zero_memory_by_hand(psi, n, stage, k, expected):
    mem = tr.zero_memory(psi, n, stage, k)
    assert (mem.params, mem.gradients, mem.optimizer_states) == expected
    assert mem.total == sum(expected)


def test_zero_memory_with_other_byte_sizes():
    mem = tr.zero_memory(100, 4, 1, 16, param_bytes=4, grad_bytes=4)
    assert (mem.params, mem.gradients, mem.optimizer_states) == (400, 400, 16 * 25)


@pytest.mark.parametrize("kwargs,match", [
    (dict(params=10, world_size=2, stage=4), "stage=4"),
    (dict(params=10, world_size=0, stage=1), "world_size=0"),
    (dict(params=-1, world_size=2, stage=1), "params=-1"),
    (dict(params=1.5, world_size=2, stage=1), "params=1.5"),
    (dict(params=10, world_size=2, stage=1, k=-1), "k=-1"),
])
def test_zero_memory_refuses(kwargs, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        tr.zero_memory(**kwargs)


# Every tensor of this model is a multiple of 64 elements, so every shard is whole.
SMALL = tr.gpt(3, 64, 4, 16, 128, batch=2)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("algorithm", ["ring", "direct"])
def test_stage_traffic_is_the_papers_volume(n, stage, algorithm):
    res = tr.zero_step(SMALL, sc.topology.switch(n), stage=stage, algorithm=algorithm,
                       bucket_cap_mb=0.1, first_bucket_mb=0.05)
    psi = SMALL.params
    volume = 3 * psi if stage == 3 else 2 * psi
    expected = volume * (n - 1) // n * 2  # fp16: 2 bytes per parameter
    assert volume * (n - 1) % n == 0
    np.testing.assert_array_equal(res.bytes_sent, [expected] * n)
    np.testing.assert_array_equal(res.run.bytes_received, [expected] * n)
    assert res.communicated_params == volume
    assert res.memory == tr.zero_memory(psi, n, stage)
    assert res.step_time >= res.compute_time
    assert res.step_time == pytest.approx(res.compute_time + res.breakdown.exposed_total
                                          + res.breakdown.idle, rel=1e-9)
    if n == 1:
        assert res.exposed == {} and res.step_time == pytest.approx(res.compute_time)
    else:
        kinds = {0: {"all_reduce"}, 3: {"all_gather", "reduce_scatter"}}.get(
            stage, {"all_gather", "reduce_scatter"})
        assert set(res.exposed) == kinds


def test_stage_3_pads_layers_to_whole_shards():
    n = 3
    res = tr.zero_step(SMALL, sc.topology.switch(n), stage=3)
    shards = sum(-(-layer.params // n) for layer in SMALL.layers)
    # Ring all-gather and reduce-scatter each send (N-1) shards per layer.
    np.testing.assert_array_equal(res.bytes_sent, [3 * (n - 1) * shards * 2] * n)


def test_collectives_of_each_stage():
    n = 4
    kinds = {}
    for stage in range(4):
        res = tr.zero_step(SMALL, sc.topology.switch(n), stage=stage)
        kinds[stage] = {(s.stream, s.kind) for s in res.spans if s.stream != "compute"}
        counts = {k: sum(1 for s in res.spans if s.rank == 0 and s.kind == k)
                  for k in ("all_reduce", "reduce_scatter", "all_gather")}
        if stage == 3:
            # one all-gather per layer with parameters in each pass, one reduce-scatter.
            layers = sum(1 for layer in SMALL.layers if layer.params)
            assert counts == {"all_reduce": 0, "reduce_scatter": layers,
                              "all_gather": 2 * layers}
        elif stage == 0:
            assert counts["reduce_scatter"] == counts["all_gather"] == 0
        else:
            assert counts["all_reduce"] == 0
            assert counts["reduce_scatter"] == counts["all_gather"] > 0
    assert kinds[0] == {("all_reduce", "all_reduce")}
    assert kinds[1] == kinds[2] == {("reduce_scatter", "reduce_scatter"),
                                    ("all_gather", "all_gather")}


def test_prefetch_hides_all_gathers():
    topo = sc.topology.switch(4, bandwidth=50 * sc.GB)
    model = tr.gpt(6, 512, 8, 512, 1024, batch=4)
    slow_gpu = tr.GPU("slow", 20e12)
    eager = tr.zero_step(model, topo, stage=3, gpu=slow_gpu, prefetch=True)
    lazy = tr.zero_step(model, topo, stage=3, gpu=slow_gpu, prefetch=False)
    assert eager.step_time < lazy.step_time
    assert eager.exposed["all_gather"] < lazy.exposed["all_gather"]
    np.testing.assert_array_equal(eager.bytes_sent, lazy.bytes_sent)


def test_zero_step_refuses_bad_stage():
    with pytest.raises(sc.InvalidInputError, match="stage=5"):
        tr.zero_step(SMALL, sc.topology.switch(2), stage=5)
    with pytest.raises(sc.InvalidInputError, match="bucket_cap_mb=-1"):
        tr.zero_step(SMALL, sc.topology.switch(2), stage=3, bucket_cap_mb=-1)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("sizes", [(2, 4), (4, 2), (2, 1)])
def test_gradients_and_parameters_travel_at_their_own_sizes(stage, sizes):
    # bf16 parameters with gradients reduced in fp32 (FSDP's reduce_dtype), and the
    # reverse: the reduce half moves grad_bytes per element, the gather half param_bytes.
    param_bytes, grad_bytes = sizes
    n = 4
    model = tr.gpt(3, 64, 4, 16, 128, batch=2, precision=tr.Precision(
        param_bytes=param_bytes, grad_bytes=grad_bytes, activation_bytes=8))
    res = tr.zero_step(model, sc.topology.switch(n), stage=stage, bucket_cap_mb=0.1,
                       first_bucket_mb=0.05)
    psi = model.params
    assert psi % n == 0
    share = psi * (n - 1) // n
    gathers = 0 if stage == 0 else 2 if stage == 3 else 1
    expected = (2 * share * grad_bytes if stage == 0
                else share * grad_bytes + gathers * share * param_bytes)
    np.testing.assert_array_equal(res.bytes_sent, [expected] * n)
    np.testing.assert_array_equal(res.run.bytes_received, [expected] * n)


def _two_layers() -> tr.Model:
    """Layers A and B of 10^6 parameters each (2 MB in fp16, 1 MB shards on 2 GPUs);
    1 ms forward, 2 ms backward at 10^12 FLOP/s."""
    layers = tuple(tr.Layer(name, (1_000_000,), 1e9, 2e9) for name in ("A", "B"))
    return tr.Model("two", layers, batch=1, seq_len=8, hidden=8, heads=1)


@pytest.mark.parametrize(("prefetch", "step", "most"), [
    # Worked by hand (ms; every all-gather and reduce-scatter sends 1 MB at 1 GB/s):
    # gathers A fwd [0,1], B fwd [1,2] (prefetched), B bwd [3,4] (once B's forward has
    # let its copy go: it was prefetched during that forward, B held twice), A bwd [4,5]
    # (prefetched); forward A [1,2], B [2,3]; backward B [4,6], A [6,8]; reduce-scatters
    # B [6,7], A [8,9]. Held: A fwd [0,2], B fwd [1,3], B bwd [3,6], A bwd [4,8], B's
    # gradients [4,7], A's [6,9]: at most three layers' 2 MB at once, in [4,7).
    (True, 9e-3, 6_000_000),
    # Without prefetch each gather waits for the pass before: A fwd [0,1] computed
    # [1,2]; B fwd [2,3], [3,4]; B bwd [4,5], [5,7]; then B's reduce-scatter and A's
    # backward gather share the link from 7 (each at 0.5 GB/s) to 9; A bwd [9,11], its
    # reduce-scatter [11,12]. Held: B bwd [4,7] with B's gradients [5,9]; A bwd [7,11]
    # with them, then with A's [9,12]: two layers at most.
    (False, 12e-3, 4_000_000),
])
def test_fsdp_holds_the_gathered_layers_and_gradients_worked_out_by_hand(prefetch, step,
                                                                          most):
    model, gpu = _two_layers(), tr.GPU("unit", peak_flops=1e12)
    machine = sc.topology.switch(2, bandwidth=1e9, latency=0)
    z = tr.zero_step(model, machine, stage=3, gpu=gpu, prefetch=prefetch)
    assert z.step_time == pytest.approx(step, rel=1e-12)
    assert z.gathered == most
    assert z.memory.total == 16 * 1_000_000  # 16 Psi / N: what the shards take
    assert tr.zero_step(model, machine, stage=2, gpu=gpu).gathered == 0


def test_a_layer_that_takes_no_time_holds_its_parameters_while_they_are_gathered():
    # B has no FLOPs: its passes end when their gathers do. Gathers A fwd [0,1], B fwd
    # [1,2], B bwd [2,3]; A forward [1,2]; B's backward at 3 starts its reduce-scatter,
    # which shares the link with A's backward gather from 3 to 5; A backward [5,7], its
    # reduce-scatter [7,8]. Held: A fwd [0,2], B fwd [1,2], B bwd [2,3], A bwd [3,7],
    # B's gradients [3,5], A's [5,8]. At 3 B's backward pass holds its parameters, the
    # gradients it makes and A's, whose gather it started (prefetch) as it began: three
    # layers, as a B of any time gives; its parameters freed before its gradients
    # exist gave two.
    layers = (tr.Layer("A", (1_000_000,), 1e9, 2e9), tr.Layer("B", (1_000_000,), 0.0, 0.0))
    model = tr.Model("idle", layers, batch=1, seq_len=8, hidden=8, heads=1)
    z = tr.zero_step(model, sc.topology.switch(2, bandwidth=1e9, latency=0), stage=3,
                     gpu=tr.GPU("unit", peak_flops=1e12))
    assert z.step_time == pytest.approx(8e-3, rel=1e-12)
    assert z.gathered == 6_000_000
    # without prefetch A's backward gather starts once B's pass has freed B's parameters:
    # B's parameters and gradients, then B's gradients and A's parameters, 4 MB
    alone = tr.zero_step(model, sc.topology.switch(2, bandwidth=1e9, latency=0), stage=3,
                         gpu=tr.GPU("unit", peak_flops=1e12), prefetch=False)
    assert alone.gathered == 4_000_000


def test_a_pass_that_takes_no_time_holds_its_gradients_from_when_it_runs():
    # Z (2 x 10^6 parameters, no FLOPs) before A (10^6; 1 ms forward, 2 ms backward),
    # gradients in 4 B, prefetch. Gathers Z fwd [0,2], A fwd [2,3], A bwd [4,5] (once
    # A's forward ends), Z bwd [5,7]; A forward [3,4], backward [5,7]; Z's backward runs
    # at 7, when its gather and A's backward are done; reduce-scatters A [7,9], Z [9,13]
    # (behind A's on its stream). Held: Z fwd [0,2] 4 MB, A fwd [2,4] 2, A bwd [4,7] 2,
    # Z bwd [5,7] 4, A's gradients [5,9] 4, Z's [7,13] 8: most at 7, where Z's backward
    # pass holds its parameters with the gradients it makes, 4 + 4 + 8 = 16 MB. Z's
    # gradients were counted from the start of their reduce-scatter, which gave 10;
    # its parameters freed before its gradients exist gave 12.
    layers = (tr.Layer("Z", (2_000_000,), 0.0, 0.0), tr.Layer("A", (1_000_000,), 1e9, 2e9))
    model = tr.Model("late", layers, batch=1, seq_len=8, hidden=8, heads=1,
                     precision=tr.Precision(param_bytes=2, grad_bytes=4))
    z = tr.zero_step(model, sc.topology.switch(2, bandwidth=1e9, latency=0), stage=3,
                     gpu=tr.GPU("unit", peak_flops=1e12), prefetch=True)
    assert z.step_time == pytest.approx(13e-3, rel=1e-12)
    assert z.gathered == 16_000_000


@pytest.mark.parametrize("prefetch", [False, True])
def test_a_gpt_embedding_holds_its_gradients_from_its_backward_pass(prefetch):
    # tr.gpt's embedding takes no FLOPs and its backward pass comes last: on a 1 GB/s
    # switch its gradients (fp32) exist from when its gather lets the pass run, while
    # block0's are still being reduce-scattered (the embedding's wait behind them on
    # that stream), so a GPU holds both layers' gradients at once, and the embedding's
    # parameters (fp16), which its backward pass holds until its gradients exist.
    # Counted from the start of their reduce-scatter, they missed block0's: 4,760,576 B
    # (6,340,096 with prefetch); the parameters freed first left them out: 6,362,112.
    model = tr.gpt(layers=1, hidden=256, heads=8, seq_len=128, vocab=3000, batch=2,
                   precision=tr.Precision(param_bytes=2, grad_bytes=4))
    embedding, block, _ = model.layers
    assert (embedding.name, block.name) == ("embedding", "block0")
    z = tr.zero_step(model, sc.topology.switch(4, bandwidth=1e9, latency=1e-6), stage=3,
                     gpu=tr.GPU("g", 1e14), prefetch=prefetch)
    assert embedding.params % 4 == block.params % 4 == 0  # no padding
    assert z.gathered == (embedding.params + block.params) * 4 + embedding.params * 2


GPU = tr.GPU("unit", peak_flops=1e12)
MACHINE = sc.topology.switch(2, bandwidth=1e9, latency=0)


@pytest.mark.parametrize(("prefetch", "step", "most"), [
    # A 10^6 parameters (2 MB whole), N none, B 3x10^6 (6 MB); each 1 ms forward, A and
    # B 2 ms backward, N 1 ms. Gathers (1 MB per 10^6 sent): A fwd [0,1], B fwd [1,4],
    # B bwd [5,8] (once B's forward ends), A bwd [8,9]; compute A [1,2], N [2,3],
    # B [4,5]; backward B [8,10], N [10,11], A [11,13]; reduce-scatters B [10,13],
    # A [13,14]. Held: A fwd [0,2] 2 MB, B fwd [1,5] 6, B bwd [5,10] 6, A bwd [8,13] 2,
    # B's gradients [8,13] 6, A's [11,14] 2: most in [8,10), 6 + 2 + 6 = 14 MB.
    (True, 14e-3, 14_000_000),
    # Without prefetch: gathers A fwd [0,1], B fwd [3,6], B bwd [7,10], A bwd [13,15];
    # backward B [10,12], N [12,13], A [15,17]; reduce-scatters B [12,16], A [17,18].
    # Held: B bwd [7,12] with B's gradients [10,16]: 12 MB in [10,12).
    (False, 18e-3, 12_000_000),
])
def test_a_layer_without_parameters_between_layers_of_different_sizes(prefetch, step, most):
    layers = (tr.Layer("A", (1_000_000,), 1e9, 2e9), tr.Layer("N", (), 1e9, 1e9),
              tr.Layer("B", (3_000_000,), 1e9, 2e9))
    model = tr.Model("uneven", layers, batch=1, seq_len=8, hidden=8, heads=1)
    z = tr.zero_step(model, MACHINE, stage=3, gpu=GPU, prefetch=prefetch)
    assert z.step_time == pytest.approx(step, rel=1e-12)
    assert z.gathered == most


def test_gradients_wider_than_parameters_are_held_at_their_own_width():
    # The two layers of test_training_zero's hand-worked case, gradients in 4 B: the
    # reduce-scatters send 2 MB (2 ms). Gathers A fwd [0,1], B fwd [1,2], B bwd [3,4]
    # (once B's forward ends), A bwd [4,5]; backward B [4,6], A [6,8]; reduce-scatters
    # B [6,8], A [8,10]. Held: B bwd [3,6] 2 MB, A bwd [4,8] 2, B's gradients [4,8] 4,
    # A's [6,10] 4: in [6,8), 2 + 4 + 4 = 10 MB.
    layers = tuple(tr.Layer(name, (1_000_000,), 1e9, 2e9) for name in ("A", "B"))
    model = tr.Model("two", layers, batch=1, seq_len=8, hidden=8, heads=1,
                     precision=tr.Precision(param_bytes=2, grad_bytes=4))
    z = tr.zero_step(model, MACHINE, stage=3, gpu=GPU, prefetch=True)
    assert z.step_time == pytest.approx(10e-3, rel=1e-12)
    assert z.gathered == 10_000_000


def test_what_is_freed_at_an_instant_goes_before_what_is_taken_then():
    # ZeroStep.gathered read from spans made by hand (zero._most_gathered), one GPU, no
    # prefetch: layers A and B of 1 unit each, parameters 10 B and gradients 1 B per
    # unit, each pass 1 s. Passes: A fwd, B fwd, B bwd, A bwd; each gather starts as the
    # pass before it ends.
    from simcoll.training.streams import Span
    from simcoll.training.zero import _most_gathered

    spans = [Span(0, "all_gather", "all_gather", 0, 1),     # A fwd: held [0,2] 10
             Span(0, "compute", "forward", 1, 2),
             Span(0, "all_gather", "all_gather", 2, 3),     # B fwd: held [2,4] 10
             Span(0, "compute", "forward", 3, 4),
             Span(0, "all_gather", "all_gather", 4, 5),     # B bwd: held [4,6] 10
             Span(0, "compute", "backward", 5, 6),          # B's gradients [5,7] 1
             Span(0, "reduce_scatter", "reduce_scatter", 6, 7),
             Span(0, "all_gather", "all_gather", 6, 7),     # A bwd: held [6,8] 10
             Span(0, "compute", "backward", 7, 8),          # A's gradients [7,9] 1
             Span(0, "reduce_scatter", "reduce_scatter", 8, 9)]
    # at 2, 4 and 6 a layer's parameters are freed as the next one's gather starts: 11
    # (in [5,8)), not 21 (at 6: B's parameters and gradients with A's parameters)
    assert _most_gathered(spans, 1, [(1.0, 1.0), (1.0, 1.0)], [1, 1], 10, 1,
                          prefetch=False) == 11


def test_a_pass_of_no_time_whose_gather_ended_early_runs_when_the_pass_before_it_ends():
    # Layers A (1 unit; 1 s forward, 2 s backward) and Z (10 units, no time). Passes: A
    # fwd, Z fwd, Z bwd, A bwd. Gathers A fwd [0,1], Z fwd [1,2] (prefetched while A
    # computes [1,3]), Z bwd [2.5,4], A bwd [4,5]; A backward [5,7]; reduce-scatters Z
    # [4,6], A [7,8]. Z's forward runs at 3, when A's forward ends (its gather ended at
    # 2), so Z's forward parameters are held [1,3], not [1,2]. Held: A fwd [0,3] 1, Z fwd
    # [1,3] 10, Z bwd [2.5,4] 10 (Z's backward runs at 4, when its gather ends), Z's
    # gradients [4,6] 10, A bwd [4,7] 1, A's gradients [5,8] 1: most in [2.5,3), 21.
    # Freed at the end of its gather, Z's forward parameters would give 12 (in [5,6)).
    spans = [Span(0, "all_gather", "all_gather", 0, 1),
             Span(0, "compute", "forward", 1, 3),
             Span(0, "all_gather", "all_gather", 1, 2),
             Span(0, "all_gather", "all_gather", 2.5, 4),
             Span(0, "all_gather", "all_gather", 4, 5),
             Span(0, "reduce_scatter", "reduce_scatter", 4, 6),
             Span(0, "compute", "backward", 5, 7),
             Span(0, "reduce_scatter", "reduce_scatter", 7, 8)]
    assert _most_gathered(spans, 1, [(1.0, 2.0), (0.0, 0.0)], [1, 10], 1, 1,
                          prefetch=True) == 21


def test_a_backward_pass_of_no_time_waits_for_its_gather_before_its_gradients_exist():
    # Layers Z (10 units, no time) and B (1 unit; 1 s forward, 2 s backward), gradients
    # in 3 B. Passes: Z fwd, B fwd, B bwd, Z bwd. Gathers Z fwd [0,2], B fwd [2,3], B bwd
    # [3,4], Z bwd [4,7]; B forward [3,4], backward [4,6]; reduce-scatters B [6,6.5],
    # Z [8,10]. Z's backward runs at 7, when its gather ends (B's backward ended at 6):
    # its gradients exist from 7, not 6. Held: Z fwd [0,2] 10, B fwd [2,4] 1, B bwd
    # [3,6] 1, B's gradients [4,6.5] 3, Z bwd [4,7] 10, Z's gradients [7,10] 30: most at
    # 7, where Z's backward pass holds its parameters and the gradients it makes, 40.
    # Z's gradients from 6 would overlap B's: 43.
    spans = [Span(0, "all_gather", "all_gather", 0, 2),
             Span(0, "all_gather", "all_gather", 2, 3),
             Span(0, "compute", "forward", 3, 4),
             Span(0, "all_gather", "all_gather", 3, 4),
             Span(0, "compute", "backward", 4, 6),
             Span(0, "all_gather", "all_gather", 4, 7),
             Span(0, "reduce_scatter", "reduce_scatter", 6, 6.5),
             Span(0, "reduce_scatter", "reduce_scatter", 8, 10)]
    assert _most_gathered(spans, 1, [(0.0, 0.0), (1.0, 2.0)], [10, 1], 1, 3,
                          prefetch=True) == 40


def test_the_last_layer_is_not_gathered_for_its_backward_while_its_forward_holds_it():
    """One layer of 1.2 x 10^6 parameters on 4 GPUs: its backward gather was prefetched
    during its own forward, so two copies were held (4.8 MB) and that gather hid under
    the forward. FSDP gathers again once the forward copy is freed: the most held is the
    backward's parameters and gradients, 2.4 + 1.2 = 3.6 MB, with prefetch or without,
    and the step takes the same time either way."""
    layer = tr.Layer("b", (1_200_000,), 1e9, 2e9, block=True)
    model = tr.Model("one", (layer,), batch=1, seq_len=8, hidden=8, heads=1,
                     precision=tr.Precision(grad_bytes=1))
    machine = sc.topology.switch(4, bandwidth=1e10, latency=1e-6)
    steps = [tr.zero_step(model, machine, stage=3, gpu=tr.GPU("g", 1e12), prefetch=p)
             for p in (True, False)]
    assert [z.gathered for z in steps] == [3_600_000] * 2
    assert steps[0].step_time == pytest.approx(steps[1].step_time, rel=1e-12)
    forward = next(s for s in steps[0].spans if s.rank == 0 and s.kind == "forward")
    gather = next(s for s in steps[0].spans if s.rank == 0 and s.label == "b (backward)")
    assert gather.start >= forward.end


def test_the_last_layer_s_backward_gather_is_prefetched_once_its_forward_ends():
    """Block b (10^6 parameters: 1 ms gathers on 2 GPUs at 1 GB/s) then a head without
    parameters (1 ms each way). b's backward gather starts as b's forward ends, under the
    head's two passes (2 ms), so nothing waits for it: gathers b fwd [0,1], b bwd [2,3];
    forward b [1,2], head [2,3]; backward head [3,4], b [4,6]; reduce-scatter b [6,7]."""
    layers = (tr.Layer("b", (1_000_000,), 1e9, 2e9), tr.Layer("head", (), 1e9, 1e9))
    model = tr.Model("headed", layers, batch=1, seq_len=8, hidden=8, heads=1)
    z = tr.zero_step(model, sc.topology.switch(2, bandwidth=1e9, latency=0), stage=3,
                     gpu=tr.GPU("unit", peak_flops=1e12), prefetch=True)
    gathers = [(s.start, s.end) for s in z.spans if s.rank == 0 and s.kind == "all_gather"]
    assert gathers == [pytest.approx((0, 1e-3)), pytest.approx((2e-3, 3e-3))]
    assert z.step_time == pytest.approx(7e-3, rel=1e-12)
    assert z.exposed["all_gather"] == pytest.approx(1e-3, rel=1e-12)


def test_zero_1_checks_its_buckets_not_its_layers_against_the_counters(monkeypatch):
    """One layer of two tensors of 2^58 two-byte elements on 2 GPUs (inputs of at most
    (2^63 - 1) // 8 = 2^60 - 1 bytes): ZeRO-1 reduce-scatters each tensor in a bucket of
    its own (2^59 bytes, over the 25 MB cap), so it runs; ZeRO-3 gathers and
    reduce-scatters the whole layer, 2^60 bytes, and is refused."""
    monkeypatch.setattr("simcoll.training.zero.run_program", run_reached)
    model = tr.Model("two", (tr.Layer("a", (2**58, 2**58), 1.0, 1.0),), 2, 1, 1, 1)
    with pytest.raises(RunReached):
        tr.zero_step(model, sc.topology.switch(2), stage=1)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^two's largest layer's gradients, {2**60} bytes"):
        tr.zero_step(model, sc.topology.switch(2), stage=3)


def test_zero_counts_a_layers_padding_to_whole_shards_against_the_counters(monkeypatch):
    """3 GPUs take inputs of at most (2^63 - 1) // 18 = 512409557603043100 bytes, which
    256204778801521550 two-byte elements fill exactly; padded to whole shards of 3 (one
    more element) they are 2 bytes past it."""
    monkeypatch.setattr("simcoll.training.zero.run_program", run_reached)
    n = 256204778801521550
    assert 2 * n == (2**63 - 1) // 18 and n % 3 == 2
    model = tr.Model("edge", (tr.Layer("a", (n,), 1.0, 1.0),), 3, 1, 1, 1)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^edge's largest layer's gradients, {2 * (n + 1)} bytes, in a "
                             rf"collective over 3 GPUs"):
        tr.zero_step(model, sc.topology.switch(3), stage=3)
