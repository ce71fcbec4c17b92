"""Two-level fat trees (leaves and a spine) and generic GPU servers on one.

A leaf switch has ``leaf_radix`` ports at the NIC rate: half face the nodes, half face the
spine, so a leaf serves ``leaf_radix // 2`` nodes without oversubscription. The spine
layer is drawn as one non-blocking switch joined to every leaf by one link that carries
the leaf's whole uplink capacity, ``leaf_radix // 2 x nic_bandwidth / oversubscription``:
a fat tree whose uplinks share the load perfectly (ideal adaptive routing), with unique
routes. With ``spines = k > 1`` the spine layer is k switches instead, each leaf joined
to each by a k-th of that capacity, and routes between leaves are hashed over them
(``Topology.routing = "ecmp"``), so flows can collide on one uplink as on a real
equal-cost multi-path fabric. With ``oversubscription = 2`` a leaf has half as much
capacity up as down. A machine whose NICs all fit one leaf gets no spine.

Rail-optimised fabrics (DGX SuperPOD): NIC k of every node sits on leaf k of the node's
leaf group (rail k), so GPUs with the same local index talk through one leaf. NVIDIA's
DGX SuperPOD reference architectures build scalable units of 20 DGX A100 (on 40-port
HDR QM8700 leaves) and 32 DGX H100 (on 64-port NDR QM9700 leaves), one leaf per rail.
"""

from __future__ import annotations

import math
import sys

from simcoll.checks import Count, flag, integer, real, shown
from simcoll.errors import TopologyError
from simcoll.topology.builders import (
    MAX_DEVICES,
    _check_count,
    _check_kinds,
    _check_quantities,
    _check_size,
)
from simcoll.topology.graph import Topology
from simcoll.units import GB, Gbps, us

__all__ = ["fat_tree", "attach_fat_tree"]


def _leaf_capacity(leaf_radix: Count, oversubscription: float, nic_bandwidth: float,
                   spines: Count = 1) -> tuple[int, float]:
    """Nodes per leaf (half the ports) and the rate of each of a leaf's links to the
    spines, ``leaf_radix // 2 x nic_bandwidth / oversubscription / spines``, computed in
    that order as the links are built, refused where it would not be a finite rate above
    0 (``nic_bandwidth`` is checked first).

    Raises:
        TopologyError: naming ``leaf_radix`` and ``oversubscription``.
    """
    radix = integer(leaf_radix, "leaf_radix", minimum=2, error=TopologyError,
                    what="ports per leaf switch; half face the nodes")
    # below 1 a leaf's uplinks would carry more than its ports do
    ratio = real(oversubscription, "oversubscription", minimum=1.0, error=TopologyError,
                 what="leaf down-link capacity over up-link capacity, e.g. 1.0 or 2.0")
    nic = real(nic_bandwidth, "nic_bandwidth", strict=True, error=TopologyError,
               what="bytes/s")
    spines = integer(spines, "spines", minimum=1, maximum=MAX_DEVICES, error=TopologyError,
                     what="switches in the spine layer")
    per_leaf = radix // 2
    uplink = per_leaf * nic / ratio / spines if per_leaf <= sys.float_info.max else math.inf
    if not sys.float_info.min <= uplink <= sys.float_info.max:
        shared = "" if spines == 1 else f" / spines ({spines})"
        raise TopologyError(
            f"leaf_radix={shown(leaf_radix)} with oversubscription={shown(oversubscription)} "
            f"is not accepted: a leaf's link to the spine, leaf_radix // 2 x nic_bandwidth "
            f"({nic:g}) / oversubscription{shared}, would be {uplink:g} bytes/s (computed "
            f"in that order); keep it between {sys.float_info.min:.3g} and "
            f"{sys.float_info.max:.3g}")
    return per_leaf, uplink


def attach_fat_tree(topo: Topology, nics: list[list[str]], *, nic_bandwidth: float,
                    latency: float, kind: str, leaf_radix: Count,
                    oversubscription: float, sharp: bool = False, spines: Count = 1) -> None:
    """Join ``nics[node][rail]`` by leaves (one per rail and group of nodes) and a spine.

    Leaves are named ``leaf<rail>`` (``leaf<rail>_<group>`` once there are several
    groups of ``leaf_radix // 2`` nodes), the spine ``spine`` (with ``spines`` above 1:
    ``spine0`` ... and ECMP routing, see the module). Every NIC-leaf and leaf-spine link
    has ``latency`` and ``kind``. ``sharp=True`` makes every switch reduce in the network
    (InfiniBand SHARP: in-network devices, reductions at line rate, drawn as free): each
    leaf aggregates its nodes, and the spine the leaves.

    Raises:
        TopologyError: a bad ``leaf_radix``, ``oversubscription`` or ``spines``.
    """
    per_leaf, uplink = _leaf_capacity(leaf_radix, oversubscription, nic_bandwidth, spines)
    groups = -(-len(nics) // per_leaf)
    rails = len(nics[0])
    reduces = math.inf if sharp else None
    leaves = {(g, r): topo.add_switch(f"leaf{r}" if groups == 1 else f"leaf{r}_{g}",
                                      reduce_bandwidth=reduces)
              for g in range(groups) for r in range(rails)}
    for node, row in enumerate(nics):
        for rail, nic in enumerate(row):
            topo.add_link(nic, leaves[node // per_leaf, rail], bandwidth=nic_bandwidth,
                          latency=latency, kind=kind)
    if len(leaves) > 1:
        names = ["spine"] if spines == 1 else [f"spine{k}" for k in range(spines)]
        layer = [topo.add_switch(name, reduce_bandwidth=reduces) for name in names]
        for leaf in leaves.values():
            for spine in layer:
                topo.add_link(leaf, spine, bandwidth=uplink,
                              latency=latency, kind=kind)
        if spines > 1:
            topo.routing = "ecmp"


def fat_tree(nodes: Count, gpus_per_node: Count = 8, *, oversubscription: float = 1.0,
             leaf_radix: Count = 32, intra_bandwidth: float = 300 * GB,
             intra_latency: float = 1 * us, nic_bandwidth: float = 100 * Gbps,
             pcie_bandwidth: float = 24 * GB, pcie_latency: float = 1 * us,
             network_latency: float = 1.5 * us, network_kind: str = "ib",
             reduce_bandwidth: float = math.inf, sharp: bool = False,
             spines: Count = 1) -> Topology:
    """Generic GPU servers, one NIC each, on a two-level fat tree.

    The GPUs of a node share a node switch (links of ``intra_bandwidth``); the node
    switch reaches the node's NIC over PCIe (``pcie_bandwidth``, NCCL's Gen4 x16 figure
    by default); the NICs sit ``leaf_radix // 2`` to a leaf, and leaves reach a spine
    with ``oversubscription`` times less capacity up than a full leaf's ports down (a
    leaf with fewer nodes keeps the full leaf's uplinks; with every node on one leaf
    there is no spine; see the module). A
    message from GPU a to GPU b of another node under the same leaf crosses
    a -> node switch -> NIC -> leaf -> NIC -> node switch -> b; under another leaf it
    also crosses the spine. Rank ``node * gpus_per_node + local`` (its ``node``).
    ``sharp=True`` makes the leaves and the spine reduce in the network (InfiniBand
    SHARP, for NCCL's CollNet with ``collnet=1``). ``spines=k`` draws the spine layer as
    k switches with ECMP routing (see the module), where 1 draws one switch that shares
    the load perfectly.

    Raises:
        TopologyError: a count, ratio, bandwidth or latency that is not accepted, a
            ``sharp`` that is not a bool, or ``sharp`` with several spines built.
    """
    sharp = flag(sharp, "sharp", error=TopologyError)
    nodes = _check_count("nodes", nodes)
    gpus_per_node = _check_count("gpus_per_node", gpus_per_node)
    spines = _check_count("spines", spines)
    _check_quantities(intra_bandwidth=intra_bandwidth, intra_latency=intra_latency,
                      nic_bandwidth=nic_bandwidth, pcie_bandwidth=pcie_bandwidth,
                      pcie_latency=pcie_latency, network_latency=network_latency,
                      reduce_bandwidth=reduce_bandwidth)
    per_leaf, _ = _leaf_capacity(leaf_radix, oversubscription, nic_bandwidth, spines)
    # Per node: its switch, GPUs and NIC (with more than one node), a link from each GPU,
    # from the switch to the NIC and from the NIC to its leaf; the leaves and, where there
    # are several, the spines and a link from each leaf to each.
    leaves = -(-nodes // per_leaf) if nodes > 1 else 0
    layer = spines if leaves > 1 else 0
    if sharp and layer > 1:
        raise TopologyError(f"sharp=True with spines={spines} is not accepted where the "
                            f"leaves are joined by spines: NCCL's CollNet reduces at one "
                            f"SHARP root, the spine; give spines=1")
    has_nic = 1 if nodes > 1 else 0
    _check_size(nodes * (1 + gpus_per_node + has_nic) + leaves + layer,
                nodes * (gpus_per_node + 2 * has_nic) + leaves * layer,
                nodes=nodes, gpus_per_node=gpus_per_node, leaf_radix=leaf_radix,
                spines=spines)
    _check_kinds(network_kind=network_kind)
    topo = Topology(f"fat_tree({nodes}x{gpus_per_node})")
    nics = []
    for node in range(nodes):
        sw = topo.add_switch(f"node{node}")
        for _ in range(gpus_per_node):
            gpu = topo.add_gpu(reduce_bandwidth=reduce_bandwidth, node=node)
            topo.add_link(gpu, sw, bandwidth=intra_bandwidth, latency=intra_latency,
                          kind="nvswitch")
        if nodes > 1:
            nic = topo.add_nic(f"nic{node}")
            topo.add_link(sw, nic, bandwidth=pcie_bandwidth, latency=pcie_latency,
                          kind="pcie")
            nics.append([nic])
    if nics:
        attach_fat_tree(topo, nics, nic_bandwidth=nic_bandwidth, latency=network_latency,
                        kind=network_kind, leaf_radix=leaf_radix,
                        oversubscription=oversubscription, sharp=sharp, spines=spines)
    return topo
