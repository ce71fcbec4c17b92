"""One result row: the column layout (from the column titles, or from a first row's
number of fields), and a row read in it, every field checked (its algbw against its size
over its time, to the rounding of the printed numbers).

Shared with the sibling modules: ``Layout``, ``layout_from_titles``, ``layout_from_row``,
``read_row``, ``read_number`` (which the footer's average bus bandwidth is read with), and
``algbw_fits`` and ``may_be_shortened`` (which a JSON report's rows are checked with).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from decimal import Decimal

from simcoll.errors import InvalidInputError
from simcoll.nccl_tests.tables import ITEMSIZE, Measurement, NcclTestsRow

__all__ = ["Layout", "layout_from_titles", "layout_from_row", "read_row", "read_number",
           "prints_error_column", "algbw_fits", "may_be_shortened"]

_DATE, _CLOCK = re.compile(r"\d{4}-\d\d-\d\d"), re.compile(r"\d\d:\d\d:\d\d")
_BLOCK = ("time", "algbw", "busbw", "wrong")
_HEAD = ("size", "count", "type", "redop", "root")
_ALIASES = {"cputime": "time", "#wrong": "wrong", "error": "wrong",
            "bytes": "size", "N": "count", "op": "redop", "res": "wrong"}   # 1.x: the last 4
_EXTRA = {"i_min", "i_max", "i_p99", "i_cv%"}


@dataclass
class Layout:
    """Where each field sits in a row: head column names, then the blocks' columns.

    Attributes:
        time_shift: the decimal places the time column's unit is above a microsecond's
            (3: nccl-tests 1.x's milliseconds).
        cputime: the time column is ``-C 1``'s CPU time, which algbw does not come from.
        titled: read from column titles (else from the first row's fields).
    """

    head: tuple[str, ...]
    blocks: tuple[str, ...]
    block_width: int = 4
    block_columns: tuple[str, ...] = _BLOCK
    error_column: bool = False
    time_shift: int = 0
    cputime: bool = False
    titled: bool = False

    @property
    def width(self) -> int:
        return len(self.head) + self.block_width * len(self.blocks)


def layout_from_titles(words: list[str], titles: tuple[str, ...] | None,
                       number: int) -> Layout:
    """The layout the column titles give: 2.x's ``size count ...``, or 1.x's ``bytes N
    type op ... res``, whose times are in milliseconds."""
    shown = words[:-1] if words[-1] == "timestamp" else words   # -S 1: rows end in one
    names = [_ALIASES.get(w, w) for w in shown]
    head = []
    for name in names:
        if name not in _HEAD:
            break
        head.append(name)
    rest = names[len(head):]
    if "time" not in rest:
        raise InvalidInputError(f"line {number}: expected column titles 'size count type "
                                f"[redop] [root] time algbw busbw #wrong ...', found "
                                f"{' '.join(words)!r}")
    width = rest.index("time", 1) if rest.count("time") > 1 else len(rest)
    columns = tuple(rest[:width])
    unknown = [n for n in columns if n not in _BLOCK and n not in _EXTRA]
    if unknown or columns[:3] != _BLOCK[:3] or len(rest) % width:
        raise InvalidInputError(
            f"line {number}: cannot read the column titles {' '.join(words)!r}: each block "
            f"should be 'time algbw busbw #wrong' (or 'error'), optionally followed by "
            f"{', '.join(sorted(_EXTRA))}, and the row by 'timestamp'"
            + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    count = len(rest) // width
    return Layout(tuple(head), _block_names(titles, count), width, columns,
                   error_column="error" in words or "res" in words,
                   time_shift=3 if words[0] == "bytes" else 0,
                   cputime="cputime" in words, titled=True)


def _block_names(titles: tuple[str, ...] | None, count: int) -> tuple[str, ...]:
    """Which block is which: the titles line's order, else out-of-place then in-place."""
    named = [{"out-of-place": "out_of_place", "in-place": "in_place",
              "simulated": "out_of_place"}[t] for t in titles or ()]
    if len(named) == count and len(set(named)) == count:
        return tuple(named)
    return ("out_of_place", "in_place")[:count]


def layout_from_row(line: str, number: int) -> Layout:
    """No column titles: the number of fields of the row ``line`` says how many head
    columns and blocks."""
    fields = _without_timestamp(line.split())
    for blocks in (2, 1):
        head = len(fields) - 4 * blocks
        if 3 <= head <= 5:
            if head == 3:
                names: tuple[str, ...] = ("size", "count", "type")
            elif head == 5:
                names = _HEAD
            else:
                names = ("size", "count", "type",
                         "root" if _is_int(fields[3]) else "redop")
            return Layout(names, ("out_of_place", "in_place")[:blocks])
    raise InvalidInputError(
        f"line {number}: a result row has {len(fields)} fields; expected 'size count type "
        f"[redop] [root]' then one or two blocks of 'time algbw busbw #wrong' (7 to 13 "
        f"fields)")


def _is_int(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", text))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_row(layout: Layout, line: str, number: int) -> NcclTestsRow:
    """The result row ``line`` (line ``number``) in ``layout``, every field checked."""
    fields = _without_timestamp(line.split())
    layout = _row_layout(layout, fields)
    if len(fields) != layout.width:
        expected = " ".join(layout.head + layout.block_columns * len(layout.blocks))
        cause = ""
        if re.search(r"\bNCCL (?:INFO|WARN|TRACE)\b", line):
            cause = ("; an NCCL log line inside the row (NCCL_DEBUG's output lands in the "
                     "table): move it out, or have NCCL write its log to a file with "
                     "NCCL_DEBUG_FILE")
        raise InvalidInputError(f"line {number}: expected {layout.width} fields ({expected}), "
                                f"found {len(fields)}: {line.strip()!r}{cause}")
    head = dict(zip(layout.head, fields))
    size = _whole(head["size"], number, "size")
    count = _whole(head["count"], number, "count")
    root = _whole(head["root"], number, "root", signed=True) if "root" in head else None
    shortened = may_be_shortened(size, count, head["type"], head.get("redop"))
    blocks = {name: _measurement(layout, fields[start:start + layout.block_width], size,
                                 number, shortened)
              for name, start in zip(layout.blocks, range(len(layout.head), layout.width,
                                                          layout.block_width))}
    return NcclTestsRow(size, count, head["type"], head.get("redop"), root,
                        blocks.get("out_of_place"), blocks.get("in_place"), number)


def may_be_shortened(size: int, count: int, kind: str, redop: str | None) -> bool:
    """Whether a row may be all_gather's (no reduction) or reduce_scatter's (a size of
    its count's bytes times the ranks), whose algbw old nccl-tests printed short, (p - 1)
    / p of size / time, as hypercube still does (:func:`algbw_fits`)."""
    itemsize = ITEMSIZE.get(kind)
    return redop in (None, "none") or itemsize is None or size > count * itemsize


def prints_error_column(layout: Layout, line: str) -> bool:
    """Whether the row ``line`` shows, in a ``#wrong`` column of ``layout``, a number
    below a million in exponent form: old versions' ``error`` column (``%7.0le``:
    ``0e+00``, ``1e+00``), not a count of wrong elements, which ``%6g`` prints without
    an exponent below a million."""
    fields = _without_timestamp(line.split())
    layout = _row_layout(layout, fields)
    if "wrong" not in layout.block_columns or len(fields) != layout.width:
        return False
    at = layout.block_columns.index("wrong")
    shown = [fields[start + at] for start in range(len(layout.head), layout.width,
                                                   layout.block_width)]
    return any("e" in text.lower() and _is_number(text) and abs(float(text)) < 1e6
               for text in shown)


def _without_timestamp(fields: list[str]) -> list[str]:
    """A row's fields without the timestamp ``-S 1`` ends it with (``%21s`` of
    ``YYYY-mm-dd HH:MM:SS``, nccl-tests 2.17.6 on)."""
    if len(fields) > 2 and _DATE.fullmatch(fields[-2]) and _CLOCK.fullmatch(fields[-1]):
        return fields[:-2]
    return fields


def _row_layout(layout: Layout, fields: list[str]) -> Layout:
    """The titled layout, or the same without its redop column for a row one field short
    that left the redop blank (``%6s`` of ""): the field after it is a number."""
    if layout.titled and "redop" in layout.head and len(fields) == layout.width - 1 \
            and _is_number(fields[layout.head.index("redop")]):
        return dataclasses.replace(layout, head=tuple(n for n in layout.head if n != "redop"))
    return layout


def _measurement(layout: Layout, fields: list[str], size: int, number: int,
                 shortened: bool) -> Measurement:
    """One block of a row, its time in microseconds, its algbw checked against it
    (``shortened``: as :func:`_check_algbw` allows)."""
    values = dict(zip(layout.block_columns, fields))
    unit = "ms" if layout.time_shift == 3 else "us"
    time = read_number(values["time"], number, f"the time ({unit})", finite=True)
    if layout.time_shift:   # the printed digits, moved: 0.072 ms is 72 us exactly
        time = float(Decimal(values["time"]).scaleb(layout.time_shift))
    algbw = read_number(values["algbw"], number, "algbw (GB/s)")
    if not layout.cputime:
        _check_algbw(size, values["time"], values["algbw"], layout, number, shortened)
    return Measurement(time, algbw, read_number(values["busbw"], number, "busbw (GB/s)"),
                       _wrong(values.get("wrong", "N/A"), number))


def _half_step(text: str) -> float:
    """Half a unit of the last digit printed: ``10.02`` -> 0.005, ``1.2e+04`` -> 500."""
    mantissa, _, exponent = text.lower().partition("e")
    # a Decimal's power of ten, which past float's range turns inf or 0 (1e400, 1e-400)
    return float(Decimal(5).scaleb(int(exponent or 0) - len(mantissa.partition(".")[2]) - 1))


def algbw_fits(size: int, time_us: float, time_step: float, algbw: float,
               algbw_step: float, shortened: bool) -> bool:
    """Whether ``algbw`` (GB/s) is ``size`` / ``time_us``, each number within its
    rounding step (``time_step`` us, ``algbw_step`` GB/s). nccl-tests before 2.10
    printed (p - 1) / p of it for all_gather and reduce_scatter, as hypercube still
    does: where the row may be one of those (``shortened``), half of it is let through;
    and 0 in any row (a single rank's reduce_scatter, whose size is its count's bytes)."""
    longest = time_us + time_step
    if longest > 0:
        slowest = size / longest / 1e3
    else:   # a time of 1e-400 us, read as 0
        slowest = math.inf if size else 0.0
    fastest = size / (time_us - time_step) / 1e3 if time_us > time_step else math.inf
    return algbw - algbw_step <= fastest * (1 + 1e-9) and (
        algbw == 0
        or algbw + algbw_step >= slowest / (2 if shortened else 1) * (1 - 1e-9))


def _check_algbw(size: int, time_text: str, algbw_text: str, layout: Layout,
                 number: int, shortened: bool) -> None:
    """algbw is size / time, to the rounding of both printed numbers
    (:func:`algbw_fits`)."""
    shift = layout.time_shift
    time_us, step = float(time_text) * 10.0 ** shift, _half_step(time_text) * 10.0 ** shift
    if algbw_fits(size, time_us, step, float(algbw_text), _half_step(algbw_text), shortened):
        return
    implied = size / time_us / 1e3 if time_us else math.inf
    untitled = "" if layout.titled else (
        "; or, as the log has no column titles here, a time in milliseconds (nccl-tests "
        "1.x, titled 'bytes N type ...') or -C 1's cputime, which algbw does not come "
        "from: keep the titles, which say so")
    raise InvalidInputError(
        f"line {number}: algbw {algbw_text} GB/s is not size / time = {size} B / "
        f"{time_us:g} us = {implied:.4g} GB/s, to the rounding of the printed numbers: a "
        f"corrupted row (another process's output inside it?){untitled}")


def _whole(text: str, number: int, what: str, *, signed: bool = False) -> int:
    if not (_is_int(text) if signed else text.isdigit()):
        raise InvalidInputError(f"line {number}: expected a whole number for {what}, found "
                                f"{text!r}")
    return int(text)


def read_number(text: str, number: int, what: str, *, finite: bool = False) -> float:
    """A number of a row or footer: never NaN or negative; with ``finite``, never infinite
    (a time; ``simcoll run`` prints an algbw of ``inf`` for a time of 0)."""
    try:
        value = float(text)
    except ValueError:
        raise InvalidInputError(f"line {number}: expected a number for {what}, found "
                                f"{text!r}") from None
    if math.isinf(value) and finite:
        raise InvalidInputError(f"line {number}: expected a finite number for {what}, found "
                                f"{text!r}")
    if math.isnan(value) or value < 0:
        raise InvalidInputError(f"line {number}: expected a non-negative number for {what}, "
                                f"found {text!r}")
    return value


def _wrong(text: str, number: int) -> float | None:
    if text == "N/A":
        return None
    return read_number(text.rstrip("*"), number, "#wrong (a count, an error, or N/A)")
