"""The general regime's re-solve in one call, for numba to compile.

:func:`resolve` does what :meth:`GeneralFlows.solve <simcoll.network.general.GeneralFlows.solve>`
does between choosing what to re-solve and moving the pending completion: it picks the
rows whose rates may change (those at or above the floor), takes what the others use off
each link's capacity, groups the chosen rows by route, renumbers the links they cross,
runs the solver (:func:`~simcoll.network.compiled.fill_rows` below ``vectorized_from``
flows, :func:`~simcoll.network.compiled.fill_arrays_rows` from there on, or their
weighted siblings of :mod:`simcoll.network.weighted_kernels`), and updates
each row's bytes left, rate and finishing instant. Every floating-point operation is the
one numpy does there, in the same order (``np.bincount`` adds weights in element order;
the rest is element-wise), and the rows reach the solver in the same order, so the rates
and instants are the same bit for bit. Compiled, it replaces some twenty numpy calls per
re-solve, each costing microseconds of overhead on arrays of a few hundred rows.

The function is plain Python either way; :func:`simcoll.network.compiled.solver` compiles
it (``kind="resolve"``), and the tests run it uncompiled too, against the numpy path.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from simcoll.network.compiled import fill_arrays_rows, fill_rows
from simcoll.network.weighted_kernels import fill_arrays_weighted_rows, fill_weighted_rows

__all__ = ["resolve"]


def resolve(links: NDArray[np.intp], used: NDArray[np.bool_], rate: NDArray[np.float64],
            remaining: NDArray[np.float64], updated: NDArray[np.float64],
            finish: NDArray[np.float64], route: NDArray[np.intp],
            capacity: NDArray[np.float64], weight: NDArray[np.float64], weighted: bool,
            floor: float, now: float, tie: float, group_from: int, vectorized_from: int,
            routes: int, marks: NDArray[np.int64]) -> float:
    """Re-solve the rows of ``used`` whose level (rate, or rate per unit weight where
    ``weighted``) is at or above ``floor`` (all of them when ``floor`` is 0) at ``now``;
    update ``rate``, ``remaining``, ``updated`` and ``finish`` in place and return the
    earliest finishing instant of all rows.

    Args:
        links: ``(rows, R)`` routes padded with the last link of ``capacity``.
        route: each row's route id (rows with one id cross the same links); ``routes``
            ids have been given in all.
        weight: each row's weight, read only where ``weighted`` (the ``"flow_rtt"``
            model's weighted max-min sharing).
        tie: :data:`~simcoll.network.maxmin.TIE`.
        group_from, vectorized_from: the regime's thresholds (``GROUP_FROM``, and the
            flows from which the numpy solver runs).
        marks: one entry per link of ``capacity``, all -1, left so on return (scratch).
    """
    rows, width = links.shape
    size = capacity.shape[0]
    pad = size - 1
    chosen = np.empty(rows, dtype=np.int64)
    nchosen = 0
    # One loop for both cases: compiled as two (the floor-0 one in an else branch), the
    # floor-0 loop ran about ten times slower than this one (numba 0.68, measured).
    every = not floor > 0
    cutoff = floor * (1 - 4 * tie)
    load = np.zeros(size)
    nfixed = 0
    for i in range(rows):
        if used[i]:
            if every:
                chosen[nchosen] = i
                nchosen += 1
                continue
            level = rate[i] / weight[i] if weighted else rate[i]
            if level >= cutoff:
                chosen[nchosen] = i
                nchosen += 1
            elif level < cutoff:
                nfixed += 1
                # The padding link's load is never read: the solvers give it no share.
                for k in range(width):
                    d = links[i, k]
                    if d != pad:
                        load[d] += rate[i]
    available = capacity - load if nfixed else capacity
    chosen = chosen[:nchosen]

    # The rows the solver sees, with multiplicities, and where each chosen row's rate is.
    selected = chosen
    multiplicity = np.ones(nchosen)
    result_of = np.arange(nchosen)
    if nchosen >= group_from:
        ids = route[chosen]
        occurs = np.zeros(routes, dtype=np.int64)
        for c in range(nchosen):
            occurs[ids[c]] += 1
        # One row stands for its route (rows of one route cross the same links).
        first = np.full(routes, -1, dtype=np.int64)
        for c in range(nchosen):
            if first[ids[c]] < 0:
                first[ids[c]] = c
        distinct = 0
        for r in range(routes):
            if occurs[r]:
                distinct += 1
        # GeneralFlows._fill_grouped: counted directly while ids are few (chosen order
        # when every route occurs once), else through np.unique (id order).
        direct = routes <= 8 * nchosen
        if not (direct and distinct == nchosen):
            selected = np.empty(distinct, dtype=np.int64)
            multiplicity = np.empty(distinct)
            position = np.empty(routes, dtype=np.int64)
            j = 0
            for r in range(routes):
                if occurs[r]:
                    selected[j] = chosen[first[r]]
                    multiplicity[j] = occurs[r]
                    position[r] = j
                    j += 1
            for c in range(nchosen):
                result_of[c] = position[ids[c]]

    matrix = np.empty((len(selected), width), dtype=np.int64)
    for j in range(len(selected)):
        for k in range(width):
            matrix[j, k] = links[selected[j], k]
    solve_capacity = available
    if pad > 8 * matrix.size:
        # GeneralFlows._compact: only the links crossed, in index order, the padding last.
        crossed = np.empty(matrix.size + 1, dtype=np.int64)
        ncrossed = 0
        for j in range(len(selected)):
            for k in range(width):
                d = matrix[j, k]
                if marks[d] < 0:
                    marks[d] = 0
                    crossed[ncrossed] = d
                    ncrossed += 1
        if marks[pad] < 0:
            marks[pad] = 0
            crossed[ncrossed] = pad
            ncrossed += 1
        crossed = np.sort(crossed[:ncrossed])
        solve_capacity = np.empty(ncrossed)
        for j in range(ncrossed):
            marks[crossed[j]] = j
            solve_capacity[j] = available[crossed[j]]
        for j in range(len(selected)):
            for k in range(width):
                matrix[j, k] = marks[matrix[j, k]]
        for j in range(ncrossed):
            marks[crossed[j]] = -1
    if weighted:
        weights = np.empty(len(selected))
        for j in range(len(selected)):
            weights[j] = weight[selected[j]]
        if nchosen < vectorized_from:
            solved = fill_weighted_rows(matrix, solve_capacity, weights, multiplicity)
        else:
            solved = fill_arrays_weighted_rows(matrix, solve_capacity, weights, multiplicity)
    elif nchosen < vectorized_from:
        solved = fill_rows(matrix, solve_capacity, multiplicity)
    else:
        solved = fill_arrays_rows(matrix, solve_capacity, multiplicity)

    for c in range(nchosen):
        i = chosen[c]
        new = solved[result_of[c]]
        old = rate[i]
        remaining[i] -= old * (now - updated[i])
        updated[i] = now
        if new != old or finish[i] == math.inf:
            rate[i] = new
            left = remaining[i]
            finish[i] = now + (left / new if left > 0 else 0.0)
    earliest = math.inf
    for i in range(rows):
        if finish[i] < earliest or finish[i] != finish[i]:  # NaN first, as min() does
            earliest = finish[i]
            if earliest != earliest:
                break
    return earliest
