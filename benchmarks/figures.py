"""Make the README's pictures (PNG) into docs/img/.

    python benchmarks/figures.py              # writes docs/img/*.png
    python benchmarks/figures.py --out DIR

1. ``scaling_busbw.png``: all_reduce busbw against ranks (2 to 256) at 64 MiB per rank on
   ``switch(p)`` (100 GB/s links, 1 us each), data-free, for ring, naive and parameter
   server, each with its alpha-beta model dashed beside it (alpha = 2 us, beta = 1 / 100
   GB/s: the switch is the alpha-beta reference network).
2. ``timeline_ring.png``: a traced ring all_reduce of 64 MiB per rank on 8 ranks whose
   reductions run at 200 GB/s, so the reduce-scatter steps wait for them.
3. ``link_utilization_ps.png``: the links x time heatmap of a parameter-server all_reduce
   on 8 ranks (server on rank 0): its link is the bottleneck while the others idle.
4. ``pat_vs_ring.png``: NCCL's all_gather of 64 KiB per rank on 2 to 128 nodes of one GPU
   (``cluster(n, 1)``: 25 GB/s per node), PAT against the ring (the protocol NCCL's tuner
   picks for each), simulated, with NCCL's own predictions dashed, and what
   ``algorithm="nccl"`` runs marked.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import simcoll as sc  # noqa: E402

BANDWIDTH, LATENCY = 100 * sc.GB, 1 * sc.us


def scaling_figure(out: Path) -> Path:
    results = sc.sweep(sc.topology.switch, "all_reduce",
                       algorithms=["ring", "naive", "parameter_server"],
                       ranks=[2, 4, 8, 16, 32, 64, 128, 256], sizes=["64MiB"])
    path = out / "scaling_busbw.png"
    sc.plot.scaling(results, x="nranks", y="busbw", formula=True, alpha=2 * LATENCY,
                    beta=1 / BANDWIDTH, gamma=0.0, save=path)
    return path


def timeline_figure(out: Path) -> Path:
    topo = sc.topology.switch(8, bandwidth=BANDWIDTH, latency=LATENCY,
                              reduce_bandwidth=200 * sc.GB)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=64 * sc.MiB, trace=True)
    path = out / "timeline_ring.png"
    sc.plot.timeline(res, save=path)
    return path


def link_figure(out: Path) -> Path:
    topo = sc.topology.switch(8, bandwidth=BANDWIDTH, latency=LATENCY)
    res = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=64 * sc.MiB,
                      trace=True)
    path = out / "link_utilization_ps.png"
    sc.plot.link_utilization(res, topo, save=path)
    return path


def pat_figure(out: Path) -> Path:
    from simcoll.algorithms.nccl.machine import describe
    from simcoll.algorithms.nccl.tuner import choose

    nodes = [2, 4, 8, 16, 32, 64, 128]
    per_rank = 64 * sc.KiB
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colours = {"pat": "#c0504d", "ring": "#4f81bd"}
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
        ax.plot(nodes, simulated, "o-", color=colours[algo],
                label=f"{label}, simulated ({res.params['proto']})")
        ax.plot(nodes, predicted, "--", color=colours[algo], alpha=0.7,
                label=f"{label}, NCCL's prediction")
    runs = {"pat": [], "ring": []}
    for n, algo in zip(nodes, chosen):
        runs[algo].append(n)
    for algo, ns in runs.items():
        if ns:
            ax.plot([], [], " ", label=f"nccl picks {algo.upper() if algo == 'pat' else algo}"
                    f" at {', '.join(map(str, ns))} nodes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(nodes, [str(n) for n in nodes])
    ax.set_xlabel("nodes (one GPU each)")
    ax.set_ylabel("all_gather time (us)")
    ax.set_title("all_gather, 64 KiB per rank: PAT's log p steps against the ring's p - 1",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "pat_vs_ring.png"
    fig.savefig(path, dpi=150)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for make in (scaling_figure, timeline_figure, link_figure, pat_figure):
        start = time.perf_counter()
        path = make(args.out)
        plt.close("all")
        print(f"{path}  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
