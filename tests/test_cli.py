"""The command line: nccl-tests' run table against simulate and hand-computed figures,
sizes, one-line errors with exit status 2, list / sweep / plot / trace / demo, and real
subprocesses for --version, a closed pipe and exit codes."""

from __future__ import annotations

import csv
import errno
import inspect
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import NO_FORMULA

import simcoll as sc
from simcoll.algorithms import Int, registry
from simcoll.algorithms.nccl.report import graph_lines
from simcoll.cli import checking, main
from simcoll.cli.options import parse_bytes
from simcoll.cli.run import sizes
from simcoll.cli.table import fixed
from simcoll.cost import CostModel
from simcoll.sweep.storage import remove_unless_open

NCCL_HEAD = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s"
"""nccl-tests 2.19.6 src/util.cu writeResultHeader, first block of columns."""
NCCL_ROW = "%12d  %12d  %8s  %6s  %6s"
NCCL_BODY = "  %7s  %6s  %6s    N/A"


TWO_NODES = str(Path(__file__).parents[1] / "examples" / "topologies" / "two_nodes.yaml")


def cli(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def table_rows(out):
    return [line.split() for line in out.splitlines() if line and not line.startswith("#")]


def test_ring_all_reduce_by_hand(capsys):
    """p = 4 at 1 GB/s, no latency, 1 MiB: time = 2 (p-1)/p n / B, busbw = B exactly."""
    status, out, err = cli(capsys, "run", "--topology",
                           "switch:ranks=4,bandwidth=1GB/s,latency=0", "--size", "1M")
    assert status == 0 and err == ""
    time_us = 2 * 3 / 4 * 2**20 / 1e9 * 1e6
    [row] = table_rows(out)
    assert row == ["1048576", "262144", "float", "sum", "-1", "1572.86", "0.67", "1.00", "N/A"]
    assert f"{time_us:.2f}" == "1572.86"
    assert "# Avg bus bandwidth    : 1 \n" in out
    status, out, _ = cli(capsys, "run", "--topology", "switch:ranks=4,bandwidth=1GB/s,latency=0",
                         "--size", "1M", "--json")
    record = json.loads(out)
    assert record["time"] == pytest.approx(2 * 3 / 4 * 2**20 / 1e9, rel=1e-12)
    assert record["busbw_GBps"] == pytest.approx(1.0, rel=1e-12)
    assert record["algbw_GBps"] == pytest.approx(2 / 3, rel=1e-12)
    assert record["bytes_sent"] == [2 * 3 * 2**20 // 4] * 4
    assert record["spec"] == "switch:n=4,bandwidth=1GB/s,latency=0"


def test_the_header_counts_one_rank_in_the_singular(capsys):
    _, out, _ = cli(capsys, "run", "--topology", "switch:1", "--size", "1K")
    assert "# topology switch:n=1 (switch(1): 1 rank, 2 devices, 1 link)\n" in out
    _, out, _ = cli(capsys, "run", "--topology", "switch:2", "--size", "1K")
    assert "# topology switch:n=2 (switch(2): 2 ranks, 3 devices, 2 links)\n" in out


def test_header_gives_the_sizes_asked_for_as_nccl_tests_does(capsys):
    # -b 1K -e 512K -f 32 runs 1K and 32K (the next, 1M, is past 512K); nccl-tests prints
    # minBytes and maxBytes as given.
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "-b", "1K", "-e", "512K",
                         "-f", "32")
    assert status == 0
    assert [row[0] for row in table_rows(out)] == ["1024", "32768"]
    assert "# nRanks 4 minBytes 1024 maxBytes 524288 step: 32(factor) validation: 0" in out
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--size", "4K")
    assert "minBytes 4096 maxBytes 4096 " in out


@pytest.mark.parametrize("argv, says", [
    ([], "all_reduce / ring, network flow, params: none (defaults: chunks=1)\n"),
    (["--param", "chunks=2"], "all_reduce / ring, network flow, params: chunks=2\n"),
    (["--collective", "broadcast", "--algorithm", "pipeline"],
     "broadcast / pipeline, network flow, params: none (defaults: chunks=8)\n"),
    (["--algorithm", "naive"], "all_reduce / naive, network flow, params: none\n"),
    (["--algorithm", "nccl"], "all_reduce / nccl, network flow, params: none\n"),
])
def test_header_names_the_defaults_a_run_used(capsys, argv, says):
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--size", "4K", *argv)
    assert status == 0 and says in out.splitlines()[0] + "\n"


def test_table_layout_is_nccl_tests(capsys):
    status, out, _ = cli(capsys, "run", "--topology", "cluster:2x4", "-b", "1K", "-e", "1M",
                         "-f", "32")
    lines = out.splitlines()
    start = lines.index("#")
    assert lines[start + 2] == NCCL_HEAD % ("size", "count", "type", "redop", "root", "time",
                                            "algbw", "busbw", "#wrong")
    assert lines[start + 3] == NCCL_HEAD % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                                            "(GB/s)", "")
    topo = sc.topology.cluster(2, 4)
    rows = [line for line in lines if line and not line.startswith("#")]
    busbw = []
    for line, size in zip(rows, [1024, 32 * 1024, 1024 * 1024], strict=True):
        res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=size)
        busbw.append(res.busbw / 1e9)
        expected = NCCL_ROW % (size, size // 4, "float", "sum", "-1") + NCCL_BODY % (
            fixed(res.time * 1e6, 7), fixed(res.algbw / 1e9, 6), fixed(res.busbw / 1e9, 6))
        assert line == expected
    assert lines[-2] == "# Avg bus bandwidth    : %g " % (sum(busbw) / 3)
    assert lines[-1] == "#"


@pytest.mark.parametrize("value, width, text", [
    (1572.864, 7, "1572.86"), (12646.3, 7, "12646.3"), (126460.3, 7, " 126460"),
    (180.71, 6, "180.71"),
    (1234.5, 6, "1234.5"), (123456.7, 6, "123457"), (1234567.0, 6, " 1e+06"),
    (0.004, 6, "  0.00"), (12345678.0, 7, "1.2e+07"), (135.8, 7, " 135.80")])
def test_number_format_is_getfloatstr(value, width, text):
    assert fixed(value, width) == text


@pytest.mark.parametrize("collective, algorithm, extra, size, nbytes, count, kwargs, columns", [
    ("all_gather", "ring", [], 8192, 2048, 512, {}, ("none", -1)),
    ("gather", "binomial", ["--root", "1"], 8192, 2048, 512, {"root": 1}, ("none", 1)),
    ("reduce_scatter", "ring", ["--op", "max"], 8200, 8192, 512, {"op": "max"}, ("max", -1)),
    ("all_to_all", "pairwise", [], 4100, 4096, 256, {}, ("none", -1)),
    ("scatter", "binomial", ["--root", "3"], 4096, 4096, 256, {"root": 3}, ("none", 3)),
    ("broadcast", "pipeline", ["--root", "2", "--param", "chunks=3"], 4096, 4096, 1024,
     {"root": 2, "chunks": 3}, ("none", 2)),
    ("reduce", "binomial", ["--op", "prod", "--root", "1"], 4096, 4096, 1024,
     {"op": "product", "root": 1}, ("prod", 1)),
    ("all_reduce", "tree", ["--op", "min"], 4099, 4096, 1024, {"op": "min"}, ("min", -1)),
])
def test_columns_follow_nccl_tests_for_every_collective(capsys, collective, algorithm, extra,
                                                          size, nbytes, count, kwargs,
                                                          columns):
    """size = the larger of send and receive buffers, count = nccl-tests' count argument
    (per rank, or per block where a buffer is cut in p blocks), whole elements only."""
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--collective", collective,
                         "--algorithm", algorithm, "--size", str(size), "--json", *extra)
    record = json.loads(out)
    res = sc.simulate(sc.topology.switch(4), collective, algorithm=algorithm, nbytes=nbytes,
                      **kwargs)
    assert status == 0
    assert (record["nbytes"], record["count"]) == (nbytes, count)
    assert record["size"] == (4 * nbytes if collective in ("all_gather", "gather") else nbytes)
    # The table's root column is nccl-tests' (-1 without a root); JSON says null there,
    # as a sweep's records do.
    redop, root = columns
    assert (record["redop"], record["root"]) == (redop, None if root == -1 else root)
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--collective", collective,
                         "--algorithm", algorithm, "--size", str(size), "--csv", *extra)
    row = next(csv.DictReader(io.StringIO(out)))
    assert (row["redop"], int(row["root"])) == columns
    assert record["time"] == res.time and record["busbw_GBps"] == res.busbw / 1e9
    assert record["algbw_GBps"] == record["size"] / res.time / 1e9
    assert record["params"] == {k: v for k, v in kwargs.items() if k == "chunks"}


@pytest.mark.parametrize("collective, algorithm", [
    ("all_reduce", "ring"), ("reduce", "ring"), ("broadcast", "binomial"),
    ("gather", "binomial"), ("scatter", "binomial"), ("all_to_all", "direct"),
    ("barrier", "dissemination")])
def test_without_algorithm_each_collective_runs_its_default(capsys, tmp_path, collective,
                                                            algorithm):
    # the ring where the collective has one, else the one the help names
    size = [] if collective == "barrier" else ["--size", "4096"]
    status, out, err = cli(capsys, "run", "--topology", "switch:4", "--collective",
                           collective, *size, "--json")
    assert status == 0 and not err
    record = json.loads(out)
    assert record["algorithm"] == algorithm
    assert record["time"] == sc.simulate(sc.topology.switch(4), collective,
                                         algorithm=algorithm, nbytes=record["nbytes"]).time
    trace = tmp_path / "run.json"
    status, out, err = cli(capsys, "trace", "--topology", "switch:4", "--collective",
                           collective, *size, "--output", str(trace), "--json")
    assert status == 0 and json.loads(out)["algorithm"] == algorithm


def test_the_help_names_each_default_algorithm(capsys):
    assert main(["run", "--help"]) == 0
    assert ("default: ring; binomial for broadcast, gather and scatter; direct for "
            "all_to_all; dissemination for barrier") in " ".join(capsys.readouterr().out.split())


def test_dtype_and_op_columns(capsys):
    status, out, _ = cli(capsys, "run", "--topology", "ring:3", "--size", "4K", "-d", "double",
                         "--op", "avg", "--csv")
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert (row["type"], row["redop"], row["count"], row["size"]) == ("double", "avg", "512",
                                                                      "4096")
    assert row["spec"] == "ring:n=3" and row["wrong"] == ""
    res = sc.simulate(sc.topology.ring(3), "all_reduce", algorithm="ring", nbytes=4096,
                      dtype="float64", op="avg")
    assert float(row["time_us"]) == res.time * 1e6


def test_a_checked_barrier_reports_no_wrong_element_as_python_does(capsys):
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--collective", "barrier",
                         "-c", "--json")
    record = json.loads(out)
    assert status == 0 and (record["correct"], record["wrong"]) == (True, 0)


def test_csv_leaves_an_infinite_bandwidth_empty_as_the_sweep_csv_does(capsys):
    # One rank moves its bytes in no time: JSON writes null, both CSVs an empty cell.
    status, out, _ = cli(capsys, "run", "--topology", "switch:1", "--collective",
                         "broadcast", "--size", "1K", "--csv")
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert (row["time_us"], row["algbw_GBps"], row["busbw_GBps"]) == ("0.0", "", "")
    status, out, _ = cli(capsys, "run", "--topology", "switch:1", "--collective",
                         "broadcast", "--size", "1K", "--json")
    assert (json.loads(out)["algbw_GBps"], json.loads(out)["busbw_GBps"]) == (None, None)


def test_check_mode_counts_no_wrong_elements(capsys):
    status, out, _ = cli(capsys, "run", "-c", "--topology", "ring:5", "-b", "1K", "-e", "16K",
                         "-f", "4", "--collective", "all_gather", "-d", "int32")
    assert status == 0
    rows = table_rows(out)
    # 5 blocks of whole 16 bytes (4 int32), as nccl-tests cuts them since 2.13.12:
    # 1K is 256 int32, 51 a rank, 48 kept: 5 x 48 x 4 = 960; 4K 204; 16K 819 -> 816
    assert [r[0] for r in rows] == ["960", "4080", "16320"]
    assert [r[-1] for r in rows] == ["0", "0", "0"]
    assert "# Out of bounds values : 0 OK" in out


def test_check_mode_counts_wrong_elements(capsys, monkeypatch):
    ring = registry.get_algorithm("all_reduce", "ring")

    def broken(comm, x, *, op=sc.ReduceOp.SUM):
        out = yield from ring.program(comm, x, op=op)
        if comm.rank == 0 and isinstance(out, np.ndarray):
            out = out.copy()
            out[:3] += 1000
        return out

    monkeypatch.setitem(registry._REGISTRY, ("all_reduce", "broken"),
                        registry.AlgorithmSpec("all_reduce", "broken", broken, NO_FORMULA))
    status, out, _ = cli(capsys, "run", "-c", "1", "--topology", "switch:4", "--algorithm",
                         "broken", "-b", "64", "-e", "128", "-f", "2")
    assert status == 1
    assert [r[-1] for r in table_rows(out)] == ["3", "3"]
    assert "# Out of bounds values : 2 FAILED" in out
    status, out, _ = cli(capsys, "run", "-c", "0", "--topology", "switch:4", "--algorithm",
                         "broken", "--size", "64")
    assert status == 0 and table_rows(out)[0][-1] == "N/A"


def test_params_and_network_reach_simulate(capsys):
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--size", "64K",
                         "--param", "chunks=4", "--network", "analytical", "--json")
    record = json.loads(out)
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=65536,
                      chunks=4, network="analytical")
    assert record["params"] == {"chunks": 4} and record["network"] == "analytical"
    assert record["time"] == res.time and record["messages"] == res.messages == 2 * 3 * 4 * 4


@pytest.mark.parametrize(("argv", "says"), [
    (["--param", "nbytes=5"], "--param nbytes= is not an algorithm parameter but an "
                              "argument of the run; use --size"),
    (["-c", "--param", "check=false"], "--param check= is not an algorithm parameter"),
    (["--param", "algorithm=naive"], "use --algorithm"),
    (["--param", "faults=none"], "use simcoll.simulate(...) from Python"),
    (["--param", "chunks=2", "--param", "chunks=2"], "--param chunks= is given twice"),
])
def test_param_refuses_the_runs_own_arguments(capsys, argv, says):
    """simulate()'s own arguments went through --param: tracebacks, a check=false run
    reported as FAILED with exit 1, faults= and data= taken without a word."""
    status, _, err = cli(capsys, "run", "--topology", "switch:4", "--size", "64K", *argv)
    assert status == 2 and says in err


@pytest.mark.parametrize(("param", "says"), [
    ("nbytes=5", "--param nbytes= is not an algorithm parameter but an argument of the "
                 "run; use --sizes\n"),
    ("algorithm=naive", "use --algorithms\n"),
    ("network=flow", "use --network\n"),
])
def test_sweep_names_its_own_options_for_the_runs_arguments(capsys, param, says):
    """simcoll sweep pointed at run's --size or -b, -e, -f, which sweep does not take."""
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2",
                         "--sizes", "1K", "--param", param)
    assert status == 2 and err.endswith(says)


def test_sweep_says_it_does_not_read_nccls_variables(capsys, monkeypatch):
    """run and trace apply NCCL_ALGO / NCCL_PROTO; a sweep ran the tuner's own choice
    (LL where the variables asked for Simple) without a word; sweeps of other algorithms
    say nothing of them."""
    for name in [n for n in os.environ if n.startswith("NCCL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("NCCL_PROTO", "Simple")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "1")   # nccl-tests', not one of nccl's choices
    status, out, err = cli(capsys, "sweep", "--algorithms", "nccl", "--ranks", "2",
                           "--sizes", "1K", "--json")
    assert status == 0 and json.loads(out)["chosen"]["proto"] == "LL"
    assert err == ("simcoll sweep: note: NCCL_ALGO, NCCL_PROTO in the environment: not "
                   "read by a sweep (give nccl's choices with --param, such as --param "
                   "proto=Simple)\n")
    status, out, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2",
                           "--sizes", "1K", "--json")
    assert status == 0 and err == ""


def test_nccls_graphs_follow_the_table_as_its_log_prints_them(capsys):
    """With algorithm=nccl the lines after the table give the graphs NCCL's search finds,
    in its log's terms. Two DGX H100 (a 400 Gb/s NIC per GPU, 48 GB/s to NCCL): NCCL's
    logs print the ring graph "nChannels 8, bw 48.000000/48.000000" and "16 coll
    channels"; the tree keeps 48 (twice the ring's speed is beyond its speed array); the
    NVLS graph has a head per NIC, 8 at 40 GB/s inside a node (9 x 40 within 370.8) and
    48 to the network, and Hopper runs NVLS on 16 channels. Ring-only machines and a
    single GPU print no NVLS line, and other algorithms no graphs."""
    status, out, _ = cli(capsys, "run", "--topology", "dgx_h100:nodes=2", "--algorithm",
                         "nccl", "--size", "8")
    assert status == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# NCCL's search here"))
    assert [line.split(None, 1)[1] for line in lines[start + 1:start + 4]] == [
        "ring    nChannels 8, bw 48.0/48.0; 16 coll channels",
        "tree    nChannels 8, bw 48.0/48.0",
        "nvls    nChannels 8, bw 40.0/48.0; 16 nvls channels"]
    assert lines[start + 4] == "#"
    # pcie_node(8): 2 graph channels at 12 GB/s, 4 run (a public log of 8 RTX 5090
    # with peer to peer prints 4), no NVSwitch.
    status, out, _ = cli(capsys, "run", "--topology", "pcie_node:8", "--algorithm", "nccl",
                         "--size", "8")
    graphs = out.split("# NCCL's search here")[1].splitlines()[1:]
    assert graphs[:3] == ["#   ring    nChannels 2, bw 12.0/12.0; 4 coll channels",
                          "#   tree    nChannels 2, bw 12.0/12.0", "#"]
    for argv in (("--topology", "switch:1", "--algorithm", "nccl"), ("--topology", "switch:4")):
        status, out, _ = cli(capsys, "run", *argv, "--size", "8")
        assert status == 0 and "NCCL's search" not in out


def test_collnet_graphs_as_nccls_search_finds_them():
    """DGX A100 nodes on a SHARP fabric: CollNet Direct has a head per NIC (8), at 24
    GB/s to the network (HDR) and raised to 48 inside a node (twice 24, which 8 heads'
    NVLink carries: 48 x (1 + 7/7) = 96 of 240); Chain keeps the ring graph's 8
    channels, raised like the tree from 24 to 30 (8 x 48 x 7 hops would exceed 8 x 240;
    8 x 30 x 7 does not)."""
    lines = graph_lines(sc.topology.dgx_a100(2, sharp=True))
    assert lines[2:] == ["collnet direct nChannels 8, bw 48.0/24.0 (with collnet=1)",
                         "collnet chain nChannels 8, bw 30.0/24.0 (with collnet=1)"]
    assert lines[1] == "tree    nChannels 8, bw 30.0/24.0"


def test_the_tree_graph_prints_its_raised_speed_on_any_node_count():
    """search.cc raises the tree graph's bwIntra from 24 to 30 whatever the node count
    (its "increase bwIntra for trees" step does not read it); only the tuner reads the
    raised speed on two nodes alone (tuning.cc), so the graph line said 24.0/24.0 from
    4 nodes on, where NCCL's log says 30.0/24.0."""
    for nodes in (2, 4, 8):
        assert graph_lines(sc.topology.dgx_a100(nodes))[1] == \
            "tree    nChannels 8, bw 30.0/24.0"
    assert graph_lines(sc.topology.dgx_a100(1))[1] == "tree    nChannels 12, bw 20.0/20.0"


def test_the_parameters_nccl_chose_follow_the_table(capsys):
    """algorithm=nccl picks algo, proto and channels per size: the lines after the table
    give, for each size, what simulate reports for that size; a parameter the user fixed
    is not listed; the output still reads as an nccl-tests table."""
    argv = ["run", "--topology", "dgx_h100:nodes=2", "--algorithm", "nccl", "-b", "8",
            "-e", "256M", "-f", "1024"]
    status, out, _ = cli(capsys, *argv)
    assert status == 0
    lines = out.splitlines()
    start = lines.index("# parameters the algorithm chose (in --json's params):")
    expected = []
    for size in (8, 8 << 10, 8 << 20):
        params = sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl",
                             nbytes=size).params
        expected.append([str(size), params["algo"], params["proto"], str(params["channels"])])
        assert params["arch"] == "hopper" and params["intra"] == "nvlink"
    assert [line.split()[1:] for line in lines[start + 3:start + 6]] == expected
    # what stayed at its default (tuner, collnet, the run's extra costs) is not listed
    assert lines[start + 1] == "#   at every size: arch=hopper intra=nvlink"
    assert expected[0][1:3] == ["tree", "LL"] and expected[2][2] == "Simple"
    parsed = sc.nccl_tests.parse(out)
    assert [row.size for row in parsed.rows] == [8, 8 << 10, 8 << 20]
    status, out, _ = cli(capsys, *argv, "--param", "proto=simple")
    assert "proto" not in out.split("# parameters")[1] and " Simple " not in out
    status, out, _ = cli(capsys, "run", "--size", "1K")
    assert "# parameters" not in out


def test_the_parameters_nccl_chose_name_the_part_of_each_row(capsys):
    """With -o all each size came once per reduction, with nothing telling which line
    was which op's."""
    argv = ["run", "--topology", "dgx_h100:nodes=2", "--algorithm", "nccl", "-b", "1M",
            "-e", "16M", "-f", "16", "-o", "all"]
    status, out, _ = cli(capsys, *argv)
    assert status == 0
    lines = out.splitlines()
    start = lines.index("# parameters the algorithm chose (in --json's params):")
    assert lines[start + 2].split()[1:] == ["size", "(B)", "redop", "algo", "proto"]
    got = [line.split()[1:] for line in lines[start + 3:start + 13]]
    ops = ("sum", "prod", "max", "min", "avg")
    want = []
    for op in ops:
        for size in (1 << 20, 16 << 20):
            params = sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl",
                                 nbytes=size, op=op).params
            want.append([str(size), op, params["algo"], params["proto"]])
    assert got == want


def test_a_parameter_in_seconds_takes_a_unit(capsys):
    # 20us is 2e-05 seconds: the JSON of the run says so, and its time is the plain run's
    # plus 20 us (NCCL's launch plus the overhead, before the same steps).
    base = ["run", "--topology", "dgx_a100:1", "--algorithm", "nccl", "--size", "8",
            "--json"]
    runs = []
    for extra in ([], ["--param", "launch_overhead=20us"], ["--param", "launch_overhead=2e-5"]):
        status, out, _ = cli(capsys, *base, *extra)
        assert status == 0
        runs.append(json.loads(out.splitlines()[0]))
    assert runs[1]["params"]["launch_overhead"] == runs[2]["params"]["launch_overhead"] == 2e-5
    assert runs[1]["time"] - runs[0]["time"] == pytest.approx(20e-6, rel=1e-9)
    status, _, err = cli(capsys, *base, "--param", "launch_overhead=20GB/s")
    assert status == 2 and "launch_overhead='20GB/s' is not accepted" in err


def test_topology_files_and_astra_configs_run(capsys, tmp_path):
    path = tmp_path / "m.yaml"
    sc.topology.save(sc.topology.cluster(2, 2), path)
    _, out, _ = cli(capsys, "run", "--topology", str(path), "--size", "1M", "--json")
    res = sc.simulate(sc.topology.cluster(2, 2), "all_reduce", algorithm="ring", nbytes=2**20)
    assert json.loads(out)["time"] == res.time and json.loads(out)["spec"] == str(path)
    astra = tmp_path / "net.yml"
    astra.write_text("topology: [Switch]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [0]\n")
    _, out, _ = cli(capsys, "run", "--topology", str(astra), "--size", "1M", "--json")
    assert json.loads(out)["time"] == pytest.approx(2 * 3 / 4 * 2**20 / 2**30, rel=1e-12)


@pytest.mark.parametrize("text, value", [("8", 8), ("8G", 8 * 2**30), ("8g", 8 * 2**30),
                                         ("1.5K", 1536), ("1M", 2**20), ("64KiB", 65536),
                                         ("2 GiB", 2 * 2**30), ("0", 0), ("1T", 2**40)])
def test_sizes_are_read_as_nccl_tests_reads_them(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text, word", [("8GB", "ambiguous"), ("1.3K", "not a whole"),
                                        ("1mib", "a lowercase b is a bit.*write 1MiB"),
                                        ("8b", "a lowercase b is a bit.*write 8B"),
                                        # README: "refuse a lowercase b (8Gb, 1mib)"
                                        ("8Gb", "a lowercase b is a bit.*write 8GiB"),
                                        ("8gb", "a lowercase b is a bit.*write 8GiB"),
                                        ("1kb", "a lowercase b is a bit.*write 1KiB"),
                                        # ASCII digits only: not Arabic-Indic 3 or 0
                                        ("\u0663", "cannot read size"),
                                        ("1\u0660K", "cannot read size"),
                                        ("99999999999999999999999", "above"), ("-1", "is negative"),
                                        ("abc", "cannot"), ("1 parsec", "cannot")])
def test_bad_sizes(text, word):
    with pytest.raises(Exception, match=word):
        parse_bytes(text)


def test_size_loop():
    assert sizes(8, 8 * 2**30, 2**20, 2) == [2**k for k in range(3, 34)]
    assert sizes(0, 3 * 2**20, 2**20, 1) == [0, 2**20, 2 * 2**20, 3 * 2**20]
    assert sizes(5, 5, 0, 1) == [5]
    assert sizes(3, 100, 1, 10) == [3, 30]


BAD = [
    (["run", "--size", "99999999999999999999999"], "above the largest"),
    (["run", "--size", "3x"], "cannot read size '3x'"),
    # a negative size with a unit was taken for an option: "expected one argument"
    (["run", "-b", "-1K"], "argument -b/--minbytes: size '-1K' is negative; sizes are >= 0"),
    (["run", "--size", "-1M"], "argument --size: size '-1M' is negative"),
    (["demo", "--size", "-16M"], "argument --size: size '-16M' is negative"),
    (["run", "--size", "-0x"], "cannot read size '-0x'"),
    (["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "-1M"], "'-1M'"),
    (["run", "--bogus"], "simcoll run: error: unrecognized arguments: --bogus (see 'simcoll "
                         "run --help')"),
    (["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K", "-x", "y"],
     "simcoll sweep: error: unrecognized arguments: -x y (see 'simcoll sweep --help')"),
    (["--bogus", "run"], "simcoll: error: unrecognized arguments: --bogus (see 'simcoll "
                         "--help')"),
    (["run", "--topology", "swich:8"], "did you mean 'switch'"),
    (["run", "--topology", "switch:8,bandwith=1GB/s"], "no parameter 'bandwith'"),
    (["run", "--algorithm", "rnig"], "known algorithms"),
    (["run", "--collective", "all_gathr"], "known collectives"),
    (["run", "--param", "chunks"], "is not NAME=VALUE"),
    (["run", "--param", "chunkz=4"], "does not take parameter(s) ['chunkz']"),
    (["run", "--op", "median"], "--op 'median' is not accepted (did you mean avg?); use sum, "
                                "prod, min, max, avg, mulsum or all"),
    (["run", "--op", "mean"], "--op 'mean' is not accepted (did you mean avg?)"),
    (["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K", "--op", "prd"],
     "--op 'prd' is not accepted (did you mean prod?); use sum, prod, min, max, avg or mulsum"),
    (["run", "--param", "chunks=4_0"], "chunks='4_0' is not accepted"),   # not 40
    # 10 here and 8 in NCCL_MAX_NCHANNELS=010 or -r 010 (strtol): refused, not guessed
    (["run", "--param", "chunks=010"], "--param 'chunks=010': '010' has a leading zero, "
                                       "which C's strtol"),
    (["run", "--param", "launch_overhead=-007"], "'-007' has a leading zero"),
    (["run", "-b", "8", "-e", "4"], "-b 8 is larger than -e 4"),
    (["run", "-b", "8", "-e", "8G", "-i", "1"], "at most 10000"),
    (["run", "-b", "0", "-e", "8", "-f", "2"], "never grow"),
    (["run", "-f", "-2"], "'-2' is not a whole number >= 0"),
    (["run", "--size", "1K", "-b", "8"], "--size or -b/-e"),
    (["run", "--dtype", "float42"], "unknown dtype 'float42'"),
    # a short name numpy does not know gets the hint the Python API gives; a numpy name
    # that is not reduced here is not called unknown
    (["run", "--dtype", "bf16"], "unknown dtype 'bf16' (did you mean 'bfloat16'?); use"),
    (["run", "--dtype", "bool"], "'bool' (bool) is not an integer or floating dtype; use an"),
    (["run", "--dtype", "U4"], "'U4' (str128) is not an integer or floating dtype"),
    (["run", "--network", "flo"], "unknown network model"),
    # named as the option (it said simulate's "root=9 is not accepted")
    (["run", "--collective", "broadcast", "--algorithm", "binomial", "--root", "9"],
     "-r/--root 9 is not a rank of switch(8); give 0 to 7, or all"),
    (["trace", "--output", "t.json", "--collective", "broadcast", "-r", "-2"],
     "-r/--root -2 is not a rank of switch(8); give 0 to 7"),
    (["run", "--topology", "nope.yaml"], "cannot read topology file nope.yaml"),
    (["run", "-c", "--size", "1T", "--topology", "switch:64"],
     "lower --size or run without -c"),
    (["run", "-c", "-b", "1T", "-e", "1T", "--topology", "switch:64"],
     "lower -e or run without -c"),
    (["trace", "-c", "--size", "64T", "--topology", "switch:64", "--output", "t.json"],
     "lower --size or run without -c"),
    (["run", "-f", "\u0663"], "'\u0663' is not a whole number >= 0"),
    (["sweep", "--algorithms", "ring", "--ranks", "\u0663", "--sizes", "1K"],
     "is not a list of whole numbers (digits 0-9)"),
    # The spec as typed, as 'simcoll run' names it, not with {p} put in front.
    (["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K", "--topology",
      "switch:,bandwidth=50GB/s"],
     "topology spec 'switch:,bandwidth=50GB/s': an argument between two commas is empty"),
    (["demo", "--size", "3"], "multiple of 4 bytes"),
    ([], "required: COMMAND"),
    (["list", "everything"], "invalid choice"),
    (["trace", "--output", "no/such/dir/t.json"], "folder 'no/such/dir' does not exist"),
    (["trace", "--output", "t.txt"], "ending in .json"),
    (["plot", "missing.jsonl", "--output", "p.png"], "cannot read missing.jsonl"),
    (["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K", "--topology",
      "cluster:2x4"], "write {p} in it"),
    (["sweep", "--algorithms", "ring", "--ranks", "2,x", "--sizes", "1K"], "whole numbers"),
    # "{p}=2 and {p}=2 both build 2 GPUs"; 010 is 10 to Python, 8 to C's strtol
    (["sweep", "--algorithms", "ring", "--ranks", "02,4,2", "--sizes", "1K"],
     "argument --ranks: '02' has a leading zero; write the number without it"),
    (["sweep", "--algorithms", "ring,naive,ring", "--ranks", "2", "--sizes", "1K"],
     "ring given twice"),
    # The 2-rank point ran, failed and was recorded as failed.
    (["sweep", "--collective", "broadcast", "--algorithms", "binomial", "--ranks", "4,2",
      "--sizes", "1K", "--root", "3"],
     "--root 3 is not a rank of the machine of 2 ranks (--ranks 2); give a root below 2"),
    (["sweep", "--collective", "broadcast", "--algorithms", "binomial", "--ranks", "2",
      "--sizes", "1K", "--root", "-5"],
     "--root -5 is not a rank; give a root from 0 to 1"),
    (["list", "algos"], "argument SECTION: invalid choice: 'algos'"),
    # An empty entry was dropped without a word.
    (["sweep", "--algorithms", "ring,,naive", "--ranks", "2", "--sizes", "1K"],
     "'ring,,naive' has an empty entry"),
    (["sweep", "--algorithms", "ring", "--ranks", "2,", "--sizes", "1K"],
     "'2,' has an empty entry"),
    (["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1M,1MiB"],
     "gives a size twice"),
    # named as sweep's keyword: "workers=0 is not accepted"
    (["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K", "--workers", "0"],
     "argument --workers: '0' is not accepted; give a whole number of processes, 1 or more"),
    (["sweep", "--algorithms", "ring", "--ranks", "8", "--sizes", "1K", "--topology",
      TWO_NODES],
     "is one machine of 4 GPUs; give --ranks 4"),
    (["plot", "points.csv", "--output", "p.png"], "not CSV"),
    (["run", "-c", "-1"], "argument -c/--check: '-1' is not a whole number >= 0"),
    # -c N as run takes it (trace refused 2 as "invalid choice")
    (["trace", "-c", "-1", "--output", "t.json"],
     "argument -c/--check: '-1' is not a whole number >= 0"),
    (["run", "--collective", "barrier", "--size", "4K"], "a barrier moves no data; leave out "
                                                        "--size, -b and -e"),
]


@pytest.mark.parametrize("argv, words", BAD, ids=[" ".join(a) or "none" for a, _ in BAD])
def test_bad_arguments_are_one_line_and_status_2(capsys, tmp_path, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    status, out, err = cli(capsys, *argv)
    assert status == 2
    assert out == ""  # refused before any line of output
    assert err.count("\n") == 1 and err.startswith("simcoll") and "Traceback" not in err
    assert words in err


def test_dtype_int_is_ncclint_32_bits_as_compare_reads_it(capsys):
    """-d int ran numpy's int, 64 bits (128 elements of 1 KiB), where compare reads a row
    typed int as NCCL's ncclInt, 32 bits; so the table did not read back."""
    status, out, _ = cli(capsys, "run", "--topology", "switch:2", "--size", "1K", "-d", "int",
                         "--json")
    record = json.loads(out)
    assert status == 0 and (record["type"], record["count"]) == ("int32", 256)


def test_an_output_under_a_file_is_refused_as_such(capsys, tmp_path, monkeypatch):
    """--output afile/t.json where afile is a file said "folder afile does not exist"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    status, out, err = cli(capsys, "trace", "--output", "afile/t.json")
    assert (status, out) == (2, "")
    assert err == "simcoll trace: error: --output afile/t.json: 'afile' is a file, not a folder\n"


def test_a_dtype_in_a_foreign_byte_order_is_refused_for_its_byte_order(capsys):
    """'>f4' is float32, which simcoll takes, in big-endian order: not an unknown dtype."""
    foreign, order = (">f4", "big") if sys.byteorder == "little" else ("<f4", "little")
    status, out, err = cli(capsys, "run", "-d", foreign, "--size", "1K")
    assert status == 2 and out == ""
    assert err == (f"simcoll run: error: --dtype '{foreign}' is float32 in {order}-endian "
                   f"byte order; simcoll computes in this machine's ({sys.byteorder}-endian): "
                   f"write float32\n")
    native = ("<" if sys.byteorder == "little" else ">") + "f4"
    assert cli(capsys, "run", "-d", native, "--size", "1K", "--json")[0] == 0
    status, _, err = cli(capsys, "run", "-d", foreign.replace("f4", "c8"), "--size", "1K")
    # complex: refused whatever its order, as a numpy dtype that is not reduced here
    assert status == 2 and "(complex64) is not an integer or floating dtype" in err


def test_interrupt_is_one_line_and_status_130(capsys, monkeypatch):
    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("simcoll.cli.run.simulate", stop)
    handler = signal.getsignal(signal.SIGINT)
    status, _, err = cli(capsys, "run", "--size", "1K")
    assert status == 130 and err == "simcoll run: interrupted\n"
    # main() in a test or a notebook hands Ctrl-C back to its caller's handler (it was
    # left to the signal's default, which kills the process the next time)
    assert signal.getsignal(signal.SIGINT) is handler


def test_out_of_memory_is_one_line_naming_ranks_and_status_2(capsys):
    """A MemoryError inside a rank came out as 'rank 2 raised MemoryError in ...', the
    exit status of a failed check; data-free, the memory is the ranks' (p^2 messages in
    flight), not the size's."""
    @sc.register("all_reduce", "_test_cli_out_of_memory", cost=NO_FORMULA)
    def hungry(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(1e-6)
        if comm.rank == 2:
            raise MemoryError
        return x

    status, _, err = cli(capsys, "run", "--topology", "switch:4", "--algorithm",
                         "_test_cli_out_of_memory", "--size", "1K")
    assert status == 2
    assert err == ("simcoll run: error: out of memory; use fewer ranks (algorithms that "
                   "send to every rank at once, such as naive and direct, hold p^2 messages "
                   "even data-free) or smaller sizes (or drop -c)\n")


def test_the_demo_out_of_memory_names_its_own_option(capsys, monkeypatch):
    """It suggested fewer ranks and dropping -c, options the demo does not have."""
    monkeypatch.setattr("simcoll.memory.physical_memory", lambda: None)  # nothing to ask
    monkeypatch.setattr("simcoll.cli.demo.np.random.default_rng", _out_of_memory)
    status, _, err = cli(capsys, "demo", "--size", "1M")
    assert (status, err) == (2, "simcoll demo: error: out of memory; use a smaller --size\n")


def _out_of_memory(seed):
    raise MemoryError


def test_the_demo_refuses_what_memory_cannot_hold_before_making_data(capsys, monkeypatch):
    """On a machine of 2 GiB, 160 MiB per rank: 8 ranks' inputs and the outputs of four
    runs hold 8 x 160 MiB x 5 = 6.25 GiB. It made the 1.25 GiB of inputs first, and the
    run's own check then told to pass nbytes=, which the demo does not take."""
    monkeypatch.setattr("simcoll.memory.physical_memory", lambda: 2 * 2**30)
    monkeypatch.setattr("simcoll.cli.demo.np.random.default_rng", _out_of_memory)
    status, _, err = cli(capsys, "demo", "--size", "160M")
    assert (status, err) == (2, "simcoll demo: error: demo size 167772160 bytes per rank "
                                "needs about 6.2 GiB for its inputs and outputs alone, more "
                                "than this machine's 2.0 GiB (8 ranks' inputs and the "
                                "outputs of its 4 runs); use a smaller size\n")


def _machine_of(monkeypatch, nbytes):
    """Make this machine's physical memory ``nbytes`` (as os.sysconf reports it)."""
    real = os.sysconf

    def sysconf(name):
        return {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": nbytes // 4096}.get(name) or real(name)

    monkeypatch.setattr(os, "sysconf", sysconf)


def test_check_refuses_what_the_library_refuses_and_runs_what_fits(capsys, monkeypatch):
    """-c and simulate(data=) share one rule: a run's inputs and outputs. A gather of
    32 MiB on 32 ranks holds 32 inputs of 1 MiB and one output of 32 MiB, 64 MiB: it
    fits in 0.5 GiB (refused before, as 4 p times the largest buffer, 4 GiB). Its
    all_gather holds 32 outputs of 32 MiB, 1.03 GiB: refused."""
    _machine_of(monkeypatch, 2**29)
    status, out, err = cli(capsys, "run", "--topology", "switch:32", "--collective",
                           "gather", "-c", "--size", "32M")
    assert status == 0 and "# Out of bounds values : 0 OK" in out, err
    status, _, err = cli(capsys, "run", "--topology", "switch:32", "--collective",
                         "all_gather", "-c", "--size", "32M")
    assert status == 2
    assert err == ("simcoll run: error: -c moves real arrays: all_gather on 32 ranks needs "
                   "about 1.0 GiB for its inputs and outputs alone, more than this "
                   "machine's 0.5 GiB; lower --size or run without -c (data-free)\n")
    with pytest.raises(sc.InvalidInputError, match="needs about 1.0 GiB for its inputs and "
                                                   "outputs alone, more than this machine's "
                                                   "0.5 GiB"):
        sc.simulate(sc.topology.switch(32), "all_gather", algorithm="ring",
                    data=[np.ones(2**18, np.float32)] * 32)


def test_a_sweep_whose_final_write_fails_says_where_its_points_are(capsys, monkeypatch,
                                                                   tmp_path):
    """A full disk at the end: the error said nothing of the points kept in
    PATH.partial.jsonl, which the interrupted path names."""
    out = tmp_path / "points.json"

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4",
                         "--sizes", "1K", "--output", str(out))
    partial = tmp_path / "points.json.partial.jsonl"
    assert status == 1  # a failed write, not bad arguments
    assert err == (f"the finished points are kept in {partial} (a sweep to {out} resumes "
                   f"from it)\nsimcoll sweep: error: [Errno 28] cannot write {out}: No space "
                   f"left on device\n")
    assert [r.nranks for r in sc.load_results(partial)] == [2, 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == [partial.name]


def test_help_exits_cleanly(capsys):
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    assert "powers of 1024" in text and "sc.parse_size" in text and "-b" in text


def test_demo_sizes_below_10_kB_are_readable(capsys):
    status, out, _ = cli(capsys, "demo", "--size", "4K")
    assert status == 0
    table, notes = out.split("\n\n")
    rows = {line.split()[0] + line.split()[1]: line for line in table.splitlines()[2:]}
    assert "7.00 KiB" in rows["ringswitch(8)"]  # 2 (p-1)/p n = 7168 bytes
    assert "28.00 KiB" in rows["naiveswitch(8)"]  # (p-1) n = 28672 bytes
    # The host serves 8 GPUs: it receives 8 n and sends 8 n = 32768 bytes each way.
    assert "server host of parameter_server on switch(8, servers=1) sent 32.00 KiB and " \
           "received 32.00 KiB" in notes
    assert "0.00" not in out.replace("0.00 KiB", "")
    assert out.count("True") == 4
    status, out, _ = cli(capsys, "demo", "--size", "64K", "--json")
    records = json.loads(out)
    assert [r["algorithm"] for r in records] == ["parameter_server", "parameter_server",
                                                 "naive", "ring"]
    assert all(r["nbytes"] == 65536 and r["correct"] for r in records)


def test_list_shows_algorithms_formulas_and_builders(capsys):
    status, out, _ = cli(capsys, "list")
    assert status == 0
    collectives, algorithms, topologies = out.split("\n\n")
    assert [line.split()[0] for line in collectives.splitlines()[1:]] == list(sc.COLLECTIVES)
    groups: dict[str, list[str]] = {}
    for line in algorithms.splitlines()[1:]:
        if not line.startswith("    "):
            groups[line.strip()] = []
        elif not line.startswith("        "):
            groups[list(groups)[-1]].append(line.split()[0])
    expected: dict[str, list[str]] = {}
    for collective, name in sc.list_algorithms():
        expected.setdefault(collective, []).append(name)
    assert groups == expected
    ring = algorithms.split("\n  all_reduce\n")[1].split("\n    ring ")[1].split("\n    ")
    assert ring[0].strip() == "chunks=1"
    formula = " ".join(" ".join(ring[1:]).split())
    assert formula.startswith("K = 1: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma")
    flat = " ".join(topologies.split())
    for name, fn in sc.topology.catalog.builders().items():
        entry = flat.split(f" {name}: ")[1]
        for param in inspect.signature(fn).parameters:
            assert param in entry
    assert "cluster: nodes, gpus_per_node, intra_bandwidth=300GB/s, intra_latency=1us" in flat
    assert "a default of none is worked out from the other arguments" in flat
    assert max(len(line) for line in topologies.splitlines()) <= 100
    _, only, _ = cli(capsys, "list", "collectives")
    assert only == collectives + "\n"


def test_list_shows_a_registered_algorithms_parameters_and_formula(capsys, monkeypatch):
    def flat(comm, x, *, root, fanout):
        if comm.rank == root:
            for peer in range(comm.size):
                if peer != root:
                    comm.send(x, dst=peer)
            return x
        return (yield comm.recv(src=root))

    def flat_time(p, nbytes, alpha, beta, gamma):
        """alpha + (p-1) n beta: the root sends to everyone at once.

        A second paragraph, which the listing shows too."""
        return alpha + (p - 1) * nbytes * beta

    spec = registry.AlgorithmSpec("broadcast", "flat_cli", flat,
                                  CostModel(time=flat_time, traffic=flat_time),
                                  params={"fanout": Int(2, minimum=1)})
    monkeypatch.setitem(registry._REGISTRY, ("broadcast", "flat_cli"), spec)
    _, out, _ = cli(capsys, "list", "algorithms")
    entry = out.split("\n    flat_cli")[1].split("\n    ")
    assert entry[0].strip() == "fanout=2"
    assert entry[1].strip() == "alpha + (p-1) n beta: the root sends to everyone at once."
    assert entry[2].strip() == "A second paragraph, which the listing shows too."


def test_sweep_writes_every_point(capsys, tmp_path):
    out_csv = tmp_path / "points.csv"
    status, _, err = cli(capsys, "sweep", "--topology", "switch:{p},bandwidth=10GB/s",
                         "--algorithms", "ring,naive", "--ranks", "2,4", "--sizes", "1K,4K",
                         "--output", str(out_csv))
    assert status == 0 and "8 points written" in err
    rows = list(csv.DictReader(out_csv.open()))
    assert [(r["algorithm"], int(r["nranks"]), int(r["nbytes"])) for r in rows] == [
        (a, p, n) for a in ("ring", "naive") for p in (2, 4) for n in (1024, 4096)]
    for r in rows:
        res = sc.simulate(sc.topology.switch(int(r["nranks"]), bandwidth=1e10), "all_reduce",
                          algorithm=r["algorithm"], nbytes=int(r["nbytes"]))
        assert float(r["time"]) == res.time and float(r["busbw"]) == res.busbw
        assert r["spec"] == f"switch:{r['nranks']},bandwidth=10GB/s"
    assert not (tmp_path / "points.csv.partial.jsonl").exists()
    status, out, _ = cli(capsys, "sweep", "--topology", "dgx_a100:nodes={p}", "--algorithms",
                         "ring", "--ranks", "1,2", "--sizes", "1M", "--workers", "2", "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["nranks"] for r in records] == [8, 16]
    assert [r["spec"] for r in records] == ["dgx_a100:nodes=1", "dgx_a100:nodes=2"]


def _interrupt_third_point(monkeypatch):
    """Ctrl-C while the third point of an in-process sweep runs."""
    calls = []

    def simulate(*args, **kwargs):
        calls.append(kwargs["nbytes"])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return sc.simulate(*args, **kwargs)

    monkeypatch.setattr(sys.modules["simcoll.sweep.workers"], "simulate", simulate)


def test_a_worker_that_died_is_one_line_naming_what_it_ran(capsys, monkeypatch):
    """A worker killed mid-sweep printed BrokenProcessPool's traceback."""
    from concurrent.futures.process import BrokenProcessPool

    def dies(*args, **kwargs):
        exc = BrokenProcessPool("A process in the process pool was terminated abruptly")
        exc.add_note("a worker ended while running one of: all_reduce ring p=2")
        raise exc

    monkeypatch.setattr(sys.modules["simcoll.sweep.workers"], "simulate", dies)
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2",
                         "--sizes", "1K")
    assert (status, err) == (1, "simcoll sweep: error: a worker ended while running one "
                                "of: all_reduce ring p=2; at the sweep's point all_reduce "
                                "ring p=2 nbytes=1024; use fewer --workers or smaller "
                                "runs\n")


def test_a_sweep_to_standard_output_prints_each_point_as_it_finishes(capsys, monkeypatch):
    """Without --output nothing else keeps the finished points: Ctrl-C at the third
    point leaves the lines of the first two (JSON lines, or CSV rows under their
    header)."""
    argv = ["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K,2K,4K"]
    _interrupt_third_point(monkeypatch)
    status, out, err = cli(capsys, *argv, "--json")
    assert status == 130 and err == "simcoll sweep: interrupted\n"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(r["nbytes"], r["spec"]) for r in lines] == [(1024, "switch:2"), (2048, "switch:2")]
    for record in lines:
        assert record["time"] == sc.simulate(sc.topology.switch(2), "all_reduce",
                                             algorithm="ring", nbytes=record["nbytes"]).time
    _interrupt_third_point(monkeypatch)
    status, out, _ = cli(capsys, *argv)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert status == 130 and [int(r["nbytes"]) for r in rows] == [1024, 2048]
    assert float(rows[1]["time"]) == lines[1]["time"] and rows[1]["spec"] == "switch:2"


def test_failed_points_printed_as_csv_survive_ctrl_c(capsys, monkeypatch):
    """Failed points wait for a point that ran to give the CSV's columns; Ctrl-C before
    one did lost them (the JSON lines kept them)."""
    calls = []

    def simulate(*args, **kwargs):
        calls.append(kwargs["nbytes"])
        if len(calls) == 3:
            raise KeyboardInterrupt
        raise sc.InvalidInputError(f"point {len(calls)} cannot run")

    monkeypatch.setattr(sys.modules["simcoll.sweep.workers"], "simulate", simulate)
    status, out, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2",
                           "--sizes", "1K,2K,4K")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert status == 130 and err == "simcoll sweep: interrupted\n"
    assert [(int(r["nbytes"]), r["error"]) for r in rows] == [
        (1024, "InvalidInputError: point 1 cannot run"),
        (2048, "InvalidInputError: point 2 cannot run")]


def test_streamed_csv_takes_its_columns_from_the_first_point_that_ran(capsys, tmp_path,
                                                                      monkeypatch):
    """A failed first point waits for the columns of the first that ran: the rows on
    standard output are those of --output x.csv."""
    calls = []

    def fail_first(*args, **kwargs):
        calls.append(kwargs["nbytes"])
        if kwargs["nbytes"] == 1024:
            raise sc.DeadlockError("rank 1 waits for recv from 0 (tag 0)", {1: "recv"})
        return sc.simulate(*args, **kwargs)

    monkeypatch.setattr(sys.modules["simcoll.sweep.workers"], "simulate", fail_first)
    argv = ["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K,2K"]
    status, out, err = cli(capsys, *argv)
    assert status == 1 and err == "1 of 2 points failed (their records say why)\n"
    path = tmp_path / "points.csv"
    assert cli(capsys, *argv, "--output", str(path))[0] == 1
    assert out == path.read_text()
    header, first = next(csv.reader(io.StringIO(out))), list(csv.DictReader(io.StringIO(out)))[0]
    assert {"time", "busbw", "error", "spec"} <= set(header)
    assert first["error"].startswith("DeadlockError: rank 1 waits") and first["time"] == ""


def test_a_sweep_keeps_the_finished_points_of_another_grid(capsys, tmp_path):
    out = tmp_path / "out.csv"
    partial = tmp_path / "out.csv.partial.jsonl"
    # What an interrupted sweep of another grid left: one finished point on 4 GPUs.
    sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[4], sizes=[1024],
             save=partial)
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2", "--sizes",
                         "1K", "--output", str(out))
    assert status == 0 and err == (
        f"simcoll sweep: {partial} holds 1 finished point, 0 of this grid (not run again)\n"
        f"1 point written to {out}\n"
        f"{partial} also holds 1 finished point of another grid; it is kept "
        f"(sc.load_results reads it)\n")
    assert [r.nranks for r in sc.load_results(partial)] == [4, 2]
    # A grid that takes every point it holds removes it.
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4", "--sizes",
                         "1K", "--output", str(out))
    assert status == 0 and not partial.exists()
    assert err == (f"simcoll sweep: {partial} holds 2 finished points, 2 of this grid (not "
                   f"run again)\n2 points written to {out}\n")
    assert [int(r["nranks"]) for r in csv.DictReader(out.open())] == [2, 4]


def test_a_directory_where_the_partial_file_goes_is_named_so(capsys, tmp_path):
    out = tmp_path / "out.jsonl"
    (tmp_path / "out.jsonl.partial.jsonl").mkdir()
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2", "--sizes",
                         "1K", "--output", str(out))
    assert status == 2 and err == (f"simcoll sweep: error: {out}.partial.jsonl, where a sweep "
                                   f"to {out} keeps its finished points, is a directory; "
                                   f"move it away or give another --output\n")


def test_a_partial_file_that_is_not_a_sweeps_is_named_before_any_point(capsys, tmp_path):
    out = tmp_path / "out.csv"
    (tmp_path / "out.csv.partial.jsonl").write_text("garbage\n")
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2", "--sizes",
                         "1K", "--output", str(out))
    assert status == 2 and "out.csv.partial.jsonl, where a sweep to" in err
    assert "delete it or give another --output" in err
    assert "finished so far" not in err and not out.exists()
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2", "--sizes",
                         "1K", "--output", str(out), "--json")
    assert status == 2 and "--json writes JSON lines to standard output" in err


def test_a_sweep_compares_algorithms_on_the_machine_of_a_file(capsys):
    status, out, _ = cli(capsys, "sweep", "--topology", TWO_NODES, "--algorithms", "ring,naive",
                         "--ranks", "4", "--sizes", "1M", "--json")
    topo = sc.topology.load(TWO_NODES)
    assert status == 0
    for record, algorithm in zip(map(json.loads, out.splitlines()), ("ring", "naive")):
        assert record["time"] == sc.simulate(topo, "all_reduce", algorithm=algorithm,
                                             nbytes=1 << 20).time


def test_plot_says_a_json_file_of_json_lines_should_be_named_jsonl(capsys, tmp_path):
    _, out, _ = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4", "--sizes", "1K",
                    "--json")
    points = tmp_path / "points.json"
    points.write_text(out)
    status, _, err = cli(capsys, "plot", str(points), "--output", str(tmp_path / "p.png"))
    assert status == 2 and "line 2: not valid JSON: Extra data at column 1 (a .json file " \
                           "holds one JSON list; name a file of JSON lines .jsonl)" in err


def test_a_rooted_sweep_records_its_root(capsys, tmp_path):
    out = tmp_path / "roots.csv"
    status, _, _ = cli(capsys, "sweep", "--collective", "broadcast", "--algorithms",
                       "binomial", "--root", "1", "--ranks", "4", "--sizes", "1K",
                       "--output", str(out))
    assert status == 0 and [r["root"] for r in csv.DictReader(out.open())] == ["1"]


def test_a_failing_point_is_recorded_and_the_others_go_on(capsys, tmp_path, monkeypatch):
    calls = []

    def fail_second(*args, **kwargs):
        calls.append(kwargs["nbytes"])
        if len(calls) == 2:
            raise sc.DeadlockError("rank 1 waits for recv from 0 (tag 0)", {1: "recv"})
        return sc.simulate(*args, **kwargs)

    monkeypatch.setattr(sys.modules["simcoll.sweep.workers"], "simulate", fail_second)
    out = tmp_path / "points.json"
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2",
                         "--sizes", "1K,2K,4K", "--output", str(out))
    assert status == 1 and "1 of 3 points failed" in err
    records = json.loads(out.read_text())
    assert [r["nbytes"] for r in records] == [1024, 2048, 4096]
    assert [r["error"] is not None for r in records] == [False, True, False]
    assert records[1]["error"]["type"] == "DeadlockError"
    assert "rank 1 waits for recv" in records[1]["error"]["message"]
    # The records are the sweep's: sc.load_results reads them back.
    back = sc.load_results(out)
    assert [type(r).__name__ for r in back] == ["Result", "FailedPoint", "Result"]
    assert back[2].time == records[2]["time"] and back.records[1]["spec"] == "switch:2"
    assert records[2]["time"] == sc.simulate(sc.topology.switch(2), "all_reduce",
                                             algorithm="ring", nbytes=4096).time
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2",
                         "--sizes", "1K,6", "--output", str(out))
    assert status == 2 and "6 bytes is not a whole number of float32 elements" in err
    assert len(calls) == 3  # the second sweep is refused before any simulation


def test_run_refuses_a_size_too_large_before_printing_any_row(capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(sys.modules["simcoll.cli.run"], "simulate",
                        lambda *a, **k: calls.append(k) or sc.simulate(*a, **k))
    status, out, err = cli(capsys, "run", "--topology", "switch:64", "-b", "1K", "-e", "1024T",
                           "-f", "1024")
    assert status == 2 and out == "" and calls == []
    # In the terms of the option that gave the size: 2 p^2 n < 2^63 on 64 ranks takes a
    # per-rank input n below 2^63 / (2 * 64^2) = 2^50 bytes = 1024T.
    assert err == ("simcoll run: error: size 1125899906842624 bytes on 64 ranks could "
                   "overflow the int64 traffic counters; use -e below 1024T "
                   "(1125899906842624 bytes)\n")
    # all_gather's size is p inputs: on 4096 ranks an input below 2^63 / (2 * 4096^2) =
    # 2^38 bytes, so a size below 4096 * 2^38 = 2^50 bytes.
    status, _, err = cli(capsys, "run", "--topology", "switch:4096", "--collective",
                         "all_gather", "--size", "1024T")
    assert status == 2 and err.endswith("; use --size below 1024T (1125899906842624 bytes)\n")
    status, _, err = cli(capsys, "trace", "--topology", "switch:1024", "--collective",
                         "all_to_all", "--size", "1023T", "--output", "t.json")
    # 2^63 / (2 * 1024^2) = 2^42 bytes = 4T
    assert status == 2 and err == (
        "simcoll trace: error: size 1124800395214848 bytes on 1024 ranks could overflow the "
        "int64 traffic counters; use --size below 4T (4398046511104 bytes)\n")
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,1024",
                         "--sizes", "1K,4T")
    assert status == 2 and err.endswith("on 1024 ranks could overflow the int64 traffic "
                                        "counters; use --sizes below 4T (4398046511104 "
                                        "bytes)\n")
    assert calls == []


def test_plot_draws_a_sweep(capsys, tmp_path):
    points = tmp_path / "points.jsonl"
    cli(capsys, "sweep", "--algorithms", "ring,naive", "--ranks", "2,4,8", "--sizes", "1M",
        "--output", str(points))
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        picture = tmp_path / f"busbw{suffix}"
        status, out, _ = cli(capsys, "plot", str(points), "--output", str(picture))
        assert status == 0 and "6 of 6 records plotted" in out
        assert picture.read_bytes().startswith(magic)
    points.write_text(points.read_text() + "{broken\n")
    status, _, err = cli(capsys, "plot", str(points), "--output", str(tmp_path / "x.png"))
    # The position json gives, read from json.loads('{broken') itself.
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads("{broken")
    assert status == 2 and err.endswith(f"points.jsonl, line 7: not valid JSON: "
                                        f"{caught.value.msg} at column {caught.value.colno}"
                                        f"\n")
    # The axes the command line has, named as it names them (the Python API's by= and
    # split= were offered).
    status, _, err = cli(capsys, "plot", str(points), "--output", str(tmp_path / "x.png"),
                         "--x", "time")
    assert status == 2 and "argument --x: invalid choice: 'time' (choose from 'nranks', " \
        "'nbytes')" in err and "split" not in err


def test_plot_of_run_records_puts_sizes_on_x_by_default(capsys, tmp_path, monkeypatch):
    """simcoll run's records have one rank count: plotted against it (the default x of a
    sweep) they stood in one column of one-point lines. Without --x, records of one
    rank count and several sizes go against size; a sweep's of several rank counts
    against them; --x is kept."""
    import simcoll.cli.plotting as plotting

    asked: list[str] = []
    real = plotting.scaling
    monkeypatch.setattr(plotting, "scaling",
                        lambda records, **kw: asked.append(kw["x"]) or real(records, **kw))
    run = tmp_path / "run.jsonl"
    status, out, _ = cli(capsys, "run", "--topology", "switch:8", "-b", "1K", "-e", "1M",
                         "-f", "32", "--json")
    run.write_text(out)
    sweep = tmp_path / "sweep.jsonl"
    cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4", "--sizes", "1M",
        "--output", str(sweep))
    for path, extra in ((run, []), (sweep, []), (run, ["--x", "nranks"])):
        status, out, _ = cli(capsys, "plot", str(path), "--output", str(tmp_path / "p.png"),
                             *extra)
        assert status == 0
    assert asked == ["nbytes", "nranks", "nranks"]


def test_plot_ignores_a_cut_off_last_line_as_load_results_does(capsys, tmp_path):
    """What a sweep killed while writing leaves: its partial file's last line cut off,
    without its newline. sc.load_results ignores it with a warning; so does plot."""
    points = tmp_path / "points.jsonl"
    cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4,8", "--sizes", "1M",
        "--output", str(points))
    whole = points.read_text()
    cut = tmp_path / "cut.partial.jsonl"
    cut.write_text(whole + whole[:200])
    with pytest.warns(UserWarning, match="ignored a truncated last line"):
        assert len(sc.load_results(cut)) == 3
    status, out, err = cli(capsys, "plot", str(cut), "--output", str(tmp_path / "c.png"))
    assert status == 0 and "3 of 3 records plotted" in out
    assert err == (f"simcoll plot: note: {cut}: ignored a cut-off last line (200 bytes), as "
                   f"a sweep stopped while writing it leaves\n")
    # With its newline the line is whole, and broken: named with json's own position.
    cut.write_text(whole + whole[:200] + "\n")
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads(whole[:200])
    status, _, err = cli(capsys, "plot", str(cut), "--output", str(tmp_path / "c.png"))
    assert caught.value.msg == "Unterminated string starting at"
    assert status == 2 and err == (f"simcoll plot: error: {cut}, line 4: not valid JSON: "
                                   f"Unterminated string starting at column "
                                   f"{caught.value.colno}\n")


def test_plot_counts_the_points_it_draws_and_refuses_two_machines_of_one_name(capsys,
                                                                               tmp_path):
    one = tmp_path / "one.jsonl"
    cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "1,2,4", "--sizes", "1M",
        "--output", str(one))
    status, out, _ = cli(capsys, "plot", str(one), "--output", str(tmp_path / "one.png"))
    # One rank takes no time: its point cannot sit on log axes.
    assert status == 0 and "2 of 3 records plotted" in out and "1 left out" in out
    fast, slow = tmp_path / "fast.jsonl", tmp_path / "slow.jsonl"
    cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4", "--sizes", "1M",
        "--output", str(fast))
    cli(capsys, "sweep", "--topology", "switch:{p},bandwidth=10GB/s", "--algorithms", "ring",
        "--ranks", "2,4", "--sizes", "1M", "--output", str(slow))
    both = tmp_path / "both.jsonl"
    both.write_text(fast.read_text() + slow.read_text())
    # Both machines are called switch(p): their points made one line of the slow values.
    status, _, err = cli(capsys, "plot", str(both), "--output", str(tmp_path / "b.png"))
    assert status == 2 and "ran on different machines of that name (spec='switch:2' and " \
                           "spec='switch:2,bandwidth=10GB/s', 'topology_hash=" in err


def test_trace_writes_chrome_json(capsys, tmp_path):
    path = tmp_path / "trace.json"
    status, out, _ = cli(capsys, "trace", "--topology", "switch:4", "--size", "4K",
                         "--output", str(path))
    assert status == 0 and str(path) in out
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(e["ph"] == "b" for e in events) == 2 * 4 * 3  # ring: 2 (p-1) steps per rank
    status, out, _ = cli(capsys, "trace", "-c", "--collective", "reduce", "--algorithm",
                         "binomial", "--root", "2", "--op", "max", "--topology", "switch:4",
                         "--output", str(path))
    assert status == 0 and "correct" in out


def run_module(*argv, **kwargs):
    return subprocess.run([sys.executable, "-m", "simcoll", *argv], capture_output=True,
                          text=True, timeout=120, **kwargs)


def test_a_sweeps_csv_is_utf8_whatever_the_locale(tmp_path):
    """The CSV was written in the locale's encoding: in a C locale a machine named
    'sw–µ2' failed with UnicodeEncodeError once the whole sweep had run."""
    machine = sc.topology.switch(2)
    machine.name = "sw\u2013\u00b52"
    sc.topology.io.save(machine, tmp_path / "m.json")
    out = tmp_path / "points.csv"
    env = {**os.environ, "PYTHONUTF8": "0", "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0"}
    done = run_module("sweep", "--topology", str(tmp_path / "m.json"), "--algorithms",
                      "ring", "--ranks", "2", "--sizes", "1K", "--output", str(out), env=env)
    assert done.returncode == 0, done.stderr
    (row,) = csv.DictReader(io.StringIO(out.read_bytes().decode("utf-8")))
    assert row["topology"] == "sw\u2013\u00b52"


@pytest.mark.parametrize("alias, name", [("reduce_scatter_tensor", "reduce_scatter"),
                                         ("all_gather_into_tensor", "all_gather"),
                                         ("all_to_all_single", "all_to_all")])
def test_a_table_run_under_torchs_name_is_read_back_as_the_collective(capsys, tmp_path,
                                                                      alias, name):
    """The table's head and -J report named the torch alias, so compare --collective
    refused simcoll's own table and parse(...).collective was the alias."""
    report = tmp_path / "r.json"
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--collective", alias,
                         "-b", "1K", "-e", "4K", "-f", "2", "-J", str(report))
    assert status == 0 and out.startswith(f"# simcoll {sc.__version__}: {name} / ")
    assert json.loads(report.read_text())["simcoll"]["collective"] == name
    for given in (None, name, alias):
        assert sc.nccl_tests.parse(out, collective=given).collective == name
        assert sc.nccl_tests.parse(out.replace(f": {name} / ", f": {alias} / "),
                                   collective=given).collective == name   # older tables
    status, _, err = cli(capsys, "compare", str(report), "--topology", "switch:4",
                                "--collective", name)
    assert status == 0, err


def test_version_and_exit_codes_in_a_real_process():
    done = run_module("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"simcoll {sc.__version__}\n", "")
    done = run_module("run", "--size", "99999999999999999999999")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "above the largest" in done.stderr
    done = run_module("run", "--topology", "switch:2", "--size", "1K")
    assert done.returncode == 0 and "# Avg bus bandwidth" in done.stdout


def test_a_pipe_closed_early_ends_cleanly():
    """``simcoll ... --json | head -1``: the output (about 300 kB) outgrows the pipe, so
    the writer meets the closed pipe; no traceback, exit status 141 as a shell gives a
    command SIGPIPE ended (128 + 13), not 1, the status of a failed check."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "simcoll", "run", "--json", "--collective", "broadcast",
         "--algorithm", "binomial", "--topology", "switch:256", "-b", "8", "-e", "1M", "-f",
         "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert json.loads(first)["size"] == 8
    assert err == b""
    proc = subprocess.Popen([sys.executable, "-m", "simcoll", "demo", "--json", "--size", "64K"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # closed before demo writes its first line
    assert proc.wait(timeout=120) == 141 and proc.stderr.read() == b""
    done = subprocess.run(f"{sys.executable} -m simcoll demo --json --size 64K | head -1",
                          shell=True,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout == "[\n" and done.stderr == ""
    done = subprocess.run(f"{sys.executable} -m simcoll run --json -b 8 -e 1M -f 2 | head -1;"
                          f" echo status ${{PIPESTATUS[0]}}", shell=True,
                          executable="/bin/bash", capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[-1] == "status 141" and done.stderr == ""
    assert "141 if standard output was closed" in " ".join(run_module("run", "--help")
                                                           .stdout.split())



@pytest.mark.parametrize(("argv", "size", "count"), [
    (["--topology", "switch:4", "--collective", "all_to_all", "--size", "1000"], 960, 60),
    (["--topology", "switch:6", "--collective", "all_gather", "--size", "1M"], 1048512,
     43688),
    (["--topology", "switch:3", "--collective", "reduce_scatter", "--size", "1M", "-d",
      "int8"], 1048560, 349520),
])
def test_run_cuts_blocks_to_16_bytes_as_nccl_tests(capsys, argv, size, count):
    """nccl-tests 2.19.6 (src/alltoall.cu and its siblings): a rank's block is
    (count / nranks) & ~(16 / eltSize - 1) elements. 1000 B of float on 4 ranks: 250
    elements, 62 a rank, 60 kept, 960 B; 1 MiB on 6: 43690 -> 43688; 1 MiB of int8 on
    3: 349525 -> 349520. simcoll printed 992, 1048560 and 1048575."""
    status, out, _ = cli(capsys, "run", *argv)
    assert status == 0
    [row] = table_rows(out)
    assert (int(row[0]), int(row[1])) == (size, count)


def test_trace_refuses_a_size_for_a_barrier_as_run_does(capsys, tmp_path):
    """It traced the barrier and dropped the size without a word."""
    status, _, err = cli(capsys, "trace", "--collective", "barrier", "--size", "64M",
                         "--output", str(tmp_path / "b.json"))
    assert status == 2 and "a barrier moves no data; leave out --size" in err
    status, out, _ = cli(capsys, "trace", "--collective", "barrier", "--output",
                         str(tmp_path / "b.json"))
    assert status == 0 and out.startswith("barrier/dissemination p=8 n=0 B: 6.000 us")
    # 0, as a sweep of a barrier takes it (--sizes 0), was refused.
    status, zero, _ = cli(capsys, "trace", "--collective", "barrier", "--size", "0",
                          "--output", str(tmp_path / "b.json"))
    assert (status, zero) == (0, out)


def test_sweep_of_a_barrier_takes_size_0_only(capsys, tmp_path):
    """A barrier sweep with a size was refused by the Python sweep's words ("leave
    nbytes= and data= out"), which name no option of the command."""
    out = tmp_path / "barrier.jsonl"
    status, _, err = cli(capsys, "sweep", "--collective", "barrier", "--algorithms",
                         "dissemination", "--ranks", "2", "--sizes", "1M", "--output",
                         str(out))
    assert status == 2 and "a barrier moves no data; give --sizes 0" in err
    status, _, _ = cli(capsys, "sweep", "--collective", "barrier", "--algorithms",
                       "dissemination", "--ranks", "2,4", "--sizes", "0", "--output", str(out))
    times = [json.loads(line)["time"] for line in out.read_text().splitlines()]
    # dissemination: ceil(log2 p) rounds of one message, 2 us each on switch(p)
    assert status == 0 and times == pytest.approx([2e-6, 4e-6], rel=1e-12)


@pytest.mark.parametrize("argv", [
    ("run", "--topology", "", "--size", "1M"),
    ("run", "--topology", "", "-g", "2", "--size", "1M"),  # not switch:2, not switch:8
    ("sweep", "--topology", "", "--ranks", "4", "--algorithms", "ring", "--sizes", "1M"),
    ("trace", "--topology", "", "--output", "never.json"),
])
def test_an_empty_topology_is_refused_not_taken_for_the_default(capsys, argv, tmp_path,
                                                                 monkeypatch):
    # --topology "$MACHINE" with MACHINE unset ran switch:8, dropping -g's machine.
    monkeypatch.chdir(tmp_path)
    status, out, err = cli(capsys, *argv)
    assert (status, out) == (2, "")
    assert err == (f"simcoll {argv[0]}: error: topology spec '' is not accepted; write a "
                   f"builder such as 'switch:8' or the path of a topology file\n")
    assert not (tmp_path / "never.json").exists()


@pytest.mark.parametrize("argv", [
    ("run", "--size", "1M"),
    ("trace", "--output", "never.json"),
    ("compare", "log.txt", "--topology", "switch:4"),
    ("calibrate", "log.txt", "--topology", "switch:4", "--free", "bandwidth=50GB/s:1GB/s:1TB/s"),
])
def test_an_empty_algorithm_is_refused_not_taken_for_the_default(capsys, argv, tmp_path,
                                                                  monkeypatch):
    # --algorithm "$ALGO" with ALGO unset ran the ring
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--topology", "switch:4", "-b", "1K", "-e", "4K", "-f", "4"]) == 0
    (tmp_path / "log.txt").write_text(capsys.readouterr().out)
    status, out, err = cli(capsys, *argv, "--algorithm", "")
    assert (status, out) == (2, "")
    # (other tests register algorithms of their own: the list is not fixed)
    assert err.startswith(f"simcoll {argv[0]}: error: unknown algorithm '' for 'all_reduce'; "
                          f"known algorithms: ") and ", ring, " in err
    assert not (tmp_path / "never.json").exists()


def test_standard_output_closed_or_full_is_said_with_the_status_of_its_kind(capsys,
                                                                            monkeypatch,
                                                                            tmp_path):
    """simcoll run >&- ran the whole simulation printing nothing, then raised an
    AttributeError; > /dev/full exited 2, the status of bad arguments."""
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["run", "--size", "1K"]) == 2
    assert capsys.readouterr().err == (
        "simcoll run: error: standard output is closed; give it a file or a pipe "
        "(>/dev/null to drop what it prints)\n")
    # a command whose work goes to --output does it, its note on standard output lost
    monkeypatch.setattr(sys, "stdout", None)
    swept = tmp_path / "points.jsonl"
    assert main(["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K",
                 "--output", str(swept)]) == 0
    assert [r.nranks for r in sc.load_results(swept)] == [2]
    assert capsys.readouterr().err == f"1 point written to {swept}\n"
    sys.stdout.close()   # the null device main opened in its place

    class Full(io.StringIO):
        def flush(self):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sys, "stdout", Full())
    assert main(["run", "--size", "1K"]) == 1
    assert capsys.readouterr().err == (f"simcoll run: error: cannot write standard output: "
                                       f"{os.strerror(errno.ENOSPC)}\n")

    class FullAtOnce(io.StringIO):   # a help longer than the buffer is written through
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    # argparse swallowed the failed write of --help and --version: they exited 0
    for argv, stdout in ((["--help"], Full()), (["--version"], Full()),
                         (["run", "--help"], FullAtOnce()), (["--version"], FullAtOnce())):
        monkeypatch.setattr(sys, "stdout", stdout)
        assert main(argv) == 1
        assert capsys.readouterr().err == (f"simcoll: error: cannot write standard output: "
                                           f"{os.strerror(errno.ENOSPC)}\n")
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert main(["--version"]) == 0 and sys.stdout.getvalue().startswith("simcoll ")
    # standard output closed (>&-): argparse writes the help to standard error; the
    # flush of a closed stdout raised AttributeError
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["--help"]) == 0
    assert capsys.readouterr().err.startswith("usage: simcoll")


@pytest.mark.parametrize("argv, said", [
    # --size 16M --size 1G ran 1G alone: argparse keeps the last
    (("run", "--size", "16M", "--size", "1G"),
     "argument --size: given twice (16777216, then 1073741824)"),
    (("run", "--topology", "switch:4", "--size", "1M", "--topology", "switch:8"),
     "argument --topology: given twice ('switch:4', then 'switch:8')"),
    (("run", "--collective", "all_reduce", "--collective", "broadcast"),
     "argument --collective: given twice ('all_reduce', then 'broadcast')"),
    (("run", "--algorithm", "ring", "--algorithm", "naive"),
     "argument --algorithm: given twice ('ring', then 'naive')"),
    (("run", "--network", "flow", "--network", "analytical"),
     "argument --network: given twice ('flow', then 'analytical')"),
    (("sweep", "--ranks", "4", "--ranks", "8", "--algorithms", "ring", "--sizes", "1M"),
     "argument --ranks: given twice ([4], then [8])"),
    (("trace", "--output", "a.json", "--output", "b.json"),
     "argument --output: given twice ('a.json', then 'b.json')"),
    (("demo", "--size", "1M", "--size", "2M"),
     "argument --size: given twice (1048576, then 2097152)"),
    (("compare", "x.log", "--topology", "switch:4", "--algorithm", "ring", "--algorithm",
      "naive"), "argument --algorithm: given twice ('ring', then 'naive')"),
    (("calibrate", "x.log", "--topology", "switch:4", "--free", "latency=1us:0:1ms",
      "--network", "flow", "--network", "analytical"),
     "argument --network: given twice ('flow', then 'analytical')"),
    (("plot", "p.jsonl", "--output", "p.png", "--y", "time", "--y", "busbw"),
     "argument --y: given twice ('time', then 'busbw')"),
])
def test_simcolls_own_options_given_twice_are_refused(capsys, argv, said, tmp_path,
                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = cli(capsys, *argv)
    assert (status, out) == (2, "")
    assert err == (f"simcoll {argv[0]}: error: {said}; give it once (see 'simcoll {argv[0]} "
                   f"--help')\n")
    assert list(tmp_path.iterdir()) == []


def test_nccl_tests_options_given_twice_keep_the_last_as_its_getopt_does(capsys):
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "-b", "1K", "-b", "2K",
                         "-e", "2K")
    assert status == 0 and [row[0] for row in table_rows(out)] == ["2048"]


def test_the_check_data_sums_exactly_so_a_lossy_all_reduce_is_counted_wrong(capsys):
    """-c's floats are whole numbers from -k to k with p k <= 2^t (t the significand
    bits; k at most 8): every order sums them exactly, so #wrong counts every element an
    algorithm got wrong. With random normal values, a bfloat16 all_reduce over 128 ranks
    that returned each rank's own input passed (the rounding bound allowed a quarter of
    sum |x_i|)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    data = checking.inputs(128, 512, bf16)
    assert {float(v) for x in data for v in x} == {-2.0, -1.0, 0.0, 1.0, 2.0}   # 256 / 128
    wide = {float(v) for x in checking.inputs(8, 512, np.dtype(np.float32)) for v in x}
    assert wide == set(map(float, range(-8, 9)))                             # k at most 8
    assert {float(v) for x in checking.inputs(4, 64, bf16, sc.ReduceOp.PRODUCT)
            for v in x} == {-1.0, 1.0}

    @sc.register("all_reduce", "_test_cli_own_input", cost=NO_FORMULA)
    def own_input(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(1e-6)
        return x.copy()

    status, out, _ = cli(capsys, "run", "--topology", "switch:128", "--algorithm",
                         "_test_cli_own_input", "-b", "1K", "-e", "1K", "-c", "-d", "bfloat16")
    total = np.sum([x.astype(np.float64) for x in data], axis=0)
    expected = sum(int(np.count_nonzero(x.astype(np.float64) != total)) for x in data)
    [row] = table_rows(out)
    assert status == 1 and int(row[-1]) == expected > 0


@pytest.mark.parametrize("topology", ["switch:3", "switch:12"])
def test_a_checked_double_average_over_ranks_not_a_power_of_two_counts_nothing_wrong(
        capsys, topology):
    # whole-number inputs do not average exactly over 3 or 12 ranks: the rounding bound
    # holds, and a correct ring is correct (it showed #wrong 6 and exit status 1)
    status, out, _ = cli(capsys, "run", "--topology", topology, "-b", "1K", "-e", "64K",
                         "-f", "8", "-c", "-d", "double", "-o", "avg")
    assert status == 0 and [row[-1] for row in table_rows(out)] == ["0", "0", "0"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO])
def test_every_failed_write_exits_1_naming_its_file_or_standard_output(capsys, monkeypatch,
                                                                       code):
    """A write that fails for want of room (or of a working disk) is status 1; its error
    names the file where it has one, else standard output."""
    strerror = os.strerror(code)

    def failing(filename):
        class Failing(io.StringIO):
            def flush(self):
                raise OSError(code, strerror, filename)
        return Failing()

    monkeypatch.setattr(sys, "stdout", failing(None))
    assert main(["run", "--size", "1K"]) == 1
    assert capsys.readouterr().err == (f"simcoll run: error: cannot write standard output: "
                                       f"{strerror}\n")
    monkeypatch.setattr(sys, "stdout", failing("/mnt/full/out.csv"))
    assert main(["run", "--size", "1K"]) == 1
    assert capsys.readouterr().err == (f"simcoll run: error: [Errno {code}] {strerror}: "
                                       f"'/mnt/full/out.csv'\n")


def test_an_os_error_the_arguments_caused_is_status_2(capsys, monkeypatch):
    """OSError left _USAGE_ERRORS for a branch of its own: an error other than a failed
    write (a file that cannot be opened) is still the status of bad input, 2."""
    class Denied(io.StringIO):
        def flush(self):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/x/out.csv")

    monkeypatch.setattr(sys, "stdout", Denied())
    assert main(["run", "--size", "1K"]) == 2
    assert capsys.readouterr().err == (f"simcoll run: error: [Errno {errno.EACCES}] "
                                       f"{os.strerror(errno.EACCES)}: '/x/out.csv'\n")


def test_out_of_memory_names_dash_c_only_where_the_command_has_it(capsys, monkeypatch,
                                                                 tmp_path):
    """trace has -c as run does, and its hint says so; sweep has no -c, and its hint
    does not tell to drop it."""
    from simcoll import memory

    monkeypatch.setattr(memory, "memory_left", lambda: (100 * 2**20, int(23.5 * 2**30)))
    said = ("out of memory: this machine has 100 MiB left (below 481 MiB), so the "
            "simulation stopped; use fewer ranks (algorithms that send to every rank at once, "
            "such as naive and direct, hold p^2 messages even data-free) or smaller sizes")
    status, _, err = cli(capsys, "trace", "--collective", "all_to_all", "--algorithm",
                         "direct", "--topology", "switch:129", "--size", "1032", "--output",
                         str(tmp_path / "t.json"))
    assert (status, err) == (2, f"simcoll trace: error: {said} (or drop -c)\n")
    status, _, err = cli(capsys, "sweep", "--collective", "all_to_all", "--algorithms",
                         "direct", "--ranks", "129", "--sizes", "1032")
    point = " (at the sweep's point all_to_all direct p=129 nbytes=1032)"
    assert (status, err) == (2, f"simcoll sweep: error: {said.replace('; use', point + '; use')}\n")


def test_out_of_memory_says_only_simcolls_own_words(capsys):
    """The run's own MemoryError names the memory left; any other (numpy's 'Unable to
    allocate ...', a bare MemoryError) reads 'out of memory', as before."""
    @sc.register("all_reduce", "_test_cli_numpy_out_of_memory", cost=NO_FORMULA)
    def hungry(comm, x, *, op=sc.ReduceOp.SUM):
        yield comm.compute(1e-6)
        raise MemoryError("Unable to allocate 4.00 GiB for an array with shape "
                          "(1073741824,) and data type float32")

    status, _, err = cli(capsys, "run", "--topology", "switch:4", "--algorithm",
                         "_test_cli_numpy_out_of_memory", "--size", "1K")
    assert (status, err) == (2, "simcoll run: error: out of memory; use fewer ranks "
                                "(algorithms that send to every rank at once, such as "
                                "naive and direct, hold p^2 messages even data-free) or "
                                "smaller sizes (or drop -c)\n")


_RUN_ARGUMENTS = [name for name, p in inspect.signature(sc.simulate).parameters.items()
                  if p.kind is not inspect.Parameter.VAR_KEYWORD]


@pytest.mark.parametrize("command", ["run", "trace", "sweep", "compare", "calibrate"])
def test_a_runs_argument_given_as_param_is_pointed_to_what_sets_it(capsys, tmp_path, command):
    """Every argument of simulate() given as --param is refused, pointing at an option
    the command has, another command, or a Python function that takes it: sweep's and
    compare's said "use -c" (neither has it), and until= and max_events= "use its
    option", which no command has."""
    assert main(["run", "--topology", "switch:4", "-b", "1K", "-e", "4K", "-f", "4"]) == 0
    log = tmp_path / "ring.txt"
    log.write_text(capsys.readouterr().out)
    base = {"run": ["run", "--topology", "switch:4", "--size", "1K"],
            "trace": ["trace", "--topology", "switch:4", "--size", "1K", "--output",
                      str(tmp_path / "trace.json")],
            "sweep": ["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K"],
            "compare": ["compare", str(log), "--topology", "switch:4"],
            "calibrate": ["calibrate", str(log), "--topology", "switch:4",
                          "--free", "latency=1us:0.1us:10us"]}[command]
    assert main([command, "--help"]) == 0
    options = set(re.findall(r"(?<![\w-])-{1,2}[a-z][\w-]*", capsys.readouterr().out))
    pointed = 0
    for key in _RUN_ARGUMENTS:
        status, _, err = cli(capsys, *base, "--param", f"{key}=1")
        assert status == 2, (key, err)
        if "argument of the run; use " not in err:
            continue  # refused otherwise (a log's rows give the sizes, types, ops, roots)
        pointed += 1
        advice = err.split("argument of the run; use ", 1)[1].strip()
        if advice.startswith("-"):
            for option in re.findall(r"-{1,2}[a-z][\w-]*", advice.split(" (")[0]):
                assert option in options, (command, key, advice)
        elif advice.startswith("simcoll."):
            for call in re.findall(r"simcoll\.(\w+)\(", advice):
                taken = inspect.signature(getattr(sc, call)).parameters
                assert key in taken or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                           for p in taken.values()), (command, key, advice)
        else:
            assert advice == "simcoll trace", (command, key, advice)
    assert pointed >= 10


@pytest.mark.parametrize("command, key, function", [
    ("sweep", "until", "sweep"),
    ("sweep", "max_events", "sweep"),
    ("compare", "until", "compare"),
    ("compare", "max_events", "compare"),
    ("calibrate", "until", "calibrate"),
    ("calibrate", "max_events", "calibrate"),
])
def test_a_run_limit_given_as_param_points_to_the_commands_own_python_function(
        capsys, tmp_path, command, key, function):
    """until= and max_events= have no option on any command: --param with either points
    to the Python function the command runs (simcoll.sweep, compare, calibrate), which
    takes it, not to simcoll.simulate."""
    assert main(["run", "--topology", "switch:4", "-b", "1K", "-e", "4K", "-f", "4"]) == 0
    log = tmp_path / "ring.txt"
    log.write_text(capsys.readouterr().out)
    base = {"sweep": ["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K"],
            "compare": ["compare", str(log), "--topology", "switch:4"],
            "calibrate": ["calibrate", str(log), "--topology", "switch:4",
                          "--free", "latency=1us:0.1us:10us"]}[command]
    status = main([*base, "--param", f"{key}=1"])
    err = capsys.readouterr().err
    assert status == 2
    assert f"simcoll.{function}(..., {key}=...)" in err, err
    assert "simcoll.simulate(" not in err, err


def test_a_run_limit_on_the_command_line_says_no_option_sets_it(capsys):
    """The message said "raise the limit", which no option of the command line does."""
    status, out, err = cli(capsys, "run", "--topology", "switch:4", "--size", "64K",
                           "--algorithm", "bucketed", "--param", "compute=1e6")
    assert status == 1
    assert "reached the simulated-time limit until=1e+06 s" in err
    assert err.rstrip().endswith("(the command line has no option for until= or "
                                 "max_events=; raise them from Python: simcoll.simulate(..., "
                                 "until=..., max_events=...))")


def _register(monkeypatch, doc):
    def flat(comm, x, *, root):
        return x
        yield

    def flat_time(p, nbytes, alpha, beta, gamma):
        return alpha
    flat_time.__doc__ = doc
    spec = registry.AlgorithmSpec("broadcast", "flat_cli2", flat,
                                  CostModel(time=flat_time, traffic=flat_time))
    monkeypatch.setitem(registry._REGISTRY, ("broadcast", "flat_cli2"), spec)


def _entry(capsys, monkeypatch, doc):
    _register(monkeypatch, doc)
    _, out, _ = cli(capsys, "list", "algorithms")  # noqa: F821
    items = out.split("\n    flat_cli2")[1].split("\n    ")
    # the parameters' remainder, then the formula's lines (indented 8: 4 left after the split)
    return [items[0]] + [item for item in
                         __import__("itertools").takewhile(lambda i: i.startswith("    "),
                                                           items[1:])]


def test_list_wraps_formulas_at_spaces_only(capsys, monkeypatch):
    # hyphenated terms of varying lengths at 100 columns: textwrap's default
    # (break_on_hyphens=True) cuts some line after a hyphen, mid-term
    monkeypatch.setenv("COLUMNS", "100")
    doc = " ".join(f"a{'b' * (i % 7)}-c{'d' * (i % 5)}-e{'f' * (i % 3)}" for i in range(80))
    entry = _entry(capsys, monkeypatch, doc)
    lines = [line.strip() for line in entry[1:]]
    assert " ".join(lines).split() == doc.split()
    assert all(not line.endswith("-") for line in lines)


def test_list_drops_sphinx_roles_and_literals(capsys, monkeypatch):
    entry = _entry(capsys, monkeypatch, "alpha by :func:`simcoll.cost.predict` and ``n``.")
    assert entry[1].strip() == "alpha by simcoll.cost.predict and n."


def test_workers_of_other_scripts_digits_are_refused(capsys):
    # '²' is a digit to str.isdigit but no whole number int() reads
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2",  # noqa: F821
                         "--sizes", "1K", "--workers", "²")
    assert status == 2 and ("argument --workers: '²' is not accepted; give a whole number "
                            "of processes") in err


@pytest.mark.parametrize("command", [["run"], ["trace", "--output", "t.json"]])
def test_root_one_past_the_last_rank_is_named_as_the_option(capsys, tmp_path, monkeypatch,
                                                            command):
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(capsys, *command, "--collective", "broadcast", "--algorithm",  # noqa: F821
                         "binomial", "-r", "8")
    assert status == 2 and "-r/--root 8 is not a rank of switch(8); give 0 to 7" in err


def test_root_zero_and_the_last_rank_are_taken(capsys):
    for root in ("0", "7"):
        status, _, err = cli(capsys, "run", "--collective", "broadcast", "--algorithm",  # noqa: F821
                             "binomial", "-r", root, "-b", "1K", "-e", "1K")
        assert status == 0, err


def test_plot_draws_the_busiest_sender_s_bytes(capsys, tmp_path):
    points = tmp_path / "points.jsonl"
    cli(capsys, "sweep", "--algorithms", "ring,naive", "--ranks", "2,4", "--sizes", "1M",
        "--output", str(points))
    picture = tmp_path / "bytes.png"
    status, out, _ = cli(capsys, "plot", str(points), "--output", str(picture), "--y",
                         "bytes_sent")
    assert status == 0 and "4 of 4 records plotted" in out
    assert picture.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("ranks, root, words", [
    # -1 is no rank: refused by the negative-root check, named as the option (sweeping.py:
    # `kwargs.get("root", 0) < 0`; a mutant `< -1` let -1 through to simulate's "root=-1")
    ("2", "-1", "--root -1 is not a rank; give a root from 0 to 1"),
    # the range is that of the smallest machine swept: min(4, 2) - 1 = 1, not 3
    ("4,2", "-5", "--root -5 is not a rank; give a root from 0 to 1"),
])
def test_sweep_a_negative_root_is_named_with_the_smallest_machine_s_ranks(
        capsys, tmp_path, monkeypatch, ranks, root, words):
    monkeypatch.chdir(tmp_path)
    status, out, err = cli(capsys, "sweep", "--collective", "broadcast", "--algorithms",
                           "binomial", "--ranks", ranks, "--sizes", "1K", "--root", root)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert words in err


@pytest.mark.parametrize("root, rank", [("010", 8), ("0x1", 1), ("9", 9)])
def test_every_command_reads_a_root_as_nccl_tests_does(capsys, tmp_path, monkeypatch,
                                                        root, rank):
    """sweep and trace read -r with Python's int(): 010 was 10 (run: 8, as strtol), 0x1
    was refused and 1_0 was 10."""
    monkeypatch.chdir(tmp_path)
    status, out, _ = cli(capsys, "run", "--collective", "broadcast", "--topology",
                         "switch:12", "-b", "1K", "-e", "1K", "-r", root)
    assert status == 0 and [line.split()[4] for line in out.splitlines()
                             if not line.startswith("#")][0] == str(rank)
    status, out, _ = cli(capsys, "sweep", "--collective", "broadcast", "--algorithms",
                         "binomial", "--ranks", "12", "--sizes", "1K", "-r", root, "--json")
    assert status == 0 and [json.loads(line)["root"] for line in out.splitlines()] == [rank]
    status, out, _ = cli(capsys, "trace", "--collective", "broadcast", "--topology",
                         "switch:12", "--size", "1K", "-r", root, "--output", "t.json")
    assert status == 0
    assert json.loads((tmp_path / "t.json").read_text())["otherData"]["root"] == rank
    for command in (("sweep", "--collective", "broadcast", "--ranks", "12", "--sizes", "1K"),
                    ("trace", "--collective", "broadcast", "--size", "1K", "--output", "u")):
        status, out, err = cli(capsys, *command, "-r", "1_0")
        assert status == 2 and "'1_0' is not an integer as nccl-tests reads it" in err


def test_trace_takes_check_iterations_as_run_does(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, _ = cli(capsys, "trace", "-c", "0x2", "--size", "4K", "--output", "t.json",
                         "--json")
    assert status == 0 and json.loads(out)["correct"] is True


@pytest.mark.parametrize("suffix", [".txt", ".json", ".jsonl"])
def test_plot_of_a_run_table_says_to_run_it_with_json(capsys, tmp_path, suffix):
    """It said only "not valid JSON" of the table 'simcoll run' had just printed."""
    table = tmp_path / f"run{suffix}"
    status, out, _ = cli(capsys, "run", "-b", "1K", "-e", "4K", "-f", "4")
    table.write_text(out)
    status, _, err = cli(capsys, "plot", str(table), "--output", str(tmp_path / "p.png"))
    assert status == 2 and f"run{suffix}, line 1: not valid JSON" in err
    assert err.rstrip().endswith("(a table that 'simcoll run' prints is text: run it with "
                                 "--json)")


def test_list_help_names_its_sections(capsys):
    """`simcoll list --help` says what SECTION may be: the three sections list knows."""
    assert main(["list", "--help"]) == 0
    out = capsys.readouterr().out
    assert "SECTION" in out
    assert "list only this section: collectives, algorithms, topologies" in out


@pytest.mark.parametrize("text", ["", "\ufeff{broken\n"])
def test_plot_gives_the_text_table_hint_only_to_text(capsys, tmp_path, text):
    """An empty file and JSON after a byte-order mark were told to run with --json."""
    path = tmp_path / "points.jsonl"
    path.write_text(text, encoding="utf-8")
    status, _, err = cli(capsys, "plot", str(path), "--output", str(tmp_path / "p.png"))
    assert status == 2 and "run it with --json" not in err


@pytest.mark.parametrize(("suffix", "text"), [
    (".json", '[{"time": 1.0}, {"time": '),          # a list of records, cut off
    (".json", '\n   {"time": 1.0'),                  # an object after blank space
    (".json", '\n\n[{"time": 1.0},\n'),
    (".jsonl", '  {"time": 1.0, \n{"time": 2.0}\n'),  # line 1 broken, indented
    (".jsonl", '[{"time": 1.0}\n{"time": 2.0}\n'),
])
def test_mut_plot_of_broken_json_records_is_not_told_it_is_a_text_table(capsys, tmp_path,
                                                                         suffix, text):
    """Text that starts as JSON does ('{' or '[', after blank space) is broken JSON, not a
    table `simcoll run` printed: the error names the line and says nothing of tables."""
    path = tmp_path / f"records{suffix}"
    path.write_text(text)
    status, _, err = cli(capsys, "plot", str(path), "--output", str(tmp_path / "p.png"))
    assert status == 2 and "not valid JSON" in err
    assert "simcoll run' prints is text" not in err


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_load_results_says_a_run_json_file_is_not_a_sweeps(capsys, tmp_path, suffix):
    """`simcoll run --json` prints one object per size, nccl-tests' columns and the
    result; load_results said only that it lacked 'error' (a .jsonl) or was no list."""
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "-b", "1K", "-e", "4K",
                         "--json")
    assert status == 0
    path = tmp_path / f"run{suffix}"
    path.write_text(out.splitlines()[0] + "\n" if suffix == ".json" else out)
    where = f"{path} line 1" if suffix == ".jsonl" else str(path)
    with pytest.raises(sc.InvalidInputError, match=re.escape(
            f"{where} is a line of `simcoll run --json` (one size's nccl-tests columns and "
            f"its result), not a simcoll sweep record; load_results reads what "
            f"sweep(save=...) and `simcoll sweep --output` write")):
        sc.load_results(path)


def test_a_finished_sweep_keeps_its_partial_file_while_another_sweep_has_it_open(
        tmp_path, monkeypatch, capsys):
    """A sweep to the same --output that finished first deleted PATH.partial.jsonl under
    a sweep still appending to it, whose later points then went to a removed file."""
    from simcoll.sweep.storage import ResultFile

    monkeypatch.chdir(tmp_path)
    other = sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                     sizes=["1MiB"])
    store = ResultFile(Path("out.jsonl.partial.jsonl"))   # another sweep, still running
    store.extend(list(other.records))
    status, _, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4",
                         "--sizes", "1M", "--output", "out.jsonl")
    assert status == 0 and "is kept: another sweep has it open" in err
    later = sc.sweep(sc.topology.switch, "all_reduce", algorithms=["naive"], ranks=[8],
                     sizes=["1MiB"])
    store.extend(list(later.records))
    store.close()
    kept = sc.load_results("out.jsonl.partial.jsonl")
    assert [(r.algorithm, r.nranks) for r in kept] == [("ring", 2), ("ring", 4), ("naive", 8)]
    # once no sweep has it open, it can go
    assert remove_unless_open(Path("out.jsonl.partial.jsonl"))
    assert not Path("out.jsonl.partial.jsonl").exists()


def test_plot_keeps_run_lines_that_asked_for_different_parameters(tmp_path, capsys):
    """Two `simcoll run --json` lines asked for different parameters (NCCL's default and
    proto=Simple) and got the same choice: plot merged them as one point run again (2 of
    2 records, titled proto='Simple')."""
    runs = []
    for extra in ([], ["--param", "proto=Simple"]):
        status, out, _ = cli(capsys, "run", "--topology", "dgx_h100:nodes=1", "--algorithm",
                             "nccl", "-b", "64M", "-e", "128M", "-f", "2", "--json", *extra)
        assert status == 0
        runs.extend(out.splitlines())
    path = tmp_path / "both.jsonl"
    path.write_text("\n".join(runs) + "\n")
    chosen = {json.dumps(json.loads(line)["params"], sort_keys=True) for line in runs}
    assert len(chosen) == 1   # the case: both chose the same
    status, out, _ = cli(capsys, "plot", str(path), "--output", str(tmp_path / "both.png"))
    assert status == 0 and out.startswith("4 of 4 records plotted")


def test_plot_of_a_barrier_sweep_names_busbw_and_suggests_its_time(tmp_path, capsys):
    records = tmp_path / "bar.jsonl"
    assert cli(capsys, "sweep", "--collective", "barrier", "--algorithms", "dissemination",
               "--ranks", "2,4", "--sizes", "0", "--output", str(records))[0] == 0
    status, _, err = cli(capsys, "plot", str(records), "--output", str(tmp_path / "b.png"))
    assert status == 2 and "no record has a positive busbw to plot (a barrier moves no " \
                           "data: plot its time, y='time' or --y time)" in err


@pytest.mark.parametrize("size", ["-1e3K", "-1.5e3", "-2E+1M"])
def test_a_negative_size_with_an_exponent_is_refused_as_the_size_it_is(capsys, tmp_path,
                                                                       monkeypatch, size):
    """-b -1e3K is read as -b's value and refused by its check (argparse took it for an
    option and said "expected one argument")."""
    monkeypatch.chdir(tmp_path)
    status = main(["run", "-b", size])
    err = capsys.readouterr().err
    assert status == 2
    assert f"argument -b/--minbytes: size '{size}' is negative; sizes are >= 0 bytes" in err


def test_removing_a_sweep_file_that_is_not_there_reports_it_gone(tmp_path):
    """remove_unless_open returns whether the file is gone, "or was not there"."""
    assert remove_unless_open(tmp_path / "sweep.partial.jsonl") is True


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="symlinks")
def test_removing_a_sweep_file_through_a_link_removes_the_file_itself(tmp_path):
    """The file its lock was taken on goes, not the link to it."""
    target = tmp_path / "real.partial.jsonl"
    target.write_text("")
    link = tmp_path / "sweep.partial.jsonl"
    link.symlink_to(target)
    assert remove_unless_open(link) is True
    assert not target.exists()


def test_minus_zero_is_a_size_of_zero_as_parse_size_reads_it(capsys):
    """-b -0 was refused ("cannot read size"), where sc.parse_size('-0') is 0."""
    from simcoll.cli.options import parse_bytes

    assert parse_bytes("-0") == 0 == sc.parse_size("-0") and parse_bytes("-0.0e3K") == 0
    status, out, _ = cli(capsys, "run", "-b", "-0", "-e", "0")
    assert status == 0 and [row[0] for row in table_rows(out)] == ["0"]


def test_help_and_version_into_a_closed_pipe_exit_as_sigpipe_silently(capsys, monkeypatch):
    """``simcoll --help | head -0``: a closed pipe is not a failed write. The status is
    the shell's for a command SIGPIPE ended, 128 + SIGPIPE (13) = 141, and nothing is
    said on standard error (as for any other command into a closed pipe), whether the
    write itself or the final flush finds the pipe closed."""
    class ClosedOnWrite(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    class ClosedOnFlush(io.StringIO):
        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    assert 128 + signal.SIGPIPE == 141
    for argv, stdout in ((["--help"], ClosedOnWrite()), (["--version"], ClosedOnWrite()),
                         (["--help"], ClosedOnFlush()), (["--version"], ClosedOnFlush())):
        monkeypatch.setattr(sys, "stdout", stdout)
        assert main(argv) == 141
        assert capsys.readouterr().err == ""


def test_bare_param_numbers_with_a_leading_zero_are_refused_others_read():
    """C's strtol (NCCL's environment, nccl-tests' options) reads "010" as 8, and "-010"
    as -8: left as text for the parameter's check to refuse, whatever the sign. Zeros
    alone ("0", "00": 0 in octal too) and a decimal fraction ("0.5", "0.25") mean the
    same in both readings, so they are read as numbers."""
    from simcoll.algorithms.params import read_value

    assert read_value("010") == "010"
    assert read_value("-010") == "-010" and read_value("+010") == "+010"
    assert read_value("0") == 0 and read_value("00") == 0 and read_value("-00") == 0
    assert read_value("0.5") == 0.5 and read_value("0.25") == 0.25
    assert read_value("10") == 10 and read_value("-10") == -10


def test_plot_names_a_bad_record_by_file_and_line_and_takes_no_object_for_a_failure(
        capsys, tmp_path):
    """A bad record was 'record 2' (counted from 0, no file: now its line), a params of text a raw
    ValueError, and any object with an "error" key (compare --json's list of errors) a
    failed point: "holds no records of points that ran", or a legend entry of numbers."""
    points = tmp_path / "points.jsonl"
    cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "2,4", "--sizes", "1K",
        "--output", str(points))
    good = points.read_text()
    for bad, said in (('"nranks": "8"', "has nranks='8', nbytes=1024; expected integers"),
                      ('"params": "chunks=2"', "has params='chunks=2'; expected an object of "
                                               "parameters (or its JSON text)")):
        line = ('{"collective": "all_reduce", "algorithm": "ring", "nbytes": 1024, '
                '"nranks": 8, "time": 1e-05, "algbw": 1.0, "busbw": 1.0, ' + bad + "}\n")
        points.write_text(good + line)
        status, _, err = cli(capsys, "plot", str(points), "--output", str(tmp_path / "x.png"))
        assert (status, err) == (2, f"simcoll plot: error: {points}, line 3: {said}, as "
                                    f"Result.to_dict() writes it\n"
                                 if "params" in bad else
                                 f"simcoll plot: error: {points}, line 3: {said} >= 1 and "
                                 f">= 0\n")
    points.write_text(good + json.dumps({"collective": "all_reduce", "error": [0.5, -0.2]})
                      + "\n")
    status, _, err = cli(capsys, "plot", str(points), "--output", str(tmp_path / "x.png"))
    assert status == 2 and "line 3: lacks algorithm, nranks, nbytes, time, algbw, busbw" in err


def test_plot_chooses_its_default_x_from_the_records_that_ran(capsys, tmp_path, monkeypatch):
    """A failed sweep point of another rank count does not make the x rank counts: the
    records that ran have one rank count (8) and three sizes, so x is the size, and
    all three ran points are drawn (against rank counts they would share one x)."""
    import simcoll.cli.plotting as plotting

    asked: list[str] = []
    real = plotting.scaling
    monkeypatch.setattr(plotting, "scaling",
                        lambda records, **kw: asked.append(kw["x"]) or real(records, **kw))
    status, out, _ = cli(capsys, "run", "--topology", "switch:8", "-b", "1K", "-e", "4K",
                         "-f", "2", "--json")
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 3
    failed = {"collective": "all_reduce", "algorithm": "ring", "nranks": 2, "nbytes": 1024,
              "error": {"type": "AlgorithmError", "message": "no"}}
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines + [json.dumps(failed)]) + "\n")
    status, out, _ = cli(capsys, "plot", str(path), "--output", str(tmp_path / "p.png"))
    assert status == 0 and asked == ["nbytes"]
    assert out.startswith("3 of 4 records plotted") and "(1 failed)" in out


def test_json_text_writes_what_json_has_no_number_for_as_null():
    """compare --json and calibrate --json wrote an unsimulated start's times as
    Infinity, which strict JSON readers refuse."""
    from simcoll.cli.json_out import json_text

    value = {"a": [math.inf, math.nan, 1.5], "b": (np.float64(-math.inf), "x"), "c": None,
             "d": {"e": [2, True]}}
    assert json_text(value) == ('{"a": [null, null, 1.5], "b": [null, "x"], "c": null, '
                                '"d": {"e": [2, true]}}')


def test_the_parameters_nccl_chose_name_each_rows_root_in_aligned_columns(capsys):
    """-r all ran each size once per root with nothing telling which row was which
    root's (only the type and redop columns were added); and the columns' widths were
    taken from the first row only, so a later wider value (Simple after LL) pushed its
    row out of line."""
    status, out, _ = cli(capsys, "run", "--topology", "dgx_h100", "--collective",
                         "broadcast", "--algorithm", "nccl", "-b", "64K", "-e", "2M",
                         "-f", "32", "-r", "all")
    assert status == 0
    lines = out.splitlines()
    start = lines.index("# parameters the algorithm chose (in --json's params):")
    head = lines[start + 2]
    assert head.split()[1:4] == ["size", "(B)", "root"]
    varying = head.split()[4:]
    rows = lines[start + 3:start + 3 + 16]
    want = []
    for root in range(8):
        for size in (64 << 10, 2 << 20):
            params = sc.simulate(sc.topology.dgx_h100(), "broadcast", algorithm="nccl",
                                 nbytes=size, root=root).params
            want.append([str(size), str(root), *(str(params[k]) for k in varying)])
    assert [row.split()[1:] for row in rows] == want
    assert lines[start + 3 + 16] == "#"
    # right-aligned columns: every row as long as the head, each value ending where its
    # column's name does
    assert {len(row) for row in rows} == {len(head)}
    ends = [head.index(name) + len(name) for name in ("root", *varying)]
    for row in rows:
        assert [row[end - 1] != " " and (end == len(row) or row[end] == " ")
                for end in ends] == [True] * len(ends), row
