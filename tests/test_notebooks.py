"""Every notebook runs top to bottom in a real kernel (nbclient), its own asserts checking
the claims it makes, and what each cell prints is what the committed notebook shows: the
stored outputs come from today's code (``python notebooks/execute.py`` re-runs them, and
writes each back whole or not at all)."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))

import execute as script  # noqa: E402
from execute import execute, notebooks  # noqa: E402

NOTEBOOKS = notebooks()
RERUN = "re-run it with: python notebooks/execute.py"


def printed(cell: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """What a code cell printed and returned as text, in order (figures left out: their
    bytes depend on the matplotlib build)."""
    out = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            out.append((o.name, o.text))
        elif o.output_type in ("execute_result", "error"):
            out.append((o.output_type, o.get("data", {}).get("text/plain", o.get("evalue"))))
    # the kernel may cut one print into several stream outputs: compare the text joined
    joined: list[tuple[str, str]] = []
    for kind, text in out:
        if joined and joined[-1][0] == kind and kind in ("stdout", "stderr"):
            joined[-1] = (kind, joined[-1][1] + text)
        else:
            joined.append((kind, text))
    return joined


def test_every_notebook_is_found():
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "scaling_curves.ipynb", "write_your_own_algorithm.ipynb",
            "real_machines.ipynb", "all_reduce_scaling.ipynb",
            "data_parallel_training.ipynb", "training_steps.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_notebook_was_executed_in_full(path):
    """Committed with outputs: every code cell ran, in order, without error, and every
    notebook asserts something about what it computes."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: {RERUN}"
    assert not [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert sum("assert " in c.source for c in cells) >= 2, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_and_prints_what_is_stored(path):
    stored = nbformat.read(path, as_version=4)
    fresh = execute(path)
    for number, (old, new) in enumerate(zip(stored.cells, fresh.cells)):
        if old.cell_type != "code":
            continue
        assert printed(new) == printed(old), (
            f"{path.name}, cell {number}: the stored output differs from today's; {RERUN}")


# --- writing back: whole or not at all, the folder checked before any notebook runs ---------

def _notebook(path):
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    return path.read_bytes()


def _ran(notebook_path):
    """What executing it gives, without a kernel: the notebook with an output."""
    notebook = nbformat.read(notebook_path, as_version=4)
    notebook.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"},
                                                        execution_count=1)]
    return notebook


def test_a_notebook_that_cannot_be_written_back_is_left_as_it_was(tmp_path, monkeypatch,
                                                                  capsys):
    """A full disk left a cut-off file that nbformat could no longer read."""
    path = tmp_path / "nb.ipynb"
    before = _notebook(path)
    monkeypatch.setattr(script, "execute", _ran)

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    assert script.main([str(path)]) == 1
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["nb.ipynb"]
    assert f"cannot write {path}: No space left on device" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setattr(script, "execute", _ran)
    assert script.main([str(path)]) == 0
    assert nbformat.read(path, as_version=4).cells[0].outputs[0].data == {"text/plain": "2"}


def test_a_notebook_whose_folder_takes_no_file_is_refused_before_it_runs(tmp_path,
                                                                         monkeypatch, capsys):
    """A read-only folder was found once the notebook had run (minutes for some)."""
    path = tmp_path / "nb.ipynb"
    _notebook(path)
    ran = []
    monkeypatch.setattr(script, "execute", lambda p: ran.append(p) or _ran(p))
    real_open = Path.open

    def read_only(self, mode="r", *args, **kwargs):  # a read-only file system, root or not
        if set(mode) & set("wxa+"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", read_only)
    assert script.main([str(path)]) == 2 and ran == []
    assert (f"cannot write back {path}: cannot write in folder '{tmp_path}' (Read-only file "
            f"system)") in capsys.readouterr().err
