"""Edges of the training steps: algorithms they cannot use, limits checked for every
strategy, steps of any length, unpadded DDP gradients, one GPU."""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll import numeric
from simcoll import training as tr
from simcoll.checks import shown

GPU = tr.GPU("toy", 1e12)
TOY = tr.Model("toy", tuple(tr.Layer(f"l{i}", (2**20,), 1e9, 2e9) for i in range(4)),
               batch=4, seq_len=1, hidden=1, heads=1)
SWITCH = sc.topology.switch(4, bandwidth=100 * sc.GB, latency=1 * sc.us)
BUCKETED = "algorithm='bucketed' models a backward pass of its own"


@pytest.mark.parametrize("run", [
    lambda: tr.data_parallel(TOY, SWITCH, gpu=GPU, algorithm="bucketed"),
    lambda: tr.zero_step(TOY, SWITCH, stage=0, gpu=GPU, algorithm="bucketed"),
    lambda: tr.step(TOY, SWITCH, dp=4, gpu=GPU, algorithm="bucketed"),
    lambda: tr.tensor_parallel_layer(tr.gpt(layers=2, hidden=64, heads=4, seq_len=16,
                                            vocab=96, batch=4),
                                     SWITCH, tp=4, gpu=GPU, algorithm="bucketed"),
    lambda: numeric.ddp(SWITCH, numeric.TrainingJob.synthetic(
        numeric.MLP((8, 16, 8)), batch=8, steps=1, optimizer=numeric.SGD(0.1), seed=0),
        algorithm="bucketed"),
])
def test_a_step_refuses_the_bucketed_all_reduce(run):
    """bucketed computes a backward pass of its own on the GPU's one stream, behind the
    step's: a DDP step of 12 ms + one 6 MiB all-reduce came out as the step without
    overlap, and its own compute counted as exposed communication."""
    with pytest.raises(sc.InvalidInputError, match=BUCKETED):
        run()


@pytest.mark.parametrize("strategy", ["loop", "fused", "ddp"])
@pytest.mark.parametrize("limits,message", [
    ({"bucket_cap_mb": -5}, "bucket_cap_mb=-5 is not accepted"),
    ({"first_bucket_mb": "big"}, "first_bucket_mb='big' is not accepted"),
])
def test_bucket_limits_are_checked_for_every_strategy(strategy, limits, message):
    with pytest.raises(sc.InvalidInputError, match=message):
        tr.data_parallel(TOY, SWITCH, gpu=GPU, strategy=strategy, **limits)


SLOW = tr.GPU("TFLOP/s given as FLOP/s", 312)


@pytest.mark.parametrize("run", [
    lambda: tr.data_parallel(TOY, SWITCH, gpu=SLOW),
    lambda: tr.zero_step(TOY, SWITCH, stage=0, gpu=SLOW),
    lambda: tr.zero_step(TOY, SWITCH, stage=3, gpu=SLOW),
    lambda: tr.step(TOY, SWITCH, dp=4, gpu=SLOW),
    lambda: tr.pipeline_step(SWITCH, stages=2, micro_batches=2, forward=1e6, backward=2e6,
                             activation_bytes=8),
    lambda: tr.data_parallel_step(SWITCH, gradient_bytes=4000, forward=1e7, backward=2e6),
])
def test_a_step_longer_than_a_simulation_limit_runs(run):
    """A step of years (peak_flops in TFLOP/s by mistake) failed with "raise the limit",
    which no training step takes; it runs, and its time shows the slip."""
    assert run().step_time > 1e6


def test_a_tensor_parallel_layer_of_years_runs():
    gpt = tr.gpt(layers=2, hidden=64, heads=4, seq_len=16, vocab=96, batch=4)
    assert tr.tensor_parallel_layer(gpt, SWITCH, tp=4, gpu=tr.GPU("slow", 1e-3)).time > 1e6


def test_a_step_of_years_is_its_compute_and_its_all_reduce():
    # 4 layers of 3e9 FLOPs at 312 FLOP/s, then the last 2 MiB tensor's all-reduce
    dp = tr.data_parallel(TOY, SWITCH, gpu=SLOW, strategy="loop", overlap=False)
    compute = 4 * 3e9 / 312
    assert dp.compute_time == pytest.approx(compute, rel=1e-15)
    ring = 4 * (2 * 3 * (2 * sc.us + 2**21 / 4 / (100 * sc.GB)))   # 4 all-reduces of 2 MiB
    # at 4e7 s a clock tick is 7.5e-9 s: the 24 ring steps lose some 1e-8 s
    assert dp.step_time - compute == pytest.approx(ring, abs=1e-7)


def test_zero_stage_0_all_reduces_gradients_unpadded():
    """Two layers of 5 fp16 gradients on dp=4: step(zero_stage=0) all-reduced them padded
    to 8 elements; DDP pads nothing. A ring all-reduce sends 2 (p - 1) x the buffer in
    all, over the ranks."""
    model = tr.Model("toy", (tr.Layer("a", (5,), 1e9, 2e9), tr.Layer("b", (5,), 1e9, 2e9)),
                     batch=4, seq_len=1, hidden=1, heads=1)
    grad = model.precision.grad_bytes
    got = tr.step(model, sc.topology.switch(4), dp=4, zero_stage=0, gpu=GPU)
    assert int(got.run.bytes_sent.sum()) == 2 * (4 - 1) * 10 * grad
    zero = tr.zero_step(model, sc.topology.switch(4), stage=0, gpu=GPU)
    assert int(zero.bytes_sent.sum()) == 2 * (4 - 1) * 10 * grad


def test_one_gpu_steps_take_their_compute_not_an_ulp_less():
    layers = tuple(tr.Layer(f"l{i}", (4,), 0.1e12 * (i + 1) / 3, 0.2e12 * (i + 1) / 3)
                   for i in range(5))
    model = tr.Model("toy", layers, batch=1, seq_len=1, hidden=1, heads=1)
    for stage in range(4):
        z = tr.zero_step(model, sc.topology.switch(1), stage=stage, gpu=GPU)
        assert z.step_time >= z.compute_time and z.step_time - z.compute_time < 1e-15


def test_the_byte_sizes_of_training_steps_take_size_strings_as_simulate_does():
    # "4MiB" is 4 * 2**20 bytes and "1e3" is 1000: each step with a string is the step
    # with those integers, field for field.
    topo = sc.topology.switch(4, bandwidth=100 * sc.GB, latency=1 * sc.us)
    with_strings = tr.data_parallel_step(topo, gradient_bytes="16MiB", forward=1e-3,
                                         backward=2e-3, bucket_bytes="4MiB")
    with_ints = tr.data_parallel_step(topo, gradient_bytes=16 * 2**20, forward=1e-3,
                                      backward=2e-3, bucket_bytes=4 * 2**20)
    assert with_strings == with_ints and with_ints.buckets == 4
    assert tr.pipeline_step(topo, stages=4, micro_batches=4, forward=1e-3, backward=2e-3,
                            activation_bytes="1e3") == tr.pipeline_step(
        topo, stages=4, micro_batches=4, forward=1e-3, backward=2e-3, activation_bytes=1000)
    job = numeric.TrainingJob.synthetic(numeric.MLP((8, 16, 8)), batch=8, steps=1,
                                        optimizer=numeric.SGD(0.1), seed=0)
    # the MLP's float64 gradients: 8*16 + 16 + 16*8 + 8 elements, 2240 bytes
    assert numeric.ddp_buckets(job.model, "1KiB") == numeric.ddp_buckets(job.model, 1024)
    assert len(numeric.ddp_buckets(job.model, "1KiB")) > 1


@pytest.mark.parametrize("run, match", [
    (lambda: tr.data_parallel_step(SWITCH, gradient_bytes="16Mb", forward=0, backward=0),
     r"^gradient_bytes='16Mb' is not accepted: cannot read size '16Mb': a lowercase b is a "
     r"bit"),
    (lambda: tr.data_parallel_step(SWITCH, gradient_bytes=64, forward=0, backward=0,
                                   bucket_bytes="0B"),
     r"^bucket_bytes=0 is not accepted; use an integer >= 1 \(bytes, or a size such as "
     r"'25MiB'\)$"),
    (lambda: tr.pipeline_step(SWITCH, stages=2, micro_batches=1, forward=0, backward=0,
                              activation_bytes="1.5B"),
     r"^activation_bytes='1.5B' is not accepted: size '1.5B' is 1.5 bytes, not a whole"),
    (lambda: tr.pipeline_step(SWITCH, stages=2, micro_batches=1, forward=0, backward=0,
                              activation_bytes=2.5),
     r"^activation_bytes=2.5 is not accepted; use an integer >= 0"),
    (lambda: numeric.ddp_buckets(numeric.MLP((8, 16, 8)), True),
     r"^bucket_bytes=True is not accepted"),
])
def test_a_size_that_is_not_one_is_refused_naming_it(run, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        run()


@pytest.mark.parametrize("strategy", ["loop", "fused", "ddp"])
def test_one_gpu_communicates_nothing_not_an_ulp(strategy):
    # One GPU sends nothing: no exposed communication, a scaling efficiency of exactly 1,
    # whichever way round the clock rounds the compute spans' sum.
    model = tr.gpt(layers=4, hidden=256, heads=8, seq_len=128, vocab=1000, batch=8)
    one = sc.topology.switch(1)
    run = tr.data_parallel(model, one, gpu=GPU, strategy=strategy)
    assert run.step_time == run.compute_time
    assert run.exposed_communication == 0.0 and run.scaling_efficiency == 1.0
    for stage in range(4):
        zero = tr.zero_step(model, one, stage=stage, gpu=GPU)
        assert zero.step_time == zero.compute_time and zero.gathered == 0


def _tiny_layers(count: int, params: int) -> tr.Model:
    return tr.Model("tiny", tuple(tr.Layer(f"l{i}", (params,), 1e6, 2e6)
                                  for i in range(count)), batch=4, seq_len=1, hidden=2, heads=2)


@pytest.mark.parametrize("stage, kept", [
    # 100 layers of one parameter on 64 GPUs, fp16 parameters and gradients, 12 B of
    # optimizer state: stage 3 pads each layer to 64 elements, so each GPU keeps one of
    # every layer, 100 elements of each state; stages 1 and 2 pad the one bucket of 100
    # gradients to 128, two elements a GPU; unpartitioned states keep all 100.
    (0, (200, 200, 1200)), (1, (200, 200, 24)), (2, (200, 4, 24)), (3, (200, 200, 1200)),
])
def test_zero_memory_keeps_the_padded_shards_the_run_moves(stage, kept):
    res = tr.zero_step(_tiny_layers(100, 1), sc.topology.switch(64), stage=stage, gpu=GPU)
    assert (res.memory.params, res.memory.gradients, res.memory.optimizer_states) == kept


def test_a_3d_step_keeps_the_padded_shards_its_zero_moves():
    # Three layers of 6 parameters, tp=2 (3 each), dp=2 ZeRO-3: each layer's 3 pad to 4,
    # so a GPU keeps 2 elements of each of its 3 layers: 6 elements, 12 B of fp16, 72 B
    # of optimizer state (not ceil(ceil(18 / 2) / 2) = 5 elements).
    res = tr.step(_tiny_layers(3, 6), sc.topology.switch(4), dp=2, tp=2, zero_stage=3,
                  gpu=GPU)
    assert [(m.params, m.gradients, m.optimizer_states) for m in res.memory] == [(12, 12, 72)]
    whole = tr.step(_tiny_layers(3, 6), sc.topology.switch(4), dp=2, tp=2, zero_stage=0,
                    gpu=GPU)
    assert [(m.params, m.gradients, m.optimizer_states) for m in whole.memory] == [
        (18, 18, 108)]


def test_a_model_given_where_a_count_goes_is_named_in_a_short_message():
    # Llama 7B's repr filled a 7.6 kB message that never said to pass model.params.
    with pytest.raises(sc.InvalidInputError, match=r"^zero_memory takes Psi, a number of "
                       r"parameters, not the Model 'Llama 7B'; pass model.params, with "
                       r"k=model.precision.optimizer_bytes \(12\), param_bytes=2 and "
                       r"grad_bytes=2 for its precision$"):
        tr.zero_memory(tr.llama_7b(), 64, stage=3)
    # anywhere else a value's text is cut at 100 characters, saying what it was
    with pytest.raises(sc.InvalidInputError) as refused:
        tr.zero_memory(7, tr.llama_7b(), stage=3)
    message = str(refused.value)
    assert message.startswith("world_size=Model(name='Llama 7B', layers=(Layer(")
    assert message.endswith("... (a Model) is not accepted; use an integer >= 1")
    assert len(message) == len("world_size=") + 80 + len("... (a Model)") + len(
        " is not accepted; use an integer >= 1")
    with pytest.raises(sc.InvalidInputError, match=r"^k=\[0, 1, 2, .*\.\.\. \(a list of 500 "
                                                   r"items\) is not accepted"):
        tr.zero_memory(7, 2, stage=1, k=list(range(500)))


@pytest.mark.parametrize("stage, kept", [
    # Three layers of 5 parameters, tp=2: a GPU keeps ceil(5 / 2) = 3 of each layer,
    # 9 elements (not ceil(15 / 2) = 8): 18 B of fp16 parameters and gradients, 108 B
    # of optimizer state. dp=2 ZeRO-3: each layer's 3 pad to 4, 2 elements a GPU, 6 in
    # all (not padded(5 // 2, 2) / 2 = 1 a layer): 12 B, 12 B and 72 B.
    (0, (18, 18, 108)), (3, (12, 12, 72)),
])
def test_a_3d_step_rounds_each_layers_tensor_shard_up(stage, kept):
    res = tr.step(_tiny_layers(3, 5), sc.topology.switch(4), dp=2, tp=2, zero_stage=stage,
                  gpu=GPU)
    assert [(m.params, m.gradients, m.optimizer_states) for m in res.memory] == [kept]


def test_a_value_of_exactly_100_characters_is_shown_whole_and_one_more_is_cut():
    # repr of 98 x's is 100 characters with its quotes: the limit, shown whole
    assert shown("x" * 98) == "'" + "x" * 98 + "'"
    # 101 characters: the first 80 kept, then what it was
    assert shown("x" * 99) == "'" + "x" * 79 + "... (a str)"


def test_a_long_tuple_is_cut_naming_its_length_as_a_list_is():
    text = str(tuple(range(500)))            # Python's own repr, 2390 characters
    assert shown(tuple(range(500))) == text[:80] + "... (a tuple of 500 items)"
    assert shown(list(range(500))) == str(list(range(500)))[:80] + "... (a list of 500 items)"




@pytest.mark.parametrize("whole", [np.float32(1024.0), np.float16(1024.0), np.float64(1024.0)])
def test_a_whole_numpy_float_of_any_width_is_a_size(whole):
    # np.float64 is a Python float; np.float32 and np.float16 are not, and are whole too
    assert tr.pipeline_step(SWITCH, stages=2, micro_batches=1, forward=0, backward=0,
                            activation_bytes=whole) == tr.pipeline_step(
        SWITCH, stages=2, micro_batches=1, forward=0, backward=0, activation_bytes=1024)


@pytest.mark.parametrize("value, match", [
    ("16Mb", r"^link_bytes='16Mb' is not accepted: cannot read size"),
    (-1, r"^link_bytes=-1 is not accepted; use an integer >= 0 \(bytes, or a size such as "
         r"'25MiB'\)$"),
])
def test_a_size_is_refused_with_the_callers_error_class(value, match):
    from simcoll.checks import size

    with pytest.raises(sc.TopologyError, match=match):
        size(value, "link_bytes", error=sc.TopologyError)


@pytest.mark.parametrize("topology", ["switch(4)", None, 4])
def test_data_parallel_step_with_data_refuses_what_is_not_a_topology(topology):
    """With data= it read topology.nranks first: AttributeError: 'str' object has no
    attribute 'nranks'."""
    with pytest.raises(sc.InvalidInputError, match="Topology"):
        tr.data_parallel_step(topology, gradient_bytes=32, forward=0, backward=1e-3,
                              data=[np.ones(8, np.float32) for _ in range(4)])


@pytest.mark.parametrize("sequence_parallel", [False, True])
@pytest.mark.parametrize("tp", [1, 2])
def test_a_model_without_activation_bytes_runs_its_tensor_parallel_layer(tp,
                                                                        sequence_parallel):
    """Precision(activation_bytes=0) raised ZeroDivisionError in the text of an
    overflow hint nothing needed; step() ran the same model."""
    model = tr.gpt(layers=2, hidden=64, heads=4, seq_len=8, vocab=100, batch=4,
                   precision=tr.Precision(activation_bytes=0))
    layer = tr.tensor_parallel_layer(model, SWITCH, tp=tp, gpu=GPU,
                                     sequence_parallel=sequence_parallel)
    assert layer.time >= 0 and all(b == 0 for b in layer.run.bytes_sent)


@pytest.mark.parametrize("run", [
    lambda **kw: tr.tensor_parallel_layer(tr.gpt(layers=2, hidden=64, heads=4, seq_len=16,
                                                 vocab=96, batch=4), SWITCH, tp=1, gpu=GPU,
                                          **kw),
    lambda **kw: tr.step(TOY, sc.topology.switch(1), dp=1, gpu=GPU, **kw),
])
def test_a_step_that_runs_no_collective_still_refuses_an_unknown_algorithm(run):
    """tp=1 (or dp = tp = pp = 1) runs no collective, and took any name and any
    parameters, where tp=2 refused the same typo: the name must be an algorithm's."""
    with pytest.raises(sc.UnknownAlgorithmError, match="'nope'"):
        run(algorithm="nope")
    with pytest.raises(sc.InvalidInputError, match="'x'"):
        run(algorithm_params={"x": 1})
    with pytest.raises(sc.InvalidInputError, match="proto"):
        run(algorithm="nccl", algorithm_params={"proto": "LL64"})
    # an algorithm of other collectives is taken (nothing runs it: as a pure pipeline
    # takes one, tests/test_training_3d.py), with the parameters it takes there
    assert run(algorithm="bruck") is not None
    assert run(algorithm="ring", algorithm_params={"chunks": 2}) is not None


@pytest.mark.parametrize("sizes", [{4, 3}, {4: 1, 3: 2}, iter([4, 3])])
def test_an_mlp_refuses_unordered_sizes(sizes):
    """A set or a dict gave the widths in their own iteration order: MLP({4, 3}).sizes
    was (3, 4)."""
    with pytest.raises(sc.InvalidInputError, match="in order"):
        numeric.MLP(sizes)


def _smallest_tensor(model: tr.Model) -> int:
    return min(n for layer in model.layers for n in layer.tensors)


_GPT = tr.gpt(layers=2, hidden=64, heads=4, seq_len=8, vocab=100, batch=8)
_FOUR = sc.topology.switch(4, bandwidth=100 * sc.GB, latency=1 * sc.us)


@pytest.mark.parametrize("run, most", [
    # loop: an all-reduce per tensor, the smallest (a layer norm's 64) bounds chunks
    (lambda c: tr.data_parallel(_GPT, _FOUR, strategy="loop", algorithm_params=c),
     _smallest_tensor(_GPT)),
    # FSDP: each layer all-gathers its 1/4 shard (padded to 4): the smallest layer's
    (lambda c: tr.zero_step(_GPT, _FOUR, stage=3, algorithm_params=c),
     min(-(-x.params // 4) for x in _GPT.layers if x.params)),
    # a block's all-reduce of one sequence's activations, s x h = 8 x 64
    (lambda c: tr.tensor_parallel_layer(_GPT, _FOUR, tp=2, algorithm_params=c), 8 * 64),
    # with sequence parallelism the all-gather of a 1/2 shard of them
    (lambda c: tr.tensor_parallel_layer(_GPT, _FOUR, tp=2, sequence_parallel=True,
                                        algorithm_params=c), 8 * 64 // 2),
    # dp = tp = 2: the tensor-parallel all-reduce of B / dp = 4 sequences (4 x 8 x 64 =
    # 2048) against the data-parallel all-reduce of each layer's 1/2 tensor shard (the
    # smallest layer, the embedding's 6,912 parameters, gives 3,456)
    (lambda c: tr.step(_GPT, _FOUR, dp=2, tp=2, algorithm_params=c),
     min(4 * 8 * 64, min(-(-x.params // 2) for x in _GPT.layers if x.params))),
])
def test_a_chunk_count_above_a_steps_smallest_collective_is_refused_before_the_run(run, most):
    """algorithm_params were checked against 2**62 elements: chunks above a collective's
    elements passed, and the run failed once that collective started, as an
    AlgorithmError from inside the program."""
    assert run({"chunks": most}) is not None
    with pytest.raises(sc.InvalidInputError, match=f"chunks={most + 1} is more than the "
                                                   f"{most} elements"):
        run({"chunks": most + 1})


def test_a_model_without_parameters_takes_parameters_its_collectives_would_take():
    """No gradient to all-reduce: the pre-run check took the smallest input as 0
    elements and refused chunks=2, where the run (and tp=1) take it."""
    empty = tr.Model("empty", (tr.Layer("a", (), 1e9, 2e9),), batch=4, seq_len=1, hidden=1,
                     heads=1)
    params = {"chunks": 2}
    assert tr.data_parallel(empty, _FOUR, gpu=GPU, algorithm_params=params).step_time > 0
    assert tr.zero_step(empty, _FOUR, stage=3, gpu=GPU, algorithm_params=params).step_time > 0
    assert tr.step(empty, _FOUR, dp=4, gpu=GPU, algorithm_params=params).step_time > 0


_THREE = sc.topology.switch(3, bandwidth=100 * sc.GB, latency=1 * sc.us)


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_stage_1_and_2_bound_chunks_by_the_padded_bucket_shard(stage):
    """ZeRO-1/2 reduce-scatter each bucket padded to a multiple of the GPU count and
    all-gather its 1/n shard. The toy GPT's 106,880 parameters (embedding 108 x 64 =
    6,912, two blocks of 49,984) fit in its first 1 MB bucket; on 3 GPUs the padded
    bucket is 106,881 elements, a shard 35,627 = ceil(106,880 / 3); unpadded it would
    be 35,626 and a valid chunk count refused."""
    total = sum(layer.params for layer in _GPT.layers)
    assert total == 6912 + 2 * 49984 == 106_880
    most = -(-total // 3)
    assert most == 35_627
    assert tr.zero_step(_GPT, _THREE, stage=stage, algorithm_params={"chunks": most}) \
        is not None
    with pytest.raises(sc.InvalidInputError, match=f"chunks={most + 1} is more than the "
                                                   f"{most} elements"):
        tr.zero_step(_GPT, _THREE, stage=stage, algorithm_params={"chunks": most + 1})


_TWO = sc.topology.switch(2, bandwidth=100 * sc.GB, latency=1 * sc.us)


@pytest.mark.parametrize("run, most, collective", [
    # dp = 1, tp = pp = 2, one micro-batch of all 8 sequences: 8 x 8 x 64 = 4,096
    # elements a block's all-reduce takes; across the stages each tensor-parallel rank
    # all-gathers its 1/2 shard of them, 2,048
    (lambda c: tr.step(_GPT, _FOUR, dp=1, tp=2, pp=2, algorithm_params=c), 8 * 8 * 64 // 2,
     "all_gather"),
    # dp = 2, tp = 2 with sequence parallelism: B / dp = 4 sequences, 4 x 8 x 64 = 2,048
    # elements, all-gathered from 1/2 shards of 1,024
    (lambda c: tr.step(_GPT, _FOUR, dp=2, tp=2, sequence_parallel=True,
                       algorithm_params=c), 4 * 8 * 64 // 2, "all_gather"),
    # dp = 1: no data-parallel collective runs, so the layers' 1/2 shards (the
    # embedding's 6,912 / 2 = 3,456) bound nothing; the tensor-parallel all-reduce of
    # 8 x 8 x 64 = 4,096 elements does
    (lambda c: tr.step(_GPT, _TWO, dp=1, tp=2, algorithm_params=c), 8 * 8 * 64,
     "all_reduce"),
])
def test_a_3d_steps_chunk_bound_is_its_smallest_collective_that_runs(run, most, collective):
    """The bound checked before the run is that of the collectives the step runs: a 1/tp
    shard all-gathered (across pipeline stages, or with sequence parallelism), and no
    data-parallel collective at dp = 1."""
    assert run({"chunks": most}) is not None
    with pytest.raises(sc.InvalidInputError, match=rf"\({collective}\): chunks={most + 1} is "
                                                   rf"more than the {most} elements"):
        run({"chunks": most + 1})


def test_a_3d_zero_steps_chunk_bound_is_the_padded_layers_shard():
    """dp = 3 with ZeRO-1: each layer's gradients are reduce-scattered padded to a
    multiple of 3 and its parameters all-gathered from 1/3 shards. The smallest layer,
    the embedding of (101 + 8) x 64 = 6,976 parameters, pads to 6,978: shards of 2,326
    = ceil(6,976 / 3) (unpadded, 2,325 would refuse a chunk count the run takes)."""
    model = tr.gpt(layers=2, hidden=64, heads=4, seq_len=8, vocab=101, batch=6)
    assert min(x.params for x in model.layers if x.params) == (101 + 8) * 64 == 6976
    most = -(-6976 // 3)
    assert most == 2326
    three = sc.topology.switch(3, bandwidth=100 * sc.GB, latency=1 * sc.us)

    def run(c):
        return tr.step(model, three, dp=3, zero_stage=1, algorithm_params=c)

    assert run({"chunks": most}) is not None
    with pytest.raises(sc.InvalidInputError, match=rf"\(all_gather\): chunks={most + 1} is "
                                                   rf"more than the {most} elements"):
        run({"chunks": most + 1})


def test_a_3d_steps_chunk_bound_is_the_ceiling_of_a_layers_tensor_parallel_shard():
    """dp = tp = 2: each layer's gradients are all-reduced over its data-parallel group
    as a 1/tp shard, rounded up. An embedding of 6,400 + 513 = 6,913 parameters (a
    hand-built odd count) gives shards of 3,457 = ceil(6,913 / 2); the tensor-parallel
    all-reduce of B / dp = 16 sequences, 16 x 8 x 64 = 8,192 elements, bounds less."""
    import dataclasses

    base = tr.gpt(layers=2, hidden=64, heads=4, seq_len=8, vocab=100, batch=32)
    emb = base.layers[0]
    assert emb.tensors == (6400, 512)
    model = dataclasses.replace(base, layers=(dataclasses.replace(emb, tensors=(6400, 513)),)
                                + base.layers[1:])
    most = -(-6913 // 2)
    assert most == 3457 < 16 * 8 * 64

    def run(c):
        return tr.step(model, _FOUR, dp=2, tp=2, algorithm_params=c)

    assert run({"chunks": most}) is not None
    with pytest.raises(sc.InvalidInputError, match=rf"data-parallel group .*\(all_reduce\): "
                                                   rf"chunks={most + 1} is more than the "
                                                   rf"{most} elements"):
        run({"chunks": most + 1})


def test_zero_3_bounds_chunks_by_the_padded_smallest_layers_shard():
    """ZeRO-3 all-gathers each layer's 1/n parameter shard, the layer padded to a
    multiple of n: the embedding of (101 + 8) x 64 = 6,976 on 3 GPUs pads to 6,978,
    shards of 2,326 = ceil(6,976 / 3)."""
    model = tr.gpt(layers=2, hidden=64, heads=4, seq_len=8, vocab=101, batch=6)
    assert min(x.params for x in model.layers if x.params) == 6976
    most = -(-6976 // 3)
    assert most == 2326
    assert tr.zero_step(model, _THREE, stage=3, algorithm_params={"chunks": most}) is not None
    with pytest.raises(sc.InvalidInputError, match=f"chunks={most + 1} is more than the "
                                                   f"{most} elements"):
        tr.zero_step(model, _THREE, stage=3, algorithm_params={"chunks": most + 1})


@pytest.mark.parametrize("run, most, group", [
    # dp = 1, tp = pp = 2, a batch of 32: the first and last stages all-reduce the tied
    # embedding's gradient, V h = 100 x 64 = 6,400, as 1/2 shards: 3,200; the stages'
    # all-gather of 32 x 8 x 64 / 2 = 8,192 elements bounds less
    (lambda c: tr.step(tr.gpt(layers=2, hidden=64, heads=4, seq_len=8, vocab=100, batch=32),
                       _FOUR, dp=1, tp=2, pp=2, algorithm_params=c), 100 * 64 // 2,
     "the embedding group"),
    # dp = 2, tp = 1: no tensor-parallel collective runs, so a micro-batch's activations
    # (4 x 8 x 64 = 2,048) bound nothing; the smallest layer's all-reduce, the
    # embedding's (100 + 8) x 64 = 6,912, does
    (lambda c: tr.step(_GPT, _TWO, dp=2, algorithm_params=c), 6912, "the data-parallel group"),
])
def test_a_3d_steps_chunk_bound_of_the_embedding_and_data_parallel_groups(run, most, group):
    assert run({"chunks": most}) is not None
    with pytest.raises(sc.InvalidInputError, match=rf"{group} .*chunks={most + 1} is more "
                                                   rf"than the {most} elements"):
        run({"chunks": most + 1})


def test_layers_that_are_not_a_tuple_or_list_are_named_not_called_missing():
    """A generator of layers was refused as 'has no layers'."""
    layers = (tr.Layer(name, (8,), 1e6, 2e6) for name in "ab")
    with pytest.raises(sc.InvalidInputError, match=r"^model 'm': layers=<generator object "
                                                   r".* is not accepted; give a tuple"):
        tr.Model("m", layers, batch=1, seq_len=8, hidden=8, heads=1)
    with pytest.raises(sc.InvalidInputError, match=r"^model 'm' has no layers"):
        tr.Model("m", (), batch=1, seq_len=8, hidden=8, heads=1)


def test_a_string_of_layers_is_named_not_read_letter_by_letter():
    """A str is iterable and not empty, like a generator: it must be refused as what it
    is, not taken apart into 'layers' that are letters."""
    with pytest.raises(sc.InvalidInputError, match=r"^model 'm': layers='ab' is not "
                                                   r"accepted; give a tuple or list of "
                                                   r"Layer"):
        tr.Model("m", "ab", batch=1, seq_len=8, hidden=8, heads=1)


def test_a_backward_gather_that_waits_for_its_forward_copy_is_counted_after_it_goes():
    """ZeRO-3 with prefetch: a layer's backward gather starts once its forward copy is
    freed, so it counts as started by the pass after the one before it. Counting it as
    started by the forward pass put it before that pass's free at their common instant.

    One layer E, 2 x 10^6 parameters in 4 B, gradients in 2 B, no forward FLOPs, 10^9
    backward FLOPs at 10^12 FLOP/s (1 ms), two GPUs on a 1 GB/s switch, no latency: the
    forward gather [0, 4 ms] (4 MB in), the forward pass runs at 4 ms and frees E's 8 MB;
    the backward gather [4, 8], the backward pass [8, 9] holds E's 8 MB and the 4 MB of
    gradients it makes (reduce-scattered [9, 11]): 12 MB at most. Counting the backward
    gather first at 4 ms gave 16 MB."""
    model = tr.Model("e", (tr.Layer("E", (2_000_000,), 0.0, 1e9),), batch=1, seq_len=8,
                     hidden=8, heads=1,
                     precision=tr.Precision(param_bytes=4, grad_bytes=2))
    z = tr.zero_step(model, sc.topology.switch(2, bandwidth=1e9, latency=0), stage=3,
                     gpu=tr.GPU("unit", peak_flops=1e12), prefetch=True)
    assert z.step_time == pytest.approx(11e-3, rel=1e-12)
    assert z.gathered == 12_000_000


@pytest.mark.parametrize("param_bytes, grad_bytes, elements", [(2, 3, 1728), (3, 2, 5184)])
def test_fsdp_s_all_gather_bound_on_chunks_is_its_parameters_elements(param_bytes,
                                                                        grad_bytes, elements):
    """FSDP over 4 GPUs all-gathers each layer's 1/4 shard of parameters: the smallest
    layer, the embedding's 6,912 parameters, gives 1,728, as float16 (2 bytes) 1,728
    elements, and of 3 bytes (no float type has that size) 3 x 1,728 = 5,184 byte
    elements. The bound is the parameters' buffer, not one of gradient bytes."""
    model = tr.gpt(layers=2, hidden=64, heads=4, seq_len=8, vocab=100, batch=8,
                   precision=tr.Precision(param_bytes=param_bytes, grad_bytes=grad_bytes))
    with pytest.raises(sc.InvalidInputError, match=rf"^the GPUs \[0, 1, 2, 3\] \(all_gather\): "
                                                   rf"chunks={elements + 1} is more than the "
                                                   rf"{elements} elements"):
        tr.zero_step(model, _FOUR, stage=3, algorithm_params={"chunks": elements + 1})
