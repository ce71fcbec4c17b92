"""Lines written whole: Ctrl-C waits while a line is written."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["ctrl_c_held"]


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Run the body with Ctrl-C held back: its KeyboardInterrupt comes once the body is
    done, so a record being written (a JSON line of some 20 kB on 256 ranks, a table
    row) is never cut, even while the write waits on a full pipe (the process then
    waits for its reader, as any writer to a pipe does).

    Two things are needed. SIGINT is blocked in the main thread, so that no write of
    the body is interrupted (a handler that returns while a write of several pages
    waits makes Python's buffered writer drop the rest of the line). And the handler
    only takes note meanwhile: a signal blocked in the main thread is delivered to
    another thread (numpy's BLAS threads, say), whose note would otherwise raise in the
    main thread between the line and its newline. Elsewhere (another thread, or no
    ``pthread_sigmask``) the body runs as it is."""
    if not hasattr(signal, "pthread_sigmask") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        pressed.append(signum)

    previous = signal.signal(signal.SIGINT, note)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)   # one waiting comes to note
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt
