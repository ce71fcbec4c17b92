"""Scaling curves: time or bandwidth against rank count or size, one line per group."""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from simcoll import cost
from simcoll.algorithms.registry import get_algorithm
from simcoll.checks import flag
from simcoll.collectives import collective as collective_spec
from simcoll.dtypes import as_dtype
from simcoll.errors import InvalidInputError, SimCollError
from simcoll.plot.records import (
    Failure,
    Point,
    Record,
    params_text,
    read_all,
    topology_templates,
)
from simcoll.plot.style import (
    LOG_MARGIN,
    check_axes,
    checked_save_path,
    finish,
    format_duration,
    format_size,
    format_time_tick,
    legend_place,
    literal,
    log2_ticks,
    log_y_axis,
    new_axes,
    octaves,
    size_ticks,
    size_writer,
    tick_numbers,
    time_unit,
    wrapped,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["scaling", "plot_scaling"]

_XS = ("nranks", "nbytes")
_X_TICKS = 8
"""The most labelled x values where they are too many (more than 12) to label all."""
_YS = ("time", "busbw", "algbw", "bytes_sent")
_BYS = ("algorithm", "collective", "topology", "network", "dtype")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", ">", "*", "<", "h", "d", "p")
"""One marker per colour slot: the ten fixed algorithms' all differ, and only ring's is
round among them (nccl's is a star, not a hexagon), so lines stay apart in grayscale."""
MAX_LINES = 100
"""The most lines a scaling figure draws: past that its legend outgrows any page (10,000
sizes drew a figure 130,000 pixels wide in a minute and a half)."""
_LEGEND_ROWS = 24
"""The most legend entries in one column; a new figure grows to hold the legend."""
_AXES_WIDTH = 4.6
"""The data area's width (inches) in a figure scaling makes: the legend is added beside
it, so many entries widen the figure instead of squeezing the data."""
_DECADES = 1e3
"""Times spread over more than this factor get a unit per tick instead of one for the
axis."""
_DEFAULT_NETWORK, _DEFAULT_DTYPE = "flow", "float32"


_ALGORITHM_SLOTS = ("ring", "tree", "double_binary_tree", "recursive_doubling",
                    "rabenseifner", "naive", "parameter_server", "direct", "nccl", "bruck")
"""Algorithms that keep their colour and marker in every figure (others take the slots
after these, in the order they come)."""
_PALETTES = (("tab10", 10), ("Dark2", 8))
"""tab10's ten colours, then Dark2's eight (none of them pale on white)."""


def _slots(values: list[Any], by: str) -> dict[Any, int]:
    """Each line colour's slot: an algorithm's fixed one where it has one, else the next
    slot after the fixed ones in the order the values come (a slot a fixed algorithm
    leaves free in this figure is still its own: taken, it would make another algorithm
    look like it across figures)."""
    fixed = {name: i for i, name in enumerate(_ALGORITHM_SLOTS)} if by == "algorithm" else {}
    slots: dict[Any, int] = {}
    free = itertools.count(len(fixed))
    for value in values:
        if value not in slots:
            slots[value] = fixed[value] if value in fixed else next(free)
    return slots


# The fields that tell groups apart, in the order labels list them.
_KEY = ("collective", "algorithm", "params", "settings", "faults", "topology", "network",
        "dtype",
        "split")


def _split_text(split: str, value: int, sizes: Callable[[float], str]) -> str:
    return f"{sizes(value)} per rank" if split == "nbytes" else f"{value} ranks"


def _kind(machine: str | None) -> str | None:
    """Which record field ``machine`` came from (only like ones compare)."""
    return None if machine is None else machine.split("=", 1)[0]


def _groups(points: list[Point], x: str, split: str) -> dict[tuple, dict[int, Point]]:
    """Points by group key, each group's points by x; a later point with the same key and
    x replaces an earlier one (a rerun), unless their topologies differ.

    Raises:
        InvalidInputError: two points of one line ran on different machines: of different
            names at one x, or of one name (told apart by the topology hash of a Result
            or a record, or a record's spec) at one rank count; or two ``Result`` objects
            at one x on one machine took different times (they differ in what their
            fields do not show); or v-collective points of other splits
            (:func:`_check_splits`).
    """
    names = topology_templates(points)
    groups: dict[tuple, dict[int, Point]] = {}
    machines: dict[tuple, Point] = {}
    for p, topology in zip(points, names):
        key = (p.collective, p.algorithm, params_text(p.params), p.settings, p.faults,
               topology,
               p.network, p.dtype, getattr(p, split))
        line = groups.setdefault(key, {})
        at = getattr(p, x)
        if at in line and line[at].topology != p.topology:
            raise InvalidInputError(
                f"two {p.collective}/{p.algorithm} points at {x}={at} ran on different "
                f"topologies ({line[at].topology!r} and {p.topology!r}); plot them apart")
        same = machines.setdefault((key, p.nranks, _kind(p.machine)), p)
        if same.machine != p.machine:
            told = (f"spec={same.spec!r} and spec={p.spec!r}, "
                    if same.spec and p.spec and same.spec != p.spec
                    and _kind(p.machine) != "spec" else "")
            raise InvalidInputError(
                f"two {p.collective}/{p.algorithm} lines on {p.topology!r} ran on different "
                f"machines of that name ({told}{same.machine!r} and {p.machine!r}); plot "
                f"them apart")
        _check_splits(line, p, x, at)
        if at in line and p.from_result and line[at].from_result \
                and line[at].time != p.time:
            raise InvalidInputError(
                f"two {p.collective}/{p.algorithm} points at {x}={at} on {p.topology!r} "
                f"took different times ({format_duration(line[at].time or 0.0)} and "
                f"{format_duration(p.time or 0.0)}) on one machine: runs that differ in "
                f"something their results do not show (an algorithm registered again); "
                f"plot them apart")
        line[at] = p
    return groups


def _same_proportions(one: Any, other: Any) -> bool:
    """Whether two v-collectives' sizes (rows of all_to_allv's matrix one after the
    other) are one workload at two sizes: each entry's share of its total the same, to
    one element of the smaller total (shards cut by ``np.array_split``, 334/333/333
    against 667/667/666, are one workload)."""
    a, b = (np.asarray(splits, dtype=np.float64).ravel() for splits in (one, other))
    total_a, total_b = float(a.sum()), float(b.sum())
    if a.shape != b.shape:
        return False
    if min(total_a, total_b) == 0:
        return total_a == total_b
    return bool(np.all(np.abs(a / total_a - b / total_b)
                       <= (1 + 1e-9) / min(total_a, total_b)))


def _check_splits(line: dict[int, Point], p: Point, x: str, at: int) -> None:
    """Refuse a v-collective's point that would share a line with one of other splits:
    at one x (not a rerun of it), or, along sizes, of other proportions (two workloads
    drawn as one).

    Raises:
        InvalidInputError: naming the line and the two x values.
    """
    if p.splits is None:
        return
    other = line.get(at)
    if other is not None and other.splits is not None and other.splits != p.splits:
        raise InvalidInputError(
            f"two {p.collective}/{p.algorithm} points at {x}={at} on {p.topology!r} have "
            f"other splits; plot them apart")
    if x != "nbytes":
        return
    # the line's points so far share their proportions: one of them stands for all
    v, q = next(((v, q) for v, q in line.items() if q.splits is not None), (None, None))
    if q is not None and not _same_proportions(q.splits, p.splits):
        raise InvalidInputError(
                f"{p.collective}/{p.algorithm} points on {p.topology!r} at nbytes={v} and "
                f"{at} split their sizes in other proportions: two workloads, not one "
                f"scaled; plot them apart")


def _itemsize(dtype: str) -> int:
    """Bytes per element of a point's dtype; simulate's float32 (4) where its record does
    not say ("?")."""
    try:
        return as_dtype(dtype).itemsize
    except InvalidInputError:
        return 4


def _formula(p: Point, y: str, alpha: float, beta: float, gamma: float) -> float | None:
    """The cost model's value of ``y`` at ``p``, or None where it does not apply."""
    params = dict(p.params)
    itemsize = _itemsize(p.dtype)
    try:
        # a v-collective's model takes its sizes in bytes, per rank or per pair
        nbytes: Any = p.nbytes if p.splits is None else [
            [c * itemsize for c in row] if isinstance(row, (list, tuple)) else
            row * itemsize for row in p.splits]
        if "hosts" in get_algorithm(p.collective, p.algorithm).cost.machine:
            params["hosts"] = p.hosts
        if y == "bytes_sent":
            moved = cost.traffic(p.collective, p.algorithm, p=p.nranks, nbytes=nbytes,
                                 itemsize=itemsize, **params)
            most = max([*moved.sent.tolist(), *moved.host_sent.tolist()], default=0)
            return float(most) if most > 0 else None
        t = cost.predict(p.collective, p.algorithm, p=p.nranks, nbytes=nbytes,
                         alpha=alpha, beta=beta, gamma=gamma, itemsize=itemsize, **params)
    except (SimCollError, TypeError):
        return None
    if not t > 0 or not math.isfinite(t):
        return None
    if y == "time":
        return t
    spec = collective_spec(p.collective)
    # a v-collective's S, as simulate's: all_gatherv's is its whole output
    size = p.nbytes * spec.size_factor(p.nranks) if p.splits is None or spec.uneven is None \
        else spec.uneven.algbw_count(p.splits) * itemsize
    algbw = size / t
    return algbw if y == "algbw" else algbw * spec.busbw_factor(p.nranks)


def _style_axes(ax: Any, x: str, xs: list[float], ys: list[float], y_label: str,
                y_text: Callable[[float], str] | None, width: float = _AXES_WIDTH,
                sizes: Callable[[float], str] = format_size) -> None:
    """Log axes over the data, x labelled at :data:`_X_TICKS` values at most on an axes
    of a new figure's width (12 where they are the values themselves), fewer on a
    narrower one (``width`` inches: a caller's ``ax=``), where rotated size labels ran
    into each other; sizes written by ``sizes`` (:func:`~.style.size_writer`)."""
    from matplotlib.ticker import (
        FixedLocator,
        FuncFormatter,
        NullFormatter,
    )

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    narrow = min(1.0, width / _AXES_WIDTH)
    most = max(3, round(_X_TICKS * narrow))
    few = max(most, round(12 * narrow))
    ax.xaxis.set_major_locator(FixedLocator(
        size_ticks(xs, most, few) if x == "nbytes" else log2_ticks(xs, most, few)))
    ax.xaxis.set_minor_locator(FixedLocator(octaves(xs)))  # unlabelled
    ax.xaxis.set_minor_formatter(NullFormatter())
    if len(set(xs)) == 1:   # a lone x in the middle, not at the edge of some range
        ax.set_xlim(xs[0] / 2, xs[0] * 2)
    if x == "nbytes":
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: sizes(v)))
        ax.set_xlabel("size per rank")
        for label in ax.get_xticklabels():
            label.set_rotation(30)
            label.set_horizontalalignment("right")
    else:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        ax.set_xlabel("ranks")
    if y_text is format_size:
        _bytes_axis(ax, min(ys), max(ys))
    else:
        log_y_axis(ax, min(ys), max(ys), y_text or tick_numbers(min(ys), max(ys)))
    ax.set_ylabel(y_label)
    ax.grid(True, which="major", alpha=0.45)
    ax.grid(True, which="minor", axis="y", alpha=0.15)


def _bytes_axis(ax: Any, lo: float, hi: float) -> None:
    """A log2 y axis of sizes over the powers of 2 from the one at or below ``lo`` to the
    one at or above ``hi`` (one octave at least), labelled in binary units at powers of
    2, every k-th octave down from the top one (the bottom moved down to a label, but
    not below 1 B where no value is, so the smallest may lie below the lowest label)
    for at most :data:`_X_TICKS` labels; data on or near an end stays a quarter octave,
    or :data:`~.style.LOG_MARGIN` of the axis, inside it, so no marker sits on the
    frame."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    first, last = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    last = max(last, first + 1)
    step = -(-(last - first) // (_X_TICKS - 1))   # at most _X_TICKS labels, both ends in
    first = last - -(-(last - first) // step) * step
    if lo >= 1:   # no fraction of a byte labelled
        first = max(first, 0)
    # LOG_MARGIN of the whole axis, its pads included
    pad = 2.0 ** max(0.25, LOG_MARGIN * (last - first) / (1 - 2 * LOG_MARGIN))
    ax.set_yscale("log", base=2)
    ax.set_ylim(min(2.0 ** first, lo / pad), max(2.0 ** last, hi * pad))
    labelled = reversed(range(last, first - 1, -step))   # down from the top one
    ax.yaxis.set_major_locator(FixedLocator([2.0 ** e for e in labelled]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(v)))
    ax.yaxis.set_minor_locator(FixedLocator([2.0 ** e for e in range(first, last + 1)]))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _settings_label(text: str, every: set[str], collective: str) -> str:
    """A line's settings as its label gives them: ``root=0`` and ``op=sum``, which
    :attr:`Point.settings` leaves out, spelt out where another of the lines (``every``
    line's settings) names a root or an op and this line's collective has one."""
    parts = text.split(", ") if text else []
    named = {p.split("=", 1)[0] for s in every if s for p in s.split(", ")}
    try:
        spec = collective_spec(collective)
    except SimCollError:   # a record of a collective this simcoll does not know
        return text
    if spec.rooted and "root" in named and not any(p.startswith("root=") for p in parts):
        parts.insert(0, "root=0")
    if spec.reduces and "op" in named and not any(p.startswith("op=") for p in parts):
        parts.append("op=sum")
    return ", ".join(parts)


def _shade(colour: tuple, t: float) -> tuple:
    """``colour`` lightened (``t`` near 0) or darkened (``t`` near 1): the lines of one
    colour, ordered by their size or parameters. A light colour (tab10's olive, its
    cyan) is only darkened, up to 55% black, so its lightest line keeps a contrast on
    white (lightened, olive's fell to 1.6:1); the others run from 25% white to 40%
    black."""
    rgb = colour[:3]
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    if luminance > 0.55:
        return tuple(c * (1 - 0.55 * t) for c in rgb) + (1.0,)
    if t < 0.5:
        mix = (0.5 - t) * 0.5                       # up to 25% white
        return tuple(c + (1 - c) * mix for c in rgb) + (1.0,)
    mix = (t - 0.5) * 0.8                           # up to 40% black
    return tuple(c * (1 - mix) for c in rgb) + (1.0,)


def _order(key: tuple) -> tuple:
    """Lines of one colour in the order their shades run: by split value, then the rest."""
    return (key[-1], tuple(str(v) for v in key[:-1]))


def _broken(line: dict[int, Point], ys: list[float], failures: list[Failure],
            x: str, split: str) -> tuple[list[float], list[float]]:
    """A line's points (``ys`` at its sorted x) with a gap (NaN, where matplotlib breaks a
    line) at every x between its first and last point where a sweep point of that line
    (:meth:`Failure.of_line`, at its ``split`` value) failed, so no segment reads as a
    value there."""
    at = sorted(line)
    point = line[at[0]]
    params = params_text(point.params)
    failed = {getattr(f, x) for f in failures
              if getattr(f, split) == getattr(point, split) and f.of_line(point, params)}
    gaps = [v for v in failed if isinstance(v, int) and at[0] < v < at[-1] and v not in at]
    points = sorted([*zip(map(float, at), ys), *((float(v), math.nan) for v in gaps)])
    return [p[0] for p in points], [p[1] for p in points]


def _left_out_notes(failures: list[Failure], skipped: list[Point], y: str) -> list[str]:
    """Legend notes for the points a figure lacks: failed sweep points, and points with
    nothing to draw on log axes, per algorithm."""
    notes = []
    failed: dict[str, Counter] = {}
    for f in failures:
        failed.setdefault(f.algorithm, Counter())[f.error_type] += 1
    for algorithm, types in failed.items():
        n = sum(types.values())
        notes.append(f"{algorithm}: {n} point{'s' * (n != 1)} failed "
                     f"({', '.join(sorted(types))})")
    empty: dict[str, dict[str, None]] = {}
    counts: Counter = Counter()
    for p in skipped:
        why = ("at 1 rank" if p.nranks == 1 else "of 0 bytes" if p.nbytes == 0
               else f"with no {y}")
        empty.setdefault(why, {})[p.algorithm] = None
        counts[why] += 1
    for why, algorithms in empty.items():
        n = counts[why]
        notes.append(f"{n} point{'s' * (n != 1)} {why} not drawn ({', '.join(algorithms)})")
    return notes


def scaling(records: Iterable[Record], *, x: str = "nranks",
            y: str = "time", by: str = "algorithm", split: str | None = None,
            formula: bool = False, alpha: float | None = None, beta: float | None = None,
            gamma: float | None = None, ax: Any = None, legend: str | None = None,
            save: str | os.PathLike | None = None) -> Figure:
    """Plot ``y`` against ``x`` on log axes, one line per group of comparable points.

    Points join into one line only when everything but ``x`` is the same: collective,
    algorithm and its parameters, root and op, the run's faults, topology (up to the
    numbers that scale with ``x``), network, dtype, and the ``split`` value (the size when
    ``x="nranks"``). Bandwidths are in GB/s (10^9 bytes/s), times in s, ms or µs as the
    data suits, sizes in binary units (in decimal ones where they were given so: 1 kB,
    10 MB; :func:`~.style.size_writer`).
    The title names what all lines share, e.g. "all_reduce/ring on switch(p), 64 MiB per
    rank" (with the parameters, a network other than flow and a dtype other than float32).
    Each ``by`` value keeps a colour and marker; its lines at several sizes (or parameter
    values) run from light to dark in that colour, or, with one ``by`` value, along the
    viridis colour map, in the order of the size. A log y axis spans at least a factor of
    2, with both its ends labelled where the data spans less than 10^2.5 (beyond, every
    power of ten is). Points that cannot sit on log axes (time, size or
    bandwidth 0 or missing, as for one rank) and failed sweep points are left out, and the
    legend says how many: the failed ones per algorithm, the others per reason, with the
    algorithms they belong to.

    Args:
        records: ``Result`` objects, dicts as ``Result.to_dict()`` writes them, or a sweep
            file's records (its lines, :attr:`SweepResults.records`).
        x: ``"nranks"`` or ``"nbytes"``.
        y: ``"time"``, ``"busbw"``, ``"algbw"``, or ``"bytes_sent"``: the most bytes
            one GPU rank or server host sent (an in-network device's multicast is not
            counted, as no cost model counts it), the busiest sender's traffic,
            on a log2 axis labelled in binary units (with ``formula=True`` the traffic
            model's, ``simcoll.cost.traffic``, which needs no alpha, beta or gamma).
        by: the field that picks a line's colour: ``"algorithm"``, ``"collective"``,
            ``"topology"``, ``"network"`` or ``"dtype"``.
        split: the field that splits lines further, the other of ``nranks`` / ``nbytes``
            by default.
        formula: also draw ``simcoll.cost.predict`` for each line, dashed in its colour,
            at the simulated x values; the legend says where the model does not apply.
        alpha, beta, gamma: the model's seconds per message, seconds per byte and seconds
            per reduced byte (required with ``formula=True`` but for ``y="bytes_sent"``;
            ``gamma=0`` for free reductions; refused without ``formula=True``). On
            ``switch(p, bandwidth=B, latency=L)``: alpha = 2 L, beta = 1/B.
        ax: a matplotlib Axes to draw on (a new figure otherwise).
        legend: ``"right"`` (beside the axes; a new figure widens to hold it),
            ``"inside"`` (the axes' best corner) or ``"none"``; by default ``"right"`` in a
            new figure and ``"inside"`` on a given ``ax``, so the caller's layout holds.
        save: write the figure there (PNG, SVG, PDF, ... by extension).

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: a bad axis, field, legend, ``ax`` or save path,
            ``formula=True`` without alpha, beta and gamma (each a number >= 0), or those
            given without it; no records, bad ones (see :func:`~.records.read_all`), no
            point that can be drawn, or more than :data:`MAX_LINES` lines; points of one
            line that ran on other machines, or took other times on one, or (of a
            v-collective) other splits at one x or, along sizes, in other proportions.
    """
    split = split if split is not None else ("nbytes" if x == "nranks" else "nranks")
    if x not in _XS or y not in _YS or split not in _XS or split == x or by not in _BYS:
        raise InvalidInputError(
            f"cannot plot y={y!r} against x={x!r} by={by!r} split={split!r}; use x and "
            f"split in {_XS} (different), y in {_YS}, by in {_BYS}")
    place = legend_place(legend, ax is not None)
    check_axes(ax)
    model_args: tuple[float, float, float] | None = None
    if flag(formula, "formula") and y == "bytes_sent" and alpha is beta is gamma is None:
        model_args = (0.0, 0.0, 0.0)   # the traffic model reads no constant
    elif formula:
        if alpha is None or beta is None or gamma is None:
            raise InvalidInputError(
                f"formula=True needs the model's alpha (s per message), beta (s per byte) "
                f"and gamma (s per reduced byte, 0 if free); got alpha={alpha!r}, "
                f"beta={beta!r}, gamma={gamma!r}")
        model_args = cost.check_constants(alpha, beta, gamma)
    elif any(c is not None for c in (alpha, beta, gamma)):   # for a model not drawn
        raise InvalidInputError(
            f"alpha={alpha!r}, beta={beta!r}, gamma={gamma!r} are the model's constants, "
            f"which only formula=True draws; pass formula=True or leave them out")
    path = checked_save_path(save)
    everything, failures = read_all(records)
    points = [p for p in everything if (p.value(y) or 0) > 0 and (p.value(x) or 0) > 0]
    if not everything and not failures:
        raise InvalidInputError("no records given: nothing to plot")
    if not points:
        failed = f" ({len(failures)} failed)" if failures else ""
        zero = [name for name in (x, y) if everything and all(
            not (p.value(name) or 0) > 0 for p in everything)]
        said = zero[0] if len(zero) == 1 else f"{x} and {y}"
        barrier = zero == [y] and all(p.collective == "barrier" for p in everything)
        hint = " (a barrier moves no data: plot its time, y='time' or --y time)" \
            if barrier else ""
        raise InvalidInputError(f"no record has a positive {said} to plot{failed}{hint}")
    skipped = [p for p in everything if not ((p.value(y) or 0) > 0
                                             and (p.value(x) or 0) > 0)]
    groups = _groups(points, x, split)
    sizes = size_writer(p.nbytes for p in points)
    if len(groups) > MAX_LINES:
        raise InvalidInputError(
            f"the records make {len(groups)} lines (one per {by} and {split} and what "
            f"else differs), more than a figure shows ({MAX_LINES}); plot against "
            f"x={split!r} (simcoll plot --x {split}), or fewer records")

    import matplotlib
    from matplotlib.lines import Line2D

    y_text: Callable[[float], str] | None = None   # numbers: tick_numbers of the data
    if y == "time":
        times = [p.value(y) or 0 for p in points]
        if max(times) > _DECADES * min(times):
            # Over more than three decades each tick names its own unit (10 µs, 1 ms).
            factor, y_label, y_text = 1.0, "time", format_time_tick
        else:
            unit, factor = time_unit(max(times))
            y_label = f"time ({unit})"
    elif y == "bytes_sent":
        factor, y_label, y_text = 1.0, "bytes sent by the busiest GPU or host", format_size
    else:
        factor, y_label = 1e-9, f"{y} (GB/s)"
    own = ax is None
    fig, ax = new_axes(ax, (7.0, 4.2))
    varies = [len({key[i] for key in groups}) > 1 for i in range(len(_KEY))]
    settings = {key[_KEY.index("settings")] for key in groups}
    by_index = _KEY.index(by)
    slot_of = _slots([key[by_index] for key in groups], by)
    palette = [tuple(matplotlib.colormaps[name](i)) for name, n in _PALETTES
               for i in range(n)]
    members: dict[Any, list[tuple]] = {}
    for key in groups:
        members.setdefault(key[by_index], []).append(key)
    ramp = matplotlib.colormaps["viridis"]
    drawn_ys: list[float] = []
    modelled = False   # whether any line has its model drawn
    for colour_value in sorted(members, key=lambda v: slot_of[v]):
        keys = sorted(members[colour_value], key=_order)
        slot = slot_of[colour_value]
        base = palette[slot % len(palette)]
        # A marker per colour, so lines stay apart in grayscale; the lines of one colour
        # (sizes, parameter values) are shaded in order, light to dark.
        marker = _MARKERS[slot % len(_MARKERS)]
        for n, key in enumerate(keys):
            line = groups[key]
            if len(keys) == 1:
                colour = base
            elif len(members) == 1:
                colour = tuple(ramp(0.85 * n / (len(keys) - 1)))
            else:
                colour = _shade(base, n / (len(keys) - 1))
            fields = dict(zip(_KEY, key))
            fields["settings"] = _settings_label(fields["settings"], settings,
                                                 str(fields["collective"]))
            parts = [str(fields[by])] + [
                (_split_text(split, fields[name], sizes) if name == "split"
                 else str(fields[name]))
                for name, vary in zip(_KEY, varies)
                if vary and name != by and fields[name] != ""]   # a size of 0 is one
            at = sorted(line)
            ys = [(line[v].value(y) or 0) * factor for v in at]
            drawn_ys.extend(ys)
            drawn = []
            if model_args is not None:
                model = [_formula(line[v], y, *model_args) for v in at]
                drawn = [(v, m * factor) for v, m in zip(at, model) if m is not None]
                if drawn:
                    # On top of a lighter simulated line, so both show where they coincide.
                    ax.plot([d[0] for d in drawn], [d[1] for d in drawn], linestyle="--",
                            color=colour, linewidth=1.3, label="_formula", gid="formula",
                            zorder=3)
                    drawn_ys.extend(d[1] for d in drawn)
                if len(drawn) < len(at):
                    parts.append("no model" if not drawn
                                 else f"model at {len(drawn)} of {len(at)} points")
            label = ", ".join(parts[:1]) + (f" ({', '.join(parts[1:])})" if parts[1:]
                                             else "")
            # faded and wide under its model's dashes; as plain lines where no model is drawn
            line_colour = (*colour[:3], 0.45) if drawn else colour
            modelled = modelled or bool(drawn)
            ax.plot(*_broken(line, ys, failures, x, split), marker=marker,
                    markersize=5.5, color=line_colour,
                    linewidth=3.0 if drawn else 1.6, markerfacecolor=colour,
                    markeredgecolor=colour, label=literal(label), gid="simulated")
    axes_width = _AXES_WIDTH if own else ax.get_position().width * fig.get_figwidth()
    _style_axes(ax, x, [float(v) for line in groups.values() for v in line], drawn_ys,
                y_label, y_text, axes_width, sizes)
    handles, _ = ax.get_legend_handles_labels()
    if model_args is not None and modelled:
        handles.append(Line2D([], [], color="0.35", linestyle="--",
                              label="traffic model (dashed)" if y == "bytes_sent"
                              else "α-β model (dashed)" if model_args[2] == 0
                              else "α-β-γ model (dashed)"))
    for note in _left_out_notes(failures, skipped, y):
        handles.append(Line2D([], [], color="0.45", marker="x", linestyle="none",
                              label=literal(note)))
    columns = -(-len(handles) // _LEGEND_ROWS)
    title = wrapped(_title(groups, varies, split, sizes), max(30, int(axes_width * 12)))
    ax.set_title(title, fontsize="medium")
    if place == "right":
        box = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                        fontsize="small", frameon=False, ncols=columns)
    elif place == "inside":
        box = ax.legend(handles=handles, loc="best", fontsize="small", framealpha=0.85,
                        ncols=columns)
    if own and place == "right":
        # The figure is sized from its legend: the data area keeps its width.
        extent = box.get_window_extent()
        width, height = extent.width / fig.dpi, extent.height / fig.dpi
        lines_in_title = title.count("\n") + 1
        fig.set_size_inches(0.95 + _AXES_WIDTH + 0.25 + width + 0.1,
                            max(4.2, height + 0.45 + 0.2 * lines_in_title))
    return finish(fig, path)


def _title(groups: dict[tuple, dict[int, Point]], varies: list[bool], split: str,
           sizes: Callable[[float], str] = format_size) -> str:
    """What every line shares: collective/algorithm (parameters) on topology, split value
    (a size written by ``sizes``), network and dtype where not the defaults."""
    first = dict(zip(_KEY, next(iter(groups))))
    fixed = {name: first[name] for name, vary in zip(_KEY, varies) if not vary}
    what = "/".join(str(fixed[name]) for name in ("collective", "algorithm")
                    if name in fixed)
    shared = ", ".join(str(fixed[name]) for name in ("params", "settings", "faults")
                       if fixed.get(name))
    if shared:
        what = f"{what} ({shared})" if what else shared
    topology = str(fixed.get("topology") or "")
    head = " on ".join(part for part in (what, topology) if part)
    tail = [_split_text(split, fixed["split"], sizes)] if "split" in fixed else []
    if split == "nranks" and topology.endswith(f"({fixed.get('split')})"):
        tail = []   # "switch(8)" says 8 ranks already
    if split == "nbytes" and fixed.get("collective") == "barrier":
        tail = []   # a barrier moves no data: "0 B per rank" says nothing
    if fixed.get("network") not in (None, _DEFAULT_NETWORK):
        tail.append(f"{fixed['network']} network")
    if fixed.get("dtype") not in (None, _DEFAULT_DTYPE, "?"):
        tail.append(str(fixed["dtype"]))
    return ", ".join([head] + tail if head else tail)


def plot_scaling(results: Iterable[Record], *, x: str = "nranks",
                 y: str = "time", ax: Any = None,
                 save: str | os.PathLike | None = None, **options: Any) -> Axes:
    """:func:`scaling` under its first name, returning the Axes as it always did.

    Returns:
        The matplotlib Axes drawn on.
    """
    fig = scaling(results, x=x, y=y, ax=ax, save=save, **options)
    return ax if ax is not None else fig.axes[0]
