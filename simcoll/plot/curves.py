"""Scaling curves: time or bandwidth against rank count or size, one line per group."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from simcoll import cost
from simcoll.algorithms.registry import get_algorithm
from simcoll.checks import flag
from simcoll.collectives import collective as collective_spec
from simcoll.errors import InvalidInputError, SimCollError
from simcoll.plot.records import Point, read_points, topology_templates
from simcoll.plot.style import (
    checked_save_path,
    finish,
    format_duration,
    format_size,
    new_axes,
    time_unit,
)
from simcoll.result import Result

__all__ = ["scaling", "plot_scaling"]

_XS = ("nranks", "nbytes")
_YS = ("time", "busbw", "algbw")
_BYS = ("algorithm", "collective", "topology", "network", "dtype")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_FILLS = ("full", "none", "left", "bottom", "right", "top")
"""How the lines of one colour (one algorithm at several sizes, say) fill its marker."""
_LEGEND_ROWS = 30
"""The most legend entries in one column; a new figure grows to hold them."""
_DECADES = 1e3
"""Times spread over more than this factor get a unit per tick instead of one for the
axis."""


_ALGORITHM_SLOTS = ("ring", "tree", "double_binary_tree", "recursive_doubling",
                    "rabenseifner", "naive", "parameter_server", "direct", "nccl", "bruck")
"""Algorithms that keep their colour and marker in every figure (others take the slots
after these, in the order they come)."""
_COLOUR_ORDER = (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19)
"""tab20's ten dark colours (tab10's), then their light pairs."""


def _slots(values: list[Any], by: str) -> dict[Any, int]:
    """Each line colour's slot: an algorithm's fixed one where it has one, else the next
    free slot in the order the values come."""
    fixed = {name: i for i, name in enumerate(_ALGORITHM_SLOTS)} if by == "algorithm" else {}
    slots: dict[Any, int] = {}
    taken = {fixed[v] for v in values if v in fixed}
    free = (i for i in itertools.count() if i not in taken)
    for value in values:
        if value not in slots:
            slots[value] = fixed[value] if value in fixed else next(free)
    return slots


def _plain(value: float) -> str:
    return f"{value:g}"
# The fields that tell groups apart, in the order labels list them.
_KEY = ("collective", "algorithm", "params", "topology", "network", "dtype", "split")


def _split_text(split: str, value: int) -> str:
    return f"{format_size(value)} per rank" if split == "nbytes" else f"{value} ranks"


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))


def _kind(machine: str | None) -> str | None:
    """Which record field ``machine`` came from (only like ones compare)."""
    return None if machine is None else machine.split("=", 1)[0]


def _groups(points: list[Point], x: str, split: str) -> dict[tuple, dict[int, Point]]:
    """Points by group key, each group's points by x; a later point with the same key and
    x replaces an earlier one (a rerun), unless their topologies differ.

    Raises:
        InvalidInputError: two points of one line ran on different machines: of different
            names at one x, or of one name (told apart by the records' topology hash or
            spec) at one rank count, or, ``Result`` objects (which do not say), two
            points at one x that took different times.
    """
    names = topology_templates(points) if x == "nranks" else [p.topology for p in points]
    groups: dict[tuple, dict[int, Point]] = {}
    machines: dict[tuple, Point] = {}
    for p, topology in zip(points, names):
        key = (p.collective, p.algorithm, _params_text(p.params), topology, p.network,
               p.dtype, getattr(p, split))
        line = groups.setdefault(key, {})
        at = getattr(p, x)
        if at in line and line[at].topology != p.topology:
            raise InvalidInputError(
                f"two {p.collective}/{p.algorithm} points at {x}={at} ran on different "
                f"topologies ({line[at].topology!r} and {p.topology!r}); plot them apart")
        if at in line and p.from_result and line[at].from_result \
                and line[at].time != p.time:
            raise InvalidInputError(
                f"two {p.collective}/{p.algorithm} points at {x}={at} on {p.topology!r} "
                f"took different times ({format_duration(line[at].time or 0.0)} and "
                f"{format_duration(p.time or 0.0)}): machines of one name, or other "
                f"settings; pass a sweep's results or records (their topology hash tells "
                f"machines apart) or plot them apart")
        same = machines.setdefault((key, p.nranks, _kind(p.machine)), p)
        if same.machine != p.machine:
            raise InvalidInputError(
                f"two {p.collective}/{p.algorithm} lines on {p.topology!r} ran on different "
                f"machines of that name ({same.machine!r} and {p.machine!r}); plot them "
                f"apart")
        line[at] = p
    return groups


def _formula(p: Point, y: str, alpha: float, beta: float, gamma: float) -> float | None:
    """The cost model's value of ``y`` at ``p``, or None where it does not apply."""
    params = dict(p.params)
    try:
        if "hosts" in get_algorithm(p.collective, p.algorithm).cost.machine:
            params["hosts"] = p.hosts
        t = cost.predict(p.collective, p.algorithm, p=p.nranks, nbytes=p.nbytes,
                         alpha=alpha, beta=beta, gamma=gamma, **params)
    except (SimCollError, TypeError):
        return None
    if not t > 0 or not math.isfinite(t):
        return None
    if y == "time":
        return t
    spec = collective_spec(p.collective)
    algbw = p.nbytes * spec.size_factor(p.nranks) / t
    return algbw if y == "algbw" else algbw * spec.busbw_factor(p.nranks)


def _ticks(values: list[float]) -> list[float]:
    """The data's own x values if few, else powers of two over their range, every 2nd,
    10th or 20th power (so sizes land on 1 KiB, 1 MiB, 1 GiB, never 32 B next to 1 KiB),
    at most 10 of them."""
    distinct = sorted(set(values))
    if len(distinct) <= 12:
        return distinct
    lo, hi = math.ceil(math.log2(distinct[0])), math.floor(math.log2(distinct[-1]))
    for step in (1, 2, 10, 20):
        exponents = [e for e in range(lo, hi + 1) if e % step == 0]
        if len(exponents) <= 10:
            break
    return [2.0 ** e for e in exponents]


def _octaves(values: list[float]) -> list[float]:
    """Every power of two over the values' range: the unlabelled minor ticks."""
    return [2.0 ** e for e in range(math.ceil(math.log2(min(values))),
                                     math.floor(math.log2(max(values))) + 1)]


def _style_axes(ax: Any, x: str, y: str, xs: list[float], y_label: str,
                y_text: Callable[[float], str]) -> None:
    from matplotlib.ticker import (
        FixedLocator,
        FuncFormatter,
        LogFormatter,
        LogLocator,
        NullFormatter,
    )

    class MinorLabels(LogFormatter):
        """The minor ticks LogFormatter labels (where the axis spans few decades),
        written as the major ones are."""

        def __call__(self, value: float, pos: int | None = None) -> str:
            return y_text(value) if super().__call__(value, pos) else ""

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(_ticks(xs)))
    ax.xaxis.set_minor_locator(FixedLocator(_octaves(xs)))  # unlabelled
    ax.xaxis.set_minor_formatter(NullFormatter())
    if x == "nbytes":
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(v)))
        ax.set_xlabel("size per rank")
        for label in ax.get_xticklabels():
            label.set_rotation(30)
            label.set_horizontalalignment("right")
    else:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        ax.set_xlabel("ranks")
    ax.yaxis.set_major_locator(LogLocator(base=10, numticks=99))  # every decade
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: y_text(v)))
    ax.yaxis.set_minor_formatter(MinorLabels(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.set_ylabel(y_label)
    ax.grid(True, which="major", alpha=0.45)
    ax.grid(True, which="minor", axis="y", alpha=0.15)


def scaling(records: Iterable[Result | Mapping[str, Any]], *, x: str = "nranks",
            y: str = "time", by: str = "algorithm", split: str | None = None,
            formula: bool = False, alpha: float | None = None, beta: float | None = None,
            gamma: float | None = None, ax: Any = None,
            save: str | os.PathLike | None = None) -> Any:
    """Plot ``y`` against ``x`` on log axes, one line per group of comparable points.

    Points join into one line only when everything but ``x`` is the same: collective,
    algorithm and its parameters, topology (up to the numbers that scale with ``x``),
    network, dtype, and the ``split`` value (the size when ``x="nranks"``). Bandwidths are
    in GB/s (10^9 bytes/s), times in s, ms or µs as the data suits, sizes in binary units.
    The title names what all lines share, e.g. "all_reduce on switch(p), 64 MiB per rank".
    Points that cannot sit on log axes (time, size or bandwidth 0 or missing, as for one
    rank) and records saved with an ``error`` are left out.

    Args:
        records: ``Result`` objects, or dicts as ``Result.to_dict()`` writes them (the lines
            of a sweep file).
        x: ``"nranks"`` or ``"nbytes"``.
        y: ``"time"``, ``"busbw"`` or ``"algbw"``.
        by: the field that picks a line's colour: ``"algorithm"``, ``"collective"``,
            ``"topology"``, ``"network"`` or ``"dtype"``.
        split: the field that splits lines further, the other of ``nranks`` / ``nbytes``
            by default.
        formula: also draw ``simcoll.cost.predict`` for each line, dashed in its colour,
            at the simulated x values; the legend says where the model does not apply.
        alpha, beta, gamma: the model's seconds per message, seconds per byte and seconds
            per reduced byte (required with ``formula=True``; ``gamma=0`` for free
            reductions). On ``switch(p, bandwidth=B, latency=L)``: alpha = 2 L, beta = 1/B.
        ax: a matplotlib Axes to draw on (a new figure otherwise).
        save: write the figure there (PNG, SVG, PDF, ... by extension).

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: a bad axis, field or save path, ``formula=True`` without
            alpha, beta and gamma (each a number >= 0), or no point that can be drawn.
    """
    split = split if split is not None else ("nbytes" if x == "nranks" else "nranks")
    if x not in _XS or y not in _YS or split not in _XS or split == x or by not in _BYS:
        raise InvalidInputError(
            f"cannot plot y={y!r} against x={x!r} by={by!r} split={split!r}; use x and "
            f"split in {_XS} (different), y in {_YS}, by in {_BYS}")
    model_args: tuple[float, float, float] | None = None
    if flag(formula, "formula"):
        if alpha is None or beta is None or gamma is None:
            raise InvalidInputError(
                f"formula=True needs the model's alpha (s per message), beta (s per byte) "
                f"and gamma (s per reduced byte, 0 if free); got alpha={alpha!r}, "
                f"beta={beta!r}, gamma={gamma!r}")
        model_args = cost.check_constants(alpha, beta, gamma)
    path = checked_save_path(save)
    points = [p for p in read_points(records)
              if (p.value(y) or 0) > 0 and (p.value(x) or 0) > 0]
    if not points:
        raise InvalidInputError(f"no record has a positive {x} and {y} to plot")
    groups = _groups(points, x, split)

    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    y_text: Callable[[float], str] = _plain
    if y == "time":
        times = [p.value(y) or 0 for p in points]
        if max(times) > _DECADES * min(times):
            # Over more than three decades each tick names its own unit (10 µs, 1 ms).
            factor, y_label, y_text = 1.0, "time", format_duration
        else:
            unit, factor = time_unit(max(times))
            y_label = f"time ({unit})"
    else:
        factor, y_label = 1e-9, f"{y} (GB/s)"
    entries = len(groups) + (model_args is not None)
    columns = -(-entries // _LEGEND_ROWS)
    rows = -(-entries // columns)
    fig, ax = new_axes(ax, (7.0 + 1.6 * (columns - 1), max(4.2, 0.9 + 0.19 * rows)))
    varies = [len({key[i] for key in groups}) > 1 for i in range(len(_KEY))]
    slot_of = _slots([dict(zip(_KEY, key))[by] for key in groups], by)
    palette = [tuple(c) for c in plt.get_cmap("tab20")(range(20))]
    lines_of: dict[Any, int] = {}
    for key, line in groups.items():
        fields = dict(zip(_KEY, key))
        colour_value = fields[by]
        slot = slot_of[colour_value]
        colour = palette[_COLOUR_ORDER[slot % len(_COLOUR_ORDER)]]
        # A marker per colour, so lines stay apart in grayscale; further lines of one
        # colour (other sizes) keep its marker and fill it differently.
        marker = _MARKERS[slot % len(_MARKERS)]
        fill = _FILLS[lines_of.get(colour_value, 0) % len(_FILLS)]
        lines_of[colour_value] = lines_of.get(colour_value, 0) + 1
        parts = [str(fields[by])] + [
            (_split_text(split, fields[name]) if name == "split" else str(fields[name]))
            for name, vary in zip(_KEY, varies) if vary and name != by and fields[name]]
        at = sorted(line)
        ys = [(line[v].value(y) or 0) * factor for v in at]
        if model_args is not None:
            model = [_formula(line[v], y, *model_args) for v in at]
            drawn = [(v, m * factor) for v, m in zip(at, model) if m is not None]
            if drawn:
                # On top of a lighter simulated line, so both show where they coincide.
                ax.plot([d[0] for d in drawn], [d[1] for d in drawn], linestyle="--",
                        color=colour, linewidth=1.3, label="_formula", gid="formula",
                        zorder=3)
            if len(drawn) < len(at):
                parts.append("no model" if not drawn
                             else f"model at {len(drawn)} of {len(at)} points")
        label = ", ".join(parts[:1]) + (f" ({', '.join(parts[1:])})" if parts[1:] else "")
        line_colour = (*colour[:3], 0.45) if model_args else colour
        ax.plot(at, ys, marker=marker, markersize=5.5, color=line_colour,
                linewidth=3.0 if model_args else 1.6, markerfacecolor=colour,
                markerfacecoloralt="white", fillstyle=fill, markeredgecolor=colour,
                label=label, gid="simulated")
    _style_axes(ax, x, y, [float(v) for line in groups.values() for v in line], y_label,
                y_text)
    handles, _ = ax.get_legend_handles_labels()
    if model_args is not None:
        handles.append(Line2D([], [], color="0.35", linestyle="--",
                              label="α-β-γ model (dashed)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              fontsize="small", frameon=False, ncols=columns)
    ax.set_title(_title(groups, varies, split))
    return finish(fig, path)


def _title(groups: dict[tuple, dict[int, Point]], varies: list[bool], split: str) -> str:
    first = dict(zip(_KEY, next(iter(groups))))
    fixed = {name: first[name] for name, vary in zip(_KEY, varies) if not vary}
    head = " on ".join(str(fixed[name]) for name in ("collective", "topology")
                       if name in fixed)
    tail = [_split_text(split, fixed["split"])] if "split" in fixed else []
    return ", ".join([head] + tail if head else tail)


def plot_scaling(results: Iterable[Result | Mapping[str, Any]], *, x: str = "nranks",
                 y: str = "time", ax: Any = None,
                 save: str | os.PathLike | None = None, **options: Any) -> Any:
    """:func:`scaling` under its first name, returning the Axes as it always did.

    Returns:
        The matplotlib Axes drawn on.
    """
    fig = scaling(results, x=x, y=y, ax=ax, save=save, **options)
    return ax if ax is not None else fig.axes[0]
