"""NCCL's cost models on the alpha-beta reference network (one node, no NVLS), for
:mod:`simcoll.cost`: estimates of NCCL's ring (all_to_all: its sends to every peer).

The tuner runs the ring there by itself but for a few all_reduce sizes on fast links or
many GPUs, where it takes its tree (from 4 GPUs at 1 TB/s, 10 at 450 GB/s, 34 at
200 GB/s, about 650 at 100 GB/s; some MiB per GPU and up). An ``algo`` that leaves the ring
out is refused by the models, and so is a time where the tuner, given ``algo`` and
``proto``, would run another of them (a ``proto`` of LL128 alone can make it take a tree
on small sizes; the run's ``Result.params`` says what ran).

Time: after the protocol's launch cost, the larger of the ring's 2(p-1) steps
(reduce_scatter and all_gather: p-1), each the protocol's step latency or alpha,
whichever is more (NCCL measured its step latencies end to end), with the wire bytes at
beta and the first slice's write beyond its wire time, and a channel's data at its
threads' pace (the protocol's rate per channel); then the reductions at gamma (the
launch and the steps with the run's extra costs, as the run counts them). Broadcast and
reduce are a chain's pipeline (:func:`_chain_estimate`). Traffic is exact
for a run of the ring: the payload it moves (protocol framing counts only on the links);
a traffic query knows no beta, so with ``algo="auto"`` it gives the ring's wherever the
tuner would run it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from typing import Any

import numpy as np

from simcoll.algorithms.nccl.channels import channel_counts
from simcoll.algorithms.nccl.machine import Machine, describe
from simcoll.algorithms.nccl.protocols import PROTOCOL, Protocol, channel_rate, one_step_slices
from simcoll.algorithms.nccl.rings import ring_slices
from simcoll.algorithms.nccl.tune_model import comm_channels
from simcoll.algorithms.nccl.tuner import choose
from simcoll.algorithms.params import named_arguments
from simcoll.buffers import VirtualBuffer, block_bytes
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.errors import InvalidInputError
from simcoll.topology.builders import switch

__all__ = ["model", "searched_switch", "ring_all_reduce_traffic", "ring_reduce_scatter_traffic",
           "ring_all_gather_traffic", "chain_traffic", "p2p_traffic"]


def _ring_estimate(collective: str, steps: int, volume: float, reduced: float,
                   p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                   algo: str, proto: str, channels: int, arch: str, intra: str,
                   tuner: str, itemsize: int, launch_overhead: float = 0.0,
                   step_latency_scale: float = 1.0) -> float:
    """Launch + the larger of (the steps + what the threads take to write the first
    slice of a rank's own data beyond its wire bytes' time, ``rings.Sender.send``'s
    ``origin``) and (the busiest channel's share of the data, NCCL's cut being unequal,
    at the protocol's rate per channel:
    its threads' pace, which holds that first write and which the steps' latencies then
    overlap), + reductions; nothing for one rank or an empty buffer, which NCCL
    discards. The steps: a step moves every channel's block, T = its wire bytes x beta
    (the channels share the link; each slice in whole units of its protocol, on the
    channels NCCL's cut gives, :func:`~.channels.channel_counts`), cut into slices as
    NCCL's kernel cuts it
    (``rings.ring_slices``), each slice paying L = max(alpha, NCCL's step latency) (see
    ``rings.Sender``); a slice's latency overlaps the next slice's transfer, so a step
    takes max(T, f T + L), f the first slice's share of the block, and the last one
    T + L: (steps - 1) max(T, f T + L) + T + L, which is steps (T + L) for one slice a
    block. Where NCCL's cut gives the channels unequal blocks, they fall out of step and
    one channel's latency overlaps another's transfer: the steps are then followed
    slice by slice on one link (:func:`_ring_link`) up to
    :data:`_RING_LINK_MESSAGES` messages."""
    if p == 1 or nbytes == 0:
        return 0.0
    searched = searched_switch(p, beta, arch, intra)   # as the run's tuner sees it
    if collective == "all_to_all":
        proto = choose(searched, collective, -(-nbytes // p), algo="p2p", proto=proto,
                       channels=channels, tuner=tuner).proto
        paced = origin = 0.0
        share = 1.0
        wire: float = PROTOCOL[proto].wire(int(volume * nbytes))
        sliced: list[list[float]] = []
    else:
        # the tuner reasons on the whole output of an all_gather, as the run's does
        tuned = nbytes * p if collective == "all_gather" else nbytes
        choice = choose(searched, collective, tuned, algo="ring", proto=proto,
                        channels=channels, tuner=tuner)
        proto, c = choice.proto, choice.channels
        # NCCL's cut over its channels, in bytes of a block (a channel's share of every
        # rank's block; an all_reduce's channel cuts its part into p blocks)
        blocks = [n * itemsize / (p if collective == "all_reduce" else 1)
                  for n in _channel_counts(searched, collective, p, nbytes, itemsize,
                                           proto, c)]
        rate = _rate(searched, proto, c, len(blocks))
        own = max(blocks)     # the busiest channel's block
        # the first slice as NCCL's kernel cuts a block (rings.ring_slices): a full one,
        # or of a block under one chunk about half of it with Simple, all of it else
        per, halves = PROTOCOL[proto].slice_bytes, 2 if proto == "Simple" else 1
        first = per if own >= per * halves else min(own, max(own / halves, per / 32))
        share = first / own   # of a block, its first slice
        # the busiest channel's data: of an all_gather a rank's part, else of its input
        paced = volume * own * (1 if collective == "all_gather" else p) / rate
        origin = _write_beyond_wire(PROTOCOL[proto], first, rate, beta)
        # each slice framed on its own (an LL128 warp writes 2 KiB however little is
        # left), each channel's block in full slices of one step, then the rest, as the
        # run cuts it (rings.chunks_then_rest); Simple's bytes as they are
        framed = PROTOCOL[proto]
        wire = framed.wire(int(volume * nbytes)) if framed.line_data == framed.line_bytes \
            else steps * sum(full * framed.wire(per) + framed.wire(math.ceil(rest))
                             for full, rest in (divmod(block, per) for block in blocks))
        # where NCCL's cut gives the channels unequal blocks, each channel's slices (as
        # the run cuts a block, rings.ring_slices) and their time alone on a link
        uneven = len(set(blocks)) > 1 and steps * len(blocks) * max(
            1.0, 2 * max(blocks) / per) <= _RING_LINK_MESSAGES
        sliced = [[framed.wire(piece.nbytes) * beta for piece in ring_slices(
            VirtualBuffer.of(round(block / itemsize), np.dtype(f"V{itemsize}")), framed)]
            for block in blocks] if uneven else []
    protocol = dataclasses.replace(PROTOCOL[proto], launch=launch_overhead,
                                   step_scale=step_latency_scale)
    link = "nvlink" if intra == "auto" else intra
    latency = max(alpha, protocol.hop("ring", link))
    step = wire * beta / steps if steps else 0.0
    stepped = (steps - 1) * max(step, step * share + latency) + step + latency \
        if steps else 0.0
    if sliced:
        stepped = _ring_link(sliced, steps, latency, protocol.window)
    # the pace already holds the first slice's write
    return protocol.base("ring") + max(stepped + origin, paced) + reduced * nbytes * gamma


_RING_LINK_MESSAGES = 20_000
"""Messages of a channel's connection, over every channel, up to which the ring's
estimate follows unequal channels slice by slice (:func:`_ring_link`)."""


def _ring_link(sliced: list[list[float]], steps: int, latency: float, window: int) -> float:
    """When the last slice of a ring's ``steps`` steps has crossed one rank's link,
    channel c moving a block a step in slices that take ``sliced[c]`` seconds alone on
    the link. Every rank does the same at once, so one link stands for all: a channel's
    slice j of step k is handed to the connection once the one of step k - 1 has
    arrived (from the left, as this rank's own arrives on the right) and a FIFO slot is
    free (``window`` slices in flight), its bytes move after the ``latency`` and once
    the slice ahead has arrived (``rings.Sender``), and the channels' slices moving at
    once share the link fairly."""
    if not all(math.isfinite(t) for slices in sliced for t in slices) \
            or not math.isfinite(latency):
        return math.inf   # constants past a double's range (simcoll.cost names them)
    counts = [len(slices) for slices in sliced]
    ends: list[list[float]] = [[] for _ in sliced]

    def start(c: int) -> float:
        """When channel c's next slice may move."""
        i, done = len(ends[c]), ends[c]
        if i == steps * counts[c]:
            return math.inf
        handed = done[i - counts[c]] if i >= counts[c] else 0.0
        if i >= window:
            handed = max(handed, done[i - window])
        return max(handed + latency, done[i - 1] if i else 0.0)

    starts = [start(c) for c in range(len(sliced))]
    moving: dict[int, float] = {}
    now = 0.0
    while moving or min(starts) < math.inf:
        for c, at in enumerate(starts):
            if c not in moving and at <= now:
                moving[c] = sliced[c][len(ends[c]) % counts[c]]
        if not moving:
            now = min(starts)
            continue
        share = len(moving)
        step = min(moving.values()) * share
        waiting = [at for c, at in enumerate(starts) if c not in moving]
        if waiting and min(waiting) - now < step:
            step = min(waiting) - now
        now += step
        for c in list(moving):
            moving[c] -= step / share
            if moving[c] <= 1e-12 * sliced[c][len(ends[c]) % counts[c]]:
                del moving[c]
                ends[c].append(now)
                starts[c] = start(c)
    return max(done[-1] for done in ends if done)


def _rate(searched: Machine, proto: str, channels: int, running: int) -> float:
    """Bytes per second a channel's threads move (``Protocol.rate``, as a run on the
    reference switch takes it) where ``running`` of the tuner's ``channels`` carry
    data (LL's cap on all of them shared by those)."""
    share = searched.graph_channels / comm_channels(searched) if searched.channels else 1.0
    return channel_rate(proto, "ring", searched.arch, 1, running if proto == "LL" else channels,
                        searched.cpu, share)


def _channel_counts(searched: Machine, collective: str, p: int, nbytes: int, itemsize: int,
                    proto: str, channels: int) -> list[int]:
    """NCCL's cut of a collective of ``nbytes`` a rank over its channels, as the run
    makes it (:func:`~.channels.channel_counts`, the communicator's channels those of
    the reference switch's search): elements per channel that carries some, of a
    rank's block for reduce_scatter, of its buffer otherwise."""
    count = nbytes // itemsize
    if collective == "reduce_scatter":
        count = -(-count // p)
    return channel_counts(collective, count, itemsize, proto, p, channels,
                          max(channels, comm_channels(searched)))


def _write_beyond_wire(protocol: Protocol, first: float, rate: float, beta: float) -> float:
    """What a channel's threads take to write a first slice of ``first`` bytes beyond its
    wire bytes' time at beta."""
    return max(0.0, first / rate - protocol.wire(int(first)) * beta)


_SEARCHED_GPUS = 8
"""GPUs of the switch NCCL's search is run on for :func:`searched_switch`."""


def searched_switch(p: int, beta: float, arch: str = "auto",
                    intra: str = "auto") -> Machine:
    """What NCCL's search and tuner make of the reference switch of ``p`` GPUs and links
    of 1/beta: the search run on a switch of at most :data:`_SEARCHED_GPUS` GPUs, whose
    channels and speeds do not depend on the GPU count (checked for 2 to 100 GPUs), so a
    query costs the same at any ``p``; beta = 0 is the limit of ever faster links. The
    ``arch`` and ``intra`` a run is given change what its tuner sees, and so here."""
    gpus = min(p, _SEARCHED_GPUS)
    searched = _described_switch(gpus, 1 / beta if beta > 0 else _FASTEST, arch)
    searched = dataclasses.replace(searched, nranks=p, smallest_node=p)
    return searched if intra == "auto" else dataclasses.replace(searched, intra=intra)


_FASTEST = 1e300
"""Bytes per second standing for links without a per-byte cost (beta = 0)."""


@functools.lru_cache(maxsize=64)
def _described_switch(gpus: int, bandwidth: float, arch: str) -> Machine:
    return describe(switch(gpus, bandwidth=bandwidth), tuple(range(gpus)), arch)


_ROUNDS_LOOPED = 4096
"""Rounds of a chain estimate taken one by one; the even rounds past them (a whole step
on every channel) are taken at once, so a query answers in the same time at any size."""


def _chain_estimate(collective: str, p: int, nbytes: int, alpha: float, beta: float,
                    gamma: float, *, algo: str, proto: str, channels: int, arch: str,
                    intra: str, tuner: str, launch_overhead: float = 0.0,
                    step_latency_scale: float = 1.0) -> float:
    """NCCL's broadcast or reduce chain on the reference network, an estimate.

    NCCL cuts the n bytes over c channels (:func:`~.channels.channel_counts`, with what
    NCCL's search and tuner give the reference switch), each part into pieces of one
    step (full steps of s bytes, then the rest: :func:`~.rings.chunks_then_rest`),
    pipelined along the p-1 hops, the channels' pieces sharing each link. The channels'
    first pieces arrive at the chain's end by A_0 (:func:`_first_pieces`), each leaving
    once its threads have written it beyond its wire bytes' time (``rings.Sender.send``'s
    ``origin``), each hop L = max(alpha, step latency), then the pieces on it sharing
    the link fairly, then their reductions the GPU's rate on the way (reduce; gamma a
    byte): on an even cut (p-1) L + (p-1) c wire(s) beta + (p-2) c s gamma after the
    write; a smaller piece gets ahead and, once ahead by its whole transfer, out of the
    others' way. The largest part's k-th piece arrives I_k after its (k-1)-th, at A_k =
    A_(k-1) + I_k, and the other channels' k-th pieces with it, or before it where they
    are smaller (the last link shared fairly). I_k = max((L + W_k) / window, W_k, R_k,
    P_k) is the time between
    pieces k - 1 and k of the largest part at a hop: W_k the wire time of every
    channel's k-th piece, R_k a GPU's time to reduce them (0 for broadcast; in I_k only
    where GPUs on the way reduce, from 3 GPUs on), P_k the largest k-th piece at a
    channel's pace (the protocol's rate per channel), or a hop over the connection's
    window of pieces in flight, whose hops overlap. The root reduces the pieces as they
    arrive, one after the other (a piece's transfer overlapping the reduction of the one
    ahead; the GPU's rate is busy as long as any piece waits, so the last one is reduced
    at the same time whether the root shares its rate fairly or takes the pieces in
    turn): launch + when the last is reduced, A_(K-1) for a broadcast, K the largest
    part's pieces. Nothing for one rank or an empty buffer,
    which NCCL discards."""
    if p == 1 or nbytes == 0:
        return 0.0
    searched = searched_switch(p, beta, arch, intra)
    choice = choose(searched, collective, nbytes, algo="ring", proto=proto,
                    channels=channels, tuner=tuner)
    protocol = dataclasses.replace(one_step_slices(PROTOCOL[choice.proto]),
                                   launch=launch_overhead, step_scale=step_latency_scale)
    # NCCL's cut over its channels (in bytes: a cell holds whole elements)
    counts = _channel_counts(searched, collective, p, nbytes, 1, choice.proto,
                             choice.channels)
    step = protocol.slice_bytes   # each channel's part: full steps, then the rest
    full, rest = [n // step for n in counts], [n % step for n in counts]
    lengths = [f + (r > 0) for f, r in zip(full, rest)]

    def pieces(k: int) -> list[int]:
        """Every channel's k-th piece, of the channels that have one."""
        return [step if k < f else r for f, r, n in zip(full, rest, lengths) if n > k]

    rate = _rate(searched, choice.proto, choice.channels, len(counts))
    link = "nvlink" if intra == "auto" else intra
    latency = max(alpha, protocol.hop("ring", link))
    reduces = collective == "reduce"

    def wire(piece: int) -> float:
        return protocol.wire(piece) * beta

    def reduction(piece: int) -> float:
        """A GPU's time to reduce ``piece`` bytes (0 for broadcast)."""
        return piece * gamma if reduces else 0.0

    def interval(moving: list[int]) -> float:
        """The time between the largest part's pieces k - 1 and k at a hop, ``moving``
        every channel's k-th piece: the link's time for them, their reductions at a GPU
        on the way (none on 2 GPUs: the root's queue after), a channel's pace, or a hop
        over the connection's window of pieces in flight, whose hops overlap."""
        link_time = sum(map(wire, moving))
        return max((latency + link_time) / protocol.window, link_time,
                   reduction(sum(moving)) if p > 2 else 0.0, max(moving) / rate)

    firsts = pieces(0)
    # the root reduces each piece as it arrives, once the one before it is reduced: a
    # round's pieces all arrive after the round before's (I_k >= W_k)
    reduced = 0.0
    for at, work in sorted(_first_pieces(
            [wire(s) for s in firsts], p - 1, latency, list(map(reduction, firsts)),
            [_write_beyond_wire(protocol, s, rate, beta) for s in firsts])):
        reduced, arrived = max(reduced, at) + work, at
    k, rounds = 1, max(lengths)
    while k < rounds:
        # rounds k .. even - 1: a whole step on every channel still moving (a channel of
        # a cell or two, which NCCL's cut may add, has ended by now)
        even = min(f for f, n in zip(full, lengths) if n > k) if k >= _ROUNDS_LOOPED else 0
        if even > k:
            # the rest of the even rounds at once: arrivals I apart, each taking R to
            # reduce after the one before, so the last is reduced at
            # max(reduced + m R, A_1 + m R, A_m + R)
            m, moving = even - k, pieces(k)
            gap, work = interval(moving), reduction(sum(moving))
            reduced = max(reduced + m * work, arrived + gap + m * work,
                          arrived + m * gap + work)
            arrived += m * gap
            k = even
            if not math.isfinite(arrived):
                return math.inf
            continue
        moving = pieces(k)
        k += 1
        arrived += interval(moving)
        if not math.isfinite(arrived):
            return math.inf   # constants past a double's range (simcoll.cost names them)
        if moving.count(moving[0]) == len(moving):
            reduced = max(reduced, arrived) + reduction(sum(moving))
            continue
        # pieces that differ share the last link fairly: the smaller arrive first
        ends = _shared_link([0.0] * len(moving), list(map(wire, moving)), [1] * len(moving))
        last = max(ends)
        for end, piece in sorted(zip(ends, moving)):
            reduced = max(reduced, arrived + (end - last)) + reduction(piece)
    return protocol.base("ring") + reduced


def _first_pieces(wires: list[float], hops: int, latency: float, reductions: list[float],
                  starts: list[float]) -> list[tuple[float, float]]:
    """When pieces that leave the chain's start at ``starts[i]``, each taking
    ``wires[i]`` seconds alone on a link and ``reductions[i]`` alone on a GPU's
    reduction rate, have crossed ``hops`` hops, each hop a ``latency``, then the link
    shared fairly by the pieces on it (as the flow models share it), then, but at the
    chain's end, the reduction shared as fairly (a chain's hops use links of their
    own): for each kind of piece, when it arrives at the end and what reducing those
    there takes. Identical pieces stay in step: each hop takes the latency and all of
    them. Pieces that differ go hop by hop while they share links; once no two overlap
    and none is behind a larger one (which never catches up), each crosses the rest
    alone, or with those identical to it."""
    if not all(map(math.isfinite, [*wires, *reductions, *starts, latency])):
        return [(math.inf, 0.0)]   # constants past a double's range (simcoll.cost names them)
    kinds = Counter(zip(starts, wires, reductions))
    alike = list(kinds.values())
    begin, work, reduce = (list(column) for column in zip(*kinds))
    for hop in range(hops):
        ends = _shared_link([b + latency for b in begin], work, alike)
        if hop < hops - 1:
            ends = _shared_link(ends, reduce, alike)
        order = sorted(range(len(alike)), key=lambda i: (begin[i], work[i]))
        apart = all(ends[order[k]] <= begin[order[k + 1]] + latency
                    and work[order[k]] <= work[order[k + 1]]
                    for k in range(len(order) - 1))
        begin = ends
        if apart:
            left = hops - hop - 1   # each with its reduction, but the last
            begin = [b + left * (latency + n * w) + max(left - 1, 0) * n * r
                     for b, w, r, n in zip(begin, work, reduce, alike)]
            break
    return [(b, n * r) for b, r, n in zip(begin, reduce, alike)]


def _shared_link(arrivals: list[float], works: list[float], alike: list[int]) -> list[float]:
    """When each of jobs arriving at ``arrivals`` and taking ``works`` seconds alone
    ends on a link shared fairly among the jobs on it (processor sharing), job i
    standing for ``alike[i]`` identical ones."""
    pending = sorted(range(len(works)), key=lambda i: arrivals[i], reverse=True)
    active: dict[int, float] = {}
    ends = list(arrivals)   # a job of no work ends as it arrives
    now = 0.0
    while pending or active:
        if not active:
            now = max(now, arrivals[pending[-1]])
        while pending and arrivals[pending[-1]] <= now:
            job = pending.pop()
            if works[job] > 0:
                active[job] = works[job]
        if not active:
            continue
        share = sum(alike[job] for job in active)
        step = min(active.values()) * share
        if pending:
            step = min(step, arrivals[pending[-1]] - now)
        now += step
        for job in list(active):
            active[job] -= step / share
            if active[job] <= 1e-12 * works[job]:
                ends[job] = now
                del active[job]
    return ends


def ring_all_reduce_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """Rank r sends every block but its own and its successor's (rings on one node are
    rotations of rank order, so r's successor is r + 1 on every channel)."""
    b = block_bytes(nbytes, p, itemsize)
    sent = 2 * int(b.sum()) - b - np.roll(b, -1)
    return gpu_traffic(sent, np.roll(sent, 1))


def ring_reduce_scatter_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """Rank r sends every block but its own and its successor's... until the last step:
    every block but its own; it receives every block but its predecessor's."""
    b = block_bytes(nbytes, p, itemsize)
    total = int(b.sum())
    return gpu_traffic(total - b, total - np.roll(b, 1))


def ring_all_gather_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    each = np.full(p, (p - 1) * (nbytes // itemsize) * itemsize, dtype=np.int64)
    return gpu_traffic(each, each.copy())


def chain_traffic(towards_root: bool) -> Any:
    def traffic(p: int, nbytes: int, itemsize: int, *, root: int) -> Traffic:
        """Along the chain every rank but its last sends n and every rank but its first
        receives n (the chain ends at the root for reduce, starts there for broadcast)."""
        n = (nbytes // itemsize) * itemsize
        sent, received = np.full(p, n, dtype=np.int64), np.full(p, n, dtype=np.int64)
        first, last = ((root + 1) % p, root) if towards_root else (root, (root - 1) % p)
        sent[last], received[first] = 0, 0
        return gpu_traffic(sent, received)
    return traffic


def p2p_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    """Rank r sends every block but its own and receives block r from every other rank."""
    b = block_bytes(nbytes, p, itemsize)
    return gpu_traffic(np.full(p, int(b.sum()), dtype=np.int64) - b, (p - 1) * b)


def _modelled(collective: str, algo: str) -> None:
    """Refuse an ``algo`` that leaves out what the cost model describes: NCCL's ring (its
    point-to-point sends for all_to_all)."""
    ring = "p2p" if collective == "all_to_all" else "ring"
    if algo != "auto" and ring not in algo.split(","):
        raise InvalidInputError(f"simcoll.cost's model of {collective}/nccl is NCCL's "
                                f"{ring} on the reference network; algo={algo!r} leaves it "
                                f"out (to check a run whose tuner chose another algo, run "
                                f"it with algo={ring!r})")


_ESTIMATE_KEYS = ("algo", "proto", "channels", "arch", "intra", "tuner", "launch_overhead",
                 "step_latency_scale")


def _tuned_to_ring(collective: str, p: int, nbytes: int, beta: float, kw: Any) -> None:
    """Refuse a time where NCCL's tuner, on the reference network (as the run's search
    sees it: :func:`searched_switch`) and among the algorithms ``algo`` allows, would run
    another algorithm than the ring the model describes: only all_reduce has another
    there (its tree; one node, no NVLS switch, no SHARP, so no NVLS, CollNet or PAT)."""
    if collective != "all_reduce" or p == 1 or nbytes == 0 or kw["algo"] == "ring":
        return
    choice = choose(searched_switch(p, beta, kw["arch"], kw["intra"]), collective, nbytes,
                    algo=kw["algo"], proto=kw["proto"], channels=kw["channels"],
                    tuner=kw["tuner"])
    if choice.algo != "ring":
        raise InvalidInputError(
            f"on the reference network of {p} GPUs with beta={beta:g} s/B, NCCL's tuner "
            f"runs {choice.algo} ({choice.proto}) for {collective} of {nbytes} B "
            f"(algo={kw['algo']!r}, proto={kw['proto']!r}); simcoll.cost's model of "
            f"{collective}/nccl is NCCL's ring: give algo='ring' for its estimate, or "
            f"simulate the run")


def model(collective: str, steps: Any, volume: Any, reduced: Any, traffic: Any) -> CostModel:
    """The cost model of ``collective``/nccl: the chain's estimate for broadcast and
    reduce, else the ring's of ``steps(p)`` steps moving ``volume(p)`` times the buffer
    and reducing ``reduced(p)`` times it; ``traffic``, the ring's (or chain's) bytes."""
    def moved(p: int, nbytes: int, itemsize: int, **kw: Any) -> Traffic:
        _modelled(collective, kw["algo"])
        return traffic(p, nbytes, itemsize, **named_arguments(traffic, kw))

    def time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, **kw: Any) -> float:
        _modelled(collective, kw["algo"])
        _tuned_to_ring(collective, p, nbytes, beta, kw)
        options = {k: kw[k] for k in _ESTIMATE_KEYS}
        if collective in ("broadcast", "reduce"):
            return _chain_estimate(collective, p, nbytes, alpha, beta, gamma, **options)
        return _ring_estimate(collective, steps(p), volume(p), reduced(p), p, nbytes, alpha,
                              beta, gamma, **options, itemsize=kw["itemsize"])
    time.__doc__ = (_chain_estimate if collective in ("broadcast", "reduce")
                    else _ring_estimate).__doc__
    moved.__doc__ = traffic.__doc__
    return CostModel(time=time, traffic=moved, exact=lambda *a, **k: False)
