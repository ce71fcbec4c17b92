"""nccl-tests' JSON report (``-J file``): read as its printed table is. The documents are
written here key by key from src/util.cu of nccl-tests 2.19.6 (JSON_FILE_VERSION 3)."""

from __future__ import annotations

import json
import re

import pytest
from test_cli import cli

import simcoll as sc

P = 4


def block(time_us, size, factor, key="time", nwrong=0.0):
    algbw = size / time_us / 1e3  # GB/s from bytes and microseconds
    return {key: time_us, "alg_bw": algbw, "bus_bw": algbw * factor, "nwrong": nwrong}


def report(program="./build/all_reduce_perf", sizes=(1024, 4096, 16384), key="time",
           groups=(0,), ngpus=P, hosts=("node0",), **config):
    """One entry in ``devices`` per process (its first rank's, as nccl-tests writes
    them): ``groups`` and ``hosts`` per process, of ``ngpus`` ranks each."""
    factor = 2 * (P - 1) / P
    results = [{"size": s, "count": s // 4, "type": "float", "redop": "sum",
                "root": f"{-1:6d}", "out_of_place": block(10 + s / 1e3, s, factor, key),
                "in_place": block(11 + s / 1e3, s, factor, key),
                "actual_iterations": 20, "experiment_name": ""} for s in sizes]
    return {
        "version": 3, "start_time": "2026-11-30 10:00:00",
        "args": [program, "-b", "1K", "-e", "16K", "-f", "4", "-g", "4", "-J", "r.json"],
        "env": ["PATH=/usr/bin"], "nccl_version": 22807,
        "config": {"nthreads": 1, "ngpus": ngpus, "minimum_bytes": 1024,
                   "maximum_bytes": 16384,
                   "step_factor": 4, "warmup_iters": 5, "iterations": 20,
                   "aggregated_iterations": 1, "validation": 1, "graph": 0,
                   "blocking_collectives": False, "per_iter_timing": False,
                   "per_iter_skip": 0, "parallel_init": False, **config,
                   "devices": [{"rank": p * ngpus, "group": g, "pid": 100 + p,
                                "hostname": host, "device": 0, "device_hex": "0000:18:00",
                                "device_info": "NVIDIA H100 80GB HBM3"}
                               for p, (g, host) in enumerate(zip(groups, hosts))]},
        "results": results, "out_of_bounds": {"count": 0, "okay": True},
        "average_bus_bandwidth": {"bandwidth": 1.25, "okay": "unchecked"},
        "errors": [], "end_time": "2026-11-30 10:00:01"}


def test_a_report_reads_as_its_table_would():
    table = sc.nccl_tests.parse(json.dumps(report(), indent=2))
    assert table.collective == "all_reduce" and table.nranks == P   # -g 4: one process
    assert table.hosts == ("node0",) * P
    two = sc.nccl_tests.parse(json.dumps(report(ngpus=2, groups=(0, 0),
                                                hosts=("node0", "node1"))))
    assert two.nranks == P and two.hosts == ("node0", "node0", "node1", "node1")
    assert table.devices == ("NVIDIA H100 80GB HBM3",) * P
    assert table.nccl_version == "2.28.7"
    assert table.settings == {"nThread": 1, "nGpus": 4, "minBytes": 1024, "maxBytes": 16384,
                              "step": 4, "step_kind": "factor", "warmup iters": 5,
                              "iters": 20, "agg iters": 1, "validation": 1, "graph": 0}
    assert table.avg_busbw == 1.25 and table.out_of_bounds == 0 and not table.cputime
    assert table.sizes == (1024, 4096, 16384)
    first = table.rows[0]
    assert (first.count, first.type, first.redop, first.root) == (256, "float", "sum", -1)
    assert first.out_of_place.time_us == 10 + 1.024 and first.in_place.time_us == 11 + 1.024
    assert first.out_of_place.busbw == pytest.approx(1024 / 11.024e3 * 1.5, rel=1e-15)
    assert first.out_of_place.wrong == 0


def test_a_report_of_nccl_tests_2_17_3_to_2_17_8_keeps_its_average_bus_bandwidth():
    """Before 2.17.9 (commit 85ca91d) util.cu wrote "average_bus_bandwidith" and
    "bandwidith": the average was lost, and compare said the run may have stopped early."""
    old = report()
    old["version"] = 1
    del old["average_bus_bandwidth"]
    old["average_bus_bandwidith"] = {"bandwidith": 33.07892, "okay": "unchecked"}
    table = sc.nccl_tests.parse(json.dumps(old, indent=2))
    assert table.avg_busbw == 33.07892
    assert [r.size for r in table.rows] == [1024, 4096, 16384]


def test_compare_reads_a_report_and_its_notes(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report(aggregated_iterations=4)))
    status, out, err = cli(capsys, "compare", str(path), "--topology", "switch:4")
    assert status == 0, err
    assert "3 sizes of" in out and "the log grouped 4 operations per launch (-m)" in out
    # the same measured times as the document holds, printed to two decimals
    assert [line.split()[1] for line in out.splitlines()[3:6]] == ["11.02", "14.10", "26.38"]


def test_cpu_times_and_communicators_read_from_a_report():
    table = sc.nccl_tests.parse(json.dumps(report(key="cpu_time")))
    assert table.cputime
    with pytest.raises(sc.InvalidInputError, match="-C 1's cputime"):
        sc.compare(sc.topology.switch(P), table, algorithm="ring")
    split = sc.nccl_tests.parse(json.dumps(report(groups=(0, 0, 1, 1), ngpus=1,
                                                  hosts=("a",) * 4, sizes=(1024,))))
    assert split.communicators == 2 and split.nranks == 2
    with pytest.raises(sc.InvalidInputError, match="a device per process of 2 ranks, and "
                                                   "its communicators were split"):
        sc.nccl_tests.parse(json.dumps(report(groups=(0, 1), ngpus=2, hosts=("a", "b"))))


def test_an_other_program_and_null_blocks():
    doc = report(program="/opt/nccl-tests/build/all_gather_perf", sizes=(4096,))
    doc["results"][0].update(redop="none", count=256, in_place=None)
    table = sc.nccl_tests.parse(json.dumps(doc))
    assert table.collective == "all_gather" and table.rows[0].in_place is None
    with pytest.raises(sc.InvalidInputError, match="no in-place block"):
        table.rows[0].measurement("in_place")


@pytest.mark.parametrize(("text", "words"), [
    ("{not json", r"starts like nccl-tests' JSON report \(-J\) but is not JSON"),
    ('{"version": 3}', "without a 'results' list"),
    ('{"results": [3]}', r"results\[0\] is not an object"),
    ('{"results": [{"size": -1, "count": 1}]}', r"results\[0\]\.size: expected a whole"),
    ('{"results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "x"}]}',
     r"results\[0\]\.root: expected a rank"),
    ('{"results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "-1",'
     ' "out_of_place": {"time": NaN, "alg_bw": 1, "bus_bw": 1}}]}',
     r"results\[0\]\.out_of_place\.time: expected a finite number >= 0, found nan"),
])
def test_a_bad_report_is_refused_naming_the_field(text, words):
    with pytest.raises(sc.InvalidInputError, match=words):
        sc.nccl_tests.parse(text)


def test_a_report_whose_sizes_contradict_its_counts_is_refused_naming_the_line():
    doc = report(sizes=(1024, 4096))
    doc["results"][1]["count"] = 100
    text = json.dumps(doc, indent=1)
    line = 1 + text[:text.index('"size": 4096')].count("\n")
    with pytest.raises(sc.InvalidInputError, match=rf"results\[1\] \(line {line}\): size "
                                                   rf"4096 B is not its count 100"):
        sc.nccl_tests.parse(text)


def test_json_lines_are_told_from_a_report():
    records = "\n".join(json.dumps({"size": s, "nranks": 4, "time_us": 1.0}) for s in (8, 16))
    with pytest.raises(sc.InvalidInputError, match="holds JSON lines, one record per size "
                                                   r"\(simcoll run --json's") as info:
        sc.nccl_tests.parse(records)
    # the function it points to is there under that name (sc.sweep is the function
    # sweep, so "simcoll.sweep.load_results" named nothing)
    assert str(info.value).endswith("read a sweep's with simcoll.load_results")
    assert callable(sc.load_results)


def test_a_block_without_its_time_names_the_time():
    doc = report(sizes=(1024,))
    del doc["results"][0]["out_of_place"]["time"]
    with pytest.raises(sc.InvalidInputError, match=r"out_of_place\.time: expected"):
        sc.nccl_tests.parse(json.dumps(doc))


def test_a_report_of_an_mpi_build_or_an_unknown_program():
    mpi = report(program="/opt/nccl-tests/build/all_gather_perf_mpi", sizes=(4096,))
    mpi["results"][0].update(redop="none", count=256)
    assert sc.nccl_tests.parse(json.dumps(mpi)).collective == "all_gather"
    other = report(program="/usr/bin/launcher", sizes=(4096,))
    assert sc.nccl_tests.parse(json.dumps(other)).collective is None


def test_a_report_of_t_threads_of_g_gpus_has_t_times_g_ranks_per_process():
    # util.cu: one device entry per process, its first rank's (process p: rank 4 p)
    doc = report(ngpus=2, groups=(0, 0), hosts=("node0", "node1"))
    doc["config"]["nthreads"] = 2
    for p, device in enumerate(doc["config"]["devices"]):
        device["rank"] = 4 * p
    table = sc.nccl_tests.parse(json.dumps(doc))
    assert table.nranks == 8 and table.hosts == ("node0",) * 4 + ("node1",) * 4


@pytest.mark.parametrize(("field", "value", "words"), [
    ("size", True, r"results\[0\]\.size: expected a whole number >= 0, found True"),
    ("count", 2.5, r"results\[0\]\.count: expected a whole number >= 0"),
])
def test_a_report_field_of_the_wrong_kind_is_named(field, value, words):
    doc = report(sizes=(1024,))
    doc["results"][0][field] = value
    with pytest.raises(sc.InvalidInputError, match=words):
        sc.nccl_tests.parse(json.dumps(doc))


def test_an_infinite_time_is_refused():
    doc = report(sizes=(1024,))
    doc["results"][0]["out_of_place"]["time"] = float("inf")
    with pytest.raises(sc.InvalidInputError, match=r"out_of_place\.time: expected a finite "
                                                   r"number >= 0, found inf"):
        sc.nccl_tests.parse(json.dumps(doc))   # Python writes it Infinity


def test_two_reports_one_after_the_other_are_not_taken_for_json_lines():
    one = json.dumps(report(sizes=(1024,)))
    with pytest.raises(sc.InvalidInputError, match="starts like nccl-tests' JSON report "
                                                   r"\(-J\) but is not JSON: Extra data"):
        sc.nccl_tests.parse(one + "\n" + one)


def test_a_report_after_a_byte_order_mark_and_blanks_is_read():
    text = "\ufeff \n\t" + json.dumps(report())
    assert sc.nccl_tests.parse(text).sizes == (1024, 4096, 16384)


@pytest.mark.parametrize("key, field", [("average_bus_bandwidth", "bandwidth"),
                                        ("average_bus_bandwidith", "bandwidith")])
def test_an_average_that_is_not_a_number_is_left_out(key, field):
    """Under either spelling, an average bus bandwidth that is not a number (a string
    such as "n/a") is left out, as a missing one is, not read or raised on."""
    doc = report()
    del doc["average_bus_bandwidth"]
    doc[key] = {field: "n/a", "okay": "unchecked"}
    table = sc.nccl_tests.parse(json.dumps(doc, indent=2))
    assert table.avg_busbw is None
    assert [r.size for r in table.rows] == [1024, 4096, 16384]


# An empty 'results' list: a report of a run that stopped before its first size.
@pytest.mark.parametrize("doc", [{"results": []},
                                 {"results": [], "args": ["all_reduce_perf"]},
                                 {**report(), "results": []}])
def test_a_report_without_results_is_refused_as_a_log_without_rows(doc):
    """parse raised IndexError, or (with a program named) returned an empty table;
    count_runs said 1. A printed log without rows is refused by all three, so is this."""
    text = json.dumps(doc)
    for read in (sc.nccl_tests.parse, sc.nccl_tests.parse_all, sc.nccl_tests.count_runs):
        with pytest.raises(sc.InvalidInputError, match=r"^no result rows found: the JSON "
                                                       r"report holds no results \('results' "
                                                       r"is empty"):
            read(text)
        with pytest.raises(sc.InvalidInputError, match="^no result rows found"):
            read("# nThread 1 nGpus 4 minBytes 8 maxBytes 8\n# Avg bus bandwidth : 0\n")


def test_a_report_without_results_quotes_its_error():
    doc = {**report(), "results": [], "errors": ["interrupted after 0 size(s)"]}
    with pytest.raises(sc.InvalidInputError, match=r"its errors say 'interrupted after 0 "
                                                   r"size\(s\)'"):
        sc.nccl_tests.parse(json.dumps(doc))


def test_an_alg_bw_that_is_not_size_over_time_is_refused_naming_the_result():
    """1024 B in 10 + 1.024 us is 1024 / 11.024 / 1e3 = 0.09289 GB/s; 99 GB/s was read."""
    doc = report()
    doc["results"][0]["out_of_place"]["alg_bw"] = 99.0
    with pytest.raises(sc.InvalidInputError, match=(
            r"^results\[0\]\.out_of_place\.alg_bw: 99 GB/s is not size / time = 1024 B / "
            r"11\.024 us = 0\.09289 GB/s, to the 6 decimals nccl-tests writes")):
        sc.nccl_tests.parse(json.dumps(doc))
    doc = report()
    doc["results"][2]["in_place"]["alg_bw"] *= 1.001   # 16384 B / 27.384 us, 0.1% fast
    with pytest.raises(sc.InvalidInputError, match=r"^results\[2\]\.in_place\.alg_bw: "):
        sc.nccl_tests.parse(json.dumps(doc))


def _six_decimals(doc):
    """The report as nccl-tests writes it: every double with %lf (jsonDouble, util.cu)."""
    return re.sub(r"(\d+\.\d+(?:e-?\d+)?)", lambda m: f"{float(m[1]):f}", json.dumps(doc))


def test_alg_bw_is_checked_to_the_six_decimals_nccl_tests_writes():
    """8 B in 10.008 us is 0.00079936 GB/s, written 0.000799; 0.000801 is off by more
    than the rounding of either number (5e-7)."""
    doc = report(sizes=(8, 1024))
    doc["results"][0]["count"] = 2
    text = _six_decimals(doc)
    assert '"alg_bw": 0.000799,' in text and '"time": 10.008000,' in text
    assert sc.nccl_tests.parse(text).sizes == (8, 1024)
    bad = text.replace('"alg_bw": 0.000799,', '"alg_bw": 0.000801,', 1)
    with pytest.raises(sc.InvalidInputError, match=r"results\[0\]\.out_of_place\.alg_bw: "
                                                   r"0\.000801 GB/s is not"):
        sc.nccl_tests.parse(bad)


def test_a_cpu_time_is_not_checked_against_alg_bw():
    """-C 1 reports the CPU time; alg_bw still comes from the GPU's (here half of it)."""
    doc = report(key="cpu_time")
    for result in doc["results"]:
        for place in ("out_of_place", "in_place"):
            result[place]["cpu_time"] *= 2
    assert sc.nccl_tests.parse(json.dumps(doc)).cputime


def test_only_hypercube_may_print_a_short_alg_bw():
    """hypercube prints (p - 1) / p of size / time as its algbw; all_gather since 2.10
    (and so every report, 2.17.3 on) prints it whole."""
    for program, accepted in (("all_gather_perf", False), ("hypercube_perf", True)):
        doc = report(program=program, sizes=(4096,))
        doc["results"][0].update(redop="none", count=256)
        for place in ("out_of_place", "in_place"):
            doc["results"][0][place]["alg_bw"] *= (P - 1) / P
        if accepted:
            assert sc.nccl_tests.parse(json.dumps(doc)).collective == "hypercube"
        else:
            with pytest.raises(sc.InvalidInputError, match=r"results\[0\]\.out_of_place"
                                                           r"\.alg_bw"):
                sc.nccl_tests.parse(json.dumps(doc))


def test_simcoll_runs_report_passes_the_check(tmp_path, capsys):
    path = tmp_path / "ag.json"
    status, _, err = cli(capsys, "run", "--topology", "switch:4", "--collective",
                         "all_gather", "-b", "1K", "-e", "1M", "-f", "8", "-J", str(path))
    assert status == 0, err
    assert sc.nccl_tests.parse(path.read_text()).sizes == (1024, 8192, 65536, 524288)


def test_a_compact_reports_row_errors_name_the_result_not_line_1():
    doc = report(sizes=(1024, 4096))
    doc["results"][1]["count"] = 100
    with pytest.raises(sc.InvalidInputError) as info:
        sc.nccl_tests.parse(json.dumps(doc))
    assert str(info.value) == ("results[1]: size 4096 B is not its count 100 x 4 B (float) = "
                               "400 B: a corrupted or hand-edited report; fix or drop the "
                               "result")
    doc = report(sizes=(1024, 4096))
    doc["results"][1]["redop"] = "none"
    with pytest.raises(sc.InvalidInputError, match=(
            r"^results\[1\]: redop 'none', where all_reduce prints a reduction \(sum, prod, "
            r"max, min, avg\): the result is another collective's")):
        sc.nccl_tests.parse(json.dumps(doc))
