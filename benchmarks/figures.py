"""Make the README's pictures (PNG) into docs/img/.

    python benchmarks/figures.py              # writes docs/img/*.png
    python benchmarks/figures.py --out DIR
    python benchmarks/figures.py --only nccl_tests   # one figure (its file name's stem)

1. ``scaling_busbw.png``: all_reduce busbw against ranks (2 to 256) at 64 MiB per rank on
   ``switch(p)`` (100 GB/s links, 1 us each), data-free, for ring, naive and parameter
   server, each with its alpha-beta model dashed beside it (alpha = 2 us, beta = 1 / 100
   GB/s: the switch is the alpha-beta reference network).
2. ``timeline_ring.png``: a traced ring all_reduce of 64 MiB per rank on 8 ranks whose
   reductions run at 200 GB/s, so the reduce-scatter steps wait for them, with its
   critical path drawn over the bands.
3. ``link_utilization_ps.png``: the links x time heatmap of a parameter-server all_reduce
   on 8 ranks (server on rank 0): its link is the bottleneck, and every other link runs
   at a seventh of its bandwidth, waiting on it.
4. ``pat_vs_ring.png``: NCCL's all_gather of 64 KiB per rank on 2 to 128 nodes of one GPU
   (``cluster(n, 1)``: 25 GB/s per node), PAT against the ring (the protocol NCCL's tuner
   picks for each), simulated, with NCCL's own predictions dashed, and what
   ``algorithm="nccl"`` runs marked.
5. ``nccl_tests.png``: all_reduce busbw against size on four machines of public
   nccl-tests tables (``nccl_public.py``): what was measured, what ``algorithm="nccl"``
   simulates on the matching preset with its defaults (``nccl_tests_compare.py``'s runs,
   through ``sc.compare``, drawn by ``sc.plot.comparison``), and NCCL's own prediction
   for what ran (its tuner's latency plus size over bandwidth).
6. ``critical_path.png``: what sets the time of ``algorithm="nccl"``'s all_reduce on two
   DGX H100 from 1 KiB to 1 GiB: each size's critical path (``sc.critical_path``) by
   kind of segment, as a share of the run's time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interrupts import run_main  # noqa: E402

import simcoll as sc  # noqa: E402
from simcoll.files import unwritable  # noqa: E402
from simcoll.plot.style import finish, format_duration, format_size  # noqa: E402

BANDWIDTH, LATENCY = 100 * sc.GB, 1 * sc.us


def scaling_figure(out: Path) -> Path:
    results = sc.sweep(sc.topology.switch, "all_reduce",
                       algorithms=["ring", "naive", "parameter_server"],
                       ranks=[2, 4, 8, 16, 32, 64, 128, 256], sizes=["64MiB"])
    path = out / "scaling_busbw.png"
    fig = sc.plot.scaling(results, x="nranks", y="busbw", formula=True, alpha=2 * LATENCY,
                          beta=1 / BANDWIDTH, gamma=0.0)
    ax = fig.axes[0]
    ax.set_title(f"{ax.get_title()}\n(links {BANDWIDTH / sc.GB:g} GB/s and "
                 f"{LATENCY / sc.us:g} µs each way; the models' α = {2 * LATENCY / sc.us:g} "
                 f"µs, β = 1 / ({BANDWIDTH / sc.GB:g} GB/s), γ = 0)", fontsize="medium")
    finish(fig, path)
    plt.close(fig)
    return path


def timeline_figure(out: Path) -> Path:
    topo = sc.topology.switch(8, bandwidth=BANDWIDTH, latency=LATENCY,
                              reduce_bandwidth=200 * sc.GB)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=64 * sc.MiB, trace=True)
    path = out / "timeline_ring.png"
    fig = sc.plot.timeline(res, critical=True)
    ax = fig.axes[0]
    ax.set_title(f"{ax.get_title()}\n(links {BANDWIDTH / sc.GB:g} GB/s and "
                 f"{LATENCY / sc.us:g} µs each way; reductions at 200 GB/s per GPU)",
                 fontsize="medium")
    finish(fig, path)
    plt.close(fig)
    return path


def link_figure(out: Path) -> Path:
    topo = sc.topology.switch(8, bandwidth=BANDWIDTH, latency=LATENCY)
    res = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=64 * sc.MiB,
                      trace=True)
    path = out / "link_utilization_ps.png"
    fig = sc.plot.link_utilization(res, topo)
    heat, bar = fig.axes
    heat.set_title(f"{heat.get_title()}\n(links {BANDWIDTH / sc.GB:g} GB/s each way)",
                   fontsize="medium")
    ticks = [0.0, 1 / 7, 0.4, 0.6, 0.8, 1.0]   # 1/7: each worker's share of gpu0's link
    bar.set_yticks(ticks, ["0", "1/7", "0.4", "0.6", "0.8", "1"])
    finish(fig, path)
    plt.close(fig)
    return path


def pat_figure(out: Path) -> Path:
    from simcoll.algorithms.nccl.machine import describe
    from simcoll.algorithms.nccl.tuner import choose

    nodes = [2, 4, 8, 16, 32, 64, 128]
    per_rank = 64 * sc.KiB
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    # as sc.plot.scaling draws them: the ring blue with circles, PAT in the first slot
    # after its fixed algorithms' (Dark2's first colour, hexagons), not the tree's squares
    colours = {"pat": matplotlib.colormaps["Dark2"](0), "ring": matplotlib.colormaps["tab10"](0)}
    markers = {"pat": "h", "ring": "o"}
    chosen = []
    for algo, label in (("pat", "PAT"), ("ring", "ring")):
        simulated, predicted = [], []
        for n in nodes:
            topo = sc.topology.cluster(n, 1)
            res = sc.simulate(topo, "all_gather", algorithm="nccl", nbytes=per_rank, algo=algo)
            simulated.append(res.time * 1e6)
            pick = choose(describe(topo, tuple(range(n))), "all_gather", per_rank * n,
                          algo=algo)
            predicted.append(pick.predicted * 1e6)
            if algo == "pat":
                chosen.append(sc.simulate(topo, "all_gather", algorithm="nccl",
                                          nbytes=per_rank).params["algo"])
        ax.plot(nodes, simulated, "-", marker=markers[algo], color=colours[algo],
                label=f"{label}, simulated ({res.params['proto']})")
        ax.plot(nodes, predicted, "--", color=colours[algo], alpha=0.7,
                label=f"{label}, NCCL's prediction")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(nodes, [str(n) for n in nodes])
    low, high = ax.get_ylim()
    ticks = [t for t in (10, 20, 50, 100, 200, 500, 1000, 2000, 5000) if low <= t <= high]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    # named on a top axis: the run algorithm="nccl" picks at each node count (circles
    # around the points hid which one at 4 nodes, where the two nearly meet)
    picks = ax.secondary_xaxis("top")
    picks.set_xscale("log", base=2)
    picks.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    picks.set_xticks(nodes, [{"pat": "PAT", "ring": "ring"}[a] for a in chosen],
                     fontsize=8, fontweight="bold")
    for label, algo in zip(picks.get_xticklabels(), chosen):
        label.set_color(colours[algo])
    picks.set_xlabel('what algorithm="nccl" picks', fontsize=8)
    ax.set_xlabel("nodes (one GPU each)")
    ax.set_ylabel("all_gather time (µs)")
    ax.set_title("all_gather, 64 KiB per rank: PAT's log p steps against the ring's p - 1",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = out / "pat_vs_ring.png"
    finish(fig, path)
    return path


NCCL_TABLES = {
    "a100x8_oci": "8 A100 SXM, NVSwitch (OCI, 2022)",
    "h100x16_ndr_default": "2 x 8 H100, 8 x 400G IB a node (NCCL 2.26.2)",
    "rtx5090x8_turin_p2p": "8 RTX 5090, PCIe Gen5 with P2P (NCCL 2.29.7)",
    "a100x16_oci_roce": "2 x 8 A100, 16 x 100G RoCE a node (OCI, 2022)",
}
"""The public tables drawn, with their panel titles: one node of A100, two of H100 with
NCCL's default algorithms, a PCIe server, and the table the model misses most."""


def nccl_figure(out: Path) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from nccl_public import TABLES, table
    from nccl_tests_compare import machine, nccl_model, run_params

    fig = plt.figure(figsize=(10.4, 8.8))
    outer = fig.add_gridspec(2, 2, hspace=0.32, wspace=0.22)
    for k, (name, title) in enumerate(NCCL_TABLES.items()):
        public = next(t for t in TABLES if t.id == name)
        topo, _, _ = machine(public)
        found = sc.compare(topo, table(public), algorithm="nccl",
                           **run_params(public, "nccl"))
        inner = outer[k // 2, k % 2].subgridspec(2, 1, height_ratios=[3, 1.4], hspace=0.06)
        top = fig.add_subplot(inner[0])
        bottom = fig.add_subplot(inner[1], sharex=top)
        sc.plot.comparison(found, axes=(top, bottom), title=title)
        # NCCL's own model for what ran (its tuner's latency plus size over bandwidth),
        # dashed beside the simulation
        predicted = [nccl_model(topo, size, ran) * 1e-6
                     for size, ran in zip(found.sizes, found.params)]
        style = dict(linestyle="--", color="#c0504d", linewidth=1.2)
        top.plot(found.sizes, [n * found.busbw_factor / t / 1e9
                               for n, t in zip(found.sizes, predicted)],
                 label="NCCL's own model", **style)
        bottom.plot(found.sizes, [t / m for t, m in zip(predicted, found.measured)], **style)
        # Down to 0.08: the RoCE run's 64 MiB point lies at 0.099.
        bottom.set_ylim(0.08, 2.5)
        bottom.set_yticks([0.1, 0.25, 0.5, 1, 2], ["0.1", "0.25", "0.5", "1", "2"])
        if k == 0:
            # comparison's legend again, with NCCL's model line and the lower panels' band
            band = [patch for patch in bottom.patches if patch.get_label()]
            top.legend(handles=top.get_legend_handles_labels()[0] + band, fontsize=8,
                       loc="lower right")
        else:
            top.get_legend().remove()
    fig.suptitle("all_reduce on four machines of public nccl-tests tables: busbw, and "
                 "simulated / measured time", fontsize=10.5)
    fig.subplots_adjust(left=0.08, right=0.98, top=0.93, bottom=0.06)
    path = out / "nccl_tests.png"
    finish(fig, path)
    return path


CRITICAL_COLOURS = {"wait": "#bfbfbf", "latency": "#0072b2", "transfer": "#009e73",
                    "reduce": "#d55e00", "compute": "#cc79a7"}
"""Okabe and Ito's colours (apart for readers who tell red from green poorly)."""
CRITICAL_HATCHES = {"wait": "", "latency": "////", "transfer": "", "reduce": "xxx",
                    "compute": "...."}
"""Hatches that tell the kinds apart in grey as well (reductions and bytes on links, the
two that trade places over the sizes, are crossed and plain)."""
CRITICAL_LABELS = {"wait": "launch, threads' pace (asleep)",
                   "latency": "latencies and protocol steps", "transfer": "bytes on links",
                   "reduce": "reductions", "compute": "compute"}


def critical_figure(out: Path) -> Path:
    topo = sc.topology.dgx_h100(2)
    sizes = [2**j for j in range(10, 31, 2)]
    shares: dict[str, list[float]] = {kind: [] for kind in CRITICAL_COLOURS}
    labels, times = [], []
    for size in sizes:
        res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size, trace=True)
        totals = sc.critical_path(res).totals()
        for kind in shares:
            shares[kind].append(totals[kind] / res.time)
        labels.append(f"{res.params['algo']}\n{res.params['proto']}")
        times.append(res.time)
    fig, ax = plt.subplots(figsize=(11.0, 4.6))
    x = range(len(sizes))
    bottom = [0.0] * len(sizes)
    for kind, colour in CRITICAL_COLOURS.items():
        if any(shares[kind]):
            ax.bar(x, shares[kind], bottom=bottom, color=colour, width=0.75,
                   hatch=CRITICAL_HATCHES[kind], edgecolor="white", linewidth=0,
                   label=CRITICAL_LABELS[kind])
            bottom = [b + v for b, v in zip(bottom, shares[kind])]
    for i, (label, t) in enumerate(zip(labels, times)):
        ax.text(i, 1.02, f"{label}\n{format_duration(t)}", ha="center", va="bottom",
                fontsize=7.5)
    ax.set_xticks(list(x), [format_size(s) for s in sizes], fontsize=8.5)
    ax.set_ylim(0, 1.22)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("share of the run's time")
    ax.set_xlabel("all_reduce size per GPU (NCCL's choice and the simulated time above)")
    ax.set_title('Critical path of algorithm="nccl" all_reduce on dgx_h100(2): what '
                 "sets the time", fontsize=10)
    handles, names = ax.get_legend_handles_labels()
    # top to bottom as the bars stack
    ax.legend(handles[::-1], names[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    fig.tight_layout()
    path = out / "critical_path.png"
    finish(fig, path)
    plt.close(fig)
    return path


FIGURES = {"scaling_busbw": scaling_figure, "timeline_ring": timeline_figure,
           "link_utilization_ps": link_figure, "pat_vs_ring": pat_figure,
           "nccl_tests": nccl_figure, "critical_path": critical_figure}


def check_out(out: Path, names: list[str]) -> str | None:
    """Why the figures ``names`` cannot be written into ``out`` (made if missing), or
    None: checked before any is computed."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot make folder {out} ({exc.strerror or exc})"
    return next(filter(None, (unwritable(out / f"{name}.png") for name in names)), None)


def main(argv: list[str] | None = None) -> None:
    """Make the figures asked for; every one is written whole (through a temporary file)
    or not at all, and ``--out`` is checked before any is computed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "docs" / "img")
    parser.add_argument("--only", choices=sorted(FIGURES),
                        help="make this figure alone (default: every one)")
    args = parser.parse_args(argv)
    names = [args.only] if args.only else list(FIGURES)
    problem = check_out(args.out, names)
    if problem:
        parser.error(f"--out {args.out}: {problem}")
    for name in names:
        make = FIGURES[name]
        start = time.perf_counter()
        try:
            path = make(args.out)
        except OSError as exc:  # a full disk: the figure's old file is kept
            parser.exit(1, f"{parser.prog}: error: {exc}\n")
        except KeyboardInterrupt:  # Ctrl-C: the figure's old file is kept too
            parser.exit(130, f"{parser.prog}: interrupted ({name} not written)\n")
        plt.close("all")
        print(f"{path}  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    run_main(main)
