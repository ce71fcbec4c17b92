"""pytest plugin (entry point ``pytest11``): the ``simcoll_reference`` fixture.

The fixture is the reference network's constants as a
:class:`~simcoll.testing.AlphaBeta`, set once per project in the pytest configuration::

    [tool.pytest.ini_options]
    simcoll_alpha = "2e-6"     # seconds per message
    simcoll_beta = "1e-11"     # seconds per byte
    simcoll_gamma = "0"        # seconds per reduced byte (0: free)

    def test_ring(simcoll_reference):
        res = simulate(simcoll_reference.network(8), "all_reduce", algorithm="ring", nbytes=1 << 20)
        simcoll_reference.check(res)  # traffic, lower bound and time against simcoll.cost
"""

from __future__ import annotations

import dataclasses

import pytest

from simcoll.testing.network import AlphaBeta

_DEFAULTS = {f.name: repr(f.default) for f in dataclasses.fields(AlphaBeta)}
_HELP = {"alpha": "seconds per message", "beta": "seconds per byte",
         "gamma": "seconds per reduced byte"}


def pytest_addoption(parser: pytest.Parser) -> None:
    for name, default in _DEFAULTS.items():
        parser.addini(f"simcoll_{name}", f"simcoll_reference fixture: {_HELP[name]}",
                      default=default)


@pytest.fixture
def simcoll_reference(pytestconfig: pytest.Config) -> AlphaBeta:
    """The reference constants (``simcoll_alpha/beta/gamma`` ini options) as AlphaBeta."""
    values = {}
    for name in _DEFAULTS:
        raw = pytestconfig.getini(f"simcoll_{name}")
        try:
            values[name] = float(raw)
        except ValueError:
            raise pytest.UsageError(f"simcoll_{name} = {raw!r} is not a number") from None
    return AlphaBeta(**values)
