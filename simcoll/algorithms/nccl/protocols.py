"""NCCL's three protocols, as bytes on the wire, message sizes and per-step overheads.

* **Simple** moves data as it is (one wire byte per data byte) in steps of 512 KiB (the
  4 MiB connection buffer over 8 FIFO slots); a ring moves a slice of two steps at a time
  (``ALLREDUCE_SLICESTEPS``), so 4 slices fit in a connection's FIFO; it has the largest
  per-step latency, as it synchronises through flags in memory after each slice.
* **LL** (low latency) writes every 8 data bytes with two 4-byte flags next to them in a
  16-byte line, so the receiver polls the data itself: half the link's bandwidth carries
  data, and a step is cheap. Steps are 64 KiB of lines (32 KiB of data).
* **LL128** packs 120 data bytes and an 8-byte flag in each 128-byte line: 15/16 of the
  bandwidth for a latency between the other two. A warp writes 16 lines at a time, all of
  them, flags included, however few data bytes are left (``WireWordPerSlice`` in
  ``src/device/prims_ll128.h``, posted as ``divUp(nelem, DataEltPerSlice)`` of them): a
  message goes as whole 2,048-byte units of 1,920 data bytes. Steps are 614,400 bytes
  (300 units).

Sources: NCCL 2.30.7 ``src/include/device.h`` (``ncclLLFifoLine``, ``NCCL_LL128_LINESIZE``,
``NCCL_LL128_DATAELEMS``, ``NCCL_LL128_SHMEM_ELEMS_PER_THREAD``), ``src/device/prims_ll.h``
and ``prims_ll128.h`` (what a send writes and posts), ``src/init.cc`` (default buffer
sizes), ``src/enqueue.cc`` (``calcCollChunking``: chunk and slice sizes),
``src/graph/tuning.cc`` (latencies).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from simcoll.algorithms.nccl.constants import (
    BASE_LATENCY,
    BUFFER_BYTES,
    HW_LATENCY,
    NCCL_STEPS,
    PER_CHANNEL_MAX_RING_LL128_BW,
    PER_CHANNEL_MAX_TREE_BW,
    PER_CHANNEL_MAX_TREE_LL128_BW,
    ll_max_bw,
)

__all__ = ["Protocol", "PROTOCOL", "channel_rate", "one_step_slices"]


@dataclass(frozen=True)
class Protocol:
    """One protocol's framing and pipelining.

    Attributes:
        name: "LL", "LL128" or "Simple".
        line_data, line_bytes: data bytes carried per unit the threads write, and the
            unit's size on the wire: LL's 16-byte line of 8 data bytes, LL128's warp of
            16 128-byte lines (2,048 bytes, 1,920 of data), Simple's byte.
        slice_bytes: data bytes a ring moves per message (one slice).
        window: messages a connection may have in flight (FIFO slots per slice).
        rate: data bytes per second one channel's threads can move (inf: the links
            limit); see :func:`channel_rate`.
        launch: seconds a collective's launch costs beyond NCCL's base latency (0:
            NCCL's model; a run's ``launch_overhead``).
        step_scale: factor on NCCL's per-step latencies (1: NCCL's model; a run's
            ``step_latency_scale``).
    """

    name: str
    line_data: int
    line_bytes: int
    slice_bytes: int
    window: int
    rate: float = math.inf
    launch: float = 0.0
    step_scale: float = 1.0

    def wire(self, nbytes: int) -> int:
        """Bytes on the wire for ``nbytes`` of data: whole units, each with its flags."""
        if self.line_data == self.line_bytes:
            return nbytes
        return -(-nbytes // self.line_data) * self.line_bytes

    def hop(self, algorithm: str, link: str) -> float:
        """Seconds one step of ``algorithm`` costs over a ``link`` class ("nvlink", "pci",
        "net") beyond moving its bytes (NCCL's ``hwLatencies``, times ``step_scale``)."""
        return HW_LATENCY[link][algorithm][self.name] * 1e-6 * self.step_scale

    def base(self, algorithm: str) -> float:
        """Seconds of fixed launch cost of one collective (NCCL's ``baseLatencies``, plus
        ``launch``)."""
        return BASE_LATENCY[algorithm][self.name] * 1e-6 + self.launch


def channel_rate(protocol: str, algorithm: str, arch: str, nodes: int,
                 channels: int, cpu: str = "unknown", share: float = 1.0) -> float:
    """Bytes per second of data one of ``channels`` channels moves at most, from NCCL's
    caps: ``perChMaxRingLL128Bws`` per channel for ring LL128, ``perChMaxTreeBws`` and
    ``perChMaxTreeLL128Bws`` for trees, and ``llMaxBws`` (a cap on all channels
    together, by GPU generation on one node and by ``cpu`` vendor across nodes: see
    :func:`~simcoll.algorithms.nccl.constants.ll_max_bw`) shared by the channels for
    LL; unlimited for Simple rings and NVLS, whose threads keep up with their links.
    The caps are NCCL's bus bandwidths, which a ring moves on every link, so they cap
    the data a channel sends. NCCL's per-channel caps are per channel of its ring graph,
    which its collectives run on ``1 / share`` channels each (twice over, three times
    with CollNet's: :attr:`~.machine.Machine.graph_channels` over
    :func:`~.tune_model.comm_channels`), so a channel that runs moves ``share`` of a cap."""
    column = min(nodes, 3) - 1
    if protocol == "LL" and algorithm in ("ring", "tree"):
        return ll_max_bw(arch, nodes, cpu) * 1e9 / channels
    if protocol == "LL128" and algorithm == "ring":
        return PER_CHANNEL_MAX_RING_LL128_BW[arch][column] * 1e9 * share
    if protocol == "LL128" and algorithm == "tree":
        return PER_CHANNEL_MAX_TREE_LL128_BW[arch][column] * 1e9 * share
    if protocol == "Simple" and algorithm == "tree":
        return PER_CHANNEL_MAX_TREE_BW[arch][column] * 1e9 * share
    return math.inf


def _step(protocol: str) -> int:
    return BUFFER_BYTES[protocol] // NCCL_STEPS


def one_step_slices(protocol: Protocol) -> Protocol:
    """``protocol`` moving one step per slice, as broadcast and reduce do
    (``BROADCAST_SLICESTEPS`` = 1 in src/include/collectives.h, against 2 for the other
    rings): Simple slices of 512 KiB, 8 in flight; LL and LL128 slices are one step
    already."""
    step = _step(protocol.name) // protocol.line_bytes * protocol.line_data
    return dataclasses.replace(protocol, slice_bytes=step, window=NCCL_STEPS)


LL128_WARP_BYTES = 32 * 8 * 8
"""Bytes an LL128 warp writes at once: 32 threads of ``NCCL_LL128_SHMEM_ELEMS_PER_THREAD``
(8) 8-byte words, 16 lines of 128 bytes (``WireWordPerSlice``)."""
LL128_WARP_DATA = LL128_WARP_BYTES // 128 * 120
"""Data bytes in them: 120 of each 128-byte line (``DataEltPerSlice``)."""


PROTOCOL = {
    "Simple": Protocol("Simple", 1, 1, slice_bytes=2 * _step("Simple"), window=NCCL_STEPS // 2),
    "LL": Protocol("LL", 8, 16, slice_bytes=_step("LL") // 2, window=NCCL_STEPS),
    "LL128": Protocol("LL128", LL128_WARP_DATA, LL128_WARP_BYTES,
                      slice_bytes=_step("LL128") // LL128_WARP_BYTES * LL128_WARP_DATA,
                      window=NCCL_STEPS),
}
"""The protocols by name."""
