"""A line on a terminal that says a long simulation is still running."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["still_running"]

SHOWN_AFTER = 2.0
"""Seconds a simulation runs before the line appears (shorter ones print their row
first)."""

EVERY = 1.0
"""Seconds between updates of the line."""


@contextmanager
def still_running(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """Run the body; if it lasts longer than :data:`SHOWN_AFTER` seconds and ``stream``
    (standard error by default) is a terminal, show ``# simulating WHAT: 1 min 05 s so
    far`` on it, updated every :data:`EVERY` seconds and erased when the body ends
    (normally, by an error or by Ctrl-C), so the table's next line takes its place."""
    out = sys.stderr if stream is None else stream
    isatty = getattr(out, "isatty", None)
    if not (isatty and isatty()):
        yield
        return
    done = threading.Event()
    shown = threading.Event()
    start, after, every = time.monotonic(), SHOWN_AFTER, EVERY

    def show() -> None:
        wait = after
        while not done.wait(wait):
            out.write(f"\r# simulating {what}: {_elapsed(time.monotonic() - start)} so far"
                      f"\x1b[K")
            out.flush()
            shown.set()
            wait = every

    thread = threading.Thread(target=show, name="simcoll-still-running", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if shown.is_set():
            out.write("\r\x1b[K")
            out.flush()


def _elapsed(seconds: float) -> str:
    """``7 s``, ``1 min 05 s``, ``2 h 03 min``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
