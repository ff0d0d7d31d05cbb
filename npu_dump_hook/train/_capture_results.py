"""What one captured step produced: the tensors written, those skipped (and why), the ops it executed.

Plain records (no TensorFlow); :class:`npu_dump_hook.train.capture.TensorCapture` fills them and
re-exports them, the reference writer and the emulated backend read them.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

__all__ = ["CapturedTensor", "SkippedTensor", "ExecutedOp", "CaptureResult"]


@dataclass
class CapturedTensor:
    """One output tensor written to ``path`` (an ``.npy`` file)."""

    op_name: str
    op_type: str
    output_index: int
    dtype: str
    shape: Tuple[int, ...]
    path: str
    order: int
    timestamp_us: int
    #: Inside a TF 1.x ``tf.while_loop`` body: the loop iteration (0, 1, ...) this value is of; else None.
    iteration: Optional[int] = None
    #: A read-only copy of exactly what ``path`` holds (same dtype, shape, bytes), kept by the capture
    #: within :data:`._capture_memory.IN_MEMORY_BYTES` so the emulated NPU need not read the file
    #: back; None: read ``path``. Released by :meth:`CaptureResult.release_arrays`.
    in_memory: Optional[np.ndarray] = field(default=None, repr=False, compare=False)

    @property
    def tensor_name(self) -> str:
        return "{}:{}".format(self.op_name, self.output_index)


@dataclass
class SkippedTensor:
    """An output tensor of an executed op that has no file, and why."""

    tensor_name: str
    op_type: str
    reason: str


@dataclass
class ExecutedOp:
    """An op the captured step executed. Shapes are static: -1 for an unknown dim, None for unknown rank."""

    name: str
    type: str
    inputs: List[str]
    control_inputs: List[str]
    order: int
    output_dtypes: List[str]
    output_shapes: List[Optional[Tuple[int, ...]]]


@dataclass
class CaptureResult:
    """What one captured step produced; ``tensors`` are in ``order``."""

    tensors: List[CapturedTensor]
    skipped: List[SkippedTensor]
    executed_ops: List[ExecutedOp]
    #: In-place variable updates the step executed: ``{op name: [variable input tensor names]}``. The
    #: op's output ``k`` in ``tensors`` (``"op:k"``) is the value of the ``k``-th of those variables
    #: after the step; each input tensor (a ``VariableV2`` output or a ``VarHandleOp`` handle) is
    #: captured as the variable's value before the step.
    updates: Dict[str, List[str]] = field(default_factory=dict)
    _by_name: Optional[Dict[str, CapturedTensor]] = field(default=None, repr=False, compare=False)
    _iterations: Optional[Dict[str, List[CapturedTensor]]] = field(default=None, repr=False, compare=False)

    def release_arrays(self) -> None:
        """Drop the in-memory copies of the written tensors (the files stay): the step's emulation is done."""
        for tensor in self.tensors:
            tensor.in_memory = None

    @property
    def by_name(self) -> Dict[str, CapturedTensor]:
        """``{"op:index": CapturedTensor}`` of the tensors with one value in the step (loop-body
        tensors, one value per iteration, are in :attr:`by_iteration`)."""
        if self._by_name is None:
            self._by_name = {t.tensor_name: t for t in self.tensors if t.iteration is None}
        return self._by_name

    @property
    def by_iteration(self) -> Dict[str, List[CapturedTensor]]:
        """``{"op:index": [iteration 0, 1, ...]}`` of the TF 1.x loop-body tensors."""
        if self._iterations is None:
            found = {}  # type: Dict[str, List[CapturedTensor]]
            for tensor in self.tensors:
                if tensor.iteration is not None:
                    found.setdefault(tensor.tensor_name, []).append(tensor)
            for values in found.values():
                values.sort(key=lambda t: t.iteration)
            self._iterations = found
        return self._iterations

    def array(self, tensor_name: str) -> np.ndarray:
        """The captured value of ``tensor_name`` (memory-mapped, read-only)."""
        captured = self.by_name[tensor_name]
        if int(np.prod(captured.shape, dtype=np.int64)) == 0:
            return np.load(captured.path)  # numpy cannot memory-map an empty array
        return np.load(captured.path, mmap_mode="r")
