"""Bad input is refused before the run, with a message naming the value; failures inside
a run name the rank."""

from __future__ import annotations

import math
import signal
import tempfile
import time

import numpy as np
import pytest
from conftest import NO_FORMULA

import simcoll as sc
from simcoll.errors import TopologyError


def topo4():
    return sc.topology.switch(4)


def test_every_error_derives_from_the_root():
    for name in sc.__all__:
        obj = getattr(sc, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, sc.SimCollError)


@pytest.mark.parametrize("kwargs, match", [
    (dict(collective="all_reduce_x", algorithm="ring"), "all_reduce_x.*all_reduce"),
    (dict(collective="all_reduce", algorithm="rnig"), "rnig.*naive.*ring"),
    (dict(collective="all_reduce", algorithm="ring", network="fluid"), "fluid.*analytical"),
])
def test_unknown_names_list_the_known_ones(kwargs, match):
    kwargs = dict(kwargs)  # the parameter's dict is shared by every run of this test
    collective = kwargs.pop("collective")
    with pytest.raises(sc.SimCollError, match=match):
        sc.simulate(topo4(), collective, nbytes=64, **kwargs)


def test_unknown_name_errors_are_specific():
    with pytest.raises(sc.UnknownCollectiveError):
        sc.simulate(topo4(), "allreduce", algorithm="ring", nbytes=64)
    with pytest.raises(sc.UnknownAlgorithmError):
        sc.simulate(topo4(), "all_reduce", algorithm="rnig", nbytes=64)
    with pytest.raises(sc.UnknownNetworkError):
        sc.simulate(topo4(), "all_reduce", algorithm="ring", nbytes=64, network="x")


def arrays(p=4, n=8, dtype=np.float32):
    return [np.ones(n, dtype=dtype) for _ in range(p)]


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "exactly one of data"),
    (dict(data=arrays(), nbytes=64), "exactly one of data"),
    (dict(data=arrays(p=3)), "3 arrays but the topology has 4 ranks"),
    (dict(data=arrays()[:3] + [np.ones(9, np.float32)]), r"data\[3\].*same shape"),
    (dict(data=arrays()[:3] + [np.ones(8, np.float64)]), r"data\[3\].*float64"),
    (dict(data=arrays()[:3] + [[1.0] * 8]), r"data\[3\] is a list"),
    (dict(data=[np.ones((2, 4), np.float32)] * 4), r"shape \(2, 4\).*1-D"),
    # The mask went unread: masked elements were summed and the run read correct.
    (dict(data=[np.ma.masked_array(np.ones(8, np.float32), [1] + [0] * 7)] * 4),
     r"data\[0\] is a MaskedArray, a subclass of numpy's array .* pass plain arrays: "
     r"np.asarray\(x\), or x.filled\(...\) to set what the masked elements hold$"),
    (dict(data=[np.memmap(tempfile.TemporaryFile(), np.float32, "w+", shape=(8,))] * 4),
     r"data\[0\] is a memmap, a subclass of numpy's array .* pass plain arrays: "
     r"np.asarray\(x\)$"),
    (dict(data=np.ones((4, 8))), "list of 4 numpy arrays"),
    (dict(data=[np.array(["a"] * 8)] * 4), "dtype <U1"),
    (dict(nbytes=-8), "nbytes=-8"),
    (dict(nbytes=10), "nbytes=10 is not a multiple of the float32 item size"),
    (dict(nbytes="12 parsecs"), "12 parsecs"),
    (dict(nbytes=64, dtype="complex128"), "complex128"),
    (dict(nbytes=64, op="median"), "median.*SUM"),
    (dict(nbytes=64, chunkz=4), r"\['chunkz'\]"),
])
def test_bad_arguments_are_refused_before_the_run(kwargs, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.simulate(topo4(), "all_reduce", algorithm="ring", **kwargs)


def test_parameter_server_refuses_more_servers_than_hosts():
    with pytest.raises(sc.InvalidInputError,
                       match="servers=3 is more than the machine.s hosts=2 server"):
        sc.simulate(sc.topology.switch(4, servers=2), "all_reduce",
                    algorithm="parameter_server", nbytes=64, servers=3)
    with pytest.raises(sc.InvalidInputError,
                       match="servers=5 is more than the machine.s p=4 ranks"):
        sc.simulate(topo4(), "all_reduce", algorithm="parameter_server", nbytes=64, servers=5)


@pytest.mark.parametrize("bandwidth", [0, -1, math.inf, math.nan, "fast"])
def test_bad_bandwidth(bandwidth):
    with pytest.raises(TopologyError, match="bandwidth"):
        sc.topology.switch(2, bandwidth=bandwidth)


@pytest.mark.parametrize("latency", [-1e-6, math.inf, math.nan])
def test_bad_latency(latency):
    with pytest.raises(TopologyError, match="latency"):
        sc.topology.ring(3, latency=latency)


def test_disconnected_topology_is_refused():
    topo = sc.Topology("islands")
    a, b, c = topo.add_gpu(), topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=1e9)
    with pytest.raises(TopologyError, match="not connected: gpu2"):
        sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=64)
    assert c == "gpu2"


def test_hand_built_topology_errors():
    topo = sc.Topology()
    a = topo.add_gpu()
    with pytest.raises(TopologyError, match="unknown device 'nope'"):
        topo.add_link(a, "nope", bandwidth=1e9)
    with pytest.raises(TopologyError, match="to itself"):
        topo.add_link(a, a, bandwidth=1e9)
    with pytest.raises(TopologyError, match="already exists"):
        topo.add_gpu(a)
    b = topo.add_gpu()
    topo.add_link(a, b, bandwidth=1e9)
    with pytest.raises(TopologyError, match="already linked"):
        topo.add_link(b, a, bandwidth=1e9)
    with pytest.raises(TopologyError, match="no GPU"):
        sc.Topology().validate()
    with pytest.raises(TopologyError, match="reduce_bandwidth"):
        topo.add_gpu(reduce_bandwidth=0)
    # Integers beyond float's range are as infinite as 1e400 (a raw OverflowError before).
    with pytest.raises(TopologyError, match=r"bandwidth=1000.* is not accepted; use a number "
                                            r"> 0, finite"):
        sc.topology.switch(4, bandwidth=10**400)
    with pytest.raises(TopologyError, match=r"latency=-1000.* is not accepted"):
        sc.topology.switch(4, latency=-10**400)


@pytest.mark.parametrize("builder, args", [
    (sc.topology.switch, (0,)), (sc.topology.ring, (-1,)), (sc.topology.torus, ((2, 0),)),
    (sc.topology.cluster, (2, 0)), (sc.topology.fully_connected, (2.5,)),
])
def test_builder_counts_are_checked(builder, args):
    with pytest.raises(TopologyError, match="not accepted"):
        builder(*args)


def test_root_out_of_range_is_refused():
    @sc.register("broadcast", "test_root_check", cost=NO_FORMULA)
    def bcast(comm, x, *, root=0):
        yield from ()
        return x

    with pytest.raises(sc.InvalidInputError,
                       match=r"root=4 is not accepted; use an integer >= 0 and <= 3"):
        sc.simulate(topo4(), "broadcast", algorithm="test_root_check", nbytes=64, root=4)


def test_deadlock_names_every_stuck_rank():
    @sc.register("all_reduce", "test_deadlock", cost=NO_FORMULA)
    def everyone_receives_first(comm, x, *, op=sc.ReduceOp.SUM):
        got = yield comm.recv(src=(comm.rank + 1) % comm.size)
        yield comm.send(x, dst=(comm.rank - 1) % comm.size)
        return got

    with pytest.raises(sc.DeadlockError) as info:
        sc.simulate(topo4(), "all_reduce", algorithm="test_deadlock", nbytes=64)
    assert info.value.waiting == {r: f"recv from {(r + 1) % 4} (tag 0)" for r in range(4)}
    assert "rank 0 waits for recv from 1 (tag 0)" in str(info.value)
    assert "rank 3 waits for recv from 0" in str(info.value)


def test_partial_deadlock_names_only_stuck_ranks():
    @sc.register("all_reduce", "test_partial_deadlock", cost=NO_FORMULA)
    def rank_two_waits(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 2:
            yield comm.recv(src=0, tag=7)
        yield from ()
        return x

    with pytest.raises(sc.DeadlockError, match="rank 2 waits for recv from 0 .tag 7.") as info:
        sc.simulate(topo4(), "all_reduce", algorithm="test_partial_deadlock", nbytes=64)
    assert list(info.value.waiting) == [2]


def test_unreceived_messages_are_reported():
    @sc.register("all_reduce", "test_leaky", cost=NO_FORMULA)
    def leaky(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            yield comm.send(x, dst=1, tag="lost")
        return x

    with pytest.raises(sc.UnmatchedMessageError,
                       match=r"0->1 .tag 'lost'.; rank 1 returned without receiving it"):
        sc.simulate(topo4(), "all_reduce", algorithm="test_leaky", nbytes=64)


def test_receives_no_message_matched_are_reported_waited_on_or_not():
    """A receive posted and never matched ended the run as a success where its program
    did not wait on it: a forgotten yield (the program returned the receive's event as
    its output) or the loser of an any-of wait; as a message never received does, it
    is an UnmatchedMessageError naming the rank and the receive."""
    topo = sc.topology.switch(3, bandwidth=1e9, latency=0.5e-6)

    def forgot_yield(comm):
        if comm.rank == 0:
            x = comm.recv(1)   # meant: x = yield comm.recv(1); rank 1 sends nothing
            yield comm.sleep(1e-6)
            return x

    def either(comm):
        if comm.rank == 0:
            yield comm.recv(1) | comm.recv(2, tag=5)   # rank 2 never sends tag 5
        if comm.rank == 1:
            yield comm.send(np.ones(2), 0)

    with pytest.raises(sc.UnmatchedMessageError,
                       match=r"^forgot_yield finished with 1 receive\(s\) no message "
                             r"matched: rank 0's recv from 1 \(tag 0\); a send missing, or "
                             r"a tag or source that does not match"):
        sc.run_program(topo, forgot_yield)
    with pytest.raises(sc.UnmatchedMessageError,
                       match=r"1 receive\(s\) no message matched: rank 0's recv from 2 "
                             r"\(tag 5\);"):
        sc.run_program(topo, either)

    def both_sent(comm):   # the same any-of wait where both arrive: no error
        if comm.rank == 0:
            yield comm.recv(1) | comm.recv(2, tag=5)
            yield comm.sleep(1e-3)
        else:
            yield comm.send(np.ones(2), 0, tag=5 if comm.rank == 2 else 0)

    assert sc.run_program(topo, both_sent).time > 1e-3


def test_a_peer_off_by_one_that_reaches_a_device_is_named_as_such():
    """On a machine with an NVSwitch that reduces (or server hosts), address p is that
    device, so dst=p is legal and the message waits there for a program that never
    runs. The unreceived message read "endpoint 8 returned without receiving it" (it ran
    nothing), a deadlock did not mention it, and an address past the devices was "out of
    range; ranks are 0..8" on 8 GPUs. Each now names the device and the numbering."""
    def send_p(comm):
        if comm.rank == 0:
            yield comm.send(np.ones(4, np.float32), dst=comm.size)

    def ring_off_by_one(comm):
        right = comm.rank + 1 if comm.rank + 1 <= comm.size else 0
        yield comm.send(np.ones(4, np.float32), dst=right)
        yield comm.recv((comm.rank - 1) % comm.size)

    def send_far(comm):
        if comm.rank == 0:
            yield comm.send(np.ones(4, np.float32), dst=comm.size + 1)

    h100 = sc.topology.dgx_h100(1)
    with pytest.raises(sc.UnmatchedMessageError,
                       match=r"1 message\(s\) never received: 0->8 \(tag 0; nvswitch0 runs "
                             r"no program\); a peer off by one\?$"):
        sc.run_program(h100, send_p)
    with pytest.raises(sc.DeadlockError,
                       match=r"rank 0 waits for recv from 3 \(tag 0\).*; arrived and not "
                             r"received: 3->4 \(tag 0; server0 runs no program\)$"):
        sc.run_program(sc.topology.switch(4, servers=1), ring_off_by_one)
    with pytest.raises(sc.AlgorithmError,
                       match=r"dst=9 is out of range; GPU ranks are 0..7, in-network device "
                             r"8$"):
        sc.run_program(h100, send_far)

    def recv_from_the_host(comm):   # the other half: a receive from an address past the GPUs
        if comm.rank == 0:
            yield comm.recv(comm.size)

    with pytest.raises(sc.DeadlockError,
                       match=r"rank 0 waits for recv from 3 \(tag 0; server0 runs no "
                             r"program\)"):
        sc.run_program(sc.topology.switch(3, servers=1), recv_from_the_host)


def test_a_polling_loop_that_runs_into_a_limit_names_the_receive_it_polls():
    """A program that polls a receive nothing will match, sleeping between looks, is not
    deadlocked: it runs into the event limit, whose error said only to raise it. It now
    names the receive, as a deadlock does (100,000 events of 1 us sleeps: t = 0.1 s)."""
    def poll(comm):
        if comm.rank == 0:
            waiting = comm.recv(1, tag=7)
            while not waiting.triggered:
                yield comm.sleep(1e-6)
        else:
            yield comm.sleep(0)

    with pytest.raises(sc.RunLimitError,
                       match=r"reached the event limit max_events=100000 at t=0\.09999\d* s "
                             r"with rank 0 still running \(waiting on receives no message matched: "
                             r"rank 0's recv from 1 \(tag 7\)\); raise the limit"):
        sc.run_program(sc.topology.switch(2), poll, max_events=10**5)


def test_a_deadlock_names_the_message_no_receive_took():
    """A tag that does not match: rank 1 waits for tag 0 while rank 0's message, tag 1,
    sits unreceived; the deadlock said only the first half."""
    def wrong_tag(comm):
        if comm.rank == 0:
            yield comm.send(np.ones(4, np.float32), dst=1, tag=1)
        elif comm.rank == 1:
            yield comm.recv(0, tag=0)

    with pytest.raises(sc.DeadlockError,
                       match=r"rank 1 waits for recv from 0 \(tag 0\); arrived and not "
                             r"received: 0->1 \(tag 1\)$"):
        sc.run_program(topo4(), wrong_tag)


def test_exception_in_a_rank_names_it():
    @sc.register("all_reduce", "test_crash", cost=NO_FORMULA)
    def crash(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(1e-6)
        if comm.rank == 3:
            raise RuntimeError("boom")
        return x

    with pytest.raises(sc.AlgorithmError, match="rank 3 raised RuntimeError.*boom"):
        sc.simulate(topo4(), "all_reduce", algorithm="test_crash", nbytes=64)


@pytest.mark.parametrize("dst, match", [(4, "dst=4 is out of range; GPU ranks are 0..3"),
                                        (1, "dst=1 is this rank itself"),
                                        ("2", "dst='2' is not an integer rank")])
def test_bad_peer_inside_an_algorithm(dst, match):
    @sc.register("all_reduce", f"test_bad_peer_{dst}", cost=NO_FORMULA)
    def bad(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 1:
            yield comm.send(x, dst=dst)
        return x

    with pytest.raises(sc.AlgorithmError, match=f"rank 1 raised CommUsageError.*{match}"):
        sc.simulate(topo4(), "all_reduce", algorithm=f"test_bad_peer_{dst}", nbytes=64)


def test_a_bad_yield_in_code_without_a_source_file_is_still_named():
    """SimPy reads the program's file to say where it yielded; a program typed into a
    notebook cell, ``python -c`` or stdin has none on disk, and the run ended in a
    FileNotFoundError instead of the refusal."""
    namespace: dict = {}
    exec(compile("def cell(comm):\n    yield comm.sleep(0.0)\n    yield 5\n", "<cell 7>",
                 "exec"), namespace)
    with pytest.raises(sc.AlgorithmError, match=r"rank 0 in cell yielded something that is "
                                                r"not an event \(at <cell 7>, line 3\)"):
        sc.run_program(topo4(), namespace["cell"])


def test_registering_a_plain_function_is_refused():
    with pytest.raises(TypeError, match="not a generator function"):
        sc.register("all_reduce", "test_plain", cost=NO_FORMULA)(lambda comm, x: x)


def test_yielding_something_that_is_not_an_event_names_the_rank():
    @sc.register("all_reduce", "test_bad_yield", cost=NO_FORMULA)
    def bad_yield(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(1e-6)
        if comm.rank == 2:
            yield 5
        return x

    with pytest.raises(sc.AlgorithmError, match="rank 2 in all_reduce/test_bad_yield yielded "
                                                "something that is not an event"):
        sc.simulate(topo4(), "all_reduce", algorithm="test_bad_yield", nbytes=64)


def test_errors_with_details_cross_processes_whole():
    # A sweep's or a comparison's worker sends its error back pickled: an exception
    # pickles as its args, and these hand Exception only their message, so unpickling
    # called __init__ with one argument and raised a TypeError in the parent instead.
    import pickle

    cases = [sc.RunLimitError("past until=1", ["rank 0", "host h"]),
             sc.DeadlockError("stuck", {2: "recv from 0 (tag 0)"}),
             sc.LinkFailureError("link down", ("a", "b"), [(0, 1), (2, (3, 4))])]
    for err in cases:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert vars(back) == vars(err)


# --- what leaves a run at once, and what a run limit names -----------------------------------

@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, MemoryError])
def test_ctrl_c_exit_and_out_of_memory_leave_the_run_at_once_as_themselves(raised):
    """SimPy scheduled a program's exception as its process's failure: every other rank
    due at that instant ran its Python work first (a Ctrl-C inside programs busy in
    loops took one press per rank), and a MemoryError came out as an AlgorithmError."""
    ran = []

    def program(comm):
        ran.append(comm.rank)
        if comm.rank == 0:
            raise raised
        yield comm.sleep(1e-6)

    with pytest.raises(raised):
        sc.run_program(sc.topology.switch(8), program)
    assert ran == [0]  # no other rank ran after it


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers")
def test_ctrl_c_during_a_rank_s_python_loop_surfaces_when_it_comes():
    """Each rank spends 1 s in Python; a Ctrl-C 0.2 s into rank 0's surfaces then, not
    after every other rank's second too (3.2 s on 4 ranks)."""
    def busy(comm):
        start = time.monotonic()
        while time.monotonic() - start < 1.0:
            pass
        yield comm.sleep(1e-6)

    previous = signal.signal(signal.SIGALRM, signal.default_int_handler)  # as Ctrl-C
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            sc.run_program(sc.topology.switch(4), busy)
        elapsed = time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert elapsed < 0.9


def test_a_memory_error_in_a_rank_is_not_an_algorithm_s_error():
    @sc.register("all_reduce", "test_out_of_memory", cost=NO_FORMULA)
    def hungry(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(1e-6)
        if comm.rank == 2:
            raise MemoryError
        return x

    with pytest.raises(MemoryError) as info:
        sc.simulate(topo4(), "all_reduce", algorithm="test_out_of_memory", nbytes=64)
    assert type(info.value) is MemoryError


def test_a_bad_yield_inside_a_helper_names_the_helper_s_line():
    namespace: dict = {}
    exec(compile("def helper(comm):\n    yield 5\n\n"
                 "def cell(comm):\n    yield comm.sleep(0.0)\n    yield from helper(comm)\n",
                 "<cell 8>", "exec"), namespace)
    with pytest.raises(sc.AlgorithmError, match=r"rank 0 in cell yielded something that is "
                                                r"not an event \(at <cell 8>, line 2\)"):
        sc.run_program(topo4(), namespace["cell"])


def test_a_run_limit_names_every_rank_it_stopped_spinning():
    """Every rank spins on instant events; each meets the limit in turn and dies of it,
    and only the first was named."""
    def spin(comm):
        while True:
            yield comm.compute(0)

    with pytest.raises(sc.RunLimitError, match=r"rank 0, rank 1, .* rank 7 still running") \
            as info:
        sc.run_program(sc.topology.switch(8), spin, max_events=1000)
    assert info.value.running == [f"rank {r}" for r in range(8)]


def test_ranks_spinning_on_instant_work_without_yielding_all_stop():
    """Two ranks call compute(0) in a loop that forgot to yield it: rank 0 meets the
    event limit of 1,000 and dies of it; rank 1, run next at the same instant, was
    then handed an event that never fires at every call and spun for ever (bounded
    here to 100,000 calls); it stops at its second call."""
    calls = [0, 0]

    def spin(comm):
        for _ in range(100_000):
            calls[comm.rank] += 1
            comm.compute(0.0)
        return None
        yield

    with pytest.raises(sc.RunLimitError, match=r"reached the event limit max_events=1000"):
        sc.run_program(sc.topology.switch(2), spin, max_events=1000)
    assert calls == [1001, 2]


def test_programs_closed_after_a_stop_leave_the_runs_error_standing():
    """After the stop the programs left waiting are closed, with no program active: their
    cleanup's instant work was all counted as one program calling on, and the second
    one's raised the engine's stop (a BaseException) out of run_program in place of the
    RunLimitError."""
    def cleans_up(comm):
        if comm.rank == 0:
            while True:
                yield comm.compute(0)
        try:
            yield comm.recv(0)
        finally:
            comm.compute(0)

    def catches_the_stop(comm):
        try:
            while True:
                yield comm.compute(0)
        except BaseException:
            pass
        yield comm.compute(0)

    for program in (cleans_up, catches_the_stop):
        with pytest.raises(sc.RunLimitError, match=r"reached the event limit max_events=1000 "
                                                   r"at t=0 s with rank 0, rank 1, rank 2"):
            sc.run_program(sc.topology.switch(3), program, max_events=1000)


class _OwnSignal(BaseException):
    pass


@pytest.mark.parametrize("raised", [GeneratorExit("closed by hand"), _OwnSignal("stop")])
def test_a_base_exception_of_a_program_is_named_as_the_ranks(raised):
    """GeneratorExit and a program's own BaseException came out of the run as themselves,
    naming neither the rank nor the program (Ctrl-C's and the engine's stop still do)."""
    def program(comm):
        yield comm.sleep(1e-6)
        if comm.rank == 1:
            raise raised

    with pytest.raises(sc.AlgorithmError, match=f"rank 1 raised {type(raised).__name__} in "
                                                f"program: {raised}") as caught:
        sc.run_program(sc.topology.switch(2), program)
    assert caught.value.__cause__ is raised


def test_a_program_that_catches_exceptions_does_not_swallow_the_run_limit():
    """The limit is raised inside the program (compute(0) past max_events): a program's
    ``except Exception`` caught it, and the run came back as a Result with outputs such as
    'gave up after 1000: RunStop' (or spun for ever, retrying)."""
    def gives_up(comm):
        done = 0
        try:
            for _ in range(5000):
                yield comm.compute(0)
                done += 1
        except Exception as exc:
            return f"gave up after {done}: {type(exc).__name__}"
        return done

    def retries(comm):
        for _ in range(20_000):   # bounded: the old code finished it as a Result
            try:
                yield comm.compute(0)
            except Exception:
                pass

    def catches_everything(comm):
        try:
            for _ in range(5000):
                yield comm.compute(0)
        except:  # noqa: E722 (the point: even a bare except keeps the run's stop)
            return "caught"

    for program in (gives_up, retries):
        with pytest.raises(sc.RunLimitError, match=r"reached the event limit "
                                                   r"max_events=1000 at t=0 s with rank 0"):
            sc.run_program(sc.topology.switch(2), program, max_events=1000)
    with pytest.raises(sc.RunLimitError, match=r"reached the event limit max_events=1000"):
        sc.run_program(sc.topology.switch(2), catches_everything, max_events=1000)


def test_work_not_waited_for_past_the_time_limit_stops_the_run():
    """A program that ends with compute it does not wait for keeps its GPU busy until the
    compute ends, and the run's time says so: 10 s past until=1 s came back as a Result
    of time 10.000001 s, no limit reached."""
    def fire_and_forget(comm):
        yield comm.compute(1e-6)
        comm.compute(10.0)
        return comm.rank

    with pytest.raises(sc.RunLimitError,
                       match=r"^fire_and_forget reached the simulated-time limit until=1 s: "
                             r"compute or a reduction a program started and did not wait "
                             r"for ends at t=10.000001 s") as info:
        sc.run_program(sc.topology.switch(2), fire_and_forget, until=1.0)
    assert info.value.running == []
    assert sc.run_program(sc.topology.switch(2), fire_and_forget, until=11.0).time == \
        pytest.approx(10.000001, rel=1e-12)
    # a limit ':g' would write as 1 is named in full
    with pytest.raises(sc.RunLimitError, match=r"until=0\.9999999999999999 s: compute or a "
                                               r"reduction a program started"):
        sc.run_program(sc.topology.switch(2), fire_and_forget, until=0.9999999999999999)


def test_work_waited_for_ends_within_the_limit_set_at_its_last_event():
    """A program that waits for all its compute, with until= the instant its last event
    fires: the compute's end, computed as max(now, x) + s, lies an ulp past that instant
    (1.2076672765127434 against 1.2076672765127432), which must not read as work left
    running past the limit."""
    x, y, s = 0.762280082457942, 0.0021060533511106927, 0.4453871940548014

    def waits(comm):
        first = comm.compute(x)
        yield comm.sleep(y)
        yield comm.compute(s)
        yield first
        return comm.rank

    fired = y + ((x + s) - y)
    assert fired < x + s   # the ulp
    assert sc.run_program(sc.topology.switch(2), waits, until=fired).time == x + s


def test_a_run_limit_halfway_through_a_ring_names_every_rank():
    """A ring all_reduce's ranks return after its 2 (p - 1) = 6 steps; stopped after 10
    events, half way (t = 1.39e-5 s of 2.77e-5 s), none had returned."""
    with pytest.raises(sc.RunLimitError) as info:
        sc.simulate(topo4(), "all_reduce", algorithm="ring", nbytes=1 << 20, max_events=10)
    assert info.value.running == ["rank 0", "rank 1", "rank 2", "rank 3"]


@pytest.mark.parametrize("until", [1e-6, 1.0, 1e4])
def test_work_not_waited_for_a_billionth_past_the_limit_stops_the_run(until):
    """The until check allows a computed end the rounding of one sum past its event (a
    relative 1e-12), not more: compute a program does not wait for that ends a relative
    1e-9 past until= is past the limit, on every scale (an absolute 1e-12 s would let
    compute end a millionth past until=1e-6 s)."""
    def late(comm):
        yield comm.compute(until / 2)
        comm.compute(until / 2 * (1 + 2e-9))
        return comm.rank

    with pytest.raises(sc.RunLimitError, match=rf"^late reached the simulated-time limit "
                                               rf"until={until:g} s: compute or a "
                                               rf"reduction a program started"):
        sc.run_program(sc.topology.switch(2), late, until=until)
    assert sc.run_program(sc.topology.switch(2), late, until=until * (1 + 1e-8)).time == \
        pytest.approx(until * (1 + 1e-9), rel=1e-13)


def test_seventeen_unmatched_receives_show_sixteen_and_count_the_one_more():
    """17 receives posted and never matched (tags 0..16 from rank 1): the message counts
    17, names the first 16 (tags 0..15) and says "(and 1 more)"."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def forgets(comm):
        if comm.rank == 0:
            for tag in range(17):
                comm.recv(1, tag=tag)   # never waited on; rank 1 sends nothing
            yield comm.sleep(1e-6)

    with pytest.raises(sc.UnmatchedMessageError) as info:
        sc.run_program(topo, forgets)
    text = str(info.value)
    assert "17 receive(s) no message matched: " in text
    shown = "; ".join(f"rank 0's recv from 1 (tag {t})" for t in range(16))
    assert shown + " (and 1 more); a send missing" in text
    assert "(tag 16)" not in text


def test_unmatched_receives_are_listed_by_rank_not_by_when_they_were_posted():
    """Rank 2 posts its receive at t=0, rank 1 only after 1 us: the report lists rank 1's
    first (ranks in order)."""
    topo = sc.topology.switch(3, bandwidth=1e9, latency=0.5e-6)

    def late(comm):
        if comm.rank == 1:
            yield comm.sleep(1e-6)
            comm.recv(0, tag=1)
        elif comm.rank == 2:
            comm.recv(0, tag=2)
            yield comm.sleep(2e-6)

    with pytest.raises(sc.UnmatchedMessageError,
                       match=r"2 receive\(s\) no message matched: rank 1's recv from 0 "
                             r"\(tag 1\); rank 2's recv from 0 \(tag 2\); "):
        sc.run_program(topo, late)


def test_a_program_that_catches_everything_and_retries_still_stops():
    """A program catching every exception around compute(0) caught the stop again at
    every call and the run never ended; now the program waits where it caught it, and
    the run ends with it."""
    caught_stops = []

    def retries(comm):
        for _ in range(20_000):   # bounded: the old code spun through them all
            try:
                yield comm.compute(0)
            except BaseException as caught:   # the stop too (not the generator's close)
                if isinstance(caught, GeneratorExit):
                    raise
                caught_stops.append(comm.rank)
        return "ended"

    with pytest.raises(sc.RunLimitError, match=r"reached the event limit max_events=1000"):
        sc.run_program(sc.topology.switch(2), retries, max_events=1000)
    assert caught_stops == [0]   # caught once, then waited: it was caught 19,500 times


def test_a_long_double_past_floats_range_is_not_a_time():
    """np.longdouble holds 1e400, which passed '< inf' and became an infinite compute;
    the run then blamed extreme link latencies."""
    huge = np.longdouble("1e400")
    if not np.isfinite(huge):
        pytest.skip("this platform's long double is float64")

    def program(comm):
        yield comm.compute(huge)

    with pytest.raises(sc.AlgorithmError, match="compute.* got .*; use a finite number of "
                                                "seconds >= 0"):
        sc.run_program(sc.topology.switch(2), program)


def test_alike_unmatched_receives_are_counted_each():
    """Two receives from rank 1 with tag 0, never matched: the message said "1 receive(s)"
    (the two read alike were counted once); it counts 2 and shows the text once, x 2."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0.5e-6)

    def forgets(comm):
        if comm.rank == 0:
            comm.recv(1)
            comm.recv(1)
            yield comm.sleep(1e-6)

    with pytest.raises(sc.UnmatchedMessageError, match=r"finished with 2 receive\(s\) no "
                                                       r"message matched: rank 0's recv from "
                                                       r"1 \(tag 0\) x 2; a send missing"):
        sc.run_program(topo, forgets)


@pytest.mark.parametrize("add", ["add_gpu", "add_switch", "add_host", "add_nic"])
def test_a_device_name_holding_the_link_arrow_is_refused(add):
    """Result.to_dict() writes a link as "from->to": with "a->b" a device name, the link
    a->b -> c and the link a -> b->c wrote one key."""
    topo = sc.Topology()
    with pytest.raises(TopologyError, match=r"device name 'a->b' is not accepted: it holds "
                       r"'->', which joins a link's two ends"):
        getattr(topo, add)("a->b")
    assert topo.devices == ()
    assert getattr(topo, add)("a-b") == "a-b"


@pytest.mark.parametrize("name", ["->", "->b", "a->", "x->y->z"])
def test_mut20_a_device_name_with_the_arrow_anywhere_is_refused(name):
    """The rule is "holds '->'": at the start, at the end or alone, "->b" + "->" + "c"
    would still join two links' keys (a link ("x", "->b") writes "x->->b")."""
    topo = sc.Topology()
    with pytest.raises(TopologyError, match=r"it holds '->'"):
        topo.add_gpu(name)
    assert topo.devices == ()


@pytest.mark.parametrize("name", ["a>b", "a-b", "gpu-0>", ">-", "a- >b"])
def test_mut20_a_device_name_with_a_dash_or_a_chevron_but_no_arrow_is_accepted(name):
    """Only the two characters '-' then '>' together join a link's ends ("from->to");
    each alone, or the two apart or reversed, is a name like any other."""
    topo = sc.Topology()
    assert topo.add_gpu(name) == name
    assert [d.name for d in topo.devices] == [name]


def test_a_failed_run_closes_the_programs_it_leaves_suspended(recwarn):
    """A deadlock left both programs suspended in their receive: their ``finally`` ran
    whenever garbage collection reached them, outside any run, and one that yields there
    printed "generator ignored GeneratorExit". The run now closes them as it fails: the
    cleanup has run when the error arrives, and a yield in it is passed over."""
    import gc

    cleaned = []

    def stuck(comm):
        try:
            yield comm.recv(1 - comm.rank)
        finally:
            cleaned.append(comm.rank)
            yield comm.sleep(1.0)

    with pytest.raises(sc.DeadlockError):
        sc.run_program(sc.topology.switch(2), stuck)
    assert sorted(cleaned) == [0, 1]
    gc.collect()
    assert sorted(cleaned) == [0, 1]   # not again
    assert not [w for w in recwarn if "GeneratorExit" in str(w.message)]


def test_a_cleanup_that_exits_leaves_the_runs_own_error():
    """A program whose ``finally`` raises SystemExit (sys.exit in cleanup code): closing
    it as the run fails must not put that in place of the deadlock the run reports."""
    def exits(comm):
        try:
            yield comm.recv(1 - comm.rank)
        finally:
            raise SystemExit(3)

    with pytest.raises(sc.DeadlockError, match=r"rank 0 waits for recv from 1"):
        sc.run_program(sc.topology.switch(2), exits)


def _poll_right(comm):
    """Each rank polls a receive from its right neighbour (tag 7) that nothing matches."""
    waiting = comm.recv((comm.rank + 1) % comm.size, tag=7)
    while not waiting.triggered:
        yield comm.sleep(1e-6)


@pytest.mark.parametrize("ranks, more", [(16, ""), (17, " and 1 more")])
def test_a_limit_names_at_most_16_polled_receives_and_counts_the_rest(ranks, more):
    """Every rank polls a receive nothing matches until the event limit: the error names
    the first 16 ranks' receives, rank by rank, and says how many more there are (none
    past 16 on 16 ranks, so no count; 1 more on 17)."""
    names = "; ".join(f"rank {r}'s recv from {(r + 1) % ranks} \\(tag 7\\)" for r in range(16))
    with pytest.raises(sc.RunLimitError,
                       match=rf"still running \(waiting on receives no message matched: {names}"
                             rf"{more}\); raise the limit"):
        sc.run_program(sc.topology.switch(ranks), _poll_right, max_events=10**5)


def test_a_limit_leaves_out_the_receives_of_programs_that_returned():
    """Rank 1 posts a receive it never yields and returns; rank 0 polls one until the
    event limit. Only the running rank 0's receive is named: rank 1 waits for nothing,
    it has ended."""
    def one_polls(comm):
        if comm.rank == 0:
            waiting = comm.recv(1, tag=7)
            while not waiting.triggered:
                yield comm.sleep(1e-6)
        else:
            comm.recv(0, tag=3)   # left behind
            yield comm.sleep(0)

    with pytest.raises(sc.RunLimitError) as info:
        sc.run_program(sc.topology.switch(2), one_polls, max_events=10**5)
    assert ("with rank 0 still running (waiting on receives no message matched: rank 0's "
            "recv from 1 (tag 7)); raise the limit") in str(info.value)


def test_a_virtual_buffer_returned_in_a_run_of_arrays_is_refused_naming_the_rank():
    @sc.register("all_reduce", "test_returns_virtual", cost=NO_FORMULA)
    def program(comm, x, *, op):
        yield comm.sleep(0.0)
        return sc.VirtualBuffer.of(x.size, x.dtype)

    data = [np.ones(8, np.float32)] * 2
    with pytest.raises(sc.AlgorithmError, match="rank 0 in all_reduce/test_returns_virtual "
                                                "returned 8 float32 elements of a "
                                                "VirtualBuffer, which holds no data"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_returns_virtual",
                    data=data)
    # without data it is the output
    assert sc.simulate(sc.topology.switch(2), "all_reduce",
                       algorithm="test_returns_virtual", nbytes=32).correct is None

    def started(comm, arrays):
        return (yield comm.all_reduce(arrays[comm.rank], algorithm="test_returns_virtual"))

    with pytest.raises(sc.AlgorithmError, match="VirtualBuffer, which holds no data"):
        sc.run_program(sc.topology.switch(2), started, data)


def test_an_exception_whose_message_cannot_be_shown_still_comes_out_naming_the_rank():
    class Broken(Exception):
        def __str__(self):
            raise RuntimeError("no message")

    @sc.register("all_reduce", "test_broken_message", cost=NO_FORMULA)
    def program(comm, x, *, op):
        yield comm.sleep(0.0)
        raise Broken

    with pytest.raises(sc.AlgorithmError, match=r"rank \d raised Broken .*could not be shown"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_broken_message",
                    nbytes=8)


def test_a_host_programs_error_names_the_host_not_a_rank():
    topo = sc.topology.switch(4, servers=1)

    def host(comm, *, op):
        yield comm.send(None, dst=comm.size + 5)

    @sc.register("all_reduce", "test_bad_host", host=host, cost=NO_FORMULA)
    def program(comm, x, *, op):
        yield comm.sleep(0.0)
        return x

    with pytest.raises(sc.AlgorithmError, match=r"host server0 \(rank 4\): dst=9 is out of "
                                                r"range"):
        sc.simulate(topo, "all_reduce", algorithm="test_bad_host", nbytes=16)
