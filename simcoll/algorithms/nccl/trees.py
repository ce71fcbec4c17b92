"""NCCL's tree all_reduce, simulated: a double binary tree across nodes, a chain in each.

NCCL's double binary tree over the nodes has two complementary trees, so that every node
is a leaf in one of them (``ncclGetDtree`` in ``src/graph/trees.cc``, the same
construction as the ``double_binary_tree`` algorithm). NCCL finds one tree pattern per
search channel and duplicates it: channel c and channel c + n (n search channels) share
the chain and the NIC, channel c on tree 0 and c + n on tree 1 (``connectTrees`` in
``src/graph/connect.cc``), so every NIC carries one channel of each tree and the load of
interior and leaf nodes evens out. Here n is the search's channel count
(:attr:`~.machine.Machine.graph_channels`: 8 on a DGX, 1 on a node of one NIC): channel
c works on tree (c div n) mod 2, and inside a node of G GPUs its GPUs form a chain
starting at the ((c mod n) mod G)-th GPU of the first node's rail order, every node
alike (:func:`~.nics.comm_rail_entries`: local order where every GPU has NICs of its
own, else the GPUs of the node's NICs in turn, as NCCL's search gives successive
channels the next NIC); the chain's head talks to the heads of its parent and child
nodes, which sit on the same rail. Channels trimmed for small sizes are the first ones,
all on tree 0, as in NCCL. Data goes up (reduced at every GPU from its chain
successor and, at a head, from its child nodes' heads) and comes down the same way,
slice by slice: a GPU runs its up and down streams side by side, as NCCL's split tree
kernel does, so a slice can travel down while later ones still travel up. That kernel
(``runTreeSplit`` in src/device/all_reduce.h) gives each stream a part of the channel's
threads (70% up and 30% down for LL and LL128, about half each for Simple), and the root,
which reduces and sends down in one pass, all of them; here each stream of a GPU below
the root moves half the channel's rate (``Protocol.rate``), as NCCL's own model does
when it counts a tree's bus bandwidth twice for its algorithm bandwidth (a ratio of
0.5). Every step costs the protocol's tree latency over its link class
(``hwLatencies[...][TREE]``), or the route's latency where that is more.

Slices are a protocol's step (:class:`~.protocols.Protocol`), whatever the size. NCCL
halves a tree's LL128 chunk for small buffers (``calcCollChunking`` in src/enqueue.cc:
while a channel would get fewer than 64 / ppn times 1 + log2(nodes) + ppn / 10 chunks
and the chunk is above 128 KiB, then while it would get fewer than 16 / ppn times as
many and the chunk is above 32 KiB); with NCCL's chunks the
simulation runs faster where it is already faster than measured (8 DGX H100, 4 MiB: 158
against 105 us with NCCL's 18 KB chunks; nccl-tests #309 measured 204), since a real
chunk costs more than the model charges it, so simcoll keeps the step.
"""

from __future__ import annotations

import dataclasses

from simcoll.algorithms.double_binary_tree import double_binary_tree
from simcoll.algorithms.nccl.machine import node_layout
from simcoll.algorithms.nccl.nics import bound_nic, comm_rail_entries
from simcoll.algorithms.nccl.protocols import Protocol, one_step_slices
from simcoll.algorithms.nccl.rings import Sender, chunks_then_rest, relay
from simcoll.buffers import Buffer, join
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["all_reduce"]


def _layout(comm: Comm, channel: int, searched: int) -> tuple[int | None, list[int],
                                                               list[int]]:
    """(where this rank sends up, where it receives from going up, where it sends down):
    its chain predecessor or its node's parent head; its chain successor and, at a head,
    its child nodes' heads. ``searched``: the search's channels, n."""
    groups, mine, _ = node_layout(comm)
    entries = comm_rail_entries(comm)
    head = entries[channel % searched % len(entries)]
    chains = [g[head % len(g):] + g[:head % len(g)] for g in groups]
    chain = chains[mine]
    pos = chain.index(comm.rank)
    below = [chain[pos + 1]] if pos + 1 < len(chain) else []
    if pos > 0:
        return chain[pos - 1], below, below
    parent, children = double_binary_tree(len(groups), mine, channel // searched % 2)
    heads = [chains[k][0] for k in children]
    return (None if parent is None else chains[parent][0]), below + heads, below + heads


def _sender(comm: Comm, peer: int, protocol: Protocol, intra: str, tag: int) -> Sender:
    """Channel ``tag // 2``'s connection to ``peer``; across nodes, bound to the channel's
    NIC: channels c and c + G (G GPUs per node) have the same head GPU, and take its
    NICs in turn."""
    if comm.node_of(peer) == comm.node_of(comm.rank):
        return Sender(comm, peer, protocol, protocol.hop("tree", intra), tag)
    groups, mine, _ = node_layout(comm)
    via = bound_nic(comm, peer, tag // 2 // len(groups[mine]))
    return Sender(comm, peer, protocol, protocol.hop("tree", "net"), tag, via)


def _up(comm: Comm, slices: list[Buffer], up: int | None, sources: list[int],
        downs: list[Sender], protocol: Protocol, op: ReduceOp, intra: str,
        tag: int) -> Steps:
    """Reduce every slice from ``sources`` and pass it up; at the root, send it down."""
    out = None if up is None else _sender(comm, up, protocol, intra, tag)
    for k in range(len(slices)):
        for source in sources:
            got = yield comm.recv(source, tag=tag)
            slices[k] = yield comm.reduce(slices[k], got, op, shared=True)
        for sender in ([out] if out is not None else downs):
            yield from sender.send(slices[k], origin=not sources)
    for sender in ([out] if out is not None else downs):
        yield from sender.drain()
    return slices


def all_reduce(comm: Comm, part: Buffer, channel: int, searched: int, protocol: Protocol,
               op: ReduceOp, intra: str) -> Steps:
    """One channel's tree all-reduce of this rank's ``part``; returns it reduced
    (``searched``: the channels of NCCL's search, n). Its slices are one step each, 8 in
    flight (:func:`~.protocols.one_step_slices`): NCCL cuts a ring's Simple chunks of
    four steps into slices of two, every other algorithm's into slices of one
    (``chunkSteps`` and ``sliceSteps`` in ``src/enqueue.cc``)."""
    protocol = one_step_slices(protocol)
    up, sources, below = _layout(comm, channel, searched)
    if up is not None:  # up and down each on half of the channel's threads (see above)
        protocol = dataclasses.replace(protocol, rate=protocol.rate / 2)
    tag = 2 * channel  # up on this tag, down on the next
    slices = chunks_then_rest(part, protocol)
    downs = [_sender(comm, b, protocol, intra, tag + 1) for b in below]
    if up is None:
        result = yield from _up(comm, slices, None, sources, downs, protocol, op, intra, tag)
        return join(result)
    climbing = comm.start(_up(comm, slices, up, sources, downs, protocol, op, intra, tag))
    result = yield from relay(comm, up, tag + 1, len(slices), downs)
    yield climbing
    return join(result)
