"""``run_program``: run any rank program on a machine, not only a registered collective.

Training steps, pipelines and hand-written experiments are rank programs that mix compute,
point-to-point messages and started collectives (``comm.all_reduce(...)``); this runs one
on every rank and returns what the run did.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from simcoll.errors import InvalidInputError
from simcoll.execution import Execution
from simcoll.faults import Faults
from simcoll.inputs import check_topology
from simcoll.result import RunResult
from simcoll.topology.graph import Topology

__all__ = ["run_program"]


def run_program(topology: Topology, program: Callable[..., Any], *args: Any,
                network: str = "flow", trace: bool = False, until: float = 1e6,
                max_events: int = 10**9, faults: Faults | None = None,
                in_network: Callable[..., Any] | None = None, **kwargs: Any) -> RunResult:
    """Run ``program(comm, *args, **kwargs)`` on every rank of ``topology``.

    ``program`` is a generator function, written like an algorithm: it yields the events
    ``comm`` returns (``comm.rank`` tells the ranks apart) and what it returns is that
    rank's entry of ``RunResult.outputs``.

    Args:
        network, trace, until, max_events, faults: as for :func:`simcoll.simulate`.
        in_network: a generator function run as ``in_network(comm, *args, **kwargs)`` on
            every switch or NIC that computes in the network (``comm.rank`` is its
            address; ``comm.attached(comm.rank)`` its GPUs).

    Raises:
        InvalidInputError, TopologyError: bad input, before the run starts.
        DeadlockError, UnmatchedMessageError, AlgorithmError, RunLimitError,
        LinkFailureError: as for :func:`simcoll.simulate`.
    """
    topology = check_topology(topology)
    for name, fn in (("program", program), ("in_network", in_network)):
        if fn is not None and not inspect.isgeneratorfunction(fn):
            raise InvalidInputError(f"{name}={fn!r} is not a generator function; a program "
                                    f"yields the events comm returns")
    run = Execution(topology, network=network, trace=trace, until=until,
                    max_events=max_events, faults=faults,
                    what=getattr(program, "__name__", "the program"))
    procs = run.start_ranks(lambda comm: program(comm, *args, **kwargs))
    if in_network is not None:
        device_program = in_network
        run.start_in_network(lambda comm: device_program(comm, *args, **kwargs))
    run.run()
    return RunResult.of(run, [proc.value for proc in procs])
