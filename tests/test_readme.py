"""The README's Python examples run, in order, as a user would paste them."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import matplotlib

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run(tmp_path, monkeypatch):
    """Every Python block runs; one followed by a plain block prints what that block
    shows, line by line (trailing spaces aside)."""
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    text = README.read_text()
    blocks = list(re.finditer(r"```python\n(.*?)```", text, flags=re.S))
    assert len(blocks) >= 5
    namespace: dict = {}
    compared = 0
    for block in blocks:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block.group(1), str(README), "exec"), namespace)
        shown = re.match(r"\n*```\n(.*?)```", text[block.end():], flags=re.S)
        if shown:
            compared += 1
            assert [line.rstrip() for line in printed.getvalue().splitlines()] == [
                line.rstrip() for line in shown.group(1).splitlines()], block.group(1)[:80]
    assert compared >= 3
    assert (tmp_path / "ring.json").exists() and (tmp_path / "busbw.png").exists()
    assert len((tmp_path / "points.jsonl").read_text().splitlines()) == 8
    step = namespace["step"]
    assert step.buckets == 54 and step.exposed_communication > 0
    import matplotlib.pyplot as plt

    plt.close("all")


def test_readme_command_line_output_is_what_the_command_prints(capsys):
    """Every ``$ simcoll ...`` block shows what the command prints today, line by line
    (trailing spaces aside): the README's tables go stale when the model changes."""
    import shlex

    from simcoll.cli import main

    shown = re.findall(r"```\n\$ simcoll (.*?)\n(.*?)```", README.read_text(), flags=re.S)
    assert shown
    for command, output in shown:
        assert main(shlex.split(command)) == 0
        printed = capsys.readouterr().out
        assert [line.rstrip() for line in printed.splitlines()] == [
            line.rstrip() for line in output.splitlines()], command


def test_contributings_imports_name_what_the_modules_export():
    """CONTRIBUTING's skeletons import names a plugin checked with ``mypy --strict``
    must find in each module's ``__all__`` (``Buffer`` from ``simcoll.typing`` was
    imported there but not exported, which strict mypy refuses)."""
    import importlib

    text = (README.parent / "CONTRIBUTING.md").read_text()
    imports = re.findall(r"^\s*from (simcoll[\w.]*) import ([\w, ]+)", text, flags=re.M)
    assert imports
    for module, names in imports:
        exported = getattr(importlib.import_module(module), "__all__", None)
        assert exported is not None, module
        for name in (n.strip() for n in names.split(",")):
            assert name in exported, f"{module} does not export {name}"
