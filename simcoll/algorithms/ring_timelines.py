"""The ring programs of :mod:`simcoll.algorithms.ring` and
:mod:`simcoll.algorithms.uneven_ring`, step by step for every rank at once.

Each function follows its rank program's loops exactly (the same blocks, pieces, waits and
reductions, in the same order) on a :class:`~simcoll.lone_flows.Lanes`, whose clocks then
hold what the event-driven run gives where no message shares a link (see
:mod:`simcoll.lone_flows`). Arrays index ranks: rank r's block ``(start + r - s) mod p``
in step s is ``blocks[(start + ranks - s) % p]``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcoll.buffers import block_counts
from simcoll.lone_flows import Lanes

__all__ = ["all_reduce", "reduce_scatter", "all_gather", "all_gatherv", "reduce_scatterv",
           "reduce_scatter_then_all_gather"]

Ready = list[NDArray[np.float64]]


def _piece(counts: NDArray[np.int64], pieces: int, k: int) -> NDArray[np.int64]:
    """Elements of piece k when blocks of ``counts`` are cut into ``pieces``, as
    ``buffers.split`` cuts them (the rule of ``buffers.split_sizes``, over arrays)."""
    small, big = np.divmod(counts, pieces)
    return small + (k < big)


def _reduce_scatter_steps(lanes: Lanes, blocks: NDArray[np.int64], pieces: int,
                          start: int) -> Ready:
    """``ring._reduce_scatter_steps``: returns each piece's reduction instants."""
    p = lanes.p
    ranks = np.arange(p)
    ready: Ready | None = None
    for step in range(p - 1):
        send = blocks[(start + ranks - step) % p]
        mine = blocks[(start + ranks - step - 1) % p]
        reductions = []
        for k in range(pieces):
            if ready is not None:
                lanes.wait(ready[k])
            lanes.sendrecv(_piece(send, pieces, k))
            reductions.append(lanes.reduce(_piece(mine, pieces, k)))
        ready = reductions
    assert ready is not None
    return ready


def _all_gather_steps(lanes: Lanes, blocks: NDArray[np.int64], pieces: int, start: int,
                      ready: Ready | None = None) -> None:
    """``ring._all_gather_steps``, waiting for ``ready`` before step 0's pieces."""
    p = lanes.p
    ranks = np.arange(p)
    for step in range(p - 1):
        send = blocks[(start + ranks - step) % p]
        for k in range(pieces):
            if ready is not None:
                lanes.wait(ready[k])
            lanes.sendrecv(_piece(send, pieces, k))
        ready = None


def all_reduce(lanes: Lanes, count: int, *, chunks: int) -> None:
    """``ring.ring_all_reduce``: reduce-scatter, then all-gather from block r + 1."""
    blocks = block_counts(count, lanes.p)
    ready = _reduce_scatter_steps(lanes, blocks, chunks, 0)
    _all_gather_steps(lanes, blocks, chunks, 1, ready)


def reduce_scatter(lanes: Lanes, count: int, *, chunks: int) -> None:
    """``ring.ring_reduce_scatter``: the steps shifted by one block, then the last
    reductions awaited."""
    blocks = block_counts(count, lanes.p)
    for ready in _reduce_scatter_steps(lanes, blocks, chunks, -1):
        lanes.wait(ready)


def all_gather(lanes: Lanes, count: int, *, chunks: int) -> None:
    """``ring.ring_all_gather``: every block is one rank's whole input."""
    _all_gather_steps(lanes, np.full(lanes.p, count, dtype=np.int64), chunks, 0)


def reduce_scatter_then_all_gather(lanes: Lanes, count: int) -> None:
    """``ring.ring_reduce_scatter``, then ``ring.ring_all_gather`` of the block each rank
    holds (rank r's block r): the hierarchical all-reduce on one node."""
    reduce_scatter(lanes, count, chunks=1)
    _all_gather_steps(lanes, block_counts(count, lanes.p), 1, 0)


def all_gatherv(lanes: Lanes, count: int, *, splits: tuple[int, ...]) -> None:
    """``uneven_ring.ring_all_gatherv``: in step s rank r forwards block r - s, if it is
    not empty."""
    p = lanes.p
    blocks = np.array(splits, dtype=np.int64)
    ranks = np.arange(p)
    for step in range(p - 1):
        lanes.exchange(blocks[(ranks - step) % p])


def reduce_scatterv(lanes: Lanes, count: int, *, splits: tuple[int, ...]) -> None:
    """``uneven_ring.ring_reduce_scatterv``: in step s rank r sends its partial block
    r - s - 1 and, if block r - s - 2 came, reduces into it and waits for that."""
    p = lanes.p
    blocks = np.array(splits, dtype=np.int64)
    ranks = np.arange(p)
    for step in range(p - 1):
        received = lanes.exchange(blocks[(ranks - step - 1) % p])
        lanes.wait(lanes.reduce(blocks[(ranks - step - 2) % p], where=received))
