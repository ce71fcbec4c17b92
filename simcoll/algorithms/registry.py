"""The algorithm registry: one entry per ``(collective, name)`` carries all of an algorithm.

An entry holds the rank program, its parameters (typed specs with their defaults, see
:mod:`simcoll.algorithms.params`), its cost model (:class:`simcoll.cost.CostModel`) and,
where needed, a server-host program and a check across parameters. Algorithms register
with :func:`register` in the module of their family; ``simcoll.algorithms`` imports every
module of its package. Third-party packages add theirs through the entry-point group
``simcoll.algorithms``: each entry point names a module (or callable) that registers
algorithms when loaded; they are loaded on first lookup. A plugin that fails to load is
skipped with a ``RuntimeWarning`` naming its entry point and module; the others still
load, and a lookup of an unknown algorithm names the plugins that failed.
"""

from __future__ import annotations

import copy
import inspect
import os
import re
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

import numpy as np

from simcoll.algorithms.params import Choice, Int, Keywords, Param, named_arguments
from simcoll.buffers import Buffer, VirtualBuffer
from simcoll.checks import flag
from simcoll.collectives import collective as _collective
from simcoll.collectives import suggestion
from simcoll.comm import Comm
from simcoll.cost.model import CostModel
from simcoll.errors import (
    InvalidInputError,
    RegistrationError,
    SimCollError,
    UnknownAlgorithmError,
    message_of,
)
from simcoll.ops import ReduceOp
from simcoll.topology.graph import Topology
from simcoll.typing import HostProgram, Program, Steps

__all__ = ["AlgorithmSpec", "register", "get_algorithm", "algorithms", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "simcoll.algorithms"

ROOT = Int(0, minimum=0, doc="rank that holds the input or gets the output")
"""``root``, which the cost models of rooted collectives may name."""

Fn = TypeVar("Fn", bound=Callable[..., Any])
_FIXED = ("op", "root", "splits")
"""Keywords of a rank program that belong to the collective, not to the algorithm."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """A registered algorithm.

    Attributes:
        collective, name: the key.
        fn: the rank program, ``fn(comm, x, *, op, root, splits, **params) -> Program``
            (``op`` for reducing collectives, ``root`` for rooted ones, ``splits`` for the
            v-collectives: their sizes in elements, a tuple of p ints or of p rows).
        cost: its cost model.
        params: its parameters and their specs (defaults, accepted values, docs).
        host: program run on each server host, ``host(comm, **same keywords)``, or None.
        validate: ``validate(p, count, hosts, **params)`` raising ``InvalidInputError`` for
            rank counts, sizes or combinations of parameters the algorithm does not accept,
            or None. It is given the parameters it names (defaults filled in) and, if it
            names it, ``nodes``: the node of every rank.
        in_network: program run on each switch or NIC that computes in the network,
            ``in_network(comm, x, **same keywords)`` with ``x`` a VirtualBuffer the size and
            type of every rank's input, or None.
        resolve: ``resolve(topology, ranks, x, **params) -> params`` choosing parameter
            values from the machine before a run (NCCL's tuner: algorithm, protocol,
            channels), or None; ``ranks`` are the members' world ranks, ``x`` a
            VirtualBuffer like each rank's input, ``params`` the parameters it names as
            keyword-only arguments (every one, defaults filled in, where it takes
            ``**kwargs``), ``op`` the reduction if it names an ``op`` keyword, and
            ``started=True`` if it names a ``started`` keyword and the collective was
            started from a rank program (``comm.collective``), where ``in_network``
            programs see the communicator's GPUs by their ranks in it (a group's, not
            the world's), so it may refuse choices that need the world's. What it
            returns is what the run uses and ``Result.params`` shows.
        timeline: the data-free run as steps over every rank at once,
            ``timeline(lanes, count, **params)`` on a :class:`simcoll.lone_flows.Lanes`,
            which ``simulate`` uses instead of the rank programs where no message can
            share a link (see :mod:`simcoll.lone_flows`), or None.
        outputs: what the rank programs return in data mode when ``timeline`` times
            the run, ``outputs(inputs, **same keywords as the program)`` -> one array per
            rank (one array listed for several ranks if they get equal outputs), or None
            (data-mode runs then always run the rank programs).
    """

    collective: str
    name: str
    fn: Callable[..., Program]
    cost: CostModel
    params: Mapping[str, Param] = field(default_factory=dict)
    host: Callable[..., HostProgram] | None = None
    validate: Callable[..., None] | None = None
    in_network: Callable[..., HostProgram] | None = None
    resolve: Callable[..., dict[str, Any]] | None = None
    timeline: Callable[..., None] | None = None
    outputs: Callable[..., list[np.ndarray]] | None = None

    @property
    def defaults(self) -> dict[str, Any]:
        """Every parameter's default, as registered."""
        return {name: spec.default for name, spec in self.params.items()}

    def run_defaults(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The default of every parameter not ``given``, as a run or a cost query takes
        it (:func:`_fresh_defaults`).

        Raises:
            RegistrationError: a default its own spec refuses now (a ``Choice`` whose
                choices, given as a function, do not name it).
        """
        return _fresh_defaults(f"{self.collective}/{self.name}", self.params, given)

    def check(self, p: int, count: int, hosts: int, nodes: tuple[int, ...],
              params: Mapping[str, Any]) -> dict[str, Any]:
        """Check user-given ``params`` for a run, before it starts; return them normalized.

        Refuses unknown names, values a parameter's spec does not accept (also for
        buffers of ``count`` elements per rank), then runs ``validate``.

        Raises:
            InvalidInputError: naming the value and what is accepted.
            RegistrationError: a default its own spec refuses now, or a ``validate``
                that returned something (:meth:`run_validate`).
        """
        given = _normalized(self, params, self.params)
        for name, value in given.items():
            self.params[name].check_size(name, value, count)
        self.run_validate(p, count, hosts, {**self.run_defaults(given), **given,
                                            "nodes": nodes})
        return given

    @property
    def validate_reads_nodes(self) -> bool:
        """Whether ``validate`` takes the ranks' ``nodes`` (a cost query has none)."""
        return self.validate is not None and "nodes" in inspect.signature(
            self.validate).parameters

    def run_validate(self, p: int, count: int, hosts: int, args: Mapping[str, Any]) -> None:
        """Run ``validate`` (if any) with the keywords of ``args`` it takes.

        Raises:
            InvalidInputError: it refused them, or raised anything else (named).
            RegistrationError: it returned something: a validate refuses by raising
                InvalidInputError, so a ``False`` it returned would pass unseen.
        """
        if self.validate is not None:
            verdict = self._hook_call("validate", self.validate, p, count, hosts,
                                      **named_arguments(self.validate, args))
            if verdict is not None:
                raise RegistrationError(
                    f"{self.collective}/{self.name}: its validate function returned "
                    f"{verdict!r}; a validate returns nothing and refuses what it does not "
                    f"accept by raising sc.InvalidInputError, naming the value")

    def _hook_call(self, role: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, this algorithm's ``role`` function (validate,
        resolve).

        Raises:
            SimCollError: as it raised it.
            InvalidInputError: it raised anything else, named with the algorithm.
        """
        try:
            return fn(*args, **kwargs)
        except SimCollError:
            raise
        except Exception as exc:
            raise InvalidInputError(f"{self.collective}/{self.name}: its {role} function "
                                    f"raised {type(exc).__name__}: {message_of(exc)}"
                                    ) from exc

    def resolved(self, topology: Topology, ranks: tuple[int, ...], x: VirtualBuffer,
                 params: Mapping[str, Any], op: ReduceOp | None = None,
                 started: bool = False) -> dict[str, Any]:
        """Every parameter for a run on ``ranks`` of ``topology``: ``params`` (checked),
        defaults for the others, and the values ``resolve`` chooses from the machine (and
        from the reduction ``op`` and whether the collective was ``started`` from a rank
        program, for a ``resolve`` that takes those keywords).

        Raises:
            InvalidInputError: ``params`` refused, or ``resolve`` raised (named).
            RegistrationError: ``resolve`` returned something other than a dict of the
                algorithm's parameters, or values they refuse.
        """
        full = self.arguments(params)
        if self.resolve is None:
            return full
        keywords = named_arguments(self.resolve, {
            **full, **({"op": op} if op is not None else {}),
            **({"started": True} if started else {})})
        chosen = self._hook_call("resolve", self.resolve, topology, ranks, x, **keywords)
        unknown = set(chosen) - set(self.params) if isinstance(chosen, Mapping) else set()
        if not isinstance(chosen, Mapping) or unknown:
            raise RegistrationError(
                f"{self.collective}/{self.name}: its resolve function returned {chosen!r}"
                f"{f' (it takes no {sorted(unknown)})' if unknown else ''}; it returns a "
                f"dict of the algorithm's parameters")
        try:
            return _normalized(self, {**full, **chosen}, self.params)
        except InvalidInputError as exc:
            raise RegistrationError(f"{self.collective}/{self.name}: its resolve function "
                                    f"chose what the parameters refuse: {exc}") from None

    def normalized(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` checked against this algorithm's parameters and normalized, before
        any run (sizes are not checked here: :meth:`check` does that for a run).

        Raises:
            InvalidInputError: an unknown parameter or a value its spec refuses.
        """
        return _normalized(self, params, self.params)

    def arguments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The rank program's parameter keywords: every default, updated by ``params``.

        Raises:
            RegistrationError: a default its own spec refuses now (:meth:`run_defaults`).
        """
        return {**self.run_defaults(params), **params}

    def program(self, comm: Comm, x: Buffer, **kwargs: Any) -> Steps:
        """This rank's program, for running it inside another one (``op``, ``root``,
        ``splits`` and parameters as keywords; parameters not given take their defaults).

        Raises:
            InvalidInputError: an unknown parameter or a value its spec refuses.
        """
        params = {k: v for k, v in kwargs.items() if k not in _FIXED}
        fixed = {k: v for k, v in kwargs.items() if k in _FIXED}
        return self.fn(comm, x, **fixed, **self.arguments(_normalized(self, params,
                                                                       self.params)))

    def model_arguments(self, p: int, params: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords a cost-model query passes on: the algorithm's parameters, ``root``
        (rooted collectives) and the model's machine parameters, defaults filled in.

        Raises:
            InvalidInputError: an unknown name, a value its spec refuses, or a root that
                is not a rank.
        """
        specs = {**self.params, **self.cost.machine}
        if _collective(self.collective).rooted:
            specs["root"] = ROOT
            root = params.get("root", 0)
            if isinstance(root, (int, np.integer)) and not isinstance(root, bool) \
                    and not 0 <= root < p:   # a rank's range, below 0 too (as simulate says)
                raise InvalidInputError(f"root={root} is not a rank; use 0..{p - 1}")
        given = _normalized(self, params, specs)
        return {**_fresh_defaults(f"{self.collective}/{self.name}", specs, given), **given}


def _fresh_defaults(what: str, specs: Mapping[str, Param], given: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """The default of each spec not ``given``, as algorithm ``what``'s run takes it.

    A default is normalized as a value given for it is: an ``int`` for a numpy integer, a
    ``float`` for a float32 (whose arithmetic would round otherwise). A list, dict or set
    is copied one level deep, so that a program or model that adds to it or removes from
    it does not change the registered default or a later run's; the values inside are
    shared, as they are between ranks. An array is handed out as a read-only view, which
    copies nothing and refuses writes.

    Raises:
        RegistrationError: a default its spec refuses now (a ``Choice`` whose choices,
            given as a function, do not name it).
    """
    fresh = {}
    for name, spec in specs.items():
        if name in given:
            continue
        try:
            value = spec.normalize(name, spec.default)
        except InvalidInputError as exc:
            raise RegistrationError(f"{what}: the default of {name}, {spec.default!r}, is "
                                    f"refused by its own spec now ({exc}); give {name}= or "
                                    f"register a default it accepts") from None
        except RegistrationError as exc:   # the spec's own fault (a Choice's function)
            raise RegistrationError(f"{what}: parameter {name!r}: {message_of(exc)}") from exc
        if isinstance(value, (list, dict, set)):
            value = copy.copy(value)
        elif isinstance(value, np.ndarray) and value.flags.writeable:
            value = value.view()
            value.flags.writeable = False
        fresh[name] = value
    return fresh


def _normalized(spec: AlgorithmSpec, params: Mapping[str, Any],
                specs: Mapping[str, Param]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(specs), key=str)
    if unknown:
        accepted = "; ".join(f"{name} ({s.doc + ', ' if s.doc else ''}default {s.default!r})"
                             for name, s in specs.items())
        raise InvalidInputError(f"{spec.collective}/{spec.name} does not take parameter(s) "
                                f"{unknown}; it accepts {accepted or 'none'}")
    normalized = {}
    for name, value in params.items():
        try:
            normalized[name] = specs[name].normalize(name, value)
        except RegistrationError as exc:   # the spec's own fault (a Choice's function)
            raise RegistrationError(f"{spec.collective}/{spec.name}: parameter {name!r}: "
                                    f"{message_of(exc)}") from exc
    return normalized


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
"""What an algorithm may be named: a word the command line can list and pass on."""

_SPECS = "Int, Real, Choice, Names, Optional, Keywords or Value"
"""The spec classes of :mod:`simcoll.algorithms.params`, as refusals list them."""

_REGISTRY: dict[tuple[str, str], AlgorithmSpec] = {}
_plugins_loaded = False
_plugins_loader: int | None = None
"""The thread loading the plugins, while it does."""
_plugins_lock = threading.Lock()
"""Held only to pick the thread that loads the plugins (never during their imports,
which could wait on another thread's import of the same module)."""
_plugins_done = threading.Event()
"""Set once the plugins are loaded: a lookup another thread misses while they load waits
for it, then looks again (it was told an installed plugin's algorithm was unknown)."""
PLUGIN_WAIT = 60.0
"""Seconds a lookup waits for another thread's plugins before it says what it found."""


def _forked() -> None:
    """In a process forked while another thread picked or loaded the plugins: that thread
    is not in it, so the lock and the wait are new, and the plugins load again at the
    first lookup where they had not finished."""
    global _plugins_lock, _plugins_done, _plugins_loader
    _plugins_lock, _plugins_done = threading.Lock(), threading.Event()
    _plugins_done.set()
    _plugins_loader = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
_plugin_failures: list[str] = []
"""The plugins that failed to load: each entry point, its module and what it raised."""


def register(collective: str, name: str, *, cost: CostModel | None = None,
             params: Mapping[str, Param] | None = None,
             host: Callable[..., HostProgram] | None = None,
             in_network: Callable[..., HostProgram] | None = None,
             validate: Callable[..., None] | None = None,
             resolve: Callable[..., dict[str, Any]] | None = None,
             timeline: Callable[..., None] | None = None,
             outputs: Callable[..., list[np.ndarray]] | None = None,
             replace: bool = False) -> Callable[[Fn], Fn]:
    """Decorator: register a rank program as ``name`` for ``collective``, with its cost.

    Args:
        collective: a collective's name (``"all_reduce"``, ...).
        name: the algorithm's name: letters, digits, ``_``, ``-`` and ``.``, starting
            with a letter or ``_``.
        cost: its :class:`~simcoll.cost.CostModel` (required).
        params: ``{name: spec}`` of its parameters; the program takes each as a
            keyword-only argument without a default (the spec holds the default).
        host: program for each server host, taking the same keywords, or None.
        in_network: program for each switch or NIC that computes in the network (NVLS,
            SHARP), ``in_network(comm, x, **same keywords)``, or None.
        resolve: chooses parameter values from the machine before a run (see
            :class:`AlgorithmSpec`), or None.
        validate: cross-parameter check (see :class:`AlgorithmSpec`), or None.
        timeline: the run over arrays where no message shares a link (see
            :class:`AlgorithmSpec`), or None; it takes the algorithm's parameters (and
            ``splits`` for the v-collectives).
        outputs: the data-mode outputs of a run timed by ``timeline`` (see
            :class:`AlgorithmSpec`), or None; it takes the program's keywords.
        replace: replace an algorithm registered under this name before (such as a
            notebook cell's, run again); simcoll's own algorithms are never replaced.
            Without it, registering the same program again with the same arguments does
            nothing, and anything else under a name taken is refused.

    Raises:
        UnknownCollectiveError: the collective does not exist.
        InvalidInputError: a name that is not such a string.
        RegistrationError: (a ``TypeError`` and a ``ValueError`` too) no cost model,
            params that are not a dict of specs, a program that is not a generator
            function, does not take ``(comm, x)`` or whose keywords differ from the
            declared parameters, a model, validate or resolve function that does not
            take its positional arguments or names a keyword nobody passes, or a pair
            already registered otherwise (without ``replace=True``, or by simcoll
            itself).
    """
    for what, value in (("collective", collective), ("name", name)):
        if not isinstance(value, str) or not value:
            raise InvalidInputError(f"register: {what}={value!r} is not accepted; use a "
                                    f"non-empty string")
    if not _NAME.fullmatch(name):
        raise InvalidInputError(f"register: name={name!r} is not accepted; use letters, "
                                f"digits, '_', '-' and '.', starting with a letter or '_' "
                                f"(the command line lists algorithms separated by commas "
                                f"and reads NAME=VALUE pairs)")
    coll = _collective(collective)
    collective = coll.name
    what = f"{collective}/{name}"
    if cost is None:
        raise RegistrationError(f"{what}: register() needs cost=CostModel(time=..., traffic=...): "
                        f"every algorithm carries its cost model (see simcoll.cost)")
    if not isinstance(cost, CostModel):
        raise RegistrationError(f"{what}: cost={cost!r} is not a simcoll.cost.CostModel")
    replace = flag(replace, "replace")
    if params is not None and not isinstance(params, Mapping):
        raise RegistrationError(f"{what}: params={params!r} is not accepted; give a dict "
                                f"{{name: spec}} of {_SPECS}")
    specs = dict(params or {})
    _check_specs(what, {**specs, **cost.machine})
    # op, root and splits belong to the collective; validate gets the ranks' nodes as
    # ``nodes``, a cost model's time the element size as ``itemsize``.
    taken = (({"op", "root", "splits", "nodes", "itemsize"} & set(specs))
             | ({"op", "root", "splits", "itemsize", *specs} & set(cost.machine)))
    if taken:
        raise RegistrationError(f"{what}: {sorted(taken)} cannot be declared as parameters: "
                                + "; ".join(_TAKEN_BECAUSE.get(name, f"{name} is declared "
                                                               f"in cost.machine= too")
                                            for name in sorted(taken)))
    model_names = {*specs, *cost.machine, *(("root",) if coll.rooted else ())}
    for fn, positional, extra in ((cost.time, _TIME_ARGUMENTS, {"itemsize"}),
                                  (cost.traffic, _MODEL_ARGUMENTS, set()),
                                  (cost.exact, _MODEL_ARGUMENTS, set())):
        _check_keywords(what, fn, model_names | extra, "cost model function")
        _check_positional(what, fn, positional, "cost model function")
    if validate is not None:
        _check_keywords(what, validate, {*specs, "nodes"}, "validate")
        _check_positional(what, validate, _VALIDATE_ARGUMENTS, "validate")
    if resolve is not None:
        _check_keywords(what, resolve, {*specs, "op", "started"}, "resolve")
        _check_positional(what, resolve, ("topology", "ranks", "x"), "resolve")
    if timeline is not None:
        _check_keywords(what, timeline,
                        {*specs, *(("splits",) if coll.uneven is not None else ())}, "timeline")
    keywords = {*specs, *(("op",) if coll.reduces else ()), *(("root",) if coll.rooted else ()),
                *(("splits",) if coll.uneven is not None else ())}
    if outputs is not None:
        if timeline is None:
            raise RegistrationError(f"{what}: outputs= computes a run that timeline= times; give "
                            f"both or neither")
        _check_keywords(what, outputs, keywords, "outputs")

    def decorator(fn: Fn) -> Fn:
        if not inspect.isgeneratorfunction(fn):
            raise RegistrationError(f"{what}: {fn!r} is not a generator function; an algorithm "
                            f"yields the events comm returns")
        _check_program(what, fn, keywords, specs, ("comm", "x"))
        for part, positional in ((host, ("comm",)), (in_network, ("comm", "x"))):
            if part is not None:
                _check_program(what, part, keywords, specs, positional)
        entry = AlgorithmSpec(collective, name, fn, cost, specs, host, validate,
                              in_network, resolve, timeline, outputs)
        _check_free(entry, replace)
        _REGISTRY[(collective, name)] = entry
        return fn

    return decorator


def _check_free(entry: AlgorithmSpec, replace: bool) -> None:
    """Refuse to register ``entry`` where another registration holds its name, unless
    ``replace`` (never over simcoll's own); the same registration again is no change, and
    so is the same definition imported again (a conftest read by a second pytest session
    in one process): a function of the same module, name, file and line."""
    old = _REGISTRY.get((entry.collective, entry.name))
    if old is None or _reimported(old.fn, entry.fn):
        return
    changed = [f.name for f in fields(AlgorithmSpec)
               if getattr(old, f.name) is not getattr(entry, f.name)
               and getattr(old, f.name) != getattr(entry, f.name)]
    taken = f"algorithm {entry.name!r} is already registered for {entry.collective!r}"
    if (old.fn.__module__ or "").startswith("simcoll."):
        if changed:
            raise RegistrationError(f"{taken} by simcoll itself, which replace=True does not "
                                    f"replace; register yours under another name")
    elif changed and not replace:
        origin = _name(old.fn)
        which = ("with another " + ", ".join(changed) if old.fn is entry.fn
                 else f"(by {origin})")
        raise RegistrationError(f"{taken} {which}; pass replace=True to register() to "
                                f"replace it (a notebook cell run again), or choose "
                                f"another name")


def _short_name(fn: Callable[..., Any]) -> str:
    """A function's own name in a message, or for a callable without one (a
    ``functools.partial``) its repr."""
    return getattr(fn, "__name__", None) or repr(fn)


def _name(fn: Callable[..., Any]) -> str:
    """A function's name in a message: ``module.qualified_name``, or for a callable
    without a qualified name (a ``functools.partial``) its repr."""
    qualified = getattr(fn, "__qualname__", None)
    if qualified is None:
        return repr(fn)
    return ".".join(part for part in (getattr(fn, "__module__", None), qualified) if part)


def _reimported(old: Callable[..., Any], new: Callable[..., Any]) -> bool:
    """Whether ``new`` is ``old``'s definition, imported again: another function object
    of the same module and qualified name, defined at the same line of the same file, in
    another module object (one module making two functions of one definition, a
    factory's, is refused as any second registration is; simcoll's own are imported
    once)."""
    if old is new or (old.__module__ or "").startswith("simcoll.") \
            or getattr(old, "__globals__", None) is getattr(new, "__globals__", None):
        return False
    old_code, new_code = getattr(old, "__code__", None), getattr(new, "__code__", None)
    return (old_code is not None and new_code is not None
            and (old.__module__, old.__qualname__, old_code.co_filename,
                 old_code.co_firstlineno)
            == (new.__module__, new.__qualname__, new_code.co_filename,
                new_code.co_firstlineno))


def _check_specs(what: str, specs: Mapping[str, Param]) -> None:
    for pname, spec in specs.items():
        if not isinstance(pname, str) or not pname.isidentifier():
            raise RegistrationError(f"{what}: parameter name {pname!r} is not an identifier")
        if not isinstance(spec, Param):
            raise RegistrationError(f"{what}: parameter {pname}={spec!r} is not a spec; use "
                                    f"{_SPECS} from simcoll.algorithms.params")
        try:
            spec.check_default(pname)
        except InvalidInputError as exc:
            raise RegistrationError(f"{what}: the default of {pname} is refused by its own spec: "
                            f"{exc}") from None
        if isinstance(spec, Keywords) and spec.algorithm_param and not isinstance(
                specs.get(spec.algorithm_param), Choice):
            raise RegistrationError(f"{what}: {pname}=Keywords(algorithm_param="
                                    f"{spec.algorithm_param!r}) names no Choice parameter of "
                                    f"this algorithm; name the one that chooses the "
                                    f"algorithm they go to (of {sorted(specs)}), or leave "
                                    f"algorithm_param= out")


def _signature(what: str, fn: Callable[..., Any], role: str) -> inspect.Signature:
    """``fn``'s signature, or a refusal naming the role where Python cannot read it (a
    builtin such as ``max``, a numpy ufunc)."""
    try:
        return inspect.signature(fn)
    except (ValueError, TypeError):
        raise RegistrationError(
            f"{what}: {role} {getattr(fn, '__name__', fn)!r} has no signature Python can "
            f"read (a builtin?); wrap it in a function of your own") from None


def _check_keywords(what: str, fn: Callable[..., Any], known: set[str], role: str) -> None:
    """Refuse ``fn`` unless what it takes by name is among ``known``, and each of those
    it takes, keyword-only: the others are never passed to it."""
    if not callable(fn):
        raise RegistrationError(f"{what}: {role} {fn!r} is not callable")
    pars = _signature(what, fn, role).parameters.values()
    named = {par.name for par in pars if par.kind is par.KEYWORD_ONLY}
    if named - known:
        raise RegistrationError(f"{what}: {role} {getattr(fn, '__name__', fn)!r} takes "
                        f"{sorted(named - known)}, which nobody passes; it may take "
                        f"{sorted(known) or 'none'}")
    # with **kwargs every argument is passed by keyword, so only positional-only ones miss
    by_keyword = any(par.kind is par.VAR_KEYWORD for par in pars)
    kinds = inspect.Parameter
    missed = ((kinds.POSITIONAL_ONLY,) if by_keyword
              else (kinds.POSITIONAL_OR_KEYWORD, kinds.POSITIONAL_ONLY))
    unnamed = sorted(par.name for par in pars if par.kind in missed
                     and par.name in known and par.default is not inspect.Parameter.empty)
    if unnamed:
        raise RegistrationError(
            f"{what}: {role} {getattr(fn, '__name__', fn)!r} takes {unnamed} positionally, "
            f"so it is never passed them (only keyword-only arguments are) and keeps its "
            f"default; make them keyword-only (after a bare *)")


_TIME_ARGUMENTS = ("p", "nbytes", "alpha", "beta", "gamma")
_MODEL_ARGUMENTS = ("p", "nbytes", "itemsize")
_VALIDATE_ARGUMENTS = ("p", "count", "hosts")


def _check_positional(what: str, fn: Callable[..., Any], names: tuple[str, ...],
                      role: str) -> None:
    """Refuse ``fn`` unless it can be called with ``len(names)`` positional arguments."""
    pars = list(_signature(what, fn, role).parameters.values())
    positional = [par for par in pars if par.kind in (par.POSITIONAL_ONLY,
                                                      par.POSITIONAL_OR_KEYWORD)]
    required = [par for par in positional if par.default is inspect.Parameter.empty]
    takes_more = any(par.kind is par.VAR_POSITIONAL for par in pars)
    if len(required) > len(names) or (len(positional) < len(names) and not takes_more):
        extra = [par.name for par in required if par.name not in names]
        hint = "" if not extra else (
            f"; anything else comes by name: make {', '.join(map(repr, extra))} "
            f"keyword-only (after a bare *)")
        raise RegistrationError(
            f"{what}: {role} {getattr(fn, '__name__', fn)!r} takes "
            f"({', '.join(par.name for par in positional)}) positionally but is called "
            f"with ({', '.join(names)}){hint}")


_TAKEN_BECAUSE = {
    **{name: f"{name} comes from the collective (take it as a keyword-only argument where "
             f"it passes it)" for name in ("op", "root", "splits")},
    "nodes": "nodes come from the machine (validate's)",
    "itemsize": "itemsize comes from the element type (the cost model's)"}
"""Why a name cannot be declared as a parameter (else: declared twice)."""

_COLLECTIVE_KEYWORDS = {"op": ("the reduction", "reduce"),
                        "root": ("the root rank", "have a root"),
                        "splits": ("the sizes of each rank", "take uneven sizes")}
"""The keywords a collective passes its programs itself (never declared in params=): what
each holds, and which collectives pass it."""


def _check_program(what: str, fn: Callable[..., Any], keywords: set[str],
                   specs: Mapping[str, Param], positional: tuple[str, ...]) -> None:
    _check_positional(what, fn, positional, "program")
    pars = inspect.signature(fn).parameters.values()
    if any(par.kind is par.VAR_KEYWORD for par in pars):
        return
    named = {par.name: par for par in pars if par.kind is par.KEYWORD_ONLY}
    missing, extra = keywords - set(named), set(named) - keywords
    if missing or extra:
        collective = what.split("/")[0]
        hints = [f"take {name!r} as a keyword-only argument without a default: {collective} "
                 f"passes it ({_COLLECTIVE_KEYWORDS[name][0]})"
                 for name in sorted(missing & set(_COLLECTIVE_KEYWORDS))]
        hints += [f"remove {name!r}: {collective} does not pass it (only collectives that "
                  f"{_COLLECTIVE_KEYWORDS[name][1]} do)"
                  for name in sorted(extra & set(_COLLECTIVE_KEYWORDS))]
        if (missing | extra) - set(_COLLECTIVE_KEYWORDS):
            hints.append("declare each parameter in params= and take it as a keyword-only "
                         "argument")
        raise RegistrationError(
            f"{what}: {_short_name(fn)} takes keyword-only {sorted(named)} but is passed "
            f"{sorted(keywords)}; " + "; ".join(hints))
    defaulted = sorted(n for n in specs if named[n].default is not inspect.Parameter.empty)
    if defaulted:
        raise RegistrationError(f"{what}: {_short_name(fn)} gives {defaulted} a default; declare "
                        f"defaults once, in params=")


def _load_plugins() -> None:
    """Load every plugin of the entry-point group, once (on first lookup), in the first
    thread to look up; the others go on with what is registered (see :func:`_lookup`)."""
    global _plugins_loaded, _plugins_loader
    if _plugins_loaded:
        return
    with _plugins_lock:
        if _plugins_loaded or _plugins_loader is not None:
            return
        _plugins_loader = threading.get_ident()
        _plugins_done.clear()
    try:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            _load_plugin(ep)
    finally:
        _plugins_loaded, _plugins_loader = True, None
        _plugins_done.set()


def _lookup(key: tuple[str, str]) -> AlgorithmSpec | None:
    """The registered entry of ``key``; where another thread is loading the plugins, a
    miss waits for them (up to :data:`PLUGIN_WAIT` seconds) and looks again."""
    spec = _REGISTRY.get(key)
    loader = _plugins_loader
    if spec is None and loader is not None and loader != threading.get_ident():
        _plugins_done.wait(PLUGIN_WAIT)
        spec = _REGISTRY.get(key)
    return spec


def _load_plugin(ep: EntryPoint) -> None:
    """Load plugin ``ep`` (a module that registers when imported, or a callable that
    does when called); one that fails is skipped with a RuntimeWarning naming it, and
    remembered for the message of an unknown algorithm."""
    try:
        loaded = ep.load()
        if callable(loaded) and not inspect.isgeneratorfunction(loaded):
            loaded()
    except Exception as exc:
        failure = (f"algorithm plugin {ep.name} = {ep.value} (entry point group "
                   f"{ENTRY_POINT_GROUP!r}) failed to load: {type(exc).__name__}: {exc}")
        _plugin_failures.append(failure)
        warnings.warn(f"{failure}; simcoll goes on without it (the other plugins and "
                      f"simcoll's own algorithms are available)", RuntimeWarning,
                      stacklevel=4)


def algorithms(collective: str | None = None) -> list[tuple[str, str]]:
    """Registered ``(collective, name)`` pairs, optionally for one collective, sorted.

    Raises:
        UnknownCollectiveError: ``collective`` is given and unknown.
    """
    if collective is not None:
        collective = _collective(collective).name
    _load_plugins()
    return sorted(k for k in _REGISTRY if collective is None or k[0] == collective)


def get_algorithm(collective: str, name: str) -> AlgorithmSpec:
    """The algorithm ``name`` for ``collective``.

    Raises:
        UnknownCollectiveError: unknown collective.
        UnknownAlgorithmError: unknown algorithm (or not a name); the message lists the
            known ones.
    """
    collective = _collective(collective).name  # torch's aliases name the same entries
    _load_plugins()
    spec = _lookup((collective, name)) if isinstance(name, str) else None
    if spec is None:
        names = [n for _, n in algorithms(collective)]
        failed = "".join(f"; the {failure}" for failure in _plugin_failures)
        raise UnknownAlgorithmError(
            f"unknown algorithm {name!r} for {collective!r}{suggestion(name, names)}; "
            f"known algorithms: {', '.join(names) or 'none yet'}{failed}")
    return spec
