"""Training-step models built on the simulator. Data parallelism (PyTorch DDP) for now.

A data-parallel step is a forward pass, then a backward pass during which the gradient
buckets are all-reduced as soon as they are ready (``all_reduce`` algorithm
``"bucketed"``), overlapping communication with the rest of the backward pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from simcoll.checks import integer, real
from simcoll.result import Result
from simcoll.simulate import simulate
from simcoll.topology.graph import Topology
from simcoll.units import MiB

__all__ = ["DataParallelStep", "data_parallel_step"]


@dataclass(frozen=True)
class DataParallelStep:
    """One simulated data-parallel step.

    Attributes:
        step_time: forward + backward with the overlapped gradient all-reduce, seconds.
        exposed_communication: the part of the gradient all-reduce not hidden behind the
            backward pass (``step_time - forward - backward``), seconds.
        buckets: how many buckets the gradients were cut into.
        allreduce: the simulation of the backward pass and its all-reduces.
    """

    step_time: float
    exposed_communication: float
    buckets: int
    allreduce: Result


def data_parallel_step(topology: Topology, *, gradient_bytes: int, forward: float,
                       backward: float, bucket_bytes: int = 25 * MiB,
                       algorithm: str = "ring", network: str = "flow",
                       **kwargs: Any) -> DataParallelStep:
    """Simulate one DDP step: every GPU holds the model and averages its gradients.

    Args:
        gradient_bytes: size of all gradients (bytes, e.g. 4 * parameters for fp32).
        forward, backward: seconds of compute per GPU for each pass.
        bucket_bytes: DDP's ``bucket_cap_mb`` in bytes (default 25 MiB, as PyTorch);
            the gradients are cut into ceil(gradient_bytes / bucket_bytes) equal buckets.
        algorithm: the all_reduce algorithm for each bucket.
        network: network model.
        **kwargs: passed to :func:`simcoll.simulate` (``dtype``, ``data`` instead of
            sizes, ...).

    Raises:
        InvalidInputError: non-positive sizes or negative times.
    """
    bucket_bytes = integer(bucket_bytes, "bucket_bytes", minimum=1, what="bytes")
    gradient_bytes = integer(gradient_bytes, "gradient_bytes", minimum=0, what="bytes")
    forward = real(forward, "forward", what="seconds")
    backward = real(backward, "backward", what="seconds")
    buckets = max(1, math.ceil(gradient_bytes / bucket_bytes))
    if "data" not in kwargs:
        kwargs["nbytes"] = gradient_bytes
    res = simulate(topology, "all_reduce", algorithm="bucketed", network=network,
                   buckets=buckets, compute=backward, inner=algorithm,
                   op=kwargs.pop("op", "avg"), **kwargs)
    return DataParallelStep(step_time=forward + res.time,
                            exposed_communication=res.time - backward, buckets=buckets,
                            allreduce=res)
