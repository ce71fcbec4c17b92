"""nccl-tests' own command line on ``simcoll run``: options copied from a real run are
taken (noted), fit to the machine, or refused saying what they do; ``-C 1`` logs are
refused by compare and calibrate. Expectations from nccl-tests 2.19.6's src/common.cu
(its options and defaults) and from runs without the options."""

# ruff: noqa: E501
# (nccl-tests' rows, as printed, are wider than 100 columns)
from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import subprocess
import sys
import time

import pytest
from test_cli import cli, table_rows

import simcoll as sc
from simcoll.cli import table
from simcoll.cli.json_out import Report
from simcoll.cli.options import parse_bytes

SMALL = ("-b", "8", "-e", "64K", "-f", "8")


def rows_of(capsys, *argv):
    status, out, err = cli(capsys, "run", *argv)
    assert status == 0, err
    return table_rows(out), out, err


def notes_of(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("# -")]


def test_a_real_command_line_with_g_runs_one_process_of_t_times_g_ranks(capsys):
    plain, _, _ = rows_of(capsys, "--topology", "switch:8", *SMALL)
    copied, out, _ = rows_of(capsys, *SMALL, "-g", "8")
    assert copied == plain
    assert "# nRanks 8 " in out and "# -t 1 -g 8: 1 process of 8 ranks" in out
    _, out, _ = rows_of(capsys, *SMALL, "-t", "3", "-g", "2")
    assert "# nRanks 6 " in out and "topology switch:n=6" in out
    # the usual `mpirun -np 8 all_reduce_perf -g 1`: one rank here, and the note says why
    _, out, _ = rows_of(capsys, *SMALL, "-g", "1")
    assert ("# -t 1 -g 1: 1 process of 1 rank, the machine's 1; under mpirun nccl-tests "
            "runs one such process per MPI rank: give --topology the whole machine") in out


def test_g_on_a_machine_counts_its_processes_and_refuses_what_does_not_divide(capsys):
    _, out, _ = rows_of(capsys, "--topology", "cluster:2x4", *SMALL, "-g", "4")
    assert "# -t 1 -g 4: 2 processes of 4 ranks, the machine's 8" in out
    status, _, err = cli(capsys, "run", "--topology", "switch:12", *SMALL, "-g", "8")
    assert status == 2
    assert "-t 1 -g 8: 8 ranks per process do not divide the machine's 12" in err


@pytest.mark.parametrize(("flags", "noted"), [
    (("-n", "50", "-w", "5"), "-n 50 -w 5"), (("-N", "3"), "-N 3"),
    (("-p", "1", "-y", "1", "-T", "60"), "-p 1 -y 1 -T 60"),
    (("-M", "1", "-I", "1", "-K", "2", "-S", "1"), "-M 1 -I 1 -K 2 -S 1"),
    (("-a", "0"), "-a 0"), (("--iters", "7", "--warmup_iters", "0x10"), "-n 7 -w 16"),
    # -V sets the CTAs of -D's device kernels only (refused): any value, as with -D 0
    # (nccl-tests reads -V 0 as its default 16)
    (("-D", "0", "-V", "32"), "-V 32"), (("-V", "0"), "-V 0"),
    (("-m", "1", "-z", "0", "-G", "0", "-C", "0", "-R", "0", "-u", "0", "-x", "-1",
      "-D", "0"), None),
    # -x 0 is NCCL_CTA_POLICY_DEFAULT, what NCCL runs where nccl-tests sets none (-x -1)
    (("-x", "0"), None),
])
def test_options_that_cannot_change_a_simulated_time_are_taken_and_named(capsys, flags,
                                                                         noted):
    plain, _, _ = rows_of(capsys, "--topology", "switch:4", *SMALL)
    rows, out, _ = rows_of(capsys, "--topology", "switch:4", *SMALL, *flags)
    assert rows == plain
    if noted is None:  # the timing options at their defaults say nothing
        assert notes_of(out) == []
    else:
        assert notes_of(out) == [f"# {noted}: taken; a simulation's iterations all take the "
                                 f"same time, and its time is the last rank's (as -a 3)"]


@pytest.mark.parametrize(("flag", "value", "default"), [
    ("-m", "4", "1"), ("-z", "1", "0"), ("-G", "10", "0"), ("-C", "1", "0"),
    ("-R", "2", "0"), ("-u", "1", "0"), ("-x", "3", "-1"), ("-D", "1", "0"),
    ("--cudagraph", "1", "0"),
])
def test_options_that_change_what_nccl_tests_times_are_refused_but_at_their_default(
        capsys, flag, value, default):
    status, out, err = cli(capsys, "run", "--topology", "switch:4", *SMALL, flag, value)
    assert status == 2 and out == ""
    short = {"--cudagraph": "-G"}.get(flag, flag)
    assert f"{short} {value} is not simulated" in err
    assert f"as nccl-tests with {short} {default}" in err


def test_json_report_holds_the_run_and_reads_back_at_full_precision(tmp_path, capsys):
    path = tmp_path / "r.json"
    status, out, err = cli(capsys, "run", "--topology", "cluster:2x2", *SMALL, "-c", "-J",
                           str(path))
    assert status == 0, err
    printed = table_rows(out)
    _, lines, _ = cli(capsys, "run", "--topology", "cluster:2x2", *SMALL, "-c", "--json")
    records = [json.loads(line) for line in lines.splitlines()]
    doc = json.loads(path.read_text())
    assert doc["version"] == 3 and doc["errors"] == []
    assert doc["args"] == ["simcoll", "run", "--topology", "cluster:2x2", *SMALL, "-c", "-J",
                           str(path)]
    assert [d["hostname"] for d in doc["config"]["devices"]] == ["node0", "node0", "node1",
                                                                 "node1"]
    # each GPU's index on its node, as nccl-tests' CUDA device (it was the global rank)
    assert [(d["rank"], d["device"]) for d in doc["config"]["devices"]] == [
        (0, 0), (1, 1), (2, 0), (3, 1)]
    table = sc.nccl_tests.parse(path.read_text())
    assert table.collective == "all_reduce" and table.nranks == 4
    assert table.simcoll_run == "ring, network flow, params: none"
    assert [r.size for r in table.rows] == [int(row[0]) for row in printed]
    assert [r.out_of_place.time_us for r in table.rows] == [r["time_us"] for r in records]
    assert [f"{r.out_of_place.time_us:.2f}" for r in table.rows] == [row[5] for row in printed]
    assert all(r.in_place is None and r.out_of_place.wrong == 0 for r in table.rows)
    assert table.out_of_bounds == 0
    assert table.avg_busbw == pytest.approx(
        sum(r["busbw_GBps"] for r in records) / len(records), rel=1e-12)
    status, out, _ = cli(capsys, "compare", str(path), "--topology", "cluster:2x2")
    assert status == 0 and f"geometric-mean |time error|: 0.0% over {len(records)} sizes" in out


def test_json_report_is_refused_before_the_run_where_it_cannot_be_written(tmp_path, capsys):
    for name, words in ((tmp_path / "r.txt", "use a file ending in .json"),
                        (tmp_path / "none" / "r.json", "does not exist")):
        status, out, err = cli(capsys, "run", *SMALL, "-J", str(name))
        assert status == 2 and out == "" and words in err


@pytest.mark.parametrize("command", [
    ("run", "-b", "1K", "-e", "1K", "-J"), ("trace", "--size", "1K", "--output"),
    ("sweep", "--ranks", "4", "--sizes", "1K", "--algorithms", "ring", "--output")])
def test_an_output_is_never_the_topology_file_the_command_reads(tmp_path, capsys, command):
    """`-J m.json` (or trace's, sweep's --output) with `--topology m.json` replaced the
    machine file with the report, for good."""
    machine = tmp_path / "m.json"
    sc.topology.save(sc.topology.switch(4), machine)
    kept = machine.read_bytes()
    for named in (machine, tmp_path / "." / "m.json"):
        status, out, err = cli(capsys, command[0], "--topology", str(machine), *command[1:],
                               str(named))
        assert status == 2 and out == ""
        assert err == (f"simcoll {command[0]}: error: {command[-1]} {named}: it is the "
                       f"topology file --topology reads, which writing would replace; "
                       f"write elsewhere\n")
        assert machine.read_bytes() == kept
    status, _, _ = cli(capsys, command[0], "--topology", str(machine), *command[1:],
                       str(tmp_path / "other.json"))
    assert status == 0 and machine.read_bytes() == kept


def test_json_report_keeps_the_rows_done_when_the_run_is_interrupted(tmp_path, capsys,
                                                                      monkeypatch):
    import simcoll.cli.run as run_module

    calls = []
    real = run_module.simulate

    def stop_at_the_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "simulate", stop_at_the_third)
    path = tmp_path / "r.json"
    status, out, err = cli(capsys, "run", "--topology", "switch:4", *SMALL, "-J", str(path))
    assert status == 130 and "interrupted" in err
    doc = json.loads(path.read_text())
    assert [r["size"] for r in doc["results"]] == [8, 64]   # the first row is run ahead
    assert doc["errors"] == ["interrupted after 2 size(s)"]


def test_rows_of_every_root_done_before_ctrl_c_are_printed_and_reported(tmp_path, capsys,
                                                                       monkeypatch):
    """-r all simulates each root's first row before the table's head; Ctrl-C among
    them left no row on standard output and no -J report."""
    import simcoll.cli.run as run_module

    calls = []
    real = run_module.simulate

    def stop_at_the_third(*args, **kwargs):
        calls.append(kwargs["root"])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "simulate", stop_at_the_third)
    path = tmp_path / "r.json"
    status, out, err = cli(capsys, "run", "--topology", "switch:4", "--collective",
                           "broadcast", "-b", "1K", "-e", "1K", "-r", "all", "-J", str(path))
    assert status == 130 and "interrupted" in err
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert [(int(r[0]), int(r[4])) for r in rows] == [(1024, 0), (1024, 1)]
    doc = json.loads(path.read_text())
    assert [(r["size"], int(r["root"])) for r in doc["results"]] == [(1024, 0), (1024, 1)]
    assert doc["errors"] == ["interrupted after 2 size(s)"]
    for root, r in enumerate(doc["results"]):
        direct = sc.simulate(sc.topology.switch(4), "broadcast", algorithm="binomial",
                             nbytes=1024, root=root, dtype="float32")
        assert r["out_of_place"]["time"] == pytest.approx(direct.time * 1e6, rel=1e-6)


def test_json_report_of_a_run_in_no_time_has_null_bandwidths(tmp_path, capsys):
    path = tmp_path / "r.json"
    # one GPU: an all_reduce moves nothing and takes no time
    status, _, err = cli(capsys, "run", "--topology", "switch:1", "-b", "8", "-e", "8", "-J",
                         str(path))
    assert status == 0, err
    [result] = json.loads(path.read_text())["results"]
    assert result["out_of_place"]["alg_bw"] is None and result["out_of_place"]["time"] == 0
    assert sc.nccl_tests.parse(path.read_text()).rows[0].out_of_place.algbw == math.inf


def test_check_count_and_step_factor_zero_read_as_nccl_tests_reads_them(capsys):
    once, _, _ = rows_of(capsys, "--topology", "switch:4", *SMALL, "-c", "1")
    five, _, _ = rows_of(capsys, "--topology", "switch:4", *SMALL, "-c", "5")
    assert five == once and all(row[-1] == "0" for row in five)
    # -f 0: nccl-tests steps by -i (its loop multiplies only where stepfactor > 1)
    rows, _, _ = rows_of(capsys, "--topology", "switch:4", "-b", "1K", "-e", "4K", "-f", "0",
                         "-i", "1K")
    assert [int(r[0]) for r in rows] == [1024, 2048, 3072, 4096]


def test_every_integer_option_reads_prefixes_as_nccl_tests_strtol_does(capsys):
    """-g 0x2 was taken but -f 0x2, -c 0x1 and -r 0x1 refused; nccl-tests reads each
    with strtol(optarg, NULL, 0): hex after 0x, octal after a leading 0 (010 is 8), and
    it stops at what it cannot read (0o1 is 0, 1_0 is 1, 1.5 is 1), which is refused
    rather than read as Python's int() would (1, 10)."""
    plain, out, _ = rows_of(capsys, "--topology", "switch:4", "-b", "8", "-e", "64K", "-f",
                            "8", "-c", "1")
    hexed, hex_out, _ = rows_of(capsys, "--topology", "switch:4", "-b", "8", "-e", "64K",
                                "-f", "0x8", "-c", "0x1")
    assert hexed == plain and "validation: 1" in hex_out
    rooted, _, _ = rows_of(capsys, "--topology", "switch:4", "--collective", "broadcast",
                           "--size", "1K", "-r", "03")
    assert [r[4] for r in rooted] == ["3"]
    octal, _, _ = rows_of(capsys, "--topology", "switch:4", "-b", "1K", "-e", "64K", "-f",
                          "010")
    assert [int(r[0]) for r in octal] == [1024, 8192, 65536]
    for flag, text in (("-f", "1.5"), ("-f", "1_0"), ("-c", "0o1"), ("-f", "08")):
        status, _, err = cli(capsys, "run", flag, text)
        assert status == 2 and f"'{text}' is not a whole number >= 0" in err
    # int() reads Arabic-Indic digits and underscores, strtol does not
    for text in ("\u0662", "0b10", "1_6"):
        status, _, err = cli(capsys, "run", "-g", text)
        assert status == 2 and f"'{text}' is not an integer as nccl-tests reads it" in err


def test_check_iterations_and_the_default_largest_size_as_printed(capsys):
    """-c 2 printed 'validation: 1' (nccl-tests prints its datacheck, 2); -e alone below
    -b's default named a '-b 33554432' nobody typed; -b above 32M alone takes -e = -b."""
    _, out, _ = rows_of(capsys, "--topology", "switch:4", "--size", "1K", "-c", "2")
    assert "validation: 2" in out
    status, _, err = cli(capsys, "run", "-e", "1M")
    assert status == 2 and err.strip().endswith(
        "invalid sizes: -e 1048576 is below -b's default, 32M (33554432); give -b too")
    rows, _, _ = rows_of(capsys, "--topology", "switch:4", "-b", "64M")
    assert [int(r[0]) for r in rows] == [64 << 20]


def test_step_factor_zero_keeps_the_size_loop_guards(capsys):
    status, _, err = cli(capsys, "run", "-b", "8", "-e", "8G", "-i", "1", "-f", "0")
    assert status == 2 and "gives 8589934585 sizes; at most 10000" in err
    status, _, err = cli(capsys, "run", "-b", "8", "-e", "64", "-i", "0", "-f", "0")
    assert status == 2 and "the sizes never grow" in err


def test_a_machine_of_t_times_g_that_cannot_be_built_names_t_and_g(capsys):
    status, out, err = cli(capsys, "run", *SMALL, "-g", "100000000")
    assert status == 2 and out == ""
    assert err.startswith("simcoll run: error: -t 1 -g 100000000 (without --topology: "
                          "switch:100000000): ")


def test_root_minus_one_is_every_root_in_turn(capsys):
    rows, _, _ = rows_of(capsys, "--topology", "switch:4", "--collective", "broadcast",
                         "-b", "1K", "-e", "1K", "-r", "-1")
    assert [int(r[4]) for r in rows] == [0, 1, 2, 3]
    alias, _, _ = rows_of(capsys, "--topology", "switch:4", "--collective", "broadcast",
                          "-b", "1K", "-e", "1K", "-r", "all")
    assert alias == rows


def test_op_and_root_where_they_do_not_apply_are_ignored_saying_so(capsys):
    plain, _, _ = rows_of(capsys, "--topology", "switch:4", "--collective", "all_gather",
                          *SMALL)
    rows, out, _ = rows_of(capsys, "--topology", "switch:4", "--collective", "all_gather",
                           *SMALL, "-o", "sum", "-r", "0")
    assert rows == plain
    assert notes_of(out) == [
        "# -o sum: all_gather does not reduce; ignored, as nccl-tests ignores it",
        "# -r 0: all_gather has no root; ignored, as nccl-tests ignores it"]
    rows, out, _ = rows_of(capsys, "--topology", "switch:4", *SMALL, "-r", "2")
    assert rows == rows_of(capsys, "--topology", "switch:4", *SMALL)[0]
    assert "# -r 2: all_reduce has no root" in out
    _, out, _ = rows_of(capsys, "--topology", "switch:4", *SMALL, "-r", "-1")
    assert "# -r -1: all_reduce has no root" in out   # as typed


def test_mulsum_runs_as_avg_and_op_all_says_it_is_left_out(capsys):
    avg, _, _ = rows_of(capsys, "--topology", "switch:4", *SMALL, "-o", "avg", "-c")
    mulsum, out, _ = rows_of(capsys, "--topology", "switch:4", *SMALL, "-o", "mulsum", "-c")
    assert mulsum == avg and {r[3] for r in mulsum} == {"avg"}
    assert "# -o mulsum: a pre-multiplied sum, run as avg" in out
    rows, out, _ = rows_of(capsys, "--topology", "switch:4", "-b", "1K", "-e", "1K", "-o", "all")
    assert [r[3] for r in rows] == ["sum", "prod", "max", "min", "avg"]
    assert "# left out: mulsum: " in out


def test_out_of_bounds_line_is_printed_without_the_check_as_nccl_tests_prints_it(capsys):
    _, out, _ = rows_of(capsys, "--topology", "switch:4", *SMALL)
    footer = out[out.index("# Out of bounds"):].splitlines()
    assert footer[:2] == ["# Out of bounds values : 0 OK",
                          footer[1]] and footer[1].startswith("# Avg bus bandwidth")


@pytest.mark.parametrize("form", ["--json", "--csv"])
def test_notes_go_to_standard_error_with_csv_and_json(capsys, form):
    status, out, err = cli(capsys, "run", "--topology", "switch:4", *SMALL, "-g", "4",
                           "-n", "5", form)
    assert status == 0 and "# -" not in out
    assert err.splitlines() == ["# -t 1 -g 4: 1 process of 4 ranks, the machine's 4",
                                "# -n 5: taken; a simulation's iterations all take the "
                                "same time, and its time is the last rank's (as -a 3)"]


CPUTIME = """\
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 1 iters: 20 \
agg iters: 1 validation: 1 graph: 0 unalign: 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root  cputime   algbw   busbw #wrong  cputime   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
         256            64     float     sum      -1     6.00    0.01    0.02      0     5.80    0.01    0.02      0
        1024           256     float     sum      -1     6.10    0.05    0.09      0     5.90    0.05    0.09      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.055
#
"""


def test_cputime_logs_are_read_as_such_and_refused_by_compare_and_calibrate(tmp_path, capsys):
    table = sc.nccl_tests.parse(CPUTIME)
    assert table.cputime and [r.out_of_place.time_us for r in table.rows] == [6.0, 6.1]
    plain = CPUTIME.replace("cputime", "   time").replace("0.01    0.02", "0.04    0.07")
    plain = plain.replace("0.05    0.09", "0.17    0.29")
    assert not sc.nccl_tests.parse(plain).cputime
    topo = sc.topology.switch(8)
    with pytest.raises(sc.InvalidInputError, match="-C 1's cputime: the host's time"):
        sc.compare(topo, table, algorithm="ring")
    with pytest.raises(sc.InvalidInputError, match="-C 1's cputime"):
        sc.calibrate("switch", table, algorithm="ring", fixed={"n": 8},
                     free={"bandwidth": (50e9, 1e9, 1e12)})
    log = tmp_path / "cputime.txt"
    log.write_text(CPUTIME)
    status, out, err = cli(capsys, "compare", str(log), "--topology", "switch:8")
    assert status == 2 and out == "" and "use a log run without -C (or with -C 0)" in err


def test_compare_notes_grouped_launches_graphs_and_misaligned_buffers(tmp_path, capsys):
    text = CPUTIME.replace("cputime", "   time").replace("0.01    0.02", "0.04    0.07")
    text = text.replace("0.05    0.09", "0.17    0.29")
    text = text.replace("agg iters: 1", "agg iters: 8").replace("graph: 0", "graph: 10")
    text = text.replace("unalign: 0", "unalign: 3")
    log = tmp_path / "grouped.txt"
    log.write_text(text)
    status, out, err = cli(capsys, "compare", str(log), "--topology", "switch:8")
    assert status == 0, err
    first = out.splitlines()[0]
    assert "the log grouped 8 operations per launch (-m)" in first
    assert "the log replayed CUDA graphs (-G 10)" in first
    assert "the log misaligned its buffers (-u 3)" in first


def test_sizes_with_an_exponent_read_as_nccl_tests_reads_them(capsys):
    # nccl-tests' parsesize reads "%lf" then a unit letter: 1e3 is 1000, 1e3K 1024000
    rows, _, _ = rows_of(capsys, "--topology", "switch:4", "-b", "1e3", "-e", "1e3K",
                         "-f", "1024")
    assert [int(r[0]) for r in rows] == [1000, 1024000]


def test_json_report_of_an_infinite_bus_bandwidth_is_written(tmp_path, capsys):
    path = tmp_path / "r.json"
    status, out, err = cli(capsys, "run", "--topology", "switch:1", "--collective",
                           "broadcast", "-b", "8", "-e", "8", "-J", str(path))
    assert status == 0, err
    doc = json.loads(path.read_text())
    [result] = doc["results"]
    assert result["out_of_place"]["alg_bw"] is None and result["out_of_place"]["bus_bw"] is None
    assert doc["average_bus_bandwidth"]["bandwidth"] is None   # not inf (no JSON for it)


@pytest.mark.parametrize("flags", [("-t", "0"), ("-g", "0"), ("-t", "-2"), ("--ngpus", "0")])
def test_t_and_g_below_one_are_refused(capsys, flags):
    status, out, err = cli(capsys, "run", "-b", "8", "-e", "8", *flags)
    assert status == 2 and out == ""
    assert f"'{flags[1]}' is not a whole number >= 1" in err


def test_mulsum_is_said_left_out_only_with_op_all_and_noted_in_any_case(capsys):
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "-b", "1K", "-e", "1K",
                         "-o", "sum")
    assert status == 0 and "mulsum" not in out
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "-b", "1K", "-e", "1K",
                         "-o", "MulSum")
    assert status == 0 and "# -o mulsum: a pre-multiplied sum, run as avg" in out
    assert [r[3] for r in table_rows(out)] == ["avg"]


def _report(tmp_path, capsys, *argv):
    path = tmp_path / "r.json"
    status, out, err = cli(capsys, "run", "--topology", "cluster:2x2", *argv, "-J", str(path))
    assert status == 0, err
    return json.loads(path.read_text()), table_rows(out)


def test_json_report_config_and_rows_follow_the_command_line(tmp_path, capsys):
    doc, rows = _report(tmp_path, capsys, "-b", "1K", "-e", "4K", "-i", "1K")
    config = doc["config"]
    # util.cu: step_factor only where stepFactor > 1, else step_bytes
    assert config["step_bytes"] == 1024 and "step_factor" not in config
    assert (config["minimum_bytes"], config["maximum_bytes"]) == (1024, 4096)
    assert config["validation"] == 0
    assert [d["device_info"] for d in config["devices"]] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert [r["size"] for r in doc["results"]] == [1024, 2048, 3072, 4096]
    for result in doc["results"]:
        assert result["root"] == "    -1"               # sprintf("%6i", -1)
        assert result["out_of_place"]["nwrong"] is None  # unchecked: jsonNull()
    table_ = sc.nccl_tests.parse(json.dumps(doc))
    assert (table_.settings["step"], table_.settings["step_kind"]) == (1024, "bytes")
    assert table_.devices == ("gpu0", "gpu1", "gpu2", "gpu3")
    doc, _ = _report(tmp_path, capsys, "-b", "1K", "-e", "4K", "-f", "0", "-i", "1K")
    assert doc["config"]["step_bytes"] == 1024 and "step_factor" not in doc["config"]
    doc, _ = _report(tmp_path, capsys, "-b", "1K", "-e", "4K", "-f", "2", "-c")
    assert doc["config"]["step_factor"] == 2 and "step_bytes" not in doc["config"]
    assert doc["config"]["validation"] == 1
    assert [r["out_of_place"]["nwrong"] for r in doc["results"]] == [0.0, 0.0, 0.0]


def test_json_report_average_of_one_size_is_its_bus_bandwidth(tmp_path, capsys):
    doc, _ = _report(tmp_path, capsys, "--size", "1M")
    [result] = doc["results"]
    assert doc["average_bus_bandwidth"]["bandwidth"] == result["out_of_place"]["bus_bw"] > 0


def test_json_report_counts_the_rows_that_failed_the_check(tmp_path):
    topo = sc.topology.switch(2)
    report = Report(tmp_path / "r.json", ["run"], topo, {}, (8, 16), ("step_factor", 2), True)
    report.rows += [table.Row(8, 2, "float", "sum", -1, 1.0, 0.008, 0.008, 0),
                    table.Row(16, 4, "float", "sum", -1, 1.0, 0.016, 0.016, 3)]
    report.write()
    doc = json.loads((tmp_path / "r.json").read_text())
    # rows with wrong elements; "false" as util.cu's jsonBool writes it (a string)
    assert doc["out_of_bounds"] == {"count": 1, "okay": "false"}
    assert [r["out_of_place"]["nwrong"] for r in doc["results"]] == [0.0, 3.0]
    assert sc.nccl_tests.parse((tmp_path / "r.json").read_text()).out_of_bounds == 1


def test_a_bad_topology_given_with_g_is_not_blamed_on_g(capsys):
    status, out, err = cli(capsys, "run", "--topology", "nosuch:4", "-b", "8", "-e", "8",
                           "-g", "4")
    assert status == 2 and out == ""
    assert "without --topology" not in err and "nosuch" in err


@pytest.mark.parametrize(("text", "value"), [
    ("1E3", 1000), ("5e-1K", 512), ("2.5E+2K", 256000), ("1024T", 2**50), ("1e1M", 10 * 2**20),
])
def test_parse_bytes_reads_exponents_as_nccl_tests_strtod_does(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize(("text", "words"), [
    ("1025T", "above the largest accepted size, 1 PiB"),
    ("1e50", "above the largest accepted size, 1 PiB"),
    ("1e-50", "is not a whole number of bytes"),
    ("1.5", r"is 1 \+ 1/2 bytes, not a whole number"),
    # 1024 x 1e-22 = 1 / (10^22 / 2^10) = 1/9765625000000000000; a float rounded it away:
    # "is 1024.0 bytes, not a whole number of bytes"
    ("1.0000000000000000000001K", r"is 1024 \+ 1/9765625000000000000 bytes"),
    ("1e3Mb", "write 1e3MiB"),
    ("1e3MB", "write 1e3M or 1e3MiB"),
])
def test_parse_bytes_says_why_it_refuses(text, words):
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        parse_bytes(text)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_csv_rows_reach_a_pipe_as_each_size_is_done(tmp_path):
    # each size of this run takes about a second: the first CSV row must be readable
    # while the run goes on (it sat in stdout's buffer until the end)
    proc = subprocess.Popen(
        [sys.executable, "-m", "simcoll", "run", "--collective", "all_to_all", "--topology",
         "switch:256", "--algorithm", "direct", "-b", "256K", "-e", "32M", "-f", "2",
         "--csv"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
             "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        got, deadline = b"", time.monotonic() + 60
        while got.count(b"\n") < 2 and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 0.1)[0]:
                got += os.read(proc.stdout.fileno(), 65536)
        # the header and the first row, before the other seven sizes are done (they all
        # came at once, at the end, while a CSV line waited in stdout's buffer)
        assert 2 <= got.count(b"\n") < 9, got
        assert got.split(b"\n")[1].startswith(b"all_to_all,direct,")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def _compare_notes(tmp_path, capsys, agg, graph, unalign):
    text = CPUTIME.replace("cputime", "   time").replace("0.01    0.02", "0.04    0.07")
    text = text.replace("0.05    0.09", "0.17    0.29").replace("agg iters: 1", f"agg iters: {agg}")
    text = text.replace("graph: 0", f"graph: {graph}").replace("unalign: 0", f"unalign: {unalign}")
    log = tmp_path / "log.txt"
    log.write_text(text)
    status, out, err = cli(capsys, "compare", str(log), "--topology", "switch:8")
    assert status == 0, err
    return out.splitlines()[0]


def test_compare_notes_no_grouping_graphs_or_misalignment_where_the_log_had_none(tmp_path,
                                                                                  capsys):
    first = _compare_notes(tmp_path, capsys, 1, 0, 0)
    assert "grouped" not in first and "CUDA graphs" not in first and "misaligned" not in first
    first = _compare_notes(tmp_path, capsys, 2, 1, 1)
    assert "the log grouped 2 operations per launch (-m)" in first
    assert "the log replayed CUDA graphs (-G 1)" in first
    assert "the log misaligned its buffers (-u 1)" in first


def test_parse_bytes_of_a_long_exponent_or_zero_with_an_exponent():
    with pytest.raises(argparse.ArgumentTypeError, match="above the largest"):
        parse_bytes("1e" + "1" * 5000)
    assert parse_bytes("0e50") == parse_bytes("0e-50") == 0
    # zeros that do not count: 1, 1 and 0 bytes, however many
    assert parse_bytes("0" * 101 + "1") == parse_bytes("1." + "0" * 100) == 1
    assert parse_bytes("0." + "0" * 100) == 0
    with pytest.raises(argparse.ArgumentTypeError, match="more than 100 significant digits"):
        parse_bytes("1" * 101)


def test_json_report_with_per_iteration_timing_gives_one_iterations_statistics(tmp_path,
                                                                              capsys):
    # util.cu's writePerIterReport keys, as tools/analyze_perf_json.py reads them: a
    # simulation times one iteration, so every statistic is its time and none spreads
    doc, rows = _report(tmp_path, capsys, "-b", "1K", "-e", "4K", "-f", "4", "-I", "1")
    assert doc["config"]["per_iter_timing"] == "true"
    for result, row in zip(doc["results"], rows):
        time_us = result["out_of_place"]["time"]
        assert f"{time_us:.2f}" == row[5]
        assert result["out_of_place_per_iter"] == {
            "skipped_iterations": 0, "min_us": time_us, "max_us": time_us,
            "avg_us": time_us, "p50_us": time_us, "p95_us": time_us, "p99_us": time_us,
            "stdev_us": 0.0, "cv_pct": 0.0, "times_us": [time_us]}
    doc, _ = _report(tmp_path, capsys, "-b", "1K", "-e", "4K", "-f", "4")
    assert doc["config"]["per_iter_timing"] == "false"
    assert all("out_of_place_per_iter" not in r for r in doc["results"])
    # nccl-tests takes -I 0 or 1 and turns the statistics off for any other value
    doc, _ = _report(tmp_path, capsys, "-b", "1K", "-e", "4K", "-f", "4", "-I", "2")
    assert doc["config"]["per_iter_timing"] == "false"
    assert all("out_of_place_per_iter" not in r for r in doc["results"])
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", *SMALL, "-I", "2")
    assert status == 0 and notes_of(out)[0] == (
        "# -I 2: nccl-tests takes 0 (off) or 1 (on) and turns per-iteration statistics off "
        "for any other value; off")


def test_per_iteration_timing_0_or_1_says_nothing_of_its_value(capsys):
    """Only -I other than 0 and 1 is noted as turned off; -I 0 and -I 1 are taken."""
    for value in ("0", "1"):
        status, out, _ = cli(capsys, "run", "--topology", "switch:4", *SMALL, "-I", value)
        assert status == 0 and notes_of(out) == [
            f"# -I {value}: taken; a simulation's iterations all take the same time, and "
            f"its time is the last rank's (as -a 3)"]


def test_device_cta_count_help_names_nccl_tests_default(capsys):
    from simcoll.cli import main

    assert main(["run", "--help"]) == 0
    assert ("CTAs of the device-side kernels, which only -D > 0 runs (refused) "
            "(nccl-tests' default 16)") in " ".join(capsys.readouterr().out.split())


def test_json_report_validation_is_the_check_count(tmp_path, capsys):
    """-c 2: the preamble prints 'validation: 2' (nccl-tests' datacheck); the -J report's
    config says the same (mutant: int(bool(checked)) wrote 1)."""
    path = tmp_path / "r.json"
    status, out, err = cli(capsys, "run", "--topology", "switch:4", "--size", "1K", "-c", "2",
                           "-J", str(path))
    assert status == 0, err
    assert "validation: 2" in out
    assert json.loads(path.read_text())["config"]["validation"] == 2


def test_nccl_tests_min_bw_passes_an_average_of_exactly_nine_tenths_of_it():
    """src/common.cu fails the run where ``bw[0] < check_avg_bw*(0.9)``: strictly below.
    10 x 0.9 rounds to 9.0 exactly in float64, so 9.0 GB/s passes a minimum of 10 and the
    next float below fails it (mutant: <= failed 9.0)."""
    assert 10.0 * 0.9 == 9.0
    assert not table.fails_min_bw(9.0, 10.0)
    assert table.fails_min_bw(math.nextafter(9.0, 0.0), 10.0)
    rows = [table.Row(1024, 256, "float", "sum", -1, 1.0, 9.0, 9.0, None)]
    assert table.footer(rows, 10.0)[1] == "# Avg bus bandwidth    : 9 OK"


@pytest.mark.parametrize("dtype", ["i4,,", ">i4,,"])
def test_a_dtype_numpy_parses_as_python_is_refused_by_name(capsys, dtype):
    """numpy's np.dtype('i4,,') raises SyntaxError (it reads the comma list as Python):
    a bad argument, status 2 (mutants: without SyntaxError caught, a traceback, status 1)."""
    status, out, err = cli(capsys, "run", "--topology", "switch:2", "--size", "1K",
                           "--dtype", dtype)
    assert status == 2 and out == ""
    assert f"unknown dtype {dtype!r}" in err


def test_json_report_config_flags_are_jsonbool_strings(tmp_path, capsys):
    doc, _ = _report(tmp_path, capsys, "-b", "1K", "-e", "4K", "-f", "4")  # noqa: F821
    config = doc["config"]
    # nccl-tests 2.19.6 util.cu: jsonBool(false) for blocking and parallel init by default
    assert config["blocking_collectives"] == "false"
    assert config["parallel_init"] == "false"
    assert config["per_iter_timing"] == "false"


def test_g_1_on_a_whole_machine_gets_no_mpirun_note(capsys):
    """-g 1 with --topology switch:8 runs 8 processes of one rank: the machine is already
    whole, so the note that under mpirun --topology must be the whole machine is not
    given (it is for a machine of one rank only)."""
    _, out, _ = rows_of(capsys, "--topology", "switch:8", *SMALL, "-g", "1")
    assert "# -t 1 -g 1: 8 processes of 1 rank, the machine's 8" in out.splitlines()
    assert "mpirun" not in out


def test_an_output_that_is_the_topology_file_under_another_name_is_refused(tmp_path,
                                                                            capsys):
    """A hard link is the topology file under a second name: refused as the file itself
    is (one file under two names, which no comparison of the paths finds)."""
    machine = tmp_path / "m.json"
    sc.topology.save(sc.topology.switch(4), machine)
    other = tmp_path / "other_name.json"
    os.link(machine, other)
    kept = machine.read_bytes()
    status, out, err = cli(capsys, "run", "--topology", str(machine), "-b", "1K", "-e", "1K",
                           "-J", str(other))
    assert status == 2 and out == ""
    assert err == (f"simcoll run: error: -J {other}: it is the topology file --topology "
                   f"reads, which writing would replace; write elsewhere\n")
    assert machine.read_bytes() == kept
