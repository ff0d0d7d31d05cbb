"""The failure classes of the hook's own work: ``strict`` raises, otherwise log and carry on.

Contract (see "Failures" in :mod:`npu_dump_hook.hook`)::

    guard = FailureGuard(strict)
    with guard("writing the dump of step 0", undo=cleanup):   # one failure class
        ...
    guard.failures   # [{"doing", "error"}] in order (run.json ``failures``)

A failure first runs ``undo`` (best effort), is recorded, then raised with ``strict=True`` (an
``OSError`` as a :class:`~npu_dump_hook.errors.BundleError` naming the path and what was being
done) or logged with ``strict=False``, where training carries on. Any other exception
(``KeyboardInterrupt``, SIGTERM's ``Terminated``, a TensorFlow error) runs ``undo`` too and goes on
its way unrecorded. Log lines go to the
``npu_dump_hook.hook`` logger, as the hook's own.
"""
import contextlib
import logging
from typing import Callable, Dict, Iterator, List, Optional

from .._inert import printable
from ..errors import BundleError, NpuDumpError

__all__ = ["FailureGuard", "os_error_text", "HOOK_LOGGER"]

#: The logger name of the hook's log lines (the collaborators log as the hook).
HOOK_LOGGER = "npu_dump_hook.hook"
logger = logging.getLogger(HOOK_LOGGER)


class FailureGuard(object):
    """Runs the hook's own work for one failure class at a time (see the module doc)."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        #: What failed, in order: ``{"doing", "error"}`` (also in run.json).
        self.failures = []  # type: List[Dict[str, str]]

    def record(self, doing: str, exc: BaseException) -> None:
        self.failures.append({"doing": doing, "error": "{}: {}".format(type(exc).__name__, exc)})

    @contextlib.contextmanager
    def __call__(self, doing: str, undo: Optional[Callable[[], None]] = None) -> Iterator[None]:
        try:
            yield
        except (NpuDumpError, OSError) as exc:
            _undo(undo, doing)
            self.record(doing, exc)
            if self.strict:
                if isinstance(exc, NpuDumpError):
                    raise
                raise BundleError("NpuDumpHook: {} failed: {}".format(doing, os_error_text(exc)),
                                  getattr(exc, "filename", None)) from exc
            logger.error("NpuDumpHook: %s failed (strict=False: training continues): %s", printable(doing), printable(exc))
        except BaseException:  # Ctrl-C, SIGTERM (Terminated), a TensorFlow error: undone, then on its way
            _undo(undo, doing)
            raise


def _undo(undo: Optional[Callable[[], None]], doing: str) -> None:
    """Run ``undo`` best effort: a failing clean-up is logged, the first error is the one raised."""
    if undo is None:
        return
    try:
        undo()
    except OSError as cleanup_error:  # e.g. the same full disk: report, keep the first error
        logger.error("NpuDumpHook: cleaning up after %s failed too: %s", printable(doing), printable(cleanup_error))


def os_error_text(exc: OSError) -> str:
    """``strerror: filename`` (an OSError's str() omits the path when it was raised without one)."""
    text = exc.strerror or str(exc)
    return "{}: {}".format(text, exc.filename) if exc.filename else text
