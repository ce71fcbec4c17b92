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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for make in (scaling_figure, timeline_figure, link_figure):
        start = time.perf_counter()
        path = make(args.out)
        plt.close("all")
        print(f"{path}  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
