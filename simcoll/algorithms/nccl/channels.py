"""Running one collective over NCCL's channels: cutting buffers, starting one program per
channel, gluing their outputs back.

Every rank's buffer is cut into one block per rank (as ``np.array_split`` does), and every
block into one part per channel; channel c carries part c of every block. A rank's output
block is then its channels' parts glued back in order, for every collective, so channels
never change what a collective computes, only how it travels.
"""

from __future__ import annotations

from collections.abc import Callable

from simcoll.buffers import Buffer, join, split
from simcoll.comm import Comm
from simcoll.typing import Steps

__all__ = ["by_channel", "run_channels"]


def by_channel(blocks: list[Buffer], channels: int) -> list[list[Buffer]]:
    """``[c][b]``: part c of block b."""
    parts = [list(split(block, channels)) for block in blocks]
    return [[parts[b][c] for b in range(len(blocks))] for c in range(channels)]


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
