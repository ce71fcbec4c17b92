"""Network models behind one interface; ``"flow"`` is the default.

* ``"flow"``: max-min fair sharing of every directed link (see :mod:`simcoll.network.flow`).
* ``"flow_rtt"``: as ``"flow"``, but links shared in proportion to 1 / route latency
  (TCP-like, SimGrid's CM02; see :mod:`simcoll.network.flow_rtt`).
* ``"analytical"``: no contention, latency + size / bottleneck bandwidth.
"""

from __future__ import annotations

from simcoll.errors import UnknownNetworkError
from simcoll.network.analytical import AnalyticalNetwork
from simcoll.network.base import Network
from simcoll.network.flow import FlowNetwork
from simcoll.network.flow_rtt import FlowRttNetwork

__all__ = ["Network", "FlowNetwork", "FlowRttNetwork", "AnalyticalNetwork", "NETWORKS",
           "network_class"]

NETWORKS: dict[str, type[Network]] = {"flow": FlowNetwork, "flow_rtt": FlowRttNetwork,
                                      "analytical": AnalyticalNetwork}


def network_class(name: str) -> type[Network]:
    """The network model registered as ``name``.

    Raises:
        UnknownNetworkError: listing the known models.
    """
    try:
        return NETWORKS[name]
    except (KeyError, TypeError):
        raise UnknownNetworkError(
            f"unknown network model {name!r}; known models: {', '.join(sorted(NETWORKS))}"
        ) from None
