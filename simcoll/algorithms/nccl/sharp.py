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

Traffic is keyed by (channel, local index): one switch may serve several blocks.
"""

from __future__ import annotations

from collections.abc import Hashable

from simcoll.algorithms.nccl.channels import run_channels
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender, relay
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["uplink", "downlink", "switch_all_reduce"]


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


def switch_all_reduce(comm: Comm, op: ReduceOp, roles: list[tuple[int, list[int], int | None]],
                      counts: list[dict[int, int]]) -> Steps:
    """A SHARP switch's side of every channel (``counts[c][local]``: the slices channel c
    moves for local index ``local``; absent where that channel does not use it). Each
    role ``(local, children, parent)`` has it reduce every slice over ``children`` (the
    owners, or the leaves below it) and send the sum up to ``parent``, or, at the top of
    the tree, back down to the children; what comes down from ``parent`` it sends on to
    its children, with one multicast."""

    def role(c: int, local: int, children: list[int], parent: int | None) -> Steps:
        up, down = _tags((c, local))
        count = counts[c].get(local, 0)

        def descend(source: int) -> Steps:
            for _ in range(count):
                comm.multicast((yield comm.recv(source, tag=down)), children, tag=down)

        descending = None if parent is None else comm.start(descend(parent))
        for _ in range(count):
            total = yield comm.recv(children[0], tag=up)
            for child in children[1:]:
                total = yield comm.reduce(total, (yield comm.recv(child, tag=up)), op)
            if parent is None:
                comm.multicast(total, children, tag=down)
            else:
                comm.send(total, parent, tag=up)
        if descending is not None:
            yield descending

    def channel(c: int) -> Steps:
        running = [comm.start(role(c, *r)) for r in roles]
        for done in running:
            yield done

    yield from run_channels(comm, len(counts), channel)
    return None
