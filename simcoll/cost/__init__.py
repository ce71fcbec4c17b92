"""Closed-form alpha-beta-gamma cost models: ask any registered algorithm for its figures.

All formulas are for the single-port alpha-beta reference network
(:func:`simcoll.testing.alpha_beta_network`: ``switch(p, bandwidth=1/beta,
latency=alpha/2)``, every GPU with ``reduce_bandwidth=1/gamma``): a message of n bytes
costs alpha + n beta, each rank sends one and receives one message at full speed at a
time, and reducing n bytes costs n gamma.
``nbytes`` is always each rank's input buffer size, as in ``simulate``; for the
v-collectives it is what ``simulate`` takes as their ``nbytes``: p bytes per rank
(all_gatherv, reduce_scatterv) or the p x p matrix of bytes per pair (all_to_allv), which
the models get as an int64 array (:mod:`simcoll.cost.uneven`).

Each algorithm's model is part of its registration (``register(..., cost=CostModel(...))``
in the module of its family, under ``simcoll/algorithms/``); the functions here find it
there, check and complete the parameters (defaults from the algorithm's parameter specs)
and call it. :func:`lower_bound` holds the bounds every algorithm of a collective obeys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from simcoll.algorithms.params import named_arguments
from simcoll.checks import Count, huge, integer, real, shown
from simcoll.checks import size as checked_size
from simcoll.collectives import collective as get_collective
from simcoll.cost.model import CostModel, Traffic, gpu_traffic, largest_block
from simcoll.cost.uneven import uneven_bounds
from simcoll.errors import (
    InvalidInputError,
    RegistrationError,
    UnknownAlgorithmError,
    message_of,
)
from simcoll.inputs import check_counters, check_root
from simcoll.memory import memory_limit
from simcoll.uneven import as_splits, check_nbytes, first_partial, whole_number

if TYPE_CHECKING:
    from simcoll.algorithms.registry import AlgorithmSpec

__all__ = ["CostModel", "Traffic", "Bounds", "gpu_traffic", "predict", "traffic", "check_constants",
           "is_exact", "lower_bound", "models"]


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on a collective's time (Chan et al. 2007), in seconds.

    Attributes:
        latency: ceil(log2 p) alpha, the latency bound of single-port algorithms (one
            message in flight per rank at a time), where any message is needed (a
            scatter of fewer elements than ranks: ceil(log2 count) alpha).
        bandwidth: bytes a rank must move, times beta.
        computation: bytes a reduction engine (a rank's or a server host's) must reduce,
            times gamma.
        message: alpha if any message is needed (p > 1 and a rank must move bytes, or a
            barrier), else 0.
        total: the bound that holds for every algorithm (a property: see it).
    """

    latency: float
    bandwidth: float
    computation: float
    message: float

    @property
    def total(self) -> float:
        """A bound that holds on the reference network for every algorithm.

        A message drains only after its latency, and a link moves at most 1/beta bytes/s,
        so no collective ends before ``message + bandwidth``, nor before its reductions.
        ``latency`` is left out: the network lets a rank overlap the latencies of
        concurrent messages, so it binds only single-port algorithms (direct, naive and
        parameter-server algorithms end below it, and so do binomial gather and reduce
        where p is not a power of two: children send to the root at once, a p = 3
        gather of one element in about alpha, not 2 alpha).
        """
        return max(self.message + self.bandwidth, self.computation)


def models() -> list[tuple[str, str]]:
    """Every ``(collective, algorithm)`` pair with a cost model (every registered one)."""
    from simcoll.algorithms.registry import algorithms

    return algorithms()


def _entry(collective: str, algorithm: str) -> AlgorithmSpec:
    # Imported here, not above: the registry imports simcoll.cost.model, so this package
    # must load without it.
    from simcoll.algorithms.registry import get_algorithm

    try:
        return get_algorithm(collective, algorithm)
    except UnknownAlgorithmError:
        known = ", ".join(f"{c}/{a}" for c, a in models())
        raise UnknownAlgorithmError(
            f"no cost model for {collective}/{algorithm}; known: {known}") from None


_PER_RANK_BYTES = 512
"""What a query holds per rank, at most: a few int64 and float64 arrays of p entries
(bytes sent and received, the models' per-rank terms), and double_binary_tree's two trees
as Python lists, about 430 bytes a rank. Past the machine's memory, a query was killed by
the system instead of refused."""


def _sizes(p: Any, nbytes: Any, collective: str | None = None) -> tuple[int, Any]:
    """(p, nbytes) checked: an int (a whole number such as 16, 16.0 or a 0-d array of
    one, or a size string such as ``"16MiB"``), or for a v-collective a read-only int64
    array whose traffic fits the int64 counters (as ``simulate`` checks)."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)) or p < 1:
        raise InvalidInputError(f"p={p!r} is not accepted; use an integer >= 1")
    p = int(p)   # a numpy integer's product below wrapped (512 x 2^55 as 0)
    found = memory_limit()
    if found is not None and _PER_RANK_BYTES * p > found[0]:
        need = _PER_RANK_BYTES * p
        gib = shown(need // 2**30) if huge(need) else f"{need / 2**30:.1f}"
        raise InvalidInputError(f"p={shown(p)} ranks: a query's arrays of one entry per rank "
                                f"would need about {gib} GiB, more than {found[1]} "
                                f"{found[0] / 2**30:.1f} GiB; use fewer ranks")
    coll = None if collective is None else get_collective(collective)
    if coll is not None and coll.uneven is not None:
        sizes = check_nbytes(coll, nbytes, int(p))
        check_counters(max(coll.uneven.inputs(as_splits(sizes))), int(p), largest=True)
        sizes.flags.writeable = False
        return int(p), sizes
    size = checked_size(nbytes, "nbytes") if isinstance(nbytes, str) else whole_number(nbytes)
    if size is None:
        raise InvalidInputError(f"nbytes={nbytes!r} is not accepted; use a whole number "
                                f">= 0 or a size such as '16MiB'")
    if huge(size):
        raise InvalidInputError(f"nbytes={shown(size)} is past the range of floats, in "
                                f"which the models compute; use nbytes < 2^1024 - 2^970 "
                                f"(about 1.8e308)")
    return int(p), size


def _itemsize(itemsize: Any, nbytes: Any) -> int:
    """``itemsize`` checked: an integer >= 1 that divides every size in ``nbytes``."""
    itemsize = integer(itemsize, "itemsize", minimum=1, maximum=2**32,
                       what="bytes per element")
    partial = first_partial(nbytes, itemsize)
    if partial is not None:
        raise InvalidInputError(f"nbytes{partial[0]}={partial[1]} is not a multiple of "
                                f"itemsize={itemsize} (bytes per element: 4, simulate's "
                                f"float32, unless itemsize= says otherwise); give whole "
                                f"elements")
    return itemsize


def _refuse_barrier_bytes(collective: str, nbytes: Any) -> None:
    """Refuse bytes for a barrier, as ``simulate`` does."""
    if collective == "barrier" and nbytes:
        raise InvalidInputError(f"a barrier moves no data, but {nbytes} bytes per rank were "
                                f"given; use nbytes=0")


def _arguments(spec: AlgorithmSpec, p: int, nbytes: Any, itemsize: int,
               params: dict[str, Any]) -> dict[str, Any]:
    """``spec.model_arguments``, after refusing what ``simulate`` refuses for these sizes:
    bytes for a barrier, a given parameter that cuts a buffer into more pieces than a
    rank's buffer has elements (the largest input's, for a v-collective), and what the
    algorithm's ``validate`` refuses, where it does not read the ranks' nodes (a query
    knows no node layout: the model checks those it needs), with the model's machine
    parameter ``hosts`` (0 where it has none)."""
    _refuse_barrier_bytes(spec.collective, nbytes)
    args = spec.model_arguments(p, params)
    uneven = get_collective(spec.collective).uneven
    largest = nbytes if uneven is None else max(uneven.inputs(as_splits(nbytes)))
    count = int(largest) // itemsize
    for name in params:
        if name in spec.params:
            spec.params[name].check_size(name, args[name], count)
    if not spec.validate_reads_nodes:
        spec.run_validate(p, count, args.get("hosts", 0),
                          {name: args[name] for name in spec.params})
    return args


def check_constants(alpha: float, beta: float,
                    gamma: float) -> tuple[float, float, float]:
    """The reference network's constants as floats, each a finite number of seconds >= 0.

    Raises:
        InvalidInputError: naming the constant that is not.
    """
    return (real(alpha, "alpha", what="seconds per message"),
            real(beta, "beta", what="seconds per byte"),
            real(gamma, "gamma", what="seconds per reduced byte"))


def predict(collective: str, algorithm: str, *, p: Count, nbytes: int | ArrayLike, alpha: float,
            beta: float, gamma: float = 0.0, itemsize: int = 4, **params: Any) -> float:
    """Predicted seconds on the alpha-beta reference network.

    Args:
        itemsize: bytes per element (``simulate``'s dtype; 4 for its float32): buffers
            are cut into blocks by elements, so uneven blocks depend on it.
        params: the algorithm's parameters, ``root`` for rooted collectives, and the
            model's machine parameters (``hosts``, ``nodes``, ...); defaults as declared.

    Raises:
        UnknownAlgorithmError: no model for the pair; the message lists the known ones.
        InvalidInputError: a bad p, nbytes, alpha, beta, gamma, itemsize or parameter,
            and a v-collective's sizes whose traffic could overflow int64 counters (as
            ``simulate`` refuses them; a fixed-size collective's time is given for any
            size, where ``simulate`` and :func:`traffic` refuse one whose traffic could
            overflow those counters); constants so large that the time overflows to
            inf or NaN or the model fails where smaller ones give a time; the registered
            model raised (naming what, as ``simulate`` reports a ``validate`` function
            that raises).
        RegistrationError: the registered model returned something that is not a number
            (or a negative or NaN time).
    """
    spec = _entry(collective, algorithm)
    p, nbytes = _sizes(p, nbytes, spec.collective)
    alpha, beta, gamma = check_constants(alpha, beta, gamma)
    itemsize = _itemsize(itemsize, nbytes)
    args = _arguments(spec, p, nbytes, itemsize, params)
    kwargs = {**args, "itemsize": itemsize}
    try:
        seconds = _ask(spec, "time", (p, nbytes, alpha, beta, gamma), kwargs)
    except InvalidInputError as exc:   # the model failed: on its inputs, or on huge times?
        if _finite_when_scaled(spec, p, nbytes, alpha, beta, gamma, kwargs):
            raise _overflow("fails", alpha, beta, gamma) from exc
        raise
    if isinstance(seconds, (bool, np.bool_)) or not isinstance(seconds, (int, float,
                                                                         np.integer,
                                                                         np.floating)):
        raise RegistrationError(f"{spec.collective}/{algorithm}: its cost model's time "
                                f"returned {seconds!r}; return seconds as a number")
    if not math.isfinite(seconds) and _finite_when_scaled(spec, p, nbytes, alpha, beta, gamma,
                                                           kwargs):
        raise _overflow(f"overflows ({float(seconds)!r})", alpha, beta, gamma)
    if not 0 <= seconds < math.inf:
        raise RegistrationError(f"{spec.collective}/{algorithm}: its cost model's time "
                                f"returned {seconds!r}; return a finite number of seconds "
                                f">= 0")
    return float(seconds)


def _finite_when_scaled(spec: AlgorithmSpec, p: int, nbytes: Any, alpha: float, beta: float,
                        gamma: float, kwargs: dict[str, Any]) -> bool:
    """Whether the model's time is finite with the constants scaled down by 2^-600 (an
    exact scale): an infinite or NaN time, or a model that fails, is then the constants'
    overflow, not the model's."""
    tiny = 2.0**-600
    try:
        seconds = _ask(spec, "time", (p, nbytes, alpha * tiny, beta * tiny, gamma * tiny),
                       kwargs)
    except InvalidInputError:
        return False
    return isinstance(seconds, (int, float, np.integer, np.floating)) and \
        bool(0 <= seconds < math.inf)


def _overflow(what: str, alpha: float, beta: float, gamma: float) -> InvalidInputError:
    """The error for constants so large that the predicted time ``what`` (overflows to
    inf or NaN, or fails) where smaller ones give a time."""
    return InvalidInputError(f"the predicted time {what} with alpha={alpha!r}, beta={beta!r}, "
                             f"gamma={gamma!r}: give seconds per message, per byte and per "
                             f"reduced byte (e.g. alpha=5e-6, beta=1e-11)")


def traffic(collective: str, algorithm: str, *, p: Count, nbytes: int | ArrayLike,
            itemsize: int = 4,
            **params: Any) -> Traffic:
    """Bytes each rank sends and receives (exact, for elements of ``itemsize`` bytes).

    ``algorithm="nccl"`` with NCCL's own choice (``algo="auto"``, the default) gives its
    ring's traffic (point-to-point sends for all_to_all): a traffic query has no beta to
    tune with, so where NCCL's tuner takes its tree for a size (on fast links) the run
    moves other bytes; pass ``algo="ring"`` to the run and to this query alike.

    Raises:
        UnknownAlgorithmError, InvalidInputError: as :func:`predict`, any size whose
            traffic could overflow int64 counters, an ``itemsize`` that is not an
            integer >= 1 dividing ``nbytes`` (naming the first entry that it does not),
            and, as ``simulate`` refuses them, bytes for a barrier or a given number of
            pieces (``chunks``, ``buckets``) above the elements of a rank's buffer.
        RegistrationError: the registered model returned something that is not a
            :class:`Traffic`, or one whose counts are not one number per rank (1-D
            arrays of p GPU counts, and of host counts 1-D too).
    """
    spec = _entry(collective, algorithm)
    p, nbytes = _sizes(p, nbytes, spec.collective)
    if isinstance(nbytes, int):  # a v-collective's sizes are checked by _sizes
        check_counters(nbytes, p)
    itemsize = _itemsize(itemsize, nbytes)
    args = _arguments(spec, p, nbytes, itemsize, params)
    moved = _ask(spec, "traffic", (p, nbytes, itemsize), args)
    if not isinstance(moved, Traffic):
        raise RegistrationError(f"{spec.collective}/{algorithm}: its cost model's traffic "
                                f"returned {moved!r}; return a simcoll.cost.Traffic "
                                f"(simcoll.cost.gpu_traffic(sent, received))")
    shapes = {name: _shape(getattr(moved, name))
              for name in ("sent", "received", "host_sent", "host_received")}
    if any(len(shape) != 1 for shape in shapes.values()):
        said = ", ".join(f"{name} of shape {shape}" for name, shape in shapes.items())
        raise RegistrationError(f"{spec.collective}/{algorithm}: its cost model's traffic "
                                f"gave bytes {said}; give one number per rank (1-D arrays "
                                f"of p, and of the hosts)")
    lengths = (len(moved.sent), len(moved.received))
    if lengths != (p, p):
        raise RegistrationError(f"{spec.collective}/{algorithm}: its cost model's traffic "
                                f"gave {lengths[0]} bytes sent and {lengths[1]} received for "
                                f"p={p} ranks; give one of each per rank")
    return moved


def is_exact(collective: str, algorithm: str, *, p: Count, nbytes: int | ArrayLike,
             itemsize: int = 4,
             **params: Any) -> bool:
    """Whether ``predict`` is exact (not an estimate) for these arguments.

    Raises:
        UnknownAlgorithmError, InvalidInputError: as :func:`traffic`.
        RegistrationError: the registered model returned something that is not a bool
            (a ``"no"`` would read as true).
    """
    spec = _entry(collective, algorithm)
    p, nbytes = _sizes(p, nbytes, spec.collective)
    itemsize = _itemsize(itemsize, nbytes)
    args = _arguments(spec, p, nbytes, itemsize, params)
    exact = _ask(spec, "exact", (p, nbytes, itemsize), args)
    if not isinstance(exact, (bool, np.bool_)):
        raise RegistrationError(f"{spec.collective}/{algorithm}: its cost model's exact "
                                f"returned {exact!r}; return True or False")
    return bool(exact)


def _shape(counts: Any) -> tuple[int, ...] | str:
    """The shape of a model's byte counts, or ``"ragged"`` for rows of unequal lengths
    (which numpy refuses to shape)."""
    try:
        return np.shape(counts)
    except ValueError:
        return "ragged"


def _ask(spec: AlgorithmSpec, role: str, positional: tuple[Any, ...],
         args: dict[str, Any]) -> Any:
    """What the function ``role`` (time, traffic or exact) of ``spec``'s cost model
    returns for these arguments (and the keywords of ``args`` it names).

    Raises:
        InvalidInputError: the function raised one (refusing its arguments), or raised
            anything else, named as ``simulate`` names a ``validate`` that raises.
        RegistrationError: it gave what cannot be (bytes that are not whole numbers >= 0
            to :func:`gpu_traffic`), naming the algorithm.
    """
    fn = getattr(spec.cost, role)
    try:
        return fn(*positional, **named_arguments(fn, args))
    except InvalidInputError:
        raise
    except RegistrationError as exc:   # what the model gave cannot be (gpu_traffic's)
        raise RegistrationError(f"{spec.collective}/{spec.name}: its cost model's {role} "
                                f"gave {exc}") from exc
    except Exception as exc:
        raise InvalidInputError(f"{spec.collective}/{spec.name}: its cost model's {role} "
                                f"raised {type(exc).__name__}: {message_of(exc)}") from exc


def lower_bound(collective: str, *, p: Count, nbytes: int | ArrayLike, alpha: float, beta: float,
                gamma: float = 0.0, itemsize: int = 4, hosts: int = 0,
                root: int | None = None) -> Bounds:
    """Latency, bandwidth and computation lower bounds (Chan et al. 2007, table 1).

    With n the per-rank input bytes and L = ceil(log2 p) (a message at most doubles the
    ranks that know something per round), the single-port latency bound is L alpha for every
    collective but a scatter of count = n / itemsize < p elements, whose p - count empty
    blocks need no message: ceil(log2 count) alpha (the root holding one of the count
    non-empty blocks, as below). Bandwidth bounds: all_reduce 2 (p-1)/p n beta (Patarasuk &
    Yuan 2009); reduce_scatter and all_to_all (p-1)/p n beta; scatter (n - b) beta, where b
    is the largest block the root may keep (ceil(count/p) elements of ``itemsize`` bytes, as
    ``np.array_split`` cuts); all_gather and gather (p-1) n beta (each rank receives every
    other rank's n bytes); broadcast and reduce n beta. Computation bounds: the (p-1) n
    bytes that p inputs take to reduce, shared by the p ranks' reduction engines, (p-1)/p n
    gamma, for all_reduce, reduce_scatter and reduce; 0 otherwise.

    Server hosts (``hosts=h``, the network's ``alpha_beta_network(servers=h)``; 0 by
    default) can reduce too: with h of them the computation bound is (p-1) n gamma /
    (p + h), and an all_reduce's rank need only send its n bytes and receive the n of the
    result (a parameter server's workers do just that), so its bandwidth bound is n beta.
    The other bounds count what a rank itself must send or receive, which no host
    changes.

    For p = 1 every bound is 0, and so it is wherever no rank need move a byte (nbytes =
    0, or a scatter of one element, which a root 0 keeps), except a barrier's: L alpha
    latency, alpha message.

    The v-collectives take ``nbytes`` as their models do (bytes per rank or per pair);
    their bounds are in :func:`simcoll.cost.uneven.uneven_bounds` and do not depend on
    ``itemsize``, which must still divide every size, as for the other queries (give
    ``itemsize=1`` for sizes in bytes alone).

    ``root`` (a rooted collective's, as :func:`predict` takes it) is checked but changes
    no bound: each holds for any root.

    Raises:
        InvalidInputError: a bad p, nbytes, alpha, beta, gamma, itemsize, hosts or root
            (a root for a collective without one), or bytes for a barrier.
        UnknownCollectiveError: an unknown collective (an InvalidInputError too).
    """
    collective = get_collective(collective).name   # torch's names too; unknown: refused
    alpha, beta, gamma = check_constants(alpha, beta, gamma)
    hosts = integer(hosts, "hosts", minimum=0, maximum=2**63 - 1, what="server hosts")
    if collective in ("all_gatherv", "reduce_scatterv", "all_to_allv"):
        p, sizes = _sizes(p, nbytes, collective)
        check_root(get_collective(collective), root, p)
        _itemsize(itemsize, sizes)   # the bounds do not depend on it, but sizes must be whole
        steps, most, reduced, needed = uneven_bounds(collective, p, sizes, p + hosts)
        return Bounds(steps * alpha, _seconds(most, beta), _seconds(reduced, gamma),
                      alpha if needed else 0.0)
    assert collective in _BOUNDED, collective   # every collective has bounds
    p, n = _sizes(p, nbytes)
    check_root(get_collective(collective), root, p)
    itemsize = _itemsize(itemsize, n)
    _refuse_barrier_bytes(collective, n)
    if p == 1:
        return Bounds(0.0, 0.0, 0.0, 0.0)
    moved, reduced = _moved_and_reduced(collective, p, n, itemsize)
    if hosts and collective == "all_reduce":
        moved = Fraction(n)
    if not moved and collective != "barrier":  # no rank need move a byte: no message
        return Bounds(0.0, 0.0, 0.0, 0.0)
    # a scatter's empty blocks need no message: only the ranks of its non-empty blocks
    # (the root among them, as the bandwidth bound lets it keep one) must hear from it
    reached = min(p, n // itemsize) if collective == "scatter" else p
    return Bounds((reached - 1).bit_length() * alpha, _seconds(moved, beta),
                  _seconds(Fraction(reduced, p + hosts), gamma), alpha)


def _seconds(amount: float | Fraction, per_byte: float) -> float:
    """``amount`` bytes at ``per_byte`` seconds each, rounded once from the exact product
    (bytes near 2^1023 times a small constant is a finite time, where the float product
    of the bytes first would overflow).

    Raises:
        InvalidInputError: a time past the largest float.
    """
    try:
        return float(Fraction(amount) * Fraction(per_byte))
    except OverflowError:
        raise InvalidInputError(f"a bound overflows a float: about "
                                f"2^{int(amount).bit_length() - 1} bytes at {per_byte!r} s "
                                f"per byte; use smaller sizes or constants") from None


_BOUNDED = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all",
            "gather", "scatter", "barrier")
"""The collectives of fixed-size blocks that :func:`lower_bound` bounds."""


def _moved_and_reduced(collective: str, p: int, n: int, itemsize: int
                       ) -> tuple[Fraction, int]:
    """(bytes one rank must move one way, bytes the p inputs take to reduce) for p > 1
    ranks of n bytes each, without server hosts (:func:`lower_bound`), exactly."""
    share = Fraction((p - 1) * n, p)
    reduced = (p - 1) * n
    moved, reduces = {
        "all_reduce": (2 * share, True),
        "reduce_scatter": (share, True),
        "all_gather": (Fraction(reduced), False),
        "broadcast": (Fraction(n), False),
        "reduce": (Fraction(n), True),
        "all_to_all": (share, False),
        "gather": (Fraction(reduced), False),
        "scatter": (Fraction(n - largest_block(n, p, itemsize)), False),
        "barrier": (Fraction(0), False),
    }[collective]
    return moved, reduced if reduces else 0
