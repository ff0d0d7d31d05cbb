"""Old import path of :mod:`npu_dump_hook.train.capture` (the tensor capture engine).

``npu_dump_hook._capture`` *is* that module (the same object in ``sys.modules``). Its parts that
used to sit beside it (``_capture_plan``, ``_capture_reads``, ``_capture_results``) are private
to :mod:`npu_dump_hook.train` now; what the engine exports is importable from here.
"""
import sys

from .train import capture as _moved

__all__ = list(_moved.__all__)

sys.modules[__name__] = _moved
