"""GPUs with several NICs: NCCL binds each channel to one NIC, so the channels that leave
a node from one GPU spread over its NICs (a node of 8 A100 with 16 x 100 Gb/s ports, as
on Oracle Cloud's BM.GPU4.8). Before, every route took the GPU's first NIC and half the
ports idled. Bytes and bandwidths worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.nics import chain_lanes, nics_of

GBS = 1e9
NIC = 12.5 * GBS           # 100 Gb/s


def roce(nics: int = 16) -> sc.Topology:
    return sc.topology.dgx_a100(2, nics_per_node=nics, nic_bandwidth=NIC)


def test_a_gpus_nearest_nics():
    assert nics_of(roce(16), "gpu0") == ("nic0", "nic1")
    assert nics_of(roce(16), "gpu9") == ("nic18", "nic19")   # node 1, local GPU 1
    assert nics_of(roce(8), "gpu3") == ("nic3",)
    shared = roce(4)                                          # 2 GPUs per PCIe switch
    assert nics_of(shared, "gpu0") == nics_of(shared, "gpu1") == ("nic0",)


def test_the_tuner_counts_every_nic():
    # Each GPU reaches the next node through its two 12.5 GB/s NICs, both behind its
    # own 24 GB/s PCIe link (NCCL's Gen4 x16): 24 GB/s per GPU, 192 GB/s a node, bound
    # by the 8 PCIe links. With one NIC per GPU, 8 x 12.5 = 100 GB/s.
    machine = describe(roce(16), tuple(range(16)))
    assert machine.inter_bw == pytest.approx(8 * 24 * GBS, rel=1e-12)
    assert machine.rails == 8
    assert describe(roce(8), tuple(range(16))).inter_bw == pytest.approx(8 * NIC, rel=1e-12)


def test_ring_channels_spread_over_every_nic():
    """16 channels of a ring all_reduce of 1 GiB with Simple (no framing) over 16 GPUs:
    channel c carries parts of n / (16 x 16) = 4 MiB, 2 x 15 of them over every hop of
    its ring, and leaves each node once, through NIC c // 8 of its exit GPU. So each of
    a node's 16 NICs carries one channel, 30 x 4 MiB, and each GPU's PCIe link two."""
    topo = roce(16)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 30, algo="ring",
                      proto="Simple", channels=16)
    one_channel = 30 * (4 << 20)
    ports = [(f"nic{i}", f"leaf{i % 16}") for i in range(32)]
    assert [res.link_bytes[port] for port in ports] == [one_channel] * 32
    for node in range(2):
        for gpu in range(8):
            g = 8 * node + gpu
            assert res.link_bytes[(f"gpu{g}", f"pcie{node}_{gpu}")] == 2 * one_channel
    # Time: every GPU pushes 2 x 120 MiB through its 24 GB/s PCIe link, which bounds the
    # run at about 192 GB/s busbw; one NIC per GPU gave at most 100.
    assert 180 * GBS < res.busbw <= 192 * GBS
    single = sc.simulate(roce(8), "all_reduce", algorithm="nccl", nbytes=1 << 30,
                         algo="ring", proto="Simple", channels=16)
    assert single.busbw <= 100 * GBS


@pytest.mark.parametrize("channels", [4, 6, 10, 12])
def test_ring_channels_take_nics_shared_by_gpus_in_turn(channels):
    """Two DGX H100 with 2 NICs a node, GPUs 0-3 on the first, 4-7 on the second: the
    node's outgoing traffic of a ring all_reduce of n = 60 MiB, 2 x 15/16 n over every
    crossing, takes both NICs evenly whatever the channel count, as NCCL's channels take
    a node's NICs in turn (12 channels, collnet=1's count there, put 8 on the first NIC
    and 4 on the second, and ran 33% slower than 8). NCCL cuts 60 MiB evenly over 4, 6,
    8, 10 and 12 channels: 3,840 cells of 16 KiB."""
    topo = sc.topology.dgx_h100(2, nics_per_node=2)
    n = 60 << 20
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="ring",
                      proto="Simple", channels=channels)
    even = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="ring",
                       proto="Simple", channels=8)
    uplinks = [v for (a, b), v in res.link_bytes.items()
               if a.startswith("nic") and b.startswith("leaf")]
    assert len(uplinks) == 4
    for carried in uplinks:
        assert abs(carried - 15 * n // 16) <= 4 * channels
    assert res.time == pytest.approx(even.time, rel=1e-9)


def test_tree_channels_spread_over_every_nic_and_reduce_right():
    topo = roce(16)
    rng = np.random.default_rng(7)
    # 256 KiB of float64: 16 cells of 16 KiB, one on each of the 16 channels (4096
    # floats, 2 cells, ran on 2 channels)
    data = [rng.standard_normal(32768) for _ in range(16)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, algo="tree",
                      proto="Simple", channels=16)
    assert res.correct
    np.testing.assert_allclose(res.outputs[5], np.sum(data, axis=0), rtol=0, atol=1e-12)
    used = [i for i in range(32) if res.link_bytes[(f"nic{i}", f"leaf{i % 16}")] > 0]
    assert used == list(range(32))


@pytest.mark.parametrize("channels", [2, 4, 8])
def test_tree_channels_take_nics_shared_by_gpus_in_turn(channels):
    """Two DGX H100 with 2 NICs a node, GPUs 0-3 on the first, 4-7 on the second: the
    search's 4 tree channels start their chains at GPUs 0, 4, 1 and 5, the next NIC's
    GPU each, as NCCL's search gives each channel the next NIC (they started at GPUs 0 -
    3, all behind the first NIC, which carried every byte at twice the time)."""
    topo = sc.topology.dgx_h100(2, nics_per_node=2)
    rng = np.random.default_rng(3)
    data = [rng.standard_normal(1 << 16) for _ in range(16)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, algo="tree",
                      proto="Simple", channels=channels)
    assert res.correct
    np.testing.assert_allclose(res.outputs[11], np.sum(data, axis=0), rtol=0, atol=1e-12)
    for direction in [lambda a, b: a.startswith("nic") and b.startswith("leaf"),
                      lambda a, b: a.startswith("leaf") and b.startswith("nic")]:
        carried = [v for (a, b), v in res.link_bytes.items() if direction(a, b)]
        assert len(carried) == 4 and min(carried) == max(carried) > 0


@pytest.mark.parametrize("algo", ["ring", "tree"])
def test_started_runs_bind_the_same_nics(algo):
    """Started from rank programs, a collective binds its channels to the NICs a
    top-level run binds them to: same time, same bytes on every link."""
    topo = roce(16)
    x = [np.arange(1 << 16, dtype=np.float32) * (r + 1) for r in range(16)]

    def program(comm):
        out = yield comm.collective("all_reduce", x[comm.rank], algorithm="nccl", algo=algo,
                                    proto="Simple", channels=16)
        return out

    started = sc.run_program(topo, program)
    top = sc.simulate(topo, "all_reduce", algorithm="nccl", data=x, algo=algo,
                      proto="Simple", channels=16)
    assert top.correct and started.time == top.time
    assert started.link_bytes == top.link_bytes
    assert all(top.link_bytes[(f"nic{i}", f"leaf{i % 16}")] > 0 for i in range(32))


def test_nvls_tree_heads_take_their_nics_in_turn():
    # Two DGX H100 with two 200 Gb/s NICs per GPU: every NVLS channel runs on all 8
    # heads of a node, channel c on NIC c mod 2 of each, so 16 channels use all 32 NICs.
    topo = sc.topology.dgx_h100(2, nics_per_node=16, nic_bandwidth=25 * GBS)
    rng = np.random.default_rng(3)
    data = [rng.standard_normal(1 << 14) for _ in range(16)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, algo="nvls_tree")
    assert res.correct
    assert res.params["channels"] == 16
    used = [i for i in range(32) if res.link_bytes[(f"nic{i}", f"leaf{i % 16}")] > 0]
    assert used == list(range(32))


def test_all_to_all_parts_take_a_gpus_nics_in_turn():
    """all_to_all of 256 MiB per rank on 2 x 8 A100 with 16 ports a node: each rank sends
    16 MiB to each of the 8 GPUs of the other node, cut into NCCL's p2p parts (2 here,
    with Simple) whose channels take the GPU's two NICs in turn
    (``ncclTopoGetLocalNet``): 8 x 8 MiB = 64 MiB through each NIC, where one NIC per
    GPU would carry all 128. The outputs are numpy's."""
    topo = roce(16)
    res = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=256 << 20)
    assert (res.params["proto"], res.params["channels"]) == ("Simple", 2)
    ports = [res.link_bytes[(f"nic{i}", f"leaf{i % 16}")] for i in range(32)]
    assert ports == [64 << 20] * 32
    single = sc.simulate(roce(8), "all_to_all", algorithm="nccl", nbytes=256 << 20)
    assert [single.link_bytes[(f"nic{i}", f"leaf{i % 8}")] for i in range(16)] == \
        [128 << 20] * 16
    assert res.time < 0.55 * single.time
    rng = np.random.default_rng(11)
    data = [rng.standard_normal(16 * 1001) for _ in range(16)]
    checked = sc.simulate(topo, "all_to_all", algorithm="nccl", data=data)
    assert checked.correct


def shared_nics(nics: int, gpus: int, nodes: int = 2) -> sc.Topology:
    """``nodes`` nodes of ``gpus`` GPUs on one PCIe switch each, with ``nics`` 12.5 GB/s
    NICs on that switch: every GPU of a node has the same nearest NICs."""
    topo = sc.Topology(f"{gpus} GPUs sharing {nics} NICs")
    core = topo.add_switch("core")
    for node in range(nodes):
        switch = topo.add_switch(f"pcie{node}")
        for _ in range(gpus):
            topo.add_link(topo.add_gpu(node=node), switch, bandwidth=24 * GBS,
                          latency=1e-6, kind="pcie")
        for k in range(nics):
            nic = topo.add_nic(f"nic{node}_{k}")
            topo.add_link(switch, nic, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
            topo.add_link(nic, core, bandwidth=NIC, latency=2e-6, kind="ib")
    return topo


@pytest.mark.parametrize(("nics", "gpus", "expected"), [
    # NCCL's ncclTopoGetLocalNet: ceil(n / G) NICs each, from the GPU's place among the
    # G, its bits mirrored where n is a power of two.
    (2, 4, [("nic0_0",), ("nic0_1",), ("nic0_0",), ("nic0_1",)]),
    (4, 2, [("nic0_0", "nic0_1"), ("nic0_2", "nic0_3")]),
    (3, 2, [("nic0_0", "nic0_1"), ("nic0_1", "nic0_2")]),
])
def test_gpus_sharing_nics_take_nccls_share(nics, gpus, expected):
    topo = shared_nics(nics, gpus)
    assert [nics_of(topo, f"gpu{g}") for g in range(gpus)] == expected


def test_gpus_sharing_two_nics_spread_a_ring_over_both():
    """4 GPUs of a node on one PCIe switch with 2 NICs: GPUs 0 and 2 leave through the
    first, 1 and 3 through the second, so a ring's 16 channels (4 leaving from each GPU)
    split evenly; the shortest routes alone all took the first NIC. The tuner counts
    both: 25 GB/s a node (12.5 before: one NIC each way)."""
    topo = shared_nics(2, 4)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=64 << 20, algo="ring",
                      proto="Simple", channels=16)
    first, second = (res.link_bytes[(f"nic0_{k}", "core")] for k in (0, 1))
    assert first == second > 0
    # And each connection enters the next node through its receiving GPU's NIC, where
    # the shortest path down from the core would take the first NIC for all.
    down = [res.link_bytes[("core", f"nic1_{k}")] for k in (0, 1)]
    assert down == [first, first]
    assert describe(topo, tuple(range(8))).inter_bw == pytest.approx(2 * NIC, rel=1e-12)


def gpu_pairs_with_two_nics(hub: str, sharp: bool = False) -> sc.Topology:
    """2 nodes of 2 GPUs on NVLink, each GPU and two 12.5 GB/s NICs on the node's ``hub``:
    its CPU ("host": NCCL's PHB path, no NIC shares a PCIe switch with a GPU) or a PCIe
    switch ("switch"); every NIC on one network switch, which reduces (SHARP) with
    ``sharp``. GPU 0 of a node takes the first NIC, GPU 1 the second."""
    topo = sc.Topology(f"2 GPUs sharing 2 NICs on a {hub}")
    core = topo.add_switch("core", reduce_bandwidth=1e12 if sharp else None)
    for node in range(2):
        nvswitch = topo.add_switch(f"nvswitch{node}")
        middle = topo.add_host(f"cpu{node}") if hub == "host" else topo.add_switch(f"pcie{node}")
        for _ in range(2):
            gpu = topo.add_gpu(node=node)
            topo.add_link(gpu, nvswitch, bandwidth=200 * GBS, latency=1e-6, kind="nvlink")
            topo.add_link(gpu, middle, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
        for k in range(2):
            nic = topo.add_nic(f"nic{node}_{k}")
            topo.add_link(middle, nic, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
            topo.add_link(nic, core, bandwidth=NIC, latency=2e-6, kind="ib")
    return topo


def test_nics_behind_the_cpu_are_shared_too():
    """With no NIC behind a PCIe switch of its own, a GPU's nearest NICs are those on its
    CPU: two GPUs share two, one each (NCCL's ncclTopoGetLocalNet), and a ring's
    channels leave through both, evenly, where the shortest routes all took the first."""
    topo = gpu_pairs_with_two_nics("host")
    assert [nics_of(topo, f"gpu{g}") for g in range(4)] == [
        ("nic0_0",), ("nic0_1",), ("nic1_0",), ("nic1_1",)]
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=64 << 20, algo="ring",
                      proto="Simple", channels=16)
    up = [res.link_bytes[(f"nic0_{k}", "core")] for k in (0, 1)]
    down = [res.link_bytes[("core", f"nic1_{k}")] for k in (0, 1)]
    assert up[0] == up[1] == down[0] == down[1] > 0


@pytest.mark.parametrize(("collective", "sent"), [
    ("reduce_scatter", 3 * (16 << 20)),   # (p - 1) blocks of n / p each
    ("all_gather", 3 * (64 << 20)),       # its n to each of the p - 1 others
])
def test_pat_channels_take_a_gpus_nics_in_turn(collective, sent):
    """PAT on 4 nodes of one GPU with two 12.5 GB/s NICs each, 64 MiB per rank (Simple,
    4 channels: NCCL's search finds one at 12 GB/s through each NIC, not doubled below 25
    GB/s, and runs each twice): channel c leaves and enters through NIC c mod 2 at both
    ends, so each
    NIC carries half of what its GPU sends, and half of what it receives, and the run
    takes about half as long as on one NIC; the shortest routes all took the first."""
    res = sc.simulate(shared_nics(2, 1, nodes=4), collective, algorithm="nccl",
                      nbytes=64 << 20, algo="pat")
    assert (res.params["proto"], res.params["channels"]) == ("Simple", 4)
    for node in range(4):
        up = [res.link_bytes[(f"nic{node}_{k}", "core")] for k in (0, 1)]
        down = [res.link_bytes[("core", f"nic{node}_{k}")] for k in (0, 1)]
        assert up == down == [sent // 2] * 2
    single = sc.simulate(shared_nics(1, 1, nodes=4), collective, algorithm="nccl",
                         nbytes=64 << 20, algo="pat", channels=4)  # as many as above
    assert res.busbw <= 2 * NIC < single.busbw * 2 * 1.1
    assert res.busbw > 1.8 * single.busbw


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_pat_over_two_nics_computes_what_numpy_does(collective):
    rng = np.random.default_rng(11)
    # enough for NCCL to cut it over more than one channel (3,000 floats took one)
    data = [rng.standard_normal(32768) for _ in range(4)]
    res = sc.simulate(shared_nics(2, 1, nodes=4), collective, algorithm="nccl", data=data,
                      algo="pat")
    assert res.correct
    total = np.sum(data, axis=0)
    for r in range(4):
        expected = (np.array_split(total, 4)[r] if collective == "reduce_scatter"
                    else np.concatenate(data))
        np.testing.assert_allclose(res.outputs[r], expected, rtol=0, atol=1e-12)
    assert all(res.link_bytes[(f"nic0_{k}", "core")] > 0 for k in (0, 1))


@pytest.mark.parametrize(("topo", "expected"), [
    # One NIC per GPU: local GPU c mod 8 heads channel c, on its NIC.
    (sc.topology.dgx_h100(2), [(c % 8, 0) for c in range(16)]),
    # Two NICs per GPU: NCCL lists GPU 0's two, then GPU 1's, ...; channel c starts at
    # the c-th, whose local GPU heads it.
    (roce(16), [(c // 2, c % 2) for c in range(16)]),
    # Two GPUs share each NIC: a NIC's local GPU is the first to take it (GPU 0 of 0
    # and 1), so only GPUs 0, 2, 4, 6 head chains.
    (roce(4), [(2 * (c % 4), 0) for c in range(16)]),
])
def test_collnet_chain_heads_follow_nccls_list_of_nics(topo, expected):
    assert chain_lanes(topo, list(range(8)), 16) == expected


def sharp_dgx_h100_two_nics_per_gpu() -> sc.Topology:
    return sc.topology.dgx_h100(2, sharp=True, nics_per_node=16, nic_bandwidth=25 * GBS)


def test_collnet_chain_channels_use_every_nic():
    """CollNet Chain on 2 DGX H100 with two 200 Gb/s NICs per GPU and SHARP: NCCL's
    search gives 32 channels (16 at 24 GB/s, one per NIC, doubled), channel c on the
    (c mod 16)-th NIC of a node's list; each carries n / 32 up through its head's NIC and
    back down through it, so every one of the 32 NICs carries two channels, 16 MiB of a
    256 MiB all_reduce, each way (the shortest routes used each GPU's first NIC only: 16
    of them, 32 MiB each)."""
    res = sc.simulate(sharp_dgx_h100_two_nics_per_gpu(), "all_reduce", algorithm="nccl",
                      nbytes=256 << 20, algo="collnet_chain", collnet=1)
    assert res.params["channels"] == 32
    up = [res.link_bytes[(f"nic{i}", f"leaf{i % 16}")] for i in range(32)]
    down = [res.link_bytes[(f"leaf{i % 16}", f"nic{i}")] for i in range(32)]
    assert up == down == [16 << 20] * 32


def test_collnet_chain_over_every_nic_computes_what_numpy_does():
    rng = np.random.default_rng(5)
    data = [rng.standard_normal(3 << 12) for _ in range(16)]
    res = sc.simulate(sharp_dgx_h100_two_nics_per_gpu(), "all_reduce", algorithm="nccl",
                      data=data, algo="collnet_chain", collnet=1, channels=16)
    assert res.correct
    np.testing.assert_allclose(res.outputs[11], np.sum(data, axis=0), rtol=0, atol=1e-12)
    assert all(res.link_bytes[(f"nic{i}", f"leaf{i % 16}")] > 0 for i in range(32))


@pytest.mark.parametrize("algo", ["collnet_direct", "collnet_chain"])
def test_collnet_heads_sharing_nics_take_one_each_both_ways(algo):
    """Direct's heads (every GPU, on its first NIC) and Chain's (channel c: GPU c mod 2
    here, NCCL's local GPU of the c-th NIC) reach the SHARP switch through their own
    NIC, and it reaches them back through it (a multicast bound per owner): each NIC
    carries n / 2 of a 64 MiB all_reduce each way (to a float: 6 channels, NCCL's 4 and
    half as many again with collnet=1, do not cut n evenly), where the shortest routes
    put all of n on the first. So the run takes about n / 2 over 12.5 GB/s, not n."""
    n, topo = 64 << 20, gpu_pairs_with_two_nics("switch", sharp=True)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo=algo, collnet=1)
    assert res.params["channels"] == 6
    for node in range(2):
        for k in range(2):
            assert abs(res.link_bytes[(f"nic{node}_{k}", "core")] - n // 2) <= 6 * 4
            assert abs(res.link_bytes[("core", f"nic{node}_{k}")] - n // 2) <= 6 * 4
    assert n / 2 / NIC < res.time < 0.6 * n / NIC
    rng = np.random.default_rng(9)
    data = [rng.standard_normal(5000) for _ in range(4)]
    checked = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, algo=algo,
                          collnet=1)
    assert checked.correct
    np.testing.assert_allclose(checked.outputs[2], np.sum(data, axis=0), rtol=0, atol=1e-12)


def test_all_to_all_keeps_to_the_peers_rail_through_a_local_gpu_as_pxn_does():
    """2 x 8 A100 with two 100G NICs per GPU, rail k on leaf k: a send to a GPU of the other
    node leaves through the NICs of the local GPU with the peer's device index, reached
    over NVLink (NCCL's PXN, on by default), so no byte crosses the spine. It left
    through the sender's own NICs: 7 of every 8 remote blocks (112 MiB) crossed the spine,
    and at oversubscription 16 the run took 492 us instead of 372. By hand, of 16 blocks
    of 1 MiB a GPU sends 7 to its node's GPUs and 7 to the proxies of its cross-rail
    peers over NVLink: 14 MiB into the NVSwitch each."""
    n, block = 16 << 20, 1 << 20
    times = []
    for oversubscription in (1, 16):
        topo = sc.topology.dgx_a100(2, nics_per_node=16, nic_bandwidth=100 * sc.Gbps,
                                    oversubscription=oversubscription)
        res = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=n)
        assert not [key for key, b in res.link_bytes.items() if "spine" in key and b]
        assert [res.link_bytes[(f"gpu{g}", f"nvswitch{g // 8}")] for g in range(16)] == \
            [14 * block] * 16
        times.append(res.time)
    assert times[0] == times[1]


@pytest.mark.parametrize(("members", "spine", "own_nic"), [
    # gpu0 and gpu9 (device 1 of node 1): the proxies gpu1 and gpu8 are outside the
    # communicator, so each send leaves through its sender's own NICs (rails 0-1 and
    # 2-3) and crosses the spine: a block of 16 KiB each way; gpu0's leaves on its PCIe
    ([0, 9], 2 * 16384, 16384),
    # gpu1 a member: 0 -> 9 goes over NVLink to it and out on its rail, gpu9's, and
    # nothing leaves gpu0 for its own NICs; 9 -> 0 still has no proxy (gpu8 is not a
    # member) and crosses the spine
    ([0, 1, 9], 16384, 0),
])
def test_pxn_takes_only_a_gpu_of_the_communicator(members, spine, own_nic):
    topo = sc.topology.dgx_a100(2, nics_per_node=16, nic_bandwidth=100 * sc.Gbps)
    x = {r: np.full(len(members) * 4096, r, dtype=np.float32) for r in members}

    def program(comm):
        if comm.rank not in members:
            return None
        out = yield comm.group(members).all_to_all(x[comm.rank], algorithm="nccl")
        return out

    res = sc.run_program(topo, program)
    assert sum(b for (u, _), b in res.link_bytes.items() if u == "spine") == spine
    assert res.link_bytes[("gpu0", "pcie0_0")] == own_nic
    for r in members:
        np.testing.assert_array_equal(res.outputs[r], np.concatenate(
            [np.full(4096, m, dtype=np.float32) for m in members]))


def test_pxn_needs_nvlink_to_the_proxy():
    """Two nodes of two GPUs joined by PCIe through a host bridge only, each GPU with two
    NICs of its own on rails 2g and 2g + 1: NCCL's PXN takes a proxy only over NVLink
    (``PATH_NVL``), so gpu0's send to the other node's GPU 1 leaves through gpu0's own
    NICs and crosses the spine (a block of 16 KiB; the same the other way)."""
    topo = sc.Topology("pcie rails")
    spine = topo.add_switch("spine")
    leaves = [topo.add_switch(f"leaf{k}") for k in range(4)]
    for leaf in leaves:
        topo.add_link(leaf, spine, bandwidth=NIC, latency=1e-6, kind="ib")
    for node in range(2):
        bridge = topo.add_switch(f"bridge{node}")
        for g in range(2):
            switch = topo.add_switch(f"pcie{node}_{g}")
            topo.add_link(topo.add_gpu(node=node), switch, bandwidth=24 * GBS, latency=1e-6,
                          kind="pcie")
            topo.add_link(switch, bridge, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
            for k in (2 * g, 2 * g + 1):
                nic = topo.add_nic(f"nic{node}_{k}")
                topo.add_link(switch, nic, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
                topo.add_link(nic, leaves[k], bandwidth=NIC, latency=1e-6, kind="ib")
    res = sc.simulate(topo, "all_to_all", algorithm="nccl", nbytes=4 * 16384)
    assert sum(b for (u, _), b in res.link_bytes.items() if u == "spine") == 4 * 16384


def _mut_rails(gpus_per_node, nics=None, kinds=None):
    """Nodes of GPUs joined by an NVSwitch (``kinds[g]``: the kind of GPU g's link to it,
    "nvlink" by default), each GPU g with a PCIe switch of its own holding its ``nics[g]``
    NICs (2 by default), NIC k of a node on rail k (leaf k), the leaves under one spine;
    the PCIe switches of a node meet at a host bridge. All links 1 us."""
    most = max(gpus_per_node)
    nics = nics or [2] * most
    kinds = kinds or ["nvlink"] * most
    firsts = [sum(nics[:g]) for g in range(most)]
    topo = sc.Topology("mut rails")
    spine = topo.add_switch("spine")
    leaves = [topo.add_switch(f"leaf{k}") for k in range(sum(nics))]
    for leaf in leaves:
        topo.add_link(leaf, spine, bandwidth=NIC, latency=1e-6, kind="ib")
    for node, count in enumerate(gpus_per_node):
        nvswitch = topo.add_switch(f"nvsw{node}")
        bridge = topo.add_switch(f"bridge{node}")
        for g in range(count):
            gpu = topo.add_gpu(node=node)
            topo.add_link(gpu, nvswitch, bandwidth=100 * GBS, latency=1e-6, kind=kinds[g])
            pcie = topo.add_switch(f"pcie{node}_{g}")
            topo.add_link(gpu, pcie, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
            topo.add_link(pcie, bridge, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
            for k in range(firsts[g], firsts[g] + nics[g]):
                nic = topo.add_nic(f"nic{node}_{k}")
                topo.add_link(pcie, nic, bandwidth=24 * GBS, latency=1e-6, kind="pcie")
                topo.add_link(nic, leaves[k], bandwidth=NIC, latency=1e-6, kind="ib")
    return topo


def _mut_spine_bytes(res):
    return sum(b for (u, _), b in res.link_bytes.items() if u == "spine")


def test_mut_pxn_takes_no_gpu_for_a_device_index_the_senders_node_lacks():
    """Node 0 has 2 GPUs (gpu0, gpu1), node 1 has 3 (gpu2, gpu3, gpu4: device indices 0-2).
    NCCL's ncclTopoGetNetDev looks up the local rank of the peer's device
    (ncclTopoDevToRank) and, finding none, keeps the sender's own NIC: a send to gpu4
    leaves through the sender's own NICs (rails 0-1 or 2-3, not gpu4's 4-5) and crosses
    the spine. all_to_all of 16 KiB blocks, by hand: gpu1 sends to gpu3 (its own index)
    and gpu4 (no proxy) on its own PCIe link, and carries gpu0's send to gpu3 (index 1):
    3 x 16 KiB; gpu0 likewise to gpu2, gpu4 and gpu1's send to gpu2; the spine carries
    gpu0 -> gpu4 and gpu1 -> gpu4 (node 1's GPUs all have a proxy on node 0)."""
    res = sc.simulate(_mut_rails([2, 3]), "all_to_all", algorithm="nccl", nbytes=5 * 16384)
    assert res.link_bytes[("gpu0", "pcie0_0")] == 3 * 16384
    assert res.link_bytes[("gpu1", "pcie0_1")] == 3 * 16384
    assert _mut_spine_bytes(res) == 2 * 16384


@pytest.mark.parametrize(("kinds", "spine"), [
    (["nvlink", "nvlink"], 0),
    (["nvswitch", "nvswitch"], 0),   # an NVSwitch link is NVLink to NCCL (PATH_NVL)
    # gpu0 -nvlink- nvsw -pcie- gpu1: the path between them is not NVLink on every hop
    # (NCCL's path type is its worst hop's), so no proxy either way: each of the 4
    # cross-rail sends (16 KiB) crosses the spine
    (["nvlink", "pcie"], 4 * 16384),
    (["pcie", "nvlink"], 4 * 16384),
])
def test_mut_pxn_needs_nvlink_on_every_hop_to_the_proxy(kinds, spine):
    res = sc.simulate(_mut_rails([2, 2], kinds=kinds), "all_to_all", algorithm="nccl",
                      nbytes=4 * 16384)
    assert _mut_spine_bytes(res) == spine


def test_mut_a_send_through_a_proxy_uses_the_proxys_nics():
    """GPU 0 of each node has 2 NICs (rails 0-1), GPU 1 has 4 (rails 2-5); all_to_all of
    16 KiB blocks on 4 channels. gpu0's send to gpu3 (device 1) leaves through its proxy
    gpu1's 4 NICs, a quarter each (ncclTopoGetLocalNet: channel k on the proxy's k-th
    NIC), as gpu1's own send to gpu3 does: 2 x 4 KiB on each of rails 2-5. gpu0's own
    send to gpu2 and gpu1's through gpu0 take rails 0-1, 2 x 8 KiB each. Nothing crosses
    the spine."""
    res = sc.simulate(_mut_rails([2, 2], nics=[2, 4]), "all_to_all", algorithm="nccl",
                      nbytes=4 * 16384, channels=4)
    out = {k: res.link_bytes[(f"nic0_{k}", f"leaf{k}")] for k in range(6)}
    assert out == {0: 16384, 1: 16384, 2: 8192, 3: 8192, 4: 8192, 5: 8192}
    assert _mut_spine_bytes(res) == 0


def test_tree_channels_past_the_searched_count_reuse_the_searched_heads():
    """dgx_h100(2, nics_per_node=2): GPUs 0-3 sit behind a node's first NIC, 4-7 behind
    its second, so the rail order is 0, 4, 1, 5, 2, 6, 3, 7 and the search finds n = 4
    tree channels. Channel c's chain starts at rail entry (c mod n) mod 8: channels
    0-3 at GPUs 0, 4, 1, 5 and channels 4-7 (tree 1) at the same GPUs again, never at
    GPUs 2, 3, 6, 7. A channel moves nbytes / 8 across the node boundary each way through
    its head, so each head GPU sends 2 x nbytes / 8 = nbytes / 4 into its PCIe switch
    and the others send nothing there. (Taking the rail entry by c mod 8 instead of
    (c mod n) mod 8 starts channels 4-7 at GPUs 2, 6, 3, 7: every GPU sends nbytes / 8,
    NICs still evenly loaded, which the balance test cannot see.)"""
    topo = sc.topology.dgx_h100(2, nics_per_node=2)
    nbytes = 1 << 19
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=nbytes, algo="tree",
                      proto="Simple", channels=8)
    sent = {int(a[3:]): v for (a, b), v in res.link_bytes.items()
            if a.startswith("gpu") and b.startswith("pcie")}
    heads = {0, 1, 4, 5}
    expected = {g: (nbytes // 4 if g % 8 in heads else 0) for g in range(16)}
    assert sent == expected


@pytest.mark.parametrize("nics", [{}, {"nics_per_node": 2}])
def test_tree_chains_of_a_smaller_node_rotate_within_its_own_gpus(nics):
    """A group of GPUs 0-7 of one DGX H100 and 8-11 of the other (8 and 4 GPUs):
    channel c's head is rail entry (c mod n) of node 0's order (0-7; 0, 4, 1, 5, 2, 6,
    3, 7 where GPUs 0-3 and 4-7 share a NIC), and every rank of every node rotates each
    node's GPUs by that one head modulo the node's GPU count, so they agree on every
    chain (a rank reading its own node's rail order, 0-3 on the second node, disagrees
    with node 0 about which GPU heads node 1). Heads 4-7 rotate the 4-GPU node by 0-3,
    never a GPU twice: the all_reduce ends with every member holding the exact sum."""
    topo = sc.topology.dgx_h100(2, **nics)
    members = list(range(12))
    count = 1 << 14
    x = [np.full(count, float(r + 1)) for r in range(16)]

    def program(comm):
        if comm.rank not in members:
            return None
        out = yield comm.group(members).all_reduce(x[comm.rank], algorithm="nccl",
                                                   algo="tree", proto="Simple",
                                                   channels=16)
        return out

    res = sc.run_program(topo, program, max_events=2_000_000)
    total = float(sum(r + 1 for r in members))   # 78, exact in float64
    for r in members:
        np.testing.assert_array_equal(res.outputs[r], np.full(count, total))
