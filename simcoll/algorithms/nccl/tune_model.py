"""NCCL's model of what each (algorithm, protocol) pair costs: the channels it runs on,
its bus bandwidth and latency, and the time NCCL predicts from them (``ncclTopoTuneModel``
and ``ncclTopoGetAlgoTime`` in ``src/graph/tuning.cc``; the channel counts from
``src/enqueue.cc`` and ``src/transport/nvls.cc``), with NCCL 2.30.7's formulas and
constants or 2.26.2's (:data:`~simcoll.algorithms.nccl.constants.TUNERS`).
:mod:`~simcoll.algorithms.nccl.tuner` picks the fastest pair by these predictions.
"""

from __future__ import annotations

import math

from simcoll.algorithms.nccl.constants import (
    ARCHS,
    COLLNET_DIRECT_HOP_US,
    HW_LATENCY_BY_TUNER,
    MAX_CHANNELS,
    NCCL_VERSION,
    NVLS_EFFICIENCY,
    PER_CHANNEL_MAX_NVLS_TREE_BW,
    PER_CHANNEL_MAX_RING_LL128_BW_BY_TUNER,
    PER_CHANNEL_MAX_TREE_BW_BY_TUNER,
    PER_CHANNEL_MAX_TREE_LL128_BW_BY_TUNER,
    PROTOCOLS,
    TREE_CORRECTION,
    TREE_PATTERN_FACTOR,
    TUNERS,
    ll_max_bw,
    net_overhead_us,
)
from simcoll.algorithms.nccl.machine import Machine
from simcoll.algorithms.nccl.protocols import PROTOCOL
from simcoll.algorithms.nccl.search import (
    HeadsGraph,
    Searched,
    collnet_direct_graph,
    nvls_graph,
    postset,
    tree_intra_speed,
)
from simcoll.algorithms.nccl.support import ALGORITHMS
from simcoll.algorithms.params import Choice, Int

__all__ = ["comm_channels", "max_channels", "nvls_channels", "nvls_graph_of",
           "nvls_searched", "collnet_graphs_of", "predict"]


def comm_channels(machine: Machine, collnet: int = 0) -> int:
    """The channels NCCL's communicator opens for rings and trees (and PAT and CollNet,
    which run on them): ``comm->nChannels``. What its topology search gives
    (:attr:`Machine.channels`; 24 on a node of 8 A100 or H100, 16 on DGX H100 nodes with
    a NIC per GPU, 4 on 8 GPUs over PCI with peer-to-peer access), or 1 on a
    communicator of one GPU, which searches no graph; with NCCL_COLLNET_ENABLE set
    (``collnet``) on a SHARP fabric across nodes, half as many again (at most
    :data:`~.constants.MAX_CHANNELS`) where CollNet Chain's graph is faster inside a
    node than to the network and a node holds more than one GPU, "to saturate
    intra-node bandwidth", before Hopper's doubling (:func:`~.search.postset`; 16
    become 24 on ``dgx_a100(2, sharp=True)``)."""
    if collnet and machine.sharp and machine.nranks > machine.nnodes > 1:
        graphs = collnet_graphs_of(machine)
        if graphs is not None and graphs[1].intra > graphs[1].inter:
            return postset(machine.graph_channels, machine.graph_channel_bw / 1e9,
                           machine.arch, True, collnet=True)
    return machine.channels or 1


def max_channels(machine: Machine, algo: str, tuner: str = NCCL_VERSION,
                 collnet: int = 0, *, comm: int = 0, nvls: int = 0) -> int:
    """The channels NCCL runs ``algo`` on before it trims them for small sizes: for
    rings, trees, PAT and CollNet the communicator's (:func:`comm_channels`, or ``comm``
    where given: NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS); for NVLS and NVLS-tree
    what :func:`nvls_channels` gives (or ``nvls``: NCCL_NVLS_NCHANNELS), which the
    communicator's count leaves alone, but for NVLS across nodes no more than the
    communicator's (2.30.7's ``topoGetAlgoInfo``, src/enqueue.cc; 2.26.2 takes NVLS's own
    there too)."""
    communicator = comm or comm_channels(machine, collnet)
    if algo == "nvls" and machine.nnodes > 1 and tuner != "2.26.2":
        return min(nvls or nvls_channels(machine, tuner), communicator)
    if algo in ("nvls", "nvls_tree"):
        return nvls or nvls_channels(machine, tuner)
    return communicator


def nvls_channels(machine: Machine, tuner: str = NCCL_VERSION) -> int:
    """NVLS's channels (``ncclNvlsTuning``, src/transport/nvls.cc): 16 on Hopper
    (``NVLS_NCHANNELS_SM90``); on Blackwell 24 on one node (``NVLS_NCHANNELS_SM100_NVL``)
    and 32 across nodes (``NVLS_NCHANNELS_SM100``), which 2.30.7's
    ``ncclNvlsTreeSm100Tuning`` sets by the slowest NIC (``minNetBw``) and the fewest GPUs
    of a node: 32 on 2 nodes with NICs of 48 GB/s or more; beyond, 24 with NICs of 96 GB/s
    or more and at most 8 GPUs per node, 32 with more GPUs, 24 with NICs from 48 GB/s;
    32 with slower NICs. NCCL 2.26.2 opens 32 on Blackwell wherever it runs NVLS."""
    if machine.arch != "blackwell":
        return 16
    if tuner == "2.26.2":
        return 32
    if machine.nnodes == 1:
        return 24
    nic = machine.inter_bw / max(machine.rails, 1) / 1e9
    if machine.nnodes == 2 and nic >= 48:
        return 32
    if nic >= 96:
        return 24 if (machine.smallest_node or machine.ppn) <= 8 else 32
    return 24 if nic >= 48 else 32


def _column(machine: Machine) -> int:
    return min(machine.nnodes, 3) - 1


def nvls_graph_of(machine: Machine) -> HeadsGraph:
    """NCCL's NVLS graph on this machine (:func:`~.search.nvls_graph`): over the
    smallest node's GPUs and, across nodes, one head per NIC (:attr:`Machine.rails`),
    each NIC carrying its share of the node's bandwidth to the network, and no more
    than the heads' share of theirs (:attr:`Machine.heads_inter_bw`)."""
    gpus = machine.smallest_node or round(machine.ppn)
    if machine.nnodes == 1:
        return nvls_graph(machine.arch, machine.intra_bw / 1e9, gpus)
    rails = max(machine.rails, 1)
    nics = min(rails, gpus)
    nic = machine.inter_bw / rails
    if machine.heads_inter_bw is not None:
        nic = min(nic, machine.heads_inter_bw / nics)
    return nvls_graph(machine.arch, machine.intra_bw / 1e9, gpus, nics, nic / 1e9)


def nvls_searched(machine: Machine) -> bool:
    """NCCL's NVLS graph has a channel here (NVLS runs only then)."""
    return NVLS_EFFICIENCY[machine.arch] > 0 and nvls_graph_of(machine).channels > 0


def _nvls_bus_bandwidth(machine: Machine, collective: str, algo: str, tuner: str) -> float:
    """NCCL's bus bandwidth (GB/s) of NVLS or NVLS-tree with Simple: the NVLS graph's
    channels (:func:`nvls_graph_of`; one per head GPU, not the channels NVLS runs on)
    times a channel's bandwidth. 2.30.7 takes for that the least of the channel's
    ``bwIntra`` times the share of NVLink NVLS reaches (``nvlsEfficiency``, one channel's
    share left out, doubled for all_reduce's two pipelined operations, else times
    (ppn - 1) / ppn), its ``bwInter`` (doubled for NVLS-tree on 2 nodes) and, for
    NVLS-tree, ``perChMaxNVLSTreeBw``; 2.26.2 the lesser of ``bwIntra`` and
    ``bwInter`` (half of it for NVLS-tree beyond 2 nodes). No NVLS where the graph has
    none, nor (2.30.7) where it has fewer than 2 channels, whatever channels NVLS runs on
    (NCCL_NVLS_NCHANNELS)."""
    arch, col = machine.arch, _column(machine)
    if NVLS_EFFICIENCY[arch] == 0:  # no NVLS before Hopper, in either release
        return 0.0
    graph = nvls_graph_of(machine)
    n = graph.channels
    if tuner == "2.26.2":
        inter = graph.inter if algo == "nvls" or machine.nnodes <= 2 else graph.inter / 2
        return n * min(graph.intra, inter)
    if n < 2:
        return 0.0
    intra = graph.intra * NVLS_EFFICIENCY[arch] * (n - 1) / n
    intra *= 2.0 if collective == "all_reduce" else (machine.ppn - 1) / machine.ppn
    inter = graph.inter * (2 if algo == "nvls_tree" and machine.nnodes <= 2 else 1)
    cap = PER_CHANNEL_MAX_NVLS_TREE_BW[arch][col] if algo == "nvls_tree" else math.inf
    return n * min(intra, inter, cap)


def collnet_graphs_of(machine: Machine) -> tuple[HeadsGraph, HeadsGraph] | None:
    """NCCL's CollNet Direct and CollNet Chain graphs on this machine, or None on a
    communicator of one GPU (no graph: :attr:`Machine.graph_channels` is 0). Direct: a
    head per NIC (:attr:`Machine.rails`, each carrying its share of the node's bandwidth
    to the network; :func:`~.search.collnet_direct_graph`). Chain: the ring graph's
    channels, whose speed inside a node NCCL's search raises as for trees
    (:func:`~.search.tree_intra_speed`)."""
    if not machine.graph_channels:
        return None
    gpus = round(machine.ppn)
    rails = max(machine.rails, 1)
    direct = collnet_direct_graph(machine.arch, machine.intra_bw / 1e9, gpus, rails,
                                  machine.inter_bw / rails / 1e9)
    ring = Searched(machine.graph_channels, machine.channels,
                    machine.graph_channel_bw / 1e9)
    chain = HeadsGraph(ring.graph, tree_intra_speed(machine.arch, ring,
                                                    machine.intra_bw / 1e9, gpus), ring.speed)
    return direct, chain


def _collnet_bus_bandwidth(machine: Machine, collective: str, algo: str, proto: str,
                           tuner: str) -> float:
    """NCCL's bus bandwidth (GB/s) of CollNet Direct or Chain, Simple only: its graph's
    channels times their speed inside a node (``bwIntra``, which NCCL reads for CollNet
    on any node count; :func:`collnet_graphs_of`; 0 without a graph). Direct's
    all_reduce is divided by ``factor = ppn / heads`` less half its excess over 1 (NCCL:
    "all GPUs need a local NIC to work at full speed") and, from Hopper on, times 0.85.
    Direct's reduce_scatter and all_gather: ppn x the lesser of ``bwIntra`` and 0.9 of
    ``bwInter`` (2.30.7), or ppn x ``bwIntra`` times 0.95 at one GPU per node down to
    0.85 at 8, interpolated (2.26.2: "measured corrective ratio")."""
    if proto != "Simple":
        return 0.0
    graphs = collnet_graphs_of(machine)
    if graphs is None:
        return 0.0
    heads, intra, inter = graphs[0]
    chain = graphs[1].channels * graphs[1].intra
    direct = heads * intra
    if collective != "all_reduce":
        if tuner == "2.26.2":
            w = (machine.ppn - 1) / 7
            return machine.ppn * intra * (w * 0.85 + (1 - w) * 0.95)
        return machine.ppn * min(intra, 0.9 * inter)
    if algo == "collnet_chain":
        return chain
    factor = machine.ppn / max(heads, 1)
    factor -= (factor - 1) / 2
    return direct / factor * (0.85 if machine.arch in ("hopper", "blackwell") else 1.0)


def _bus_bandwidth(machine: Machine, collective: str, algo: str, proto: str,
                   channels: int, tuner: str) -> float:
    """NCCL's bus bandwidth (GB/s) of a pair, 0 where it does not apply. For rings,
    trees and PAT it starts from the graph's channels times their speed
    (``graphs[a]->nChannels * bw``: :attr:`Machine.graph_channels` x
    :attr:`Machine.graph_channel_bw`, or for trees and PAT, which run on NCCL's tree
    graph, :attr:`Machine.tree_channel_bw`), and its per-channel caps count those
    channels, whatever the run opens. On a communicator of one GPU (no graph) it starts
    from the links' bandwidth and counts ``channels``."""
    arch, col = machine.arch, _column(machine)
    intra = machine.intra_bw / 1e9
    bw = intra if machine.nnodes == 1 else min(intra, machine.inter_bw / 1e9)
    if algo in ("nvls", "nvls_tree"):
        if proto != "Simple" or not machine.nvls:
            return 0.0
        return _nvls_bus_bandwidth(machine, collective, algo, tuner)
    if algo == "p2p":
        return bw
    if algo.startswith("collnet"):
        return _collnet_bus_bandwidth(machine, collective, algo, proto, tuner)
    if machine.graph_channels:
        channels = machine.graph_channels
        bw = channels * (machine.graph_channel_bw if algo == "ring"
                         else machine.tree_channel_bw) / 1e9
    if algo == "pat":
        return bw * 0.75 if proto == "Simple" else 0.0
    if algo == "ring":
        if proto == "LL":
            return min(ll_max_bw(arch, machine.nnodes, machine.cpu), bw * 0.5)
        if proto == "LL128":
            return min(bw * 0.92, channels
                       * PER_CHANNEL_MAX_RING_LL128_BW_BY_TUNER[tuner][arch][col])
        return bw
    if collective != "all_reduce":
        return 0.0
    bw = min(bw * 0.92, channels * PER_CHANNEL_MAX_TREE_BW_BY_TUNER[tuner][arch][col])
    if proto == "LL":
        bw = min(bw / 3.8, ll_max_bw(arch, machine.nnodes, machine.cpu))
    elif proto == "LL128":
        factor = 7.0 / 9.0 if machine.nnodes == 1 else 120.0 / 128.0
        bw = min(bw * factor,
                 channels * PER_CHANNEL_MAX_TREE_LL128_BW_BY_TUNER[tuner][arch][col])
    return bw * TREE_PATTERN_FACTOR if machine.plain_tree else bw


def _log2i(n: int) -> int:
    """NCCL's ``log2i``: the floor of log2 n."""
    return n.bit_length() - 1


def _latency(machine: Machine, collective: str, algo: str, proto: str, tuner: str) -> float:
    """NCCL's latency (us) of a pair. As in NCCL, tree depths are ``log2i(nodes)`` (log2
    rounded down) and GPUs per node ``nRanks / nNodes`` in integer division."""
    p, nodes = machine.nranks, machine.nnodes
    local = p // nodes
    kind = algo if algo != "p2p" else "ring"
    hw = HW_LATENCY_BY_TUNER[tuner]
    base = PROTOCOL[proto].base(kind) * 1e6
    intra = hw[machine.intra][kind][proto]
    inter = hw["net"]["tree" if machine.ppn == 1 and algo != "p2p" else kind][proto]
    if algo == "ring":
        steps = {"all_reduce": 2 * (p - 1), "reduce_scatter": p - 1,
                 "all_gather": p - 1}.get(collective, p)
        if collective in ("broadcast", "reduce"):
            # tuning.cc adds one step's latency where every channel's ring keeps one GPU
            # order (the graph's sameChannels), as NCCL's search finds inside one node
            # and across nodes of one GPU; where the channels enter a node at different
            # GPUs (one per rail, as the rings here do), it adds a step's latency per
            # rank, the tree's for Simple (NCCL's multi-NIC logs print "sameChannels 0":
            # NVIDIA/nccl#601).
            link = machine.intra if nodes == 1 else "net"
            if nodes == 1 or machine.ppn == 1:
                return base + hw[link]["ring"][proto]
            return base + steps * hw[link]["tree" if proto == "Simple" else "ring"][proto]
        if nodes > 1:
            intra = max(intra, net_overhead_us(machine.cpu, proto))
        inter_steps = 0 if nodes == 1 else (2 if collective == "all_reduce" else 1) * (nodes - 1)
        return base + (steps - inter_steps) * intra + inter_steps * inter
    if algo == "tree":
        return base + 2 * ((local - 1) * intra + _log2i(nodes) * inter)
    if algo == "collnet_direct":
        return base + 2 * (min(1, local - 1) * intra + (local - 1) * COLLNET_DIRECT_HOP_US) \
            + inter
    if algo == "collnet_chain":
        return base + 2 * (local - 1) * intra + inter
    if algo == "nvls":
        return intra + (inter if nodes > 1 else 0.0)
    if algo == "nvls_tree":
        return base + intra + 2 * _log2i(nodes) * inter
    if algo == "pat":  # NCCL: "Still a linear part; hopefully we'll manage to remove it"
        return base + _log2i(nodes) * (inter / 3.5) + p * 2.8
    return base + (p - 1) * intra  # p2p: one step to every peer


def predict(machine: Machine, collective: str, nbytes: int, algo: str, proto: str,
            channels: int, tuner: str = NCCL_VERSION) -> float:
    """NCCL's predicted seconds for ``algo`` / ``proto`` on ``channels`` channels, or
    inf where NCCL would not run that pair, by the tuner of NCCL release ``tuner`` (one
    of :data:`~simcoll.algorithms.nccl.constants.TUNERS`).

    Raises:
        InvalidInputError: a collective, an algorithm that collective does not run, a
            protocol or a release NCCL does not know, a negative ``nbytes``, or a
            channel count outside 1 - :data:`~.constants.MAX_CHANNELS` (64).
    """
    Choice("all_reduce", tuple(ALGORITHMS)).normalize("collective", collective)
    Choice("ring", ALGORITHMS[collective]).normalize("algo", algo)
    Choice("Simple", PROTOCOLS).normalize("proto", proto)
    nbytes = Int(0, minimum=0).normalize("nbytes", nbytes)       # numpy's as Python's
    channels = Int(1, minimum=1, maximum=MAX_CHANNELS).normalize("channels", channels)
    Choice(NCCL_VERSION, TUNERS).normalize("tuner", tuner)
    bus = _bus_bandwidth(machine, collective, algo, proto, channels, tuner)
    if bus <= 0:
        return math.inf
    p = machine.nranks
    steps = {"all_reduce": 2 * (p - 1), "reduce_scatter": p - 1,
             "all_gather": p - 1}.get(collective, p)
    if algo in ("p2p", "pat") or (algo in ("nvls", "collnet_direct")
                                  and collective != "all_reduce"):
        algbw = bus  # NCCL converts no bus bandwidth but the ring's for these
    elif algo in ("nvls", "nvls_tree") and tuner == "2.26.2":
        algbw = bus * 5 / 6
    elif algo in ("ring", "nvls", "nvls_tree"):
        algbw = bus * p / steps
    else:
        algbw = bus * 0.5
    if nbytes >= 64 and (algo == "tree" or algo == "nvls_tree" and _x86_blackwell(machine, tuner)):
        size = _log2i(nbytes >> 6)
        # the tree's correction up to 2^22 x 64 bytes, NVLS-tree's over the whole table
        if size < len(TREE_CORRECTION[proto]) - (1 if algo == "tree" else 0):
            algbw *= TREE_CORRECTION[proto][size]
    latency = _latency(machine, collective, algo, proto, tuner)
    if (algo == "ring" and proto == "Simple" and machine.nnodes > 1
            and collective == "all_reduce" and nbytes / (channels * p) >= 64):
        # NCCL's "plateau effect of ring": 1.9 before Ampere (compute capability 8.0)
        latency *= 1.9 if ARCHS.index(machine.arch) < ARCHS.index("ampere") else 1.4
    return (latency + nbytes / (1000 * algbw)) * 1e-6


def _x86_blackwell(machine: Machine, tuner: str) -> bool:
    """Where NCCL 2.30.7 corrects NVLS-tree's bandwidth by size as it does the tree's
    (``ncclTopoGetAlgoTime``: compute capability 10.0 and newer on x86 CPUs, Intel's or
    AMD's; 2.26.2 never does)."""
    return tuner != "2.26.2" and machine.arch == "blackwell" and machine.cpu in ("intel", "amd")
