"""Checks every strategy makes before its run: the machine, the split of the batch, the
collective algorithms and the GPU's speed, each refused with a message naming the value."""

from __future__ import annotations

from typing import Any

from simcoll.algorithms.bucketed import refuse_step_model
from simcoll.algorithms.registry import get_algorithm
from simcoll.checks import integer, real
from simcoll.errors import InvalidInputError
from simcoll.inputs import check_topology
from simcoll.numeric.job import TrainingJob
from simcoll.topology.graph import Topology

__all__ = ["DEFAULT_FLOP_RATE", "check_job", "check_flop_rate", "data_parallel_degree",
           "local_batch", "check_algorithm", "check_algorithm_on_groups"]

DEFAULT_FLOP_RATE = 10e12
"""FLOP/s a simulated GPU sustains on the model's matrix products unless told otherwise."""


def check_job(topology: Any, job: Any) -> Topology:
    """The topology, once it and ``job`` are known to be valid.

    Raises:
        InvalidInputError, TopologyError: not a valid topology or not a TrainingJob.
    """
    topology = check_topology(topology)
    if not isinstance(job, TrainingJob):
        raise InvalidInputError(f"job={job!r:.80} is not accepted; use a "
                                f"simcoll.numeric.TrainingJob")
    return topology


def check_flop_rate(flop_rate: Any) -> float:
    """``flop_rate`` as a float > 0 (FLOP/s; ``inf`` makes compute free)."""
    return real(flop_rate, "flop_rate", strict=True, allow_inf=True, what="FLOP/s per GPU")


def data_parallel_degree(topology: Topology, model_parallel: int, name: str) -> int:
    """How many data-parallel replicas ``topology`` holds of ``model_parallel`` GPUs each.

    Raises:
        InvalidInputError: the GPU count is not a multiple of ``model_parallel``.
    """
    gpus = topology.nranks
    if gpus % model_parallel:
        raise InvalidInputError(f"{name}={model_parallel} does not divide the {gpus} GPUs of "
                                f"{topology.name!r}; the GPU count must be {name} x the "
                                f"data-parallel degree")
    return gpus // model_parallel


def local_batch(job: TrainingJob, replicas: int, micro_batches: int = 1) -> int:
    """Samples each data-parallel replica takes per step (checked to split evenly).

    Raises:
        InvalidInputError: the global batch does not split evenly across ``replicas``, or
            the replica's share does not split evenly into ``micro_batches``.
    """
    micro_batches = integer(micro_batches, "micro_batches", minimum=1)
    if job.batch % replicas:
        raise InvalidInputError(f"the global batch of {job.batch} samples does not split "
                                f"evenly across {replicas} data-parallel replicas; use a "
                                f"batch that is a multiple of {replicas}")
    share = job.batch // replicas
    if share % micro_batches:
        raise InvalidInputError(f"micro_batches={micro_batches} does not divide the "
                                f"{share} samples each data-parallel replica takes per step "
                                f"(global batch {job.batch} / {replicas} replicas)")
    return share


def check_algorithm(collective: str, name: Any, nodes: tuple[int, ...], count: int,
                    hosts: int = 0) -> str:
    """``name`` if it is a registered ``collective`` algorithm a rank program can start
    on a group of GPUs in ``nodes`` (each member's node) with buffers of ``count``
    elements, on a machine of ``hosts`` server hosts (where there are none, a parameter
    server's servers are ranks).

    Raises:
        UnknownAlgorithmError: no such algorithm (the message lists the known ones).
        InvalidInputError: one that needs server hosts, models a backward pass of its
            own (``bucketed``), or refuses the group size.
    """
    if not isinstance(name, str):
        raise InvalidInputError(f"{collective} algorithm {name!r} is not accepted; name a "
                                f"registered algorithm such as 'ring'")
    spec = get_algorithm(collective, name)
    refuse_step_model(name)
    if spec.host is not None and hosts:
        raise InvalidInputError(f"{collective} algorithm {name!r} runs programs on this "
                                f"machine's server hosts, which a training step cannot "
                                f"start; use an algorithm that runs on the GPUs alone, "
                                f"such as 'ring', or a machine without server hosts")
    spec.check(len(nodes), count, 0, nodes, {})
    return name


def check_algorithm_on_groups(collective: str, name: Any, topology: Topology,
                 groups: list[list[int]], count: int) -> str:
    """``name`` once :func:`check_algorithm` accepts it on every group of ranks in
    ``groups`` (each group's members' nodes read from ``topology``): an algorithm that
    reads the node layout (``hierarchical``) may take one group and refuse another.

    Raises:
        UnknownAlgorithmError, InvalidInputError: as :func:`check_algorithm`; a group's
            refusal names its ranks.
    """
    checked: set[tuple[int, ...]] = set()
    for group in groups:
        nodes = tuple(topology.gpu_nodes[r] for r in group)
        if nodes in checked:
            continue
        try:
            check_algorithm(collective, name, nodes, count, len(topology.hosts))
        except InvalidInputError as err:
            if type(err) is not InvalidInputError:
                raise
            raise InvalidInputError(f"the group of ranks {group}: {err}") from None
        checked.add(nodes)
    return name
