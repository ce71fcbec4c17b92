"""Ordered messages (``comm.send(..., ordered=True)``): a connection whose messages move one
after the other, as a channel's threads write NCCL's slices, while their latencies run
alongside. Expected times are worked out by hand on one link of ``W`` bytes/s and ``L``
seconds of route latency (``switch(2)``: two links of ``L / 2`` each)."""

from __future__ import annotations

import pytest

import simcoll as sc
from simcoll.buffers import VirtualBuffer

W, L, B = 100e9, 2e-6, 1_000_000
"""Link bandwidth (bytes/s), route latency (s), message size (bytes)."""


def machine():
    return sc.topology.switch(2, bandwidth=W, latency=L / 2)


def _sender(comm, plan, ordered, tag=0):
    """Rank 0 sends ``(at, delay)`` messages of B bytes to rank 1; rank 1 records when
    each arrives (in send order: one channel)."""
    piece = VirtualBuffer.of(B, "uint8")
    if comm.rank == 0:
        sent = []
        for at, delay in plan:
            if at > comm.now:
                yield comm.sleep(at - comm.now)
            sent.append(comm.send(piece, 1, tag=tag, delay=delay, ordered=ordered))
        for event in sent:
            yield event
        return None
    arrivals = []
    for _ in plan:
        yield comm.recv(0, tag=tag)
        arrivals.append(comm.now)
    return arrivals


def arrivals(plan, ordered=True, network="flow", trace=False):
    return sc.run_program(machine(), _sender, plan, ordered, network=network,
                          trace=trace).outputs[1]


@pytest.mark.parametrize("network", ["flow", "flow_rtt", "analytical"])
def test_ordered_messages_sent_together_drain_one_after_the_other(network):
    """Four at t = 0: the first arrives after L + B / W, each next one B / W later (its
    latency ran while the one ahead drained)."""
    got = arrivals([(0.0, 0.0)] * 4, network=network)
    assert got == pytest.approx([L + (k + 1) * B / W for k in range(4)], rel=1e-12)


def test_unordered_messages_share_the_link_and_end_together():
    """The same four as flows of their own share the link evenly: all end at L + 4B / W
    on the flow model; the analytical model, which shares nothing, ends each at L + B / W."""
    assert arrivals([(0.0, 0.0)] * 4, ordered=False) == pytest.approx(
        [L + 4 * B / W] * 4, rel=1e-12)
    assert arrivals([(0.0, 0.0)] * 4, ordered=False, network="analytical") == pytest.approx(
        [L + B / W] * 4, rel=1e-12)


def test_a_message_waits_out_its_own_latency_when_the_one_ahead_ends_first():
    """The second, sent at t = 5 us with 3 us of delay, is queued behind the first, which
    ends at L + B / W = 12 us; its own latency has run by then (5 + 2 + 3 = 10 us), so
    it moves from 12 us. The third, sent at 30 us, finds the connection idle: 30 us + L
    + B / W. The fourth, sent at 30.5 us with a 40 us delay, queues behind the third but
    moves only at 30.5 + 2 + 40 us, long after the third ended."""
    first_end = L + B / W
    got = arrivals([(0.0, 0.0), (5e-6, 3e-6), (30e-6, 0.0), (30.5e-6, 40e-6)])
    assert got == pytest.approx([first_end, first_end + B / W, 30e-6 + L + B / W,
                                 30.5e-6 + L + 40e-6 + B / W], rel=1e-12)


def test_connections_are_told_apart_by_tag_and_share_the_link_fairly():
    """Two connections (tags) of two ordered messages each, all sent at t = 0: the first
    message of each shares the link (2B at W), then the second of each (2B more)."""
    def two_connections(comm):
        piece = VirtualBuffer.of(B, "uint8")
        if comm.rank == 0:
            sent = [comm.send(piece, 1, tag=t, ordered=True) for t in (0, 1, 0, 1)]
            for event in sent:
                yield event
            return None
        def receive(tag):
            times = []
            for _ in range(2):
                yield comm.recv(0, tag=tag)
                times.append(comm.now)
            return times

        started = [comm.start(receive(t)) for t in (0, 1)]
        times = []
        for program in started:
            times.append((yield program))
        return times

    times = sc.run_program(machine(), two_connections).outputs[1]
    assert times[0] == pytest.approx([L + 2 * B / W, L + 4 * B / W], rel=1e-12)
    assert times[1] == pytest.approx([L + 2 * B / W, L + 4 * B / W], rel=1e-12)


def test_a_traced_run_gives_the_same_arrivals_and_spans_from_each_send():
    plan = [(0.0, 0.0)] * 3
    assert arrivals(plan, trace=True) == arrivals(plan)
    res = sc.run_program(machine(), _sender, plan, True, trace=True)
    spans = [e for e in res.trace if e.kind == "message"]
    assert [e.end for e in spans] == pytest.approx([L + (k + 1) * B / W for k in range(3)],
                                                   rel=1e-12)
    assert all(e.start == 0.0 and e.nbytes == B for e in spans)


def test_an_nccl_chain_broadcast_pipelines_slice_by_slice():
    """One channel of Simple on switch(8) (240 GB/s, 0.5 us per link): 512 slices of
    512 KiB (one step each, BROADCAST_SLICESTEPS = 1) go down a chain of 7 hops. Each hop
    costs NCCL's Simple step latency over NVLink, 3.4 us (which holds the route's 1 us),
    and a slice's drain, 512 KiB / 240 GB/s; a connection drains its slices back to back,
    so the last leaves the root 3.4 us + 512 drains after the start and each later hop
    adds 3.4 us + one drain: 8.4 us launch + 7 x 3.4 us + (512 + 6) drains. Before
    slices were ordered, the 8 slices a connection has in flight ended together and
    the chain moved 8 at a time."""
    topo = sc.topology.switch(8, bandwidth=240e9, latency=0.5e-6)
    drain = 524288 / 240e9
    for collective in ("broadcast", "reduce"):
        res = sc.simulate(topo, collective, algorithm="nccl", nbytes=1 << 28,
                          proto="Simple", channels=1)
        assert res.messages == 7 * 512
        assert res.time == pytest.approx(8.4e-6 + 7 * 3.4e-6 + 518 * drain, rel=1e-12)
