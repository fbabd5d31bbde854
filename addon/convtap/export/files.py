"""Writing a file a user names with `--output` (`convtap export`, `convtap report`), into what
they named and nothing else.

- Nothing there, or a regular file (also at the end of a symlink): a new file beside it (mode
  0600: it holds the conversations) is written, then renamed over it, so that a failure leaves
  nothing half written; a symlink stays a symlink, and its target is what is replaced.
- A FIFO: written into as it is (its reader gets the text; it stays a FIFO).
- A directory, a device node or a socket: refused before anything is written (an `OSError`
  whose `strerror` says what it is), never replaced.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TextIO, TypeVar

T = TypeVar("T")


def write_output(output: Path, write: Callable[[TextIO], T]) -> T:
    """What `write` writes, into `output` as described above; what `write` returned."""
    try:
        mode: int | None = os.stat(output).st_mode  # through symlinks
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc)) from exc
    if mode is not None and stat.S_ISFIFO(mode):
        with open(output, "w", encoding="utf-8", newline="") as fifo:
            return write(fifo)
    if mode is not None and not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device or socket)"
        raise OSError(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, what)
    target = Path(os.path.realpath(output))  # a symlink's target is what is replaced
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            result = write(handle)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return result


def is_part_of(output: Path, db: Path) -> bool:
    """`output` names the capture `db` or one of SQLite's files beside it (its -wal holds
    committed rows until a checkpoint), through any symlink or hard link."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        part = Path(f"{db}{suffix}")
        if os.path.realpath(output) == os.path.realpath(part):
            return True
        try:
            if os.path.samefile(output, part):
                return True
        except OSError:
            continue
    return False
