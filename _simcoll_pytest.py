"""simcoll's pytest plugin (entry point ``pytest11``, name ``simcoll``).

It adds the ``simcoll_alpha``, ``simcoll_beta`` and ``simcoll_gamma`` ini options and the
session-wide ``simcoll_reference`` fixture: the reference network's constants as a
:class:`simcoll.testing.AlphaBeta`::

    [tool.pytest.ini_options]
    simcoll_alpha = "2e-6"     # seconds per message (>= 0)
    simcoll_beta = "1e-11"     # seconds per byte (> 0)
    simcoll_gamma = "0"        # seconds per reduced byte (>= 0; 0: free)

    def test_ring(simcoll_reference):
        res = simulate(simcoll_reference.network(8), "all_reduce", algorithm="ring", nbytes=1 << 20)
        simcoll_reference.check(res)  # traffic, lower bound and time against simcoll.cost

The module stands outside the ``simcoll`` package so that a pytest session of a project
that never asks for the fixture does not import simcoll (about 0.6 s): simcoll is
imported when the fixture is first used, or when pytest starts if an option is set to
other than its default. A value that is not accepted then stops the session with one
``pytest.UsageError`` naming the option, before any test runs
(:mod:`simcoll.testing.plugin` checks it). The defaults and texts below are
:class:`~simcoll.testing.AlphaBeta`'s and ``simcoll.testing.network.RULES``' (a test
holds them equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from simcoll.testing import AlphaBeta

#: option name -> (default as pytest shows it, what the constant is)
OPTIONS = {"alpha": ("1e-06", "seconds per message"),
           "beta": ("1e-11", "seconds per byte"),
           "gamma": ("2.5e-12", "seconds per reduced byte; 0: reductions are free")}


def pytest_addoption(parser: pytest.Parser) -> None:
    # pytest 9.2 types ini options by a type expression: a TOML table may then give a
    # number as a number; older pytest reads every value as a string
    typed = {"type": float | str} if pytest.version_tuple >= (9, 2) else {}
    for name, (default, what) in OPTIONS.items():
        parser.addini(f"simcoll_{name}", f"simcoll_reference fixture: {what}",
                      default=default, **typed)  # type: ignore[arg-type]


def pytest_configure(config: pytest.Config) -> None:
    # str(): pytest 9.2 gives a number a TOML or ini file writes as a float
    if any(str(config.getini(f"simcoll_{name}")) != default
           for name, (default, _) in OPTIONS.items()):
        from simcoll.testing.plugin import reference

        reference(config)


@pytest.fixture(scope="session")
def simcoll_reference(pytestconfig: pytest.Config) -> AlphaBeta:
    """The reference constants (``simcoll_alpha/beta/gamma`` ini options) as AlphaBeta,
    fixed for the session (so fixtures of any scope can use it)."""
    from simcoll.testing.plugin import reference

    return reference(pytestconfig)
