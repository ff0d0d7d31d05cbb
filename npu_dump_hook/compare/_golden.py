"""The golden side: msaccucmp-named ``.npy`` files indexed by msaccucmp's look-up key.

Sources (docs/reference/ascend-dump-formats.md §6):

* a golden bundle (folder or archive whose ``data/golden/`` holds the reference capture and
  its ``golden_manifest.json``, :mod:`npu_dump_hook.reference`), opened with
  :func:`npu_dump_hook.bundle.open_bundle` (of an archive only ``data/golden/`` is extracted);
* a folder of ``{op name with / and . -> _}.{output_index}.{timestamp}.npy`` files (tfdbg's,
  precision_tool's, ours); other files are skipped (counted in ``skipped``);
* the NPU bundle's own ``data/golden/`` when no golden is given (emulated runs).

The key of a file is ``{op name}.{output_index}`` (:func:`npu_dump_hook.formats.names.parse_npy_name`);
when several files share one, the latest timestamp wins, as in msaccucmp (timestamps that
are not 16 digits sort as 0); they are also indexed by position, ``{key}#{k}`` for the k-th by
timestamp (:func:`iteration_key`): the iterations of a TF 1.x loop-body tensor.

Only regular files are indexed and opened (:func:`index_npy_dir`, :func:`load_golden`): a
golden bundle's folder passed the bundle's reading rules (docs/bundle-format.md section 4) and
any symlink in it is skipped; in a plain folder a symlink is followed only to a regular file in
that folder; FIFOs, devices and sockets are skipped, each named in ``skipped`` with the reason.
"""
import mmap
import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..bundle import BUNDLE_JSON, DATA_DIR, GOLDEN_MANIFEST, is_within, looks_like_tar, open_bundle, open_regular
from .._golden_marker import golden_incomplete
from ..errors import CompareError, FormatError, NameFormatError
from ..formats.names import parse_npy_name
from ..formats.npy import NPY_PREFIX_BYTES, NpyHeader, header_cache, npy_header_size, parse_npy_header

__all__ = ["GoldenSide", "index_npy_dir", "golden_key", "iteration_key", "load_golden", "load_golden_side"]

_READ_WHOLE = 1 << 20  # smaller payloads are read, larger ones memory-mapped
_LAYOUTS = header_cache()  # parsed headers, bounded by bytes (formats.npy)


def load_golden(path: str, buffer: Optional[bytearray] = None) -> np.ndarray:
    """A golden ``.npy`` as an array: payloads up to 1 MiB are read, larger ones
    memory-mapped (read-only). C-order headers are parsed by the package's one header reader
    (:func:`~npu_dump_hook.formats.npy.parse_npy_header`, layouts cached: numpy's own reader
    evaluates every header with ``ast``, a millisecond per file); anything
    else is read by numpy from the same descriptor (:func:`_numpy_load`; never reopened by
    name). With ``buffer``, a file that fits is read into it in one call and the array is a
    view of it, valid until the buffer is reused. OSError/ValueError for bad files (a symlink or special file at ``path`` is
    not opened: OSError)."""
    with open_regular(path, buffering=0) as handle:  # a FIFO or link put there since indexing: OSError
        file_size = os.fstat(handle.fileno()).st_size
        if buffer is not None and NPY_PREFIX_BYTES <= file_size <= len(buffer):
            view = memoryview(buffer)[:file_size]
            got = 0
            while got < file_size:
                step = handle.readinto(view[got:])
                if not step:
                    break
                got += step
            layout = _saved_layout(bytes(view[:NPY_PREFIX_BYTES]), lambda size: bytes(view[:size]))
            if layout is not None and got >= layout.offset + layout.nbytes:
                return np.frombuffer(buffer, dtype=layout.dtype, count=layout.count,
                                     offset=layout.offset).reshape(layout.shape)
            return _numpy_load(handle, file_size)

        prefix = handle.read(NPY_PREFIX_BYTES)
        layout = _saved_layout(prefix, lambda size: prefix[:size] if size <= len(prefix)
                               else prefix + handle.read(size - len(prefix)))
        if layout is None or file_size < layout.offset + layout.nbytes:
            return _numpy_load(handle, file_size)  # numpy names what is wrong
        if layout.nbytes <= _READ_WHOLE:
            handle.seek(layout.offset)
            return np.frombuffer(handle.read(layout.nbytes), dtype=layout.dtype,
                                 count=layout.count).reshape(layout.shape)
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        return np.frombuffer(memoryview(mapped), dtype=layout.dtype, count=layout.count,
                             offset=layout.offset).reshape(layout.shape)


def _numpy_load(handle: Any, file_size: int) -> np.ndarray:
    """numpy's reading of the ``.npy`` open as ``handle`` (any header numpy accepts, never a
    pickle), from that descriptor, never by name: payloads up to 1 MiB (and version 3 headers)
    read, larger ones memory-mapped read-only, as ``np.load(mmap_mode="r")`` would."""
    handle.seek(0)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if file_size <= _READ_WHOLE:
        return np.load(handle, allow_pickle=False)
    version = np.lib.format.read_magic(handle)
    if version not in readers:
        handle.seek(0)
        return np.load(handle, allow_pickle=False)
    shape, fortran_order, dtype = readers[version](handle)
    if dtype.hasobject:
        raise ValueError("Object arrays cannot be loaded when allow_pickle=False")
    return np.memmap(handle, dtype=dtype, mode="r", shape=shape, order="F" if fortran_order else "C",
                     offset=handle.tell())


def _saved_layout(prefix: bytes, head: Any) -> Optional[NpyHeader]:
    """The header of a C-order .npy (:func:`~npu_dump_hook.formats.npy.parse_npy_header`, layouts
    cached); None for anything else, which numpy reads. ``head(size)``: the file's first ``size`` bytes.
    No cap on the header's size: what is read of it is bounded by the file (numpy >= 1.24 refuses
    a header over 10,000 bytes, a golden file with a padded one was compared before and still is)."""
    try:
        layout = parse_npy_header(head(npy_header_size(prefix, limit=None)), limit=None)
    except FormatError:
        return None
    return None if layout.fortran_order else layout


def golden_key(op_name: str, output_index: int) -> str:
    """msaccucmp's look-up key of a TF tensor: ``/`` and ``.`` in the name become ``_``."""
    return "{}.{}".format(op_name.replace("/", "_").replace(".", "_"), output_index)


class GoldenSide(object):
    """``files``: key -> path of the .npy that wins; ``kind``: "bundle" | "npy_dir" | "embedded";
    ``owner``: the opened golden bundle (its archive extraction), closed by :meth:`close`."""

    def __init__(self, path: str, kind: str, folder: str, bundle_json: Optional[Dict[str, Any]] = None,
                 owner: Any = None, in_tree_links: bool = True) -> None:
        self.path = path
        self.kind = kind
        self.folder = folder
        self.bundle_json = bundle_json
        self.owner = owner
        self.files, self.skipped = index_npy_dir(folder, in_tree_links)
        if not self.files:
            raise CompareError("golden {}: {} holds no {{op}}.{{output_index}}.{{timestamp}}.npy file{}".format(
                path, folder, " ({} other file(s))".format(len(self.skipped)) if self.skipped else ""), path)

    def describe(self) -> Dict[str, Any]:
        return {"path": self.path, "kind": self.kind}

    def close(self) -> None:
        owner, self.owner = self.owner, None
        if owner is not None:
            owner.close()


def load_golden_side(golden: Optional[str], npu: Any) -> GoldenSide:
    """The golden side for ``golden`` (a golden bundle folder/archive, a folder of .npy files,
    or None: the NPU side's own ``data/golden``); CompareError naming what is missing."""
    if golden is None:
        if npu.golden_dir is None:
            raise CompareError("NPU {} carries no data/golden folder: give GOLDEN (a golden bundle or a folder "
                               "of .npy files)".format(npu.path), npu.path)
        return GoldenSide(npu.path, "embedded", npu.golden_dir, npu.bundle_json, in_tree_links=False)
    if not os.path.exists(golden):
        raise CompareError("golden {}: no such file or folder".format(golden), golden)
    if os.path.isdir(golden) and not os.path.isfile(os.path.join(golden, DATA_DIR, BUNDLE_JSON)):
        _refuse_incomplete(golden, golden)
        return GoldenSide(golden, "npy_dir", golden)
    if not (os.path.isdir(golden) or (os.path.isfile(golden) and looks_like_tar(golden))):
        raise CompareError("golden {}: not a bundle (folder or .tar/.tar.gz) nor a folder of .npy files".format(
            golden), golden)
    view = open_bundle(golden, parts=("golden",))
    try:
        folder = view.golden_dir()
        if folder is None:
            raise CompareError("golden {}: the bundle has no data/golden folder".format(golden), golden)
        _refuse_incomplete(golden, folder)
        return GoldenSide(golden, "bundle", folder, view.doc, owner=view, in_tree_links=False)
    except BaseException:
        view.close()
        raise


def iteration_key(key: str, iteration: int) -> str:
    """The index key of the ``iteration``-th file (by timestamp) of ``key``: a TF 1.x loop-body
    tensor has one golden file per iteration (docs/golden-capture.md), all under one msaccucmp key."""
    return "{}#{}".format(key, iteration)


def _refuse_incomplete(golden: str, folder: str) -> None:
    """CompareError when ``folder`` is a golden capture that began and never completed (its
    begin marker is there: the capturing process was killed while writing it)."""
    why = golden_incomplete(folder)
    if why is not None:
        raise CompareError("golden {}: {}; nothing compared (re-run the golden capture)".format(golden, why), golden)


def _sort_stamp(timestamp: int) -> int:
    return timestamp if len(str(timestamp)) == 16 else 0


def index_npy_dir(folder: str, in_tree_links: bool = True) -> Tuple[Dict[str, str], List[str]]:
    """(key -> path, names skipped) for the ``.npy`` files directly in ``folder``.

    Only regular files are indexed: a symlink is followed only with ``in_tree_links`` and when it
    leads to a regular file in ``folder`` (its target is indexed; in a bundle no link is), and
    symlinks, FIFOs, devices and sockets are skipped with the reason (``"name (why)"``), never
    opened."""
    if not os.path.isdir(folder):
        raise CompareError("golden {}: not a folder".format(folder), folder)
    best = {}  # type: Dict[str, Tuple[int, str, str]]
    every = {}  # type: Dict[str, List[Tuple[int, str, str]]]
    skipped = []  # type: List[str]
    real_folder = os.path.realpath(folder)
    with os.scandir(folder) as entries:
        for entry in entries:
            path, why = _regular_entry(entry, real_folder, in_tree_links)
            if path is None:
                if why:
                    skipped.append("{} ({}; not read)".format(entry.name, why))
                continue
            try:
                parsed = parse_npy_name(entry.name)
            except NameFormatError:
                if entry.name != GOLDEN_MANIFEST:
                    skipped.append(entry.name)
                continue
            stamp = _sort_stamp(parsed.timestamp)
            held = best.get(parsed.key)
            if held is None or (stamp, entry.name) > (held[0], held[2]):
                best[parsed.key] = (stamp, path, entry.name)
            every.setdefault(parsed.key, []).append((stamp, entry.name, path))
    index = {key: path for key, (_, path, _name) in best.items()}
    for key, files in every.items():  # several files of one key: also by position (loop iterations)
        if len(files) > 1:
            for iteration, (_stamp, _name, path) in enumerate(sorted(files)):
                index[iteration_key(key, iteration)] = path
    return index, sorted(skipped)


def _regular_entry(entry: "os.DirEntry", real_folder: str, in_tree_links: bool) -> Tuple[Optional[str], str]:
    """(the path to read, "") for a regular file or a followed in-folder link; (None, why) for a
    link or special file that is not read; (None, "") for a folder."""
    if entry.is_symlink():
        target = os.path.realpath(entry.path)
        if in_tree_links and is_within(target, real_folder) and os.path.isfile(target) \
                and not os.path.islink(target):
            return target, ""
        return None, "a symlink{}".format(" out of the folder" if in_tree_links else " (none is read in a bundle)")
    if entry.is_dir(follow_symlinks=False):
        return None, ""
    if entry.is_file(follow_symlinks=False):
        return entry.path, ""
    return None, "a FIFO, device or socket"
