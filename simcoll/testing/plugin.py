"""The pytest plugin's checks: the ``simcoll_*`` ini options read as an AlphaBeta.

The plugin itself (its options and the ``simcoll_reference`` fixture) is the top-level
module ``_simcoll_pytest``, which imports this one only when the fixture is used or an
option is set, so that pytest sessions that use neither do not import simcoll.
"""

from __future__ import annotations

import dataclasses

import pytest

from simcoll.errors import TopologyError
from simcoll.testing.network import RULES, AlphaBeta, constant

_REFERENCE = pytest.StashKey[AlphaBeta]()


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


def reference(config: pytest.Config) -> AlphaBeta:
    """The session's constants from its ``simcoll_alpha/beta/gamma`` ini options, read
    once per session.

    Raises:
        pytest.UsageError: an option that is not a finite number in its range, naming it.
    """
    if _REFERENCE not in config.stash:
        config.stash[_REFERENCE] = AlphaBeta(**{field.name: _option(config, field.name)
                                                for field in dataclasses.fields(AlphaBeta)})
    return config.stash[_REFERENCE]
