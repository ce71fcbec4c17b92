"""Machines: devices, full-duplex links, deterministic routes, and builders."""

from __future__ import annotations

from simcoll.topology.builders import cluster, fully_connected, ring, switch, torus
from simcoll.topology.graph import DEVICE_KINDS, Device, Link, Route, Topology

__all__ = ["Topology", "Device", "Link", "Route", "DEVICE_KINDS",
           "ring", "fully_connected", "switch", "torus", "cluster"]
