"""The channels NCCL's topology search gives rings and trees (src/graph/search.cc and
connect.cc of NCCL 2.30.7), worked out by hand from its speed arrays, and the counts
NCCL's own logs print ("NCCL INFO 24 coll channels, ..."): 24 on one node of 8 A100 or
8 H100, 16 on two DGX H100 nodes with a 400 Gb/s NIC per GPU. Before 2026-12-04 every
NVLink machine ran 16."""

from __future__ import annotations

import numpy as np
import pytest

import simcoll as sc
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.search import across_nodes_channels, one_node_channels
from simcoll.algorithms.nccl.tuner import max_channels

GBS = 1e9


@pytest.mark.parametrize(("arch", "nvlink", "expected"), [
    # 12 NVLinks of 20 GB/s: 6 channels at 40 fill 240; doubled (Ampere doubles from 25
    # GB/s on) to 12 at 20; every ring twice: 24.
    ("ampere", 240.0, 24),
    # 18 links of 20.6 GB/s: 6 at 60 (360; 7 at 50, 9 at 40, 12 at 30 carry no more, and
    # 24 is below 0.49 of 60); 60 >= 50, so doubled to 12 at 30; twice: 24.
    ("hopper", 370.8, 24),
    # 18 links of 40.1 GB/s: 8 at 90 (720; 9 at 80, 12 at 60, 16 at 45 carry no more);
    # doubled to 16 at 45; twice: 32.
    ("blackwell", 721.8, 32),
    # 100 GB/s: 1 at 60, 2 at 50 fill it; doubled to 4 at 25 (3 at 30 do not fit 4);
    # twice: 8.
    ("hopper", 100.0, 8),
    # 100 GB/s on Ampere: 2 at 40, 3 at 30 (90), 5 at 20 fill it; 20 < 25: not doubled;
    # twice: 10.
    ("ampere", 100.0, 10),
])
def test_one_node_by_hand(arch, nvlink, expected):
    assert one_node_channels(arch, nvlink) == expected


def test_across_nodes_by_hand():
    # 6 NICs of 50 GB/s under Hopper: one channel each at 48 (288 GB/s; 12 at 24 carry
    # no more); below 50 with more than 4 channels: not doubled; twice: 12, and NCCL
    # doubles Hopper rings across nodes again under 16 channels above 45 GB/s: 24.
    routes = [[(i, 50.0)] for i in range(6)]
    assert across_nodes_channels("hopper", 370.8, 8, routes) == 24
    # The same on Ampere (below 50 GB/s only Hopper on keeps more than 4 channels): 6 at
    # 48, doubled to 12 at 24, twice: 24, no second doubling before Hopper.
    assert across_nodes_channels("ampere", 370.8, 8, routes) == 24
    # With 240 GB/s of NVLink the node's GPUs carry 7 of 8 GPUs' share of each channel:
    # at 48 GB/s 240 x 8 / (7 x 48) = 5.7, so 5; doubled to 10 at 24; twice: 20.
    assert across_nodes_channels("ampere", 240.0, 8, routes) == 20
    # Two routes sharing a 24 GB/s link to 12.5 GB/s NICs: one channel each at 12.
    shared = [[(0, 24.0), (1, 12.5)], [(0, 24.0), (2, 12.5)]]
    assert across_nodes_channels("ampere", 240.0, 1, shared) == 4


@pytest.mark.parametrize(("topo", "expected"), [
    # Public NCCL logs: "24 coll channels" on one node of 8 H100 or 8 A100.
    (sc.topology.dgx_a100(1), 24),
    (sc.topology.dgx_h100(1), 24),
    # "16 coll channels" on 2 x 8 H100: 8 at 48 GB/s, one per 50 GB/s NIC; not doubled
    # below 50 GB/s; twice: 16 (not under 16 for the Hopper doubling).
    (sc.topology.dgx_h100(2), 16),
    (sc.topology.dgx_h100(8), 16),
    # DGX A100: NICs of 25 GB/s behind 24 GB/s PCIe links: 8 at 24, not doubled: 16.
    (sc.topology.dgx_a100(2), 16),
    # 16 x 100 Gb/s RoCE: 16 at 12 (two per GPU's 24 GB/s link), not doubled: 32.
    (sc.topology.dgx_a100(2, nics_per_node=16, nic_bandwidth=12.5 * GBS), 32),
    # Two GPUs per 25 GB/s NIC: 4 channels at 24, not doubled: 8.
    (sc.topology.dgx_a100(2, nics_per_node=4), 8),
])
def test_presets_run_nccls_channels(topo, expected):
    machine = describe(topo, tuple(range(topo.nranks)))
    assert machine.channels == expected
    assert max_channels(machine, "ring") == max_channels(machine, "tree") == expected


def test_pci_and_lone_gpu_nodes_keep_their_counts():
    for topo, expected in ((sc.topology.pcie_node(8), 4), (sc.topology.cluster(4, 1), 16)):
        machine = describe(topo, tuple(range(topo.nranks)))
        assert machine.channels == 0
        assert max_channels(machine, "ring") == expected


def test_a_large_ring_runs_on_nccls_channels_and_sums_right():
    """1 GiB on one DGX A100 runs on all 24 channels (n / 24 a channel: every GPU's
    NVLink out carries 2 (p - 1) / p x n, whatever the count), and a data run's output is
    numpy's."""
    topo = sc.topology.dgx_a100(1)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 30)
    assert (res.params["algo"], res.params["channels"]) == ("ring", 24)
    assert res.link_bytes[("gpu0", "nvswitch0")] == 2 * 7 * (1 << 30) // 8
    rng = np.random.default_rng(4)
    data = [rng.standard_normal(1 << 15) for _ in range(8)]
    checked = sc.simulate(topo, "all_reduce", algorithm="nccl", data=data, algo="ring",
                          proto="Simple", channels=24)
    assert checked.correct
    np.testing.assert_allclose(checked.outputs[3], np.sum(data, axis=0), rtol=0, atol=1e-12)
