"""Old import path of :mod:`npu_dump_hook.train.fingerprints` (state and batch fingerprints).

``npu_dump_hook.fingerprints`` *is* that module (the same object in ``sys.modules``), so names
imported from either path, and globals patched through either, are the same.
"""
import sys

from .train import fingerprints as _moved

__all__ = list(_moved.__all__)

sys.modules[__name__] = _moved
