"""Text formats of topology files: JSON, YAML and TOML, read with safe loaders only (YAML
by YAML 1.2's core schema: :func:`_yaml12`).

:func:`read` turns a file into plain data (dicts, lists, strings, numbers) and a
:class:`Context` that words errors with the file name, the key path and, for YAML, the
line; :func:`dump` writes plain data back. What the data means is
:mod:`simcoll.topology.io`'s business.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simcoll.errors import TopologyError

__all__ = ["SUFFIXES", "Context", "read", "dump", "check_suffix"]

SUFFIXES = {".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}

Key = tuple[str | int, ...]


def _shown(path: Key) -> str:
    """``links[0].bandwidth`` for the key path ``("links", 0, "bandwidth")``."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")


@dataclass(frozen=True)
class Context:
    """Where data came from, to name the place of an error.

    Attributes:
        source: the file name (or a label for data not read from a file).
        lines: 1-based line of each key path, where the format tells (YAML).
        texts: each value YAML read as a number, as written (``1e9``, ``010``), by key
            path: where a name or a count must be read as written.
    """

    source: str
    lines: dict[Key, int] = field(default_factory=dict)
    texts: dict[Key, str] = field(default_factory=dict)

    def place(self, path: Key) -> str:
        """``"machine.yaml, line 7: devices[2].kind"``: the file, line and key of ``path``."""
        where = _shown(path)
        line = next((self.lines[path[:i]] for i in range(len(path), -1, -1)
                     if path[:i] in self.lines), None)
        place = self.source + (f", line {line}" if line is not None else "")
        return f"{place}: {where}" if where else place

    def error(self, path: Key, message: str) -> TopologyError:
        """A TopologyError naming the file, the line (if known), the key and the problem."""
        return TopologyError(f"{self.place(path)}: {message}")


def check_suffix(path: Path) -> str:
    """The format name for ``path``'s extension.

    Raises:
        TopologyError: an extension other than .json, .yaml, .yml, .toml.
    """
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise TopologyError(f"{path}: unknown topology file type {suffix or '(none)'!r}; "
                            f"use one of {', '.join(SUFFIXES)}")
    return SUFFIXES[suffix]


_TAG = "tag:yaml.org,2002:"


def _yaml_lines(node: Any, path: Key, out: dict[Key, int], texts: dict[Key, str],
                source: str, walked: set[int]) -> None:
    """Each key path's line, and the text of each value read as a number, from the
    parser's nodes. A node met again (an alias: YAML lets a few hundred bytes of them
    name billions of paths) keeps the lines of its first path.

    Raises:
        TopologyError: a key given twice in one mapping (YAML keeps the last one), or a
            key that is no string (``010:`` is the number 10: the file's keys are names).
    """
    import yaml

    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.ScalarNode) and node.tag in (_TAG + "int", _TAG + "float") \
            and not node.style:   # plain: None, ""
        texts[path] = node.value   # at each alias of it too: a scalar has one path there
    if id(node) in walked:
        return
    walked.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else \
                {"seq": "a list", "map": "a mapping"}.get(
                    key_node.tag.removeprefix(_TAG), "a key")   # not its nodes' repr
            key = path + (name,)
            where = f"{source}, line {key_node.start_mark.line + 1}: {_shown(key)}"
            if key_node.tag not in (_TAG + "str", _TAG + "merge"):
                raise TopologyError(f"{where}: a key YAML 1.2 reads as "
                                    f"{key_node.tag.removeprefix(_TAG)}, where keys are "
                                    f"names; quote it")
            if name in seen:
                raise TopologyError(f"{where}: given twice; give each key once")
            seen.add(name)
            _yaml_lines(value_node, key, out, texts, source, walked)
            out[key] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _yaml_lines(item, path + (i,), out, texts, source, walked)


_YAML12_SCALARS = [   # (tag, pattern, first characters): YAML 1.2.2 section 10.3.2
    ("null", r"null|Null|NULL|~|", "~nN"),
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    ("float", r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
              r"|[-+]?(\.inf|\.Inf|\.INF)|\.nan|\.NaN|\.NAN", "-+.0123456789"),
    ("merge", r"<<", "<"),   # not YAML 1.2's, but files use it, as PyYAML reads it
]


@functools.cache
def _yaml12() -> tuple[Any, Any, Any]:
    """A YAML loader (libyaml's parser), the same in pure Python, and a dumper, that read
    plain scalars as YAML 1.2's core schema does, where PyYAML's safe ones read YAML 1.1.

    YAML 1.1 silently turns what was written into something else: ``latency: 1:20`` is
    80 (base 60), ``010`` is 8 (octal), ``0b101`` is 5, ``1_000`` is 1000, ``yes``,
    ``no``, ``on`` and ``off`` are booleans and ``2024-01-01`` is a date. By YAML 1.2's
    core schema those are strings (a name "yes" stays "yes"; ``1:20`` as a latency is
    refused as not a time) but ``010`` is 10, ``0o17`` is 15, and ``1e9``, a string to
    PyYAML (its floats need a dot), is a float. Merge keys (``<<``) still merge. An
    explicit tag on a YAML 1.1 form (``!!int 0b101``, ``!!bool yes``) is read as PyYAML
    reads it. The dumper quotes every string that either YAML 1.1 or 1.2 reads as
    something else (``"yes"``, ``"1e9"``, ``"09"``), so a saved file reads back alike,
    here and by YAML 1.1 readers.
    """
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import ConstructorError, SafeConstructor
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.resolver import BaseResolver
    from yaml.scanner import Scanner

    patterns = {tag: re.compile(f"^(?:{pattern})$") for tag, pattern, _ in _YAML12_SCALARS}

    class Resolver12(BaseResolver):
        pass

    class Dumper(yaml.SafeDumper):
        pass

    for tag, _, first in _YAML12_SCALARS:
        for cls in (Resolver12, Dumper):   # the dumper's list is YAML 1.1's, then these
            cls.add_implicit_resolver(_TAG + tag, patterns[tag],
                                      list(first) + ([""] if tag == "null" else []))

    class Constructor12(SafeConstructor):
        def construct_yaml_int(self, node: Any) -> int:
            text = self.construct_scalar(node)
            if isinstance(text, str) and patterns["int"].fullmatch(text):
                base = {"0o": 8, "0x": 16}.get(text[:2], 10)
                return int(text[2:] if base != 10 else text, base)
            return super().construct_yaml_int(node)   # an explicit !!int on 1.1's forms

        def construct_yaml_float(self, node: Any) -> float:
            text = self.construct_scalar(node)
            if isinstance(text, str) and patterns["float"].fullmatch(text):
                # float() reads .inf, -.Inf, .NaN without the dot (the only forms with n)
                return float(text.replace(".", "", 1) if "n" in text.lower() else text)
            return super().construct_yaml_float(node)   # an explicit !!float on 1.1's

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            """A value read as its tag says, or an error naming its line (an empty
            ``!!int ''``, ``!!bool maybe``, ``!!timestamp abc``, an int past Python's
            digit limit, whose message says so)."""
            try:
                return super().construct_object(node, deep)
            except (ValueError, IndexError, KeyError, OverflowError, AttributeError,
                    TypeError) as exc:
                text = str(node.value)
                shown = repr(text if len(text) <= 40 else text[:37] + "...")
                why = f": {exc}" if isinstance(exc, (ValueError, OverflowError)) else ""
                raise ConstructorError(None, None, f"cannot read {shown} as "
                                       f"{node.tag.removeprefix(_TAG)}{why}",
                                       node.start_mark) from None

        yaml_constructors = {**SafeConstructor.yaml_constructors,
                             _TAG + "int": construct_yaml_int,
                             _TAG + "float": construct_yaml_float}

    class Loader(Reader, Scanner, Parser, Composer, Constructor12, Resolver12):
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            Composer.__init__(self)
            Constructor12.__init__(self)
            Resolver12.__init__(self)

    try:
        from yaml._yaml import CParser
    except ImportError:   # PyYAML built without libyaml
        return None, Loader, Dumper

    class CLoader(CParser, Constructor12, Resolver12):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Constructor12.__init__(self)
            Resolver12.__init__(self)

    return CLoader, Loader, Dumper


def _json_object(source: str) -> Any:
    """A ``json.loads`` object hook that refuses a key given twice in one object."""
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise TopologyError(f"{source}: key {key!r} given twice in one object; "
                                    f"give each key once")
            out[key] = value
        return out
    return build


def _parse(text: str, kind: str, source: str) -> tuple[Any, dict[Key, int], dict[Key, str]]:
    lines: dict[Key, int] = {}
    texts: dict[Key, str] = {}
    if kind == "JSON":
        try:
            return json.loads(text, object_pairs_hook=_json_object(source)), lines, texts
        except json.JSONDecodeError as exc:
            raise TopologyError(f"{source}, line {exc.lineno}: not valid JSON: {exc.msg} "
                                f"(column {exc.colno})") from None
    if kind == "YAML":
        import yaml

        # Parsed once, by libyaml where PyYAML has it: the nodes give the lines, and the
        # data is built from them. The lines are read first: building the data rewrites
        # a mapping with a merge key (<<) in place, the merged keys before its own,
        # where a key it overrides would read as given twice. Plain scalars are read
        # by YAML 1.2's core schema (_yaml12).
        c_loader, py_loader, _ = _yaml12()
        libyaml = c_loader is not None and hasattr(yaml, "CSafeLoader")  # libyaml built in
        loader = (c_loader if libyaml else py_loader)(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _yaml_lines(node, (), lines, texts, source, set())
            data = None if node is None else loader.construct_document(node)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f", line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise TopologyError(f"{source}{line}: not valid YAML: {problem}") from None
        finally:
            loader.dispose()
        return data, lines, texts
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found]
    try:
        return tomllib.loads(text), lines, texts
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{source}: not valid TOML: {exc}") from None


def _file_named(path: Path) -> str:
    """``path`` for a message: as it is, or quoted (and cut to 60 characters) where it
    holds what a terminal would not show or is too long to read."""
    text = str(path)
    if text.isprintable() and len(text) <= 100:
        return text
    return repr(text if len(text) <= 100 else text[:60] + "...")


def read(path: str | os.PathLike) -> tuple[Any, Context]:
    """The plain data in a topology file, chosen by its extension, and its Context.

    Raises:
        TopologyError: an unknown extension, a file that cannot be read, or text that is
            not valid in its format (naming the line where the parser says).
    """
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TopologyError(f"a topology file is named by a path; got {type(path).__name__} "
                            f"{path!r:.60}")
    path = Path(path)
    try:
        if path.is_dir():
            raise TopologyError(f"cannot read topology file {path}: Is a directory")
    except OSError as exc:   # a name the system cannot take (too long)
        raise TopologyError(f"cannot read topology file {_file_named(path)}: "
                            f"{exc.strerror or exc}") from None
    kind = check_suffix(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark, as editors write
    except (OSError, UnicodeDecodeError, ValueError) as exc:   # ValueError: a NUL byte
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TopologyError(f"cannot read topology file {_file_named(path)}: {reason}") from None
    try:
        data, lines, texts = _parse(text, kind, str(path))
    except TopologyError:   # the parser's own message, naming the line (a ValueError too)
        raise
    except RecursionError:
        raise TopologyError(f"{path}: nested too deeply to read as {kind}; a topology "
                            f"file nests a few levels") from None
    except ValueError as exc:  # a number past Python's digit limit, say
        raise TopologyError(f"{path}: cannot read it as {kind}: {exc}") from None
    if data is None:  # YAML's reading of a file of nothing (or only comments)
        raise TopologyError(f"{path} holds nothing (it is empty, or only comments or null); "
                            f"a topology file holds 'devices' and 'links' "
                            f"(or 'preset')")
    return data, Context(str(path), lines, texts)


def dump(data: dict[str, Any], path: Path) -> str:
    """``data`` as the text of ``path``'s format.

    Raises:
        TopologyError: an unknown extension, or TOML without the optional ``tomli_w``.
    """
    kind = check_suffix(path)
    if kind == "JSON":
        return json.dumps(data, indent=1) + "\n"
    if kind == "YAML":
        import yaml

        return str(yaml.dump(data, Dumper=_yaml12()[2], sort_keys=False,
                             default_flow_style=None))
    try:
        import tomli_w
    except ImportError:
        raise TopologyError(f"{path}: writing TOML needs the optional package tomli_w "
                            f"(pip install 'simcoll[toml]'); or save as .yaml or .json"
                            ) from None
    return str(tomli_w.dumps(data))
