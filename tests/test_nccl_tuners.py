"""The tuner of NCCL 2.26.2 next to 2.30.7's (``tuner=``): expected values worked out from
2.26.2's src/graph/tuning.cc (``ncclTopoTuneModel``: NVLS and NVLS-tree take the graph's
``min(bwIntra, bwInter)``, half of ``bwInter`` for NVLS-tree beyond 2 nodes, all_reduce
converts them at 5/6; ``hwLat`` NET / NVLSTree / Simple = 14 us; Blackwell's per-channel
caps twice Hopper's)."""

from __future__ import annotations

import dataclasses
import math

import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import Machine, describe
from simcoll.algorithms.nccl.support import ALGORITHMS
from simcoll.algorithms.nccl.tune_model import comm_channels, max_channels, nvls_channels, predict
from simcoll.algorithms.nccl.tuner import candidates, choose
from simcoll.cli import main

US = 1e-6
MIB = 1 << 20


def h100(nodes: int) -> Machine:
    return describe(sc.topology.dgx_h100(nodes), tuple(range(8 * nodes)))


def test_two_h100_nodes_at_1_mib_pick_nvls_tree_by_2_26_2_and_a_tree_by_2_30_7():
    machine = h100(2)
    intra, inter = machine.intra_bw / 1e9, machine.inter_bw / 1e9       # GB/s
    # NCCL's NVLS graph: 8 heads at 40 GB/s inside a node (9 x 40 = 360 within a GPU's
    # 370.8), 48 to the network. 2.26.2: bus bandwidth 8 x min(40, 48), times 5/6;
    # latency: NVLS tree's NVLink step (25 us) + 2 log2(2) network steps of 14 us.
    assert intra == 370.8 and inter == 8 * 48
    nvls_tree = (25 + 2 * 14 + MIB / (1000 * 8 * 40 * 5 / 6)) * US
    old = choose(machine, "all_reduce", MIB, tuner="2.26.2")
    assert (old.algo, old.proto, old.channels) == ("nvls_tree", "Simple", 16)
    assert old.predicted == pytest.approx(nvls_tree, rel=1e-12)
    # 2.30.7: 8 x the least of 40 x 0.85 x 7/8 x 2 = 59.5, 2 x 48 and 57.7 GB/s,
    # converted at p / (2 (p - 1)), and a 20.9 us network step: slower than a tree with
    # LL128, which both releases predict alike.
    bus = 8 * min(40 * 0.85 * 7 / 8 * 2, 2 * 48, 57.7)
    new_nvls_tree = (25 + 2 * 20.9 + MIB / (1000 * bus * 16 / 30)) * US
    assert predict(machine, "all_reduce", MIB, "nvls_tree", "Simple", 16) == pytest.approx(
        new_nvls_tree, rel=1e-12)
    new = choose(machine, "all_reduce", MIB)
    assert (new.algo, new.proto) == ("tree", "LL128")
    assert nvls_tree < new.predicted < new_nvls_tree
    assert predict(machine, "all_reduce", MIB, "tree", "LL128", 16, "2.26.2") == new.predicted


def test_beyond_two_nodes_2_26_2_halves_the_network_for_nvls_tree():
    machine = h100(8)
    intra, inter = machine.intra_bw / 1e9, machine.inter_bw / 1e9
    gib = 1 << 30
    # 8 NVLS graph channels x min(bwIntra 40, bwInter 48 / 2), at 5/6.
    assert intra == 370.8 and inter == 8 * 48
    expected = (25 + 2 * 3 * 14 + gib / (1000 * 8 * min(40, 48 / 2) * 5 / 6)) * US
    assert predict(machine, "all_reduce", gib, "nvls_tree", "Simple", 16,
                   "2.26.2") == pytest.approx(expected, rel=1e-12)
    # So 2.26.2 prefers a tree or a ring at 1 GiB, where 2.30.7 keeps NVLS-tree.
    assert choose(machine, "all_reduce", gib, tuner="2.26.2").algo in ("tree", "ring")
    assert choose(machine, "all_reduce", gib).algo == "nvls_tree"


def test_one_h100_node_nvls_by_2_26_2():
    machine = h100(1)
    intra = machine.intra_bw / 1e9
    size = 1 << 30
    # NCCL's NVLS graph: 8 heads at 40 GB/s (9 x 40 within 370.8), bwInter raised to 60:
    # 8 x min(40, 60) = 320 GB/s. all_reduce: at 5/6 after one 25 us step;
    # reduce_scatter and all_gather: as it is (NCCL converts no NVLS bus bandwidth but
    # all_reduce's).
    assert intra == 370.8
    assert predict(machine, "all_reduce", size, "nvls", "Simple", 16, "2.26.2") == \
        pytest.approx((25 + size / (1000 * 320 * 5 / 6)) * US, rel=1e-12)
    for collective in ("reduce_scatter", "all_gather"):
        assert predict(machine, collective, size, "nvls", "Simple", 16, "2.26.2") == \
            pytest.approx((25 + size / (1000 * 320)) * US, rel=1e-12)


def test_no_nvls_before_hopper_in_either_release():
    ampere = Machine(8, 1, "nvlink", 300e9, 0.0, True, "ampere")
    for tuner in ("2.30.7", "2.26.2"):
        assert math.isinf(predict(ampere, "all_reduce", MIB, "nvls", "Simple", 16, tuner))


def test_blackwell_per_channel_caps_were_twice_hoppers_in_2_26_2():
    # One node of fast NVLink, so the per-channel caps bind: ring LL128 on 1 channel,
    # 0.92 x NVLink against 73.4 GB/s (2.26.2) or 40 (2.30.7); trees with Simple at
    # 2 nodes: 0.92 x NVLink against 82.8 or 42.8 GB/s per channel, then halved.
    machine = Machine(8, 1, "nvlink", 900e9, 0.0, False, "blackwell")
    latency = (14.0 + 14 * 1.9) * US                     # base + 2(p-1) LL128 steps
    for tuner, cap in (("2.26.2", 73.4), ("2.30.7", 40.0)):
        assert predict(machine, "all_reduce", MIB, "ring", "LL128", 1, tuner) == \
            pytest.approx(latency + MIB / (1000 * cap * 8 / 14) * US, rel=1e-12)
    two = Machine(16, 2, "nvlink", 900e9, 900e9, False, "blackwell")
    gib = 1 << 30                                        # no tree correction this large
    for tuner, cap in (("2.26.2", 82.8), ("2.30.7", 42.8)):
        bus = min(900 * 0.92, 2 * cap)
        lat = 8.4 + 2 * (7 * 4.0 + 1 * 14.0)            # base + 2 (chain + log2 nodes)
        assert predict(two, "all_reduce", gib, "tree", "Simple", 2, tuner) == \
            pytest.approx((lat + gib / (1000 * bus * 0.5)) * US, rel=1e-12)


@pytest.mark.parametrize("nodes", [1, 2, 8])
def test_the_releases_agree_on_every_pair_but_nvls_and_collnets_reduce_scatter(nodes):
    """2.26.2 and 2.30.7 differ on NVLS and on CollNet Direct's reduce_scatter and
    all_gather (2.26.2's "measured corrective ratio", 2.30.7's 0.9 of the NIC: see
    test_nccl_sharp_rs_ag.py); on every other pair their predictions are the same."""
    machine = h100(nodes)
    a100 = describe(sc.topology.dgx_a100(nodes), tuple(range(8 * nodes)))
    for m in (machine, a100):
        for collective, algos in ALGORITHMS.items():
            for algo in algos:
                if algo.startswith("nvls") or (algo == "collnet_direct"
                                               and collective != "all_reduce"):
                    continue
                for proto in ("LL", "LL128", "Simple"):
                    for size in (8, 4096, MIB, 1 << 30):
                        assert predict(m, collective, size, algo, proto, 16, "2.26.2") == \
                            predict(m, collective, size, algo, proto, 16, "2.30.7")


def test_the_tuner_only_chooses_what_runs():
    h = sc.topology.dgx_h100(2)
    old = sc.simulate(h, "all_reduce", algorithm="nccl", nbytes=MIB, tuner="2.26.2")
    assert old.params == {"algo": "nvls_tree", "proto": "Simple", "channels": 16,
                          "arch": "hopper", "intra": "nvlink", "tuner": "2.26.2",
                          "launch_overhead": 0.0, "step_latency_scale": 1.0, "collnet": 0,
                          "nvls_channels": 0}
    forced = sc.simulate(h, "all_reduce", algorithm="nccl", nbytes=MIB, algo="nvls_tree",
                         proto="Simple")
    assert forced.params["tuner"] == "2.30.7"
    assert old.time == forced.time
    assert old.bytes_sent.tolist() == forced.bytes_sent.tolist()
    assert old.link_bytes == forced.link_bytes


def test_an_unknown_release_is_refused_before_the_run():
    with pytest.raises(sc.InvalidInputError, match=r"tuner='2\.27'.*'2\.30\.7', '2\.26\.2'"):
        sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl",
                    nbytes=MIB, tuner="2.27")


def test_the_command_line_takes_the_release(capsys):
    assert main(["run", "--topology", "dgx_h100:nodes=2", "--algorithm", "nccl",
                 "--size", "1M", "--param", "tuner=2.26.2", "--json"]) == 0
    assert '"nvls_tree"' in capsys.readouterr().out


def _blackwell(nodes: int, nic_gbs: float, ppn: int = 8, smallest: int = 0,
               channels: int = 0) -> Machine:
    """A Blackwell machine with NVLS and one NIC of ``nic_gbs`` GB/s per GPU (and
    ``channels`` from NCCL's search)."""
    rails = ppn if nodes > 1 else 0
    return Machine(ppn * nodes, nodes, "nvlink", 721.8e9, rails * nic_gbs * 1e9, True,
                   "blackwell", rails=rails, smallest_node=smallest, channels=channels)


@pytest.mark.parametrize(("nodes", "nic", "ppn", "expected"), [
    (1, 0.0, 8, 24),     # NVLS_NCHANNELS_SM100_NVL
    (2, 50.0, 8, 32),    # 2 nodes, NICs >= 48 GB/s
    (2, 25.0, 8, 32),    # slower NICs: the SM100 default, NVLS_NCHANNELS_SM100
    (4, 50.0, 8, 24),    # beyond 2 nodes, NICs >= 48 GB/s
    (4, 100.0, 8, 24),   # NICs >= 96 GB/s, at most 8 GPUs per node
    (4, 100.0, 16, 32),  # NICs >= 96 GB/s, more GPUs per node
    (4, 25.0, 8, 32),    # slower NICs: the default
])
def test_blackwell_nvls_channels_follow_ncclNvlsTuning(nodes, nic, ppn, expected):
    """Worked from src/transport/nvls.cc of 2.30.7 (``ncclNvlsTuning`` and
    ``ncclNvlsTreeSm100Tuning``); 2.26.2 opened 32 on Blackwell everywhere, and Hopper
    has 16 in both."""
    machine = _blackwell(nodes, nic, ppn)
    best = choose(machine, "all_reduce", 1 << 30, algo="nvls" if nodes == 1 else "nvls_tree")
    assert best.channels == expected
    assert choose(machine, "all_reduce", 1 << 30, algo=best.algo,
                  tuner="2.26.2").channels == 32
    hopper = Machine(machine.nranks, nodes, "nvlink", 370.8e9, machine.inter_bw, True,
                     "hopper", rails=machine.rails)
    assert choose(hopper, "all_reduce", 1 << 30, algo=best.algo).channels == 16


def test_blackwell_nvls_channels_read_the_smallest_node():
    # Nodes of 16 GPUs give 32 channels; where the smallest holds 8, NCCL reads that
    # (minLocalRanks) and opens 24.
    assert choose(_blackwell(3, 100.0, 16), "all_reduce", 1 << 30).channels == 32
    uneven = _blackwell(3, 100.0, 16, smallest=8)
    assert choose(uneven, "all_reduce", 1 << 30, algo="nvls_tree").channels == 24


def test_blackwell_nvls_runs_on_its_channels_and_nccl_counts_them():
    # One NVLS node read as Blackwell: NVLS runs on 24 channels, and NCCL's bus bandwidth
    # counts its NVLS graph's, whatever runs: 8 heads at 40 GB/s (Blackwell's speeds: 9 x
    # 45 exceeds the H100's 370.8 GB/s, 9 x 40 fits; bwInter then rises to 80), so 8 x
    # min(40 x 0.74 x 7/8 x 2, 80) = 414.4 GB/s, after NVLS's one 25 us step.
    topology = sc.topology.dgx_h100(1)
    res = sc.simulate(topology, "all_reduce", algorithm="nccl", nbytes=1 << 30,
                      arch="blackwell")
    assert res.params["algo"] == "nvls" and res.params["channels"] == 24
    machine = describe(topology, tuple(range(8)), "blackwell")
    bus = 8 * 40 * 0.74 * 7 / 8 * 2
    for channels in (24, 16):
        assert predict(machine, "all_reduce", 1 << 30, "nvls", "Simple", channels) == \
            pytest.approx((25 + (1 << 30) / (1000 * bus * 8 / 14)) * US, rel=1e-12)


def test_nvls_is_off_where_nccls_nvls_search_finds_no_channel():
    """A node of 8 GPUs with 20 GB/s of NVLink each: an NVLS channel on every GPU takes
    9 x its speed on a GPU's NVLink, and 9 x 3 GB/s (Hopper's slowest speed) is over 20,
    so NCCL's NVLS graph has none and NCCL turns NVLS off: the tuner leaves it out and a
    run that names it is refused with the reason."""
    slow = Machine(8, 1, "nvlink", 20e9, 0.0, True, "hopper")
    assert "nvls" not in candidates(slow, "all_reduce")
    with pytest.raises(sc.InvalidInputError, match="NVLS search finds no channel here"):
        choose(slow, "all_reduce", MIB, algo="nvls")
    assert "nvls" in candidates(dataclasses.replace(slow, intra_bw=27e9), "all_reduce")


def test_nvls_tree_on_one_head_per_node_is_refused_with_the_reason():
    """Two nodes of 8 GPUs sharing one NIC each: NCCL's NVLS graph has one head a node,
    one channel, and NCCL 2.30.7 gives NVLS no bandwidth below 2 channels; 2.26.2 runs
    it, at 1 x min(48, 48) GB/s."""
    one_nic = Machine(16, 2, "nvlink", 370.8e9, 48e9, True, "hopper", rails=1)
    with pytest.raises(sc.InvalidInputError, match="NVLS graph has 1 channel here"):
        choose(one_nic, "all_reduce", MIB, algo="nvls_tree")
    old = choose(one_nic, "all_reduce", 1 << 30, algo="nvls_tree", tuner="2.26.2")
    assert old.predicted == pytest.approx(
        (25 + 2 * 14 + (1 << 30) / (1000 * 48 * 5 / 6)) * US, rel=1e-12)


@pytest.mark.parametrize(("nodes", "nic", "ppn", "expected"), [
    (2, 48.0, 8, 32),    # 2 nodes, minNetBw >= 48: NVLS_NCHANNELS_SM100
    (2, 47.9, 8, 32),    # just below: the SM100 default, also 32
    (4, 48.0, 8, 24),    # beyond 2 nodes, minNetBw >= 48 (inclusive): 24
    (4, 47.9, 8, 32),    # just below 48: the default 32
    (4, 96.0, 8, 24),    # minNetBw >= 96 (inclusive), at most 8 GPUs a node: 24
    (4, 96.0, 7, 24),    # fewer than 8 GPUs a node: 24
    (4, 96.0, 9, 32),    # more than 8 GPUs a node: 32
    (4, 95.9, 9, 24),    # just below 96 with 9 GPUs: the >= 48 rule, 24
])
def test_blackwell_nvls_channels_at_ncclNvlsTuning_boundaries(nodes, nic, ppn, expected):
    """ncclNvlsTreeSm100Tuning (src/transport/nvls.cc, 2.30.7) compares minNetBw with
    ``>=`` at 48 and 96 GB/s and the fewest GPUs of a node with ``<= 8``."""
    assert nvls_channels(_blackwell(nodes, nic, ppn)) == expected


def test_nvls_across_nodes_runs_no_more_channels_than_the_communicator():
    """2.30.7's topoGetAlgoInfo caps NVLS across nodes at comm->nChannels; 2.26.2 and
    NVLS-tree take NVLS's own (32 on 2 Blackwell nodes with 50 GB/s NICs)."""
    machine = _blackwell(2, 50.0, channels=16)
    assert max_channels(machine, "nvls") == 16          # min(32, 16)
    assert max_channels(machine, "nvls", tuner="2.26.2") == 32
    assert max_channels(machine, "nvls_tree") == 32
    one_node = _blackwell(1, 0.0, channels=16)
    assert max_channels(one_node, "nvls") == 24         # one node: NVLS's own, not capped


def test_collnet_adds_no_channels_where_every_node_holds_one_gpu():
    """connect.cc (ncclTopoPostset) adds CollNet's half again only where
    ``comm->nRanks > comm->nNodes``: with one GPU per node the communicator keeps its
    search's channels even where CollNet Chain's graph is faster inside a node."""
    machine = describe(sc.topology.dgx_a100(2, sharp=True), (0, 8))
    assert machine.ppn == 1 and machine.sharp
    assert comm_channels(machine, collnet=1) == machine.channels == comm_channels(machine)


@pytest.mark.parametrize("kwargs, match", [
    (dict(collective="allreduce"), r"collective='allreduce' is not accepted; use one of "
                                   r"'all_reduce', 'reduce_scatter'"),
    (dict(nbytes=-5), r"nbytes=-5 is not accepted; use an integer >= 0"),
    (dict(nbytes=1.5), r"nbytes=1.5 is not accepted"),
    (dict(proto="LL64"), r"proto='LL64' is not accepted; use 'auto', one of 'LL', 'LL128', "
                         r"'Simple'"),
    (dict(algo="ring,"), r"algo='ring,' names '', which is not accepted"),
    (dict(tuner="2.1"), r"tuner='2.1' is not accepted; use one of '2.30.7', '2.26.2'"),
    (dict(channels=-1), r"channels=-1 is not accepted; use an integer in 0\.\.64"),
    (dict(channels=65), r"channels=65 is not accepted"),
    (dict(collnet=2), r"collnet=2 is not accepted; use an integer in 0\.\.1"),
    (dict(collective="all_to_all", proto="LL128"), r"proto='LL128' cannot run all_to_all: "
                                                  r"NCCL's sends and receives run LL or "
                                                  r"Simple, never LL128"),
])
def test_choose_refuses_what_nccl_would_not_take_by_name(kwargs, match):
    # raw KeyError / ValueError before; a negative size or channel count was priced
    args = dict(collective="all_reduce", nbytes=MIB) | kwargs
    with pytest.raises(sc.InvalidInputError, match=match):
        choose(h100(1), args.pop("collective"), args.pop("nbytes"), **args)


def test_choose_takes_nccl_spellings_of_algorithms_and_protocols():
    # NCCL_ALGO / NCCL_PROTO spellings: any case, '^' leaving out; the same choice as the
    # canonical names
    machine = h100(2)
    assert choose(machine, "all_reduce", MIB, algo="Ring", proto="^LL,LL128") == \
        choose(machine, "all_reduce", MIB, algo="ring", proto="Simple")
    # NCCL_PROTO=^LL128, a common setting, leaves LL and Simple to an all_to_all's sends
    # (refused as naming LL128 before); naming LL128 among others passes it over
    # 4096 B a peer fits LL's 16 KiB a channel (p2p.py); naming Simple alone forces it
    assert (choose(machine, "all_to_all", 4096, proto="^LL128").proto,
            choose(machine, "all_to_all", 4096, proto="LL128,Simple").proto) == ("LL",
                                                                                 "Simple")
    # all_to_all's refusal of a collective algorithm still says why
    with pytest.raises(sc.InvalidInputError, match=r"algo='ring' cannot run all_to_all: NCCL "
                                                   r"runs it as point-to-point"):
        choose(machine, "all_to_all", 4096, algo="ring")


@pytest.mark.parametrize("args, match", [
    (("allreduce", MIB, "ring", "Simple", 8), r"collective='allreduce' is not accepted"),
    (("broadcast", MIB, "tree", "Simple", 8), r"algo='tree' is not accepted; use one of 'ring'"),
    (("all_reduce", MIB, "ring", "LL64", 8), r"proto='LL64' is not accepted; use one of "
                                             r"'LL', 'LL128', 'Simple'"),
    (("all_reduce", MIB, "ring", "Simple", 0), r"channels=0 is not accepted; use an integer in "
                                               r"1\.\.64"),
    # priced 65 or a million channels, which choose refuses (MAXCHANNELS)
    (("all_reduce", MIB, "ring", "Simple", 65), r"channels=65 is not accepted"),
    (("all_reduce", -1, "ring", "Simple", 8), r"nbytes=-1 is not accepted"),
])
def test_predict_refuses_what_nccl_would_not_price(args, match):
    with pytest.raises(sc.InvalidInputError, match=match):
        predict(h100(2), *args)
    with pytest.raises(sc.InvalidInputError, match=r"tuner='x' is not accepted"):
        predict(h100(2), "all_reduce", MIB, "ring", "Simple", 8, "x")


def test_choose_and_predict_take_numpy_integers_as_python_ones():
    # the checks took np.int64 and passed it on: NCCL's log2i (int.bit_length) crashed
    import numpy as np

    machine = h100(1)
    assert choose(machine, "all_reduce", np.int64(MIB)) == choose(machine, "all_reduce", MIB)
    assert predict(machine, "all_reduce", np.int64(MIB), "tree", "LL", np.int32(8)) == \
        predict(machine, "all_reduce", MIB, "tree", "LL", 8)


def test_choose_refuses_what_nccl_would_not_take_where_nothing_is_tuned():
    """The arguments are refused as given, wherever choose goes next: on one GPU (where
    nothing is tuned and the choice is at once Simple, no time), and for all_to_all
    (point-to-point sends, whose sizes are per peer: -5 B is not -80 B to 16 peers).
    'p2p' is all_to_all's algorithm name alone: to all_reduce it is no algorithm at all,
    not one that collective does not run."""
    one_gpu = describe(sc.topology.dgx_h100(1), (0,))
    node = describe(sc.topology.dgx_h100(2), tuple(range(16)))
    with pytest.raises(sc.InvalidInputError, match=r"^tuner='2\.1' is not accepted"):
        choose(one_gpu, "all_reduce", 1 << 20, tuner="2.1")
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes=-5 is not accepted"):
        choose(one_gpu, "all_reduce", -5)
    with pytest.raises(sc.InvalidInputError, match=r"^nbytes=-5 is not accepted; use an "
                                                   r"integer >= 0"):
        choose(node, "all_to_all", -5)
    with pytest.raises(sc.InvalidInputError, match=r"^algo='p2p' is not accepted; use "
                                                   r"'auto', one of 'ring', "):
        choose(node, "all_reduce", 4096, algo="p2p")
