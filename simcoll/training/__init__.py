"""Training steps on the simulated machine.

* :mod:`~simcoll.training.bucketed_step`: ``data_parallel_step``, DDP's overlapped
  gradient all-reduce as one ``bucketed`` collective.
"""

from __future__ import annotations

from simcoll.training.bucketed_step import DataParallelStep, data_parallel_step

__all__ = ["DataParallelStep", "data_parallel_step"]
