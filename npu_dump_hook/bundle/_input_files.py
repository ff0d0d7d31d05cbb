"""``verify``'s cross-check of ``data/inputs/*.npy`` against bundle.json's ``inputs`` manifest.

Each kept input (``inputs.tensors[i]`` with a ``file``) must be a ``.npy`` file whose header
says the manifest's dtype and shape (a string tensor: one uint8 vector, see
:mod:`npu_dump_hook.train.inputs`), whose size is exactly that header plus those values, and
whose values hash to the manifest's ``sha256`` (the bytes :func:`~npu_dump_hook.train.fingerprints.array_digest`
covers). A bundle whose BagIt manifests were rewritten after its values were changed is caught
here, before a golden run feeds them.

Inert: the header is read by the package's one ``.npy`` header reader
(:func:`~npu_dump_hook.formats.npy.read_npy_header`: size-capped, a regular expression or
``ast.literal_eval``, never pickle, object dtypes refused), then checked here the stricter way
(no void or zero-size dtype); the values are only streamed through sha256 in chunks, never loaded
as an array. A Fortran-order or big-endian file (a value the script fed that way) is checked by
header and size only: its hash covers the C-order little-endian bytes, which would need the array
in memory.
"""
import hashlib
from typing import Any, List, Mapping, Optional, Tuple

from ..errors import FormatError, UnsafePathError
from ..formats.npy import MAX_NPY_HEADER_BYTES, NpyHeader, read_npy_header
from . import _fs, _rules
from ._bagit import Problem

__all__ = ["input_file_problems", "MAX_NPY_HEADER_BYTES"]

_CHUNK = 1 << 20
_STRING = "string"  # the manifest's dtype of a string tensor, stored as packed uint8


class _BadHeader(Exception):
    """The ``.npy`` header cannot be read (the rule it breaks is the message)."""


def input_file_problems(doc: Mapping[str, Any], present: Mapping[str, _fs.SourceFile]) -> List[Problem]:
    """Problems between ``doc["inputs"]`` and the ``data/inputs/`` files present (missing, unlisted
    or unsafe files are reported elsewhere)."""
    section = doc.get("inputs")
    tensors = section.get("tensors") if isinstance(section, dict) else None
    problems = []  # type: List[Problem]
    for number, entry in enumerate(tensors if isinstance(tensors, list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            continue  # no file kept, or a schema problem
        try:
            rel = "data/" + _fs.safe_relpath(entry["file"])
        except UnsafePathError:  # a schema problem, never followed
            continue
        if rel in present:
            where = "inputs.tensors[{}]".format(number)
            problems.extend(Problem(kind, rel, rule) for kind, rule in _file_problems(entry, where, present[rel]))
    return problems


def _file_problems(entry: Mapping[str, Any], where: str, found: _fs.SourceFile) -> List[Tuple[str, str]]:
    try:
        with _rules.open_regular(found.path) as handle:
            header = _read_header(handle)
            problems = _header_vs_entry(header, entry, where, found.size)
            if not problems and _hashable(header):
                digest = _digest(handle)
                if digest != entry.get("sha256"):
                    problems.append(("changed", "its values' sha256 {} is not {}.sha256 {} in bundle.json".format(
                        digest, where, entry.get("sha256"))))
    except _BadHeader as exc:
        return [("unparsable", "not a .npy file {} can hold ({})".format(where, exc))]
    except OSError as exc:
        return [("unparsable", "cannot be read: {}".format(exc.strerror or exc))]
    return problems


def _read_header(handle: Any) -> NpyHeader:
    """The header of the ``.npy`` at ``handle`` (left at its values), if it holds a tensor dtype."""
    try:
        header = read_npy_header(handle)
    except FormatError as exc:
        raise _BadHeader(exc.rule) from None
    if header.dtype.kind == "V" or header.dtype.itemsize == 0:
        raise _BadHeader("dtype {!r} is not a tensor dtype".format(header.dtype.str))
    return header


def _header_vs_entry(header: NpyHeader, entry: Mapping[str, Any], where: str,
                     size: int) -> List[Tuple[str, str]]:
    """The manifest's dtype and shape against the header's, and the file's size against both."""
    dtype, shape = header.dtype, list(header.shape)
    string = entry.get("dtype") == _STRING
    wanted = "uint8" if string else entry.get("dtype")
    problems = []
    if dtype.name != wanted:
        problems.append(("changed", "dtype {} in its .npy header, {}.dtype {!r} in bundle.json{}".format(
            dtype.name, where, entry.get("dtype"), " (stored as packed uint8)" if string else "")))
    if string and len(shape) != 1:
        problems.append(("changed", "shape {} in its .npy header: a string tensor is stored as one uint8 "
                                    "vector".format(shape)))
    elif not string and shape != entry.get("shape"):
        problems.append(("changed", "shape {} in its .npy header, {}.shape {} in bundle.json".format(
            shape, where, entry.get("shape"))))
    needed = header.offset + header.nbytes
    if size != needed:
        problems.append(("changed", "{} bytes, its header's dtype and shape make {}".format(size, needed)))
    return problems


def _hashable(header: NpyHeader) -> bool:
    """Whether the file's value bytes are the bytes the manifest's sha256 covers (C order, little-endian)."""
    c_order = not header.fortran_order or len(header.shape) < 2
    return c_order and header.dtype.byteorder != ">"


def _digest(handle: Any) -> Optional[str]:
    """sha256 of the rest of ``handle`` (the values), read in chunks."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(_CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()
