"""NCCL's PAT reduce_scatter and all_gather, simulated step by step (one GPU per node).

Each channel runs the ops of :func:`~simcoll.algorithms.nccl.pat_schedule.schedule`, NCCL's
own PAT state machine, in order. An op takes a piece of a block (NCCL's chunk: ``nelem``
elements at ``offset`` of the block's part in this channel) from the step it reads on its
receive dimension, or from the rank's own buffer, and

* reduce_scatter: adds the rank's own piece of that block (or what its send slot already
  holds) and writes the sum into a slot of the step it writes on its send dimension, or,
  for the rank's own block, into the output;
* all_gather: copies the piece into the output and into a slot of its send step.

An op that completes a send step sends it, as one message, to r + 2^d (reduce_scatter)
or r - 2^d (all_gather): the blocks of the step by slot, ``max(slot offset + nelem)``
elements on the wire as NCCL's proxy sends them (gaps left by skipped slots included),
after NCCL's PAT step latency over the network or the route's own latency, whichever is
more, with at most ``NCCL_STEPS`` steps in flight per connection. Where a GPU has several
NICs, channel c's connections leave and enter through each end's own NIC c modulo how many
it has (:func:`~.nics.bound_nic`): NCCL connects PAT's peers over its tree graph
(``ncclTransportPatConnect``, src/transport/generic.cc), whose channel c starts its search
at the c-th of the NICs ``ncclTopoSelectNets`` lists: with one GPU per node, its own in the
order it takes them for channels 0, 1, ... (``ncclTopoPrefNetsChannelFirst``,
``ncclTopoSearchRecNet`` in src/graph/search.cc). A receiving op waits
for the step it reads. Payload counts only the blocks. NCCL's worker groups run up to 16
ops side by side; here a rank runs them one after the other, and an op costs nothing but
its reductions and the messages it waits for.

Sources: NCCL 2.30.7 ``src/include/collectives.h`` (``PatRSAlgorithm``,
``PatAGAlgorithm``), ``src/device/prims_simple.h`` (``patReduce``, ``patCopy``),
``src/device/reduce_scatter.h`` and ``all_gather.h`` (the kernels), ``src/enqueue.cc``
(chunk sizes).
"""

from __future__ import annotations

import dataclasses

from simcoll.algorithms.nccl.constants import NCCL_STEPS
from simcoll.algorithms.nccl.nics import bound_nic
from simcoll.algorithms.nccl.pat_schedule import Schedule, schedule
from simcoll.algorithms.nccl.protocols import Protocol
from simcoll.algorithms.nccl.rings import Sender
from simcoll.buffers import Buffer, join, split_counts
from simcoll.comm import Comm
from simcoll.ops import ReduceOp
from simcoll.typing import Steps

__all__ = ["chunk_bytes", "reduce_scatter", "all_gather"]

_STEP_BYTES = 1 << 19
"""NCCL's Simple step (the 4 MiB buffer over ``NCCL_STEPS``): PAT's largest chunk."""
_MIN_CHUNK = 1 << 16
_GRAIN = 512


def chunk_bytes(collective: str, nbytes: int, channels: int) -> int:
    """NCCL's PAT chunk for a collective of ``nbytes`` (the whole buffer, every rank's
    blocks) over ``channels``: the Simple step, halved while the channels would get
    fewer than 32 (all_gather) or 16 (reduce_scatter) chunks, down to 64 KiB
    (``calcCollChunking`` in src/enqueue.cc), in whole 512-byte grains."""
    per = 32 if collective == "all_gather" else 16
    chunk = _STEP_BYTES
    while chunk * channels * per > nbytes and chunk > _MIN_CHUNK:
        chunk //= 2
    return chunk // _GRAIN * _GRAIN


def _window(protocol: Protocol) -> Protocol:
    """PAT posts single steps, so NCCL's FIFO holds ``NCCL_STEPS`` of them."""
    return dataclasses.replace(protocol, window=NCCL_STEPS)


class _Channel:
    """One channel's connections: a sender per send dimension, received steps per
    receive dimension, and what the steps being written hold."""

    def __init__(self, comm: Comm, plan: Schedule, protocol: Protocol, tag: int,
                 upward: bool, lengths: list[int]) -> None:
        self.comm, self.plan, self.tag, self.lengths = comm, plan, tag, lengths
        p, r = comm.size, comm.rank
        self.p = p
        sign = 1 if upward else -1
        self.to = [(r + sign * (1 << d)) % p for d in range(len(plan.sends))]
        self.source = [(r - sign * (1 << d)) % p for d in range(len(plan.recvs))]
        step = protocol.hop("pat", "net")
        self.senders = [Sender(comm, peer, protocol, step, (tag, d), bound_nic(comm, peer, tag))
                        if plan.sends[d] else None for d, peer in enumerate(self.to)]
        self.slots: dict[tuple[int, int], dict[int, Buffer]] = {}
        self.arrived: list[dict[int, dict[int, Buffer]]] = [{} for _ in plan.recvs]
        self.received = [0] * len(plan.recvs)

    def piece_length(self, rank: int, offset: int, nelem: int) -> int:
        """Elements of a piece of ``rank``'s block part (parts may differ by one)."""
        return max(0, min(nelem, self.lengths[rank] - offset))

    def read(self, dim: int, step: int, offset: int) -> Steps:
        """The piece at ``offset`` of receive step ``step`` on ``dim``, once it arrived."""
        arrived = self.arrived[dim]
        while self.received[dim] <= step:
            k = self.received[dim]
            message = yield self.comm.recv(self.source[dim], tag=(self.tag, dim))
            sender = self.source[dim]
            entries = self.plan.layout[(dim, k)]
            counts = [self.piece_length((sender + shift) % self.p, off, nelem)
                      for _, shift, off, nelem in entries]
            arrived[k] = dict(zip((e[0] for e in entries), split_counts(message, counts)))
            self.received[dim] += 1
        return arrived[step][offset]

    def free(self, dim: int, step: int) -> None:
        self.arrived[dim].pop(step, None)

    def post(self, dim: int, step: int, itemsize: int) -> Steps:
        """Send step ``step`` on ``dim``: its slots in offset order."""
        slots = self.slots.pop((dim, step), {})
        entries = self.plan.layout[(dim, step)]
        pieces = [slots[off] for off, _, _, _ in entries]
        wire = max(off + nelem for off, _, _, nelem in entries) * itemsize
        sender = self.senders[dim]
        assert sender is not None
        yield from sender.send(join(pieces), wire)

    def drain(self) -> Steps:
        for sender in self.senders:
            if sender is not None:
                yield from sender.drain()


def _plan(collective: str, comm: Comm, count: int, chunk: int, itemsize: int) -> Schedule:
    return schedule(collective, comm.size, count, max(1, chunk // itemsize), itemsize)


def reduce_scatter(comm: Comm, parts: list[Buffer], protocol: Protocol, op: ReduceOp,
                   tag: int, chunk: int) -> Steps:
    """One channel of PAT reduce_scatter: ``parts[b]`` is this rank's part of block b;
    returns its own block's part, reduced over every rank."""
    p, r = comm.size, comm.rank
    lengths = [len(part) for part in parts]
    count = max(lengths)
    if count == 0:
        return parts[r]
    itemsize = parts[0].dtype.itemsize
    plan = _plan("reduce_scatter", comm, count, chunk, itemsize)
    channel = _Channel(comm, plan, _window(protocol), tag, True, lengths)
    out: dict[int, Buffer] = {}
    for ps, recv_step, send_step, posts, frees in plan.ops:
        got = None
        if ps.recv_dim >= 0:
            got = yield from channel.read(ps.recv_dim, recv_step, ps.recv_offset)
            if frees >= 0:
                channel.free(ps.recv_dim, frees)
        block = (r + ps.shift) % p
        if ps.send_dim >= 0:
            slot = channel.slots.setdefault((ps.send_dim, send_step), {})
            held = slot.get(ps.send_offset)
        else:
            held = out.get(ps.offset)
        if held is None:
            held = parts[block][ps.offset:ps.offset + ps.nelem]
        value = held if got is None else (yield comm.reduce(got, held, op,
                                                             shared=True))
        if ps.send_dim >= 0:
            slot[ps.send_offset] = value
        else:
            out[ps.offset] = value
        if posts >= 0:
            yield from channel.post(ps.send_dim, posts, itemsize)
    yield from channel.drain()
    return join([out[offset] for offset in sorted(out)])


def all_gather(comm: Comm, own: Buffer, protocol: Protocol, tag: int, chunk: int) -> Steps:
    """One channel of PAT all_gather of every rank's part ``own`` (all the same size);
    returns every rank's part, by rank."""
    p, r = comm.size, comm.rank
    count = len(own)
    if count == 0:
        return [own] * p
    itemsize = own.dtype.itemsize
    plan = _plan("all_gather", comm, count, chunk, itemsize)
    channel = _Channel(comm, plan, _window(protocol), tag, False, [count] * p)
    got_pieces: list[dict[int, Buffer]] = [{} for _ in range(p)]
    got_pieces[r] = {0: own}
    for ps, recv_step, send_step, posts, frees in plan.ops:
        if ps.recv_dim >= 0:
            value = yield from channel.read(ps.recv_dim, recv_step, ps.recv_offset)
            if frees >= 0:
                channel.free(ps.recv_dim, frees)
            block = (r + ps.shift) % p
            got_pieces[block].setdefault(ps.offset, value)
        else:
            value = own[ps.offset:ps.offset + ps.nelem]
        if ps.send_dim >= 0:
            channel.slots.setdefault((ps.send_dim, send_step), {})[ps.send_offset] = value
        if posts >= 0:
            yield from channel.post(ps.send_dim, posts, itemsize)
    yield from channel.drain()
    return [join([pieces[offset] for offset in sorted(pieces)]) for pieces in got_pieces]
