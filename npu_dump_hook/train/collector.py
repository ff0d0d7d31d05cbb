"""Python's cyclic garbage collector paused for the window of one captured step.

Why: a TensorFlow graph is hundreds of thousands of Python objects, all made while the graph was
built, just before the first step. Python runs a full (generation 2) collection once the objects
that survived younger collections exceed a quarter of those already in the oldest generation;
right after graph building that threshold is nearly reached, so whichever code allocates a few
thousand objects next pays for walking every graph object (0.1-0.3 s on the sample CNN). A
capture allocates that many (its fetched arrays, file records, the manifest) and would pay the
graph's collection inside the captured step, at random.

:class:`CollectorPause` disables the collector for the captured step only (from its ``before_run``
to the end of its ``after_run``; used by :class:`~npu_dump_hook.train.golden_capture.ReferenceCapture`
and by the hook's captured steps, golden or emulated, :class:`~npu_dump_hook.train.dump_run.DumpRun`),
and for the hook's ``end()`` (the bundle: one record per file), and then restores the caller's
state: enabled again only if it was enabled when paused (a caller that runs with ``gc.disable()``
keeps it disabled). Nothing is
lost: reference counting still frees every object that is not in a cycle, and the collection that
was due runs at the first allocation threshold after :meth:`CollectorPause.resume`, in the code
that runs next (the next step), as it would have without the capture. A step that raises before
``after_run`` leaves the collector paused until :meth:`CollectorPause.resume` is called (the
owner's next ``before_run`` or ``end``).
"""
import contextlib
import gc
import logging
from typing import Iterator

__all__ = ["CollectorPause", "collector_paused"]

logger = logging.getLogger(__name__)


class CollectorPause(object):
    """``pause()`` then ``resume()``: the collector off in between, the caller's state after."""

    def __init__(self) -> None:
        self.paused = False

    def pause(self) -> None:
        """Disable the collector if it is enabled (and remember that this object did it)."""
        if not self.paused and gc.isenabled():
            gc.disable()
            self.paused = True

    def resume(self) -> None:
        """Enable the collector again if :meth:`pause` disabled it; otherwise nothing."""
        if self.paused:
            self.paused = False
            gc.enable()
            logger.debug("capture: garbage collector enabled again after the captured step")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector paused for the ``with`` block (a :class:`CollectorPause`), however it ends."""
    pause = CollectorPause()
    pause.pause()
    try:
        yield
    finally:
        pause.resume()
