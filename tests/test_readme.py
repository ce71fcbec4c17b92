"""The README's Python examples run, in order, as a user would paste them."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    assert (tmp_path / "ring.json").exists() and (tmp_path / "busbw.png").exists()
    assert len((tmp_path / "points.jsonl").read_text().splitlines()) == 8
    step = namespace["step"]
    assert step.buckets == 54 and step.exposed_communication > 0
    import matplotlib.pyplot as plt

    plt.close("all")
