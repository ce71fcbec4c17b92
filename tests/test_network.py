"""The network models against times worked out by hand."""

from __future__ import annotations

import pytest
import simpy
from conftest import run_flows

import simcoll as sc
from simcoll.network import NETWORKS


def line(bandwidths, latency=0.0) -> sc.Topology:
    """GPUs 0 - 1 - 2 - ... joined by links of the given bandwidths."""
    topo = sc.Topology("line")
    gpus = [topo.add_gpu() for _ in range(len(bandwidths) + 1)]
    for a, b, bw in zip(gpus, gpus[1:], bandwidths):
        topo.add_link(a, b, bandwidth=bw, latency=latency)
    return topo


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_one_flow_takes_latency_plus_size_over_bottleneck(model):
    topo = line([4e9, 1e9, 2e9], latency=1e-6)
    [t] = run_flows(topo, [(0.0, 0, 3, 5e8)], model)
    assert t == pytest.approx(3e-6 + 5e8 / 1e9, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_k_equal_flows_on_one_link_share_it(k):
    topo = sc.topology.switch(k + 1, bandwidth=10e9, latency=0.5e-6)
    times = run_flows(topo, [(0.0, src, k, 1e6) for src in range(k)])
    assert times == pytest.approx([1e-6 + k * 1e6 / 10e9] * k, rel=1e-12)


def test_analytical_model_ignores_contention():
    topo = sc.topology.switch(4, bandwidth=10e9, latency=0.5e-6)
    times = run_flows(topo, [(0.0, src, 3, 1e6) for src in range(3)], "analytical")
    assert times == pytest.approx([1e-6 + 1e6 / 10e9] * 3, rel=1e-12)


def test_three_flows_sharing_part_of_their_paths_get_max_min_rates():
    # Line g0 -(1 GB/s)- g1 -(2 GB/s)- g2. f1: g0->g1, f2: g0->g2, f3: g1->g2.
    # Until t=1: link 01 is the bottleneck (2 flows, 0.5 each), so f1 = f2 = 0.5 and f3
    # gets the 1.5 left on link 12. f1 (0.5 GB) ends at t=1. Then f2 and f3 share link 12
    # at 1 GB/s each: f2 (0.5 GB left) ends at 1.5; f3 has 6 - 1.5 - 0.5 = 4 GB left and,
    # alone, drains at 2 GB/s: it ends at 1.5 + 2 = 3.5.
    topo = line([1e9, 2e9])
    times = run_flows(topo, [(0.0, 0, 1, 0.5e9), (0.0, 0, 2, 1e9), (0.0, 1, 2, 6e9)])
    assert times == pytest.approx([1.0, 1.5, 3.5], rel=1e-12)


def test_a_flow_that_starts_midway_slows_the_first_one():
    # a: 2 GB from t=0 on a 1 GB/s link; b: 0.5 GB from t=1. From t=1 both get 0.5 GB/s:
    # b ends at 2; a has 0.5 GB left at t=2 and ends at 2.5, 0.5 s (= b / B) later
    # than alone.
    topo = line([1e9])
    assert run_flows(topo, [(0.0, 0, 1, 2e9)]) == pytest.approx([2.0])
    assert run_flows(topo, [(0.0, 0, 1, 2e9), (1.0, 0, 1, 0.5e9)]) == pytest.approx([2.5, 2.0])


def test_directions_of_a_link_are_independent():
    topo = line([1e9])
    assert run_flows(topo, [(0.0, 0, 1, 1e9), (0.0, 1, 0, 1e9)]) == pytest.approx([1.0, 1.0])


def test_latency_is_waited_before_bandwidth_is_taken():
    # b is still in its latency phase when a ends, so a drains alone at full rate.
    topo = line([1e9], latency=1.0)
    assert run_flows(topo, [(0.0, 0, 1, 1e9), (1.5, 0, 1, 1e9)]) == pytest.approx([2.0, 3.5])


def test_zero_byte_message_costs_latency_only():
    topo = line([1e9], latency=2e-6)
    assert run_flows(topo, [(0.0, 0, 1, 0)]) == pytest.approx([2e-6])


def test_counters_count_bytes_per_endpoint_and_directed_link():
    topo = line([1e9, 1e9])
    env = simpy.Environment()
    net = NETWORKS["flow"](env, topo, 3)
    net.transfer(0, 2, 100, lambda t: None, None)
    net.transfer(2, 1, 7, lambda t: None, None)
    env.run()
    assert net.sent == [100, 0, 7] and net.received == [0, 7, 100]
    assert net.messages == 2
    by_name = {topo.directed_link(d): b for d, b in enumerate(net.link_bytes)}
    assert by_name == {("gpu0", "gpu1"): 100, ("gpu1", "gpu0"): 0,
                       ("gpu1", "gpu2"): 100, ("gpu2", "gpu1"): 7}


def test_arrivals_are_let_go_of_as_they_are_delivered():
    """An arrival's delivery runs its receiver at once; the list of arrivals at that
    instant held every one delivered before it (a direct all_reduce's first-round
    messages through its second round)."""
    import weakref

    from simcoll.network.base import handed_out

    class Arrival:
        pass

    items = [Arrival() for _ in range(5)]
    refs = [weakref.ref(item) for item in items]
    seen = []
    for k, item in enumerate(handed_out(items)):
        seen.append(refs.index(weakref.ref(item)))
        del item
        assert [ref() is None for ref in refs[:k]] == [True] * k
    assert seen == [0, 1, 2, 3, 4] and items == []


def test_the_garbage_collector_runs_during_a_run_and_is_restored_after():
    """SimPy's conditions are reference cycles; a chain of '|' that never fires leaves
    them behind, which the collector, off during runs, never freed."""
    import gc

    seen = []

    def program(comm):
        seen.append((gc.isenabled(), gc.get_threshold()))
        yield comm.sleep(1e-6)

    before = gc.get_threshold()
    sc.run_program(sc.topology.switch(2), program)
    assert seen[0][0] and seen[0][1][0] > before[0]
    assert gc.get_threshold() == before and gc.isenabled()


def test_overlapping_runs_in_threads_restore_the_collector_when_the_last_ends():
    """A run starts, a second starts in another thread, the first ends, then the second:
    the first restored the thresholds it found and the second the first run's own
    (200,000, ...), which stayed so for good."""
    import gc
    import threading

    before = gc.get_threshold()
    second_started, first_done = threading.Event(), threading.Event()

    def second(comm):
        second_started.set()
        first_done.wait(10)   # until the first run has ended
        yield comm.sleep(1e-6)

    runner = threading.Thread(target=lambda: sc.run_program(sc.topology.switch(2), second))

    def first(comm):
        if comm.rank == 0:
            runner.start()
            second_started.wait(10)
        yield comm.sleep(1e-6)

    sc.run_program(sc.topology.switch(2), first)
    first_done.set()
    runner.join(30)
    assert not runner.is_alive() and second_started.is_set()
    assert gc.get_threshold() == before


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_process_forked_during_another_thread_s_run_runs_a_rank_program(tmp_path):
    """A sweep's worker forked while another thread was inside a run copied the
    collector's lock held and waited on it for ever at its first run. Here the lock is
    held (as by that thread) and the run's thresholds set; the forked child runs rank
    programs (sc.run_program always runs the engine, where a small ring all-reduce is
    timed without it): it must not wait on the copied lock, its run must find no other
    run going on (so it sets RUN_GC_THRESHOLDS itself) and must restore the thresholds
    from before."""
    import gc
    import multiprocessing

    from simcoll import execution

    before = gc.get_threshold()
    out = tmp_path / "child.txt"

    def child() -> None:
        during = []

        def program(comm):
            during.append(gc.get_threshold())
            yield comm.sleep(1e-6)

        sc.run_program(sc.topology.switch(2), program)
        out.write_text(f"{during[0] == execution.RUN_GC_THRESHOLDS} "
                       f"{gc.get_threshold() == before}")

    with execution._Collector.lock:   # another thread inside a run
        execution._Collector.runs += 1
        execution._Collector.found = before
        gc.set_threshold(*execution.RUN_GC_THRESHOLDS)
        try:
            process = multiprocessing.get_context("fork").Process(target=child)
            process.start()
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()
        finally:
            execution._Collector.runs -= 1
            gc.set_threshold(*before)
    assert process.exitcode == 0 and out.read_text() == "True True"
