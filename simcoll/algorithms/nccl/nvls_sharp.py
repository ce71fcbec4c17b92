"""NVLS reduce_scatter and all_gather across nodes, simulated: NVLink SHARP inside each
node, InfiniBand SHARP between them (NCCL's NVLS algorithm with ``NCCL_COLLNET_ENABLE=1``
on a SHARP fabric whose CollNet plugin offers ``ireducescatter`` and ``iallgather``).

Every GPU is a head (NCCL runs these only where no node holds more GPUs than heads) and
owns its rail: the blocks of the GPUs of its local index on every node. With G GPUs on
each of N nodes and p = N G ranks:

* **reduce_scatter** (``runNvls``'s multi-node branch in src/device/reduce_scatter.h):
  every GPU pushes its whole buffer (p blocks), chunk by chunk of every rail, into its
  NVSwitch; the switch reduces each chunk over the node's GPUs and sends it to the head
  of the chunk's rail; each head sends its rail's chunks through its NIC to SHARP, which
  reduces each over the nodes and sends each head its piece (its own block's part). A
  GPU sends n and receives N n / p bytes on NVLink, sends N n / p and receives n / p on
  its NIC.
* **all_gather** (src/device/all_gather.h): each head sends its pieces of its rail's
  chunks through its NIC to SHARP, which joins every chunk and multicasts it to every
  head of the rail; each head pushes its rail's chunks into the NVSwitch, which
  multicasts them to every GPU of the node. A GPU sends its part and receives N parts on
  its NIC, sends N parts and receives all p on NVLink.

The work is cut as NCCL cuts it (:func:`.sharp.rail_plan`): each rail's blocks, node after
node, make one range that the channels take an NVLS chunk (128 KiB) at a time, in turn,
so a chunk may span several nodes' blocks; a channel handles its k-th chunk of every
rail before its (k + 1)-th of any (:func:`.sharp.rail_steps`), so all heads start at
once. A chunk is one message on every hop; SHARP sends each head of a reduce_scatter only
its piece of the chunk.

NCCL's latency is its NVLS latency inside the node (25 us, once) plus the network's
(``hwLatencies[NET][NVLS][SIMPLE]``, 18 us), which each chunk sent to SHARP waits beyond
its route's own latency.
"""

from __future__ import annotations

from simcoll.algorithms.nccl.channels import run_channels
from simcoll.algorithms.nccl.machine import node_layout
from simcoll.algorithms.nccl.nvls import served, switch_of, switch_reduce
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender
from simcoll.algorithms.nccl.sharp import (
    Piece,
    Plan,
    cut,
    downlink,
    gather,
    rail_steps,
    send_own,
    uplink,
)
from simcoll.buffers import Buffer
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["gpu_reduce_scatter", "switch_reduce_scatter", "gpu_all_gather",
           "switch_all_gather"]

_PUSH, _BACK = 0, 1
"""Tag offsets within a channel's two: GPU -> NVSwitch, NVSwitch -> GPU."""


def gpu_reduce_scatter(comm: Comm, blocks: list[Buffer], chunks: dict[int, list[list[Piece]]],
                       channel: int, protocol: Protocol, leaf: int) -> Steps:
    """One channel on a GPU (``chunks``: this channel's part of the plan): push every
    chunk of every rail from this GPU's blocks into the NVSwitch; send the node's sums of
    this rail's chunks, as they come, to SHARP switch ``leaf``; return ``(start, piece)``
    of this rank's block as SHARP sends them back, reduced over every rank."""
    switch = switch_of(comm)
    _, _, local = node_layout(comm)
    steps = rail_steps(chunks)
    base = 2 * channel
    push = Sender(comm, switch, protocol, 0.0, base + _PUSH)

    def to_sharp() -> Steps:
        up = uplink(comm, leaf, protocol.hop("nvls", "net"), protocol, (channel, local))
        for h, _ in steps:
            if h == local:
                yield from up.send((yield comm.recv(switch, tag=base + _BACK)))
        yield from up.drain()

    sending = comm.start(to_sharp())
    for h, k in steps:
        yield from push.send(gather(blocks, chunks[h][k]))
    mine = [start for pieces in chunks.get(local, []) for r, start, _ in pieces
            if r == comm.rank]
    got = yield from downlink(comm, leaf, (channel, local), len(mine), [])
    yield from push.drain()
    yield sending
    return list(zip(mine, got))


def switch_reduce_scatter(comm: Comm, plan: Plan, op: ReduceOp) -> Steps:
    """The NVSwitch's side of every channel: reduce each chunk over the node's GPUs and
    send it to the head of the chunk's rail."""
    gpus = sorted(served(comm))  # local index h is the h-th GPU of the node by rank

    def channel(c: int) -> Steps:
        base = 2 * c
        for h, _ in rail_steps(plan[c]):
            total = yield from switch_reduce(comm, gpus, base + _PUSH, op)
            comm.send(total, gpus[h], tag=base + _BACK)
        return None

    yield from run_channels(comm, len(plan), channel)
    return None


def gpu_all_gather(comm: Comm, own: Buffer, chunks: dict[int, list[list[Piece]]],
                   channel: int, protocol: Protocol, leaf: int) -> Steps:
    """One channel on a GPU: send this rank's pieces of this rail's chunks to SHARP
    switch ``leaf``; push every chunk SHARP sends back into the NVSwitch; return
    ``(rank, start, piece)`` of every chunk of every rail, from the NVSwitch's
    multicasts."""
    switch = switch_of(comm)
    _, _, local = node_layout(comm)
    steps = rail_steps(chunks)
    base = 2 * channel
    up = uplink(comm, leaf, protocol.hop("nvls", "net"), protocol, (channel, local))
    to_switch = Sender(comm, switch, protocol, 0.0, base + _PUSH)
    # NCCL's threads send to the network and relay what comes back at the same time
    # (all_gather.h, runNvls across nodes: the net-send and the bcast warps)
    relaying = comm.start(downlink(comm, leaf, (channel, local),
                                   len(chunks.get(local, [])), [to_switch]))
    sending = comm.start(send_own(up, own, chunks.get(local, []), comm.rank))
    got: list[tuple[int, int, Buffer]] = []
    for h, k in steps:
        pieces = chunks[h][k]
        chunk = yield comm.recv(switch, tag=base + _BACK)
        got.extend((r, start, part) for (r, start, _), part in zip(pieces, cut(chunk, pieces)))
    yield sending
    yield relaying
    return got


def switch_all_gather(comm: Comm, plan: Plan) -> Steps:
    """The NVSwitch's side of every channel: multicast every chunk each head pushes to
    every GPU of the node, in :func:`.sharp.rail_steps` order."""
    gpus = sorted(served(comm))  # local index h is the h-th GPU of the node by rank

    def channel(c: int) -> Steps:
        base = 2 * c
        for h, _ in rail_steps(plan[c]):
            comm.multicast((yield comm.recv(gpus[h], tag=base + _PUSH)), gpus,
                           tag=base + _BACK)
        return None

    yield from run_channels(comm, len(plan), channel)
    return None
