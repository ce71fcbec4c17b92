"""nccl-tests' result table, with its header lines, column widths and number formats.

The layout follows ``src/util.cu`` of NVIDIA/nccl-tests 2.19.6 (``writeResultHeader``,
``writeBenchmarkLinePreamble``, ``writeBenchmarkLineBody``, ``getFloatStr`` and
``writeResultFooter``), keeping one block of time / algbw / busbw / #wrong columns: a
simulation has no separate in-place run, so there is no second block.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Row", "fixed", "header", "row", "footer", "average_busbw", "fails_min_bw"]


@dataclass(frozen=True)
class Row:
    """One line of the table: nccl-tests' columns, in its units (us, GB/s = 10^9 B/s).

    Attributes:
        size: the larger of a rank's send and receive buffers, in bytes.
        count: elements of nccl-tests' count argument (per rank, or per block for the
            collectives that cut a buffer into one block per rank).
        wrong: elements that failed the numpy check, or None if unchecked.
    """

    size: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None


def fixed(value: float, width: int) -> str:
    """``value`` in at most ``width`` characters, as nccl-tests' ``getFloatStr``: two
    decimals if they fit, else one, else none, else exponent notation."""
    for digits in (2, 1, 0):
        text = f"{value:{width}.{digits}f}"
        if len(text) <= width:
            return text
    return (f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}")[:width]


def header() -> list[str]:
    """The three column-title lines, preceded by nccl-tests' ``#`` line."""
    left = "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}"
    block = "  {:>7}  {:>6}  {:>6}  {:>6}"
    return ["#",
            left.format("", "", "", "", "") + f"{'simulated':^33}",
            left.format("size", "count", "type", "redop", "root")
            + block.format("time", "algbw", "busbw", "#wrong"),
            left.format("(B)", "(elements)", "", "", "")
            + block.format("(us)", "(GB/s)", "(GB/s)", "")]


def row(r: Row) -> str:
    """One result line: ``%12li  %12li  %8s  %6s  %6i`` then the timing block."""
    head = f"{r.size:12d}  {r.count:12d}  {r.type:>8}  {r.redop:>6}  {r.root:6d}"
    body = f"  {fixed(r.time_us, 7)}  {fixed(r.algbw, 6)}  {fixed(r.busbw, 6)}"
    return head + body + ("    N/A" if r.wrong is None else f"  {float(r.wrong):6g}")


def footer(rows: list[Row], min_bw: float | None = None) -> list[str]:
    """``# Out of bounds values`` (rows with #wrong above 0: ``0 OK`` without the check,
    as nccl-tests prints it with -c 0) and ``# Avg bus bandwidth``: the mean busbw over
    the rows, in GB/s, printed with %g as nccl-tests does, then ``OK`` or ``FAILED`` where
    ``min_bw`` (``NCCL_TESTS_MIN_BW``) is given: below 0.9 times it fails."""
    bad = sum(1 for r in rows if r.wrong)
    lines = [f"# {'Out of bounds values':<20} : {bad} {'FAILED' if bad else 'OK'}"]
    avg = average_busbw(rows)
    verdict = "" if min_bw is None else "FAILED" if fails_min_bw(avg, min_bw) else "OK"
    lines.append(f"# {'Avg bus bandwidth':<20} : {avg:g} {verdict}")
    lines.append("#")
    return lines


def average_busbw(rows: list[Row]) -> float:
    """The mean busbw over the rows, GB/s (0 without rows)."""
    return sum(r.busbw for r in rows) / len(rows) if rows else 0.0


def fails_min_bw(average: float, min_bw: float) -> bool:
    """Whether nccl-tests' ``NCCL_TESTS_MIN_BW`` check fails: an average busbw below 0.9
    times it (``bw[0] < check_avg_bw*(0.9)`` in src/common.cu)."""
    return average < min_bw * 0.9
