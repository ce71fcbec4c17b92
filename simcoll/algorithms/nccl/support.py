"""What NCCL supports: its algorithms by collective, in its tuner's order, and the
reductions NVLS's switches and InfiniBand SHARP compute (the tables
:mod:`~simcoll.algorithms.nccl.tuner` chooses among)."""

from __future__ import annotations

from simcoll.algorithms.nccl.constants import ARCHS

__all__ = ["NCCL_ORDER", "ALGORITHMS", "NAMES", "SIMPLE_ONLY", "NVLS_REDUCTIONS",
           "SHARP_TYPES", "SHARP_V3_TYPES", "SHARP_REDUCTIONS", "FP8_RING_PENALTY",
           "nvls_reduces", "sharp_reduces"]

NCCL_ORDER = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat",
              "p2p")
"""NCCL's algorithms in the order of its enum (``NCCL_ALGO_TREE`` = 0, ...; nccl_tuner.h),
the order its tuner compares them in (p2p, all_to_all's, has no rival)."""

ALGORITHMS = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain"),
    "reduce_scatter": ("ring", "nvls", "collnet_direct", "pat"),
    "all_gather": ("ring", "nvls", "collnet_direct", "pat"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_to_all": ("p2p",),
}
"""The NCCL algorithms each collective can run here (NVLS on one node only but with
CollNet on a SHARP fabric, as CollNet Direct, and CollNet Chain for all_reduce; PAT with
one GPU per node: see :func:`~.tuner.candidates`)."""


NAMES = ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")
"""Every algorithm name NCCL_ALGO takes (``ncclAlgoStr``), accepted for every collective
but all_to_all as NCCL accepts them: those a collective cannot run are passed over in a
list, and refused named alone (:func:`~.tuner.choose`)."""


SIMPLE_ONLY = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")
"""The algorithms NCCL runs with Simple only (its tuner gives them no LL or LL128
bandwidth, tuning.cc)."""

NVLS_REDUCTIONS = {**dict.fromkeys(("int32", "uint32", "int64", "uint64", "float16",
                                    "bfloat16"), ("SUM", "MIN", "MAX")),
                   "float32": ("SUM",), "float64": ("SUM",)}
"""The reductions NVLS's switches compute, by element type (``ncclNvlsSupported`` in
NCCL's src/include/device.h: sum of the 32- and 64-bit integers and of the 16-, 32- and
64-bit floats, min / max of those integers and the 16-bit floats only; AVG is NCCL's
PreMulSum or SumPostDiv, which they do not compute, nor a product, nor 8-bit types)."""

SHARP_TYPES = ("float16", "int32", "uint32", "float32", "int64", "uint64", "float64")
"""The element types InfiniBand SHARP reduces (``typeConvert`` of the nccl-rdma-sharp
plugin, ``src/sharp_plugin.c``)."""

SHARP_V3_TYPES = ("bfloat16", "int8", "uint8")
"""The element types SHARP reduces on SHARP v3 switches only (Quantum-2, NDR), which the
plugin takes where the switches report them (``NCCL_SHARP_V3_DATATYPES``, default 2: if
supported)."""

SHARP_REDUCTIONS = ("SUM", "AVG", "MAX", "MIN")
"""The reductions SHARP computes (the plugin's ``opConvert``: sum, max, min; NCCL hands it
an average as a sum, ``ncclGetCollNetSupport`` in src/enqueue.cc)."""

FP8_RING_PENALTY = 1024.0
"""The factor NCCL puts on a ring's predicted time for FP8 on more than 8 ranks, so the
tuner prefers any other algorithm to a long chain of lossy reductions
(``updateCollCostTable`` in src/enqueue.cc)."""


def nvls_reduces(collective: str, op: str | None, dtype: str) -> bool:
    """Whether NCCL lets NVLS and NVLS-tree run ``collective`` of ``op`` (a ReduceOp's
    name, None where nothing reduces) on ``dtype`` elements: any all_gather, else a
    reduction its switches compute (:data:`NVLS_REDUCTIONS`; ``nvlsSupport`` in
    ``ncclPrepareTasks``, src/enqueue.cc)."""
    return collective == "all_gather" or op is None or op in NVLS_REDUCTIONS.get(dtype, ())


def sharp_reduces(collective: str, op: str | None, dtype: str, arch: str) -> bool:
    """Whether NCCL's CollNet (and NVLS across nodes, which needs it) may run
    ``collective`` of ``op`` on ``dtype`` elements over SHARP: NCCL asks the plugin for
    every reduction (``collNetSupportMatrix``, src/transport/coll_net.cc; not for
    all_gather, which reduces nothing). SHARP v3's types are taken where the GPUs are
    Hopper or newer, as their InfiniBand (NDR, Quantum-2) runs SHARP v3 and A100's
    (HDR, Quantum) does not."""
    if collective == "all_gather" or op is None:
        return True
    v3 = ARCHS.index(arch) >= ARCHS.index("hopper")
    return op in SHARP_REDUCTIONS and (dtype in SHARP_TYPES or v3 and dtype in SHARP_V3_TYPES)
