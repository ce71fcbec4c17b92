"""The two weighted max-min solvers of :mod:`simcoll.network.weighted`, for numba to
compile.

:func:`fill_weighted_rows` does what :func:`~simcoll.network.weighted.fill_weighted`
does and :func:`fill_arrays_weighted_rows` what
:func:`~simcoll.network.weighted.fill_arrays_weighted` does, with the same floating-point
operations in the same order, on the padded rows the general regime keeps (as
:mod:`simcoll.network.compiled` does for the unweighted solvers):

* the Python solver's sums of weights are taken left to right, as its
  :func:`~simcoll.sums.sum_in_order` does;
* the sums the numpy solver takes with ``np.bincount`` are taken in element order, and
  the one it takes with ``ndarray.sum`` (a link's weight recomputed) with numpy's
  pairwise summation (:func:`pairwise_sum`; numpy's ``pairwise_sum`` in
  ``numpy/_core/src/umath/loops_utils.h.src``, checked against ``ndarray.sum`` by the
  tests for lengths from 0 to 65,537);
* the numpy solver's rows frozen in a pass are in ascending order where several links
  tie (``np.flatnonzero``), in the order they cross the one link otherwise, and its
  sums over them follow that order.

The functions are plain Python either way; :func:`simcoll.network.compiled.solver`
compiles them, and the tests run them uncompiled too, against the pure solvers.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from simcoll.network.compiled import _bottlenecks, _crossing_order, _crossings
from simcoll.network.maxmin import TIE
from simcoll.network.weighted import REFRESH

__all__ = ["pairwise_sum", "fill_weighted_rows", "fill_arrays_weighted_rows"]


def pairwise_sum(values: NDArray[np.float64], start: int, n: int) -> float:
    """``values[start:start + n].sum()`` as numpy computes it for float64 (its
    ``pairwise_sum``: sequential below 8 values, eight running sums up to 128, the two
    halves summed apart above, split at a multiple of 8, all added to the reduction's
    initial 0.0), bit for bit. numpy recurses; this walks the same tree with a stack
    (numba cannot cache recursive functions)."""
    if n <= 128:
        return 0.0 + _block_sum(values, start, n)
    depth = 2 * (int(math.log2(n)) + 2)
    first = np.empty(depth, dtype=np.int64)
    length = np.empty(depth, dtype=np.int64)
    phase = np.zeros(depth, dtype=np.int64)
    sums = np.empty(depth)
    first[0], length[0], phase[0] = start, n, 0
    top, nsums = 0, 0
    while top >= 0:
        m = length[top]
        half = m // 2
        half -= half % 8
        if m <= 128:
            sums[nsums] = _block_sum(values, first[top], m)
            nsums += 1
            top -= 1
        elif phase[top] == 0:  # the first half
            phase[top] = 1
            first[top + 1], length[top + 1], phase[top + 1] = first[top], half, 0
            top += 1
        elif phase[top] == 1:  # the second half
            phase[top] = 2
            first[top + 1], length[top + 1], phase[top + 1] = first[top] + half, m - half, 0
            top += 1
        else:  # both halves summed: first + second
            sums[nsums - 2] = sums[nsums - 2] + sums[nsums - 1]
            nsums -= 1
            top -= 1
    return 0.0 + sums[0]


def _block_sum(values: NDArray[np.float64], start: int, n: int) -> float:
    """numpy's pairwise sum of at most 128 values (no halving); below 8 values it starts
    from -0.0, so that a sum of negative zeros stays one."""
    if n < 8:
        total = -0.0
        for i in range(start, start + n):
            total += values[i]
        return total
    r0, r1, r2, r3 = values[start], values[start + 1], values[start + 2], values[start + 3]
    r4, r5, r6, r7 = values[start + 4], values[start + 5], values[start + 6], values[start + 7]
    i = 8
    whole = n - n % 8
    while i < whole:
        k = start + i
        r0 += values[k]
        r1 += values[k + 1]
        r2 += values[k + 2]
        r3 += values[k + 3]
        r4 += values[k + 4]
        r5 += values[k + 5]
        r6 += values[k + 6]
        r7 += values[k + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += values[start + i]
        i += 1
    return total


def fill_weighted_rows(links: NDArray[np.intp], capacity: NDArray[np.float64],
                       weights: NDArray[np.float64],
                       multiplicity: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`~simcoll.network.weighted.fill_weighted` on padded rows (``links`` padded
    with ``len(capacity) - 1``; ``multiplicity`` as floats, ones for one flow per row):
    the pure Python solver's rates, bit for bit."""
    flows, width = links.shape
    size = capacity.shape[0]
    pad = size - 1
    unfrozen, on_link, owner = _crossings(links, multiplicity, size, False)
    mass = weights * multiplicity
    weight = np.zeros(size)
    order, links_seen = _crossing_order(links, pad)
    for j in range(links_seen):
        d = order[j]
        total = 0.0
        for m in range(on_link[d], on_link[d + 1]):
            total += mass[owner[m]]
        weight[d] = total
    left = capacity.copy()
    rates = np.full(flows, -1.0)
    tied = np.empty(size, dtype=np.int64)
    frozen = 0
    while frozen < flows:
        share, ntied = _bottlenecks(order, links_seen, unfrozen, left, weight, tied)
        if ntied == 0:  # a NaN share: no link can ever fill
            raise ValueError("max-min solve stopped: no link is a bottleneck")
        for t in range(ntied):
            bottleneck = tied[t]
            for j in range(on_link[bottleneck], on_link[bottleneck + 1]):
                i = owner[j]
                if rates[i] < 0:
                    rate = weights[i] * share
                    rates[i] = rate
                    frozen += 1
                    many = multiplicity[i]
                    w = mass[i]
                    taken = rate * many
                    for k in range(width):
                        d = links[i, k]
                        if d == pad:
                            continue
                        left[d] -= taken
                        before = weight[d]
                        weight[d] = before - w
                        unfrozen[d] -= many
                        if weight[d] < before * REFRESH and unfrozen[d] != 0.0:
                            total = 0.0
                            for m in range(on_link[d], on_link[d + 1]):
                                if rates[owner[m]] < 0:
                                    total += mass[owner[m]]
                            weight[d] = total
    return rates


def fill_arrays_weighted_rows(links: NDArray[np.intp], capacity: NDArray[np.float64],
                              weights: NDArray[np.float64],
                              multiplicity: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`~simcoll.network.weighted.fill_arrays_weighted` on the same arguments
    (``multiplicity`` as floats, ones for one flow per row): the numpy solver's rates,
    bit for bit."""
    flows, width = links.shape
    size = capacity.shape[0]
    pad = size - 1
    count, on_link, owner = _crossings(links, multiplicity, size, True)
    mass = weights * multiplicity
    weight = np.zeros(size)
    for i in range(flows):
        for k in range(width):
            weight[links[i, k]] += mass[i]
    left = capacity.copy()
    count[pad] = 0.0
    for d in range(size):
        if count[d] == 0.0:
            left[d] = math.inf
            weight[d] = 0.0
    frozen = np.zeros(flows, dtype=np.bool_)
    reached = np.zeros(flows, dtype=np.bool_)
    rates = np.empty(flows)
    tied = np.empty(size, dtype=np.int64)
    members = np.empty(flows, dtype=np.int64)
    is_touched = np.zeros(size, dtype=np.bool_)
    touched = np.empty(size, dtype=np.int64)
    crossed_count = np.zeros(size)
    crossed_weight = np.zeros(size)
    crossed_taken = np.zeros(size)
    values = np.empty(flows)
    remaining = flows
    while remaining > 0:
        # The first least share, as argmin (NaN counting as least); x / 0 as numpy has it
        # (this function compiles with numpy's error model).
        least = 0
        share = left[0] / weight[0]
        for d in range(1, size):
            value = left[d] / weight[d]
            if value < share or (value != value and share == share):
                share = value
                least = d
        level = share + abs(share) * TIE
        ntied = 0
        for d in range(size):
            if left[d] <= level * weight[d]:
                tied[ntied] = d
                ntied += 1
        nmembers = 0
        if ntied == 1:
            for j in range(on_link[least], on_link[least + 1]):
                i = owner[j]
                if not frozen[i]:
                    members[nmembers] = i
                    nmembers += 1
        else:
            for t in range(ntied):
                d = tied[t]
                for j in range(on_link[d], on_link[d + 1]):
                    reached[owner[j]] = True
            for i in range(flows):
                if reached[i]:
                    reached[i] = False
                    if not frozen[i]:
                        members[nmembers] = i
                        nmembers += 1
        if nmembers == 0:  # a NaN capacity or share: no link can ever fill
            raise ValueError("max-min solve stopped: no link is a bottleneck")
        if share < 0.0:
            share = 0.0
        for m in range(nmembers):
            i = members[m]
            frozen[i] = True
            rates[i] = weights[i] * share
        ntouched = 0
        for m in range(nmembers):
            i = members[m]
            taken = rates[i] * multiplicity[i]
            for k in range(width):
                d = links[i, k]
                if not is_touched[d]:
                    is_touched[d] = True
                    touched[ntouched] = d
                    ntouched += 1
                crossed_count[d] += multiplicity[i]
                crossed_weight[d] += mass[i]
                crossed_taken[d] += taken
        remaining -= nmembers
        before = weight.copy()
        for t in range(ntouched):
            d = touched[t]
            if d != pad:
                left[d] -= crossed_taken[d]
                weight[d] -= crossed_weight[d]
                count[d] -= crossed_count[d]
                if count[d] == 0.0:
                    left[d] = math.inf
                    weight[d] = 0.0
            is_touched[d] = False
            crossed_count[d] = 0.0
            crossed_weight[d] = 0.0
            crossed_taken[d] = 0.0
        for d in range(size):
            if count[d] != 0.0 and weight[d] < before[d] * REFRESH:
                n = 0
                for j in range(on_link[d], on_link[d + 1]):
                    if not frozen[owner[j]]:
                        values[n] = mass[owner[j]]
                        n += 1
                weight[d] = pairwise_sum(values, 0, n)
    return rates
