"""Run sweep points in this process, in a local process pool, or on any Executor.

Records come back in the order points finish, in batches: those of every point that has
finished by then, so that the sweep saves them with one write. When the sweep stops early
(Ctrl-C, an error, a failed write), it can still take the records of the points that
finished and that it has not been given (:meth:`Finished.ready`); points not yet started
are cancelled, and the local pool's workers are terminated at once rather than waited for
(:mod:`simcoll.processes`: they ignore SIGINT and exit by themselves when the sweep
process dies).
"""

from __future__ import annotations

import pickle
import queue
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from simcoll.errors import InvalidInputError, SimCollError, add_note
from simcoll.processes import DIED, new_pool, terminate
from simcoll.simulate import simulate
from simcoll.sweep.grid import Point
from simcoll.sweep.records import result_fields

__all__ = ["run_point", "point_name", "completed", "Finished"]

Record = dict[str, Any]


def run_point(point: Point) -> dict[str, Any]:
    """Simulate one point and return its record; a SimCollError becomes an error record
    (any other exception, a MemoryError say, propagates and stops the sweep, with a note
    naming the point)."""
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
    except Exception as exc:
        add_note(exc, f"at the sweep's point {point_name(head)}")
        raise
    return {**head, "error": None, **result_fields(result)}


def point_name(head: Record) -> str:
    """``all_reduce ring p=8 nbytes=1048576`` and the parameters a point ran with."""
    params = "".join(f" {key}={value!r}" for key, value in head["params"].items())
    return f"{head['collective']} {head['algorithm']} p={head['nranks']} " \
        f"nbytes={head['nbytes']}{params}"


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


class Finished:
    """The records of the points as they finish: iterate for batches of them.

    Args:
        batches: each batch of records, in the order the points finished.
        ready: takes the records of the points that have finished and are not in a batch
            yet, without waiting (for a sweep that stops early to save them).
    """

    def __init__(self, batches: Iterator[list[Record]],
                 ready: Callable[[], list[Record]] = list):
        self._batches, self.ready = batches, ready

    def __iter__(self) -> Iterator[list[Record]]:
        return self._batches


def _results(finished: queue.SimpleQueue[Future[Record]], total: int) -> Finished:
    """The records of ``total`` futures that ``finished`` gets as each is done."""
    def taken(first: Future[Record] | None) -> list[Future[Record]]:
        done = [] if first is None else [first]
        while True:
            try:
                done.append(finished.get_nowait())
            except queue.Empty:
                return done

    def ran(batch: list[Future[Record]]) -> list[Record]:
        return [future.result() for future in batch
                if not future.cancelled() and future.exception() is None]

    def batches() -> Iterator[list[Record]]:
        left = total
        while left > 0:
            batch = taken(finished.get())
            left -= len(batch)
            yield ran(batch)
            for future in batch:
                future.result()  # a point that raised (not a SimCollError) stops the sweep

    return Finished(batches(), lambda: ran(taken(None)))


@contextmanager
def completed(points: Sequence[Point], *, workers: int, executor: Executor | None
              ) -> Iterator[Finished]:
    """The records of ``points``, in batches as they finish (:class:`Finished`).

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
        yield Finished([run_point(point)] for point in points)
        return
    pool, size = None, min(workers, len(points))
    if executor is None:
        _check_picklable(points)
        pool = executor = new_pool(size)
    futures: list[Future[Record]] = []
    # as_completed yields the futures already done when it starts in no particular order;
    # a queue filled by done-callbacks keeps the order in which points finished.
    finished: queue.SimpleQueue[Future[Record]] = queue.SimpleQueue()

    def running() -> str:
        """The first points not run, in the order they were sent: the pool's workers
        take them in that order, so these are what they were running."""
        left = [point_name(point.head) for point, future in zip(points, futures)
                if not (future.done() and not future.cancelled()
                        and future.exception() is None)]
        return f" while running one of: {'; '.join(left[:size])}" if left else ""

    try:
        for point in points:
            futures.append(executor.submit(run_point, point))
            futures[-1].add_done_callback(finished.put)
        yield _results(finished, len(futures))
    except BaseException as exc:
        # a worker process died (the OOM killer, say), while the points were sent or as
        # their records were taken: which points it may have run is known for this
        # sweep's own pool only
        if isinstance(exc, BrokenProcessPool):
            add_note(exc, DIED + (running() if pool is not None else ""))
        if pool is not None:
            # terminate cancels the points not started. Cancelling them here first would
            # race with the pool's thread, which fails every pending point once a worker
            # ends, and raises (InvalidStateError, printed) on one already cancelled.
            terminate(pool)
        else:
            for future in futures:
                future.cancel()
        raise
    if pool is not None:
        pool.shutdown(wait=True)
