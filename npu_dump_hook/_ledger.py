"""What this process knows about files it just wrote, so it need not read them back.

The emulated NPU writes a step's dump files (1,000s of small files for an unrolled RNN) and,
moments later in the same process, the golden-free checks at the hook's end() re-opened every
one of them (through the bundle's hard links) to count NaN/Inf: the arrays were in memory when
the file was written. :func:`note_dump_file` records those counts when the file is written;
:func:`dump_health` hands them back for a path that is still the same file.

Honesty rule: a fact is handed back only for the very file it was taken from, unchanged as far
as one ``lstat`` can tell: same device and inode (a hard link of it, as the bundle writer
places emulated dump files, is the same file), same size, same modification time to the
nanosecond, same file name, a regular file. Anything else (a copy, a rewrite, a symlink, a file
never noted) answers None and the caller reads the file as before. A rewrite that keeps the
size inside one tick of the file system's clock would go unseen; the bundle's sha256 manifest,
computed from the bytes whenever the bundle is written, still pins the bytes for ``verify``.

A fact is recorded only where it is certainly what the reader would count: every tensor's
in-memory array has the dtype the reader views the payload as (so the values, and so the
counts, are the same), and its header shape is one the reader accepts; otherwise the file is
not noted at all. TF-free; numpy only.
"""
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ._bounded import BoundedStore
from ._written import file_identity as _identity, just_noted, still_noted
from .formats.device_format import shape_problem
from .formats.dump_file import dtype_info

__all__ = ["TensorCounts", "non_finite_counts", "note_dump_file", "dump_health", "forget_all", "MAX_NOTED"]

#: Elements counted at a time: bounded memory for any tensor.
CHUNK = 1 << 20
#: Files remembered at most, the oldest forgotten first (a step's checks run right after it is
#: written; about 850 bytes a file of three tensors, some 55 MB at the bound).
MAX_NOTED = 1 << 16

#: One tensor's counts as the golden-free checks read them: (direction, slot, elements, NaN, -Inf, +Inf).
TensorCounts = Tuple[str, int, int, int, int, int]

#: (device, inode) -> (identity, counts of the file's tensors); the newest kept.
_noted = BoundedStore(MAX_NOTED)  # type: BoundedStore[Tuple[int, int], Tuple[Any, ...]]


def non_finite_counts(array: np.ndarray) -> Tuple[int, int, int, int]:
    """(elements, NaN, -Inf, +Inf) of ``array``; integer and bool arrays are finite by nature."""
    if array.dtype.kind not in "fc":
        return int(array.size), 0, 0, 0
    if array.size <= CHUNK and np.isfinite(array).all():  # the common tensor: one test, no chunking
        return int(array.size), 0, 0, 0
    flat = array.reshape(-1)
    nan = neg = pos = 0
    for start in range(0, flat.size, CHUNK):
        chunk = flat[start:start + CHUNK]
        if np.isfinite(chunk).all():
            continue
        nan += int(np.count_nonzero(np.isnan(chunk)))
        neg += int(np.count_nonzero(np.isneginf(chunk)))
        pos += int(np.count_nonzero(np.isposinf(chunk)))
    return int(flat.size), nan, neg, pos


def _tensor_counts(direction: str, tensors: Sequence[Any]) -> Optional[List[TensorCounts]]:
    """The counts the reader would find for these DumpTensors, or None when not certain."""
    counts = []  # type: List[TensorCounts]
    for slot, tensor in enumerate(tensors):
        storage, _bits, logical = dtype_info(tensor.data_type)
        if logical is None:
            continue  # the reader skips a type numpy cannot hold
        array = tensor.array
        dtype = array.dtype  # (numpy's own dtype object for a plain array: the same one, no comparison)
        if dtype is not logical and dtype != logical and dtype.newbyteorder("=") != logical.newbyteorder("="):
            return None
        if tensor.shape != array.shape and not _shape_holds(tensor.shape, array, logical):
            return None  # (the array's own shape, with its dtype, numpy holds already: no check)
        counts.append((direction, slot) + non_finite_counts(array))  # type: ignore
    return counts


def _shape_holds(shape: Sequence[int], array: np.ndarray, logical: np.dtype) -> bool:
    """A header ``shape`` (not the array's own) that the reader accepts and that counts ``array``'s elements."""
    size = 1
    for dim in shape:
        size *= dim
    return array.size == size and shape_problem(shape, logical.itemsize) is None


def note_dump_file(path: str, inputs: Iterable[Any], outputs: Iterable[Any]) -> None:
    """Record the NaN/Inf counts of the dump file just written at ``path`` from the DumpTensors
    it was written from (inputs, then outputs, as the reader walks them). Never raises for a
    file it cannot vouch for: that file is simply not noted."""
    found = _tensor_counts("input", list(inputs))
    if found is None:
        return
    outs = _tensor_counts("output", list(outputs))
    identity = just_noted(path) or _identity(path)  # the writer's own note of it: no second lstat
    if outs is None or identity is None:
        return
    _noted.put(identity[:2], (identity, tuple(found + outs)))


def dump_health(path: str) -> Optional[Tuple[TensorCounts, ...]]:
    """The counts noted for the file at ``path`` if it is still that file (module doc), else None."""
    found = still_noted(_noted, None, path)
    return None if found is None else found[1]


def forget_all() -> None:
    """Drop every noted fact (tests; a caller that wants every file read)."""
    _noted.clear()
