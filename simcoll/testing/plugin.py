"""pytest plugin (entry point ``pytest11``): the ``simcoll_reference`` fixture.

The fixture is the reference network's constants as a
:class:`~simcoll.testing.AlphaBeta`, set once per project in the pytest configuration::

    [tool.pytest.ini_options]
    simcoll_alpha = "2e-6"     # seconds per message (>= 0)
    simcoll_beta = "1e-11"     # seconds per byte (> 0)
    simcoll_gamma = "0"        # seconds per reduced byte (>= 0; 0: free)

    def test_ring(simcoll_reference):
        res = simulate(simcoll_reference.network(8), "all_reduce", algorithm="ring", nbytes=1 << 20)
        simcoll_reference.check(res)  # traffic, lower bound and time against simcoll.cost

The options are read when pytest starts: a value that is not accepted stops the session
with one ``pytest.UsageError`` naming the option, before any test runs.
"""

from __future__ import annotations

import dataclasses

import pytest

from simcoll.errors import TopologyError
from simcoll.testing.network import RULES, AlphaBeta, constant

_DEFAULTS = {f.name: repr(f.default) for f in dataclasses.fields(AlphaBeta)}
_REFERENCE = pytest.StashKey[AlphaBeta]()


def pytest_addoption(parser: pytest.Parser) -> None:
    # pytest 9.2 types ini options by a type expression: a TOML table may then give a
    # number as a number; older pytest reads every value as a string
    typed = {"type": float | str} if pytest.version_tuple >= (9, 2) else {}
    for name, default in _DEFAULTS.items():
        parser.addini(f"simcoll_{name}", f"simcoll_reference fixture: {RULES[name][1]}",
                      default=default, **typed)  # type: ignore[arg-type]


def _option(config: pytest.Config, name: str) -> float:
    raw = config.getini(f"simcoll_{name}")
    strict, what = RULES[name]
    try:
        value = float(raw)
    except (TypeError, ValueError):  # not a number
        raise pytest.UsageError(
            f"ini option simcoll_{name} = {raw!r} is not accepted; use a finite number "
            f"{'>' if strict else '>='} 0 ({what})") from None
    try:
        return constant(name, value)
    except TopologyError as exc:     # out of its range: the range, as constant() says it
        accepted = str(exc).split(" is not accepted; ", 1)[-1]
        raise pytest.UsageError(f"ini option simcoll_{name} = {raw!r} is not accepted; "
                                f"{accepted}") from None


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REFERENCE] = AlphaBeta(**{name: _option(config, name)
                                            for name in _DEFAULTS})


@pytest.fixture(scope="session")
def simcoll_reference(pytestconfig: pytest.Config) -> AlphaBeta:
    """The reference constants (``simcoll_alpha/beta/gamma`` ini options) as AlphaBeta,
    fixed for the session (so fixtures of any scope can use it)."""
    return pytestconfig.stash[_REFERENCE]
