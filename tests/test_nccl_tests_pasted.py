"""Logs as users paste them into issues: without headers between runs (``grep -v '^#'``),
with the device list cut to a few lines or left out, old versions' error column without
its title, a ``-T`` timeout, unusual line ends. Rows are real nccl-tests output
(NVIDIA/nccl#258, NVIDIA/nccl-tests#78 and #82, NVIDIA/nccl#644, NVIDIA/dgx-spark-playbooks
#103), cut to a few sizes."""
# The fixtures are rows as nccl-tests prints them, wider than the code's lines:
# ruff: noqa: E501

from __future__ import annotations

import pytest

import simcoll as sc
from simcoll.errors import InvalidInputError
from simcoll.nccl_tests import parse, parse_all

OLD_ALL_REDUCE = """\
           8             2   float     sum    158.3    0.00    0.00  1e-07    158.4    0.00    0.00  0e+00
          16             4   float     sum    160.4    0.00    0.00  3e-08    160.7    0.00    0.00  3e-08
"""
OLD_BROADCAST = """\
           8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    0.00    N/A
          16             4   float       0    45.10    0.00    0.00    N/A    38.02    0.00    0.00    N/A
"""
ALL_REDUCE_213 = """\
   268435456      67108864     float     sum   122131    2.20    4.33  2e-06   122165    2.20    4.33  2e-06
"""
ALL_TO_ALL_213 = """\
   268435456       1048576     float           520935    0.52    0.51  0e+00   519562    0.52    0.51  1e+00
   536870912       2097152     float          1041974    0.52    0.51  0e+00  1041299    0.52    0.51  1e+00
"""


def test_an_all_reduce_then_a_broadcast_without_headers_are_two_runs():
    """Both print 12 fields, the broadcast a root where the all_reduce has its redop: the
    broadcast's rows were read into the all_reduce's run with redop '0'."""
    first, second = parse_all(OLD_ALL_REDUCE + OLD_BROADCAST)
    assert [(r.size, r.redop, r.root) for r in first.rows] == [(8, "sum", None),
                                                               (16, "sum", None)]
    assert [(r.size, r.redop, r.root, r.line) for r in second.rows] == [
        (8, None, 0, 3), (16, None, 0, 4)]
    assert second.collective == "broadcast"


@pytest.mark.parametrize("text", [ALL_REDUCE_213 + ALL_TO_ALL_213,
                                  ALL_TO_ALL_213 + ALL_REDUCE_213])
def test_a_run_with_a_blank_redop_after_one_with_a_redop_is_another_run(text):
    """nccl-tests 2.10-2.13 leave an all_to_all's redop blank: one field fewer. The second
    run's rows were refused ("expected 12 fields")."""
    runs = parse_all(text)
    assert sorted(len(t) for t in runs) == [1, 2]
    blank = next(t for t in runs if len(t) == 2)
    assert {r.redop for r in blank.rows} == {None} and blank.sizes == (268435456, 536870912)


def test_an_error_column_without_its_title_is_told_by_its_exponents():
    """Old versions print the largest error as %7.0le (0e+00, 1e+00): whole numbers, read
    as #wrong counts without the title; the in-place 1e+00 of a correct run marked every
    size wrong."""
    table = parse(ALL_TO_ALL_213, collective="all_to_all")
    assert table.error_column
    assert table.wrong_sizes("in_place") == ()
    # a count of a million or more is printed in exponent form by %6g: a count still
    counted = parse(OLD_BROADCAST.replace("    N/A    38.", "  1e+06    38."),
                    collective="broadcast")
    assert not counted.error_column and counted.wrong_sizes() == (8, 16)


def _devices(ranks: range | list[int]) -> str:
    return "# Using devices\n" + "".join(
        f"#  Rank {r:2d} Group  0 Pid  4242 on node-{r // 8} device {r % 8:2d} [0x00] "
        f"NVIDIA H100 80GB HBM3\n" for r in ranks)


# all_gather of 2048 floats per rank, 65536 bytes in all: 8 ranks (NVIDIA/nccl#644)
ALL_GATHER_8 = """\
       65536          2048     float    none      -1    41.32    1.59    1.39      0    40.18    1.63    1.43      0
"""


def test_a_device_list_cut_short_leaves_the_rank_count_to_the_rows():
    """A pasted header keeping rank 7's line alone gave nranks 1, and refused the row as
    "a corrupted row" (its size is 8 x its count)."""
    cut = parse(_devices([7]) + ALL_GATHER_8, collective="all_gather")
    assert cut.nranks == 8 and cut.hosts == ("node-0",)
    assert parse(_devices(range(8)) + ALL_GATHER_8, collective="all_gather").nranks == 8
    cut_all_reduce = parse(_devices([70, 71]) + ALL_REDUCE_213, collective="all_reduce")
    assert cut_all_reduce.nranks is None


def test_a_share_collective_without_a_device_list_is_compared_on_its_own_rank_count():
    """Without a device list an 8-rank all_gather was simulated on a 4-rank machine with
    twice the elements per rank, unsaid."""
    table = parse(ALL_GATHER_8, collective="all_gather")
    assert table.nranks == 65536 // (2048 * 4)
    with pytest.raises(InvalidInputError, match="the table was measured on 8 ranks, but "
                                                "the machine has 4"):
        sc.compare(sc.topology.switch(4), table)


SPARK = """\
# Collective test starting: all_reduce_perf
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
        8192          2048     float     sum      -1    35.15    0.23    0.23       0    30.33    0.27    0.27       0
       16384          4096     float     sum      -1    31.67    0.52    0.52       0    30.75    0.53    0.53       0
"""


def test_a_timeout_is_a_failure_naming_the_last_complete_row():
    text = SPARK + ("       32768          8192     float     sum      -1spark-d708: Test timeout "
                    "(5s) common.cu:523\n .. spark-d708 pid 1666603: Test failure common.cu:709\n")
    with pytest.raises(InvalidInputError, match=r"line 6: nccl-tests reported a failure: .*Test "
                       r"timeout.*after the row of size 16384 \(line 5\)"):
        parse(text)


@pytest.mark.parametrize("end", ["\r\r\n", "\r\n", "\r", "\n"])
def test_line_numbers_are_an_editors_whatever_the_line_ends(end):
    """A log saved with \\r\\r\\n line ends had every line counted twice in errors."""
    text = (SPARK + "NCCL INFO a page\x0cbreak\n       32768          8192     float\n"
            ).replace("\n", end)
    with pytest.raises(InvalidInputError, match="^line 7: a result row cut short"):
        parse(text)


ROWS = """\
        8192          2048     float     sum      -1    35.15    0.23    0.23       0    30.33    0.27    0.27       0
       16384          4096     float     sum      -1    31.67    0.52    0.52       5    30.75    0.53    0.53       0
"""


def test_an_untitled_row_cut_after_its_first_block_is_an_error_not_a_run():
    """Nine fields read as a row of one block: the cut row became a run of its own."""
    cut = ROWS + "       32768          8192     float     sum      -1    31.67    1.03    1.03       0\n"
    with pytest.raises(InvalidInputError, match="^line 3: expected 13 fields"):
        parse_all(cut)


def test_one_runs_error_column_does_not_turn_the_run_before_it():
    """Two untitled runs after a footer shared one layout: the second's 0e+00 made the
    first's #wrong 5 read as an error column's value, and its wrong size went unsaid."""
    second = ROWS.replace("       0    30", "   0e+00    30").replace("       5    30",
                                                                       "   0e+00    30")
    first, later = parse_all(ROWS + "# Avg bus bandwidth    : 0.3\n" + second)
    assert not first.error_column and first.wrong_sizes() == (16384,)
    assert later.error_column and later.wrong_sizes() == ()


def test_a_row_after_a_carriage_return_inside_a_line_is_read():
    """A progress line written over with \\r before a row (as `script` or `tee` keep a
    terminal): the row was read as part of the log line and dropped."""
    text = SPARK.replace("        8192 ", "warming up... 50%\r        8192 ")
    table = parse(text)
    assert table.sizes == (8192, 16384) and [r.line for r in table.rows] == [4, 5]


def test_a_footer_between_untitled_runs_of_other_columns():
    """After a footer the next run took the run before's columns: an old broadcast after
    an old all_reduce and its footer became a run of redop '0' and another."""
    runs = parse_all(OLD_ALL_REDUCE + "# Avg bus bandwidth    : 0.1\n" + OLD_BROADCAST)
    assert len(runs) == 2
    assert [(r.size, r.redop, r.root) for r in runs[1].rows] == [(8, None, 0), (16, None, 0)]


def test_an_untitled_row_of_other_columns_cut_short_is_an_error():
    cut = "           8             2   float       0    45.82    0.00    0.00    N/A\n"
    with pytest.raises(InvalidInputError, match="^line 3: "):
        parse_all(OLD_ALL_REDUCE + cut)


ROW4 = ("      131072          8192     float    none      -1    41.32    3.17    2.38      0"
        "    40.18    3.26    2.45      0\n")
ZERO = ("           0             0     float    none      -1     0.10    0.00    0.00      0"
        "     0.10    0.00    0.00      0\n")


def test_the_ranks_the_rows_give_only_where_they_agree():
    # 131072 B of 8192 floats: 4 ranks, against the 8 of 65536 B of 2048
    assert parse(ALL_GATHER_8 + ROW4, collective="all_gather").nranks is None
    # a row of no elements (-b 0) gives none and takes none away
    assert parse(ZERO + ALL_GATHER_8, collective="all_gather").nranks == 8


# all_reduce rows pasted without their header or device list: busbw / algbw is
# 55.41 / 31.66 = 1.750 and 223.79 / 127.88 = 1.750, 2 (n - 1) / n for n = 8 alone
ALL_REDUCE_8_BARE = """\
     1048576        262144     float     sum      -1    33.12   31.66   55.41      0    32.50   32.26   56.46      0
    16777216       4194304     float     sum      -1    131.2  127.88  223.79      0    130.9  128.17  224.30      0
"""


def test_rows_without_a_device_list_tell_their_rank_count_by_busbw_over_algbw():
    """nccl-tests' busbw is algbw times 2 (n - 1) / n for all_reduce, (n - 1) / n for
    all_gather: printed to two decimals it gives n where one count fits every row. An
    all_reduce of 8 GPUs compared on 16 was simulated there, unsaid. Where no count or
    several fit (rows of algbw 0.00, a ratio no n gives, broadcast's factor of 1, a
    ratio too coarse to part 63 from 64), the count stays unknown."""
    table = parse(ALL_REDUCE_8_BARE, collective="all_reduce")
    assert table.nranks == 8
    with pytest.raises(InvalidInputError, match="the table was measured on 8 ranks, but "
                                                "the machine has 16"):
        sc.compare(sc.topology.switch(16), table)
    # all_gather, (n - 1) / n: 3.50 / 4.00 = 0.875 is n = 8; reduce_scatter's 0.75, 4
    def row(size, count, redop, algbw, busbw, root=-1):
        time = f"{size / (algbw * 1e3):.2f}"   # us, as size / algbw
        block = f"{time:>8} {algbw:7.2f} {busbw:7.2f}      0"
        return f"{size:12d} {count:13d}     float {redop:>7} {root:7d} {block} {block}\n"

    assert parse(row(8 << 20, 1 << 18, "none", 4.0, 3.5),
                 collective="all_gather").nranks == 8
    assert parse(row(4 << 20, 1 << 18, "sum", 100.0, 75.0),
                 collective="reduce_scatter").nranks == 4
    for text, collective in ((row(64, 16, "sum", 0.003, 0.005), "all_reduce"),
                             (row(1 << 20, 1 << 18, "sum", 4.0, 9.0), "all_reduce"),
                             (row(1 << 20, 1 << 18, "none", 4.0, 4.0, 0), "broadcast"),
                             (row(1 << 20, 1 << 18, "sum", 1.0, 1.97), "all_reduce")):
        assert parse(text, collective=collective).nranks is None, text


def _bare_row(size, count, redop, blocks):
    """An all_reduce-style row of nccl-tests (no header, no device list): one
    (algbw, busbw) pair per block, out of place then in place."""
    cells = []
    for algbw, busbw in blocks:
        time = f"{size / (algbw * 1e3):.2f}" if algbw else "0.10"
        cells.append(f"{time:>8} {algbw:7.2f} {busbw:7.2f}      0")
    return f"{size:12d} {count:13d}     float {redop:>7}      -1 {' '.join(cells)}\n"


def test_a_rank_count_past_sixteen_is_told_by_busbw_over_algbw():
    """all_reduce on 32 ranks: 2 x 31 / 32 = 1.9375, so algbw 100.00 gives busbw 193.75.
    Printed to two decimals the ratio lies in [193.745 / 100.005, 193.755 / 99.995] =
    [1.93735, 1.93765]; 31 ranks give 1.93548 and 33 give 1.93939, outside it: 32
    alone. And 256 ranks: 2 x 255 / 256 = 1.9921875, algbw 400.00, busbw 796.88 (796.875
    rounded): [796.875 / 400.005, 796.885 / 399.995] = [1.99216, 1.99224]; 255 gives
    1.99216 (1.992157 < 1.992163) and 257 gives 1.99222 -- inside, so 256 and 257 both
    fit: unknown."""
    assert parse(_bare_row(1 << 20, 1 << 18, "sum", [(100.0, 193.75)] * 2),
                 collective="all_reduce").nranks == 32
    assert parse(_bare_row(1 << 20, 1 << 18, "sum", [(400.0, 796.88)] * 2),
                 collective="all_reduce").nranks is None


def test_the_in_place_block_narrows_the_rank_count_too():
    """Out of place, algbw 0.40 and busbw 0.70 fit [0.695 / 0.405, 0.705 / 0.395] =
    [1.716, 1.785]: 8 ranks (1.75) and 9 (1.778) alike, 7 (1.714) not. In place, 100.00
    and 175.00 fit [1.74986, 1.75014]: 8 alone. Every block counts, so the rows give 8;
    the out-of-place block alone leaves it unknown."""
    text = _bare_row(1 << 20, 1 << 18, "sum", [(0.40, 0.70), (100.0, 175.0)])
    assert parse(text, collective="all_reduce").nranks == 8
    alone = _bare_row(1 << 20, 1 << 18, "sum", [(0.40, 0.70), (0.40, 0.70)])
    assert parse(alone, collective="all_reduce").nranks is None


def test_two_ranks_are_told_by_a_bus_bandwidth_equal_to_the_algorithm_bandwidth():
    """all_reduce's 2 (n - 1) / n is 1 for n = 2 alone (3 gives 4/3): busbw 10.00 over
    algbw 10.00 lies in [9.995 / 10.005, 10.005 / 9.995] = [0.999, 1.001], so 2 ranks;
    the smallest count considered is 2, not 3."""
    assert parse(_bare_row(1 << 20, 1 << 18, "sum", [(10.0, 10.0)] * 2),
                 collective="all_reduce").nranks == 2


def test_a_ratio_at_the_edge_of_its_rounding_still_fits_its_rank_count():
    """busbw 10.01 over algbw 10.00 can be 10.005 / 10.005 = 1 exactly (both printed
    rounded up or down by 0.005): 2 ranks' factor, 2 (2 - 1) / 2 = 1, lies on the edge
    of [10.005 / 10.005, 10.015 / 9.995] = [1, 1.002], and still fits (3 ranks' 4/3
    does not); float rounding of that edge must not push it out."""
    assert parse(_bare_row(1 << 20, 1 << 18, "sum", [(10.0, 10.01)] * 2),
                 collective="all_reduce").nranks == 2


def _float_str(value: float, width: int) -> str:
    """nccl-tests 2.19.6's getFloatStr (src/util.cu): the first of %.2f, %.1f, %.0f that
    fits the width."""
    for digits in (2, 1, 0):
        text = f"{value:{width}.{digits}f}"
        if len(text) <= width:
            return text
    return f"{value:{width}.0e}"


@pytest.mark.parametrize("p, busbw", [(4, 1050.0), (8, 1049.7), (8, 1663.1), (16, 1200.0),
                                      (8, 350.0)])
def test_a_bus_bandwidth_from_1000_gbs_printed_to_one_decimal_still_tells_the_ranks(p, busbw):
    """From 1000 GB/s nccl-tests 2.17 and later print a bandwidth to one decimal (six
    characters): the ratio busbw / algbw taken to +-0.005 missed all_reduce's 2 (n - 1) / n
    and gave no rank count (47 of 60 such tables a review tried)."""
    rows = []
    for size in (1 << 20, 1 << 30, 1 << 32):
        time = 2 + size / (busbw / (2 * (p - 1) / p) * 1e3)   # us: 2 us + size / algbw
        algbw = size / 1e3 / time
        block = (f"{_float_str(time, 7)}  {_float_str(algbw, 6)}  "
                 f"{_float_str(algbw * 2 * (p - 1) / p, 6)}       0")
        rows.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {block}  {block}")
    assert parse("\n".join(rows), collective="all_reduce").nranks == p


@pytest.mark.parametrize("value", [0.01, 3.5, 999.99, 1000.0, 1234.5, 9999.9, 10000.0,
                                   54321.0, 999999.0, 1e6, 2e6, 3.4e7])
def test_the_half_step_is_half_a_unit_of_the_last_digit_printed(value):
    """_printed_half_step of what nccl-tests prints (``_float_str``, 2.19.6's getFloatStr
    in six characters) is half a unit of its last digit, read off the printed text: two
    decimals 0.005, one 0.05, none 0.5, an exponent (2e+06) half its power of ten."""
    from simcoll.nccl_tests.parsing import _printed_half_step

    text = _float_str(value, 6).strip()
    if "e" in text:
        half = 0.5 * 10.0 ** int(text.split("e")[1])
    elif "." in text:
        half = 0.5 * 10.0 ** -len(text.split(".")[1])
    else:
        half = 0.5
    assert _printed_half_step(float(text)) == pytest.approx(half, rel=1e-12)
