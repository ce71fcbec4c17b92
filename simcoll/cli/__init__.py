"""Command line: ``simcoll run | demo | list | sweep | plot | trace | compare | calibrate``
(or ``python -m simcoll``). Each subcommand lives in a module of its own; this one
parses, dispatches, and turns errors into one line on standard error."""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Sequence
from concurrent.futures import BrokenExecutor

from simcoll.cli import (
    calibrating,
    comparing,
    demo,
    listing,
    plotting,
    run,
    sweeping,
    tracing,
)
from simcoll.cli.options import GIVEN_ONCE, CommandLineError, Parser
from simcoll.errors import InvalidInputError, RunLimitError, SimCollError, TopologyError
from simcoll.processes import DIED

__all__ = ["main", "entry", "build_parser"]

_COMMANDS = (run, demo, listing, sweeping, plotting, tracing, comparing, calibrating)
_USAGE_ERRORS = (CommandLineError, InvalidInputError, TopologyError)
INTERRUPTED = 130
"""The status after Ctrl-C: 128 + SIGINT (2)."""
CLOSED_PIPE = 141
"""The status after a closed pipe (``simcoll run ... | head``): 128 + SIGPIPE (13), as a
shell reports a command that SIGPIPE ended; not 1, a failed check."""
_FAILED_WRITES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
"""Errors of a write that the arguments did not cause (a full disk): status 1, not 2."""


def build_parser() -> Parser:
    """The ``simcoll`` parser with every subcommand."""
    from simcoll import __version__

    parser = Parser(prog="simcoll", description="Simulate collective communication on "
                    "simulated GPU machines, checked against numpy, formulas and nccl-tests' "
                    "definitions.")
    parser.add_argument("--version", action="version", version=f"simcoll {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(sub)
    return parser


def _quiet_stdout() -> None:
    """After a closed pipe, point stdout at devnull so the interpreter's final flush does
    not fail again (Python's documented way, see the signal module's note on SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _interrupted(command: str, interrupt: KeyboardInterrupt) -> int:
    """Say that ``command`` was interrupted, and what ``interrupt``'s notes tell.

    The notes give an interrupted calibration's best point so far. A second Ctrl-C
    meanwhile ends the process as the signal does, without a traceback (the first one's
    work, saving what was asked and stopping workers, is done by now). The caller's
    handler is back on return."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    except ValueError:  # not the main thread: nothing to change
        previous = None
    try:
        print(f"simcoll {command}: interrupted", file=sys.stderr)
        for note in getattr(interrupt, "__notes__", ()):
            print(f"simcoll {command}: {note}", file=sys.stderr)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return INTERRUPTED


def _unwritten(error: OSError) -> int:
    """The status for ``--help`` or ``--version`` output that could not be written."""
    if isinstance(error, BrokenPipeError):
        _quiet_stdout()
        return CLOSED_PIPE
    print(f"simcoll: error: cannot write standard output: {error.strerror or error}",
          file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    0 on success, 1 if a result failed its check (or the simulation failed, or a write
    did: a full disk), 2 for bad arguments or input, 130 when interrupted, 141 when
    standard output was closed early (:data:`CLOSED_PIPE`). Errors are one line on standard error.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CommandLineError as exc:
        print(exc, file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help and --version print, then exit
        code = exc.code if isinstance(exc.code, int) else 0
        try:   # what they printed may still sit in the buffer
            if sys.stdout is not None:   # closed (>&-): argparse wrote to stderr
                sys.stdout.flush()
        except OSError as error:
            return _unwritten(error)
        return code
    except OSError as error:   # --help or --version's own write
        return _unwritten(error)
    vars(args).pop(GIVEN_ONCE, None)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout is None:  # started with standard output closed (>&-)
        if getattr(args, "output", None) is None:
            print(f"simcoll {args.command}: error: standard output is closed; give it a "
                  f"file or a pipe (>/dev/null to drop what it prints)", file=sys.stderr)
            return 2
        sys.stdout = open(os.devnull, "w")  # what it makes goes to --output: a note lost
    try:
        status: int = args.handler(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return CLOSED_PIPE
    except KeyboardInterrupt as interrupt:
        return _interrupted(args.command, interrupt)
    except BrokenExecutor as exc:
        said = "; ".join(getattr(exc, "__notes__", ())) or DIED
        print(f"simcoll {args.command}: error: {said}; use fewer --workers or smaller "
              f"runs", file=sys.stderr)
        return 1
    except MemoryError as exc:
        hint = ("a smaller --size" if args.command == "demo" else
                "fewer ranks (algorithms that send to every rank at once, such as naive and "
                "direct, hold p^2 messages even data-free) or smaller sizes"
                + (" (or drop -c)" if args.command in ("run", "trace") else ""))
        said = str(exc) if str(exc).startswith("out of memory") else "out of memory"
        said += "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
        print(f"simcoll {args.command}: error: {said}; use {hint}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in _FAILED_WRITES:
            print(f"simcoll {args.command}: error: {exc}", file=sys.stderr)
            return 2
        # every file simcoll writes is named in its error; one that names none is
        # standard output
        named = exc.filename is not None or str(exc.strerror).startswith("cannot write")
        shown = exc if named else f"cannot write standard output: {exc.strerror}"
        print(f"simcoll {args.command}: error: {shown}", file=sys.stderr)
        return 1
    except _USAGE_ERRORS as exc:
        print(f"simcoll {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except RunLimitError as exc:   # no option sets the limits: say where they are set
        print(f"simcoll {args.command}: error: {exc} (the command line has no option for "
              f"until= or max_events=; raise them from Python: simcoll.simulate(..., "
              f"until=..., max_events=...))", file=sys.stderr)
        return 1
    except SimCollError as exc:
        print(f"simcoll {args.command}: error: {exc}", file=sys.stderr)
        return 1


def entry() -> None:
    """``python -m simcoll``, and the ``simcoll`` console script once ``_simcoll_cli`` has
    imported simcoll: :func:`main`, then exit.

    After Ctrl-C the process leaves at once, once what it saved is saved and its worker
    processes are gone: freeing a large simulation's objects one by one at the
    interpreter's exit took seconds after "interrupted" was printed.
    """
    import multiprocessing

    status = main()
    if status == INTERRUPTED and not multiprocessing.active_children():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)
