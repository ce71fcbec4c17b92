"""A measured nccl-tests table beside the same sizes simulated (:func:`simcoll.compare`)."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from simcoll.comparison import SETTING_HEADS, Comparison, setting_words
from simcoll.errors import InvalidInputError
from simcoll.plot.style import (
    checked_save_path,
    finish,
    log_y_axis,
    octaves,
    size_ticks,
    size_writer,
    tick_numbers,
    wrapped,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["comparison"]

RATIO_TICKS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 10, 20, 50,
               100, 200, 500, 1000)
"""The simulated / measured ticks the lower panel may show (past 0.1 and 10 the axis
spans decades, and shows 1 and the powers of 10 among them, and its ends)."""
_SIZE_TICKS = 7
"""The most labelled sizes on the x axis."""


def _ratio_ticks(low: float, high: float) -> list[float]:
    """The ratio ticks from ``low`` to ``high``: all of them within 0.1..10, else 1, the
    powers of 10 and the ends."""
    ticks = [t for t in RATIO_TICKS if low <= t <= high]
    if low >= 0.1 and high <= 10:
        return ticks
    kept = [t for t in ticks if math.log10(t).is_integer()]
    # an end that is not a power of 10 too, where its label has room (an eighth of the
    # axis from the nearest)
    room = math.log10(high / low) / 8
    return sorted(kept + [end for end in {low, high} - set(kept)
                          if min(abs(math.log10(end / t)) for t in kept) >= room])


_LABELLED = 10
"""The most series (types, ops, roots of a ``-d all`` / ``-o all`` table) the legend
names one by one; more are one entry."""


def _series(found: Comparison) -> list[tuple[str, list[int]]]:
    """The rows of each type / redop / root of the table, in its order, with their label:
    what varies between them (``redop prod``, ``type half, redop max``; ``""`` where the
    rows agree: one series). A ``-d all`` table repeats every size once per type: drawn
    as one line it zig-zagged between them."""
    settings = found.settings if len(found.settings) == len(found.sizes) else \
        [("", "", -1)] * len(found.sizes)
    varies = [len({s[k] for s in settings}) > 1 for k in range(3)]
    series: dict[str, list[int]] = {}
    for i, setting in enumerate(settings):
        words = setting_words(setting)
        label = ", ".join(f"{name} {word}"
                          for name, word, vary in zip(SETTING_HEADS, words, varies) if vary)
        series.setdefault(label, []).append(i)
    many = len(series) > _LABELLED   # then the legend says so once (comparison)
    return [("_" if many else label, rows) for label, rows in series.items()]


def _colours(n: int) -> list[Any]:
    """``n`` colours: simcoll's blue for one series, matplotlib's tab10 for up to ten,
    else evenly along viridis."""
    import matplotlib

    if n == 1:
        return ["#4f81bd"]
    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    return [matplotlib.colormaps["viridis"](i / (n - 1)) for i in range(n)]


def _title_width(ax: Any, fontsize: float) -> int:
    """How many characters of a title at ``fontsize`` points fit across ``ax``."""
    fig = ax.figure
    inches = ax.get_position().width * fig.get_figwidth()
    return max(30, int(inches * 72 / (0.6 * fontsize)))


def _default_title(found: Comparison) -> str:
    """What was compared and how far apart the times are: as a percentage up to a factor
    of 2, as a factor beyond (``times 132x apart``, not ``13075.3%``)."""
    factor = 1 + found.geomean_error
    what = f"{found.collective} / {found.algorithm} on {found.topology}: "
    if factor < 2:
        return what + (f"geometric-mean |time error| {found.geomean_error:.1%} (times a "
                       f"factor of {factor:.2f} apart)")
    return what + f"simulated and measured times {factor:.3g}x apart (geometric mean)"


def comparison(found: Comparison, *, axes: tuple[Any, Any] | None = None,
               title: str | None = None, save: str | os.PathLike | None = None) -> Figure:
    """Draw busbw against size, measured and simulated, and below it the simulated over
    the measured time, with a band for 10% either way; a table of several types, ops or
    roots (nccl-tests' ``-d all`` / ``-o all``) as a line per setting.

    Both busbw curves come from the times (size / time x nccl-tests' bus factor), so
    sizes whose printed busbw rounds to 0.00 still show.

    Args:
        found: what :func:`simcoll.compare` returned.
        axes: ``(upper, lower)`` matplotlib Axes to draw on (a new figure otherwise),
            so that a caller can add its own series.
        title: the upper panel's title (wrapped to the panel's width); by default what
            was compared and how far apart the times are.
        save: write the figure there (PNG, SVG, PDF, ... by extension).

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: ``found`` is not a Comparison, a ``title`` that is not a str,
            or a bad save path.
    """
    if not isinstance(found, Comparison):
        raise InvalidInputError(f"found={found!r} is not a Comparison; pass what "
                                f"sc.compare returned")
    if title is not None and not isinstance(title, str):
        raise InvalidInputError(f"title={title!r:.60} is not accepted; give a str, or None "
                                f"for what was compared")
    path = checked_save_path(save)
    if axes is None:
        import matplotlib.pyplot as plt

        fig, (upper, lower) = plt.subplots(2, 1, figsize=(6.4, 5.2), sharex=True,
                                           height_ratios=(3, 1.4), layout="constrained")
    else:
        from matplotlib.axes import Axes

        try:
            pair = list(axes)
        except TypeError:
            pair = []
        if len(pair) != 2 or not all(isinstance(a, Axes) for a in pair):
            raise InvalidInputError(f"axes={axes!r} is not accepted; give two matplotlib "
                                    f"Axes, (upper, lower), e.g. plt.subplots(2, 1)[1]")
        upper, lower = pair
        fig = upper.figure
    sizes, factor = found.sizes, found.busbw_factor
    measured = [n * factor / t / 1e9 for n, t in zip(sizes, found.measured)]
    simulated = [n * factor / t / 1e9 for n, t in zip(sizes, found.simulated)]
    ratios = [s / m for s, m in zip(found.simulated, found.measured)]
    place = "" if found.place == "out_of_place" else ", in-place"
    series = _series(found)
    for (label, rows), colour in zip(series, _colours(len(series))):
        at = [sizes[i] for i in rows]
        # Measured points on top, so a simulated marker at the same place cannot hide
        # them; two sizes are marked and joined dotted: nothing between was simulated.
        few = dict(marker="s", markersize=4, linestyle=":") if len(at) < 3 else \
            dict(linestyle="-")
        upper.plot(at, [measured[i] for i in rows], marker="o", linestyle="",
                   color="black" if len(series) == 1 else colour, markersize=3.5,
                   markeredgecolor="black", markeredgewidth=0.5, zorder=3,
                   label=f"measured (nccl-tests{place})" if len(series) == 1 else "_")
        upper.plot(at, [simulated[i] for i in rows], color=colour, linewidth=1.8,
                   label=f'simcoll, algorithm="{found.algorithm}"' if len(series) == 1
                   else label, **few)
        lower.plot(at, [ratios[i] for i in rows], color=colour, linewidth=1.8, **few)
    if len(series) > _LABELLED:
        upper.plot([], [], color="gray", linewidth=1.8,
                   label=f"{len(series)} types / ops / roots, a colour each")
    if len(series) > 1:   # what the dots and lines are, once
        upper.plot([], [], marker="o", linestyle="", color="gray", markeredgecolor="black",
                   markeredgewidth=0.5, markersize=3.5, label=f"measured (nccl-tests{place})")
        upper.plot([], [], color="gray", linewidth=1.8,
                   label=f'simcoll, algorithm="{found.algorithm}"')
    band = lower.axhspan(0.9, 1.1, facecolor="#9bbb59", alpha=0.6, edgecolor="#4f6228",
                         linewidth=0.6, linestyle=":", label="lower panel: within 10%")
    lower.axhline(1.0, color="black", linewidth=0.6)
    upper.set_xscale("log", base=2)
    lower.set_xscale("log", base=2)   # shared with upper's in the function's own figure
    # busbw spans decades over a table's sizes; within less than one, a log axis has
    # no decade to label, so it stays linear, from 0 (so a 10% gap looks like one)
    values = measured + simulated
    if max(values) >= 10 * min(values):
        log_y_axis(upper, min(values), max(values), tick_numbers(min(values), max(values)))
    else:
        upper.set_ylim(0, max(values) * 1.08)
    lower.set_yscale("log")
    # from the tick at or below the smallest ratio (0.5 at least) to the one at or above
    # the largest (2 at least), with room for the line
    low = max([t for t in RATIO_TICKS if t <= min(0.5, min(ratios) / 1.1)],
              default=min(ratios) / 1.1)
    high = min([t for t in RATIO_TICKS if t >= max(2.0, max(ratios) * 1.1)],
               default=max(ratios) * 1.1)
    lower.set_ylim(low, high)
    ratio_ticks = _ratio_ticks(low, high)
    lower.set_yticks(ratio_ticks, [f"{t:g}" for t in ratio_ticks])
    lower.minorticks_off()
    ticks = size_ticks(list(sizes), _SIZE_TICKS)
    written = size_writer(sizes)
    lower.set_xticks(ticks, [written(t) for t in ticks])
    minor = octaves(sizes)
    lower.set_xticks(minor, [""] * len(minor), minor=True)  # every octave, unlabelled
    upper.tick_params(labelbottom=False)
    upper.set_title(wrapped(title if title is not None else _default_title(found),
                            _title_width(upper, 9.5)), fontsize=9.5)
    upper.set_ylabel("busbw (GB/s)")
    lower.set_ylabel("time sim. /\nmeasured", fontsize=8.5)
    lower.set_xlabel(f"{found.collective} size")
    for ax in (upper, lower):
        ax.grid(True, which="major", alpha=0.3)
    # where it covers no point (busbw rises with size: rarely the upper left)
    handles, _ = upper.get_legend_handles_labels()
    upper.legend(handles=handles + [band], fontsize=8, loc="best")
    return finish(fig, path)
