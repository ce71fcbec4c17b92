"""The public API surface and the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

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


def test_algorithms_from_other_packages_arrive_through_entry_points(monkeypatch, tmp_path):
    from importlib.metadata import EntryPoint

    import simcoll.algorithms.registry as registry

    plugin = tmp_path / "my_simcoll_plugin.py"
    plugin.write_text(
        "import numpy as np\n"
        "import simcoll as sc\n"
        "from simcoll.cost import CostModel, gpu_traffic\n"
        "def time(p, nbytes, alpha, beta, gamma):\n"
        "    return alpha + (p - 1) * nbytes * beta if p > 1 else 0.0\n"
        "def traffic(p, nbytes, itemsize, *, root):\n"
        "    sent = np.zeros(p, np.int64)\n"
        "    sent[root] = (p - 1) * nbytes\n"
        "    received = np.full(p, nbytes)\n"
        "    received[root] = 0\n"
        "    return gpu_traffic(sent, received)\n"
        "@sc.register('broadcast', 'plugin_flat', cost=CostModel(time=time, traffic=traffic))\n"
        "def flat(comm, x, *, root=0):\n"
        "    if comm.rank == root:\n"
        "        for peer in range(comm.size):\n"
        "            if peer != root:\n"
        "                comm.send(x, dst=peer)\n"
        "        return x\n"
        "    return (yield comm.recv(src=root))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    group = registry.ENTRY_POINT_GROUP
    point = EntryPoint(name="mine", value="my_simcoll_plugin", group=group)
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    assert ("broadcast", "plugin_flat") in sc.list_algorithms()
    data = [np.arange(5.0) * (r + 1) for r in range(3)]
    res = sc.simulate(sc.topology.switch(3), "broadcast", algorithm="plugin_flat", data=data,
                      root=2)
    assert res.correct and list(res.bytes_sent) == [0, 0, 80]
    # The plugin's cost model answers through simcoll.cost like a built-in one.
    assert sc.cost.predict("broadcast", "plugin_flat", p=3, nbytes=40, alpha=1.0,
                           beta=0.5) == 1.0 + 2 * 40 * 0.5
    model = sc.cost.traffic("broadcast", "plugin_flat", p=3, nbytes=40, root=2)
    assert list(model.sent) == [0, 0, 80] and list(model.received) == [40, 40, 0]


def test_run_writes_a_trace(tmp_path, capsys):
    path = tmp_path / "trace.json"
    assert main(["run", "--topology", "switch:4", "--size", "4KiB", "--trace", str(path)]) == 0
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(e["ph"] == "b" for e in events) == 2 * 4 * 3
    assert main(["run", "--size", "4KiB", "--trace", str(tmp_path / "no" / "t.json")]) == 2
    assert "t.json" in capsys.readouterr().err
