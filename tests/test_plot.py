"""Plots draw what the records and traces say, in the units their labels state."""

from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, reference_network, register_probe

import simcoll as sc
from simcoll.cost import CostModel
from simcoll.link_load import LinkLoad, binned_bytes
from simcoll.plot import link_utilization, plot_scaling, scaling, timeline
from simcoll.plot.records import read_points, topology_templates

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def reference(p: int) -> sc.Topology:
    """The alpha-beta reference network with free reductions (gamma = 0)."""
    return sc.topology.switch(p, bandwidth=1 / BETA, latency=ALPHA / 2)


def lines(fig, gid: str) -> list:
    return [line for line in fig.axes[0].get_lines() if line.get_gid() == gid]


def xy(line) -> tuple[list[float], list[float]]:
    return [float(v) for v in line.get_xdata()], [float(v) for v in line.get_ydata()]


def tick_texts(fig, axis: str) -> list[str]:
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels]


@pytest.fixture(scope="module")
def grid():
    """ring and naive all_reduce at 2, 4, 8 ranks and two sizes, on the reference network."""
    return [sc.simulate(reference(p), "all_reduce", algorithm=a, nbytes=n)
            for a in ("ring", "naive") for p in (2, 4, 8) for n in (1 << 20, 64 << 20)]


# -- scaling ------------------------------------------------------------------------------
def test_one_line_per_algorithm_and_size_with_busbw_in_gb_per_s(grid):
    fig = scaling(grid, x="nranks", y="busbw")
    drawn = lines(fig, "simulated")
    assert len(drawn) == 4
    by_label = {line.get_label(): xy(line) for line in drawn}
    for algorithm in ("ring", "naive"):
        for n, size in ((1 << 20, "1 MiB"), (64 << 20, "64 MiB")):
            points = sorted((r.nranks, r.busbw) for r in grid
                            if r.algorithm == algorithm and r.nbytes == n)
            xs, ys = by_label[f"{algorithm} ({size} per rank)"]
            assert xs == [p for p, _ in points]
            assert ys == pytest.approx([b / 1e9 for _, b in points], rel=1e-12)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "busbw (GB/s)" and ax.get_xlabel() == "ranks"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "all_reduce on switch(p)"
    assert tick_texts(fig, "x") == ["2", "4", "8"]
    assert ax.get_legend() is not None


def test_dicts_from_a_sweep_file_draw_the_same_lines(grid):
    records = [json.loads(json.dumps(r.to_dict())) for r in grid]
    from_dicts = {line.get_label(): xy(line)
                  for line in lines(scaling(records, y="algbw"), "simulated")}
    from_results = {line.get_label(): xy(line)
                    for line in lines(scaling(grid, y="algbw"), "simulated")}
    assert from_dicts == from_results and len(from_dicts) == 4


def test_the_title_names_the_fixed_size_and_each_line_its_algorithm(grid):
    fig = scaling([r for r in grid if r.nbytes == 64 << 20], y="time")
    assert fig.axes[0].get_title() == "all_reduce on switch(p), 64 MiB per rank"
    assert sorted(line.get_label() for line in lines(fig, "simulated")) == ["naive", "ring"]


def test_labels_name_what_differs_between_lines_and_the_title_what_does_not():
    results = [sc.simulate(reference(8), c, algorithm="ring", nbytes=n)
               for c in ("all_reduce", "all_gather") for n in (1 << 10, 1 << 20)]
    fig = scaling(results, x="nbytes", y="algbw")
    assert fig.axes[0].get_title() == "switch(8), 8 ranks"
    by_label = {line.get_label(): xy(line) for line in lines(fig, "simulated")}
    assert sorted(by_label) == ["ring (all_gather)", "ring (all_reduce)"]
    gather = sorted((r.nbytes, r.algbw / 1e9) for r in results if r.collective == "all_gather")
    assert by_label["ring (all_gather)"] == ([n for n, _ in gather], [b for _, b in gather])
    fig = scaling(results, x="nbytes", y="algbw", by="collective")
    assert sorted(line.get_label() for line in lines(fig, "simulated")) == [
        "all_gather", "all_reduce"]


def test_time_is_shown_in_a_unit_chosen_from_the_data(grid):
    small = [r for r in grid if r.nbytes == 1 << 20]
    assert max(r.time for r in small) < 1e-3
    fig = scaling(small, y="time")
    assert fig.axes[0].get_ylabel() == "time (µs)"
    for line in lines(fig, "simulated"):
        algorithm = line.get_label()
        expected = sorted((r.nranks, r.time * 1e6) for r in small if r.algorithm == algorithm)
        assert xy(line)[1] == pytest.approx([t for _, t in expected], rel=1e-12)
    big = [r for r in grid if r.nbytes == 64 << 20]
    assert 1e-3 <= max(r.time for r in big) < 1
    fig = scaling(big, y="time")
    assert fig.axes[0].get_ylabel() == "time (ms)"
    ring = sorted((r.nranks, r.time) for r in big if r.algorithm == "ring")
    (line,) = [line for line in lines(fig, "simulated") if line.get_label() == "ring"]
    assert xy(line)[1] == pytest.approx([t * 1e3 for _, t in ring], rel=1e-12)


def test_sizes_are_labelled_in_binary_units():
    sizes = [8, 1 << 10, 1 << 20, 1 << 30]
    results = [sc.simulate(reference(8), "all_reduce", algorithm="ring", nbytes=n)
               for n in sizes]
    fig = scaling(results, x="nbytes", y="time")
    assert tick_texts(fig, "x") == ["8 B", "1 KiB", "1 MiB", "1 GiB"]
    assert fig.axes[0].get_xlabel() == "size per rank"
    assert fig.axes[0].get_title() == "all_reduce on switch(8), 8 ranks"
    (line,) = lines(fig, "simulated")
    assert xy(line)[0] == sizes


def test_many_sizes_get_thinned_power_of_two_ticks():
    sizes = [1 << k for k in range(3, 31)]
    results = [{"collective": "all_reduce", "algorithm": "ring", "topology": "switch(8)",
                "nranks": 8, "nbytes": n, "time": 1e-6 + n * 1e-11} for n in sizes]
    texts = tick_texts(scaling(results, x="nbytes", y="time"), "x")
    # 28 octaves: every 10th (every 5th gave 32 B, 1 KiB, 32 KiB, ..., two unit cycles).
    assert texts == ["1 KiB", "1 MiB", "1 GiB"]


def test_formula_lines_are_the_alpha_beta_model_dashed_in_the_line_colour(grid):
    fig = scaling(grid, y="busbw", formula=True, alpha=ALPHA, beta=BETA, gamma=0.0)
    model = lines(fig, "formula")
    assert len(model) == 4 and all(line.get_linestyle() == "--" for line in model)
    simulated = lines(fig, "simulated")
    for line, sim in zip(model, simulated):
        assert line.get_color() == sim.get_markeredgecolor()
    ring_64 = [line for line, sim in zip(model, simulated)
               if sim.get_label() == "ring (64 MiB per rank)"][0]
    n = 64 << 20
    xs, ys = xy(ring_64)
    assert xs == [2, 4, 8]
    # Ring: 2(p-1) alpha + 2(p-1)/p n beta; busbw = n / t * 2(p-1)/p.
    expected = [n / (2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA) * 2 * (p - 1) / p / 1e9
                for p in xs]
    assert ys == pytest.approx(expected, rel=1e-12)
    naive_1 = [line for line, sim in zip(model, simulated)
               if sim.get_label() == "naive (1 MiB per rank)"][0]
    # Naive: alpha + (p-1) n beta with free reductions.
    n = 1 << 20
    assert xy(naive_1)[1] == pytest.approx(
        [n / (ALPHA + (p - 1) * n * BETA) * 2 * (p - 1) / p / 1e9 for p in (2, 4, 8)],
        rel=1e-12)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "α-β-γ model (dashed)" in labels


def test_formula_time_with_gamma_matches_the_hand_formula():
    results = [sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=n)
               for p in (2, 3, 5) for n in (3 * 5 * 4096,)]
    fig = scaling(results, y="time", formula=True, alpha=ALPHA, beta=BETA, gamma=GAMMA)
    (model,) = lines(fig, "formula")
    n = 3 * 5 * 4096
    expected = [2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA + (p - 1) / p * n * GAMMA
                for p in (2, 3, 5)]
    assert fig.axes[0].get_ylabel() == "time (µs)"
    assert xy(model)[1] == pytest.approx([t * 1e6 for t in expected], rel=1e-12)
    (sim,) = lines(fig, "simulated")
    assert xy(sim)[1] == pytest.approx(xy(model)[1], rel=1e-9)


def test_points_without_a_model_are_skipped_and_the_legend_says_so():
    def no_closed_form(*args, **kwargs):
        raise sc.InvalidInputError("this algorithm has no closed form")

    if ("all_reduce", "test_plot_unmodelled") not in sc.list_algorithms("all_reduce"):
        @sc.register("all_reduce", "test_plot_unmodelled",
                     cost=CostModel(time=no_closed_form, traffic=no_closed_form))
        def unmodelled(comm, x, *, op):
            return (yield from sc.get_algorithm("all_reduce", "ring").program(comm, x, op=op))

    results = [sc.simulate(reference(p), "all_reduce", algorithm=a, nbytes=1 << 20)
               for a in ("ring", "test_plot_unmodelled") for p in (2, 4)]
    fig = scaling(results, formula=True, alpha=ALPHA, beta=BETA, gamma=0.0)
    labels = sorted(line.get_label() for line in lines(fig, "simulated"))
    assert labels == ["ring", "test_plot_unmodelled (no model)"]
    assert len(lines(fig, "formula")) == 1


def test_formula_needs_alpha_beta_and_gamma(grid):
    with pytest.raises(sc.InvalidInputError, match="alpha.*beta.*gamma"):
        scaling(grid, formula=True, alpha=ALPHA, beta=BETA)
    for bad, match in [(dict(alpha=-ALPHA), r"^alpha=-"), (dict(beta=math.nan), "^beta=nan"),
                       (dict(gamma="0"), "^gamma='0'"), (dict(formula="yes"), "^formula='yes'")]:
        with pytest.raises(sc.InvalidInputError, match=match + ".* is not accepted"):
            scaling(grid, **{"formula": True, "alpha": ALPHA, "beta": BETA, "gamma": 0.0, **bad})


def test_points_that_cannot_sit_on_log_axes_are_left_out():
    results = [sc.simulate(reference(p), "all_reduce", algorithm="ring", nbytes=4096)
               for p in (1, 2, 4)]
    assert results[0].busbw == 0
    (line,) = lines(scaling(results, y="busbw"), "simulated")
    assert xy(line)[0] == [2, 4]
    failed = {"collective": "all_reduce", "algorithm": "ring", "nranks": 8, "nbytes": 64,
              "error": "TopologyError: ..."}
    (line,) = lines(scaling([r.to_dict() for r in results] + [failed], y="busbw"),
                    "simulated")
    assert xy(line)[0] == [2, 4]
    swept = sc.sweep(reference, "all_reduce", algorithms=["parameter_server"],
                     ranks=[2, 4], sizes=[4096], servers=3, progress=False)
    assert len(swept.failed) == 1  # 3 servers on 2 ranks is refused
    (line,) = lines(scaling(swept, y="busbw"), "simulated")
    assert xy(line)[0] == [4]


def test_a_rerun_point_replaces_the_earlier_one_and_lines_never_zigzag(grid):
    again = [r.to_dict() for r in grid] + [dict(grid[0].to_dict(), time=0.5e-3)]
    for line in lines(scaling(again, y="time"), "simulated"):
        xs = xy(line)[0]
        assert xs == sorted(set(xs))
    fig = scaling(again, y="time")
    label = f"{grid[0].algorithm} (1 MiB per rank)"
    (line,) = [line for line in lines(fig, "simulated") if line.get_label() == label]
    assert xy(line)[1][0] == pytest.approx(0.5)


def test_different_topologies_get_lines_of_their_own_or_are_refused_at_one_x():
    a = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=4096)
    b = sc.simulate(sc.topology.switch(4, servers=1), "all_reduce", algorithm="ring",
                    nbytes=4096)
    assert sorted(line.get_label() for line in lines(scaling([a, b]), "simulated")) == [
        "ring (switch(4))", "ring (switch(4, servers=1))"]
    # Both read cluster(nxn) as the numbers change, and both have 8 ranks.
    c = sc.simulate(sc.topology.cluster(2, 4), "all_reduce", algorithm="ring", nbytes=4096)
    d = sc.simulate(sc.topology.cluster(4, 2), "all_reduce", algorithm="ring", nbytes=4096)
    with pytest.raises(sc.InvalidInputError, match="different topologies"):
        scaling([c, d])


def test_machines_of_one_name_told_apart_by_their_records_are_refused_on_one_line():
    def record(nranks: int, digest: str, time: float) -> dict:
        return {"collective": "all_reduce", "algorithm": "ring", "topology": f"switch({nranks})",
                "nranks": nranks, "nbytes": 8, "time": time, "topology_hash": digest}

    # A rerun on the same machine replaces the earlier point.
    fig = scaling([record(2, "a2", 1.0), record(4, "a4", 2.0), record(2, "a2", 3.0)])
    assert [list(xy(line)[1]) for line in lines(fig, "simulated")] == [[3.0, 2.0]]
    with pytest.raises(sc.InvalidInputError, match=r"different machines of that name "
                                                   r"\('topology_hash=a2' and "
                                                   r"'topology_hash=b2'\)"):
        scaling([record(2, "a2", 1.0), record(4, "a4", 2.0), record(2, "b2", 3.0)])


def test_every_line_keeps_a_look_of_its_own_and_a_long_legend_fits_the_figure():
    # 5 algorithms x 5 rank counts, lines per rank count against size: 25 legend entries,
    # the last three of which fell off a 4.2-inch figure; and an algorithm's second line
    # took the next algorithm's marker (ring's second a square, tree's own).
    records = [{"collective": "all_reduce", "algorithm": a, "topology": f"switch({p})",
                "nranks": p, "nbytes": n, "time": (k + 1) * p * n * 1e-12}
               for k, a in enumerate(["ring", "naive", "tree", "recursive_doubling",
                                      "parameter_server"])
               for p in (2, 4, 8, 16, 32) for n in (1024, 64 << 20)]
    fig = scaling(records, x="nbytes")
    drawn = lines(fig, "simulated")
    assert len(drawn) == 25
    looks = {(line.get_marker(), line.get_fillstyle(), line.get_markeredgecolor())
             for line in drawn}
    assert len(looks) == 25
    marker_of: dict[str, set] = {}
    for line in drawn:
        marker_of.setdefault(line.get_label().split(" (")[0], set()).add(line.get_marker())
    assert all(len(m) == 1 for m in marker_of.values())
    assert len(set().union(*marker_of.values())) == 5
    fig.canvas.draw()
    legend = fig.axes[0].get_legend().get_window_extent()
    assert len(fig.axes[0].get_legend().get_texts()) == 25
    assert legend.y0 >= 0 and legend.y1 <= fig.bbox.height
    assert legend.x1 <= fig.bbox.width


def test_sweeps_on_machines_of_one_name_are_refused_not_merged(tmp_path):
    # switch(p) at 100 and at 10 GB/s: one "ring" line showed only the later machine's
    # times, whether given the sweeps' results, their concatenation or the loaded file.
    def sweep(bandwidth: float):
        return sc.sweep(lambda p: sc.topology.switch(p, bandwidth=bandwidth), "all_reduce",
                        algorithms=["ring"], ranks=[2, 4], sizes=[1024],
                        save=tmp_path / "both.jsonl", progress=False)

    fast, slow = sweep(100e9), sweep(10e9)
    assert fast[0].time != slow[0].time
    with pytest.raises(sc.InvalidInputError, match="different machines of that name"):
        scaling(sc.load_results(tmp_path / "both.jsonl"))
    with pytest.raises(sc.InvalidInputError, match=r"points at nranks=2 on 'switch\(2\)' "
                                                   r"took different times"):
        scaling(list(fast) + list(slow))
    # A rerun of the same machine is still one line, of the later run.
    again = sc.simulate(sc.topology.switch(2, bandwidth=100e9), "all_reduce",
                        algorithm="ring", nbytes=1024)
    fig = scaling(list(fast) + [again])
    (line,) = lines(fig, "simulated")
    assert list(xy(line)[1]) == pytest.approx([again.time * 1e6, fast[1].time * 1e6])


def test_topology_names_become_templates_where_their_numbers_change():
    def point(topology: str, nranks: int) -> dict:
        return {"collective": "all_reduce", "algorithm": "ring", "topology": topology,
                "nranks": nranks, "nbytes": 8, "time": 1.0}

    points = read_points([point("switch(2)", 2), point("switch(16)", 16),
                          point("dgx_a100x1", 8), point("dgx_a100x2", 16),
                          point("ring(4)", 4)])
    assert topology_templates(points) == ["switch(p)", "switch(p)", "dgx_a100xn",
                                          "dgx_a100xn", "ring(4)"]


def test_bad_arguments_are_refused_before_drawing(grid, tmp_path):
    before = plt.get_fignums()
    for kwargs, match in [({"y": "speed"}, "y='speed'"), ({"x": "time"}, "x='time'"),
                          ({"x": "nbytes", "split": "nbytes"}, "split='nbytes'"),
                          ({"by": "colour"}, "by='colour'"),
                          ({"save": tmp_path / "a.xyz"}, r"a\.xyz.*\.png"),
                          ({"save": tmp_path / "no" / "a.png"}, "does not exist")]:
        with pytest.raises(sc.InvalidInputError, match=match):
            scaling(grid, **kwargs)
    with pytest.raises(sc.InvalidInputError, match="no record"):
        scaling([])
    with pytest.raises(sc.InvalidInputError, match="'nbytes'"):
        scaling([{"collective": "all_reduce", "algorithm": "ring", "nranks": 2}])
    with pytest.raises(sc.InvalidInputError, match="record 0 is a str"):
        scaling(["ring"])
    assert plt.get_fignums() == before


def test_save_writes_the_figure_and_a_failed_save_keeps_the_old_file(grid, tmp_path,
                                                                      monkeypatch):
    path = tmp_path / "busbw.png"
    scaling(grid, y="busbw", save=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    old = path.read_bytes()
    from matplotlib.figure import Figure

    def broken(self, fname, **kwargs):
        with open(fname, "wb") as f:
            f.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", broken)
    with pytest.raises(OSError, match="disk full"):
        scaling(grid, y="time", save=path)
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busbw.png"]


def test_plot_scaling_is_scaling_returning_its_axes(grid):
    ax = plot_scaling(grid, x="nranks", y="busbw")
    fig = scaling(grid, x="nranks", y="busbw")
    assert [xy(line) for line in ax.get_lines()] == [xy(line) for line in fig.axes[0].get_lines()]
    assert sc.plot_scaling is plot_scaling
    _, own = plt.subplots()
    assert plot_scaling(grid, ax=own) is own


# -- timeline -----------------------------------------------------------------------------
def bars(fig) -> dict[str, list[tuple[float, float]]]:
    """The (start, end) of every bar drawn, by its collection's gid (rank/stream)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for collection in fig.axes[0].collections:
        for path in collection.get_paths():
            x = path.vertices[:, 0]
            out.setdefault(collection.get_gid(), []).append((float(x.min()), float(x.max())))
    return {gid: sorted(spans) for gid, spans in out.items()}


def bar_rows(fig, gid: str) -> list[tuple[float, float]]:
    """The (bottom, top) of each bar of ``gid``, in drawing order."""
    return [(float(path.vertices[:, 1].min()), float(path.vertices[:, 1].max()))
            for c in fig.axes[0].collections if c.get_gid() == gid for path in c.get_paths()]


def test_timeline_bars_are_the_trace_spans_per_rank_and_stream():
    p, n = 4, 4 * 4 * 1024
    res = sc.simulate(reference_network(p), "all_reduce", algorithm="ring", nbytes=n,
                      trace=True)
    fig = timeline(res)
    drawn = bars(fig)
    assert set(drawn) == {f"rank {r}/{s}" for r in range(p) for s in ("send", "recv", "reduce")}
    for r in range(p):
        sends = sorted((e.start * 1e6, e.end * 1e6) for e in res.trace
                       if e.kind == "message" and e.rank == r)
        recvs = sorted((e.start * 1e6, e.end * 1e6) for e in res.trace
                       if e.kind == "message" and e.peer == r)
        reductions = sorted((e.start * 1e6, e.end * 1e6) for e in res.trace
                            if e.kind == "reduce" and e.rank == r)
        assert len(sends) == len(recvs) == 2 * (p - 1) and len(reductions) == p - 1
        for stream, spans in (("send", sends), ("recv", recvs), ("reduce", reductions)):
            got = drawn[f"rank {r}/{stream}"]
            assert np.array(got) == pytest.approx(np.array(spans), rel=1e-9, abs=1e-9)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (µs)"
    assert ax.get_xlim() == pytest.approx((0, res.time * 1e6))
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(p)]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["send", "receive", "reduction", "idle (gap)"]
    assert "all_reduce/ring on switch(4)" in ax.get_title()
    assert "16 KiB per rank" in ax.get_title()


def test_overlapping_messages_get_lanes_of_their_own():
    # Naive all_reduce: each rank sends to the p-1 others at once.
    p = 4
    res = sc.simulate(reference(p), "all_reduce", algorithm="naive", nbytes=4096, trace=True)
    fig = timeline(res)
    for r in range(p):
        for stream in ("send", "recv"):
            rows = bar_rows(fig, f"rank {r}/{stream}")
            assert len(rows) == p - 1
            # p-1 equal, disjoint lanes inside the stream's row.
            rows.sort()
            heights = [top - bottom for bottom, top in rows]
            assert heights == pytest.approx([heights[0]] * (p - 1))
            assert all(a[1] <= b[0] + 1e-12 for a, b in zip(rows, rows[1:]))
    ring = sc.simulate(reference(p), "all_reduce", algorithm="ring", nbytes=4096, trace=True)
    rows = bar_rows(timeline(ring), "rank 0/send")
    assert len(rows) == 2 * (p - 1) and len(set(rows)) == 1


def test_timeline_shows_hosts_and_compute():
    @register_probe("all_reduce", "test_plot_compute")
    def busy(comm, x, *, op):
        yield comm.compute(2e-6 * (comm.rank + 1))
        return x

    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_plot_compute",
                      nbytes=8, trace=True)
    drawn = bars(timeline(res))
    assert drawn == {"rank 0/compute": [(0.0, pytest.approx(2.0))],
                     "rank 1/compute": [(0.0, pytest.approx(4.0))]}
    topo = sc.topology.switch(3, servers=1)
    res = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=3 * 1024,
                      trace=True)
    fig = timeline(res, topo)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        "rank 0", "rank 1", "rank 2", "host 0"]
    assert len(bars(fig)["host 0/recv"]) == 3
    # Without the topology a host and an in-network device look alike in the result.
    labels = [t.get_text() for t in timeline(res).axes[0].get_yticklabels()]
    assert labels[3] == "endpoint 3 (host or in-network device)"
    with pytest.raises(sc.InvalidInputError, match="not the one the result ran on"):
        timeline(res, sc.topology.switch(3))


def test_a_large_timeline_is_clipped_with_a_note_and_ranks_can_be_chosen():
    res = sc.simulate(sc.topology.switch(64), "all_reduce", algorithm="ring", nbytes=64 * 64,
                      trace=True)
    fig = timeline(res)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(16)]
    assert ax.get_title().endswith("\nshowing ranks 0-15 of 64")
    assert {gid.split("/")[0] for gid in bars(fig)} == {f"rank {r}" for r in range(16)}
    fig = timeline(res, ranks=[40, 3])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["rank 40", "rank 3"]
    assert "showing" not in fig.axes[0].get_title()
    topo = sc.topology.switch(20, servers=2)
    res = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=20 * 64,
                      trace=True)
    ax = timeline(res, topo, max_ranks=8).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"rank {r}" for r in range(6)] + ["host 0", "host 1"]
    # Of 20 ranks and 2 hosts, the first 6 ranks and both hosts (it said "8 of 22 ranks
    # and other endpoints", which read as a machine of 22 ranks).
    assert ax.get_title().endswith(
        "\nshowing ranks 0-5 of 20 and the 2 other endpoints that took part")
    ax = timeline(res, topo, max_ranks=3).axes[0]
    assert ax.get_title().endswith(
        "\nshowing ranks 0-1 of 20 and 1 of the 2 other endpoints that took part")


def test_timeline_refuses_bad_input():
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=64)
    with pytest.raises(sc.InvalidInputError, match="trace=True"):
        timeline(res)
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=64,
                      trace=True)
    with pytest.raises(sc.InvalidInputError, match=r"ranks=\[2\].*0\.\.1"):
        timeline(res, ranks=[2])
    with pytest.raises(sc.InvalidInputError, match="max_ranks=0"):
        timeline(res, max_ranks=0)


# -- link utilization ---------------------------------------------------------------------
L, B, N, T0 = 0.5e-6, 1e9, 3000, 4e-6


@pytest.fixture(scope="module")
def lone_message():
    """Rank 0 computes for T0, then sends N bytes to rank 1, alone on its path."""
    @register_probe("all_reduce", "test_plot_lone_message")
    def lone(comm, x, *, op):
        if comm.rank == 0:
            yield comm.compute(T0)
            yield comm.send(x, dst=1)
        else:
            yield comm.recv(src=0)
        return x

    topo = sc.topology.switch(2, bandwidth=B, latency=L)
    res = sc.simulate(topo, "all_reduce", algorithm="test_plot_lone_message", nbytes=N,
                      trace=True)
    return topo, res


def mesh_of(fig):
    (mesh,) = [c for c in fig.axes[0].collections if hasattr(c, "get_coordinates")]
    return mesh


def test_a_lone_message_fills_each_link_of_its_route_at_its_rate(lone_message):
    topo, res = lone_message
    duration = 2 * L + N / B            # two links of latency L, then N bytes at B
    assert res.time == pytest.approx(T0 + duration, rel=1e-12)
    fig = link_utilization(res, topo, bins=8)
    mesh = mesh_of(fig)
    grid = np.asarray(mesh.get_array()).reshape(2, 8)
    # T0 = duration = 4 us and 2L = 1 us: the bytes move from 5 to 8 us, at the links'
    # whole bandwidth; the first five 1-us bins are idle, the last three full.
    assert 2 * L == pytest.approx(1e-6) and N / B == pytest.approx(3e-6)
    expected = np.array([[0.0] * 5 + [1.0] * 3] * 2)
    np.testing.assert_allclose(grid, expected, rtol=1e-9, atol=1e-12)
    x_edges = mesh.get_coordinates()[0, :, 0]
    np.testing.assert_allclose(x_edges, np.linspace(0, 8, 9), rtol=1e-12)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gpu0->switch", "switch->gpu1"]
    assert ax.get_xlabel() == "time (µs)"
    assert mesh.norm.vmin == 0 and mesh.norm.vmax == 1
    assert fig.axes[1].get_ylabel() == "fraction of link bandwidth"
    # Three bins of 8/3 us: the transfer fills 1/3 us of the middle one (1/8 of it) and
    # all of the last.
    grid = np.asarray(mesh_of(link_utilization(res, topo, bins=3)).get_array())
    np.testing.assert_allclose(grid.reshape(2, 3), [[0, 1 / 8, 1.0]] * 2,
                               rtol=1e-9, atol=1e-12)


def test_each_row_adds_up_to_the_bytes_the_network_counted_on_that_link():
    topo = reference_network(4)
    for algorithm in ("ring", "naive"):
        res = sc.simulate(topo, "all_reduce", algorithm=algorithm, nbytes=4 * 1024,
                          trace=True)
        fig = link_utilization(res, topo, bins=37)
        ax = fig.axes[0]
        names = [t.get_text() for t in ax.get_yticklabels()]
        carried = {f"{u}->{v}": b for (u, v), b in res.link_bytes.items() if b}
        assert sorted(names) == sorted(carried)
        grid = np.asarray(mesh_of(fig).get_array()).reshape(len(names), 37)
        assert grid.min() >= 0 and grid.max() <= 1
        width = res.time / 37
        for name, row in zip(names, grid):
            assert row.sum() * width / BETA == pytest.approx(carried[name], rel=1e-9)


def test_link_utilization_refuses_bad_input(lone_message):
    topo, res = lone_message
    with pytest.raises(sc.InvalidInputError, match="bins=0"):
        link_utilization(res, topo, bins=0)
    with pytest.raises(sc.InvalidInputError, match="not the one the result ran on"):
        link_utilization(res, sc.topology.ring(2))
    untraced = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=64)
    with pytest.raises(sc.InvalidInputError, match="trace=True"):
        link_utilization(untraced, topo)


def test_plotting_leaves_the_core_free_of_matplotlib():
    import subprocess
    import sys

    code = ("import sys, simcoll as sc; "
            "sc.simulate(sc.topology.switch(2), 'all_reduce', algorithm='ring', nbytes=8); "
            "import simcoll.plot, simcoll.trace, simcoll.link_load; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_timeline_draws_a_program_run():
    def program(comm, x):
        yield comm.compute(2e-6)
        out = yield comm.all_reduce(x, algorithm="ring")
        return out

    topo = sc.topology.switch(2, bandwidth=1e9, latency=0)
    res = sc.run_program(topo, program, sc.VirtualBuffer.of(1000, "float32"), trace=True)
    fig = sc.plot.timeline(res)
    ax = fig.axes[0]
    assert ax.get_title().startswith("a program on switch(2): ")
    computes = [c for c in ax.collections if c.get_gid() == "rank 0/compute"]
    (bars,) = computes
    (path,) = bars.get_paths()
    xs = path.vertices[:, 0]
    assert (min(xs), max(xs)) == pytest.approx((0.0, 2.0))  # us: the compute span


def test_an_algorithm_that_chooses_per_size_draws_one_line_per_request(tmp_path):
    """NCCL's tuner picks another algorithm and protocol at each size, and each result's
    params say what ran, so NCCL's points fell apart into one marker per choice, their
    labels too long for the legend. Lines go by the parameters asked for
    (``Result.requested``): NCCL's choice is one line, NCCL told to run rings another,
    from Results, from their dicts and from a sweep read back alike."""
    topo = sc.topology.dgx_h100(1)
    sizes = [1 << 10, 1 << 20, 1 << 26]
    auto = [sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n) for n in sizes]
    rings = [sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=n, algo="ring")
             for n in sizes]
    assert len({r.params["algo"] for r in auto}) > 1
    assert [r.requested for r in auto] == [{}] * 3
    assert [r.requested for r in rings] == [{"algo": "ring"}] * 3
    assert auto[0].to_dict()["requested"] == {}
    for results in (auto + rings, [r.to_dict() for r in auto + rings]):
        fig = scaling(results, x="nbytes", y="time")
        drawn = lines(fig, "simulated")
        assert [line.get_label() for line in drawn] == ["nccl", "nccl (algo='ring')"]
        assert [xy(line)[1] for line in drawn] == [
            [r.time * 1e6 for r in auto], [r.time * 1e6 for r in rings]]
        plt.close(fig)
    swept = sc.sweep(lambda p: topo, "all_reduce", algorithms=["nccl"], ranks=[8],
                     sizes=sizes, save=tmp_path / "points.jsonl")
    assert [r.requested for r in swept] == [{}] * 3
    fig = scaling(sc.load_results(tmp_path / "points.jsonl"), x="nbytes", y="time")
    assert [line.get_label() for line in lines(fig, "simulated")] == ["nccl"]


def test_timeline_draws_the_critical_path_along_the_bands_it_crosses():
    topo = sc.topology.switch(4, bandwidth=100 * sc.GB, latency=sc.us,
                              reduce_bandwidth=200 * sc.GB)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=4 * sc.MiB, trace=True)
    ax = timeline(res, critical=True).axes[0]
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "critical path"]
    xs, ys = line.get_data()
    segments = sc.critical_path(res).segments
    # Two points per segment, in microseconds, from 0 to the run's time.
    assert len(xs) == 2 * len(segments)
    np.testing.assert_allclose(xs[::2], [s.start * 1e6 for s in segments], rtol=1e-12)
    np.testing.assert_allclose(xs[1::2], [s.end * 1e6 for s in segments], rtol=1e-12)
    # Each segment sits in its endpoint's band (band r spans r - 0.5 .. r + 0.5).
    for s, y in zip(segments, ys[::2]):
        assert abs(y - s.endpoint) < 0.5, s
    assert "critical path" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert not [ln for ln in timeline(res).axes[0].get_lines()
                if ln.get_gid() == "critical path"]


def test_an_nvswitch_has_a_band_of_its_own_and_the_path_breaks_where_none_is_shown():
    """NVLS: the path runs through the NVSwitch's reductions. Its band was labelled
    "host 0" on a machine without hosts."""
    topo = sc.topology.dgx_h100(1)
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=4 * sc.MiB, algo="nvls",
                      trace=True)
    on_switch = sum(s.endpoint == 8 for s in sc.critical_path(res).segments)
    assert on_switch > 0
    ax = timeline(res, topo, critical=True).axes[0]
    assert ax.get_yticklabels()[8].get_text() == "in-network device nvswitch0"
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "critical path"]
    ys = np.asarray(line.get_data()[1], dtype=float)
    assert not np.isnan(ys).any() and ((ys > 7.5) & (ys < 8.5)).sum() == 2 * on_switch
    # Without the switch's band, the path breaks once for each of its segments there.
    ax = timeline(res, topo, ranks=list(range(8)), critical=True).axes[0]
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "critical path"]
    ys = np.asarray(line.get_data()[1], dtype=float)
    assert np.isnan(ys).sum() == on_switch and np.nanmax(ys) < 7.5


def test_binned_bytes_equal_each_message_rate_times_its_overlap_with_each_bin():
    """The per-bin bytes against the definition, message by message, on random spans:
    overlapping, touching, starting together, some outside the bins."""
    rng = np.random.default_rng(5)
    starts = np.round(rng.uniform(0, 10, 200), 1)   # rounded: many share a start or end
    ends = starts + np.round(rng.uniform(0.1, 3, 200), 1)
    rates = rng.uniform(1, 100, 200)
    load = LinkLoad(("a", "b"), 100.0, starts, ends, rates)
    edges = np.linspace(-1, 12, 27)
    expected = np.zeros(26)
    for s, e, r in zip(starts, ends, rates):
        for i in range(26):
            expected[i] += r * max(0.0, min(e, edges[i + 1]) - max(s, edges[i]))
    np.testing.assert_allclose(binned_bytes(load, edges), expected, rtol=1e-12, atol=1e-9)


def test_link_utilization_refuses_more_bins_than_a_figure_shows(lone_message):
    topo, res = lone_message
    with pytest.raises(sc.InvalidInputError, match="bins=1000000000 is not accepted; use an "
                                                   "integer >= 1 and <= 100000"):
        link_utilization(res, topo, bins=10**9)


def test_vector_figures_keep_their_text_as_text(tmp_path):
    # matplotlib's defaults embed Type 3 fonts in PDF (refused by IEEE's and ACM's
    # checkers) and draw SVG text as paths.
    results = [sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring",
                           nbytes=1 << 20) for p in (2, 4)]
    pdf, svg = tmp_path / "s.pdf", tmp_path / "s.svg"
    scaling(results, save=pdf)
    scaling(results, save=svg)
    data = pdf.read_bytes()
    assert b"/Type3" not in data and b"/FontFile2" in data   # TrueType, embedded
    assert "<text" in svg.read_text() and "ring" in svg.read_text()


def test_an_algorithm_keeps_its_colour_and_lines_differ_by_marker():
    def run(algorithm, p):
        return sc.simulate(sc.topology.switch(p), "all_reduce", algorithm=algorithm,
                           nbytes=1 << 20)

    alone = scaling([run("ring", p) for p in (2, 4)])
    many = scaling([run(a, p) for a in ("naive", "direct", "tree", "ring") for p in (2, 4)])
    ring_alone, = lines(alone, "simulated")
    drawn = {line.get_label(): line for line in lines(many, "simulated")}
    # Ring came last here, first there: it is drawn alike in both.
    assert drawn["ring"].get_color() == ring_alone.get_color()
    assert drawn["ring"].get_marker() == ring_alone.get_marker()
    assert len({line.get_marker() for line in drawn.values()}) == 4
    assert len({line.get_color() for line in drawn.values()}) == 4


def test_times_over_decades_name_their_unit_on_each_tick():
    results = [sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=n)
               for n in (8, 1 << 30)]
    fig = scaling(results, x="nbytes", y="time")
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ax.get_ylabel() == "time" and "1 ms" in labels and "10 µs" in labels
    # One run of 8 B to 1 GiB: plotted in seconds, as the results say.
    assert xy(lines(fig, "simulated")[0])[1] == pytest.approx([r.time for r in results])


def test_a_timeline_leaves_out_devices_that_did_nothing_and_refuses_an_empty_run():
    topo = sc.topology.dgx_h100(2)   # 16 ranks and two NVSwitches, idle in a ring
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 20, trace=True)
    ax = timeline(res, topo).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(16)]
    assert "showing" not in ax.get_title()
    alone = sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="ring", nbytes=8,
                        trace=True)
    with pytest.raises(sc.InvalidInputError, match="the run took no time"):
        timeline(alone)


def test_a_long_machine_name_wraps_the_title_instead_of_running_off_the_figure():
    topo = sc.Topology("two test nodes of one GPU each, joined by one 400 Gb/s rail per GPU, "
                       "in a rack of the second row")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=50 * sc.GB, latency=1 * sc.us)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 16, trace=True)
    title = timeline(res, topo).axes[0].get_title()
    assert "\n" in title and max(len(line) for line in title.split("\n")) <= 88
    assert title.replace("\n", " ").startswith(f"all_reduce/ring on {res.topology}")


def test_link_rows_are_grouped_by_kind_and_each_group_names_its_kind():
    # On 64 GPUs every 4th row was labelled from the first: a NIC's bright row sat beside
    # an NVSwitch label.
    topo = sc.topology.dgx_h100(2)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 20, trace=True)
    ax = link_utilization(res, topo).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    kinds = [topo.links[topo.link_index(*label.split(" ")[0].split("->"))].kind
             for label in labels]
    assert kinds == sorted(kinds, key=kinds.index)   # each kind's rows together
    firsts = [i for i in range(len(kinds)) if i == 0 or kinds[i] != kinds[i - 1]]
    assert len(firsts) == len(set(kinds)) > 1
    assert all(labels[i].endswith(f" ({kinds[i]})") for i in firsts)
    assert not any(label.endswith(")") for i, label in enumerate(labels) if i not in firsts)


def _carried(loads):
    """Each link's bytes as its drawn rates integrate them."""
    return {load.name: float((load.ends - load.starts) @ load.rates) for load in loads}


def test_link_loads_follow_the_route_the_network_took():
    from simcoll.link_load import link_loads

    # A multicast's tree carries each byte once: the links its routes share were drawn
    # carrying them once per destination.
    topo = sc.topology.cluster(2, 2)

    def multicast(comm):
        if comm.rank == 0:
            yield comm.multicast(np.zeros(1000), [2, 3])
        elif comm.rank in (2, 3):
            yield comm.recv(0)

    res = sc.run_program(topo, multicast, trace=True)
    expected = {f"{u}->{v}": b for (u, v), b in res.link_bytes.items() if b}
    assert _carried(link_loads(res, topo)) == pytest.approx(expected, rel=1e-12)
    assert expected["node0->network"] == 8000     # once, for both destinations

    # A link failed before the send: the message went round the ring, and is drawn there.
    ring = sc.topology.ring(4, bandwidth=1e9, latency=1e-6)

    def late_send(comm):
        if comm.rank == 0:
            yield comm.sleep(1e-3)
            yield comm.send(np.zeros(125_000), 1)
        elif comm.rank == 1:
            yield comm.recv(0)

    res = sc.run_program(ring, late_send, trace=True,
                         faults=sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.0)]))
    assert _carried(link_loads(res, ring)) == pytest.approx(
        {"gpu0->gpu3": 1e6, "gpu3->gpu2": 1e6, "gpu2->gpu1": 1e6}, rel=1e-12)
    path = sc.critical_path(res)
    assert set(path.by_link(ring)) <= {"gpu0->gpu3", "gpu3->gpu2", "gpu2->gpu1"}
