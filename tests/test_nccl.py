"""NCCL, simulated: protocols worked out by hand on one link, the tuner's choices with
their reasoning, outputs against the tests' reference on real machines, NVLS traffic, and
the presets against public nccl-tests figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_data
from reference import assert_outputs_match

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.rings import channel_rings
from simcoll.algorithms.nccl.tune_model import predict
from simcoll.algorithms.nccl.tuner import choose

US = 1e-6


def one_link(bandwidth=100e9, latency=0.5e-6):
    topo = sc.Topology("one link")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=bandwidth, latency=latency, kind="nvlink")
    return topo


# NCCL 2.30.7, src/graph/tuning.cc: ring base latencies and NVLink step latencies (us),
# and what one channel's threads move per second on one Ampere node: llMaxBws' 87.7 GB/s
# for all channels together in LL (here one channel), perChMaxRingLL128Bws' 20 GB/s for
# LL128 per channel of NCCL's ring graph, which its collectives run on twice over (a
# channel that runs moves half of it: 10 GB/s), no cap for Simple.
BASE = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
STEP = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}
RATE = {"LL": 87.7e9, "LL128": 10e9, "Simple": math.inf}


@pytest.mark.parametrize("proto, nbytes, wire", [
    ("LL", 1000, 2000),          # 125 lines of 8 data bytes, 16 bytes each
    ("LL", 1001, 2016),          # a partial line still costs a whole one
    # a warp writes its 16 lines of 120 data bytes in 128 whole, flags included, however
    # few bytes are left (prims_ll128.h): 2048 wire bytes per 1920 of data or less
    ("LL128", 1200, 2048),
    ("LL128", 1920, 2048),
    ("LL128", 1921, 4096),
    ("Simple", 1000, 1000),      # data as it is
])
def test_each_protocol_alone_on_one_link(proto, nbytes, wire):
    # A broadcast between two GPUs on one channel: one message smaller than a slice.
    # Hand-worked: launch + one step (NCCL's step latency holds the link's 0.5 us, which
    # is below every step latency here) + the wire bytes at the link's rate or the data at
    # the channel's threads' rate, whichever takes longer: the root's threads write the
    # lines while they cross the link (LL: 2000 B at 100 GB/s, 20 ns, against 1000 B at
    # 87.7 GB/s, 11.4 ns; LL128: 1200 B at 10 GB/s, 120 ns, against 12.8 ns on the link).
    res = sc.simulate(one_link(), "broadcast", algorithm="nccl", nbytes=nbytes,
                      dtype="uint8", proto=proto, channels=1)
    expected = (BASE[proto] + STEP[proto]) * US + max(wire / 100e9, nbytes / RATE[proto])
    assert res.time == pytest.approx(expected, rel=1e-12)
    assert res.bytes_sent.tolist() == [nbytes, 0]                      # payload
    assert res.link_bytes[("gpu0", "gpu1")] == wire                    # on the wire
    assert res.params == {"algo": "ring", "proto": proto, "channels": 1, "arch": "ampere",
                          "intra": "nvlink", "tuner": "2.30.7", "launch_overhead": 0.0,
                          "step_latency_scale": 1.0}


@pytest.mark.parametrize("proto", ["LL", "LL128", "Simple"])
def test_a_link_slower_than_the_step_latency_costs_its_own_latency(proto):
    # 5 us of link latency is more than any NVLink step latency: the step then costs the
    # link's latency alone (NCCL's figure already holds the wire's time).
    res = sc.simulate(one_link(latency=5e-6), "broadcast", algorithm="nccl", nbytes=8,
                      dtype="uint8", proto=proto, channels=1)
    wire = {"LL": 16, "LL128": 2048, "Simple": 8}[proto]   # LL128: a whole warp's lines
    assert res.time == pytest.approx((BASE[proto] + 5.0) * US + wire / 100e9, rel=1e-12)


def test_the_channel_rate_paces_a_stream_of_slices():
    # 320 KiB in LL: ten 32 KiB slices (64 KiB of lines each). The threads' 87.7 GB/s
    # write a slice in 32768 / 87.7e9 s; its lines take 65536 / 400e9 s on the 400 GB/s
    # link, less than that, so the slices never share the link, and the last one's last
    # line arrives as the threads finish writing it, 10 slice-times after they start.
    # The FIFO's 8 slots never fill: the first slice is back within 1 us (0.21 us of
    # writing beyond its wire time, 0.6 us of step, 0.16 us on the link), before the
    # ninth is ready.
    n = 10 * 32768
    res = sc.simulate(one_link(bandwidth=400e9), "broadcast", algorithm="nccl", nbytes=n,
                      dtype="uint8", proto="LL", channels=1)
    assert res.messages == 10
    expected = (BASE["LL"] + STEP["LL"]) * US + 10 * 32768 / RATE["LL"]
    assert res.time == pytest.approx(expected, rel=1e-12)


def three_in_line(bandwidth=100e9, latency=0.5e-6):
    topo = sc.Topology("three in line")
    gpus = [topo.add_gpu() for _ in range(3)]
    for a, b in zip(gpus, gpus[1:]):
        topo.add_link(a, b, bandwidth=bandwidth, latency=latency, kind="nvlink")
    return topo


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_broadcast_and_reduce_send_full_slices_then_the_rest(collective):
    # NCCL's broadcast.h and reduce.h walk a channel's part in full chunks of one 512 KiB
    # Simple step, then the rest: 512 KiB + 4 KiB goes as 512 KiB and 4 KiB, not as two
    # halves. On a chain of 3 GPUs (links of 100 GB/s) the small rest cannot overlap the
    # big slice: it leaves the middle GPU once the big one has arrived at the end, so the
    # run takes launch + 2 steps + (2 S + r) / B (halves would take 1.5 (S + r) / B).
    # A reduction of uint8 at the middle GPU is not free, so only broadcast's time is
    # hand-worked; both must be no faster than a part of one slice (NCCL has no drop).
    S, r = 512 * 1024, 4096
    topo = three_in_line()
    res = sc.simulate(topo, collective, algorithm="nccl", nbytes=S + r, dtype="uint8",
                      proto="Simple", channels=1, trace=True)
    sizes = sorted(e.nbytes for e in res.trace if e.kind == "message")
    assert sizes == [r, r, S, S]
    one = sc.simulate(topo, collective, algorithm="nccl", nbytes=S, dtype="uint8",
                      proto="Simple", channels=1)
    assert res.time > one.time
    if collective == "broadcast":
        expected = (BASE["Simple"] + 2 * STEP["Simple"]) * US + (2 * S + r) / 100e9
        assert res.time == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("slices", "expected_us"), [
    # LL128 broadcast slices are one step, 576,000 data bytes, which one_link()'s channel
    # writes in P = 57.6 us at 10 GB/s (RATE), each crossing the link as it is written
    # and arriving the link's 600 us latency (above the 1.9 us step) later. 8 fit the
    # FIFO: launch + 8 P + 600 us.
    (8, 14.0 + 8 * 57.6 + 600),
    # The 9th is written once the first has arrived and freed its slot (P + 600 us), and
    # arrives P + 600 us after that. (Written before its slot was free, it left at once
    # then, arriving its wire time, 614,400 B at 100 GB/s, and 600 us later: 1277.744.)
    (9, 14.0 + 2 * (57.6 + 600)),
])
def test_a_channels_threads_write_a_slice_only_into_a_free_slot(slices, expected_us):
    res = sc.simulate(one_link(latency=600e-6), "broadcast", algorithm="nccl",
                      nbytes=slices * 576_000, dtype="uint8", proto="LL128", channels=1)
    assert res.messages == slices
    assert res.time == pytest.approx(expected_us * US, rel=1e-12)


def test_a_channels_threads_write_each_of_their_own_pieces_at_their_rate():
    """A broadcast of one LL128 step (S = 576,000 B) and r = 12,000 B between two GPUs:
    the root's threads write the rest once the step is written, each piece's lines
    crossing as they are written, so the rest arrives as they finish it: launch + a step
    + (S + r) / 10 GB/s. (Holding the rest back by the step's writing beyond its wire
    time, as if it were the step's size, took 50.384 us more.)"""
    S, r = 576_000, 12_000
    res = sc.simulate(one_link(), "broadcast", algorithm="nccl", nbytes=S + r,
                      dtype="uint8", proto="LL128", channels=1, trace=True)
    assert sorted(e.nbytes for e in res.trace if e.kind == "message") == [r, S]
    expected = (BASE["LL128"] + STEP["LL128"]) * US + (S + r) / RATE["LL128"]
    assert res.time == pytest.approx(expected, rel=1e-12)


def test_busy_threads_move_a_received_piece_after_their_own():
    """Ring all_reduce of 2 x 576,000 B on two GPUs, LL128, one channel: each rank's
    threads write their own block (one slice, P = 57.6 us at 10 GB/s) while the other
    rank's block comes in; only then can they reduce it and pass the sum on, all of it
    (its lines are all in): it leaves as they finish it, 2 P after the launch, less its
    wire time, and arrives one step (1.9 us) after that: launch 14 us + 2 P + 1.9 us.
    (Passed on at once as it arrived, as idle threads pass lines on, it took 14 + P +
    2 x 1.9 us + its 6.144 us on the wire.)"""
    res = sc.simulate(one_link(), "all_reduce", algorithm="nccl", nbytes=2 * 576_000,
                      dtype="uint8", algo="ring", proto="LL128", channels=1)
    assert res.messages == 4
    expected = (BASE["LL128"] + STEP["LL128"]) * US + 2 * 576_000 / RATE["LL128"]
    assert res.time == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("nbytes, expected", [
    # Worked from NCCL's model on one DGX A100 (8 ranks, 240 GB/s NVLink, Ampere):
    # LL: 6.6 + 14 x 0.6 = 15.0 us, bus bandwidth min(llMaxBw 87.7, 240 / 2) = 87.7 GB/s;
    # LL128: 14 + 14 x 1.9 = 40.6 us, min(0.92 x 240, 16 x 20) = 220.8 GB/s;
    # Simple: 8.4 + 14 x 3.4 = 56.0 us, 240 GB/s; algbw = busbw x 8 / 14.
    (8, ("ring", "LL")),                 # latency decides: 15.0 us against 40.6 and 56.0
    (2**20, ("ring", "LL")),             # 15 + 20.9 = 35.9 us; LL128 48.9, Simple 63.6
    (16 * 2**20, ("ring", "LL128")),     # LL 350; LL128 40.6 + 133 = 173.6; Simple 178.2
    (2**30, ("ring", "Simple")),         # Simple 56 + 7,829 us beats LL128's 8,551
])
def test_the_tuner_picks_what_nccl_picks_on_a_dgx_a100(nbytes, expected):
    res = sc.simulate(sc.topology.dgx_a100(1), "all_reduce", algorithm="nccl",
                      nbytes=nbytes, dtype="uint8")
    assert (res.params["algo"], res.params["proto"]) == expected
    assert res.params["arch"] == "ampere" and res.params["intra"] == "nvlink"


def test_the_tuner_sees_an_intra_override_as_the_run_does():
    # At 16 MiB on one DGX A100 NCCL runs ring/LL128 (above). Told its GPUs talk over PCI,
    # NCCL's tuner leaves LL128 off (typeIntra above PATH_NVB) and Simple wins; the
    # override must reach the tuner, not only the run's step latencies.
    topo = sc.topology.dgx_a100(1)
    pci = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=16 * 2**20, intra="pci")
    assert (pci.params["algo"], pci.params["proto"], pci.params["intra"]) == \
        ("ring", "Simple", "pci")
    forced = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=16 * 2**20,
                         intra="pci", proto="LL128")
    assert forced.params["proto"] == "LL128" and forced.time != pci.time


def test_the_tuner_leaves_ll128_off_over_pci_unless_asked():
    # NCCL 2.30.7 enables LL128 by default only where GPUs talk over NVLink
    # (tuning.cc: typeIntra <= PATH_NVB). Worked from its model on pcie_node(8, gen=4):
    # 8 ranks, 24 GB/s PCIe Gen4, 4 channels, Ampere, PCI step latencies; algbw = busbw
    # x 8 / 14. At 1 MiB: LL 6.6 + 14 x 1.0 = 20.6 us + 2^20 B / (12 GB/s x 8/14) =
    # 173.5 us; LL128 14 + 14 x 2.5 = 49 us + 2^20 / (0.92 x 24 x 8/14) = 132.1 us;
    # Simple 8.4 + 14 x 5.7 = 88.2 us + 2^20 / (24 x 8/14) = 164.7 us. LL128 would win;
    # off, Simple does.
    machine = describe(sc.topology.pcie_node(8, gen=4), tuple(range(8)))
    assert machine.intra == "pci" and not machine.ll128_by_default
    mib = 2**20
    assert (choose(machine, "all_reduce", mib).algo, choose(machine, "all_reduce", mib).proto) \
        == ("ring", "Simple")
    assert choose(machine, "all_reduce", mib).predicted == pytest.approx(
        (88.2 + mib * 14 / (8 * 24e3)) * US, rel=1e-9)
    forced = choose(machine, "all_reduce", mib, proto="LL128")   # NCCL_PROTO=LL128
    assert forced.proto == "LL128"
    assert forced.predicted == pytest.approx((49 + mib * 14 / (8 * 0.92 * 24e3)) * US, rel=1e-9)
    # Over the sizes of an nccl-tests sweep, never LL128 unless named; NVLink keeps it.
    sizes = [2**k for k in range(3, 31)]
    assert "LL128" not in {choose(machine, "all_reduce", n).proto for n in sizes}
    dgx = describe(sc.topology.dgx_a100(1), tuple(range(8)))
    assert dgx.ll128_by_default
    assert "LL128" in {choose(dgx, "all_reduce", n).proto for n in sizes}


def test_the_tuner_uses_nvls_on_a_dgx_h100_for_large_buffers():
    # NVLS: 25 us, bus bandwidth 370.8 x 0.85 x 15/16 x 2 = 591 GB/s against the ring's
    # 370.8: at 1 GiB NVLS wins (25 + 3,177 us against 56 + 5,058); at 8 B its 25 us
    # lose to the ring's LL 15 us.
    machine = describe(sc.topology.dgx_h100(1), tuple(range(8)))
    assert machine.nvls and machine.arch == "hopper"
    assert choose(machine, "all_reduce", 2**30).algo == "nvls"
    assert (choose(machine, "all_reduce", 8).algo, choose(machine, "all_reduce", 8).proto) \
        == ("ring", "LL")
    # NVLS needs every rank on one switch: never across nodes here.
    two = describe(sc.topology.dgx_h100(2), tuple(range(16)))
    assert "nvls" not in {choose(two, "all_reduce", s).algo for s in (8, 2**20, 2**30)}


def test_algo_and_proto_are_read_in_any_case_as_nccl_reads_its_variables():
    res = sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl", nbytes=2**20,
                      algo="RING", proto="simple")
    assert (res.params["algo"], res.params["proto"]) == ("ring", "Simple")
    exact = sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl",
                        nbytes=2**20, algo="ring", proto="Simple")
    assert res.time == exact.time
    # NCCL_ALGO spells NVLS-tree "NVLSTree".
    tree = sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl",
                       nbytes=2**20, algo="NVLSTree")
    assert tree.params["algo"] == "nvls_tree"


def test_named_algorithms_that_cannot_run_are_refused_before_the_run():
    with pytest.raises(sc.InvalidInputError, match="algo='nvls' cannot run all_reduce"):
        sc.simulate(sc.topology.dgx_a100(1), "all_reduce", algorithm="nccl", nbytes=64,
                    algo="nvls")
    # NCCL_ALGO=Tree is a name NCCL takes, but no broadcast runs on a tree
    with pytest.raises(sc.InvalidInputError,
                       match="algo='tree': NCCL never runs broadcast with it; it runs "
                             "broadcast with ring$"):
        sc.simulate(sc.topology.dgx_a100(1), "broadcast", algorithm="nccl", nbytes=64,
                    algo="tree")
    with pytest.raises(sc.InvalidInputError, match="algo='mesh' is not accepted"):
        sc.simulate(sc.topology.dgx_a100(1), "broadcast", algorithm="nccl", nbytes=64,
                    algo="mesh")


MACHINES = {
    "dgx_a100(1)": lambda: sc.topology.dgx_a100(1),
    "dgx_h100(2)": lambda: sc.topology.dgx_h100(2),
    "cluster(3x3)": lambda: sc.topology.cluster(3, 3),
    "switch(5)": lambda: sc.topology.switch(5),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather",
                                        "broadcast", "reduce", "all_to_all"])
@pytest.mark.parametrize("params", [{}, {"proto": "LL", "channels": 3},
                                    {"proto": "LL128", "channels": 2}])
def test_every_collective_gives_the_reference_result(machine, collective, params):
    topo = MACHINES[machine]()
    p = topo.nranks
    op = sc.ReduceOp.SUM
    inputs = make_data(p, 5 * p + 3, "int32", full_range=True)
    kwargs = {"root": p - 1} if sc.COLLECTIVES[collective].rooted else {}
    if sc.COLLECTIVES[collective].reduces:
        kwargs["op"] = op
    if collective == "all_to_all" and params.get("proto") == "LL128":
        # NCCL's sends and receives never run LL128 (tests/test_nccl_p2p.py).
        with pytest.raises(sc.InvalidInputError, match="proto='LL128'.*LL or Simple"):
            sc.simulate(topo, collective, algorithm="nccl", data=inputs, **params)
        params = {**params, "proto": "Simple"}
    res = sc.simulate(topo, collective, algorithm="nccl", data=inputs, **kwargs, **params)
    assert res.correct
    assert_outputs_match(res, inputs, op, kwargs.get("root", 0))


@pytest.mark.parametrize("algo", ["ring", "tree"])
@pytest.mark.parametrize("machine", ["dgx_h100(2)", "cluster(3x3)"])
def test_rings_and_trees_across_nodes_give_the_reference_result(algo, machine):
    topo = MACHINES[machine]()
    inputs = make_data(topo.nranks, 1000, "float64")
    for proto in ("LL", "Simple"):
        res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo=algo,
                          proto=proto, channels=4)
        assert res.correct and res.params["algo"] == algo
        assert_outputs_match(res, inputs, sc.ReduceOp.SUM)


@pytest.mark.parametrize("nodes", [3, 4])
def test_tree_channels_put_one_channel_of_each_tree_on_every_nic(nodes):
    # NCCL duplicates each tree pattern (chain and NIC) onto both trees: channel c on
    # tree 0, channel c + n on tree 1 (connectTrees in src/graph/connect.cc). On 8-GPU
    # nodes with 16 channels every NIC then carries one channel of each tree, so the NICs
    # of a node move the same bytes; over all NICs, each of the nodes - 1 edges of each
    # channel's tree carries its part once up and once down: 2 (nodes - 1) n in all.
    topo = sc.topology.dgx_h100(nodes)
    n = 16 * 2**20
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="tree",
                      proto="Simple", channels=16)
    uplinks: dict[int, list[int]] = {}
    for (src, dst), moved in res.link_bytes.items():
        if src.startswith("nic") and dst.startswith("leaf"):
            uplinks.setdefault(int(src[3:]) // 8, []).append(moved)
    assert sorted(uplinks) == list(range(nodes))
    for node, moved in uplinks.items():
        assert len(moved) == 8 and len(set(moved)) == 1, (node, moved)
    assert sum(sum(moved) for moved in uplinks.values()) == 2 * (nodes - 1) * n
    # Channels trimmed below 8 are the first ones, all on tree 0, as in NCCL: tree 0 alone
    # leaves a node's NICs as loaded as the node's place in that one tree says.
    few = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="tree",
                      proto="Simple", channels=8)
    assert sum(v for (src, dst), v in few.link_bytes.items()
               if src.startswith("nic") and dst.startswith("leaf")) == 2 * (nodes - 1) * n


@pytest.mark.parametrize("count", [60_000, 60_001, 5])
def test_nvls_moves_a_gpus_own_block_to_the_switch_and_back_and_the_switch_reduces_right(
        count):
    """NCCL's one-node NVLS all_reduce (``oneNode`` in src/device/all_reduce.h) is a
    reduce_scatter and an all_gather through the switch: each channel's part is cut in
    loops of one 128 KiB chunk per GPU (its head), the last loop's rest in pieces of an
    8th of it rounded up to 16 KiB; the switch reduces a chunk and hands it to its head,
    which stores it back to the multicast group. A GPU so pushes its buffer up, takes
    its own chunks down and hands them back up, and receives every chunk from the
    multicast: n + its chunks each way, (p + 1)/p n when they divide evenly. simcoll
    moved n each way (the round trip left out)."""
    topo = sc.topology.dgx_h100(1)
    inputs = make_data(8, count, "float32")
    # A sum: NVLS does not average (ncclNvlsSupported), test_nccl_selection.py.
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo="nvls",
                      op="sum")
    assert res.correct and res.params["algo"] == "nvls"
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)
    n = inputs[0].nbytes
    # Channel c's part is np.array_split's c-th of the buffer; the kernel's loops of
    # 8 x 32768 floats (128 KiB each), then the rest in pieces of ceil(rest / 8)
    # rounded up to 4096 floats (16 KiB), GPU g taking the g-th
    own = [0] * 8
    for part in np.array_split(np.arange(count), res.params["channels"]):
        loops, rest = divmod(len(part), 8 * 32768)
        for g in range(8):
            own[g] += 4 * 32768 * loops
        last = ((rest + 7) // 8 + 4095) // 4096 * 4096 if rest else 1
        for g, start in enumerate(range(0, rest, last)):
            own[g] += 4 * min(last, rest - start)
    expected = [n + own[g] for g in range(8)]
    assert res.bytes_sent.tolist() == expected and res.bytes_received.tolist() == expected
    for g in range(8):
        assert res.link_bytes[(f"gpu{g}", "nvswitch0")] == n + own[g]
        assert res.link_bytes[("nvswitch0", f"gpu{g}")] == n + own[g]


@pytest.mark.parametrize("algo", ["auto", "nvls", "ring"])
def test_started_nccl_collectives_run_as_at_the_top_level(algo):
    """An NCCL all_reduce of 8 MiB started from rank programs (as training steps start
    them) on a DGX H100: NCCL's tuner picks NVLS, whose NVSwitch program now starts with
    the collective (it was refused, and ``sc.training.step(..., algorithm="nccl")``
    raised on every H100 machine). The run equals the top-level one: time, every
    output, every link's bytes."""
    topo = sc.topology.dgx_h100(1)
    x = [np.arange(2 * 2**20, dtype=np.float32) % 97 * (r + 1) for r in range(8)]

    def program(comm):
        out = yield comm.all_reduce(x[comm.rank], algorithm="nccl", algo=algo)
        return out

    started = sc.run_program(topo, program)
    top = sc.simulate(topo, "all_reduce", algorithm="nccl", data=x, algo=algo)
    assert top.params["algo"] == ("ring" if algo == "ring" else "nvls") and top.correct
    assert started.time == top.time
    assert started.link_bytes == top.link_bytes
    for r in range(8):
        np.testing.assert_array_equal(started.outputs[r], top.outputs[r])


def test_two_groups_run_nvls_on_one_switch_side_by_side():
    """Two tensor-parallel groups of 4 GPUs of one DGX H100 start an NVLS all_reduce each
    at once: the NVSwitch runs one program per group, each seeing its group's GPUs by
    group rank, and every GPU sends its 4 MiB into the switch, takes its quarter of the
    chunks down and hands it back, and gets all 4 MiB from the multicasts: (p + 1)/p n
    up and down, 5 MiB (each channel's 256 KiB is one chunk for each of the 4 heads),
    the sums being each group's."""
    topo = sc.topology.dgx_h100(1)
    x = [np.full(2**20, r + 1, dtype=np.float32) for r in range(8)]

    def program(comm):
        group = comm.group([0, 1, 2, 3] if comm.rank < 4 else [4, 5, 6, 7])
        out = yield group.all_reduce(x[comm.rank], algorithm="nccl", algo="nvls")
        return out

    res = sc.run_program(topo, program)
    for r in range(8):
        np.testing.assert_array_equal(res.outputs[r], np.full(2**20, 10 if r < 4 else 26))
    for r in range(8):
        assert res.link_bytes[(f"gpu{r}", "nvswitch0")] == 5 * 2**20
        assert res.link_bytes[("nvswitch0", f"gpu{r}")] == 5 * 2**20


@pytest.mark.parametrize("members", [[3, 0, 2, 1], [5, 7, 6], [7, 0]])
def test_nvls_on_a_group_of_one_node_in_any_order(members):
    """A group of some of a DGX H100's GPUs, listed in any order, runs NVLS: every
    member gets the group's sum, and the members' links carry (p + 1) n bytes up and
    as many down in all (each pushes n, each block goes down to its owner and back up
    once, and every member receives n from the multicasts), the others' nothing."""
    topo = sc.topology.dgx_h100(1)
    count = 1000
    x = [np.arange(count, dtype=np.float32) * (r + 1) for r in range(8)]

    def program(comm):
        if comm.rank not in members:
            return None
        out = yield comm.group(members).all_reduce(x[comm.rank], algorithm="nccl",
                                                   algo="nvls")
        return out

    res = sc.run_program(topo, program)
    total = np.sum([x[m] for m in members], axis=0)
    for m in members:
        np.testing.assert_array_equal(res.outputs[m], total)
    n, p = 4 * count, len(members)
    up = [res.link_bytes[(f"gpu{g}", "nvswitch0")] for g in range(8)]
    down = [res.link_bytes[("nvswitch0", f"gpu{g}")] for g in range(8)]
    assert sum(up) == sum(down) == (p + 1) * n
    assert all(up[g] == down[g] == 0 for g in range(8) if g not in members)
    assert all(up[g] == down[g] >= n for g in members)


@pytest.mark.parametrize("members", [[0, 1, 3, 2, 8, 9, 10, 11], [15, 3, 7, 11, 2, 10],
                                     [1, 0, 8, 9], [2, 7, 3, 10, 11]])
def test_nvls_tree_on_a_group_that_reorders_a_nodes_gpus(members):
    """The NVSwitch took its GPUs in world order as their local indexes, the GPUs in
    group order: a group listing a node's GPUs in another order got blocks in the wrong
    places (every element a right sum, of another index), or on uneven nodes a
    deadlock. Exact integers: each rank adds its own bit."""
    topo = sc.topology.dgx_h100(2)
    x = {r: np.arange(48000, dtype=np.int64) * 65536 + (1 << r) for r in range(16)}

    def program(comm):
        if comm.rank not in members:
            return None
        group = comm.group(members)
        return (yield group.collective("all_reduce", x[comm.rank], algorithm="nccl",
                                       algo="nvls_tree"))

    res = sc.run_program(topo, program)
    expected = np.arange(48000, dtype=np.int64) * 65536 * len(members) + sum(
        1 << r for r in members)
    for r in members:
        np.testing.assert_array_equal(res.outputs[r], expected)


def busbw(topo, nbytes, **params):
    return sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=nbytes,
                       **params).busbw / 1e9


def test_one_dgx_a100_lands_near_nccl_tests():
    topo = sc.topology.dgx_a100(1)
    # nccl-tests on 8 A100 SXM: about 230 GB/s busbw at 1 GiB (issue 9; benchmarks/
    # nccl_public.py's a100x8_oci measures 230.1), 20-40 us for the smallest sizes.
    assert busbw(topo, 2**30) == pytest.approx(230, rel=0.05)
    small = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=8, dtype="uint8")
    assert 10 * US <= small.time <= 45 * US
    curve = [busbw(topo, 2**k) for k in range(3, 31, 3)]
    assert all(a <= b for a, b in zip(curve, curve[1:])), curve


def test_dgx_h100_nvls_and_rings_land_near_nccl_tests():
    one = sc.topology.dgx_h100(1)
    # NVLS about 475 GB/s busbw at 1 GiB (nccl-tests #290: 465 at 1 GiB, 474 at 4 GiB);
    # a ring alone about 370 GB/s: NCCL's 18 NVLink links x 20.6 GB/s.
    assert busbw(one, 2**30) == pytest.approx(475, rel=0.05)
    assert busbw(one, 2**30, algo="ring") == pytest.approx(370, rel=0.05)
    # Two nodes, one ring per rail: about 390 GB/s (nccl-tests #309, NCCL_ALGO=Ring:
    # 384.5 at 1 GiB, 391.4 at 4 GiB).
    assert busbw(sc.topology.dgx_h100(2), 2**30, algo="ring") == pytest.approx(390, rel=0.05)


def test_the_cost_model_estimate_is_a_lower_bound_shaped_like_the_run():
    # On the reference network the model adds launch, steps and wire bytes; the run
    # pipelines slices, so the model is an estimate: within a factor 2 of the run.
    topo = sc.topology.switch(8, bandwidth=100e9, latency=0.5e-6)
    for n in (8, 2**20, 2**28):
        res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, dtype="uint8")
        t = sc.cost.predict("all_reduce", "nccl", p=8, nbytes=n, alpha=1e-6, beta=1e-11)
        assert 0.5 < t / res.time < 2.0, (n, t, res.time)
        assert math.isfinite(t)


@pytest.mark.parametrize("nodes", [2, 3])
def test_nvls_tree_gives_the_reference_result_across_nodes(nodes):
    topo = sc.topology.dgx_h100(nodes)
    inputs = make_data(topo.nranks, 3001, "float64")
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=inputs, algo="nvls_tree",
                      op="sum")
    assert res.correct and res.params["algo"] == "nvls_tree"
    assert_outputs_match(res, inputs, sc.ReduceOp.SUM)


def test_the_tuner_uses_nvls_tree_across_h100_nodes_for_large_buffers():
    # NVLS-tree's bus bandwidth on 2 nodes: min(NVLS 591, 2 x the node's 8 x 50 GB/s,
    # 16 channels x 57.7) = 591 GB/s against the ring's min(370.8, 400) = 370.8: at
    # 1 GiB it wins (25 + 2 x 20.9 + 1,940 us against the ring's 1.4 x ... + 3,090).
    machine = describe(sc.topology.dgx_h100(2), tuple(range(16)))
    assert choose(machine, "all_reduce", 2**30).algo == "nvls_tree"
    assert choose(machine, "all_reduce", 8).proto == "LL"


def test_nvls_tree_bandwidth_is_capped_per_channel_as_nccl_caps_it():
    # NVLink of 2,000 GB/s and 8 x 200 GB/s NICs (behind 200 GB/s PCIe links) per node:
    # NCCL's NVLS graph has 8 heads at 48 GB/s, Hopper's fastest speed across nodes (9 x
    # 48 is well within 2,000), so a channel's NVLS gives 48 x 0.85 x 7/8 x 2 = 71.4 GB/s
    # and the two nodes 2 x 48, and Hopper's perChMaxNVLSTreeBws for 2 nodes binds:
    # 8 channels x 57.7 = 461.6 GB/s. NCCL's time at 1 GiB: 25 + 2 x 20.9 us (NVLS-tree's
    # NVLink and network latencies, one tree level) + 2^30 bytes at 461.6 x 16 / 30 GB/s
    # (p / 2(p - 1)).
    topo = sc.topology.dgx_h100(2, nvlink_bandwidth=2000e9, nic_bandwidth=200e9,
                                pcie_bandwidth=200e9)
    machine = describe(topo, tuple(range(16)))
    expected = (25 + 2 * 20.9) * US + 2**30 / (461.6e9 * 16 / 30)
    assert predict(machine, "all_reduce", 2**30, "nvls_tree", "Simple", 16) == \
        pytest.approx(expected, rel=1e-9)


def test_refusals_say_why_nvls_cannot_run_there():
    with pytest.raises(sc.InvalidInputError, match=r"algo='nvls_tree' cannot run "
                       r"all_reduce.*\(NVLS-tree runs across nodes only\)"):
        sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl", nbytes=64,
                    algo="nvls_tree")
    for collective in ("all_reduce", "reduce_scatter", "all_gather"):
        with pytest.raises(sc.InvalidInputError, match=r"NVLS across nodes needs collnet=1 "
                           r"and a SHARP fabric\)"):
            sc.simulate(sc.topology.dgx_h100(2), collective, algorithm="nccl",
                        nbytes=1 << 20, algo="nvls")


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_the_chain_cost_model_counts_the_pieces_of_each_channel(collective):
    # 1 MiB on the reference network of 8 GPUs (1 us, 1 GB/s): NCCL's search gives the
    # switch 2 channels and the tuner Simple, so each channel's 512 KiB is one step and
    # does not pipeline: the run is launch 8.4 us + 7 hops of max(1 us, 3.4 us) + 1 MiB
    # (both channels' halves on each link) / 1 GB/s. The model took one pipelined pass
    # (1.08 ms against the run's 7.37 ms).
    from simcoll.testing import alpha_beta_network

    a, b, n = 1e-6, 1e-9, 1 << 20
    res = sc.simulate(alpha_beta_network(8, alpha=a, beta=b), collective, algorithm="nccl",
                      nbytes=n)
    assert (res.params["channels"], res.params["proto"]) == (2, "Simple")
    hand = 8.4e-6 + 7 * (3.4e-6 + n * b)
    assert res.time == pytest.approx(hand, rel=1e-9)
    assert sc.cost.predict(collective, "nccl", p=8, nbytes=n, alpha=a, beta=b) == \
        pytest.approx(hand, rel=1e-9)
    # elsewhere an estimate, within a quarter of the run
    for p, size, beta in [(3, 96 << 20, 1e-11), (17, 16 << 20, 1e-11), (38, 122280, 1e-9)]:
        run = sc.simulate(alpha_beta_network(p, alpha=a, beta=beta), collective,
                          algorithm="nccl", nbytes=size, root=p // 2)
        model = sc.cost.predict(collective, "nccl", p=p, nbytes=size, alpha=a, beta=beta,
                                root=p // 2)
        assert 0.75 < run.time / model < 1.25


def test_a_tree_streams_at_half_a_channels_rate_and_its_leaf_pays_its_first_slice():
    """Two nodes of one GPU (cluster(2, 1), links far faster than the threads): a tree
    all_reduce with LL128 on one channel is the leaf sending its 16 slices of 576,000
    data bytes up and the root sending each back down as it has reduced it. NCCL's split
    tree kernel gives the leaf's up stream part of the channel's threads (runTreeSplit),
    each stream here half of the channel's rate: perChMaxTreeLL128Bws' 20 GB/s on Ampere,
    halved as NCCL runs every graph channel twice, and halved again, 5 GB/s. The leaf
    writes its own data, so even its first slice leaves only once written (its lines
    overlap the link, 614,400 wire bytes at 300 GB/s); the root forwards at the whole
    rate, keeping up. Hand-worked: launch 14 us (tree LL128) + 16 slices at 5 GB/s
    + two network steps of 8.5 us (NCCL's tree LL128 latency, above the route's 6 us)
    + the last slice's wire time. At the whole rate the slices alone took 921.6 us, and
    with a first slice that left at once 113 us less."""
    topo = sc.topology.cluster(2, 1, inter_bandwidth=1e12)
    slice_bytes, slices = 576_000, 16
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=slices * slice_bytes,
                      dtype="uint8", algo="tree", proto="LL128", channels=1)
    expected = (14.0 + 2 * 8.5) * US + slices * slice_bytes / 5e9 \
        + slice_bytes // 120 * 128 / 300e9
    assert res.time == pytest.approx(expected, rel=1e-12)
    assert res.params["arch"] == "ampere"


def test_the_chain_estimate_counts_the_first_piece_its_start_writes():
    """A broadcast of 128 KiB on 2 Volta GPUs (the tuner's LL on 10 channels): the root
    writes each channel's 13,107 bytes at LL's 39 GB/s shared by the channels before the
    lines' last leaves, 3.1 us beyond their wire time at 100 GB/s; the estimate left it
    out (7.9 us against the run's 11.0)."""
    from simcoll.testing import alpha_beta_network

    a, b, n = 1e-6, 1e-11, 128 << 10
    run = sc.simulate(alpha_beta_network(2, alpha=a, beta=b), "broadcast", algorithm="nccl",
                      nbytes=n, arch="volta", root=0)
    assert (run.params["proto"], run.params["channels"]) == ("LL", 10)
    model = sc.cost.predict("broadcast", "nccl", p=2, nbytes=n, alpha=a, beta=b,
                            arch="volta", root=0)
    part = n / 10
    written = part / (39e9 / 10) - 2 * part * b   # LL's 16-byte lines: 2 wire bytes a byte
    assert written > 3e-6 and run.time - model < 1e-3 * run.time
    assert model == pytest.approx(run.time, rel=1e-3)


@pytest.mark.parametrize("collective, proto, p, n, arch, within", [
    # the run's tuner takes Simple for the 8 MiB of output of an all_gather of 1 MiB a
    # rank; the estimate asked the tuner about 1 MiB and priced LL (twice the run)
    ("all_gather", "auto", 8, 1 << 20, "volta", 0.02),
    # LL at 16 MiB on 2 GPUs: the threads' pace (LL's cap per channel) sets the time, not
    # the link; the estimate priced the link alone (the run took 1.26 times as long)
    ("all_reduce", "LL", 2, 16 << 20, "volta", 0.05),
    ("reduce_scatter", "LL", 2, 16 << 20, "volta", 0.05),
])
def test_the_ring_estimate_follows_the_runs_choice_and_its_threads_pace(collective, proto,
                                                                        p, n, arch, within):
    from simcoll.testing import alpha_beta_network

    a, b = 1e-6, 1e-11
    kw = {"arch": arch, **({} if proto == "auto" else {"proto": proto})}
    run = sc.simulate(alpha_beta_network(p, alpha=a, beta=b), collective, algorithm="nccl",
                      nbytes=n, algo="ring", **kw)
    model = sc.cost.predict(collective, "nccl", p=p, nbytes=n, alpha=a, beta=b, algo="ring",
                            **kw)
    assert model == pytest.approx(run.time, rel=within)


def test_a_slowed_link_slows_the_first_slice_its_threads_write():
    """A broadcast of 1,200 bytes of LL128 on one link slowed to 1% (1 GB/s) from the
    start: the root's threads write the slice at 10 GB/s (120 ns) while its 2,048 wire
    bytes (one warp's lines) take 2.048 us on the slowed link, so it arrives 2.048 us
    after its step, as on a link built at 1 GB/s. The write was set against the healthy
    link's 20.48 ns, so the slice waited 99.5 ns more before it left."""
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.0, factor=0.01)])
    slowed = sc.simulate(one_link(), "broadcast", algorithm="nccl", nbytes=1200,
                         dtype="uint8", proto="LL128", channels=1, faults=faults)
    built = sc.simulate(one_link(bandwidth=1e9), "broadcast", algorithm="nccl", nbytes=1200,
                        dtype="uint8", proto="LL128", channels=1)
    expected = (BASE["LL128"] + STEP["LL128"]) * US + max(2048 / 1e9, 1200 / RATE["LL128"])
    assert slowed.time == pytest.approx(expected, rel=1e-12)
    assert built.time == pytest.approx(expected, rel=1e-12)


_MUT_US = 1e-6
# NCCL 2.30.7 (src/graph/tuning.cc), one Ampere node, one channel: ring LL128 launch
# 14.0 us, NVLink step 1.9 us; LL launch 6.6 us; LL128's per-channel cap 20 GB/s halved
# (a running channel moves half of a graph channel's): 10 GB/s; LL's 87.7 GB/s.
_MUT_LL128_BASE, _MUT_LL128_STEP, _MUT_LL128_RATE = 14.0, 1.9, 10e9
_MUT_LL_BASE, _MUT_LL_RATE = 6.6, 87.7e9


def _mut_one_link(bandwidth=100e9, latency=0.5e-6):
    topo = sc.Topology("one link")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=bandwidth, latency=latency, kind="nvlink")
    return topo


def _mut_switch(p=3, bandwidth=100e9, latency=0.25e-6):
    """p GPUs on one NVLink switch: every route two links, 0.5 us, 100 GB/s."""
    topo = sc.Topology("switch")
    switch = topo.add_switch("sw")
    for _ in range(p):
        gpu = topo.add_gpu()
        topo.add_link(gpu, switch, bandwidth=bandwidth, latency=latency, kind="nvlink")
    return topo


@pytest.mark.parametrize("collective, nbytes, own", [
    ("all_gather", 2400, 2400),       # nbytes is each rank's part: its own data
    ("reduce_scatter", 2400, 1200),   # each rank's own block: nbytes / p
])
def test_a_rings_first_slice_of_its_own_data_pays_the_threads_write(collective, nbytes,
                                                                     own):
    """Two GPUs on one 100 GB/s link, LL128, one channel: each rank sends its own block
    (one slice) once, and nothing is passed on (p - 1 = 1 step). The threads write its
    lines at 10 GB/s while they cross the link, so the slice arrives when the slower of
    the two is done: own / 10 GB/s (240 or 120 ns) against own / 120 x 128 wire bytes at
    100 GB/s (25.6 or 12.8 ns). Hand-worked: launch + one step + own / rate. A first
    slice sent as if it were passed on (no origin) costs its wire time only."""
    res = sc.simulate(_mut_one_link(), collective, algorithm="nccl", nbytes=nbytes,
                      dtype="uint8", proto="LL128", channels=1)
    assert res.params["algo"] == "ring" and res.params["arch"] == "ampere"
    expected = (_MUT_LL128_BASE + _MUT_LL128_STEP) * _MUT_US + max(
        own / _MUT_LL128_RATE, own // 120 * 128 / 100e9)
    assert res.time == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize("root", [0, 1, 2])
def test_a_chain_pays_the_threads_write_once_where_its_data_starts(collective, root):
    """Three GPUs on a switch, LL128, one channel, 1200 B (one slice): a chain of two
    hops. Its first rank writes the slice at 10 GB/s while its 2048 wire bytes (one warp's
    lines) cross at 100 GB/s, so it arrives 120 ns + one step (1.9 us, above the route's
    0.5 us) after the launch; the middle rank passes it on (reduces it, for reduce, at an
    infinite rate) as its last line arrives, so the second hop costs a step and the wire
    time only. Hand-worked: 14 + 2 x 1.9 us + 120 ns + 20.48 ns. The chain's start not
    paying the write is 99.52 ns less; the middle rank paying it again, 99.52 ns more."""
    res = sc.simulate(_mut_switch(), collective, algorithm="nccl", nbytes=1200,
                      dtype="uint8", proto="LL128", channels=1, root=root)
    assert res.params["algo"] == "ring" and res.messages == 2
    expected = (_MUT_LL128_BASE + 2 * _MUT_LL128_STEP) * _MUT_US + 1200 / _MUT_LL128_RATE \
        + 2048 / 100e9
    assert res.time == pytest.approx(expected, rel=1e-12)


def test_without_step_latency_the_first_slice_still_overlaps_its_write_and_wire():
    """step_latency_scale=0: no NCCL step latency, so the slice costs the link's 0.5 us
    latency, and the root's threads still write its 1000 B of LL at 87.7 GB/s (11.4 ns)
    while its 2000 wire bytes cross the 100 GB/s link (20 ns): the slower, not the sum.
    Hand-worked: launch 6.6 us + 0.5 us + 20 ns."""
    res = sc.simulate(_mut_one_link(), "broadcast", algorithm="nccl", nbytes=1000,
                      dtype="uint8", proto="LL", channels=1, step_latency_scale=0)
    expected = (_MUT_LL_BASE + 0.5) * _MUT_US + max(2000 / 100e9, 1000 / _MUT_LL_RATE)
    assert res.time == pytest.approx(expected, rel=1e-12)


def test_a_tree_root_passes_a_burst_down_at_the_whole_channel_rate():
    """Two nodes of one GPU (cluster(2, 1), links far faster than the threads), a tree
    all_reduce of 8 LL128 slices of 576,000 B on one channel, the root (rank 0) starting
    2 ms late (``Faults(late=...)``): the leaf has sent all 8 slices up by then (8 fit in
    flight), so the root finds them all waiting. The root, which reduces and sends down in
    one pass, has all of the channel's threads (NCCL's runTreeSplit; perChMaxTreeLL128Bws'
    20 GB/s on Ampere halved as NCCL runs each graph channel twice: 10 GB/s): its threads,
    which start with it, move the 8 waiting slices down one after the other, each in
    576,000 / 10 GB/s = 57.6 us, its lines crossing as they are written. Hand-worked: 2 ms
    + launch 14 us + 8 x 57.6 us + one network step of 8.5 us (tree LL128, above the
    route's latency). (Passing the first slice on at once, as if its lines had come in
    while the root's threads ran, took 55.55 us less: 57.6 us less its wire time.) A root
    at half the channel's rate, as the streams below it have, would take 8 x 57.6 us
    longer."""
    topo = sc.topology.cluster(2, 1, inter_bandwidth=1e12)
    slice_bytes, slices, late = 576_000, 8, 2e-3
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=slices * slice_bytes,
                      dtype="uint8", algo="tree", proto="LL128", channels=1,
                      faults=sc.Faults(late={0: late}))
    assert res.params["arch"] == "ampere"
    expected = late + (14.0 + 8.5) * _MUT_US + slices * slice_bytes / 10e9
    assert res.time == pytest.approx(expected, rel=1e-12)


def test_a_ring_all_reduce_pays_the_write_of_its_own_block_only():
    """Two GPUs on one 100 GB/s link, ring LL128, one channel, 2400 B: each rank sends its
    own block of 1200 B (written at 10 GB/s while its 2048 wire bytes, one warp's lines,
    cross: 120 ns), reduces the block it gets (GPUs that reduce at an infinite rate) and
    passes the sum on as it arrives (its wire time, 20.48 ns; its write was paid where the
    chain starts), two steps in all. Hand-worked: launch 14 us + 2 x 1.9 us + 120 ns +
    20.48 ns."""
    res = sc.simulate(_mut_one_link(), "all_reduce", algorithm="nccl", nbytes=2400,
                      dtype="uint8", algo="ring", proto="LL128", channels=1)
    expected = (_MUT_LL128_BASE + 2 * _MUT_LL128_STEP) * _MUT_US + 1200 / _MUT_LL128_RATE \
        + 2048 / 100e9
    assert res.time == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("collective, p, n, beta, kw, hand", [
    # each rank's 512 KiB is one LL128 slice on one channel: written at 10 GB/s (52.43 us)
    # while its 559,241 wire bytes cross at 100 GB/s, then one step of 1.9 us: the pace
    # held the first slice's write, which the estimate added again (113.3 us)
    ("reduce_scatter", 2, 1 << 20, 1e-11, {"proto": "LL128", "channels": 1},
     (14.0 + 1.9) * US + (1 << 19) / 10e9),
    # 42,104 B of LL on 8 GPUs at 1 GB/s, one channel: a full slice of 32,768 B and a rest
    # of 9,336; the full slice sets the chain's pace over 7 hops of 1 us + its 65,536 wire
    # bytes, then the rest crosses the last hop. The estimate cut two equal pieces
    # (351.5 us against the run's 491.0)
    ("broadcast", 8, 42104, 1e-9, {"proto": "LL", "root": 0},
     6.6 * US + 7 * (US + 65536e-9) + 18672e-9),
])
def test_the_estimates_follow_the_pace_and_the_pieces_of_the_run(collective, p, n, beta, kw,
                                                                 hand):
    from simcoll.testing import alpha_beta_network

    run = sc.simulate(alpha_beta_network(p, alpha=1e-6, beta=beta), collective,
                      algorithm="nccl", nbytes=n, algo="ring", **kw)
    model = sc.cost.predict(collective, "nccl", p=p, nbytes=n, alpha=1e-6, beta=beta,
                            algo="ring", **kw)
    assert run.time == pytest.approx(hand, rel=1e-9)
    assert model == pytest.approx(hand, rel=5e-3)


def test_a_link_down_when_a_slice_is_written_but_back_when_it_leaves_is_no_failure():
    """The one link fails at 0 and is back at 14.5 us; the broadcast's root starts
    writing its LL128 slice at 14 us (after the launch) and it leaves at about 15.1 us,
    on the restored link. Asking for the route's bandwidth while the link was down ended
    the run with a LinkFailureError at 14 us; it runs as on the healthy machine."""
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.0, factor=0.0),
                              sc.LinkFault("gpu0", "gpu1", at=14.5e-6, factor=1.0)])
    res = sc.simulate(one_link(), "broadcast", algorithm="nccl", nbytes=12000, dtype="uint8",
                      proto="LL128", channels=1, faults=faults)
    healthy = sc.simulate(one_link(), "broadcast", algorithm="nccl", nbytes=12000,
                          dtype="uint8", proto="LL128", channels=1)
    assert res.time == pytest.approx(healthy.time, rel=1e-12)
    assert healthy.time == pytest.approx((BASE["LL128"] + STEP["LL128"]) * US
                                         + 12000 / RATE["LL128"], rel=1e-12)


@pytest.mark.parametrize(("nodes", "collective", "params"), [
    (1, "all_reduce", {"algo": "nvls"}),
    (1, "reduce_scatter", {"algo": "nvls"}),
    (2, "all_reduce", {"algo": "nvls_tree"}),
    (2, "all_reduce", {"algo": "nvls", "collnet": 1}),        # NVLS with SHARP across nodes
    (2, "reduce_scatter", {"algo": "nvls", "collnet": 1}),
])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_nvswitch_sums_16_bit_floats_in_float32(nodes, collective, params, dtype):
    """NVLink SHARP sums float16 and bfloat16 in float32 and rounds once
    (``multimem.ld_reduce ... .acc::f32``, NCCL 2.30.7's reduce_kernel.h); the switch
    summed in the element type, one GPU at a time. On node 0: 2048 on GPU 0 and 1 on the
    seven others, 2055 in float32, which rounds to 2056 in float16 and to 2048 in
    bfloat16 (steps of 2 and 16 there); one GPU at a time, 2048 + 1 rounds back to 2048
    each time in both. 256 and seven 1s: 263, to 264 in bfloat16 (steps of 2 there;
    one at a time 256 + 1 rounds back to 256), exact in float16. The other node's GPUs
    hold 0. Then 60000 + 60000 - 60000: inf in float16 one at a time, 60000 in float32.
    Times are the data-free run's."""
    kind = np.dtype(pytest.importorskip("ml_dtypes").bfloat16 if dtype == "bfloat16"
                    else np.float16)
    topo = sc.topology.dgx_h100(nodes, sharp=params.get("collnet") == 1)
    p = 8 * nodes
    for values, expected in (([2048.0] + [1.0] * 7, 2055.0), ([256.0] + [1.0] * 7, 263.0),
                             ([60000.0, 60000.0, -60000.0], 60000.0)):
        data = [np.full(2 * p, values[r] if r < len(values) else 0.0).astype(kind)
                for r in range(p)]
        res = sc.simulate(topo, collective, algorithm="nccl", data=data, **params)
        want = np.asarray(expected, dtype=np.float64).astype(kind)
        for out in res.outputs:
            np.testing.assert_array_equal(out, np.full(out.shape, want))
        free = sc.simulate(topo, collective, algorithm="nccl", nbytes=2 * p * kind.itemsize,
                           dtype=kind, **params)
        assert (res.time, res.link_bytes) == (free.time, free.link_bytes)


def _nccl_cut(count: int, chunk: int, slice_elems: int, slices_per_chunk: int) -> list[int]:
    """NCCL 2.30.7's cut of a channel's part of ``count`` elements, written from its
    kernels: loops of full chunks and a last smaller one (broadcast.h, the trees of
    all_reduce.h), each chunk cut by ``genericOp`` (prims_simple.h) into at most
    SlicePerChunk slices of max(divUp(nelem, 16 SlicePerChunk) 16, sliceSize / 32)."""
    cut = []
    offset = 0
    while offset < count:
        nelem = min(chunk, count - offset)
        size = max(-(-nelem // (16 * slices_per_chunk)) * 16, slice_elems // 32)
        done, slices = 0, 0
        while slices < slices_per_chunk and done < nelem:
            cut.append(min(size, nelem - done))
            done += cut[-1]
            slices += 1
        offset += nelem
    return cut


@pytest.mark.parametrize("count", [1, 100, 8192, 8193, 16384, 16385, 200_000, 262_144,
                                   262_145, 524_288, 600_000, 1_000_003])
@pytest.mark.parametrize("proto", ["Simple", "LL", "LL128"])
def test_a_ring_block_is_cut_as_nccls_kernels_cut_it(count, proto):
    """Full chunks, then the rest; Simple's chunks of a ring are two slices (of 1 MiB:
    262,144 float32), a last chunk halved where a half is at least 1/32 of a slice, LL's
    and LL128's one slice each. Equal slices made a block a few bytes over one slice
    pipeline in halves, faster than a block of one slice."""
    from simcoll.algorithms.nccl.protocols import PROTOCOL
    from simcoll.algorithms.nccl.rings import ring_slices

    protocol = PROTOCOL[proto]
    per = protocol.slice_bytes // 4
    spc = 2 if proto == "Simple" else 1
    got = [s.size for s in ring_slices(np.zeros(count, np.float32), protocol)]
    assert got == _nccl_cut(count, per * spc, per, spc)


@pytest.mark.parametrize(("topo", "algo", "proto", "channels", "sizes"), [
    # one LL slice per channel block at 131,072 bytes; 4 KiB more cut it in two equal
    # halves, which pipelined: 16.53 us, then 14.97
    (sc.topology.ring(4), "ring", "LL", 1, (131072, 135168, 140000, 165120)),
    # a tree's 512 KiB slice per channel at 2 MiB; 2.15 MB was two halves: 219.9, 188.9 us
    (sc.topology.switch(8), "tree", "Simple", 4, (2097152, 2150000, 2200000)),
    (sc.topology.switch(8), "ring", "Simple", 4, (8 << 20, (8 << 20) + 4096, 9 << 20)),
])
def test_a_larger_message_never_takes_less_time_on_one_choice(topo, algo, proto, channels,
                                                              sizes):
    times = [sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo=algo,
                         proto=proto, channels=channels, network="analytical").time
             for n in sizes]
    assert times == sorted(times)


# NCCL's LL128 step: DEFAULT_LL128_BUFFSIZE / NCCL_STEPS = 120 x 640 x 8 x 8 / 8 = 614,400
# bytes of 128-byte lines, each carrying 120 data bytes: 4,800 lines, 576,000 data bytes.
LL128_STEP_DATA = 614_400 // 128 * 120


@pytest.mark.parametrize(("block", "messages", "wire"), [
    (LL128_STEP_DATA, [LL128_STEP_DATA], 614_400),              # one full step
    # a step and a 1-byte rest, which a warp writes as its 16 whole lines, 2,048 bytes
    (LL128_STEP_DATA + 1, [1, LL128_STEP_DATA], 614_400 + 2048),
])
def test_an_ll128_ring_slice_is_one_step_of_data(block, messages, wire):
    """A reduce_scatter of 2 ranks, one channel, LL128: each rank sends its peer's block
    once, cut into slices of one LL128 step of data."""
    res = sc.simulate(one_link(), "reduce_scatter", algorithm="nccl", nbytes=2 * block,
                      dtype="uint8", proto="LL128", channels=1, trace=True)
    sizes = sorted(e.nbytes for e in res.trace if e.kind == "message")
    assert sizes == sorted(messages * 2)
    assert res.link_bytes[("gpu0", "gpu1")] == wire


@pytest.mark.parametrize("collective", ["all_reduce", "broadcast", "reduce_scatter"])
def test_launch_overhead_delays_a_collective_by_exactly_itself(collective):
    """``launch_overhead`` adds its seconds to the launch (Protocol.base): the whole run
    shifts by it, nothing else changes."""
    runs = [sc.simulate(one_link(), collective, algorithm="nccl", nbytes=4096,
                        dtype="uint8", proto="Simple", channels=1, launch_overhead=extra)
            for extra in (0.0, 7e-6)]
    assert runs[1].time - runs[0].time == pytest.approx(7e-6, rel=1e-9)


def test_channel_rings_enter_the_first_node_at_the_channels_gpu():
    """rings.py's rule (as NCCL's ring search spreads channels over a node's GPUs):
    channel c enters node 0 at local GPU c mod G and leaves from the GPU before it; the
    next node is entered on that GPU's rail and walked the other way. Two nodes of two
    GPUs (ranks 0, 1 | 2, 3), hand-walked."""
    assert channel_rings([0, 0, 1, 1], 2) == [[0, 1, 3, 2], [1, 0, 2, 3]]
    assert channel_rings([0, 0, 0, 0], 3) == [[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1]]


@pytest.mark.parametrize(("slices", "expected_us"), [
    # 8 slices fit NCCL's FIFO of 8 steps: all leave at once, one after another on the
    # wire (5.24288 us each at 100 GB/s), the last arriving 100 us after its bytes left.
    (8, 8.4 + 8 * 5.24288 + 100),
    # a 9th waits for the first to arrive (5.24288 + 100 us), then crosses in the same.
    (9, 8.4 + 2 * (5.24288 + 100)),
])
def test_a_broadcast_keeps_at_most_8_slices_in_flight(slices, expected_us):
    """Broadcast slices are one Simple step (512 KiB; BROADCAST_SLICESTEPS = 1) and a
    connection holds NCCL_STEPS = 8 in flight. A link of 100 us latency (above the 3.4 us
    NVLink step, which it so replaces) makes the window show."""
    res = sc.simulate(one_link(latency=100e-6), "broadcast", algorithm="nccl",
                      nbytes=slices * 512 * 1024, dtype="uint8", proto="Simple", channels=1)
    assert res.time == pytest.approx(expected_us * 1e-6, rel=1e-9)


@pytest.mark.parametrize(("proto", "expected_us"), [
    # baseLat[TREE] + one step up and one down at hwLat[NVLINK][TREE] (not the ring's
    # 3.4 / 1.9 us), each above the link's 0.5 us; the bytes (8) take nanoseconds, but
    # LL128's 8 bytes are a warp's 2,048 on the wire: 20.48 ns at 100 GB/s each way
    ("Simple", 8.4 + 2 * 4.0),
    ("LL128", 14.0 + 2 * 1.25 + 2 * 2048 / 100e3),
    ("LL", 6.8 + 2 * 0.6),
])
def test_a_tree_inside_a_node_pays_the_trees_nvlink_step(proto, expected_us):
    res = sc.simulate(one_link(), "all_reduce", algorithm="nccl", nbytes=8, dtype="uint8",
                      algo="tree", proto=proto, channels=1)
    assert res.time == pytest.approx(expected_us * 1e-6, abs=5e-9)


def _nine_ll128_slices_down_a_line(last_latency: float) -> sc.Result:
    """Broadcast of 9 one-step LL128 slices on one channel from the first of three GPUs
    in a line (100 GB/s; 0.5 us, then ``last_latency`` to the last)."""
    topo = sc.Topology("line")
    a, b, c = topo.add_gpu(), topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=100e9, latency=0.5e-6, kind="nvlink")
    topo.add_link(b, c, bandwidth=100e9, latency=last_latency, kind="nvlink")
    return sc.simulate(topo, "broadcast", algorithm="nccl", nbytes=9 * 576_000,
                       dtype="uint8", proto="LL128", channels=1, root=0)


def test_a_passed_on_slice_waits_for_its_slot_before_its_lines_are_written():
    """Three GPUs in a line (100 GB/s; 0.5 us, then 600 us to the last), LL128 broadcast
    of 9 one-step slices (576,000 B, P = 57.6 us to write at 10 GB/s, 614,400 wire bytes:
    w = 6.144 us) on one channel. The middle GPU gets slice k at 14 + (k + 1) P + 1.9
    us and passes it on as its lines come in; slice 0 reaches the end at 14 + P + 1.9 +
    w + 600 = 679.644 us, and only then is the slot free for slice 8 (in at 534.3 us):
    its threads write it from 679.644 us, its last line leaving P - w later and arriving
    w + 600 us after that: 1337.244 us. (Taken as written while its lines came in,
    before its slot was free, it arrived 51.456 us sooner.)"""
    res = _nine_ll128_slices_down_a_line(600e-6)
    first = 14.0 + 57.6 + 1.9 + 6.144 + 600
    assert first == pytest.approx(679.644)
    assert res.time == pytest.approx((first + 57.6 + 600) * US, rel=1e-12)


def test_a_slot_freed_while_a_slices_lines_come_in_is_written_from_then():
    """As above with 454.6 us to the last GPU: slice 0 reaches it at 14 + 57.6 + 1.9 +
    6.144 + 454.6 = 534.244 us, while slice 8's lines are coming in to the middle GPU
    (from 476.7 us, the last at 534.3 us): its threads write it into the slot from
    534.244 us, and it arrives P + 454.6 us later, 1046.444 us. (Taken as written while
    its lines came in, because the slot was free by the time the last one came, it
    arrived at 995.044 us; 0.1 us more latency then cost 51.6 us.)"""
    res = _nine_ll128_slices_down_a_line(454.6e-6)
    freed = 14.0 + 57.6 + 1.9 + 6.144 + 454.6
    assert freed == pytest.approx(534.244)
    assert res.time == pytest.approx((freed + 57.6 + 454.6) * US, rel=1e-12)
