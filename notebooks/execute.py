"""Execute notebooks in a real Jupyter kernel and store their outputs in place.

    python notebooks/execute.py                      # every notebook in this folder
    python notebooks/execute.py quickstart.ipynb     # the ones named

Each notebook runs top to bottom in a fresh ``python3`` kernel (nbclient, ipykernel) with
this folder as its working directory; a cell that raises (an assert included) stops it and
the file is left as it was. A notebook is written back whole or not at all (through a
temporary file, as simcoll writes its files), and one that could not be written back is
refused before any runs. Cell timings are not recorded, so a re-run of unchanged code
changes only what the code prints and draws. ``tests/test_notebooks.py`` runs the same
function and compares what each cell prints with what is stored.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from simcoll.files import unwritable, write_atomically

__all__ = ["FOLDER", "execute", "notebooks"]

FOLDER = Path(__file__).resolve().parent
TIMEOUT = 600  # seconds a cell may take before the run stops


def notebooks() -> list[Path]:
    """Every notebook of this folder, by name."""
    return sorted(FOLDER.glob("*.ipynb"))


def execute(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` run top to bottom in a fresh kernel, with its outputs.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised; the message shows it.
    """
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=TIMEOUT, kernel_name="python3",
                            record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return notebook


def main(names: list[str]) -> int:
    """Execute the named notebooks (all by default) and write each one back.

    Returns 2 before running any if one is missing or its folder takes no file, 1 if a
    notebook could not be written back (it is then left as it was), else 0.
    """
    paths = [FOLDER / name for name in names] if names else notebooks()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    for path in paths:
        problem = unwritable(path)
        if problem:
            print(f"cannot write back {path}: {problem}", file=sys.stderr)
            return 2
    for path in paths:
        start = time.perf_counter()
        notebook = execute(path)
        try:
            write_atomically(path, functools.partial(nbformat.write, notebook))
        except OSError as exc:
            print(f"{exc}; {path.name} is left as it was", file=sys.stderr)
            return 1
        print(f"{path.name}: executed in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NOTEBOOK",
                        help="notebooks of this folder to run (default: every one)")
    sys.exit(main(parser.parse_args().names))
