"""Timelines of training steps: per GPU, its compute stream and each communication stream.

matplotlib is imported only when a timeline is drawn.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simcoll.checks import integer
from simcoll.errors import InvalidInputError
from simcoll.plot.style import (
    NARROW_EDGE,
    OUTLINED_BAR,
    RULED_BANDS,
    checked_save_path,
    finish,
    format_duration,
    integer_list,
    lanes,
    named_bands,
    new_axes,
    time_unit,
    wrapped,
)
from simcoll.training.streams import Span

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_timeline"]

_KIND_COLOURS = {
    "forward": "#4c72b0", "backward": "#8fb0d9", "all_reduce": "#dd8452",
    "reduce_scatter": "#cc79a7", "all_gather": "#009e73", "send": "#8172b3",
    "recv": "#ccb974",
}
"""Colours of the operations; a pipeline's send (purple) and receive (olive) differ in hue
and in lightness, as their bars are thin and often side by side; ZeRO's reduce-scatter
and all-gather (Okabe and Ito's reddish purple and bluish green) stay apart for readers
who tell red from green poorly."""
_KIND_NAMES = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter",
               "all_gather": "all-gather", "recv": "receive"}
_STREAM_NAMES = {"compute": "compute", "tp": "TP", "pp": "PP", "dp": "DP",
                 "dp_gather": "DP gather", "all_reduce": "all-reduce",
                 "reduce_scatter": "reduce-scatter", "all_gather": "all-gather"}
_STREAM_ORDER = ("compute", "tp", "pp", "dp", "dp_gather", "all_reduce", "reduce_scatter",
                 "all_gather")


def _bounds(span: Span) -> tuple[float, float]:
    return span.start, span.end



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
                  save: str | os.PathLike | None = None) -> Figure:
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
        ax: a matplotlib Axes to draw on (its legend then goes inside it, so the
            caller's layout is left alone); save: write the figure there.

    Returns:
        The matplotlib Figure.

    Raises:
        InvalidInputError: a result without spans, a step that took no time (as
            :func:`simcoll.plot.timeline` refuses a run that took none), or bad ``ranks`` /
            ``max_ranks`` / save path.
    """
    spans: Sequence[Span] | None = getattr(result, "spans", None)
    if not spans:
        raise InvalidInputError("this result has no spans to draw; pass the result of "
                                "data_parallel, zero_step, pipeline_step, "
                                "tensor_parallel_layer or step")
    active = sorted({s.rank for s in spans})
    max_ranks = integer(max_ranks, "max_ranks", minimum=1)
    if ranks is None:
        shown = active[:max_ranks]
    else:
        chosen = integer_list(ranks)
        if chosen is None or any(r not in active for r in chosen):
            raise InvalidInputError(f"ranks={ranks!r} is not accepted; give a list of "
                                    f"distinct GPUs that took part: {active[:16]}"
                                    f"{' ...' if len(active) > 16 else ''}")
        shown = chosen
    end = max(s.end for s in spans)
    if not end > 0:
        raise InvalidInputError("the step took no time (no compute, nothing to move): "
                                "there is nothing to draw")
    if title is not None and not isinstance(title, str):
        raise InvalidInputError(f"title={title!r} is not accepted; give a str, or None for "
                                f"what ran and how long it took")
    path = checked_save_path(save)
    streams = [s for s in _STREAM_ORDER if any(x.stream == s for x in spans)]
    streams += sorted({x.stream for x in spans} - set(streams))
    unit, factor = time_unit(end)
    rows = len(shown) * len(streams)
    given = ax is not None
    fig, ax = new_axes(ax, (9.0, min(11.0, max(2.8, 1.2 + 0.28 * rows))))

    from matplotlib.patches import Patch

    # Past RULED_BANDS bands a row is a pixel or two: rows then fill their band, with no
    # white gaps or outlines, which washed the bars out.
    ruled = len(shown) <= RULED_BANDS
    height = (0.9 if ruled else 1.0) / len(streams)
    pad = 0.05 if ruled else 0.0
    # White outlines part neighbouring bars; on crowded rows they would hide the bars, so
    # a row keeps them only where its bars are wide (a pipeline's micro-batches), and a
    # bar much narrower than the step (a pipeline's send) never has one.
    few = sum(s.rank in shown for s in spans) <= 300 and len(shown) <= RULED_BANDS
    kinds: set[str] = set()
    ticks: list[float] = []
    labels: list[str] = []
    crowded = rows > RULED_BANDS   # each band then names only its GPU (colours its streams)
    named = set(named_bands(len(shown)))
    for band, rank in enumerate(shown):
        if crowded and band in named:  # a band names its GPU (colours tell its streams)
            ticks.append(band)
            labels.append(f"GPU {rank}")
        for j, stream in enumerate(streams):
            top = band - height * len(streams) / 2 + j * height
            if not crowded:
                ticks.append(top + height / 2)
                name = _STREAM_NAMES.get(stream, stream)
                labels.append(f"GPU {rank} {name}" if j == 0 else name)
            packed = lanes([s for s in spans if s.rank == rank and s.stream == stream],
                           _bounds)
            for k, lane in enumerate(packed):
                lane_height = (1 - 2 * pad) * height / len(packed)
                narrowest = min(s.end - s.start for s in lane)
                outline = 0.3 if ruled and (few or narrowest > end / OUTLINED_BAR) else 0.0
                for kind in {s.kind for s in lane}:
                    kinds.add(kind)
                    bars = [s for s in lane if s.kind == kind]
                    colour = _KIND_COLOURS.get(kind, "0.5")
                    # a bar narrower than a pixel or two is drawn with an edge of its own
                    # colour, so it shows (a 3D step's 0.36 ms transfers on a 490 ms axis
                    # were 0.6 px wide, and some were not drawn at all)
                    wide = [s.end - s.start > end / OUTLINED_BAR for s in bars]
                    ax.broken_barh([(s.start * factor, (s.end - s.start) * factor)
                                    for s in bars],
                                   (top + pad * height + k * lane_height, lane_height),
                                   facecolors=colour,
                                   edgecolors=["white" if w else colour for w in wide],
                                   linewidth=[outline if w else NARROW_EDGE for w in wide])
        if band and ruled:
            ax.axhline(band - 0.5, color="0.6", linewidth=0.8)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize="x-small" if len(labels) > 24 else "small")
    ax.tick_params(axis="y", length=0)
    ax.set_xlim(0, end * factor)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    order = [k for k in _KIND_COLOURS if k in kinds] + sorted(kinds - set(_KIND_COLOURS))
    handles = [Patch(facecolor=_KIND_COLOURS.get(k, "0.5"), label=_KIND_NAMES.get(k, k))
               for k in order]
    handles.append(Patch(facecolor="white", edgecolor="0.6", label="waiting (gap)"))
    if given:   # inside the caller's axes: an outside legend would take room from others
        ax.legend(handles=handles, loc="best", fontsize="x-small", framealpha=0.9)
    else:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False, fontsize="small")
    if title is None:
        title = f"{_what_ran(result)}: {format_duration(end)}"
        if len(shown) < len(active) and ranks is None:
            title += f" (showing {len(shown)} of {len(active)} GPUs)"
    ax.set_title(wrapped(title), fontsize="medium")
    return finish(fig, path)
