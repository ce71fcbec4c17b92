"""How much memory a data-mode run needs, and whether this machine has it.

``simulate(data=...)`` and the command line's ``-c`` refuse, before any work, a run whose
arrays cannot fit in the machine's physical memory (an all_gather of 4 MiB on 1024 ranks
returns 4 TiB of outputs), with one rule: :func:`data_mode_bytes`. Data-free runs hold
no arrays; what they hold grows with the messages in flight (see the README): a run
whose messages use up the machine's memory stops with a MemoryError once little is
left (:func:`check_memory_left`, every :data:`CHECK_EVERY` messages of the run), before
the system's out-of-memory killer would end the process. It reads the machine's memory
as ``/proc/meminfo`` gives it: a memory limit of the process's control group (a
container's ``--memory``, Slurm's or systemd's) is not read, and its own killer may
come first.
"""

from __future__ import annotations

import os

from simcoll.collectives import Collective, Splits

__all__ = ["physical_memory", "data_mode_bytes", "shortfall", "nccl_slice_bytes",
           "NCCL_SLICE_BYTES_PER_MIB", "memory_left", "check_memory_left",
           "CHECK_EVERY", "MEMORY_MASK", "LOW_MEMORY", "in_gib"]

NCCL_SLICE_BYTES_PER_MIB = 500
"""What ``algorithm="nccl"`` holds in a data-free run per MiB of a rank's buffer: the
slices a ring's first step sends ahead of the next rank taking them (measured; see the
README's data-free note)."""


def physical_memory() -> int | None:
    """This machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def data_mode_bytes(coll: Collective, p: int, count: int, itemsize: int, root: int = 0,
                    splits: Splits | None = None, inputs: int | None = None) -> int:
    """The bytes a data-mode run of ``coll`` on ``p`` ranks holds at least: every rank's
    input and output, which all exist when it ends (``count``: each rank's input
    elements; for a v-collective its ``splits`` give the sizes instead; ``inputs``: the
    bytes the inputs hold where known, an array given to several ranks counting once).

    A run holds more on the way (copies in flight, partial results, the check's
    reference): measured on 32 ranks of 1 MiB, inputs plus the process's growth, a
    ring all_gather held 1.0 times this, a ring all_reduce 1.05, a direct all_to_all
    1.5, a binomial gather 2.1. So a run this exceeds the memory for cannot fit, and
    one that fits it may still run out.
    """
    if splits is not None and coll.uneven is not None:
        given = sum(coll.uneven.inputs(splits))
        made = sum(coll.uneven.outputs(splits))
    else:
        given = p * count
        made = sum(coll.out_count(p, count, rank, root) or 0 for rank in range(p))
    return (given * itemsize if inputs is None else inputs) + made * itemsize


def shortfall(need: int) -> str | None:
    """Where ``need`` bytes (:func:`data_mode_bytes`) exceed this machine's physical
    memory, the words saying so (``"needs about 8.0 GiB for its inputs and outputs
    alone, more than this machine's 4.0 GiB"``), else None."""
    physical = physical_memory()
    if physical is None or need <= physical:
        return None
    needed, has = in_gib(need, physical)
    return (f"needs about {needed} GiB for its inputs and outputs alone, more than this "
            f"machine's {has} GiB")


def in_gib(need: int, physical: int, digits: int = 1, kind: str = "f") -> tuple[str, str]:
    """``need`` > ``physical`` bytes in GiB, formatted ``.{digits}{kind}`` or with as many
    more digits as it takes for the two to read differently (23.5 GiB needed of 23.5
    said nothing)."""
    for more in range(digits, digits + 12):
        shown = f"{need / 2**30:.{more}{kind}}", f"{physical / 2**30:.{more}{kind}}"
        if shown[0] != shown[1]:
            break
    return shown


def nccl_slice_bytes(nbytes: int) -> int:
    """The bytes a data-free ``algorithm="nccl"`` run of ``nbytes`` per rank holds in
    slices, about :data:`NCCL_SLICE_BYTES_PER_MIB` per MiB."""
    return nbytes * NCCL_SLICE_BYTES_PER_MIB // 2**20


CHECK_EVERY = 1 << 14
"""Messages of a run between two looks at the memory left (:func:`check_memory_left`,
from the networks' message count; a look reads ``/proc/meminfo``, some 15 us, so it
costs about 1 ns a message)."""

MEMORY_MASK = CHECK_EVERY - 1
"""``count & MEMORY_MASK == 0`` every :data:`CHECK_EVERY` counts (a power of two)."""

LOW_MEMORY = 256 * 2**20
"""Bytes of available memory below which a run stops (or 2% of the total memory,
whichever is more)."""


def memory_left() -> tuple[int, int] | None:
    """``(available, total)``: the memory the system can still give without swapping
    and all of it (Linux's ``MemAvailable`` and ``MemTotal``, from one reading of
    ``/proc/meminfo``, so that a container that shows its own figures shows both), or
    None where the system does not say."""
    found: dict[bytes, int] = {}
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                key = line.split(b":", 1)[0]
                if key in (b"MemAvailable", b"MemTotal"):
                    found[key] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if len(found) < 2:
        return None
    return found[b"MemAvailable"], found[b"MemTotal"]


def check_memory_left() -> None:
    """Raise MemoryError where the machine has almost no memory left (below
    :data:`LOW_MEMORY`, or 2% of its total): a run that goes on would be ended by the
    system's out-of-memory killer, or swap for hours.

    Raises:
        MemoryError: naming the memory left and the floor.
    """
    reading = memory_left()
    if reading is None:
        return
    left, total = reading
    floor = max(LOW_MEMORY, total // 50)
    if left < floor:
        raise MemoryError(
            f"out of memory: this machine has {left / 2**20:.0f} MiB left (below "
            f"{floor / 2**20:.0f} MiB), so the simulation stopped")
