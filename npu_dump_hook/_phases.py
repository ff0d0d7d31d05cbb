"""An interrupted phase of the hook's work (capture, dump, collection) never looks complete.

Contract::

    phase = InFlight(undo)   # undo(): remove scratch, set a partial result aside (idempotent)
    phase.start()            # the phase begins: SIGTERM raises Terminated, undo registered at exit
    phase.stop()             # the phase ended (done, or its failure already undone)

Between ``start`` and ``stop`` an exception that leaves the hook's code (Ctrl-C inside
``session.run``, a TensorFlow error, another hook's failure) or a SIGTERM (turned into
:class:`~npu_dump_hook._signals.Terminated`, so the interpreter exits through its clean-ups, with
status 143) runs ``undo`` at interpreter exit. SIGKILL runs nothing: what a killed phase leaves
must say so by itself (the emulator's begin marker,
:data:`~npu_dump_hook.constants.INCOMPLETE_STEP_MARKER`).

Test-only: :func:`~npu_dump_hook._signals.test_pause` (re-exported here) is the injection point
of the environment variable ``NPU_DUMP_HOOK_TEST_PAUSE`` = ``PHASE@FLAG`` (the process creates the
file ``FLAG`` holding its pid when it reaches ``PHASE`` and the file is absent, then sleeps up to
:data:`PAUSE_SECONDS` so a test can signal it) or ``PHASE!raise`` (a RuntimeError there).
Phases: ``dump`` (the emulator, two dump files of the step written), ``capture`` (after the
captured step ran, before its golden .npy are written), ``golden`` (golden .npy written, no
manifest yet), ``collect`` (bundle files in the staging folder).
"""
import atexit
import logging
import weakref
from typing import Callable

from ._signals import TEST_PAUSE_ENV, PAUSE_SECONDS, raise_on_sigterm, restore_sigterm, test_pause  # noqa: F401

__all__ = ["InFlight", "test_pause", "TEST_PAUSE_ENV", "PAUSE_SECONDS"]

logger = logging.getLogger(__name__)


class InFlight(object):
    """One interruptible phase (module doc)."""

    def __init__(self, undo: Callable[[], None]) -> None:
        self.undo = undo
        self.active = False
        self._registered = False
        self._sigterm = False

    def start(self) -> None:
        self.active = True
        if not self._registered:
            atexit.register(_undo_at_exit, weakref.ref(self))
            self._registered = True
        self._sigterm = raise_on_sigterm() or self._sigterm

    def stop(self) -> None:
        self.active = False
        if self._sigterm:
            restore_sigterm()
            self._sigterm = False

    def undo_now(self) -> None:
        """Run ``undo`` once if the phase is still in flight (best effort: logged, never raised)."""
        if not self.active:
            return
        self.stop()
        try:
            self.undo()
        except Exception as exc:  # at exit, nothing may mask the error that stopped the phase
            logger.error("npu_dump_hook: cleaning up an interrupted phase failed: %s", exc)


def _undo_at_exit(ref: "weakref.ref") -> None:
    phase = ref()
    if phase is not None:
        phase.undo_now()
