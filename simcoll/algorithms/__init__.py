"""Collective algorithms, registered by ``(collective, name)``; one module per family.

Every module of this package is imported here, so an algorithm registered in a new family
module is listed without being named anywhere else. ``registry`` holds the registry,
``params`` the parameter specs, ``fold`` helpers shared by the recursive families.
"""

from __future__ import annotations

import importlib
import pkgutil

from simcoll.algorithms.params import (
    Choice,
    Int,
    Keywords,
    Names,
    Optional,
    Param,
    Real,
    Value,
)
from simcoll.algorithms.registry import (
    ENTRY_POINT_GROUP,
    AlgorithmSpec,
    algorithms,
    get_algorithm,
    register,
)


def import_all() -> tuple[str, ...]:
    """Import every module of this package (family modules register on import); return
    their names, sorted."""
    names = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names


MODULES = import_all()
"""The modules of this package, every one imported."""

__all__ = ["AlgorithmSpec", "register", "get_algorithm", "algorithms", "ENTRY_POINT_GROUP",
           "Param", "Int", "Real", "Choice", "Names", "Optional", "Value", "Keywords",
           "MODULES",
           "import_all"]
