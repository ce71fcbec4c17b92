"""NCCL's CollNet, simulated: InfiniBand SHARP across nodes, GPUs inside them.

With ``NCCL_COLLNET_ENABLE=1`` on a fabric whose switches reduce (SHARP, :mod:`.sharp`),
NCCL can run two CollNet algorithms (``src/device/all_reduce.h``, NCCL 2.30.7; Simple
protocol only):

* **CollNet Direct**: each channel's part is cut into one block per local GPU, the
  block's head. Every GPU scatters each block to its head over NVLink; the head reduces
  the node's copies on the GPU and sends the sum through its NIC to the SHARP switches,
  which reduce it over the nodes and send it back; the head then sends the result to
  every other GPU of its node. A GPU sends and receives 2 (G - 1) / G n bytes inside its
  node and n / G through its NIC each way. NCCL's tuner counts a latency (``tuning.cc``)
  of 2 (3.7 us + 0.4 us per other local GPU) + 31 us, and 14 us (the tree's network
  step) with one GPU per node; the run pays the steps themselves (3.7 us to the head,
  the network's 31 or 14, 3.7 us back, each where it exceeds its route's latency), not
  the 0.4 us per GPU. Here every GPU is a head, through its first NIC where it has
  several (:func:`~.nics.gpu_nic`; NCCL's collnet graph gives each head GPU one NIC, the
  first it finds whose local GPU it is); NCCL makes one head per NIC, which moves the
  same bytes through each NIC where GPUs share one (two heads of n / G each against one
  of 2 n / G).
* **CollNet Chain**: the node's GPUs form a chain per channel, starting at its head:
  local GPU c mod G with one NIC per GPU; where GPUs have several NICs, or share them,
  channel c takes the c-th NIC NCCL's chain search lists and its local GPU heads the
  chain (:func:`~.nics.chain_lanes`: with two NICs per GPU, GPU (c mod 2G) // 2 on
  its NIC c mod 2, so the channels use every NIC). Slices are reduced up the chain, the
  head sends the node's sum through that NIC to the SHARP switches and passes what
  comes back down the chain. Latency: 2 (G - 1) 2.8 us + 30 us (14 us with one GPU per
  node, as Direct).

CollNet Direct also runs reduce_scatter and all_gather across nodes
(``src/device/reduce_scatter.h`` and ``all_gather.h``), where NCCL's CollNet plugin
reduce-scatters and all-gathers and every GPU is a head (its NVLS head, or one per NIC):
each GPU heads its rail, the blocks of its local index on every node, which NCCL takes
together and cuts in chunks that the channels take in turn (:func:`.sharp.rail_plan`).
reduce_scatter: every GPU sends each other local GPU the chunks of that GPU's rail, cut
from its own buffer; a head reduces its rail's chunks over the node as they come (its
own input included) and sends the sums to SHARP, which reduces them over the nodes and
sends each head its piece of every chunk. A GPU sends and receives (G - 1) N n / p bytes over
NVLink, sends N n / p and receives n / p on its NIC. all_gather: every GPU sends its
pieces of its rail's chunks to SHARP, which sends every chunk of the rail back to every
head; a head passes each to the other GPUs of its node. A GPU sends n / p and receives
N n / p on its NIC, and sends and receives (G - 1) N n / p over NVLink.

Each step waits NCCL's step latency for its link class (``hwLatencies``) beyond its
route's own latency, as rings and trees do. Slices are NCCL's chunks
(``calcCollChunking`` in ``src/enqueue.cc``): 512 KiB for Direct and 256 KiB for Chain,
halved for small buffers (see :func:`chunk_bytes`).
"""

from __future__ import annotations

from simcoll.algorithms.nccl import sharp
from simcoll.algorithms.nccl.machine import node_layout
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender, net_step, relay
from simcoll.buffers import Buffer, join, split
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["chunk_bytes", "slices", "direct_all_reduce", "chain_all_reduce", "switch_counts",
           "direct_reduce_scatter", "direct_all_gather"]

_STEP = 512 * 1024
"""A Simple step: NCCL's 4 MiB buffer over its 8 FIFO slots."""


def chunk_bytes(algo: str, nbytes: int, channels: int, ppn: int) -> int:
    """NCCL's CollNet chunk for a buffer of ``nbytes``: Direct starts from a step (512
    KiB) and halves while each of the ``channels`` x ``ppn`` heads would get fewer than
    64 d chunks (down to 128 KiB), then fewer than 8 d (down to 32 KiB), where d, its
    depth, is 2 with other GPUs in the node and 1 alone; Chain starts from 256 KiB and
    halves while a channel would get fewer than 64 ppn chunks (down to 128 KiB), 8 ppn
    (down to 64 KiB), then ppn (down to 32 KiB)."""
    if algo == "collnet_direct":
        chunk, share, d = _STEP, channels * ppn, 1 if ppn == 1 else 2
        for depth, floor in ((d * 64, 131072), (d * 8, 65536), (d * 8, 32768)):
            while nbytes // (share * chunk) < depth and chunk > floor:
                chunk //= 2
        return chunk
    chunk = min(256 * 1024, _STEP)
    for depth, floor in ((ppn * 64, 131072), (ppn * 8, 65536), (ppn, 32768)):
        while nbytes // (channels * chunk) < depth and chunk > floor:
            chunk //= 2
    return chunk


def slices(block: Buffer, chunk: int) -> list[Buffer]:
    """``block`` cut into slices of at most ``chunk`` bytes (equal ones)."""
    per = max(1, chunk // block.dtype.itemsize)
    count = -(-block.size // per)
    return [block] if count <= 1 else list(split(block, count))


def switch_counts(algo: str, parts: list[Buffer], ppn: int, chunk: int,
                  heads: list[int] | None = None) -> list[dict[int, int]]:
    """Per channel, the slices each local index's SHARP tree moves (what
    :func:`sharp.switch_all_reduce` takes): every block's for Direct, the head's whole
    part for Chain (``heads[c]``: channel c's head, by local index)."""
    if algo == "collnet_direct":
        return [{local: len(slices(block, chunk)) for local, block in
                 enumerate(split(part, ppn))} for part in parts]
    assert heads is not None
    return [{heads[c]: len(slices(part, chunk))} for c, part in enumerate(parts)]


def direct_all_reduce(comm: Comm, part: Buffer, channel: int, protocol: Protocol,
                      op: ReduceOp, intra: str, chunk: int, leaf: int) -> Steps:
    """One channel of CollNet Direct on a GPU: scatter every block to its head, head
    this GPU's block through SHARP switch ``leaf``, gather the others' results."""
    groups, node, local = node_layout(comm)
    peers = groups[node]
    blocks = [slices(block, chunk) for block in split(part, len(peers))]
    others = [h for h in range(len(peers)) if h != local]
    longest = max(len(block) for block in blocks)
    hop = protocol.hop("collnet_direct", intra)
    scatter_tag, bcast_tag = (channel, "collnet scatter"), (channel, "collnet bcast")

    def scatter() -> Steps:
        senders = {h: Sender(comm, peers[h], protocol, hop, scatter_tag) for h in others}
        for k in range(longest):
            for h in others:
                if k < len(blocks[h]):
                    yield from senders[h].send(blocks[h][k])
        for sender in senders.values():
            yield from sender.drain()

    def head() -> Steps:
        mine, key = blocks[local], (channel, local)
        up = sharp.uplink(comm, leaf, net_step(comm, protocol, "collnet_direct"), protocol, key)
        downs = [Sender(comm, peers[h], protocol, hop, bcast_tag) for h in others]
        descending = comm.start(sharp.downlink(comm, leaf, key, len(mine), downs))
        for k in range(len(mine)):
            total = mine[k]
            for h in others:
                got = yield comm.recv(peers[h], tag=scatter_tag)
                total = yield comm.reduce(total, got, op, shared=True)
            yield from up.send(total)
        yield from up.drain()
        return (yield descending)

    scattering, heading = comm.start(scatter()), comm.start(head())
    result = [list(block) for block in blocks]
    for k in range(longest):
        for h in others:
            if k < len(blocks[h]):
                result[h][k] = yield comm.recv(peers[h], tag=bcast_tag)
    yield scattering
    result[local] = yield heading
    return join([join(block) for block in result])


def chain_all_reduce(comm: Comm, part: Buffer, channel: int, protocol: Protocol,
                     op: ReduceOp, intra: str, chunk: int, lane: tuple[int, int],
                     leaf: int) -> Steps:
    """One channel of CollNet Chain on a GPU: reduce up the node's chain, the head
    (``lane``: its local index and NIC choice, :func:`~.nics.chain_lanes`) through
    its NIC to its SHARP switch ``leaf``, results down the chain."""
    groups, node, _ = node_layout(comm)
    peers = groups[node]
    start, choice = lane
    chain = peers[start:] + peers[:start]
    pos = chain.index(comm.rank)
    pieces = slices(part, chunk)
    hop = protocol.hop("collnet_chain", intra)
    up_tag, down_tag = (channel, "chain up"), (channel, "chain down")
    downs = [Sender(comm, chain[pos + 1], protocol, hop, down_tag)] \
        if pos + 1 < len(chain) else []
    if pos == 0:
        key = (channel, start)
        up = sharp.uplink(comm, leaf, net_step(comm, protocol, "collnet_chain"), protocol, key,
                          choice)
        descending = comm.start(sharp.downlink(comm, leaf, key, len(pieces), downs))
    else:
        up = Sender(comm, chain[pos - 1], protocol, hop, up_tag)
        descending = comm.start(relay(comm, chain[pos - 1], down_tag, len(pieces), downs))
    for piece in pieces:
        if downs:
            piece = yield comm.reduce(piece, (yield comm.recv(chain[pos + 1], tag=up_tag)), op,
                                       shared=True)
        yield from up.send(piece)
    yield from up.drain()
    return join((yield descending))


def direct_reduce_scatter(comm: Comm, blocks: list[Buffer],
                          chunks: dict[int, list[list[sharp.Piece]]], channel: int,
                          protocol: Protocol, op: ReduceOp, intra: str, leaf: int) -> Steps:
    """One channel of CollNet Direct's reduce_scatter across nodes on a GPU (every GPU
    heads its rail; ``chunks``: this channel's part of the plan, :func:`.sharp.rail_plan`):
    send every other local GPU its rail's chunks of this GPU's blocks; reduce each chunk
    of this rail over the node's GPUs as they come and send the sum through SHARP switch
    ``leaf``, which reduces it over the nodes; return ``(start, piece)`` of this rank's
    block as SHARP sends them back."""
    groups, node, local = node_layout(comm)
    peers = groups[node]
    steps = sharp.rail_steps(chunks)
    others = [h for h in range(len(peers)) if h != local]
    hop = protocol.hop("collnet_direct", intra)
    tag = (channel, "collnet scatter")

    def scatter() -> Steps:
        senders = {h: Sender(comm, peers[h], protocol, hop, tag) for h in others}
        for h, k in steps:
            if h != local:
                yield from senders[h].send(sharp.gather(blocks, chunks[h][k]))
        for sender in senders.values():
            yield from sender.drain()

    def head() -> Steps:
        up = sharp.uplink(comm, leaf, net_step(comm, protocol, "collnet_direct"), protocol,
                          (channel, local))
        for pieces in chunks.get(local, []):
            total = sharp.gather(blocks, pieces)
            for h in others:
                total = yield comm.reduce(total, (yield comm.recv(peers[h], tag=tag)), op,
                                           shared=True)
            yield from up.send(total)
        yield from up.drain()

    scattering, heading = comm.start(scatter()), comm.start(head())
    mine = [start for pieces in chunks.get(local, []) for r, start, _ in pieces
            if r == comm.rank]
    got = yield from sharp.downlink(comm, leaf, (channel, local), len(mine), [])
    yield scattering
    yield heading
    return list(zip(mine, got))


def direct_all_gather(comm: Comm, own: Buffer, chunks: dict[int, list[list[sharp.Piece]]],
                      channel: int, protocol: Protocol, intra: str, leaf: int) -> Steps:
    """One channel of CollNet Direct's all_gather across nodes on a GPU (every GPU heads
    its rail; ``chunks``: this channel's part of the plan): send this rank's pieces of
    this rail's chunks through SHARP switch ``leaf``, which sends every chunk of the rail
    back; pass each on to the other local GPUs as it comes, and take theirs from them;
    return ``(rank, start, piece)`` of every chunk of every rail."""
    groups, node, local = node_layout(comm)
    peers = groups[node]
    steps = sharp.rail_steps(chunks)
    hop = protocol.hop("collnet_direct", intra)
    tag = (channel, "collnet bcast")
    up = sharp.uplink(comm, leaf, net_step(comm, protocol, "collnet_direct"), protocol,
                      (channel, local))
    downs = [Sender(comm, peers[h], protocol, hop, tag) for h in range(len(peers))
             if h != local]
    # sending to the network and relaying what comes back run at once, as NCCL's threads
    relaying = comm.start(sharp.downlink(comm, leaf, (channel, local),
                                         len(chunks.get(local, [])), downs))
    sending = comm.start(sharp.send_own(up, own, chunks.get(local, []), comm.rank))
    received: dict[int, list[Buffer]] = {h: [] for h in range(len(peers))}
    for h, _ in steps:
        if h != local:
            received[h].append((yield comm.recv(peers[h], tag=tag)))
    received[local] = yield relaying
    yield sending
    got: list[tuple[int, int, Buffer]] = []
    for h, k in steps:
        pieces = chunks[h][k]
        chunk = received[h][k]
        got.extend((r, start, part) for (r, start, _), part in
                   zip(pieces, sharp.cut(chunk, pieces)))
    return got
