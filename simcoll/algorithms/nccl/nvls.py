"""NVLink SHARP (NVLS), simulated: the NVSwitch reduces and multicasts.

all_reduce (NCCL's one-node NVLS kernel, ``oneNode`` in src/device/all_reduce.h): a
reduce_scatter and an all_gather through the switch, run side by side slice by slice
(:mod:`.nvls_tree`'s three streams with no step across nodes). Each channel's part is cut
as the kernel loops (:func:`~.nvls_tree.one_node_slices`): chunks of 128 KiB, one for
each GPU (its owner, NCCL's head) in turn, the last loop's rest in pieces of a p-th of it
rounded up to 16 KiB, so that where that rest is small only the first GPUs own a piece
of it. Every GPU pushes every chunk into the switch, which reduces it over the
GPUs (``multimem.ld_reduce``, at the switch's own reduction bandwidth, one reduction at
a time) and sends it to its owner; the owner hands it straight back (``multimem.st``)
and the switch multicasts it to every GPU, the owner included. A GPU so sends and
receives n bytes and its own chunks again: (p+1)/p n where they divide evenly, against
2(p-1)/p n each way for a ring; the switch does all the reductions, (p-1) n bytes
reduced.

reduce_scatter (NCCL reads its block with ``multimem.ld_reduce``, which has the switch
fetch that block from every GPU and reduce it): every GPU pushes every block, the switch
reduces block j over the GPUs and sends it to GPU j. A GPU sends n bytes and receives
n/p (a ring: (p-1)/p n each way).

all_gather (NCCL writes its part with ``multimem.st`` to the multicast group, the writer
included): every GPU pushes its part, the switch multicasts it to every GPU of the node.
A GPU sends its n/p bytes and receives all p parts, n bytes (a ring: (p-1)/p n each way).

Channels run side by side on the GPUs and on the switch, and the switch handles slice k
of every block (all_reduce, reduce_scatter) or every GPU's part (all_gather) before slice
k + 1, so all GPUs progress together. The switch sums 16-bit floats (float16, bfloat16)
in float32 and rounds once, as NVLink SHARP's ``multimem.ld_reduce ... .acc::f32`` does
(src/device/reduce_kernel.h, from NCCL 2.27.3), where a GPU's reduction rounds at every
step (:func:`switch_reduce`); its reduction time is of the element type's bytes. NCCL
models the whole operation's latency as one fixed cost
(``hwLatencies[NVLINK][NVLS][SIMPLE]``, 25 us), paid once at the start. Slices are NCCL's
NVLS chunk (``NCCL_NVLS_CHUNKSIZE``, 128 KiB) at every size (the one-node all_reduce's
last loop: pieces of multiples of 16 KiB). NCCL lowers it for smaller
buffers (``calcCollChunking`` in src/enqueue.cc: 64 KiB below 64 chunks per channel and
head, 32 KiB below 8, 16 KiB below 2; NVLS-tree 32 KiB to 128 KiB, 64 KiB at most from 4
nodes); with those chunks the simulation moves further from nccl-tests (one DGX H100:
``h100x8_exemplar`` 20.7% against 18.3%, 8 - 32 MiB 18 - 20% fast against 2 - 11%, and
``h100x8_nvls`` 5.0% against 3.9%, 2026-12-07; NVLS-tree, measured earlier with the
models of the time, sizes up to 1 GiB: two nodes 20.3% to 21.5%, eight 35.0% to 46.0%),
as smaller chunks only fill the pipeline sooner here, where a
real chunk also costs a step. Device code: ``src/device/reduce_scatter.h`` and
``all_gather.h`` (NCCL 2.30.7). Across nodes NCCL runs NVLS reduce_scatter and all_gather
with InfiniBand SHARP (:mod:`.nvls_sharp`). """

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simcoll.algorithms.nccl.channels import by_channel, run_channels
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender
from simcoll.buffers import Buffer, VirtualBuffer, frozen, join, split, split_counts
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

_WIDENED = ("float16", "bfloat16")
"""The element types NVLS's switch sums in float32 (``PtxAcc_for_f16`` and ``_bf16``)."""

__all__ = ["CHUNK_BYTES", "chunks", "served", "switch_of", "switch_reduce",
           "gpu_reduce_scatter", "switch_reduce_scatter", "gpu_all_gather", "switch_all_gather"]

CHUNK_BYTES = 128 * 1024
"""``NCCL_NVLS_CHUNKSIZE``'s default (``nvlsChunkSize`` in ``src/init.cc``)."""


def chunks(part: Buffer) -> list[Buffer]:
    """``part`` cut into slices of NCCL's NVLS chunk (equal ones)."""
    per = max(1, CHUNK_BYTES // part.dtype.itemsize)
    count = -(-part.size // per)
    return [part] if count <= 1 else list(split(part, count))


def switch_of(comm: Comm) -> int:
    """This GPU's NVLS switch (a ValueError where it has none)."""
    switch = comm.reducer_of(comm.rank)
    if switch is None:
        raise ValueError(f"rank {comm.rank} has no NVLS switch; NVLS needs every GPU on "
                         f"an in-network NVSwitch")
    return switch


def served(comm: Comm) -> tuple[int, ...]:
    """The GPUs in-network device ``comm.rank`` reduces for with NVLS: those linked to it
    whose NVLS switch it is (:meth:`~simcoll.comm.Comm.reducer_of`). Another in-network
    device a GPU is also linked to (a NIC or switch that reduces for SHARP) serves none
    of its GPUs."""
    return tuple(g for g in comm.attached(comm.rank) if comm.reducer_of(g) == comm.rank)


def _interleaved(parts: list[Buffer]) -> list[tuple[int, int, Buffer]]:
    """``(k, j, slice)`` for slice k of every part j, slice by slice (k outer), as the
    switch handles them."""
    sliced = [chunks(part) for part in parts]
    return [(k, j, pieces[k]) for k in range(max(len(s) for s in sliced))
            for j, pieces in enumerate(sliced) if k < len(pieces)]


def switch_reduce(comm: Comm, gpus: Sequence[int], tag: int, op: ReduceOp) -> Steps:
    """The switch's reduction of one slice: what each of ``gpus`` pushed on ``tag``,
    reduced with ``op`` one GPU after another, each reduction at the switch's rate. A
    sum of 16-bit floats is accumulated in float32 and rounded once (so 2048 and seven
    1s give 2056 in float16, not 2048; 60000 + 60000 - 60000 gives 60000, not inf)."""
    total = yield comm.recv(gpus[0], tag=tag)
    wide = total.astype(np.float32) if type(total) is np.ndarray and op is ReduceOp.SUM \
        and total.dtype.name in _WIDENED else None
    for gpu in gpus[1:]:
        got = yield comm.recv(gpu, tag=tag)
        total = yield comm.reduce(total, got, op)  # the time, and the result unless wide
        if wide is not None:
            wide += got.astype(np.float32)
    return total if wide is None else frozen(wide.astype(total.dtype))


def gpu_reduce_scatter(comm: Comm, parts: list[Buffer], channel: int,
                       protocol: Protocol) -> Steps:
    """One channel on a GPU: push this channel's part of every block (``parts[j]``,
    block j) into the switch, take this rank's block back reduced."""
    switch = switch_of(comm)
    push = Sender(comm, switch, protocol, 0.0, channel)
    for _, _, piece in _interleaved(parts):
        yield from push.send(piece)
    mine = chunks(parts[comm.rank])
    for k in range(len(mine)):
        mine[k] = yield comm.recv(switch, tag=channel)
    yield from push.drain()
    return join(mine)


def switch_reduce_scatter(comm: Comm, x: VirtualBuffer, counts: list[int],
                          op: ReduceOp) -> Steps:
    """The switch's side of every channel, channel c carrying ``counts[c]`` elements of
    every block: reduce slice k of block j over the attached GPUs and send it to GPU j,
    slice by slice."""
    gpus = sorted(served(comm))  # block j goes to GPU rank j
    parts = by_channel(list(split(x, len(gpus))), counts)

    def channel(c: int) -> Steps:
        for _, j, _ in _interleaved(parts[c]):
            total = yield from switch_reduce(comm, gpus, c, op)
            comm.send(total, gpus[j], tag=c)
        return None

    yield from run_channels(comm, len(counts), channel)
    return None


def gpu_all_gather(comm: Comm, own: Buffer, channel: int, protocol: Protocol) -> Steps:
    """One channel on a GPU: push this rank's part into the switch, take every rank's
    part back (its own included) from the switch's multicasts; returns them by rank."""
    switch = switch_of(comm)
    push = Sender(comm, switch, protocol, 0.0, channel)
    for piece in chunks(own):
        yield from push.send(piece)
    # Every rank's part has this rank's part's size.
    got: list[list[Buffer]] = [chunks(own) for _ in range(comm.size)]
    for k, j, _ in _interleaved([own] * comm.size):
        got[j][k] = yield comm.recv(switch, tag=channel)
    yield from push.drain()
    return [join(pieces) for pieces in got]


def switch_all_gather(comm: Comm, x: VirtualBuffer, counts: list[int]) -> Steps:
    """The switch's side of every channel, channel c carrying ``counts[c]`` elements of
    every GPU's buffer: multicast slice k of every GPU's part to every GPU, slice by
    slice."""
    gpus = sorted(served(comm))
    part = split_counts(x, counts)

    def channel(c: int) -> Steps:
        for _, j, _ in _interleaved([part[c]] * len(gpus)):
            comm.multicast((yield comm.recv(gpus[j], tag=c)), gpus, tag=c)
        return None

    yield from run_channels(comm, len(counts), channel)
    return None
