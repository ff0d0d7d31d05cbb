"""Rules 4 and 5 of the dump-file reader (see :mod:`.dump_file`) on a header's bytes, before
protobuf builds any object: the wire format walked without building anything
(:func:`scan_dump_data`: raises :class:`WireError` where the bytes are no DumpData,
:class:`LimitError` where they describe more than the reader's limits, each with the rule and
the absolute offset), and a quick check of the common small header (:func:`quick_scan`: True
only for a header the full walk accepts).
"""
from typing import Any, Dict, List, Optional, Tuple

from ._dump_layout import KINDS, MAX_DIMS, MAX_HEADER_ITEMS, MAX_TENSORS

__all__ = ["WireError", "LimitError", "scan_dump_data", "quick_scan"]


# --- cheap wire-format scan, before protobuf builds any object ---------------------
#
# protobuf turns each 2-byte empty OpOutput into a message object, and the reader then adds a
# TensorInfo (300-900 bytes in all), each packed 1-byte dim into 8 bytes plus a tuple slot, each
# unknown field into a record. So the header's wire format is walked first, in Python but
# without building anything, and refused when it counts more than the module limits.

class WireError(Exception):
    """The bytes are not a DumpData protobuf; args: (rule, absolute offset)."""


class LimitError(Exception):
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
        raise WireError("varint longer than 10 bytes", scan.base + pos)
    raise WireError("truncated varint", scan.base + pos)


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
        raise WireError("field number 0 in {}".format(message), scan.base + pos)
    scan.items += 1
    if scan.items > MAX_HEADER_ITEMS:
        raise LimitError(_ITEMS_RULE, scan.base + pos)
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
        raise WireError("wire type {} (field {} of {})".format(wire, number, message), scan.base + pos)
    if stop > end:
        raise WireError("field {} of {} ({} bytes) runs past the end of its message".format(
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
                raise LimitError(_ITEMS_RULE, scan.base + pos)
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
                raise WireError("truncated varint in packed dims", scan.base + pos - 1)
            if pos - start > 10 * (MAX_DIMS + 1):  # certainly more than MAX_DIMS varints
                return MAX_DIMS + 1
            count = sum(1 for byte in buf[start:pos] if byte < 0x80)
            dims += count
            scan.items += 2 * count
        if scan.items > MAX_HEADER_ITEMS:
            raise LimitError(_ITEMS_RULE, scan.base + at)
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
                raise LimitError(_ITEMS_RULE, scan.base + pos)
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
            raise LimitError("{}[{}]: {} holds more than {} {}".format(
                kind, index, sub if sub != "DimRange" else "dim_range", MAX_DIMS,
                "entries" if sub == "DimRange" else "dims"), scan.base + at)
        dims[number] = count


def scan_dump_data(buf: Any, start: int, end: int, base: int) -> None:
    """Walk a serialized DumpData in ``buf[start:end]`` (``base``: file offset of ``buf[0]``).

    Raises WireError when protobuf would refuse it (or would stop early: the C++ backend
    accepts a message cut at an end-group tag) and LimitError when it describes more than
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
                raise LimitError(_ITEMS_RULE, base + pos)
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
                raise LimitError("more than {} tensors (inputs, outputs, buffers and workspaces "
                                  "together)".format(MAX_TENSORS), base + at)
            _scan_tensor(scan, value_at, pos, kind, counts[kind], message, nested)
            counts[kind] += 1
        elif number == 7:
            attrs += 1
            if attrs > MAX_TENSORS:
                raise LimitError("more than {} attrs".format(MAX_TENSORS), base + at)
            _scan_flat(scan, value_at, pos, "OpAttr")


# --- quick scan: the common small header in a few C-level steps --------------------------
#
# A header of at most _QUICK_MAX bytes cannot reach MAX_TENSORS, the attr limit or
# MAX_HEADER_ITEMS (a tensor or attr field takes at least 2 bytes, an item at least half a
# byte), so only the wire format and the per-shape dim counts decide. quick_scan accepts a
# header only when every field is plainly well formed and no shape or dim_range is over
# MAX_DIMS; anything else (including every header scan_dump_data refuses) goes to
# scan_dump_data, which finds the rule broken and its offset. So a True here never accepts
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


def quick_scan(buf: Any, start: int, end: int) -> bool:
    """True when scan_dump_data(buf, start, end, ...) certainly raises nothing (see above)."""
    if end - start > _QUICK_MAX:
        return False
    fields = _quick_walk(buf, start, end, _QUICK_DUMP_DATA)
    if fields is None:
        return False
    for number, begin, stop in fields:
        if begin >= 0 and not _quick_tensor(buf, begin, stop, number):
            return False
    return True
