"""The two max-min solvers of :mod:`simcoll.network.maxmin`, compiled with numba.

:func:`fill_rows` does what :func:`~simcoll.network.maxmin.fill` does and
:func:`fill_arrays_rows` what :func:`~simcoll.network.maxmin.fill_arrays` does, with the
same floating-point operations in the same order, so each gives its model's rates bit for
bit: a run's results do not depend on whether numba is installed. Both take the padded
route matrix the general regime keeps (one row per flow, padded with the last link) and
a capacity array, and return each row's rate. The general regime calls them through
:func:`simcoll.network.resolve_kernel.resolve`, its whole re-solve in one compiled call,
which :func:`solver` compiles with them.

* :func:`fill_rows` follows the pure Python solver: links in the order the routes first
  cross them, each pass freezing the flows of the tied links in that order, each frozen
  flow taking ``share * multiplicity`` from each link of its route in turn.
* :func:`fill_arrays_rows` follows the numpy solver: each pass takes the links' shares,
  the least of them (the first, as ``argmin``), the links within :data:`TIE` of it, and
  subtracts from each link ``flows frozen there * share`` once.

Measured on re-solves recorded from two runs (NCCL's all_reduce of 64 MiB on
``dgx_h100(8)``, 122 routes standing for 740 flows on average; the uneven all-to-all on
``switch(64)``, 1,700 flows): 30 to 36 and 54 to 75 us per solve compiled, against 360
and 730 us for the numpy solver (2026-12-03, ``benchmarks/solvers.py`` has the grid). numba is
optional (``pip install simcoll[fast]``): without it, or with the environment variable
``SIMCOLL_NO_JIT`` set to a non-empty value, :data:`AVAILABLE` is False and the general
regime runs the pure solvers. The weighted solvers of ``network="flow_rtt"`` have their
compiled replicas in :mod:`simcoll.network.weighted_kernels`. The functions below are
plain Python either way; the tests run them uncompiled too, against the pure solvers.

Compiled code is cached next to this module (numba's ``cache=True``); the first run
after an install compiles the solvers and the re-solve (about 10 s here). Where that
directory is not writable numba compiles them again in every process that needs them;
its ``NUMBA_CACHE_DIR`` environment variable moves the cache elsewhere. numba checks only
a function's own file for changes, and the re-solve calls the solvers of two other files
(and the kernels read constants of two more): :func:`_drop_stale_cache` deletes the cached
code of all three when any of the five changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcoll.network.compile_guard import guard_first_call
from simcoll.network.maxmin import TIE

__all__ = ["AVAILABLE", "WARMUP", "add_work", "fill_rows", "fill_arrays_rows", "solver"]


def fill_rows(links: NDArray[np.intp], capacity: NDArray[np.float64],
              multiplicity: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`~simcoll.network.maxmin.fill` on padded rows: the pure Python solver's
    rates, bit for bit.

    Args:
        links: ``(flows, R)`` link indices, each row a route padded with
            ``len(capacity) - 1``.
        capacity: bytes/s each link can carry, the padding link last.
        multiplicity: how many flows each row stands for (whole numbers, as floats).
    """
    flows, width = links.shape
    size = capacity.shape[0]
    pad = size - 1
    unfrozen, on_link, owner = _crossings(links, multiplicity, size, False)
    order, links_seen = _crossing_order(links, pad)
    left = capacity.copy()
    rates = np.full(flows, -1.0)
    tied = np.empty(size, dtype=np.int64)
    frozen = 0
    while frozen < flows:
        share, ntied = _bottlenecks(order, links_seen, unfrozen, left, unfrozen, tied)
        for t in range(ntied):
            bottleneck = tied[t]
            for j in range(on_link[bottleneck], on_link[bottleneck + 1]):
                i = owner[j]
                if rates[i] < 0:
                    rates[i] = share
                    frozen += 1
                    many = multiplicity[i]
                    taken = share * many
                    for k in range(width):
                        d = links[i, k]
                        if d != pad:
                            left[d] -= taken
                            unfrozen[d] -= many
    return rates


def fill_arrays_rows(links: NDArray[np.intp], capacity: NDArray[np.float64],
                     multiplicity: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`~simcoll.network.maxmin.fill_arrays` on the same arguments (multiplicity as
    floats, ones for one flow per row): the numpy solver's rates, bit for bit."""
    flows, width = links.shape
    size = capacity.shape[0]
    pad = size - 1
    count, on_link, owner = _crossings(links, multiplicity, size, True)
    left = capacity.copy()
    count[pad] = 0.0
    # The links some unfrozen flow crosses, in index order: the others' share is inf (and
    # their left inf), so they never are the least nor tie, and each pass reads only these.
    active = np.empty(size, dtype=np.int64)
    nactive = 0
    for d in range(size):
        if count[d] == 0.0:
            left[d] = math.inf
        else:
            active[nactive] = d
            nactive += 1
    frozen = np.zeros(flows, dtype=np.bool_)
    rates = np.empty(flows)
    crossed = np.zeros(size)
    touched = np.empty(size, dtype=np.int64)
    tied = np.empty(size, dtype=np.int64)
    members = np.empty(flows, dtype=np.int64)
    remaining = flows
    while remaining > 0:
        # The first least share, as argmin (NaN counting as least); inf where no unfrozen
        # flow crosses a link (numpy's inf / 0). Links that no longer count leave the list.
        least = 0
        share = left[0] / count[0] if count[0] != 0.0 else math.inf
        kept = 0
        for a in range(nactive):
            d = active[a]
            if count[d] == 0.0:
                continue
            active[kept] = d
            kept += 1
            value = left[d] / count[d]
            if value < share or (value != value and share == share):
                share = value
                least = d
        nactive = kept
        level = share + abs(share) * TIE
        ntied = 0
        for a in range(nactive):
            d = active[a]
            if left[d] <= level * count[d]:
                tied[ntied] = d
                ntied += 1
        if ntied == 1:
            tied[0] = least
        nmembers = 0
        for t in range(ntied):
            d = tied[t]
            for j in range(on_link[d], on_link[d + 1]):
                i = owner[j]
                if not frozen[i]:
                    frozen[i] = True
                    members[nmembers] = i
                    nmembers += 1
        if nmembers == 0:  # a NaN capacity or share: no link can ever fill
            raise ValueError("max-min solve stopped: no link is a bottleneck")
        if share < 0.0:
            share = 0.0
        ntouched = 0
        for m in range(nmembers):
            i = members[m]
            rates[i] = share
            for k in range(width):
                d = links[i, k]
                if crossed[d] == 0.0:
                    touched[ntouched] = d
                    ntouched += 1
                crossed[d] += multiplicity[i]
        remaining -= nmembers
        for t in range(ntouched):
            d = touched[t]
            if d != pad:
                left[d] -= crossed[d] * share
                count[d] -= crossed[d]
                if count[d] == 0.0:
                    left[d] = math.inf
            crossed[d] = 0.0
    return rates


def _crossing_order(links: NDArray[np.intp], pad: int) -> tuple[NDArray[np.int64], int]:
    """The links the rows cross (``pad`` left out) in the order they are first crossed,
    which is the order of the Python solvers' dicts, and how many there are."""
    flows, width = links.shape
    order = np.empty(pad + 1, dtype=np.int64)
    seen = np.zeros(pad + 1, dtype=np.bool_)
    links_seen = 0
    for i in range(flows):
        for k in range(width):
            d = links[i, k]
            if d != pad and not seen[d]:
                seen[d] = True
                order[links_seen] = d
                links_seen += 1
    return order, links_seen


def _bottlenecks(order: NDArray[np.int64], links_seen: int, unfrozen: NDArray[np.float64],
                 left: NDArray[np.float64], per: NDArray[np.float64],
                 tied: NDArray[np.int64]) -> tuple[float, int]:
    """One pass of the Python solvers: over the links some unfrozen flow crosses, in
    ``order``, the first least share ``left / per`` and the links within :data:`TIE` of
    it, written to ``tied``. Returns (the share, at least 0; how many links tie).

    Raises:
        ValueError: no link ties (a NaN capacity or share: no link can ever fill).
    """
    share = math.inf
    first = True
    for j in range(links_seen):
        d = order[j]
        if unfrozen[d] != 0.0:
            value = left[d] / per[d]
            if first or value < share:
                share = value
                first = False
    level = share + abs(share) * TIE
    if share < 0.0:
        share = 0.0
    ntied = 0
    for j in range(links_seen):
        d = order[j]
        if unfrozen[d] != 0.0 and left[d] <= level * per[d]:
            tied[ntied] = d
            ntied += 1
    if ntied == 0:
        raise ValueError("max-min solve stopped: no link is a bottleneck")
    return share, ntied


def _crossings(links: NDArray[np.intp], multiplicity: NDArray[np.float64], size: int,
               with_pad: bool) -> tuple[NDArray[np.float64], NDArray[np.int64],
                                        NDArray[np.int64]]:
    """The flows crossing each of ``size`` links (summed multiplicities) and, in CSR form,
    the rows on each link in row order (``owner[on_link[d]:on_link[d + 1]]``); the
    padding link (the last) counted only ``with_pad``."""
    flows, width = links.shape
    pad = size - 1
    count = np.zeros(size)
    on_link = np.zeros(size + 1, dtype=np.int64)
    for i in range(flows):
        for k in range(width):
            d = links[i, k]
            if with_pad or d != pad:
                count[d] += multiplicity[i]
                on_link[d + 1] += 1
    for d in range(size):
        on_link[d + 1] += on_link[d]
    slot = on_link[:-1].copy()
    owner = np.empty(flows * width, dtype=np.int64)
    for i in range(flows):
        for k in range(width):
            d = links[i, k]
            if with_pad or d != pad:
                owner[slot[d]] = i
                slot[d] += 1
    return count, on_link, owner


_SOLVERS: dict[str, Callable[..., Any]] | None = None
AVAILABLE = (not os.environ.get("SIMCOLL_NO_JIT")
             and importlib.util.find_spec("numba") is not None)
"""Whether the general regime may use the compiled solvers: numba is installed and
``SIMCOLL_NO_JIT`` is not set. numba itself is imported only once a process has given
the pure solvers :data:`WARMUP` of work, not with simcoll; if that import fails the pure
solvers go on, after a warning."""

WARMUP = 1_000_000
"""Route entries (flows x links per route, summed over solves) the pure solvers take in a
process before the compiled ones are loaded. Loading them (importing numba and its cached
machine code) costs about 0.5 s once per process here, as much as the pure solvers spend
on roughly a million entries, so short runs never pay it and long ones switch early; the
rates are the same either way, so switching mid-run changes nothing else."""

_work = 0


def add_work(work: int) -> None:
    """Count ``work`` route entries the pure solvers took, toward :data:`WARMUP`."""
    global _work
    _work += work


def solver(kind: str, work: int = 0) -> Callable[..., Any] | None:
    """A compiled function for ``work`` route entries, or None where numba is not
    available or while the process has not yet given the pure solvers :data:`WARMUP` of
    work (this call's included).

    ``kind`` is ``"rows"`` (:func:`fill_rows`) or ``"arrays"`` (:func:`fill_arrays_rows`),
    each called as ``(links, capacity, multiplicity or None)``; ``"weighted_rows"`` or
    ``"weighted_arrays"`` (their weighted siblings in
    :mod:`simcoll.network.weighted_kernels`, called as ``(links, capacity, weights,
    multiplicity as floats)``); or ``"resolve"``
    (:func:`simcoll.network.resolve_kernel.resolve`, with its own arguments).
    """
    global _SOLVERS, AVAILABLE, _work
    if not AVAILABLE:
        return None
    if _SOLVERS is None:
        _work += work
        if _work < WARMUP:
            return None
        try:
            import numba
        except ImportError as error:
            AVAILABLE = False
            warnings.warn(f"numba is installed but cannot be imported ({error}); simcoll "
                          f"runs its pure max-min solvers", RuntimeWarning, stacklevel=2)
            return None
        _import_numpy_support_without_blas()
        _SOLVERS = _compile(numba)
    return _SOLVERS[kind]


_BLAS = "scipy.linalg.cython_blas"


def _import_numpy_support_without_blas() -> None:
    """Import numba's numpy support (``numba.np.arraymath``) as if SciPy's BLAS were absent,
    unless it is imported already.

    On import that module probes for BLAS by importing ``scipy.linalg.cython_blas``, which
    costs about 0.25 s where SciPy is installed (measured here, numba 0.68.1). The kernels
    here use no BLAS, so the probe is answered "absent" by a ``None`` entry in
    ``sys.modules`` for the length of the import, then the entry is removed: SciPy's BLAS
    imports as usual afterwards. The one effect on other numba code of the process is that
    numba's compiled ``np.correlate`` and ``np.convolve`` then take their inner products
    in a loop instead of through BLAS (the same results up to rounding); and another
    thread that imports SciPy's BLAS during that import (35 - 200 ms, once a process)
    gets an ImportError.
    """
    if "numba.np.arraymath" in sys.modules or _BLAS in sys.modules:
        return
    sys.modules[_BLAS] = None  # type: ignore[assignment]  # import then raises ImportError
    try:
        importlib.import_module("numba.np.arraymath")
    finally:
        if sys.modules.get(_BLAS, _BLAS) is None:
            del sys.modules[_BLAS]


KERNEL_MODULES = ("compiled", "resolve_kernel", "weighted_kernels")
"""The modules whose functions numba compiles, all cached in this package's
``__pycache__``."""

KERNEL_SOURCES = (*KERNEL_MODULES, "maxmin", "weighted")
"""The modules the compiled code is made from: the kernels', and those whose constants
numba bakes into them (``maxmin.TIE``, ``weighted.REFRESH``)."""


def _drop_stale_cache(package: Path) -> None:
    """Delete numba's cached code of :data:`KERNEL_MODULES` in ``package/__pycache__``
    unless it was made from the present sources of :data:`KERNEL_SOURCES` (a digest of
    them is kept there). Nothing happens where the directory cannot be written."""
    digest = hashlib.sha256(b"".join((package / f"{name}.py").read_bytes()
                                     for name in KERNEL_SOURCES)).hexdigest()
    cache = package / "__pycache__"
    stamp = cache / "simcoll-kernels.sha256"
    try:
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for name in KERNEL_MODULES:
            for path in [*cache.glob(f"{name}.*.nbi"), *cache.glob(f"{name}.*.nbc")]:
                path.unlink()
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        return


def _compile(numba: Any) -> dict[str, Callable[..., Any]]:
    from simcoll.network import resolve_kernel, weighted_kernels

    _drop_stale_cache(Path(__file__).parent)

    # The solvers call their helpers (_crossings, ..., pairwise_sum) by their global
    # names, and resolve calls the solvers by theirs: compiled, they need them compiled (called
    # from Python, a compiled function does what the plain one does). This module keeps
    # its plain solvers under their names.
    jit = numba.njit(cache=True, nogil=True)
    # numpy's error model where the pure code divides numpy floats: x / 0 is inf or NaN.
    numpy_jit = numba.njit(cache=True, nogil=True, error_model="numpy")
    for name in ("_crossings", "_crossing_order", "_bottlenecks"):
        if not hasattr(globals()[name], "py_func"):  # not compiled yet in this process
            globals()[name] = jit(globals()[name])
        setattr(weighted_kernels, name, globals()[name])
    for name in ("pairwise_sum", "_block_sum"):
        plain = getattr(weighted_kernels, name)
        if not hasattr(plain, "py_func"):
            setattr(weighted_kernels, name, jit(plain))
    rows, arrays = jit(fill_rows), jit(fill_arrays_rows)
    resolve_kernel.fill_rows, resolve_kernel.fill_arrays_rows = rows, arrays
    resolve_kernel.fill_weighted_rows = jit(weighted_kernels.fill_weighted_rows)
    resolve_kernel.fill_arrays_weighted_rows = numpy_jit(
        weighted_kernels.fill_arrays_weighted_rows)
    resolve = numpy_jit(resolve_kernel.resolve)

    def on_rows(links: NDArray[np.intp], capacity: NDArray[np.float64],
                multiplicity: NDArray[np.intp] | None) -> NDArray[np.float64]:
        return rows(links, capacity, _as_floats(multiplicity, len(links)))

    def on_arrays(links: NDArray[np.intp], capacity: NDArray[np.float64],
                  multiplicity: NDArray[np.intp] | None) -> NDArray[np.float64]:
        return arrays(links, capacity, _as_floats(multiplicity, len(links)))

    # numba compiles (or loads) each on its first call, mid-run: Ctrl-C kept from being
    # lost in llvmlite's callbacks
    return {kind: guard_first_call(kernel) for kind, kernel in (
        ("rows", on_rows), ("arrays", on_arrays), ("resolve", resolve),
        ("weighted_rows", resolve_kernel.fill_weighted_rows),
        ("weighted_arrays", resolve_kernel.fill_arrays_weighted_rows))}


def _as_floats(multiplicity: NDArray[np.intp] | None, rows: int) -> NDArray[np.float64]:
    return np.ones(rows) if multiplicity is None else multiplicity.astype(np.float64)
