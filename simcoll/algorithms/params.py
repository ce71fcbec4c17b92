"""Typed algorithm parameters, declared once: default, accepted values and a doc line.

An algorithm's registration maps each parameter name to one of these specs::

    params={"chunks": Int(1, minimum=1, at_most_elements=True,
                          doc="pieces each block is cut into")}

A spec normalizes what a user passes (numpy integers become ``int``, numbers ``float``)
and refuses what it does not accept (bools and strings for numbers, ``inf`` and NaN
unless allowed, anything but a string for a name) with an :class:`InvalidInputError`
that names the value and what is accepted. The default is the spec's, and nowhere else.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from simcoll.checks import as_float, octal_looking, shown
from simcoll.errors import InvalidInputError, RegistrationError, message_of
from simcoll.topology.quantities import parse_time

__all__ = ["Param", "Int", "Real", "Choice", "Names", "Optional", "Value", "Keywords",
           "named_arguments", "read_value", "octal_looking"]


class Param(ABC):
    """One parameter of an algorithm (or of a cost model): its default and its checks."""

    default: Any
    doc: str

    @abstractmethod
    def accepted(self) -> str:
        """What the parameter accepts, in words ("an integer >= 1")."""

    @abstractmethod
    def normalize(self, name: str, value: Any) -> Any:
        """``value`` in canonical form (``int`` for numpy integers, ...).

        Raises:
            InvalidInputError: the value is not accepted; the message names it.
        """

    def check_size(self, name: str, value: Any, count: int) -> None:  # noqa: B027
        """Refuse a normalized ``value`` that makes no sense for buffers of ``count``
        elements per rank (the run's size is known only when a run starts); most
        parameters accept every value whatever the size, as this default does."""

    def check_default(self, name: str) -> None:
        """Refuse a default that this spec itself does not accept (at registration)."""
        self.normalize(name, self.default)

    def refusal(self, name: str, value: Any) -> InvalidInputError:
        """The error for a value this parameter does not accept."""
        what = f" ({self.doc})" if self.doc else ""
        return InvalidInputError(f"{name}={shown(value)} is not accepted; use {self.accepted()}"
                                 f"{what}")


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_bounds(spec: str, minimum: Any, maximum: Any, integers: bool) -> None:
    """Refuse bounds that are not numbers (integers for an ``Int``) or that leave no value.

    Raises:
        RegistrationError: naming the spec and the bound.
    """
    kind = "an integer" if integers else "a number"
    for name, bound in (("minimum", minimum), ("maximum", maximum)):
        number = isinstance(bound, (int, np.integer)) or not integers and isinstance(
            bound, (float, np.floating))
        if bound is not None and (isinstance(bound, (bool, np.bool_)) or not number
                                  or bound != bound):
            raise RegistrationError(f"{spec}({name}={bound!r}) is not accepted; give {kind} "
                                    f"or None")
    if minimum is not None and maximum is not None and minimum > maximum:
        raise RegistrationError(f"{spec}(minimum={minimum!r}, maximum={maximum!r}) accepts "
                                f"nothing; give a minimum no larger than the maximum")


def _range(kind: str, minimum: float | None, maximum: float | None) -> str:
    def text(bound: float) -> str:
        return str(bound) if isinstance(bound, int) else f"{bound:g}"

    if minimum is not None and maximum is not None:
        return f"{kind} in {text(minimum)}..{text(maximum)}"
    if minimum is not None:
        return f"{kind} >= {text(minimum)}"
    if maximum is not None:
        return f"{kind} <= {text(maximum)}"
    return kind


@dataclass(frozen=True)
class Int(Param):
    """An integer (``int`` or a numpy integer; never a bool, a float or a string).

    Attributes:
        default: the value when none is given (None only inside :class:`Optional`).
        minimum, maximum: inclusive bounds, or None.
        at_most_elements: the value is a number of pieces a buffer is cut into: values
            above the element count per rank (pieces that would mostly be empty) are
            refused when given (a default applies as it is, empty pieces and all).
        doc: one line saying what the parameter does.
    """

    default: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    at_most_elements: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        _check_bounds("Int", self.minimum, self.maximum, integers=True)

    def accepted(self) -> str:
        return _range("an integer", self.minimum, self.maximum)

    def normalize(self, name: str, value: Any) -> int:
        if not _is_integer(value):
            raise self.refusal(name, value)
        number = int(value)
        if ((self.minimum is not None and number < self.minimum)
                or (self.maximum is not None and number > self.maximum)):
            raise self.refusal(name, value)
        return number

    def check_size(self, name: str, value: Any, count: int) -> None:
        if self.at_most_elements and value > max(count, 1):
            low = 1 if self.minimum is None else self.minimum
            raise InvalidInputError(
                f"{name}={value} is more than the {count} elements of each rank's buffer, "
                f"so most pieces would be empty; use {low}..{max(count, 1)}")


@dataclass(frozen=True)
class Real(Param):
    """A real number (int, float or numpy number; never a bool or a string; NaN never).

    Attributes:
        default: the value when none is given (None only inside :class:`Optional`).
        minimum, maximum: inclusive bounds, or None.
        allow_inf: whether ``inf`` (or ``-inf``) is accepted.
        doc: one line saying what the parameter does (with its unit).
    """

    default: float | None = None
    minimum: float | None = None
    maximum: float | None = None
    allow_inf: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        _check_bounds("Real", self.minimum, self.maximum, integers=False)
        if not self.allow_inf and (self.minimum == math.inf or self.maximum == -math.inf):
            bound = math.inf if self.minimum == math.inf else -math.inf
            raise RegistrationError(f"Real(minimum={self.minimum!r}, maximum="
                                    f"{self.maximum!r}) accepts nothing: only {bound} "
                                    f"reaches that bound, and allow_inf is False")

    def accepted(self) -> str:
        kind = "a number" if self.allow_inf else "a finite number"
        return _range(kind, self.minimum, self.maximum)

    def normalize(self, name: str, value: Any) -> float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise self.refusal(name, value)
        number = as_float(value)
        if (math.isnan(number) or (math.isinf(number) and not self.allow_inf)
                or (self.minimum is not None and number < self.minimum)
                or (self.maximum is not None and number > self.maximum)):
            raise self.refusal(name, value)
        return number


def _names(spec: str, choices: Any) -> tuple[str, ...]:
    """``choices`` as a tuple of names: a list or tuple in its order, a set sorted.

    Raises:
        RegistrationError: ``choices`` is a string or not a collection of strings.
    """
    if not isinstance(choices, str) and isinstance(choices, Iterable):
        names = list(choices)
        if all(isinstance(name, str) for name in names):
            return tuple(sorted(names) if isinstance(choices, AbstractSet) else names)
    raise RegistrationError(f"{spec}(choices={choices!r}) is not accepted; give the names "
                            f"as a tuple, list or set of strings"
                            f"{' or a function returning them' if spec == 'Choice' else ''}")


@dataclass(frozen=True)
class Choice(Param):
    """One name out of a set (a string; lists and other types are refused).

    Attributes:
        default: the name used when none is given.
        choices: the accepted names (a tuple; a list or set is taken as one, a set in
            sorted order), or a function returning them (asked at each check, so it can
            list algorithms registered later).
        doc: one line saying what the parameter does.
        ignore_case: accept any capitalisation of a name, with or without its
            underscores, and give it as ``choices`` spells it (as NCCL reads ``NCCL_ALGO``
            and ``NCCL_PROTO``: ``NVLSTree`` for ``nvls_tree``).
    """

    default: str
    choices: tuple[str, ...] | Callable[[], Iterable[str]]
    doc: str = ""
    ignore_case: bool = False

    def __post_init__(self) -> None:
        if not callable(self.choices):
            object.__setattr__(self, "choices", _names("Choice", self.choices))
            if not self.choices:
                raise RegistrationError("Choice(choices=()) is not accepted; give at least "
                                        "one name")

    def options(self) -> tuple[str, ...]:
        """The accepted names, now.

        Raises:
            RegistrationError: ``choices`` is a function that raises, or returns something
                other than a non-empty collection of names.
        """
        if isinstance(self.choices, tuple):
            return self.choices
        function = getattr(self.choices, "__qualname__", repr(self.choices))
        try:
            listed = self.choices()
        except Exception as exc:
            raise RegistrationError(f"Choice's choices function {function} raised "
                                    f"{type(exc).__name__}: {message_of(exc)}") from exc
        try:
            names = _names("Choice", listed)
        except RegistrationError:
            names = ()
        if not names:
            raise RegistrationError(f"Choice's choices function {function} returned "
                                    f"{shown(listed)}; it must return a non-empty tuple, "
                                    f"list or set of strings")
        return names

    def accepted(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.options())

    def check_default(self, name: str) -> None:
        # Choices given as a function may name algorithms not registered yet.
        if callable(self.choices) and isinstance(self.default, str):
            return
        super().check_default(name)

    def normalize(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.refusal(name, value)
        options = self.options()
        if self.ignore_case:
            spelled = {_loose(option): option for option in options}
            value = spelled.get(_loose(value), value)
        if value not in options:
            raise self.refusal(name, value)
        return str(value)


@dataclass(frozen=True)
class Names(Param):
    """Some names out of a set, as NCCL reads ``NCCL_ALGO`` and ``NCCL_PROTO``: one name,
    names separated by commas, or ``^`` followed by the names to leave out (every other
    one is then chosen), in any capitalisation, with or without underscores
    (``parseList`` in NCCL 2.30.7's ``src/graph/tuning.cc``; its per-function prefixes,
    ``allreduce:...``, are not taken: a parameter is given per call).

    The canonical form lists the chosen names in the order of ``choices``, separated by
    commas: ``"^LL128"`` becomes ``"LL,Simple"``. ``default`` (such as ``"auto"``) is
    accepted on its own and means that nothing was chosen.

    Attributes:
        default: the value meaning "no choice made", accepted alone.
        choices: the names that can be chosen (a tuple; a list or set is taken as one, a
            set in sorted order).
        doc: one line saying what the parameter does.
    """

    default: str
    choices: tuple[str, ...]
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", _names("Names", self.choices))

    def accepted(self) -> str:
        names = ", ".join(repr(c) for c in self.choices)
        return (f"{self.default!r}, one of {names}, several of them separated by commas, "
                f"or '^' followed by those to leave out")

    def normalize(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.refusal(name, value)
        text = value.strip()
        if _loose(text) == _loose(self.default):
            return self.default
        spelled = {_loose(choice): choice for choice in self.choices}
        leave_out = text.startswith("^")
        if not leave_out and "," not in text:
            if _loose(text) not in spelled:
                raise self.refusal(name, value)
            return spelled[_loose(text)]
        listed = set()
        for item in (text[1:] if leave_out else text).split(","):
            choice = spelled.get(_loose(item.strip()))
            if choice is None:
                raise InvalidInputError(f"{name}={value!r} names {item.strip()!r}, which is "
                                        f"not accepted; use {self.accepted()}")
            listed.add(choice)
        chosen = [choice for choice in self.choices if (choice in listed) != leave_out]
        if not chosen:
            raise InvalidInputError(f"{name}={value!r} leaves out every one of "
                                    f"{', '.join(self.choices)}; use {self.accepted()}")
        return ",".join(chosen)


def _loose(name: str) -> str:
    """``name`` as :class:`Choice` compares it with ``ignore_case``."""
    return name.casefold().replace("_", "")


@dataclass(frozen=True)
class Optional(Param):
    """None (the default), or a value that ``param`` accepts.

    Attributes:
        param: the spec of the value when one is given.
        doc: one line saying what the parameter does, and what None means.
    """

    param: Param
    doc: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.param, Param):
            raise RegistrationError(f"Optional({self.param!r}) is not accepted; give the spec "
                                    f"of the value when one is given, such as "
                                    f"Optional(Int(minimum=1))")

    @property
    def default(self) -> None:
        return None

    def accepted(self) -> str:
        return f"None or {self.param.accepted()}"

    def normalize(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        try:
            return self.param.normalize(name, value)
        except InvalidInputError:
            raise self.refusal(name, value) from None

    def check_size(self, name: str, value: Any, count: int) -> None:
        if value is not None:
            self.param.check_size(name, value, count)


@dataclass(frozen=True)
class Value(Param):
    """Any value, taken as it is: for parameters no simpler spec describes (a schedule, a
    tuple of sizes); the algorithm's ``validate`` checks it.

    Attributes:
        default: the value used when none is given.
        doc: one line saying what the parameter does.
    """

    default: Any
    doc: str = ""

    def accepted(self) -> str:
        return "any value"

    def normalize(self, name: str, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class Keywords(Param):
    """Keyword arguments passed on to another algorithm: a dict of names to values (from
    the command line, ``"name=value;name=value"``, each value read as ``--param`` reads
    it); the algorithm's ``validate`` checks them against that algorithm's parameters.

    Attributes:
        default: the keywords used when none are given (an empty dict: none).
        doc: one line saying what the parameter does.
        algorithm_param: the parameter that names the algorithm they go to, if any (a
            sweep checks their names and values against it before any point runs).
    """

    default: dict[str, Any] = field(default_factory=dict)
    doc: str = ""
    algorithm_param: str = ""

    def accepted(self) -> str:
        return "a dict of parameter names to values, or 'name=value;name=value'"

    def normalize(self, name: str, value: Any) -> dict[str, Any]:
        if isinstance(value, str):
            pairs = [item.partition("=") for item in value.split(";") if item.strip()]
            if any(not eq or not key.strip().isidentifier() for key, eq, _ in pairs):
                raise self.refusal(name, value)
            return {key.strip(): read_value(raw) for key, _, raw in pairs}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise self.refusal(name, value)
        # numpy scalars as Python numbers, as every other parameter holds them
        return {key: v.item() if isinstance(v, np.generic) else v for key, v in value.items()}


def read_value(raw: str) -> Any:
    """A parameter's value written as text (``--param chunks=4``): ``true``/``false``, ``none``,
    an int, a float, a time with its unit (``20us`` -> 2e-05 seconds), else the text (as is
    a number with Python's digit separators, ``4_0``: a typo, left for the parameter's
    check to refuse, not read as 40, and an integer with a leading zero, ``010``, which
    C's strtol, as NCCL's environment and nccl-tests' options are read, takes for 8)."""
    value = raw.strip()
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    if "_" in value or octal_looking(value):
        return value
    for kind in (int, float, parse_time):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


@cache
def _keywords(fn: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    pars = inspect.signature(fn).parameters.values()
    return (frozenset(p.name for p in pars if p.kind is p.KEYWORD_ONLY),
            any(p.kind is p.VAR_KEYWORD for p in pars))


def named_arguments(fn: Callable[..., Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``args`` that ``fn`` takes as keyword-only arguments (all of them if
    it takes ``**kwargs``): model and validate functions name what they use."""
    names, takes_all = _keywords(fn)
    return dict(args) if takes_all else {k: v for k, v in args.items() if k in names}
