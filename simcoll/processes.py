"""Local process pools for jobs of many simulations (sweeps, comparisons, calibrations).

Workers ignore SIGINT (Ctrl-C reaches the whole process group; the parent handles it) and
exit by themselves when the parent dies, even by SIGKILL: a thread in each watches its
parent pid. On any exception in the parent (Ctrl-C included) the pool's workers are
terminated at once rather than waited for.
"""

from __future__ import annotations

import multiprocessing.queues
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

__all__ = ["DIED", "local_pool", "new_pool", "terminate"]

_PARENT_POLL = 0.2  # seconds between a worker's checks that its parent is alive


def _init_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True,
                     name="simcoll-worker-parent-watch").start()


def _exit_with_parent(parent: int) -> None:
    """End this worker once its parent is gone (the worker is then re-parented)."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL)
    os._exit(1)


DIED = "a worker process ended abruptly (killed, or out of memory)"
"""What a pool's ``BrokenProcessPool`` means to a user."""


def new_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes set up as the module says."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_init_worker)


def terminate(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: shutdown alone waits for the tasks that are running.

    ProcessPoolExecutor has no public way to end its workers before Python 3.14
    (``terminate_workers``), hence its ``_processes``. Its call queue is a
    ``multiprocessing.Queue`` whose feeder thread writes the queued tasks into a pipe;
    once the workers that read that pipe are gone, a write of tasks larger than the pipe
    buffer (big topologies) blocks forever, and so would the interpreter's exit, which
    joins that thread. The queue's public ``cancel_join_thread`` lets the process exit
    without it (what it would still send is for workers that no longer exist). The queue
    is the private ``_call_queue``, hence the guard: without it, this step is skipped.
    """
    calls = getattr(pool, "_call_queue", None)
    if isinstance(calls, multiprocessing.queues.Queue):
        calls.cancel_join_thread()
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
def local_pool(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """None where ``workers`` is 1 (run in this process), else a pool of that many
    processes, terminated at once if the body raises and shut down when it ends."""
    if workers == 1:
        yield None
        return
    pool = new_pool(workers)
    try:
        yield pool
    except BaseException:
        terminate(pool)
        raise
    pool.shutdown(wait=True)
