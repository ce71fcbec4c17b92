"""Hierarchical all-reduce: one phase per level of the machine, as NCCL and ASTRA-sim do.

Inside each node the GPUs run a ring reduce-scatter, so GPU i of the node holds block i of
the node's sum; the GPUs with the same local index i across the nodes then all-reduce
their block (with any flat all_reduce algorithm, ``inter=``); finally a ring all-gather
inside each node rebuilds the whole vector. Only 1/G of the buffer crosses the slow
inter-node network per GPU, and the G cross-node all-reduces run in parallel.

The algorithm learns the node of each rank from ``comm.node_of`` (the topology's
``node`` of each GPU); it never looks at links or bandwidths.
"""

from __future__ import annotations

from collections import defaultdict

from simcoll.algorithms.registry import get_algorithm, register
from simcoll.algorithms.ring import ring_all_gather, ring_reduce_scatter
from simcoll.errors import InvalidInputError, UnknownAlgorithmError
from simcoll.ops import ReduceOp

__all__ = ["hierarchical_all_reduce", "INTER_ALGORITHMS"]

INTER_ALGORITHMS = ("ring", "recursive_doubling", "rabenseifner", "direct", "tree",
                    "double_binary_tree", "naive")
"""Flat all_reduce algorithms the cross-node phase can use."""


def _nodes(node_of, size: int) -> list[list[int]]:
    """Ranks of each node, nodes in order of their id, ranks in rank order."""
    members: dict[int, list[int]] = defaultdict(list)
    for rank in range(size):
        members[node_of(rank)].append(rank)
    return [members[node] for node in sorted(members)]


def validate(p, count, hosts, *, inter="ring", nodes=()):
    """Refuse nodes of unequal size and unknown cross-node algorithms."""
    if inter not in INTER_ALGORITHMS:
        raise InvalidInputError(f"inter={inter!r} is not accepted; use one of "
                                f"{', '.join(INTER_ALGORITHMS)}")
    sizes = sorted({len(m) for m in _nodes(lambda r: nodes[r], p)})
    if len(sizes) > 1:
        raise InvalidInputError(
            f"hierarchical all_reduce needs the same number of GPUs on every node, got "
            f"{sizes}; give every node as many GPUs, or use a flat algorithm")


@register("all_reduce", "hierarchical", validate=validate)
def hierarchical_all_reduce(comm, x, *, op=ReduceOp.SUM, inter="ring"):
    """Hierarchical all-reduce: ring reduce-scatter in each node, all-reduce across nodes
    of each block, ring all-gather in each node.

    Cost on a two-level machine of N nodes of G GPUs (derived here), with alpha_1, beta_1
    a message inside a node, alpha_2, beta_2 one between nodes, and the G cross-node
    all-reduces running at once (their bandwidth split as the network shares it), for
    n divisible by G N and the ring across nodes:
    2 (G-1)(alpha_1 + n/G beta_1) + 2 (N-1) alpha_2 + 2 (N-1)/N n beta_2'
    + ((G-1)/G + (N-1)/(N G)) n gamma, where beta_2' is the time per byte of one node's
    inter-node traffic (on ``cluster``, one uplink shared by the G GPUs: beta_2' =
    1 / inter_bandwidth). On a single node it is the ring all-reduce:
    2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma. Each rank sends
    2 (G-1)/G n + 2 (N-1)/N n/G bytes for sizes that divide evenly.

    Args:
        inter: the flat all_reduce algorithm used across nodes (default "ring").

    Raises:
        UnknownAlgorithmError: ``inter`` is not registered.
    """
    nodes = _nodes(comm.node_of, comm.size)
    mine = next(m for m in nodes if comm.rank in m)
    local = comm.group(mine)
    index = local.rank
    cross = comm.group([m[index] for m in nodes])
    try:
        across = get_algorithm("all_reduce", inter).fn
    except UnknownAlgorithmError as exc:
        raise InvalidInputError(str(exc)) from None
    block = yield from ring_reduce_scatter(local, x, op=op)
    block = yield from across(cross, block, op=op)
    return (yield from ring_all_gather(local, block))
