"""Cost models of the Bruck algorithms (``simcoll.algorithms.bruck``).

Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005. Both run ceil(log2 p) steps in
which every rank sends one message and receives one; when all ranks' messages in a step
have the same size the ranks stay in lockstep and the sums below are exact.
"""

from __future__ import annotations

import numpy as np

from simcoll.cost import Traffic, cost_model
from simcoll.cost.direct import divisible, traffic_of

__all__ = ["bruck_all_gather", "bruck_all_to_all", "slots_with_bit"]


def _distances(p: int) -> list[int]:
    """1, 2, 4, ... below p: one per step."""
    return [1 << k for k in range(max(p - 1, 0).bit_length())]


def slots_with_bit(p: int, dist: int) -> int:
    """How many of 0..p-1 have the bit ``dist`` (a power of two) set."""
    return (p // (2 * dist)) * dist + max(0, p % (2 * dist) - dist)


def _all_gather_traffic(p: int, nbytes: int, itemsize: int, **params) -> Traffic:
    volume = np.full(p, (p - 1) * nbytes)
    return traffic_of(volume, volume)


def _all_to_all_traffic(p: int, nbytes: int, itemsize: int, **params) -> Traffic:
    """Exact bytes of the index algorithm for array_split blocks.

    In the step at distance d, rank t forwards slot i (bit d set) to t + d; that block is
    bound for rank t + (i with the bits below d cleared), so its size is that rank's
    block. The first ``big`` ranks' blocks hold one extra element; for each rank the
    number of forwarded blocks bound for them is counted with a circular difference array.
    """
    q, big = divmod(nbytes // itemsize, p)
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    for dist in _distances(p):
        slots = np.arange(dist, p)
        slots = slots[(slots & dist) != 0]
        step = np.full(p, len(slots) * q, dtype=np.int64)
        if big:
            starts = (-(slots & -dist)) % p
            diff = np.zeros(2 * p + 1, dtype=np.int64)
            np.add.at(diff, starts, 1)
            np.add.at(diff, starts + big, -1)
            inside = np.cumsum(diff)[:2 * p]
            step += inside[:p] + inside[p:]
        sent += step * itemsize
        received += np.roll(step, dist) * itemsize
    return traffic_of(sent, received)


@cost_model("all_gather", "bruck", traffic=_all_gather_traffic)
def bruck_all_gather(p, nbytes, alpha, beta, gamma, **params):
    """ceil(log2 p) alpha + (p-1) n beta; exact for every size (all messages of a step
    have the same size)."""
    return len(_distances(p)) * alpha + (p - 1) * nbytes * beta


@cost_model("all_to_all", "bruck", traffic=_all_to_all_traffic, exact=divisible)
def bruck_all_to_all(p, nbytes, alpha, beta, gamma, **params):
    """Sum over steps at distance d of alpha + c_d n/p beta, c_d the slots with bit d set.

    Exact when count is divisible by p; with uneven blocks a step's messages differ in
    size between ranks and n/p is an estimate of the block size.
    """
    return sum(alpha + slots_with_bit(p, d) * nbytes / p * beta for d in _distances(p))
