"""Export a traced run (``simulate(..., trace=True)``) as a Chrome / Perfetto trace.

Open the JSON file in https://ui.perfetto.dev or chrome://tracing. Each rank (and server
host) is a process row: its messages are async spans from send to arrival (they may
overlap), its reductions and compute spans sit on threads of their own. Times are in
microseconds, as the format requires.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from simcoll.errors import InvalidInputError
from simcoll.result import Result

__all__ = ["to_chrome", "save_chrome"]

_THREADS = {"message": 0, "reduce": 1, "compute": 2}


def to_chrome(result: Result) -> dict[str, Any]:
    """The Chrome trace-event JSON object of a traced result.

    Raises:
        InvalidInputError: the result was simulated without ``trace=True``.
    """
    if result.trace is None:
        raise InvalidInputError("this result has no trace; simulate with trace=True")
    events: list[dict[str, Any]] = []
    ranks = sorted({e.rank for e in result.trace} | set(range(result.nranks)))
    for rank in ranks:
        name = f"rank {rank}" if rank < result.nranks else f"host {rank}"
        events.append({"ph": "M", "name": "process_name", "pid": rank,
                       "args": {"name": name}})
        for thread, tid in _THREADS.items():
            events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid,
                           "args": {"name": thread}})
    for i, e in enumerate(result.trace):
        start, duration = e.start * 1e6, (e.end - e.start) * 1e6
        tid = _THREADS[e.kind]
        if e.kind == "message":
            common = {"cat": "message", "id": i, "pid": e.rank, "tid": tid,
                      "name": f"to {e.peer}"}
            args = {"bytes": e.nbytes, "tag": repr(e.tag), "dst": e.peer}
            events.append({**common, "ph": "b", "ts": start, "args": args})
            events.append({**common, "ph": "e", "ts": start + duration})
        else:
            events.append({"ph": "X", "cat": e.kind, "name": e.kind, "pid": e.rank,
                           "tid": tid, "ts": start, "dur": duration,
                           "args": {"bytes": e.nbytes}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"collective": result.collective, "algorithm": result.algorithm,
                          "nranks": result.nranks, "nbytes": result.nbytes,
                          "time_s": result.time}}


def save_chrome(result: Result, path: str | os.PathLike) -> None:
    """Write :func:`to_chrome` to ``path`` (via a temporary file, then renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_chrome(result)))
    tmp.replace(path)
