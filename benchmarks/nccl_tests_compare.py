"""Simulated against measured: every public nccl-tests table of nccl_public.py.

For each table, build the matching simcoll machine (``dgx_a100(nodes)`` for A100 SXM
nodes, with the 40 GB model's reduction rate where the table's GPUs are those,
``dgx_h100(nodes)`` for H100 SXM nodes, NIC overrides where the preset takes
them, ``pcie_node(gpus, gen, p2p)`` for the PCIe servers of PCIE_SERVERS), simulate
all_reduce at every size of the table in data-free mode, and print the
simulated and measured time and busbw per size, the relative time error, the
geometric-mean absolute error per table (exp(mean |log(simulated / measured)|) - 1) and
over all rows of all tables, and the worst table. Figures are printed, never asserted.

    python benchmarks/nccl_tests_compare.py                  # algorithm "nccl" if registered
    python benchmarks/nccl_tests_compare.py --algorithm ring --tables a100x8_oci
    python benchmarks/nccl_tests_compare.py --tables h100x16_ndr_ring --proto Simple
    python benchmarks/nccl_tests_compare.py --proto ^LL128   # NCCL_PROTO=^LL128
    python benchmarks/nccl_tests_compare.py --tuner 2.26.2   # NCCL 2.26.2's tuner for all
    python benchmarks/nccl_tests_compare.py --max-size 1GiB     # skip the slowest sizes
    python benchmarks/nccl_tests_compare.py --param launch_overhead=17us   # a run's cost
    python benchmarks/nccl_tests_compare.py --tables a100x8_oci --path   # what sets each time
    python benchmarks/nccl_tests_compare.py --workers 2   # sizes on 2 processes, same figures

Where a table set NCCL_ALGO and the algorithm is "nccl", the run passes ``algo=`` to it;
``--proto`` narrows NCCL's protocols for every table as NCCL_PROTO does (one, several
separated by commas, or ``^`` and those to leave out): a what-if, which protocols did the
measured run have? Where a table printed an NCCL release whose tuner simcoll has
(``simcoll.algorithms.nccl.constants.TUNERS``), the run chooses with that release's tuner,
and with 2.30.7's elsewhere; ``--tuner`` names one for every table.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interrupts import run_main  # noqa: E402
from nccl_public import TABLES, PublicTable  # noqa: E402

import simcoll as sc  # noqa: E402
from simcoll.algorithms.nccl.constants import TUNERS  # noqa: E402
from simcoll.algorithms.nccl.machine import describe  # noqa: E402
from simcoll.algorithms.nccl.tune_model import max_channels, predict  # noqa: E402
from simcoll.cli.options import parse_param  # noqa: E402
from simcoll.network import NETWORKS  # noqa: E402
from simcoll.processes import local_pool  # noqa: E402
from simcoll.topology.presets import A100_SXM_40GB, RTX_5090  # noqa: E402

NIC_OVERRIDES: dict[str, dict[str, Any]] = {
    "a100x16_oci_roce": {"nics_per_node": 16, "nic_bandwidth": 100 * sc.Gbps},
}
"""Preset arguments that describe a table's NICs where the preset's defaults do not."""

PCIE_SERVERS: dict[str, tuple[dict[str, Any], str]] = {
    "rtx5090x4_genoa_shm": (
        {"gen": 5, "p2p": False, "gpus_per_switch": 1, "memory_bandwidth": 460.8 * sc.GB,
         "reduce_bandwidth": RTX_5090.reduce_bandwidth},
        "host memory of one EPYC 9004 (Genoa) socket, 12 channels of DDR5-4800 (460.8 "
        "GB/s, AMD's specifications; the source does not state how many are filled); "
        "one GPU per x16 root "
        "port is read from the bus ids (0x01, 0x21, 0x41, 0x61: one per root complex of "
        "the EPYC's I/O die), which the source does not state; the receiving GPU reads "
        "host memory at the 35.2 GB/s nvbandwidth measured for H100 SMs on Gen5 "
        "(pcie_node's default), which stands in for the RTX 5090's"),
    "rtx5090x8_turin_p2p": (
        {"gen": 5, "p2p": True, "sockets": 2, "inter_socket_bandwidth": 55.6 * sc.GB,
         "reduce_bandwidth": RTX_5090.reduce_bandwidth},
        "4 GPUs per PCIe switch stand in for a layout the source does not state; the "
        "socket link is given the 55.6 GB/s that the source's p2pBandwidthLatencyTest "
        "measures between every pair of GPUs, those on two sockets included (NCCL's "
        "tuner assumes 16 GB/s for AMD)"),
}
"""pcie_node arguments the source states or shows (PCIe generation, P2P, sockets, the
layout its bus ids give, measured pair bandwidth; the GPU's reduction rate from its
memory bandwidth), and what the preset's defaults stand in for."""

ARCH: dict[str, str] = {"rtx5090x4_genoa_shm": "blackwell", "rtx5090x8_turin_p2p": "blackwell"}
"""NCCL's constants for GPUs the tuner cannot tell from the machine: an RTX 5090 is
compute capability 12.0, which NCCL 2.30.7 indexes as Blackwell (``compCapIndex`` in
src/graph/tuning.cc: 10.0 and above)."""


def size_argument(text: str) -> int:
    """A size such as ``1GiB`` for argparse, refused with simcoll's own message (argparse
    says only "invalid parse_size value" where a type raises another error)."""
    try:
        return sc.parse_size(text)
    except sc.SimCollError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def machine(public: PublicTable) -> tuple[sc.Topology, str, list[str]]:
    """The preset for the table's GPUs and node count, the call that built it, and notes
    on what differs from the published machine."""
    notes = []
    if public.id in PCIE_SERVERS:
        kwargs, differs = PCIE_SERVERS[public.id]
        shown = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in kwargs.items()]
        call = ", ".join([str(public.gpus_per_node)] + shown)
        return (sc.topology.pcie_node(public.gpus_per_node, **kwargs), f"pcie_node({call})",
                [differs])
    if "A100-SXM4" in public.gpu:
        preset = sc.topology.dgx_a100
    elif "H100" in public.gpu and "PCIe" not in public.gpu:
        preset = sc.topology.dgx_h100
    else:
        raise SystemExit(f"{public.id}: no preset for {public.gpu}; add one to machine()")
    accepted = inspect.signature(preset).parameters
    extra = {k: v for k, v in NIC_OVERRIDES.get(public.id, {}).items() if k in accepted}
    if "A100-SXM4-40GB" in public.gpu:  # dgx_a100's GPUs are the 80 GB model's
        extra["reduce_bandwidth"] = A100_SXM_40GB.reduce_bandwidth
    missing = sorted(set(NIC_OVERRIDES.get(public.id, {})) - set(extra))
    if missing:
        notes.append(f"{preset.__name__} takes no {', '.join(missing)}: its default NICs "
                     f"stand in for {public.nics}")
    call = ", ".join([str(public.nodes)] + [f"{k}={v:g}" for k, v in extra.items()])
    return preset(public.nodes, **extra), f"{preset.__name__}({call})", notes


def run_params(public: PublicTable, algorithm: str, proto: str | None = None,
               tuner: str | None = None) -> dict[str, Any]:
    """The algorithm parameters a table's runs take: NCCL_ALGO where the table set it,
    the GPU generation where the preset's differs, ``proto``, and the tuner of the NCCL
    release the table printed (or ``tuner``)."""
    params: dict[str, Any] = {}
    if algorithm == "nccl" and public.algorithm:
        params["algo"] = public.algorithm
    if algorithm == "nccl" and public.id in ARCH:
        params["arch"] = ARCH[public.id]
    if proto is not None:
        params["proto"] = proto
    if algorithm == "nccl":
        printed = public.nccl_version if public.nccl_version in TUNERS else None
        if tuner or printed:
            params["tuner"] = tuner or printed
    return params


def choose_algorithm(requested: str | None) -> tuple[str, str | None]:
    """The algorithm to run and a note when the default had to fall back."""
    if requested is not None:
        return requested, None
    try:
        sc.get_algorithm("all_reduce", "nccl")
        return "nccl", None
    except sc.UnknownAlgorithmError:
        return "ring", ("note: no all_reduce algorithm 'nccl' is registered yet; comparing "
                        "with 'ring'")


PATH_KINDS = (("wait", "launch"), ("latency", "steps"), ("transfer", "bytes"),
              ("reduce", "reduce"))
"""The critical path's kinds ``--path`` shows (compute never occurs here), by column."""


def path_shares(res: sc.Result) -> str:
    """The share of the run's time in each kind of critical-path segment, as columns."""
    totals = sc.critical_path(res).totals()
    return "".join(f" {totals[kind] / res.time:>7.0%}" if res.time else f" {'-':>7}"
                   for kind, _ in PATH_KINDS)


def simulate_size(topo: sc.Topology, size: int, algorithm: str, network: str,
                  params: dict[str, Any], path: bool) -> tuple[float, float, dict[str, Any], str]:
    """One size's simulated time (us), busbw (GB/s), run parameters and, with ``path``,
    its critical path's shares; in this process or a worker's."""
    res = sc.simulate(topo, "all_reduce", algorithm=algorithm, nbytes=size, network=network,
                      trace=path, **params)
    return res.time * 1e6, res.busbw / 1e9, dict(res.params), path_shares(res) if path else ""


def in_order(pool: Executor | None, calls: list[tuple[Any, ...]]
             ) -> Iterator[tuple[float, float, dict[str, Any], str]]:
    """:func:`simulate_size` of each call, in order: here, or spread over ``pool``."""
    if pool is None:
        yield from (simulate_size(*call) for call in calls)
        return
    futures = [pool.submit(simulate_size, *call) for call in calls]
    try:
        yield from (future.result() for future in futures)
    except KeyboardInterrupt:
        raise   # the pool is terminated: a future cancelled first makes its thread raise
    except BaseException:
        for future in futures:   # a size that failed, or the caller stopped: no more
            future.cancel()
        raise


def compare(public: PublicTable, algorithm: str, network: str, proto: str | None = None,
            max_size: float = math.inf, tuner: str | None = None,
            extra: dict[str, Any] | None = None, path: bool = False,
            pool: Executor | None = None) -> tuple[list[float], str]:
    """Print one table's comparison (with the algorithm parameters ``extra`` on top of
    the table's own; with ``path``, each run's critical path by kind; its sizes spread
    over ``pool``'s processes where given); return its log errors and its summary
    line."""
    topo, call, notes = machine(public)
    params = {**run_params(public, algorithm, proto, tuner), **(extra or {})}
    print(f"\n== {public.id}: {public.nodes} x {public.gpus_per_node} {public.gpu}"
          f"{', ' + public.nics if public.nics else ''}")
    print(f"   {public.fabric}; NCCL {public.nccl_version or 'version not printed'}; env "
          f"{public.env or 'none'}")
    print(f"   source: {public.source} ({public.date})")
    print(f"   simulated: {call}, all_reduce / {algorithm}"
          f"{' ' + str(params) if params else ''}, network {network}")
    for note in notes:
        print(f"   note: {note}")
    print(f"   {'size (B)':>12} {'measured us':>12} {'simulated us':>13} {'time error':>11} "
          f"{'busbw meas':>11} {'busbw sim':>10}"
          + "".join(f" {name:>7}" for _, name in PATH_KINDS if path)
          + (f" {'NCCL model us':>14}  ran" if algorithm == "nccl" else ""))
    logs, model_logs = [], []
    skipped = [row[0] for row in public.rows if row[0] > max_size]
    rows = [row for row in public.rows if row[0] <= max_size]
    calls = [(topo, row[0], algorithm, network, params, path) for row in rows]
    for (size, time_us, _, busbw), (sim_us, sim_busbw, ran, shares) in zip(
            rows, in_order(pool, calls)):
        logs.append(math.log(sim_us / time_us))
        shown = ""
        if algorithm == "nccl":
            model_us = nccl_model(topo, size, ran, params.get("channels", 0))
            model_logs.append(math.log(model_us / time_us))
            shown = f" {model_us:>14.2f}  {ran['algo']}/{ran['proto']}/{ran['channels']}"
        print(f"   {size:>12d} {time_us:>12.2f} {sim_us:>13.2f} {sim_us / time_us - 1:>+11.1%} "
              f"{busbw:>11.2f} {sim_busbw:>10.2f}{shares}{shown}", flush=True)
    if skipped:
        print(f"   not simulated (--max-size): {', '.join(map(str, skipped))}")
    if not logs:
        return logs, f"{public.id:<22} {'-':>8}  (no size simulated)"
    model = f"; NCCL's own model {geomean(model_logs):.1%}" if model_logs else ""
    summary = (f"{public.id:<22} {geomean(logs):>8.1%}  ({len(logs)} of {len(public.rows)} "
               f"sizes{model})")
    print(f"   geometric-mean |time error|: {geomean(logs):.1%} (times off by a factor of "
          f"{1 + geomean(logs):.3f} on average: {GEOMEAN}){model}")
    return logs, summary


def nccl_model(topo: sc.Topology, size: int, ran: dict[str, Any],
               channels: int = 0) -> float:
    """NCCL's own predicted time (us) for what ran: its tuner's cost model, latency plus
    size over bandwidth, for the algorithm and protocol the run took, on the channels the
    tuner reasons on before NCCL trims them for a small buffer (``ran["channels"]``: the
    tuner's bandwidths and its ring "plateau" test read the communicator's count): the
    communicator's, or ``channels`` where the run fixed them (NCCL_MIN_NCHANNELS and
    NCCL_MAX_NCHANNELS), and NVLS's own count for NVLS and NVLS-tree
    (:func:`~simcoll.algorithms.nccl.tune_model.max_channels`)."""
    machine = describe(topo, tuple(range(topo.nranks)), ran["arch"])
    tuned = max_channels(machine, ran["algo"], ran["tuner"], ran["collnet"], comm=channels,
                         nvls=ran.get("nvls_channels", 0))
    return predict(machine, "all_reduce", size, ran["algo"], ran["proto"], tuned,
                   ran["tuner"]) * 1e6


def check_run_options(parser: argparse.ArgumentParser, algorithm: str, network: str,
                      proto: str | None, params: dict[str, Any]) -> None:
    """End the program, before any table, on a network, algorithm or parameter that
    ``sc.simulate`` would refuse, naming it."""
    if network not in NETWORKS:
        parser.error(f"--network {network}: use one of {', '.join(NETWORKS)}")
    try:
        spec = sc.get_algorithm("all_reduce", algorithm)
        spec.normalized({**params, **({} if proto is None else {"proto": proto})})
    except sc.SimCollError as err:
        parser.error(str(err))


def selected_tables(parser: argparse.ArgumentParser,
                    ids: str | None) -> tuple[PublicTable, ...]:
    """The tables named by ``--tables`` (comma-separated ids; every table without it);
    an unknown id ends the program with the known ones."""
    if ids is None:
        return TABLES
    wanted = ids.split(",")
    unknown = sorted(set(wanted) - {t.id for t in TABLES})
    if unknown:
        parser.error(f"unknown table ids {unknown}; known: {', '.join(t.id for t in TABLES)}")
    return tuple(t for t in TABLES if t.id in wanted)


GEOMEAN = "exp(mean |ln(simulated / measured)|) - 1"
"""What the geometric-mean |time error| printed is: the factor by which the simulated and
measured times differ on average (the larger over the smaller), less 1; rows all at -50%
give 100%."""


def geomean(logs: list[float]) -> float:
    """The geometric-mean |time error| of the sizes' log(simulated / measured):
    exp(mean |log(simulated / measured)|) - 1 (see :data:`GEOMEAN`)."""
    return math.exp(sum(abs(v) for v in logs) / len(logs)) - 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", help="all_reduce algorithm (default: nccl if "
                                            "registered, else ring)")
    parser.add_argument("--network", default="flow", help="network model (default: flow)")
    parser.add_argument("--tables", help="comma-separated table ids (default: all): "
                                         + ", ".join(t.id for t in TABLES))
    parser.add_argument("--max-size", type=size_argument, default=math.inf,
                        help="simulate only sizes up to this (e.g. 1GiB; default: all)")
    parser.add_argument("--proto", help="NCCL protocols for every size, as NCCL_PROTO: "
                                        "LL, LL128, Simple, several separated by commas, "
                                        "or ^ and those to leave out (default: NCCL's "
                                        "tuner picks among its defaults)")
    parser.add_argument("--tuner", choices=TUNERS,
                        help="the NCCL release whose tuner chooses, for every table "
                             "(default: the release a table printed where simcoll has "
                             "its tuner, else 2.30.7)")
    parser.add_argument("--param", action="append", type=parse_param, default=[],
                        metavar="NAME=VALUE",
                        help="an algorithm parameter for every table, e.g. "
                             "launch_overhead=17us or step_latency_scale=1.5 (repeatable)")
    parser.add_argument("--path", action="store_true",
                        help="trace each run and show its critical path's share of the "
                             "time in the launch, latencies and steps, bytes on links and "
                             "reductions (slower, and more memory, at large sizes)")
    parser.add_argument("--workers", type=int, default=1,
                        help="local processes that simulate the sizes, printed in order "
                             "as they come (the same figures; default: 1)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: use an integer >= 1")
    algorithm, note = choose_algorithm(args.algorithm)
    if note:
        print(note)
    if args.proto is not None and algorithm != "nccl":
        parser.error(f"--proto {args.proto} needs --algorithm nccl, not {algorithm}")
    if args.tuner is not None and algorithm != "nccl":
        parser.error(f"--tuner {args.tuner} needs --algorithm nccl, not {algorithm}")
    check_run_options(parser, algorithm, args.network, args.proto, dict(args.param))
    chosen = selected_tables(parser, args.tables)
    start = time.perf_counter()
    every: list[float] = []
    per_table = []
    with local_pool(args.workers) as pool:
        for public in chosen:
            logs, summary = compare(public, algorithm, args.network, args.proto,
                                    args.max_size, args.tuner, dict(args.param), args.path,
                                    pool)
            every += logs
            if logs:
                per_table.append((geomean(logs), summary))
    fixed = (f", proto {args.proto}" if args.proto else "") + \
        (f", tuner {args.tuner}" if args.tuner else "") + \
        "".join(f", {k}={v}" for k, v in args.param)
    print(f"\n== summary: all_reduce / {algorithm}{fixed}, network {args.network}")
    print(f"   {'table':<22} geometric-mean |time error| ({GEOMEAN}: the factor the times "
          f"differ by on average, less 1)")
    for _, summary in per_table:
        print(f"   {summary}")
    if not per_table:
        print("   no size simulated (every size is above --max-size)")
        return 0
    worst = max(per_table)
    print(f"   over all {len(every)} sizes of {len(per_table)} tables: {geomean(every):.1%}")
    print(f"   worst table: {worst[1].split()[0]} ({worst[0]:.1%})")
    print(f"   ({time.perf_counter() - start:.1f} s of simulation)")
    return 0


if __name__ == "__main__":
    run_main(main)
