"""Cost models of the direct algorithms (``simcoll.algorithms.direct``).

Derived here for the flow model on the reference network: a round in which every rank
sends k messages at once and receives k messages at once shares each link max-min fairly
among them, so a round of k equal messages of m bytes takes alpha + k m beta (one
latency, not k). With uneven blocks (count not divisible by p) every receiver still
drains its p-1 equal blocks at 1/(p-1) of its link, but ``time`` only knows bytes, not
elements, so it uses m = n/p there and is an estimate.
"""

from __future__ import annotations

import numpy as np

from simcoll.cost import Traffic, cost_model

__all__ = ["block_bytes", "traffic_of", "divisible", "scatter_traffic", "direct_all_reduce",
           "direct_reduce_scatter", "direct_all_gather", "direct_all_to_all"]


def block_bytes(p: int, nbytes: int, itemsize: int) -> np.ndarray:
    """Bytes of each of the p blocks of an ``nbytes`` buffer cut as ``np.array_split``."""
    q, r = divmod(nbytes // itemsize, p)
    return (q + (np.arange(p) < r)).astype(np.int64) * itemsize


def traffic_of(sent: np.ndarray, received: np.ndarray) -> Traffic:
    """A Traffic for GPU ranks only (no server hosts)."""
    empty = np.zeros(0, dtype=np.int64)
    return Traffic(np.asarray(sent, dtype=np.int64), np.asarray(received, dtype=np.int64),
                   empty, empty)


def divisible(p: int, nbytes: int, itemsize: int, **params) -> bool:
    """Whether the p blocks are equal (element count divisible by p)."""
    return (nbytes // itemsize) % p == 0


def scatter_traffic(p: int, nbytes: int, itemsize: int, **params) -> Traffic:
    """Rank r sends every block but its own and receives p-1 copies of its own block."""
    blocks = block_bytes(p, nbytes, itemsize)
    return traffic_of(nbytes - blocks, (p - 1) * blocks)


def _all_reduce_traffic(p: int, nbytes: int, itemsize: int, **params) -> Traffic:
    blocks = block_bytes(p, nbytes, itemsize)
    volume = nbytes - blocks + (p - 1) * blocks
    return traffic_of(volume, volume)


def _all_gather_traffic(p: int, nbytes: int, itemsize: int, **params) -> Traffic:
    volume = np.full(p, (p - 1) * nbytes)
    return traffic_of(volume, volume)


@cost_model("all_reduce", "direct", traffic=_all_reduce_traffic, exact=divisible)
def direct_all_reduce(p, nbytes, alpha, beta, gamma, **params):
    """2 alpha + 2 (p-1)/p n beta + (p-1)/p n gamma for p > 1, else 0.

    Round 1 (direct reduce-scatter) ends at alpha + (p-1) m (beta + gamma); all ranks
    start round 2 together and its p-1 sends of m bytes take alpha + (p-1) m beta.
    Exact when count is divisible by p; otherwise the ranks with larger blocks finish
    later and rounds may overlap, so this is an estimate.
    """
    if p == 1:
        return 0.0
    share = (p - 1) / p * nbytes
    return 2 * alpha + 2 * share * beta + share * gamma


@cost_model("reduce_scatter", "direct", traffic=scatter_traffic, exact=divisible)
def direct_reduce_scatter(p, nbytes, alpha, beta, gamma, **params):
    """alpha + (p-1)/p n (beta + gamma) for p > 1, else 0.

    All blocks arrive at alpha + (p-1) m beta, then p-1 reductions of m bytes follow.
    Exact when count is divisible by p (else m is the largest block, which needs the
    element size).
    """
    if p == 1:
        return 0.0
    return alpha + (p - 1) / p * nbytes * (beta + gamma)


@cost_model("all_gather", "direct", traffic=_all_gather_traffic)
def direct_all_gather(p, nbytes, alpha, beta, gamma, **params):
    """alpha + (p-1) n beta for p > 1, else 0; exact for every size."""
    if p == 1:
        return 0.0
    return alpha + (p - 1) * nbytes * beta


@cost_model("all_to_all", "direct", traffic=scatter_traffic, exact=divisible)
def direct_all_to_all(p, nbytes, alpha, beta, gamma, **params):
    """alpha + (p-1)/p n beta for p > 1, else 0.

    Exact when count is divisible by p (else n/p stands for the largest block).
    """
    if p == 1:
        return 0.0
    return alpha + (p - 1) / p * nbytes * beta
