"""NCCL's cut of a collective over its channels, in cells of 32 KiB of traffic.

Expected counts are worked out by hand from ``scheduleCollTasksToPlan`` in NCCL 2.30.7's
src/enqueue.cc (one collective alone in its plan, so channel 0 comes first and starts
empty): traffic t bytes per byte of the count (2 for all_reduce, the ranks for
all_gather and reduce_scatter, 1 else; 4 times that for LL), a channel's share
T = roundup16(max(32 KiB, count x size x t) // channels), cells of
C = roundup16(32 KiB / t) bytes, k = ceil(T / (C t)) cells per channel, the last channel
short by what its last cell is not filled.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import simcoll as sc
from simcoll.algorithms.nccl.channels import channel_counts
from simcoll.testing import alpha_beta_network
from simcoll.topology.presets import dgx_a100, dgx_h100

KiB = 1024


@pytest.mark.parametrize("case, expected", [
    # 1 MiB of float32 all_reduce, LL128: t = 2, T = roundup16(2 MiB // 24) = 87,392,
    # C = 16 KiB (4,096 elements), k = ceil(87,392 / 32,768) = 3: 64 cells make 21
    # channels of 3 and one of 1.
    (("all_reduce", 262_144, 4, "LL128", 8, 24, 24), [12_288] * 21 + [4_096]),
    # The same with LL: t = 8, T = roundup16(8 MiB // 24) = 349,536, C = 4 KiB (1,024
    # elements), k = ceil(349,536 / 32,768) = 11: 256 cells make 23 channels of 11 and
    # one of 3.
    (("all_reduce", 262_144, 4, "LL", 8, 24, 24), [11_264] * 23 + [3_072]),
    # 12 bytes on 64 channels: one cell, one channel.
    (("all_reduce", 3, 4, "Simple", 8, 64, 64), [3]),
    # 718,272 bytes of broadcast, Simple, the tuner's 21 channels of dgx_a100(1): t = 1,
    # T = roundup16(718,272 // 21 = 34,203) = 34,208, C = 32 KiB, k = 2: 22 cells (the
    # last 30,144 bytes) make 11 channels, the last short by 2,624 bytes.
    (("broadcast", 718_272, 1, "Simple", 8, 21, 24), [65_536] * 10 + [62_912]),
    # A reduce_scatter counts one rank's block: 64 Ki float32 a rank on 8 ranks,
    # t = 8, T = roundup16(2 MiB // 24) = 87,392, C = 4 KiB, k = 3: 64 cells, 22 channels.
    (("reduce_scatter", 65_536, 4, "Simple", 8, 24, 24), [3_072] * 21 + [1_024]),
    # all_gather is counted in bytes: 10,000 float16 (20,000 B) a rank on 4 ranks, t = 4,
    # T = roundup16(80,000 // 8) = 10,000, C = 8 KiB, k = ceil(10,000 / 32,768) = 1:
    # 3 cells (the last 3,616 bytes), 3 channels; in elements 4,096, 4,096, 1,808.
    (("all_gather", 10_000, 2, "Simple", 4, 8, 8), [4_096, 4_096, 1_808]),
    # 98,306 bytes of broadcast on 3 channels: T = roundup16(32,768) = 32,768, k = 1, so
    # 4 cells want 4 channels. A communicator of 37 has them (the last holds 2 bytes: one
    # float16); one of 3 does not: channel 0 keeps its cell, the two others share 3
    # cells, 1 and 2.
    (("broadcast", 49_153, 2, "Simple", 8, 3, 37), [16_384] * 3 + [1]),
    (("broadcast", 49_153, 2, "Simple", 8, 3, 3), [16_384, 16_384, 16_385]),
    # A communicator of one channel takes everything on it.
    (("reduce", 1_000_000, 4, "Simple", 8, 1, 1), [1_000_000]),
])
def test_hand_worked_counts(case, expected):
    assert channel_counts(*case) == expected


def test_nothing_to_cut_gives_no_channel():
    assert channel_counts("all_reduce", 0, 4, "Simple", 8, 24, 24) == []


@given(st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "broadcast",
                        "reduce"]),
       st.integers(1, 10**9), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from(["LL", "LL128", "Simple"]), st.integers(2, 72),
       st.integers(1, 64), st.integers(1, 64))
def test_counts_cover_the_buffer_in_whole_cells(collective, count, itemsize, proto, nranks,
                                                channels, comm):
    counts = channel_counts(collective, count, itemsize, proto, nranks, channels, comm)
    assert sum(counts) == count and min(counts) > 0
    # a cell is 32 KiB of traffic: its data, in bytes (NCCL's bytes for all_gather and
    # broadcast, whose count it takes in bytes)
    per_byte = {"all_reduce": 2, "all_gather": nranks, "reduce_scatter": nranks}.get(
        collective, 1) * (4 if proto == "LL" else 1)
    cell = math.ceil(math.ceil(32 * KiB / per_byte) / 16) * 16
    assert all(n * itemsize % cell == 0 for n in counts[:-1])
    # never more channels than the communicator, where its count is the tuner's or more
    if channels <= comm:
        assert len(counts) <= comm
    # all channels but the first and the last carry the same
    assert len(set(counts[1:-1])) <= 1


def ring_payload_by_channel(result):
    """Payload bytes of a ring's messages, by channel (a ring's tag is its channel)."""
    sent = defaultdict(int)
    for event in result.trace:
        if event.kind == "message":
            sent[event.tag] += event.nbytes
    return dict(sent)


def test_ring_all_reduce_runs_the_channels_nccl_cuts():
    # 1 MiB of float32 with LL128 on dgx_a100(1)'s 24 channels: 21 channels of 48 KiB
    # and one of 16 KiB (above). Each element of a channel's part crosses 2 (p - 1) = 14
    # hops of its ring.
    res = sc.simulate(dgx_a100(1), "all_reduce", algorithm="nccl", nbytes=1 * sc.MiB,
                      algo="ring", proto="LL128", channels=24, trace=True)
    expected = {c: 14 * 48 * KiB for c in range(21)} | {21: 14 * 16 * KiB}
    assert ring_payload_by_channel(res) == expected
    assert res.bytes_sent.sum() == 14 * sc.MiB


def test_a_tiny_all_reduce_runs_on_one_channel_whatever_the_count():
    # 3 float32 on 64 channels: one channel, so 2 (p - 1) = 14 messages a rank (a
    # block a step, empty ones too), where 64 channels sent 64 times as many.
    res = sc.simulate(dgx_a100(1), "all_reduce", algorithm="nccl", nbytes=12, algo="ring",
                      channels=64, trace=True)
    assert res.messages == 8 * 14
    assert set(ring_payload_by_channel(res)) == {0}


def test_broadcast_runs_fewer_larger_parts():
    res = sc.simulate(dgx_a100(1), "broadcast", algorithm="nccl", nbytes=718_272,
                      dtype=np.uint8, algo="ring", proto="Simple", channels=21, trace=True)
    # 11 channels (above), each part crossing the 7 hops of its chain
    expected = {c: 7 * 65_536 for c in range(10)} | {10: 7 * 62_912}
    assert ring_payload_by_channel(res) == expected


def test_nvls_on_one_node_cuts_its_channels_the_same_on_gpus_and_switch():
    # 100 KiB of float32 all_reduce, NVLS (Simple, 16 channels): t = 2,
    # T = roundup16(204,800 // 16) = 12,800, C = 16 KiB, k = 1: 7 cells, 7 channels (the
    # last 1,024 elements). A GPU pushes its part of channel c on tag 4 c.
    n = 100 * KiB // 4
    rng = np.random.default_rng(5)
    data = [rng.standard_normal(n).astype(np.float32) for _ in range(8)]
    res = sc.simulate(dgx_h100(1), "all_reduce", algorithm="nccl", data=data, algo="nvls",
                      channels=16, trace=True)
    assert res.correct
    pushed = defaultdict(int)
    for event in res.trace:
        if event.kind == "message" and event.rank == 0 and event.tag % 4 == 0:
            pushed[event.tag // 4] += event.nbytes
    assert pushed == {c: 16 * KiB for c in range(6)} | {6: 4 * KiB}
    np.testing.assert_allclose(res.outputs[3], np.sum(np.array(data, dtype=np.float64), 0),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_nvls_reduce_scatter_and_all_gather_cut_a_block_the_same(collective):
    # 8 Ki float32 a rank's block (32 KiB): t = 8, T = roundup16(256 KiB // 16) =
    # 16,384, C = 4 KiB, k = 1: 8 cells on 8 channels, 1,024 elements each
    n = 8 * 1024 * (8 if collective == "reduce_scatter" else 1)
    rng = np.random.default_rng(7)
    data = [rng.integers(-50, 50, n).astype(np.float32) for _ in range(8)]
    res = sc.simulate(dgx_h100(1), collective, algorithm="nccl", data=data, algo="nvls",
                      channels=16, trace=True)
    assert res.correct
    tags = {event.tag for event in res.trace if event.kind == "message" and event.rank == 0}
    assert tags == set(range(8))


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize("p, nbytes, beta, gamma", [
    (38, 122_280, 1e-9, 0.0),       # 2 channels: 65,536 and 56,744 B
    (12, 700_000, 1e-10, 1e-10),    # 2 channels: 360,448 and 339,552 B
    (64, 100_000, 1e-10, 1e-11),    # 2 channels: 65,536 and 34,464 B
])
def test_the_chain_estimate_follows_unequal_channels(collective, p, nbytes, beta, gamma):
    """NCCL cuts these chains over 2 channels of unequal parts, each one piece: the
    smaller piece gets ahead on the first hop and, once ahead by its whole transfer, out
    of the larger one's way, so the run takes far less than the 2 x the larger piece a
    hop of lock-step channels (1.8 times the run for 122,280 B on 38 GPUs). The estimate
    follows the pieces hop by hop, sharing each link fairly as the flow model does."""
    run = sc.simulate(alpha_beta_network(p, alpha=1e-6, beta=beta, gamma=gamma), collective,
                      algorithm="nccl", nbytes=nbytes, root=p // 2)
    assert (run.params["channels"], run.params["proto"]) == (2, "Simple")
    estimate = sc.cost.predict(collective, "nccl", p=p, nbytes=nbytes, alpha=1e-6, beta=beta,
                               gamma=gamma, root=p // 2)
    assert estimate == pytest.approx(run.time, rel=1e-9)
    # lock-step would be a hop of 3.4 us (NCCL's Simple step over NVLink) and both pieces
    # (and both reductions)
    lock_step = (p - 1) * (3.4e-6 + nbytes * (beta + (gamma if collective == "reduce" else 0)))
    assert run.time < lock_step


def test_a_reduce_chain_overlaps_a_pieces_transfer_with_the_reduction_ahead():
    """3 GPUs, 1.5 MB at 10 GB/s, reductions at 20 GB/s: 2 channels of 750,000 B, each a
    step of 524,288 B and a rest of 225,712 B, the channels in step. Worked by hand
    (NCCL's ring Simple base 8.4 us and step 3.4 us over NVLink, above alpha):
    hop 1 moves both first pieces (W1 = 104.8576 us) and GPU 1 reduces them (R1 =
    52.4288 us); hop 2 moves them on (W1) while the second pieces (W2 = 45.1424 us, R2 =
    22.5712 us) follow on hop 1 and are reduced at GPU 1 once the first are; the root
    reduces the first pieces (R1) while the second cross hop 2 (W2 < R1), then the
    second (R2). The estimate once added max(W2, R2) after the first pieces' last
    reduction: 374.9 us."""
    p, nbytes, beta, gamma = 3, 1_500_000, 1e-10, 5e-11
    w1, r1 = 2 * 524_288 * beta, 2 * 524_288 * gamma
    w2, r2 = 2 * 225_712 * beta, 2 * 225_712 * gamma
    assert w2 < r1
    expected = 8.4e-6 + 2 * 3.4e-6 + 2 * (w1 + r1) + r2
    run = sc.simulate(alpha_beta_network(p, alpha=1e-6, beta=beta, gamma=gamma), "reduce",
                      algorithm="nccl", nbytes=nbytes, root=0)
    assert (run.params["channels"], run.params["proto"]) == (2, "Simple")
    assert run.time == pytest.approx(expected, rel=1e-12)
    estimate = sc.cost.predict("reduce", "nccl", p=p, nbytes=nbytes, alpha=1e-6, beta=beta,
                               gamma=gamma, root=0)
    assert estimate == pytest.approx(expected, rel=1e-12)


def test_a_reduce_chain_reduces_the_smaller_last_piece_while_the_larger_crosses():
    """2 GPUs, 1,707,092 B at 10 GB/s, reductions at 50 GB/s: 2 channels of 884,736 and
    822,356 B, each a step of 524,288 B, then rests of 360,448 and 298,068 B. Worked by
    hand (NCCL's ring Simple base 8.4 us, step 3.4 us): the steps share the link
    (104.8576 us) and the root reduces them (20.97152 us); the rests then share it, the
    smaller arriving after 2 x 29.8068 = 59.6136 us, the larger 6.238 us later (its
    62,380 B more alone); the root reduces the smaller (5.96136 us) as the larger
    crosses, then the larger (7.20896 us). The estimate once took the rests as one
    piece arriving with the larger: 195.68 us."""
    w_steps, r_steps = 2 * 524_288 * 1e-10, 2 * 524_288 * 2e-11
    small_in = 2 * 298_068 * 1e-10
    large_in = (360_448 + 298_068) * 1e-10
    small_done = 3.4e-6 + w_steps + small_in + 298_068 * 2e-11
    assert 3.4e-6 + w_steps + r_steps < 3.4e-6 + w_steps + small_in   # the steps reduced first
    expected = 8.4e-6 + max(small_done, 3.4e-6 + w_steps + large_in) + 360_448 * 2e-11
    run = sc.simulate(alpha_beta_network(2, alpha=1e-6, beta=1e-10, gamma=2e-11), "reduce",
                      algorithm="nccl", nbytes=1_707_092, root=0)
    assert (run.params["channels"], run.params["proto"]) == (2, "Simple")
    assert run.time == pytest.approx(expected, rel=1e-12)
    estimate = sc.cost.predict("reduce", "nccl", p=2, nbytes=1_707_092, alpha=1e-6,
                               beta=1e-10, gamma=2e-11, root=0)
    assert estimate == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("p, nbytes, beta, gamma, channels", [
    (5, 10_000_000, 1e-10, 3e-11, None),     # was 1.2% over the run
    (3, 4_295_648, 4.1e-10, 8.4e-11, 3),     # was 2.3% over
])
def test_a_reduce_chains_estimate_queues_the_roots_reductions(p, nbytes, beta, gamma,
                                                              channels):
    kw = {} if channels is None else {"channels": channels}
    run = sc.simulate(alpha_beta_network(p, alpha=1e-6, beta=beta, gamma=gamma), "reduce",
                      algorithm="nccl", nbytes=nbytes, root=0, **kw)
    estimate = sc.cost.predict("reduce", "nccl", p=p, nbytes=nbytes, alpha=1e-6, beta=beta,
                               gamma=gamma, root=0, **kw)
    assert run.time <= estimate <= 1.01 * run.time


def _payload_by_tag(result, rank=None):
    sent = defaultdict(int)
    for event in result.trace:
        if event.kind == "message" and (rank is None or event.rank == rank):
            sent[event.tag] += event.nbytes
    return dict(sent)


def test_a_tuner_count_above_the_communicators_shares_traffic_over_the_communicators():
    """Guards against traffic // channels instead of traffic // min(channels, comm).
    128 KiB of broadcast (bytes), Simple, tuner 4 channels, communicator 2: NCCL's
    nChannels = min(4, 2) = 2, T = roundup16(131,072 / 2) = 65,536, C = 32 KiB (t = 1),
    cellsPerChannel = min(4, ceil(65,536 / 32,768)) = 2; 4 cells: lo 2, then 2 more make
    one mid channel and no hi, which NCCL folds into hi: 2 channels of 64 KiB. Dividing
    by the tuner's 4 gives T = 32,768, 1 cell a channel, 4 channels wanted, 2 available:
    channel 0 keeps 1 cell and the last takes 3 ([32,768, 98,304])."""
    assert channel_counts("broadcast", 131_072, 1, "Simple", 8, 4, 2) == [65_536, 65_536]
    # and with float32 all_reduce: t = 2, C = 16 KiB, 8 cells of 4,096 elements,
    # T = roundup16(262,144 / 2) = 131,072 -> 4 cells a channel on each of the 2
    assert channel_counts("all_reduce", 32_768, 4, "Simple", 8, 8, 2) == [16_384, 16_384]


def test_a_reduce_is_cut_at_one_byte_of_traffic_a_byte():
    """Guards against nccl_reduce's _counts asked as "all_reduce": two bytes of traffic a
    byte. 20 KiB of uint8 reduce, Simple, 2 channels: t = 1, traffic =
    max(32 KiB, 20 KiB) = 32 KiB, T = 16 KiB, C = 32 KiB: one cell, one channel, each
    byte crossing the 7 hops of dgx_a100(1)'s chain. As all_reduce (t = 2: 40 KiB of
    traffic, C = 16 KiB) it ran on 2 channels of 16 KiB and 4 KiB."""
    res = sc.simulate(dgx_a100(1), "reduce", algorithm="nccl", nbytes=20 * KiB,
                      dtype=np.uint8, algo="ring", proto="Simple", channels=2, root=0,
                      trace=True)
    assert _payload_by_tag(res) == {0: 7 * 20 * KiB}


def test_the_nvls_switch_multicasts_the_gpus_unequal_channel_parts():
    """Guards against switch_all_gather splitting the buffer evenly over the channels instead
    of by NCCL's counts. 8 MiB + 4 KiB of float32 all_gather a rank on dgx_h100(1),
    NVLS on 16 channels: t = 8, C = 4 KiB, T = roundup16(8,392,704 x 8 / 16) = 4,196,352,
    k = ceil(4,196,352 / 32,768) = 129 cells; 2,049 cells make 15 channels of 129 cells
    (528,384 B, 5 NVLS chunks of at most 128 KiB) and one of 114 (466,944 B, 4 chunks).
    An even split gives every channel 524,544 B (5 chunks), so the switch waited for a
    fifth chunk GPU 0 never sends on channel 15 (DeadlockError)."""
    nbytes = 8 * 1024 * KiB + 4 * KiB
    res = sc.simulate(dgx_h100(1), "all_gather", algorithm="nccl", nbytes=nbytes,
                      algo="nvls", nvls_channels=16, trace=True)
    assert res.params["channels"] == 16
    pushed = _payload_by_tag(res, rank=0)
    assert pushed == {c: 129 * 4 * KiB for c in range(15)} | {15: 114 * 4 * KiB}


def test_a_ring_all_reduce_on_ranks_not_a_power_of_two_runs_no_empty_channel():
    """86,019 float32 on 6 GPUs, LL on 24 channels: NCCL cuts 22 channels (11 KiB cells:
    t = 8). Each channel's share of every rank's block was rounded up, so the first
    channels took a block whole and channel 21 sent 60 empty messages; each now takes its
    share of every block, and a rank still moves what the ring's formula says."""
    topo = sc.topology.cluster(6, 1)
    n = 86_019
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=4 * n, algo="ring",
                      proto="LL", channels=24, trace=True)
    sent = defaultdict(int)
    for event in res.trace:
        if event.kind == "message":
            sent[event.tag] += event.nbytes
    counts = channel_counts("all_reduce", n, 4, "LL", 6, 24, 24)
    assert sorted(sent) == list(range(len(counts))) and min(sent.values()) > 0
    # every element of a channel's part crosses 2 (p - 1) = 10 hops of its ring; a
    # channel's share of a block is rounded to whole elements (one a block at most)
    for c, k in enumerate(counts):
        assert abs(sent[c] - 10 * 4 * k) <= 10 * 4 * 6
    blocks = [len(b) for b in np.array_split(np.arange(n), 6)]
    for r in range(6):   # every block but its own and its successor's, twice but those
        assert res.bytes_sent[r] == 4 * (2 * n - blocks[r] - blocks[(r + 1) % 6])


@pytest.mark.parametrize("collective, p, nbytes, kw", [
    # the last pieces: 294,912 and 231,856 B share the link (526,768 B), not 2 x 294,912
    ("broadcast", 3, 1_575_344, dict(channels=2)),
    ("broadcast", 4, 72_504, dict(proto="LL")),
    ("reduce", 3, 1_575_344, dict(channels=2)),
])
def test_the_chain_estimate_counts_every_channels_own_pieces(collective, p, nbytes, kw):
    """NCCL's cut gives the channels unequal parts; after the first pieces the link
    carries every channel's own k-th piece, which the estimate priced as the largest
    part's times the channels (2.3% over the run for the first case)."""
    machine = alpha_beta_network(p, alpha=1e-6, beta=1e-10)
    run = sc.simulate(machine, collective, algorithm="nccl", nbytes=nbytes, root=0, **kw)
    estimate = sc.cost.predict(collective, "nccl", p=p, nbytes=nbytes, alpha=1e-6,
                               beta=1e-10, root=0, **kw)
    assert estimate == pytest.approx(run.time, rel=1e-9)


@pytest.mark.parametrize("collective, p, nbytes, alpha, beta", [
    ("reduce_scatter", 6, 340_296, 4e-7, 1.28e-10),   # Simple, 2 channels of halves
    ("all_gather", 5, 55_460, 5.3e-7, 1.29e-10),      # Simple: 32,800 and 22,660 B
    ("all_reduce", 8, 91_200, 1e-7, 2.94e-11),        # LL, one slice a block
    ("all_gather", 7, 8_192, 1e-6, 1e-9),             # Simple: 4,688 and 3,504 B
])
def test_the_ring_estimate_follows_channels_that_fall_out_of_step(collective, p, nbytes,
                                                                   alpha, beta):
    """Unequal channels of a ring fall out of step, one channel's latency then hiding
    behind another's transfer; the estimate, which took every step in lock-step, was up
    to 16% over the run (the first case)."""
    run = sc.simulate(alpha_beta_network(p, alpha=alpha, beta=beta), collective,
                      algorithm="nccl", nbytes=nbytes, algo="ring")
    estimate = sc.cost.predict(collective, "nccl", p=p, nbytes=nbytes, alpha=alpha,
                               beta=beta, algo="ring")
    assert run.params["channels"] == 2
    assert estimate == pytest.approx(run.time, rel=1e-6)


# NCCL's ring Simple over NVLink on the reference switch: a base of 8.4 us and a step
# latency of 3.4 us a hop (above alpha = 1 us); 2 channels, steps of 524,288 B.
BASE, HOP = 8.4e-6, 3.4e-6


@pytest.mark.parametrize("nbytes, gamma, expected", [
    # 2 channels of 1,048,576 B, two full steps each. Both channels' pieces share the one
    # link: W = 2 x 524,288 B x 0.1 ns = 104.8576 us a pair of pieces, and the root
    # reduces a pair in R = 2 x 524,288 B x 0.01 ns = 10.48576 us. The first pair
    # arrives at 3.4 + 104.8576 = 108.2576 us and is reduced by 118.74336 us; the second
    # crosses right behind it (W > R), arrives at 213.1152 us and is reduced by
    # 223.60096 us; plus the base.
    (2_097_152, 1e-11, BASE + HOP + 2 * 104.8576e-6 + 10.48576e-6),
    # 2 channels of 750,000 B: a step and a rest of 225,712 B each. The first pair
    # arrives at 3.4 + 104.8576 us and the root reduces it in 52.4288 us; the second
    # pair (45.1424 us on the link) arrives before that ends and waits, then is reduced
    # in 2 x 225,712 B x 0.05 ns = 22.5712 us.
    (1_500_000, 5e-11, BASE + HOP + 104.8576e-6 + 52.4288e-6 + 22.5712e-6),
])
def test_a_reduce_on_two_gpus_pipelines_the_transfer_and_the_roots_reductions(
        nbytes, gamma, expected):
    """On 2 GPUs the only reductions are the root's, after the single hop: the second
    pieces cross the link while the root reduces the first ones, and nothing is
    reduced before the last hop."""
    machine = alpha_beta_network(2, alpha=1e-6, beta=1e-10, gamma=gamma)
    run = sc.simulate(machine, "reduce", algorithm="nccl", nbytes=nbytes, root=0)
    assert (run.params["channels"], run.params["proto"]) == (2, "Simple")
    assert run.time == pytest.approx(expected, rel=1e-9)
    estimate = sc.cost.predict("reduce", "nccl", p=2, nbytes=nbytes, alpha=1e-6,
                               beta=1e-10, gamma=gamma, root=0)
    assert estimate == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("p, expected", [
    # 1,500,000 B: 2 channels, a step (pair: 104.8576 us) and a rest (pair: 45.1424 us)
    # each; the first pair crosses every hop, the second follows a pair's time behind
    (2, BASE + HOP + 104.8576e-6 + 45.1424e-6),
    (3, BASE + 2 * (HOP + 104.8576e-6) + 45.1424e-6),
])
def test_a_broadcast_chains_estimate_takes_no_reduction_time(p, expected):
    """A broadcast reduces nothing: a GPU's reduction rate (gamma) changes neither the
    run nor its estimate."""
    for gamma in (0.0, 5e-11):
        machine = alpha_beta_network(p, alpha=1e-6, beta=1e-10, gamma=gamma)
        run = sc.simulate(machine, "broadcast", algorithm="nccl", nbytes=1_500_000, root=0)
        assert run.time == pytest.approx(expected, rel=1e-9)
        estimate = sc.cost.predict("broadcast", "nccl", p=p, nbytes=1_500_000, alpha=1e-6,
                                   beta=1e-10, gamma=gamma, root=0)
        assert estimate == pytest.approx(expected, rel=1e-9)


def test_a_reduce_chain_is_paced_by_the_reductions_of_the_gpus_on_the_way():
    """6 GPUs, LL, links at 1 / 3.46 ps = 289 GB/s and reductions at 1 / 11.56 ps =
    86.5 GB/s: every GPU on the way reduces each piece before passing it on, so the
    reductions, not the link, space the pieces along the chain. Without that spacing the
    estimate fell below the run (0.9995 of it)."""
    p, nbytes, alpha, beta, gamma = 6, 52_353_552, 1.3e-7, 3.46e-12, 1.156e-11
    run = sc.simulate(alpha_beta_network(p, alpha=alpha, beta=beta, gamma=gamma), "reduce",
                      algorithm="nccl", nbytes=nbytes, root=0, proto="LL")
    estimate = sc.cost.predict("reduce", "nccl", p=p, nbytes=nbytes, alpha=alpha, beta=beta,
                               gamma=gamma, root=0, proto="LL")
    assert run.time <= estimate <= 1.01 * run.time





def test_a_reduce_chains_three_unequal_last_pieces_share_the_last_link_fairly():
    """2 GPUs, 2,762,216 B at 10 GB/s, reductions at 20 GB/s, 3 channels forced, Simple:
    channels of 950,272, 950,272 and 861,672 B, each a step of 524,288 B, then rests of
    425,984, 425,984 and 337,384 B. Worked by hand (NCCL's ring Simple base 8.4 us,
    step 3.4 us over NVLink, above alpha): the three steps share the link (157.2864 us)
    and the root reduces them (78.6432 us, done at 239.3296 us); the three rests then
    share the link, the smallest done after 3 x 33.7384 = 101.2152 us (at 261.9016 us),
    the two larger ones 2 x 8.86 us later (at 279.6216 us, 118.9352 us in all). The root
    reduces the smallest (16.8692 us, done at 278.7708 us) before the larger ones
    arrive, then them (42.5984 us). Were the smallest taken to arrive only by its own
    8.86 us of extra bytes ahead of the larger ones (as if it had the link alone), its
    reduction would end after they arrive, 8.0092 us later than the run."""
    beta, gamma, step, rests = 1e-10, 5e-11, 524_288, (425_984, 425_984, 337_384)
    steps_in = 3.4e-6 + 3 * step * beta
    steps_done = steps_in + 3 * step * gamma
    small_in = steps_in + 3 * rests[2] * beta
    large_in = steps_in + sum(rests) * beta
    small_done = max(steps_done, small_in) + rests[2] * gamma
    assert steps_done < small_in and small_done < large_in
    expected = 8.4e-6 + large_in + (rests[0] + rests[1]) * gamma
    assert expected == pytest.approx(330.62e-6, rel=1e-12)
    run = sc.simulate(alpha_beta_network(2, alpha=1e-6, beta=beta, gamma=gamma), "reduce",
                      algorithm="nccl", nbytes=2_762_216, root=0, channels=3, proto="Simple")
    assert (run.params["channels"], run.params["proto"]) == (3, "Simple")
    assert run.time == pytest.approx(expected, rel=1e-12)
    estimate = sc.cost.predict("reduce", "nccl", p=2, nbytes=2_762_216, alpha=1e-6,
                               beta=beta, gamma=gamma, root=0, channels=3, proto="Simple")
    assert estimate == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_a_chain_estimate_past_a_doubles_range_is_refused_not_hung(collective):
    """2 channels of unequal last pieces at 1e304 s a byte: their fair sharing of the last
    link met inf - inf and never ended; the estimate is infinite, which simcoll.cost
    refuses by name."""
    with pytest.raises(sc.InvalidInputError, match=r"the predicted time overflows \(inf\) "
                                                   r"with alpha=1e-06, beta=1e\+304"):
        sc.cost.predict(collective, "nccl", p=2, nbytes=1_707_092, alpha=1e-6, beta=1e304,
                        gamma=0.0, root=0)
