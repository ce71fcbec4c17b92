"""The step schedule of NCCL's PAT (Parallel Aggregated Trees), ported from NCCL 2.30.7.

PAT runs reduce_scatter and all_gather where every node has one GPU. Every rank's block
travels a binomial tree: rank r talks to r + 2^d and r - 2^d along "dimensions" d, and a
block that must go 2^a + 2^b + ... ranks away goes one power of two per hop, so the
last hops of many blocks share a message. How many blocks share one depends on the
size: small blocks are aggregated up to p/2 per message (log p steps, as recursive
doubling), large ones go in more, smaller messages, each at most a step of the
connection buffer, with at most ``NCCL_STEPS`` of them in flight.

:class:`ReduceScatterOps` and :class:`AllGatherOps` are NCCL's ``PatRSAlgorithm`` and
``PatAGAlgorithm`` (``src/include/collectives.h``), line by line: each call of
``next_op`` yields the step description NCCL's algorithm thread hands its workers
(``ncclPatStep``). NCCL's proxy runs the same classes on the host to count each
connection's network steps (``src/proxy.cc``, ``ncclPatternPatUp`` / ``PatDown``).
Nothing in an op depends on the rank but the blocks it names, which are given relative
to the rank, so :func:`schedule` computes one op list for every rank.

Reduce-scatter sends to r + 2^d and receives from r - 2^d; all-gather the other way.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = ["PatOp", "ReduceScatterOps", "AllGatherOps", "Schedule", "schedule"]

_PARALLEL_FACTOR = 512 // 32
"""``NCCL_PAT_NWORKERS / WARP_SIZE``: the worker groups that run steps side by side."""
_STEP_DEPTH = 8
"""``NCCL_STEPS``: a connection's FIFO slots, which PAT fills with aggregated steps."""


def _log2_up(n: int) -> int:
    return (n - 1).bit_length()


def _first_bit_set(i: int, maximum: int) -> int:
    return (i & -i).bit_length() - 1 if i else maximum


def _bits_set(i: int) -> int:
    return bin(i).count("1")


def _mirror_invert(i: int, maximum: int) -> int:
    ret, mask, imask = 0, 1, maximum // 2
    while mask < maximum:
        if i & mask == 0:
            ret += imask
        mask, imask = mask << 1, imask >> 1
    return ret


def _new_peer(i: int, pow2: int) -> bool:
    return _bits_set((i ^ (pow2 - 1)) + 1) == 1


@dataclass
class PatOp:
    """One step of NCCL's ``ncclPatStep``, with blocks relative to the rank.

    Attributes:
        recv_dim, send_dim: the dimensions received from and sent to (-1: none).
        recv_offset, send_offset: element offsets in the connection's step buffer.
        step_offset: how many steps ahead of the connection's current one the op
            writes (reduce_scatter's send) or reads (all_gather's receive).
        post_recv, post_send: the op completes the current step of its receive or send
            connection.
        shift: the block the op moves is rank ``(r + shift) mod p``'s.
        offset: the element offset of the chunk in the rank's part of that block.
        nelem: elements the op moves.
        skipped: NCCL's ``PatSkipped``: the workers do nothing.
        last: NCCL's ``last`` (2 on the final op).
    """

    recv_dim: int = -1
    send_dim: int = -1
    recv_offset: int = -1
    send_offset: int = -1
    step_offset: int = 0
    post_recv: bool = False
    post_send: bool = False
    shift: int = 0
    offset: int = 0
    nelem: int = 0
    skipped: bool = False
    last: int = 0


class _PatBase:
    """The constructor both of NCCL's PAT classes share: how many blocks a message
    aggregates (``aggFactor``), how often steps are posted, and how many groups work at
    once."""

    def __init__(self, step_bytes: int, offset: int, end: int, chunk: int, nranks: int,
                 itemsize: int) -> None:
        self.offset, self.end, self.chunk, self.nranks = offset, end, chunk, nranks
        self.parallel = _PARALLEL_FACTOR
        self.nr_pow2 = self.agg_delta = 1 << _log2_up(nranks)
        self.agg = 1
        channel_bytes = (end - offset) * itemsize
        while (channel_bytes and step_bytes // (channel_bytes * self.agg) >= 2
               and self.agg < nranks // 2):
            self.agg *= 2
            self.agg_delta //= 2
        self.post_freq = self.agg
        self.parallel = min(self.parallel, self.post_freq)
        d = _STEP_DEPTH
        while d > 1 and self.agg < nranks // 2:
            d //= 2
            self.agg *= 2
            self.agg_delta //= 2

    def _nelem(self) -> int:
        return min(self.chunk, self.end - self.offset)

    def _reset(self) -> None:
        raise NotImplementedError

    def _reset_a(self) -> None:
        raise NotImplementedError

    def _advance(self, ps: PatOp, chunk_done: bool) -> None:
        """After a phase: the next phase, the next chunk, or ``last = 2`` on the final
        op (NCCL's ``getNextOp`` tail, alike in both classes)."""
        if not chunk_done:
            self._reset_a()
        elif self.offset >= self.end:
            ps.last = 2
        else:
            self._reset()


class ReduceScatterOps(_PatBase):
    """NCCL's ``PatRSAlgorithm``: ops in NCCL's order (see :meth:`next_op`)."""

    def __init__(self, step_bytes: int, offset: int, end: int, chunk: int, nranks: int,
                 itemsize: int) -> None:
        super().__init__(step_bytes, offset, end, chunk, nranks, itemsize)
        self._reset()

    def _reset_a(self) -> None:
        self.a = 0
        self.send_skipped = self.step_offset = 0
        self.last_a = self.agg
        if self.phase >= 2:
            self.last_a //= 2 * self.scale
        if self.phase == 4:
            self.last_a = 1

    def _reset(self) -> None:
        self.nelem = self._nelem()
        self.phase = 0
        self.scale = 1
        self.as_ = self.agg_delta - 1
        self._reset_a()

    def next_op(self) -> PatOp:  # noqa: C901 (NCCL's one state machine, kept whole)
        """NCCL's ``getNextOp``."""
        n, a, last_a, post_freq, nelem = self.nranks, self.a, self.last_a, self.post_freq, \
            self.nelem
        ps = PatOp(nelem=nelem, offset=self.offset, step_offset=self.step_offset)
        skip = False
        if a >= last_a:
            skip = True
        elif self.phase == 0:
            s = _mirror_invert(a, last_a) * self.agg_delta + self.as_
            skip = s >= n
            ps.shift = s % n
            ps.send_dim, ps.recv_dim = 0, -1
            ps.send_offset = (a % post_freq) * nelem
            ps.post_send = (a % post_freq) + 1 >= post_freq or a == last_a - 1
        elif self.phase == 1:
            s = _mirror_invert(a, last_a) * self.agg_delta + self.as_
            skip = s >= n
            ps.recv_dim = _first_bit_set(s, self.nr_pow2)
            ps.send_offset = ps.recv_offset = (a % post_freq) * nelem
            ends_step = (a % post_freq) + 1 >= post_freq or a == last_a - 1
            ps.post_send = ps.recv_dim == 0 and ends_step
            ps.post_recv = ends_step
            s -= 1 << ps.recv_dim
            ps.shift = (n + s) % n
            ps.send_dim = _first_bit_set(s, self.nr_pow2) if s else -1
            if ps.send_dim == -1:
                ps.send_offset = -1
            elif self.as_ - (1 << ps.recv_dim) == 0:
                if _new_peer(a, self.agg):
                    self.send_skipped = a
                    ps.step_offset = self.step_offset = 0
                ps.send_offset = ((a - self.send_skipped) % post_freq) * nelem
            recv_dim = ps.recv_dim
            if s < n and skip:
                ps.recv_dim, ps.recv_offset, ps.post_recv = -1, -1, False
                skip = False
            if recv_dim > 0 and ((a - self.send_skipped) % post_freq) + 1 >= post_freq \
                    and not skip:
                self.step_offset += 1
        elif self.phase == 2:
            s = (2 * _mirror_invert(a, last_a) + 1) * self.scale * self.agg_delta + 1
            skip = s >= n
            ps.recv_dim = 0
            ps.post_send = a == last_a - 1
            s -= 1
            if s < n and skip:
                ps.recv_dim, ps.recv_offset = -1, -1
                skip = False
            elif not skip:
                foffset = a + self.agg - self.agg // self.scale
                ps.post_recv = (foffset + 1) % post_freq == 0
                ps.recv_offset = (foffset % post_freq) * nelem
            ps.shift = (n + s) % n
            ps.send_dim = _first_bit_set(s, self.nr_pow2) if s else -1
            ps.post_send = ps.post_send or (a + 1) % post_freq == 0
            ps.send_offset = (a % post_freq) * nelem
        elif self.phase == 3:
            s = (2 * _mirror_invert(a, last_a) + 1) * self.scale * self.agg_delta
            ps.post_recv = a == last_a - 1
            skip = s >= n
            ps.recv_dim = _first_bit_set(s, self.nr_pow2)
            s -= 1 << ps.recv_dim
            ps.post_recv = ps.post_recv or (a + 1) % post_freq == 0
            ps.recv_offset = (a % post_freq) * nelem
            ps.shift = (n + s) % n
            ps.send_dim = _first_bit_set(s, self.nr_pow2) if s else -1
            if s < n and skip:
                ps.recv_dim, ps.recv_offset, ps.post_recv = -1, -1, False
                skip = False
            if _new_peer(a, self.agg // (2 * self.scale)):
                self.send_skipped = a
                ps.step_offset = self.step_offset = 0
            foffset = a - self.send_skipped
            if (foffset % post_freq) + 1 >= post_freq and not skip:
                self.step_offset += 1
            ps.send_offset = (foffset % post_freq) * nelem if ps.send_dim >= 0 else -1
        elif self.phase == 4:
            ps.recv_dim, ps.send_dim = 0, -1
            ps.shift = 0
            ps.recv_offset = ((self.agg - 1) % post_freq) * nelem
            ps.send_offset = -1
            ps.post_recv, ps.post_send = True, False
            self.offset += self.chunk
        self.a = a = a + 1
        if a >= last_a and a >= self.parallel:
            phase = self.phase
            if phase == 1:
                self.as_ -= 1
            if phase == 3:
                self.scale *= 2
            self.phase = (((2 if self.agg > 1 else 4) if self.as_ == 1 else 1) if phase == 0
                          else (0 if self.as_ % 2 == 1 else 1) if phase == 1
                          else 3 if phase == 2
                          else (2 if self.scale < self.agg else 4) if phase == 3
                          else 5)
            self._advance(ps, phase == 4)
        elif self.phase == 4 and self.offset >= self.end:
            ps.last = 1
        ps.skipped = skip
        return ps


class AllGatherOps(_PatBase):
    """NCCL's ``PatAGAlgorithm``: ops in NCCL's order (see :meth:`next_op`)."""

    def __init__(self, step_bytes: int, offset: int, end: int, chunk: int, nranks: int,
                 itemsize: int) -> None:
        super().__init__(step_bytes, offset, end, chunk, nranks, itemsize)
        self.as_dim = _log2_up(self.agg_delta)
        self._reset()

    def _reset_a(self) -> None:
        self.a = 0
        self.last_a = self.agg
        if self.phase >= 2:
            self.last_a //= 2 * self.scale

    def _reset(self) -> None:
        self.nelem = self._nelem()
        self.scale = self.agg // 2
        self.phase = 2 if self.scale else 1
        self.v = 0
        self.bit_count = [self.as_dim - i for i in range(self.as_dim)]
        self.bit_zero_step = [1] * self.as_dim
        self.as_ = self._next_as()
        self._reset_a()

    def _next_as(self) -> int:
        for d in range(self.as_dim):
            p = 1 << d
            self.bit_count[d] -= 1
            if self.bit_count[d] == 0:
                self.v ^= p
                self.bit_count[d] = p
                if self.v & p == 0:
                    self.bit_count[d] += _first_bit_set(self.bit_zero_step[d], self.as_dim) - 1
                    if self.bit_count[d] == 0:
                        self.v ^= p
                        self.bit_count[d] = p
                    self.bit_zero_step[d] += 1
        return self.v

    def next_op(self) -> PatOp:
        """NCCL's ``getNextOp``."""
        n, a, last_a, post_freq, nelem = self.nranks, self.a, self.last_a, self.post_freq, \
            self.nelem
        agg_delta, as_ = self.agg_delta, self.as_
        ps = PatOp(nelem=nelem, offset=self.offset)
        skip = False
        if a >= last_a:
            skip = True
        elif self.phase == 0:
            s = a * agg_delta + as_
            skip = s >= n
            ps.shift = s % n
            ps.send_dim, ps.recv_dim = -1, 0
            ps.send_offset = -1
            ps.recv_offset = (a % post_freq) * nelem
            ps.post_recv = a % post_freq == post_freq - 1 or (a + 1) * agg_delta + as_ >= n
        elif self.phase == 1:
            s = a * agg_delta + as_
            skip = s >= n
            ps.send_dim = _first_bit_set(s, self.nr_pow2)
            s -= 1 << ps.send_dim
            ps.shift = (n + s) % n
            ps.recv_dim = _first_bit_set(s, self.nr_pow2) if s else -1
            ps.send_offset = ps.recv_offset = (a % post_freq) * nelem
            ps.post_send = a % post_freq == post_freq - 1 or (a + 1) * agg_delta + as_ >= n
            ps.post_recv = ps.send_dim == 0 and (a % post_freq == post_freq - 1
                                                 or (a + 1) * agg_delta + as_ - 1 >= n)
            ps.step_offset = 0 if ps.send_dim == 0 else a // post_freq
            if ps.recv_dim == -1:
                ps.recv_offset, ps.post_recv = -1, False
            elif as_ - (1 << ps.send_dim) == 0:
                foffset = (a * agg_delta) >> (ps.recv_dim + 1)
                ps.recv_offset = (foffset % post_freq) * nelem
                ps.post_recv = ps.send_dim == 0 and (
                    foffset % post_freq == post_freq - 1
                    or (((foffset + 1) * 2) + 1) << ps.recv_dim >= n)
                ps.step_offset = 0 if ps.send_dim == 0 else foffset // post_freq
            if s < n and ps.send_dim == 0 and skip:
                # NCCL: "Don't forget to receive at least once even if we don't send
                # afterwards"
                ps.send_dim, ps.send_offset, ps.post_send = -1, -1, False
                skip = False
        elif self.phase == 2:
            scale = self.scale
            s = (2 * a + 1) * scale * agg_delta
            ps.post_send = a % post_freq == post_freq - 1 or \
                (2 * (a + 1) + 1) * scale * agg_delta >= n
            skip = s >= n
            ps.send_dim = _first_bit_set(s, self.nr_pow2)
            s -= 1 << ps.send_dim
            ps.send_offset = (a % post_freq) * nelem
            ps.step_offset = a // post_freq
            ps.shift = (n + s) % n
            ps.recv_dim = _first_bit_set(s, self.nr_pow2) if s else -1
            if ps.recv_dim == -1:
                ps.recv_offset = -1
            else:
                foffset = (a * 2 * scale * agg_delta) >> (ps.recv_dim + 1)
                ps.recv_offset = (foffset % post_freq) * nelem
                ps.step_offset = foffset // post_freq
        self.a = a = a + 1
        if a >= last_a and a >= self.parallel:
            phase = self.phase
            if phase == 2:
                self.scale //= 2
            self.phase = ((2 if self.scale else 1) if phase == 2
                          else (0 if self.as_ % 2 == 1 else 1) if phase == 1 else 1)
            if phase == 0 or (phase == 1 and self.as_ % 2 == 0):
                self.as_ = self._next_as()
            chunk_done = phase == 0 and self.as_ == self.agg_delta // 2
            if chunk_done:
                self.offset += self.chunk
            self._advance(ps, chunk_done)
        elif self.phase == 0 and self.as_ == 1 and self.offset + self.chunk >= self.end and \
                a - 1 >= ((last_a - 1) // self.parallel) * self.parallel:
            ps.last = 1
        ps.skipped = skip
        return ps


@dataclass(frozen=True)
class Schedule:
    """One rank's PAT ops for one channel, and what each connection step holds.

    Attributes:
        ops: the ops NCCL's workers run (skipped ones left out), in order, each as
            ``(op, recv_step, send_step, posts, frees)``: the absolute steps of its
            connections it reads and writes (-1 for none), the send step it completes
            and sends, and the receive step it completes (-1 for none).
        layout: ``(dim, step) -> ((send_offset, shift, offset, nelem), ...)``: the
            blocks a send step holds, by offset, as the first op writing each offset
            named them.
        sends, recvs: steps per dimension (NCCL's proxy's ``nstepsSend`` /
            ``nstepsRecv``).
    """

    ops: tuple[tuple[PatOp, int, int, int, int], ...]
    layout: dict[tuple[int, int], tuple[tuple[int, int, int, int], ...]]
    sends: tuple[int, ...]
    recvs: tuple[int, ...]


@functools.lru_cache(maxsize=256)
def schedule(collective: str, nranks: int, count: int, chunk: int,
             itemsize: int) -> Schedule:
    """The ops of one channel of PAT ``collective`` ("reduce_scatter" or "all_gather")
    over ``nranks`` ranks, ``count`` elements per rank in the channel, chunks of
    ``chunk`` elements (``stepSize`` = ``chunk`` x ``itemsize``, as NCCL's kernels
    construct the algorithm), with each op's connection steps (see :class:`Schedule`).

    Raises:
        RuntimeError: NCCL's state machine does not end within a bound on its ops (a
            safeguard: a run never hangs).
    """
    kind = ReduceScatterOps if collective == "reduce_scatter" else AllGatherOps
    algo = kind(chunk * itemsize, 0, count, chunk, nranks, itemsize)
    dims = _log2_up(nranks)
    send_steps, recv_steps = [0] * dims, [0] * dims
    ops: list[tuple[PatOp, int, int, int, int]] = []
    writes: dict[tuple[int, int], dict[int, tuple[int, int, int, int]]] = {}
    bound = 64 * (nranks + 16) * (-(-count // max(chunk, 1)) + 1)
    for _ in range(bound):
        op = algo.next_op()
        if not op.skipped:
            scatter = collective == "reduce_scatter"
            recv_step = send_step = posts = frees = -1
            if op.recv_dim >= 0:
                recv_step = recv_steps[op.recv_dim] + (0 if scatter else op.step_offset)
                if op.post_recv:
                    frees = recv_steps[op.recv_dim]
                    recv_steps[op.recv_dim] += 1
            if op.send_dim >= 0:
                send_step = send_steps[op.send_dim] + (op.step_offset if scatter else 0)
                writes.setdefault((op.send_dim, send_step), {}).setdefault(
                    op.send_offset, (op.send_offset, op.shift, op.offset, op.nelem))
                if op.post_send:
                    posts = send_steps[op.send_dim]
                    send_steps[op.send_dim] += 1
            ops.append((op, recv_step, send_step, posts, frees))
        if op.last == 2:
            break
    else:
        raise RuntimeError(f"PAT {collective} over {nranks} ranks ({count} elements, chunks "
                           f"of {chunk}) did not end within {bound} ops")
    layout = {key: tuple(sorted(slots.values())) for key, slots in writes.items()}
    return Schedule(tuple(ops), layout, tuple(send_steps), tuple(recv_steps))
