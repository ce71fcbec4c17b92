"""The three founding all_reduce algorithms: result, traffic and time, checked together."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, NO_FORMULA, make_data, reference_network

import simcoll as sc

ALGORITHMS = ["ring", "naive", "parameter_server"]
RANKS = [1, 2, 3, 4, 5, 8, 16]
DTYPES = ["float16", "float32", "float64", "int32", "int64"]
OPS = list(sc.ReduceOp)


def counts_for(p: int) -> list[int]:
    """Element counts that divide by p, that do not, and fewer elements than ranks."""
    return sorted({8 * p, 8 * p + 3, max(p - 1, 1)})


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_result_matches_numpy_and_inputs_stay_unchanged(algorithm, p, dtype, op):
    topo = sc.topology.switch(p)
    for count in counts_for(p):
        data = make_data(p, count, dtype, op)
        before = [x.copy() for x in data]
        res = sc.simulate(topo, "all_reduce", algorithm=algorithm, data=data, op=op)
        assert res.correct, (count, res.max_error)
        for x, y in zip(data, before):
            np.testing.assert_array_equal(x, y)
        # Independent check against numpy (float64 sums for floats).
        stack = np.stack([x.astype(np.float64) for x in data])
        if dtype.startswith("float") and op in (sc.ReduceOp.SUM, sc.ReduceOp.AVG):
            expected = stack.sum(axis=0) / (p if op is sc.ReduceOp.AVG else 1)
            scale = np.abs(stack).sum(axis=0) / (p if op is sc.ReduceOp.AVG else 1)
            tol = 2 * p * np.finfo(dtype).eps * scale + np.finfo(dtype).tiny
            for out in res.outputs:
                assert np.all(np.abs(out.astype(np.float64) - expected) <= tol)
        elif op in (sc.ReduceOp.MIN, sc.ReduceOp.MAX):
            expected = (stack.min if op is sc.ReduceOp.MIN else stack.max)(axis=0)
            for out in res.outputs:
                np.testing.assert_array_equal(out.astype(np.float64), expected)


def test_a_wrong_result_is_reported_as_incorrect():
    @sc.register("all_reduce", "test_off_by_one", cost=NO_FORMULA)
    def off_by_one(comm, x, *, op=sc.ReduceOp.SUM):
        out = yield from sc.get_algorithm("all_reduce", "ring").program(comm, x, op=op)
        if comm.rank == 1:
            out = out + 1
        return out

    data = make_data(4, 16, "float32")
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="test_off_by_one",
                      data=data)
    assert res.correct is False
    assert res.max_error == pytest.approx(1.0, rel=1e-3)


def ring_sent(p: int, count: int, itemsize: int) -> np.ndarray:
    """Bytes each rank sends in ring all_reduce, from the chunk schedule by hand."""
    sizes = [len(c) for c in np.array_split(np.arange(count), p)]
    sent = []
    for r in range(p):
        rs = sum(sizes[(r - s) % p] for s in range(p - 1))
        ag = sum(sizes[(r - s + 1) % p] for s in range(p - 1))
        sent.append((rs + ag) * itemsize)
    return np.array(sent)


@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("count", [1 << 12, 1000, 3])
def test_ring_traffic(p, count):
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring", nbytes=4 * count)
    np.testing.assert_array_equal(res.bytes_sent, ring_sent(p, count, 4))
    np.testing.assert_array_equal(res.bytes_received, ring_sent(p, count, 4)[
        [(r - 1) % p for r in range(p)]])
    if count % p == 0:
        assert all(res.bytes_sent == 2 * (p - 1) * 4 * count // p)
    assert res.messages == 2 * (p - 1) * p


@pytest.mark.parametrize("p", RANKS)
def test_naive_traffic(p):
    m = 4 * 1000
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="naive", nbytes=m)
    assert list(res.bytes_sent) == [(p - 1) * m] * p
    assert list(res.bytes_received) == [(p - 1) * m] * p
    assert res.messages == p * (p - 1)


@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("servers", [1, 2, 3])
def test_parameter_server_traffic_with_server_hosts(p, servers):
    m = 4 * 999
    topo = sc.topology.switch(p, servers=servers)
    res = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=m)
    assert list(res.bytes_sent) == [m] * p
    assert list(res.bytes_received) == [m] * p
    assert res.host_bytes_received.sum() == p * m
    assert res.host_bytes_sent.sum() == p * m
    shard_bytes = [4 * len(s) for s in np.array_split(np.arange(m // 4), servers)]
    assert list(res.host_bytes_received) == [p * s for s in shard_bytes]


@pytest.mark.parametrize("p", [2, 3, 8])
def test_parameter_server_traffic_on_rank_zero(p):
    m = 4 * 1000
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="parameter_server",
                      nbytes=m)
    assert list(res.bytes_sent) == [(p - 1) * m] + [m] * (p - 1)
    assert list(res.bytes_received) == [(p - 1) * m] + [m] * (p - 1)


def rel(a: float, b: float) -> float:
    return abs(a - b) / b


@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("count_per_rank", [1 << 22, 1 << 10])
def test_ring_time_on_the_alpha_beta_network(p, count_per_rank):
    m = 4 * p * count_per_rank
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=m)
    expected = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * m * BETA + (p - 1) / p * m * GAMMA
    if p == 1:
        assert res.time == 0
    else:
        assert rel(res.time, expected) < 1e-9


@pytest.mark.parametrize("p", RANKS[1:])
def test_naive_time_on_the_alpha_beta_network(p):
    m = 16 << 20
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="naive", nbytes=m)
    expected = ALPHA + (p - 1) * m * BETA + (p - 1) * m * GAMMA
    assert rel(res.time, expected) < 1e-9


@pytest.mark.parametrize("p", RANKS[1:])
def test_parameter_server_time_on_rank_zero(p):
    m = 16 << 20
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="parameter_server",
                      nbytes=m)
    expected = 2 * ALPHA + 2 * (p - 1) * m * BETA + (p - 1) * m * GAMMA
    assert rel(res.time, expected) < 1e-9


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("servers", [1, 2, 4])
def test_parameter_server_time_with_server_hosts(p, servers):
    m = 4 * servers * (1 << 20)
    s = m / servers
    res = sc.simulate(reference_network(p, servers), "all_reduce",
                      algorithm="parameter_server", nbytes=m)
    # The busier of a server's link (p pushes) and a worker's link (k pushes) sets the pace.
    expected = 2 * ALPHA + 2 * max(p, servers) * s * BETA + (p - 1) * s * GAMMA
    assert rel(res.time, expected) < 1e-9


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("p", [3, 8])
@pytest.mark.parametrize("network", ["flow", "analytical"])
def test_data_free_mode_matches_data_mode(algorithm, p, network):
    count = 1003
    data = make_data(p, count, "float32")
    topo = reference_network(p, servers=1) if algorithm == "parameter_server" else \
        reference_network(p)
    a = sc.simulate(topo, "all_reduce", algorithm=algorithm, data=data, network=network)
    b = sc.simulate(topo, "all_reduce", algorithm=algorithm, nbytes=4 * count,
                    network=network)
    assert a.correct and b.correct is None and b.outputs is None
    assert a.time == b.time
    np.testing.assert_array_equal(a.bytes_sent, b.bytes_sent)
    np.testing.assert_array_equal(a.bytes_received, b.bytes_received)
    assert a.link_bytes == b.link_bytes and a.messages == b.messages


def test_busbw_and_algbw_follow_nccl_tests():
    p, m = 8, 64 << 20
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=m)
    assert res.algbw == pytest.approx(m / res.time)
    assert res.busbw == pytest.approx(m / res.time * 2 * (p - 1) / p)


def test_link_bytes_on_a_switch():
    p, m = 4, 4000
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="naive", nbytes=m)
    for r in range(p):
        assert res.link_bytes[(f"gpu{r}", "switch")] == (p - 1) * m
        assert res.link_bytes[("switch", f"gpu{r}")] == (p - 1) * m


@pytest.mark.parametrize("wrong, got", [
    ("short", "a float32 array of shape (299999,)"), ("none", "None"),
    ("dtype", "a float64 array of shape (300000,)"), ("free", "299999 float32 elements"),
    # the right size, but 2-D, or data-free of another dtype
    ("2d", "a float32 array of shape (2, 150000)"),
    ("free_dtype", "300000 float64 elements")])
def test_outputs_of_the_wrong_shape_or_type_are_refused_naming_the_rank(wrong, got):
    """A rank that returns something other than its output (a buffer of the collective's
    count and dtype) ran wrong whatever its values: the run read correct=False with an
    infinite error in data mode, and passed unseen without data. It is an AlgorithmError
    naming the rank, what it returned and what was expected, in both modes."""
    name = f"test_wrong_output_{wrong}"

    @sc.register("all_reduce", name, cost=NO_FORMULA)
    def bad_output(comm, x, *, op=sc.ReduceOp.SUM):
        out = yield from sc.get_algorithm("all_reduce", "ring").program(comm, x, op=op)
        if comm.rank == 2:
            out = {"short": lambda: out[:-1], "none": lambda: None,
                   "dtype": lambda: out.astype(np.float64),
                   "free": lambda: out[:-1], "2d": lambda: out.reshape(2, -1),
                   "free_dtype": lambda: sc.VirtualBuffer.of(out.count, np.float64)}[wrong]()
        return out

    expected = (rf"rank 2 in all_reduce/{name} returned {re.escape(got)}; its output is "
                rf"300000 float32 elements")
    with pytest.raises(sc.AlgorithmError, match=expected):
        if wrong.startswith("free"):
            sc.simulate(sc.topology.switch(4), "all_reduce", algorithm=name,
                        nbytes=4 * 300_000)
        else:
            sc.simulate(sc.topology.switch(4), "all_reduce", algorithm=name,
                        data=make_data(4, 300_000, "float32"))


def test_outputs_are_writeable_and_independent_of_inputs_and_each_other():
    data = make_data(3, 10, "float32")
    res = sc.simulate(sc.topology.switch(3), "broadcast", algorithm="binomial", data=data,
                      root=1)
    assert res.correct
    res.outputs[0][:] = 0
    res.outputs[1][:] = 1
    np.testing.assert_array_equal(res.outputs[2], data[1])
    assert not np.shares_memory(res.outputs[1], data[1])


@pytest.mark.parametrize("p", [3, 4, 5])
def test_naive_gives_every_rank_the_rank_order_sum_bit_for_bit(p):
    # (x0 + x1) + x2 ... in float64 where the order matters: 1e16 + 1 rounds back to
    # 1e16. Rank 2 summed x1 + (x0 + x2) = 1 while the others got 0, and the check's
    # rounding bound took both.
    data = [np.array([1e16]), np.array([1.0]), np.array([-1e16])]
    data += [np.array([0.5 * k]) for k in range(3, p)]
    expected = data[0].copy()
    for x in data[1:]:
        expected = expected + x
    res = sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="naive", data=data)
    for out in res.outputs:
        assert out.tobytes() == expected.tobytes()
