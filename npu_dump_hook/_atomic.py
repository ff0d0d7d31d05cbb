"""Atomic file writes: a sibling temp file, fsync, ``os.replace`` (readers see old or new, never half).

The file gets the mode a new file would (``0o666`` less the process umask: 0644 by default),
not the 0600 of the temp file ``tempfile.mkstemp`` makes.
"""
import os
import tempfile

__all__ = ["atomic_write_bytes", "new_file_mode"]


def new_file_mode() -> int:
    """``0o666`` less the process umask (the umask is read by setting it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a sibling temp file and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if hasattr(os, "fchmod"):  # POSIX; elsewhere the temp file's mode is the umask's already
                os.fchmod(out.fileno(), new_file_mode())
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
