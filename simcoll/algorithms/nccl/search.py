"""How many channels NCCL's rings and trees run on, and at what speed: its topology
search, for nodes whose GPUs talk over NVLink or over PCI, on one node or across nodes.

NCCL searches its ring graph (``ncclTopoCompute``, src/graph/search.cc of 2.30.7) at
speeds (GB/s per channel) taken from an array of its GPU generation, from the first one
no faster than the fastest path it needs (a GPU's NVLink on one node, a GPU's path to a
NIC across nodes): at each speed it packs as many channels as the links carry, each
channel taking that speed on every link it crosses, keeps the speed whose channels carry
the most, and stops once they carry a GPU's whole NVLink bandwidth (``totalBw``) or the
next speed is below 0.49 of the best. Then:

* ``ncclTopoDupChannels`` doubles the channels (halving their speed) where the speed is
  25 GB/s or more, except from Hopper on below 50 GB/s with more than 4 channels;
* a second pass raises the speed as far as the doubled channels still fit;
* ``ncclTopoPostset`` (src/graph/connect.cc) runs every ring twice, and from Hopper on
  doubles again across nodes where fewer than 16 channels run above 45 GB/s.

So 8 A100 on NVSwitch (12 NVLinks of 20 GB/s: 6 channels at 40, 12 at 20, 24) and 8 H100
(18 links of 20.6 GB/s: 6 at 60, 12 at 30, 24) run 24 channels, which NCCL's logs print
as "24 coll channels"; two DGX H100 with a 400 Gb/s NIC per GPU run 16 (8 at 48 GB/s, one
per NIC, not doubled below 50 GB/s; NCCL's logs: "16 coll channels"). NCCL's tuner
reasons on the graph's channels, before ``ncclTopoPostset`` (12 and 8 there): its bus
bandwidth for rings and trees is so many channels times their speed (12 x 30 = 360 GB/s
and 8 x 48 = 384 GB/s there, ``graphs[a]->nChannels * bw``, tuning.cc), and its caps are
so many times a channel's cap (``perChMax*Bws``), so a channel a collective runs on
moves at most that cap times graph / run channels. Across nodes a
channel here takes one of the node's routes to the next node through its GPUs' NICs
(round them, as NCCL's search starts each channel at the next NIC), and the node's
NVLink carries what does not leave a GPU through its own NIC.

On one node whose GPUs talk over PCI the ring crosses PCIe switches, CPUs and the link
between sockets, each hop on the path NCCL computes (without peer-to-peer access the
path goes up to the CPU and back down, and NCCL's topology has no host memory in it):
8 GPUs on two Gen4 switches with peer-to-peer access run 2 channels at 12 GB/s each way
of a 24 GB/s uplink, 4 once run twice; without it every uplink carries four hops each
way, 1 channel at 6 GB/s, 2 run (public logs of 8 RTX 4090 through SHM print "2 coll
channels", of 8 RTX 5090 with peer-to-peer 4).

Across nodes of one GPU each the ring only goes through the NICs: a GPU on a 24 GB/s
PCIe link to a 25 GB/s NIC runs 1 channel at 24, not doubled, 2 run (a public log of
such a pair prints "maxBw 24.0 totalBw 24.0", the ring graph "nChannels 1, bw
24.000000/24.000000" and "2 coll channels"). Across nodes whose GPUs talk over PCI a
channel goes from a NIC through the node's GPUs in order and back to the NIC
(:func:`across_pci_nodes_channels`). Where nodes differ, each searches its own graph and
every rank keeps the fewest channels and the lowest speed any found (:func:`fewest`);
:mod:`.node_search` reads each node's hops and routes off the topology.

NCCL's tuner also reads its tree graph (:func:`tree_intra_speed`, which its CollNet
Chain graph follows), its NVLS graph (:func:`nvls_graph`) and its CollNet Direct graph
(:func:`collnet_direct_graph`), searched the same way with their own rules. The search here is
2.30.7's whichever tuner release predicts (2.26.2's Blackwell speed arrays differ).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from simcoll.algorithms.nccl.constants import MAX_CHANNELS

__all__ = ["INTEL_P2P_OVERHEAD", "INTRA_SPEEDS", "INTER_SPEEDS", "MAX_RING_CHANNELS", "Searched",
           "one_node_channels", "one_node_ring_channels", "across_nodes_channels",
           "across_pci_nodes_channels", "pci_channels", "pci_tree_intra_speed", "finish",
           "fewest", "postset", "chains_fit", "tree_intra_speed", "HeadsGraph", "nvls_graph",
           "NVLS_ARITY", "DIRECT_ARITY", "collnet_direct_graph"]

_CLASSIC_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
_CLASSIC_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0,
                  4.0, 3.0, 2.4, 1.2, 0.24, 0.12)
INTRA_SPEEDS = {
    "volta": _CLASSIC_INTRA, "ampere": _CLASSIC_INTRA,
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
"""``speedArrayIntra``, ``sm90SpeedArrayIntra``, ``sm100SpeedArrayIntra`` (GB/s)."""
INTER_SPEEDS = {
    "volta": _CLASSIC_INTER, "ampere": _CLASSIC_INTER,
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
               2.4, 1.2, 0.24, 0.12),
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                  15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
}
"""``speedArrayInter``, ``sm90SpeedArrayInter``, ``sm100SpeedArrayInter`` (GB/s)."""
MAX_RING_CHANNELS = MAX_CHANNELS // 2
"""The ring graph's ``maxChannels``: ``MAXCHANNELS`` (64) / 2 (src/init.cc)."""
INTEL_P2P_OVERHEAD = 6 / 5
"""What a channel takes on the PCI links of a path through an Intel CPU's root complex,
per unit of its speed (``INTEL_P2P_OVERHEAD``, src/graph/topo.h)."""
DIRECT_ARITY = 8
"""``NCCL_MAX_DIRECT_ARITY`` + 1 (src/include/device.h): the most heads a CollNet Direct
graph has."""
NVLS_ARITY = 32
"""``NCCL_MAX_NVLS_ARITY`` (src/include/device.h): the most heads an NVLS graph has."""
_COMPUTE_CAPABILITY = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}
_NEXT_SPEED_RATIO = 0.49
"""The search tries a slower speed only while it is above this share of the best one."""
_SLACK = 1e-9
"""Relative slack when comparing bandwidths (NCCL's are floats summed in one order)."""


class Searched(NamedTuple):
    """What NCCL's ring search gives: the graph's channels (``nChannels``, which its
    tuner counts), the channels its collectives run on (after ``ncclTopoPostset``), and
    the graph's speed per channel (GB/s; ``bwIntra``, equal to ``bwInter`` for rings),
    whose product with ``graph`` is the tuner's bus bandwidth for rings and trees."""

    graph: int
    run: int
    speed: float


def _search(speeds: Sequence[float], max_bw: float, total_bw: float,
            fits: Callable[[float], int], most: int = MAX_RING_CHANNELS, least: int = 1,
            more_channels_first: bool = False) -> tuple[int, float]:
    """Pass 1 of ``ncclTopoCompute``: (channels, speed) of the best speed. It starts at
    the first speed within ``max_bw`` whose ``least`` channels fit ``total_bw``, keeps
    the speed whose channels carry the most (NVLS: the most channels first,
    ``more_channels_first``), and stops once ``most`` channels fit, they carry
    ``total_bw``, or the next speed is not above 0.49 of the best."""
    i = next((k for k, s in enumerate(speeds) if s <= max_bw and s * least <= total_bw),
             len(speeds) - 1)
    best_n, best_s = 0, 0.0
    while True:
        n = fits(speeds[i])
        if (more_channels_first and n > best_n) or n * speeds[i] > best_n * best_s:
            best_n, best_s = n, speeds[i]
        if best_n >= most or best_n * best_s >= total_bw * (1 - _SLACK):
            break
        if i + 1 < len(speeds) and (best_n == 0 or speeds[i + 1] / best_s > _NEXT_SPEED_RATIO):
            i += 1
            continue
        break
    return best_n, best_s


def _dup(n: int, speed: float, arch: str, most: int) -> tuple[int, float]:
    """``ncclTopoDupChannels``: twice the channels (up to ``most``) at a share of the
    speed, where the speed is 25 GB/s or more, except from Hopper on below 50 GB/s with
    more than 4 channels."""
    if speed >= 25.0 and not (_COMPUTE_CAPABILITY[arch] > 80 and speed < 50.0 and n > 4):
        doubled = min(2 * n, most)
        return doubled, speed / math.ceil(doubled / n)
    return n, speed


def _raise(speeds: Sequence[float], speed: float, carried: Callable[[float], bool],
           below: float = math.inf) -> float:
    """Pass 2 of ``ncclTopoCompute``: from ``speed``, the faster speeds of the array one
    at a time while the current one is below ``below`` and the next is ``carried``."""
    for faster in sorted(v for v in speeds if v > speed):
        if speed >= below or not carried(faster):
            break
        speed = faster
    return speed


def finish(found: tuple[int, float], speeds: Sequence[float], arch: str, across: bool,
           fits: Callable[[float], int]) -> Searched:
    """The channels and speed from the search's ``found`` (channels, speed): the
    graph's channels, doubled by ``ncclTopoDupChannels`` (the speed halved, then raised
    as far as they fit: pass 2), which NCCL's tuner counts; and those its collectives
    run on, after ``ncclTopoPostset``'s doublings. Where the search found none, NCCL
    falls back to one ring in the GPUs' order ("falling back to simple order") at 0.1
    GB/s: 1 channel, run twice."""
    n, speed = found
    if n == 0:
        return Searched(1, 2, 0.1)
    n, speed = _dup(n, speed, arch, MAX_RING_CHANNELS)
    speed = _raise(speeds, speed, lambda v: fits(v) >= n)
    return Searched(n, postset(n, speed, arch, across), speed)


def postset(n: int, speed: float, arch: str, across: bool, collnet: bool = False) -> int:
    """The channels ``ncclTopoPostset`` (src/graph/connect.cc) runs ``n`` graph channels
    of ``speed`` GB/s on: every ring twice; with ``collnet`` (NCCL_COLLNET_ENABLE where
    CollNet Chain's graph is faster inside a node than out) half as many again; then
    from Hopper on twice again across nodes where fewer than 16 run above 45 GB/s."""
    run = min(MAX_CHANNELS, 2 * n)
    if collnet:
        run = min(MAX_CHANNELS, run + run // 2)
    if _COMPUTE_CAPABILITY[arch] >= 90 and across and speed > 45.0 and run < 16:
        run = min(MAX_CHANNELS, 2 * run)
    return run


def fewest(found: Sequence[Searched], arch: str) -> Searched:
    """The ring graph every rank keeps where the nodes each searched their own
    (``found``, one per node): the fewest channels and the lowest speed any found
    (``std::min`` over every rank's ``graphInfo``, src/init.cc of 2.30.7), run as
    ``ncclTopoPostset`` runs them across nodes (:func:`finish`)."""
    n = min(searched.graph for searched in found)
    speed = min(searched.speed for searched in found)
    return Searched(n, postset(n, speed, arch, True), speed)


def one_node_channels(arch: str, nvlink_gbs: float) -> Searched:
    """The channels and speed of a ring over one node of GPUs with ``nvlink_gbs`` of
    NVLink each (see :func:`finish`)."""
    speeds = INTRA_SPEEDS[arch]

    def fits(speed: float) -> int:
        return min(MAX_RING_CHANNELS, int(nvlink_gbs * (1 + _SLACK) // speed))

    return finish(_search(speeds, nvlink_gbs, nvlink_gbs, fits), speeds, arch, False, fits)


def one_node_ring_channels(arch: str, gpu_gbs: float,
                           hops: Sequence[Sequence[tuple[int, float, float]]]) -> Searched:
    """The channels and speed of a ring over one node whose GPUs follow ``hops`` (each
    GPU's path to the next, as ``(directed link, GB/s, weight)`` triples of the links
    NCCL's topology knows), each of ``gpu_gbs`` on its own link (NCCL's ``totalBw`` for
    a GPU on PCI: its PCI link). Each channel takes its speed times the weight on every
    link of every hop, so a link that ``k`` hops of weight 1 cross carries ``GB/s // (k
    x speed)`` channels: over PCI a switch's uplink carries one hop each way where the
    GPUs reach each other through it (peer to peer), and every hop of its GPUs each way
    where each GPU's path goes up to the CPU and back down (no peer to peer: NCCL's SHM
    transport). A weight of 1.2 is NCCL's ``INTEL_P2P_OVERHEAD`` on the PCI links of a
    path through an Intel CPU's root complex. Searched as :func:`finish` says, through
    the ring order given, not NCCL's other orders."""
    speeds = INTRA_SPEEDS[arch]
    loads: dict[int, tuple[float, float]] = {}
    for hop in hops:
        for d, gbs, weight in hop:
            loads[d] = (gbs, loads.get(d, (gbs, 0.0))[1] + weight)
    max_bw = max(min(gbs for _, gbs, _ in hop) for hop in hops)

    def fits(speed: float) -> int:
        return min(MAX_RING_CHANNELS, *(int(gbs * (1 + _SLACK) // (load * speed))
                                        for gbs, load in loads.values()))

    return finish(_search(speeds, max_bw, gpu_gbs, fits), speeds, arch, False, fits)


def across_nodes_channels(arch: str, nvlink_gbs: float, gpus: int,
                          routes: Sequence[Sequence[tuple[int, float]]]) -> Searched:
    """The channels and speed of a ring across nodes of ``gpus`` GPUs with
    ``nvlink_gbs`` of NVLink each (with one GPU a node, its own total: its NVLinks
    together or its PCI link, NCCL's ``totalBw``), whose ``routes`` to the next node
    (one per NIC a GPU binds channels to, as ``(directed link, GB/s)`` pairs) carry the
    channels in turn (see :func:`finish`)."""
    speeds = INTER_SPEEDS[arch]
    max_bw = max(min(gbs for _, gbs in route) for route in routes)

    def fits(speed: float) -> int:
        left: dict[int, float] = {}
        n, placed = 0, True
        while placed and n < MAX_RING_CHANNELS:
            placed = False
            for route in routes:
                if n < MAX_RING_CHANNELS and all(
                        left.get(d, gbs) >= speed * (1 - _SLACK) for d, gbs in route):
                    for d, gbs in route:
                        left[d] = left.get(d, gbs) - speed
                    n, placed = n + 1, True
        return min(n, chains_fit(speed, nvlink_gbs, gpus))

    return finish(_search(speeds, max_bw, nvlink_gbs, fits), speeds, arch, True, fits)


def chains_fit(speed: float, nvlink_gbs: float, gpus: int) -> int:
    """How many channels of ``speed`` GB/s can each go through a node of ``gpus`` GPUs of
    ``nvlink_gbs`` NVLink each: a channel leaves ``gpus - 1`` of them over their own
    NVLink (the last to the NIC), so some GPU carries ceil(n (gpus - 1) / gpus) of n,
    and n is at most ``gpus / (gpus - 1)`` times what one GPU's NVLink carries (as many
    as :data:`MAX_CHANNELS` with one GPU, which has no chain)."""
    if gpus == 1:
        return MAX_CHANNELS
    return int(nvlink_gbs * (1 + _SLACK) // speed) * gpus // (gpus - 1)


def pci_channels(chain: Sequence[tuple[int, float, float]],
                 routes: Sequence[Sequence[tuple[int, float, float]]], speed: float,
                 chain_speed: float | None = None) -> int:
    """How many channels fit across nodes whose GPUs talk over PCI, each crossing
    ``chain`` at ``chain_speed`` (``speed`` if None) and one of ``routes`` at ``speed``
    (``(directed link, GB/s, weight)`` triples; see :func:`across_pci_nodes_channels`):
    channel c takes the first of routes c, c + 1, ... (round them) that carries it."""
    inside = speed if chain_speed is None else chain_speed
    left: dict[int, float] = {}
    n = 0
    while n < MAX_RING_CHANNELS:
        for i in range(len(routes)):
            need: dict[int, tuple[float, float]] = {}
            for links, at in ((chain, inside), (routes[(n + i) % len(routes)], speed)):
                for d, gbs, weight in links:
                    need[d] = (gbs, need.get(d, (gbs, 0.0))[1] + weight * at)
            if all(left.get(d, gbs) >= load * (1 - _SLACK) for d, (gbs, load) in need.items()):
                for d, (gbs, load) in need.items():
                    left[d] = left.get(d, gbs) - load
                n += 1
                break
        else:
            break
    return n


def across_pci_nodes_channels(arch: str, gpu_gbs: float,
                              chain: Sequence[tuple[int, float, float]],
                              routes: Sequence[Sequence[tuple[int, float, float]]]) -> Searched:
    """The channels and speed of a ring across nodes whose GPUs talk over PCI, NCCL's
    pattern NET -> GPU a -> ... -> GPU x -> NET: every channel crosses ``chain`` (the
    hops from a node's first GPU to its last, ``(directed link, GB/s, weight)``
    triples as for :func:`one_node_ring_channels`) and one of ``routes`` (from the last
    GPU through one of the node's NICs to the next node's first GPU, triples too):
    channel c the first of routes c, c + 1, ... (round them) that carries it, as NCCL
    tries the NICs from ``nets[(nChannels + i) % netCount]`` (``ncclTopoSearchRecNet``;
    :func:`pci_channels`). ``gpu_gbs`` is a GPU's ``totalBw`` (its PCI link). Searched
    as :func:`finish` says."""
    speeds = INTER_SPEEDS[arch]
    max_bw = max(min(gbs for _, gbs, _ in route) for route in routes)

    def fits(speed: float) -> int:
        return pci_channels(chain, routes, speed)

    return finish(_search(speeds, max_bw, gpu_gbs, fits), speeds, arch, True, fits)


def pci_tree_intra_speed(arch: str, ring: Searched, chain: Sequence[tuple[int, float, float]],
                         routes: Sequence[Sequence[tuple[int, float, float]]]) -> float:
    """:func:`tree_intra_speed` across nodes whose GPUs talk over PCI: the tree's
    channels (the ring graph's, NCCL's pattern NET -> GPU a -> ... -> GPU x with GPU a
    back to the NET) take ``routes`` (from the node's first GPU through its NICs, as
    triples) at the ring's speed and raise the speed on ``chain`` (the hops from the
    first GPU to the last) while below twice that and they still fit
    (:func:`pci_channels`)."""
    return _raise(INTER_SPEEDS[arch], ring.speed,
                  lambda v: pci_channels(chain, routes, ring.speed, v) >= ring.graph,
                  below=2 * ring.speed)


def tree_intra_speed(arch: str, ring: Searched, nvlink_gbs: float, gpus: int) -> float:
    """The speed (GB/s) NCCL's tree graph gives its channels inside a node across nodes
    (its ``bwIntra``: search.cc raises it on any node count, the tuner reads it on two
    nodes only), from the ring graph's search
    ``ring``: the tree takes the ring's channels at its speed to the network
    (``bwInter``), then pass 2 raises ``bwIntra`` one step of the speed array at a time
    ("increase bwIntra for trees (2 nodes or collnet)") while it is below twice
    ``bwInter`` and the channels' chains still fit through the node's GPUs of
    ``nvlink_gbs`` each, as the ring's (:func:`chains_fit`). With one
    GPU a node there is no chain: a 24 GB/s tree rises to 28, 30 and 48, where a public
    log prints the tree graph's "bw 48.000000/24.000000". NCCL's CollNet Chain graph
    (the same channels, a chain from the NIC's GPU) rises the same way."""
    return _raise(INTER_SPEEDS[arch], ring.speed,
                  lambda v: chains_fit(v, nvlink_gbs, gpus) >= ring.graph,
                  below=2 * ring.speed)


class HeadsGraph(NamedTuple):
    """An NVLS or CollNet Direct graph of NCCL's: its channels (one per head GPU) and
    their speeds inside a node (``bwIntra``) and to the network (``bwInter``), GB/s; no
    channels where the search found none (NCCL then runs no NVLS, or no CollNet)."""

    channels: int
    intra: float
    inter: float


def nvls_graph(arch: str, nvlink_gbs: float, gpus: int, nics: int = 0,
               nic_gbs: float = 0.0) -> HeadsGraph:
    """NCCL's NVLS graph search (``ncclTopoCompute`` with ``NCCL_TOPO_PATTERN_NVLS``,
    src/graph/search.cc of 2.30.7) on nodes of ``gpus`` GPUs with ``nvlink_gbs`` of
    NVLink each, on one node (``nics=0``) or across nodes whose ``nics`` NICs carry
    ``nic_gbs`` each (one head per NIC, on a GPU of its own).

    A channel has one head GPU; at a speed it takes that speed on every GPU's NVLink to
    and from the NVSwitch, twice on its head's (``ncclTopoSearchTryNvls``), and across
    nodes the speed on its head's NIC. So n channels fit where (n + 1) x speed is within
    a GPU's NVLink, and n is at most the heads there can be (the GPUs, the NICs, 32). On
    one node every GPU must head a channel (``minChannels = maxChannels``); across nodes
    the search keeps the speed with the most channels (or, as many, the most bandwidth),
    down the speed array while the next speed is above 0.49 of the best, and stops once
    every head has one. Pass 2 then raises ``bwInter`` while it is below twice
    ``bwIntra`` and the heads' NICs carry it. On one node of 8 H100 (370.8 GB/s): 8
    channels at 40 (9 x 40 = 360), ``bwInter`` 60; across DGX H100 nodes (8 NICs of 48):
    6 at 48, 7 at 45, 8 at 40, then ``bwInter`` 42, 45, 48."""
    across = nics > 0
    speeds = (INTER_SPEEDS if across else INTRA_SPEEDS)[arch]
    most = min(NVLS_ARITY, gpus, nics if across else gpus)
    least = 1 if across else most
    max_bw = nic_gbs if across else nvlink_gbs

    def fits(speed: float) -> int:
        if across and nic_gbs < speed * (1 - _SLACK):
            return 0
        n = min(most, int(nvlink_gbs * (1 + _SLACK) // speed) - 1)
        return n if n >= least else 0

    n, speed = _search(speeds, max_bw, nvlink_gbs, fits, most, least,
                       more_channels_first=True)
    if n == 0:
        return HeadsGraph(0, 0.0, 0.0)
    inter = _raise(speeds, speed, lambda v: not across or nic_gbs >= v * (1 - _SLACK),
                   below=2 * speed)
    return HeadsGraph(n, speed, inter)


def collnet_direct_graph(arch: str, nvlink_gbs: float, gpus: int, nics: int,
                         nic_gbs: float) -> HeadsGraph:
    """NCCL's CollNet Direct graph search (``NCCL_TOPO_PATTERN_COLLNET_DIRECT``,
    src/graph/search.cc of 2.30.7) across nodes of ``gpus`` GPUs with ``nvlink_gbs`` of
    NVLink each, whose ``nics`` NICs carry ``nic_gbs`` each: one head per NIC, at most 8.

    A channel's head sends its speed to the other GPUs and takes it back from them, a
    share of 1 / (gpus - 1) each (``ncclTopoSearchTryCollnetDirect``), and its NIC
    carries the speed: with n heads a head's NVLink carries speed x (1 + (n - 1) /
    (gpus - 1)) each way. The search keeps the speed whose channels carry the most
    (stopping once every head has one), ``ncclTopoDupChannels`` doubles them up to the
    heads there are, and pass 2 raises ``bwIntra`` while it is below twice ``bwInter``
    and the heads' NVLink carries it ("increase bwIntra for trees (2 nodes or
    collnet)"). DGX A100 nodes (8 NICs at 24 GB/s): 8 heads at 24, ``bwIntra`` 28, 30,
    48; DGX H100 nodes (48 GB/s NICs): 8 at 48."""
    speeds = INTER_SPEEDS[arch]
    most = min(DIRECT_ARITY, gpus, nics)

    def heads(intra: float, inter: float) -> int:
        if most < 1 or nic_gbs < inter * (1 - _SLACK) or nvlink_gbs * (1 + _SLACK) < intra:
            return 0
        if gpus == 1:
            return most
        return min(most, int((nvlink_gbs * (1 + _SLACK) / intra - 1) * (gpus - 1)) + 1)

    n, speed = _search(speeds, nic_gbs, nvlink_gbs, lambda v: heads(v, v), most)
    if n == 0:
        return HeadsGraph(0, 0.0, 0.0)
    n, speed = _dup(n, speed, arch, most)
    intra = _raise(speeds, speed, lambda v: heads(v, speed) >= n, below=2 * speed)
    return HeadsGraph(n, intra, speed)
