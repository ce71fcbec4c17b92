"""``run_program``: run any rank program on a machine, not only a registered collective.

Training steps, pipelines and hand-written experiments are rank programs that mix compute,
point-to-point messages and started collectives (``comm.all_reduce(...)``); this runs one
on every rank and returns what the run did.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from simcoll.buffers import owned
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
    rank's entry of ``RunResult.outputs``, its arrays (and those in its lists, tuples and
    dicts) writeable and its own (:func:`~simcoll.buffers.owned`).

    Args:
        network, trace, until, max_events, faults: as for :func:`simcoll.simulate`.
        in_network: a generator function run as ``in_network(comm, *args, **kwargs)`` on
            every switch or NIC that computes in the network (``comm.rank`` is its
            address; ``comm.attached(comm.rank)`` its GPUs).

    Raises:
        InvalidInputError, TopologyError: bad input, before the run starts: also
            arguments ``program`` (or ``in_network``) cannot take, such as a keyword it
            does not name (a misspelt option of run_program's own is passed on to it).
        DeadlockError, UnmatchedMessageError, AlgorithmError, RunLimitError,
        LinkFailureError, MemoryError: as for :func:`simcoll.simulate`.
    """
    topology = check_topology(topology)
    for name, fn in (("program", program), ("in_network", in_network)):
        if (fn is not None or name == "program") and not inspect.isgeneratorfunction(fn):
            raise InvalidInputError(f"{name}={fn!r} is not a generator function; a program "
                                    f"yields the events comm returns")
        if fn is not None:
            _check_arguments(name, fn, args, kwargs)
    run = Execution(topology, network=network, trace=trace, until=until,
                    max_events=max_events, faults=faults,
                    what=getattr(program, "__name__", "the program"))
    procs = run.start_ranks(lambda comm: program(comm, *args, **kwargs))
    if in_network is not None:
        device_program = in_network
        run.start_in_network(lambda comm: device_program(comm, *args, **kwargs))
    # An overflow, or inf - inf, in the data's reductions is the data's (as in simulate):
    # no numpy warning, which warnings-as-errors would turn into the program's error.
    with np.errstate(over="ignore", invalid="ignore"):
        run.run()
    return RunResult.of(run, owned([proc.value for proc in procs]))


_OPTIONS = ("network", "trace", "until", "max_events", "faults", "in_network")
"""run_program's own keywords; every other argument goes to the program."""


def _check_arguments(role: str, fn: Callable[..., Any], args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> None:
    """Refuse arguments ``fn(comm, *args, **kwargs)`` cannot take, before the run.

    Raises:
        InvalidInputError: naming the keywords ``fn`` does not take (and run_program's
            option each may misspell) or why the call cannot bind, and listing
            run_program's own options.
    """
    signature = inspect.signature(fn)
    pars = signature.parameters
    takes_any = any(par.kind is par.VAR_KEYWORD for par in pars.values())
    unknown = [] if takes_any else [k for k in kwargs if k not in pars]
    options = ", ".join(f"{option}=" for option in _OPTIONS)
    shown = getattr(fn, "__name__", repr(fn))
    rule = (f"run_program's own options are {options}; every other argument is passed "
            f"on, as {role}(comm, *args, **kwargs)")
    if unknown:
        named = ", ".join(f"{k}={kwargs[k]!r}{_misspelt(k)}" for k in unknown)
        raise InvalidInputError(f"run_program: {role} {shown} takes no keyword "
                                f"{named}; {rule}")
    try:
        signature.bind(None, *args, **kwargs)
    except TypeError as exc:
        raise InvalidInputError(f"run_program: {role} {shown} cannot be called with "
                                f"these arguments ({exc}); {rule}") from None


def _misspelt(keyword: str) -> str:
    """`` (did you mean trace=?)`` where ``keyword`` is close to an option's name."""
    close = difflib.get_close_matches(keyword, _OPTIONS, n=1, cutoff=0.7)
    return f" (did you mean {close[0]}=?)" if close else ""
