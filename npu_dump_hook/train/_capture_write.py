"""The writing half of :meth:`npu_dump_hook.train.capture.TensorCapture.finish`: what one step
assembles (:class:`StepFiles`) and the writes of its ``.npy`` files (:func:`write_jobs`).

A job is ``(source, target path)``: an in-memory array (the fetch path) written by
:func:`~npu_dump_hook.formats.npy.write_npy`, or a ``DebugIdentity`` dump file (the stream path)
converted in place by :func:`~npu_dump_hook.formats.npy.debug_event_to_npy`.
"""
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Tuple

import numpy as np

from ..formats.npy import debug_event_to_npy, write_npy
from ._capture_results import CapturedTensor, SkippedTensor

__all__ = ["StepFiles", "write_jobs", "CONVERT_THREADS"]

#: Threads converting dump files (their system calls release the GIL).
CONVERT_THREADS = 4


class StepFiles(object):
    """What ``finish`` assembles for one step: the tensors captured, those skipped, the writes to do."""

    def __init__(self, target_dir: str, golden: bool) -> None:
        self.target_dir = target_dir
        #: ``target_dir`` and a separator: a file's path is this plus its name (one string
        #: concatenation per file instead of an ``os.path.join``, the same path).
        self.prefix = os.path.join(target_dir, "")
        self.golden = golden
        self.tensors = []  # type: List[CapturedTensor]
        self.skipped = []  # type: List[SkippedTensor]
        self.jobs = []  # type: List[Tuple[Any, str]]


def write_jobs(tensors: List[CapturedTensor], jobs: List[Tuple[Any, str]]) -> None:
    """Write each job's ``.npy`` and fill in its tensor's dtype and shape (``tensors[i]`` is ``jobs[i]``'s)."""
    if all(isinstance(source, np.ndarray) for source, _ in jobs):
        # In-memory arrays: a few system calls per file; threads only add lock hand-offs here.
        for tensor, (array, target) in zip(tensors, jobs):
            tensor.dtype, tensor.shape = write_npy(array, target)
        return
    # Dump files (open, header parse, rewrite, rename, unlink) release the GIL: a few threads
    # overlap that work; each converts one tensor at a time, so memory stays bounded.
    with ThreadPoolExecutor(max_workers=CONVERT_THREADS) as pool:
        for tensor, (dtype, shape) in zip(tensors, pool.map(convert, jobs)):
            tensor.dtype, tensor.shape = dtype, shape


def convert(job: Tuple[Any, str]) -> Tuple[str, Tuple[int, ...]]:
    """One job of a step that has dump files too: ``(dtype name, shape)`` of the ``.npy`` written."""
    source, target = job
    if isinstance(source, np.ndarray):
        return write_npy(source, target)
    return debug_event_to_npy(source, target, move=True)
