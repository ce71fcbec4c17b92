"""The machine a collective runs on: devices, full-duplex links, and routes.

A :class:`Topology` holds devices (GPUs, hosts, switches, NICs) and links between them.
Every link is full duplex: each direction has the link's ``bandwidth`` (bytes/s) to
itself. GPUs are the ranks (0..n-1, in the order they were added); hosts are extra
endpoints (parameter servers) numbered after the GPUs; switches and NICs only forward.
A route may pass through any device, GPUs and hosts included: on a ``ring`` or a
``torus`` a message to a GPU two hops away crosses the GPU between, which forwards it as
a switch would (on real machines NCCL relays such traffic through the middle GPU's
memory: its NVB paths), and so may a route around a failed link.

Routes are shortest paths in hops, and deterministic. Where several are equally short,
``routing`` chooses: ``"link_order"`` (the default) searches breadth first from the
source through each device's links in the order they were added, so ties fall to the
links added first and routes crowd onto some of the equal ways (a leaf-spine built by
hand sends every flow between leaves through its first spine); ``"ecmp"`` takes, at
every device, one of the links that lead on a shortest path, chosen by a hash of the
route's two ends (a leg's, past ``via`` or staging devices) and that device (CRC-32 of
their positions: the order the devices were added in, which saving and loading keep),
as equal-cost multi-path switches hash a flow's addresses, so routes spread over the
equal ways (and, as on real fabrics, two can still meet on one). A multicast's routes
are cut from one tree per source (``Topology.route(..., multicast=True)``), as a
fabric's multicast group is.

A GPU may name a device its messages to other GPUs are staged through (``staging``, e.g.
host memory when GPUs have no peer-to-peer access): its route to another GPU is then
the shortest path to that device followed by the shortest path from it.
Routes are computed on first use and cached (up to :data:`ROUTES_KEPT`). On a tree
(``switch``, ``cluster`` and the one-node presets, say; not ``ring``,
``fully_connected``, ``torus``, ``multi_dim`` of several dimensions, ``fat_tree`` with
several spines or the multi-node DGX presets) a route is found by climbing to the lowest
common ancestor in O(depth);
otherwise by a breadth-first search from the source that stops at the destination, kept
and resumed for the source's next destination (``"ecmp"``: one from the destination,
whose hop counts are kept per destination).
"""

from __future__ import annotations

import math
import struct
import threading
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcoll.checks import flag, integer, real, shown, text
from simcoll.errors import NoRouteError, TopologyError
from simcoll.sums import sum_in_order

__all__ = ["Device", "Link", "Route", "Topology", "Via", "MulticastVia", "DEVICE_KINDS",
           "CPU_VENDORS", "ROUTINGS", "node_order"]

DEVICE_KINDS = ("gpu", "host", "switch", "nic")

Via = str | tuple[str, ...]
"""Devices a route must pass, in order: one device's name, or a tuple of names."""
MulticastVia = tuple[Via | None, ...]
"""What the routes of a multicast must pass: a :data:`Via` (or None) per destination."""

CPU_VENDORS = ("intel", "amd", "arm", "unknown")
"""The CPU vendors a topology may name (NCCL's tuner tells Intel and AMD apart)."""
ROUTINGS = ("link_order", "ecmp")
"""How a topology chooses between equally short routes (:attr:`Topology.routing`)."""
ROUTES_KEPT = 1 << 17
"""Routes a topology (and a run's network) keeps cached at most: past that the cache
starts over, so that a run through all p^2 pairs (an all-to-all) holds O(1) routes, not
O(p^2), while rings and trees, which use O(p) pairs, keep every route."""
_SEARCHING = threading.Lock()
"""Held while a kept breadth-first search (:meth:`Topology._bfs_path`) is resumed."""
_ENDPOINT_KINDS = ("gpu", "host")


@dataclass(frozen=True)
class Device:
    """A device. ``reduce_bandwidth`` (bytes of output per second) matters for endpoints;
    ``node`` (the server a GPU sits in) lets hierarchical algorithms group ranks;
    ``in_network`` marks a switch or NIC that also reduces (NVLS, SHARP); ``staging``
    names the device a GPU's messages to other GPUs pass through (host memory, for GPUs
    without peer-to-peer access), or None."""

    name: str
    kind: str
    reduce_bandwidth: float = math.inf
    node: int = 0
    in_network: bool = False
    staging: str | None = None


@dataclass(frozen=True)
class Link:
    """A full-duplex link; ``bandwidth`` is per direction, in bytes/s; ``latency`` in s.
    ``back`` is the bandwidth from ``v`` to ``u`` where it differs (None: ``bandwidth``
    both ways)."""

    u: str
    v: str
    bandwidth: float
    latency: float
    kind: str
    back: float | None = None

    def rate(self, direction: int) -> float:
        """Bytes/s from ``u`` to ``v`` (``direction`` 0) or from ``v`` to ``u`` (1).

        Raises:
            TopologyError: ``direction`` is not 0 or 1.
        """
        if isinstance(direction, (int, np.integer)) and not isinstance(direction, bool):
            if direction == 1:
                return self.bandwidth if self.back is None else self.back
            if direction == 0:
                return self.bandwidth
        raise TopologyError(f"direction={direction!r} is not accepted; use 0 (u to v) "
                            "or 1 (v to u)")


@dataclass(frozen=True)
class Route:
    """The directed links a message crosses, their summed latency and least bandwidth."""

    links: tuple[int, ...]
    latency: float
    bandwidth: float


def _check_rate(name: str, value: float, *, allow_inf: bool) -> float:
    return real(value, name, strict=True, allow_inf=allow_inf, error=TopologyError,
                what="bytes/s")


def _listed(names: list[str], most: int = 10) -> str:
    """The first ``most`` of ``names``, quoted, and " ..." where there are more."""
    return ", ".join(map(repr, names[:most])) + (" ..." if len(names) > most else "") \
        if names else "nothing"


def node_order(nodes: list[int]) -> list[list[int]]:
    """Positions grouped by node (``nodes[i]``: the node of position i), nodes in order of
    first appearance, positions in order."""
    groups: dict[int, list[int]] = {}
    for position, node in enumerate(nodes):
        groups.setdefault(node, []).append(position)
    return list(groups.values())


class Topology:
    """A machine description; build it with the builders or by hand.

    Attributes:
        name: a label, e.g. ``"switch(8)"``.
        spec: what rebuilds this machine with ``simcoll.topology.from_spec`` (a builder
            spec or a file path; set by ``from_spec`` and ``load``), or None. Adding a
            device or a link, or setting ``name``, ``cpu`` or ``routing`` to another
            value, clears it, so it never describes a different machine (the name is in
            a saved file and in its hash).
        cpu: the servers' CPU vendor, one of :data:`CPU_VENDORS` ("unknown" unless a
            preset or the user sets it). Only NCCL's tuner reads it, as NCCL does: its
            LL bandwidth cap across nodes and its network overhead per step depend on it
            (``algorithm="nccl"``).
        routing: how equally short routes are chosen, one of :data:`ROUTINGS`:
            ``"link_order"`` (default: ties fall to the links added first) or
            ``"ecmp"`` (hashed per route and device, spreading routes over equal ways;
            see the module's docstring). Setting another clears ``spec``.

    Example:
        >>> t = Topology("two GPUs")
        >>> a, b = t.add_gpu(), t.add_gpu()
        >>> link = t.add_link(a, b, bandwidth=50e9, latency=1e-6, kind="nvlink")
        >>> t.nranks
        2
    """

    def __init__(self, name: str = "custom", *, routing: str = "link_order"):
        self.name = name
        self.spec: str | None = None
        self._cpu = "unknown"
        self._routing = _checked_routing(routing)
        self._hops_to: dict[int, list[int]] = {}
        self._searches: dict[int, tuple[list[int], list[int], deque[int]]] = {}
        self._devices: dict[str, Device] = {}
        self._index: dict[str, int] = {}
        self._adjacency: list[list[tuple[int, int]]] = []
        self._links: list[Link] = []
        self._pairs: dict[frozenset[str], int] = {}   # a link's two ends: its index
        self._gpus: list[str] = []
        self._hosts: list[str] = []
        self._routes: dict[tuple[Any, ...], Route] = {}
        self._tree: tuple[list[int], list[int], list[int]] | None = None
        self._tree_checked = False
        self._kind_count: dict[str, int] = {}
        self._in_network: list[str] = []
        self._endpoints: list[str] | None = None
        self._gpu_nodes: tuple[int, ...] | None = None
        self._generation = 0

    @property
    def name(self) -> str:
        """The machine's name (in results, files and plots)."""
        return self._name

    @name.setter
    def name(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"topology name {name!r} is not accepted; use a non-empty "
                                f"string")
        _check_encodable(f"topology name {name!r}", name)
        if getattr(self, "_name", name) != name:
            self.spec = None
        self._name = name

    @property
    def cpu(self) -> str:
        """The servers' CPU vendor: "intel", "amd", "arm" or "unknown"."""
        return self._cpu

    @cpu.setter
    def cpu(self, vendor: str) -> None:
        """Set the vendor; another one than before clears ``spec`` (which names the old)."""
        if not isinstance(vendor, str) or vendor not in CPU_VENDORS:
            raise TopologyError(f"cpu={shown(vendor)} is not accepted; use one of "
                                f"{', '.join(map(repr, CPU_VENDORS))}")
        if vendor != self._cpu:
            self.spec = None
        self._cpu = vendor

    @property
    def routing(self) -> str:
        """How equally short routes are chosen: "link_order" or "ecmp"."""
        return self._routing

    @routing.setter
    def routing(self, routing: str) -> None:
        """Choose another way; the cached routes (and ``spec``) are dropped."""
        routing = _checked_routing(routing)
        if routing != self._routing:
            self._routing = routing
            self.spec = None
            self._invalidate()

    # -- building ------------------------------------------------------------------------
    def _add(self, kind: str, name: str | None, reduce_bandwidth: float, node: int = 0,
             in_network: bool = False, staging: str | None = None) -> str:
        if name is None:
            prefix = {"gpu": "gpu", "host": "server", "switch": "switch", "nic": "nic"}[kind]
            count = self._kind_count.get(kind, 0)
            name = f"{prefix}{count}"
            while name in self._devices:
                count += 1
                name = f"{prefix}{count}"
        if not isinstance(name, str) or not name:
            raise TopologyError(f"device name {name!r} is not a non-empty string")
        _check_encodable(f"device name {name!r}", name)
        if "->" in name:
            raise TopologyError(f"device name {name!r} is not accepted: it holds '->', "
                                f"which joins a link's two ends in simcoll's outputs "
                                f"(Result.to_dict()'s link_bytes, traces); choose one "
                                f"without it")
        if name in self._devices:
            raise TopologyError(f"device {name!r} already exists in topology {self.name!r}")
        rb = _check_rate(f"reduce_bandwidth of {name!r}", reduce_bandwidth, allow_inf=True)
        node = integer(node, f"node of {name!r}", minimum=0, error=TopologyError,
                       what="the server the GPU sits in")
        if staging is not None and (not isinstance(staging, str) or not staging
                                    or staging == name):
            raise TopologyError(f"staging of {name!r} = {staging!r} is not accepted; name "
                                f"another device (e.g. host memory), or None")
        self._kind_count[kind] = self._kind_count.get(kind, 0) + 1
        self._devices[name] = Device(name, kind, rb, node, in_network, staging)
        self.spec = None
        self._index[name] = len(self._adjacency)
        self._adjacency.append([])
        if kind == "gpu":
            self._gpus.append(name)
        elif kind == "host":
            self._hosts.append(name)
        elif in_network:
            self._in_network.append(name)
        self._invalidate()
        return name

    def add_gpu(self, name: str | None = None, *, reduce_bandwidth: float = math.inf,
                node: int = 0, staging: str | None = None) -> str:
        """Add a GPU; it becomes the next rank. Returns its name (default ``gpu<rank>``).

        ``node`` is the server it sits in (0 by default: one server). ``staging`` names a
        device (added before or after) that every message from this GPU to another GPU
        passes through, as through host memory without peer-to-peer access: the route is
        the shortest path to it, then the shortest path from it.
        """
        return self._add("gpu", name, reduce_bandwidth, node, staging=staging)

    def add_host(self, name: str | None = None, *, reduce_bandwidth: float = math.inf) -> str:
        """Add a server host (a parameter-server endpoint). Returns its name."""
        return self._add("host", name, reduce_bandwidth)

    def add_switch(self, name: str | None = None, *,
                   reduce_bandwidth: float | None = None) -> str:
        """Add a switch. Returns its name.

        With ``reduce_bandwidth`` (bytes of output per second) the switch also computes in
        the network, as NVSwitch does with NVLink SHARP (NVLS) and InfiniBand switches with
        SHARP: algorithms may run a program on it that reduces and multicasts. Without,
        it only forwards.
        """
        return self._add_forwarder("switch", name, reduce_bandwidth)

    def add_nic(self, name: str | None = None, *,
                reduce_bandwidth: float | None = None) -> str:
        """Add a NIC (forwards only, or also reduces with ``reduce_bandwidth``, as
        :meth:`add_switch`). Returns its name."""
        return self._add_forwarder("nic", name, reduce_bandwidth)

    def _add_forwarder(self, kind: str, name: str | None,
                       reduce_bandwidth: float | None) -> str:
        if reduce_bandwidth is None:
            return self._add(kind, name, math.inf)
        return self._add(kind, name, reduce_bandwidth, in_network=True)

    def add_link(self, u: str, v: str, *, bandwidth: float, latency: float = 0.0,
                 kind: str = "custom", back_bandwidth: float | None = None) -> Link:
        """Join devices ``u`` and ``v`` with a full-duplex link.

        Args:
            bandwidth: bytes/s in each direction, > 0 and finite.
            latency: seconds, >= 0 and finite.
            kind: a label such as "nvlink", "nvswitch", "pcie", "ib", "ethernet" (a
                non-empty string, as topology files take it).
            back_bandwidth: bytes/s from ``v`` to ``u`` where it differs from
                ``bandwidth`` (> 0 and finite), e.g. a GPU's reads of host memory over
                PCIe; None: ``bandwidth`` both ways.

        Raises:
            TopologyError: unknown device, self-loop, duplicate link, bad
                bandwidth/latency/kind.
        """
        self._check_ends(u, v)
        if u == v:
            raise TopologyError(f"link ({u!r}, {v!r}) joins a device to itself")
        if frozenset((u, v)) in self._pairs:
            raise TopologyError(f"devices {u!r} and {v!r} are already linked: one link joins "
                                f"a pair (several physical links between them, such as "
                                f"NVLinks, are one link of their summed bandwidth)")
        bandwidth = _check_rate(f"bandwidth of link ({u!r}, {v!r})", bandwidth, allow_inf=False)
        if back_bandwidth is not None:
            back_bandwidth = _check_rate(f"back_bandwidth of link ({u!r}, {v!r})",
                                         back_bandwidth, allow_inf=False)
        latency = real(latency, f"latency of link ({u!r}, {v!r})", error=TopologyError,
                       what="seconds") + 0.0  # -0.0 is 0.0: one machine, one hash
        kind = text(kind, f"kind of link ({u!r}, {v!r})", error=TopologyError,
                    what="a label such as 'nvlink', 'pcie' or 'ib'")
        _check_encodable(f"kind {kind!r} of link ({u!r}, {v!r})", kind)
        link = Link(u, v, bandwidth, latency, kind, back_bandwidth)
        self.spec = None
        index = len(self._links)
        self._links.append(link)
        self._pairs[frozenset((u, v))] = index
        self._adjacency[self._index[u]].append((self._index[v], 2 * index))
        self._adjacency[self._index[v]].append((self._index[u], 2 * index + 1))
        self._invalidate()
        return link

    def _invalidate(self) -> None:
        self._generation += 1
        self._endpoints = None
        self._gpu_nodes = None
        self._routes.clear()
        self._hops_to.clear()
        self._searches.clear()
        self._tree = None
        self._tree_checked = False

    # -- reading -------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        """A count that changes whenever the machine does (a device or a link added):
        what is computed from its routes can be kept until it changes."""
        return self._generation

    @property
    def nranks(self) -> int:
        """Number of GPUs (ranks)."""
        return len(self._gpus)

    @property
    def gpus(self) -> tuple[str, ...]:
        """GPU names in rank order."""
        return tuple(self._gpus)

    @property
    def gpu_nodes(self) -> tuple[int, ...]:
        """The node (server) of each rank, in rank order."""
        if self._gpu_nodes is None:   # kept until the machine changes: routes ask often
            self._gpu_nodes = tuple(self._devices[g].node for g in self._gpus)
        return self._gpu_nodes

    @property
    def hosts(self) -> tuple[str, ...]:
        """Server-host names; host i has endpoint address ``nranks + i``."""
        return tuple(self._hosts)

    @property
    def in_network(self) -> tuple[str, ...]:
        """Names of the switches and NICs that compute in the network; device i has
        endpoint address ``nranks + len(hosts) + i``."""
        return tuple(self._in_network)

    @property
    def endpoints(self) -> int:
        """Number of endpoint addresses: GPUs, then hosts, then in-network devices."""
        return len(self._gpus) + len(self._hosts) + len(self._in_network)

    def address(self, name: str) -> int:
        """The endpoint address of device ``name`` (a GPU, host or in-network device).

        Raises:
            TopologyError: the device is not an endpoint.
        """
        for offset, names in ((0, self._gpus), (len(self._gpus), self._hosts),
                              (len(self._gpus) + len(self._hosts), self._in_network)):
            if name in names:
                return offset + names.index(name)
        raise TopologyError(f"device {name!r} is not an endpoint (a GPU, a host or an "
                            f"in-network device) of topology {self.name!r}")

    def neighbors(self, name: str) -> tuple[str, ...]:
        """The devices linked to device ``name``, in the order the links were added."""
        index = self._index[self.device(name).name]
        names = list(self._devices)
        return tuple(names[nbr] for nbr, _ in self._adjacency[index])

    @property
    def devices(self) -> tuple[Device, ...]:
        return tuple(self._devices.values())

    @property
    def links(self) -> tuple[Link, ...]:
        return tuple(self._links)

    def device(self, name: str) -> Device:
        """The device called ``name``.

        Raises:
            TopologyError: no device of that name.
        """
        try:
            return self._devices[name]
        except (KeyError, TypeError):   # TypeError: a name no dict key can be ([1])
            raise TopologyError(f"unknown device {name!r}") from None

    def endpoint_name(self, address: int) -> str:
        """Device name of an endpoint address (ranks first, then hosts, then in-network
        devices)."""
        endpoints = self._endpoints
        if endpoints is None:  # built once per shape of the machine: O(1) per call after
            endpoints = self._endpoints = self._gpus + self._hosts + self._in_network
        if address.__class__ is int and 0 <= address < len(endpoints):
            return endpoints[address]
        return endpoints[self._integer_address(address)]

    def _links_to_avoid(self, avoid: Any) -> frozenset[int]:
        """:meth:`route`'s ``avoid`` as a frozenset of link indexes.

        Raises:
            TopologyError: not a collection of indexes of this topology's links.
        """
        if isinstance(avoid, (str, bytes)) or not hasattr(avoid, "__iter__") or (
                isinstance(avoid, np.ndarray) and avoid.ndim != 1):
            raise TopologyError(f"avoid={shown(avoid)} is not accepted; give a set of link "
                                f"indexes (into links: 0..{len(self.links) - 1})")
        if avoid and not self.links:
            raise TopologyError(f"avoid={shown(avoid)} is not accepted: this topology has no "
                                f"links to avoid")
        return frozenset(integer(i, "an index in avoid", minimum=0,
                                 maximum=len(self.links) - 1, error=TopologyError,
                                 what="a link index") for i in avoid)

    def _integer_address(self, address: Any) -> int:
        """``address`` as an int if it is one of the endpoint addresses (an integer, numpy's
        too; never a bool, a float or a name).

        Raises:
            TopologyError: naming the value and what is accepted.
        """
        count = self.endpoints
        if isinstance(address, (int, np.integer)) and not isinstance(address, (bool, np.bool_)) \
                and 0 <= address < count:
            return int(address)
        if isinstance(address, str):
            raise TopologyError(f"endpoint address {address!r} is a name; pass its address, "
                                f"topology.address({address!r})")
        raise TopologyError(f"endpoint address {address!r} is not accepted; use an integer "
                            f"in 0..{count - 1}")

    def link_index(self, u: str, v: str) -> int:
        """The index (into ``links``) of the link between devices ``u`` and ``v``.

        Raises:
            TopologyError: no such link.
        """
        self._check_ends(u, v)
        index = self._pairs.get(frozenset((u, v)))
        if index is not None:
            return index
        ends = [link.v if link.u == u else link.u for link in self._links if u in (link.u, link.v)]
        raise TopologyError(f"topology {self.name!r} has no link between {u!r} and {v!r}; "
                            f"{u!r} links to {_listed(ends)}")

    def _check_ends(self, u: object, v: object) -> None:
        """Refuse a link end that is not the name of a device of this topology."""
        for end in (u, v):
            if not isinstance(end, str):
                raise TopologyError(f"link end {end!r} is not a device name; give a name "
                                    f"such as {next(iter(self._devices), 'gpu0')!r}, as "
                                    f"add_gpu() / add_switch() return it")
            if end not in self._devices:
                raise TopologyError(f"unknown device {end!r} in link ({u!r}, {v!r}); known "
                                    f"devices: {_listed(list(self._devices))}")

    def directed_link(self, index: int) -> tuple[str, str]:
        """The (from, to) device names of directed link ``index`` (2 k and 2 k + 1 are
        link k's two directions, as routes index them).

        Raises:
            TopologyError: an index that is not one of 0 .. 2 (links) - 1.
        """
        link = self._links[self._directed(index) >> 1]
        return (link.u, link.v) if index % 2 == 0 else (link.v, link.u)

    def _directed(self, index: Any) -> int:
        """``index`` if it is a directed link's index, else a TopologyError naming it."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) \
                or not 0 <= index < 2 * len(self._links):
            if not self._links:
                raise TopologyError(f"directed link {index!r} is not one of this "
                                    f"topology's: it has no links")
            raise TopologyError(f"directed link {index!r} is not one of this topology's: "
                                f"use 0..{2 * len(self._links) - 1} (link k's directions "
                                f"are 2k and 2k + 1)")
        return int(index)

    def directed_bandwidths(self) -> list[float]:
        """Bandwidth of every directed link, indexed as routes index them."""
        return [link.rate(direction) for link in self._links for direction in (0, 1)]

    def bandwidth_of(self, index: int) -> float:
        """Bandwidth of directed link ``index`` (as routes index them).

        Raises:
            TopologyError: an index that is not one of 0 .. 2 (links) - 1.
        """
        index = self._directed(index)
        return self._links[index >> 1].rate(index & 1)

    def validate(self) -> None:
        """Check there is a GPU, every endpoint can reach every other one, and every
        GPU's staging device exists and is reachable.

        Raises:
            TopologyError: naming the endpoints (or staging device) that cannot be
                reached.
        """
        if not self._gpus:
            raise TopologyError(f"topology {self.name!r} has no GPU; add one (add_gpu() in "
                                f"Python, a device of kind gpu in a file)")
        start = self._index[self._gpus[0]]
        seen = {start}
        queue = deque([start])
        while queue:
            for nbr, _ in self._adjacency[queue.popleft()]:
                if nbr not in seen:
                    seen.add(nbr)
                    queue.append(nbr)
        lost = [n for n in self._gpus + self._hosts + self._in_network
                if self._index[n] not in seen]
        if lost:
            named = ", ".join(map(self._endpoint_label, lost[:8])) + (
                " ..." if len(lost) > 8 else "")
            raise TopologyError(
                f"topology {self.name!r} is not connected: {named} cannot reach "
                f"{self._gpus[0]!r}; add links so every GPU, host and in-network "
                f"device (a switch or NIC that reduces) is reachable")
        for gpu in self._gpus:
            stage = self._staging_index(gpu)
            if stage is not None and stage not in seen:
                raise TopologyError(
                    f"GPU {gpu!r} stages its messages through "
                    f"{self._devices[gpu].staging!r}, which no link connects to the GPUs "
                    f"of topology {self.name!r}; link it to them")

    def _endpoint_label(self, name: str) -> str:
        """``gpu3`` for a GPU or host, ``in-network switch 'iso'`` for a device that
        reduces in the network."""
        device = self._devices[name]
        return f"in-network {device.kind} {name!r}" if device.in_network else name

    # -- routing -------------------------------------------------------------------------
    def route(self, src: int, dst: int, *, avoid: frozenset[int] = frozenset(),
              via: Via | None = None, multicast: bool = False) -> Route:
        """The route from endpoint ``src`` to endpoint ``dst`` (addresses, not names).

        ``avoid`` holds links (indexes into ``links``) the route must not cross, such as
        failed ones; such routes are shortest paths over the other links, not cached.
        ``via`` names a device the route must pass (a NIC a channel is bound to, say),
        or a tuple of them in order: the shortest path to each, then on to ``dst``.
        ``multicast``: the route in ``src``'s multicast tree, so that the routes to
        several destinations part once and never meet again. ``"link_order"`` routes
        from one source form such a tree already; with ``"ecmp"`` the tree gives each
        device, as its way in, one of the links that arrive on a shortest path from
        ``src``, chosen by the CRC-32 of (source, device), where a route hashed per
        destination could part at a leaf and meet again past two spines.

        Raises:
            TopologyError: no route exists (with ``avoid``: none around those links), or
                ``via`` is not a device of this topology.
        """
        if via is not None and not isinstance(via, str) and not (
                isinstance(via, tuple) and all(isinstance(v, str) for v in via)):
            raise TopologyError(f"via={via!r} is not accepted; give a device name or a tuple "
                                f"of them")
        if src.__class__ is not int or dst.__class__ is not int:
            # True and 1.0 equal 1 as keys: only integers may find a cached route
            src, dst = self._integer_address(src), self._integer_address(dst)
        if multicast is not False and multicast is not True:
            multicast = flag(multicast, "multicast", error=TopologyError)
        if avoid.__class__ is not frozenset or avoid and any(
                i.__class__ is not int or not 0 <= i < len(self.links) for i in avoid):
            avoid = self._links_to_avoid(avoid)
        tree = multicast and self._routing == "ecmp"
        key = ((src, dst) if via is None else (src, dst, via)) + (("tree",) if tree else ())
        route = None if avoid else self._routes.get(key)
        if route is None:
            a_name, b_name = self.endpoint_name(src), self.endpoint_name(dst)
            waypoints = [self._index[a_name]]
            stage = (self._staging_index(a_name)
                     if src != dst and self._devices[b_name].kind == "gpu" else None)
            if stage is not None:
                waypoints.append(stage)
            for name in (via,) if isinstance(via, str) else via or ():
                waypoints.append(self._index[self.device(name).name])
            waypoints.append(self._index[b_name])
            links: list[int] | None = []
            for a, b in zip(waypoints, waypoints[1:]):
                leg = self._tree_leg(a, b, avoid) if tree else self._path(a, b, avoid)
                if leg is None or links is None:
                    links = None
                    break
                links += leg
            if links is None:
                raise NoRouteError(f"no route from {self.endpoint_name(src)!r} to "
                                    f"{self.endpoint_name(dst)!r}"
                                    + (f" through {via!r}" if via is not None else "")
                                    + (" around the failed links" if avoid else ""))
            if len(set(links)) < len(links):
                twice = next(d for d in links if links.count(d) > 1)
                raise TopologyError(
                    f"the route from {a_name!r} to {b_name!r}"
                    + (f" through {via!r}" if via is not None else "")
                    + f" crosses link {self.directed_link(twice)!r} twice in one direction, "
                    f"which the network models cannot carry (a message crosses a link "
                    f"once); give via devices that do not lead back over it")
            route = Route(tuple(links), sum_in_order(self._links[d >> 1].latency for d in links),
                          min((self.bandwidth_of(d) for d in links), default=math.inf))
            if math.isinf(route.latency):
                summed = ", ".join(f"{self._links[d >> 1].latency:g}" for d in links)
                raise TopologyError(
                    f"the route from {a_name!r} to {b_name!r} has a latency past the float "
                    f"range: its links' latencies ({summed} s) sum to inf; give latencies "
                    f"whose sum is finite")
            if not avoid:
                if len(self._routes) >= ROUTES_KEPT:
                    self._routes.clear()
                self._routes[key] = route
        return route

    def _path(self, a: int, b: int, avoid: frozenset[int]) -> list[int] | None:
        if not avoid and self._is_tree():
            return self._tree_path(a, b)
        if self._routing == "ecmp":
            return self._ecmp_path(a, b, avoid)
        return self._bfs_path(a, b, avoid)

    def _ecmp_path(self, a: int, b: int, avoid: frozenset[int]) -> list[int] | None:
        """A shortest path from ``a`` to ``b`` whose every hop is one of the links that
        lead on a shortest path, chosen by the CRC-32 of (a, b, the device) modulo their
        number, in the order the links were added."""
        hops = self._hops(b, avoid)
        if hops[a] < 0:
            return None
        path = []
        node = a
        while node != b:
            onward = [(nbr, dlink) for nbr, dlink in self._adjacency[node]
                      if hops[nbr] == hops[node] - 1 and dlink >> 1 not in avoid]
            pick = 0 if len(onward) == 1 else \
                zlib.crc32(struct.pack("<3q", a, b, node)) % len(onward)
            node, dlink = onward[pick]
            path.append(dlink)
        return path

    def _tree_leg(self, a: int, b: int, avoid: frozenset[int]) -> list[int] | None:
        """The path from ``a`` to ``b`` in ``a``'s ECMP multicast tree: from ``b`` back
        towards ``a``, each device's way in is one of the links arriving on a shortest
        path from ``a``, picked by the CRC-32 of (a, the device) modulo their number."""
        hops = self._hops(a, avoid)   # links are full duplex: hops to a = hops from a
        if hops[b] < 0:
            return None
        path = []
        node = b
        while node != a:
            inward = [(nbr, dlink ^ 1) for nbr, dlink in self._adjacency[node]
                      if hops[nbr] == hops[node] - 1 and dlink >> 1 not in avoid]
            pick = 0 if len(inward) == 1 else \
                zlib.crc32(struct.pack("<2q", a, node)) % len(inward)
            node, dlink = inward[pick]
            path.append(dlink)
        return path[::-1]

    def _hops(self, b: int, avoid: frozenset[int]) -> list[int]:
        """Each device's hops to ``b`` (-1: none) without the links of ``avoid``; kept per
        destination where nothing is avoided."""
        known = None if avoid else self._hops_to.get(b)
        if known is not None:
            return known
        hops = [-1] * len(self._adjacency)
        hops[b] = 0
        queue = deque([b])
        while queue:
            node = queue.popleft()
            for nbr, dlink in self._adjacency[node]:
                if hops[nbr] < 0 and dlink >> 1 not in avoid:
                    hops[nbr] = hops[node] + 1
                    queue.append(nbr)
        if not avoid:
            if len(self._hops_to) * len(hops) >= ROUTES_KEPT * 8:
                self._hops_to.clear()
            self._hops_to[b] = hops
        return hops

    def _staging_index(self, gpu: str) -> int | None:
        """The index of the device ``gpu``'s messages are staged through, or None."""
        stage = self._devices[gpu].staging
        if stage is None:
            return None
        if stage not in self._index:
            raise TopologyError(f"GPU {gpu!r} stages its messages through {stage!r}, which "
                                f"is not a device of topology {self.name!r}; add it")
        return self._index[stage]

    def _is_tree(self) -> bool:
        if not self._tree_checked:
            self._tree_checked = True
            if len(self._links) == len(self._adjacency) - 1:
                self._tree = self._root_tree()
        return self._tree is not None

    def _root_tree(self) -> tuple[list[int], list[int], list[int]] | None:
        n = len(self._adjacency)
        parent, up_link, depth = [-1] * n, [-1] * n, [-1] * n
        depth[0] = 0
        queue = deque([0])
        while queue:
            node = queue.popleft()
            for nbr, dlink in self._adjacency[node]:
                if depth[nbr] < 0:
                    depth[nbr] = depth[node] + 1
                    parent[nbr] = node
                    up_link[nbr] = dlink ^ 1  # from nbr up to node
                    queue.append(nbr)
        if min(depth) < 0:
            return None
        return parent, up_link, depth

    def _tree_path(self, a: int, b: int) -> list[int]:
        parent, up_link, depth = self._tree  # type: ignore[misc]
        up: list[int] = []
        down: list[int] = []
        while depth[a] > depth[b]:
            up.append(up_link[a])
            a = parent[a]
        while depth[b] > depth[a]:
            down.append(up_link[b] ^ 1)
            b = parent[b]
        while a != b:
            up.append(up_link[a])
            a = parent[a]
            down.append(up_link[b] ^ 1)
            b = parent[b]
        return up + down[::-1]

    def _bfs_path(self, a: int, b: int, avoid: frozenset[int] = frozenset()) -> list[int] | None:
        if a == b:
            return []
        if avoid:
            return self._bfs_path_avoiding(a, b, avoid)
        # Without links to avoid, the breadth-first search from ``a`` is kept and resumed
        # where it stopped: it discovers devices in the same order as a search that
        # starts afresh and stops at ``b``, so every path is the same, and all the routes
        # from one source cost one search in all instead of one each.
        search = self._searches.get(a)
        if search is None:
            if len(self._searches) * len(self._adjacency) >= ROUTES_KEPT * 8:
                self._searches.clear()
            parent = [-1] * len(self._adjacency)   # -1: not reached yet
            parent[a] = a
            search = self._searches[a] = (parent, [-1] * len(self._adjacency), deque([a]))
        parent, way_in, queue = search
        if parent[b] < 0:
            with _SEARCHING:   # runs in threads sharing a topology resume one at a time
                adjacency = self._adjacency
                while queue and parent[b] < 0:
                    node = queue.popleft()
                    for nbr, dlink in adjacency[node]:   # the whole node: resuming is exact
                        if parent[nbr] < 0:
                            way_in[nbr] = dlink   # before parent, which marks it reached
                            parent[nbr] = node
                            queue.append(nbr)
            if parent[b] < 0:
                return None
        path = []
        while b != a:
            path.append(way_in[b])
            b = parent[b]
        return path[::-1]

    def _bfs_path_avoiding(self, a: int, b: int, avoid: frozenset[int]) -> list[int] | None:
        via: dict[int, tuple[int, int]] = {a: (-1, -1)}
        queue = deque([a])
        while queue:
            node = queue.popleft()
            for nbr, dlink in self._adjacency[node]:
                if nbr in via or dlink >> 1 in avoid:
                    continue
                via[nbr] = (node, dlink)
                if nbr == b:
                    path = []
                    while nbr != a:
                        nbr, d = via[nbr]
                        path.append(d)
                    return path[::-1]
                queue.append(nbr)
        return None

    def __repr__(self) -> str:
        return (f"Topology({self.name!r}, gpus={len(self._gpus)}, hosts={len(self._hosts)}, "
                f"devices={len(self._devices)}, links={len(self._links)}"
                + (f", routing={self._routing!r})" if self._routing != "link_order" else ")"))


def _checked_routing(routing: Any) -> str:
    if not isinstance(routing, str) or routing not in ROUTINGS:
        raise TopologyError(f"routing={shown(routing)} is not accepted; use one of "
                            f"{', '.join(map(repr, ROUTINGS))}")
    return routing


def _check_encodable(what: str, text: str) -> None:
    """Refuse ``text`` where it cannot be written as UTF-8 (a lone surrogate such as
    '\\ud800'): topology files and outputs are UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TopologyError(f"{what} is not accepted: it holds a character UTF-8 cannot "
                            f"encode (a lone surrogate), so no file could hold it") from None
