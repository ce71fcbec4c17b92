"""``sweep``: check, skip what is saved, run the rest, save each point as it finishes."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any

import numpy as np

from simcoll.checks import flag
from simcoll.errors import InvalidInputError
from simcoll.progress import check_progress, progress_bar
from simcoll.sweep.grid import make_grid
from simcoll.sweep.records import SweepResults, decode, point_key
from simcoll.sweep.storage import ResultFile, check_save_path
from simcoll.sweep.workers import Finished, completed, run_point
from simcoll.topology.graph import Topology

__all__ = ["sweep", "stream"]


def _check_options(workers: Any, executor: Any, progress: Any, retry_failed: Any) -> int:
    if isinstance(workers, (bool, np.bool_)) or not isinstance(workers, (int, np.integer)) \
            or workers < 1:
        raise InvalidInputError(f"workers={workers!r} is not accepted; use an integer >= 1")
    if executor is not None:
        if not isinstance(executor, Executor):
            raise InvalidInputError(f"executor={executor!r} is not a "
                                    f"concurrent.futures.Executor")
        if workers != 1:
            raise InvalidInputError(f"pass workers= (a local process pool) or executor=, not "
                                    f"both (got workers={workers!r})")
    check_progress(progress)
    flag(retry_failed, "retry_failed")
    return int(workers)


def _save_finished(store: ResultFile, batch: list[dict[str, Any]],
                   finished: Finished) -> None:
    """On an early stop (Ctrl-C, an error), save the points that finished and are not
    saved: the batch being saved when it came, and those finished since."""
    unsaved = [r for r in batch if store.saved.get(point_key(r)) is not r]
    with contextlib.suppress(Exception):  # the error being raised says what went wrong
        store.extend(unsaved + finished.ready())


Emit = Callable[[dict[str, Any]], None]
"""Takes one record (:func:`stream`)."""


class _InOrder:
    """Hands ``emit`` the records of a grid in its order, each once it and every point
    before it are done."""

    def __init__(self, order: list[tuple[Any, ...]], done: dict[tuple[Any, ...], Any],
                 emit: Emit):
        self._order, self._done, self._emit = order, done, emit
        self._next = 0

    def __call__(self) -> None:
        """Emit the records that are now done, up to the first point that is not."""
        while self._next < len(self._order) and self._order[self._next] in self._done:
            self._emit(self._done[self._order[self._next]])
            self._next += 1


def sweep(topology: Callable[[int], Topology], collective: str, *,
          algorithms: Iterable[str], ranks: Iterable[int], sizes: Iterable[int | str],
          workers: int = 1, save: str | os.PathLike[str] | None = None,
          executor: Executor | None = None, progress: bool | None = None,
          retry_failed: bool = False, **simulate_kwargs: Any) -> SweepResults:
    """Simulate every (algorithm, rank count, size) in data-free mode.

    Each point is saved to ``save`` as soon as it finishes. Run again with the same
    ``save``, a sweep skips the points already there (by their identity, see
    :mod:`simcoll.sweep.records`: a changed topology, size or parameter is a new point)
    and returns the whole grid, loaded and new points alike.

    Args:
        topology: builds the machine for ``p`` ranks, e.g. ``simcoll.topology.switch``.
            It must build exactly ``p`` GPUs (a preset that takes nodes needs a wrapper,
            e.g. ``lambda p: dgx_a100(p // 8)``). It is called in this process, once per
            rank count, so any callable works with any number of workers.
        collective: the collective to run.
        algorithms: algorithm names for ``collective``.
        ranks: rank counts (Python or numpy integers >= 1).
        sizes: per-rank sizes, in bytes or as strings like ``"1MiB"``.
        workers: local worker processes (1 runs in this process). In a script that uses
            the ``spawn`` or ``forkserver`` start method, call ``sweep`` under
            ``if __name__ == "__main__":``, as for any process pool.
        save: a JSON-lines file (``.jsonl``; a name ending in ``.json`` or ``.csv`` is
            refused): one record per point, appended as each finishes (the points that
            finish together in one write), synced to disk; read it back with
            :func:`simcoll.load_results`.
        executor: run the points on this ``concurrent.futures.Executor`` instead of a
            local pool, e.g. ``dask.distributed.Client(...).get_executor()``.
        progress: a tqdm progress bar on stderr; ``None`` shows it when stderr is a
            terminal.
        retry_failed: run again the points saved as failed (otherwise their saved
            failure is returned).
        **simulate_kwargs: passed to :func:`simcoll.simulate`: ``network``, ``dtype``,
            ``op`` (refused for a collective that does not reduce), ``root`` (or torch's
            ``src=`` / ``dst=``; refused for a collective without a root), ``until``,
            ``max_events``, ``check`` and algorithm parameters (``chunks=``,
            ``servers=``, ...), the same for every point. ``data``, ``nbytes``,
            ``splits``, ``trace`` and ``faults`` are refused.

    Returns:
        A :class:`SweepResults` (a list) in grid order, algorithms outermost, then rank
        counts, then sizes: the :class:`~simcoll.Result` of each point that ran, a
        :class:`FailedPoint` (its error type and message) for each point whose
        simulation raised a :class:`~simcoll.SimCollError`.

    Raises:
        InvalidInputError (or a subclass): a bad argument, an empty axis, an algorithm
            parameter none of ``algorithms`` takes or a value one that takes it refuses
            (an algorithm that does not take a parameter the others take fails its
            points), a size that could overflow the traffic counters on the largest rank
            count, a factory that builds another number of ranks than asked, a ``save``
            path that is a directory, a device, named ``.json`` or ``.csv``, or a file
            that is not a sweep's, a point that cannot be pickled for the local pool;
            all before any point runs.
        KeyboardInterrupt: Ctrl-C; the local pool's workers are ended at once, and every
            point finished so far (the workers' results not yet saved included) is in
            ``save``.
    """
    return stream(lambda record: None, topology, collective, algorithms=algorithms,
                  ranks=ranks, sizes=sizes, workers=workers, save=save, executor=executor,
                  progress=progress, retry_failed=retry_failed, **simulate_kwargs)


def stream(emit: Emit, topology: Callable[[int], Topology], collective: str, *,
           algorithms: Iterable[str], ranks: Iterable[int], sizes: Iterable[int | str],
           workers: int = 1, save: str | os.PathLike[str] | None = None,
           executor: Executor | None = None, progress: bool | None = None,
           retry_failed: bool = False, **simulate_kwargs: Any) -> SweepResults:
    """:func:`sweep`, handing ``emit`` each point's record in grid order as soon as it and
    every point before it are done (the saved ones at the start), so that a caller can
    write them as the sweep goes (``simcoll sweep`` prints them).

    An exception ``emit`` raises stops the sweep as Ctrl-C does (the finished points are
    saved first).
    """
    workers = _check_options(workers, executor, progress, retry_failed)
    if save is not None:
        check_save_path(save)
    grid = make_grid(topology, collective, algorithms=algorithms, ranks=ranks, sizes=sizes,
                     kwargs=simulate_kwargs)
    store = None if save is None else ResultFile(save)
    saved = {} if store is None else store.saved
    done = {}
    for point in grid.points:
        record = saved.get(point.key)
        if record is not None and (record["error"] is None or not retry_failed):
            done[point.key] = record
    ready = _InOrder(grid.order, done, emit)
    todo = [point for point in grid.points if point.key not in done]
    unbuilt = [point for point in todo if point.error is not None]
    runnable = [point for point in todo if point.error is None]
    try:
        with completed(runnable, workers=workers, executor=executor) as finished:
            failures = sum(record["error"] is not None for record in done.values())
            batch: list[dict[str, Any]] = []
            with progress_bar(progress, total=len(grid.points), initial=len(done),
                              unit="point", desc=f"sweep {collective}",
                              postfix={"failed": failures} if failures else None) as bar:
                try:
                    ready()
                    for batch in itertools.chain(([run_point(p)] for p in unbuilt),
                                                 finished):
                        if store is not None:
                            store.extend(batch)
                        for record in batch:
                            done[point_key(record)] = record
                            failures += record["error"] is not None
                        if failures:
                            bar.set_postfix(failed=failures, refresh=False)
                        bar.update(len(batch))
                        ready()
                except BaseException:
                    if store is not None:
                        _save_finished(store, batch, finished)
                    raise
    finally:
        if store is not None:
            store.close()
    decoded = {key: decode(done[key]) for key in dict.fromkeys(grid.order)}
    return SweepResults((decoded[key] for key in grid.order),
                        (done[key] for key in grid.order))
