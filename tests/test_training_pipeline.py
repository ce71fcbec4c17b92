"""Pipelines: bubble against (p-1)/(m+p-1) with free communication, step time with
communication against a hand-derived formula, micro-batches in flight, traffic."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALPHA, BETA, reference_network

import simcoll as sc
from simcoll import training as tr

FREE = sc.topology.switch(8, bandwidth=1e300, latency=0)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(1, 1), (1, 4), (2, 1), (2, 2), (3, 7), (4, 4), (4, 8),
                                 (5, 3), (8, 1), (8, 16)])
@pytest.mark.parametrize("tf,tb", [(1.0, 1.0), (1.0, 2.0), (0.3, 0.7)])
def test_bubble_with_free_communication(schedule, p, m, tf, tb):
    res = tr.pipeline_step(FREE, stages=p, micro_batches=m, forward=tf, backward=tb,
                           activation_bytes=1 << 20, schedule=schedule)
    assert res.step_time == pytest.approx((m + p - 1) * (tf + tb), rel=1e-12)
    assert res.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), rel=1e-9, abs=1e-12)
    assert res.breakdown.idle == pytest.approx((p - 1) * (tf + tb), rel=1e-9, abs=1e-12)
    assert res.breakdown.compute == pytest.approx(m * (tf + tb), rel=1e-12)
    if schedule == "gpipe":
        assert res.peak_in_flight == (m,) * p
    else:
        assert res.peak_in_flight == tuple(min(p - s, m) for s in range(p))
        assert max(res.peak_in_flight) <= p
    assert res.activation_memory == tuple(k * (1 << 20) for k in res.peak_in_flight)
    assert (res.schedule, res.stages, res.micro_batches) == (schedule, p, m)


@pytest.mark.parametrize("p,m", [(2, 3), (4, 4), (5, 2)])
def test_gpipe_step_time_with_communication(p, m):
    # Each hop costs c = alpha + n beta on the reference network. Stage s finishes
    # forward j at s (tf + c) + (j + 1) tf (derived by induction on s and j), and the
    # backward pass mirrors it, so the step takes (m + p - 1)(tf + tb) + 2 (p - 1) c.
    n = 1 << 20
    c = ALPHA + n * BETA
    tf, tb = 20 * c, 35 * c
    res = tr.pipeline_step(reference_network(p), stages=p, micro_batches=m, forward=tf,
                           backward=tb, activation_bytes=n, schedule="gpipe")
    expected = (m + p - 1) * (tf + tb) + 2 * (p - 1) * c
    assert res.step_time == pytest.approx(expected, rel=1e-9)
    assert res.bubble_fraction == pytest.approx(1 - m * (tf + tb) / expected, rel=1e-9)
    assert res.bubble_fraction > (p - 1) / (m + p - 1)


def _two_stages_in_order(schedule, m, forward, backward, c):
    """Two stages whose transfers (c seconds each, one link each way) run one at a time in
    the order sent: each stage's passes in its schedule's order (GPipe: every forward,
    then every backward from the last; 1F1B: stage 0 one forward ahead), each waiting for
    its input to arrive; a step ends with its last pass."""
    orders = [[("F", j) for j in range(m)] + [("B", j) for j in reversed(range(m))]] * 2
    if schedule == "1f1b":
        orders = [[("F", 0)] + [x for j in range(m - 1) for x in (("F", j + 1), ("B", j))]
                  + [("B", m - 1)], [x for j in range(m) for x in (("F", j), ("B", j))]]
    arrived, link_free, free = {}, [0.0, 0.0], [0.0, 0.0]
    done = {0: 0, 1: 0}
    while any(done[s] < 2 * m for s in (0, 1)):
        for s in (0, 1):
            while done[s] < 2 * m:
                kind, j = orders[s][done[s]]
                needs = None if (s, kind) in ((0, "F"), (1, "B")) else \
                    ("act" if kind == "F" else "grad", j)
                if needs is not None and needs not in arrived:
                    break
                start = max(free[s], arrived.get(needs, 0.0))
                free[s] = start + (forward if kind == "F" else backward)[s]
                if (s, kind) in ((0, "F"), (1, "B")):   # sent on: in order on its link
                    link_free[s] = max(link_free[s], free[s]) + c
                    arrived[("act" if s == 0 else "grad", j)] = link_free[s]
                done[s] += 1
    return max(free)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("m", "forward", "backward", "nbytes"), [
    (2, (1e-3, 2e-3), (3e-3, 3e-3), 3_000_000), (5, (1e-3, 1e-3), (2e-3, 1e-3), 4_000_000),
    (4, (2e-3, 1e-3), (1e-3, 3e-3), 500_000), (7, (0.5e-3, 0.7e-3), (1e-3, 1.4e-3), 9_000_000)])
def test_a_stages_sends_to_one_peer_run_in_order(schedule, m, forward, backward, nbytes):
    """Transfers longer than the compute between them: activation j+1's send started
    beside activation j's and took half the link, so j arrived late (2 stages, 2
    micro-batches, 3 MB at 1 GB/s: 22 ms where sends in order, as on the pair's NCCL
    stream, take 21). Against a schedule worked out here with one transfer at a time."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0)
    res = tr.pipeline_step(topo, stages=2, micro_batches=m, forward=list(forward),
                           backward=list(backward), activation_bytes=nbytes,
                           schedule=schedule)
    expected = _two_stages_in_order(schedule, m, forward, backward, nbytes / 1e9)
    assert res.step_time == pytest.approx(expected, rel=1e-12)
    for rank in (0, 1):
        sends = sorted((s.start, s.end) for s in res.spans if s.kind == "send"
                       and s.rank == rank)
        assert all(b[0] >= a[1] for a, b in zip(sends, sends[1:]))
        assert all(end - start == pytest.approx(nbytes / 1e9) for start, end in sends)


def test_the_3d_steps_pipeline_sends_run_in_order_too():
    """tr.step with pp=2 of two blocks of 2e9 and 4e9 forward FLOPs (6e9 backward each)
    for the batch of 2 on a GPU of 1e12 FLOP/s: per micro-batch 1 and 2 ms forward, 3 ms
    backward, 3 MB of activations at 1 GB/s, two micro-batches: the hand schedule of
    test_a_stages_sends_to_one_peer_run_in_order's first case, 21 ms (22 before)."""
    layers = (tr.Layer("b0", (8,), 2e-3 * 1e12, 6e-3 * 1e12, block=True),
              tr.Layer("b1", (8,), 4e-3 * 1e12, 6e-3 * 1e12, block=True))
    model = tr.Model("x", layers, batch=2, seq_len=1, hidden=1_500_000, heads=1)
    step = tr.step(model, sc.topology.switch(2, bandwidth=1e9, latency=0), dp=1, pp=2,
                   micro_batches=2, schedule="gpipe", gpu=tr.GPU("g", 1e12))
    assert step.step_time == pytest.approx(
        _two_stages_in_order("gpipe", 2, (1e-3, 2e-3), (3e-3, 3e-3), 3e-3), rel=1e-12)
    assert step.step_time == pytest.approx(21e-3, rel=1e-12)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_communication_only_adds_to_the_bubble(schedule):
    for bandwidth in (1e9, 1e10, 1e11):
        topo = sc.topology.switch(4, bandwidth=bandwidth, latency=1e-6)
        res = tr.pipeline_step(topo, stages=4, micro_batches=6, forward=1e-3, backward=2e-3,
                               activation_bytes=4 << 20, schedule=schedule)
        assert res.bubble_fraction > 3 / 9
        assert res.step_time == pytest.approx(
            res.breakdown.compute + res.breakdown.exposed_total + res.breakdown.idle)


@pytest.mark.parametrize("p,m", [(2, 3), (4, 5)])
def test_traffic_is_one_activation_and_one_gradient_per_micro_batch(p, m):
    n = 3 << 10
    res = tr.pipeline_step(reference_network(p), stages=p, micro_batches=m, forward=1e-4,
                           backward=1e-4, activation_bytes=n)
    sent = [m * n * ((s < p - 1) + (s > 0)) for s in range(p)]
    np.testing.assert_array_equal(res.run.bytes_sent, sent)
    assert res.run.messages == 2 * m * (p - 1)


def test_stages_on_chosen_ranks_and_per_stage_times():
    topo = sc.topology.dgx_h100(2)
    res = tr.pipeline_step(topo, stages=2, micro_batches=2, forward=[1e-3, 2e-3],
                           backward=[2e-3, 4e-3], activation_bytes=1 << 20, ranks=[3, 12])
    assert res.ranks == (3, 12)
    assert {s.rank for s in res.spans} == {3, 12}
    sent = res.run.bytes_sent
    assert sent[3] == sent[12] == 2 * (1 << 20) and sent.sum() == 4 * (1 << 20)
    busy = {r: sum(s.end - s.start for s in res.spans if s.rank == r
                   and s.stream == "compute") for r in (3, 12)}
    assert busy[3] == pytest.approx(2 * 3e-3) and busy[12] == pytest.approx(2 * 6e-3)


def test_schedules_by_hand():
    assert tr.schedule_of("1f1b", 3, 0, 4) == [("F", 0), ("F", 1), ("F", 2), ("B", 0),
                                               ("F", 3), ("B", 1), ("B", 2), ("B", 3)]
    assert tr.schedule_of("1f1b", 3, 2, 2) == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]
    assert tr.schedule_of("gpipe", 3, 1, 2) == [("F", 0), ("F", 1), ("B", 1), ("B", 0)]


@pytest.mark.parametrize("args, match", [
    (("zb", 2, 0, 4), "schedule='zb' is not accepted"),
    (("1f1b", 0, 0, 4), "stages=0 is not accepted"),
    (("1f1b", 2, 5, 4), "stage=5 is not accepted; use an integer >= 0 and <= 1"),
    (("1f1b", 2, -1, 4), "stage=-1 is not accepted"),
    (("gpipe", 2, 0, 0), "micro_batches=0 is not accepted"),
    # A schedule of 2**70 micro-batches filled the memory before any error.
    (("gpipe", 2, 0, 2**70), r"micro_batches=1180591620717411303424 is not accepted; use "
                             r"an integer >= 1 and <= 100000"),
])
def test_a_schedule_of_what_cannot_run_is_refused(args, match):
    """schedule_of('zb', ...) gave a 1F1B order, and a stage past the last one forward
    passes of micro-batches -4 to -1."""
    with pytest.raises(sc.InvalidInputError, match=match):
        tr.schedule_of(*args)


def test_per_stage_times_as_numpy_numbers_and_arrays():
    listed = tr.pipeline_step(FREE, stages=2, micro_batches=2, forward=[1.0, 2.0],
                              backward=2.0, activation_bytes=8)
    arrays = tr.pipeline_step(FREE, stages=2, micro_batches=2,
                              forward=np.array([1.0, 2.0]), backward=np.float32(2.0),
                              activation_bytes=8)
    # 1F1B by hand, stage 0 running F0 F1 B0 B1 and stage 1 F0 B0 F1 B1: stage 1's F0
    # 1-3, B0 3-5, F1 5-7, B1 7-9; stage 0's B0 5-7 and B1 9-11.
    assert listed.step_time == arrays.step_time == pytest.approx(11.0, rel=1e-12)


@pytest.mark.parametrize("kwargs,match", [
    (dict(schedule="interleaved"), "schedule='interleaved'"),
    (dict(stages=0), "stages=0"),
    (dict(micro_batches=0), "micro_batches=0"),
    (dict(forward=[1.0]), r"forward=\[1.0\]"),
    (dict(backward=-1.0), "backward=-1.0"),
    (dict(activation_bytes=3), "activation_bytes=3 is not a whole number"),
    (dict(ranks=[0, 0]), r"ranks=\[0, 0\]"),
    (dict(ranks=3), "ranks=3 is not accepted; give a list of 2 distinct GPU ranks"),
    (dict(stages=9), "stages=9 needs 9 GPUs"),
    (dict(forward=np.zeros((2, 1))), "forward=array"),
])
def test_refusals(kwargs, match):
    args = dict(stages=2, micro_batches=2, forward=1.0, backward=1.0, activation_bytes=8)
    args.update(kwargs)
    with pytest.raises(sc.InvalidInputError, match=match):
        tr.pipeline_step(FREE, **args)


def _two_block_step_of_short_last_backward():
    """Blocks of 2e9 and 4e9 forward FLOPs, 6e9 and 2e9 backward, for the batch of 2 on
    a GPU of 1e12 FLOP/s: per micro-batch 1 and 2 ms forward, 3 and 1 ms backward, 3 MB
    of activations at 1 GB/s (3 ms a transfer), two micro-batches, gpipe."""
    layers = (tr.Layer("b0", (8,), 2e-3 * 1e12, 6e-3 * 1e12, block=True),
              tr.Layer("b1", (8,), 4e-3 * 1e12, 2e-3 * 1e12, block=True))
    model = tr.Model("x", layers, batch=2, seq_len=1, hidden=1_500_000, heads=1)
    return tr.step(model, sc.topology.switch(2, bandwidth=1e9, latency=0), dp=1, pp=2,
                   micro_batches=2, schedule="gpipe", gpu=tr.GPU("g", 1e12))


def test_the_3d_steps_gradient_sends_run_in_order():
    """By hand: activations sent 1-4 and 4-7 ms; stage 1 forwards 4-6 and 7-9, backwards
    9-10 and 10-11, its gradients sent 10-13 and 13-16 (one at a time); stage 0
    backwards 13-16 and 16-19: 19 ms. A second gradient send beside the first shares the
    link from 11 ms: the gradients arrive at 15 and 17 ms, and the step takes 21."""
    step = _two_block_step_of_short_last_backward()
    assert step.step_time == pytest.approx(19e-3, rel=1e-12)
    sends = sorted((s.start, s.end) for s in step.spans if s.kind == "send" and s.rank == 1)
    assert [t for span in sends for t in span] == pytest.approx([10e-3, 13e-3, 13e-3, 16e-3],
                                                                 rel=1e-12)


def test_the_3d_steps_pipeline_spans_name_their_micro_batch_on_both_gpus():
    step = _two_block_step_of_short_last_backward()
    assert sorted({(s.rank, s.kind, s.label) for s in step.spans if s.stream == "pp"}) == [
        (0, "recv", "gradient mb0"), (0, "recv", "gradient mb1"),
        (0, "send", "activation mb0"), (0, "send", "activation mb1"),
        (1, "recv", "activation mb0"), (1, "recv", "activation mb1"),
        (1, "send", "gradient mb0"), (1, "send", "gradient mb1")]


def test_a_pipeline_steps_send_is_on_the_senders_gpu_and_its_recv_on_the_peers():
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0)
    res = tr.pipeline_step(topo, stages=2, micro_batches=2, forward=[1e-3, 2e-3],
                           backward=[3e-3, 3e-3], activation_bytes=3_000_000)
    assert sorted({(s.rank, s.kind, s.label) for s in res.spans
                   if s.kind in ("send", "recv")}) == [
        (0, "recv", "gradient 0"), (0, "recv", "gradient 1"),
        (0, "send", "activation 0"), (0, "send", "activation 1"),
        (1, "recv", "activation 0"), (1, "recv", "activation 1"),
        (1, "send", "gradient 0"), (1, "send", "gradient 1")]


def test_a_stage_ends_when_its_last_send_is_done():
    """Two stages, two micro-batches, 1f1b: 1 and 2 ms forward, 3 ms backward, 3 MB at
    1 GB/s (3 ms a transfer). By hand: activations sent 1-4 and 4-7 ms; stage 1 runs
    F0 4-6, B0 6-9, F1 9-11, B1 11-14, and sends its gradients 9-12 and 14-17: its GPU is
    done at 17 ms, not 14; stage 0 runs B0 12-15 and B1 17-20."""
    topo = sc.topology.switch(2, bandwidth=1e9, latency=0)
    res = tr.pipeline_step(topo, stages=2, micro_batches=2, forward=[1e-3, 2e-3],
                           backward=[3e-3, 3e-3], activation_bytes=3_000_000,
                           schedule="1f1b")
    assert [float(res.run.rank_times[r]) for r in (0, 1)] == pytest.approx([20e-3, 17e-3],
                                                                          rel=1e-12)


def test_the_3d_steps_stage_ends_when_its_last_send_is_done():
    """The step of test_the_3d_steps_gradient_sends_run_in_order: stage 1's last gradient
    is sent 13-16 ms, after its backwards (done at 11): its GPU is done at 16 ms."""
    step = _two_block_step_of_short_last_backward()
    assert [float(step.run.rank_times[r]) for r in (0, 1)] == pytest.approx([19e-3, 16e-3],
                                                                           rel=1e-12)
