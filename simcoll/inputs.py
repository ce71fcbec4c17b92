"""The checks ``simulate`` runs on its arguments before any work is done.

Each check names the bad value and what would be accepted, and turns what it accepts into
the form the run uses (numpy integers to ``int``, sizes to bytes); :meth:`Inputs.for_algorithm`
then turns the arrays into read-only views that nobody can make writeable
(:func:`simcoll.buffers.sealed`), once the memory check has counted the copies that
takes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcoll.buffers import Buffer, VirtualBuffer, sealed
from simcoll.checks import COUNTER_LIMIT, integer, largest_input, real, shown
from simcoll.collectives import Collective, Splits
from simcoll.dtypes import as_dtype
from simcoll.errors import InvalidInputError
from simcoll.ops import ReduceOp
from simcoll.topology.graph import Topology
from simcoll.uneven import (
    abbreviated,
    as_splits,
    check_nbytes,
    check_splits,
    refuse_sizes_of_even,
    splits_of_arrays,
)
from simcoll.units import parse_size

__all__ = ["Inputs", "check_topology", "check_inputs", "check_root", "check_limits",
           "check_counters", "largest_input", "sealing_copies", "COUNTER_LIMIT"]


@dataclass(frozen=True)
class Inputs:
    """What the ranks start from.

    Attributes:
        arrays: the user's arrays (data mode), else None.
        buffers: each rank's input: its array as given (data mode) until :meth:`sealed`
            makes it the algorithm's read-only view, or a VirtualBuffer (data-free
            mode).
        dtype, nbytes, count: element type, bytes and elements of each rank's input (for
            a v-collective: the mean input bytes, rounded down, and the largest count).
        splits: a v-collective's sizes in elements (:mod:`simcoll.uneven`), else None.
    """

    arrays: list[np.ndarray] | None
    buffers: list[Buffer]
    dtype: np.dtype
    nbytes: int
    count: int
    splits: Splits | None = None

    def for_algorithm(self) -> Inputs:
        """These inputs as the algorithm holds them: each array a read-only view nobody
        can make writeable (:func:`~simcoll.buffers.sealed`), an array given to several
        ranks sealed once (an array that is not contiguous is copied then: check the
        memory before, :func:`simcoll.memory.data_mode_bytes` with
        :func:`sealing_copies`)."""
        if self.arrays is None:
            return self
        views: dict[int, np.ndarray] = {}
        buffers: list[Buffer] = []
        for x in self.arrays:   # each rank an array object of its own, as given
            view = views.get(id(x))
            buffers.append(view.view() if view is not None else
                           views.setdefault(id(x), sealed(x)))
        return dataclasses.replace(self, buffers=buffers)


def sealing_copies(arrays: list[np.ndarray]) -> int:
    """The bytes :meth:`Inputs.for_algorithm` copies: each array that is not contiguous,
    once."""
    return sum({id(x): x.nbytes for x in arrays if not x.flags.c_contiguous}.values())


def check_topology(topology: Any) -> Topology:
    """``topology`` if it is a valid, connected simcoll Topology."""
    if isinstance(topology, str):
        raise InvalidInputError(f"topology={topology!r} is a spec, not a Topology; build it "
                                f"with sc.topology.from_spec({topology!r})")
    if not isinstance(topology, Topology):
        raise InvalidInputError(f"topology must be a simcoll Topology, got "
                                f"{type(topology).__name__}")
    topology.validate()
    return topology


def _rank_arrays(data: Any, p: int) -> list[np.ndarray]:
    """``data`` as one 1-D numpy array per rank, each of a dtype simcoll takes."""
    if isinstance(data, np.ndarray) or not isinstance(data, Sequence):
        raise InvalidInputError(
            f"data must be a list of {p} numpy arrays (one per rank), got {type(data).__name__}")
    if len(data) != p:
        raise InvalidInputError(f"data has {len(data)} arrays but the topology has {p} ranks; "
                                f"pass exactly one array per rank")
    for r, x in enumerate(data):
        if not isinstance(x, np.ndarray):
            raise InvalidInputError(f"data[{r}] is a {type(x).__name__}, not a numpy array")
        if type(x) is not np.ndarray:  # a masked array's mask would go unread
            masked = isinstance(x, np.ma.MaskedArray)
            raise InvalidInputError(f"data[{r}] is a {type(x).__name__}, a subclass of numpy's "
                                    f"array whose extras (a mask, a file, ...) the run would "
                                    f"not keep; pass plain arrays: np.asarray(x)"
                                    + (", or x.filled(...) to set what the masked elements "
                                       "hold" if masked else ""))
        if x.ndim != 1:
            raise InvalidInputError(f"data[{r}] has shape {x.shape}; pass 1-D arrays "
                                    f"(use x.ravel())")
        as_dtype(x.dtype, f"data[{r}] dtype")
    return list(data)


def _check_arrays(data: Any, p: int) -> list[np.ndarray]:
    arrays = _rank_arrays(data, p)
    for r, x in enumerate(arrays):
        if x.dtype != arrays[0].dtype or x.shape != arrays[0].shape:
            raise InvalidInputError(
                f"data[{r}] is {x.dtype}{list(x.shape)} but data[0] is "
                f"{arrays[0].dtype}{list(arrays[0].shape)}; every rank needs the same shape "
                f"and dtype")
    return arrays


def _check_uneven_arrays(coll: Collective, data: Any, p: int) -> list[np.ndarray]:
    """One array per rank, all of one dtype; all of one length where the collective
    needs that (reduce_scatterv)."""
    arrays = _rank_arrays(data, p)
    for r, x in enumerate(arrays):
        if x.dtype != arrays[0].dtype:
            raise InvalidInputError(f"data[{r}] is {x.dtype} but data[0] is "
                                    f"{arrays[0].dtype}; every rank needs the same dtype")
        if coll.name == "reduce_scatterv" and x.shape != arrays[0].shape:
            raise InvalidInputError(f"data[{r}] has {x.size} elements but data[0] has "
                                    f"{arrays[0].size}; reduce_scatterv reduces arrays of "
                                    f"one length")
    return arrays


def check_inputs(p: int, data: Any, nbytes: Any, dtype: Any, coll: Collective,
                 splits: Any = None) -> Inputs:
    """The ranks' inputs, from ``data`` (data mode) or ``nbytes`` and ``dtype``, and for a
    v-collective its ``splits`` (:mod:`simcoll.uneven`).

    Raises:
        InvalidInputError: both of data and nbytes, or neither (a barrier may be given
            neither); arrays of the wrong number,
            shape or dtype; a size that is not whole elements, or so large that traffic
            counters could overflow; splits for a collective without them, or sizes of
            the wrong shape for a v-collective; a size above 0 for a barrier.
    """
    # a barrier moves nothing: it may be given neither (never both)
    if (data is None) == (nbytes is None) and (coll.name != "barrier" or data is not None):
        raise InvalidInputError("pass exactly one of data= (arrays, data mode) or nbytes= "
                                "(sizes only, data-free mode)")
    if coll.uneven is not None:
        return _uneven_inputs(p, data, nbytes, dtype, coll, splits)
    if splits is not None:
        check_splits(coll, splits, p)
    refuse_sizes_of_even(coll, nbytes)
    if data is not None:
        arrays = _check_arrays(data, p)
        dt = arrays[0].dtype
        size = arrays[0].nbytes
        buffers: list[Buffer] = list(arrays)
    else:
        arrays = None
        dt = as_dtype(dtype, "dtype")
        size = _check_size(0 if nbytes is None else nbytes, dt)
    if coll.name == "barrier" and size:
        raise InvalidInputError(f"a barrier moves no data, but {shown(size)} bytes per rank were "
                                f"given; leave nbytes= and data= out")
    check_counters(size, p)
    if arrays is None:
        buffers = [VirtualBuffer.of(size // dt.itemsize, dt)] * p
    return Inputs(arrays, buffers, dt, size, size // dt.itemsize)


def check_counters(size: int, p: int, largest: bool = False, name: str = "nbytes") -> None:
    """Refuse inputs of ``size`` bytes (the largest input, for a v-collective: ``largest``;
    the argument ``name`` otherwise) on p ranks whose traffic could overflow the int64
    counters.

    Every algorithm here moves less than 2 p^2 input buffers in all, so no counter (a
    rank's, a host's or a link's) passes 2 p^2 ``size`` bytes.

    Raises:
        InvalidInputError: 2 p^2 ``size`` >= 2^63, naming the size and the largest one
            accepted.
    """
    if size > largest_input(p):
        subject = f"a rank's input of {shown(size)} bytes" if largest else \
            f"{name}={shown(size)}"
        most = largest_input(p)
        fix = (f"use {'inputs' if largest else name} < {most + 1}" if most > 1 else
               f"use fewer ranks (at most {math.isqrt(COUNTER_LIMIT // 4)} for any bytes)")
        raise InvalidInputError(
            f"{subject} on {p} ranks could overflow the int64 traffic counters; {fix}")


def _uneven_inputs(p: int, data: Any, nbytes: Any, dtype: Any, coll: Collective,
                   splits: Any) -> Inputs:
    """A v-collective's inputs: arrays and ``splits=`` in elements, or ``nbytes=``."""
    assert coll.uneven is not None
    if data is not None:
        arrays: list[np.ndarray] | None = _check_uneven_arrays(coll, data, p)
        assert arrays is not None
        dt = arrays[0].dtype
        shape = splits_of_arrays(coll, arrays, splits)
    else:
        if splits is not None:
            raise InvalidInputError(
                f"splits={abbreviated(splits)} is not accepted without data=: in data-free "
                f"mode {coll.name} takes its sizes as nbytes= in bytes")
        arrays = None
        dt = as_dtype(dtype, "dtype")
        shape = as_splits(check_nbytes(coll, nbytes, p, dt.itemsize) // dt.itemsize)
    counts = coll.uneven.inputs(shape)
    check_counters(max(counts) * dt.itemsize, p, largest=True)
    if arrays is None:
        buffers: list[Buffer] = [VirtualBuffer.of(c, dt) for c in counts]
    else:
        buffers = list(arrays)
    return Inputs(arrays, buffers, dt, sum(counts) * dt.itemsize // p, max(counts), shape)


def _check_size(nbytes: Any, dtype: np.dtype) -> int:
    """One size (bytes, a whole float, a size string or a 0-d array of one) as an int."""
    if isinstance(nbytes, np.ndarray) and nbytes.ndim == 0:
        nbytes = nbytes[()]
    if isinstance(nbytes, np.integer) and not isinstance(nbytes, np.bool_):
        nbytes = int(nbytes)
    try:
        size = parse_size(nbytes)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInputError(f"nbytes={shown(nbytes)} is not accepted: {exc}") from None
    if size % dtype.itemsize:
        raise InvalidInputError(f"nbytes={shown(size)} is not a multiple of the {dtype} item size "
                                f"({dtype.itemsize} bytes)")
    return size


def check_root(coll: Collective, root: Any, p: int, name: str = "root") -> int | None:
    """The root rank of a rooted collective (0 if not given; ``name`` the argument that
    gave it: ``root``, or torch's ``src`` or ``dst``); None for the others.

    Raises:
        InvalidInputError: a root that is not a rank, or a root for a collective that has
            none.
    """
    if not coll.rooted:
        if root is not None:
            raise InvalidInputError(f"{coll.name} has no root, but root={root!r} was given; "
                                    f"root= is for broadcast, reduce, gather and scatter")
        return None
    return 0 if root is None else integer(root, name, minimum=0, maximum=p - 1,
                                          what="a rank")


def check_op(coll: Collective, op: Any) -> ReduceOp:
    """The reduction of a reducing collective (SUM if not given); SUM, unused, for the
    others, which refuse one given.

    Raises:
        InvalidInputError: an unknown op, or an op for a collective that does not reduce.
    """
    if not coll.reduces:
        if op is not None:
            raise InvalidInputError(f"{coll.name} does not reduce, but op={op!r} was given; "
                                    f"op= is for all_reduce, reduce_scatter, reduce and "
                                    f"reduce_scatterv")
        return ReduceOp.SUM
    return ReduceOp.SUM if op is None else ReduceOp.parse(op)


def check_limits(until: Any, max_events: Any) -> tuple[float, int]:
    """The run's simulated-time and event limits."""
    limit = real(until, "until", strict=True, allow_inf=True, what="simulated seconds")
    events = integer(max_events, "max_events", minimum=1)
    return limit, events
