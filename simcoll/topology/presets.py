"""Hardware presets: DGX A100 and DGX H100 servers, alone or as a cluster.

Figures are per direction, from NVIDIA's published specifications: A100 NVLink 3 gives a
GPU 300 GB/s each way (600 GB/s total) to the NVSwitches, and a 200 Gb/s HDR InfiniBand
NIC per GPU on PCIe 4 (about 25 GB/s); H100 NVLink 4 gives 450 GB/s each way, and a
400 Gb/s NDR NIC per GPU on PCIe 5. Latencies are round typical values, not measurements:
0.5 us per NVLink hop, 1 us per PCIe hop, 1.5 us per InfiniBand hop. The NVSwitches of a
node are modelled as one non-blocking switch, the InfiniBand fabric (rail-optimised fat
tree) as one non-blocking switch.
"""

from __future__ import annotations

import math

from simcoll.topology.builders import _check_count
from simcoll.topology.graph import Topology
from simcoll.units import GB, Gbps, us

__all__ = ["dgx_a100", "dgx_h100", "dgx"]


def dgx(nodes: int, *, nvlink_bandwidth: float, pcie_bandwidth: float, nic_bandwidth: float,
        name: str, gpus_per_node: int = 8, nvlink_latency: float = 0.5 * us,
        pcie_latency: float = 1 * us, ib_latency: float = 1.5 * us,
        reduce_bandwidth: float = math.inf) -> Topology:
    """``nodes`` DGX-style servers: GPUs on an NVSwitch, one NIC per GPU on an IB fabric.

    Inside a node a message crosses GPU -> NVSwitch -> GPU; between nodes it crosses
    GPU -> NIC (PCIe) -> IB switch -> NIC -> GPU, so its bandwidth is the lesser of the
    NIC and PCIe bandwidths. Rank ``node * gpus_per_node + local``.
    """
    nodes = _check_count("nodes", nodes)
    gpus_per_node = _check_count("gpus_per_node", gpus_per_node)
    topo = Topology(f"{name}x{nodes}")
    ib = topo.add_switch("ib") if nodes > 1 else None
    for node in range(nodes):
        nvswitch = topo.add_switch(f"nvswitch{node}")
        for local in range(gpus_per_node):
            gpu = topo.add_gpu(f"gpu{node * gpus_per_node + local}",
                               reduce_bandwidth=reduce_bandwidth, node=node)
            topo.add_link(gpu, nvswitch, bandwidth=nvlink_bandwidth, latency=nvlink_latency,
                          kind="nvlink")
            if ib is not None:
                nic = topo.add_nic(f"nic{node * gpus_per_node + local}")
                topo.add_link(gpu, nic, bandwidth=pcie_bandwidth, latency=pcie_latency,
                              kind="pcie")
                topo.add_link(nic, ib, bandwidth=nic_bandwidth, latency=ib_latency, kind="ib")
    return topo


def dgx_a100(nodes: int = 1, *, reduce_bandwidth: float = math.inf) -> Topology:
    """DGX A100: 8 A100s, NVLink 3 at 300 GB/s per direction, 8 x 200 Gb/s HDR IB."""
    return dgx(nodes, nvlink_bandwidth=300 * GB, pcie_bandwidth=25 * GB,
               nic_bandwidth=200 * Gbps, name="dgx_a100", reduce_bandwidth=reduce_bandwidth)


def dgx_h100(nodes: int = 1, *, reduce_bandwidth: float = math.inf) -> Topology:
    """DGX H100: 8 H100s, NVLink 4 at 450 GB/s per direction, 8 x 400 Gb/s NDR IB."""
    return dgx(nodes, nvlink_bandwidth=450 * GB, pcie_bandwidth=50 * GB,
               nic_bandwidth=400 * Gbps, name="dgx_h100", reduce_bandwidth=reduce_bandwidth)
