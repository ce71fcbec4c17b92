"""Sweeps and plots consume results; they add no model logic."""

from __future__ import annotations

import pytest

import simcoll as sc
from simcoll.plot import plot_scaling
from simcoll.sweep import sweep


def test_plot_scaling_draws_one_line_per_algorithm(tmp_path):
    results = sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"],
                    ranks=[2, 4, 8], sizes=[1 << 20])
    path = tmp_path / "scaling.png"
    ax = plot_scaling(results, x="nranks", y="time", save=path)
    assert path.stat().st_size > 1000
    lines = {line.get_label(): line.get_ydata().tolist() for line in ax.get_lines()}
    assert lines["all_reduce/ring"] == [r.time for r in results[:3]]
    assert lines["all_reduce/naive"] == [r.time for r in results[3:]]
    with pytest.raises(sc.InvalidInputError, match="y='speed'"):
        plot_scaling(results, y="speed")
