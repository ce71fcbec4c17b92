"""Files a user asks simcoll to write: checked before any work, written whole or not at all.

:func:`output_path` refuses, before a simulation or a drawing starts, what cannot become
the file (not a path, a directory, a folder that does not exist), so a long run does not
end in an ``OSError``. :func:`write_atomically` writes through a temporary file next to
the target and renames it over the target: an existing file is never left half
written, and the temporary file never stays behind, whatever fails. A folder where no
file can be written is found by creating and removing that temporary file beforehand.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simcoll.errors import InvalidInputError

__all__ = ["file_path", "output_path", "too_long", "unwritable", "write_atomically",
           "sibling", "cannot_write"]


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
    resolved = Path(path)
    problem = too_long(resolved)
    if problem:
        raise InvalidInputError(f"{what}={str(path)!r}: {problem}")
    if resolved.is_dir():
        raise InvalidInputError(f"{what}={str(path)!r} is a directory; give a file path, "
                                f"e.g. {str(resolved / example)!r}")
    return resolved


def output_path(path: Any, what: str, *, example: str = "out.json") -> Path:
    """``path`` as a Path, if a file can be written there: :func:`file_path`, in a
    folder that exists.

    Raises:
        InvalidInputError: naming the path and what is wrong with it.
    """
    resolved = file_path(path, what, example=example)
    if not resolved.parent.is_dir():
        raise InvalidInputError(f"{what}={str(path)!r}: folder {str(resolved.parent)!r} "
                                f"does not exist")
    problem = unwritable(resolved)
    if problem:
        raise InvalidInputError(f"{what}={str(path)!r}: {problem}")
    return resolved


def too_long(path: Path) -> str | None:
    """Why ``path``'s name is longer than its folder takes, or None."""
    length, limit = len(os.fsencode(path.name)), _name_max(path.parent)
    if length <= limit:
        return None
    return f"the file name is {length} bytes long, more than the {limit} its folder takes"


def unwritable(path: Path) -> str | None:
    """Why no file can be written at ``path`` (whose folder exists and takes its name),
    or None: the temporary file :func:`write_atomically` writes through is created and
    removed to see, as permissions alone do not tell (a read-only or virtual file
    system)."""
    probe = _temporary(path)
    try:
        probe.open("x").close()
    except FileExistsError:
        return None  # a temporary file left by an earlier writer: the folder is writable
    except OSError as exc:
        return f"cannot write in folder {str(path.parent)!r} ({exc.strerror or exc})"
    probe.unlink(missing_ok=True)
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
    return sibling(path, ".", ".part")


def cannot_write(path: Path, exc: OSError) -> OSError:
    """``exc``, a failed write of ``path``, as an OSError of the same errno naming it."""
    return OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}")


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write`` with a temporary file next to ``path``, then rename it to ``path``;
    the temporary file is removed if anything fails."""
    tmp = _temporary(path)
    try:
        write(tmp)
        tmp.replace(path)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    finally:
        tmp.unlink(missing_ok=True)
