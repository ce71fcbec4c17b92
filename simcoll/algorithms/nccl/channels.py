"""Running one collective over NCCL's channels: cutting buffers, starting one program per
channel, gluing their outputs back.

NCCL cuts a collective's elements over its channels in cells of 32 KiB of traffic
(:func:`channel_counts`), so a small or mid-size collective runs on fewer channels than
its tuner's count, in parts that need not be equal. A part of every rank's block, or of
the whole buffer, goes to each channel in turn; a rank's output is then its channels'
parts glued back in order, for every collective, so channels never change what a
collective computes, only how it travels.
"""

from __future__ import annotations

from collections.abc import Callable

from simcoll.buffers import Buffer, join, split_counts
from simcoll.comm import Comm
from simcoll.typing import Steps

__all__ = ["MIN_TRAFFIC_PER_CHANNEL", "channel_counts", "cut", "by_channel", "in_proportion",
           "run_channels"]

MIN_TRAFFIC_PER_CHANNEL = 32 << 10
"""Bytes of traffic NCCL gives a channel at least (``MinTrafficPerChannel`` in
``scheduleCollTasksToPlan``, src/enqueue.cc of NCCL 2.30.7)."""


def _traffic_per_byte(collective: str, nranks: int) -> int:
    """``ncclFuncTrafficPerByte``: 2 for all_reduce, the ranks for all_gather and
    reduce_scatter (whose counts are one rank's), 1 for broadcast and reduce."""
    if collective == "all_reduce":
        return 2
    return nranks if collective in ("all_gather", "reduce_scatter") else 1


def _up(a: int, b: int) -> int:
    return -(-a // b)


def channel_counts(collective: str, count: int, itemsize: int, proto: str, nranks: int,
                   channels: int, comm_channels: int) -> list[int]:
    """Elements of a collective on each channel that carries some, channel 0 first, as
    NCCL 2.30.7 cuts one collective launched alone over its channels
    (``scheduleCollTasksToPlan`` in src/enqueue.cc, ring, tree, PAT and NVLS on one
    node or NVLS-tree; CollNet and NVLS across nodes are not cut this way).

    ``count`` is NCCL's count: one rank's block for reduce_scatter and all_gather, the
    buffer otherwise; all_gather and broadcast are counted in bytes, as NCCL does.
    ``channels`` is the tuner's count, ``comm_channels`` the communicator's. The traffic,
    ``count`` x element size x t (t: 2 for all_reduce, ``nranks`` for all_gather and
    reduce_scatter, 1 else; 4 times that for LL, whose 16-byte lines carry 8 bytes of
    data and which NCCL weighs 4 times), at least 32 KiB, is shared by ``channels`` as T
    per channel (the traffic divided by ``channels``, rounded down to a byte, then up to
    16 bytes: about an even share). The
    elements go in cells of about 32 KiB of traffic (C = roundup16(32 KiB / t) bytes of
    data, C t of traffic: 32,784 for an all_gather on 3 ranks), k = ceil(T / (C t))
    cells per channel: k on channel 0, k on every next channel, the rest on one more.
    That can ask one channel more than ``channels`` (a reduce of 98,305 bytes, 3 cells
    of 32 KiB and one byte, on 3 channels: T = 32,768, one cell a channel, 4 wanted),
    which runs where the communicator has it. Where it does not, channel 0
    keeps its k and the others share the rest evenly, the last taking what does not
    divide. The last channel's part is short by what the last cell is not filled.

    So a 12-byte all_reduce runs on one channel whatever the tuner's count, and a 1 MiB
    one of float32 with LL128 on 24 channels on 22 (21 of 48 KiB and one of 16 KiB),
    not on 24 of 43,690.7 bytes each."""
    if count <= 0:
        return []
    per_byte = _traffic_per_byte(collective, nranks)
    if collective in ("all_gather", "broadcast"):   # NCCL counts their bytes
        return [n // itemsize for n in _cells(count * itemsize, 1, per_byte, proto, channels,
                                              comm_channels)]
    return _cells(count, itemsize, per_byte, proto, channels, comm_channels)


def _cells(count: int, itemsize: int, per_byte: int, proto: str, channels: int,
           comm_channels: int) -> list[int]:
    """:func:`channel_counts` of ``count`` elements of ``itemsize`` bytes, each byte
    ``per_byte`` bytes of traffic."""
    if proto == "LL":
        per_byte *= 4
    traffic = max(MIN_TRAFFIC_PER_CHANNEL, count * itemsize * per_byte)
    per_channel = _up(traffic // min(channels, comm_channels), 16) * 16
    cell = _up(_up(MIN_TRAFFIC_PER_CHANNEL, per_byte), 16) * 16
    per_cell = cell // itemsize
    cells = _up(count * itemsize, cell)
    per = min(cells, _up(per_channel, cell * per_byte))
    first = cells if comm_channels == 1 else per
    middle, last = divmod(cells - first, per)
    if 1 + middle + (last != 0) > comm_channels:
        middle = comm_channels - 2
        per, extra = divmod(cells - first, middle + 1)
        last = per + extra
    if last == 0 and middle:
        middle, last = middle - 1, per
    counts = [first * per_cell] + [per * per_cell] * middle + ([last * per_cell] if last else [])
    counts[-1] -= cells * per_cell - count
    return counts


def cut(block: Buffer, counts: list[int]) -> list[Buffer]:
    """``block`` in consecutive parts of ``counts`` elements, the last ones short or empty
    where the block is smaller than their sum (a reduce_scatter's smaller blocks)."""
    sizes, left = [], len(block)
    for n in counts:
        sizes.append(min(n, left))
        left -= sizes[-1]
    return split_counts(block, sizes)


def by_channel(blocks: list[Buffer], counts: list[int]) -> list[list[Buffer]]:
    """``[c][b]``: block b's part on channel c, of ``counts[c]`` elements (:func:`cut`)."""
    parts = [cut(block, counts) for block in blocks]
    return [[parts[b][c] for b in range(len(blocks))] for c in range(len(counts))]


def in_proportion(blocks: list[Buffer], counts: list[int]) -> list[list[Buffer]]:
    """``[c][b]``: block b's part on channel c, in proportion to ``counts[c]`` of their
    sum (block b's first ``B_b x (counts[0] + ... + counts[c]) // sum`` elements end
    channel c's part): an all_reduce's channel part of ``counts[c]`` elements cut over
    the p ranks' blocks, every channel taking a share of every block that is not
    empty where the channel's share of a block is an element or more."""
    total = sum(counts)
    ends = [sum(counts[:c + 1]) for c in range(len(counts))]
    parts = []
    for block in blocks:
        edges = [0] + [len(block) * end // total for end in ends]
        parts.append(split_counts(block, [b - a for a, b in zip(edges, edges[1:])]))
    return [[parts[b][c] for b in range(len(blocks))] for c in range(len(counts))]


def run_channels(comm: Comm, channels: int,
                 program: Callable[[int], Steps]) -> Steps:
    """Start ``program(c)`` for every channel c side by side; return their results."""
    if channels == 1:
        return [(yield from program(0))]
    handles = [comm.start(program(c)) for c in range(channels)]
    results = []
    for handle in handles:
        results.append((yield handle))
    return results


def glue(per_channel: list[Buffer]) -> Buffer:
    """One block from its parts, one per channel."""
    return per_channel[0] if len(per_channel) == 1 else join(per_channel)
