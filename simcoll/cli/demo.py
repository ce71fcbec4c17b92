"""``simcoll demo``: parameter server, naive and ring all_reduce on 8 simulated GPUs."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from simcoll.cli.options import SIZE_HELP, Once, parse_bytes
from simcoll.errors import InvalidInputError
from simcoll.memory import shortfall
from simcoll.result import Result
from simcoll.simulate import simulate
from simcoll.topology.builders import switch
from simcoll.units import GB, MiB, us

__all__ = ["demo", "format_bytes", "add_parser"]


def demo(nranks: int = 8, nbytes: int = 16 * MiB) -> list[Result]:
    """Parameter server, naive and ring all_reduce of real float32 data on ``nranks`` GPUs.

    The GPUs sit on one 100 GB/s NVSwitch-like switch (1 us per link, reductions at
    400 GB/s); the parameter server also runs on a dedicated server host of the same link.

    Raises:
        InvalidInputError: ``nbytes`` is not a positive multiple of 4 (float32 elements),
            or the inputs and the four runs' outputs would not fit in this machine's
            memory (checked before any data is made).
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 4 or nbytes % 4:
        raise InvalidInputError(f"demo size {nbytes!r} bytes is not accepted; use a positive "
                                f"multiple of 4 bytes (whole float32 elements)")
    runs = 4
    problem = shortfall(nranks * nbytes * (1 + runs))
    if problem:
        raise InvalidInputError(f"demo size {nbytes} bytes per rank {problem} ({nranks} "
                                f"ranks' inputs and the outputs of its {runs} runs); use a "
                                f"smaller size")
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(nbytes // 4, dtype=np.float32) for _ in range(nranks)]
    common: dict[str, Any] = dict(bandwidth=100 * GB, latency=1 * us,
                                  reduce_bandwidth=400 * GB)
    plain = switch(nranks, **common)
    with_server = switch(nranks, servers=1, server_reduce_bandwidth=400 * GB, **common)
    algorithms = [("parameter_server", with_server), ("parameter_server", plain),
                  ("naive", plain), ("ring", plain)]
    return [simulate(topo, "all_reduce", algorithm=alg, data=data) for alg, topo in algorithms]


def format_bytes(nbytes: float) -> str:
    """``1536`` -> ``"1.50 KiB"``; below 1 KiB the exact count of bytes."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} B"


def _table(results: Sequence[Result]) -> str:
    head = (f"{'algorithm':<18}{'topology':<22}{'time (us)':>11}{'max sent/GPU':>14}"
            f"{'max recv/GPU':>14}{'algbw GB/s':>12}{'busbw GB/s':>12}  correct")
    rows = [head, "-" * len(head)]
    for r in results:
        rows.append(
            f"{r.algorithm:<18}{r.topology:<22}{r.time * 1e6:>11.1f}"
            f"{format_bytes(r.bytes_sent.max()):>14}{format_bytes(r.bytes_received.max()):>14}"
            f"{r.algbw / 1e9:>12.2f}{r.busbw / 1e9:>12.2f}  {r.correct}")
    rows += ["", "max sent/GPU, max recv/GPU: payload bytes of the busiest GPU."]
    rows += [f"The server host of {r.algorithm} on {r.topology} sent "
             f"{format_bytes(r.host_bytes_sent[:r.hosts].sum())} and received "
             f"{format_bytes(r.host_bytes_received[:r.hosts].sum())}."
             for r in results if r.hosts]
    return "\n".join(rows)


def add_parser(sub: Any) -> None:
    """Add ``demo`` to the subcommands."""
    p = sub.add_parser("demo", help="PS, naive and ring all_reduce on 8 simulated GPUs",
                       description="All-reduce real float32 data on 8 GPUs behind a 100 GB/s "
                                   "switch with a parameter server (on a server host, and "
                                   "on rank 0), naive and ring all_reduce.")
    p.add_argument("--size", type=parse_bytes, default=16 * MiB, action=Once,
                   help=f"per-rank buffer (default 16M); {SIZE_HELP}")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    results = demo(nbytes=args.size)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        print(_table(results))
    return 0 if all(r.correct is not False for r in results) else 1
