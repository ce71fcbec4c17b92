"""``simcoll trace``: one run written as a Chrome / Perfetto trace."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from simcoll.algorithms.registry import get_algorithm
from simcoll.cli import checking
from simcoll.cli.nccl_env import nccl_environment
from simcoll.cli.options import (
    SIZE_HELP,
    TRACE_OPTIONS,
    CommandLineError,
    Once,
    add_run_options,
    check_output,
    check_root_rank,
    default_algorithm,
    parse_bytes,
    refuse_overflow,
    resolve_dtype,
    run_kwargs,
    whole,
)
from simcoll.collectives import collective as get_collective
from simcoll.critical_path import critical_path
from simcoll.nccl_tests import nccl_shape
from simcoll.ops import ReduceOp
from simcoll.simulate import simulate
from simcoll.topology.spec import from_spec
from simcoll.trace import save_chrome

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add ``trace`` to the subcommands."""
    p = sub.add_parser("trace", help="one run to a Chrome / Perfetto trace (JSON)",
                       description="Simulate one collective with every message and "
                                   "compute span and every reduction that takes time (none "
                                   "where the machine reduces at an infinite rate) recorded, "
                                   "and write them as Chrome "
                                   "trace JSON (open it in ui.perfetto.dev), with the run's "
                                   "critical path as a row of its own; print where the "
                                   "critical path spent its time.")
    add_run_options(p)
    p.add_argument("--size", type=parse_bytes, default=None, action=Once,
                   help=f"nccl-tests' size, as in 'simcoll run' (default 1M); {SIZE_HELP}")
    p.add_argument("-c", "--check", nargs="?", type=whole, const=1, default=0, metavar="N",
                   help="data mode: move real arrays and check them with numpy (-c, or -c N "
                        ">= 1 as 'simcoll run' takes it; -c 0: off, the default)")
    p.add_argument("--output", required=True, metavar="PATH", action=Once,
                   help="where to write the trace (JSON)")
    p.add_argument("--json", action="store_true",
                   help="print the run and its critical path as one JSON object "
                        "(the result's record with a \"critical_path\" entry) instead "
                        "of the summary")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    out = check_output(args.output, (".json",), topology=args.topology)
    topo = from_spec(args.topology)
    run_kwargs(args, TRACE_OPTIONS)   # the options checked before NCCL's environment is read
    check_root_rank(args, topo)
    if args.algorithm is None:
        args.algorithm = default_algorithm(args.collective)
    from_environment, read = nccl_environment(
        os.environ, get_algorithm(args.collective, args.algorithm), args.param)
    args.param = [*args.param, *from_environment]
    kwargs = run_kwargs(args, TRACE_OPTIONS)
    for line in read:
        print(line, file=sys.stderr)
    coll = get_collective(args.collective)
    dtype = resolve_dtype(args.dtype)
    if coll.name == "barrier" and args.size:
        raise CommandLineError("a barrier moves no data; leave out --size (or give 0)")
    size = 0 if coll.name == "barrier" else 2**20 if args.size is None else args.size
    nbytes, _, size = nccl_shape(coll, topo.nranks, size, dtype.itemsize, aligned=True)
    refuse_overflow("--size", size, nbytes, topo.nranks, coll.size_factor(topo.nranks))
    if args.check:
        checking.check_memory(coll, topo.nranks, nbytes // dtype.itemsize, dtype.itemsize,
                              "--size")
        data = checking.inputs(topo.nranks, nbytes // dtype.itemsize, dtype,
                               kwargs.get("op", ReduceOp.SUM))
        res = simulate(topo, args.collective, algorithm=args.algorithm, data=data,
                       trace=True, **kwargs)
    else:
        res = simulate(topo, args.collective, algorithm=args.algorithm, nbytes=nbytes,
                       dtype=dtype, trace=True, **kwargs)
    path = critical_path(res)
    save_chrome(res, out, topo, path)
    if args.json:
        print(json.dumps({**res.to_dict(), "trace": str(args.output),
                          "critical_path": path.to_dict(topo)}))
    else:
        print(f"{res.summary()}\ntrace of {len(res.trace or ())} events written to "
              f"{args.output} (open it in ui.perfetto.dev)\n{path.summary(topo)}")
    return 1 if res.correct is False else 0
