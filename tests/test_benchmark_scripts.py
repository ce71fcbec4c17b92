"""The benchmark scripts' command lines: bad arguments refused before any work (a typo
or --help of run.py started the whole 15-minute suite), a failing case's own error shown,
Ctrl-C ending with one line and status 130."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.append(str(BENCHMARKS))

import interrupts  # noqa: E402
import nccl_tests_compare  # noqa: E402
import ring_throughput  # noqa: E402


@pytest.mark.parametrize("argv", [["--help"], ["--olny=7"], ["--only", "9"]])
def test_run_py_refuses_or_helps_before_any_case(argv):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), *argv],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == (0 if argv == ["--help"] else 2)
    assert "usage: run.py" in done.stdout + done.stderr
    assert "simcoll benchmarks on" not in done.stdout   # the table's first line


@pytest.mark.parametrize("argv,message", [
    (["--network", "flw"], "--network flw: use one of flow, flow_rtt, analytical"),
    (["--proto", "LL129"], "proto='LL129' is not accepted"),
    (["--param", "bogus=1"], "does not take parameter(s) ['bogus']"),
    (["--tables="], "unknown table ids ['']"),
    # argparse said "invalid parse_size value: '12XB'"
    (["--max-size", "12XB"], "argument --max-size: cannot read size '12XB'; write a number"),
])
def test_nccl_tests_compare_refuses_options_before_the_first_table(capsys, argv, message):
    with pytest.raises(SystemExit) as ended:
        nccl_tests_compare.main(argv)
    out, err = capsys.readouterr()
    assert ended.value.code == 2 and message in err and "==" not in out


def test_a_failing_case_shows_its_own_error():
    """A case that failed in its process said only "exit status 1"."""
    with pytest.raises(RuntimeError, match=r"(?s)ring_throughput.ring_case\(0, .*\) failed "
                                           r"\(exit status 1\):.*Error"):
        ring_throughput.in_subprocess("ring_case", 0, "flow", "1GiB", False)


def test_ctrl_c_ends_a_script_with_one_line_and_status_130(capsys):
    def stopped():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as ended:
        interrupts.run_main(stopped)
    assert ended.value.code == 130
    assert capsys.readouterr().err.endswith(": interrupted\n")


def test_a_script_exits_with_what_its_main_returns():
    for status in (0, 1, 3):
        with pytest.raises(SystemExit) as ended:
            interrupts.run_main(lambda status=status: status)
        assert ended.value.code == status
