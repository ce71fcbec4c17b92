"""Timelines of training steps: per GPU, its compute stream and each communication stream.

matplotlib is imported only when a timeline is drawn.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from simcoll.checks import integer
from simcoll.errors import InvalidInputError
from simcoll.plot.style import (
    checked_save_path,
    finish,
    format_duration,
    lanes,
    new_axes,
    time_unit,
    wrapped,
)
from simcoll.training.streams import Span

__all__ = ["plot_timeline"]

_KIND_COLOURS = {
    "forward": "#4c72b0", "backward": "#8fb0d9", "all_reduce": "#dd8452",
    "reduce_scatter": "#c44e52", "all_gather": "#55a868", "send": "#8172b3",
    "recv": "#b5a8d9",
}
_KIND_NAMES = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter",
               "all_gather": "all-gather", "recv": "receive"}
_STREAM_NAMES = {"compute": "compute", "tp": "TP", "pp": "PP", "dp": "DP",
                 "dp_gather": "DP gather", "all_reduce": "all-reduce",
                 "reduce_scatter": "reduce-scatter", "all_gather": "all-gather"}
_STREAM_ORDER = ("compute", "tp", "pp", "dp", "dp_gather", "all_reduce", "reduce_scatter",
                 "all_gather")


def _bounds(span: Span) -> tuple[float, float]:
    return span.start, span.end


_CROWDED = 40
"""More rows than this and each band names only its GPU (its streams are told by their
colours)."""
_WIDE = 200
"""A bar wider than the run's time over this keeps its white outline on a crowded row."""


def _what_ran(result: Any) -> str:
    """What a training result's run was, for the title."""
    if hasattr(result, "pp") and hasattr(result, "dp"):
        return (f"training step (dp={result.dp}, tp={result.tp}, pp={result.pp}, ZeRO "
                f"{result.zero_stage}, {result.micro_batches} micro-batches, "
                f"{result.schedule})")
    if hasattr(result, "stages"):
        return (f"pipeline step ({result.stages} stages, {result.micro_batches} "
                f"micro-batches, {result.schedule})")
    if hasattr(result, "strategy"):
        return f"data-parallel step ({result.strategy})"
    if hasattr(result, "stage"):
        return f"ZeRO stage {result.stage} step"
    if hasattr(result, "tp"):
        return (f"one transformer block, forward and backward, over tp={result.tp}"
                f"{' with sequence parallelism' if result.sequence_parallel else ''}")
    return "training step"


def plot_timeline(result: Any, *, ranks: Sequence[int] | None = None, max_ranks: int = 8,
                  title: str | None = None, ax: Any = None,
                  save: str | os.PathLike | None = None) -> Any:
    """Draw a training step: one band per GPU, one row per stream.

    The first row of a band is the compute stream (forward and backward passes), the
    others its communication streams (tensor-, pipeline- and data-parallel, or the
    collectives of a ZeRO stage). A gap in the compute row is time the GPU waited;
    overlapping operations on one stream (a send and a receive) split their row into
    lanes.

    Args:
        result: any training-step result with ``spans`` (``data_parallel``,
            ``zero_step``, ``pipeline_step``, ``tensor_parallel_layer``, ``step``).
        ranks: the GPUs to show, top to bottom, each once, as integers (default the
            first ``max_ranks`` that did something).
        max_ranks: how many GPUs to show by default (>= 1).
        title: the figure's title (default: what ran and how long it took).
        ax: a matplotlib Axes to draw on; save: write the figure there.

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: a result without spans, or bad ``ranks`` / ``max_ranks`` /
            save path.
    """
    spans: Sequence[Span] | None = getattr(result, "spans", None)
    if not spans:
        raise InvalidInputError("this result has no spans to draw; pass the result of a "
                                "simcoll.training step function")
    active = sorted({s.rank for s in spans})
    max_ranks = integer(max_ranks, "max_ranks", minimum=1)
    if ranks is None:
        shown = active[:max_ranks]
    else:
        shown = list(ranks) if isinstance(ranks, (Sequence, np.ndarray)) else []
        # Booleans are refused as ranks, as everywhere (simcoll.checks): True == 1.
        if (not shown or any(isinstance(r, (bool, np.bool_)) for r in shown)
                or any(r not in active for r in shown) or len(set(shown)) < len(shown)):
            raise InvalidInputError(f"ranks={ranks!r} is not accepted; give a list of "
                                    f"distinct GPUs that took part: {active[:16]}"
                                    f"{' ...' if len(active) > 16 else ''}")
    path = checked_save_path(save)
    streams = [s for s in _STREAM_ORDER if any(x.stream == s for x in spans)]
    streams += sorted({x.stream for x in spans} - set(streams))
    end = max(s.end for s in spans)
    unit, factor = time_unit(end)
    rows = len(shown) * len(streams)
    fig, ax = new_axes(ax, (9.0, min(11.0, max(2.8, 1.2 + 0.28 * rows))))

    from matplotlib.patches import Patch

    height = 0.9 / len(streams)
    # White outlines part neighbouring bars; on crowded rows they would hide the bars, so
    # a row keeps them only where its bars are wide (a pipeline's micro-batches).
    few = sum(s.rank in shown for s in spans) <= 300
    kinds: set[str] = set()
    ticks: list[float] = []
    labels: list[str] = []
    crowded = rows > _CROWDED
    for band, rank in enumerate(shown):
        if crowded:  # too many rows to name each: a band names its GPU (colours, streams)
            ticks.append(band)
            labels.append(f"GPU {rank}")
        for j, stream in enumerate(streams):
            top = band - 0.45 + j * height
            if not crowded:
                ticks.append(top + height / 2)
                name = _STREAM_NAMES.get(stream, stream)
                labels.append(f"GPU {rank} {name}" if j == 0 else name)
            packed = lanes([s for s in spans if s.rank == rank and s.stream == stream],
                           _bounds)
            for k, lane in enumerate(packed):
                lane_height = 0.9 * height / len(packed)
                narrowest = min(s.end - s.start for s in lane)
                outline = 0.3 if few or narrowest > end / _WIDE else 0.0
                for kind in {s.kind for s in lane}:
                    kinds.add(kind)
                    ax.broken_barh([(s.start * factor, (s.end - s.start) * factor)
                                    for s in lane if s.kind == kind],
                                   (top + 0.05 * height + k * lane_height, lane_height),
                                   facecolors=_KIND_COLOURS.get(kind, "0.5"),
                                   edgecolors="white", linewidth=outline)
        if band:
            ax.axhline(band - 0.5, color="0.6", linewidth=0.8)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize="x-small" if rows > 24 else "small")
    ax.tick_params(axis="y", length=0)
    # A step of zero duration gets one unit of axis: equal limits would make matplotlib
    # warn and widen them by itself.
    ax.set_xlim(0, end * factor or 1.0)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    order = [k for k in _KIND_COLOURS if k in kinds] + sorted(kinds - set(_KIND_COLOURS))
    handles = [Patch(facecolor=_KIND_COLOURS.get(k, "0.5"), label=_KIND_NAMES.get(k, k))
               for k in order]
    handles.append(Patch(facecolor="white", edgecolor="0.6", label="waiting (gap)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize="small")
    if title is None:
        title = f"{_what_ran(result)}: {format_duration(end)}"
        if len(shown) < len(active) and ranks is None:
            title += f" (showing {len(shown)} of {len(active)} GPUs)"
    ax.set_title(wrapped(title), fontsize="medium")
    return finish(fig, path)
