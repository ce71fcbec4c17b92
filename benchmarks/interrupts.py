"""How the benchmark scripts end on Ctrl-C: one line and status 130, as simcoll's own
commands do, without the interpreter's traceback (a benchmark's child processes, which
get the same signal, too)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

__all__ = ["run_main", "INTERRUPTED"]

INTERRUPTED = 130
"""The exit status of a process stopped by Ctrl-C (128 + SIGINT)."""


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """Exit with what ``main()`` returns; on Ctrl-C, with one line and status 130."""
    try:
        status = main()
    except KeyboardInterrupt:
        print(f"{Path(sys.argv[0]).name}: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)
    sys.exit(status)
