"""The dump-file writer: byte-exact v2 files (see "Writing" in :mod:`.dump_file`, where these
names are public). :func:`build_header` makes the DumpData header of the tensors,
:func:`encode_header` serializes it as the AICPU writer does, and :func:`write_dump_file` writes
prefix, header and payloads atomically (temporary name + rename); a header the reader would
refuse (rules 3 and 5) is an OptionError instead.
"""
import os
import sys
import tempfile
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._written import fd_identity, note_written
from ..errors import OptionError
from . import dump_schema
from ._dump_layout import (DATA_TYPE_NAMES as _DATA_TYPE_NAMES, FORMAT_NAMES as _FORMAT_NAMES, FROM_NUMPY as _FROM_NUMPY,
                           GE_DATA_TYPE as _GE_DATA_TYPE, GE_UNDEFINED as _GE_UNDEFINED,
                           MAX_DIMS, MAX_HEADER_ITEMS, MAX_READ_HEADER_LEN, MAX_TENSORS, NANO_MAGIC as _NANO_MAGIC,
                           PLAIN_FORMATS as _PLAIN_FORMATS, PREFIX as _PREFIX, V2 as _V2,
                           bits_per_element as _bits_per_element)
from ._dump_walk import LimitError as _LimitError, scan_dump_data as _scan_dump_data

__all__ = ["DumpTensor", "ge_origin_data_type", "build_header", "encode_header", "write_dump_file"]


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
        self.array = array if type(array) is np.ndarray else np.asarray(array)
        self.data_type = _data_type_of(self.array, data_type)
        found = _FORMAT_VALUES.get((str, format)) if type(format) is str else None  # (the common call, inline)
        self.format = _format_value("format", format) if found is None else found
        # an ndarray's own shape is a tuple of ints already; an original shape equal to it is that tuple
        self.shape = self.array.shape if shape is None else tuple(map(int, shape))
        same = original_shape is None or (type(original_shape) is tuple and original_shape == self.shape)
        self.original_shape = self.shape if same else tuple(map(int, original_shape))
        self.original_name = original_name
        self.original_output_index = original_output_index
        self.original_data_type = (_GE_DATA_TYPE.get(self.data_type, _GE_UNDEFINED)
                                   if original_data_type is None else original_data_type)
        if original_format is None and type(self.format) is int:
            self.original_format = _default_original_format(self.format)
        else:
            if original_format is None:
                original_format = self.format if dump_schema.format_name(self.format) in _PLAIN_FORMATS else "ND"
            self.original_format = _format_value("original_format", original_format)
        self.sub_format = sub_format
        self.address = address
        self._check_size()

    def _check_size(self) -> None:
        bits = _bits_per_element(self.data_type)
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


#: Format values by the name or int given (``dump_schema.format_value``'s answers, each looked up once).
_FORMAT_VALUES = {}  # type: Dict[Tuple[type, Union[str, int]], int]


def _format_value(option: str, value: Union[str, int]) -> int:
    """``_enum_value(option, value, dump_schema.format_value)``, remembered per (type, value): a
    step's 1,000s of tensors name a handful of formats."""
    key = (type(value), value)
    try:
        return _FORMAT_VALUES[key]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    found = _enum_value(option, value, dump_schema.format_value)
    if type(value) in (str, int) and len(_FORMAT_VALUES) < 1024:
        _FORMAT_VALUES[key] = found
    return found


#: The default original format of each format value met: itself for a plain layout, else ND.
_DEFAULT_ORIGINAL_FORMATS = {}  # type: Dict[int, int]


def _default_original_format(format_value: int) -> int:
    found = _DEFAULT_ORIGINAL_FORMATS.get(format_value)
    if found is None:
        plain = dump_schema.format_name(format_value) in _PLAIN_FORMATS
        found = format_value if plain else _format_value("original_format", "ND")
        if len(_DEFAULT_ORIGINAL_FORMATS) < 1024:
            _DEFAULT_ORIGINAL_FORMATS[format_value] = found
    return found


def _enum_value(option: str, value: Union[str, int], lookup: Any) -> int:
    try:
        return lookup(value)
    except KeyError:
        raise OptionError(option, value, "not a DumpData enum name")


#: numpy dtype -> DumpData data type, for the dtypes met so far: ``dtype.name`` is a Python-level
#: property, a measurable share of a small tensor's cost when a step writes 1,000s of them.
_FROM_DTYPE = {}  # type: Dict[np.dtype, int]


def _data_type_of(array: np.ndarray, data_type: Union[None, str, int]) -> int:
    if data_type is not None:
        return _enum_value("data_type", data_type, dump_schema.data_type_value)
    known = _FROM_DTYPE.get(array.dtype)
    if known is not None:
        return known
    key = array.dtype.name  # byte order is normalised when writing
    if key not in _FROM_NUMPY:
        raise OptionError("data_type", str(array.dtype), "no DumpData data type for this numpy dtype; pass data_type")
    _FROM_DTYPE[array.dtype] = _FROM_NUMPY[key]
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


def _tensors_header(op_name: str, outputs: Sequence[DumpTensor], inputs: Sequence[DumpTensor], dump_time: int,
                    version: str) -> bytes:
    """``encode_header(build_header(op_name, outputs, inputs, dump_time=dump_time, version=version))``,
    built from pieces: a message serializes its fields in field-number order and a repeated
    message field as its elements one after the other, so the header is the encoding of fields
    1-2 (version, dump_time), each output's and each input's own field-3/field-4 entry, then
    field 6 (op_name). An entry depends on its tensor's fields only, and a step's tensors share
    few of them (an unrolled RNN repeats its cell's 20 times): each distinct entry is built
    with protobuf once (:func:`_entry_bytes`), not a message per tensor per file; fields 1-2 and
    6 likewise (:func:`_start_and_end`)."""
    start, end = _start_and_end(version, dump_time, op_name)
    parts = [start]
    parts.extend([_entry_bytes(t, True) for t in outputs])
    parts.extend([_entry_bytes(t, False) for t in inputs])
    parts.append(end)
    return b"".join(parts)


#: Serialized field 1 (version) of a DumpData header, by version string (a handful at most).
_VERSION_FIELDS = {}  # type: Dict[str, bytes]
_UINT64_END = 1 << 64


def _start_and_end(version: str, dump_time: int, op_name: str) -> Tuple[bytes, bytes]:
    """Fields 1-2 (version, dump_time) and field 6 (op_name) of a header as protobuf serializes
    them: the version's field as protobuf wrote it once per version; dump_time (uint64) and
    op_name (string) as protobuf writes a proto3 scalar (omitted when 0 or empty; else tag, then
    the varint, or the varint length and UTF-8). Anything protobuf might refuse or encode
    otherwise (not an exact int in range, not a str, text UTF-8 cannot encode) goes through a
    message as before, which refuses it as before."""
    found = _VERSION_FIELDS.get(version) if type(version) is str else None
    if found is not None and type(dump_time) is int and 0 <= dump_time < _UINT64_END and type(op_name) is str:
        try:
            name = op_name.encode("utf-8")
        except UnicodeEncodeError:
            name = None
        if name is not None:
            start = found + b"\x10" + _varint(dump_time) if dump_time else found
            size = len(name)
            return start, (b"\x32" + (_ONE_BYTE[size] if size < 0x80 else _varint(size)) + name if name else b"")
    start_message = dump_schema.DumpData()
    start_message.version = version
    start_message.dump_time = dump_time
    end_message = dump_schema.DumpData()
    end_message.op_name = op_name
    if type(version) is str and len(_VERSION_FIELDS) < 64:
        only_version = dump_schema.DumpData()
        only_version.version = version
        _VERSION_FIELDS[version] = only_version.SerializeToString(deterministic=True)
    return start_message.SerializeToString(deterministic=True), end_message.SerializeToString(deterministic=True)


#: Serialized header entries of single tensors (:func:`_entry_bytes`), emptied when full.
_ENTRIES = {}  # type: Dict[Tuple[Any, ...], bytes]
_MAX_ENTRIES = 1 << 14


def _entry_bytes(tensor: DumpTensor, is_output: bool) -> bytes:
    """The serialized ``output``/``input`` entry (field tag, length, message) of ``tensor`` in a
    DumpData header: what protobuf serialized for a header of this one tensor, built once per
    distinct set of header fields. Only with exact ints and str in its fields (a float equal to
    an int would share its key while protobuf refuses it, see :func:`_exact_fields`): any other
    tensor is built each time, and refused or encoded as before."""
    original = None
    if is_output and tensor.original_name is not None:
        original = (tensor.original_name, tensor.original_output_index, tensor.original_data_type,
                    tensor.original_format)
    if not _exact_fields(tensor, original):
        return _single_entry(tensor, is_output)
    if original is not None:  # each op's own name: the entry is put together around it
        return _entry_with_original(tensor, original)
    key = (is_output, tensor.data_type, tensor.format, tensor.shape, tensor.array.nbytes, tensor.original_shape,
           tensor.sub_format, tensor.address, original)
    found = _ENTRIES.get(key)
    if found is None:
        found = _remember(_ENTRIES, key, _single_entry(tensor, is_output))
    return found


def _remember(cache: Dict[Any, Any], key: Any, value: Any) -> Any:
    """``value``, kept in ``cache`` under ``key`` (emptied first when it holds _MAX_ENTRIES)."""
    if len(cache) >= _MAX_ENTRIES:
        cache.clear()
    cache[key] = value
    return value


#: (fields 1-3, original_op's fields 2-4, fields 6-9) of an output entry, by its fields but the original name.
_AROUND_NAMES = {}  # type: Dict[Tuple[Any, ...], Tuple[bytes, bytes, bytes]]


def _entry_with_original(tensor: DumpTensor, original: Tuple[Any, ...]) -> bytes:
    """The output entry of ``tensor`` with its ``original_op`` (field 4), whose name is each op's
    own: the output's fields before it (1-3) and after it (6-9) and original_op's fields after
    its name (2-4) are serialized by protobuf once per distinct set of them, set as
    :func:`_fill_tensor` sets them; the name and the lengths are put in as protobuf writes them
    (a string field: tag, varint length, UTF-8; omitted when empty)."""
    key = (tensor.data_type, tensor.format, tensor.shape, tensor.array.nbytes, tensor.original_shape,
           tensor.sub_format, tensor.address) + original[1:]
    pieces = _AROUND_NAMES.get(key)
    if pieces is None:
        pieces = _remember(_AROUND_NAMES, key, _pieces_around_name(tensor, original))
    before, original_rest, after = pieces
    name = original[0].encode("utf-8")
    size = len(name)  # lengths under 128 (most): their one-byte varint without a call
    original_op = (b"\x0a" + (_ONE_BYTE[size] if size < 0x80 else _varint(size)) + name if name else b"") + original_rest
    size = len(original_op)
    body = b"".join((before, b"\x22", _ONE_BYTE[size] if size < 0x80 else _varint(size), original_op, after))
    size = len(body)
    return b"\x1a" + (_ONE_BYTE[size] if size < 0x80 else _varint(size)) + body


def _pieces_around_name(tensor: DumpTensor, original: Tuple[Any, ...]) -> Tuple[bytes, bytes, bytes]:
    before = dump_schema.OpOutput()
    before.data_type = tensor.data_type
    before.format = tensor.format
    before.shape.dim.extend(tensor.shape)
    rest = dump_schema.OriginalOp()
    rest.output_index = original[1] & 0xFFFFFFFF  # GE casts -1 to uint32
    rest.data_type = original[2]
    rest.format = original[3]
    after = dump_schema.OpOutput()
    after.size = tensor.array.nbytes
    after.original_shape.dim.extend(tensor.original_shape)
    after.sub_format = tensor.sub_format
    after.address = tensor.address
    return tuple(m.SerializeToString(deterministic=True) for m in (before, rest, after))  # type: ignore


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


#: The varint bytes of ``value >> 14`` by that value (:func:`_varint`): a step's dump times share them.
_VARINT_HIGH = {}  # type: Dict[int, bytes]


def _varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative int (a length, a dump time)."""
    if value < 0x80:
        return _ONE_BYTE[value]
    if value >= 1 << 14:  # two continued 7-bit groups, then the varint of the rest (remembered)
        high = value >> 14
        rest = _VARINT_HIGH.get(high)
        if rest is None:
            rest = _remember(_VARINT_HIGH, high, _varint_loop(high))
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80)) + rest
    return _varint_loop(value)


def _varint_loop(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _single_entry(tensor: DumpTensor, is_output: bool) -> bytes:
    single = dump_schema.DumpData()
    _fill_tensor(single.output.add() if is_output else single.input.add(), tensor, is_output)
    return single.SerializeToString(deterministic=True)


def _exact_fields(tensor: DumpTensor, original: Optional[Tuple[Any, ...]]) -> bool:
    """The header fields of ``tensor`` exact ints, its original name a str, its shapes tuples (of
    the ints DumpTensor made them: an integral non-int dim put there since would be written as its
    int value where protobuf refused it)."""
    if original is not None and not (type(original[0]) is str and type(original[1]) is int
                                     and type(original[2]) is int and type(original[3]) is int):
        return False
    return (type(tensor.data_type) is int and type(tensor.format) is int and type(tensor.sub_format) is int
            and type(tensor.address) is int and type(tensor.shape) is tuple and type(tensor.original_shape) is tuple)


#: Byte orders whose arrays hold their bytes as the file does (little-endian): "|" (one byte), "<",
#: and "=" on a little-endian machine.
_FILE_BYTE_ORDERS = frozenset("|<=" if sys.byteorder == "little" else "|<")


def _little_endian_bytes(array: np.ndarray) -> Any:
    """The file's bytes of ``array``: the array itself where a write or ``bytes.join`` can take its
    buffer as they are (C-contiguous, little-endian, a plain numeric dtype, whose buffer numpy
    always exports: a step's 1,000s of small tensors, no view made), else a little-endian view."""
    dtype = array.dtype
    if array.flags.c_contiguous and dtype.byteorder in _FILE_BYTE_ORDERS and dtype.kind in "biufc":
        return array
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    return memoryview(array.reshape(-1).view(np.uint8))


def _within_limits(encoded: bytes, tensors: Sequence[DumpTensor], blobs: int, attrs: int) -> bool:
    """True when the header protobuf serialized from these tensors certainly passes the reader's
    walk (:func:`._dump_walk.scan_dump_data`), without walking it: it is well-formed (protobuf
    wrote it), counts at most ``MAX_TENSORS`` tensors and attrs and ``MAX_DIMS`` dims per shape,
    and each counted item (a field, or a packed dim counting two) takes at least one byte, so a
    header of at most ``MAX_HEADER_ITEMS // 2`` bytes cannot count too many. The walk of each of
    a step's 1,000s of small headers cost more than building it."""
    if len(encoded) > MAX_HEADER_ITEMS // 2 or len(tensors) + blobs > MAX_TENSORS or attrs > MAX_TENSORS:
        return False
    return all(len(t.shape) <= MAX_DIMS and len(t.original_shape) <= MAX_DIMS for t in tensors)


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
                    fsync: bool = False, atomic: bool = True) -> int:
    """Write a v2 dump file atomically (temporary name + rename); return its size in bytes.

    Arguments as :func:`build_header`; payloads follow in the order inputs, outputs,
    buffers, workspaces. ``atomic=False`` writes ``path`` in place (removed again when the write
    fails): only for a writer whose folder carries its own incomplete-marker protocol, such as the
    emulator's step folders, where the rename per file would double the cost of a small file.
    """
    path = os.fspath(path)
    output_tensors = [item if type(item) is DumpTensor else _as_tensor(item) for item in outputs]
    input_tensors = [item if type(item) is DumpTensor else _as_tensor(item) for item in inputs]
    buffer_blobs = [_as_blob(item) for item in buffers]
    space_blobs = [_as_blob(item) for item in workspaces]
    dump_time = int(time.time() * 1000000) if dump_time is None else int(dump_time)
    if not (buffer_blobs or space_blobs or attrs or atomic or fsync):
        written = _tensors_in_place(path, op_name, output_tensors, input_tensors, dump_time, version)
        if written is not None:
            return written
    if buffer_blobs or space_blobs or attrs:
        encoded = encode_header(build_header(op_name, output_tensors, input_tensors, buffer_blobs, space_blobs,
                                             dump_time, version, attrs))
    else:
        encoded = _tensors_header(op_name, output_tensors, input_tensors, dump_time, version)
    within = _within_limits(encoded, output_tensors + input_tensors, len(buffer_blobs) + len(space_blobs),
                            len(attrs or {}))
    if not within:
        _check_readable(encoded)  # the walk names the limit a large header breaks
    payloads = [t.array for t in input_tensors] + [t.array for t in output_tensors] + buffer_blobs + space_blobs
    if not atomic and not fsync and sum(a.nbytes for a in payloads) <= _ONE_WRITE_BYTES:
        fields = _decoded_fields(version, encoded, (input_tensors, output_tensors)) if within else None
        return _write_in_place(path, [_PREFIX.pack(len(encoded)), encoded] + [_little_endian_bytes(a) for a in payloads],
                               _PREFIX.size + len(encoded), fields)
    if atomic:
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path)[:64] + ".", suffix=".tmp")
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o644)
        tmp = path
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
        if atomic:
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return written


#: Payloads up to this size are joined and written in one system call (the file object, its
#: buffer and its per-payload writes cost more than a small tensor's bytes); larger ones stream.
_ONE_WRITE_BYTES = 1 << 20
_IN_PLACE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)


def _tensors_in_place(path: str, op_name: str, outputs: Sequence[DumpTensor], inputs: Sequence[DumpTensor],
                      dump_time: int, version: str) -> Optional[int]:
    """:func:`write_dump_file`'s in-place write of a file of tensors only (no buffer, workspace or
    attr: an emulated step's 1,000s of files), its checks, payloads and decoded fields (see
    :func:`_decoded_fields`) taken in one pass over its tensors; the same bytes and notes as the
    general path. None, nothing written, where that path would do more (payloads over
    _ONE_WRITE_BYTES, a header not certainly within the reader's limits, see
    :func:`_within_limits`): the caller then takes it."""
    encoded = _tensors_header(op_name, outputs, inputs, dump_time, version)
    if len(encoded) > MAX_HEADER_ITEMS // 2 or len(outputs) + len(inputs) > MAX_TENSORS:
        return None
    decoded = _quick_decoded(version, encoded)
    parts = [_PREFIX.pack(len(encoded)), encoded]
    groups = []  # type: List[Tuple[Any, ...]]
    size = 0
    for group in (inputs, outputs):
        fields = []  # type: List[Tuple[str, Tuple[int, ...], str, Tuple[int, ...]]]
        for tensor in group:
            shape, original_shape = tensor.shape, tensor.original_shape
            if len(shape) > MAX_DIMS or len(original_shape) > MAX_DIMS:
                return None
            array = tensor.array
            size += array.nbytes
            parts.append(_little_endian_bytes(array))
            if decoded:
                dtype_name, format_name = _DATA_TYPE_NAMES.get(tensor.data_type), _FORMAT_NAMES.get(tensor.format)
                decoded = dtype_name is not None and format_name is not None
                fields.append((dtype_name, shape, format_name, original_shape))
        groups.append(tuple(fields))
    if size > _ONE_WRITE_BYTES:
        return None
    return _write_in_place(path, parts, _PREFIX.size + len(encoded), tuple(groups) if decoded else None)


def _quick_decoded(version: str, encoded: bytes) -> bool:
    """Whether :func:`.dump_file.quick_tensor_fields` decodes a header of ``version`` serialized as
    ``encoded`` (within the reader's limits) at all; its tensors' names decide the rest."""
    return version == _V2 and 1 <= len(encoded) <= MAX_READ_HEADER_LEN and encoded[:4] != _NANO_MAGIC


def _decoded_fields(version: str, encoded: bytes, tensors: Sequence[Sequence[DumpTensor]]) -> Optional[Tuple[Tuple[Any, ...], ...]]:
    """(inputs, outputs) tensor fields that :func:`.dump_file.quick_tensor_fields` decodes from
    the file of a header of ``version`` (serialized as ``encoded``, within the reader's limits: its walk
    passes), taken from the DumpTensors ``tensors`` (inputs, outputs) it was built from
    (:func:`_fill_tensor`: the same numbers) by the rules of :func:`._dump_rules.quick_fields`
    (every name known; each payload's size is what its shape needs, as DumpTensor checked), without
    parsing the bytes back; None where the quick decode would decline (the full reader then
    describes the file)."""
    if not _quick_decoded(version, encoded):
        return None
    found = []  # type: List[Tuple[Any, ...]]
    for group in tensors:
        fields = []  # type: List[Tuple[str, Tuple[int, ...], str, Tuple[int, ...]]]
        for tensor in group:
            dtype_name, format_name = _DATA_TYPE_NAMES.get(tensor.data_type), _FORMAT_NAMES.get(tensor.format)
            if dtype_name is None or format_name is None:
                return None
            fields.append((dtype_name, tensor.shape, format_name, tensor.original_shape))
        found.append(tuple(fields))
    return tuple(found)


def _write_in_place(path: str, parts: Sequence[Any], header_end: int, fields: Any = None) -> int:
    """``parts`` written to ``path`` (created or truncated) with one ``os.write`` (more only when
    the system writes part of it); removed again when the write fails. Returns the size. The
    file's sha256, its first ``header_end`` bytes (prefix and header) and ``fields`` (see
    :func:`_decoded_fields`) are noted (:mod:`npu_dump_hook._written`): the bundle writer then
    neither reads, hashes nor decodes it again."""
    data = memoryview(b"".join(parts))
    fd = os.open(path, _IN_PLACE_FLAGS, 0o644)
    try:
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
            identity = fd_identity(fd, path)  # after the last write: no lstat of the path again
        finally:
            os.close(fd)
    except BaseException:
        if os.path.exists(path):
            os.unlink(path)
        raise
    note_written(path, (data,), bytes(data[:header_end]), fields, identity, len(data))
    return len(data)
