"""The validation rules of the dump-file reader (numbered in :mod:`.dump_file`) that decide
whether and how a file is read: the v2 prefix and header (rules 1-5: :func:`read_v2_prefix`),
the legacy reading (:func:`try_legacy`), payload bounds and element counts of a decoded header
(rules 6, 7: :func:`check_payload_bounds`, :func:`check_element_counts`), legacy sizes, and the
quick path of the common file (:func:`common_header`, :func:`quick_fields`). Each broken rule is
a DumpFileError with the path, the byte offset and the rule. ``header`` arguments are
:class:`.dump_file.DumpHeader` objects.
"""
import mmap
from typing import Any, List, Optional, Tuple

from ..errors import DumpFileError
from . import dump_schema
from ._dump_layout import (DATA_TYPE_NAMES as _DATA_TYPE_NAMES, DTYPES as _DTYPES, FORMAT_NAMES as _FORMAT_NAMES,
                           KINDS, LEGACY_FIRST_BYTES as _LEGACY_FIRST_BYTES, MAX_HEADER_LEN, MAX_READ_HEADER_LEN,
                           NANO_MAGIC as _NANO_MAGIC, PREFIX as _PREFIX, UNKNOWN_DTYPE as _UNKNOWN_DTYPE,
                           V2 as _V2, bits_per_element as _bits_per_element, repeated as _repeated)
from ._dump_walk import (LimitError as _LimitError, WireError as _WireError, quick_scan as _quick_scan,
                         scan_dump_data as _scan_dump_data)

__all__ = ["try_legacy", "check_payload_bounds", "check_element_counts", "check_legacy_sizes", "read_v2_prefix",
           "common_header", "quick_fields", "TensorFields"]

#: (dtype name, shape, format name, original shape) of one tensor, as :func:`.dump_file.quick_tensor_fields` gives it.
TensorFields = Tuple[str, Tuple[int, ...], str, Tuple[int, ...]]


def _decode(path: str, data: bytes, offset: int, what: str) -> Any:
    message = dump_schema.DumpData()
    try:
        message.ParseFromString(data)
    except Exception as exc:  # DecodeError, or RuntimeError/UnicodeError from some backends
        raise DumpFileError(path, "{} does not decode as DumpData ({}: {})".format(
            what, type(exc).__name__, exc), offset)
    return message


def _scan_error(path: str, exc: Exception, what: str) -> DumpFileError:
    rule, offset = exc.args
    if isinstance(exc, _LimitError):
        return DumpFileError(path, "{} exceeds the reader's limits: {}".format(what, rule), offset)
    return DumpFileError(path, "{} does not decode as DumpData ({})".format(what, rule), offset)


def try_legacy(path: str, fileobj: Any, file_size: int) -> Tuple[Optional[Any], Optional[DumpFileError]]:
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


def check_payload_bounds(path: str, header: Any) -> None:
    for info in header.tensors():
        if info.offset + info.size > header.file_size:
            raise DumpFileError(path, "payload of {}[{}] ({} bytes) runs past end of file ({} bytes)".format(
                info.kind, info.index, info.size, header.file_size), info.offset)


def check_element_counts(path: str, header: Any) -> None:
    for info in header.inputs + header.outputs:
        bits = _bits_per_element(info.data_type)
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


def check_legacy_sizes(path: str, message: Any) -> None:
    for kind in KINDS:
        for index, proto in enumerate(_repeated(message, kind)):
            if proto.size and proto.size != len(proto.data):
                raise DumpFileError(path, "legacy {}[{}]: size {} but data holds {} bytes".format(
                    kind, index, proto.size, len(proto.data)), 0)


def read_v2_prefix(path: str, fileobj: Any, file_size: int) -> Tuple[Optional[Any], Optional[int], Optional[DumpFileError]]:
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


def common_header(head: bytes, file_size: int) -> Tuple[Optional[Any], int]:
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

def quick_fields(protos: Any) -> Optional[List[Tuple[TensorFields, int]]]:
    """(fields, payload size) of each input or output, or None when one needs the full reader:
    an unknown data type or format, or a size its shape does not need (check_element_counts)."""
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
