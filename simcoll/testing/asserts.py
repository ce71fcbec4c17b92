"""Assertions that compare a simulation with a formula, and say where they differ.

Every failure message puts the expected and the simulated values side by side; traffic
failures list the ranks that differ.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike

from simcoll import cost
from simcoll.algorithms.registry import get_algorithm
from simcoll.checks import _subject, integer, real
from simcoll.collectives import collective
from simcoll.dtypes import as_dtype
from simcoll.errors import InvalidInputError, TopologyError
from simcoll.inputs import check_root
from simcoll.result import Result
from simcoll.topology.io import topology_hash
from simcoll.uneven import abbreviated
from simcoll.units import parse_size

__all__ = ["assert_time", "assert_traffic", "assert_matches_model"]

_SHOWN = 16


def _result(res: Any) -> Result:
    """``res`` if it is what ``simulate`` returns, else an InvalidInputError that says
    what it is: a failed sweep point (with its error), a result's dict, a rank
    program's run."""
    if isinstance(res, Result):
        return res
    failed = getattr(res, "error_type", None)
    if failed is not None:
        raise InvalidInputError(f"this sweep point failed ({failed}: "
                                f"{getattr(res, 'error_message', '')}); there is no run to "
                                f"check")
    what = ("a result's dict; pass the Result itself (sc.load_results reads saved ones "
            "back as Results)" if isinstance(res, dict) else
            f"a {type(res).__name__}, not what simulate returns")
    raise InvalidInputError(f"res is {what}")


def _what(res: Result) -> str:
    """The run as failure messages name it: collective, algorithm, ranks, the sizes it was
    given (a v-collective's splits, abbreviated) and its parameters."""
    params = "".join(f", {k}={v!r}" for k, v in res.params.items())
    size = (f"nbytes={res.nbytes}" if res.splits is None
            else f"splits={abbreviated(res.splits)} elements of {res.dtype}")
    return f"{res.collective}/{res.algorithm} (p={res.nranks}, {size}{params})"


def assert_time(res: Result, expected: float | Fraction | Decimal, *, rtol: float = 1e-9,
                atol: float = 0.0) -> None:
    """Assert ``res.time`` is within ``atol + rtol * |expected|`` of ``expected`` seconds.

    Raises:
        AssertionError: naming the run, with expected and simulated times side by side.
        InvalidInputError: ``res`` not a Result of ``simulate`` (a failed sweep point, a
            dict), or an expected time (a float, an int, a Fraction or a Decimal),
            ``rtol`` or ``atol`` that is not a finite number >= 0.
    """
    __tracebackhide__ = True  # pytest shows the caller's line
    seconds: float | Fraction | Decimal = expected
    if isinstance(expected, (Fraction, Decimal)):   # exact arithmetic's, as assert_traffic
        try:
            seconds = float(expected)
        except (OverflowError, ValueError):   # past a double's range; a signalling NaN
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise InvalidInputError(f"{_subject('expected', expected)} is not accepted; use "
                                    f"a number >= 0, finite (seconds)")
    _assert_time(_result(res), real(seconds, "expected", what="seconds"), rtol, atol,
                 "the formula")


def _assert_time(res: Result, expected: float, rtol: float, atol: float,
                 source: str) -> None:
    __tracebackhide__ = True
    rtol, atol = real(rtol, "rtol"), real(atol, "atol")
    diff = res.time - expected
    if abs(diff) <= atol + rtol * abs(expected):
        return
    rel = abs(diff) / abs(expected) if expected else float("inf")
    # 12 digits, or as many as tell the two apart (a tight rtol): every digit of a float
    digits = 12 if f"{expected:.12g}" != f"{res.time:.12g}" else 17
    raise AssertionError(
        f"time of {_what(res)} differs from {source}:\n"
        f"  expected  {expected:.{digits}g} s\n"
        f"  simulated {res.time:.{digits}g} s\n"
        f"  difference {diff:+.6g} s (relative {rel:.3g}; rtol={rtol:g}, atol={atol:g})")


Count: TypeAlias = "int | float | Fraction"
"""An expected byte count: exact (an int, or a Fraction from exact arithmetic, compared
as it is) or a float (compared within ``rtol``)."""


def _byte_count(value: Any, name: str) -> Count:
    """One expected byte count: a number >= 0, finite, or a size string like ``"1MiB"``;
    integers (numpy's too), Fractions and Decimals kept exact, floats as floats."""
    what = "bytes, or a size string like '1MiB'"
    if isinstance(value, str):
        try:
            return parse_size(value)
        except (ValueError, TypeError, OverflowError) as exc:
            raise InvalidInputError(f"{_subject(name, value)} is not accepted: {exc}") from None
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return integer(value, name, minimum=0, what=what)
    if isinstance(value, (Fraction, Decimal)):
        try:
            exact = Fraction(value)
        except (ValueError, OverflowError):   # a Decimal NaN or infinity
            exact = Fraction(-1)
        if exact < 0:
            raise InvalidInputError(f"{_subject(name, value)} is not accepted; use {what} "
                                    f"(a number >= 0, finite)")
        return int(exact) if exact.denominator == 1 else exact
    return real(value, name, what=what)


def _expected_bytes(arg: str, value: Any, count: int) -> list[Count]:
    """Argument ``arg`` as ``count`` expected byte counts: one for every rank (server host
    for ``host_*``), or a flat list of one per rank (host).

    Raises:
        InvalidInputError: a count that is not a finite number >= 0 or a size string, a
            nested list, a list of another length, or any host expectation on a run
            without server hosts.
    """
    who = "host" if arg.startswith("host") else "rank"
    shown = f"{arg}={reprlib.repr(value)} is not accepted"
    if who == "host" and count == 0:
        raise InvalidInputError(f"{shown}: the run has no server hosts; leave {arg}= out "
                                f"or build the network with servers=")
    per = f"give one number of bytes for every {who} or a flat list of one per {who}"
    try:
        ndim = 0 if isinstance(value, str) else np.ndim(value)
        nested = f"a {ndim}-D list"
    except ValueError:  # lists of different lengths
        ndim, nested = 2, "a nested list"
    if ndim == 0:
        scalar = value.item() if isinstance(value, np.ndarray) else value
        return [_byte_count(scalar, arg)] * count
    if ndim > 1:
        raise InvalidInputError(f"{shown}: it is {nested}; {per}")
    if len(value) != count:
        raise InvalidInputError(f"{shown}: it has {len(value)} values, one per {who}, but "
                                f"the run has {count} {who}s; {per}")
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        # an array of one kind: checked all at once
        bad = np.flatnonzero(~np.isfinite(value) | (value < 0))
        if bad.size:
            _byte_count(value[bad[0]].item(), f"{arg}[{bad[0]}]")
        return list(value.tolist())   # Python ints stay exact, floats stay floats
    # a list: each count as it is (an int in a list beside a float stays exact)
    return [_byte_count(v, f"{arg}[{i}]") for i, v in enumerate(value)]


def _shown_count(value: Count) -> str:
    """An expected count as it reads: an int or a Fraction exactly, a float in 15 digits."""
    return f"{value:.15g}" if isinstance(value, float) else str(value)


def _check_bytes(name: str, simulated: np.ndarray, expected: list[Count] | np.ndarray | int,
                 rtol: float) -> list[str]:
    """The lines of a table of the ranks (hosts) whose bytes differ from ``expected`` (one
    count for all, or one each): exact counts (ints, Fractions) must be equal, floats
    within ``rtol``."""
    if isinstance(expected, int):
        want: list[Count] = [expected] * simulated.size
    else:
        want = expected.tolist() if isinstance(expected, np.ndarray) else list(expected)
    who = "host" if name.startswith("host") else "rank"
    if len(want) != simulated.size:
        return [f"{name}: expected {len(want)} values, one per {who}, but the run has "
                f"{simulated.size}"]
    got = simulated.tolist()
    bad = [i for i, (g, w) in enumerate(zip(got, want))
           if (abs(g - w) > rtol * abs(w) if isinstance(w, float) else g != w)]
    if not bad:
        return []
    lines = [f"{name}: {len(bad)} of {simulated.size} {who}s differ",
             f"  {who:>6} {'expected':>16} {'simulated':>16} {'difference':>12}"]
    for i in bad[:_SHOWN]:
        difference = got[i] - want[i]
        shown = f"{difference:+.6g}" if isinstance(difference, float) else \
            f"{'+' if difference >= 0 else ''}{difference}"
        lines.append(f"  {i:>6} {_shown_count(want[i]):>16} {got[i]:>16d} {shown:>12}")
    if len(bad) > _SHOWN:
        lines.append(f"  ... and {len(bad) - _SHOWN} more")
    return lines


Expected: TypeAlias = "ArrayLike | Fraction | Decimal | Sequence[Fraction | Decimal] | str"
"""What ``assert_traffic`` takes for one direction: a count for every rank (host), or a
list or array of one each."""


def assert_traffic(res: Result, *, sent: Expected | None = None,
                   received: Expected | None = None, host_sent: Expected | None = None,
                   host_received: Expected | None = None, rtol: float = 1e-12) -> None:
    """Assert the payload bytes of every rank (or server host).

    Each expectation is one byte count for every rank, or a flat list of one per rank
    (per server host for ``host_*``); a byte count is a finite number >= 0 or a size
    string like ``"1MiB"`` (as ``simulate``'s ``nbytes`` takes). Integers (and Fractions
    or Decimals, from exact arithmetic) must equal the simulated counts exactly; ``rtol``
    only absorbs the rounding of formulas written in floats.

    Raises:
        AssertionError: naming the run; a table of the ranks that differ with expected and
            simulated bytes side by side.
        InvalidInputError: (before any comparison) no expectation given, ``res`` not a
            Result of ``simulate``,
            a byte count that is not a finite
            number >= 0 nor a size string, a nested list, a list whose length is not the
            run's number of ranks (hosts), a ``host_*`` expectation on a run without
            server hosts, or an ``rtol`` that is not a finite number >= 0.
    """
    __tracebackhide__ = True  # pytest shows the caller's line
    res = _result(res)
    if sent is None and received is None and host_sent is None and host_received is None:
        raise InvalidInputError("assert_traffic needs sent=, received=, host_sent= or "
                                "host_received=")
    rtol = real(rtol, "rtol")
    expected = tuple(None if value is None else _expected_bytes(arg, value, got.size)
                     for arg, value, got in (
                         ("sent", sent, res.bytes_sent),
                         ("received", received, res.bytes_received),
                         ("host_sent", host_sent, res.host_bytes_sent[:res.hosts]),
                         ("host_received", host_received,
                          res.host_bytes_received[:res.hosts])))
    _assert_traffic(res, expected, rtol, "the formula")


def _assert_traffic(res: Result, expected: tuple, rtol: float, source: str) -> None:
    __tracebackhide__ = True
    rtol = real(rtol, "rtol")
    # server hosts only: an in-network device's traffic is no host's (nor any model's)
    simulated = (res.bytes_sent, res.bytes_received, res.host_bytes_sent[:res.hosts],
                 res.host_bytes_received[:res.hosts])
    names = ("bytes_sent", "bytes_received", "host_bytes_sent", "host_bytes_received")
    lines = []
    for name, got, want in zip(names, simulated, expected):
        if want is not None:
            lines += _check_bytes(name, got, want, rtol)
    if lines:
        raise AssertionError(f"traffic of {_what(res)} differs from {source}:\n"
                             + "\n".join(lines))


def _model_params(res: Result) -> dict[str, Any]:
    """The run's algorithm parameters, plus ``hosts`` for models of host algorithms."""
    params = dict(res.params)
    if "hosts" in get_algorithm(res.collective, res.algorithm).cost.machine:
        params["hosts"] = res.hosts
    return params


def _run_root(res: Result, root: Any) -> int | None:
    """The root the models are asked for: ``root`` checked as ``simulate`` checks it, and
    the run's own (``res.root``, 0 where a rooted result does not say) if not given.

    Raises:
        InvalidInputError: a root that is not a rank, a root other than the run's, or a
            root for a collective without one.
    """
    coll = collective(res.collective)
    if root is None:
        return res.root if res.root is not None or not coll.rooted else 0
    checked = check_root(coll, root, res.nranks)
    if res.root is not None and checked != res.root:
        raise InvalidInputError(f"root={root!r} is not the root of the run of {_what(res)}, "
                                f"which is {res.root}; leave root= out (the run's is "
                                f"used)")
    return checked


def _check_reference(res: Result, alpha: float, beta: float, gamma: float) -> None:
    """Refuse a run on another machine than the reference network of these constants
    (by its digest, ``Result.topology_hash``, where the result has one; a bandwidth or
    reduction rate a float step from 1/beta or 1/gamma, or a latency a step from alpha/2,
    is the same machine typed in other terms), or on the analytical network model, where
    messages do not share links as the models say."""
    if res.network == "analytical":
        raise InvalidInputError(
            f"{_what(res)} ran on network='analytical', where every message has its "
            f"route's whole bandwidth; the cost models describe messages sharing links, "
            f"as network='flow' (the default) or 'flow_rtt' runs them")
    if res.topology_hash is None:
        return
    from simcoll.testing.network import reference_networks  # which checks with this module

    try:
        found = any(topology_hash(reference) == res.topology_hash
                    for reference in reference_networks(res.nranks, alpha=alpha, beta=beta,
                                                        gamma=gamma, servers=res.hosts))
    except TopologyError as exc:
        raise InvalidInputError(str(exc)) from None
    if not found:
        raise InvalidInputError(
            f"{_what(res)} did not run on the reference network of alpha={alpha:g}, "
            f"beta={beta:g}, gamma={gamma:g} (it ran on {res.topology!r}, whose links or "
            f"constants differ by more than a float step); run it on "
            f"alpha_beta_network({res.nranks}, alpha=..., "
            f"beta=..., gamma=...{', servers=...' if res.hosts else ''}) and give the "
            f"same constants here (alpha in seconds per message, beta in seconds per "
            f"byte, gamma in seconds per reduced byte)")


def assert_matches_model(res: Result, *, alpha: float, beta: float, gamma: float = 0.0,
                         rtol: float = 1e-9, root: int | None = None,
                         exact: bool = False) -> None:
    """Assert ``res`` agrees with the registered cost model of the algorithm that ran.

    Checks that the outputs were correct (data mode), that the traffic equals
    ``simcoll.cost.traffic`` exactly, that the time is at least the collective's lower
    bound, and, where the model says its time is exact, that the time equals
    ``simcoll.cost.predict`` to ``rtol``. ``res`` must come from the alpha-beta reference
    network with these constants (:func:`~simcoll.testing.alpha_beta_network`), whose
    endpoints past the GPUs are server hosts only (an in-network device, such as an
    NVSwitch that reduces, would count as one).

    Args:
        root: the root the models of a rooted collective are asked for: the run's
            (``res.root``) by default, and refused if it differs from it. Collectives
            without a root refuse one, as ``simulate`` does.
        exact: also require the model's time to be exact for this run, so that a test
            pinning a formula fails where the model only estimates (and the time would
            be held to the lower bound alone) instead of passing quietly.

    Raises:
        AssertionError: the first check that fails, values side by side (with
            ``exact``, a model whose time is an estimate here).
        UnknownAlgorithmError: the algorithm has no cost model.
        InvalidInputError: (before any check) ``res`` not a Result of ``simulate``, or
            one of a run with faults, on the analytical network model, or on another
            machine than the reference network of these constants,
            alpha, beta, gamma or ``rtol`` not a
            finite number >= 0, a root that is not a rank of the run or not the run's
            root, or a root for a collective without one.
    """
    __tracebackhide__ = True  # pytest shows the caller's line
    res = _result(res)
    if res.faults is not None:
        raise InvalidInputError(f"this run had faults ({res.faults}), which the cost model "
                                f"does not describe; check a run on the healthy machine")
    for name, value in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
        real(value, name)
    rtol = real(rtol, "rtol")
    if not isinstance(exact, (bool, np.bool_)):
        raise InvalidInputError(f"exact={exact!r} is not accepted; use True or False")
    root = _run_root(res, root)
    _check_reference(res, alpha, beta, gamma)
    if res.correct is False:
        differs = ("no difference float64 shows: a zero of the wrong sign, or long "
                   "double values closer than float64 resolves"
                   if res.max_error == 0 else f"largest error {res.max_error!r}")
        raise AssertionError(f"{_what(res)} computed a wrong result ({differs})")
    params = _model_params(res)
    if root is not None:
        params["root"] = root
    itemsize = as_dtype(res.dtype).itemsize
    # A v-collective's models take its sizes in bytes, per rank or per pair.
    sizes = res.nbytes if res.splits is None else np.array(res.splits) * itemsize
    args: dict[str, Any] = {"p": res.nranks, "nbytes": sizes, "itemsize": itemsize}
    t = cost.traffic(res.collective, res.algorithm, **args, **params)
    # A model of an algorithm without hosts leaves the host arrays empty: nothing moves.
    hosts = [h if h.size else 0 for h in (t.host_sent, t.host_received)]
    _assert_traffic(res, (t.sent, t.received, *hosts), 0.0, "simcoll.cost.traffic")
    bound = cost.lower_bound(res.collective, alpha=alpha, beta=beta, gamma=gamma,
                             hosts=res.hosts, **args).total
    if res.time < bound * (1 - rtol):
        raise AssertionError(f"time of {_what(res)} beats the lower bound:\n"
                             f"  lower bound {bound:.12g} s\n"
                             f"  simulated   {res.time:.12g} s")
    if cost.is_exact(res.collective, res.algorithm, **args, **params):
        expected = cost.predict(res.collective, res.algorithm, alpha=alpha, beta=beta,
                                gamma=gamma, **args, **params)
        _assert_time(res, expected, rtol, 0.0, "simcoll.cost.predict")
    elif exact:
        raise AssertionError(f"the model of {_what(res)} only estimates its time here "
                             f"(simcoll.cost.is_exact is False): without exact=True the time "
                             f"would be held to the lower bound alone; exact=True asks for "
                             f"an exact model")
