"""Scaling plots from results; matplotlib is imported here only, when a plot is drawn."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from simcoll.errors import InvalidInputError
from simcoll.result import Result

__all__ = ["plot_scaling"]

_AXES = {"nranks": "ranks", "nbytes": "bytes per rank", "time": "time (s)",
         "algbw": "algbw (bytes/s)", "busbw": "busbw (bytes/s)"}


def plot_scaling(results: Iterable[Result], *, x: str = "nranks", y: str = "time",
                 ax: Any = None, save: str | os.PathLike | None = None) -> Any:
    """Plot ``y`` against ``x``, one line per algorithm, on log-log axes.

    Args:
        x: ``"nranks"`` or ``"nbytes"``.
        y: ``"time"``, ``"algbw"`` or ``"busbw"``.
        ax: a matplotlib Axes to draw on (a new figure otherwise).
        save: write the figure to this file (PNG, SVG, PDF ... by extension).

    Returns:
        The matplotlib Axes.
    """
    if x not in ("nranks", "nbytes") or y not in ("time", "algbw", "busbw"):
        raise InvalidInputError(f"cannot plot y={y!r} against x={x!r}; use x in "
                                f"('nranks', 'nbytes') and y in ('time', 'algbw', 'busbw')")
    import matplotlib

    if ax is None and save is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in results:
        lines[f"{r.collective}/{r.algorithm}"].append((getattr(r, x), getattr(r, y)))
    if not lines:
        raise InvalidInputError("no results to plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for label, points in lines.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(_AXES[x])
    ax.set_ylabel(_AXES[y])
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    if save is not None:
        ax.figure.savefig(save, bbox_inches="tight", dpi=120)
    return ax
