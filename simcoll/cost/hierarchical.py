"""Cost model of the hierarchical all-reduce (``simcoll.algorithms.hierarchical``).

The machine has N nodes of G GPUs (p = N G, ranks numbered node by node). A message inside
a node costs alpha + m beta; between nodes alpha_inter + m beta_inter, where beta_inter is
the time per byte of one GPU's cross-node flow while all G GPUs of its node send at once
(on ``cluster``, whose nodes have one uplink each: G / inter_bandwidth, unless a GPU's own
link is slower). With ``nodes=1`` (the reference network) the algorithm is a ring
reduce-scatter followed by a ring all-gather: the ring all-reduce's time.

Derivation (ours), for a count divisible by G N and the ring across nodes: the intra-node
ring reduce-scatter takes G-1 steps of alpha + n/G beta + n/G gamma (every GPU's link
carries one flow each way); the G cross-node ring all-reduces of n/G bytes run in lockstep,
2(N-1) steps of alpha_inter + n/(G N) beta_inter plus (N-1)/N n/G gamma of reductions; the
intra-node all-gather takes G-1 steps of alpha + n/G beta.
"""

from __future__ import annotations

import numpy as np

from simcoll.cost import Traffic, cost_model, traffic

__all__ = ["hierarchical_time"]


def _blocks(parts: int, count: int) -> list[int]:
    q, extra = divmod(count, parts)
    return [q + (i < extra) for i in range(parts)]


def _traffic(p: int, nbytes: int, itemsize: int, *, inter: str = "ring",
             nodes: int = 1) -> Traffic:
    """Ring reduce-scatter and all-gather in each node, ``inter`` across nodes."""
    g = p // nodes
    blocks = [b * itemsize for b in _blocks(g, nbytes // itemsize)]
    total = sum(blocks)
    sent, received = np.zeros(p, np.int64), np.zeros(p, np.int64)
    for rank in range(p):
        i = rank % g
        # reduce-scatter: all blocks but i out, all but i-1 in; all-gather of the
        # reduced blocks: all but i+1 out, all but i in.
        sent[rank] = 2 * total - blocks[i] - blocks[(i + 1) % g]
        received[rank] = 2 * total - blocks[(i - 1) % g] - blocks[i]
        if nodes > 1:
            across = traffic("all_reduce", inter, p=nodes, nbytes=blocks[i], itemsize=itemsize)
            sent[rank] += across.sent[rank // g]
            received[rank] += across.received[rank // g]
    empty = np.zeros(0, np.int64)
    return Traffic(sent, received, empty, empty)


def _exact(p: int, nbytes: int, itemsize: int, *, inter: str = "ring",
           nodes: int = 1) -> bool:
    return (nodes == 1 or inter == "ring") and (nbytes // itemsize) % p == 0


def hierarchical_time(nodes: int, gpus_per_node: int, nbytes: int, *, alpha: float,
                      beta: float, alpha_inter: float, beta_inter: float,
                      gamma: float = 0.0) -> float:
    """Seconds of the hierarchical all-reduce with the ring across nodes (see module)."""
    g, n = gpus_per_node, nodes
    m = nbytes
    intra = 2 * (g - 1) * (alpha + m / g * beta) + (g - 1) / g * m * gamma
    across = 2 * (n - 1) * (alpha_inter + m / (g * n) * beta_inter) + \
        (n - 1) / n * m / g * gamma
    return intra + across


@cost_model("all_reduce", "hierarchical", traffic=_traffic, exact=_exact)
def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
          inter: str = "ring", nodes: int = 1, alpha_inter: float | None = None,
          beta_inter: float | None = None) -> float:
    """:func:`hierarchical_time` on ``nodes`` nodes (1 on the reference network)."""
    return hierarchical_time(nodes, p // nodes, nbytes, alpha=alpha, beta=beta,
                             alpha_inter=alpha if alpha_inter is None else alpha_inter,
                             beta_inter=beta if beta_inter is None else beta_inter,
                             gamma=gamma)
