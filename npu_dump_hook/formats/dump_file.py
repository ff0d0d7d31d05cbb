"""Ascend tensor dump files: lazy, validating reader and byte-exact v2 writer.

Layouts (docs/reference/ascend-dump-formats.md §1.2, §1.6):

* **v2** (current): ``u64 LE header_len`` | ``DumpData`` header (``header_len`` bytes) |
  payloads concatenated, no padding, in the order inputs, outputs, buffers, workspaces
  (each ``size`` bytes).
* **legacy** (proto-only): the whole file is one ``DumpData`` whose tensors carry their
  bytes in ``data`` and whose ``version`` is not "2.0".

Telling them apart: the file is v2 when ``8 + header_len <= file size``, the header
decodes and its version is "2.0". Otherwise, if the whole file decodes as DumpData with
a version other than "2.0", it is legacy. Otherwise the v2 rules below decide (a v2
header that decodes with another version is accepted, with a warning).

Validation order; the first rule broken raises one :class:`DumpFileError` with the
path, the byte offset and the rule:

1. file too small: size <= 8 bytes (offset 0);
2. Nano TLV files (u32 0x5A5A5A5A at offset 8) are recognised and refused (offset 8);
3. header length 0, >= 2 GiB (the writer's bound), over the reader's limit
   :data:`MAX_READ_HEADER_LEN` (64 MiB), or past the end of file (offset 0) — checked
   before anything is allocated, so a forged 2**64 length (or a flipped bit in the length
   of a large file) costs nothing;
4. header does not decode as DumpData (offset of the offending field): its wire format is
   walked first (truncated or overlong varints, field number 0, wire types 3/4/6/7, a
   field running past its message — where the C++ protobuf backend would stop early and
   accept a prefix), then protobuf parses it (offset 8);
5. header over the reader's limits, found by the same walk (which reports the first
   problem of 4 or 5 in byte order) before protobuf builds any object (offset of the
   field that crosses the limit): more than :data:`MAX_TENSORS`
   (65,536) tensors of all kinds together or attrs, more than :data:`MAX_DIMS` (64) dims
   in one shape or dim_range entries in one output, more than :data:`MAX_HEADER_ITEMS`
   (1,048,576) items: protobuf fields at any depth, each dim counting two;
6. payload sizes overrun the file: the first tensor, in payload order, that ends past
   EOF (offset = where its payload starts);
7. element count: for inputs/outputs whose data type has a fixed bit width,
   ``ceil(prod(shape) * bits / 8)`` must equal ``size`` (empty shape = scalar; an empty
   shape with size 0 is accepted as "no data") (offset = its payload);
8. trailing bytes after the last payload: a **warning** (logged and kept in
   ``.warnings``), because the current msaccucmp accepts them; an error with ``strict=True``.

Legacy files run rules 4 and 5 (whole file; the walk goes through a memory map, so a v2
file mistaken for one is refused after a few bytes), 7, and check ``size`` (when set)
against ``len(data)``; they are at most 2 GiB.

Cost of reading a header (:func:`read_header`, :meth:`DumpFile.open`): time linear in the
header size; peak memory **at most 4 x the header size + 64 MB** (the header bytes, the
protobuf objects and a :class:`TensorInfo` per tensor: 300-900 bytes a tensor, up to ~50
bytes a dim; the limits of rule 5 cap all of it at about 50 MB, measured with protobuf
3.20 (C++) and 4.x (upb)). For a legacy file "header"
means the whole file. :meth:`DumpHeader.summary` adds about 500 bytes per tensor.
:meth:`DumpFile.array` maps the payload (``copy=True``: one copy of it). Shapes numpy
cannot hold (more than 32 dims in numpy 1.x, a dim or a byte count over 2**63-1, also
with a zero dim) raise :class:`DumpFileError` from ``array()``, and so do original shapes
that do not fit (``original_shape=True``).

Reading the header (:func:`read_header`, :meth:`DumpFile.open`) reads exactly 8 bytes
plus the header; :func:`read_header_bytes` decodes it from bytes the caller already read
(the bundle writer's hashing read), with the same rules, limits and errors. A header of up to
128 KiB, too small to reach the tensor, attr or item limits, is first walked by a quick check
that accepts only plainly well-formed fields and shapes within MAX_DIMS; anything else gets the
full walk of rules 4 and 5, which names the rule broken and its offset. Payloads come out of :meth:`DumpFile.array` as read-only numpy views
of a memory map (``copy=True`` reads them into fresh memory instead). Data types map
to numpy as §1.8 says; types numpy lacks (DT_BF16 and DT_FLOAT8_* without the
optional ``ml_dtypes``; DT_HIFLOAT8, DT_INT4, DT_UINT1, DT_COMPLEX32, ... always) raise
:class:`DumpFileError` from ``array()`` unless ``raw=True``, which returns the stored
bits: an array of the storage type (uint16 for bf16, uint8 for 1-byte types) in the
tensor's shape, or the flat bytes for bit-packed types. :func:`bfloat16_bits_to_float32`
widens bf16 bits exactly without ml_dtypes. Buffers and workspaces are byte blobs
(DT_UINT8, format ND, shape (size,)).

Writing (:func:`write_dump_file`): the header is serialized with deterministic protobuf
encoding, which emits fields in ascending number and omits proto3 defaults, the same
bytes as the AICPU writer (golden test in tests/formats). A header the reader would
refuse (rules 3 and 5) is an :class:`OptionError` instead. Files are written to a
temporary name in the destination folder and renamed into place.

Modules: this one reads (header model, :class:`DumpFile`); the rules live in :mod:`._dump_rules`
and :mod:`._dump_walk`, the writer in :mod:`._dump_writer`, the format's numbers and limits in
:mod:`._dump_layout`; every name is importable from here.
"""
import logging
import mmap
import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import DumpFileError, FormatError, OptionError
from . import device_format, dump_schema
from ._dump_layout import (DATA_TYPE_NAMES as _DATA_TYPE_NAMES, DTYPES as _DTYPES, FORMAT_NAMES as _FORMAT_NAMES,
                           KINDS, MAX_DIMS, MAX_HEADER_ITEMS, MAX_HEADER_LEN, MAX_READ_HEADER_LEN, MAX_TENSORS,
                           ML_DTYPES as _ml_dtypes, UNKNOWN_DTYPE as _UNKNOWN_DTYPE, V2 as _V2,
                           logical_dtype as _logical_dtype, repeated as _repeated)
from ._dump_rules import (TensorFields, check_element_counts as _check_element_counts,
                          check_legacy_sizes as _check_legacy_sizes, check_payload_bounds as _check_payload_bounds,
                          common_header as _common_header, quick_fields as _quick_fields,
                          read_v2_prefix as _read_v2_prefix, try_legacy as _try_legacy)
from ._dump_walk import quick_scan as _quick_scan, scan_dump_data as _scan_dump_data  # noqa: F401 (tests)
from ._dump_writer import DumpTensor, build_header, encode_header, ge_origin_data_type, write_dump_file

__all__ = [
    "KINDS",
    "MAX_HEADER_LEN",
    "MAX_READ_HEADER_LEN",
    "MAX_TENSORS",
    "MAX_DIMS",
    "MAX_HEADER_ITEMS",
    "TensorInfo",
    "TensorFields",
    "quick_tensor_fields",
    "DumpTensor",
    "ge_origin_data_type",
    "DumpHeader",
    "DumpFile",
    "read_header",
    "read_header_from",
    "read_header_bytes",
    "build_header",
    "encode_header",
    "write_dump_file",
    "dtype_info",
    "bfloat16_bits_to_float32",
]

logger = logging.getLogger(__name__)

_dtype_cache = {}  # type: Dict[int, Tuple[np.dtype, Optional[int], Optional[np.dtype]]]
_dtype_cache_source = [_ml_dtypes]  # the ml_dtypes module the cache was filled with


def dtype_info(data_type: int) -> Tuple[np.dtype, Optional[int], Optional[np.dtype]]:
    """(storage dtype, bits per element or None, numpy dtype or None) for a DumpData data type."""
    if _dtype_cache_source[0] is not _ml_dtypes:  # tests swap ml_dtypes out; start over
        _dtype_cache.clear()
        _dtype_cache_source[0] = _ml_dtypes
    found = _dtype_cache.get(data_type)
    if found is None:
        storage, bits, logical = _DTYPES.get(data_type, _UNKNOWN_DTYPE)
        found = _dtype_cache[data_type] = (np.dtype(storage), bits, _logical_dtype(logical, _ml_dtypes))
    return found


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """Exact float32 values of bfloat16 bit patterns (uint16), without ml_dtypes."""
    return (np.asarray(bits, dtype="<u2").astype("<u4") << 16).view("<f4")


# --- header model --------------------------------------------------------------

class TensorInfo(NamedTuple):
    """One payload block as the header describes it (shapes as int tuples)."""

    kind: str  # "input" | "output" | "buffer" | "workspace"
    index: int
    dtype_name: str  # "DT_FLOAT"
    dtype: Optional[np.dtype]  # numpy dtype of array(), None when only raw=True works
    format_name: str  # "NC1HWC0" (device layout)
    shape: Tuple[int, ...]  # device-layout shape
    original_shape: Tuple[int, ...]  # framework shape (empty when not recorded)
    size: int  # payload bytes
    offset: Optional[int]  # file offset of the payload (None in legacy files)
    original_name: Optional[str] = None  # original_op.name (outputs only)
    original_format: Optional[str] = None  # original_op.format name (outputs only)
    data_type: int = 4  # DumpData data type value (DT_UINT8 for buffers/workspaces)

    def as_dict(self) -> Dict[str, Any]:
        """JSON-ready summary of this tensor."""
        return {
            "index": self.index,
            "dtype": self.dtype_name,
            "format": self.format_name,
            "shape": list(self.shape),
            "original_shape": list(self.original_shape),
            "size": self.size,
            "original_name": self.original_name,
        }


def _tensor_info(kind: str, index: int, proto: Any, offset: Optional[int], size: int) -> TensorInfo:
    if kind in ("buffer", "workspace"):
        return TensorInfo(kind, index, "DT_UINT8", np.dtype("u1"), "ND", (size,), (size,), size, offset)
    data_type = proto.data_type
    original_name = original_format = None
    if kind == "output" and proto.HasField("original_op"):
        original_name = proto.original_op.name
        original_format = dump_schema.format_name(proto.original_op.format)
    fmt = proto.format
    return TensorInfo(
        kind, index, _DATA_TYPE_NAMES.get(data_type) or dump_schema.data_type_name(data_type),
        dtype_info(data_type)[2], _FORMAT_NAMES.get(fmt) or dump_schema.format_name(fmt),
        tuple(proto.shape.dim), tuple(proto.original_shape.dim), size, offset, original_name, original_format,
        data_type,
    )


def _tensor_infos(kind: str, protos: Any, offset: Optional[int]) -> Tuple[List[TensorInfo], Optional[int]]:
    """TensorInfos of the repeated field ``protos`` of one kind, and the offset after their payloads
    (v2; None in legacy files, whose tensors carry their bytes)."""
    infos = []  # type: List[TensorInfo]
    if not protos:
        return infos, offset
    for index, proto in enumerate(protos):
        size = int(proto.size) if offset is not None else len(proto.data)
        infos.append(_tensor_info(kind, index, proto, offset, size))
        if offset is not None:
            offset += size
    return infos, offset


class DumpHeader(object):
    """What the header of one dump file says; no payload bytes are read.

    ``header`` is the DumpData message, ``version`` is "v2" or "legacy",
    ``inputs``/``outputs``/``buffers``/``workspaces`` are lists of :class:`TensorInfo`.
    """

    def __init__(self, path: str, version: str, header: Any, header_len: Optional[int],
                 file_size: int, warnings: Sequence[str] = ()) -> None:
        self.path = path
        self.version = version
        self.header = header
        self.header_len = header_len
        self.file_size = file_size
        self.warnings = list(warnings)
        offset = 8 + header_len if header_len is not None else None
        self.inputs, offset = _tensor_infos("input", header.input, offset)
        self.outputs, offset = _tensor_infos("output", header.output, offset)
        self.buffers, offset = _tensor_infos("buffer", header.buffer, offset)
        self.workspaces, offset = _tensor_infos("workspace", header.space, offset)

    @property
    def op_name(self) -> str:
        return self.header.op_name

    @property
    def dump_time(self) -> int:
        return int(self.header.dump_time)

    def tensors(self, kind: Optional[str] = None) -> List[TensorInfo]:
        """All tensors in payload order, or those of one kind."""
        if kind is None:
            return self.inputs + self.outputs + self.buffers + self.workspaces
        if kind not in KINDS:
            raise OptionError("kind", kind, "must be one of {}".format(", ".join(KINDS)))
        return {"input": self.inputs, "output": self.outputs, "buffer": self.buffers,
                "workspace": self.workspaces}[kind]

    def tensor(self, kind: str, index: int) -> TensorInfo:
        infos = self.tensors(kind)
        if not 0 <= index < len(infos):
            raise OptionError("index", index, "{} has {} {} tensor(s)".format(self.path, len(infos), kind))
        return infos[index]

    def summary(self) -> Dict[str, Any]:
        """Compact JSON-ready description (for bundle.json and ``parse``)."""
        return {
            "format": self.version,
            "version": self.header.version,
            "op_name": self.header.op_name,
            "dump_time": int(self.header.dump_time),
            "header_len": self.header_len,
            "file_size": self.file_size,
            "attrs": {attr.name: attr.value for attr in self.header.attr},
            "inputs": [t.as_dict() for t in self.inputs],
            "outputs": [t.as_dict() for t in self.outputs],
            "buffers": [t.as_dict() for t in self.buffers],
            "workspaces": [t.as_dict() for t in self.workspaces],
            "warnings": list(self.warnings),
        }


# --- reading ------------------------------------------------------------------

def _parse(path: str, fileobj: Any, strict: bool) -> DumpHeader:
    file_size = os.fstat(fileobj.fileno()).st_size
    if file_size <= 8:
        raise DumpFileError(path, "file too small ({} bytes): a dump file holds an 8-byte header "
                                  "length and a header".format(file_size), 0)
    message, header_len, error = _read_v2_prefix(path, fileobj, file_size)
    if message is not None and message.version == _V2:
        return _finish_v2(path, message, header_len, file_size, strict, [])
    legacy, legacy_error = _try_legacy(path, fileobj, file_size)
    if legacy is not None:
        _check_legacy_sizes(path, legacy)
        header = DumpHeader(path, "legacy", legacy, None, file_size)
        _check_element_counts(path, header)
        return header
    if legacy_error is not None and (message is None and error is not None and error.offset == 0):
        raise legacy_error  # the prefix is no v2 header length, the file a legacy one over the limits
    if error is not None:
        raise error
    warning = "header version {!r} is not '2.0'; read as a v2 file".format(message.version)
    logger.warning("%s: %s", path, warning)
    return _finish_v2(path, message, header_len, file_size, strict, [warning])


def _finish_v2(path: str, message: Any, header_len: int, file_size: int, strict: bool,
               warnings: List[str]) -> DumpHeader:
    header = DumpHeader(path, "v2", message, header_len, file_size, warnings)
    _check_payload_bounds(path, header)
    _check_element_counts(path, header)
    end = 8 + header_len + sum(info.size for info in header.tensors())
    if end < file_size:
        rule = "{} trailing bytes after the last payload".format(file_size - end)
        if strict:
            raise DumpFileError(path, rule, end)
        logger.warning("%s at byte %d: %s", path, end, rule)
        header.warnings.append("{} (at byte {})".format(rule, end))
    return header


def read_header(path: Union[str, "os.PathLike[str]"], strict: bool = False) -> DumpHeader:
    """Parse and validate the header of ``path`` (8 bytes + header; payloads unread)."""
    path = os.fspath(path)
    with open(path, "rb", buffering=0) as fileobj:
        return _parse(path, fileobj, strict)


def read_header_from(fileobj: Any, path: Union[str, "os.PathLike[str]"], strict: bool = False) -> DumpHeader:
    """:func:`read_header` of the file already open as ``fileobj`` (binary, seekable, with a
    ``fileno``; left open), named ``path`` in errors: for a reader that opened it itself, e.g.
    without blocking (:func:`npu_dump_hook._files.open_regular`)."""
    return _parse(os.fspath(path), fileobj, strict)


def read_header_bytes(path: Union[str, "os.PathLike[str]"], head: bytes, file_size: int,
                      strict: bool = False) -> DumpHeader:
    """:func:`read_header` of ``path`` from ``head``, its first bytes, already read (e.g. while hashing
    it), and its size ``file_size``: the same header, warnings and errors (every rule and limit).

    The common file, a v2 file of version "2.0" whose prefix and header lie within ``head`` and
    which passes the quick wire check, is decoded from ``head`` without opening the file; any other
    (legacy files, refused or unusual headers, a header longer than ``head``) is read by
    :func:`read_header`, which opens ``path``. ``head`` must be what the file held: the caller
    read it, so a file changed since then is described as it was when read.
    """
    path = os.fspath(path)
    message, header_len = _common_header(head, file_size)
    if message is not None:
        return _finish_v2(path, message, header_len, file_size, strict, [])
    return read_header(path, strict)


def quick_tensor_fields(head: bytes, file_size: int) -> Optional[Tuple[List[TensorFields], List[TensorFields]]]:
    """(inputs, outputs) of the dump file whose first bytes are ``head`` and whose size is
    ``file_size``, each tensor as ``(dtype_name, shape, format_name, original_shape)``: what the
    :class:`TensorInfo` of :func:`read_header_bytes` would say, without building it.

    Only for the common file: v2, version "2.0", header within ``head``, passing the quick wire
    check, every data type and format known, every payload in bounds and of the size its shape
    needs, no trailing bytes. Anything else gives None, and the caller reads the header with
    :func:`read_header_bytes` (which finds the rule broken, or the warning). So a result here is
    never one that reader would refuse or warn about: None is the only answer that may differ.
    """
    message, header_len = _common_header(head, file_size)
    if message is None:
        return None
    end = 8 + header_len
    inputs = _quick_fields(message.input)
    outputs = _quick_fields(message.output)
    if inputs is None or outputs is None:
        return None
    end += sum(size for _fields, size in inputs) + sum(size for _fields, size in outputs)
    end += sum(int(proto.size) for proto in message.buffer) + sum(int(proto.size) for proto in message.space)
    if end != file_size:  # past the end (refused) or trailing bytes (a warning): the full reader says so
        return None
    return [fields for fields, _size in inputs], [fields for fields, _size in outputs]


class DumpFile(DumpHeader):
    """A validated dump file whose payloads are read on demand (memory-mapped).

    Use as a context manager or call :meth:`close`; arrays already returned stay valid.
    """

    _mmap = None  # type: Optional[mmap.mmap]
    _data = None  # type: Optional[bytes]

    @classmethod
    def open(cls, path: Union[str, "os.PathLike[str]"], strict: bool = False) -> "DumpFile":
        found = read_header(path, strict)
        self = cls.__new__(cls)
        self.__dict__.update(found.__dict__)
        self._mmap = None
        return self

    @classmethod
    def open_small(cls, path: Union[str, "os.PathLike[str]"], strict: bool = False,
                   limit: int = 1 << 20) -> "DumpFile":
        """:meth:`open`, reading a file of at most ``limit`` bytes whole with one open: its header
        and payloads come from those bytes (arrays are views of them), the same header, checks and
        errors as :meth:`open`. For readers of many small files (the golden-free checks of a step)."""
        path = os.fspath(path)
        with open(path, "rb", buffering=0) as fileobj:
            size = os.fstat(fileobj.fileno()).st_size
            data = fileobj.read(size + 1) if size <= limit else b""
        if len(data) != size or size <= 8:
            return cls.open(path, strict)  # large, changed while read or too small: open() says so
        found = read_header_bytes(path, data, size, strict)
        self = cls.__new__(cls)
        self.__dict__.update(found.__dict__)
        self._mmap = None
        self._data = data
        return self

    def __enter__(self) -> "DumpFile":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Drop the memory map (numpy views keep it alive until they are gone)."""
        mapped, self._mmap = self._mmap, None
        if mapped is not None:
            try:
                mapped.close()
            except BufferError:  # arrays still reference it; the GC closes it after them
                pass

    def _buffer(self) -> Any:
        if self._data is not None:
            return self._data
        if self._mmap is None:
            with open(self.path, "rb") as fileobj:
                if os.fstat(fileobj.fileno()).st_size != self.file_size:
                    raise DumpFileError(self.path, "file changed size since its header was read", 0)
                self._mmap = mmap.mmap(fileobj.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mmap

    def _storage(self, info: TensorInfo, storage: np.dtype, copy: bool) -> np.ndarray:
        count = info.size // storage.itemsize
        if self.version == "legacy":
            data = _repeated(self.header, info.kind)[info.index].data
            array = np.frombuffer(data, dtype=storage, count=count)
            return array.copy() if copy else array
        if info.size == 0:
            return np.empty(0, dtype=storage)
        if copy:
            array = np.empty(count, dtype=storage)
            with open(self.path, "rb", buffering=0) as fileobj:
                fileobj.seek(info.offset)
                got = fileobj.readinto(memoryview(array).cast("B"))
            if got != info.size:
                raise DumpFileError(self.path, "file shrank while reading {}[{}]".format(info.kind, info.index),
                                    info.offset)
            return array
        # Through a memoryview: it holds a buffer export on the map for as long as the array (its
        # base) lives, so close() cannot unmap memory an array still points at. numpy < 1.20 took
        # mmap objects through the old buffer protocol, which holds no export: closing the
        # DumpFile then left arrays over unmapped memory (a segfault on the next read).
        view = memoryview(self._buffer())
        return np.frombuffer(view, dtype=storage, count=count, offset=info.offset)

    def array(self, kind: str, index: int, original_shape: bool = False, raw: bool = False,
              copy: bool = False) -> np.ndarray:
        """Payload ``kind``[``index``] as a numpy array in its device shape.

        ``original_shape=True`` converts the device layout to the framework shape
        (:func:`device_format.to_original`); ``raw=True`` returns the stored bits for
        types numpy lacks; ``copy=True`` reads into fresh writable memory (no mmap).
        """
        info = self.tensor(kind, index)
        storage, bits, logical = dtype_info(info.data_type)
        if logical is None and not raw:
            raise DumpFileError(self.path, "{}[{}] has data type {}, which numpy cannot hold{}; pass raw=True "
                                "for the stored bits".format(kind, index, info.dtype_name, _dtype_hint(info)),
                                info.offset)
        flat = self._storage(info, storage, copy)
        if logical is None and bits != storage.itemsize * 8:
            return flat  # bit-packed or unsized: the stored bytes
        result = flat.view(logical) if logical is not None and logical != storage else flat
        count = 1
        for dim in info.shape:
            count *= dim
        if kind in ("buffer", "workspace") or result.size != count:
            return result  # no shape to apply (unsized types, "no data" scalars)
        problem = device_format.shape_problem(info.shape, result.dtype.itemsize)
        if problem is not None:
            raise DumpFileError(self.path, "{}[{}]: shape {} {}".format(kind, index, list(info.shape), problem),
                                info.offset)
        result = result.reshape(info.shape)
        if original_shape:
            try:
                result = device_format.to_original(result, info.format_name, info.original_shape,
                                                   info.original_format, source=self.path)
            except DumpFileError:
                raise
            except FormatError as exc:  # name the tensor and where its payload is
                raise DumpFileError(self.path, "{}[{}]: {}".format(kind, index, exc.rule), info.offset)
        return result


def _dtype_hint(info: TensorInfo) -> str:
    if _DTYPES.get(info.data_type, _UNKNOWN_DTYPE)[2] is not None:
        return " without the optional package ml_dtypes"
    return ""
