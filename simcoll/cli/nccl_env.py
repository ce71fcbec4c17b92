"""NCCL's environment variables for ``simcoll run`` and ``simcoll trace`` with
``--algorithm nccl``: a command copied from a real run, ``NCCL_ALGO=Ring
NCCL_PROTO=Simple all_reduce_perf -b 8 -e 8G``, runs the same choice here.

Read, as NCCL 2.30.7 reads them (``src/graph/tuning.cc``, ``src/init.cc``):

* ``NCCL_ALGO`` and ``NCCL_PROTO``: the ``algo`` and ``proto`` parameters, in NCCL's own
  spellings (``Ring``, ``NVLSTree``, ``^LL128``; :class:`~simcoll.algorithms.params.Names`),
  per collective as NCCL's ``parseList`` reads them (``ring;allreduce:tree``: a list for
  every collective, then lists for named ones; an empty value changes nothing); not for
  all_to_all, whose sends and receives NCCL plans without them;
* ``NCCL_NVLS_ENABLE=0``: NVLS and NVLS-tree left out of ``algo`` (any other whole
  number leaves them in: 2, NCCL's default, uses them where the machine has NVLS, 1
  forces them on, which a machine without NVSwitch still cannot run);
* ``NCCL_COLLNET_ENABLE=1``: ``collnet=1`` (collectives that have it);
* ``NCCL_MIN_NCHANNELS`` and ``NCCL_MAX_NCHANNELS`` set to one count: ``channels``, the
  communicator's channels. NVLS on one node and NVLS-tree keep their own count; NVLS
  across nodes runs on at most this one. A count below 1 is refused: NCCL would run 1;
* ``NCCL_NVLS_NCHANNELS``: ``nvls_channels``, the channels of NVLS and NVLS-tree (0 or
  less: NCCL's own count, as NCCL reads it).

``NCCL_NVLS_ENABLE`` and the channel counts are whole numbers as C's ``strtoll`` reads
them (``0x10``), ``NCCL_COLLNET_ENABLE`` 0 or 1 (NCCL's ``envConfigOverride`` in
``src/init.cc`` reads it with ``strtol`` and takes any other value for 0); set to nothing
(``NCCL_NVLS_ENABLE=``) they are read as unset, as NCCL reads them (``ncclLoadParam`` in
``src/misc/param.cc`` reads only a non-empty value). A value NCCL would read as
something other than it says (``no``, ``1.5``, blanks, ``NCCL_COLLNET_ENABLE=2``) is
refused, naming the variable.

A ``--param`` of the same name wins over the environment. Every variable read, left
aside or not simulated (any other ``NCCL_*``) is named in a ``#`` note, so a table says
what it ran; under another algorithm than ``nccl`` those above are named as read with
``--algorithm nccl`` only, the others as not simulated (``simcoll trace`` too).

``NCCL_TESTS_MIN_BW`` is nccl-tests' own variable, not NCCL's: :func:`tests_min_bw` reads
it for ``simcoll run``, with any algorithm.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from simcoll.algorithms.nccl.support import ALGORITHMS
from simcoll.algorithms.registry import AlgorithmSpec
from simcoll.cli.options import CommandLineError, c_integer
from simcoll.errors import InvalidInputError

__all__ = ["nccl_environment", "nccl_variables", "tests_min_bw"]

_NUMBERS = ("NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE", "NCCL_MIN_NCHANNELS",
            "NCCL_MAX_NCHANNELS", "NCCL_NVLS_NCHANNELS")
"""The variables read as whole numbers."""

READ = ("NCCL_ALGO", "NCCL_PROTO", *_NUMBERS)
"""The variables read; other ``NCCL_*`` ones are named as not simulated."""

MIN_BW = "NCCL_TESTS_MIN_BW"
"""nccl-tests' own check (src/common.cu): the run fails where the average busbw is below
0.9 times this many GB/s."""


_IN_NETWORK = ("nvls", "nvls_tree")

NCCL_FUNCTIONS = {"broadcast": "Broadcast", "reduce": "Reduce", "all_gather": "AllGather",
                  "reduce_scatter": "ReduceScatter", "all_reduce": "AllReduce"}
"""``ncclFuncStr`` (src/init.cc): the prefixes of NCCL_ALGO and NCCL_PROTO's lists."""


def nccl_variables(environ: Mapping[str, str]) -> list[str]:
    """The names of the ``NCCL_*`` variables in ``environ``, sorted."""
    return sorted(name for name in environ if name.startswith("NCCL_"))


def nccl_environment(environ: Mapping[str, str], spec: AlgorithmSpec,
                     given: Sequence[tuple[str, Any]], *, checks_min_bw: bool = False
                     ) -> tuple[list[tuple[str, Any]], list[str]]:
    """The ``--param`` pairs NCCL's variables in ``environ`` set for ``spec`` (the
    collective's registered algorithm), those ``given`` on the command line left as they
    are, and the ``#`` notes saying so; ``checks_min_bw``: the caller reads
    ``NCCL_TESTS_MIN_BW`` (:func:`tests_min_bw`), which is then not named here.

    Raises:
        CommandLineError: a value NCCL would not take, naming the variable.
    """
    found = {name: environ[name] for name in nccl_variables(environ)
             if not (checks_min_bw and name == MIN_BW)}
    if not found:
        return [], []
    if spec.name != "nccl":
        read = [name for name in found if name in READ]
        unread = [name for name in found if name not in READ]
        return [], [f"# {', '.join(names)} in the environment: {said}"
                    for names, said in ((read, "read with --algorithm nccl only"),
                                        (unread, "not simulated")) if names]
    named = {name for name, _ in given}
    wanted: dict[str, tuple[str, Any]] = {}   # parameter -> (variable, value)
    notes = []
    for name in _NUMBERS:
        if found.get(name) == "":
            del found[name]
            notes.append(f"# {name}='' in the environment: empty, read as unset (as NCCL "
                         f"reads it)")
    for variable, param in (("NCCL_ALGO", "algo"), ("NCCL_PROTO", "proto")):
        if variable not in found:
            continue
        if spec.collective not in NCCL_FUNCTIONS:
            notes.append(f"# {variable} does not apply to {spec.collective} (NCCL plans its "
                         f"sends and receives without it)")
            continue
        listed = _for_collective(variable, found[variable], spec.collective)
        if listed is None:
            notes.append(f"# {variable}={found[variable]!r} in the environment sets nothing "
                         f"for {spec.collective}")
        else:
            wanted[param] = (variable, _checked(spec, param, variable, listed))
    nvls, collnet = found.get("NCCL_NVLS_ENABLE"), found.get("NCCL_COLLNET_ENABLE")
    if nvls is not None and _integer_variable("NCCL_NVLS_ENABLE", nvls,
                                              "a whole number (0 leaves NVLS out)") == 0:
        variable, algo = wanted.get("algo", ("", "auto"))
        wanted["algo"] = (f"{variable} and NCCL_NVLS_ENABLE=0" if variable else
                          "NCCL_NVLS_ENABLE=0", _without_nvls(spec, algo))
    if collnet is not None and _integer_variable("NCCL_COLLNET_ENABLE", collnet, "0 or 1",
                                                 (0, 1)) == 1:
        wanted["collnet"] = ("NCCL_COLLNET_ENABLE", 1)
    _channel_variables(found, spec.collective, wanted, notes)
    pairs = []
    for param, (variable, value) in wanted.items():
        if param not in spec.params:
            notes.append(f"# {variable} does not apply to {spec.collective}")
            continue
        try:
            checked = spec.params[param].normalize(param, value)
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


_C_DECIMAL = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")
"""A number as C's ``atof`` reads it whole (no underscores, which Python's float takes)."""


def tests_min_bw(environ: Mapping[str, str]) -> float | None:
    """``NCCL_TESTS_MIN_BW`` (GB/s), or None where it is not set or is -1, nccl-tests'
    value for unset (``check_avg_bw == -1``: no verdict).

    Raises:
        CommandLineError: not a finite decimal number read whole (nccl-tests' ``atof``
            reads ``fast`` as 0, a check every run passes, and ``1_000`` as 1).
    """
    text = environ.get(MIN_BW)
    if text is None:
        return None
    value = float(text) if _C_DECIMAL.fullmatch(text) else math.nan
    if not math.isfinite(value):
        raise CommandLineError(f"{MIN_BW}={text!r} in the environment is not accepted; give "
                               f"the least average busbw in GB/s as a decimal number, e.g. "
                               f"100")
    return None if value == -1 else value


def _for_collective(variable: str, value: str, collective: str) -> str | None:
    """The list ``value`` gives ``collective``, as NCCL's ``parseList`` reads it: lists
    separated by ``;``, the first one for every collective unless it has a prefix, the
    others each for the collective its prefix names (``allreduce:tree``), the last that
    applies winning; None where none applies.

    Raises:
        CommandLineError: a list after the first without a prefix, or an unknown prefix.
    """
    chosen = None
    for i, token in enumerate(t for t in value.split(";") if t):
        prefix, colon, listed = token.partition(":")
        if not colon:
            if i:
                raise CommandLineError(f"{variable}={value!r} in the environment is not "
                                       f"accepted: every list after the first needs a "
                                       f"prefix such as 'allreduce:' (as NCCL says)")
            chosen = token
        elif prefix.strip().casefold() not in {f.casefold() for f in NCCL_FUNCTIONS.values()}:
            raise CommandLineError(f"{variable}={value!r} in the environment names "
                                   f"{prefix!r}, not one of "
                                   f"{', '.join(NCCL_FUNCTIONS.values())}")
        elif prefix.strip().casefold() == NCCL_FUNCTIONS[collective].casefold():
            chosen = listed
    return chosen


def _checked(spec: AlgorithmSpec, param: str, variable: str, listed: str) -> str:
    """``listed`` from ``variable`` as ``param`` takes it, naming the variable where NCCL
    would refuse it: a name it does not know, or algorithms of which none runs the
    collective (NCCL then finds no algorithm for it).

    Raises:
        CommandLineError: as said.
    """
    try:
        value = spec.params[param].normalize(param, listed)
    except InvalidInputError as exc:
        raise CommandLineError(f"{variable} in the environment: {exc}") from None
    runs = ALGORITHMS.get(spec.collective, ())
    if param == "algo" and value != "auto" and not set(value.split(",")) & set(runs):
        raise CommandLineError(f"{variable} in the environment: algo={value!r}: NCCL never "
                               f"runs {spec.collective} with "
                               f"{'it' if ',' not in value else 'any of them'}; it runs "
                               f"{spec.collective} with {', '.join(runs)}")
    return str(value)


def _integer_variable(variable: str, text: str, accepted: str,
                      among: tuple[int, ...] | None = None) -> int:
    """``variable``'s whole number as C's ``strtoll`` reads ``text``, one of ``among``
    where given.

    Raises:
        CommandLineError: anything else, saying what is ``accepted``.
    """
    value = c_integer(text)
    if value is None or (among is not None and value not in among):
        raise CommandLineError(f"{variable}={text!r} in the environment is not accepted; "
                               f"use {accepted}")
    return value


def _channel_variables(found: Mapping[str, str], collective: str,
                       wanted: dict[str, tuple[str, Any]], notes: list[str]) -> None:
    """Add to ``wanted`` what NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS (``channels``) and
    NCCL_NVLS_NCHANNELS (``nvls_channels``; 0 or less: NCCL's own count, init.cc) set,
    and to ``notes`` why one is not applied.

    Raises:
        CommandLineError: a count that is not a whole number, or the pair set below 1,
            which NCCL runs as 1 channel (ncclMaxNchannels in src/graph/connect.cc).
    """
    texts = {name: found.get(name) for name in ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")}
    counts = {name: _channel_count(name, text) for name, text in texts.items()
              if text is not None}
    if counts and collective == "all_to_all":
        notes.append("# NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS in the environment set the "
                     "communicator's channels, from which NCCL works out each peer's: not "
                     "applied to all_to_all (its channels= is a send's parts)")
    elif len(counts) == 2 and len(set(counts.values())) == 1:
        count = counts["NCCL_MAX_NCHANNELS"]
        if count < 1:
            said = " ".join(f"{name}={text!r}" for name, text in texts.items())
            raise CommandLineError(f"{said} in the environment: NCCL runs a maximum below 1 "
                                   f"as 1 channel (ncclMaxNchannels in "
                                   f"src/graph/connect.cc), not {count}; give 1 or more")
        wanted["channels"] = ("NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS", count)
    elif counts:
        said = " ".join(f"{name}={texts[name]}" for name in counts)
        notes.append(f"# {said}: a range of channel counts is not simulated "
                     f"(channels= is one count: give NCCL_MIN_NCHANNELS and "
                     f"NCCL_MAX_NCHANNELS the same, or --param channels=N)")
    nvls = found.get("NCCL_NVLS_NCHANNELS")
    if nvls is not None:
        wanted["nvls_channels"] = ("NCCL_NVLS_NCHANNELS",
                                   max(_channel_count("NCCL_NVLS_NCHANNELS", nvls), 0))


def _channel_count(variable: str, text: str) -> int:
    """A channel count from the environment.

    Raises:
        CommandLineError: not a whole number.
    """
    return _integer_variable(variable, text, "a whole number of channels as NCCL reads it "
                                             "(strtoll: decimal, hex after 0x, octal after a "
                                             "leading 0)")


def _without_nvls(spec: AlgorithmSpec, algo: str) -> str:
    """``algo`` (a Names value already checked, or ``auto``) with NVLS and NVLS-tree left
    out.

    Raises:
        CommandLineError: nothing left.
    """
    param = spec.params.get("algo")
    if param is None:
        return algo
    names = [n for n in getattr(param, "choices", ()) if n not in _IN_NETWORK] \
        if algo == "auto" else [n for n in algo.split(",") if n not in _IN_NETWORK]
    if not names:
        raise CommandLineError(f"NCCL_NVLS_ENABLE=0 in the environment leaves none of "
                               f"NCCL_ALGO's algorithms ({algo})")
    return ",".join(names)
