"""``simulate``: run one collective on a topology and check what it did.

Every argument is checked before the run starts (:mod:`simcoll.inputs`). One process runs
per rank (and per server host, for algorithms that use hosts) on an
:class:`~simcoll.execution.Execution`, which reports deadlocks, lost messages, failing
programs and runs past their limits.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from simcoll.algorithms.registry import AlgorithmSpec, get_algorithm
from simcoll.buffers import VirtualBuffer, memory_owner, owned
from simcoll.check import compare
from simcoll.checks import flag
from simcoll.collectives import Collective, check_output, root_argument
from simcoll.collectives import collective as get_collective
from simcoll.errors import InvalidInputError
from simcoll.execution import Execution
from simcoll.faults import Faults
from simcoll.inputs import (
    Inputs,
    check_inputs,
    check_op,
    check_root,
    check_topology,
    sealing_copies,
)
from simcoll.lone_flows import time_without_events
from simcoll.memory import (
    NCCL_SLICE_BYTES_PER_MIB,
    data_mode_bytes,
    in_gib,
    memory_limit,
    nccl_slice_bytes,
    shortfall,
)
from simcoll.ops import ReduceOp
from simcoll.result import Result
from simcoll.topology.graph import Topology

__all__ = ["simulate"]


def simulate(topology: Topology, collective: str, *, algorithm: str,
             data: Sequence[np.ndarray] | None = None,
             nbytes: int | np.integer[Any] | str | Sequence[Any] | np.ndarray | None = None,
             dtype: Any = np.float32, op: ReduceOp | str | None = None,
             root: int | np.integer[Any] | None = None, src: int | np.integer[Any] | None = None,
             dst: int | np.integer[Any] | None = None,
             splits: Any = None, network: str = "flow", check: bool = True,
             trace: bool = False, until: float = 1e6, max_events: int = 10**9,
             faults: Faults | None = None, **params: Any) -> Result:
    """Run one collective on ``topology`` and return its time, traffic and correctness.

    Args:
        topology: the machine; its GPUs are the ranks.
        collective: ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``broadcast``,
            ``reduce``, ``all_to_all``, ``gather``, ``scatter`` or ``barrier``; torch's
            ``all_gather_into_tensor``, ``reduce_scatter_tensor`` and
            ``all_to_all_single`` name the same collectives (``Result.collective`` holds
            the name above); or one with sizes that differ between ranks:
            ``all_gatherv``, ``reduce_scatterv``, ``all_to_allv`` (see ``splits``).
        algorithm: a registered algorithm name for that collective.
        data: one 1-D array per rank (data mode). Exclusive with ``nbytes``. Refused
            where the inputs and outputs alone exceed the machine's memory
            (:mod:`simcoll.memory`).
        nbytes: each rank's input buffer size in bytes, or a size string like "256MiB"
            (data-free mode: sizes only; memory grows with the messages in flight, about
            3 KB each, p^2 of them at once for algorithms that send to every rank at
            once, such as naive all_reduce and direct all_to_all, and for NCCL's rings
            about 500 B per MiB of a rank's larger buffer (all_gather's output), as a
            ring's first step sends a block's slices before the next rank takes them,
            refused before the run where that exceeds this machine's memory; any run
            stops with a MemoryError where the machine's memory runs low,
            :mod:`simcoll.memory`). For the v-collectives, bytes per rank (all_gatherv:
            each rank's input; reduce_scatterv: each rank's output block, the input
            being their sum) or a p x p matrix of bytes per pair
            (all_to_allv: ``nbytes[i][j]`` from rank i to rank j).
        splits: the v-collectives' sizes in elements with ``data=``: p counts
            (reduce_scatterv: the output blocks; all_gatherv: optional, the arrays'
            lengths) or the p x p matrix of all_to_allv (its rows are torch's input split
            sizes, its columns the output split sizes). Refused for other collectives.
        dtype: element type in data-free mode (ignored in data mode).
        op: reduction (``ReduceOp`` or its name; default SUM) for reducing collectives;
            refused for the others.
        root: root rank for broadcast, reduce, gather and scatter (default 0); refused
            for collectives without a root.
        src, dst: torch's names for the root: ``src=`` for broadcast and scatter,
            ``dst=`` for reduce and gather (give one of them or ``root=``, not both).
        network: network model, ``"flow"`` (default: max-min fair sharing),
            ``"flow_rtt"`` (shares in proportion to 1 / route latency, TCP-like) or
            ``"analytical"`` (no contention).
        check: compare outputs with numpy (data mode), after refusing any rank's
            output that is not a buffer of the collective's count and dtype
            (``AlgorithmError`` naming the rank; without data too). ``check=False``
            returns what the programs returned, whatever it is.
        trace: record every message and compute span, and every reduction that takes time
            (none on engines of infinite rate, the builders' default), in ``Result.trace``
            (see :mod:`simcoll.trace` for Chrome / Perfetto export).
        until: stop with ``RunLimitError`` past this many simulated seconds (default
            10^6 s, about 11.6 days; ``math.inf`` for no limit).
        max_events: stop with ``RunLimitError`` after this many events (default 10^9:
            the event loop's events, and apart from them the operations that take no
            time such as ``compute(0)``, each counted up to this many), or after
            max_events / 1000 in a row (at least 10^6 + 64 e^2, e the ranks plus any
            server hosts and in-network switches) at one simulated instant: a loop of
            work that takes no time.
        faults: link failures and slow-downs, slow or late GPUs, message jitter
            (:class:`~simcoll.faults.Faults`).
        **params: algorithm parameters (``chunks=``, ``servers=``, ...).

    Returns:
        A :class:`~simcoll.result.Result`.

    Raises:
        InvalidInputError, UnknownCollectiveError, UnknownAlgorithmError,
        UnknownNetworkError, TopologyError: bad input (data that cannot fit in memory
            included), before the run starts.
        DeadlockError: ranks still waiting when no event is left.
        UnmatchedMessageError: messages sent but never received.
        AlgorithmError: an algorithm raised; the message names the rank.
        RunLimitError: the run went past ``until`` or ``max_events``; the message names
            the ranks still running (none, where every program returned and work one did
            not wait for, compute or a reduction, ends past ``until``).
        LinkFailureError: a link failed and messages in flight across it, or sent
            later, have no route around it.
        MemoryError: the machine, or the process's control group under its memory
            limit, has almost no memory left (:mod:`simcoll.memory`): the run stopped
            before an out-of-memory killer would end it.
    """
    coll = get_collective(collective)
    spec = get_algorithm(coll.name, algorithm)
    topology = check_topology(topology)
    check = flag(check, "check")
    p = topology.nranks
    reduce_op = check_op(coll, op)
    the_root = check_root(coll, root_argument(coll, root, src, dst), p,
                          "src" if src is not None else "dst" if dst is not None else "root")
    inputs = check_inputs(p, data, nbytes, dtype, coll, splits)
    if inputs.arrays is not None:
        _refuse_what_cannot_fit(coll, p, inputs, the_root or 0)
        inputs = inputs.for_algorithm()
    elif spec.name == "nccl":
        at = the_root or 0   # a rooted collective's largest output is its root's
        largest = max(inputs.count, coll.out_count(p, inputs.count, at, at) or 0)
        _refuse_slices_that_cannot_fit(inputs.count * inputs.dtype.itemsize,
                                       largest * inputs.dtype.itemsize)
    params = spec.check(p, inputs.count, len(topology.hosts), topology.gpu_nodes, params)
    shape = VirtualBuffer.of(inputs.count, inputs.dtype)
    requested = dict(params)
    if spec.resolve is not None:
        params = spec.resolved(topology, tuple(range(p)), shape, params,
                               reduce_op if coll.reduces else None)
    kwargs = spec.arguments(params)
    buffers = inputs.buffers
    if coll.reduces:
        kwargs["op"] = reduce_op
        buffers = [reduce_op.prepare(x, p) for x in buffers]
    if the_root is not None:
        kwargs["root"] = the_root
    if inputs.splits is not None:
        kwargs["splits"] = inputs.splits

    run = Execution(topology, network=network, trace=trace, until=until,
                    max_events=max_events, faults=faults, inputs=tuple(inputs.arrays or ()),
                    what=f"{coll.name}/{algorithm}")
    size = None
    if coll.uneven is not None and inputs.splits is not None:
        size = coll.uneven.algbw_count(inputs.splits) * inputs.dtype.itemsize

    def result(outputs: list[Any] | None, correct: bool | None,
               max_error: float | None) -> Result:
        return Result.from_run(
            run, outputs, coll=coll, algorithm=algorithm, nbytes=inputs.nbytes,
            dtype=str(inputs.dtype), op=reduce_op.name if coll.reduces else None,
            params=dict(params), correct=correct, max_error=max_error,
            splits=inputs.splits, size=size, requested=requested, root=the_root)

    shaped = {} if inputs.splits is None else {"splits": inputs.splits}
    # Only the GPUs' programs have a timeline: an algorithm with programs of its own on
    # the hosts or in the network runs them in the event loop.
    if (inputs.arrays is None or spec.outputs is not None) and spec.host is None \
            and spec.in_network is None and time_without_events(
                run, spec.timeline, inputs.count, inputs.dtype.itemsize,
                {**spec.arguments(params), **shaped}):
        if inputs.arrays is None:
            return result(None, None, None)
        assert spec.outputs is not None
        # An overflow, or inf - inf, is the data's and the check judges it: no warning.
        with np.errstate(over="ignore", invalid="ignore"):
            values = spec.outputs(buffers, **kwargs)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            values = _run_programs(run, spec, buffers, shape, kwargs)
    if check:   # what the programs (or ``outputs``) returned, data-free runs' too
        reference = coll if inputs.splits is None else coll.shaped(inputs.splits)
        _check_returned(reference, values, inputs.count, inputs.dtype, the_root or 0,
                        run.runtime.what, inputs.arrays is not None)
    if inputs.arrays is None:
        return result(None, None, None)

    finished: dict[int, Any] = {}
    for value in values:
        if coll.reduces and isinstance(value, np.ndarray) and id(value) not in finished:
            finished[id(value)] = reduce_op.finish(value, p)
    outputs = [finished.get(id(value), value) for value in values]
    correct = max_error = None
    if check:
        reference = coll if inputs.splits is None else coll.shaped(inputs.splits)
        correct, max_error = compare(reference, inputs.arrays, outputs, reduce_op,
                                     the_root or 0)
    return result(owned(outputs), correct, max_error)


def _refuse_what_cannot_fit(coll: Collective, p: int, inputs: Inputs, root: int) -> None:
    """Refuse a data-mode run whose inputs (each array once, however many ranks it is
    given to, and the contiguous copy sealing makes of one that is not; of an array
    viewing a file's memory map, an ``np.memmap`` such as ``np.load(..., mmap_mode="r")``
    gives, only the part viewed, which is all the run reads in) and outputs alone exceed
    this machine's memory (:mod:`simcoll.memory`), before a simulation that would end in
    a MemoryError.

    Raises:
        InvalidInputError: naming the estimate and the memory.
    """
    assert inputs.arrays is not None
    held: dict[tuple[int, ...], int] = {}
    for array in inputs.arrays:
        owner = memory_owner(array)
        if isinstance(owner, np.memmap):   # a file's mapping, np.load's mmap_mode=
            # only the part it views is read in, once however many views show it
            start = array.__array_interface__["data"][0]
            held[(id(owner), start, array.nbytes)] = array.nbytes
        else:
            held[(id(owner),)] = owner.nbytes
    problem = shortfall(data_mode_bytes(coll, p, inputs.count, inputs.dtype.itemsize, root,
                                        inputs.splits, sum(held.values())
                                        + sealing_copies(inputs.arrays)))
    if problem:
        raise InvalidInputError(
            f"data= moves real arrays: {coll.name} on {p} ranks of {inputs.count} "
            f"{inputs.dtype} elements each {problem}; pass nbytes= (data-free mode, same "
            f"time and traffic) or smaller arrays")


def _refuse_slices_that_cannot_fit(nbytes: int, buffer_bytes: int) -> None:
    """Refuse a data-free ``algorithm="nccl"`` run of ``nbytes`` per rank whose slices
    (:mod:`simcoll.memory`) of a rank's larger buffer, ``buffer_bytes`` (all_gather's
    output, p x ``nbytes``), exceed what this process can hold
    (:func:`~simcoll.memory.memory_limit`), before a simulation that would end in a
    MemoryError.

    Raises:
        InvalidInputError: naming the size, the estimate and the memory.
    """
    need, found = nccl_slice_bytes(buffer_bytes), memory_limit()
    if found is not None and need > found[0]:
        needed, has = in_gib(need, found[0], 3, "g")
        output = "" if buffer_bytes == nbytes else f" (its output, {buffer_bytes} B)"
        raise InvalidInputError(
            f"nbytes={nbytes}: NCCL's algorithms cut each rank's buffer{output} into "
            f"slices, about {needed} GiB of them here ({NCCL_SLICE_BYTES_PER_MIB} B per "
            f"MiB), more than {found[1]} {has} GiB; simulate a smaller size")


def _check_returned(coll: Collective, values: Sequence[Any], count: int, dtype: np.dtype,
                    root: int, what: str, data: bool) -> None:
    """Refuse what a rank program returned where it is not the rank's output
    (:func:`~simcoll.collectives.check_output`).

    Raises:
        AlgorithmError: naming the rank, what it returned and what was expected.
    """
    p = len(values)
    for rank, value in enumerate(values):
        check_output(value, coll.out_count(p, count, rank, root), dtype,
                     f"rank {rank} in {what}", data=data)


def _run_programs(run: Execution, spec: AlgorithmSpec, buffers: Sequence[Any],
                  shape: VirtualBuffer, kwargs: dict[str, Any]) -> list[Any]:
    """Run the algorithm's rank programs (and its host and in-network parts); return
    what each rank's program returned."""
    procs = run.start_ranks(lambda comm: spec.fn(comm, buffers[comm.rank], **kwargs))
    if spec.host is not None:
        host = spec.host
        run.start_hosts(lambda comm: _generator_or_none(host(comm, **kwargs)))
    if spec.in_network is not None:
        device = spec.in_network
        run.start_in_network(lambda comm: _generator_or_none(device(comm, shape, **kwargs)))
    run.run()
    return [proc.value for proc in procs]


def _generator_or_none(program: Any) -> Any:
    """A host or in-network part may be a plain function that returns at once (nothing
    to run there)."""
    return program if inspect.isgenerator(program) else None
