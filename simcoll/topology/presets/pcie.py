"""A PCIe server: GPUs on PCIe switches under the CPUs' root complexes, with or without
GPU peer-to-peer access.

The machine: ``gpus`` GPUs, ``gpus_per_switch`` to a PCIe switch (``pcie<j>``), each
switch on one x16 uplink to the root complex of its CPU socket (``cpu<s>``; switches
spread evenly over ``sockets``), each socket's host memory (``memory<s>``) on a link of
half the memory bandwidth each way, and two sockets joined by their inter-socket link
(UPI / Infinity Fabric). Every PCIe link is x16 of generation ``gen``: NCCL's usable
figure by default (Gen3 12, Gen4 24, Gen5 48 GB/s per direction; nominal 15.75, 31.5,
63; see :mod:`simcoll.topology.presets.hardware`). ``pcie_latency`` is GPU to root complex, half
on each of the two links.

With ``p2p=True`` GPUs write into each other's memory through the PCIe switches: GPUs on
one switch meet there, GPUs on two switches of one socket at the root complex, GPUs of
two sockets across the inter-socket link. That is NCCL with ``NCCL_P2P_LEVEL=SYS``: by
default NCCL 2.30.7 uses P2P only where the path between two GPUs stays below the CPU
(``PATH_PXB``, ``ncclTopoCheckP2p`` in src/graph/paths.cc: here under one PCIe switch;
on AMD hosts of at most two GPUs, across the host too) and sends the rest through host
memory, its SHM transport, as ``p2p=False`` stages every pair.

With ``p2p=False`` (no peer-to-peer access: NCCL then uses its SHM transport, staging
data in host memory) every message between two GPUs is staged through the sender's host
memory (``staging`` of each GPU): it crosses the sender's PCIe links up to the root
complex and into memory, then out of memory and down the receiver's PCIe links (and the
inter-socket link when the receiver sits on the other socket). The uplink of a PCIe
switch is then shared by all the traffic its GPUs send and, in the other direction,
receive, and the memory link carries each staged byte once in each direction. DRAM's
peak rate is one figure for reads and writes together (one data bus, turned around
between them), and staging writes every byte once and reads it once, so each direction
of the memory link gets half of it. Host memory copies are not charged separately: the
memory link's rate is their only cost.
NCCL's SHM transport (src/transport/shm.cc, NCCL 2.30.7) keeps a connection's buffer in
host memory: the sender's SMs write into it and the receiver's SMs read it over PCIe. Its
default puts the buffer on the receiver's side (``NCCL_SHM_LOCALITY=2``), where simcoll
stages on the sender's: the same links, but between two sockets the other socket's memory
link carries the message.
SMs read host memory slower than they write it, so each GPU's link carries what comes
into the GPU at ``host_read_bandwidth`` (by default what nvbandwidth measures for the
generation, where that is below the link's rate: 35.2 GB/s on Gen5 against NCCL's 48;
:data:`~simcoll.topology.presets.hardware.SM_HOST_READ`). NCCL's search
(``algorithm="nccl"``) does not know of that rate: as NCCL reads a GPU's link speed off
the GPU, it sees the link both ways at its rate away from the GPU, 48 GB/s on Gen5
(:func:`~simcoll.algorithms.nccl.node_search.nccl_rate`).

Defaults: A100 PCIe 80GB GPUs (reductions at 1,935 / 3 = 645 GB/s), host memory of one
AMD EPYC 7002/7003 socket (8 channels of DDR4-3200: 8 x 25.6 = 204.8 GB/s, AMD's EPYC
specifications), and the inter-socket figure NCCL 2.30.7 assumes for AMD CPUs, ``AMD_BW
16.0`` GB/s (src/graph/topo.h): the weight NCCL's path search gives the link, which moves
more on the machine (55.6 GB/s measured between GPUs of two EPYC 9005 sockets: README,
the ``rtx5090x8_turin_p2p`` row; pass ``inter_socket_bandwidth`` for a machine's own).
simcoll's search (``algorithm="nccl"``) reads the link at the rate given, where NCCL reads
16 GB/s on any AMD host: a faster link given here may let the search find channels that
NCCL's does not (on that row 4 channels where 16 GB/s gives NCCL's fallback of 2).
Latencies are round typical values, not measurements.
"""

from __future__ import annotations

import sys

from simcoll.checks import Count, flag, integer, real
from simcoll.errors import TopologyError
from simcoll.topology.builders import _check_count, _check_quantities, _check_size
from simcoll.topology.graph import Topology
from simcoll.topology.presets.hardware import A100_PCIE, check_gen, pcie_x16_nccl, sm_host_read
from simcoll.units import GB, us

__all__ = ["pcie_node"]


def pcie_node(gpus: Count = 8, gen: Count = 4, p2p: bool = True, *, gpus_per_switch: Count = 4,
              sockets: Count = 1, pcie_bandwidth: float | None = None,
              pcie_latency: float = 1 * us, memory_bandwidth: float = 204.8 * GB,
              memory_latency: float = 0.1 * us, inter_socket_bandwidth: float = 16 * GB,
              inter_socket_latency: float = 0.5 * us,
              reduce_bandwidth: float = A100_PCIE.reduce_bandwidth,
              host_read_bandwidth: float | None = None) -> Topology:
    """GPUs on PCIe switches under 1 or 2 CPU sockets (see the module for the model).

    Args:
        gpus: GPUs (ranks), all on node 0.
        gen: PCI Express generation, 3, 4 or 5.
        p2p: GPU peer-to-peer access; False stages every GPU-to-GPU message through
            the sender's host memory.
        gpus_per_switch: GPUs per PCIe switch.
        sockets: CPU sockets (root complexes), 1 or 2.
        pcie_bandwidth: per x16 link and direction; default NCCL's figure for ``gen``.
        pcie_latency: GPU to root complex, seconds.
        memory_bandwidth: each socket's host memory, bytes/s read and written together
            (DRAM's peak); its link carries half of it each way.
        memory_latency: the link of each socket's host memory.
        inter_socket_bandwidth, inter_socket_latency: the link between two sockets.
        reduce_bandwidth: each GPU's reduction output, bytes/s.
        host_read_bandwidth: with ``p2p=False``, bytes/s a GPU reads staged data from
            host memory; None: the generation's measured rate where it is below the
            link's (:func:`~simcoll.topology.presets.hardware.sm_host_read`).

    Raises:
        TopologyError: a count, generation, rate or latency that is not accepted, or two
            sockets for GPUs that make one PCIe switch.
    """
    gpus = _check_count("gpus", gpus)
    per_switch = _check_count("gpus_per_switch", gpus_per_switch)
    gen = check_gen(gen)  # also where both rates are given and the name alone shows it
    sockets = integer(sockets, "sockets", minimum=1, maximum=2, error=TopologyError,
                      what="CPU sockets (root complexes): 1 or 2")
    switches = -(-gpus // per_switch)
    if sockets > switches:
        raise TopologyError(f"sockets={sockets} is not accepted for gpus={gpus} and "
                            f"gpus_per_switch={per_switch}: they make one PCIe switch, and "
                            f"the other socket would hold no GPU; give sockets=1, or fewer "
                            f"GPUs per switch")
    p2p = flag(p2p, "p2p", error=TopologyError)
    # Its GPUs and PCIe switches (no more than GPUs), a link to each; 2 per socket.
    _check_size(2 * gpus + 2 * sockets, 2 * gpus + 2 * sockets, bound=True, gpus=gpus)
    _check_quantities(("pcie_bandwidth",), pcie_bandwidth=pcie_bandwidth,
                      pcie_latency=pcie_latency, memory_bandwidth=memory_bandwidth,
                      memory_latency=memory_latency,
                      inter_socket_bandwidth=inter_socket_bandwidth,
                      inter_socket_latency=inter_socket_latency,
                      reduce_bandwidth=reduce_bandwidth)
    if memory_bandwidth / 2 < sys.float_info.min:
        raise TopologyError(f"memory_bandwidth={memory_bandwidth!r} is not accepted: its link "
                            f"carries half of it each way, below the least rate a link "
                            f"takes ({sys.float_info.min:.3g} bytes/s); give bytes/s such "
                            f"as 204.8e9")
    bandwidth = pcie_x16_nccl(gen) if pcie_bandwidth is None else pcie_bandwidth
    if p2p and host_read_bandwidth is not None:
        raise TopologyError(f"host_read_bandwidth={host_read_bandwidth!r} is not accepted "
                            f"with p2p=True (GPUs then write into each other and read no "
                            f"host memory); leave it out, or set p2p=False")
    read = sm_host_read(gen) if host_read_bandwidth is None else real(
        host_read_bandwidth, "host_read_bandwidth", strict=True, error=TopologyError,
        what="bytes/s")
    back = None if p2p or read is None or read >= bandwidth else read
    topo = Topology(f"pcie_node({gpus}, gen{gen}{'' if p2p else ', no p2p'})")
    cpus = [topo.add_switch(f"cpu{s}") for s in range(sockets)]
    memories = [topo.add_switch(f"memory{s}") for s in range(sockets)]
    for cpu, memory in zip(cpus, memories):
        topo.add_link(cpu, memory, bandwidth=memory_bandwidth / 2, latency=memory_latency,
                      kind="memory")
    if sockets == 2:
        topo.add_link(cpus[0], cpus[1], bandwidth=inter_socket_bandwidth,
                      latency=inter_socket_latency, kind="inter_socket")
    for j in range(switches):
        socket = j * sockets // switches
        sw = topo.add_switch(f"pcie{j}")
        topo.add_link(sw, cpus[socket], bandwidth=bandwidth, latency=pcie_latency / 2,
                      kind="pcie")
        for rank in range(j * per_switch, min(gpus, (j + 1) * per_switch)):
            gpu = topo.add_gpu(f"gpu{rank}", reduce_bandwidth=reduce_bandwidth,
                               staging=None if p2p else memories[socket])
            topo.add_link(gpu, sw, bandwidth=bandwidth, latency=pcie_latency / 2,
                          kind="pcie", back_bandwidth=back)
    return topo
