"""Network models behind one interface; ``"flow"`` is the default.

* ``"flow"``: max-min fair sharing of every directed link (see :mod:`simcoll.network.flow`).
* ``"analytical"``: no contention, latency + size / bottleneck bandwidth.
"""

from __future__ import annotations

from simcoll.errors import UnknownNetworkError
from simcoll.network.analytical import AnalyticalNetwork
from simcoll.network.base import Network
from simcoll.network.flow import FlowNetwork

__all__ = ["Network", "FlowNetwork", "AnalyticalNetwork", "NETWORKS", "network_class"]

NETWORKS: dict[str, type[Network]] = {"flow": FlowNetwork, "analytical": AnalyticalNetwork}


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
