"""``simulate``: run one collective on a topology and check what it did.

Every argument is checked before the run starts (:mod:`simcoll.inputs`). One process runs
per rank (and per server host, for algorithms that use hosts); the event loop is
:func:`simcoll.engine.run`. When no event is left, programs that have not returned are
deadlocked and reported, and so are messages nobody received.
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import simpy

from simcoll.algorithms.registry import AlgorithmSpec, get_algorithm
from simcoll.buffers import owned
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
from simcoll.faults import Faults
from simcoll.inputs import check_inputs, check_limits, check_root, check_topology
from simcoll.network import network_class
from simcoll.ops import ReduceOp
from simcoll.result import Result
from simcoll.runtime import Runtime, TracingRuntime
from simcoll.topology.graph import Topology

__all__ = ["simulate"]


def _check_params(spec: AlgorithmSpec, kwargs: dict[str, Any]) -> None:
    sig = inspect.signature(spec.fn)
    try:
        sig.bind(None, None, **kwargs)
    except TypeError:
        unknown = sorted(set(kwargs) - set(sig.parameters))
        raise InvalidInputError(
            f"{spec.collective}/{spec.name} does not take parameter(s) {unknown}; it accepts "
            f"{list(spec.params) or 'none'}") from None


def _start(rt: Runtime, spec: AlgorithmSpec, topology: Topology, inputs: list[Any],
           kwargs: dict[str, Any], plan: Any
           ) -> tuple[list[simpy.Process], np.ndarray]:
    """One process per rank (and per host, if the algorithm has a host part); a late
    rank's program starts late."""
    p = topology.nranks
    rank_times = np.zeros(p)

    def finished(rank: int):
        def record(event: simpy.Process) -> None:
            rank_times[rank] = event.env.now
        return record

    procs = []
    for r in range(p):
        program = spec.fn(Comm(rt, r), inputs[r], **kwargs)
        if plan is not None:
            program = plan.delayed(r, program, rt.env)
        proc = rt.start(program, f"rank {r}", r)
        proc.callbacks.append(finished(r))
        procs.append(proc)
    if spec.host is not None:
        for h in range(p, p + len(topology.hosts)):
            program = spec.host(Comm(rt, h), **kwargs)
            if inspect.isgenerator(program):
                rt.start(program, f"host {topology.endpoint_name(h)}", h)
    return procs, rank_times


def _run(rt: Runtime, until: float, max_events: int) -> None:
    """Run to the end with the cyclic garbage collector paused: the event loop creates no
    reference cycles, and collections triggered by its many short-lived objects cost
    about a quarter of a data-free run. A yield of something that is not an event is
    reported with the program that made it; a run past its limits names the programs
    still running."""
    labels = {proc: label for proc, label, _ in rt.programs}
    enabled = gc.isenabled()
    gc.disable()
    try:
        run(rt.env, until=until, max_events=max_events)
    except InvalidYield as exc:
        raise AlgorithmError(f"{labels.get(exc.process, 'a rank')} in {rt.what} yielded "
                             f"something that is not an event ({exc}); yield what comm "
                             f"returns") from None
    except RunStop as stop:
        running = [label for proc, label, _ in rt.programs if proc.is_alive]
        shown = ", ".join(running[:16]) + (f" and {len(running) - 16} more"
                                            if len(running) > 16 else "")
        limit = (f"the simulated-time limit until={until:g} s" if stop.reason == "time"
                 else f"the event limit max_events={max_events}")
        raise RunLimitError(f"{rt.what} reached {limit} at t={stop.now:.9g} s with "
                            f"{shown or 'no program'} still running; raise the limit if "
                            f"the run is meant to be that long", running) from None
    finally:
        if enabled:
            gc.enable()


def _raise_if_unfinished(rt: Runtime) -> None:
    """DeadlockError for programs still waiting, UnmatchedMessageError for lost messages."""
    stuck = [(label, address) for proc, label, address in rt.programs if proc.is_alive]
    if stuck:
        waits = rt.waiting_receives()
        waiting = {address: "; ".join(waits.get(address, ["an event that never fires"]))
                   for _, address in stuck}
        shown = "; ".join(f"{label} waits for {waiting[address]}"
                          for label, address in stuck[:16])
        more = f" (and {len(stuck) - 16} more)" if len(stuck) > 16 else ""
        raise DeadlockError(f"deadlock in {rt.what} at t={rt.env.now:.9g} s: {shown}{more}",
                            waiting)
    unclaimed = rt.unclaimed_messages()
    if unclaimed:
        shown = ", ".join(f"{m.src}->{m.dst} (tag {m.tag!r})" for m in unclaimed[:16])
        raise UnmatchedMessageError(f"{rt.what} finished with {len(unclaimed)} message(s) "
                                    f"never received: {shown}")


def simulate(topology: Topology, collective: str, *, algorithm: str,
             data: Sequence[np.ndarray] | None = None, nbytes: int | str | None = None,
             dtype: Any = np.float32, op: ReduceOp | str = ReduceOp.SUM,
             root: int | None = None, network: str = "flow", check: bool = True,
             trace: bool = False, until: float = 1e6, max_events: int = 10**9,
             faults: Faults | None = None, **params: Any) -> Result:
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
        root: root rank for broadcast, reduce, gather and scatter (default 0); refused
            for collectives without a root.
        network: network model, ``"flow"`` (default) or ``"analytical"``.
        check: compare outputs with numpy (data mode).
        trace: record every message, reduction and compute span in ``Result.trace``
            (see :mod:`simcoll.trace` for Chrome / Perfetto export).
        until: stop with ``RunLimitError`` past this many simulated seconds (default
            10^6 s, about 11.6 days; ``math.inf`` for no limit).
        max_events: stop with ``RunLimitError`` after this many events (default 10^9,
            some 15 times what a ring all_reduce on 4096 GPUs needs).
        faults: link failures and slow-downs, slow or late GPUs, message jitter
            (:class:`~simcoll.faults.Faults`).
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
        LinkFailureError: a link failed under messages that have no route around it.
    """
    coll = get_collective(collective)
    spec = get_algorithm(collective, algorithm)
    net_cls = network_class(network)
    topology = check_topology(topology)
    p = topology.nranks
    reduce_op = ReduceOp.parse(op)
    the_root = check_root(coll, root, p)
    inputs = check_inputs(p, data, nbytes, dtype, coll)
    limit, events = check_limits(until, max_events)
    if faults is not None and not isinstance(faults, Faults):
        raise InvalidInputError(f"faults={faults!r} is not accepted; pass a simcoll.Faults")
    plan = None if faults is None else faults.checked(topology)
    kwargs = dict(params)
    if coll.reduces:
        kwargs["op"] = reduce_op
    if the_root is not None:
        kwargs["root"] = the_root
    _check_params(spec, kwargs)
    spec.check(p, inputs.count, len(topology.hosts), topology.gpu_nodes, params)

    env = simpy.Environment()
    endpoints = p + len(topology.hosts)
    net = net_cls(env, topology, endpoints)
    reduce_bw = [topology.device(topology.endpoint_name(a)).reduce_bandwidth
                 for a in range(endpoints)]
    if plan is not None:
        reduce_bw = plan.reduce_bandwidths(reduce_bw)
        plan.install(net)
    rt = (TracingRuntime if trace else Runtime)(env, net, p, reduce_bw, topology.gpu_nodes,
                                                events, tuple(inputs.arrays or ()))
    rt.what = f"{collective}/{algorithm}"
    if plan is not None:
        rt.compute_scale = plan.compute_scale(endpoints)
    procs, rank_times = _start(rt, spec, topology, inputs.buffers, kwargs, plan)
    _run(rt, limit, events)
    _raise_if_unfinished(rt)

    outputs = correct = max_error = None
    if inputs.arrays is not None:
        outputs = owned([reduce_op.finish(proc.value, p)
                         if coll.reduces and isinstance(proc.value, np.ndarray)
                         else proc.value for proc in procs])
        if check:
            correct, max_error = compare(coll, inputs.arrays, outputs, reduce_op,
                                         the_root or 0)
    return Result.from_run(
        coll=coll, algorithm=algorithm, topology=topology, network=net, time=env.now,
        nbytes=inputs.nbytes, dtype=inputs.dtype, op=reduce_op if coll.reduces else None,
        params=dict(params), outputs=outputs, correct=correct, max_error=max_error,
        rank_times=rank_times, trace=tuple(rt.events) if isinstance(rt, TracingRuntime)
        else None)
