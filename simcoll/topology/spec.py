"""Topology specs: one string that names a machine, as the command line takes it.

A spec is a builder or preset name, optionally followed by ``:`` and its arguments,
positional first, then ``key=value``, separated by commas::

    switch:8                                  switch(8)
    switch:ranks=8,bandwidth=100GB/s,latency=1us
    cluster:nodes=2,gpus_per_node=8           cluster:2x8 (AxB fills two positional slots)
    torus:4x4                                 torus((4, 4))
    dgx_a100:1   dgx_h100:nodes=2

or the path of a topology file (see :mod:`simcoll.topology.io`). Builders, parameters
and value types come from the functions' signatures (:mod:`simcoll.topology.catalog`),
so a new builder needs no change here. The Topology built records a canonical spec in
``topology.spec`` (every given argument by keyword, in signature order), and
``from_spec(topology.spec)`` builds the same machine again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from simcoll.errors import TopologyError
from simcoll.topology.catalog import (
    FILE_SUFFIXES,
    Parameter,
    build,
    builders,
    describe,
    parameters,
)
from simcoll.topology.graph import Topology

__all__ = ["from_spec", "is_file_spec", "with_arguments"]


def with_arguments(spec: str, values: dict[str, float]) -> str:
    """The builder spec ``spec`` with ``values`` added as ``key=value`` arguments after
    its own (a float's every digit): ``switch:8`` and ``{"bandwidth": 2e10}`` give
    ``switch:8,bandwidth=20000000000.0``; a trailing comma or a bare colon, which
    :func:`from_spec` takes, is not kept as an empty argument."""
    name, _, args = spec.partition(":")
    kept = args.strip()
    if kept.endswith(",") and kept[:-1].strip():
        kept = kept[:-1].strip()   # one trailing comma, as _split_args drops it
    given = ",".join(f"{key}={float(value)!r}" for key, value in values.items())
    joined = ",".join(part for part in (kept, given) if part)
    return f"{name.strip()}:{joined}" if joined else name.strip()


def _split_args(name: str, params: tuple[Parameter, ...], args: str,
                fail: Callable[[str], TopologyError]) -> dict[str, str]:
    """Map each argument's text to its key; positional values go to their parameters."""
    slots = [p for p in params if p.positional]
    given: dict[str, str] = {}
    seen_keyword = False
    items = args.split(",") if args.strip() else []
    if len(items) > 1 and not items[-1].strip():
        items.pop()  # a trailing comma
    for item in items:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not (key or eq):
            raise fail("an argument between two commas is empty")
        if eq:
            seen_keyword = True
            if key in given:
                raise fail(f"{key} is given twice")
            given[key] = value
            continue
        if seen_keyword:
            raise fail(f"positional value {key!r} comes after key=value arguments; put "
                       f"positional values first")
        free = [p for p in slots if p.name not in given]
        values = key.lower().split("x") if "x" in key.lower() and \
            [p.name for p in free[:2]] == list(_NODES_BY_GPUS) else [key]
        if len(values) > 1 and not all(v.strip() for v in values):
            raise fail(f"{key!r} is not nodes x GPUs per node; write NxG, e.g. 2x8")
        if len(values) > len(free):
            raise fail(f"too many positional values ({key!r}); {name} takes "
                       f"{', '.join(p.name for p in slots) or 'none'} by position")
        given.update((slot.name, text) for slot, text in zip(free, values))
    return given


_NODES_BY_GPUS = ("nodes", "gpus_per_node")
"""The positional slots ``NxG`` fills (``cluster:2x8``); elsewhere an ``x`` is no
separator (``torus:4x4`` is one value, its dims)."""


def _from_builder(spec: str) -> Topology:
    name, _, args = spec.strip().partition(":")
    name = name.strip()
    context = f"topology spec {spec!r}"
    params = parameters(name)

    def fail(message: str) -> TopologyError:
        return TopologyError(f"{context}: {message}; {describe(name)}")

    return build(name, _split_args(name, params, args, fail), context)


def is_file_spec(spec: str) -> bool:
    """Whether ``spec`` names a topology file: it is not a builder's name, alone or
    followed by ``:`` and arguments (``switch:4,kind=link.yaml`` is a builder spec,
    whatever its last value ends in), and it ends in a topology file extension or
    exists (a folder too, which loading then refuses as one)."""
    if spec.partition(":")[0].strip() in builders():
        return False
    path = Path(spec)
    try:
        return path.suffix.lower() in FILE_SUFFIXES or path.exists()
    except OSError:  # a name the system cannot take (too long): not a file, then
        return False


def from_spec(spec: str | os.PathLike) -> Topology:
    """Build the machine that ``spec`` names (a builder with arguments, or a file, also as
    a path object).

    Example:
        >>> from_spec("switch:ranks=4,bandwidth=1GB/s,latency=0").links[0].bandwidth
        1000000000.0

    Raises:
        TopologyError: an unknown builder or parameter, or a value that cannot be read
            (the message names it and lists the builder's parameters with their
            defaults); a value the builder refuses (``switch:0``, ``bandwidth=0``: the
            message names it and what is accepted).
    """
    if isinstance(spec, os.PathLike):
        from simcoll.topology.io import load

        return load(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise TopologyError(f"topology spec {spec!r} is not accepted; write a builder "
                            f"such as 'switch:8' or the path of a topology file")
    if is_file_spec(spec):
        from simcoll.topology.io import load

        return load(spec)
    return _from_builder(spec)
