"""A data-parallel step as one collective: DDP's overlapped gradient all-reduce.

A data-parallel step is a forward pass, then a backward pass during which the gradient
buckets are all-reduced as soon as they are ready (``all_reduce`` algorithm
``"bucketed"``), overlapping communication with the rest of the backward pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcoll.algorithms.bucketed import MAX_BUCKETS, PARAMS, check_inner_params
from simcoll.algorithms.registry import get_algorithm
from simcoll.buffers import VirtualBuffer
from simcoll.checks import real, size
from simcoll.collectives import collective
from simcoll.dtypes import as_dtype
from simcoll.errors import InvalidInputError
from simcoll.inputs import check_counters, check_inputs, check_topology
from simcoll.ops import ReduceOp
from simcoll.result import Result
from simcoll.simulate import simulate
from simcoll.topology.graph import Topology
from simcoll.training.common import STEP_UNTIL
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


def data_parallel_step(topology: Topology, *, gradient_bytes: int | str, forward: float,
                       backward: float, bucket_bytes: int | str = 25 * MiB,
                       algorithm: str = "ring", network: str = "flow",
                       algorithm_params: Mapping[str, Any] | None = None,
                       **kwargs: Any) -> DataParallelStep:
    """Simulate one DDP step: every GPU holds the model and averages its gradients.

    Args:
        gradient_bytes: size of all gradients (bytes, e.g. 4 * parameters for fp32, or
            a size such as ``"1GiB"``); with ``data=``, the bytes of each rank's array.
        forward, backward: seconds of compute per GPU for each pass.
        bucket_bytes: DDP's ``bucket_cap_mb`` in bytes or as a size string (default
            25 MiB, as PyTorch);
            the gradients are cut into B = ceil(gradient_bytes / bucket_bytes) buckets
            of equal element counts where B divides the count (else the first buckets
            hold one element more, and may pass ``bucket_bytes`` by that element, as
            DDP's buckets pass their cap by a tensor).
        algorithm: the flat all_reduce algorithm for each bucket (not
            ``parameter_server`` nor ``hierarchical``; :func:`data_parallel` runs
            ``hierarchical``, and ``parameter_server`` where the machine has no server
            hosts).
        network: network model.
        algorithm_params: that algorithm's parameters for every bucket (e.g.
            ``{"proto": "LL128"}`` with ``algorithm="nccl"``).
        **kwargs: passed to :func:`simcoll.simulate` (``dtype``, ``data`` instead of
            sizes, ``op`` (default ``"avg"``), ``trace``, ``until`` (default none, as
            for every training step), ...; not ``faults``: the
            forward pass is not simulated, so a slow GPU's would go unseen; give
            ``faults`` to :func:`simcoll.simulate` with ``algorithm="bucketed"``
            instead); the bucketed all_reduce's own
            parameters come from the arguments above (``buckets`` from ``bucket_bytes``,
            ``compute`` from ``backward``, ``inner`` from ``algorithm``, ``inner_params``
            from ``algorithm_params``, ``nbytes`` from ``gradient_bytes``) and are
            refused here.

    Raises:
        InvalidInputError: non-positive sizes, negative times, ``faults``, an algorithm
            that cannot reduce a bucket, gradients that are not whole elements or that
            ``data`` does not hold, buckets smaller than an element, parameters the
            algorithm does not take for the smallest bucket or with which it cannot
            choose on this machine (NCCL's ``algo="nvls"`` without NVLS), or a keyword
            set from the arguments above.
    """
    for key in sorted(set(kwargs) & set(_SET_HERE)):
        raise InvalidInputError(f"data_parallel_step sets {key}= itself; give "
                                f"{_SET_HERE[key]}= instead")
    if "faults" in kwargs:
        raise InvalidInputError("data_parallel_step does not take faults=: its forward pass "
                                "is not simulated, so a slow GPU's would go unseen and its "
                                "extra compute would count as exposed communication; "
                                "simulate the backward pass and its buckets with "
                                "simcoll.simulate(..., algorithm='bucketed', faults=...)")
    bucket_bytes = size(bucket_bytes, "bucket_bytes", minimum=1)
    gradient_bytes = size(gradient_bytes, "gradient_bytes", minimum=1)
    forward = real(forward, "forward", what="seconds")
    backward = real(backward, "backward", what="seconds")
    inner = PARAMS["inner"].normalize("algorithm", algorithm)
    if algorithm_params is not None and not isinstance(algorithm_params, Mapping):
        raise InvalidInputError(f"algorithm_params={algorithm_params!r} is not accepted; "
                                f"give a dict of the algorithm's parameters, e.g. "
                                f"{{'proto': 'LL128'}}")
    topology = check_topology(topology)
    if "data" in kwargs:
        inputs = check_inputs(topology.nranks, kwargs["data"], None, None,
                              collective("all_reduce"))
        if inputs.nbytes != gradient_bytes:
            raise InvalidInputError(f"gradient_bytes={gradient_bytes} but data= holds "
                                    f"{inputs.nbytes} bytes per rank; give the arrays' size")
        dtype = inputs.dtype
    else:
        dtype = as_dtype(kwargs.get("dtype", np.float32))
        if gradient_bytes % dtype.itemsize:
            raise InvalidInputError(f"gradient_bytes={gradient_bytes} is not a whole number "
                                    f"of {dtype} elements ({dtype.itemsize} bytes each)")
        kwargs["nbytes"] = gradient_bytes
    check_counters(gradient_bytes, topology.nranks, name="gradient_bytes")
    buckets = -(-gradient_bytes // bucket_bytes)   # exact: a float quotient rounds
    if buckets > MAX_BUCKETS:
        raise InvalidInputError(
            f"bucket_bytes={bucket_bytes} would cut the {gradient_bytes} gradient bytes "
            f"into {buckets} buckets; at most {MAX_BUCKETS} are simulated: use bucket_bytes "
            f">= {-(-gradient_bytes // MAX_BUCKETS)} (bytes: PyTorch's bucket_cap_mb=25 is "
            f"25 * sc.MiB or '25MiB')")
    if bucket_bytes < dtype.itemsize:
        raise InvalidInputError(f"bucket_bytes={bucket_bytes} would cut the gradients into "
                                f"{buckets} buckets, more than their "
                                f"{gradient_bytes // dtype.itemsize} {dtype} elements; use "
                                f"bucket_bytes >= {dtype.itemsize}")
    op = kwargs.pop("op", "avg")
    if algorithm_params:
        _check_algorithm_params(topology, inner, dict(algorithm_params), op, buckets,
                                VirtualBuffer.of(gradient_bytes // dtype.itemsize, dtype))
        kwargs["inner_params"] = dict(algorithm_params)
    res = simulate(topology, "all_reduce", algorithm="bucketed", network=network,
                   buckets=buckets, compute=backward, inner=inner, op=op,
                   until=kwargs.pop("until", STEP_UNTIL), **kwargs)
    # the run adds the backward pass's B pieces: it may end an ulp before their sum
    exposed = 0.0 if math.isclose(res.time, backward, rel_tol=1e-12) else res.time - backward
    return DataParallelStep(step_time=forward + res.time,
                            exposed_communication=exposed, buckets=buckets,
                            allreduce=res)


def _check_algorithm_params(topology: Topology, algorithm: str, params: dict[str, Any],
                            op: Any, buckets: int, gradients: VirtualBuffer) -> None:
    """Refuse, before the run, ``params`` that ``algorithm`` refuses for the smallest of
    ``buckets`` buckets of ``gradients``, or with which its choice of the machine
    (``resolve``: NCCL's tuner, for ``algo="nvls"`` on a machine without NVLS) fails for
    a bucket all-reduced with ``op``, as the run would refuse them once started.

    Raises:
        InvalidInputError: naming ``algorithm_params`` and the reason.
    """
    try:
        check_inner_params(topology.nranks, gradients.count, len(topology.hosts),
                           topology.gpu_nodes, buckets, algorithm, params)
        try:
            combining = ReduceOp.parse(op).combining
        except InvalidInputError:   # the run refuses the op itself
            return
        get_algorithm("all_reduce", algorithm).resolved(
            topology, tuple(range(topology.nranks)),
            VirtualBuffer.of(gradients.count // buckets, gradients.dtype), params,
            op=combining, started=True)
    except InvalidInputError as exc:
        raise InvalidInputError(f"algorithm_params for algorithm={algorithm!r}: {exc}") from None


_SET_HERE = {"buckets": "bucket_bytes", "compute": "backward", "inner": "algorithm",
             "inner_params": "algorithm_params",
             "nbytes": "gradient_bytes"}
"""The bucketed all_reduce's arguments data_parallel_step sets, and where from."""
