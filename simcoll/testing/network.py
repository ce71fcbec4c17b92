"""The alpha-beta-gamma reference network that formula tests run on."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcoll.testing.asserts import assert_matches_model
from simcoll.topology import Topology, builders

__all__ = ["alpha_beta_network", "AlphaBeta"]


def _rate(per_byte: float, name: str) -> float:
    """Bytes per second for a cost per byte (0 means free: infinite rate)."""
    if not per_byte >= 0:
        raise ValueError(f"{name}={per_byte!r} is not accepted; use seconds per byte >= 0")
    return math.inf if per_byte == 0 else 1 / per_byte


def alpha_beta_network(p: int, *, alpha: float, beta: float, gamma: float = 0.0,
                       servers: int = 0) -> Topology:
    """The single-port reference network: a message of n bytes costs alpha + n beta.

    ``p`` GPUs (and ``servers`` server hosts) on one non-blocking switch, every link of
    bandwidth 1/beta and latency alpha/2, every GPU and host reducing at 1/gamma bytes/s
    (``gamma=0``: reductions are free). This is the network ``simcoll.cost`` models.
    """
    if not alpha >= 0:
        raise ValueError(f"alpha={alpha!r} is not accepted; use seconds >= 0")
    if not beta > 0:
        raise ValueError(f"beta={beta!r} is not accepted; use seconds per byte > 0")
    reduce_bandwidth = _rate(gamma, "gamma")
    return builders.switch(p, bandwidth=1 / beta, latency=alpha / 2, servers=servers,
                           reduce_bandwidth=reduce_bandwidth,
                           server_reduce_bandwidth=reduce_bandwidth)


@dataclass(frozen=True)
class AlphaBeta:
    """One set of reference constants: builds the network, checks results against models.

    Attributes:
        alpha: seconds per message; beta: seconds per byte; gamma: seconds per reduced byte.
    """

    alpha: float = 1e-6
    beta: float = 1e-11
    gamma: float = 2.5e-12

    def network(self, p: int, *, servers: int = 0) -> Topology:
        """:func:`alpha_beta_network` with these constants."""
        return alpha_beta_network(p, alpha=self.alpha, beta=self.beta, gamma=self.gamma,
                                  servers=servers)

    def check(self, res, *, rtol: float = 1e-9, root: int = 0) -> None:
        """:func:`~simcoll.testing.assert_matches_model` with these constants."""
        assert_matches_model(res, alpha=self.alpha, beta=self.beta, gamma=self.gamma,
                             rtol=rtol, root=root)
