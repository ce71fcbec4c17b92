"""nccl-tests' own options on ``simcoll run``, so that a command line copied from a real
run works, or says which option it cannot follow and why.

Options and defaults follow ``src/common.cu`` of NVIDIA/nccl-tests 2.19.6 (its
``longopts`` and the globals they set). Three kinds:

* the machine's shape: ``-t`` threads and ``-g`` GPUs per process; nccl-tests runs
  processes x T x G ranks, so T x G must divide the machine's ranks (without
  ``--topology`` the machine is ``switch:T*G``, one process's);
* options that cannot change a simulated time, each iteration of which takes the same:
  iteration counts, timeouts, init and reporting choices; taken and named in a ``#`` note;
* options that change what is timed (grouped or blocking launches, CUDA graphs, CPU
  time, buffer registration, misaligned buffers, NCCL's device kernels): only their
  defaults are taken (and ``-x 0``, which runs as ``-x -1``), anything else is refused
  saying what the option does;
* ``-J FILE``: the run written as nccl-tests' JSON report too (:mod:`simcoll.cli.json_out`).
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass

from simcoll.cli.options import CommandLineError, integer_option

__all__ = ["add_options", "shape_spec", "notes"]


@dataclass(frozen=True)
class _Flag:
    short: str
    long: str
    default: int
    meaning: str
    timed: bool  # changes what nccl-tests times: only the default is taken
    same: tuple[int, ...] = ()  # values that run as the default does


_FLAGS = (
    _Flag("-n", "--iters", 20, "timed iterations", False),
    _Flag("-w", "--warmup_iters", 1, "warm-up iterations", False),
    _Flag("-N", "--run_cycles", 1, "times the size loop runs", False),
    _Flag("-p", "--parallel_init", 0, "threads creating communicators at once", False),
    _Flag("-y", "--stream_null", 0, "the default CUDA stream", False),
    _Flag("-T", "--timeout", 0, "a timeout in seconds", False),
    _Flag("-M", "--memory", 0, "a GPU memory report", False),
    _Flag("-I", "--per_iter_timing", 0, "per-iteration statistics", False),
    _Flag("-K", "--per_iter_skip", 0, "iterations left out of those statistics", False),
    _Flag("-S", "--report_timestamps", 0, "a timestamp per row", False),
    _Flag("-a", "--average", 1, "how ranks' times are combined (0 rank 0, 1 mean, 2 min, "
          "3 max)", False),
    _Flag("-m", "--agg_iters", 1, "operations grouped in one launch (ncclGroupStart/End), "
          "timed together and divided among them", True),
    _Flag("-z", "--blocking", 0, "a wait and a barrier after every collective, timed with "
          "it", True),
    _Flag("-G", "--cudagraph", 0, "CUDA graph replays, which launch with less overhead "
          "(simcoll: --param launch_overhead=...)", True),
    _Flag("-C", "--report_cputime", 0, "the host's time to launch, printed as the time", True),
    _Flag("-R", "--local_register", 0, "registered (or symmetric) buffers, which NCCL "
          "moves with other kernels", True),
    _Flag("-u", "--unalign", 0, "buffers misaligned by a few elements", True),
    # -x 0 is NCCL_CTA_POLICY_DEFAULT, which NCCL takes where none is set (src/init.cc)
    _Flag("-x", "--cta_policy", -1, "NCCL's CTA policy", True, same=(0,)),
    _Flag("-D", "--device_implementation", 0, "nccl-tests' device-side kernels", True),
    _Flag("-V", "--device_cta_count", 16, "CTAs of the device-side kernels, which only "
          "-D > 0 runs (refused)", False),
)


def _count(text: str) -> int:
    value = integer_option(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def add_options(parser: argparse.ArgumentParser) -> None:
    """nccl-tests' options that ``simcoll run`` does not otherwise have."""
    group = parser.add_argument_group("nccl-tests options", textwrap.fill(
        "taken so that a real command line runs: -t/-g must fit the machine; those that "
        "cannot change a simulated time are noted; those that change what nccl-tests "
        "times are taken at their defaults only (and -x 0, which runs as -x -1)", 88))
    group.add_argument("-t", "--nthreads", type=_count, metavar="T",
                       help="threads per process (default 1; ranks = processes x T x G)")
    group.add_argument("-g", "--ngpus", type=_count, metavar="G",
                       help="GPUs per thread (default 1); without --topology the machine "
                            "is switch:T*G where -t or -g is given, else switch:8")
    for flag in _FLAGS:
        group.add_argument(flag.short, flag.long, type=integer_option, metavar="N",
                           dest=f"nccl_{flag.long[2:]}",
                           help=f"{flag.meaning} (nccl-tests' default {flag.default}"
                                + (")" if not flag.timed else "; only that is taken)"
                                   if not flag.same else
                                   f"; only that and {', '.join(map(str, flag.same))}, "
                                   f"which runs as it does, are taken)"))
    group.add_argument("-J", "--output_file", metavar="FILE.json",
                       help="also write the run as nccl-tests' JSON report (its format 3, "
                            "which sc.nccl_tests.parse reads)")


def _threads_gpus(args: argparse.Namespace) -> int | None:
    if args.nthreads is None and args.ngpus is None:
        return None
    return (args.nthreads or 1) * (args.ngpus or 1)


def shape_spec(args: argparse.Namespace) -> str | None:
    """The machine ``-t``/``-g`` name where ``--topology`` is not given (one process's
    ranks on a switch), else None."""
    ranks = _threads_gpus(args)
    return None if ranks is None else f"switch:{ranks}"


def notes(args: argparse.Namespace, nranks: int) -> list[str]:
    """The ``#`` notes on nccl-tests' options given, checked against a machine of
    ``nranks`` ranks.

    Raises:
        CommandLineError: T x G not dividing the ranks, or a timing option other than
            its default.
    """
    lines = []
    per_process = _threads_gpus(args)
    if per_process is not None:
        if nranks % per_process:
            raise CommandLineError(
                f"-t {args.nthreads or 1} -g {args.ngpus or 1}: {per_process} ranks per "
                f"process do not divide the machine's {nranks} (--topology {args.topology}); "
                f"nccl-tests runs processes x T x G ranks")
        lines.append(f"# -t {args.nthreads or 1} -g {args.ngpus or 1}: "
                     f"{nranks // per_process} process{'es' * (nranks != per_process)} of "
                     f"{per_process} rank{'s' * (per_process != 1)}, the machine's {nranks}"
                     + ("; under mpirun nccl-tests runs one such process per MPI rank: "
                        "give --topology the whole machine" if nranks == 1 else ""))
    ignored = []
    for flag in _FLAGS:
        value = getattr(args, f"nccl_{flag.long[2:]}")
        if value is None:
            continue
        if flag.timed and value != flag.default and value not in flag.same:
            raise CommandLineError(f"{flag.short} {value} is not simulated: {flag.meaning}; "
                                   f"simcoll times one operation alone, as nccl-tests with "
                                   f"{flag.short} {flag.default}")
        if not flag.timed:
            ignored.append(f"{flag.short} {value}")
    if args.nccl_per_iter_timing not in (None, 0, 1):
        lines.append(f"# -I {args.nccl_per_iter_timing}: nccl-tests takes 0 (off) or 1 (on) "
                     f"and turns per-iteration statistics off for any other value; off")
    if ignored:
        lines.append(f"# {' '.join(ignored)}: taken; a simulation's iterations all take the "
                     f"same time, and its time is the last rank's (as -a 3)")
    return lines
