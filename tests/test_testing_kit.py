"""Refusals of the formula-test kit (``simcoll.testing``): expectations no run can meet,
expectations of hosts a run does not have, sweep axes that are not lists, and ini
constants the reference network does not take.

Every expected value below is worked out by hand: a ring all-reduce of n bytes on p ranks
sends and receives 2 (p-1)/p n bytes per rank; a parameter-server all-reduce of n bytes on
p ranks and h hosts sends n/h bytes from each rank to each host, so each host receives
(and sends back) p n/h bytes.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import simcoll as sc
from simcoll import simulate
from simcoll.testing import (
    AlphaBeta,
    alpha_beta_network,
    assert_matches_model,
    assert_time,
    assert_traffic,
    sweep,
)
from simcoll.testing.network import RULES

ALPHA, BETA = 1e-6, 1e-11
N = 1 << 20
RING = 2 * 3 / 4 * N  # bytes each of 4 ranks sends (and receives) in a ring all-reduce


@pytest.fixture(scope="module")
def ring():
    return simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), "all_reduce",
                    algorithm="ring", nbytes=N)


@pytest.fixture(scope="module")
def hosts():
    """4 ranks, 2 server hosts, 4096 bytes: ranks send 4096, hosts 8192."""
    return simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA, servers=2), "all_reduce",
                    algorithm="parameter_server", nbytes=4096)


def test_the_hand_computed_traffic_passes(ring, hosts):
    assert_traffic(ring, sent=RING, received=[RING] * 4)
    assert_traffic(hosts, sent=4096, received=[4096] * 4, host_sent=8192,
                   host_received=np.array([8192, 8192]))


@pytest.mark.parametrize("arg", ["sent", "received"])
@pytest.mark.parametrize("value, shown", [
    (math.nan, "=nan"), (math.inf, "=inf"), (-math.inf, "=-inf"), (-1.0, "=-1.0"),
    (np.float64(math.nan), r"=nan"), (np.float32(-2.5), r"=-2.5"), (True, "=True"),
    (np.float32(-1.1), r"=-1.1"),   # at its own precision, not -1.100000023841858
    ([math.nan] * 4, r"\[0\] = nan"), ([RING, RING, math.inf, RING], r"\[2\] = inf"),
    (np.array([RING, math.nan, RING, RING]), r"\[1\] = nan"),
    ([RING, RING, RING, -RING], r"\[3\] = -1572864.0"),
])
def test_an_expectation_no_run_can_meet_is_refused(ring, arg, value, shown):
    """NaN and inf compared False with every simulated count, so these passed."""
    with pytest.raises(sc.InvalidInputError,
                       match=rf"^{arg}{shown} is not accepted; use a number >= 0, finite"):
        assert_traffic(ring, **{arg: value})


@pytest.mark.parametrize("arg", ["host_sent", "host_received"])
@pytest.mark.parametrize("value", [math.nan, math.inf, [8192, math.nan]])
def test_a_host_expectation_no_run_can_meet_is_refused(hosts, arg, value):
    with pytest.raises(sc.InvalidInputError, match=rf"^{arg}(\[1\] = |=)(nan|inf) is not"):
        assert_traffic(hosts, **{arg: value})


@pytest.mark.parametrize("arg", ["host_sent", "host_received"])
@pytest.mark.parametrize("value", [5, 0, [], [5, 5]])
def test_host_expectations_on_a_run_without_hosts_are_refused(ring, arg, value):
    """A scalar was broadcast over zero hosts, so any number passed."""
    with pytest.raises(sc.InvalidInputError, match=rf"^{arg}=.* the run has no server hosts"):
        assert_traffic(ring, **{arg: value})


def test_a_2d_list_is_called_one(ring):
    with pytest.raises(sc.InvalidInputError,
                       match=r"^sent=\[\[.*\]\] is not accepted: it is a 2-D list; give one "
                             r"number of bytes for every rank or a flat list of one per rank"):
        assert_traffic(ring, sent=[[RING] * 4])
    with pytest.raises(sc.InvalidInputError, match=r"^received=.* it is a nested list"):
        assert_traffic(ring, received=[[RING, RING], [RING]])


def test_a_list_of_the_wrong_length_says_per_rank_or_per_host(ring, hosts):
    with pytest.raises(sc.InvalidInputError,
                       match=r"^sent=.* it has 3 values, one per rank, but the run has 4 "
                             r"ranks"):
        assert_traffic(ring, sent=[RING] * 3)
    with pytest.raises(sc.InvalidInputError,
                       match=r"^host_sent=.* it has 4 values, one per host, but the run has 2 "
                             r"hosts; give one number of bytes for every host or a flat "
                             r"list of one per host"):
        assert_traffic(hosts, host_sent=[8192] * 4)


def test_size_strings_are_byte_counts_as_in_simulate(ring, hosts):
    """simulate takes nbytes="1MiB"; assert_traffic raised a raw ValueError for it."""
    assert_traffic(ring, sent="1.5MiB", received=["1.5MiB", "1.5MiB", RING, "1572864"])
    assert_traffic(hosts, host_sent="8KiB", host_received=["8KiB", 8192])
    with pytest.raises(AssertionError, match=r"bytes_sent: 4 of 4 ranks differ"):
        assert_traffic(ring, sent="1MiB")
    with pytest.raises(sc.InvalidInputError, match=r"^sent='1Mb' is not accepted: .*a bit"):
        assert_traffic(ring, sent="1Mb")
    with pytest.raises(sc.InvalidInputError, match=r"^received\[2\] = 'lots' is not accepted"):
        assert_traffic(ring, received=[RING, RING, "lots", RING])


def test_assert_matches_model_checks_its_constants_before_comparing(simcoll_reference):
    """Refused before any comparison: when the models were asked for root 0, the
    traffic differed from this root-3 run's, and that AssertionError hid the NaN alpha."""
    res = simulate(simcoll_reference.network(4), "broadcast", algorithm="binomial",
                   nbytes=1000, root=3)
    for bad in (dict(alpha=math.nan), dict(beta=math.inf), dict(gamma=-1.0)):
        name, value = next(iter(bad.items()))
        kwargs = {"alpha": ALPHA, "beta": BETA, **bad}
        with pytest.raises(sc.InvalidInputError, match=f"^{name}={value!r} is not accepted"):
            assert_matches_model(res, **kwargs)
    with pytest.raises(sc.InvalidInputError, match=r"^root=4 is not accepted"):
        assert_matches_model(res, alpha=ALPHA, beta=BETA, root=4)


def test_assert_matches_model_asks_the_models_for_the_runs_root():
    """A correct root-2 run failed against the root-0 model ("traffic ... differs", ranks
    0 and 2 swapped): the root defaulted to 0 though ``res.root`` holds it."""
    res = simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), "broadcast",
                   algorithm="binomial", nbytes=4096, root=2)
    # By hand: the binomial tree from rank 2 sends to 0, then 2 -> 3 and 0 -> 1: every
    # rank but the root receives 4096 bytes once.
    assert res.root == 2 and res.bytes_received.tolist() == [4096, 4096, 0, 4096]
    assert_matches_model(res, alpha=ALPHA, beta=BETA)
    assert_matches_model(res, alpha=ALPHA, beta=BETA, root=2)
    with pytest.raises(sc.InvalidInputError, match=r"^root=0 is not the root of the run of "
                                                   r"broadcast/binomial \(p=4, nbytes=4096\), "
                                                   r"which is 2; leave root= out"):
        assert_matches_model(res, alpha=ALPHA, beta=BETA, root=0)


def test_a_root_for_a_collective_without_one_is_refused_as_simulate_refuses_it(
        simcoll_reference, ring):
    message = (r"^all_reduce has no root, but root=2 was given; root= is for broadcast, "
               r"reduce, gather and scatter")
    with pytest.raises(sc.InvalidInputError, match=message):
        simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), "all_reduce",
                 algorithm="ring", nbytes=N, root=2)
    with pytest.raises(sc.InvalidInputError, match=message):
        assert_matches_model(ring, alpha=ALPHA, beta=BETA, root=2)
    with pytest.raises(sc.InvalidInputError, match=message.replace("2", "0")):
        simcoll_reference.check(ring, root=0)
    assert_matches_model(ring, alpha=ALPHA, beta=BETA)


def test_a_parameter_server_on_more_hosts_than_ranks_matches_its_model():
    """It "beat the lower bound": the bound let only the 2 ranks reduce, (p-1)/p n gamma =
    204.8 us, but each of the 8 hosts reduces one 512-byte shard, and the run takes
    2 alpha + 2 k (n/k) beta + (p-1) (n/k) gamma = 61.392 us by hand."""
    a, b, g, p, k, n = 1e-6, 1e-9, 1e-7, 2, 8, 4096
    res = simulate(alpha_beta_network(p, alpha=a, beta=b, gamma=g, servers=k), "all_reduce",
                   algorithm="parameter_server", nbytes=n)
    assert_time(res, 2 * a + 2 * k * (n / k) * b + (p - 1) * (n / k) * g)
    assert_matches_model(res, alpha=a, beta=b, gamma=g)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast", "reduce", "all_to_all"])
def test_an_empty_nccl_collective_takes_no_time_and_matches_its_model(collective):
    """NCCL skips an empty collective (0 s), which "beat" a bound of one alpha."""
    res = simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), collective,
                   algorithm="nccl", nbytes=0)
    assert res.time == 0.0
    assert_matches_model(res, alpha=ALPHA, beta=BETA)


def test_an_empty_bucketed_all_reduce_over_nccl_matches_its_model():
    res = simulate(alpha_beta_network(4, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="bucketed", inner="nccl", nbytes=0)
    assert res.time == 0.0
    assert_matches_model(res, alpha=ALPHA, beta=BETA)


def test_a_v_collective_run_is_named_by_its_splits():
    """Its ``nbytes`` is the mean input rounded down, 1334 here, a size nobody passed."""
    res = simulate(alpha_beta_network(3, alpha=ALPHA, beta=BETA), "all_gatherv",
                   algorithm="direct", nbytes=[4000, 0, 4])
    named = r"all_gatherv/direct \(p=3, splits=\[1000, 0, 1\] elements of float32\)"
    with pytest.raises(AssertionError, match=rf"^time of {named} differs"):
        assert_time(res, 1e-6)
    with pytest.raises(AssertionError, match=rf"^traffic of {named} differs"):
        assert_traffic(res, sent=[8000, 0, 4])  # by hand: (p-1) c_r = 8000, 0, 8
    wide = simulate(alpha_beta_network(64, alpha=ALPHA, beta=BETA), "all_to_allv",
                    algorithm="direct", nbytes=np.full((64, 64), 4))
    with pytest.raises(AssertionError) as failed:
        assert_time(wide, 1e-6)
    first = str(failed.value).splitlines()[0]
    assert first.startswith("time of all_to_allv/direct (p=64, splits=[(1, 1, 1, 1, 1, 1, "
                            "...), ") and len(first) < 300


def test_a_sweep_axis_must_be_a_list_of_values():
    with pytest.raises(sc.InvalidInputError,
                       match=r"^sweep axis p=5 is not accepted: give a list of values, "
                             r"e\.g\. p=\[5\]$"):
        sweep(p=5)
    with pytest.raises(sc.InvalidInputError,
                       match=r"^sweep axis p='248' is not accepted: a string is not a list"):
        sweep(p="248")
    with pytest.raises(sc.InvalidInputError, match=r"^sweep axis nbytes=None is not"):
        sweep(p=[2], nbytes=None)
    mark = sweep(p=range(2, 4), name=("a",))
    assert mark.args[1] == [(2, "a"), (3, "a")]
    # a dict's keys keep their order: not refused as a set is
    assert sweep(p={2: "a", 4: "b"}.keys()).args[1] == [(2,), (4,)]
    for axis in ({2, 4}, frozenset([2])):
        with pytest.raises(sc.InvalidInputError, match=r"^sweep axis p=.* is not accepted: "
                                                       r"a set's order may differ"):
            sweep(p=axis)   # a set's order differed between pytest-xdist's workers
    with pytest.raises(sc.InvalidInputError, match=r"^sweep axis p=\{2: 'a'\} is not "
                                                   r"accepted: a mapping iterates over its"):
        sweep(p={2: "a"})
    with pytest.raises(sc.InvalidInputError, match=r"a pytest.param in an axis holds one"):
        sweep(p=[pytest.param(2, 4)])


def test_a_pytest_param_in_a_sweep_axis_marks_the_combinations_it_is_in():
    """A pytest.param reached the test as the ParameterSet itself."""
    skip = pytest.mark.skip(reason="too big")
    mark = sweep(p=[2, pytest.param(4, marks=skip)], nbytes=[8, 16])
    assert mark.kwargs["ids"] == ["p=2-nbytes=8", "p=2-nbytes=16", "p=4-nbytes=8",
                                  "p=4-nbytes=16"]
    combos = mark.args[1]
    assert combos[:2] == [(2, 8), (2, 16)]
    named = sweep(p=[pytest.param(4, id="four")], nbytes=[8])
    assert named.kwargs["ids"] == ["p=four-nbytes=8"]   # the param's id (it was dropped)
    assert [(c.values, list(c.marks)) for c in combos[2:]] == [((4, 8), [skip]),
                                                               ((4, 16), [skip])]


def _pytest_with_ini(tmp_path, ini: str) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    (tmp_path / "test_it.py").write_text(
        "def test_one(simcoll_reference):\n    print(simcoll_reference)\n"
        "def test_two(simcoll_reference):\n    pass\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "_simcoll_pytest", "-p",
         "no:cacheprovider", "-q", "-s", "test_it.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_session_that_uses_no_simcoll_fixture_does_not_import_simcoll(tmp_path):
    """The plugin's module imported all of simcoll (about 0.6 s) in every pytest session
    of an environment where simcoll is installed; now simcoll loads when the fixture is
    first asked for, or at start when an option is set (to check it)."""
    (tmp_path / "test_it.py").write_text(
        "import sys\n"
        "def test_before():\n    assert 'simcoll' not in sys.modules\n"
        "def test_fixture(simcoll_reference):\n    assert 'simcoll' in sys.modules\n"
        "    print(simcoll_reference)\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "_simcoll_pytest", "-p", "no:cacheprovider",
         "-q", "-s", "test_it.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "AlphaBeta(alpha=1e-06, beta=1e-11, gamma=2.5e-12)" in run.stdout
    # the defaults written out are not options set (pytest 9.2 reads them as floats,
    # which were compared with the default texts)
    (tmp_path / "pytest.ini").write_text("[pytest]\nsimcoll_alpha = 1e-06\n"
                                         "simcoll_gamma = 2.5e-12\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "_simcoll_pytest", "-p", "no:cacheprovider",
         "-q", "-s", "test_it.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_plugin_is_installed_under_its_name_with_the_kits_defaults():
    from importlib.metadata import entry_points

    import _simcoll_pytest

    (plugin,) = [ep for ep in entry_points(group="pytest11") if ep.name == "simcoll"]
    assert plugin.value == "_simcoll_pytest"
    defaults = {f.name: f.default for f in dataclasses.fields(AlphaBeta)}
    assert {name: float(default) for name, (default, _) in _simcoll_pytest.OPTIONS.items()} \
        == defaults
    assert {name: what for name, (_, what) in _simcoll_pytest.OPTIONS.items()} \
        == {name: what for name, (_, what) in RULES.items()}


@pytest.mark.parametrize("ini, accepted", [
    # the value as pytest read it: a string, or from 9.2 on a float where it is a number
    ("simcoll_alpha = -1", r"simcoll_alpha = '?-1(\.0)?'? is not accepted; use a number >= 0, "
                           r"finite"),
    ("simcoll_beta = 0", r"simcoll_beta = '?0(\.0)?'? is not accepted; use a number > 0, finite"),
    ("simcoll_gamma = nan", r"simcoll_gamma = '?nan'? is not accepted; use a number >= 0, "
                            r"finite"),
    ("simcoll_alpha = fast", r"simcoll_alpha = 'fast' is not accepted; use a finite number"),
    # a positive beta too small to invert: the range it is out of, not "> 0"
    ("simcoll_beta = 1e-310", r"simcoll_beta = '?1e-310'? is not accepted; use a number >= "
                              r"2\.23e-308 \(smaller ones overflow when inverted\)"),
])
def test_a_bad_ini_constant_stops_pytest_once_naming_the_option(tmp_path, ini, accepted):
    """These failed every test's setup with a TopologyError naming alpha=-1.0."""
    run = _pytest_with_ini(tmp_path, ini)
    out = run.stdout + run.stderr
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert len(re.findall(accepted, out)) == 1, out
    assert "TopologyError" not in out and "Traceback" not in out, out


def test_good_ini_constants_reach_the_fixture(tmp_path):
    run = _pytest_with_ini(tmp_path, "simcoll_alpha = 2e-6\nsimcoll_gamma = 0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "AlphaBeta(alpha=2e-06, beta=1e-11, gamma=0.0)" in run.stdout


def test_a_failed_sweep_point_a_dict_or_a_program_run_is_refused_saying_what_it_is():
    """Asserting over a sweep's results met its failed points with AttributeError."""
    failed = sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                      sizes=[4], progress=False, until=1e-9)[0]
    good = simulate(alpha_beta_network(2, alpha=ALPHA, beta=BETA), "all_reduce",
                    algorithm="ring", nbytes=4)

    def program(comm):
        yield comm.sleep(1e-6)

    run = sc.run_program(sc.topology.switch(2), program)
    for check in (lambda r: assert_time(r, 1e-6), lambda r: assert_traffic(r, sent=4),
                  lambda r: assert_matches_model(r, alpha=ALPHA, beta=BETA)):
        with pytest.raises(sc.InvalidInputError, match=r"this sweep point failed "
                                                       r"\(RunLimitError: "):
            check(failed)
        with pytest.raises(sc.InvalidInputError, match="res is a result's dict"):
            check(good.to_dict())
        with pytest.raises(sc.InvalidInputError, match="res is a RunResult, not what "
                                                       "simulate returns"):
            check(run)


def test_constants_the_reference_network_refuses_are_an_invalid_input_not_a_topology_error():
    """beta = 0 (an infinite bandwidth) and beta = 1e-320 (1/beta past the floats) pass
    the check of a number >= 0 but no reference network has them: assert_matches_model
    says so as an InvalidInputError, as its docstring promises, not as the
    TopologyError of building that network (TopologyError is no InvalidInputError)."""
    res = sc.simulate(alpha_beta_network(4, alpha=1e-6, beta=1e-9), "all_reduce",
                      algorithm="ring", nbytes=4096)
    for beta in (0.0, 1e-320):
        with pytest.raises(sc.InvalidInputError, match="beta="):
            assert_matches_model(res, alpha=1e-6, beta=beta)


def test_integer_byte_counts_are_compared_exactly_however_large():
    """rtol=1e-12 let a count one byte off pass past 1e12 bytes: a ring all-reduce of
    1 TiB on 2 ranks sends n = 2^40 bytes from each; 2^40 + 1 as an int must fail, as a
    float formula's result it may round within rtol."""
    n = 1 << 40
    res = simulate(alpha_beta_network(2, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=n)
    assert_traffic(res, sent=n, received=[n, n], rtol=0.5)   # exact: rtol is for floats
    with pytest.raises(AssertionError, match=r"bytes_sent: 2 of 2 ranks differ\n.*\n\s+0 "
                                             r"\s+1099511627777\s+1099511627776\s+-1"):
        assert_traffic(res, sent=n + 1)
    with pytest.raises(AssertionError, match="bytes_received: 1 of 2 ranks differ"):
        assert_traffic(res, received=np.array([n, n + 1], dtype=np.int64))
    assert_traffic(res, sent=float(n + 1))                   # 1e-12 of 2^40 is 1.1 bytes


def test_exact_fractions_and_decimals_are_expected_byte_counts():
    """2(p-1)/p n on 3 ranks of 3 x 4096 bytes is 16384 exactly: as a Fraction or a Decimal
    it is compared exactly; a Fraction that is not whole never matches."""
    from decimal import Decimal
    from fractions import Fraction

    n = 3 * 4096
    res = simulate(alpha_beta_network(3, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=n)
    assert_traffic(res, sent=Fraction(2 * 2, 3) * n, received=Decimal(16384))
    with pytest.raises(AssertionError, match=r"49153/3\s+16384\s+-1/3"):
        assert_traffic(res, sent=Fraction(49153, 3))
    for bad in (Fraction(-1), Decimal("NaN"), Decimal("-Infinity")):
        with pytest.raises(sc.InvalidInputError, match="sent=.* is not accepted"):
            assert_traffic(res, sent=bad)


@pytest.mark.skipif(pytest.version_tuple < (9, 2), reason="pytest 9.2 types ini options")
def test_a_toml_table_gives_the_constants_as_numbers(tmp_path):
    """pytest 9's [tool.pytest] table refused a number for an option declared a string
    ("expects a string, got float"); the session-wide fixture also serves a
    module-scoped one (a ScopeMismatch while it was function-scoped)."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.pytest]\nsimcoll_alpha = 2e-6\nsimcoll_beta = 1e-10\nsimcoll_gamma = 0\n")
    (tmp_path / "test_it.py").write_text(
        "import pytest\n"
        "@pytest.fixture(scope='module')\n"
        "def net(simcoll_reference):\n    return simcoll_reference\n"
        "def test_one(net):\n    print(net)\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "_simcoll_pytest", "-p",
         "no:cacheprovider", "-q", "-s", "test_it.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "AlphaBeta(alpha=2e-06, beta=1e-10, gamma=0.0)" in run.stdout


def test_sweep_ids_leave_out_memory_addresses():
    """An object's text holds its address, which differs from process to process, and
    pytest-xdist, --lf and --deselect compare ids across processes."""
    class Machine:
        pass

    mark = sweep(machine=[Machine()], p=[2])
    (test_id,) = mark.kwargs["ids"]
    assert "0x" not in test_id and test_id.startswith("machine=<") and test_id.endswith("-p=2")


def test_a_reference_network_of_no_gpus_names_p():
    with pytest.raises(sc.TopologyError, match=r"^p=0 is not accepted; use an integer >= 1 "
                                               r"\(GPUs\)"):
        alpha_beta_network(0, alpha=ALPHA, beta=BETA)


def test_a_time_that_differs_past_twelve_digits_shows_every_digit(ring):
    """With a tight rtol, 12 digits printed the two times alike."""
    close = ring.time * (1 + 1e-13)
    with pytest.raises(AssertionError) as caught:
        assert_time(ring, close, rtol=1e-15)
    lines = str(caught.value).splitlines()
    assert lines[1].split()[1] != lines[2].split()[1]
    assert float(lines[1].split()[1]) == close and float(lines[2].split()[1]) == ring.time


def test_an_integer_beside_a_float_in_a_list_is_still_exact():
    """In a list holding a float, the integers were read as floats too, and compared
    within rtol: 2^40 + 1 passed against 2^40. A boolean in a list was read as 1 byte."""
    n = 1 << 40
    res = simulate(alpha_beta_network(2, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=n)
    assert_traffic(res, sent=[n, float(n)])
    with pytest.raises(AssertionError, match=r"bytes_sent: 1 of 2 ranks differ"):
        assert_traffic(res, sent=[n + 1, float(n)])
    with pytest.raises(sc.InvalidInputError, match=r"sent\[0\] = True is not accepted"):
        assert_traffic(res, sent=[True, n])


def test_sweep_ids_take_only_text_names():
    """A value whose name attribute is a method or a number raised TypeError when the test
    module was imported; its text is used instead."""
    class Named:
        name = 7

        def __str__(self) -> str:
            return "named"

    class Method:
        def name(self) -> str:
            return "m"

        def __str__(self) -> str:
            return "method"

    assert sweep(x=[Named(), Method()]).kwargs["ids"] == ["x=named", "x=method"]


def test_a_failing_assertion_s_traceback_ends_at_the_caller_s_line(tmp_path):
    """assert_time, assert_traffic and assert_matches_model hide their own frames
    (__tracebackhide__): pytest's report of each failure shows no line of asserts.py.
    (A barrier whose model says nothing moves while rank 0 sends rank 1 16 bytes fails
    assert_matches_model's traffic check.)"""
    (tmp_path / "test_it.py").write_text(
        "import numpy as np\n"
        "import simcoll as sc\n"
        "from simcoll.cost import CostModel, gpu_traffic\n"
        "from simcoll.testing import (alpha_beta_network, assert_matches_model,\n"
        "                             assert_time, assert_traffic)\n"
        "NET = alpha_beta_network(2, alpha=1e-6, beta=1e-9)\n"
        "RES = sc.simulate(NET, 'all_reduce', algorithm='ring', nbytes=8)\n"
        "def none(p, nbytes, itemsize):\n"
        "    return gpu_traffic(np.zeros(p, dtype=np.int64), np.zeros(p, dtype=np.int64))\n"
        "@sc.register('barrier', 'zz_talks', cost=CostModel(\n"
        "    time=lambda p, nbytes, alpha, beta, gamma: 0.0, traffic=none))\n"
        "def talks(comm, x):\n"
        "    if comm.rank == 0:\n"
        "        yield comm.send(np.zeros(2), 1)\n"
        "    else:\n"
        "        yield comm.recv(0)\n"
        "TALKS = sc.simulate(NET, 'barrier', algorithm='zz_talks')\n"
        "def test_time():\n    assert_time(RES, 1.0)\n"
        "def test_traffic():\n    assert_traffic(RES, sent=1)\n"
        "def test_model():\n    assert_matches_model(TALKS, alpha=1e-6, beta=1e-9)\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          "--tb=long", "test_it.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert "3 failed" in out, out
    assert "asserts.py" not in out, out
    for line in ("assert_time(RES, 1.0)", "assert_traffic(RES, sent=1)",
                 "assert_matches_model(TALKS, alpha=1e-6, beta=1e-9)"):
        assert f">   {line}" in out.replace(">       ", ">   "), out


def test_a_size_string_is_an_exact_byte_count():
    """A size string is exact as an int is: 2^40 + 1 bytes written out is one byte more
    than the 2^40 each of 2 ranks sends in a ring all-reduce of 1 TiB (2 (p-1)/p n = n),
    which rtol=1e-12 (1.1 bytes of 2^40) would let pass if it were read as a float."""
    n = 1 << 40
    res = simulate(alpha_beta_network(2, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=n)
    assert_traffic(res, sent="1TiB", received="1099511627776")
    with pytest.raises(AssertionError, match="bytes_sent: 2 of 2 ranks differ"):
        assert_traffic(res, sent="1099511627777")


def test_a_negative_integer_byte_count_is_refused_not_compared(ring):
    with pytest.raises(sc.InvalidInputError, match=r"sent=-1 is not accepted"):
        assert_traffic(ring, sent=-1)
    with pytest.raises(sc.InvalidInputError, match=r"received\[1\] = -1 is not accepted"):
        assert_traffic(ring, received=[1572864, -1, 1572864, 1572864])   # ints: exact


def test_zero_as_a_fraction_or_a_decimal_is_a_byte_count():
    """A binomial broadcast of 64 bytes on 2 ranks: the root sends 64, rank 1 nothing;
    0 as a Fraction or a Decimal is a count >= 0 like any other."""
    res = simulate(alpha_beta_network(2, alpha=ALPHA, beta=BETA), "broadcast",
                   algorithm="binomial", nbytes=64)
    assert_traffic(res, sent=[64, Fraction(0)], received=[Decimal(0), Fraction(64)])


def test_a_float_expectation_is_shown_in_fifteen_digits(ring):
    """1000/3 = 333.3333333333333 (a float): the table shows it as 333.333333333333,
    15 significant digits, not its full repr and not 12 digits."""
    with pytest.raises(AssertionError) as caught:
        assert_traffic(ring, sent=1000 / 3)
    assert re.search(r"\s333\.333333333333\s+1572864\s", str(caught.value)), str(caught.value)


def test_a_float_expectation_equal_to_the_count_passes_with_rtol_0(ring):
    """RING = 2 * 3/4 * 2^20 = 1572864.0 exactly: equal, so within rtol=0."""
    assert_traffic(ring, sent=float(RING), received=[float(RING)] * 4, rtol=0)


def test_a_table_of_sixteen_differing_ranks_shows_them_all_and_no_more_line():
    """16 ranks, a ring all-reduce of 64 bytes: each sends 2 * 15/16 * 64 = 120 bytes;
    expecting 0 from each, all 16 differ, and the table has room for 16."""
    res = simulate(alpha_beta_network(16, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=64)
    assert res.bytes_sent.tolist() == [120] * 16
    with pytest.raises(AssertionError) as caught:
        assert_traffic(res, sent=0)
    message = str(caught.value)
    assert "bytes_sent: 16 of 16 ranks differ" in message
    assert "more" not in message
    assert len(re.findall(r"^\s+\d+\s+0\s+120\s+\+120$", message, re.M)) == 16


def test_a_table_of_nineteen_differing_ranks_says_how_many_more():
    """19 ranks, every one sends something in a ring all-reduce of 152 bytes: 16 rows,
    then '... and 3 more'."""
    res = simulate(alpha_beta_network(19, alpha=ALPHA, beta=BETA), "all_reduce",
                   algorithm="ring", nbytes=152)
    with pytest.raises(AssertionError) as caught:
        assert_traffic(res, sent=0)
    assert str(caught.value).endswith("  ... and 3 more")


def test_a_beta_that_is_no_number_is_refused_as_above_zero(tmp_path):
    """beta is strict (a finite number > 0), alpha and gamma not (>= 0): the message of
    an ini value that is no number says which."""
    run = _pytest_with_ini(tmp_path, "simcoll_beta = slow")
    out = run.stdout + run.stderr
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert ("simcoll_beta = 'slow' is not accepted; use a finite number > 0 (seconds per "
            "byte)") in out, out
    run = _pytest_with_ini(tmp_path, "simcoll_gamma = free")
    out = run.stdout + run.stderr
    assert "simcoll_gamma = 'free' is not accepted; use a finite number >= 0 (" in out, out


def test_a_sweep_id_cuts_an_address_written_in_hex_letters():
    """An address is hexadecimal: 0xdeadbeef, all letters, is cut as 0x7f3a... is."""
    class Machine:
        def __repr__(self) -> str:
            return "<Machine object at 0xdeadbeef>"

    mark = sweep(machine=[Machine()], p=[2])
    assert mark.kwargs["ids"] == ["machine=<Machine object>-p=2"]


def test_exact_true_fails_where_the_model_only_estimates():
    """A ring all-reduce of 1000 B on 6 ranks cuts uneven pieces (1000 = 6 x 166 + 4),
    whose time the model only estimates: the call held it to the lower bound alone and
    passed quietly. ``exact=True`` makes that an AssertionError saying so; 6,144 B cuts
    even pieces, whose time the model gives exactly (2 (p-1) alpha + 2 (p-1)/p n beta),
    and passes."""
    net = alpha_beta_network(6, alpha=ALPHA, beta=BETA)
    uneven = simulate(net, "all_reduce", algorithm="ring", nbytes=1000)
    assert_matches_model(uneven, alpha=ALPHA, beta=BETA)
    with pytest.raises(AssertionError, match=r"only estimates its time here .* without "
                                             r"exact=True the time would be held to the lower "
                                             r"bound alone; exact=True asks for an exact "
                                             r"model"):
        assert_matches_model(uneven, alpha=ALPHA, beta=BETA, exact=True)
    even = simulate(net, "all_reduce", algorithm="ring", nbytes=6144)
    assert even.time == pytest.approx(10 * ALPHA + 10 / 6 * 6144 * BETA, rel=1e-12)
    assert_matches_model(even, alpha=ALPHA, beta=BETA, exact=True)
    with pytest.raises(AssertionError, match=r"only estimates"):   # the fixture's check too
        AlphaBeta(alpha=ALPHA, beta=BETA, gamma=0.0).check(uneven, exact=True)
    with pytest.raises(sc.InvalidInputError, match=r"exact='yes' is not accepted; use True "
                                                   r"or False"):
        assert_matches_model(even, alpha=ALPHA, beta=BETA, exact="yes")


def test_assert_time_takes_an_exact_expected_time_as_assert_traffic_does():
    """A Fraction or a Decimal from exact arithmetic was refused ('use a number >= 0,
    finite'), where assert_traffic takes them."""
    p, n = 4, 1 << 20
    alpha, beta = Fraction(2, 10**6), Fraction(1, 10**10)
    res = sc.simulate(alpha_beta_network(p, alpha=2e-6, beta=1e-10), "all_reduce",
                      algorithm="ring", nbytes=n)
    exact = 2 * (p - 1) * alpha + Fraction(2 * (p - 1), p) * n * beta
    assert_time(res, exact)
    assert_time(res, Decimal(exact.numerator) / Decimal(exact.denominator))
    with pytest.raises(AssertionError, match="differs from the formula"):
        assert_time(res, exact * Fraction(101, 100))
    for bad in (Fraction(-1, 3), Fraction(10**400), Decimal("NaN"), Decimal("sNaN"),
                Decimal("-1"), Decimal("1e400")):
        with pytest.raises(sc.InvalidInputError, match=re.escape(f"expected={bad!r}"[:40])):
            assert_time(res, bad)


def test_a_wrong_result_of_no_error_says_what_float64_cannot_show():
    """A moved -0.0 where 0.0 was due is wrong (Result.correct False) with a largest error
    of 0.0, which the failure quoted as if nothing differed."""
    res = simulate(alpha_beta_network(2, alpha=ALPHA, beta=BETA), "all_gather",
                   algorithm="ring", data=[np.zeros(3, np.float32)] * 2)
    signed = dataclasses.replace(res, correct=False, max_error=0.0)
    with pytest.raises(AssertionError, match=r"computed a wrong result \(no difference "
                                             r"float64 shows: a zero of the wrong sign"):
        assert_matches_model(signed, alpha=ALPHA, beta=BETA)
    off = dataclasses.replace(res, correct=False, max_error=0.5)
    with pytest.raises(AssertionError, match=r"wrong result \(largest error 0\.5\)$"):
        assert_matches_model(off, alpha=ALPHA, beta=BETA)


def test_a_pytest_param_in_a_later_axis_marks_its_combinations_too():
    """Only the first axis's marks reached the combinations (the existing test marks the
    first axis only): a pytest.param in the second axis lost its skip."""
    skip = pytest.mark.skip(reason="too big")
    slow = pytest.mark.filterwarnings("ignore::DeprecationWarning")
    mark = sweep(p=[2, pytest.param(4, marks=slow)], nbytes=[8, pytest.param(16, marks=skip)])
    assert mark.kwargs["ids"] == ["p=2-nbytes=8", "p=2-nbytes=16", "p=4-nbytes=8",
                                  "p=4-nbytes=16"]
    combos = mark.args[1]
    assert combos[0] == (2, 8)
    assert [(c.values, list(c.marks)) for c in combos[1:]] == [
        ((2, 16), [skip]), ((4, 8), [slow]), ((4, 16), [slow, skip])]


def test_assert_traffic_knows_an_nvswitch_is_no_server_host():
    """An NVLS run on dgx_h100(1) has no server host; host_sent= was held against the
    NVSwitch's multicast ('1 of 1 hosts differ') where it is refused for want of hosts."""
    res = sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="nccl",
                      nbytes=64 * 2**20, algo="nvls")
    assert res.hosts == 0 and res.host_bytes_sent.size == 1
    with pytest.raises(sc.InvalidInputError, match=r"host_sent=0 is not accepted: the run "
                                                   r"has no server hosts"):
        sc.testing.assert_traffic(res, host_sent=0)
    # and the GPUs' own traffic is held as before: (p + 1) / p of the buffer each
    sc.testing.assert_traffic(res, sent=9 * 64 * 2**20 // 8)


def test_an_in_network_switch_is_not_taken_for_a_server_host():
    """dgx_h100(1) has one endpoint past its GPUs, an NVSwitch that reduces in the
    network, and no server host: the refusal of its machine points to a reference
    network without servers=."""
    res = sc.simulate(sc.topology.dgx_h100(1), "all_reduce", algorithm="ring",
                      nbytes=2**20)
    assert (res.hosts, res.host_bytes_sent.size) == (0, 1)
    with pytest.raises(sc.InvalidInputError, match=r"run it on alpha_beta_network\(8, "
                                                   r"alpha=\.\.\., beta=\.\.\., "
                                                   r"gamma=\.\.\.\) and give"):
        assert_matches_model(res, alpha=1e-6, beta=1e-11)
