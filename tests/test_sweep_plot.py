"""Sweeps and plots consume results; they add no model logic."""

from __future__ import annotations

import json

import pytest

import simcoll as sc
from simcoll.sweep import sweep


def test_sweep_runs_the_grid_in_order_and_saves_every_point(tmp_path):
    path = tmp_path / "points.jsonl"
    results = sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"],
                    ranks=[2, 4], sizes=["1KiB", 4096], save=path)
    assert [(r.algorithm, r.nranks, r.nbytes) for r in results] == [
        ("ring", 2, 1024), ("ring", 2, 4096), ("ring", 4, 1024), ("ring", 4, 4096),
        ("naive", 2, 1024), ("naive", 2, 4096), ("naive", 4, 1024), ("naive", 4, 4096)]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["time"] for line in lines] == [r.time for r in results]


def test_two_workers_give_the_same_results():
    grid = dict(algorithms=["ring"], ranks=[2, 3, 8], sizes=[1 << 20])
    one = sweep(sc.topology.switch, "all_reduce", **grid)
    two = sweep(sc.topology.switch, "all_reduce", workers=2, **grid)
    assert [r.time for r in one] == [r.time for r in two]


def test_a_failing_point_keeps_the_points_before_it(tmp_path):
    path = tmp_path / "points.jsonl"
    with pytest.raises(sc.InvalidInputError, match="servers=3"):
        sweep(sc.topology.switch, "all_reduce", algorithms=["parameter_server"],
              ranks=[4, 2], sizes=[64], save=path, servers=3)
    assert len(path.read_text().splitlines()) == 1


def test_bad_sweep_arguments():
    with pytest.raises(sc.InvalidInputError, match="workers=0"):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2], sizes=[8],
              workers=0)
    with pytest.raises(sc.InvalidInputError, match="empty"):
        sweep(sc.topology.switch, "all_reduce", algorithms=[], ranks=[2], sizes=[8])

