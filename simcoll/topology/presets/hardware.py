"""The hardware figures the presets are built from, each with its public source.

Rates are bytes/s per direction. Two figures are kept where they differ: the nominal
(signalling) rate a datasheet gives, and the usable rate NVIDIA's NCCL works with, from
NCCL 2.30.7 (``makefiles/version.mk``; github.com/NVIDIA/nccl). The presets take NCCL's
figure by default, because nccl-tests measures what NCCL can drive, and accept the
nominal one (or any other) as an override.

NVLink (per link and direction):
    NVLink 3 (A100) and NVLink 4 (H100) links both carry 25 GB/s each way (50 GB/s
    bidirectional); an A100 SXM has 12 links (300 GB/s per direction, "600 GB/s"), an
    H100 SXM 18 (450 GB/s per direction, "900 GB/s"). Sources: NVIDIA A100 Tensor Core
    GPU Architecture whitepaper (2020) and A100 datasheet; NVIDIA H100 Tensor Core GPU
    Architecture whitepaper (2022) and H100 datasheet. NCCL's usable figures per link:
    ``SM80_NVLINK_BW 20.0`` and ``SM90_NVLINK_BW 20.6`` GB/s (src/graph/topo.h), so 12 x 20
    = 240 GB/s for an A100 and 18 x 20.6 = 370.8 GB/s for an H100.

PCI Express x16 (per direction):
    Gen3 runs at 8 GT/s per lane, Gen4 at 16, Gen5 at 32, all with 128b/130b encoding, so
    x16 carries 16 x rate x 128/130 / 8 bytes/s: 15.75, 31.5 and 63.0 GB/s (PCI-SIG, PCI
    Express Base Specifications 3.0, 4.0 and 5.0). NCCL counts 6 Gb/s of every 8 GT/s
    per lane (``kvDictPciGen`` in src/graph/topo.cc: 60, 120, 240 in units of 100 Mb/s,
    and ``bw = width * speed / 80.0`` GB/s): 12, 24 and 48 GB/s for x16; ``PCI_BW 12.0``
    in topo.h is the Gen3 x16 figure.

Network (per port and direction):
    HDR InfiniBand 200 Gb/s (ConnectX-6, DGX A100), NDR 400 Gb/s (ConnectX-7, DGX H100),
    100 Gb/s Ethernet / RoCE or HDR100. NCCL takes a NIC's bandwidth from its port speed,
    ``mbps / 8000.0`` GB/s (src/graph/topo.cc), so its usable figure is the line rate:
    25, 50 and 12.5 GB/s (``NET_BW 12.0`` in topo.h, its 100 Gb/s figure, is not used by
    2.30.7's code).

GPU memory:
    A100 SXM4 80 GB: 2,039 GB/s (HBM2e); A100 SXM4 40 GB: 1,555 GB/s (HBM2); A100 PCIe
    80 GB: 1,935 GB/s (given no NVLink: the bridge that joins two of them is left out, as
    in a server without it); H100 SXM5 80 GB:
    3.35 TB/s (HBM3) (NVIDIA A100 datasheet, 2021; NVIDIA H100 datasheet, 2022);
    GeForce RTX 5090: 1,792 GB/s (32 GB of GDDR7 at 28 Gb/s per pin on a 512-bit bus;
    NVIDIA's RTX 5090 specifications, 2025), PCIe Gen5, no NVLink.

Where to read them: NVIDIA A100 datasheet (on nvidia.com:
nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf); NVIDIA H100 datasheet and the Hopper
architecture whitepaper; "Upgrading Multi-GPU Interconnectivity with the Third-Generation
NVIDIA NVSwitch" (NVIDIA technical blog, 2022: NVLink 4, NVSwitch SHARP in-network
reductions); NVIDIA DGX SuperPOD reference architectures (rail-optimised compute fabric;
scalable units of 20 DGX A100 and 32 DGX H100); QM87xx (40-port HDR) and QM97xx (64-port
NDR) InfiniBand switch user manuals (docs.nvidia.com/networking); NCCL's src/graph/topo.h,
topo.cc and tuning.cc at 2.30.7.

The reduction rule: an elementwise reduction of two inputs into one output reads two
bytes and writes one for every byte of output, and on large buffers it is bound by memory,
so a GPU whose memory moves M bytes/s reduces ``M / 3`` bytes of output per second
(A100 SXM4 80 GB: 679.7 GB/s; H100 SXM5: 1,116.7 GB/s). Caches and the reads that a
fused send-and-reduce kernel saves are ignored: calibration may raise it.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcoll.checks import Count, integer
from simcoll.errors import TopologyError
from simcoll.units import GB, Gbps

__all__ = ["GPUSpec", "A100_SXM", "A100_SXM_40GB", "A100_PCIE", "H100_SXM", "RTX_5090",
           "reduce_bandwidth_of", "pcie_x16", "pcie_x16_nccl", "PCIE_GENERATIONS", "HDR",
           "NDR", "ETH100", "SM_HOST_READ", "sm_host_read", "check_gen"]

PCIE_GENERATIONS = (3, 4, 5)
_GT_PER_S = {3: 8e9, 4: 16e9, 5: 32e9}

HDR = 200 * Gbps
"""HDR InfiniBand port (ConnectX-6): 200 Gb/s = 25 GB/s."""
NDR = 400 * Gbps
"""NDR InfiniBand port (ConnectX-7): 400 Gb/s = 50 GB/s."""
ETH100 = 100 * Gbps
"""100 Gb/s Ethernet (RoCE) or HDR100 port: 12.5 GB/s."""


def check_gen(gen: Count) -> int:
    """``gen`` as an int, refused unless it is 3, 4 or 5 (:class:`TopologyError`)."""
    return integer(gen, "gen", minimum=3, maximum=5, error=TopologyError,
                   what="the PCI Express generation: 3, 4 or 5")


def pcie_x16(gen: Count) -> float:
    """Nominal x16 rate per direction of PCIe generation ``gen`` (128b/130b encoding).

    Raises:
        TopologyError: ``gen`` is not 3, 4 or 5.
    """
    return 16 * _GT_PER_S[check_gen(gen)] * 128 / 130 / 8


def pcie_x16_nccl(gen: Count) -> float:
    """NCCL 2.30.7's usable x16 rate per direction: 6 Gb/s per 8 GT/s of each lane.

    Raises:
        TopologyError: ``gen`` is not 3, 4 or 5.
    """
    return 16 * _GT_PER_S[check_gen(gen)] * 0.75 / 8


SM_HOST_READ = {4: 25.13e9, 5: 35.2e9}
"""Bytes/s a GPU's SMs read from pinned host memory over PCIe x16, by generation, as
nvbandwidth's ``host_to_device_memcpy_sm`` measures it: Gen4 25.13 GB/s on an A100 SXM4
40GB (nvbandwidth issue #42, 512 MiB and 1 GiB buffers), Gen5 35.2 GB/s on H100 (issue
#24: 35.03 to 35.39 on 8 GPUs, against 52.77 for the SMs' writes to host memory,
``device_to_host_memcpy_sm``). Gen3: no measurement found."""


def sm_host_read(gen: Count) -> float | None:
    """:data:`SM_HOST_READ` for ``gen``, None where none was measured.

    Raises:
        TopologyError: ``gen`` is not 3, 4 or 5.
    """
    return SM_HOST_READ.get(check_gen(gen))


def reduce_bandwidth_of(memory_bandwidth: float) -> float:
    """Bytes of reduction output per second of a GPU with that memory bandwidth: M / 3."""
    return memory_bandwidth / 3


@dataclass(frozen=True)
class GPUSpec:
    """One GPU model: memory, NVLink and PCIe, with nominal and NCCL-usable rates.

    Attributes:
        name: the model, e.g. ``"A100 SXM4 80GB"``.
        memory_bandwidth: bytes/s.
        nvlink_links: NVLink links per GPU (0 for none).
        nvlink_link_bandwidth: nominal bytes/s per link and direction.
        nvlink_link_bandwidth_nccl: NCCL's usable bytes/s per link and direction.
        pcie_gen: the PCI Express generation of its x16 host link.
    """

    name: str
    memory_bandwidth: float
    nvlink_links: int
    nvlink_link_bandwidth: float
    nvlink_link_bandwidth_nccl: float
    pcie_gen: int

    @property
    def nvlink_bandwidth(self) -> float:
        """Nominal NVLink bytes/s per direction, all links together."""
        return self.nvlink_links * self.nvlink_link_bandwidth

    @property
    def nvlink_bandwidth_nccl(self) -> float:
        """NCCL's usable NVLink bytes/s per direction, all links together."""
        return self.nvlink_links * self.nvlink_link_bandwidth_nccl

    @property
    def reduce_bandwidth(self) -> float:
        """Bytes of reduction output per second: memory bandwidth / 3."""
        return reduce_bandwidth_of(self.memory_bandwidth)


A100_SXM = GPUSpec("A100 SXM4 80GB", 2039 * GB, 12, 25 * GB, 20.0 * GB, 4)
A100_SXM_40GB = GPUSpec("A100 SXM4 40GB", 1555 * GB, 12, 25 * GB, 20.0 * GB, 4)
A100_PCIE = GPUSpec("A100 PCIe 80GB", 1935 * GB, 0, 25 * GB, 20.0 * GB, 4)
H100_SXM = GPUSpec("H100 SXM5 80GB", 3350 * GB, 18, 25 * GB, 20.6 * GB, 5)
RTX_5090 = GPUSpec("GeForce RTX 5090", 1792 * GB, 0, 0.0, 0.0, 5)
