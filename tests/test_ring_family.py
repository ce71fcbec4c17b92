"""Ring all_reduce / reduce_scatter / all_gather (with ``chunks=``), and the cost models of
the ring, naive and parameter-server algorithms, against numpy, hand values and simulation.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, make_data, reference_network

import simcoll as sc
from simcoll import cost
from simcoll.testing import alpha_beta_network

RANKS = [1, 2, 3, 4, 5, 8, 16]
RING = ["all_reduce", "reduce_scatter", "all_gather"]


def counts(p: int) -> list[int]:
    """Element counts: divisible by p (and by 2p, 3p), not divisible, fewer than p."""
    return sorted({0, 1, max(p - 1, 1), 6 * p * 5, 6 * p * 5 + 3})


def numpy_result(coll: str, data: list[np.ndarray], op: sc.ReduceOp) -> list[np.ndarray]:
    p = len(data)
    if coll == "all_gather":
        return [np.concatenate(data)] * p
    total = data[0].astype(np.float64 if data[0].dtype.kind == "f" else data[0].dtype)
    for x in data[1:]:
        total = op.ufunc(total, x)
    if op is sc.ReduceOp.AVG:
        total = total / p
    return [total] * p if coll == "all_reduce" else np.array_split(total, p)


def run(coll: str, topo, **kw) -> sc.Result:
    if coll == "all_gather":
        kw.pop("op", None)
    return sc.simulate(topo, coll, algorithm="ring", **kw)


def assert_traffic_is_model(coll: str, res: sc.Result, p: int, nbytes: int, itemsize: int,
                            algorithm: str = "ring", **params) -> None:
    t = cost.traffic(coll, algorithm, p=p, nbytes=nbytes, itemsize=itemsize, **params)
    np.testing.assert_array_equal(res.bytes_sent, t.sent)
    np.testing.assert_array_equal(res.bytes_received, t.received)
    if t.host_sent.size:
        np.testing.assert_array_equal(res.host_bytes_sent, t.host_sent)
        np.testing.assert_array_equal(res.host_bytes_received, t.host_received)


# -- ring: correctness and traffic ---------------------------------------------------------

@pytest.mark.parametrize("coll", RING)
@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("chunks", [1, 2, 3])
def test_ring_is_correct_with_exact_traffic_in_both_modes(coll, p, chunks):
    topo = reference_network(p)
    for count in counts(p):
        data = make_data(p, count, np.float32)
        if chunks > max(count, 1):
            with pytest.raises(sc.InvalidInputError, match=rf"chunks={chunks} is more than "
                                                           rf"the {count} elements"):
                run(coll, topo, data=data, chunks=chunks)
            continue
        kept = [x.copy() for x in data]
        res = run(coll, topo, data=data, chunks=chunks)
        assert res.correct, (count, res.max_error)
        for out, want in zip(res.outputs, numpy_result(coll, data, sc.ReduceOp.SUM),
                             strict=True):
            assert out.shape == want.shape
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-3)
        for x, y in zip(data, kept):
            np.testing.assert_array_equal(x, y)
        assert_traffic_is_model(coll, res, p, 4 * count, 4, chunks=chunks)
        free = run(coll, topo, nbytes=4 * count, chunks=chunks)
        assert free.time == res.time
        np.testing.assert_array_equal(free.bytes_sent, res.bytes_sent)
        assert free.messages == res.messages == (2 if coll == "all_reduce" else 1) * (
            p * (p - 1) * chunks)


@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("op", list(sc.ReduceOp))
def test_ring_reduces_every_dtype_and_op(coll, dtype, op):
    p, count = 5, 23
    data = make_data(p, count, dtype, op, seed=3)
    res = run(coll, reference_network(p), data=data, op=op, chunks=2)
    assert res.correct
    if np.dtype(dtype).kind != "f" and op is not sc.ReduceOp.AVG:
        for out, want in zip(res.outputs, numpy_result(coll, data, op), strict=True):
            np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float64, np.int16])
def test_ring_all_gather_moves_every_dtype_exactly(dtype):
    data = make_data(4, 7, dtype)
    res = run("all_gather", reference_network(4), data=data, chunks=3)
    assert res.correct
    for out in res.outputs:
        np.testing.assert_array_equal(out, np.concatenate(data))


def test_reduce_scatter_leaves_each_rank_its_own_block():
    p = 4
    data = [np.arange(10, dtype=np.int64) * (r + 1) for r in range(p)]
    res = run("reduce_scatter", reference_network(p), data=data)
    blocks = np.array_split(np.arange(10) * 10, p)
    for r in range(p):
        np.testing.assert_array_equal(res.outputs[r], blocks[r])


@pytest.mark.parametrize("chunks", [0, -1, 1.5, True, "2"])
def test_ring_refuses_bad_chunks_before_running(chunks):
    with pytest.raises(sc.InvalidInputError, match=rf"chunks={chunks!r}.*integer >= 1"):
        sc.simulate(reference_network(2), "all_reduce", algorithm="ring", nbytes=64,
                    chunks=chunks)


# -- ring: time ------------------------------------------------------------------------

def network(p: int, gamma: float) -> sc.Topology:
    return sc.topology.switch(p, bandwidth=1 / BETA, latency=ALPHA / 2,
                              reduce_bandwidth=1 / gamma)


# gamma regimes: reductions much cheaper than, close to, and dearer than a piece message.
GAMMAS = [GAMMA, BETA * 1.1, BETA * 8]


@pytest.mark.parametrize("coll", RING)
@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
@pytest.mark.parametrize("gamma", GAMMAS)
def test_ring_time_equals_the_model_where_exact(coll, p, chunks, gamma):
    for nbytes in [4 * p * chunks * 7, 4 * p * chunks * 20_000]:
        assert cost.is_exact(coll, "ring", p=p, nbytes=nbytes, chunks=chunks)
        res = run(coll, network(p, gamma), nbytes=nbytes, chunks=chunks)
        want = cost.predict(coll, "ring", p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                            gamma=gamma, chunks=chunks)
        assert res.time == pytest.approx(want, rel=1e-9, abs=0)
        bound = cost.lower_bound(coll, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                                 gamma=gamma).total
        assert res.time >= bound * (1 - 1e-12)


@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter"])
@pytest.mark.parametrize("p", [2, 3, 8])
def test_ring_time_is_an_estimate_for_uneven_pieces(coll, p):
    nbytes = 4 * (6 * p + 1)
    assert not cost.is_exact(coll, "ring", p=p, nbytes=nbytes, chunks=2)
    res = run(coll, reference_network(p), nbytes=nbytes, chunks=2)
    want = cost.predict(coll, "ring", p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                        gamma=GAMMA, chunks=2)
    assert res.time == pytest.approx(want, rel=0.05)
    assert res.time >= cost.lower_bound(coll, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                                        gamma=GAMMA).total


def test_an_uneven_ring_costs_its_largest_block():
    """The models took n/p for a block. One uint8 element on 16 ranks, without latency:
    the one block that holds it crosses 15 links (reduced on each) in the reduce-scatter
    and 15 more in the all-gather, (p-1) m (beta + gamma) and (p-1) m beta with m = 1 B,
    where n/p said 1/16 B. With chunks=2 on 5 ranks and 7 float32 elements (blocks of
    2, 2, 1, 1, 1 elements), a piece is half the largest block, 4 B: the all-reduce's link
    is never idle, 2 N c with N = (p-1) K = 8 and c = alpha + 4 beta (as 2 N c >=
    (N - K + 2) c + N 4 gamma), and the reduce-scatter's reductions hide too:
    c + g + (N - 1) c with g = 4 gamma."""
    a, b, g = 1e-6, 1e-9, 4e-9
    for coll, p, count, dtype, chunks, alpha, hand in [
            ("all_reduce", 16, 1, "uint8", 1, 0.0, 30 * b + 15 * g),
            ("reduce_scatter", 16, 1, "uint8", 1, 0.0, 15 * (b + g)),
            ("all_reduce", 5, 7, "float32", 2, a, 16 * (a + 4 * b)),
            ("reduce_scatter", 5, 7, "float32", 2, a, 8 * (a + 4 * b) + 4 * g)]:
        itemsize = np.dtype(dtype).itemsize
        res = sc.simulate(alpha_beta_network(p, alpha=alpha, beta=b, gamma=g), coll,
                          algorithm="ring", nbytes=count * itemsize, dtype=dtype,
                          chunks=chunks)
        assert res.time == pytest.approx(hand, rel=1e-3), coll
        assert cost.predict(coll, "ring", p=p, nbytes=count * itemsize, alpha=alpha,
                            beta=b, gamma=g, chunks=chunks,
                            itemsize=itemsize) == pytest.approx(hand, rel=1e-12), coll


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_unpipelined_ring_all_reduce_has_the_textbook_time(p):
    n = 4 * p * 1000
    res = run("all_reduce", reference_network(p), nbytes=n)
    want = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA + (p - 1) / p * n * GAMMA
    assert res.time == pytest.approx(want, rel=1e-9, abs=0)


def test_pipelining_hides_cheap_reductions():
    # p = 4, K = 4, n = 64 KiB: piece 4 KiB, c = 1 us + 40.96 ns > g = 10.24 ns, so the
    # link never idles: 2 (p-1) K alpha + 2 (p-1)/p n beta, no gamma term at all.
    p, k, n = 4, 4, 64 << 10
    res = run("all_reduce", reference_network(p), nbytes=n, chunks=k)
    assert res.time == pytest.approx(2 * 3 * 4 * ALPHA + 2 * 3 / 4 * n * BETA, rel=1e-9)


def test_pipelining_is_bound_by_dear_reductions():
    # p = 2, K = 2, reductions 8x dearer than bytes on the wire: piece 1 arrives at c; the
    # two piece reductions follow back to back (2 g); the second reduced piece then
    # travels (c). Total 2 c + 2 g with c = alpha + n beta / 4 < g = 8 n beta / 4.
    n = 1 << 20
    res = run("all_reduce", network(2, 8 * BETA), nbytes=n, chunks=2)
    c, g = ALPHA + n / 4 * BETA, 8 * n / 4 * BETA
    assert res.time == pytest.approx(2 * c + 2 * g, rel=1e-9)


def test_ring_all_gather_time_by_hand():
    p, n = 5, 4000
    res = run("all_gather", reference_network(p), nbytes=n, chunks=2)
    assert res.time == pytest.approx(4 * 2 * ALPHA + 4 * n * BETA, rel=1e-9)


def test_ring_traffic_by_hand_for_uneven_blocks():
    # 10 float32 on 4 ranks: blocks of 3, 3, 2, 2 elements (12, 12, 8, 8 bytes).
    t = cost.traffic("all_reduce", "ring", p=4, nbytes=40, itemsize=4)
    assert list(t.sent) == [80 - 12 - 8, 80 - 8 - 8, 80 - 8 - 12, 80 - 12 - 12]
    assert list(t.received) == [80 - 12 - 12, 80 - 12 - 8, 80 - 8 - 8, 80 - 8 - 12]
    rs = cost.traffic("reduce_scatter", "ring", p=4, nbytes=40, itemsize=4)
    assert list(rs.sent) == [28, 28, 32, 32]
    assert list(rs.received) == [32, 28, 28, 32]


# -- naive and parameter-server models -------------------------------------------------

@pytest.mark.parametrize("p", RANKS)
def test_naive_model_matches_simulation(p):
    for count in counts(p):
        res = sc.simulate(reference_network(p), "all_reduce", algorithm="naive",
                          data=make_data(p, count, np.float64))
        assert res.correct
        assert_traffic_is_model("all_reduce", res, p, 8 * count, 8, algorithm="naive")
        want = cost.predict("all_reduce", "naive", p=p, nbytes=8 * count, alpha=ALPHA,
                            beta=BETA, gamma=GAMMA)
        assert res.time == pytest.approx(want, rel=1e-9, abs=0)


def ps_cases(p: int) -> list[tuple[int, int | None]]:
    """(hosts, servers): co-located with k = 1..p, and 1, 2, 3 hosts with k = all or 1."""
    return ([(0, None)] + [(0, k) for k in range(1, p + 1)]
            + [(h, k) for h in (1, 2, 3) for k in (None, 1)])


@pytest.mark.parametrize("p", RANKS)
def test_parameter_server_model_matches_simulation(p):
    for hosts, servers in ps_cases(p):
        params = {} if servers is None else {"servers": servers}
        for count in counts(p) + [12 * 1000 + 1]:
            nbytes = 4 * count
            res = sc.simulate(reference_network(p, hosts), "all_reduce",
                              algorithm="parameter_server", nbytes=nbytes, **params)
            assert_traffic_is_model("all_reduce", res, p, nbytes, 4,
                                    algorithm="parameter_server", hosts=hosts, **params)
            if hosts:
                k = hosts if servers is None else servers
                assert list(res.host_bytes_received[k:]) == [0] * (hosts - k)
            assert res.time >= cost.lower_bound("all_reduce", p=p, nbytes=nbytes,
                                                alpha=ALPHA, beta=BETA, gamma=GAMMA,
                                                hosts=hosts).total * (1 - 1e-12)
            want = cost.predict("all_reduce", "parameter_server", p=p, nbytes=nbytes,
                                alpha=ALPHA, beta=BETA, gamma=GAMMA, hosts=hosts, **params)
            if cost.is_exact("all_reduce", "parameter_server", p=p, nbytes=nbytes,
                             hosts=hosts, **params):
                assert res.time == pytest.approx(want, rel=1e-9, abs=0), (hosts, servers)
            else:
                assert res.time == pytest.approx(want, rel=0.05), (hosts, servers, count)


def test_parameter_server_with_more_hosts_than_workers_by_hand():
    # p = 2 workers, k = 4 hosts, shards of s = n / 4: each worker link carries 4 shards
    # (the bottleneck) each way: 2 alpha + 2 * 4 s beta + (p-1) s gamma.
    n = 4 * 4000
    s = n / 4
    res = sc.simulate(reference_network(2, 4), "all_reduce", algorithm="parameter_server",
                      nbytes=n)
    assert res.time == pytest.approx(2 * ALPHA + 8 * s * BETA + s * GAMMA, rel=1e-9)


def test_colocated_parameter_server_traffic_by_hand():
    # p = 3, k = 2 servers (ranks 0 and 1), 10 float32: shards of 5 elements (20 bytes).
    t = cost.traffic("all_reduce", "parameter_server", p=3, nbytes=40, itemsize=4,
                     servers=2)
    assert list(t.sent) == [40 + 20, 40 + 20, 40]
    assert list(t.received) == [60, 60, 40]
    assert t.host_sent.size == 0
