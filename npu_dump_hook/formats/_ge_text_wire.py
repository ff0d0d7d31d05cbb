"""The fast full parse of GE graph text: text laid out one field per line (as GE writes it)
encoded straight into the protobuf wire format of ``ge.proto.ModelDef``.

:func:`fast_wire` gives those wire bytes, or None when the text is not one it encodes exactly as
``text_format`` parses it (the caller then parses with :mod:`._ge_text_guard`). The field tables
(:func:`field_table`), the value patterns and :class:`Decline` are shared with the direct
msaccucmp JSON conversion (:mod:`._ge_json_values`), which reads the same lines the same way.
"""
import codecs
import re
import struct
from typing import Any, Dict, List, Optional

from google.protobuf.descriptor import FieldDescriptor as _FD

from . import ge_ir_schema as ge_schema
from ._ge_text_guard import CHUNK_CHARS as _CHUNK_CHARS, LONG_LINE as _LONG_LINE, MAX_NESTING
from ._proto import is_repeated
from ._text_lines import NOT_PLAIN_ESCAPE as _NOT_PLAIN_ESCAPE, string_end as _ge_string_end

__all__ = ["Decline", "fast_wire", "field_table", "INT_RANGES", "FIELD_HEAD", "CLOSE", "DECIMAL", "HEX",
           "FLOAT", "FLOAT_WORDS", "BOOLS"]


# --------------------------------------------------------------------------- fast full parse
#
# Text laid out one field per line (as GE writes it) is encoded straight into the protobuf wire
# format, line by line, and decoded by the C backend in one ParseFromString: about 20x faster
# than text_format, which tokenizes in Python. The fast path only takes what it can encode
# exactly as text_format would parse it, and declines (returns None: text_format then parses,
# with its own result or error) anything else: several fields or a comment on a line, `<>`,
# `[...]`, `name: {`, adjacent strings, escapes outside the subset codecs.escape_decode shares
# with text format, strings that are not UTF-8, numbers that are not plain decimal (or 0x hex
# for integers), out of range or enum names unknown, a singular field, oneof or map key given
# twice, unknown fields (unless skipped: then their values must be plain too), lines over
# _LONG_LINE bytes, nesting over MAX_NESTING.

_FD_VARINT, _FD_FIXED64, _FD_BYTES, _FD_FIXED32 = 0, 1, 2, 5
INT_RANGES = {_FD.TYPE_INT32: (-(1 << 31), (1 << 31) - 1), _FD.TYPE_INT64: (-(1 << 63), (1 << 63) - 1),
               _FD.TYPE_UINT32: (0, (1 << 32) - 1), _FD.TYPE_UINT64: (0, (1 << 64) - 1)}
FIELD_HEAD = re.compile(rb"[ \t]*([A-Za-z_]\w*)(?:[ \t]*(\{)|:)")
_BLANK_OR_COMMENT = re.compile(rb"[ \t\r]*(?:#[^\n]*)?\Z")
CLOSE = re.compile(rb"[ \t]*\}[ \t\r]*\Z")
DECIMAL = re.compile(rb"-?(?:0|[1-9][0-9]{0,19})\Z")
HEX = re.compile(rb"0[xX][0-9a-fA-F]{1,16}\Z")
FLOAT = re.compile(rb"-?(?:[0-9]{1,40}(?:\.[0-9]{0,40})?|\.[0-9]{1,40})(?:[eE][-+]?[0-9]{1,3})?\Z")
FLOAT_WORDS = {b"inf": float("inf"), b"-inf": float("-inf"), b"nan": float("nan")}
_IDENT = re.compile(rb"[A-Za-z_]\w*\Z")
BOOLS = {b"true": 1, b"True": 1, b"t": 1, b"1": 1, b"false": 0, b"False": 0, b"f": 0, b"0": 0}
_FIELD_TABLES: Dict[Any, Dict[bytes, Any]] = {}


class Decline(Exception):
    """The fast parse leaves this text to text_format."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_table(descriptor: Any) -> Dict[bytes, Any]:
    """name -> (kind, tag bytes, repeated, oneof, detail) for the fields of a message type."""
    table = _FIELD_TABLES.get(descriptor)
    if table is not None:
        return table
    table = {}
    for field in descriptor.fields:
        kind = field.type
        if kind == _FD.TYPE_MESSAGE:
            wire, detail = _FD_BYTES, field.message_type
        elif kind in INT_RANGES:
            wire, detail = _FD_VARINT, INT_RANGES[kind]
        elif kind == _FD.TYPE_ENUM:
            wire, detail = _FD_VARINT, {value.name.encode(): value.number for value in field.enum_type.values}
        elif kind == _FD.TYPE_BOOL:
            wire, detail = _FD_VARINT, None
        elif kind == _FD.TYPE_FLOAT:
            wire, detail = _FD_FIXED32, struct.Struct("<f")
        elif kind == _FD.TYPE_DOUBLE:
            wire, detail = _FD_FIXED64, struct.Struct("<d")
        elif kind in (_FD.TYPE_STRING, _FD.TYPE_BYTES):
            wire, detail = _FD_BYTES, None
        else:  # (sint, fixed, sfixed: not in ge.proto) left to text_format
            kind, wire, detail = None, 0, None
        oneof = field.containing_oneof.name if field.containing_oneof is not None else None
        table[field.name.encode()] = (kind, _varint(field.number << 3 | wire), is_repeated(field), oneof, detail)
    _FIELD_TABLES[descriptor] = table
    return table


def _scalar_bytes(kind: int, detail: Any, value: bytes) -> bytes:
    """The wire bytes (after the tag) of a scalar, as text_format would set it; Decline else."""
    if kind in INT_RANGES:
        number = int(value) if DECIMAL.match(value) else (int(value, 16) if HEX.match(value) else None)
        if number is None or not detail[0] <= number <= detail[1]:
            raise Decline()
        return _varint(number & 0xFFFFFFFFFFFFFFFF)
    if kind == _FD.TYPE_STRING or kind == _FD.TYPE_BYTES:
        if value[:1] != b'"' or _ge_string_end(value, 0) != len(value):
            raise Decline()
        body = value[1:-1]
        if b"\\" in body:
            if _NOT_PLAIN_ESCAPE.search(body) is not None:
                raise Decline()
            body = codecs.escape_decode(body)[0]
        if kind == _FD.TYPE_STRING:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                raise Decline() from None
        return _varint(len(body)) + body
    if kind == _FD.TYPE_ENUM:
        number = detail.get(value)
        if number is None:
            raise Decline()
        return _varint(number & 0xFFFFFFFFFFFFFFFF)
    if kind == _FD.TYPE_BOOL:
        flag = BOOLS.get(value)
        if flag is None:
            raise Decline()
        return b"\x01" if flag else b"\x00"
    number = FLOAT_WORDS.get(value)
    if number is None:
        if not FLOAT.match(value):
            raise Decline()
        number = float(value)
    try:
        return detail.pack(number)
    except (OverflowError, struct.error):
        raise Decline() from None


def _plain_value(value: bytes) -> None:
    """A value of an unknown field, which text_format skips: only plain ones are passed over."""
    if value[:1] == b'"':
        if _ge_string_end(value, 0) != len(value) or _NOT_PLAIN_ESCAPE.search(value[1:-1]) is not None:
            raise Decline()
    elif not (_IDENT.match(value) or DECIMAL.match(value) or FLOAT.match(value)):
        raise Decline()


class _Frame(object):
    """An open message: its field table (None: an unknown field being skipped), the wire bytes
    so far, the singular fields, oneofs and map keys already given, its tag in the parent."""

    __slots__ = ("table", "out", "seen", "tag", "keys", "key", "map_field")

    def __init__(self, table: Optional[Dict[bytes, Any]], tag: bytes) -> None:
        self.table = table
        self.out = bytearray()
        self.seen: set = set()
        self.tag = tag
        self.keys: Dict[bytes, set] = {}
        self.key: Optional[bytes] = None  # a map entry's key (wire bytes; b"" until given)
        self.map_field: Optional[bytes] = None  # the map field a map entry belongs to


def fast_wire(data: bytes, allow_unknown: bool) -> Optional[bytes]:
    """The wire bytes of the ModelDef ``data`` spells, or None (see the section comment)."""
    try:
        return _encode_lines(data, allow_unknown)
    except Decline:
        return None


def _encode_lines(data: bytes, allow_unknown: bool) -> bytes:
    frame = _Frame(field_table(ge_schema.ModelDef.DESCRIPTOR), b"")
    stack: List[_Frame] = []
    head_match, close_match, blank_match = FIELD_HEAD.match, CLOSE.match, _BLANK_OR_COMMENT.match
    size, start = len(data), 0
    while start < size:
        end = data.find(b"\n", start + _CHUNK_CHARS)
        end = size if end < 0 else end + 1
        lines = data[start:end].split(b"\n")
        start = end
        for line in lines:
            if len(line) > _LONG_LINE:
                raise Decline()
            head = head_match(line)
            if head is None:
                if close_match(line):
                    if not stack:
                        raise Decline()
                    frame = _close_frame(frame, stack.pop())
                elif not blank_match(line):
                    raise Decline()
                continue
            name = head.group(1)
            table = frame.table
            info = table.get(name) if table is not None else None
            if head.group(2) is not None:  # name {
                if line[head.end():].strip(b" \t\r") or len(stack) >= MAX_NESTING:
                    raise Decline()
                stack.append(frame)
                frame = _open_frame(frame, name, info, allow_unknown)
                continue
            value = line[head.end():].strip(b" \t\r")
            if info is None:
                if table is not None and not allow_unknown:
                    raise Decline()
                _plain_value(value)
                continue
            kind, tag, repeated, oneof, detail = info
            if kind == _FD.TYPE_MESSAGE or kind is None or not value:
                raise Decline()
            if not repeated:
                _mark_singular(frame, name, oneof)
            encoded = _scalar_bytes(kind, detail, value)
            if name == b"key" and frame.key is not None:
                frame.key = encoded
            frame.out += tag
            frame.out += encoded
    if stack:
        raise Decline()
    return bytes(frame.out)


def _mark_singular(frame: _Frame, name: bytes, oneof: Optional[str]) -> None:
    if name in frame.seen or (oneof is not None and oneof in frame.seen):
        raise Decline()
    frame.seen.add(name)
    if oneof is not None:
        frame.seen.add(oneof)


def _open_frame(parent: _Frame, name: bytes, info: Any, allow_unknown: bool) -> _Frame:
    if info is None:
        if parent.table is not None and not allow_unknown:
            raise Decline()
        return _Frame(None, b"")
    kind, tag, repeated, oneof, detail = info
    if kind != _FD.TYPE_MESSAGE:
        raise Decline()
    if not repeated:
        _mark_singular(parent, name, oneof)
    child = _Frame(field_table(detail), tag)
    if detail.GetOptions().map_entry:
        child.key = b""
        child.map_field = name
    return child


def _close_frame(frame: _Frame, parent: _Frame) -> _Frame:
    if frame.table is None:
        return parent
    if frame.map_field is not None:  # a map entry: a key given twice is left to text_format
        keys = parent.keys.setdefault(frame.map_field, set())
        if frame.key in keys:
            raise Decline()
        keys.add(frame.key)
    parent.out += frame.tag
    parent.out += _varint(len(frame.out))
    parent.out += frame.out
    return parent
