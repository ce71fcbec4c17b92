"""NCCL's ring search (:mod:`.search`) on a simcoll topology: the hops, routes and
bandwidths it works on, read off the communicator's nodes.

On one node the search runs on its GPUs: over NVLink on the bandwidth a GPU has to the
others, over PCI through the hops of a ring in the GPUs' order. Across nodes NCCL runs it
on every node for that node's own GPUs and NICs, and every rank then keeps the fewest
channels and the lowest speed any rank found (``std::min`` over the ranks'
``graphInfo``, src/init.cc of 2.30.7): so here each node of a shape not met before (its
size, and in local order each GPU's links, those of the devices next to it and those of
its NICs) is searched towards the node after it (nodes of one shape are taken to be
alike), and :func:`~.search.fewest` combines them. The other figures of
:class:`~.machine.Machine` (the link kind and bandwidth inside a node, the GPUs' path to
their NICs) are read on the first node. A node searches as NCCL's patterns say:

* a GPU alone on its node: its routes to the next node through each of its NICs, on its
  own total bandwidth (its NVLinks together or its PCI link);
* GPUs over NVLink: every GPU's routes to the next node's GPU of its place (round the
  next node's GPUs where it has fewer), the channels' NVLink hops spread over the node;
* GPUs over PCI: NET -> first GPU -> ... -> last GPU -> NET, in the node's GPU order
  (NCCL's first try, ``FORCED_ORDER_PCI``, which its later channels replay), each
  channel through one of the node's NICs in turn, entering and leaving by it; NCCL's
  other GPU orders are not tried.

Over PCI each hop takes the links NCCL's topology knows (host memory, where a message is
staged without peer-to-peer access, is not one of them), and with Intel CPUs a path from
a GPU through a CPU's root complex within one socket (NCCL's ``PATH_PHB``) weighs its PCI
links by ``INTEL_P2P_OVERHEAD`` (``followPath``, src/graph/search.cc).

Every rate is read per direction (:func:`nccl_rate`), so a machine gives the same search
whichever end of each link it names first: a link at its rate the way a route crosses
it, but the way into a GPU at the GPU's own rate away from it, as NCCL reads a GPU's
link speed off the GPU and gives both directions that figure.
"""

from __future__ import annotations

from simcoll.algorithms.nccl.nics import NVLINK_KINDS, bound_routes, nics_of, node_nics
from simcoll.algorithms.nccl.search import (
    INTEL_P2P_OVERHEAD,
    Searched,
    across_nodes_channels,
    across_pci_nodes_channels,
    fewest,
    one_node_channels,
    one_node_ring_channels,
    pci_tree_intra_speed,
    tree_intra_speed,
)
from simcoll.sums import sum_in_order
from simcoll.topology.graph import Topology

__all__ = ["NVLINK_KINDS", "nccl_rate", "node_links", "gpu_total_bw", "is_cpu", "ring_graph",
           "incident_links", "node_shape", "distinct_nodes"]

_Hop = list[tuple[int, float, float]]
"""A hop's links as ``(directed link, GB/s, weight)``."""


def nccl_rate(topology: Topology, d: int) -> float:
    """Bytes/s of directed link ``d`` (as routes index them) as NCCL's topology knows it.

    NCCL's graph holds each link once each way (``ncclTopoConnectNodes``, src/graph/
    topo.cc) and its search takes, on every link of a path, the rate of the direction
    it crosses (``followPath``, src/graph/search.cc): here the link's rate that way
    (:meth:`~simcoll.topology.graph.Topology.bandwidth_of`), whichever end was named
    ``u``. The way into a GPU is the exception: NCCL reads a GPU's link speed off the GPU
    (its PCIe width and generation, its NVLink count) and adds the link each way at that
    figure, so it counts at the link's rate away from the GPU. On ``pcie_node(p2p=False)``
    NCCL's search so sees 48 GB/s both ways on Gen5, not the 35.2 GB/s at which the
    GPU's SMs read host memory, which NCCL does not know of.
    """
    sender, receiver = topology.directed_link(d)
    if topology.device(receiver).kind == "gpu" and topology.device(sender).kind != "gpu":
        return topology.bandwidth_of(d ^ 1)
    return topology.bandwidth_of(d)


def node_links(topology: Topology, group: list[int]) -> tuple[str, float]:
    """How a node's first two GPUs (``group``: world ranks) reach each other: "nvlink"
    where every link of the route is NVLink, else "pci", and the route's least
    bandwidth (bytes/s, :func:`nccl_rate`) without its host memory links, which NCCL's
    topology has not (a route staged in host memory, ``pcie_node(p2p=False)``)."""
    route = topology.route(group[0], group[1])
    kinds = {topology.links[d >> 1].kind for d in route.links}
    kind = "nvlink" if kinds <= set(NVLINK_KINDS) else "pci"
    return kind, min(nccl_rate(topology, d) for d in route.links
                     if topology.links[d >> 1].kind != "memory")


def gpu_total_bw(topology: Topology, rank: int) -> float:
    """NCCL's ``getTotalBw`` of a GPU (bytes/s): its NVLinks together or, if more, its
    link of another kind (a PCI link), each at its rate away from the GPU (NCCL reads
    the GPU's own links, those leaving it)."""
    gpu = topology.gpus[rank]
    links = [topology.links[topology.link_index(gpu, other)]
             for other in topology.neighbors(gpu)]
    away = [(link.kind, link.rate(0 if link.u == gpu else 1)) for link in links]
    nvlink = sum_in_order(rate for kind, rate in away if kind in NVLINK_KINDS)
    other = max((rate for kind, rate in away if kind not in NVLINK_KINDS), default=0.0)
    return max(nvlink, other)


def ring_graph(topology: Topology, groups: list[list[int]], arch: str,
               searched: list[int]) -> tuple[Searched, float]:
    """NCCL's ring graph on the nodes ``groups`` (world ranks, node by node, in local
    order), and the speed (GB/s) of its tree graph inside a node: across nodes the least
    ``bwIntra`` a node's tree search raises to (:func:`~.search.tree_intra_speed`,
    :func:`~.search.pci_tree_intra_speed`; search.cc raises it on any node count, the
    tuner reads it on two nodes only), on one node the ring's. ``searched``: the indexes
    of the nodes to search, one of each shape (:func:`distinct_nodes`). No channels on a
    node of one GPU alone."""
    if len(groups) == 1:
        group = groups[0]
        if len(group) < 2:
            return Searched(0, 0, 0.0), 0.0
        kind, bw = node_links(topology, group)
        found = (one_node_channels(arch, bw / 1e9) if kind == "nvlink"
                 else _pci_node_channels(topology, group, arch))
        return found, found.speed
    graphs = [_node_graphs(topology, groups[j], groups[(j + 1) % len(groups)], arch)
              for j in searched]
    return fewest([ring for ring, _ in graphs], arch), min(tree for _, tree in graphs)


def distinct_nodes(topology: Topology, groups: list[list[int]]) -> list[int]:
    """The index of each node of ``groups`` whose shape (:func:`node_shape`) no node
    before it has: the nodes NCCL's per-rank figures could tell apart."""
    links = incident_links(topology)
    seen: set[tuple] = set()
    out = []
    for j, group in enumerate(groups):
        shape = node_shape(topology, group, links)
        if shape not in seen:
            seen.add(shape)
            out.append(j)
    return out


def incident_links(topology: Topology) -> dict[str, list[tuple[str, float, float]]]:
    """Each device's links as ``(kind, bandwidth away, bandwidth back)``, in one pass."""
    out: dict[str, list[tuple[str, float, float]]] = {}
    for link in topology.links:
        back = link.bandwidth if link.back is None else link.back
        out.setdefault(link.u, []).append((link.kind, link.bandwidth, back))
        out.setdefault(link.v, []).append((link.kind, back, link.bandwidth))
    return out


def node_shape(topology: Topology, group: list[int],
                links: dict[str, list[tuple[str, float, float]]]) -> tuple:
    """What tells a node's search apart from another's: in local order, each GPU's links,
    those of the devices next to it, and those of the NICs it takes (NCCL searches every
    node; here nodes of one shape are searched once)."""
    shape = []
    for rank in group:
        gpu = topology.endpoint_name(rank)
        near = [sorted(links.get(other, ())) for other in topology.neighbors(gpu)]
        nics = [sorted(links.get(nic, ())) for nic in nics_of(topology, gpu)]
        shape.append((tuple(sorted(links.get(gpu, ()))), tuple(map(tuple, sorted(near))),
                      tuple(map(tuple, nics))))
    return len(group), tuple(shape)


def _node_graphs(topology: Topology, group: list[int], after: list[int], arch: str
                 ) -> tuple[Searched, float]:
    """One node's ring graph towards the node ``after`` it, and its tree graph's speed
    inside the node (raised as search.cc raises it)."""
    if len(group) == 1:
        own = gpu_total_bw(topology, group[0]) / 1e9
        ring = across_nodes_channels(arch, own, 1, _routes(topology, group, after))
        return ring, tree_intra_speed(arch, ring, own, 1)
    kind, bw = node_links(topology, group)
    if kind == "nvlink":
        ring = across_nodes_channels(arch, bw / 1e9, len(group),
                                     _routes(topology, group, after))
        return ring, tree_intra_speed(arch, ring, bw / 1e9, len(group))
    return _pci_nodes_graphs(topology, group, after, arch)


def _routes(topology: Topology, group: list[int], after: list[int]
            ) -> list[list[tuple[int, float]]]:
    """Each GPU's routes to the GPU of its place on the node ``after`` (round its GPUs),
    through each NIC it binds channels to, as ``(directed link, GB/s)`` pairs."""
    return [[(d, nccl_rate(topology, d) / 1e9) for d in links]
            for i, a in enumerate(group)
            for links in bound_routes(topology, a, after[i % len(after)])]


def is_cpu(topology: Topology, name: str) -> bool:
    """A CPU's root complex, as simcoll's presets build it: a device linked to host
    memory."""
    return any(topology.links[topology.link_index(name, other)].kind == "memory"
               for other in topology.neighbors(name))


def _weighted(topology: Topology, links: tuple[int, ...] | list[int], from_gpu: bool) -> _Hop:
    """``links`` (a path) as NCCL's search counts them: without host memory links, the
    PCI ones weighed by ``INTEL_P2P_OVERHEAD`` where the path goes ``from_gpu`` through
    an Intel CPU's root complex within one socket."""
    kinds = {topology.links[d >> 1].kind for d in links}
    through_cpu = any(is_cpu(topology, topology.directed_link(d)[1]) for d in links[:-1])
    weight = INTEL_P2P_OVERHEAD if (from_gpu and topology.cpu == "intel" and through_cpu
                                     and "inter_socket" not in kinds) else 1.0
    return [(d, nccl_rate(topology, d) / 1e9,
             weight if topology.links[d >> 1].kind == "pcie" else 1.0)
            for d in links if topology.links[d >> 1].kind != "memory"]


def _pci_hops(topology: Topology, pairs: list[tuple[int, int]]) -> list[_Hop]:
    """The hops from GPU a to GPU b of each pair, weighed (:func:`_weighted`)."""
    return [_weighted(topology, topology.route(a, b).links, True) for a, b in pairs]


def _pci_node_channels(topology: Topology, ring: list[int], arch: str) -> Searched:
    """NCCL's ring search on one node over PCI, through the GPUs in ``ring``'s order."""
    hops = _pci_hops(topology, list(zip(ring, ring[1:] + ring[:1])))
    total = max(gpu_total_bw(topology, rank) for rank in ring)
    return one_node_ring_channels(arch, total / 1e9, hops)


def _exit_route(topology: Topology, a: int, b: int, via: tuple[str, ...] | None) -> _Hop:
    """GPU ``a``'s route to GPU ``b`` on the next node through the NICs ``via``, weighed:
    up to its first NIC as a path from a GPU (NCCL's GPU -> NET), the rest as a path
    from a NIC (NET -> GPU, never weighed)."""
    links = topology.route(a, b, via=via).links
    ends = [topology.directed_link(d)[1] for d in links]
    cut = next((i + 1 for i, name in enumerate(ends)
                if topology.device(name).kind == "nic"), len(links))
    return (_weighted(topology, links[:cut], True)
            + _weighted(topology, links[cut:], False))


def _pci_nodes_graphs(topology: Topology, group: list[int], after: list[int], arch: str
                      ) -> tuple[Searched, float]:
    """NCCL's ring search on a node over PCI towards the node ``after`` it: the hops
    from its first GPU to its last, then from the last through each of its NICs in
    turn (paired with the next node's NIC of that place) to the next node's first GPU
    (:func:`~.search.across_pci_nodes_channels`); and its tree speed inside the node,
    raised with the tree's ways to the NICs from the first GPU
    (:func:`~.search.pci_tree_intra_speed`)."""
    chain = [link for hop in _pci_hops(topology, list(zip(group, group[1:]))) for link in hop]
    ours, theirs = node_nics(topology, group), node_nics(topology, after)
    vias: list[tuple[str, ...] | None] = [
        (mine, theirs[k % len(theirs)]) if theirs else (mine,) for k, mine in enumerate(ours)
    ] or [None]
    total = max(gpu_total_bw(topology, rank) for rank in group)
    ring = across_pci_nodes_channels(
        arch, total / 1e9, chain, [_exit_route(topology, group[-1], after[0], via)
                                   for via in vias])
    tree = [_exit_route(topology, group[0], after[0], via) for via in vias]
    return ring, pci_tree_intra_speed(arch, ring, chain, tree)
