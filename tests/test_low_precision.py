"""bfloat16 and fp8 (ml_dtypes) as element types: every algorithm in data mode against the
tests' own reference, data-free sizes, the numpy check in the dtype's own precision, the
command line, sweeps, and the error that names the extra when ml_dtypes is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from conftest import STOCK_PAIRS, reference_network
from reference import assert_outputs_match

import simcoll as sc
from simcoll.check import compare
from simcoll.cli import main

LOW = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]
NAMES = ["bfloat16", "float8_e4m3fn", "float8_e5m2"]
# The v-collectives are left out: they take sizes per rank (conftest.V_COLLECTIVES).
PAIRS = STOCK_PAIRS
OPS = [sc.ReduceOp.SUM, sc.ReduceOp.AVG, sc.ReduceOp.MAX, sc.ReduceOp.PRODUCT]


def normal(p: int, count: int, dtype, seed: int = 0) -> list[np.ndarray]:
    """Standard normal values rounded to ``dtype``: sums of up to 8 stay far inside
    float8_e4m3fn's range (448)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(count).astype(dtype) for _ in range(p)]


@pytest.mark.parametrize("pair", PAIRS, ids="/".join)
@pytest.mark.parametrize("dtype", LOW, ids=NAMES)
def test_every_algorithm_reduces_in_the_dtype_itself(pair, dtype):
    coll = sc.COLLECTIVES[pair[0]]
    p = 5
    count = 0 if pair[0] == "barrier" else 4 * p + 3  # blocks that do not divide evenly
    for op in OPS if coll.reduces else [sc.ReduceOp.SUM]:
        data = normal(p, count, dtype)
        kwargs = {"op": op} if coll.reduces else {}
        if coll.rooted:
            kwargs["root"] = 2
        if pair[1] == "nccl" and dtype is not ml_dtypes.bfloat16:
            kwargs["arch"] = "hopper"  # NCCL reduces FP8 from Hopper on (see below)
        res = sc.simulate(reference_network(p), pair[0], algorithm=pair[1], data=data,
                          **kwargs)
        assert res.correct, (op, res.max_error)
        assert res.dtype == np.dtype(dtype).name
        if pair[0] != "barrier":
            assert_outputs_match(res, data, op, kwargs.get("root", 0))


@pytest.mark.parametrize("dtype", LOW[1:], ids=NAMES[1:])
def test_nccl_refuses_fp8_reductions_before_hopper(dtype):
    """NCCL 2.30.7 returns ncclInvalidArgument for an FP8 reduction on GPUs before sm90
    ("FP8 reduction support begins with sm90 capable devices", taskAppend in
    src/enqueue.cc); simcoll ran it. An A100 machine now refuses it before the run,
    naming the dtype and the way out; moving FP8 without reducing it stays accepted, and
    an H100 machine reduces it."""
    data = normal(8, 64, dtype)
    for collective in ("all_reduce", "reduce_scatter", "reduce"):
        with pytest.raises(sc.InvalidInputError, match=rf"NCCL reduces {NAMES[LOW.index(dtype)]}"
                           r" only on Hopper and newer GPUs \(arch='ampere' here"):
            sc.simulate(sc.topology.dgx_a100(1), collective, algorithm="nccl", data=data)
    assert sc.simulate(sc.topology.dgx_a100(1), "all_gather", algorithm="nccl",
                       data=data).correct
    assert sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl",
                       data=data).correct


@pytest.mark.parametrize("dtype", ["int16", "uint16", "longdouble"])
def test_nccl_refuses_element_types_it_does_not_have(dtype):
    """ncclDataType_t (src/nccl.h.in, 2.30.7) has 8-, 32- and 64-bit integers, 16-, 32- and
    64-bit floats, bfloat16 and two FP8s: no 16-bit integers and no long double. Such a
    run under algorithm="nccl" ran as if NCCL had them; it is refused before the run, for
    every collective, naming the type; the other algorithms still take it."""
    name = np.dtype(dtype).name
    data = [np.arange(16, dtype=dtype)] * 4
    for collective in ("all_reduce", "all_gather", "broadcast", "all_to_all"):
        with pytest.raises(sc.InvalidInputError, match=rf"NCCL has no {name} elements"):
            sc.simulate(sc.topology.switch(4), collective, algorithm="nccl", data=data)
    assert sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", data=data).correct


@pytest.mark.parametrize("algorithm", sorted(
    a for c, a in sc.list_algorithms() if c == "reduce_scatterv"))
@pytest.mark.parametrize("dtype", LOW, ids=NAMES)
def test_reduce_scatterv_reduces_in_the_dtype_itself(algorithm, dtype):
    # Uneven output blocks (one of them empty) of 5 ranks: every op, checked in the dtype's
    # own precision by simulate and against the tests' reference.
    splits = [3, 0, 7, 1, 4]
    for op in OPS:
        data = normal(5, sum(splits), dtype, seed=1)
        res = sc.simulate(reference_network(5), "reduce_scatterv", algorithm=algorithm,
                          data=data, splits=splits, op=op)
        assert res.correct, (op, res.max_error)
        assert [len(out) for out in res.outputs] == splits
        assert_outputs_match(res, data, op)


@pytest.mark.parametrize("name", NAMES)
def test_data_free_runs_move_bytes_as_any_type_of_the_same_size(name):
    """Data-free sizes: a bfloat16 run moves what a float16 run of the same bytes moves,
    an fp8 run what a uint8 run moves (the network sees bytes, not values)."""
    topo = sc.topology.switch(4, bandwidth=10 * sc.GB, latency=1 * sc.us)
    same_size = {"bfloat16": np.float16}.get(name, np.uint8)
    named = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096, dtype=name)
    typed = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096,
                        dtype=getattr(ml_dtypes, name))
    other = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4096, dtype=same_size)
    for res in (named, typed):
        assert res.dtype == name and res.nbytes == 4096 and res.correct is None
        assert res.time == other.time and res.messages == other.messages
        np.testing.assert_array_equal(res.bytes_sent, other.bytes_sent)
        np.testing.assert_array_equal(res.bytes_received, other.bytes_received)
        assert res.link_bytes == other.link_bytes
    # 2(p-1)/p of the buffer leaves every rank of a ring, worked by hand for p = 4
    assert list(named.bytes_sent) == [2 * 3 * 4096 // 4] * 4
    if name == "bfloat16":
        with pytest.raises(sc.InvalidInputError, match="not a multiple of the bfloat16 item "
                                                        "size"):
            sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4095, dtype=name)


def test_the_check_uses_the_dtypes_own_epsilon():
    """A bfloat16 ring sum is off by more than float32's rounding allows, within
    bfloat16's; an output off by more than bfloat16's allowance is caught."""
    p, count = 8, 4096
    data = normal(p, count, ml_dtypes.bfloat16, seed=3)
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring", data=data)
    wide = np.stack([x.astype(np.float64) for x in data])
    exact, magnitude = wide.sum(axis=0), np.abs(wide).sum(axis=0)
    error = np.abs(res.outputs[0].astype(np.float64) - exact)
    u32 = float(np.finfo(np.float32).eps) / 2
    u16 = 2.0 ** -8  # bfloat16 keeps 7 fraction bits: unit roundoff 2^-8
    # A sum of p terms in any order is off by at most (p - 1) u sum|x|.
    assert np.any(error > (p - 1) * u32 * magnitude)  # float32's bound would refuse it
    assert res.correct and np.all(error <= (p - 1) * u16 * magnitude)

    coll = sc.COLLECTIVES["all_reduce"]
    rounded = exact.astype(ml_dtypes.bfloat16)
    assert compare(coll, data, [rounded] * p, sc.ReduceOp.SUM, 0)[0]
    worst = int(np.argmax(magnitude))
    wrong = exact.copy()
    wrong[worst] += 3 * (p - 1) * u16 * magnitude[worst]
    bad = wrong.astype(ml_dtypes.bfloat16)
    assert bad[worst] != rounded[worst]
    ok, max_error = compare(coll, data, [rounded] * (p - 1) + [bad], sc.ReduceOp.SUM, 0)
    assert not ok and max_error >= 2 * (p - 1) * u16 * magnitude[worst]


def test_fp8_average_scales_each_input_even_over_more_ranks_than_fp8_can_count():
    """float8_e4m3fn stops at 448, so NCCL scales each input by 1/p before the sum
    (ncclDevPreMulSum): over 512 ranks by 2^-9, e4m3's smallest subnormal, exact:
    384 * 2^-9 = 0.75 and -48 * 2^-9 = -0.09375. The sum needs no division after."""
    x = np.array([384.0, -48.0, 0.0], dtype=ml_dtypes.float8_e4m3fn)
    scaled = sc.ReduceOp.AVG.prepare(x, 512)
    assert scaled.dtype == x.dtype
    np.testing.assert_array_equal(scaled.astype(np.float64), [0.75, -0.09375, 0.0])
    assert sc.ReduceOp.AVG.finish(scaled, 512) is scaled


@pytest.mark.parametrize("bad, match", [
    ("bool", "bool is not accepted; use one of numpy's integer or floating dtypes"),
    (np.complex64, "complex64 is not accepted"),
    ("float9", "dtype='float9' is not a numpy dtype"),
    # ml_dtypes types outside the three simcoll takes: the fnuz fp8 variants, int4
    (ml_dtypes.float8_e4m3fnuz, "float8_e4m3fnuz is not accepted"),
    # (an integer type: the message named "an integer or floating dtype" as the remedy)
    (ml_dtypes.int4, "int4 is not accepted; use one of numpy's integer or floating dtypes "
                     r"\(int8 to uint64, float16 to float64 or longdouble\) or ml_dtypes' "
                     "bfloat16, float8_e4m3fn, float8_e5m2"),
])
def test_other_types_are_still_refused(bad, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=64,
                    dtype=bad)


def test_command_line_checks_bfloat16_and_fp8(capsys):
    assert main(["run", "--topology", "switch:4", "-b", "1K", "-e", "64K", "-f", "64",
                 "-d", "bfloat16", "-c"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()
             if not line.startswith("#")]
    assert [(row[0], row[1], row[2], row[-1]) for row in lines] == [
        ("1024", "512", "bfloat16", "0"), ("65536", "32768", "bfloat16", "0")]
    # nccl-tests' names for the fp8 types, and the JSON record's numpy name
    assert main(["run", "--topology", "switch:4", "--size", "4K", "-d", "f8e4m3", "-c",
                 "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["type"], record["dtype"], record["count"], record["wrong"]) == \
        ("f8e4m3", "float8_e4m3fn", 4096, 0)


def test_a_sweep_records_the_name():
    results = sc.sweep(sc.topology.switch, "all_gather", algorithms=["ring"], ranks=[2, 4],
                       sizes=[1024], dtype="bfloat16", progress=False)
    assert [r.dtype for r in results] == ["bfloat16", "bfloat16"]
    # all_gather moves (p-1) buffers out of every rank
    assert [int(r.bytes_sent[0]) for r in results] == [1024, 3 * 1024]


HIDDEN = "import sys; sys.modules['ml_dtypes'] = None\n"


@pytest.mark.parametrize("code", [
    "import simcoll as sc\n"
    "try:\n"
    "    sc.simulate(sc.topology.switch(2), 'all_reduce', algorithm='ring', nbytes=64,\n"
    "                dtype='bfloat16')\n"
    "except sc.InvalidInputError as exc:\n"
    "    print(exc)\n",
    "from simcoll.cli import main\n"
    "sys.exit(main(['run', '--size', '64', '-d', 'f8e5m2']))\n",
])
def test_without_ml_dtypes_the_error_names_the_extra(code):
    done = subprocess.run([sys.executable, "-c", HIDDEN + code], capture_output=True,
                          text=True, timeout=120)
    said = (done.stdout + done.stderr).strip()
    assert "Traceback" not in said
    assert said.endswith('needs the ml_dtypes package: pip install "simcoll[ml_dtypes]"')
    assert len(said.splitlines()) == 1
    assert done.returncode == (2 if "main" in code else 0)


@pytest.mark.parametrize("dtype, p", [(ml_dtypes.float8_e4m3fn, 4), (ml_dtypes.float8_e4m3fn, 8),
                                      (ml_dtypes.float8_e5m2, 2), (ml_dtypes.float8_e5m2, 4),
                                      (ml_dtypes.bfloat16, 64)])
@pytest.mark.parametrize("op", [sc.ReduceOp.SUM, sc.ReduceOp.AVG, sc.ReduceOp.PRODUCT])
def test_a_low_precision_result_of_zeros_or_an_unreduced_input_is_caught(dtype, p, op):
    """The bound was 2 p eps sum|x| (or |reference| for products): at or past 1 from
    e5m2 on 2 ranks, e4m3 on 4, bfloat16 on 64, where any output passed. A sum of p
    terms in any order is off by at most (p - 1) u sum|x| (u = eps / 2): every ring
    result passes it, zeros and a rank's own input do not (on 8 ranks e5m2's u = 1/8
    makes even this bound 7/8 of sum|x|, and an average's or a product's 1 or more)."""
    data = normal(p, 256, dtype, seed=p)
    machine = sc.topology.switch(p)
    res = sc.simulate(machine, "all_reduce", algorithm="ring", data=data, op=op)
    assert res.correct, res.max_error
    coll = sc.COLLECTIVES["all_reduce"]
    zeros = [np.zeros(256, dtype)] * p
    assert not compare(coll, data, zeros, op, 0)[0]
    assert not compare(coll, data, list(data), op, 0)[0]


def test_tiny_float16_values_zeroed_are_caught():
    """Sums had an allowance of the smallest normal number on top (6.1e-5 in float16):
    gradients of about 1e-5 passed as zeros. Additions below it are exact."""
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal(64) * 1e-5).astype(np.float16) for _ in range(4)]
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", data=data)
    assert res.correct
    coll = sc.COLLECTIVES["all_reduce"]
    assert not compare(coll, data, [np.zeros(64, np.float16)] * 4, sc.ReduceOp.SUM, 0)[0]


@pytest.mark.parametrize("dtype, p", [(np.float16, 10), (np.float32, 10),
                                      (ml_dtypes.bfloat16, 10), (ml_dtypes.float8_e4m3fn, 3)])
def test_an_average_of_the_largest_number_may_overflow_as_it_rounds(dtype, p):
    """Each largest number times 1/p rounded to the dtype, summed: 1/p, the products or
    the partial sums round up past the largest number (float16: 65504 x 0.0999755859375
    rounds to 6548, ten of which are 65480, but the partial sums round up, 19644 to 19648
    and on, until 58976 + 6548 = 65524 rounds to inf; e4m3: 448 x 1/3 rounds to 160, and
    3 x 160 = 480 is past 448, which NCCL's fp8 sum saturates to 448). The check refused
    simcoll's own ring for it."""
    big = float(ml_dtypes.finfo(dtype).max)
    data = [np.full(16, big).astype(dtype) for _ in range(p)]
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring", data=data,
                      op="avg")
    out = res.outputs[0].astype(np.float64)
    if dtype is ml_dtypes.float8_e4m3fn:
        assert (out == 448.0).all()   # 160 + 160 = 320, + 160 = 480: saturated
    else:
        assert not np.isfinite(out).all()  # it did overflow
    assert res.correct


def test_a_sum_whose_exact_value_is_the_largest_may_round_past_it():
    """e5m2: 40960 + 4096 = 45056 rounds to even, 49152; + 12288 = 61440, halfway to
    the next step past 57344, rounds past the largest, which NCCL's conversion saturates
    to. The exact sum is 57344, the largest."""
    dtype = ml_dtypes.float8_e5m2
    data = [np.array([v], dtype) for v in (40960.0, 4096.0, 12288.0)]
    res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="naive", data=data)
    assert res.outputs[0].astype(np.float64)[0] == 57344.0
    assert res.correct


@pytest.mark.parametrize("op", ["sum", "product"])
def test_fp8_sums_and_products_saturate_as_nccls_do(op):
    """NCCL reduces fp8 in half precision and converts back with __NV_SATFINITE: past
    the largest finite number, and from an infinite input, the result is that number
    (448 in e4m3, 57344 in e5m2), never NaN or infinity; a NaN input stays NaN. simcoll
    gave NaN (e4m3) or inf (e5m2), and the check refused what the GPU gives."""
    for dtype, big in ((ml_dtypes.float8_e4m3fn, 448.0), (ml_dtypes.float8_e5m2, 57344.0)):
        values = [[big, -big, 2.0, 1.0], [big, -big, -1.0, float("nan")],
                  [1.0, 1.0, -big, 1.0], [1.0, 1.0, 1.0, 1.0]]
        data = [np.array(v, dtype) for v in values]
        for algorithm in ("ring", "naive", "tree"):
            res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm=algorithm,
                              data=data, op=op)
            out = res.outputs[0].astype(np.float64)
            want = ([big, -big, -big, float("nan")] if op == "sum"
                    else [big, big, big, float("nan")])
            assert np.array_equal(out, np.array(want), equal_nan=True), (dtype, out)
            assert res.correct
        # a saturated value where nothing can overflow is wrong
        small = [np.array([1.0, 2.0, 1.0, 1.0], dtype)] * 4
        saturated = [np.array([big, 8.0, 4.0, 4.0], dtype)] * 4
        coll = sc.COLLECTIVES["all_reduce"]
        assert not compare(coll, small, saturated, sc.ReduceOp.SUM, 0)[0]
    e5m2 = [np.array([np.inf, -np.inf, np.inf], ml_dtypes.float8_e5m2),
            np.array([1.0, 1.0, -np.inf], ml_dtypes.float8_e5m2)]
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", data=e5m2,
                      op=op)
    # inf + 1 saturates; inf - inf (or inf x -inf's sign) as half arithmetic gives it
    with np.errstate(invalid="ignore"):
        half = [np.float16(a) + np.float16(b) if op == "sum"
                else np.float16(a) * np.float16(b)
                for a, b in zip([np.inf, -np.inf, np.inf], [1.0, 1.0, -np.inf])]
    want = [np.nan if np.isnan(h) else np.sign(h) * 57344.0 for h in half]
    assert np.array_equal(res.outputs[0].astype(np.float64), np.array(want), equal_nan=True)
    assert res.correct
    # scalars and 0-d arrays too (np.clip into a scalar raised a TypeError)
    e4 = ml_dtypes.float8_e4m3fn
    combine = sc.ReduceOp.SUM if op == "sum" else sc.ReduceOp.PRODUCT
    for a in (e4(300.0), np.array(300.0, e4)):
        assert float(combine(a, a)) == 448.0


def test_an_fp8_sum_that_saturates_and_comes_back_down_is_accepted():
    """448 + 448 - 448 in e4m3, left to right as NCCL computes it: 896 saturates to 448,
    less 448 is 0, where the exact sum is 448. The error, 448, is past the rounding
    bound (2 u 1344 = 168), but a partial sum can pass the largest number, after which
    a value down to what later negative terms take off may come out; NaN cannot, in
    fp8."""
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    coll = sc.COLLECTIVES["all_reduce"]
    data = [np.array([v], dt) for v in (448.0, 448.0, -448.0)]
    res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="naive", data=data)
    assert res.correct
    for value in (0.0, 448.0, 64.0):
        assert compare(coll, data, [np.array([value], dt)] * 3, sc.ReduceOp.SUM, 0)[0]
    assert not compare(coll, data, [np.array([np.nan], dt)] * 3, sc.ReduceOp.SUM, 0)[0]
    # where no partial sum can pass 448, a wrong value is still wrong
    small = [np.array([v], dt) for v in (96.0, 96.0, -96.0)]
    assert not compare(coll, small, [np.array([0.0], dt)] * 3, sc.ReduceOp.SUM, 0)[0]


def test_fp8_min_and_max_keep_an_infinite_input_as_nccls_hmin_hmax_do():
    """Only sums and products saturate: e5m2 MAX of (inf, -inf) and (1, 1) is (inf, 1)
    and MIN is (1, -inf), as __hmax / __hmin give, not 57344."""
    dtype = ml_dtypes.float8_e5m2
    data = [np.array([np.inf, -np.inf], dtype), np.array([1.0, 1.0], dtype)]
    for op, want in (("max", [np.inf, 1.0]), ("min", [1.0, -np.inf])):
        for algorithm in ("ring", "naive"):
            res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=algorithm,
                              data=data, op=op)
            assert np.array_equal(res.outputs[0].astype(np.float64), np.array(want)), (
                op, algorithm)
            assert res.correct


def test_an_infinite_sum_saturated_to_the_wrong_sign_is_wrong():
    """e5m2 inf + 1 saturates to +57344; -57344 (the other end) is a wrong result."""
    dtype = ml_dtypes.float8_e5m2
    coll = sc.COLLECTIVES["all_reduce"]
    inputs = [np.array([np.inf], dtype), np.array([1.0], dtype)]
    assert compare(coll, inputs, [np.array([57344.0], dtype)] * 2, sc.ReduceOp.SUM, 0)[0]
    assert not compare(coll, inputs, [np.array([-57344.0], dtype)] * 2,
                       sc.ReduceOp.SUM, 0)[0]


def test_an_fp8_sum_whose_terms_cancel_may_not_come_back_as_any_finite_value():
    """e4m3 384 - 384: the magnitudes (768) pass 448, but no partial sum does: it lies
    between -384 and 384, plus at most q u (P + N) = 1 x 2^-4 x 768 = 48 of rounding, so
    432 at most either way (< 448). No order saturates, and 96 (error 96 > the bound
    48) is wrong; the saturating path's "any value between the ends" applies only where
    an end passes 448."""
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    coll = sc.COLLECTIVES["all_reduce"]
    data = [np.array([384.0], dt), np.array([-384.0], dt)]
    assert compare(coll, data, [np.array([0.0], dt)] * 2, sc.ReduceOp.SUM, 0)[0]
    for wrong in (96.0, -96.0, 256.0):
        assert not compare(coll, data, [np.array([wrong], dt)] * 2, sc.ReduceOp.SUM, 0)[0]


def test_an_fp8_sum_that_saturates_stays_between_its_partial_sums_ends():
    """e4m3, three ranks, q u = 2 x 2^-4 = 1/8. 448 + 448 - 64: P = 896, N = 64, rounding
    at most (896 + 64) / 8 = 120, so no partial sum goes below -184. The orders give
    448 + 448 = 896, saturated to 448, - 64 = 384; or 448 - 64 = 384, + 448 = 832,
    saturated to 448: both accepted. Nothing reaches -256 or -448 (the other end).
    Mirrored, -448 - 448 + 64: -384 and -448 accepted, 256 and 448 not."""
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    coll = sc.COLLECTIVES["all_reduce"]
    up = [np.array([v], dt) for v in (448.0, 448.0, -64.0)]
    down = [np.array([-v], dt) for v in (448.0, 448.0, -64.0)]
    for value in (448.0, 384.0):
        assert compare(coll, up, [np.array([value], dt)] * 3, sc.ReduceOp.SUM, 0)[0], value
        assert compare(coll, down, [np.array([-value], dt)] * 3, sc.ReduceOp.SUM, 0)[0], value
    for value in (-256.0, -448.0):
        assert not compare(coll, up, [np.array([value], dt)] * 3, sc.ReduceOp.SUM, 0)[0]
        assert not compare(coll, down, [np.array([-value], dt)] * 3, sc.ReduceOp.SUM, 0)[0]


def test_an_infinite_input_whose_sum_saturates_and_comes_back_to_the_other_end():
    """e5m2 (largest 57344), as NCCL adds it in half precision and saturates back:
    inf - 57344 is inf, saturated to 57344; - 57344 is 0; - 57344 is -57344. The
    reference is +inf, but the finite inputs' partial sums pass the largest number
    downward (-172032), and -57344 is fp8's overflow (its largest number), so it is
    accepted; NaN is not (fp8 sums never give it from these)."""
    dt = np.dtype(ml_dtypes.float8_e5m2)
    coll = sc.COLLECTIVES["all_reduce"]
    data = [np.array([np.inf], dt)] + [np.array([-57344.0], dt)] * 3
    with np.errstate(over="ignore"):   # the order by hand, half precision then saturate
        acc = np.float16(np.inf)
        for _ in range(3):
            acc = np.clip(acc + np.float16(-57344.0), -57344.0, 57344.0).astype(np.float16)
    assert float(acc) == -57344.0
    assert compare(coll, data, [np.array([-57344.0], dt)] * 4, sc.ReduceOp.SUM, 0)[0]
    assert compare(coll, data, [np.array([57344.0], dt)] * 4, sc.ReduceOp.SUM, 0)[0]
