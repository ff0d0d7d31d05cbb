"""SIGTERM as an exception for the length of a block, so clean-ups on the way out run.

A process killed by SIGTERM's default action vanishes with its temporary folders (an archive's
extraction) and worker processes left behind. Inside :func:`terminating_cleanly` SIGTERM raises
:class:`Terminated` (a ``SystemExit`` with status 143) instead, so ``finally`` blocks run. Shared by
the archive extraction (:mod:`npu_dump_hook.bundle`) and ``npu-dump-hook compare``.
"""
import contextlib
import os
import signal
import threading
import time
from typing import Any, Iterator

__all__ = ["Terminated", "ends_as_meant", "terminating_cleanly", "raise_on_sigterm", "restore_sigterm", "test_pause",
           "TEST_PAUSE_ENV", "PAUSE_SECONDS"]

#: Test-only: the phase where :func:`test_pause` pauses or raises (npu_dump_hook._phases).
TEST_PAUSE_ENV = "NPU_DUMP_HOOK_TEST_PAUSE"
PAUSE_SECONDS = 60.0


class Terminated(SystemExit):
    """SIGTERM received while :func:`terminating_cleanly` was in force: raised so that the
    ``finally``/``except BaseException`` clean-ups on the way out run; exit status 143."""


def ends_as_meant(exc_type: Any) -> bool:
    """Whether a script's ``with Session()`` block left with ``exc_type`` (None: no exception) ended
    its run as the script meant to: no exception, or a ``SystemExit`` of its own (``sys.exit``); not
    :class:`Terminated`, a SIGTERM that cut the hook's work short, which ends the run as a failure
    does (no ``end()``, no bundle)."""
    return exc_type is None or (issubclass(exc_type, SystemExit) and not issubclass(exc_type, Terminated))


@contextlib.contextmanager
def terminating_cleanly() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` for the duration of the block, so an extraction
    interrupted by it removes its temporary folder. Installed only in the main thread and only
    while SIGTERM has its default action (a process that chose its own handler, e.g. a training
    script, keeps it); the default is restored when the block ends, whatever happens."""
    installed = raise_on_sigterm()
    try:
        yield
    finally:
        if installed:
            restore_sigterm()


def _raise(signum: int, frame: Any) -> None:
    raise Terminated(128 + signum)


def raise_on_sigterm() -> bool:
    """Make SIGTERM raise :class:`Terminated` until :func:`restore_sigterm`; True when installed
    (main thread only, and only over SIGTERM's default action: a handler the script chose is kept)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _raise)
    return True


def restore_sigterm() -> None:
    """SIGTERM's default action again, if :func:`raise_on_sigterm` installed the handler."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _raise:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_pause(phase: str) -> None:
    """The test-only injection point (:mod:`npu_dump_hook._phases`); nothing unless the variable
    names ``phase``."""
    spec = os.environ.get(TEST_PAUSE_ENV)
    if not spec:
        return
    if spec == phase + "!raise":
        raise RuntimeError("{}: injected failure in phase {}".format(TEST_PAUSE_ENV, phase))
    name, sep, flag = spec.partition("@")
    if not sep or name != phase or os.path.exists(flag):  # one pause per flag file
        return
    with open(flag, "w") as handle:
        handle.write(str(os.getpid()))
    deadline = time.monotonic() + PAUSE_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)
