"""Units, labels and figure plumbing shared by simcoll's plots (matplotlib imported lazily)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from simcoll.errors import InvalidInputError
from simcoll.files import output_path, write_atomically

__all__ = ["lanes", "format_size", "time_unit", "format_duration", "wrapped",
           "checked_save_path", "new_axes", "finish"]

_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_TIME_UNITS = ((1.0, "s", 1.0), (1e-3, "ms", 1e3), (1e-6, "µs", 1e6), (0.0, "ns", 1e9))


def format_size(nbytes: float) -> str:
    """A size in binary units: ``8 B``, ``1 KiB``, ``1.5 MiB``, ``64 MiB``, ``1 GiB``."""
    value, unit = float(nbytes), 0
    while abs(value) >= 1024 and unit < len(_SIZE_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.4g} {_SIZE_UNITS[unit]}"


def time_unit(largest: float) -> tuple[str, float]:
    """The unit to show times up to ``largest`` seconds in: ``(name, factor)``, where a
    time in seconds times ``factor`` is in that unit (s, ms, µs or ns)."""
    for threshold, name, factor in _TIME_UNITS:
        if largest >= threshold:
            return name, factor
    return "ns", 1e9


def wrapped(title: str, width: int = 88) -> str:
    """``title`` broken into lines of at most ``width`` characters (each of its own lines
    on its own), so a long machine name does not run past the figure's edges."""
    import textwrap

    return "\n".join(textwrap.fill(line, width) for line in title.split("\n"))


def format_duration(seconds: float) -> str:
    """``1.23 ms``, ``850 µs``."""
    name, factor = time_unit(seconds)
    return f"{seconds * factor:.3g} {name}"


def checked_save_path(save: str | os.PathLike | None) -> Path | None:
    """``save`` as a path, after checking matplotlib can write its format and its folder
    exists, so a bad path fails before any drawing.

    Raises:
        InvalidInputError: naming the path and the accepted extensions.
    """
    if save is None:
        return None
    from matplotlib.backend_bases import FigureCanvasBase

    path = output_path(save, "save", example="figure.png")
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        raise InvalidInputError(f"cannot save a figure as {str(path)!r}; use one of the "
                                f"extensions {', '.join('.' + f for f in sorted(formats))}")
    return path


def new_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, Any]:
    """``(figure, axes)``: ``ax`` and its figure, or a new pyplot figure of ``figsize``."""
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


_VECTOR_TEXT: dict[Any, Any] = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none"}
"""Text in vector files as text: TrueType fonts in PDF and PostScript (the Type 3 fonts
matplotlib embeds by default are refused by IEEE's and ACM's checkers), and editable
text in SVG."""


def finish(fig: Any, path: Path | None) -> Any:
    """Save ``fig`` to ``path`` (if given) through a temporary file, so an existing file
    is never left half written, with its text kept as text in PDF, PostScript and SVG
    (:data:`_VECTOR_TEXT`); return ``fig``."""
    if path is not None:
        import matplotlib

        def save(tmp: Path) -> None:
            with matplotlib.rc_context(_VECTOR_TEXT):
                fig.savefig(tmp, format=path.suffix[1:].lower(), dpi=150)

        write_atomically(path, save)
    return fig


_Item = TypeVar("_Item")


def lanes(items: Iterable[_Item],
          span: Callable[[_Item], tuple[float, float]]) -> list[list[_Item]]:
    """``items`` packed first-fit, by their ``(start, end)`` spans in order, into as few
    lanes as hold them without overlap: the rows a band of a timeline draws."""
    packed: list[list[_Item]] = []
    for item in sorted(items, key=span):
        start = span(item)[0]
        for lane in packed:
            if span(lane[-1])[1] <= start:
                lane.append(item)
                break
        else:
            packed.append([item])
    return packed
