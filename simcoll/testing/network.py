"""The alpha-beta-gamma reference network that formula tests run on."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from simcoll.checks import integer, real
from simcoll.errors import TopologyError
from simcoll.testing.asserts import assert_matches_model
from simcoll.topology import Topology, builders

__all__ = ["alpha_beta_network", "AlphaBeta"]


#: Each constant's rules: whether it must be > 0 (not just >= 0), and its unit.
RULES = {"alpha": (False, "seconds per message"), "beta": (True, "seconds per byte"),
         "gamma": (False, "seconds per reduced byte; 0: reductions are free")}


def constant(name: str, value: float) -> float:
    """One constant as a float: alpha >= 0, beta > 0 (a link's bandwidth is finite),
    gamma >= 0 (0: reductions are free).

    Raises:
        TopologyError: not a finite number in that range, naming it and the range.
    """
    strict, what = RULES[name]
    return real(value, name, strict=strict, error=TopologyError, what=what)


def _checked(alpha: float, beta: float, gamma: float) -> tuple[float, float, float]:
    return constant("alpha", alpha), constant("beta", beta), constant("gamma", gamma)


def alpha_beta_network(p: int, *, alpha: float, beta: float, gamma: float = 0.0,
                       servers: int = 0) -> Topology:
    """The single-port reference network: a message of n bytes costs alpha + n beta.

    ``p`` GPUs (and ``servers`` server hosts) on one non-blocking switch, every link of
    bandwidth 1/beta and latency alpha/2, every GPU and host reducing at 1/gamma bytes/s
    (``gamma=0``: reductions are free). This is the network ``simcoll.cost`` models.

    Raises:
        TopologyError: alpha or gamma not a finite number >= 0, beta not one > 0, p not
            an integer >= 1.
    """
    alpha, beta, gamma = _checked(alpha, beta, gamma)
    reduce_bandwidth = math.inf if gamma == 0 else 1 / gamma
    return _switch(p, alpha / 2, 1 / beta, reduce_bandwidth, servers)


def _switch(p: int, latency: float, bandwidth: float, reduce_bandwidth: float,
            servers: int) -> Topology:
    p = integer(p, "p", minimum=1, error=TopologyError, what="GPUs")  # the caller's name
    return builders.switch(p, bandwidth=bandwidth, latency=latency, servers=servers,
                           reduce_bandwidth=reduce_bandwidth,
                           server_reduce_bandwidth=reduce_bandwidth)


def reference_networks(p: int, *, alpha: float, beta: float, gamma: float = 0.0,
                       servers: int = 0) -> Iterator[Topology]:
    """:func:`alpha_beta_network`, then the same with its latency, bandwidth and reduction
    rate each one float step up or down: the machine as built from the rates themselves
    (``switch(p, bandwidth=X, ...)`` checked with ``beta=1/X``: 1 / (1 / X) need not be
    X again), or from a latency in other units (``switch(p, latency=500 * sc.ns)``
    checked with ``alpha=1 * sc.us``: 500 * 1e-9 is one step above 1e-6 / 2)."""
    alpha, beta, gamma = _checked(alpha, beta, gamma)
    reduce_bandwidth = math.inf if gamma == 0 else 1 / gamma

    def near(x: float) -> tuple[float, ...]:
        return (x,) if math.isinf(x) else (x, math.nextafter(x, 0.0),
                                           math.nextafter(x, math.inf))

    for latency in near(alpha / 2):
        for bandwidth in near(1 / beta):
            for rate in near(reduce_bandwidth):
                yield _switch(p, latency, bandwidth, rate, servers)


@dataclass(frozen=True)
class AlphaBeta:
    """One set of reference constants: builds the network, checks results against models.

    Attributes:
        alpha: seconds per message; beta: seconds per byte; gamma: seconds per reduced byte.
    """

    alpha: float = 1e-6
    beta: float = 1e-11
    gamma: float = 2.5e-12

    def __post_init__(self) -> None:
        _checked(self.alpha, self.beta, self.gamma)

    def network(self, p: int, *, servers: int = 0) -> Topology:
        """:func:`alpha_beta_network` with these constants."""
        return alpha_beta_network(p, alpha=self.alpha, beta=self.beta, gamma=self.gamma,
                                  servers=servers)

    def check(self, res, *, rtol: float = 1e-9, root: int | None = None,
              exact: bool = False) -> None:
        """:func:`~simcoll.testing.assert_matches_model` with these constants."""
        assert_matches_model(res, alpha=self.alpha, beta=self.beta, gamma=self.gamma,
                             rtol=rtol, root=root, exact=exact)
