"""sc.compare and ``simcoll compare``: a measured table beside the same sizes simulated.

The simulated times are checked against the ring's time worked out by hand on a switch
(each of the 2(p - 1) steps crosses two links: 2 latencies, then a block at the link
rate), the errors and busbw against nccl-tests' definitions, and bad input is refused
before anything is simulated.
"""

from __future__ import annotations

import codecs
import dataclasses
import io
import json
import math

import numpy as np
import pytest

import simcoll as sc
import simcoll.comparison
from simcoll.cli import main
from simcoll.errors import InvalidInputError, UnknownCollectiveError
from simcoll.nccl_tests import Measurement, NcclTestsRow, NcclTestsTable, parse

P, BANDWIDTH, LATENCY = 4, 50 * sc.GB, 2 * sc.us
SIZES = (4096, 1 << 20, 64 << 20)
FACTORS = (1.25, 0.8, 1.0)   # measured = the ring's time x these


def ring_all_reduce_time(size: int) -> float:
    return 2 * (P - 1) * (2 * LATENCY + size / P / BANDWIDTH)


def ring_all_gather_time(size: int) -> float:
    return (P - 1) * (2 * LATENCY + size / P / BANDWIDTH)


def row(size: int, time: float, *, line: int, root: int = -1, busbw: float = 0.0,
        in_place: float | None = None) -> NcclTestsRow:
    out = Measurement(time * 1e6, 0.0, busbw, None)
    inside = None if in_place is None else Measurement(in_place * 1e6, 0.0, busbw, None)
    return NcclTestsRow(size, size // 4, "float", "sum", root, out, inside, line)


def made_table(collective: str = "all_reduce", nranks: int | None = P,
               times=ring_all_reduce_time) -> NcclTestsTable:
    rows = tuple(row(s, times(s) * f, line=i + 1, busbw=float(i + 1),
                     in_place=times(s))
                 for i, (s, f) in enumerate(zip(SIZES, FACTORS)))
    return NcclTestsTable(rows, collective, nranks)


def machine() -> sc.Topology:
    return sc.topology.switch(P, bandwidth=BANDWIDTH, latency=LATENCY)


def test_every_field_against_the_hand_worked_ring():
    found = sc.compare(machine(), made_table())
    assert (found.collective, found.algorithm, found.topology, found.nranks, found.place) \
        == ("all_reduce", "ring", "switch(4)", P, "out_of_place")
    assert found.sizes == SIZES
    assert found.simulated == pytest.approx([ring_all_reduce_time(s) for s in SIZES],
                                            rel=1e-12)
    assert found.measured == pytest.approx([ring_all_reduce_time(s) * f
                                           for s, f in zip(SIZES, FACTORS)], rel=1e-9)
    assert found.error == pytest.approx([1 / f - 1 for f in FACTORS], rel=1e-9)
    # exp(mean |log f|) - 1 with |log 1.25| = |log 0.8| and log 1 = 0: 1.25^(2/3) - 1
    assert found.geomean_error == pytest.approx(1.25 ** (2 / 3) - 1, rel=1e-9)
    assert found.measured_busbw == pytest.approx([1e9, 2e9, 3e9])
    assert found.busbw_factor == pytest.approx(2 * (P - 1) / P)
    assert found.simulated_busbw == pytest.approx(
        [s / ring_all_reduce_time(s) * 2 * (P - 1) / P for s in SIZES], rel=1e-12)
    assert found.params == ({}, {}, {}) and found.choices == ("", "", "")


def test_a_machine_1e19_times_too_fast_is_reported():
    """Links of 1e30 B/s: simulated times 2e19 to 5e21 times below the measured ones
    (relative errors that round to -1); the geometric mean of their factors, worked out
    here from their logarithms, is printed, not a math domain error."""
    fast = sc.topology.switch(P, bandwidth=1e30, latency=0)
    found = sc.compare(fast, made_table())
    logs = [math.log(m) - math.log(s) for s, m in zip(found.simulated, found.measured)]
    assert min(logs) > math.log(1e19)
    geomean = math.exp(sum(logs) / len(logs)) - 1
    assert math.isfinite(geomean)
    assert found.geomean_error == pytest.approx(geomean, rel=1e-9)
    assert f"{found.geomean_error:.1%}" in found.report()
    assert json.loads(json.dumps(found.to_dict()))["geomean_error"] == found.geomean_error


@pytest.mark.parametrize("workers", [1, 2])
def test_a_size_past_the_run_limit_is_named(workers):
    """until=1 ms: the ring takes 6 (2 alpha + S / 4 / B) = 2.04 ms at 64 MiB, 55 us at
    1 MiB, so the largest size alone stops; the error named no size."""
    assert ring_all_reduce_time(64 << 20) > 1e-3 > ring_all_reduce_time(1 << 20)
    with pytest.raises(sc.RunLimitError, match=r"^at size 67108864 B \(float32\): "
                                               r"all_reduce/ring reached the simulated-time "
                                               r"limit until=0\.001 s") as caught:
        sc.compare(machine(), made_table(), until=1e-3, workers=workers)
    assert caught.value.running == ["rank 0", "rank 1", "rank 2", "rank 3"]
    # a refusal of the arguments is no size's: not put down to the first
    for kwargs in ({"network": "nope"}, {"chunks": 0}):
        with pytest.raises(sc.InvalidInputError) as refused:
            sc.compare(machine(), made_table(), workers=workers, **kwargs)
        assert not str(refused.value).startswith("at size")


def test_in_place_times_and_another_collective():
    found = sc.compare(machine(), made_table(), place="in_place")
    assert found.place == "in_place"
    assert found.error == pytest.approx([0, 0, 0], abs=1e-9)
    assert found.geomean_error == pytest.approx(0, abs=1e-9)
    # all_gather's size column is p times a rank's input
    gather = sc.compare(machine(), made_table("all_gather", times=ring_all_gather_time))
    assert gather.collective == "all_gather"
    assert gather.simulated == pytest.approx([ring_all_gather_time(s) for s in SIZES],
                                             rel=1e-12)
    assert gather.busbw_factor == pytest.approx((P - 1) / P)
    # the table's own collective is taken unless one is named
    named = sc.compare(machine(), made_table(collective=None), collective="all_reduce")
    assert named.simulated == pytest.approx([ring_all_reduce_time(s) for s in SIZES])


def test_a_rooted_collective_runs_from_each_rows_root():
    # gpu0's link is ten times slower: a broadcast from rank 0 pushes its data through
    # it, one from rank 2 only delivers rank 0's copy through it.
    topo = sc.Topology("uneven")
    topo.add_switch("switch")
    for r in range(3):
        topo.add_gpu(f"gpu{r}")
        topo.add_link(f"gpu{r}", "switch", bandwidth=(5 if r == 0 else 50) * sc.GB,
                      latency=1 * sc.us)
    rows = tuple(row(1 << 20, 1e-4, line=i + 1, root=root) for i, root in enumerate((0, 2)))
    found = sc.compare(topo, NcclTestsTable(rows, "broadcast", 3), algorithm="binomial")
    direct = [sc.simulate(topo, "broadcast", algorithm="binomial", nbytes=1 << 20,
                          root=root).time for root in (0, 2)]
    assert found.simulated == pytest.approx(direct, rel=1e-12)
    assert direct[0] != pytest.approx(direct[1], rel=0.01)


def test_nccl_choices_per_size():
    rows = tuple(row(s, 1e-4, line=i + 1) for i, s in enumerate((8, 64 << 20)))
    found = sc.compare(sc.topology.dgx_h100(1), NcclTestsTable(rows, "all_reduce", 8),
                       algorithm="nccl")
    for params, chosen in zip(found.params, found.choices):
        assert chosen == f"{params['algo']} {params['proto']} {params['channels']}"
    # NCCL runs LL at 8 B (the lowest latency) and Simple at 64 MiB
    assert [p["proto"] for p in found.params] == ["LL", "Simple"]
    lines = found.report().splitlines()
    assert lines[1].split()[-3:] == ["algo", "proto", "channels"]
    # each title over its column ('ring LL 1' was joined by single spaces)
    for word, at in (("algo", 0), ("proto", 1), ("channels", 2)):
        column = lines[1].index(f" {word}") + 1
        assert [line[column:].split()[0] for line in lines[2:4]] == [
            str(p[("algo", "proto", "channels")[at]]) for p in found.params], word


def test_report_and_dict():
    found = sc.compare(machine(), made_table())
    text = found.report()
    lines = text.splitlines()
    for size, m, s, e in zip(SIZES, found.measured, found.simulated, found.error):
        line = next(x for x in lines if x.split() and x.split()[0] == str(size))
        fields = line.split()
        assert float(fields[1]) == pytest.approx(m * 1e6, abs=0.006)
        assert float(fields[2]) == pytest.approx(s * 1e6, abs=0.006)
        assert fields[3] == f"{e:+.1%}"
    assert lines[-2].startswith(f"geometric-mean |time error|: "
                                f"{1.25 ** (2 / 3) - 1:.1%} over 3 sizes")
    assert lines[-1] == (f"  = exp(mean |ln(simulated / measured)|) - 1: on average the "
                         f"times differ by a factor of {1.25 ** (2 / 3):.3f}")
    assert all(line == line.rstrip() for line in lines)
    record = json.loads(json.dumps(found.to_dict()))
    assert record["simulated"] == list(found.simulated)
    assert record["error"] == pytest.approx(list(found.error))
    assert record["geomean_error"] == pytest.approx(found.geomean_error)
    assert record["simulated_busbw"] == pytest.approx(list(found.simulated_busbw))
    assert {k: record[k] for k in ("collective", "algorithm", "nranks", "place", "sizes")} \
        == {"collective": "all_reduce", "algorithm": "ring", "nranks": P,
            "place": "out_of_place", "sizes": list(SIZES)}


@pytest.fixture
def no_simulation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("simulated before the inputs were checked")
    monkeypatch.setattr(simcoll.comparison, "simulate", refuse)


def test_bad_input_is_refused_before_simulating(no_simulation):
    table = made_table()
    with pytest.raises(InvalidInputError, match="no rows"):
        sc.compare(machine(), table.between(2**40))
    with pytest.raises(InvalidInputError, match="measured on 4 ranks, but the machine has 8"):
        sc.compare(sc.topology.switch(8), table)
    with pytest.raises(InvalidInputError, match="pass collective="):
        sc.compare(machine(), made_table(collective=None))
    with pytest.raises(UnknownCollectiveError):
        sc.compare(machine(), table, collective="allreduce")
    with pytest.raises(InvalidInputError, match=r"sizes \[8\] give each of the 4 ranks "
                                                r"no whole element of all_gather"):
        sc.compare(machine(), NcclTestsTable((row(8, 1e-5, line=1),), "all_gather", P))
    with pytest.raises(InvalidInputError, match="place 'inplace' is not"):
        sc.compare(machine(), table, place="inplace")
    without = NcclTestsTable((row(4096, 1e-5, line=7),), "all_reduce", P)
    with pytest.raises(InvalidInputError, match="size 4096 \\(line 7\\) has no in-place"):
        sc.compare(machine(), without, place="in_place")
    with pytest.raises(InvalidInputError, match="topology='switch:4' is not a Topology"):
        sc.compare("switch:4", table)
    with pytest.raises(sc.UnknownAlgorithmError, match="^unknown algorithm 'nope' for "
                                                       "'all_reduce'"):
        sc.compare(machine(), table, algorithm="nope")
    # A type or redop nccl-tests never prints (a hand-edited log) ran as float32 and as a
    # sum without a word.
    out = Measurement(10.0, 0.0, 0.0, None)
    for typo, words in (({"type": "flaot"}, "has type 'flaot', none nccl-tests prints"),
                        ({"redop": "xor"}, "has redop 'xor', none nccl-tests prints")):
        fields = {"type": "float", "redop": "sum", **typo}
        odd = NcclTestsRow(4096, 1024, fields["type"], fields["redop"], -1, out, None, 9)
        with pytest.raises(InvalidInputError, match=rf"the row of size 4096 \(line 9\) {words}"):
            sc.compare(machine(), NcclTestsTable((odd,), "all_reduce", P))
    # What each row gives: nbytes= and dtype= raised simulate()'s TypeError ("multiple
    # values"), op= overrode every row's op without a word.
    for given in ({"nbytes": 8}, {"dtype": "float16"}, {"op": "max"}, {"root": 0}):
        name = next(iter(given))
        refused = f"{name}= cannot be given: each row of the table gives"
        with pytest.raises(InvalidInputError, match=refused):
            sc.compare(machine(), table, **given)
        with pytest.raises(InvalidInputError, match=refused):
            sc.calibrate("switch:4", table, free={"latency": (1e-6, 0, 1e-3)}, **given)
    # One GPU simulates in no time (nccl-tests times a copy): the error was -100% and
    # the report, the geometric mean and calibrate failed with ZeroDivisionError.
    one = NcclTestsTable((row(4096, 4e-6, line=1),), "all_reduce", 1)
    with pytest.raises(InvalidInputError, match="the machine has one GPU"):
        sc.compare(sc.topology.switch(1), one)
    with pytest.raises(InvalidInputError, match="the machine has one GPU"):
        sc.calibrate(lambda bandwidth: sc.topology.switch(1, bandwidth=bandwidth), one,
                     free={"bandwidth": (1e9, 1e8, 1e10)})
    for bad in ("x", None, table.rows):
        with pytest.raises(InvalidInputError, match="give a parsed nccl-tests table"):
            sc.compare(machine(), bad)
        with pytest.raises(InvalidInputError, match="give a parsed nccl-tests table"):
            sc.calibrate(machine, bad, free={"bandwidth": (1e9, 1e8, 1e10)})


def test_geomean_error_by_hand():
    geomean_error = simcoll.comparison.geomean_error
    assert geomean_error([2.0, 1.0], [1.0, 2.0]) == pytest.approx(1.0)   # x2, x1/2
    assert geomean_error([3e-6], [3e-6]) == 0.0
    assert geomean_error([1.21, 5.0], [1.0, 5.0]) == pytest.approx(0.1)   # sqrt(1.21)
    # a time 1e-20 of the other: its relative error rounds to -1, its factor is 1e20
    assert geomean_error([1e-25, 1.0], [1e-5, 1.0]) == pytest.approx(1e10, rel=1e-9)
    # factors past a float's range, and a time of 0 against one that is not
    assert geomean_error([1e-300], [1e300]) == math.inf
    assert geomean_error([0.0, 1.0], [1e-6, 1.0]) == math.inf
    with pytest.raises(ValueError):
        geomean_error([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="needs one time or more"):
        geomean_error([], [])


def cli(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def log(tmp_path, capsys):
    """A table printed by `simcoll run` on a 4-rank switch at 50 GB/s and 2 us."""
    assert main(["run", "--topology", "switch:ranks=4,bandwidth=50GB/s,latency=2us",
                 "-b", "4K", "-e", "64M", "-f", "16"]) == 0
    path = tmp_path / "ring.txt"
    path.write_text(capsys.readouterr().out)
    return path


def test_command_line_on_the_machine_that_printed_the_log(capsys, log):
    # the same machine lands on its own printed times, to their rounding (2 decimals)
    status, out, err = cli(capsys, "compare", str(log), "--topology",
                           "switch:ranks=4,bandwidth=50GB/s,latency=2us", "--json")
    assert status == 0 and not err
    record = json.loads(out)
    sizes = [4096, 65536, 1 << 20, 16 << 20]   # -e 64M stops at 16 MiB
    assert record["sizes"] == sizes
    assert record["simulated"] == pytest.approx([ring_all_reduce_time(s) for s in sizes],
                                                rel=1e-12)
    assert record["measured"] == pytest.approx(record["simulated"], abs=0.006e-6)
    assert record["spec"] == "switch:ranks=4,bandwidth=50GB/s,latency=2us"
    assert record["topology"] == sc.topology.switch(4).name
    # half the bandwidth: the largest size takes nearly twice as long
    status, out, err = cli(capsys, "compare", str(log), "--topology",
                           "switch:ranks=4,bandwidth=25GB/s,latency=2us",
                           "--min-size", "1M")
    assert status == 0 and not err
    lines = out.splitlines()
    assert lines[0].startswith("# simcoll compare: all_reduce / ring on switch:ranks=4,"
                               "bandwidth=25GB/s,latency=2us, 2 sizes of ")
    last = next(x for x in lines if x.split() and x.split()[0] == str(16 << 20)).split()
    expected = (2 * (P - 1) * (2 * LATENCY + (16 << 20) / P / (25 * sc.GB))
                / ring_all_reduce_time(16 << 20) - 1)
    assert last[3] == f"{expected:+.1%}"
    assert 0.9 < expected < 1.0


def test_simcoll_runs_own_table_compared_with_other_settings_says_so(capsys, tmp_path):
    """A table `simcoll run --param chunks=4` printed, compared without chunks=4, was 56%
    off at 1 MiB with no word of why; its first line says what it simulated, which the
    comparison now holds its own settings to (its parameters in any order)."""
    assert main(["run", "--topology", "switch:4", "--algorithm", "nccl", "--param",
                 "proto=Simple", "--param", "channels=2", "-b", "1M", "-e", "8M",
                 "-f", "8"]) == 0
    path = tmp_path / "simple.txt"
    path.write_text(capsys.readouterr().out)
    assert parse(path.read_text()).simcoll_run == \
        "nccl, network flow, params: proto=Simple channels=2"
    status, out, _ = cli(capsys, "compare", str(path), "--topology", "switch:4",
                         "--algorithm", "nccl", "--json")
    record = json.loads(out)
    assert status == 0 and "the log is simcoll run's table of nccl, network flow, params: " \
        "proto=Simple channels=2; this simulates nccl, network flow, params: none: give " \
        "the same --algorithm, --network and --param to compare it with its own run" \
        in record["notes"]
    status, out, _ = cli(capsys, "compare", str(path), "--topology", "switch:4",
                         "--algorithm", "nccl", "--param", "channels=2", "--param",
                         "proto=Simple", "--json")
    record = json.loads(out)
    assert status == 0 and not any("simcoll run's table" in n for n in record["notes"])
    assert record["measured"] == pytest.approx(record["simulated"], abs=0.006e-6)


def test_command_line_takes_the_logs_nccl_release(capsys, tmp_path):
    assert main(["run", "--topology", "switch:4", "--algorithm", "nccl", "-b", "8",
                 "-e", "1K", "-f", "128"]) == 0
    text = ("# nccl-tests version 2.15.0 nccl-headers=22602 nccl-library=22602\n"
            + capsys.readouterr().out)
    assert parse(text).nccl_version == "2.26.2"
    path = tmp_path / "nccl.txt"
    path.write_text(text)
    status, out, err = cli(capsys, "compare", str(path), "--topology", "switch:4",
                           "--algorithm", "nccl", "--json")
    assert status == 0 and not err
    record = json.loads(out)
    assert record["notes"] == ["NCCL 2.26.2's tuner chooses, as in the log"]
    assert [p["tuner"] for p in record["params"]] == ["2.26.2", "2.26.2"]
    direct = [sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="nccl",
                          nbytes=n, dtype=np.float32, tuner="2.26.2").time for n in (8, 1024)]
    assert record["simulated"] == pytest.approx(direct, rel=1e-12)
    # a release whose tuner simcoll does not have: the default's chooses, and it says so
    newer = tmp_path / "newer.txt"
    newer.write_text(text.replace("nccl-library=22602", "nccl-library=23102"))
    status, out, err = cli(capsys, "compare", str(newer), "--topology", "switch:4",
                           "--algorithm", "nccl", "--json")
    record = json.loads(out)
    assert record["notes"] == ["the log ran NCCL 2.31.2, whose tuner simcoll does not have "
                               "(2.30.7, 2.26.2); 2.30.7's chooses"]
    assert {p["tuner"] for p in record["params"]} == {"2.30.7"}
    # an explicit tuner wins over the log's
    status, out, err = cli(capsys, "compare", str(path), "--topology", "switch:4",
                           "--algorithm", "nccl", "--param", "tuner=2.30.7", "--json")
    record = json.loads(out)
    assert record["params"][0]["tuner"] == "2.30.7"
    # (the log, simcoll's own table, was made without --param: said, and nothing else)
    assert record["notes"] == ["the log is simcoll run's table of nccl, network flow, "
                               "params: none; this simulates nccl, network flow, params: "
                               "tuner=2.30.7: give the same --algorithm, --network and "
                               "--param to compare it with its own run"]


def test_command_line_names_nccl_variables_it_does_not_read(capsys, tmp_path, monkeypatch):
    """simcoll run applies NCCL_PROTO; compare simulated NCCL's own choice beside it with
    no word (the log's run may have set other variables than this shell)."""
    assert main(["run", "--topology", "switch:4", "--algorithm", "nccl", "-b", "8",
                 "-e", "8"]) == 0
    path = tmp_path / "nccl.txt"
    path.write_text(capsys.readouterr().out)
    monkeypatch.setenv("NCCL_PROTO", "Simple")
    status, out, _ = cli(capsys, "compare", str(path), "--topology", "switch:4",
                         "--algorithm", "nccl", "--json")
    record = json.loads(out)
    assert status == 0 and record["notes"] == [
        "NCCL_PROTO in the environment: not read here (the log's run had its own; give its "
        "choices with --param, such as proto=Simple)"]
    assert record["params"][0]["proto"] == "LL"


def test_command_line_leaves_out_rows_of_nothing(capsys, tmp_path):
    # 8 B of reduce_scatter on 4 ranks is no element per rank: a row of size 0
    assert main(["run", "--topology", "switch:4", "--collective", "reduce_scatter",
                 "-b", "8", "-e", "64K", "-f", "8"]) == 0
    text = capsys.readouterr().out
    assert parse(text).sizes[0] == 0
    path = tmp_path / "rs.txt"
    path.write_text(text)
    status, out, err = cli(capsys, "compare", str(path), "--topology", "switch:4", "--json")
    assert status == 0 and not err
    record = json.loads(out)
    assert record["sizes"] == [64, 512, 4096, 32768]
    assert record["notes"] == ["1 size(s) of 0 bytes left out"]
    assert max(abs(e) for e in record["error"]) < 0.01   # the printed times' rounding


def test_command_line_runs_a_collectives_default_algorithm(capsys, tmp_path):
    # a gather log (no ring for gather) compares with binomial unless told otherwise
    assert main(["run", "--topology", "switch:4", "--collective", "gather", "--root", "2",
                 "-b", "1K", "-e", "1M", "-f", "32"]) == 0
    path = tmp_path / "gather.txt"
    path.write_text(capsys.readouterr().out)
    status, out, err = cli(capsys, "compare", str(path), "--topology", "switch:4", "--json")
    assert status == 0 and not err
    record = json.loads(out)
    assert (record["collective"], record["algorithm"]) == ("gather", "binomial")
    direct = [sc.simulate(sc.topology.switch(4), "gather", algorithm="binomial", root=2,
                          nbytes=size // 4).time for size in record["sizes"]]
    assert record["simulated"] == pytest.approx(direct, rel=1e-12)


def test_command_line_leaves_out_times_printed_as_zero(capsys, tmp_path):
    spec = "switch:ranks=4,bandwidth=1TB/s,latency=0"
    assert main(["run", "--topology", spec, "-b", "64", "-e", "64K", "-f", "32"]) == 0
    path = tmp_path / "fast.txt"
    path.write_text(capsys.readouterr().out)
    assert parse(path.read_text()).rows[0].out_of_place.time_us == 0.0
    status, out, err = cli(capsys, "compare", str(path), "--topology", spec, "--json")
    assert status == 0 and not err
    record = json.loads(out)
    # 64 B and 2 KiB take 0.1 and 3 ns: printed 0.00
    assert record["sizes"] == [65536]
    assert record["notes"] == ["2 size(s) with a time printed as 0.00 us left out"]


def test_command_line_refuses_a_log_with_nothing_to_compare(capsys, tmp_path):
    # one GPU: every size takes no time
    assert main(["run", "--topology", "switch:1", "-b", "64", "-e", "1K", "-f", "4"]) == 0
    path = tmp_path / "one.txt"
    path.write_text(capsys.readouterr().out)
    status, out, err = cli(capsys, "compare", str(path), "--topology", "switch:1")
    assert status == 2 and not out
    assert "no row of the log has both a size and a time above 0 to compare with (its 3 " \
           "row(s): sizes of 0 bytes, or times printed as 0.00)" in err


@pytest.mark.parametrize("argv,message", [
    (["nowhere.txt", "--topology", "switch:4"], "no log at nowhere.txt"),
    # a folder said "[Errno 21] Is a directory"
    ([".", "--topology", "switch:4"], ". is a directory; give the log file nccl-tests "
                                      "printed (or - for standard input)"),
    (["LOG", "--topology", "switch:8"], "measured on 4 ranks, but the machine has 8"),
    (["LOG", "--topology", "switch:4", "--run", "2"], "--run 2: the log holds 1 run"),
    (["LOG", "--topology", "switch:4", "--workers", "-2"],
     "argument --workers: '-2' is not accepted; give a whole number of processes"),
    (["LOG", "--topology", "switch:4", "--min-size", "1G"], "no size of the log lies"),
    (["LOG", "--topology", "swtich:4"], "unknown topology builder 'swtich'"),
    (["LOG", "--topology", "switch:4", "--param", "algorithm=naive"],
     "--param algorithm= is not an algorithm parameter but an argument of the run; use "
     "--algorithm"),
    (["LOG", "--topology", "switch:4", "--param", "place=in_place"],
     "--param place= is not an algorithm parameter"),
    # the rows give them: there is no --op to point to
    (["LOG", "--topology", "switch:4", "--param", "op=prod"],
     "--param op= is not an algorithm parameter: each row of the log gives its own "
     "reduction op, as nccl-tests ran it"),
    (["LOG", "--topology", "switch:4", "--param", "dtype=int8"],
     "each row of the log gives its own element type"),
])
def test_command_line_errors(capsys, log, argv, message):
    argv = [str(log) if a == "LOG" else a for a in argv]
    status, out, err = cli(capsys, "compare", *argv)
    assert status == 2 and not out
    assert message in err and err.startswith("simcoll compare: error: ")
    assert len(err.strip().splitlines()) == 1


def test_progress_bar_of_the_sizes(capsys):
    sc.compare(machine(), made_table(), progress=True)
    err = capsys.readouterr().err
    assert "compare all_reduce" in err and "3/3" in err
    sc.compare(machine(), made_table(), progress=False)
    assert capsys.readouterr().err == ""
    sc.compare(machine(), made_table(), progress=np.bool_(True))   # as check= takes it
    assert "3/3" in capsys.readouterr().err


@pytest.mark.parametrize("progress", ["yes", 1, 1.0])
def test_bad_progress_is_refused_before_simulating(no_simulation, progress):
    with pytest.raises(InvalidInputError, match=f"progress={progress!r} is not accepted"):
        sc.compare(machine(), made_table(), progress=progress)


def test_plot_draws_both_panels_from_the_times(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = sc.compare(machine(), made_table())
    fig = sc.plot.comparison(found, save=tmp_path / "compare.png")
    assert (tmp_path / "compare.png").stat().st_size > 0
    upper, lower = fig.axes
    measured, simulated = upper.get_lines()
    factor = 2 * (P - 1) / P
    assert list(measured.get_xdata()) == list(SIZES)
    assert measured.get_ydata() == pytest.approx(
        [s * factor / (ring_all_reduce_time(s) * f) / 1e9 for s, f in zip(SIZES, FACTORS)])
    assert simulated.get_ydata() == pytest.approx(
        [s * factor / ring_all_reduce_time(s) / 1e9 for s in SIZES])
    ratio = lower.get_lines()[0]
    assert ratio.get_ydata() == pytest.approx([1 / f for f in FACTORS])
    low, high = lower.get_ylim()
    assert low <= 0.8 and high >= 1.25 and (low, high) == (0.5, 2.0)
    assert " ".join(upper.get_title().split()) == (
        f"all_reduce / ring on {machine().name}: geometric-mean |time error| "
        f"{1.25 ** (2 / 3) - 1:.1%} (times a factor of {1.25 ** (2 / 3):.2f} apart)")
    plt.close(fig)
    # on axes of the caller's, with its title
    fig, axes = plt.subplots(2, 1)
    assert sc.plot.comparison(found, axes=tuple(axes), title="mine") is fig
    assert axes[0].get_title() == "mine" and len(axes[0].get_lines()) == 2
    plt.close(fig)


def test_a_log_busbw_axis_of_a_decade_or_two_labels_its_ticks_as_plain_numbers():
    # Over 1.5 decades matplotlib labelled minor ticks too, as "4x10^2" beside a plain
    # "100"; every label is now a plain number, and minor ticks go unlabelled.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = (65536, 1 << 18, 1 << 20, 1 << 22)
    table = NcclTestsTable(tuple(row(s, ring_all_reduce_time(s), line=i + 1, busbw=1.0)
                                 for i, s in enumerate(sizes)), "all_reduce", P)
    fig = sc.plot.comparison(sc.compare(machine(), table))
    upper = fig.axes[0]
    fig.canvas.draw()
    busbw = [s * 2 * (P - 1) / P / ring_all_reduce_time(s) / 1e9 for s in sizes]
    assert 10 <= max(busbw) / min(busbw) < 10 ** 2.5 and upper.get_yscale() == "log"
    labels = [t.get_text() for t in upper.get_yticklabels() if t.get_text()]
    assert len(labels) >= 3
    for label in labels:
        float(label)  # "2", "5", "10", "20", "50": no mathtext
    low, high = upper.get_ylim()
    assert low <= min(busbw) and high >= max(busbw)
    assert not any(t.get_text() for t in upper.get_yticklabels(minor=True))
    plt.close(fig)


def test_plot_refuses_bad_input_before_drawing(tmp_path):
    with pytest.raises(InvalidInputError, match="is not a Comparison"):
        sc.plot.comparison({"sizes": [1]})
    found = sc.compare(machine(), made_table())
    with pytest.raises(InvalidInputError, match="cannot save a figure as"):
        sc.plot.comparison(found, save=tmp_path / "compare.txt")
    assert not (tmp_path / "compare.txt").exists()


def test_command_line_plot(capsys, log, tmp_path, monkeypatch):
    out = tmp_path / "compare.png"
    status, said, err = cli(capsys, "compare", str(log), "--topology", "switch:4",
                            "--plot", str(out))
    assert status == 0 and not err and out.stat().st_size > 0
    # it wrote the figure without a word, where plot, trace and sweep say what they wrote
    assert said.splitlines()[-1] == f"# figure written to {out}"
    status, said, err = cli(capsys, "compare", str(log), "--topology", "switch:4",
                            "--plot", str(out), "--json")
    assert status == 0 and err == f"# figure written to {out}\n"
    assert json.loads(said)["log"] == str(log)

    def refuse(*args, **kwargs):
        raise AssertionError("simulated before the arguments were checked")
    monkeypatch.setattr(simcoll.comparison, "simulate", refuse)
    status, out_text, err = cli(capsys, "compare", str(log), "--topology", "switch:4",
                                "--plot", str(tmp_path / "compare.txt"))
    assert status == 2 and not out_text
    assert "--plot" in err and "use a file ending in .png, .svg, .pdf" in err


def test_rows_that_cannot_be_compared_are_refused_before_simulating(no_simulation):
    zero = NcclTestsTable((row(4096, 0.0, line=3),), "all_reduce", P)
    with pytest.raises(InvalidInputError, match=r"size 4096 \(line 3\) has an out-of-place "
                                                r"time of 0.0 s; a time above 0"):
        sc.compare(machine(), zero)
    far = NcclTestsTable((row(4096, 1e-5, line=5, root=7),), "broadcast", P)
    with pytest.raises(InvalidInputError, match=r"size 4096 \(line 5\) has root 7, but the "
                                                r"machine has 4 ranks"):
        sc.compare(machine(), far, algorithm="binomial")


def test_worker_processes_give_the_same_comparison():
    rows = tuple(row(s, 1e-4, line=i + 1) for i, s in enumerate((8, 64 << 10, 4 << 20)))
    table = NcclTestsTable(rows, "all_reduce", 8)
    here = sc.compare(sc.topology.dgx_h100(1), table, algorithm="nccl")
    spread = sc.compare(sc.topology.dgx_h100(1), table, algorithm="nccl", workers=2)
    assert spread == here and spread.params == here.params


@pytest.mark.parametrize("workers", [0, True, 1.5, "2"])
def test_bad_workers_are_refused_before_simulating(no_simulation, workers):
    with pytest.raises(InvalidInputError, match=f"workers={workers!r} is not accepted; use "
                                                f"an integer >= 1"):
        sc.compare(machine(), made_table(), workers=workers)


def test_a_machine_that_does_not_pickle_is_refused_before_simulating(no_simulation):
    topo = machine()
    topo.note = lambda: "a lambda does not pickle"
    with pytest.raises(InvalidInputError, match="cannot be sent to worker processes "
                                                r".*use workers=1"):
        sc.compare(topo, made_table(), workers=2)


def test_command_line_workers(capsys, log):
    args = ["compare", str(log), "--topology", "switch:4", "--json"]
    status, here, _ = cli(capsys, *args)
    status2, spread, _ = cli(capsys, *args, "--workers", "2")
    assert status == status2 == 0 and json.loads(here) == json.loads(spread)


def test_ctrl_c_ends_the_worker_processes_at_once(monkeypatch):
    import contextlib
    import multiprocessing
    import time

    class Interrupting:
        def update(self):
            raise KeyboardInterrupt

    monkeypatch.setattr(simcoll.comparison, "progress_bar",
                        lambda *args, **kwargs: contextlib.nullcontext(Interrupting()))
    rows = tuple(row(s, 1e-3, line=i + 1) for i, s in enumerate((8, 4 << 30, 4 << 30)))
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        sc.compare(sc.topology.dgx_h100(2), NcclTestsTable(rows, "all_reduce", 16),
                   algorithm="nccl", workers=2)
    # the first size's result raised; the 4 GiB runs on 16 GPUs (about 20 s each here)
    # were not waited for
    assert time.perf_counter() - start < 5
    assert multiprocessing.active_children() == []


def test_plot_of_one_size_shows_its_points():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    one = NcclTestsTable((row(3000, 20e-6, line=1),), "all_reduce", P)
    found = sc.compare(machine(), one)
    fig = sc.plot.comparison(found)
    upper, lower = fig.axes
    assert upper.get_yscale() == "linear"          # 0.225 and 0.372 GB/s: under a decade
    assert all(line.get_marker() == "s" for line in (upper.get_lines()[1],
                                                     lower.get_lines()[0]))
    assert list(lower.get_xticks()) == [3000]      # no power of 2 among the sizes
    plt.close(fig)
    two = NcclTestsTable((row(1024, 20e-6, line=1), row(1 << 26, 900e-6, line=2)),
                         "all_reduce", P)
    fig = sc.plot.comparison(sc.compare(machine(), two))
    upper, lower = fig.axes
    measured, simulated = upper.get_lines()[:2]
    # Nothing was simulated between 1 KiB and 64 MiB: the points are joined dotted; the
    # measured ones are drawn over the simulated ones.
    assert simulated.get_linestyle() == ":" and lower.get_lines()[0].get_linestyle() == ":"
    assert measured.get_zorder() > simulated.get_zorder()
    plt.close(fig)


def test_to_pandas_has_a_row_per_size():
    pytest.importorskip("pandas")
    frame = sc.compare(machine(), made_table()).to_pandas()
    assert list(frame.columns) == ["size", "measured", "simulated", "error",
                                   "measured_busbw", "simulated_busbw"]
    assert frame["size"].tolist() == list(SIZES)
    assert frame["error"].tolist() == pytest.approx([1 / f - 1 for f in FACTORS])
    assert frame["simulated"].tolist() == pytest.approx(
        [ring_all_reduce_time(s) for s in SIZES], rel=1e-12)
    rows = tuple(row(s, 1e-4, line=i + 1) for i, s in enumerate((8, 4 << 20)))
    nccl = sc.compare(sc.topology.dgx_h100(1), NcclTestsTable(rows, "all_reduce", 8),
                      algorithm="nccl").to_pandas()
    assert nccl["proto"].tolist() == ["LL", "Simple"]
    assert set(nccl.columns) >= {"algo", "proto", "channels"}


def test_to_pandas_without_pandas_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"simcoll\[pandas\]"):
        sc.compare(machine(), made_table()).to_pandas()


def test_the_summary_says_what_the_geometric_mean_is():
    """Every size simulated at half its measured time: each row's error is -50%, and the
    summary (a factor of 2 either way, less 1) is 100%; the report says so."""
    rows = tuple(row(s, 2 * ring_all_reduce_time(s), line=i + 1) for i, s in enumerate(SIZES))
    found = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P))
    assert found.error == pytest.approx([-0.5] * 3, rel=1e-9)
    assert found.geomean_error == pytest.approx(1.0, rel=1e-9)
    lines = found.report().splitlines()
    assert [line.split()[3] for line in lines[2:5]] == ["-50.0%"] * 3
    assert lines[-2].startswith("geometric-mean |time error|: 100.0% over 3 sizes")
    assert lines[-1] == ("  = exp(mean |ln(simulated / measured)|) - 1: on average the times "
                         "differ by a factor of 2.000")


def test_sizes_with_wrong_values_are_named():
    rows = tuple(dataclasses.replace(r, out_of_place=Measurement(
        r.out_of_place.time_us, 0.0, 0.0, 7.0 if r.size != SIZES[0] else 0.0))
        for r in made_table().rows)
    found = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P))
    assert found.wrong == SIZES[1:] and found.sizes == SIZES
    assert found.report().splitlines()[-1] == (
        f"note: nccl-tests found wrong values (#wrong > 0) at sizes {SIZES[1]}, {SIZES[2]}: "
        f"that run computed a wrong result there; compared all the same")
    assert found.to_dict()["wrong"] == list(SIZES[1:])
    assert sc.compare(machine(), made_table()).wrong == ()


def test_command_line_names_sizes_with_wrong_values(capsys, log):
    lines = log.read_text().splitlines()
    n = [i for i, line in enumerate(lines) if line.split()[:1] == ["1048576"]][0]
    lines[n] = lines[n].replace("N/A", "  7")
    log.write_text("\n".join(lines) + "\n")
    status, out, _ = cli(capsys, "compare", str(log), "--topology",
                         "switch:ranks=4,bandwidth=50GB/s,latency=2us")
    assert status == 0
    assert ("note: nccl-tests found wrong values (#wrong > 0) at size 1048576: that run "
            "computed a wrong result there; compared all the same") in out.splitlines()


def test_a_collective_other_than_the_tables_is_refused(no_simulation):
    with pytest.raises(InvalidInputError, match="collective 'all_gather' was given, but the "
                                                "table measured 'all_reduce'"):
        sc.compare(machine(), made_table(), collective="all_gather")
    # torch's name of the same collective agrees
    with pytest.raises(AssertionError, match="simulated before"):
        sc.compare(machine(), made_table("all_gather"), collective="all_gather_into_tensor")


@pytest.fixture
def unnamed_log(log):
    """The log's rows alone: it does not say which collective it measured."""
    rows = [line for line in log.read_text().splitlines() if not line.startswith("#")]
    log.write_text("\n".join(rows) + "\n")
    return log


def test_command_line_collective_for_a_log_that_does_not_name_it(capsys, unnamed_log):
    machine_spec = "switch:ranks=4,bandwidth=50GB/s,latency=2us"
    status, out, err = cli(capsys, "compare", str(unnamed_log), "--topology", machine_spec)
    assert status == 2 and not out and err.count("\n") == 1
    assert "the log does not say which collective it measured; name it with --collective" \
        in err and "collective=" not in err
    status, out, _ = cli(capsys, "compare", str(unnamed_log), "--topology", machine_spec,
                         "--collective", "all_reduce", "--json")
    assert status == 0
    found = json.loads(out)
    assert found["collective"] == "all_reduce"
    assert max(abs(e) for e in found["error"]) < 0.001


def test_command_line_collective_must_agree_with_the_log(capsys, log):
    status, out, err = cli(capsys, "compare", str(log), "--topology", "switch:4",
                           "--collective", "all_gather_into_tensor")
    assert status == 2 and not out and err.count("\n") == 1
    assert "collective 'all_gather' was given, but the run starting at line 1 is " \
           "'all_reduce'" in err
    status, _, err = cli(capsys, "compare", str(log), "--topology", "switch:4",
                         "--collective", "allreduce")
    assert status == 2 and "unknown collective 'allreduce'" in err


# gather_perf of nccl-tests 2.13.4 - 2.16.6 (src/common.cu: the row '%12li  %12li  %8s  %6s
# %6s', then per block '  %7s  %6.2f  %6.2f  %5g'; no 'Collective test starting' line):
# none and the root, as broadcast_perf prints them. 1024 B in 5.05 us is 0.20 GB/s.
GATHER_LOG = "\n".join([
    "# nThread 1 nGpus 8 minBytes 1024 maxBytes 16384 step: 16(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0",
    "#",
    "#                                                              out-of-place          "
    "             in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong  "
    "   time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
    "    (us)  (GB/s)  (GB/s)       ",
    "        1024            32     float    none       0     5.05    0.20    0.18      0  "
    "   5.05    0.20    0.18      0",
    "       16384           512     float    none       0     5.82    2.82    2.46      0  "
    "   5.82    2.82    2.46      0",
    "# Out of bounds values : 0 OK",
    "# Avg bus bandwidth    : 1.32 ", ""])


def test_command_line_takes_the_collective_of_a_gather_log(capsys, tmp_path):
    """The columns do not tell gather from scatter: the log needs --collective, and
    gets the collective named (not broadcast)."""
    path = tmp_path / "gather.txt"
    path.write_text(GATHER_LOG)
    spec = "switch:ranks=8,bandwidth=50GB/s,latency=2us"
    status, out, err = cli(capsys, "compare", str(path), "--topology", spec)
    assert status == 2 and not out and "does not say which collective it measured" in err
    status, out, err = cli(capsys, "compare", str(path), "--topology", spec,
                           "--collective", "gather", "--json")
    assert status == 0 and not err
    record = json.loads(out)
    assert (record["collective"], record["algorithm"]) == ("gather", "binomial")
    # binomial gather to rank 0 on a switch: 3 rounds of 2 latencies, then 1, 2 and 4
    # blocks of size / 8 at the link rate
    assert record["simulated"] == pytest.approx(
        [6 * LATENCY + 7 * size / 8 / BANDWIDTH for size in (1024, 16384)], rel=1e-12)


def test_command_line_reads_utf16_and_byte_order_marks(capsys, log, tmp_path, monkeypatch):
    """Windows PowerShell 5.1's '>' writes UTF-16 with a byte-order mark (and CRLF);
    Notepad may add a UTF-8 one."""
    text = log.read_text()
    args = ["--topology", "switch:ranks=4,bandwidth=50GB/s,latency=2us", "--json"]
    expected = json.loads(cli(capsys, "compare", str(log), *args)[1])["measured"]
    for name, data in (("ps51.txt", text.replace("\n", "\r\n").encode("utf-16")),
                       ("bom.txt", codecs.BOM_UTF8 + text.encode())):
        (tmp_path / name).write_bytes(data)
        status, out, err = cli(capsys, "compare", str(tmp_path / name), *args)
        assert status == 0 and not err and json.loads(out)["measured"] == expected
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-16"))))
    status, out, _ = cli(capsys, "compare", "-", *args)
    assert status == 0 and json.loads(out)["measured"] == expected
    junk = tmp_path / "junk.txt"
    junk.write_bytes(bytes(range(256)))
    status, out, err = cli(capsys, "compare", str(junk), *args)
    assert status == 2 and not out and err.count("\n") == 1
    assert f"{junk} is not text in UTF-8 (byte 0x80 at offset 128)" in err


def test_command_line_reads_a_run_after_a_failed_one(capsys, log, tmp_path):
    text = log.read_text()
    failed = ("# Collective test starting: all_gather_perf\nnodeA: Test NCCL failure "
              "common.cu:1030 'unhandled cuda error / '\n .. nodeA pid 4242: Test failure "
              "common.cu:891\n")
    path = tmp_path / "three.txt"
    path.write_text(text + failed + text)
    args = ["--topology", "switch:ranks=4,bandwidth=50GB/s,latency=2us", "--json"]
    status, out, err = cli(capsys, "compare", str(path), "--run", "3", *args)
    assert status == 0 and not err
    assert json.loads(out)["simulated"] == pytest.approx(
        [ring_all_reduce_time(s) for s in (4096, 65536, 1 << 20, 16 << 20)], rel=1e-12)
    status, out, err = cli(capsys, "compare", str(path), "--run", "2", *args)
    assert status == 2 and "nccl-tests reported a failure" in err


def test_command_line_header_and_notes(capsys, unnamed_log):
    """One size is '1 size'; rows without the footer a run ends with are noted."""
    status, out, _ = cli(capsys, "compare", str(unnamed_log), "--topology",
                         "switch:ranks=4,bandwidth=50GB/s,latency=2us", "--collective",
                         "all_reduce", "--min-size", "16M")
    assert status == 0
    assert out.splitlines()[0].endswith(f"1 size of {unnamed_log}; the run has no '# Avg "
                                        f"bus bandwidth' footer: it may have stopped early")
    # cut inside the footer, after its colon: the same (it was refused, "found nothing")
    cut = unnamed_log.parent / "cut.txt"
    cut.write_text(unnamed_log.read_text() + "# Avg bus bandwidth    : ")
    status, again, _ = cli(capsys, "compare", str(cut), "--topology",
                           "switch:ranks=4,bandwidth=50GB/s,latency=2us", "--collective",
                           "all_reduce", "--min-size", "16M")
    assert status == 0 and again.replace(str(cut), str(unnamed_log)) == out


def test_a_size_of_eleven_digits_keeps_the_columns():
    sizes = (4096, 16 << 30)     # 17179869184
    found = sc.compare(machine(), NcclTestsTable(
        tuple(row(s, ring_all_reduce_time(s), line=i + 1) for i, s in enumerate(sizes)),
        "all_reduce", P))
    lines = found.report().splitlines()
    assert [line[:13] for line in lines[1:4]] == ["       size  ", "       4096  ",
                                                  "17179869184  "]
    assert len(lines[1]) == len(lines[2]) == len(lines[3])
    assert lines[0].index("time (us)") == 19 and lines[0].index("busbw") == 49


def test_a_report_of_one_size_says_size():
    one = NcclTestsTable((row(4096, ring_all_reduce_time(4096), line=1),), "all_reduce", P)
    report = sc.compare(machine(), one).report()
    assert "over 1 size (all_reduce" in report and "1 sizes" not in report


def test_each_row_runs_with_its_own_op_and_element_type(capsys, tmp_path):
    """A product all_reduce of simcoll's own on dgx_h100(1) (a ring: NVLS computes no
    products), compared back on the same machine, landed up to 18% off: every row ran as
    a sum (NVLS) of a stand-in type of its size (f8e4m3 as uint8, bfloat16 as float16,
    int32 as float32). Each row now runs with its own op and type: the same times to
    rounding, the same choices; and an f8e4m3 row runs FP8 (on two DGX H100 at 256 MiB
    NCCL's FP8 ring penalty makes it a tree, where uint8 ran a ring)."""
    status, out, _ = cli(capsys, "run", "--topology", "dgx_h100:1", "--algorithm", "nccl",
                         "-o", "prod", "-b", "16M", "-e", "256M", "-f", "4")
    assert status == 0
    table = sc.nccl_tests.parse(out)
    assert [row.redop for row in table.rows] == ["prod"] * 3
    res = sc.compare(sc.topology.dgx_h100(1), table, algorithm="nccl")
    assert all(abs(e) < 1e-4 for e in res.error), res.error
    assert all(choice.startswith("ring ") for choice in res.choices)
    status, out, _ = cli(capsys, "run", "--topology", "dgx_h100:2", "--algorithm", "nccl",
                         "-d", "f8e4m3", "--size", "256M")
    fp8 = sc.compare(sc.topology.dgx_h100(2), sc.nccl_tests.parse(out), algorithm="nccl")
    assert fp8.choices[0].startswith("tree ") and abs(fp8.error[0]) < 1e-4


def test_a_log_of_other_hosts_than_the_machines_nodes_is_noted(capsys, tmp_path):
    """A log of 8 ranks on two hosts (4 GPUs each) compared with one 8-GPU node ran
    without a word; the command notes the hosts against the nodes (and says nothing
    where they agree)."""
    from test_nccl_tests_parse import _split_log

    log = tmp_path / "two_hosts.txt"
    log.write_text(_split_log([0] * 8))
    status, out, _ = cli(capsys, "compare", str(log), "--topology", "switch:8")
    assert status == 0
    assert "the log's 8 ranks ran on 2 host(s), the machine's GPUs sit on 1 node(s)" in out
    status, out, _ = cli(capsys, "compare", str(log), "--topology", "cluster:2x4")
    assert status == 0 and "host(s)" not in out


def test_a_table_of_several_types_or_ops_shows_each_rows_own():
    """nccl-tests -d all (or -o all) prints a size once per type: the report showed the
    same size twice with nothing to tell the rows apart."""
    out = Measurement(10.0, 0.0, 0.0, None)
    rows = (NcclTestsRow(1024, 256, "float", "sum", -1, out, None, 1),
            NcclTestsRow(1024, 512, "half", "sum", -1, out, None, 2),
            NcclTestsRow(4096, 1024, "float", "max", -1, out, None, 3))
    got = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P))
    lines = got.report().splitlines()
    assert lines[1].split()[:4] == ["size", "type", "redop", "root"]
    assert [line.split()[:4] for line in lines[2:5]] == [
        ["1024", "float", "sum", "-"], ["1024", "half", "sum", "-"],
        ["4096", "float", "max", "-"]]
    # each title over its column: 'redop' sat over the type's padding, 'root' over redop
    for word, values in (("type", ("float", "half")), ("redop", ("sum", "max")),
                         ("root", ("-",))):
        column = lines[1].index(f" {word}") + 1
        assert all(line[column:].split()[0] in values for line in lines[2:5]), word
    assert got.to_dict()["settings"] == [["float", "sum", -1], ["half", "sum", -1],
                                         ["float", "max", -1]]
    one = sc.compare(machine(), NcclTestsTable(rows[:1], "all_reduce", P))
    assert "type redop root" not in one.report()  # one setting: nothing to tell apart
    pytest.importorskip("pandas")
    frame = got.to_pandas()   # had no column to tell the two rows of 1024 apart
    assert list(frame.columns)[:4] == ["size", "type", "redop", "root"]
    assert frame[["size", "type", "redop", "root"]].values.tolist() == [
        [1024, "float", "sum", -1], [1024, "half", "sum", -1], [4096, "float", "max", -1]]
    assert "type" not in one.to_pandas().columns


def test_a_wrong_row_of_a_table_of_several_types_is_named_with_its_type():
    """-d all: only the half row of 1024 had #wrong; the note named size 1024, which the
    float row of the same size shares. It names the row's type, redop and root, and the
    report's columns line up across types of different lengths."""
    def row(size: int, kind: str, wrong: float, line: int) -> NcclTestsRow:
        return NcclTestsRow(size, size // 4, kind, "sum", -1,
                            Measurement(10.0, 0.0, 0.0, wrong), None, line)

    rows = (row(1024, "float", 0.0, 1), row(1024, "half", 3.0, 2), row(4096, "float", 0.0, 3),
            row(4096, "bfloat16", 0.0, 4))
    got = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P))
    assert got.wrong == (1024,) and got.wrong_rows == (False, True, False, False)
    lines = got.report().splitlines()
    assert lines[-1] == ("note: nccl-tests found wrong values (#wrong > 0) at size 1024 "
                         "(half sum -): that run computed a wrong result there; compared all "
                         "the same")
    assert {line.index(" sum ") for line in lines[2:6]} == {len("      size  bfloat16")}
    assert got.to_dict()["wrong_rows"] == [False, True, False, False]


def test_a_comparison_built_without_settings_reports_every_row():
    """settings defaults to (): the report's row loop zipped it and printed no row."""
    found = sc.compare(machine(), made_table())
    bare = dataclasses.replace(found, settings=(), wrong_rows=())
    lines = bare.report().splitlines()
    assert [line.split()[0] for line in lines[2:2 + len(SIZES)]] == [str(s) for s in SIZES]


def test_compare_of_a_file_that_is_no_log_names_the_file_and_says_so(capsys, tmp_path):
    """`simcoll list`'s text given as a log: "line 56: a result row has 19 fields",
    naming neither the file nor that no nccl-tests table had begun."""
    from simcoll.cli import main

    assert main(["list"]) == 0
    listing = tmp_path / "list.txt"
    listing.write_text(capsys.readouterr().out)
    for command in (["compare", str(listing), "--topology", "switch:8"],
                    ["calibrate", str(listing), "--topology", "switch:8", "--free",
                     "latency=1us:0.1us:10us"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"simcoll {command[0]}: error: {listing}: line ")
        assert err.rstrip().endswith("(and no nccl-tests column titles came before it: is "
                                     "this an nccl-tests log?)")


def test_mut_a_log_on_standard_input_that_is_no_log_is_called_standard_input(capsys,
                                                                              monkeypatch):
    """`simcoll list`'s text piped to `compare -`: the error names standard input (as
    read_table's docstring and the file case say), not the file name '-'."""
    import sys

    assert main(["list"]) == 0
    text = capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["compare", "-", "--topology", "switch:8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simcoll compare: error: standard input: line ")
    assert err.rstrip().endswith("is this an nccl-tests log?)")


@pytest.mark.parametrize("command", [["compare", "-", "--topology", "switch:8"],
                                     ["calibrate", "-", "--topology", "switch:8", "--free",
                                      "bandwidth=100GB/s:1GB/s:1TB/s"]])
def test_a_closed_standard_input_is_one_line(capsys, monkeypatch, command):
    """A process started without standard input (<&-) raised AttributeError reading it."""
    import sys

    monkeypatch.setattr(sys, "stdin", None)
    assert main(command) == 2
    assert capsys.readouterr().err == (f"simcoll {command[0]}: error: standard input is "
                                       f"closed; give the log as a file, or pipe it in\n")


def test_command_line_names_the_log_of_a_row_with_an_unknown_type_or_redop(capsys, log,
                                                                             tmp_path):
    # The row checks ran inside compare() and calibrate(), past where the command names
    # the log in what it reports: "the row of size 4096 (line 9) ..." of which file?
    text = log.read_text()
    row = next(line for line in text.splitlines() if line.split()[:1] == ["4096"])
    for field, typo in ((2, "flaot"), (3, "xor")):
        words = row.split()
        words[field] = typo
        bad = tmp_path / f"bad_{typo}.txt"
        bad.write_text(text.replace(row, "  ".join(words)))
        kind = "type" if field == 2 else "redop"
        for command in (["compare"], ["calibrate", "--free", "latency=1us:0.1us:10us"]):
            status, out, err = cli(capsys, *command, str(bad), "--topology",
                                   "switch:ranks=4,bandwidth=50GB/s,latency=2us")
            assert status == 2 and not out
            assert f"error: {bad}: the row of size 4096 (line " in err
            assert f"has {kind} '{typo}', none nccl-tests prints" in err


def test_a_row_left_out_by_the_size_bounds_may_hold_anything(capsys, log, tmp_path):
    """The row checks ran over the whole log before --min-size left rows out, so an odd
    row below it refused the log (it compared before the checks named the log)."""
    text = log.read_text()
    row = next(line for line in text.splitlines() if line.split()[:1] == ["4096"])
    words = row.split()
    words[3] = "xor"
    bad = tmp_path / "odd_small_row.txt"
    bad.write_text(text.replace(row, "  ".join(words)))
    status, out, err = cli(capsys, "compare", str(bad), "--topology",
                           "switch:ranks=4,bandwidth=50GB/s,latency=2us", "--min-size", "64K",
                           "--json")
    assert status == 0 and not err
    assert json.loads(out)["sizes"] == [65536, 1 << 20, 16 << 20]


def test_plot_draws_a_line_per_type_and_op_of_a_table_of_several(tmp_path):
    """-d all / -o all repeats each size per type and op: drawn as one line it ran
    1 KiB -> 4 KiB -> 1 KiB ..., with nothing to tell the rows apart; an in-place
    comparison was labelled as out-of-place."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def measured(time: float) -> Measurement:
        return Measurement(time, 0.0, 0.0, None)

    rows = tuple(NcclTestsRow(size, size // 4, "float", op, -1, measured(t), measured(t), n)
                 for n, (size, op, t) in enumerate(
                     [(1024, "sum", 20.0), (4096, "sum", 30.0), (1024, "max", 40.0),
                      (4096, "max", 50.0)], 1))
    found = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P), place="in_place")
    fig = sc.plot.comparison(found)
    upper, lower = fig.axes
    simulated = {line.get_label(): line for line in upper.get_lines()
                 if line.get_label().startswith("redop")}
    assert sorted(simulated) == ["redop max", "redop sum"]
    for line in simulated.values():
        assert list(line.get_xdata()) == [1024, 4096]
    ratios = sorted(list(line.get_ydata()) for line in lower.get_lines()
                    if list(line.get_xdata()) == [1024, 4096])
    sim = [ring_all_reduce_time(s) for s in (1024, 4096)]
    assert ratios == sorted([pytest.approx([sim[0] / 40e-6, sim[1] / 50e-6]),
                             pytest.approx([sim[0] / 20e-6, sim[1] / 30e-6])],
                            key=lambda a: a.expected[0])
    assert "measured (nccl-tests, in-place)" in [t.get_text()
                                                 for t in upper.get_legend().get_texts()]
    plt.close(fig)


P, BANDWIDTH, LATENCY = 4, 50 * sc.GB, 2 * sc.us
# nccl-tests -d all: its ten types
TEN_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
             "double", "bfloat16")


def _measured(time_us: float) -> Measurement:
    return Measurement(time_us, 0.0, 0.0, None)


@pytest.fixture
def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_a_comparison_of_ten_types_names_each_in_the_legend(plt):
    """Up to ten series (-d all's ten types) are named one by one, each a tab10 colour;
    only more are one legend entry."""
    rows = tuple(NcclTestsRow(4096, 4096 // 4, t, "sum", -1, _measured(20.0 + i), None, i + 1)
                 for i, t in enumerate(TEN_TYPES))
    found = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P))
    fig = sc.plot.comparison(found)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert [t for t in texts if t.startswith("type ")] == [f"type {t}" for t in TEN_TYPES]
    from matplotlib import colormaps
    from matplotlib.colors import to_rgba

    simulated = [line for line in fig.axes[0].get_lines()
                 if line.get_label().startswith("type ")]
    assert [to_rgba(line.get_color()) for line in simulated] == [
        to_rgba(colormaps["tab10"](i)) for i in range(10)]
    plt.close(fig)


def test_two_sizes_of_each_op_are_marked_and_joined_dotted(plt):
    """Four rows, two sizes of each of two ops: each op's line has only two simulated
    points, so they are marked and joined dotted (nothing between them was simulated),
    as a one-series table of two sizes is."""
    rows = tuple(NcclTestsRow(size, size // 4, "float", op, -1, _measured(t), None, n)
                 for n, (size, op, t) in enumerate(
                     [(1024, "sum", 20.0), (4096, "sum", 30.0), (1024, "max", 40.0),
                      (4096, "max", 50.0)], 1))
    found = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P))
    fig = sc.plot.comparison(found)
    upper, lower = fig.axes
    lines = [line for line in upper.get_lines() if line.get_label().startswith("redop")]
    lines += [line for line in lower.get_lines() if list(line.get_xdata()) == [1024, 4096]]
    assert len(lines) == 4
    assert {(line.get_linestyle(), line.get_marker()) for line in lines} == {(":", "s")}
    plt.close(fig)


def test_the_geometric_mean_of_a_table_of_several_types_counts_rows():
    """-d all repeats a size per type: the mean is over 3 rows of 2 sizes, not '3
    sizes'; a table of one type and op counts its sizes."""
    rows = (NcclTestsRow(1024, 256, "float", "sum", -1, _measured(20.0), None, 1),
            NcclTestsRow(1024, 512, "half", "sum", -1, _measured(21.0), None, 2),
            NcclTestsRow(4096, 1024, "float", "max", -1, _measured(30.0), None, 3))
    report = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P)).report()
    assert "over 3 rows (all_reduce, ring on switch(4)" in report
    assert "sizes (" not in report
    plain = tuple(NcclTestsRow(s, s // 4, "float", "sum", -1, _measured(t), None, n)
                  for n, (s, t) in enumerate([(1024, 20.0), (4096, 30.0), (16384, 40.0)], 1))
    report = sc.compare(machine(), NcclTestsTable(plain, "all_reduce", P)).report()
    assert "over 3 sizes (all_reduce, ring on switch(4)" in report


def test_the_compare_command_counts_rows_of_a_table_of_every_type(capsys, tmp_path):
    """simcoll run -d all prints each of 2 sizes once per type (12 types: 24 rows):
    the compare header says '24 rows', not '24 sizes'; one type's table says '2 sizes'."""
    from simcoll.cli import main

    for dtype, head in (("all", "24 rows of"), ("float", "2 sizes of")):
        assert main(["run", "--topology", "switch:4", "-d", dtype, "-b", "1K", "-e", "4K",
                     "-f", "4"]) == 0
        log = tmp_path / f"{dtype}.txt"
        log.write_text(capsys.readouterr().out)
        assert main(["compare", str(log), "--topology", "switch:4"]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first == f"# simcoll compare: all_reduce / ring on switch:4, {head} {log}"


def test_a_one_series_comparison_draws_its_measured_points_black(plt):
    """One type and op: the measured points are black dots under the simcoll blue line
    (colours are for telling several series apart)."""
    from matplotlib.colors import to_rgba

    rows = tuple(NcclTestsRow(s, s // 4, "float", "sum", -1, _measured(t), None, n)
                 for n, (s, t) in enumerate([(1024, 20.0), (4096, 30.0), (16384, 40.0)], 1))
    found = sc.compare(machine(), NcclTestsTable(rows, "all_reduce", P))
    fig = sc.plot.comparison(found)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert to_rgba(lines["measured (nccl-tests)"].get_color()) == to_rgba("black")
    assert to_rgba(lines['simcoll, algorithm="ring"'].get_color()) == to_rgba("#4f81bd")
    plt.close(fig)


def test_geomean_error_of_two_zero_times_is_a_factor_of_one():
    geomean_error = simcoll.comparison.geomean_error
    assert geomean_error([0.0], [0.0]) == 0.0
    # logs 0 (0 against 0) and ln 4: exp(ln 4 / 2) - 1 = 2 - 1
    assert geomean_error([0.0, 4.0], [0.0, 1.0]) == pytest.approx(1.0)


def test_settings_not_one_per_row_are_left_out():
    """Two differing settings for three rows: not each row's own, so no columns."""
    settings = (("float32", "sum", None), ("int32", "sum", None))
    assert simcoll.comparison.setting_columns(settings, 3) == ("", ["", "", ""])
    found = dataclasses.replace(sc.compare(machine(), made_table()), settings=settings)
    assert "redop" not in found.report()
