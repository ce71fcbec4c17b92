"""Float sums taken left to right, the same on every Python version.

Python's ``sum`` compensates its rounding from 3.12 on (Neumaier summation), so a route's
latency or a flow's weight summed with it can differ in the last bit between 3.11 and
3.12; simulated times built from them would too. :func:`sum_in_order` adds one value
at a time, as the compiled solvers (:mod:`simcoll.network.weighted_kernels`) do.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["sum_in_order"]


def sum_in_order(values: Iterable[float]) -> float:
    """``values`` added left to right, starting from 0.0, with no compensation."""
    total = 0.0
    for value in values:
        total += value
    return total
