"""The v-collectives' arguments, started inside rank programs, in Result, in simcoll.cost,
in the testing kit and on the command line; every bad input refused before the run."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, reference_network

import simcoll as sc
from simcoll import cost
from simcoll.cli import main
from simcoll.testing import assert_matches_model


def ints(*lengths, dtype="int32"):
    return [np.arange(n, dtype=dtype) + 100 * r for r, n in enumerate(lengths)]


SQUARE = [[1, 2, 0], [0, 0, 3], [2, 2, 2]]

BAD = [
    # (collective, kwargs, message)
    ("all_reduce", dict(nbytes=64, splits=[1, 2, 3]),
     r"splits=\[1, 2, 3\] is not accepted: all_reduce takes no splits"),
    ("all_to_all", dict(nbytes=[8, 8, 8]),
     r"nbytes=\[8, 8, 8\] is not accepted: all_to_all takes one size.*all_to_allv"),
    ("all_gatherv", dict(nbytes=64),
     r"nbytes=64 is not accepted: all_gatherv takes a sequence of p non-negative"),
    ("all_to_allv", dict(nbytes="1MiB"), r"nbytes='1MiB' is not accepted.*p x p matrix"),
    ("all_gatherv", dict(nbytes=[8, 8]), r"nbytes has 2 entries but there are 3 ranks"),
    ("all_to_allv", dict(nbytes=[8, 8, 8]), r"nbytes\[0\]=8 is not a row of 3 entries"),
    ("all_to_allv", dict(nbytes=[[8] * 3, [8] * 2, [8] * 3]),
     r"nbytes\[1\]=\[8, 8\] is not a row of 3 entries"),
    ("reduce_scatterv", dict(nbytes=[8, -4, 8]), r"nbytes\[1\]=-4 is not accepted"),
    ("all_gatherv", dict(nbytes=[8, 4.5, 8]), r"nbytes\[1\]=4.5 is not accepted"),
    ("all_to_allv", dict(nbytes=np.full((3, 3), 8.5)),
     r"nbytes\[0\]\[0\]=8.5 is not accepted; all_to_allv takes a p x p "
     r"matrix of bytes .* non-negative whole numbers"),
    ("all_gatherv", dict(nbytes=[8, float("nan"), 8]), r"nbytes\[1\]=nan is not accepted"),
    ("all_gatherv", dict(nbytes=np.array(16)),
     r"nbytes=array\(16\) is not accepted: all_gatherv takes a sequence of p"),
    ("all_gatherv", dict(data=ints(3, 3, 3), splits=np.array(3)),
     r"splits=array\(3\) is not accepted: all_gatherv takes a sequence of p"),
    ("all_to_allv", dict(nbytes=[np.array(8)] * 3),
     r"nbytes\[0\]=array\(8\) is not a row of 3 entries"),
    ("all_gatherv", dict(nbytes=[8, True, 8]), r"nbytes\[1\]=True is not accepted"),
    ("all_to_allv", dict(nbytes=[[8, 8, 8], [8, "8b", 8], [8, 8, 8]]),
     r"nbytes\[1\]\[1\]='8b' is not accepted: cannot read size '8b': a lowercase b is a bit"),
    ("all_gatherv", dict(nbytes=[8, 6, 8]),
     r"nbytes\[1\]=6 is not a multiple of the item size \(4 bytes\)"),
    ("all_to_allv", dict(nbytes=[[8, 8, 8], [8, 8, 8], [8, 8, 2]], dtype="float64"),
     r"nbytes\[2\]\[2\]=2 is not a multiple of the item size \(8 bytes\)"),
    ("all_gatherv", dict(nbytes=[8, 8, 8], splits=[2, 2, 2]),
     r"splits=\[2, 2, 2\] is not accepted without data="),
    ("reduce_scatterv", dict(data=ints(6, 6, 6)), r"reduce_scatterv with data= needs splits="),
    ("reduce_scatterv", dict(data=ints(6, 6, 6), splits=[1, 2, 2]),
     r"data\[0\] has 6 elements but splits=\[1, 2, 2\] give rank 0 an input of 5"),
    ("reduce_scatterv", dict(data=ints(6, 5, 6), splits=[1, 2, 3]),
     r"data\[1\] has 5 elements but data\[0\] has 6"),
    ("all_to_allv", dict(data=ints(3, 4, 6), splits=SQUARE),
     r"data\[1\] has 4 elements but .* an input of 3"),
    ("all_gatherv", dict(data=ints(1, 2, 3), splits=[1, 2, 4]),
     r"data\[2\] has 3 elements but splits=\[1, 2, 4\] give rank 2 an input of 4"),
    ("all_gatherv", dict(data=[np.zeros(2, "f4"), np.zeros(3, "f8"), np.zeros(1, "f4")]),
     r"data\[1\] is float64 but data\[0\] is float32"),
    ("all_gatherv", dict(data=ints(1, 2)), r"data has 2 arrays but the topology has 3 ranks"),
    ("all_gatherv", dict(data=[np.zeros((2, 2))] * 3), r"data\[0\] has shape \(2, 2\)"),
    ("all_to_allv", dict(data=ints(3, 3, 6), splits=[[1, 2], [3, 0], [0, 6]]),
     r"splits\[0\]=\[1, 2\] is not a row of 3 entries"),
    ("reduce_scatterv", dict(data=ints(6, 6, 6), splits=[1, 2, 3], root=1),
     r"reduce_scatterv has no root"),
    ("all_gatherv", dict(nbytes=[2**60, 8, 8], dtype="uint8"),
     r"a rank's input of 1152921504606846976 bytes on 3 ranks could overflow"),
    ("all_gatherv", dict(nbytes=[2**63, 8, 8], dtype="uint8"),
     r"nbytes\[0\]=9223372036854775808 could overflow the int64 traffic counters"),
    ("reduce_scatterv", dict(data=ints(6, 6, 6), splits=[2**63, 0, 0]),
     r"splits\[0\]=9223372036854775808 could overflow"),
    ("all_to_allv", dict(nbytes=[[0, 2**64, 0], [0, 0, 0], [0, 0, 0]], dtype="uint8"),
     r"nbytes\[0\]\[1\]=18446744073709551616 could overflow"),
    ("all_gatherv", dict(data=ints(1, 2, 3), nbytes=[4, 8, 12]), r"exactly one of data"),
]


@pytest.mark.parametrize("coll,kwargs,message", BAD)
def test_bad_input_is_refused_before_the_run(coll, kwargs, message):
    alg = "direct"
    with pytest.raises(sc.InvalidInputError, match=message):
        sc.simulate(reference_network(3), coll, algorithm=alg, **kwargs)


def test_numpy_sizes_and_matrices_are_accepted():
    p = 3
    a = sc.simulate(reference_network(p), "all_to_allv", algorithm="direct",
                    nbytes=np.array(SQUARE, dtype=np.int16) * 4)
    b = sc.simulate(reference_network(p), "all_to_allv", algorithm="direct",
                    nbytes=[[4 * v for v in row] for row in SQUARE])
    assert a.time == b.time and a.splits == b.splits == tuple(map(tuple, SQUARE))
    c = sc.simulate(reference_network(p), "all_gatherv", algorithm="ring",
                    nbytes=(np.uint64(4), np.int8(0), 8))
    assert c.splits == (1, 0, 2) and all(type(v) is int for v in c.splits)


def test_a_0d_array_is_one_size():
    """A 0-d array is a single number: refused (InvalidInputError, above) where a
    v-collective takes a sequence, taken where one size (or one entry) is."""
    net = reference_network(3)
    one = sc.simulate(net, "all_reduce", algorithm="ring", nbytes=np.array(48))
    assert one.nbytes == 48
    assert sc.simulate(net, "all_reduce", algorithm="ring", nbytes=np.array(48.0)).nbytes == 48
    entries = sc.simulate(net, "all_gatherv", algorithm="ring",
                          nbytes=[np.array(8), np.array(0), np.array(4.0)])
    assert entries.splits == (2, 0, 1)
    with pytest.raises(sc.InvalidInputError, match=r"nbytes=array\(16\) is not accepted: "
                                                   r"all_gatherv takes a sequence of p"):
        cost.predict("all_gatherv", "ring", p=4, nbytes=np.array(16), alpha=1e-6, beta=1e-9)
    # ring all-reduce on p = 4 ranks by hand: 2 (p-1) alpha + 2 (p-1)/p n beta
    assert cost.predict("all_reduce", "ring", p=4, nbytes=np.array(64), alpha=1.0,
                        beta=1.0) == 6 + 96


def test_whole_number_floats_are_sizes_as_for_the_even_collectives():
    net = reference_network(4)
    ints_run = sc.simulate(net, "all_gatherv", algorithm="ring", nbytes=[16, 0, 8, 4])
    for floats in ([16.0, 0.0, 8.0, 4.0], np.array([16, 0, 8, 4], dtype=np.float64),
                   [np.float32(16), 0, 8.0, np.float64(4)]):
        res = sc.simulate(net, "all_gatherv", algorithm="ring", nbytes=floats)
        assert res.splits == (4, 0, 2, 1) and all(type(c) is int for c in res.splits)
        assert res.time == ints_run.time
    tokens = np.array([[3, 1], [0, 2]])
    matrix = sc.simulate(reference_network(2), "all_to_allv", algorithm="direct",
                         nbytes=tokens * 8 * 2.0, dtype="float16")
    assert matrix.splits == ((24, 8), (0, 16))
    res = sc.simulate(net, "reduce_scatterv", algorithm="direct",
                      data=[np.arange(6.0)] * 4, splits=[3.0, 1.0, 2.0, 0.0])
    assert res.splits == (3, 1, 2, 0) and res.correct
    assert [len(x) for x in res.outputs] == [3, 1, 2, 0]
    # cost takes them too: direct all_gatherv, by hand alpha + (p-1) max c beta
    assert cost.predict("all_gatherv", "direct", p=4, nbytes=[16.0, 0, 8, 4], alpha=1.0,
                        beta=1.0) == 1 + 3 * 16
    assert cost.predict("all_reduce", "ring", p=4, nbytes=64.0, alpha=1.0, beta=1.0) == 102
    with pytest.raises(sc.InvalidInputError, match=r"nbytes=64.5 is not accepted; use a "
                                                   r"whole number >= 0"):
        cost.predict("all_reduce", "ring", p=4, nbytes=64.5, alpha=1.0, beta=1.0)


def test_size_mismatch_messages_stay_short_at_64_ranks():
    p = 64
    splits = np.ones((p, p), dtype=int)
    data = [np.zeros(p + (r == 5), dtype=np.float32) for r in range(p)]
    with pytest.raises(sc.InvalidInputError) as refused:
        sc.simulate(sc.topology.switch(p), "all_to_allv", algorithm="direct", data=data,
                    splits=splits)
    message = str(refused.value)
    assert message.startswith("data[5] has 65 elements but splits=[(1, 1, 1, 1, 1, 1, ...), ")
    assert "give rank 5 an input of 64" in message and len(message) < 400

    def started(comm):
        x = np.zeros(p + (comm.rank == 5), dtype=np.float32)
        yield comm.all_to_allv(x, splits.tolist())

    with pytest.raises(sc.SimCollError) as refused:
        sc.run_program(sc.topology.switch(p), started)
    message = str(refused.value)
    assert "x has 65 elements but splits=[(1, 1, 1, 1, 1, 1, ...), " in message
    assert len(message) < 400
    for kwargs in (dict(nbytes=splits.tolist()), dict(nbytes=[64] * p, splits=splits)):
        with pytest.raises(sc.InvalidInputError) as refused:
            sc.simulate(sc.topology.switch(p), "all_to_all", algorithm="direct", **kwargs)
        assert len(str(refused.value)) < 400


def test_result_fields_of_a_v_collective():
    # all_to_allv, int32: row sums 3, 3, 6 elements = 12, 12, 24 bytes: mean 16
    data = ints(3, 3, 6)
    res = sc.simulate(reference_network(3), "all_to_allv", algorithm="pairwise",
                      data=data, splits=SQUARE)
    assert res.collective == "all_to_allv" and res.nbytes == 16 and res.dtype == "int32"
    assert res.op is None and res.splits == ((1, 2, 0), (0, 0, 3), (2, 2, 2))
    assert res.algbw == pytest.approx(48 / 3 / res.time, rel=1e-12)
    assert res.busbw == pytest.approx(res.algbw * 2 / 3, rel=1e-12)
    summary = res.to_dict()
    assert summary["splits"] == [[1, 2, 0], [0, 0, 3], [2, 2, 2]]
    assert summary["nbytes"] == 16 and summary["correct"] is True
    assert [o.tolist() for o in res.outputs] == [[0, 200, 201], [1, 2, 202, 203],
                                                  [100, 101, 102, 204, 205]]
    # all_gatherv: S = the output, 7 elements of 8 bytes; nbytes = 56 // 3
    gv = sc.simulate(reference_network(3), "all_gatherv", algorithm="ring",
                     nbytes=[16, 0, 40], dtype="float64")
    assert gv.nbytes == 18 and gv.splits == (2, 0, 5)
    assert gv.algbw == pytest.approx(56 / gv.time, rel=1e-12)
    # reduce_scatterv: S = the input, every rank's 7 elements
    rs = sc.simulate(reference_network(3), "reduce_scatterv", algorithm="direct",
                     nbytes=[16, 0, 40], dtype="float64", op="max")
    assert rs.nbytes == 56 and rs.op == "MAX"
    assert rs.algbw == pytest.approx(56 / rs.time, rel=1e-12)
    even = sc.simulate(reference_network(3), "all_reduce", algorithm="ring", nbytes=64)
    assert even.splits is None and "splits" not in even.to_dict()


def test_the_testing_kit_checks_v_collectives_against_their_models():
    res = sc.simulate(reference_network(4), "reduce_scatterv", algorithm="ring",
                      nbytes=[4000, 0, 12000, 400])
    assert_matches_model(res, alpha=ALPHA, beta=BETA, gamma=GAMMA)
    with pytest.raises(sc.InvalidInputError, match="did not run on the reference network "
                                                   "of alpha=1e-06, beta=1e-11, gamma=5e-12"):
        assert_matches_model(res, alpha=ALPHA, beta=BETA, gamma=2 * GAMMA)


def test_cost_queries_check_their_sizes():
    with pytest.raises(sc.InvalidInputError, match=r"nbytes=4096 is not accepted: "
                                                   r"all_to_allv takes a p x p matrix"):
        cost.predict("all_to_allv", "direct", p=4, nbytes=4096, alpha=1, beta=1)
    with pytest.raises(sc.InvalidInputError, match="nbytes has 3 entries but there are 4"):
        cost.traffic("all_gatherv", "ring", p=4, nbytes=[1, 2, 3])
    with pytest.raises(sc.InvalidInputError, match=r"nbytes=\[4, 4\] is not accepted"):
        cost.predict("all_reduce", "ring", p=2, nbytes=[4, 4], alpha=1, beta=1)
    with pytest.raises(sc.InvalidInputError, match=r"nbytes\[0\]=-1"):
        cost.lower_bound("reduce_scatterv", p=2, nbytes=[-1, 4], alpha=1, beta=1)
    # bounds by hand: p = 4, blocks 8, 0, 16, 4 bytes (n = 28)
    b = cost.lower_bound("all_gatherv", p=4, nbytes=[8, 0, 16, 4], alpha=1, beta=1)
    assert (b.latency, b.bandwidth, b.computation, b.message) == (2, 28, 0, 1)
    b = cost.lower_bound("reduce_scatterv", p=4, nbytes=[8, 0, 16, 4], alpha=1, beta=1,
                         gamma=1)
    assert (b.bandwidth, b.computation) == (28, 21)
    # a single pair: one step of latency, its bytes
    b = cost.lower_bound("all_to_allv", p=4, nbytes=np.diag([0, 5, 0], 1)[:4, :4],
                         alpha=1, beta=1, itemsize=1)
    assert (b.latency, b.bandwidth, b.message) == (1, 5, 1)
    assert cost.lower_bound("all_to_allv", p=3, nbytes=np.eye(3, dtype=int),
                            alpha=1, beta=1, itemsize=1).total == 0


def test_cost_names_the_entry_that_is_not_whole_elements():
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[3\]=6 is not a multiple of "
                                                   r"itemsize=4"):
        cost.traffic("all_gatherv", "ring", p=4, nbytes=[16, 16, 16, 6], itemsize=4)
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[1\]\[0\]=2 is not a multiple"):
        cost.is_exact("all_to_allv", "direct", p=2, nbytes=[[4, 4], [2, 4]], itemsize=4)
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes=6 is not a multiple of "
                                                   r"itemsize=4"):
        cost.traffic("all_gather", "ring", p=4, nbytes=6, itemsize=4)


@pytest.mark.parametrize("query", [
    lambda: cost.traffic("all_gatherv", "direct", p=8, nbytes=[2**61] * 8, itemsize=1),
    lambda: cost.predict("all_gatherv", "ring", p=8, nbytes=[2**61] + [0] * 7, alpha=1,
                         beta=1),
    lambda: cost.lower_bound("reduce_scatterv", p=4, nbytes=[2**61] * 4, alpha=1e-6,
                             beta=1e-9, gamma=1e-12),
    lambda: cost.is_exact("all_to_allv", "pairwise", p=2,
                          nbytes=[[0, 2**61], [0, 0]], itemsize=1),
])
def test_cost_refuses_v_sizes_that_overflow_the_counters_as_simulate_does(query):
    """The true totals (7 x 2^61 bytes received, say) wrapped around in int64."""
    with pytest.raises(sc.InvalidInputError, match=r"^a rank's input of \d+ bytes on \d+ "
                                                   r"ranks could overflow the int64 traffic "
                                                   r"counters"):
        query()


def test_cost_traffic_refuses_an_even_size_that_overflows_the_counters():
    # 4 ranks: simulate takes nbytes < 2^63 / (2 * 4^2) = 2^58
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes=4611686018427387904 on 4 ranks "
                                                   r"could overflow the int64 traffic "
                                                   r"counters; use nbytes < "
                                                   r"288230376151711744"):
        cost.traffic("all_gather", "ring", p=4, nbytes=2**62, itemsize=1)
    assert cost.traffic("all_gather", "ring", p=4, nbytes=2**58 - 1, itemsize=1).sent[0] == \
        3 * (2**58 - 1)


def program(comm, coll, data, splits, alg):
    x = data[comm.rank]
    if coll == "all_to_allv":
        return (yield comm.all_to_allv(x, splits, algorithm=alg))
    if coll == "all_gatherv":
        return (yield comm.all_gatherv(x, splits, algorithm=alg))
    return (yield comm.reduce_scatterv(x, splits, algorithm=alg, op="avg"))


@pytest.mark.parametrize("coll,alg", [("all_to_allv", "pairwise"), ("all_to_allv", "direct"),
                                      ("all_gatherv", "ring"), ("reduce_scatterv", "ring"),
                                      ("reduce_scatterv", "direct")])
def test_started_inside_a_rank_program_as_at_the_top_level(coll, alg):
    splits = SQUARE if coll == "all_to_allv" else [1, 0, 4]
    lengths = {"all_to_allv": [3, 3, 6], "all_gatherv": [1, 0, 4], "reduce_scatterv": [5] * 3}
    data = [np.arange(n, dtype=np.float64) * (r + 1) for r, n in enumerate(lengths[coll])]
    net = reference_network(3)
    started = sc.run_program(net, program, coll, data, splits, alg)
    top = sc.simulate(net, coll, algorithm=alg, data=data, splits=splits,
                      **({"op": "avg"} if coll == "reduce_scatterv" else {}))
    assert top.correct
    assert started.time == pytest.approx(top.time, rel=1e-12)
    for out, ref in zip(started.outputs, top.outputs):
        np.testing.assert_array_equal(out, ref)

    def by_collective(comm):
        return (yield comm.collective(coll, data[comm.rank], algorithm=alg, splits=splits))

    by_name = sc.run_program(net, by_collective)
    assert by_name.time == started.time


def test_started_collectives_refuse_bad_splits():
    def run(body):
        return sc.run_program(reference_network(3), body)

    def missing(comm):
        yield comm.collective("all_to_allv", np.zeros(2), algorithm="direct")

    def wrong_size(comm):
        yield comm.all_gatherv(np.zeros(3), [1, 2, 3])

    def even_with_splits(comm):
        yield comm.collective("all_gather", np.zeros(3), algorithm="ring", splits=[1, 1, 1])

    for body, message in ((missing, r"all_to_allv needs splits="),
                          (wrong_size, r"x has 3 elements but splits=\[1, 2, 3\] give rank "
                                       r"[01] an input of [12]"),
                          (even_with_splits, r"all_gather takes no splits")):
        with pytest.raises(sc.SimCollError, match=message):
            run(body)


def test_registry_passes_splits_and_reserves_the_name():
    from conftest import NO_FORMULA

    with pytest.raises(TypeError, match="takes keyword-only"):
        @sc.register("all_gatherv", "no_splits_keyword", cost=NO_FORMULA)
        def no_splits(comm, x):
            yield comm.sleep(0)
    with pytest.raises(TypeError, match=r"\['splits'\] cannot be declared"):
        sc.register("all_gather", "splits_param", cost=NO_FORMULA,
                    params={"splits": sc.algorithms.Int(1)})


def test_command_line_and_sweep_refuse_v_collectives(capsys):
    assert main(["run", "--collective", "all_to_allv", "--topology", "switch:4"]) == 2
    assert "all_to_allv is not supported on the command line" in capsys.readouterr().err
    with pytest.raises(sc.InvalidInputError, match="sweep does not take all_gatherv"):
        sc.sweep(sc.topology.switch, "all_gatherv", algorithms=["ring"], ranks=[2],
                 sizes=[64])
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "all_to_allv     sizes per pair, Python only" in listed
    assert "alpha + beta max_r max(sent_r, received_r)" in listed


@pytest.mark.parametrize("coll,splits", [("all_gatherv", (2, 0, 3)),
                                         ("reduce_scatterv", (2, 0, 3)),
                                         ("all_to_allv", ((1, 2, 0), (0, 0, 3), (2, 2, 2)))])
def test_the_check_finds_one_wrong_element_on_one_rank(coll, splits):
    from reference import expected_outputs

    from simcoll.check import compare

    shaped = sc.COLLECTIVES[coll].shaped(splits)
    lengths = shaped.uneven.inputs(splits)
    inputs = [np.arange(n, dtype=np.float32) + 10 * r for r, n in enumerate(lengths)]
    outputs = [np.array(o, dtype=np.float32) for o in
               expected_outputs(coll, inputs, sc.ReduceOp.SUM, 0, splits)]
    assert compare(shaped, inputs, outputs, sc.ReduceOp.SUM, 0) == (True, 0.0)
    rank = 2
    outputs[rank] = outputs[rank].copy()
    outputs[rank][-1] += 1
    ok, worst = compare(shaped, inputs, outputs, sc.ReduceOp.SUM, 0)
    assert not ok and worst == pytest.approx(1.0)
    outputs[rank] = outputs[rank][:-1]                      # one element short
    assert compare(shaped, inputs, outputs, sc.ReduceOp.SUM, 0)[0] is False
    with pytest.raises(sc.InvalidInputError, match="need its splits"):
        sc.COLLECTIVES[coll].reference(inputs, sc.ReduceOp.SUM, 0)


def test_a_v_collectives_sizes_may_be_size_strings_and_fractions_as_one_size_may():
    """nbytes=["4KiB", 8, Fraction(12), 12.0] is 4096, 8, 12, 12 bytes: a ring
    all_gatherv's rank r sends all but what rank r + 1 gave, n - c_(r+1) of n = 4128."""
    res = sc.simulate(sc.topology.switch(4), "all_gatherv", algorithm="ring",
                      nbytes=["4KiB", 8, Fraction(12), 12.0], dtype="float32")
    assert res.bytes_sent.tolist() == [4128 - 8, 4128 - 12, 4128 - 12, 4128 - 4096]
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[2\]='3x' is not accepted: "
                                                  r"cannot read size '3x'"):
        sc.simulate(sc.topology.switch(4), "all_gatherv", algorithm="ring",
                    nbytes=[4, 8, "3x", 4], dtype="float32")
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[1\]=Fraction\(1, 2\) is not"):
        sc.simulate(sc.topology.switch(4), "all_gatherv", algorithm="ring",
                    nbytes=[4, Fraction(1, 2), 4, 4], dtype="uint8")
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[0\]\[1\]=nan is not accepted"):
        sc.simulate(sc.topology.switch(4), "all_to_allv", algorithm="direct",
                    nbytes=np.array([[1.0, np.nan, 0, 0]] + [[0.0] * 4] * 3), dtype="uint8")


@pytest.mark.parametrize("p", [2, 4, 7])
def test_an_entry_too_large_for_the_counters_is_told_the_limit_for_its_rank_count(p):
    """2^62 bytes was told "use entries < 2^62", whatever p; one below that then met a
    limit 2p^2 times lower. The limit for a rank's input is the largest n with
    2 p^2 n < 2^63; an entry below it but past the int64 guard is a sum's business."""
    limit = (2**63 - 1) // (2 * p * p) + 1
    sizes = [2**62] + [0] * (p - 1)
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^nbytes\[0\]={2**62} could overflow the int64 traffic "
                             rf"counters; a rank's input on {p} ranks must be below "
                             rf"{limit} bytes"):
        sc.simulate(sc.topology.switch(p), "all_gatherv", algorithm="ring", nbytes=sizes,
                    dtype="uint8")
    with pytest.raises(sc.InvalidInputError, match=rf"input of {limit} bytes on {p} ranks"
                                                  rf" could overflow .* use inputs < {limit}"):
        sc.simulate(sc.topology.switch(p), "all_gatherv", algorithm="ring",
                    nbytes=[limit] + [0] * (p - 1), dtype="uint8")
    res = sc.simulate(sc.topology.switch(p), "all_gatherv", algorithm="ring",
                      nbytes=[limit - 1] + [0] * (p - 1), dtype="uint8", until=1e12)
    assert res.bytes_received[1] == limit - 1


def test_a_negative_fraction_entry_is_refused_naming_the_entry():
    """Fraction(-4) is refused as the entry given (a check further on said count=-4)."""
    with pytest.raises(sc.InvalidInputError,
                       match=r"^nbytes\[1\]=Fraction\(-4, 1\) is not accepted; all_gatherv "
                             r"takes"):
        sc.simulate(sc.topology.switch(4), "all_gatherv", algorithm="ring",
                    nbytes=[4, Fraction(-4), 4, 4], dtype="uint8")


@pytest.mark.parametrize("splits", [["2", 2, 2], [2, "2", 2], [2, 2, "2B"]])
def test_splits_in_elements_take_no_size_strings(splits):
    """Size strings are bytes: splits=, counted in elements, refuses them."""
    where = next(i for i, s in enumerate(splits) if isinstance(s, str))
    data = [np.arange(6, dtype=np.int32) for _ in range(3)]
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^splits\[{where}\]='{splits[where]}' is not accepted; "
                             rf"reduce_scatterv takes"):
        sc.simulate(sc.topology.switch(3), "reduce_scatterv", algorithm="ring", data=data,
                    splits=splits)


def test_a_numpy_bool_entry_is_shown_as_a_plain_bool():
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes\[1\]=True is not accepted"):
        sc.simulate(sc.topology.switch(4), "all_gatherv", algorithm="ring",
                    nbytes=[4, np.True_, 4, 4], dtype="uint8")
