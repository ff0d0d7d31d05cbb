"""Opening untrusted input files without blocking: the one open every reader of a bundle, dump
tree, golden folder or ``mapping.csv`` uses once it has decided to read a file.

Checking a path (``lstat``) and then opening it by name leaves a window in which a FIFO can be
put there, and opening a FIFO for reading blocks until a writer comes: forever. So the file is
opened first and checked after, through the descriptor:

* :func:`open_regular`: ``os.open`` with ``O_RDONLY | O_NONBLOCK`` (a FIFO opens at once, with no
  writer) and ``O_NOFOLLOW`` unless ``follow_links`` (a final symlink is refused: ``ELOOP``), then
  ``fstat`` of the descriptor; anything but a regular file is :class:`NotRegularFile` (an
  OSError naming the path and what it is), and the descriptor is closed. The file object
  returned reads from that descriptor, so what was checked is what is read.
* :func:`read_small_regular`: the same open and check, for a small file read whole in one call
  with no file object (readers of thousands of tiny files: the statistics CSVs); None for
  anything it does not read, which the caller then opens with :func:`open_regular`.
* :func:`special_kind`: what a file mode is when it is not a regular file (``a FIFO``, ...).

Stdlib only; the bundle package, ``formats`` and ``compare`` share it (none imports the other
for it).
"""
import os
import stat
from typing import IO, Optional

__all__ = ["open_regular", "read_small_regular", "special_kind", "NotRegularFile"]

_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
            (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symlink"))


class NotRegularFile(OSError):
    """The file opened is not a regular file: ``path`` and ``kind`` (``a FIFO``, ...) say what."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__("{} is {}, not a regular file".format(path, kind))
        self.path = path
        self.kind = kind


def special_kind(mode: int) -> Optional[str]:
    """What a file of ``mode`` is when it is not a regular file (``a FIFO``, ...), else None."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def open_regular(path: str, buffering: int = -1, follow_links: bool = False) -> IO[bytes]:
    """``path`` opened for reading without blocking on a FIFO (and, unless ``follow_links``,
    without following a final symlink), then checked through the descriptor to be a regular
    file; :class:`NotRegularFile` or another OSError otherwise (module doc)."""
    fd = os.open(path, _flags(follow_links))
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def read_small_regular(path: str, max_bytes: int) -> Optional[bytes]:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``, opened as
    :func:`open_regular` opens it (never a final symlink) and read in one call; None for anything
    else, a file that changed size meanwhile or any OSError (the caller's :func:`open_regular`
    then says what is wrong)."""
    try:
        fd = os.open(path, _flags(False))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        data = os.read(fd, info.st_size + 1)
        return data if len(data) == info.st_size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _flags(follow_links: bool) -> int:
    """Read only, never blocking on a FIFO, never inherited; no final symlink unless ``follow_links``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    return flags if follow_links else flags | getattr(os, "O_NOFOLLOW", 0)
