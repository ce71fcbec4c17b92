"""The numpy check's shortcuts (outputs compared byte for byte with one already checked,
the |reference| bound tried before sum |x_i|) give the verdict of the full check: wrong
outputs are caught wherever they hide, right ones pass, on cases worked out here."""

from __future__ import annotations

import time
import warnings
from fractions import Fraction

import numpy as np
import pytest

import simcoll as sc
from simcoll import check
from simcoll.check import compare, same_bytes
from simcoll.collectives import COLLECTIVES
from simcoll.ops import ReduceOp

SUM = ReduceOp.SUM


def all_reduce_inputs(p=4, count=200_000, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(count).astype(np.float32) for _ in range(p)]


def exact_sum(inputs):
    return np.sum([x.astype(np.float64) for x in inputs], axis=0)


def test_same_bytes_tells_bytes_apart():
    a = np.array([0.0, 1.0, np.nan], dtype=np.float32)
    assert same_bytes(a, a.copy())
    b = a.copy()
    b[0] = -0.0  # equal value, other bytes
    assert not same_bytes(a, b)
    assert not same_bytes(a, a.astype(np.float64))
    odd = np.arange(7, dtype=np.uint8)  # 7 bytes: compared byte by byte
    assert same_bytes(odd, odd.copy())
    changed = odd.copy()
    changed[6] = 99
    assert not same_bytes(odd, changed)
    assert same_bytes(np.arange(12.0)[::2], np.arange(0.0, 12.0, 2.0))  # not contiguous


@pytest.mark.parametrize("rank", [0, 2, 3])
def test_one_wrong_element_of_any_rank_is_caught(rank):
    inputs = all_reduce_inputs()
    right = exact_sum(inputs).astype(np.float32)
    outputs = [right.copy() for _ in inputs]
    outputs[rank][123_456] += 1.0
    ok, worst = compare(COLLECTIVES["all_reduce"], inputs, outputs, SUM, 0)
    assert not ok
    assert worst == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("workers", [1, 3])
def test_a_check_spread_over_threads_gives_the_same_verdict(monkeypatch, workers):
    # 10 blocks of 2^16 elements: on 3 threads the blocks finish in any order; the
    # verdict and the largest error are those worked out here either way.
    monkeypatch.setattr(check, "WORKERS", workers)
    inputs = all_reduce_inputs(p=3, count=10 * 2**16 - 5)
    reference = exact_sum(inputs)
    right = reference.astype(np.float32)
    rounding = float(np.max(np.abs(right - reference)))
    assert compare(COLLECTIVES["all_reduce"], inputs, [right] * 3, SUM, 0) == (True, rounding)
    for where in (0, 5 * 2**16 + 7, 10 * 2**16 - 6):
        outputs = [right.copy() for _ in inputs]
        outputs[1][where] -= 4.0
        ok, worst = compare(COLLECTIVES["all_reduce"], inputs, outputs, SUM, 0)
        assert not ok
        assert worst == pytest.approx(4.0, rel=1e-5)
    gathered = np.concatenate(inputs)
    outputs = [gathered.copy() for _ in inputs]
    outputs[2][-1] += 0.5  # caught by the byte comparison with rank 0's output
    assert compare(COLLECTIVES["all_gather"], inputs, outputs, SUM, 0) == \
        (False, float(np.abs(outputs[2][-1] - np.float64(gathered[-1]))))


def test_ctrl_c_in_a_threaded_check_stops_it_without_the_remaining_blocks(monkeypatch):
    monkeypatch.setattr(check, "WORKERS", 2)
    inputs = all_reduce_inputs(p=2, count=40 * 2**16)
    outputs = [exact_sum(inputs).astype(np.float32)] * 2
    compared = check._compare_arrays
    calls = []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        time.sleep(0.01)  # the blocks after it take long enough for the cancel to land
        return compared(*args)

    monkeypatch.setattr(check, "_compare_arrays", interrupted)
    with pytest.raises(KeyboardInterrupt):
        compare(COLLECTIVES["all_reduce"], inputs, outputs, SUM, 0)
    assert len(calls) < 40  # the blocks not started were cancelled


def test_ranks_with_different_roundings_within_the_bound_pass():
    inputs = all_reduce_inputs()
    reference = exact_sum(inputs)
    down = np.nextafter(reference.astype(np.float32), np.float32(-np.inf))
    outputs = [reference.astype(np.float32), down, reference.astype(np.float32), down]
    ok, worst = compare(COLLECTIVES["all_reduce"], inputs, outputs, SUM, 0)
    assert ok
    assert worst == pytest.approx(np.max(np.abs(down - reference)), rel=1e-12)


def test_cancellation_is_judged_against_the_sum_of_magnitudes():
    # x + (-x) + tiny: the reference is tiny, |reference| allows almost nothing, and the
    # bound (p - 1)(u + r) sum |x_i| (p = 3, float32's u = 2^-24, float64's r = 2^-53)
    # allows up to about 1.19e-7 * 2 |x|.
    x = np.full(5, 1000.0, dtype=np.float32)
    inputs = [x, -x, np.full(5, 1e-3, dtype=np.float32)]
    allowed = 2 * (2.0**-24 + 2.0**-53) * (2000.0 + 1e-3)
    inside = np.full(5, 1e-3 + 0.9 * allowed, dtype=np.float32)
    outside = np.full(5, 1e-3 + 1.1 * allowed, dtype=np.float32)
    coll = COLLECTIVES["all_reduce"]
    assert compare(coll, inputs, [inside] * 3, SUM, 0)[0]
    bad = [inside, inside.copy(), inside.copy()]
    bad[1][4] = outside[4]
    assert not compare(coll, inputs, bad, SUM, 0)[0]


def test_all_gather_outputs_are_each_checked_unless_identical():
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-5, 5, 1000).astype(np.int32) for _ in range(5)]
    right = np.concatenate(inputs)
    coll = COLLECTIVES["all_gather"]
    assert compare(coll, inputs, [right.copy() for _ in range(5)], SUM, 0) == (True, 0.0)
    outputs = [right.copy() for _ in range(5)]
    outputs[4][4999] += 3
    assert compare(coll, inputs, outputs, SUM, 0) == (False, 3.0)
    # Every output wrong the same way: the first full check already fails.
    wrong = right.copy()
    wrong[0] -= 2
    assert compare(coll, inputs, [wrong] * 5, SUM, 0) == (False, 2.0)


@pytest.mark.parametrize("shared", [True, False])
def test_one_array_listed_for_every_rank_is_checked_once(monkeypatch, shared):
    """Outputs that are one array (as ``simulate`` lists a result every rank shares) or
    equal copies of it: only the first rank's is compared with the reference, once per
    block."""
    inputs = all_reduce_inputs(p=5, count=3 * check._BLOCK)
    right = exact_sum(inputs).astype(np.float32)
    compared = []
    original = check._bounded

    def counting(coll, inputs, out, ref, op, root, rank):
        compared.append(rank)
        return original(coll, inputs, out, ref, op, root, rank)

    monkeypatch.setattr(check, "_bounded", counting)
    outputs = [right] * 5 if shared else [right.copy() for _ in range(5)]
    assert compare(COLLECTIVES["all_reduce"], inputs, outputs, SUM, 0)[0]
    assert compared == [0, 0, 0]
    wrong = right.copy()
    wrong[-1] += 1.0
    assert not compare(COLLECTIVES["all_reduce"], inputs, [right] * 4 + [wrong], SUM, 0)[0]


def test_infinities_and_nans_must_match_exactly():
    inputs = [np.array([np.inf, 1.0, np.nan], dtype=np.float32),
              np.array([1.0, 2.0, 1.0], dtype=np.float32)]
    coll = COLLECTIVES["all_reduce"]
    right = np.array([np.inf, 3.0, np.nan], dtype=np.float32)
    assert compare(coll, inputs, [right, right.copy()], SUM, 0) == (True, 0.0)
    wrong = np.array([-np.inf, 3.0, np.nan], dtype=np.float32)
    ok, worst = compare(coll, inputs, [right, wrong], SUM, 0)
    # An infinite mismatch is reported as an infinite error.
    assert not ok and worst == np.inf


def test_a_signed_zero_is_equal_though_its_bytes_differ():
    inputs = [np.array([0.0, 2.0], dtype=np.float32), np.array([0.0, -2.0], dtype=np.float32)]
    # MAX of (0, 2) and (0, -2) is (0, 2); rank 1 reports -0 for the first element.
    outputs = [np.array([0.0, 2.0], dtype=np.float32), np.array([-0.0, 2.0], dtype=np.float32)]
    assert compare(COLLECTIVES["all_reduce"], inputs, outputs, ReduceOp.MAX, 0) == (True, 0.0)


def test_products_through_subnormals_are_within_the_bound():
    # Products of 8 standard normals in float16 pass below its smallest normal (2^-14)
    # for a few percent of the elements, where rounding is no longer relative; numpy's
    # own float16 products, in two orders, are right and must pass.
    p = 8
    inputs = [np.random.default_rng(r).standard_normal(4096).astype(np.float16)
              for r in range(p)]
    left = inputs[0].copy()
    for x in inputs[1:]:
        left = left * x
    pairs = list(inputs)
    while len(pairs) > 1:
        pairs = [pairs[i] * pairs[i + 1] for i in range(0, len(pairs), 2)]
    reference = np.prod(np.stack([x.astype(np.float64) for x in inputs]), axis=0)
    relative = 2 * p * np.finfo(np.float16).eps * np.abs(reference)
    assert np.count_nonzero(np.abs(left - reference) > relative) > 10
    for rank_outputs in ([left] * p, [pairs[0]] * p, [left, pairs[0]] * (p // 2)):
        assert compare(COLLECTIVES["all_reduce"], inputs, rank_outputs, ReduceOp.PRODUCT,
                       0)[0]


def test_the_underflow_term_worked_by_hand():
    # float16 (eps 2^-10, smallest normal 2^-14, subnormal step 2^-24), p = 3:
    # 1.5 * 2^-12 x 1.25 * 2^-12 = 1.875 * 2^-24 rounds to the subnormal 2 * 2^-24, and
    # x 1024 gives 2^-13 against the exact 1.875 * 2^-14: off by 2^-17 (6.7%), beyond
    # the relative (1 + u)^2 - 1 = 0.1% (u = 2^-11). The bound adds (p - 1) 2^-24
    # (1 + u)^2 x 1024 (the factors above 1) = 2^-13 (1 + 2^-10): 2^-17 is inside, an
    # extra 2^-12 is not.
    inputs = [np.array([1.5 * 2.0**-12], dtype=np.float16),
              np.array([1.25 * 2.0**-12], dtype=np.float16),
              np.array([1024.0], dtype=np.float16)]
    assert (inputs[0] * inputs[1] * inputs[2])[0] == np.float16(2.0**-13)
    coll = COLLECTIVES["all_reduce"]
    rounded = [np.array([2.0**-13], dtype=np.float16)] * 3
    assert compare(coll, inputs, rounded, ReduceOp.PRODUCT, 0)[0]
    far = [np.array([1.875 * 2.0**-14 + 2.0**-12], dtype=np.float16)] * 3
    assert not compare(coll, inputs, far, ReduceOp.PRODUCT, 0)[0]
    # a product that never leaves the normal range keeps the relative bound alone
    normal = [np.array([1.5], dtype=np.float16), np.array([1.25], dtype=np.float16),
              np.array([1024.0], dtype=np.float16)]
    off = [np.array([1.875 * 1024 * (1 + 0.02)], dtype=np.float16)] * 3
    assert not compare(coll, normal, off, ReduceOp.PRODUCT, 0)[0]


def test_command_line_products_of_low_precision_pass(capsys):
    from simcoll.cli import main

    for dtype in ("half", "bfloat16"):
        assert main(["run", "--topology", "switch:8", "-d", dtype, "-o", "prod", "-b", "64K",
                     "-e", "64K", "-c"]) == 0
        out = capsys.readouterr().out
        assert "# Out of bounds values : 0 OK" in out


def test_an_order_that_overflows_may_give_a_non_finite_element():
    # float16's largest finite number is 65504. 60000 + 60000 - 60000 is 60000, but
    # summed left to right the first partial sum overflows: inf, then inf - 60000 = inf.
    # The positive terms add up past 65504 (here 120000), so +inf is accepted there, and
    # only there; the negative ones' 60000 (plus at most 2 u 180000 = 176 of rounding)
    # cannot, so no order gives -inf, nor NaN (inf - inf), which the check took before.
    coll = COLLECTIVES["all_reduce"]
    big = [np.array([60000.0, 1.0], dtype=np.float16),
           np.array([60000.0, 2.0], dtype=np.float16),
           np.array([-60000.0, 3.0], dtype=np.float16)]
    with np.errstate(over="ignore"):
        left = big[0] + big[1] + big[2]
    assert np.isinf(left[0]) and left[1] == 6.0
    assert compare(coll, big, [left] * 3, SUM, 0)[0]
    for wrong in (-np.inf, np.nan):
        assert not compare(coll, big, [np.array([wrong, 6.0], dtype=np.float16)] * 3,
                           SUM, 0)[0]
    # both ways past it: 60000 + 60000 and -60000 - 60000 overflow, inf - inf is NaN
    both = big + [np.array([-60000.0, 4.0], dtype=np.float16)]
    with np.errstate(over="ignore", invalid="ignore"):
        nan = (both[0] + both[1]) + (both[2] + both[3])
    assert np.isnan(nan[0])
    for value in (np.nan, np.inf, -np.inf):
        assert compare(coll, both, [np.array([value, 10.0], dtype=np.float16)] * 4,
                       SUM, 0)[0]
    # the small element's magnitudes add up to 6: it must stay finite
    assert not compare(coll, big, [np.array([60000.0, np.inf], dtype=np.float16)] * 3,
                       SUM, 0)[0]
    # a finite element must still be within the rounding bound
    assert not compare(coll, big, [np.array([30000.0, 6.0], dtype=np.float16)] * 3,
                       SUM, 0)[0]


@pytest.mark.parametrize("dtype_name, terms, largest", [
    ("float16", (60000.0, -60000.0), 65504.0),
    ("float16", (30000.0, 30000.0, -30000.0, -30000.0), 65504.0),
    ("float8_e4m3fn", (384.0, -384.0), 448.0),
    ("float8_e4m3fn", (96.0, 96.0, -104.0, -104.0), 448.0),
])
def test_terms_that_cancel_overflow_in_no_order(dtype_name, terms, largest):
    """Every partial sum adds a subset of the terms, so it lies between minus the negative
    terms' magnitudes and the positive terms' sum, off by at most q u sum |x| of
    rounding: where both stay below the largest number, no order overflows and NaN or
    inf is wrong. The check took the magnitudes' sum (120000 for 60000 - 60000) and
    passed an all_reduce that gave NaN everywhere. Terms whose positive sum can pass it
    accept +inf (in float16; in fp8, which saturates, a finite value in the range a
    saturated order reaches) but not NaN, which needs a partial result past it each
    way, worked out here in exact arithmetic."""
    dt = np.dtype(pytest.importorskip("ml_dtypes").float8_e4m3fn) \
        if dtype_name.startswith("float8") else np.dtype(dtype_name)
    eps = 2.0 ** -10 if dtype_name == "float16" else 2.0 ** -3
    coll = COLLECTIVES["all_reduce"]
    inputs = [np.array([t], dtype=dt) for t in terms]
    p = len(terms)
    positive = sum(t for t in terms if t > 0)
    negative = -sum(t for t in terms if t < 0)
    reach = max(positive, negative) + (p - 1) * eps / 2 * (positive + negative)
    assert reach < largest  # no order overflows: by hand, before asking the check
    nan = [np.array([np.nan], dtype=dt)] * p
    assert not compare(coll, inputs, nan, SUM, 0)[0]
    assert check.wrong_elements(coll, inputs, nan, SUM, 0) == p
    assert compare(coll, inputs, [np.array([0.0], dtype=dt)] * p, SUM, 0)[0]
    # AVG's terms are scaled by 1/p first: they cancel too
    assert not compare(coll, inputs, nan, ReduceOp.AVG, 0)[0]
    # one more rank holding the largest number: the positive terms pass it, the
    # negative ones do not
    more = inputs + [np.array([largest], dtype=dt)]
    assert not compare(coll, more, [np.array([np.nan], dtype=dt)] * (p + 1), SUM, 0)[0]
    passed = [np.array([np.inf if dtype_name == "float16" else 0.0], dtype=dt)] * (p + 1)
    assert compare(coll, more, passed, SUM, 0)[0]
    assert not compare(coll, more, [np.array([-np.inf], dtype=dt)] * (p + 1), SUM, 0)[0]


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_infinities_of_both_signs_run_without_numpys_invalid_value_warning():
    """+inf on one rank and -inf on another reduce to NaN, which the check accepts; the
    reductions printed numpy's "invalid value" warning, and under warnings-as-errors the
    run failed blaming the algorithm (a RuntimeWarning from ring's array path)."""
    import simcoll as sc
    data = [np.array([np.inf, 1.0], np.float32), np.array([-np.inf, 2.0], np.float32)]
    for collective, algorithm in (("all_reduce", "recursive_doubling"),
                                  ("reduce_scatter", "ring")):
        res = sc.simulate(sc.topology.switch(2), collective, algorithm=algorithm, data=data)
        assert res.correct is True

    def started(comm):   # the same all_reduce, started from a rank program
        return (yield comm.all_reduce(data[comm.rank], algorithm="ring"))

    outputs = sc.run_program(sc.topology.switch(2), started).outputs
    assert all(np.isnan(out[0]) and out[1] == 3.0 for out in outputs)


def test_a_product_whose_partial_products_can_overflow():
    # float8_e4m3fn's products saturate at 448, as NCCL's do. 2 x 448 x 0.25 = 224, but
    # (2 x 448) overflows first, to 448, then x 0.25 is 112 (worked by hand); the factors
    # above 1 multiply to 896 > 448. No order gives NaN.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    coll = COLLECTIVES["all_reduce"]
    inputs = [np.array([2.0, 0.5], dtype=dt), np.array([448.0, 0.5], dtype=dt),
              np.array([0.25, 0.5], dtype=dt)]
    left = np.array([112.0, 0.125], dtype=dt)
    assert compare(coll, inputs, [left] * 3, ReduceOp.PRODUCT, 0)[0]
    res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="naive", data=inputs,
                      op="product")
    assert res.correct
    assert not compare(coll, inputs, [np.array([np.nan, 0.125], dtype=dt)] * 3,
                       ReduceOp.PRODUCT, 0)[0]
    # all factors of the second element are below 1: no order overflows there
    nan_small = np.array([224.0, np.nan], dtype=dt)
    assert not compare(coll, inputs, [nan_small] * 3, ReduceOp.PRODUCT, 0)[0]


def test_the_command_line_counts_the_same_elements_as_the_check(capsys):
    from simcoll.cli.checking import count_wrong

    coll = COLLECTIVES["all_reduce"]
    big = [np.array([60000.0, 1.0, 1.0], dtype=np.float16),
           np.array([60000.0, 2.0, 1.0], dtype=np.float16),
           np.array([-60000.0, 3.0, 1.0], dtype=np.float16)]

    class Ran:
        correct = False
        outputs = [np.array([np.inf, np.inf, 30.0], dtype=np.float16)] * 3

    # element 0 may overflow, element 1 may not (inf), element 2 is far off (30 for 3)
    assert count_wrong(coll, big, Ran(), SUM, 0) == 2 * 3


def test_moved_floats_keep_the_sign_of_their_zeros():
    """A data-moving collective copies bytes (NCCL does): an all_gather that turned
    -0.0 into 0.0 (built by summing zero-padded buffers) passed as equal values."""
    inputs = [np.array([-0.0, 1.0], np.float32), np.array([2.0, -0.0], np.float32)]
    gathered = np.array([-0.0, 1.0, 2.0, -0.0], np.float32)
    coll = COLLECTIVES["all_gather"]
    assert compare(coll, inputs, [gathered, gathered.copy()], SUM, 0)[0]
    flipped = gathered + 0.0  # -0.0 + 0.0 is 0.0
    assert not compare(coll, inputs, [gathered, flipped], SUM, 0)[0]
    assert check.wrong_elements(coll, inputs, [gathered, flipped], SUM, 0) == 2


def test_wrong_elements_counts_where_the_reference_is_infinite_too():
    """+inf on one rank makes element 0's reference +inf: an output of -inf there is
    wrong on both ranks. The command line's #wrong said 1 (it let any non-finite output
    pass where the magnitudes overflow); compare() refused it."""
    inputs = [np.array([np.inf, 1.0], np.float32), np.array([1.0, 1.0], np.float32)]
    out = np.array([-np.inf, 2.0], np.float32)
    coll = COLLECTIVES["all_reduce"]
    with np.errstate(invalid="ignore"):
        assert not compare(coll, inputs, [out, out], SUM, 0)[0]
        assert check.wrong_elements(coll, inputs, [out, out], SUM, 0) == 2
        right = np.array([np.inf, 2.0], np.float32)
        assert check.wrong_elements(coll, inputs, [right, right], SUM, 0) == 0


def test_a_non_finite_reference_allows_what_other_orders_give():
    """The reference is one order; where it is not finite, others may differ. float16:
    inf - 60000 - 60000 is inf left to right, but -60000 - 60000 first overflows to
    -inf, and inf - inf is NaN; inf x 1e-4 x 1e-4 is inf, but 1e-4 x 1e-4 underflows to
    0 and 0 x inf is NaN; float64: (x + x) / 2 overflows for x = 1.5e308, where x / 2 +
    x / 2 gives x. simcoll's own ring gives these and was refused. A finite value where
    an infinite input makes the result infinite is still wrong, and so is -inf where
    nothing can overflow."""
    coll = COLLECTIVES["all_reduce"]
    f16 = [np.array([v], np.float16) for v in (np.inf, -60000.0, -60000.0)]
    nan16 = [np.array([np.nan], np.float16)] * 3
    with np.errstate(invalid="ignore", over="ignore"):
        assert compare(coll, f16, nan16, SUM, 0)[0]
        assert not compare(coll, f16, [np.array([5.0], np.float16)] * 3, SUM, 0)[0]
        tiny = [np.array([v], np.float16) for v in (np.inf, 1e-4, 1e-4)]
        assert compare(coll, tiny, nan16, ReduceOp.PRODUCT, 0)[0]
        big = [np.array([1.5e308]), np.array([1.5e308])]
        assert compare(coll, big, [np.array([1.5e308])] * 2, ReduceOp.AVG, 0)[0]
        one = [np.array([np.inf, 1.0], np.float32), np.array([1.0, 1.0], np.float32)]
        minus = np.array([-np.inf, 2.0], np.float32)
        assert not compare(coll, one, [minus, minus], SUM, 0)[0]
        assert check.wrong_elements(coll, f16, nan16, SUM, 0) == 0
        assert check.wrong_elements(coll, f16, [np.array([5.0], np.float16)] * 3, SUM, 0) == 3


def test_the_overflow_verdict_of_each_element_reads_its_own_inputs():
    """Worked out by hand in float16 (largest 65504), each element on its own:
    * SUM of [1, 60000, 60000] and [1, 60000, -60000]: 120000 overflows in any order
      (inf is right there), 2 and 0 are exact; the check must read element 1's own
      inputs among those it re-checks (not element 0's, its place in the mask);
    * AVG of 65504 and -65504: each term is scaled by 1/2 first, to 32752, and no
      partial result reaches the largest number: inf is wrong;
    * SUM of 32768, 48, 48, 32624 (exact 65488, below 65504): left to right the ties
      round up, 32832, 32896, then 65520 rounds to inf; only the rounding term of the
      bound lets inf through, rightly."""
    coll = COLLECTIVES["all_reduce"]
    f16 = np.float16
    inputs = [np.array([1, 60000, 60000], f16), np.array([1, 60000, -60000], f16)]
    assert compare(coll, inputs, [np.array([2, np.inf, 0], f16)] * 2, SUM, 0)[0]
    assert not compare(coll, inputs, [np.array([2, np.inf, np.inf], f16)] * 2, SUM, 0)[0]
    extremes = [np.array([65504], f16), np.array([-65504], f16)]
    assert check.wrong_elements(coll, extremes, [np.array([np.inf], f16)] * 2,
                                ReduceOp.AVG, 0) == 2
    ties = [np.array([v], f16) for v in (32768, 48, 48, 32624)]
    left = ties[0]
    for x in ties[1:]:
        with np.errstate(over="ignore"):
            left = left + x
    assert np.isinf(left[0])   # the order that overflows, in float16 itself
    assert check.wrong_elements(coll, ties, [np.array([np.inf], f16)] * 4, SUM, 0) == 0


def _bf16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.AVG])
def test_whole_inputs_that_sum_exactly_in_any_order_must_be_exact(op):
    # bfloat16 has 8 significand bits: whole numbers up to 2^8 = 256 are exact. 128 ranks of
    # integers in -2..2: every partial sum is such an integer (|sum| <= 256), so every
    # order gives the exact sum (for AVG, with p a power of two, that sum over 128). A lost
    # rank, a zero or a unit off: wrong. The rounding bound alone, 127 x 2^-9 x sum |x_i|
    # (about a quarter of it), let all of those pass.
    dtype, p = _bf16(), 128
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-2, 3, size=64).astype(dtype) for _ in range(p)]
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    if op is ReduceOp.AVG:
        exact = exact / p
    right = exact.astype(dtype)
    coll = COLLECTIVES["all_reduce"]
    assert compare(coll, inputs, [right] * p, op, 0) == (True, 0.0)
    lost = np.sum([x.astype(np.float64) for x in inputs[:-1]], axis=0)
    lost = (lost / p if op is ReduceOp.AVG else lost).astype(dtype)
    assert not np.array_equal(lost, right)
    assert not compare(coll, inputs, [lost] * p, op, 0)[0]
    one_off = right.copy()
    one_off[7] = dtype.type(float(one_off[7]) + (1 / p if op is ReduceOp.AVG else 1.0))
    assert not compare(coll, inputs, [right] * (p - 1) + [one_off], op, 0)[0]
    assert check.wrong_elements(coll, inputs, [right] * (p - 1) + [one_off], op, 0) == 1


def test_whole_inputs_beyond_the_exact_range_keep_the_rounding_bound():
    # 128 ranks of integers in -4..4 can sum past 256 in bfloat16: some order rounds, so
    # an element one unit off the exact sum (within the bound) passes, as before
    dtype, p = _bf16(), 128
    inputs = [np.full(4, 4.0, dtype=dtype) for _ in range(p)]   # sum 512, |x| sum 512
    off = np.full(4, 512.0 - 2.0, dtype=dtype)                 # 510: a bfloat16 neighbour
    assert compare(COLLECTIVES["all_reduce"], inputs, [off] * p, ReduceOp.SUM, 0)[0]
    # AVG of a p that is not a power of two rounds its scale 1/p: the bound applies
    three = [np.full(4, 1.0, dtype=np.float16)] * 3
    near = np.full(4, np.float16(1.0) - np.float16(2.0**-11), dtype=np.float16)
    assert compare(COLLECTIVES["all_reduce"], three, [near] * 3, ReduceOp.AVG, 0)[0]


def test_whole_factors_that_multiply_exactly_must_be_exact():
    # float16 (11 significand bits): factors of -1, 1 and 2 with a product of at most
    # 2^11 in magnitude are exact in any order
    p = 8
    inputs = [np.array([2.0, -1.0, 1.0], dtype=np.float16) for _ in range(p)]
    right = np.array([256.0, 1.0, 1.0], dtype=np.float16)
    coll = COLLECTIVES["all_reduce"]
    assert compare(coll, inputs, [right] * p, ReduceOp.PRODUCT, 0)[0]
    assert not compare(coll, inputs, [np.array([256.0, -1.0, 1.0], np.float16)] * p,
                       ReduceOp.PRODUCT, 0)[0]
    assert not compare(coll, inputs, [np.array([255.875, 1.0, 1.0], np.float16)] * p,
                       ReduceOp.PRODUCT, 0)[0]


def test_an_average_of_float64s_near_the_largest_number_is_checked():
    # (1e308 + 1e308) / 2 = 1e308: the reference summed first and overflowed to inf, so
    # the element went unchecked (an output of -5 passed) and a correct run reported an
    # error of inf; the bound's sum |x_i| = 2e308 overflowed too
    inputs = [np.array([1e308, 1.0]), np.array([1e308, 3.0])]
    coll = COLLECTIVES["all_reduce"]
    assert compare(coll, inputs, [np.array([1e308, 2.0])] * 2, ReduceOp.AVG, 0) == (True, 0.0)
    assert not compare(coll, inputs, [np.array([-5.0, 2.0])] * 2, ReduceOp.AVG, 0)[0]
    assert not compare(coll, inputs, [np.array([np.inf, 2.0])] * 2, ReduceOp.AVG, 0)[0]
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", data=inputs,
                      op="avg")
    assert (res.correct, res.max_error) == (True, 0.0)


def test_an_average_over_a_rank_count_not_a_power_of_two_keeps_its_bound():
    # float64 AVG over 3 ranks of whole numbers: 1/3 is not exact, so each input scaled by
    # c = 1/3 rounded (as NCCL scales them) sums to 0 c + 4 c - 7 c = -0.9999999999999998,
    # the reference -1.0. c compared equal to 1/3 rounded in float64 itself, so the
    # element was held to the exact value
    inputs = [np.array([0.0]), np.array([4.0]), np.array([-7.0])]
    c = np.float64(1.0) / 3
    order = 0.0 * c + 4.0 * c + -7.0 * c
    assert order == -0.9999999999999998
    assert compare(COLLECTIVES["all_reduce"], inputs, [np.array([order])] * 3,
                   ReduceOp.AVG, 0)[0]


def test_a_float64_sum_of_magnitudes_that_rounds_down_to_2_to_53_is_not_exact():
    # 2^53 + 1 + 1 in rank order is 2^53 (each +1 rounds back), the true sum 2^53 + 2, which
    # the order 1 + 1 + 2^53 gives: both are correct outputs of a float64 sum
    big = float(2**53)
    inputs = [np.array([big]), np.array([1.0]), np.array([1.0])]
    coll = COLLECTIVES["all_reduce"]
    assert (big + 1.0) + 1.0 == big and (1.0 + 1.0) + big == big + 2
    for out in (big, big + 2):
        assert compare(coll, inputs, [np.array([out])] * 3, ReduceOp.SUM, 0)[0]
    # below 2^53 the sum is exact in every order, and held to it
    inputs = [np.array([big / 2]), np.array([1.0]), np.array([1.0])]
    assert not compare(coll, inputs, [np.array([big / 2])] * 3, ReduceOp.SUM, 0)[0]


@pytest.mark.parametrize("algorithm", ["ring", "rabenseifner", "naive", "tree", "nccl",
                                       "direct"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "bfloat16"])
def test_min_and_max_pass_over_nan_as_nccls_fminf_and_fmaxf(algorithm, dtype):
    """NCCL's MIN / MAX are fminf / fmaxf (__hmin / __hmax for 16-bit floats): a NaN
    loses to any number, and an element is NaN only where every rank's is. simcoll took
    np.minimum / np.maximum, which spread a NaN, and marked NCCL's own answer wrong.
    Expected values worked by hand."""
    nan = float("nan")
    columns = [[nan, 1.0, nan, -0.5], [2.0, 3.0, nan, nan], [-5.0, nan, nan, 7.0],
               [4.0, 0.5, nan, 1.5]]
    want = {"min": [-5.0, 0.5, nan, -0.5], "max": [4.0, 3.0, nan, 7.0]}
    if dtype == "bfloat16":
        numpy_dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    else:
        numpy_dtype = np.dtype(dtype)
    xs = [np.array(c * 2, dtype=numpy_dtype) for c in columns]
    for op, expected in want.items():
        res = sc.simulate(sc.topology.dgx_h100(1) if algorithm == "nccl"
                          else sc.topology.switch(4), "all_reduce", algorithm=algorithm,
                          data=xs * (2 if algorithm == "nccl" else 1), op=op)
        assert res.correct
        for out in res.outputs:
            got = out.astype(np.float64)
            assert np.array_equal(got, np.array(expected * 2), equal_nan=True), (op, got)
        # the old rule's answer (NaN spread) is now wrong
        spread = [x.astype(np.float64) for x in xs]
        naive = np.minimum.reduce(spread) if op == "min" else np.maximum.reduce(spread)
        ok, _ = compare(COLLECTIVES["all_reduce"], xs, [naive.astype(numpy_dtype)] * 4,
                        ReduceOp(op), 0)
        assert not ok


def _saturating(dtype, combine, a, b):
    """NCCL's fp8 arithmetic, written here: half precision, then clamped to the
    dtype's largest number and rounded to it (NaN stays NaN)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    largest = float(ml_dtypes.finfo(dtype).max)
    with np.errstate(all="ignore"):
        wide = combine(np.asarray(a, np.float16), np.asarray(b, np.float16))
    return np.clip(wide, -largest, largest).astype(dtype)


def _evaluate(node, inputs, combine):
    """The value of an association tree of input indices, each node combined."""
    if isinstance(node, int):
        return inputs[node]
    return combine(_evaluate(node[0], inputs, combine), _evaluate(node[1], inputs, combine))


def _orders(leaves):
    """Every full binary tree over ``leaves`` (their order kept): every association."""
    if len(leaves) == 1:
        yield leaves[0]
        return
    for cut in range(1, len(leaves)):
        for left in _orders(leaves[:cut]):
            for right in _orders(leaves[cut:]):
                yield (left, right)


@pytest.mark.parametrize("dtype_name", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("op", [SUM, ReduceOp.PRODUCT])
def test_every_saturating_fp8_order_passes_and_values_none_can_give_do_not(dtype_name, op):
    """fp8 sums and products saturate (NCCL's half precision clamped back): a saturated
    partial may come back down (448 + 448 - 448 is 0), so the check takes a range, and
    every association of every permutation of these inputs must land in it. Values no
    order gives are refused: all-positive terms past 448 give 448 in every order (0, 16,
    -96 are wrong; the check once took any finite value there), a product keeps its sign
    (16 x 16 x 16 is 448, never -448 or 1)."""
    import itertools

    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml_dtypes, dtype_name))
    big = float(ml_dtypes.finfo(dt).max)
    combine = np.add if op is SUM else np.multiply
    coll = COLLECTIVES["all_reduce"]
    cases = ([[big, big, -big], [big, big / 2, -big, 3.0], [big, -big, big / 4, -big / 2],
              [big / 2, big / 2, big / 2, -1.0]] if op is SUM else
             [[16.0, 16.0, 16.0], [16.0, -16.0, 16.0, 0.5], [big, 2.0, 0.25], [4.0, 64.0, 0.125]])
    for values in cases:
        inputs = [np.array([v], dt) for v in values]
        for perm in set(itertools.permutations(range(len(values)))):
            for tree in _orders(list(perm)):
                out = _evaluate(tree, inputs, lambda a, b: _saturating(dt, combine, a, b))
                assert compare(coll, inputs, [out] * len(values), op, 0)[0], (values, tree, out)
    wrong = ({(big, big, big): (0.0, 16.0, -96.0, -big), (big, 1.0, 1.0): (0.0, -big)}
             if op is SUM else {(16.0, 16.0, 16.0): (1.0, 0.0, -0.5, -big),
                                (16.0, -16.0, 16.0): (big, 3.0)})
    for values, outs in wrong.items():
        inputs = [np.array([v], dt) for v in values]
        for bad in outs:
            assert not compare(coll, inputs, [np.array([bad], dt)] * 3, op, 0)[0], (values, bad)


def test_infinities_and_nan_keep_to_what_an_order_can_give():
    """float16: inf + 60000 + 30000 is +inf in every order (the finite terms overflow
    upward only): -inf and NaN are wrong; with -60000 - 30000, which can overflow to
    -inf, NaN (inf - inf) is possible. A product of 300s overflows to +inf, never -inf;
    NaN only where a partial product can also reach 0 (0 x inf). e5m2, which saturates:
    inf - 57344 - 57344 can come back to 0, and inf + 1 + 1 is 57344, never -57344."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    coll = COLLECTIVES["all_reduce"]

    def verdict(dtype, values, out, op=SUM):
        inputs = [np.array([v], dtype) for v in values]
        with np.errstate(all="ignore"):
            return compare(coll, inputs, [np.array([out], dtype)] * len(values), op, 0)[0]

    f16, e5 = np.float16, ml_dtypes.float8_e5m2
    assert verdict(f16, [np.inf, 60000.0, 30000.0], np.inf)
    assert not verdict(f16, [np.inf, 60000.0, 30000.0], -np.inf)
    assert not verdict(f16, [np.inf, 60000.0, 30000.0], np.nan)
    assert verdict(f16, [np.inf, -60000.0, -30000.0], np.nan)
    assert not verdict(f16, [np.inf, -60000.0, -30000.0], -np.inf)
    product = ReduceOp.PRODUCT
    assert verdict(f16, [300.0, 300.0, 300.0], np.inf, product)
    assert not verdict(f16, [300.0, 300.0, 300.0], -np.inf, product)
    assert not verdict(f16, [300.0, 300.0, 300.0], np.nan, product)
    assert verdict(f16, [300.0, 300.0, 300.0, 1e-4, 1e-4], np.nan, product)
    assert verdict(e5, [np.inf, -57344.0, -57344.0], 0.0)
    assert verdict(e5, [np.inf, 1.0, 1.0], 57344.0)
    assert not verdict(e5, [np.inf, 1.0, 1.0], -57344.0)
    assert not verdict(e5, [np.inf, 1.0, 1.0], np.nan)


def test_an_fp8_all_reduce_that_returns_zeros_is_wrong_where_sums_can_saturate():
    """8 ranks of e4m3 values from 100 to 448: every sum, mean and product can pass
    448; an algorithm returning zeros passed the check there."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    rng = np.random.default_rng(7)
    inputs = [rng.uniform(100, 448, 256).astype(dt) for _ in range(8)]
    zeros = [np.zeros(256, dt)] * 8
    for op in (SUM, ReduceOp.AVG, ReduceOp.PRODUCT):
        assert check.wrong_elements(COLLECTIVES["all_reduce"], inputs, zeros, op, 0) == 8 * 256


def test_negative_terms_that_round_past_the_largest_number_may_give_minus_inf():
    """float16, all negative, summed left to right: -16400 - 16416 = -32816, halfway
    between -32800 and -32832 (steps of 32), rounds to even, -32832; - 16368 = -49200,
    halfway again, rounds to -49216; - 16304 = -65520, halfway between -65504 and
    -65536, rounds to even: -inf. The exact sum is -65488, inside the range, but the
    rounding bound of the negative terms' reach, N + q u (P + N) = 65488 + 3 x 2^-11 x
    65488 = 65583.9, passes 65504: -inf is accepted (and +inf, which no partial sum
    reaches, is not). The reach downward must count the rounding of the negative
    terms, not only of the positive ones."""
    coll = COLLECTIVES["all_reduce"]
    terms = (-16400.0, -16416.0, -16368.0, -16304.0)
    inputs = [np.array([t], np.float16) for t in terms]
    with np.errstate(over="ignore"):
        acc = np.float16(terms[0])
        for t in terms[1:]:
            acc = np.float16(acc + np.float16(t))
    assert acc == -np.inf and sum(terms) == -65488.0
    assert compare(coll, inputs, [np.array([-np.inf], np.float16)] * 4, SUM, 0)[0]
    assert not compare(coll, inputs, [np.array([np.inf], np.float16)] * 4, SUM, 0)[0]
    assert not compare(coll, inputs, [np.array([np.nan], np.float16)] * 4, SUM, 0)[0]


def test_an_average_scales_its_negative_terms_before_they_can_overflow():
    """float16 AVG over 4 ranks of -65504, -65504, -65504, 65504: each term is scaled by
    1/4 first (exact), to -16376 x 3 and 16376, so a partial sum reaches at most
    49128 (1 + u) + 3 u (16376 + 49128)(1 + u) ~ 49248 downward, below 65504: no order
    gives -inf, though the unscaled magnitudes (196512) pass it."""
    coll = COLLECTIVES["all_reduce"]
    inputs = [np.array([v], np.float16) for v in (-65504.0, -65504.0, -65504.0, 65504.0)]
    assert compare(coll, inputs, [np.array([-32752.0], np.float16)] * 4, ReduceOp.AVG, 0)[0]
    for wrong in (-np.inf, np.inf, np.nan):
        assert not compare(coll, inputs, [np.array([wrong], np.float16)] * 4,
                           ReduceOp.AVG, 0)[0]


def _every_result(dt, combine, values, saturating):
    """Every value some association of some permutation of ``values`` gives, in the
    test's own arithmetic: NCCL's fp8 (``_saturating``) or the dtype's own IEEE
    operations. Floats; NaN as the string "nan"."""
    import itertools

    inputs = [np.array([v], dt) for v in values]

    def step(a, b):
        if saturating:
            return _saturating(dt, combine, a, b)
        with np.errstate(all="ignore"):
            return combine(np.asarray(a, dt), np.asarray(b, dt)).astype(dt)

    found = set()
    for perm in set(itertools.permutations(range(len(values)))):
        for tree in _orders(list(perm)):
            out = float(np.asarray(_evaluate(tree, inputs, step)).astype(np.float64)[0])
            found.add("nan" if out != out else out)
    return found


def _one(dt, values, out, op):
    coll = COLLECTIVES["all_reduce"]
    inputs = [np.array([v], dt) for v in values]
    with np.errstate(all="ignore"):
        return compare(coll, inputs, [np.array([out], dt)] * len(values), op, 0)[0]


def test_a_float64_sum_whose_reference_overflowed_takes_what_another_order_gives():
    """float64 1.5e308 + 1.5e308 - 1.5e308: the reference, left to right, overflows to
    inf, but 1.5e308 + (1.5e308 - 1.5e308) is 1.5e308 exactly. Every input is finite,
    so a finite element is not checked there (the reference itself overflowed)."""
    values = (1.5e308, 1.5e308, -1.5e308)
    found = _every_result(np.dtype(np.float64), np.add, values, saturating=False)
    assert 1.5e308 in found and np.inf in found
    assert _one(np.float64, values, 1.5e308, SUM)
    assert _one(np.float64, values, np.inf, SUM)


def test_a_float16_product_with_a_zero_factor_is_never_infinite():
    """float16 300 x 300 x 300 x 0: the reference is 0, the factors above 1 can overflow
    (300 x 300 is inf), but the 0 meets either a finite partial (0) or an infinite one
    (NaN): no order gives +inf or -inf, which a product's sign (0 here) rules out."""
    f16 = np.dtype(np.float16)
    values = (300.0, 300.0, 300.0, 0.0)
    found = _every_result(f16, np.multiply, values, saturating=False)
    assert found == {0.0, "nan"}
    assert _one(f16, values, np.nan, ReduceOp.PRODUCT)
    assert _one(f16, values, 0.0, ReduceOp.PRODUCT)
    for wrong in (np.inf, -np.inf):
        assert not _one(f16, values, wrong, ReduceOp.PRODUCT)


@pytest.mark.parametrize("dtype_name", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_negative_terms_past_the_largest_number_saturate_at_minus_it(dtype_name):
    """-M - M - M in fp8 saturates at -M in every order (M = 448 in e4m3, 57,344 in
    e5m2): -M is right, and -M/2, -M/4, 0 are not (the mirror of the all-positive rule;
    with only negative terms the sum is at most max(-M, -N (1 - gamma)))."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml_dtypes, dtype_name))
    big = float(ml_dtypes.finfo(dt).max)
    values = (-big, -big, -big)
    assert _every_result(dt, np.add, values, saturating=True) == {-big}
    assert _one(dt, values, -big, SUM)
    for wrong in (-big / 2, -big / 4, -big * 0.75, 0.0, big):
        assert not _one(dt, values, wrong, SUM), wrong


def test_e5m2_negative_infinity_clamps_to_minus_the_largest_number():
    """e5m2: -inf - 1 - 1 is -57,344 in every order (the infinity clamped at its first
    combine, the 1s too small to move it), never +57,344, -49,152 or NaN."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e5m2)
    values = (-np.inf, -1.0, -1.0)
    assert _every_result(dt, np.add, values, saturating=True) == {-57344.0}
    assert _one(dt, values, -57344.0, SUM)
    for wrong in (57344.0, -49152.0, -32768.0, np.nan):
        assert not _one(dt, values, wrong, SUM), wrong


def test_e5m2_infinity_plus_small_terms_stays_at_the_largest_number():
    """e5m2: inf + 1 + 1 is 57,344 in every order: the infinity counts as a term past
    every sum of the others (not as 57,344 itself, which would let P (1 - gamma), about
    49,900, down to 49,152)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e5m2)
    values = (np.inf, 1.0, 1.0)
    assert _every_result(dt, np.add, values, saturating=True) == {57344.0}
    for wrong in (49152.0, 40960.0, 32768.0):
        assert not _one(dt, values, wrong, SUM), wrong


def test_e5m2_infinite_product_whose_small_factors_underflow():
    """e5m2 (smallest subnormal 2^-16), product of inf and 2^-16 three times: 2^-16 x
    2^-16 = 2^-32 is 0 in half precision, and inf x 0 is NaN; inf x 2^-16 clamps to
    57,344 first, x 2^-16 = 0.875, then 0.875 x 2^-16 rounds to 2^-16 (e5m2's step
    there), x 2^-16 to 0. With three ranks (inf, 2^-16, 2^-16) NaN is one of the
    results. A NaN input gives NaN in every order: 0 is wrong there."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e5m2)
    tiny = 2.0 ** -16
    assert float(ml_dtypes.finfo(dt).smallest_subnormal) == tiny
    three = (np.inf, tiny, tiny)
    found = _every_result(dt, np.multiply, three, saturating=True)
    assert "nan" in found
    assert _one(dt, three, np.nan, ReduceOp.PRODUCT)
    four = (np.inf, tiny, tiny, tiny)
    found = _every_result(dt, np.multiply, four, saturating=True)
    assert 0.0 in found and "nan" in found
    assert _one(dt, four, 0.0, ReduceOp.PRODUCT)
    assert _one(dt, four, np.nan, ReduceOp.PRODUCT)
    # (inf x 2) clamps to 57,344; 2^-8 x 2^-9 = 2^-17, a tie between 0 and 2^-16, rounds
    # to the even 0; 57,344 x 0 is 0. The finite factors' product, 2^-17, is below 2^-16
    # but 57,344 x 2^-17 (0.4375) is far above 0: only the underflow to 0 gives the 0.
    clamped = (np.inf, 2.0, 2.0 ** -8, 2.0 ** -9)
    found = _every_result(dt, np.multiply, clamped, saturating=True)
    assert 0.0 in found
    assert _one(dt, clamped, 0.0, ReduceOp.PRODUCT)
    for e4 in (True, False):
        d = np.dtype(ml_dtypes.float8_e4m3fn if e4 else ml_dtypes.float8_e5m2)
        with_nan = (np.nan, 2.0, 3.0)
        assert _every_result(d, np.multiply, with_nan, saturating=True) == {"nan"}
        assert _one(d, with_nan, np.nan, ReduceOp.PRODUCT)
        assert not _one(d, with_nan, 0.0, ReduceOp.PRODUCT)


def test_an_fp8_sum_clamped_at_minus_the_largest_number_keeps_what_it_had():
    """e4m3: 52 + (-160 - 448): -608 clamps to -448, + 52 is -396, which rounds to -384
    (steps of 32 there); the exact sum is -556. A clamp at -M gains at most N (1 +
    gamma) - M, and the range's top, P (1 + gamma) - N (1 - gamma) plus that, must
    reach -384 (with N (1 + gamma) in its place it stopped near -473)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    values = (52.0, -160.0, -448.0)
    found = _every_result(dt, np.add, values, saturating=True)
    assert -384.0 in found
    for out in found:
        assert _one(dt, values, out, SUM), out


def test_an_e5m2_product_with_an_infinite_input_keeps_its_sign():
    """e5m2: inf x 2 x 3 clamps to 57,344 in every order, -inf x 2 x 3 to -57,344: the
    value of the other sign is wrong, as is 0 (no factor can reach it)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e5m2)
    for sign in (1.0, -1.0):
        values = (sign * np.inf, 2.0, 3.0)
        assert _every_result(dt, np.multiply, values, saturating=True) == {sign * 57344.0}
        assert _one(dt, values, sign * 57344.0, ReduceOp.PRODUCT)
        for wrong in (-sign * 57344.0, -sign * 49152.0, 0.0):
            assert not _one(dt, values, wrong, ReduceOp.PRODUCT), (sign, wrong)


def test_an_fp8_average_of_terms_of_one_sign_that_saturate():
    """e4m3 AVG over 4 ranks of 448: each input scaled by 1/4 (exact) to 112, and every
    order gives 448 (224 + 224; 336 rounds to 320, + 112 = 432 rounds to 448): a value
    far below, 288, is wrong, as -320 is for -448 x 4. Without negative terms there is
    nothing to bring a saturated partial back down (AVG scales and rounds only the
    signs that have terms)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    for sign, wrong in ((1.0, 288.0), (-1.0, -320.0)):
        values = (sign * 448.0,) * 4
        scaled = np.array(values, dt) * dt.type(0.25)   # 1/4: exact in e4m3
        found = _every_result(dt, np.add, tuple(float(v) for v in scaled), saturating=True)
        assert found == {sign * 448.0}
        assert _one(dt, values, sign * 448.0, ReduceOp.AVG)
        assert not _one(dt, values, wrong, ReduceOp.AVG)


def test_a_float16_infinite_product_is_nan_only_where_a_partial_reaches_zero():
    """float16: inf x 2^-7 x 2^-8: 2^-15 is a subnormal, not 0, so every order gives
    inf (NaN needs inf x 0); the finite factors' product is below the smallest normal
    number, 2^-14, but not below half its smallest subnormal step, 2^-25."""
    f16 = np.dtype(np.float16)
    values = (np.inf, 2.0 ** -7, 2.0 ** -8)
    assert _every_result(f16, np.multiply, values, saturating=False) == {np.inf}
    assert _one(f16, values, np.inf, ReduceOp.PRODUCT)
    assert not _one(f16, values, np.nan, ReduceOp.PRODUCT)


def test_a_float16_product_with_an_infinite_factor_keeps_its_sign_and_nan_needs_a_zero():
    """inf x 300 x 300 is +inf in every order, though 300 x 300 x ... overflows: -inf and
    NaN were taken there; with a 0 among the factors every order gives NaN (inf x 0),
    never an infinity. Where tiny factors can take a partial product to 0 (2^-14 x
    2^-14 underflows), NaN is possible. Every order of these is accepted."""
    import itertools

    coll = COLLECTIVES["all_reduce"]
    product = ReduceOp.PRODUCT

    def verdict(values, out):
        inputs = [np.array([v], np.float16) for v in values]
        with np.errstate(all="ignore"):
            return compare(coll, inputs, [np.array([out], np.float16)] * len(values),
                           product, 0)[0]

    for values in ([np.inf, 300.0, 300.0], [np.inf, 0.0, 300.0, 300.0],
                   [np.inf, 2.0 ** -14, 2.0 ** -14, 3.0]):
        inputs = [np.array([v], np.float16) for v in values]
        for perm in itertools.permutations(range(len(values))):
            for tree in _orders(list(perm)):
                with np.errstate(all="ignore"):
                    out = _evaluate(tree, inputs, np.multiply)
                assert verdict(values, float(out[0])), (values, tree, out)
    assert not verdict([np.inf, 300.0, 300.0], -np.inf)
    assert not verdict([np.inf, 300.0, 300.0], np.nan)
    assert not verdict([np.inf, 0.0, 300.0, 300.0], np.inf)
    assert not verdict([np.inf, 0.0, 300.0, 300.0], -np.inf)
    assert verdict([np.inf, 2.0 ** -14, 2.0 ** -14, 3.0], np.nan)


def test_an_exact_infinity_is_right_where_the_float64_reference_overflowed_to_nan():
    """M + M - inf is -inf exactly, and an order that meets -inf first keeps it; the
    reference, left to right in float64, overflows M + M to inf and gives inf - inf =
    NaN, and the ring's and the double binary tree's -inf were called wrong (naive's NaN
    right). +inf, of the wrong sign, stays wrong; so does either infinity where both
    signs are among the inputs (NaN in every order)."""
    big = np.finfo(np.float64).max
    x = [np.full(3, big), np.full(3, big), np.full(3, -np.inf)]
    for algorithm in ("ring", "double_binary_tree", "naive"):
        res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm=algorithm, data=x)
        assert res.correct, algorithm
    coll = COLLECTIVES["all_reduce"]
    assert compare(coll, x, [np.full(3, -np.inf)] * 3, ReduceOp.SUM, 0)[0]
    assert not compare(coll, x, [np.full(3, np.inf)] * 3, ReduceOp.SUM, 0)[0]
    both = [np.array([np.inf]), np.array([-np.inf])]
    assert not compare(coll, both, [np.array([np.inf])] * 2, ReduceOp.SUM, 0)[0]


def test_an_exact_infinite_product_is_right_where_the_reference_underflowed_to_nan():
    """Nine float32 subnormals times inf is +inf exactly (inf first keeps it); the
    float64 reference takes s^8 to 0 and 0 x inf to NaN, and the ring's inf was wrong.
    The infinity has the factors' sign; a 0 factor makes NaN the only result."""
    s = np.finfo(np.float32).smallest_subnormal
    x = [np.full(10, s, np.float32) for _ in range(9)] + [np.full(10, np.inf, np.float32)]
    res = sc.simulate(sc.topology.switch(10), "all_reduce", algorithm="ring", data=x,
                      op="product")
    assert res.correct and np.isinf(res.outputs[0]).any()
    coll = COLLECTIVES["all_reduce"]
    tiny = np.float64(5e-324)
    signed = [np.array([-tiny]), np.array([tiny]), np.array([np.inf])]
    assert compare(coll, signed, [np.array([-np.inf])] * 3, ReduceOp.PRODUCT, 0)[0]
    assert not compare(coll, signed, [np.array([np.inf])] * 3, ReduceOp.PRODUCT, 0)[0]
    zero = [np.array([0.0]), np.array([np.inf])]
    assert not compare(coll, zero, [np.array([np.inf])] * 2, ReduceOp.PRODUCT, 0)[0]


def test_an_fp8_infinity_is_wrong_once_two_inputs_combine():
    """fp8 sums and products saturate at the largest number, an infinite input included
    (57,344 in e5m2): an infinite output cannot come of two or more ranks, and was
    accepted as equal to the reference's infinity. One rank combines nothing."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    e5 = np.dtype(ml_dtypes.float8_e5m2)
    coll = COLLECTIVES["all_reduce"]
    x = [np.array([np.inf], e5), np.array([1.0], e5)]
    for op in (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.AVG):
        assert not compare(coll, x, [np.array([np.inf], e5)] * 2, op, 0)[0], op
    assert compare(coll, x, [np.array([57344], e5)] * 2, ReduceOp.SUM, 0)[0]
    assert compare(coll, x[:1], [np.array([np.inf], e5)], ReduceOp.SUM, 0)[0]


def test_the_error_of_a_wrong_large_integer_is_exact():
    """float64 holds 2^62 + 1 as 2^62: a wrong int64 sum had max_error 0.0."""
    coll = COLLECTIVES["all_reduce"]
    x = [np.array([2**62], np.int64), np.array([0], np.int64)]
    assert compare(coll, x, [np.array([2**62 + 1], np.int64)] * 2, ReduceOp.SUM, 0) == \
        (False, 1.0)
    u = [np.array([2**64 - 2], np.uint64), np.array([0], np.uint64)]
    assert compare(coll, u, [np.array([2**64 - 1], np.uint64)] * 2, ReduceOp.SUM, 0) == \
        (False, 1.0)


def test_float64_products_keep_their_rounding_allowance():
    """(1 + u)^q - 1 in float64 with u = 2^-53 is 0 (1 + 2^-53 rounds to 1): a float64
    product's allowance was only the reference's own p r, and a ring's right product of
    five numbers in [0.9, 1.1] (2.7 u from the exact one, by fractions) was called wrong.
    The allowance is q u from the dtype and p r from the reference: 4 u + 5 r here; an
    output 20 u off is still refused."""
    p = 5
    data = [np.random.default_rng(1900 + r).uniform(0.9, 1.1, 64) for r in range(p)]
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring", data=data,
                      op="product")
    u = 2.0**-53
    exact = [np.prod([Fraction(float(x[j])) for x in data]) for j in range(64)]
    off = max(abs(Fraction(float(res.outputs[0][j])) - exact[j]) / exact[j]
              for j in range(64))
    assert off <= (p - 1) * u * 1.001      # within what four roundings may do
    assert res.correct is True
    coll = COLLECTIVES["all_reduce"]
    far = [np.array([float(e) * (1 + 20 * u) for e in exact])] * p
    assert not compare(coll, data, far, ReduceOp.PRODUCT, 0)[0]


def test_a_two_rank_float32_product_keeps_one_rounding_s_allowance():
    """p = 2: one combine, q = 1, so the allowance is (1 + u)^1 - 1 = u = 2^-24 of the
    exact product (plus the reference's own 2 r). 1.1f x 1.3f is not a float32: its
    correctly rounded value (one rounding, as any order gives) is off the exact product
    by about 2^-26 of it, far more than 2 r = 2^-52, and must pass; a value 4 ulps off
    (4 x 2^-23 relative, past u) must not."""
    x, y = np.float32(1.1), np.float32(1.3)
    exact = Fraction(float(x)) * Fraction(float(y))
    right = np.float32(float(x) * float(y))   # float32 x float32 is exact in float64
    off = abs(Fraction(float(right)) - exact) / exact
    assert 2 ** -52 * 4 < off <= Fraction(1, 2 ** 24)
    coll = COLLECTIVES["all_reduce"]
    inputs = [np.array([x]), np.array([y])]
    assert compare(coll, inputs, [np.array([right])] * 2, ReduceOp.PRODUCT, 0)[0]
    far = np.array([right]) * np.float32(1 + 4 * 2 ** -23)
    assert not compare(coll, inputs, [far.astype(np.float32)] * 2, ReduceOp.PRODUCT, 0)[0]


def test_an_fp8_sum_that_may_saturate_keeps_both_roundings_in_its_allowance():
    """e4m3 224 + (-256) on 2 ranks: |x| sums to 480, and 480 (1 + u) > 448 = M, so the
    sum may saturate and is judged by the saturated range (one combine, q = 1). NCCL
    rounds to half, then to fp8: gamma_1 = u + 2^-11 (u = 2^-4), and the range's top is
    224 (1 + gamma) - 256 (1 - gamma) = -32 + 480 gamma = -2 + 480/2048 = -1.765625. -1.875
    lies under it, and above -2, the top with u alone (one rounding): it passes only with
    the half-precision rounding counted. -1.75 is past the top."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e4m3fn)
    inputs = [np.array([224.0], dtype=dt), np.array([-256.0], dtype=dt)]
    gamma = Fraction(1, 16) + Fraction(1, 2048)
    top = 224 * (1 + gamma) - 256 * (1 - gamma)
    assert top == Fraction(-113, 64) and 224 * Fraction(17, 16) - 256 * Fraction(15, 16) == -2
    coll = COLLECTIVES["all_reduce"]
    for value, right in ((-1.875, True), (-1.75, False), (-32.0, True)):
        out = np.array([value], dtype=dt)
        assert float(out[0]) == value
        assert compare(coll, inputs, [out] * 2, ReduceOp.SUM, 0)[0] is right, value


def test_wrong_elements_counts_a_correct_sum_with_an_infinity_as_right_without_a_warning():
    # inf - inf in the rounding bound warned (an error under -W error) where compare is quiet
    inputs = [np.array([np.inf, 1.0], np.float32), np.array([1.0, 2.0], np.float32)]
    outputs = [np.array([np.inf, 3.0], np.float32)] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        all_reduce = COLLECTIVES["all_reduce"]
        assert check.wrong_elements(all_reduce, inputs, outputs, ReduceOp.SUM, 0) == 0
        assert check.wrong_elements(all_reduce, inputs, [np.array([np.inf, 4.0], np.float32)] * 2,
                                    ReduceOp.SUM, 0) == 2


@pytest.mark.parametrize("dtype, big", [("float32", 3e38), ("float16", 60000.0),
                                        ("float64", 1.7e308)])
def test_wrong_elements_is_quiet_where_a_sum_overflows(dtype, big):
    """big + big overflows the dtype (3e38 > float32's 3.4e38 / 2, 60000 > float16's
    65504 / 2, 1.7e308 > float64's 1.8e308 / 2): no overflow warning; an infinite output is
    right (0 wrong); as the inf - inf case."""
    inputs = [np.array([big, 1.0], dtype), np.array([big, 2.0], dtype)]
    outputs = [np.array([np.inf, 3.0], dtype)] * 2
    with warnings.catch_warnings(), np.errstate(all="warn"):
        warnings.simplefilter("error")
        assert check.wrong_elements(COLLECTIVES["all_reduce"], inputs, outputs,
                                    ReduceOp.SUM, 0) == 0
