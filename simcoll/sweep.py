"""Run a grid of simulations (algorithms x rank counts x sizes), optionally in parallel.

Points run in worker processes when ``workers > 1`` (``concurrent.futures``); results come
back in grid order either way. With ``save=path`` every finished point is appended to a
JSON-lines file at once, so a sweep that fails or is stopped halfway keeps what it did.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from simcoll.errors import InvalidInputError
from simcoll.result import Result
from simcoll.simulate import simulate
from simcoll.topology.graph import Topology
from simcoll.units import parse_size

__all__ = ["sweep"]


def _point(args: tuple) -> Result:
    topology, p, collective, algorithm, nbytes, kwargs = args
    return simulate(topology(p), collective, algorithm=algorithm, nbytes=nbytes, **kwargs)


def sweep(topology: Callable[[int], Topology], collective: str, *,
          algorithms: Sequence[str], ranks: Sequence[int], sizes: Sequence[int | str],
          workers: int = 1, save: str | os.PathLike | None = None,
          **kwargs: Any) -> list[Result]:
    """Simulate every (algorithm, p, size) in data-free mode; return results in that order.

    Args:
        topology: builds the machine for p ranks, e.g. ``simcoll.topology.switch``; with
            ``workers > 1`` it must be picklable (a module-level function or a
            ``functools.partial`` of one).
        collective, algorithms: what to run.
        ranks, sizes: rank counts and per-rank sizes (bytes or strings like "1MiB").
        workers: processes to use (1 runs in this process).
        save: a JSON-lines file; each finished point's ``Result.to_dict()`` is appended.
        **kwargs: passed to :func:`simcoll.simulate` (network, dtype, op, root, params).

    Raises:
        InvalidInputError: an empty grid or a bad ``workers``.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"workers={workers!r} is not accepted; use an integer >= 1")
    grid = [(topology, p, collective, alg, parse_size(size), kwargs)
            for alg, p, size in itertools.product(algorithms, ranks, sizes)]
    if not grid:
        raise InvalidInputError("the sweep grid is empty; give at least one algorithm, "
                                "rank count and size")
    out = None if save is None else Path(save).open("a")
    results: list[Result] = []
    try:
        if workers == 1:
            stream = map(_point, grid)
            pool = None
        else:
            pool = ProcessPoolExecutor(max_workers=workers)
            stream = pool.map(_point, grid, chunksize=max(1, len(grid) // (8 * workers)))
        try:
            for result in stream:
                results.append(result)
                if out is not None:
                    out.write(json.dumps(result.to_dict()) + "\n")
                    out.flush()
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    finally:
        if out is not None:
            out.close()
    return results
