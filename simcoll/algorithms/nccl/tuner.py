"""NCCL's tuner: the algorithm, protocol and channel count NCCL would pick.

NCCL predicts each (algorithm, protocol) pair's time as latency + bytes / bandwidth from
a few constants and its topology's figures (``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``
in ``src/graph/tuning.cc``) and runs the fastest; it then lowers the channel count for
small sizes (``topoGetAlgoInfo`` in ``src/enqueue.cc``). This module redoes that
arithmetic on a :class:`~simcoll.algorithms.nccl.machine.Machine`, with NCCL 2.30.7's
formulas and constants or, given ``tuner="2.26.2"``, with 2.26.2's (they differ for NVLS
and NVLS-tree; see :data:`~simcoll.algorithms.nccl.constants.TUNERS`). Its predictions
only choose: what a choice costs is then simulated, message by message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcoll.algorithms.nccl import p2p
from simcoll.algorithms.nccl.constants import (
    ARCHS,
    COLLNET_DIRECT_HOP_US,
    COLLNET_THREAD_THRESHOLD,
    COLLNET_THREADS,
    HW_LATENCY_BY_TUNER,
    MAX_THREADS,
    NCCL_VERSION,
    NVLS_EFFICIENCY,
    PCI_BW,
    PER_CHANNEL_MAX_NVLS_TREE_BW,
    PER_CHANNEL_MAX_RING_LL128_BW_BY_TUNER,
    PER_CHANNEL_MAX_TREE_BW_BY_TUNER,
    PER_CHANNEL_MAX_TREE_LL128_BW_BY_TUNER,
    PROTOCOLS,
    SLOW_RING_SIMPLE_THREADS,
    THREAD_THRESHOLD,
    TREE_CORRECTION,
    TREE_PATTERN_FACTOR,
    ll_max_bw,
    net_overhead_us,
)
from simcoll.algorithms.nccl.machine import Machine
from simcoll.algorithms.nccl.protocols import PROTOCOL
from simcoll.algorithms.nccl.search import (
    NVLS_ARITY,
    HeadsGraph,
    Searched,
    collnet_direct_graph,
    nvls_graph,
    postset,
    tree_intra_speed,
)
from simcoll.errors import InvalidInputError

__all__ = ["ALGORITHMS", "NAMES", "SIMPLE_ONLY", "Choice", "candidates", "predict", "choose",
           "max_channels", "comm_channels", "nvls_channels", "nvls_graph_of",
           "collnet_graphs_of", "nvls_reduces"]

NCCL_ORDER = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat",
              "p2p")
"""NCCL's algorithms in the order of its enum (``NCCL_ALGO_TREE`` = 0, ...; nccl_tuner.h),
the order its tuner compares them in (p2p, all_to_all's, has no rival)."""

ALGORITHMS = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain"),
    "reduce_scatter": ("ring", "nvls", "collnet_direct", "pat"),
    "all_gather": ("ring", "nvls", "collnet_direct", "pat"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_to_all": ("p2p",),
}
"""The NCCL algorithms each collective can run here (NVLS on one node only but with
CollNet on a SHARP fabric, as CollNet Direct, and CollNet Chain for all_reduce; PAT with
one GPU per node: see :func:`candidates`)."""


NAMES = ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")
"""Every algorithm name NCCL_ALGO takes (``ncclAlgoStr``), accepted for every collective
but all_to_all as NCCL accepts them: those a collective cannot run are passed over in a
list, and refused named alone (:func:`choose`)."""


SIMPLE_ONLY = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")
"""The algorithms NCCL runs with Simple only (its tuner gives them no LL or LL128
bandwidth, tuning.cc)."""

NVLS_REDUCTIONS = {**dict.fromkeys(("int32", "uint32", "int64", "uint64", "float16",
                                    "bfloat16"), ("SUM", "MIN", "MAX")),
                   "float32": ("SUM",), "float64": ("SUM",)}
"""The reductions NVLS's switches compute, by element type (``ncclNvlsSupported`` in
NCCL's src/include/device.h: sum of the 32- and 64-bit integers and of the 16-, 32- and
64-bit floats, min / max of those integers and the 16-bit floats only; AVG is NCCL's
PreMulSum or SumPostDiv, which they do not compute, nor a product, nor 8-bit types)."""

SHARP_TYPES = ("float16", "int32", "uint32", "float32", "int64", "uint64", "float64")
"""The element types InfiniBand SHARP reduces (``typeConvert`` of the nccl-rdma-sharp
plugin, ``src/sharp_plugin.c``)."""

SHARP_V3_TYPES = ("bfloat16", "int8", "uint8")
"""The element types SHARP reduces on SHARP v3 switches only (Quantum-2, NDR), which the
plugin takes where the switches report them (``NCCL_SHARP_V3_DATATYPES``, default 2: if
supported)."""

SHARP_REDUCTIONS = ("SUM", "AVG", "MAX", "MIN")
"""The reductions SHARP computes (the plugin's ``opConvert``: sum, max, min; NCCL hands it
an average as a sum, ``ncclGetCollNetSupport`` in src/enqueue.cc)."""

FP8_RING_PENALTY = 1024.0
"""The factor NCCL puts on a ring's predicted time for FP8 on more than 8 ranks, so the
tuner prefers any other algorithm to a long chain of lossy reductions
(``updateCollCostTable`` in src/enqueue.cc)."""


def nvls_reduces(collective: str, op: str | None, dtype: str) -> bool:
    """Whether NCCL lets NVLS and NVLS-tree run ``collective`` of ``op`` (a ReduceOp's
    name, None where nothing reduces) on ``dtype`` elements: any all_gather, else a
    reduction its switches compute (:data:`NVLS_REDUCTIONS`; ``nvlsSupport`` in
    ``ncclPrepareTasks``, src/enqueue.cc)."""
    return collective == "all_gather" or op is None or op in NVLS_REDUCTIONS.get(dtype, ())


def sharp_reduces(collective: str, op: str | None, dtype: str, arch: str) -> bool:
    """Whether NCCL's CollNet (and NVLS across nodes, which needs it) may run
    ``collective`` of ``op`` on ``dtype`` elements over SHARP: NCCL asks the plugin for
    every reduction (``collNetSupportMatrix``, src/transport/coll_net.cc; not for
    all_gather, which reduces nothing). SHARP v3's types are taken where the GPUs are
    Hopper or newer, as their InfiniBand (NDR, Quantum-2) runs SHARP v3 and A100's
    (HDR, Quantum) does not."""
    if collective == "all_gather" or op is None:
        return True
    v3 = ARCHS.index(arch) >= ARCHS.index("hopper")
    return op in SHARP_REDUCTIONS and (dtype in SHARP_TYPES or v3 and dtype in SHARP_V3_TYPES)


@dataclass(frozen=True)
class Choice:
    """What runs: ``algo`` with ``proto`` over ``channels`` channels, and NCCL's own
    prediction of its time (seconds)."""

    algo: str
    proto: str
    channels: int
    predicted: float


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
                 collnet: int = 0) -> int:
    """The channels NCCL runs ``algo`` on before it trims them for small sizes: for
    rings, trees, PAT and CollNet the communicator's (:func:`comm_channels`); for NVLS
    and NVLS-tree what :func:`nvls_channels` gives, but for NVLS across nodes no more
    than the communicator's (2.30.7's ``topoGetAlgoInfo``, src/enqueue.cc; 2.26.2 takes
    NVLS's own there too)."""
    if algo == "nvls" and machine.nnodes > 1 and tuner != "2.26.2":
        return min(nvls_channels(machine, tuner), comm_channels(machine, collnet))
    if algo in ("nvls", "nvls_tree"):
        return nvls_channels(machine, tuner)
    return comm_channels(machine, collnet)


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


def _nvls_searched(machine: Machine) -> bool:
    """NCCL's NVLS graph has a channel here (NVLS runs only then)."""
    return NVLS_EFFICIENCY[machine.arch] > 0 and nvls_graph_of(machine).channels > 0


def _nvls_bus_bandwidth(machine: Machine, collective: str, algo: str, channels: int,
                        tuner: str) -> float:
    """NCCL's bus bandwidth (GB/s) of NVLS or NVLS-tree with Simple: the NVLS graph's
    channels (:func:`nvls_graph_of`; one per head GPU, not the channels NVLS runs on)
    times a channel's bandwidth. 2.30.7 takes for that the least of the channel's
    ``bwIntra`` times the share of NVLink NVLS reaches (``nvlsEfficiency``, one channel's
    share left out, doubled for all_reduce's two pipelined operations, else times
    (ppn - 1) / ppn), its ``bwInter`` (doubled for NVLS-tree on 2 nodes) and, for
    NVLS-tree, ``perChMaxNVLSTreeBw``; 2.26.2 the lesser of ``bwIntra`` and
    ``bwInter`` (half of it for NVLS-tree beyond 2 nodes). No NVLS where the graph has
    none, nor (2.30.7) where it has fewer than 2 channels; simcoll holds the ``channels``
    NVLS would run on to that rule too."""
    arch, col = machine.arch, _column(machine)
    if NVLS_EFFICIENCY[arch] == 0:  # no NVLS before Hopper, in either release
        return 0.0
    graph = nvls_graph_of(machine)
    n = graph.channels
    if tuner == "2.26.2":
        inter = graph.inter if algo == "nvls" or machine.nnodes <= 2 else graph.inter / 2
        return n * min(graph.intra, inter)
    if n < 2 or channels < 2:
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
        return _nvls_bus_bandwidth(machine, collective, algo, channels, tuner)
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
    return bw * TREE_PATTERN_FACTOR if machine.lone_gpu_node else bw


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
    of :data:`~simcoll.algorithms.nccl.constants.TUNERS`)."""
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


def candidates(machine: Machine, collective: str, collnet: int = 0,
               averages: bool = False, nvls_ok: bool = True,
               sharp_ok: bool = True, tuner: str = NCCL_VERSION) -> tuple[str, ...]:
    """The algorithms NCCL could run for ``collective`` on this machine. ``collnet`` is
    NCCL_COLLNET_ENABLE: on a SHARP fabric it enables CollNet Direct and Chain and lets
    NVLS run across nodes, which NCCL disables without it (``ncclTopoTuneModel``);
    CollNet Direct also needs NVSwitch (NVLink here) and at most 8 GPUs per node
    (``NCCL_MAX_DIRECT_ARITY`` + 1), as Chain does in 2.30.7 (2.26.2 runs Chain on any
    node: ``updateCollCostTable`` in its enqueue.cc), which runs all_reduce only. NVLS's
    and CollNet Direct's reduce_scatter and all_gather across nodes need a head per GPU
    (tuning.cc: "AllGather/ReduceScatter requires 1:1 GPU:NIC"): NCCL's heads are the
    NVLS graph's where NVLS is supported, else (and always in 2.26.2) the CollNet Direct
    graph's (one per NIC; ``collNetHeadsNum``, src/transport/coll_net.cc); NCCL 2.26.2
    runs NVLS's across nodes not at all, and neither release runs them on more than 32
    GPUs of a node (``NCCL_MAX_NVLS_ARITY``; 2.26.2: of the communicator). PAT runs
    reduce_scatter and all_gather with one GPU per node (``ncclPatEnable``), but not a
    reduce_scatter that ``averages`` (op=avg: NCCL's ``topoGetAlgoInfo`` leaves PAT out
    of scaled reductions). NVLS and NVLS-tree need every node to hold two GPUs or more
    (:attr:`Machine.lone_gpu_node`); on nodes of different sizes NVLS-tree runs with as
    many heads as the smallest node has GPUs, and NVLS across nodes and CollNet do not
    run (:attr:`Machine.uneven_nodes`: no SHARP trees are found there). Nor does NVLS
    where NCCL's NVLS graph has no channel (:func:`nvls_graph_of`; NCCL then turns NVLS
    off, ``nvlsSupport = 0`` in init.cc), nor where its switches do not compute the
    reduction (``nvls_ok`` false: see :func:`nvls_reduces`). Without a reduction SHARP
    computes (``sharp_ok`` false: see :func:`sharp_reduces`) NCCL runs as if
    ``collnet`` were 0."""
    across = bool(collnet) and machine.sharp and sharp_ok
    supported = _nvls_supported(machine)
    gathers = collective in ("reduce_scatter", "all_gather")
    heads_ok = not (gathers and across) or _heads(machine, supported, tuner) >= machine.ppn
    collnet_ok = across and machine.ppn <= 8 and heads_ok
    chain_ok = across and heads_ok and (machine.ppn <= 8 or tuner == "2.26.2")
    nvls = nvls_ok and supported and not (gathers and (
        machine.ppn > NVLS_ARITY or tuner == "2.26.2" and machine.nranks > NVLS_ARITY))

    def runs(a: str) -> bool:
        if a == "nvls":
            return nvls and (machine.nnodes == 1 or across and heads_ok and not (
                gathers and tuner == "2.26.2"))
        if a == "nvls_tree":
            return nvls and machine.nnodes > 1
        if a == "collnet_direct":
            return collnet_ok and machine.intra == "nvlink"
        if a == "collnet_chain":
            return chain_ok and collective == "all_reduce"
        if a == "pat":
            return machine.nnodes == machine.nranks > 1 and not (
                averages and collective == "reduce_scatter")
        return True

    return tuple(a for a in ALGORITHMS[collective] if runs(a))


def _nvls_supported(machine: Machine) -> bool:
    """NCCL's ``nvlsSupport``: NVLS switches, no node of one GPU, a channel in its NVLS
    graph (whatever the op and type a collective reduces)."""
    return machine.nvls and not machine.lone_gpu_node and _nvls_searched(machine)


def _heads(machine: Machine, nvls_supported: bool, tuner: str) -> int:
    """NCCL's CollNet heads per node (``collNetHeadsNum``): 2.30.7's are the NVLS graph's
    where NVLS is supported, else, and always in 2.26.2, the CollNet Direct graph's (0
    without one; ``ncclCollNetSetup`` in src/transport/coll_net.cc)."""
    if nvls_supported and tuner != "2.26.2":
        return nvls_graph_of(machine).channels
    graphs = collnet_graphs_of(machine)
    return 0 if graphs is None else graphs[0].channels


def _trim_collnet_direct(nbytes: int, channels: int, heads: int) -> int:
    """``topoGetAlgoInfo``'s CollNet channel tuning: down to 16, 8, 4, 2, 1 channels in
    turn while the buffer gives a thread of each head of each channel less than its
    threshold, which halves on the way down at 1.5 times each step."""
    threshold, switch, short = COLLNET_THREAD_THRESHOLD, 16, True
    while switch >= 1 and short:
        while True:
            short = nbytes < channels * COLLNET_THREADS * heads * threshold
            if not (short and channels > switch):
                break
            if channels == switch + switch // 2:
                threshold //= 2
            channels -= 1
        switch //= 2
    return channels


def trim_channels(nbytes: int, algo: str, proto: str, channels: int, nranks: int,
                  heads: int = 1, slow_ring: bool = False) -> int:
    """NCCL's channel count for a size: fewer channels while the buffer is too small to
    give every thread of every channel its threshold of bytes (NVLS and PAT keep theirs;
    CollNet Direct counts its ``heads``, its graph's; a ``slow_ring``, whose graph moves at most
    :data:`~.constants.PCI_BW`, runs Simple on
    :data:`~.constants.SLOW_RING_SIMPLE_THREADS` threads a channel)."""
    if algo in ("nvls", "nvls_tree", "pat"):  # PAT: NCCL sets no thread count to trim by
        return channels
    if algo == "collnet_direct":
        return _trim_collnet_direct(nbytes, channels, heads)
    if algo == "collnet_chain":
        while channels >= 2 and nbytes < channels * COLLNET_THREADS * COLLNET_THREAD_THRESHOLD:
            channels -= 1
        return channels
    threshold = THREAD_THRESHOLD[proto] * (nranks if algo == "ring" and proto == "LL" else 1)
    threads = SLOW_RING_SIMPLE_THREADS if slow_ring and (algo, proto) == ("ring", "Simple") \
        else MAX_THREADS[proto]
    while channels >= 2 and nbytes < channels * threads * threshold:
        channels -= 1
    return channels


def _point_to_point(machine: Machine, nbytes: int, algo: str, proto: str, channels: int,
                    tuner: str) -> Choice:
    """An all_to_all's sends and receives of ``nbytes`` each: the parts and protocol
    ``addP2pToPlan`` picks (:mod:`~simcoll.algorithms.nccl.p2p`; ``channels`` fixes the
    parts), not the tuner's model, which NCCL does not consult for them."""
    if algo not in ("auto", "p2p"):
        raise InvalidInputError(f"algo={algo!r} cannot run all_to_all: NCCL runs it as "
                                f"point-to-point sends and receives, algo='p2p'")
    if channels:
        count = channels
    else:
        low, high = p2p.channels_per_peer(machine, max_channels(machine, "ring"))
        count = p2p.parts(machine, nbytes, low, high)
    chosen = p2p.protocol(nbytes, count, proto,
                          network_only=machine.nnodes > 1 and machine.ppn == 1)
    return Choice("p2p", chosen, count,
                  predict(machine, "all_to_all", nbytes * machine.nranks, "p2p", chosen,
                          count, tuner))


def choose(machine: Machine, collective: str, nbytes: int, *, algo: str = "auto",
           proto: str = "auto", channels: int = 0, tuner: str = NCCL_VERSION,
           collnet: int = 0, averages: bool = False, nvls_ok: bool = True,
           sharp_ok: bool = True, fp8: bool = False) -> Choice:
    """The pair NCCL predicts fastest (``channels`` fixes the count at every size, where
    NCCL trims even the count NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS fix for small
    buffers: :func:`trim_channels`), by the tuner of NCCL release ``tuner``, with
    NCCL_COLLNET_ENABLE set to ``collnet``, for a reduction that ``averages`` or not and
    that NVLS computes or not (``nvls_ok``) and SHARP does or not (``sharp_ok``; see
    :func:`candidates`), of FP8 elements or
    not (``fp8``: a ring on more than 8 ranks counts :data:`FP8_RING_PENALTY` times its
    time, as NCCL's does). ``nbytes`` is what the tuner reasons on: each rank's buffer,
    the whole output of an all_gather, and for an all_to_all the bytes sent to each peer,
    whose sends and receives NCCL plans without its tuner (:func:`_point_to_point`).

    ``algo`` and ``proto`` narrow the search as NCCL_ALGO and NCCL_PROTO do: "auto", or
    names separated by commas (the canonical form of
    :class:`~simcoll.algorithms.params.Names`). Of several algorithms, those that cannot
    run here are passed over; one named alone must run. With ``proto="auto"`` LL128 is a
    candidate only where NCCL enables it by default (:attr:`Machine.ll128_by_default`:
    not over PCI); a ``proto`` that names it forces it on, as NCCL_PROTO does (and so
    does one that leaves out another protocol with ``^``: NCCL then enables every
    protocol it does not leave out).

    Raises:
        InvalidInputError: the named algorithm cannot run here, or none of the named
            ones can.
    """
    if collective == "all_to_all" and machine.nranks > 1:
        return _point_to_point(machine, nbytes, algo, proto, channels, tuner)
    algos = candidates(machine, collective, collnet, averages, nvls_ok, sharp_ok, tuner)
    named_protos = None if proto == "auto" else tuple(proto.split(","))
    # NCCL_ALGO takes every algorithm's name; those a collective never runs are passed over
    named = [a for a in algo.split(",") if a in ALGORITHMS[collective]]
    if algo != "auto" and not named:
        listed = algo.split(",")
        raise InvalidInputError(
            f"algo={algo!r}: NCCL never runs {collective} with "
            f"{'it' if len(listed) == 1 else 'any of them'}; it runs {collective} with "
            f"{', '.join(ALGORITHMS[collective])}")
    if machine.nranks == 1:  # nothing to move: NCCL returns at once
        return Choice((algos if algo == "auto" else tuple(named))[0],
                      "Simple" if named_protos is None or "Simple" in named_protos
                      else named_protos[0], channels or 1, 0.0)
    if algo != "auto":
        runnable = tuple(a for a in algos if a in named)
        if not runnable:
            hints = ["NVLS needs the GPUs of each node on one in-network NVSwitch"] \
                if not machine.nvls and any(a.startswith("nvls") for a in named) else []
            if machine.nvls and machine.nnodes > 1 and "nvls" in named and not (
                    collnet and machine.sharp and not machine.uneven_nodes):
                hints.append("NVLS across nodes needs collnet=1 and a SHARP fabric"
                             + (" joining nodes of equal GPU counts"
                                if machine.uneven_nodes else ""))
            if not sharp_ok and (machine.nnodes > 1 and "nvls" in named
                                 or any(a.startswith("collnet") for a in named)):
                hints.append("SHARP computes sums, averages, min and max of 16-bit, "
                             "32-bit and 64-bit floats and 32-bit and 64-bit integers "
                             "(bfloat16 and 8-bit integers on Hopper's SHARP v3 fabrics "
                             "only), never a product; NCCL then runs as without collnet")
            gathers = collective in ("reduce_scatter", "all_gather")
            if gathers and "nvls" in named and machine.nvls:
                if tuner == "2.26.2" and (machine.nnodes > 1 or machine.nranks > NVLS_ARITY):
                    hints.append(f"NCCL 2.26.2 runs NVLS {collective} on one node of at "
                                 f"most {NVLS_ARITY} GPUs only")
                elif machine.ppn > NVLS_ARITY:
                    hints.append(f"NCCL runs NVLS {collective} on at most {NVLS_ARITY} GPUs "
                                 f"of a node")
            if gathers and machine.nnodes > 1 and collnet and machine.sharp \
                    and any(a in ("nvls", "collnet_direct") for a in named):
                heads = _heads(machine, _nvls_supported(machine), tuner)
                if heads < machine.ppn:
                    hints.append(f"across nodes NCCL's NVLS and CollNet Direct run {collective} "
                                 f"with a head per GPU only, and its graph has {heads} for "
                                 f"{machine.ppn:g} GPUs a node")
            if machine.nvls and machine.nnodes == 1 and "nvls_tree" in named:
                hints.append("NVLS-tree runs across nodes only")
            if machine.nvls and machine.nranks > 1 and any(a.startswith("nvls") for a in named):
                if not nvls_ok:
                    hints.append("NCCL's NVLS computes sums of 16-bit, 32-bit and 64-bit "
                                 "floats and 32-bit and 64-bit integers, min and max of "
                                 "the 16-bit floats and the integers, never an average, "
                                 "a product or 8-bit elements")
                elif machine.lone_gpu_node:
                    hints.append("NCCL runs no NVLS where a node holds one GPU")
                elif not _nvls_searched(machine):
                    hints.append("NCCL's NVLS search finds no channel here: a GPU's NVLink "
                                 "or a head's NIC is below its slowest speed, or NCCL has "
                                 "no NVLS for this GPU generation")
            if sharp_ok and any(a.startswith("collnet") for a in named):
                hints.append("CollNet needs collnet=1, nodes of equal GPU counts joined by "
                             "a SHARP fabric, at most 8 GPUs per node, and NVLink for "
                             "Direct" + ("" if collective == "all_reduce" else
                                         "; for reduce_scatter and all_gather Direct "
                                         "only, with a head per GPU: NVLS's heads, or "
                                         "a NIC per GPU"))
            if "pat" in named:
                hints.append("PAT needs one GPU per node" + (
                    ", and NCCL leaves it out of op=avg" if averages else ""))
            raise InvalidInputError(
                f"algo={algo!r} cannot run {collective} on this machine; it can run "
                f"{', '.join(algos)}" + "".join(f" ({hint})" for hint in hints))
        algos = runnable
    protos = named_protos or tuple(p for p in PROTOCOLS
                                   if p != "LL128" or machine.ll128_by_default)
    slow_ring = machine.graph_channels * machine.graph_channel_bw / 1e9 <= PCI_BW
    graphs = collnet_graphs_of(machine) if "collnet_direct" in algos else None
    direct_heads = 1 if graphs is None else graphs[0].channels  # CollNet Direct's graph's
    best: Choice | None = None
    # NCCL walks its algorithms and protocols in enum order and keeps a strictly faster
    # pair (enqueue.cc): on a tie the earlier one, a tree before a ring.
    for a in sorted(algos, key=lambda name: NCCL_ORDER.index(name)):
        for pr in sorted(protos, key=PROTOCOLS.index):
            nc = channels or max_channels(machine, a, tuner, collnet)
            t = predict(machine, collective, nbytes, a, pr, nc, tuner)
            if fp8 and a == "ring" and machine.nranks > 8:
                t *= FP8_RING_PENALTY
            if best is None or t < best.predicted:
                best = Choice(a, pr, nc if channels else trim_channels(
                    nbytes, a, pr, nc, machine.nranks, direct_heads, slow_ring), t)
    if best is None or math.isinf(best.predicted):
        few = ""
        if "Simple" not in protos and all(a in SIMPLE_ONLY for a in algos):
            few = (f" ({', '.join(algos)} run{'s' if len(algos) == 1 else ''} Simple only, "
                   f"as in NCCL; give proto='Simple' or 'auto')")
        elif all(a.startswith("nvls") for a in algos):
            if channels == 1:
                few = " (NVLS needs 2 channels or more, as in NCCL)"
            elif tuner != "2.26.2" and nvls_graph_of(machine).channels < 2:
                few = (" (NCCL's NVLS graph has 1 channel here, one head, and NCCL "
                       "2.30.7 runs NVLS on 2 or more)")
        raise InvalidInputError(f"no NCCL algorithm and protocol can run {collective} with "
                                f"algo={algo!r}, proto={proto!r}, channels={channels} on "
                                f"this machine{few}")
    return best
