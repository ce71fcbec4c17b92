"""Link utilization heatmaps: how busy each directed link was over time."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from simcoll.checks import integer
from simcoll.errors import InvalidInputError
from simcoll.link_load import binned_bytes, link_loads
from simcoll.plot.style import (
    checked_save_path,
    finish,
    format_size,
    new_axes,
    time_unit,
    wrapped,
)
from simcoll.result import Result
from simcoll.topology.graph import Topology

__all__ = ["link_utilization", "MAX_BINS"]

MAX_BINS = 100_000
"""The most time bins a heatmap takes: more than any figure shows as columns."""


def link_utilization(result: Result, topology: Topology, *, bins: int = 100, ax: Any = None,
                     save: str | os.PathLike | None = None) -> Any:
    """Draw a links x time heatmap of the fraction of each link's bandwidth in use.

    A trace holds each message's span, size and the instant its bytes began to move,
    not the rates the network gave it from moment to moment, so each message counts at
    its average rate from that instant to its arrival, ``wire_bytes / (end - moving)``,
    on every directed link of its route (``topology.route(src, dst)``); a cell is the
    bytes that puts into its time bin, divided by the bin's length and the link's
    bandwidth (:mod:`simcoll.link_load`). That is exact for a message alone on its links
    (one bottlenecked by a link shows 1.0 in every bin its transfer fills), and an
    approximation under contention. Each row's bytes add up to the link's total traffic
    (``Result.link_bytes``, protocol framing included). Only links that carried bytes
    get a row, grouped by link kind where there are several (white lines between the
    groups; a group's first label names its kind, and on large machines every group
    labels every k-th of its rows from its first); colours are clipped to 0..1.

    Args:
        result: a result of ``simulate(..., trace=True)``.
        topology: the topology it ran on (the result holds only its name).
        bins: number of equal time bins from 0 to ``result.time``.
        ax: a matplotlib Axes to draw on (a new figure otherwise).
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
    loads = link_loads(result, topology)
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
    fig, ax = new_axes(ax, (8.0, min(11.0, max(2.6, 1.5 + 0.18 * len(loads)))))
    mesh = ax.pcolormesh(edges * factor, np.arange(len(loads) + 1), np.clip(grid, 0.0, 1.0),
                         vmin=0.0, vmax=1.0, cmap="viridis", shading="flat")
    ax.set_ylim(len(loads), 0)
    every = max(1, -(-len(loads) // 40))
    starts = [i for i in range(len(loads)) if i == 0 or kinds[i] != kinds[i - 1]]
    shown = sorted({i for start, end in zip(starts, starts[1:] + [len(loads)])
                    for i in range(start, end, every)})
    ax.set_yticks(np.array(shown) + 0.5)
    named = starts if len(starts) > 1 else []  # one kind: nothing to tell apart
    ax.set_yticklabels([f"{loads[i].name} ({kinds[i]})" if i in named else loads[i].name
                        for i in shown],
                       fontsize="small" if len(loads) > 12 else "medium")
    for start in starts[1:]:
        ax.axhline(start, color="white", linewidth=1.2)
    ax.set_xlabel(f"time ({unit})")
    fig.colorbar(mesh, ax=ax, label="fraction of link bandwidth")
    ax.set_title(wrapped(f"link utilization: {result.collective}/{result.algorithm} on "
                         f"{result.topology}, {format_size(result.nbytes)} per rank"),
                 fontsize="medium")
    return finish(fig, path)
