"""Ascend tensor dump files: lazy, validating reader and byte-exact v2 writer.

Layouts (reference ascend-dump-formats.md §1.2, §1.6):

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
"""
import logging
import mmap
import os
import struct
import sys
import tempfile
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import DumpFileError, FormatError, OptionError
from . import device_format, dump_schema

try:  # optional: numpy types for bfloat16 / float8
    import ml_dtypes as _ml_dtypes  # type: ignore
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None

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
    "read_header_bytes",
    "build_header",
    "encode_header",
    "write_dump_file",
    "dtype_info",
    "bfloat16_bits_to_float32",
]

logger = logging.getLogger(__name__)

#: Payload kinds, in payload order.
KINDS = ("input", "output", "buffer", "workspace")
#: Largest header the writer produces: [1 B, 2 GiB) (reference §1.2).
MAX_HEADER_LEN = 2 ** 31 - 1
#: Largest header the reader reads (64 MiB): a real header is a few hundred bytes per tensor.
MAX_READ_HEADER_LEN = 64 * 1024 * 1024
#: Most tensors (inputs, outputs, buffers and workspaces together) and most attrs a header may list.
MAX_TENSORS = 65536
#: Most dims in one shape (and dim_range entries of one output); numpy itself holds 32 (64 in numpy 2).
MAX_DIMS = 64
#: Most items in one header: protobuf fields at any depth, each dim counting two (a dim costs the
#: most memory per header byte: 8 bytes in protobuf, a tuple slot and an int in TensorInfo).
MAX_HEADER_ITEMS = 1 << 20
_PREFIX = struct.Struct("<Q")
_NANO_MAGIC = b"\x5a\x5a\x5a\x5a"
_V2 = "2.0"
# First byte of a DumpData written in field order: a tag of fields 1..9 with its wire type.
_LEGACY_FIRST_BYTES = frozenset((0x0A, 0x10, 0x1A, 0x22, 0x2A, 0x32, 0x3A, 0x42, 0x4A))

# data type value -> (storage numpy dtype, bits per element or None if size is not checkable,
#                     logical dtype: numpy dtype string, "ml:<name>" from ml_dtypes, or None = raw only)
_DTYPES = {
    0: ("i1", None, "i1"),  # DT_UNDEFINED: read as int8 (msaccucmp)
    1: ("<f4", 32, "<f4"),
    2: ("<f2", 16, "<f2"),
    3: ("i1", 8, "i1"),
    4: ("u1", 8, "u1"),
    5: ("<i2", 16, "<i2"),
    6: ("<u2", 16, "<u2"),
    7: ("<i4", 32, "<i4"),
    8: ("<i8", 64, "<i8"),
    9: ("<u4", 32, "<u4"),
    10: ("<u8", 64, "<u8"),
    11: ("?", 8, "?"),
    12: ("<f8", 64, "<f8"),
    13: ("u1", None, None),  # DT_STRING
    14: ("i1", 8, "i1"),
    15: ("u1", 8, "u1"),
    16: ("<c8", 64, "<c8"),
    17: ("<c16", 128, "<c16"),
    18: ("i1", 8, "i1"),
    19: ("<i2", 16, "<i2"),
    20: ("<i4", 32, "<i4"),
    21: ("u1", 8, "u1"),
    22: ("<u2", 16, "<u2"),
    23: ("<i8", None, "<i8"),  # DT_RESOURCE: read as int64 (msaccucmp)
    24: ("u1", None, None),
    25: ("u1", None, None),
    26: ("u1", None, None),
    27: ("<u2", 16, "ml:bfloat16"),
    28: ("u1", 4, None),  # DT_INT4, two per byte
    29: ("u1", 1, None),  # DT_UINT1, bit-packed
    30: ("u1", 2, None),
    31: ("u1", 2, None),
    32: ("u1", 32, None),  # DT_COMPLEX32: two float16
    33: ("u1", 8, None),  # DT_HIFLOAT8: no numpy type
    34: ("u1", 8, "ml:float8_e5m2"),
    35: ("u1", 8, "ml:float8_e4m3fn"),
    36: ("u1", 8, "ml:float8_e8m0fnu"),
    37: ("u1", None, None),
    38: ("u1", None, None),
    39: ("u1", 4, None),
    40: ("u1", 4, None),
    41: ("u1", 4, None),
    42: ("u1", None, None),
}
_UNKNOWN_DTYPE = ("u1", None, None)

# ge::DataType numbering that GE writes, unconverted, into original_op.data_type (§1.4).
_GE_DATA_TYPE = {1: 0, 2: 1, 3: 2, 7: 3, 4: 4, 5: 6, 6: 7, 9: 8, 8: 9, 10: 10, 12: 11, 11: 12, 27: 27}
_GE_UNDEFINED = 28
_PLAIN_FORMATS = ("NCHW", "NHWC", "ND", "HWCN", "NDHWC", "NCDHW", "DHWCN", "NC", "CN", "NCL", "CHWN")


def _logical_dtype(spec: Optional[str]) -> Optional[np.dtype]:
    if spec is None:
        return None
    if spec.startswith("ml:"):
        found = getattr(_ml_dtypes, spec[3:], None) if _ml_dtypes is not None else None
        return np.dtype(found) if found is not None else None
    return np.dtype(spec)


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
        found = _dtype_cache[data_type] = (np.dtype(storage), bits, _logical_dtype(logical))
    return found


def _numpy_to_data_type() -> Dict[str, int]:
    table = {}  # type: Dict[str, int]
    for value, (_storage, bits, logical) in _DTYPES.items():
        dtype = _logical_dtype(logical)
        if dtype is not None and bits is not None and dtype.name not in table:
            table[dtype.name] = value
    return table


_FROM_NUMPY = _numpy_to_data_type()


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


_DATA_TYPE_NAMES = dict(dump_schema.DATA_TYPES)  # the names of every defined value (a miss asks dump_schema)
_FORMAT_NAMES = dict(dump_schema.FORMATS)


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


_FIELD_OF_KIND = {"input": "input", "output": "output", "buffer": "buffer", "workspace": "space"}


def _repeated(header: Any, kind: str) -> Any:
    return getattr(header, _FIELD_OF_KIND[kind])


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

def _decode(path: str, data: bytes, offset: int, what: str) -> Any:
    message = dump_schema.DumpData()
    try:
        message.ParseFromString(data)
    except Exception as exc:  # DecodeError, or RuntimeError/UnicodeError from some backends
        raise DumpFileError(path, "{} does not decode as DumpData ({}: {})".format(
            what, type(exc).__name__, exc), offset)
    return message


# --- cheap wire-format scan, before protobuf builds any object ---------------------
#
# protobuf turns each 2-byte empty OpOutput into a message object, and the reader then adds a
# TensorInfo (300-900 bytes in all), each packed 1-byte dim into 8 bytes plus a tuple slot, each
# unknown field into a record. So the header's wire format is walked first, in Python but
# without building anything, and refused when it counts more than the module limits.

class _WireError(Exception):
    """The bytes are not a DumpData protobuf; args: (rule, absolute offset)."""


class _LimitError(Exception):
    """The bytes describe more than the reader accepts; args: (rule, absolute offset)."""


_ITEMS_RULE = "more than {} items (protobuf fields at any depth, dims counting two)".format(MAX_HEADER_ITEMS)


class _Scan(object):
    __slots__ = ("buf", "base", "items")

    def __init__(self, buf: Any, base: int) -> None:
        self.buf = buf  # bytes or mmap
        self.base = base  # file offset of buf[0]
        self.items = 0  # protobuf fields at any depth + dims


def _scan_varint(scan: _Scan, pos: int, end: int) -> Tuple[int, int]:
    value, after = _quick_varint(scan.buf, pos, end)
    if value >= 0:
        return value, after
    if after - pos >= 10:  # ten bytes, each with its continuation bit
        raise _WireError("varint longer than 10 bytes", scan.base + pos)
    raise _WireError("truncated varint", scan.base + pos)


def _scan_field(scan: _Scan, pos: int, end: int, message: str) -> Tuple[int, int, int, int]:
    """(field number, wire type, value start, value end) of the field that starts at ``pos``."""
    buf = scan.buf
    byte = buf[pos]
    if byte < 0x80:
        key, value_at = byte, pos + 1
    else:
        key, value_at = _scan_varint(scan, pos, end)
    number, wire = key >> 3, key & 7
    if number == 0:
        raise _WireError("field number 0 in {}".format(message), scan.base + pos)
    scan.items += 1
    if scan.items > MAX_HEADER_ITEMS:
        raise _LimitError(_ITEMS_RULE, scan.base + pos)
    if wire == 0:
        if value_at < end and buf[value_at] < 0x80:
            return number, 0, value_at, value_at + 1
        return number, 0, value_at, _scan_varint(scan, value_at, end)[1]
    if wire == 2:
        if value_at < end and buf[value_at] < 0x80:
            length, start = buf[value_at], value_at + 1
        else:
            length, start = _scan_varint(scan, value_at, end)
        stop = start + length
    elif wire == 1 or wire == 5:
        start, stop = value_at, value_at + (8 if wire == 1 else 4)
    else:  # groups (3, 4) never occur in this proto3 schema; 6 and 7 do not exist
        raise _WireError("wire type {} (field {} of {})".format(wire, number, message), scan.base + pos)
    if stop > end:
        raise _WireError("field {} of {} ({} bytes) runs past the end of its message".format(
            number, message, stop - start), scan.base + pos)
    return number, wire, start, stop


def _scan_flat(scan: _Scan, pos: int, end: int, message: str) -> None:
    buf = scan.buf
    while pos < end:
        byte = buf[pos]
        # fast path: a 1-byte tag of wire type 0 with a 1-byte value (most fields of a real header)
        if 8 <= byte < 0x80 and not byte & 7 and pos + 1 < end and buf[pos + 1] < 0x80:
            scan.items += 1
            if scan.items > MAX_HEADER_ITEMS:
                raise _LimitError(_ITEMS_RULE, scan.base + pos)
            pos += 2
        else:
            pos = _scan_field(scan, pos, end, message)[3]


def _scan_shape(scan: _Scan, pos: int, end: int) -> int:
    """Number of dims in a Shape message (packed or not); each counts as two items."""
    dims = 0
    buf = scan.buf
    while pos < end:
        at = pos
        number, wire, start, pos = _scan_field(scan, pos, end, "Shape")
        if number != 1:
            continue
        if wire == 0:
            dims += 1
            scan.items += 1  # and 1 for its field
        elif wire == 2 and pos > start:
            if buf[pos - 1] >= 0x80:
                raise _WireError("truncated varint in packed dims", scan.base + pos - 1)
            if pos - start > 10 * (MAX_DIMS + 1):  # certainly more than MAX_DIMS varints
                return MAX_DIMS + 1
            count = sum(1 for byte in buf[start:pos] if byte < 0x80)
            dims += count
            scan.items += 2 * count
        if scan.items > MAX_HEADER_ITEMS:
            raise _LimitError(_ITEMS_RULE, scan.base + at)
    return dims


# kind -> (DumpData field, {field: nested message}) for the four tensor kinds
_SCAN_TENSORS = {
    3: ("output", "OpOutput", {3: "shape", 7: "original_shape", 4: "OriginalOp", 10: "DimRange"}),
    4: ("input", "OpInput", {3: "shape", 6: "original_shape"}),
    5: ("buffer", "OpBuffer", {}),
    8: ("workspace", "Workspace", {}),
}


def _scan_tensor(scan: _Scan, pos: int, end: int, kind: str, index: int, message: str,
                 nested: Dict[int, str]) -> None:
    dims = {}  # type: Dict[int, int]  # a Shape given twice is merged: its dims add up
    buf = scan.buf
    while pos < end:
        at = pos
        byte = buf[pos]
        if 8 <= byte < 0x80 and not byte & 7 and pos + 1 < end and buf[pos + 1] < 0x80:  # as in _scan_flat
            scan.items += 1
            if scan.items > MAX_HEADER_ITEMS:
                raise _LimitError(_ITEMS_RULE, scan.base + pos)
            pos += 2
            continue
        number, wire, start, pos = _scan_field(scan, pos, end, message)
        sub = nested.get(number) if wire == 2 else None
        if sub is None:
            continue
        if sub == "OriginalOp":
            _scan_flat(scan, start, pos, sub)
            continue
        count = dims.get(number, 0) + (_scan_shape(scan, start, pos) if sub != "DimRange" else 1)
        if sub == "DimRange":
            _scan_flat(scan, start, pos, sub)
        if count > MAX_DIMS:
            raise _LimitError("{}[{}]: {} holds more than {} {}".format(
                kind, index, sub if sub != "DimRange" else "dim_range", MAX_DIMS,
                "entries" if sub == "DimRange" else "dims"), scan.base + at)
        dims[number] = count


def _scan_dump_data(buf: Any, start: int, end: int, base: int) -> None:
    """Walk a serialized DumpData in ``buf[start:end]`` (``base``: file offset of ``buf[0]``).

    Raises _WireError when protobuf would refuse it (or would stop early: the C++ backend
    accepts a message cut at an end-group tag) and _LimitError when it describes more than
    MAX_TENSORS tensors or attrs, MAX_DIMS dims in a shape or MAX_HEADER_ITEMS items.
    """
    scan = _Scan(buf, base)
    counts = dict.fromkeys(KINDS, 0)
    tensors = attrs = 0
    pos = start
    while pos < end:
        at = pos
        byte = buf[pos]
        if 8 <= byte < 0x80 and not byte & 7 and pos + 1 < end and buf[pos + 1] < 0x80:  # as in _scan_flat
            scan.items += 1
            if scan.items > MAX_HEADER_ITEMS:
                raise _LimitError(_ITEMS_RULE, base + pos)
            pos += 2
            continue
        number, wire, value_at, pos = _scan_field(scan, pos, end, "DumpData")
        if wire != 2:
            continue
        spec = _SCAN_TENSORS.get(number)
        if spec is not None:
            kind, message, nested = spec
            tensors += 1
            if tensors > MAX_TENSORS:
                raise _LimitError("more than {} tensors (inputs, outputs, buffers and workspaces "
                                  "together)".format(MAX_TENSORS), base + at)
            _scan_tensor(scan, value_at, pos, kind, counts[kind], message, nested)
            counts[kind] += 1
        elif number == 7:
            attrs += 1
            if attrs > MAX_TENSORS:
                raise _LimitError("more than {} attrs".format(MAX_TENSORS), base + at)
            _scan_flat(scan, value_at, pos, "OpAttr")


# --- quick scan: the common small header in a few C-level steps --------------------------
#
# A header of at most _QUICK_MAX bytes cannot reach MAX_TENSORS, the attr limit or
# MAX_HEADER_ITEMS (a tensor or attr field takes at least 2 bytes, an item at least half a
# byte), so only the wire format and the per-shape dim counts decide. _quick_scan accepts a
# header only when every field is plainly well formed and no shape or dim_range is over
# MAX_DIMS; anything else (including every header _scan_dump_data refuses) goes to
# _scan_dump_data, which finds the rule broken and its offset. So a True here never accepts
# what the full walk would refuse.
_QUICK_MAX = min(2 * MAX_TENSORS, MAX_HEADER_ITEMS // 2)
_HIGH_BYTES = bytes(range(0x80, 0x100))
_NO_FIELDS = frozenset()  # type: frozenset
_QUICK_DUMP_DATA = frozenset((3, 4, 5, 7, 8))  # output, input, buffer, attr, space: walked inside
_QUICK_OUTPUT = frozenset((3, 4, 7, 10))  # shape, original_op, original_shape, dim_range
_QUICK_INPUT = frozenset((3, 6))  # shape, original_shape
_QUICK_SHAPE = frozenset((1,))  # dim
_QUICK_TENSOR_FIELDS = {3: _QUICK_OUTPUT, 4: _QUICK_INPUT}
_QUICK_SHAPE_FIELDS = {3: (3, 7), 4: (3, 6)}  # tensor field -> its Shape fields


def _quick_varint(buf: Any, pos: int, end: int) -> Tuple[int, int]:
    """(value, position after it) of the varint at ``pos``; (-1, pos) when truncated or over 10 bytes."""
    value = shift = 0
    stop = min(end, pos + 10)
    while pos < stop:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return -1, pos


def _quick_walk(buf: Any, pos: int, end: int, wanted: Any) -> Optional[List[Tuple[int, int, int]]]:
    """(number, start, stop) of the fields numbered in ``wanted`` (start = -1 for a varint) of
    the message in ``buf[pos:end]``; None when a field is not plainly well formed."""
    found = []  # type: List[Tuple[int, int, int]]
    while pos < end:
        key = buf[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _quick_varint(buf, pos - 1, end)
        wire = key & 7
        if key < 8:  # field number 0, or a broken varint (-1)
            return None
        if wire == 0:
            stop = pos + 10 if pos + 10 < end else end  # a varint ends within 10 bytes
            while pos < stop and buf[pos] >= 0x80:
                pos += 1
            if pos >= stop:
                return None
            pos += 1
            if key >> 3 in wanted:
                found.append((key >> 3, -1, -1))
        elif wire == 2:
            if pos >= end:
                return None
            length = buf[pos]
            pos += 1
            if length >= 0x80:
                length, pos = _quick_varint(buf, pos - 1, end)
                if length < 0:
                    return None
            stop = pos + length
            if stop > end:
                return None
            if key >> 3 in wanted:
                found.append((key >> 3, pos, stop))
            pos = stop
        elif wire == 1 or wire == 5:
            pos += 8 if wire == 1 else 4
            if pos > end:
                return None
        else:
            return None
    return found


def _quick_dims(buf: Any, start: int, stop: int) -> int:
    """Dims of the Shape message ``buf[start:stop]``; -1 when it is not plainly well formed."""
    fields = _quick_walk(buf, start, stop, _QUICK_SHAPE)
    if fields is None:
        return -1
    dims = 0
    for _number, begin, end in fields:
        if begin < 0:
            dims += 1
        elif end > begin:
            if buf[end - 1] >= 0x80 or end - begin > 10 * (MAX_DIMS + 1):
                return -1
            dims += len(buf[begin:end].translate(None, _HIGH_BYTES))
    return dims


def _quick_tensor(buf: Any, start: int, stop: int, number: int) -> bool:
    """True when the tensor (DumpData field ``number``) in ``buf[start:stop]`` is plainly well
    formed and within MAX_DIMS."""
    fields = _quick_walk(buf, start, stop, _QUICK_TENSOR_FIELDS.get(number, _NO_FIELDS))
    if fields is None:
        return False
    shapes = _QUICK_SHAPE_FIELDS.get(number, ())
    counts = {}  # type: Dict[int, int]  # a Shape (or dim_range) given twice: its dims add up
    for sub, begin, end in fields:
        if begin < 0:
            continue
        if sub in shapes:
            dims = _quick_dims(buf, begin, end)
            if dims < 0:
                return False
        elif _quick_walk(buf, begin, end, _NO_FIELDS) is None:  # original_op, dim_range
            return False
        else:
            dims = 1 if sub == 10 else 0
        counts[sub] = counts.get(sub, 0) + dims
        if counts[sub] > MAX_DIMS:
            return False
    return True


def _quick_scan(buf: Any, start: int, end: int) -> bool:
    """True when _scan_dump_data(buf, start, end, ...) certainly raises nothing (see above)."""
    if end - start > _QUICK_MAX:
        return False
    fields = _quick_walk(buf, start, end, _QUICK_DUMP_DATA)
    if fields is None:
        return False
    for number, begin, stop in fields:
        if begin >= 0 and not _quick_tensor(buf, begin, stop, number):
            return False
    return True


def _scan_error(path: str, exc: Exception, what: str) -> DumpFileError:
    rule, offset = exc.args
    if isinstance(exc, _LimitError):
        return DumpFileError(path, "{} exceeds the reader's limits: {}".format(what, rule), offset)
    return DumpFileError(path, "{} does not decode as DumpData ({})".format(what, rule), offset)


def _try_legacy(path: str, fileobj: Any, file_size: int) -> Tuple[Optional[Any], Optional[DumpFileError]]:
    """(legacy message, None), or (None, error when the file is a legacy file over the limits)."""
    fileobj.seek(0)
    if file_size > MAX_HEADER_LEN or fileobj.read(1)[0] not in _LEGACY_FIRST_BYTES:
        return None, None  # cheap refusal before reading a whole (possibly large) v2 file
    # Walk the structure through a memory map first: it reads the tags (a few pages), skips the
    # tensor bytes, and refuses a v2 file taken for a legacy one after a few bytes.
    mapped = mmap.mmap(fileobj.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        _scan_dump_data(mapped, 0, file_size, 0)
    except _WireError:
        return None, None
    except _LimitError as exc:
        return None, _scan_error(path, exc, "legacy file")
    finally:
        mapped.close()
    fileobj.seek(0)
    try:
        message = _decode(path, fileobj.read(file_size), 0, "file")
    except DumpFileError:
        return None, None
    return (message, None) if message.version != _V2 else (None, None)


def _check_payload_bounds(path: str, header: DumpHeader) -> None:
    for info in header.tensors():
        if info.offset + info.size > header.file_size:
            raise DumpFileError(path, "payload of {}[{}] ({} bytes) runs past end of file ({} bytes)".format(
                info.kind, info.index, info.size, header.file_size), info.offset)


def _check_element_counts(path: str, header: DumpHeader) -> None:
    for info in header.inputs + header.outputs:
        bits = dtype_info(info.data_type)[1]
        if bits is None or (not info.shape and info.size == 0):
            continue
        count = 1
        for dim in info.shape:
            count *= dim
        expected = (count * bits + 7) // 8
        if expected != info.size:
            raise DumpFileError(path, "{}[{}]: shape {} x {} ({} bits) needs {} bytes but size is {}".format(
                info.kind, info.index, list(info.shape), info.dtype_name, bits, expected, info.size),
                info.offset if info.offset is not None else 0)


def _check_legacy_sizes(path: str, message: Any) -> None:
    for kind in KINDS:
        for index, proto in enumerate(_repeated(message, kind)):
            if proto.size and proto.size != len(proto.data):
                raise DumpFileError(path, "legacy {}[{}]: size {} but data holds {} bytes".format(
                    kind, index, proto.size, len(proto.data)), 0)


def _read_v2_prefix(path: str, fileobj: Any, file_size: int) -> Tuple[Optional[Any], Optional[int], Optional[DumpFileError]]:
    """(message, header_len, error) for the v2 reading of the file."""
    prefix = fileobj.read(12 if file_size >= 12 else 8)
    if prefix[8:12] == _NANO_MAGIC:
        raise DumpFileError(path, "Nano TLV dump (magic 0x5A5A5A5A) is not supported", 8)
    (header_len,) = _PREFIX.unpack(prefix[:8])
    if not 1 <= header_len <= MAX_HEADER_LEN:
        return None, header_len, DumpFileError(
            path, "header length {} outside [1, 2**31)".format(header_len), 0)
    if header_len > MAX_READ_HEADER_LEN:
        return None, header_len, DumpFileError(
            path, "header length {} exceeds the reader's limit of {} bytes (64 MiB)".format(
                header_len, MAX_READ_HEADER_LEN), 0)
    if 8 + header_len > file_size:
        return None, header_len, DumpFileError(
            path, "header length {} runs past end of file ({} bytes)".format(header_len, file_size), 0)
    fileobj.seek(8)
    data = fileobj.read(header_len)
    if len(data) != header_len:
        return None, header_len, DumpFileError(path, "file shrank while reading its header", 8 + len(data))
    try:
        if not _quick_scan(data, 0, header_len):
            _scan_dump_data(data, 0, header_len, 8)
    except (_WireError, _LimitError) as exc:
        return None, header_len, _scan_error(path, exc, "header")
    try:
        return _decode(path, data, 8, "header"), header_len, None
    except DumpFileError as exc:
        return None, header_len, exc


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


def _common_header(head: bytes, file_size: int) -> Tuple[Optional[Any], int]:
    """(DumpData message, header length) of the common file, decoded from ``head``: v2, its
    prefix and header within ``head``, passing the quick wire check, version "2.0". (None, 0)
    for any other file, which the full reader then reads (and finds the rule it breaks)."""
    header_len = _PREFIX.unpack_from(head)[0] if len(head) >= 12 and file_size > 8 else 0
    if not (1 <= header_len <= MAX_READ_HEADER_LEN and 8 + header_len <= min(file_size, len(head))
            and head[8:12] != _NANO_MAGIC):
        return None, 0
    data = head[8:8 + header_len]
    if not _quick_scan(data, 0, header_len):
        return None, 0
    message = dump_schema.DumpData()
    try:
        message.ParseFromString(data)
    except Exception:  # read_header raises the rule (_decode)
        return None, 0
    return (message, header_len) if message.version == _V2 else (None, 0)


#: (dtype name, shape, format name, original shape) of one tensor, as :func:`quick_tensor_fields` gives it.
TensorFields = Tuple[str, Tuple[int, ...], str, Tuple[int, ...]]


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


def _quick_fields(protos: Any) -> Optional[List[Tuple[TensorFields, int]]]:
    """(fields, payload size) of each input or output, or None when one needs the full reader:
    an unknown data type or format, or a size its shape does not need (_check_element_counts)."""
    found = []  # type: List[Tuple[TensorFields, int]]
    for proto in protos:
        data_type, fmt, size = proto.data_type, proto.format, int(proto.size)
        dtype_name, format_name = _DATA_TYPE_NAMES.get(data_type), _FORMAT_NAMES.get(fmt)
        if dtype_name is None or format_name is None:
            return None
        shape = tuple(proto.shape.dim)
        bits = _DTYPES.get(data_type, _UNKNOWN_DTYPE)[1]
        if bits is not None and (shape or size):
            count = 1
            for dim in shape:
                count *= dim
            if (count * bits + 7) // 8 != size:
                return None
        found.append(((dtype_name, shape, format_name, tuple(proto.original_shape.dim)), size))
    return found


class DumpFile(DumpHeader):
    """A validated dump file whose payloads are read on demand (memory-mapped).

    Use as a context manager or call :meth:`close`; arrays already returned stay valid.
    """

    _mmap = None  # type: Optional[mmap.mmap]

    @classmethod
    def open(cls, path: Union[str, "os.PathLike[str]"], strict: bool = False) -> "DumpFile":
        found = read_header(path, strict)
        self = cls.__new__(cls)
        self.__dict__.update(found.__dict__)
        self._mmap = None
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


# --- writing ------------------------------------------------------------------

class DumpTensor(object):
    """One input/output to write: device-layout ``array`` plus header fields.

    ``data_type`` defaults from the array dtype (pass it, with a storage-typed array and
    ``shape``, for types numpy lacks); ``format`` is the device layout name;
    ``shape``/``original_shape`` default to the array shape. ``original_name`` set means
    an ``original_op`` entry (outputs only) with ``original_output_index``, the raw GE
    ``original_data_type`` (default: GE's number for ``data_type``) and
    ``original_format`` (default: ``format`` for plain layouts, else "ND").
    """

    def __init__(self, array: Any, data_type: Union[None, str, int] = None, format: Union[str, int] = "ND",
                 shape: Optional[Sequence[int]] = None, original_shape: Optional[Sequence[int]] = None,
                 original_name: Optional[str] = None, original_output_index: int = 0,
                 original_data_type: Optional[int] = None, original_format: Union[None, str, int] = None,
                 sub_format: int = 0, address: int = 0) -> None:
        self.array = np.asarray(array)
        self.data_type = _data_type_of(self.array, data_type)
        self.format = _enum_value("format", format, dump_schema.format_value)
        self.shape = tuple(int(d) for d in (self.array.shape if shape is None else shape))
        self.original_shape = self.shape if original_shape is None else tuple(int(d) for d in original_shape)
        self.original_name = original_name
        self.original_output_index = original_output_index
        self.original_data_type = (_GE_DATA_TYPE.get(self.data_type, _GE_UNDEFINED)
                                   if original_data_type is None else original_data_type)
        if original_format is None:
            original_format = self.format if dump_schema.format_name(self.format) in _PLAIN_FORMATS else "ND"
        self.original_format = _enum_value("original_format", original_format, dump_schema.format_value)
        self.sub_format = sub_format
        self.address = address
        self._check_size()

    def _check_size(self) -> None:
        bits = dtype_info(self.data_type)[1]
        if bits is None:
            return
        count = 1
        for dim in self.shape:
            count *= dim
        if (count * bits + 7) // 8 != self.array.nbytes:
            raise OptionError("array", self.array.shape, "{} bytes do not match shape {} of {}".format(
                self.array.nbytes, list(self.shape), dump_schema.data_type_name(self.data_type)))


def ge_origin_data_type(data_type: Union[str, int]) -> int:
    """GE's own ``ge::DataType`` number of a DumpData data type (name or value), as the writer puts it
    into ``original_op.data_type`` (reference §1.4: FLOAT 0, FLOAT16 1, ...; 28 when GE has none)."""
    value = _enum_value("data_type", data_type, dump_schema.data_type_value)
    return _GE_DATA_TYPE.get(value, _GE_UNDEFINED)


def _enum_value(option: str, value: Union[str, int], lookup: Any) -> int:
    try:
        return lookup(value)
    except KeyError:
        raise OptionError(option, value, "not a DumpData enum name")


def _data_type_of(array: np.ndarray, data_type: Union[None, str, int]) -> int:
    if data_type is not None:
        return _enum_value("data_type", data_type, dump_schema.data_type_value)
    key = array.dtype.name  # byte order is normalised when writing
    if key not in _FROM_NUMPY:
        raise OptionError("data_type", str(array.dtype), "no DumpData data type for this numpy dtype; pass data_type")
    return _FROM_NUMPY[key]


def _as_tensor(item: Any) -> DumpTensor:
    if isinstance(item, DumpTensor):
        return item
    if isinstance(item, dict):
        return DumpTensor(**item)
    return DumpTensor(item)


def _as_blob(item: Any) -> np.ndarray:
    return np.frombuffer(item, dtype="u1") if isinstance(item, (bytes, bytearray, memoryview)) else np.asarray(item)


def _fill_tensor(proto: Any, tensor: DumpTensor, is_output: bool) -> None:
    proto.data_type = tensor.data_type
    proto.format = tensor.format
    proto.shape.dim.extend(tensor.shape)
    proto.size = tensor.array.nbytes
    proto.original_shape.dim.extend(tensor.original_shape)
    proto.sub_format = tensor.sub_format
    proto.address = tensor.address
    if is_output and tensor.original_name is not None:
        original = proto.original_op
        original.name = tensor.original_name
        original.output_index = tensor.original_output_index & 0xFFFFFFFF  # GE casts -1 to uint32
        original.data_type = tensor.original_data_type
        original.format = tensor.original_format


def build_header(op_name: str, outputs: Iterable[Any] = (), inputs: Iterable[Any] = (),
                 buffers: Iterable[Any] = (), workspaces: Iterable[Any] = (), dump_time: Optional[int] = None,
                 version: str = _V2, attrs: Optional[Dict[str, str]] = None) -> Any:
    """DumpData header for the given tensors (arrays, dicts of DumpTensor args, or DumpTensors;
    buffers/workspaces: bytes or arrays). ``dump_time`` defaults to now (microseconds)."""
    header = dump_schema.DumpData()
    header.version = version
    header.dump_time = int(time.time() * 1000000) if dump_time is None else int(dump_time)
    header.op_name = op_name
    for item in outputs:
        _fill_tensor(header.output.add(), _as_tensor(item), True)
    for item in inputs:
        _fill_tensor(header.input.add(), _as_tensor(item), False)
    for item in buffers:
        header.buffer.add().size = _as_blob(item).nbytes
    for name, value in sorted((attrs or {}).items()):
        header.attr.add(name=name, value=value)
    for item in workspaces:
        header.space.add().size = _as_blob(item).nbytes
    return header


def encode_header(header: Any) -> bytes:
    """Serialized header bytes, identical to the AICPU writer's encoding."""
    return header.SerializeToString(deterministic=True)


def _little_endian_bytes(array: np.ndarray) -> memoryview:
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    return memoryview(array.reshape(-1).view(np.uint8))


def _check_readable(encoded: bytes) -> None:
    """OptionError when read_header would refuse this header (rules 3 and 5)."""
    if len(encoded) > MAX_READ_HEADER_LEN:
        raise OptionError("outputs", "a {}-byte header".format(len(encoded)),
                          "the reader takes headers of at most {} bytes".format(MAX_READ_HEADER_LEN))
    try:
        _scan_dump_data(encoded, 0, len(encoded), 8)
    except _LimitError as exc:
        raise OptionError("outputs", "the header", "over the reader's limits: {}".format(exc.args[0]))


def write_dump_file(path: Union[str, "os.PathLike[str]"], op_name: str, outputs: Iterable[Any] = (),
                    inputs: Iterable[Any] = (), buffers: Iterable[Any] = (), workspaces: Iterable[Any] = (),
                    dump_time: Optional[int] = None, version: str = _V2, attrs: Optional[Dict[str, str]] = None,
                    fsync: bool = False) -> int:
    """Write a v2 dump file atomically (temporary name + rename); return its size in bytes.

    Arguments as :func:`build_header`; payloads follow in the order inputs, outputs,
    buffers, workspaces.
    """
    path = os.fspath(path)
    output_tensors = [_as_tensor(item) for item in outputs]
    input_tensors = [_as_tensor(item) for item in inputs]
    buffer_blobs = [_as_blob(item) for item in buffers]
    space_blobs = [_as_blob(item) for item in workspaces]
    header = build_header(op_name, output_tensors, input_tensors, buffer_blobs, space_blobs, dump_time, version, attrs)
    encoded = encode_header(header)
    _check_readable(encoded)
    payloads = [t.array for t in input_tensors] + [t.array for t in output_tensors] + buffer_blobs + space_blobs
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path)[:64] + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fileobj:
            fileobj.write(_PREFIX.pack(len(encoded)))
            fileobj.write(encoded)
            for array in payloads:
                fileobj.write(_little_endian_bytes(array))
            if fsync:
                fileobj.flush()
                os.fsync(fileobj.fileno())
            written = fileobj.tell()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return written
