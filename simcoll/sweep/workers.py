"""Run sweep points in this process, in a local process pool, or on any Executor.

Records come back in the order points finish. When the sweep stops early (Ctrl-C, an
error, a failed write), points not yet started are cancelled, and the local pool's
workers are terminated at once rather than waited for. Pool workers ignore SIGINT (Ctrl-C
reaches the whole process group; the sweep process handles it) and exit by themselves
when the sweep process dies, even by SIGKILL: a thread in each watches its parent pid.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

from simcoll.errors import InvalidInputError, SimCollError
from simcoll.simulate import simulate
from simcoll.sweep.grid import Point
from simcoll.sweep.records import result_fields

__all__ = ["run_point", "completed"]

_PARENT_POLL = 0.2  # seconds between a worker's checks that the sweep process is alive


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


def _init_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True,
                     name="simcoll-sweep-parent-watch").start()


def _exit_with_parent(parent: int) -> None:
    """End this worker once its parent is gone (the worker is then re-parented)."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL)
    os._exit(1)


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


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: shutdown alone waits for the points that are running.

    ProcessPoolExecutor has no public way to end its workers before Python 3.14
    (``terminate_workers``), hence its ``_processes``.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
    pool.shutdown(wait=True, cancel_futures=True)


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
        pool = executor = ProcessPoolExecutor(max_workers=min(workers, len(points)),
                                              initializer=_init_worker)
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
            _terminate(pool)
        raise
    if pool is not None:
        pool.shutdown(wait=True)
