"""Concurrent work inside a rank: ``comm.start`` and collectives started from a rank
program (``comm.all_reduce(...)``), side by side, each in a context of its own."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest
from conftest import ALPHA, BETA, make_data, register_probe
from reference import assert_outputs_match

import simcoll as sc
from simcoll.comm import Comm


def network(p):
    """The alpha-beta reference network with free reductions."""
    return sc.topology.switch(p, bandwidth=1 / BETA, latency=ALPHA / 2)


@register_probe("all_reduce", "_halves_side_by_side")
def halves_side_by_side(comm: Comm, x, *, op=sc.ReduceOp.SUM):
    first, second = comm.split_buffer(x, 2)
    a = comm.all_reduce(first, algorithm="ring", op=op.combining)
    b = comm.all_reduce(second, algorithm="ring", op=op.combining)
    return comm.join([(yield a), (yield b)])


@register_probe("all_reduce", "_halves_one_after_the_other")
def halves_one_after_the_other(comm: Comm, x, *, op=sc.ReduceOp.SUM):
    first, second = comm.split_buffer(x, 2)
    a = yield comm.all_reduce(first, algorithm="ring", op=op.combining)
    b = yield comm.all_reduce(second, algorithm="ring", op=op.combining)
    return comm.join([a, b])


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("op", [sc.ReduceOp.SUM, sc.ReduceOp.AVG, sc.ReduceOp.MAX])
def test_two_started_all_reduces_give_the_whole_result(p, op):
    inputs = make_data(p, 16 * p + 3, "float64", op)
    for name in ("_halves_side_by_side", "_halves_one_after_the_other"):
        res = sc.simulate(network(p), "all_reduce", algorithm=name, data=inputs, op=op)
        assert res.correct
        assert_outputs_match(res, inputs, op)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_side_by_side_halves_share_the_links_fairly(p):
    # Hand-worked: the two rings step in lockstep, so in each of their 2(p-1) steps two
    # messages of n/(2p) bytes share every link: alpha + 2 (n/(2p)) beta per step, the
    # time of one ring on all n bytes. One after the other they pay the latency twice.
    n = 8 * 2 * p * 1000
    side = sc.simulate(network(p), "all_reduce", algorithm="_halves_side_by_side", nbytes=n)
    seq = sc.simulate(network(p), "all_reduce", algorithm="_halves_one_after_the_other",
                      nbytes=n)
    assert side.time == pytest.approx(2 * (p - 1) * (ALPHA + n / p * BETA), rel=1e-12)
    assert seq.time == pytest.approx(4 * (p - 1) * ALPHA + 2 * (p - 1) * n / p * BETA,
                                     rel=1e-12)
    # Same bytes either way: 2 (p-1)/p n per rank.
    np.testing.assert_array_equal(side.bytes_sent, [2 * (p - 1) * n // p] * p)
    np.testing.assert_array_equal(seq.bytes_sent, side.bytes_sent)


@register_probe("all_gather", "_gather_and_broadcast_at_once")
def gather_and_broadcast(comm: Comm, x):
    """An all_gather built from p broadcasts started at once, one per root: p collectives
    in flight between the same ranks, whose messages must not cross."""
    handles = [comm.broadcast(x, root=r, algorithm="binomial") for r in range(comm.size)]
    parts = []
    for h in handles:
        parts.append((yield h))
    return comm.join(parts)


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_many_concurrent_collectives_between_the_same_ranks_never_cross(p):
    inputs = make_data(p, 7, "int32")
    res = sc.simulate(network(p), "all_gather", algorithm="_gather_and_broadcast_at_once",
                      data=inputs)
    assert res.correct
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)


@register_probe("all_reduce", "_node_groups_then_leaders")
def node_groups_then_leaders(comm: Comm, x, *, op=sc.ReduceOp.SUM):
    """Reduce inside each node, all-reduce among node leaders, broadcast inside the node:
    started collectives on groups."""
    nodes = [comm.node_of(r) for r in range(comm.size)]
    local = comm.group([r for r in range(comm.size) if nodes[r] == nodes[comm.rank]])
    reduced = yield local.collective("reduce", x, algorithm="binomial", op=op.combining,
                                     root=0)
    if local.rank == 0:
        leaders = comm.group([nodes.index(k) for k in sorted(set(nodes))])
        reduced = yield leaders.all_reduce(reduced, algorithm="ring", op=op.combining)
    # every rank passes a buffer (the non-roots' contents are not read), as in torch
    return (yield local.broadcast(x if reduced is None else reduced, root=0))


def test_started_collectives_work_on_groups():
    topo = sc.topology.cluster(3, 2)
    inputs = make_data(6, 11, "int64")
    res = sc.simulate(topo, "all_reduce", algorithm="_node_groups_then_leaders", data=inputs)
    assert res.correct
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)


def test_start_runs_a_program_alongside_and_returns_its_value():
    events = []

    def side(comm: Comm, delay):
        yield comm.compute(delay)
        events.append(("side done", comm.rank, comm.now))
        return delay * 2

    @register_probe("broadcast", "_start_demo")
    def demo(comm: Comm, x, *, root=0):
        h = comm.start(side(comm, 3e-6))
        peer = 1 - comm.rank
        yield comm.sendrecv(x, dst=peer, src=peer)
        events.append(("main at", comm.rank, comm.now))
        value = yield h
        assert value == 6e-6
        return x

    res = sc.simulate(sc.topology.switch(2, latency=0.5e-6, bandwidth=1e12),
                      "broadcast", algorithm="_start_demo", nbytes=0)
    # The exchange (1 us of latency, no bytes) ends before the 3 us of compute.
    assert ("main at", 0, pytest.approx(1e-6)) in events
    assert ("side done", 1, pytest.approx(3e-6)) in events
    assert res.time == pytest.approx(3e-6)


def test_an_exception_in_a_started_program_names_the_rank():
    def failing(comm: Comm):
        yield comm.compute(1e-6)
        raise ValueError("boom")

    @register_probe("broadcast", "_start_fails")
    def fails(comm: Comm, x, *, root=0):
        h = comm.start(failing(comm))
        yield h
        return x

    with pytest.raises(sc.AlgorithmError, match=r"rank 0 \(started program 0\) raised "
                                                r"ValueError in broadcast/_start_fails: boom"):
        sc.simulate(network(2), "broadcast", algorithm="_start_fails", nbytes=8)


def test_a_started_collective_s_output_is_checked_as_a_top_level_run_s():
    """An all_gather that hands back its input: simulate refused it, but started from a
    rank program its 4 elements reached the caller in place of the 8 of its output."""
    @register_probe("all_gather", "_hands_back_its_input")
    def hands_back(comm: Comm, x):
        yield comm.compute(1e-6)
        return x

    def starts(comm: Comm):
        out = yield comm.all_gather(np.ones(4, np.float32), algorithm="_hands_back_its_input")
        return out.size

    message = (r"rank 0 in all_gather/_hands_back_its_input returned a float32 array of "
               r"shape \(4,\); its output is 8 float32 elements")
    with pytest.raises(sc.AlgorithmError, match=message):
        sc.run_program(network(2), starts)
    with pytest.raises(sc.AlgorithmError, match=message):
        sc.simulate(network(2), "all_gather", algorithm="_hands_back_its_input",
                    data=[np.ones(4, np.float32)] * 2)

    def starts_on_a_group(comm: Comm):   # a data-free one too, named by its group rank
        group = comm.group([1, 0])
        yield group.all_gather(sc.VirtualBuffer.of(4, np.float32),
                               algorithm="_hands_back_its_input")

    with pytest.raises(sc.AlgorithmError, match=r"rank 1 of group \[1, 0\] \(world rank 0\) "
                                                r"in all_gather/_hands_back_its_input "
                                                r"returned 4 float32 elements; its output is 8"):
        sc.run_program(network(2), starts_on_a_group)


class _EqualityRaises:
    def __eq__(self, other):
        raise RuntimeError("no comparison")

    __hash__ = object.__hash__

    def __repr__(self):
        return "_EqualityRaises()"


class _EqualityIsNotABool:
    def __eq__(self, other):
        return [True]   # truthy, but not an answer

    __hash__ = object.__hash__

    def __repr__(self):
        return "_EqualityIsNotABool()"


_SHARED = _EqualityRaises()


def _ragged(*parts):
    """An object array holding ``parts``, arrays of different lengths."""
    held = np.empty(len(parts), dtype=object)
    held[:] = parts
    return held


@pytest.mark.parametrize("weights, agree", [
    (lambda rank: np.array([1.0, np.nan]), True),
    (lambda rank: float("nan"), True),
    (lambda rank: (np.arange(3), {"k": [float("nan")]}), True),
    (lambda rank: np.array([1, rank]), False),
    (lambda rank: np.arange(2, dtype=np.int32 if rank else np.int64), False),
    # ragged sizes as an object array of arrays: np.array_equal raised 'ambiguous'
    (lambda rank: _ragged(np.arange(2), np.arange(3)), True),
    (lambda rank: _ragged(np.arange(2), np.arange(3) + rank), False),
    # containers agree only with their own type and keys; a value whose == raises or
    # answers no bool agrees with nothing but itself
    (lambda rank: (1, 2) if rank == 0 else [1, 2], False),
    (lambda rank: {"k": 1} if rank == 0 else {"k": 1, "j": 2}, False),
    (lambda rank: {"k": 1} if rank == 0 else types.MappingProxyType({"k": 1}), False),
    (lambda rank: _EqualityRaises(), False),
    (lambda rank: _EqualityIsNotABool(), False),
    (lambda rank: _SHARED, True),
])
def test_members_agree_on_arrays_and_nan_held_by_a_value_parameter(weights, agree):
    """A Value parameter may hold an array: the agreement check's != raised numpy's
    'truth value of an array is ambiguous', and NaN was refused as unlike itself."""
    @register_probe("all_gather", "_takes_weights", weights=None)
    def takes_weights(comm: Comm, x, *, weights):
        return (yield comm.all_gather(x, algorithm="ring"))

    def starts(comm: Comm):
        yield comm.all_gather(np.ones(2, np.float32), algorithm="_takes_weights",
                              weights=weights(comm.rank))

    if agree:
        assert sc.run_program(network(2), starts).time > 0
    else:
        with pytest.raises(sc.AlgorithmError, match=r"rank 1: started a collective with .*"
                                                    r"weights=.* where rank 0 started it "
                                                    r"with .*weights="):
            sc.run_program(network(2), starts)


def test_a_deadlocked_started_collective_is_reported():
    @register_probe("broadcast", "_mismatched_starts")
    def mismatched(comm: Comm, x, *, root=0):
        # Rank 0 starts one collective, rank 1 none: rank 0's started program waits forever.
        if comm.rank == 0:
            yield comm.all_reduce(x, algorithm="ring")
        return x

    with pytest.raises(sc.DeadlockError, match=r"rank 0 \(started program 0: "
                                               r"all_reduce/ring\) waits for recv from 1"
                       ) as info:
        sc.simulate(network(2), "broadcast", algorithm="_mismatched_starts", nbytes=8)
    # Rank 0's own program waits for the one it started, not for that one's receive.
    assert ("rank 0 waits for rank 0 (started program 0: all_reduce/ring) to end; "
            in str(info.value))


def test_start_refuses_what_is_not_a_generator_and_bad_collectives():
    @register_probe("broadcast", "_bad_starts", case="plain")
    def bad(comm: Comm, x, *, root=0, case):
        if case == "plain":
            comm.start(lambda: None)
        elif case == "unknown":
            comm.all_reduce(x, algorithm="nope")
        elif case == "hosts":
            comm.all_reduce(x, algorithm="parameter_server")
        yield from ()
        return x

    hosted = sc.topology.switch(2, servers=1)
    for case, match, machine in [("plain", "start\\(\\) needs a generator", network(2)),
                                 ("unknown", "unknown algorithm 'nope'", network(2)),
                                 ("hosts", "runs programs on this machine's server hosts",
                                  hosted)]:
        with pytest.raises(sc.AlgorithmError, match=match):
            sc.simulate(machine, "broadcast", algorithm="_bad_starts", nbytes=8, case=case)


def _start_with(comm: Comm, root, x):
    return (yield comm.collective("broadcast" if root is not None else "all_gather", x,
                                  algorithm="binomial" if root is not None else "ring",
                                  root=root))


@pytest.mark.parametrize("root, x, match", [
    # True ran as rank 1; 1.5 deadlocked a ring reduce at t=0; 2.0 broke the binomial
    # tree's bit arithmetic with a TypeError; '1' raised Python's TypeError.
    (True, np.ones(4), r"rank 0: root=True is not accepted; use an integer >= 0 and <= 1 "
                       r"\(a rank of this communicator\)"),
    (1.5, np.ones(4), r"rank 0: root=1.5 is not accepted"),
    (1.0, np.ones(4), r"rank 0: root=1.0 is not accepted"),
    ("1", np.ones(4), r"rank 0: root='1' is not accepted"),
    (2, np.ones(4), r"rank 0: root=2 is not accepted; use an integer >= 0 and <= 1"),
    # simulate refuses these dtypes; started, a bool or complex all_gather ran and an
    # object array failed in numpy ("Cannot change data-type for array of references")
    (None, np.ones(4, bool), r"rank 0: x's dtype bool is not accepted; use one of numpy's "
                             r"integer or floating dtypes"),
    (None, np.ones(4, complex), r"rank 0: x's dtype complex128 is not accepted"),
    (None, np.array([None] * 4), r"rank 0: x's dtype object is not accepted"),
    (None, sc.VirtualBuffer.of(4, np.bool_), r"rank 0: x's dtype bool is not accepted"),
])
def test_a_started_collective_checks_its_root_and_dtype_as_simulate_does(root, x, match):
    with pytest.raises(sc.AlgorithmError, match=match) as info:
        sc.run_program(network(2), _start_with, root, x)
    assert isinstance(info.value.__cause__, sc.CommUsageError)


def test_a_start_refused_for_its_name_leaves_the_generator_free_to_start():
    """start(gen, name=42) marked the generator as started before refusing the name, so
    starting it again with a good name was refused as "already started"."""
    def program(comm: Comm):
        def work():
            yield comm.sleep(1e-6)
            return "done"
        gen = work()
        with pytest.raises(sc.CommUsageError, match=r"start\(name=42\) is not accepted"):
            comm.start(gen, name=42)
        return (yield comm.start(gen, name="work"))

    assert sc.run_program(network(2), program).outputs == ["done", "done"]


@pytest.mark.parametrize("case, match", [
    # Rank 0 gives itself 2 elements and rank 1 one; rank 1 says the reverse: each got 3
    # elements with no error where the sizes disagree.
    ("splits", r"rank 1: started a collective with all_gatherv of float32 elements, "
               r"algorithm='ring', splits=\(1, 2\) where rank 0 started it with all_gatherv "
               r"of float32 elements, algorithm='ring', splits=\(2, 1\)"),
    # A v-collective's ranks with buffers of two dtypes failed mid-run in a join or a
    # reduction, or ran (an all_to_allv whose ranks exchanged nothing).
    ("v dtype", r"rank 1: started a collective with all_to_allv of float64 elements, "
                r".* where rank 0 started it with all_to_allv of float32 elements"),
    # A non-root's broadcast buffer of another dtype or count went unread.
    ("broadcast dtype", r"rank 1: started a collective with broadcast of 4 float64 "
                        r"elements.* where rank 0 started it with broadcast of 4 float32"),
    ("broadcast count", r"rank 1: started a collective with broadcast of 5 float32 "
                        r"elements.* where rank 0 started it with broadcast of 4 float32"),
    ("op", r"rank 1: started a collective with all_reduce .*op='SUM' where rank 0 "
           r".*op='MAX'"),
    ("algorithm", r"rank 1: started a collective with all_reduce of 4 float32 elements, "
                  r"algorithm='direct'.* where rank 0 started it with all_reduce of 4 "
                  r"float32 elements, algorithm='ring'"),
    # An all_gather of 256 elements on rank 0 and 128 on rank 1 ran and returned 384 on
    # each; an all_reduce against a reduce_scatter deadlocked without saying why.
    ("count", r"rank 1: started a collective with all_gather of 128 float32 elements, "
              r".* where rank 0 started it with all_gather of 256 float32 elements"),
    ("dtype", r"all_reduce of 4 float64 elements.* where rank 0 started it with "
              r"all_reduce of 4 float32 elements"),
    ("collective", r"rank 1: started a collective with reduce_scatter of 4 float32 "
                   r"elements.* where rank 0 started it with all_reduce of 4 float32"),
])
def test_members_that_start_a_collective_differently_are_refused(case, match):
    def program(comm):
        if case == "count":
            return (yield comm.all_gather(np.ones(256 if comm.rank == 0 else 128,
                                                  np.float32)))
        if case == "dtype":
            return (yield comm.all_reduce(np.ones(4, np.float32 if comm.rank == 0
                                                  else np.float64)))
        if case == "collective":
            x = np.ones(4, np.float32)
            if comm.rank == 0:
                return (yield comm.all_reduce(x, algorithm="ring"))
            return (yield comm.reduce_scatter(x, algorithm="ring"))
        if case == "v dtype":
            x = np.ones(2, np.float32 if comm.rank == 0 else np.float64)
            return (yield comm.all_to_allv(x, [[2, 0], [0, 2]], algorithm="direct"))
        if case.startswith("broadcast"):
            count = 5 if case == "broadcast count" and comm.rank == 1 else 4
            dtype = np.float64 if case == "broadcast dtype" and comm.rank == 1 else np.float32
            return (yield comm.broadcast(np.ones(count, dtype)))
        if case == "splits":
            splits = [2, 1] if comm.rank == 0 else [1, 2]
            x = np.ones(splits[comm.rank], np.float32)
            return (yield comm.all_gatherv(x, splits))
        x = np.ones(4, np.float32)
        if case == "op":
            return (yield comm.all_reduce(x, op="max" if comm.rank == 0 else "sum"))
        return (yield comm.all_reduce(x, algorithm="ring" if comm.rank == 0 else "direct"))
    with pytest.raises(sc.AlgorithmError, match=match):
        sc.run_program(network(2), program)


@pytest.mark.parametrize("x", [None, [1.0, 2.0]])
def test_a_started_collective_needs_a_buffer(x):
    def program(comm):
        return (yield comm.all_reduce(x))
    with pytest.raises(sc.AlgorithmError, match=r"rank 0: all_reduce needs x, this rank's "
                                                 r"buffer \(a numpy array or a VirtualBuffer\)"):
        sc.run_program(network(2), program)


@pytest.mark.parametrize("collective, algorithm", [
    ("scatter", "binomial"), ("broadcast", "pipeline"), ("broadcast", "scatter_allgather"),
    ("broadcast", "binomial")])
def test_a_broadcast_or_scatter_needs_a_buffer_on_every_rank(collective, algorithm):
    """Non-roots were allowed x=None, which only a binomial broadcast read past; the
    others failed inside a rank with a TypeError. Every rank passes a buffer, as torch's
    do (only the root's contents are read)."""
    def program(comm):
        x = np.arange(8.0) if comm.rank == 0 else None
        return (yield comm.collective(collective, x, algorithm=algorithm))
    with pytest.raises(sc.AlgorithmError, match=rf"rank 1: {collective} needs x, this rank's "
                                                 r"buffer"):
        sc.run_program(network(2), program)

    def everyone(comm):
        x = np.arange(8.0) if comm.rank == 0 else np.zeros(8)
        return (yield comm.collective(collective, x, algorithm=algorithm))
    outputs = sc.run_program(network(2), everyone).outputs
    expected = [np.arange(4.0), np.arange(4.0, 8.0)] if collective == "scatter" else \
        [np.arange(8.0)] * 2
    for out, want in zip(outputs, expected):
        np.testing.assert_array_equal(out, want)


def overlap_step(comm: Comm, x, *, compute):
    """A training-step-like program: compute, then an all-reduce started while a second
    compute span runs."""
    yield comm.compute(compute)
    reduced = comm.all_reduce(x, algorithm="ring")
    yield comm.compute(compute)
    return (yield reduced)


@pytest.mark.parametrize("p", [2, 4])
def test_run_program_runs_any_rank_program(p):
    n = 4 * p * 1000
    compute = 1e-4
    res = sc.run_program(network(p), overlap_step, sc.VirtualBuffer.of(n // 4, np.float32),
                         compute=compute)
    ring = 2 * (p - 1) * (ALPHA + n / p * BETA)
    # The all-reduce starts after the first compute span and overlaps the second.
    assert res.time == pytest.approx(compute + max(compute, ring), rel=1e-12)
    assert all(out.count == n // 4 for out in res.outputs)
    np.testing.assert_array_equal(res.bytes_sent, [2 * (p - 1) * n // p] * p)
    assert res.messages == 2 * (p - 1) * p
    np.testing.assert_allclose(res.rank_times, [res.time] * p)


def test_run_program_refuses_what_is_not_a_program():
    with pytest.raises(sc.InvalidInputError, match="is not a generator function"):
        sc.run_program(network(2), lambda comm: None)


@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling", "tree", "naive"])
@pytest.mark.parametrize("p", [1, 2])
def test_a_started_collective_works_on_a_snapshot_and_returns_read_only(algorithm, p):
    def program(comm: Comm, _):
        mine = np.full(3, comm.rank + 1.0)
        h = comm.all_reduce(mine, algorithm=algorithm)
        mine[:] = 100.0  # after the start: the collective must not see it
        out = yield h
        assert not out.flags.writeable   # inside the program, as comm.reduce's
        return out

    res = sc.run_program(network(p), program, None)
    expected = sum(range(1, p + 1))
    for out in res.outputs:
        assert out.tolist() == [expected] * 3
        assert out.flags.writeable   # handed back to the caller as simulate's are


def test_a_parameter_server_starts_where_its_servers_are_ranks():
    # Without server hosts the servers are ranks and no host program is needed: started
    # from a program it must give what simulate gives (it was refused for "server hosts"
    # the machine does not have). Rank r holds r + 1 everywhere: the sum is p(p+1)/2.
    p = 4

    def program(comm):
        x = np.full(8, comm.rank + 1.0)
        return (yield comm.all_reduce(x, algorithm="parameter_server", servers=2))

    started = sc.run_program(network(p), program)
    direct = sc.simulate(network(p), "all_reduce", algorithm="parameter_server", servers=2,
                         data=[np.full(8, r + 1.0) for r in range(p)])
    assert [out.tolist() for out in started.outputs] == [[10.0] * 8] * p
    assert started.time == pytest.approx(direct.time, rel=1e-12)
    assert started.bytes_sent.tolist() == direct.bytes_sent.tolist()

    # With server hosts, the world communicator would need their programs: refused. A
    # group of GPUs has no hosts, so its servers are ranks again.
    hosted = sc.topology.switch(p, servers=1)
    with pytest.raises(sc.AlgorithmError, match="runs programs on this machine's server "
                                                "hosts, which only a top-level simulate"):
        sc.run_program(hosted, program)

    def in_group(comm):
        group = comm.group([0, 1, 2, 3]) if comm.rank < p else None
        if group is None:
            return None
        x = np.full(8, comm.rank + 1.0)
        return (yield group.all_reduce(x, algorithm="parameter_server"))

    res = sc.run_program(hosted, in_group)
    assert [out.tolist() for out in res.outputs[:p]] == [[10.0] * 8] * p
    assert res.host_bytes_sent.tolist() == [0]


@pytest.mark.parametrize("shape", [(1, 8), (2, 4), (8, 1), ()])
def test_a_started_collective_refuses_an_nd_array_naming_its_shape(shape):
    # A (1, 8) buffer was cut by rows: 6.192 us and [64, 64, 32, 32] bytes where 8
    # elements take 6.048 us and 48 bytes a rank.
    topo = sc.topology.switch(4, bandwidth=1e9, latency=0.5e-6)

    def program(comm, x):
        return (yield comm.all_reduce(x, algorithm="ring"))

    with pytest.raises(sc.AlgorithmError, match=rf"rank 0: x has shape "
                                                rf"{re.escape(str(shape))}; pass 1-D "
                                                rf"arrays \(use x.ravel\(\)\)"):
        sc.run_program(topo, program, np.ones(shape, np.float32))
    if shape:
        # Raveled: 2(p-1) = 6 steps of 2 x 0.5 us + 8 B / 1 GB/s; 2(p-1)/p x 32 B a rank.
        res = sc.run_program(topo, program, np.ones(shape, np.float32).ravel())
        assert res.time == pytest.approx(6 * (1e-6 + 8e-9), rel=1e-12)
        assert res.bytes_sent.tolist() == [48] * 4


def test_a_generator_starts_once():
    # The second start of one generator resumed it past its sleep at t=0: (None, 'done').
    def leaf(comm):
        yield comm.sleep(1e-6)
        return "done"

    def twice(comm):
        g = leaf(comm)
        a, b = comm.start(g), comm.start(g)
        return ((yield a), (yield b))

    def again_after_it_ended(comm):
        g = leaf(comm)
        yield comm.start(g)
        return (yield comm.start(g))

    def itself(comm, box):
        box.append(comm.start(box[0]))  # box[0] is this very generator, running
        yield comm.sleep(0.0)

    def starts_itself(comm):
        box: list = []
        box.append(itself(comm, box))
        return (yield comm.start(box[0]))

    for program in (twice, again_after_it_ended, starts_itself):
        with pytest.raises(sc.AlgorithmError, match=r"raised CommUsageError .*rank 0: "
                                                    r"start\(\) got (leaf|itself), a "
                                                    r"generator already started"):
            sc.run_program(sc.topology.switch(2), program)


def test_an_exception_in_a_started_collective_names_the_collective_and_algorithm():
    @register_probe("all_reduce", "_raises_inside")
    def raises_inside(comm: Comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.sleep(1e-6)
        raise ValueError("boom")

    def program(comm):
        return (yield comm.all_reduce(np.ones(4), algorithm="_raises_inside"))

    with pytest.raises(sc.AlgorithmError, match=r"^rank 0 \(started program 0: "
                                                r"all_reduce/_raises_inside\) raised "
                                                r"ValueError in program: boom"):
        sc.run_program(network(2), program)


def test_run_program_refuses_arguments_the_program_cannot_take_before_the_run():
    # A misspelt option of run_program's own reached the program: a raw TypeError, or,
    # for a program taking **kwargs, nothing at all.
    def program(comm, nbytes):
        yield comm.sleep(0.0)

    def anything(comm, *args, **kwargs):
        yield comm.sleep(0.0)

    options = (r"run_program's own options are network=, trace=, until=, max_events=, "
               r"faults=, in_network=")
    with pytest.raises(sc.InvalidInputError, match=rf"^run_program: program program takes "
                                                   rf"no keyword trac=True \(did you mean "
                                                   rf"trace=\?\); {options}"):
        sc.run_program(network(2), program, nbytes=8, trac=True)
    with pytest.raises(sc.InvalidInputError, match=rf"cannot be called with these arguments "
                                                   rf"\(missing a required argument: "
                                                   rf"'nbytes'\); {options}"):
        sc.run_program(network(2), program)
    with pytest.raises(sc.InvalidInputError, match=r"run_program: in_network "
                                                   r"device_without_arguments takes no "
                                                   r"keyword nbytes=8; .* as "
                                                   r"in_network\(comm, \*args, \*\*kwargs\)"):
        sc.run_program(network(2), anything, nbytes=8, in_network=device_without_arguments)
    assert sc.run_program(network(2), anything, 1, trac=True).outputs == [None, None]


def device_without_arguments(comm):
    """An in-network program that takes no argument besides comm."""
    yield comm.sleep(0.0)


def _idle(comm):
    return None
    yield


def test_an_in_network_device_that_starts_a_collective_is_named_as_one():
    """nvswitch0 (address 8 of dgx_h100(1), which has no hosts) starting an all_reduce
    was called "host 8"; starting an all_gatherv it raised an IndexError."""
    def reduces(comm):
        yield comm.all_reduce(np.ones(4))

    def gathers(comm):
        yield comm.all_gatherv(np.ones(4), [4] * 8)

    for device in (reduces, gathers):
        with pytest.raises(sc.AlgorithmError, match=r"CommUsageError in _idle: in-network "
                                                    r"device nvswitch0 cannot start "
                                                    r"collectives; only GPU ranks can"):
            sc.run_program(sc.topology.dgx_h100(1), _idle, in_network=device)


def test_a_program_an_in_network_device_starts_is_named_by_the_device():
    """A program started by nvswitch0 was named "rank 8 (started program 0)" on a machine
    whose ranks are 0-7 (in NCCL's NVLS deadlock reports too)."""
    def boom(comm):
        yield comm.sleep(1e-6)
        raise ValueError("boom")

    def device(comm):
        yield comm.start(boom(comm))

    with pytest.raises(sc.AlgorithmError, match=r"^in-network device nvswitch0 \(started "
                                                r"program 0\) raised ValueError"):
        sc.run_program(sc.topology.dgx_h100(1), _idle, in_network=device)


@pytest.mark.parametrize("collective, algorithm", [
    ("broadcast", "binomial"), ("all_gather", "ring"), ("all_reduce", "ring")])
def test_members_must_all_pass_data_or_all_sizes_only(collective, algorithm):
    """Rank 0 passed a data-free buffer and the others arrays: a broadcast handed the
    others data-free buffers back without a word, an all_gather raised a TypeError from
    inside, an all_reduce could not reduce an array with a VirtualBuffer."""
    def mixed(comm):
        x = sc.VirtualBuffer.of(8, np.float32) if comm.rank == 0 else np.ones(8, np.float32)
        kw = {"root": 0} if collective == "broadcast" else {}
        return (yield comm.collective(collective, x, algorithm=algorithm, **kw))

    with pytest.raises(sc.AlgorithmError, match=rf"started a collective with {collective} of "
                                                rf"8 float32 elements, .* where rank 0 "
                                                rf"started it with {collective} of 8 float32 "
                                                rf"elements \(data-free\)"):
        sc.run_program(sc.topology.switch(4), mixed)


def test_a_deadlock_names_the_matching_context_of_messages_nobody_received():
    """Rank 3 never starts the all_reduce the others start: the receives left waiting
    were named with their matching context, the messages that arrived for rank 3 were
    listed as if the user's own tag-0 messages."""
    def program(comm):
        if comm.rank == 3:
            return None
        return (yield comm.all_reduce(np.arange(8, dtype=np.float32)))

    with pytest.raises(sc.DeadlockError, match=r"arrived and not received: 2->3 \(tag 0 in "
                                               r"matching context 1 \(fresh context 1 of "
                                               r"the world\)\)"):
        sc.run_program(sc.topology.switch(4, bandwidth=10e9, latency=1e-6), program)


def _gathers_at(comm: Comm, root):
    x = np.full(4, comm.rank + 1, np.float32)
    out = yield comm.collective("gather", x, algorithm="binomial", root=root)
    if comm.rank == root:
        np.testing.assert_array_equal(out, [1, 1, 1, 1, 2, 2, 2, 2])


@pytest.mark.parametrize("root", [0, 1])
def test_a_started_gather_s_output_is_checked_at_its_own_root(root):
    """Only the root's output is defined (2 x 4 elements); the other rank's may be
    anything (mutant: the root taken as 0 whatever was given, and rank 0, not the root
    of a gather at 1, was told it must return 8 elements)."""
    assert sc.run_program(network(2), _gathers_at, root).time > 0
