"""Which of NCCL's step latencies (``hwLatencies`` of NCCL 2.30.7, src/graph/tuning.cc)
each simulated algorithm charges, read off as the run's derivative: raising one
constant by D moves the time by D per step that uses it, and raising another moves
nothing. Also the size of a tree's Simple slices (one NCCL step)."""

from __future__ import annotations

import pytest

import simcoll as sc
from simcoll.algorithms.nccl import constants

D = 10.0   # us added to one constant


def _time_with(monkeypatch, link: str, algo: str, proto: str, run) -> float:
    """``run()``'s time with HW_LATENCY[link][algo][proto] raised by D us."""
    table = {k: {a: dict(v) for a, v in algos.items()}
             for k, algos in constants.HW_LATENCY.items()}
    table[link][algo][proto] += D
    with monkeypatch.context() as m:
        for k in table:
            m.setitem(constants.HW_LATENCY, k, table[k])
        return run().time


def test_nvls_tree_charges_its_own_network_step_per_level_up_and_down(monkeypatch):
    """NVLS-tree's steps between nodes cost hwLatencies[NET][NVLS_TREE] (20.9 us), not
    the tree's 14: on 2 nodes a slice climbs one level and comes down one."""
    topo = sc.topology.dgx_h100(2)

    def run() -> sc.Result:
        return sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1024, algo="nvls_tree",
                           proto="Simple")

    base = run().time
    assert _time_with(monkeypatch, "net", "nvls_tree", "Simple", run) - base \
        == pytest.approx(2 * D * 1e-6, rel=1e-9)
    assert _time_with(monkeypatch, "net", "tree", "Simple", run) == base


# 4 nodes of one GPU; the route between nodes takes 3 us, below every step latency
ONE_PER_NODE = sc.topology.cluster(4, 1, inter_latency=0.5 * sc.us)


@pytest.mark.parametrize("proto", ["LL", "LL128"])
@pytest.mark.parametrize("collective,steps", [("all_reduce", 6), ("all_gather", 3)])
def test_rings_of_one_gpu_per_node_charge_the_trees_network_step(monkeypatch, proto,
                                                                 collective, steps):
    """With one GPU per node, NCCL charges a ring's steps the tree's network latency
    (LL 5.0, LL128 8.5 us against the ring's 2.7 and 4.0); one channel, one slice, the
    steps follow one another: 2 (p - 1) for all_reduce, p - 1 for all_gather."""
    assert ONE_PER_NODE.route(0, 1).latency < 5e-6

    def run() -> sc.Result:
        return sc.simulate(ONE_PER_NODE, collective, algorithm="nccl", nbytes=64,
                           algo="ring", proto=proto, channels=1)

    base = run().time
    assert _time_with(monkeypatch, "net", "tree", proto, run) - base \
        == pytest.approx(steps * D * 1e-6, rel=1e-9)
    assert _time_with(monkeypatch, "net", "ring", proto, run) == base


def test_a_broadcast_chain_of_one_gpu_per_node_keeps_the_rings_step(monkeypatch):
    """NCCL's broadcast latency adds the ring's network step whatever the GPUs per node:
    the chain's p - 1 hops each cost it."""
    def run() -> sc.Result:
        return sc.simulate(ONE_PER_NODE, "broadcast", algorithm="nccl", nbytes=64,
                           algo="ring", proto="LL128", channels=1)

    base = run().time   # LL128's 4 us step is above the 3 us route, as D keeps it
    assert _time_with(monkeypatch, "net", "ring", "LL128", run) - base \
        == pytest.approx(3 * D * 1e-6, rel=1e-9)
    assert _time_with(monkeypatch, "net", "tree", "LL128", run) == base


def test_a_trees_simple_slices_are_one_step():
    """NCCL moves a ring's Simple chunks two steps at a time and every other algorithm's
    one (enqueue.cc: chunkSteps = 1 unless Simple on a ring): a tree's Simple slices
    are 4 MiB / 8 steps = 512 KiB, not the ring's 1 MiB."""
    res = sc.simulate(sc.topology.cluster(2, 1), "all_reduce", algorithm="nccl",
                      nbytes=8 << 20, algo="tree", proto="Simple", channels=1, trace=True)
    sizes = {e.nbytes for e in res.trace if e.kind == "message"}
    assert sizes == {(4 << 20) // 8}


def test_a_one_step_slice_is_half_a_rings_with_twice_as_many_in_flight():
    """NCCL_STEPS = 8 steps of a 4 MiB Simple buffer: 512 KiB a slice, 8 in flight (the
    ring's Simple slices are two steps, 4 in flight)."""
    from simcoll.algorithms.nccl.protocols import PROTOCOL, one_step_slices

    one = one_step_slices(PROTOCOL["Simple"])
    assert (one.slice_bytes, one.window) == ((4 << 20) // 8, 8)
    assert (PROTOCOL["Simple"].slice_bytes, PROTOCOL["Simple"].window) == ((4 << 20) // 4, 4)


def test_rings_of_two_gpus_per_node_keep_the_rings_network_step(monkeypatch):
    """Only nodes of one GPU each charge a ring the tree's network step."""
    two = sc.topology.cluster(2, 2, inter_latency=0.5 * sc.us)

    def run() -> sc.Result:
        return sc.simulate(two, "all_reduce", algorithm="nccl", nbytes=64, algo="ring",
                           proto="LL", channels=1)

    base = run().time
    assert _time_with(monkeypatch, "net", "tree", "LL", run) == base
