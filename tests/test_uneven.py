"""The v-collectives (all_gatherv, reduce_scatterv, all_to_allv): results against the tests'
own reference, traffic against byte formulas written here, time against hand-worked values
and the cost models where they are exact, equal splits against the even collectives, and
the time invariant on random machines. Bad input: tests/test_uneven_inputs.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, V_COLLECTIVES, make_data, reference_network
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machines import KINDS, last_activity, random_machine
from reference import assert_outputs_match

import simcoll as sc
from simcoll import cost
from simcoll.network import NETWORKS
from simcoll.network.flow import FlowNetwork

V_PAIRS = [pair for pair in sc.list_algorithms() if pair[0] in V_COLLECTIVES]
RANKS = [1, 2, 3, 5, 8, 9]
EVEN = {("all_to_allv", "direct"): ("all_to_all", "direct"),
        ("all_to_allv", "pairwise"): ("all_to_all", "pairwise"),
        ("all_gatherv", "ring"): ("all_gather", "ring"),
        ("all_gatherv", "direct"): ("all_gather", "direct"),
        ("reduce_scatterv", "ring"): ("reduce_scatter", "ring"),
        ("reduce_scatterv", "direct"): ("reduce_scatter", "direct")}


def ids(pair):
    return "/".join(pair)


def random_splits(coll: str, p: int, rng: np.random.Generator, high: int = 9):
    """Random sizes in elements with zeros among them: p counts, or a p x p matrix."""
    shape = (p, p) if coll == "all_to_allv" else (p,)
    sizes = rng.integers(0, high, shape)
    sizes[rng.random(shape) < 0.3] = 0
    return sizes.tolist()


def inputs_for(coll: str, splits, dtype, op=sc.ReduceOp.SUM, seed: int = 0):
    """One array per rank of the length the splits give it (values from make_data)."""
    p = len(splits)
    if coll == "all_gatherv":
        lengths = list(splits)
    elif coll == "reduce_scatterv":
        lengths = [sum(splits)] * p
    else:
        lengths = [sum(row) for row in splits]
    pool = make_data(p, max(lengths), dtype, op, seed)
    return [x[:n].copy() for x, n in zip(pool, lengths)]


def byte_sizes(splits, itemsize):
    return (np.array(splits, dtype=np.int64) * itemsize).tolist()


def expected_traffic(pair, splits, itemsize):
    """Bytes each rank sends and receives, from the sizes by plain loops (no numpy)."""
    coll, alg = pair
    p = len(splits)
    if coll == "all_to_allv":
        sent = [sum(splits[i][j] for j in range(p) if j != i) for i in range(p)]
        received = [sum(splits[i][j] for i in range(p) if i != j) for j in range(p)]
    else:
        c, total = list(splits), sum(splits)
        if pair == ("all_gatherv", "ring"):
            sent = [total - c[(r + 1) % p] for r in range(p)]
            received = [total - c[r] for r in range(p)]
        elif pair == ("all_gatherv", "direct"):
            sent = [(p - 1) * c[r] for r in range(p)]
            received = [total - c[r] for r in range(p)]
        elif pair == ("reduce_scatterv", "ring"):
            sent = [total - c[r] for r in range(p)]
            received = [total - c[(r - 1) % p] for r in range(p)]
        else:
            sent = [total - c[r] for r in range(p)]
            received = [(p - 1) * c[r] for r in range(p)]
    return [s * itemsize for s in sent], [r * itemsize for r in received]


def expected_messages(coll, splits):
    """No message of zero bytes: a matrix's nonzero pairs, or p - 1 per nonzero block."""
    p = len(splits)
    if coll == "all_to_allv":
        return sum(1 for i in range(p) for j in range(p) if i != j and splits[i][j])
    return (p - 1) * sum(1 for c in splits if c)


@pytest.mark.parametrize("pair", V_PAIRS, ids=ids)
@pytest.mark.parametrize("p", RANKS)
def test_results_match_the_reference_for_random_splits(pair, p):
    coll, alg = pair
    rng = np.random.default_rng(p)
    ops = [sc.ReduceOp.SUM, sc.ReduceOp.MAX, sc.ReduceOp.AVG, sc.ReduceOp.PRODUCT] \
        if coll == "reduce_scatterv" else [None]
    for trial in range(3):
        splits = random_splits(coll, p, rng)
        for dtype in ("float32", "int64", "int8", "float64"):
            for op in ops:
                data = inputs_for(coll, splits, dtype, op or sc.ReduceOp.SUM, seed=trial)
                before = [x.copy() for x in data]
                kwargs = {"op": op} if op else {}
                res = sc.simulate(reference_network(p), coll, algorithm=alg, data=data,
                                  splits=splits, **kwargs)
                assert res.correct, (splits, dtype, op, res.max_error)
                assert_outputs_match(res, data, op or sc.ReduceOp.SUM)
                for x, y in zip(data, before):
                    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("pair", V_PAIRS, ids=ids)
def test_splits_reach_the_result_and_outputs_are_independent(pair):
    coll, alg = pair
    splits = [[0, 3, 1], [2, 0, 0], [4, 4, 1]] if coll == "all_to_allv" else [3, 0, 5]
    data = inputs_for(coll, splits, "int32")
    extra = {} if coll == "all_gatherv" else {"splits": splits}
    res = sc.simulate(reference_network(3), coll, algorithm=alg, data=data, **extra)
    assert res.correct and res.splits == tuple(
        tuple(r) if isinstance(r, list) else r for r in splits)
    for out in res.outputs:
        assert out.flags.writeable and out.base is None
    res.outputs[0][...] = 0  # an output shares memory with no input
    np.testing.assert_array_equal(data[0], inputs_for(coll, splits, "int32")[0])


@pytest.mark.parametrize("pair", V_PAIRS, ids=ids)
def test_nothing_to_move_takes_no_time_and_no_message(pair):
    coll, alg = pair
    p = 4
    zero = [[0] * p for _ in range(p)] if coll == "all_to_allv" else [0] * p
    res = sc.simulate(reference_network(p), coll, algorithm=alg, nbytes=zero)
    assert res.time == 0 and res.messages == 0 and not res.bytes_sent.any()
    assert cost.predict(coll, alg, p=p, nbytes=zero, alpha=ALPHA, beta=BETA) == 0.0
    # only the diagonal (what a rank keeps): still nothing moves
    if coll == "all_to_allv":
        keep = np.diag([4, 0, 8, 12]).tolist()
        data = inputs_for(coll, np.diag([1, 0, 2, 3]).tolist(), "float32")
        res = sc.simulate(reference_network(p), coll, algorithm=alg, data=data,
                          splits=np.diag([1, 0, 2, 3]))
        assert res.correct and res.time == 0 and res.messages == 0
        assert sc.simulate(reference_network(p), coll, algorithm=alg, nbytes=keep).time == 0


@pytest.mark.parametrize("pair", V_PAIRS, ids=ids)
@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_traffic_links_and_messages_follow_the_sizes(pair, p, dtype):
    coll, alg = pair
    itemsize = np.dtype(dtype).itemsize
    rng = np.random.default_rng(10 * p + itemsize)
    for _ in range(3):
        splits = random_splits(coll, p, rng, high=50)
        nbytes = byte_sizes(splits, itemsize)
        res = sc.simulate(reference_network(p), coll, algorithm=alg, nbytes=nbytes,
                          dtype=dtype)
        sent, received = expected_traffic(pair, splits, itemsize)
        assert res.bytes_sent.tolist() == sent and res.bytes_received.tolist() == received
        assert res.messages == expected_messages(coll, splits)
        for r in range(p):  # on a switch: up link carries what r sends, down what it gets
            assert res.link_bytes[(f"gpu{r}", "switch")] == sent[r]
            assert res.link_bytes[("switch", f"gpu{r}")] == received[r]
        model = cost.traffic(coll, alg, p=p, nbytes=nbytes, itemsize=itemsize)
        assert model.sent.tolist() == sent and model.received.tolist() == received
        assert model.host_sent.size == 0 and not res.host_bytes_sent.size


def ring_reference(blocks, offset, alpha, beta, gamma):
    """Finish time of every rank of a ring over uneven blocks, step by step in plain
    Python: a rank starts a step when its last one (reduction included) is done."""
    p = len(blocks)

    def d(m):
        return alpha + m * beta if m else 0.0

    done = [0.0] * p
    for step in range(p - 1):
        new = []
        for r in range(p):
            out = blocks[(r - step + offset) % p]
            got = blocks[(r - 1 - step + offset) % p]
            end = done[r] + d(out)
            if got:
                end = max(end, done[(r - 1) % p] + d(got))
            new.append(end + got * gamma)
        done = new
    return done


@pytest.mark.parametrize("pair", V_PAIRS, ids=ids)
@pytest.mark.parametrize("p", RANKS)
def test_time_equals_the_model_wherever_it_is_exact(pair, p):
    coll, alg = pair
    rng = np.random.default_rng(100 + p)
    for _ in range(4):
        nbytes = byte_sizes(random_splits(coll, p, rng, high=3000), 4)
        res = sc.simulate(reference_network(p), coll, algorithm=alg, nbytes=nbytes)
        predicted = cost.predict(coll, alg, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                                 gamma=GAMMA)
        bound = cost.lower_bound(coll, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                                 gamma=GAMMA)
        assert res.time >= bound.total * (1 - 1e-12)
        if cost.is_exact(coll, alg, p=p, nbytes=nbytes):
            assert res.time == pytest.approx(predicted, rel=1e-9, abs=1e-18)
        else:
            assert pair[0] == "all_to_allv"
        if alg == "ring":
            offset = 0 if coll == "all_gatherv" else -1
            gamma = 0.0 if coll == "all_gatherv" else GAMMA
            finish = ring_reference(nbytes, offset, ALPHA, BETA, gamma)
            np.testing.assert_allclose(res.rank_times, finish, rtol=1e-9, atol=1e-18)
        if pair == ("all_to_allv", "direct"):   # the busiest link, a lower bound
            assert res.time >= predicted * (1 - 1e-12)


def test_hand_worked_times_on_three_ranks():
    a0, a2 = 4000, 12000  # bytes of blocks 0 and 2; block 1 is empty
    net = reference_network(3)
    ring = sc.simulate(net, "all_gatherv", algorithm="ring", nbytes=[a0, 0, a2])
    # block 2 crosses two hops one after the other; block 0 too, but it is smaller
    assert ring.time == pytest.approx(2 * (ALPHA + a2 * BETA), rel=1e-12)
    direct = sc.simulate(net, "all_gatherv", algorithm="direct", nbytes=[a0, 0, a2])
    # rank 2's two copies share its link from start to end
    assert direct.time == pytest.approx(ALPHA + 2 * a2 * BETA, rel=1e-12)
    rs = sc.simulate(net, "reduce_scatterv", algorithm="direct", nbytes=[a0, 0, a2])
    assert rs.time == pytest.approx(ALPHA + 2 * a2 * (BETA + GAMMA), rel=1e-12)
    assert rs.rank_times[1] == 0.0  # an empty block: nothing to wait for
    # all_to_allv: rank 0 sends 8000 B to 1 and 4000 B to 2; rank 2 sends 4000 B to 1.
    # Rank 1's link carries 12000 B: three equal 4000 B shares would end together, but
    # 0 -> 1 is twice as long; max-min: 0->1 and 2->1 share gpu1 at 1/2 (0->2 also at 1/2
    # on gpu0), both 4000 B flows end at 8000 B-times, then 0->1 drains alone its last
    # 4000 B: alpha + 12000 beta.
    matrix = [[0, 8000, 4000], [0, 0, 0], [0, 4000, 0]]
    a2a = sc.simulate(net, "all_to_allv", algorithm="direct", nbytes=matrix)
    assert a2a.time == pytest.approx(ALPHA + 12000 * BETA, rel=1e-12)
    # pairwise: round 1 (r -> r+1): 0->1 8000 B; round 2 (r -> r+2): 0->2 and 2->1
    # 4000 B. Rank 2 has nothing in round 1, so its round-2 message to 1 starts at once and
    # shares gpu1's link with 0->1 (1/2 each): 0->1 ends at alpha + 12000 beta, and only
    # then does rank 0 send its 4000 B to 2: 2 alpha + 16000 beta. The model's lockstep
    # estimate, the rounds' largest messages one after the other, says 2 alpha + 12000 beta.
    pw = sc.simulate(net, "all_to_allv", algorithm="pairwise", nbytes=matrix)
    assert pw.time == pytest.approx(2 * ALPHA + 16000 * BETA, rel=1e-12)
    assert not cost.is_exact("all_to_allv", "pairwise", p=3, nbytes=matrix)
    assert cost.predict("all_to_allv", "pairwise", p=3, nbytes=matrix, alpha=ALPHA,
                        beta=BETA) == pytest.approx(2 * ALPHA + 12000 * BETA, rel=1e-12)


@pytest.mark.parametrize("pair", V_PAIRS, ids=ids)
@pytest.mark.parametrize("p", [1, 2, 4, 7])
def test_equal_splits_run_as_the_even_collective(pair, p):
    coll, alg = pair
    even_coll, even_alg = EVEN[pair]
    block = 4 * 256                         # bytes of each block
    net = reference_network(p)
    if coll == "all_to_allv":
        nbytes, n = [[block] * p for _ in range(p)], p * block
    elif coll == "all_gatherv":
        nbytes, n = [block] * p, block
    else:
        nbytes, n = [block] * p, p * block
    v = sc.simulate(net, coll, algorithm=alg, nbytes=nbytes)
    even = sc.simulate(net, even_coll, algorithm=even_alg, nbytes=n)
    assert v.time == pytest.approx(even.time, rel=1e-12, abs=1e-18)
    np.testing.assert_allclose(v.rank_times, even.rank_times, rtol=1e-12, atol=1e-18)
    assert v.bytes_sent.tolist() == even.bytes_sent.tolist()
    assert v.bytes_received.tolist() == even.bytes_received.tolist()
    assert v.link_bytes == even.link_bytes and v.messages == even.messages
    assert v.nbytes == even.nbytes == n
    assert v.algbw == pytest.approx(even.algbw, rel=1e-12)
    assert v.busbw == pytest.approx(even.busbw, rel=1e-12)
    assert cost.is_exact(coll, alg, p=p, nbytes=nbytes)
    assert cost.predict(coll, alg, p=p, nbytes=nbytes, alpha=ALPHA, beta=BETA,
                        gamma=GAMMA) == pytest.approx(
        cost.predict(even_coll, even_alg, p=p, nbytes=n, alpha=ALPHA, beta=BETA,
                     gamma=GAMMA), rel=1e-12)


@pytest.mark.parametrize("pair", V_PAIRS, ids=ids)
def test_data_free_and_data_mode_agree(pair):
    coll, alg = pair
    rng = np.random.default_rng(5)
    for p in (1, 3, 6):
        splits = random_splits(coll, p, rng, high=40)
        data = inputs_for(coll, splits, "float64")
        a = sc.simulate(reference_network(p), coll, algorithm=alg, data=data, splits=splits)
        b = sc.simulate(reference_network(p), coll, algorithm=alg,
                        nbytes=byte_sizes(splits, 8), dtype="float64")
        assert a.correct and b.correct is None and b.outputs is None
        assert a.time == b.time and a.messages == b.messages
        assert a.link_bytes == b.link_bytes
        np.testing.assert_array_equal(a.rank_times, b.rank_times)
        np.testing.assert_array_equal(a.bytes_sent, b.bytes_sent)
        np.testing.assert_array_equal(a.bytes_received, b.bytes_received)
        assert (a.nbytes, a.splits, a.algbw) == (b.nbytes, b.splits, b.algbw)


class GeneralOnly(FlowNetwork):
    """The flow model with every flow through the general solver (no shortcuts)."""

    name = "flow_general_v"
    fast = False


@pytest.fixture(autouse=True)
def general_network(monkeypatch):
    monkeypatch.setitem(NETWORKS, "flow_general_v", GeneralOnly)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 10**6),
       pair=st.sampled_from(V_PAIRS), sizes=st.integers(0, 10**6))
def test_time_is_the_last_activity_on_random_machines(kind, seed, pair, sizes):
    coll, alg = pair
    topo = random_machine(kind, seed)
    nbytes = byte_sizes(random_splits(coll, topo.nranks, np.random.default_rng(sizes),
                                      high=3000), 4)
    fast = sc.simulate(topo, coll, algorithm=alg, nbytes=nbytes, trace=True)
    general = sc.simulate(topo, coll, algorithm=alg, nbytes=nbytes, trace=True,
                          network="flow_general_v")
    assert fast.time == last_activity(fast)
    assert general.time == last_activity(general)
    np.testing.assert_allclose(fast.rank_times, general.rank_times, rtol=1e-9, atol=1e-18)
    np.testing.assert_array_equal(fast.bytes_sent, general.bytes_sent)
    assert fast.link_bytes == general.link_bytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 10**6),
       pair=st.sampled_from(V_PAIRS), sizes=st.integers(0, 10**6),
       dtype=st.sampled_from(["float32", "int16", "uint8", "float64"]),
       op=st.sampled_from(list(sc.ReduceOp)))
def test_results_do_not_depend_on_the_machine(kind, seed, pair, sizes, dtype, op):
    coll, alg = pair
    topo = random_machine(kind, seed)
    splits = random_splits(coll, topo.nranks, np.random.default_rng(sizes), high=30)
    data = inputs_for(coll, splits, dtype, op, seed=sizes)
    kwargs = {"op": op} if coll == "reduce_scatterv" else {}
    res = sc.simulate(topo, coll, algorithm=alg, data=data, splits=splits, **kwargs)
    assert res.correct, res.max_error
    assert_outputs_match(res, data, op if kwargs else sc.ReduceOp.SUM)


def moe_routing(p: int, tokens: int, hot: int | None, hot_tokens: int, hidden: int):
    """Tokens each rank routes to each expert (one per rank), times ``hidden`` elements:
    balanced (``hot`` None: tokens / p to every expert) or with every rank sending
    ``hot_tokens`` to expert ``hot`` and the rest evenly to the others."""
    if hot is None:
        return [[tokens // p * hidden] * p for _ in range(p)]
    rest = (tokens - hot_tokens) // (p - 1)
    assert hot_tokens + (p - 1) * rest == tokens
    return [[(hot_tokens if j == hot else rest) * hidden for j in range(p)]
            for _ in range(p)]


def test_moe_one_hot_expert_takes_longer_by_what_the_model_says():
    p, tokens, hidden, itemsize = 8, 512, 1024, 2    # float16 activations
    balanced = moe_routing(p, tokens, None, 0, hidden)
    skewed = moe_routing(p, tokens, 0, 176, hidden)  # 176 of 512 tokens to expert 0
    assert np.sum(balanced) == np.sum(skewed)        # same total bytes, same inputs
    assert [sum(r) for r in balanced] == [sum(r) for r in skewed]
    net = reference_network(p)
    even, hot = (sc.simulate(net, "all_to_allv", algorithm="direct", dtype="float16",
                             nbytes=(np.array(m) * itemsize).tolist())
                 for m in (balanced, skewed))
    # rank 0 receives 176 tokens from each of 7 peers, where balanced it gets 64
    extra = (p - 1) * (176 - 64) * hidden * itemsize * BETA
    assert hot.time - even.time == pytest.approx(extra, rel=1e-9)
    assert even.time == pytest.approx(ALPHA + (p - 1) * 64 * hidden * itemsize * BETA,
                                      rel=1e-12)
    for m, res in ((balanced, even), (skewed, hot)):
        nbytes = (np.array(m) * itemsize).tolist()
        assert cost.is_exact("all_to_allv", "direct", p=p, nbytes=nbytes, itemsize=2)
        assert res.time == pytest.approx(cost.predict("all_to_allv", "direct", p=p,
                                                      nbytes=nbytes, alpha=ALPHA,
                                                      beta=BETA), rel=1e-12)
    # pairwise: the hot rank hears a large message in every round; also slower
    slow = sc.simulate(net, "all_to_allv", algorithm="pairwise", dtype="float16",
                       nbytes=(np.array(skewed) * itemsize).tolist())
    fast = sc.simulate(net, "all_to_allv", algorithm="pairwise", dtype="float16",
                       nbytes=(np.array(balanced) * itemsize).tolist())
    assert slow.time > fast.time >= even.time


def test_a_numpy_array_of_sizes_is_checked_at_once_as_a_list_is():
    """Arrays are checked at once (entry by entry, a 1024 x 1024 matrix took seconds):
    whole numbers of any numpy kind become int64 as they are, and a bad entry is refused
    naming its place, as in a list."""
    from simcoll import cost
    from simcoll.uneven import check_nbytes

    coll = sc.COLLECTIVES["all_to_allv"]
    for dtype in (np.uint16, np.int64, np.float64):
        got = check_nbytes(coll, np.array([[0, 4], [8, 12]], dtype=dtype), 2)
        assert got.dtype == np.int64 and got.tolist() == [[0, 4], [8, 12]]
    for bad, said in ((-4.0, "-4.0 is not accepted"), (2.5, "2.5 is not accepted"),
                      (np.nan, "nan is not accepted"),
                      (2.0**63, r"9\.223372036854776e\+18 could overflow the int64")):
        sizes = np.array([[0.0, 4.0], [8.0, 12.0]])
        sizes[1, 0] = bad
        with pytest.raises(sc.InvalidInputError, match=rf"^nbytes\[1\]\[0\]={said}"):
            check_nbytes(coll, sizes, 2)
    # a masked array or a matrix is read entry by entry, as before; float16 sizes are
    # compared in float64 (2^62 is past float16's range: a RuntimeWarning)
    masked = np.ma.masked_array([[0, 4], [8, 12]], mask=[[0, 1], [0, 0]])
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[0\]\[1\]=masked is not"):
        check_nbytes(coll, masked, 2)
    with warnings.catch_warnings():   # numpy's own advice against np.matrix
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        matrix = np.matrix([[0, 4], [8, 12]])
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[0\]=\[\[0, 4\]\] is not a "
                                                   r"row of 2 entries"):
        check_nbytes(coll, matrix, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_nbytes(coll, np.array([[0, 4], [8, 12]], np.float16), 2).tolist() == \
            [[0, 4], [8, 12]]
    # direct all_to_allv on the reference network: alpha + beta x the most a rank sends,
    # 2 x 8 B to its two peers
    assert cost.predict("all_to_allv", "direct", p=3, nbytes=np.full((3, 3), 8), alpha=1e-6,
                        beta=1e-9) == pytest.approx(1e-6 + 16e-9, rel=1e-12)


def test_a_numpy_array_of_sizes_is_refused_where_the_same_list_is():
    """An array checked at once refuses what a list refuses, naming the entry: a negative
    integer, 2^62 (the first size past the int64 counters' limit), and booleans."""
    from simcoll.uneven import check_nbytes

    coll = sc.COLLECTIVES["all_to_allv"]
    for bad, said in ((-8, "-8 is not accepted"),
                      (2**62, "4611686018427387904 could overflow the int64")):
        for dtype in (np.int64, np.float64):
            sizes = np.array([[0, 4], [8, 12]], dtype=dtype)
            sizes[1, 0] = bad
            shown = said if dtype is np.int64 else said.replace(str(bad), repr(float(bad)))
            with pytest.raises(sc.InvalidInputError,
                               match=rf"^nbytes\[1\]\[0\]={shown.replace('+', '[+]')}"):
                check_nbytes(coll, sizes, 2)
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[0\]\[0\]=True is not accepted"):
        check_nbytes(coll, np.array([[True, False], [False, True]]), 2)
    # 2^62 - 1 is the largest size an entry may have
    sizes = np.array([[0, 4], [2**62 - 1, 12]], dtype=np.int64)
    assert check_nbytes(coll, sizes, 2).tolist() == [[0, 4], [2**62 - 1, 12]]
