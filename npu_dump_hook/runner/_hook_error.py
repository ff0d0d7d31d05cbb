"""The injected hook's own errors, told as one line (issue 21 point 9).

A golden run of a script whose model differs from the bundle's stops in the hook with a clear
``FingerprintMismatchError``; printed as Python prints an uncaught exception, its traceback runs
through the package's frames and reads as the package's crash. So an :class:`NpuDumpError` the
injected hook raised is one line ``npu-dump-hook: ErrorType: message`` (status 1, as Python's),
its traceback only at the ``-v``/``--debug`` log levels. The rule, :func:`raised_by_the_hook`: a
method of one of the injection's parts (:meth:`Injection.parts_at_work`: the injection, its hook,
the session wrapper, the checkpoint redirect) is on the error's traceback. An error of the
script's own code -- raised by it, or by the package's API it called wrongly -- has no such frame
and keeps its traceback: there the line of the script is what the user needs.

:mod:`._child` (``npu-dump-hook run``) prints with :func:`print_hook_error`; the environment-only
mode (:func:`._install.start`) puts :func:`excepthook` in front of ``sys.excepthook``.
"""
import sys
from typing import Any, Callable, Optional

from .._cli_conventions import print_error
from ..errors import NpuDumpError

__all__ = ["TRACEBACK_LEVELS", "raised_by_the_hook", "print_hook_error", "excepthook"]

#: The log levels (``-v``, ``--debug``) at which the hook's own error comes with its traceback.
TRACEBACK_LEVELS = ("INFO", "DEBUG")


def raised_by_the_hook(exc: BaseException, injection: Any) -> bool:
    """Whether ``exc`` is an NpuDumpError raised below a method of one of ``injection``'s parts."""
    if not isinstance(exc, NpuDumpError):
        return False
    parts = {id(part) for part in injection.parts_at_work()}
    tb = exc.__traceback__
    while tb is not None:
        if id(tb.tb_frame.f_locals.get("self")) in parts:
            return True
        tb = tb.tb_next
    return False


def print_hook_error(exc: BaseException, tb: Any, level: Optional[str],
                     traceback_printer: Optional[Callable[..., Any]] = None) -> None:
    """``npu-dump-hook: ErrorType: message`` on stderr; at a :data:`TRACEBACK_LEVELS` ``level``
    after the traceback (``traceback_printer``, default ``sys.excepthook``, prints it)."""
    if level in TRACEBACK_LEVELS:
        (traceback_printer or sys.excepthook)(type(exc), exc.with_traceback(tb), tb)
    print_error("{}: {}".format(type(exc).__name__, exc))


def excepthook(injection: Any, level: Optional[str], previous: Callable[..., Any]) -> Callable[..., Any]:
    """A ``sys.excepthook`` that prints the hook's own errors with :func:`print_hook_error` and
    hands every other exception to ``previous``."""

    def hook(kind: Any, exc: BaseException, tb: Any) -> None:
        if raised_by_the_hook(exc, injection):
            print_hook_error(exc, tb, level, previous)
        else:
            previous(kind, exc, tb)

    return hook
