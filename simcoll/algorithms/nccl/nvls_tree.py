"""NVLS-tree, simulated: NVLink SHARP inside each node, a tree between nodes; NVLS
across nodes, where an InfiniBand SHARP switch takes the tree's place; and NVLS on one
node, where nothing does (step 2 below is empty: each owner hands its slices straight
back, as NCCL's one-node NVLS kernel does, ``oneNode`` in src/device/all_reduce.h).

For each channel, every GPU's part is cut into one block per head (on one node as NCCL's
one-node kernel loops, its chunks interleaved: :func:`one_node_slices`); local GPU h is head h,
owns block h, and talks to the other nodes over its own rail. Every node has as many
heads as the smallest node has GPUs (NCCL cuts every rank's NVLS graph to the fewest
channels any node found, and its channels' first GPUs are the heads: src/graph/connect.cc,
``connectNvls``); on nodes of equal size every GPU is a head. The others only push and
take results back (``headRank == -1`` in src/device/all_reduce.h). Where GPUs share NICs
NCCL has fewer heads: its NVLS search makes a head of a GPU with a NIC of its own, one per
NIC (src/graph/search.cc), so ``dgx_h100(2, nics_per_node=4)`` runs 4 heads there, each
taking n / 4 from the switch, where simcoll runs 8 of n / 8, two of them through each
NIC (the same bytes on every NIC; the tuner prices NCCL's 4). Three streams run side
by side:

1. every GPU pushes all its slices into its node's NVSwitch, which reduces each slice over
   the node's GPUs and sends it to the slice's owner;
2. each owner all-reduces its block's slices with the owners of the same block on the
   other nodes (same local GPU, same rail) over NCCL's double binary tree of the nodes:
   reduced up the tree, sent back down;
3. each owner hands every finished slice back to the switch, which multicasts it to every
   GPU of the node.

A GPU sends n and receives n bytes inside its node, and a head also takes its block from
the switch and hands it back (n / H each way, H heads) and carries the block's tree
traffic on its NIC; the switch of a node of G GPUs reduces n x (G - 1)
bytes. NCCL's NVLS-tree latency is
``hwLatencies[NVLINK][NVLS_TREE][SIMPLE]`` (25 us) once, plus a network step per tree
level. Sources: NCCL 2.30.7 ``src/device/all_reduce.h`` (``runRing``'s NVLS-tree
sibling), ``src/graph/tuning.cc``.

NVLS across nodes (NCCL's NVLS algorithm with ``NCCL_COLLNET_ENABLE=1`` on a SHARP
fabric; ``runNvls`` with ``nNodes > 1``) runs the same three streams with step 2 done by
the network: each owner sends every slice of its block through its NIC to its rail's
SHARP switch (:func:`~simcoll.algorithms.nccl.machine.sharp_groups`), which reduces it
over the nodes' owners and multicasts it back to them; where the owners sit under
several leaves, each leaf sends its sum up to the SHARP switch that joins them (the
spine), which reduces the leaves' sums and multicasts the result back down through the
leaves (InfiniBand SHARP's aggregation tree). An owner's NIC carries its block
once each way, n / G bytes, whatever the node count. NCCL's latency for it is 25 us
once inside the node plus ``hwLatencies[NET][NVLS][SIMPLE]`` (18 us) across; here each
slice sent to the switch waits those 18 us beyond its route's own latency, so they
overlap as a tree's steps do.
"""

from __future__ import annotations

from simcoll.algorithms.double_binary_tree import double_binary_tree
from simcoll.algorithms.nccl.channels import run_channels
from simcoll.algorithms.nccl.machine import node_layout, node_order
from simcoll.algorithms.nccl.nics import bound_nic
from simcoll.algorithms.nccl.nvls import chunks, served, switch_of, switch_reduce
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender
from simcoll.algorithms.nccl.sharp import downlink, uplink
from simcoll.buffers import Buffer, VirtualBuffer, join, split, split_counts
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["gpu_all_reduce", "switch_all_reduce", "block_slices", "one_node_slices",
           "heads"]

_PUSH, _BACK, _UP, _DOWN = 0, 1, 2, 3
"""Tag offsets within a channel's four: GPU -> switch pushes and switch -> owner sends;
owner -> switch results and switch multicasts; up and down the tree of nodes."""


def heads(comm: Comm) -> int:
    """NVLS heads per node: the fewest GPUs of the communicator any node holds."""
    return min(map(len, node_order([comm.node_of(r) for r in range(comm.size)])))


def block_slices(part: Buffer, h: int) -> list[list[Buffer]]:
    """``part`` in one block per head (``h`` of them), each in NVLS-sized slices."""
    return [chunks(block) for block in split(part, h)]


_LAST_ALIGN = 16384
"""Bytes NCCL's one-node NVLS kernel rounds its last loop's chunk up to
(``alignUp(divUp(remCount, nHeads), 16384 / sizeof(T))``, src/device/all_reduce.h)."""


def one_node_slices(part: Buffer, h: int, chunk_bytes: int) -> list[list[Buffer]]:
    """A channel's ``part`` as NCCL's one-node NVLS kernel cuts it among ``h`` heads: loops
    of h chunks of ``chunk_bytes``, head j taking chunk j of each; the last loop's rest
    in pieces of its h-th rounded up to 16 KiB, head j taking the j-th (the last heads
    less, or nothing). Each head's slices in loop order; in offset order they are
    :func:`_round_robin`'s."""
    itemsize = part.dtype.itemsize
    chunk = max(1, chunk_bytes // itemsize)
    loops, rest = divmod(part.size, h * chunk)
    counts, owners = [chunk] * (loops * h), list(range(h)) * loops
    if rest:
        align = max(1, _LAST_ALIGN // itemsize)
        share = -(-rest // h)                  # divUp(rest, h)
        last = -(-share // align) * align      # alignUp(share, align)
        for j, start in enumerate(range(0, rest, last)):
            counts.append(min(last, rest - start))
            owners.append(j)
    blocks: list[list[Buffer]] = [[] for _ in range(h)]
    for piece, owner in zip(split_counts(part, counts), owners):
        blocks[owner].append(piece)
    return blocks


def _round_robin(blocks: list[list[Buffer]]) -> list[tuple[int, int]]:
    """(block, slice) pairs in the order the switch handles them: slice k of every block
    before slice k + 1 of any, so every owner's tree starts at once."""
    longest = max(len(block) for block in blocks)
    return [(b, k) for k in range(longest) for b in range(len(blocks)) if k < len(blocks[b])]


def _tree(comm: Comm, count: int, switch: int, groups: list[list[int]], node: int,
          local: int, channel: int, protocol: Protocol, op: ReduceOp, base: int,
          finish: Sender) -> Steps:
    """All-reduce this GPU's block, ``count`` slices that arrive one by one from
    ``switch`` (reduced over the node), with the same local GPU of every node over the
    channel's tree of nodes; hand every finished slice to ``finish`` as soon as it is
    done: the root as it reduces it, the others as it comes down (their up and down
    streams run side by side)."""
    parent, children = double_binary_tree(len(groups), node, channel % 2)
    peer = [members[local] for members in groups]
    hop = protocol.hop("nvls_tree", "net")
    up_tag, down_tag = base + _UP, base + _DOWN
    # Every channel runs on the same heads: they take a head's NICs in turn.
    downs = [Sender(comm, peer[k], protocol, hop, down_tag, bound_nic(comm, peer[k], channel))
             for k in children]

    def down(source: int) -> Steps:
        for _ in range(count):
            piece = yield comm.recv(source, tag=down_tag)
            for sender in downs:
                yield from sender.send(piece)
            yield from finish.send(piece)
        for sender in downs:
            yield from sender.drain()

    descending = None if parent is None else comm.start(down(peer[parent]))
    up = None if parent is None else Sender(comm, peer[parent], protocol, hop, up_tag,
                                            bound_nic(comm, peer[parent], channel))
    for _ in range(count):
        piece = yield comm.recv(switch, tag=base + _PUSH)
        for child in children:
            got = yield comm.recv(peer[child], tag=up_tag)
            piece = yield comm.reduce(piece, got, op, shared=True)
        if up is not None:
            yield from up.send(piece)
            continue
        for sender in downs:
            yield from sender.send(piece)
        yield from finish.send(piece)
    if up is not None and descending is not None:
        yield from up.drain()
        yield descending
    for sender in downs:
        yield from sender.drain()


def _blocks(part: Buffer, h: int, one_node: int | None) -> list[list[Buffer]]:
    """The heads' slices: NCCL's one-node cut in chunks of ``one_node`` bytes where
    given (:func:`one_node_slices`), else :func:`block_slices`."""
    return block_slices(part, h) if one_node is None else one_node_slices(part, h, one_node)


def gpu_all_reduce(comm: Comm, part: Buffer, channel: int, protocol: Protocol,
                   op: ReduceOp, sharp: int | None = None,
                   one_node: int | None = None) -> Steps:
    """One channel on a GPU: push; if this GPU is a head, own one block across the
    nodes (over the tree of nodes, or through SHARP switch ``sharp``); take results
    back. ``one_node``: NVLS on one node, in chunks of that many bytes (no step across
    nodes; the slices cut as :func:`one_node_slices`)."""
    switch = switch_of(comm)
    groups, node, local = node_layout(comm)
    blocks = _blocks(part, min(map(len, groups)), one_node)
    base = 4 * channel

    order = _round_robin(blocks)

    def push() -> Steps:
        sender = Sender(comm, switch, protocol, 0.0, base + _PUSH)
        for b, k in order:
            yield from sender.send(blocks[b][k])
        yield from sender.drain()

    def own() -> Steps:
        back = Sender(comm, switch, protocol, 0.0, base + _BACK)
        if sharp is None:
            yield from _tree(comm, len(blocks[local]), switch, groups, node, local, channel,
                             protocol, op, base, back)
        else:
            count = len(blocks[local])
            up = uplink(comm, sharp, protocol.hop("nvls", "net"), protocol, (channel, local))
            descending = comm.start(downlink(comm, sharp, (channel, local), count, [back]))
            for _ in range(count):
                yield from up.send((yield comm.recv(switch, tag=base + _PUSH)))
            yield from up.drain()
            yield descending
        yield from back.drain()

    pushing = comm.start(push())
    owning = comm.start(own()) if local < len(blocks) else None
    result: list[list[Buffer]] = [list(block) for block in blocks]
    for b, k in order:
        result[b][k] = yield comm.recv(switch, tag=base + _BACK)
    yield pushing
    if owning is not None:
        yield owning
    if one_node is not None:   # the heads' slices interleave: offset order is the order
        return join([result[b][k] for b, k in order]) if order else part
    return join([join(block) for block in result])


def switch_all_reduce(comm: Comm, x: VirtualBuffer, counts: list[int], op: ReduceOp,
                      one_node: int | None = None) -> Steps:
    """The switch's side of every channel, channel c carrying ``counts[c]`` elements of
    ``x``: reduce each slice over its node's GPUs and send it to the slice's owner (a
    head); multicast every finished slice the owners send back (``one_node``: as
    :func:`gpu_all_reduce`)."""
    gpus = sorted(served(comm))  # local index b is the b-th GPU of the node by rank
    parts = split_counts(x, counts)
    h = heads(comm)

    def channel(c: int) -> Steps:
        order = _round_robin(_blocks(parts[c], h, one_node))
        base = 4 * c

        def reduce_to_owners() -> Steps:
            for b, _ in order:
                total = yield from switch_reduce(comm, gpus, base + _PUSH, op)
                comm.send(total, gpus[b], tag=base + _PUSH)

        reducing = comm.start(reduce_to_owners())
        for b, _ in order:
            finished = yield comm.recv(gpus[b], tag=base + _BACK)
            comm.multicast(finished, gpus, tag=base + _BACK)
        yield reducing

    yield from run_channels(comm, len(counts), channel)
    return None
