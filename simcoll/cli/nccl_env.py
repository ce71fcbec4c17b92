"""NCCL's environment variables for ``simcoll run --algorithm nccl``: a command copied
from a real run, ``NCCL_ALGO=Ring NCCL_PROTO=Simple all_reduce_perf -b 8 -e 8G``, runs
the same choice here.

Read, as NCCL 2.30.7 reads them (``src/graph/tuning.cc``, ``src/init.cc``):

* ``NCCL_ALGO`` and ``NCCL_PROTO``: the ``algo`` and ``proto`` parameters, in NCCL's own
  spellings (``Ring``, ``NVLSTree``, ``^LL128``; :class:`~simcoll.algorithms.params.Names`);
* ``NCCL_NVLS_ENABLE=0``: NVLS and NVLS-tree left out of ``algo``;
* ``NCCL_COLLNET_ENABLE=1``: ``collnet=1`` (collectives that have it);
* ``NCCL_MIN_NCHANNELS`` and ``NCCL_MAX_NCHANNELS`` set to one count: ``channels``.

A ``--param`` of the same name wins over the environment. Every variable read, left
aside or not simulated (any other ``NCCL_*``) is named in a ``#`` note, so a table says
what it ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simcoll.algorithms.registry import AlgorithmSpec
from simcoll.cli.options import CommandLineError
from simcoll.errors import InvalidInputError

__all__ = ["nccl_environment"]

READ = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE",
        "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")
"""The variables read; other ``NCCL_*`` ones are named as not simulated."""

_IN_NETWORK = ("nvls", "nvls_tree")


def nccl_environment(environ: Mapping[str, str], spec: AlgorithmSpec,
                     given: Sequence[tuple[str, Any]]) -> tuple[list[tuple[str, Any]],
                                                                list[str]]:
    """The ``--param`` pairs NCCL's variables in ``environ`` set for ``spec`` (the
    collective's registered algorithm), those ``given`` on the command line left as they
    are, and the ``#`` notes saying so.

    Raises:
        CommandLineError: a value NCCL would not take, naming the variable.
    """
    found = {name: environ[name] for name in sorted(environ) if name.startswith("NCCL_")}
    if not found:
        return [], []
    if spec.name != "nccl":
        return [], [f"# {', '.join(found)} in the environment: read with --algorithm nccl "
                    f"only"]
    named = {name for name, _ in given}
    wanted: dict[str, tuple[str, Any]] = {}   # parameter -> (variable, value)
    notes = []
    if "NCCL_ALGO" in found:
        wanted["algo"] = ("NCCL_ALGO", found["NCCL_ALGO"])
    if "NCCL_PROTO" in found:
        wanted["proto"] = ("NCCL_PROTO", found["NCCL_PROTO"])
    if _flag(found, "NCCL_NVLS_ENABLE") is False:
        algo = wanted.get("algo", ("", "auto"))[1]
        wanted["algo"] = ("NCCL_NVLS_ENABLE=0", _without_nvls(spec, algo))
    if _flag(found, "NCCL_COLLNET_ENABLE"):
        wanted["collnet"] = ("NCCL_COLLNET_ENABLE", 1)
    low, high = found.get("NCCL_MIN_NCHANNELS"), found.get("NCCL_MAX_NCHANNELS")
    if low is not None or high is not None:
        if low is not None and low == high:
            wanted["channels"] = ("NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS", low)
        else:
            notes.append(f"# NCCL_MIN_NCHANNELS={low} NCCL_MAX_NCHANNELS={high}: a range "
                         f"of channel counts is not simulated (channels= is one count: "
                         f"give both the same, or --param channels=N)")
    pairs = []
    for param, (variable, value) in wanted.items():
        if param not in spec.params:
            notes.append(f"# {variable} does not apply to {spec.collective}")
            continue
        try:
            checked = spec.params[param].normalize(param, value if param != "channels"
                                                   else _count(variable, value))
        except InvalidInputError as exc:
            raise CommandLineError(f"{variable} in the environment: {exc}") from None
        if param in named:
            notes.append(f"# {variable} in the environment left aside: --param {param}= "
                         f"given")
            continue
        pairs.append((param, checked))
        notes.append(f"# {variable} in the environment: {param}={checked}")
    unread = [name for name in found if name not in READ]
    if unread:
        notes.append(f"# {', '.join(unread)} in the environment: not simulated")
    return pairs, notes


def _flag(found: Mapping[str, str], name: str) -> bool | None:
    """A 0/1 variable's value (None where it is not set).

    Raises:
        CommandLineError: anything but 0 or 1.
    """
    if name not in found:
        return None
    if found[name].strip() not in ("0", "1"):
        raise CommandLineError(f"{name}={found[name]!r} in the environment is not accepted; "
                               f"use 0 or 1")
    return found[name].strip() == "1"


def _count(variable: str, value: str) -> int:
    """A channel count from the environment.

    Raises:
        CommandLineError: not a whole number.
    """
    try:
        return int(value.strip())
    except ValueError:
        raise CommandLineError(f"{variable}={value!r} in the environment is not accepted; "
                               f"use a whole number of channels") from None


def _without_nvls(spec: AlgorithmSpec, algo: str) -> str:
    """``algo`` (a Names value, or ``auto``) with NVLS and NVLS-tree left out.

    Raises:
        CommandLineError: nothing left.
    """
    param = spec.params.get("algo")
    if param is None:
        return algo
    try:
        chosen = param.normalize("algo", algo)
    except InvalidInputError:
        return algo   # refused, naming NCCL_ALGO, where it is checked
    names = [n for n in getattr(param, "choices", ()) if n not in _IN_NETWORK] \
        if chosen == "auto" else [n for n in chosen.split(",") if n not in _IN_NETWORK]
    if not names:
        raise CommandLineError(f"NCCL_NVLS_ENABLE=0 in the environment leaves no algorithm "
                               f"of NCCL_ALGO={algo!r}")
    return ",".join(names)
