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
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from ._bounded import BoundedStore
from ._written import file_identity as _identity, just_noted, still_noted
from .formats.device_format import shape_problem
from .formats.dump_file import dtype_info

__all__ = ["TensorCounts", "non_finite_counts", "note_dump_file", "DumpFileNotes", "dump_health", "forget_all",
           "MAX_NOTED", "PENDING_BYTES"]

#: Elements counted at a time: bounded memory for any tensor.
CHUNK = 1 << 20
#: Files remembered at most, the oldest forgotten first (a step's checks run right after it is
#: written; about 850 bytes a file of three tensors, some 55 MB at the bound).
MAX_NOTED = 1 << 16

#: One tensor's counts as the golden-free checks read them: (direction, slot, elements, NaN, -Inf, +Inf).
TensorCounts = Tuple[str, int, int, int, int, int]

#: (device, inode) -> (identity, counts of the file's tensors); the newest kept.
_noted = BoundedStore(MAX_NOTED)  # type: BoundedStore[Tuple[int, int], Tuple[Any, ...]]


def non_finite_counts(array: np.ndarray, finite: bool = False) -> Tuple[int, int, int, int]:
    """(elements, NaN, -Inf, +Inf) of ``array``; integer and bool arrays are finite by nature.
    ``finite``: the caller found every value finite already (:func:`_finite_ids`)."""
    if finite or array.dtype.kind not in "fc":
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


def _tensor_counts(direction: str, tensors: Sequence[Any], finite: AbstractSet[int]) -> Optional[List[TensorCounts]]:
    """The counts the reader would find for these DumpTensors, or None when not certain;
    ``finite``: the ids of arrays already found finite (:func:`_finite_ids`)."""
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
        counts.append((direction, slot) + non_finite_counts(array, id(array) in finite))  # type: ignore
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
    file it cannot vouch for: that file is simply not noted. (:class:`DumpFileNotes` of one file.)"""
    notes = DumpFileNotes()
    notes.add(path, list(inputs), list(outputs))
    notes.flush()


class DumpFileNotes(object):
    """:func:`note_dump_file` for many files, their counts taken together: :meth:`add` takes each
    file's identity right after its write (the writer's own note of it, else one lstat) and keeps
    its DumpTensors; :meth:`flush` counts them and notes every file. An emulated step's 1,000s of
    small tensors then cost one ``isfinite`` per dtype per :data:`CHUNK` elements instead of one
    numpy call per tensor; a batch that holds a non-finite value is counted tensor by tensor.
    Each fact still describes the exact file whose identity it is kept under (module doc). The
    tensors held wait for at most :data:`PENDING_BYTES` of payload (then :meth:`add` flushes),
    so the memory stays bounded; notes not flushed (an error in between) are simply not made."""

    __slots__ = ("_pending", "_nbytes")

    def __init__(self) -> None:
        self._pending = []  # type: List[Tuple[Any, Sequence[Any], Sequence[Any]]]
        self._nbytes = 0

    def add(self, path: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """The dump file just written at ``path`` from these DumpTensors (sequences, kept as they are)."""
        identity = just_noted(path) or _identity(path)  # the writer's own note of it: no second lstat
        if identity is None:
            return
        self._pending.append((identity, inputs, outputs))
        for group in (inputs, outputs):
            for tensor in group:
                self._nbytes += tensor.array.nbytes
        if self._nbytes > PENDING_BYTES:
            self.flush()

    def flush(self) -> None:
        """Count and note every file added since the last flush."""
        pending, self._pending, self._nbytes = self._pending, [], 0
        finite = _finite_ids([t.array for _identity, inputs, outputs in pending for t in inputs]
                             + [t.array for _identity, inputs, outputs in pending for t in outputs])
        for identity, inputs, outputs in pending:
            found = _tensor_counts("input", inputs, finite)
            outs = _tensor_counts("output", outputs, finite) if found is not None else None
            if outs is not None:
                _noted.put(identity[:2], (identity, tuple(found + outs)))  # type: ignore[operator]


#: Payload bytes a :class:`DumpFileNotes` holds at most before it counts and notes them.
PENDING_BYTES = 16 << 20


def _finite_ids(arrays: Sequence[np.ndarray]) -> AbstractSet[int]:
    """The ids of the floating (and complex) ``arrays`` found to hold finite values only, tested
    together: per dtype, up to :data:`CHUNK` elements raveled into one array and one
    ``isfinite(...).all()``. The arrays of a batch with a non-finite value are left out (their
    counts are then taken one by one); arrays over CHUNK elements are too (their own test is
    one pass already). The ids are valid while the caller holds the arrays."""
    finite = set()  # type: Set[int]
    batches = {}  # type: Dict[np.dtype, List[Any]]  # dtype -> [its arrays, their elements]
    for array in arrays:
        size = array.size
        if array.dtype.kind not in "fc" or size > CHUNK:
            continue
        batch = batches.get(array.dtype)
        if batch is None:
            batch = batches[array.dtype] = [[], 0]
        elif batch[1] + size > CHUNK:
            _add_if_finite(finite, batch[0])
            batch[0], batch[1] = [], 0
        batch[0].append(array)
        batch[1] += size
    for held, _elements in batches.values():
        _add_if_finite(finite, held)
    return finite


def _add_if_finite(finite: Set[int], batch: Sequence[np.ndarray]) -> None:
    if batch and np.isfinite(np.concatenate([array.reshape(-1) for array in batch])).all():
        finite.update(map(id, batch))


def dump_health(path: str) -> Optional[Tuple[TensorCounts, ...]]:
    """The counts noted for the file at ``path`` if it is still that file (module doc), else None."""
    found = still_noted(_noted, None, path)
    return None if found is None else found[1]


def forget_all() -> None:
    """Drop every noted fact (tests; a caller that wants every file read)."""
    _noted.clear()
