"""Fit a machine's free constants to a measured nccl-tests table.

``calibrate(build, table, free={"bandwidth": (initial, low, high), ...})`` simulates every
size of the table in data-free mode and moves the free constants (arguments of ``build``,
which returns a Topology, or numeric parameters of the algorithm, such as NCCL's
``launch_overhead`` and ``step_latency_scale``) until the simulated times match the
measured ones in the least-squares sense on log time, so that a 10% miss counts the same
at 8 B and at 8 GiB.
The fit is scipy's bounded trust-region least squares (``least_squares(method="trf")``);
constants whose lower bound is positive are fitted on a log scale, since bandwidths and
latencies span many decades and only their ratios matter.

A fit cannot move a constant that moves no simulated time where it starts (a bandwidth
that is not the bottleneck there: its finite-difference Jacobian column is zero), nor
tell where beyond a bound the best fit would be, nor pin down more constants than the
sizes determine: the result names such constants (:attr:`Calibration.unmoved`,
:attr:`Calibration.on_bound`, :attr:`Calibration.undetermined`) and its report says so.
A trial point that simcoll cannot simulate within its run limits (a bandwidth so low
that the largest size runs past the simulated-time limit) counts as the worst fit, and
the fit goes on; where the start is such a point, the constants' zero Jacobian columns
there are named as that (:attr:`Calibration.past_limits`), not as moving no time.
Sizes where nccl-tests found wrong values (``#wrong`` above 0) are left out of the fit.

scipy is an optional dependency: ``pip install "simcoll[calibrate]"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcoll.algorithms.params import Choice, Int, Keywords, Names, Optional, Param, Real
from simcoll.algorithms.registry import get_algorithm
from simcoll.checks import huge, shown
from simcoll.comparison import (
    Setting,
    check_picklable,
    check_row_arguments,
    check_workers,
    geomean_error,
    geomean_line,
    measured_times,
    run_sizes,
    setting_columns,
    size_runs,
    size_width,
    table_collective,
    wrong_labels,
    wrong_note,
)
from simcoll.errors import InvalidInputError, RunLimitError, SimCollError, add_note
from simcoll.nccl_tests import NcclTestsTable
from simcoll.processes import local_pool
from simcoll.progress import check_progress, progress_bar
from simcoll.topology.graph import Topology
from simcoll.topology.quantities import format_rate, format_time

__all__ = ["Calibration", "calibrate", "LOSSES", "algorithm_constants"]

Factory = Callable[..., Topology]


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` found.

    Attributes:
        values: the fitted constants, by name.
        initial: the constants the fit started from.
        topology: ``build(**values)`` with the machine's constants, the calibrated machine.
        sizes: the table's size column (bytes) for the sizes fitted.
        measured: the measured times, seconds.
        before, after: the simulated times with the initial and the fitted constants.
        evaluations: simulations run (one per size per trial point).
        message: scipy's account of why the fit stopped (each start's, with several).
        params: the fitted constants that are the algorithm's parameters (pass them to
            :func:`simcoll.simulate` with :attr:`topology`); empty where all are the
            machine's.
        bounds: each constant's (low, high).
        unmoved: the constants that moved no simulated time where they started (the fit
            from the initial constants ended with a zero Jacobian column for them, and
            setting them back to their start changes no time: a bandwidth that is not the
            bottleneck there, say), so that fit could not move them; each is then tried
            at :data:`PROBES` values across its bounds.
        probed: of those, the ones some probed value moved the time at, and the value a
            further fit started from (the best probed); the others are not fitted
            (:attr:`not_fitted`).
        left_out: the sizes of the table's rows left out of the fit because nccl-tests
            found wrong values there (``#wrong`` above 0; in a table of ``-d all`` or
            ``-o all``, only the rows of the types or ops that had them).
        unsimulated: the constants of each trial point simcoll could not simulate within
            its run limits (a :class:`simcoll.errors.RunLimitError`), which counted as
            the worst fit.
        settings, left_out_settings: the element type, redop and root of each row fitted
            and of each left out, as the table printed them (a table of ``-d all`` or
            ``-o all`` holds a size once per type or op; the report then shows them).
        undetermined: how many combinations of the free constants the fitted sizes do
            not pin down (change no simulated time where the fit ended, so other values
            fit as well): the free constants beyond the sizes at least; 0 where all are
            determined. Two constants whose times add alike at every size (a ring
            all_reduce's link and reduction bandwidths, which take (p - 1) n / p
            (2 / bandwidth + 1 / reduce_bandwidth) over the run) are one such
            combination.
        traded_off: the free constants in those combinations (empty where all are
            determined): values of them that keep the combination fit as well.
        past_limits: of :attr:`unmoved`, those whose Jacobian column was zero because
            the points it came from (where the first fit ended, its start as a rule, and
            the finite-difference steps from it) could not be simulated within the run
            limits: not that they move no time, but that no time was simulated there
            (constants in the wrong unit, say: a bandwidth of 5 bytes/s meant as 5 GB/s).
        stalled_at: the ``max_evaluations`` the fit ran out of before it took a step:
            the best point it tried is its start or a finite-difference step from it,
            so :attr:`values` are the initial constants, not fitted ones; None where it
            took one.
    """

    values: Mapping[str, float] = field(hash=False)
    initial: Mapping[str, float] = field(hash=False)
    topology: Topology
    sizes: tuple[int, ...]
    measured: tuple[float, ...]
    before: tuple[float, ...]
    after: tuple[float, ...]
    evaluations: int
    message: str
    params: Mapping[str, float] = field(default_factory=dict, hash=False)
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict, hash=False)
    unmoved: tuple[str, ...] = ()
    probed: Mapping[str, float] = field(default_factory=dict, hash=False)
    left_out: tuple[int, ...] = ()
    unsimulated: tuple[Mapping[str, float], ...] = field(default=(), hash=False)
    undetermined: int = 0
    settings: tuple[Setting, ...] = ()
    left_out_settings: tuple[Setting, ...] = ()
    traded_off: tuple[str, ...] = ()
    past_limits: tuple[str, ...] = ()
    stalled_at: int | None = None

    @property
    def not_fitted(self) -> tuple[str, ...]:
        """The :attr:`unmoved` constants that ended where they started: no fit moved
        them, so their value is the initial one, not a fitted one."""
        return tuple(k for k in self.unmoved if _at_start(self.values[k], self.initial[k]))

    @property
    def on_bound(self) -> dict[str, str]:
        """The constants (not :attr:`not_fitted`) that ended on a bound: ``"lower"`` or
        ``"upper"`` by name; the best fit may lie beyond it. (The fit moves a constant
        that ends near a bound onto it where the bound fits as well or better.)"""
        found = {}
        for name, (low, high) in self.bounds.items():
            value = self.values[name]
            for side, bound in (("lower", low), ("upper", high)):
                if name not in self.not_fitted and math.isclose(value, bound, rel_tol=1e-12):
                    found[name] = side
        return found

    @property
    def notes(self) -> list[str]:
        """What the report says below the constants: those not fitted, those on a bound,
        the sizes left out."""
        notes = []
        if self.stalled_at is not None:
            per_step = len(self.sizes) * (len(self.values) + 1)
            notes.append(f"note: the fit stopped at max_evaluations={self.stalled_at} "
                         f"before it took a step: the values are where it started (or a "
                         f"finite-difference step from it), not fitted; raise "
                         f"max_evaluations (each step simulates the {len(self.sizes)} "
                         f"sizes at {len(self.values) + 1} points, {per_step} simulations: "
                         f"give many times that)")
        for k in self.unmoved:
            if k in self.past_limits:
                note = (f"note: {k} was not fitted from its start, {self.initial[k]:g}: the fit "
                        f"could not simulate the sizes there (nor a step from there) within "
                        f"simcoll's run limits, so it could not tell what {k} moves; check "
                        f"the constants' units and bounds (a bandwidth in bytes/s, 5e+09, "
                        f"not GB/s, 5; a latency in seconds)")
            else:
                note = (f"note: {k} moved no simulated time at {self.initial[k]:g}, where "
                        f"it started (another part of the machine is the bottleneck there, "
                        f"it acts only past a threshold, or no run uses it)")
            if k in self.probed:
                note += (f"; fitted again from {self.probed[k]:.4g}, the best of {PROBES} "
                         f"values probed across its bounds")
            elif self.probed and k not in self.not_fitted:
                note += (f"; fitted again from {self.initial[k]:g} once "
                         f"{', '.join(self.probed)} started from the best value probed")
            if k in self.not_fitted:
                note += ": not fitted; start it elsewhere or use starts > 1"
            notes.append(note)
        notes += [f"note: {k} ended on its {side} bound "
                  f"{self.bounds[k][side == 'upper']:g}: the best fit may lie beyond it"
                  for k, side in self.on_bound.items()]
        if self.undetermined:
            notes.append(f"note: the sizes fitted ({len(set(self.sizes))}) do not pin down the "
                         f"{len(self.values)} free constants: {self.undetermined} "
                         f"combination(s) of {', '.join(self.traded_off) or 'them'} move no "
                         f"simulated time where the fit ended, so other values fit as "
                         f"well; fit more sizes (ones where they act differently), or "
                         f"free fewer constants")
        if self.unsimulated:
            notes.append(f"note: {len(self.unsimulated)} trial point(s) could not be "
                         f"simulated within simcoll's run limits (the first at "
                         f"{_named(self.unsimulated[0])}) and counted as the worst fit")
        if self.left_out:
            labels = self._columns()[1][len(self.sizes):]
            notes.append(wrong_note(wrong_labels(self.left_out, labels) if any(labels)
                                    else self.left_out, "left out of the fit"))
        return notes

    def _columns(self) -> tuple[str, list[str]]:
        """The head and each row's type, redop and root, the fitted rows' then those
        left out (:func:`~simcoll.comparison.setting_columns`)."""
        return setting_columns(self.settings + self.left_out_settings,
                               len(self.sizes) + len(self.left_out))

    @property
    def error_before(self) -> tuple[float, ...]:
        """(simulated - measured) / measured per size, with the initial constants."""
        return tuple(s / m - 1 for s, m in zip(self.before, self.measured))

    @property
    def error_after(self) -> tuple[float, ...]:
        """(simulated - measured) / measured per size, with the fitted constants."""
        return tuple(s / m - 1 for s, m in zip(self.after, self.measured))

    def report(self, kinds: Mapping[str, str] | None = None) -> str:
        """The fitted constants (those not fitted, or on a bound, marked and explained
        in notes), the per-size error (simulated / measured - 1) before and after, and
        the geometric-mean |time error| before and after with what it is. ``kinds``
        names a constant's kind, ``"rate"`` or ``"time"``, to show it in GB/s or us and
        the like (others as plain numbers, in bytes/s and seconds where they are)."""
        bound = self.on_bound
        kinds = kinds or {}

        def written(name: str, value: float, digits: int) -> str:
            kind = kinds.get(name)
            return format_rate(value, digits) if kind == "rate" else \
                format_time(value, digits) if kind == "time" else f"{value:.{digits}g}"

        lines = ["constant             initial        fitted"]
        lines += [(f"{name:<16} {written(name, self.initial[name], 4):>11} "
                   f"{written(name, value, 6):>13}"
                   + ("   not fitted: not simulated at its start"
                     if name in self.not_fitted and name in self.past_limits else
                     "   not fitted: moved no simulated time" if name in self.not_fitted else
                      f"   on its {bound[name]} bound" if name in bound else ""))
                  for name, value in self.values.items()]
        lines += self.notes
        width = size_width(self.sizes)
        # Where rows differ in type, redop or root (-d all, -o all), each row says its own.
        settings, labels = self._columns()
        shown = labels[:len(self.sizes)]
        head = f"  {settings}" if settings else ""
        lines += ["", f"{'size':>{width}}{head}   measured (us)   before (us)   after (us)   "
                      f"error before   error after"]
        for size, what, m, b, a, eb, ea in zip(self.sizes, shown, self.measured, self.before,
                                                self.after, self.error_before,
                                                self.error_after):
            label = f"  {what}" if settings else ""
            lines.append(f"{size:>{width}d}{label}  {m * 1e6:>14.2f}  {b * 1e6:>12.2f}  "
                         f"{a * 1e6:>11.2f}  {eb:>+12.1%}  {ea:>+12.1%}")
        lines += [""] + geomean_line(
            "geometric-mean |time error|", [self.before, self.after], self.measured,
            ["before", "after"], f"({self.evaluations} simulations; {self.message})")
        return "\n".join(lines)


def algorithm_constants(collective: str, algorithm: str) -> dict[str, Real]:
    """The numeric parameters of an algorithm, which a calibration may fit (NCCL's
    ``launch_overhead`` and ``step_latency_scale``), with their specs."""
    return {k: spec for k, spec in get_algorithm(collective, algorithm).params.items()
            if isinstance(spec, Real)}


def calibrate(build: Factory | str, table: NcclTestsTable, *,
              free: Mapping[str, tuple[float, float, float]], collective: str | None = None,
              algorithm: str = "ring", place: str = "out_of_place",
              max_evaluations: int = 20_000, starts: int = 1, seed: int = 0,
              loss: str = "linear", loss_scale: float = 0.1, progress: bool | None = None,
              workers: int = 1, **simulate_kwargs: Any) -> Calibration:
    """Fit the ``free`` constants of ``build`` so the simulated times match ``table``.

    Args:
        build: a function ``build(**values) -> Topology`` (a preset with keyword
            arguments, or your own), or a builder / preset name with fixed arguments as a
            topology spec takes them (``"dgx_a100:nodes=2"``), or the path of a topology
            file (whose machine has no constants: free only the algorithm's); the free
            constants are passed as keyword arguments.
        table: the measurements, from :func:`simcoll.nccl_tests.parse`.
        free: ``{name: (initial, low, high)}`` for each real-valued constant to fit,
            low < high. A name that is a numeric parameter of ``algorithm``
            (``launch_overhead`` or ``step_latency_scale`` of ``"nccl"``) is passed to
            each simulation; the others go to ``build``.
        collective: the collective simulated; by default the table's, which it must
            agree with.
        algorithm: the registered algorithm to simulate.
        place: the table's block to fit, ``"out_of_place"`` or ``"in_place"``.
        max_evaluations: the most simulations the fit may run, those at the initial
            constants included (at least twice the table's sizes); where it would need
            more, it stops on the best point it tried.
        starts: how many fits to run: the first from the initial constants, the others
            from points drawn at random within the bounds (log-uniform where the low
            bound is positive), all within ``max_evaluations``; the best point any of
            them tried is kept. Fits of NCCL meet the tuner's discrete choices and can
            stop in a local minimum, which more starts can get past.
        seed: the random generator's seed for those starting points.
        loss: how a size's log-time miss counts: ``"linear"`` (its square: least
            squares) or, so that a few outlying measurements (a one-off spike) pull the
            fit less, scipy's robust losses ``"soft_l1"``, ``"huber"`` or ``"cauchy"``,
            which count misses beyond ``loss_scale`` less than their square.
        loss_scale: the log-time miss where a robust loss starts to bend (0.1: about
            10%).
        progress: a tqdm progress bar on stderr, counting the simulations and showing
            the smallest geometric-mean error of a point tried; ``None`` shows it when
            stderr is a terminal.
        workers: local processes that simulate each trial point's sizes (1: in this
            process); the simulations, and so the fit, are the same either way.
        **simulate_kwargs: passed to :func:`simcoll.simulate` (``network=``, algorithm
            parameters, ...).

    Returns:
        The fitted constants, the calibrated topology, and the time per size measured,
        before and after (the sizes where nccl-tests found wrong values, ``#wrong``
        above 0, left out and named); the constants that moved no simulated time where
        they started, and so were not fitted, and those that ended on a bound, named;
        how many combinations of them the sizes could not pin down; the trial points
        simcoll could not simulate within its run limits (each counted as the worst
        fit: a time of infinity, ``before`` included where it is the initial point), and
        the constants that moved no time only as their start could not be simulated;
        whether ``max_evaluations`` ran out before the fit took a step.

    Raises:
        InvalidInputError: an empty table, no free constant, too small a
            ``max_evaluations``, ``starts`` that is not an integer from 1 to
            ``max_evaluations``, a name neither
            ``build`` nor the algorithm takes (or one given in ``simulate_kwargs`` or
            fixed in ``build``'s spec too, or with a topology file one that is not the
            algorithm's), a parameter that is not real-valued (an int, a bool, a str),
            an unknown ``loss`` or a ``loss_scale`` that is not a finite number > 0,
            bounds that are not ``low <= initial <= high`` with ``low < high`` (or that
            the algorithm's parameter does not accept, or at which ``build`` cannot
            build the machine), a ``seed`` that is not an integer >= 0, a ``progress``
            that is not True, False or None, ``workers`` that is not an integer >= 1 (or,
            with workers, a machine or parameters that do not pickle), a collective or
            algorithm that does not
            exist, a table with a different rank count than the machine, a row whose
            time is not above 0 or whose root is beyond the machine's ranks; all before
            the first simulation; also a ``collective`` other than the table's, and a
            table whose every row has ``#wrong`` above 0.
        RunLimitError: no trial point could be simulated within simcoll's run limits
            (naming the first and last tried).
        ImportError: scipy is missing (``pip install "simcoll[calibrate]"``).
        KeyboardInterrupt: Ctrl-C, at once; it carries a note naming the best point
            simulated so far, its constants and geometric-mean error, where there is one.
    """
    factory = _factory(build)
    check_row_arguments(simulate_kwargs)
    coll = table_collective(table, collective)
    if not table.rows:
        raise InvalidInputError("the table has no rows to calibrate against")
    specs = algorithm_constants(coll.name, algorithm)
    others = {k: spec for k, spec in get_algorithm(coll.name, algorithm).params.items()
              if k not in specs}
    bounds = _check_free(factory, free, set(specs), build if isinstance(build, str) else None,
                         others, algorithm)
    tuned = [k for k in free if k in specs]
    for k in tuned:   # the algorithm must accept the whole range (names the bad bound)
        for bound in bounds[k]:
            specs[k].normalize(k, bound)
    both = sorted(set(tuned) & set(simulate_kwargs))
    if both:
        raise InvalidInputError(f"{', '.join(both)} is both free and given in "
                                f"simulate_kwargs; leave it in one of them")
    wrong = table.wrong_rows(place)
    if all(wrong):
        raise InvalidInputError("every row of the table has #wrong > 0 (nccl-tests found "
                                "wrong values in each): nothing to fit")
    left_out = table.wrong_sizes(place)
    left_out_settings = tuple((r.type, r.redop, r.root)
                              for r, bad in zip(table.rows, wrong) if bad)
    table = dataclasses.replace(table, rows=tuple(r for r, bad in zip(table.rows, wrong)
                                                  if not bad))
    measured = np.array(measured_times(table, place))
    try:
        from scipy.optimize import least_squares  # type: ignore[import-untyped]
    except ImportError as err:
        raise ImportError('simcoll.calibrate needs scipy: pip install "simcoll[calibrate]"') \
            from err
    initial = {k: float(v[0]) for k, v in free.items()}

    def machine(values: Mapping[str, float]) -> Topology:
        return _built(factory, {k: v for k, v in values.items() if k not in tuned})

    topology = machine(initial)
    for k in free:   # the machine must build over the whole range (names the bad bound)
        for bound in () if k in tuned else bounds[k]:
            try:
                machine({**initial, k: bound})
            except SimCollError as err:
                raise InvalidInputError(f"free[{k!r}]: the machine cannot be built at the "
                                        f"bound {bound:g}: {err}") from None
    shapes = size_runs(table, coll, topology)
    Int(0, minimum=0).normalize("seed", seed)
    Choice("linear", LOSSES).normalize("loss", loss)
    if isinstance(loss_scale, bool) or not isinstance(loss_scale, (int, float)) \
            or not 0 < loss_scale < math.inf or huge(loss_scale):
        raise InvalidInputError(f"loss_scale={shown(loss_scale)} is not accepted; use a "
                                f"finite number > 0")
    Int(2 * len(shapes), minimum=2 * len(shapes),
        doc=f"the {len(shapes)} sizes at the initial constants, then at one trial "
            f"point").normalize("max_evaluations", max_evaluations)
    # each start is drawn before the fits and runs a simulation at least
    Int(1, minimum=1, maximum=max_evaluations,
        doc="starts, each of one simulation at least, within max_evaluations"
        ).normalize("starts", starts)
    check_progress(progress)
    workers = check_workers(workers)
    if workers > 1:
        check_picklable(topology, simulate_kwargs)
    names = list(free)
    scale = [_Scale(*bounds[k]) for k in names]
    count = [0]
    tried: dict[bytes, np.ndarray] = {}   # times at each trial point, by its variables
    smallest = [math.inf]   # geometric-mean error of the best point tried, for the bar
    unsimulated: list[tuple[dict[str, float], RunLimitError]] = []   # past the run limits

    def times(values: dict[str, float]) -> np.ndarray:
        topo = machine(values)
        count[0] += len(shapes)
        kwargs: dict[str, Any] = {**simulate_kwargs, **{k: values[k] for k in tuned}}
        try:
            simulated = np.array([t for t, _ in run_sizes(topo, coll, shapes, algorithm, bar,
                                                          pool, **kwargs)])
        except RunLimitError as err:   # the worst fit: the fit goes on
            unsimulated.append((values, err))
            return np.full(len(shapes), math.inf)
        error = geomean_error(simulated.tolist(), measured.tolist())
        if error < smallest[0]:
            smallest[0] = error
            bar.set_postfix({"smallest error": f"{error:.1%}"}, refresh=False)
        return simulated

    def values_of(x: np.ndarray) -> dict[str, float]:
        return {k: float(s.value(u)) for k, s, u in zip(names, scale, x)}

    first_fit: list[bytes] = []   # the distinct points the first fit asked for, in order
    recording = [False]

    def residuals(x: np.ndarray) -> np.ndarray:
        if recording[0] and x.tobytes() not in first_fit:
            first_fit.append(x.tobytes())
        simulated = tried.get(x.tobytes())
        if simulated is None:
            if count[0] + len(shapes) > max_evaluations:
                raise _OutOfEvaluations
            simulated = tried[x.tobytes()] = times(values_of(x))
        return np.minimum(np.log(simulated) - np.log(measured), _UNSIMULATED)

    def cost(x: np.ndarray) -> float:
        return _cost(tried[x.tobytes()], measured, loss, loss_scale)

    with progress_bar(progress, total=None, desc="calibrate", unit="sim") as bar, \
            local_pool(min(workers, len(shapes))) as pool, \
            _best_on_interrupt(tried, measured, loss, loss_scale, values_of):
        before = times(initial)
        low, high = [f.low_unit for f in scale], [f.high_unit for f in scale]
        rng = np.random.default_rng(seed)
        points = [np.array([f.unit(initial[k]) for k, f in zip(names, scale)])]
        if values_of(points[0]) == initial:
            # the fit's start is the initial constants; where the fit's scale rounds one,
            # it is simulated as a trial point: its finite differences must all compare
            # with the times at the values they step from, or a constant that moves no
            # time gets a false slope
            tried[points[0].tobytes()] = before
        points += [rng.uniform(low, high) for _ in range(starts - 1)]

        def probe(x: np.ndarray, stuck: list[int]) -> np.ndarray | None:
            """Where to fit again: each stuck constant at the best of PROBES values across
            its bounds that move the time (None where none does)."""
            start, here = x.copy(), residuals(x)
            for i in stuck:
                moving = []
                for u in np.linspace(low[i], high[i], PROBES):
                    trial = x.copy()
                    trial[i] = u
                    if not np.array_equal(residuals(trial), here):
                        moving.append((cost(trial), u))
                if moving:
                    start[i] = min(moving)[1]
                    probed[names[i]] = scale[i].value(start[i])
            return start if probed else None

        def moved_nothing(x: np.ndarray, start: np.ndarray, i: int) -> bool:
            """Whether constant ``i`` of ``x`` (a zero Jacobian column there) moves no
            time between ``x`` and ``start``: it ended at its start (trf starts strictly
            inside the bounds, so a start on a bound moves by a hair before the first
            step, which is no move of the fit's), or the time at ``x`` with it set back
            to its start is the same (trf may wander along a direction of no slope)."""
            if abs(x[i] - start[i]) <= _HAIR * (high[i] - low[i]):
                return True
            back = x.copy()
            back[i] = start[i]
            return bool(np.array_equal(residuals(back), residuals(x)))

        def unwandered(x: np.ndarray) -> np.ndarray:
            """``x`` with each unmoved constant back at its start where that changes no
            time (the fit may have left it anywhere a zero slope let it go); every point
            returned has been simulated, so its times are known."""
            for i, name in enumerate(names):
                if name in unmoved and x[i] != points[0][i]:
                    back = x.copy()
                    back[i] = points[0][i]
                    try:
                        if moved_nothing(x, points[0], i):
                            residuals(back)
                            x = back
                    except _OutOfEvaluations:
                        return x
            return x

        def snap(x: np.ndarray) -> np.ndarray:
            """``x`` with each constant that ended within NEAR_BOUND of a bound moved onto
            it where that fits as well or better (trf's points stay strictly inside the
            bounds); those left at their start, not fitted, stay."""
            for i, name in enumerate(names):
                for bound in (low[i], high[i]):
                    if x[i] == bound or abs(x[i] - bound) > NEAR_BOUND * (high[i] - low[i]) \
                            or (name in unmoved and x[i] == points[0][i]):
                        continue
                    trial = x.copy()
                    trial[i] = bound
                    try:
                        residuals(trial)
                    except _OutOfEvaluations:
                        return x
                    x = trial if cost(trial) <= cost(x) else x
            return x

        messages = []
        unmoved: list[str] = []    # zero Jacobian columns where the first fit ended, moving no time
        past_limits: list[str] = []   # of those, the ones zero as nothing was simulated there
        stalled = False   # the budget ran out in the first fit
        probed: dict[str, float] = {}
        jacobians: list[tuple[float, np.ndarray]] = []   # where each fit ended
        queue = list(points)
        while queue:
            point = queue.pop(0)
            try:
                recording[0] = point is points[0]
                fit = least_squares(residuals, point, bounds=(low, high), method="trf",
                                    x_scale=1.0, xtol=1e-12, ftol=1e-12, gtol=1e-12,
                                    loss=loss, f_scale=loss_scale)
                recording[0] = False
                messages.append(str(fit.message))
                jacobians.append((float(fit.cost),
                                  _unweighted(fit.jac, fit.fun, loss, loss_scale)))
                if point is points[0]:
                    stuck = [i for i in range(len(names))
                             if not np.any(np.asarray(fit.jac)[:, i])
                             and moved_nothing(fit.x, point, i)]
                    unmoved = [names[i] for i in stuck]
                    # a point past the run limits is the worst fit wherever the constants
                    # are: its zero columns say nothing of what they move
                    ended = tried.get(fit.x.tobytes())
                    if ended is not None and not np.all(np.isfinite(ended)):
                        past_limits = list(unmoved)
                    again = probe(fit.x, stuck) if stuck else None
                    queue[:0] = [] if again is None else [again]
            except _OutOfEvaluations:  # the budget covers one trial point at least
                stalled, recording[0] = point is points[0], False
                messages.append(f"stopped at max_evaluations={max_evaluations} on the best "
                                f"point tried")
                break
        key = _best_tried(tried, measured, loss, loss_scale)
        if not np.all(np.isfinite(tried[key])):
            raise _all_unsimulated(unsimulated)
        # the first fit's start (trf moves one on a bound inside by a hair) and its
        # finite-difference steps, which come before its first step
        unstepped = {points[0].tobytes(), *first_fit[:1 + len(names)]}
        stalled_at = max_evaluations if stalled and key in unstepped else None
        best = snap(unwandered(np.frombuffer(key, dtype=points[0].dtype).copy()))
    joined = "; ".join(m.rstrip(".") for m in messages)
    if probed:
        message = (f"the best of {len(messages)} fits ({starts} start{'s' * (starts > 1)}, "
                   f"then one from probing {', '.join(probed)}): {joined}")
    else:
        message = messages[0] if starts == 1 else \
            f"the best of {len(messages)} of {starts} starts: {joined}"
    fitted = values_of(best)
    # A constant that ended where it started (unmoved, or a fit stopped before its first
    # step) is the value given, not its round trip through the fit's log scale.
    for k in fitted:
        if _at_start(fitted[k], initial[k]):
            fitted[k] = initial[k]
    after = tried[best.tobytes()]
    undetermined, traded = _undetermined(min(jacobians, key=lambda c: c[0])[1]
                                         if jacobians else None, len(shapes), names)
    return Calibration(fitted, initial, machine(fitted), table.sizes,
                       tuple(measured.tolist()), tuple(before.tolist()),
                       tuple(after.tolist()), count[0], message,
                       {k: fitted[k] for k in tuned}, bounds, tuple(unmoved), probed, left_out,
                       tuple(v for v, _ in unsimulated), undetermined,
                       tuple((r.type, r.redop, r.root) for r in table.rows), left_out_settings,
                       traded, tuple(past_limits), stalled_at)


def _at_start(value: float, initial: float) -> bool:
    """Whether a fitted ``value`` is ``initial`` to the rounding of the fit's log scale."""
    return math.isclose(value, initial, rel_tol=1e-12)


@contextlib.contextmanager
def _best_on_interrupt(tried: Mapping[bytes, np.ndarray], measured: np.ndarray, loss: str,
                       loss_scale: float, values_of: Callable[[np.ndarray], dict[str, float]]
                       ) -> Iterator[None]:
    """Run the fit, noting on a Ctrl-C the best point simulated so far.

    The KeyboardInterrupt gets a note with the point of least cost (as the fit's end is
    chosen) where one was simulated within the run limits: its constants and time error,
    so that an interrupted calibration still tells what it found."""
    try:
        yield
    except KeyboardInterrupt as exc:
        key = _best_tried(tried, measured, loss, loss_scale) if tried else None
        if key is not None and np.all(np.isfinite(tried[key])):
            error = geomean_error(tried[key].tolist(), measured.tolist())
            add_note(exc, f"the best point simulated before the interrupt: "
                          f"{_named(values_of(np.frombuffer(key, dtype=np.float64)))} "
                          f"({error:.1%} geometric-mean time error over {len(measured)} "
                          f"sizes)")
        raise


def _best_tried(tried: Mapping[bytes, np.ndarray], measured: np.ndarray, loss: str,
                loss_scale: float) -> bytes:
    """The key of the point of ``tried`` whose times fit ``measured`` at least cost."""
    return min(tried, key=lambda k: _cost(tried[k], measured, loss, loss_scale))


def _named(values: Mapping[str, float]) -> str:
    """``bandwidth=1.2e+03, latency=1e-06``."""
    return ", ".join(f"{k}={v:.4g}" for k, v in values.items())


def _all_unsimulated(unsimulated: list[tuple[dict[str, float], RunLimitError]]
                     ) -> RunLimitError:
    """The error where no trial point could be simulated, naming the constants tried."""
    first, why = unsimulated[0]
    last = unsimulated[-1][0]
    return RunLimitError(
        f"no point the fit tried could be simulated within simcoll's run limits: "
        f"{len(unsimulated)} tried, the first at {_named(first)}"
        + (f", the last at {_named(last)}" if len(unsimulated) > 1 else "")
        + f" ({why}); start from, and bound the constants to, values the sizes run "
          f"within the limits at", why.running)


_FLAT = 1e-6
"""A singular value of the fit's Jacobian (log time against the constants on their fit
scales, without a robust loss's weights: :func:`_unweighted`), each column scaled to
unit length, below this share of the largest counts as 0: the Jacobian is a
finite-difference one, whose directions that move no time still show ~1e-8 of the
largest. The columns' scaling takes out the constants' units (a linear-scale constant's
column is its range times its effect), so only directions in which the constants act
alike count."""


_ROW_WEIGHTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "linear": np.ones_like,
    "soft_l1": lambda z: (1 + z) ** -1.5,
    "huber": lambda z: np.where(z <= 1, 1.0, 0.0),
    "cauchy": lambda z: (1 - z) / (1 + z) ** 2,
}
"""rho'(z) + 2 z rho''(z) of each loss of :data:`_LOSSES`: scipy's ``least_squares``
returns its Jacobian with row i times the square root of this (at least machine epsilon)
at z_i (``scale_for_robust_loss_function`` in scipy/optimize/_lsq/common.py), so a row
a robust loss discounts (huber and cauchy: a size missed by more than ``loss_scale``)
comes back ~1.5e-8 of itself."""


def _unweighted(jacobian: np.ndarray, residuals: np.ndarray, loss: str,
                scale: float) -> np.ndarray:
    """The Jacobian of the residuals, from the one scipy returns for ``loss``."""
    z = (np.asarray(residuals) / scale) ** 2
    weight = np.sqrt(np.maximum(_ROW_WEIGHTS[loss](z), np.finfo(float).eps))
    return np.asarray(jacobian) / weight[:, None]


def _undetermined(jacobian: np.ndarray | None, sizes: int, names: list[str]
                  ) -> tuple[int, tuple[str, ...]]:
    """How many combinations of the free constants the sizes do not pin down, and the
    constants in them: the rank the Jacobian where the best fit ended falls short of its
    columns that move the time by (constants that move none are reported on their own),
    at :data:`_FLAT`; or without one, the constants beyond the sizes (all of them
    named)."""
    if jacobian is None:
        short = max(0, len(names) - sizes)
        return short, tuple(names) if short else ()
    columns = [i for i in range(len(names)) if np.any(jacobian[:, i])]
    if not columns:
        return 0, ()
    moving = jacobian[:, columns]
    moving = moving / np.linalg.norm(moving, axis=0, keepdims=True)
    _, singular, directions = np.linalg.svd(moving)
    flat = int(moving.shape[1] - np.count_nonzero(singular > _FLAT * singular[0]))
    if not flat:
        return 0, ()
    null = directions[moving.shape[1] - flat:]   # rows spanning the flat directions
    weight = np.max(np.abs(null), axis=0)
    return flat, tuple(names[i] for i, w in zip(columns, weight) if w > 1e-3)


_HAIR = 1e-9
"""How far, as a share of its range on the fit's scale, a constant may end from its start
and still count as not moved by the fit (scipy's trf moves a start on a bound inside by
1e-10 of the bound)."""

NEAR_BOUND = 1e-3
"""How near a bound a constant has to end, as a share of its range on the fit's scale,
for the fit to try it on the bound itself."""

_UNSIMULATED = 100.0
"""The log-time residual of a size at a trial point that could not be simulated: worse
than any that could (a factor of e^100)."""


PROBES = 8
"""Values across its bounds at which a constant that moved no simulated time where the
fit started is tried (evenly spaced on its fit scale), to fit again from the best."""


class _OutOfEvaluations(Exception):
    """The fit would run more simulations than ``max_evaluations`` allows."""


_LOSSES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "linear": lambda z: z,
    "soft_l1": lambda z: 2 * (np.sqrt(1 + z) - 1),
    "huber": lambda z: np.where(z <= 1, z, 2 * np.sqrt(z) - 1),
    "cauchy": np.log1p,
}
"""scipy's ``least_squares`` losses rho(z) of a squared scaled residual z (its
documentation's formulas), to rank the points a fit tried as scipy does."""

LOSSES = tuple(_LOSSES)
"""The losses :func:`calibrate` takes."""


def _cost(simulated: np.ndarray, measured: np.ndarray, loss: str = "linear",
          scale: float = 1.0) -> float:
    z = ((np.log(simulated) - np.log(measured)) / scale) ** 2
    return float(np.sum(_LOSSES[loss](z)))



@dataclass(frozen=True)
class _Scale:
    """How one constant maps to the fit's variable: log scale where low > 0 (1 at the low
    bound: scipy's trf starts with a trust region the size of the starting point, and
    log 1 = 0 would have it crawl out of a hair's width where every start is 1, as
    ``step_latency_scale``'s default is), else linear in units of the bounds' span (0
    at 0, which keeps a value many decades below the span exact)."""

    low: float
    high: float

    @property
    def log(self) -> bool:
        return self.low > 0

    def unit(self, value: float) -> float:
        if self.log:  # logs apart: value / low can pass float's range (a low of 1e-320)
            return 1.0 + (math.log(value) - math.log(self.low))
        return value / (self.high - self.low)

    def value(self, unit: float) -> float:
        """The constant at ``unit``: exactly a bound at (or past) its unit, which the
        scale's rounding would leave a float step inside (1000 as 999.9999999999998)."""
        if unit <= self.low_unit:
            return self.low
        if unit >= self.high_unit:
            return self.high
        value = math.exp(math.log(self.low) + (unit - 1.0)) if self.log \
            else unit * (self.high - self.low)
        return min(max(value, self.low), self.high)

    @property
    def low_unit(self) -> float:
        return self.unit(self.low)

    @property
    def high_unit(self) -> float:
        return self.unit(self.high)


_KINDS = {"int": int, "bool": bool, "str": str, "dims": tuple}
"""Builder parameter kinds (:class:`simcoll.topology.catalog.Parameter`) that are not
real numbers, as the type the synthetic signature shows."""


def _factory(build: Factory | str) -> Factory:
    """A callable from a callable, from a builder name with fixed spec arguments, or
    (taking no constant) from a topology file."""
    if callable(build):
        return build
    if not isinstance(build, str):
        raise InvalidInputError(f"build must be a function returning a Topology or a "
                                f"builder name such as 'dgx_a100:nodes=2', not "
                                f"{type(build).__name__}")
    from simcoll.topology.catalog import builders, parameters
    from simcoll.topology.spec import from_spec, is_file_spec, with_arguments

    if is_file_spec(build):
        loaded = from_spec(build)
        return lambda: loaded
    name = build.partition(":")[0].strip()
    known = builders()
    if name not in known:
        raise InvalidInputError(f"unknown builder {name!r}; known: {', '.join(sorted(known))}")

    def factory(**values: float) -> Topology:
        return from_spec(with_arguments(build, values))

    factory.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY,
                           annotation=_KINDS.get(p.kind, float)) for p in parameters(name)])
    return factory


def _not_real(factory: Factory, param: inspect.Parameter) -> str | None:
    """The type a builder parameter holds where it is not a real number (``"int"``), else
    None (also where its annotation says nothing)."""
    hint = param.annotation
    if isinstance(hint, str):   # postponed annotations
        try:
            hint = typing.get_type_hints(factory).get(param.name, hint)
        except Exception:  # noqa: BLE001 (a name the hints cannot resolve: say nothing)
            return None
    kinds = [a for a in (typing.get_args(hint) if typing.get_origin(hint) in
                         (typing.Union, types.UnionType)
                         else (hint,)) if a is not type(None)]
    if not kinds or float in kinds or not all(isinstance(a, type) for a in kinds) \
            or inspect.Parameter.empty in kinds:
        return None
    return " | ".join(a.__name__ for a in kinds)


def _fixed(spec: str | None) -> set[str]:
    """The names a builder spec fixes (``ranks=8`` of ``switch:ranks=8``)."""
    args = (spec or "").partition(":")[2]
    return {part.partition("=")[0].strip() for part in args.split(",") if "=" in part}


_ALGORITHM_KINDS: dict[type, str] = {Int: "an int", Choice: "a str", Names: "a str",
                                     Keywords: "a dict", Optional: "an optional"}
"""How a message names an algorithm parameter of a spec that is not :class:`Real`."""


def _check_free(factory: Factory, free: Mapping[str, tuple[float, float, float]],
                numeric: set[str], build: str | None = None,
                others: Mapping[str, Param] | None = None,
                algorithm: str = "") -> dict[str, tuple[float, float]]:
    """Every free constant is a real-valued parameter of the factory (not fixed in the
    ``build`` spec it came from), or one of the algorithm's ``numeric`` parameters (not
    both), with sane bounds; ``others``, the algorithm's other parameters, are named as
    such where freed."""
    from simcoll.topology.spec import is_file_spec

    if not isinstance(free, Mapping):
        pairs = isinstance(free, (list, tuple)) and bool(free) and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str)
            and isinstance(p[1], (list, tuple)) and len(p[1]) == 3 for p in free)
        raise InvalidInputError(
            f"free={shown(free)} is {'an' if type(free).__name__[0] in 'aeiou' else 'a'} "
            f"{type(free).__name__}, not a mapping; give a dict {{name: (initial, low, "
            f"high)}}, such as {{'bandwidth': (50e9, 1e9, 1e12)}}"
            + (" (dict(free) makes one from these pairs)" if pairs else ""))
    if not free:
        raise InvalidInputError("free must name at least one constant to fit, as {name: "
                                "(initial, low, high)}")
    params: Mapping[str, inspect.Parameter] | None
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = None
    takes_any = params is None or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                      for p in params.values())
    params = params or {}
    file = build is not None and is_file_spec(build)
    fixed = set() if file else _fixed(build)
    bounds = {}
    for name, spec in free.items():
        other = (others or {}).get(name)
        if other is not None and name not in params and not takes_any:
            kind = _ALGORITHM_KINDS.get(type(other))
            raise InvalidInputError(
                f"calibrate fits real-valued constants; {name} is "
                + (f"{kind} parameter of the algorithm" if kind else
                   "a parameter of the algorithm that is not a real number")
                + f" ({algorithm or 'the algorithm'}'s {name} takes {other.accepted()})")
        if file and name not in numeric:
            raise InvalidInputError(
                f"free constant {name!r}: with a topology file ({build}) only the "
                f"algorithm's constants can be freed"
                + (f" ({', '.join(sorted(numeric))})" if numeric else " (it has none)")
                + "; to fit the machine's, give it as a builder spec such as "
                  "'switch:ranks=8'")
        if name in numeric and name in params:
            raise InvalidInputError(f"free constant {name!r} is a parameter of both the "
                                    f"machine's builder and the algorithm; rename the "
                                    f"builder's")
        kind = _not_real(factory, params[name]) if name in params else None
        if kind is not None:
            raise InvalidInputError(f"calibrate fits real-valued constants; {name} is "
                                    f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} parameter "
                                    f"of the machine's builder")
        if name in fixed:
            raise InvalidInputError(f"free constant {name!r} is fixed in {build!r} too; "
                                    f"leave it in one of them")
        if not takes_any and name not in params and name not in numeric:
            raise InvalidInputError(
                f"free constant {name!r} is not a parameter of the machine's builder nor a "
                f"numeric one of the algorithm; the builder takes "
                f"{', '.join(params) or 'none'}"
                + (f", the algorithm {', '.join(sorted(numeric))}" if numeric else ""))
        numbers = isinstance(spec, (tuple, list)) and len(spec) == 3 and all(
            isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, (bool, np.bool_)) for v in spec)
        if not numbers:
            raise InvalidInputError(f"free[{name!r}] = {spec!r} is not (initial, low, "
                                    f"high), three numbers")
        initial, low, high = (float(v) for v in spec)
        if not math.isfinite(initial):
            raise InvalidInputError(f"free[{name!r}]: initial {initial!r} is not a finite "
                                    f"number")
        if not all(math.isfinite(v) for v in (low, high)) or not low < high:
            raise InvalidInputError(f"free[{name!r}]: bounds ({low:g}, {high:g}) need finite "
                                    f"low < high")
        if not low <= initial <= high:
            raise InvalidInputError(f"free[{name!r}]: initial {initial:g} lies outside its "
                                    f"bounds [{low:g}, {high:g}]")
        bounds[name] = (low, high)
    return bounds


def _built(factory: Factory, values: Mapping[str, float]) -> Topology:
    try:
        topo = factory(**values)
    except SimCollError:
        raise
    except TypeError as err:
        raise InvalidInputError(f"the machine's builder refused {dict(values)}: {err}") \
            from err
    if not isinstance(topo, Topology):
        raise InvalidInputError(f"the machine's builder returned {type(topo).__name__}, not "
                                f"a Topology")
    return topo

