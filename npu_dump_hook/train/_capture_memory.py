"""The captured step's tensors kept in memory for the emulated NPU, within a byte budget.

The capture writes each fetched tensor's ``.npy`` from an array it holds; the emulated NPU then
needs every one of them again for the dump files of the same step. Reading ~2,000 small files
back (open, header parse, read each) was about a tenth of the emulator's CPU for the step (issue 21),
so, when the step is to be emulated (``TensorCapture.in_memory_bytes``, which
:mod:`npu_dump_hook.train.dump_run` sets for such a step; 0, the default, keeps none),
:func:`hold_written` attaches a copy of each written array to its
:class:`~._capture_results.CapturedTensor` while the step's total stays within
:data:`IN_MEMORY_BYTES`; beyond it, and for files written any other way (dump files converted in
place, snapshots), the emulator reads the file as before. The emulated backend drops the copies
when the step's dump is written (:meth:`~._capture_results.CaptureResult.release_arrays`).

The copy is taken, not the written array itself: a fetched value may share its buffer with
TensorFlow, and what the emulator gets must stay exactly what the file holds.
"""
import logging
from typing import Any, List, Tuple

import numpy as np

from ._capture_results import CapturedTensor

__all__ = ["IN_MEMORY_BYTES", "hold_written"]

logger = logging.getLogger(__name__)

#: Bytes of tensor data one captured step keeps in memory for the emulated NPU (the rest is read
#: back from the files). Small next to a step's own working set; a small-op RNN step needs ~1 MiB.
IN_MEMORY_BYTES = 64 * 1024 * 1024


def hold_written(tensors: List[CapturedTensor], jobs: List[Tuple[Any, str]], budget: int) -> int:
    """Attach to each tensor of ``tensors`` whose ``.npy`` was just written from an in-memory array
    (a ``(source, target path)`` of ``jobs``) a read-only copy of that array, in order, while the
    bytes held stay within ``budget``; returns the bytes held."""
    arrays = {target: source for source, target in jobs
              if isinstance(source, np.ndarray) and not source.dtype.hasobject}
    held = 0
    for tensor in tensors:
        source = arrays.get(tensor.path)
        if source is None or tensor.in_memory is not None:
            continue
        if held + source.nbytes > budget:
            logger.debug("capture: in-memory budget of %d bytes reached; the emulator reads the rest", budget)
            break
        copy = source.copy()  # C order (the default), as the file holds it
        copy.setflags(write=False)
        tensor.in_memory = copy
        held += source.nbytes
    return held
