"""NCCL's own constants, as NCCL 2.30.7 ships them (``src/graph/tuning.cc``,
``src/include/device.h``, ``src/init.cc``, ``src/graph/topo.h``; the thread thresholds
from ``src/include/comm.h``, the slice and chunk steps from ``src/include/collectives.h``).

Latencies are in microseconds and bandwidths in GB/s (10^9 bytes/s), as NCCL writes them;
the rest of simcoll converts them to seconds and bytes/s where they are used. Indexes
follow NCCL's order: protocols (LL, LL128, Simple), link classes (NVLink, PCI, network).
"""

from __future__ import annotations

__all__ = ["NCCL_VERSION", "PROTOCOLS", "LINKS", "BASE_LATENCY", "HW_LATENCY", "NCCL_STEPS",
           "BUFFER_BYTES", "LL_MAX_BW", "PER_CHANNEL_MAX_RING_LL128_BW",
           "PER_CHANNEL_MAX_TREE_BW", "PER_CHANNEL_MAX_TREE_LL128_BW", "ll_max_bw",
           "PER_CHANNEL_MAX_NVLS_TREE_BW", "NVLS_EFFICIENCY",
           "ARCHS", "NVLINK_BW_PER_LINK", "THREAD_THRESHOLD", "MAX_THREADS",
           "SLOW_RING_SIMPLE_THREADS", "PCI_BW", "MAX_CHANNELS",
           "NET_OVERHEAD_US", "net_overhead_us", "TREE_CORRECTION", "TUNERS",
           "HW_LATENCY_BY_TUNER",
           "PER_CHANNEL_MAX_RING_LL128_BW_BY_TUNER", "PER_CHANNEL_MAX_TREE_LL128_BW_BY_TUNER",
           "PER_CHANNEL_MAX_TREE_BW_BY_TUNER", "COLLNET_THREADS", "COLLNET_THREAD_THRESHOLD",
           "COLLNET_DIRECT_HOP_US", "TREE_PATTERN_FACTOR"]

NCCL_VERSION = "2.30.7"
"""The NCCL release these constants are read from (makefiles/version.mk)."""

PROTOCOLS = ("LL", "LL128", "Simple")
LINKS = ("nvlink", "pci", "net")
ARCHS = ("volta", "ampere", "hopper", "blackwell")

BASE_LATENCY = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "pat": {"LL": 8.0, "LL128": 8.0, "Simple": 8.0},
}
"""``baseLatencies`` (us): the fixed cost of launching one collective of each algorithm."""

HW_LATENCY = {
    "nvlink": {"tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
               "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
               "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0},
               "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0},
               "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 3.7},
               "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 2.8},
               "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 4.0}},
    "pci": {"tree": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0},
            "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
            "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
            "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 3.7},
            "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 2.8},
            "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 4.0}},
    "net": {"tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
            "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 18.0},
            "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 20.9},
            "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 31.0},
            "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 30.0},
            "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 14.0}},
}
"""``hwLatencies`` (us): the cost of one step of an algorithm and protocol over one link
class (one hop of a ring, one level of a tree)."""

NCCL_STEPS = 8
"""Slots of a connection's FIFO (``NCCL_STEPS``); a step's buffer is the protocol's
buffer divided by it."""

BUFFER_BYTES = {"LL": 8 * 512 * NCCL_STEPS * 16,
                "LL128": 120 * 640 * NCCL_STEPS * 8,
                "Simple": 1 << 22}
"""Default connection buffer per protocol (``DEFAULT_LL_BUFFSIZE``: 8 lines per thread x
512 threads x 8 steps x 16-byte lines; ``DEFAULT_LL128_BUFFSIZE``: 120 elements per thread
x 640 threads x 8 steps x 8 bytes; ``DEFAULT_BUFFSIZE``: 4 MiB)."""

LL_MAX_BW = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0),
             "hopper": (141.0, 45.0, 35.0), "blackwell": (282.0, 90.0, 70.0)}
"""``llMaxBws`` (GB/s), NCCL's four rows of three columns (1 node, 2 nodes, more), read
as NCCL reads them: on one node the row of the GPU generation (column 1), across nodes
the row of the CPU vendor, Intel and others the first (39.0, 20.4), AMD the second
(22.5, 19.0); the Hopper and Blackwell rows' other columns are never read (see
:func:`ll_max_bw`)."""


def ll_max_bw(arch: str, nodes: int, cpu: str) -> float:
    """NCCL's cap on LL's bus bandwidth (GB/s, ``llMaxBw`` in ``ncclTopoTuneModel``): on
    one node by GPU generation, across nodes by CPU vendor (``index1``: AMD, or a mix
    of vendors, reads the second row; Intel and every other CPU the first)."""
    if nodes <= 1:
        return LL_MAX_BW[arch][0]
    return LL_MAX_BW["ampere" if cpu == "amd" else "volta"][min(nodes, 3) - 1]


PER_CHANNEL_MAX_RING_LL128_BW = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0),
                                 "hopper": (36.7, 36.7, 36.7),
                                 "blackwell": (40.0, 40.0, 40.0)}
"""``perChMaxRingLL128Bws`` (GB/s per channel), for 1, 2 and more nodes."""

PER_CHANNEL_MAX_TREE_LL128_BW = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0),
                                 "hopper": (36.7, 36.7, 29.0),
                                 "blackwell": (55.6, 31.67, 20.0)}
"""``perChMaxTreeLL128Bws`` (GB/s per channel), for 1, 2 and more nodes."""

PER_CHANNEL_MAX_TREE_BW = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8),
                           "hopper": (38.7, 41.4, 36.0), "blackwell": (70.0, 42.8, 24.0)}
"""``perChMaxTreeBws`` (GB/s per channel), for 1, 2 and more nodes."""

PER_CHANNEL_MAX_NVLS_TREE_BW = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8),
                                "hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)}
"""``perChMaxNVLSTreeBws`` (GB/s per channel), for 1, 2 and more nodes (NVLS-tree never
runs on one node)."""

NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
"""``nvlsEfficiency``: the share of NVLink bandwidth NVLS reaches (none before Hopper)."""

TREE_PATTERN_FACTOR = 0.85
"""The share of the tree's bus bandwidth NCCL counts where a rank's tree graph has the
plain tree pattern (``maxTreePattern == NCCL_TOPO_PATTERN_TREE``, tuning.cc of 2.26.2 and
2.30.7): a node holding a single GPU of the communicator, and from Hopper on nodes where
a GPU has a NIC of its own (:attr:`~.machine.Machine.plain_tree`), get it (search.cc)."""

NVLINK_BW_PER_LINK = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}
"""``SM70/SM80/SM90/SM100_NVLINK_BW`` (src/graph/topo.h, GB/s per link and direction)."""

THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
"""``NCCL_*_THREAD_THRESHOLD``: bytes per thread below which NCCL uses fewer channels
(the ring's LL threshold is multiplied by the rank count)."""

MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
"""``NCCL_LL_MAX_NTHREADS``, ``NCCL_LL128_MAX_NTHREADS``, ``NCCL_SIMPLE_MAX_NTHREADS``."""

SLOW_RING_SIMPLE_THREADS, PCI_BW = 256, 12.0
"""Ring Simple's threads per channel where the ring graph's channels together move at
most ``PCI_BW`` GB/s (PCIe Gen3 x16; ``simpleDefaultThreads`` in ``ncclTopoTuneModel``,
src/graph/tuning.cc, and ``PCI_BW`` in src/graph/topo.h), instead of
``MAX_THREADS["Simple"]``."""

MAX_CHANNELS = 64
"""``MAXCHANNELS`` (src/include/device.h): the most channels a communicator opens."""

COLLNET_THREADS, COLLNET_THREAD_THRESHOLD = 640, 512
"""CollNet's threads per channel (``NCCL_MAX_NTHREADS``) and bytes per thread below which
NCCL uses fewer channels (``threadThresholds[COLLNET_*][SIMPLE]``)."""

COLLNET_DIRECT_HOP_US = 0.4
"""CollNet Direct's "arity serialization latency" per local peer (us, tuning.cc)."""

NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0, "unknown": 1.0}
"""``getNetOverhead`` by CPU vendor (us per network step; 3x for Simple): 2 us on AMD,
1 us on Intel and every other CPU."""


def net_overhead_us(cpu: str, proto: str) -> float:
    """NCCL's network post overhead for one step of ``proto`` (us): ``getNetOverhead``
    of the CPU vendor, three times over for Simple. NCCL's tuner (2.26.2 and 2.30.7)
    charges every step of a ring that crosses nodes at least this much ("Inter-node
    rings still have to launch nsteps * net overhead", tuning.cc)."""
    return NET_OVERHEAD_US[cpu] * (3 if proto == "Simple" else 1)


TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9, .9),
}
"""``treeCorrectionFactor``: the tree all_reduce's bandwidth factor by log2(bytes / 64)."""

TUNERS = ("2.30.7", "2.26.2")
"""NCCL releases whose tuner simcoll can run: 2.30.7 (the tables above) and 2.26.2 (the
release nccl-tests issue #309's 2-node H100 table printed). Between the two,
``src/enqueue.cc`` began to leave CollNet Chain out above 8 GPUs a node (2.26.2 left
out only CollNet Direct there), and ``src/graph/tuning.cc`` changed the NVLS and
NVLS-tree bus bandwidth (2.26.2: the
graph's ``min(bwIntra, bwInter)``, half of ``bwInter`` for NVLS-tree beyond 2 nodes,
times 5/6 for all_reduce; 2.30.7 added ``nvlsEfficiency``, the ``(nChannels - 1) /
nChannels`` share, the doubling for all_reduce's two pipelined operations and
``perChMaxNVLSTreeBws``), NVLS-tree's network step latency and Blackwell's per-channel
caps (the ``*_BY_TUNER`` tables), CollNet Direct's reduce_scatter and all_gather bus
bandwidth (2.26.2: ppn x the channel's bw, times a ratio from 0.95 at one GPU a node to
0.85 at 8; 2.30.7: ppn x ``min(bwIntra, 0.9 bwInter)``) and, on Blackwell with x86 CPUs,
a size correction of NVLS-tree (2.30.7 multiplies its all_reduce bandwidth by the tree's
``treeCorrectionFactor``; 2.26.2 corrects the tree's only); the rest of what the tuner
reads is the same in both, and so is ``enqueue.cc``'s channel trimming for the
algorithms simcoll runs."""


def _replaced(table: dict[str, tuple[float, float, float]], arch: str,
              row: tuple[float, float, float]) -> dict[str, tuple[float, float, float]]:
    return {**table, arch: row}


HW_LATENCY_BY_TUNER = {
    "2.30.7": HW_LATENCY,
    "2.26.2": {**HW_LATENCY, "net": {**HW_LATENCY["net"], "nvls_tree": {
        "LL": 0.0, "LL128": 0.0, "Simple": 14.0}}},
}
"""``hwLatencies`` (us) per tuner release: 2.26.2's NVLS-tree network step is 14 us."""

PER_CHANNEL_MAX_RING_LL128_BW_BY_TUNER = {
    "2.30.7": PER_CHANNEL_MAX_RING_LL128_BW,
    "2.26.2": _replaced(PER_CHANNEL_MAX_RING_LL128_BW, "blackwell", (73.4, 73.4, 73.4)),
}
"""``perChMaxRingLL128Bws`` per tuner release (2.26.2: Blackwell's twice Hopper's)."""

PER_CHANNEL_MAX_TREE_LL128_BW_BY_TUNER = {
    "2.30.7": PER_CHANNEL_MAX_TREE_LL128_BW,
    "2.26.2": _replaced(PER_CHANNEL_MAX_TREE_LL128_BW, "blackwell", (73.4, 73.4, 58.0)),
}
"""``perChMaxTreeLL128Bws`` per tuner release (2.26.2: Blackwell's twice Hopper's)."""

PER_CHANNEL_MAX_TREE_BW_BY_TUNER = {
    "2.30.7": PER_CHANNEL_MAX_TREE_BW,
    "2.26.2": _replaced(PER_CHANNEL_MAX_TREE_BW, "blackwell", (77.4, 82.8, 72.0)),
}
"""``perChMaxTreeBws`` per tuner release (2.26.2: Blackwell's twice Hopper's)."""
