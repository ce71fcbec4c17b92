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

NVLS reduce_scatter and all_gather across nodes (``nvls_sharp.py``) use the plugin's
reduce-scatter and all-gather instead (``ireducescatter``, ``iallgather``): for a
reduce-scatter the switches reduce each slice over the nodes as for an all-reduce, but
send the sum down to the one owner whose block it is; for an all-gather they reduce
nothing, and every owner's slice goes up and is multicast down to every owner.

Traffic is keyed by (channel, local index): one switch may serve several blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import NamedTuple

from simcoll.algorithms.nccl.channels import run_channels
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender, relay
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["Role", "uplink", "downlink", "rail_order", "rail_owners", "switch_all_reduce",
           "switch_reduce_scatter", "switch_all_gather"]


class Role(NamedTuple):
    """What one SHARP switch does in the tree of one local index.

    Attributes:
        local: the local index (rail) whose owners the tree joins.
        children: the owners below it (a leaf), or the leaves below it (the root).
        parent: the switch above it, None at the top of the tree.
        below: the child that leads to each owner below it (the owner itself at a leaf).
    """

    local: int
    children: list[int]
    parent: int | None
    below: dict[int, int]


def _tags(key: tuple[int, int]) -> tuple[Hashable, Hashable]:
    """The tags of the SHARP traffic of ``key`` = (channel, local index), up and down."""
    return (*key, "sharp up"), (*key, "sharp down")


def uplink(comm: Comm, switch: int, step: float, protocol: Protocol,
           key: tuple[int, int]) -> Sender:
    """This GPU's connection up to SHARP switch ``switch`` for ``key``'s slices, each
    step costing ``step`` seconds end to end (beyond the route: see ``rings.Sender``)."""
    return Sender(comm, switch, protocol, step, _tags(key)[0])


def downlink(comm: Comm, switch: int, key: tuple[int, int], count: int,
             downs: list[Sender]) -> Steps:
    """Receive ``count`` reduced slices of ``key`` from SHARP switch ``switch``, pass
    each on to ``downs`` as it comes; returns them in order."""
    return (yield from relay(comm, switch, _tags(key)[1], count, downs))


def rail_order(counts: dict[int, int], groups: list[list[int]]) -> list[tuple[int, int]]:
    """(rank, slice) pairs for blocks of ``counts[rank]`` slices: slice k of every block
    before slice k + 1 of any; within a slice, node by node and, in each node, rail by
    rail (``groups[j][h]`` is rail h's GPU on node j)."""
    longest = max(counts.values())
    return [(members[h], k) for k in range(longest) for members in groups
            for h in range(len(members)) if k < counts[members[h]]]


def rail_owners(counts: dict[int, int], groups: list[list[int]]) -> dict[int, list[int]]:
    """For each rail, the owner of every slice its heads send to SHARP (a reduce_scatter)
    or receive from it (an all_gather), in :func:`rail_order`: rank r's block is
    ``counts[r]`` slices."""
    local = {r: h for members in groups for h, r in enumerate(members)}
    order = rail_order(counts, groups)
    owners: dict[int, list[int]] = {}
    for r, _ in order:
        owners.setdefault(local[r], []).append(r)
    return owners


def _reduce_up(comm: Comm, children: list[int], tag: Hashable, op: ReduceOp) -> Steps:
    """One slice from every child, reduced."""
    total = yield comm.recv(children[0], tag=tag)
    for child in children[1:]:
        total = yield comm.reduce(total, (yield comm.recv(child, tag=tag)), op)
    return total


def _run_roles(comm: Comm, roles: list[Role], channels: int,
               play: Callable[[int, Role], Steps]) -> Steps:
    def channel(c: int) -> Steps:
        running = [comm.start(play(c, r)) for r in roles]
        for done in running:
            yield done

    yield from run_channels(comm, channels, channel)
    return None


def switch_all_reduce(comm: Comm, op: ReduceOp, roles: list[Role],
                      counts: list[dict[int, int]]) -> Steps:
    """A SHARP switch's side of every channel (``counts[c][local]``: the slices channel c
    moves for local index ``local``; absent where that channel does not use it). Each
    role has it reduce every slice over its children (the owners, or the leaves below it)
    and send the sum up to its parent, or, at the top of the tree, back down to the
    children; what comes down from the parent it sends on to its children, with one
    multicast."""

    def role(c: int, r: Role) -> Steps:
        local, children, parent = r.local, r.children, r.parent
        up, down = _tags((c, local))
        count = counts[c].get(local, 0)

        def descend(source: int) -> Steps:
            for _ in range(count):
                comm.multicast((yield comm.recv(source, tag=down)), children, tag=down,
                               ordered=True)

        descending = None if parent is None else comm.start(descend(parent))
        for _ in range(count):
            total = yield from _reduce_up(comm, children, up, op)
            if parent is None:
                comm.multicast(total, children, tag=down, ordered=True)
            else:
                comm.send(total, parent, tag=up, ordered=True)
        if descending is not None:
            yield descending

    yield from _run_roles(comm, roles, len(counts), role)
    return None


def switch_reduce_scatter(comm: Comm, op: ReduceOp, roles: list[Role],
                          owners: list[dict[int, list[int]]]) -> Steps:
    """A SHARP switch's side of every channel of a reduce-scatter: ``owners[c][local]``
    lists, slice by slice as the owners send them, the owner whose block each slice is.
    Each role reduces every slice over its children and sends the sum up to its parent,
    or, at the top of the tree, down to the one child that leads to the slice's owner; a
    slice that comes down from the parent it passes on the same way."""

    def role(c: int, r: Role) -> Steps:
        up, down = _tags((c, r.local))
        order = owners[c].get(r.local, [])

        def descend(source: int) -> Steps:
            for owner in order:
                if owner in r.below:
                    comm.send((yield comm.recv(source, tag=down)), r.below[owner], tag=down,
                              ordered=True)

        descending = None if r.parent is None else comm.start(descend(r.parent))
        for owner in order:
            total = yield from _reduce_up(comm, r.children, up, op)
            if r.parent is None:
                comm.send(total, r.below[owner], tag=down, ordered=True)
            else:
                comm.send(total, r.parent, tag=up, ordered=True)
        if descending is not None:
            yield descending

    yield from _run_roles(comm, roles, len(owners), role)
    return None


def switch_all_gather(comm: Comm, roles: list[Role],
                      owners: list[dict[int, list[int]]]) -> Steps:
    """A SHARP switch's side of every channel of an all-gather: ``owners[c][local]``
    lists, slice by slice in the order every owner receives them, the owner each slice
    comes from. Each role sends every slice of an owner below it up to its parent, or,
    at the top of the tree, multicasts it down to its children, as it multicasts every
    slice that comes down from the parent."""

    def role(c: int, r: Role) -> Steps:
        up, down = _tags((c, r.local))
        order = owners[c].get(r.local, [])
        if r.parent is None:
            for owner in order:
                comm.multicast((yield comm.recv(r.below[owner], tag=up)), r.children,
                               tag=down, ordered=True)
            return
        parent = r.parent

        def ascend() -> Steps:
            for owner in order:
                if owner in r.below:
                    comm.send((yield comm.recv(owner, tag=up)), parent, tag=up, ordered=True)

        ascending = comm.start(ascend())
        for _ in order:
            comm.multicast((yield comm.recv(parent, tag=down)), r.children, tag=down,
                           ordered=True)
        yield ascending

    yield from _run_roles(comm, roles, len(owners), role)
    return None
