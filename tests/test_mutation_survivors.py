"""Behaviour that mutants survived: each test here pins something that a mutant of
network/, runtime.py, collectives.py or check.py changed while the rest of the suite
passed (see the README's Testing section for the mutation run).

Expected values come from outside the code under test: nccl-tests' bandwidth definitions,
numpy's seeded generator, times worked out by hand on small machines, exact integer
arithmetic, and the tests' own max-min reference (``machines.maxmin_arrivals``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from conftest import make_data, reference_network, register_probe, run_flows
from machines import maxmin_arrivals
from reference import expected_outputs

import simcoll as sc
from simcoll import check
from simcoll.comm import Comm
from simcoll.network import FlowNetwork

# -- what a run reports ----------------------------------------------------------------

# A library algorithm of each collective whose outputs are checked.
CHECKED = {"all_reduce": "ring", "reduce_scatter": "ring", "all_gather": "ring",
           "broadcast": "binomial", "reduce": "binomial", "all_to_all": "pairwise",
           "gather": "binomial", "scatter": "binomial"}

# nccl-tests' PERFORMANCE.md, for p = 4 ranks: the data size S that algbw divides by
# (in units of the per-rank input buffer) and the busbw / algbw factor.
NCCL_TESTS_P4 = {
    "all_reduce": (1, 2 * 3 / 4),
    "reduce_scatter": (1, 3 / 4),
    "all_gather": (4, 3 / 4),
    "all_to_all": (1, 3 / 4),
    "gather": (4, 3 / 4),
    "scatter": (1, 3 / 4),
    "broadcast": (1, 1.0),
    "reduce": (1, 1.0),
}


@pytest.mark.parametrize("collective", sorted(NCCL_TESTS_P4))
def test_algbw_and_busbw_follow_nccl_tests(collective):
    p, nbytes = 4, 4 * 1024
    res = sc.simulate(reference_network(p), collective, algorithm=CHECKED[collective],
                      nbytes=nbytes)
    size, factor = NCCL_TESTS_P4[collective]
    assert res.algbw == pytest.approx(size * nbytes / res.time, rel=1e-12)
    assert res.busbw == pytest.approx(size * nbytes / res.time * factor, rel=1e-12)




def _one_element_off(collective: str, rank: int, delta):
    """Register (once) an algorithm that runs a library algorithm of the collective, then
    adds ``delta`` to the last element of ``rank``'s output; return its name."""
    name = f"_off_at_{rank}_by_{delta}"
    if (collective, name) in sc.list_algorithms(collective):
        return name
    inner = sc.get_algorithm(collective, CHECKED[collective]).program

    def off(comm: Comm, x, **kwargs):  # op and root as the collective takes them
        out = yield from inner(comm, x, **kwargs)
        if comm.rank == rank:
            out = out.copy()
            out[-1] += delta
        return out

    register_probe(collective, name)(off)
    return name


@pytest.mark.parametrize("collective", sorted(CHECKED))
@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_a_wrong_element_in_a_checked_output_is_flagged(collective, dtype):
    p, count = 4, 10
    coll = sc.COLLECTIVES[collective]
    root = 2 if coll.rooted else None
    rank = 2 if collective in ("reduce", "gather") else 3   # a rank whose output is checked
    inputs = make_data(p, count, dtype, seed=5)
    kwargs = {"root": root} if coll.rooted else {}
    exact = sc.simulate(reference_network(p), collective, data=inputs,
                        algorithm=_one_element_off(collective, rank, 0), **kwargs)
    assert exact.correct is True
    assert exact.max_error <= (1e-12 if dtype == "float64" else 0.0)
    # Integers must match exactly, so the error is what was added; a float reduction may
    # differ from the float64 reference by rounding, far below the 0.5 added.
    delta = 1 if dtype == "int32" else 0.5
    wrong = sc.simulate(reference_network(p), collective, data=inputs,
                        algorithm=_one_element_off(collective, rank, delta), **kwargs)
    assert wrong.correct is False
    assert wrong.max_error == pytest.approx(delta, abs=1e-9)


@pytest.mark.parametrize("op", ["product", "avg", "min", "max"])
def test_a_wrong_element_is_flagged_for_every_op(op):
    p = 4
    inputs = make_data(p, 10, "float32", sc.ReduceOp(op), seed=3)
    exact = sc.simulate(reference_network(p), "all_reduce", data=inputs, op=op,
                        algorithm=_one_element_off("all_reduce", 3, 0))
    assert exact.correct is True
    wrong = sc.simulate(reference_network(p), "all_reduce", data=inputs, op=op,
                        algorithm=_one_element_off("all_reduce", 3, 0.5))
    assert wrong.correct is False
    # AVG of floats scales the inputs by 1/p before the algorithm sees them (NCCL's
    # ncclDevPreMulSum), so an error in the algorithm's sum reaches the output whole.
    assert wrong.max_error == pytest.approx(0.5, rel=1e-5)


def _ulps_off(value: float, ulps: int) -> np.ndarray:
    out = np.array([value], dtype=np.float32)
    for _ in range(ulps):
        out = np.nextafter(out, np.float32(np.inf))
    return out


@pytest.mark.parametrize("op, ref, bound_ulps", [
    # float32, u = 2^-24, p = 4 (q = 3 roundings); float64's r = 2^-53 barely counts. The
    # inputs are 1.5, not whole numbers (whose sums every order computes exactly, and
    # which the check holds to the exact value).
    # SUM of four 1.5: q (u + r) sum|x| = 3 * 2^-24 * 6 = 2.25 * 2^-21, 2.25 ulps of 6.0
    # (2^-21 each above it). AVG: each 1.5 scaled by 1/4 (exact) rounds by u / 4 x 1.5,
    # and the sum of those four 0.375 by q u x 1.5: 4 u x 1.5 = 3 * 2^-23, 3 ulps of 1.5
    # (2^-23 each above it). PRODUCT: ((1 + u)^3 - 1) x 1.5^4 = 3 * 2^-24 x 5.0625 (and a
    # little), 1.9 ulps of 5.0625 (2^-21 each).
    ("sum", 6.0, 2), ("avg", 1.5, 3), ("product", 1.5**4, 1),
])
def test_the_rounding_allowance_is_q_roundings_of_the_dtype(op, ref, bound_ulps):
    p = 4
    coll = sc.COLLECTIVES["all_reduce"]
    inputs = [np.full(1, 1.5, dtype=np.float32) for _ in range(p)]
    op = sc.ReduceOp(op)
    for ulps, ok in [(bound_ulps, True), (bound_ulps + 1, False)]:
        outputs = [_ulps_off(ref, 0)] * (p - 1) + [_ulps_off(ref, ulps)]
        correct, worst = check.compare(coll, inputs, outputs, op, 0)
        assert correct is ok, (op, ulps)
        assert worst == float(outputs[-1][0]) - ref


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_an_average_that_underflows_into_subnormals_is_accepted(dtype):
    # (1 + 2) / 2 smallest subnormals: 1.5 of them. Each input is scaled by 1/2 first
    # (NCCL's ncclDevPreMulSum): half a subnormal rounds to even, 0, and two halves to
    # one, so the output is 1 subnormal; the allowance must cover the dtype's underflow,
    # not only float64's.
    tiny = np.finfo(dtype).smallest_subnormal
    inputs = [np.array([tiny], dtype=dtype), np.array([2 * tiny], dtype=dtype)]
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", data=inputs,
                      op="avg")
    assert res.correct is True
    np.testing.assert_array_equal(res.outputs[0], np.array([tiny], dtype=dtype))
    assert res.max_error == pytest.approx(0.5 * float(tiny), rel=1e-12)


def test_an_output_of_the_wrong_length_dtype_or_type_is_flagged():
    p = 3
    inputs = make_data(p, 6, "int64")
    for bad in ["short", "dtype", "list"]:
        name = f"_bad_output_{bad}"

        def program(comm: Comm, x, *, op=sc.ReduceOp.SUM, bad=bad):
            out = yield comm.all_reduce(x, algorithm="ring", op=op)
            if comm.rank == 1:
                out = {"short": out[:-1], "dtype": out.astype(np.int32),
                       "list": list(out)}[bad]
            return out

        register_probe("all_reduce", name)(program)
        # simulate refuses such an output naming the rank; the check itself, given one
        # (as by sc.check.compare), flags it
        with pytest.raises(sc.AlgorithmError, match="rank 1 in all_reduce/"):
            sc.simulate(reference_network(p), "all_reduce", algorithm=name, data=inputs)
        res = sc.simulate(reference_network(p), "all_reduce", algorithm=name, data=inputs,
                          check=False)
        correct, max_error = check.compare(sc.COLLECTIVES["all_reduce"], inputs, res.outputs,
                                           sc.ReduceOp.SUM, 0)
        assert correct is False, bad
        # Nothing to compare element by element: the error is infinite, never the 0.0
        # (exact) it read beside correct=False.
        assert max_error == math.inf, bad


@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max,
                    reason="longdouble is float64 on this platform")
def test_a_wrong_sum_beyond_float64_range_is_flagged():
    # Sums of longdouble values past float64's range: the rounding allowance must be
    # worked out in longdouble too, or it is infinite and lets any output through.
    big = np.longdouble("1e4000")
    inputs = [np.full(4, big * (r + 1), dtype=np.longdouble) for r in range(2)]
    name = _one_element_off("all_reduce", 1, big)
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=name, data=inputs)
    assert res.correct is False
    exact = sc.simulate(sc.topology.switch(2), "all_reduce",
                        algorithm=_one_element_off("all_reduce", 1, 0), data=inputs)
    assert exact.correct is True
    np.testing.assert_array_equal(exact.outputs[0], np.full(4, 3 * big, dtype=np.longdouble))


# -- the runtime: local work, started programs, what a deadlock names -----------------

def _register(collective, name, fn):
    register_probe(collective, name)(fn)
    return name


@pytest.mark.parametrize("slow", [None, 3.0])
def test_compute_queues_on_the_stream_and_a_slow_gpu_stretches_every_piece(slow):
    def program(comm: Comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(1.0)             # [0, 1] (x slow)
        yield comm.compute(0.5)             # issued once the first is done
        first = comm.compute(0.25)          # two issued at once queue one after the other
        second = comm.compute(0.125)
        yield second
        assert first.processed
        return x

    name = _register("all_reduce", "_compute_queue", program)
    faults = sc.Faults(slow={0: slow}) if slow else None
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=name, nbytes=8,
                      faults=faults)
    scale = slow or 1.0
    np.testing.assert_allclose(res.rank_times, [1.875 * scale, 1.875], rtol=1e-12)
    assert res.time == pytest.approx(1.875 * scale, rel=1e-12)


def test_the_second_started_program_is_named_program_1():
    def quiet(comm: Comm):
        yield comm.compute(1e-6)

    def failing(comm: Comm):
        yield comm.compute(2e-6)
        raise ValueError("boom")

    def program(comm: Comm, x, *, root=0):
        a = comm.start(quiet(comm))
        b = comm.start(failing(comm))
        yield a
        yield b
        return x

    name = _register("broadcast", "_second_start_fails", program)
    with pytest.raises(sc.AlgorithmError, match=r"rank 0 \(started program 1\) raised "
                                                r"ValueError"):
        sc.simulate(sc.topology.switch(2), "broadcast", algorithm=name, nbytes=8)


def test_a_deadlock_inside_a_group_says_so():
    def program(comm: Comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank in (1, 2):
            pair = comm.group([1, 2])
            if pair.rank == 0:
                yield pair.recv(src=1)      # group rank 1 (global rank 2) never sends
        yield from ()
        return x

    name = _register("all_reduce", "_group_deadlock", program)
    with pytest.raises(sc.DeadlockError) as info:
        sc.simulate(sc.topology.switch(3), "all_reduce", algorithm=name, nbytes=8)
    assert list(info.value.waiting) == [1]
    assert info.value.waiting[1].startswith("recv from 2 (tag 0) in matching context ")
    assert "rank 1 waits for recv from 2 (tag 0) in matching context " in str(info.value)


# -- the analytical model ----------------------------------------------------------------

def test_jitter_on_the_analytical_model_adds_the_seeded_draw():
    # One message of 1000 B over two 1 us, 1 GB/s hops: 2 us + 1 us, plus the first
    # draw of numpy's generator seeded as the faults say.
    topo = sc.topology.switch(2, bandwidth=1e9, latency=1e-6)
    for seed in range(3):
        res = sc.simulate(topo, "broadcast", algorithm="binomial", nbytes=1000,
                          network="analytical", faults=sc.Faults(jitter=1e-6, seed=seed))
        draw = np.random.default_rng(seed).uniform(0.0, 1e-6)
        assert res.time == pytest.approx(3e-6 + draw, rel=1e-12)


# -- the flow model: sub-unit rates, link faults, and its own bookkeeping ----------------

class GeneralSolverOnly(FlowNetwork):
    """The flow model with its shortcuts off: every flow through progressive filling."""

    fast = False


def pair(bandwidth: float, latency: float = 0.0) -> sc.Topology:
    topo = sc.Topology("pair")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=bandwidth, latency=latency)
    return topo


@pytest.mark.parametrize("network", [FlowNetwork, GeneralSolverOnly])
def test_fair_shares_below_one_byte_per_second(network):
    # Two flows of 1 and 2 bytes share a 1 B/s link: 0.5 B/s each until the first ends
    # at 2 s, then the second's last byte alone at 1 B/s: 3 s.
    flows = [(0.0, 0, 1, 1), (0.0, 0, 1, 2)]
    assert run_flows(pair(1.0), flows, network) == pytest.approx([2.0, 3.0], rel=1e-12)
    assert maxmin_arrivals(pair(1.0), flows) == pytest.approx([2.0, 3.0], rel=1e-12)


def cycle4(latency: float = 0.0) -> sc.Topology:
    topo = sc.Topology("cycle")
    gpus = [topo.add_gpu() for _ in range(4)]
    for i in range(4):
        topo.add_link(gpus[i], gpus[(i + 1) % 4], bandwidth=1e9, latency=latency)
    return topo


def _sends_at_once(comm: Comm, x, *, messages=()):
    """Every (src, dst, nbytes) message sent at time 0; each rank waits for its own."""
    events = []
    for src, dst, nbytes in messages:
        if comm.rank == src:
            events.append(comm.send(sc.VirtualBuffer.of(nbytes, np.uint8), dst))
        elif comm.rank == dst:
            events.append(comm.recv(src))
    for event in events:  # noqa: UP028 (SimPy sends values in, which a list cannot take)
        yield event
    return x


def send_at_once(topo, messages, faults):
    if ("all_to_all", "_sends_at_once") not in sc.list_algorithms("all_to_all"):
        register_probe("all_to_all", "_sends_at_once")(_sends_at_once)
    return sc.simulate(topo, "all_to_all", algorithm="_sends_at_once", nbytes=topo.nranks,
                       dtype=np.uint8, messages=tuple(messages), faults=faults)


def test_a_flow_moved_off_a_failed_link_after_its_latency_counts_from_its_drain_start():
    # 1 GB from gpu0 to gpu1, 0.1 s of latency on every link: it drains from 0.1 s and
    # has sent 0.25 GB when the link fails at 0.35 s; the 0.75 GB left go round the
    # other three links at 1 GB/s after the 0.2 s of latency they add: arrival at 1.3 s.
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.35)])
    res = send_at_once(cycle4(latency=0.1), [(0, 1, 10**9)], faults)
    assert res.time == pytest.approx(1.3, rel=1e-12)
    assert res.link_bytes[("gpu0", "gpu1")] == 25 * 10**7
    for hop in [("gpu0", "gpu3"), ("gpu3", "gpu2"), ("gpu2", "gpu1")]:
        assert res.link_bytes[hop] == 75 * 10**7, hop


def test_a_moved_flow_adds_its_bytes_to_what_its_new_links_carried():
    # gpu0 sends 1 GB to gpu1 and 1 GB to gpu3 at once, on separate links (1 GB/s each).
    # gpu0-gpu1 fails at 0.25 s: the 0.75 GB left of the first go 0 -> 3 -> 2 -> 1 and
    # share gpu0 -> gpu3 with the 0.75 GB left of the second: 0.5 GB/s each, both end
    # at 0.25 + 1.5 = 1.75 s.
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.25)])
    res = send_at_once(cycle4(), [(0, 1, 10**9), (0, 3, 10**9)], faults)
    assert res.time == pytest.approx(1.75, rel=1e-12)
    np.testing.assert_allclose(res.rank_times, [1.75, 1.75, 0.0, 1.75], rtol=1e-12)
    assert res.link_bytes[("gpu0", "gpu1")] == 25 * 10**7
    assert res.link_bytes[("gpu0", "gpu3")] == 10**9 + 75 * 10**7
    assert res.link_bytes[("gpu3", "gpu2")] == 75 * 10**7
    assert res.link_bytes[("gpu2", "gpu1")] == 75 * 10**7
    np.testing.assert_array_equal(res.bytes_sent, [2 * 10**9, 0, 0, 0])
    np.testing.assert_array_equal(res.bytes_received, [0, 10**9, 0, 10**9])


def test_every_message_lost_on_a_failed_link_is_named_the_first_16_shown():
    # 17 messages of 1 GB share a 1.7 GB/s link (0.1 GB/s each); it fails at 0.5 s with
    # 0.95 GB left of each.
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.5)])
    with pytest.raises(sc.LinkFailureError) as info:
        send_at_once(pair(1.7e9), [(0, 1, 10**9)] * 17, faults)
    assert info.value.lost == [(0, 1)] * 17
    text = str(info.value)
    assert "no route goes around it for 17 message(s) in flight: " in text
    shown = text.split("in flight: ")[1]
    assert shown == ", ".join(["gpu0->gpu1 (950000000 bytes left)"] * 16)


def test_a_lost_message_counts_its_bytes_left_from_its_drain_start():
    # 1 GB at 1 GB/s behind 0.1 s of latency; the only link fails at 0.5 s: 0.6 GB left.
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.5)])
    with pytest.raises(sc.LinkFailureError, match=r"gpu0->gpu1 \(600000000 bytes left\)"):
        send_at_once(pair(1e9, latency=0.1), [(0, 1, 10**9)], faults)


def test_change_link_without_tracked_flows_is_a_programming_error():
    env = simpy.Environment()
    net = FlowNetwork(env, pair(1e9), 2)
    with pytest.raises(RuntimeError,
                       match=r"^change_link needs track_flows\(\) before the run starts$"):
        net.change_link(0, 0.5)


def _bare_network(topo, flows, faults=()):
    """A bare flow model carrying ``(start, src, dst, nbytes)`` flows, with ``(at, link,
    factor)`` faults; returns the network after the run and each flow's arrival."""
    env = simpy.Environment()
    net = FlowNetwork(env, topo, topo.nranks)
    if faults:
        net.track_flows()
    arrived = {}
    for i, (start, src, dst, nbytes) in enumerate(flows):
        env.timeout(start).callbacks.append(
            lambda _e, i=i, src=src, dst=dst, n=nbytes: net.transfer(
                src, dst, n, lambda token: arrived.__setitem__(token, env.now), i))
    for at, index, factor in faults:
        env.timeout(at).callbacks.append(lambda _e, i=index, f=factor: net.change_link(i, f))
    env.run()
    return net, [arrived[i] for i in range(len(flows))]


@pytest.mark.parametrize("case", ["incast", "general", "moved", "slowed"])
def test_nothing_is_left_on_any_link_once_every_flow_has_arrived(case):
    # The per-link count of flows in flight decides whether a new flow may take the
    # one-event shortcut; a count left behind sends every later flow on that link down
    # the general path. Once all have arrived, every count is back to zero.
    if case == "incast":
        topo = sc.topology.switch(4, bandwidth=1e9, latency=0.0)
        flows = [(0.0, s, 0, 10**6 * s) for s in (1, 2, 3)]
        net, times = _bare_network(topo, flows)
        # 1 MB, 2 MB, 3 MB into one 1 GB/s link: 3 ms, 5 ms, 6 ms.
        assert times == pytest.approx([3e-3, 5e-3, 6e-3], rel=1e-12)
    elif case == "general":
        topo = sc.Topology("line")
        g = [topo.add_gpu() for _ in range(3)]
        topo.add_link(g[0], g[1], bandwidth=0.8e9)
        topo.add_link(g[1], g[2], bandwidth=1e9)
        flows = [(0.0, 0, 2, 10**9), (0.0, 1, 2, 25 * 10**7)]
        net, times = _bare_network(topo, flows)
        assert times == pytest.approx([1.4375, 0.5], rel=1e-12)   # issue 7's repro
    else:
        topo = cycle4()
        index = topo.link_index("gpu0", "gpu1")
        flows = [(0.0, 0, 1, 10**9), (0.0, 0, 3, 10**9), (0.0, 2, 1, 10**9)]
        if case == "moved":
            net, times = _bare_network(topo, flows, [(0.25, index, 0.0)])
            # The moved 0.75 GB shares 0->3 with flow 1 and 2->1 with flow 2 (0.5 GB/s
            # each on both): flows 1 and 2 have 0.75 GB left at 0.25 s and end at 1.75 s.
            assert times == pytest.approx([1.75, 1.75, 1.75], rel=1e-12)
        else:
            net, times = _bare_network(topo, flows, [(0.25, index, 0.5)])
            # 0.75 GB left at 0.5 GB/s: 1.75 s; the others never shared a link: 1 s.
            assert times == pytest.approx([1.75, 1.0, 1.0], rel=1e-12)
    assert net._load == [0] * len(net._load)
    assert all(not flows for flows in net._on_link)


# -- traces ------------------------------------------------------------------------------

def test_trace_spans_hold_their_tags_sizes_and_absolute_times():
    # One 1 GB/s link without latency, reductions at 10 GB/s on each GPU.
    topo = sc.Topology("traced pair")
    a, b = topo.add_gpu(reduce_bandwidth=1e10), topo.add_gpu(reduce_bandwidth=1e10)
    topo.add_link(a, b, bandwidth=1e9)

    def program(comm: Comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            sent = comm.send(sc.VirtualBuffer.of(100, np.uint8), dst=1, tag="a")
            empty = comm.send(sc.VirtualBuffer.of(0, np.uint8), dst=1, tag=7)
            block = sc.VirtualBuffer.of(1000, np.uint8)
            first = comm.reduce(block, block, op)
            second = comm.reduce(block, block, op)
            work = comm.compute(1e-6)
            for event in (sent, empty, first, second, work):  # noqa: UP028 (as above)
                yield event
        else:
            yield comm.recv(src=0, tag="a")
            yield comm.recv(src=0, tag=7)
        return x

    name = _register("all_reduce", "_traced_spans", program)
    res = sc.simulate(topo, "all_reduce", algorithm=name, nbytes=8, trace=True)
    spans = sorted(((e.kind, e.rank, e.peer, str(e.tag), e.nbytes, e.start, e.end)
                    for e in res.trace), key=lambda s: (s[0], s[5], s[3]))
    expected = [
        ("compute", 0, None, "None", 0, 0.0, 1e-6),
        ("message", 0, 1, "7", 0, 0.0, 0.0),            # empty, no latency: arrives at once
        ("message", 0, 1, "a", 100, 0.0, 100 / 1e9),
        ("reduce", 0, None, "None", 1000, 0.0, 1000 / 1e10),
        ("reduce", 0, None, "None", 1000, 1000 / 1e10, 2000 / 1e10),   # queued behind it
    ]
    assert [s[:5] for s in spans] == [s[:5] for s in expected]
    np.testing.assert_allclose([s[5:] for s in spans], [s[5:] for s in expected],
                               rtol=1e-12, atol=0)


# -- the output check on its own: infinities, NaNs, exact dtypes, long buffers ---------

INF, NAN = np.inf, np.nan


@pytest.mark.parametrize("a, b, out, ok", [
    (INF, 1.0, INF, True),          # an infinite sum must come back infinite...
    (INF, 1.0, 1e308, False),       # ...not finite
    (INF, 1.0, -INF, False),        # ...nor of the other sign
    (NAN, 1.0, NAN, True),          # a NaN sum comes back NaN
    (INF, -INF, NAN, True),         # inf - inf is NaN in any order
    (INF, -INF, INF, False),
    (1.0, 2.0, NAN, False),         # a NaN where the sum is finite is wrong
    (1.0, 2.0, 3.0, True),
    (1e308, 1e308, INF, True),      # a sum that overflows is infinite in any order
])
def test_sums_with_infinities_and_nans(a, b, out, ok):
    inputs = [np.array([a]), np.array([b])]
    outputs = [np.array([out])] * 2
    with np.errstate(all="raise"):        # the check itself raises no floating-point error
        correct, worst = check.compare(sc.COLLECTIVES["all_reduce"], inputs, outputs,
                                       sc.ReduceOp.SUM, 0)
    assert correct is ok
    # An infinite or NaN mismatch reports an error beyond every finite float64 error.
    assert worst == 0.0 if ok else worst >= np.finfo(np.float64).max


def test_an_infinite_mismatch_reports_an_infinite_error():
    inputs = [np.array([INF]), np.array([1.0])]
    res = check.compare(sc.COLLECTIVES["all_reduce"], inputs, [np.array([1.0])] * 2,
                        sc.ReduceOp.SUM, 0)
    assert res == (False, INF)


@pytest.mark.parametrize("collective, op", [("all_gather", "sum"), ("all_reduce", "max")])
def test_exact_comparisons_take_nan_for_nan_and_nothing_else(collective, op):
    coll, op = sc.COLLECTIVES[collective], sc.ReduceOp(op)
    inputs = [np.array([NAN, 1.0]), np.array([NAN, 2.0])]
    expected = expected_outputs(collective, inputs, op)
    assert check.compare(coll, inputs, expected, op, 0) == (True, 0.0)
    wrong = [x.copy() for x in expected]
    wrong[1][-1] = NAN                    # where the reference is a number
    correct, worst = check.compare(coll, inputs, wrong, op, 0)
    assert correct is False and worst >= np.finfo(np.float64).max


def test_exact_comparisons_report_the_largest_difference():
    coll = sc.COLLECTIVES["all_gather"]
    inputs = [np.array([5, -7], dtype=np.int32), np.array([100, 3], dtype=np.int32)]
    expected = expected_outputs("all_gather", inputs, sc.ReduceOp.SUM)
    wrong = [x.copy() for x in expected]
    wrong[0][3] += 3
    wrong[1][1] -= 2
    assert check.compare(coll, inputs, wrong, sc.ReduceOp.SUM, 0) == (False, 3.0)


def test_int64_outputs_are_compared_in_int64():
    # 2^60 + 1 and 2^60 are the same float64: the comparison must not go through it.
    coll = sc.COLLECTIVES["all_gather"]
    inputs = [np.array([2**60 + 1], dtype=np.int64), np.array([-(2**60) - 1], dtype=np.int64)]
    expected = expected_outputs("all_gather", inputs, sc.ReduceOp.SUM)
    assert check.compare(coll, inputs, expected, sc.ReduceOp.SUM, 0)[0] is True
    wrong = [x.copy() for x in expected]
    wrong[1][0] -= 1
    assert check.compare(coll, inputs, wrong, sc.ReduceOp.SUM, 0)[0] is False


@pytest.mark.parametrize("collective, count, index", [
    ("all_reduce", 65536 + 10, 0),             # first element of the first 65536-block
    ("all_reduce", 65536 + 10, 65536 + 9),     # last element, in the second block
    ("reduce", 3 * 65536, 2 * 65536),          # first element of the third block
    ("all_gather", 40000, 79999),              # an output longer than one block
    ("all_to_all", 70000, 0),
])
def test_every_element_of_a_long_buffer_is_checked(collective, count, index):
    p = 2
    coll = sc.COLLECTIVES[collective]
    inputs = make_data(p, count, "int32", seed=1)
    expected = expected_outputs(collective, inputs, sc.ReduceOp.SUM)
    rank = 0 if collective == "reduce" else 1
    assert check.compare(coll, inputs, expected, sc.ReduceOp.SUM, 0) == (True, 0.0)
    wrong = [None if x is None else x.copy() for x in expected]
    wrong[rank][index] += 1
    assert check.compare(coll, inputs, wrong, sc.ReduceOp.SUM, 0) == (False, 1.0)


@pytest.mark.parametrize("collective", ["all_gather", "all_reduce"])
def test_a_short_output_fails_the_check_whatever_else_matches(collective):
    coll = sc.COLLECTIVES[collective]
    inputs = make_data(3, 5, "int32")
    outputs = expected_outputs(collective, inputs, sc.ReduceOp.SUM)
    outputs = [outputs[0], outputs[1][:-1], outputs[2]]
    assert check.compare(coll, inputs, outputs, sc.ReduceOp.SUM, 0)[0] is False


# -- the runtime: nodes, the event cap, and what a lone flow costs -----------------------

def test_node_of_names_each_rank_s_server():
    seen = {}

    def program(comm: Comm, x, *, op=sc.ReduceOp.SUM):
        seen[comm.rank] = [comm.node_of(r) for r in range(comm.size)]
        yield from ()
        return x

    name = _register("all_reduce", "_nodes_seen", program)
    sc.simulate(sc.topology.cluster(3, 2), "all_reduce", algorithm=name, nbytes=8)
    assert seen == {r: [0, 0, 1, 1, 2, 2] for r in range(6)}


def _spinner(spins: int) -> str:
    def program(comm: Comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            for _ in range(spins):
                yield comm.compute(0)       # work that takes no time: no queued event
        return x
        yield

    return _register("all_reduce", f"_instant_spins_{spins}", program)


@pytest.mark.parametrize("spins, stopped", [(50, False), (51, True)])
def test_max_events_allows_exactly_that_many_instant_events(spins, stopped):
    name = _spinner(spins)
    if stopped:
        with pytest.raises(sc.RunLimitError, match=r"event limit max_events=50 at t=0 s"):
            sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=name, nbytes=8,
                        max_events=50)
    else:
        res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=name, nbytes=8,
                          max_events=50)
        assert res.time == 0.0


def test_the_event_limit_on_instant_events_names_the_spinning_rank():
    with pytest.raises(sc.RunLimitError) as info:
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=_spinner(51), nbytes=8,
                    max_events=50)
    assert "rank 0 still running" in str(info.value)
    assert info.value.running == ["rank 0"]


class CountingEnvironment(simpy.Environment):
    """Counts the events scheduled (the work a simulation costs, event by event)."""

    scheduled = 0

    def schedule(self, event, priority=1, delay=0):
        self.scheduled += 1
        super().schedule(event, priority, delay)


@pytest.mark.parametrize("sizes, events", [((1000, 2000, 3000), 6), ((1000, 1000, 1000), 4)])
def test_a_flow_alone_on_its_links_costs_one_event(sizes, events):
    # Three disjoint transfers through a switch: one start event each (this test's) and
    # one arrival event per distinct arrival instant (arrivals at one instant share one);
    # no re-solving, before or after.
    topo = sc.topology.switch(6, bandwidth=1e9, latency=1e-6)
    env = CountingEnvironment()
    net = FlowNetwork(env, topo, 6)
    arrived = []
    for (src, dst), size in zip([(0, 1), (2, 3), (4, 5)], sizes):
        env.timeout(0.0).callbacks.append(
            lambda _e, s=src, d=dst, n=size: net.transfer(s, d, n, arrived.append, (s, d)))
    env.run()
    assert sorted(arrived) == [(0, 1), (2, 3), (4, 5)]
    assert env.now == pytest.approx(2e-6 + max(sizes) / 1e9, rel=1e-12)
    assert env.scheduled == events


def test_unknown_names_list_the_known_ones_comma_separated():
    with pytest.raises(sc.UnknownCollectiveError,
                       match=r"^unknown collective 'allreduce' \(did you mean 'all_reduce'\?\); "
                             r"known collectives: all_reduce, "
                             r"reduce_scatter, all_gather, broadcast, reduce, all_to_all, "
                             r"gather, scatter, barrier, all_gatherv, reduce_scatterv, "
                             r"all_to_allv \(and torch's all_gather_into_tensor, "
                             r"reduce_scatter_tensor, all_to_all_single\)$"):
        sc.simulate(sc.topology.switch(2), "allreduce", algorithm="ring", nbytes=8)
    with pytest.raises(sc.UnknownNetworkError,
                       match=r"^unknown network model 'fluid'; known models: analytical, "
                             r"flow, flow_rtt$"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8,
                    network="fluid")
