"""Link utilization heatmaps: how busy each directed link was over time."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from simcoll.checks import integer
from simcoll.errors import InvalidInputError
from simcoll.link_load import binned_bytes, drawn_loads, warn_where_drawn_differs
from simcoll.plot.style import (
    checked_save_path,
    finish,
    new_axes,
    size_writer,
    time_unit,
    wrapped,
)
from simcoll.result import Result, RunResult
from simcoll.topology.graph import Topology

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["link_utilization", "MAX_BINS"]


def _ordinal(k: int) -> str:
    """``3rd``, ``5th``, ``21st``."""
    tail = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{tail}"

MAX_BINS = 100_000
"""The most time bins a heatmap takes: more than any figure shows as columns."""
_NAME = 14
"""The most characters of a device's name in a row label; longer ones keep their start and
end around an ellipsis (``gpu_node0_s…h100_sxm5_3``), so the heatmap keeps its width."""
_NAMED = 40
"""The most rows labelled; past it every k-th (k odd, so rows alternating between the two
directions of a link are both named)."""


def _short(name: str, most: int = _NAME) -> str:
    """``name``, or its start and end around an ellipsis in ``most`` characters."""
    if len(name) <= most:
        return name
    head = (most - 1) // 2
    return name[:head] + "…" + name[len(name) - (most - 1 - head):]


def _row_label(name: str) -> str:
    """A link's ``src->dst`` with each device's name shortened."""
    return "->".join(_short(part) for part in name.split("->"))


def link_utilization(result: RunResult, topology: Topology, *, bins: int = 100, ax: Any = None,
                     save: str | os.PathLike | None = None) -> Figure:
    """Draw a links x time heatmap of the fraction of each link's bandwidth in use.

    A trace holds each message's span, size and the instant its bytes began to move,
    not the rates the network gave it from moment to moment, so each message counts at
    its average rate from that instant to its arrival, ``wire_bytes / (end - moving)``,
    on every directed link the network routed it over when it was sent
    (``TraceEvent.links``: around links failed by then); a cell is the bytes that puts
    into its time bin, divided by the bin's length and the link's bandwidth
    (:mod:`simcoll.link_load`), the topology's: a link a fault slowed down shows the
    fraction of its nominal bandwidth, and a message that ran across the slow-down is
    drawn at its average rate on both sides of it. That is exact for a message alone on
    healthy links (one bottlenecked by a link shows 1.0 in every bin its transfer fills),
    and an approximation under contention. Each row's bytes add up to the link's total
    traffic (``Result.link_bytes``, protocol framing included), except where a message
    was in flight when a link of its route failed: it is drawn on its first route for
    its whole span, and the detour that carried its remaining bytes is not drawn (a
    warning names the links where the drawn bytes differ: :func:`~simcoll.link_load.link_loads`).
    Only links that carried bytes
    get a row, grouped by link kind where there are several (white lines between the
    groups; a group's first label names its kind, and on large machines every group
    labels every k-th of its rows from its first, k odd, and the y label says so); long
    device names are shortened around an ellipsis. Colours are clipped to 0..1; where a
    drawn load passes 1 (the average-rate approximation under contention, or on the
    ``analytical`` network, which never shares a link, an overload) the colour bar has
    an arrow and the title gives the largest.

    Args:
        result: a result of ``simulate(..., trace=True)`` or ``run_program(...,
            trace=True)``.
        topology: the topology it ran on (the result holds only its name).
        bins: number of equal time bins from 0 to ``result.time``.
        ax: a matplotlib Axes to draw on (a new figure otherwise); the colour bar takes
            its room from that Axes alone.
        save: write the figure there (PNG, SVG, PDF, ... by extension).

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: no trace, another topology, bad ``bins`` or save path, or no
            message that moved bytes.
    """
    bins = integer(bins, "bins", minimum=1, maximum=MAX_BINS,
                   what="time bins; a figure shows fewer columns than that")
    path = checked_save_path(save)
    loads = drawn_loads(result, topology)
    warn_where_drawn_differs(loads, result.link_bytes)
    # Rows by link kind (NVLink, PCIe, network ...), each kind in the topology's order,
    # so the rows a label stands for are of its kind.
    kinds = [topology.links[topology.link_index(*load.link)].kind for load in loads]
    first_seen = {kind: k for k, kind in enumerate(dict.fromkeys(kinds))}
    order = sorted(range(len(loads)), key=lambda i: (first_seen[kinds[i]], i))
    loads, kinds = [loads[i] for i in order], [kinds[i] for i in order]
    if not loads or not result.time > 0:
        raise InvalidInputError("no message in this trace moved bytes over a link; "
                                "nothing to draw")
    edges = np.linspace(0.0, result.time, bins + 1)
    width = result.time / bins
    grid = np.array([binned_bytes(load, edges) / width / load.bandwidth for load in loads])

    unit, factor = time_unit(result.time)
    fig, ax = new_axes(ax, (8.0, min(11.0, max(3.0, 1.5 + 0.18 * len(loads)))))
    # A square-root scale: a link at a seventh of its rate (one of 8 flows) stands apart
    # from an idle one, which on a linear viridis share one dark purple.
    from matplotlib.colors import PowerNorm

    mesh = ax.pcolormesh(edges * factor, np.arange(len(loads) + 1), np.clip(grid, 0.0, 1.0),
                         norm=PowerNorm(0.5, vmin=0.0, vmax=1.0), cmap="viridis",
                         shading="flat")
    ax.set_ylim(len(loads), 0)
    every = max(1, -(-len(loads) // _NAMED))
    every += every > 1 and every % 2 == 0
    starts = [i for i in range(len(loads)) if i == 0 or kinds[i] != kinds[i - 1]]
    shown = sorted({i for start, end in zip(starts, starts[1:] + [len(loads)])
                    for i in range(start, end, every)})
    ax.set_yticks(np.array(shown) + 0.5)
    named = starts if len(starts) > 1 else []  # one kind: nothing to tell apart
    ax.set_yticklabels([f"{_row_label(loads[i].name)} ({kinds[i]})" if i in named
                        else _row_label(loads[i].name) for i in shown],
                       fontsize="small" if len(loads) > 12 else "medium")
    for start in starts[1:]:
        ax.axhline(start, color="white", linewidth=1.2)
    if every > 1:
        ax.set_ylabel(f"{len(loads)} directed links, every {_ordinal(every)} named",
                      fontsize="small")
    ax.set_xlabel(f"time ({unit})")
    # over 1 by more than the rounding of a full link's bins (1.00000001)
    peak = float(grid.max())
    over = peak >= 1.005
    fig.colorbar(mesh, ax=ax, label="fraction of bandwidth (sqrt scale)",
                 extend="max" if over else "neither")
    title = (f"link utilization: {result.collective}/{result.algorithm} on "
             f"{result.topology}, {size_writer([result.nbytes])(result.nbytes)} per rank"
             if isinstance(result, Result) else
             f"link utilization: a program on {result.topology}")
    if over:
        why = ("the analytical network never shares a link" if result.network == "analytical"
               else "average rates, approximate where flows share a link")
        title += (f"\nloads above 1 (up to {peak:.2f}, {(grid >= 1.005).mean():.0%} of "
                  f"cells) drawn as 1: {why}")
    ax.set_title(wrapped(title, 72), fontsize="medium")
    return finish(fig, path)
