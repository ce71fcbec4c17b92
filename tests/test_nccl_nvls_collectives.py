"""NVLS reduce_scatter and all_gather (``algorithm="nccl"``, ``algo="nvls"``): results
against the tests' numpy reference, every GPU's bytes worked out by hand, times worked out
by hand on a switch that reduces without limit or slowly (all_reduce's too), and NCCL's
tuner, which (with NCCL 2.30.7's constants) never prefers them to a ring on one DGX
H100."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_data
from reference import assert_outputs_match

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.algorithms.nccl.tuner import choose

US = 1e-6
P = 8


@pytest.mark.parametrize("count", [60_000, 60_001, 5])
def test_nvls_reduce_scatter_gives_the_reference_and_moves_n_up_and_one_block_down(count):
    topo = sc.topology.dgx_h100(1)
    inputs = make_data(P, count, "float32")
    # A sum: NVLS does not average (ncclNvlsSupported), test_nccl_selection.py.
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", data=inputs, algo="nvls",
                      op="sum")
    assert res.correct and res.params["algo"] == "nvls" and res.params["proto"] == "Simple"
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    # Block r of np.array_split(count, 8) goes to rank r, reduced by the switch: every GPU
    # sends its whole buffer up and receives its own block only.
    block = [len(b) * 4 for b in np.array_split(np.arange(count), P)]
    n = count * 4
    assert res.bytes_sent.tolist() == [n] * P
    assert res.bytes_received.tolist() == block
    for g in range(P):
        assert res.link_bytes[(f"gpu{g}", "nvswitch0")] == n
        assert res.link_bytes[("nvswitch0", f"gpu{g}")] == block[g]


@pytest.mark.parametrize("count", [60_000, 7])
def test_nvls_all_gather_gives_the_reference_and_every_gpu_receives_all_parts(count):
    topo = sc.topology.dgx_h100(1)
    inputs = make_data(P, count, "int32")
    res = sc.simulate(topo, "all_gather", algorithm="nccl", data=inputs, algo="nvls")
    assert res.correct and res.params["algo"] == "nvls"
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    # Each GPU pushes its part once; the switch multicasts it to all 8 GPUs, the writer
    # included (multimem.st writes to the whole group): 8 parts come down every link.
    n = count * 4
    assert res.bytes_sent.tolist() == [n] * P
    assert res.bytes_received.tolist() == [P * n] * P
    for g in range(P):
        assert res.link_bytes[(f"gpu{g}", "nvswitch0")] == n
        assert res.link_bytes[("nvswitch0", f"gpu{g}")] == P * n


def unlimited_switch(bandwidth=100e9, latency=0.5e-6):
    """One node of 8 GPUs whose NVSwitch reduces without limit, so links set the time."""
    return sc.topology.dgx_h100(1, nvlink_bandwidth=bandwidth, nvlink_latency=latency,
                                nvswitch_reduce_bandwidth=1e18)


@pytest.mark.parametrize("per_rank", [2**21, 2**24])
def test_nvls_all_gather_time_worked_out_by_hand(per_rank):
    # NCCL's fixed NVLS latency, 25 us (hwLatencies[NVLINK][NVLS][SIMPLE]). Then each of
    # the 16 channels pushes its slices of 128 KiB one after the other (a channel's
    # threads write them in turn); the first slices of all channels share the GPU's up
    # link fairly and arrive together. From then on the down links are the bottleneck:
    # all 8 parts, 8 x per_rank bytes, come down at 100 GB/s. Plus one latency up and one
    # down (0.5 us each).
    bw, channels = 100e9, 16
    res = sc.simulate(unlimited_switch(bw), "all_gather", algorithm="nccl",
                      nbytes=per_rank, algo="nvls")
    assert res.params["channels"] == channels
    first_slices = channels * min(131072, per_rank // channels)
    expected = 25 * US + first_slices / bw + P * per_rank / bw + 2 * 0.5 * US
    assert res.time == pytest.approx(expected, rel=1e-9)


def test_nvls_reduce_scatter_time_is_bounded_by_the_up_link_and_the_last_block():
    # Every GPU sends its whole buffer n up (the bottleneck, the switch reducing without
    # limit) and, at the end, the last slices of its own block come down: at least
    # 25 us + n / bw, at most that plus one block per channel's last slice down
    # (n / 8 at worst) and the two latencies.
    bw, n = 100e9, 2**24
    res = sc.simulate(unlimited_switch(bw), "reduce_scatter", algorithm="nccl", nbytes=n,
                      algo="nvls")
    floor = 25 * US + n / bw
    assert floor < res.time <= floor + (n / P) / bw + 2 * US


def test_nvls_reduce_scatter_time_worked_out_by_hand_when_the_switch_reduction_is_slow():
    # Per channel the buffer is 8 blocks of 128 KiB (one slice each: 2^24 / 8 / 16 bytes),
    # pushed one after the other: the first slices of all 16 channels share the up link
    # and arrive together after 16 x 128 KiB / 100 GB/s. From then the switch's one
    # reduction engine is the bottleneck: it reduces 7 of every 8 bytes it receives
    # (p - 1 reductions of each slice), 7 n bytes at 50 GB/s, while the links keep ahead.
    # Then the last reduced slice goes down (128 KiB at 100 GB/s), plus one latency up
    # and one down, after NCCL's fixed 25 us.
    n, bw, reduce_rate, piece = 2**24, 100e9, 50e9, 131072
    topo = sc.topology.dgx_h100(1, nvlink_bandwidth=bw, nvswitch_reduce_bandwidth=reduce_rate)
    res = sc.simulate(topo, "reduce_scatter", algorithm="nccl", nbytes=n, algo="nvls")
    expected = (25 * US + 16 * piece / bw + (P - 1) * n / reduce_rate + piece / bw
                + 2 * 0.5 * US)
    assert res.time == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("reduce_rate", [25e9, 10e9])
def test_nvls_all_reduce_time_worked_out_by_hand_when_the_switch_reduction_is_slow(
        reduce_rate):
    # As the reduce_scatter above until the switch's last reduction: NCCL's fixed 25 us,
    # the first slices of all 16 channels sharing the up link (16 x 128 KiB / 100 GB/s),
    # then 7 n bytes reduced at the switch's rate. The last reduced slice then makes
    # three trips of 128 KiB, each at the link's 100 GB/s after its 0.5 us: down to the
    # GPU that owns it (NCCL's head), back up (multimem.st), down again in the
    # multicast; so four latencies in all with the first push's. The switch takes the
    # channels' reductions in turn, so their last slices are done one reduction
    # (128 KiB at the switch's rate, 5.2 us or more) apart, longer than a slice's first
    # two trips and latencies: no two of them share a link.
    n, bw, piece = 2**24, 100e9, 131072
    topo = sc.topology.dgx_h100(1, nvlink_bandwidth=bw,
                                nvswitch_reduce_bandwidth=reduce_rate)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="nvls")
    assert (res.params["channels"], res.params["proto"]) == (16, "Simple")
    expected = (25 * US + 16 * piece / bw + (P - 1) * n / reduce_rate + 3 * piece / bw
                + 4 * 0.5 * US)
    assert res.time == pytest.approx(expected, rel=1e-9)


def test_the_tuner_prefers_rings_to_nvls_for_reduce_scatter_and_all_gather():
    # NCCL 2.30.7 (tuning.cc): NVLS's bus bandwidth for these is its graph's 8 channels
    # (one per head GPU) x their 40 GB/s (9 x 40 fits a GPU's 370.8 GB/s, 9 x 50 does
    # not) x 0.85 (Hopper's nvlsEfficiency) x 7/8 (one channel's share left out) x 7/8
    # ((ppn - 1) / ppn), 208.25 GB/s, and NCCL does not convert it to an algorithm
    # bandwidth (only rings' is); its latency is 25 us. At 1 GiB: 25 + 2^30 / 208.25
    # GB/s = 5,181 us. The Simple ring (12 graph
    # channels at 30 GB/s): 8.4 + 7 x 3.4 us + 2^30 / (360 x 8/7 GB/s) = 2,642 us; at 8 B
    # the ring's LL costs 6.6 + 7 x 0.6 = 10.8 us against NVLS's 25. So NCCL would run
    # rings unless NCCL_ALGO=NVLS.
    machine = describe(sc.topology.dgx_h100(1), tuple(range(P)))
    nvls_bw = 8 * 40e9 * 0.85 * 7 / 8 * 7 / 8
    for collective in ("reduce_scatter", "all_gather"):
        assert predict(machine, collective, 2**30, "nvls", "Simple", 16) == pytest.approx(
            25 * US + 2**30 / nvls_bw, rel=1e-6)
        assert predict(machine, collective, 2**30, "ring", "Simple", 16) == pytest.approx(
            (8.4 + 7 * 3.4) * US + 2**30 / (360e9 * 8 / 7), rel=1e-6)
        assert {choose(machine, collective, 2**k).algo for k in range(3, 34, 2)} == {"ring"}
        assert choose(machine, collective, 2**30, algo="nvls").algo == "nvls"


@pytest.mark.parametrize("topo", [sc.topology.dgx_a100(1), sc.topology.dgx_h100(2)],
                         ids=["no NVLS switch", "two nodes"])
@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_nvls_reduce_scatter_and_all_gather_are_refused_where_nccl_cannot_run_them(
        topo, collective):
    with pytest.raises(sc.InvalidInputError, match=f"algo='nvls' cannot run {collective}"):
        sc.simulate(topo, collective, algorithm="nccl", nbytes=2**20, algo="nvls")


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_started_nvls_reduce_scatter_and_all_gather_run_as_at_the_top_level(collective):
    """Started from rank programs, NVLS reduce_scatter and all_gather get their NVSwitch
    program too (they were refused): time, outputs and traffic equal the top-level
    run's."""
    topo = sc.topology.dgx_h100(1)
    x = [np.arange(8 * 1000, dtype=np.int32) * (r + 1) for r in range(8)]

    def program(comm):
        out = yield comm.collective(collective, x[comm.rank], algorithm="nccl", algo="nvls")
        return out

    started = sc.run_program(topo, program)
    top = sc.simulate(topo, collective, algorithm="nccl", data=x, algo="nvls")
    assert top.correct and started.time == top.time
    assert started.link_bytes == top.link_bytes
    for r in range(8):
        np.testing.assert_array_equal(started.outputs[r], top.outputs[r])


def test_nvls_all_gather_is_slower_than_the_ring_at_large_sizes_on_8_gpus():
    # At large sizes a ring moves 7/8 of the output into each GPU, NVLS all of it: the
    # ring's busbw is the higher, by about 8/7.
    topo = sc.topology.dgx_h100(1)
    ring = sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=2**27, algo="ring",
                       proto="Simple")
    nvls = sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=2**27, algo="nvls")
    assert ring.time < nvls.time
    assert math.isclose(nvls.time / ring.time, 8 / 7, rel_tol=0.1)


def _kernel_cut(count: int, itemsize: int, heads: int = P) -> list[list[tuple[int, int]]]:
    """(offset, elements) of each head's chunks, as the loop of NCCL's one-node NVLS
    all_reduce walks a channel's count (src/device/all_reduce.h, oneNode branch, with
    NCCL_NVLS_CHUNKSIZE's 128 KiB)."""
    def div_up(a: int, b: int) -> int:
        return (a + b - 1) // b

    chunk_size = 131072 // itemsize
    loop_count = heads * chunk_size
    rem_count = count % loop_count
    align = 16384 // itemsize
    last_chunk_size = div_up(div_up(rem_count, heads), align) * align
    out: list[list[tuple[int, int]]] = [[] for _ in range(heads)]
    for elem_offset in range(0, count, loop_count):
        if count - elem_offset < loop_count:
            chunk_size = last_chunk_size
        for head in range(heads):
            chunk_offset = elem_offset + head * chunk_size
            nelem = min(chunk_size, count - chunk_offset)
            if nelem > 0:
                out[head].append((chunk_offset, nelem))
    return out


@pytest.mark.parametrize("count, dtype", [(5, "float32"), (3750, "float32"),
                                          (262144, "float32"), (262145, "float32"),
                                          (600_001, "float32"), (1_000_003, "float16"),
                                          (70_000, "float64")])
def test_one_node_nvls_cuts_a_channel_as_the_kernel_loops(count, dtype):
    from simcoll.algorithms.nccl.nvls_tree import one_node_slices

    part = np.zeros(count, dtype)
    cut = one_node_slices(part, P, 131072)
    itemsize = np.dtype(dtype).itemsize
    base = part.__array_interface__["data"][0]
    got = [[((piece.__array_interface__["data"][0] - base) // itemsize, len(piece))
            for piece in head] for head in cut]
    expected = _kernel_cut(count, itemsize)
    assert got == expected
    assert sum(n for head in expected for _, n in head) == count


def test_nvls_time_does_not_drop_as_the_size_grows():
    """Equal slices made a block of 128 KiB one slice and one of 128 KiB + 32 B two of
    64 KiB that overlap: 16 MiB took 120.9 us, 16 MiB + 512 B 107.7 us. Cut as the
    kernel loops, the rest is a piece of its own. On one channel, so that NCCL's cut
    over channels (which ends 16 MiB + 512 B's channels on 16 KiB pieces, a shorter
    drain) stays out of it."""
    topo = sc.topology.dgx_h100(1)
    times = [sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="nvls",
                         nvls_channels=1).time
             for n in (1 << 20, (1 << 20) + 512, 17 << 16, 2 << 20, (2 << 20) + 512,
                       16 << 20, (16 << 20) + 512)]
    assert times == sorted(times)


@pytest.mark.parametrize("count, dtype", [(32769, "float32"), (8 * 4096 * 3 + 7, "float32"),
                                          (262144 + 65537, "float32"),
                                          (8 * 8192 + 1, "float16")])
def test_one_node_nvls_cut_where_the_rest_is_one_past_heads_times_the_alignment(count, dtype):
    """The last loop's piece is divUp(rest, 8) rounded up to 16 KiB: with rest = 8 x 4096 + 1
    floats divUp gives 4097, so the pieces are 8192 floats and only GPUs 0 - 4 own any
    (4 x 8192 + 1). Rounding rest / 8 down instead gives 4096 and a ninth piece no GPU
    owns. Expected from the kernel's loop (_kernel_cut, NCCL's oneNode branch)."""
    from simcoll.algorithms.nccl.nvls_tree import one_node_slices

    part = np.zeros(count, dtype)
    itemsize = np.dtype(dtype).itemsize
    base = part.__array_interface__["data"][0]
    cut = one_node_slices(part, P, 131072)
    got = [[((piece.__array_interface__["data"][0] - base) // itemsize, len(piece))
            for piece in head] for head in cut]
    assert got == _kernel_cut(count, itemsize)
    if count == 32769:   # by hand: 4 pieces of 8192 and one of 1 element
        assert [sum(n for _, n in head) for head in got] == [8192] * 4 + [1] + [0] * 3


def test_one_node_nvls_cuts_chunks_of_128_kib_when_a_channel_holds_more_than_one_loop():
    """A channel of 1 MiB + 8 KiB of floats (264192) on 8 GPUs: one loop of 8 chunks of
    128 KiB (32768 floats each), then the 2048-float rest in one piece of
    alignUp(divUp(2048, 8), 4096) = 4096 floats, all GPU 0's. So GPU 0 takes 136 KiB per
    channel down and hands it back, the others 128 KiB: a GPU's link carries n + that
    each way. A 256 KiB chunk would make the whole channel one last loop, 144 KiB for
    GPUs 0 - 6 and 24 KiB for GPU 7."""
    topo = sc.topology.dgx_h100(1)
    per_channel = 262144 + 2048
    n = 16 * per_channel * 4
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="nvls")
    assert res.params["channels"] == 16
    # NCCL's cut: 2n / 16 = 2,113,536 bytes of traffic a channel, 65 cells of 16 KiB (64.5
    # rounded up); 1,032 cells, so 15 channels of 65 cells (266,240 floats: a loop and a
    # rest of 4,096 floats, one piece, GPU 0's) and one of 57 (233,472 floats: a last
    # loop alone, pieces of alignUp(29,184, 4,096) = 32,768 floats, GPU 7 the last
    # 4,096)
    own = [0] * P
    for part in [266_240] * 15 + [233_472]:
        for g, head in enumerate(_kernel_cut(part, 4)):
            own[g] += 4 * sum(c for _, c in head)
    assert own == [(15 * 144 + 128) * 1024] + [16 * 128 * 1024] * 6 + [
        (15 * 128 + 16) * 1024]
    for g in range(P):
        assert res.link_bytes[(f"gpu{g}", "nvswitch0")] == n + own[g]
        assert res.link_bytes[("nvswitch0", f"gpu{g}")] == n + own[g]


def _channels_used(result, tags_per_channel):
    return len({e.tag // tags_per_channel for e in result.trace if e.kind == "message"})


def test_nvls_all_reduce_stays_on_its_nvls_channels_when_the_cells_ask_one_more():
    """NVLS on one node with nvlsChannels=5, 81,922 bytes of float16 (hand-worked, as
    scheduleCollTasksToPlan cuts): traffic 2 x 81,922 = 163,844, /5 -> 32,768 a channel =
    one 16 KiB cell each; 5 cells + 2 bytes ask a 6th channel, which the communicator's 5
    NVLS channels do not have: the run is on 5 channels (NVLS tags: 4 a channel)."""
    r = sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl", nbytes=81922,
                    dtype="float16", algo="nvls", nvls_channels=5, trace=True)
    assert _channels_used(r, 4) == 5


def test_nvls_all_gather_stays_on_its_nvls_channels_when_the_cells_ask_one_more():
    """NVLS all_gather on one node, nvlsChannels=9, 36,865-byte blocks of 8 ranks
    (hand-worked): traffic 8 x 36,865 = 294,920, /9 -> 32,768 = one 4 KiB cell a channel;
    9 cells + 1 byte ask a 10th channel that nvlsChannels=9 does not give: 9 channels."""
    r = sc.simulate(sc.topology.dgx_h100(1), "all_gather", algorithm="nccl", nbytes=36865,
                    dtype="int8", algo="nvls", nvls_channels=9, trace=True)
    assert _channels_used(r, 1) == 9


def test_nvls_channels_takes_nccls_maxchannels_64_and_refuses_65():
    """NCCL_NVLS_NCHANNELS is bounded by NCCL's MAXCHANNELS = 64 (src/include/device.h),
    the bound choose() applies too."""
    topo = sc.topology.dgx_h100(1)
    r = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20, algo="nvls",
                    nvls_channels=48)
    assert r.params["nvls_channels"] == 48
    with pytest.raises(sc.InvalidInputError):
        sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 20, algo="nvls",
                    nvls_channels=65)
