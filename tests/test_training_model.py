"""Model descriptions: parameter and FLOP counts against the papers' formulas and the
published totals, activation memory against Korthikanti et al.'s, and input checks."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import simcoll as sc
from simcoll import training as tr


def narayanan_params(n, h, s, v):
    """Narayanan et al. 2021: 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh)), exactly."""
    return 12 * n * h * h * (1 + Fraction(13, 12 * h) + Fraction(v + s, 12 * n * h))


def model_flops(b, s, n, h, v):
    """Korthikanti et al. 2022: 72 B s l h^2 (1 + s/(6h) + V/(12lh)), exactly."""
    return 72 * b * s * n * h * h * (1 + Fraction(s, 6 * h) + Fraction(v, 12 * n * h))


@pytest.mark.parametrize("n,h,a,s,v,b", [(2, 64, 4, 16, 128, 1), (12, 768, 12, 1024, 50257, 8),
                                         (48, 1600, 25, 1024, 50257, 3), (5, 120, 6, 7, 99, 2)])
def test_gpt_parameters_and_flops_are_the_papers_formulas(n, h, a, s, v, b):
    m = tr.gpt(n, h, a, s, v, b)
    assert m.params == narayanan_params(n, h, s, v)
    assert Fraction(m.flops) == pytest.approx(model_flops(b, s, n, h, v), rel=1e-12)
    assert m.blocks == n and (m.batch, m.seq_len, m.hidden, m.heads) == (b, s, h, a)
    # Backward costs twice the forward pass.
    assert m.flops == pytest.approx(3 * m.forward_flops, rel=1e-12)


def test_presets_against_published_totals():
    # Radford et al. 2019, Table 2: 1542M for the 48-layer GPT-2.
    gpt2 = tr.gpt2_1_5b()
    assert gpt2.params == pytest.approx(1542e6, rel=0.02)
    assert gpt2.params == narayanan_params(48, 1600, 1024, 50257)
    # Touvron et al. 2023 (LLaMA, Table 2): 6.7B for this shape; Llama 2: 70B.
    l7, h7, f7, v = 32, 4096, 11008, 32000
    assert tr.llama_7b().params == pytest.approx(6.7e9, rel=0.02)
    assert tr.llama_7b().params == l7 * (4 * h7 * h7 + 3 * h7 * f7 + 2 * h7) + 2 * v * h7 + h7
    l70, h70, f70, kv = 80, 8192, 28672, 8 * 128
    assert tr.llama_70b().params == pytest.approx(70e9, rel=0.02)
    assert tr.llama_70b().params == (l70 * (2 * h70 * h70 + 2 * h70 * kv + 3 * h70 * f70
                                            + 2 * h70) + 2 * v * h70 + h70)
    # 6 N D (Kaplan et al. 2020) over the matrix parameters (not the embedding lookup
    # or the norms), plus the attention scores: 3 x 4 B s^2 h per block.
    m = tr.llama_7b(batch=2)
    tokens = 2 * 4096
    matrices = m.params - v * h7 - (2 * l7 + 1) * h7
    attention = 3 * 4 * 2 * 4096 * 4096 * h7 * l7
    assert m.flops == pytest.approx(6 * matrices * tokens + attention, rel=1e-12)


def test_with_batch_scales_flops_only():
    m = tr.gpt(4, 64, 4, 16, 128, 2)
    m6 = m.with_batch(6)
    assert m6.batch == 6 and m6.params == m.params
    assert m6.flops == pytest.approx(3 * m.flops, rel=1e-12)
    assert m.activation_bytes(3) == 3 * 16 * 64 * 2


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_block_activation_memory_is_korthikanti(t):
    m = tr.gpt(4, 256, 8, 128, 1000)
    s, b, h, a = 128, 3, 256, 8
    sbh = s * b * h
    assert m.block_activation_memory(b, tp=t) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert m.block_activation_memory(b, tp=t, sequence_parallel=True) == pytest.approx(
        sbh / t * (34 + 5 * a * s / h))
    assert m.block_activation_memory(b, tp=t, recompute=True) == 2 * sbh
    assert m.block_activation_memory(b, tp=t, sequence_parallel=True,
                                     recompute=True) == pytest.approx(2 * sbh / t)
    if t == 1:  # no parallelism: s b h (34 + 5 a s / h)
        assert m.block_activation_memory(b) == pytest.approx(sbh * (34 + 5 * a * s / h))


@pytest.mark.parametrize("t", [1, 2, 4])
def test_fp32_activations_keep_their_four_bytes(t):
    """Korthikanti's count element by element with 4-byte activations (masks stay a
    byte): per s b h, 16 elements (4 of them, inputs and LayerNorms', not split by tensor
    parallelism) and 2 masks; per a s^2 b, 2 elements and a mask. The memory ignored
    Precision.activation_bytes and stayed at the 16-bit count."""
    m = tr.gpt(4, 256, 8, 128, 1000, precision=tr.Precision(activation_bytes=4))
    s, b, h, a = 128, 3, 256, 8
    sbh = s * b * h
    assert m.block_activation_memory(b, tp=t) == pytest.approx(
        sbh * (4 * 4 + 2 + 12 * 4 / t) + 9 * a * s * s * b / t)
    assert m.block_activation_memory(b, tp=t, sequence_parallel=True) == pytest.approx(
        sbh / t * (66 + 9 * a * s / h))
    assert m.block_activation_memory(b, tp=t, recompute=True) == 4 * sbh


def test_split_blocks():
    m = tr.gpt(5, 64, 4, 16, 128)
    parts = tr.split_blocks(m, 2)
    assert [[x.name for x in p] for p in parts] == [
        ["embedding", "block0", "block1", "block2"], ["block3", "block4", "logits"]]
    assert sum(len(p) for p in tr.split_blocks(m, 5)) == len(m.layers)
    # named by the argument given: split_blocks' stages, step's pp
    with pytest.raises(sc.InvalidInputError, match="^stages=6 .* 5 transformer blocks"):
        tr.split_blocks(m, 6)
    with pytest.raises(sc.InvalidInputError, match="^pp=6 .* 5 transformer blocks"):
        tr.split_blocks(m, 6, name="pp")


def test_gpu_rate():
    gpu = tr.GPU("half", 100.0, efficiency=0.5)
    assert gpu.flops_per_second == 50.0 and gpu.seconds(100.0) == 2.0
    assert tr.H100.peak_flops == 989e12 and tr.A100.peak_flops == 312e12


@pytest.mark.parametrize("call,match", [
    (lambda: tr.gpt(0, 64, 4, 16, 128), "layers=0"),
    (lambda: tr.gpt(2, 65, 4, 16, 128), "hidden=65 is not a multiple of heads=4"),
    (lambda: tr.llama(2, 64, 4, 16, 128, ffn=100, kv_heads=3), "heads=4 .* kv_heads=3"),
    (lambda: tr.GPU("x", 0.0), "peak_flops=0.0"),
    (lambda: tr.GPU("x", 1.0, efficiency=1.5), "efficiency=1.5"),
    (lambda: tr.Layer("x", (0,), 1.0, 1.0), r"tensors\[0\] = 0"),
    (lambda: tr.Layer("x", (1,), -1.0, 1.0), "forward_flops=-1.0"),
    (lambda: tr.Model("empty", (), 1, 1, 1, 1), "no layers"),
    (lambda: tr.Precision(param_bytes=-2), "param_bytes=-2"),
    (lambda: tr.Model("m", tr.gpt(2, 64, 4, 16, 128).layers, 1, 16, 64, 3),
     "hidden=64 is not a multiple of heads=3"),
    (lambda: tr.ddp_buckets([4, -1]), r"tensor_bytes\[1\] = -1 is not accepted"),
    (lambda: tr.ddp_buckets([4, 2.5]), r"tensor_bytes\[1\] = 2.5 is not accepted"),
    (lambda: tr.tensor_parallel_layer(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(3),
                                      tp=3), "tp=3 does not divide the 4 attention heads"),
    (lambda: tr.Layer("x", 5, 1.0, 1.0), "tensors=5 is not accepted"),
    # Built a block object at a time until memory ran out.
    (lambda: tr.gpt(2**70, 64, 4, 16, 128), r"layers=1180591620717411303424 is not accepted; "
                                            r"use an integer >= 1 and <= 10000"),
    (lambda: tr.Layer("x", (1,), 1.0, 1.0, block=1), "block=1 is not accepted"),
    (lambda: tr.Model("m", (1, 2), 1, 1, 1, 1), r"layers\[0\]=1 is not accepted"),
    (lambda: tr.Model("m", tr.gpt(2, 64, 4, 16, 128).layers, 1, 16, 64, 4, precision=None),
     "precision=None is not accepted"),
    (lambda: tr.gpt(2, 64, 4, 16, 128).heads_per_gpu(0), "tp=0 is not accepted"),
    (lambda: tr.gpt(2, 64, 4, 16, 128).block_activation_memory(1, tp=0),
     "tp=0 is not accepted"),
    (lambda: tr.gpt(2, 64, 4, 16, 128).block_activation_memory(-1), "sequences=-1"),
    (lambda: tr.gpt(2, 64, 4, 16, 128).activation_bytes(-1), "sequences=-1"),
    (lambda: tr.ddp_buckets(None), "tensor_bytes=None"),
    (lambda: tr.data_parallel("gpt", sc.topology.switch(2)), "model='gpt' is not accepted"),
    (lambda: tr.data_parallel(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2), gpu="A100"),
     "gpu='A100' is not accepted"),
    (lambda: tr.zero_step(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2), stage=1,
                          gpu=None), "gpu=None is not accepted"),
    (lambda: tr.tensor_parallel_layer(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2),
                                      tp=2, gpu=1), "gpu=1 is not accepted"),
    (lambda: tr.step(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2), dp=2, gpu="x"),
     "gpu='x' is not accepted"),
    (lambda: tr.data_parallel(tr.gpt(2, 64, 4, 16, 128), sc.topology.switch(2),
                              algorithm_params=[1]), r"algorithm_params=\[1\]"),
    (lambda: tr.Placement(2, 2, 2, order=("tp", "tp", "dp")), "order=.*once each"),
    (lambda: tr.Placement(0, 1, 1), "dp=0"),
    (lambda: tr.Placement(2, 2, 2).rank(2, 0, 0), r"d=2 .* <= 1 \(dp coordinate\)"),
    (lambda: tr.Placement(2, 2, 2).coords(8), "rank=8 .* <= 7"),
    (lambda: tr.split_blocks(tr.Model("m", (tr.Layer("x", (1,), 1.0, 1.0),), 1, 1, 1, 1), 2),
     "use at most 1 stage$"),
])
def test_bad_model_input(call, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        call()


def _never_run(*args, **kwargs):
    raise AssertionError("the run started although tp does not split the model")


@pytest.mark.parametrize("model,tp,match", [
    # 8 query heads in 2 key / value groups: tp=4 would replicate key / value heads, which
    # Megatron-LM refuses (num_query_groups % tp); gcd(8, 2, 64) = 2 -> tp in 1, 2.
    (tr.llama(2, 256, 8, 16, 100, ffn=64, kv_heads=2), 4,
     "tp=4 does not divide the 2 key / value heads of .*: 1, 2$"),
    # Every head count divides by 8 but the MLP width 100 does not: gcd(8, 8, 100) = 4.
    (tr.llama(2, 256, 8, 16, 100, ffn=100, kv_heads=8), 8,
     r"tp=8 does not divide the 100 MLP width \(ffn\) of .*: 1, 2, 4$"),
    # Llama 2 70B: 64 heads, 8 key / value heads, 28672 = 2^12 x 7: gcd = 8.
    (tr.llama_70b(), 16, "tp=16 does not divide the 8 key / value heads of Llama 70B; "
                         ".*: 1, 2, 4, 8$"),
])
def test_tp_must_divide_the_key_value_heads_and_the_mlp_width(monkeypatch, model, tp, match):
    for module in ("tensor", "parallel3d"):
        monkeypatch.setattr(f"simcoll.training.{module}.run_program", _never_run)
    with pytest.raises(sc.InvalidInputError, match=match):
        model.heads_per_gpu(tp)
    with pytest.raises(sc.InvalidInputError, match=match):
        tr.tensor_parallel_layer(model, sc.topology.switch(tp), tp=tp)
    with pytest.raises(sc.InvalidInputError, match=match):
        tr.step(model.with_batch(tp), sc.topology.switch(tp), dp=1, tp=tp)


def test_the_tp_the_model_splits_into_is_accepted():
    assert tr.llama(2, 256, 8, 16, 100, ffn=64, kv_heads=2).heads_per_gpu(2) == 4
    assert tr.llama_70b().heads_per_gpu(8) == 8
    gpt = tr.gpt(2, 64, 4, 16, 128)
    assert (gpt.kv_heads, gpt.ffn) == (None, 4 * 64)  # one key / value head per head
    assert gpt.heads_per_gpu(4) == 1
    with pytest.raises(sc.InvalidInputError, match="heads=4 is not a multiple of kv_heads=3"):
        tr.Model("m", gpt.layers, 1, 16, 64, 4, kv_heads=3)
    with pytest.raises(sc.InvalidInputError, match="ffn=0 is not accepted"):
        tr.Model("m", gpt.layers, 1, 16, 64, 4, ffn=0)


def test_split_blocks_names_a_stage_count_that_is_no_count_as_told():
    """split_blocks(name="pp") (step's): a stage count below 1 is refused as pp=, in the
    integer check as in the more-stages-than-blocks check."""
    model = tr.gpt2_1_5b()
    with pytest.raises(sc.InvalidInputError, match=r"^pp=0 is not accepted"):
        tr.split_blocks(model, 0, name="pp")
    with pytest.raises(sc.InvalidInputError, match=r"^stages=0 is not accepted"):
        tr.split_blocks(model, 0)


def test_numpy_numbers_are_kept_as_python_numbers():
    """Model, Precision, Layer and GPU checked numpy numbers and kept them: int32 shapes
    wrapped (b s h = 128 x 4096 x 8192 = 2^32 became 0 elements: no tensor-parallel bytes,
    no activations, a 283 GB step that 'fits'), and a float32 peak made float32 times."""
    hidden, seq, heads, batch = 8192, 4096, 64, 128
    block = tr.Layer("b", (np.int32(12 * hidden * hidden),), np.float32(1e15),
                     np.float32(2e15), block=True, attention_share=np.float32(0.5))
    model = tr.Model("x", (block, block), batch=np.int32(batch), seq_len=np.int32(seq),
                     hidden=np.int32(hidden), heads=np.int32(heads),
                     precision=tr.Precision(*(np.int32(b) for b in (2, 2, 12, 2))),
                     kv_heads=np.int64(8), ffn=np.int32(4 * hidden),
                     tied_embedding=np.uint8(0))
    gpu = tr.GPU("g", np.float32(989e12), efficiency=np.float64(0.5),
                 memory=np.float32(80e9))
    for value in (model.batch, model.seq_len, model.hidden, model.heads, model.kv_heads,
                  model.ffn, model.tied_embedding, *block.tensors,
                  *(getattr(model.precision, f) for f in ("param_bytes", "grad_bytes",
                                                          "optimizer_bytes",
                                                          "activation_bytes"))):
        assert type(value) is int
    for value in (block.forward_flops, block.backward_flops, block.attention_share,
                  gpu.peak_flops, gpu.efficiency, gpu.memory):
        assert type(value) is float
    # by hand (Korthikanti et al. 2022, no recomputation): s b h (34 + 5 a s / h) bytes
    assert model.block_activation_memory(batch) == \
        seq * batch * hidden * (34 + 5 * heads * seq / hidden)
    assert model.activation_bytes(batch) == batch * seq * hidden * 2
