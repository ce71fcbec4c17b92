"""Builders for common machines: ring, fully connected, switch, torus, cluster.

Every builder takes ``reduce_bandwidth`` for its GPUs (bytes of reduction output per
second; ``inf``, the default, makes reductions free). Bandwidths are per direction.
Every builder and preset checks its arguments before it builds anything, and refuses a
machine of more than :data:`MAX_DEVICES` devices or links (about 2 GB of memory and half
a minute to build at that size).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from simcoll.checks import Count, integer, real, shown, text
from simcoll.errors import TopologyError
from simcoll.topology.graph import Topology
from simcoll.units import GB, us

__all__ = ["ring", "fully_connected", "switch", "torus", "cluster"]

MAX_DEVICES = 1 << 21
"""The most devices, and the most links, a builder or preset makes (2,097,152)."""


def _check_count(name: str, value: Count, minimum: int = 1) -> int:
    return integer(value, name, minimum=minimum, error=TopologyError)


def _check_size(devices: int, links: int, *, bound: bool = False, **counts: object) -> None:
    """Refuse, before anything is built, a machine of more than :data:`MAX_DEVICES`
    devices or links (``devices`` and ``links``, counted, or bounded from the arguments
    where ``bound``: a preset whose exact count depends on its layout), naming the
    arguments ``counts`` that ask for it."""
    if devices > MAX_DEVICES or links > MAX_DEVICES:
        asked = ", ".join(f"{name}={shown(value)}" for name, value in counts.items())
        up_to = "up to " if bound else ""
        raise TopologyError(f"{asked} is not accepted: the machine would have {up_to}"
                            f"{shown(devices)} devices and {up_to}{shown(links)} links; a "
                            f"topology builder makes at most {MAX_DEVICES:,} of each")


def _check_kinds(**kinds: str) -> None:
    """Refuse a link kind that is not a non-empty string, naming its parameter, as
    :meth:`~simcoll.topology.graph.Topology.add_link` and topology files do."""
    for name, kind in kinds.items():
        text(kind, name, error=TopologyError, what="a link label such as 'nvlink' or 'ib'")


def _check_quantities(optional: tuple[str, ...] = (), **values: float | None) -> None:
    """Refuse a bad rate or time before anything is built, naming its parameter, even
    where the machine asked for will not use it (one node has no NICs, one socket no
    link between sockets): a parameter whose name holds ``latency`` takes seconds >= 0,
    one whose name holds ``bandwidth`` bytes/s > 0, both finite but for the reduction
    rates (``reduce_bandwidth``: ``inf`` makes reductions free). None passes only for
    the parameters named in ``optional`` (a default that follows another parameter)."""
    for name, value in values.items():
        if value is None and name in optional:
            continue
        if "latency" in name:
            real(value, name, error=TopologyError, what="seconds")
        else:
            real(value, name, strict=True, allow_inf="reduce" in name, error=TopologyError,
                 what="bytes/s")


def _gpus(topo: Topology, n: int, reduce_bandwidth: float) -> list[str]:
    return [topo.add_gpu(reduce_bandwidth=reduce_bandwidth) for _ in range(n)]


def ring(n: Count, *, bandwidth: float = 100 * GB, latency: float = 1 * us,
         kind: str = "nvlink", reduce_bandwidth: float = math.inf,
         routing: str = "link_order") -> Topology:
    """``n`` GPUs, GPU i linked to GPU i+1 (mod n). ``routing`` (``Topology.routing``)
    chooses between the two ways round to the opposite GPU of an even ring."""
    n = _check_count("ring size n", n)
    _check_size(n, n, n=n)
    _check_quantities(bandwidth=bandwidth, latency=latency, reduce_bandwidth=reduce_bandwidth)
    _check_kinds(kind=kind)
    topo = Topology(f"ring({n})", routing=routing)
    gpus = _gpus(topo, n, reduce_bandwidth)
    for i in range(n if n > 2 else n - 1):
        topo.add_link(gpus[i], gpus[(i + 1) % n], bandwidth=bandwidth, latency=latency, kind=kind)
    return topo


def fully_connected(n: Count, *, bandwidth: float = 100 * GB, latency: float = 1 * us,
                    kind: str = "nvlink", reduce_bandwidth: float = math.inf) -> Topology:
    """``n`` GPUs with a direct link between every pair."""
    n = _check_count("number of GPUs n", n)
    _check_size(n, n * (n - 1) // 2, n=n)
    _check_quantities(bandwidth=bandwidth, latency=latency, reduce_bandwidth=reduce_bandwidth)
    _check_kinds(kind=kind)
    topo = Topology(f"fully_connected({n})")
    gpus = _gpus(topo, n, reduce_bandwidth)
    for a, b in itertools.combinations(gpus, 2):
        topo.add_link(a, b, bandwidth=bandwidth, latency=latency, kind=kind)
    return topo


def switch(n: Count, *, bandwidth: float = 100 * GB, latency: float = 1 * us,
           kind: str = "nvswitch", servers: Count = 0, server_bandwidth: float | None = None,
           server_latency: float | None = None, reduce_bandwidth: float = math.inf,
           server_reduce_bandwidth: float = math.inf) -> Topology:
    """``n`` GPUs (and ``servers`` server hosts) each on one link to a non-blocking switch.

    With ``latency = alpha / 2`` and ``bandwidth = 1 / beta`` this is the single-port
    alpha-beta reference network: a message costs alpha + n beta between any two ranks.
    Server links default to the GPUs' bandwidth and latency.
    """
    n = _check_count("number of GPUs n", n)
    servers = _check_count("servers", servers, minimum=0)
    _check_size(n + servers + 1, n + servers, n=n, servers=servers)
    _check_quantities(("server_bandwidth", "server_latency"), bandwidth=bandwidth,
                      latency=latency, server_bandwidth=server_bandwidth,
                      server_latency=server_latency, reduce_bandwidth=reduce_bandwidth,
                      server_reduce_bandwidth=server_reduce_bandwidth)
    _check_kinds(kind=kind)
    topo = Topology(f"switch({n}" + (f", servers={servers})" if servers else ")"))
    sw = topo.add_switch("switch")
    for gpu in _gpus(topo, n, reduce_bandwidth):
        topo.add_link(gpu, sw, bandwidth=bandwidth, latency=latency, kind=kind)
    for _ in range(servers):
        host = topo.add_host(reduce_bandwidth=server_reduce_bandwidth)
        topo.add_link(host, sw, kind=kind,
                      bandwidth=bandwidth if server_bandwidth is None else server_bandwidth,
                      latency=latency if server_latency is None else server_latency)
    return topo


def torus(dims: Sequence[int], *, bandwidth: float = 100 * GB, latency: float = 1 * us,
          kind: str = "nvlink", reduce_bandwidth: float = math.inf,
          routing: str = "link_order") -> Topology:
    """A torus of GPUs with wrap-around links; rank = row-major index of its coordinates.

    A dimension of size 2 gets one link (not two) between its two GPUs; size 1 gets none.
    ``routing`` (``Topology.routing``) chooses between equally short routes, which a
    torus has between GPUs apart in two dimensions or half round one.
    """
    if getattr(dims, "ndim", None) == 1:  # a numpy array
        dims = list(dims)
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence):
        raise TopologyError(f"torus dims={dims!r} is not accepted; give the size of each "
                            f"dimension as a sequence, e.g. (4,) or (4, 4)")
    if not dims:
        raise TopologyError("torus dims is empty; give at least one dimension, e.g. (4, 4)")
    dims = tuple(_check_count(f"torus dims[{k}]", d) for k, d in enumerate(dims))
    count = math.prod(dims)
    # a dimension of size d > 2 has a link per GPU, of size 2 one per pair, of size 1 none
    _check_size(count, sum(count if d > 2 else count // 2 if d == 2 else 0 for d in dims),
                dims=dims)
    _check_quantities(bandwidth=bandwidth, latency=latency, reduce_bandwidth=reduce_bandwidth)
    _check_kinds(kind=kind)
    topo = Topology(f"torus{dims}", routing=routing)
    coords = list(itertools.product(*(range(d) for d in dims)))
    gpus = {c: g for c, g in zip(coords, _gpus(topo, len(coords), reduce_bandwidth))}
    for c in coords:
        for axis, size in enumerate(dims):
            if size == 1 or (size == 2 and c[axis] == 1):
                continue
            nxt = list(c)
            nxt[axis] = (c[axis] + 1) % size
            topo.add_link(gpus[c], gpus[tuple(nxt)], bandwidth=bandwidth, latency=latency,
                          kind=kind)
    return topo


def cluster(nodes: Count, gpus_per_node: Count, *, intra_bandwidth: float = 300 * GB,
            intra_latency: float = 1 * us, inter_bandwidth: float = 25 * GB,
            inter_latency: float = 2 * us, intra_kind: str = "nvswitch", inter_kind: str = "ib",
            reduce_bandwidth: float = math.inf) -> Topology:
    """``nodes`` servers of ``gpus_per_node`` GPUs.

    The GPUs of a node sit on a node switch (links of ``intra_bandwidth``); each node
    switch has one uplink of ``inter_bandwidth`` to a non-blocking network switch. Rank
    ``node * gpus_per_node + local`` is GPU ``local`` of node ``node`` (its ``node``).
    """
    nodes = _check_count("nodes", nodes)
    gpus_per_node = _check_count("gpus_per_node", gpus_per_node)
    _check_size(nodes * (gpus_per_node + 1) + 1, nodes * (gpus_per_node + 1), nodes=nodes,
                gpus_per_node=gpus_per_node)
    _check_quantities(intra_bandwidth=intra_bandwidth, intra_latency=intra_latency,
                      inter_bandwidth=inter_bandwidth, inter_latency=inter_latency,
                      reduce_bandwidth=reduce_bandwidth)
    _check_kinds(intra_kind=intra_kind, inter_kind=inter_kind)
    topo = Topology(f"cluster({nodes}x{gpus_per_node})")
    core = topo.add_switch("network")
    node_switches = [topo.add_switch(f"node{k}") for k in range(nodes)]
    for node, sw in enumerate(node_switches):
        for _ in range(gpus_per_node):
            gpu = topo.add_gpu(reduce_bandwidth=reduce_bandwidth, node=node)
            topo.add_link(gpu, sw, bandwidth=intra_bandwidth, latency=intra_latency,
                          kind=intra_kind)
        topo.add_link(sw, core, bandwidth=inter_bandwidth, latency=inter_latency,
                      kind=inter_kind)
    return topo
