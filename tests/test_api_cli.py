"""The public API surface (the command line is tested in test_cli.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import simcoll as sc

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
    # CI runs the README's test command as it is written there
    tests = next(line for line in head if "pytest" in line)
    assert tests.split("&&", 1)[1].split("#", 1)[0].strip() in ci.splitlines()


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

