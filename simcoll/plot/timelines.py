"""Timelines of traced runs: what each rank did when, and where it sat idle."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from simcoll.checks import flag
from simcoll.critical_path import critical_path
from simcoll.errors import InvalidInputError
from simcoll.link_load import check_ran_on
from simcoll.plot.style import (
    checked_save_path,
    finish,
    format_duration,
    format_size,
    lanes,
    new_axes,
    time_unit,
    wrapped,
)
from simcoll.result import Result, RunResult, traced_events
from simcoll.topology.graph import Topology
from simcoll.trace import endpoint_label

__all__ = ["timeline"]

_STREAMS = ("send", "recv", "reduce", "compute")
_LEGEND = {"send": "send", "recv": "receive", "reduce": "reduction", "compute": "compute"}
_COLOURS = {"send": "#1f77b4", "recv": "#ff7f0e", "reduce": "#2ca02c", "compute": "#d62728"}


def _shown(result: RunResult, endpoints: int, ranks: Sequence[int] | None,
           max_ranks: int, active: set[int]) -> list[int]:
    if ranks is not None:
        shown = list(ranks)
        bad = [r for r in shown if isinstance(r, bool) or not isinstance(r, int)
               or not 0 <= r < endpoints]
        if bad or not shown:
            raise InvalidInputError(f"ranks={ranks!r} is not accepted; give a non-empty list "
                                    f"of rank (or host) addresses in 0..{endpoints - 1}")
        return shown
    if endpoints <= max_ranks:
        return list(range(endpoints))
    # Hosts and in-network devices that did something, up to half the bands; ranks fill
    # the rest.
    others = sorted(a for a in active if a >= result.nranks)[:max_ranks // 2]
    return list(range(min(result.nranks, max_ranks - len(others)))) + others


def _what_is_shown(shown: list[int], nranks: int, others: int) -> str:
    """``ranks 0-13 of 16 and the 2 other endpoints that took part`` (hosts, in-network
    devices), for a timeline that shows the first ranks and some others."""
    ranks = sum(1 for a in shown if a < nranks)
    text = f"ranks 0-{ranks - 1} of {nranks}" if ranks < nranks else f"all {nranks} ranks"
    if not others:
        return text
    drawn, noun = len(shown) - ranks, "endpoint" if others == 1 else "endpoints"
    return text + (f" and the {others} other {noun} that took part" if drawn == others
                   else f" and {drawn} of the {others} other {noun} that took part")


def _itself(span: tuple[float, float]) -> tuple[float, float]:
    return span


def _path_line(result: RunResult, shown: list[int], streams: list[str], height: float,
               factor: float) -> tuple[list[float], list[float]]:
    """The critical path as a polyline over the bands: each segment along its endpoint's
    row (a message's on its sender's send row, a wait across the middle of the band),
    stepping from band to band where the path moves; broken where it crosses endpoints
    not shown."""
    xs: list[float] = []
    ys: list[float] = []
    for segment in critical_path(result).segments:
        if segment.endpoint not in shown:
            xs.append(math.nan)
            ys.append(math.nan)
            continue
        band = shown.index(segment.endpoint)
        stream = "send" if segment.peer is not None else segment.kind
        y = float(band) if stream not in streams else \
            band - 0.45 + (streams.index(stream) + 0.5) * height
        xs += [segment.start * factor, segment.end * factor]
        ys += [y, y]
    return xs, ys


def timeline(result: RunResult, topology: Topology | None = None, *,
             ranks: Sequence[int] | None = None, max_ranks: int = 16,
             critical: bool = False, ax: Any = None,
             save: str | os.PathLike | None = None) -> Any:
    """Draw a traced run as one band per rank (and host, and in-network device that
    took part), one row per stream.

    Each band holds up to four rows: the messages the rank sent (from the send to the
    arrival of the last byte), the messages it received (the same spans, on the
    receiver), its reductions and its compute spans; streams that never occur are left
    out. Gaps are idle time. Where messages overlap (several in flight at once), their
    row splits into as many thinner lanes as are needed to draw each one apart.

    Args:
        result: a result of ``simulate(..., trace=True)`` or
            ``run_program(..., trace=True)``.
        topology: the topology it ran on, to name the bands past the ranks (``host h``,
            or ``in-network device NAME`` for an NVSwitch or a SHARP switch that
            reduced); without it they are ``endpoint e``, which the result alone cannot
            tell apart.
        ranks: the rank (or host) addresses to show, top to bottom; by default all of
            them, or the first ``max_ranks`` (hosts included) with a note in the title.
        max_ranks: the most bands drawn when ``ranks`` is not given.
        critical: draw the run's critical path over the bands
            (:func:`simcoll.critical_path`), a black line from band to band.
        ax: a matplotlib Axes to draw on (a new figure otherwise).
        save: write the figure there (PNG, SVG, PDF, ... by extension).

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: not a traced run's result, or one that ran on another
            topology, or bad ``ranks`` / ``max_ranks`` / ``critical`` / save path.
    """
    events = traced_events(result)
    critical = flag(critical, "critical")
    if topology is not None:
        check_ran_on(result, topology)
    if isinstance(max_ranks, bool) or not isinstance(max_ranks, int) or max_ranks < 1:
        raise InvalidInputError(f"max_ranks={max_ranks!r} is not accepted; use an integer "
                                f">= 1")
    endpoints = result.nranks + len(result.host_bytes_sent)
    if not result.time > 0:
        raise InvalidInputError("the run took no time (one rank, or nothing to move): "
                                "there is nothing to draw")
    active = {e.rank for e in events} | {e.peer for e in events if e.peer is not None}
    shown = _shown(result, endpoints, ranks, max_ranks, active)
    path = checked_save_path(save)
    spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for e in events:
        if e.kind == "message" and e.peer is not None:
            spans.setdefault((e.rank, "send"), []).append((e.start, e.end))
            spans.setdefault((e.peer, "recv"), []).append((e.start, e.end))
        else:
            spans.setdefault((e.rank, e.kind), []).append((e.start, e.end))
    streams = [s for s in _STREAMS if any(key[1] == s for key in spans)] or ["send"]

    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    unit, factor = time_unit(result.time)
    rows = len(shown) * len(streams)
    fig, ax = new_axes(ax, (8.0, min(11.0, max(2.6, 1.4 + 0.16 * rows))))
    height = 0.9 / len(streams)
    outline = 0.4 if len(events) <= 4000 else 0.0
    for band, address in enumerate(shown):
        label = endpoint_label(result, address, topology)
        for j, stream in enumerate(streams):
            packed = lanes(spans.get((address, stream), []), _itself)
            if not packed:
                continue
            top = band - 0.45 + j * height + 0.04 * height
            lane_height = 0.92 * height / len(packed)
            boxes = [[(s * factor, y), (s * factor, y + lane_height),
                      (t * factor, y + lane_height), (t * factor, y)]
                     for k, lane in enumerate(packed) for y in (top + k * lane_height,)
                     for s, t in lane]
            # One collection per band and stream, the data limits left alone (they are set
            # below): a collection per lane, each re-scaling the axes, took 11 s for the
            # 113,152 spans of NCCL on dgx_h100(8), against 2 s now.
            ax.add_collection(PolyCollection(boxes, facecolors=_COLOURS[stream],
                                             edgecolors="white", linewidths=outline,
                                             gid=f"{label}/{stream}"), autolim=False)
        if band:
            ax.axhline(band - 0.5, color="0.8", linewidth=0.6)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([endpoint_label(result, a, topology) for a in shown],
                       fontsize="small" if len(shown) > 8 else "medium")
    ax.tick_params(axis="y", length=0)
    ax.set_xlim(0, result.time * factor)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    handles: list[Any] = [Patch(facecolor=_COLOURS[s], label=_LEGEND[s]) for s in streams]
    handles.append(Patch(facecolor="white", edgecolor="0.6", label="idle (gap)"))
    if critical:
        xs, ys = _path_line(result, shown, streams, height, factor)
        from matplotlib import patheffects

        (line,) = ax.plot(xs, ys, color="black", linewidth=1.6, solid_capstyle="butt",
                          label="critical path", gid="critical path",
                          path_effects=[patheffects.Stroke(linewidth=3.4, foreground="white"),
                                        patheffects.Normal()])
        handles.append(line)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize="small", title="rows in each band", title_fontsize="small")
    if isinstance(result, Result):
        title = (f"{result.collective}/{result.algorithm} on {result.topology}, "
                 f"{format_size(result.nbytes)} per rank: {format_duration(result.time)}")
    else:
        title = f"a program on {result.topology}: {format_duration(result.time)}"
    others = sum(1 for a in active if a >= result.nranks)
    if len(shown) < result.nranks + others and ranks is None:
        title += "\nshowing " + _what_is_shown(shown, result.nranks, others)
    ax.set_title(wrapped(title), fontsize="medium")
    return finish(fig, path)
