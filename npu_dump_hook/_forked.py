"""Run a function in a forked child process and read its result back, to spread a CPU-bound
read of one file over the cores (the child shares the parent's memory map copy-on-write).

Contract::

    call = ForkedCall(fn, *args)     # forks (OSError if it cannot); the child runs fn(*args)
    ...                              # the parent goes on with its own share
    ok, value = call.result()        # waits; (False, None) if the child failed in any way
    call.abandon()                   # or: kill it (never waits for its work)

The result must be marshal-able (tuples, lists, str, bytes, int, bool, None). A failure of the
child (an exception, a kill, a result that does not decode) is never raised in the parent: the
caller does that share itself instead, so the outcome never depends on the child.

Forking is only offered (:func:`fork_is_safe`) where the platform has ``os.fork``, the process
has one Python thread and has not loaded TensorFlow: a process with other threads (a thread
pool, TensorFlow's native ones) may hold locks the child would inherit held, so callers there
do the work in-process.
"""
import marshal
import os
import signal
import sys
import threading
from typing import Any, Callable, Tuple

__all__ = ["ForkedCall", "fork_is_safe", "usable_cores"]

_READ_CHUNK = 1 << 20


def fork_is_safe() -> bool:
    """Whether this process may fork a worker: POSIX fork, no other Python thread, and no
    TensorFlow loaded (its native threads are invisible to ``threading``)."""
    return (hasattr(os, "fork") and threading.active_count() == 1
            and "tensorflow" not in sys.modules)


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class ForkedCall(object):
    """``fn(*args)`` running in a forked child; see the module docstring."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no process left (limits, memory): the caller does the work
            os.close(read_fd)
            os.close(write_fd)
            raise
        if pid == 0:  # the child: never returns into the parent's code
            try:
                os.close(read_fd)
                _run_child(write_fd, fn, args)
            finally:
                os._exit(0)
        os.close(write_fd)
        self._pid = pid
        self._fd = read_fd

    def result(self) -> Tuple[bool, Any]:
        """(True, fn's result), or (False, None) if the child failed; waits for the child."""
        if self._fd < 0:
            return False, None
        received = bytearray()  # grown in place: no second copy of a large result at the end
        try:
            while True:
                chunk = os.read(self._fd, _READ_CHUNK)
                if not chunk:
                    break
                received += chunk
        except OSError:
            received = bytearray()
        self._close()
        try:
            ok, value = marshal.loads(received)
        except (EOFError, ValueError, TypeError):
            return False, None
        return (True, value) if ok is True else (False, None)

    def fileno(self) -> int:
        """The pipe the result comes through (for ``select``): readable once the child has finished
        (it writes its result in one go at the end) or died; -1 after :meth:`result`/:meth:`abandon`."""
        return self._fd

    def abandon(self) -> None:
        """Stop the child if it still runs and reap it."""
        if self._fd < 0:
            return
        try:
            os.kill(self._pid, signal.SIGKILL)
        except OSError:  # already gone
            pass
        self._close()

    def _close(self) -> None:
        os.close(self._fd)
        self._fd = -1
        try:
            os.waitpid(self._pid, 0)
        except OSError:
            pass


def _run_child(fd: int, fn: Callable[..., Any], args: Tuple[Any, ...]) -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C stops the child, no traceback
        payload = marshal.dumps((True, fn(*args)))
    except BaseException:  # any failure: the parent does this share itself
        payload = marshal.dumps((False, None))
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.close(fd)
