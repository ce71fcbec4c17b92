"""NCCL's tuner: the algorithm, protocol and channel count NCCL would pick.

NCCL predicts each (algorithm, protocol) pair's time as latency + bytes / bandwidth from
a few constants and its topology's figures (``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``
in ``src/graph/tuning.cc``: :mod:`~simcoll.algorithms.nccl.tune_model` redoes that
arithmetic) and runs the fastest; it then lowers the channel count for small sizes
(``topoGetAlgoInfo`` in ``src/enqueue.cc``). This module makes that choice on a
:class:`~simcoll.algorithms.nccl.machine.Machine`, among what NCCL runs for the
collective, op and type (:mod:`~simcoll.algorithms.nccl.support`), with NCCL 2.30.7's
rules or, given ``tuner="2.26.2"``, 2.26.2's (see
:data:`~simcoll.algorithms.nccl.constants.TUNERS`). Its predictions only choose: what a
choice costs is then simulated, message by message.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simcoll.algorithms.nccl import p2p
from simcoll.algorithms.nccl.constants import (
    COLLNET_THREAD_THRESHOLD,
    COLLNET_THREADS,
    MAX_CHANNELS,
    MAX_THREADS,
    NCCL_VERSION,
    PCI_BW,
    PROTOCOLS,
    SLOW_RING_SIMPLE_THREADS,
    THREAD_THRESHOLD,
    TUNERS,
)
from simcoll.algorithms.nccl.machine import Machine
from simcoll.algorithms.nccl.search import NVLS_ARITY
from simcoll.algorithms.nccl.support import (
    ALGORITHMS,
    FP8_RING_PENALTY,
    NAMES,
    NCCL_ORDER,
    SIMPLE_ONLY,
)
from simcoll.algorithms.nccl.tune_model import (
    collnet_graphs_of,
    max_channels,
    nvls_graph_of,
    nvls_searched,
    predict,
)
from simcoll.algorithms.params import Choice as OneOf
from simcoll.algorithms.params import Int, Names
from simcoll.errors import InvalidInputError

__all__ = ["Choice", "candidates", "choose", "trim_channels"]


@dataclass(frozen=True)
class Choice:
    """What runs: ``algo`` with ``proto`` over ``channels`` channels, and NCCL's own
    prediction of its time (seconds)."""

    algo: str
    proto: str
    channels: int
    predicted: float


def candidates(machine: Machine, collective: str, collnet: int = 0,
               averages: bool = False, nvls_ok: bool = True,
               sharp_ok: bool = True, tuner: str = NCCL_VERSION) -> tuple[str, ...]:
    """The algorithms NCCL could run for ``collective`` on this machine. ``collnet`` is
    NCCL_COLLNET_ENABLE: on a SHARP fabric it enables CollNet Direct and Chain and lets
    NVLS run across nodes, which NCCL disables without it (``ncclTopoTuneModel``);
    CollNet Direct also needs NVSwitch (:attr:`Machine.nvswitch`) and at most 8 GPUs per node
    (``NCCL_MAX_DIRECT_ARITY`` + 1), as Chain does in 2.30.7 (2.26.2 runs Chain on any
    node: ``updateCollCostTable`` in its enqueue.cc), which runs all_reduce only. NVLS's
    and CollNet Direct's reduce_scatter and all_gather across nodes need a head per GPU
    (tuning.cc: "AllGather/ReduceScatter requires 1:1 GPU:NIC"): NCCL's heads are the
    NVLS graph's where NVLS is supported, else (and always in 2.26.2) the CollNet Direct
    graph's (one per NIC; ``collNetHeadsNum``, src/transport/coll_net.cc); NCCL 2.26.2
    runs NVLS's across nodes not at all, and neither release runs them on more than 32
    GPUs of a node (``NCCL_MAX_NVLS_ARITY``; 2.26.2: of the communicator). PAT runs
    reduce_scatter and all_gather with one GPU per node (``ncclPatEnable``), but not a
    reduce_scatter that ``averages`` (op=avg: NCCL's ``topoGetAlgoInfo`` leaves PAT out
    of scaled reductions). NVLS and NVLS-tree need every node to hold two GPUs or more
    (:attr:`Machine.lone_gpu_node`); on nodes of different sizes NVLS-tree runs with as
    many heads as the smallest node has GPUs, and NVLS across nodes and CollNet do not
    run (:attr:`Machine.uneven_nodes`: no SHARP trees are found there). Nor does NVLS
    where NCCL's NVLS graph has no channel (:func:`~.tune_model.nvls_graph_of`; NCCL then turns NVLS
    off, ``nvlsSupport = 0`` in init.cc), nor where its switches do not compute the
    reduction (``nvls_ok`` false: see :func:`~.support.nvls_reduces`). Without a reduction SHARP
    computes (``sharp_ok`` false: see :func:`~.support.sharp_reduces`) NCCL runs as if
    ``collnet`` were 0."""
    across = bool(collnet) and machine.sharp and sharp_ok
    supported = _nvls_supported(machine)
    gathers = collective in ("reduce_scatter", "all_gather")
    heads_ok = not (gathers and across) or _heads(machine, supported, tuner) >= machine.ppn
    collnet_ok = across and machine.ppn <= 8 and heads_ok
    chain_ok = across and heads_ok and (machine.ppn <= 8 or tuner == "2.26.2")
    nvls = nvls_ok and supported and not (gathers and (
        machine.ppn > NVLS_ARITY or tuner == "2.26.2" and machine.nranks > NVLS_ARITY))

    def runs(a: str) -> bool:
        if a == "nvls":
            return nvls and (machine.nnodes == 1 or across and heads_ok and not (
                gathers and tuner == "2.26.2"))
        if a == "nvls_tree":
            return nvls and machine.nnodes > 1
        if a == "collnet_direct":
            return collnet_ok and machine.intra == "nvlink" and machine.nvswitch
        if a == "collnet_chain":
            return chain_ok and collective == "all_reduce"
        if a == "pat":
            return machine.nnodes == machine.nranks > 1 and not (
                averages and collective == "reduce_scatter")
        return True

    return tuple(a for a in ALGORITHMS[collective] if runs(a))


def _collnet_needs(machine: Machine, collnet: int, named: Sequence[str],
                   tuner: str) -> list[str]:
    """What CollNet needs that is missing here (the heads per GPU of reduce_scatter and
    all_gather have a hint of their own; Chain's collectives are refused before)."""
    needs = [] if collnet else ["collnet=1, as NCCL_COLLNET_ENABLE=1 asks"]
    if machine.nnodes == 1:
        needs.append("two nodes or more")
    elif machine.uneven_nodes:
        needs.append("nodes of equal GPU counts")
    elif not machine.sharp:
        needs.append("nodes joined by switches that reduce, InfiniBand SHARP's: e.g. "
                     "dgx_a100(2, sharp=True)")
    if machine.ppn > 8 and ("collnet_direct" in named or tuner != "2.26.2"):
        needs.append("at most 8 GPUs per node")
    if "collnet_direct" in named and not machine.nvswitch:
        needs.append("an NVSwitch inside a node for Direct")
    elif "collnet_direct" in named and machine.intra != "nvlink":
        needs.append(f"NVLink between a node's GPUs for Direct (intra={machine.intra!r} "
                     f"here)")
    return ["CollNet needs " + ", ".join(needs)] if needs else []


def _nvls_supported(machine: Machine) -> bool:
    """NCCL's ``nvlsSupport``: NVLS switches, no node of one GPU, a channel in its NVLS
    graph (whatever the op and type a collective reduces)."""
    return machine.nvls and not machine.lone_gpu_node and nvls_searched(machine)


def _heads(machine: Machine, nvls_supported: bool, tuner: str) -> int:
    """NCCL's CollNet heads per node (``collNetHeadsNum``): 2.30.7's are the NVLS graph's
    where NVLS is supported, else, and always in 2.26.2, the CollNet Direct graph's (0
    without one; ``ncclCollNetSetup`` in src/transport/coll_net.cc)."""
    if nvls_supported and tuner != "2.26.2":
        return nvls_graph_of(machine).channels
    graphs = collnet_graphs_of(machine)
    return 0 if graphs is None else graphs[0].channels


def _trim_collnet_direct(nbytes: int, channels: int, heads: int) -> int:
    """``topoGetAlgoInfo``'s CollNet channel tuning: down to 16, 8, 4, 2, 1 channels in
    turn while the buffer gives a thread of each head of each channel less than its
    threshold, which halves on the way down at 1.5 times each step."""
    threshold, switch, short = COLLNET_THREAD_THRESHOLD, 16, True
    while switch >= 1 and short:
        while True:
            short = nbytes < channels * COLLNET_THREADS * heads * threshold
            if not (short and channels > switch):
                break
            if channels == switch + switch // 2:
                threshold //= 2
            channels -= 1
        switch //= 2
    return channels


def trim_channels(nbytes: int, algo: str, proto: str, channels: int, nranks: int,
                  heads: int = 1, slow_ring: bool = False) -> int:
    """NCCL's channel count for a size: fewer channels while the buffer is too small to
    give every thread of every channel its threshold of bytes (NVLS and PAT keep theirs;
    CollNet Direct counts its ``heads``, its graph's; a ``slow_ring``, whose graph moves at most
    :data:`~.constants.PCI_BW`, runs Simple on
    :data:`~.constants.SLOW_RING_SIMPLE_THREADS` threads a channel)."""
    if algo in ("nvls", "nvls_tree", "pat"):  # PAT: NCCL sets no thread count to trim by
        return channels
    if algo == "collnet_direct":
        return _trim_collnet_direct(nbytes, channels, heads)
    if algo == "collnet_chain":
        while channels >= 2 and nbytes < channels * COLLNET_THREADS * COLLNET_THREAD_THRESHOLD:
            channels -= 1
        return channels
    threshold = THREAD_THRESHOLD[proto] * (nranks if algo == "ring" and proto == "LL" else 1)
    threads = SLOW_RING_SIMPLE_THREADS if slow_ring and (algo, proto) == ("ring", "Simple") \
        else MAX_THREADS[proto]
    while channels >= 2 and nbytes < channels * threads * threshold:
        channels -= 1
    return channels


def _point_to_point(machine: Machine, nbytes: int, algo: str, proto: str, channels: int,
                    tuner: str) -> Choice:
    """An all_to_all's sends and receives of ``nbytes`` each: the parts and protocol
    ``addP2pToPlan`` picks (:mod:`~simcoll.algorithms.nccl.p2p`; ``channels`` fixes the
    parts), not the tuner's model, which NCCL does not consult for them."""
    if algo not in ("auto", "p2p"):
        raise InvalidInputError(f"algo={algo!r} cannot run all_to_all: NCCL runs it as "
                                f"point-to-point sends and receives, algo='p2p'")
    if channels:
        count = channels
    else:
        low, high = p2p.channels_per_peer(machine, max_channels(machine, "ring"))
        count = p2p.parts(machine, nbytes, low, high)
    chosen = p2p.protocol(nbytes, count, proto,
                          network_only=machine.nnodes > 1 and machine.ppn == 1)
    return Choice("p2p", chosen, count,
                  predict(machine, "all_to_all", nbytes * machine.nranks, "p2p", chosen,
                          count, tuner))


def _checked(collective: str, nbytes: int, algo: str, proto: str, channels: int,
             tuner: str, collnet: int, nvls_channels: int
             ) -> tuple[int, str, str, int, int, int]:
    """``nbytes``, ``algo``, ``proto``, ``channels``, ``collnet`` and ``nvls_channels`` in
    canonical form
    (Python ints, NCCL's names), after refusing any argument of :func:`choose` NCCL would
    not take, by name and with what is accepted."""
    OneOf("all_reduce", tuple(ALGORITHMS)).normalize("collective", collective)
    OneOf(NCCL_VERSION, TUNERS).normalize("tuner", tuner)
    p2p_only = collective == "all_to_all"
    # all_to_all's refusal of a collective algorithm says why (_point_to_point)
    return (Int(0, minimum=0).normalize("nbytes", nbytes),
            Names("auto", (*NAMES, "p2p") if p2p_only else NAMES).normalize("algo", algo),
            Names("auto", PROTOCOLS).normalize("proto", proto),
            Int(0, minimum=0, maximum=MAX_CHANNELS).normalize("channels", channels),
            Int(0, minimum=0, maximum=1).normalize("collnet", collnet),
            Int(0, minimum=0, maximum=MAX_CHANNELS).normalize("nvls_channels", nvls_channels))


def choose(machine: Machine, collective: str, nbytes: int, *, algo: str = "auto",
           proto: str = "auto", channels: int = 0, tuner: str = NCCL_VERSION,
           collnet: int = 0, averages: bool = False, nvls_ok: bool = True,
           sharp_ok: bool = True, fp8: bool = False, nvls_channels: int = 0) -> Choice:
    """The pair NCCL predicts fastest, by the tuner of NCCL release ``tuner``.

    ``channels`` is the communicator's count, as NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS
    set it; it fixes the count of rings, trees, PAT and CollNet at every size, where NCCL
    still trims it for small buffers (:func:`trim_channels`). NVLS and NVLS-tree run on
    ``nvls_channels`` (0: NCCL's count); NVLS across nodes on at most ``channels``
    (:func:`~.tune_model.max_channels`). The tuner reasons with
    NCCL_COLLNET_ENABLE set to ``collnet``, for a reduction that ``averages`` or not and
    that NVLS computes or not (``nvls_ok``) and SHARP does or not (``sharp_ok``; see
    :func:`candidates`), of FP8 elements or
    not (``fp8``: a ring on more than 8 ranks counts :data:`~.support.FP8_RING_PENALTY` times its
    time, as NCCL's does). ``nbytes`` is what the tuner reasons on: each rank's buffer,
    the whole output of an all_gather, and for an all_to_all the bytes sent to each peer,
    whose sends and receives NCCL plans without its tuner (:func:`_point_to_point`).

    ``algo`` and ``proto`` narrow the search as NCCL_ALGO and NCCL_PROTO do: "auto", or
    names separated by commas (the canonical form of
    :class:`~simcoll.algorithms.params.Names`). Of several algorithms, those that cannot
    run here are passed over; one named alone must run. With ``proto="auto"`` LL128 is a
    candidate only where NCCL enables it by default (:attr:`Machine.ll128_by_default`:
    not over PCI); a ``proto`` that names it forces it on, as NCCL_PROTO does (and so
    does one that leaves out another protocol with ``^``: NCCL then enables every
    protocol it does not leave out).

    Raises:
        InvalidInputError: an argument NCCL would not take (a collective, algorithm,
            protocol or release it does not know, a negative size, a ``channels`` or
            ``nvls_channels`` beyond 0 - 64, a ``collnet`` other than 0 or 1); the named
            algorithm cannot
            run here, or none of the named ones can.
    """
    nbytes, algo, proto, channels, collnet, nvls_channels = _checked(
        collective, nbytes, algo, proto, channels, tuner, collnet, nvls_channels)
    if collective == "all_to_all" and machine.nranks > 1:
        return _point_to_point(machine, nbytes, algo, proto, channels, tuner)
    algos = candidates(machine, collective, collnet, averages, nvls_ok, sharp_ok, tuner)
    named_protos = None if proto == "auto" else tuple(proto.split(","))
    # NCCL_ALGO takes every algorithm's name; those a collective never runs are passed over
    named = [a for a in algo.split(",") if a in ALGORITHMS[collective]]
    if algo != "auto" and not named:
        listed = algo.split(",")
        raise InvalidInputError(
            f"algo={algo!r}: NCCL never runs {collective} with "
            f"{'it' if len(listed) == 1 else 'any of them'}; it runs {collective} with "
            f"{', '.join(ALGORITHMS[collective])}")
    if machine.nranks == 1:  # nothing to move: NCCL returns at once
        return Choice((algos if algo == "auto" else tuple(named))[0],
                      "Simple" if named_protos is None or "Simple" in named_protos
                      else named_protos[0], channels or 1, 0.0)
    if algo != "auto":
        runnable = tuple(a for a in algos if a in named)
        if not runnable:
            hints = ["NVLS needs the GPUs of each node on one in-network NVSwitch of "
                     f"their own; here {machine.nvls_missing}"] \
                if not machine.nvls and any(a.startswith("nvls") for a in named) else []
            if machine.nvls and machine.nnodes > 1 and "nvls" in named and not (
                    collnet and machine.sharp and not machine.uneven_nodes):
                hints.append("NVLS across nodes needs collnet=1 and a SHARP fabric"
                             + (" joining nodes of equal GPU counts"
                                if machine.uneven_nodes else ""))
            if not sharp_ok and (machine.nnodes > 1 and "nvls" in named
                                 or any(a.startswith("collnet") for a in named)):
                hints.append("SHARP computes sums, averages, min and max of 16-bit, "
                             "32-bit and 64-bit floats and 32-bit and 64-bit integers "
                             "(bfloat16 and 8-bit integers on Hopper's SHARP v3 fabrics "
                             "only), never a product")
            gathers = collective in ("reduce_scatter", "all_gather")
            if gathers and "nvls" in named and machine.nvls:
                if tuner == "2.26.2" and (machine.nnodes > 1 or machine.nranks > NVLS_ARITY):
                    hints.append(f"NCCL 2.26.2 runs NVLS {collective} on one node of at "
                                 f"most {NVLS_ARITY} GPUs only")
                elif machine.ppn > NVLS_ARITY:
                    hints.append(f"NCCL runs NVLS {collective} on at most {NVLS_ARITY} GPUs "
                                 f"of a node")
            if gathers and machine.nnodes > 1 and collnet and machine.sharp \
                    and any(a in ("nvls", "collnet_direct") for a in named):
                heads = _heads(machine, _nvls_supported(machine), tuner)
                if heads < machine.ppn:
                    hints.append(f"across nodes NCCL's NVLS and CollNet Direct run {collective} "
                                 f"with a head per GPU only, and its graph has {heads} for "
                                 f"{machine.ppn:g} GPUs a node")
            if machine.nvls and machine.nnodes == 1 and "nvls_tree" in named:
                hints.append("NVLS-tree runs across nodes only")
            if machine.nvls and machine.nranks > 1 and any(a.startswith("nvls") for a in named):
                if not nvls_ok:
                    hints.append("NCCL's NVLS computes sums of 16-bit, 32-bit and 64-bit "
                                 "floats and 32-bit and 64-bit integers, min and max of "
                                 "the 16-bit floats and the integers, never an average, "
                                 "a product or 8-bit elements")
                elif machine.lone_gpu_node:
                    hints.append("NCCL runs no NVLS where a node holds one GPU")
                elif not nvls_searched(machine):
                    hints.append("NCCL's NVLS search finds no channel here: a GPU's NVLink "
                                 "or a head's NIC is below its slowest speed, or NCCL has "
                                 "no NVLS for this GPU generation")
            if any(a.startswith("collnet") for a in named):
                hints += _collnet_needs(machine, collnet, named, tuner)
            if "pat" in named:
                pat_needs = (["PAT needs one GPU per node"] if machine.nnodes != machine.nranks
                             else []) + (["NCCL leaves PAT out of reduce_scatter's op=avg"]
                                         if averages and collective == "reduce_scatter"
                                         else [])
                hints.append("; ".join(pat_needs))
            raise InvalidInputError(
                f"algo={algo!r} cannot run {collective} on this machine; it can run "
                f"{', '.join(algos)}" + "".join(f" ({hint})" for hint in hints))
        algos = runnable
    protos = named_protos or tuple(p for p in PROTOCOLS
                                   if p != "LL128" or machine.ll128_by_default)
    slow_ring = machine.graph_channels * machine.graph_channel_bw / 1e9 <= PCI_BW
    graphs = collnet_graphs_of(machine) if "collnet_direct" in algos else None
    direct_heads = 1 if graphs is None else graphs[0].channels  # CollNet Direct's graph's
    best: Choice | None = None
    # NCCL walks its algorithms and protocols in enum order and keeps a strictly faster
    # pair (enqueue.cc): on a tie the earlier one, a tree before a ring.
    for a in sorted(algos, key=lambda name: NCCL_ORDER.index(name)):
        for pr in sorted(protos, key=PROTOCOLS.index):
            nc = max_channels(machine, a, tuner, collnet, comm=channels, nvls=nvls_channels)
            t = predict(machine, collective, nbytes, a, pr, nc, tuner)
            if fp8 and a == "ring" and machine.nranks > 8:
                t *= FP8_RING_PENALTY
            if best is None or t < best.predicted:
                best = Choice(a, pr, nc if channels else trim_channels(
                    nbytes, a, pr, nc, machine.nranks, direct_heads, slow_ring), t)
    if best is None or math.isinf(best.predicted):
        few = ""
        if "Simple" not in protos and all(a in SIMPLE_ONLY for a in algos):
            few = (f" ({', '.join(algos)} run{'s' if len(algos) == 1 else ''} Simple only, "
                   f"as in NCCL; give proto='Simple' or 'auto')")
        elif all(a.startswith("nvls") for a in algos):
            if tuner != "2.26.2" and nvls_graph_of(machine).channels < 2:
                few = (" (NCCL's NVLS graph has 1 channel here, one head, and NCCL "
                       "2.30.7 runs NVLS on 2 or more)")
        raise InvalidInputError(f"no NCCL algorithm and protocol can run {collective} with "
                                f"algo={algo!r}, proto={proto!r}, channels={channels} on "
                                f"this machine{few}")
    return best
