"""``simcoll run -J FILE``: the run as nccl-tests' JSON report (``JSON_FILE_VERSION`` 3 of
``src/util.cu``, nccl-tests 2.19.6), which :func:`simcoll.nccl_tests.parse` and tools
made for nccl-tests' reports read.

The keys are nccl-tests', and so are the values' types (flags the strings "true" and
"false", as its ``jsonBool`` writes them); what a simulation has not, it leaves out or says: no
``nccl_version`` (no NCCL ran), ``in_place`` null (no separate in-place run: the one
simulated block is the out-of-place one, as in the printed table), a process per rank
(one GPU each, so that ``devices``, an entry per process, names every rank's node), its
iteration counts 1 and 0 (every iteration would take the same time), and a
``simcoll`` object naming the collective, algorithm, network, parameters and machine.
With ``-I 1`` each row has its per-iteration statistics, those of one iteration (as
nccl-tests' ``tools/analyze_perf_json.py`` reads them). Rows done before a failure or
Ctrl-C are written with the error in ``errors``; an
algbw of a size simulated in no time (one rank) is null, as JSON has no infinity, and so
is the busbw of broadcast and reduce (bus factor 1); the other collectives' busbw is 0
there (nccl-tests' bus factor, (p-1)/p or 2(p-1)/p, is 0 for one rank), and the
average of such rows is 0 too.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcoll.cli import table
from simcoll.files import write_atomically
from simcoll.topology.graph import Topology

__all__ = ["Report", "finite_or_none", "json_text"]

_FORMAT_VERSION = 3


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def _boolean(value: bool) -> str:
    """A flag as nccl-tests writes one: the string "true" or "false" (``jsonBool``), not
    JSON's literal, so that tools comparing with "true" read it."""
    return "true" if value else "false"


def _devices(topo: Topology) -> list[dict[str, Any]]:
    """nccl-tests' ``devices`` of the report: each rank on ``node<n>``, with ``device`` its
    GPU's index among the GPUs of that node (the CUDA ordinal writeDeviceReport in
    nccl-tests' ``src/util.cu`` writes)."""
    seen: Counter[int] = Counter()
    devices = []
    for rank, (gpu, node) in enumerate(zip(topo.gpus, topo.gpu_nodes)):
        devices.append({"rank": rank, "group": 0, "pid": 0, "hostname": f"node{node}",
                        "device": seen[node], "device_hex": "", "device_info": gpu})
        seen[node] += 1
    return devices


class Report:
    """The report of one ``simcoll run``, written by :meth:`write`."""

    def __init__(self, path: Path, argv: Sequence[str], topo: Topology,
                 simulated: dict[str, Any], sizes: tuple[int, int], step: tuple[str, int],
                 checked: int, per_iter: bool = False, min_bw: float | None = None
                 ) -> None:
        """``simulated``: the ``simcoll`` object; ``sizes``: -b and -e; ``step``:
        ``("step_factor", f)`` or ``("step_bytes", i)``; ``per_iter``: ``-I 1``, each
        row's per-iteration statistics too; ``checked``: -c's value; ``min_bw``:
        ``NCCL_TESTS_MIN_BW``, which the average busbw is checked against."""
        self.path = path
        self.min_bw = min_bw
        self.per_iter = per_iter
        self.rows: list[table.Row] = []
        self.doc: dict[str, Any] = {
            "version": _FORMAT_VERSION, "start_time": _now(), "args": ["simcoll", *argv],
            "env": [], "simcoll": simulated,
            "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": sizes[0],
                       "maximum_bytes": sizes[1], step[0]: step[1],
                       "warmup_iters": 0, "iterations": 1, "aggregated_iterations": 1,
                       "validation": checked, "graph": 0,
                       "blocking_collectives": _boolean(False),
                       "per_iter_timing": _boolean(per_iter), "per_iter_skip": 0,
                       "parallel_init": _boolean(False),
                       "devices": _devices(topo)}}

    def write(self, error: BaseException | None = None) -> None:
        """Write the report of the rows done (atomically: a file is whole or absent);
        ``error``: what stopped the run, if anything."""
        results = [{"size": r.size, "count": r.count, "type": r.type, "redop": r.redop,
                    "root": f"{r.root:6d}",
                    "out_of_place": {"time": r.time_us, "alg_bw": finite_or_none(r.algbw),
                                     "bus_bw": finite_or_none(r.busbw),
                                     "nwrong": None if r.wrong is None else float(r.wrong)},
                    **({"out_of_place_per_iter": _one_iteration(r.time_us)}
                       if self.per_iter else {}),
                    "in_place": None, "actual_iterations": 1, "experiment_name": ""}
                   for r in self.rows]
        bad = sum(1 for r in self.rows if r.wrong)
        average = table.average_busbw(self.rows)
        okay = "unchecked" if self.min_bw is None else \
            _boolean(not table.fails_min_bw(average, self.min_bw))
        errors = [] if error is None else [
            f"interrupted after {len(self.rows)} size(s)" if isinstance(error, KeyboardInterrupt)
            else f"{type(error).__name__} after {len(self.rows)} size(s): {error}"]
        doc = {**self.doc, "results": results,
               "out_of_bounds": {"count": bad, "okay": _boolean(bad == 0)},
               "average_bus_bandwidth": {"bandwidth": finite_or_none(average), "okay": okay},
               "errors": errors, "end_time": _now()}
        text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
        write_atomically(self.path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def json_text(value: Any) -> str:
    """``value`` as one line of strict JSON, an infinite or NaN float in it null (JSON
    has neither; Python's ``json`` would write ``Infinity``, which strict readers
    refuse)."""
    def nulled(v: Any) -> Any:
        if isinstance(v, float):
            return finite_or_none(v)
        if isinstance(v, dict):
            return {k: nulled(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [nulled(x) for x in v]
        return v
    return json.dumps(nulled(value), allow_nan=False)


def finite_or_none(value: float) -> float | None:
    """``value``, or None where it is infinite or NaN (JSON has neither: the bandwidth of
    a size simulated in no time is null)."""
    return value if math.isfinite(value) else None


def _one_iteration(time_us: float) -> dict[str, Any]:
    """``-I 1``'s statistics (util.cu's ``writePerIterReport``) of the one iteration a
    simulation times: every figure its time, no spread."""
    return {"skipped_iterations": 0, "min_us": time_us, "max_us": time_us,
            "avg_us": time_us, "p50_us": time_us, "p95_us": time_us, "p99_us": time_us,
            "stdev_us": 0.0, "cv_pct": 0.0, "times_us": [time_us]}
