"""Machines: devices, full-duplex links, deterministic routes, builders, presets, files."""

from __future__ import annotations

from simcoll.topology.astra import from_astra_sim, multi_dim
from simcoll.topology.builders import cluster, fully_connected, ring, switch, torus
from simcoll.topology.graph import DEVICE_KINDS, Device, Link, Route, Topology
from simcoll.topology.io import from_dict, load, save, to_dict
from simcoll.topology.presets import dgx, dgx_a100, dgx_h100, fat_tree, pcie_node
from simcoll.topology.spec import from_spec

__all__ = ["Topology", "Device", "Link", "Route", "DEVICE_KINDS",
           "ring", "fully_connected", "switch", "torus", "cluster", "multi_dim",
           "dgx", "dgx_a100", "dgx_h100", "fat_tree", "pcie_node",
           "to_dict", "from_dict", "save", "load", "from_spec", "from_astra_sim"]
