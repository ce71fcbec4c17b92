"""The algorithm registry, keyed by ``(collective, name)``.

Algorithms register with the :func:`register` decorator. Third-party packages add theirs
through the entry-point group ``simcoll.algorithms``: each entry point names a module (or
callable) that registers algorithms when loaded; they are loaded on first lookup.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from simcoll.collectives import collective as _collective
from simcoll.errors import UnknownAlgorithmError

__all__ = ["AlgorithmSpec", "register", "get_algorithm", "algorithms", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "simcoll.algorithms"


@dataclass(frozen=True)
class AlgorithmSpec:
    """A registered algorithm.

    Attributes:
        fn: per-rank generator function ``fn(comm, x, **kwargs)``.
        host: generator function run on each server host, ``host(comm, **kwargs)``, or None.
        validate: ``validate(p, count, hosts, **params)`` raising ``InvalidInputError``
            for rank counts, sizes or parameters the algorithm does not accept, or None.
            A validate that declares a keyword-only ``nodes`` parameter also gets the node
            of every rank (hierarchical algorithms refuse uneven nodes that way).
    """

    collective: str
    name: str
    fn: Callable[..., Any]
    host: Callable[..., Any] | None = None
    validate: Callable[..., None] | None = None

    def check(self, p: int, count: int, hosts: int, nodes: tuple[int, ...],
              params: dict[str, Any]) -> None:
        """Run ``validate`` (if any) before the simulation starts."""
        if self.validate is None:
            return
        if "nodes" in inspect.signature(self.validate).parameters:
            params = {**params, "nodes": nodes}
        self.validate(p, count, hosts, **params)

    @property
    def params(self) -> tuple[str, ...]:
        """Keyword parameters the algorithm accepts beyond ``op`` and ``root``."""
        sig = inspect.signature(self.fn)
        return tuple(name for name, p in sig.parameters.items()
                     if p.kind is p.KEYWORD_ONLY and name not in ("op", "root"))


_REGISTRY: dict[tuple[str, str], AlgorithmSpec] = {}
_plugins_loaded = False


def register(collective: str, name: str, *, host: Callable[..., Any] | None = None,
             validate: Callable[..., None] | None = None) -> Callable:
    """Decorator: register a generator function as ``name`` for ``collective``.

    Raises:
        UnknownCollectiveError: the collective does not exist.
        ValueError: the pair is already registered.
        TypeError: ``fn`` is not a generator function.
    """
    _collective(collective)

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.isgeneratorfunction(fn):
            raise TypeError(f"{collective}/{name}: {fn!r} is not a generator function; an "
                            f"algorithm yields the events comm returns")
        key = (collective, name)
        if key in _REGISTRY and _REGISTRY[key].fn is not fn:
            raise ValueError(f"algorithm {name!r} is already registered for {collective!r}")
        _REGISTRY[key] = AlgorithmSpec(collective, name, fn, host, validate)
        return fn

    return decorator


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        loaded = ep.load()
        if callable(loaded) and not inspect.isgeneratorfunction(loaded):
            loaded()


def algorithms(collective: str | None = None) -> list[tuple[str, str]]:
    """Registered ``(collective, name)`` pairs, optionally for one collective, sorted."""
    _load_plugins()
    return sorted(k for k in _REGISTRY if collective is None or k[0] == collective)


def get_algorithm(collective: str, name: str) -> AlgorithmSpec:
    """The algorithm ``name`` for ``collective``.

    Raises:
        UnknownCollectiveError: unknown collective.
        UnknownAlgorithmError: unknown algorithm; the message lists the known ones.
    """
    _collective(collective)
    _load_plugins()
    spec = _REGISTRY.get((collective, name))
    if spec is None:
        known = ", ".join(n for _, n in algorithms(collective)) or "none yet"
        raise UnknownAlgorithmError(
            f"unknown algorithm {name!r} for {collective!r}; known algorithms: {known}")
    return spec
