"""The NICs NCCL binds a GPU's channels to, read off a simcoll topology.

NCCL lists a GPU's local NICs (those of its best path, ``ncclTopoGetLocal``), shares them
among the GPUs of its node that have the same ones (``ncclTopoGetLocalNet``, src/graph/
topo.cc of 2.30.7), and binds each channel's send and receive ends to one of them. Here
a GPU's nearest NICs are those it reaches through PCIe switches only, else through a
host too, never through another GPU (:func:`nearest_nics`); the rings, trees, NVLS heads,
PAT and CollNet bind their connections with :func:`bound_nic` and :func:`gpu_nic`.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from simcoll.comm import Comm
from simcoll.topology.graph import Topology, node_order

NVLINK_KINDS = ("nvlink", "nvswitch")
"""The link kinds NCCL counts as NVLink (its paths ``PATH_NVL`` and better)."""

__all__ = ["kept", "nearest_nics", "nic_reach", "nics_of", "gpu_nic", "node_nics",
           "chain_lanes", "channel_nics", "bound_nic", "bound_routes", "rail_entries",
           "comm_rail_entries",
           "pxn_proxy", "NVLINK_KINDS"]


def kept(store: WeakKeyDictionary[Topology, tuple[int, dict[Any, Any]]],
          topology: Topology) -> dict[Any, Any]:
    """What ``store`` keeps for ``topology`` as it stands: emptied when the topology has
    changed since (its ``generation``)."""
    generation, known = store.get(topology, (-1, {}))
    if generation != topology.generation:
        known = {}
        store[topology] = (topology.generation, known)
    return known




_NICS: WeakKeyDictionary[Topology, tuple[int, dict[str, tuple[str, ...]]]] = \
    WeakKeyDictionary()
"""What :func:`nearest_nics` found, per topology and its generation, by GPU."""

_NIC_SEARCH_DEPTH = 4
"""Hops from a GPU within which :func:`nearest_nics` looks for NICs (GPU, PCIe switches,
NIC: two or three on the presets)."""


def nearest_nics(topology: Topology, gpu: str) -> tuple[str, ...]:
    """The NICs nearest GPU ``gpu``, in the order they were added (NCCL's local NICs of a
    GPU, ``ncclTopoGetLocal``: those of its best path): those reached through switches
    only (PIX, PXB) where there are any, else those reached through a host too (PHB, as
    NICs on a CPU's root ports), never through another GPU. Empty where none lies within
    a few hops. Kept until the topology changes."""
    known = kept(_NICS, topology)
    if gpu not in known:
        known[gpu] = (_nics_within(topology, gpu, ("switch",))
                      or _nics_within(topology, gpu, ("switch", "host")))
    return known[gpu]


def nic_reach(topology: Topology, gpu: str) -> int:
    """How far GPU ``gpu``'s nearest NICs (:func:`nearest_nics`) lie: 0 through PCIe
    switches only, 1 through a host too, 2 none within reach."""
    if _nics_within(topology, gpu, ("switch",)):
        return 0
    return 1 if nearest_nics(topology, gpu) else 2


def _nics_within(topology: Topology, gpu: str, through: tuple[str, ...]) -> tuple[str, ...]:
    """The NICs fewest hops from ``gpu`` that a search crossing only devices of the kinds
    ``through`` reaches within :data:`_NIC_SEARCH_DEPTH` hops."""
    found: list[str] = []
    seen, frontier = {gpu}, [gpu]
    for _ in range(_NIC_SEARCH_DEPTH):
        nxt = []
        for name in frontier:
            for nbr in topology.neighbors(name):
                if nbr in seen:
                    continue
                seen.add(nbr)
                kind = topology.device(nbr).kind
                if kind == "nic":
                    found.append(nbr)
                elif kind in through:
                    nxt.append(nbr)
        if found or not nxt:
            break
        frontier = nxt
    return tuple(found)


_OWN_NICS: WeakKeyDictionary[Topology, tuple[int, dict[str, tuple[str, ...]]]] = \
    WeakKeyDictionary()
"""What :func:`nics_of` found, per topology and its generation, by GPU."""


def _mirrored(value: int, pow2: int) -> int:
    """NCCL's ``mirrorBits``: the bits of ``value`` below ``pow2``, in reverse order."""
    mirror, bit, high = 0, 1, pow2 >> 1
    while bit < pow2:
        if value & bit:
            mirror |= high
        bit, high = bit << 1, high >> 1
    return mirror


def nics_of(topology: Topology, gpu: str) -> tuple[str, ...]:
    """The NICs GPU ``gpu`` spreads its channels over, in NCCL's order
    (``ncclTopoGetLocalNet``, src/graph/topo.cc of 2.30.7): of the n NICs nearest it
    (:func:`nearest_nics`), which the G GPUs of its node that have the same nearest NICs
    share, each GPU takes ceil(n / G), starting at its place among them (mirrored bit by
    bit where n is a power of two, so neighbours start far apart). A GPU with two NICs
    of its own takes both; four GPUs sharing two NICs take one each, alternately."""
    nearest = nearest_nics(topology, gpu)
    if len(nearest) < 2:
        return nearest
    known = kept(_OWN_NICS, topology)
    if gpu not in known:
        node = topology.gpu_nodes[topology.gpus.index(gpu)]
        sharers = [g for g, n in zip(topology.gpus, topology.gpu_nodes)
                   if n == node and nearest_nics(topology, g) == nearest]
        count, place = len(nearest), sharers.index(gpu)
        start = _mirrored(place, count) if count & (count - 1) == 0 else place
        share = -(-count // len(sharers))
        known[gpu] = tuple(nearest[(start + k) % count] for k in range(share))
    return known[gpu]


def _channel_nic(topology: Topology, gpu: str, choice: int) -> str | None:
    """GPU ``gpu``'s NIC for channel ``choice`` where it has several nearest NICs: the
    ``choice``-th of its own (:func:`nics_of`), counted round them; else None."""
    if len(nearest_nics(topology, gpu)) < 2:
        return None
    nics = nics_of(topology, gpu)
    return nics[choice % len(nics)]


def gpu_nic(topology: Topology, gpu: int, choice: int) -> tuple[str] | None:
    """The NIC endpoint ``gpu`` (an address) reaches the fabric through for channel
    ``choice`` where it has several nearest NICs (the ``choice``-th of its own, round
    them: :func:`nics_of`), as a route's ``via``; None where it has one or none (its
    shortest route's)."""
    nic = _channel_nic(topology, topology.endpoint_name(gpu), choice)
    return None if nic is None else (nic,)


def node_nics(topology: Topology, group: list[int]) -> list[str]:
    """The NICs of a node whose GPUs are ``group`` (world ranks, local order), as NCCL
    lists them (``ncclTopoSelectNets``): each GPU's own (:func:`nics_of`) in channel
    order, GPU after GPU, each once."""
    nets: list[str] = []
    for rank in group:
        nets.extend(nic for nic in nics_of(topology, topology.endpoint_name(rank))
                    if nic not in nets)
    return nets


def chain_lanes(topology: Topology, group: list[int], channels: int
                ) -> list[tuple[int, int]]:
    """CollNet Chain's head and NIC for each of ``channels`` channels on a node whose
    GPUs are ``group`` (world ranks, local order): ``(local index of the head, its NIC
    choice)``. NCCL's chain graph (src/graph/search.cc, 2.30.7) starts channel c's
    search at the c-th NIC of ``ncclTopoSelectNets``, which lists each GPU's own NICs in
    channel order, GPU after GPU (``ncclTopoPrefNetsChannelFirst``), and tries first the
    NIC's local GPU (``ncclTopoGetLocalGpu``: the GPU that takes it for the lowest
    channel), which heads the chain. With one NIC per GPU that is local GPU c mod G;
    with two, GPU (c mod 2G) // 2 on its NIC c mod 2. Where no GPU has a NIC of its own,
    local GPU c mod G on its shortest route."""
    own = [nics_of(topology, topology.endpoint_name(r)) for r in group]
    nets = node_nics(topology, group)
    if not nets:
        return [(c % len(group), 0) for c in range(channels)]
    lanes: dict[str, tuple[int, int]] = {}
    for c in range(len(nets)):
        for g, nics in enumerate(own):
            if nics and nics[c % len(nics)] not in lanes:
                lanes[nics[c % len(nics)]] = (g, c % len(nics))
    return [lanes[nets[c % len(nets)]] for c in range(channels)]


def channel_nics(topology: Topology, a: int, b: int, choice: int) -> tuple[str, ...] | None:
    """The NICs a connection of channel ``choice`` from GPU ``a`` to GPU ``b`` on another
    node is bound to: ``a``'s on its way out and ``b``'s on its way in, each where that
    GPU has several (None where neither has)."""
    ends = (_channel_nic(topology, topology.endpoint_name(a), choice),
            _channel_nic(topology, topology.endpoint_name(b), choice))
    named = tuple(nic for nic in ends if nic is not None)
    return named or None


_NODE_GPUS: WeakKeyDictionary[Topology, tuple[int, dict[Any, Any]]] = WeakKeyDictionary()
"""Per topology and its generation: each node's GPUs (addresses, in order) and each GPU's
place among them, for :func:`pxn_proxy`."""


def _node_places(topology: Topology) -> dict[Any, Any]:
    known = kept(_NODE_GPUS, topology)
    if not known:
        nodes: dict[int, list[int]] = {}
        for g, node in enumerate(topology.gpu_nodes):
            nodes.setdefault(node, []).append(g)
        known["nodes"] = nodes
        known["place"] = {g: i for gpus in nodes.values() for i, g in enumerate(gpus)}
    return known


def pxn_proxy(topology: Topology, a: int, b: int, members: frozenset[int]) -> int:
    """The GPU (an address) through whose NICs GPU ``a``'s sends to GPU ``b`` on another
    node leave: NCCL's PXN (``ncclTopoGetNetDev`` in src/graph/search.cc of 2.30.7,
    ``NCCL_P2P_PXN_LEVEL`` 2 by default) takes the GPU of ``a``'s node with ``b``'s
    device index (its place among its node's GPUs), so that the message crosses NVLink
    and then stays on ``b``'s rail; that GPU where it is one of ``members`` (the
    communicator's addresses) and ``a`` reaches it over NVLink alone, else ``a``."""
    known = _node_places(topology)
    place, local = known["place"][b], known["nodes"][topology.gpu_nodes[a]]
    proxy = local[place] if place < len(local) else a
    if proxy == a or proxy not in members:
        return a
    over_nvlink = known.setdefault("nvlink", {})
    if (a, proxy) not in over_nvlink:
        over_nvlink[a, proxy] = all(topology.links[d >> 1].kind in NVLINK_KINDS
                                    for d in topology.route(a, proxy).links)
    return proxy if over_nvlink[a, proxy] else a


def bound_nic(comm: Comm, peer: int, choice: int) -> tuple[str, ...] | None:
    """The NICs this rank's connection to ``peer`` passes, for channel ``choice``: where
    ``peer`` is on another node and a GPU at either end has several nearest NICs
    (:func:`nearest_nics`), that GPU's ``choice``-th of its own (:func:`nics_of`), as
    NCCL binds each channel's send and receive ends to one NIC each; None elsewhere (the
    shortest route's)."""
    if comm.node_of(peer) == comm.node_of(comm.rank):
        return None
    return channel_nics(comm.topology, comm.address_of(comm.rank), comm.address_of(peer),
                      choice)


def bound_routes(topology: Topology, a: int, b: int) -> list[tuple[int, ...]]:
    """GPU ``a``'s routes to GPU ``b`` on another node: one per channel choice through
    the NICs each end binds it to (as many as ``a`` has of its own), else the shortest."""
    gpu = topology.endpoint_name(a)
    ways = len(nics_of(topology, gpu)) if len(nearest_nics(topology, gpu)) > 1 else 1
    return [topology.route(a, b, via=channel_nics(topology, a, b, choice)).links
            for choice in range(ways)]


def comm_rail_entries(comm: Comm) -> list[int]:
    """:func:`rail_entries` of the communicator's first node (in its order of nodes), by
    which every node's channels take their GPUs."""
    first = node_order([comm.node_of(r) for r in range(comm.size)])[0]
    return rail_entries(comm.topology, [comm.address_of(r) for r in first])


def rail_entries(topology: Topology, gpus: list[int]) -> list[int]:
    """The places in ``gpus`` (a node's GPU addresses, in local order) at which
    successive ring channels enter the node: the GPUs of its NICs in turn (the first
    GPU of each set of nearest NICs, then the second of each, ...), as NCCL's graph
    search gives successive channels the node's NICs in turn. Where every GPU has NICs
    of its own, or all share the same, local order."""
    groups: dict[tuple[str, ...], int] = {}
    seen: dict[int, int] = {}
    keys: list[tuple[int, int, int]] = []
    for k, gpu in enumerate(gpus):
        group = groups.setdefault(nearest_nics(topology, topology.endpoint_name(gpu)),
                                  len(groups))
        seen[group] = seen.get(group, -1) + 1
        keys.append((seen[group], group, k))
    return [k for _, _, k in sorted(keys)]
