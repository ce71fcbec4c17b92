"""The compiled max-min solvers (simcoll.network.compiled) give the pure solvers' rates bit
for bit: uncompiled on random problems (whether numba is installed or not), compiled
where numba is, and whole runs with and without them."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_maxmin import problems
from test_route_grouping import padded

import simcoll as sc
from simcoll.network import compiled
from simcoll.network.maxmin import fill, fill_arrays


@st.composite
def weighted_problems(draw):
    """A problem of test_maxmin's kind, with how many flows each route stands for (None:
    one each)."""
    routes, capacity = draw(problems())
    many = draw(st.none() | st.lists(st.integers(1, 9), min_size=len(routes),
                                     max_size=len(routes)))
    return routes, capacity, many


def _pure(routes, capacity, many):
    """(the Python solver's rates, the numpy solver's rates)."""
    python = np.array(fill(routes, dict(enumerate(capacity)), many))
    arrays = fill_arrays(padded(routes, len(capacity)), np.array([*capacity, np.inf]),
                         None if many is None else np.array(many))
    return python, arrays


def _arguments(routes, capacity, many):
    multiplicity = np.ones(len(routes)) if many is None else np.array(many, dtype=float)
    return padded(routes, len(capacity)), np.array([*capacity, np.inf]), multiplicity


@settings(max_examples=300, deadline=None)
@given(weighted_problems())
def test_uncompiled_solvers_are_the_pure_ones_bit_for_bit(problem):
    python, arrays = _pure(*problem)
    args = _arguments(*problem)
    np.testing.assert_array_equal(compiled.fill_rows(*args), python)
    np.testing.assert_array_equal(compiled.fill_arrays_rows(*args), arrays)


def test_a_hand_worked_chain_with_and_without_multiplicity():
    # Link 0 (3 B/s) carries a and b, link 1 (4 B/s) a and c, link 2 (10 B/s) c and d:
    # link 0 fills first at 1.5, link 1 leaves c 2.5, link 2 leaves d 7.5. With route a
    # standing for 2 flows, link 0 has 3 flows at 1.0, link 1 leaves c 4 - 2 = 2 and
    # link 2 leaves d 8.
    routes = [(0, 1), (0,), (1, 2), (2,)]
    for many, expected in ((None, [1.5, 1.5, 2.5, 7.5]), ([2, 1, 1, 1], [1.0, 1.0, 2.0, 8.0])):
        args = _arguments(routes, [3.0, 4.0, 10.0], many)
        assert compiled.fill_rows(*args).tolist() == expected
        assert compiled.fill_arrays_rows(*args).tolist() == expected


def test_a_solve_that_cannot_progress_raises_instead_of_spinning():
    # A NaN capacity makes every comparison false: no link ever fills. The pure Python
    # solver would loop for ever; the compiled ones stop with an error.
    args = _arguments([(0,), (0, 1)], [float("nan"), 2.0], None)
    for solve in (compiled.fill_rows, compiled.fill_arrays_rows):
        with pytest.raises(ValueError, match="no link is a bottleneck"):
            solve(*args)


numba_only = pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not installed")


@numba_only
@settings(max_examples=300, deadline=None)
@given(weighted_problems())
def test_compiled_solvers_are_the_pure_ones_bit_for_bit(problem):
    routes, capacity, many = problem
    python, arrays = _pure(*problem)
    links, cap, _ = _arguments(*problem)
    multiplicity = None if many is None else np.array(many)
    # Work of WARMUP loads the compiled solvers whatever the process did before.
    rows = compiled.solver("rows", compiled.WARMUP)
    vectorized = compiled.solver("arrays", compiled.WARMUP)
    assert rows is not None and vectorized is not None
    np.testing.assert_array_equal(rows(links, cap, multiplicity), python)
    np.testing.assert_array_equal(vectorized(links, cap, multiplicity), arrays)


def _uneven_all_to_all(comm):
    p, r = comm.size, comm.rank
    waits = [comm.send(sc.VirtualBuffer.of(1000 * (1 + (7 * r + 13 * j) % 11), np.float32),
                       j) for j in range(p) if j != r]
    waits += [comm.recv(j) for j in range(p) if j != r]
    for event in waits:  # noqa: UP028 (a list cannot take SimPy's values)
        yield event


def _runs(network):
    return (sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl",
                        nbytes="16MiB", network=network),
            sc.run_program(sc.topology.switch(24), _uneven_all_to_all, network=network))


@numba_only
@pytest.mark.parametrize("network", ["flow", "flow_rtt"])
@pytest.mark.parametrize("warmup", [0, 15_000])
def test_runs_are_the_same_with_and_without_the_compiled_solvers(monkeypatch, warmup,
                                                                 network):
    # warmup=0: compiled from the first solve; 15,000: the pure solvers first, then the
    # compiled ones from mid-run (the NCCL run gives them about 8,900 route entries on
    # flow and 85,000 on flow_rtt, the all-to-all about 21,000).
    # flow_rtt: weighted sharing (dgx_h100's links have unequal latencies).
    monkeypatch.setattr(compiled, "WARMUP", warmup)
    monkeypatch.setattr(compiled, "_work", 0)
    monkeypatch.setattr(compiled, "_SOLVERS", None)
    fast = _runs(network)
    assert compiled._SOLVERS is not None
    monkeypatch.setattr(compiled, "AVAILABLE", False)
    pure = _runs(network)
    for a, b in zip(fast, pure):
        assert a.time == b.time
        assert a.link_bytes == b.link_bytes
        np.testing.assert_array_equal(a.rank_times, b.rank_times)


def test_the_compiled_solvers_wait_for_enough_pure_work(monkeypatch):
    monkeypatch.setattr(compiled, "AVAILABLE", True)
    monkeypatch.setattr(compiled, "WARMUP", 100)
    monkeypatch.setattr(compiled, "_work", 0)
    monkeypatch.setattr(compiled, "_SOLVERS", None)
    monkeypatch.setitem(sys.modules, "numba", None)  # would warn if it were imported
    assert compiled.solver("rows", 60) is None
    assert compiled.solver("arrays", 39) is None
    assert compiled._work == 99


def test_a_numba_that_cannot_be_imported_falls_back_to_the_pure_solvers(monkeypatch):
    monkeypatch.setattr(compiled, "AVAILABLE", True)
    monkeypatch.setattr(compiled, "WARMUP", 0)
    monkeypatch.setattr(compiled, "_SOLVERS", None)
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    with pytest.warns(RuntimeWarning, match="numba is installed but cannot be imported"):
        assert compiled.solver("arrays") is None
    assert compiled.AVAILABLE is False
    res = sc.run_program(sc.topology.switch(6), _uneven_all_to_all)
    assert res.time > 0


def test_simcoll_no_jit_turns_the_compiled_solvers_off():
    env = dict(os.environ, SIMCOLL_NO_JIT="1")
    out = subprocess.run([sys.executable, "-c", "from simcoll.network import compiled; "
                          "print(compiled.AVAILABLE)"], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


_LOAD_WITHOUT_BLAS = """
import sys
from simcoll.network import compiled
compiled.WARMUP = 0
compiled.solver("resolve")
print("numba.np.arraymath" in sys.modules,
      sys.modules.get("scipy.linalg.cython_blas", "absent"))
try:
    import scipy.linalg.cython_blas
except ModuleNotFoundError:
    print("no scipy")
else:
    print("scipy.linalg.cython_blas" in sys.modules)
"""


@numba_only
def test_numbas_numpy_support_loads_without_probing_blas_and_leaves_it_importable():
    # A fresh interpreter: numba's numpy support is imported with SciPy's BLAS answered
    # absent, no None entry is left behind, and SciPy's BLAS imports afterwards.
    out = subprocess.run([sys.executable, "-c", _LOAD_WITHOUT_BLAS], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert out[0] == "True absent"
    assert out[1] in ("True", "no scipy")


def test_cached_code_of_changed_kernels_is_dropped(tmp_path):
    package = tmp_path
    for name in (*compiled.KERNEL_MODULES, "maxmin", "weighted"):
        (package / f"{name}.py").write_text(f"# {name}\n")
    cache = package / "__pycache__"
    cache.mkdir()
    cached = [cache / "resolve_kernel.resolve-31.py311.nbi",
              cache / "weighted_kernels.pairwise_sum-40.py311.1.nbc"]
    other = cache / "general.cpython-311.pyc"
    for path in [*cached, other]:
        path.write_text("")
    compiled._drop_stale_cache(package)  # no stamp yet: whatever is cached may be stale
    assert not any(path.exists() for path in cached) and other.exists()
    for path in cached:
        path.write_text("")
    compiled._drop_stale_cache(package)  # same sources: the cache stays
    assert all(path.exists() for path in cached)
    (package / "weighted_kernels.py").write_text("# changed\n")
    compiled._drop_stale_cache(package)
    assert not any(path.exists() for path in cached) and other.exists()
    # numba bakes maxmin.TIE and weighted.REFRESH into the kernels: a changed tie
    # tolerance kept the old one in cached code (the compiled solver 1.0000000001 where
    # the pure one gave 1.0)
    for constants in ("maxmin", "weighted"):
        for path in cached:
            path.write_text("")
        compiled._drop_stale_cache(package)
        assert all(path.exists() for path in cached)
        (package / f"{constants}.py").write_text("TIE = 1e-9\n")
        compiled._drop_stale_cache(package)
        assert not any(path.exists() for path in cached) and other.exists()


def test_a_weighted_solve_whose_weights_overflow_raises_instead_of_spinning():
    """Two flows of weight 1e308 on one link sum to infinity: the share is 0 and 0 x inf
    is NaN, so no link compares as the bottleneck; the pure Python weighted solver looped
    for ever (flow_rtt now refuses the routes that give such weights, but a solver must
    not hang on any input)."""
    import signal

    from simcoll.network.weighted import fill_arrays_weighted, fill_weighted

    routes, capacity, weights = [(0,), (0,)], [1.0], [1e308, 1e308]
    links, cap, ones = _arguments(routes, capacity, None)
    solves = [lambda: fill_weighted(routes, {0: 1.0}, weights),
              lambda: fill_arrays_weighted(links, cap, np.array(weights))]
    rows = compiled.solver("weighted_rows", compiled.WARMUP)
    arrays = compiled.solver("weighted_arrays", compiled.WARMUP)
    solves += [lambda f=f: f(links, cap, np.array(weights), ones)
               for f in (rows, arrays) if f is not None]
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the solver spun"))
    try:
        for solve in solves:
            signal.alarm(20)
            with pytest.raises(ValueError, match="no link is a bottleneck"):
                solve()
    finally:
        signal.alarm(0)
