"""``simulate``: check the inputs, run one collective on a topology, check the outputs.

Every argument is checked before the run starts. One SimPy process runs per rank (and per
server host, for algorithms that use hosts). When no event is left, ranks that have not
returned are deadlocked and reported; messages nobody received are reported too.
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import simpy

from simcoll.algorithms.registry import AlgorithmSpec, get_algorithm
from simcoll.buffers import VirtualBuffer
from simcoll.check import compare
from simcoll.collectives import collective as get_collective
from simcoll.comm import Comm
from simcoll.engine import InvalidYield, RunStop, run
from simcoll.errors import (
    AlgorithmError,
    DeadlockError,
    InvalidInputError,
    RunLimitError,
    UnmatchedMessageError,
)
from simcoll.network import network_class
from simcoll.ops import ReduceOp
from simcoll.result import Result
from simcoll.runtime import Runtime, TracingRuntime
from simcoll.topology.graph import Topology
from simcoll.units import parse_size

__all__ = ["simulate"]

_DTYPE_KINDS = "iuf"


def _check_data(data: Any, p: int) -> list[np.ndarray]:
    if isinstance(data, np.ndarray) or not isinstance(data, Sequence):
        raise InvalidInputError(
            f"data must be a list of {p} numpy arrays (one per rank), got {type(data).__name__}")
    if len(data) != p:
        raise InvalidInputError(f"data has {len(data)} arrays but the topology has {p} ranks; "
                                f"pass exactly one array per rank")
    arrays = []
    for r, x in enumerate(data):
        if not isinstance(x, np.ndarray):
            raise InvalidInputError(f"data[{r}] is a {type(x).__name__}, not a numpy array")
        if x.ndim != 1:
            raise InvalidInputError(f"data[{r}] has shape {x.shape}; pass 1-D arrays "
                                    f"(use x.ravel())")
        if x.dtype.kind not in _DTYPE_KINDS:
            raise InvalidInputError(f"data[{r}] has dtype {x.dtype}; use an integer or "
                                    f"floating dtype")
        if x.dtype != data[0].dtype or x.shape != data[0].shape:
            raise InvalidInputError(
                f"data[{r}] is {x.dtype}{list(x.shape)} but data[0] is "
                f"{data[0].dtype}{list(data[0].shape)}; every rank needs the same shape and "
                f"dtype")
        arrays.append(x)
    return arrays


def _check_size(nbytes: Any, dtype: np.dtype) -> int:
    try:
        size = parse_size(nbytes)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"nbytes={nbytes!r} is not accepted: {exc}") from None
    if size % dtype.itemsize:
        raise InvalidInputError(f"nbytes={size} is not a multiple of the {dtype} item size "
                                f"({dtype.itemsize} bytes)")
    return size


def _check_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InvalidInputError(f"dtype {dtype!r} is not a numpy dtype") from None
    if dt.kind not in _DTYPE_KINDS:
        raise InvalidInputError(f"dtype {dt} is not accepted; use an integer or floating dtype")
    return dt


def _read_only_view(x: np.ndarray) -> np.ndarray:
    view = x.view()
    view.flags.writeable = False
    return view


def _owned(outputs: list[Any]) -> list[Any]:
    """Give every rank an output array of its own, writeable, sharing memory with nothing
    else (algorithms pass read-only arrays around without copying them)."""
    seen: set[int] = set()
    owned = []
    for out in outputs:
        if isinstance(out, np.ndarray):
            if out.base is not None or id(out) in seen:
                out = out.copy()
            else:
                out.flags.writeable = True
            seen.add(id(out))
        owned.append(out)
    return owned


def _run(env: simpy.Environment, labels: dict[simpy.Process, str], what: str,
         until: float, max_events: int) -> None:
    """Run to the end with the cyclic garbage collector paused: the event loop creates no
    reference cycles, and collections triggered by its many short-lived objects cost
    about a quarter of a data-free run. A yield of something that is not an event is
    reported with the rank that made it; a run past its limits names the ranks still
    running."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        run(env, until=until, max_events=max_events)
    except InvalidYield as exc:
        label = labels.get(exc.process, "a rank")
        raise AlgorithmError(f"{label} in {what} yielded something that is not an event "
                             f"({exc}); yield what comm returns") from None
    except RunStop as stop:
        running = [label for proc, label in labels.items() if proc.is_alive]
        shown = ", ".join(running[:16]) + (f" and {len(running) - 16} more"
                                            if len(running) > 16 else "")
        limit = (f"the simulated-time limit until={until!r} s" if stop.reason == "time"
                 else f"the event limit max_events={max_events}")
        raise RunLimitError(f"{what} reached {limit} at t={stop.now:.9g} s with "
                            f"{shown or 'no rank'} still running; raise the limit if the "
                            f"run is meant to be that long", running) from None
    finally:
        if enabled:
            gc.enable()


def _start(env: simpy.Environment, rt: Runtime, spec: AlgorithmSpec, topology: Topology,
           inputs: list[Any], kwargs: dict[str, Any], what: str
           ) -> tuple[list[simpy.Process], dict[simpy.Process, str], np.ndarray]:
    """One process per rank (and per host, if the algorithm has a host part)."""
    p = topology.nranks
    rank_times = np.zeros(p)
    labels: dict[simpy.Process, str] = {}

    def finished(rank: int, label: str):
        def callback(event: simpy.Process) -> None:
            if not event.ok:
                exc = event.value
                event.defused = True
                if isinstance(exc, RunStop) or not isinstance(exc, Exception):
                    raise exc  # a limit, KeyboardInterrupt or SystemExit: as it is, at once
                raise AlgorithmError(f"{label} raised {type(exc).__name__} in {what}: {exc}"
                                     ) from exc
            if rank < p:
                rank_times[rank] = env.now
        return callback

    procs = []
    for r in range(p):
        proc = env.process(spec.fn(Comm(rt, r), inputs[r], **kwargs))
        proc.callbacks.append(finished(r, f"rank {r}"))
        labels[proc] = f"rank {r}"
        procs.append(proc)
    if spec.host is not None:
        for h in range(p, p + len(topology.hosts)):
            gen = spec.host(Comm(rt, h), **kwargs)
            if inspect.isgenerator(gen):
                label = f"host {topology.endpoint_name(h)}"
                proc = env.process(gen)
                proc.callbacks.append(finished(h, label))
                labels[proc] = label
    return procs, labels, rank_times


def _raise_if_unfinished(rt: Runtime, procs: list[simpy.Process], what: str,
                         now: float) -> None:
    """DeadlockError for ranks still waiting, UnmatchedMessageError for lost messages."""
    stuck = [r for r, proc in enumerate(procs) if proc.is_alive]
    if stuck:
        waits = rt.waiting_receives()
        waiting = {r: "; ".join(waits.get(r, ["an event that never fires"])) for r in stuck}
        shown = "; ".join(f"rank {r} waits for {w}" for r, w in list(waiting.items())[:16])
        more = f" (and {len(stuck) - 16} more ranks)" if len(stuck) > 16 else ""
        raise DeadlockError(f"deadlock in {what} at t={now:.9g} s: {shown}{more}", waiting)
    unclaimed = rt.unclaimed_messages()
    if unclaimed:
        shown = ", ".join(f"{m.src}->{m.dst} (tag {m.tag!r})" for m in unclaimed[:16])
        raise UnmatchedMessageError(f"{what} finished with {len(unclaimed)} message(s) "
                                    f"never received: {shown}")


def simulate(topology: Topology, collective: str, *, algorithm: str,
             data: Sequence[np.ndarray] | None = None, nbytes: int | str | None = None,
             dtype: Any = np.float32, op: ReduceOp | str = ReduceOp.SUM, root: int = 0,
             network: str = "flow", check: bool = True, trace: bool = False,
             until: float = 1e6, max_events: int = 10**9, **params: Any) -> Result:
    """Run one collective on ``topology`` and return its time, traffic and correctness.

    Args:
        topology: the machine; its GPUs are the ranks.
        collective: ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``broadcast``,
            ``reduce``, ``all_to_all``, ``gather``, ``scatter`` or ``barrier``.
        algorithm: a registered algorithm name for that collective.
        data: one 1-D array per rank (data mode). Exclusive with ``nbytes``.
        nbytes: each rank's input buffer size in bytes, or a size string like "256MiB"
            (data-free mode: sizes only, O(ranks) memory).
        dtype: element type in data-free mode (ignored in data mode).
        op: reduction (``ReduceOp`` or its name) for reducing collectives.
        root: root rank for broadcast, reduce, gather and scatter.
        network: network model, ``"flow"`` (default) or ``"analytical"``.
        check: compare outputs with numpy (data mode).
        trace: record every message, reduction and compute span in ``Result.trace``
            (see :mod:`simcoll.trace` for Chrome / Perfetto export).
        until: stop with ``RunLimitError`` past this many simulated seconds (default
            10^6 s, about 11.6 days; ``math.inf`` for no limit).
        max_events: stop with ``RunLimitError`` after this many events (default 10^9,
            some 15 times what a ring all_reduce on 4096 GPUs needs).
        **params: algorithm parameters (``chunks=``, ``servers=``, ...).

    Returns:
        A :class:`~simcoll.result.Result`.

    Raises:
        InvalidInputError, UnknownCollectiveError, UnknownAlgorithmError,
        UnknownNetworkError, TopologyError: bad input, before the run starts.
        DeadlockError: ranks still waiting when no event is left.
        UnmatchedMessageError: messages sent but never received.
        AlgorithmError: an algorithm raised; the message names the rank.
        RunLimitError: the run went past ``until`` or ``max_events``; the message names
            the ranks still running.
    """
    coll = get_collective(collective)
    spec = get_algorithm(collective, algorithm)
    net_cls = network_class(network)
    if not isinstance(topology, Topology):
        raise InvalidInputError(f"topology must be a simcoll Topology, got "
                                f"{type(topology).__name__}")
    topology.validate()
    p = topology.nranks
    hosts = len(topology.hosts)
    reduce_op = ReduceOp.parse(op)
    if coll.rooted and (isinstance(root, bool) or not isinstance(root, (int, np.integer))
                        or not 0 <= root < p):
        raise InvalidInputError(f"root={root!r} is not a rank; use 0..{p - 1}")

    if (data is None) == (nbytes is None) and collective != "barrier":
        raise InvalidInputError("pass exactly one of data= (arrays, data mode) or nbytes= "
                                "(sizes only, data-free mode)")
    if data is not None:
        arrays = _check_data(data, p)
        dt = arrays[0].dtype
        size = arrays[0].nbytes
        inputs: list[Any] = [_read_only_view(x) for x in arrays]
    else:
        arrays = None
        dt = _check_dtype(dtype)
        size = _check_size(0 if nbytes is None else nbytes, dt)
        inputs = [VirtualBuffer.of(size // dt.itemsize, dt)] * p
    count = size // dt.itemsize

    params = spec.check(p, count, hosts, topology.gpu_nodes, params)
    kwargs = spec.arguments(params)
    if coll.reduces:
        kwargs["op"] = reduce_op
    if coll.rooted:
        kwargs["root"] = int(root)

    env = simpy.Environment()
    endpoints = p + hosts
    net = net_cls(env, topology, endpoints)
    reduce_bw = [topology.device(topology.endpoint_name(a)).reduce_bandwidth
                 for a in range(endpoints)]
    rt = (TracingRuntime if trace else Runtime)(env, net, p, reduce_bw, topology.gpu_nodes,
                                                max_events, tuple(arrays or ()))
    what = f"{collective}/{algorithm}"
    procs, labels, rank_times = _start(env, rt, spec, topology, inputs, kwargs, what)
    _run(env, labels, what, until, max_events)
    _raise_if_unfinished(rt, procs, what, env.now)

    outputs = _owned([proc.value for proc in procs])
    if coll.reduces and reduce_op is ReduceOp.AVG and arrays is not None:
        outputs = [reduce_op.finish(o, p) if isinstance(o, np.ndarray) else o
                   for o in outputs]
    correct = max_error = None
    if arrays is not None and check:
        correct, max_error = compare(coll, arrays, outputs, reduce_op, int(root))

    time = env.now
    total = size * coll.size_factor(p)
    algbw = total / time if time > 0 else float("inf")
    factor = coll.busbw_factor(p)
    links = {topology.directed_link(d): b for d, b in enumerate(net.link_bytes)}
    return Result(
        collective=collective, algorithm=algorithm, network=net_cls.name,
        topology=topology.name, nranks=p, nbytes=size, dtype=str(dt),
        op=reduce_op.name if coll.reduces else None, params=dict(params), time=time,
        correct=correct, outputs=outputs if arrays is not None else None,
        bytes_sent=np.array(net.sent[:p], dtype=np.int64),
        bytes_received=np.array(net.received[:p], dtype=np.int64),
        host_bytes_sent=np.array(net.sent[p:], dtype=np.int64),
        host_bytes_received=np.array(net.received[p:], dtype=np.int64),
        link_bytes=links, messages=net.messages, rank_times=rank_times,
        algbw=algbw, busbw=algbw * factor if factor else 0.0, max_error=max_error,
        trace=tuple(rt.events) if trace else None)
