"""What the subcommands share: the argument parser, sizes as nccl-tests reads them, and
the options that say what to simulate (topology, collective, algorithm, ...)."""

from __future__ import annotations

import argparse
import difflib
import inspect
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from simcoll.algorithms.params import read_value
from simcoll.checks import octal_looking, shown
from simcoll.collectives import COLLECTIVES
from simcoll.collectives import collective as get_collective
from simcoll.dtypes import LOW_PRECISION, as_dtype, meant_name
from simcoll.errors import InvalidInputError
from simcoll.files import names_a_folder, no_folder, too_long, unwritable
from simcoll.inputs import largest_input
from simcoll.network import NETWORKS
from simcoll.ops import ReduceOp
from simcoll.simulate import simulate
from simcoll.topology.graph import Topology
from simcoll.topology.spec import is_file_spec
from simcoll.units import exact_number, significant

__all__ = ["CommandLineError", "Parser", "parse_bytes", "parse_param", "add_run_options",
           "run_kwargs", "run_settings", "resolve_dtype", "check_output", "refuse_overflow",
           "plural", "MAX_BYTES", "integer_option", "c_integer"]

MAX_BYTES = 2**50
"""Largest size accepted (1 PiB): byte counters are int64, and a rank may send p times
its buffer."""

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?\s*([A-Za-z]*)\s*$",
                      re.ASCII)
_SIGNED_RE = re.compile(r"^\s*([+-])(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*([A-Za-z]*)\s*$",
                        re.ASCII)
"""A size written with a sign (its digits, to tell -0 from a negative one; its unit)."""
_BINARY = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
           "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
SIZE_HELP = ("K, M, G, T are powers of 1024, as nccl-tests reads them (8G = 8 GiB = "
             "8589934592 bytes; KiB, MiB, GiB also work); KB, MB, GB are refused as "
             "ambiguous (in Python, sc.parse_size reads them as powers of 1000)")
NCCL_TYPES = {"half": "float16", "float": "float32", "double": "float64",
              "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "int": "int32"}
"""nccl-tests' names for numpy's types; ``int`` is NCCL's ncclInt, 32 bits, as the logs of
nccl-tests 1.x print it and ``compare`` reads it (numpy's ``int`` is 64)."""
NCCL_OPS = {"prod": "product", "mulsum": "avg"}
"""nccl-tests' names for ReduceOp's; ``mulsum``, a pre-multiplied sum, runs as an
average, which NCCL computes as one (at the same cost)."""


class CommandLineError(Exception):
    """A bad command line; main prints it on one line and exits with status 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and never exit the interpreter, and
    which takes a negative number with a unit (``-b -1K``) as an option's value, for the
    option's own check to refuse (argparse took it for an option and said "expected one
    argument")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_WITH_UNIT

    def error(self, message: str) -> NoReturn:
        raise CommandLineError(f"{self.prog}: error: {message} (see '{self.prog} --help')")

    def _print_message(self, message: str, file: Any = None) -> None:
        """argparse's, without swallowing a failed write: ``--help`` lost on a full disk
        exited 0 (:func:`simcoll.cli.main` reports it)."""
        if message:
            (file or sys.stderr).write(message)

    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: Any = None) -> tuple[Any, list[str]]:
        """Parse ``args``, refusing any that no option takes: a subcommand's parser (which
        argparse runs through this method) names itself, where the top-level parser would
        report them as ``simcoll``'s.

        Raises:
            CommandLineError: ``unrecognized arguments: ...``, from this parser.
        """
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


_NEGATIVE_WITH_UNIT = re.compile(r"^-(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[A-Za-z/]*$")
"""What :class:`Parser` reads as a value, not an option: a negative number, maybe with an
exponent and a unit (no option of simcoll's is spelt so)."""


def parse_bytes(text: str) -> int:
    """Bytes named by ``text``, with nccl-tests' binary K, M, G, T (and an exponent, as
    nccl-tests' ``%lf`` reads ``1e3``).

    Raises:
        argparse.ArgumentTypeError: not a size (digits 0-9 only), a lowercase b (a bit),
            KB, MB, GB or TB (ambiguous), not whole, negative, or above 1 PiB.
    """
    signed = _SIGNED_RE.match(text)
    # as sc.parse_size: a + read, -0 is 0, any other size of a unit of sizes negative
    if signed is not None and signed.group(1) == "-" and significant(signed.group(2)) != "0" \
            and (signed.group(3).lower() in _BINARY or signed.group(3).lower()
                 in ("kb", "mb", "gb", "tb") or signed.group(3).endswith("b")):
        raise argparse.ArgumentTypeError(f"size {text!r} is negative; sizes are >= 0 bytes")
    match = _SIZE_RE.match(text if signed is None else text.replace(signed.group(1), "", 1))
    unit = match.group(3).lower() if match else ""
    number = "" if match is None else \
        match.group(1) + (f"e{match.group(2)}" if match.group(2) else "")
    if match is not None and match.group(3).endswith("b"):
        prefix = unit[:-1].rstrip("i").upper()
        raise argparse.ArgumentTypeError(
            f"cannot read size {text!r}: a lowercase b is a bit, and sizes are bytes; "
            f"write {number}{prefix + 'iB' if prefix else 'B'}")
    if match is not None and unit in ("kb", "mb", "gb", "tb"):
        raise argparse.ArgumentTypeError(
            f"size {text!r} is ambiguous: this command line reads K, M, G, T as powers of "
            f"1024, as nccl-tests does; write {number}{unit[0].upper()} or "
            f"{number}{unit[0].upper()}iB for that, or the number of bytes")
    if match is None or unit not in _BINARY:
        raise argparse.ArgumentTypeError(
            f"cannot read size {text!r}; write bytes with an optional K, M, G or T (powers "
            f"of 1024, as nccl-tests reads them), e.g. 8, 64K, 1M, 8G, 1e6")
    if len(significant(match.group(1))) > 100:   # a count below 1 PiB has 16 digits
        raise argparse.ArgumentTypeError(f"size {text[:20]!r}... has more than 100 "
                                         f"significant digits: give a whole number of bytes "
                                         f"up to 1 PiB (2^50)")
    value = exact_number(match.group(1), match.group(2))
    if value is None and match.group(2).startswith("-"):
        raise argparse.ArgumentTypeError(f"size {text!r} is not a whole number of bytes")
    if value is None or value * _BINARY[unit] > MAX_BYTES:
        raise argparse.ArgumentTypeError(f"size {text!r} is above the largest accepted "
                                         f"size, 1 PiB (2^50 bytes)")
    value *= _BINARY[unit]
    if value.denominator != 1:
        # exactly: a float rounded 1024 + 1e-19 to "1024.0 bytes, not a whole number"
        whole = value.numerator // value.denominator
        raise argparse.ArgumentTypeError(f"size {text!r} is {whole} + {value - whole} "
                                         f"bytes, not a whole number of bytes")
    return int(value)


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``1 rank``, ``8 ranks``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


_UNITS = (("T", 40), ("G", 30), ("M", 20), ("K", 10))


def _size_text(nbytes: int) -> str:
    """``nbytes`` as this command line writes sizes: ``4T``, ``64K``, or plain bytes."""
    for unit, shift in _UNITS:
        if nbytes and nbytes % 2**shift == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def refuse_overflow(option: str, size: int, nbytes: int, p: int, factor: int = 1) -> None:
    """Refuse a ``size`` (a value of ``option``) whose per-rank input of ``nbytes`` could
    overflow the int64 traffic counters on ``p`` ranks, saying how far to lower
    ``option``; ``size`` is about ``factor`` times ``nbytes`` (p for all_gather's size
    column).

    Raises:
        CommandLineError: naming the size, the rank count and the limit on ``option``.
    """
    if nbytes <= largest_input(p):
        return
    limit = (largest_input(p) + 1) * factor  # any size below it passes
    text = _size_text(limit)
    raise CommandLineError(
        f"size {size} bytes on {p} ranks could overflow the int64 traffic counters; use "
        f"{option} below {text}" + (f" ({limit} bytes)" if text != str(limit) else ""))


def parse_param(text: str) -> tuple[str, Any]:
    """``chunks=4`` -> ("chunks", 4); values are int, float, bool, none, a time with its
    unit (``launch_overhead=20us`` -> 2e-05 seconds) or text."""
    key, eq, raw = text.partition("=")
    if not eq or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"--param {text!r} is not NAME=VALUE, e.g. "
                                         f"--param chunks=4")
    if octal_looking(raw):
        raise argparse.ArgumentTypeError(f"--param {text!r}: {raw.strip()!r} has a leading "
                                         f"zero, which C's strtol (NCCL's variables, "
                                         f"nccl-tests' -r) reads as octal and Python's int() "
                                         f"as decimal; write the number without it")
    return key.strip(), read_value(raw)


PICTURES = (".png", ".svg", ".pdf")
"""The picture files the command line writes."""


def check_output(path: str, suffixes: tuple[str, ...], option: str = "--output", *,
                 topology: str | None = None) -> Path:
    """``path`` as a Path, refused before any work if its folder is missing, its
    extension is not one of ``suffixes``, or it is the topology file ``topology`` (the
    command's ``--topology``) names, which writing would replace.

    Raises:
        CommandLineError: naming the option, the path and what is accepted (or that its
            folder takes no file).
    """
    out = Path(path)
    problem = names_a_folder(path)
    if problem:
        raise CommandLineError(f"{option} {path}: {problem}; give a file path")
    if out.suffix.lower() not in suffixes:
        raise CommandLineError(f"{option} {path}: use a file ending in {', '.join(suffixes)}")
    if topology is not None and _same_file(out, topology):
        raise CommandLineError(f"{option} {path}: it is the topology file --topology reads, "
                               f"which writing would replace; write elsewhere")
    problem = no_folder(out) or too_long(out)
    if problem:
        raise CommandLineError(f"{option} {path}: {problem}")
    if out.is_dir():
        raise CommandLineError(f"{option} {path}: is a directory; give a file path")
    problem = unwritable(out)
    if problem:
        raise CommandLineError(f"{option} {path}: {problem}")
    return out


def _same_file(out: Path, spec: str) -> bool:
    """Whether the topology ``spec`` names the file ``out`` (by its path, or as one file
    under two names)."""
    if not is_file_spec(spec):
        return False
    given = Path(spec)
    try:
        if given.resolve() == out.resolve():
            return True
        return given.exists() and out.exists() and os.path.samefile(given, out)
    except (OSError, ValueError):
        return False


def resolve_dtype(name: str) -> np.dtype:
    """A numpy dtype from an nccl-tests name (half, float, double, bfloat16, f8e4m3,
    f8e5m2), a numpy name or an ml_dtypes name (float8_e4m3fn, float8_e5m2).

    Raises:
        CommandLineError: not the name of a dtype simcoll reduces, or one in a foreign byte
            order (saying so).
        InvalidInputError: an ml_dtypes name without ml_dtypes installed (naming the extra).
    """
    resolved = NCCL_TYPES.get(name, name)
    try:
        return as_dtype(resolved, "--dtype")
    except InvalidInputError:
        if resolved in LOW_PRECISION:
            raise
        _refuse_byte_order(name)
        try:
            what = f"{name!r} ({np.dtype(name).name}) is not an integer or floating dtype"
        except (TypeError, ValueError, SyntaxError):   # 'i4,,' is parsed as Python
            what = f"unknown dtype {name!r}{meant_name(name)}"
        raise CommandLineError(
            f"{what}; use an nccl-tests name (int8, uint8, int32, uint32, "
            f"int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2) or a numpy or "
            f"ml_dtypes name (float32, float8_e4m3fn, ...)") from None


def _refuse_byte_order(name: str) -> None:
    """Refuse, saying so, a numpy name of a dtype simcoll takes but in the byte order of
    another machine (``>f4`` on a little-endian one); return for any other name.

    Raises:
        CommandLineError: naming the byte order and the name to write instead.
    """
    try:
        dtype = np.dtype(name)
        native = as_dtype(dtype.newbyteorder("="), "--dtype")
    except (TypeError, ValueError, SyntaxError):
        return
    if not dtype.isnative:
        order = "big" if dtype.byteorder == ">" else "little"
        raise CommandLineError(
            f"--dtype {name!r} is {native} in {order}-endian byte order; simcoll computes "
            f"in this machine's ({sys.byteorder}-endian): write {native}")


NO_RING = {"broadcast": "binomial", "all_to_all": "direct", "gather": "binomial",
           "scatter": "binomial", "barrier": "dissemination"}
"""The command line's algorithm for the collectives that have no ring."""


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


DEFAULT_ALGORITHM_TEXT = "; ".join(["ring"] + [
    f"{algorithm} for {_names([c for c, a in NO_RING.items() if a == algorithm])}"
    for algorithm in dict.fromkeys(NO_RING.values())])
"""The defaults, as the help says them."""


def default_algorithm(collective: str) -> str:
    """The algorithm the command line runs when none is named: the ring, or for a
    collective without one, :data:`NO_RING`'s."""
    return NO_RING.get(get_collective(collective).name, "ring")


class Once(argparse.Action):
    """An option of simcoll's own given at most once: ``--size 16M --size 1G`` ran 1G
    alone, as argparse keeps the last. (nccl-tests' options keep the last, as its
    getopt does, so a copied command line runs as it ran.)"""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault(GIVEN_ONCE, {})
        if self.dest in given:
            parser.error(f"argument {'/'.join(self.option_strings)}: given twice "
                         f"({given[self.dest]}, then {shown(values)}); give it once")
        given[self.dest] = shown(values)
        setattr(namespace, self.dest, values)


GIVEN_ONCE = "_given_once"
"""Where :class:`Once` notes the options given during a parse (dropped after it)."""


class _RootOrAll(argparse.Action):
    """``-r`` where ``all`` is taken: keeps what was typed in ``root_text`` (``-1``, as
    nccl-tests spells every root, reads as ``all``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        namespace.root_text = values
        try:
            setattr(namespace, self.dest, _root_or_all(values))
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument -r/--root: {exc}")


_C_INTEGER = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)"
                        r"[ \t\n\v\f\r]*")
"""What C's ``strtol(text, NULL, 0)`` reads whole: a sign, then hex after 0x, octal after
a leading 0, or decimal (ASCII digits only; no underscores, 0o or 0b)."""


def c_integer(text: str) -> int | None:
    """The integer C's ``strtol(text, NULL, 0)`` reads from ``text`` (as nccl-tests
    reads its options and NCCL its variables: ``0x10`` is 16, ``010`` is 8), or None
    where strtol would stop before the end (``1.5``, ``1_0``, ``0o1``, ``08``) or read
    nothing: such text is refused rather than read one way or the other."""
    match = _C_INTEGER.fullmatch(text)
    if match is None:
        return None
    sign, digits = match.groups()
    base = 16 if digits[:2] in ("0x", "0X") else 8 if len(digits) > 1 and \
        digits[0] == "0" else 10
    value = int(digits, base)
    return -value if sign == "-" else value


def integer_option(text: str) -> int:
    """An option's integer as nccl-tests reads it (:func:`c_integer`).

    Raises:
        argparse.ArgumentTypeError: not an integer strtol reads whole.
    """
    value = c_integer(text)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an integer as nccl-tests reads it (decimal, hex after 0x, "
            f"octal after a leading 0)")
    return value


def whole(text: str) -> int:
    """A whole number >= 0 as nccl-tests' strtol reads it (decimal, hex after 0x, octal
    after a leading 0: :func:`integer_option`)."""
    try:
        value = integer_option(text)
    except argparse.ArgumentTypeError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value


def processes(text: str) -> int:
    """``--workers``' value: a whole number of processes, 1 or more.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; give a whole number "
                                         f"of processes, 1 or more (1 runs here)")
    return int(text)


def check_root_rank(args: argparse.Namespace, topology: Topology, every: bool = False
                    ) -> None:
    """Refuse ``-r`` (a number) that is no rank of ``topology``, naming the option
    (simulate's refusal named ``root=``); ``every``: ``all`` is taken too (run's ``-r``).

    Raises:
        CommandLineError: a root below 0 or past the machine's ranks.
    """
    root = getattr(args, "root", None)
    if isinstance(root, int) and not 0 <= root < topology.nranks:
        raise CommandLineError(f"-r/--root {getattr(args, 'root_text', None) or root} is not "
                               f"a rank of {topology.name}; give 0 to {topology.nranks - 1}"
                               + (", or all" if every else ""))


def _root_or_all(text: str) -> int | str:
    """``-r``'s value where ``all`` is taken: a rank, or ``all`` (also ``-1``, as
    nccl-tests spells it)."""
    if text == "all":
        return "all"
    try:
        value = integer_option(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rank (an integer) or all") \
            from None
    return "all" if value == -1 else value


def _op_or_all(text: str) -> str:
    """``-o``'s value where ``all`` is taken: ``all`` in any case, as every reduction's
    name is read (``-o SUM`` is ``-o sum``); anything else as typed, checked later."""
    return "all" if text.lower() == "all" else text


def add_run_options(parser: argparse.ArgumentParser, *, sweep: bool = False,
                    every: bool = False) -> None:
    """The options that say what to simulate (topology, collective, algorithm, ...);
    ``every``: ``-d all``, ``-o all`` and ``-r all`` are taken (``simcoll run``'s
    table)."""
    default = "switch" if sweep else "switch:8"
    examples = ("'switch:{p},bandwidth=100GB/s', 'cluster:nodes={p},gpus_per_node=8', "
                "'dgx_h100:nodes={p}' ({p}: each value of --ranks), or a topology file "
                "(one machine)") if sweep else (
        "switch:8, 'switch:ranks=8,bandwidth=100GB/s,latency=1us', cluster:2x8, "
        "dgx_h100:nodes=2, torus:4x4, or a topology file")
    parser.add_argument("--topology", default=default, metavar="SPEC", action=Once,
                        help=f"a builder or preset with its arguments, e.g. {examples} "
                             f"(.json, .yaml, .yml, .toml, or an ASTRA-sim network .yml); "
                             f"'simcoll list' shows every builder (default: {default})")
    parser.add_argument("--collective", default="all_reduce", action=Once,
                        help=f"{', '.join(n for n, c in COLLECTIVES.items() if c.uneven is None)} "
                             f"(default: all_reduce; the v-collectives, whose sizes differ "
                             f"between ranks, are for Python only)")
    if not sweep:
        parser.add_argument("--algorithm", action=Once,
                            help=f"a registered algorithm ('simcoll list'; "
                                 f"default: {DEFAULT_ALGORITHM_TEXT})")
    parser.add_argument("--param", action="append", type=parse_param, default=[],
                        metavar="NAME=VALUE",
                        help="an algorithm parameter, e.g. chunks=4 (ring) or "
                             "launch_overhead=20us (nccl) (repeatable)")
    parser.add_argument("-d", "--dtype", "--datatype", default="float",
                        help="element type: int8, uint8, int32, uint32, int64, uint64, half, "
                             "float (default), double, bfloat16, f8e4m3, f8e5m2 (the last "
                             "three need simcoll[ml_dtypes]), or a numpy name"
                             + ("; all: each of those in turn, as nccl-tests -d all (those "
                                "that cannot run here are left out, saying why)"
                                if every else ""))
    parser.add_argument("-o", "--op", type=_op_or_all if every else str,
                        help="reduction: sum (default), prod, min, max, avg "
                                           "(mulsum runs as avg; reducing collectives only)"
                                           + ("; all: each in turn, as nccl-tests -o all"
                                              if every else ""))
    if every:
        parser.set_defaults(root_text=None)
    parser.add_argument("-r", "--root", **({"action": _RootOrAll} if every
                                           else {"type": integer_option}),
                        help="root rank (default 0; broadcast, reduce, gather, scatter only)"
                             + ("; all or -1: each rank in turn, as nccl-tests -r -1"
                                if every else ""))
    parser.add_argument("--network", default="flow", action=Once,
                        help=f"network model: {', '.join(NETWORKS)} (default: flow, max-min "
                             f"fair sharing; flow_rtt: shares in proportion to 1 / route "
                             f"latency, TCP-like; analytical: no contention)")


def run_settings(algorithm: str, network: str, params: Iterable[tuple[str, Any]]) -> str:
    """What ``simcoll run`` simulated, as its first line says it and ``compare`` reads it
    back: ``ring, network flow, params: chunks=4`` (``none`` without ``--param``)."""
    given = " ".join(f"{k}={v}" for k, v in params) or "none"
    return f"{algorithm}, network {network}, params: {given}"


def run_kwargs(args: argparse.Namespace,
               options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``simulate`` keyword arguments from the options of :func:`add_run_options`
    (``options``: the command's own option for an argument, where it is not ``run``'s).

    Raises:
        CommandLineError: a v-collective (sizes per rank are for Python), --op for a
            collective that does not reduce, --root for one without a root, or a
            parameter given twice.
    """
    coll = get_collective(args.collective)
    if coll.uneven is not None:
        raise CommandLineError(f"--collective {coll.name} is not supported on the command "
                               f"line: it takes sizes per rank or per pair; use "
                               f"simcoll.simulate(..., nbytes=[...]) from Python")
    kwargs: dict[str, Any] = {"network": args.network}
    if args.op is not None:
        if not coll.reduces:
            raise CommandLineError(f"--op applies to reducing collectives only; "
                                   f"{args.collective} does not reduce")
        try:
            kwargs["op"] = ReduceOp.parse(NCCL_OPS.get(args.op.lower(), args.op))
        except InvalidInputError:
            names = ["sum", "prod", "min", "max", "avg", "mulsum"]
            names += ["all"] if hasattr(args, "root_text") else []   # run's options
            close = difflib.get_close_matches(args.op.lower(), [*names, "mean"], n=1)
            hint = "" if not close else \
                f" (did you mean {'avg' if close[0] == 'mean' else close[0]}?)"
            raise CommandLineError(f"--op {args.op!r} is not accepted{hint}; use "
                                   f"{', '.join(names[:-1])} or {names[-1]}") from None
    if args.root is not None:
        if not coll.rooted:
            raise CommandLineError(f"--root applies to broadcast, reduce, gather and "
                                   f"scatter; {args.collective} has no root")
        kwargs["root"] = args.root
    return {**kwargs, **algorithm_params(args.param, options=options)}


def algorithm_params(pairs: Iterable[tuple[str, Any]], taken: Iterable[str] = (),
                     from_log: bool = False,
                     options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``--param`` pairs as an algorithm's keyword arguments (``from_log``: for a
    command that reads a log, whose rows give the sizes, types, ops and roots;
    ``options``: the command's own option for an argument, where not ``run``'s).

    Raises:
        CommandLineError: a name given twice, or one of simulate()'s own arguments (or
            of ``taken``, the arguments of the function the command calls), which an
            option of the command sets.
    """
    params: dict[str, Any] = {}
    for key, value in pairs:
        if from_log and key in _FROM_LOG:
            raise CommandLineError(f"--param {key}= is not an algorithm parameter: each row "
                                   f"of the log gives its own {_FROM_LOG[key]}, as "
                                   f"nccl-tests ran it")
        if key in _RUN_ARGUMENTS or key in taken:
            instead = {**_OPTION_FOR, **(options or {})}.get(key, "its option, or Python")
            raise CommandLineError(f"--param {key}= is not an algorithm parameter but an "
                                   f"argument of the run; use {instead}")
        if key in params:
            raise CommandLineError(f"--param {key}= is given twice")
        params[key] = value
    return params


_RUN_ARGUMENTS = frozenset(
    name for name, p in inspect.signature(simulate).parameters.items()
    if p.kind is not inspect.Parameter.VAR_KEYWORD)
"""simulate()'s own arguments, which --param cannot pass as an algorithm's."""

_OPTION_FOR = {"topology": "--topology", "collective": "--collective",
               "algorithm": "--algorithm",
               "nbytes": "--size or -b, -e, -f (compare and calibrate take the log's)",
               "dtype": "--dtype", "op": "--op", "root": "--root", "src": "--root",
               "dst": "--root", "network": "--network", "check": "-c",
               "trace": "simcoll trace",
               "data": "simcoll.simulate(...) from Python",
               "splits": "simcoll.simulate(...) from Python",
               "faults": "simcoll.simulate(...) from Python",
               "until": "simcoll.simulate(..., until=...) from Python (no option sets it)",
               "max_events": "simcoll.simulate(..., max_events=...) from Python (no option "
                             "sets it)"}
"""The option that sets each of simulate()'s arguments on the command line."""

SWEEP_OPTIONS = {"nbytes": "--sizes", "algorithm": "--algorithms",
                 "check": "simcoll.sweep(..., check=...) from Python (simcoll sweep has no -c)",
                 "until": "simcoll.sweep(..., until=...) from Python (no option sets it)",
                 "max_events": "simcoll.sweep(..., max_events=...) from Python (no option "
                               "sets it)"}
"""Where ``simcoll sweep`` sets them otherwise."""

TRACE_OPTIONS = {"nbytes": "--size"}
"""Where ``simcoll trace`` sets them otherwise (one size, no -b, -e, -f)."""

LOG_OPTIONS = {"check": "simcoll.compare(..., check=True) from Python (compare and calibrate "
                        "have no -c)",
               "until": "simcoll.compare(..., until=...) or simcoll.calibrate(..., until=...) "
                        "from Python (no option sets it)",
               "max_events": "simcoll.compare(..., max_events=...) or "
                             "simcoll.calibrate(..., max_events=...) from Python (no option "
                             "sets it)"}
"""Where ``simcoll compare`` and ``simcoll calibrate`` send them otherwise."""

_FROM_LOG = {"nbytes": "size", "dtype": "element type", "op": "reduction op",
             "root": "root", "src": "root", "dst": "root"}
"""What each of simulate()'s arguments that a log's rows give is, in a row."""
