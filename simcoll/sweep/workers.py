"""Run sweep points in this process, in a local process pool, or on any Executor.

Records come back in the order points finish. When the sweep stops early (Ctrl-C, an
error, a failed write), points not yet started are cancelled, and the local pool's
workers are terminated at once rather than waited for (:mod:`simcoll.processes`: they
ignore SIGINT and exit by themselves when the sweep process dies).
"""

from __future__ import annotations

import pickle
import queue
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import Any

from simcoll.errors import InvalidInputError, SimCollError
from simcoll.processes import new_pool, terminate
from simcoll.simulate import simulate
from simcoll.sweep.grid import Point
from simcoll.sweep.records import result_fields

__all__ = ["run_point", "completed"]


def run_point(point: Point) -> dict[str, Any]:
    """Simulate one point and return its record; a SimCollError becomes an error record
    (any other exception propagates and stops the sweep)."""
    head = point.head
    if point.topology is None:  # the factory failed for this rank count
        return {**head, "error": point.error}
    kwargs = {**point.options, **head["params"], "network": head["network"],
              "dtype": head["dtype"]}
    if head["op"] is not None:
        kwargs["op"] = head["op"]
    if head["root"] is not None:
        kwargs["root"] = head["root"]
    try:
        result = simulate(point.topology, head["collective"], algorithm=head["algorithm"],
                          nbytes=head["nbytes"], **kwargs)
    except SimCollError as exc:
        return {**head, "error": {"type": type(exc).__name__, "message": str(exc)}}
    return {**head, "error": None, **result_fields(result)}


def _check_picklable(points: Sequence[Point]) -> None:
    seen: set[int] = set()
    for point in points:
        if id(point.topology) in seen:
            continue
        seen.add(id(point.topology))
        try:
            pickle.dumps(point)
        except Exception as exc:
            raise InvalidInputError(
                f"the point {point.head['algorithm']} p={point.head['nranks']} cannot be "
                f"sent to worker processes ({type(exc).__name__}: {exc}); use workers=1 "
                f"or a topology and parameters that pickle") from None


@contextmanager
def completed(points: Sequence[Point], *, workers: int, executor: Executor | None
              ) -> Iterator[Iterator[dict[str, Any]]]:
    """The records of ``points``, as each finishes.

    Args:
        points: what to run.
        workers: local processes when ``executor`` is None (1: run in this process).
        executor: run on this executor instead; on an early stop the points it has not
            started are cancelled, and those it is running are left to it.

    Raises:
        InvalidInputError: with a local pool, a point that cannot be pickled (checked
            before any point starts).
    """
    if not points or (executor is None and workers == 1):
        yield (run_point(point) for point in points)
        return
    pool = None
    if executor is None:
        _check_picklable(points)
        pool = executor = new_pool(min(workers, len(points)))
    futures: list[Future[dict[str, Any]]] = []
    # as_completed yields the futures already done when it starts in no particular order;
    # a queue filled by done-callbacks keeps the order in which points finished.
    finished: queue.SimpleQueue[Future[dict[str, Any]]] = queue.SimpleQueue()
    try:
        for point in points:
            futures.append(executor.submit(run_point, point))
            futures[-1].add_done_callback(finished.put)
        yield (finished.get().result() for _ in futures)
    except BaseException:
        for future in futures:
            future.cancel()
        if pool is not None:
            terminate(pool)
        raise
    if pool is not None:
        pool.shutdown(wait=True)
