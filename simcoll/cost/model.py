"""What a cost model is, and the pieces that formulas share.

Every registered algorithm carries a :class:`CostModel`: its time on the single-port
alpha-beta reference network, the bytes each rank sends and receives, and where the time
is exact. ``simcoll.cost`` calls them; the tests compare them with the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from simcoll.buffers import block_bytes, block_size
from simcoll.errors import RegistrationError

if TYPE_CHECKING:  # the registry imports this module; the specs live beside the registry
    from simcoll.algorithms.params import Param

__all__ = ["CostModel", "Traffic", "always_exact", "even_blocks", "gpu_traffic",
           "exchange_traffic", "largest_block", "processor_sharing"]

Counts = NDArray[np.int64]


@dataclass(frozen=True)
class Traffic:
    """Payload bytes each rank (and server host) sends and receives."""

    sent: Counts
    received: Counts
    host_sent: Counts
    host_received: Counts


def gpu_traffic(sent: ArrayLike, received: ArrayLike) -> Traffic:
    """A :class:`Traffic` of GPU ranks only (no server hosts move anything).

    Raises:
        RegistrationError: bytes that are not whole numbers >= 0 (a model's 2 (p-1)/p n
            in floats, say, which int64 would cut short), or booleans.
    """
    empty = np.zeros(0, dtype=np.int64)
    return Traffic(_counts(sent, "sent"), _counts(received, "received"), empty, empty.copy())


def _counts(values: ArrayLike, what: str) -> Counts:
    """``values`` as int64 byte counts, refused unless whole numbers >= 0."""
    found = np.asarray(values)
    if found.dtype.kind not in "iuf" or (found.dtype.kind == "f" and not (
            np.isfinite(found).all() and (found == np.floor(found)).all())):
        raise RegistrationError(f"{what} bytes that are not whole numbers >= 0: {found!r}")
    counts = found.astype(np.int64)
    if (counts < 0).any():
        raise RegistrationError(f"{what} bytes that are not whole numbers >= 0: {found!r}")
    return counts


def exchange_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """Each rank sends block j of its buffer to rank j and gets its own block from every
    other rank (reduce-scatter and all-to-all by direct or pairwise exchange)."""
    blocks = block_bytes(nbytes, p, itemsize)
    return gpu_traffic(blocks.sum() - blocks, (p - 1) * blocks)


def largest_block(nbytes: int, parts: int, itemsize: int) -> int:
    """Bytes of the largest of ``parts`` blocks of an ``nbytes`` buffer of ``itemsize``-byte
    elements: ceil(count / parts) elements, as ``np.array_split`` cuts (n / parts when
    the count divides evenly)."""
    return block_size(nbytes // itemsize, parts, 0) * itemsize


def always_exact(p: int, nbytes: int, itemsize: int) -> bool:
    """The ``exact`` of a model whose time is exact for every argument."""
    return True


def even_blocks(p: int, nbytes: int, itemsize: int) -> bool:
    """Whether the p blocks of the buffer are equal (element count divisible by p)."""
    return (nbytes // itemsize) % p == 0


@dataclass(frozen=True)
class CostModel:
    """An algorithm's closed-form model on the alpha-beta reference network.

    The three functions take ``p`` (ranks) and ``nbytes`` (each rank's input) first, then
    as keywords whichever of these they name: the algorithm's parameters (defaults filled
    in), ``root`` (rooted collectives) and the model's ``machine`` parameters.

    Attributes:
        time: ``time(p, nbytes, alpha, beta, gamma, **kw) -> seconds``; it may also name
            ``itemsize`` (bytes per element, to size the blocks a buffer is cut into).
        traffic: ``traffic(p, nbytes, itemsize, **kw) -> Traffic``, exact in bytes for
            every size (buffers are cut by elements, as ``np.array_split`` does).
        exact: ``exact(p, nbytes, itemsize, **kw) -> bool``: whether ``time`` is exact,
            not an estimate, for these arguments (default: always).
        ends_together: every rank finishes at the same instant wherever ``time`` is exact
            (a composite algorithm such as ``bucketed`` may then chain runs back to back).
        machine: parameters that describe the machine rather than the algorithm (server
            hosts, nodes, inter-node alpha and beta), with their specs.
    """

    time: Callable[..., float]
    traffic: Callable[..., Traffic]
    exact: Callable[..., bool] = always_exact
    ends_together: bool = False
    machine: Mapping[str, Param] = field(default_factory=dict)


def processor_sharing(jobs: list[tuple[float, float]]) -> list[float]:
    """Finish times of jobs (release time, work) served by one server shared equally.

    Every active job gets 1/k of the server while k jobs are active (egalitarian
    processor sharing, what max-min fairness gives flows that share one bottleneck
    link); work is in seconds at the full rate.
    """
    order = sorted(range(len(jobs)), key=lambda i: jobs[i][0])
    finish = [0.0] * len(jobs)
    active: dict[int, float] = {}
    now, k = 0.0, 0
    while k < len(order) or active:
        release = jobs[order[k]][0] if k < len(order) else math.inf
        first = min(active, key=active.__getitem__) if active else -1
        done = now + active[first] * len(active) if active else math.inf
        if release <= done:
            served = (release - now) / len(active) if active else 0.0
            active = {i: w - served for i, w in active.items()}
            now = release
            active[order[k]] = jobs[order[k]][1]
            k += 1
        else:
            served = active.pop(first)
            finish[first] = now = done
            active = {i: w - served for i, w in active.items()}
    return finish
