"""Collective algorithms, registered by ``(collective, name)``; one module per family."""

from __future__ import annotations

from simcoll.algorithms import (
    bruck,
    bucketed,
    direct,
    hierarchical,
    naive,
    pairwise,
    parameter_server,
    pipeline,
    recursive,
    ring,
    tree,
)
from simcoll.algorithms.registry import (
    ENTRY_POINT_GROUP,
    AlgorithmSpec,
    algorithms,
    get_algorithm,
    register,
)

__all__ = ["AlgorithmSpec", "register", "get_algorithm", "algorithms", "ENTRY_POINT_GROUP",
           "bruck", "bucketed", "direct", "hierarchical", "naive", "pairwise", "parameter_server",
           "pipeline", "recursive", "ring", "tree"]
