"""Ctrl-C while numba compiles (or loads) a kernel on its first call.

numba compiles a kernel the first time it is called, in the middle of a run, and LLVM
hands the machine code to llvmlite's object cache through ctypes callbacks
(``ExecutionEngine._raw_object_cache_notify``). A KeyboardInterrupt raised inside such a
callback cannot leave it: ctypes prints "Exception ignored on calling ctypes callback
function" and drops it, and the run went on to its end (2 of 12 presses in the first
compile, 2026-12-06). Here a press that lands inside llvmlite's code is noted and asked
for again 10 ms later, from a timer thread (``_thread.interrupt_main``), until it lands
outside; one left pending when the first call returns is raised then. Elsewhere the
handler raises at once, as Python's own does. LLVM's own code runs between Python's
checks for signals, so a press during a first compile still takes up to about a second
(0.8 to 1.4 s after presses 3.5 to 8.5 s into a 10.6 s run that compiled, 8 of 8
stopped, 2026-12-06).
"""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["guard_first_call", "ctrl_c_outside_llvmlite", "RETRY"]

RETRY = 0.01
"""Seconds after which a press noted inside llvmlite is asked for again."""


def guard_first_call(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` with its first call (where numba compiles it, or loads it from its
    cache) run under :func:`ctrl_c_outside_llvmlite`; later calls go straight to it."""
    done = False

    def call(*args: Any) -> Any:
        nonlocal done
        if done:
            return kernel(*args)
        with ctrl_c_outside_llvmlite():
            value = kernel(*args)
        done = True
        return value

    return call


def _in_llvmlite(frame: FrameType | None) -> bool:
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("llvmlite."):
            return True
        frame = frame.f_back
    return False


@contextmanager
def ctrl_c_outside_llvmlite() -> Iterator[None]:
    """Run the body with a SIGINT handler that raises KeyboardInterrupt only outside
    llvmlite's frames (see the module's docstring). Only Python's own handler is
    replaced, and only in the main thread (where handlers run); otherwise the body runs
    as it is."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    pending: list[threading.Timer] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if not _in_llvmlite(frame):
            raise KeyboardInterrupt
        timer = threading.Timer(RETRY, _thread.interrupt_main)
        timer.daemon = True
        pending.append(timer)
        timer.start()

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for timer in pending:
            timer.cancel()
    if pending:
        raise KeyboardInterrupt
