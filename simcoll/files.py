"""Files a user asks simcoll to write: checked before any work, written whole or not at all.

:func:`output_path` refuses, before a simulation or a drawing starts, what cannot become
the file (not a path, a directory, a folder that does not exist), so a long run does not
end in an ``OSError``. :func:`write_atomically` writes through a temporary file next to
the target and renames it over the target: an existing file is never left half
written, and the temporary file never stays behind, whatever fails. A folder where no
file can be written is found by creating and removing that temporary file beforehand.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simcoll.errors import InvalidInputError

__all__ = ["file_path", "output_path", "unwritable", "write_atomically"]


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


def unwritable(path: Path) -> str | None:
    """Why no file can be written at ``path`` (whose folder exists), or None: the
    temporary file :func:`write_atomically` writes through is created and removed to
    see, as permissions alone do not tell (a read-only or virtual file system)."""
    probe = _temporary(path)
    try:
        probe.open("x").close()
    except FileExistsError:
        return None  # a temporary file left by an earlier writer: the folder is writable
    except OSError as exc:
        return f"cannot write in folder {str(path.parent)!r} ({exc.strerror or exc})"
    probe.unlink(missing_ok=True)
    return None


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.part")


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write`` with a temporary file next to ``path``, then rename it to ``path``;
    the temporary file is removed if anything fails."""
    tmp = _temporary(path)
    try:
        write(tmp)
        tmp.replace(path)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
