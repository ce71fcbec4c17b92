"""Files a user asks simcoll to write: checked before any work, written whole or not at all.

:func:`output_path` refuses, before a simulation or a drawing starts, what cannot become
the file (not a path, a directory, a folder that does not exist), so a long run does not
end in an ``OSError``. :func:`write_atomically` writes through a temporary file next to
the target, flushes it to disk and renames it over the target: an existing file is
never left half written, and the temporary file never stays behind, whatever fails. A
folder where no file can be written is found by creating and removing such a temporary
file beforehand.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simcoll.errors import InvalidInputError

__all__ = ["file_path", "output_path", "names_a_folder", "no_folder", "too_long",
           "unwritable", "write_atomically", "sibling", "cannot_write", "sync_folder"]


def file_path(path: Any, what: str, *, example: str = "out.json") -> Path:
    """``path`` as a Path, if it can name a file: a str or path-like, not a directory.

    Args:
        what: the argument's name, for the message (``"save"``, ``"path"``).
        example: a file name to suggest where ``path`` is a directory.

    Raises:
        InvalidInputError: naming the path and what is wrong with it.
    """
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise InvalidInputError(f"{what}={path!r} is not a file path")
    if not os.fspath(path):   # Path("") is "."
        raise InvalidInputError(f"{what}='' is an empty path; give a file path, e.g. "
                                f"{example!r}")
    if "\0" in os.fsdecode(path):
        raise InvalidInputError(f"{what}={str(path)!r} holds a NUL character, which no file "
                                f"name can")
    resolved = Path(path)
    try:   # a folder's name, or the whole path, the system cannot take raises here
        problem = too_long(resolved)
        if problem:
            raise InvalidInputError(f"{what}={str(path)!r}: {problem}")
        directory = resolved.is_dir()
    except OSError as exc:
        raise InvalidInputError(f"{what}={str(path)!r}: {exc.strerror or exc}") from None
    if directory:
        raise InvalidInputError(f"{what}={str(path)!r} is a directory; give a file path, "
                                f"e.g. {str(resolved / example)!r}")
    problem = names_a_folder(path)
    if problem:
        raise InvalidInputError(f"{what}={str(path)!r} {problem}; give a file path, e.g. "
                                f"{str(resolved / example)!r}")
    return resolved


def names_a_folder(path: str | os.PathLike) -> str | None:
    """Why the text of ``path`` names a folder (it ends in a separator, ``.`` or ``..``,
    which ``Path`` drops or a file name cannot be), or None."""
    text = os.fsdecode(path)
    separators = (os.sep, os.altsep) if os.altsep else (os.sep,)
    if text.endswith(separators):
        return "ends in a separator, as a folder's name does"
    last = text
    for separator in separators:
        last = last.rpartition(separator)[2]
    if last in (".", ".."):
        return f"ends in {last!r}, which names a folder"
    return None


def output_path(path: Any, what: str, *, example: str = "out.json") -> Path:
    """``path`` as a Path, if a file can be written there: :func:`file_path`, in a
    folder that exists.

    Raises:
        InvalidInputError: naming the path and what is wrong with it.
    """
    resolved = file_path(path, what, example=example)
    problem = no_folder(resolved)
    if problem:
        raise InvalidInputError(f"{what}={str(path)!r}: {problem}")
    problem = unwritable(resolved)
    if problem:
        raise InvalidInputError(f"{what}={str(path)!r}: {problem}")
    return resolved


def no_folder(path: Path) -> str | None:
    """Why ``path``'s folder cannot hold it (it does not exist, or is a file), or None."""
    folder = path.parent
    if folder.is_dir():
        return None
    if folder.exists():
        return f"{str(folder)!r} is a file, not a folder"
    return f"folder {str(folder)!r} does not exist"


def too_long(path: Path) -> str | None:
    """Why ``path``'s name is longer than its folder takes, or None."""
    length, limit = len(os.fsencode(path.name)), _name_max(path.parent)
    if length <= limit:
        return None
    return f"the file name is {length} bytes long, more than the {limit} its folder takes"


def unwritable(path: Path) -> str | None:
    """Why no file can be written at ``path`` (whose folder exists and takes its name),
    or None: a temporary file like those :func:`write_atomically` writes through is
    created and removed to see, as permissions alone do not tell (a read-only or virtual
    file system); and an existing file another user owns in a folder with the sticky bit
    (``/tmp``) cannot be replaced, which no probe shows; a device, pipe or socket would be
    replaced by a file. For a symbolic link, all that of the file it names, which is what
    is written."""
    if path.is_symlink():
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "a symbolic link that loops"
        path = _final(path)
        if not path.parent.is_dir():
            return f"a link to {str(path)!r}, whose folder does not exist"
    if path.exists() and not path.is_file() and not path.is_dir():
        # writing renames a file over it: a pipe or a device node (/dev/null) would go
        return ("a device, pipe or socket, not a regular file: writing would replace it; "
                "give a file path")
    probe = _temporary(path)
    try:
        probe.open("x").close()
    except OSError as exc:
        return f"cannot write in folder {str(path.parent)!r} ({exc.strerror or exc})"
    probe.unlink(missing_ok=True)
    return _not_replaceable(path)


def _not_replaceable(path: Path) -> str | None:
    """Why the existing file at ``path`` cannot be renamed over, or None."""
    final = _final(path)
    try:
        target, folder = os.stat(final), os.stat(final.parent)
    except OSError:
        return None   # no file there yet
    me = os.geteuid() if hasattr(os, "geteuid") else None
    if me in (None, 0) or not folder.st_mode & stat.S_ISVTX:
        return None
    if me not in (target.st_uid, folder.st_uid):
        return (f"{str(final)!r} belongs to another user in a folder with the sticky "
                f"bit, which only its owner can replace; write elsewhere")
    return None


def sibling(path: Path, prefix: str = "", suffix: str = "") -> Path:
    """The file ``prefix + name + suffix`` in ``path``'s folder (``name``: ``path``'s).
    Where that is longer than the folder takes, ``name`` is cut and ends with a digest
    of it instead, so that the sibling of a name the folder takes (up to 255 bytes)
    can be created too, and stays that name's alone."""
    name = f"{prefix}{path.name}{suffix}"
    limit = _name_max(path.parent)
    if len(os.fsencode(name)) <= limit:
        return path.with_name(name)
    tail = "-" + hashlib.sha256(os.fsencode(path.name)).hexdigest()[:16] + suffix
    head = prefix + path.name
    while len(os.fsencode(head + tail)) > limit:
        head = head[:-1]
    return path.with_name(head + tail)


def _name_max(folder: Path) -> int:
    """The longest file name, in bytes, ``folder`` takes (255 where it does not say)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, ValueError, OSError):
        return 255


def _temporary(path: Path) -> Path:
    """A temporary file's name next to ``path``, new to this call (two writers of one
    file never share it)."""
    return sibling(path, ".", f".{secrets.token_hex(4)}.part")


def _final(path: Path) -> Path:
    """Where ``path``'s content goes: the file a symbolic link ``path`` points to (the
    link stays), else ``path``."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def cannot_write(path: Path, exc: OSError) -> OSError:
    """``exc``, a failed write of ``path``, as an OSError of the same errno naming it."""
    return OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}")


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write`` with a temporary file next to ``path`` (next to the file it links
    to, for a symbolic link), flush it to disk, give it an existing file's permissions,
    and rename it over that file; the temporary file is removed if anything fails."""
    final = _final(path)
    tmp = _temporary(final)
    try:
        write(tmp)
        with tmp.open("rb") as written:   # read-only: a umask may leave it no more
            os.fsync(written.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(os.stat(final).st_mode))
        tmp.replace(final)
        sync_folder(final.parent)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    finally:
        with contextlib.suppress(OSError):   # must not hide what failed
            tmp.unlink(missing_ok=True)


def sync_folder(folder: Path) -> None:
    """Flush ``folder``'s entries (a new file, a rename) to disk, where the system
    allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
