"""Bad input is refused before any work with a SimCollError that names the value; numpy
integers are accepted wherever an int is; interrupts pass through at once; a run that
would never end stops at its limit and names who was still running."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import NO_FORMULA

import simcoll as sc
from simcoll import numeric
from simcoll.comm import Comm


def switch(p=4):
    return sc.topology.switch(p)


@pytest.mark.parametrize("kwargs, match", [
    ({"nbytes": 10**29}, r"nbytes=10{29} on 4 ranks could overflow"),
    ({"nbytes": "abc"}, r"nbytes='abc' is not accepted"),
    ({"nbytes": 64, "dtype": None}, r"dtype=None is not accepted"),
    ({"nbytes": 64, "dtype": "U4"}, r"dtype <U4 is not accepted"),
    ({"nbytes": 64, "dtype": ">f4"}, r"dtype >f4 is not in this machine's byte order"),
    ({"nbytes": 64, "root": 1}, r"all_reduce has no root, but root=1 was given"),
    ({"nbytes": 64, "until": 0}, r"until=0 is not accepted; use a number > 0"),
    ({"nbytes": 64, "max_events": True}, r"max_events=True is not accepted; use an integer"),
])
def test_bad_run_arguments_are_refused_naming_the_value(kwargs, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.simulate(switch(), "all_reduce", algorithm="ring", **kwargs)


def test_counter_overflow_is_refused_before_the_run_not_after():
    # naive on 16 ranks with 2^60 bytes each once overflowed the int64 counters after
    # the whole run; the bound 2 p^2 nbytes < 2^63 refuses it up front.
    with pytest.raises(sc.InvalidInputError, match=r"use nbytes < 18014398509481984"):
        sc.simulate(switch(16), "all_reduce", algorithm="naive", nbytes=2**60, dtype="uint8")
    res = sc.simulate(switch(16), "all_reduce", algorithm="naive", nbytes=2**53,
                      dtype="uint8", until=math.inf)
    assert res.bytes_sent.dtype == np.int64 and res.bytes_sent[0] == 15 * 2**53


def test_big_endian_arrays_are_refused_with_how_to_convert():
    data = [np.arange(4, dtype=">f4")] * 2
    with pytest.raises(sc.InvalidInputError, match=r"newbyteorder"):
        sc.simulate(switch(2), "all_reduce", algorithm="ring", data=data)


def test_numpy_integers_are_accepted_for_counts_and_roots():
    a = sc.simulate(sc.topology.switch(np.int64(4)), "broadcast", algorithm="binomial",
                    nbytes=np.int64(4096), root=np.int32(2))
    b = sc.simulate(sc.topology.switch(4), "broadcast", algorithm="binomial", nbytes=4096,
                    root=2)
    assert a.time == b.time and a.nranks == 4
    np.testing.assert_array_equal(a.bytes_sent, b.bytes_sent)


@pytest.mark.parametrize("build, match", [
    (lambda: sc.topology.switch(2, bandwidth=True), r"^bandwidth=True is not accepted"),
    (lambda: sc.topology.switch(2, bandwidth="1e9"), r"^bandwidth='1e9' is not accepted"),
    (lambda: sc.topology.switch(2, bandwidth=1e-320), r"use a number >= 2.23e-308"),
    (lambda: sc.topology.switch(2, latency=-1), r"^latency=-1 is not accepted"),
    (lambda: sc.topology.switch(2, latency=math.inf), r"^latency=inf is not accepted"),
    (lambda: sc.topology.switch(True), r"number of GPUs n = True is not accepted"),
    (lambda: sc.topology.switch(2.0), r"number of GPUs n = 2.0 is not accepted"),
    (lambda: sc.topology.torus(4), r"torus dims=4 is not accepted; give the size of each"),
    (lambda: sc.topology.cluster(2, "8"), r"gpus_per_node='8' is not accepted"),
    (lambda: sc.Topology(5), r"^topology name 5 is not accepted; use a non-empty string$"),
    # save() wrote a nameless machine that load() refused
    (lambda: sc.Topology(""), r"^topology name '' is not accepted; use a non-empty string$"),
    (lambda: sc.topology.switch(2).route("gpu0", 1),
     r"^endpoint address 'gpu0' is a name; pass its address, topology.address\('gpu0'\)"),
    (lambda: sc.topology.switch(2).route(0, 2),
     r"^endpoint address 2 is not accepted; use an integer in 0..1"),
    # True == 1: it found rank 1's route, cached or not
    (lambda: sc.topology.switch(2).route(True, 0),
     r"^endpoint address True is not accepted; use an integer in 0..1"),
    (lambda: (lambda t: (t.route(0, 1), t.route(0, True)))(sc.topology.switch(2)),
     r"^endpoint address True is not accepted"),
    (lambda: (lambda t: (t.route(0, 1), t.route(0, np.True_)))(sc.topology.switch(2)),
     r"^endpoint address np.True_ is not accepted"),
    (lambda: (lambda t: (t.route(0, 1), t.route(0, 1.0)))(sc.topology.switch(2)),
     r"^endpoint address 1.0 is not accepted"),
])
def test_bad_machine_arguments_are_refused(build, match):
    with pytest.raises(sc.TopologyError, match=match):
        build()


_GPT = sc.training.gpt(2, 64, 4, 16, 128, batch=2)


def _idle(comm):
    yield comm.sleep(0.0)


@pytest.mark.parametrize("call, name", [
    (lambda v: sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8,
                           check=v), "check"),
    (lambda v: sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8,
                           trace=v), "trace"),
    (lambda v: sc.run_program(sc.topology.switch(2), _idle, trace=v), "trace"),
    (lambda v: sc.topology.dgx_h100(1, nvls=v), "nvls"),
    (lambda v: sc.topology.dgx_a100(1, sharp=v), "sharp"),
    (lambda v: sc.topology.fat_tree(1, sharp=v), "sharp"),
    (lambda v: sc.topology.pcie_node(2, p2p=v), "p2p"),
    (lambda v: sc.training.data_parallel(_GPT, sc.topology.switch(2), overlap=v), "overlap"),
    (lambda v: sc.training.zero_step(_GPT, sc.topology.switch(2), stage=3, prefetch=v),
     "prefetch"),
    (lambda v: sc.training.tensor_parallel_layer(_GPT, sc.topology.switch(2), tp=2,
                                                 sequence_parallel=v), "sequence_parallel"),
    (lambda v: sc.training.step(_GPT, sc.topology.switch(2), dp=2, recompute=v), "recompute"),
    (lambda v: sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                        sizes=[8], retry_failed=v), "retry_failed"),
])
def test_a_yes_or_no_takes_a_bool_and_nothing_that_only_looks_like_one(call, name):
    """``check="no"`` ran the check, as any non-empty string is true; every switch of
    the API now takes True or False (numpy's too) and refuses the rest by name."""
    for value in ("no", 1, None):
        with pytest.raises(sc.SimCollError, match=rf"^{name}={value!r} is not accepted; "
                                                  rf"use True or False"):
            call(value)
    call(np.False_)
    call(True)


@pytest.mark.parametrize("use", [
    sc.critical_path,
    lambda r: sc.plot.timeline(r),
    lambda r: sc.trace.to_chrome(r),
    lambda r: sc.plot.link_utilization(r, sc.topology.switch(2)),
])
def test_what_reads_a_trace_refuses_anything_but_a_traced_result(use):
    with pytest.raises(sc.InvalidInputError, match=r"^str 'x' is not a run's result; "
                                                   r"pass what simulate\(..., trace=True\)"):
        use("x")
    untraced = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8)
    with pytest.raises(sc.InvalidInputError, match="^this result has no trace; simulate "
                                                   "with trace=True"):
        use(untraced)
    traced = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8,
                         trace=True)
    assert use(traced) is not None


def test_a_timeline_takes_critical_as_a_bool():
    traced = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8,
                         trace=True)
    with pytest.raises(sc.InvalidInputError, match="^critical='yes' is not accepted"):
        sc.plot.timeline(traced, critical="yes")


def test_a_link_end_that_is_not_a_name_is_refused():
    topo = sc.Topology()
    a = topo.add_gpu()
    with pytest.raises(sc.TopologyError, match=r"link end \['x'\] is not a device name"):
        topo.add_link(["x"], a, bandwidth=1e9)


def test_training_step_refuses_a_string_time():
    with pytest.raises(sc.InvalidInputError, match=r"forward='1' is not accepted"):
        sc.training.data_parallel_step(switch(2), gradient_bytes=1024, forward="1",
                                       backward=0.1)


def run_program(program, p=2, **kwargs):
    name = f"_prog_{program.__name__}"
    if ("all_to_all", name) not in sc.list_algorithms("all_to_all"):
        sc.register("all_to_all", name, cost=NO_FORMULA)(program)
    return sc.simulate(switch(p), "all_to_all", algorithm=name, nbytes=8, **kwargs)


def test_a_bool_is_not_a_send_destination():
    def bool_dst(comm: Comm, x):
        yield comm.send(x, dst=True)
        return x

    with pytest.raises(sc.AlgorithmError, match=r"dst=True is not an integer rank"):
        run_program(bool_dst)


def test_a_group_member_out_of_range_is_refused():
    def bad_group(comm: Comm, x):
        comm.group([comm.rank, 99])
        yield from ()
        return x

    with pytest.raises(sc.AlgorithmError, match=r"group member 99 is not a rank of this "
                                                r"communicator; use 0..1"):
        run_program(bad_group)


def test_keyboard_interrupt_in_a_rank_propagates_as_itself():
    def interrupted(comm: Comm, x):
        yield comm.compute(1e-6)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_program(interrupted, p=8)


def test_system_exit_in_a_rank_propagates_as_itself():
    def exiting(comm: Comm, x):
        yield comm.compute(1e-6)
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        run_program(exiting)


def test_a_program_that_never_ends_stops_at_the_time_limit_naming_it():
    def forever(comm: Comm, x):
        while True:
            yield comm.compute(1.0)

    # compute(1.0) ends at 1, 2, ... 100 s, within the limit; the 101st falls beyond it
    with pytest.raises(sc.RunLimitError, match=r"simulated-time limit until=100 s: its next "
                                               r"event falls at t=101 s, with rank 0, "
                                               r"rank 1 still running") as info:
        run_program(forever, until=100)
    assert info.value.running == ["rank 0", "rank 1"]
    # a limit :g would write as 1 is named in full
    with pytest.raises(sc.RunLimitError, match=r"until=0.9999999999999999 s: its next event "
                                               r"falls at t=1 s"):
        run_program(forever, until=0.9999999999999999)


def test_a_program_spinning_on_instant_events_stops_at_the_event_limit():
    def spinning(comm: Comm, x):
        while True:
            yield comm.compute(0)

    with pytest.raises(sc.RunLimitError, match=r"event limit max_events=5000"):
        run_program(spinning, max_events=5000)


def test_messages_that_never_end_stop_at_the_event_limit():
    def ping_pong(comm: Comm, x):
        while True:
            yield comm.sendrecv(x, dst=1 - comm.rank, src=1 - comm.rank)

    with pytest.raises(sc.RunLimitError, match=r"event limit max_events=1000"):
        run_program(ping_pong, max_events=1000)


def test_a_read_only_view_of_writeable_memory_is_sent_as_a_snapshot():
    def sender(comm: Comm, x):
        if comm.rank == 0:
            base = np.arange(4, dtype=np.float32)
            view = base.view()
            view.flags.writeable = False
            sent = comm.send(view, dst=1)
            base[:] = -1  # after the send: the receiver must not see this
            yield sent
            return x
        got = yield comm.recv(0)
        return got[:2]

    name = "_prog_snapshot"
    if ("all_to_all", name) not in sc.list_algorithms("all_to_all"):
        sc.register("all_to_all", name, cost=NO_FORMULA)(sender)
    res = sc.simulate(switch(2), "all_to_all", algorithm=name,
                      data=[np.zeros(2, np.float32)] * 2, check=False)
    assert res.outputs[1].tolist() == [0.0, 1.0]


def test_reduction_ops_are_read_by_name_in_any_case_and_prod_is_the_product():
    data = [np.array([2.0, -3.0]) * (r + 1) for r in range(3)]
    for name in ("prod", "PROD", "Product", sc.ReduceOp.PRODUCT):
        res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="ring", data=data,
                          op=name)
        assert res.op == "PRODUCT" and res.correct
        np.testing.assert_array_equal(res.outputs[1], [2.0 * 4 * 6, -3.0 * -6 * -9])
    with pytest.raises(sc.InvalidInputError, match="unknown reduction op 'mul'; use one of "
                                                   "SUM, PRODUCT"):
        sc.ReduceOp.parse("mul")
    with pytest.raises(sc.InvalidInputError, match=r"unknown reduction op 'mean' \(did you "
                                                   r"mean AVG\?\); use one of SUM"):
        sc.ReduceOp.parse("mean")


@pytest.mark.parametrize("name, meant", [("fp16", "float16"), ("BF16", "bfloat16"),
                                         ("fp8", "float8_e4m3fn"), ("e5m2", "float8_e5m2")])
def test_short_dtype_names_get_the_name_numpy_knows(name, meant):
    with pytest.raises(sc.InvalidInputError, match=rf"dtype='{name}' is not a numpy dtype "
                                                   rf"\(did you mean '{meant}'\?\)"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8,
                    dtype=name)


@pytest.mark.parametrize("call, match", [
    # Each gave a raw ZeroDivisionError or numpy ValueError, or a number where simulate
    # refuses the same arguments.
    (lambda: sc.cost.traffic("all_reduce", "ring", p=4, nbytes=64, itemsize=0),
     r"itemsize=0 is not accepted; use an integer >= 1"),
    # An OverflowError from numpy.
    (lambda: sc.cost.predict("all_reduce", "ring", p=8, nbytes=2**20, alpha=1e-6, beta=1e-9,
                             itemsize=2**70),
     r"itemsize=1180591620717411303424 is not accepted; use an integer >= 1 and <= "),
    (lambda: sc.cost.traffic("all_reduce", "ring", p=4, nbytes=64, itemsize=3),
     r"nbytes=64 is not a multiple of itemsize=3"),
    (lambda: sc.cost.is_exact("all_gatherv", "ring", p=2, nbytes=[8, 6], itemsize=4),
     r"nbytes\[1\]=6 is not a multiple of itemsize=4"),
    (lambda: sc.cost.lower_bound("scatter", p=4, nbytes=10, alpha=0, beta=1, itemsize=4),
     r"nbytes=10 is not a multiple of itemsize=4"),
    (lambda: sc.cost.traffic("all_reduce", "parameter_server", p=4, nbytes=64, hosts=2,
                             servers=3),
     r"servers=3 is more than the machine.s hosts=2 server hosts; use 1..2"),
    (lambda: sc.cost.predict("all_reduce", "parameter_server", p=4, nbytes=64, alpha=1e-6,
                             beta=1e-9, servers=5),
     r"servers=5 is more than the machine.s p=4 ranks; use 1..4, or a machine with server "
     r"hosts \(a topology.s servers=, hosts= in simcoll.cost\)"),
])
def test_cost_queries_refuse_what_a_run_refuses(call, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        call()


def test_an_op_for_a_collective_that_does_not_reduce_is_refused_as_a_root_is():
    # op= was dropped silently (Result.op None); root= on all_reduce was already refused.
    with pytest.raises(sc.InvalidInputError, match=r"all_gather does not reduce, but "
                                                   r"op='max' was given"):
        sc.simulate(switch(), "all_gather", algorithm="ring", nbytes=16, op="max")

    def program(comm):
        return (yield comm.collective("broadcast", np.ones(4), algorithm="binomial",
                                      op="sum"))

    with pytest.raises(sc.AlgorithmError, match=r"broadcast does not reduce, but op='sum'"):
        sc.run_program(switch(), program)
    assert sc.simulate(switch(), "all_reduce", algorithm="ring", nbytes=16).op == "SUM"


def test_a_barrier_given_bytes_is_refused():
    # It reported nbytes=16 and an algbw of 4 MB/s while moving nothing.
    with pytest.raises(sc.InvalidInputError, match="a barrier moves no data, but 16 bytes "
                                                   "per rank were given"):
        sc.simulate(switch(), "barrier", algorithm="dissemination", nbytes=16)
    res = sc.simulate(switch(), "barrier", algorithm="dissemination")
    assert (res.nbytes, res.algbw, res.busbw, int(res.bytes_sent.sum())) == (0, 0.0, 0.0, 0)
    # both given, as for every other collective (nbytes='1GiB' was dropped silently)
    with pytest.raises(sc.InvalidInputError, match="pass exactly one of data="):
        sc.simulate(switch(), "barrier", algorithm="dissemination",
                    data=[np.zeros(0, np.float32)] * 4, nbytes="1GiB")


@pytest.mark.parametrize("nbytes, match", [
    (10**400, r"^nbytes=10000000\.\.\.0000 \(401 digits\) on 4 ranks could overflow"),
    ("9" * 5000, r"^nbytes='99999.*\.\.\. \(a str\) is not accepted: size '9"),
    (10**40 + 2, r"^nbytes=10000000\.\.\.0002 \(41 digits\) is not a multiple of the "
                 r"float32 item size"),
])
def test_huge_sizes_are_abbreviated_in_refusals(nbytes, match):
    """They were printed whole: 494 and 5139 characters."""
    with pytest.raises(sc.InvalidInputError, match=match) as info:
        sc.simulate(switch(), "all_reduce", algorithm="ring", nbytes=nbytes)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("dtype", ["i4,,", "(2,3", "f4,(-1)i4"])
def test_dtype_strings_numpy_cannot_parse_are_refused_by_name(dtype, capsys):
    """numpy raised SyntaxError or ValueError for these, which went out raw (a traceback
    and exit status 1 on the command line)."""
    with pytest.raises(sc.InvalidInputError, match=r"is not a numpy dtype"):
        sc.simulate(switch(), "all_reduce", algorithm="ring", nbytes=64, dtype=dtype)
    from simcoll.cli import main
    assert main(["run", "--topology", "switch:2", "-b", "1K", "-e", "1K", "-d", dtype]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(sc.InvalidInputError, match=r"is not accepted: .*; give a numpy dtype"):
        sc.VirtualBuffer.of(4, dtype)


def test_a_zero_time_loop_stops_after_a_million_events_at_one_instant():
    def spinning(comm: Comm, x):
        while True:
            yield comm.compute(0)

    limit = 10**6 + 64 * 2**2   # two endpoints, default max_events 10^9
    with pytest.raises(sc.RunLimitError, match=rf"processed {limit} events in a row at t=0 s "
                                               rf"without simulated time passing, with rank 0, "
                                               rf"rank 1 still running: a loop of operations "
                                               rf"that take no time"):
        run_program(spinning)


def _forgot_to_yield_a_sleep(comm: Comm, x=None):
    if comm.rank == 0:
        waiting = comm.recv(1)
        while not waiting.triggered:
            comm.sleep(1e-6)             # never yielded: time never passes
        return
    yield comm.sleep(1e-6)
    yield comm.send(None, 0)


def _forgot_to_yield_a_send(comm: Comm, x=None):
    while comm.rank == 0:
        comm.send(None, 1)
    yield comm.sleep(1.0)


def _forgot_to_yield_a_recv(comm: Comm, x=None):
    while comm.rank == 0:
        comm.recv(1)
    yield comm.sleep(1.0)


def _forgot_to_yield_a_shared_reduction(comm: Comm, x=None):
    x = np.ones(4, np.float32)
    while comm.rank == 0:
        comm.reduce(x, x, "sum", shared=True)   # on a GPU of finite reduction rate
    yield comm.sleep(1.0)


@pytest.mark.parametrize("program", [_forgot_to_yield_a_sleep, _forgot_to_yield_a_send,
                                     _forgot_to_yield_a_recv])
def test_a_loop_that_forgot_to_yield_stops_on_the_limit_at_one_instant(program):
    """A program that sleeps, sends or receives in a loop without yielding never gives
    the event loop a turn: no limit saw it, and it grew until the machine ran out of
    memory (3.4 GB in 30 s). What it makes now counts, in batches of CHECK_EVERY (16,384),
    while no program resumes and no time passes: it stops on the first batch past the
    limit at one instant, 10^6 + 64 x 2^2 for two endpoints, at 62 x 16,384 = 1,015,808."""
    limit = 10**6 + 64 * 2**2
    assert 61 * 16384 <= limit < 62 * 16384
    with pytest.raises(sc.RunLimitError, match=rf": rank 0 made more than {limit} sleeps, "
                                               rf"computes, reductions, sends or receives at "
                                               rf"t=0 s without yielding to wait for any, "
                                               rf"with rank 0, rank 1 still running: a loop "
                                               rf"that forgot to yield"):
        run_program(program)


def test_a_loop_of_shared_reductions_that_forgot_to_yield_stops_too():
    """Shared reductions on a GPU of finite rate were not counted: such a loop grew until
    memory ran out, as the others did."""
    limit = 10**6 + 64 * 2**2
    with pytest.raises(sc.RunLimitError, match=rf"rank 0 made more than {limit} sleeps, "
                                               rf"computes, reductions, sends or receives"):
        sc.run_program(sc.topology.switch(2, reduce_bandwidth=1e9),
                       _forgot_to_yield_a_shared_reduction)


def test_programs_that_make_many_sends_at_once_then_wait_are_not_a_loop():
    """Two ranks that each post 300,000 sends and as many receives at t=0 and then wait
    for them: 1.2 million made at one instant, past the limit there (10^6 + 256), but
    600,000 by each program between its resumptions. A count over the whole machine
    stopped this run; counted per program's turn it runs, every message delivered."""
    n = 300_000

    def many(comm: Comm, x=None):
        peer = 1 - comm.rank
        handles = [comm.send(None, peer) for _ in range(n)] + [comm.recv(peer)
                                                               for _ in range(n)]
        for handle in handles:
            yield handle

    res = sc.run_program(switch(2), many)
    assert res.messages == 2 * n and res.rank_times[0] > 0


def test_yielding_an_event_that_has_fired_again_and_again_stops_the_run():
    """A program that waits on a handle it keeps, after it fired, resumes at once each
    time without the event loop: it spun forever, past every limit (only Ctrl-C ended
    it). Each such yield now counts as an event at one instant."""
    def polling(comm: Comm, x=None):
        sent = comm.send(np.ones(4, np.float32), 1 - comm.rank)
        yield sent
        yield comm.recv(1 - comm.rank)
        while True:
            yield sent

    limit = 10**6 + 64 * 2**2
    with pytest.raises(sc.RunLimitError, match=rf"processed {limit} events in a row at "
                                               rf"t=[0-9.e-]+ s without simulated time "
                                               rf"passing, .*an event yielded again after "
                                               rf"it fired"):
        run_program(polling)
    with pytest.raises(sc.RunLimitError, match="processed 1000 events in a row"):
        sc.run_program(switch(2), polling, max_events=1000)


def test_fired_events_yielded_again_count_in_a_row_whether_one_or_many():
    """Each yield of an event that has fired resumes the program at once, without the
    event loop: the limit counts those that were yielded before in the row. With a
    limit of 5, one event yielded six times stops the run on its sixth repeat, and a
    polling loop over two handles stops too (it spun forever when only one event
    yielded again and again was counted); twelve different events that fired are work,
    not a loop (counting every one stopped a rank waiting on a million sends)."""
    import simpy

    from simcoll.engine import ProgramProcess, RunStop, done_event
    from simcoll.engine import run as run_engine

    def run_with(events_of):
        env = simpy.Environment()

        def program():
            events = events_of(env)
            for event in events:
                yield event
            yield env.timeout(1.0)

        process = ProgramProcess(env, program())
        process.spin_limit = 5
        run_engine(env, until=10.0, max_events=100, max_same_instant=100)
        return process

    assert run_with(lambda env: [done_event(env) for _ in range(12)]).ok
    assert run_with(lambda env: [done_event(env)] * 6).ok   # five repeats
    with pytest.raises(RunStop):
        run_with(lambda env: [done_event(env)] * 7)
    with pytest.raises(RunStop):
        run_with(lambda env: [done_event(env), done_event(env)] * 4)   # 6 repeats

    def polling(comm: Comm):
        handles = [comm.send(np.zeros(1), 1 - comm.rank), comm.recv(1 - comm.rank)]
        while True:
            for handle in handles:
                yield handle

    with pytest.raises(sc.RunLimitError, match="processed 10000 events in a row"):
        sc.run_program(switch(2), polling, max_events=10**4, until=1.0)


def test_empty_messages_over_links_without_latency_go_through_the_event_loop():
    # A send of nothing on a route without latency arrives at once; before it went
    # through an event, rank 0 sent forever without yielding to the loop (no limit saw
    # it, and the unreceived messages filled the memory).
    def ping(comm: Comm):
        while True:
            if comm.rank == 0:
                yield comm.send(np.zeros(0, np.float32), 1)
            else:
                yield comm.recv(0)

    topology = sc.topology.switch(2, latency=0)
    with pytest.raises(sc.RunLimitError, match=r"event limit max_events=1000 at t=0 s with "
                                               r"rank 0, rank 1 still running"):
        sc.run_program(topology, ping, max_events=1000)
    with pytest.raises(sc.RunLimitError, match=r"in a row at t=0 s without simulated time "
                                               r"passing, with rank 0, rank 1 still running"):
        sc.run_program(topology, ping)


def test_many_events_at_one_instant_are_not_taken_for_a_loop():
    p = 150
    res = sc.simulate(sc.topology.switch(p, latency=0), "all_to_all", algorithm="direct",
                      nbytes=0)
    assert res.time == 0.0
    assert res.messages == p * (p - 1)


def test_the_time_limit_names_the_next_event_at_full_precision():
    def forever(comm: Comm):
        while True:
            yield comm.compute(1234.5678)

    # ends at 1234.5678 and 2469.1356 s; the third, 3703.7034 s, falls beyond 3000 s
    with pytest.raises(sc.RunLimitError, match=r"until=3000 s: its next event falls at "
                                               r"t=3703\.7034 s,"):
        sc.run_program(sc.topology.switch(2), forever, until=3000)


@pytest.mark.parametrize("delay", [np.float32(2.0), np.float16(2.0)])
def test_a_multicast_delay_of_numpy_precision_is_timed_in_float64(delay):
    """multicast checked its delay and dropped the float: 2 s + 2 x 1 us + 32 B at
    100 GB/s came out as 2.000001907 s in float32 and 2.0 s in float16."""
    topo = sc.topology.switch(4, bandwidth=100 * sc.GB, latency=1 * sc.us)
    x = np.arange(8, dtype=np.float32)

    def program(comm):
        if comm.rank == 0:
            yield comm.multicast(x, [1, 2], delay=delay)
        elif comm.rank in (1, 2):
            yield comm.recv(0)

    assert sc.run_program(topo, program).time == pytest.approx(2 + 2e-6 + 32 / 100e9,
                                                               rel=1e-15)


def test_a_time_past_floats_range_in_a_rank_program_is_named():
    def program(comm):
        yield comm.sleep(10**400)

    with pytest.raises(sc.AlgorithmError, match=r"sleep got 10000000\.\.\.0000 \(401 "
                                                r"digits\); use a finite number of seconds"):
        sc.run_program(sc.topology.switch(2), program)


def test_data_parallel_buckets_are_counted_exactly():
    """ceil(g / b) in floats: 2^56 + 4 bytes in buckets of 2^56 gave 1 bucket, not 2, and
    a bucket past float's range raised 'buckets=0', a parameter nobody gave."""
    topo = sc.topology.switch(4)
    two = sc.training.data_parallel_step(topo, gradient_bytes=2**56 + 4, bucket_bytes=2**56,
                                         forward=0.0, backward=1e-3)
    assert two.buckets == 2
    one = sc.training.data_parallel_step(topo, gradient_bytes=1 << 20, bucket_bytes=10**400,
                                         forward=0.0, backward=1e-3)
    assert one.buckets == 1
    with pytest.raises(sc.InvalidInputError, match=r"^gradient_bytes=10000000\.\.\.0000 "
                                                   r"\(401 digits\) on 4 ranks could overflow"):
        sc.training.data_parallel_step(topo, gradient_bytes=10**400, forward=0, backward=0)


def test_step_models_refuse_traffic_past_the_counters_before_the_run():
    """They ran, then numpy raised OverflowError building the int64 counters. Bounds by
    hand: 2 m (p - 1) activation bytes per counter at most (2^63 / (2 x 4 x 3), rounded
    up, the least refused; one stage sends nothing, and 2 m p refused 2^62 there); four
    collectives of sequences x 256 x 128 elements of 2 bytes on 4 ranks, within
    (2^63 - 1) // 32 bytes."""
    topo = sc.topology.switch(4)
    least = -(-2**63 // 24)
    with pytest.raises(sc.InvalidInputError, match=rf"activation_bytes={2**62} over 4 "
                                                   rf"micro-batches and 4 stages could "
                                                   rf"overflow .* < {least}$"):
        sc.training.pipeline_step(topo, stages=4, micro_batches=4, forward=1e-3,
                                  backward=2e-3, activation_bytes=2**62)
    with pytest.raises(sc.InvalidInputError, match=rf"activation_bytes={least} over 4"):
        sc.training.pipeline_step(topo, stages=4, micro_batches=4, forward=1e-3,
                                  backward=2e-3, activation_bytes=least)
    sc.training.pipeline_step(topo, stages=4, micro_batches=4, forward=1e-3,
                              backward=2e-3, activation_bytes=(least - 1) // 2 * 2,
                              network="analytical")
    alone = sc.training.pipeline_step(sc.topology.switch(1), stages=1, micro_batches=1,
                                      forward=1e-3, backward=2e-3, activation_bytes=2**62,
                                      activation_memory="1MiB")
    assert alone.step_time == 3e-3 and alone.activation_memory == (2**20,)
    model = sc.training.gpt(2, 256, 4, 128, 1000)
    # each collective of the layer takes a sequence's 128 x 256 two-byte activations
    # times the sequences, within (2^63 - 1) // 32 bytes on 4 ranks (a GPU then sends at
    # most 2 x 8 such inputs, under 2^63); four times that was refused, for layers
    # that run
    per_sequence = 256 * 128 * model.precision.activation_bytes
    most = (2**63 - 1) // 32 // per_sequence
    for sequence_parallel in (False, True):
        with pytest.raises(sc.InvalidInputError,
                           match=rf"^sequences={most + 1} make activations .* "
                                 rf"{(most + 1) * per_sequence} bytes, in a collective over "
                                 rf"4 GPUs .* use sequences <= {most}$"):
            sc.training.tensor_parallel_layer(model, topo, tp=4, sequences=most + 1,
                                              sequence_parallel=sequence_parallel)
    # on 2 GPUs a collective takes up to (2^63 - 1) // 8 bytes, but 16 of them (sequence
    # parallelism) would send 2^63 at 2^59: what a GPU sends is refused first
    most_sent = -(-2**63 // (16 * per_sequence))
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^sequences={most_sent} make a GPU send up to "
                             rf"{16 * most_sent * per_sequence} bytes .* use sequences < "
                             rf"{most_sent}$"):
        sc.training.tensor_parallel_layer(model, sc.topology.switch(2), tp=2,
                                          sequences=most_sent, sequence_parallel=True)
    sc.training.tensor_parallel_layer(model, topo, tp=4, sequences=1, sequence_parallel=True)


def test_cost_queries_take_numpy_rank_counts_as_python_ones_and_refuse_huge_numbers():
    """512 x np.int64(2^55) wrapped to 0 and skipped the memory refusal that 2^55 gets;
    numbers past float's range raised OverflowError."""
    for p in (2**55, np.int64(2**55), 10**400):
        with pytest.raises(sc.InvalidInputError, match="a query's arrays of one entry per "
                                                       "rank would need about"):
            sc.cost.predict("all_reduce", "ring", p=p, nbytes=1024, alpha=1e-6, beta=1e-9)
    with pytest.raises(sc.InvalidInputError, match="is past the range of floats"):
        sc.cost.lower_bound("all_reduce", p=4, nbytes=10**400, alpha=1e-6, beta=1e-9)
    with pytest.raises(sc.InvalidInputError, match=r"hosts=10000000\.\.\.0000"):
        sc.cost.lower_bound("all_reduce", p=4, nbytes=8, alpha=1e-6, beta=1e-9, hosts=10**400)


def test_src_and_dst_refusals_name_the_argument_given():
    topo = sc.topology.switch(4)
    with pytest.raises(sc.InvalidInputError, match=r"^src=7 is not accepted; use an integer "
                                                   r">= 0 and <= 3 \(a rank\)"):
        sc.simulate(topo, "broadcast", algorithm="binomial", nbytes=1024, src=7)
    with pytest.raises(sc.InvalidInputError, match=r"^dst=-1 is not accepted"):
        sc.simulate(topo, "reduce", algorithm="binomial", nbytes=1024, dst=-1)


@pytest.mark.parametrize("collective", [False, 0, 0.0, [], np.array([])])
def test_compare_and_parse_take_a_collective_name_or_none_only(collective):
    """compare took any falsy collective as 'the table's' (an empty array raised numpy's
    'ambiguous'); parse raised AttributeError on anything but a string."""
    from simcoll.nccl_tests import parse
    row = sc.nccl_tests.NcclTestsRow(1024, 256, "float", "sum", -1,
                                     sc.nccl_tests.Measurement(20.0, 0.0, 0.0, None), None, 1)
    table = sc.nccl_tests.NcclTestsTable((row,), "all_reduce", 4)
    with pytest.raises(sc.InvalidInputError, match=r"^collective=.* is not accepted; give a "
                                                   r"collective's name, or None"):
        sc.compare(sc.topology.switch(4), table, collective=collective)
    with pytest.raises(sc.InvalidInputError, match=r"^collective=.* is not accepted; give an "
                                                   r"nccl-tests program or collective name"):
        parse("", collective=collective)


def test_a_zero_dimensional_array_is_not_taken_for_a_list():
    """Each raised Python's TypeError iterating it ("iteration over a 0-d array")."""
    topo = sc.topology.switch(4)
    with pytest.raises(sc.InvalidInputError, match=r"ranks=array\(4\) is not accepted; give "
                                                   r"a list"):
        sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=np.array(4),
                 sizes=[1024], progress=False)
    with pytest.raises(sc.InvalidInputError, match=r"ranks=array\(2\) is not accepted"):
        sc.training.pipeline_step(topo, stages=2, micro_batches=2, forward=1e-3,
                                  backward=1e-3, activation_bytes=1024, ranks=np.array(2))
    with pytest.raises(sc.InvalidInputError, match=r"sizes=array\(4\) is not accepted"):
        numeric.MLP(np.array(4))
    assert numeric.MLP(np.array([4, 2])).sizes == (4, 2)


def test_synthetic_batches_past_memory_are_refused_before_drawing():
    """2^64 steps ran until memory ran out; a batch of 2^64 raised numpy's ValueError."""
    model = numeric.MLP((4, 8, 2))
    for batch, steps in ((2**64, 2), (8, 2**64)):
        with pytest.raises(sc.InvalidInputError, match=rf"synthetic_batches\(batch={batch}, "
                                                       rf"steps={steps}\) needs about"):
            numeric.synthetic_batches(model, batch=batch, steps=steps)


@pytest.mark.parametrize("avoid, message", [
    (3, r"avoid=3 is not accepted; give a set of link indexes \(into links: 0\.\.3\)"),
    ("abc", r"avoid='abc' is not accepted"),
    ([99], r"an index in avoid = 99 is not accepted; use an integer >= 0 and <= 3 \(a "
           r"link index\)"),
    ({-1}, r"an index in avoid = -1 is not accepted"),   # an index no link has was ignored
    (None, r"avoid=None is not accepted"),   # falsy: Python's TypeError iterating it
    (0, r"avoid=0 is not accepted"),
])
def test_route_checks_the_links_to_avoid(avoid, message):
    with pytest.raises(sc.TopologyError, match=message):
        sc.topology.ring(4).route(0, 1, avoid=avoid)


def test_route_around_a_link_given_as_a_list_of_numpy_indexes():
    topo = sc.topology.ring(4)
    direct = topo.route(0, 1)
    (link,) = direct.links
    around = topo.route(0, 1, avoid=[np.int64(link)])
    assert len(around.links) == 3 and link not in around.links


def test_flags_of_routes_and_messages_are_booleans():
    """multicast="no" and ordered="no" passed as True."""
    with pytest.raises(sc.TopologyError, match="multicast='no' is not accepted; use True "
                                               "or False"):
        sc.topology.ring(4).route(0, 1, multicast="no")

    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.arange(4.0), 1, ordered="no")
        elif comm.rank == 1:
            yield comm.recv(0)

    with pytest.raises(sc.AlgorithmError, match="rank 0: ordered='no' is not accepted; use "
                                                "True or False"):
        sc.run_program(sc.topology.ring(4), program)


def test_assert_traffic_without_an_expectation_is_a_simcoll_error():
    # imported here: the pytest plugin no longer imports simcoll.testing in every session
    from simcoll.testing import assert_traffic

    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=64)
    with pytest.raises(sc.InvalidInputError, match="assert_traffic needs sent="):
        assert_traffic(res)


def test_ragged_lists_are_refused_by_name():
    """np.ndim of a ragged list raises numpy's ValueError before the refusal was built."""
    with pytest.raises(sc.InvalidInputError, match=r"sizes\[1\] = \[2, 3\] is not accepted"):
        numeric.MLP([4, [2, 3]])
    topo = sc.topology.switch(4)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1024, trace=True)
    with pytest.raises(sc.InvalidInputError, match=r"ranks=\[1, \[2, 3\]\] is not accepted"):
        sc.plot.timeline(res, topo, ranks=[1, [2, 3]])


def test_lower_bound_checks_a_v_collectives_root_too():
    with pytest.raises(sc.InvalidInputError, match="all_gatherv has no root, but root=3"):
        sc.cost.lower_bound("all_gatherv", p=4, nbytes=[4] * 4, alpha=1e-6, beta=1e-9,
                            root=3)


def test_a_numpy_bool_is_a_flag_for_ordered():
    # Comm._flag: "as a bool, if it is one (numpy's too)"
    def program(comm):
        if comm.rank == 0:
            yield comm.send(np.arange(4.0), 1, ordered=np.True_)
        elif comm.rank == 1:
            yield comm.recv(0)

    assert sc.run_program(sc.topology.ring(4), program).messages == 1


def test_a_multicasts_ordered_flag_is_a_boolean():
    def program(comm):
        if comm.rank == 0:
            yield comm.multicast(np.arange(4.0), [1, 2], ordered="no")
        elif comm.rank in (1, 2):
            yield comm.recv(0)

    with pytest.raises(sc.AlgorithmError, match="rank 0: ordered='no' is not accepted; use "
                                                "True or False"):
        sc.run_program(sc.topology.switch(4), program)


def test_a_program_that_catches_everything_does_not_swallow_the_same_instant_limit():
    # max_events 2,000,000 on 2 ranks: the same-instant limit is
    # min(2e6, max(10^6 + 64 * 2^2, 2e6 // 1000)) = 1,000,256 < 2e6 (the event limit)
    def catches_everything(comm):
        try:
            for _ in range(1_100_000):
                yield comm.compute(0)
        except:  # noqa: E722
            return "caught"

    with pytest.raises(sc.RunLimitError, match=r"processed 1000256 events in a row at t=0 s"):
        sc.run_program(sc.topology.switch(2), catches_everything, max_events=2_000_000)


def test_a_ddp_gradient_past_the_counters_names_the_argument_in_the_fix():
    # 2^63 // (2 * 4^2) = 2^58 on 4 ranks
    with pytest.raises(sc.InvalidInputError, match=rf"use gradient_bytes < {2**58}$"):
        sc.training.data_parallel_step(sc.topology.switch(4), gradient_bytes=10**400,
                                       forward=0, backward=0)


def test_synthetic_batches_count_eight_bytes_per_input_and_target(monkeypatch):
    # 10 steps of 16 samples, 4 inputs and 2 targets each, in float64: 10*16*6*8 = 7680 B
    import simcoll.memory as memory
    model = numeric.MLP((4, 8, 2))
    monkeypatch.setattr(memory, "memory_limit", lambda: (7679, "this machine's"))
    with pytest.raises(sc.InvalidInputError, match="needs about"):
        numeric.synthetic_batches(model, batch=16, steps=10)
    monkeypatch.setattr(memory, "memory_limit", lambda: (7680, "this machine's"))
    assert len(numeric.synthetic_batches(model, batch=16, steps=10)) == 10


def test_route_refuses_a_frozenset_holding_one_past_the_last_link():
    topo = sc.topology.ring(4)
    with pytest.raises(sc.TopologyError, match=rf"an index in avoid = {len(topo.links)} is not "
                                               r"accepted"):
        topo.route(0, 1, avoid=frozenset({len(topo.links)}))


def test_pipeline_counter_bound_is_exact():
    # 4 micro-batches, 5 stages: 2 m (p - 1) = 32 bytes per activation byte;
    # 32 * 2^58 = 2^63
    topo = sc.topology.switch(5)
    kwargs = dict(stages=5, micro_batches=4, forward=1e-3, backward=2e-3)
    with pytest.raises(sc.InvalidInputError, match=rf"activation_bytes={2**58} over 4"):
        sc.training.pipeline_step(topo, activation_bytes=2**58, **kwargs)
    # 3 micro-batches, 4 stages: 2 m (p - 1) = 18 does not divide 2^63; the fix is
    # ceil(2^63 / 18)
    ceil = -(-9223372036854775808 // 18)
    assert ceil == 512409557603043101   # 2^63 / 18 = 512409557603043100.44...
    with pytest.raises(sc.InvalidInputError, match=rf"use activation_bytes < {ceil}$"):
        sc.training.pipeline_step(topo, stages=4, micro_batches=3, forward=1e-3,
                                  backward=2e-3, activation_bytes=2**62)


def test_an_empty_collective_name_is_not_the_tables():
    import contextlib
    import io

    from simcoll.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", "--topology", "switch:4", "-b", "1K", "-e", "1K"]) == 0
    table = sc.nccl_tests.parse(out.getvalue())
    # "" is a str, not None: it is no collective's name, not "the table's"
    with pytest.raises(sc.InvalidInputError):
        sc.compare(sc.topology.switch(4), table, collective="")


def test_the_counter_refusal_names_the_least_size_it_refuses():
    """On 3 ranks 2 p^2 n < 2^63 holds up to n = (2^63 - 1) // 18 = 512409557603043100,
    which is accepted; the message said "use nbytes < 512409557603043100" (2^63 // 18)."""
    most = (2**63 - 1) // 18
    assert most == 512409557603043100
    sc.cost.traffic("all_reduce", "ring", p=3, nbytes=most, itemsize=1)
    with pytest.raises(sc.InvalidInputError, match=rf"use nbytes < {most + 1}$"):
        sc.cost.traffic("all_reduce", "ring", p=3, nbytes=most + 1, itemsize=1)


def _forgot_to_yield_a_multicast(comm, x=None):
    if comm.rank == 0:
        for _ in range(1_100_000):   # bounded: past the limit, short of memory's end
            comm.multicast(None, [1, 2])
    yield comm.sleep(1.0)


def test_a_multicast_loop_that_forgot_to_yield_stops_on_the_limit_at_one_instant():
    """Multicasts made in a loop that never yields count as sends do, CHECK_EVERY
    (16,384) at a time within one turn of a program: on 3 GPUs the limit at one instant is
    10^6 + 64 x 3^2 = 1,000,576 events, past at the 62nd batch, 1,015,808 multicasts,
    before the loop's 1,100,000 end (after which its messages were left unreceived)."""
    limit = 10**6 + 64 * 3**2
    assert 61 * 16384 <= limit < 62 * 16384 < 1_100_000
    with pytest.raises(sc.RunLimitError, match=rf"rank 0 made more than {limit} sleeps, "
                                               rf"computes, reductions, sends or receives at "
                                               rf"t=0 s without yielding"):
        sc.run_program(sc.topology.switch(3), _forgot_to_yield_a_multicast)
