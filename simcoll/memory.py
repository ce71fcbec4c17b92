"""How much memory a data-mode run needs, and whether this machine has it.

``simulate(data=...)`` and the command line's ``-c`` refuse, before any work, a run whose
arrays cannot fit in the machine's physical memory (an all_gather of 4 MiB on 1024 ranks
returns 4 TiB of outputs), with one rule: :func:`data_mode_bytes`. Data-free runs hold
no arrays; what they hold grows with the messages in flight (see the README): a run
whose messages use up the machine's memory stops with a MemoryError once little is
left (:func:`check_memory_left`, every :data:`CHECK_EVERY` messages of the run), before
the system's out-of-memory killer would end the process. It reads the machine's memory
as ``/proc/meminfo`` gives it, and the memory limit of the process's control group (a
container's ``--memory``, Slurm's or systemd's; cgroup v2 and v1) where one is set
(:func:`cgroup_memory_left`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from simcoll.collectives import Collective, Splits

__all__ = ["physical_memory", "data_mode_bytes", "shortfall", "nccl_slice_bytes",
           "NCCL_SLICE_BYTES_PER_MIB", "memory_left", "check_memory_left",
           "CHECK_EVERY", "MEMORY_MASK", "LOW_MEMORY", "in_gib", "cgroup_memory_left",
           "memory_limit"]

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


def memory_limit() -> tuple[int, str] | None:
    """The most bytes this process can hold, and whose limit that is: the machine's
    physical memory (``"this machine's"``), or the memory limit of the process's control
    group where that is less (``"this process's control-group limit of"``,
    :func:`cgroup_memory_left`); None where neither is known."""
    physical = physical_memory()
    limited = cgroup_memory_left()
    if limited is not None and (physical is None or limited[1] < physical):
        return limited[1], "this process's control-group limit of"
    return None if physical is None else (physical, "this machine's")


def shortfall(need: int, what: str = "its inputs and outputs alone") -> str | None:
    """Where ``need`` bytes (:func:`data_mode_bytes`, or the bytes of ``what``) exceed
    what this process can hold (:func:`memory_limit`), the words saying so (``"needs
    about 8.0 GiB for its inputs and outputs alone, more than this machine's 4.0 GiB"``),
    else None."""
    found = memory_limit()
    if found is None or need <= found[0]:
        return None
    needed, has = in_gib(need, found[0])
    return f"needs about {needed} GiB for {what}, more than {found[1]} {has} GiB"


def in_gib(need: int, physical: int, digits: int = 1, kind: str = "f") -> tuple[str, str]:
    """``need`` > ``physical`` bytes in GiB, formatted ``.{digits}{kind}`` or with as many
    more digits as it takes for the two to read differently (23.5 GiB needed of 23.5
    said nothing)."""
    return _apart(need, physical, 2**30, digits, kind)


def _apart(a: int, b: int, unit: int, digits: int, kind: str = "f") -> tuple[str, str]:
    """``a`` and ``b`` bytes in ``unit``, formatted ``.{digits}{kind}`` or with as many more
    digits as it takes for two different numbers to read differently."""
    for more in range(digits, digits + 12):
        shown = f"{a / unit:.{more}{kind}}", f"{b / unit:.{more}{kind}}"
        if shown[0] != shown[1]:
            break
    return shown


def nccl_slice_bytes(nbytes: int) -> int:
    """The bytes a data-free ``algorithm="nccl"`` run whose ranks' larger buffer (their
    input, or all_gather's output) is ``nbytes`` holds in slices, about
    :data:`NCCL_SLICE_BYTES_PER_MIB` per MiB."""
    return nbytes * NCCL_SLICE_BYTES_PER_MIB // 2**20


CHECK_EVERY = 1 << 14
"""Messages of a run between two looks at the memory left (:func:`check_memory_left`,
from the networks' message count; a look reads ``/proc/meminfo`` and the files of a
control group with a memory limit, 20 to 60 us as measured here (2026-12-06), so it costs
a few ns a message)."""

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


def _read_int(path: str) -> int | None:
    """The integer a control-group file holds, or None (absent, unreadable, ``max``)."""
    try:
        with open(path, "rb") as file:
            return int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stat_value(path: str, key: bytes) -> int:
    """``key``'s value in a control group's ``memory.stat``, 0 where it is not there."""
    try:
        with open(path, "rb") as stat:
            for line in stat:
                fields = line.split()
                if len(fields) == 2 and fields[0] == key:
                    return int(fields[1])
    except (OSError, ValueError):
        pass
    return 0


def _group_paths(cgroup_file: str) -> tuple[str | None, str | None]:
    """The process's control-group paths, ``(v2, v1 memory)``, from ``cgroup_file``
    (``/proc/self/cgroup``: ``0::/path`` for cgroup v2, ``N:memory:/path`` for v1's
    memory controller); None for one it does not name."""
    unified = memory = None
    try:
        with open(cgroup_file, "rb") as lines:
            for line in lines:
                parts = line.rstrip(b"\n").split(b":", 2)
                if len(parts) != 3:
                    continue
                path = parts[2].decode(errors="replace")
                if parts[0] == b"0" and parts[1] == b"":
                    unified = path
                elif b"memory" in parts[1].split(b","):
                    memory = path
    except OSError:
        pass
    return unified, memory


def _inside(mount: str, path: str) -> str:
    """The folder of control group ``path`` under ``mount``; the mount itself where that
    folder is not there (a container sees its own group as the root)."""
    folder = os.path.join(mount, path.lstrip("/"))
    return folder if os.path.isdir(folder) else mount


def _v2_chain(mount: str, path: str) -> list[str]:
    """The folders of control group ``path`` and its ancestors up to ``mount``."""
    folder = _inside(mount, path)
    chain = [folder]
    while os.path.normpath(folder) != os.path.normpath(mount):
        folder = os.path.dirname(folder.rstrip("/"))
        chain.append(folder)
    return chain


def _v2_left(folder: str) -> tuple[int, int] | None:
    """A cgroup v2 group's ``memory.max`` less what it uses (``memory.current``) but
    could give back (``inactive_file`` of its ``memory.stat``: page cache the kernel
    reclaims before its out-of-memory killer acts)."""
    limit = _read_int(os.path.join(folder, "memory.max"))
    used = _read_int(os.path.join(folder, "memory.current"))
    if limit is None or used is None:
        return None
    used -= _stat_value(os.path.join(folder, "memory.stat"), b"inactive_file")
    return limit - max(used, 0), limit


def _v1_left(folder: str) -> tuple[int, int] | None:
    """A cgroup v1 memory group's limit, its own or an ancestor's
    (``hierarchical_memory_limit``), less ``memory.usage_in_bytes`` but
    ``total_inactive_file``."""
    stat = os.path.join(folder, "memory.stat")
    limit = _stat_value(stat, b"hierarchical_memory_limit") or _read_int(
        os.path.join(folder, "memory.limit_in_bytes"))
    used = _read_int(os.path.join(folder, "memory.usage_in_bytes"))
    if limit is None or used is None:
        return None
    used -= _stat_value(stat, b"total_inactive_file")
    return limit - max(used, 0), limit


@functools.lru_cache(maxsize=8)
def _limited_groups(cgroup_file: str, mount: str
                    ) -> tuple[tuple[Callable[[str], tuple[int, int] | None], str], ...]:
    """The process's control groups with a memory limit below the machine's memory, each
    as (its reader, its folder); found once per process (a limit set later is not
    seen)."""
    unified, memory = _group_paths(cgroup_file)
    folders: list[tuple[Callable[[str], tuple[int, int] | None], str]] = []
    if memory is not None:
        folders.append((_v1_left, _inside(os.path.join(mount, "memory"), memory)))
    if unified is not None:
        folders += [(_v2_left, folder) for folder in _v2_chain(mount, unified)]
    physical = physical_memory()
    limited = []
    for reader, folder in folders:
        reading = reader(folder)
        if reading is not None and (physical is None or reading[1] < physical):
            limited.append((reader, folder))
    return tuple(limited)


def cgroup_memory_left(cgroup_file: str = "/proc/self/cgroup",
                       mount: str = "/sys/fs/cgroup") -> tuple[int, int] | None:
    """``(available, limit)`` under the tightest memory limit of this process's control
    groups, or None where none is set below the machine's memory (or none can be read).

    cgroup v2 (``0::/path`` in ``cgroup_file``): ``memory.max`` less ``memory.current``
    of the group and of each of its ancestors, the least of them; cgroup v1 (the
    ``memory`` controller, under ``mount``/memory): ``hierarchical_memory_limit`` less
    ``memory.usage_in_bytes``. Usage counts page cache the kernel gives back before its
    out-of-memory killer acts, so inactive file pages are not counted as used. Which
    groups have a limit is read once per process.
    """
    tightest: tuple[int, int] | None = None
    for reader, folder in _limited_groups(cgroup_file, mount):
        reading = reader(folder)
        if reading is not None and (tightest is None or reading[0] < tightest[0]):
            tightest = reading
    return tightest


def check_memory_left() -> None:
    """Raise MemoryError where the machine, or the process's control group under its
    memory limit (:func:`cgroup_memory_left`), has almost no memory left (below
    :data:`LOW_MEMORY`, or 2% of the total or the limit, and never above a quarter of
    it): a run that goes on would be ended by an out-of-memory killer, or swap for hours.

    Raises:
        MemoryError: naming the memory left and the floor.
    """
    where = "this machine has"
    reading = memory_left()
    limited = cgroup_memory_left()
    if limited is not None and (reading is None or limited[0] < reading[0]):
        reading = limited
        where = (f"this process's control group (a memory limit of "
                 f"{limited[1] / 2**30:.1f} GiB) has")
    if reading is None:
        return
    left, total = reading
    floor = min(max(LOW_MEMORY, total // 50), total // 4)
    if left < floor:
        shown, below = _apart(max(left, 0), floor, 2**20, 0)
        raise MemoryError(f"out of memory: {where} {shown} MiB left (below {below} MiB), "
                          f"so the simulation stopped")
