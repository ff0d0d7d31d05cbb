"""The objects of the script's process before the hook, kept out of the cyclic collector's walks.

Why: the runner makes the hook when the script's first training session is made, right after
TensorFlow's import and the graph's building: hundreds of thousands of long-lived Python objects.
Python runs a full (generation 2) collection whenever the objects that survived younger
collections exceed a quarter of those in the oldest generation, and each such collection walks
all of them (~0.1 s on a 2,000-op graph). What the runner adds to the process (the package's
import, the hook's plans, the capture, the bundle's records) allocates enough to trigger one or
two more of those than the plain script pays.

:class:`HeapFreeze` moves the objects alive when the hook is made into Python's permanent
generation (``gc.freeze``) so that the collections that follow walk only what was made after,
and gives them back to the oldest generation (``gc.unfreeze``) as soon as the hook's ``end()``
has written the bundle (so the training that goes on after the dumped step collects as without the
runner: a graph the script drops later is freed at once), else when the script has ended
(:meth:`~npu_dump_hook.runner._inject.Injection.finish`), or at interpreter exit whatever ended it
(an exception, ``sys.exit`` in the script: an ``atexit`` callback, before the interpreter's
finalization, whose own collection thus walks every object as without the runner). Nothing
is lost: reference counting still frees every object that is not in a cycle, and a cycle that was
already garbage when frozen is collected by the first full collection after the thaw (at the
latest the one of the interpreter's exit), as it would have been without the runner. A process
whose collector is disabled, or that froze objects itself, is left as it is.

:func:`release_after_bundle` drops, once the bundle is written, what the process would otherwise
keep to its end only because nothing forgets it: the emulator's Build graph (tens of thousands of
node and value objects) and the write-time notes of the files this process wrote (sha256, NaN/Inf
counts, the Build graph's JSON). Each full collection left -- the interpreter's finalization runs
several over the whole heap -- then walks ~44,000 fewer objects on the 20-step RNN (224,073 -> 180,346).
Those are caches: what needs them again (a later run's estimate, a reader of a file) computes it
again, with the same result.
"""
import atexit
import gc
import sys
from typing import Any

__all__ = ["HeapFreeze", "release_after_bundle"]


class HeapFreeze(object):
    """``freeze()`` then ``thaw()``: the objects alive at the freeze out of the collector's walks in between."""

    def __init__(self) -> None:
        self.frozen = False
        self._thaw_at_exit = False

    def freeze(self) -> None:
        """Freeze the heap once, unless the collector is off or the process froze objects itself."""
        if self.frozen or not gc.isenabled() or gc.get_freeze_count():
            return
        gc.collect(1)  # the young generations' garbage (a few ms) freed now, not kept frozen
        gc.freeze()
        self.frozen = True
        if not self._thaw_at_exit:
            self._thaw_at_exit = True
            atexit.register(self.thaw)

    def thaw(self) -> None:
        """Give the frozen objects back to the collector if :meth:`freeze` froze them; else nothing."""
        if self.frozen:
            self.frozen = False
            gc.unfreeze()


def release_after_bundle(hook: Any) -> None:
    """Forget the caches that only served writing ``hook``'s bundle (module doc)."""
    shared = getattr(hook.backend, "shared_build", None)  # the emulator's Build graph (module emulator.npu_graph)
    if shared is not None:
        shared.forget()
    for module, forget in _NOTES:
        loaded = sys.modules.get(module)  # one never imported noted nothing (and is not imported for this)
        if loaded is not None:
            getattr(loaded, forget)()


#: (module, its function that forgets its notes): the write-time notes of the files this process wrote.
_NOTES = (("npu_dump_hook._written", "forget_all"), ("npu_dump_hook._ledger", "forget_all"),
          ("npu_dump_hook.formats.ge_handover", "forget_graphs"),
          ("npu_dump_hook.formats.ge_text", "forget_entry_texts"))
