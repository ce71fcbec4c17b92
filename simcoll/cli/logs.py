"""What ``simcoll compare`` and ``simcoll calibrate`` share: reading one run of an
nccl-tests log, the sizes kept, and the tuner of the NCCL release the log printed."""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import inspect
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simcoll.algorithms.nccl.constants import NCCL_VERSION, TUNERS
from simcoll.cli.nccl_env import nccl_variables
from simcoll.cli.options import (
    DEFAULT_ALGORITHM_TEXT,
    LOG_OPTIONS,
    CommandLineError,
    Once,
    algorithm_params,
    default_algorithm,
    parse_bytes,
    parse_param,
    processes,
    run_settings,
)
from simcoll.collectives import COLLECTIVES
from simcoll.collectives import collective as get_collective
from simcoll.comparison import check_rows, check_simulated, compare
from simcoll.errors import InvalidInputError
from simcoll.nccl_tests import NcclTestsTable, count_runs, parse
from simcoll.network import NETWORKS
from simcoll.topology.graph import Topology

__all__ = ["add_log_arguments", "read_table", "simulate_kwargs", "machine_notes"]


def add_log_arguments(p: argparse.ArgumentParser) -> None:
    """The log, the machine, the algorithm and which sizes of the log to take."""
    p.add_argument("log", metavar="LOG", help="the nccl-tests output, a file or - for stdin")
    p.add_argument("--topology", required=True, metavar="SPEC", action=Once,
                   help="the machine, as a builder or preset with its arguments "
                        "(dgx_h100:nodes=2, 'switch:ranks=8,latency=1us') or a topology file")
    p.add_argument("--collective", action=Once, metavar="NAME",
                   help=f"the collective the log measured, where it does not say (one of "
                        f"{', '.join(n for n, c in COLLECTIVES.items() if c.uneven is None)}"
                        f"); where it does, it must agree")
    p.add_argument("--algorithm", action=Once,
                   help=f"the algorithm simulated (default: {DEFAULT_ALGORITHM_TEXT}). "
                        f"nccl runs NCCL's own choice, with the tuner of the NCCL release "
                        f"the log printed, where simcoll has it")
    p.add_argument("--param", action="append", type=parse_param, default=[],
                   metavar="NAME=VALUE", help="a fixed algorithm parameter (repeatable)")
    p.add_argument("--network", action=Once, default="flow", choices=sorted(NETWORKS),
                   help="the network model (default: flow)")
    p.add_argument("--run", action=Once, type=int, metavar="K",
                   help="the K-th run of a log that holds several (1 is the first)")
    p.add_argument("--min-size", action=Once, type=parse_bytes, default=0, metavar="BYTES",
                   help="only the sizes from this one up (K, M, G are powers of 1024)")
    p.add_argument("--max-size", action=Once, type=parse_bytes, default=None, metavar="BYTES",
                   help="only the sizes up to this one")
    p.add_argument("--in-place", action="store_true",
                   help="the in-place times (default: out-of-place)")
    p.add_argument("--workers", action=Once, type=processes, default=1, metavar="N",
                   help="local processes that simulate the sizes (default: 1, this one)")


def read_table(args: argparse.Namespace) -> tuple[NcclTestsTable, list[str]]:
    """The run of the log that ``--run`` picks, with the sizes between ``--min-size`` and
    ``--max-size``, those of 0 bytes (nothing moves there) or with a time printed as 0.00
    left out (nothing to compare a time with), and a note where some were or where the
    run has no footer; the collective the log names, else ``--collective``'s (they must
    agree); sets ``args.algorithm`` to the collective's default where none was named."""
    wanted = None if args.collective is None else get_collective(args.collective).name
    text = _read_stdin() if args.log == "-" else _read(args.log)
    name = "standard input" if args.log == "-" else args.log
    try:
        measured = parse(text, collective=wanted, run=_run_number(args.run, count_runs(text)))
    except InvalidInputError as exc:   # what the log holds: named with the log
        raise CommandLineError(f"{name}: {exc}") from None
    if measured.collective is None:
        raise CommandLineError("the log does not say which collective it measured; name it "
                               "with --collective (e.g. --collective all_reduce)")
    check_simulated(measured.collective)
    if args.max_size is not None and args.min_size > args.max_size:
        raise CommandLineError(f"--min-size {args.min_size} is above --max-size "
                               f"{args.max_size}")
    if args.algorithm is None:
        args.algorithm = default_algorithm(measured.collective)
    place = "in_place" if args.in_place else "out_of_place"
    between = measured.between(args.min_size, args.max_size)
    try:   # a row without the block asked for (--in-place of a one-block log)
        kept = tuple(row for row in between.rows
                     if row.size > 0 and row.measurement(place).time_us > 0)
    except InvalidInputError as exc:
        hint = "; leave out --in-place (this log has out-of-place times only)" \
            if args.in_place else ""
        raise CommandLineError(f"{name}: {exc}{hint}") from None
    if not kept:
        bounds = "" if not args.min_size and args.max_size is None else (
            f" between --min-size {args.min_size} and --max-size "
            f"{'(none)' if args.max_size is None else args.max_size}")
        raise CommandLineError(f"no row of the log{bounds} has both a size and a time "
                               f"above 0 to compare with (its {len(between.rows)} row(s): "
                               f"sizes of 0 bytes, or times printed as 0.00)"
                               if between.rows else
                               f"no size of the log lies{bounds}")
    try:   # the rows kept: one left out may hold anything
        check_rows(dataclasses.replace(between, rows=kept),
                   get_collective(measured.collective))
    except InvalidInputError as exc:
        raise CommandLineError(f"{name}: {exc}") from None
    empty = sum(row.size == 0 for row in between.rows)
    instant = len(between.rows) - len(kept) - empty
    notes = ([f"{empty} size(s) of 0 bytes left out"] if empty else []) + (
        [f"{instant} size(s) with a time printed as 0.00 us left out"] if instant else []) + (
        ["the run has no '# Avg bus bandwidth' footer: it may have stopped early"]
        if measured.avg_busbw is None else [])
    return dataclasses.replace(between, rows=kept), notes


def _run_number(run: int | None, runs: int) -> int:
    """The run ``--run`` picks (1 where the log holds one).

    Raises:
        CommandLineError: ``--run`` beyond the log's runs, or missing where it has several.
    """
    if run is None and runs > 1:
        raise CommandLineError(f"the log holds {runs} runs; pick one with --run K "
                               f"(1..{runs})")
    if run is not None and not 1 <= run <= runs:
        raise CommandLineError(f"--run {run}: the log holds {runs} run(s); use 1..{runs}")
    return 1 if run is None else run


def machine_notes(measured: NcclTestsTable, topology: Topology) -> list[str]:
    """A note where the log's ranks sat on another number of hosts than the machine's
    GPUs on nodes (one node's GPUs compared with a run across two hosts, say)."""
    if not measured.hosts or len(measured.hosts) != topology.nranks:
        return []
    hosts = len(set(measured.hosts))
    nodes = len(set(topology.gpu_nodes))
    if hosts == nodes:
        return []
    return [f"the log's {len(measured.hosts)} ranks ran on {hosts} host(s), the machine's "
            f"GPUs sit on {nodes} node(s)"]


def _simcoll_run_note(printed: str, args: argparse.Namespace) -> list[str]:
    """A note where the log is ``simcoll run``'s own table of another algorithm, network
    or parameters than this command simulates (``printed``: its first line's
    ``ring, network flow, params: chunks=4 (defaults: ...)``), as a table made with
    ``--param chunks=4`` compared without it differs by what the parameter does."""
    mine = run_settings(args.algorithm, args.network, args.param)
    theirs = printed.partition(" (defaults:")[0]
    fitted = {name for name, _ in getattr(args, "free", ())}   # calibrate's --free

    def kept(settings: str) -> list[str]:
        """The settings' words but the parameters being fitted (and ``none``)."""
        return sorted(w for w in settings.split()
                      if w.partition("=")[0] not in fitted and not (fitted and w == "none"))

    if kept(theirs) == kept(mine):  # the parameters in any order
        return []
    return [f"the log is simcoll run's table of {theirs}; this simulates {mine}: give the "
            f"same --algorithm, --network and --param to compare it with its own run"]


def _timing_notes(settings: Mapping[str, Any]) -> list[str]:
    """Notes on how the log timed its operations where that differs from one launched
    alone (nccl-tests' -m, -G and -u, read from its settings line)."""
    notes = []
    if settings.get("agg iters", 1) > 1:
        notes.append(f"the log grouped {settings['agg iters']} operations per launch (-m): "
                     f"its time per operation shares one launch's cost among them; one "
                     f"is simulated alone")
    if settings.get("graph", 0) > 0:
        notes.append(f"the log replayed CUDA graphs (-G {settings['graph']}), which launch "
                     f"with less overhead than one launch per operation, simulated here")
    if settings.get("unalign", 0) > 0:
        notes.append(f"the log misaligned its buffers (-u {settings['unalign']}), which "
                     f"NCCL moves more slowly; simulated aligned")
    return notes


def simulate_kwargs(args: argparse.Namespace,
                    measured: NcclTestsTable) -> tuple[dict[str, Any], list[str]]:
    """``simulate``'s keyword arguments (the network, the ``--param`` values, and for
    ``--algorithm nccl`` the tuner of the log's NCCL release where simcoll has it), and
    a note for each choice the log made, and one naming the ``NCCL_*`` variables in this
    environment, which are not read."""
    kwargs: dict[str, Any] = {"network": args.network, **algorithm_params(
        args.param, inspect.signature(compare).parameters, from_log=True,
        options=LOG_OPTIONS)}
    notes = []
    if measured.communicators > 1:
        notes.append(f"the log ran {measured.communicators} communicators of "
                     f"{measured.nranks} ranks at once (NCCL_TESTS_SPLIT); one is simulated "
                     f"alone, without the others' traffic on shared links")
    if measured.simcoll_run is not None:
        notes += _simcoll_run_note(measured.simcoll_run, args)
    notes += _timing_notes(measured.settings)
    unread = nccl_variables(os.environ)
    if unread:
        notes.append(f"{', '.join(unread)} in the environment: not read here (the log's run "
                     f"had its own; give its choices with --param, such as proto=Simple)")
    if args.algorithm == "nccl" and "tuner" not in kwargs and measured.nccl_version:
        if measured.nccl_version in TUNERS:
            kwargs["tuner"] = measured.nccl_version
            notes.append(f"NCCL {measured.nccl_version}'s tuner chooses, as in the log")
        else:
            notes.append(f"the log ran NCCL {measured.nccl_version}, whose tuner simcoll "
                         f"does not have ({', '.join(TUNERS)}); {NCCL_VERSION}'s chooses")
    return kwargs, notes


def _read(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise CommandLineError(f"no log at {path}") from None
    except IsADirectoryError:
        raise CommandLineError(f"{path} is a directory; give the log file nccl-tests "
                               f"printed (or - for standard input)") from None
    except OSError as exc:
        raise CommandLineError(f"cannot read the log {path}: {exc.strerror or exc}") from None
    return _decode(data, path)


def _read_stdin() -> str:
    """Standard input's bytes decoded as a file's (its text where it has no bytes).

    Raises:
        CommandLineError: standard input is closed (the process started without one).
    """
    if sys.stdin is None:
        raise CommandLineError("standard input is closed; give the log as a file, or "
                               "pipe it in")
    buffer = getattr(sys.stdin, "buffer", None)
    return sys.stdin.read() if buffer is None else _decode(buffer.read(), "standard input")


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))
"""Byte-order marks and the codec they call for (Windows PowerShell 5.1's ``>`` writes
UTF-16 with one)."""


def _decode(data: bytes, name: str) -> str:
    """The text of a log: UTF-8, or UTF-8 or UTF-16 after a byte-order mark.

    Raises:
        CommandLineError: bytes that are not such text, naming the first bad one.
    """
    codec = next((c for bom, c in _BOMS if data.startswith(bom)), "utf-8")
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as err:
        raise CommandLineError(
            f"{name} is not text in {codec.removesuffix('-sig').upper()} (byte "
            f"0x{data[err.start]:02x} at offset {err.start}); give the log as UTF-8 text "
            f"(or UTF-16 with its byte-order mark)") from None
    if "\x00" in text:
        raise CommandLineError(f"{name} holds NUL characters: UTF-16 without a byte-order "
                               f"mark? Convert it to UTF-8 (iconv -f UTF-16LE -t UTF-8)")
    return text
