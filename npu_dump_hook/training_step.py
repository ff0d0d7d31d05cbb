"""Old import path of :mod:`npu_dump_hook.train.training_step` (which runs are training steps).

``npu_dump_hook.training_step`` *is* that module (the same object in ``sys.modules``), so names
imported from either path, and globals patched through either, are the same.
"""
import sys

from .train import training_step as _moved

__all__ = list(_moved.__all__)

sys.modules[__name__] = _moved
