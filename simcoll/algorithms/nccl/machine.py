"""What NCCL's tuner learns from its topology search, read off a simcoll topology.

NCCL measures its machine once (``src/graph/``: paths, bandwidths, the ring and tree
graphs) and its tuner (``src/graph/tuning.cc``) reasons on a few figures: ranks, nodes,
GPUs per node, whether GPUs of a node talk over NVLink or PCI, the bandwidth a GPU has to
its node and to the network, and the GPU generation. :func:`describe` reads them from the
routes of a simcoll topology, so any machine, preset or hand-built, gets a tuner.

With ``NCCL_COLLNET_ENABLE=1`` and a fabric whose switches reduce in the network
(InfiniBand SHARP), NCCL can run NVLS across nodes (``nvls_tree.py``) and CollNet
(``collnet.py``): the owners of a block on every node all-reduce it through a tree of
SHARP switches (``sharp.py``). Here a SHARP switch
is an in-network device no GPU is linked to directly (a leaf or the spine of
``dgx_h100(nodes, sharp=True)``, or any such device of a hand-built topology); an
owner's leaf is the first one on its route to the owner on the next node (through the
NIC the owner's channel is bound to where it has several), and several leaves must meet
at one more, the first on the routes between them (see :func:`sharp_groups`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from simcoll.algorithms.nccl.nics import (
    NVLINK_KINDS,
    bound_routes,
    channel_nics,
    kept,
    nearest_nics,
    nic_reach,
)
from simcoll.algorithms.nccl.node_search import (
    distinct_nodes,
    is_cpu,
    nccl_rate,
    node_links,
    ring_graph,
)
from simcoll.comm import Comm
from simcoll.topology.graph import Topology, Via, node_order

__all__ = ["Machine", "describe", "node_order", "node_layout", "network_reducers", "SharpTree",
           "sharp_groups"]


@dataclass(frozen=True)
class Machine:
    """The figures NCCL's tuner works with, for one communicator.

    Attributes:
        nranks, nnodes: ranks and nodes of the communicator; ``ppn`` ranks per node.
        intra: "nvlink" when GPUs of a node reach each other over NVLink only, else "pci"
            (on every node: NCCL keeps the farthest ``typeIntra`` any rank found).
        intra_bw: bytes/s a GPU has to another GPU of its node (the least over the nodes
            of two GPUs or more, as NCCL keeps the lowest ``bwIntra``; inf where every
            node holds one). Like ``inter_bw`` it reads each link as NCCL's topology
            knows it (:func:`~.node_search.nccl_rate`): at its rate the way a route
            crosses it, whichever end the link names first, but the way into a GPU at
            the rate away from it, so not a lower ``back_bandwidth`` into a GPU (its
            reads of host memory on ``pcie_node(p2p=False)``).
        inter_bw: bytes/s a node has to the network, over all its GPUs' routes to the
            next node, each sharing the links it crosses with the others (0 with one
            node; read on the first node).
        nvls: every GPU has an in-network device (NVLink SHARP) directly linked to it,
            the same one for the GPUs of a node and another for each node
            (:func:`_nvls_switches`).
        arch: the GPU generation NCCL's constants are indexed by.
        sharp: the nodes are joined through switches that reduce in the network
            (InfiniBand SHARP; see :func:`sharp_groups`), so NVLS and CollNet can run
            across them.
        rails: a node's paths to the network: the links that bound its GPUs' routes to
            the next node (one per NIC on the presets; 0 with one node).
        cpu: the servers' CPU vendor (``Topology.cpu``): NCCL's LL cap across nodes and
            its network overhead per step depend on it.
        lone_gpu_node: some node holds a single GPU of the communicator. NCCL's tree
            search then takes its plain tree pattern (``NCCL_TOPO_PATTERN_TREE``: all
            network traffic through one GPU; src/graph/search.cc; so ``plain_tree``).
            NCCL then runs no NVLS either: ``ncclNvlsInit`` leaves NVLS off on a node of
            one GPU, and its NVLS graph, which every rank cuts to the fewest channels any
            rank found, has none.
        plain_tree: NCCL's tree graph has the plain tree pattern
            (``NCCL_TOPO_PATTERN_TREE``), so its tuner counts 0.85 of the tree's bus
            bandwidth (``maxTreePattern``, tuning.cc): on a node of one GPU, and from
            Hopper on where a GPU has a nearest NIC (:func:`~.nics.nearest_nics`) no
            other GPU of its node has. The balanced tree the search tries first has a
            channel's first two GPUs both reach one NIC (search.cc, ``backToNet`` with
            ``nextBackToNet``) at the node's best path type, and must find as many
            channels as the ring; a NIC of one GPU's own gives it fewer, and Hopper
            then tries the simpler tree (``ccMin >= 90``, ``NCCL_TOPO_PATTERN_TREE``)
            before any farther path, and keeps it. (Read from the source; an
            approximation of the search's channel count.)
        uneven_nodes: the nodes hold different numbers of the communicator's GPUs.
            NCCL then gives NVLS as many heads as the fewest GPUs of a node (every
            rank keeps the fewest NVLS channels any node found; init.cc). simcoll runs
            neither CollNet nor NVLS across nodes there: NCCL has no working plan to
            follow, as its CollNet rank map (``collNetInitRailRankMap``, coll_net.cc)
            numbers a rank node x localRanks + its place in the node, which on nodes of
            4 and 2 GPUs gives the second node's ranks 2 and 3, the first node's own,
            and on nodes of 2 and 4 numbers 4 to 7 of 6 ranks.
        heads_inter_bw: bytes/s the NVLS heads of a node (its first GPUs, as many as
            the smallest node holds) can send at once to the next node; the same as
            ``inter_bw`` where the nodes are of one size (None: take ``inter_bw``).
        smallest_node: the fewest GPUs of the communicator on one node (NCCL's
            ``minLocalRanks``; 0: ``ppn``).
        nic_path: how far a GPU's traffic to the next node goes before its NIC, as
            NCCL's path types name it (its graphs' ``typeInter``): "pxb" through PCIe
            switches only (PIX or PXB, and a GPU linked to the network directly), "pxn"
            through another GPU of its node (over NVLink), "phb" through a host (a CPU's
            host bridge, or across sockets); the farthest of any node's GPUs (NCCL keeps
            the farthest ``typeInter`` any rank found), as simcoll's rings leave a node
            from every GPU. "pxb" on one node, as NCCL starts its search there
            (``PATH_PIX``).
        channels: the channels NCCL's rings and trees run on here, from its topology
            search (:mod:`~simcoll.algorithms.nccl.node_search`), without CollNet's
            (:func:`~.tune_model.comm_channels` adds them); 0 on a communicator of one GPU,
            which searches no graph.
        graph_channels: the channels of the search's ring graph, which NCCL's tuner
            counts (half of ``channels`` or less; 0 with ``channels``).
        graph_channel_bw: bytes/s of one of those graph channels, the search's speed
            (its ``bwIntra``; 0 with ``channels``): NCCL's tuner takes ``graph_channels``
            times it as the bus bandwidth of rings.
        tree_channel_bw: the same for trees as NCCL's tuner reads it (the tree graph
            keeps the ring graph's channels): on two nodes the tree graph's ``bwIntra``
            (``tree_graph_bw``), else ``graph_channel_bw``.
        tree_graph_bw: the tree graph's own ``bwIntra`` in bytes/s, which its search
            raises above the ring's speed on any node count
            (:func:`~simcoll.algorithms.nccl.search.tree_intra_speed`; what NCCL's log
            prints), the ring's on one node.
        nvswitch: the first GPU of every node (of every shape, one GPU too) has an NVLink
            to a switch (NCCL's NVS node), not only direct GPU-to-GPU NVLinks or PCIe;
            NCCL runs CollNet Direct only where it finds one (``nvsCount`` in tuning.cc).
        nvls_missing: where ``nvls`` is false, why, naming a GPU or device (empty where
            it is true).
    """

    nranks: int
    nnodes: int
    intra: str
    intra_bw: float
    inter_bw: float
    nvls: bool
    arch: str
    sharp: bool = False
    rails: int = 0
    cpu: str = "unknown"
    lone_gpu_node: bool = False
    plain_tree: bool = False
    uneven_nodes: bool = False
    heads_inter_bw: float | None = None
    smallest_node: int = 0
    nic_path: str = "pxb"
    channels: int = 0
    graph_channels: int = 0
    graph_channel_bw: float = 0.0
    tree_channel_bw: float = 0.0
    tree_graph_bw: float = 0.0
    nvswitch: bool = True
    nvls_missing: str = ""

    @property
    def ppn(self) -> float:
        """Ranks per node."""
        return self.nranks / self.nnodes

    @property
    def ll128_by_default(self) -> bool:
        """Whether NCCL enables LL128 here without being asked (src/graph/tuning.cc of
        NCCL 2.30.7): only where a node's GPUs talk over NVLink (``typeIntra <=
        PATH_NVB``; LL128 relies on 128-byte stores arriving whole, which NCCL trusts
        NVLink for and not PCI), and where a GPU reaches its NIC within PCIe switches
        (``typeInter <= PATH_PXB``) or, from Hopper on, through another GPU too
        (``PATH_PXN``): never through a host (:attr:`nic_path`)."""
        reach = ("pxb", "pxn") if self.arch in ("hopper", "blackwell") else ("pxb",)
        return self.intra == "nvlink" and self.nic_path in reach


def node_layout(comm: Comm) -> tuple[list[list[int]], int, int]:
    """(the ranks of every node, this rank's node index, its local index)."""
    groups = node_order([comm.node_of(r) for r in range(comm.size)])
    node = next(j for j, members in enumerate(groups) if comm.rank in members)
    return groups, node, groups[node].index(comm.rank)


def network_reducers(topology: Topology) -> frozenset[str]:
    """The in-network devices no GPU is linked to directly: SHARP switches and NICs."""
    gpus = set(topology.gpus)
    return frozenset(d for d in topology.in_network
                     if not gpus.intersection(topology.neighbors(d)))


def _first_reducer(topology: Topology, src: int, dst: int,
                   reducers: frozenset[str], via: Via | None = None) -> str | None:
    for d in topology.route(src, dst, via=via).links:
        link = topology.links[d >> 1]
        ahead = link.v if d & 1 == 0 else link.u
        if ahead in reducers:
            return ahead
    return None


@dataclass(frozen=True)
class SharpTree:
    """How the owners of one local index (one GPU per node) all-reduce through SHARP.

    Attributes:
        leaves: each SHARP switch the owners reach first, with the positions of the
            owners it serves, in node order.
        root: the SHARP switch that joins the leaves (None where one leaf serves all).
    """

    leaves: dict[str, tuple[int, ...]]
    root: str | None


def _sharp_tree(topology: Topology, owners: list[int], reducers: frozenset[str],
                choice: int) -> SharpTree | None:
    """The SHARP tree of ``owners`` (world ranks, one per node, in node order), or None:
    each owner's leaf is the first SHARP switch on its route to the next owner (through
    each end's NIC ``choice`` where a GPU has several: :func:`channel_nics`), and
    several leaves must meet at one more SHARP switch on the routes between them."""
    leaves: dict[str, list[int]] = {}
    for i, owner in enumerate(owners):
        following = owners[(i + 1) % len(owners)]
        leaf = _first_reducer(topology, owner, following, reducers,
                              channel_nics(topology, owner, following, choice))
        if leaf is None:
            return None
        leaves.setdefault(leaf, []).append(i)
    names = list(leaves)
    roots = {_first_reducer(topology, topology.address(a), topology.address(b),
                            reducers - {a, b})
             for a, b in zip(names, names[1:] + names[:1])} if len(names) > 1 else {None}
    root = roots.pop()
    if roots or (root is None and len(names) > 1) or root in leaves:
        return None
    return SharpTree({leaf: tuple(positions) for leaf, positions in leaves.items()}, root)


_SHARP_TREES: WeakKeyDictionary[Topology, tuple[int, dict[tuple[tuple[int, ...], int],
                                                       dict[int, SharpTree] | None]]] = \
    WeakKeyDictionary()
"""What :func:`sharp_groups` found, per topology and its generation, by ranks and NIC
choice: every GPU of a run asks for the same trees."""


def sharp_groups(topology: Topology, ranks: tuple[int, ...], choice: int = 0
                 ) -> dict[int, SharpTree] | None:
    """For NVLS across nodes and CollNet over ``ranks`` (world ranks), the SHARP tree of
    each local index, whose owners are given by position, each reaching the fabric
    through its NIC ``choice`` where it has several (its first for NVLS and CollNet
    Direct, whose heads NCCL gives one NIC each; CollNet Chain's channels take others:
    :func:`chain_lanes`); None where there is one node, nodes differ in size, or some
    local index has no SHARP tree. Kept until the topology changes (the trees are
    shared: do not modify them)."""
    known = kept(_SHARP_TREES, topology)
    key = (ranks, choice)
    if key not in known:
        known[key] = _find_sharp_groups(topology, ranks, choice)
    return known[key]


def _find_sharp_groups(topology: Topology, ranks: tuple[int, ...], choice: int
                       ) -> dict[int, SharpTree] | None:
    reducers = network_reducers(topology)
    if not reducers:
        return None
    groups = node_order([topology.gpu_nodes[r] for r in ranks])
    if len(groups) < 2 or len({len(g) for g in groups}) > 1:
        return None
    trees: dict[int, SharpTree] = {}
    for local in range(len(groups[0])):
        positions = [members[local] for members in groups]
        tree = _sharp_tree(topology, [ranks[q] for q in positions], reducers, choice)
        if tree is None:
            return None
        trees[local] = SharpTree({leaf: tuple(positions[i] for i in served)
                                  for leaf, served in tree.leaves.items()}, tree.root)
    return trees


def _network_share(topology: Topology, here: list[int], there: list[int]
                   ) -> tuple[float, int]:
    """(bytes/s, paths): what the GPUs ``here`` can send at once to the GPUs ``there``
    (another node, local GPU to local GPU, through each of a GPU's NICs where it has
    several), each route getting the least share of a link it crosses (the link's
    bandwidth the way it is crossed, :func:`~.node_search.nccl_rate`, over the routes
    crossing it that way), and how many links bound them (the most
    shared of a route's tightest links)."""
    routes = [links for a, b in zip(here, there) for links in bound_routes(topology, a, b)]
    crossing: dict[int, int] = {}
    for links in routes:
        for d in links:
            crossing[d] = crossing.get(d, 0) + 1
    total, bounds = 0.0, set()
    for links in routes:
        share = {d: nccl_rate(topology, d) / crossing[d] for d in links}
        tightest = min(share.values())
        total += tightest
        bounds.add(max((d for d in links if share[d] == tightest), key=lambda d: crossing[d]))
    return total, len(bounds)


_NIC_PATHS = ("pxb", "pxn", "phb")


def _nic_path(topology: Topology, here: list[int], there: list[int]) -> str:
    """The farthest of the GPUs ``here`` from their NIC on their routes to the GPUs
    ``there`` (another node): the devices a route crosses before its first NIC, or
    before its end where it crosses none ("phb" past a host or a CPU's root complex, a
    device linked to host memory; "pxn" past another GPU; else "pxb"; see
    :attr:`Machine.nic_path`)."""
    farthest = 0
    for a, b in zip(here, there):
        kinds = []
        for d in topology.route(a, b).links[:-1]:  # up to the device before GPU b
            name = topology.directed_link(d)[1]
            device = topology.device(name)
            if device.kind == "nic":
                break
            kinds.append("host" if is_cpu(topology, name) else device.kind)
        level = 2 if "host" in kinds else 1 if "gpu" in kinds else 0
        farthest = max(farthest, level)
    return _NIC_PATHS[farthest]


def _nvls_switches(topology: Topology) -> dict[str, str]:
    """The in-network device that reduces each GPU's data with NVLS: the first one linked
    to it, as :meth:`~simcoll.comm.Comm.reducer_of` finds it (GPUs linked to none are
    left out). One pass over the devices' links."""
    gpus = set(topology.gpus)
    switch: dict[str, str] = {}
    for device in topology.in_network:
        for name in topology.neighbors(device):
            if name in gpus:
                switch.setdefault(name, device)
    return switch


_MACHINES: WeakKeyDictionary[Topology, tuple[int, dict[tuple[tuple[int, ...], str, str],
                                                    Machine]]] = WeakKeyDictionary()
"""What :func:`describe` found, per topology and its generation, by ranks, arch and CPU
vendor (which a topology may change without a new generation): the tuner asks once per
collective, every rank's protocol once more."""


def describe(topology: Topology, ranks: tuple[int, ...], arch: str = "auto") -> Machine:
    """The tuner's view of ``ranks`` (world ranks) of ``topology``, kept until the
    topology changes.

    ``arch="auto"`` reads Hopper where the GPUs have NVLink SHARP (an in-network switch)
    and Ampere otherwise; name it to choose.
    """
    known = kept(_MACHINES, topology)
    key = (tuple(ranks), arch, topology.cpu)
    if key not in known:
        known[key] = _describe(topology, key[0], arch)
    return known[key]


def _describe(topology: Topology, ranks: tuple[int, ...], arch: str) -> Machine:
    nodes = [topology.gpu_nodes[r] for r in ranks]
    groups = [[ranks[i] for i in group] for group in node_order(nodes)]
    first = groups[0]
    # Every rank keeps the farthest path types and the lowest speeds any rank's graphs
    # found (init.cc): here over the nodes of distinct shapes. A node with one GPU has no
    # link inside it (inf only where every node holds one GPU).
    distinct = distinct_nodes(topology, groups)
    pairs = [node_links(topology, groups[j]) for j in distinct if len(groups[j]) > 1]
    intra = "pci" if any(kind == "pci" for kind, _ in pairs) else "nvlink"
    intra_bw = min((bw for _, bw in pairs), default=math.inf)
    inter_bw, rails = (_network_share(topology, first, groups[1])
                       if len(groups) > 1 else (0.0, 0))
    nic_path = max((_nic_path(topology, groups[j], groups[(j + 1) % len(groups)])
                    for j in distinct), key=_NIC_PATHS.index) if len(groups) > 1 else "pxb"
    heads = min(map(len, groups))
    heads_inter_bw = (_network_share(topology, first[:heads], groups[1][:heads])[0]
                      if len(groups) > 1 and heads < len(first) else inter_bw)
    nvls_missing = _nvls_missing(topology, groups)
    nvls = not nvls_missing
    if arch == "auto":
        arch = "hopper" if nvls else "ampere"
    plain_tree = heads == 1 or (
        len(groups) > 1 and arch in ("hopper", "blackwell")
        and not all(_balanced_tree(topology, groups[j]) for j in distinct))
    ring, tree = ring_graph(topology, groups, arch, distinct)
    return Machine(len(ranks), len(groups), intra, intra_bw, inter_bw, nvls, arch,
                   sharp_groups(topology, ranks) is not None, rails, topology.cpu,
                   heads == 1, plain_tree, len({len(group) for group in groups}) > 1,
                   heads_inter_bw,
                   heads, nic_path, ring.run, ring.graph, ring.speed * 1e9,
                   (tree if len(groups) == 2 else ring.speed) * 1e9, tree * 1e9,
                   all(_nvlinked_to_switch(topology, groups[j][0]) for j in distinct),
                   nvls_missing)


def _nvls_missing(topology: Topology, groups: list[list[int]]) -> str:
    """Why the nodes' GPUs (world ranks, node by node) cannot run NVLS, naming a GPU or
    device: NVLS needs one in-network device per node, linked to each of its GPUs and
    to no other node's (one NVLink domain per node); empty where they can."""
    switch_of = _nvls_switches(topology)
    served: dict[str, int] = {}
    for group in groups:
        names = [topology.gpus[r] for r in group]
        lone = next((name for name in names if name not in switch_of), None)
        if lone is not None:
            return f"GPU {lone!r} is linked to no switch that reduces (in-network device)"
        found = sorted({switch_of[name] for name in names})
        if len(found) > 1:
            return (f"the node of rank {group[0]} has its GPUs on "
                    f"{', '.join(map(repr, found[:-1]))} and {found[-1]!r}")
        other = served.setdefault(found[0], group[0])
        if other != group[0]:
            return f"{found[0]!r} serves two nodes, those of ranks {other} and {group[0]}"
    return ""


def _balanced_tree(topology: Topology, ranks: list[int]) -> bool:
    """Whether NCCL's balanced tree finds as many channels as the ring on the node of GPUs
    ``ranks``: at the node's best reach of a NIC (:func:`~.nics.nic_reach`), every NIC a
    GPU has nearest is nearest to another GPU too (a channel's first two GPUs share
    one); or no GPU has one near (all reach the node's NICs farther, alike)."""
    gpus = [topology.gpus[rank] for rank in ranks]
    reach = {gpu: nic_reach(topology, gpu) for gpu in gpus}
    best = min(reach.values())
    counts: dict[str, int] = {}
    for gpu in gpus:
        if reach[gpu] == best:
            for nic in nearest_nics(topology, gpu):
                counts[nic] = counts.get(nic, 0) + 1
    return all(count >= 2 for count in counts.values())


def _nvlinked_to_switch(topology: Topology, rank: int) -> bool:
    """GPU ``rank`` has an NVLink to a switch (an NVSwitch)."""
    gpu = topology.gpus[rank]
    return any(topology.device(other).kind == "switch"
               and topology.links[topology.link_index(gpu, other)].kind in NVLINK_KINDS
               for other in topology.neighbors(gpu))
