"""The ``simcoll`` console script's entry point (``simcoll.cli.entry`` once simcoll is in).

It stands outside the ``simcoll`` package so that a Ctrl-C while simcoll and numpy import
(about 0.8 s, before any command starts) ends the command as one during its work does:
one line, ``simcoll: interrupted``, and status 130, not Python's traceback.
``python -m simcoll`` imports the package before any of its code runs, so there the
traceback stays.
"""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 130
"""The status of a command stopped by Ctrl-C (128 + SIGINT), as ``simcoll.cli`` gives."""


def entry() -> None:
    """Import the command line and run it; leave with status 130 on Ctrl-C meanwhile."""
    try:
        from simcoll.cli import entry as run
    except KeyboardInterrupt:
        try:  # a second Ctrl-C while saying so ends the process as the signal does
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        except ValueError:  # not the main thread
            pass
        print("simcoll: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)
    run()
