"""Cost models of the recursive doubling / halving family (simcoll.algorithms.recursive).

Times are for the single-port alpha-beta reference network; n is each rank's input in
bytes, L = log2 p for p a power of two. For other p, p' is the largest power of two
<= p, rem = p - p' and L = log2 p' (MPICH's fold, see the algorithms' module); those
times are estimates that ignore link sharing: the ranks that skip the fold run ahead and
their messages share links with late ones, so the simulation on the reference network
is slower, by about 5-15 % for p < 16 and up to about 40 % for p near 1000 with large
buffers. Traffic is exact for every p and size: it follows each algorithm's schedule
with blocks cut by elements as np.array_split does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from simcoll.cost import Traffic, cost_model

__all__ = ["recursive_doubling_all_reduce", "rabenseifner_all_reduce",
           "recursive_halving_reduce_scatter", "recursive_doubling_all_gather",
           "rabenseifner_reduce"]

Offsets = Callable[[int], int]


def _pow2_split(p: int) -> tuple[int, int]:
    p2 = 1 << (p.bit_length() - 1)
    return p2, p - p2


def _is_pow2(p: int) -> bool:
    return p & (p - 1) == 0


def _offset(count: int, parts: int, i: int) -> int:
    q, r = divmod(count, parts)
    return i * q + min(i, r)


def _real(new: int, rem: int) -> int:
    return 2 * new if new < rem else new + rem


def _group(offset: Offsets, i: int, size: int) -> int:
    """Elements in the aligned group of ``size`` blocks that holds block ``i``."""
    lo = i & ~(size - 1)
    return offset(lo + size) - offset(lo)


def _sizes(p: int) -> Iterator[int]:
    """Distances 1, 2, 4, ... below p."""
    d = 1
    while d < p:
        yield d
        d *= 2


def _traffic(sent: np.ndarray, received: np.ndarray, itemsize: int) -> Traffic:
    empty = np.zeros(0, dtype=np.int64)
    return Traffic(sent * itemsize, received * itemsize, empty, empty)


def _halving_elems(p2: int, offset: Offsets, new: int) -> tuple[int, int]:
    """(sent, received) elements of survivor ``new`` in the recursive halving."""
    total = offset(p2) - offset(0)
    own = offset(new + 1) - offset(new)
    return total - own, sum(_group(offset, new, d) for d in _sizes(p2))


def _fold(p: int, count: int, p2: int, rem: int) -> tuple[np.ndarray, np.ndarray]:
    """Elements moved by the fold: odd ranks 2i+1 < 2 rem send the whole buffer to 2i."""
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    sent[1:2 * rem:2] = count
    received[0:2 * rem:2] = count
    return sent, received


def _exact_pow2(p, nbytes, itemsize, **params) -> bool:
    return _is_pow2(p)


def _exact_pow2_divisible(p, nbytes, itemsize, **params) -> bool:
    return _is_pow2(p) and (nbytes // itemsize) % p == 0


def _fold_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """Fold in (alpha + n beta + n gamma) when p is not a power of two."""
    return 0.0 if _is_pow2(p) else alpha + nbytes * (beta + gamma)


# -- all_reduce / recursive_doubling -----------------------------------------------------
def _rd_all_reduce_traffic(p, nbytes, itemsize, **params) -> Traffic:
    count = nbytes // itemsize
    p2, rem = _pow2_split(p)
    sent, received = _fold(p, count, p2, rem)
    rounds = p2.bit_length() - 1
    for new in range(p2):
        r = _real(new, rem)
        sent[r] += rounds * count
        received[r] += rounds * count
    sent[0:2 * rem:2] += count
    received[1:2 * rem:2] += count
    return _traffic(sent, received, itemsize)


@cost_model("all_reduce", "recursive_doubling", traffic=_rd_all_reduce_traffic,
            exact=_exact_pow2)
def recursive_doubling_all_reduce(p, nbytes, alpha, beta, gamma, **params) -> float:
    """log2 p (alpha + n beta + n gamma) for p a power of two (Thakur et al. 2005), any n.

    Otherwise the fold adds alpha + n beta + n gamma before and alpha + n beta after the
    log2 p' rounds (an estimate).
    """
    p2, rem = _pow2_split(p)
    rounds = p2.bit_length() - 1
    back = alpha + nbytes * beta if rem else 0.0
    return (_fold_time(p, nbytes, alpha, beta, gamma)
            + rounds * (alpha + nbytes * (beta + gamma)) + back)


# -- all_reduce / rabenseifner -----------------------------------------------------------
def _rabenseifner_all_reduce_traffic(p, nbytes, itemsize, **params) -> Traffic:
    count = nbytes // itemsize
    p2, rem = _pow2_split(p)
    sent, received = _fold(p, count, p2, rem)

    def offset(j: int) -> int:
        return _offset(count, p2, j)

    for new in range(p2):
        r = _real(new, rem)
        give, get = _halving_elems(p2, offset, new)
        # The all-gather mirrors the halving: it sends what the halving received.
        sent[r] += give + get
        received[r] += get + give
    sent[0:2 * rem:2] += count
    received[1:2 * rem:2] += count
    return _traffic(sent, received, itemsize)


@cost_model("all_reduce", "rabenseifner", traffic=_rabenseifner_all_reduce_traffic,
            exact=_exact_pow2_divisible)
def rabenseifner_all_reduce(p, nbytes, alpha, beta, gamma, **params) -> float:
    """2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Thakur et al. 2005;
    Rabenseifner 2004), exact for p a power of two and n divisible by p.

    Otherwise p' replaces p and the fold adds alpha + n beta + n gamma before and
    alpha + n beta after (an estimate).
    """
    p2, rem = _pow2_split(p)
    rounds = p2.bit_length() - 1
    frac = (p2 - 1) / p2
    back = alpha + nbytes * beta if rem else 0.0
    return (_fold_time(p, nbytes, alpha, beta, gamma) + 2 * rounds * alpha
            + frac * nbytes * (2 * beta + gamma) + back)


# -- reduce_scatter / recursive_halving --------------------------------------------------
def _halving_reduce_scatter_traffic(p, nbytes, itemsize, **params) -> Traffic:
    count = nbytes // itemsize
    p2, rem = _pow2_split(p)
    sent, received = _fold(p, count, p2, rem)

    def offset(j: int) -> int:
        return _offset(count, p, _real(j, rem))

    for new in range(p2):
        r = _real(new, rem)
        give, get = _halving_elems(p2, offset, new)
        sent[r] += give
        received[r] += get
    for r in range(1, 2 * rem, 2):
        block = _offset(count, p, r + 1) - _offset(count, p, r)
        sent[r - 1] += block
        received[r] += block
    return _traffic(sent, received, itemsize)


@cost_model("reduce_scatter", "recursive_halving", traffic=_halving_reduce_scatter_traffic,
            exact=_exact_pow2_divisible)
def recursive_halving_reduce_scatter(p, nbytes, alpha, beta, gamma, **params) -> float:
    """log2 p alpha + (p-1)/p n (beta + gamma) (Thakur et al. 2005), exact for p a power
    of two and n divisible by p.

    Otherwise p' replaces p, the fold adds alpha + n beta + n gamma before and
    alpha + n/p beta (block 2i+1 sent to its rank) after (an estimate).
    """
    p2, rem = _pow2_split(p)
    rounds = p2.bit_length() - 1
    frac = (p2 - 1) / p2
    back = alpha + nbytes / p * beta if rem else 0.0
    return (_fold_time(p, nbytes, alpha, beta, gamma) + rounds * alpha
            + frac * nbytes * (beta + gamma) + back)


# -- all_gather / recursive_doubling -----------------------------------------------------
def _all_gather_messages(p: int) -> Iterator[tuple[int, int, int]]:
    """(src, dst, blocks) of every message of MPICH's recursive-doubling all-gather."""
    for mask in _sizes(p):
        for r in range(p):
            if r ^ mask < p:
                group = r & ~(mask - 1)
                yield r, r ^ mask, min(group + mask, p) - group
        for group in range(0, p, 2 * mask):
            present = p - (group + mask)
            if not 0 < present < mask:
                continue
            for dist in _sizes(mask):
                for r in range(group, group + mask):
                    rel = r & (2 * dist - 1)
                    if not r & dist and rel < present <= rel + dist:
                        yield r, r + dist, present


def _rd_all_gather_traffic(p, nbytes, itemsize, **params) -> Traffic:
    sent = np.zeros(p, dtype=np.int64)
    received = np.zeros(p, dtype=np.int64)
    for src, dst, blocks in _all_gather_messages(p):
        sent[src] += blocks * nbytes
        received[dst] += blocks * nbytes
    empty = np.zeros(0, dtype=np.int64)
    return Traffic(sent, received, empty, empty)


@cost_model("all_gather", "recursive_doubling", traffic=_rd_all_gather_traffic,
            exact=_exact_pow2)
def recursive_doubling_all_gather(p, nbytes, alpha, beta, gamma, **params) -> float:
    """log2 p alpha + (p-1) n beta (Thakur et al. 2005), exact for p a power of two.

    Otherwise (derived here) the sum, over masks 2^k < p, of the exchange
    alpha + 2^k n beta plus, when the partner group holds only ``present`` < 2^k ranks,
    alpha + present n beta for each halving step that passes blocks on (those of
    distance d > present / 2): the critical path without link sharing, an estimate.
    """
    total = 0.0
    for mask in _sizes(p):
        total += alpha + mask * nbytes * beta
        present = p - ((p - 1) & ~(2 * mask - 1)) - mask
        if 0 < present < mask:
            steps = sum(1 for d in _sizes(mask) if 2 * d > present)
            total += steps * (alpha + present * nbytes * beta)
    return total


# -- reduce / rabenseifner ---------------------------------------------------------------
def _rabenseifner_reduce_traffic(p, nbytes, itemsize, *, root=0, **params) -> Traffic:
    count = nbytes // itemsize
    p2, rem = _pow2_split(p)
    sent, received = _fold(p, count, p2, rem)

    def offset(j: int) -> int:
        return _offset(count, p2, j)

    survivor = root // 2 if root < 2 * rem else root - rem
    for new in range(p2):
        r = _real(new, rem)
        give, get = _halving_elems(p2, offset, new)
        sent[r] += give
        received[r] += get
        rel = new ^ survivor
        low = rel & -rel if rel else p2
        received[r] += sum(_group(offset, new ^ d, d) for d in _sizes(low))
        if rel:
            sent[r] += _group(offset, new, low)
    if _real(survivor, rem) != root:
        sent[root - 1] += count
        received[root] += count
    return _traffic(sent, received, itemsize)


@cost_model("reduce", "rabenseifner", traffic=_rabenseifner_reduce_traffic,
            exact=_exact_pow2_divisible)
def rabenseifner_reduce(p, nbytes, alpha, beta, gamma, *, root=0, **params) -> float:
    """2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma (Thakur et al. 2005), exact
    for p a power of two and n divisible by p, any root.

    Otherwise p' replaces p, the fold adds alpha + n beta + n gamma, and a folded-out
    root (odd, < 2 rem) alpha + n beta more (an estimate).
    """
    p2, rem = _pow2_split(p)
    rounds = p2.bit_length() - 1
    frac = (p2 - 1) / p2
    forward = alpha + nbytes * beta if root < 2 * rem and root % 2 else 0.0
    return (_fold_time(p, nbytes, alpha, beta, gamma) + 2 * rounds * alpha
            + frac * nbytes * (2 * beta + gamma) + forward)
