"""DGX A100 and DGX H100 servers, alone or many on a rail-optimised InfiniBand fabric.

A node: 8 GPUs on NVSwitch, drawn as one non-blocking switch (``nvswitch<node>``; the
six NVSwitch chips of a DGX A100 and the four of a DGX H100 give every GPU its full
NVLink bandwidth to every other), and, with more than one node, NICs reached over PCIe.
Facts and sources are in :mod:`simcoll.topology.presets.hardware`; bandwidths default to
NCCL's usable figures (A100: 12 x 20 = 240 GB/s NVLink, Gen4 x16 24 GB/s; H100: 18 x 20.6
= 370.8 GB/s, Gen5 x16 48 GB/s) and NICs to their line rate (HDR 25 GB/s, NDR 50 GB/s).

NICs and PCIe: with one NIC per GPU (the DGX layout) GPU i has one PCIe link to NIC i.
On a DGX A100 two GPUs and two NICs share a PCIe switch (on a DGX H100 each NIC's own
PCIe switch serves one GPU); it is non-blocking and carries no other traffic in these
models, so each GPU-NIC pair is drawn as its own path (with routes
by hop count, a shared switch would also send both GPUs through the first NIC). With
``nics_per_node = k x gpus`` each GPU has a PCIe switch (``pcie<node>_<gpu>``) with its k
NICs below it, so its own x16 link bounds what NCCL sends (NCCL binds each channel to one
of them, so its channels use all k); every other algorithm sends a GPU's traffic to
another node through the first of its NICs (one route per pair of ranks), so one NIC
bounds it (12.5 GB/s a GPU with 16 x 100G NICs, half of what 8 x 200G give it); with
``gpus = k x nics`` k GPUs
share one PCIe switch and its NIC. ``pcie_latency`` is GPU to NIC (split evenly over the
two links where a PCIe switch sits between).

Fabric (:mod:`simcoll.topology.presets.fabrics`): rail-optimised, NIC k of every node on
leaf k, leaves of ``leaf_radix // 2`` nodes (40-port HDR QM8700: 20 DGX A100; 64-port NDR
QM9700: 32 DGX H100, as in NVIDIA's DGX SuperPOD scalable units), joined by a spine.

Routes (shortest in hops, ties broken by link order; each GPU's NVLink is added before
its PCIe link):

* same node: GPU -> NVSwitch -> GPU;
* local GPU i to local GPU i of another node (same rail): GPU -> NIC i -> leaf i ->
  NIC i -> GPU, plus leaf -> spine -> leaf between leaf groups;
* local GPU i to local GPU j != i of another node under the same leaves (cross-rail):
  three routes tie at six hops (NVLink to local GPU j then rail j; rail i then NVLink on
  the far node; rail i, spine, rail j). The first wins: GPU i -> NVSwitch -> GPU j ->
  NIC j -> leaf j -> NIC j -> GPU j, the path NCCL's PXN takes, so cross-rail traffic
  loads GPU j's NVLink and NIC and not the spine;
* cross-rail between leaf groups: rail i up to the spine and down rail j (shorter than
  any detour over NVLink).

Latencies are round typical values, not measurements (calibration fits them): 0.5 us per
NVLink hop, 1 us GPU to NIC over PCIe, 1.5 us per network hop (NIC-leaf, leaf-spine).

On DGX H100 the NVSwitch reduces in the network (NVLink SHARP, NVLS): the switch is an
in-network device (``in_network``) with a ``reduce_bandwidth`` of its own, in bytes of
pairwise-reduction output per second. Its line rate would be what its ports feed it,
(gpus - 1) x ``nvlink_bandwidth`` (7 x 370.8 GB/s = 2.6 TB/s), but NVLS does not reach
it: NCCL 2.30.7's tuner discounts NVLS by an efficiency (``nvlsEfficiency``, 0.85 on
Hopper, src/graph/tuning.cc), and nccl-tests measures about 475 GB/s busbw on one DGX
H100 where the line rate would give 650. The default, 1.86 TB/s (0.72 of the line
rate), is what ``simcoll.calibrate`` fits to that measurement (nccl-tests issue #290,
sizes from 512 MiB to 4 GiB, where the switch's reduction rate is what limits; 2.4 %
geometric-mean error after the fit): ``benchmarks/nccl_tests_compare.py`` shows it.
"""

from __future__ import annotations

import math

from simcoll.checks import Count, flag, integer
from simcoll.errors import TopologyError
from simcoll.topology.builders import _check_count, _check_kinds, _check_quantities, _check_size
from simcoll.topology.graph import Topology
from simcoll.topology.presets.fabrics import _leaf_capacity, attach_fat_tree
from simcoll.topology.presets.hardware import (
    A100_SXM,
    H100_SXM,
    HDR,
    NDR,
    pcie_x16_nccl,
)
from simcoll.units import us

__all__ = ["dgx", "dgx_a100", "dgx_h100"]

NVSWITCH_REDUCE_BANDWIDTH_H100 = 1.86e12
"""The H100 NVSwitch's NVLS reduction rate, fitted to nccl-tests (see the module)."""


def _nic_layout(gpus: int, nics: Count | None) -> int:
    nics = gpus if nics is None else integer(
        nics, "nics_per_node", minimum=1, error=TopologyError,
        what="NICs per node: a multiple or a divisor of gpus_per_node")
    if nics % gpus and gpus % nics:
        raise TopologyError(f"nics_per_node={nics} is not accepted with gpus_per_node="
                            f"{gpus}; use a multiple or a divisor of {gpus}")
    return nics


def _node_nics(topo: Topology, node: int, gpus: list[str], nics: int, *,
               pcie_bandwidth: float, pcie_latency: float) -> list[str]:
    """Add node ``node``'s NICs and their PCIe links; return the NICs in rail order."""
    names = [topo.add_nic(f"nic{node * nics + k}") for k in range(nics)]
    if nics == len(gpus):
        for gpu, nic in zip(gpus, names):
            topo.add_link(gpu, nic, bandwidth=pcie_bandwidth, latency=pcie_latency,
                          kind="pcie")
        return names
    per_switch_gpus = max(1, len(gpus) // nics)
    per_switch_nics = max(1, nics // len(gpus))
    for j in range(len(gpus) // per_switch_gpus):
        sw = topo.add_switch(f"pcie{node}_{j}")
        for gpu in gpus[j * per_switch_gpus:(j + 1) * per_switch_gpus]:
            topo.add_link(gpu, sw, bandwidth=pcie_bandwidth, latency=pcie_latency / 2,
                          kind="pcie")
        for nic in names[j * per_switch_nics:(j + 1) * per_switch_nics]:
            topo.add_link(sw, nic, bandwidth=pcie_bandwidth, latency=pcie_latency / 2,
                          kind="pcie")
    return names


def dgx(nodes: Count = 1, *, nvlink_bandwidth: float, pcie_bandwidth: float,
        nic_bandwidth: float, name: str = "dgx", gpus_per_node: Count = 8,
        nics_per_node: Count | None = None, nvlink_latency: float = 0.5 * us,
        pcie_latency: float = 1 * us, network_latency: float = 1.5 * us,
        network_kind: str = "ib", leaf_radix: Count = 64, oversubscription: float = 1.0,
        reduce_bandwidth: float = math.inf,
        nvswitch_reduce_bandwidth: float | None = None, sharp: bool = False,
        cpu: str = "unknown") -> Topology:
    """``nodes`` DGX-style servers on a rail-optimised fat tree (see the module).

    Args:
        nodes: servers; one gets no NICs and no fabric.
        nvlink_bandwidth: per GPU and direction, to the node's NVSwitch.
        pcie_bandwidth: per PCIe link and direction (GPU-NIC, or via a PCIe switch).
        nic_bandwidth: per NIC port and direction.
        name: a string that is not empty; the topology is named ``<name>x<nodes>``.
        gpus_per_node: GPUs per server.
        nics_per_node: NICs per server (default one per GPU), a multiple or a divisor
            of ``gpus_per_node``; NIC k of every node is on rail k.
        nvlink_latency, pcie_latency, network_latency: seconds per NVLink hop, GPU to
            NIC, and per network hop.
        network_kind: the kind of the network links, e.g. ``"ib"`` or ``"roce"``.
        leaf_radix: ports per leaf switch (half face nodes).
        oversubscription: leaf down over up capacity, of a full leaf's ports (a leaf
            with fewer nodes keeps the full leaf's uplinks).
        reduce_bandwidth: each GPU's reduction output, bytes/s.
        nvswitch_reduce_bandwidth: makes each NVSwitch reduce in the network at this
            rate (NVLS); None for a switch that only forwards.
        sharp: makes the fabric's switches reduce in the network (InfiniBand SHARP).
        cpu: the servers' CPU vendor (``Topology.cpu``), which NCCL's tuner reads.

    Raises:
        TopologyError: a count, layout, rate or latency that is not accepted, or a
            ``sharp`` that is not a bool.
    """
    sharp = flag(sharp, "sharp", error=TopologyError)
    if not isinstance(name, str) or not name:
        raise TopologyError(f"name={name!r} is not accepted; give a string that is not "
                            f"empty, e.g. 'dgx' (the topology is named '<name>x<nodes>')")
    nodes = _check_count("nodes", nodes)
    gpus_per_node = _check_count("gpus_per_node", gpus_per_node)
    nics = _nic_layout(gpus_per_node, nics_per_node)
    # At most, per node: its NVSwitch, GPUs, NICs, PCIe switches (no more than GPUs)
    # and leaves (no more than NICs), and the spine; two links per GPU (NVLink, PCIe)
    # and three per NIC (PCIe, leaf, leaf to spine).
    _check_size(nodes * (1 + 2 * gpus_per_node + 2 * nics) + 1,
                nodes * (2 * gpus_per_node + 3 * nics), bound=True, nodes=nodes,
                gpus_per_node=gpus_per_node, nics_per_node=nics)
    _check_quantities(("nvswitch_reduce_bandwidth",), nvlink_bandwidth=nvlink_bandwidth,
                      pcie_bandwidth=pcie_bandwidth, nic_bandwidth=nic_bandwidth,
                      nvlink_latency=nvlink_latency, pcie_latency=pcie_latency,
                      network_latency=network_latency, reduce_bandwidth=reduce_bandwidth,
                      nvswitch_reduce_bandwidth=nvswitch_reduce_bandwidth)
    _leaf_capacity(leaf_radix, oversubscription, nic_bandwidth)
    _check_kinds(network_kind=network_kind)
    topo = Topology(f"{name}x{nodes}")
    topo.cpu = cpu
    rails: list[list[str]] = []
    for node in range(nodes):
        nvswitch = topo.add_switch(f"nvswitch{node}",
                                   reduce_bandwidth=nvswitch_reduce_bandwidth)
        gpus = []
        for local in range(gpus_per_node):
            gpu = topo.add_gpu(f"gpu{node * gpus_per_node + local}",
                               reduce_bandwidth=reduce_bandwidth, node=node)
            topo.add_link(gpu, nvswitch, bandwidth=nvlink_bandwidth, latency=nvlink_latency,
                          kind="nvlink")
            gpus.append(gpu)
        if nodes > 1:
            rails.append(_node_nics(topo, node, gpus, nics, pcie_bandwidth=pcie_bandwidth,
                                    pcie_latency=pcie_latency))
    if rails:
        attach_fat_tree(topo, rails, nic_bandwidth=nic_bandwidth, latency=network_latency,
                        kind=network_kind, leaf_radix=leaf_radix,
                        oversubscription=oversubscription, sharp=sharp)
    return topo


def dgx_a100(nodes: Count = 1, *, nics_per_node: Count = 8, nic_bandwidth: float = HDR,
             nvlink_bandwidth: float = A100_SXM.nvlink_bandwidth_nccl,
             pcie_bandwidth: float = pcie_x16_nccl(4), nvlink_latency: float = 0.5 * us,
             pcie_latency: float = 1 * us, network_latency: float = 1.5 * us,
             network_kind: str = "ib", leaf_radix: Count = 40, oversubscription: float = 1.0,
             reduce_bandwidth: float = A100_SXM.reduce_bandwidth,
             sharp: bool = False, cpu: str = "amd") -> Topology:
    """DGX A100: 8 A100 SXM4 80GB on NVSwitch, 8 x 200 Gb/s HDR NICs on PCIe Gen4.

    Defaults: NVLink 240 GB/s per GPU and direction (NCCL's 12 x 20 GB/s; nominal
    300 GB/s, pass ``nvlink_bandwidth=300 * sc.GB``), PCIe 24 GB/s (NCCL's Gen4 x16;
    nominal 31.5), NICs 25 GB/s, 20 nodes per leaf (40-port HDR leaves), reductions at
    2,039 / 3 = 679.7 GB/s. ``dgx_a100(2, nics_per_node=16, nic_bandwidth=100 *
    sc.Gbps)`` is a node with 16 x 100 Gb/s NICs, two per GPU. ``sharp=True`` makes the
    HDR leaves and spine reduce in the network (Quantum SHARP, for NCCL's CollNet with
    ``collnet=1``). Two AMD EPYC 7742 CPUs (``cpu="amd"``; the DGX A100 datasheet).
    See :func:`dgx`.
    """
    return dgx(nodes, nvlink_bandwidth=nvlink_bandwidth, pcie_bandwidth=pcie_bandwidth,
               nic_bandwidth=nic_bandwidth, name="dgx_a100", nics_per_node=nics_per_node,
               nvlink_latency=nvlink_latency, pcie_latency=pcie_latency,
               network_latency=network_latency, network_kind=network_kind,
               leaf_radix=leaf_radix, oversubscription=oversubscription,
               reduce_bandwidth=reduce_bandwidth, sharp=sharp, cpu=cpu)


def dgx_h100(nodes: Count = 1, *, nics_per_node: Count = 8, nic_bandwidth: float = NDR,
             nvlink_bandwidth: float = H100_SXM.nvlink_bandwidth_nccl,
             pcie_bandwidth: float = pcie_x16_nccl(5), nvlink_latency: float = 0.5 * us,
             pcie_latency: float = 1 * us, network_latency: float = 1.5 * us,
             network_kind: str = "ib", leaf_radix: Count = 64, oversubscription: float = 1.0,
             reduce_bandwidth: float = H100_SXM.reduce_bandwidth, nvls: bool = True,
             nvswitch_reduce_bandwidth: float | None = NVSWITCH_REDUCE_BANDWIDTH_H100,
             sharp: bool = False, cpu: str = "intel") -> Topology:
    """DGX H100: 8 H100 SXM5 on NVSwitch with NVLS, 8 x 400 Gb/s NDR NICs on PCIe Gen5.

    Defaults: NVLink 370.8 GB/s per GPU and direction (NCCL's 18 x 20.6 GB/s; nominal
    450 GB/s), PCIe 48 GB/s (NCCL's Gen5 x16; nominal 63), NICs 50 GB/s, 32 nodes per
    leaf (64-port NDR leaves), reductions at 3,350 / 3 = 1,116.7 GB/s. The NVSwitch
    reduces in the network at ``nvswitch_reduce_bandwidth`` (default 1.86 TB/s, fitted to
    nccl-tests: see the module; None, ``none`` in a spec, takes the default);
    ``nvls=False`` makes it forward only, and refuses a rate other than the default,
    which it leaves unused (a topology holds
    no GPU generation, and ``algorithm="nccl"`` reads Hopper's constants only from a
    machine whose GPUs share an NVLS switch: pass ``arch="hopper"`` with it, as NCCL
    keeps Hopper's constants with NVLS off). ``sharp=True``
    makes the NDR leaves and spine reduce in the network (Quantum-2 SHARP, for NCCL's
    NVLS across nodes and CollNet with ``collnet=1``). Two Intel Xeon Platinum 8480C
    CPUs (``cpu="intel"``; the DGX H100 user guide). See :func:`dgx`.

    Raises:
        TopologyError: as :func:`dgx`, or a reduction rate other than the default given
            with ``nvls=False``.
    """
    if not flag(nvls, "nvls", error=TopologyError) and nvswitch_reduce_bandwidth not in (
            None, NVSWITCH_REDUCE_BANDWIDTH_H100):
        raise TopologyError(f"nvswitch_reduce_bandwidth={nvswitch_reduce_bandwidth!r} is "
                            f"not accepted with nvls=False (a switch that only forwards); "
                            f"leave it out, or set nvls=True")
    if nvls and nvswitch_reduce_bandwidth is None:
        nvswitch_reduce_bandwidth = NVSWITCH_REDUCE_BANDWIDTH_H100
    return dgx(nodes, nvlink_bandwidth=nvlink_bandwidth, pcie_bandwidth=pcie_bandwidth,
               nic_bandwidth=nic_bandwidth, name="dgx_h100", nics_per_node=nics_per_node,
               nvlink_latency=nvlink_latency, pcie_latency=pcie_latency,
               network_latency=network_latency, network_kind=network_kind,
               leaf_radix=leaf_radix, oversubscription=oversubscription,
               reduce_bandwidth=reduce_bandwidth,
               nvswitch_reduce_bandwidth=nvswitch_reduce_bandwidth if nvls else None,
               sharp=sharp, cpu=cpu)
