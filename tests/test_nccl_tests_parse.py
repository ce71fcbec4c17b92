"""simcoll.nccl_tests.parse against tables written here in nccl-tests' printed format.

The fixtures follow src/util.cu of NVIDIA/nccl-tests 2.19.6 (the header lines, the column
titles, ``%12li  %12li  %8s  %6s  %6s`` for the head, ``getFloatStr`` widths 7 / 6 / 6 for
time / algbw / busbw, ``%6g`` or ``N/A`` for #wrong, the footer) and older layouts (no
root column, an ``error`` column). Their numbers come from a formula, not from a real
run: time = 20 us + size / 150 GB/s, so every expected value is worked out in the test.
"""

from __future__ import annotations

import contextlib
import io
import math

import pytest

import simcoll as sc
from simcoll.cli import main
from simcoll.errors import InvalidInputError
from simcoll.nccl_tests import count_runs, parse, parse_all
from simcoll.nccl_tests.rows import _half_step
from simcoll.nccl_tests.tables import nccl_shape

BUSBW = {"all_reduce": lambda p: 2 * (p - 1) / p, "all_gather": lambda p: (p - 1) / p,
         "reduce_scatter": lambda p: (p - 1) / p, "alltoall": lambda p: (p - 1) / p,
         "broadcast": lambda p: 1.0, "reduce": lambda p: 1.0, "sendrecv": lambda p: 1.0}
# (redop, root) each program prints in 2.19.6 (src/<name>.cu's RunTest)
HEAD = {"all_reduce": ("sum", -1), "all_gather": ("none", -1), "reduce_scatter": ("sum", -1),
        "alltoall": ("none", -1), "broadcast": ("none", 0), "reduce": ("sum", 0),
        "sendrecv": ("sum", -1)}


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr, written out again here from its C source."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        text = fmt.format(value)
        if len(text) <= width:
            return text
    return (f"{{:{width}.1e}}" if width >= 7 else f"{{:{width}.0e}}").format(value)[:width]


SHARE = ("all_gather", "reduce_scatter", "alltoall")   # their count is a rank's share


def shape(size: int, p: int, program: str) -> tuple[int, int]:
    """The size and count columns nccl-tests 2.19.6 prints for ``-b size`` of floats:
    setupArgs' count = size / 4, then src/<name>.cu's GetCollByteCount (a rank's share
    rounded down to 16 bytes, (count / p) & ~3, for all_gather, reduce_scatter, alltoall);
    the size is the larger of the send and receive buffers."""
    count = size // 4
    if program in SHARE:
        share = (count // p) & ~3
        return share * p * 4, share
    return count * 4, count


def model(size: int, p: int, program: str, in_place: bool) -> tuple[float, float, float]:
    """Time (us), algbw and busbw (GB/s) of the made-up machine; in-place 1% faster."""
    time_us = (20.0 + size / 150e9 * 1e6) * (0.99 if in_place else 1.0)
    algbw = size / (time_us * 1e-6) / 1e9
    return time_us, algbw, algbw * BUSBW[program](p)


def block(size: int, p: int, program: str, in_place: bool, wrong: str) -> str:
    t, a, b = model(size, p, program, in_place)
    return f"  {float_str(t, 7)}  {float_str(a, 6)}  {float_str(b, 6)}  {wrong:>6}"


def row_text(size: int, p: int, program: str, *, wrong: str = "0") -> str:
    """The row of ``-b size``."""
    redop, root = HEAD[program]
    size, count = shape(size, p, program)
    return (f"{size:12d}  {count:12d}  {'float':>8}  {redop:>6}  {root:6d}"
            + block(size, p, program, False, wrong) + block(size, p, program, True, wrong))


SIZES = [8 * 4**i for i in range(14)]           # 8 B ... 512 MiB


def nccl_text(program: str = "all_reduce", p: int = 8, sizes: list[int] = SIZES, *,
              version: bool = True) -> str:
    """A whole 2.19.6-style run: header, devices, titles, rows and footer."""
    lines = []
    if version:
        lines += ["# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803",
                  f"# Collective test starting: {program}_perf"]
    lines += [f"# nThread 1 nGpus {p} minBytes {sizes[0]} maxBytes {sizes[-1]} step: "
              f"4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 "
              f"unalign: 0", "#", "# Using devices"]
    for r in range(p):
        lines.append(f"#  Rank {r:2d} Group {0:2d} Pid {4242:6d} on {'node0':>10} device "
                     f"{r:2d} [0000:{16 * r + 7:02x}:00] NVIDIA H100 80GB HBM3")
    lines += ["#", f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place"
              f"                       in-place          ",
              f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  "
              f"{'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}  {'time':>7}  "
              f"{'algbw':>6}  {'busbw':>6}  {'#wrong':>6} ",
              f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  "
              f"{'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  "
              f"{'(GB/s)':>6}  {'':>6} "]
    lines += [row_text(s, p, program) for s in sizes]
    avg = sum(float(float_str(model(shape(s, p, program)[0], p, program, False)[2], 6))
              for s in sizes) / len(sizes)
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:g} ", "#",
              f"# Collective test concluded: {program}_perf", ""]
    return "\n".join(lines)


def printf(fmt: str, *args: object) -> str:
    """What C's printf writes for ``fmt`` (nccl-tests' formats, copied as they are)."""
    return fmt % args


def printed(value: float, width: int) -> float:
    return float(float_str(value, width))


def check_rows(table, program: str, p: int, sizes: list[int]) -> None:
    """The table holds the rows of ``-b`` ``sizes``, every field as printed."""
    redop, root = HEAD[program]
    shapes = [shape(s, p, program) for s in sizes]
    assert table.sizes == tuple(size for size, _ in shapes)
    for row, (size, count) in zip(table.rows, shapes):
        assert (row.size, row.count, row.type, row.redop, row.root) == \
            (size, count, "float", redop, root)
        for place, in_place in (("out_of_place", False), ("in_place", True)):
            got = row.measurement(place)
            t, a, b = model(size, p, program, in_place)
            assert got.time_us == printed(t, 7)
            assert abs(got.time_us - t) <= 0.005 + 1e-12 or t >= 1e4
            assert (got.algbw, got.busbw, got.wrong) == (printed(a, 6), printed(b, 6), 0.0)
            assert got.time == pytest.approx(got.time_us * 1e-6, rel=1e-15)


def test_reads_a_whole_run_and_every_field():
    text = nccl_text("all_reduce", 8)
    table = parse(text)
    assert table.collective == "all_reduce"
    assert table.nranks == 8 and len(table) == len(SIZES)
    assert table.devices == ("NVIDIA H100 80GB HBM3",) * 8
    assert table.hosts == ("node0",) * 8
    assert table.nccl_version == "2.28.3"
    assert table.settings == {"nThread": 1, "nGpus": 8, "minBytes": 8,
                              "maxBytes": SIZES[-1], "step": 4, "step_kind": "factor",
                              "warmup iters": 5, "iters": 20, "agg iters": 1,
                              "validation": 1, "graph": 0, "unalign": 0}
    assert table.out_of_bounds == 0
    expected_avg = sum(printed(model(s, 8, "all_reduce", False)[2], 6) for s in SIZES) / 14
    assert table.avg_busbw == pytest.approx(expected_avg, rel=1e-5)
    check_rows(table, "all_reduce", 8, SIZES)
    # row line numbers point into the text
    lines = text.splitlines()
    assert all(lines[r.line - 1].split()[0] == str(r.size) for r in table.rows)


@pytest.mark.parametrize("program,collective", [
    ("all_reduce", "all_reduce"), ("all_gather", "all_gather"),
    ("reduce_scatter", "reduce_scatter"), ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"), ("reduce", "reduce"), ("sendrecv", "sendrecv")])
@pytest.mark.parametrize("p", [2, 5, 8])
def test_every_program_layout(program, collective, p):
    table = parse(nccl_text(program, p, SIZES[:6]))
    assert (table.collective, table.nranks) == (collective, p)
    check_rows(table, program, p, SIZES[:6])


def test_collective_from_the_command_line_or_the_layout_or_the_argument():
    body = nccl_text("all_gather", 4, SIZES[:3], version=False)
    assert parse(body).collective is None                  # nothing says which
    assert parse(body, collective="all_gather_perf").collective == "all_gather"
    assert parse("$ ./build/all_gather_perf -b 8 -e 128 -f 4 -g 4\n" + body).collective == \
        "all_gather"
    # a reduction with a root: only reduce prints one; none, a root and a size of count
    # elements: only broadcast (gather and scatter: count x the ranks; GATHER_2_13)
    assert parse(nccl_text("reduce", 4, SIZES[:3], version=False)).collective == "reduce"
    assert parse(nccl_text("broadcast", 4, SIZES[:3], version=False)).collective == "broadcast"
    with pytest.raises(InvalidInputError, match="'reduce_scatter' was given.*'all_gather'"):
        parse(nccl_text("all_gather", 4, SIZES[:3]), collective="reduce_scatter")
    with pytest.raises(InvalidInputError, match="'allreduce'.*known: all_gather"):
        parse(body, collective="allreduce")


OLD = "\n".join([
    '# nThread 1 nGpus 2 minBytes 32 maxBytes 1024 step: 2(factor)'
    ' warmup iters: 5 iters: 20 validation: 1',
    '',
    '# Using devices',
    '#  Rank  0 Pid  31337 on     oldbox device  0 [0x00] Tesla V100-SXM2-16GB',
    '#  Rank  1 Pid  31337 on     oldbox device  1 [0x00] Tesla V100-SXM2-16GB',
    '',
    '#                                                    out-of-'
    'place                       in-place',
    '#      size         count    type   redop     time   algbw  '
    ' busbw  error     time   algbw   busbw  error',
    '#       (B)    (elements)                     (us)  (GB/s)  '
    '(GB/s)            (us)  (GB/s)  (GB/s)',
    '          32             8   float     sum    10.25    0.00 '
    '   0.00  0e+00    10.50    0.00    0.00  2e-07',
    '        1024           256   float     sum    11.00    0.09 '
    '   0.09  0e+00    12.00    0.09    0.09  0e+00',
    '# Out of bounds values : 0 OK',
    '# Avg bus bandwidth    : 0.045',
    '',
    ""])


def test_old_layout_without_root_and_with_an_error_column():
    table = parse(OLD, collective="all_reduce")
    assert table.collective == "all_reduce"
    assert (table.nranks, table.devices) == (2, ("Tesla V100-SXM2-16GB",) * 2)
    assert (table.avg_busbw, table.out_of_bounds, table.nccl_version) == (0.045, 0, None)
    assert table.settings["iters"] == 20 and "unalign" not in table.settings
    first, second = table.rows
    assert (first.size, first.count, first.type, first.redop, first.root) == \
        (32, 8, "float", "sum", None)
    assert first.out_of_place == sc.nccl_tests.Measurement(10.25, 0.0, 0.0, 0.0)
    assert first.in_place == sc.nccl_tests.Measurement(10.5, 0.0, 0.0, 2e-07)
    assert second.out_of_place.time_us == 11.0 and second.in_place.time_us == 12.0


OLD_ALL_GATHER = """\
#                                             out-of-place                    in-place
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        4096           512   float    21.50    0.19    0.14  0e+00    21.00    0.20    0.15  0e+00
# Avg bus bandwidth    : 0.14
"""


def test_old_layout_without_redop_or_root():
    (row,) = parse(OLD_ALL_GATHER).rows
    assert (row.size, row.count, row.type, row.redop, row.root) == (4096, 512, "float",
                                                                      None, None)
    assert row.out_of_place == sc.nccl_tests.Measurement(21.5, 0.19, 0.14, 0.0)
    assert row.in_place == sc.nccl_tests.Measurement(21.0, 0.2, 0.15, 0.0)


@pytest.mark.parametrize("prefix", ["[0] ", "[1,0]<stdout>:", " 0: ", "[3]",
                                    "[prterun-node0-4242@1,0]<stdout>: "])
def test_launcher_prefixes(prefix):
    text = nccl_text("all_reduce", 4, SIZES[:5])
    prefixed = "\n".join(prefix + line if line else line for line in text.splitlines())
    table = parse(prefixed)
    assert (table.collective, table.nranks, table.avg_busbw) == ("all_reduce", 4,
                                                                 parse(text).avg_busbw)
    check_rows(table, "all_reduce", 4, SIZES[:5])


def test_log_lines_between_rows_and_a_prefix_inside_a_row():
    text = nccl_text("all_reduce", 4, SIZES[:3]).splitlines()
    rows_at = [i for i, line in enumerate(text) if line.startswith("           8")][0]
    text.insert(rows_at, "node0:4242:4242 [0] NCCL INFO comm 0x55 rank 0 nranks 4 - Init "
                         "COMPLETE")
    text.insert(rows_at, "NCCL version 2.21.5+cuda12.4")
    broken = text[rows_at + 3]                     # the second row, split by a log prefix
    cut = broken.index("  ", 60)
    text[rows_at + 3] = "[0]" + broken[:cut] + "[0]" + broken[cut:]
    table = parse("\n".join(text))
    assert table.nccl_version == "2.21.5"          # the 'NCCL version' line wins
    check_rows(table, "all_reduce", 4, SIZES[:3])


def test_per_iteration_columns():
    """-I 1 adds i_min i_max i_p99 i_cv% after each block (util.cu's per_iter_timing)."""
    extra = "  {:>7}  {:>7}  {:>7}  {:>7}".format("20.10", "25.00", "24.90", "3.2")
    row = (f"{1024:12d}  {256:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
           f"  {'21.00':>7}  {'0.05':>6}  {'0.09':>6}  {'0':>6}" + extra +
           f"  {'20.00':>7}  {'0.05':>6}  {'0.09':>6}  {'0':>6}" + extra)
    titles = ("# " + " ".join(["size", "count", "type", "redop", "root"]
                              + ["time", "algbw", "busbw", "#wrong", "i_min", "i_max",
                                 "i_p99", "i_cv%"] * 2))
    text = "#  out-of-place (+ per-iteration)  in-place (+ per-iteration)\n" + titles + \
        "\n" + row
    (got,) = parse(text).rows
    assert got.out_of_place == sc.nccl_tests.Measurement(21.0, 0.05, 0.09, 0.0)
    assert got.in_place == sc.nccl_tests.Measurement(20.0, 0.05, 0.09, 0.0)


def test_rows_without_column_titles():
    rows = "\n".join(row_text(s, 4, "all_reduce") for s in SIZES[:3])
    check_rows(parse(rows), "all_reduce", 4, SIZES[:3])
    one_block = "\n".join(f"{s:12d}  {s // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
                          + block(s, 4, "all_reduce", False, "N/A") for s in SIZES[:2])
    table = parse(one_block)
    assert all(r.in_place is None and r.out_of_place.wrong is None for r in table.rows)
    old = "          64            16   float    none       0    10.00    0.01    0.01  0e+00"
    (row,) = parse(old).rows
    assert (row.redop, row.root, row.in_place) == ("none", 0, None)
    rooted = "          64            16   float       3    10.00    0.01    0.01  0e+00"
    assert parse(rooted).rows[0].root == 3 and parse(rooted).rows[0].redop is None


def test_two_runs():
    text = nccl_text("all_reduce", 8, SIZES[:3]) + nccl_text("all_gather", 8, SIZES[:4])
    with pytest.raises(InvalidInputError,
                       match=r"2 runs \(the second starts at line 25\); parse_all"):
        parse(text)
    first, second = parse_all(text)
    assert (first.collective, len(first), second.collective, len(second)) == \
        ("all_reduce", 3, "all_gather", 4)
    check_rows(second, "all_gather", 8, SIZES[:4])


MALFORMED = [
    ("drop a field", lambda line: line.rsplit(None, 1)[0],
     r"line {n}: expected 13 fields \(size count type redop root time algbw busbw wrong"),
    ("text for a time", lambda line: line.replace(line.split()[5], "fast", 1),
     r"line {n}: expected a number for the time \(us\), found 'fast'"),
    ("negative busbw", lambda line: line.replace(" " + line.split()[7], "  -" +
                                                 line.split()[7], 1),
     r"line {n}: expected a non-negative number for busbw"),
    ("a fraction of a byte", lambda line: line.replace(line.split()[0], "8.5", 1),
     r"line {n}: expected a whole number for size, found '8.5'"),
    ("a word for #wrong", lambda line: line.rsplit(None, 1)[0] + "   bad",
     r"line {n}: expected a number for #wrong \(a count, an error, or N/A\), found 'bad'"),
    ("a word for the root", lambda line: line.replace(" -1 ", " xx ", 1),
     r"line {n}: expected a whole number for root, found 'xx'"),
    ("a negative time", lambda line: line.replace(" " + line.split()[5], " -" +
                                                  line.split()[5], 1),
     r"line {n}: expected a non-negative number for the time \(us\)"),
    ("an infinite time", lambda line: line.replace(line.split()[5], "    inf", 1),
     r"line {n}: expected a finite number for the time \(us\), found 'inf'"),
]


@pytest.mark.parametrize("what,damage,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_rows_name_their_line(what, damage, message):
    lines = nccl_text("all_reduce", 8, SIZES[:4]).splitlines()
    n = [i for i, line in enumerate(lines) if line.startswith(f"{512:12d}")][0]
    lines[n] = damage(lines[n])
    with pytest.raises(InvalidInputError, match=message.format(n=n + 1)):
        parse("\n".join(lines))


def test_malformed_inputs():
    with pytest.raises(InvalidInputError, match="no result rows found"):
        parse("# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n# Using devices\n")
    with pytest.raises(InvalidInputError, match="no result rows found"):
        parse("")
    with pytest.raises(InvalidInputError, match="not bytes"):
        parse(b"  8  2  float  sum  -1  1.0  0.0  0.0  0")
    with pytest.raises(InvalidInputError, match=r"line 1: a result row has 10 fields"):
        parse("  8  2  float  sum  -1  1.0  0.0  0.0  0  1.0")
    with pytest.raises(InvalidInputError, match="line 2: cannot read the column titles"):
        parse("#  out-of-place in-place\n#  size  count  type  time  algbw  speed\n")
    # a footer cut after its colon is a run without its footer (test_compare's notes)
    with pytest.raises(InvalidInputError, match="no result rows found"):
        parse("# Avg bus bandwidth    : \n")
    with pytest.raises(InvalidInputError, match="no in-place block"):
        parse("  8  2  float  sum  -1  1.0  0.0  0.0  0").rows[0].measurement("in_place")
    with pytest.raises(InvalidInputError, match="'sideways' is not"):
        parse("  8  2  float  sum  -1  1.0  0.0  0.0  0").rows[0].measurement("sideways")


def test_between_and_to_pandas():
    table = parse(nccl_text("all_reduce", 8, SIZES[:6]))
    middle = table.between(32, 2048)
    assert middle.sizes == (32, 128, 512, 2048)
    assert table.between("32B", "2KiB").sizes == middle.sizes
    for bad, match in [((2048, 32), r"between\(2048, 32\): low is above high"),
                       ((-1,), "low=-1 is not accepted"), ((0, "2Kb"), "high='2Kb' is not")]:
        with pytest.raises(InvalidInputError, match=match):
            table.between(*bad)
    assert (middle.collective, middle.nranks, middle.devices) == \
        (table.collective, table.nranks, table.devices)
    frame = table.to_pandas()
    assert list(frame.columns) == ["size", "count", "type", "redop", "root", "time_us",
                                   "algbw", "busbw", "wrong", "in_place_time_us",
                                   "in_place_algbw", "in_place_busbw", "in_place_wrong"]
    assert frame["size"].tolist() == SIZES[:6]
    assert frame["in_place_time_us"].tolist() == [r.in_place.time_us for r in table.rows]


def run_cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", *args]) == 0
    return out.getvalue()


@pytest.mark.parametrize("collective,algorithm,factor", [
    ("all_reduce", "ring", 1), ("all_gather", "ring", 4), ("broadcast", "binomial", 1),
    ("reduce_scatter", "ring", 1)])
def test_round_trip_through_simcoll_run(collective, algorithm, factor):
    """What `simcoll run` prints reads back as the simulation's own values."""
    topo = sc.topology.switch(4, bandwidth=50 * sc.GB, latency=2 * sc.us)
    text = run_cli("--topology", "switch:ranks=4,bandwidth=50GB/s,latency=2us",
                   "--collective", collective, "--algorithm", algorithm, "-b", "64", "-e",
                   "4M", "-f", "8", "-c")
    table = parse(text)
    assert (table.collective, table.nranks, table.out_of_bounds) == (collective, 4, 0)
    assert table.sizes == (64, 512, 4096, 32768, 262144, 2097152)
    simulated = []
    for row in table.rows:
        nbytes = row.size // factor
        res = sc.simulate(topo, collective, algorithm=algorithm, nbytes=nbytes)
        simulated.append(res.busbw / 1e9)
        got = row.out_of_place
        assert row.in_place is None and got.wrong == 0
        assert got.time_us == pytest.approx(res.time * 1e6, abs=0.006)
        assert got.algbw == pytest.approx(res.algbw / 1e9, abs=0.006)
        assert got.busbw == pytest.approx(res.busbw / 1e9, abs=0.006)
        assert row.count == nbytes // 4 // (4 if collective == "reduce_scatter" else 1)
    assert table.avg_busbw == pytest.approx(sum(simulated) / len(simulated), rel=1e-5)


def test_a_time_under_half_a_hundredth_of_a_microsecond_reads_as_zero():
    # 64 B on links without latency at 1 TB/s: simcoll run prints 0.00 us
    text = run_cli("--topology", "switch:ranks=4,bandwidth=1TB/s,latency=0", "-b", "64",
                   "-e", "64K", "-f", "1024")
    table = parse(text)
    assert table.sizes == (64, 65536)
    assert table.rows[0].out_of_place.time_us == 0.0
    assert table.rows[1].out_of_place.time_us > 0


def test_rows_of_nothing_take_no_time():
    """Under one element per rank nccl-tests and `simcoll run` print a row of size 0,
    which NCCL does not launch (0.00 us); it reads back."""
    text = run_cli("--topology", "switch:4", "--collective", "reduce_scatter", "--algorithm",
                   "nccl", "-b", "8", "-e", "64", "-f", "8")
    table = parse(text)
    assert table.sizes == (0, 64)
    assert table.rows[0].count == 0 and table.rows[0].out_of_place.time_us == 0.0
    assert table.rows[1].out_of_place.time_us > 0


def v1_text(times_us: dict[int, float], p: int = 4) -> str:
    """An all_reduce_perf run of nccl-tests 1.x (925a705), as its printf calls write it
    (src/common.cu, src/all_reduce.cu): the settings line and the footer without '#',
    devices without Pid, the columns titled 'bytes N type op ... res' and every block
    '  %7.3f  %5.2f  %5.2f  %7.0le' of the time in MILLIseconds (deltaSec * 1.0E3)."""
    lines = [f"nThread 1 nGpus {p} minBytes {min(times_us)} maxBytes {max(times_us)} step: "
             f"64(factor) warmup iters: 5 iters: 20 validation: 1 ",
             "# NCCL Tests compiled with NCCL 2.3", "# Using devices"]
    lines += [f"#   Rank {r:2d} on {'dgx1':>10} device {r:2d} [0x{6 + r:02x}] "
              f"Tesla P100-SXM2-16GB" for r in range(p)]
    lines += ["", printf("# %10s  %12s  %6s  %6s        out-of-place                    "
                         "in-place", "", "", "", ""),
              printf("# %10s  %12s  %6s  %6s  %7s  %5s  %5s  %7s  %7s  %5s  %5s  %7s",
                     "bytes", "N", "type", "op", "time", "algbw", "busbw", "res", "time",
                     "algbw", "busbw", "res")]
    for size, time_us in times_us.items():
        algbw = size / time_us / 1e3
        block = printf("  %7.3f  %5.2f  %5.2f  %7.0e", time_us / 1e3, algbw,
                       algbw * 2 * (p - 1) / p, 1e-7)
        lines.append(printf("%12li  %12li  %6s  %6s", size, size // 4, "float", "sum")
                     + block + block)
    return "\n".join(lines + [" Out of bounds values : 0 OK",
                              " Avg bus bandwidth    : 25.84 ", ""])


def test_nccl_tests_1_x_prints_milliseconds_and_no_hash():
    """nccl-tests 1.x (before 2.0.0) titles its columns 'bytes N type op', prints the time
    in milliseconds, and the settings and footer lines without '#'."""
    text = v1_text({1048576: 72.0, 67108864: 3375.0})
    table = parse(text)
    first, second = table.rows
    # '  0.072' ms is 72 us; 1048576 B / 72 us = 14.56 GB/s, as printed
    assert first.out_of_place == sc.nccl_tests.Measurement(72.0, 14.56, 21.85, 1e-07)
    assert second.in_place.time_us == 3375.0 and second.in_place.algbw == 19.88
    assert (first.size, first.count, first.redop, first.root) == (1048576, 262144, "sum",
                                                                   None)
    assert table.error_column and table.wrong_sizes() == ()
    assert (table.nranks, table.hosts, table.devices) == (4, ("dgx1",) * 4,
                                                          ("Tesla P100-SXM2-16GB",) * 4)
    assert table.settings["nGpus"] == 4 and table.settings["iters"] == 20
    assert (table.out_of_bounds, table.avg_busbw) == (0, 25.84)
    # the footer ends the run, as with its '#'
    lines = text.splitlines()
    first_run, second_run = parse_all("\n".join(lines + lines[-4:-2]), collective="all_reduce")
    assert first_run.sizes == second_run.sizes == (1048576, 67108864)


def test_milliseconds_without_their_titles_are_refused():
    """Without the titles that say so, 1.x's '0.072' reads as 72 ns, which makes the
    printed algbw of 14.56 GB/s a thousandth of size / time."""
    row = [line for line in v1_text({1048576: 72.0}).splitlines()
           if line.startswith(" " * 5 + "1048576")]
    with pytest.raises(InvalidInputError, match=(
            r"line 1: algbw 14.56 GB/s is not size / time = 1048576 B / 0.072 us = "
            r"1.456e\+04 GB/s.*a time in milliseconds \(nccl-tests 1.x")):
        parse(row[0])


ALGBW_HEAD = ("#       size         count      type   redop    root     time   algbw   busbw "
              "#wrong     time   algbw   busbw #wrong\n")


def test_algbw_short_of_size_over_time_passes_only_where_old_versions_printed_it_so():
    """8388608 B / 103.4 us = 81.13 GB/s; a row printing 67.98 (8388608 B / 123.4 us) has
    a time 16% short of its algbw's. nccl-tests before 2.10 printed (p - 1) / p of algbw
    for all_gather and reduce_scatter only, so half of size / time was let through for
    all_reduce too; an all_gather row (redop none) or a reduce_scatter row (size 4 x its
    count's bytes) may still print it."""
    all_reduce = ("     8388608       2097152     float     sum      -1    103.4   67.98  101.97"
                  "      0    122.9   68.25  102.38      0\n")
    with pytest.raises(InvalidInputError, match=r"line 2: algbw 67.98 GB/s is not size / "
                                                r"time = 8388608 B / 103.4 us = 81.13 GB/s"):
        parse(ALGBW_HEAD + all_reduce)
    # 0 passes in any row: old versions printed (1 - 1) / 1 of a lone rank's reduce_scatter
    assert parse(ALGBW_HEAD + all_reduce.replace("   67.98", "    0.00")).rows[0] \
        .out_of_place.algbw == 0.0
    gathered = all_reduce.replace("     sum", "    none")
    assert parse(ALGBW_HEAD + gathered).rows[0].out_of_place.algbw == 67.98
    scattered = all_reduce.replace("2097152", " 524288")
    assert parse(ALGBW_HEAD + scattered).rows[0].out_of_place.time_us == 103.4
    # under half of size / time stays refused for them too
    with pytest.raises(InvalidInputError, match=r"algbw 40.00 GB/s is not size / time"):
        parse(ALGBW_HEAD + gathered.replace("   67.98", "   40.00"))


_TITLES = ("#       size         count      type   redop    root     time   algbw   busbw "
           "#wrong\n")


@pytest.mark.parametrize("time, algbw, said", [
    ("24.03", "1e400", r"algbw 1e400 GB/s is not size / time = 1024 B / 24.03 us"),
    ("1e-400", "0.04", r"algbw 0.04 GB/s is not size / time = 1024 B / 0 us = inf GB/s")])
def test_numbers_past_floats_range_are_refused_naming_the_line(time, algbw, said):
    """An algbw of 1e400 (a half step of 10^400) raised OverflowError, a time of 1e-400
    (read as 0) ZeroDivisionError."""
    row = (f"        1024           256     float     sum      -1 {time:>8} {algbw:>7}    0.06"
           f"       0")
    with pytest.raises(InvalidInputError, match=rf"^line 2: {said}"):
        parse(_TITLES + row, collective="all_reduce")


def test_an_infinite_algbw_leaves_the_rank_count_untold():
    """simcoll run prints inf for a time of 0.00 us; with no rank count in the log the
    rows' busbw / algbw ratio is read for one, which an inf raised OverflowError at."""
    row = "        1024           256     float     sum      -1     0.00     inf     inf     N/A"
    table = parse(_TITLES + row, collective="all_reduce")
    assert table.nranks is None
    assert table.rows[0].out_of_place == sc.nccl_tests.Measurement(0.0, math.inf, math.inf,
                                                                    None)


def test_an_nccl_log_line_inside_a_row_is_named_as_the_cause():
    """nccl-tests prints a row's size, count, type, redop and root before it times the
    size; NCCL's lazy connection set-up then logs into the middle of the row."""
    lines = nccl_text("all_reduce", 4, SIZES[5:7]).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{SIZES[5]:12d}"))
    head, tail = lines[at][:52], lines[at][52:]
    lines[at:at + 1] = [head + "node00:1000:1050 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] "
                               "via P2P/CUMEM", tail]
    with pytest.raises(InvalidInputError, match=rf"line {at + 1}: expected 13 fields .*; an "
                                                r"NCCL log line inside the row .* "
                                                r"NCCL_DEBUG_FILE"):
        parse("\n".join(lines))
    lines[at:at + 2] = [head + " 7 " + tail]     # a field too many, no log line: no cause
    with pytest.raises(InvalidInputError, match=r"found 14: '[^']*'$"):
        parse("\n".join(lines))


# what nccl-tests' NCCLCHECK and TESTCHECK macros print (src/common.h) when a run fails
NCCL_FAILURE = ("node-001: Test NCCL failure common.cu:1279 'unhandled system error (run with "
                "NCCL_DEBUG=INFO for details) / '")
TEST_FAILURE = " .. node-001 pid 1906305: Test failure common.cu:1100"


@pytest.mark.parametrize("failure", [[NCCL_FAILURE, TEST_FAILURE], [TEST_FAILURE]])
def test_a_failed_run_is_refused_naming_the_line_and_the_last_size(failure):
    lines = nccl_text("all_reduce", 8, SIZES[:4]).splitlines()
    last = [i for i, line in enumerate(lines) if line.startswith(f"{SIZES[3]:12d}")][0]
    text = "\n".join(lines[:last + 1] + failure + [TEST_FAILURE, TEST_FAILURE])
    quoted = failure[0].strip()
    with pytest.raises(InvalidInputError) as caught:
        parse(text)
    message = str(caught.value)
    assert message.startswith(f"line {last + 2}: nccl-tests reported a failure: {quoted!r}")
    assert f"stops after the row of size {SIZES[3]} (line {last + 1})" in message
    assert "\n" not in message


def test_a_run_that_fails_before_its_first_row():
    lines = nccl_text("all_reduce", 8, SIZES[:2]).splitlines()
    first = [i for i, line in enumerate(lines) if line.startswith(f"{SIZES[0]:12d}")][0]
    text = "\n".join(lines[:first] + [NCCL_FAILURE, TEST_FAILURE])
    with pytest.raises(InvalidInputError, match=f"line {first + 1}: nccl-tests reported a "
                                                f"failure: .*before any result row"):
        parse(text)


def test_sizes_with_wrong_values():
    lines = nccl_text("all_reduce", 8, SIZES[:4]).splitlines()
    for size in (SIZES[1], SIZES[3]):
        n = [i for i, line in enumerate(lines) if line.startswith(f"{size:12d}")][0]
        lines[n] = row_text(size, 8, "all_reduce", wrong="7")
    table = parse("\n".join(lines))
    assert table.wrong_sizes() == (SIZES[1], SIZES[3]) == table.wrong_sizes("in_place")
    assert parse(nccl_text("all_reduce", 8, SIZES[:4])).wrong_sizes() == ()
    # old versions' error column is the largest error, above 0 in correct runs too
    assert parse(OLD, collective="all_reduce").wrong_sizes("in_place") == ()
    untitled = "\n".join(line for line in OLD.splitlines() if not line.startswith("#"))
    assert parse(untitled, collective="all_reduce").wrong_sizes("in_place") == ()


def mid_header(p: int, *, group: bool = True) -> list[str]:
    """The header of nccl-tests 2.13 - 2.14 (src/common.cu; no 'Collective test starting'
    line yet) on p GPUs of one process; before 2.13.4 the devices have no Group."""
    lines = [printf("# nThread 1 nGpus %d minBytes 1024 maxBytes 16384 step: 16(factor) "
                    "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", p),
             "#", "# Using devices"]
    lines += [printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s", r, 0,
                     4242, "node0", r, 0x18 + r, "NVIDIA A100-SXM4-80GB") if group else
              printf("#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s", r, 4242, "node0",
                     r, 0x18 + r, "NVIDIA A100-SXM4-80GB") for r in range(p)]
    return lines + [
        "#", "#",
        printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
               "in-place          ", "", "", "", "", ""),
        printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size",
               "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong"),
        printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
               "(GB/s)", "")]


def mid_row(size: int, count: int, redop: str, root: int, time_us: float,
            busbw_factor: float) -> str:
    """A row of 2.13 - 2.16.6: '%12li  %12li  %8s  %6s  %6s', then per block
    '  %7s  %6.2f  %6.2f  %5g' (the time '%7.2f' below 100 us)."""
    algbw = size / time_us / 1e3
    block = printf("  %7s  %6.2f  %6.2f  %5g", printf("%7.2f", time_us), algbw,
                   algbw * busbw_factor, 0)
    return printf("%12li  %12li  %8s  %6s  %6s", size, count, "float", redop,
                  printf("%6i", root)) + block + block


# gather_perf -g 8 -b 1K -e 16K -f 16 -r 0: 'none' and the root, as broadcast prints them
GATHER_2_13 = "\n".join(mid_header(8) + [mid_row(1024, 32, "none", 0, 5.05, 7 / 8),
                                         mid_row(16384, 512, "none", 0, 5.82, 7 / 8)])


def test_gather_and_broadcast_print_the_same_columns():
    """Since 2.13, gather.cu and scatter.cu print 'none' and the root as broadcast.cu
    does: the columns do not say which, and a collective given is taken."""
    assert GATHER_2_13.splitlines()[-2].split()[:5] == ["1024", "32", "float", "none", "0"]
    assert parse(GATHER_2_13).collective is None
    for name in ("gather", "scatter_perf"):
        table = parse(GATHER_2_13, collective=name)
        assert table.collective == name.removesuffix("_perf")
    # 1024 B / 5.05 us = 0.2028 GB/s, printed 0.20
    assert parse(GATHER_2_13, collective="gather").rows[0].out_of_place.algbw == 0.20
    # none is no reduce's, and a size of count 32 x 4 B x 8 ranks no broadcast's
    with pytest.raises(InvalidInputError, match="redop 'none', where reduce prints a "
                                                "reduction"):
        parse(GATHER_2_13, collective="reduce")
    with pytest.raises(InvalidInputError, match=r"size 1024 B is not its count 32 x 4 B "
                                                r"\(float\) = 128 B"):
        parse(GATHER_2_13, collective="broadcast")


def test_a_blank_redop_as_2_13_0_prints_it():
    """2.13.0 - 2.13.3 pass "" as the redop of all_gather, alltoall, broadcast, gather
    and scatter ('%6s': six blanks), as hypercube still does: rows one field short."""
    text = "\n".join(mid_header(8, group=False) + [mid_row(1024, 32, "", -1, 5.05, 7 / 8),
                                      mid_row(16384, 512, "", -1, 5.82, 7 / 8)])
    assert text.splitlines()[-1][40:48] == " " * 8
    table = parse(text, collective="all_gather")
    assert table.sizes == (1024, 16384) and table.nranks == 8
    first = table.rows[0]
    assert (first.count, first.type, first.redop, first.root) == (32, "float", None, -1)
    assert first.out_of_place == sc.nccl_tests.Measurement(5.05, 0.2, 0.18, 0.0)
    # a row one field short elsewhere is still refused
    short = text.splitlines()
    short[-1] = mid_row(16384, 512, "none", -1, 5.82, 7 / 8).rsplit(None, 1)[0]
    with pytest.raises(InvalidInputError, match=f"line {len(short)}: expected 13 fields"):
        parse("\n".join(short))


def test_timestamps_of_dash_s_1():
    """-S 1 (util.cu of 2.19.6): the titles end in 'timestamp' (%*s of 19), and each row
    in '%21s' of the date and time, which are left out."""
    fmt = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
    titles = printf(fmt, "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                    "#wrong", "time", "algbw", "busbw", "#wrong", 19, "timestamp")
    units = printf(fmt, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                   "(us)", "(GB/s)", "(GB/s)", "", 19, "%Y-%m-%d %H:%M:%S")
    rows = [row_text(s, 8, "all_reduce") + printf("%21s", "2026-07-01 12:34:56")
            for s in SIZES[:3]]
    table = parse("\n".join(["# Collective test starting: all_reduce_perf", titles, units,
                             *rows]))
    check_rows(table, "all_reduce", 8, SIZES[:3])
    assert parse("\n".join(rows)).sizes == tuple(SIZES[:3])      # without titles too


def test_a_byte_order_mark_is_left_out():
    text = "\ufeff" + nccl_text("all_reduce", 8, SIZES[:2])
    table = parse(text)
    assert (table.nccl_version, table.collective) == ("2.28.3", "all_reduce")


def test_a_row_whose_size_or_algbw_contradicts_the_rest_is_refused():
    """mpirun without --tag-output: another rank's line lands inside a row and takes
    the first digits of its size: 48576 B is not 262144 floats, and 48576 B in
    28.35 us is 1.71 GB/s, not the 36.99 printed."""
    lines = nccl_text("all_reduce", 8, [1 << 20]).splitlines()
    n = [i for i, line in enumerate(lines) if line.startswith(f"{1 << 20:12d}")][0]
    good = lines[n]
    lines[n:n + 1] = ["     10nodeB:1003:1003 [3] NCCL INFO comm 0x55 rank 3 nranks 8 - Init "
                      "COMPLETE", "48576" + good[12:]]
    with pytest.raises(InvalidInputError, match=rf"line {n + 2}: algbw \S+ GB/s is not size "
                                                r"/ time = 48576 B / "):
        parse("\n".join(lines))
    # the size alone: 1 MiB with the count of 512 KiB of floats
    fields = good.split()
    lines[n:n + 2] = [good.replace(f" {fields[1]} ", f" {int(fields[1]) // 2} ", 1)]
    with pytest.raises(InvalidInputError, match=rf"line {n + 1}: size 1048576 B is not its "
                                                r"count 131072 x 4 B \(float\) = 524288 B"):
        parse("\n".join(lines))


@pytest.mark.parametrize("program,p", [("all_gather", 8), ("reduce_scatter", 4),
                                       ("alltoall", 3)])
def test_a_ranks_share_is_checked_against_the_ranks_listed(program, p):
    text = nccl_text(program, p, SIZES[4:7])
    assert parse(text).nranks == p
    # the last device line dropped: ranks 0 .. p - 2 listed, whose count the rows contradict
    fewer = text.replace(f"#  Rank {p - 1:2d} ", f"#  rank {p - 1:2d} ", 1)
    with pytest.raises(InvalidInputError, match=rf"x {p - 1} ranks = .* a corrupted row "
                                                rf"\(another process's output inside it\?\), "
                                                rf"or a device list cut short"):
        parse(fewer)
    # the first dropped: ranks 1 .. p - 1 listed, a list cut short; the rows give p
    assert parse(text.replace("#  Rank  0 ", "#  rank  0 ", 1)).nranks == p


def test_runs_without_headers_between_them_are_told_apart():
    """grep -v '^#' of an all_reduce run and an all_gather run: the redop turns from sum
    to none, and the sizes start again."""
    rows = [row_text(s, 8, "all_reduce") for s in SIZES[5:7]] + \
        [row_text(s, 8, "all_gather") for s in SIZES[5:7]]
    text = "\n".join(rows)
    with pytest.raises(InvalidInputError, match=r"2 runs \(the second starts at line 3\)"):
        parse(text, collective="all_reduce")
    assert parse(text, run=2).rows[0].redop == "none"
    with pytest.raises(InvalidInputError, match="line 3: redop 'none', where all_reduce "
                                                "prints a reduction"):
        parse_all(text, collective="all_reduce")
    # a second all_reduce run: the same type, redop and root, sizes falling
    again = "\n".join(rows[:2] * 2)
    assert [t.sizes for t in parse_all(again)] == [(SIZES[5], SIZES[6])] * 2
    # -d all within one run sweeps each type in turn: one run
    halves = "\n".join(rows[:2] + [line.replace("   float  ", "  double  ") .replace(
        f"  {SIZES[5] // 4:12d}", f"  {SIZES[5] // 8:12d}").replace(
        f"  {SIZES[6] // 4:12d}", f"  {SIZES[6] // 8:12d}") for line in rows[:2]])
    assert len(parse(halves)) == 4


def test_the_command_line_of_the_next_run_names_it():
    """A shell loop over 2.13 - 2.16.6 programs (no 'Collective test starting' line):
    each run's command line comes after the previous run's footer."""
    text = "\n".join(["+ mpirun -np 8 ./build/all_reduce_perf -b 1K -e 16K -f 16",
                      *mid_header(8), mid_row(1024, 256, "sum", -1, 10.02, 1.75),
                      "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.18 ",
                      "+ mpirun -np 8 ./build/all_gather_perf -b 1K -e 16K -f 16",
                      *mid_header(8), mid_row(1024, 32, "none", -1, 10.02, 7 / 8),
                      "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.09 "])
    assert [t.collective for t in parse_all(text)] == ["all_reduce", "all_gather"]


def test_a_failed_run_does_not_hide_the_others():
    text = (nccl_text("all_reduce", 8, SIZES[:2]) + "# Collective test starting: "
            "all_gather_perf\n" + NCCL_FAILURE + "\n" + TEST_FAILURE + "\n"
            + nccl_text("alltoall", 8, SIZES[4:6]))
    assert count_runs(text) == 3
    assert parse(text, run=3).collective == "all_to_all"
    assert parse(text, run=1).sizes == tuple(SIZES[:2])
    with pytest.raises(InvalidInputError, match="nccl-tests reported a failure.*before any "
                                                "result row"):
        parse(text, run=2)
    with pytest.raises(InvalidInputError, match="nccl-tests reported a failure"):
        parse_all(text)
    with pytest.raises(InvalidInputError, match=r"run=4 is not accepted; use an integer >= 1 "
                                                r"and <= 3 \(the text holds 3 run\(s\)\)"):
        parse(text, run=4)


def test_a_row_cut_short_is_an_error():
    """A job killed inside a row leaves its first fields."""
    lines = nccl_text("all_reduce", 8, SIZES[:3]).splitlines()
    n = [i for i, line in enumerate(lines) if line.startswith(f"{SIZES[2]:12d}")][0]
    whole = lines[n]
    lines[n] = "  ".join(whole.split()[:5])
    with pytest.raises(InvalidInputError, match=f"line {n + 1}: a result row cut short "
                                                f"\\(5 fields\\)"):
        parse("\n".join(lines[:n + 1]))
    # another process's line inside the row, the rest of the row after it
    split = lines[:n + 1] + ["node00:1000:1050 [0] NCCL INFO comm 0x1 rank 0 nranks 8",
                             "  ".join(whole.split()[5:])]
    with pytest.raises(InvalidInputError, match=r"\(killed\?\), or another process's "
                                                r"output cut it in two \(join its parts\)"):
        parse("\n".join(split))


def _split_log(groups: list[int], program: str = "all_reduce_perf") -> str:
    """A run of nccl-tests 2.19.6 whose processes were split into communicators
    (NCCL_TESTS_SPLIT_MASK): ``# Using devices`` lists every process with its Group;
    the size, count and bandwidths are one communicator's (``args.nProcs`` is its
    size, src/common.cu)."""
    members = len(groups) // len(set(groups))
    devices = [f"#  Rank {r:2d} Group {g:2d} Pid {4000 + r:6d} on {'node' + 'AB'[r // 4]:>10} "
               f"device {r % 4:2d} [0000:0{r % 4}:00] NVIDIA H100 80GB HBM3"
               for r, g in enumerate(groups)]
    count = 262144 // (members if program.startswith("all_gather") else 1)
    redop = "sum" if program.startswith("all_reduce") else "none"
    return "\n".join([
        "# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703",
        f"# Collective test starting: {program}",
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup "
        "iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0", "#",
        "# Using devices", *devices, "#",
        "#                                                              out-of-place      "
        "                 in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw  "
        "#wrong     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)    "
        "         (us)  (GB/s)  (GB/s)         ",
        f"     1048576  {count:12d}     float  {redop:>6}      -1    48.30   21.71   21.71  "
        f"     0    47.82   21.93   21.93       0",
        "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 21.71 ", "#", ""])


def test_a_run_split_into_communicators_counts_one_communicators_ranks():
    """NCCL_TESTS_SPLIT_MASK=0x3 on 2 nodes of 4: 4 communicators of 2 ranks (Group 0..3,
    one process of each node). Every process was counted: 8 ranks, so an all_reduce log
    met an 8-GPU machine unsaid, and an all_gather log (size = count x 2 ranks) was
    refused as corrupted. One communicator's ranks now make the table's, and the table
    says how many ran; communicators of different sizes are refused."""
    for program in ("all_reduce_perf", "all_gather_perf"):
        table = parse(_split_log([0, 1, 2, 3, 0, 1, 2, 3], program))
        assert table.nranks == 2 and table.communicators == 4
        assert table.hosts == ("nodeA", "nodeB")
    assert parse(_split_log([0] * 8)).communicators == 1
    with pytest.raises(sc.InvalidInputError, match=r"split its 8 ranks into 3 "
                                                   r"communicators of different sizes"):
        parse(_split_log([0, 1, 2, 0, 1, 0, 1, 0]))
    with pytest.raises(sc.InvalidInputError, match=r"measured on 2 ranks \(communicators of "
                                                   r"2, 4 of them at once"):
        sc.compare(sc.topology.switch(8), parse(_split_log([0, 1, 2, 3] * 2)))


def test_an_alltoallv_run_is_read_and_refused_by_compare_as_such():
    """nccl-tests 2.19's alltoallv_perf prints the largest rank's total as its size, not
    a multiple of its count (1,048,528 B for a count of 32,768 floats on 8 ranks: the
    distance-weighted spread, floor16(1 MiB x d / 28) to peer d, summed): read as a
    corrupted row. It is read, and compare says simcoll has no such collective."""
    text = _split_log([0] * 8, "alltoallv_perf").replace(
        "     1048576        262144     float    none",
        "     1048528         32768     float    none")
    table = parse(text)
    assert table.collective == "alltoallv" and table.sizes == (1048528,)
    with pytest.raises(sc.InvalidInputError, match=r"nccl-tests' alltoallv_perf, which is no "
                                                   r"collective simcoll simulates"):
        sc.compare(sc.topology.switch(8), table)


def test_a_log_given_as_bytes_is_refused_by_every_reader():
    for read in (parse, count_runs):
        with pytest.raises(InvalidInputError, match=r"an nccl-tests log is read as its "
                                                    r"printed text, a str, not bytes "
                                                    r"\(bytes: \.decode\(\) them first\)"):
            read(b"# nccl-tests log")
    from pathlib import Path

    with pytest.raises(InvalidInputError, match=r"a str, not PosixPath \(a file: pass its "
                                                r"path\.read_text\(\)\)$"):
        parse(Path("log.txt"))


def test_nccl_shape_checks_its_arguments():
    """p = 0 divided by zero; a name raised AttributeError; a float size gave floats.
    4 ranks, 1000 bytes of float32: 250 elements, 62 a rank for an all_gather, which
    nccl-tests prints as count 62 and size 62 x 4 x 4 = 992."""
    from simcoll.nccl_tests import nccl_shape

    assert nccl_shape("all_gather", 4, 1000, 4) == (248, 62, 992)
    assert nccl_shape(sc.COLLECTIVES["all_gather"], 4, 1000, 4) == (248, 62, 992)
    for args, match in ((("all_gather", 0, 8, 4), "p=0"), (("all_gather", 4, -8, 4), "size=-8"),
                        (("all_gather", 4, 8.5, 4), "size=8.5"),
                        (("all_gather", 4, 8, 0), "itemsize=0"),
                        (("al_gather", 4, 8, 4), "unknown collective 'al_gather'")):
        with pytest.raises(InvalidInputError, match=match):
            nccl_shape(*args)


def test_a_measurement_s_time_is_its_microseconds_correctly_rounded():
    from simcoll.nccl_tests.tables import Measurement

    # 20 x 1e-6 is 1.9999999999999998e-05 in floats; the nearest float to 20 us is 2e-05
    fields = {f: 0.0 for f in Measurement.__dataclass_fields__ if f != "time_us"}
    for us, seconds in ((20.0, 2e-05), (1.0, 1e-06), (7.0, 7e-06)):
        assert Measurement(time_us=us, **fields).time == seconds


def test_nccl_shape_takes_an_empty_buffer_and_refuses_a_negative_size():
    """size 0 is a real nccl-tests row (-b 0): 0 bytes, count 0, size 0 (0 // 4 = 0
    elements); a size of -1 bytes is no size (the docstring: size an integer >= 0)."""
    assert nccl_shape("all_reduce", 2, 0, 4) == (0, 0, 0)
    assert nccl_shape("all_gather", 4, 0, 4, aligned=True)[1:] == (0, 0)
    with pytest.raises(InvalidInputError, match=r"size=-1 is not accepted"):
        nccl_shape("all_reduce", 2, -1, 4)


@pytest.mark.parametrize("p", [1, 2, 3, 8])
@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
@pytest.mark.parametrize("name", ["all_gather", "gather", "reduce_scatter", "scatter",
                                  "all_to_all"])
def test_nccl_shape_rounds_blocks_to_16_bytes_on_one_rank_too(name, itemsize, p):
    """nccl-tests (all_gather.cu and its siblings) rounds a block down to 16 bytes on any
    rank count: base = (count / nranks) & -(16 / eltSize); all_gather and gather were
    left unrounded on one rank (1001 float bytes: 1000, not 992)."""
    for size in (1001, 4096, 100_003):
        count = size // itemsize
        base = (count // p) & -(16 // itemsize) if 16 % itemsize == 0 else count // p
        whole = base * p * itemsize   # the size column: the whole buffer's
        got = nccl_shape(name, p, size, itemsize, aligned=True)
        if name in ("all_gather", "gather"):
            assert got == (base * itemsize, base, whole)
        else:
            assert got == (whole, base, whole)


def test_mut_a_bad_row_after_titleless_rows_is_not_called_no_log():
    """A table pasted without its column titles whose fourth row has 12 fields: three rows
    were read, so the text is an nccl-tests table; the error names the row, and does not
    add the hint for text in which no table began."""
    rows = ("        1024           256     float     sum      -1"
            "    28.02    0.04    0.06    N/A\n"
            "        2048           512     float     sum      -1"
            "    28.04    0.07    0.13    N/A\n"
            "        4096          1024     float     sum      -1"
            "    28.07    0.15    0.26    N/A\n")
    assert [r.size for r in parse(rows, collective="all_reduce").rows] == [1024, 2048, 4096]
    bad = ("        8192          2048     float     sum      -1"
           "    28.07    0.15    0.26    N/A  7 8 9\n")
    with pytest.raises(InvalidInputError) as caught:
        parse(rows + bad, collective="all_reduce")
    message = str(caught.value)
    assert message.startswith("line 4: ")
    assert "column titles came before it" not in message


def _headerless_names(program: str) -> str:
    """A run of nccl-tests before 2.16.7, whose header names no program."""
    return nccl_text(program, 8, SIZES[:4], version=False)


@pytest.mark.parametrize("program, named, root, prints", [
    ("reduce", "all_reduce", 0, "-1"),
    ("all_reduce", "reduce", -1, r"its root, a rank \(0 or more\)"),
    ("broadcast", "all_gather", 0, "-1"),
    ("all_gather", "broadcast", -1, r"its root, a rank \(0 or more\)"),
])
def test_a_row_whose_root_another_collective_prints_is_refused(program, named, root, prints):
    """nccl-tests gives ``TimeTest`` root -1 for the collectives without one and a rank
    for broadcast, reduce, gather and scatter (each rank in turn with ``-r -1``). A reduce
    log read as all_reduce was fitted as one (its busbw / algbw 1, all_reduce's 1.75 on
    8 ranks); a broadcast log read as all_gather was told it was measured on 1 rank."""
    text = _headerless_names(program)
    with pytest.raises(InvalidInputError, match=rf"line \d+: root {root}, where {named} "
                                                rf"prints {prints}: .*name the collective "
                                                rf"it measured"):
        parse(text, collective=named)
    assert parse(text, collective=program).collective == program


def test_rows_that_move_bytes_are_not_read_as_one_ranks_share():
    """An all_reduce's rows read as reduce_scatter (both print root -1 and a reduction):
    size = count x itemsize made them one rank's share on one rank, where a rank-share
    collective's bus bandwidth, (n - 1) / n of algbw, is 0; these rows' is 1.75 times
    it. No rank count is taken from them."""
    text = nccl_text("all_reduce", 8, [1 << 20, 1 << 26], version=False)
    rows = "\n".join(line for line in text.splitlines()
                     if line.strip() and not line.startswith("#"))
    assert parse(rows, collective="reduce_scatter").nranks is None
    assert parse(rows, collective="all_reduce").nranks == 8


def test_a_program_a_log_line_only_mentions_gives_way_to_the_collective_given():
    """A build or listing line naming nccl-tests programs before a run whose header names
    none (nccl-tests before 2.16.7): the run was taken for the first program named, and
    naming the collective (as the refusal advised) was refused. A line naming several
    programs names none; one only mentioning a program guesses it, and a collective
    given wins. The command that runs a program, and a header, still name it: another
    collective given is refused (an alltoall run read as all_gather, whose rows look
    alike, would be silently wrong)."""
    run = _headerless_names("all_reduce")
    both = "make: built src/all_gather_perf src/all_reduce_perf\n" + run
    assert parse(both, collective="all_reduce").collective == "all_reduce"
    mention = "all_gather_perf built in 3 s\n" + run
    with pytest.raises(InvalidInputError, match="where all_gather prints none"):
        parse(mention)
    assert parse(mention, collective="all_reduce").collective == "all_reduce"
    for launch in ("$ mpirun -np 8 ./build/all_gather_perf -b 8 -e 128M -f 2",
                   "srun ./all_gather_perf_mpi", "mpirun -np 8 ./all_gather_perf > ag.log",
                   "./all_gather_perf 2>&1 | tee ag.log", "./all_gather_perf|tee ag.log"):
        with pytest.raises(InvalidInputError, match=r"collective 'all_reduce' was given, but "
                                                    r"the run starting at line 1 is "
                                                    r"'all_gather' \(line 1 runs it\)"):
            parse(launch + "\n" + run, collective="all_reduce")
    with pytest.raises(InvalidInputError, match="collective 'all_gather' was given, but the "
                                                "run starting at line 1 is 'all_reduce'$"):
        parse(nccl_text("all_reduce", 8, SIZES[:4]), collective="all_gather")


@pytest.mark.parametrize("line", ["Nodes: 2 x 8 GPUs, 16 ranks, NCCL 2.18",
                                  "Warning: 2 of 8 GPUs share a PCIe switch on this node",
                                  "Result: 1 of 1 runs passed, exit code 0 after 42 s"])
def test_a_script_s_labelled_line_is_not_read_as_a_host_and_a_row(line):
    """A parallel shell's host is taken off only before a header or a row: a job
    script's 'Nodes: 2 x 8 GPUs ...' lost its label and was read as a result row, and
    the log refused."""
    text = nccl_text("all_reduce", 8, SIZES[:4])
    plain = parse(text)
    for where in (line + "\n" + text, text.replace("# Using devices",
                                                   line + "\n# Using devices"),
                  text + line + "\n"):
        table = parse(where)
        assert [(r.size, r.out_of_place, r.in_place) for r in table.rows] == \
            [(r.size, r.out_of_place, r.in_place) for r in plain.rows] and table.nranks == 8


@pytest.mark.parametrize("prefix", ["node01: ", "gpu-host.example.org: ",
                                    "2024-05-01T12:00:00.123456789Z ",
                                    "2024-05-01T12:00:00+02:00 node01: "])
def test_a_parallel_shells_host_and_a_log_collectors_time_stamp_are_read_past(prefix):
    """pdsh / clush write each line's host first, ``kubectl logs --timestamps`` a time
    stamp: the rows were not found ("no result rows found")."""
    text = nccl_text("all_reduce", 8, SIZES[:4])
    plain = parse(text)
    prefixed = parse("".join(prefix + line for line in text.splitlines(keepends=True)))
    assert prefixed.rows == plain.rows and prefixed.nranks == plain.nranks == 8
    assert prefixed.collective == "all_reduce"


def _rows_with_root(program: str, bw_of: str, root: int, redop: str = "none",
                    p: int = 8) -> str:
    """Headerless rows of ``program`` (a rank's share of floats: size = count x 4 x p)
    printing ``root``; bandwidths as ``bw_of`` prints them."""
    lines = []
    for size in (1 << 20, 1 << 24):
        count = size // 4 // p
        lines.append(f"{size:12d}  {count:12d}  {'float':>8}  {redop:>6}  {root:6d}"
                     + block(size, p, bw_of, False, "0") + block(size, p, bw_of, True, "0"))
    return "\n".join(lines) + "\n"


def test_alltoall_prints_root_minus_one_and_gather_and_scatter_a_rank():
    """nccl-tests' alltoall.cu runs TimeTest with root -1 (no root); gather.cu and
    scatter.cu with a rank (each in turn with ``-r -1``). A row of the other kind is
    another run's."""
    good = _rows_with_root("alltoall", "alltoall", -1)
    assert parse(good, collective="alltoall").nranks == 8
    with pytest.raises(InvalidInputError, match=r"root 0, where all_to_all prints -1"):
        parse(_rows_with_root("alltoall", "alltoall", 0), collective="alltoall")
    for rooted in ("gather", "scatter"):
        assert parse(_rows_with_root(rooted, "alltoall", 3),
                     collective=rooted).collective == rooted
        with pytest.raises(InvalidInputError, match=rf"root -1, where {rooted} prints its "
                                                    r"root, a rank \(0 or more\)"):
            parse(_rows_with_root(rooted, "alltoall", -1), collective=rooted)


@pytest.mark.parametrize("prefix", ["2024-05-01 12:00:00 ", "2024-05-01 12:00:00,250 ",
                                    "10.1.2.3: ", "node01: [1,0]<stdout>: "])
def test_other_time_stamps_hosts_and_a_rank_prefix_after_a_host_are_read_past(prefix):
    """RFC 3339 allows a space between date and time (and log collectors write a comma
    before the fraction); pdsh names a host by its IPv4 address where it has no name;
    mpirun --tag-output's [job,rank]<stdout>: follows the host where pdsh runs mpirun."""
    text = nccl_text("all_reduce", 8, SIZES[:4])
    plain = parse(text)
    prefixed = parse("".join(prefix + line for line in text.splitlines(keepends=True)))
    assert prefixed.rows == plain.rows and prefixed.nranks == plain.nranks == 8
    assert prefixed.collective == "all_reduce"


def test_a_hosts_prefix_is_read_past_before_1x_settings_without_their_hash():
    """nccl-tests 1.x prints its settings line without '#' (``nThread 1 nGpus 8 ...``):
    after a parallel shell's host it is still the settings line."""
    text = nccl_text("all_reduce", 8, SIZES[:4]).replace("# nThread", "nThread")
    plain = parse(text)
    assert plain.settings
    prefixed = parse("".join("node01: " + line for line in text.splitlines(keepends=True)))
    assert prefixed.settings == plain.settings and prefixed.rows == plain.rows


def test_a_program_mentioned_after_a_run_only_guesses_the_next_run():
    """A log line only mentioning a program (``all_gather_perf built in 3 s``) after a
    run's rows is the next run's guess: a collective given wins there too (it is
    refused only where a command runs the program or a header names it)."""
    run = _headerless_names("all_reduce")
    text = run + "\nall_gather_perf built in 3 s\n" + run
    tables = parse_all(text, collective="all_reduce")
    assert [t.collective for t in tables] == ["all_reduce", "all_reduce"]
    launched = run + "\n$ ./all_gather_perf -b 8 -e 128M\n" + run
    with pytest.raises(InvalidInputError, match=r"is 'all_gather' \(line \d+ runs it\)"):
        parse_all(launched, collective="all_reduce")


def test_rows_after_a_footer_keep_the_guess_of_the_run_before():
    """Rows after a run's footer start a run of the same program: one a log line only
    guessed stays a guess, so the collective given still wins."""
    run = _headerless_names("all_reduce")
    rows = "\n".join(line for line in run.splitlines()
                     if line.strip() and not line.startswith("#"))
    text = "all_gather_perf built in 3 s\n" + run + "\n" + rows + "\n"
    tables = parse_all(text, collective="all_reduce")
    assert len(tables) == 2 and {t.collective for t in tables} == {"all_reduce"}


def test_a_program_a_header_named_is_not_replaced_by_a_later_log_line():
    """The header's ``Collective test starting: all_reduce_perf`` names the run; a log
    line naming another program before the rows (a usage hint) does not rename it."""
    text = nccl_text("all_reduce", 8, SIZES[:4]).replace(
        "# Using devices", "see ./all_gather_perf -h for the options\n# Using devices")
    assert parse(text).collective == "all_reduce"


def test_a_one_rank_all_gather_whose_bus_bandwidth_is_0_is_read_on_one_rank():
    """On one rank all_gather's size is its count x 4 (a rank's share times 1) and its
    bus bandwidth (n - 1) / n of algbw is 0.00 (nccl-tests' AllGatherGetBw): the rows
    give 1 rank. Only rows that move bytes (busbw above 0) are not read as one rank's."""
    lines = []
    for size in (1 << 20, 1 << 24):
        time_us = 20.0 + size / 150e9 * 1e6
        algbw = size / (time_us * 1e-6) / 1e9
        blk = f"  {float_str(time_us, 7)}  {float_str(algbw, 6)}  {float_str(0.0, 6)}       0"
        lines.append(f"{size:12d}  {size // 4:12d}  {'float':>8}  {'none':>6}  {-1:6d}"
                     + blk + blk)
    table = parse("\n".join(lines) + "\n", collective="all_gather")
    assert table.nranks == 1


def test_a_line_naming_two_programs_names_neither():
    """``make: built src/all_gather_perf src/all_reduce_perf`` names no program: a
    headerless all_reduce run after it stays unnamed (its columns alone do not tell)."""
    run = _headerless_names("all_reduce")
    table = parse("make: built src/all_gather_perf src/all_reduce_perf\n" + run)
    assert table.collective is None and table.nranks == 8


@pytest.mark.parametrize("header", ["# Collective test starting: all_reduce_perf",
                                    "# simcoll 0.9: all_reduce / ring, network flow, "
                                    "params: none"])
def test_a_header_naming_the_program_overrides_an_earlier_guess(header):
    """A log line only mentioning all_gather_perf guesses the program; the run's own
    header (nccl-tests' or simcoll run's) then names it, and a collective given that
    differs is refused as for any header-named run (no line to cite)."""
    text = "all_gather_perf built in 3 s\n" + nccl_text("all_reduce", 8, SIZES[:4]).replace(
        "# Collective test starting: all_reduce_perf", header)
    assert parse(text).collective == "all_reduce"
    with pytest.raises(InvalidInputError, match=r"collective 'all_gather' was given, but the "
                                                r"run starting at line 1 is 'all_reduce'$"):
        parse(text, collective="all_gather")


_ROW = "        1024           256     float     sum      -1    24.03    0.04    0.06       0"


def test_a_prrte_tag_whose_job_name_holds_a_dotted_host_name_is_taken_off():
    """PRRTE names a job prterun-<host>-<pid>; a fully qualified host name has dots
    (prterun-node0.cluster.example-4242). Its tag [job@1,0]<stdout>: is taken off as
    the dotless one is: the rows read the same as without any tag."""
    plain = _TITLES + _ROW
    tag = "[prterun-node0.cluster.example-4242@1,0]<stdout>: "
    tagged = "\n".join(tag + line for line in plain.splitlines())
    want = parse(plain, collective="all_reduce")
    got = parse(tagged, collective="all_reduce")
    assert got.rows == want.rows and len(got.rows) == 1
    assert got.rows[0].size == 1024


@pytest.mark.parametrize("text, half", [
    ("10.02", 0.005), ("24.03", 0.005), ("0.5", 0.05), ("7158", 0.5), ("1.2e+04", 500.0),
    ("1e+02", 50.0), ("1e400", float("inf")), ("1e-400", 0.0)])
def test_half_a_unit_of_the_last_digit_printed(text, half):
    """Half a unit of the last printed digit, by hand: two decimals, 0.01 / 2; one, 0.1 /
    2; none, 1 / 2; 1.2e+04's last digit is worth 10^3, half 500; past float's range
    inf or 0. (Ten times that let rows through that are off by ten half steps.)"""
    assert _half_step(text) == half


def test_an_algbw_off_by_more_than_its_rounding_is_refused():
    """1024 B in 24.03 us is 0.04261 GB/s (1024 / 24.03e-6 / 1e9), printed 0.04: a row
    that printed 0.08 is off by far more than the half steps of its numbers (0.005 us,
    0.005 GB/s) and is refused; 0.04 is read."""
    def row(algbw):
        return (_TITLES + f"        1024           256     float     sum      -1    24.03 "
                f"{algbw:>7}    0.06       0")
    assert parse(row("0.04"), collective="all_reduce").rows[0].out_of_place.algbw == 0.04
    with pytest.raises(InvalidInputError,
                       match=r"^line 2: algbw 0.08 GB/s is not size / time = 1024 B / 24.03 us"):
        parse(row("0.08"), collective="all_reduce")


def test_an_infinite_algbw_row_does_not_hide_the_rank_count_other_rows_give():
    """An all_reduce table of two rows: 1 GiB in 7158.28 us, algbw 150.00 and busbw
    225.00 (ratio 1.5 = 2 (n - 1) / n, n = 4 alone to the printed half steps: 224.995 /
    150.005 and 225.005 / 149.995 both round n to 4), and simcoll run's row of a time
    printed 0.00, algbw and busbw inf, which tells nothing of n: the table has 4 ranks.
    (A half step of 0 for inf made that row's ratio NaN and the count untold.)"""
    rows = ("  1073741824     268435456     float     sum      -1  7158.28  150.00  225.00"
            "       0\n"
            "        1024           256     float     sum      -1     0.00     inf     inf"
            "     N/A")
    table = parse(_TITLES + rows, collective="all_reduce")
    assert table.nranks == 4
