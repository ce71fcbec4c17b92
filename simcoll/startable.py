"""Collectives started from inside a rank program (``comm.all_reduce(...)`` and friends).

A started collective is the registered algorithm's rank program run as a program of its
own (:meth:`Comm.start`) on a communicator with the caller's members and a fresh matching
context. The context is the n-th collective started on the caller's communicator, so
ranks that start the same collectives in the same order (as NCCL requires) meet in the
same context, and messages of collectives running side by side never match each other.
Every member must start it with the same arguments (algorithm, op, root, splits,
parameters); one that does not is refused, naming the first member's.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import numpy as np
from simpy.events import Event

from simcoll.algorithms.registry import get_algorithm
from simcoll.buffers import VirtualBuffer, frozen, sealed
from simcoll.checks import integer
from simcoll.collectives import Collective, Splits, check_output, root_argument
from simcoll.collectives import collective as get_collective
from simcoll.dtypes import as_dtype
from simcoll.errors import CommUsageError, InvalidInputError, SimCollError
from simcoll.inputs import check_counters, check_op
from simcoll.ops import ReduceOp
from simcoll.uneven import abbreviated, check_splits, what_it_takes

if TYPE_CHECKING:
    from simcoll.comm import Comm

__all__ = ["start_collective"]


_MAY_COME_EMPTY = ("barrier",)
"""Collectives a rank may start with ``x=None``: a barrier's ranks. Every rank of a
broadcast or scatter passes a buffer of the root's count and dtype, as torch's do (only
the root's contents are read; its algorithms size their steps by it on every rank)."""


def _dtype(x: Any) -> Any:
    return np.dtype(np.uint8) if x is None else x.dtype


def _finished(program: Generator[Event, Any, Any], op: ReduceOp,
              p: int) -> Generator[Event, Any, Any]:
    """The program, its output finished by ``op`` (an integer AVG's sum divided by p)."""
    out = yield from program
    # read-only, as every started collective's output (an integer AVG's is a new array)
    return frozen(op.finish(out, p)) if isinstance(out, np.ndarray) else out


def _shape(comm: Comm, coll: Collective, x: Any, splits: Any) -> Splits | None:
    """A started v-collective's splits, checked against this rank's buffer."""
    if coll.uneven is None:
        if splits is not None:
            check_splits(coll, splits, comm.size)
        return None
    if splits is None:
        raise InvalidInputError(f"{coll.name} needs splits= (every rank must know every "
                                f"rank's sizes): {what_it_takes(coll, 'elements')}")
    checked = check_splits(coll, splits, comm.size)
    need = coll.uneven.inputs(checked)[comm.rank]
    if x is None or int(x.size) != need:
        raise InvalidInputError(f"x has {None if x is None else int(x.size)} elements but "
                                f"splits={abbreviated(checked)} give rank {comm.rank} an "
                                f"input of {need}")
    return checked


Said = tuple[str, tuple[int | None, str, str] | None, str, tuple[tuple[str, Any], ...]]
"""What the members of a started collective must say alike: the collective, its buffer's
count, dtype and kind (data or data-free) where they must agree (the dtype and kind
alone for the v-collectives), the algorithm and its keywords by name."""


def _arguments(arguments: Said) -> str:
    """What every member of a started collective must pass alike, as it reads."""
    name, shape, algorithm, kwargs = arguments
    shown = [name if shape is None else f"{name} of {_buffer(shape)}",
             f"algorithm={algorithm!r}"]
    for name, value in kwargs:
        shown.append(f"{name}={value.name if isinstance(value, ReduceOp) else value!r}")
    return ", ".join(shown)


def _buffer(shape: tuple[int | None, str, str]) -> str:
    """A buffer's count, dtype and kind as they read (the dtype alone without a count;
    ``data-free`` where it holds sizes only)."""
    count, dtype, kind = shape
    elements = f"{dtype} elements" if count is None else f"{count} {dtype} elements"
    return elements if kind == "data" else f"{elements} ({kind})"


def start_collective(comm: Comm, collective: str, x: Any, algorithm: str,
                     op: ReduceOp | str | None, root: int | None, src: int | None,
                     dst: int | None, params: dict[str, Any], splits: Any = None) -> Event:
    """Start ``algorithm`` of ``collective`` for ``comm``'s rank; see ``Comm.collective``."""
    if comm.rank >= comm.size:
        raise CommUsageError(f"{comm._endpoint} cannot start collectives; only GPU ranks "
                             f"can")
    try:
        coll = get_collective(collective)
        if coll.name in _MAY_COME_EMPTY and x is not None:  # as simulate refuses data=
            raise InvalidInputError(f"a {coll.name} moves no data; pass x=None, not "
                                    f"{type(x).__name__} {x!r:.60}")
        if not (isinstance(x, (np.ndarray, VirtualBuffer))
                or (x is None and coll.name in _MAY_COME_EMPTY)):
            raise InvalidInputError(f"{coll.name} needs x, this rank's buffer (a numpy "
                                    f"array or a VirtualBuffer); got {x!r}")
        if isinstance(x, np.ndarray) and x.ndim != 1:  # as simulate refuses data=
            raise InvalidInputError(f"x has shape {x.shape}; pass 1-D arrays (use "
                                    f"x.ravel())")
        if x is not None:  # bool, complex and objects, as simulate refuses them
            as_dtype(_dtype(x), "x's dtype")
        spec = get_algorithm(coll.name, algorithm)
        reduce_op = check_op(coll, op)
        root = root_argument(coll, root, src, dst)
        shape = _shape(comm, coll, x, splits)
        # The largest input, as simulate checks and passes it: a v-collective's ranks'
        # buffers differ, and every rank must judge the same count.
        count = 0 if x is None else int(x.size)
        if shape is not None and coll.uneven is not None:
            count = max(coll.uneven.inputs(shape))
        if x is not None:
            check_counters(count * _dtype(x).itemsize, comm.size, largest=True)
    except SimCollError as exc:
        raise CommUsageError(f"{comm._who}: {exc}") from None
    if spec.host is not None and comm.hosts:
        raise CommUsageError(f"{comm._who}: {coll.name}/{algorithm} runs programs on "
                             f"this machine's server hosts, which only a top-level "
                             f"simulate() starts; start it on a group of GPUs, whose "
                             f"servers are ranks")
    nodes = tuple(comm.node_of(r) for r in range(comm.size))
    try:
        checked = spec.check(comm.size, count, 0, nodes, params)
        if spec.resolve is not None:
            checked = spec.resolved(comm.topology, comm.world_ranks(),
                                    VirtualBuffer.of(count, _dtype(x)), checked,
                                    reduce_op if coll.reduces else None, started=True)
        kwargs = spec.arguments(checked)
    except SimCollError as exc:
        raise CommUsageError(f"{comm._who}: {exc}") from None
    if coll.reduces:
        kwargs["op"] = reduce_op
    if coll.rooted:
        # An int, as simulate takes it: True ran as rank 1, 1.5 deadlocked, 2.0 broke
        # the binomial trees' bit arithmetic.
        try:
            kwargs["root"] = 0 if root is None else integer(
                root, "root", minimum=0, maximum=comm.size - 1,
                what="a rank of this communicator")
        except InvalidInputError as exc:
            raise CommUsageError(f"{comm._who}: {exc}") from None
    elif root is not None:
        raise CommUsageError(f"{comm._who}: {coll.name} has no root")
    if shape is not None:
        kwargs["splits"] = shape
    sub = comm.fresh_context()
    # Every member passes a buffer of one count and dtype (NCCL's count and datatype),
    # but for the v-collectives, whose sizes differ by rank (one dtype), and a barrier.
    buffer = None if coll.name in _MAY_COME_EMPTY else \
        (None if coll.uneven is not None else count, str(_dtype(x)),
         "data-free" if isinstance(x, VirtualBuffer) else "data")
    said: Said = (coll.name, buffer, algorithm, tuple(sorted(kwargs.items())))
    sub.agree("started a collective", said, _arguments)
    if spec.in_network is not None:
        # The in-network devices' programs (NCCL's NVSwitches, SHARP switches): started
        # once, by the first member to start the collective.
        device_program, like_x = spec.in_network, VirtualBuffer.of(count, _dtype(x))
        sub.start_devices(lambda device: device_program(device, like_x, **kwargs))
    if coll.reduces:
        x = reduce_op.prepare(x, comm.size)
    program = spec.fn(sub, _held(comm, x), **kwargs)
    if reduce_op is ReduceOp.AVG and coll.reduces:
        program = _finished(program, reduce_op, comm.size)
    reference = coll if shape is None else coll.shaped(shape)
    expected = reference.out_count(comm.size, 0 if x is None else int(x.size), comm.rank,
                                   kwargs.get("root", 0))
    program = _checked(program, expected, _dtype(x), f"{comm._who} in {coll.name}/{algorithm}",
                       isinstance(x, np.ndarray))
    return comm.start(program, name=f"{coll.name}/{algorithm}")


def _checked(program: Generator[Event, Any, Any], expected: int | None, dtype: Any,
             who: str, data: bool) -> Generator[Event, Any, Any]:
    """The program, what it returns checked to be the rank's output, as ``simulate``
    checks a top-level run's (:func:`~simcoll.collectives.check_output`)."""
    out = yield from program
    check_output(out, expected, dtype, who, data=data)
    return out


def _held(comm: Comm, x: Any) -> Any:
    """``x`` as the algorithm holds it, as at the top level: a snapshot (what the caller
    does to x afterwards never reaches it) that nobody can make writeable (the algorithm
    cannot change the caller's array, nor a receiver the array it was sent)."""
    held = comm.snapshot(x)
    return sealed(held) if type(held) is np.ndarray else held
