"""What a run returns: time and traffic (:class:`RunResult`), and for a collective its
outputs' check and nccl-tests bandwidths as well (:class:`Result`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from simcoll.collectives import Collective, Splits
from simcoll.errors import InvalidInputError
from simcoll.inputs import COUNTER_LIMIT
from simcoll.runtime import TraceEvent
from simcoll.topology.io import topology_hash

if TYPE_CHECKING:
    from simcoll.execution import Execution

__all__ = ["RunResult", "Result", "traced_events"]


def _listed(splits: Splits) -> list[Any]:
    return [list(row) if isinstance(row, tuple) else row for row in splits]


def _num(v: float) -> float | None:
    return None if math.isnan(v) or math.isinf(v) else v


def _same(a: Any, b: Any) -> bool:
    """Whether two field values are equal: arrays by dtype and value (NaN equal to NaN),
    lists, tuples and dicts item by item."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@dataclass(frozen=True, kw_only=True, eq=False)
class RunResult:
    """What a finished run did. Times in seconds, sizes in bytes.

    Attributes:
        network, topology: the network model's and the machine's names.
        nranks: number of GPU ranks.
        time: simulated seconds until the last real activity: the last message's
            arrival, the last program's return, or the end of compute or a reduction a
            rank started without waiting for it.
        outputs: what each rank's program returned (data mode for collectives), else None.
        bytes_sent, bytes_received: payload bytes per GPU rank (int64 arrays).
        host_bytes_sent, host_bytes_received: the same for the endpoints past the GPUs:
            server hosts, then in-network devices (empty if none).
        hosts: how many of those endpoints are server hosts (the first ``hosts``); the
            others are in-network devices (an NVSwitch's NVLS, a SHARP switch).
        link_bytes: ``{(from_device, to_device): bytes}`` for every directed link.
        messages: number of point-to-point messages.
        rank_times: simulated time at which each rank's program returned.
        trace: every message and compute span and every reduction that took time (none on
            an engine of infinite rate, the builders' default), in the order they ended
            (those ending together in the order they were recorded; ``trace=True``),
            else None.
        sleeps: with ``trace=True``, every sleep a program took (``comm.sleep``: a
            launch latency, a protocol's pacing), as trace events of kind "sleep" in the
            order they began, which the critical path reads; else None.
        faults: the faults of ``faults=`` that changed the machine (failed or slowed
            links, slow or late GPUs, jitter; not a slow-down of 1, a lateness of 0 nor a
            link set to its nominal rate), JSON-ready and in ``to_dict``; None for a
            healthy machine. A cost model describes a healthy one.
        topology_hash: a digest of the machine's full description
            (:func:`simcoll.topology.io.topology_hash`), by which the trace's readers
            (link loads, the critical path) know the topology the run took; None where
            unknown (a record written without it).

    Bytes: ``bytes_sent`` and ``bytes_received`` count payload; ``link_bytes`` counts
    what crossed each link, a protocol's framing included (NCCL's LL puts 16 bytes on
    the wire per 8 of data, LL128 2,048 per 1,920, a warp's 16 lines written whole). A
    multicast (NVLS, SHARP) counts once for its sender and once for each destination, is
    one of ``messages``, and has one trace event per destination.
    """

    network: str
    topology: str
    nranks: int
    time: float
    outputs: list[Any] | None = field(repr=False)
    bytes_sent: np.ndarray = field(repr=False)
    bytes_received: np.ndarray = field(repr=False)
    host_bytes_sent: np.ndarray = field(repr=False)
    host_bytes_received: np.ndarray = field(repr=False)
    hosts: int
    link_bytes: dict[tuple[str, str], int] = field(repr=False)
    messages: int
    rank_times: np.ndarray = field(repr=False)
    trace: tuple[TraceEvent, ...] | None = field(default=None, repr=False)
    sleeps: tuple[TraceEvent, ...] | None = field(default=None, repr=False)
    faults: dict[str, Any] | None = None
    topology_hash: str | None = field(default=None, repr=False)

    def __eq__(self, other: object) -> bool:
        """Results of one type are equal where every field is (arrays by value)."""
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name))
                   for f in fields(self))

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable arrays inside

    @staticmethod
    def _measured(run: Execution, outputs: list[Any] | None) -> dict[str, Any]:
        """The fields every result takes from a finished run: its counters as arrays."""
        topology, network = run.topology, run.network
        p = topology.nranks
        most = max(max(network.sent), max(network.received))
        if most > COUNTER_LIMIT - 1:  # run_program's messages are not checked before the run
            raise InvalidInputError(
                f"{run.runtime.what}'s traffic passed the int64 counters: an endpoint moved "
                f"{most} bytes, more than {COUNTER_LIMIT - 1}; send smaller buffers")
        sent = np.array(network.sent, dtype=np.int64)
        received = np.array(network.received, dtype=np.int64)
        return dict(
            network=network.name, topology=topology.name, nranks=p, time=float(run.time),
            outputs=outputs, bytes_sent=sent[:p], bytes_received=received[:p],
            host_bytes_sent=sent[p:], host_bytes_received=received[p:],
            hosts=len(topology.hosts), link_bytes={topology.directed_link(d): b
                        for d, b in enumerate(network.link_bytes)},
            messages=network.messages, rank_times=run.rank_times, trace=run.trace,
            sleeps=run.sleeps, faults=run.faults, topology_hash=topology_hash(topology))

    @classmethod
    def of(cls, run: Execution, outputs: list[Any] | None) -> RunResult:
        """The result of a finished run."""
        return cls(**cls._measured(run, outputs))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no outputs; ``link_bytes`` of the links that carried
        bytes, keyed ``"from->to"``)."""
        return {
            "network": self.network, "topology": self.topology,
            "topology_hash": self.topology_hash, "nranks": self.nranks,
            "time": self.time,
            "bytes_sent": self.bytes_sent.tolist(),
            "bytes_received": self.bytes_received.tolist(),
            "host_bytes_sent": self.host_bytes_sent.tolist(),
            "host_bytes_received": self.host_bytes_received.tolist(),
            "hosts": self.hosts,
            "link_bytes": {f"{u}->{v}": b for (u, v), b in self.link_bytes.items() if b},
            "messages": self.messages, "rank_times": self.rank_times.tolist(),
            **({} if self.faults is None else {"faults": self.faults}),
        }


@dataclass(frozen=True, kw_only=True, eq=False)
class Result(RunResult):
    """What ``simulate`` returns: a run of one collective. Rates in bytes/s.

    Attributes (besides :class:`RunResult`'s):
        collective, algorithm: what ran. params: the parameters given, normalized, and
            what the algorithm chose from the machine (NCCL's, with the defaults its
            choice fills in); a parameter left at its default and not chosen is not
            listed (a ring's ``chunks=1``).
        nbytes, dtype, op: each rank's input size and element type, and the reduction.
            For a v-collective ``nbytes`` is the ranks' mean input in bytes, rounded down
            (exact when every rank's input has one size); ``splits`` holds the sizes.
        correct: every checked output matched the numpy reference (``None`` in data-free
            mode, where there are no values to check).
        algbw, busbw: nccl-tests bandwidths (see ``simcoll.collectives``, which also
            defines them for the v-collectives).
        max_error: largest absolute deviation from the reference (data mode, else None;
            infinite where an output overflowed where the check allows it, written as
            null by ``to_dict``, as algbw and busbw are where not finite).
        splits: a v-collective's sizes in elements (p counts, or all_to_allv's p x p
            matrix as a tuple of rows; bytes are these times the itemsize), else None.
        requested: the parameters asked for, where ``params`` also holds what the
            algorithm chose from the machine (NCCL's algorithm, protocol and channels,
            which change with the size); None where not known. Plots draw one line per
            requested parameters.
        root: the root rank of a rooted collective (broadcast, reduce, gather,
            scatter), else None.
    """

    collective: str
    algorithm: str
    nbytes: int
    dtype: str
    op: str | None
    params: dict[str, Any]
    correct: bool | None
    algbw: float
    busbw: float
    max_error: float | None = None
    splits: Splits | None = field(default=None, repr=False)
    requested: dict[str, Any] | None = None
    root: int | None = None

    @classmethod
    def from_run(cls, run: Execution, outputs: list[Any] | None, *, coll: Collective,
                 algorithm: str, nbytes: int, dtype: str, op: str | None,
                 params: dict[str, Any], correct: bool | None,
                 max_error: float | None, splits: Splits | None = None,
                 size: float | None = None,
                 requested: dict[str, Any] | None = None,
                 root: int | None = None) -> Result:
        """The result of a finished collective run, with the nccl-tests bandwidths of its
        time (algbw = S / time, 0 where S is 0, busbw = algbw x the collective's factor).
        S is ``size`` if given (the v-collectives'), else ``nbytes`` times the
        collective's factor."""
        measured = cls._measured(run, outputs)
        p, time = measured["nranks"], measured["time"]
        volume = nbytes * coll.size_factor(p) if size is None else size
        # Nothing to move is no bandwidth (nccl-tests prints 0.00 for 0 bytes); bytes
        # moved in no time (one rank) are infinitely fast.
        algbw = 0.0 if volume == 0 else volume / time if time > 0 else math.inf
        factor = coll.busbw_factor(p)
        return cls(**measured, collective=coll.name, algorithm=algorithm, nbytes=nbytes,
                   dtype=dtype, op=op, params=params, correct=correct, algbw=algbw,
                   busbw=algbw * factor if factor else 0.0, max_error=max_error,
                   splits=splits, requested=requested, root=root)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no outputs; ``link_bytes`` of the links that carried
        bytes, keyed ``"from->to"``); a v-collective's
        also has ``"splits"`` (lists of elements), a run whose algorithm chose some of
        its parameters ``"requested"``, and a rooted collective's ``"root"``."""
        run = super().to_dict()
        shape: dict[str, Any] = {} if self.splits is None else {
            "splits": _listed(self.splits)}
        if self.requested is not None and self.requested != self.params:
            shape["requested"] = dict(self.requested)
        if self.root is not None:
            shape["root"] = self.root
        return {
            "collective": self.collective, "algorithm": self.algorithm,
            "network": self.network, "topology": self.topology,
            "topology_hash": self.topology_hash, "nranks": self.nranks,
            "nbytes": self.nbytes, "dtype": self.dtype, "op": self.op,
            "params": dict(self.params), "time": self.time, "correct": self.correct,
            "max_error": None if self.max_error is None else _num(self.max_error),
            **shape, **run, "algbw": _num(self.algbw), "busbw": _num(self.busbw),
        }

    def summary(self) -> str:
        """One human-readable line."""
        check = {True: "correct", False: "WRONG", None: "unchecked"}[self.correct]
        return (f"{self.collective}/{self.algorithm} p={self.nranks} n={self.nbytes} B: "
                f"{self.time * 1e6:.3f} us, algbw {self.algbw / 1e9:.2f} GB/s, "
                f"busbw {self.busbw / 1e9:.2f} GB/s, max sent/rank "
                f"{int(self.bytes_sent.max(initial=0))} B, {self.messages} msgs, {check}")


def traced_events(result: Any) -> tuple[TraceEvent, ...]:
    """The trace of ``result``, which must be a traced run's: what ``simulate(...,
    trace=True)`` or ``run_program(..., trace=True)`` returned.

    Raises:
        InvalidInputError: not a run's result, or a run simulated without a trace.
    """
    if not isinstance(result, RunResult):
        raise InvalidInputError(f"{type(result).__name__} {result!r:.60} is not a run's "
                                f"result; pass what simulate(..., trace=True) or "
                                f"run_program(..., trace=True) returned")
    if result.trace is None:
        raise InvalidInputError("this result has no trace; simulate with trace=True")
    return result.trace
