"""``simcoll calibrate``: logs written by ``simcoll run`` with known constants are fitted
back to them (the printed times have four or more digits, so to 1%), the command it
prints runs the calibrated machine, and bad input is refused with one line."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import simcoll as sc
from simcoll.cli import main
from simcoll.topology.io import save

pytest.importorskip("scipy")

SWITCH4 = "switch:ranks=4,bandwidth=60GB/s,latency=0.1us"


def cli(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def nccl_log(tmp_path_factory):
    """all_reduce from 8 B to 32 MiB with NCCL's choice on 4 GPUs of a switch, at a
    launch overhead of 12 us and steps 2.5 times NCCL's."""
    path = tmp_path_factory.mktemp("logs") / "nccl.txt"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", "--topology", SWITCH4, "--algorithm", "nccl", "-b", "8", "-e",
                     "32M", "-f", "4", "--param", "launch_overhead=12us",
                     "--param", "step_latency_scale=2.5"]) == 0
    path.write_text(out.getvalue())
    return path


def test_nccl_costs_come_back_from_a_log(capsys, nccl_log):
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,
                           "--algorithm", "nccl", "--free", "launch_overhead=2us:0:100us",
                           "--free", "step_latency_scale=1:0.1:10", "--json")
    assert status == 0 and not err
    fit = json.loads(out)
    assert fit["values"]["launch_overhead"] == pytest.approx(12e-6, rel=0.01)
    assert fit["values"]["step_latency_scale"] == pytest.approx(2.5, rel=0.01)
    assert fit["params"] == fit["values"]
    assert len(fit["sizes"]) == 12 and max(abs(e) for e in fit["error_after"]) < 0.002
    # the command it prints runs the calibrated machine: its times are the fit's
    command = fit["command"].split()
    assert command[:2] == ["simcoll", "run"]
    status, out, _ = cli(capsys, *[c.strip("'") for c in command[1:]], "-b", "8", "-e",
                         "32M", "-f", "4", "--json")
    runs = [json.loads(line) for line in out.splitlines()]
    assert [r["time"] for r in runs] == pytest.approx(fit["after"], rel=1e-4)


def test_builder_constants_come_back_and_the_report_prints(capsys, tmp_path):
    log = tmp_path / "ring.txt"
    status, out, _ = cli(capsys, "run", "--topology",
                         "switch:ranks=8,bandwidth=100GB/s,latency=1.5us", "-b", "8", "-e",
                         "1G", "-f", "8")
    log.write_text(out)
    status, out, err = cli(capsys, "calibrate", str(log), "--topology", "switch:ranks=8",
                           "--free", "bandwidth=30GB/s:1GB/s:1TB/s",
                           "--free", "latency=4us:10ns:100us")
    assert status == 0 and not err
    lines = out.splitlines()
    assert lines[0].startswith("# simcoll calibrate: all_reduce / ring on switch:ranks=8, "
                               "10 sizes of")
    fitted = {line.split()[0]: float(line.split()[2]) for line in lines[2:4]}
    assert fitted["bandwidth"] == pytest.approx(100e9, rel=0.01)
    assert fitted["latency"] == pytest.approx(1.5e-6, rel=0.01)
    assert lines[-1].startswith("run the calibrated machine with: simcoll run --topology "
                                "'switch:ranks=8,bandwidth=")


def test_a_topology_file_where_only_the_algorithm_is_free(capsys, nccl_log, tmp_path):
    path = tmp_path / "switch4.json"
    save(sc.topology.from_spec(SWITCH4), path)
    status, out, _ = cli(capsys, "calibrate", str(nccl_log), "--topology", str(path),
                         "--algorithm", "nccl", "--param", "step_latency_scale=2.5",
                         "--free", "launch_overhead=30us:0:100us", "--max-size", "64K",
                         "--json")
    assert status == 0
    fit = json.loads(out)
    assert fit["values"]["launch_overhead"] == pytest.approx(12e-6, rel=0.01)
    assert max(fit["sizes"]) <= 64 * 1024 and len(fit["sizes"]) == 7
    assert "--param step_latency_scale=2.5" in fit["command"]


def test_several_runs_and_standard_input(capsys, monkeypatch, nccl_log):
    twice = nccl_log.read_text() * 2
    status, _, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,
                         "--free", "latency=1us:10ns:10us", "--run", "2")
    assert status == 2 and "--run 2: the log holds 1 run(s); use 1..1" in err
    monkeypatch.setattr("sys.stdin", io.StringIO(twice))
    status, _, err = cli(capsys, "calibrate", "-", "--topology", SWITCH4,
                         "--free", "latency=1us:10ns:10us")
    assert status == 2 and "the log holds 2 runs; pick one with --run K (1..2)" in err
    monkeypatch.setattr("sys.stdin", io.StringIO(twice))
    status, out, _ = cli(capsys, "calibrate", "-", "--topology", SWITCH4, "--algorithm",
                         "nccl", "--run", "2", "--free", "launch_overhead=2us:0:100us",
                         "--param", "step_latency_scale=2.5", "--max-size", "2K", "--json")
    assert status == 0
    assert json.loads(out)["values"]["launch_overhead"] == pytest.approx(12e-6, rel=0.01)


@pytest.mark.parametrize("args,message", [
    (["--free", "bandwidth=1:0"], "is not NAME=INITIAL:LOW:HIGH"),
    (["--free", "bandwidth=fast:0:2"], "'fast' is not a number, a rate"),
    (["--free", "speed=1:0:2"], "free constant 'speed' is not a parameter"),
    (["--free", "latency=1us:0:1ms", "--free", "latency=2us:0:1ms"], "given twice"),
    (["--free", "latency=1us:0:1ms", "--min-size", "1G"], "no size of the log lies"),
    (["--free", "latency=1us:0:1ms", "--min-size", "2K", "--max-size", "1K"],
     "--min-size 2048 is above --max-size 1024"),
    (["--free", "latency=1us:0:1ms", "--loss", "l2"], "invalid choice: 'l2'"),
])
def test_bad_arguments_get_one_line(capsys, nccl_log, args, message):
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4, *args)
    assert status == 2 and not out and message in err and err.count("\n") == 1


def test_a_missing_log_is_named(capsys, tmp_path):
    status, _, err = cli(capsys, "calibrate", str(tmp_path / "none.txt"), "--topology",
                         SWITCH4, "--free", "latency=1us:0:1ms")
    assert status == 2 and f"no log at {tmp_path / 'none.txt'}" in err
