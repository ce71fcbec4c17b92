"""Machines as they are built: DGX A100 / H100 (alone or on a rail-optimised fat tree),
PCIe servers with or without GPU peer-to-peer access, and generic fat trees.

``hardware`` holds the figures (nominal and NCCL-usable) with their sources; ``dgx``,
``pcie`` and ``fabrics`` build the machines from them.
"""

from __future__ import annotations

from simcoll.topology.presets.dgx import dgx, dgx_a100, dgx_h100
from simcoll.topology.presets.fabrics import fat_tree
from simcoll.topology.presets.hardware import (
    A100_PCIE,
    A100_SXM,
    A100_SXM_40GB,
    H100_SXM,
    RTX_5090,
    GPUSpec,
    pcie_x16,
    pcie_x16_nccl,
    reduce_bandwidth_of,
)
from simcoll.topology.presets.pcie import pcie_node

__all__ = ["dgx_a100", "dgx_h100", "dgx", "fat_tree", "pcie_node", "GPUSpec", "A100_SXM",
           "A100_SXM_40GB", "A100_PCIE", "H100_SXM", "RTX_5090", "pcie_x16", "pcie_x16_nccl",
           "reduce_bandwidth_of"]
