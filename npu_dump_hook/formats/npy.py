""".npy files, and TensorFlow ``DebugIdentity`` file dumps turned into them, without TensorFlow.

A ``DebugIdentity`` op with a ``file://`` URL writes one ``Event`` protobuf per tensor
(``Event.summary(5).value(1).tensor(8)``, a ``TensorProto`` with ``tensor_content``).
:func:`debug_event_to_npy` reads only the protobuf headers before the tensor bytes and turns
the file into an ``.npy`` in place (or copies the bytes when it cannot); :func:`write_npy`
writes an array with ``np.save``'s layout in one ``writev``.

Reading a dump costs its first 64 KiB (the protobuf headers, where the shape must be) plus
the tensor: bytes are moved or copied in 4 MiB pieces (bfloat16 tensors are widened in
memory: 3 x the tensor). Malformed files raise :class:`DumpFileError` naming the file, the
offset and the rule: truncated or overlong varints, wire types 3/4/6/7, a missing field, a
dtype this module cannot map, a shape numpy cannot hold, or ``tensor_content`` whose length
does not match the shape.

The one ``.npy`` header reader of the package is here (:func:`read_npy_header`, or
:func:`npy_header_size` then :func:`parse_npy_header` on bytes already read): inert (the header
is parsed by a regular expression when it is ``np.save``'s, else as a Python literal with
``ast.literal_eval``, never unpickled; an object dtype is refused), size-capped like numpy's
(:data:`MAX_NPY_HEADER_BYTES`), and its layouts cached (a step's files share few headers); a
bad header raises :class:`~npu_dump_hook.errors.FormatError` naming the file and the rule.
"""
import ast
import os
import re
from typing import Any, Dict, Iterable, NamedTuple, Optional, Tuple

import numpy as np

from .._written import fd_identity, note_written
from ..errors import DumpFileError, FormatError
from .device_format import shape_problem

__all__ = ["write_npy", "read_npy", "debug_event_to_npy", "NUMPY_OF_TF_ENUM", "TF_DT_BFLOAT16", "NpyHeader",
           "read_npy_header", "npy_header_size", "parse_npy_header", "header_cache", "HEADER_CACHE_BYTES",
           "MAX_CACHED_HEADER", "element_count", "MAX_NPY_HEADER_BYTES", "NPY_PREFIX_BYTES"]

_PROTO_HEAD_BYTES = 1 << 16  # Event + Summary + Value + TensorProto headers always fit
_COPY_CHUNK = 1 << 22
_NPY_MAGIC = b"\x93NUMPY\x01\x00"
_WHOLE_READ = 1 << 20  # .npy files up to this size are read in one call (larger ones: memory-mapped)
#: numpy's own default cap on a header it parses (``max_header_size``): a longer one is refused.
MAX_NPY_HEADER_BYTES = 10000
#: Bytes of a .npy that tell its header's size: magic (6), version (2), length (2 in v1.0, 4 after).
NPY_PREFIX_BYTES = 12
_LENGTH_BYTES = {1: 2, 2: 4, 3: 4}  # .npy major version -> bytes of its little-endian header-length field
_HEADER_KEYS = frozenset(("descr", "fortran_order", "shape"))
# The header np.save (and write_npy) writes for a plain dtype; any other header is parsed as a literal.
_SAVED_HEADER = re.compile(r"\{'descr': '([<>|=]?[a-zA-Z][0-9]*)', 'fortran_order': (False|True), "
                           r"'shape': \(((?:[0-9]+, )*[0-9]*,?)\), \} *\n?\Z")
# Event.summary (5) -> Summary.value (1) -> Value.tensor (8)
_EVENT_SUMMARY, _SUMMARY_VALUE, _VALUE_TENSOR = 5, 1, 8

#: TF DataType enum -> numpy dtype the bytes are stored as (tensor_content is host order).
NUMPY_OF_TF_ENUM = {
    1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 8: "complex64",
    9: "int64", 10: "bool", 11: "int8", 12: "uint8", 13: "int32", 14: "uint16", 15: "int16",
    16: "uint16", 17: "uint16", 18: "complex128", 19: "float16", 22: "uint32", 23: "uint64",
}
TF_DT_BFLOAT16 = 14


def _varint(data: bytes, offset: int, path: str) -> Tuple[int, int]:
    value, shift = 0, 0
    while True:
        if offset >= len(data) or shift > 63:
            raise DumpFileError(path, "truncated or overlong varint in a protobuf header", offset)
        byte = data[offset]
        value |= (byte & 0x7F) << shift
        offset += 1
        shift += 7
        if not byte & 0x80:
            return value, offset


def _headers(head: bytes, start: int, end: int, path: str) -> Iterable[Tuple[int, int, int, int]]:
    """``(field, wire type, value, value offset)`` of the fields in ``head[start:end]``.

    Only the headers must lie in ``head``: a length-delimited value yields its length and
    offset and may end beyond it (the tensor bytes usually do).
    """
    offset = start
    while offset < end:
        key, offset = _varint(head, offset, path)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, after = _varint(head, offset, path)
        elif wire == 2:
            value, offset = _varint(head, offset, path)
            after = offset + value
        elif wire in (1, 5):
            value, after = 0, offset + (8 if wire == 1 else 4)
        else:
            raise DumpFileError(path, "unsupported protobuf wire type {}".format(wire), offset)
        yield number, wire, value, offset
        offset = after


def _sub_message(head: bytes, start: int, end: int, number: int, path: str) -> Tuple[int, int]:
    """``(start, end)`` of the first length-delimited field ``number`` in ``head[start:end]``."""
    for field_number, wire, value, offset in _headers(head, start, end, path):
        if field_number == number and wire == 2:
            return offset, offset + value
    raise DumpFileError(path, "protobuf field {} missing".format(number), start)


def _tensor_header(head: bytes, start: int, end: int, path: str) -> Tuple[int, Tuple[int, ...], int, int]:
    """``(dtype enum, shape, content offset, content length)`` of a TensorProto in ``head[start:end]``."""
    enum, shape, content = None, None, (0, 0)
    for number, wire, value, offset in _headers(head, start, end, path):
        if number == 1 and wire == 0:
            enum = value
        elif number == 2 and wire == 2:
            shape = _shape(head, offset, offset + value, path)
        elif number == 4 and wire == 2:
            content = (offset, value)
            break  # the last field SerializeToString writes before the typed-value fields
    if enum not in NUMPY_OF_TF_ENUM or shape is None:
        raise DumpFileError(path, "TensorProto without a supported dtype and a shape", start)
    return enum, shape, content[0], content[1]


def _shape(head: bytes, start: int, end: int, path: str) -> Tuple[int, ...]:
    if end > len(head):
        raise DumpFileError(path, "TensorShapeProto longer than the header window", start)
    dims = []
    for number, wire, value, offset in _headers(head, start, end, path):
        if number == 2 and wire == 2:  # Dim { int64 size = 1; string name = 2; }
            size = 0
            for dim_number, dim_wire, dim_value, _ in _headers(head, offset, offset + value, path):
                if dim_number == 1 and dim_wire == 0:
                    size = dim_value - (1 << 64) if dim_value >= 1 << 63 else dim_value
            if size < 0:
                raise DumpFileError(path, "negative dimension in a TensorShapeProto", offset)
            dims.append(size)
    return tuple(dims)


def write_npy(array: np.ndarray, target: str) -> Tuple[str, Tuple[int, ...]]:
    """Write a C-contiguous array as an ``.npy`` (v1.0, header padded to 64 bytes, as ``np.save``).

    One ``writev`` of the header and the array's own buffer (no copy of either; an array that is
    not C-contiguous is copied first); the header and the dtype's name come from a small cache,
    since a step writes many tensors of few shapes. The array itself is the buffer written and
    hashed: per file, each numpy call (a reshape, a view, a memoryview) cost more than the hash."""
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    header, dtype_name, plain = _header_of(array.dtype, array.shape)
    data = array if plain else array.reshape(-1).view(np.uint8)  # (an object array raises here)
    size = len(header) + array.nbytes
    fd = os.open(target, _WRITE_FLAGS, 0o666)
    try:
        _write_parts(fd, header, data, size)
        identity = fd_identity(fd, target)  # after the last write: no lstat of the path again
    finally:
        os.close(fd)
    # its sha256 from memory: the bundle need not read it back
    note_written(target, (header, data) if size > len(header) else (header,), identity=identity, size=size)
    return dtype_name, array.shape


_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)


_HEADER_CACHE = {}  # type: Dict[Tuple[np.dtype, Tuple[int, ...]], Tuple[bytes, str, bool]]
_HEADER_CACHE_SIZE = 4096  # distinct (dtype, shape) pairs kept; beyond it headers are made each time
# Kinds whose arrays export their bytes through the buffer protocol as they are (bool, integers,
# floats, complex); the others (datetimes, structured, object) go through a uint8 view.
_PLAIN_KINDS = frozenset("biufc")


def _header_of(dtype: np.dtype, shape: Tuple[int, ...]) -> Tuple[bytes, str, bool]:
    """``(.npy header, dtype name, plain)``: both cost more than the write of a small tensor to make;
    ``plain``: the array itself can be written and hashed (a kind of :data:`_PLAIN_KINDS`)."""
    key = (dtype, shape)
    known = _HEADER_CACHE.get(key)
    if known is None:
        known = (_npy_header(dtype, shape, None), dtype.name, dtype.kind in _PLAIN_KINDS)
        if len(_HEADER_CACHE) < _HEADER_CACHE_SIZE:
            _HEADER_CACHE[key] = known
    return known


_WRITEV = getattr(os, "writev", None)


def _write_parts(fd: int, header: bytes, data: np.ndarray, size: int) -> None:
    """``header`` then the C-contiguous array ``data``'s bytes (``size`` in all) to ``fd``: one
    ``writev`` where the OS has it; the rest, if it wrote less, through a byte view of the array."""
    if _WRITEV is None or size == len(header):
        written = 0
    else:
        written = _WRITEV(fd, (header, data))
    if written == size:
        return
    if written < len(header):
        _write_all(fd, header[written:])
        written = len(header)
    _write_all(fd, memoryview(data.reshape(-1).view(np.uint8))[written - len(header):])


def read_npy(path: str) -> np.ndarray:
    """The array of the ``.npy`` file ``path``, read-only, as ``np.load(path, mmap_mode="r")`` gives it.

    A small file (up to 1 MiB) with the plain header :func:`write_npy` writes is read with one
    system call and its header parsed here: np.load's header parser costs ~10x the read, and a
    step's capture is thousands of small tensors. Any other file (large, Fortran order, structured
    dtypes, a size that does not match its header) is np.load's, with its checks and errors.
    """
    with open(path, "rb", buffering=0) as fileobj:
        size = os.fstat(fileobj.fileno()).st_size
        data = fileobj.read(size + 1) if size <= _WHOLE_READ else b""
    array = _plain_array(data) if len(data) == size else None
    return array if array is not None else np.load(path, mmap_mode="r")


def _plain_array(data: bytes) -> Optional[np.ndarray]:
    """The array of the whole .npy ``data`` when its header is C-order and its size exact; else None."""
    try:
        header = parse_npy_header(data[:npy_header_size(data)])
    except FormatError:
        return None
    if header.fortran_order or header.dtype.itemsize == 0 or header.offset + header.nbytes != len(data):
        return None
    return np.frombuffer(data, dtype=header.dtype, count=header.count, offset=header.offset).reshape(header.shape)


class NpyHeader(NamedTuple):
    """What a ``.npy`` header says: ``offset`` is where the values start (the header's own size),
    ``count`` the number of elements, ``nbytes`` the values' size."""
    dtype: np.dtype
    shape: Tuple[int, ...]
    fortran_order: bool
    offset: int
    count: int
    nbytes: int


#: Header bytes the header cache keeps in all, and the longest header it keeps.
HEADER_CACHE_BYTES = 1 << 20
MAX_CACHED_HEADER = 4 << 10


class _HeaderCache(dict):  # type: ignore[type-arg]
    """Whole header bytes -> its parse (a step's files share few headers), bounded by bytes:
    headers longer than :data:`MAX_CACHED_HEADER` are not kept (padded headers of up to 4 GiB
    each would otherwise be kept 4,096 at a time); when the bytes kept would pass
    :data:`HEADER_CACHE_BYTES` it starts over."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __setitem__(self, key: bytes, value: Any) -> None:
        if len(key) > MAX_CACHED_HEADER:
            return
        if key not in self:
            if self.bytes + len(key) > HEADER_CACHE_BYTES:
                self.clear()
            self.bytes += len(key)
        super().__setitem__(key, value)

    def clear(self) -> None:
        super().clear()
        self.bytes = 0


_LAYOUTS = _HeaderCache()


def header_cache() -> Dict[bytes, "NpyHeader"]:
    """The parsed-header cache :func:`parse_npy_header` keeps (bounded by bytes)."""
    return _LAYOUTS


def read_npy_header(handle: Any, path: str = "") -> NpyHeader:
    """The header of the ``.npy`` open as ``handle`` (a binary file at its start), which is left at the
    values; reads at most :data:`MAX_NPY_HEADER_BYTES` of header. FormatError naming ``path`` and the rule."""
    prefix = handle.read(NPY_PREFIX_BYTES)
    size = npy_header_size(prefix, path)
    head = prefix + handle.read(size - len(prefix)) if size > len(prefix) else prefix[:size]
    if len(head) < size:
        raise FormatError(path, "the .npy header is cut off", len(head))
    return parse_npy_header(head, path)


def npy_header_size(prefix: bytes, path: str = "", limit: Optional[int] = MAX_NPY_HEADER_BYTES) -> int:
    """The size of the header (the values' offset) of a ``.npy`` from its first :data:`NPY_PREFIX_BYTES`
    bytes: checks the magic bytes, the version (1, 2 or 3) and the cap ``limit`` (None: no cap, for a
    reader whose header bytes are bounded by the file it reads)."""
    if prefix[:8] == _NPY_MAGIC and len(prefix) >= 10:  # version 1.0, np.save's for any tensor
        length = prefix[8] | prefix[9] << 8
        field = 2
    else:
        field = _length_field(prefix, path)
        length = int.from_bytes(prefix[8:8 + field], "little")
    if limit is not None and length > limit:
        raise FormatError(path, "a header of {} bytes, over the {} a .npy header may have".format(
            length, limit), 8)
    return 8 + field + length


def _length_field(prefix: bytes, path: str) -> int:
    """Bytes of the header-length field of a .npy starting with ``prefix``; FormatError if it has none."""
    if prefix[:6] != b"\x93NUMPY" or len(prefix) < 8:
        raise FormatError(path, "no .npy magic bytes", 0)
    field = _LENGTH_BYTES.get(prefix[6])
    if field is None:
        raise FormatError(path, ".npy version {} is not 1, 2 or 3".format(prefix[6]), 6)
    if len(prefix) < 8 + field:
        raise FormatError(path, "the .npy header length is cut off", len(prefix))
    return field


def parse_npy_header(head: bytes, path: str = "", limit: Optional[int] = MAX_NPY_HEADER_BYTES) -> NpyHeader:
    """The :class:`NpyHeader` of a ``.npy`` whose first :func:`npy_header_size` bytes are ``head``
    (cached by those bytes; ``limit`` as there). FormatError naming ``path`` and the rule."""
    found = _LAYOUTS.get(head)
    if found is None:
        found = _parse_header(head, path, limit)
        _LAYOUTS[head] = found
    return found


def _parse_header(head: bytes, path: str, limit: Optional[int]) -> NpyHeader:
    size = npy_header_size(head[:NPY_PREFIX_BYTES], path, limit)
    if size != len(head):
        raise FormatError(path, "{} bytes given as a .npy header of {}".format(len(head), size), 0)
    start = 8 + _LENGTH_BYTES[head[6]]
    text = head[start:].decode("utf-8" if head[6] == 3 else "latin1", "replace")
    match = _SAVED_HEADER.match(text)
    if match is not None:  # np.save's own layout: ~20x cheaper than a literal
        descr, fortran_order = match.group(1), match.group(2) == "True"
        shape = tuple(int(dim) for dim in match.group(3).split(",") if dim.strip())
    else:
        descr, fortran_order, shape = _literal_header(text, path, start)
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError, OverflowError, MemoryError):
        raise FormatError(path, "descr {!r} in the .npy header is not a dtype".format(descr), start) from None
    if dtype.hasobject:
        raise FormatError(path, "dtype {!r} is not a tensor dtype (object arrays need pickle: not read)".format(
            descr), start)
    problem = shape_problem(shape, dtype.itemsize)
    if problem is not None:
        raise FormatError(path, "shape {} in the .npy header {}".format(list(shape), problem), start)
    count = element_count(shape)
    return NpyHeader(dtype, shape, fortran_order, len(head), count, count * dtype.itemsize)


def element_count(shape: Iterable[int]) -> int:
    """The number of elements of ``shape`` (Python ints: never wraps around)."""
    count = 1
    for dim in shape:
        count *= dim
    return count


def _literal_header(text: str, path: str, start: int) -> Tuple[str, bool, Tuple[int, ...]]:
    """``(descr, fortran_order, shape)`` of a header not in np.save's layout: a Python literal, as numpy
    reads it (``ast.literal_eval``: no name, call or pickle is ever evaluated)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        raise FormatError(path, "its .npy header is not a Python literal", start) from None
    shape = value.get("shape") if isinstance(value, dict) else None
    if not (isinstance(value, dict) and set(value) == _HEADER_KEYS and isinstance(value["descr"], str)
            and isinstance(value["fortran_order"], bool) and isinstance(shape, tuple)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise FormatError(path, "its .npy header is not a dict of descr (text), fortran_order and shape", start)
    return value["descr"], value["fortran_order"], shape


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


def debug_event_to_npy(source: str, target: str, move: bool = False) -> Tuple[str, Tuple[int, ...]]:
    """Write the tensor of a ``DebugIdentity`` file dump (``Event.summary.value[0].tensor``) as ``.npy``.

    Only the protobuf headers before the tensor bytes are parsed. With ``move`` the dump file
    itself becomes the ``.npy``: the bytes before the tensor are overwritten by an ``.npy``
    header of exactly that length (the format allows any header length; it is padded with
    spaces and ends in a newline), the protobuf tail is cut off and the file is renamed, so
    the tensor bytes are never copied. Otherwise (or when that prefix is too short, or the
    rename crosses file systems) the bytes are copied file to file. Returns ``(numpy dtype
    name, shape)``; bfloat16 is widened to float32 (exact).
    """
    with open(source, "rb") as handle:
        head = handle.read(_PROTO_HEAD_BYTES)
        size = os.fstat(handle.fileno()).st_size
        summary = _sub_message(head, 0, size, _EVENT_SUMMARY, source)
        value = _sub_message(head, summary[0], summary[1], _SUMMARY_VALUE, source)
        tensor = _sub_message(head, value[0], value[1], _VALUE_TENSOR, source)
        enum, shape, offset, length = _tensor_header(head, tensor[0], tensor[1], source)
        dtype = np.dtype(NUMPY_OF_TF_ENUM[enum])
        problem = shape_problem(shape, 4 if enum == TF_DT_BFLOAT16 else dtype.itemsize)
        if problem is not None:  # checked here: np.prod would wrap around, np.save refuse
            raise DumpFileError(source, "TensorProto shape {} {}".format(list(shape), problem), tensor[0])
        expected = dtype.itemsize * element_count(shape)
        if length != expected or offset + length > min(size, tensor[1]):
            raise DumpFileError(source, "tensor_content holds {} bytes, shape {} needs {}".format(
                length, shape, expected), offset)
        if enum == TF_DT_BFLOAT16:
            handle.seek(offset)
            bits = np.frombuffer(handle.read(length), dtype=np.uint16).astype(np.uint32) << 16
            np.save(target, bits.view(np.float32).reshape(shape))
        else:
            header = _npy_header(dtype, shape, offset) if move else None
            if header is not None and _rewrite_in_place(source, target, header, length):
                return dtype.name, shape
            with open(target, "wb") as out:
                out.write(_npy_header(dtype, shape, None))
                out.flush()
                _copy_range(handle, out, offset, length)
    if move:
        os.remove(source)
    return ("float32" if enum == TF_DT_BFLOAT16 else dtype.name), shape


def _npy_header(dtype: np.dtype, shape: Tuple[int, ...], exact: Optional[int]) -> Optional[bytes]:
    """An .npy v1.0 header, padded to a multiple of 64 bytes or to exactly ``exact`` bytes (None: too short)."""
    text = "{{'descr': {!r}, 'fortran_order': False, 'shape': {!r}, }}".format(
        np.lib.format.dtype_to_descr(dtype), tuple(shape))
    minimum = len(_NPY_MAGIC) + 2 + len(text) + 1
    if exact is None:
        total = -(-minimum // 64) * 64
    elif minimum <= exact <= len(_NPY_MAGIC) + 2 + 0xFFFF:
        total = exact
    else:
        return None
    body = text + " " * (total - minimum) + "\n"
    return _NPY_MAGIC + len(body).to_bytes(2, "little") + body.encode("latin1")


def _rewrite_in_place(source: str, target: str, header: bytes, length: int) -> bool:
    """Overwrite the dump's prefix with ``header``, drop its tail, rename it to ``target``."""
    with open(source, "r+b") as handle:
        handle.write(header)
        handle.truncate(len(header) + length)
    try:
        os.rename(source, target)
    except OSError:  # e.g. another file system: the caller copies the tensor bytes instead
        return False
    return True


def _copy_range(source: Any, target: Any, offset: int, length: int) -> None:
    """Copy ``length`` bytes at ``offset`` of ``source`` to the end of ``target``, in the kernel when possible."""
    done = 0
    sendfile = getattr(os, "sendfile", None)
    if sendfile is not None:
        try:
            while done < length:
                sent = sendfile(target.fileno(), source.fileno(), offset + done, length - done)
                if sent == 0:
                    break
                done += sent
        except OSError:
            pass  # not supported for these files: a buffered copy from where it stopped
    source.seek(offset + done)
    while done < length:
        chunk = source.read(min(_COPY_CHUNK, length - done))
        if not chunk:
            raise DumpFileError(source.name, "file ends inside tensor_content", offset + done)
        target.write(chunk)
        done += len(chunk)
