"""Shared test helpers: input data and the alpha-beta reference network."""

from __future__ import annotations

import math
import os
import signal
import sys

import numpy as np
import pytest
import simpy

import simcoll as sc
from simcoll.algorithms import Value, registry
from simcoll.cost import CostModel
from simcoll.network import NETWORKS, Network

ALPHA = 1e-6
BETA = 1 / (100 * sc.GB)
GAMMA = 1 / (400 * sc.GB)


def pytest_configure(config):
    """The tests that press Ctrl-C on a child process need it to take SIGINT: a test run
    started as a background job of a shell (``pytest ... &``) inherits SIGINT ignored,
    which its children (and pytest-xdist's workers) would inherit in turn. Python's own
    handler here makes them start with the default."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


V_COLLECTIVES = ("all_gatherv", "reduce_scatterv", "all_to_allv")
"""The collectives whose sizes differ between ranks. The generic tests over every
registered algorithm give every rank one size (``nbytes=``, one array length), which these
do not take; tests/test_uneven.py runs the same checks on them (numpy results, modelled
traffic and time, data-free against data mode, time == last activity on random machines)
with random splits."""


STOCK_PAIRS = [pair for pair in sc.list_algorithms()
               if sc.get_algorithm(*pair).fn.__module__.startswith("simcoll.")
               and pair[0] not in V_COLLECTIVES]
"""Every (collective, algorithm) simcoll ships that takes one size for every rank."""


def draw_case(data, pair, p, hosts=0, *, servers_on_gpus=True):
    """Root and servers for ``pair`` on ``p`` ranks and ``hosts`` server hosts, drawn
    where the collective or algorithm takes them (servers among the GPUs where there are
    no hosts, unless ``servers_on_gpus`` is false)."""
    from hypothesis import strategies as st

    coll, alg = pair
    kwargs = {}
    if sc.COLLECTIVES[coll].rooted:
        kwargs["root"] = data.draw(st.integers(0, p - 1), label="root")
    if alg == "parameter_server" and (hosts or servers_on_gpus):
        kwargs["servers"] = data.draw(st.integers(1, hosts or p), label="servers")
    return kwargs


def _no_formula(*args, **kwargs):
    raise AssertionError("a test-only program has no formula; nothing may ask for its cost")


NO_FORMULA = CostModel(time=_no_formula, traffic=_no_formula, exact=_no_formula)
"""The cost model of the programs tests register to provoke errors or probe the engine:
every algorithm must carry one, and these are never checked against a formula."""


def register_probe(collective: str, name: str, **defaults):
    """Register a test's probe program once (tests re-import), with ``NO_FORMULA`` and a
    ``Value`` parameter for each keyword default given, or for each keyword-only
    parameter the program gives a default (other than ``op`` and ``root``): the spec
    takes the default over, as the registry wants."""
    def decorator(fn):
        if not hasattr(fn, "probe_defaults"):  # taken over once, kept for re-registering
            kept = dict(fn.__kwdefaults__ or {})
            fn.probe_defaults = {k: kept.pop(k) for k in list(kept) if k not in ("op", "root")}
            fn.__kwdefaults__ = kept or None
        if (collective, name) not in sc.list_algorithms(collective):
            specs = {**fn.probe_defaults, **defaults}
            sc.register(collective, name, cost=NO_FORMULA,
                        params={k: Value(v) for k, v in specs.items()})(fn)
        return fn
    return decorator


@pytest.fixture(autouse=True)
def _algorithms_registered_by_a_test_end_with_it():
    """Forget what a test registered, so that the suite can run twice in one process (a
    mutation-testing tool does): the test's second run registers a new function object
    under the same name, which the registry refuses."""
    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


@pytest.fixture(autouse=True)
def _figures_a_test_opened_end_with_it():
    """Close what a test drew (matplotlib keeps every pyplot figure open, and warns past
    20), without importing matplotlib for tests that draw nothing."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


def make_data(p: int, count: int, dtype, op: sc.ReduceOp = sc.ReduceOp.SUM, seed: int = 0,
              *, full_range: bool = False):
    """One array per rank, with values that keep ``op`` well inside the dtype's range (or,
    for integers with ``full_range``, anywhere in it, so that sums and products wrap)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if full_range and dtype.kind in "iu":
        info = np.iinfo(dtype)
        return [rng.integers(info.min, info.max, count, dtype=dtype, endpoint=True)
                for _ in range(p)]
    if dtype.kind == "f":
        if op is sc.ReduceOp.PRODUCT:
            return [rng.uniform(0.8, 1.25, count).astype(dtype) for _ in range(p)]
        return [(rng.standard_normal(count) * 10).astype(dtype) for _ in range(p)]
    high = 4 if op is sc.ReduceOp.PRODUCT else 1000
    return [rng.integers(-high, high, count).astype(dtype) for _ in range(p)]


class RunReached(Exception):
    """A step passed every check before its run (raised by :func:`run_reached`)."""


def run_reached(*args, **kwargs):
    """A stand-in for a training module's run_program: raises :class:`RunReached`."""
    raise RunReached


def compensated_sum(values, start=0):
    """A sum() that compensates its rounding, as Python 3.12's does for floats (exactly
    rounded here, math.fsum): 1e-6 + 3e-7 + 1e-7 gives 1.4e-06 and 0.1 + 0.2 + 0.3 gives
    0.6, where adding left to right gives 1.3999999999999997e-06 and 0.6000000000000001.
    A test gives it to a module (monkeypatch) to check the module sums in order on any
    Python."""
    return math.fsum(values) + start


def reference_network(p: int, servers: int = 0) -> sc.Topology:
    """The single-port alpha-beta reference network (README, "The network model"), with a
    finite gamma."""
    return sc.topology.switch(p, bandwidth=1 / BETA, latency=ALPHA / 2,
                              reduce_bandwidth=1 / GAMMA, servers=servers,
                              server_reduce_bandwidth=1 / GAMMA)


def run_flows(topo: sc.Topology, flows, network: str | type[Network] = "flow") -> list[float]:
    """Start ``(start_time, src, dst, nbytes)`` transfers on a bare network model (by
    name or class); return each one's arrival time."""
    cls = NETWORKS[network] if isinstance(network, str) else network
    env = simpy.Environment()
    net = cls(env, topo, topo.nranks + len(topo.hosts))
    arrived: dict[int, float] = {}

    def starter(i, src, dst, nbytes):
        def start(_):
            net.transfer(src, dst, nbytes, lambda token: arrived.__setitem__(token, env.now), i)
        return start

    for i, (t0, src, dst, nbytes) in enumerate(flows):
        env.timeout(t0).callbacks.append(starter(i, src, dst, nbytes))
    env.run()
    return [arrived[i] for i in range(len(flows))]


class DiesInAWorker(sc.Topology):
    """A machine that ends the worker process that receives it, as the OOM killer would
    (a sweep's pool sends each point's machine to a worker)."""

    def __reduce__(self):
        return os._exit, (3,)
