"""``algorithm="nccl"`` for all_reduce, reduce_scatter, all_gather, broadcast, reduce and
all_to_all (NCCL's collectives but its p2p gather and scatter): NCCL's tuner picks, then
the pick runs.

Each registration takes NCCL's overrides as parameters: ``algo`` (NCCL_ALGO: "ring",
"tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain" for all_reduce; "ring",
"nvls", "collnet_direct", "pat" for reduce_scatter and all_gather; "p2p" for
all_to_all), ``proto``
(NCCL_PROTO: "LL", "LL128", "Simple"), each one name, several separated by commas or
``^`` and those to leave out, as NCCL reads them
(:class:`~simcoll.algorithms.params.Names`), ``channels`` (NCCL_MIN_NCHANNELS =
NCCL_MAX_NCHANNELS, the communicator's; 0: as NCCL would), ``nvls_channels`` (all_reduce,
reduce_scatter and all_gather; NCCL_NVLS_NCHANNELS; 0: NCCL's count), ``arch``
(the GPU generation NCCL's constants are indexed by; "auto" reads Hopper where GPUs sit
on an NVLS switch, Ampere otherwise), ``intra`` (the link class between GPUs of a node;
"auto" reads it from the routes) and ``tuner`` (the NCCL release whose tuner chooses:
"2.30.7" or "2.26.2"; only the choice depends on it, what runs is the same but for
Blackwell's NVLS channels: 32 with 2.26.2, 24 or 32 with 2.30.7,
:func:`~.tune_model.nvls_channels`). Two more
are costs of the run that NCCL's model leaves to the machine, which its tuner does not
see: ``launch_overhead`` (seconds added to each collective's launch, default 0) and
``step_latency_scale`` (a factor on NCCL's per-step latencies, default 1); a calibration
fits them to a measured table (:func:`simcoll.calibrate`). Before the run the tuner
turns every "auto" into a choice, from the machine the run is on, and ``Result.params``
shows what was chosen.

Cost models: NCCL's ring on the alpha-beta reference network (:mod:`.reference_models`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from simcoll.algorithms.nccl import nvls, nvls_sharp, nvls_tree, pat, rings, sharp, trees
from simcoll.algorithms.nccl.channels import (
    by_channel,
    channel_counts,
    glue,
    in_proportion,
    run_channels,
)
from simcoll.algorithms.nccl.collnet import (
    chain_all_reduce,
    chunk_bytes,
    direct_all_gather,
    direct_all_reduce,
    direct_reduce_scatter,
    switch_counts,
)
from simcoll.algorithms.nccl.constants import (
    ARCHS,
    MAX_CHANNELS,
    NCCL_VERSION,
    PROTOCOLS,
    TUNERS,
)
from simcoll.algorithms.nccl.machine import SharpTree, describe, node_order, sharp_groups
from simcoll.algorithms.nccl.nics import (
    chain_lanes,
    channel_nics,
    comm_rail_entries,
    gpu_nic,
    nearest_nics,
    nics_of,
    pxn_proxy,
)
from simcoll.algorithms.nccl.protocols import PROTOCOL, Protocol, channel_rate
from simcoll.algorithms.nccl.reference_models import (
    chain_traffic,
    model,
    p2p_traffic,
    ring_all_gather_traffic,
    ring_all_reduce_traffic,
    ring_reduce_scatter_traffic,
)
from simcoll.algorithms.nccl.support import ALGORITHMS, NAMES, nvls_reduces, sharp_reduces
from simcoll.algorithms.nccl.tune_model import comm_channels, max_channels
from simcoll.algorithms.nccl.tuner import choose
from simcoll.algorithms.params import Choice, Int, Names, Real
from simcoll.algorithms.registry import register
from simcoll.buffers import (
    Buffer,
    VirtualBuffer,
    block_bytes,
    block_counts,
    block_size,
    join,
    split,
    split_counts,
)
from simcoll.comm import Comm
from simcoll.cost.model import CostModel
from simcoll.errors import CommUsageError, InvalidInputError
from simcoll.ops import ReduceOp
from simcoll.topology.graph import Topology
from simcoll.typing import BufferProgram, HostProgram, Program

__all__ = ["nccl_all_reduce", "nccl_reduce_scatter", "nccl_all_gather", "nccl_broadcast",
           "nccl_reduce", "nccl_all_to_all"]


def _params(collective: str) -> dict[str, Any]:
    return {
        "algo": Names("auto", NAMES, doc="NCCL algorithms, as NCCL_ALGO (auto: NCCL's "
                      "tuner picks; of several, those that cannot run here are passed over)")
        if collective != "all_to_all" else Names(
            "auto", ALGORITHMS[collective], doc="p2p, NCCL's sends and receives (auto: the "
                                                "same)"),
        "proto": Names("auto", PROTOCOLS,
                       doc="NCCL protocols, as NCCL_PROTO (auto: NCCL's tuner picks)")
        if collective != "all_to_all" else Names(
            "auto", PROTOCOLS, doc="LL or Simple, as NCCL_PROTO (NCCL's sends and receives "
                                   "pass LL128 over; auto: LL up to 16 KiB per channel of "
                                   "a peer's send)"),
        "channels": Int(0, minimum=0, maximum=MAX_CHANNELS,
                        doc="the communicator's channels, as NCCL_MIN_NCHANNELS = "
                            "NCCL_MAX_NCHANNELS (0: as NCCL chooses for the size); NCCL "
                            "cuts the buffer over them in cells of 32 KiB of traffic, so "
                            "a small buffer runs on fewer (and one more may run where the "
                            "share per channel rounds down); NVLS on one node and "
                            "NVLS-tree run on nvls_channels instead, NVLS across nodes on "
                            "at most this many"
                        if collective != "all_to_all" else
                        "channels each peer's send is split over (0: as NCCL does); "
                        "they share one route, so on one NIC the time is the same, but "
                        "they set LL's 16 KiB-per-channel limit and take a GPU's NICs in "
                        "turn"),
        "arch": Choice("auto", ("auto", *ARCHS),
                       doc="GPU generation of NCCL's constants (auto: from the machine)"),
        "intra": Choice("auto", ("auto", "nvlink", "pci"),
                        doc="link class between GPUs of a node (auto: from the routes)"),
        "tuner": Choice(NCCL_VERSION, TUNERS,
                        doc="NCCL release whose tuner chooses"),
        "launch_overhead": Real(0.0, minimum=0.0,
                                doc="seconds each collective's launch costs beyond NCCL's "
                                    "base latency (what its model leaves out; the tuner "
                                    "does not see it)"),
        "step_latency_scale": Real(1.0, minimum=0.0,
                                   doc="factor on NCCL's per-step latencies (the tuner "
                                       "does not see it)"),
        **({"collnet": Int(0, minimum=0, maximum=1,
                           doc="NCCL_COLLNET_ENABLE: 1 enables CollNet over the "
                               "fabric's SHARP switches (NVLS across nodes and CollNet "
                               "Direct; for all_reduce also CollNet Chain)"),
            "nvls_channels": Int(0, minimum=0, maximum=MAX_CHANNELS,
                                 doc="NCCL_NVLS_NCHANNELS: the channels NVLS and NVLS-tree "
                                     "run on (0: NCCL's count, 16 on Hopper); channels= "
                                     "does not change it, but NVLS across nodes runs on at "
                                     "most channels= channels. A channel has no rate of "
                                     "its own here, so fewer do not run slower as they "
                                     "would on a GPU")}
           if collective in _COLLNET else {}),
    }


def _tuner_bytes(collective: str, x: VirtualBuffer, p: int) -> int:
    """The size NCCL's tuner reasons on: the whole buffer of an all_gather (every rank's
    input); the largest block, sent to one peer, of an all_to_all; each rank's buffer
    otherwise."""
    if collective == "all_to_all":
        return int(block_bytes(x.nbytes, p, x.dtype.itemsize).max())
    return x.nbytes * (p if collective == "all_gather" else 1)


_COLLNET = ("all_reduce", "reduce_scatter", "all_gather")
"""The collectives NCCL_COLLNET_ENABLE changes (NVLS across nodes, CollNet Direct, and
CollNet Chain for all_reduce)."""

_FP8 = ("float8_e4m3fn", "float8_e5m2")
"""The FP8 types NCCL knows (ncclFloat8e4m3, ncclFloat8e5m2)."""

NCCL_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
              "float64", "bfloat16", *_FP8)
"""The element types NCCL 2.30.7 has (``ncclDataType_t`` in ``src/nccl.h.in``), by numpy's
names: no 16-bit integers, no long double."""

IN_NETWORK_ALGORITHMS = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain")
"""The NCCL algorithms that run programs on in-network devices (NVSwitch, SHARP)."""


def _resolve(collective: str, topology: Topology, ranks: tuple[int, ...], x: VirtualBuffer,
             *, algo: str, proto: str, channels: int, arch: str, intra: str, tuner: str,
             op: ReduceOp | None = None, started: bool = False,
             **rest: Any) -> dict[str, Any]:
    """NCCL's tuner's choice. A collective ``started`` from a rank program runs every
    algorithm (its in-network devices' programs start with it,
    :meth:`Comm.start_devices`), but what ``collnet=1`` enables only on the world's GPUs
    in world order: the SHARP switches' programs see GPUs by world rank. ``rest`` holds
    the run's costs the tuner does not see (``launch_overhead``, ``step_latency_scale``:
    they change what a run costs, not what NCCL picks, as in NCCL) and, for the
    collectives that have them, ``collnet`` and ``nvls_channels``, read here."""
    collnet = int(rest.get("collnet", 0))
    if started and collnet and (ranks != tuple(range(topology.nranks)) or topology.hosts):
        raise InvalidInputError("collnet=1 runs programs on SHARP switches, which see "
                                "GPUs and devices by world address: start it on the world "
                                "communicator of a machine without server hosts (or a "
                                "group of every GPU in world order), or with collnet=0 "
                                "(NVLS and NVLS-tree still run)")
    if x.dtype.name not in NCCL_TYPES:
        raise InvalidInputError(f"NCCL has no {x.dtype.name} elements (ncclDataType_t in "
                                f"nccl.h): use one of {', '.join(NCCL_TYPES)}")
    machine = describe(topology, ranks, arch)
    if intra != "auto":  # the tuner sees the override as the run does (LL128, latencies)
        machine = dataclasses.replace(machine, intra=intra)
    if x.dtype.name in _FP8 and collective in ("all_reduce", "reduce_scatter", "reduce") \
            and ARCHS.index(machine.arch) < ARCHS.index("hopper"):
        raise InvalidInputError(
            f"NCCL reduces {x.dtype.name} only on Hopper and newer GPUs (arch="
            f"{machine.arch!r} here; 'FP8 reduction support begins with sm90 capable "
            f"devices', taskAppend in src/enqueue.cc); set the parameter arch to 'hopper' or "
            f"'blackwell' (--param arch=hopper on the command line), or use a wider dtype")
    choice = choose(machine, collective, _tuner_bytes(collective, x, len(ranks)), algo=algo,
                    proto=proto, channels=channels, tuner=tuner, collnet=collnet,
                    averages=op is ReduceOp.AVG,
                    nvls_ok=nvls_reduces(collective, None if op is None else op.name,
                                         x.dtype.name),
                    sharp_ok=sharp_reduces(collective, None if op is None else op.name,
                                           x.dtype.name, machine.arch),
                    fp8=x.dtype.name in _FP8, nvls_channels=int(rest.get("nvls_channels", 0)))
    return {"algo": choice.algo, "proto": choice.proto, "channels": choice.channels,
            "arch": machine.arch, "intra": machine.intra,
            "tuner": tuner, **({"collnet": collnet} if collective in _COLLNET else {})}


def _chosen(comm: Comm, algo: str, proto: str, channels: int, arch: str, intra: str,
            launch_overhead: float = 0.0, step_latency_scale: float = 1.0,
            collnet: int = 0) -> Protocol:
    """The protocol the tuner chose, with its per-channel rate on this machine (a share
    of the caps of NCCL's graph channels, over the communicator's channels:
    :func:`~.tune_model.comm_channels`) and the run's costs beyond NCCL's model
    (:class:`~.protocols.Protocol`'s ``launch`` and ``step_scale``)."""
    if "auto" in (algo, proto, intra, arch) or "," in algo + proto or channels == 0:
        raise CommUsageError(f"rank {comm.rank}: NCCL's tuner has not run (algo={algo!r}, "
                             f"proto={proto!r}, channels={channels}); start it through "
                             f"simulate() or comm.collective()")
    nodes = len({comm.node_of(r) for r in range(comm.size)})
    machine = describe(comm.topology, comm.world_ranks(), arch)
    share = machine.graph_channels / comm_channels(machine, collnet) if machine.channels \
        else 1.0
    return dataclasses.replace(PROTOCOL[proto],
                               rate=channel_rate(proto, algo, arch, nodes, channels,
                                                 comm.topology.cpu, share),
                               launch=launch_overhead, step_scale=step_latency_scale)


def _counts(comm: Comm, collective: str, x: Buffer, *, algo: str, proto: str,
            channels: int, arch: str, tuner: str, collnet: int = 0,
            nvls_channels: int = 0) -> list[int]:
    """Elements of ``x`` on each channel (for reduce_scatter, of a rank's block, its
    largest where they differ): on those that carry some, as NCCL cuts them in cells
    (:func:`~.channels.channel_counts`) over the larger of ``channels`` (the tuner's
    count) and :func:`~.tune_model.max_channels` (with ``nvls_channels`` for NVLS and
    NVLS-tree); in ``channels`` even parts for CollNet and NVLS
    across nodes, which NCCL cuts in its kernels, not in cells."""
    count = block_size(x.size, comm.size, 0) if collective == "reduce_scatter" else x.size
    if algo.startswith("collnet") or algo == "nvls" and _across_nodes(comm):
        return [int(n) for n in block_counts(count, channels)]
    machine = describe(comm.topology, comm.world_ranks(), arch)
    return channel_counts(collective, count, x.dtype.itemsize, proto, comm.size, channels,
                          max(channels, max_channels(machine, algo, tuner, collnet,
                                                     nvls=nvls_channels)))


def _running(protocol: Protocol, channels: int, counts: list[int]) -> Protocol:
    """``protocol`` on the ``len(counts)`` channels that run: LL's rate is a share of a
    cap on every channel together (:func:`~.protocols.channel_rate`), shared by those."""
    if protocol.name != "LL" or len(counts) == channels:
        return protocol
    return dataclasses.replace(protocol, rate=protocol.rate * channels / len(counts))


def _rings(comm: Comm, channels: int) -> list[list[int]]:
    """Each channel's ring, the channels entering a node at GPUs of its NICs in turn
    (:func:`~.nics.comm_rail_entries`)."""
    nodes = [comm.node_of(r) for r in range(comm.size)]
    return rings.channel_rings(nodes, channels, comm_rail_entries(comm))


def _register(collective: str, model: CostModel, in_network: Any = None) -> Any:
    return register(collective, "nccl", params=_params(collective), cost=model,
                    resolve=functools.partial(_resolve, collective), in_network=in_network)


# -- the programs ---------------------------------------------------------------------
def _across_nodes(comm: Comm) -> bool:
    return len({comm.node_of(r) for r in range(comm.size)}) > 1


def _one_node_chunk(comm: Comm, algo: str) -> int | None:
    """NVLS on one node: the chunk its kernel's loops cut (:data:`.nvls.CHUNK_BYTES`,
    :func:`.nvls_tree.one_node_slices`); None for any other algorithm."""
    return nvls.CHUNK_BYTES if algo == "nvls" and not _across_nodes(comm) else None


def _sharp_trees(comm: Comm, choice: int = 0) -> dict[int, SharpTree]:
    """NVLS across nodes and CollNet: the SHARP tree of every local index (owners by
    rank), its owners reaching it through their NIC ``choice``."""
    trees = sharp_groups(comm.topology, comm.world_ranks(), choice)
    if trees is None:
        raise CommUsageError(f"rank {comm.rank}: NVLS across nodes and CollNet need the GPUs "
                             f"of every local index to meet through SHARP switches "
                             f"(in-network devices no GPU is linked to), e.g. "
                             f"dgx_h100(nodes, sharp=True)")
    return trees


def _leaf(comm: Comm, choice: int = 0) -> int:
    """The SHARP switch this GPU sends its block to through its NIC ``choice``: the
    first of its tree."""
    return next(comm.topology.address(leaf) for tree in _sharp_trees(comm, choice).values()
                for leaf, owners in tree.leaves.items() if comm.rank in owners)


def _sharp_roles(comm: Comm, choice: int = 0) -> list[sharp.Role]:
    """What this SHARP switch does in every local index's tree (:class:`sharp.Role`),
    the owners reaching it through their NIC ``choice``."""
    topology = comm.topology
    address = topology.address
    roles: list[sharp.Role] = []
    for local, tree in _sharp_trees(comm, choice).items():
        parent = None if tree.root is None else address(tree.root)
        for leaf, owners in tree.leaves.items():
            if address(leaf) == comm.rank:
                bound = {o: gpu_nic(topology, comm.address_of(o), choice) for o in owners}
                roles.append(sharp.Role(local, list(owners), parent, {o: o for o in owners},
                                        {o: nic for o, nic in bound.items() if nic} or None))
        if parent == comm.rank:
            roles.append(sharp.Role(local, [address(leaf) for leaf in tree.leaves], None,
                                    {o: address(leaf) for leaf, owners in tree.leaves.items()
                                     for o in owners}))
    return roles


def _chain_lanes(comm: Comm, channels: int) -> list[tuple[int, int]]:
    """CollNet Chain's head (local index) and NIC choice per channel, read off the
    first node (:func:`~.nics.chain_lanes`)."""
    return chain_lanes(comm.topology, [comm.address_of(r) for r in _gpu_groups(comm)[0]],
                       channels)


def _ppn(comm: Comm) -> int:
    return comm.size // len({comm.node_of(r) for r in range(comm.size)})


def _in_network(comm: Comm, x: VirtualBuffer, *, op: ReduceOp, algo: str, proto: str,
                channels: int, arch: str, intra: str, tuner: str, launch_overhead: float,
                step_latency_scale: float,
                collnet: int, nvls_channels: int) -> HostProgram | None:
    """The in-network devices' program: the NVSwitches' for NVLS and NVLS-tree, the
    SHARP switches' for NVLS across nodes and CollNet (nothing otherwise)."""
    if algo not in IN_NETWORK_ALGORITHMS or comm.size == 1 or x.size == 0:
        return None  # the GPUs return their buffers at once
    if comm.rank in comm.in_network and not comm.attached(comm.rank):  # a SHARP switch
        if algo == "nvls_tree" or not _across_nodes(comm):
            return None
        parts, g = list(split(x, channels)), _ppn(comm)
        if algo == "collnet_chain":
            lanes = _chain_lanes(comm, channels)
            roles = [_sharp_roles(comm, choice) for _, choice in lanes]
        else:
            roles = [_sharp_roles(comm)] * channels
        if algo == "nvls":
            counts = [{local: len(block) for local, block in
                       enumerate(nvls_tree.block_slices(part, g))} for part in parts]
        else:
            counts = switch_counts(algo, parts, g, chunk_bytes(algo, x.nbytes, channels, g),
                                   [head for head, _ in lanes]
                                   if algo == "collnet_chain" else None)
        return sharp.switch_all_reduce(comm, op, roles, counts) if any(roles) else None
    if algo.startswith("collnet"):
        return None  # NVSwitches only forward for CollNet
    if not nvls.served(comm):  # reduces for SHARP only, next to the GPUs' NVSwitch
        return None
    per_channel = _counts(comm, "all_reduce", x, algo=algo, proto=proto, channels=channels,
                          arch=arch, tuner=tuner, collnet=collnet, nvls_channels=nvls_channels)
    return nvls_tree.switch_all_reduce(comm, x, per_channel, op, _one_node_chunk(comm, algo))


@_register("all_reduce", model(
    "all_reduce", lambda p: 2 * (p - 1), lambda p: 2 * (p - 1) / p, lambda p: (p - 1) / p,
    ring_all_reduce_traffic), in_network=_in_network)
def nccl_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, algo: str, proto: str,
                    channels: int, arch: str, intra: str, tuner: str, launch_overhead: float,
                    step_latency_scale: float,
                    collnet: int, nvls_channels: int) -> BufferProgram:
    """NCCL's all_reduce: a ring (2(p-1) steps per channel), a double binary tree across
    nodes with a chain inside each (up, then down), NVLS on the NVSwitch, NVLS-tree, and
    with ``collnet=1`` NVLS across nodes, CollNet Direct or CollNet Chain through SHARP
    switches."""
    protocol = _chosen(comm, algo, proto, channels, arch, intra, launch_overhead,
                       step_latency_scale, collnet)
    p = comm.size
    if p == 1 or x.size == 0:  # NCCL discards an empty collective (taskAppend)
        return x
    yield comm.sleep(protocol.base(algo))
    counts = _counts(comm, "all_reduce", x, algo=algo, proto=proto, channels=channels,
                     arch=arch, tuner=tuner, collnet=collnet, nvls_channels=nvls_channels)
    protocol, parts = _running(protocol, channels, counts), split_counts(x, counts)
    channels = len(counts)
    if algo == "ring":
        # channel c takes counts[c] / p of every rank's block, rounded, so a rank moves
        # what it moves on one channel
        block_parts = in_proportion(list(split(x, p)), counts)
        ring = _rings(comm, channels)
        outs = yield from run_channels(comm, channels, lambda c: rings.all_reduce(
            comm, block_parts[c], ring[c], protocol, op, intra, c))
        return join([glue([outs[c][b] for c in range(channels)]) for b in range(p)])
    if algo == "tree":
        searched = describe(comm.topology, comm.world_ranks(), arch).graph_channels
        outs = yield from run_channels(comm, channels, lambda c: trees.all_reduce(
            comm, parts[c], c, searched, protocol, op, intra))
        return glue(outs)
    if algo.startswith("collnet"):
        chunk = chunk_bytes(algo, x.nbytes, channels, _ppn(comm))
        if algo == "collnet_direct":
            leaf = _leaf(comm)
            outs = yield from run_channels(comm, channels, lambda c: direct_all_reduce(
                comm, parts[c], c, protocol, op, intra, chunk, leaf))
        else:
            lanes = _chain_lanes(comm, channels)
            leaves = {choice: _leaf(comm, choice) for _, choice in lanes}
            outs = yield from run_channels(comm, channels, lambda c: chain_all_reduce(
                comm, parts[c], c, protocol, op, intra, chunk, lanes[c],
                leaves[lanes[c][1]]))
        return glue(outs)
    yield comm.sleep(protocol.hop(algo, "nvlink"))  # NVLS's one fixed latency
    # NVLS on one node is NVLS-tree's three streams with no step across nodes
    across = None if algo == "nvls_tree" or not _across_nodes(comm) else _leaf(comm)
    one_node = _one_node_chunk(comm, algo)
    outs = yield from run_channels(comm, channels, lambda c: nvls_tree.gpu_all_reduce(
        comm, parts[c], c, protocol, op, across, one_node))
    return glue(outs)


def _nvls_switch_reduce_scatter(comm: Comm, x: VirtualBuffer, *, op: ReduceOp, algo: str,
                                proto: str, channels: int, arch: str, intra: str, tuner: str,
                                launch_overhead: float, step_latency_scale: float,
                                collnet: int, nvls_channels: int) -> HostProgram | None:
    """The in-network devices' program (:func:`_rail_devices`)."""
    return _rail_devices(comm, x, op, algo, channels, _counts(
        comm, "reduce_scatter", x, algo=algo, proto=proto, channels=channels, arch=arch,
        tuner=tuner, collnet=collnet, nvls_channels=nvls_channels))


def _nvls_switch_all_gather(comm: Comm, x: VirtualBuffer, *, algo: str, proto: str,
                            channels: int, arch: str, intra: str, tuner: str,
                            launch_overhead: float, step_latency_scale: float,
                            collnet: int, nvls_channels: int) -> HostProgram | None:
    """The in-network devices' program (:func:`_rail_devices`)."""
    return _rail_devices(comm, x, None, algo, channels, _counts(
        comm, "all_gather", x, algo=algo, proto=proto, channels=channels, arch=arch,
        tuner=tuner, collnet=collnet, nvls_channels=nvls_channels))


def _rail_devices(comm: Comm, x: VirtualBuffer, op: ReduceOp | None, algo: str,
                  channels: int, counts: list[int]) -> HostProgram | None:
    """A reduce_scatter's (with ``op``) or an all_gather's program on an in-network
    device: the NVSwitch's for NVLS (on one node over the channels of ``counts``,
    :func:`_counts`), and across nodes the SHARP switches' for NVLS and CollNet Direct
    (nothing otherwise, nor on an in-network device that is no GPU's NVLS switch,
    :func:`~.nvls.served`)."""
    if algo not in ("nvls", "collnet_direct") or comm.size == 1 or x.size == 0:
        return None
    if nvls.served(comm):
        if algo != "nvls":
            return None  # NVSwitches only forward for CollNet
        if not _across_nodes(comm):
            return nvls.switch_all_gather(comm, x, counts) if op is None else \
                nvls.switch_reduce_scatter(comm, x, counts, op)
        plan = _rail_plan(comm, x, algo, channels, reduces=op is not None)
        return nvls_sharp.switch_all_gather(comm, plan) if op is None else \
            nvls_sharp.switch_reduce_scatter(comm, plan, op)
    roles = _sharp_rail_roles(comm)
    if not roles:
        return None
    plan = _rail_plan(comm, x, algo, channels, reduces=op is not None)
    return sharp.switch_all_gather(comm, roles, plan) if op is None else \
        sharp.switch_reduce_scatter(comm, op, roles, plan)


def _sharp_rail_roles(comm: Comm) -> list[sharp.Role]:
    """A SHARP switch's roles for a reduce_scatter or all_gather across nodes (none on
    one node, nor on a device linked to a GPU)."""
    if comm.attached(comm.rank) or not _across_nodes(comm):
        return []
    return _sharp_roles(comm)


def _rail_plan(comm: Comm, x: Buffer, algo: str, channels: int,
               reduces: bool) -> sharp.Plan:
    """How a reduce_scatter (``reduces``) of ``x`` or an all_gather of ``x`` from every
    rank goes through SHARP (:func:`sharp.rail_plan`): in NVLS chunks, or CollNet
    Direct's chunk for the whole buffer."""
    p = comm.size
    total = x.nbytes * (1 if reduces else p)
    chunk = nvls.CHUNK_BYTES if algo == "nvls" else \
        chunk_bytes(algo, total, channels, _ppn(comm))
    groups = tuple(map(tuple, _gpu_groups(comm)))
    return _plan_of(x.size, p, reduces, groups, channels, max(1, chunk // x.dtype.itemsize))


@functools.lru_cache(maxsize=64)
def _plan_of(size: int, p: int, reduces: bool, groups: tuple[tuple[int, ...], ...],
             channels: int, chunk: int) -> sharp.Plan:
    """:func:`sharp.rail_plan` for a buffer of ``size`` elements, computed once for every
    GPU and switch of a run (do not modify it)."""
    sizes = dict(enumerate(map(int, block_counts(size, p)))) if reduces else \
        dict.fromkeys(range(p), size)
    return sharp.rail_plan(sizes, [list(g) for g in groups], channels, chunk)


def _own_block(pieces: list[list[tuple[int, Buffer]]], empty: Buffer) -> Buffer:
    """This rank's block from the ``(start, piece)`` pairs of every channel."""
    found = sorted((start, k, piece) for k, channel in enumerate(pieces)
                   for start, piece in channel)
    return join([piece for _, _, piece in found]) if found else empty


def _every_block(pieces: list[list[tuple[int, int, Buffer]]], empty: Buffer) -> Buffer:
    """Every rank's block, in rank order, from the ``(rank, start, piece)`` triples of
    every channel."""
    found = sorted((r, start, k, piece) for k, channel in enumerate(pieces)
                   for r, start, piece in channel)
    return join([piece for *_, piece in found]) if found else empty


def _gpu_groups(comm: Comm) -> list[list[int]]:
    """The GPUs of every node, by rank."""
    return node_order([comm.node_of(r) for r in range(comm.size)])


@_register("reduce_scatter", model(
    "reduce_scatter", lambda p: p - 1, lambda p: (p - 1) / p, lambda p: (p - 1) / p,
    ring_reduce_scatter_traffic), in_network=_nvls_switch_reduce_scatter)
def nccl_reduce_scatter(comm: Comm, x: Buffer, *, op: ReduceOp, algo: str, proto: str,
                        channels: int, arch: str, intra: str, tuner: str, launch_overhead: float,
                        step_latency_scale: float,
                        collnet: int, nvls_channels: int) -> BufferProgram:
    """NCCL's reduce_scatter: a ring (p-1 steps per channel), NVLS on the NVSwitch (with
    ``collnet=1`` across nodes too, through SHARP), CollNet Direct through SHARP
    (``collnet=1``), or PAT with one GPU per node (aggregated binomial trees)."""
    protocol = _chosen(comm, algo, proto, channels, arch, intra, launch_overhead,
                       step_latency_scale, collnet)
    p = comm.size
    if p == 1 or x.size == 0:  # NCCL discards an empty collective (taskAppend)
        return x
    yield comm.sleep(protocol.base(algo))
    counts = _counts(comm, "reduce_scatter", x, algo=algo, proto=proto, channels=channels,
                     arch=arch, tuner=tuner, collnet=collnet, nvls_channels=nvls_channels)
    protocol, channels = _running(protocol, channels, counts), len(counts)
    parts = by_channel(list(split(x, p)), counts)
    if algo == "pat":  # each channel's chunk for its own bytes (calcCollChunking)
        outs = yield from run_channels(comm, channels, lambda c: pat.reduce_scatter(
            comm, parts[c], protocol, op, c, pat.chunk_bytes(
                "reduce_scatter", p * counts[c] * x.dtype.itemsize, 1)))
        return glue(outs)
    if algo == "nvls" and not _across_nodes(comm):
        yield comm.sleep(protocol.hop(algo, "nvlink"))  # NVLS's one fixed latency
        outs = yield from run_channels(comm, channels, lambda c: nvls.gpu_reduce_scatter(
            comm, parts[c], c, protocol))
        return glue(outs)
    if algo in ("nvls", "collnet_direct"):  # across nodes, through SHARP
        blocks, leaf = list(split(x, p)), _leaf(comm)
        plan = _rail_plan(comm, x, algo, channels, reduces=True)
        if algo == "nvls":
            yield comm.sleep(protocol.hop(algo, "nvlink"))
            mine = yield from run_channels(comm, channels, lambda c: nvls_sharp.gpu_reduce_scatter(
                comm, blocks, plan[c], c, protocol, leaf))
        else:
            mine = yield from run_channels(comm, channels, lambda c: direct_reduce_scatter(
                comm, blocks, plan[c], c, protocol, op, intra, leaf))
        return _own_block(mine, blocks[comm.rank])
    ring = _rings(comm, channels)
    outs = yield from run_channels(comm, channels, lambda c: rings.reduce_scatter(
        comm, parts[c], ring[c], protocol, op, intra, c))
    return glue(outs)


@_register("all_gather", model(
    "all_gather", lambda p: p - 1, lambda p: p - 1, lambda p: 0.0, ring_all_gather_traffic),
    in_network=_nvls_switch_all_gather)
def nccl_all_gather(comm: Comm, x: Buffer, *, algo: str, proto: str, channels: int,
                    arch: str, intra: str, tuner: str, launch_overhead: float,
                    step_latency_scale: float, collnet: int,
                    nvls_channels: int) -> BufferProgram:
    """NCCL's all_gather: a ring (p-1 steps per channel), NVLS on the NVSwitch (with
    ``collnet=1`` across nodes too, through SHARP), CollNet Direct through SHARP
    (``collnet=1``), or PAT with one GPU per node (aggregated binomial trees)."""
    protocol = _chosen(comm, algo, proto, channels, arch, intra, launch_overhead,
                       step_latency_scale, collnet)
    p = comm.size
    if p == 1 or x.size == 0:  # NCCL discards an empty collective (taskAppend)
        return x
    yield comm.sleep(protocol.base(algo))
    counts = _counts(comm, "all_gather", x, algo=algo, proto=proto, channels=channels,
                     arch=arch, tuner=tuner, collnet=collnet, nvls_channels=nvls_channels)
    protocol, channels = _running(protocol, channels, counts), len(counts)
    own = split_counts(x, counts)
    if algo == "pat":  # each channel's chunk for its own bytes (calcCollChunking)
        outs = yield from run_channels(comm, channels, lambda c: pat.all_gather(
            comm, own[c], protocol, c, pat.chunk_bytes(
                "all_gather", p * counts[c] * x.dtype.itemsize, 1)))
    elif algo == "nvls" and not _across_nodes(comm):
        yield comm.sleep(protocol.hop(algo, "nvlink"))  # NVLS's one fixed latency
        outs = yield from run_channels(comm, channels, lambda c: nvls.gpu_all_gather(
            comm, own[c], c, protocol))
    elif algo in ("nvls", "collnet_direct"):  # across nodes, through SHARP
        leaf, plan = _leaf(comm), _rail_plan(comm, x, algo, channels, reduces=False)
        if algo == "nvls":
            yield comm.sleep(protocol.hop(algo, "nvlink"))
            got = yield from run_channels(comm, channels, lambda c: nvls_sharp.gpu_all_gather(
                comm, x, plan[c], c, protocol, leaf))
        else:
            got = yield from run_channels(comm, channels, lambda c: direct_all_gather(
                comm, x, plan[c], c, protocol, intra, leaf))
        return _every_block(got, x)
    else:
        ring = _rings(comm, channels)
        outs = yield from run_channels(comm, channels, lambda c: rings.all_gather(
            comm, own[c], ring[c], protocol, intra, c))
    return join([glue([outs[c][b] for c in range(channels)]) for b in range(p)])


@_register("broadcast", model(
    "broadcast", lambda p: p - 1, lambda p: 1.0, lambda p: 0.0, chain_traffic(False)))
def nccl_broadcast(comm: Comm, x: Buffer, *, root: int, algo: str, proto: str,
                   channels: int, arch: str, intra: str, tuner: str, launch_overhead: float,
                   step_latency_scale: float) -> BufferProgram:
    """NCCL's ring broadcast: a pipelined chain from the root along each channel's ring."""
    protocol = _chosen(comm, algo, proto, channels, arch, intra, launch_overhead,
                       step_latency_scale)
    if comm.size == 1 or x.size == 0:  # NCCL discards an empty collective
        return x
    yield comm.sleep(protocol.base(algo))
    counts = _counts(comm, "broadcast", x, algo=algo, proto=proto, channels=channels,
                     arch=arch, tuner=tuner)
    protocol, channels = _running(protocol, channels, counts), len(counts)
    parts = split_counts(x, counts)
    ring = _rings(comm, channels)
    outs = yield from run_channels(comm, channels, lambda c: rings.broadcast(
        comm, parts[c], ring[c], protocol, intra, c, root))
    return glue(outs)


@_register("reduce", model(
    "reduce", lambda p: p - 1, lambda p: 1.0, lambda p: 1.0, chain_traffic(True)))
def nccl_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, root: int, algo: str, proto: str,
                channels: int, arch: str, intra: str, tuner: str, launch_overhead: float,
                step_latency_scale: float) -> Program:
    """NCCL's ring reduce: a pipelined chain along each channel's ring, ending at the
    root."""
    protocol = _chosen(comm, algo, proto, channels, arch, intra, launch_overhead,
                       step_latency_scale)
    if comm.size == 1 or x.size == 0:  # NCCL discards an empty collective
        return x
    yield comm.sleep(protocol.base(algo))
    counts = _counts(comm, "reduce", x, algo=algo, proto=proto, channels=channels,
                     arch=arch, tuner=tuner)
    protocol, channels = _running(protocol, channels, counts), len(counts)
    parts = split_counts(x, counts)
    ring = _rings(comm, channels)
    outs = yield from run_channels(comm, channels, lambda c: rings.reduce(
        comm, parts[c], ring[c], protocol, op, intra, c, root))
    return glue(outs) if comm.rank == root else None


@_register("all_to_all", model(
    "all_to_all", lambda p: 1, lambda p: (p - 1) / p, lambda p: 0.0, p2p_traffic))
def nccl_all_to_all(comm: Comm, x: Buffer, *, algo: str, proto: str, channels: int,
                    arch: str, intra: str, tuner: str, launch_overhead: float,
                    step_latency_scale: float) -> BufferProgram:
    """NCCL's all_to_all: a grouped send and receive to and from every peer at once (its
    point-to-point operations), each message with the protocol's framing and step cost.

    The protocol and ``channels`` are NCCL's for a send of one block
    (:mod:`simcoll.algorithms.nccl.p2p`); a send to a peer on another node runs Simple
    whatever the protocol (its network connection has no LL buffer, as NCCL allocates
    none for point-to-point by default). NCCL cuts a send into ``channels`` parts that
    leave at once on one route; one message per peer stands for them, which takes the
    same time where links are shared fairly (the flow models; the analytical model,
    which shares nothing, would give parts in parallel the whole bandwidth each). To a
    peer on another node from a GPU with several NICs, the parts' channels take the
    GPU's NICs in turn (``ncclTopoGetLocalNet``: the channel number modulo the NICs a
    GPU has), so one message per NIC used stands for them; as NCCL's PXN does, those
    are the NICs of the GPU of the sender's node with the peer's device index, reached
    over NVLink (:func:`~.nics.pxn_proxy`), so that the message keeps to the peer's rail.
    """
    protocol = _chosen(comm, algo, proto, channels, arch, intra, launch_overhead,
                       step_latency_scale)
    p, r = comm.size, comm.rank
    if p == 1 or x.size == 0:  # NCCL discards an empty collective (taskAppend)
        return x
    yield comm.sleep(protocol.base("ring"))
    # sends to another node run Simple (no LL buffer): its rate is worked out only there
    remote = protocol if protocol.name == "Simple" or not _across_nodes(comm) else _chosen(
        comm, algo, "Simple", channels, arch, intra, launch_overhead, step_latency_scale)
    blocks = list(split(x, p))
    size = blocks[r].size  # every rank's block for rank r: equal inputs
    members = frozenset(comm.world_ranks())   # the GPUs a PXN proxy may be
    sent = []
    for step in range(1, p):
        peer = (r + step) % p
        across = comm.node_of(peer) != comm.node_of(r)
        link, used = ("net", remote) if across else (intra, protocol)
        nics = _p2p_nics(comm, r, peer, channels, blocks[peer].size, members)
        for piece, via in zip(split(blocks[peer], len(nics)), nics):
            delay = rings.beyond_route(comm, peer, used.hop("ring", link), via)
            sent.append(comm.send(piece, peer, delay=delay,
                                  wire_bytes=used.wire(piece.nbytes), via=via))
    got: list[Buffer] = list(blocks)
    for step in range(1, p):
        peer = (r - step) % p
        pieces = []
        for _ in _p2p_nics(comm, peer, r, channels, size, members):
            pieces.append((yield comm.recv(peer)))
        got[peer] = pieces[0] if len(pieces) == 1 else join(pieces)
    for event in sent:
        yield event
    return join(got)


def _p2p_nics(comm: Comm, sender: int, receiver: int, channels: int, count: int,
              members: frozenset[int]) -> tuple[tuple[str, ...] | None, ...]:
    """The NICs each message of a send of ``count`` elements from ``sender`` to
    ``receiver`` passes: where the receiver is on another node and the GPU the send
    leaves through (the sender's PXN proxy, :func:`~.nics.pxn_proxy`) has several
    nearest NICs, one message per NIC of its own (:func:`~.nics.nics_of`) that the
    ``channels`` parts reach (``ncclTopoGetLocalNet``: part k on the k-th), entering
    through the receiver's k-th where it has several too; else one message on the
    shortest route (None)."""
    if comm.node_of(sender) == comm.node_of(receiver):
        return (None,)
    topology = comm.topology
    a, b = comm.address_of(sender), comm.address_of(receiver)
    proxy = pxn_proxy(topology, a, b, members)
    gpu = topology.endpoint_name(proxy)
    if len(nearest_nics(topology, gpu)) < 2:
        return (None,)
    return tuple(channel_nics(topology, proxy, b, k)
                 for k in range(min(channels, len(nics_of(topology, gpu)), max(count, 1))))
