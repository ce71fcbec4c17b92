"""sweep: every point saved as it finishes, resumed without duplicates, failures recorded,
workers that never outlive the sweep, any Executor, and the saved file read back.

Expected values come from direct ``simcoll.simulate`` calls, one per point, written out in
the tests, never from the sweep itself.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from concurrent.futures import Executor, Future

import numpy as np
import pytest
from conftest import DiesInAWorker

import simcoll as sc
from simcoll.sweep import FailedPoint, SweepResults, load_results, sweep, workers
from simcoll.topology.io import topology_hash

SWITCH = "simcoll.topology.builders:switch"
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def expected(collective, algorithms, ranks, sizes, factory=sc.topology.switch, **kwargs):
    """Direct simulate() calls in grid order: algorithms, then ranks, then sizes."""
    out = []
    for algorithm in algorithms:
        for p in ranks:
            for size in sizes:
                try:
                    out.append(sc.simulate(factory(p), collective, algorithm=algorithm,
                                           nbytes=size, **kwargs))
                except sc.SimCollError as exc:
                    out.append((type(exc).__name__, str(exc)))
    return out


def assert_same(got, want):
    """Every field of a Result (arrays by value and dtype), or a failure's type and text."""
    if isinstance(want, tuple):
        assert isinstance(got, FailedPoint), got
        assert (got.error_type, got.error_message) == want
        return
    if isinstance(want, FailedPoint):
        assert got == want
        return
    assert isinstance(got, sc.Result), got
    for field in dataclasses.fields(sc.Result):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), field.name
        else:
            assert a == b, (field.name, a, b)


def assert_all_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def identity(record):
    return (record["algorithm"], record["nranks"], record["nbytes"])


@pytest.fixture
def calls(monkeypatch):
    """Count (and log) the simulations a sweep runs in this process."""
    log = []
    real = workers.simulate

    def counting(topology, collective, **kwargs):
        log.append((kwargs["algorithm"], topology.nranks, kwargs["nbytes"]))
        return real(topology, collective, **kwargs)

    monkeypatch.setattr(workers, "simulate", counting)
    return log


# --- what a sweep returns and saves -----------------------------------------------------

def test_results_and_records_match_direct_simulations_field_by_field(tmp_path):
    path = tmp_path / "points.jsonl"
    got = sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"],
                ranks=[2, 3], sizes=["1KiB", 4096], save=path, chunks=2)
    assert isinstance(got, SweepResults) and isinstance(got, list)
    want = expected("all_reduce", ["ring", "naive"], [2, 3], [1024, 4096], chunks=2)
    assert not any(isinstance(w, tuple) for w in want[:4])  # ring takes chunks ...
    assert all(isinstance(w, tuple) and "chunks" in w[1] for w in want[4:])  # naive not
    assert_all_same(got, want)
    saved = records(path)
    assert [identity(r) for r in saved] == [(a, p, n) for a in ("ring", "naive")
                                            for p in (2, 3) for n in (1024, 4096)]
    for record, result in zip(saved[:4], want[:4]):
        summary = result.to_dict()
        for key, value in summary.items():
            if key != "link_bytes":
                assert record[key] == value, key
        assert record["link_bytes"] == [[u, v, b] for (u, v), b in result.link_bytes.items()]
        assert len(record["link_bytes"]) == 2 * len(sc.topology.switch(record["nranks"]).links)
        assert record["error"] is None and record["root"] is None
        assert record["topology_factory"] == SWITCH
        assert record["simcoll_version"] == sc.__version__
    for record, (kind, message) in zip(saved[4:], want[4:]):
        assert record["error"] == {"type": kind, "message": message}
        assert "time" not in record and record["params"] == {"chunks": 2}


def _one_dgx_h100(p):
    return sc.topology.dgx_h100(1)


def test_a_resolving_algorithm_keeps_what_it_chose(tmp_path):
    """NCCL's tuner chooses per size (a ring with LL at 64 KiB, NVLS at 64 MiB on one DGX
    H100). The records kept only the parameters asked for, so a sweep's results (and
    what load_results read back) said params={} where simulate() says what ran. Every
    field, params included, now equals the direct run's, in the sweep's results and read
    back; the point's identity is still the parameters asked for, and a record written
    before ``chosen`` existed decodes with those."""
    path = tmp_path / "points.jsonl"
    got = sweep(_one_dgx_h100, "all_reduce", algorithms=["nccl"], ranks=[8],
                sizes=["64KiB", "64MiB"], save=path)
    want = expected("all_reduce", ["nccl"], [8], [65536, 64 << 20], factory=_one_dgx_h100)
    assert [w.params["algo"] for w in want] == ["ring", "nvls"]
    assert_all_same(got, want)
    assert_all_same(load_results(path), want)
    saved = records(path)
    assert [r["params"] for r in saved] == [{}, {}]
    assert [r["chosen"] for r in saved] == [w.params for w in want]
    for record in saved:
        del record["chosen"]
    path.write_text("".join(json.dumps(r) + "\n" for r in saved))
    assert [r.params for r in load_results(path)] == [{}, {}]


def test_a_record_says_which_endpoints_are_server_hosts(tmp_path):
    """dgx_h100(1) has one endpoint past its GPUs, an NVSwitch that reduces in the
    network, and no server host; switch(4, servers=2) two server hosts. The records now
    say so (``hosts``), as the Result does; one written before reads every such endpoint
    as a server host, and a count beyond them is refused by name."""
    path = tmp_path / "points.jsonl"
    got = sweep(_one_dgx_h100, "all_reduce", algorithms=["nccl"], ranks=[8],
                sizes=["64MiB"], save=path)
    servers = sweep(lambda p: sc.topology.switch(p, servers=2), "all_reduce",
                    algorithms=["parameter_server"], ranks=[4], sizes=[64])
    assert [r.hosts for r in got] == [0] and [r.hosts for r in servers] == [2]
    assert [r.host_bytes_sent.size for r in got] == [1]
    assert [r.hosts for r in load_results(path)] == [0]
    (saved,) = records(path)
    assert saved["hosts"] == 0
    del saved["hosts"]
    path.write_text(json.dumps(saved) + "\n")
    assert [r.hosts for r in load_results(path)] == [1]
    saved["hosts"] = 2
    path.write_text(json.dumps(saved) + "\n")
    with pytest.raises(sc.InvalidInputError, match=r"its hosts=2 is more than "
                                                   r"host_bytes_sent's 1 endpoint\(s\)"):
        load_results(path)


def test_parameters_are_recorded_as_the_algorithm_reads_them(tmp_path):
    """NCCL_ALGO-style spellings ("RING", "simple", "^LL128") were recorded as given, so
    a swept point's ``requested`` differed from simulate's, and a resumed sweep spelling
    them another way ran and stored the same simulation again."""
    path = tmp_path / "points.jsonl"
    spelt = sweep(sc.topology.switch, "all_reduce", algorithms=["nccl"], ranks=[4],
                  sizes=[1 << 20], save=path, algo="RING", proto="^LL128")
    direct = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="nccl",
                         nbytes=1 << 20, algo="RING", proto="^LL128")
    assert spelt[0].requested == direct.requested == {"algo": "ring", "proto": "LL,Simple"}
    assert spelt[0] == direct
    again = sweep(sc.topology.switch, "all_reduce", algorithms=["nccl"], ranks=[4],
                  sizes=[1 << 20], save=path, algo="ring", proto="LL,Simple")
    assert again == spelt and len(records(path)) == 1


def test_records_carry_root_op_dtype_and_network_as_run(tmp_path):
    path = tmp_path / "points.jsonl"
    got = sweep(sc.topology.switch, "broadcast", algorithms=["binomial"], ranks=[4],
                sizes=[4096], save=path, root=np.int64(3), dtype="float64",
                network="analytical")
    want = sc.simulate(sc.topology.switch(4), "broadcast", algorithm="binomial",
                       nbytes=4096, root=3, dtype=np.float64, network="analytical")
    assert_same(got[0], want)
    (record,) = records(path)
    assert (record["root"], record["op"], record["dtype"], record["network"]) == \
        (3, None, "float64", "analytical")


def test_a_lambda_factory_runs_in_two_workers_like_in_process():
    def grid(**extra):
        return sweep(lambda p: sc.topology.cluster(p // 2, 2), "all_reduce",
                     algorithms=["ring", "hierarchical"], ranks=[4, 8],
                     sizes=[1 << 16, 3 << 10], **extra)

    one, two = grid(), grid(workers=2)
    want = expected("all_reduce", ["ring", "hierarchical"], [4, 8], [1 << 16, 3 << 10],
                    factory=lambda p: sc.topology.cluster(p // 2, 2))
    assert_all_same(one, want)
    assert_all_same(two, want)


def test_a_worker_that_dies_names_the_points_it_may_have_been_running(tmp_path):
    """A worker killed mid-sweep raised the pool's bare BrokenProcessPool, naming no
    point; the point saved before it (if it finished first) stays."""
    def factory(p):
        machine = sc.topology.switch(p)
        if p > 2:
            machine.__class__ = DiesInAWorker
        return machine

    path = tmp_path / "points.jsonl"
    from concurrent.futures.process import BrokenProcessPool
    with pytest.raises(BrokenProcessPool) as caught:
        sweep(factory, "all_reduce", algorithms=["ring"], ranks=[2, 3, 4, 5], sizes=[64],
              workers=2, save=path)
    (note,) = caught.value.__notes__
    running = note.removeprefix("a worker process ended abruptly (killed, or out of "
                                "memory) while running one of: ").split("; ")
    assert len(running) == 2 and set(running) <= {
        f"all_reduce ring p={p} nbytes=64" for p in (2, 3, 4, 5)}, note
    assert all(r["nranks"] == 2 for r in (records(path) if path.exists() else []))


def test_a_worker_that_dies_while_the_points_are_sent_names_them_too():
    """With thousands of points the pool broke while they were still being sent, and
    submit's BrokenProcessPool came out with no note."""
    from concurrent.futures.process import BrokenProcessPool

    def factory(p):
        machine = sc.topology.switch(p)
        machine.__class__ = DiesInAWorker
        return machine

    with pytest.raises(BrokenProcessPool) as caught:
        sweep(factory, "all_reduce", algorithms=["ring"], ranks=[2],
              sizes=range(4, 4 * 4001, 4), workers=2)
    (note,) = caught.value.__notes__
    assert note.startswith("a worker process ended abruptly (killed, or out of memory) "
                           "while running one of: all_reduce ring p=2 nbytes=4; "), note


def test_numpy_integers_are_rank_counts_and_sizes():
    got = sweep(sc.topology.switch, "all_gather", algorithms=["ring"],
                ranks=np.array([2, 4]), sizes=np.array([64, 128]))
    assert_all_same(got, expected("all_gather", ["ring"], [2, 4], [64, 128]))
    assert all(type(r.nranks) is int and type(r.nbytes) is int for r in got)


def test_repeated_grid_values_run_once_and_fill_every_position(tmp_path, calls):
    path = tmp_path / "points.jsonl"
    got = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 2],
                sizes=["1KiB", 1024], save=path)
    assert calls == [("ring", 2, 1024)]
    assert len(got) == 4 and all(r is got[0] for r in got)
    assert len(records(path)) == 1


# --- saving: as each point finishes, synced, in completion order -------------------------

def test_each_record_is_synced_before_the_next_point_runs(tmp_path, monkeypatch, calls):
    path = tmp_path / "points.jsonl"
    synced, lines_at_call = [], []
    real_fsync, real_simulate = os.fsync, workers.simulate

    def fsync(fd):
        real_fsync(fd)
        if stat.S_ISREG(os.fstat(fd).st_mode):
            synced.append(path.read_bytes())

    def simulate(topology, collective, **kwargs):
        lines_at_call.append(path.read_bytes().count(b"\n"))
        return real_simulate(topology, collective, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(workers, "simulate", simulate)
    sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "tree"], ranks=[2, 5],
          sizes=[8, 800], save=path)
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 8
    assert synced == [b"".join(lines[:k]) for k in range(1, 9)]
    assert lines_at_call == list(range(8))


class ReversingExecutor(Executor):
    """Finishes the submitted points last first, each only once the save file holds every
    point finished before it (so a sweep that saves late, or in grid order, fails)."""

    def __init__(self, n: int, path):
        self.n, self.path, self.jobs = n, path, []

    def submit(self, fn, /, *args, **kwargs):
        future: Future = Future()
        self.jobs.append((future, fn, args, kwargs))
        if len(self.jobs) == self.n:
            threading.Thread(target=self._finish, daemon=True).start()
        return future

    def _finish(self):
        for done, (future, fn, args, kwargs) in enumerate(reversed(self.jobs)):
            deadline = time.monotonic() + 5
            while self.path.read_bytes().count(b"\n") < done:
                if time.monotonic() > deadline:
                    future.set_exception(AssertionError(f"{done} finished points, fewer "
                                                        f"saved after 5 s"))
                    return
                time.sleep(0.001)
            future.set_running_or_notify_cancel()
            future.set_result(fn(*args, **kwargs))


def test_points_are_saved_as_they_finish_in_completion_order(tmp_path):
    path = tmp_path / "points.jsonl"
    grid = [(a, p, n) for a in ("ring", "naive") for p in (2, 4) for n in (64, 4096)]
    got = sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"],
                ranks=[2, 4], sizes=[64, 4096], save=path,
                executor=ReversingExecutor(len(grid), path))
    assert [identity(r) for r in records(path)] == grid[::-1]
    assert_all_same(got, expected("all_reduce", ["ring", "naive"], [2, 4], [64, 4096]))


def test_stream_hands_over_each_record_in_grid_order_once_those_before_it_are_done(tmp_path):
    """What ``simcoll sweep`` prints as it goes: in process each point as soon as it is
    saved; points finishing last first only once the grid's first is done; a rerun's
    saved points at once."""
    from simcoll.sweep.driver import stream

    grid = [(a, p, n) for a in ("ring", "naive") for p in (2, 4) for n in (64, 4096)]
    axes = dict(algorithms=["ring", "naive"], ranks=[2, 4], sizes=[64, 4096])
    path = tmp_path / "points.jsonl"
    seen = []

    def emit(record):
        seen.append((identity(record), path.read_bytes().count(b"\n")))

    got = stream(emit, sc.topology.switch, "all_reduce", save=path, **axes)
    assert seen == [(point, k) for k, point in enumerate(grid, start=1)]
    assert_all_same(got, expected("all_reduce", ["ring", "naive"], [2, 4], [64, 4096]))
    seen.clear()
    stream(emit, sc.topology.switch, "all_reduce", save=path, **axes)  # all saved
    assert seen == [(point, len(grid)) for point in grid]
    path = tmp_path / "reversed.jsonl"
    seen.clear()
    stream(emit, sc.topology.switch, "all_reduce", save=path,
           executor=ReversingExecutor(len(grid), path), **axes)
    assert seen == [(point, len(grid)) for point in grid]


# --- rerunning: skip what is saved, tolerate a truncated line ------------------------------

def test_a_rerun_runs_only_the_new_points_and_returns_the_whole_grid(tmp_path, calls):
    path = tmp_path / "points.jsonl"
    sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 4],
          sizes=[64], save=path)
    first = path.read_bytes()
    calls.clear()
    got = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[4, 2, 8],
                sizes=[64, 256], save=path)
    assert sorted(calls) == sorted([("ring", 2, 256), ("ring", 4, 256), ("ring", 8, 64),
                                    ("ring", 8, 256)])
    assert path.read_bytes().startswith(first)
    saved = [identity(r) for r in records(path)]
    assert len(saved) == len(set(saved)) == 6
    assert_all_same(got, expected("all_reduce", ["ring"], [4, 2, 8], [64, 256]))
    calls.clear()
    again = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[4, 2, 8],
                  sizes=[64, 256], save=path)
    assert calls == [] and len(records(path)) == 6
    assert_all_same(again, got)


def test_a_changed_topology_is_a_new_point_and_a_renamed_factory_is_not(tmp_path, calls):
    path = tmp_path / "points.jsonl"
    grid = dict(algorithms=["ring"], ranks=[2, 3], sizes=[64], save=path)
    sweep(sc.topology.switch, "all_reduce", **grid)
    calls.clear()
    sweep(lambda p: sc.topology.switch(p), "all_reduce", **grid)
    assert calls == []
    got = sweep(lambda p: sc.topology.switch(p, bandwidth=1e9), "all_reduce", **grid)
    assert sorted(calls) == [("ring", 2, 64), ("ring", 3, 64)]
    assert_all_same(got, expected("all_reduce", ["ring"], [2, 3], [64],
                                  factory=lambda p: sc.topology.switch(p, bandwidth=1e9)))
    assert [r["topology_factory"] for r in records(path)] == [SWITCH, SWITCH, None, None]


def test_a_truncated_last_line_is_cut_off_and_its_point_run_again(tmp_path, calls):
    path = tmp_path / "points.jsonl"
    grid = dict(algorithms=["ring", "tree"], ranks=[3], sizes=[64, 96], save=path)
    clean = sweep(sc.topology.switch, "all_reduce", **grid)
    whole = path.read_bytes()
    last = whole.splitlines(keepends=True)[-1]
    path.write_bytes(whole[:-len(last) // 2])  # killed half way through the last write
    calls.clear()
    with pytest.warns(UserWarning, match="truncated last line"):
        got = sweep(sc.topology.switch, "all_reduce", **grid)
    assert calls == [("tree", 3, 96)]
    assert path.read_bytes() == whole  # the cut line rewritten whole, nothing glued
    assert_all_same(got, clean)


def test_a_last_record_without_its_newline_is_kept(tmp_path, calls):
    path = tmp_path / "points.jsonl"
    grid = dict(algorithms=["ring"], ranks=[2, 3], sizes=[64], save=path)
    sweep(sc.topology.switch, "all_reduce", **grid)
    whole = path.read_bytes()
    path.write_bytes(whole[:-1])
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = sweep(sc.topology.switch, "all_reduce", ranks=[2, 3, 4],
                    **{k: v for k, v in grid.items() if k != "ranks"})
    assert calls == [("ring", 4, 64)]
    assert path.read_bytes().startswith(whole)
    assert [identity(r) for r in records(path)] == [("ring", 2, 64), ("ring", 3, 64),
                                                    ("ring", 4, 64)]
    assert_all_same(got, expected("all_reduce", ["ring"], [2, 3, 4], [64]))


@pytest.mark.parametrize("content", [b"time,busbw\n1,2\n", b'{"collective": "x"}\n',
                                     b"not json at all"])
def test_a_file_that_is_not_a_sweep_file_is_refused_and_left_alone(tmp_path, content,
                                                                    calls):
    path = tmp_path / "points.jsonl"
    path.write_bytes(content)
    with pytest.raises(sc.InvalidInputError, match="line 1 is not a simcoll sweep record"):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
              sizes=[64], save=path)
    assert path.read_bytes() == content and calls == []


def test_a_record_without_its_results_is_refused_before_any_work(tmp_path, calls):
    path = tmp_path / "points.jsonl"
    sweep(sc.topology.switch, "all_reduce", save=path, **GOOD)
    (record,) = records(path)
    del record["time"]
    path.write_text(json.dumps(record) + "\n")
    calls.clear()
    with pytest.raises(sc.InvalidInputError, match=r"line 1 .* lacks \['time'\]"):
        sweep(sc.topology.switch, "all_reduce", save=path, **GOOD)
    with pytest.raises(sc.InvalidInputError, match=r"line 1 .* lacks \['time'\]"):
        load_results(path)
    assert calls == []


# --- failures ------------------------------------------------------------------------------

def test_failing_points_are_recorded_and_not_retried_unless_asked(tmp_path, calls):
    path = tmp_path / "points.jsonl"
    grid = dict(algorithms=["parameter_server"], ranks=[4, 2, 8, 1], sizes=[64, 128],
                save=path, servers=3)
    want = expected("all_reduce", ["parameter_server"], [4, 2, 8, 1], [64, 128], servers=3)
    assert [isinstance(w, tuple) for w in want] == [False, False, True, True,
                                                    False, False, True, True]
    got = sweep(sc.topology.switch, "all_reduce", **grid)
    assert_all_same(got, want)
    assert [f.nranks for f in got.failed] == [2, 2, 1, 1]
    assert got.failed[0] == FailedPoint(
        collective="all_reduce", algorithm="parameter_server", network="flow",
        topology="switch(2)", nranks=2, nbytes=64, dtype="float32", op="SUM", root=None,
        params={"servers": 3}, error_type=want[2][0], error_message=want[2][1])
    assert got.failed[0].error == f"{want[2][0]}: {want[2][1]}"
    assert [r.nranks for r in got.ok] == [4, 4, 8, 8]
    saved = records(path)
    assert [r["error"] for r in saved] == [
        None if not isinstance(w, tuple) else {"type": w[0], "message": w[1]} for w in want]

    calls.clear()
    assert_all_same(sweep(sc.topology.switch, "all_reduce", **grid), want)
    assert calls == [] and len(records(path)) == 8
    retried = sweep(sc.topology.switch, "all_reduce", retry_failed=True, **grid)
    assert sorted(calls) == sorted([("parameter_server", p, n) for p in (2, 1)
                                    for n in (64, 128)])
    assert_all_same(retried, want)
    assert len(records(path)) == 12  # each retry saved: the latest one counts
    loaded = load_results(path)
    assert len(loaded) == 8
    assert sorted((r.nranks, r.nbytes) for r in loaded) == sorted(
        (p, n) for p in (4, 2, 8, 1) for n in (64, 128))


def test_a_factory_that_fails_for_a_rank_count_fails_only_those_points(tmp_path):
    def even_switch(p):
        if p % 2:
            raise sc.TopologyError(f"even_switch takes even rank counts, not {p}")
        return sc.topology.switch(p)

    got = sweep(even_switch, "all_reduce", algorithms=["ring"], ranks=[2, 3, 4],
                sizes=[64], save=tmp_path / "points.jsonl")
    assert_all_same(got[::2], expected("all_reduce", ["ring"], [2, 4], [64]))
    assert got[1] == FailedPoint(
        collective="all_reduce", algorithm="ring", network="flow", topology=None,
        nranks=3, nbytes=64, dtype="float32", op="SUM", root=None, params={},
        error_type="TopologyError", error_message="even_switch takes even rank counts, not 3")


def test_a_factory_error_that_is_not_a_simcoll_error_names_the_rank_count():
    def odd_fails(p):
        if p % 2:
            raise ValueError("no odd machines")
        return sc.topology.switch(p)

    with pytest.raises(ValueError, match="no odd machines") as info:
        sweep(odd_fails, "all_reduce", algorithms=["ring"], ranks=[2, 3], sizes=[64])
    assert any("for ranks value p=3" in note and "odd_fails" in note
               for note in info.value.__notes__)


def test_an_error_that_is_not_a_simcoll_error_stops_the_sweep(tmp_path, monkeypatch):
    path = tmp_path / "points.jsonl"
    real, seen = workers.simulate, []

    def broken(topology, collective, **kwargs):
        seen.append(1)
        if len(seen) == 3:
            raise RuntimeError("a bug")
        return real(topology, collective, **kwargs)

    monkeypatch.setattr(workers, "simulate", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3, 4, 5],
              sizes=[64], save=path)
    assert [identity(r) for r in records(path)] == [("ring", 2, 64), ("ring", 3, 64)]


def test_ctrl_c_in_process_keeps_the_points_saved_before_it(tmp_path, monkeypatch):
    path = tmp_path / "points.jsonl"
    real, seen = workers.simulate, []

    def interrupted(topology, collective, **kwargs):
        seen.append(1)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return real(topology, collective, **kwargs)

    monkeypatch.setattr(workers, "simulate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3, 4],
              sizes=[64], save=path)
    assert_all_same(load_results(path), expected("all_reduce", ["ring"], [2, 3], [64]))


def test_a_failing_save_ends_the_workers_at_once(tmp_path, monkeypatch):
    from simcoll.sweep import storage

    real, written = storage.ResultFile.extend, []

    def extend(self, batch):
        if not written:  # the first write (of the points finished by then) goes through
            written.extend(batch)
            real(self, batch)
        raise OSError("disk full")

    monkeypatch.setattr(storage.ResultFile, "extend", extend)
    start = time.monotonic()
    with pytest.raises(OSError, match="disk full"):
        # ring at p=1024 alone takes some 25 s; it must be ended, not waited for
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"],
              ranks=[1024, 2, 3, 4, 5], sizes=[64], workers=2,
              save=tmp_path / "points.jsonl")
    assert time.monotonic() - start < 10
    assert multiprocessing.active_children() == []
    # the points finished together are saved together, in the order they finished
    assert [identity(r) for r in written] in ([("ring", p, 64) for p in range(2, n)]
                                               for n in (3, 4, 5, 6))
    assert records(tmp_path / "points.jsonl") == written


# --- arguments -----------------------------------------------------------------------------

def test_ranks_are_rank_counts_not_nodes():
    with pytest.raises(sc.InvalidInputError,
                       match=r"simcoll.topology.presets.dgx:dgx_a100 built 'dgx_a100x1' with 8 "
                             r"ranks for ranks value p=1"):
        sweep(sc.topology.dgx_a100, "all_reduce", algorithms=["ring"], ranks=[1, 2],
              sizes=[1024])
    got = sweep(lambda p: sc.topology.dgx_a100(p // 8), "all_reduce", algorithms=["ring"],
                ranks=[8, 16], sizes=[1024])
    assert [r.nranks for r in got] == [8, 16]
    assert_all_same(got, expected("all_reduce", ["ring"], [8, 16], [1024],
                                  factory=lambda p: sc.topology.dgx_a100(p // 8)))


GOOD = dict(algorithms=["ring"], ranks=[2], sizes=[64])


@pytest.mark.parametrize("bad, match", [
    (dict(sizes=["abc"]), "sizes value 'abc'"),
    (dict(sizes=[True]), "sizes value True"),
    (dict(sizes=[-8]), "sizes value -8"),
    (dict(sizes=[6]), "sizes value 6 .* multiple of the float32 item size"),
    (dict(sizes=64), "sizes=64 is not accepted; give a list"),
    (dict(sizes=[]), "sizes is empty"),
    (dict(ranks=[0]), "ranks value 0"),
    (dict(ranks=[-1]), "ranks value -1"),
    (dict(ranks=[True]), "ranks value True"),
    (dict(ranks=[np.True_]), r"ranks value (np\.)?True"),
    (dict(ranks=["2"]), "ranks value '2'"),
    (dict(ranks=[2.0]), "ranks value 2.0"),
    (dict(ranks="24"), "ranks='24' is not accepted"),
    (dict(algorithms="ring"), "algorithms='ring' is not accepted; give a list"),
    (dict(algorithms=["ring", "nope"]), "unknown algorithm 'nope'"),
    (dict(algorithms=[]), "algorithms is empty"),
    # a set's order differs between processes (string hashing): results came out shuffled
    (dict(algorithms={"ring", "tree"}), r"algorithms=\{.*\} is not accepted: a set has no order"),
    (dict(sizes=frozenset([64])), r"sizes=frozenset\(\{64\}\) is not accepted: a set"),
    (dict(algorithms={"ring": 1, "nope": 2}.keys()), "unknown algorithm 'nope'"),  # ordered
    (dict(workers=0), "workers=0"),
    (dict(workers=True), "workers=True"),
    (dict(workers=1.5), "workers=1.5"),
    (dict(executor="pool"), "executor='pool' is not a concurrent.futures.Executor"),
    (dict(progress="yes"), "progress='yes'"),
    (dict(retry_failed=1), "retry_failed=1"),
    (dict(data=[np.zeros(4)]), "sweep does not take data="),
    (dict(nbytes=64), "sweep does not take nbytes="),
    (dict(trace=True), "sweep does not take trace="),
    (dict(network="nope"), "unknown network model 'nope'"),
    (dict(op="nope"), "unknown reduction op 'nope'"),
    (dict(dtype="nope"), "dtype='nope' is not a numpy dtype"),
    (dict(root=-1), "root=-1"),
    (dict(chunks=object()), "chunks=<object .* is not accepted; use an integer >= 1"),
    (dict(chunks=0), "chunks=0 is not accepted; use an integer >= 1"),
    (dict(chunk=2), r"chunk=2 is taken by none of this sweep's algorithms; their parameters "
                    r"are ring: chunks"),
    # bucketed's inner_params were checked as a dict only: every point failed on them
    (dict(algorithms=["bucketed"], inner_params={"chunks": 0}),
     r"inner_params for inner='ring': chunks=0 is not accepted; use an integer >= 1"),
    (dict(algorithms=["bucketed", "ring"], inner="nccl", inner_params={"algo": "bogus"}),
     r"inner_params for inner='nccl': algo='bogus' is not accepted"),
    (dict(algorithms=["bucketed"], inner_params={"x": 1}),
     r"inner_params for inner='ring': all_reduce/ring does not take parameter\(s\) \['x'\]"),
    # written to the save file as NaN, which strict JSON parsers refuse
    (dict(algorithms=["bucketed"], inner_params={"chunks": float("nan")}),
     r"inner_params for inner='ring': chunks=nan is not accepted"),
    (dict(algorithms=["bucketed"], compute=float("nan")),
     r"^compute=nan is not accepted; use a finite number >= 0"),
    (dict(until=-1), "until=-1 is not accepted"),
    (dict(max_events=0), "max_events=0 is not accepted"),
    (dict(check="no"), "check='no' is not accepted; use True or False"),
    (dict(save=42), "save=42 is not a file path"),
])
def test_bad_arguments_are_refused_before_any_work(tmp_path, calls, bad, match):
    built = []
    args = {**GOOD, "save": tmp_path / "points.jsonl", **bad}
    with pytest.raises(sc.InvalidInputError, match=match):
        sweep(lambda p: built.append(p) or sc.topology.switch(p), "all_reduce", **args)
    assert built == [] and calls == [] and not (tmp_path / "points.jsonl").exists()


def test_a_directory_or_a_missing_folder_is_refused_as_save(tmp_path, calls):
    built = []

    def factory(p):
        built.append(p)
        return sc.topology.switch(p)

    with pytest.raises(sc.InvalidInputError, match=f"save='{tmp_path}' is a directory"):
        sweep(factory, "all_reduce", save=tmp_path, **GOOD)
    with pytest.raises(sc.InvalidInputError, match="does not exist"):
        sweep(factory, "all_reduce", save=tmp_path / "no" / "p.jsonl", **GOOD)
    assert built == [] and calls == [] and list(tmp_path.iterdir()) == []


def test_workers_and_executor_together_and_bad_factories_are_refused(calls):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool, pytest.raises(sc.InvalidInputError, match="not both"):
        sweep(sc.topology.switch, "all_reduce", workers=2, executor=pool, **GOOD)
    with pytest.raises(sc.InvalidInputError, match="is not a topology factory"):
        sweep(sc.topology.switch(2), "all_reduce", **GOOD)
    with pytest.raises(sc.InvalidInputError, match="returned a str for p=2, not a Topology"):
        sweep(lambda p: "switch", "all_reduce", **GOOD)
    # Python's TypeError came from inside the sweep.
    with pytest.raises(sc.InvalidInputError, match=r"cannot be called with a rank count "
                                                   r"\(too many positional arguments\)"):
        sweep(lambda: sc.topology.switch(2), "all_reduce", **GOOD)
    with pytest.raises(sc.UnknownCollectiveError, match="'allreduce'"):
        sweep(sc.topology.switch, "allreduce", **GOOD)
    assert calls == []


def test_points_that_cannot_be_pickled_are_refused_before_any_work(tmp_path):
    class LocalTopology(sc.Topology):  # a local class does not pickle
        pass

    def factory(p):
        topology = LocalTopology("local")
        hub = topology.add_switch()
        for _ in range(p):
            topology.add_link(topology.add_gpu(), hub, bandwidth=1e9)
        return topology

    path = tmp_path / "points.jsonl"
    with pytest.raises(sc.InvalidInputError, match="cannot be sent to worker processes"):
        sweep(factory, "all_reduce", workers=2, save=path, **GOOD)
    assert not path.exists()   # nothing saved: the file this sweep opened is gone
    assert_all_same(sweep(factory, "all_reduce", **GOOD),
                    expected("all_reduce", ["ring"], [2], [64], factory=factory))


# --- executors, progress, pandas, loading --------------------------------------------------

def test_a_dask_cluster_runs_the_same_sweep(tmp_path):
    distributed = pytest.importorskip("distributed")
    path = tmp_path / "points.jsonl"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        got = sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "tree"],
                    ranks=[2, 5], sizes=[64, 4096], save=path,
                    executor=client.get_executor())
    assert_all_same(got, expected("all_reduce", ["ring", "tree"], [2, 5], [64, 4096]))
    assert sorted(identity(r) for r in records(path)) == sorted(
        (a, p, n) for a in ("ring", "tree") for p in (2, 5) for n in (64, 4096))


def test_progress_bar_on_stderr_only_when_asked_or_on_a_terminal(capsys):
    sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3],
          sizes=[64, 128], progress=True)
    assert "4/4" in capsys.readouterr().err
    sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2], sizes=[64],
          progress=False)
    sweep(sc.topology.switch, "all_reduce", **GOOD)  # captured stderr: not a terminal
    assert capsys.readouterr().err == ""


def test_to_pandas_has_a_row_per_point_with_every_scalar_and_the_error(monkeypatch):
    pytest.importorskip("pandas")
    got = sweep(sc.topology.switch, "all_reduce", algorithms=["parameter_server"],
                ranks=[4, 2], sizes=[64], servers=3)
    frame = got.to_pandas()
    want = expected("all_reduce", ["parameter_server"], [4, 2], [64], servers=3)
    scalars = [k for k, v in want[0].to_dict().items()
               if not isinstance(v, (list, dict)) and k != "topology_hash"]
    at = scalars.index("op") + 1   # all_reduce has no root: to_dict leaves it out
    assert list(frame.columns) == (scalars[:at] + ["root"] + scalars[at:]
                                   + ["params", "topology_hash", "error"])
    row = frame.iloc[0].to_dict()
    for key in scalars:
        value = want[0].to_dict()[key]
        assert row[key] == value or (value is None and row[key] is None), key
    assert row["root"] is None
    assert json.loads(row["params"]) == want[0].to_dict()["params"]
    assert row["topology_hash"] == want[0].topology_hash
    assert row["error"] is None or row["error"] != row["error"]  # None or NaN
    failed = frame.iloc[1]
    assert failed["error"] == f"{want[1][0]}: {want[1][1]}"
    assert (failed["nranks"], failed["nbytes"], failed["algorithm"]) == (2, 64,
                                                                         "parameter_server")
    assert failed["time"] != failed["time"]  # missing
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"simcoll\[pandas\]"):
        got.to_pandas()


def test_to_pandas_tells_points_of_other_roots_and_parameters_apart(tmp_path):
    """Two roots (or two chunk counts) of one machine gave identical rows: to_pandas left
    out root and the parameters."""
    pytest.importorskip("pandas")
    path = tmp_path / "points.jsonl"
    for root in (1, 3):
        sweep(sc.topology.switch, "broadcast", algorithms=["binomial"], ranks=[4],
              sizes=[64], root=root, save=path)
    for chunks in (1, 2):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[4],
              sizes=[64], chunks=chunks, save=path)
    # NCCL's tuner picks the ring on its own here: what ran is the same, what was asked
    # is not, and the record tells the points apart by what was asked
    for params in ({}, {"algo": "ring"}):
        sweep(sc.topology.switch, "all_reduce", algorithms=["nccl"], ranks=[4], sizes=[64],
              save=path, **params)
    frame = sc.load_results(path).to_pandas()
    assert frame["root"].tolist()[:2] == [1, 3]
    assert [json.loads(p) for p in frame["params"].tolist()[2:]] == [
        {"chunks": 1}, {"chunks": 2}, {}, {"algo": "ring"}]
    assert len(frame.drop_duplicates()) == 6


def test_load_results_reads_back_what_the_sweep_returned(tmp_path):
    path = tmp_path / "points.jsonl"
    got = sweep(sc.topology.switch, "all_reduce", algorithms=["parameter_server", "ring"],
                ranks=[3, 4], sizes=[64, 1 << 20], save=path, servers=4)
    loaded = load_results(path)
    assert isinstance(loaded, SweepResults)
    assert_all_same(loaded, list(got))  # in-process: saved in grid order
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"collective": "all_re')
    with pytest.warns(UserWarning, match="truncated last line"):
        assert_all_same(load_results(path), list(got))
    assert path.read_bytes() == whole + b'{"collective": "all_re'  # a reader changes nothing
    path.write_bytes(whole + b"oops\n")
    with pytest.raises(sc.InvalidInputError, match=f"line {len(got) + 1} is not a simcoll"):
        load_results(path)
    with pytest.raises(sc.InvalidInputError, match="is a directory"):
        load_results(tmp_path)
    with pytest.raises(sc.InvalidInputError, match="does not exist"):
        load_results(tmp_path / "missing.jsonl")
    if os.path.exists(os.devnull):  # it exists; it is no file of records ("does not exist")
        with pytest.raises(sc.InvalidInputError, match="is not a regular file"):
            load_results(os.devnull)


# --- real processes: SIGKILL and Ctrl-C ----------------------------------------------------

def _children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start(tmp_path, grid, save):
    script = textwrap.dedent(f"""
        import simcoll as sc
        sc.sweep(sc.topology.switch, "all_reduce", workers=2, save={str(save)!r},
                 progress=False, **{grid!r})
    """)
    out = (tmp_path / "stderr.txt").open("wb")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                            stderr=out, start_new_session=True)
    return proc, out


def _wait_for_lines(path, proc, n):
    deadline = time.monotonic() + 15
    while not (path.exists() and path.read_bytes().count(b"\n") >= n):
        assert proc.poll() is None, "the sweep ended before it could be stopped"
        assert time.monotonic() < deadline, "the sweep saved nothing in 15 s"
        time.sleep(0.002)


def _assert_no_survivor(kids):
    deadline = time.monotonic() + 3
    while any(_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [k for k in kids if _alive(k)]
    for pid in survivors:  # do not leave them behind a failing test
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


KILL_GRID = dict(algorithms=["parameter_server"], ranks=[64, 48, 32, 16, 2],
                 sizes=[2 ** k for k in range(10, 30, 2)], servers=3)


@LINUX
def test_a_killed_sweep_leaves_no_worker_and_resumes_exactly(tmp_path):
    path = tmp_path / "points.jsonl"
    proc, err = _start(tmp_path, KILL_GRID, path)
    try:
        _wait_for_lines(path, proc, 5)
        kids = _children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        err.close()
    assert len(kids) == 2, kids
    _assert_no_survivor(kids)
    total = len(KILL_GRID["ranks"]) * len(KILL_GRID["sizes"])
    before = path.read_bytes().count(b"\n")
    assert 5 <= before < total

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a truncated last line, if the kill cut one
        resumed = sweep(sc.topology.switch, "all_reduce", workers=2, save=path, **KILL_GRID)
    clean_path = tmp_path / "clean.jsonl"
    clean = sweep(sc.topology.switch, "all_reduce", save=clean_path, **KILL_GRID)
    assert_all_same(resumed, list(clean))
    saved = {identity(r): r for r in records(path)}
    assert len(saved) == len(records(path)) == total
    assert saved == {identity(r): r for r in records(clean_path)}
    assert len(resumed.failed) == len(KILL_GRID["sizes"])  # servers=3 refuses p=2


@LINUX
def test_ctrl_c_ends_the_sweep_and_its_workers_at_once(tmp_path):
    path = tmp_path / "points.jsonl"
    # the first point, ring at p=1024, alone takes some 25 s
    grid = dict(algorithms=["ring"], ranks=[1024, 4, 8, 16], sizes=[64])
    proc, err = _start(tmp_path, grid, path)
    try:
        _wait_for_lines(path, proc, 3)
        kids = _children(proc.pid)
        start = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
        proc.wait(timeout=10)
        took = time.monotonic() - start
    finally:
        proc.kill()
        err.close()
    assert took < 5
    assert "KeyboardInterrupt" in (tmp_path / "stderr.txt").read_text()
    assert len(kids) == 2, kids
    _assert_no_survivor(kids)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every saved line whole
        loaded = load_results(path)
    assert_all_same(loaded, expected("all_reduce", ["ring"], [4, 8, 16], [64]))


# --- save names, simulate's arguments, sizes, rates, malformed records --------------------

@pytest.mark.parametrize("name", ["points.json", "POINTS.JSON", "points.csv"])
def test_a_save_path_named_json_or_csv_is_refused_before_any_work(tmp_path, calls, name):
    """save= writes JSON lines, which load_results and simcoll plot read a .json file as
    one JSON list (what simcoll sweep --output points.json writes) and a .csv as CSV."""
    built = []
    path = tmp_path / name
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^save='{path}' is not accepted: save= writes JSON lines.* "
                             rf"name it '{path.stem}\.jsonl'$"):
        sweep(lambda p: built.append(p) or sc.topology.switch(p), "all_reduce", save=path,
              **GOOD)
    assert built == [] and calls == [] and list(tmp_path.iterdir()) == []


def test_load_results_of_json_lines_named_json_says_to_name_it_jsonl(tmp_path):
    lines = tmp_path / "points.jsonl"
    sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3], sizes=[64],
          save=lines)
    named_json = tmp_path / "points.json"
    named_json.write_bytes(lines.read_bytes())
    with pytest.raises(sc.InvalidInputError, match=r"may hold JSON lines.*name it \.jsonl$"):
        load_results(named_json)


def test_a_device_as_save_is_refused_before_any_work(calls):
    built = []
    with pytest.raises(sc.InvalidInputError, match="^save='/dev/null': a device, pipe or "
                                                   "socket, not a regular file"):
        sweep(lambda p: built.append(p) or sc.topology.switch(p), "all_reduce",
              save="/dev/null", **GOOD)
    assert built == [] and calls == []


@pytest.mark.parametrize("bad", [dict(root=1), dict(src=1), dict(dst=0),
                                 dict(root=0, src=0)])
def test_a_root_is_refused_as_simulate_refuses_it(calls, bad):
    with pytest.raises(sc.InvalidInputError) as direct:
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=64, **bad)
    built = []
    with pytest.raises(sc.InvalidInputError) as swept:
        sweep(lambda p: built.append(p) or sc.topology.switch(p), "all_reduce",
              **GOOD, **bad)
    assert str(swept.value) == str(direct.value)
    assert built == [] and calls == []


@pytest.mark.parametrize("name, value", [("faults", None), ("faults", sc.Faults()),
                                         ("splits", [1, 1])])
def test_simulate_arguments_a_sweep_does_not_take_are_named_so(calls, name, value):
    with pytest.raises(sc.InvalidInputError, match=rf"^sweep does not take {name}=: "):
        sweep(sc.topology.switch, "all_reduce", **GOOD, **{name: value})
    assert calls == []


def test_broadcast_takes_src_and_refuses_op_as_simulate_does(tmp_path, calls):
    with pytest.raises(sc.InvalidInputError) as direct:
        sc.simulate(sc.topology.switch(4), "broadcast", algorithm="binomial", nbytes=64,
                    op="max")
    with pytest.raises(sc.InvalidInputError) as swept:
        sweep(sc.topology.switch, "broadcast", algorithms=["binomial"], ranks=[4],
              sizes=[64], op="max")
    assert str(swept.value) == str(direct.value) and calls == []
    path = tmp_path / "points.jsonl"
    got = sweep(sc.topology.switch, "broadcast", algorithms=["binomial"], ranks=[4],
                sizes=[64, 4096], save=path, src=2)
    assert_all_same(got, expected("broadcast", ["binomial"], [4], [64, 4096], src=2))
    assert [(r["root"], r["op"]) for r in records(path)] == [(2, None), (2, None)]


@pytest.mark.parametrize("sizes, ranks, p", [([2 ** 62], [2], 2),
                                             ([64, 2 ** 40], [2, 4096], 4096)])
def test_a_size_that_could_overflow_the_counters_is_refused_before_any_point(calls, sizes,
                                                                            ranks, p):
    size = sizes[-1]
    with pytest.raises(sc.InvalidInputError) as direct:
        sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring", nbytes=size)
    built = []
    with pytest.raises(sc.InvalidInputError) as swept:
        sweep(lambda q: built.append(q) or sc.topology.switch(q), "all_reduce",
              algorithms=["ring"], ranks=ranks, sizes=sizes)
    assert str(swept.value) == f"sizes value {size}: {direct.value}"
    assert built == [] and calls == []


def test_to_pandas_gives_the_rates_of_a_one_rank_point_as_its_result_does():
    pytest.importorskip("pandas")
    direct = sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="ring", nbytes=64)
    assert direct.algbw == float("inf")
    row = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[1],
                sizes=[64]).to_pandas().iloc[0]
    assert (row["algbw"], row["busbw"]) == (direct.algbw, direct.busbw)


@pytest.mark.parametrize("field, value", [
    ("link_bytes", {"gpu0->switch": 64}), ("link_bytes", [["gpu0", "switch"]]),
    ("params", [1]), ("nranks", "2"), ("nbytes", -1), ("time", "fast"),
    ("bytes_sent", [64]), ("rank_times", [0.1, "x"]), ("correct", "yes"),
    ("algbw", "fast"), ("root", "0"), ("dtype", 4),
])
def test_load_results_names_the_line_and_field_of_a_malformed_record(tmp_path, field, value):
    path = tmp_path / "points.jsonl"
    sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3], sizes=[64],
          save=path)
    first, second = records(path)
    path.write_text(json.dumps(first) + "\n" + json.dumps({**second, field: value}) + "\n")
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^{path} line 2 is not a simcoll sweep record: its {field} "):
        load_results(path)
    listed = tmp_path / "points.json"
    listed.write_text(json.dumps([first, {**second, field: value}]))
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^{listed} record 2 is not a simcoll sweep record: its "
                             rf"{field} "):
        load_results(listed)


@pytest.mark.parametrize(("output", "stdout_tty", "expected"), [
    (True, True, None), (True, False, None),    # a bar where stderr is a terminal
    (False, False, None), (False, True, False),  # none between lines on a terminal
])
def test_simcoll_sweep_shows_its_bar_on_a_terminal(tmp_path, monkeypatch, capsys, output,
                                                   stdout_tty, expected):
    import simcoll.cli.sweeping as sweeping
    from simcoll.cli import main

    seen = []
    real = sweeping.stream

    def spy(*args, **kwargs):
        seen.append(kwargs["progress"])
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeping, "stream", spy)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_tty, raising=False)
    argv = ["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K"]
    if output:
        argv += ["--output", str(tmp_path / "p.jsonl")]
    assert main(argv) == 0
    assert seen == [expected]


def test_seventeen_machines_differing_in_one_bandwidth_have_seventeen_hashes():
    """The digest tells machines apart by their links: 17 switches of 4 GPUs that differ
    only in their bandwidth (1..17 GB/s) have 17 different hashes, each a 16-digit hex
    string."""
    hashes = [topology_hash(sc.topology.switch(4, bandwidth=b * 1e9)) for b in range(1, 18)]
    assert len(set(hashes)) == 17
    assert all(len(h) == 16 and int(h, 16) >= 0 for h in hashes)


def test_a_point_that_fails_outside_simcolls_errors_is_named(tmp_path, monkeypatch, capsys):
    """An exception that is not a SimCollError (here a MemoryError at one point) stops
    the sweep, as it should, but said nothing of the point it came from: the Python
    error carries a note naming it, the command line prints it, and what finished before
    is saved."""
    from simcoll.cli import main

    real = workers.simulate

    def short_of_memory(topology, collective, **kwargs):
        if kwargs["nbytes"] == 4096 and (kwargs["algorithm"] == "naive"
                                         or kwargs.get("chunks") == 2):
            raise MemoryError
        return real(topology, collective, **kwargs)

    monkeypatch.setattr(workers, "simulate", short_of_memory)
    save = tmp_path / "points.jsonl"
    with pytest.raises(MemoryError) as info:
        sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"], ranks=[4],
                 sizes=[1024, 4096], save=str(save), progress=False)
    assert info.value.__notes__ == ["at the sweep's point all_reduce naive p=4 nbytes=4096"]
    kept = sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"], ranks=[4],
                    sizes=[1024], save=str(save), progress=False)
    assert len(kept) == 2  # the points before it were saved, and are read back

    status = main(["sweep", "--algorithms", "ring", "--ranks", "4", "--sizes", "4K",
                   "--param", "chunks=2"])
    err = capsys.readouterr().err
    assert status == 2
    assert "error: out of memory (at the sweep's point all_reduce ring p=4 nbytes=4096 " \
           "chunks=2); use fewer ranks" in err


def test_to_pandas_writes_parameters_as_json_with_sorted_keys(tmp_path):
    """The params column tells points apart by text: it must be one text per set of
    parameters, whatever the order the algorithm or the asker listed them in (JSON with
    sorted keys)."""
    pytest.importorskip("pandas")
    path = tmp_path / "points.jsonl"
    sweep(sc.topology.switch, "all_reduce", algorithms=["nccl"], ranks=[4], sizes=[4096],
          save=path, proto="Simple", algo="ring")   # asked for in that order
    frame = sc.load_results(path).to_pandas()
    text = frame["params"].tolist()[0]
    keys = list(json.loads(text))
    assert keys == ["algo", "proto"]
    assert text == json.dumps(json.loads(text), sort_keys=True)


def test_a_sweep_of_bucketed_without_inner_params_runs(tmp_path):
    """inner_params is checked against the inner algorithm only where it is given: a sweep
    that leaves it out runs (1 bucket on 4 ranks: the inner ring's time alone)."""
    got = sweep(sc.topology.switch, "all_reduce", algorithms=["bucketed"], ranks=[4],
                sizes=[4096], buckets=2, inner="ring")
    assert len(got) == 1 and not got.failed
    assert got[0].params["buckets"] == 2


def test_mut20_a_record_with_some_nccl_tests_columns_is_not_called_a_run_line(tmp_path):
    """A line of `simcoll run --json` has all three of nccl-tests' columns (time_us,
    algbw_GBps, busbw_GBps); a record holding only time_us (a hand-made table) is told
    what it lacks, not that it is a run line."""
    path = tmp_path / "partial.json"
    path.write_text(json.dumps([{"collective": "all_reduce", "time_us": 12.0}]))
    with pytest.raises(sc.InvalidInputError, match=r"is not a simcoll sweep record: it "
                       r"lacks \[") as info:
        load_results(path)
    assert "simcoll run --json" not in str(info.value)


def test_a_json_object_that_is_no_run_line_is_called_no_list(tmp_path):
    """Only a line of `simcoll run --json` gets its own message; any other object in a
    .json file is told a list of records is expected (it listed 24 missing keys)."""
    path = tmp_path / "object.json"
    path.write_text(json.dumps({"collective": "all_reduce"}))
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^{path} is not a JSON list of sweep records$"):
        load_results(path)


def test_a_record_s_hosts_that_is_no_count_is_refused_by_name(tmp_path):
    path = tmp_path / "points.jsonl"
    sweep(lambda p: sc.topology.switch(p, servers=2), "all_reduce",
          algorithms=["parameter_server"], ranks=[4], sizes=[64], save=path)
    (saved,) = records(path)
    assert saved["hosts"] == 2 and len(saved["host_bytes_sent"]) == 2
    for bad, shown in ((-1, "-1"), ("2", "'2'")):
        saved["hosts"] = bad
        path.write_text(json.dumps(saved) + "\n")
        with pytest.raises(sc.InvalidInputError, match=f"its hosts is {shown}, not an "
                                                       f"integer >= 0"):
            load_results(path)
