"""Atomic file writes: a sibling temp file, fsync, ``os.replace`` (readers see old or new, never half)."""
import os
import tempfile

__all__ = ["atomic_write_bytes"]


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a sibling temp file and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
