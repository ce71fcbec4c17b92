"""Direct, pairwise-exchange and Bruck algorithms: results, traffic and time vs formulas."""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll import cost
from simcoll.algorithms import bruck
from simcoll.algorithms.bruck import slots_with_bit
from simcoll.algorithms.registry import algorithms
from simcoll.testing import alpha_beta_network

ALPHA, BETA, GAMMA = 1e-6, 1 / 100e9, 1 / 400e9
PAIRS = [("all_reduce", "direct"), ("reduce_scatter", "direct"), ("all_gather", "direct"),
         ("all_to_all", "direct"), ("reduce_scatter", "pairwise"), ("all_to_all", "pairwise"),
         ("all_gather", "bruck"), ("all_to_all", "bruck")]
RANKS = [1, 2, 3, 4, 5, 8, 16]
REDUCING = {"all_reduce", "reduce_scatter"}


def reference_network(p: int) -> sc.Topology:
    return sc.topology.switch(p, bandwidth=1 / BETA, latency=ALPHA / 2,
                              reduce_bandwidth=1 / GAMMA)


def counts(p: int) -> list[int]:
    """Element counts per rank: empty, fewer than p, divisible by p, not divisible."""
    return sorted({0, max(p - 1, 1), 4 * p, 4 * p + 3})


def expected(coll: str, inputs: list[np.ndarray], ufunc: np.ufunc) -> list[np.ndarray]:
    """Each rank's output, built from numpy directly."""
    p = len(inputs)
    if coll == "all_gather":
        return [np.concatenate(inputs)] * p
    if coll == "all_to_all":
        return [np.concatenate([np.array_split(x, p)[r] for x in inputs]) for r in range(p)]
    total = ufunc.reduce(np.stack(inputs), axis=0)
    if coll == "all_reduce":
        return [total] * p
    return np.array_split(total, p)


def small_ints(p: int, count: int, dtype, seed: int = 0) -> list[np.ndarray]:
    """Values whose sums and products are exact in any order, so outputs compare bitwise."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-3, 4, count).astype(dtype) for _ in range(p)]


@pytest.mark.parametrize("coll,alg", PAIRS)
@pytest.mark.parametrize("p", RANKS)
def test_outputs_match_numpy_for_every_size(coll, alg, p):
    for count in counts(p):
        data = small_ints(p, count, np.float32, seed=count)
        originals = [x.copy() for x in data]
        res = sc.simulate(reference_network(p), coll, algorithm=alg, data=data)
        assert res.correct, (count, res.max_error)
        for out, ref in zip(res.outputs, expected(coll, data, np.add)):
            assert out.dtype == ref.dtype
            np.testing.assert_array_equal(out, ref)
        for x, orig in zip(data, originals):
            np.testing.assert_array_equal(x, orig)


@pytest.mark.parametrize("coll,alg", [pair for pair in PAIRS if pair[0] in REDUCING])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("op", [sc.ReduceOp.SUM, sc.ReduceOp.PRODUCT, sc.ReduceOp.MIN,
                                sc.ReduceOp.MAX])
def test_reductions_for_each_dtype_and_op(coll, alg, dtype, op):
    p, count = 5, 23
    data = small_ints(p, count, dtype)
    res = sc.simulate(reference_network(p), coll, algorithm=alg, data=data, op=op)
    assert res.correct
    for out, ref in zip(res.outputs, expected(coll, data, op.ufunc)):
        np.testing.assert_array_equal(out, ref.astype(dtype))


@pytest.mark.parametrize("coll,alg", [pair for pair in PAIRS if pair[0] in REDUCING])
def test_float_sums_of_random_data_are_within_rounding(coll, alg):
    rng = np.random.default_rng(7)
    data = [rng.standard_normal(1001).astype(np.float32) for _ in range(8)]
    res = sc.simulate(reference_network(8), coll, algorithm=alg, data=data)
    assert res.correct
    assert 0 < res.max_error < 1e-4


def test_direct_all_reduce_gives_every_rank_the_same_bits():
    rng = np.random.default_rng(3)
    data = [rng.standard_normal(999).astype(np.float32) for _ in range(7)]
    res = sc.simulate(reference_network(7), "all_reduce", algorithm="direct", data=data)
    assert res.correct
    for out in res.outputs[1:]:
        np.testing.assert_array_equal(out, res.outputs[0])


@pytest.mark.parametrize("coll,alg", [pair for pair in PAIRS if pair[0] == "all_to_all"])
@pytest.mark.parametrize("dtype", [np.float64, np.int16])
def test_all_to_all_moves_blocks_exactly(coll, alg, dtype):
    p = 6
    data = [np.arange(100 * r, 100 * r + 17).astype(dtype) for r in range(p)]
    res = sc.simulate(reference_network(p), coll, algorithm=alg, data=data)
    assert res.correct
    for r, out in enumerate(res.outputs):
        np.testing.assert_array_equal(out, expected(coll, data, np.add)[r])


@pytest.mark.parametrize("coll,alg", PAIRS)
@pytest.mark.parametrize("p", RANKS)
def test_traffic_time_and_bounds_match_the_cost_model(coll, alg, p):
    for count in counts(p) + [1000 * p, 1000 * p + 1]:
        for dtype in (np.float32, np.float64):
            itemsize = np.dtype(dtype).itemsize
            nbytes = count * itemsize
            res = sc.simulate(reference_network(p), coll, algorithm=alg, nbytes=nbytes,
                              dtype=dtype)
            model = cost.traffic(coll, alg, p=p, nbytes=nbytes, itemsize=itemsize)
            np.testing.assert_array_equal(res.bytes_sent, model.sent)
            np.testing.assert_array_equal(res.bytes_received, model.received)

            predicted = cost.predict(coll, alg, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                                     gamma=GAMMA, itemsize=itemsize)
            exact = cost.is_exact(coll, alg, p=p, nbytes=nbytes, itemsize=itemsize)
            assert exact == (count % p == 0 or coll == "all_gather"
                             or (alg == "direct" and coll != "all_reduce"))
            if exact:
                assert res.time == pytest.approx(predicted, rel=1e-9, abs=0)
            else:
                assert res.time == pytest.approx(predicted, rel=2e-2)

            bound = cost.lower_bound(coll, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                                     gamma=GAMMA)
            slack = 1 - 1e-12
            assert res.time >= max(bound.bandwidth, bound.computation) * slack
            # A direct round overlaps the latencies of its p-1 messages: one alpha per
            # round, so only alpha (not ceil(log2 p) alpha) bounds it on the flow model.
            latency = min(bound.latency, ALPHA) if alg == "direct" else bound.latency
            assert res.time >= latency * slack


def test_uneven_blocks_cost_their_largest_block():
    """The models took n/p for a block, m = ceil(count/p) elements here. 6 float16 elements
    on 32 ranks: ranks 0..5 own a 2-byte block, the others an empty one; rank 0 receives
    its block from 31 peers at once and reduces 31 of them, alpha + 31 x 2 B (beta +
    gamma), where n/p said 31/32 x 12 B. Direct reduce-scatter and all-to-all are exact
    for every size: the largest block's receivers keep their links full. The direct
    all-reduce of 1 float64 on 40 ranks: rank 0 takes 39 x 8 B in and reduces them, then
    sends 39 x 8 B. Pairwise: the owner of a largest block receives m bytes in every one
    of the p - 1 steps (7 float32 elements on 5 ranks: m = 8 B), an estimate."""
    a, b, g = 1e-6, 1e-9, 4e-9
    for coll, alg, p, count, dtype, hand, exact in [
            ("reduce_scatter", "direct", 32, 6, "float16", a + 31 * 2 * (b + g), True),
            ("all_to_all", "direct", 35, 9, "float64", a + 34 * 8 * b, True),
            ("all_reduce", "direct", 40, 1, "float64", 2 * a + 39 * 8 * (2 * b + g), False),
            ("reduce_scatter", "pairwise", 5, 7, "float32", 4 * (a + 8 * (b + g)), False),
            ("all_to_all", "pairwise", 5, 7, "float32", 4 * (a + 8 * b), False)]:
        itemsize = np.dtype(dtype).itemsize
        res = sc.simulate(alpha_beta_network(p, alpha=a, beta=b, gamma=g), coll,
                          algorithm=alg, nbytes=count * itemsize, dtype=dtype)
        model = dict(p=p, nbytes=count * itemsize, itemsize=itemsize)
        assert cost.predict(coll, alg, alpha=a, beta=b, gamma=g,
                            **model) == pytest.approx(hand, rel=1e-12), (coll, alg)
        assert cost.is_exact(coll, alg, **model) == exact
        assert res.time == pytest.approx(hand, rel=1e-9 if alg == "direct" else 3e-3)


@pytest.mark.parametrize("coll,alg", PAIRS)
@pytest.mark.parametrize("p,count", [(3, 10), (5, 3), (8, 64), (16, 50)])
def test_data_free_mode_matches_data_mode(coll, alg, p, count):
    data = small_ints(p, count, np.int32)
    full = sc.simulate(reference_network(p), coll, algorithm=alg, data=data)
    free = sc.simulate(reference_network(p), coll, algorithm=alg, nbytes=4 * count,
                       dtype=np.int32)
    assert full.correct and free.correct is None
    assert free.time == full.time
    np.testing.assert_array_equal(free.bytes_sent, full.bytes_sent)
    np.testing.assert_array_equal(free.bytes_received, full.bytes_received)
    assert free.messages == full.messages


@pytest.mark.parametrize("coll,alg,messages", [
    ("all_reduce", "direct", 2 * 5 * 4), ("reduce_scatter", "direct", 5 * 4),
    ("all_gather", "direct", 5 * 4), ("all_to_all", "direct", 5 * 4),
    ("reduce_scatter", "pairwise", 5 * 4), ("all_to_all", "pairwise", 5 * 4),
    ("all_gather", "bruck", 5 * 3), ("all_to_all", "bruck", 5 * 3)])
def test_message_counts(coll, alg, messages):
    res = sc.simulate(reference_network(5), coll, algorithm=alg, nbytes=4000)
    assert res.messages == messages


def test_hand_computed_times_on_four_ranks():
    n = 4000
    m = n / 4
    cases = {
        ("all_reduce", "direct"): 2 * ALPHA + 2 * 3 * m * BETA + 3 * m * GAMMA,
        ("reduce_scatter", "direct"): ALPHA + 3 * m * (BETA + GAMMA),
        ("all_gather", "direct"): ALPHA + 3 * n * BETA,
        ("all_to_all", "direct"): ALPHA + 3 * m * BETA,
        ("reduce_scatter", "pairwise"): 3 * (ALPHA + m * BETA + m * GAMMA),
        ("all_to_all", "pairwise"): 3 * (ALPHA + m * BETA),
        ("all_gather", "bruck"): 2 * ALPHA + (1 + 2) * n * BETA,
        # slots with bit 1 set: {1, 3}; with bit 2 set: {2, 3}
        ("all_to_all", "bruck"): 2 * ALPHA + (2 + 2) * m * BETA,
    }
    for (coll, alg), seconds in cases.items():
        res = sc.simulate(reference_network(4), coll, algorithm=alg, nbytes=n)
        assert res.time == pytest.approx(seconds, rel=1e-9), (coll, alg)


def test_uneven_direct_reduce_scatter_waits_for_the_largest_block():
    # 10 int8 elements on 4 ranks: blocks of 3, 3, 2, 2 bytes; ranks 0 and 1 finish last.
    res = sc.simulate(reference_network(4), "reduce_scatter", algorithm="direct",
                      nbytes=10, dtype=np.int8)
    assert res.time == pytest.approx(ALPHA + 3 * 3 * (BETA + GAMMA), rel=1e-9)
    assert res.rank_times[2] == pytest.approx(ALPHA + 3 * 2 * (BETA + GAMMA), rel=1e-9)


def test_bruck_all_to_all_traffic_by_hand_for_uneven_blocks():
    # p = 4, 5 int8 elements: blocks of 2, 1, 1, 1 bytes. Step 1 forwards slots 1 and 3
    # (bound for t+1 and t+3), step 2 slots 2 and 3 (both bound for t+2).
    model = cost.traffic("all_to_all", "bruck", p=4, nbytes=5, itemsize=1)
    np.testing.assert_array_equal(model.sent, [4, 5, 6, 5])
    np.testing.assert_array_equal(model.received, [7, 4, 5, 4])
    res = sc.simulate(reference_network(4), "all_to_all", algorithm="bruck", nbytes=5,
                      dtype=np.int8)
    np.testing.assert_array_equal(res.bytes_sent, [4, 5, 6, 5])


@pytest.mark.parametrize("p,steps", [(2, [1]), (3, [1, 2]), (5, [1, 2, 4]),
                                     (8, [1, 2, 4]), (16, [1, 2, 4, 8])])
def test_bruck_slot_counts(p, steps):
    dists = [1 << k for k in range(int(np.ceil(np.log2(p))))]
    assert dists == steps
    for d in dists:
        assert slots_with_bit(p, d) == sum(1 for i in range(p) if i & d)


def test_every_pair_has_an_algorithm_and_a_cost_model():
    for pair in PAIRS:
        assert pair in algorithms(pair[0])
        assert pair in cost.models()


@pytest.mark.parametrize("p", [2, 3, 6, 13, 16])
@pytest.mark.parametrize("count", [0, 1, 5, 3 * 16 + 2, 1000])
def test_bruck_all_to_all_without_data_moves_what_it_moves_with_data(p, count):
    """Data-free, the blocks' counts are kept in one array (their blocks one by one cost
    O(p) Python operations a step); with data each block is cut and joined: both send
    the same messages at the same times."""
    topo = sc.topology.ring(p)
    data = [np.arange(count, dtype=np.float32) + 1000 * r for r in range(p)]
    real = sc.simulate(topo, "all_to_all", algorithm="bruck", data=data)
    free = sc.simulate(topo, "all_to_all", algorithm="bruck", nbytes=4 * count)
    assert real.correct
    assert free.time == real.time and free.messages == real.messages
    assert list(free.bytes_sent) == list(real.bytes_sent)
    assert list(free.bytes_received) == list(real.bytes_received)
    assert free.link_bytes == real.link_bytes
    assert list(free.rank_times) == list(real.rank_times)


def test_a_data_free_bruck_all_to_all_takes_the_count_path(monkeypatch):
    calls = []
    counts = bruck._bruck_all_to_all_counts

    def spy(comm, x):
        calls.append(comm.rank)
        return (yield from counts(comm, x))

    monkeypatch.setattr(bruck, "_bruck_all_to_all_counts", spy)
    sc.simulate(sc.topology.switch(6), "all_to_all", algorithm="bruck", nbytes=6 * 40)
    assert sorted(calls) == list(range(6))
