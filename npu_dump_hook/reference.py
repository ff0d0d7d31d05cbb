"""Old import path of :mod:`npu_dump_hook.train.golden_capture` (the reference/golden capture and
its manifest: ``ReferenceCapture``, ``golden_report``, ``MANIFEST_NAME``).

``npu_dump_hook.reference`` *is* that module (the same object in ``sys.modules``), so names
imported from either path, and globals patched through either, are the same.
"""
import sys

from .train import golden_capture as _moved

__all__ = list(_moved.__all__)

sys.modules[__name__] = _moved
