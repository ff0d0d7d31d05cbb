"""The msaccucmp JSON form of a GE graph: what ``atc --mode=5`` writes (reference §2.7).

msaccucmp's ``-f`` takes this JSON; :func:`write_msaccucmp_json` writes it next to a bundle's
Build graph.

:func:`to_msaccucmp_json` walks a parsed ``ModelDef``. :func:`write_msaccucmp_json` given a
ge_proto text file first tries a direct, streaming conversion (see "direct text -> JSON"): text
laid out one field per line, as GE writes it, becomes JSON text line by line without protobuf
messages, and each op is written out as soon as its block closes. Text it cannot convert
exactly as the full parse would is parsed (:func:`.ge_text.parse_model_text`), with that
path's result or GraphFormatError. The file is byte-identical either way (tested against the
parse path on fixed and fuzzed inputs). Memory of the direct path, never the whole document:
the file's bytes, a 256 KiB chunk of its lines, the JSON of one op (or of one other field of a
graph or of the model), a 1 MiB output buffer, and its memos of fixed size: up to 8,192 lines
per message type, 8 MB of block text with its JSON, 4,096 leaf layouts (about 30 MB at most
in all; 40 MB over the file's size for a 50 MB Build graph, 4 MB for 100,000 small ops). Time: linear in the input (each byte is read by a few C scans and one
Python step per line, or per leaf block or repeated block).
"""
import codecs
import gc
import json
import logging
import os
import re
from itertools import islice
from typing import Any, Dict, List, Optional, Tuple, Union

from google.protobuf.descriptor import FieldDescriptor as _FD

from . import ge_ir_schema as ge_schema
from . import ge_text as _ge_text
from ._text_lines import string_end as _string_end, NOT_PLAIN_ESCAPE as _NOT_PLAIN_ESCAPE
from .ge_text import is_repeated as _is_repeated, c_escape as _c_escape, parse_model, parse_model_text

__all__ = ["to_msaccucmp_json", "write_msaccucmp_json", "JSON_BLACK_FIELDS"]

PathLike = Union[str, "os.PathLike[str]"]
_LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------- msaccucmp JSON

#: Fields ``atc --mode=5`` drops from the JSON (weights, offsets, sizes; §2.7).
JSON_BLACK_FIELDS = frozenset(("output", "data_offset", "data", "workspace", "workspace_bytes",
                               "memory_size", "weight_size", "size", "bt", "quantize_factor"))
_JSON_MAX_DEPTH = 20  # deeper messages come out as null, as in atc


def _enum_name(field: Any, number: int) -> str:
    value = field.enum_type.values_by_number.get(number)
    if value is not None:
        return value.name
    return "UNKNOWN_ENUM_VALUE_{}_{}".format(field.enum_type.name, number)


def _g_format(value: float) -> Any:
    """A single float as atc writes it: printf "%g" text, or the number if that overflows
    atc's 10-byte buffer."""
    text = "%g" % value
    return text if len(text) < 10 else value


def _json_single(field: Any, value: Any, depth: int) -> Any:
    if field.type == _FD.TYPE_MESSAGE:
        return _json_message(value, depth + 1)
    if field.type == _FD.TYPE_ENUM:
        return _enum_name(field, value)
    if field.type == _FD.TYPE_FLOAT or field.type == _FD.TYPE_DOUBLE:
        return _g_format(value)
    if field.type == _FD.TYPE_BYTES:
        return _c_escape(value)
    return value


def _json_repeated_item(field: Any, value: Any, depth: int) -> Any:
    if field.type == _FD.TYPE_MESSAGE:
        return _json_message(value, depth + 1) if value.ByteSize() else None
    if field.type == _FD.TYPE_ENUM:
        return _enum_name(field, value)
    if field.type == _FD.TYPE_BYTES:
        # atc writes the raw bytes (and fails on invalid UTF-8); C-escape only those.
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return _c_escape(value)
    return value


def _json_map(field: Any, container: Any, depth: int) -> List[Any]:
    entries = []
    for key in sorted(container):
        entry = {"key": key}  # type: Dict[str, Any]
        value = container[key]
        if depth + 1 > _JSON_MAX_DEPTH:
            entries.append(None)
            continue
        if field.message_type.fields_by_name["value"].type == _FD.TYPE_MESSAGE:
            if value.ByteSize():
                entry["value"] = _json_message(value, depth + 2)
        else:
            entry["value"] = value
        entries.append(entry)
    return entries


def _json_message(message: Any, depth: int) -> Any:
    """Pb2Json::Message2Json: declaration order, set fields only, black fields dropped;
    a message with nothing to show is null."""
    if depth > _JSON_MAX_DEPTH:
        return None
    present = {field.name: value for field, value in message.ListFields()}
    out = {}  # type: Dict[str, Any]
    for field in message.DESCRIPTOR.fields:
        if field.name in JSON_BLACK_FIELDS or field.name not in present:
            continue
        value = present[field.name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = _json_map(field, value, depth)
        elif _is_repeated(field):
            out[field.name] = [_json_repeated_item(field, item, depth) for item in value]
        elif field.type == _FD.TYPE_MESSAGE and not value.ByteSize():
            continue
        else:
            out[field.name] = _json_single(field, value, depth)
    return out or None


def to_msaccucmp_json(path_or_model: Any) -> Dict[str, Any]:
    """The JSON document ``atc --mode=5 --om=<ge_proto file> --json=...`` writes (§2.7).

    Mirrors GE's Pb2Json with atc's black list: maps become ``[{"key", "value"}]`` arrays
    (sorted by key here; atc's order is the C++ map's), enums their names, single bytes
    fields C-escaped, single floats printf ``%g`` strings, proto3 defaults omitted. The
    om-only steps (fusion-model group names, compressed attr names) do not apply to text.
    """
    model = path_or_model
    if not hasattr(model, "DESCRIPTOR"):
        model = parse_model(path_or_model)
    return _json_message(model, 0) or {}




# --------------------------------------------------------------------------- direct text -> JSON
#
# The text is read line by line as ge_text's fast parse reads it (one field or block delimiter
# per line), and each value is converted to its JSON text by the rules above: the same values
# the fast parse would encode give the same JSON. A stack of open messages (_Message) collects
# the JSON entries of each; a message's text is made when its block closes. The op items of a
# graph and the graph items of the model are written out as they close instead (the graph's
# and the model's earlier entries first), so memory holds one op. Three memos skip work:
# each line's meaning per message type (_LineMemo: keys, types, shapes repeat), the JSON of
# each block seen before where it closes as the canonical layout does (_BlockMemo), and one
# regex per layout for an op made of plain scalar lines (_Leaves: the small graphs of many
# dump files). Declined (_Decline: the fallback then parses the file), besides what the fast
# parse declines: fields out of declaration order or a repeated field's items not together
# (the JSON groups them), map keys not strictly ascending, unknown fields, comments, messages
# nested deeper than the JSON depth limit, a singular float or double outside a oneof (none
# in ge.proto), and escapes or bytes the raw text does not allow (its UTF-8 is checked string
# by string).

_Decline = _ge_text._Decline
_encode_string = json.encoder.encode_basestring  # what json.dump(ensure_ascii=False) uses
_PLAIN_STRING = re.compile(rb'"[ !#-\[\]-~]*"\Z')  # printable ASCII without " or \
_PLAIN_BYTES = re.compile(rb'"[ !#-&(-\[\]-~]*"\Z')  # ... nor ' (which c_escape escapes)
_INDENT = ["\n" + " " * (4 * level) for level in range(2 * _JSON_MAX_DEPTH + 8)]
_OUT_BUFFER = 1 << 20
_SCALAR, _MESSAGE, _MAP = 0, 1, 2
_STREAMED = {("ModelDef", "graph"), ("GraphDef", "op")}
_JSON_TABLES = {}  # type: Dict[Any, Dict[bytes, Tuple[Any, ...]]]
_WRITTEN = object()  # a streamed message's text: already written


def _string_body(value: bytes) -> bytes:
    """The bytes a double-quoted string value holds, as the fast parse reads them."""
    if value[:1] != b'"' or _string_end(value, 0) != len(value):
        raise _Decline()
    body = value[1:-1]
    if not body.isascii():
        try:
            body.decode("utf-8")  # the text itself must be UTF-8, as parse_model_text checks
        except UnicodeDecodeError:
            raise _Decline() from None
    if b"\\" in body:
        if _NOT_PLAIN_ESCAPE.search(body) is not None:
            raise _Decline()
        body = codecs.escape_decode(body)[0]
    return body


def _json_string(value: bytes, detail: Any) -> str:
    if _PLAIN_STRING.match(value):
        return value.decode("ascii")
    try:
        return _encode_string(_string_body(value).decode("utf-8"))
    except UnicodeDecodeError:
        raise _Decline() from None


def _json_bytes(value: bytes, detail: Any) -> str:
    """A single bytes field: C-escaped (see _json_single)."""
    if _PLAIN_BYTES.match(value):
        return value.decode("ascii")
    return _encode_string(_c_escape(_string_body(value)))


def _json_bytes_item(value: bytes, detail: Any) -> str:
    """An item of a repeated bytes field: as text if UTF-8, else C-escaped (_json_repeated_item)."""
    if _PLAIN_STRING.match(value):
        return value.decode("ascii")
    body = _string_body(value)
    try:
        return _encode_string(body.decode("utf-8"))
    except UnicodeDecodeError:
        return _encode_string(_c_escape(body))


def _json_int(value: bytes, detail: Any) -> str:
    if len(value) < 10 and value.isdigit() and (value[:1] != b"0" or len(value) == 1):
        return value.decode("ascii")  # in the range of every integer type
    if _ge_text._DECIMAL.match(value):
        number = int(value)
    elif _ge_text._HEX.match(value):
        number = int(value, 16)
    else:
        raise _Decline()
    if not detail[0] <= number <= detail[1]:
        raise _Decline()
    return str(number)


def _json_bool(value: bytes, detail: Any) -> str:
    flag = _ge_text._BOOLS.get(value)
    if flag is None:
        raise _Decline()
    return "true" if flag else "false"


def _json_enum(value: bytes, detail: Any) -> str:
    text = detail.get(value)
    if text is None:
        raise _Decline()
    return text


def _float_value(value: bytes, detail: Any) -> float:
    """The value a float (``detail`` "<f") or double ("<d") field holds after the fast parse."""
    number = _ge_text._FLOAT_WORDS.get(value)
    if number is None:
        if not _ge_text._FLOAT.match(value):
            raise _Decline()
        number = float(value)
    try:
        return detail.unpack(detail.pack(number))[0]
    except (OverflowError, ValueError):
        raise _Decline() from None


def _json_number(number: float) -> str:
    """A float as json.dump writes it (allow_nan)."""
    if number != number:
        return "NaN"
    if number in (float("inf"), float("-inf")):
        return "Infinity" if number > 0 else "-Infinity"
    return float.__repr__(number)


def _json_float(value: bytes, detail: Any) -> str:
    """A single float field: printf %g text (see _g_format)."""
    number = _float_value(value, detail)
    text = "%g" % number
    return '"' + text + '"' if len(text) < 10 else _json_number(number)


def _json_float_item(value: bytes, detail: Any) -> str:
    return _json_number(_float_value(value, detail))


def _decline(value: bytes, detail: Any) -> str:
    raise _Decline()


def _json_table(descriptor: Any) -> Dict[bytes, Tuple[Any, ...]]:
    """name -> (declaration index, _SCALAR/_MESSAGE/_MAP, repeated, oneof, converter, detail,
    '"name": ' (None: a black field), default JSON text of a singular scalar, field
    descriptor, streamed, the key of a map entry) for the fields of a message type."""
    table = _JSON_TABLES.get(descriptor)
    if table is not None:
        return table
    table = {}
    wire_table = _ge_text._field_table(descriptor)
    for index, field in enumerate(descriptor.fields):
        name = field.name.encode()
        kind, _tag, repeated, oneof, detail = wire_table[name]
        shape, convert, default = _SCALAR, _decline, None
        if field.type == _FD.TYPE_MESSAGE:
            shape = _MAP if field.message_type.GetOptions().map_entry else _MESSAGE
        elif kind in _ge_text._INT_RANGES:
            convert, default = _json_int, "0"
        elif kind == _FD.TYPE_BOOL:
            convert, default = _json_bool, "false"
        elif kind == _FD.TYPE_ENUM:
            detail = {value.name.encode(): '"' + value.name + '"' for value in field.enum_type.values}
            convert = _json_enum
            default = next(('"' + value.name + '"' for value in field.enum_type.values if value.number == 0), None)
        elif kind == _FD.TYPE_STRING:
            convert, default = _json_string, '""'
        elif kind == _FD.TYPE_BYTES:
            convert, default = (_json_bytes_item if repeated else _json_bytes), '""'
        elif kind in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE):
            if repeated:
                convert = _json_float_item
            elif oneof is not None:  # (outside a oneof, is -0.0 set? not decided here)
                convert = _json_float
        key = None if field.name in JSON_BLACK_FIELDS else '"' + field.name + '": '
        streamed = (descriptor.name, field.name) in _STREAMED
        map_key = descriptor.GetOptions().map_entry and field.name == "key"
        table[name] = (index, shape, repeated, oneof, convert, detail, key, default, field, streamed, map_key)
    _JSON_TABLES[descriptor] = table
    return table


class _Message(object):
    """An open message: its fields, the JSON level of its object, the entries made so far
    (JSON text, each '"name": value'), the declaration index of the last field given, the
    items of the repeated field being read, whether it serializes to anything."""

    __slots__ = ("table", "level", "entries", "last", "items", "item_key", "nonempty", "oneof",
                 "parent", "field", "stream", "committed", "count", "streamed", "last_key", "entry", "block",
                 "memo", "heads")

    def __init__(self, table: Dict[bytes, Tuple[Any, ...]], level: int, parent: Optional["_Message"],
                 field: Any, stream: bool, entry: bool, memos: "_LineMemo") -> None:
        self.table = table
        self.memo, self.heads = memos.of(table)  # (see _convert_lines)
        self.level = level
        self.entries = []  # type: List[str]
        self.last = -1
        self.items = None  # type: Optional[List[str]]
        self.item_key = ""
        self.nonempty = False
        self.oneof = False
        self.parent = parent
        self.field = field  # its field in the parent (a table value)
        self.stream = stream  # its streamed fields are written out as they come
        self.committed = False  # its "{" and the entries so far are written
        self.count = 0  # entries written (committed)
        self.streamed = 0  # items of the streamed field written so far
        self.last_key = None  # type: Optional[str]  # the previous key of the map being read
        self.entry = entry  # a map entry
        self.block = None  # type: Optional[Tuple[bytes, int, Dict[bytes, Any]]]  # for _BlockMemo


class _LineMemo(object):
    """Per message type (field table): line -> _classify result, and the heads _classify
    remembers; made on first use, kept for one conversion."""

    def __init__(self) -> None:
        self.memos = {}  # type: Dict[int, Tuple[Dict[bytes, Any], Dict[bytes, Any]]]

    def of(self, table: Dict[bytes, Tuple[Any, ...]]) -> Tuple[Dict[bytes, Any], Dict[bytes, Any]]:
        memos = self.memos.get(id(table))
        if memos is None:
            memos = self.memos[id(table)] = ({}, {})
        return memos


class _Sink(object):
    """Text written in pieces of about _OUT_BUFFER characters."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.parts = []  # type: List[str]
        self.size = 0

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size >= _OUT_BUFFER:
            self.flush()

    def flush(self) -> None:
        self.handle.write("".join(self.parts))
        self.parts = []
        self.size = 0


def _add_entry(frame: _Message, entry: str, out: _Sink) -> None:
    if frame.committed:
        out.write(("," if frame.count else "") + _INDENT[frame.level + 1] + entry)
        frame.count += 1
    else:
        frame.entries.append(entry)


def _end_field(frame: _Message, out: _Sink) -> None:
    """Close the repeated field being read: its array becomes an entry (or is ended, streamed)."""
    if frame.streamed:
        out.write(_INDENT[frame.level + 1] + "]")
        frame.streamed = 0
    elif frame.items is not None:
        items, frame.items = frame.items, None
        if items:
            inner = _INDENT[frame.level + 2]
            _add_entry(frame, frame.item_key + "[" + inner + ("," + inner).join(items)
                       + _INDENT[frame.level + 1] + "]", out)


def _commit(frame: _Message, out: _Sink) -> None:
    """Write the opening of ``frame`` and its entries so far (and its parents', first)."""
    inner = _INDENT[frame.level + 1]
    out.write((_begin_item(frame.parent, out) if frame.parent is not None else "") + "{" + "".join(("," if index else "") + inner + entry for index, entry in enumerate(frame.entries)))
    frame.count = len(frame.entries)
    frame.entries = []
    frame.committed = True


def _begin_item(frame: _Message, out: _Sink) -> str:
    """What comes before the next item of the streamed field ``frame`` is reading (to write)."""
    if not frame.committed:
        _commit(frame, out)
    frame.streamed += 1
    if frame.streamed > 1:
        return "," + _INDENT[frame.level + 2]
    frame.count += 1
    return ("," if frame.count > 1 else "") + _INDENT[frame.level + 1] + frame.item_key + "[" + _INDENT[frame.level + 2]


def _message_text(frame: _Message, out: _Sink) -> Any:
    """The JSON text of a closed message: None if it serializes to nothing, _WRITTEN if streamed."""
    _end_field(frame, out)
    entries = frame.entries
    if frame.committed:
        out.write(_INDENT[frame.level] + "}")
        return _WRITTEN
    if frame.entry:  # {"key": ..., "value": ...}, the key even when ""
        entries.insert(0, '"key": ' + (frame.last_key or '""'))
    elif not frame.nonempty:
        return None
    if not entries:
        return "null"
    inner = _INDENT[frame.level + 1]
    return "{" + inner + ("," + inner).join(entries) + _INDENT[frame.level] + "}"


def _child_result(child: _Message, out: _Sink) -> Tuple[Any, Optional[str]]:
    """(JSON text, its map key if a map entry) of the closed message ``child`` (_message_text)."""
    text = _message_text(child, out)
    if not child.entry:
        return text, None
    key_text = child.last_key or '""'
    return text, (json.loads(key_text) if "\\" in key_text else key_text[1:-1])


def _put_child(frame: _Message, info: Tuple[Any, ...], text: Any, map_key: Optional[str], out: _Sink) -> None:
    """Put a closed message (its field ``info``, its _child_result) into ``frame``, its parent."""
    if text is _WRITTEN:
        return
    if map_key is not None:  # the keys of a map must come sorted, once each: the JSON lists them sorted
        if frame.last_key is not None and not frame.last_key < map_key:
            raise _Decline()
        frame.last_key = map_key
    key = info[6]
    if not info[2]:
        if text is not None and key is not None:
            _add_entry(frame, key + text, out)
        return
    if key is None:
        return
    if text is None:
        text = "null"
    if frame.stream and info[9]:
        out.write(_begin_item(frame, out) + text)
    else:
        frame.items.append(text)


def _start_field(frame: _Message, info: Tuple[Any, ...], out: _Sink) -> None:
    """Check that the field of ``info`` may come now in ``frame`` (declaration order, oneof,
    given once) and start its array if it is repeated."""
    index = info[0]
    if index < frame.last:
        raise _Decline()
    if frame.streamed or frame.items is not None:
        _end_field(frame, out)
    frame.last = index
    if info[3] is not None:
        if frame.oneof:
            raise _Decline()
        frame.oneof = True
    if info[2]:
        frame.item_key = info[6]
        frame.last_key = None
        if info[6] is not None and not (frame.stream and info[9]):
            frame.items = []


# line kinds: a singular scalar outside a oneof, a map entry's key, another scalar, "name {", "}", blank
_SINGLE_LINE, _KEY_LINE, _FIELD_LINE, _OPEN_LINE, _CLOSE_LINE, _BLANK_LINE = range(6)
_MEMO_LINES = 8192  # lines remembered per message type (then forgotten, all at once)
_CLOSE_HIT = (_CLOSE_LINE, None, None, None)
_BLANK_HIT = (_BLANK_LINE, None, None, None)


def _classify(line: bytes, table: Dict[bytes, Tuple[Any, ...]],
              heads: Dict[bytes, Tuple[Any, ...]]) -> Tuple[int, Any, Any, Any]:
    """(line kind, field, JSON text of the value, its entry '"name": value' or None) for a
    scalar, (_OPEN_LINE, field, the closing line (_BlockMemo), None), _CLOSE_HIT or _BLANK_HIT
    for a line read in a message of field table ``table``; _Decline else. ``heads`` remembers
    the scalar fields by what comes before ": " on their lines (the indented name), for lines
    not seen before (names, ids)."""
    head, colon, rest = line.partition(b": ")
    info = heads.get(head) if colon else None
    if info is not None:  # _FIELD_HEAD matched this line up to the colon before
        rest = rest.strip(b" \t\r")
        if not rest:
            raise _Decline()
        return _scalar_hit(info, info[4](rest, info[5]))
    head = _ge_text._FIELD_HEAD.match(line)
    if head is None:
        if _ge_text._CLOSE.match(line):
            return _CLOSE_HIT
        if line.strip(b" \t\r"):
            raise _Decline()
        return _BLANK_HIT
    info = table.get(head.group(1))
    if info is None:
        raise _Decline()
    rest = line[head.end():].strip(b" \t\r")
    if head.group(2) is not None:  # name {
        if rest or info[1] == _SCALAR:
            raise _Decline()
        # the line that closes the block in the canonical layout (for _BlockMemo)
        closer = b"\n" + line[:len(line) - len(line.lstrip(b" \t"))] + (b"}\r\n" if line[-1:] == b"\r" else b"}\n")
        return _OPEN_LINE, info, closer, _json_table(info[8].message_type)
    if not rest or info[1] != _SCALAR:
        raise _Decline()
    if line[head.end() - 1:head.end() + 1] == b": ":
        heads[line[:head.end() - 1]] = info
    return _scalar_hit(info, info[4](rest, info[5]))


def _scalar_hit(info: Tuple[Any, ...], text: str) -> Tuple[int, Any, Any, Any]:
    kind = _KEY_LINE if info[10] else (_FIELD_LINE if info[2] or info[3] is not None else _SINGLE_LINE)
    return kind, info, text, (None if info[6] is None else info[6] + text)


class _BlockMemo(object):
    """The JSON of message blocks seen before (attr entries, shapes, descs repeat): for each
    (message type, JSON level, depth), block text -> (JSON text, map key, lines after the
    first). A block is remembered when it closed on the line the canonical layout closes it
    with (same indentation): the same lines in the same place give the same JSON. At most
    _MEMO_BYTES of block text are kept (then all are forgotten), blocks over _MEMO_BLOCK
    bytes never."""

    def __init__(self) -> None:
        self.memos = {}  # type: Dict[Tuple[int, int, int], Dict[bytes, Tuple[Any, Optional[str], int]]]
        self.size = 0

    def memo(self, frame: _Message, depth: int) -> Dict[bytes, Tuple[Any, Optional[str], int]]:
        where = (id(frame.table), frame.level, depth)
        memo = self.memos.get(where)
        if memo is None:
            memo = self.memos[where] = {}
        return memo

    def remember(self, block: Tuple[bytes, int, Dict[bytes, Any]], text: Any, map_key: Optional[str]) -> None:
        key, _close_at, memo = block
        if len(key) > _MEMO_BLOCK:
            return
        self.size += len(key)
        if self.size > _MEMO_BYTES:
            self.memos.clear()
            self.size = len(key)
        memo[key] = (text, map_key, key.count(b"\n") - 1)


_MEMO_BYTES = 8 << 20
_MEMO_BLOCK = 16 << 10


_LEAF_SHAPE = re.compile(r"(?m):.*$")  # cut away: what is left of a leaf's lines is their indented names
_MAX_LEAF_SHAPES = 4096  # leaf shapes kept per conversion (then all are forgotten)
_PLAIN_TEXT = r'"[ !#-\[\]-~]%s"'  # (see _PLAIN_STRING; %s: * or +)
_PLAIN_BYTES_TEXT = r'"[ !#-&(-\[\]-~]%s"'


def _plain_pattern(info: Tuple[Any, ...]) -> Optional[Tuple[str, str]]:
    """(regex, JSON template) of the values of a scalar field whose JSON text is the value
    itself (enum names: quoted), set (a value that is not the default, unless in a oneof or
    repeated) and spelled the one way the fast parse reads it; None for the other kinds."""
    kind, repeated, oneof, detail = info[8].type, info[2], info[3] is not None, info[5]
    given = not repeated and not oneof  # then the default value is left out of the JSON
    if kind == _FD.TYPE_STRING or (kind == _FD.TYPE_BYTES and repeated):
        return _PLAIN_TEXT % ("+" if given else "*"), "%s"
    if kind == _FD.TYPE_BYTES:
        return _PLAIN_BYTES_TEXT % ("+" if given else "*"), "%s"
    if kind in _ge_text._INT_RANGES:
        number = ("-?" if detail[0] < 0 else "") + "[1-9][0-9]{0,8}"
        return (number if given else "(?:0|" + number + ")"), "%s"
    if kind == _FD.TYPE_BOOL:
        return ("true" if given else "(?:true|false)"), "%s"
    if kind == _FD.TYPE_ENUM:
        names = [value.name for value in info[8].enum_type.values if not (given and value.number == 0)]
        return "(?:" + "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True)) + ")", '"%s"'
    return None


class _Leaves(object):
    """Leaf blocks (only scalar lines) read with one regex: for each leaf shape (the lines'
    indented names) seen in a message type at a JSON level, a regex that matches the block's
    lines when every value is plain (_plain_pattern) and a template that makes its JSON from
    the values. Built once per shape, with the checks of _convert_lines that depend on the
    names only (known scalar fields, declaration order, given once, one oneof member); a shape
    that fails them, or a block that does not match, is read line by line."""

    def __init__(self) -> None:
        self.plans = {}  # type: Dict[Tuple[int, int, str], Any]
        self.recent = {}  # type: Dict[Tuple[bytes, int, int], Any]  # open line -> last plan

    def read(self, inner: bytes, line: bytes, table: Dict[bytes, Tuple[Any, ...]],
             level: int) -> Optional[Tuple[Any, int]]:
        """(JSON text (None: nothing set), lines of ``inner``) of the block opened by ``line``
        whose inner lines are ``inner``, or None if it is not a plain leaf."""
        try:
            text = inner.decode("ascii")
        except UnicodeDecodeError:
            return None
        where = (line, id(table), level)
        plan = self.recent.get(where)
        if plan is not None:
            match = plan[0].fullmatch(text)
            if match is not None:
                return (plan[1] % match.groups() if plan[1] is not None else None), plan[2]
        shape = _LEAF_SHAPE.sub("", text)
        key = (id(table), level, shape)
        plan = self.plans.get(key, False)
        if plan is False:
            if len(self.plans) >= _MAX_LEAF_SHAPES:
                self.plans.clear()
                self.recent.clear()
            plan = self.plans[key] = _leaf_plan(shape, table, level)
        if plan is None:
            return None
        match = plan[0].fullmatch(text)
        if match is None:
            return None
        self.recent[where] = plan
        return (plan[1] % match.groups() if plan[1] is not None else None), plan[2]


def _leaf_plan(shape: str, table: Dict[bytes, Tuple[Any, ...]], level: int) -> Optional[Tuple[Any, Any, int]]:
    """(compiled regex, JSON template, number of lines) for a leaf shape (_Leaves); None if
    the shape is not one of plain values."""
    lines = shape.split("\n")
    if lines.pop() != "":
        return None
    pattern = []  # type: List[str]
    entries = []  # type: List[Tuple[str, List[str], bool]]  # (key, value templates, repeated)
    last, oneof, previous = -1, False, None
    for line in lines:
        name = line.lstrip(" ")
        if not re.match(r" *[A-Za-z_]\w*\Z", line):
            return None
        info = table.get(name.encode("ascii"))
        if info is None or info[1] != _SCALAR or info[10]:
            return None
        plain = _plain_pattern(info)
        if plain is None:
            return None
        value, template = plain
        if not (info is previous and info[2]):  # (else: the next item of a repeated field)
            if info[0] <= last:  # out of order, or given twice
                return None
            if info[3] is not None:
                if oneof:
                    return None
                oneof = True
            last, previous = info[0], info
            if info[6] is not None:
                entries.append((info[6].replace("%", "%%"), [], info[2]))
        pattern.append(re.escape(line + ": ") + (value if info[6] is None else "(" + value + ")") + "\n")
        if info[6] is not None:
            entries[-1][1].append(template)
    if not lines:  # nothing set
        return re.compile(""), None, 0
    texts = []
    for key, values, repeated in entries:
        if repeated:
            inner = _INDENT[level + 2]
            texts.append(key + "[" + inner + ("," + inner).join(values) + _INDENT[level + 1] + "]")
        else:
            texts.append(key + values[0])
    inner = _INDENT[level + 1]
    template = "{" + inner + ("," + inner).join(texts) + _INDENT[level] + "}" if texts else "null"
    return re.compile("".join(pattern)), template, len(lines)


class _Closers(object):
    """The next canonical closing line of a block, found with one scan per occurrence: for
    each closing line (one per indentation), the offset searched from and what was found
    there (-1: none up to the chunk end), so text whose blocks close otherwise (trailing
    blanks) is not scanned again for every block."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.known = {}  # type: Dict[bytes, Tuple[int, int, int]]  # closer -> (from, found, end)

    def find(self, closer: bytes, start: int, end: int) -> int:
        """``data.find(closer, start, end)``."""
        known = self.known.get(closer)
        if known is not None and known[0] <= start and known[2] == end and (known[1] < 0 or start <= known[1]):
            return known[1]
        found = self.data.find(closer, start, end)
        self.known[closer] = (start, found, end)
        return found


def _convert_lines(data: bytes, out: _Sink) -> None:
    """Write the JSON of ge_proto text ``data`` to ``out``; _Decline if not sure of it.
    Each line's meaning is remembered per message type (lines repeat: keys, types, shapes),
    and so is each block's JSON (_BlockMemo)."""
    memos = _LineMemo()
    root = frame = _Message(_json_table(ge_schema.ModelDef.DESCRIPTOR), 0, None, None, True, False, memos)
    stack = []  # type: List[_Message]
    memo = frame.memo
    blocks = _BlockMemo()
    leaves = _Leaves()
    closers = _Closers(data)
    size, start = len(data), 0
    while start < size:
        end = data.find(b"\n", start + _ge_text._CHUNK_CHARS)
        end = size if end < 0 else end + 1
        lines = iter(data[start:end].split(b"\n"))
        pos, start = start, end
        for line in lines:
            line_start = pos
            pos += len(line) + 1
            hit = memo.get(line)
            if hit is None:
                hit = _classify(line, frame.table, frame.heads)
                if len(memo) >= _MEMO_LINES:
                    memo.clear()
                memo[line] = hit
            action, info, text, entry = hit
            if action == _SINGLE_LINE:
                if info[0] <= frame.last:  # out of order, or given twice
                    raise _Decline()
                if frame.items is not None or frame.streamed:
                    _end_field(frame, out)
                frame.last = info[0]
                if text != info[7] and entry is not None:  # (proto3: a default value is not set)
                    frame.nonempty = True
                    if frame.committed:
                        _add_entry(frame, entry, out)
                    else:
                        frame.entries.append(entry)
                elif text != info[7]:
                    frame.nonempty = True
            elif action == _FIELD_LINE:
                if info[0] != frame.last:
                    _start_field(frame, info, out)
                elif not info[2]:
                    raise _Decline()
                frame.nonempty = True
                if info[2]:
                    if entry is not None:
                        frame.items.append(text)
                elif entry is not None:
                    _add_entry(frame, entry, out)
            elif action == _KEY_LINE:
                if info[0] <= frame.last:
                    raise _Decline()
                frame.last = info[0]
                if text != info[7]:
                    frame.nonempty = True
                    frame.last_key = text
            elif action == _OPEN_LINE:
                closer, child_table = text, entry
                if info[0] != frame.last:
                    _start_field(frame, info, out)
                elif not info[2]:
                    raise _Decline()
                depth = len(stack) + 1
                if depth >= _JSON_MAX_DEPTH:
                    raise _Decline()
                frame.nonempty = True  # a message given, even empty, serializes its tag
                stream = frame.stream and info[9]
                level = frame.level + (2 if info[2] else 1)
                block = None
                close_at = closers.find(closer, line_start, end)  # where the canonical layout closes it
                if close_at >= 0 and close_at - line_start <= _MEMO_BLOCK:
                    block_end = close_at + len(closer)
                    if not stream:  # seen before?
                        key = data[line_start:block_end]
                        block_memo = blocks.memo(frame, depth)
                        known = block_memo.get(key)
                        if known is not None:
                            _put_child(frame, info, known[0], known[1], out)
                            next(islice(lines, known[2] - 1, known[2]), None)  # the block's other lines
                            pos = block_end
                            continue
                        block = (key, close_at + 1, block_memo)
                    elif info[1] != _MAP and data.find(b"{", pos, close_at) < 0:  # a streamed leaf?
                        found = leaves.read(data[pos:close_at + 1], line, child_table, level)
                        if found is not None:
                            _put_child(frame, info, found[0], None, out)
                            next(islice(lines, found[1], found[1] + 1), None)  # the block's other lines
                            pos = block_end
                            continue
                stack.append(frame)
                frame = _Message(child_table, level, frame, info, stream, info[1] == _MAP, memos)
                frame.block = block
                memo = frame.memo
            elif action == _CLOSE_LINE:
                if not stack:
                    raise _Decline()
                child, frame = frame, stack.pop()
                text, map_key = _child_result(child, out)
                if child.block is not None and child.block[1] == line_start:
                    blocks.remember(child.block, text, map_key)
                _put_child(frame, child.field, text, map_key, out)
                memo = frame.memo
    if stack:
        raise _Decline()
    text = _message_text(root, out)
    if text is not _WRITTEN:
        out.write(text if text is not None and text != "null" else "{}")
    out.write("\n")
    out.flush()


def _write_direct(data: bytes, tmp_path: str) -> bool:
    """Write the JSON of ``data`` to ``tmp_path`` by the direct path; False if declined (or if
    ``tmp_path`` cannot be opened: the fallback then fails as before)."""
    try:
        handle = open(tmp_path, "w", encoding="utf-8")
    except OSError:
        return False
    done = False
    # Refcounting frees all the conversion allocates (no cycles): the cycle collector would
    # only go over the line memos again and again (as in ge_graph's scan); paused meanwhile.
    collect = gc.isenabled()
    gc.disable()
    try:
        with handle:
            _convert_lines(data, _Sink(handle))
        done = True
    except _Decline:
        _LOG.debug("direct msaccucmp JSON declined %s; parsing it", tmp_path)
    finally:
        if collect:
            gc.enable()
        if not done:
            os.remove(tmp_path)
    return done


def write_msaccucmp_json(path_or_model: Any, json_path: PathLike) -> None:
    """Write :func:`to_msaccucmp_json` of a ge_proto text file (path) or a ``ModelDef`` to
    ``json_path`` (UTF-8, indent 4, as ``json.dump``), atomically. A file is converted by the
    direct path when it can (memory: see the module doc), else parsed: GraphFormatError then
    as from :func:`.ge_text.parse_model`."""
    json_path = os.fspath(json_path)
    if hasattr(path_or_model, "DESCRIPTOR"):
        _write_parsed(path_or_model, json_path)
        return
    path = os.fspath(path_or_model)
    with open(path, "rb") as handle:
        data = handle.read()
    if _write_direct(data, json_path + ".tmp"):
        os.replace(json_path + ".tmp", json_path)
        return
    model = parse_model_text(data, path)
    del data
    _write_parsed(model, json_path)


def _write_parsed(model: Any, json_path: str) -> None:
    """Write :func:`to_msaccucmp_json` of ``model`` with json.dump (the document in memory)."""
    tmp_path = json_path + ".tmp"
    document = to_msaccucmp_json(model)
    with open(tmp_path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=4, ensure_ascii=False)
        handle.write("\n")
    os.replace(tmp_path, json_path)
