"""Check a sweep's arguments and lay out its points, before anything is simulated.

Every argument is checked here, and the topology for each rank count is built here, in
the calling process: a factory whose topology has another number of ranks than asked is
refused, and the points sent to workers carry built topologies, so the factory itself
never has to be pickled (a lambda works with any number of workers).
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcoll.algorithms.params import Keywords
from simcoll.algorithms.registry import AlgorithmSpec, get_algorithm
from simcoll.checks import flag
from simcoll.collectives import collective as get_collective
from simcoll.collectives import root_argument
from simcoll.dtypes import as_dtype
from simcoll.errors import InvalidInputError, SimCollError, add_note
from simcoll.inputs import check_inputs, check_limits, check_op, check_root
from simcoll.network import network_class
from simcoll.sweep.records import point_key, topology_hash
from simcoll.topology.graph import Topology
from simcoll.units import parse_size

__all__ = ["Point", "Grid", "make_grid"]

# simulate() arguments a sweep sets itself, and what to use instead.
_RESERVED = {"data": "sweeps run in data-free mode; give sizes=",
             "nbytes": "give sizes=", "algorithm": "give algorithms=",
             "trace": "traces are not saved; call simulate(..., trace=True) for one point",
             "faults": "a record does not describe faults; call simulate(..., faults=...) "
                       "for each case",
             "splits": "it is for the v-collectives, which a sweep does not take"}
# simulate() arguments that limit or check a run but do not change what is simulated.
_RUN_OPTIONS = ("until", "max_events", "check")


@dataclass(frozen=True)
class Point:
    """One point of the grid: the record head that identifies it, what runs it.

    Attributes:
        head: the identifying and provenance fields of its record (JSON-ready).
        topology: the machine, or ``None`` when the factory failed for this rank count.
        error: the factory's error for this rank count (``{"type", "message"}``) or None.
        options: ``until`` / ``max_events`` / ``check`` for ``simulate``.
    """

    head: dict[str, Any]
    topology: Topology | None
    error: dict[str, str] | None
    options: dict[str, Any]

    @property
    def key(self) -> tuple[Any, ...]:
        """The point's identity (:func:`simcoll.sweep.records.point_key`)."""
        return point_key(self.head)


@dataclass(frozen=True)
class Grid:
    """The distinct points in grid order, and the key of every grid position (a grid
    with repeated values has the same point at several positions)."""

    points: list[Point]
    order: list[tuple[Any, ...]]


def _listed(name: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Iterable) or (
            isinstance(values, np.ndarray) and values.ndim != 1):   # a 0-d array: no list
        raise InvalidInputError(f"{name}={values!r} is not accepted; give a list, e.g. "
                                f"{name}=[{values!r}]")
    if isinstance(values, (set, frozenset)):  # its order changes from process to process
        raise InvalidInputError(f"{name}={values!r} is not accepted: a set has no order, "
                                f"and the sweep's results follow the grid's; give a list, "
                                f"e.g. {name}=sorted(...)")
    listed = list(values)
    if not listed:
        raise InvalidInputError(f"{name} is empty; the sweep grid needs at least one value")
    return listed


def _rank_count(p: Any) -> int:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)) or p < 1:
        raise InvalidInputError(f"ranks value {p!r} is not accepted; ranks are integers "
                                f">= 1 (Python or numpy integers)")
    return int(p)


def _size(size: Any, dtype: np.dtype) -> int:
    if isinstance(size, (bool, np.bool_)):
        raise InvalidInputError(f"sizes value {size!r} is not a size")
    try:
        nbytes = parse_size(int(size) if isinstance(size, np.integer) else size)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"sizes value {size!r} is not accepted: {exc}") from None
    if nbytes % dtype.itemsize:
        raise InvalidInputError(f"sizes value {size!r} ({nbytes} bytes) is not a multiple "
                                f"of the {dtype} item size ({dtype.itemsize} bytes)")
    return nbytes


def _json_param(name: str, value: Any) -> Any:
    """``value`` as it reads back from JSON, so what runs is what the record says."""
    def plain(v: Any) -> Any:
        if isinstance(v, np.generic):
            return v.item()
        raise TypeError(type(v).__name__)

    try:
        return json.loads(json.dumps(value, default=plain, allow_nan=False))
    except (TypeError, ValueError) as exc:
        why = ("JSON has no NaN or infinity" if "Out of range float" in str(exc)
               else str(exc))
        raise InvalidInputError(f"algorithm parameter {name}={value!r} is not accepted in a "
                                f"sweep: it must be saved as JSON ({why})") from None


def _normalized(spec: AlgorithmSpec, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as ``spec`` normalizes those it takes (the others as given: the point
    fails on them, as ``simulate`` would), as they read back from JSON."""
    return {k: _json_param(k, spec.normalized({k: v})[k]) if k in spec.params else v
            for k, v in params.items()}


def _check_params(collective: str, names: list[str], params: dict[str, Any]) -> None:
    """Refuse, before any point runs, a parameter that none of the sweep's algorithms
    takes (a misspelling, or the wrong sweep) and a value that an algorithm taking it
    refuses. An algorithm that does not take a parameter the others take fails its
    points with that reason, as ``simulate`` would."""
    specs = [get_algorithm(collective, name) for name in names]
    for key, value in params.items():
        takers = [spec for spec in specs if key in spec.params]
        if not takers:
            taken = "; ".join(f"{spec.name}: {', '.join(spec.params) or 'none'}"
                              for spec in specs)
            raise InvalidInputError(f"{key}={value!r} is taken by none of this sweep's "
                                    f"algorithms; their parameters are {taken}")
        for spec in takers:
            spec.normalized({key: value})
    for spec in specs:
        _check_keywords(spec, spec.normalized({k: v for k, v in params.items()
                                               if k in spec.params}))


def _check_keywords(spec: AlgorithmSpec, params: dict[str, Any]) -> None:
    """Refuse keywords passed on to another algorithm (bucketed's ``inner_params``) whose
    names or values that algorithm refuses whatever the machine, as ``simulate`` refuses
    them before a run."""
    for name, param in spec.params.items():
        if isinstance(param, Keywords) and param.algorithm_param and name in params:
            inner = params.get(param.algorithm_param, spec.params[param.algorithm_param].default)
            try:
                get_algorithm(spec.collective, inner).normalized(params[name])
            except InvalidInputError as exc:
                raise InvalidInputError(f"{name} for {param.algorithm_param}={inner!r}: "
                                        f"{exc}") from None


def importable_name(obj: Any) -> str | None:
    """``module:qualname`` if importing that gives back ``obj``, else None."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if found is obj else None


def _describe(factory: Any) -> str:
    return importable_name(factory) or repr(factory)


def _check_callable_with_one(factory: Any) -> None:
    """Refuse a factory that cannot be called with one rank count (its TypeError came
    from inside the sweep)."""
    try:
        inspect.signature(factory).bind(2)
    except TypeError as exc:
        raise InvalidInputError(f"topology factory {_describe(factory)} cannot be called "
                                f"with a rank count ({exc}); give a function of one "
                                f"argument, such as sc.topology.switch") from None
    except ValueError:  # no signature to read (a builtin): calling it will tell
        pass


def _build(factory: Callable[[int], Topology], p: int
           ) -> tuple[Topology | None, dict[str, str] | None]:
    """The topology for ``p`` ranks, or the SimCollError the factory raised for it."""
    _check_callable_with_one(factory)
    try:
        topology = factory(p)
    except SimCollError as exc:
        return None, {"type": type(exc).__name__, "message": str(exc)}
    except Exception as exc:
        add_note(exc, f"raised by topology factory {_describe(factory)} for ranks value "
                      f"p={p}")
        raise
    if not isinstance(topology, Topology):
        raise InvalidInputError(f"topology factory {_describe(factory)} returned a "
                                f"{type(topology).__name__} for p={p}, not a Topology")
    if topology.nranks != p:
        raise InvalidInputError(
            f"topology factory {_describe(factory)} built {topology.name!r} with "
            f"{topology.nranks} ranks for ranks value p={p}; sweep's ranks are rank "
            f"counts, so the factory must build exactly p ranks (for a preset that takes "
            f"nodes, e.g. lambda p: dgx_a100(p // 8) with ranks that are multiples of 8)")
    return topology, None


def make_grid(factory: Callable[[int], Topology], collective: str, *, algorithms: Any,
              ranks: Any, sizes: Any, kwargs: dict[str, Any]) -> Grid:
    """Check every argument, build each rank count's topology, and lay out the points.

    Raises:
        InvalidInputError (or a subclass): any bad argument, or a factory that builds
            something else than a topology of the asked rank count.
    """
    import simcoll

    if not callable(factory):
        raise InvalidInputError(f"topology={factory!r} is not a topology factory; give a "
                                f"function of the rank count, e.g. simcoll.topology.switch")
    coll = get_collective(collective)
    if coll.uneven is not None:
        raise InvalidInputError(f"sweep does not take {coll.name}: its sizes differ between "
                                f"ranks, and a sweep gives every rank one size per point; "
                                f"run simcoll.simulate(..., nbytes=[...]) for each case")
    names = _listed("algorithms", algorithms)
    for name in names:
        if not isinstance(name, str):
            raise InvalidInputError(f"algorithms value {name!r} is not an algorithm name")
    counts = [_rank_count(p) for p in _listed("ranks", ranks)]
    kwargs = dict(kwargs)
    for name, instead in _RESERVED.items():
        if name in kwargs:
            raise InvalidInputError(f"sweep does not take {name}=: {instead}")
    network = network_class(kwargs.pop("network", "flow")).name
    dtype = as_dtype(kwargs.pop("dtype", np.float32))
    reduce_op = check_op(coll, kwargs.pop("op", None))  # refused where none applies
    op = reduce_op.name if coll.reduces else None
    root = root_argument(coll, *(kwargs.pop(k, None) for k in ("root", "src", "dst")))
    if not coll.rooted:
        check_root(coll, root, 1)  # refuses a root
    elif root is None:
        root = 0
    elif isinstance(root, (bool, np.bool_)) or not isinstance(root, (int, np.integer)) \
            or root < 0:
        raise InvalidInputError(f"root={root!r} is not a rank; use an integer >= 0")
    options = {k: kwargs.pop(k) for k in _RUN_OPTIONS if k in kwargs}
    check_limits(options.get("until", 1.0), options.get("max_events", 1))
    flag(options.get("check", True), "check")
    _check_params(collective, names, kwargs)   # an algorithm's own refusal says most
    given = {k: _json_param(k, v) for k, v in sorted(kwargs.items())}
    # As each algorithm reads them (simulate's ``requested``): "RING" and "ring" are
    # one point.
    params = {name: _normalized(get_algorithm(collective, name), given) for name in names}
    nbytes = [_size(s, dtype) for s in _listed("sizes", sizes)]
    for size in dict.fromkeys(nbytes):
        try:  # a size that could overflow the traffic counters (on the most ranks)
            check_inputs(max(counts), None, size, dtype, coll)
        except InvalidInputError as exc:
            raise InvalidInputError(f"sizes value {size}: {exc}") from None

    built = {p: _build(factory, p) for p in dict.fromkeys(counts)}
    digests = {p: None if t is None else topology_hash(t) for p, (t, _) in built.items()}
    source = importable_name(factory)
    points: dict[tuple[Any, ...], Point] = {}
    order = []
    for name, p, size in itertools.product(names, counts, nbytes):
        topology, error = built[p]
        head = {"collective": coll.name, "algorithm": name, "network": network,
                "topology": None if topology is None else topology.name, "nranks": p,
                "nbytes": size, "dtype": str(dtype), "op": op,
                "root": int(root) if coll.rooted else None, "params": params[name],
                "topology_hash": digests[p],
                "topology_factory": source, "simcoll_version": simcoll.__version__}
        point = Point(head, topology, error, options)
        points.setdefault(point.key, point)
        order.append(point.key)
    return Grid(list(points.values()), order)
