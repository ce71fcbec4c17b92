"""Sweeps: run a grid of simulations, save each point as it finishes, resume, load.

* :mod:`~simcoll.sweep.grid`: check the arguments and lay out the points.
* :mod:`~simcoll.sweep.workers`: run them here, in a process pool or on any Executor.
* :mod:`~simcoll.sweep.records`: a point's record and identity; ``SweepResults``,
  ``FailedPoint``.
* :mod:`~simcoll.sweep.storage`: the JSON-lines save file; ``load_results``.
* :mod:`~simcoll.sweep.driver`: ``sweep`` itself.

``simcoll.sweep`` is the function (``simcoll/__init__.py`` binds it over this package's
name), so reach these modules with ``from simcoll.sweep.storage import ResultFile`` or
``sys.modules["simcoll.sweep.storage"]``, not ``import simcoll.sweep.storage as m``.
"""

from __future__ import annotations

from simcoll.sweep.driver import sweep
from simcoll.sweep.records import FailedPoint, SweepResults
from simcoll.sweep.storage import load_results

__all__ = ["sweep", "load_results", "SweepResults", "FailedPoint"]
