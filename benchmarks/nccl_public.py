"""Published nccl-tests all_reduce_perf measurements on real machines, as data.

Each table keeps what its source states about the machine (GPU, GPUs per node, nodes,
NICs, the NVLink / NVSwitch fabric, the NCCL version and environment variables when
printed), the source's address and date, and the out-of-place columns of every row:
size (bytes), time (us), algbw and busbw (GB/s = 10^9 B/s), as the source printed them.
Nothing is adjusted: where a source shows an outlier (a first-iteration spike, a dip on
a shared fabric) the row stays and the table's notes say so.

``tests/test_nccl_public.py`` checks every row against nccl-tests' definitions (algbw =
size / time, busbw = algbw x 2(n-1)/n) within the printed rounding.

Sources were found with the project's search tool in stored copies of public pages and
GitHub issue threads; the date is the post's date where the source shows one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simcoll.nccl_tests import Measurement, NcclTestsRow, NcclTestsTable

__all__ = ["PublicTable", "TABLES", "table"]


@dataclass(frozen=True)
class PublicTable:
    """One published all_reduce_perf run.

    Attributes:
        id: a short name.
        gpu: the device name the run printed.
        gpus_per_node, nodes: the run's ranks are ``gpus_per_node * nodes``.
        fabric: how GPUs inside a node connect, as the source describes it.
        nics: the NICs per node as the source describes them ("" for one node).
        nccl_version: as printed, or None.
        env: NCCL environment variables the run set (None of NCCL_ALGO: NCCL chose).
        source, date: where and when it was published.
        rows: ``(size bytes, time us, algbw GB/s, busbw GB/s)``, out-of-place.
        notes: what to know when comparing with it.
    """

    id: str
    gpu: str
    gpus_per_node: int
    nodes: int
    fabric: str
    nics: str
    nccl_version: str | None
    env: dict[str, str] = field(hash=False)
    source: str = ""
    date: str = ""
    rows: tuple[tuple[int, float, float, float], ...] = ()
    notes: str = ""

    @property
    def nranks(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def algorithm(self) -> str | None:
        """NCCL_ALGO as set for the run (lower case), or None where NCCL chose."""
        algo = self.env.get("NCCL_ALGO")
        return algo.lower() if algo else None


def table(public: PublicTable) -> NcclTestsTable:
    """The rows as an NcclTestsTable (what :func:`simcoll.calibrate` takes)."""
    rows = tuple(NcclTestsRow(size, size // 4, "float", "sum", -1,
                              Measurement(time_us, algbw, busbw, 0.0), None, i + 1)
                 for i, (size, time_us, algbw, busbw) in enumerate(public.rows))
    return NcclTestsTable(rows, "all_reduce", public.nranks,
                          (public.gpu,) * public.nranks, nccl_version=public.nccl_version)


_OCI_TUTORIAL = ("https://github.com/oracle-japan/ocitutorials, file tutorials/"
                 "_intermediates/spinup-gpu-cluster.md, the revision built on the Horovod "
                 "container (rendered at https://oracle-japan.github.io/ocitutorials/"
                 "intermediates/spinup-gpu-cluster/)")
_ISSUE_309 = "https://github.com/NVIDIA/nccl-tests/issues/309"
_GALVATRON = ("https://github.com/AFDWang/Hetu-Galvatron, file "
              "tests/profiler/test_hardware_profile.py (commit 6f77a6c): the nccl-tests "
              "output its hardware profiler's test reads")
_GCM = ("https://github.com/facebookresearch/gcm, file "
        "gcm/tests/health_checks_tests/test_check_nccl.py (commit 54e1b1d): "
        "sample_single_success_output, the output its NCCL health check's test reads")

TABLES: tuple[PublicTable, ...] = (
    PublicTable(
        id="a100x8_oci",
        gpu="NVIDIA A100-SXM4-40GB", gpus_per_node=8, nodes=1,
        fabric="OCI BM.GPU4.8: 8 A100 SXM4 40 GB on NVSwitch (NVLink 3)", nics="",
        nccl_version=None, env={},
        source=_OCI_TUTORIAL, date="2022, before the tutorial's December 2022 rewrite",
        notes="all_reduce_perf -b 64 -e 10G -f 2 -g 8, one process, inside the Horovod "
              "container; NCCL chose the algorithm.",
        rows=(
            (64, 32.01, 0.00, 0.00), (128, 32.01, 0.00, 0.01), (256, 31.75, 0.01, 0.01),
            (512, 32.21, 0.02, 0.03), (1024, 32.03, 0.03, 0.06), (2048, 31.77, 0.06, 0.11),
            (4096, 32.13, 0.13, 0.22), (8192, 32.22, 0.25, 0.44),
            (16384, 32.48, 0.50, 0.88), (32768, 32.02, 1.02, 1.79),
            (65536, 35.40, 1.85, 3.24), (131072, 38.50, 3.40, 5.96),
            (262144, 45.21, 5.80, 10.15), (524288, 58.96, 8.89, 15.56),
            (1048576, 76.71, 13.67, 23.92), (2097152, 112.4, 18.66, 32.66),
            (4194304, 134.5, 31.18, 54.57), (8388608, 185.8, 45.15, 79.02),
            (16777216, 245.1, 68.46, 119.81), (33554432, 398.2, 84.26, 147.46),
            (67108864, 589.5, 113.84, 199.23), (134217728, 1191.2, 112.67, 197.17),
            (268435456, 2121.9, 126.50, 221.38), (536870912, 4208.2, 127.58, 223.26),
            (1073741824, 8166.8, 131.48, 230.08), (2147483648, 16232, 132.30, 231.52),
            (4294967296, 32097, 133.81, 234.17), (8589934592, 63929, 134.37, 235.14))),
    PublicTable(
        id="a100x8_dgx_galvatron",
        gpu="NVIDIA A100-SXM4-40GB", gpus_per_node=8, nodes=1,
        fabric="8 A100 SXM4 40 GB on NVSwitch (NVLink 3); the bus ids (0x07, 0x0f, 0x47, "
               "0x4e, 0x87, 0x90, 0xb7, 0xbd) are a DGX A100's, which the source does not "
               "name",
        nics="", nccl_version=None, env={},
        source=_GALVATRON, date="2025-01-10 (the commit)",
        notes="all_reduce_perf -b 1M -e 1G -f 2 -g 8: one process driving the 8 GPUs, as "
              "a100x8_oci; NCCL chose the algorithm and its version is not printed. 512 "
              "MiB out-of-place is slow against its in-place time (4651.2 us against "
              "4517.0).",
        rows=(
            (1048576, 78.77, 13.31, 23.29), (2097152, 108.8, 19.28, 33.73),
            (4194304, 131.1, 31.98, 55.97), (8388608, 183.4, 45.74, 80.04),
            (16777216, 293.6, 57.14, 99.99), (33554432, 415.7, 80.73, 141.27),
            (67108864, 657.2, 102.11, 178.69), (134217728, 1256.7, 106.80, 186.91),
            (268435456, 2338.9, 114.77, 200.85), (536870912, 4651.2, 115.43, 202.00),
            (1073741824, 8139.9, 131.91, 230.84))),
    PublicTable(
        id="a100x8_80g_gcm",
        gpu="NVIDIA A100-SXM4-80GB", gpus_per_node=8, nodes=1,
        fabric="8 A100 SXM4 80 GB on NVSwitch (NVLink 3) in one node of a cluster the "
               "source does not name; the bus ids are printed as 0x00",
        nics="", nccl_version="2.16.2", env={},
        source=_GCM, date="2025-12-18 (the commit; the run, on NCCL 2.16.2 with CUDA 11.6, "
                          "is older)",
        notes="all_reduce_perf -b 32M -e 1G -f 2 in 8 processes of one GPU each (nThread 1 "
              "nGpus 1, eight pids); NCCL chose the algorithm. 128 MiB's busbw (204.26 "
              "GB/s) is below 64 MiB's (210.68), in place too (1149.8 us).",
        rows=(
            (33554432, 344.8, 97.32, 170.31), (67108864, 557.4, 120.39, 210.68),
            (134217728, 1149.9, 116.72, 204.26), (268435456, 2106.1, 127.46, 223.05),
            (536870912, 4145.6, 129.50, 226.63), (1073741824, 8109.1, 132.41, 231.72))),
    PublicTable(
        id="a100x16_oci_roce",
        gpu="NVIDIA A100-SXM4-40GB", gpus_per_node=8, nodes=2,
        fabric="OCI BM.GPU4.8: 8 A100 SXM4 40 GB on NVSwitch (NVLink 3)",
        nics="16 x 100 Gb/s RDMA (RoCE v2) ports per node on OCI's cluster network, all "
             "16 listed in NCCL_IB_HCA",
        nccl_version=None,
        env={"NCCL_IB_HCA": "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_6,...,mlx5_17 (16 ports)"},
        source=_OCI_TUTORIAL, date="2022, before the tutorial's December 2022 rewrite",
        notes="mpirun -np 16, one GPU per process. The fabric was noisy: busbw dips at "
              "16 MiB and from 64 to 256 MiB (64 MiB in-place took 3709.5 us against "
              "6058.5 us out-of-place); the tutorial quotes about 72 GB/s busbw at large "
              "sizes.",
        rows=(
            (64, 38.75, 0.00, 0.00), (128, 39.25, 0.00, 0.01), (256, 37.80, 0.01, 0.01),
            (512, 37.57, 0.01, 0.03), (1024, 39.63, 0.03, 0.05), (2048, 41.14, 0.05, 0.09),
            (4096, 45.04, 0.09, 0.17), (8192, 49.39, 0.17, 0.31),
            (16384, 52.35, 0.31, 0.59), (32768, 58.75, 0.56, 1.05),
            (65536, 71.91, 0.91, 1.71), (131072, 103.7, 1.26, 2.37),
            (262144, 114.0, 2.30, 4.31), (524288, 120.7, 4.34, 8.14),
            (1048576, 136.1, 7.71, 14.45), (2097152, 169.2, 12.40, 23.24),
            (4194304, 233.4, 17.97, 33.69), (8388608, 358.2, 23.42, 43.91),
            (16777216, 941.7, 17.82, 33.41), (33554432, 1079.0, 31.10, 58.31),
            (67108864, 6058.5, 11.08, 20.77), (134217728, 7234.1, 18.55, 34.79),
            (268435456, 13675, 19.63, 36.81), (536870912, 14463, 37.12, 69.60),
            (1073741824, 28656, 37.47, 70.26), (2147483648, 56697, 37.88, 71.02),
            (4294967296, 112804, 38.07, 71.39), (8589934592, 225083, 38.16, 71.56))),
    PublicTable(
        id="h100x8_nvls",
        gpu="NVIDIA H100 80GB HBM3", gpus_per_node=8, nodes=1,
        fabric="8 H100 SXM on NVSwitch (NVLink 4); NVLink SHARP (NVLS) in use according "
               "to the NVIDIA maintainer's reply",
        nics="", nccl_version=None, env={},
        source="https://github.com/NVIDIA/nccl-tests/issues/290", date="2025-03-03",
        notes="-b 128M -e 4G, only 2 timed iterations per size (iters: 2). A maintainer "
              "replied that 476 GB/s is in the expected range for H100 with NVLS.",
        rows=(
            (134217728, 613.3, 218.85, 382.99), (268435456, 1139.2, 235.63, 412.35),
            (536870912, 2175.8, 246.75, 431.81), (1073741824, 4038.8, 265.85, 465.25),
            (2147483648, 8020.3, 267.76, 468.57), (4294967296, 15870, 270.63, 473.60))),
    PublicTable(
        id="h100x8_exemplar",
        gpu="NVIDIA H100 80GB HBM3", gpus_per_node=8, nodes=1,
        fabric="8 H100 SXM on NVSwitch (NVLink 4): one node of the recipe's DGX H100 "
               "systems",
        nics="", nccl_version=None, env={},
        source="https://github.com/NVIDIA/exemplar-performance, file "
               "microbenchmarks/nccl/README.md, \"View sample output (AllReduce excerpt)\" "
               "(commit b4ac983)",
        date="2026-08-18 (release v26.08.00)",
        notes="NVIDIA's sample output of its NCCL recipe, -b 8 -e 16G -f 2, 20 timed "
              "iterations, an nccl-tests fork (side_work, work_sms); NCCL chose the "
              "algorithm, its version not printed. 32 B and 4 KiB are one-off spikes "
              "(in-place: 13.52 and 16.46 us).",
        rows=(
            (8, 13.67, 0.00, 0.00), (16, 13.00, 0.00, 0.00), (32, 68.14, 0.00, 0.00),
            (64, 14.92, 0.00, 0.01), (128, 15.87, 0.01, 0.01), (256, 16.10, 0.02, 0.03),
            (512, 16.70, 0.03, 0.05), (1024, 16.94, 0.06, 0.11), (2048, 17.14, 0.12, 0.21),
            (4096, 23.59, 0.17, 0.30), (8192, 17.40, 0.47, 0.82),
            (16384, 17.93, 0.91, 1.60), (32768, 19.33, 1.70, 2.97),
            (65536, 19.54, 3.35, 5.87), (131072, 19.89, 6.59, 11.53),
            (262144, 20.43, 12.83, 22.45), (524288, 20.66, 25.38, 44.41),
            (1048576, 27.37, 38.31, 67.04), (2097152, 42.21, 49.68, 86.94),
            (4194304, 54.19, 77.39, 135.44), (8388608, 83.04, 101.01, 176.77),
            (16777216, 123.8, 135.55, 237.21), (33554432, 199.3, 168.39, 294.69),
            (67108864, 324.7, 206.67, 361.67), (134217728, 586.4, 228.88, 400.53),
            (268435456, 1112.5, 241.29, 422.25), (536870912, 2151.0, 249.59, 436.79),
            (1073741824, 4029.4, 266.48, 466.33), (2147483648, 7939.1, 270.50, 473.37),
            (4294967296, 15749, 272.71, 477.24), (8589934592, 31307, 274.38, 480.16),
            (17179869184, 62648, 274.23, 479.90))),
    PublicTable(
        id="h100x16_ndr_default",
        gpu="NVIDIA H100 80GB HBM3", gpus_per_node=8, nodes=2,
        fabric="Dell PowerEdge XE9680 (HGX H100 8-GPU, NVSwitch, NVLink 4)",
        nics="8 x ConnectX-7 InfiniBand 400 Gb/s per node",
        nccl_version="2.26.2",
        env={"NCCL_NET_GDR_LEVEL": "1", "NCCL_P2P_LEVEL": "NVL", "NCCL_IB_GID_INDEX": "0",
             "NCCL_IB_HCA": "mlx5_0:1,...,mlx5_7:1 (8 ports)"},
        source=_ISSUE_309, date="2025-05",
        notes="NCCL chose the algorithms (NVLS inside a node, NVLSTree across, per the "
              "maintainer's reply); a maintainer called the numbers good. 8 B and 256 B "
              "are one-off spikes (in-place: 24.70 and 25.90 us).",
        rows=(
            (8, 68.52, 0.00, 0.00), (16, 24.96, 0.00, 0.00), (32, 24.93, 0.00, 0.00),
            (64, 25.29, 0.00, 0.00), (128, 25.68, 0.00, 0.01), (256, 94.40, 0.00, 0.01),
            (512, 32.35, 0.02, 0.03), (1024, 29.75, 0.03, 0.06), (2048, 28.19, 0.07, 0.14),
            (4096, 30.24, 0.14, 0.25), (8192, 32.12, 0.26, 0.48),
            (16384, 32.74, 0.50, 0.94), (32768, 34.10, 0.96, 1.80),
            (65536, 33.84, 1.94, 3.63), (131072, 38.77, 3.38, 6.34),
            (262144, 48.67, 5.39, 10.10), (524288, 77.69, 6.75, 12.65),
            (1048576, 71.93, 14.58, 27.33), (2097152, 76.24, 27.51, 51.58),
            (4194304, 94.38, 44.44, 83.33), (8388608, 132.6, 63.24, 118.57),
            (16777216, 185.4, 90.49, 169.67), (33554432, 267.9, 125.23, 234.81),
            (67108864, 466.1, 143.99, 269.98), (134217728, 748.3, 179.35, 336.29),
            (268435456, 1282.8, 209.26, 392.35), (536870912, 2357.6, 227.72, 426.97),
            (1073741824, 4484.9, 239.41, 448.90), (2147483648, 8729.8, 245.99, 461.24),
            (4294967296, 17262, 248.81, 466.52), (8589934592, 34381, 249.84, 468.46),
            (17179869184, 68652, 250.24, 469.21))),
    PublicTable(
        id="h100x16_ndr_ring",
        gpu="NVIDIA H100 80GB HBM3", gpus_per_node=8, nodes=2,
        fabric="8 H100 SXM per node on NVSwitch (NVLink 4)",
        nics="InfiniBand 400 Gb/s; the reporter puts the fabric's limit at 400 GB/s busbw, "
             "i.e. 8 x 400 Gb/s per node",
        nccl_version=None,
        env={"NCCL_ALGO": "Ring", "NCCL_MIN_CTAS": "24", "NCCL_IB_QPS_PER_CONNECTION": "2"},
        source=_ISSUE_309, date="2025-06-18",
        notes="2 nodes of the reporter's 8-node cluster; the ring tuning a maintainer "
              "suggested for measuring the network.",
        rows=(
            (1048576, 156.9, 6.68, 12.53), (2097152, 156.6, 13.39, 25.10),
            (4194304, 178.1, 23.55, 44.15), (8388608, 177.8, 47.17, 88.44),
            (16777216, 199.3, 84.17, 157.83), (33554432, 274.2, 122.36, 229.42),
            (67108864, 433.8, 154.69, 290.04), (134217728, 795.8, 168.66, 316.24),
            (268435456, 1355.9, 197.98, 371.22), (536870912, 2649.9, 202.60, 379.87),
            (1073741824, 5236.2, 205.06, 384.49), (2147483648, 10340, 207.68, 389.40),
            (4294967296, 20575, 208.74, 391.39), (8589934592, 41015, 209.43, 392.69))),
    PublicTable(
        id="h100x64_ndr_default",
        gpu="NVIDIA H100 80GB HBM3", gpus_per_node=8, nodes=8,
        fabric="8 H100 SXM per node on NVSwitch (NVLink 4)",
        nics="InfiniBand 400 Gb/s; 8 x 400 Gb/s per node as for h100x16_ndr_ring (same "
             "cluster)",
        nccl_version=None, env={},
        source=_ISSUE_309, date="2025-06-18",
        notes="NCCL chose the algorithms; 8 MiB is a one-off spike (in-place: 321.4 us).",
        rows=(
            (1048576, 117.0, 8.96, 17.64), (2097152, 143.4, 14.62, 28.78),
            (4194304, 203.8, 20.58, 40.52), (8388608, 1272.4, 6.59, 12.98),
            (16777216, 378.1, 44.37, 87.36), (33554432, 509.6, 65.84, 129.63),
            (67108864, 718.1, 93.46, 184.00), (134217728, 1159.1, 115.79, 227.97),
            (268435456, 1955.1, 137.30, 270.31), (536870912, 3517.3, 152.64, 300.51),
            (1073741824, 7370.5, 145.68, 286.81), (2147483648, 13252, 162.05, 319.03),
            (4294967296, 26438, 162.45, 319.83), (8589934592, 52733, 162.90, 320.70))),
    PublicTable(
        id="rtx5090x4_genoa_shm",
        gpu="NVIDIA GeForce RTX 5090", gpus_per_node=4, nodes=1,
        fabric="4 GeForce RTX 5090 on PCIe (host GENOA-01, AMD EPYC Genoa: PCIe Gen5), no "
               "NVLink and no GPU peer-to-peer: GeForce cards do not support P2P (an NVIDIA "
               "maintainer's reply), p2pBandwidthLatencyTest on the sister host GENOA-05 "
               "prints CANNOT Access Peer, and NCCL's log there connects via SHM",
        nics="", nccl_version=None, env={},
        source="https://github.com/NVIDIA/nccl-tests/issues/287", date="2025-03-14",
        notes="all_reduce_perf -b 8 -e 128M -f 2 -g 4, one process. Posted to confirm that "
              "the just-released NCCL 2.26.2 fixed the 5090 launch failure; the run prints no "
              "NCCL version. PCIe switches, sockets and host memory are not stated (bus ids "
              "0x01, 0x21, 0x41, 0x61).",
        rows=(
            (8, 15.60, 0.00, 0.00), (16, 15.32, 0.00, 0.00), (32, 15.52, 0.00, 0.00),
            (64, 15.44, 0.00, 0.01), (128, 15.46, 0.01, 0.01), (256, 15.82, 0.02, 0.02),
            (512, 15.81, 0.03, 0.05), (1024, 15.88, 0.06, 0.10), (2048, 26.16, 0.08, 0.12),
            (4096, 27.21, 0.15, 0.23), (8192, 27.45, 0.30, 0.45),
            (16384, 31.06, 0.53, 0.79), (32768, 31.64, 1.04, 1.55),
            (65536, 32.58, 2.01, 3.02), (131072, 35.19, 3.72, 5.59),
            (262144, 45.84, 5.72, 8.58), (524288, 70.24, 7.46, 11.20),
            (1048576, 93.45, 11.22, 16.83), (2097152, 152.9, 13.72, 20.57),
            (4194304, 261.4, 16.04, 24.07), (8388608, 490.3, 17.11, 25.67),
            (16777216, 935.7, 17.93, 26.90), (33554432, 1860.0, 18.04, 27.06),
            (67108864, 3708.9, 18.09, 27.14), (134217728, 7384.4, 18.18, 27.26))),
    PublicTable(
        id="rtx5090x8_turin_p2p",
        gpu="NVIDIA GeForce RTX 5090", gpus_per_node=8, nodes=1,
        fabric="8 GeForce RTX 5090 on PCIe in a dual-socket AMD EPYC 9575F (Turin) host "
               "(PCIe Gen5), no NVLink; GPU peer-to-peer over PCIe BAR1, enabled by the "
               "repository's patched open kernel driver (p2pBandwidthLatencyTest on the same "
               "host: 55.6 GB/s P2P writes between every pair)",
        nics="", nccl_version="2.29.7", env={"NCCL_P2P_LEVEL": "SYS"},
        source="https://github.com/aikitoria/open-gpu-kernel-modules, README.md, section "
               "\"Sample nccl-tests all_reduce_perf output\" (revision "
               "08dc34555bf8cdacdd89237da42419e6ce5efdc4)",
        date="2026 (no date printed; nccl-tests 2.18.2 with NCCL 2.29.7)",
        notes="all_reduce_perf -b 8 -e 128M -f 2 -g 8, one process, 1 warm-up iteration; "
              "nccl-library=22907 printed. Times above 100 us are printed with two decimals "
              "(this nccl-tests release). PCIe switches and the GPUs' split over the two "
              "sockets are not stated (bus ids 0x01, 0x11, 0x61, 0x71, 0x81, 0x91, 0xe1, 0xf1).",
        rows=(
            (8, 25.47, 0.00, 0.00), (16, 24.52, 0.00, 0.00), (32, 24.65, 0.00, 0.00),
            (64, 24.72, 0.00, 0.00), (128, 24.67, 0.01, 0.01), (256, 24.77, 0.01, 0.02),
            (512, 24.62, 0.02, 0.04), (1024, 24.66, 0.04, 0.07), (2048, 24.54, 0.08, 0.15),
            (4096, 36.29, 0.11, 0.20), (8192, 37.00, 0.22, 0.39),
            (16384, 38.06, 0.43, 0.75), (32768, 39.33, 0.83, 1.46),
            (65536, 40.96, 1.60, 2.80), (131072, 42.19, 3.11, 5.44),
            (262144, 45.87, 5.71, 10.00), (524288, 56.96, 9.20, 16.11),
            (1048576, 74.74, 14.03, 24.55), (2097152, 104.50, 20.07, 35.12),
            (4194304, 176.93, 23.71, 41.48), (8388608, 326.13, 25.72, 45.01),
            (16777216, 646.48, 25.95, 45.42), (33554432, 1284.81, 26.12, 45.70),
            (67108864, 2585.56, 25.96, 45.42), (134217728, 5355.16, 25.06, 43.86))),
)
