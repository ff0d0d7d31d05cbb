"""SIGTERM as an exception for the length of a block, so clean-ups on the way out run.

A process killed by SIGTERM's default action vanishes with its temporary folders (an archive's
extraction) and worker processes left behind. Inside :func:`terminating_cleanly` SIGTERM raises
:class:`Terminated` (a ``SystemExit`` with status 143) instead, so ``finally`` blocks run. Shared by
the archive extraction (:mod:`npu_dump_hook.bundle`) and ``npu-dump-hook compare``.
"""
import contextlib
import signal
import threading
from typing import Any, Iterator

__all__ = ["Terminated", "terminating_cleanly"]


class Terminated(SystemExit):
    """SIGTERM received while :func:`terminating_cleanly` was in force: raised so that the
    ``finally``/``except BaseException`` clean-ups on the way out run; exit status 143."""


@contextlib.contextmanager
def terminating_cleanly() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` for the duration of the block, so an extraction
    interrupted by it removes its temporary folder. Installed only in the main thread and only
    while SIGTERM has its default action (a process that chose its own handler, e.g. a training
    script, keeps it); the default is restored when the block ends, whatever happens."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise Terminated(128 + signum)

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
