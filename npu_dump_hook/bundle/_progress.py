"""Progress reporting for long collections.

A caller may pass ``progress(done_files, total_files, done_bytes, total_bytes)``; it is
called as files are placed: every few dozen files (sooner after large ones) and once all are. Without one, a one-line bar is drawn on stderr only when stderr
is a terminal (at most 10 redraws a second), so CI logs stay quiet.
"""
import sys
import threading
import time
from typing import Any, Callable, Optional

__all__ = ["ProgressFn", "Progress", "make_progress"]

ProgressFn = Callable[[int, int, int, int], None]
_REDRAW_SECONDS = 0.1


class Progress:
    """Counts files and bytes and forwards them to a callback and/or a terminal bar."""

    def __init__(self, total_files: int, total_bytes: int, callback: Optional[ProgressFn] = None,
                 stream: Any = None) -> None:
        self.total_files = total_files
        self.total_bytes = total_bytes
        self.files = 0
        self.bytes = 0
        self._callback = callback
        self._stream = stream
        self._last_draw = 0.0
        self._lock = threading.Lock()

    def update(self, files: int, nbytes: int) -> None:
        with self._lock:
            self.files += files
            self.bytes += nbytes
            if self._callback is not None:
                self._callback(self.files, self.total_files, self.bytes, self.total_bytes)
            if self._stream is not None:
                now = time.monotonic()
                if now - self._last_draw >= _REDRAW_SECONDS or self.files == self.total_files:
                    self._last_draw = now
                    self._draw()

    def _draw(self) -> None:
        width = 30
        frac = self.bytes / self.total_bytes if self.total_bytes else (
            self.files / self.total_files if self.total_files else 1.0)
        bar = "#" * int(frac * width)
        self._stream.write("\rcollecting [{:<{w}}] {:>3d}% {}/{} files {:.1f}/{:.1f} MiB".format(
            bar, int(frac * 100), self.files, self.total_files, self.bytes / 2 ** 20, self.total_bytes / 2 ** 20,
            w=width))
        self._stream.flush()

    def close(self) -> None:
        if self._stream is not None and self.total_files:
            self._draw()
            self._stream.write("\n")
            self._stream.flush()


def make_progress(callback: Optional[ProgressFn], total_files: int, total_bytes: int,
                  stream: Any = None) -> Progress:
    """A :class:`Progress`: the callback when given, else a bar when stderr is a TTY."""
    if callback is None and stream is None:
        err = sys.stderr
        stream = err if err is not None and hasattr(err, "isatty") and err.isatty() else None
    return Progress(total_files, total_bytes, callback, stream)
