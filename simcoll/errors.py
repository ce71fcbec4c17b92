"""The exceptions simcoll raises; every one derives from :class:`SimCollError`."""

from __future__ import annotations

from typing import Any

__all__ = [
    "SimCollError", "TopologyError", "UnknownAlgorithmError", "UnknownCollectiveError",
    "UnknownNetworkError", "InvalidInputError", "DeadlockError", "UnmatchedMessageError",
    "AlgorithmError", "CommUsageError", "RunLimitError", "LinkFailureError",
    "RegistrationError", "NoRouteError", "add_note", "message_of",
]


class SimCollError(Exception):
    """Root of every error simcoll raises on purpose."""


class TopologyError(SimCollError, ValueError):
    """A topology is malformed: bad link values, unknown devices, or not connected."""


class NoRouteError(TopologyError):
    """No route joins two endpoints (around the links asked to avoid, if any)."""


class InvalidInputError(SimCollError, ValueError):
    """Arguments to ``simulate`` (data, sizes, dtypes, ops, parameters) are not accepted."""


class UnknownCollectiveError(InvalidInputError, KeyError):
    """No collective of that name; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownAlgorithmError(InvalidInputError, KeyError):
    """No algorithm of that name for the collective; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownNetworkError(InvalidInputError, KeyError):
    """No network model of that name; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class RegistrationError(SimCollError, TypeError, ValueError):
    """An algorithm's registration is refused (no cost model, a program or model function
    that cannot take what it is passed, a name already taken), or a registered model
    returned something it may not. A ``TypeError`` and a ``ValueError`` too, as it was
    before it had a class of its own."""


class CommUsageError(SimCollError, ValueError):
    """An algorithm called the communicator wrongly (bad peer rank, self-send, bad tag)."""


class AlgorithmError(SimCollError):
    """An algorithm raised inside one rank; the message names the rank."""


class DeadlockError(SimCollError):
    """The simulation ran out of events while ranks were still waiting.

    Attributes:
        waiting: ``{rank: description of what it waits for}`` for every stuck rank.
    """

    def __init__(self, message: str, waiting: dict[int, str]):
        super().__init__(message)
        self.waiting = waiting

    def __reduce__(self) -> tuple[Any, ...]:   # whole across processes (sweep workers)
        return type(self), (str(self), self.waiting)


class UnmatchedMessageError(SimCollError):
    """The simulation finished but some messages were sent and never received, or some
    receives were posted and no message matched them."""


class RunLimitError(SimCollError):
    """A run went past its simulated-time or event limit (``simulate(until=, max_events=)``).

    Attributes:
        running: the ranks (and hosts) whose programs had not returned.
    """

    def __init__(self, message: str, running: list[str]):
        super().__init__(message)
        self.running = running

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.running)


class LinkFailureError(SimCollError):
    """A failed link left a message with no route: one in flight across it when it
    failed, or one sent while it was down.

    Attributes:
        link: the failed link's ``(u, v)`` device names.
        lost: ``(src, dst)`` endpoint addresses of the messages that could not go on
            (``dst`` a tuple of them for a multicast in flight; a multicast sent while
            the link was down is routed per destination, and names the one cut off);
            ordered sends still queued behind one of them, not yet in the network, are
            not listed.
    """

    def __init__(self, message: str, link: tuple[str, str],
                 lost: list[tuple[int, int | tuple[int, ...]]]):
        super().__init__(message)
        self.link = link
        self.lost = lost

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.link, self.lost)


def add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` (Python 3.11 on; on 3.10 the note is kept in ``__notes__``
    too, for the command line to print, though tracebacks do not show it)."""
    notes = getattr(exc, "__notes__", None)
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    elif isinstance(notes, list):
        notes.append(note)
    else:
        exc.__notes__ = [note]  # type: ignore[attr-defined]


def message_of(exc: BaseException) -> str:
    """``str(exc)``, or where that raises (an exception class of an algorithm's with a
    broken ``__str__``) a line saying so, so that the error naming the algorithm still
    comes out."""
    try:
        return str(exc)
    except Exception as broken:
        return f"(its message could not be shown: str() raised {type(broken).__name__})"
