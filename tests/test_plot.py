"""Plots draw what the records and traces say, in the units their labels state."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import matplotlib
import numpy as np
import pytest
from conftest import ALPHA, BETA, GAMMA, reference_network, register_probe

import simcoll as sc
from simcoll.cost import CostModel
from simcoll.link_load import LinkLoad, binned_bytes, rate_steps
from simcoll.plot import link_utilization, plot_scaling, scaling, timeline
from simcoll.plot.records import is_failed_record, read_all, read_points, topology_templates
from simcoll.plot.style import log2_ticks, wrapped
from simcoll.trace import to_chrome

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from simcoll.cost.model import gpu_traffic


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


def test_a_barrier_title_gives_no_size_per_rank():
    """A barrier moves no data: "0 B per rank" would be noise (simcoll plot of a barrier
    sweep said it)."""
    results = [sc.simulate(reference(p), "barrier", algorithm="dissemination")
               for p in (2, 4, 8)]
    title = scaling(results, y="time").axes[0].get_title()
    assert title == "barrier/dissemination on switch(p)"
    sized = [sc.simulate(reference(p), "all_reduce", algorithm="ring", nbytes=0)
             for p in (2, 4, 8)]  # a zero size still says so
    title = scaling(sized, y="time").axes[0].get_title()
    assert title == "all_reduce/ring on switch(p), 0 B per rank"


def test_labels_name_what_differs_between_lines_and_the_title_what_does_not():
    results = [sc.simulate(reference(8), c, algorithm="ring", nbytes=n)
               for c in ("all_reduce", "all_gather") for n in (1 << 10, 1 << 20)]
    fig = scaling(results, x="nbytes", y="algbw")
    assert fig.axes[0].get_title() == "ring on switch(8)"      # not ", 8 ranks" again
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
    assert fig.axes[0].get_title() == "all_reduce/ring on switch(8)"
    on_a_dgx = [dataclasses.replace(r, topology="dgx_a100x1") for r in results]
    assert scaling(on_a_dgx, x="nbytes").axes[0].get_title() == \
        "all_reduce/ring on dgx_a100x1, 8 ranks"
    (line,) = lines(fig, "simulated")
    assert xy(line)[0] == sizes


def test_many_sizes_get_thinned_power_of_two_ticks():
    sizes = [1 << k for k in range(3, 31)]
    results = [{"collective": "all_reduce", "algorithm": "ring", "topology": "switch(8)",
                "nranks": 8, "nbytes": n, "time": 1e-6 + n * 1e-11} for n in sizes]
    texts = tick_texts(scaling(results, x="nbytes", y="time"), "x")
    # 2^3 to 2^30, 27 octaves: every 4th from the first (the least step that gives at
    # most 8 labels; none of 4-7 divides 27), and the last, 3 octaves past 2^27 (every
    # 10th gave 1 KiB, 1 MiB, 1 GiB alone: three labels, and 8 B unlabelled). The
    # comparison's axis follows the same rule.
    assert texts == ["8 B", "128 B", "2 KiB", "32 KiB", "512 KiB", "8 MiB", "128 MiB",
                     "1 GiB"]


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
    assert "α-β model (dashed)" in labels   # gamma = 0: no γ term to name


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
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "α-β-γ model (dashed)" in labels


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


def test_a_result_built_without_a_hash_is_of_no_known_machine():
    """A Result built by hand (no topology_hash) tells nothing of its machine: it joins
    a line of hashed points rather than being refused as a machine 'topology_hash=None'
    against them."""
    hashed = [sc.simulate(reference(4), "all_reduce", algorithm="ring", nbytes=n)
              for n in (1024, 4096)]
    unknown = dataclasses.replace(hashed[0], topology_hash=None)
    (line,) = lines(scaling([hashed[1], unknown], x="nbytes"), "simulated")
    sizes, times = xy(line)
    assert list(sizes) == [1024, 4096]
    assert times[1] / times[0] == pytest.approx(hashed[1].time / hashed[0].time, rel=1e-12)


def test_the_machine_is_told_by_its_hash_before_its_spec():
    """A sweep writes its --topology template as the spec ("switch:8") and simcoll run
    the normalized one ("switch:n=8"): one machine, refused as two. A topology file
    edited between two sweeps keeps its spec ("mach.json") but not its hash: two
    machines, drawn as one line. The hash, where records have it, decides."""
    def record(nbytes: int, time: float, spec: str, digest: str | None) -> dict:
        return {"collective": "all_reduce", "algorithm": "ring", "topology": "switch(8)",
                "nranks": 8, "nbytes": nbytes, "time": time, "spec": spec,
                **({} if digest is None else {"topology_hash": digest})}

    fig = scaling([record(1024, 1.0, "switch:8", "f7"), record(4096, 2.0, "switch:n=8", "f7")],
                  x="nbytes")
    assert [list(xy(line)[1]) for line in lines(fig, "simulated")] == [[1.0, 2.0]]
    with pytest.raises(sc.InvalidInputError, match=r"\('topology_hash=f7' and "
                                                   r"'topology_hash=36'\)"):
        scaling([record(1024, 1.0, "mach.json", "f7"), record(4096, 2.0, "mach.json", "36")],
                x="nbytes")
    with pytest.raises(sc.InvalidInputError, match=r"\('spec=switch:8' and 'spec=cluster'\)"):
        scaling([record(1024, 1.0, "switch:8", None), record(4096, 2.0, "cluster", None)],
                x="nbytes")


def test_points_of_other_roots_and_ops_are_lines_of_their_own():
    """A reduce swept from root 0 and from root 5 (and an all_reduce summing and taking
    the maximum) made one line of the later points, the others dropped as reruns; each
    is now a line, labelled with its root or op (the default's too, as another line
    names one: the root 0 line was labelled as if it had none)."""
    topo = sc.topology.cluster(2, 4)
    runs = [sc.simulate(topo, "reduce", algorithm="binomial", nbytes=1 << 20, root=root)
            for root in (0, 5)]
    assert runs[0].time != runs[1].time
    for given in (runs, [r.to_dict() for r in runs]):
        fig = scaling(given, x="nbytes")
        drawn = {line.get_label(): list(xy(line)[1]) for line in lines(fig, "simulated")}
        assert drawn == {"binomial (root=0)": pytest.approx([runs[0].time * 1e6]),
                         "binomial (root=5)": pytest.approx([runs[1].time * 1e6])}
    ops = [sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 20, op=op)
           for op in ("sum", "max")]
    fig = scaling(ops, x="nbytes")
    assert sorted(line.get_label() for line in lines(fig, "simulated")) == [
        "ring (op=max)", "ring (op=sum)"]
    fig = scaling(ops[1:], x="nbytes")
    assert "all_reduce/ring (op=max) on cluster(2x4)" in fig.axes[0].get_title()


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
    # the Results, and their to_dict()s (which had no topology hash: the 10 GB/s
    # machine's points replaced the others, as a rerun's)
    for given in (list(fast) + list(slow), [r.to_dict() for r in list(fast) + list(slow)]):
        with pytest.raises(sc.InvalidInputError, match="different machines of that name"):
            scaling(given)
    # A rerun of the same machine is still one line, of the later run.
    again = sc.simulate(sc.topology.switch(2, bandwidth=100e9), "all_reduce",
                        algorithm="ring", nbytes=1024)
    fig = scaling(list(fast) + [again])
    (line,) = lines(fig, "simulated")
    assert list(xy(line)[1]) == pytest.approx([again.time * 1e6, fast[1].time * 1e6])


def test_results_of_one_machine_that_took_different_times_are_refused_not_merged():
    """Runs of one machine that say nothing else apart are not a rerun of each other."""
    topo = sc.topology.switch(4, bandwidth=10e9, latency=1e-6)
    run = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1024)
    runs = [run, dataclasses.replace(run, time=2 * run.time)]
    with pytest.raises(sc.InvalidInputError, match=r"points at nranks=4 on 'switch\(4\)' "
                                                   r"took different times .* on one machine"):
        scaling(runs)


@pytest.mark.parametrize("as_dicts", [False, True])
def test_runs_with_other_faults_are_lines_of_their_own_named_by_them(as_dicts):
    """A record's faults were not read: Result objects of other faults were refused as
    taking different times, and their to_dict()s silently replaced each other's points
    (the healthy line showed the faulted times, under the plain algorithm's name)."""
    ranks = (2, 4, 8)
    faults = {"healthy": None, "late": sc.Faults(late={0: 50e-6}),
              "slow": sc.Faults(slow={1: 2.0}, jitter=1e-7, seed=3),
              "link": sc.Faults(links=[sc.LinkFault("gpu1", "switch", at=1e-6, factor=0.5)])}
    runs = {name: [sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring",
                               nbytes=sc.MiB, faults=fault) for p in ranks]
            for name, fault in faults.items()}
    records = [r.to_dict() if as_dicts else r for line in runs.values() for r in line]
    fig = scaling(records, x="nranks", y="time", legend="right")
    drawn = {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].get_lines()}
    # the labels, by hand from what each run was given
    names = {"healthy": "ring", "late": "ring (faults: late rank 0 +5e-05 s)",
             "slow": "ring (faults: slow rank 1 x2.0, jitter 1e-07 (seed 3))",
             "link": "ring (faults: link gpu1<->switch x0.5 at 1e-06 s)"}
    assert set(drawn) == set(names.values())
    for name, label in names.items():
        assert drawn[label] == pytest.approx([r.time * 1e6 for r in runs[name]], rel=1e-12)
    # four lines of other times: the faults changed every run
    assert len({tuple(times) for times in drawn.values()}) == 4


def test_topology_names_become_templates_where_their_numbers_change():
    def point(topology: str, nranks: int) -> dict:
        return {"collective": "all_reduce", "algorithm": "ring", "topology": topology,
                "nranks": nranks, "nbytes": 8, "time": 1.0}

    points = read_points([point("switch(2)", 2), point("switch(16)", 16),
                          point("dgx_a100x1", 8), point("dgx_a100x2", 16),
                          point("ring(4)", 4)])
    # A number that is not the rank count is listed, not hidden behind a cryptic "n".
    assert topology_templates(points) == ["switch(p)", "switch(p)", "dgx_a100x{1,2}",
                                          "dgx_a100x{1,2}", "ring(4)"]


def test_bad_arguments_are_refused_before_drawing(grid, tmp_path):
    before = plt.get_fignums()
    for kwargs, match in [({"y": "speed"}, "y='speed'"), ({"x": "time"}, "x='time'"),
                          ({"x": "nbytes", "split": "nbytes"}, "split='nbytes'"),
                          ({"by": "colour"}, "by='colour'"),
                          ({"save": tmp_path / "a.xyz"}, r"a\.xyz.*\.png"),
                          ({"save": tmp_path / "no" / "a.png"}, "does not exist")]:
        with pytest.raises(sc.InvalidInputError, match=match):
            scaling(grid, **kwargs)
    with pytest.raises(sc.InvalidInputError, match="^no records given: nothing to plot$"):
        scaling([])
    with pytest.raises(sc.InvalidInputError, match="'nbytes'"):
        scaling([{"collective": "all_reduce", "algorithm": "ring", "nranks": 2}])
    with pytest.raises(sc.InvalidInputError, match="record 0 is a str"):
        scaling(["ring"])
    # a raw TypeError; a path read letter by letter ("record 0 is a str")
    with pytest.raises(sc.InvalidInputError, match=r"records=None is not accepted: give "
                                                   r"Result objects or dicts"):
        scaling(None)
    with pytest.raises(sc.InvalidInputError, match=r"records='points\.jsonl' is not "
                                                   r"accepted: .*simcoll\.load_results\(path\)"):
        scaling("points.jsonl")
    # constants of a model that is not drawn were dropped without a word
    with pytest.raises(sc.InvalidInputError, match=r"alpha=2e-06, beta=1e-11, gamma=None are "
                                                   r"the model's constants, which only "
                                                   r"formula=True draws"):
        scaling(grid, alpha=2e-6, beta=1e-11)
    # a damaged record's time was taken as none (drawn as a one-rank point, left out)
    good = grid[0].to_dict()
    for value in ("1ms", -1.0, True):
        with pytest.raises(sc.InvalidInputError, match=rf"record 1 has time={value!r}; "
                                                       rf"expected a number >= 0"):
            scaling([good, dict(good, time=value)])
    with pytest.raises(sc.InvalidInputError, match=r"record 0 has busbw='x'"):
        scaling([dict(good, busbw="x")])
    # NaN is pandas' null (a one-rank run's algbw through DataFrame.to_dict): none, drawn
    # as before, with the point left out and said so
    fig = scaling([good, dict(good, nbytes=2 * good["nbytes"], algbw=float("nan"))],
                  x="nbytes", y="algbw")
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    plt.close(fig)
    assert any("not drawn" in t for t in texts)
    assert plt.get_fignums() == before


def test_a_formula_legend_entry_only_where_a_model_is_drawn(grid):
    """Algorithms without a cost model under formula=True: every line said "(no model)"
    yet the key listed a dashed model and the lines were drawn faded and wide as under
    one. Now plain lines and no key entry; with a model, both."""
    renamed = [dict(r.to_dict(), algorithm="mine_" + r.algorithm) for r in grid]
    ax = scaling(renamed, x="nbytes", formula=True, alpha=1e-6, beta=1e-11, gamma=0).axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("model (dashed)" in t for t in texts)
    assert all(line.get_linewidth() == 1.6 for line in ax.lines if line.get_gid() == "simulated")
    ax = scaling(grid, x="nbytes", formula=True, alpha=1e-6, beta=1e-11, gamma=0).axes[0]
    assert "α-β model (dashed)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(line.get_gid() == "formula" for line in ax.lines)


def test_a_name_longer_than_a_title_line_is_cut_between_its_parts():
    """textwrap cut a 78-character algorithm name at 55 characters, mid-word ("pipelined_c
    / hunks"). It is cut after the last "_" that fits (position 55 is inside "chunks"),
    and the rest shares a line with the words after it; a name without "_" or "/" is cut
    at the width, and words fill lines as before."""
    name = "hierarchical_two_level_ring_with_pipelined_chunks_v2_experimental"
    assert wrapped(f"all_reduce/{name} on switch(4)", 55).split("\n") == [
        "all_reduce/hierarchical_two_level_ring_with_pipelined_",
        "chunks_v2_experimental on switch(4)"]
    assert wrapped("a" * 70, 55).split("\n") == ["a" * 55, "a" * 15]
    assert wrapped("the quick brown fox jumps over the lazy dog again", 30).split("\n") == [
        "the quick brown fox jumps over", "the lazy dog again"]


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
    assert set(drawn) == {f"rank {r}/{s}" for r in range(p)
                          for s in ("send", "recv", "reduce", "send bytes", "recv bytes")}
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
        # Over each message's light bar, its bytes' part (from ``moving``) is solid.
        for stream, side in (("send", "rank"), ("recv", "peer")):
            moving = sorted((e.moving * 1e6, e.end * 1e6) for e in res.trace
                            if e.kind == "message" and getattr(e, side) == r)
            got = drawn[f"rank {r}/{stream} bytes"]
            assert np.array(got) == pytest.approx(np.array(moving), rel=1e-9, abs=1e-9)
            assert all(m > s for (m, _), (s, _) in zip(moving, sends))   # a latency each
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (µs)"
    assert ax.get_xlim() == pytest.approx((0, res.time * 1e6))
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(p)]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["send", "receive", "reduction", "message latency,\nqueueing (lighter)",
                      "idle (gap)"]
    ax = fig.axes[0]
    colours = {c.get_gid(): c.get_facecolor()[0] for c in ax.collections}
    light, solid = colours["rank 0/send"], colours["rank 0/send bytes"]
    assert light[:3].mean() > solid[:3].mean() + 0.2     # the latency part is lighter
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


def test_concurrent_sends_are_drawn_apart_and_the_critical_path_rides_its_own():
    """Rank 0 sends 1, 2 and 3 MB at once (to ranks 1, 2, 3) on a 1 GB/s switch: three
    lanes. They abutted, so three bars read as one thick bar, and the critical path ran
    across the middle of the row, over whichever lane sat there. Now lanes are a gap
    apart, and the path runs inside the lane of the message it follows: the 3 MB one,
    which ends last (at 6 ms, worked out below), and which the path takes from start to
    end."""
    def program(comm):
        if comm.rank == 0:
            sends = [comm.send(sc.VirtualBuffer.of(n * 1_000_000, np.uint8), n)
                     for n in (1, 2, 3)]
            for sent in sends:
                yield sent
        else:
            yield comm.recv(0)

    res = sc.run_program(sc.topology.switch(4, bandwidth=1e9, latency=0), program,
                         trace=True)
    # 0 - 3 ms: three flows at 1/3 GB/s (1 MB done); 3 - 5: two at 1/2 (2 MB done);
    # 5 - 6: one at 1 (3 MB done)
    assert res.time == pytest.approx(6e-3, rel=1e-12)
    fig = timeline(res, critical=True)
    rows = sorted(bar_rows(fig, "rank 0/send"))
    assert len(rows) == 3
    assert all(low[1] < high[0] - 1e-3 for low, high in zip(rows, rows[1:]))  # a gap
    drawn = [(float(p.vertices[:, 0].max()), (float(p.vertices[:, 1].min()),
                                               float(p.vertices[:, 1].max())))
             for c in fig.axes[0].collections if c.get_gid() == "rank 0/send"
             for p in c.get_paths()]
    end, last = max(drawn)
    assert fig.axes[0].get_xlabel() == "time (ms)" and end == pytest.approx(6.0)
    (path,) = [line for line in fig.axes[0].lines if line.get_gid() == "critical path"]
    xs, ys = path.get_data()
    on_rank0 = [y for x, y in zip(xs, ys) if np.isfinite(y) and y < 0.5]
    assert on_rank0 and all(last[0] < y < last[1] for y in on_rank0)


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
    # A short label (it took a third of the figure's width), explained in the title.
    ax = timeline(res).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[3] == "endpoint 3"
    assert ax.get_title().endswith("\nendpoints from 3 on: hosts or in-network devices "
                                   "(topology= names them)")
    assert "endpoints from" not in timeline(res, ranks=[0, 1]).axes[0].get_title()
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
    # a numpy integer is a number like any other (it was refused)
    assert timeline(res, topo, max_ranks=np.int64(3)).axes[0].get_title() == ax.get_title()


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
    assert fig.axes[1].get_ylabel() == "fraction of bandwidth (sqrt scale)"
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


def test_a_topology_spec_or_none_is_refused_naming_from_spec(lone_message):
    """The command line takes ``switch:2``; from Python the plots, the export and the
    critical path took it too and failed with a raw AttributeError."""
    _, res = lone_message
    path = sc.critical_path(res)
    for draw in (lambda t: link_utilization(res, t), lambda t: timeline(res, t),
                 lambda t: to_chrome(res, t), path.by_link, path.summary):
        with pytest.raises(sc.InvalidInputError, match=r"topology='switch:2' is a spec, not "
                                                      r"a Topology; build it with "
                                                      r"sc.topology.from_spec\('switch:2'\)"):
            draw("switch:2")
    with pytest.raises(sc.InvalidInputError, match="must be a simcoll Topology, got NoneType"):
        link_utilization(res, None)


def test_link_utilization_draws_a_program_run():
    """A rank program's result has no collective: the heatmap is titled as the timeline
    is (it raised AttributeError after drawing); one message of 8 MB at 1 GB/s alone on
    its links fills each of them at 1.0."""
    def program(comm):
        if comm.rank == 0:
            yield comm.send(sc.VirtualBuffer.of(8_000_000, np.uint8), 1)
        else:
            yield comm.recv(0)

    topo = sc.topology.switch(2, bandwidth=1e9, latency=0)
    res = sc.run_program(topo, program, trace=True)
    fig = link_utilization(res, topo, bins=4)
    ax = fig.axes[0]
    assert ax.get_title() == "link utilization: a program on switch(2)"
    (mesh,) = ax.collections
    assert np.asarray(mesh.get_array()).ravel().tolist() == [1.0] * 8


def test_a_timeline_bar_narrower_than_a_200th_of_the_run_has_no_outline():
    """Back-to-back bars a pixel wide (NVLS's reductions on the switch) were drawn as
    their white outline only, an idle-looking row; a 0.1 us compute span in a 100.1 us
    run (a 200th: 0.5 us) now has no white outline but an edge in its own colour (without
    one, the pixel grid dropped such bars or kept them by where they fell: a ring's
    steps showed their bytes moving at 46 of 126), a 100 us one keeps its outline. The
    critical path has no white halo, which split the bars it runs along into what
    looked like two lanes."""
    from simcoll.plot.style import NARROW_EDGE

    def program(comm):
        yield comm.compute(0.1e-6)
        yield comm.compute(100e-6)

    res = sc.run_program(sc.topology.switch(1), program, trace=True)
    fig = timeline(res, critical=True)
    ax = fig.axes[0]
    (bars,) = [c for c in ax.collections if c.get_gid() == "rank 0/compute"]
    assert list(bars.get_linewidths()) == [NARROW_EDGE, 0.4]
    edges, faces = bars.get_edgecolors(), bars.get_facecolors()
    assert tuple(edges[0]) == tuple(faces[0]) and tuple(edges[1]) == (1.0, 1.0, 1.0, 1.0)
    (path,) = [line for line in ax.lines if line.get_gid() == "critical path"]
    assert path.get_path_effects() == []


def test_an_analytical_heatmap_says_its_network_never_shares_a_link():
    """naive all_reduce on switch(4), analytical: each GPU's uplink carries its 3
    messages at full bandwidth at once, 3 times the link's bandwidth, which no average
    rate causes: the model never shares a link."""
    topo = sc.topology.switch(4, bandwidth=1e9, latency=0)
    res = sc.simulate(topo, "all_reduce", algorithm="naive", nbytes=4_000_000,
                      network="analytical", trace=True)
    title = link_utilization(res, topo, bins=4).axes[0].get_title()
    assert "(up to 3.00," in title and "the analytical network never shares a link" in title


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


def test_critical_bands_past_max_ranks_are_the_most_visited_ties_to_the_lowest_rank():
    """A 64-rank ring's critical path spends equal time on most ranks, summed in different
    orders: float rounding chose ranks 52-63 and a scattered 0, 16, 32, 34 among ties.
    Bands go to the endpoints with the most path time (equal within 1e-9 of the longest),
    the lowest addresses among equals: every rank shown has at least any rank hidden, and
    a rank hidden ties with one shown only from above it."""
    res = sc.simulate(sc.topology.switch(64), "all_reduce", algorithm="ring", nbytes=sc.MiB,
                      trace=True)
    on_path: dict[int, float] = {}
    for segment in sc.critical_path(res).segments:
        on_path[segment.endpoint] = on_path.get(segment.endpoint, 0.0) + (
            segment.end - segment.start)
    labels = [t.get_text() for t in timeline(res, critical=True).axes[0].get_yticklabels()]
    shown = [int(text.split()[-1]) for text in labels]
    hidden = [a for a in on_path if a not in shown]
    assert len(shown) == 16 and set(shown) <= set(on_path)
    tol = 1e-9 * max(on_path.values())
    for a in shown:
        for b in hidden:
            assert on_path[a] >= on_path[b] - tol
            if abs(on_path[a] - on_path[b]) <= tol:
                assert a < b, (a, b)


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


@pytest.mark.parametrize("edges", [np.array([1.0, 0.0]), [0.0, 0.0], [0.0, np.nan],
                                   [-np.inf, 1.0], "abc", [[0.0, 1.0]], [0, "x"],
                                   [False, True], [[0.0, 1.0], [2.0]], ["0", "1"]])
def test_binned_bytes_refuses_edges_that_make_no_bins(edges):
    """Descending edges gave negative bytes, NaN ones NaN, a string numpy's ValueError."""
    load = LinkLoad(("a", "b"), 100.0, np.array([0.0]), np.array([1.0]), np.array([5.0]))
    with pytest.raises(sc.InvalidInputError, match="binned_bytes: edges must be finite times "
                                                   "in increasing order, in one row; got "):
        binned_bytes(load, edges)


def test_a_load_of_no_messages_has_no_steps_and_carries_nothing():
    """A LinkLoad built or filtered to no messages raised ZeroDivisionError in rate_steps
    and numpy's ValueError in binned_bytes."""
    empty = LinkLoad(("a", "b"), 100.0, np.zeros(0), np.zeros(0), np.zeros(0))
    times, rates = rate_steps(empty)
    assert times.size == rates.size == 0
    assert binned_bytes(empty, np.array([0.0, 1.0, 2.5])).tolist() == [0.0, 0.0]


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


def test_times_past_hours_keep_seconds_on_their_decade_ticks():
    """A ring and a parameter server on 1 MB/s links, 1 KiB to 16 GiB: ticks of ten
    thousand and a hundred thousand seconds read '2.78 h' and '27.8 h', the unit changing
    up the axis; they stay in seconds."""
    topo = sc.topology.switch(8, bandwidth=1e6, latency=1e-3)
    results = [sc.simulate(topo, "all_reduce", algorithm=a, nbytes=n)
               for a in ("ring", "parameter_server") for n in (1 << 10, 1 << 34)]
    assert max(r.time for r in results) > 1e5   # 16 GiB over 1 MB/s links: days
    fig = scaling(results, x="nbytes", y="time")
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert "10000 s" in labels and "100000 s" in labels and "1000 s" in labels
    assert not any(label.endswith(" h") for label in labels)


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


def test_a_timeline_of_hundreds_of_bands_names_every_kth_and_rules_none():
    # 512 labels printed on top of each other, and 511 grey rules hid the bars.
    res = sc.simulate(sc.topology.switch(128), "all_reduce", algorithm="ring",
                      nbytes=128 * 64, trace=True)
    ax = timeline(res, max_ranks=128).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"rank {r}" for r in range(0, 128, 4)] + ["rank 127"]
    assert not [line for line in ax.get_lines() if line.get_gid() != "critical path"]
    assert len(timeline(res, max_ranks=16).axes[0].get_lines()) == 15   # ruled apart
    # The legend has no title: "rows in each band" also covered "critical path".
    assert timeline(res, critical=True).axes[0].get_legend().get_title().get_text() == ""


def test_critical_without_ranks_shows_the_bands_the_path_visits():
    topo = sc.topology.switch(64)
    res = sc.simulate(topo, "all_reduce", algorithm="recursive_doubling", nbytes=sc.MiB,
                      trace=True)
    segments = sc.critical_path(res).segments
    visited = sorted({s.endpoint for s in segments})
    assert 2 < len(visited) <= 16 and visited != list(range(len(visited)))
    ax = timeline(res, topo, critical=True).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in visited]
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "critical path"]
    assert not np.isnan(np.asarray(line.get_data()[1], dtype=float)).any()
    assert ax.get_title().endswith(
        f"\nshowing the {len(visited)} of 64 endpoints that the critical path visits")
    # Fewer bands than the path visits: the ones it spends most time on, and the title
    # says how much of it is not shown.
    ax = timeline(res, topo, critical=True, max_ranks=2).axes[0]
    on = {}
    for s in segments:
        on[s.endpoint] = on.get(s.endpoint, 0.0) + s.end - s.start
    most = [int(t.get_text().split()[-1]) for t in ax.get_yticklabels()]
    tol = 1e-9 * max(on.values())   # equal path times tie, the lower address first
    assert len(most) == 2 and all(on[a] >= on[b] - tol and (on[a] > on[b] + tol or a < b)
                                  for a in most for b in on if b not in most)
    hidden = sum(t for a, t in on.items() if a not in most) / res.time
    assert f"critical path: {hidden:.0%} of its time on endpoints not shown" in \
        ax.get_title()
    ax = timeline(res, topo, critical=True, ranks=[0, 1]).axes[0]
    assert "of its time on endpoints not shown" in ax.get_title()
    assert "not shown" not in timeline(res, topo).axes[0].get_title()


def test_an_in_network_device_that_did_nothing_gets_no_band():
    topo = sc.topology.dgx_h100(1)      # NCCL's ring at 1 MiB leaves the NVSwitch idle
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=sc.MiB, trace=True)
    assert res.nranks + len(res.host_bytes_sent) == 9
    ax = timeline(res, topo).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(8)]


def test_a_timeline_and_a_heatmap_on_the_caller_s_axes_leave_its_layout_alone():
    topo = sc.topology.switch(8)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=sc.MiB, trace=True)
    fig, (upper, lower) = plt.subplots(2, 1, figsize=(8, 6), layout="constrained")
    timeline(res, topo, ax=upper)
    link_utilization(res, topo, ax=lower)
    fig.canvas.draw()
    box, frame = upper.get_legend().get_window_extent(), upper.get_window_extent()
    assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1     # inside the axes
    # the heatmap's colour bar sits next to its axes, not pushed off by a legend
    bar = [a for a in fig.axes if a not in (upper, lower)][0].get_window_extent()
    assert bar.x0 - lower.get_window_extent().x1 < 0.08 * fig.bbox.width
    plt.close(fig)


def test_long_device_names_are_shortened_and_the_heatmap_keeps_its_layout(tmp_path):
    # The labels ran off the figure and constrained_layout collapsed the axes, warning.
    topo = sc.Topology("a machine")
    hub = topo.add_switch("leaf_switch_with_an_extremely_long_descriptive_name_0")
    for i in range(4):
        gpu = topo.add_gpu(f"gpu_node{i}_socket0_pcie_slot3_h100_sxm5_{i}")
        topo.add_link(gpu, hub, bandwidth=100 * sc.GB, latency=sc.us)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=sc.MiB, trace=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = link_utilization(res, topo, save=tmp_path / "links.png")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "gpu_no…_sxm5_0->leaf_s…_name_0"
    assert all(len(label) <= 30 for label in labels) and len(set(labels)) == 8
    fig.canvas.draw()
    assert ax.get_window_extent().width > 0.4 * fig.bbox.width


def test_loads_above_one_get_an_arrow_on_the_colour_bar_and_a_note():
    topo = sc.topology.dgx_h100(1)
    # NVLS at 4 MiB: slices that ran alone, then shared, drawn at their averages
    res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=4 * sc.MiB, trace=True)
    fig = link_utilization(res, topo)
    peak = float(np.asarray(mesh_of(fig).get_array()).max())
    assert peak == 1.0                       # the colours are clipped ...
    colourbar = fig.axes[1]
    assert mesh_of(fig).colorbar.extend == "max" and colourbar is not fig.axes[0]
    title = fig.axes[0].get_title().replace("\n", " ")
    assert "loads above 1 (up to 1.27," in title and "drawn as 1: average rates" in title
    ring = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=sc.MiB, trace=True)
    fig = link_utilization(ring, topo)       # a ring alone on its links: exactly 1 at most
    assert mesh_of(fig).colorbar.extend == "neither"
    assert "loads above 1" not in fig.axes[0].get_title()


def test_a_heatmap_of_many_links_names_both_directions():
    # Of 1024 links every 26th was named: all of them gpuN->switch.
    res = sc.simulate(sc.topology.switch(64), "all_reduce", algorithm="ring",
                      nbytes=64 * 64, trace=True)
    ax = link_utilization(res, sc.topology.switch(64)).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) <= 40
    assert labels[:3] == ["gpu0->switch", "switch->gpu2", "gpu5->switch"]
    assert ax.get_ylabel() == "128 directed links, every 5th named"


# -- scaling: paper-ready figures (review of the scaling plots) -----------------------------
def rec(algorithm: str, p: int, n: int, t: float, **fields) -> dict:
    """A sweep-file record on switch(p) that took ``t`` seconds (busbw as all_reduce)."""
    busbw = n / t * 2 * (p - 1) / p
    return {"collective": "all_reduce", "algorithm": algorithm, "topology": f"switch({p})",
            "network": "flow", "dtype": "float32", "nranks": p, "nbytes": n, "time": t,
            "algbw": n / t, "busbw": busbw, **fields}


def labelled_ticks(fig, axis: str = "y") -> list[tuple[float, str]]:
    """(value, text) of each labelled major tick inside the axis' limits."""
    fig.canvas.draw()
    ax = fig.axes[0]
    which = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    return [(t.get_loc(), t.label1.get_text()) for t in which.get_major_ticks()
            if t.label1.get_text() and lo * (1 - 1e-9) <= t.get_loc() <= hi * (1 + 1e-9)]


def test_durations_and_sizes_are_rounded_before_their_unit_is_chosen():
    from simcoll.plot.style import format_duration, format_size, time_unit

    assert format_duration(0.9996e-3) == "1 ms"
    assert format_duration(0.9996) == "1 s"
    assert format_duration(999.7e-9) == "1 µs"
    assert time_unit(0.9996e-3) == ("ms", 1e3)
    assert format_duration(1500.0) == "1500 s" and format_duration(999.9) == "1000 s"
    assert format_duration(46.4e-6) == "46.4 µs" and format_duration(0.0) == "0 ns"
    # 9999 s rounds to 10000 s, where hours begin (it read "10000 s"): 9999 / 3600 h
    assert format_duration(9999.0) == "2.78 h" and format_duration(9994.0) == "9990 s"
    assert format_size(1023.99) == "1 KiB" and format_size(1536) == "1.5 KiB"
    assert "e+" not in format_size(5000 * 2.0 ** 50) and "e+" not in format_duration(3e5)
    # 1 ns to 100 s: every y label a plain number with its unit.
    records = [rec("ring", 8, 2 ** k, 1e-9 * 10 ** (k / 4)) for k in range(0, 45, 4)]
    texts = [text for _, text in labelled_ticks(scaling(records, x="nbytes"))]
    assert "1 ns" in texts and "100 s" in texts and not any("e+" in t for t in texts)


def test_a_long_topology_name_wraps_the_scaling_title_inside_the_figure():
    long = ("eos_superpod_h100_sxm5_infiniband_ndr400_rail_optimized_fat_tree_with_sharp_v3_"
            "and_adaptive_routing_enabled")
    records = [dict(rec(a, p, 1 << 20, p * 1e-5), topology=f"{long}({p})")
               for a in ("ring", "tree") for p in (2, 4, 8)]
    fig = scaling(records, y="busbw")
    title = fig.axes[0].title
    assert "\n" in title.get_text()
    assert max(len(line) for line in title.get_text().split("\n")) <= 60
    fig.canvas.draw()
    box = title.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width


def test_every_fixed_algorithm_has_a_marker_of_its_own():
    from simcoll.plot.curves import _ALGORITHM_SLOTS

    fig = scaling([rec(a, p, 1 << 20, (k + 1) * p * 1e-5)
                   for k, a in enumerate(_ALGORITHM_SLOTS) for p in (2, 4)])
    markers = {line.get_label(): line.get_marker() for line in lines(fig, "simulated")}
    assert len(markers) == 10 and len(set(markers.values())) == 10
    assert markers["nccl"] != markers["ring"] and markers["bruck"] != markers["tree"]


def test_lines_of_one_algorithm_at_several_sizes_get_colours_in_size_order():
    from matplotlib.colors import to_rgb

    sizes = [1 << k for k in range(4, 31, 2)]
    one = scaling([rec("ring", p, n, 1e-6 + n * p * 1e-11) for n in sizes for p in (2, 4)])
    drawn = lines(one, "simulated")
    assert len(drawn) == 14 and len({to_rgb(line.get_color()) for line in drawn}) == 14
    # With several algorithms each keeps its marker, its sizes running light to dark.
    two = scaling([rec(a, p, n, (k + 1) * (1e-6 + n * p * 1e-11))
                   for k, a in enumerate(("ring", "tree")) for n in (1 << 10, 1 << 20, 1 << 30)
                   for p in (2, 4)])
    ring = [line for line in lines(two, "simulated") if line.get_label().startswith("ring")]
    assert [line.get_label() for line in ring] == [
        "ring (1 KiB per rank)", "ring (1 MiB per rank)", "ring (1 GiB per rank)"]
    assert len({line.get_marker() for line in ring}) == 1
    brightness = [sum(to_rgb(line.get_color())) for line in ring]
    assert brightness[0] > brightness[1] > brightness[2]


def test_a_narrow_range_is_not_stretched_over_the_whole_height():
    two = [rec("ring", 4, 64 << 20, 1.02e-3), rec("ring", 8, 64 << 20, 1.2e-3)]
    for y in ("busbw", "time"):
        fig = scaling(two, y=y)
        bottom, top = fig.axes[0].get_ylim()
        assert top / bottom >= 2.0
    # A single point sits in the middle, not at the edge of some decade.
    fig = scaling([rec("ring", 8, 64 << 20, 1.2e-3)], y="busbw")
    ax = fig.axes[0]
    (line,) = lines(fig, "simulated")
    (x0,), (y0,) = xy(line)
    for value, (lo, hi) in ((y0, ax.get_ylim()), (x0, ax.get_xlim())):
        share = math.log(value / lo) / math.log(hi / lo)
        assert 0.3 <= share <= 0.7


def test_a_log_axis_under_a_decade_labels_both_ends_of_the_data():
    records = [rec(a, p, 64 << 20, t) for a, ts in (("ring", (0.67e-3, 1.0e-3, 1.3e-3)),
                                                     ("nccl", (0.68e-3, 1.01e-3, 1.28e-3)))
               for p, t in zip((2, 4, 8), ts)]
    fig = scaling(records, y="time")
    ticks = labelled_ticks(fig)
    assert fig.axes[0].get_ylabel() == "time (ms)"
    assert min(v for v, _ in ticks) <= 0.67 and max(v for v, _ in ticks) >= 1.3
    assert len(ticks) >= 3


def test_size_axes_label_both_ends_of_the_data():
    # 8 B to 512 MiB: every 10th power labelled only 1 KiB and 1 MiB.
    records = [rec("ring", 8, 1 << k, 1e-6 * k) for k in range(3, 30)]
    texts = [text for _, text in labelled_ticks(scaling(records, x="nbytes"), "x")]
    assert texts[0] == "8 B" and texts[-1] == "512 MiB" and 5 <= len(texts) <= 9


def test_a_long_legend_widens_the_figure_instead_of_squeezing_the_data():
    records = [rec(f"custom_algorithm_{a}", p, 1 << (10 + 5 * s), 1e-5 * (a + 1) * (s + 1) * p)
               for a in range(20) for s in range(3) for p in (2, 4, 8, 16)]
    fig = scaling(records)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_window_extent().width / fig.dpi >= 4.0
    legend = ax.get_legend().get_window_extent()
    assert len(ax.get_legend().get_texts()) == 60
    assert legend.x1 <= fig.bbox.width and legend.y0 >= 0


def test_the_title_names_what_every_line_shares():
    by_topology = [dict(rec("ring", p, 1 << 20, p * 1e-5), topology=f"{name}({p})")
                   for name in ("switch", "ring") for p in (2, 4)]
    title = scaling(by_topology, y="busbw", by="topology").axes[0].get_title()
    assert title == "all_reduce/ring, 1 MiB per rank"
    chunked = [rec(a, p, 1 << 20, (k + 1) * p * 1e-5, requested={"chunks": 4},
                   dtype="float16", network="packet")
               for k, a in enumerate(("ring", "double_binary_tree")) for p in (2, 4)]
    title = scaling(chunked).axes[0].get_title().replace("\n", " ")
    assert title == ("all_reduce (chunks=4) on switch(p), 1 MiB per rank, packet network, "
                     "float16")


def test_failed_and_undrawable_points_are_named_in_the_legend():
    records = [rec("ring", p, 1 << 20, p * 1e-5) for p in (2, 4)]
    records += [dict(rec("recursive_doubling", p, 1 << 20, 1.0), time=None,
                     error={"type": "InvalidInputError", "message": "no chunks"})
                for p in (2, 4, 8)]
    records.append(dict(rec("ring", 1, 1 << 20, 1.0), time=0.0, busbw=0.0, algbw=0.0))
    fig = scaling(records)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "recursive_doubling: 3 points failed (InvalidInputError)" in texts
    assert "1 point at 1 rank not drawn (ring)" in texts


def test_plot_command_counts_failed_records(capsys, tmp_path):
    from simcoll.cli import main

    points = tmp_path / "failed.jsonl"
    records = [rec("ring", p, 1 << 20, p * 1e-5) for p in (2, 4)]
    records += [dict(rec("recursive_doubling", p, 1 << 20, 1.0), time=None,
                     error={"type": "InvalidInputError", "message": "no chunks"})
                for p in (2, 4, 8)]
    points.write_text("".join(json.dumps(r) + "\n" for r in records))
    picture = tmp_path / "p.png"
    assert main(["plot", str(points), "--output", str(picture)]) == 0
    assert capsys.readouterr().out == f"2 of 5 records plotted to {picture} (3 failed)\n"


def test_plot_command_reads_a_retried_point_as_last_saved(capsys, tmp_path):
    """A sweep saves two points failed on a run limit, then retry_failed=True saves them
    again, run: load_results reads three points, none failed; simcoll plot read five
    records, two failed, and its legend said "ring: 2 points failed (RunLimitError)"."""
    from simcoll.cli import main

    points = tmp_path / "retried.jsonl"
    grid = dict(algorithms=["ring"], ranks=[2, 4, 8], sizes=[1024], save=points)
    # ring on switch(p): 2 (p - 1) steps of 1 us latency each, so 4 and 8 ranks pass 5 us
    assert len(sc.sweep(sc.topology.switch, "all_reduce", until=5e-6, **grid).failed) == 2
    assert not sc.sweep(sc.topology.switch, "all_reduce", retry_failed=True, **grid).failed
    assert len(points.read_text().splitlines()) == 5
    picture = tmp_path / "p.png"
    assert main(["plot", str(points), "--output", str(picture)]) == 0
    assert capsys.readouterr().out == f"3 of 3 records plotted to {picture}\n"
    # identity values that are not hashable (a root written as a list) are compared as
    # JSON: the point read last holds, and nothing raised a TypeError
    odd = tmp_path / "odd.jsonl"
    first, again = (dict(rec("ring", 2, 1 << 20, t), network="flow", topology_hash="h",
                         op="SUM", root=[0], params={}) for t in (1e-5, 2e-5))
    other = dict(first, nranks=4, busbw=1.0)
    odd.write_text("".join(json.dumps(r) + "\n" for r in (first, other, again)))
    assert main(["plot", str(odd), "--output", str(picture)]) == 0
    assert capsys.readouterr().out == f"2 of 2 records plotted to {picture}\n"
    from simcoll.cli.plotting import read_records
    assert read_records(odd) == [other, again]


def test_size_axes_name_the_machine_once_in_the_title():
    records = [rec(a, p, n, (k + 1) * p * n * 1e-11) for k, a in enumerate(("ring", "tree"))
               for p in (2, 4) for n in (1 << 10, 1 << 20)]
    fig = scaling(records, x="nbytes")
    labels = sorted(line.get_label() for line in lines(fig, "simulated"))
    assert labels == ["ring (2 ranks)", "ring (4 ranks)", "tree (2 ranks)", "tree (4 ranks)"]
    assert fig.axes[0].get_title() == "all_reduce on switch(p)"


def test_on_a_callers_axes_the_legend_stays_inside_them():
    records = [rec(a, p, 64 << 20, (k + 1) * p * 1e-4)
               for k, a in enumerate(("ring", "hierarchical", "nccl")) for p in (2, 4, 8)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    scaling(records, y="busbw", ax=left)
    scaling(records, y="time", ax=right)
    fig.canvas.draw()
    for ax in (left, right):
        legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert frame.x0 <= legend.x0 and legend.x1 <= frame.x1
        assert frame.y0 <= legend.y0 and legend.y1 <= frame.y1
    _, own = plt.subplots()
    scaling(records, ax=own, legend="none")
    assert own.get_legend() is None
    with pytest.raises(sc.InvalidInputError, match="legend='below'"):
        scaling(records, legend="below")


def test_an_ax_that_is_not_axes_is_refused_by_name():
    with pytest.raises(sc.InvalidInputError, match="ax='notanaxes' is not a matplotlib Axes"):
        scaling([rec("ring", 2, 1024, 1e-5)], ax="notanaxes")


# -- measured against simulated --------------------------------------------------------
def _found(sizes, times):
    """sc.compare of switch(4) against a table with these sizes and measured times."""
    from simcoll.nccl_tests import Measurement, NcclTestsRow, NcclTestsTable

    rows = tuple(NcclTestsRow(s, s // 4, "float", "sum", -1,
                              Measurement(t * 1e6, 0.0, 0.0, None), None, i + 1)
                 for i, (s, t) in enumerate(zip(sizes, times)))
    topo = sc.topology.switch(4, bandwidth=40 * sc.GB, latency=2 * sc.us)
    return sc.compare(topo, NcclTestsTable(rows, "all_reduce", 4), algorithm="ring")


def test_a_comparison_far_off_says_how_many_times_and_its_ratio_ticks_reach_the_data():
    sizes = [2**k for k in range(10, 27, 2)]          # 1 KiB .. 64 MiB, 9 sizes
    found = _found(sizes, [(20e-6 + s / 40e9) / 100 for s in sizes])
    fig = sc.plot.comparison(found)
    upper, lower = fig.axes
    title = upper.get_title()
    assert "%" not in title and f"{1 + found.geomean_error:.3g}x apart" in title
    assert max(len(line) for line in title.split("\n")) <= 70
    ratios = lower.get_lines()[0].get_ydata()
    ticks = list(lower.get_yticks())
    # ticks on either side of the data (they stopped at 10, under a line at ~130)
    assert min(ticks) <= min(ratios) and any(t >= 100 for t in ticks) and 1 in ticks
    assert len(ticks) <= 6
    # no note over the line: the band is named in the legend
    assert not lower.texts
    legend = [t.get_text() for t in upper.get_legend().get_texts()]
    assert "lower panel: within 10%" in legend
    # every 4 octaves, to the last size (every 2 gave 9, then every 10 only 1 KiB, 1 MiB)
    labels = [t.get_text() for t in lower.get_xticklabels()]
    assert labels == ["1 KiB", "16 KiB", "256 KiB", "4 MiB", "64 MiB"]
    plt.close(fig)


def test_comparison_titles_wrap_to_the_figure_custom_ones_too():
    found = _found([2**k for k in range(10, 31, 2)], [20e-6 + 2**k / 300e9
                                                      for k in range(10, 31, 2)])
    fig = sc.plot.comparison(found, title="A custom and very long title " * 8)
    title = fig.axes[0].get_title()
    assert title.count("\n") >= 2 and max(len(line) for line in title.split("\n")) <= 70
    fig.canvas.draw()
    box = fig.axes[0].title.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width
    plt.close(fig)


def test_size_ticks_label_both_ends_of_the_data():
    from simcoll.plot.style import log2_ticks

    def size_ticks(sizes):
        return log2_ticks(sizes, 7)

    assert size_ticks([2**k for k in range(3, 34)]) == [2.0**k for k in range(3, 34, 5)]
    assert size_ticks([2**k for k in range(24, 34)]) == [2.0**k for k in (24, 27, 30, 33)]
    assert size_ticks([2**k for k in range(10, 31, 2)]) == \
        [2.0**k for k in range(10, 31, 4)]
    ticks = size_ticks([3000 * 2**k for k in range(12)])   # no end a power of 2
    assert ticks[0] == 3000 and ticks[-1] == 3000 * 2**11 and len(ticks) <= 7
    assert size_ticks([1, 2, 4]) == [1, 2, 4]


def test_the_comparison_legend_covers_no_point():
    sizes = [2**k for k in range(24, 34)]                   # busbw flat at 43-45 GB/s
    found = _found(sizes, [20e-6 + s / 30e9 for s in sizes])
    fig = sc.plot.comparison(found)
    fig.canvas.draw()
    upper = fig.axes[0]
    box = upper.get_legend().get_window_extent()
    for line in upper.get_lines():
        points = upper.transData.transform(np.column_stack(line.get_data()))
        assert not any(box.contains(x, y) for x, y in points), line.get_label()
    plt.close(fig)


def test_a_linear_busbw_axis_starts_at_zero():
    # busbw within less than a decade (43-45 GB/s) stays linear, from 0, so a 10% gap
    # looks like 10% of the height, not like all of it
    sizes = [2**k for k in range(24, 34)]
    fig = sc.plot.comparison(_found(sizes, [20e-6 + s / 30e9 for s in sizes]))
    upper = fig.axes[0]
    assert upper.get_yscale() == "linear" and upper.get_ylim()[0] == 0
    top = max(max(line.get_ydata()) for line in upper.get_lines())
    assert top < upper.get_ylim()[1] < 1.2 * top
    plt.close(fig)


def test_the_latency_legend_entry_only_where_a_bar_shows_latency():
    topo = sc.topology.switch(4, bandwidth=100 * sc.GB, latency=sc.us)
    big = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=64 * sc.MiB, trace=True)
    legend = [t.get_text() for t in timeline(big).axes[0].get_legend().get_texts()]
    assert not [t for t in legend if "latency" in t]      # 1 us of 1 ms: nothing to see
    empty = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=0, trace=True)
    ax = timeline(empty).axes[0]
    assert [t for t in (x.get_text() for x in ax.get_legend().get_texts()) if "latency" in t]
    assert not bars(timeline(empty)).get("rank 0/send bytes")   # nothing moved: all light


def test_titles_break_between_phrases_where_they_fit():
    from simcoll.plot.style import wrapped

    title = "link utilization: all_reduce/parameter_server on switch(8), 64 MiB per rank"
    assert wrapped(title, 72) == ("link utilization: all_reduce/parameter_server on "
                                  "switch(8),\n64 MiB per rank")
    assert all(len(line) <= 40 for line in wrapped("a" * 100 + ", tail", 40).split("\n"))
    assert wrapped("short, title", 72) == "short, title"
    # before a bracket rather than inside it
    assert wrapped("ring on switch(4): geometric-mean 12.6% (times a factor of 1.13 apart)",
                   50) == ("ring on switch(4): geometric-mean 12.6%\n"
                           "(times a factor of 1.13 apart)")
    # never inside brackets: a tuple stays on one line
    assert wrapped("GPipe: bubble 0.279, micro-batches in flight per stage (8, 8, 8, 8)",
                   50) == "GPipe: bubble 0.279,\nmicro-batches in flight per stage (8, 8, 8, 8)"


def test_every_shade_of_every_line_colour_stands_out_on_white():
    """An algorithm's lines at several sizes run through shades of its colour. nccl's
    olive, lightened by 35%, fell to 1.56:1 against white (WCAG's contrast ratio, worked
    out here from sRGB); tree's orange and bruck's cyan under 1.9. Every shade of
    every slot now keeps 2:1, and the ring's circle and nccl's marker differ in kind."""
    import matplotlib

    from simcoll.plot.curves import _ALGORITHM_SLOTS, _MARKERS

    def contrast(rgb) -> float:
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
                  for c in rgb[:3]]
        luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
        return 1.05 / (luminance + 0.05)

    records = [{"collective": "all_reduce", "algorithm": algorithm, "topology": f"switch({p})",
                "nranks": p, "nbytes": n, "time": p * n * 1e-12 * (k + 1)}
               for k, algorithm in enumerate(_ALGORITHM_SLOTS)
               for p in (2, 4, 8) for n in (1 << 10, 1 << 16, 1 << 20, 1 << 24)]
    fig = scaling(records)
    drawn = lines(fig, "simulated")
    assert len(drawn) == 4 * len(_ALGORITHM_SLOTS)
    assert min(contrast(matplotlib.colors.to_rgb(line.get_color())) for line in drawn) >= 2.0
    markers = {line.get_label().split(" (")[0]: line.get_marker() for line in drawn}
    assert markers["ring"] == "o" and markers["nccl"] not in ("o", "h", "8", "p")
    assert len(set(_MARKERS[:len(_ALGORITHM_SLOTS)])) == len(_ALGORITHM_SLOTS)


def test_a_comparison_on_the_callers_two_axes_has_a_log_size_axis_below_too():
    """With axes=(upper, lower) from plt.subplots(2, 1) the ratio panel was linear: the
    sizes crowded its left edge, their labels on top of each other."""
    import matplotlib.pyplot as plt

    sizes = [2**k for k in range(3, 30, 2)]
    found = _found(sizes, [20e-6 + s / 30e9 for s in sizes])
    fig, axes = plt.subplots(2, 1)
    assert sc.plot.comparison(found, axes=axes) is fig
    assert [ax.get_xscale() for ax in axes] == ["log", "log"]
    for bad in ((1, 2), axes[0]):
        with pytest.raises(sc.InvalidInputError, match="give two matplotlib Axes"):
            sc.plot.comparison(found, axes=bad)


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_the_timeline_legend_names_what_is_drawn():
    """256 ranks of 1 MiB: each light part under a 400th of the run, 98% of the bars
    light, and the legend left them out; a run of 0 bytes listed solid colours drawn
    nowhere, and then named neither of its rows: they are named in the light shade
    they are drawn in."""
    from matplotlib.colors import to_rgba

    many = sc.simulate(sc.topology.switch(64), "all_reduce", algorithm="ring",
                       nbytes=64 << 10, trace=True)
    assert "message latency,\nqueueing (lighter)" in _legend(sc.plot.timeline(many))
    empty = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=0,
                        trace=True)
    fig = sc.plot.timeline(empty)
    shown = _legend(fig)
    assert shown[:2] == ["send", "receive"]
    assert "message latency,\nqueueing (lighter)" in shown
    legend = fig.axes[0].get_legend()
    patches = dict(zip(shown, legend.get_patches()))
    bars = {c.get_gid(): c for c in fig.axes[0].collections}
    for name, row in (("send", "rank 0/send"), ("receive", "rank 0/recv")):
        drawn = tuple(bars[row].get_facecolor()[0])
        assert tuple(patches[name].get_facecolor()) == pytest.approx(drawn)
        assert drawn != pytest.approx(to_rgba({"send": "#1f77b4", "receive": "#ff7f0e"}[name]))


def test_more_lines_than_a_figure_shows_are_refused_before_drawing():
    # 101 sizes on 2 and 4 ranks against x = nranks: one line per size, 101 of them
    topo = {p: sc.topology.switch(p) for p in (2, 4)}
    records = [sc.simulate(topo[p], "all_reduce", algorithm="ring", nbytes=4 * (k + 1))
               for p in (2, 4) for k in range(101)]
    with pytest.raises(sc.InvalidInputError, match=r"the records make 101 lines \(one per "
                                                   r"algorithm and nbytes .*more than a "
                                                   r"figure shows \(100\); plot against "
                                                   r"x='nbytes' \(simcoll plot --x nbytes\)"):
        sc.plot.scaling(records, x="nranks")
    fig = sc.plot.scaling(records, x="nbytes")   # two lines, one per rank count
    assert len(fig.axes[0].get_lines()) == 2
    matplotlib.pyplot.close(fig)


def test_a_figure_of_exactly_max_lines_is_drawn(tmp_path):
    from simcoll.plot import curves

    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": p,
                "nbytes": 1024 * (k + 1), "time": 1e-6 * p * (k + 1), "algbw": 1.0,
                "busbw": 1.0} for p in (2, 4) for k in range(curves.MAX_LINES)]
    sc.plot.scaling(records, x="nranks", save=tmp_path / "f.png")
    assert (tmp_path / "f.png").exists()


def test_plot_tells_points_apart_by_every_identity_field_in_any_key_order(tmp_path):
    """A point is one point whatever the order of its params' keys, as load_results reads
    it (point_key sorts them): the record read last holds. Records that differ in their
    params or their root alone are other points, each kept."""
    from simcoll.cli.plotting import read_records

    points = tmp_path / "reordered.jsonl"
    first, again = (dict(rec("ring", 2, 1 << 20, t), topology_hash="h", op="SUM", root=0,
                         params=params)
                    for t, params in ((1e-5, {"chunks": 2, "channels": 4}),
                                      (2e-5, {"channels": 4, "chunks": 2})))
    other_params = dict(first, params={"chunks": 4, "channels": 4})
    other_root = dict(first, root=1)
    records = (first, other_params, other_root, again)
    points.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert read_records(points) == [other_params, other_root, again]


def test_an_algorithm_without_a_fixed_look_never_takes_a_fixed_ones():
    """Ring is blue circles and tree orange squares in every figure; hierarchical, which
    has no fixed look, took the first one this figure left free, the ring's, so a figure
    of hierarchical and tree read as ring and tree next to one of ring and tree. Others
    take the looks after the ten fixed ones, in the order they come."""
    from matplotlib.colors import to_rgba

    def records(algorithms):
        return [{"collective": "all_reduce", "algorithm": a, "topology": f"switch({p})",
                 "nranks": p, "nbytes": 1 << 20, "time": (k + 1) * p * 1e-6}
                for k, a in enumerate(algorithms) for p in (2, 4, 8)]

    def looks(algorithms):
        fig = scaling(records(algorithms), x="nranks")
        return {line.get_label(): (to_rgba(line.get_markeredgecolor()), line.get_marker())
                for line in lines(fig, "simulated")}

    fixed = looks(["ring", "tree"])
    mixed = looks(["hierarchical", "tree", "bucketed"])
    assert mixed["tree"] == fixed["tree"]
    assert mixed["hierarchical"] not in fixed.values()
    assert mixed["hierarchical"][1] not in ("o", "s") and mixed["bucketed"][1] not in ("o", "s")
    assert len(set(mixed.values())) == 3
    # Dark2's first two colours, after tab10's ten
    dark = [tuple(matplotlib.colormaps["Dark2"](i)) for i in range(2)]
    assert [mixed[a][0] for a in ("hierarchical", "bucketed")] == dark


def test_a_timeline_leaves_out_a_stream_whose_spans_take_no_time():
    """bucketed's default compute=0 traced spans of no time: every band got an empty
    compute row, and the legend a compute colour drawn nowhere."""
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="bucketed",
                      nbytes=1 << 20, trace=True)
    assert any(e.kind == "compute" and e.end == e.start for e in res.trace)
    fig = timeline(res)
    assert "compute" not in _legend(fig)
    assert not [c for c in fig.axes[0].collections if c.get_gid().endswith("/compute")]


def test_the_bytes_of_a_short_message_keep_an_edge_in_their_colour():
    """A ring of 64 ranks at 1 MiB: each step's 16 KiB move for 0.164 us of 272.6 us, far
    under a pixel; drawn without an edge, the pixel grid kept them at 46 of rank 0's 126
    sends and dropped the rest, so the bytes seemed not to move for long stretches."""
    from matplotlib.colors import to_rgba

    from simcoll.plot.style import NARROW_EDGE

    res = sc.simulate(sc.topology.switch(64), "all_reduce", algorithm="ring",
                      nbytes=1 << 20, trace=True)
    fig = timeline(res, ranks=[0])
    (moving,) = [c for c in fig.axes[0].collections if c.get_gid() == "rank 0/send bytes"]
    assert len(moving.get_paths()) == 126
    assert set(moving.get_linewidths()) == {NARROW_EDGE}
    assert {tuple(c) for c in moving.get_edgecolors()} == {to_rgba("#1f77b4")}


def test_a_timeline_on_a_callers_axes_can_put_its_legend_beside_them_or_leave_it_out():
    """On a caller's Axes the legend went inside, always over bars (they fill the axes),
    with no way to move it; legend= takes scaling's places, checked before drawing."""
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring",
                      nbytes=1 << 20, trace=True)
    fig, ax = plt.subplots()
    timeline(res, ax=ax, legend="right")
    box = ax.get_legend()
    fig.canvas.draw()
    assert box.get_window_extent().x0 >= ax.get_window_extent().x1
    fig, ax = plt.subplots()
    timeline(res, ax=ax, legend="none")
    assert ax.get_legend() is None
    fig, ax = plt.subplots()
    timeline(res, ax=ax)
    fig.canvas.draw()
    inside = ax.get_legend().get_window_extent()
    assert ax.get_window_extent().x0 <= inside.x0 and inside.x1 <= ax.get_window_extent().x1
    for bad in ("left", 1, True):
        with pytest.raises(sc.InvalidInputError, match=r"legend=.* is not accepted; use one "
                                                       r"of \('right', 'inside', 'none'\)"):
            timeline(res, legend=bad)
    plt.close("all")


matplotlib.use("Agg")

def test_a_legend_names_messages_whose_bytes_are_drawn_solid_in_their_full_colour():
    """A ring all_reduce of 1 MiB on switch(4): every message moves bytes, drawn solid
    over its light span, so the legend shows send and receive in their own colours
    (matplotlib's tab10 blue and orange), not the light shade kept for a run of
    messages without bytes."""
    from matplotlib.colors import to_rgba

    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring",
                      nbytes=1 << 20, trace=True)
    fig = sc.plot.timeline(res)
    legend = fig.axes[0].get_legend()
    patches = {t.get_text(): p for t, p in zip(legend.get_texts(), legend.get_patches())}
    assert tuple(patches["send"].get_facecolor()) == pytest.approx(to_rgba("#1f77b4"))
    assert tuple(patches["receive"].get_facecolor()) == pytest.approx(to_rgba("#ff7f0e"))
    matplotlib.pyplot.close(fig)


def test_a_bar_of_exactly_a_200th_of_the_run_is_not_outlined():
    """Outlines are for bars wider than a 200th of the run: rank 0 computes 1 s then 199
    s of a 200 s run; the 1 s bar is exactly a 200th, so it keeps the narrow edge in its
    own colour (0.6 pt), the 199 s bar the white outline (0.4 pt)."""
    from matplotlib.colors import to_rgba

    def program(comm):
        if comm.rank == 0:
            yield comm.compute(1.0)
            yield comm.compute(199.0)
        else:
            yield comm.compute(200.0)

    res = sc.run_program(sc.topology.switch(2), program, trace=True)
    assert res.time == 200.0
    fig = sc.plot.timeline(res)
    (bars,) = [c for c in fig.axes[0].collections if c.get_gid() == "rank 0/compute"]
    assert list(bars.get_linewidths()) == [0.6, 0.4]
    face = tuple(bars.get_facecolors()[0])
    assert [tuple(c) for c in bars.get_edgecolors()] == [face, to_rgba("white")]
    matplotlib.pyplot.close(fig)


def test_thin_timeline_lanes_drop_their_white_outline():
    """31 lanes in a row of a 32-rank all-to-all are a fraction of a point each: their
    white 0.4-point outlines covered the bars, and the busy rows read as idle. Four
    ranks' three lanes keep the outline that sets them apart."""
    def widths(p):
        topo = sc.topology.switch(p)
        res = sc.simulate(topo, "all_to_all", algorithm="direct", nbytes=4 * sc.MiB,
                          trace=True)
        fig = timeline(res, topo, ranks=[0, 1, 2, 3])
        return {float(w) for c in fig.axes[0].collections
                if c.get_gid() == "rank 0/send bytes" for w in c.get_linewidths()}

    assert widths(32) == {0.0}
    assert widths(4) == {0.4}


def test_a_pgf_save_without_its_tex_system_is_refused_before_drawing(monkeypatch, tmp_path):
    """matplotlib writes .pgf through xelatex (rcParams["pgf.texsystem"]): without it the
    save failed after the drawing with matplotlib's RuntimeError, and the refusal of
    other extensions listed .pgf among those accepted."""
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == matplotlib.rcParams[
        "pgf.texsystem"] else real(name))
    topo = sc.topology.switch(4)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1024, trace=True)
    with pytest.raises(sc.InvalidInputError, match=r"'.*x\.pgf' \(\.pgf needs xelatex, "
                                                   r"which is not installed\); use one"):
        timeline(res, save=tmp_path / "x.pgf")
    with pytest.raises(sc.InvalidInputError) as info:
        timeline(res, save=tmp_path / "x.foo")
    assert ".png" in str(info.value) and ".pgf" not in str(info.value)
    assert not list(tmp_path.iterdir())


def test_a_critical_timeline_of_every_endpoint_does_not_count_them_twice():
    """Every endpoint of a 64-rank ring is on its critical path; 16 are shown. The title
    said "showing 16 of the 64 endpoints (of 64) that the critical path visits"."""
    topo = sc.topology.switch(64)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=64 * sc.KiB, trace=True)
    title = timeline(res, topo, critical=True).axes[0].get_title()
    assert "showing 16 of the 64 endpoints that the critical path visits" in title
    assert "(of 64)" not in title


@pytest.mark.parametrize("ranks", [np.array(1), np.array([[0, 1]])])
def test_timeline_ranks_of_another_dimension_are_refused(ranks):
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=1024,
                      trace=True)
    with pytest.raises(sc.InvalidInputError, match=r"ranks=array\(.*is not accepted; give a "
                                                   r"non-empty list"):
        sc.plot.timeline(res, ranks=ranks)


def test_scaling_plots_the_busiest_sender_s_bytes_and_the_traffic_model():
    """y="bytes_sent": the most bytes one endpoint sent. 64 MiB per rank: a ring sends
    2 (p-1)/p M from every rank; the parameter server on rank 0 sends the reduced M to
    each of the p-1 workers, (p-1) M; with two server hosts each host sends its half of
    M to all p workers, p M / 2. The model's lines (cost.traffic) lie on the simulated
    ones, and the axis is labelled at powers of 2 in binary units."""
    m = 64 * 2**20
    records = []
    for p in (2, 4, 8):
        records.append(sc.simulate(reference(p), "all_reduce", algorithm="ring", nbytes=m))
        records.append(sc.simulate(reference(p), "all_reduce", algorithm="parameter_server",
                                   nbytes=m))
        hosts = sc.topology.switch(p, bandwidth=1 / BETA, latency=ALPHA / 2, servers=2)
        records.append(sc.simulate(hosts, "all_reduce", algorithm="parameter_server",
                                   nbytes=m).to_dict())
    fig = scaling(records, y="bytes_sent", formula=True, alpha=ALPHA, beta=BETA, gamma=0)
    expected = {"ring": [2 * (p - 1) * m // p for p in (2, 4, 8)],
                "rank 0": [(p - 1) * m for p in (2, 4, 8)],
                "hosts": [p * m // 2 for p in (2, 4, 8)]}
    drawn = sorted(xy(line)[1] for line in lines(fig, "simulated"))
    assert drawn == sorted([float(v) for v in values] for values in expected.values())
    model = sorted(xy(line)[1] for line in lines(fig, "formula"))
    assert model == drawn
    ticks = tick_texts(fig, "y")
    assert "64 MiB" in ticks and "512 MiB" in ticks and all(t.endswith("iB") for t in ticks)
    assert fig.axes[0].get_ylabel() == "bytes sent by the busiest GPU or host"
    legend = fig.axes[0].get_legend()
    assert "traffic model (dashed)" in [text.get_text() for text in legend.get_texts()]
    # the traffic model reads no alpha, beta or gamma: none need be given for it
    bare = scaling(records, y="bytes_sent", formula=True)
    assert sorted(xy(line)[1] for line in lines(bare, "formula")) == drawn


MIB = 2**20


def _sent(values: dict[int, list[int]], algorithm: str = "ring") -> list[dict]:
    """all_reduce records of 1 MiB per rank whose GPUs sent ``values[p]`` bytes."""
    return [{"collective": "all_reduce", "algorithm": algorithm, "nranks": p,
             "nbytes": MIB, "bytes_sent": sent} for p, sent in values.items()]


def test_bytes_sent_on_one_power_of_two_spans_an_octave_above_it():
    """Every busiest sender sent 64 MiB = 2^26: the axis runs from a quarter octave
    below it, 2^25.75, to the next power of 2, 2^27, on a log2 scale, with a tick at
    2^26 and 2^27."""
    fig = scaling(_sent({2: [64 * MIB] * 2, 4: [64 * MIB] * 4}), y="bytes_sent")
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo == pytest.approx(2**25.75, rel=1e-12)
    assert hi == pytest.approx(2**27, rel=1e-12)
    assert ax.get_yscale() == "log" and ax.yaxis.get_transform().base == 2
    assert [float(v) for v in ax.yaxis.get_minor_locator().locs] == [2.0**26, 2.0**27]


def test_bytes_sent_on_powers_of_two_get_a_quarter_octave_either_side():
    """Busiest senders of 64 MiB (2^26) and 512 MiB (2^29): the data lie on powers of 2,
    so the axis reaches a quarter octave past both, 2^25.75 to 2^29.25, with a minor tick
    at each power 2^26 .. 2^29."""
    fig = scaling(_sent({2: [64 * MIB, 1], 4: [512 * MIB, 0, 0, 0]}), y="bytes_sent")
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo == pytest.approx(2**25.75, rel=1e-12)
    assert hi == pytest.approx(2**29.25, rel=1e-12)
    assert [float(v) for v in ax.yaxis.get_minor_locator().locs] == [2.0**e for e in range(26, 30)]


def test_bytes_sent_off_the_powers_of_two_start_at_the_power_below():
    """3 MiB and 6 MiB: the powers of 2 from the one at or below 3 MiB (2 MiB = 2^21) to
    the one at or above 6 MiB (8 MiB = 2^23) bound the axis (the data lie off them, so no
    quarter octave is added), a tick at each."""
    fig = scaling(_sent({2: [3 * MIB] * 2, 4: [6 * MIB] * 4}), y="bytes_sent")
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo == pytest.approx(2.0**21, rel=1e-12)
    assert hi == pytest.approx(2.0**23, rel=1e-12)
    assert [float(v) for v in ax.yaxis.get_minor_locator().locs] == [2.0**21, 2.0**22, 2.0**23]


def test_a_traffic_model_of_no_bytes_is_not_drawn():
    """A model that says no GPU sends anything has nothing to draw on a log axis: the
    simulated line is drawn, the model's is not (the line says 'no model')."""
    def zeros(p, nbytes, itemsize):
        return gpu_traffic(np.zeros(p, dtype=np.int64), np.zeros(p, dtype=np.int64))

    def never(p, nbytes, alpha, beta, gamma):
        return alpha

    @sc.register("all_reduce", "silent_model_probe", cost=CostModel(time=never, traffic=zeros))
    def program(comm, x, *, op):
        yield comm.compute(0.0)
        return x

    fig = scaling(_sent({2: [MIB] * 2, 4: [2 * MIB] * 4}, "silent_model_probe"),
                  y="bytes_sent", formula=True, alpha=1e-6, beta=1e-9, gamma=0)
    ax = fig.axes[0]
    assert not [line for line in ax.get_lines() if line.get_gid() == "formula"]
    simulated = [line for line in ax.get_lines() if line.get_gid() == "simulated"]
    assert [float(v) for v in simulated[0].get_ydata()] == [MIB, 2 * MIB]
    assert "no model" in simulated[0].get_label()


def test_a_record_s_bytes_sent_as_tuples_or_booleans():
    """A mapping's bytes_sent may be a tuple (the largest of it counts, with its
    host_bytes_sent); booleans are no byte counts."""
    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": 2, "nbytes": 8,
                "bytes_sent": (3, 5), "host_bytes_sent": (7,)},
               {"collective": "all_reduce", "algorithm": "ring", "nranks": 2, "nbytes": 8,
                "bytes_sent": [True, True]}]
    assert [point.bytes_sent for point in read_points(records)] == [7, None]


def test_a_result_s_busiest_sender_may_be_a_server_host():
    """A parameter server with two server hosts on 4 GPUs, 64 MiB: each host sends its
    half of the reduced buffer to the 4 workers, 4 x 32 MiB = 128 MiB; a worker sends its
    two halves, 64 MiB. Read from the Result itself (not its dict), the busiest is a host."""
    m = 64 * MIB
    topo = sc.topology.switch(4, bandwidth=1e11, latency=1e-6, servers=2)
    res = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=m)
    assert res.bytes_sent.tolist() == [m] * 4
    (point,) = read_points([res])
    assert point.bytes_sent == 4 * m // 2


@pytest.mark.parametrize("as_dict", [False, True])
def test_an_in_network_device_is_neither_a_server_host_nor_the_busiest_sender(as_dict):
    """dgx_h100(1) has no server host and one NVSwitch that reduces in the network. The
    plot took every endpoint past the GPUs as a server host: the parameter server's model
    was drawn for a server host that does not exist (8 MiB sent, where rank 0 sends the
    sum to the 7 others, 7 MiB), and NVLS's bytes_sent was the switch's multicast (32 MiB
    at 16 MiB, where the busiest GPU sends (p+1)/p of it, 18 MiB)."""
    topo = sc.topology.dgx_h100(1)
    ps = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=MIB)
    nvls = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=16 * MIB, algo="nvls")
    assert (ps.hosts, ps.host_bytes_sent.size) == (0, 1)
    assert nvls.to_dict()["hosts"] == 0 and nvls.host_bytes_sent[0] == 32 * MIB
    records = [r.to_dict() if as_dict else r for r in (ps, nvls)]
    drawn = {line.get_label(): xy(line)[1]
             for line in scaling(records, y="bytes_sent", formula=True).axes[0].get_lines()}
    assert drawn == {"parameter_server (1 MiB per rank)": [7 * MIB], "_formula": [7 * MIB],
                     "nccl (algo='nvls', 16 MiB per rank, no model)": [9 * 16 * MIB // 8]}
    # the time model too: 2 (alpha + 7 M beta) with the server on rank 0, not a host's
    alpha, beta = 2e-6, 1e-11
    (model,) = lines(scaling([records[0]], y="time", formula=True, alpha=alpha, beta=beta,
                             gamma=0), "formula")
    assert xy(model)[1] == pytest.approx([2 * (alpha + 7 * MIB * beta) * 1e6], rel=1e-12)


def test_an_all_gatherv_model_s_bandwidth_counts_its_whole_output():
    """all_gatherv's S is its whole output (simulate's algbw); the model line divided
    its time into one rank's input, p times too little. Direct all_gatherv of 4 KiB a
    rank on switch(p): t = 2 L + (p-1) 4096 B / B, by hand."""
    bandwidth, latency, n = 100e9, 1e-6, 4096
    runs = [sc.simulate(sc.topology.switch(p, bandwidth=bandwidth, latency=latency),
                        "all_gatherv", algorithm="direct", nbytes=[n] * p) for p in (2, 4, 8)]
    fig = scaling(runs, y="busbw", formula=True, alpha=2 * latency, beta=1 / bandwidth,
                  gamma=0)
    by_hand = [p * n / (2 * latency + (p - 1) * n / bandwidth) * (p - 1) / p / 1e9
               for p in (2, 4, 8)]
    (model,) = lines(fig, "formula")
    (simulated,) = lines(fig, "simulated")
    assert xy(model)[1] == pytest.approx(by_hand, rel=1e-12)
    assert xy(simulated)[1] == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("octaves", [8, 16, 24])
def test_bytes_sent_axis_labels_at_most_eight_powers_of_two(octaves):
    """1 KiB to 2^octaves KiB: octaves + 1 powers of 2, every k-th labelled down from the
    top, k the least with ceil(octaves / k) + 1 <= 8 (2, 3, 4): 5, 7 and 7 labels (9
    were labelled; then the top was left unlabelled)."""
    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": 2, "nbytes": 1024,
                "bytes_sent": [1024]},
               {"collective": "all_reduce", "algorithm": "ring", "nranks": 4, "nbytes": 1024,
                "bytes_sent": [1024 * 2**octaves]}]
    fig = scaling(records, y="bytes_sent")
    exponents = [math.log2(v) for v in fig.axes[0].yaxis.get_major_locator().locs]
    steps = {b - a for a, b in zip(exponents, exponents[1:])}
    assert len(exponents) <= 8 and len(steps) == 1   # evenly spaced powers of 2
    (step,) = steps
    assert exponents[-1] == 10 + octaves and exponents[0] <= 10   # both ends labelled
    # no smaller step labels both ends within 8 labels
    assert all(math.ceil(octaves / k) + 1 > 8 for k in range(1, int(step)))


def test_figures_saved_from_threads_at_once_keep_their_text(tmp_path):
    """matplotlib's rc_context sets settings for the whole process: two threads saving
    at once left one file's text drawn as paths, and the settings changed after."""
    import threading

    results = [sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring",
                           nbytes=1 << 20) for p in (2, 4)]
    before = dict(matplotlib.rcParams)
    paths = []
    for round_ in range(4):
        pair = [tmp_path / f"{round_}.svg", tmp_path / f"{round_}.pdf"]
        threads = [threading.Thread(target=scaling, args=(results,), kwargs={"save": path})
                   for path in pair]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        paths += pair
    for path in paths:
        if path.suffix == ".svg":
            assert "<text" in path.read_text(), path
        else:
            data = path.read_bytes()
            assert b"/Type3" not in data and b"/FontFile2" in data, path
    assert {k: v for k, v in matplotlib.rcParams.items() if before[k] != v} == {}


@pytest.mark.parametrize("octaves, labels", [
    # 1 KiB .. 2^7 KiB: 8 powers of 2 (2^10 .. 2^17), at most 8 labels: every one
    (7, [2.0**e for e in range(10, 18)]),
    # 1 KiB .. 2^15 KiB: 16 powers, every 3rd down from the top: 2^10, 2^13, .., 2^25
    # (every 2nd would need 9 labels to reach the top)
    (15, [2.0**e for e in range(10, 26, 3)]),
])
def test_bytes_sent_axis_labels_every_power_that_fits_in_eight(octaves, labels):
    """k is the least step with ceil(octaves / k) + 1 <= 8 labels, the top one among them:
    8 powers need no thinning (k = 1), 16 powers every 3rd (k = 3)."""
    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": 2, "nbytes": 1024,
                "bytes_sent": [1024]},
               {"collective": "all_reduce", "algorithm": "ring", "nranks": 4, "nbytes": 1024,
                "bytes_sent": [1024 * 2**octaves]}]
    fig = scaling(records, y="bytes_sent")
    assert [float(v) for v in fig.axes[0].yaxis.get_major_locator().locs] == labels


def _one_megabyte_from_gpu0_to_gpu1(comm):
    if comm.rank == 0:
        yield comm.send(np.zeros(1_000_000, np.uint8), 1)
    elif comm.rank == 1:
        yield comm.recv(0)


def _megabyte_past_a_link_failed_in_its_latency(ranks):
    """ring(ranks) at 100 GB/s and 1 us a link: 1 MB from gpu0 to gpu1, whose link fails
    at 0.5 us, during the message's latency, traced; (topology, result)."""
    topo = sc.topology.ring(ranks, bandwidth=100e9, latency=1e-6)
    faults = sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.5e-6)])
    return topo, sc.run_program(topo, _one_megabyte_from_gpu0_to_gpu1, trace=True,
                                faults=faults)


def test_a_link_failed_before_the_bytes_moved_is_named_where_the_drawing_differs():
    """ring(4), 1 MB from gpu0 to gpu1, whose link fails at 0.5 us, during the
    message's 1 us latency: every byte takes gpu0 -> gpu3 -> gpu2 -> gpu1 (what the network
    counts), and the trace keeps the route the message was handed to, so the drawing
    puts it all on the dead link. The drawing now says so (it said nothing)."""
    from simcoll.link_load import link_loads

    topo, res = _megabyte_past_a_link_failed_in_its_latency(4)
    assert {k: v for k, v in res.link_bytes.items() if v} == {
        ("gpu0", "gpu3"): 1_000_000, ("gpu3", "gpu2"): 1_000_000, ("gpu2", "gpu1"): 1_000_000}
    with pytest.warns(UserWarning, match=r"^4 directed link\(s\) drawn with other bytes "
                      r"than the network counted on them: .*gpu0->gpu1 \(1000000 drawn, 0 "
                      r"counted\); a link failed under messages in flight"):
        link_loads(res, topo)
    with pytest.warns(UserWarning, match="drawn with other bytes"):
        link_utilization(res, topo)
    healthy = sc.run_program(topo, _one_megabyte_from_gpu0_to_gpu1, trace=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [load.name for load in link_loads(healthy, topo)] == ["gpu0->gpu1"]


@pytest.mark.parametrize("ranks", [2, 4, 12])
def test_the_colour_bar_label_fits_the_figure(ranks, tmp_path):
    """On heatmaps of a few links the colour bar's label ran past the figure's top and
    bottom (2.6 in high for a 3.2 in label): a saved PNG showed "action of link
    bandwidth (square-root s"."""
    topo = sc.topology.switch(ranks)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=sc.MiB, trace=True)
    fig = link_utilization(res, topo, save=tmp_path / "links.png")
    renderer = fig.canvas.get_renderer()
    label = fig.axes[1].yaxis.label.get_window_extent(renderer)
    assert 0 <= label.y0 and label.y1 <= fig.bbox.height


def _mut20_one_and_three_megabytes_from_gpu0(comm):
    if comm.rank == 0:
        first = comm.send(np.zeros(1_000_000, np.uint8), 1)
        second = comm.send(np.zeros(3_000_000, np.uint8), 2)
        yield first
        yield second
    elif comm.rank in (1, 2):
        yield comm.recv(0)


def test_mut20_the_warning_names_the_most_off_links_first():
    """ring(6), 100 GB/s, 1 us latency; gpu0 sends 1 MB to gpu1 and 3 MB to gpu2 (route
    gpu0 -> gpu1 -> gpu2), and gpu0->gpu1 fails at 0.5 us, before any byte moved. Hand-worked:
    the 1 MB goes 0 -> 5 -> 4 -> 3 -> 2 -> 1 and the 3 MB 0 -> 5 -> 4 -> 3 -> 2, so the
    network counts 4 MB on gpu0->gpu5, gpu5->gpu4, gpu4->gpu3, gpu3->gpu2 and 1 MB on
    gpu2->gpu1; the drawing keeps the first routes: 4 MB on gpu0->gpu1, 3 MB on gpu1->gpu2.
    Off by: five links 4 MB, gpu1->gpu2 3 MB, gpu2->gpu1 1 MB: 7 links, and the 4 named
    (most off first) are four of the five 4 MB ones, then "...". (Least off first named
    gpu2->gpu1 first; by signed difference, gpu0->gpu1 (+4 MB) then gpu1->gpu2 (+3 MB).)"""
    import re

    from simcoll.link_load import link_loads

    topo = sc.topology.ring(6, bandwidth=100e9, latency=1e-6)
    res = sc.run_program(topo, _mut20_one_and_three_megabytes_from_gpu0, trace=True,
                         faults=sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=0.5e-6)]))
    assert {k: v for k, v in res.link_bytes.items() if v} == {
        ("gpu0", "gpu5"): 4_000_000, ("gpu5", "gpu4"): 4_000_000,
        ("gpu4", "gpu3"): 4_000_000, ("gpu3", "gpu2"): 4_000_000, ("gpu2", "gpu1"): 1_000_000}
    with pytest.warns(UserWarning) as record:
        link_loads(res, topo)
    (message,) = [str(w.message) for w in record if "drawn with other bytes" in str(w.message)]
    assert message.startswith("7 directed link(s) drawn with other bytes")
    shown = re.findall(r"(gpu\d->gpu\d) \((\d+) drawn, (\d+) counted\)", message)
    assert len(shown) == 4
    four_mb = {"gpu0->gpu1", "gpu0->gpu5", "gpu5->gpu4", "gpu4->gpu3", "gpu3->gpu2"}
    assert all(link in four_mb and abs(int(d) - int(c)) == 4_000_000 for link, d, c in shown)
    assert "counted), ...; a link failed" in message


def _mut20_a_large_then_a_small_message(comm):
    if comm.rank == 0:
        yield comm.send(np.zeros(100_000_000, np.uint8), 1)
        yield comm.send(np.zeros(100_000, np.uint8), 1)
    elif comm.rank == 1:
        yield comm.recv(0)
        yield comm.recv(0)


def test_mut20_a_link_drawn_a_thousandth_over_its_count_is_named():
    """ring(4), 100 GB/s, 1 us latency: gpu0 sends gpu1 100 MB (arrives 1 ms + 1 us), then
    100 kB, whose link fails at 1.0015 ms, during that message's 1 us latency: its bytes
    all go gpu0 -> gpu3 -> gpu2 -> gpu1. The dead link is drawn with 100,100,000 bytes and
    counted 100,000,000: off by 1e-3 of its count, far over float rounding, so it is named
    with the three detour links (a tolerance of 1% hid it)."""
    from simcoll.link_load import link_loads

    topo = sc.topology.ring(4, bandwidth=100e9, latency=1e-6)
    res = sc.run_program(topo, _mut20_a_large_then_a_small_message, trace=True,
                         faults=sc.Faults(links=[sc.LinkFault("gpu0", "gpu1", at=1.0015e-3)]))
    assert {k: v for k, v in res.link_bytes.items() if v} == {
        ("gpu0", "gpu1"): 100_000_000, ("gpu0", "gpu3"): 100_000,
        ("gpu3", "gpu2"): 100_000, ("gpu2", "gpu1"): 100_000}
    with pytest.warns(UserWarning, match=r"^4 directed link\(s\) drawn with other bytes") \
            as record:
        link_loads(res, topo)
    assert "gpu0->gpu1 (100100000 drawn, 100000000 counted)" in str(record[0].message)


def test_mut20_the_drawing_warning_points_at_the_caller_of_link_loads():
    """The warning is raised with the line of the user's call to link_loads, not a line
    of simcoll (stacklevel: warn_where_drawn_differs -> link_loads -> caller)."""
    from simcoll.link_load import link_loads

    topo, res = _megabyte_past_a_link_failed_in_its_latency(4)
    with pytest.warns(UserWarning, match="drawn with other bytes") as record:
        link_loads(res, topo)
    assert record[0].filename == __file__


def test_mut20_five_links_off_name_four_then_an_ellipsis():
    """ring(5), 1 MB from gpu0 to gpu1, whose link fails at 0.5 us, before the bytes move:
    they go gpu0 -> gpu4 -> gpu3 -> gpu2 -> gpu1. Off: the dead link (1 MB drawn, 0
    counted) and the four detour links (0 drawn, 1 MB counted): 5 links, one more than
    the 4 the warning names, so it ends the list with "..."."""
    import re

    from simcoll.link_load import link_loads

    topo, res = _megabyte_past_a_link_failed_in_its_latency(5)
    assert {k: v for k, v in res.link_bytes.items() if v} == {
        ("gpu0", "gpu4"): 1_000_000, ("gpu4", "gpu3"): 1_000_000,
        ("gpu3", "gpu2"): 1_000_000, ("gpu2", "gpu1"): 1_000_000}
    with pytest.warns(UserWarning, match=r"^5 directed link\(s\) drawn with other bytes") \
            as record:
        link_loads(res, topo)
    message = str(record[0].message)
    assert len(re.findall(r"gpu\d->gpu\d \(\d+ drawn, \d+ counted\)", message)) == 4
    assert "counted), ...; a link failed" in message


def test_the_drawing_warning_points_at_the_callers_line_from_every_drawing():
    """link_utilization and to_chrome's counter tracks warn as link_loads does, at the
    user's line (the warning pointed inside simcoll/plot/links.py)."""
    from simcoll.trace import to_chrome

    topo, res = _megabyte_past_a_link_failed_in_its_latency(4)
    for draw in (lambda: link_utilization(res, topo), lambda: to_chrome(res, topo)):
        with pytest.warns(UserWarning, match="drawn with other bytes") as record:
            draw()
        assert [w.filename for w in record] == [__file__]


def test_save_chrome_warns_at_the_callers_line(tmp_path):
    """Through save_chrome (what the CLI and README use) the drawing warning pointed at
    a line of simcoll/trace.py."""
    from simcoll.trace import save_chrome

    topo, res = _megabyte_past_a_link_failed_in_its_latency(4)
    with pytest.warns(UserWarning, match="drawn with other bytes") as record:
        save_chrome(res, tmp_path / "trace.json", topo)
    assert [w.filename for w in record] == [__file__]


def test_a_default_roots_label_names_its_root_before_its_op():
    """A reduce with op=max from root 0 and from root 5: the default root's line spells
    root=0 where the other line names its root, in the order Point.settings writes them
    (root, then op), not after the op."""
    topo = sc.topology.cluster(2, 4)
    runs = [sc.simulate(topo, "reduce", algorithm="binomial", nbytes=1 << 20, root=root,
                        op="max") for root in (0, 5)]
    fig = scaling(runs, x="nbytes")
    labels = sorted(line.get_label() for line in fig.axes[0].get_lines()
                    if line.get_gid() == "simulated")
    plt.close(fig)
    assert labels == ["binomial (root=0, op=max)", "binomial (root=5, op=max)"]


def test_no_barrier_hint_for_other_collectives_without_busbw():
    """all_reduce on one rank has busbw 0 ((p - 1) / p is 0): the refusal names busbw,
    and does not call it a barrier."""
    one = [sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="ring", nbytes=n)
           for n in (1024, 2048)]
    with pytest.raises(sc.InvalidInputError,
                       match=r"^no record has a positive busbw to plot$"):
        scaling(one, x="nbytes", y="busbw")


def test_only_lines_of_rooted_or_reducing_collectives_are_labelled_root_0_or_op_sum():
    """An all_reduce has no root and a broadcast no op: beside a broadcast from root 1
    and a max-reduce, they were labelled root=0 and op=sum."""
    records = []
    for p in (2, 4):
        topo = sc.topology.switch(p)
        records += [sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1024),
                    sc.simulate(topo, "broadcast", algorithm="binomial", nbytes=1024, root=1),
                    sc.simulate(topo, "reduce", algorithm="binomial", nbytes=1024, op="max")]
    fig = scaling(records)
    assert sorted(line.get_label() for line in lines(fig, "simulated")) == [
        "binomial (broadcast, root=1)", "binomial (reduce, root=0, op=max)",
        "ring (all_reduce, op=sum)"]


def test_a_narrow_caller_axes_labels_fewer_sizes():
    """Up to 12 size labels were drawn whatever the axes' width: on two 7-inch-wide
    subplots ("8 B64 B512 B4 KiB...") they ran into each other. A caller's axes gets
    _X_TICKS (8) labels per 4.6 inches, both ends kept; a new figure all 11 sizes."""
    records = [sc.simulate(reference(4), "all_reduce", algorithm="ring", nbytes=8 << k)
               for k in range(0, 31, 3)]
    fig, axes = plt.subplots(1, 2, figsize=(7, 3), layout="constrained")
    scaling(records, x="nbytes", y="busbw", ax=axes[0])
    fig.canvas.draw()
    width = axes[0].get_position().width * 7
    labels = [t.get_text() for t in axes[0].get_xticklabels()]
    assert 3 <= len(labels) <= round(8 * width / 4.6) < 11
    assert labels[0] == "8 B" and labels[-1] == "8 GiB"
    assert len(scaling(records, x="nbytes", y="busbw").axes[0].get_xticklabels()) == 11


def test_a_long_name_is_cut_after_its_last_slash_that_fits():
    """A 38-character path-like machine name on lines of 30: no "_" in it, so it is cut
    after its last "/" within the first 30 characters (index 15), and that piece fits
    after "ring on" (7 + 1 + 16 = 24); the rest, 22 characters, takes a line of its
    own. Cut at the width instead, "...superpo" / "drailopt" split a word."""
    assert wrapped("ring on machines/nvidia/dgxh100superpodrailopt", 30).split("\n") == [
        "ring on machines/nvidia/", "dgxh100superpodrailopt"]


def test_a_separator_just_past_the_width_is_not_taken_as_a_cut():
    """A 35-character word whose only "_" is its 31st character (index 30), on lines of
    30: no separator lies within the first 30, so it is cut at the width, and the "_"
    starts the rest. Cutting after that "_" left a 31-character line."""
    word = "abcdefghijklmnopqrstuvwxyz0123_node"
    lines = wrapped(f"run on {word}", 30).split("\n")
    assert lines == ["run on", "abcdefghijklmnopqrstuvwxyz0123", "_node"]
    assert max(map(len, lines)) <= 30


def test_a_very_narrow_caller_axes_still_labels_at_least_three_sizes():
    """An axes 1.2 inches wide (0.8 of a 1.5-inch figure) would get round(8 x 1.2 / 4.6)
    = 2 labels by the width alone: it keeps at least 3. 11 sizes, 8 B (2^3) to 8 GiB
    (2^33), 30 octaves: the least step k with 30 // k + 1 <= 3 is 11 (none of 11-14
    divides 30), 2^3, 2^14, 2^25, but the last size, 2^33, 8 octaves past 2^25 (more than
    half a step), takes a label of its own: 4, one past the 3 allowed. k = 12 gives 2^3,
    2^15, 2^27 and 2^33 (6 octaves, not less than half of 12); k = 13 gives 2^3, 2^16,
    2^29, with 2^29 dropped for 2^33, 4 octaves away: 3 labels."""
    records = [sc.simulate(reference(4), "all_reduce", algorithm="ring", nbytes=8 << k)
               for k in range(0, 31, 3)]
    fig = plt.figure(figsize=(1.5, 3))
    ax = fig.add_axes((0.1, 0.2, 0.8, 0.7))
    scaling(records, x="nbytes", y="busbw", ax=ax)
    assert [tick for tick in ax.get_xticks()] == [2.0 ** 3, 2.0 ** 16, 2.0 ** 33]
    plt.close(fig)


def test_lines_are_faded_only_under_a_model_drawn_over_them(grid):
    """formula=True draws each line's model dashed over it, the line itself faded to
    alpha 0.45; where no line has a model (algorithms without one) the lines keep their
    full colour, alpha 1, as without formula=True."""
    from matplotlib.colors import to_rgba

    renamed = [dict(r.to_dict(), algorithm="mine_" + r.algorithm) for r in grid]
    ax = scaling(renamed, x="nbytes", formula=True, alpha=1e-6, beta=1e-11, gamma=0).axes[0]
    simulated = [line for line in ax.lines if line.get_gid() == "simulated"]
    assert simulated and all(to_rgba(line.get_color())[3] == 1.0 for line in simulated)
    ax = scaling(grid, x="nbytes", formula=True, alpha=1e-6, beta=1e-11, gamma=0).axes[0]
    simulated = [line for line in ax.lines if line.get_gid() == "simulated"]
    assert simulated and all(to_rgba(line.get_color())[3] == 0.45 for line in simulated)


def test_a_line_of_0_bytes_per_rank_says_its_size():
    """The legend's test of a field's truthiness dropped a size of 0: 'ring' beside
    'ring (1 MiB per rank)'."""
    grid = sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 4],
                    sizes=[0, 1 << 20], progress=False)
    fig = scaling(grid, y="time")
    assert sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts()) == [
        "ring (0 B per rank)", "ring (1 MiB per rank)"]


@pytest.mark.parametrize("field, value, match", [
    ("params", "chunks=2", r"record 0 has params='chunks=2'; expected an object"),
    ("params", [1, 2], r"record 0 has params=\[1, 2\]; expected an object"),
    ("params", 5, r"record 0 has params=5; expected an object"),
    ("requested", "x", r"record 0 has requested='x'; expected an object"),
    ("host_bytes_sent", 5, r"record 0 has host_bytes_sent=5; expected a list"),
    ("bytes_sent", "x", r"record 0 has bytes_sent='x'; expected a list"),
    ("hosts", -1, r"record 0 has hosts=-1; expected an integer >= 0"),
    ("hosts", 0.5, r"record 0 has hosts=0\.5; expected an integer"),
    ("hosts", True, r"record 0 has hosts=True; expected an integer"),
])
def test_a_record_whose_fields_have_the_wrong_type_is_refused_by_name(field, value, match):
    """dict('chunks=2') and len(5) raised ValueError and TypeError."""
    record = {"collective": "all_reduce", "algorithm": "ring", "nranks": 8, "nbytes": 1024,
              "time": 1e-5, "algbw": 1e9, "busbw": 1e9, field: value}
    with pytest.raises(sc.InvalidInputError, match=match):
        read_points([record])


def test_records_read_back_by_pandas_plot_as_they_ran():
    """pandas reads a sweep file's "error": null as NaN, which counted as a failure (no
    point was plotted, "12 failed"), and to_pandas() writes params as JSON text, which
    dict() could not take."""
    pd = pytest.importorskip("pandas")
    grid = sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 4],
                    sizes=[1024, 4096], progress=False, chunks=2)
    assert [r["error"] for r in grid.records] == [None] * 4
    frame = pd.DataFrame(grid.records)
    frame["error"] = frame["error"].astype(float)          # as read_json types a null column
    for records in (frame.to_dict("records"), grid.to_pandas().to_dict("records")):
        points = read_points(records)
        assert sorted((p.nranks, p.nbytes, p.params) for p in points) == [
            (2, 1024, {"chunks": 2}), (2, 4096, {"chunks": 2}), (4, 1024, {"chunks": 2}),
            (4, 4096, {"chunks": 2})]
    assert not [p for p in read_points(frame.to_dict("records")) if p.settings]


def test_a_bytes_axis_labels_no_fraction_of_a_byte_and_keeps_markers_off_its_frame():
    """1 B to 126 GiB: the bottom label moved down to 1/32 B ('0.03125 B'), and the
    quarter octave left past the top was 0.6% of a 40-octave axis, less than a marker."""
    top = 63 * 2**31   # a parameter server's 63 x 2 GiB
    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": 2, "nbytes": 1,
                "bytes_sent": [1]},
               {"collective": "all_reduce", "algorithm": "ring", "nranks": 4, "nbytes": 1,
                "bytes_sent": [top]}]
    ax = scaling(records, y="bytes_sent").axes[0]
    labels = [float(v) for v in ax.yaxis.get_major_locator().locs]
    assert min(labels) >= 1 and max(labels) >= top
    bottom, upper = (math.log2(v) for v in ax.get_ylim())
    span = upper - bottom
    assert math.log2(top) <= upper - 0.03 * span and bottom + 0.03 * span <= 0


def test_records_with_pandas_float_roots_keep_their_roots_apart():
    """A frame mixing collectives holds root as a float column (1.0): broadcast's roots
    0 and 1 merged into one line, the later points replacing the earlier."""
    base = {"collective": "broadcast", "algorithm": "binomial", "nbytes": 1024, "time": 1e-5,
            "algbw": 1e8, "busbw": 1e8}
    records = [dict(base, nranks=n, root=float(root)) for root in (0, 1) for n in (2, 4)]
    records.append(dict(base, collective="all_reduce", algorithm="ring", nranks=2,
                        root=float("nan")))
    points = read_points(records)
    assert sorted((p.collective, p.settings, p.nranks) for p in points) == [
        ("all_reduce", "", 2), ("broadcast", "", 2), ("broadcast", "", 4),
        ("broadcast", "root=1", 2), ("broadcast", "root=1", 4)]


_RAN = {"collective": "all_reduce", "algorithm": "ring", "nranks": 4, "nbytes": 1024,
        "time": 1e-5, "algbw": 1e8, "busbw": 1.5e8}


@pytest.mark.parametrize("error, is_failure", [
    ({"type": "AlgorithmError", "message": "no"}, True),   # a sweep record's
    ("AlgorithmError: no", True),                           # to_pandas' text
    (None, False), (float("nan"), False), ("", False),      # it ran
    ({}, False), ({"message": "no"}, False), ({"type": 3}, False),  # no error type
    (["one", "two"], False),                                # compare --json's list
])
def test_only_an_error_with_a_type_marks_a_failed_point(error, is_failure):
    """A failed point is a sweep record's {"type", "message"} or to_pandas' text; an
    object without a type name (someone else's field) is not one: the point is drawn."""
    record = {**_RAN, "error": error}
    assert is_failed_record(record) is is_failure
    points, failures = read_all([record])
    assert (len(points), len(failures)) == ((0, 1) if is_failure else (1, 0))


def test_nan_fields_of_a_record_read_back_by_pandas_are_nulls():
    """pandas reads a null of a column that also holds numbers as NaN: a NaN topology
    hash, spec, op, requested or byte list is none (no machine named, no settings, the
    params used, no hosts), not the text 'nan' nor a refusal."""
    nan = float("nan")
    record = {**_RAN, "error": None, "topology_hash": nan, "spec": nan, "op": nan,
              "root": nan, "requested": nan, "params": {"chunks": 2},
              "host_bytes_sent": nan, "bytes_sent": nan}
    points, failures = read_all([record])
    assert failures == []
    (point,) = points
    assert point.machine is None and point.spec is None and point.settings == ""
    assert point.params == {"chunks": 2}
    assert point.hosts == 0 and point.bytes_sent is None
    # a machine named only by its spec, where the hash is NaN
    points, _ = read_all([{**record, "spec": "switch:4"}])
    assert points[0].machine == "spec=switch:4" and points[0].spec == "switch:4"


def test_a_load_of_no_messages_bins_like_any_load_for_fewer_than_two_edges():
    """binned_bytes gives one bin fewer than its edges: none for one edge or none (a
    load of one message gives [] there too). A load of no messages must as well: not
    one bin of 0, nor numpy's "negative dimensions" ValueError for no edges."""
    one = LinkLoad(("a", "b"), 100.0, np.array([0.0]), np.array([1.0]), np.array([50.0]))
    empty = LinkLoad(("a", "b"), 100.0, np.zeros(0), np.zeros(0), np.zeros(0))
    for edges in ([], [0.5]):
        assert binned_bytes(one, np.array(edges)).tolist() == []
        assert binned_bytes(empty, np.array(edges)).tolist() == []
    assert binned_bytes(empty, np.array([0.0, 1.0])).tolist() == [0.0]


def test_a_comparison_title_that_is_not_text_is_refused_before_drawing():
    """title=5 raised AttributeError from the title's wrapping, once a figure was made."""
    found = _found([1 << 20, 1 << 22], [2e-4, 5e-4])
    before = plt.get_fignums()
    for title in (5, ["a"], b"x"):
        with pytest.raises(sc.InvalidInputError, match=r"^title=.* is not accepted; give a "
                                                       r"str, or None"):
            sc.plot.comparison(found, title=title)
    assert plt.get_fignums() == before


@pytest.mark.parametrize("start", [1, 3, 1000, 4097])
@pytest.mark.parametrize("octaves", [2, 9, 17, 24, 30])
@pytest.mark.parametrize("most", [2, 3, 5, 8])
def test_log2_ticks_never_label_more_than_asked_and_label_both_ends(start, octaves, most):
    """An end that is not a power of 2 got a label of its own after the step had been
    chosen for the powers alone: 9 labels for 25 sizes of 1000 x 2^k, 8 asked for."""
    from simcoll.plot.style import log2_ticks

    values = [start * 2**k for k in range(octaves + 1)]
    ticks = log2_ticks(values, most)
    assert len(ticks) <= most
    assert ticks[0] == values[0] and ticks[-1] == values[-1] and ticks == sorted(ticks)
    if len(values) > most:   # else the values themselves
        inner = ticks[1:-1]
        assert all(math.log2(t) == int(math.log2(t)) for t in inner)   # powers of 2


def test_a_dollar_sign_in_a_name_is_drawn_as_it_is():
    """'sw$^$x' as a machine's name raised matplotlib's mathtext error when the figure was
    saved; 'a$b$c' was drawn as math."""
    import io

    records = [dict(r.to_dict(), topology="sw$^$x", algorithm="a$b$c")
               for r in (sc.simulate(reference(p), "all_reduce", algorithm="ring",
                                     nbytes=1 << 20) for p in (1, 2, 4))]
    fig = scaling(records)   # one rank: a legend note naming the algorithm, escaped too
    fig.savefig(io.BytesIO(), format="png")
    ax = fig.axes[0]
    assert "sw\\$^\\$x" in ax.get_title()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[0].startswith("a\\$b\\$c") and texts[-1].endswith("(a\\$b\\$c)")
    plt.close(fig)


def test_a_barrier_timeline_title_says_no_bytes_per_rank():
    res = sc.simulate(reference(4), "barrier", algorithm="dissemination", trace=True)
    fig = timeline(res)
    title = fig.axes[0].get_title()
    assert title.startswith("barrier/dissemination on ") and "per rank" not in title
    plt.close(fig)
    res = sc.simulate(reference(4), "all_reduce", algorithm="ring", nbytes=0, trace=True)
    fig = timeline(res)
    assert ", 0 B per rank: " in fig.axes[0].get_title()
    plt.close(fig)


def test_numpy_integers_in_a_dict_record_are_rank_counts_and_sizes():
    """nranks=np.int64(4) was refused as 'expected integers >= 1'."""
    res = sc.simulate(reference(4), "all_reduce", algorithm="ring", nbytes=1 << 20)
    record = dict(res.to_dict(), nranks=np.int64(4), nbytes=np.uint32(1 << 20))
    fig = scaling([record, res.to_dict()], x="nbytes")
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [1 << 20] and list(line.get_ydata()) == [res.time * 1e6]
    plt.close(fig)


def test_a_v_collectives_model_line_takes_its_sizes_per_rank():
    """formula=True on all_gatherv passed the record's one nbytes to its model, which
    refused it: every line said 'no model'. The ring's model with p equal blocks of s
    bytes, by hand: (p - 1)(alpha + s beta), exact on the reference switch."""
    s = 1 << 16
    runs = [sc.simulate(reference(p), "all_gatherv", algorithm="ring", nbytes=[s] * p)
            for p in (2, 4, 8)]
    for records in (runs, [r.to_dict() for r in runs]):
        fig = scaling(records, formula=True, alpha=ALPHA, beta=BETA, gamma=0)
        ax = fig.axes[0]
        assert "no model" not in " ".join(t.get_text() for t in ax.get_legend().get_texts())
        (model,) = [line for line in ax.lines if line.get_gid() == "formula"]
        want = [(p - 1) * (ALPHA + s * BETA) * 1e6 for p in (2, 4, 8)]
        np.testing.assert_allclose(model.get_ydata(), want, rtol=1e-12)
        np.testing.assert_allclose(want, [r.time * 1e6 for r in runs], rtol=1e-12)
        plt.close(fig)


@pytest.mark.parametrize("splits", [["a", "b"], [2.5, 3], 5, [None, 1], [True, 1], [[1, 2]],
                                    [1, 2, 3]])
def test_a_records_sizes_that_are_not_counts_are_refused_naming_the_record(splits):
    """splits that are not element counts raised a raw TypeError or ValueError from
    formula=True's model, or were rounded down."""
    runs = [sc.simulate(reference(p), "all_gatherv", algorithm="ring", nbytes=[1 << 16] * p)
            for p in (2, 4)]
    with pytest.raises(sc.InvalidInputError, match=r"^record 0 has splits=.*; expected 2 "
                                                   r"element counts \(all_to_allv: 2 lists"):
        scaling([dict(r.to_dict(), splits=splits) for r in runs], formula=True,
                alpha=ALPHA, beta=BETA, gamma=0)


def _model_ys(fig):
    """The model's values, every formula line's (one per size per rank), in order."""
    return sorted(float(y) for line in fig.axes[0].lines if line.get_gid() == "formula"
                  for y in line.get_ydata())


def test_a_v_collectives_traffic_model_takes_its_sizes_per_rank():
    """y="bytes_sent" with formula=True gave cost.traffic the record's one nbytes where a
    v-collective's model takes its sizes per rank (the time model was fixed, the traffic
    model not): the line was left out. A ring all_gatherv of p blocks of s bytes sends
    (p - 1) s from every rank."""
    s = 1 << 16
    runs = [sc.simulate(reference(p), "all_gatherv", algorithm="ring", nbytes=[s] * p)
            for p in (2, 4, 8)]
    for records in (runs, [r.to_dict() for r in runs]):
        fig = scaling(records, y="bytes_sent", formula=True)
        assert _model_ys(fig) == [float((p - 1) * s) for p in (2, 4, 8)]
        plt.close(fig)


def test_an_all_to_allvs_model_takes_its_p_by_p_sizes_in_bytes():
    """all_to_allv's splits are a p x p table of element counts: each row's counts were
    passed as bytes, without the itemsize (4 for float32), so the model's line sat 4
    times too low. Each rank sends c float32 elements to every other: (p - 1) x 4 c
    bytes."""
    c = 1 << 12
    runs = [sc.simulate(reference(p), "all_to_allv", algorithm="direct",
                        nbytes=[[4 * c] * p for _ in range(p)]) for p in (2, 4, 8)]
    for records in (runs, [r.to_dict() for r in runs]):
        fig = scaling(records, y="bytes_sent", formula=True)
        want = [float((p - 1) * 4 * c) for p in (2, 4, 8)]
        assert _model_ys(fig) == want
        np.testing.assert_array_equal(want, [float(r.bytes_sent.max()) for r in runs])
        plt.close(fig)


def test_log2_ticks_by_hand():
    """Worked by hand (first = 2^ceil(log2 v0), last = 2^floor(log2 v-1), k octaves a
    step, an end's own label drops the power of 2 within half a step of it):

    * 1..128, at most 3: k = 3 gives 1, 8, 64; 128 is 1 octave from 64, under 3/2: 64
      goes, [1, 8, 128]. Judging "half a step" as half an octave kept 64 (4 labels) and
      went on to k = 4: [1, 16, 128].
    * 11, 16, 32, 51, at most 3: k = 1 gives 16, 32 and both ends (neither within half
      an octave): 4. k = 2, a step past the last octave, gives 16 and the ends: [11, 16,
      51]. Leaving out the steps past the span fell back to the two ends.
    * 1, 2 at most 1: no step gives fewer than the two ends, which are labelled.
    """
    assert log2_ticks([2.0**j for j in range(8)], 3) == [1.0, 8.0, 128.0]
    assert log2_ticks([11.0, 16.0, 32.0, 51.0], 3) == [11.0, 16.0, 51.0]
    assert log2_ticks([1.0, 2.0], 1) == [1.0, 2.0]
    assert log2_ticks([1.0, 2.0, 4.0], 1) == [1.0, 4.0]


def test_a_dollar_sign_stays_single_where_matplotlib_parses_no_math():
    """With text.parse_math off, matplotlib draws a $ as it is, so escaping it drew a
    backslash before it."""
    records = [dict(r.to_dict(), topology="sw$x", algorithm="a$b")
               for r in (sc.simulate(reference(p), "all_reduce", algorithm="ring",
                                     nbytes=1 << 20) for p in (2, 4))]
    with matplotlib.rc_context({"text.parse_math": False}):
        fig = scaling(records)
        ax = fig.axes[0]
        assert "sw$x" in ax.get_title() and "\\$" not in ax.get_title()
        label = ax.get_legend().get_texts()[0].get_text()
        assert label.startswith("a$b") and "\\" not in label
        plt.close(fig)


def test_sizes_given_in_decimal_units_are_labelled_in_them():
    """1 kB to 100 MB per rank were labelled 1000 B, 9.766 KiB ... 95.37 MiB; sizes that
    are whole KiB keep binary labels, and so does an axis whose ticks are powers of 2."""
    decimal = [10**k for k in range(3, 9)]
    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": p,
                "nbytes": n, "time": 1e-6 * n ** 0.5 * p} for n in decimal for p in (2, 4)]
    fig = scaling(records, x="nbytes", y="time")
    assert tick_texts(fig, "x") == ["1 kB", "10 kB", "100 kB", "1 MB", "10 MB", "100 MB"]
    labels = [line.get_label() for line in scaling(records, x="nranks", y="time").axes[0]
              .get_lines()]
    assert labels == [f"ring ({text} per rank)" for text in
                      ("1 kB", "10 kB", "100 kB", "1 MB", "10 MB", "100 MB")]
    binary = [{**r, "nbytes": r["nbytes"] // 1000 * 1024} for r in records]
    assert tick_texts(scaling(binary, x="nbytes", y="time"), "x") == [
        "1 KiB", "10 KiB", "100 KiB", "1000 KiB", "9.766 MiB", "97.66 MiB"]
    # 1000 B and 1 MiB: not all whole kB, so binary
    mixed = [{**records[0], "nbytes": 1000}, {**records[0], "nbytes": 2**20}]
    assert tick_texts(scaling(mixed, x="nbytes", y="time"), "x") == ["1000 B", "1 MiB"]


def test_a_line_breaks_where_a_sweep_point_of_it_failed():
    """recursive_doubling ran out of time at p = 3 and 5: its line was drawn straight
    from 2 to 4 (and 4 to 8), reading as values there; now it has a gap at each. A
    failure of another algorithm or size does not break it, nor one beyond its ends."""
    failed = {"collective": "all_reduce", "algorithm": "recursive_doubling", "nbytes": 64,
              "error": {"type": "RunLimitError", "message": "past until"}}
    ran = [{"collective": "all_reduce", "algorithm": "recursive_doubling", "nranks": p,
            "nbytes": 64, "time": 1e-6 * p} for p in (2, 4, 8)]
    records = [*ran, {**failed, "nranks": 3}, {**failed, "nranks": 5},
               {**failed, "nranks": 16}, {**failed, "nranks": 6, "algorithm": "ring"},
               {**failed, "nranks": 7, "nbytes": 128}]
    (line,) = lines(scaling(records, x="nranks", y="time"), "simulated")
    xs, ys = xy(line)
    assert xs == [2, 3, 4, 5, 8]
    assert [math.isnan(v) for v in ys] == [False, True, False, True, False]
    assert [v for v in ys if not math.isnan(v)] == pytest.approx([2, 4, 8])


@pytest.mark.parametrize("as_dict", [False, True])
def test_v_collective_points_of_other_splits_are_not_one_line(as_dict):
    """Balanced and one-hot-expert all_to_allv of one mean size (32 MiB a rank): a record
    replaced the other as a rerun (the balanced 295.6 us gone), Results were refused as
    'runs with other faults'; at two sizes the two workloads were joined into one line."""
    p, hidden = 8, 4096
    balanced = np.full((p, p), 512)
    skewed = np.full((p, p), 384)
    skewed[:, 0] = 4096 - 7 * 384
    topo = sc.topology.switch(p, bandwidth=100 * sc.GB, latency=1 * sc.us)

    def run(tokens):
        res = sc.simulate(topo, "all_to_allv", algorithm="direct", nbytes=tokens * hidden * 2,
                          dtype="float16")
        return res.to_dict() if as_dict else res

    with pytest.raises(sc.InvalidInputError, match=r"two all_to_allv/direct points at "
                                                   r"nbytes=33554432 on 'switch\(8\)' have "
                                                   r"other splits"):
        scaling([run(balanced), run(skewed)], x="nbytes")
    with pytest.raises(sc.InvalidInputError, match=r"at nbytes=16777216 and 33554432 split "
                                                   r"their sizes in other proportions"):
        scaling([run(balanced // 2), run(skewed)], x="nbytes")
    # one workload scaled in size is one line; across rank counts the splits differ
    (line,) = lines(scaling([run(balanced // 2), run(balanced), run(balanced * 2)],
                            x="nbytes"), "simulated")
    assert xy(line)[0] == [2**24, 2**25, 2**26]


def test_a_failure_breaks_only_its_own_line():
    """A torus(p) point failed at p = 3: the switch(p) line of the same algorithm broke
    there too; so did lines of other params, networks and element types."""
    def ran(fields):
        return [{"collective": "all_reduce", "algorithm": "ring", "nranks": p,
                 "nbytes": 64, "time": 1e-6 * p, "topology": f"switch({p})",
                 "network": "flow", "dtype": "float32", "params": {}, **fields(p)}
                for p in (2, 4)]

    failed = {"collective": "all_reduce", "algorithm": "ring", "nranks": 3, "nbytes": 64,
              "topology": "torus(3)", "network": "flow", "dtype": "float32",
              "params": {}, "error": {"type": "RunLimitError", "message": "past until"}}
    records = [*ran(lambda p: {}), *ran(lambda p: {"topology": f"torus({p})"}),
               *ran(lambda p: {"params": {"chunks": 2}}),
               *ran(lambda p: {"network": "analytical"}),
               *ran(lambda p: {"dtype": "float16"}), failed]
    fig = scaling(records, x="nranks", y="time", by="topology", legend="right")
    broken = {line.get_label(): any(math.isnan(v) for v in xy(line)[1])
              for line in lines(fig, "simulated")}
    assert [label for label, gap in broken.items() if gap] == ["torus(p) (flow, float32)"]
    assert len(broken) == 5


def test_a_faulted_line_s_label_names_its_settings_before_its_faults():
    """op=sum was written after the faults, as one of them: 'ring (faults: late rank 0
    +1e-06 s, op=sum)'."""
    topo = sc.topology.switch(4)
    runs = [sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=MIB, op="max"),
            sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=MIB,
                        faults=sc.Faults(late={0: 1e-6}))]
    labels = [line.get_label() for line in lines(scaling(runs, x="nranks"), "simulated")]
    assert sorted(labels) == ["ring (op=max)", "ring (op=sum, faults: late rank 0 +1e-06 s)"]


def test_many_decimal_sizes_are_labelled_at_sizes_of_their_own():
    """21 sizes 1-2-5 from 1 kB to 5 GB: the ends were labelled in kB and GB and the
    powers of 2 between them in KiB and MiB ('1 kB', '8 KiB', ..., '256 MiB', '1 GB');
    now at most 8 of the sizes themselves, a decade apart where the sizes allow it."""
    sizes = [m * 10**e for e in range(3, 10) for m in (1, 2, 5)]
    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": 4, "nbytes": n,
                "time": 1e-6 * (i + 1)} for i, n in enumerate(sizes)]
    assert tick_texts(scaling(records, x="nbytes", y="time"), "x") == [
        "1 kB", "10 kB", "100 kB", "1 MB", "10 MB", "100 MB", "5 GB"]


def test_to_pandas_rows_of_a_machine_with_server_hosts_plot():
    """to_pandas rows carry hosts but no host_bytes_sent: a machine with 2 server hosts
    was refused ('hosts=2; expected an integer in 0..0')."""
    pytest.importorskip("pandas")
    res = sc.sweep(lambda p: sc.topology.switch(p, servers=2), "all_reduce",
                   algorithms=["parameter_server"], ranks=[2, 4], sizes=[64], progress=False)
    rows = res.to_pandas().to_dict("records")
    assert [row["hosts"] for row in rows] == [2, 2]
    # where the record lists its endpoints, hosts counts no more of them
    with pytest.raises(sc.InvalidInputError, match=r"record 0 has hosts=3; expected an "
                                                   r"integer in 0\.\.2 \(the endpoints of "
                                                   r"its host_bytes_sent\)"):
        scaling([{**res[0].to_dict(), "hosts": 3}])
    (line,) = lines(scaling(rows, x="nranks", y="time"), "simulated")
    assert xy(line)[1] == pytest.approx([r.time * 1e6 for r in res], rel=1e-12)


def test_one_workload_cut_by_array_split_at_two_sizes_is_one_line():
    """334/333/333 and 667/667/666 elements a rank (np.array_split of 1000 and 2000) are
    one workload scaled, which the proportions check refused."""
    runs = [sc.simulate(sc.topology.switch(3), "all_gatherv", algorithm="direct",
                        nbytes=[4 * len(part) for part in np.array_split(np.zeros(n), 3)])
            for n in (1000, 2000)]
    (line,) = lines(scaling(runs, x="nbytes", y="time"), "simulated")
    assert len(xy(line)[0]) == 2


def test_titles_of_one_run_write_its_size_as_the_scaling_plot_does():
    """A 1e6-byte run: '1 MB per rank' in scaling, '976.6 KiB per rank' in the timeline
    and link plots."""
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=10**6,
                      trace=True)
    assert "1 MB per rank" in scaling([res]).axes[0].get_title()
    assert "1 MB per rank" in timeline(res).axes[0].get_title()
    assert "1 MB per rank" in link_utilization(res, sc.topology.switch(2)).axes[0].get_title()


def test_1000_b_is_1_kb_and_sizes_whole_in_both_units_stay_binary():
    """1000 B (whole kB, no whole KiB) reads 1 kB beside 100 B; 128000 B and 256000 B are
    whole kB and whole KiB too (125 and 250 KiB): nothing says they were given in kB."""
    def labels(sizes):
        records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": p,
                    "nbytes": n, "time": 1e-6 * p} for n in sizes for p in (2, 4)]
        return {line.get_label()
                for line in lines(scaling(records, x="nranks", y="time"), "simulated")}

    assert labels([100, 1000]) == {"ring (100 B per rank)", "ring (1 kB per rank)"}
    assert labels([128000, 256000]) == {"ring (125 KiB per rank)", "ring (250 KiB per rank)"}


def test_more_decimal_sizes_than_labels_are_labelled_a_log_step_apart():
    """1 to 20 kB in steps of 1 kB: 20 sizes, more than the 12 labelled one by one, so
    at most 8 labels, a label at least (20)^(1/7) = 1.534 times the one before from
    1 kB: 2, 4, 7, 11 and 17 kB, the last (17) given up for the end, 20 kB. 1-2-5 sizes
    from 1 kB to 10 GB: the 8 decades are exactly (10^7)^(1/7) = 10 apart, and each is labelled."""
    def ticks(sizes):
        records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": 4,
                    "nbytes": n, "time": 1e-6 * (i + 1)} for i, n in enumerate(sizes)]
        return tick_texts(scaling(records, x="nbytes", y="time"), "x")

    assert ticks([1000 * k for k in range(1, 21)]) == ["1 kB", "2 kB", "4 kB", "7 kB",
                                                        "11 kB", "20 kB"]
    # up to 12 sizes on a figure's own axes are each labelled: 1 to 10 kB
    assert ticks([1000 * k for k in range(1, 11)]) == [f"{k} kB" for k in range(1, 11)]
    assert ticks([m * 10**e for e in range(3, 10) for m in (1, 2, 5)] + [10**10]) == [
        "1 kB", "10 kB", "100 kB", "1 MB", "10 MB", "100 MB", "1 GB", "10 GB"]


def test_a_comparison_of_decimal_sizes_is_labelled_at_them_in_decimal_units():
    """1 kB to 100 MB, one a decade: each size labelled. 1-2-5 sizes from 1 kB to 10 MB
    (13, more than the 7 labels): a label at least (10^4)^(1/6) = 4.64 times the one
    before from 1 kB: 5, 50 and 500 kB, and 5 MB given up for the end, 10 MB."""
    def ticks(sizes):
        fig = sc.plot.comparison(_found(sizes, [20e-6 + s / 40e9 for s in sizes]))
        fig.canvas.draw()
        return [t.get_text() for t in fig.axes[1].get_xticklabels()]

    assert ticks([10**k for k in range(3, 9)]) == ["1 kB", "10 kB", "100 kB", "1 MB",
                                                   "10 MB", "100 MB"]
    assert ticks([m * 10**e for e in range(3, 7) for m in (1, 2, 5)] + [10**7]) == [
        "1 kB", "5 kB", "50 kB", "500 kB", "10 MB"]


def test_a_title_writes_its_decimal_size_and_the_faults_every_line_shares():
    records = [{"collective": "all_reduce", "algorithm": "ring", "nranks": p,
                "nbytes": 10**6, "time": 1e-6 * p} for p in (2, 4)]
    title = scaling(records, x="nranks", y="time").axes[0].get_title().replace("\n", " ")
    assert "1 MB per rank" in title and "iB" not in title
    runs = [sc.simulate(sc.topology.switch(p), "all_reduce", algorithm="ring", nbytes=MIB,
                        faults=sc.Faults(late={0: 50e-6})) for p in (2, 4)]
    title = scaling(runs, x="nranks", y="time").axes[0].get_title().replace("\n", " ")
    assert "all_reduce/ring (faults: late rank 0 +5e-05 s)" in title


def test_a_failed_link_is_named_failed_in_a_line_s_label():
    def ran(k, fields):
        return [{"collective": "all_reduce", "algorithm": "ring", "nranks": p, "nbytes": 64,
                 "time": 1e-6 * p * k, **fields} for p in (2, 4)]

    failed = {"links": [{"link": ["gpu1", "switch"], "at": 1e-06, "factor": 0.0}]}
    slow = {"links": [{"link": ["gpu1", "switch"], "at": 1e-06, "factor": 0.5}]}
    records = [*ran(1, {}), *ran(2, {"faults": failed}), *ran(3, {"faults": slow})]
    labels = {line.get_label()
              for line in lines(scaling(records, x="nranks", y="time"), "simulated")}
    assert labels == {"ring", "ring (faults: link gpu1<->switch failed at 1e-06 s)",
                      "ring (faults: link gpu1<->switch x0.5 at 1e-06 s)"}


@pytest.mark.parametrize("hosts", [2.0, np.int64(2), 2])
def test_a_record_s_hosts_as_pandas_or_numpy_writes_it_is_read_as_the_count(hosts):
    """Two server hosts and one in-network device: the busiest GPU or host sent 128 B,
    the device's 4096 B are not counted."""
    record = {"collective": "all_reduce", "algorithm": "parameter_server", "nranks": 4,
              "nbytes": 64, "time": 1e-6, "bytes_sent": [64, 64, 64, 64],
              "host_bytes_sent": [128, 96, 4096], "hosts": hosts}
    (point,), _ = read_all([record])
    assert point.hosts == 2 and type(point.hosts) is int and point.bytes_sent == 128


def _first_and_gaps(fig):
    """Each simulated line's first time (us) -> whether it has a gap (NaN)."""
    found = {}
    for line in lines(fig, "simulated"):
        ys = xy(line)[1]
        drawn = [y for y in ys if not math.isnan(y)]
        found[round(drawn[0], 6)] = len(drawn) != len(ys)
    return found


def _ring_line(k, fields):
    return [{"collective": "all_reduce", "algorithm": "ring", "nranks": p, "nbytes": 64,
             "time": 1e-6 * p * k, "topology": f"switch({p})", "network": "flow",
             "dtype": "float32", "params": {}, **fields} for p in (2, 4)]


def test_a_failure_on_the_lines_machine_breaks_no_line_of_other_params_network_or_dtype():
    """A switch(3) point of ring with no params, on the flow network, in float32, failed:
    only that line (2 and 4 us) breaks at p = 3, not those of chunks=2 (4, 8 us), the
    analytical network (6, 12 us) or float16 (10, 20 us)."""
    failed = {"collective": "all_reduce", "algorithm": "ring", "nranks": 3, "nbytes": 64,
              "topology": "switch(3)", "network": "flow", "dtype": "float32",
              "params": {}, "error": {"type": "RunLimitError", "message": "past until"}}
    records = [*_ring_line(1, {}), *_ring_line(2, {"params": {"chunks": 2}}),
               *_ring_line(3, {"network": "analytical"}),
               *_ring_line(5, {"dtype": "float16"}), failed]
    fig = scaling(records, x="nranks", y="time", by="topology", legend="right")
    assert _first_and_gaps(fig) == {2.0: True, 4.0: False, 6.0: False, 10.0: False}


def test_a_failed_point_s_params_keep_it_to_its_own_line():
    """Failures of ring with chunks=2 at p = 3, as a sweep's FailedPoint and as a record
    that names its params as requested: the chunks=2 line (4, 8 us) breaks, the line of
    no params (2, 4 us) does not."""
    from simcoll.sweep import FailedPoint

    as_point = FailedPoint("all_reduce", "ring", "flow", "switch(3)", 3, 64, "float32",
                           "SUM", None, {"chunks": 2}, "RunLimitError", "past until")
    as_record = {"collective": "all_reduce", "algorithm": "ring", "nranks": 3, "nbytes": 64,
                 "topology": "switch(3)", "network": "flow", "dtype": "float32",
                 "requested": {"chunks": 2},
                 "error": {"type": "RunLimitError", "message": "past until"}}
    for failed in (as_point, as_record):
        records = [*_ring_line(1, {}), *_ring_line(2, {"params": {"chunks": 2}}), failed]
        fig = scaling(records, x="nranks", y="time", legend="right")
        assert _first_and_gaps(fig) == {2.0: False, 4.0: True}


@pytest.mark.parametrize("edges", [[1j, 2j], {"a": 1.0}, [0.0, object()]])
def test_binned_bytes_refuses_edges_that_are_not_real_numbers(edges):
    load = LinkLoad(("a", "b"), 100.0, np.array([0.0]), np.array([1.0]), np.array([5.0]))
    with pytest.raises(sc.InvalidInputError, match="binned_bytes: edges must be finite times "
                                                   "in increasing order, in one row; got "):
        binned_bytes(load, edges)
