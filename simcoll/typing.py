"""The algorithm contract as types.

A rank program is a generator function ``fn(comm: Comm, x: Buffer, *, op, root, params)``
that yields the events ``comm`` returns and returns this rank's output (``None`` where
the collective leaves a rank without output, as on non-root ranks of ``reduce``).
``Buffer`` (a numpy array or a data-free :class:`~simcoll.buffers.VirtualBuffer`) is
exported here with the program types, for an algorithm's signature, and ``Chunks``, what
``Comm.split_buffer`` returns.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from simpy.events import Event

from simcoll.buffers import Buffer, Chunks

__all__ = ["Buffer", "Chunks", "Program", "BufferProgram", "HostProgram", "Steps"]

Program = Generator[Event, Any, Buffer | None]
"""What a rank program returns when called: a generator of events whose value is the
rank's output (None where the collective leaves the rank without one)."""

BufferProgram = Generator[Event, Any, Buffer]
"""A rank program whose every rank returns a buffer (a :data:`Program` too)."""

HostProgram = Generator[Event, Any, None]
"""What a server host's program returns when called (hosts have no output)."""

Steps = Generator[Event, Any, Any]
"""Part of a rank program, run with ``yield from``; returns whatever its caller needs."""
