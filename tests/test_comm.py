"""Communicator semantics: snapshots, matching order, groups, reduction and compute time."""

from __future__ import annotations

import collections
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import NO_FORMULA

import simcoll as sc
from simcoll.buffers import sealed
from simcoll.comm import Comm


def run(fn, p=2, topo=None, **kwargs):
    name = f"test_comm_{fn.__name__}"
    sc.register("all_reduce", name, cost=NO_FORMULA)(fn)
    return sc.simulate(topo or sc.topology.switch(p, bandwidth=1e9, latency=0.5e-6),
                       "all_reduce", algorithm=name, **kwargs)


def test_a_sent_payload_is_a_snapshot():
    def mutate_after_send(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            buf = x.copy()
            done = comm.send(buf, dst=1)
            buf[:] = -1
            yield done
            return x
        got = yield comm.recv(src=0)
        return got

    res = run(mutate_after_send, data=[np.arange(4.0), np.zeros(4)], check=False)
    np.testing.assert_array_equal(res.outputs[1], np.arange(4.0))


def test_messages_between_a_pair_match_in_send_order_even_if_a_later_one_arrives_first():
    # The 1-element message overtakes the 1000-element one on the wire; recv still
    # matches messages in the order they were sent.
    def big_then_small(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            comm.send(x[:0], dst=1)
            comm.send(x, dst=1)
            comm.send(x[:1], dst=1)
            yield from ()
            return x
        sizes = []
        for _ in range(3):
            got = yield comm.recv(src=0)
            sizes.append(len(got))
        return np.array(sizes, dtype=x.dtype)

    res = run(big_then_small, data=[np.arange(1000.0), np.zeros(1000)], check=False)
    np.testing.assert_array_equal(res.outputs[1], [0, 1000, 1])


def test_tags_separate_streams():
    def tagged(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            comm.send(x[:1], dst=1, tag="a")
            comm.send(x[:2], dst=1, tag="b")
            yield from ()
            return x
        b = yield comm.recv(src=0, tag="b")
        a = yield comm.recv(src=0, tag="a")
        return np.array([len(a), len(b)], dtype=x.dtype)

    res = run(tagged, data=[np.arange(3.0), np.zeros(3)], check=False)
    np.testing.assert_array_equal(res.outputs[1], [1, 2])


def test_reductions_take_nbytes_over_reduce_bandwidth_one_at_a_time():
    def two_reductions(comm, x, *, op=sc.ReduceOp.SUM):
        first = comm.reduce(x, x, op)
        second = comm.reduce(x, x, op)
        yield first
        t1 = comm._env.now
        yield second
        return np.array([t1, comm._env.now])

    topo = sc.topology.switch(1, reduce_bandwidth=1e9)
    res = run(two_reductions, topo=topo, data=[np.zeros(250, np.float32)], check=False)
    np.testing.assert_allclose(res.outputs[0], [1e-6, 2e-6], rtol=1e-12)


@pytest.mark.parametrize("reduce_bandwidth", [math.inf, 1e9])
def test_two_0d_arrays_reduce_to_a_0d_array(reduce_bandwidth):
    """numpy reduces two 0-d arrays to a scalar, which has no flags: the run failed with
    numpy's "Cannot set flags on array scalars"."""
    def program(comm):
        return (yield comm.reduce(np.array(1.5 * comm.rank), np.array(2.0), "max"))

    topo = sc.topology.switch(3, reduce_bandwidth=reduce_bandwidth)
    outputs = sc.run_program(topo, program).outputs
    assert [(type(o), o.shape, float(o)) for o in outputs] == \
        [(np.ndarray, (), 2.0), (np.ndarray, (), 2.0), (np.ndarray, (), 3.0)]


def test_shared_reductions_share_the_rate_as_they_come_and_go():
    """Reductions of 250 float32 (1 us each alone at 1 GB/s), shared=True: four asked at
    once each run at a quarter of the rate and all end at 4 us (one at a time they would
    end at 1, 2, 3, 4 us); a plain reduction asked with them does not queue behind them
    (it ends at 1 us). From 6 us, A alone; B joins at 6.5 us: A has 0.5 us of work left
    at half the rate and ends at 7.5; B has done 0.5 us of its work by then and ends
    alone at 8."""
    def shared(comm, x, *, op=sc.ReduceOp.SUM):
        env = comm._env
        together = [comm.reduce(x, x, op, shared=True) for _ in range(4)]
        plain = comm.reduce(x, x, op)
        ends = []
        for event in [*together, plain]:
            yield event
            ends.append(env.now)
        ends[-1] = None  # set below: the plain one fired before the shared ones
        yield comm.sleep(6e-6 - env.now)
        a = comm.reduce(x, x, op, shared=True)
        yield comm.sleep(0.5e-6)
        b = comm.reduce(x, x, op, shared=True)
        yield a
        ends.append(env.now)
        yield b
        ends.append(env.now)
        return np.array([e for e in ends if e is not None])

    def plain_first(comm, x, *, op=sc.ReduceOp.SUM):
        together = [comm.reduce(x, x, op, shared=True) for _ in range(4)]
        yield comm.reduce(x, x, op)
        first = comm._env.now
        for event in together:
            yield event
        return np.array([first, comm._env.now])

    topo = sc.topology.switch(1, reduce_bandwidth=1e9)
    data = [np.zeros(250, np.float32)]
    res = run(shared, topo=topo, data=data, check=False)
    np.testing.assert_allclose(res.outputs[0], [4e-6] * 4 + [7.5e-6, 8e-6], rtol=1e-9)
    res = run(plain_first, topo=topo, data=data, check=False)
    np.testing.assert_allclose(res.outputs[0], [1e-6, 4e-6], rtol=1e-9)
    traced = run(plain_first, topo=topo, data=data, check=False, trace=True)
    spans = sorted((e.start, e.end) for e in traced.trace if e.kind == "reduce")
    np.testing.assert_allclose(spans, [(0.0, 1e-6)] + [(0.0, 4e-6)] * 4, rtol=1e-9,
                               atol=1e-18)

    def refused(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.reduce(x, x, op, shared=1)
        return x

    with pytest.raises(sc.AlgorithmError, match=r"reduce shared=1 is not accepted; use "
                                                r"True or False"):
        run(refused, topo=topo, data=data)

    def numpy_flag(comm, x, *, op=sc.ReduceOp.SUM):   # as send's ordered= takes it
        return (yield comm.reduce(x, x, op, shared=np.True_))

    res = run(numpy_flag, topo=topo, data=data, check=False)
    np.testing.assert_array_equal(res.outputs[0], data[0] * 2)

    def bad_flag_on_a_product_that_overflows(comm, x, *, op=sc.ReduceOp.SUM):
        big = np.full(4, 3e38, np.float32)
        with np.errstate(over="raise"):   # numpy's work would fail first
            yield comm.reduce(big, big, "prod", shared="yes")
        return x

    with pytest.raises(sc.AlgorithmError, match=r"reduce shared='yes' is not accepted"):
        run(bad_flag_on_a_product_that_overflows, topo=topo, data=data)



@pytest.mark.parametrize("jobs", [1, 4])
@pytest.mark.parametrize("start", [1e-3, 1.0, 10.0, 1e4])
def test_a_shared_reduction_late_in_a_long_run_still_ends(start, jobs):
    """64 KiB at 1e12 B/s is 65.536 ns of work; late in a run the clock's rounding of
    the elapsed time left a few bytes that no timer could take (the run stopped as a
    zero-time loop). k at once end together at k x 65.536 ns after ``start``."""
    def late(comm):
        yield comm.compute(start)
        a = sc.VirtualBuffer.of(65536, np.uint8)
        together = [comm.reduce(a, a, "sum", shared=True) for _ in range(jobs)]
        for event in together:
            yield event
        return comm.now

    res = sc.run_program(sc.topology.switch(1, reduce_bandwidth=1e12), late)
    assert res.outputs[0] == pytest.approx(start + jobs * 65536 / 1e12, rel=1e-15)


def _ends(n_bytes, starts, bandwidth):
    def job(comm, at, n, out, i):
        yield comm.sleep(at)
        x = sc.VirtualBuffer.of(n, np.uint8)
        yield comm.reduce(x, x, "sum", shared=True)
        out[i] = comm.now

    def program(comm):
        out = {}
        handles = [comm.start(job(comm, s, n, out, i))
                   for i, (n, s) in enumerate(zip(n_bytes, starts))]
        for h in handles:
            yield h
        return out

    return sc.run_program(sc.topology.switch(1, reduce_bandwidth=bandwidth),
                          program).outputs[0]


def test_a_long_shared_reduction_joined_near_its_end_goes_on_with_its_share():
    """A: 10^12 bytes at 10^9 B/s, from 0; B: 1000 bytes, from 1000 s - 0.5 us, when A
    has 500 bytes left. Shared by two, A ends 1 us later, at 1000 s + 0.5 us, and B alone
    0.5 us after it (processor sharing by hand). A was taken as done on B's arrival
    (less than 1e-9 of its bytes left), so both ended early."""
    ends = _ends([10**12, 1000], [0.0, 1000 - 5e-7], 1e9)
    assert ends[0] == pytest.approx(1000 + 5e-7, rel=1e-14)
    assert ends[1] == pytest.approx(1000 + 1e-6, rel=1e-14)


def test_compute_is_fifo_and_separate_from_reductions():
    def work(comm, x, *, op=sc.ReduceOp.SUM):
        a = comm.compute(2e-6)
        b = comm.compute(3e-6)
        c = comm.reduce(x, x, op)
        yield c
        tc = comm._env.now
        yield a
        yield b
        return np.array([tc, comm._env.now])

    topo = sc.topology.switch(1, reduce_bandwidth=1e9)
    res = run(work, topo=topo, data=[np.zeros(250, np.float32)], check=False)
    np.testing.assert_allclose(res.outputs[0], [1e-6, 5e-6], rtol=1e-12)


def test_groups_translate_ranks_and_keep_their_messages_apart():
    def in_groups(comm, x, *, op=sc.ReduceOp.SUM):
        evens = comm.rank % 2 == 0
        group = comm.group([0, 2] if evens else [1, 3])
        assert group.size == 2 and group.rank == comm.rank // 2
        peer = 1 - group.rank
        got = yield group.sendrecv(x, dst=peer, src=peer)
        return (yield comm.reduce(x, got, op))

    data = [np.full(3, float(r)) for r in range(4)]
    res = run(in_groups, p=4, data=data, check=False)
    for r in range(4):
        np.testing.assert_array_equal(res.outputs[r], np.full(3, 2.0 if r % 2 == 0 else 4.0))


def test_an_error_in_a_group_says_whose_numbers_it_uses():
    """World rank 2, rank 0 of the group [2, 3], sends to 2: the error said "rank 2
    raised ...: rank 0: dst=2 is out of range", two numberings with no word of which."""
    def to_two(comm):
        if comm.rank in (2, 3):
            group = comm.group([2, 3])
            if group.rank == 0:
                yield group.send(np.zeros(1), 2)
        yield from ()

    with pytest.raises(sc.AlgorithmError, match=r"rank 0 of group \[2, 3\] \(world rank 2\): "
                                                r"dst=2 is out of range; GPU ranks are 0..1"):
        sc.run_program(sc.topology.switch(4), to_two)


def test_a_group_of_a_group_takes_its_parent_s_ranks_and_outsiders_are_named():
    """g = [3, 2, 1, 0]; g.group([1, 2]) holds g's ranks 1 and 2, world ranks 2 and 1.
    The refusal of an outsider named it by its rank in g alone ("rank 3 is not in group
    [1, 2]", where the label said rank 0)."""
    def nested(comm):
        g = comm.group([3, 2, 1, 0])
        if g.rank in (1, 2):
            h = g.group([1, 2])
            yield h.sendrecv(np.zeros(1), dst=1 - h.rank, src=1 - h.rank)
            return h.world_ranks()
        yield from ()

    assert sc.run_program(sc.topology.switch(4), nested).outputs == [None, (2, 1), (2, 1),
                                                                     None]

    def outsider(comm):
        comm.group([3, 2, 1, 0]).group([1, 2])
        yield from ()

    with pytest.raises(sc.AlgorithmError, match=r"rank 3 of group \[3, 2, 1, 0\] \(world rank "
                                                r"0\) called group\(\[1, 2\]\), which leaves "
                                                r"it out"):
        sc.run_program(sc.topology.switch(4), outsider)


def test_numpy_integer_peers_are_plain_ints_in_the_trace(tmp_path):
    """np.int64(1) as dst stayed a numpy integer in TraceEvent.peer, and the Chrome
    trace's json.dump raised TypeError."""
    def numpy_peers(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(4, np.float32), np.int64(1))
        else:
            yield comm.recv(np.int32(0))

    topo = sc.topology.switch(2)
    res = sc.run_program(topo, numpy_peers, trace=True)
    assert [type(e.peer) for e in res.trace] == [int]
    sc.trace.save_chrome(res, tmp_path / "t.json", topo)
    assert (tmp_path / "t.json").stat().st_size > 0


def test_two_groups_over_the_same_ranks_are_two_communicators():
    # torch.distributed.new_group twice over the same ranks gives two communicators: a
    # collective started on one never meets one started on the other, whatever the order.
    def two_groups(comm):
        first, second = comm.group([0, 1]), comm.group([0, 1])
        a, b = np.full(4, 1.0 + comm.rank), np.full(4, 100.0 + comm.rank)
        if comm.rank == 0:
            on_first, on_second = first.all_reduce(a), second.all_reduce(b)
        else:
            on_second, on_first = second.all_reduce(b), first.all_reduce(a)
        return float((yield on_first)[0]), float((yield on_second)[0])

    res = sc.run_program(sc.topology.switch(2), two_groups)
    assert res.outputs == [(3.0, 201.0), (3.0, 201.0)]


def test_sendrecv_waits_for_both_halves():
    # Rank 0 sends 1e6 bytes and receives 10 bytes: it resumes when its own send is done.
    def lopsided(comm, x, *, op=sc.ReduceOp.SUM):
        mine = x if comm.rank == 0 else x[:10]
        got = yield comm.sendrecv(mine, dst=1 - comm.rank, src=1 - comm.rank)
        return np.array([comm._env.now, len(got)])

    res = run(lopsided, data=[np.zeros(1_000_000, np.uint8)] * 2, check=False)
    assert res.outputs[0][0] == pytest.approx(1e-6 + 1e6 / 1e9)
    assert res.outputs[0][1] == 10
    assert res.outputs[1][0] == pytest.approx(1e-6 + 1e6 / 1e9)
    assert res.rank_times == pytest.approx([1e-6 + 1e-3] * 2)


def test_virtual_buffers_split_and_join_like_numpy():
    buf = sc.VirtualBuffer.of(11, np.float32)
    chunks = sc.Comm.split_buffer(buf, 4)
    assert [c.count for c in chunks] == [len(a) for a in np.array_split(np.arange(11), 4)]
    chunks[1] = sc.VirtualBuffer.of(7, np.float32)
    assert sc.Comm.join(chunks).count == 11 - 3 + 7
    assert buf[2:9].nbytes == 28 and len(buf[::2]) == 6


def test_data_free_chunks_take_slice_assignment_as_a_list_of_arrays_does():
    """chunks[a:b] = [...] works on data mode's list; on data-free chunks it raised
    "'<' not supported between instances of 'slice' and 'int'"."""
    arrays = sc.Comm.split_buffer(np.zeros(11, np.float32), 4)
    virtual = sc.Comm.split_buffer(sc.VirtualBuffer.of(11, np.float32), 4)
    arrays[1:4:2] = [np.ones(7, np.float32), np.ones(1, np.float32)]
    virtual[1:4:2] = [sc.VirtualBuffer.of(7, np.float32), sc.VirtualBuffer.of(1, np.float32)]
    assert [c.size for c in arrays] == [c.count for c in virtual] == [3, 7, 3, 1]
    with pytest.raises(ValueError, match=r"cannot assign 1 chunks to 2 of a data-free split, "
                                         r"whose 4 chunks stay 4"):
        virtual[0:2] = [sc.VirtualBuffer.of(1, np.float32)]


@pytest.mark.parametrize("parts", [2.0, True, 0, "2"])
def test_a_split_into_anything_but_a_whole_number_of_parts_is_refused(parts):
    with pytest.raises(sc.CommUsageError, match=f"parts={parts!r} is not accepted"):
        sc.Comm.split_buffer(sc.VirtualBuffer.of(6, np.float64), parts)
    with pytest.raises(sc.CommUsageError, match=f"parts={parts!r}"):
        sc.Comm.split_buffer(np.arange(6.0), parts)


def test_arithmetic_on_a_virtual_buffer_points_at_comm_reduce():
    """``a + b`` in a rank program (where comm.reduce(a, b, op) belongs) ran in data
    mode and, data-free, failed with Python's "unsupported operand type(s)"; numpy's
    ufuncs made an object array. Each now says what to use."""
    x = sc.VirtualBuffer.of(4, np.float32)
    for attempt in (lambda: x + x, lambda: 2 * x, lambda: x - 1, lambda: -x,
                    lambda: np.add(x, x), lambda: np.ones(4, np.float32) + x,
                    lambda: np.sum(x), lambda: np.add(x, x, dtype=np.float32),
                    lambda: abs(x), lambda: x ** 2):
        with pytest.raises(TypeError, match=r"a VirtualBuffer takes no arithmetic; it holds "
                                            r"no values \(data-free mode\): reduce two "
                                            r"buffers with comm.reduce\(a, b, op\)"):
            attempt()
    with pytest.raises(TypeError, match=r"can only be sliced \(x\[a:b\]\); .* join them "
                                        r"with comm.join"):
        np.concatenate([x, x])


def test_a_virtual_buffer_counts_whole_elements_only():
    # A float count was interned under the key of its int: every later buffer of 3
    # elements came out with a float count and float byte counts.
    with pytest.raises(sc.InvalidInputError, match=r"count=3.0 is not accepted"):
        sc.VirtualBuffer.of(3.0, np.float64)
    assert type(sc.VirtualBuffer.of(np.int64(3), np.float64).count) is int
    assert type(sc.VirtualBuffer.of(3, np.float64).nbytes) is int


def test_a_virtual_buffer_built_directly_takes_a_dtype_type_and_checks_its_count():
    """``VirtualBuffer(n, np.float32)`` (a type, as ``.of`` takes) raised a raw TypeError
    from its byte count; a negative count a ValueError."""
    buf = sc.VirtualBuffer(10, np.float32)
    assert (buf.count, buf.dtype, buf.nbytes) == (10, np.dtype(np.float32), 40)
    with pytest.raises(sc.InvalidInputError, match=r"count=-1 is not accepted"):
        sc.VirtualBuffer(-1, np.float32)
    # Equal by size and type, as interned ones are (two runs returning them compare equal)
    assert buf == sc.VirtualBuffer.of(10, "float32") and hash(buf) == hash(
        sc.VirtualBuffer.of(10, "float32"))
    assert buf != sc.VirtualBuffer(10, np.int32) and buf != sc.VirtualBuffer(11, np.float32)


def test_a_protocol_puts_wire_bytes_on_the_links_and_waits_its_delay():
    topo = sc.Topology("pair")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=1e9, latency=1e-6)

    def program(comm, x):
        if comm.rank == 0:
            yield comm.send(x, 1, delay=3e-6, wire_bytes=2 * 10**6)
            return x
        return (yield comm.recv(0))

    x = sc.VirtualBuffer.of(10**6, "uint8")
    res = sc.run_program(topo, program, x)
    # Hand-worked: 1 us of link latency + 3 us of protocol delay + 2 MB at 1 GB/s.
    assert res.time == pytest.approx(1e-6 + 3e-6 + 2e-3, rel=1e-12)
    assert res.bytes_sent.tolist() == [10**6, 0] and res.bytes_received.tolist() == [0, 10**6]
    assert res.link_bytes[("gpu0", "gpu1")] == 2 * 10**6
    assert res.link_bytes[("gpu1", "gpu0")] == 0


def _first(comm, call):
    if comm.rank == 0:
        yield call(comm)
    return None


@pytest.mark.parametrize("call, match", [
    (lambda c: c.send(np.ones(2), 1, wire_bytes=-5), r"wire_bytes=-5 is not accepted"),
    (lambda c: c.send(np.ones(2), 1, wire_bytes=2.5), r"wire_bytes=2.5 is not accepted"),
    (lambda c: c.send(np.ones(2), 1, delay=-1e-6), r"send\(delay=...\) got -1e-06"),
    (lambda c: c.sendrecv(np.ones(2), 1, 1, delay=float("nan")),
     r"send\(delay=...\) got nan"),
    (lambda c: c.multicast(np.ones(2), [1], delay=float("inf")),
     r"multicast\(delay=...\) got inf"),
    (lambda c: c.sleep(float("inf")), r"sleep got inf; use a finite number of seconds"),
    (lambda c: c.compute("1"), r"compute got '1'"),
    (lambda c: c.reduce(np.ones(2), np.ones(2), "zzz"), r"unknown reduction op 'zzz'"),
    (lambda c: c.reduce(np.ones(2), np.ones(2), np.add), r"reduce op=<ufunc 'add'> is not"),
    # Strings were concatenated ('aa'), bools or-ed.
    (lambda c: c.reduce(np.array(["a"]), np.array(["a"]), "sum"),
     r"cannot reduce <U1 arrays; reduce integers or floats"),
    (lambda c: c.reduce(np.ones(2, bool), np.ones(2, bool), "sum"), r"cannot reduce bool"),
    # Records and raw bytes reached numpy's ufunc (a UFuncTypeError).
    (lambda c: c.reduce(np.zeros(2, "f4,i4"), np.zeros(2, "f4,i4"), "sum"),
     r"rank 0: cannot reduce \[\('f0', '<f4'\), \('f1', '<i4'\)\] arrays; reduce integers "
     r"or floats"),
    (lambda c: c.reduce(np.zeros(2, "V8"), np.zeros(2, "V8"), "sum"), r"cannot reduce \|V8"),
    # A bad name lacked the rank; a VirtualBuffer with an array was shown in full.
    (lambda c: c.reduce(np.ones(2), np.ones(2), "mean"),
     r"rank 0: unknown reduction op 'mean' \(did you mean AVG\?\)"),
    (lambda c: c.reduce(sc.VirtualBuffer(4, np.float32), np.ones(4, np.float32), "sum"),
     r"rank 0: cannot reduce VirtualBuffer\(4, float32\) with a float32 array of shape "
     r"\(4,\); give two VirtualBuffers of one count and dtype"),
    # A delay of None (or 0, or False) skipped the check and failed in the engine's sum.
    (lambda c: c.send(np.ones(2), 1, delay=None), r"send\(delay=...\) got None"),
    (lambda c: c.sendrecv(np.ones(2), 1, 1, delay=None), r"send\(delay=...\) got None"),
    (lambda c: c.multicast(np.ones(2), [1], delay=None), r"multicast\(delay=...\) got None"),
    (lambda c: c.send(np.ones(2), 1, delay=False), r"send\(delay=...\) got False"),
    # An OverflowError or a TypeError from numpy.
    (lambda c: (c.split_buffer(np.ones(4), 2**70), c.sleep(0.0))[1],
     r"parts=1180591620717411303424 is not accepted"),
    (lambda c: (c.split_buffer(None, 2), c.sleep(0.0))[1],
     r"split_buffer of a NoneType: give a numpy array or a VirtualBuffer"),
    # A rank of the group counted from the end, True read as 1, an IndexError; and
    # reducer_of(100) said None: no in-network reducer.
    (lambda c: (c.group([0, 1]).address_of(-1), c.sleep(0.0))[1],
     r"address_of\(-1\) names no endpoint of this communicator; GPU ranks are 0..1"),
    (lambda c: (c.group([0, 1]).address_of(True), c.sleep(0.0))[1], r"address_of\(True\)"),
    (lambda c: (c.reducer_of(100), c.sleep(0.0))[1],
     r"reducer_of\(100\) needs a GPU rank 0..1"),
])
def test_the_communicator_refuses_what_no_run_can_mean(call, match):
    """A negative wire_bytes was counted on the links as given; a negative delay reached
    SimPy ('Negative delay'); sleep(inf) ran into the time limit; a string op or time
    raised a TypeError from inside the engine."""
    with pytest.raises(sc.AlgorithmError, match=match):
        sc.run_program(sc.topology.switch(2), _first, call)


def test_a_reduction_takes_an_op_by_name():
    def program(comm):
        return (yield comm.reduce(np.array([2.0, 3.0]), np.array([4.0, 5.0]), "max"))

    assert sc.run_program(sc.topology.switch(2), program).outputs[0].tolist() == [4.0, 5.0]


@pytest.mark.parametrize("call", ["send", "recv", "sendrecv", "multicast"])
def test_a_tag_that_cannot_key_a_match_is_refused_naming_the_rank(call):
    def program(comm):
        x = np.ones(2)
        if comm.rank == 0:
            if call == "send":
                yield comm.send(x, 1, tag=[1])
            elif call == "sendrecv":
                yield comm.sendrecv(x, dst=1, src=1, tag={"a": 1})
            elif call == "multicast":
                yield comm.multicast(x, [1], tag=[1])
            else:
                yield comm.recv(1, tag=[1])
        yield from ()

    with pytest.raises(sc.AlgorithmError, match=r"rank 0 raised CommUsageError .*rank 0: "
                                                r"tag=.* cannot be a tag; use an int, a str"):
        sc.run_program(sc.topology.switch(2), program)


@pytest.mark.parametrize("tag", [True, 1.0, float("nan"), None, (1, 2.5)])
def test_tags_that_match_another_or_none_are_refused(tag):
    # True and 1.0 equal 1, so recv(tag=1) took them; a NaN equals nothing, so its
    # receive waited forever and the deadlock named a message that was sent.
    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.ones(2), 1, tag=tag)
        else:
            yield comm.recv(0, tag=tag)

    with pytest.raises(sc.AlgorithmError, match=r"cannot be a tag; use an int, a str or a "
                                                r"tuple of them"):
        sc.run_program(sc.topology.switch(2), program)


def test_payloads_a_send_cannot_snapshot_and_mixed_operands_are_refused():
    # A subclass, a memoryview: the receiver saw what the sender wrote after the send.
    # Mixed dtypes: data mode upcast (and sent twice the bytes) where data-free refused.
    cases = {
        "subclass": lambda comm: comm.send(np.ma.array(np.zeros(4)), 1),
        "memoryview": lambda comm: comm.send(memoryview(bytearray(4)), 1),
        "reduce": lambda comm: comm.reduce(np.ones(4, np.float32), np.ones(4), "sum"),
        "join": lambda comm: (comm.join([np.ones(2, np.float32), np.ones(2)]),
                              comm.sleep(0.0))[1],
        "empty join": lambda comm: (comm.join([]), comm.sleep(0.0))[1],
        "multicast to an int": lambda comm: comm.multicast(np.ones(2), 1),
        "group of an int": lambda comm: (comm.group(0), comm.sleep(0.0))[1],
    }
    messages = {
        "subclass": "cannot send a MaskedArray; send a numpy array",
        "memoryview": "cannot send a memoryview",
        "reduce": r"cannot reduce a float32 array of shape \(4,\) with a float64 array of "
                  r"shape \(4,\); give two arrays of one shape and dtype",
        "join": "join takes chunks of one mode and dtype .*, got ndarray float32, ndarray "
                "float64",
        "empty join": "join takes a non-empty list of chunks",
        "multicast to an int": r"multicast dsts=1 is not accepted; give a list",
        "group of an int": r"group ranks=0 is not accepted; give a list of ranks",
    }
    for case, call in cases.items():
        def program(comm, call=call):
            if comm.rank == 0:
                yield call(comm)
            return None

        with pytest.raises(sc.AlgorithmError, match=messages[case]):
            sc.run_program(sc.topology.switch(2), program)


def test_compute_and_reductions_not_waited_for_still_end_the_run():
    # A rank that starts 5 us of compute (or an 8 us reduction: 8,000 bytes at 1 GB/s)
    # and returns at once leaves its GPU busy until then; the run took 0 s.
    topo = sc.topology.switch(2, reduce_bandwidth=1e9)

    def compute(comm):
        comm.compute(5e-6)
        return None
        yield

    def reduction(comm):
        comm.reduce(np.ones(1000), np.ones(1000), "sum")
        return None
        yield

    assert sc.run_program(topo, compute).time == pytest.approx(5e-6, rel=1e-12)
    assert sc.run_program(topo, reduction).time == pytest.approx(8e-6, rel=1e-12)


# -- inputs nobody can make writeable --------------------------------------------------

def test_an_input_cannot_be_made_writeable_so_a_wrong_result_is_never_correct():
    # x.setflags(write=True) undid the read-only view (its base was the caller's array):
    # an all-zero "sum" was marked correct, and the caller's data was zeroed.
    def zeroes(comm, x, *, op):
        x.setflags(write=True)
        x[:] = 0
        yield comm.sleep(0.0)
        return x

    data = [np.arange(8, dtype=np.float32) + r for r in range(4)]
    kept = [x.copy() for x in data]
    with pytest.raises(sc.AlgorithmError, match=r"rank 0 raised ValueError .*cannot set "
                                                r"WRITEABLE flag to True"):
        run(zeroes, p=4, data=data)
    for x, before in zip(data, kept):
        np.testing.assert_array_equal(x, before)


def test_a_received_view_of_another_ranks_input_cannot_be_made_writeable():
    # The payload's base was the sender's input: the receiver wrote into it.
    def write_into_received(comm, x, *, op):
        if comm.rank == 0:
            yield comm.send(x[1:3], dst=1)
            return x
        got = yield comm.recv(src=0)
        got.setflags(write=True)
        return x

    data = [np.arange(4.0), np.zeros(4)]
    with pytest.raises(sc.AlgorithmError, match=r"rank 1 raised ValueError .*cannot set "
                                                r"WRITEABLE"):
        run(write_into_received, data=data)
    assert data[0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_an_input_is_a_view_without_a_copy_and_a_strided_one_is_still_summed_right():
    contiguous = np.arange(6.0)
    held = sealed(contiguous)
    assert np.shares_memory(held, contiguous) and not held.flags.writeable
    assert sealed(held) is held
    for view in (held, held[2:], held[::2].view()):
        with pytest.raises(ValueError, match="cannot set WRITEABLE"):
            view.setflags(write=True)
    # Every other element of 0..7 (+ r): 0, 2, 4, 6 (+ r), summed over 3 ranks by numpy.
    data = [(np.arange(8.0) + r)[::2] for r in range(3)]
    res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="ring", data=data)
    assert res.correct is True
    assert res.outputs[2].tolist() == [3.0, 9.0, 15.0, 21.0]


def test_a_started_collective_cannot_make_the_callers_array_writeable():
    # The caller's read-only array went to the algorithm as it was: one setflags call
    # made it writeable again.
    def unseal(comm, x, *, op):
        x.setflags(write=True)
        yield comm.sleep(0.0)
        return x

    sc.register("all_reduce", "test_comm_unseal", cost=NO_FORMULA)(unseal)
    mine = np.ones(4)
    mine.flags.writeable = False

    def program(comm):
        return (yield comm.all_reduce(mine, algorithm="test_comm_unseal"))

    with pytest.raises(sc.AlgorithmError, match=r"started program 0: "
                                                r"all_reduce/test_comm_unseal\) raised "
                                                r"ValueError .*cannot set WRITEABLE"):
        sc.run_program(sc.topology.switch(2), program)
    assert not mine.flags.writeable and mine.tolist() == [1.0] * 4


# -- via= ------------------------------------------------------------------------------

@pytest.mark.parametrize("call, shown", [
    (lambda c: c.send(np.zeros(4, np.float32), dst=1, via=["switch"]), r"\['switch'\]"),
    (lambda c: c.send(np.zeros(4, np.float32), dst=1, via={"switch"}), r"\{'switch'\}"),
    (lambda c: c.multicast(np.zeros(4, np.float32), [1], via=[["switch"]]),
     r"\[\['switch'\]\]"),
    (lambda c: c.multicast(np.zeros(4, np.float32), [1], via="switch"), "'switch'"),
])
def test_via_that_is_not_a_name_or_a_tuple_is_refused_naming_it(call, shown):
    # A list passed the check and crashed in the network's route cache (unhashable).
    def program(comm):
        if comm.rank == 0:
            yield call(comm)
        elif comm.rank == 1:
            yield comm.recv(src=0)

    with pytest.raises(sc.AlgorithmError, match=rf"rank 0 raised CommUsageError .*rank 0: "
                                                rf"(multicast )?via={shown} is not accepted; "
                                                rf"give .*a device name or a tuple of them"):
        sc.run_program(sc.topology.switch(2), program)


def test_via_as_a_tuple_still_routes():
    # 16 bytes over gpu0 -> switch -> gpu1 (0.5 us a link): 2 x 0.5 us + 16 B / 1 GB/s.
    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.zeros(4, np.float32), dst=1, via=("switch",))
        elif comm.rank == 1:
            yield comm.recv(src=0)

    res = sc.run_program(sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6), program)
    assert res.time == pytest.approx(1e-6 + 16e-9, rel=1e-12)


def test_a_started_v_collective_judges_its_parameters_on_the_largest_input():
    """simulate checks an algorithm's parameters against the largest input of a
    v-collective; a started one judged them on each rank's own share, so rank 1 (one
    element) refused chunks=2 that simulate takes for splits [4, 1]."""
    from simcoll.algorithms import Int
    from simcoll.cost import CostModel, gpu_traffic

    def nothing(p, nbytes, itemsize, **kwargs):
        return gpu_traffic(np.zeros(p, np.int64), np.zeros(p, np.int64))

    model = CostModel(time=lambda p, nbytes, alpha, beta, gamma, **kwargs: 0.0,
                      traffic=nothing, exact=lambda p, nbytes, itemsize, **kwargs: False)

    @sc.register("all_gatherv", "pieces_v", cost=model,
                 params={"chunks": Int(1, minimum=1, at_most_elements=True, doc="pieces")})
    def pieces_v(comm, x, *, splits, chunks):
        return (yield comm.all_gatherv(x, splits, algorithm="ring"))

    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)
    data = [np.arange(4.0), np.array([7.0])]
    assert sc.simulate(topo, "all_gatherv", algorithm="pieces_v", data=data,
                       chunks=2).correct is True

    def program(comm):
        return (yield comm.all_gatherv(data[comm.rank], [4, 1], algorithm="pieces_v",
                                       chunks=2))

    done = sc.run_program(topo, program)
    for out in done.outputs:
        assert out.tolist() == [0.0, 1.0, 2.0, 3.0, 7.0]

    def too_many(comm):
        return (yield comm.all_gatherv(data[comm.rank], [4, 1], algorithm="pieces_v",
                                       chunks=5))

    with pytest.raises(sc.AlgorithmError, match="rank 0: chunks=5 is more than the 4 "):
        sc.run_program(topo, too_many)


def test_a_started_collective_past_the_traffic_counters_is_refused_before_it_runs():
    """A ring all_reduce of 2^60 float64 per rank sends 2^63 bytes from each rank: simulate
    refuses it; started from a rank program it ran to the end, then building the result
    raised numpy's OverflowError."""
    topo = sc.topology.switch(2, bandwidth=1e14, latency=1e-6)
    huge = sc.VirtualBuffer.of(2**60, np.float64)

    def program(comm):
        return (yield comm.all_reduce(huge))

    with pytest.raises(sc.AlgorithmError, match=r"input of 9223372036854775808 bytes on 2 "
                                                r"ranks could overflow the int64"):
        sc.run_program(topo, program)


@pytest.mark.parametrize("senders", [1, 2])
def test_messages_past_the_traffic_counters_end_in_a_simcoll_error(senders):
    """Point-to-point messages are not known before the run: 2^62 bytes sent twice to the
    last rank, by rank 0 alone (its sent counter passes int64) or once by each of two
    ranks (the receiver's counter passes, neither sender's), make 2^63, which the
    result's counters cannot hold."""
    topo = sc.topology.switch(senders + 1, bandwidth=1e18, latency=1e-6)
    half = sc.VirtualBuffer.of(2**62, np.uint8)

    def program(comm):
        if comm.rank < senders:
            for _ in range(2 // senders):
                yield comm.send(half, senders)
        else:
            for source in (0, senders - 1):
                yield comm.recv(source)

    with pytest.raises(sc.InvalidInputError, match="traffic passed the int64 counters: an "
                                                   "endpoint moved 9223372036854775808 bytes"):
        sc.run_program(topo, program)


def test_a_started_barrier_refuses_a_buffer():
    """simulate refuses data for a barrier; a started one ignored the buffer of rank 0."""
    topo = sc.topology.switch(3, bandwidth=1e9, latency=0.5e-6)

    def program(comm):
        x = np.ones(1000) if comm.rank == 0 else None
        return (yield comm.collective("barrier", x, algorithm="dissemination"))

    with pytest.raises(sc.AlgorithmError, match="rank 0: a barrier moves no data; pass "
                                                "x=None, not ndarray"):
        sc.run_program(topo, program)


@pytest.mark.parametrize("join, word", [("&", "and"), ("|", "or")])
def test_a_deadlock_names_the_started_programs_a_condition_waits_for(join, word):
    """Rank 0 waits on two collectives that rank 1 never starts, both at once (&) or
    either (|): the message named a receive of a started collective as what rank 0's own
    program waited for."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def program(comm):
        done = yield comm.all_reduce(np.ones(4))
        if comm.rank == 0:
            gather, scatter = comm.all_gather(np.ones(4)), comm.reduce_scatter(np.ones(4))
            yield gather & scatter if join == "&" else gather | scatter
        return done

    with pytest.raises(sc.DeadlockError) as caught:
        sc.run_program(topo, program)
    message = str(caught.value)
    assert (f"rank 0 waits for rank 0 (started program 1: all_gather/ring) to end {word} "
            f"rank 0 (started program 2: reduce_scatter/ring) to end;") in message
    assert "rank 0 waits for recv" not in message


def test_a_deadlock_message_keeps_a_condition_s_receives_and_its_grouping():
    """A program waiting for a started collective or a receive of its own waits for
    either: both are named. A condition inside a condition keeps its parentheses."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def either(comm):
        if comm.rank == 0:
            yield comm.all_gather(np.ones(4)) | comm.recv(src=1, tag=7)
        return None

    with pytest.raises(sc.DeadlockError) as caught:
        sc.run_program(topo, either)
    message = str(caught.value)
    assert "rank 0 waits for rank 0 (started program 0: all_gather/ring) to end or recv " \
        "from 1 (tag 7)" in message

    def nested(comm):
        if comm.rank == 0:
            gather, scatter = comm.all_gather(np.ones(4)), comm.reduce_scatter(np.ones(4))
            third = comm.all_reduce(np.ones(4))
            yield (gather | scatter) & third
        return None

    with pytest.raises(sc.DeadlockError) as caught:
        sc.run_program(topo, nested)
    assert ("rank 0 waits for (rank 0 (started program 0: all_gather/ring) to end or rank 0 "
            "(started program 1: reduce_scatter/ring) to end) and rank 0 (started program 2: "
            "all_reduce/ring) to end;") in str(caught.value)


def test_an_endpoint_that_moves_exactly_the_largest_int64_is_counted():
    """2^62 + (2^62 - 1) = 2^63 - 1 bytes from rank 0 to rank 1: the largest int64, which
    the counters hold; the result counts it exactly."""
    topo = sc.topology.switch(2, bandwidth=1e18, latency=1e-6)

    def program(comm):
        if comm.rank == 0:
            yield comm.send(sc.VirtualBuffer.of(2**62, np.uint8), 1)
            yield comm.send(sc.VirtualBuffer.of(2**62 - 1, np.uint8), 1)
        else:
            yield comm.recv(0)
            yield comm.recv(0)

    res = sc.run_program(topo, program)
    assert res.bytes_sent.tolist() == [2**63 - 1, 0]
    assert res.bytes_received.tolist() == [0, 2**63 - 1]


def test_a_deadlock_on_a_condition_leaves_out_its_parts_that_ended():
    """Rank 0 waits for an all_reduce (which rank 1 runs too, so it ends) and a
    reduce_scatter rank 1 never starts: only the reduce_scatter is still waited for,
    and nothing else (no 'and' with a receive)."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def program(comm):
        done = comm.all_reduce(np.ones(4))
        if comm.rank == 0:
            yield done & comm.reduce_scatter(np.ones(4))
        else:
            yield done

    with pytest.raises(sc.DeadlockError) as caught:
        sc.run_program(topo, program)
    assert ("rank 0 waits for rank 0 (started program 1: reduce_scatter/ring) to end; "
            in str(caught.value))


def test_a_condition_inside_a_condition_with_one_part_left_needs_no_parentheses():
    """(all_reduce & reduce_scatter) | all_gather on rank 0, the all_reduce ended (rank 1
    ran it): the inner condition waits for the reduce_scatter alone, named bare."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def program(comm):
        done = comm.all_reduce(np.ones(4))
        if comm.rank == 0:
            scatter, gather = comm.reduce_scatter(np.ones(4)), comm.all_gather(np.ones(4))
            yield (done & scatter) | gather
        else:
            yield done

    with pytest.raises(sc.DeadlockError) as caught:
        sc.run_program(topo, program)
    assert ("rank 0 waits for rank 0 (started program 1: reduce_scatter/ring) to end or "
            "rank 0 (started program 2: all_gather/ring) to end; " in str(caught.value))


def test_a_condition_of_receives_inside_a_condition_is_named_after_the_started_program():
    """(recv tag 7 | recv tag 8) & reduce_scatter on rank 0: each part named, the receives
    as the program posted them (not as every receive of the endpoint), grouped as
    written."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def program(comm):
        if comm.rank == 0:
            scatter = comm.reduce_scatter(np.ones(4))
            yield (comm.recv(src=1, tag=7) | comm.recv(src=1, tag=8)) & scatter
        return None

    with pytest.raises(sc.DeadlockError) as caught:
        sc.run_program(topo, program)
    message = str(caught.value)
    assert ("rank 0 waits for (recv from 1 (tag 7) or recv from 1 (tag 8)) and rank 0 "
            "(started program 0: reduce_scatter/ring) to end;" in message)
    assert message.count("recv from 1 (tag 7)") == 1   # rank 0's own, not its program's


def test_a_deadlock_names_two_alike_receives_of_an_endpoint_once_in_its_waiting():
    """Rank 0 posts two receives from 1 with tag 0 and waits for both; rank 1 sends
    nothing. The message names each of the program's two receives; DeadlockError.waiting
    ({rank: what it waits for}) says what the endpoint waits for once, not twice."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def program(comm):
        if comm.rank == 0:
            first, second = comm.recv(src=1, tag=0), comm.recv(src=1, tag=0)
            yield first & second
        return None

    with pytest.raises(sc.DeadlockError) as caught:
        sc.run_program(topo, program)
    assert "rank 0 waits for recv from 1 (tag 0) and recv from 1 (tag 0)" in str(caught.value)
    assert caught.value.waiting == {0: "recv from 1 (tag 0)"}


def _read_only(view):
    view.flags.writeable = False
    return view


def _write_after_sending(make_view):
    """Rank 0 sends a read-only view of its array, then overwrites the array before the
    message arrives; rank 1 returns what it received."""
    def program(comm):
        if comm.rank == 0:
            x = np.arange(4.0)
            sent = comm.send(make_view(x), 1)
            x[:] = -1.0
            yield sent
            return None
        return (yield comm.recv(0))
    return program


@pytest.mark.parametrize("make_view", [
    lambda x: np.lib.stride_tricks.sliding_window_view(x, 1)[:, 0],
    lambda x: np.lib.stride_tricks.as_strided(x, writeable=False),
    lambda x: np.frombuffer(memoryview(x).toreadonly()),
    lambda x: _read_only(x[:]),   # a read-only view of the writeable array x
])
def test_what_a_read_only_view_of_writeable_memory_sends_is_a_snapshot(make_view):
    """A read-only view reaching writeable memory through something other than a numpy
    array (numpy's holder behind as_strided and sliding_window_view, a memoryview) was sent
    as it was: the write after the send arrived as [-1, -1, -1, -1]."""
    out = sc.run_program(sc.topology.switch(2), _write_after_sending(make_view)).outputs[1]
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_started_collective_holds_a_snapshot_of_a_read_only_view():
    """sliding_window_view gives a read-only view of x: a started all_reduce summed what x
    held when it ran (4000 for 1000 written on every rank), not 1 + 2 + 3 + 4 = 10."""
    def program(comm):
        x = np.full(8, float(comm.rank + 1))
        started = comm.all_reduce(np.lib.stride_tricks.sliding_window_view(x, 1)[:, 0])
        x[:] = 1000.0
        return (yield started)

    outputs = sc.run_program(sc.topology.switch(4, bandwidth=1e9, latency=1e-6),
                             program).outputs
    assert all(out.tolist() == [10.0] * 8 for out in outputs)


def test_a_data_free_join_refuses_a_chunk_of_another_dtype_as_data_mode_does():
    """A float64 chunk put in a float32 data-free split was joined as float32."""
    chunks = sc.Comm.split_buffer(sc.VirtualBuffer(8, np.float32), 2)
    chunks[0] = sc.VirtualBuffer(4, np.float64)
    with pytest.raises(sc.CommUsageError, match=r"join takes chunks of one mode and dtype "
                                                r"\(numpy arrays or VirtualBuffers\), got "
                                                r"VirtualBuffer float32, VirtualBuffer float64"):
        sc.Comm.join(chunks)
    arrays = sc.Comm.split_buffer(np.zeros(8, np.float32), 2)
    arrays[0] = np.zeros(4)
    with pytest.raises(sc.CommUsageError, match=r"got ndarray float32, ndarray float64"):
        sc.Comm.join(arrays)
    chunks[0] = sc.VirtualBuffer(4, np.float32)
    assert sc.Comm.join(chunks) == sc.VirtualBuffer(8, np.float32)


def test_a_sendrecv_refused_for_its_payload_posts_no_receive():
    """The receive was posted before the payload was refused: a retry after catching the
    error lost the peer's message to it and deadlocked."""
    def program(comm):
        peer = 1 - comm.rank
        if comm.rank == 0:
            try:
                yield comm.sendrecv([1.0, 2.0], dst=peer, src=peer)
            except sc.CommUsageError:
                pass
            return (yield comm.sendrecv(np.array([1.0, 2.0]), dst=peer, src=peer))
        return (yield comm.sendrecv(np.array([5.0]), dst=peer, src=peer))

    outputs = sc.run_program(sc.topology.switch(2), program).outputs
    assert outputs[0].tolist() == [5.0] and outputs[1].tolist() == [1.0, 2.0]


def test_run_programs_outputs_are_writeable_and_each_ranks_own():
    """A started broadcast's output was one read-only array for every rank."""
    def program(comm):
        return (yield comm.broadcast(np.arange(8.0) * (comm.rank + 1), root=0))

    outputs = sc.run_program(sc.topology.switch(4), program).outputs
    assert all(out.flags.writeable for out in outputs)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(outputs)
                   for b in outputs[i + 1:])
    outputs[1][0] = 99.0
    assert [out[0] for out in outputs] == [0.0, 99.0, 0.0, 0.0]


def test_arrays_in_the_lists_tuples_and_dicts_a_program_returns_are_its_own_too():
    """A broadcast's output returned in a tuple, a list, a dict or a named tuple came
    back as the one read-only array every rank shared; other objects come back as they
    are, and a list that holds itself is copied once, not walked for ever."""
    pair = collections.namedtuple("pair", "array number")
    loop: list = []
    loop.append(loop)

    def program(comm):
        b = yield comm.broadcast(np.arange(8.0) * (comm.rank + 1), root=0)
        return (b, [b, 1.5], {"b": b}, pair(b, 2), loop)

    outputs = sc.run_program(sc.topology.switch(3), program).outputs
    # a rank's four places hold one array, as the program returned it, its own
    arrays = [out[0] for out in outputs]
    for out, array in zip(outputs, arrays):
        assert out[1][0] is out[2]["b"] is out[3].array is array
    assert all(a.flags.writeable for a in arrays)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])
    for out in outputs:
        assert type(out) is tuple and type(out[3]) is pair and out[3].number == 2
        assert out[1][1] == 1.5 and out[4][0] is loop
        np.testing.assert_array_equal(out[2]["b"], np.arange(8.0))


def test_an_array_a_program_returns_many_times_is_copied_once_and_deep_nests_end():
    """[b] * 500 of a broadcast's b was copied 500 times per rank (1 GiB for 1 MiB), a
    shared sub-list walked once per path to it (22 levels: 97 s), and outputs nested 500
    deep raised RecursionError; containers past 64 levels now come back as they are."""
    def program(comm):
        b = yield comm.broadcast(np.arange(4.0), root=0)
        shared = [b]
        for _ in range(30):
            shared = [shared, shared]
        deep: list = [b]
        for _ in range(500):
            deep = [deep]
        return [b] * 500, shared, deep

    outputs = sc.run_program(sc.topology.switch(2), program).outputs
    first = [out[0][0] for out in outputs]
    assert all(all(a is first[r] for a in out[0]) for r, out in enumerate(outputs))
    assert not np.shares_memory(first[0], first[1]) and first[0].flags.writeable
    level = outputs[1][1]
    for _ in range(30):
        assert level[0] is level[1]
        level = level[0]
    assert level[0] is first[1]
    level = outputs[0][2]
    for _ in range(500):
        level = level[0]
    assert not level[0].flags.writeable   # 500 lists down: as the program made it


def test_a_read_only_array_of_the_callers_that_a_program_returns_stays_read_only():
    """The output walk made any returned array writeable in place, so a constant table
    the caller had locked could be written through a rank's output; a reduction the
    run made is still handed back without a copy."""
    table = np.arange(6.0)
    table.flags.writeable = False
    made = {}

    def program(comm):
        total = yield comm.reduce(np.ones(3), np.ones(3), sc.ReduceOp.SUM)
        made[comm.rank] = total
        return table, total

    outputs = sc.run_program(sc.topology.switch(2), program).outputs
    assert not table.flags.writeable
    for rank, (copy, total) in enumerate(outputs):
        assert copy is not table and copy.flags.writeable
        np.testing.assert_array_equal(copy, np.arange(6.0))
        assert total is made[rank] and total.flags.writeable
    assert not np.shares_memory(outputs[0][0], outputs[1][0])


def test_a_runs_output_the_caller_locked_is_copied_by_a_later_run_that_returns_it():
    """An array a run made stayed known as the run's after it was handed out: locked by
    the caller and returned by a later program, it came back writeable and uncopied."""
    def reduced(comm):
        return (yield comm.reduce(np.ones(3), np.ones(3), sc.ReduceOp.SUM))

    first = sc.run_program(sc.topology.switch(2), reduced).outputs[0]
    first.flags.writeable = False

    def returns(comm, x):
        yield comm.sleep(0.0)
        return x

    again = sc.run_program(sc.topology.switch(2), returns, first).outputs[0]
    assert again is not first and not first.flags.writeable and again.flags.writeable
    again[0] = 99.0
    assert first.tolist() == [2.0, 2.0, 2.0]


def test_a_bad_tag_in_a_group_names_the_group_and_the_world_rank():
    def program(comm):
        if comm.rank < 2:
            return None
        group = comm.group([3, 2])
        yield group.send(np.ones(1), 1 - group.rank, tag=1.5)

    with pytest.raises(sc.AlgorithmError, match=r"rank 1 of group \[3, 2\] \(world rank 2\): "
                                                r"tag=1.5 cannot be a tag"):
        sc.run_program(sc.topology.switch(4), program)


def test_a_deadlock_in_groups_names_the_groups_their_contexts_came_from():
    """Rank 0 made group [0, 1] and rank 1 group [1, 0]: the message named only matching
    contexts 2 and 4, not the two orders of the members that set them apart."""
    def program(comm):
        group = comm.group([0, 1] if comm.rank == 0 else [1, 0])
        return (yield group.all_reduce(np.ones(4)))

    with pytest.raises(sc.DeadlockError) as info:
        sc.run_program(sc.topology.switch(2), program)
    text = str(info.value)
    assert "recv from 1 (tag 0) in matching context 2 (fresh context 1 of group [0, 1])" in text
    assert "recv from 0 (tag 0) in matching context 4 (fresh context 1 of group [1, 0])" in text
    assert "0->1 (tag 0 in matching context 2 (fresh context 1 of group [0, 1]))" in text


def test_a_deadlock_names_the_members_that_never_made_the_context_waited_in():
    """Rank 3 returns where ranks 0-2 start an all_reduce: the message named the receives
    left waiting in matching context 1, not that rank 3 never made it."""
    def program(comm):
        if comm.rank == 3:
            return None
        return (yield comm.all_reduce(np.ones(4)))

    with pytest.raises(sc.DeadlockError, match=r"; rank 3 never made matching context 1 "
                                               r"\(fresh context 1 of the world\): it ended "
                                               r"or waits elsewhere$"):
        sc.run_program(sc.topology.switch(4), program)

    def crossed(comm):
        group = comm.group([0, 1] if comm.rank == 0 else [1, 0])
        return (yield group.all_reduce(np.ones(4)))

    with pytest.raises(sc.DeadlockError) as info:
        sc.run_program(sc.topology.switch(2), crossed)
    assert str(info.value).endswith(
        "; rank 1 never made matching context 2 (fresh context 1 of group [0, 1]): it ended "
        "or waits elsewhere; rank 0 never made matching context 4 (fresh context 1 of group "
        "[1, 0]): it ended or waits elsewhere")


def _uneven_star() -> sc.Topology:
    """gpu0, gpu1, gpu2 on one switch by links of 4, 1 and 4 GB/s."""
    topo = sc.Topology("uneven star")
    gpus = [topo.add_gpu() for _ in range(3)]
    topo.add_switch("sw")
    for gpu, bandwidth in zip(gpus, (4e9, 1e9, 4e9)):
        topo.add_link(gpu, "sw", bandwidth=bandwidth, latency=1e-6)
    return topo


def test_route_bandwidth_is_the_narrowest_link_and_refuses_the_rank_itself():
    """The route from gpu0 to gpu1 crosses gpu0's 4 GB/s link and gpu1's 1 GB/s link to
    the switch: its narrowest is 1 GB/s, and 4 GB/s only where both ends have 4. A route
    to the rank itself crosses no link: it returned inf silently (an algorithm that
    divided by it got 0), where every other call naming a peer refuses the rank itself."""
    topo = _uneven_star()

    def widths(comm):
        yield comm.sleep(0)
        return [comm.route_bandwidth(peer) for peer in range(comm.size) if peer != comm.rank]

    assert sc.run_program(topo, widths).outputs == [[1e9, 4e9], [1e9, 1e9], [4e9, 1e9]]

    def itself(comm):
        yield comm.sleep(0)
        return comm.route_bandwidth(comm.rank)

    with pytest.raises(sc.AlgorithmError, match=r"route_bandwidth\(0\) names this rank "
                                                r"itself, whose route crosses no link"):
        sc.run_program(topo, itself)


def test_route_bandwidth_on_a_group_reads_group_ranks_and_refuses_its_own():
    """On a group whose ranks are not the world's ([2, 0]: group rank 0 is gpu2, group
    rank 1 is gpu0), ``peer`` is a group rank: from gpu2, peer 1 is gpu0, both on 4 GB/s
    links to the switch, so 4 GB/s; from gpu0, peer 0 is gpu2, 4 GB/s too (the 1 GB/s
    gpu1 is in neither route). A group rank naming its own GPU (gpu2's peer 0) is
    refused, whatever its world rank."""
    topo = _uneven_star()

    def across(comm):
        yield comm.sleep(0)
        if comm.rank == 1:
            return None
        group = comm.group([2, 0])
        return group.route_bandwidth(1 - group.rank)

    assert sc.run_program(topo, across).outputs == [4e9, None, 4e9]

    def itself(comm):
        yield comm.sleep(0)
        if comm.rank != 2:
            return None
        group = comm.group([2])
        return group.route_bandwidth(0)

    with pytest.raises(sc.AlgorithmError, match=r"route_bandwidth\(0\) names this rank "
                                                r"itself, whose route crosses no link"):
        sc.run_program(topo, itself)


class Tagged(list):
    """A list subclass a program might return (one of "other types")."""


def test_subclasses_of_list_and_dict_come_back_as_they_are():
    """owned() rebuilds exactly list, dict, tuple and named tuples; a container of
    another type, a list or dict subclass included, comes back as the same object (its
    type, its extra attributes and identity kept), not rebuilt as a plain list or dict."""
    ordered = collections.OrderedDict(a=1.0)
    tagged = Tagged([1, 2])
    tagged.note = "kept"
    default = collections.defaultdict(int, {"n": 3})

    def program(comm):
        yield comm.sleep(0.0)
        return (ordered, tagged, default)

    outputs = sc.run_program(sc.topology.switch(2), program).outputs
    for out in outputs:
        assert type(out) is tuple
        assert out[0] is ordered and type(out[0]) is collections.OrderedDict
        assert out[1] is tagged and out[1].note == "kept"
        assert out[2] is default and out[2]["missing"] == 0
    # plain containers are still rebuilt, as new objects
    plain = [np.zeros(2)]

    def returns_plain(comm):
        yield comm.sleep(0.0)
        return plain

    outs = sc.run_program(sc.topology.switch(2), returns_plain).outputs
    assert all(type(o) is list and o is not plain for o in outs)


def test_one_array_returned_by_every_rank_and_twice_in_one_output_comes_back_apart():
    """Every rank returns the same module-level array object (no base: not a view), and
    once more inside a list: owned() hands rank 0 the object itself and every later rank
    a copy of its own, one per rank (a rank's two places hold one array, as it returned
    them), so no two ranks' outputs share memory; keeping the objects handed out
    (``seen``) is what tells a later rank's occurrence apart from the first."""
    shared = np.arange(4.0)

    def program(comm):
        yield comm.sleep(0.0)
        return (shared, [shared])

    outputs = sc.run_program(sc.topology.switch(3), program).outputs
    arrays = [out[0] for out in outputs]
    assert all(out[1][0] is out[0] for out in outputs)
    assert arrays[0] is shared and all(a.flags.writeable for a in arrays)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays)
                   for b in arrays[i + 1:])
    for a in arrays:
        np.testing.assert_array_equal(a, [0.0, 1.0, 2.0, 3.0])


def test_views_every_rank_returns_of_one_writeable_array_come_back_apart():
    """A writeable view (base not None) is copied: the ranks' outputs share memory with
    no other rank's. Handing a view back as it was (only its not having been handed out
    yet checked) left rank 0's and rank 1's outputs, and the array they view, one
    memory."""
    table = np.arange(8.0)

    def program(comm):
        yield from ()
        return table[2 * comm.rank:2 * comm.rank + 4]

    outputs = sc.run_program(sc.topology.switch(2), program).outputs
    np.testing.assert_array_equal(outputs[0], [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(outputs[1], [2.0, 3.0, 4.0, 5.0])
    assert not np.shares_memory(outputs[0], outputs[1])
    assert not any(np.shares_memory(out, table) for out in outputs)
    outputs[0][2] = -1.0
    assert outputs[1][0] == 2.0 and table[2] == 2.0


@pytest.mark.parametrize("n", [1000007, 1000000003])
def test_equal_shared_reductions_asked_together_end_together_at_the_exact_time(n):
    """7 equal jobs of n bytes from 0 at 3e9 B/s share the rate evenly: all end at
    7n / 3e9 s, the exact quotient rounded once (Fraction), not an ulp off."""
    ends = _ends([n] * 7, [0.0] * 7, 3e9)
    assert set(ends.values()) == {float(Fraction(7 * n, 3 * 10**9))}


def test_a_long_shared_reduction_with_50_bytes_left_when_another_joins_goes_on():
    """A: 10^12 bytes at 10^9 B/s; B: 1000 bytes from 1000 s - 50 ns, when A has 50 bytes
    left (5e-11 of it, above 1e-12). Processor sharing by hand: A ends 100 ns later, at
    1000 s + 50 ns; B has 50 bytes done then, 950 alone: 1000 s + 1 us."""
    ends = _ends([10**12, 1000], [0.0, 1000 - 5e-8], 1e9)
    assert ends[0] == pytest.approx(1000 + 5e-8, rel=1e-14)
    assert ends[1] == pytest.approx(1000 + 1e-6, rel=1e-14)


def test_a_data_free_chunk_index_is_read_as_a_list_reads_it():
    """pieces[1.5] = chunk was stored under its own key in data-free mode (join then
    counted 14 elements of 10 + 4) where data mode refuses it; an integer of any kind
    and a negative one from the end are taken as a list takes them."""
    whole = sc.VirtualBuffer(10, np.float32)
    for mode in (whole, np.zeros(10, np.float32)):
        pieces = Comm.split_buffer(mode, 4)
        with pytest.raises(TypeError, match="indices must be integers or slices, not float"):
            pieces[1.5] = pieces[0]
    seven = sc.VirtualBuffer(7, np.float32)
    for index, sizes in ((np.int64(2), [3, 3, 7, 2]), (-1, [3, 3, 2, 7]), (True, [3, 7, 2, 2])):
        pieces = Comm.split_buffer(whole, 4)
        pieces[index] = seven
        assert [len(c) for c in pieces] == sizes
        assert Comm.join(pieces).count == sum(sizes)
        assert pieces[index] is seven


def test_an_integer_average_started_in_a_program_is_read_only():
    """An integer AVG's output is a new array (the sum divided by p): it was writeable,
    where every other started collective's is read-only."""
    def program(comm):
        outs = []
        for dtype, op in (("int32", "avg"), ("float32", "avg"), ("int32", "sum")):
            out = yield comm.all_reduce(np.arange(4, dtype=dtype), op=op)
            outs.append(out.flags.writeable)
        return outs

    topo = sc.topology.switch(4, bandwidth=1e9, latency=0.5e-6)
    assert sc.run_program(topo, program).outputs == [[False] * 3] * 4


def test_arrays_of_python_objects_are_not_sent():
    """A send of an object array copied the references only: the sender's later change to
    a list in it reached the receiver, and 8 bytes a pointer were counted."""
    def program(comm):
        if comm.rank == 0:
            box = np.empty(1, dtype=object)
            box[0] = [1, 2]
            yield comm.send(box, 1)
        else:
            yield comm.recv(0)

    with pytest.raises(sc.AlgorithmError, match=r"rank 0 raised CommUsageError in program: "
                                                r"cannot send an array of dtype object"):
        sc.run_program(sc.topology.switch(2), program)


def test_split_and_join_name_arrays_they_cannot_cut_or_glue():
    with pytest.raises(sc.CommUsageError, match=r"split_buffer of a 0-d array"):
        Comm.split_buffer(np.array(5.0), 2)
    with pytest.raises(sc.CommUsageError, match=r"join takes chunks of one or more "
                                                r"dimensions, got a 0-d array"):
        Comm.join([np.array(1.0), np.array(2.0)])
    with pytest.raises(sc.CommUsageError, match=r"one shape past their first axis, got "
                                                r"shapes \(2, 2\), \(2,\)"):
        Comm.join([np.ones(2), np.ones((2, 2))])
    glued = Comm.join([np.ones((2, 3)), np.zeros((1, 3))])
    assert glued.shape == (3, 3) and glued.sum() == 6


def test_the_time_limit_s_next_event_is_never_written_as_the_limit():
    """1000 sleeps of 1 ms end at 1.0000000000000007 s, which 9 digits wrote as 't=1 s',
    the limit itself."""
    def loop(comm):
        while True:
            yield comm.sleep(1e-3)

    with pytest.raises(sc.RunLimitError, match=r"until=1 s: its next event falls at "
                                               r"t=1\.0000000000000007 s"):
        sc.run_program(sc.topology.switch(2), loop, until=1.0)


def test_a_data_free_chunk_index_past_the_end_is_refused_as_a_list_refuses_it():
    """10 elements in 4 chunks (3, 3, 2, 2): index 4 and -5 are out of range, read or
    written, as for a list of 4; nothing is stored under them."""
    pieces = Comm.split_buffer(sc.VirtualBuffer(10, np.float32), 4)
    for index in (4, -5):
        with pytest.raises(IndexError, match=f"^chunk index {index} out of range for 4 "
                                             f"chunks$"):
            pieces[index]
        with pytest.raises(IndexError, match=f"^chunk index {index} out of range for 4 "
                                             f"chunks$"):
            pieces[index] = sc.VirtualBuffer(7, np.float32)
    assert [len(c) for c in pieces] == [3, 3, 2, 2]
    assert Comm.join(pieces).count == 10


def test_join_names_a_0_d_array_among_arrays_of_one_dimension():
    """One 0-d chunk among 1-d ones is named as a lone one is (numpy's own ValueError,
    'zero-dimensional arrays cannot be concatenated', came out where it is not first)."""
    for chunks in ([np.ones(2), np.array(1.0)], [np.array(1.0), np.ones(2)]):
        with pytest.raises(sc.CommUsageError, match=r"join takes chunks of one or more "
                                                    r"dimensions, got a 0-d array"):
            Comm.join(chunks)


def test_an_integer_average_started_in_a_program_is_the_sum_divided_by_p():
    """Rank r gives (r + 1) x [0, 1, 2, 3]: the sum is 10 x [0, 1, 2, 3] and the average
    over 4 ranks [0, 2.5, 5, 7.5], which int32 holds as [0, 2, 5, 7]."""
    def program(comm):
        out = yield comm.all_reduce(np.arange(4, dtype=np.int32) * (comm.rank + 1),
                                    op="avg")
        return out.dtype.name, out.tolist()

    topo = sc.topology.switch(4, bandwidth=1e9, latency=0.5e-6)
    assert sc.run_program(topo, program).outputs == [("int32", [0, 2, 5, 7])] * 4
