"""``simcoll calibrate``: logs written by ``simcoll run`` with known constants are fitted
back to them (the printed times have four or more digits, so to 1%), the command it
prints runs the calibrated machine, and bad input is refused with one line."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import simcoll as sc
import simcoll.calibration
from simcoll.cli import main
from simcoll.topology.io import save
from simcoll.topology.spec import with_arguments

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
    # in the units the options gave them (they were bare SI numbers: 3e+10, 4e-06)
    assert lines[2].split()[:2] == ["bandwidth", "30GB/s"]
    assert lines[3].split()[:2] == ["latency", "4us"]
    bandwidth, latency = lines[2].split()[2], lines[3].split()[2]
    assert bandwidth.endswith("GB/s") and float(bandwidth[:-4]) == pytest.approx(100, rel=0.01)
    assert latency.endswith("us") and float(latency[:-2]) == pytest.approx(1.5, rel=0.01)
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
    (["--free", "latency=1us:0:1ms", "--free", "latency=2us:0:1ms"],
     "--free latency is given twice; give each constant once"),
    (["--free", "latency=1us:0:1ms", "--min-size", "1G"], "no size of the log lies"),
    (["--free", "latency=1us:0:1ms", "--min-size", "2K", "--max-size", "1K"],
     "--min-size 2048 is above --max-size 1024"),
    (["--free", "latency=1us:0:1ms", "--loss", "l2"], "invalid choice: 'l2'"),
    (["--free", "bandwidth=25GB/s:1us:100GB/s"],
     "--free bandwidth=25GB/s:1us:100GB/s: '1us' has unit 'us', not a rate unit"),
    (["--free", "latency=1GB/s:10ns:1us"],
     "--free latency=1GB/s:10ns:1us: '1GB/s' has unit 'GB/s', not a time unit"),
    (["--free", "launch_overhead=2us:0:100us", "--run", "0"],
     "--run 0: the log holds 1 run(s); use 1..1"),
    (["--free", "launch_overhead=2us:0:100us", "--collective", "all_gather"],
     "collective 'all_gather' was given, but the run starting at line 1 is 'all_reduce'"),
    # named as the option wrote it (it was "free['reduce_bandwidth']: initial 1e+09 ...")
    (["--free", "reduce_bandwidth=1GB/s:2GB/s:3GB/s"],
     "--free reduce_bandwidth=1GB/s:2GB/s:3GB/s: initial 1e+09 lies outside its bounds "
     "[2e+09, 3e+09]"),
    # named as the option (it said calibrate's "starts=100 is not accepted")
    (["--free", "reduce_bandwidth=1GB/s:0.5GB/s:2GB/s", "--starts", "100",
      "--max-evaluations", "30"], "--starts 100 is not accepted; give 1 to 30"),
    (["--free", "latency=1us:0:1ms", "--starts", "0"],
     "--starts 0 is not accepted; give 1 or more"),
    (["--free", "latency=1us:0:1ms", "--max-evaluations", "0"],
     "--max-evaluations 0 is not accepted"),
    # below twice the sizes it named calibrate's keyword: "max_evaluations=3 is not ..."
    (["--free", "latency=1us:0:1ms", "--max-evaluations", "3"],
     "--max-evaluations 3 is not accepted; give "),
    (["--free", "latency=1us:0:1ms", "--loss", "huber", "--loss-scale", "0"],
     "--loss-scale 0 is not accepted; give a finite number above 0"),
    (["--free", "latency=1us:0:1ms", "--loss", "huber", "--loss-scale", "inf"],
     "--loss-scale inf is not accepted; give a finite number above 0"),
    # options that changed nothing, silently
    (["--free", "latency=1us:0:1ms", "--seed", "7"], "--seed draws the random starts; "
                                                     "with --starts 1"),
    (["--free", "latency=1us:0:1ms", "--loss-scale", "5"],
     "--loss-scale is where a robust loss bends; the linear loss has none"),
])
def test_bad_arguments_get_one_line(capsys, nccl_log, args, message):
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4, *args)
    assert status == 2 and not out and message in err and err.count("\n") == 1


def test_a_missing_log_is_named(capsys, tmp_path):
    status, _, err = cli(capsys, "calibrate", str(tmp_path / "none.txt"), "--topology",
                         SWITCH4, "--free", "latency=1us:0:1ms")
    assert status == 2 and f"no log at {tmp_path / 'none.txt'}" in err


def test_a_topology_file_frees_only_the_algorithms_constants(capsys, nccl_log, tmp_path):
    path = tmp_path / "switch4.json"
    save(sc.topology.from_spec(SWITCH4), path)
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", str(path),
                           "--algorithm", "nccl", "--free", "bandwidth=50GB/s:1GB/s:1TB/s")
    assert status == 2 and not out and err.count("\n") == 1
    assert (f"free constant 'bandwidth': with a topology file ({path}) only the algorithm's "
            f"constants can be freed (launch_overhead, step_latency_scale)") in err
    assert "unknown builder" not in err


def test_a_constant_that_moves_no_time_at_its_start(capsys, tmp_path):
    """The tester's case: NICs of 40 GB/s behind PCIe links of 48 GB/s, fitted from
    50 GB/s, where the PCIe link is the bottleneck."""
    log = tmp_path / "gen.txt"
    status, out, _ = cli(capsys, "run", "--topology", "dgx_h100:nodes=2,nic_bandwidth=40GB/s",
                         "--algorithm", "ring", "-b", "1M", "-e", "256M", "-f", "4")
    log.write_text(out)
    status, out, err = cli(capsys, "calibrate", str(log), "--topology", "dgx_h100:nodes=2",
                           "--free", "nic_bandwidth=50GB/s:1GB/s:400GB/s", "--json")
    assert status == 0 and not err
    fit = json.loads(out)
    assert fit["values"]["nic_bandwidth"] == pytest.approx(40e9, rel=1e-3)
    assert fit["unmoved"] == ["nic_bandwidth"] and fit["on_bound"] == {}
    # the bounds as --free gave them, and the probed value the further fit started from
    # (--json left both out: on_bound could not be read against the range)
    assert fit["bounds"] == {"nic_bandwidth": [1e9, 400e9]}
    assert list(fit["probed"]) == ["nic_bandwidth"]
    assert 1e9 <= fit["probed"]["nic_bandwidth"] <= 400e9
    assert any(note.startswith("note: nic_bandwidth moved no simulated time at 5e+10, where "
                               "it started") for note in fit["notes"])


@pytest.fixture
def unnamed_log(tmp_path, capsys):
    """Rows of a ring all_reduce on switch:ranks=4 at 60 GB/s and 0.1 us, without the
    header that names the collective."""
    assert main(["run", "--topology", SWITCH4, "-b", "4K", "-e", "64M", "-f", "16"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if not line.startswith("#")]
    path = tmp_path / "rows.txt"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_collective_for_a_log_that_does_not_name_it(capsys, unnamed_log):
    status, out, err = cli(capsys, "calibrate", str(unnamed_log), "--topology",
                           "switch:ranks=4,latency=0.1us", "--free",
                           "bandwidth=20GB/s:1GB/s:1TB/s")
    assert status == 2 and not out and err.count("\n") == 1
    assert "the log does not say which collective it measured; name it with --collective" \
        in err
    status, out, err = cli(capsys, "calibrate", str(unnamed_log), "--topology",
                           "switch:ranks=4,latency=0.1us", "--free",
                           "bandwidth=20GB/s:1GB/s:1TB/s", "--collective", "all_reduce",
                           "--json")
    assert status == 0 and not err
    assert json.loads(out)["values"]["bandwidth"] == pytest.approx(60e9, rel=1e-3)


def run_log(capsys, path, *args):
    """What `simcoll run` prints for ``args``, written to ``path``."""
    assert main(["run", *args]) == 0
    path.write_text(capsys.readouterr().out)
    return path


def command_times(capsys, command: str, *sizes: str) -> list[float]:
    """The times (s) the printed `simcoll run ...` command gives for ``sizes``."""
    status, out, _ = cli(capsys, *[c.strip("'") for c in command.split()[1:]], *sizes,
                         "--json")
    assert status == 0
    return [json.loads(line)["time"] for line in out.splitlines()]


def test_the_command_runs_the_logs_collective(capsys, tmp_path):
    """An all_gather log: the command printed must run all_gather, not all_reduce."""
    log = run_log(capsys, tmp_path / "ag.txt", "--topology",
                  "switch:ranks=8,bandwidth=100GB/s,latency=1.5us", "--collective",
                  "all_gather", "-b", "64K", "-e", "4M", "-f", "8")
    status, out, err = cli(capsys, "calibrate", str(log), "--topology", "switch:ranks=8",
                           "--free", "bandwidth=30GB/s:1GB/s:1TB/s", "--free",
                           "latency=4us:10ns:100us", "--json")
    assert status == 0 and not err
    fit = json.loads(out)
    assert " --collective all_gather " in fit["command"]
    times = command_times(capsys, fit["command"], "-b", "64K", "-e", "4M", "-f", "8")
    # the ring all_gather on a switch: p - 1 steps of 2 latencies and size / p at the
    # rate (the sizes given after the command replace its own)
    bandwidth, latency = fit["values"]["bandwidth"], fit["values"]["latency"]
    assert times == pytest.approx([7 * (2 * latency + s / 8 / bandwidth)
                                   for s in (65536, 524288, 4194304)], rel=1e-5)
    assert times == pytest.approx(fit["after"], rel=1e-5)


def test_the_command_keeps_the_logs_root_and_type(capsys, tmp_path):
    log = run_log(capsys, tmp_path / "bcast.txt", "--topology",
                  "switch:ranks=8,bandwidth=100GB/s,latency=1.5us", "--collective",
                  "broadcast", "-r", "3", "-d", "half", "-b", "64K", "-e", "16M", "-f", "4")
    status, out, _ = cli(capsys, "calibrate", str(log), "--topology", "switch:ranks=8",
                         "--free", "bandwidth=30GB/s:1GB/s:1TB/s", "--free",
                         "latency=4us:10ns:100us")
    assert status == 0
    command = out.splitlines()[-1].removeprefix("run the calibrated machine with: ")
    assert "--collective broadcast --algorithm binomial -d half -r 3" in command
    times = command_times(capsys, command, "-b", "64K", "-e", "16M", "-f", "4")
    # a binomial broadcast on a switch: 3 rounds of 2 latencies and the whole buffer
    spec = command.split("'")[1]
    bandwidth = float(spec.split("bandwidth=")[1].split(",")[0])
    latency = float(spec.split("latency=")[1])
    sizes = [65536 * 4**k for k in range(5)]
    assert times == pytest.approx([3 * (2 * latency + s / bandwidth) for s in sizes],
                                  rel=1e-9)
    roots = [json.loads(line)["root"] for line in
             cli(capsys, *[c.strip("'") for c in command.split()[1:]], "--json")[1].splitlines()]
    assert roots == [3] * 5


@pytest.mark.parametrize("dtype, option", [("bfloat16", " -d bfloat16"),
                                           ("int32", " -d int32"), ("int8", " -d int8"),
                                           ("float", "")])
def test_the_command_names_the_logs_element_type(capsys, tmp_path, dtype, option):
    """It named a type of the same size: -d float16 for bfloat16, nothing (float) for
    int32, -d uint8 for int8."""
    log = run_log(capsys, tmp_path / "log.txt", "--topology", "switch:4", "-d", dtype,
                  "-b", "64K", "-e", "1M", "-f", "4")
    status, out, _ = cli(capsys, "calibrate", str(log), "--topology", "switch:4",
                         "--free", "latency=2us:10ns:100us")
    assert status == 0
    command = out.splitlines()[-1]
    assert command.endswith("--collective all_reduce --algorithm ring" + option)


@pytest.mark.parametrize("free,message", [
    ("launch_overhead=5us:0:1GB/s", "'1GB/s' has unit 'GB/s', not a time unit"),
    ("step_latency_scale=1us:0.1:10", "'1us' is not a plain number (unexpected unit 'us')"),
])
def test_the_algorithms_constants_take_their_unit(capsys, nccl_log, free, message):
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,
                           "--algorithm", "nccl", "--free", free)
    assert status == 2 and not out and f"--free {free}: {message}" in err
    assert err.count("\n") == 1


def test_a_constant_both_free_and_a_param_names_the_options(capsys, nccl_log):
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,
                           "--algorithm", "nccl", "--free", "launch_overhead=2us:0:100us",
                           "--param", "launch_overhead=12us")
    assert status == 2 and not out and err.count("\n") == 1
    assert ("--free launch_overhead and --param launch_overhead: a constant is either "
            "fitted or fixed; drop one of them") in err


def test_one_size_is_one_size(capsys, tmp_path):
    """One size and two free constants: the header says 1 size, and a note says the
    fit cannot pin both down (any point of a curve gives the one time)."""
    log = run_log(capsys, tmp_path / "one.txt", "--topology",
                  "switch:ranks=8,bandwidth=100GB/s,latency=1.5us", "--size", "2M")
    status, out, _ = cli(capsys, "calibrate", str(log), "--topology", "switch:ranks=8",
                         "--free", "bandwidth=30GB/s:1GB/s:1TB/s", "--free",
                         "latency=4us:10ns:100us")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].endswith(f"all_reduce / ring on switch:ranks=8, 1 size of {log}")
    assert ("note: the sizes fitted (1) do not pin down the 2 free constants: 1 "
            "combination(s) of bandwidth, latency move no simulated time where the fit "
            "ended, so other values fit as well; fit more sizes (ones where they act "
            "differently), or free fewer constants") in lines


def test_in_place_times_a_log_without_them_is_named_with_the_log(capsys, tmp_path):
    """simcoll run's log has one block of columns; --in-place said which row has none
    but not of which log (every other error of a log is prefixed with its name)."""
    log = run_log(capsys, tmp_path / "sim.log", "--topology", "switch:ranks=8",
                  "--size", "1K")
    status, _, err = cli(capsys, "calibrate", str(log), "--topology", "switch:ranks=8",
                         "--free", "bandwidth=30GB/s:1GB/s:1TB/s", "--in-place")
    assert status == 2
    assert err.startswith(f"simcoll calibrate: error: {log}: the row of size 1024 (line ")
    assert "has no in-place block" in err


def test_a_log_of_simcoll_run_with_the_fitted_param_gets_no_note(capsys, nccl_log):
    # the log ran --param launch_overhead=12us step_latency_scale=2.5; fitting both, the
    # note once asked for the same --param, which --free then refused
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,
                           "--algorithm", "nccl", "--free", "launch_overhead=2us:0:100us",
                           "--free", "step_latency_scale=1:0.1:10", "--max-evaluations",
                           "48")
    assert status == 0, err
    assert "the log is simcoll run's table" not in out.splitlines()[0]
    # fitting one of them, the other still differs: the note says so
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,
                           "--algorithm", "nccl", "--free", "launch_overhead=2us:0:100us",
                           "--max-evaluations", "48")
    assert status == 0, err
    first = out.splitlines()[0]
    assert "the log is simcoll run's table of nccl, network flow, params: " in first
    assert "step_latency_scale=2.5" in first


def test_max_evaluations_below_twice_the_sizes_names_the_least(capsys, nccl_log):
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,  # noqa: F821
                           "--free", "latency=1us:0:1ms", "--max-evaluations", "23")
    assert status == 2 and not out
    assert ("--max-evaluations 23 is not accepted; give 24 or more (the 12 sizes at the "
            "initial constants, then at one trial point)") in err


def test_max_evaluations_of_exactly_twice_the_sizes_is_accepted(capsys, nccl_log):
    status, _, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,  # noqa: F821
                         "--algorithm", "nccl", "--free", "launch_overhead=2us:0:100us",
                         "--max-evaluations", "24")
    assert status == 0 and "is not accepted" not in err


@pytest.mark.parametrize("loop, caveat", [
    (("-b", "1K", "-e", "64M", "-f", "4"), None),
    (("-b", "1M", "-e", "4M", "-i", "1M"), None),
    # 1K, 3K, 9K, 10K: neither a factor nor a step; the command runs 1K to 10K by 2
    (("-b", "1K", "-e", "9K", "-f", "3"), "no -f or -i loop makes the log's 4 sizes: the "
                                          "command runs 1024 to 10240 bytes with -f 2"),
])
def test_the_command_gives_the_fits_times_at_the_logs_sizes(capsys, tmp_path, loop, caveat):
    """It printed the constants to 6 digits (3.8e-6 off the fit's times) and no sizes
    (the default 32M alone)."""
    log = run_log(capsys, tmp_path / "log.txt", "--topology",
                  "switch:ranks=4,bandwidth=73.3456789GB/s,latency=1.23456us", *loop)
    if caveat:   # a size the loop does not make: the log of another run appended
        extra = run_log(capsys, tmp_path / "more.txt", "--topology",
                        "switch:ranks=4,bandwidth=73.3456789GB/s,latency=1.23456us",
                        "--size", "10K").read_text()
        rows = [line for line in extra.splitlines() if line.strip().startswith("10240")]
        text = log.read_text().splitlines()
        last = max(i for i, line in enumerate(text) if line.strip()[:1].isdigit())
        log.write_text("\n".join(text[:last + 1] + rows + text[last + 1:]) + "\n")
    status, out, _ = cli(capsys, "calibrate", str(log), "--topology", "switch:4",
                         "--free", "bandwidth=50GB/s:1GB/s:1000GB/s",
                         "--free", "latency=1us:0.1us:10us", "--json")
    assert status == 0
    fit = json.loads(out)
    assert [n for n in fit["notes"] if "no -f or -i loop" in n] == ([caveat] if caveat
                                                                     else [])
    times = command_times(capsys, fit["command"])
    if caveat:
        assert len(times) == 4 and fit["sizes"] == [1024, 3072, 9216, 10240]
    else:
        assert times == pytest.approx(fit["after"], rel=1e-13, abs=0)


@pytest.mark.parametrize("spec", ["switch:ranks=4,", "switch:4 , ", "switch:4"])
def test_a_spec_ending_in_a_comma_calibrates_as_it_runs(capsys, tmp_path, spec):
    """`switch:ranks=4,` runs and compares, but calibrate glued its constants on as text:
    'switch:ranks=4,,bandwidth=...' was refused before the fit (and 'dgx_h100:' printed
    the command 'dgx_h100:,nvlink_bandwidth=...', which does not run)."""
    log = run_log(capsys, tmp_path / "log.txt", "--topology",
                  "switch:ranks=4,bandwidth=73.3456789GB/s,latency=1.23456us",
                  "-b", "1K", "-e", "64M", "-f", "4")
    status, out, err = cli(capsys, "calibrate", str(log), "--topology", spec, "--free",
                           "bandwidth=50GB/s:1GB/s:1000GB/s", "--free",
                           "latency=1us:0.1us:10us", "--json")
    assert status == 0, err
    fit = json.loads(out)
    assert ",," not in fit["command"] and ":," not in fit["command"]
    assert fit["values"]["bandwidth"] == pytest.approx(73.3456789e9, rel=1e-3)
    assert command_times(capsys, fit["command"]) == pytest.approx(fit["after"], rel=1e-13,
                                                                  abs=0)


def test_with_arguments_keeps_a_spec_s_own_and_adds_every_digit():
    assert with_arguments("switch:8", {"bandwidth": 2e10}) == \
        "switch:8,bandwidth=20000000000.0"
    assert with_arguments(" switch : ranks=8 , ", {"latency": 1 / 3}) == \
        "switch:ranks=8,latency=0.3333333333333333"
    assert with_arguments("dgx_h100:", {"nvlink_bandwidth": 1.5}) == \
        "dgx_h100:nvlink_bandwidth=1.5"
    assert with_arguments("dgx_h100:", {}) == "dgx_h100"
    # two trailing commas stay an empty argument, which from_spec refuses as it did
    assert with_arguments("switch:8,,", {"latency": 1.0}) == "switch:8,,latency=1.0"


def test_a_log_with_a_gap_in_its_sizes_still_gets_its_command(capsys, tmp_path):
    """-b 8 -e 128M -f 2 with one row gone: building the command ran a loop of 8-byte
    steps up to 128 MiB, refused as 16,777,216 sizes, and the finished fit was lost."""
    log = run_log(capsys, tmp_path / "log.txt", "--topology", "switch:4", "-b", "8", "-e",
                  "128M", "-f", "2")
    lines = log.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    del lines[rows[5]]                               # 256 bytes
    log.write_text("\n".join(lines) + "\n")
    status, out, err = cli(capsys, "calibrate", str(log), "--topology", "switch:4",
                           "--free", "latency=2us:10ns:100us", "--json")
    assert status == 0, err
    fit = json.loads(out)
    assert " -b 8 -e 134217728 -f 2 " in fit["command"]
    assert any("no -f or -i loop" in note for note in fit["notes"])


def test_mut_the_command_gives_fitted_algorithm_parameters_to_every_digit(capsys, nccl_log):
    """Fitted algorithm parameters (--param) are printed as the fit holds them, so the
    command gives the fit's times to rounding (6 digits moved them by up to ~1e-6)."""
    status, out, err = cli(capsys, "calibrate", str(nccl_log), "--topology", SWITCH4,
                           "--algorithm", "nccl", "--free", "launch_overhead=2us:0:100us",
                           "--free", "step_latency_scale=1:0.1:10", "--json")
    assert status == 0
    fit = json.loads(out)
    words = fit["command"].split()
    given = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--param")
    assert {k: float(given[k]) for k in fit["params"]} == fit["params"]
    assert command_times(capsys, fit["command"]) == pytest.approx(fit["after"], rel=1e-13,
                                                                  abs=0)


def test_mut_the_command_of_a_one_size_log_runs_that_size_alone(capsys, tmp_path):
    """A log of one size (64 KiB): the command runs 64 KiB only (-b and -e both), not
    64 KiB up to run's default -e of 32M."""
    log = run_log(capsys, tmp_path / "one.txt", "--topology",
                  "switch:ranks=4,bandwidth=73.3456789GB/s,latency=1.23456us", "--size", "64K")
    status, out, _ = cli(capsys, "calibrate", str(log), "--topology", "switch:4",
                         "--free", "latency=1us:0.1us:10us", "--json")
    assert status == 0
    fit = json.loads(out)
    assert fit["sizes"] == [65536]
    assert command_times(capsys, fit["command"]) == pytest.approx(fit["after"], rel=1e-13,
                                                                  abs=0)


def test_mut_the_command_loops_over_the_logs_sizes_in_order(capsys, tmp_path):
    """A log whose rows are not in size order (a 512-byte row appended after 1K, 2K, 4K):
    its sizes are 512, 1K, 2K, 4K, which -b 512 -e 4096 -f 2 makes, with no caveat."""
    spec = "switch:ranks=4,bandwidth=73.3456789GB/s,latency=1.23456us"
    log = run_log(capsys, tmp_path / "log.txt", "--topology", spec, "-b", "1K", "-e", "4K",
                  "-f", "2")
    extra = run_log(capsys, tmp_path / "more.txt", "--topology", spec, "--size", "512")
    rows = [line for line in extra.read_text().splitlines()
            if line.strip().startswith("512 ")]
    text = log.read_text().splitlines()
    last = max(i for i, line in enumerate(text) if line.strip()[:1].isdigit())
    log.write_text("\n".join(text[:last + 1] + rows + text[last + 1:]) + "\n")
    status, out, err = cli(capsys, "calibrate", str(log), "--topology", "switch:4",
                           "--free", "latency=1us:0.1us:10us", "--json")
    assert status == 0, err
    fit = json.loads(out)
    assert " -b 512 -e 4096 -f 2 " in fit["command"]
    assert not [n for n in fit["notes"] if "no series" in n]


def test_a_constant_on_its_bound_is_the_bound_in_the_command(capsys, tmp_path):
    """The log's 40 GB/s lies above the upper bound 20 GB/s: the fit ends on it, and the
    command runs 20 GB/s itself (it printed bandwidth=19999999999.999973)."""
    log = run_log(capsys, tmp_path / "ring.txt", "--topology",
                  "switch:ranks=4,bandwidth=40GB/s,latency=1us", "-b", "4K", "-e", "64M",
                  "-f", "16")
    status, out, err = cli(capsys, "calibrate", str(log), "--topology",
                           "switch:ranks=4,latency=1us", "--free",
                           "bandwidth=5GB/s:1GB/s:20GB/s", "--json")
    assert status == 0 and not err
    fit = json.loads(out)
    assert fit["values"]["bandwidth"] == 20e9 and fit["on_bound"] == {"bandwidth": "upper"}
    assert "--topology 'switch:ranks=4,latency=1us,bandwidth=20000000000.0'" in fit["command"]
    assert fit["stalled_at"] is None and fit["past_limits"] == []


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


def test_a_bandwidth_in_the_wrong_unit_is_named_as_unsimulated(capsys, tmp_path):
    """--free bandwidth=5:1:1e12 (bytes/s; GB/s meant): the 16 MiB all_reduce sends
    6 x 4 MiB in turn, 5e6 s at 5 B/s, past the simulated-time limit of 1e6 s, at the
    start and at its finite-difference step; the note says so rather than blame another
    part of the machine."""
    log = run_log(capsys, tmp_path / "ring.txt", "--topology",
                  "switch:ranks=4,bandwidth=40GB/s,latency=1us", "-b", "4K", "-e", "64M",
                  "-f", "16")
    status, out, err = cli(capsys, "calibrate", str(log), "--topology",
                           "switch:ranks=4,latency=1us", "--free", "bandwidth=5:1:1e12",
                           "--json")
    assert status == 0 and not err
    fit = json.loads(out, parse_constant=_not_json)
    assert fit["past_limits"] == ["bandwidth"]
    # the start's unsimulated times and errors are null: JSON has no Infinity
    assert fit["before"] == fit["error_before"] == [None] * len(fit["sizes"])
    assert fit["values"]["bandwidth"] == pytest.approx(40e9, rel=1e-3)
    [note] = [n for n in fit["notes"] if n.startswith("note: bandwidth was not fitted")]
    assert "could not simulate the sizes there" in note and "bottleneck" not in note
    assert "a bandwidth in bytes/s, 5e+09, not GB/s, 5" in note


def test_a_fit_stopped_before_its_first_step_is_noted(capsys, tmp_path):
    """5 sizes, 1 free constant: 10 simulations run the start and its finite-difference
    step, and no more."""
    log = run_log(capsys, tmp_path / "ring.txt", "--topology",
                  "switch:ranks=4,bandwidth=40GB/s,latency=1us", "-b", "4K", "-e", "64M",
                  "-f", "8")
    status, out, err = cli(capsys, "calibrate", str(log), "--topology",
                           "switch:ranks=4,latency=1us", "--free",
                           "bandwidth=5GB/s:1GB/s:100GB/s", "--max-evaluations", "10")
    assert status == 0 and not err
    assert ("note: the fit stopped at max_evaluations=10 before it took a step: the values "
            "are where it started (or a finite-difference step from it), not fitted; raise "
            "max_evaluations (each step simulates the 5 sizes at 2 points, 10 simulations: "
            "give many times that)") in out.splitlines()


def test_the_calibrate_command_counts_rows_of_a_table_of_every_type(capsys, tmp_path):
    """simcoll run -d all prints each of 2 sizes once per type (12 types: 24 rows): the
    calibrate header says '24 rows', not '24 sizes'; one type's table says '2 sizes'."""
    for dtype, head in (("all", "24 rows of"), ("float", "2 sizes of")):
        assert main(["run", "--topology", "switch:4", "-d", dtype, "-b", "1K", "-e", "4K",
                     "-f", "4"]) == 0
        log = tmp_path / f"{dtype}.txt"
        log.write_text(capsys.readouterr().out)
        assert main(["calibrate", str(log), "--topology", "switch:4", "--free",
                     "latency=4us:10ns:100us"]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith(f"# simcoll calibrate: all_reduce / ring on switch:4, {head} "
                                f"{log}")


def test_with_arguments_keeps_a_lone_comma_and_writes_every_value_as_a_float():
    # "switch:," is refused by from_spec (an empty argument): it stays refused with
    # values added, not turned into a spec that runs
    with pytest.raises(sc.TopologyError, match="an argument between two commas is empty"):
        sc.topology.from_spec("switch:,")
    assert with_arguments("switch:,", {"latency": 1.0}) == "switch:,,latency=1.0"
    assert with_arguments("dgx_h100: , ", {"nvlink_bandwidth": 1.5}) == \
        "dgx_h100:,,nvlink_bandwidth=1.5"
    # a whole number is written as the float it is: 20 -> 20.0
    assert with_arguments("switch:8", {"bandwidth": 20, "latency": 0}) == \
        "switch:8,bandwidth=20.0,latency=0.0"


def test_an_interrupted_calibration_prints_its_best_point_so_far(capsys, tmp_path,
                                                                 monkeypatch):
    log = tmp_path / "ring.txt"
    status, out, _ = cli(capsys, "run", "--topology",
                         "switch:ranks=8,bandwidth=100GB/s,latency=1.5us", "-b", "8", "-e",
                         "1M", "-f", "8")
    assert status == 0
    log.write_text(out)
    run_sizes, runs = simcoll.calibration.run_sizes, []

    def interrupted_on_the_third(*args, **kwargs):
        if len(runs) == 2:
            raise KeyboardInterrupt
        runs.append(run_sizes(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(simcoll.calibration, "run_sizes", interrupted_on_the_third)
    status, out, err = cli(capsys, "calibrate", str(log), "--topology", "switch:ranks=8",
                           "--free", "bandwidth=30GB/s:1GB/s:1TB/s",
                           "--free", "latency=4us:10ns:100us")
    lines = err.splitlines()
    assert status == 130 and not out and len(lines) == 2
    assert lines[0] == "simcoll calibrate: interrupted"
    assert lines[1].startswith("simcoll calibrate: the best point simulated before the "
                               "interrupt: bandwidth=")
    assert lines[1].endswith("geometric-mean time error over 6 sizes)")
