"""GE graph text (``ge_proto_*.txt``) both ways: the full parse into ``ge.proto.ModelDef`` and the
text GE writes (C++ ``TextFormat::Print`` layout), for the emulator and round trips.

:func:`parse_model` encodes text laid out one field per line (what GE writes) straight into the
protobuf wire format and lets the C backend decode it; any other text, and anything that path
cannot encode exactly as ``google.protobuf.text_format`` parses it, goes to text_format (unknown
fields and extensions skipped), fed line by line with its costs guarded (see "full parse"
below). Bounds: blocks nested deeper than :data:`MAX_NESTING` are a GraphFormatError naming the
file, line, column and the limit; peak memory stays under 32 x the file size + 640 bytes per
block + 64 MB (the text, its str, and the ModelDef: protobuf's C++ backend takes ~550 bytes for
each message even when it is empty, upb ~250), and time is linear in the input. :func:`format_model` prints a message in the canonical layout
:mod:`.ge_graph`'s scanner reads fastest.
"""
import bisect
import codecs
import logging
import math
import os
import re
import struct
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor as _FD

from ..errors import GraphFormatError
from . import ge_ir_schema as ge_schema
from ._text_lines import NOT_PLAIN_ESCAPE as _NOT_PLAIN_ESCAPE, string_end as _ge_string_end

__all__ = ["MAX_NESTING", "parse_model", "parse_model_text", "format_model", "write_graph_text", "is_repeated", "c_escape"]

PathLike = Union[str, "os.PathLike[str]"]
_LOG = logging.getLogger(__name__)
_PRINTABLE = frozenset(range(0x20, 0x7F))
_C_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}


# --------------------------------------------------------------------------- full parse
#
# text_format is given the text line by line through :class:`_LineGuard`, which costs one
# regex search per line (more only on lines with block delimiters) and guards text_format's
# own costs: its tokenizer recurses about twice per nesting level (RecursionError past ~500
# levels) and matches blanks and escapes with regexes whose repeated groups keep ~150 bytes
# per character of a run (10 MB of spaces took 1.6 GB), and it splits the text into a list of
# all lines. So blocks nested deeper than MAX_NESTING are a GraphFormatError at the line that
# opens one; a line longer than _LONG_LINE characters is laid out again on the same line (runs
# of over _BLANK_RUN blanks become one space, strings longer than _STRING_PIECE characters
# become adjacent string pieces, which text format concatenates; a name or number longer than
# _MAX_WORD characters is refused), and the lines are cut from the text one chunk at a time.
# Columns that text_format reports on a laid-out line are mapped back to the original ones.

#: Deepest block nesting :func:`parse_model` reads (the scanner's limit, and protobuf C++'s default).
MAX_NESTING = 100
_LONG_LINE = 4096
_BLANK_RUN = 64
_STRING_PIECE = 1024
_MAX_WORD = 4096
_CHUNK_CHARS = 256 * 1024
_ESCAPE_CHARS = 10  # the longest C escape, \\U0010FFFF
_DELIMITERS = re.compile(r"[\"'#{}<>]")
_WORD_CHARS = r"[^\s\"'#{}<>:\[\],;/]"
_LONG_LINE_ITEM = re.compile(r"[\"'#{}<>]|\s{" + str(_BLANK_RUN + 1) + r",}|(?<!" + _WORD_CHARS + r")"
                             + _WORD_CHARS + "{" + str(_MAX_WORD + 1) + "}")
_MESSAGE_HEAD = re.compile(r"\d+(?::\d+)? : ")
_MAX_RULE = 300


class _LineGuard(object):
    """The lines of ``text`` for text_format, checked and laid out (see the section comment)."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.depth = 0
        self.number = 0  # 1-based number of the line last yielded
        # laid-out line number -> [(column in it, column in the input)], 0-based, ascending
        self.columns: Dict[int, List[Tuple[int, int]]] = {}
        self.refused: Optional[GraphFormatError] = None

    def lines(self) -> Iterator[str]:
        """The lines, cut from the text one chunk at a time; ends early when one is refused
        (:attr:`refused` then holds the error)."""
        text, size, start = self.text, len(self.text), 0
        try:
            while start < size:
                end = text.find("\n", start + _CHUNK_CHARS)
                end = size if end < 0 else end + 1
                lines = text[start:end].split("\n")
                if text[end - 1] == "\n":
                    lines.pop()  # the empty piece after the chunk's last newline
                start = end
                for line in lines:
                    self.number += 1
                    yield self.check(line)
        except GraphFormatError as exc:
            self.refused = exc  # not raised through text_format, which may catch ValueError

    def check(self, line: str) -> str:
        if len(line) > _LONG_LINE:
            return self.relayout(line)
        if "{" in line or "<" in line or "}" in line or ">" in line:
            if "\"" in line or "'" in line or "#" in line:
                self.track(line, 0, len(line))
            else:
                opened = line.count("{") + line.count("<")
                closed = line.count("}") + line.count(">")
                if (closed and opened) or self.depth + opened > MAX_NESTING:
                    self.track(line, 0, len(line))  # in order; finds the brace past the limit
                elif opened:
                    self.depth += opened
                else:
                    self.depth = max(0, self.depth - closed)
        return line

    def open_block(self, column: int) -> None:
        """Count a block opened at ``column`` (0-based) of the current line."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise GraphFormatError(self.path, "line {} column {}: blocks nested deeper than {} (the nesting "
                                   "limit)".format(self.number, column + 1, MAX_NESTING),
                                   _line_col_to_offset(self.text, self.number, column + 1))

    def track(self, line: str, pos: int, stop: int) -> None:
        """Follow the block delimiters of ``line[pos:stop]`` outside strings and comments."""
        search = _DELIMITERS.search
        while True:
            found = search(line, pos, stop)
            if found is None:
                return
            char, pos = found.group(), found.end()
            if char == "{" or char == "<":
                self.open_block(found.start())
            elif char == "}" or char == ">":
                self.depth = max(0, self.depth - 1)
            elif char == "#":
                return
            else:
                pos = _string_end(line, found.start(), char)
                if pos < 0:
                    return

    def relayout(self, line: str) -> str:
        out = []  # type: List[str]
        marks = []  # type: List[Tuple[int, int]]
        copied = written = pos = 0
        search = _LONG_LINE_ITEM.search
        while True:
            found = search(line, pos)
            if found is None:
                break
            start, char = found.start(), line[found.start()]
            pos = found.end()
            if char == "{" or char == "<":
                self.open_block(start)
            elif char == "}" or char == ">":
                self.depth = max(0, self.depth - 1)
            elif char == "#":
                break
            elif char == "\"" or char == "'":
                end = _string_end(line, start, char)
                if end < 0:
                    break
                pos = end
                if end - start - 2 > _STRING_PIECE:
                    out.append(line[copied:start])
                    written += start - copied
                    written = _split_string(line, start, end, out, marks, written)
                    copied = end
            elif char.isspace():
                out.append(line[copied:start] + " ")
                written += start - copied + 1
                marks.append((written, pos))
                copied = pos
            else:
                raise GraphFormatError(self.path, "line {} column {}: a name or number longer than {} "
                                       "characters".format(self.number, start + 1, _MAX_WORD),
                                       _line_col_to_offset(self.text, self.number, start + 1))
        if not marks:
            return line
        out.append(line[copied:])
        self.columns[self.number] = marks
        return "".join(out)

    def original_column(self, line: int, column: int) -> int:
        """The 1-based column in the input of ``column`` (1-based) of laid-out ``line``."""
        marks = self.columns.get(line)
        if not marks:
            return column
        index = bisect.bisect_right(marks, (column - 1, float("inf"))) - 1
        if index < 0:
            return column
        new, old = marks[index]
        return old + (column - 1 - new) + 1


def _string_end(line: str, start: int, quote: str) -> int:
    """Index after the closing ``quote`` of the string opened at ``line[start]``; -1 if none."""
    pos = start + 1
    while True:
        close = line.find(quote, pos)
        if close < 0:
            return -1
        piece = line[pos:close]
        if (len(piece) - len(piece.rstrip("\\"))) % 2 == 0:  # the quote is not escaped
            return close + 1
        pos = close + 1


def _split_string(line: str, start: int, end: int, out: List[str], marks: List[Tuple[int, int]],
                  written: int) -> int:
    """Append ``line[start:end]`` (a quoted string) as adjacent pieces of at most
    _STRING_PIECE characters, cut between escapes; the new written length."""
    quote = line[start]
    body_start, body_end = start + 1, end - 1
    piece = body_start
    out.append(quote)
    written += 1
    while body_end - piece > _STRING_PIECE:
        cut = piece + _STRING_PIECE
        last = line.rfind("\\", cut - _ESCAPE_CHARS, cut)
        if last >= 0:
            run = last + 1 - piece - len(line[piece:last + 1].rstrip("\\"))
            cut = last if run % 2 else last + 1  # before an escape / after an escaped backslash
        out.append(line[piece:cut])
        out.append(quote + " " + quote)
        written += cut - piece + 3
        marks.append((written, cut))
        piece = cut
    out.append(line[piece:end])
    written += end - piece
    marks.append((written, end))
    return written


def _line_col_to_offset(text: str, line: int, column: int) -> int:
    """Byte offset (UTF-8) of a 1-based (line, column) position in ``text``; counted a chunk at
    a time, so an error late in a large text costs no list of its lines."""
    start, remaining, size = 0, line - 1, len(text)
    while remaining > 0 and start < size:
        stop = min(start + _CHUNK_CHARS, size)
        count = text.count("\n", start, stop)
        if count < remaining:
            remaining -= count
            start = stop
            continue
        for _ in range(remaining):
            start = text.index("\n", start) + 1
        remaining = 0
    line_end = text.find("\n", start)
    position = min(start + max(column - 1, 0), size if line_end < 0 else line_end)
    return sum(len(text[at:min(at + _CHUNK_CHARS, position)].encode("utf-8", "surrogatepass"))
               for at in range(0, position, _CHUNK_CHARS))


def _parse_lines(text: str, model: Any, allow_unknown: bool, path: str) -> None:
    guard = _LineGuard(text, path)
    try:
        try:
            _parse_into(guard, model, allow_unknown)
        except TypeError:  # protobuf older than 3.8 (below our 3.20.3 floor): strict parse
            if not allow_unknown:
                raise
            _LOG.warning("this protobuf cannot skip unknown fields; parsing strictly")
            model.Clear()
            guard = _LineGuard(text, path)
            text_format.ParseLines(guard.lines(), model, allow_unknown_extension=True)
    except text_format.ParseError as exc:
        if guard.refused is not None:
            raise guard.refused from None
        raise _parse_error(exc, guard, text, path) from None
    except RecursionError:
        raise GraphFormatError(path, "blocks nested too deeply for protobuf's text parser (limit {})".format(
            MAX_NESTING), None) from None
    if guard.refused is not None:
        raise guard.refused


def _parse_into(guard: _LineGuard, model: Any, allow_unknown: bool) -> None:
    if allow_unknown:
        text_format.ParseLines(guard.lines(), model, allow_unknown_extension=True, allow_unknown_field=True)
    else:
        text_format.ParseLines(guard.lines(), model)


def _parse_error(exc: Any, guard: _LineGuard, text: str, path: str) -> GraphFormatError:
    """GraphFormatError for text_format's ParseError: the input's line, column and byte offset,
    the message clipped (text_format quotes the whole current line)."""
    line, column = exc.GetLine(), exc.GetColumn()
    message = str(exc)
    head = _MESSAGE_HEAD.match(message)
    message = message[head.end():] if head else message
    if len(message) > _MAX_RULE:
        message = message[:100] + " ... " + message[-(_MAX_RULE - 100):]
    if line is None:
        return GraphFormatError(path, "text format: {}".format(message), None)
    column = guard.original_column(line, column or 1)
    return GraphFormatError(path, "text format: {}:{} : {}".format(line, column, message),
                            _line_col_to_offset(text, line, column))


def parse_model_text(text: Union[str, bytes], path: str = "<text>",
                     allow_unknown: bool = True) -> Any:
    """Parse ge_proto text into a ``ge.proto.ModelDef`` message.

    With ``allow_unknown`` (default), fields and extensions the schema lacks (files from a
    newer GE) are skipped; unknown *enum value names* still fail, as in protobuf itself.
    Raises GraphFormatError with the byte offset protobuf reported.
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    try:
        text = data.decode("utf-8") if isinstance(text, bytes) else text
    except UnicodeDecodeError as exc:
        raise GraphFormatError(path, "text is not UTF-8", exc.start) from None
    model = ge_schema.ModelDef()
    wire = _fast_wire(data, allow_unknown)
    del data
    if wire is not None:
        try:
            model.ParseFromString(wire)
            return model
        except Exception:  # (a nesting limit of the C decoder): text_format decides
            _LOG.debug("fast parse of %s not decodable; using text_format", path)
            model.Clear()
    _parse_lines(text, model, allow_unknown, path)
    return model


def parse_model(path: PathLike, allow_unknown: bool = True) -> Any:
    """Read a ge_proto text file into a full ``ge.proto.ModelDef`` (whole file in memory)."""
    path = os.fspath(path)
    with open(path, "rb") as handle:
        data = handle.read()
    return parse_model_text(data, path, allow_unknown)


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
_INT_RANGES = {_FD.TYPE_INT32: (-(1 << 31), (1 << 31) - 1), _FD.TYPE_INT64: (-(1 << 63), (1 << 63) - 1),
               _FD.TYPE_UINT32: (0, (1 << 32) - 1), _FD.TYPE_UINT64: (0, (1 << 64) - 1)}
_FIELD_HEAD = re.compile(rb"[ \t]*([A-Za-z_]\w*)(?:[ \t]*(\{)|:)")
_BLANK_OR_COMMENT = re.compile(rb"[ \t\r]*(?:#[^\n]*)?\Z")
_CLOSE = re.compile(rb"[ \t]*\}[ \t\r]*\Z")
_DECIMAL = re.compile(rb"-?(?:0|[1-9][0-9]{0,19})\Z")
_HEX = re.compile(rb"0[xX][0-9a-fA-F]{1,16}\Z")
_FLOAT = re.compile(rb"-?(?:[0-9]{1,40}(?:\.[0-9]{0,40})?|\.[0-9]{1,40})(?:[eE][-+]?[0-9]{1,3})?\Z")
_FLOAT_WORDS = {b"inf": float("inf"), b"-inf": float("-inf"), b"nan": float("nan")}
_IDENT = re.compile(rb"[A-Za-z_]\w*\Z")
_BOOLS = {b"true": 1, b"True": 1, b"t": 1, b"1": 1, b"false": 0, b"False": 0, b"f": 0, b"0": 0}
_FIELD_TABLES: Dict[Any, Dict[bytes, Any]] = {}


class _Decline(Exception):
    """The fast parse leaves this text to text_format."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field_table(descriptor: Any) -> Dict[bytes, Any]:
    """name -> (kind, tag bytes, repeated, oneof, detail) for the fields of a message type."""
    table = _FIELD_TABLES.get(descriptor)
    if table is not None:
        return table
    table = {}
    for field in descriptor.fields:
        kind = field.type
        if kind == _FD.TYPE_MESSAGE:
            wire, detail = _FD_BYTES, field.message_type
        elif kind in _INT_RANGES:
            wire, detail = _FD_VARINT, _INT_RANGES[kind]
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
    """The wire bytes (after the tag) of a scalar, as text_format would set it; _Decline else."""
    if kind in _INT_RANGES:
        number = int(value) if _DECIMAL.match(value) else (int(value, 16) if _HEX.match(value) else None)
        if number is None or not detail[0] <= number <= detail[1]:
            raise _Decline()
        return _varint(number & 0xFFFFFFFFFFFFFFFF)
    if kind == _FD.TYPE_STRING or kind == _FD.TYPE_BYTES:
        if value[:1] != b'"' or _ge_string_end(value, 0) != len(value):
            raise _Decline()
        body = value[1:-1]
        if b"\\" in body:
            if _NOT_PLAIN_ESCAPE.search(body) is not None:
                raise _Decline()
            body = codecs.escape_decode(body)[0]
        if kind == _FD.TYPE_STRING:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                raise _Decline() from None
        return _varint(len(body)) + body
    if kind == _FD.TYPE_ENUM:
        number = detail.get(value)
        if number is None:
            raise _Decline()
        return _varint(number & 0xFFFFFFFFFFFFFFFF)
    if kind == _FD.TYPE_BOOL:
        flag = _BOOLS.get(value)
        if flag is None:
            raise _Decline()
        return b"\x01" if flag else b"\x00"
    number = _FLOAT_WORDS.get(value)
    if number is None:
        if not _FLOAT.match(value):
            raise _Decline()
        number = float(value)
    try:
        return detail.pack(number)
    except (OverflowError, struct.error):
        raise _Decline() from None


def _plain_value(value: bytes) -> None:
    """A value of an unknown field, which text_format skips: only plain ones are passed over."""
    if value[:1] == b'"':
        if _ge_string_end(value, 0) != len(value) or _NOT_PLAIN_ESCAPE.search(value[1:-1]) is not None:
            raise _Decline()
    elif not (_IDENT.match(value) or _DECIMAL.match(value) or _FLOAT.match(value)):
        raise _Decline()


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


def _fast_wire(data: bytes, allow_unknown: bool) -> Optional[bytes]:
    """The wire bytes of the ModelDef ``data`` spells, or None (see the section comment)."""
    try:
        return _encode_lines(data, allow_unknown)
    except _Decline:
        return None


def _encode_lines(data: bytes, allow_unknown: bool) -> bytes:
    frame = _Frame(_field_table(ge_schema.ModelDef.DESCRIPTOR), b"")
    stack: List[_Frame] = []
    head_match, close_match, blank_match = _FIELD_HEAD.match, _CLOSE.match, _BLANK_OR_COMMENT.match
    size, start = len(data), 0
    while start < size:
        end = data.find(b"\n", start + _CHUNK_CHARS)
        end = size if end < 0 else end + 1
        lines = data[start:end].split(b"\n")
        start = end
        for line in lines:
            if len(line) > _LONG_LINE:
                raise _Decline()
            head = head_match(line)
            if head is None:
                if close_match(line):
                    if not stack:
                        raise _Decline()
                    frame = _close_frame(frame, stack.pop())
                elif not blank_match(line):
                    raise _Decline()
                continue
            name = head.group(1)
            table = frame.table
            info = table.get(name) if table is not None else None
            if head.group(2) is not None:  # name {
                if line[head.end():].strip(b" \t\r") or len(stack) >= MAX_NESTING:
                    raise _Decline()
                stack.append(frame)
                frame = _open_frame(frame, name, info, allow_unknown)
                continue
            value = line[head.end():].strip(b" \t\r")
            if info is None:
                if table is not None and not allow_unknown:
                    raise _Decline()
                _plain_value(value)
                continue
            kind, tag, repeated, oneof, detail = info
            if kind == _FD.TYPE_MESSAGE or kind is None or not value:
                raise _Decline()
            if not repeated:
                _mark_singular(frame, name, oneof)
            encoded = _scalar_bytes(kind, detail, value)
            if name == b"key" and frame.key is not None:
                frame.key = encoded
            frame.out += tag
            frame.out += encoded
    if stack:
        raise _Decline()
    return bytes(frame.out)


def _mark_singular(frame: _Frame, name: bytes, oneof: Optional[str]) -> None:
    if name in frame.seen or (oneof is not None and oneof in frame.seen):
        raise _Decline()
    frame.seen.add(name)
    if oneof is not None:
        frame.seen.add(oneof)


def _open_frame(parent: _Frame, name: bytes, info: Any, allow_unknown: bool) -> _Frame:
    if info is None:
        if parent.table is not None and not allow_unknown:
            raise _Decline()
        return _Frame(None, b"")
    kind, tag, repeated, oneof, detail = info
    if kind != _FD.TYPE_MESSAGE:
        raise _Decline()
    if not repeated:
        _mark_singular(parent, name, oneof)
    child = _Frame(_field_table(detail), tag)
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
            raise _Decline()
        keys.add(frame.key)
    parent.out += frame.tag
    parent.out += _varint(len(frame.out))
    parent.out += frame.out
    return parent


# --------------------------------------------------------------------------- text writer

def _format_float(value: float) -> str:
    """A float32 as C++ TextFormat writes it (SimpleFtoa: %.6g unless that does not
    read back to the same float, then %.9g)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = "%.6g" % value
    try:
        same = struct.unpack("<f", struct.pack("<f", float(text)))[0] == value
    except OverflowError:
        same = False
    return text if same else "%.9g" % value


def _format_scalar(field: Any, value: Any) -> str:
    kind = field.type
    if kind in (_FD.TYPE_STRING, _FD.TYPE_BYTES):
        raw = value.encode("utf-8") if isinstance(value, str) else value
        return '"' + c_escape(raw) + '"'
    if kind == _FD.TYPE_BOOL:
        return "true" if value else "false"
    if kind == _FD.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if kind in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE):
        return _format_float(value) if kind == _FD.TYPE_FLOAT else repr(value)
    return str(value)


def _format_message(message: Any, indent: str, out: List[str]) -> None:
    inner = indent + "  "
    for field, value in message.ListFields():  # field-number order, like C++
        name = field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            key_field = field.message_type.fields_by_name["key"]
            for key in sorted(value):
                out.append("{}{} {{\n{}key: {}\n".format(indent, name, inner,
                                                        _format_scalar(key_field, key)))
                if value_field.type == _FD.TYPE_MESSAGE:
                    out.append(inner + "value {\n")
                    _format_message(value[key], inner + "  ", out)
                    out.append(inner + "}\n")
                else:
                    out.append("{}value: {}\n".format(inner, _format_scalar(value_field,
                                                                             value[key])))
                out.append(indent + "}\n")
            continue
        items = value if is_repeated(field) else (value,)
        for item in items:
            if field.type == _FD.TYPE_MESSAGE:
                out.append("{}{} {{\n".format(indent, name))
                _format_message(item, inner, out)
                out.append(indent + "}\n")
            else:
                out.append("{}{}: {}\n".format(indent, name, _format_scalar(field, item)))


def format_model(model: Any) -> str:
    """ge_proto text of a ModelDef, laid out as GE's C++ TextFormat::Print writes it."""
    out = []  # type: List[str]
    _format_message(model, "", out)
    return "".join(out)


def write_graph_text(path: PathLike, model: Any) -> None:
    """Write :func:`format_model` to ``path`` (ASCII-safe: non-ASCII bytes are escaped)."""
    with open(os.fspath(path), "w", encoding="utf-8", newline="\n") as handle:
        handle.write(format_model(model))


def is_repeated(field: Any) -> bool:
    # protobuf 7 dropped FieldDescriptor.label; releases before 5.x lack is_repeated.
    flag = getattr(field, "is_repeated", None)
    if flag is None:
        return field.label == _FD.LABEL_REPEATED
    return bool(flag() if callable(flag) else flag)


#: code point (a byte decoded as latin-1) -> its C escape, for the bytes c_escape escapes
_C_ESCAPE_TABLE = {byte: _C_ESCAPES.get(byte, "\\{:03o}".format(byte)) for byte in range(256)
                   if byte in _C_ESCAPES or byte not in _PRINTABLE}


def c_escape(raw: bytes) -> str:
    """C-style escape as protobuf's CEscape: \\n \\r \\t \\" \\' \\\\, other non-printables octal."""
    return bytes(raw).decode("latin-1").translate(_C_ESCAPE_TABLE)
