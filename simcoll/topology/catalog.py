"""The builders and presets a topology spec or file can name, and their parameters.

Everything comes from the functions' signatures: a function returning a Topology that is
listed in the ``__all__`` of ``simcoll.topology.builders`` or ``simcoll.topology.presets``
is a builder, its parameters are the function's, and their kinds come from the type
hints. Parameters whose name contains ``bandwidth`` take rates, those containing
``latency`` take times (:mod:`simcoll.topology.quantities`); ``ranks`` stands for a
builder's ``n``.
"""

from __future__ import annotations

import difflib
import inspect
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from simcoll.checks import Count, octal_looking
from simcoll.errors import TopologyError
from simcoll.topology.graph import Topology
from simcoll.topology.quantities import (
    format_rate,
    format_time,
    parse_number,
    parse_rate,
    parse_time,
)

__all__ = ["Parameter", "builders", "builder", "parameters", "describe", "format_value", "build",
           "FILE_SUFFIXES"]

FILE_SUFFIXES = (".json", ".yaml", ".yml", ".toml")
_ALIASES = {"ranks": "n"}
_REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Parameter:
    """One builder parameter as a spec reads it.

    Attributes:
        kind: ``"int"``, ``"rate"``, ``"time"``, ``"float"``, ``"str"``, ``"bool"`` or
            ``"dims"`` (integers joined by ``x``).
        default: the default value, or ``inspect.Parameter.empty`` when required.
        optional: ``none`` is accepted (the parameter is ``X | None``).
        positional: may be given without its name.
    """

    name: str
    kind: str
    default: Any
    optional: bool
    positional: bool

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def show(self) -> str:
        """``n`` for a required parameter, ``bandwidth=100GB/s`` for one with a default."""
        return self.name if self.required else f"{self.name}={format_value(self, self.default)}"


def builders() -> dict[str, Callable[..., Topology]]:
    """Every builder and preset a spec can name: the functions returning a Topology in the
    ``__all__`` of ``simcoll.topology.builders`` and ``simcoll.topology.presets``."""
    from simcoll.topology import builders as building
    from simcoll.topology import presets

    found: dict[str, Callable[..., Topology]] = {}
    for module in (building, presets):
        for name in module.__all__:
            fn = getattr(module, name)
            if inspect.isfunction(fn) and typing.get_type_hints(fn).get("return") is Topology:
                found[name] = fn
    return found


def _kind(name: str, hint: Any) -> tuple[str, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return _kind(name, inner[0])[0], True
    if hint is bool:
        return "bool", False
    if hint is int or hint == Count:   # a count that numpy's integers may also give
        return "int", False
    if hint is float:
        if "bandwidth" in name:
            return "rate", False
        return ("time" if "latency" in name else "float"), False
    if typing.get_origin(hint) in (Sequence, list, tuple) and args and args[0] is int:
        return "dims", False
    return "str", False


def parameters(name: str) -> tuple[Parameter, ...]:
    """The parameters of builder ``name``, in signature order.

    Raises:
        TopologyError: no builder of that name; the message lists them.
    """
    fn = builder(name)
    hints = typing.get_type_hints(fn)
    out = []
    for p in inspect.signature(fn).parameters.values():
        kind, optional = _kind(p.name, hints.get(p.name, str))
        out.append(Parameter(p.name, kind, p.default, optional or p.default is None,
                             p.kind is p.POSITIONAL_OR_KEYWORD))
    return tuple(out)


def describe(name: str) -> str:
    """``"switch: n, bandwidth=100GB/s, ..."``: a builder and its parameters."""
    return f"{name}: " + ", ".join(p.show() for p in parameters(name))


def format_value(param: Parameter, value: Any) -> str:
    """``value`` written as a spec would write it (units for rates and times, in the
    fewest digits, 12 at least, that read back as the value itself)."""
    if value is None:
        return "none"
    if param.kind == "rate":
        return _read_back(value, format_rate, parse_rate)
    if param.kind == "time":
        return _read_back(value, format_time, parse_time)
    if param.kind == "dims":
        return "x".join(str(v) for v in value)
    if param.kind == "bool":
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _read_back(value: float, write: Callable[[float, int], str],
               read: Callable[[str], float]) -> str:
    """``value`` written by ``write`` in the fewest significant digits from 12 that
    ``read`` gives back as ``value`` (17 always do): a default such as 2039 GB/s / 3
    listed as 679.666666667GB/s built another machine."""
    return next((text for text in (write(value, digits) for digits in range(12, 17))
                 if read(text) == value), write(value, 17))


def builder(name: str, *, files: bool = True) -> Callable[..., Topology]:
    """The builder or preset ``name``.

    Raises:
        TopologyError: no such name, listing the known ones (and, where a file could be
            given instead, ``files``, saying so).
    """
    known = builders()
    if name not in known:
        close = difflib.get_close_matches(name.lower(), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        path = f", or the path of a topology file ({', '.join(FILE_SUFFIXES)})" if files else ""
        raise TopologyError(f"unknown topology builder {name!r}{hint}; use one of "
                            f"{', '.join(known)}{path}")
    return known[name]


_LEADING_ZERO = ("{raw!r} has a leading zero, which C's strtol (and an ASTRA-sim "
                 "file's reader) takes for octal and Python for decimal; write the number "
                 "without it")


def _parse(param: Parameter, raw: str) -> Any:
    """Read one value; ValueError names what was expected."""
    text = raw.strip()
    if param.optional and text.lower() == "none":
        return None
    if param.kind == "int":
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ValueError(f"{raw!r} is not a whole number")
        if octal_looking(text):
            raise ValueError(_LEADING_ZERO.format(raw=raw))
        return int(text)
    if param.kind == "dims":
        parts = text.lower().split("x")
        if not all(re.fullmatch(r"[0-9]+", p.strip()) for p in parts):
            raise ValueError(f"{raw!r} is not a list of whole numbers joined by 'x', e.g. 4x4")
        if any(octal_looking(p) for p in parts):
            raise ValueError(_LEADING_ZERO.format(raw=raw))
        return tuple(int(p) for p in parts)
    if param.kind == "bool":
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"{raw!r} is not true or false")
        return text.lower() in ("true", "1", "yes")
    if param.kind in ("rate", "time", "float"):
        return {"rate": parse_rate, "time": parse_time, "float": parse_number}[param.kind](text)
    return text


def build(name: str, given: dict[str, str], context: str) -> Topology:
    """Call builder ``name`` with arguments given as text, keyed by parameter name.

    Records the canonical spec in ``topology.spec``, unless a value holds a comma, which
    a spec cannot write (it separates arguments): then ``spec`` stays None (and
    :func:`~simcoll.topology.io.load` records the file's path instead).

    Args:
        name: a builder or preset (see :func:`builders`).
        given: parameter name (or ``ranks`` for ``n``) -> value as a spec writes it.
        context: what to name in errors, e.g. ``"topology spec 'switch:8'"``.

    Raises:
        TopologyError: naming the bad key or value and listing the parameters.
    """
    try:
        fn = builder(name)
    except TopologyError as exc:
        raise TopologyError(f"{context}: {exc}") from None
    params = parameters(name)
    by_name = {p.name: p for p in params}

    def fail(message: str) -> TopologyError:
        return TopologyError(f"{context}: {message}; {describe(name)}")

    texts: dict[str, str] = {}
    for key, value in given.items():
        if key in _ALIASES and key not in by_name and _ALIASES[key] in by_name:
            key = _ALIASES[key]
        if key not in by_name:
            close = difflib.get_close_matches(key, by_name, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise fail(f"{name} has no parameter {key!r}{hint}")
        if key in texts:
            raise fail(f"{key} is given twice")
        if not value.strip():
            raise fail(f"{key}= has no value")
        texts[key] = value.strip()
    kwargs: dict[str, Any] = {}
    for param in params:
        if param.name in texts:
            try:
                kwargs[param.name] = _parse(param, texts[param.name])
            except ValueError as exc:
                raise fail(f"{param.name}={texts[param.name]}: {exc}") from None
        elif param.required:
            raise fail(f"{param.name} is missing")
    try:
        topology = fn(**kwargs)
    except TopologyError as exc:
        raise TopologyError(f"{context}: {exc}") from None
    items = [f"{p.name}={texts[p.name]}" for p in params if p.name in texts]
    if not any("," in texts[p.name] for p in params if p.name in texts):
        topology.spec = f"{name}:{','.join(items)}" if items else name
    return topology
