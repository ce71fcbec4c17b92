"""The "analytical" network model: no contention, one event per arrival instant.

A message takes ``sum(latency on its route) + nbytes / min(bandwidth on its route)``
whatever else is in flight, as in ASTRA-sim's analytical backend. It is exact when no two
messages share a directed link at the same time, and optimistic otherwise.
"""

from __future__ import annotations

from typing import Any

from simcoll.network.base import Arrival, Network
from simcoll.topology.graph import MulticastVia, Via

__all__ = ["AnalyticalNetwork"]


class AnalyticalNetwork(Network):
    """Latency plus size over bottleneck bandwidth; links never slow each other down."""

    name = "analytical"

    def times_alone(self, routes: list[tuple[int, ...]]) -> bool:
        """Always, without jitter: messages never slow each other down."""
        return self.jitter is None

    def _launch(self, src: int, dst: int | tuple[int, ...], nbytes: int,
                links: tuple[int, ...], latency: float, bandwidth: float,
                on_arrival: Arrival, token: Any, via: Via | MulticastVia | None = None
                ) -> None:
        self._arrive_after(latency + nbytes / bandwidth, on_arrival, token)
