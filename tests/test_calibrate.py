"""simcoll.calibrate recovers constants a table was made with, and refuses bad input
before it simulates anything."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import sys

import pytest

import simcoll as sc
import simcoll.calibration
import simcoll.comparison
from simcoll.algorithms.registry import get_algorithm
from simcoll.calibration import Calibration, _check_free
from simcoll.cli import main
from simcoll.errors import (
    InvalidInputError,
    RunLimitError,
    UnknownAlgorithmError,
    UnknownCollectiveError,
)
from simcoll.nccl_tests import Measurement, NcclTestsRow, NcclTestsTable, parse
from simcoll.topology.io import save

pytest.importorskip("scipy")

BANDWIDTH, LATENCY = 100 * sc.GB, 1.5 * sc.us


def switch8(bandwidth: float, latency: float) -> sc.Topology:
    return sc.topology.switch(8, bandwidth=bandwidth, latency=latency)


def simcoll_run_table(*args: str) -> NcclTestsTable:
    """A table printed by `simcoll run` on switch(8) at the known constants, read back."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["run", "--topology", "switch:ranks=8,bandwidth=100GB/s,latency=1.5us", *args])
    return parse(out.getvalue())


@pytest.fixture(scope="module")
def table() -> NcclTestsTable:
    return simcoll_run_table("-b", "8", "-e", "1G", "-f", "8")


def test_recovers_known_constants_from_a_simcoll_table(table):
    assert table.sizes[0] == 8 and table.sizes[-1] == 2**30 and len(table) == 10
    free = {"bandwidth": (BANDWIDTH / 3, 1e9, 1e12), "latency": (LATENCY * 2.5, 1e-8, 1e-4)}
    cal = sc.calibrate(switch8, table, free=free, algorithm="ring")
    assert cal.values["bandwidth"] == pytest.approx(BANDWIDTH, rel=0.01)
    assert cal.values["latency"] == pytest.approx(LATENCY, rel=0.01)
    assert cal.initial == {"bandwidth": BANDWIDTH / 3, "latency": LATENCY * 2.5}
    assert {link.bandwidth for link in cal.topology.links} == {cal.values["bandwidth"]}
    assert {link.latency for link in cal.topology.links} == {cal.values["latency"]}
    assert cal.sizes == table.sizes
    assert cal.measured == tuple(r.out_of_place.time for r in table.rows)
    # before: the switch at the initial constants, simulated here independently
    start = switch8(BANDWIDTH / 3, LATENCY * 2.5)
    for size, before in zip(cal.sizes, cal.before):
        assert before == pytest.approx(sc.simulate(start, "all_reduce", algorithm="ring",
                                                   nbytes=size).time, rel=1e-12)
    for size, after in zip(cal.sizes, cal.after):
        assert after == pytest.approx(sc.simulate(cal.topology, "all_reduce",
                                                  algorithm="ring", nbytes=size).time,
                                      rel=1e-12)
    assert cal.error_before == pytest.approx([b / m - 1 for b, m in
                                              zip(cal.before, cal.measured)], rel=1e-12)
    assert min(cal.error_before) > 0.5          # started well off
    assert max(abs(e) for e in cal.error_after) < 0.002   # printed times have 4+ digits
    assert cal.evaluations > 0 and cal.evaluations % len(table) == 0
    assert isinstance(cal.message, str) and cal.message


def test_a_builder_name_with_fixed_arguments(table):
    free = {"bandwidth": (BANDWIDTH * 2, 1e9, 1e12), "latency": (LATENCY / 3, 1e-8, 1e-4)}
    cal = sc.calibrate("switch:ranks=8", table, free=free)
    assert cal.values["bandwidth"] == pytest.approx(BANDWIDTH, rel=0.01)
    assert cal.values["latency"] == pytest.approx(LATENCY, rel=0.01)
    assert cal.topology.nranks == 8 and cal.topology.spec.startswith("switch:")


def test_exact_table_other_collective_and_linear_bounds():
    """From exact times (not printed ones), all_gather, a constant whose lower bound is 0."""
    truth = switch8(40 * sc.GB, 3 * sc.us)
    rows = []
    for i, size in enumerate(8 * 2**k for k in (3, 7, 11, 15, 19, 23, 27)):
        t = sc.simulate(truth, "all_gather", algorithm="ring", nbytes=size // 8).time
        rows.append(NcclTestsRow(size, size // 4, "float", "none", -1,
                                 Measurement(t * 1e6, 0.0, 0.0, None), None, i + 1))
    table = NcclTestsTable(tuple(rows), "all_gather", 8)
    cal = sc.calibrate(switch8, table, free={"bandwidth": (15e9, 1e9, 1e12),
                                             "latency": (8e-6, 0.0, 1e-4)})
    assert cal.values["bandwidth"] == pytest.approx(40e9, rel=1e-4)
    assert cal.values["latency"] == pytest.approx(3e-6, rel=1e-4)
    assert max(abs(e) for e in cal.error_after) < 1e-6
    # plain floats, as the README shows them (a linear scale gave numpy's)
    assert {type(v) for v in cal.values.values()} == {float}


def test_report(table):
    cal = sc.calibrate(switch8, table.between(8, 2**20),
                       free={"bandwidth": (5e10, 1e9, 1e12), "latency": (1e-6, 1e-8, 1e-4)})
    text = cal.report()
    assert "bandwidth" in text and "latency" in text
    assert text.count("\n") == 2 + 2 + len(cal.sizes) + 3
    for size, m in zip(cal.sizes, cal.measured):
        assert f"{size:>10d}  {m * 1e6:>14.2f}" in text
    geo_before = math.exp(sum(abs(math.log(b / m)) for b, m in
                              zip(cal.before, cal.measured)) / len(cal.sizes)) - 1
    assert f"{geo_before:.1%} before" in text
    assert text.splitlines()[-1].startswith(
        f"  = exp(mean |ln(simulated / measured)|) - 1: on average the times differ by a "
        f"factor of {1 + geo_before:.3f} before, ")


def test_progress_bar_counts_the_simulations(table, capsys):
    small = table.between(2**20, 2**30)
    cal = sc.calibrate(lambda bandwidth: switch8(bandwidth, LATENCY), small,
                       free={"bandwidth": (5e10, 1e9, 1e12)}, progress=True)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    best = min(math.exp(sum(abs(math.log(s / m)) for s, m in zip(times, cal.measured))
                        / len(cal.sizes)) - 1 for times in (cal.before, cal.after))
    assert last.startswith(f"calibrate: {cal.evaluations}sim ")
    assert last.endswith(f"smallest error={best:.1%}]")
    sc.calibrate(lambda bandwidth: switch8(bandwidth, LATENCY), small,
                 free={"bandwidth": (5e10, 1e9, 1e12)}, progress=False)
    assert capsys.readouterr().err == ""


def test_worker_processes_give_the_same_fit(table):
    small = table.between(2**10, 2**30)
    free = {"bandwidth": (5e10, 1e9, 1e12), "latency": (1e-6, 1e-8, 1e-4)}
    here = sc.calibrate(switch8, small, free=free)
    spread = sc.calibrate(switch8, small, free=free, workers=2)
    assert spread.values == here.values and spread.after == here.after
    assert spread.evaluations == here.evaluations and spread.message == here.message


@pytest.fixture()
def no_simulation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("simulated before the inputs were checked")
    monkeypatch.setattr(simcoll.comparison, "simulate", refuse)


GOOD = {"bandwidth": (1e11, 1e9, 1e12), "latency": (1e-6, 1e-8, 1e-4)}


@pytest.mark.parametrize("free,message", [
    ({"bandwith": (1e11, 1e9, 1e12)}, "'bandwith' is not a parameter.*bandwidth, latency"),
    ({"bandwidth": (1e13, 1e9, 1e12)}, r"initial 1e\+13 lies outside its bounds"),
    ({"bandwidth": (1e11, 1e12, 1e9)}, "need finite low < high"),
    ({"bandwidth": (1e11, 1e9, math.inf)}, "need finite low < high"),
    ({"bandwidth": (1e11, 1e9)}, r"is not \(initial, low, high\)"),
    # True ran as the bound 1, a string as the initial value.
    ({"bandwidth": (1e11, True, 1e12)}, r"is not \(initial, low, high\), three numbers"),
    ({"bandwidth": ("1e11", 1e9, 1e12)}, r"is not \(initial, low, high\), three numbers"),
    ({}, "at least one constant"),
    # a list of pairs names a constant: its type is what is wrong
    ([("bandwidth", (1e11, 1e9, 1e12))],
     r"^free=\[\('bandwidth', \(100000000000\.0, 1000000000\.0, 1000000000000\.0\)\)\] is "
     r"a list, not a mapping; give a dict \{name: \(initial, low, high\)\}, such as "
     r"\{'bandwidth': \(50e9, 1e9, 1e12\)\} \(dict\(free\) makes one from these pairs\)$"),
    ("bandwidth", r"^free='bandwidth' is a str, not a mapping; give a dict \{name: "
                  r"\(initial, low, high\)\}, such as \{'bandwidth': \(50e9, 1e9, 1e12\)\}$"),
    ({**GOOD, "bandwidth": (1e11, -1.0, 1e12)}, r"free\['bandwidth'\]: the machine cannot be built "
                                        r"at the bound -1: bandwidth=-1.0 is not accepted"),
    ({**GOOD, "latency": (1e-6, -1e-6, 1e-4)}, r"free\['latency'\]: .* bound -1e-06: latency="),
])
def test_bad_free_constants(no_simulation, table, free, message):
    with pytest.raises(InvalidInputError, match=message):
        sc.calibrate(switch8, table, free=free)


def test_bad_tables_and_names(no_simulation, table):
    with pytest.raises(InvalidInputError, match="no rows"):
        sc.calibrate(switch8, table.between(2**40), free=GOOD)
    with pytest.raises(UnknownCollectiveError):
        sc.calibrate(switch8, table, free=GOOD, collective="allreduce")
    with pytest.raises(UnknownAlgorithmError):
        sc.calibrate(switch8, table, free=GOOD, algorithm="fastest")
    unnamed = NcclTestsTable(table.rows, None, 8)
    with pytest.raises(InvalidInputError, match="pass collective="):
        sc.calibrate(switch8, unnamed, free=GOOD)
    with pytest.raises(InvalidInputError, match="measured on 8 ranks.*has 4"):
        sc.calibrate(lambda bandwidth, latency: sc.topology.switch(4), table, free=GOOD)
    with pytest.raises(InvalidInputError, match="sizes \\[8\\] give each of the 8 ranks"):
        sc.calibrate(switch8, unnamed, free=GOOD, collective="all_gather")
    with pytest.raises(InvalidInputError, match="unknown builder 'swtich'"):
        sc.calibrate("swtich:8", table, free=GOOD)
    with pytest.raises(InvalidInputError, match="not a parameter"):
        sc.calibrate("switch:8", table, free={"speed": (1.0, 0.5, 2.0)})
    with pytest.raises(InvalidInputError, match="returned int, not a Topology"):
        sc.calibrate(lambda **kw: 3, table, free=GOOD)
    with pytest.raises(InvalidInputError, match="not int"):
        sc.calibrate(8, table, free=GOOD)
    with pytest.raises(InvalidInputError, match="seed=-1 is not accepted"):
        sc.calibrate(switch8, table, free=GOOD, seed=-1)


def test_missing_scipy_names_the_extra(monkeypatch, table, no_simulation):
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(ImportError, match=r"simcoll\[calibrate\]"):
        sc.calibrate(switch8, table, free=GOOD)


@pytest.mark.parametrize("budget", [20, 21, 50, 80])
def test_the_fit_runs_no_more_simulations_than_allowed(table, budget):
    # 10 sizes: the initial constants take 10 simulations, each trial point 10 more
    # (scipy's finite-difference Jacobian included), so a budget of 20 allows one trial.
    free = {"bandwidth": (BANDWIDTH / 3, 1e9, 1e12), "latency": (LATENCY * 2.5, 1e-8, 1e-4)}
    cal = sc.calibrate(switch8, table, free=free, max_evaluations=budget)
    assert cal.evaluations <= budget and cal.evaluations % len(table) == 0
    assert f"max_evaluations={budget}" in cal.message
    # it stops on the best point it tried, which is no worse than where it started
    cost = [sum(math.log1p(e) ** 2 for e in errors)
            for errors in (cal.error_before, cal.error_after)]
    assert cost[1] <= cost[0] * (1 + 1e-9)   # the starting point, to rounding
    for size, after in zip(cal.sizes, cal.after):
        assert after == pytest.approx(sc.simulate(cal.topology, "all_reduce",
                                                  algorithm="ring", nbytes=size).time,
                                      rel=1e-12)


@pytest.mark.parametrize("budget", [19, 0, 20.0, True, "100"])
def test_a_budget_without_a_trial_is_refused(no_simulation, table, budget):
    with pytest.raises(InvalidInputError, match=f"max_evaluations={budget!r}.*integer >= 20"):
        sc.calibrate(switch8, table, free=GOOD, max_evaluations=budget)


def test_a_robust_loss_is_not_pulled_by_a_spike():
    # Exact times of the 8-rank switch at 40 GB/s and 3 us, one of them (4 MiB) five times
    # too slow, as a one-off spike in a measured table: least squares moves the bandwidth
    # 23% to meet it halfway; Cauchy's loss, and to 1% soft L1's, keep the constants and
    # leave the spike alone (-80%: 1/5 of its time).
    truth = switch8(40 * sc.GB, 3 * sc.us)
    rows = []
    for i, size in enumerate(8 * 2**k for k in range(3, 28, 2)):
        t = sc.simulate(truth, "all_reduce", algorithm="ring", nbytes=size).time
        t *= 5 if size == 4 * 2**20 else 1
        rows.append(NcclTestsRow(size, size // 4, "float", "sum", -1,
                                 Measurement(t * 1e6, 0.0, 0.0, None), None, i + 1))
    table = NcclTestsTable(tuple(rows), "all_reduce", 8)
    free = {"bandwidth": (15e9, 1e9, 1e12), "latency": (8e-6, 1e-8, 1e-4)}
    plain = sc.calibrate(switch8, table, free=free)
    assert abs(plain.values["bandwidth"] / 40e9 - 1) > 0.1
    for loss, within in (("cauchy", 0.001), ("soft_l1", 0.01)):
        fit = sc.calibrate(switch8, table, free=free, loss=loss, loss_scale=0.05)
        assert fit.values["bandwidth"] == pytest.approx(40e9, rel=within), loss
        assert fit.values["latency"] == pytest.approx(3e-6, rel=within), loss
        spike = fit.sizes.index(4 * 2**20)
        assert fit.error_after[spike] == pytest.approx(-0.8, abs=5 * within)
        assert max(abs(e) for i, e in enumerate(fit.error_after) if i != spike) < 2 * within
    # at the default loss_scale (0.1) soft L1 bends later: the README's "under 2%"
    fit = sc.calibrate(switch8, table, free=free, loss="soft_l1")
    assert fit.values["bandwidth"] == pytest.approx(40e9, rel=0.02)


def test_constants_that_move_nothing_from_a_bound_are_left_there_and_simulated():
    """Two constants no time depends on, each started on a bound (trf moves a start on
    a bound inside by a hair, which is no move of the fit's): both were set back to
    their starts in a point never simulated, and the fit ended in a KeyError."""
    def two_ignored(bandwidth: float, reduce_bandwidth: float, latency: float) -> sc.Topology:
        return sc.topology.switch(P4, bandwidth=TRUE_BANDWIDTH, latency=latency)

    cal = sc.calibrate(two_ignored, table4(),
                       free={"bandwidth": (1 * sc.GB, 1 * sc.GB, 400 * sc.GB),
                             "reduce_bandwidth": (400 * sc.GB, 1 * sc.GB, 400 * sc.GB),
                             "latency": (5 * sc.us, 10 * sc.ns, 100 * sc.us)})
    assert cal.values["latency"] == pytest.approx(LINK_LATENCY, rel=1e-6)
    assert (cal.values["bandwidth"], cal.values["reduce_bandwidth"]) == (1e9, 400e9)
    assert cal.not_fitted == ("bandwidth", "reduce_bandwidth")


def test_a_log_scale_across_more_than_floats_range_still_fits():
    """A latency bounded below by 1e-320 (a subnormal): high / low is past float's range,
    and the log scale's 1 + ln(value / low) overflowed, ending the fit in numpy's
    ValueError (before the log scale put 1 at the low bound it fitted)."""
    cal = sc.calibrate(ring_switch, table4(),
                       free={"bandwidth": (50 * sc.GB, 1 * sc.GB, 400 * sc.GB),
                             "latency": (5 * sc.us, 1e-320, 1e-4)}, max_evaluations=400)
    assert cal.values["bandwidth"] == pytest.approx(TRUE_BANDWIDTH, rel=1e-6)
    assert cal.values["latency"] == pytest.approx(LINK_LATENCY, rel=1e-6)


def test_a_fit_from_nccls_defaults_leaves_them_at_once():
    """launch_overhead starting at 0 (its lower bound) and step_latency_scale at 1 put the
    fit's variables at 0, where scipy's trf starts with a trust region of that size (a
    hair, where a start on a bound is moved): the fit took 880 simulations to recover
    them on a 4-GPU switch, and within 300 stopped at a launch of 5e-9 s, 18.6% off at
    some size. The log scale now puts 1 at its low bound: the step scale starts at
    1 + ln(1 / 0.05), and the trust region with it."""
    machine = sc.topology.switch(4, bandwidth=50e9, latency=2e-6)
    rows = []
    for i, size in enumerate(2**k for k in range(10, 27, 4)):
        t = sc.simulate(machine, "all_reduce", algorithm="nccl", nbytes=size,
                        launch_overhead=7e-6, step_latency_scale=1.3).time
        rows.append(NcclTestsRow(size, size // 4, "float", "sum", -1,
                                 Measurement(t * 1e6, 0.0, 0.0, None), None, i + 1))
    table = NcclTestsTable(tuple(rows), "all_reduce", 4)
    fit = sc.calibrate(lambda: machine, table, algorithm="nccl", max_evaluations=300,
                       free={"launch_overhead": (0.0, 0.0, 1e-4),
                             "step_latency_scale": (1.0, 0.05, 20.0)})
    assert fit.evaluations < 300
    assert fit.values["launch_overhead"] == pytest.approx(7e-6, rel=1e-3)
    assert fit.values["step_latency_scale"] == pytest.approx(1.3, rel=1e-3)


@pytest.mark.parametrize("kwargs,message", [
    ({"loss": "l1"}, "loss='l1' is not accepted; use one of 'linear', 'soft_l1'"),
    ({"loss_scale": 0.0}, "loss_scale=0.0 is not accepted; use a finite number > 0"),
    ({"loss_scale": math.inf}, "loss_scale=inf is not accepted"),
    ({"loss_scale": "0.1"}, "loss_scale='0.1' is not accepted"),
    ({"progress": "yes"}, "progress='yes' is not accepted; use True, False or None"),
    ({"workers": 0}, "workers=0 is not accepted; use an integer >= 1"),
])
def test_bad_losses_are_refused(no_simulation, table, kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        sc.calibrate(switch8, table, free=GOOD, **kwargs)


# A 4-rank switch whose ring all_reduce takes 2 (p - 1) (2 latencies + size / p / bandwidth)
P4, TRUE_BANDWIDTH, LINK_LATENCY = 4, 40 * sc.GB, 2 * sc.us
SIZES4 = (4096, 1 << 20, 64 << 20)


def ring_time(size: int, bandwidth: float = TRUE_BANDWIDTH) -> float:
    return 2 * (P4 - 1) * (2 * LINK_LATENCY + size / P4 / bandwidth)


def table4(wrong: dict[int, float] | None = None, slower: dict[int, float] | None = None
           ) -> NcclTestsTable:
    """The hand-worked ring times at 40 GB/s, ``#wrong`` and a slowdown where given."""
    wrong, slower = wrong or {}, slower or {}
    return NcclTestsTable(tuple(
        NcclTestsRow(size, size // 4, "float", "sum", -1,
                     Measurement(ring_time(size) * slower.get(size, 1.0) * 1e6, 0.0, 0.0,
                                 wrong.get(size, 0.0)), None, i + 1)
        for i, size in enumerate(SIZES4)), "all_reduce", P4)


def behind_a_48_gbs_link(bandwidth: float) -> sc.Topology:
    """The bandwidth moves the time only below 48 GB/s, as a NIC behind a PCIe link does."""
    return sc.topology.switch(P4, bandwidth=min(bandwidth, 48 * sc.GB), latency=LINK_LATENCY)


def test_a_constant_that_moves_no_time_at_its_start_is_probed_and_fitted():
    cal = sc.calibrate(behind_a_48_gbs_link, table4(),
                       free={"bandwidth": (50 * sc.GB, 1 * sc.GB, 400 * sc.GB)})
    assert cal.values["bandwidth"] == pytest.approx(TRUE_BANDWIDTH, rel=1e-6)
    assert max(abs(e) for e in cal.error_after) < 1e-9
    # 8 values evenly spaced on its log scale: the 5th, 1 GB/s x 400 ** (4 / 7), is the
    # best of those that move the time (the 6th and up are above 48 GB/s)
    start = 1e9 * 400 ** (4 / 7)
    assert cal.unmoved == ("bandwidth",) and cal.not_fitted == ()
    assert cal.probed == {"bandwidth": pytest.approx(start, rel=1e-9)}
    assert (f"note: bandwidth moved no simulated time at 5e+10, where it started (another "
            f"part of the machine is the bottleneck there, it acts only past a threshold, "
            f"or no run uses it); fitted again from {start:.4g}, the best of 8 values probed "
            f"across its bounds") \
        in cal.report().splitlines()
    assert "then one from probing bandwidth" in cal.message


def _ignores_bandwidth(bandwidth: float, latency: float) -> sc.Topology:
    """A 4-GPU switch whose bandwidth is the table's whatever ``bandwidth`` says."""
    return sc.topology.switch(P4, bandwidth=TRUE_BANDWIDTH, latency=latency)


def test_a_constant_that_moves_no_time_anywhere_is_reported_as_not_fitted():
    cal = sc.calibrate(_ignores_bandwidth, table4(),
                       free={"bandwidth": (50 * sc.GB, 1 * sc.GB, 400 * sc.GB),
                             "latency": (5 * sc.us, 10 * sc.ns, 100 * sc.us)})
    assert cal.values["latency"] == pytest.approx(LINK_LATENCY, rel=1e-6)
    assert cal.values["bandwidth"] == pytest.approx(50 * sc.GB, rel=1e-15)
    assert cal.unmoved == cal.not_fitted == ("bandwidth",) and cal.probed == {}
    lines = cal.report().splitlines()
    assert lines[1].split() == ["bandwidth", "5e+10", "5e+10", "not", "fitted:", "moved",
                                "no", "simulated", "time"]
    assert lines[2].split()[0] == "latency" and len(lines[2].split()) == 3
    assert ("note: bandwidth moved no simulated time at 5e+10, where it started (another "
            "part of the machine is the bottleneck there, it acts only past a threshold, or "
            "no run uses it): not fitted; start it elsewhere or use starts > 1") in lines


def test_a_constant_the_fit_wanders_off_with_no_slope_is_still_not_fitted(monkeypatch):
    """scipy's trf can move a constant along a direction of no slope (a dgx_h100(1)'s
    nic_bandwidth, which one node never uses, ended on a bound as "fitted"): only a
    constant that ended exactly where it started counted as unmoved. Here the fit is
    made to wander: each fit moves bandwidth, which no time depends on, to 3.1e11; it is
    still found to move nothing, set back to where it started and reported not fitted."""
    import scipy.optimize

    real = scipy.optimize.least_squares

    def wandering(fun, x0, **kwargs):
        fit = real(fun, x0, **kwargs)
        fit.x = fit.x.copy()
        fit.x[0] = x0[0] + 0.7 * (kwargs["bounds"][1][0] - x0[0])
        return fit

    monkeypatch.setattr(scipy.optimize, "least_squares", wandering)

    cal = sc.calibrate(_ignores_bandwidth, table4(),
                       free={"bandwidth": (50 * sc.GB, 1 * sc.GB, 400 * sc.GB),
                             "latency": (5 * sc.us, 10 * sc.ns, 100 * sc.us)})
    assert cal.values["latency"] == pytest.approx(LINK_LATENCY, rel=1e-6)
    assert cal.values["bandwidth"] == 50 * sc.GB
    assert cal.unmoved == cal.not_fitted == ("bandwidth",) and cal.on_bound == {}


@pytest.mark.parametrize("free,side,bound", [
    ((20 * sc.GB, 1 * sc.GB, 30 * sc.GB), "upper", "3e+10"),
    ((50 * sc.GB, 45 * sc.GB, 100 * sc.GB), "lower", "4.5e+10"),
])
def test_a_constant_that_ends_on_a_bound_is_named(free, side, bound):
    cal = sc.calibrate(lambda bandwidth: sc.topology.switch(P4, bandwidth=bandwidth,
                                                            latency=LINK_LATENCY),
                       table4(), free={"bandwidth": free})
    assert cal.values["bandwidth"] == pytest.approx(float(bound), rel=1e-9)
    assert cal.on_bound == {"bandwidth": side} and cal.unmoved == ()
    lines = cal.report().splitlines()
    assert lines[1].endswith(f"   on its {side} bound")
    assert lines[2] == f"note: bandwidth ended on its {side} bound {bound}: the best fit may " \
                       f"lie beyond it"


def test_sizes_with_wrong_values_are_left_out_of_the_fit():
    # the 1 MiB row is three times too slow and has #wrong 7: the fit never sees it
    cal = sc.calibrate(lambda bandwidth: sc.topology.switch(P4, bandwidth=bandwidth,
                                                            latency=LINK_LATENCY),
                       table4(wrong={1 << 20: 7.0}, slower={1 << 20: 3.0}),
                       free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 400 * sc.GB)})
    assert cal.sizes == (4096, 64 << 20) and cal.left_out == (1 << 20,)
    assert cal.values["bandwidth"] == pytest.approx(TRUE_BANDWIDTH, rel=1e-6)
    assert ("note: nccl-tests found wrong values (#wrong > 0) at size 1048576: that run "
            "computed a wrong result there; left out of the fit") in cal.report().splitlines()


def test_a_table_whose_every_row_is_wrong_is_refused(no_simulation):
    with pytest.raises(InvalidInputError, match="every row of the table has #wrong > 0"):
        sc.calibrate(lambda bandwidth: sc.topology.switch(P4, bandwidth=bandwidth),
                     table4(wrong=dict.fromkeys(SIZES4, 1.0)),
                     free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 400 * sc.GB)})


def _builds_n(n: int, bandwidth: float) -> sc.Topology:
    return sc.topology.switch(n, bandwidth=bandwidth)


@pytest.mark.parametrize("build,free,message", [
    ("dgx_h100:nodes=1", {"network_kind": (1, 0, 2)},
     "calibrate fits real-valued constants; network_kind is a str parameter of the "
     "machine's builder"),
    ("dgx_h100:nodes=1", {"leaf_radix": (40, 8, 64)},
     "calibrate fits real-valued constants; leaf_radix is an int parameter"),
    ("dgx_h100:nodes=2", {"nodes": (2, 1, 4)},
     "calibrate fits real-valued constants; nodes is an int parameter"),
    ("dgx_h100:nodes=1", {"sharp": (0, 0, 1)},
     "calibrate fits real-valued constants; sharp is a bool parameter"),
    (_builds_n, {"n": (8, 2, 16)}, "calibrate fits real-valued constants; n is an int "
                                   "parameter"),
    # ring's chunks is an Int: refused as such, not as no parameter at all
    ("switch:ranks=8", {"chunks": (1, 1, 8)},
     r"^calibrate fits real-valued constants; chunks is an int parameter of the algorithm "
     r"\(ring's chunks takes an integer >= 1\)$"),
    (switch8, {"bandwidth": (1e11, 1e9, 1e12), "chunks": (2.0, 1.0, 8.0)},
     r"^calibrate fits real-valued constants; chunks is an int parameter of the algorithm"),
    ("switch:ranks=8,bandwidth=1GB/s", {"bandwidth": (1e11, 1e9, 1e12)},
     "free constant 'bandwidth' is fixed in 'switch:ranks=8,bandwidth=1GB/s' too"),
    (switch8, {"bandwidth": (math.nan, 1e9, 1e12)},
     r"free\['bandwidth'\]: initial nan is not a finite number"),
])
def test_constants_that_cannot_be_fitted_are_refused(no_simulation, table, build, free,
                                                     message):
    with pytest.raises(InvalidInputError, match=message):
        sc.calibrate(build, table, free=free)


def test_a_topology_file_frees_only_the_algorithms_constants(no_simulation, table, tmp_path):
    path = tmp_path / "switch8.json"
    save(switch8(BANDWIDTH, LATENCY), path)
    with pytest.raises(InvalidInputError, match=(
            f"free constant 'bandwidth': with a topology file \\({path}\\) only the "
            f"algorithm's constants can be freed \\(it has none\\)")):
        sc.calibrate(str(path), table, free=GOOD)
    with pytest.raises(InvalidInputError, match=(
            "only the algorithm's constants can be freed \\(launch_overhead, "
            "step_latency_scale\\)")):
        sc.calibrate(str(path), table, free=GOOD, algorithm="nccl")
    # the algorithm's constants are fitted on the file's machine
    with pytest.raises(AssertionError, match="simulated before"):
        sc.calibrate(str(path), table, free={"launch_overhead": (1e-6, 0, 1e-4)},
                     algorithm="nccl")


def test_a_collective_other_than_the_tables_is_refused(no_simulation, table):
    with pytest.raises(InvalidInputError, match="collective 'all_gather' was given, but the "
                                                "table measured 'all_reduce'"):
        sc.calibrate(switch8, table, free=GOOD, collective="all_gather")


def ring_switch(bandwidth: float, latency: float = LINK_LATENCY) -> sc.Topology:
    return sc.topology.switch(P4, bandwidth=bandwidth, latency=latency)


def test_a_point_past_the_run_limits_is_the_worst_fit_not_the_end():
    """64 MiB of ring all_reduce on 4 ranks sends 6 x 16 MiB in turn: below some 100 B/s
    it runs past the simulated-time limit of 1e6 s. A random start there (seed 0's
    second) counts as the worst fit, and the fit from 20 GB/s still lands on 40 GB/s."""
    cal = sc.calibrate(ring_switch, table4(), free={"bandwidth": (20 * sc.GB, 1.0, 1e12)},
                       starts=4, seed=0)
    assert cal.values["bandwidth"] == pytest.approx(TRUE_BANDWIDTH, rel=1e-6)
    assert cal.unsimulated and all(p["bandwidth"] < 100 for p in cal.unsimulated)
    first = cal.unsimulated[0]["bandwidth"]
    assert (f"note: {len(cal.unsimulated)} trial point(s) could not be simulated within "
            f"simcoll's run limits (the first at bandwidth={first:.4g}) and counted as the "
            f"worst fit") in cal.report().splitlines()


def test_a_fit_whose_every_point_is_past_the_run_limits_names_them():
    with pytest.raises(RunLimitError, match=(
            r"no point the fit tried could be simulated within simcoll's run limits: \d+ "
            r"tried, the first at bandwidth=5, the last at bandwidth=.*simulated-time "
            r"limit")):
        sc.calibrate(ring_switch, table4(), free={"bandwidth": (5.0, 1.0, 10.0)})


def test_a_constant_near_its_bound_but_fitted_inside_is_not_on_it():
    """Bounds of 0 and 1e5 s: 2 us is 2e-11 of the range, yet the fit lands there, not
    on 0 (the table's latency), and says nothing of a bound."""
    cal = sc.calibrate(lambda latency: ring_switch(TRUE_BANDWIDTH, latency), table4(),
                       free={"latency": (5 * sc.us, 0.0, 1e5)})
    assert cal.values["latency"] == pytest.approx(LINK_LATENCY, rel=1e-6)
    assert cal.on_bound == {} and not any("bound" in note for note in cal.notes)


def test_a_constant_pushed_against_its_bound_ends_on_it():
    """The builder adds 3 us to the latency fitted, the table's is 2 us: the best fit
    lies at -1 us, beyond the bound 0, and the fit ends on 0 and says so."""
    cal = sc.calibrate(lambda latency: ring_switch(TRUE_BANDWIDTH, 1.5 * LINK_LATENCY + latency),
                       table4(), free={"latency": (1 * sc.us, 0.0, 100 * sc.us)})
    assert cal.values["latency"] == 0.0 and cal.on_bound == {"latency": "lower"}
    assert ("note: latency ended on its lower bound 0: the best fit may lie beyond it"
            in cal.report().splitlines())


def test_fewer_sizes_than_free_constants_are_named():
    one = dataclasses.replace(table4(), rows=table4().rows[1:2])
    cal = sc.calibrate(ring_switch, one, free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 1e12),
                                               "latency": (5 * sc.us, 10 * sc.ns, 1e-4)})
    assert cal.undetermined == 1 and max(abs(e) for e in cal.error_after) < 1e-9
    assert cal.traded_off == ("bandwidth", "latency")
    assert any(note.startswith("note: the sizes fitted (1) do not pin down the 2 free "
                               "constants") for note in cal.notes)
    both = sc.calibrate(ring_switch, table4(), free={
        "bandwidth": (20 * sc.GB, 1 * sc.GB, 1e12), "latency": (5 * sc.us, 10 * sc.ns, 1e-4)})
    assert both.undetermined == 0


def test_two_constants_that_act_alike_at_every_size_are_named_as_traded_off():
    """A ring all_reduce's p - 1 reducing steps each move n / p over a link and reduce
    n / p, so the time is (p - 1) n / p (2 / bandwidth + 1 / reduce_bandwidth) plus
    latencies: every pair on 2 / B + 1 / R = 2 / 40 GB/s fits the table alike. The
    fit's finite-difference Jacobian still showed ~1e-8 of its largest singular value
    there, which counted as a determined direction: no note, undetermined 0."""
    def build(bandwidth: float, reduce_bandwidth: float) -> sc.Topology:
        return sc.topology.switch(P4, bandwidth=bandwidth, latency=LINK_LATENCY,
                                  reduce_bandwidth=reduce_bandwidth)

    cal = sc.calibrate(build, table4(), free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 1e12),
                                              "reduce_bandwidth": (100 * sc.GB, 1 * sc.GB,
                                                                   1e15)})
    b, r = cal.values["bandwidth"], cal.values["reduce_bandwidth"]
    assert 2 / b + 1 / r == pytest.approx(2 / TRUE_BANDWIDTH, rel=1e-6)
    assert cal.undetermined == 1 and cal.traded_off == ("bandwidth", "reduce_bandwidth")
    assert ("note: the sizes fitted (3) do not pin down the 2 free constants: 1 "
            "combination(s) of bandwidth, reduce_bandwidth move no simulated time where "
            "the fit ended") in " ".join(cal.notes)
    # another pair on the line gives the table's times as well
    other = build(60 * sc.GB, 1 / (2 / TRUE_BANDWIDTH - 2 / (60 * sc.GB)))
    for size in SIZES4:
        res = sc.simulate(other, "all_reduce", algorithm="ring", nbytes=size)
        assert res.time == pytest.approx(ring_time(size), rel=1e-9)
    # one constant alone is determined
    alone = sc.calibrate(lambda bandwidth: build(bandwidth, 1e15), table4(),
                         free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 1e12)})
    assert alone.undetermined == 0 and alone.traded_off == ()


@pytest.mark.parametrize("loss", ["linear", "huber", "cauchy"])
def test_constants_that_act_differently_are_determined_whatever_the_loss_or_scale(loss):
    """Bandwidth and latency move the three sizes' times differently (the 4 KiB one is
    mostly latency, the 64 MiB one bandwidth), so both are determined. Judged on
    scipy's Jacobian as returned, they were not: a robust loss scales the row of a size
    missed by more than loss_scale by ~1.5e-8 (here the 4 KiB one, the latency held 50%
    above the table's by its bound), and a linear-scale constant over a wide range (a
    latency bound of 0 to 100 s) makes its column ~1e8 times the other's."""
    for low, high in ((3 * sc.us, 1e-4), (0.0, 100.0)):
        cal = sc.calibrate(ring_switch, table4(), loss=loss, free={
            "bandwidth": (20 * sc.GB, 1 * sc.GB, 1e12), "latency": (5 * sc.us, low, high)})
        assert cal.undetermined == 0 and cal.traded_off == (), (low, high)
        assert not any("do not pin down" in note for note in cal.notes)


def test_a_size_of_eleven_digits_keeps_the_columns():
    sizes = (1 << 20, 16 << 30)     # 17179869184
    rows = tuple(NcclTestsRow(s, s // 4, "float", "sum", -1,
                              Measurement(ring_time(s) * 1e6, 0.0, 0.0, 0.0), None, i + 1)
                 for i, s in enumerate(sizes))
    cal = sc.calibrate(ring_switch, NcclTestsTable(rows, "all_reduce", P4),
                       free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 1e12)})
    lines = cal.report().splitlines()
    title = next(i for i, line in enumerate(lines) if "measured (us)" in line)
    # the size column 11 wide, the others where they were
    assert [line[:13] for line in lines[title:title + 3]] == [
        "       size  ", "    1048576  ", "17179869184  "]
    assert len(lines[title + 1]) == len(lines[title + 2]) == len(lines[title]) - 1


def test_a_table_of_two_types_fits_the_rows_of_the_type_without_wrong_values():
    """-d all: the half rows had #wrong at every size (and took three times as long), the
    float rows none. The fit left out every size, float rows with the half ones, and
    refused with "the table has no rows"; it leaves out the half rows alone."""
    correct, wrong = table4(), table4(wrong=dict.fromkeys(SIZES4, 5.0),
                                      slower=dict.fromkeys(SIZES4, 3.0))
    halves = tuple(dataclasses.replace(r, type="half", count=r.size // 2) for r in wrong.rows)
    both = dataclasses.replace(correct, rows=tuple(r for pair in zip(correct.rows, halves)
                                                   for r in pair))
    cal = sc.calibrate(lambda bandwidth: sc.topology.switch(P4, bandwidth=bandwidth,
                                                            latency=LINK_LATENCY),
                       both, free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 400 * sc.GB)})
    assert cal.values["bandwidth"] == pytest.approx(TRUE_BANDWIDTH, rel=1e-6)
    assert cal.sizes == cal.left_out == SIZES4
    assert cal.settings == (("float", "sum", -1),) * 3
    assert cal.left_out_settings == (("half", "sum", -1),) * 3
    lines = cal.report().splitlines()
    assert ("note: nccl-tests found wrong values (#wrong > 0) at sizes 4096 (half sum -), "
            "1048576 (half sum -), 67108864 (half sum -): that run computed a wrong result "
            "there; left out of the fit") in lines
    head = [i for i, line in enumerate(lines) if line.split()[:1] == ["size"]][0]
    assert lines[head].split()[:4] == ["size", "type", "redop", "root"]
    assert [line.split()[:4] for line in lines[head + 1:head + 4]] == [
        [str(size), "float", "sum", "-"] for size in SIZES4]


def _ring_table(topology: sc.Topology) -> NcclTestsTable:
    rows = []
    for i, size in enumerate(2**k for k in range(10, 27, 2)):
        t = sc.simulate(topology, "all_reduce", algorithm="ring", nbytes=size).time
        rows.append(NcclTestsRow(size, size // 4, "float", "sum", -1,
                                 Measurement(t * 1e6, size / t / 1e9, 0.0, 0), None, i + 1))
    return NcclTestsTable(tuple(rows), collective="all_reduce", nranks=topology.nranks)


@pytest.mark.parametrize("server", [(1e10, 1e9, 1e11), (1e9, 1e9, 1e11), (1e11, 1e9, 1e11)])
def test_a_constant_no_time_depends_on_is_not_fitted_wherever_it_starts(server):
    # switch(8) has no servers: server_bandwidth moves no time. Started beside 20 GB/s and
    # 5 us, whose round trip through the fit's log scale is off by an ulp, it got a false
    # slope from times simulated at the unrounded start and was "fitted" to 6.4 GB/s;
    # started on a bound, scipy moved it inside and it was reported as ended on it.
    table = _ring_table(sc.topology.switch(8, bandwidth=50 * sc.GB, latency=2 * sc.us))
    assert math.exp(math.log(20e9)) != 20e9 or math.exp(math.log(5e-6)) != 5e-6
    cal = sc.calibrate("switch:ranks=8", table, algorithm="ring",
                       free={"bandwidth": (20e9, 1e9, 1e12), "latency": (5e-6, 1e-8, 1e-4),
                             "server_bandwidth": server})
    assert cal.unmoved == cal.not_fitted == ("server_bandwidth",)
    assert cal.values["server_bandwidth"] == server[0] and cal.on_bound == {}
    assert cal.values["bandwidth"] == pytest.approx(50e9, rel=1e-6)
    assert cal.values["latency"] == pytest.approx(2e-6, rel=1e-6)


pytest.importorskip("scipy")

# A 4-rank switch whose ring all_reduce takes 2 (p - 1) (2 latencies + size / p / bandwidth).
_MUT_P, _MUT_LATENCY, _MUT_BANDWIDTH = 4, 2 * sc.us, 40 * sc.GB
_MUT_SIZES = (4096, 1 << 20, 64 << 20)


def _mut_table(bandwidth=_MUT_BANDWIDTH):
    """The hand-worked ring times at ``bandwidth``, as a table."""
    return NcclTestsTable(tuple(
        NcclTestsRow(size, size // 4, "float", "sum", -1,
                     Measurement(2 * (_MUT_P - 1) * (2 * _MUT_LATENCY + size / _MUT_P
                                                      / bandwidth) * 1e6, 0.0, 0.0, 0.0),
                     None, i + 1)
        for i, size in enumerate(_MUT_SIZES)), "all_reduce", _MUT_P)


def _mut_ignores_bandwidth(bandwidth, latency):
    return sc.topology.switch(_MUT_P, bandwidth=_MUT_BANDWIDTH, latency=latency)


_MUT_FREE = {"bandwidth": (50 * sc.GB, 1 * sc.GB, 400 * sc.GB),
             "latency": (5 * sc.us, 10 * sc.ns, 100 * sc.us)}


def test_a_constant_fitted_into_a_range_of_no_slope_is_fitted_not_unmoved():
    """The bandwidth moves the time only below 48 GB/s (a NIC behind a PCIe link) and the
    table was made at 48 GB/s: from 20 GB/s the fit raises it until the time stops
    moving, so it ends with a zero slope, but it moved the time on the way (set back to
    20 GB/s the times are 2.4 times as long at 64 MiB): it is fitted, not a constant that
    moved no time, and nothing is probed."""
    def behind_a_48_gbs_link(bandwidth):
        return sc.topology.switch(_MUT_P, bandwidth=min(bandwidth, 48 * sc.GB),
                                  latency=_MUT_LATENCY)

    cal = sc.calibrate(behind_a_48_gbs_link, _mut_table(48 * sc.GB),
                       free={"bandwidth": (20 * sc.GB, 1 * sc.GB, 400 * sc.GB)})
    assert cal.values["bandwidth"] >= 48 * sc.GB * (1 - 1e-9)
    assert max(abs(e) for e in cal.error_after) < 1e-9
    assert cal.unmoved == () and cal.not_fitted == () and cal.probed == {}
    assert "probing" not in cal.message


def _mut_wander_from_the_start(monkeypatch, latency_nudge=0.0):
    """scipy's trf made to start each fit with bandwidth (the first variable, which no
    time depends on) 70% of the way to its upper bound, so every point it tries has it
    there; ``latency_nudge`` moves the latency of the point it returns by that much."""
    import scipy.optimize

    real = scipy.optimize.least_squares

    def wandering(fun, x0, **kwargs):
        x0 = x0.copy()
        x0[0] = x0[0] + 0.7 * (kwargs["bounds"][1][0] - x0[0])
        fit = real(fun, x0, **kwargs)
        fit.x = fit.x.copy()
        fit.x[1] += latency_nudge
        return fit

    monkeypatch.setattr(scipy.optimize, "least_squares", wandering)


def test_the_best_point_tried_with_a_constant_wandered_off_is_set_back(monkeypatch):
    """Every point the fit tried has bandwidth (no time depends on it) at 2.1e11 (70% of
    the way to 4e11 on its log scale from 5e10), the best one too: bandwidth is unmoved
    and set back to where it started, 5e10, not reported as fitted at 2.1e11."""
    _mut_wander_from_the_start(monkeypatch)
    cal = sc.calibrate(_mut_ignores_bandwidth, _mut_table(), free=_MUT_FREE)
    assert cal.values["latency"] == pytest.approx(_MUT_LATENCY, rel=1e-6)
    assert cal.values["bandwidth"] == 50 * sc.GB
    assert cal.unmoved == cal.not_fitted == ("bandwidth",)
    assert cal.topology.links[0].bandwidth == _MUT_BANDWIDTH


def test_a_budget_spent_before_a_wandered_constant_is_set_back_still_returns(monkeypatch):
    """As above, with the point the fit returns a hair off the best one it tried, so
    setting bandwidth back at the best point takes one more trial point: with a budget
    that ends just before it, calibrate returns the best point tried (within the budget)
    rather than raising its internal out-of-evaluations signal."""
    _mut_wander_from_the_start(monkeypatch, latency_nudge=1e-3)
    whole = sc.calibrate(_mut_ignores_bandwidth, _mut_table(), free=_MUT_FREE)
    budget = whole.evaluations - 3   # 3 sizes: one trial point fewer
    cal = sc.calibrate(_mut_ignores_bandwidth, _mut_table(), free=_MUT_FREE,
                       max_evaluations=budget)
    assert cal.evaluations <= budget
    assert cal.values["latency"] == pytest.approx(_MUT_LATENCY, rel=1e-6)
    assert "bandwidth" in cal.unmoved


def test_a_log_scale_constant_starting_on_its_lower_bound_is_fitted_within_a_small_budget():
    """The bandwidth starts on its lower bound, 1 GB/s (bounds 1 to 400 GB/s, a log
    scale), and the table was made at 40 GB/s: the fit's variable at that bound must not
    be 0 (trf moves a start on a bound a hair inside and starts with a trust region the
    size of the starting point, so it would crawl from a hair's width: still at 1 GB/s
    after 60 simulations); it recovers 40 GB/s within 60 simulations (20 trial points)."""
    def switch4(bandwidth):
        return sc.topology.switch(_MUT_P, bandwidth=bandwidth, latency=_MUT_LATENCY)

    cal = sc.calibrate(switch4, _mut_table(), max_evaluations=60,
                       free={"bandwidth": (1 * sc.GB, 1 * sc.GB, 400 * sc.GB)})
    assert cal.values["bandwidth"] == pytest.approx(_MUT_BANDWIDTH, rel=1e-6)
    assert max(abs(e) for e in cal.error_after) < 1e-9


def test_starts_past_max_evaluations_are_refused(no_simulation, table):
    # each start runs one simulation at least: 1001 starts cannot fit 1000 evaluations
    with pytest.raises(InvalidInputError, match=r"^starts=1001 is not accepted; use an "
                                                r"integer in 1\.\.1000"):
        sc.calibrate(switch8, table, free=GOOD, max_evaluations=1000, starts=1001)  # noqa: F821


def test_a_loss_scale_past_floats_range_is_refused(no_simulation, table):
    # 10^400 < math.inf is True for a Python int: only the huge() check refuses it
    with pytest.raises(InvalidInputError, match=r"^loss_scale=10000000\.\.\.0000 \(401 "
                                                r"digits\) is not accepted; use a finite"):
        sc.calibrate(switch8, table, free=GOOD, loss="soft_l1", loss_scale=10**400)  # noqa: F821


def test_mut_the_report_writes_each_constant_in_its_kinds_units(table):
    """The constants' lines: initial to 4 significant digits, fitted to 6, a rate in
    GB/s and the like and a time in us where ``kinds`` says so, else plain numbers
    (50.00123e9 -> 50GB/s or 5e+10; 100.0023456e9 -> 100.002GB/s or 1.00002e+11;
    1.234567e-6 -> 1.235us or 1.235e-06; 1.0000612e-6 -> 1.00006us or 1.00006e-06)."""
    cal = sc.calibrate(switch8, table.between(8, 2**20),
                       free={"bandwidth": (5e10, 1e9, 1e12), "latency": (1e-6, 1e-8, 1e-4)})
    cal = dataclasses.replace(cal, initial={"bandwidth": 50.00123e9, "latency": 1.234567e-6},
                              values={"bandwidth": 100.0023456e9, "latency": 1.0000612e-6})

    def constants(text):
        return {line.split()[0]: line.split()[1:3] for line in text.splitlines()[1:3]}

    assert constants(cal.report({"bandwidth": "rate", "latency": "time"})) == {
        "bandwidth": ["50GB/s", "100.002GB/s"], "latency": ["1.235us", "1.00006us"]}
    assert constants(cal.report()) == {"bandwidth": ["5e+10", "1.00002e+11"],
                                       "latency": ["1.235e-06", "1.00006e-06"]}


@pytest.mark.parametrize("loss", ["linear", "soft_l1", "huber", "cauchy"])
def test_the_jacobian_is_recovered_from_scipys_robust_loss_weighting(loss):
    """scipy's least_squares returns its Jacobian with row i times sqrt(max(rho'(z_i) +
    2 z_i rho''(z_i), eps)), z_i = (f_i / f_scale)^2 (``scale_for_robust_loss_function``,
    scipy/optimize/_lsq/common.py). For residuals A x - b, linear in x, the true Jacobian
    is A at every x: _unweighted must give A back from what scipy returned, in rows the
    loss discounts (z > 1 for huber and cauchy, where the weight is clamped to eps) too.
    Two outliers and a near miss make rows on both sides of z = 1 for every loss."""
    np = pytest.importorskip("numpy")
    least_squares = pytest.importorskip("scipy.optimize").least_squares
    from simcoll.calibration import _unweighted

    rng = np.random.default_rng(0)
    a = rng.normal(size=(7, 2))
    b = a @ np.array([1.0, -2.0])
    b[[1, 4]] += [3.0, -5.0]
    b[2] += 0.05
    fit = least_squares(lambda x: a @ x - b, np.zeros(2), jac=lambda x: a, loss=loss,
                        f_scale=0.1)
    z = (fit.fun / 0.1) ** 2
    assert loss == "linear" or (np.any(z < 1) and np.any(z > 1))
    if loss != "linear":   # scipy's rows are weighted: not A as returned
        assert not np.allclose(fit.jac, a)
    np.testing.assert_allclose(_unweighted(fit.jac, fit.fun, loss, 0.1), a, rtol=1e-9,
                               atol=1e-12)


def test_undetermined_names_only_the_constants_in_a_flat_combination():
    """Hand-built Jacobians (rows: sizes, columns: constants) and their flat directions:
    x and 2x act alike (null vector (2, -1)/sqrt 5); a constant moving no time (a zero
    column) is left out of both the count and the names; c = a + 0.1 b makes all three
    traded off, b with a weight of only 0.07 in the null vector (1, 0.1, -1)/1.005; and
    without a Jacobian the constants beyond the sizes, all of them named."""
    np = pytest.importorskip("numpy")
    from simcoll.calibration import _undetermined

    x = np.array([1.0, 2.0, 3.0, 5.0])
    y = np.array([1.0, -1.0, 0.5, 0.0])
    zero = np.zeros(4)
    assert _undetermined(np.column_stack([x, y]), 4, ["p", "q"]) == (0, ())
    assert _undetermined(np.column_stack([x, 2 * x, y]), 4, ["p", "q", "r"]) == \
        (1, ("p", "q"))
    assert _undetermined(np.column_stack([zero, y, x, -3 * x]), 4, ["z", "r", "p", "q"]) == \
        (1, ("p", "q"))
    assert _undetermined(np.column_stack([x, y, x + 0.1 * y]), 4, ["a", "b", "c"]) == \
        (1, ("a", "b", "c"))
    # a real difference of 1e-4 between two columns pins them down; 1e-9 does not
    w = np.array([1.0, 2.0, 3.0, 5.0 + 1e-4])
    assert _undetermined(np.column_stack([x, w]), 4, ["p", "q"]) == (0, ())
    w = np.array([1.0, 2.0, 3.0, 5.0 + 1e-9])
    assert _undetermined(np.column_stack([x, w]), 4, ["p", "q"]) == (1, ("p", "q"))
    assert _undetermined(None, 2, ["a", "b", "c"]) == (1, ("a", "b", "c"))
    assert _undetermined(None, 3, ["a", "b", "c"]) == (0, ())
    assert _undetermined(np.column_stack([zero, zero]), 4, ["a", "b"]) == (0, ())


def test_the_note_counts_distinct_sizes_where_several_types_share_one():
    """Two rows of one size (float and half, nccl-tests' -d all): one size fitted, so the
    note says (1), not the row count (2)."""
    cal = sc.Calibration(values={"bandwidth": 4e10, "latency": 2e-6},
                         initial={"bandwidth": 2e10, "latency": 5e-6},
                         topology=sc.topology.switch(4), sizes=(1 << 20, 1 << 20),
                         measured=(1e-4, 1e-4), before=(2e-4, 2e-4), after=(1e-4, 1e-4),
                         evaluations=3, message="done", undetermined=1,
                         settings=(("float", "sum", -1), ("half", "sum", -1)),
                         traded_off=("bandwidth", "latency"))
    assert any(note.startswith("note: the sizes fitted (1) do not pin down the 2 free "
                               "constants: 1 combination(s) of bandwidth, latency")
               for note in cal.notes)


def test_an_int_parameter_of_the_algorithm_with_a_topology_file(no_simulation, table, tmp_path):
    path = tmp_path / "switch8.json"
    save(switch8(BANDWIDTH, LATENCY), path)
    with pytest.raises(InvalidInputError, match=r"^calibrate fits real-valued constants; "
                                                r"chunks is an int parameter of the "
                                                r"algorithm"):
        sc.calibrate(str(path), table, free={"chunks": (1, 1, 8)})


def test_constants_at_a_start_past_the_run_limits_are_not_said_to_move_no_time():
    """A bandwidth of 40 bytes/s (40 GB/s meant) runs the 64 MiB size past the
    simulated-time limit, at the start and every finite-difference step from it: each
    counts as the worst fit, so both columns of the Jacobian are zero. That is not
    "another part of the machine is the bottleneck" (latency is the bottleneck at 4 KiB
    here): the notes say that nothing could be simulated there, and what to check."""
    cal = sc.calibrate(ring_switch, table4(),
                       free={"bandwidth": (40.0, 1.0, 1e12),
                             "latency": (5 * sc.us, 10 * sc.ns, 100 * sc.us)})
    # probing the bandwidth across its bounds still finds the table's constants
    assert cal.values["bandwidth"] == pytest.approx(TRUE_BANDWIDTH, rel=1e-6)
    assert cal.values["latency"] == pytest.approx(LINK_LATENCY, rel=1e-6)
    assert cal.unmoved == cal.past_limits == ("bandwidth", "latency")
    notes = cal.notes
    assert not any("bottleneck" in note for note in notes)
    assert notes[0].startswith(
        "note: bandwidth was not fitted from its start, 40: the fit could not simulate the "
        "sizes there (nor a step from there) within simcoll's run limits, so it could not "
        "tell what bandwidth moves; check the constants' units and bounds (a bandwidth in "
        "bytes/s, 5e+09, not GB/s, 5; a latency in seconds); fitted again from ")
    assert notes[1] == (
        "note: latency was not fitted from its start, 5e-06: the fit could not simulate the "
        "sizes there (nor a step from there) within simcoll's run limits, so it could not "
        "tell what latency moves; check the constants' units and bounds (a bandwidth in "
        "bytes/s, 5e+09, not GB/s, 5; a latency in seconds); fitted again from 5e-06 once "
        "bandwidth started from the best value probed")
    assert cal.not_fitted == ()


def test_a_constant_not_fitted_past_the_run_limits_says_so_in_the_report():
    """Where no probed value helps (the builder ignores the bandwidth, a latency of
    1e5 s puts every size past the limit), the constant's row says why."""
    cal = sc.calibrate(_ignores_bandwidth, table4(),
                       free={"bandwidth": (50 * sc.GB, 1 * sc.GB, 400 * sc.GB),
                             "latency": (1e5, 10 * sc.ns, 2e5)})
    assert "bandwidth" in cal.not_fitted and "bandwidth" in cal.past_limits
    row = cal.report().splitlines()[1]
    assert row.split()[0] == "bandwidth"
    assert row.endswith("   not fitted: not simulated at its start")


@pytest.mark.parametrize("low, high", [(1.0, 1000.0), (3.0, 7.0), (45e9, 100e9), (1e9, 2e10),
                                       (0.0, 1e5), (-3.0, 7.1)])
def test_a_bounds_unit_is_the_bound_exactly(low, high):
    """exp(log(low) + (unit - 1)) left 1000 as 999.9999999999998, 7 as 6.999999999999999
    and 3 as 3.0000000000000004; a bound is given back as it was given."""
    from simcoll.calibration import _Scale

    scale = _Scale(low, high)
    assert scale.value(scale.high_unit) == high and scale.value(scale.low_unit) == low


def test_a_constant_on_its_bound_is_reported_as_the_bound():
    """The table's 40 GB/s lies below the lower bound 45 GB/s: the fit ends on it, and
    the value is 45 GB/s itself (it was 45000000000.00004)."""
    cal = sc.calibrate(lambda bandwidth: ring_switch(bandwidth), table4(),
                       free={"bandwidth": (50 * sc.GB, 45 * sc.GB, 100 * sc.GB)})
    assert cal.values["bandwidth"] == 45e9 and cal.on_bound == {"bandwidth": "lower"}


def test_a_fit_stopped_before_its_first_step_says_so(table):
    """10 sizes, 2 free constants: the start and its two finite-difference steps take the
    30 simulations allowed, so no step of the fit can be tried, and the values are the
    initial ones to a finite-difference step."""
    free = {"bandwidth": (BANDWIDTH / 3, 1e9, 1e12), "latency": (LATENCY * 2.5, 1e-8, 1e-4)}
    cal = sc.calibrate(switch8, table, free=free, max_evaluations=30)
    assert cal.values == pytest.approx({k: v[0] for k, v in free.items()}, rel=1e-6)
    # 3 sizes, max_evaluations=7: the start's 3 simulations and one finite-difference
    # step's 3 (6; the next step's would pass 7), none better: the values are the ones
    # given, not their round trip through the fit's log scale (19999999999.999973 for
    # 2e10, 4.999999999999999e-06 for 5e-06)
    given = {"bandwidth": (20e9, 1e9, 1e12), "latency": (5e-6, 1e-8, 1e-4)}
    start = sc.calibrate(ring_switch, table4(), free=given, max_evaluations=7)
    assert start.stalled_at == 7 and start.evaluations == 6
    assert start.values == {"bandwidth": 20e9, "latency": 5e-6}
    assert cal.stalled_at == 30 and cal.evaluations == 30
    assert cal.notes == [
        "note: the fit stopped at max_evaluations=30 before it took a step: the values are "
        "where it started (or a finite-difference step from it), not fitted; raise "
        "max_evaluations (each step simulates the 10 sizes at 3 points, 30 simulations: "
        "give many times that)"]
    assert cal.notes[0] in cal.report().splitlines()
    # a budget that lets it step: the values moved, and no such note
    moved = sc.calibrate(switch8, table, free=free, max_evaluations=80)
    assert moved.values["bandwidth"] > 2 * free["bandwidth"][0]
    assert moved.stalled_at is None and not moved.notes


pytest.importorskip("scipy")


def test_a_factory_taking_any_keyword_may_take_a_name_the_algorithm_has_as_an_int():
    """Guards against ``not takes_any`` dropped from the algorithm-parameter refusal. A
    builder with ``**options`` can take ``chunks`` as a real-valued machine constant, so
    freeing it is not refused as ring's int parameter; a builder without ``**`` that
    lacks it is (as test_constants_that_cannot_be_fitted_are_refused checks)."""
    others = dict(get_algorithm("all_reduce", "ring").params)
    assert "chunks" in others

    def any_options(bandwidth, **options):
        return sc.topology.switch(8, bandwidth=bandwidth)

    def fixed(bandwidth):
        return sc.topology.switch(8, bandwidth=bandwidth)

    assert _check_free(any_options, {"chunks": (2.0, 1.0, 8.0)}, set(), None, others,
                       "ring") == {"chunks": (1.0, 8.0)}
    with pytest.raises(InvalidInputError, match=r"^calibrate fits real-valued constants; "
                                                r"chunks is an int parameter of the "
                                                r"algorithm"):
        _check_free(fixed, {"chunks": (2.0, 1.0, 8.0)}, set(), None, others, "ring")


def _calibration(values, initial, unmoved, probed):
    return Calibration(values=values, initial=initial, topology=sc.topology.switch(4),
                       sizes=(1024,), measured=(1e-5,), before=(1e-5,), after=(1e-5,),
                       evaluations=1, message="", unmoved=unmoved, probed=probed)


def test_a_constant_not_fitted_is_not_said_to_be_fitted_again():
    """latency moved nothing at its start and ended there (not fitted), while
    bandwidth was probed: the re-fit after probing did not move latency, so its note
    says it was not fitted, and not that it was "fitted again from its start"."""
    cal = _calibration({"bandwidth": 3e10, "latency": 5e-6},
                       {"bandwidth": 1e10, "latency": 5e-6}, ("latency",),
                       {"bandwidth": 2e10})
    assert cal.not_fitted == ("latency",)
    [note] = [n for n in cal.notes if n.startswith("note: latency")]
    assert note == ("note: latency moved no simulated time at 5e-06, where it started "
                    "(another part of the machine is the bottleneck there, it acts only "
                    "past a threshold, or no run uses it): not fitted; start it elsewhere "
                    "or use starts > 1")


def test_without_probing_a_constant_that_moved_later_is_not_said_to_be_fitted_again():
    """No constant was probed: a constant that moved nothing at its start but ended
    elsewhere (the fit moved it once others had) has the plain note, with no "fitted
    again from its start, with  from the best value probed" of an empty probe list."""
    cal = _calibration({"bandwidth": 3e10, "latency": 7e-6},
                       {"bandwidth": 1e10, "latency": 5e-6}, ("latency",), {})
    assert cal.not_fitted == ()
    [note] = [n for n in cal.notes if n.startswith("note: latency")]
    assert note == ("note: latency moved no simulated time at 5e-06, where it started "
                    "(another part of the machine is the bottleneck there, it acts only "
                    "past a threshold, or no run uses it)")


def _switch8(bandwidth: float, latency: float) -> sc.Topology:
    return sc.topology.switch(8, bandwidth=bandwidth, latency=latency)


def test_a_constant_the_fit_moved_a_little_is_not_put_back_at_its_start():
    """A table simcoll run printed at 100 GB/s and 1.5 us, fitted from 100.09 GB/s (0.09%
    off) with latency fixed: the fit moves bandwidth back towards 100 GB/s, by about
    0.09%, far more than the printed times' rounding leaves undetermined. Only a value
    that ended where it started to the log scale's round trip (a relative 1e-12) is
    put back to the value given; one the fit moved by 1e-3 or less must stay fitted."""
    import contextlib
    import io

    from simcoll.cli import main
    from simcoll.nccl_tests import parse

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["run", "--topology", "switch:ranks=8,bandwidth=100GB/s,latency=1.5us",
              "-b", "64M", "-e", "1G", "-f", "4"])
    table = parse(out.getvalue())
    start = 100.09e9
    cal = sc.calibrate(lambda bandwidth: _switch8(bandwidth, 1.5e-6), table,
                       free={"bandwidth": (start, 1e9, 1e12)}, algorithm="ring")
    assert cal.initial == {"bandwidth": start}
    assert abs(cal.values["bandwidth"] / 100e9 - 1) < 2e-4
    assert abs(cal.values["bandwidth"] / start - 1) > 5e-4


def test_a_builder_spec_with_spaces_around_its_name_is_calibrated(table):
    """from_spec reads ' switch : ranks=8' as switch:ranks=8; calibrate looked the name up
    unstripped (' switch ') and refused it as an unknown builder."""
    free = {"bandwidth": (BANDWIDTH * 2, 1e9, 1e12), "latency": (LATENCY / 3, 1e-8, 1e-4)}
    cal = sc.calibrate(" switch : ranks=8", table, free=free)
    assert cal.values["bandwidth"] == pytest.approx(BANDWIDTH, rel=0.01)
    assert cal.values["latency"] == pytest.approx(LATENCY, rel=0.01)
    assert cal.topology.nranks == 8


@pytest.mark.parametrize("trials", [3, 7])
def test_an_interrupted_fit_notes_its_best_point_so_far(table, monkeypatch, trials):
    """Ctrl-C in the fit's fourth (or eighth) trial: the KeyboardInterrupt carries the
    best of the points simulated (least squared log error, worked out here from what each
    simulation returned; after seven, a later one than the start), so a long calibration
    stopped by hand still tells what it found."""
    built: list[tuple[float, float]] = []
    simulated: list[tuple[tuple[float, float], list[float]]] = []
    run_sizes = simcoll.calibration.run_sizes

    def builder(bandwidth: float, latency: float) -> sc.Topology:
        built.append((bandwidth, latency))
        return switch8(bandwidth, latency)

    def interrupted_after_the_trials(*args, **kwargs):
        if len(simulated) == trials:
            raise KeyboardInterrupt
        timed = run_sizes(*args, **kwargs)
        simulated.append((built[-1], [t for t, _ in timed]))
        return timed

    monkeypatch.setattr(simcoll.calibration, "run_sizes", interrupted_after_the_trials)
    free = {"bandwidth": (BANDWIDTH / 3, 1e9, 1e12), "latency": (LATENCY * 2.5, 1e-8, 1e-4)}
    with pytest.raises(KeyboardInterrupt) as caught:
        sc.calibrate(builder, table, free=free, algorithm="ring")
    measured = [r.out_of_place.time for r in table.rows]

    def squares(times: list[float]) -> float:
        return sum(math.log(t / m) ** 2 for t, m in zip(times, measured))

    best = min(range(len(simulated)), key=lambda k: squares(simulated[k][1]))
    assert best > 0 or trials < 7   # after seven trials the start is not the best
    (bandwidth, latency), times = simulated[best]
    error = math.exp(sum(abs(math.log(t / m)) for t, m in zip(times, measured))
                     / len(measured)) - 1
    assert caught.value.__notes__ == [
        f"the best point simulated before the interrupt: bandwidth={bandwidth:.4g}, "
        f"latency={latency:.4g} ({error:.1%} geometric-mean time error over 10 sizes)"]


def test_an_interrupt_before_any_simulation_adds_no_note(table, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(simcoll.calibration, "run_sizes", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        sc.calibrate(switch8, table, free=GOOD, algorithm="ring")
    assert not getattr(caught.value, "__notes__", [])


def test_an_interrupt_after_only_unsimulated_points_adds_no_note(table, monkeypatch):
    """Every point tried ran past the run limits (times of inf): there is no best point
    to name, so the interrupt carries no note (not one of an infinite error)."""
    calls = []

    def past_the_limit_then_interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        raise RunLimitError("past the run limit", [])

    monkeypatch.setattr(simcoll.calibration, "run_sizes", past_the_limit_then_interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        sc.calibrate(switch8, table, free=GOOD, algorithm="ring")
    assert len(calls) == 4
    assert not getattr(caught.value, "__notes__", [])
