"""Helpers for pinning collective formulas in regression tests.

::

    from simcoll import simulate
    from simcoll.testing import alpha_beta_network, assert_time, assert_traffic, sweep

    @sweep(p=[2, 4, 8], nbytes=[1 << 10, 1 << 20])
    def test_ring_matches_formula(p, nbytes):
        net = alpha_beta_network(p, alpha=1e-6, beta=1e-11)
        res = simulate(net, "all_reduce", algorithm="ring", nbytes=nbytes)
        assert_traffic(res, sent=2 * (p - 1) / p * nbytes)
        assert_time(res, 2 * (p - 1) * 1e-6 + 2 * (p - 1) / p * nbytes * 1e-11)

Failures print expected and simulated values side by side. pytest is needed only by
``sweep``; the pytest plugin (module ``_simcoll_pytest``, name ``simcoll``) adds a
``simcoll_reference`` fixture.
"""

from __future__ import annotations

from simcoll.testing.asserts import assert_matches_model, assert_time, assert_traffic
from simcoll.testing.network import AlphaBeta, alpha_beta_network
from simcoll.testing.sweep import sweep

__all__ = ["alpha_beta_network", "AlphaBeta", "assert_time", "assert_traffic",
           "assert_matches_model", "sweep"]
