"""Hierarchical all-reduce: one phase per level of the machine, as NCCL and ASTRA-sim do.

Inside each node the GPUs run a ring reduce-scatter, so GPU i of the node holds block i of
the node's sum; the GPUs with the same local index i across the nodes then all-reduce
their block (with any flat all_reduce algorithm, ``inter=``); finally a ring all-gather
inside each node rebuilds the whole vector. Only 1/G of the buffer crosses the slow
inter-node network per GPU, and the G cross-node all-reduces run in parallel.

The algorithm learns the node of each rank from ``comm.node_of`` (the topology's
``node`` of each GPU); it never looks at links or bandwidths.

Cost model: the machine has N nodes of G GPUs (p = N G, ranks numbered node by node, as
``cluster`` numbers them, whatever the nodes' ids: the traffic model puts rank r on the
(r div G)-th node across, and the run orders nodes by their lowest rank). A
message inside a node costs alpha + m beta; between nodes alpha_inter + m beta_inter,
where beta_inter is the time per byte of one GPU's cross-node flow while all G GPUs of
its node send at once (on ``cluster``, whose nodes have one uplink each:
G / inter_bandwidth, unless a GPU's own link is slower). With ``nodes=1`` (the reference
network) the algorithm is a ring reduce-scatter followed by a ring all-gather: the ring
all-reduce's time. Derivation (ours), for a count divisible by G N: the intra-node ring
reduce-scatter takes G-1 steps of alpha + n/G beta + n/G gamma (every GPU's link carries
one flow each way); the G cross-node all-reduces of n/G bytes run in lockstep, so they
take the ``inter`` algorithm's own time T_inter(N, n/G) on N ranks with alpha_inter,
beta_inter and gamma; the intra-node all-gather takes G-1 steps of alpha + n/G beta:

    T = 2 (G-1)(alpha + n/G beta) + (G-1)/G n gamma + T_inter(N, n/G)

With the ring across nodes T_inter(N, m) = 2 (N-1)(alpha_inter + m/N beta_inter)
+ (N-1)/N m gamma (:func:`hierarchical_time`). ``is_exact`` says so for a count divisible
by p where the ``inter`` model is exact for N ranks and n/G bytes (some other counts are
exact too, one GPU per node among them); elsewhere the time is an estimate (the largest block,
ceil(count/G) elements, stands for n/G where G does not divide the count).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simcoll import cost
from simcoll.algorithms import ring_outputs, ring_timelines
from simcoll.algorithms.params import Choice, Int, Optional, Real
from simcoll.algorithms.registry import get_algorithm, register
from simcoll.algorithms.ring import ring_all_gather, ring_reduce_scatter
from simcoll.buffers import Buffer, block_bytes
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic, largest_block
from simcoll.errors import InvalidInputError
from simcoll.lone_flows import Lanes, NotLone
from simcoll.ops import ReduceOp
from simcoll.topology.graph import node_order
from simcoll.typing import BufferProgram

__all__ = ["hierarchical_all_reduce", "hierarchical_time", "INTER_ALGORITHMS"]

INTER_ALGORITHMS = ("ring", "recursive_doubling", "rabenseifner", "direct", "tree",
                    "double_binary_tree", "naive")
"""Flat all_reduce algorithms the cross-node phase can use."""

PARAMS = {"inter": Choice("ring", INTER_ALGORITHMS,
                          doc="flat all_reduce algorithm across nodes")}
MACHINE = {
    "nodes": Int(1, minimum=1, doc="nodes N of p / N GPUs each"),
    "alpha_inter": Optional(Real(minimum=0.0), doc="seconds per message between nodes; "
                                                   "default alpha"),
    "beta_inter": Optional(Real(minimum=0.0), doc="seconds per byte between nodes; "
                                                  "default beta"),
}


def _nodes(node_of: Callable[[int], int], size: int) -> list[list[int]]:
    """Ranks of each node, nodes in order of their lowest rank, ranks in rank order."""
    return node_order([node_of(rank) for rank in range(size)])


def _validate(p: int, count: int, hosts: int, *, nodes: tuple[int, ...]) -> None:
    """Refuse nodes of unequal size."""
    sizes = [len(m) for m in _nodes(lambda r: nodes[r], p)]
    if len(set(sizes)) > 1:
        raise InvalidInputError(
            f"hierarchical all_reduce needs the same number of GPUs on every node, got "
            f"{sizes} GPUs on the nodes, in order of their lowest rank; give every node as "
            f"many GPUs, or use a flat algorithm")


def _gpus_per_node(p: int, nodes: int) -> int:
    if p % nodes:
        raise InvalidInputError(f"nodes={nodes} does not divide p={p}; the model needs "
                                f"equal nodes")
    return p // nodes


def _traffic(p: int, nbytes: int, itemsize: int, *, inter: str, nodes: int) -> Traffic:
    """Ring reduce-scatter and all-gather in each node, ``inter`` across nodes."""
    g = _gpus_per_node(p, nodes)
    blocks = block_bytes(nbytes, g, itemsize)
    total = int(blocks.sum())
    sent, received = np.zeros(p, np.int64), np.zeros(p, np.int64)
    inter_traffic: dict[int, Traffic] = {}   # by block size: at most two of them
    for rank in range(p):
        i = rank % g
        # reduce-scatter: all blocks but i out, all but i-1 in; all-gather of the
        # reduced blocks: all but i+1 out, all but i in.
        sent[rank] = 2 * total - blocks[i] - blocks[(i + 1) % g]
        received[rank] = 2 * total - blocks[(i - 1) % g] - blocks[i]
        if nodes > 1:
            block = int(blocks[i])
            if block not in inter_traffic:
                inter_traffic[block] = cost.traffic("all_reduce", inter, p=nodes,
                                                    nbytes=block, itemsize=itemsize)
            sent[rank] += inter_traffic[block].sent[rank // g]
            received[rank] += inter_traffic[block].received[rank // g]
    return gpu_traffic(sent, received)


def _exact(p: int, nbytes: int, itemsize: int, *, inter: str, nodes: int) -> bool:
    """Exact for a count divisible by p where the ``inter`` model is exact on N ranks and
    n/G bytes (checked against ``cluster`` for every inter algorithm)."""
    g = _gpus_per_node(p, nodes)   # refuses nodes that do not divide p, at every size
    if (nbytes // itemsize) % p:
        return False
    return nodes == 1 or cost.is_exact("all_reduce", inter, p=nodes, nbytes=nbytes // g,
                                       itemsize=itemsize)


def _intra_time(g: int, block: float, alpha: float, beta: float, gamma: float) -> float:
    """The two ring phases inside a node of G GPUs, each step moving a ``block`` of bytes
    (n/G; the largest block where G does not divide the count, as the ring's model):
    2 (G-1)(alpha + block beta) + (G-1) block gamma."""
    return 2 * (g - 1) * (alpha + block * beta) + (g - 1) * block * gamma


def hierarchical_time(nodes: int, gpus_per_node: int, nbytes: int, *, alpha: float,
                      beta: float, alpha_inter: float, beta_inter: float,
                      gamma: float = 0.0) -> float:
    """Seconds of the hierarchical all-reduce with the ring across nodes (see module):
    the intra-node phases plus 2 (N-1)(alpha' + n/(G N) beta') + (N-1)/N n/G gamma."""
    g, n = gpus_per_node, nodes
    across = 2 * (n - 1) * (alpha_inter + nbytes / (g * n) * beta_inter) + \
        (n - 1) / n * nbytes / g * gamma
    return _intra_time(g, nbytes / g, alpha, beta, gamma) + across


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *, inter: str,
          nodes: int, alpha_inter: float | None, beta_inter: float | None,
          itemsize: int) -> float:
    """The intra-node phases and the ``inter`` all-reduce's own model on N ranks, both on
    the largest block, ceil(count/G) elements, the latter with alpha', beta' (see
    module)."""
    g = _gpus_per_node(p, nodes)
    block = largest_block(nbytes, g, itemsize)
    across = 0.0 if nodes == 1 else cost.predict(
        "all_reduce", inter, p=nodes, nbytes=block,
        alpha=alpha if alpha_inter is None else alpha_inter,
        beta=beta if beta_inter is None else beta_inter, gamma=gamma, itemsize=itemsize)
    return _intra_time(g, block, alpha, beta, gamma) + across


def _timeline(lanes: Lanes, count: int, *, inter: str) -> None:
    """On one node, the ring reduce-scatter and all-gather over arrays (the cross-node
    all-reduce of one rank sends nothing and reduces nothing)."""
    if len(set(lanes.nodes)) > 1:
        raise NotLone("the cross-node all-reduces share the nodes' links")
    ring_timelines.reduce_scatter_then_all_gather(lanes, count)


def _outputs(inputs: list[np.ndarray], *, op: ReduceOp, inter: str) -> list[np.ndarray]:
    """What the programs return on one node (see :func:`_timeline`)."""
    return ring_outputs.reduce_scatter_then_all_gather(inputs, op=op)


@register("all_reduce", "hierarchical", params=PARAMS, validate=_validate,
          cost=CostModel(time=_time, traffic=_traffic, exact=_exact, machine=MACHINE),
          timeline=_timeline, outputs=_outputs)
def hierarchical_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp, inter: str) -> BufferProgram:
    """Hierarchical all-reduce: ring reduce-scatter in each node, all-reduce across nodes
    of each block, ring all-gather in each node.

    Cost on a two-level machine of N nodes of G GPUs (derived here), with alpha_1, beta_1
    a message inside a node, alpha_2, beta_2 one between nodes, and the G cross-node
    all-reduces running at once (their bandwidth split as the network shares it), for
    n divisible by G N: 2 (G-1)(alpha_1 + n/G beta_1) + (G-1)/G n gamma + T_inter, the
    ``inter`` algorithm's time on N ranks and n/G bytes with alpha_2, beta_2 (see the
    module). With the ring across nodes T_inter = 2 (N-1) alpha_2 + 2 (N-1)/N n beta_2'
    + (N-1)/(N G) n gamma, where beta_2' is the time per byte of one node's inter-node
    traffic (on ``cluster``, one uplink shared by the G GPUs: beta_2' =
    1 / inter_bandwidth), which the cost model's ``beta_inter`` counts per GPU's flow:
    beta_inter = G beta_2' (see the module). On a single node it is the ring all-reduce:
    2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma. Each rank sends
    2 (G-1)/G n bytes inside its node plus what ``inter`` sends of n/G bytes on N ranks
    (ring: 2 (N-1)/N n/G) for sizes that divide evenly.
    """
    local, cross = _groups(comm)
    block = yield from ring_reduce_scatter(local, x, op=op, chunks=1)
    block = yield from get_algorithm("all_reduce", inter).program(cross, block, op=op)
    return (yield from ring_all_gather(local, block, chunks=1))


def _groups(comm: Comm) -> tuple[Comm, Comm]:
    """This rank's node (local group) and the ranks of its local index on every node."""
    nodes = _nodes(comm.node_of, comm.size)
    mine = next(m for m in nodes if comm.rank in m)
    local = comm.group(mine)
    return local, comm.group([m[local.rank] for m in nodes])
