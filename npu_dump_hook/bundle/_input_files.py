"""``verify``'s cross-check of ``data/inputs/*.npy`` against bundle.json's ``inputs`` manifest.

Each kept input (``inputs.tensors[i]`` with a ``file``) must be a ``.npy`` file whose header
says the manifest's dtype and shape (a string tensor: one uint8 vector, see
:mod:`npu_dump_hook.train.inputs`), whose size is exactly that header plus those values, and
whose values hash to the manifest's ``sha256`` (the bytes :func:`~npu_dump_hook.train.fingerprints.array_digest`
covers). A bundle whose BagIt manifests were rewritten after its values were changed is caught
here, before a golden run feeds them.

Inert: the header is read with a size cap and parsed as a Python literal (``ast.literal_eval``,
never pickle); an object dtype is refused, not read; the values are only streamed through
sha256 in chunks, never loaded as an array. A Fortran-order or big-endian file (a value the
script fed that way) is checked by header and size only: its hash covers the C-order
little-endian bytes, which would need the array in memory.
"""
import ast
import hashlib
import struct
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..errors import UnsafePathError
from . import _fs, _rules
from ._bagit import Problem

__all__ = ["input_file_problems"]

_MAGIC = b"\x93NUMPY"
#: numpy's own default cap on a header it parses (``max_header_size``): a longer one is refused.
MAX_NPY_HEADER_BYTES = 10000
_LENGTH_FORMAT = {1: "<H", 2: "<I", 3: "<I"}  # .npy major version -> its header-length field
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


def _read_header(handle: Any) -> Dict[str, Any]:
    """``{"descr", "fortran_order", "shape", "dtype", "offset"}`` of the ``.npy`` at ``handle``."""
    lead = handle.read(len(_MAGIC) + 2)
    if len(lead) < len(_MAGIC) + 2 or not lead.startswith(_MAGIC):
        raise _BadHeader("no .npy magic bytes")
    major = lead[len(_MAGIC)]
    if major not in _LENGTH_FORMAT:
        raise _BadHeader(".npy version {} is not 1, 2 or 3".format(major))
    field = struct.calcsize(_LENGTH_FORMAT[major])
    raw_length = handle.read(field)
    if len(raw_length) < field:
        raise _BadHeader("the header length is cut off")
    (length,) = struct.unpack(_LENGTH_FORMAT[major], raw_length)
    if length > MAX_NPY_HEADER_BYTES:
        raise _BadHeader("a header of {} bytes, over the {} a .npy header may have".format(
            length, MAX_NPY_HEADER_BYTES))
    text = handle.read(length)
    if len(text) < length:
        raise _BadHeader("the header is cut off")
    header = _literal(text.decode("utf-8" if major == 3 else "latin1", "replace"))
    header["offset"] = len(lead) + field + length
    return header


def _literal(text: str) -> Dict[str, Any]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        raise _BadHeader("its header is not a Python literal") from None
    shape = value.get("shape") if isinstance(value, dict) else None
    if not (isinstance(value, dict) and isinstance(value.get("descr"), str) and isinstance(shape, tuple)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
            and isinstance(value.get("fortran_order"), bool)):
        raise _BadHeader("its header is not a dict of descr (text), fortran_order and shape")
    try:
        dtype = np.dtype(value["descr"])
    except (TypeError, ValueError):
        raise _BadHeader("descr {!r} is not a dtype".format(value["descr"])) from None
    if dtype.kind in ("O", "V") or dtype.itemsize == 0:
        raise _BadHeader("dtype {!r} is not a tensor dtype (object arrays need pickle: not read)".format(
            value["descr"]))
    return dict(value, dtype=dtype)


def _header_vs_entry(header: Mapping[str, Any], entry: Mapping[str, Any], where: str,
                     size: int) -> List[Tuple[str, str]]:
    """The manifest's dtype and shape against the header's, and the file's size against both."""
    dtype, shape = header["dtype"], list(header["shape"])
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
    count = 1
    for dim in shape:
        count *= dim
    needed = header["offset"] + count * dtype.itemsize
    if size != needed:
        problems.append(("changed", "{} bytes, its header's dtype and shape make {}".format(size, needed)))
    return problems


def _hashable(header: Mapping[str, Any]) -> bool:
    """Whether the file's value bytes are the bytes the manifest's sha256 covers (C order, little-endian)."""
    c_order = not header["fortran_order"] or len(header["shape"]) < 2
    return c_order and header["dtype"].byteorder != ">"


def _digest(handle: Any) -> Optional[str]:
    """sha256 of the rest of ``handle`` (the values), read in chunks."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(_CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()
