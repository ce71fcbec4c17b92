"""NCCL's graphs on a simulated machine, in the terms its ``NCCL_DEBUG=INFO`` log uses, so
that a real run's log can be set beside them.

NCCL prints each graph its topology search found as "Pattern P, crossNic C, nChannels
N, bw I/E" (``ncclTopoPrintGraph``, src/graph/search.cc: N channels of I GB/s inside a
node and E GB/s to the network) and, once it has doubled them, "K coll channels, ...
L nvls channels". :func:`graph_lines` gives the same figures for simcoll's model of that
search (:mod:`.search`, :mod:`.node_search`), which its tuner reasons on.
"""

from __future__ import annotations

from simcoll.algorithms.nccl.constants import NCCL_VERSION
from simcoll.algorithms.nccl.machine import describe
from simcoll.algorithms.nccl.tune_model import (
    collnet_graphs_of,
    comm_channels,
    nvls_channels,
    nvls_graph_of,
)
from simcoll.algorithms.nccl.tuner import candidates
from simcoll.topology.graph import Topology

__all__ = ["graph_lines"]


def graph_lines(topology: Topology, arch: str = "auto", tuner: str = NCCL_VERSION) -> list[str]:
    """One line per graph NCCL would search on all of ``topology``'s GPUs: the ring and
    tree graphs (channels, speed inside a node / to the network, and the channels the
    rings run on, and with ``collnet=1`` where that opens more), the NVLS graph where
    NVLS can run, and the CollNet Direct and Chain graphs where the fabric reduces in the
    network (with ``collnet=1``). Empty for a single GPU, which searches no graph."""
    machine = describe(topology, tuple(range(topology.nranks)), arch)
    if not machine.graph_channels:
        return []
    n, ring, tree = (machine.graph_channels, machine.graph_channel_bw / 1e9,
                     machine.tree_graph_bw / 1e9)
    with_collnet = comm_channels(machine, collnet=1)
    lines = [f"ring    nChannels {n}, bw {ring:.1f}/{ring:.1f}; {machine.channels} coll "
             f"channels" + (f" ({with_collnet} with collnet=1)"
                            if with_collnet != machine.channels else ""),
             f"tree    nChannels {n}, bw {tree:.1f}/{ring:.1f}"]
    if {"nvls", "nvls_tree"} & set(candidates(machine, "all_reduce", collnet=1)):
        nvls = nvls_graph_of(machine)
        lines.append(f"nvls    nChannels {nvls.channels}, bw {nvls.intra:.1f}/"
                     f"{nvls.inter:.1f}; {nvls_channels(machine, tuner)} nvls channels")
    graphs = collnet_graphs_of(machine) if machine.sharp else None
    if graphs is not None:
        for name, graph in zip(("direct", "chain"), graphs):
            lines.append(f"collnet {name} nChannels {graph.channels}, bw {graph.intra:.1f}/"
                         f"{graph.inter:.1f} (with collnet=1)")
    return lines
