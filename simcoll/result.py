"""The outcome of one simulation: time, traffic, outputs and their check."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcoll.collectives import Collective
from simcoll.network.base import Network
from simcoll.ops import ReduceOp
from simcoll.runtime import TraceEvent
from simcoll.topology.graph import Topology

__all__ = ["Result"]


@dataclass(frozen=True)
class Result:
    """What ``simulate`` returns. Times in seconds, sizes in bytes, rates in bytes/s.

    Attributes:
        time: simulated seconds until the last event (the last byte delivered, the last
            rank returned).
        correct: every checked output matched the numpy reference (``None`` in data-free
            mode, where there are no values to check).
        outputs: per-rank outputs (data mode), else ``None``.
        bytes_sent, bytes_received: payload bytes per GPU rank (int64 arrays).
        host_bytes_sent, host_bytes_received: the same for server hosts (empty if none).
        link_bytes: ``{(from_device, to_device): bytes}`` for every directed link.
        messages: number of point-to-point messages.
        rank_times: simulated time at which each rank's algorithm returned.
        algbw, busbw: nccl-tests bandwidths (see ``simcoll.collectives``).
        max_error: largest absolute deviation from the reference (data mode, else None).
        trace: every message, reduction and compute span, in the order they ended
            (``simulate(..., trace=True)``), else None.
    """

    collective: str
    algorithm: str
    network: str
    topology: str
    nranks: int
    nbytes: int
    dtype: str
    op: str | None
    params: dict[str, Any]
    time: float
    correct: bool | None
    outputs: list[Any] | None = field(repr=False)
    bytes_sent: np.ndarray = field(repr=False)
    bytes_received: np.ndarray = field(repr=False)
    host_bytes_sent: np.ndarray = field(repr=False)
    host_bytes_received: np.ndarray = field(repr=False)
    link_bytes: dict[tuple[str, str], int] = field(repr=False)
    messages: int
    rank_times: np.ndarray = field(repr=False)
    algbw: float
    busbw: float
    max_error: float | None = None
    trace: tuple[TraceEvent, ...] | None = field(default=None, repr=False)

    @classmethod
    def from_run(cls, *, coll: Collective, algorithm: str, topology: Topology,
                 network: Network, time: float, nbytes: int, dtype: np.dtype,
                 op: ReduceOp | None, params: dict[str, Any], outputs: list[Any] | None,
                 correct: bool | None, max_error: float | None, rank_times: np.ndarray,
                 trace: tuple[TraceEvent, ...] | None) -> Result:
        """The result of a finished run: its traffic counters turned into arrays, and the
        nccl-tests bandwidths of ``time``."""
        p = topology.nranks
        total = nbytes * coll.size_factor(p)
        algbw = total / time if time > 0 else math.inf
        factor = coll.busbw_factor(p)
        sent = np.array(network.sent, dtype=np.int64)
        received = np.array(network.received, dtype=np.int64)
        return cls(
            collective=coll.name, algorithm=algorithm, network=network.name,
            topology=topology.name, nranks=p, nbytes=nbytes, dtype=str(dtype),
            op=None if op is None else op.name, params=params, time=time, correct=correct,
            outputs=outputs, bytes_sent=sent[:p], bytes_received=received[:p],
            host_bytes_sent=sent[p:], host_bytes_received=received[p:],
            link_bytes={topology.directed_link(d): b
                        for d, b in enumerate(network.link_bytes)},
            messages=network.messages, rank_times=rank_times, algbw=algbw,
            busbw=algbw * factor if factor else 0.0, max_error=max_error, trace=trace)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no outputs; link keys as ``"from->to"``)."""
        def num(v: float) -> float | None:
            return None if math.isnan(v) or math.isinf(v) else v

        return {
            "collective": self.collective, "algorithm": self.algorithm,
            "network": self.network, "topology": self.topology, "nranks": self.nranks,
            "nbytes": self.nbytes, "dtype": self.dtype, "op": self.op,
            "params": dict(self.params), "time": self.time, "correct": self.correct,
            "max_error": self.max_error,
            "bytes_sent": self.bytes_sent.tolist(),
            "bytes_received": self.bytes_received.tolist(),
            "host_bytes_sent": self.host_bytes_sent.tolist(),
            "host_bytes_received": self.host_bytes_received.tolist(),
            "link_bytes": {f"{u}->{v}": b for (u, v), b in self.link_bytes.items() if b},
            "messages": self.messages, "rank_times": self.rank_times.tolist(),
            "algbw": num(self.algbw), "busbw": num(self.busbw),
        }

    def summary(self) -> str:
        """One human-readable line."""
        check = {True: "correct", False: "WRONG", None: "unchecked"}[self.correct]
        return (f"{self.collective}/{self.algorithm} p={self.nranks} n={self.nbytes} B: "
                f"{self.time * 1e6:.3f} us, algbw {self.algbw / 1e9:.2f} GB/s, "
                f"busbw {self.busbw / 1e9:.2f} GB/s, max sent/rank "
                f"{int(self.bytes_sent.max(initial=0))} B, {self.messages} msgs, {check}")
