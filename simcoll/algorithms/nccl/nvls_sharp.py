"""NVLS reduce_scatter and all_gather across nodes, simulated: NVLink SHARP inside each
node, InfiniBand SHARP between them (NCCL's NVLS algorithm with ``NCCL_COLLNET_ENABLE=1``
on a SHARP fabric whose CollNet plugin offers ``ireducescatter`` and ``iallgather``).

Every GPU is a head (NCCL runs these only where no node holds more GPUs than heads) and
owns its rail: the blocks of the GPUs of its local index on every node. Per channel, with
G GPUs on each of N nodes and p = N G ranks:

* **reduce_scatter** (``runNvls``'s multi-node branch in src/device/reduce_scatter.h):
  every GPU pushes its whole part (p blocks) into its NVSwitch; the switch reduces each
  block over the node's GPUs and sends it to the head of the block's rail; each head
  sends the N blocks of its rail through its NIC to SHARP, which reduces each over the
  nodes and sends it to the one head whose block it is. A GPU sends n and receives
  N n / p bytes on NVLink, sends N n / p and receives n / p on its NIC.
* **all_gather** (src/device/all_gather.h): each head sends its own part through its NIC
  to SHARP, which multicasts every owner's part to every head of the rail; each head
  pushes the N parts of its rail into the NVSwitch, which multicasts them to every GPU
  of the node. A GPU sends its part and receives N parts on its NIC, sends N parts and
  receives all p on NVLink.

Slices are NVLS chunks (:func:`.nvls.chunks`) of each channel's part of a block, handled
slice by slice: slice k of every block before slice k + 1 of any, node by node, rail by
rail (:func:`.sharp.rail_order`), so all heads start at once. NCCL cuts differently: each
rail's blocks, node after node, make one range that its channels take a chunk at a time,
round robin, so a chunk may span several nodes' blocks. Where a channel's part of a
block is smaller than a chunk (many ranks, small buffers), simcoll sends more, smaller
messages than NCCL, each paying the network step's latency.

NCCL's latency is its NVLS latency inside the node (25 us, once) plus the network's
(``hwLatencies[NET][NVLS][SIMPLE]``, 18 us), which each slice sent to SHARP waits beyond
its route's own latency.
"""

from __future__ import annotations

from simcoll.algorithms.nccl.channels import by_channel, run_channels
from simcoll.algorithms.nccl.machine import node_layout, node_order
from simcoll.algorithms.nccl.nvls import chunks, served, switch_of
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender
from simcoll.algorithms.nccl.sharp import downlink, rail_order, uplink
from simcoll.buffers import Buffer, VirtualBuffer, join, split
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["gpu_reduce_scatter", "switch_reduce_scatter", "gpu_all_gather",
           "switch_all_gather"]

_PUSH, _BACK = 0, 1
"""Tag offsets within a channel's two: GPU -> NVSwitch, NVSwitch -> GPU."""


def gpu_reduce_scatter(comm: Comm, parts: list[Buffer], channel: int, protocol: Protocol,
                       leaf: int) -> Steps:
    """One channel on a GPU: push this channel's part of every block (``parts[r]``, rank
    r's block) into the NVSwitch; send the node's sums of this rail's blocks, as they
    come, to SHARP switch ``leaf``; return this rank's block, reduced over every rank."""
    switch = switch_of(comm)
    groups, _, local = node_layout(comm)
    sliced = [chunks(part) for part in parts]
    order = rail_order({r: len(s) for r, s in enumerate(sliced)}, groups)
    rail = {members[local] for members in groups}
    base = 2 * channel
    push = Sender(comm, switch, protocol, 0.0, base + _PUSH)

    def to_sharp() -> Steps:
        up = uplink(comm, leaf, protocol.hop("nvls", "net"), protocol, (channel, local))
        for r, _ in order:
            if r in rail:
                yield from up.send((yield comm.recv(switch, tag=base + _BACK)))
        yield from up.drain()

    sending = comm.start(to_sharp())
    for r, k in order:
        yield from push.send(sliced[r][k])
    mine = yield from downlink(comm, leaf, (channel, local), len(sliced[comm.rank]), [])
    yield from push.drain()
    yield sending
    return join(mine)


def switch_reduce_scatter(comm: Comm, x: VirtualBuffer, channels: int,
                          op: ReduceOp) -> Steps:
    """The NVSwitch's side of every channel: reduce each slice of every block over the
    node's GPUs and send it to the head of the block's rail."""
    gpus = served(comm)
    groups = node_order([comm.node_of(r) for r in range(comm.size)])
    local = {r: h for members in groups for h, r in enumerate(members)}
    parts = by_channel(list(split(x, comm.size)), channels)

    def channel(c: int) -> Steps:
        base = 2 * c
        counts = {r: len(chunks(parts[c][r])) for r in local}
        for r, _ in rail_order(counts, groups):
            total = yield comm.recv(gpus[0], tag=base + _PUSH)
            for gpu in gpus[1:]:
                total = yield comm.reduce(total, (yield comm.recv(gpu, tag=base + _PUSH)), op)
            comm.send(total, gpus[local[r]], tag=base + _BACK)
        return None

    yield from run_channels(comm, channels, channel)
    return None


def gpu_all_gather(comm: Comm, own: Buffer, channel: int, protocol: Protocol,
                   leaf: int) -> Steps:
    """One channel on a GPU: send this rank's part to SHARP switch ``leaf``; push every
    part of this rail that SHARP sends back into the NVSwitch; return every rank's part
    (this one's included) from the NVSwitch's multicasts, by rank."""
    switch = switch_of(comm)
    groups, _, local = node_layout(comm)
    pieces = chunks(own)
    order = rail_order({r: len(pieces) for r in range(comm.size)}, groups)
    base = 2 * channel
    up = uplink(comm, leaf, protocol.hop("nvls", "net"), protocol, (channel, local))
    for piece in pieces:
        yield from up.send(piece)
    to_switch = Sender(comm, switch, protocol, 0.0, base + _PUSH)
    relaying = comm.start(downlink(comm, leaf, (channel, local), len(pieces) * len(groups),
                                   [to_switch]))
    got: list[list[Buffer]] = [list(pieces) for _ in range(comm.size)]
    for r, k in order:
        got[r][k] = yield comm.recv(switch, tag=base + _BACK)
    yield from up.drain()
    yield relaying
    return [join(parts) for parts in got]


def switch_all_gather(comm: Comm, x: VirtualBuffer, channels: int) -> Steps:
    """The NVSwitch's side of every channel: multicast every part each head pushes to
    every GPU of the node, in :func:`.sharp.rail_order`."""
    gpus = served(comm)
    groups = node_order([comm.node_of(r) for r in range(comm.size)])
    local = {r: h for members in groups for h, r in enumerate(members)}
    own = list(split(x, channels))

    def channel(c: int) -> Steps:
        base = 2 * c
        count = len(chunks(own[c]))
        for r, _ in rail_order({r: count for r in local}, groups):
            comm.multicast((yield comm.recv(gpus[local[r]], tag=base + _PUSH)), gpus,
                           tag=base + _BACK)
        return None

    yield from run_channels(comm, channels, channel)
    return None
