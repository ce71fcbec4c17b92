"""nccl-tests logs whose header lines lost their leading '#': pasted into GitHub issues or
markdown pages, where '# ...' reads as a heading, they show as the text after it. The
header lines are read as their '#' forms where they match one whole; rows and other
lines as before. Expected values are worked out by hand from the texts below (the
issue-583 log is NVIDIA/nccl#583's, cut to its first size)."""
# The fixtures are lines as nccl-tests prints them, wider than the code's lines:
# ruff: noqa: E501

from __future__ import annotations

import contextlib
import io

import pytest

from simcoll.cli import main
from simcoll.errors import InvalidInputError
from simcoll.nccl_tests import Measurement, parse, parse_all

# all_reduce_perf of nccl-tests 2.19.6 on 4 ranks, 2 per host (NCCL 2.27.3): times made up,
# algbw = size / time, busbw = algbw x 2 (4 - 1) / 4 = 1.5 algbw, as nccl-tests prints them
HASHED = """\
# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 16777216 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4100 on      nodeA device  0 [0000:07:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4101 on      nodeA device  1 [0000:0f:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   5200 on      nodeB device  0 [0000:07:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   5201 on      nodeB device  1 [0000:0f:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    48.30   21.71   32.56       0    47.82   21.93   32.89       0
     4194304       1048576     float     sum      -1    95.12   44.09   66.14       0    94.60   44.34   66.51       0
    16777216       4194304     float     sum      -1   251.40   66.74  100.10       0   250.80   66.89  100.34       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 66.2667
#
# Collective test concluded: all_reduce_perf
"""

# the same log as GitHub shows it: each heading's text without its '#' and the spaces
# around it; a lone '#' an empty heading, an empty line
STRIPPED = """\
nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703
Collective test starting: all_reduce_perf
nThread 1 nGpus 1 minBytes 1048576 maxBytes 16777216 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0

Using devices
Rank  0 Group  0 Pid   4100 on      nodeA device  0 [0000:07:00] NVIDIA H100 80GB HBM3
Rank  1 Group  0 Pid   4101 on      nodeA device  1 [0000:0f:00] NVIDIA H100 80GB HBM3
Rank  2 Group  0 Pid   5200 on      nodeB device  0 [0000:07:00] NVIDIA H100 80GB HBM3
Rank  3 Group  0 Pid   5201 on      nodeB device  1 [0000:0f:00] NVIDIA H100 80GB HBM3

out-of-place                       in-place
size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
(B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    48.30   21.71   32.56       0    47.82   21.93   32.89       0
     4194304       1048576     float     sum      -1    95.12   44.09   66.14       0    94.60   44.34   66.51       0
    16777216       4194304     float     sum      -1   251.40   66.74  100.10       0   250.80   66.89  100.34       0
Out of bounds values : 0 OK
Avg bus bandwidth    : 66.2667

Collective test concluded: all_reduce_perf
"""

H100 = ("NVIDIA H100 80GB HBM3",) * 4
SETTINGS = {"nThread": 1, "nGpus": 1, "minBytes": 1048576, "maxBytes": 16777216, "step": 4,
            "step_kind": "factor", "warmup iters": 5, "iters": 20, "agg iters": 1,
            "validation": 1, "graph": 0, "unalign": 0}
# (size, count, out-of-place, in-place) of the three rows, read off the text
ROWS = [(1048576, 262144, Measurement(48.30, 21.71, 32.56, 0.0), Measurement(47.82, 21.93, 32.89, 0.0)),
        (4194304, 1048576, Measurement(95.12, 44.09, 66.14, 0.0), Measurement(94.60, 44.34, 66.51, 0.0)),
        (16777216, 4194304, Measurement(251.40, 66.74, 100.10, 0.0), Measurement(250.80, 66.89, 100.34, 0.0))]


def _summary(table):
    return (table.collective, table.nranks, table.devices, table.hosts, table.nccl_version,
            dict(table.settings), table.avg_busbw, table.out_of_bounds, table.error_column,
            table.communicators)


EXPECTED = ("all_reduce", 4, H100, ("nodeA", "nodeA", "nodeB", "nodeB"), "2.27.3", SETTINGS,
            66.2667, 0, False, 1)


def _rows(table):
    return [(r.size, r.count, r.out_of_place, r.in_place) for r in table.rows]


def test_a_log_without_its_hashes_reads_as_the_log_with_them():
    """Its devices, hosts, ranks and nccl-tests version line are read from the lines
    that lost their '#', as from the '#' lines."""
    hashed, stripped = parse(HASHED), parse(STRIPPED)
    assert _summary(hashed) == _summary(stripped) == EXPECTED
    assert _rows(hashed) == _rows(stripped) == ROWS
    assert [r.line for r in stripped.rows] == [14, 15, 16]
    assert {(r.type, r.redop, r.root) for r in stripped.rows} == {("float", "sum", -1)}


def test_a_log_of_two_stripped_runs_splits_at_the_second_header():
    """'Collective test concluded' ends the first run (it is not read as a command line
    naming the next run's program), and each run keeps its own devices."""
    second = STRIPPED.replace("all_reduce_perf", "broadcast_perf").replace(
        "sum      -1", "none       0")
    # broadcast's busbw is its algbw
    for all_reduce, broadcast in [("32.56", "21.71"), ("32.89", "21.93"), ("66.14", "44.09"),
                                  ("66.51", "44.34"), ("100.10", " 66.74"),
                                  ("100.34", " 66.89"), ("66.2667", "44.18")]:
        second = second.replace(all_reduce, broadcast)
    first, then = parse_all(STRIPPED + second)
    assert _summary(first) == EXPECTED and _rows(first) == ROWS
    assert (then.collective, then.nranks, then.devices, then.avg_busbw) == ("broadcast", 4,
                                                                            H100, 44.18)
    assert then.rows[0].line == 20 + 14 and then.nccl_version == "2.27.3"
    assert [(r.size, r.redop, r.root, r.out_of_place) for r in then.rows] == [
        (1048576, "none", 0, Measurement(48.30, 21.71, 21.71, 0.0)),
        (4194304, "none", 0, Measurement(95.12, 44.09, 44.09, 0.0)),
        (16777216, "none", 0, Measurement(251.40, 66.74, 66.74, 0.0))]


# NVIDIA/nccl#583 (2021), as the issue shows it: every '#' gone, the spaces after it kept
ISSUE_583 = """\
 nThread 1 nGpus 1 minBytes 32 maxBytes 8589934592 step: 2(factor) warmup iters: 5       iters: 20 validation: 1 single_test: 0 test_buffer_kind: 2

 Using devices
   Rank  0 Pid 1821213 on AI-A100-Beethoven01 device  0 [0x00] NVIDIA A100-SXM4-40GB
   Rank  1 Pid 1821214 on AI-A100-Beethoven01 device  1 [0x00] NVIDIA A100-SXM4-40GB

                                                     out-of-place                       in-place
       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
          32             8   float     sum    21.31    0.00    0.00  0e+00    21.23    0.00    0.00  0e+00
 Out of bounds values : 0 OK
 Avg bus bandwidth    : 0.001
"""
ISSUE_583_HASHED = """\
# nThread 1 nGpus 1 minBytes 32 maxBytes 8589934592 step: 2(factor) warmup iters: 5       iters: 20 validation: 1 single_test: 0 test_buffer_kind: 2
#
# Using devices
#   Rank  0 Pid 1821213 on AI-A100-Beethoven01 device  0 [0x00] NVIDIA A100-SXM4-40GB
#   Rank  1 Pid 1821214 on AI-A100-Beethoven01 device  1 [0x00] NVIDIA A100-SXM4-40GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
          32             8   float     sum    21.31    0.00    0.00  0e+00    21.23    0.00    0.00  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.001
"""
SETTINGS_583 = {"nThread": 1, "nGpus": 1, "minBytes": 32, "maxBytes": 8589934592, "step": 2,
                "step_kind": "factor", "warmup iters": 5, "iters": 20, "validation": 1,
                "single_test": 0, "test_buffer_kind": 2}


def test_the_issue_583_log_tells_its_two_a100s():
    table = parse(ISSUE_583, collective="all_reduce")
    assert (table.nranks, table.devices, table.hosts) == (
        2, ("NVIDIA A100-SXM4-40GB",) * 2, ("AI-A100-Beethoven01",) * 2)
    assert dict(table.settings) == SETTINGS_583
    assert (table.avg_busbw, table.out_of_bounds, table.nccl_version) == (0.001, 0, None)
    assert table.error_column   # titled 'error': read from the titles, not guessed
    (row,) = table.rows
    assert (row.size, row.count, row.type, row.redop, row.root, row.line) == (32, 8, "float",
                                                                             "sum", None, 10)
    assert (row.out_of_place, row.in_place) == (Measurement(21.31, 0.0, 0.0, 0.0),
                                                Measurement(21.23, 0.0, 0.0, 0.0))


def test_setting_names_with_underscores_keep_their_whole_name():
    """'single_test: 0 test_buffer_kind: 2' read as 'test' and 'kind', with or without
    '#'; names with spaces ('warmup iters') and the step's kind stay as they were."""
    assert dict(parse(ISSUE_583_HASHED, collective="all_reduce").settings) == SETTINGS_583
    assert dict(parse(ISSUE_583, collective="all_reduce").settings) == SETTINGS_583


# nccl-tests 1.x (925a705, as tests/test_nccl_tests_parse.py's v1_text prints it): its
# settings and footer had no '#' to lose; its devices have no Pid, and its titles
# 'bytes N type op ... res' say the times are in milliseconds
V1_STRIPPED = """\
nThread 1 nGpus 4 minBytes 1048576 maxBytes 67108864 step: 64(factor) warmup iters: 5 iters: 20 validation: 1
NCCL Tests compiled with NCCL 2.3
Using devices
Rank  0 on       dgx1 device  0 [0x06] Tesla P100-SXM2-16GB
Rank  1 on       dgx1 device  1 [0x07] Tesla P100-SXM2-16GB
Rank  2 on       dgx1 device  2 [0x08] Tesla P100-SXM2-16GB
Rank  3 on       dgx1 device  3 [0x09] Tesla P100-SXM2-16GB

out-of-place                    in-place
bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res
     1048576        262144   float     sum    0.072  14.56  21.85    1e-07    0.072  14.56  21.85    1e-07
    67108864      16777216   float     sum    3.375  19.88  29.83    1e-07    3.375  19.88  29.83    1e-07
 Out of bounds values : 0 OK
 Avg bus bandwidth    : 25.84
"""


def test_a_stripped_1_x_log_keeps_its_millisecond_titles_and_devices():
    """Without its titles the 1.x rows were read in microseconds: 0.072 us for 1 MiB,
    refused as an algbw that is not size / time."""
    table = parse(V1_STRIPPED)
    assert (table.collective, table.nranks, table.hosts, table.devices) == (
        None, 4, ("dgx1",) * 4, ("Tesla P100-SXM2-16GB",) * 4)
    assert [(r.size, r.count, r.redop, r.root, r.out_of_place, r.in_place) for r in table.rows] == [
        (1048576, 262144, "sum", None, Measurement(72.0, 14.56, 21.85, 1e-07),
         Measurement(72.0, 14.56, 21.85, 1e-07)),
        (67108864, 16777216, "sum", None, Measurement(3375.0, 19.88, 29.83, 1e-07),
         Measurement(3375.0, 19.88, 29.83, 1e-07))]
    assert table.error_column and (table.avg_busbw, table.out_of_bounds) == (25.84, 0)


def test_a_log_whose_first_lines_lost_their_hashes_reads_as_either_form():
    """A paste whose code block opens part way: the lines before it lost their '#' (the
    spaces after it kept, as in NVIDIA/nccl#583), the rest kept theirs."""
    hashed = HASHED.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(hashed) if "Rank  2" in line)
    mixed = "".join([line.replace("#", " ", 1) for line in hashed[:cut]] + hashed[cut:])
    assert mixed.count("\n   Rank") == 2 and mixed.count("\n#  Rank") == 2
    table = parse(mixed)
    assert _summary(table) == EXPECTED and _rows(table) == ROWS


@pytest.mark.parametrize("stray", [
    "Rank 4 on nodeC device 0 [GPU-abc] NVIDIA H100 80GB HBM3",    # a rank more
    "Rank 3 on nodeC device 0 [GPU-abc] starting worker",          # a listed rank's
    "Using devices",
])
def test_a_log_that_kept_its_hashes_reads_no_line_without_one_as_a_header(stray):
    """A launcher's line shaped like a device line, in a log whose header kept its '#',
    is a log line: the ranks stay the 4 listed, on their hosts."""
    for before in ("#  Rank  2", "# Out of bounds"):
        table = parse(HASHED.replace(before, stray + "\n" + before, 1))
        assert _summary(table) == EXPECTED and _rows(table) == ROWS


# lines that start as a header does but are no header: each left out of what is read
DECOYS = [
    "Rank  7 Pid 4107 on nodeC device 3 [0x00]",                  # no device name
    "Rank 7 of 8 on nodeC device 3 [0x00] NVIDIA H100 80GB HBM3",  # not a device line whole
    "Ranks  7 on nodeC device 3 [0x00] NVIDIA H100 80GB HBM3",
    "Using devices 0,1,2,3",
    "size count mismatch: 4 vs 8",                                 # no titles nccl-tests prints
    "size count type redop root time algbw speed",
    "out-of-place copy took 3 ms",
    "nccl-tests version unknown (built from a fork)",
    "Collective test starting: all_gather_perf now",
]


@pytest.mark.parametrize("decoy", DECOYS)
def test_a_line_that_only_starts_like_a_header_is_not_read_as_one(decoy):
    """Each decoy, put among the devices, the titles or before the rows of the stripped
    log, changes nothing: a rank 7 would cut the device list short (nranks from the
    rows, no devices), titles would change the layout or be refused."""
    lines = STRIPPED.splitlines(keepends=True)
    for at in (6, 11, 13):
        table = parse("".join(lines[:at] + [decoy + "\n"] + lines[at:]))
        assert _summary(table) == EXPECTED and _rows(table) == ROWS


def test_a_data_row_is_never_read_as_a_header():
    """A row cut short is still refused as one (not passed over as a header), and a
    device line after the rows (a launcher's, shaped as one: a fifth rank on a third
    host, or rank 0 on another device) adds no rank, changes none and starts no run."""
    lines = STRIPPED.splitlines(keepends=True)
    bad = lines[:13] + ["     1048576        262144     float     sum      -1    48.30\n"] + lines[13:]
    with pytest.raises(InvalidInputError, match="line 14: a result row"):
        parse("".join(bad))
    for device in ("Rank  4 Group  0 Pid   6100 on      nodeC device  0 [0000:07:00] "
                   "NVIDIA H100 80GB HBM3\n",
                   "Rank  0 Group  0 Pid   6100 on      nodeC device  0 [0000:07:00] "
                   "NVIDIA A100-SXM4-40GB\n"):
        late = lines[:16] + [device] + lines[16:]
        assert _summary(parse("".join(late))) == EXPECTED


# simcoll run's own table, its '#' lost (simcoll run --collective all_reduce
# --topology switch:ranks=4 -b 1K -e 4K -f 2)
SIMCOLL_STRIPPED = """\
simcoll 0.1.0: all_reduce / ring, network flow, params: none (defaults: chunks=1)
topology switch:n=4 (switch(4): 4 ranks, 5 devices, 4 links)
nRanks 4 minBytes 1024 maxBytes 4096 step: 2(factor) validation: 0

simulated
size         count      type   redop    root     time   algbw   busbw  #wrong
(B)    (elements)                               (us)  (GB/s)  (GB/s)
        1024           256     float     sum      -1    12.02    0.09    0.13    N/A
        2048           512     float     sum      -1    12.03    0.17    0.26    N/A
        4096          1024     float     sum      -1    12.06    0.34    0.51    N/A
Out of bounds values : 0 OK
Avg bus bandwidth    : 0.297525
"""


def test_simcoll_runs_own_table_without_its_hashes():
    table = parse(SIMCOLL_STRIPPED)
    assert (table.collective, table.simcoll_run, table.nranks) == (
        "all_reduce", "ring, network flow, params: none (defaults: chunks=1)", 4)
    assert table.sizes == (1024, 2048, 4096)
    assert [r.out_of_place for r in table.rows] == [Measurement(12.02, 0.09, 0.13, None),
                                                    Measurement(12.03, 0.17, 0.26, None),
                                                    Measurement(12.06, 0.34, 0.51, None)]
    assert all(r.in_place is None for r in table.rows)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", [
    ["compare"],
    ["calibrate", "--free", "bandwidth=100GB/s:10GB/s:1000GB/s", "--max-evaluations", "8"],
])
def test_the_cli_tells_the_hosts_of_a_stripped_log(tmp_path, command):
    """compare and calibrate note a log run on 2 hosts against a machine of 1 node: the
    stripped log listed no ranks, so neither did."""
    path = tmp_path / "stripped.log"
    path.write_text(STRIPPED)
    code, out, err = _cli(*command, "--topology", "switch:ranks=4", str(path))
    assert code == 0, err
    assert "the log's 4 ranks ran on 2 host(s), the machine's GPUs sit on 1 node(s)" in out + err


def test_compare_with_nccl_s_choices_names_the_stripped_logs_nccl_release(tmp_path):
    """The stripped 'nccl-tests version ... nccl-library=22703' line was not read: the
    log's NCCL release went unsaid."""
    path = tmp_path / "stripped.log"
    path.write_text(STRIPPED)
    code, out, err = _cli("compare", "--algorithm", "nccl", "--topology", "switch:ranks=4",
                          str(path))
    assert code == 0, err
    assert "the log ran NCCL 2.27.3" in out + err


def test_a_concluded_line_without_its_hash_names_no_program_for_the_next_run():
    """'# Collective test concluded: all_reduce_perf' ends the run it names; read without
    its '#' it is the same footer, not a command line naming the next run's program.
    The second run prints no program of its own, so neither run tells it."""
    second = "".join(line for line in STRIPPED.splitlines(keepends=True)
                      if not line.startswith(("Collective test", "nccl-tests version")))
    hashed = "".join("# " + line if line.startswith("Collective test") else line
                     for line in (STRIPPED + second).splitlines(keepends=True))
    for text in (STRIPPED + second, hashed):
        first, then = parse_all(text)
        assert first.collective == "all_reduce" and _rows(first) == ROWS
        assert then.collective is None and _rows(then) == ROWS


@pytest.mark.parametrize("decoy", [
    "in-place results are compared with the out-of-place ones",   # both words, other order
    "nccl-tests version unknown nccl-library=21903",             # no version number
])
def test_a_log_line_with_header_words_but_not_a_header_whole_changes_nothing(decoy):
    """Put before the column titles, the first would swap the blocks (titles naming
    in-place first), the second set the NCCL release to 2.19.3 (code 21903); neither is
    a header line whole, so the blocks stay out-of-place then in-place, and the release
    stays 2.27.3 (code 22703)."""
    lines = STRIPPED.splitlines(keepends=True)
    for at in (6, 11):
        table = parse("".join(lines[:at] + [decoy + "\n"] + lines[at:]))
        assert table.nccl_version == "2.27.3"
        assert _rows(table) == ROWS


# simcoll run --collective broadcast --topology switch:ranks=4 -b 1K -e 4K -f 2, its '#' lost
SIMCOLL_BROADCAST = """\
simcoll 0.1.0: broadcast / binomial, network flow, params: none
topology switch:n=4 (switch(4): 4 ranks, 5 devices, 4 links)
nRanks 4 minBytes 1024 maxBytes 4096 step: 2(factor) validation: 0

simulated
size         count      type   redop    root     time   algbw   busbw  #wrong
(B)    (elements)                               (us)  (GB/s)  (GB/s)
        1024           256     float    none       0     4.02    0.25    0.25    N/A
        2048           512     float    none       0     4.04    0.51    0.51    N/A
        4096          1024     float    none       0     4.08    1.00    1.00    N/A
Out of bounds values : 0 OK
Avg bus bandwidth    : 0.588319
"""


def test_simcoll_runs_stripped_broadcast_table_keeps_its_rank_count():
    """A broadcast's rows cannot tell the ranks (its busbw is its algbw, its count one
    buffer's); the 'nRanks 4' line, read without its '#', does."""
    table = parse(SIMCOLL_BROADCAST)
    assert (table.collective, table.nranks, table.sizes) == ("broadcast", 4, (1024, 2048, 4096))
    assert [r.out_of_place for r in table.rows] == [Measurement(4.02, 0.25, 0.25, None),
                                                    Measurement(4.04, 0.51, 0.51, None),
                                                    Measurement(4.08, 1.00, 1.00, None)]




# all_reduce_perf on 4 ranks, 2 per host, that kept every '#': times made up,
# busbw = algbw x 2 (4 - 1) / 4 = 1.5 algbw
KEPT_HASHES_LOG = """\
# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4100 on      nodeA device  0 [0000:07:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4101 on      nodeA device  1 [0000:0f:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   5200 on      nodeB device  0 [0000:07:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   5201 on      nodeB device  1 [0000:0f:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    48.30   21.71   32.56       0    47.82   21.93   32.89       0
     4194304       1048576     float     sum      -1    95.12   44.09   66.14       0    94.60   44.34   66.51       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 49.4225
#
"""
LAUNCHER_LINE = "Rank 4 on nodeC device 0 [GPU-abc] NVIDIA H100 80GB HBM3"
"""A launcher's line shaped like a device line (a fifth rank, on a third host)."""


def _ranks_hosts_devices(table):
    return table.nranks, table.hosts, table.devices


def test_a_launcher_line_before_the_device_list_of_a_hashed_log_is_no_header():
    """From the log's first '#' line on, a line without one is no header: the launcher's
    line, put before 'Using devices' or right after the version line, adds no rank."""
    expected = (4, ("nodeA", "nodeA", "nodeB", "nodeB"), ("NVIDIA H100 80GB HBM3",) * 4)
    for before in ("# Collective test starting", "# Using devices"):
        text = KEPT_HASHES_LOG.replace(before, LAUNCHER_LINE + "\n" + before, 1)
        assert _ranks_hosts_devices(parse(text)) == expected


def test_a_lone_hash_line_is_a_line_that_kept_its_hash():
    """A lone '#' (the separator a script prints before the log) is a '#' kept: the
    launcher's line after it is a log line, so the log's 4 ranks stay 4."""
    table = parse("#\n" + LAUNCHER_LINE + "\n" + KEPT_HASHES_LOG)
    assert _ranks_hosts_devices(table) == (
        4, ("nodeA", "nodeA", "nodeB", "nodeB"), ("NVIDIA H100 80GB HBM3",) * 4)


def test_rows_after_the_footer_of_a_hashed_log_read_no_launcher_line_as_a_header():
    """Rows after the footer are a second run read as the first was; a launcher's line
    among them is still a log line in a log that kept its '#': the second run reads
    alike with and without it."""
    rows = [line for line in KEPT_HASHES_LOG.splitlines(keepends=True)
            if line.startswith("     ")]
    plain = KEPT_HASHES_LOG + rows[0] + rows[1]
    with_launcher = KEPT_HASHES_LOG + rows[0] + LAUNCHER_LINE + "\n" + rows[1]
    _, second = parse_all(plain)
    _, second_l = parse_all(with_launcher)
    assert len(second.rows) == len(second_l.rows) == 2
    assert _ranks_hosts_devices(second_l) == _ranks_hosts_devices(second)
    assert "nodeC" not in second_l.hosts
