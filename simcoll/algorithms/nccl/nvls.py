"""NVLink SHARP (NVLS), simulated: the NVSwitch reduces and multicasts.

Every GPU pushes its buffer into the NVSwitch slice by slice; for each slice the switch
reduces what every GPU of the node pushed (at its own reduction bandwidth, one reduction
at a time) and multicasts the result back, each byte crossing each switch-to-GPU link
once. A GPU so sends n bytes and receives n bytes, whatever the rank count, against
2(p-1)/p n each way for a ring; the switch does all the reductions. Channels run side by
side on the GPUs and on the switch. NCCL models the whole operation's latency as one
fixed cost (``hwLatencies[NVLINK][NVLS][SIMPLE]``, 25 us), paid once at the start.
Slices are NCCL's NVLS chunk (``NCCL_NVLS_CHUNKSIZE``, 128 KiB).
"""

from __future__ import annotations

from simcoll.algorithms.nccl.channels import run_channels
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender
from simcoll.buffers import Buffer, VirtualBuffer, join, split
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["CHUNK_BYTES", "gpu_all_reduce", "switch_all_reduce"]

CHUNK_BYTES = 128 * 1024
"""``NCCL_NVLS_CHUNKSIZE``'s default (``nvlsChunkSize`` in ``src/init.cc``)."""


def _slices(part: Buffer) -> list[Buffer]:
    per = max(1, CHUNK_BYTES // part.dtype.itemsize)
    count = -(-part.size // per)
    return [part] if count <= 1 else list(split(part, count))


def gpu_all_reduce(comm: Comm, part: Buffer, channel: int, protocol: Protocol) -> Steps:
    """One channel on a GPU: push every slice into the switch, take the results back."""
    switch = comm.reducer_of(comm.rank)
    if switch is None:
        raise ValueError(f"rank {comm.rank} has no NVLS switch; NVLS needs every GPU on "
                         f"an in-network NVSwitch")
    slices = _slices(part)
    push = Sender(comm, switch, protocol, 0.0, channel)
    for piece in slices:
        yield from push.send(piece)
    for k in range(len(slices)):
        slices[k] = yield comm.recv(switch, tag=channel)
    yield from push.drain()
    return join(slices)


def switch_all_reduce(comm: Comm, x: VirtualBuffer, channels: int, op: ReduceOp) -> Steps:
    """The switch's side of every channel: reduce each slice over the attached GPUs,
    multicast it back to them."""
    gpus = comm.attached(comm.rank)
    # Every GPU's channel c part of x, as the GPUs cut it (sizes only: what arrives
    # carries the data).
    parts = list(split(x, channels))

    def channel(c: int) -> Steps:
        for _ in _slices(parts[c]):
            total = yield comm.recv(gpus[0], tag=c)
            for gpu in gpus[1:]:
                total = yield comm.reduce(total, (yield comm.recv(gpu, tag=c)), op)
            comm.multicast(total, gpus, tag=c)
        return None

    yield from run_channels(comm, channels, channel)
    return None
