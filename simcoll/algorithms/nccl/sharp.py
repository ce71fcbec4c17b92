"""InfiniBand SHARP, simulated: switches that reduce what GPUs of every node send them.

NCCL reaches SHARP through its CollNet plugin API (in practice nccl-rdma-sharp-plugins):
on every node one GPU per block (an owner, or CollNet's head) sends each slice of the
block through its NIC to the fabric, whose SHARP switches reduce it over the nodes and
send the result back to every owner. The switches form an aggregation tree
(:class:`~simcoll.algorithms.nccl.machine.SharpTree`): a leaf reduces the slices of the
owners below it and, where there are several leaves, sends its sum up to the switch that
joins them, which reduces the leaves' sums and sends the result back down through them.
NVLS across nodes (``nvls_tree.py``) and CollNet Direct and Chain (``collnet.py``) all
use it, each with its own latency for the network step (NCCL's ``hwLatencies[NET]``):
every slice sent up waits that long beyond its route's own latency, so the steps of
successive slices overlap.

reduce_scatter and all_gather across nodes, with NVLS (``nvls_sharp.py``) or CollNet
Direct (``collnet.py``), use the plugin's reduce-scatter and all-gather instead
(``ireducescatter``, ``iallgather``): for a reduce-scatter the switches reduce each chunk
of a rail over the nodes as for an all-reduce, but send each owner only its piece of the
sum; for an all-gather they reduce nothing: the owners' pieces of a chunk go up, and the
chunk is multicast down to every owner (the chunks: :func:`rail_plan`).

Traffic is keyed by (channel, local index): one switch may serve several blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import NamedTuple

from simcoll.algorithms.nccl.channels import run_channels
from simcoll.algorithms.nccl.nics import gpu_nic
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender, relay
from simcoll.buffers import Buffer, join, split_counts
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.topology.graph import Via
from simcoll.typing import Steps

__all__ = ["Role", "Piece", "Plan", "uplink", "downlink", "send_own", "rail_plan", "rail_steps",
           "gather", "cut", "switch_all_reduce", "switch_reduce_scatter", "switch_all_gather"]


class Role(NamedTuple):
    """What one SHARP switch does in the tree of one local index.

    Attributes:
        local: the local index (rail) whose owners the tree joins.
        children: the owners below it (a leaf), or the leaves below it (the root).
        parent: the switch above it, None at the top of the tree.
        below: the child that leads to each owner below it (the owner itself at a leaf).
        vias: the NIC through which the switch reaches each owner among its children
            that has several (the NIC the owner's channel is bound to:
            :func:`~.nics.gpu_nic`); the others (all, where None) by their shortest
            routes.
    """

    local: int
    children: list[int]
    parent: int | None
    below: dict[int, int]
    vias: dict[int, Via] | None = None

    def via(self, child: int) -> Via | None:
        """The devices the route down to ``child`` passes (None: the shortest)."""
        return self.vias.get(child) if self.vias else None

    def down_vias(self) -> list[Via | None] | None:
        """:meth:`via` for every child, for a multicast (None where no child has one)."""
        return [self.via(child) for child in self.children] if self.vias else None


def _tags(key: tuple[int, int]) -> tuple[Hashable, Hashable]:
    """The tags of the SHARP traffic of ``key`` = (channel, local index), up and down."""
    return (*key, "sharp up"), (*key, "sharp down")


def uplink(comm: Comm, switch: int, step: float, protocol: Protocol,
           key: tuple[int, int], choice: int = 0) -> Sender:
    """This GPU's connection up to SHARP switch ``switch`` for ``key``'s slices, each
    step costing ``step`` seconds end to end (beyond the route: see ``rings.Sender``),
    through the GPU's NIC ``choice`` where it has several (:func:`~.nics.gpu_nic`)."""
    via = gpu_nic(comm.topology, comm.address_of(comm.rank), choice)
    return Sender(comm, switch, protocol, step, _tags(key)[0], via)


def downlink(comm: Comm, switch: int, key: tuple[int, int], count: int,
             downs: list[Sender]) -> Steps:
    """Receive ``count`` reduced slices of ``key`` from SHARP switch ``switch``, pass
    each on to ``downs`` as it comes; returns them in order."""
    return (yield from relay(comm, switch, _tags(key)[1], count, downs))


Piece = tuple[int, int, int]
"""(rank, start, stop): elements ``start:stop`` of that rank's block."""

Plan = list[dict[int, list[list[Piece]]]]
"""``plan[c][h]``: the chunks channel c moves for rail h, in order, each a list of pieces."""


def send_own(up: Sender, own: Buffer, chunks: list[list[Piece]], rank: int) -> Steps:
    """Send ``rank``'s pieces of ``chunks`` (cut from its buffer ``own``) through ``up``,
    then wait until all have arrived."""
    for pieces in chunks:
        for r, start, stop in pieces:
            if r == rank:
                yield from up.send(own[start:stop])
    yield from up.drain()


def rail_plan(sizes: dict[int, int], groups: list[list[int]], channels: int,
              chunk: int) -> Plan:
    """How NCCL's reduce_scatter and all_gather across nodes through SHARP cut the
    work (``railAll`` in ``src/device/reduce_scatter.h``): rail h's blocks (of ranks
    ``groups[j][h]``, ``sizes[rank]`` elements each), node after node, make one range,
    cut in chunks of ``chunk`` elements that the channels take in turn (chunk i to
    channel i mod ``channels``); a chunk may span the blocks of several nodes."""
    plan: Plan = [{} for _ in range(channels)]
    for h in range(len(groups[0])):
        chunks: list[list[Piece]] = []
        current: list[Piece] = []
        room = chunk
        for members in groups:
            r, start = members[h], 0
            while start < sizes[r]:
                take = min(room, sizes[r] - start)
                current.append((r, start, start + take))
                start, room = start + take, room - take
                if room == 0:
                    chunks.append(current)
                    current, room = [], chunk
        if current:
            chunks.append(current)
        for i, pieces in enumerate(chunks):
            plan[i % channels].setdefault(h, []).append(pieces)
    return plan


def gather(blocks: list[Buffer], pieces: list[Piece]) -> Buffer:
    """A chunk's data: ``blocks[rank][start:stop]`` of every piece, joined."""
    parts = [blocks[r][start:stop] for r, start, stop in pieces]
    return parts[0] if len(parts) == 1 else join(parts)


def cut(chunk: Buffer, pieces: list[Piece]) -> list[Buffer]:
    """``chunk`` cut into its pieces."""
    return split_counts(chunk, [stop - start for _, start, stop in pieces])


def rail_steps(chunks: dict[int, list[list[Piece]]]) -> list[tuple[int, int]]:
    """(rail, chunk) pairs of one channel in NCCL's order: its k-th chunk of every rail
    before its (k + 1)-th of any."""
    longest = max((len(c) for c in chunks.values()), default=0)
    return [(h, k) for k in range(longest) for h in sorted(chunks) if k < len(chunks[h])]


def _reduce_up(comm: Comm, children: list[int], tag: Hashable, op: ReduceOp) -> Steps:
    """One slice from every child, reduced."""
    total = yield comm.recv(children[0], tag=tag)
    for child in children[1:]:
        total = yield comm.reduce(total, (yield comm.recv(child, tag=tag)), op)
    return total


def _run_roles(comm: Comm, roles: list[list[Role]],
               play: Callable[[int, Role], Steps]) -> Steps:
    """Play every role of channel c (``roles[c]``) for every channel at once."""
    def channel(c: int) -> Steps:
        running = [comm.start(play(c, r)) for r in roles[c]]
        for done in running:
            yield done

    yield from run_channels(comm, len(roles), channel)
    return None


def switch_all_reduce(comm: Comm, op: ReduceOp, roles: list[list[Role]],
                      counts: list[dict[int, int]]) -> Steps:
    """A SHARP switch's side of every channel (``roles[c]``: its roles in the trees
    channel c uses; ``counts[c][local]``: the slices channel c moves for local index
    ``local``, absent where that channel does not use it). Each role has it reduce every
    slice over its children (the owners, or the leaves below it) and send the sum up to
    its parent, or, at the top of the tree, back down to the children; what comes down
    from the parent it sends on to its children, with one multicast."""

    def role(c: int, r: Role) -> Steps:
        local, children, parent = r.local, r.children, r.parent
        up, down = _tags((c, local))
        count = counts[c].get(local, 0)

        vias = r.down_vias()

        def descend(source: int) -> Steps:
            for _ in range(count):
                comm.multicast((yield comm.recv(source, tag=down)), children, tag=down,
                               ordered=True, via=vias)

        descending = None if parent is None else comm.start(descend(parent))
        for _ in range(count):
            total = yield from _reduce_up(comm, children, up, op)
            if parent is None:
                comm.multicast(total, children, tag=down, ordered=True, via=vias)
            else:
                comm.send(total, parent, tag=up, ordered=True)
        if descending is not None:
            yield descending

    yield from _run_roles(comm, roles, role)
    return None


def switch_reduce_scatter(comm: Comm, op: ReduceOp, roles: list[Role], plan: Plan) -> Steps:
    """A SHARP switch's side of every channel of a reduce-scatter (``plan``: see
    :func:`rail_plan`). Each role reduces every chunk of its rail over its children and
    sends the sum up to its parent, or, at the top of the tree, cuts it into its pieces
    and sends each down to the child that leads to the piece's owner; a piece that comes
    down from the parent it passes on the same way."""

    def role(c: int, r: Role) -> Steps:
        up, down = _tags((c, r.local))
        chunks = plan[c].get(r.local, [])

        def descend(source: int) -> Steps:
            for pieces in chunks:
                for owner, _, _ in pieces:
                    if owner in r.below:
                        comm.send((yield comm.recv(source, tag=down)), r.below[owner],
                                  tag=down, ordered=True, via=r.via(r.below[owner]))

        descending = None if r.parent is None else comm.start(descend(r.parent))
        for pieces in chunks:
            total = yield from _reduce_up(comm, r.children, up, op)
            if r.parent is not None:
                comm.send(total, r.parent, tag=up, ordered=True)
                continue
            for (owner, _, _), piece in zip(pieces, cut(total, pieces)):
                comm.send(piece, r.below[owner], tag=down, ordered=True,
                          via=r.via(r.below[owner]))
        if descending is not None:
            yield descending

    yield from _run_roles(comm, [roles] * len(plan), role)
    return None


def switch_all_gather(comm: Comm, roles: list[Role], plan: Plan) -> Steps:
    """A SHARP switch's side of every channel of an all-gather (``plan``: see
    :func:`rail_plan`). Each role sends every piece of an owner below it up to its
    parent, or, at the top of the tree, joins a chunk's pieces and multicasts the chunk
    down to its children, as it multicasts every chunk that comes down from the
    parent."""

    def role(c: int, r: Role) -> Steps:
        up, down = _tags((c, r.local))
        chunks = plan[c].get(r.local, [])
        if r.parent is None:
            for pieces in chunks:
                got = []
                for owner, _, _ in pieces:
                    got.append((yield comm.recv(r.below[owner], tag=up)))
                comm.multicast(join(got), r.children, tag=down, ordered=True,
                               via=r.down_vias())
            return
        parent = r.parent

        def ascend() -> Steps:
            for pieces in chunks:
                for owner, _, _ in pieces:
                    if owner in r.below:
                        comm.send((yield comm.recv(owner, tag=up)), parent, tag=up,
                                  ordered=True)

        ascending = comm.start(ascend())
        for _ in chunks:
            comm.multicast((yield comm.recv(parent, tag=down)), r.children, tag=down,
                           ordered=True, via=r.down_vias())
        yield ascending

    yield from _run_roles(comm, [roles] * len(plan), role)
    return None
