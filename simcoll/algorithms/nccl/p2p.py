"""How NCCL runs point-to-point operations (an all_to_all is one send and one receive per
peer in a group): the protocol and the channel count per peer, from NCCL 2.30.7.

NCCL's tuner does not choose for sends and receives; ``addP2pToPlan``
(``src/enqueue.cc``) does, per peer and direction, from the bytes of that operation:

* Channels per peer. ``ncclTopoComputeP2pChannelsPerPeer`` and
  ``ncclTopoComputeP2pChannels`` (``src/graph/paths.cc``) take the least over the peers
  of 2 x (NVLink bandwidth / one link's) for a peer over NVLink, 2 over PCI, and for a
  peer across the network max(NICs, ceil(their GB/s / 14)) (``NCCL_P2P_PER_CHANNEL_NET_BW``),
  rounded up to a power of 2 and kept within the p2p channels (the rings' count, rounded
  up to a power of 2); across nodes it is halved while it times ceil(ranks / 8) exceeds
  them. ``scheduleP2pTasksToPlan`` starts from that count (``nChannelsMax``), halved while
  it times the ranks exceeds the p2p channels (``nChannelsMin``).
* Parts. An operation of ``n`` bytes runs on min(nChannelsMin, ceil(n / minPartSize))
  channels, doubled while a part exceeds maxPartSize, and no further than nChannelsMax,
  where the parts' sizes come from the p2p chunk (``init.cc``: 128 KiB across nodes,
  256 KiB on Arm hosts with Blackwell GPUs, 512 KiB between GPUs that all talk over
  NVLink, 128 KiB over PCI): a half and one chunk
  across nodes, an eighth and 32 chunks on one node.
* Protocol. LL where the bytes fit in ``NCCL_P2P_LL_THRESHOLD`` (16 KiB) per channel,
  else Simple; never LL128. And LL only where the connection has an LL buffer
  (``protoLL[dir] &= conn->conn.buffs[NCCL_PROTO_LL] != nullptr``): a peer reached
  through the network (PXN included) has shared buffers without one
  (``src/transport/net.cc``: "Only allocate dedicated buffers for ring/tree, not for
  p2p", unless ``NCCL_ALLOC_P2P_NET_LL_BUFFERS=1``, default 0), so sends to another node
  always run Simple.
"""

from __future__ import annotations

import math

from simcoll.algorithms.nccl.constants import NVLINK_BW_PER_LINK
from simcoll.algorithms.nccl.machine import Machine
from simcoll.errors import InvalidInputError

__all__ = ["P2P_LL_THRESHOLD", "P2P_PROTOCOLS", "channels_per_peer", "parts", "protocol"]

P2P_LL_THRESHOLD = 16384
"""``NCCL_P2P_LL_THRESHOLD`` (src/enqueue.cc): bytes per channel up to which a send or
receive runs LL."""
P2P_PER_CHANNEL_NET_BW = 14
"""``NCCL_P2P_PER_CHANNEL_NET_BW`` (src/graph/paths.cc, GB/s): network bandwidth per p2p
channel to a remote peer."""
P2P_CHUNK = {"net": 1 << 17, "nvlink": 1 << 19, "pci": 1 << 17}
"""``NCCL_P2P_NET_CHUNKSIZE``, ``NCCL_P2P_NVL_CHUNKSIZE``, ``NCCL_P2P_PCI_CHUNKSIZE``
(src/init.cc)."""
MAX_PEERS_PER_BATCH = 8
"""``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` (src/include/device.h)."""
P2P_PROTOCOLS = ("LL", "Simple")
"""The protocols NCCL's sends and receives run."""


def _pow2_up(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def channels_per_peer(machine: Machine, p2p_channels: int) -> tuple[int, int]:
    """``(nChannelsMin, nChannelsMax)`` of ``scheduleP2pTasksToPlan`` on ``machine``,
    whose rings open ``p2p_channels`` channels (see the module docstring).

    A GPU's NICs are its node's network paths (``machine.rails``) over its GPUs, at least
    one; their bandwidth is the node's network bandwidth over its paths.
    """
    p2p_channels = _pow2_up(p2p_channels)
    least = []
    if machine.ppn > 1:
        if machine.intra == "nvlink":
            links = int(machine.intra_bw / 1e9 / NVLINK_BW_PER_LINK[machine.arch])
            least.append(2 * max(1, links))
        else:
            least.append(2)
    if machine.nnodes > 1:
        rails = max(machine.rails, 1)
        nics = max(1, rails // round(machine.ppn))
        nic_gbps = machine.inter_bw / 1e9 / rails * nics
        least.append(max(nics, math.ceil(int(nic_gbps) / P2P_PER_CHANNEL_NET_BW)))
    per_peer = _pow2_up(min(least, default=p2p_channels))
    if machine.nnodes > 1:
        batches = math.ceil(machine.nranks / MAX_PEERS_PER_BATCH)
        while per_peer * batches > p2p_channels and per_peer > 1:
            per_peer //= 2
    else:
        per_peer = min(p2p_channels, per_peer)
    low = per_peer
    while low * machine.nranks > p2p_channels and low > 1:
        low //= 2
    return low, per_peer


def _chunk(machine: Machine) -> int:
    """NCCL's p2p chunk (``computeBuffSizes`` in src/init.cc): across nodes the network's,
    doubled on Arm CPUs with Blackwell GPUs (NCCL: GB200-class hosts have 4 GPUs, fewer
    to aggregate over); else NVLink's or PCI's."""
    if machine.nnodes > 1:
        return P2P_CHUNK["net"] * (2 if machine.cpu == "arm" and machine.arch == "blackwell"
                                   else 1)
    return P2P_CHUNK["nvlink" if machine.intra == "nvlink" else "pci"]


def parts(machine: Machine, nbytes: int, low: int, high: int) -> int:
    """The channels ``addP2pToPlan`` splits an operation of ``nbytes`` over, between
    ``low`` and ``high`` (:func:`channels_per_peer`)."""
    if nbytes <= 0:
        return 1
    chunk = _chunk(machine)
    multi = machine.nnodes > 1
    smallest, largest = (chunk // 2, chunk) if multi else (chunk // 8, chunk * 32)
    count = min(low, -(-nbytes // smallest))
    part = max(smallest, -(-nbytes // count))
    while part > largest and count <= high // 2:
        count *= 2
        part = -(-nbytes // count)
    return count


def protocol(nbytes: int, channels: int, proto: str = "auto", *,
             network_only: bool = False) -> str:
    """LL or Simple for a send of ``nbytes`` over ``channels`` channels: LL up to
    :data:`P2P_LL_THRESHOLD` bytes per channel. ``proto`` ("auto", or protocols in
    NCCL_PROTO's canonical form) naming only one of LL and Simple forces it (as
    ``NCCL_P2P_LL_THRESHOLD`` set to 0 or to more than the send does). Where every peer
    is across the network (``network_only``) it is Simple: those connections have no LL
    buffer (see the module).

    Raises:
        InvalidInputError: ``proto`` names neither LL nor Simple.
    """
    allowed = P2P_PROTOCOLS if proto == "auto" else tuple(
        p for p in P2P_PROTOCOLS if p in proto.split(","))
    if not allowed:
        raise InvalidInputError(f"proto={proto!r} cannot run all_to_all: NCCL's sends and "
                                f"receives run {' or '.join(P2P_PROTOCOLS)}, never LL128")
    if network_only:
        return "Simple"
    if len(allowed) == 1:
        return allowed[0]
    return "LL" if nbytes <= channels * P2P_LL_THRESHOLD else "Simple"
