"""simcoll.cost's queries against hand arithmetic: the lower bounds with server hosts and
with nothing to move, the element size they assume by default, and the sizes they refuse
as ``simulate`` refuses them.

Hand values used below: an all-reduce of p inputs of n bytes takes (p-1) n reduced bytes,
which at best are shared by every reduction engine (p ranks and h server hosts); a
parameter-server all-reduce on k >= p hosts takes 2 alpha + 2 k (n/k) beta +
(p-1) (n/k) gamma (each host's link carries p shards of n/k bytes each way, each worker's
k of them, then the host makes p - 1 reductions of n/k bytes); a scatter of 5 float32
elements on 4 ranks cuts blocks of 2, 1, 1 and 1 elements, so its root sends 3 x 4 bytes.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import simcoll as sc
from simcoll import cost
from simcoll.cost import Bounds, CostModel, gpu_traffic
from simcoll.testing import alpha_beta_network

A, B, G = 1e-6, 1e-9, 1e-7
DATA = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all",
        "gather", "scatter"]


def test_server_hosts_share_the_reductions_and_an_all_reduce_moves_n_bytes_a_rank():
    """p = 2 ranks and 8 hosts, n = 4096 B: the bound said (p-1)/p n gamma = 204.8 us, above
    the 61.392 us the parameter server takes."""
    p, k, n = 2, 8, 4096
    run = sc.simulate(alpha_beta_network(p, alpha=A, beta=B, gamma=G, servers=k),
                      "all_reduce", algorithm="parameter_server", nbytes=n)
    assert run.time == pytest.approx(2 * A + 2 * k * (n / k) * B + (p - 1) * (n / k) * G,
                                     rel=1e-12)
    bound = cost.lower_bound("all_reduce", p=p, nbytes=n, alpha=A, beta=B, gamma=G, hosts=k)
    assert bound == pytest.approx(Bounds(latency=A, bandwidth=n * B,
                                         computation=(p - 1) * n * G / (p + k), message=A))
    assert bound.total == pytest.approx(1 * 4096 * G / 10) and run.time >= bound.total
    # reduce and reduce_scatter share their (p-1) n reduced bytes the same way; their
    # bandwidth bounds count a rank's own bytes, which hosts do not change
    for coll, moved in (("reduce", 4096), ("reduce_scatter", 3 / 4 * 4096)):
        got = cost.lower_bound(coll, p=4, nbytes=4096, alpha=A, beta=B, gamma=G, hosts=2)
        assert got.computation == pytest.approx(3 * 4096 * G / 6)
        assert got.bandwidth == pytest.approx(moved * B)
    # without hosts: the ranks' own (p-1)/p n gamma and the all-reduce's 2 (p-1)/p n beta
    plain = cost.lower_bound("all_reduce", p=4, nbytes=4096, alpha=A, beta=B, gamma=G)
    assert plain == pytest.approx(Bounds(latency=2 * A, bandwidth=2 * 3 / 4 * 4096 * B,
                                         computation=3 / 4 * 4096 * G, message=A))


def test_the_v_collectives_share_their_reductions_with_server_hosts_too():
    sizes = [400, 0, 800]                      # reduce_scatterv: n = 1200 B in all
    bound = cost.lower_bound("reduce_scatterv", p=3, nbytes=sizes, alpha=A, beta=B,
                             gamma=G, hosts=3)
    assert bound.computation == pytest.approx(2 * 1200 * G / 6)
    assert bound.bandwidth == pytest.approx(1200 * B)          # rank 1 sends all n


@pytest.mark.parametrize("collective", DATA)
@pytest.mark.parametrize("p", [2, 5])
def test_no_message_is_needed_to_move_nothing(collective, p):
    """The bound claimed one alpha (and L alpha of latency) for an empty collective, which
    NCCL skips in 0 s."""
    assert cost.lower_bound(collective, p=p, nbytes=0, alpha=A, beta=B,
                            gamma=G) == Bounds(0.0, 0.0, 0.0, 0.0)


def test_a_scatter_of_one_element_may_need_no_message():
    """Its root may be rank 0, which keeps the only element's block; two elements fill
    blocks 0 and 1, and one of them leaves the root."""
    assert cost.lower_bound("scatter", p=4, nbytes=4, alpha=A, beta=B) == Bounds(
        0.0, 0.0, 0.0, 0.0)
    assert cost.lower_bound("scatter", p=4, nbytes=8, alpha=A, beta=B) == pytest.approx(
        Bounds(latency=A, bandwidth=4 * B, computation=0.0, message=A))


@pytest.mark.parametrize("count, rounds", [(2, 1), (3, 2), (4, 2), (5, 3), (7, 3), (8, 3),
                                           (9, 3), (100, 3)])
def test_a_scatter_latency_bound_counts_only_the_ranks_its_blocks_reach(count, rounds):
    """count elements over 8 ranks fill min(8, count) blocks; the root holds one, and a
    round of single-port messages at most doubles the ranks holding their block:
    ceil(log2 min(8, count)) rounds (1 for two blocks, 3 from five). It was 3 alpha at
    every count, above the alpha + 4 beta of a root that sends rank 1 its lone element."""
    bound = cost.lower_bound("scatter", p=8, nbytes=4 * count, alpha=A, beta=B)
    assert bound.latency == pytest.approx(rounds * A)


def test_a_scatter_of_two_elements_can_end_after_one_message():
    """A root that sends rank 1 its element and nothing else is a valid scatter of two
    float32 elements over 8 ranks (blocks 2 - 7 are empty): one alpha and 4 beta, within
    the bound's latency."""
    def root_sends_one(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(1, np.float32), 1)
        elif comm.rank == 1:
            yield comm.recv(0)

    run = sc.run_program(alpha_beta_network(8, alpha=A, beta=B), root_sends_one)
    assert run.time == pytest.approx(A + 4 * B, rel=1e-12)
    assert run.time >= cost.lower_bound("scatter", p=8, nbytes=8, alpha=A, beta=B).latency


@pytest.mark.parametrize("collective", ["broadcast", "reduce", "gather", "scatter"])
def test_lower_bound_takes_a_root_as_predict_does_and_holds_from_every_root(collective):
    """It raised Python's TypeError on root=, which predict takes; every root's simulated
    binomial run stays above the (root-free) bound."""
    for root in range(5):
        bound = cost.lower_bound(collective, p=5, nbytes=4 * 7, alpha=A, beta=B, root=root)
        assert bound == cost.lower_bound(collective, p=5, nbytes=4 * 7, alpha=A, beta=B)
        run = sc.simulate(alpha_beta_network(5, alpha=A, beta=B), collective,
                          algorithm="binomial", nbytes=4 * 7, root=root)
        assert run.time >= bound.total
    with pytest.raises(sc.InvalidInputError, match=r"root=5 is not accepted.*<= 4"):
        cost.lower_bound(collective, p=5, nbytes=28, alpha=A, beta=B, root=5)


def test_lower_bound_refuses_a_root_for_a_collective_without_one():
    with pytest.raises(sc.InvalidInputError, match="all_reduce has no root, but root=0"):
        cost.lower_bound("all_reduce", p=5, nbytes=28, alpha=A, beta=B, root=0)


def test_a_barrier_still_needs_its_messages():
    assert cost.lower_bound("barrier", p=5, nbytes=0, alpha=A, beta=B) == Bounds(
        latency=3 * A, bandwidth=0.0, computation=0.0, message=A)
    assert cost.lower_bound("barrier", p=1, nbytes=0, alpha=A, beta=B) == Bounds(
        0.0, 0.0, 0.0, 0.0)


def test_lower_bound_takes_float32_elements_by_default_as_the_other_queries_do():
    """With itemsize=1 the scatter bound was n - ceil(n/p) = 15 B, above the 12 B the root
    of a float32 run sends."""
    run = sc.simulate(alpha_beta_network(4, alpha=0.0, beta=B), "scatter",
                      algorithm="binomial", nbytes=20)
    assert run.time == pytest.approx(12 * B, rel=1e-12)
    bound = cost.lower_bound("scatter", p=4, nbytes=20, alpha=0.0, beta=B)
    assert bound.bandwidth == pytest.approx(12 * B) and run.time >= bound.total
    assert cost.lower_bound("scatter", p=4, nbytes=20, alpha=0.0, beta=B,
                            itemsize=1).bandwidth == pytest.approx(15 * B)
    with pytest.raises(sc.InvalidInputError, match="nbytes=10 is not a multiple of "
                                                   "itemsize=4"):
        cost.lower_bound("all_reduce", p=4, nbytes=10, alpha=A, beta=B)


def _refusal(call) -> str:
    with pytest.raises(sc.InvalidInputError) as info:
        call()
    return str(info.value)


def _queries(collective: str, algorithm: str, **kwargs):
    """predict, traffic and is_exact with these arguments, as calls."""
    return [lambda: cost.predict(collective, algorithm, alpha=A, beta=B, **kwargs),
            lambda: cost.traffic(collective, algorithm, **kwargs),
            lambda: cost.is_exact(collective, algorithm, **kwargs)]


@pytest.mark.parametrize("algorithm, nbytes, params", [
    ("ring", 4, {"chunks": 5}),                     # 1 float32 element: chunks 1..1
    ("ring", 8, {"chunks": 3}),                     # 2 elements
    ("bucketed", 4, {"buckets": 3}),
    ("bucketed", 20, {"buckets": 2, "inner_params": {"chunks": 3}}),  # buckets of 3 and 2
    ("double_binary_tree", 12, {"chunks": 4}),
])
def test_the_models_refuse_more_pieces_than_elements_as_simulate_does(algorithm, nbytes,
                                                                     params):
    with pytest.raises(sc.InvalidInputError) as info:
        sc.simulate(alpha_beta_network(2, alpha=A, beta=B), "all_reduce",
                    algorithm=algorithm, nbytes=nbytes, **params)
    for call in _queries("all_reduce", algorithm, p=2, nbytes=nbytes, **params):
        assert _refusal(call) == str(info.value)


def test_pieces_are_counted_in_elements_of_the_given_size():
    # 4 bytes are 4 uint8 elements, 2 float16, 1 float32
    assert cost.predict("all_reduce", "ring", p=2, nbytes=4, alpha=A, beta=B, chunks=4,
                        itemsize=1) > 0
    assert cost.traffic("all_reduce", "ring", p=2, nbytes=4, chunks=2, itemsize=2).sent[0] == 4
    assert "use 1..2" in _refusal(lambda: cost.is_exact("all_reduce", "ring", p=2, nbytes=4,
                                                       chunks=4, itemsize=2))
    # a default applies as it is, empty pieces and all, as in simulate
    assert cost.predict("broadcast", "pipeline", p=4, nbytes=4, alpha=A, beta=B) > 0
    assert sc.simulate(alpha_beta_network(4, alpha=A, beta=B), "broadcast",
                       algorithm="pipeline", nbytes=4).time > 0


def test_the_models_refuse_bytes_for_a_barrier():
    with pytest.raises(sc.InvalidInputError) as info:
        sc.simulate(alpha_beta_network(3, alpha=A, beta=B), "barrier",
                    algorithm="dissemination", nbytes=100)
    said = "a barrier moves no data, but 100 bytes per rank were given; "
    assert str(info.value).startswith(said)
    calls = _queries("barrier", "dissemination", p=3, nbytes=100) + [
        lambda: cost.lower_bound("barrier", p=3, nbytes=100, alpha=A, beta=B)]
    for call in calls:
        assert _refusal(call) == said + "use nbytes=0"
    assert cost.predict("barrier", "dissemination", p=3, nbytes=0, alpha=A,
                        beta=B) == pytest.approx(2 * A)


def test_too_many_ranks_for_any_size_say_so(monkeypatch):
    """2 p^2 n bytes must stay below 2^63: past p = isqrt(2^61) = 1,518,500,249 no
    size fits, and the advice was "use nbytes < 0" (on a machine whose memory the
    system does not tell, which the memory check below would refuse otherwise)."""
    monkeypatch.setattr("simcoll.memory.physical_memory", lambda: None)
    with pytest.raises(sc.InvalidInputError, match=r"nbytes=8 on 1518500250 ranks could "
                                                   r"overflow the int64 traffic counters; "
                                                   r"use fewer ranks \(at most 1518500249"):
        sc.cost.traffic("all_reduce", "ring", p=1518500250, nbytes=8)


def test_a_query_whose_per_rank_arrays_exceed_the_memory_is_refused(monkeypatch):
    """p = 759,250,124 passed the counters' check and was killed by the system as its
    per-rank arrays filled the memory. At 512 bytes a rank (double_binary_tree's trees
    take about 430), 2^22 ranks need 2 GiB."""
    monkeypatch.setattr("simcoll.memory.physical_memory", lambda: 2**30)
    with pytest.raises(sc.InvalidInputError, match=r"p=4194304 ranks: a query's arrays of "
                                                   r"one entry per rank would need about "
                                                   r"2.0 GiB, more than this machine's 1.0 GiB"):
        sc.cost.traffic("all_reduce", "double_binary_tree", p=2**22, nbytes=8)
    assert sc.cost.predict("all_reduce", "ring", p=2**20, nbytes=2**20, alpha=1e-6,
                           beta=1e-9) > 0


@pytest.mark.parametrize("itemsize,nbytes,message", [
    (0, [4, 4], "itemsize=0 is not accepted"),
    ("four", [4, 4], "itemsize='four' is not accepted"),
    (4, [4, 6], r"nbytes\[1\]=6 is not a multiple of itemsize=4"),
])
def test_the_uneven_lower_bounds_check_itemsize_too(itemsize, nbytes, message):
    with pytest.raises(sc.InvalidInputError, match=message):
        sc.cost.lower_bound("all_gatherv", p=2, nbytes=nbytes, alpha=1e-6, beta=1e-9,
                            itemsize=itemsize)


def test_constants_that_overflow_the_time_are_named_not_the_model():
    # 2 (p-1) alpha + 2 (p-1)/p n beta with alpha = beta = 1e308 is beyond a double; the
    # ring's model is right, the constants are not seconds.
    with pytest.raises(sc.InvalidInputError, match=r"the predicted time overflows \(inf\) "
                                                   r"with alpha=1e\+308, beta=1e\+308"):
        sc.cost.predict("all_reduce", "ring", p=8, nbytes=1024, alpha=1e308, beta=1e308)
    assert sc.cost.predict("all_reduce", "ring", p=8, nbytes=1024, alpha=1e300,
                           beta=0.0) == pytest.approx(14e300, rel=1e-12)


def test_a_reduction_constant_that_overflows_the_time_is_named():
    # ring all_reduce: 2 (p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma; with
    # gamma = 1e308 and n = 2^40 the last term is beyond a double
    with pytest.raises(sc.InvalidInputError, match=r"the predicted time overflows \(inf\) "
                                                   r"with alpha=0\.0, beta=0\.0, "
                                                   r"gamma=1e\+308"):
        sc.cost.predict("all_reduce", "ring", p=8, nbytes=2**40, alpha=0.0, beta=0.0,
                        gamma=1e308)


def test_constants_that_make_the_time_nan_or_the_model_fail_are_named():
    # reduce/nccl with gamma = 1e308 overflows (it computed inf - inf, nan, before its
    # chain priced the rest apart from the full steps); all_reduce/tree with
    # alpha = 1e308 failed inside its processor sharing: both are the constants' doing
    with pytest.raises(sc.InvalidInputError, match=r"the predicted time overflows \(inf\) "
                                                   r"with alpha=0\.0, beta=0\.0, gamma=1e\+308"):
        sc.cost.predict("reduce", "nccl", p=8, nbytes=2**20, alpha=0.0, beta=0.0,
                        gamma=1e308)
    with pytest.raises(sc.InvalidInputError, match=r"the predicted time fails with "
                                                   r"alpha=1e\+308"):
        sc.cost.predict("all_reduce", "tree", p=8, nbytes=2**20, alpha=1e308, beta=0.0)


def _flat_all_reduce(comm, x, *, op):
    yield from ()
    return x


def test_a_model_negative_at_small_constants_is_the_registrations_fault():
    # its infinite time at large constants is the registration's, not the constants'
    name = "test_negative_when_small"
    model = CostModel(time=lambda p, nbytes, alpha, beta, gamma:
                      float("inf") if alpha > 1 else -1.0,
                      traffic=lambda p, nbytes, itemsize: gpu_traffic(np.zeros(p),
                                                                      np.zeros(p)))
    sc.register("all_reduce", name, cost=model)(_flat_all_reduce)
    with pytest.raises(sc.RegistrationError, match=rf"all_reduce/{name}: its cost model's "
                                                   rf"time returned inf"):
        sc.cost.predict("all_reduce", name, p=4, nbytes=64, alpha=2.0, beta=0.0)


def test_an_overflow_of_a_numpy_time_is_shown_as_a_plain_number():
    name = "test_numpy_time"
    # alpha log2 p is a numpy float; with alpha = 1e308 on 8 ranks, inf
    model = CostModel(time=lambda p, nbytes, alpha, beta, gamma: alpha * np.log2(p),
                      traffic=lambda p, nbytes, itemsize: gpu_traffic(np.zeros(p),
                                                                      np.zeros(p)))
    sc.register("all_reduce", name, cost=model)(_flat_all_reduce)
    with np.errstate(over="ignore"), \
            pytest.raises(sc.InvalidInputError, match=r"the predicted time overflows \(inf\) "):
        sc.cost.predict("all_reduce", name, p=8, nbytes=64, alpha=1e308, beta=0.0)


def test_the_queries_take_a_size_string_as_simulate_does():
    # "1MiB" is 2**20 bytes: every query gives what it gives for 2**20.
    for query in (cost.predict, cost.lower_bound):
        assert query("all_reduce", **({"algorithm": "ring"} if query is cost.predict else {}),
                     p=4, nbytes="1MiB", alpha=A, beta=B) == query(
            "all_reduce", **({"algorithm": "ring"} if query is cost.predict else {}),
            p=4, nbytes=2**20, alpha=A, beta=B)
    sent = cost.traffic("all_reduce", "ring", p=4, nbytes="1MiB").sent
    assert sent.tolist() == [2 * 3 * 2**20 // 4] * 4
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes='1Mb' is not accepted: cannot "
                                                   r"read size '1Mb': a lowercase b is a bit"):
        cost.predict("all_reduce", "ring", p=4, nbytes="1Mb", alpha=A, beta=B)


def test_a_gather_of_one_element_a_rank_still_needs_every_rank_heard():
    """Only a scatter's empty blocks spare messages: a gather of one float32 per rank over
    8 ranks must bring 7 ranks' elements to the root, and a single-port round at most
    doubles the ranks whose data it holds: ceil(log2 8) = 3 alpha; (p-1) n = 28 bytes
    (mutant: min(p, count) applied to gather too gave latency 0)."""
    assert cost.lower_bound("gather", p=8, nbytes=4, alpha=A, beta=B) == pytest.approx(
        Bounds(latency=3 * A, bandwidth=28 * B, computation=0.0, message=A))


def test_a_scatter_latency_bound_counts_elements_of_its_itemsize():
    """4 bytes of 2-byte elements over 8 ranks: 2 blocks of one element, the root keeps
    one and sends the other: 1 alpha and 2 bytes (mutant: n // 4 counted one element and
    bounded the latency at 0)."""
    assert cost.lower_bound("scatter", p=8, nbytes=4, alpha=A, beta=B,
                            itemsize=2) == pytest.approx(
        Bounds(latency=A, bandwidth=2 * B, computation=0.0, message=A))
    # 16 bytes of 2-byte elements: 8 blocks, every rank reached: 3 alpha, 14 bytes
    assert cost.lower_bound("scatter", p=8, nbytes=16, alpha=A, beta=B,
                            itemsize=2).latency == pytest.approx(3 * A)


@pytest.mark.parametrize("collective, moved, reduced", [
    # p = 4 ranks of n = 4096 bytes (1024 float32), worked by hand (Chan et al. 2007):
    ("all_reduce", 2 * 3 * 4096 // 4, 3 * 4096 // 4),    # 2 (p-1)/p n; (p-1)/p n
    ("reduce_scatter", 3 * 4096 // 4, 3 * 4096 // 4),
    ("all_gather", 3 * 4096, 0),                         # (p-1) n: the others' inputs
    ("gather", 3 * 4096, 0),
    ("broadcast", 4096, 0),
    ("reduce", 4096, 3 * 4096 // 4),
    ("all_to_all", 3 * 4096 // 4, 0),
    ("scatter", 4096 - 1024, 0),                         # n less the root's own 256 floats
])
def test_lower_bounds_by_value(collective, moved, reduced):
    """Only time >= bound was asserted: a bound halved (all_gather, broadcast, all_to_all)
    passed every test. ceil(log2 4) = 2 rounds; one message at least."""
    bound = cost.lower_bound(collective, p=4, nbytes=4096, alpha=A, beta=B, gamma=G)
    assert bound == Bounds(pytest.approx(2 * A, rel=1e-15), pytest.approx(moved * B, rel=1e-15),
                           pytest.approx(reduced * G, rel=1e-15), A)


@pytest.mark.parametrize("collective, moved, reduced", [
    ("all_gather", 2 * 2**1023, 0), ("gather", 2 * 2**1023, 0),
    ("all_reduce", Fraction(4 * 2**1023, 3), Fraction(2 * 2**1023, 3)),
    ("reduce", 2**1023, Fraction(2 * 2**1023, 3))], ids=["all_gather", "gather", "all_reduce",
                                                       "reduce"])
def test_lower_bounds_of_sizes_near_the_largest_float_are_finite(collective, moved, reduced):
    """(p - 1) n as a float overflowed: a raw OverflowError for 2^1023 bytes on 3 ranks,
    whose bounds are finite (2 x 2^1023 x 1e-12 s); the exact product is rounded once."""
    bound = cost.lower_bound(collective, p=3, nbytes=2**1023, alpha=1e-6, beta=1e-12,
                             gamma=1e-13)
    assert bound.bandwidth == float(moved * Fraction(1e-12))
    assert bound.computation == float(Fraction(reduced) * Fraction(1e-13))
    with pytest.raises(sc.InvalidInputError, match=r"^a bound overflows a float: about "
                                                   r"2\^10\d\d bytes at 10000000000.0 s"):
        cost.lower_bound(collective, p=3, nbytes=2**1023, alpha=1e-6, beta=1e10)


def test_lower_bound_names_collectives_as_predict_does():
    """lower_bound refused a list with a raw TypeError, an unknown name with a plain
    InvalidInputError listing fewer collectives than it takes; torch's names work."""
    for bad in (["all_reduce"], "all_reduec"):
        with pytest.raises(sc.UnknownCollectiveError, match="all_gatherv, reduce_scatterv, "
                                                            "all_to_allv"):
            cost.lower_bound(bad, p=4, nbytes=64, alpha=1.0, beta=1.0)
    torch = cost.lower_bound("all_gather_into_tensor", p=4, nbytes=64, alpha=1.0, beta=0.5)
    # an all_gather's rank receives (p-1) n bytes: 3 x 64 x 0.5 = 96; 2 rounds of alpha
    assert (torch.bandwidth, torch.latency) == (96.0, 2.0)


G_LOW = 1e-11   # gamma well below beta (1e-9), as on real machines


def _times(amount, per_byte):
    """``amount`` bytes at ``per_byte`` s each, the exact product rounded once."""
    return float(Fraction(amount) * Fraction(per_byte))


def test_a_v_collectives_computation_bound_is_priced_at_gamma_not_beta():
    """The uneven branch priced the reduced bytes at beta (1e-9) instead of gamma
    (1e-11): 100 times the bound. reduce_scatterv of blocks 1024, 2048, 0, 4096 bytes
    on 4 ranks: (p - 1) n / p = 3 x 7168 / 4 = 5376 bytes to reduce per rank; the most
    one rank moves one way is n - 0 = 7168 bytes (rank 2 sends every other block)."""
    bound = cost.lower_bound("reduce_scatterv", p=4, nbytes=[1024, 2048, 0, 4096],
                             alpha=A, beta=B, gamma=G_LOW)
    assert bound.computation == _times(5376, G_LOW)
    assert bound.bandwidth == _times(7168, B)
    assert bound.latency == 2 * A   # ceil(log2 4)


def test_server_hosts_bounds_of_an_all_reduce_by_value():
    """With h server hosts an all_reduce's ranks need only send their n bytes once and
    hear the n reduced ones back (n, not 2 (p-1)/p n), and the (p - 1) n reduced bytes
    are shared by p + h engines. A mutant that halved the moved bytes, or shared the
    reduction among the p ranks only, passed. p = 4, h = 2, n = 4096: 4096 bytes one way;
    3 x 4096 / 6 = 2048 bytes to reduce."""
    bound = cost.lower_bound("all_reduce", p=4, nbytes=4096, alpha=A, beta=B, gamma=G_LOW,
                             hosts=2)
    assert bound.bandwidth == _times(4096, B)
    assert bound.computation == _times(2048, G_LOW)
    # without hosts: 2 x 3/4 x 4096 = 6144 bytes; 3 x 4096 / 4 = 3072 reduced
    plain = cost.lower_bound("all_reduce", p=4, nbytes=4096, alpha=A, beta=B, gamma=G_LOW)
    assert plain.bandwidth == _times(6144, B)
    assert plain.computation == _times(3072, G_LOW)


@pytest.mark.parametrize("collective, power", [
    ("all_gather", 1024),   # (p - 1) n = 2 x 2^1023 = 2^1024 bytes
    ("broadcast", 1023),    # n = 2^1023 bytes
])
def test_an_overflowing_bound_names_its_bytes_power_of_two_exactly(collective, power):
    """The message's exponent was only matched as 2^10dd: one more (bit_length, not
    bit_length - 1) passed."""
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^a bound overflows a float: about 2\^{power} bytes at "
                             rf"10000000000\.0 s per byte"):
        cost.lower_bound(collective, p=3, nbytes=2**1023, alpha=A, beta=1e10)
