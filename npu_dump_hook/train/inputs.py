"""The captured step's inputs, kept for the golden run's replay (bundle part ``data/inputs/``).

Contract (the NPU run; a golden run keeps none)::

    keeper = StepInputs(folder, max_input_bytes)
    keeper.keep(plan, values, entries, step)   # after the captured step: the batch values it returned
    keeper.section    # bundle.json ``inputs`` (None until kept), docs/bundle-format.md §2.4
    keeper.warnings   # what the bundle's ``warnings`` must carry (cap exceeded, value not storable)

The values are the step's own: the batch tensors (:func:`~npu_dump_hook.train.fingerprints.batch_tensors_of`:
every fed value, every iterator, queue-dequeue and py_func output the step consumed) are added to
the captured step's fetches, so nothing runs twice and no iterator advances. Each value is written
as ``{folder}/{NNNN}_{name}.npy`` (NumPy format, no pickles: a string tensor as one uint8 array,
each element its 8-byte little-endian length then its bytes, the bytes its sha256 covers). The manifest is the
``fingerprints.batch`` entry of each tensor plus its ``file``; when the values add up to more than
``max_input_bytes`` (or one cannot be stored) none is written: ``kept`` is false, ``reason`` says
why, and a warning says the golden run cannot replay them.
"""
import logging
import os
import re
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple  # noqa: F401 (type comments)

import numpy as np

from .guard import HOOK_LOGGER

__all__ = ["StepInputs", "storable", "unpack_strings", "input_file_name"]

logger = logging.getLogger(HOOK_LOGGER)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
#: The bundle part the files go to (bundle.json ``inputs.tensors[].file`` starts with it).
PART = "inputs"


def input_file_name(number: int, name: str) -> str:
    """``NNNN_<tensor name, letters, digits, _ . - only>.npy`` (unique by its number)."""
    return "{:04d}_{}.npy".format(number, _UNSAFE.sub("_", name)[:80].strip("._") or "tensor")


def storable(value: Any) -> Tuple[Optional[np.ndarray], Optional[str]]:
    """``(array as stored, None)`` or ``(None, why it cannot be stored as .npy without pickles)``.
    A string tensor is stored as one uint8 array: each element its length in 8 little-endian
    bytes, then its bytes (the bytes its sha256 is taken over; :func:`unpack_strings` reverses it)."""
    array = np.array(value, dtype=object) if isinstance(value, bytes) else np.asarray(value)
    if array.dtype.kind in ("O", "S"):
        items = array.reshape(-1).tolist()
        if not all(isinstance(item, bytes) for item in items):
            return None, "holds Python objects that are not bytes"
        packed = b"".join(struct.pack("<Q", len(item)) + item for item in items)
        return np.frombuffer(packed, dtype=np.uint8), None
    if array.dtype.kind in ("U", "V"):
        return None, "dtype {} is not a tensor dtype".format(array.dtype)
    return array, None


def unpack_strings(packed: Any, shape: Sequence[int]) -> np.ndarray:
    """The object array of bytes :func:`storable` packed (ValueError when the bytes do not parse)."""
    data = np.asarray(packed, dtype=np.uint8).tobytes()
    items, offset = [], 0  # type: List[bytes], int
    while offset < len(data):
        if offset + 8 > len(data):
            raise ValueError("truncated string length at byte {}".format(offset))
        (size,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        if offset + size > len(data):
            raise ValueError("string of {} bytes runs past the end".format(size))
        items.append(data[offset:offset + size])
        offset += size
    result = np.empty(len(items), dtype=object)
    result[:] = items
    return result.reshape([int(d) for d in shape])


def _nbytes(value: Any) -> int:
    array = np.array(value, dtype=object) if isinstance(value, bytes) else np.asarray(value)
    if array.dtype.kind in ("O", "S"):
        return sum(8 + len(item) if isinstance(item, bytes) else 0 for item in array.reshape(-1).tolist())
    return int(array.nbytes)


class StepInputs(object):
    """Keeps one captured step's input values under a size cap (see the module doc)."""

    def __init__(self, folder: str, max_input_bytes: int) -> None:
        self.folder = folder
        self.max_input_bytes = int(max_input_bytes)
        self.section = None  # type: Optional[Dict[str, Any]]
        self.warnings = []  # type: List[str]

    def keep(self, plan: Sequence[Tuple[Any, str]], values: Sequence[Any], entries: Sequence[Dict[str, Any]],
             step: int) -> None:
        """Write the values (``plan``: ``(tensor, source)``; ``entries``: their fingerprint entries)."""
        total = sum(_nbytes(value) for value in values)
        arrays, reason = [], None  # type: List[Any], Optional[str]
        if total > self.max_input_bytes:
            reason = "the step's {} input value(s) take {} bytes, above max_input_bytes={}".format(
                len(values), total, self.max_input_bytes)
        else:
            for (tensor, _source), value in zip(plan, values):
                array, why = storable(value)
                if why is not None:
                    reason = "input {} cannot be stored: {}".format(tensor.name, why)
                    break
                arrays.append(array)
        files = [None] * len(entries)  # type: List[Optional[str]]
        if reason is None and arrays:
            files = self._write(entries, arrays)
        tensors = [dict(entry, file=path) for entry, path in zip(entries, files)]
        self.section = {"step": step, "max_input_bytes": self.max_input_bytes, "total_bytes": total,
                        "kept": reason is None, "reason": reason, "tensors": tensors}
        if reason is not None:
            message = ("inputs of step {} not kept ({}; only their sha256 is): a golden run cannot replay them and "
                       "must make the same batch itself (raise max_input_bytes / --max-input-bytes to keep "
                       "them)".format(step, reason))
            logger.warning("NpuDumpHook: %s", message)
            self.warnings.append(message)
        else:
            logger.info("NpuDumpHook: kept %d input value(s) of step %d (%d bytes) for the golden run's replay",
                        len(tensors), step, total)

    def _write(self, entries: Sequence[Dict[str, Any]], arrays: Sequence[Any]) -> List[Optional[str]]:
        os.makedirs(self.folder, exist_ok=True)
        files = []  # type: List[Optional[str]]
        for number, (entry, array) in enumerate(zip(entries, arrays)):
            name = input_file_name(number, entry["name"])
            with open(os.path.join(self.folder, name), "wb") as handle:
                np.save(handle, array, allow_pickle=False)
            files.append(PART + "/" + name)
        return files
