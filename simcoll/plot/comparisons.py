"""A measured nccl-tests table beside the same sizes simulated (:func:`simcoll.compare`)."""

from __future__ import annotations

import os
from typing import Any

from simcoll.comparison import Comparison
from simcoll.errors import InvalidInputError
from simcoll.plot.style import checked_save_path, finish, format_size, wrapped

__all__ = ["comparison"]

RATIO_TICKS = (0.1, 0.25, 0.5, 1, 2, 4, 10)
"""The simulated / measured ticks the lower panel may show."""


def comparison(found: Comparison, *, axes: tuple[Any, Any] | None = None,
               title: str | None = None, save: str | os.PathLike | None = None) -> Any:
    """Draw busbw against size, measured and simulated, and below it the simulated over
    the measured time, with a band for 10% either way.

    Both busbw curves come from the times (size / time x nccl-tests' bus factor), so
    sizes whose printed busbw rounds to 0.00 still show.

    Args:
        found: what :func:`simcoll.compare` returned.
        axes: ``(upper, lower)`` matplotlib Axes to draw on (a new figure otherwise),
            so that a caller can add its own series.
        title: the upper panel's title; by default what was compared.
        save: write the figure there (PNG, SVG, PDF, ... by extension).

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: ``found`` is not a Comparison, or a bad save path.
    """
    if not isinstance(found, Comparison):
        raise InvalidInputError(f"found={found!r} is not a Comparison; pass what "
                                f"sc.compare returned")
    path = checked_save_path(save)
    if axes is None:
        import matplotlib.pyplot as plt

        fig, (upper, lower) = plt.subplots(2, 1, figsize=(6.4, 5.2), sharex=True,
                                           height_ratios=(3, 1.4), layout="constrained")
    else:
        upper, lower = axes
        fig = upper.figure
    sizes, factor = found.sizes, found.busbw_factor
    measured = [n * factor / t / 1e9 for n, t in zip(sizes, found.measured)]
    simulated = [n * factor / t / 1e9 for n, t in zip(sizes, found.simulated)]
    # Measured points on top, so a simulated marker at the same place cannot hide them.
    upper.plot(sizes, measured, marker="o", linestyle="", color="black", markersize=3.5,
               label="measured (nccl-tests)", zorder=3)
    # Two points mark each size and join them dotted: nothing between them was simulated.
    few = dict(marker="s", markersize=4, linestyle=":") if len(sizes) < 3 else \
        dict(linestyle="-")
    upper.plot(sizes, simulated, color="#4f81bd", linewidth=1.8,
               label=f'simcoll, algorithm="{found.algorithm}"', **few)
    ratios = [s / m for s, m in zip(found.simulated, found.measured)]
    lower.plot(sizes, ratios, color="#4f81bd", linewidth=1.8, **few)
    lower.axhspan(0.9, 1.1, color="#9bbb59", alpha=0.4, linewidth=0)
    lower.axhline(1.0, color="black", linewidth=0.6)
    lower.text(0.99, 0.96, "band: within 10%", transform=lower.transAxes, ha="right",
               va="top", fontsize=7.5, color="0.35")
    upper.set_xscale("log", base=2)
    # busbw spans decades over a table's sizes; within less than one, a log axis has
    # no decade to label, so it stays linear
    values = measured + simulated
    if max(values) >= 10 * min(values):
        from matplotlib.ticker import FuncFormatter

        upper.set_yscale("log")
        upper.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    lower.set_yscale("log")
    # from the tick at or below the smallest ratio (0.5 at least) to the one at or above
    # the largest (2 at least), with room for the line
    low = max([t for t in RATIO_TICKS if t <= min(0.5, min(ratios) / 1.1)],
              default=min(ratios) / 1.1)
    high = min([t for t in RATIO_TICKS if t >= max(2.0, max(ratios) * 1.1)],
               default=max(ratios) * 1.1)
    lower.set_ylim(low, high)
    ratio_ticks = [t for t in RATIO_TICKS if low <= t <= high]
    lower.set_yticks(ratio_ticks, [f"{t:g}" for t in ratio_ticks])
    lower.minorticks_off()
    # the sizes themselves where there are few, else powers of 2 every 1, 2 or 10
    # octaves (1 KiB, 1 MiB, 1 GiB; never 32 B next to 1 KiB): at most 8; the sizes
    # themselves, thinned, where no power of 2 falls among them
    distinct = sorted(set(sizes))
    powers = ([2**j for j in range(0, 64, step) if min(sizes) <= 2**j <= max(sizes)]
              for step in (1, 2, 10, 20))
    ticks = distinct if len(distinct) <= 8 else next(
        (p for p in powers if 0 < len(p) <= 8), distinct[:: max(1, len(distinct) // 8)])
    lower.set_xticks(ticks, [format_size(t) for t in ticks])
    octaves = [2**j for j in range(0, 64) if min(sizes) <= 2**j <= max(sizes)]
    lower.set_xticks(octaves, [""] * len(octaves), minor=True)  # every octave, unlabelled
    upper.tick_params(labelbottom=False)
    upper.set_title(title if title is not None else
                    wrapped(f"{found.collective} / {found.algorithm} on {found.topology}: "
                            f"geometric-mean |time error| {found.geomean_error:.1%} "
                            f"(times a factor of {1 + found.geomean_error:.2f} apart)"),
                    fontsize=9.5)
    upper.set_ylabel("busbw (GB/s)")
    lower.set_ylabel("time sim. /\nmeasured", fontsize=8.5)
    lower.set_xlabel(f"{found.collective} size")
    for ax in (upper, lower):
        ax.grid(True, which="major", alpha=0.3)
    upper.legend(fontsize=8, loc="upper left")
    return finish(fig, path)
