"""Units, labels and figure plumbing shared by simcoll's plots (matplotlib imported lazily)."""

from __future__ import annotations

import math
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from simcoll.errors import InvalidInputError
from simcoll.files import output_path, write_atomically

__all__ = ["lanes", "log2_ticks", "octaves", "format_size", "size_writer", "size_ticks",
           "decimal_sizes", "time_unit",
           "format_duration", "format_time_tick",
           "wrapped", "check_axes",
           "named_bands", "integer_list", "RULED_BANDS", "OUTLINED_BAR", "NARROW_EDGE",
           "checked_save_path",
           "new_axes", "finish", "log_y_axis", "LEGEND_PLACES", "legend_place"]

_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DECIMAL_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")
_TIME_UNITS = ((1.0, "s", 1.0), (1e-3, "ms", 1e3), (1e-6, "µs", 1e6), (0.0, "ns", 1e9))


def _digits(value: float, significant: int) -> str:
    """``value`` to ``significant`` digits, never in exponent form (``1500``, not
    ``1.5e+03``)."""
    rounded = float(f"{value:.{significant}g}")
    if abs(rounded) >= 10 ** (significant - 1):
        return f"{rounded:.0f}"
    return f"{rounded:.{significant}g}"


def format_size(nbytes: float, *, decimal: bool = False) -> str:
    """A size in binary units: ``8 B``, ``1 KiB``, ``1.5 MiB``, ``64 MiB``, ``1 GiB``
    (``decimal``: ``10 kB``, ``1 MB``).

    Rounded first, then given its unit, so 1023.99 B reads ``1 KiB``, not ``1024 B``."""
    base, units = (1000, _DECIMAL_UNITS) if decimal else (1024, _SIZE_UNITS)
    value, unit = float(nbytes), 0
    while unit < len(units) - 1 and abs(float(f"{value:.4g}")) >= base:
        value /= base
        unit += 1
    return f"{_digits(value, 4)} {units[unit]}"


def decimal_sizes(sizes: Iterable[float]) -> bool:
    """Whether ``sizes`` were given in decimal units: every one of 1000 B or more is a
    whole number of kB, and one at least is no whole number of KiB (``1e4``, ``"10KB"``,
    which read ``9.766 KiB`` in binary units)."""
    large = [float(size) for size in sizes if size >= 1000]
    return bool(large) and not any(v % 1000 for v in large) and any(v % 1024 for v in large)


def size_writer(sizes: Iterable[float]) -> Callable[[float], str]:
    """How to write ``sizes`` and ticks among them: each of ``sizes`` in decimal units
    (``10 kB``, ``100 MB``) where they are :func:`decimal_sizes` (an axis of them should
    then be labelled at them: :func:`size_ticks`); else everything as
    :func:`format_size`."""
    values = {float(size) for size in sizes}
    if not decimal_sizes(values):
        return format_size
    return lambda value: format_size(value, decimal=float(value) in values)


def size_ticks(sizes: Iterable[float], most: int, few: int | None = None) -> list[float]:
    """The labelled sizes of a log2 axis: :func:`log2_ticks`, or where the sizes are
    :func:`decimal_sizes`, the sizes themselves where there are at most ``few`` (default
    ``most``), else at most ``most`` of them spread evenly on the log axis from the first
    to the last, so every label is in one unit system (powers of 2 among decimal sizes
    read ``8 KiB`` beside ``1 kB``)."""
    distinct = sorted({float(size) for size in sizes})
    if not decimal_sizes(distinct):
        return log2_ticks(distinct, most, few)
    if len(distinct) <= (most if few is None else few):
        return distinct
    gap = math.log(distinct[-1] / distinct[0]) / max(1, most - 1)
    picked = [distinct[0]]
    for size in distinct[1:]:
        if math.log(size / picked[-1]) >= gap * (1 - 1e-9):
            picked.append(size)
    if picked[-1] != distinct[-1]:   # the last, in place of a label too near it
        if len(picked) > 1:
            picked.pop()
        picked.append(distinct[-1])
    return picked


def time_unit(largest: float) -> tuple[str, float]:
    """The unit to show times up to ``largest`` seconds in: ``(name, factor)``, where a
    time in seconds times ``factor`` is in that unit (s, ms, µs or ns).

    The unit is chosen after rounding to three digits, so 999.6 µs is shown in ms."""
    largest = abs(largest)
    index = next((i for i, (threshold, _, _) in enumerate(_TIME_UNITS)
                  if largest >= threshold), len(_TIME_UNITS) - 1)
    if index > 0 and abs(float(f"{largest * _TIME_UNITS[index][2]:.3g}")) >= 1000:
        index -= 1
    _, name, factor = _TIME_UNITS[index]
    return name, factor


def wrapped(title: str, width: int = 88) -> str:
    """``title`` broken into lines of at most ``width`` characters (each of its own lines
    on its own), so a long machine name does not run past the figure's edges: after a
    ", " or ": " where the phrases fit, else before a " (", else between words; never
    inside brackets unless a bracketed part alone is too long; a word longer than a line
    (a long machine or algorithm name) after a ``_`` or ``/`` where it can be; its
    ``$`` signs drawn as they are (:func:`literal`)."""
    out: list[str] = []
    for line in title.split("\n"):
        current = ""
        for phrase in _phrases(line, ",:"):
            for part in ([phrase] if len(phrase) <= width else _phrases(phrase, "(")):
                joined = f"{current} {part}" if current else part
                if len(joined) <= width:
                    current = joined
                    continue
                if current:
                    out.append(current)
                pieces = _between_words(part, width)
                out.extend(pieces[:-1])
                current = pieces[-1]
        out.append(current)
    return literal("\n".join(out))


def literal(text: str) -> str:
    """``text`` as matplotlib draws it letter for letter: a ``$`` in a machine's,
    algorithm's or parameter's name would start mathtext (garbled, or an error when the
    figure is drawn) where matplotlib parses math, as it does by default."""
    import matplotlib

    return text.replace("$", r"\$") if matplotlib.rcParams["text.parse_math"] else text


def _between_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, filled word by word; a word
    longer than a line cut after the last ``_`` or ``/`` that fits (between the parts of
    a name), else at ``width``; the pieces of a cut word that fall on one line are
    joined without a space."""
    tokens: list[tuple[str, str]] = []   # (separator before it, text)
    for word in text.split():
        separator = " "
        while len(word) > width:
            cut = max(word.rfind("_", 0, width), word.rfind("/", 0, width)) + 1 or width
            tokens.append((separator, word[:cut]))
            word, separator = word[cut:], ""
        tokens.append((separator, word))
    lines = [""]
    for separator, token in tokens:
        joined = f"{lines[-1]}{separator}{token}" if lines[-1] else token
        if len(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(token)
    return lines


def _phrases(line: str, marks: str) -> list[str]:
    """``line`` cut at its spaces that no bracket encloses and that follow one of
    ``marks`` (``","`` or ``":"``) or precede one (``"("``); the spaces dropped."""
    phrases, depth, start = [], 0, 0
    for i, char in enumerate(line):
        before, after = line[i - 1] if i else "", line[i + 1:i + 2]
        if depth == 0 and char == " " and (before in ",:" and before in marks
                                           or after == "(" and after in marks):
            phrases.append(line[start:i])
            start = i + 1
        depth += (char in "([{") - (char in ")]}")
    return [*phrases, line[start:]]


def format_duration(seconds: float) -> str:
    """``1.23 ms``, ``850 µs``, ``1 ms`` (for 999.6 µs: rounded first, then given its
    unit), ``1500 s`` (never ``1.5e+03 s``), ``3.43 h`` from what rounds to 10,000 s on
    (9,995 s: never ``10000 s``)."""
    if abs(float(_digits(seconds, 3))) >= 1e4:   # 9999 s rounds to 10000: hours
        return f"{_digits(seconds / 3600, 3)} h"
    name, factor = time_unit(seconds)
    return f"{_digits(seconds * factor, 3)} {name}"


def format_time_tick(seconds: float) -> str:
    """A tick of a time axis in decades: :func:`format_duration`'s units up to seconds,
    and seconds past them (``10000 s``, ``1000000 s``: powers of ten read 2.78 h, 27.8 h
    in hours)."""
    if abs(seconds) >= 1e4:
        return f"{_digits(seconds, 3)} s"
    return format_duration(seconds)


def checked_save_path(save: str | os.PathLike | None) -> Path | None:
    """``save`` as a path, after checking matplotlib can write its format and its folder
    exists, so a bad path fails before any drawing.

    Raises:
        InvalidInputError: naming the path and the accepted extensions.
    """
    if save is None:
        return None
    import matplotlib
    from matplotlib.backend_bases import FigureCanvasBase

    path = output_path(save, "save", example="figure.png")
    formats = set(FigureCanvasBase.get_supported_filetypes())
    tex = matplotlib.rcParams["pgf.texsystem"]
    if shutil.which(tex) is None:   # matplotlib writes .pgf through it, after the drawing
        formats.discard("pgf")
    if path.suffix[1:].lower() not in formats:
        missing = f" (.pgf needs {tex}, which is not installed)" if \
            path.suffix[1:].lower() == "pgf" else ""
        raise InvalidInputError(f"cannot save a figure as {str(path)!r}{missing}; use one "
                                f"of the extensions "
                                f"{', '.join('.' + f for f in sorted(formats))}")
    return path


RULED_BANDS = 40
"""The most timeline bands ruled apart and named one by one; past it every k-th is named."""

OUTLINED_BAR = 200
"""A timeline bar keeps its white outline where it is wider than the run's time over
this; a narrower one, a pixel or two, would be all outline."""
NARROW_EDGE = 0.6
"""Points of edge, in the bar's own colour, that keep a narrower bar visible."""

OUTLINED_LANE = 2.0
"""Points of height a timeline lane's bars need to keep their white outline: in thinner
lanes (31 of them in a row of a 32-rank all-to-all) the outlines covered the bars, and
busy rows read as idle."""


def log2_ticks(values: list[float], most: int, few: int | None = None) -> list[float]:
    """The labelled values of a log2 axis (sizes, rank counts): the values themselves
    where there are at most ``few`` (default ``most``); else powers of 2 every k octaves
    from the first value's (k the least that gives at most ``most``, one that lands on
    the last value's octave preferred, and longer where the ends' own labels would make
    more than ``most``), so that both ends of the data are labelled (the two ends alone
    where no step gives at most ``most``, as for ``most`` 1); the values themselves,
    thinned, where no two powers of 2 fall among them."""
    distinct = sorted(set(values))
    if len(distinct) <= (most if few is None else few):
        return [float(v) for v in distinct]
    first = math.ceil(math.log2(distinct[0]))
    last = math.floor(math.log2(distinct[-1]))
    if last - first < 1:
        step = -(-len(distinct) // most)
        return [float(v) for v in distinct[::step]]
    fits = [k for k in range(1, last - first + 1) if (last - first) // k + 1 <= most]
    landing = [k for k in fits[:4] if (last - first) % k == 0]
    # the steps in order of preference, then one past the span (a power of 2 and the
    # two ends) where even the span's own step leaves more than ``most`` with the ends
    for step in [*landing, *(k for k in fits if k not in landing), last - first + 1]:
        ticks = _with_ends([2.0**j for j in range(first, last + 1, step)], distinct, step)
        if len(ticks) <= most:
            return ticks
    return [float(distinct[0]), float(distinct[-1])]   # most < 3: the two ends alone


def _with_ends(ticks: list[float], distinct: list[float], step: int) -> list[float]:
    """``ticks`` with the ends of ``distinct`` that are not powers of 2 (or are off the
    steps) as labels of their own, the power of 2 nearest to each dropped when closer
    than half a step."""
    for end, near in ((distinct[0], 0), (distinct[-1], -1)):
        if float(end) not in ticks:
            if abs(math.log2(ticks[near]) - math.log2(end)) < step / 2 and len(ticks) > 1:
                ticks.pop(near)
            ticks.insert(0 if near == 0 else len(ticks), float(end))
    return ticks


def octaves(values: Iterable[float]) -> list[float]:
    """Every power of 2 from the least of ``values`` to the largest: a log2 axis's
    unlabelled minor ticks."""
    low, high = min(values), max(values)
    return [2.0 ** e for e in range(math.ceil(math.log2(low)),
                                     math.floor(math.log2(high)) + 1)]


def named_bands(count: int) -> list[int]:
    """The bands of a timeline of ``count`` that get a label: all of them up to
    :data:`RULED_BANDS`, else every k-th (k the least that names at most that many), and
    the last where it is at least k/2 past the previous one named."""
    every = max(1, -(-count // RULED_BANDS))
    named = list(range(0, count, every))
    if (count - 1) % every >= every / 2:
        named.append(count - 1)
    return named


def integer_list(values: Any) -> list[int] | None:
    """``values`` as a list of distinct ints (Python's or numpy's; never booleans, which
    are taken for numbers nowhere: True == 1), or None if it is not one or is empty."""
    import numpy as np

    items = list(values) if isinstance(values, (Sequence, np.ndarray)) \
        and not isinstance(values, str) \
        and not (isinstance(values, np.ndarray) and values.ndim != 1) else []
    # the types first: a list among the items is no key for set()
    if not items or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))
                        for v in items) or len(set(items)) < len(items):
        return None
    return [int(v) for v in items]


def check_axes(ax: Any) -> None:
    """Refuse an ``ax`` that is neither None nor a matplotlib Axes.

    Raises:
        InvalidInputError: naming the value.
    """
    if ax is not None:
        from matplotlib.axes import Axes

        if not isinstance(ax, Axes):
            raise InvalidInputError(f"ax={ax!r} is not a matplotlib Axes; pass one (as "
                                    f"plt.subplots() returns) or leave ax out for a new "
                                    f"figure")


def new_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, Any]:
    """``(figure, axes)``: ``ax`` and its figure, or a new pyplot figure of ``figsize``.

    Raises:
        InvalidInputError: ``ax`` is given but is not a matplotlib Axes.
    """
    check_axes(ax)
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


_VECTOR_TEXT: dict[Any, Any] = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none"}
"""Text in vector files as text: TrueType fonts in PDF and PostScript (the Type 3 fonts
matplotlib embeds by default are refused by IEEE's and ACM's checkers), and editable
text in SVG."""


_SAVING = threading.Lock()
"""Held while a figure is saved under :data:`_VECTOR_TEXT`."""


def _forked() -> None:
    """A process forked while another thread saved a figure has no such thread: a new
    lock (the copy could be held for ever)."""
    global _SAVING
    _SAVING = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def finish(fig: Any, path: Path | None) -> Any:
    """Save ``fig`` to ``path`` (if given) through a temporary file, so an existing file
    is never left half written, with its text kept as text in PDF, PostScript and SVG
    (:data:`_VECTOR_TEXT`); return ``fig``."""
    if path is not None:
        import matplotlib

        def save(tmp: Path) -> None:
            # rc_context sets matplotlib's settings for the whole process: saves from
            # two threads at once left one file's text as paths, and the settings changed
            with _SAVING, matplotlib.rc_context(_VECTOR_TEXT):
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


_MIN_SPAN = 2.0
"""The least factor a log y axis spans, so a 1% difference does not fill its height."""
LOG_MARGIN = 0.03
"""The least share of a log y axis labelled at every power of ten left between data and
its ends (7 pixels of a figure's usual 230: a marker's radius)."""
_SERIES = ((1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0),
           (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0),
           (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0))
"""Labelled tick values per decade tried on log y axes spanning under 10^2.5."""


def _log_ticks(lo: float, hi: float) -> tuple[float, float, list[float]] | None:
    """``(bottom, top, ticks)`` for a log y axis over data from ``lo`` to ``hi``: at
    least :data:`_MIN_SPAN` wide around the data, its ends on labelled ticks of the
    series that wastes least height without crowding its labels; or None where the data
    spans enough decades to be labelled at each power of ten."""
    if hi / lo < _MIN_SPAN:
        centre, half = math.sqrt(lo * hi), math.sqrt(_MIN_SPAN)
        lo, hi = centre / half, centre * half
    if hi / lo > 10 ** 2.5:
        return None
    lo, hi = lo / 1.025, hi * 1.025   # no point on the frame
    best: tuple[float, float, list[float]] | None = None
    for subs in _SERIES:
        candidates = sorted({s * 10.0 ** e for s in subs for e in range(
            math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)})
        bottom = max(c for c in candidates if c <= lo * (1 + 1e-9))
        top = min(c for c in candidates if c >= hi * (1 - 1e-9))
        ticks = [c for c in candidates if bottom * (1 - 1e-9) <= c <= top * (1 + 1e-9)]
        gaps = [math.log10(b / a) for a, b in zip(ticks, ticks[1:])]
        if len(ticks) < 3 or min(gaps) < math.log10(top / bottom) / 12:
            continue
        if best is None or top / bottom < best[1] / best[0] * 0.999:
            best = (bottom, top, ticks)
    return best


def _log_ticks_minor(bottom: float, top: float) -> list[float]:
    """1, 2, ..., 9 times each power of ten from ``bottom`` to ``top``."""
    return [s * 10.0 ** e for e in range(math.floor(math.log10(bottom)),
                                         math.ceil(math.log10(top)) + 1)
            for s in range(1, 10) if bottom <= s * 10.0 ** e <= top]


_SUPERSCRIPTS = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075"
                                              "\u2076\u2077\u2078\u2079")


def tick_numbers(lo: float, hi: float) -> Callable[[float], str]:
    """Tick labels for a log axis over data from ``lo`` to ``hi`` (> 0), all in one
    notation: plain (``0.0001``, ``250``, ``100000``) where every tick, at most the data's
    own decades, reads so, else each as a power of ten (``10⁻⁵``, ``2×10⁶``), where
    Python's ``g`` put ``1e-05`` beside ``0.0001`` on one axis."""
    if lo >= 1e-4 and hi <= 1e5:   # ticks from 1e-4 to 1e5: no exponent in g form
        return lambda v: f"{v:g}"

    def power_of_ten(value: float) -> str:
        if value <= 0:
            return f"{value:g}"
        exponent = math.floor(math.log10(value))
        mantissa = float(f"{value / 10.0 ** exponent:.3g}")
        if mantissa >= 10:
            mantissa, exponent = mantissa / 10, exponent + 1
        power = "10" + str(exponent).translate(_SUPERSCRIPTS)
        return power if mantissa == 1 else f"{mantissa:g}\u00d7{power}"

    return power_of_ten


def log_y_axis(ax: Any, lo: float, hi: float, label: Callable[[float], str]) -> None:
    """Make ``ax``'s y axis logarithmic over data from ``lo`` to ``hi``: under 10^2.5,
    labelled at the tick series that wastes least height (:func:`_log_ticks`), the
    other 1-9 multiples of each power of ten unlabelled; over it, at every power of ten,
    from the one at or below the data to the one at or above (so the largest value is
    read against a labelled tick), and further where data lies within :data:`LOG_MARGIN` of
    the axis's height of an end (a saturated bandwidth at 99.99 on an axis ending at 100
    ran along the frame, its markers cut in half).
    Only major ticks are labelled, each by ``label`` (matplotlib's default would also
    label minor ones, in scientific notation, where the axis spans under a decade or
    two: "4x10^2" beside a plain "100")."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: label(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    chosen = _log_ticks(lo, hi)
    if chosen is None:
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        pad = 10.0 ** (LOG_MARGIN * (last - first))
        ax.set_ylim(min(10.0 ** first, lo / pad), max(10.0 ** last, hi * pad))
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=99))  # every decade
    else:
        bottom, top, ticks = chosen
        ax.set_ylim(bottom, top)
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_minor_locator(FixedLocator(
            [t for t in _log_ticks_minor(bottom, top) if t not in ticks]))


LEGEND_PLACES = ("right", "inside", "none")
"""Where a figure's legend may go: beside the axes, in their best corner, or nowhere."""


def legend_place(legend: Any, given_axes: bool) -> str:
    """``legend`` checked, or by default ``"right"`` in a figure of one's own and
    ``"inside"`` on a caller's Axes, so the caller's layout holds.

    Raises:
        InvalidInputError: a value not in :data:`LEGEND_PLACES`.
    """
    if legend is None:
        return "inside" if given_axes else "right"
    if not isinstance(legend, str) or legend not in LEGEND_PLACES:
        raise InvalidInputError(f"legend={legend!r} is not accepted; use one of "
                                f"{LEGEND_PLACES} or leave it out")
    return legend
