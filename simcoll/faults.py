"""Faults and stragglers: what goes wrong on a real machine, as inputs to a run.

``simulate(..., faults=Faults(...))`` runs a collective on a machine where

* a link fails or slows down at a given time (``LinkFault``): flows crossing a failed
  link move to the shortest route around it (after the latency it has beyond theirs:
  :func:`simcoll.network.rerouting.change_link`), and so do messages sent later (or the run
  ends with ``LinkFailureError`` naming the link and the messages that could not go on,
  in flight or sent later); a degraded link is shared at
  its new bandwidth from that instant (network models ``flow`` and ``flow_rtt``);
* a GPU is slow: its compute and its reductions take ``slow[rank]`` times as long;
* a GPU is late: its program starts ``late[rank]`` seconds after the others;
* every message waits a random extra latency, uniform in ``[0, jitter)`` seconds, drawn
  from a generator seeded with ``seed``, so a run is reproducible. Jitter can shorten a
  run: channels sharing a link (NCCL's) run in lock-step without it, all waiting out
  their latency at once; the smallest jitter breaks that tie and lets one channel's bytes
  fill another's latency (README, "Faults and stragglers"); how far it moves a run
  depends on its size and the seed, so compare runs at the jitter expected, over seeds.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from simpy.events import Event, Timeout

from simcoll.checks import integer, real
from simcoll.engine import schedule_background
from simcoll.errors import InvalidInputError
from simcoll.network.base import Network
from simcoll.topology.graph import Topology

__all__ = ["LinkFault", "Faults"]


@dataclass(frozen=True)
class LinkFault:
    """Link ``(u, v)`` (either way round) runs at ``factor`` times its nominal bandwidth,
    in both directions, from time ``at`` on (``factor=0``, the default: it fails)."""

    u: str
    v: str
    at: float
    factor: float = 0.0

    def __post_init__(self) -> None:
        """Check the instant and the factor as the fault is made (the link's ends are
        checked against the topology of the run that uses it).

        Raises:
            InvalidInputError: ``at`` or ``factor`` not a finite number >= 0.
        """
        real(self.at, "LinkFault at", what="seconds")
        real(self.factor, "LinkFault factor", what="0 fails the link")


def _check_link_fault(fault: Any) -> None:
    if not isinstance(fault, LinkFault):
        raise InvalidInputError(f"faults.links holds {fault!r}; give LinkFault(u, v, at=..., "
                                f"factor=...) items")


@dataclass(frozen=True)
class Faults:
    """What goes wrong in a run; see the module docstring.

    Attributes:
        links: link failures and slow-downs.
        slow: ``{rank: factor > 0}`` compute and reduction slow-down of a GPU (2: twice
            as long).
        late: ``{rank: seconds >= 0}`` start offset of a GPU's program.
        jitter: each message's latency grows by a uniform draw in ``[0, jitter)`` s.
        seed: seed of the jitter draws.
    """

    links: Sequence[LinkFault] = ()
    slow: Mapping[int, float] = field(default_factory=dict)
    late: Mapping[int, float] = field(default_factory=dict)
    jitter: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        """Check every value that does not depend on the machine as the faults are made
        (ranks against the machine's size, and links against its links, when a run
        uses them).

        Raises:
            InvalidInputError: links not a list of LinkFault, slow or late not a dict of
                integer ranks >= 0, or a value out of range.
        """
        if not isinstance(self.links, (list, tuple)):
            raise InvalidInputError(f"faults.links={self.links!r} is not accepted; give a "
                                    f"list of LinkFault(u, v, at=..., factor=...)")
        for fault in self.links:
            _check_link_fault(fault)
        for name in ("slow", "late"):
            if not isinstance(getattr(self, name), Mapping):
                raise InvalidInputError(f"faults.{name}={getattr(self, name)!r} is not "
                                        f"accepted; give a dict {{rank: "
                                        f"{'factor' if name == 'slow' else 'seconds'}}}")
        for rank, factor in self.slow.items():
            integer(rank, "faults.slow rank", minimum=0)
            real(factor, f"faults.slow[{rank}]", strict=True, what="slow-down factor")
        for rank, seconds in self.late.items():
            integer(rank, "faults.late rank", minimum=0)
            real(seconds, f"faults.late[{rank}]", what="seconds")
        real(self.jitter, "faults.jitter", what="seconds")
        integer(self.seed, "faults.seed", minimum=0)

    def checked(self, topology: Topology) -> _Plan:
        """The faults as a plan for ``topology``, every value checked.

        Raises:
            InvalidInputError: an unknown link or rank, or a factor that leaves a link's
                rate infinite or below 1 byte/s.
        """
        p = topology.nranks
        links = []
        for fault in self.links:   # again: the list may have grown since
            _check_link_fault(fault)
            try:
                index = topology.link_index(fault.u, fault.v)
            except Exception as exc:
                raise InvalidInputError(f"faults.links: {exc}") from None
            factor = real(fault.factor, "LinkFault factor", what="0 fails the link")
            left = [topology.bandwidth_of(2 * index + way) * factor for way in (0, 1)]
            if factor > 0 and not all(1.0 <= rate < math.inf for rate in left):
                shown = min(left) if min(left) < 1.0 else max(left)
                raise InvalidInputError(
                    f"LinkFault factor={factor!r} leaves link ({fault.u!r}, {fault.v!r}) at "
                    f"{shown:.6g} bytes/s; give 0 (the link fails) or a factor that leaves "
                    f"it a finite rate of at least 1 byte/s each way")
            links.append((real(fault.at, "LinkFault at", what="seconds"), index, factor))
        slow = {integer(r, "faults.slow rank", minimum=0, maximum=p - 1):
                real(f, f"faults.slow[{r}]", strict=True, what="slow-down factor")
                for r, f in self.slow.items()}
        late = {integer(r, "faults.late rank", minimum=0, maximum=p - 1):
                real(t, f"faults.late[{r}]", what="seconds")
                for r, t in self.late.items()}
        jitter = real(self.jitter, "faults.jitter", what="seconds")
        seed = integer(self.seed, "faults.seed", minimum=0)
        # a slow-down of 1 and a lateness of 0 change nothing: left out, as jitter 0 is (a
        # sweep's baseline of slow={r: f} at f = 1 is the healthy run)
        slow = {rank: factor for rank, factor in slow.items() if factor != 1.0}
        late = {rank: seconds for rank, seconds in late.items() if seconds != 0.0}
        # By instant, faults of one instant in the order given, each applied in turn (a
        # failure then a restore at one instant moves the messages in flight all the same).
        # A factor of 1 on a link at its nominal rate changes nothing: left out too (a
        # restore after a failure or slow-down stays).
        factors = [1.0] * len(topology.links)
        planned = []
        for at, index, factor in sorted(links, key=lambda fault: fault[0]):
            if factor != 1.0 or factors[index] != 1.0:
                planned.append((at, index, factor))
                factors[index] = factor
        return _Plan(planned, slow, late, jitter, seed)


@dataclass(frozen=True)
class _Plan:
    links: list[tuple[float, int, float]]
    slow: dict[int, float]
    late: dict[int, float]
    jitter: float
    seed: int

    def to_dict(self, topology: Topology) -> dict[str, Any]:
        """What was planned, JSON-ready, the parts left out that change nothing: links
        as ``{"link": [u, v], "at": s, "factor": f}``, ``slow`` and ``late`` by rank
        (keys as strings, as JSON has them), ``jitter`` and its ``seed``."""
        out: dict[str, Any] = {}
        if self.links:
            out["links"] = [{"link": list(topology.directed_link(2 * index)), "at": at,
                             "factor": factor} for at, index, factor in self.links]
        for name, values in (("slow", self.slow), ("late", self.late)):
            if values:
                out[name] = {str(rank): value for rank, value in sorted(values.items())}
        if self.jitter > 0:
            out["jitter"], out["seed"] = self.jitter, self.seed
        return out

    def reduce_bandwidths(self, bandwidths: list[float]) -> list[float]:
        """Each endpoint's reduction bandwidth with its slow-down applied.

        Raises:
            InvalidInputError: a factor so small that the rate overflows to infinity
                (free reductions), naming it.
        """
        out = [bw / self.slow.get(a, 1.0) for a, bw in enumerate(bandwidths)]
        for a, (before, after) in enumerate(zip(bandwidths, out)):
            if math.isinf(after) and not math.isinf(before):
                raise InvalidInputError(
                    f"faults.slow[{a}]={self.slow[a]!r} is not accepted: rank {a}'s "
                    f"reduction rate, {before:g} bytes/s, divided by it is no finite "
                    f"number; use a factor >= {before / sys.float_info.max * 1.01:.3g}")
        return out

    def compute_scale(self, endpoints: int) -> list[float] | None:
        """Each endpoint's compute slow-down (None when no GPU is slow)."""
        if not self.slow:
            return None
        return [self.slow.get(a, 1.0) for a in range(endpoints)]

    def delayed(self, rank: int, program: Generator[Event, Any, Any],
                env: Any) -> Generator[Event, Any, Any]:
        """``program``, started ``late[rank]`` seconds from now."""
        if self.late.get(rank, 0.0) == 0.0:
            return program
        return _after(Timeout(env, self.late[rank]), program)

    def install(self, network: Network) -> None:
        """Give the network its jitter and schedule the link faults.

        Raises:
            InvalidInputError: link faults on a network model that does not model them.
        """
        if self.jitter > 0:
            rng = np.random.default_rng(self.seed)
            jitter = self.jitter
            network.jitter = lambda: float(rng.uniform(0.0, jitter))
        if self.links:
            network.track_flows(self.links)
            for at, index, factor in self.links:
                schedule_background(network.env, at, _changer(network, index, factor))


def _changer(network: Network, index: int, factor: float) -> Callable[[Event], None]:
    def change(_event: Event) -> None:
        network.change_link(index, factor)
    return change


def _after(wait: Event, program: Generator[Event, Any, Any]) -> Generator[Event, Any, Any]:
    yield wait
    return (yield from program)
