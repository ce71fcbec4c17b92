"""Paper-ready pictures of simulations; matplotlib is imported only when one is drawn.

* :func:`scaling`: time or bandwidth against ranks or size, one line per group, with the
  cost model's prediction dashed beside each line on request.
* :func:`timeline`: what each rank (and host) did when: sends, receives, reductions,
  compute, and the idle gaps between them.
* :func:`link_utilization`: a links x time heatmap of the fraction of bandwidth in use.
* :func:`comparison`: a measured nccl-tests table beside the same sizes simulated
  (:func:`simcoll.compare`): busbw against size, and the simulated over the measured time.

Each returns a matplotlib Figure and can save it (``save="fig.png"``, ``.svg``, ``.pdf``).
"""

from __future__ import annotations

from simcoll.plot.comparisons import comparison
from simcoll.plot.curves import plot_scaling, scaling
from simcoll.plot.links import link_utilization
from simcoll.plot.timelines import timeline

__all__ = ["scaling", "timeline", "link_utilization", "comparison", "plot_scaling"]
