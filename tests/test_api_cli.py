"""The public API surface and the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import simcoll as sc
from simcoll.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def test_every_public_name_exists():
    for name in sc.__all__:
        assert hasattr(sc, name), name


def test_readme_tour_uses_only_public_names():
    used = set(re.findall(r"\bsc\.([A-Za-z_]+)", README.read_text()))
    assert used, "README has no sc.* example"
    assert used <= set(sc.__all__), used - set(sc.__all__)


def test_readme_first_lines_give_the_two_commands():
    head = README.read_text().splitlines()[:6]
    assert any("simcoll demo" in line for line in head)
    assert any("pytest" in line for line in head)
    ci = (README.parent / ".ci" / "run").read_text()
    assert 'pip install --quiet -e ".[dev]"' in ci and "python -m pytest" in ci


def test_demo_prints_every_algorithm_and_checks_results(capsys):
    assert main(["demo", "--size", "64KiB"]) == 0
    out = capsys.readouterr().out
    for name in ("parameter_server", "naive", "ring"):
        assert name in out
    assert out.count("True") == 4


def test_run_prints_json(capsys):
    assert main(["run", "--topology", "cluster:2x4", "--size", "1MiB", "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record["nranks"] == 8 and record["nbytes"] == 1 << 20
    assert record["bytes_sent"] == [2 * 7 * (1 << 20) // 8] * 8
    assert record["correct"] is None


def test_run_with_data_checks_the_result(capsys):
    assert main(["run", "--topology", "ring:5", "--size", "4000", "--data",
                 "--algorithm", "naive"]) == 0
    assert "True" in capsys.readouterr().out


def test_bad_cli_input_is_a_clear_error(capsys):
    assert main(["run", "--topology", "bogus:3"]) == 2
    assert "cannot read topology 'bogus:3'" in capsys.readouterr().err
    assert main(["run", "--algorithm", "rnig"]) == 2
    assert "known algorithms" in capsys.readouterr().err
