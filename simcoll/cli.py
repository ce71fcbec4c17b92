"""Command line: ``simcoll demo``, ``simcoll run ...``, ``simcoll list``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

import simcoll as sc
from simcoll.errors import SimCollError
from simcoll.topology.graph import Topology
from simcoll.trace import save_chrome

__all__ = ["main", "demo"]


def demo(nranks: int = 8, nbytes: int = 16 * sc.MiB) -> list[sc.Result]:
    """Parameter server, naive and ring all_reduce of real float32 data on 8 GPUs.

    The GPUs sit on one 100 GB/s NVSwitch-like switch (1 us per link, reductions at
    400 GB/s); the parameter server also runs on a dedicated server host of the same link.
    """
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(nbytes // 4, dtype=np.float32) for _ in range(nranks)]
    common = dict(bandwidth=100 * sc.GB, latency=1 * sc.us, reduce_bandwidth=400 * sc.GB)
    plain = sc.topology.switch(nranks, **common)
    with_server = sc.topology.switch(nranks, servers=1, server_reduce_bandwidth=400 * sc.GB,
                                     **common)
    runs = [("parameter_server", with_server), ("parameter_server", plain), ("naive", plain),
            ("ring", plain)]
    return [sc.simulate(topo, "all_reduce", algorithm=alg, data=data) for alg, topo in runs]


def _table(results: Sequence[sc.Result]) -> str:
    head = (f"{'algorithm':<18}{'topology':<22}{'time (us)':>11}{'sent/rank (MB)':>16}"
            f"{'recv/rank (MB)':>16}{'algbw GB/s':>12}{'busbw GB/s':>12}  correct")
    rows = [head, "-" * len(head)]
    for r in results:
        rows.append(
            f"{r.algorithm:<18}{r.topology:<22}{r.time * 1e6:>11.1f}"
            f"{r.bytes_sent.max() / 1e6:>16.2f}{r.bytes_received.max() / 1e6:>16.2f}"
            f"{r.algbw / 1e9:>12.2f}{r.busbw / 1e9:>12.2f}  {r.correct}")
    return "\n".join(rows)


def _topology(spec: str) -> Topology:
    """``switch:8``, ``ring:8``, ``fully_connected:4``, ``cluster:2x8``, ``torus:4x4``."""
    kind, _, arg = spec.partition(":")
    try:
        if kind == "cluster":
            nodes, per = (int(v) for v in arg.split("x"))
            return sc.topology.cluster(nodes, per)
        if kind == "torus":
            return sc.topology.torus([int(v) for v in arg.split("x")])
        builder = {"switch": sc.topology.switch, "ring": sc.topology.ring,
                   "fully_connected": sc.topology.fully_connected}[kind]
        return builder(int(arg))
    except (KeyError, ValueError):
        raise SimCollError(
            f"cannot read topology {spec!r}; use switch:N, ring:N, fully_connected:N, "
            f"cluster:NODESxGPUS or torus:AxB[xC]") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="simcoll", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="PS, naive and ring all_reduce on 8 simulated GPUs")
    d.add_argument("--size", default="16MiB", help="per-rank buffer (default 16MiB)")
    d.add_argument("--json", action="store_true", help="print JSON instead of a table")
    run = sub.add_parser("run", help="simulate one collective (data-free unless --data)")
    run.add_argument("--topology", default="switch:8")
    run.add_argument("--collective", default="all_reduce")
    run.add_argument("--algorithm", default="ring")
    run.add_argument("--size", default="256MiB")
    run.add_argument("--dtype", default="float32")
    run.add_argument("--network", default="flow")
    run.add_argument("--data", action="store_true", help="move real random arrays")
    run.add_argument("--json", action="store_true")
    run.add_argument("--trace", metavar="PATH",
                     help="also write a Chrome / Perfetto trace of the run to PATH")
    sub.add_parser("list", help="list registered algorithms")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            results = demo(nbytes=sc.parse_size(args.size))
        elif args.command == "list":
            for coll, name in sc.list_algorithms():
                print(f"{coll:<16}{name}")
            return 0
        else:
            topo = _topology(args.topology)
            kwargs: dict = {"network": args.network}
            size = sc.parse_size(args.size)
            if args.data:
                rng = np.random.default_rng(0)
                count = size // np.dtype(args.dtype).itemsize
                kwargs["data"] = [(rng.standard_normal(count) * 8).astype(args.dtype)
                                  for _ in range(topo.nranks)]
            else:
                kwargs.update(nbytes=size, dtype=args.dtype)
            results = [sc.simulate(topo, args.collective, algorithm=args.algorithm,
                                   trace=args.trace is not None, **kwargs)]
            if args.trace is not None:
                save_chrome(results[0], args.trace)
    except (SimCollError, ValueError, OSError) as exc:
        print(f"simcoll: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        print(_table(results))
    return 0 if all(r.correct is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
