"""Timelines of traced runs: what each rank did when, and where it sat idle."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simcoll.checks import flag, integer
from simcoll.critical_path import Segment, critical_path
from simcoll.errors import InvalidInputError
from simcoll.link_load import check_ran_on
from simcoll.plot.style import (
    NARROW_EDGE,
    OUTLINED_BAR,
    OUTLINED_LANE,
    RULED_BANDS,
    checked_save_path,
    finish,
    format_duration,
    integer_list,
    lanes,
    legend_place,
    named_bands,
    new_axes,
    size_writer,
    time_unit,
    wrapped,
)
from simcoll.result import Result, RunResult, traced_events
from simcoll.topology.graph import Topology
from simcoll.trace import endpoint_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["timeline"]

_STREAMS = ("send", "recv", "reduce", "compute")
_LEGEND = {"send": "send", "recv": "receive", "reduce": "reduction", "compute": "compute"}
_COLOURS = {"send": "#1f77b4", "recv": "#ff7f0e", "reduce": "#009e73", "compute": "#cc79a7"}
"""Reductions and compute in Okabe and Ito's bluish green and reddish purple: apart from
each other and from send and receive for readers who tell red from green poorly."""


def _checked_ranks(ranks: Any, endpoints: int) -> list[int]:
    """``ranks`` as a list of distinct addresses in ``0..endpoints - 1``."""
    shown = integer_list(ranks)
    if shown is None or not all(0 <= r < endpoints for r in shown):
        raise InvalidInputError(f"ranks={ranks!r} is not accepted; give a non-empty list "
                                f"of distinct rank (or host) addresses in "
                                f"0..{endpoints - 1}")
    return shown


def _shown(result: RunResult, max_ranks: int, active: set[int],
           on_path: dict[int, float] | None) -> list[int]:
    """The bands drawn when the caller chose none: every rank, and the hosts and
    in-network devices that did something; past ``max_ranks``, the endpoints the critical
    path visits (``on_path``: seconds of the path on each; those with the most, where
    they are more than ``max_ranks``), else the first ranks and up to half the bands of
    the others that did something."""
    others = sorted(a for a in active if a >= result.nranks)
    if result.nranks + len(others) <= max_ranks:
        return list(range(result.nranks)) + others
    if on_path is not None:
        # path times within 1e-9 x the longest of each other count as equal, as sums of
        # the same spans in another order are: the lowest addresses first among them,
        # not those float rounding favours
        tolerance = max(on_path.values(), default=0.0) * 1e-9
        tier, top, tiers = 0, math.inf, {}
        for address in sorted(on_path, key=lambda a: -on_path[a]):
            if on_path[address] < top - tolerance:
                tier, top = tier + 1, on_path[address]
            tiers[address] = tier
        return sorted(sorted(on_path, key=lambda a: (tiers[a], a))[:max_ranks])
    others = others[:max_ranks // 2]
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


_Bar = tuple[float, float, float, "int | None"]
"""A bar of a timeline: start, end, when its bytes start to move, and a message's other
end (its receiver on the send row, its sender on the receive row; None for the rest)."""


def _span(item: _Bar) -> tuple[float, float]:
    return item[0], item[1]


def _path_line(segments: Sequence[Segment], shown: list[int], streams: list[str],
               height: float, factor: float,
               sends: dict[int, list[tuple[float, _Bar]]]) -> tuple[list[float], list[float]]:
    """The critical path as a polyline over the bands: each segment along its endpoint's
    row (a message's along its own lane of its sender's send row, ``sends`` giving each
    send bar's lane centre; a wait across the middle of the band), stepping from band to
    band where the path moves; broken where it crosses endpoints not shown."""
    xs: list[float] = []
    ys: list[float] = []
    for segment in segments:
        if segment.endpoint not in shown:
            xs.append(math.nan)
            ys.append(math.nan)
            continue
        band = shown.index(segment.endpoint)
        stream = "send" if segment.peer is not None else segment.kind
        y = float(band) if stream not in streams else \
            band - height * len(streams) / 2 + (streams.index(stream) + 0.5) * height
        if segment.peer is not None:
            y = next((centre for centre, (s, t, _, peer) in sends.get(segment.endpoint, [])
                      if peer == segment.peer and s <= segment.start and segment.end <= t),
                     y)
        xs += [segment.start * factor, segment.end * factor]
        ys += [y, y]
    return xs, ys


def _edges(widths: list[float], face: Any, outline: float, run: float) -> dict[str, Any]:
    """Bar edges: a white outline (``outline`` points, 0 for none) on bars wider than the
    run's time over OUTLINED_BAR, which sets lanes apart; an edge of NARROW_EDGE points
    in the bar's own colour on the narrower ones, which a pixel grid would otherwise
    drop or keep by where they fall."""
    wide = [w > run / OUTLINED_BAR for w in widths]
    return {"edgecolors": ["white" if w else face for w in wide],
            "linewidths": [outline if w else NARROW_EDGE for w in wide]}


def _lighter(colour: str, amount: float = 0.6) -> tuple[float, float, float]:
    """``colour`` mixed with ``amount`` of white."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(colour)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def _band_label(result: RunResult, address: int, topology: Topology | None) -> str:
    """``rank r``, ``host h``, ``in-network device NAME``; without the topology, a host or
    an in-network device is ``endpoint e`` (the title says what that is)."""
    if topology is None and address >= result.nranks:
        return f"endpoint {address}"
    return endpoint_label(result, address, topology)


def timeline(result: RunResult, topology: Topology | None = None, *,
             ranks: Sequence[int] | None = None, max_ranks: int = 16,
             critical: bool = False, ax: Any = None, legend: str | None = None,
             save: str | os.PathLike | None = None) -> Figure:
    """Draw a traced run as one band per rank (and host, and in-network device that
    took part), one row per stream.

    Each band holds up to four rows: the messages the rank sent (from the send to the
    arrival of the last byte), the messages it received (the same spans, on the
    receiver), its reductions and its compute spans; streams that never occur are left
    out. A message's bar is light while it waits out its route's latency or the message
    ahead of it (``TraceEvent.moving``), and solid while its bytes move. Gaps are idle
    time. Where messages overlap (several in flight at once), their row splits into as
    many thinner lanes, a gap apart, as are needed to draw each one apart. Past 40 bands, every k-th
    band is labelled and the bands are not ruled apart.

    Args:
        result: a result of ``simulate(..., trace=True)`` or
            ``run_program(..., trace=True)``.
        topology: the topology it ran on, to name the bands past the ranks (``host h``,
            or ``in-network device NAME`` for an NVSwitch or a SHARP switch that
            reduced); without it they are ``endpoint e``, which the result alone cannot
            tell apart.
        ranks: the rank (or host) addresses to show, top to bottom, each once (a list or
            a numpy array of integers); by default all of them, or, past ``max_ranks``,
            the first ranks (hosts included), or with ``critical=True`` the endpoints the
            critical path visits, with a note in the title.
        max_ranks: the most bands drawn when ``ranks`` is not given.
        critical: draw the run's critical path over the bands
            (:func:`simcoll.critical_path`), a black line from band to band, along the
            lane of each message it follows; the title says how much of it lies on
            endpoints not shown.
        ax: a matplotlib Axes to draw on (a new figure otherwise).
        legend: ``"right"`` (beside the axes), ``"inside"`` (the axes' best corner, over
            some bars: they fill the axes) or ``"none"``; by default ``"right"`` in a
            new figure and ``"inside"`` on a given ``ax``, so the caller's layout holds.
        save: write the figure there (PNG, SVG, PDF, ... by extension).

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: not a traced run's result, or one that ran on another
            topology, or bad ``ranks`` / ``max_ranks`` / ``critical`` / ``legend`` / save
            path.
    """
    events = traced_events(result)
    critical = flag(critical, "critical")
    place = legend_place(legend, ax is not None)
    if topology is not None:
        check_ran_on(result, topology)
    max_ranks = integer(max_ranks, "max_ranks", minimum=1)
    endpoints = result.nranks + len(result.host_bytes_sent)
    chosen = None if ranks is None else _checked_ranks(ranks, endpoints)
    if not result.time > 0:
        raise InvalidInputError("the run took no time (one rank, or nothing to move): "
                                "there is nothing to draw")
    path = checked_save_path(save)
    active = {e.rank for e in events} | {e.peer for e in events if e.peer is not None}
    segments = critical_path(result).segments if critical else ()
    on_path: dict[int, float] = {}
    for segment in segments:
        on_path[segment.endpoint] = on_path.get(segment.endpoint, 0.0) \
            + segment.end - segment.start
    shown = chosen if chosen is not None else \
        _shown(result, max_ranks, active, on_path if critical else None)
    # (start, end, moving) of each bar: a message's bytes move from ``moving`` on.
    spans: dict[tuple[int, str], list[_Bar]] = {}
    for e in events:
        if e.kind == "message" and e.peer is not None:
            moving = e.start if e.moving is None else e.moving
            spans.setdefault((e.rank, "send"), []).append((e.start, e.end, moving, e.peer))
            spans.setdefault((e.peer, "recv"), []).append((e.start, e.end, moving, e.rank))
        elif e.end > e.start:  # a reduction or compute of no time draws nothing
            spans.setdefault((e.rank, e.kind), []).append((e.start, e.end, e.start, None))
    sends: dict[int, list[tuple[float, _Bar]]] = {}  # each send bar with its lane's centre
    streams = [s for s in _STREAMS if any(key[1] == s for key in spans)] or ["send"]

    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    unit, factor = time_unit(result.time)
    rows = len(shown) * len(streams)
    fig, ax = new_axes(ax, (8.0, min(11.0, max(2.6, 1.4 + 0.16 * rows))))
    # Past RULED_BANDS bands a row is a pixel or two: rows and lanes then fill their band
    # without white seams, which drew moire stripes.
    ruled = len(shown) <= RULED_BANDS
    height = (0.9 if ruled else 1.0) / len(streams)
    pad = 0.04 if ruled else 0.0
    outline = 0.4 if len(events) <= 4000 and ruled else 0.0
    band_points = ax.get_window_extent().height * 72 / fig.dpi / len(shown)
    waited = False
    light_time = bar_time = 0.0   # messages' light and whole spans, over every bar
    drawn: set[str] = set()       # the streams with a bar somewhere, which the legend names
    solid: set[str] = set()       # those drawn solid somewhere, in their colour there
    labels = [_band_label(result, a, topology) for a in shown]
    for band, (address, label) in enumerate(zip(shown, labels)):
        for j, stream in enumerate(streams):
            packed = lanes(spans.get((address, stream), []), _span)
            if not packed:
                continue
            top = band - height * len(streams) / 2 + (j + pad) * height
            lane_height = (1 - 2 * pad) * height / len(packed)
            # Lanes apart by a fifth of a lane where bands are ruled: abutting, bars that
            # overlap in time read as one thick bar.
            gap = 0.2 * lane_height if ruled and len(packed) > 1 else 0.0
            edge = outline if (lane_height - gap) * band_points >= OUTLINED_LANE else 0.0

            def box(s: float, t: float, y: float, h: float = lane_height - gap,
                    shift: float = gap / 2) -> list[tuple[float, float]]:
                y += shift
                return [(s * factor, y), (s * factor, y + h), (t * factor, y + h),
                        (t * factor, y)]

            placed = [(y, item) for k, lane in enumerate(packed)
                      for y in (top + k * lane_height,) for item in lane]
            if stream == "send":
                sends[address] = [(y + lane_height / 2, item) for y, item in placed]
            # One collection per band and stream, the data limits left alone (they are set
            # below): a collection per lane, each re-scaling the axes, took 11 s for the
            # 113,152 spans of NCCL on dgx_h100(8), against 2 s now. A message's whole
            # span is drawn light, its bytes' part solid over it.
            light = stream in ("send", "recv")
            face = _lighter(_COLOURS[stream]) if light else _COLOURS[stream]
            ax.add_collection(PolyCollection(
                [box(s, t, y) for y, (s, t, _, _) in placed],
                facecolors=face, **_edges([t - s for _, (s, t, _, _) in placed], face,
                                          edge, result.time),
                gid=f"{label}/{stream}"),
                autolim=False)
            drawn.add(stream)
            if not light:
                solid.add(stream)
            else:
                # named in the legend where some bar shows it (a 400th of the run), or
                # where many short ones add up (a twentieth of the bars' time)
                waited = waited or any(m - s > result.time / 400
                                       for _, (s, _, m, _) in placed)
                light_time += sum(m - s for _, (s, _, m, _) in placed)
                bar_time += sum(t - s for _, (s, t, _, _) in placed)
                moved = [(y, m, t) for y, (_, t, m, _) in placed if t > m]
                if moved:
                    solid.add(stream)
                ax.add_collection(PolyCollection(
                    [box(m, t, y) for y, m, t in moved], facecolors=_COLOURS[stream],
                    **_edges([t - m for _, m, t in moved], _COLOURS[stream], edge,
                             result.time),
                    gid=f"{label}/{stream} bytes"), autolim=False)
        if band and ruled:
            ax.axhline(band - 0.5, color="0.8", linewidth=0.6)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    named = named_bands(len(shown))
    ax.set_yticks(named)
    ax.set_yticklabels([labels[i] for i in named],
                       fontsize="small" if len(named) > 8 else "medium")
    ax.tick_params(axis="y", length=0)
    ax.set_xlim(0, result.time * factor)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    # every row named; one whose bars are all light (messages of no bytes) in that shade
    handles: list[Any] = [Patch(facecolor=_COLOURS[s] if s in solid else _lighter(_COLOURS[s]),
                                label=_LEGEND[s]) for s in streams if s in drawn]
    if waited or light_time > 0.05 * bar_time:
        handles.append(Patch(facecolor=_lighter(_COLOURS["send"]), label="message latency,\n"
                             "queueing (lighter)"))
    handles.append(Patch(facecolor="white", edgecolor="0.6", label="idle (gap)"))
    if critical:
        xs, ys = _path_line(segments, shown, streams, height, factor, sends)
        # No white halo: along a bar it drew seams that read as two lanes.
        (line,) = ax.plot(xs, ys, color="black", linewidth=1.6, solid_capstyle="butt",
                          label="critical path", gid="critical path")
        handles.append(line)
    if place == "inside":
        ax.legend(handles=handles, loc="best", fontsize="x-small", framealpha=0.9)
    elif place == "right":
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False, fontsize="small")
    if isinstance(result, Result):
        per_rank = "" if result.collective == "barrier" else \
            f", {size_writer([result.nbytes])(result.nbytes)} per rank"   # barrier: no data
        title = (f"{result.collective}/{result.algorithm} on {result.topology}{per_rank}: "
                 f"{format_duration(result.time)}")
    else:
        title = f"a program on {result.topology}: {format_duration(result.time)}"
    others = sum(1 for a in active if a >= result.nranks)
    notes = []
    if chosen is None and critical and len(shown) < result.nranks + others:
        visited = len(on_path)
        every = result.nranks + others
        notes.append(f"showing the {len(shown)} of {every} endpoints that the critical "
                     f"path visits" if len(shown) == visited else
                     f"showing {len(shown)} of the {visited} endpoints that the critical "
                     f"path visits" if visited == every else
                     f"showing {len(shown)} of the {visited} endpoints (of {every}) that "
                     f"the critical path visits")
    elif chosen is None and len(shown) < result.nranks + others:
        notes.append("showing " + _what_is_shown(shown, result.nranks, others))
    if critical:
        hidden = sum(t for a, t in on_path.items() if a not in shown)
        if hidden > 0:
            notes.append(f"critical path: {hidden / result.time:.0%} of its time on "
                         f"endpoints not shown")
    if topology is None and any(a >= result.nranks for a in shown):
        notes.append(f"endpoints from {result.nranks} on: hosts or in-network devices "
                     f"(topology= names them)")
    ax.set_title(wrapped("\n".join([title] + notes)), fontsize="medium")
    return finish(fig, path)
