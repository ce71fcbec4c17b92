"""The JSON-lines file a sweep saves to: one record per line, appended and synced.

The records of the points that finished together are written with one ``write`` of
whole lines and ``fsync``'d before the sweep goes on, so a stopped or killed sweep keeps
every point it saved. A write that an exception interrupts (Ctrl-C) is cut off again, so
no part of a line stays. A process killed in the middle of a write leaves a truncated
line: reading tolerates it (it is ignored, with a warning), :class:`ResultFile` cuts it
off when it opens a file no other sweep has open, and starts a new line before its own
records where a file does not end with one (another sweep appending to the same file
may have been killed meanwhile), so a truncated line is never glued to the next record.
Any other line that is not a record is an error: the file is then left as it is.

The file holds JSON lines whatever its name, so a save path ending in ``.json`` (which
``load_results`` and ``simcoll plot`` read as one JSON list, as ``simcoll sweep --output
points.json`` writes) or ``.csv`` is refused: name it ``.jsonl``.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: a save file a stopped sweep made empty stays
    fcntl = None  # type: ignore[assignment]

from simcoll.errors import InvalidInputError
from simcoll.files import cannot_write, file_path, output_path, sync_folder
from simcoll.sweep.records import RUN_ROW, SweepResults, check_record, decode, point_key

__all__ = ["ResultFile", "load_results", "check_save_path", "RECORD_START",
           "remove_unless_open"]

# Every record's line starts so (its first field is the collective); a truncated line is a
# prefix of a record, and a file whose partial last line is not one is not a sweep file.
RECORD_START = b'{"collective": '


def _read(path: Path) -> tuple[list[dict[str, Any]], int | None]:
    """The records of ``path``, and the offset of a truncated last line (None if none);
    a truncated line before the last one (a sweep killed while writing it, before
    another appended) is ignored with a warning."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # what follows the last newline
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _parse(line, f"{path} line {number}")
        if record is None:
            warnings.warn(f"{path}: ignored line {number}, a truncated record left by a "
                          f"sweep stopped while writing it (with any record an older "
                          f"simcoll appended to it); its points count as not run",
                          stacklevel=3)
        else:
            records.append(record)
    if not tail.strip():
        return records, None
    record = _parse(tail, f"{path} line {len(lines) + 1}")
    if record is None:
        return records, len(data) - len(tail)
    records.append(record)  # whole, it only lacks its newline
    return records, None


def _parse(line: bytes, where: str) -> dict[str, Any] | None:
    """The record of ``line``, or None if it is a truncated one (the start of a record,
    or of its first field)."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        if RECORD_START.startswith(line) or line.startswith(RECORD_START):
            return None
        raise InvalidInputError(f"{where} is not a simcoll sweep record ({exc}); give a "
                                f"file a sweep wrote (or, to save=, a new one)") from None
    return check_record(record, where)


def _warn_truncated(path: Path, size: int, end: int) -> None:
    warnings.warn(f"{path}: ignored a truncated last line ({size - end} bytes), left by a "
                  f"sweep stopped while writing it; that point counts as not run",
                  stacklevel=3)


def _latest(records: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """One record per point: the last one saved (a retried failure is saved again)."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
        key = point_key(record)
        latest.pop(key, None)
        latest[key] = record
    return latest


def check_save_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path, if it can be a save file: a regular file or none yet, in a
    folder that exists, not named ``.json`` or ``.csv`` (the file holds JSON lines).

    Raises:
        InvalidInputError: naming the path and what is wrong with it.
    """
    resolved = file_path(path, "save", example="sweep.jsonl")
    suffix = resolved.suffix.lower()
    if suffix in (".json", ".csv"):
        raise InvalidInputError(
            f"save={str(path)!r} is not accepted: save= writes JSON lines (a record per "
            f"point, as each finishes), and a {suffix} file reads as "
            f"{'one JSON list' if suffix == '.json' else 'CSV'}; name it "
            f"{resolved.with_suffix('.jsonl').name!r}")
    return output_path(path, "save", example="sweep.jsonl")


def load_results(path: str | os.PathLike[str]) -> SweepResults:
    """Read a file that ``sweep(save=...)`` wrote back into results.

    Args:
        path: the JSON-lines file (or, if its name ends in ``.json``, a JSON list of
            records, as ``simcoll sweep --output points.json`` writes; its ``.jsonl``
            output reads as ``save=``'s).

    Returns:
        A :class:`SweepResults` with one :class:`~simcoll.Result` or ``FailedPoint`` per
        point, in the order they were saved; a point saved twice (a failure run again
        with ``retry_failed=True``) appears once, as last saved.

    Raises:
        InvalidInputError: the path is a directory, does not exist, or holds a line that
            is not a sweep record or a field of the wrong type, named by line and field (a
            truncated line, the last or one a sweep was killed writing before another
            appended, is ignored with a warning).
    """
    resolved = file_path(path, "path", example="sweep.jsonl")
    if not resolved.is_file():
        raise InvalidInputError(f"path={str(path)!r} " + (
            "is not a regular file; give a sweep's file" if resolved.exists() else
            "does not exist"))
    if resolved.suffix.lower() == ".csv":
        raise InvalidInputError(f"path={str(path)!r} is a CSV table (simcoll sweep "
                                f"--output x.csv), without per-rank or per-link bytes; "
                                f"load_results reads the .jsonl a sweep saves (or a .json "
                                f"list)")
    if resolved.suffix.lower() == ".json":
        records = _read_list(resolved)
    else:
        records, cut = _read(resolved)
        if cut is not None:
            _warn_truncated(resolved, resolved.stat().st_size, cut)
    latest = list(_latest(records).values())
    return SweepResults((decode(r) for r in latest), latest)


def _read_list(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON list of them (``simcoll sweep --output points.json``)."""
    try:
        items = json.loads(path.read_bytes())
    except ValueError as exc:
        lines = ("; it may hold JSON lines, as save= writes: name it .jsonl"
                 if "Extra data" in str(exc) else "")
        raise InvalidInputError(f"{path} is not a JSON list of sweep records "
                                f"({exc}){lines}") from None
    if isinstance(items, dict) and all(k in items for k in RUN_ROW):
        check_record(items, str(path))   # says it is a line of `simcoll run --json`
    if not isinstance(items, list):
        raise InvalidInputError(f"{path} is not a JSON list of sweep records")
    return [check_record(item, f"{path} record {n}") for n, item in enumerate(items, start=1)]


class ResultFile:
    """A sweep's save file, opened for appending after reading what it already holds.

    Attributes:
        saved: the last record saved for each point, by :func:`point_key`.
    """

    def __init__(self, path: str | os.PathLike[str]):
        """Check ``path``, read its records and cut off a truncated last line where no
        other sweep has the file open (one that has may be writing that line).

        Raises:
            InvalidInputError: ``path`` is a directory, its folder does not exist, it
                holds a line that is not a sweep record, or another sweep removed it
                while this one opened it.
        """
        self.path = check_save_path(path)
        created = not self.path.exists()
        self._fd: int | None = _open_shared(self.path)
        self._created = created
        records: list[dict[str, Any]] = []
        try:
            if not created:
                records, cut = _read(self.path)
                if cut is not None:
                    _warn_truncated(self.path, self.path.stat().st_size, cut)
                    if _alone(self._fd):
                        os.ftruncate(self._fd, cut)
                    _shared_again(self._fd, self.path)
        except BaseException:
            self.close()
            raise
        self.saved = _latest(records)
        if created:
            sync_folder(self.path.parent)

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line and make it durable before returning."""
        self.extend([record])

    def extend(self, records: list[dict[str, Any]]) -> None:
        """Write ``records``, a line each, with one write and one fsync, and make them
        durable before returning. They are in ``saved`` once written, before the fsync
        (a later ``extend`` syncs them too)."""
        if not records:
            return
        self._write(b"".join(json.dumps(record).encode() + b"\n" for record in records))
        self.saved.update({point_key(record): record for record in records})
        assert self._fd is not None
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise cannot_write(self.path, exc) from None

    def _write(self, data: bytes) -> None:
        """Append ``data`` on a line of its own, all of it or (on any exception, Ctrl-C
        included) none."""
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        start = os.lseek(self._fd, 0, os.SEEK_END)
        if start and _byte_at(self._fd, start - 1) != b"\n":
            data = b"\n" + data   # after a whole last record, or a truncated one
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except BaseException as exc:
            os.ftruncate(self._fd, start)  # never leave part of a line behind
            if isinstance(exc, OSError):  # a full disk: say which file
                raise cannot_write(self.path, exc) from None
            raise

    def close(self) -> None:
        """Close the file (every record is already on disk); remove it where this run
        created it, it is still empty and no other sweep has it open (a sweep stopped
        before its first point; another saving to the same file may have opened it, or
        written to it, meanwhile)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if self._created and os.fstat(fd).st_size == 0 and _alone(fd):
                    Path(os.path.realpath(self.path)).unlink(missing_ok=True)  # not a link
            finally:
                os.close(fd)

    def __enter__(self) -> ResultFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shared_again(fd: int, path: Path) -> None:
    """Take ``fd``'s shared lock again after :func:`_alone` (whose exclusive one it
    turns into the shared one; where that failed, ``fd`` held none), so that other
    sweeps see the file in use. Another sweep alone with the file in the moment between
    may have removed it: the records are then written to a file no longer in the
    folder, which is said."""
    if fcntl is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        return
    if os.fstat(fd).st_nlink == 0:
        raise InvalidInputError(f"{path} was removed by another sweep while this one "
                                f"opened it; run again")


def _open_shared(path: Path) -> int:
    """``path`` opened for appending (made if need be), with a shared lock that tells
    other sweeps it is in use (:func:`_alone`); opened again if the file was removed
    while the lock was awaited."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
    while True:
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as exc:
            raise cannot_write(path, exc) from None
        if fcntl is None:
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:   # a file system without locks: kept, whatever happens (_alone)
            return fd
        if os.fstat(fd).st_nlink > 0:
            return fd
        os.close(fd)   # removed by a sweep that had it alone: make it again


def remove_unless_open(path: Path) -> bool:
    """Remove ``path`` (a sweep's file) unless another sweep has it open, as
    :meth:`ResultFile.close` does: a sweep appending to it would write on into a file
    removed under it. Return whether it is gone (or was not there); where locks are not
    available it is kept."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not _alone(fd):
            return False
        Path(os.path.realpath(path)).unlink(missing_ok=True)  # not a link
        return True
    finally:
        os.close(fd)


def _alone(fd: int) -> bool:
    """Whether no other sweep has the file of ``fd`` open (an exclusive lock is to be
    had; kept until the file is closed, or :func:`_shared_again`). Where locks are not
    available (Windows, a file system without them): not known, so False. Linux drops
    ``fd``'s shared lock before it tries for the exclusive one, and does not give it
    back where that fails: an ``fd`` that stays open takes it again."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _byte_at(fd: int, offset: int) -> bytes:
    """The byte at ``offset`` of the file open as ``fd`` (for reading and appending:
    where it reads does not change where it appends)."""
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, 1)
