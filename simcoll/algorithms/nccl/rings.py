"""NCCL's rings, simulated: channels, rails, slices, protocols and per-step overheads.

A collective of n bytes runs on the channels NCCL cuts it over at once: the tuner's k
(``channels=k``) or fewer, or k + 1 where the share per channel rounds down and the
communicator has another (:func:`~.channels.channel_counts`: cells of 32 KiB of traffic,
so a small collective runs on fewer). Each rank's buffer is cut into blocks, one per
rank, and every block into one part per channel that carries data, of that channel's
share; channel c carries part c of every block around its own ring. Rings keep a node's
GPUs together; ring c enters node j at local GPU (c - j) mod G and leaves from the GPU
before it, and the next node's ring enters at that same local GPU, so on a
rail-optimised machine each node crossing goes GPU i -> NIC i -> rail switch i -> NIC i
-> GPU i, and the channels spread over the rails (NCCL's ring search does the same:
``src/graph/rings.cc``, ``search.cc``).

On its ring a channel moves each block in slices of the protocol's size, each a message
whose wire bytes are the protocol's (``Protocol.wire``) and whose latency is the
protocol's step latency over that hop's link class (``Protocol.hop``: NVLink, PCI or the
network; inside a node at least NCCL's network post overhead where the ring crosses
nodes), or the route's own latency where that is more; a connection has at most
``Protocol.window`` slices in flight, as NCCL's FIFO of 8 steps allows, and sends at most
the protocol's rate per channel. A rank forwards a slice as soon as it has received (and
reduced) it, so slices pipeline around the ring; the channels' reductions share the
GPU's reduction rate as they run (``Comm.reduce``'s ``shared``).
The collective starts after the protocol's launch cost (``Protocol.base``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable

from simpy.events import Event

from simcoll.algorithms.nccl.constants import net_overhead_us
from simcoll.algorithms.nccl.machine import node_layout, node_order
from simcoll.algorithms.nccl.nics import bound_nic
from simcoll.algorithms.nccl.protocols import Protocol, one_step_slices
from simcoll.buffers import Buffer, join, split_counts
from simcoll.comm import Comm
from simcoll.errors import LinkFailureError
from simcoll.ops import ReduceOp
from simcoll.topology.graph import Via
from simcoll.typing import Steps

__all__ = ["channel_rings", "beyond_route", "Sender", "relay", "net_step", "chunks_then_rest",
           "ring_slices", "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"]


def channel_rings(nodes: list[int], channels: int,
                  entries: list[int] | None = None) -> list[list[int]]:
    """The ring of each channel, as ranks in ring order (``nodes[r]`` is rank r's node).

    Channel c enters node 0 at local GPU ``entries[c mod len(entries)]`` (local GPU c mod
    the node's GPUs without ``entries``) and goes round the node in local order, leaving
    from the local GPU before it; it enters the next node at that same local GPU (the
    same rail) and goes round it the other way, leaving from the GPU after it; and so on,
    alternately. With an even number of nodes the ring comes back to node 0 on its entry
    GPU's rail too, so every node crossing stays on one rail.
    """
    groups = node_order(nodes)
    rings = []
    for c in range(channels):
        ring: list[int] = []
        start = entries[c % len(entries)] if entries else c % len(groups[0])
        for j, group in enumerate(groups):
            g = len(group)
            start %= g
            order = [group[(start + k) % g] for k in range(g)] if j % 2 == 0 else \
                [group[(start - k) % g] for k in range(g)]
            ring.extend(order)
            start = (start - 1) % g if j % 2 == 0 else (start + 1) % g
        rings.append(ring)
    return rings


def beyond_route(comm: Comm, peer: int, step: float, via: Via | None = None) -> float:
    """What NCCL's step latency ``step`` (measured end to end) adds to the latency of the
    route from this rank to ``peer`` (a rank, or an in-network device; through the NICs
    ``via`` if given): the part of it the links do not already take."""
    if step <= 0:
        return 0.0
    route = comm.topology.route(comm.address_of(comm.rank), comm.address_of(peer), via=via)
    return max(0.0, step - route.latency)


class Sender:
    """One connection of a channel: slices to one peer, at most ``window`` in flight.

    ``step`` is NCCL's latency for one step over this hop (``Protocol.hop``). NCCL
    measured it end to end, so it already holds the time the bytes spend on the links:
    each message waits only what the step costs beyond the route's own latency.
    ``via`` binds the connection to NICs (:func:`~.nics.bound_nic`).

    The channel's threads move at most ``protocol.rate`` bytes per second through the
    connection: a slice leaves once they have moved the one before it. They forward LL
    and LL128 data line by line as it arrives, so a slice is not held back at every hop
    for its whole size: the rate paces a connection, it does not add to each hop (where
    the threads were still busy when a slice's lines began to come in, they move it
    once free, and it leaves as they finish it). Where
    a chain's data starts (a rank's own data, ``origin``), the threads write a slice
    line by line while its lines cross the links, so its last byte arrives when the
    slower of the two is done: the slice leaves later by what writing it takes beyond
    what its wire bytes take on the route's narrowest link, and a chain of one slice pays the
    rate once, not nothing.

    The threads write a connection's slices one after the other: each is an ordered
    message (:meth:`~simcoll.comm.Comm.send`), whose bytes move once the slice ahead has
    arrived, while its step latency runs alongside. Slices in flight together as flows
    of their own would share the links evenly and all end at once, so a chain would
    forward a window of slices at a time instead of one.
    """

    def __init__(self, comm: Comm, peer: int, protocol: Protocol, step: float,
                 tag: Hashable, via: Via | None = None) -> None:
        self.comm, self.peer, self.protocol, self.tag = comm, peer, protocol, tag
        self.via = via
        self.delay = beyond_route(comm, peer, step, via)
        self.in_flight: deque[Event] = deque()
        # when the slices in flight arrived, oldest first (paced protocols only): a
        # slot is free from then
        self.arrivals: deque[float] = deque()
        self.written_at = comm.now   # the threads start with the connection

    def send(self, piece: Buffer, wire_bytes: int | None = None, origin: bool = False
             ) -> Steps:
        """Send ``piece`` as the channel's threads write it, into a free FIFO slot only,
        at the protocol's rate per channel, one piece after the other; ``wire_bytes``
        puts that many bytes on the links instead of the protocol's framing of
        ``piece``.

        The threads take a piece up once they have moved the one before it (the first
        once the connection is open) and its slot is free: ``origin``, this rank's own
        data, at once; a piece passed on (data just received, and reduced) as its lines
        come in, over the ``piece / rate`` before its last line arrived (when this is
        called). They write its lines while
        the lines cross the links, so it leaves later than they take it up by what
        writing it takes beyond what its wire bytes take on the route's narrowest link
        as links stand now, and never before it is here: a piece passed on by idle
        threads leaves as its last line comes in (a chain pays the rate once, where its
        data starts), and one that waited for busy threads (writing this rank's own
        slices, or not started yet) has its last line leave as they finish it. A slot is
        free once the slice in it has arrived."""
        rate = self.protocol.rate
        wire = self.protocol.wire(piece.nbytes) if wire_bytes is None else wire_bytes
        here, free = self.comm.now, -math.inf
        if len(self.in_flight) >= self.protocol.window:
            yield self.in_flight.popleft()
            if rate != math.inf:
                free = self.arrivals.popleft()   # nothing is written into it before
        if rate != math.inf:
            now = self.comm.now
            writing = piece.nbytes / rate
            begin = max(self.written_at, free, here if origin else here - writing)
            self.written_at = begin + writing
            leave = max(now, begin + max(0.0, writing - wire / self._bandwidth()))
            if leave > now:
                yield self.comm.sleep(leave - now)
        sent = self.comm.send(piece, self.peer, tag=self.tag, delay=self.delay,
                              wire_bytes=wire, ordered=True, via=self.via)
        if rate != math.inf:
            sent.callbacks.append(self._arrived)
        self.in_flight.append(sent)

    def _arrived(self, _: Event) -> None:
        self.arrivals.append(self.comm.now)

    def _bandwidth(self) -> float:
        """The narrowest link of the route to the peer as links stand now; where failed
        links leave none now, the healthy route's (the slice leaves later, and the send
        then finds the way as it stands, or reports the failure)."""
        try:
            return self.comm.route_bandwidth(self.peer, self.via)
        except LinkFailureError:
            comm = self.comm
            return comm.topology.route(comm.address_of(comm.rank), comm.address_of(self.peer),
                                       via=self.via).bandwidth

    def drain(self) -> Steps:
        """Wait until every slice sent has arrived."""
        while self.in_flight:
            yield self.in_flight.popleft()
        self.arrivals.clear()


def relay(comm: Comm, source: int, tag: Hashable, count: int, downs: list[Sender]) -> Steps:
    """Receive ``count`` slices from ``source`` on ``tag``, pass each on to ``downs`` as
    it comes; returns them in order (a tree's or a chain's way down)."""
    got: list[Buffer] = []
    for _ in range(count):
        piece = yield comm.recv(source, tag=tag)
        for sender in downs:
            yield from sender.send(piece)
        got.append(piece)
    for sender in downs:
        yield from sender.drain()
    return got


def chunks_then_rest(block: Buffer, protocol: Protocol, slices_per_chunk: int = 1
                     ) -> list[Buffer]:
    """``block`` cut as NCCL's kernels cut a channel's part: full chunks of
    ``slices_per_chunk`` slices of the protocol's size, then what is left as one last
    chunk (``for (elemOffset = 0; elemOffset < channelCount; elemOffset += chunkCount)
    nelem = min(chunkCount, channelCount - elemOffset)`` in src/device/broadcast.h,
    reduce.h and the trees of all_reduce.h; ``runRing`` in all_reduce.h shrinks only its
    last loop's chunk; NCCL 2.30.7). Primitives cut a chunk of ``nelem`` elements into
    at most ``SlicePerChunk`` slices (2 for a ring's Simple, else 1) of
    ``max(divUp(nelem, 16 * SlicePerChunk) * 16, sliceSize / 32)`` elements
    (``genericOp`` in src/device/prims_simple.h): a full chunk into full slices, a last
    one of 2 s elements into two of s, one of at most 1/32 of a slice whole, one between
    1/32 and 1/16 of a slice into 1/32 of a slice and the rest. A part a few
    bytes over one chunk so sends a full chunk and a small rest, whose chain cannot
    overlap the full chunk's; cut into equal halves it would pipeline, and run up to 38%
    faster than a part of one chunk: a larger message would take less time."""
    per = max(1, protocol.slice_bytes // block.dtype.itemsize)
    full, rest = divmod(block.size, per * slices_per_chunk)
    counts = [per] * (full * slices_per_chunk)
    if rest:
        size = max(-(-rest // (16 * slices_per_chunk)) * 16, per // 32)
        counts += [min(size, rest - k * size) for k in range(-(-rest // size))]
    return [block] if len(counts) <= 1 else split_counts(block, counts)


def ring_slices(block: Buffer, protocol: Protocol) -> list[Buffer]:
    """A ring all-reduce's, reduce-scatter's or all-gather's cut of one rank's ``block``
    (:func:`chunks_then_rest`): chunks of two slices with Simple (``ALLREDUCE_CHUNKSTEPS``
    / ``ALLREDUCE_SLICESTEPS``, the same for the other two), of one with LL and LL128."""
    return chunks_then_rest(block, protocol, 2 if protocol.name == "Simple" else 1)


def _neighbours(comm: Comm, ring: list[int]) -> tuple[int, int, int]:
    i = ring.index(comm.rank)
    p = len(ring)
    return i, ring[(i + 1) % p], ring[(i - 1) % p]


def _sender(comm: Comm, right: int, protocol: Protocol, intra: str, tag: int,
            ring: list[int] | None = None) -> Sender:
    """Channel ``tag``'s connection to ``right``; across nodes, bound to the channel's NIC:
    channels c and c + G (G GPUs per node) leave a node from the same GPU, and take its
    NICs in turn. Inside a node, a step of a ``ring`` (all_reduce, reduce_scatter,
    all_gather) that crosses nodes costs at least NCCL's network post overhead
    (:func:`~.constants.net_overhead_us`), as NCCL's tuner counts it; NCCL's broadcast
    and reduce chains are not charged it. Across nodes of one GPU each, a ``ring``'s
    step costs the tree's network latency, as NCCL's tuner charges it there."""
    if comm.node_of(right) == comm.node_of(comm.rank):
        step = protocol.hop("ring", intra)
        if ring is not None and len({comm.node_of(r) for r in ring}) > 1:
            step = max(step, net_overhead_us(comm.topology.cpu, protocol.name) * 1e-6
                       * protocol.step_scale)
        return Sender(comm, right, protocol, step, tag)
    groups, mine, _ = node_layout(comm)
    via = bound_nic(comm, right, tag // len(groups[mine]))
    # NCCL's broadcast and reduce chains keep the ring's network step, one GPU per node
    # or not
    step = net_step(comm, protocol, "ring") if ring is not None else protocol.hop("ring", "net")
    return Sender(comm, right, protocol, step, tag, via)


def net_step(comm: Comm, protocol: Protocol, algo: str) -> float:
    """NCCL's step latency (s) of ``algo`` through the network: its own (``hwLatencies``),
    or the tree's where every node holds one GPU of the communicator, every step's
    latency then exposed (``tuning.cc``: "With ppn=1 latencies are fully exposed, use
    the Tree network latency")."""
    groups, _, _ = node_layout(comm)
    return protocol.hop("tree" if len(groups) == comm.size else algo, "net")


def all_reduce(comm: Comm, blocks: list[Buffer], ring: list[int], protocol: Protocol,
               op: ReduceOp, intra: str, tag: int) -> Steps:
    """One channel's ring all-reduce of ``blocks`` (one per rank, by rank); returns them
    reduced. Reduce-scatter then all-gather, 2(p-1) block steps, slices pipelined."""
    p = len(ring)
    i, right, left = _neighbours(comm, ring)
    # Position-block q is rank ring[q-1]'s block: position i ends the reduce-scatter with
    # position-block i + 1, its own rank's block.
    slices = [ring_slices(blocks[ring[(q - 1) % p]], protocol) for q in range(p)]
    out = _sender(comm, right, protocol, intra, tag, ring)
    for piece in slices[i]:
        yield from out.send(piece, origin=True)
    for s in range(p - 1):
        mine = slices[(i - s - 1) % p]
        for k in range(len(mine)):
            got = yield comm.recv(left, tag=tag)
            mine[k] = yield comm.reduce(mine[k], got, op, shared=True)
            yield from out.send(mine[k])
    for s in range(p - 1):
        block = slices[(i - s) % p]
        for k in range(len(block)):
            block[k] = yield comm.recv(left, tag=tag)
            if s < p - 2:
                yield from out.send(block[k])
    yield from out.drain()
    return [join(slices[(ring.index(r) + 1) % p]) for r in range(p)]


def reduce_scatter(comm: Comm, blocks: list[Buffer], ring: list[int], protocol: Protocol,
                   op: ReduceOp, intra: str, tag: int) -> Steps:
    """One channel's ring reduce-scatter; returns this rank's block, reduced."""
    p = len(ring)
    i, right, left = _neighbours(comm, ring)
    slices = [ring_slices(blocks[ring[(q - 1) % p]], protocol) for q in range(p)]
    out = _sender(comm, right, protocol, intra, tag, ring)
    for piece in slices[i]:
        yield from out.send(piece, origin=True)
    for s in range(p - 1):
        mine = slices[(i - s - 1) % p]
        for k in range(len(mine)):
            got = yield comm.recv(left, tag=tag)
            mine[k] = yield comm.reduce(mine[k], got, op, shared=True)
            if s < p - 2:
                yield from out.send(mine[k])
    yield from out.drain()
    return join(slices[(i + 1) % p])


def all_gather(comm: Comm, own: Buffer, ring: list[int], protocol: Protocol, intra: str,
               tag: int) -> Steps:
    """One channel's ring all-gather of each rank's ``own`` part; returns every rank's
    part, by rank."""
    p = len(ring)
    i, right, left = _neighbours(comm, ring)
    got: list[Buffer | None] = [None] * p
    got[comm.rank] = own
    out = _sender(comm, right, protocol, intra, tag, ring)
    for piece in ring_slices(own, protocol):
        yield from out.send(piece, origin=True)
    for s in range(p - 1):
        source = ring[(i - s - 1) % p]
        parts = ring_slices(own, protocol)  # every rank's part has this rank's part's size
        for k in range(len(parts)):
            parts[k] = yield comm.recv(left, tag=tag)
            if s < p - 2:
                yield from out.send(parts[k])
        got[source] = join(parts)
    yield from out.drain()
    return got


def broadcast(comm: Comm, block: Buffer, ring: list[int], protocol: Protocol, intra: str,
              tag: int, root: int) -> Steps:
    """One channel's pipelined chain broadcast from ``root`` along its ring, one step
    per slice (:func:`~simcoll.algorithms.nccl.protocols.one_step_slices`)."""
    protocol = one_step_slices(protocol)
    p = len(ring)
    start = ring.index(root)
    chain = ring[start:] + ring[:start]
    i = chain.index(comm.rank)
    slices = chunks_then_rest(block, protocol)
    out = _sender(comm, chain[(i + 1) % p], protocol, intra, tag) if i < p - 1 else None
    for k in range(len(slices)):
        if i > 0:
            slices[k] = yield comm.recv(chain[i - 1], tag=tag)
        if out is not None:
            yield from out.send(slices[k], origin=i == 0)
    if out is not None:
        yield from out.drain()
    return join(slices)


def reduce(comm: Comm, block: Buffer, ring: list[int], protocol: Protocol, op: ReduceOp,
           intra: str, tag: int, root: int) -> Steps:
    """One channel's pipelined chain reduce to ``root``: the chain starts after the root
    in ring order and ends at it; one step per slice, as for :func:`broadcast`."""
    protocol = one_step_slices(protocol)
    p = len(ring)
    start = (ring.index(root) + 1) % p
    chain = ring[start:] + ring[:start]
    i = chain.index(comm.rank)
    slices = chunks_then_rest(block, protocol)
    out = _sender(comm, chain[i + 1], protocol, intra, tag) if i < p - 1 else None
    for k in range(len(slices)):
        if i > 0:
            got = yield comm.recv(chain[i - 1], tag=tag)
            slices[k] = yield comm.reduce(slices[k], got, op, shared=True)
        if out is not None:
            yield from out.send(slices[k], origin=i == 0)
    if out is not None:
        yield from out.drain()
    return join(slices)
