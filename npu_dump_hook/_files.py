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
* :func:`special_kind`: what a file mode is when it is not a regular file (``a FIFO``, ...).

Stdlib only; the bundle package, ``formats`` and ``compare`` share it (none imports the other
for it).
"""
import os
import stat
from typing import IO, Optional

__all__ = ["open_regular", "special_kind", "NotRegularFile"]

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
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise
