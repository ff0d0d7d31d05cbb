"""GE graph dumps (``ge_proto_*.txt``): fast scan, full parse, msaccucmp JSON, text writer.

Format (reference ascend-dump-formats.md §2.3): protobuf text format of ``ge.proto.ModelDef``
(:mod:`.ge_schema`) as C++ ``TextFormat::Print`` writes it — the *canonical layout*: one field
or block delimiter per line, 2 spaces of indentation per nesting level, ``name {`` opens and
``}`` closes a block, fields in field-number order, map entries as ``attr { key: ... value
{...} }`` sorted by key, strings double-quoted with C escapes (never a raw newline inside).

Scanning (:func:`iter_graphs`) extracts per graph its name and per op the name, type, id,
inputs, ``_no_task``, ``_datadump_original_op_names`` and, per output_desc,
``_datadump_origin_name`` / ``_datadump_origin_output_index`` (§2.4, §2.5):

* a tokenizer that follows the full text-format grammar (``<>``, ``;``/``,``, comments,
  one-line blocks, list values, single quotes, adjacent-string concatenation) and tracks the
  field path of open blocks; it reads the file skeleton and any text not in canonical
  layout, and raises :class:`GraphFormatError` (byte offset, rule) on malformed text;
* a fast path for each op block in canonical layout (`op {` on a line indented by exactly
  2 under a top-level ``graph``): C-speed ``bytes.find`` for newline-anchored multi-line
  patterns whose indentation pins the nesting level, so nested blocks are skipped without
  being tokenized. It checks strictly what it extracts (strings and their escapes, integers,
  bools, the value kind of each origin attr) but, by design, not the text it skips inside an
  op: garbage there is reported by :func:`parse_model`, not by the scanner.

Both paths give identical results on canonical files (tested). :func:`parse_model` builds the
whole message with ``google.protobuf.text_format`` (unknown fields and extensions skipped).
:func:`to_msaccucmp_json` gives what ``atc --mode=5`` writes (§2.7), :func:`format_model` the
text GE would write.
"""
import json
import logging
import math
import mmap
import os
import re
import struct
from typing import (Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence,
                    Tuple, Union)

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor as _FD

from ..errors import GraphFormatError
from . import ge_schema

__all__ = [
    "OutputOrigin",
    "OpSummary",
    "GraphSummary",
    "iter_graphs",
    "scan_graph",
    "first_graph_name",
    "op_types",
    "contains_op_type",
    "parse_model",
    "parse_model_text",
    "to_msaccucmp_json",
    "write_msaccucmp_json",
    "JSON_BLACK_FIELDS",
    "format_model",
    "write_graph_text",
    "set_attr",
    "make_tensor_desc",
    "make_op",
    "make_model",
]

_LOG = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]


class OutputOrigin(NamedTuple):
    """The TF tensor one output_desc comes from; None where the attr is absent."""

    origin_name: Optional[str]
    origin_output_index: Optional[int]


class OpSummary(NamedTuple):
    """What graph selection and name mapping need from one OpDef."""

    name: str
    type: str
    id: int
    inputs: Tuple[str, ...]
    no_task: bool
    original_op_names: Optional[Tuple[str, ...]]  # None: attr absent
    outputs: Tuple[OutputOrigin, ...]


class GraphSummary(NamedTuple):
    """One GraphDef of the file (graph[0] is the main graph)."""

    name: str
    ops: List[OpSummary]


# --------------------------------------------------------------------------- strings

_ESCAPE = re.compile(
    rb'\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))', re.S)
_SIMPLE_ESCAPES = {
    b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f",
    b"v": b"\v", b"\\": b"\\", b"'": b"'", b'"': b'"', b"?": b"?",
}


def _unescape(raw: bytes, path: str, offset: int) -> bytes:
    """Bytes of a text-format string body (without quotes); C escapes resolved."""
    if b"\\" not in raw:
        return raw

    def replace(match: "re.Match[bytes]") -> bytes:
        octal, hex2, u4, u8, simple = match.groups()
        if octal is not None:
            value = int(octal, 8)
            if value > 0xFF:
                raise GraphFormatError(path, "octal escape above \\377", offset + match.start())
            return bytes((value,))
        if hex2 is not None:
            return bytes((int(hex2, 16),))
        if u4 is not None or u8 is not None:
            code = int(u4 or u8, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise GraphFormatError(path, "invalid unicode escape", offset + match.start())
            return chr(code).encode("utf-8")
        if simple in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[simple]
        raise GraphFormatError(path, "invalid escape \\{}".format(
            simple.decode("latin-1")), offset + match.start())

    return _ESCAPE.sub(replace, raw)


def _text(raw: bytes, path: str, offset: int) -> str:
    """A string value as str: escapes resolved, UTF-8 decoded (bad bytes become U+FFFD)."""
    return _unescape(raw, path, offset).decode("utf-8", "replace")


def _int(raw: bytes, path: str, offset: int) -> int:
    try:
        return int(raw, 0) if raw[:2].lower() in (b"0x", b"-0") and len(raw) > 2 else int(raw)
    except ValueError:
        raise GraphFormatError(path, "expected an integer, got {!r}".format(
            raw[:40].decode("latin-1")), offset) from None


_TRUE = frozenset((b"true", b"True", b"t", b"1"))
_FALSE = frozenset((b"false", b"False", b"f", b"0"))


def _bool(raw: bytes, path: str, offset: int) -> bool:
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise GraphFormatError(path, "expected a bool, got {!r}".format(
        raw[:40].decode("latin-1")), offset)


# --------------------------------------------------------------------------- op assembly

_NO_TASK = "_no_task"
_ORIGINAL_NAMES = "_datadump_original_op_names"
_ORIGIN_NAME = "_datadump_origin_name"
_ORIGIN_INDEX = "_datadump_origin_output_index"


class _OpBuilder(object):
    """Mutable fields of the op being scanned."""

    __slots__ = ("name", "type", "id", "inputs", "no_task", "original_op_names", "outputs")

    def __init__(self) -> None:
        self.name = ""
        self.type = ""
        self.id = 0
        self.inputs = []  # type: List[str]
        self.no_task = False
        self.original_op_names = None  # type: Optional[Tuple[str, ...]]
        self.outputs = []  # type: List[List[Any]]  # [origin_name, origin_index]

    def build(self) -> OpSummary:
        return OpSummary(self.name, self.type, self.id, tuple(self.inputs), self.no_task,
                         self.original_op_names,
                         tuple(OutputOrigin(name, index) for name, index in self.outputs))


class _NotCanonical(Exception):
    """The fast path met a layout it does not handle; the general path takes over."""


# --------------------------------------------------------------------------- fast path

_STR = rb'[^"\\\n]*(?:\\.[^"\\\n]*)*'
_SCALAR_RE = re.compile(rb"[-+.\w]+(?=\n)")
# Canonical op layout (field-number order): `  op {`, then name, type, inputs at 4 spaces.
_OP_OPENER = b"\n  op {\n"
_OP_CLOSER = b"\n  }\n"
_OP_HEAD_RE = re.compile(
    rb'(?:\n    name: "(' + _STR + rb')")?(?:\n    type: "(' + _STR + rb')")?'
    rb'((?:\n    input: "' + _STR + rb'")*)(?=\n)')
_INPUT_RE = re.compile(rb'\n    input: "(' + _STR + rb')"')
_STR_LINE_RE = re.compile(rb'"(' + _STR + rb')"(?=\n)')
_ID_LINE = b"\n    id: "
_NO_TASK_ENTRY = b'\n    attr {\n      key: "_no_task"\n      value {\n        '
_NAMES_ENTRY = b'\n    attr {\n      key: "_datadump_original_op_names"\n      value {\n'
_NAMES_END = b"\n      }\n"
_LIST_S_RE = re.compile(rb'\n          s: "(' + _STR + rb')"(?=\n)')
_OUT_DESC = b"\n    output_desc {\n"
_DESC_END = b"\n    }\n"
_ORIGIN_NAME_ENTRY = (b'\n      attr {\n        key: "_datadump_origin_name"\n'
                      b"        value {\n          ")
_ORIGIN_INDEX_ENTRY = (b'\n      attr {\n        key: "_datadump_origin_output_index"\n'
                       b"        value {\n          ")
# First line of an AttrDef value: `s: "..."`, or `<i|b|f|...>: scalar`, or a block.
_VALUE_LINE_RE = re.compile(rb'(?:s: "(' + _STR + rb')"|(\w+): ([-+.\w]+))(?=\n)')
_HEAD_LEFTOVER_RE = re.compile(rb"\n    (?:name|type|input)(?!\w)")


def _fast_op(data: Any, start: int, path: str) -> Optional[Tuple[OpSummary, int]]:
    """Summarise the canonical op block whose `op {` is at ``start`` (a line indented by 2).

    Returns (summary, offset after the block), or None when the op lines do not have the
    canonical form (the tokenizer then reads the block). Every anchor begins with a newline,
    so none can match inside a string (which never holds a raw newline), and its
    indentation pins the nesting level: op fields at 4 spaces, op attr entries at 6, output
    attr entries at 8. The op ends at the first line that is exactly `  }`; op-level fields
    follow GE's field-number order (name, type, input, attr sorted by key, id, ..., input_desc,
    output_desc), which bounds each search.
    """
    close = data.find(_OP_CLOSER, start)
    if close < 0:
        return None
    base = start + 4  # offset in `data` of body[0], the newline ending the `op {` line
    body = data[base:close + 1]
    head = _OP_HEAD_RE.match(body)
    pos = head.end()
    if _HEAD_LEFTOVER_RE.match(body, pos):
        return None  # a malformed line the head pattern could not take: tokenize it
    name = op_type = ""
    inputs = []  # type: List[str]
    if head.lastindex:
        if head.group(1) is not None:
            name = _text(head.group(1), path, base + head.start(1))
        if head.group(2) is not None:
            op_type = _text(head.group(2), path, base + head.start(2))
        if head.group(3):
            inputs = _texts(_INPUT_RE, body, head.start(3), pos, base, path)
    original_op_names = None  # type: Optional[Tuple[str, ...]]
    no_task = False
    op_id = 0
    id_at = body.find(_ID_LINE, pos)
    attrs_end = id_at if id_at >= 0 else len(body)
    names_at = body.find(_NAMES_ENTRY, pos, attrs_end)
    if names_at >= 0:
        value_start = names_at + len(_NAMES_ENTRY) - 1
        value_end = body.find(_NAMES_END, value_start, attrs_end)
        original_op_names = tuple(_texts(_LIST_S_RE, body, value_start, value_end + 1,
                                         base, path))
    no_task_at = body.find(_NO_TASK_ENTRY, pos, attrs_end)
    if no_task_at >= 0:
        at = no_task_at + len(_NO_TASK_ENTRY)
        no_task = _bool(_value_at(body, at, b"b", _NO_TASK + " must be a bool", base, path),
                        path, base + at + 3)
    if id_at >= 0:
        op_id = _int(*_scalar_at(body, id_at + len(_ID_LINE), base, path))
    outputs = []  # type: List[OutputOrigin]
    desc_at = body.find(_OUT_DESC, attrs_end if id_at >= 0 else pos)
    while desc_at >= 0:
        desc_end = body.find(_DESC_END, desc_at)
        if desc_end < 0:
            return None
        outputs.append(_origin(body, desc_at, desc_end + 1, base, path))
        desc_at = body.find(_OUT_DESC, desc_end)
    summary = OpSummary(name, op_type, op_id, tuple(inputs), no_task, original_op_names,
                        tuple(outputs))
    return summary, close + len(_OP_CLOSER)


def _texts(pattern: Any, body: bytes, start: int, end: int, base: int,
           path: str) -> List[str]:
    """Group 1 of every ``pattern`` match in body[start:end], as text."""
    if body.find(b"\\", start, end) < 0:  # no escapes: plain decode
        return [raw.decode("utf-8", "replace") for raw in pattern.findall(body, start, end)]
    return [_text(m.group(1), path, base + m.start(1))
            for m in pattern.finditer(body, start, end)]


def _scalar_at(body: bytes, at: int, base: int, path: str) -> Tuple[bytes, str, int]:
    match = _SCALAR_RE.match(body, at)
    if match is None:
        raise GraphFormatError(path, "expected a scalar value", base + at)
    return match.group(), path, base + at


def _value_at(body: bytes, at: int, kind: bytes, rule: str, base: int, path: str) -> bytes:
    """The raw scalar of the AttrDef value line at ``at``, which must be of field ``kind``
    (b"s" gives the string body without quotes)."""
    match = _VALUE_LINE_RE.match(body, at)
    if match is None or (match.group(2) or b"s") != kind:
        raise GraphFormatError(path, rule, base + at)
    return match.group(1) if kind == b"s" else match.group(3)


def _origin(body: bytes, start: int, end: int, base: int, path: str) -> OutputOrigin:
    """Origin attrs of the output_desc block body[start:end]. Entries are sorted by key, so
    the index entry, if any, comes after the name entry."""
    name = index = None  # type: Tuple[Optional[str], Optional[int]]
    at = body.find(_ORIGIN_NAME_ENTRY, start, end)
    if at >= 0:
        at += len(_ORIGIN_NAME_ENTRY)
        raw = _value_at(body, at, b"s", _ORIGIN_NAME + " must be a string", base, path)
        name = (raw.decode("utf-8", "replace") if b"\\" not in raw
                else _text(raw, path, base + at + 4))
        start = at
    at = body.find(_ORIGIN_INDEX_ENTRY, start, end)
    if at >= 0:
        at += len(_ORIGIN_INDEX_ENTRY)
        raw = _value_at(body, at, b"i", _ORIGIN_INDEX + " must be an integer", base, path)
        index = _int(raw, path, base + at + 3)
    return OutputOrigin(name, index)


# --------------------------------------------------------------------------- general path

_TOKEN_RE = re.compile(
    rb"(?P<skip>(?:\s+|\#[^\n]*)+)"
    rb'|(?P<string>"' + _STR + rb'"|\'[^\'\\\n]*(?:\\.[^\'\\\n]*)*\')'
    rb"|(?P<word>[-+]?[\w.]+(?:[-+][\w.]+)?)"
    rb"|(?P<punct>[{}<>:\[\],;])"
)
_IDENT_RE = re.compile(rb"[A-Za-z_]\w*\Z")
_MAX_DEPTH = 100
_CLOSER = {b"{": b"}", b"<": b">"}
_Token = Tuple[str, bytes, int]

_GRAPH = (b"graph",)
_OP = (b"graph", b"op")
_OP_ATTR = (b"graph", b"op", b"attr")
_OP_ATTR_VALUE = (b"graph", b"op", b"attr", b"value")
_OP_ATTR_LIST = (b"graph", b"op", b"attr", b"value", b"list")
_OUT_ATTR = (b"graph", b"op", b"output_desc", b"attr")
_OUT_ATTR_VALUE = (b"graph", b"op", b"output_desc", b"attr", b"value")


class _Tokens(object):
    """Tokens of protobuf text format with one token of lookahead; skips blanks, `,;`, comments.

    With ``fast_ops``, a canonical op block (`op {` on a line indented by exactly 2) comes
    out as one ("op", OpSummary, offset) token read by :func:`_fast_op`.
    """

    def __init__(self, data: Any, path: str, fast_ops: bool = False) -> None:
        self._data = data
        self._size = len(data)
        self._path = path
        self._pos = 0
        self._peeked = None  # type: Optional[Tuple[str, Any, int]]
        self._fast_ops = fast_ops
        self._next_op = -1  # offset of the next "op" word opening a canonical op line
        self._find_next_op(0)

    def _find_next_op(self, start: int) -> None:
        if not self._fast_ops:
            self._next_op = self._size + 1
            return
        if self._data[start:start + len(_OP_OPENER)] == _OP_OPENER:  # back-to-back ops
            self._next_op = start + 3
            return
        found = self._data.find(_OP_OPENER, start)
        self._next_op = found + 3 if found >= 0 else self._size + 1

    def _scan(self) -> Tuple[str, Any, int]:
        while self._pos < self._size:
            if self._pos >= self._next_op:
                if self._pos == self._next_op:
                    fast = _fast_op(self._data, self._pos, self._path)
                    if fast is not None:
                        start = self._pos
                        self._pos = fast[1]
                        self._find_next_op(self._pos - 1)
                        if self._next_op == self._pos + 2:  # skip the indentation too
                            self._pos = self._next_op
                        return "op", fast[0], start
                self._find_next_op(self._pos)
            match = _TOKEN_RE.match(self._data, self._pos)
            if match is None:
                raise GraphFormatError(self._path, "unexpected character {!r}".format(
                    self._data[self._pos:self._pos + 1]), self._pos)
            self._pos = match.end()
            kind = match.lastgroup
            if kind != "skip":
                return kind, match.group(), match.start()
        return "eof", b"", self._size

    def peek(self) -> Tuple[str, Any, int]:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> Tuple[str, Any, int]:
        token = self.peek()
        self._peeked = None
        return token


class _GeneralScan(object):
    """Follows the text-format grammar, keeping the field path of open blocks."""

    def __init__(self, data: Any, path: str, fast_ops: bool = False) -> None:
        self.tokens = _Tokens(data, path, fast_ops)
        self.path = path
        self.stack = []  # type: List[Tuple[bytes, bytes, bool]]  # (name, closer, in list)
        self.graph_name = ""
        self.graph_name_seen = False
        self.ops = []  # type: List[OpSummary]
        self.op = None  # type: Optional[_OpBuilder]
        self.entry = {}  # type: Dict[str, Any]
        self.finished = []  # type: List[GraphSummary]

    def error(self, rule: str, offset: int) -> GraphFormatError:
        return GraphFormatError(self.path, rule, offset)

    def field_path(self) -> Tuple[bytes, ...]:
        return tuple(name for name, _, _ in self.stack)

    # ---- grammar
    def step(self) -> bool:
        """Consume one field or one block end; False at the end of the text."""
        kind, value, offset = self.tokens.next()
        if kind == "eof":
            if self.stack:
                raise self.error("end of file inside block {!r}".format(
                    self.stack[-1][0].decode("latin-1")), offset)
            return False
        if kind == "punct" and value in (b"}", b">"):
            if not self.stack or self.stack[-1][1] != value:
                raise self.error("unbalanced {!r}".format(value.decode()), offset)
            self.close_block()
            return True
        if kind == "punct" and value in (b",", b";"):  # optional field separators
            return True
        if kind == "op":
            if len(self.stack) != 1 or self.stack[0][0] != b"graph":
                raise _NotCanonical()
            self.ops.append(value)
            return True
        name = self.field_name(kind, value, offset)
        kind, value, offset = self.tokens.next()
        has_colon = kind == "punct" and value == b":"
        if has_colon:
            kind, value, offset = self.tokens.next()
        if kind == "punct" and value in _CLOSER:
            self.open_block(name, value, offset, False)
        elif kind == "punct" and value == b"[" and has_colon:
            self.list_value(name)
        elif kind in ("string", "word") and has_colon:
            self.scalar(name, kind, value, offset)
        else:
            raise self.error("expected ':' and a value or '{{' after field {!r}".format(
                name.decode("latin-1")), offset)
        return True

    def field_name(self, kind: str, value: bytes, offset: int) -> bytes:
        if kind == "word" and _IDENT_RE.match(value):
            return value
        if kind == "punct" and value == b"[":  # [extension.name] or [type.url/Any]
            parts = []
            while True:
                kind, value, offset = self.tokens.next()
                if kind == "punct" and value == b"]":
                    return b"[" + b"".join(parts) + b"]"
                if kind != "word" and value != b"/":
                    raise self.error("bad extension name", offset)
                parts.append(value)
        raise self.error("expected a field name, got {!r}".format(
            value[:40].decode("latin-1")), offset)

    def list_value(self, name: bytes) -> None:
        """`name: [v, v]` or `name: [{...}, {...}]`; message elements become list frames."""
        kind, value, offset = self.tokens.peek()
        if kind == "punct" and value == b"]":
            self.tokens.next()
            return
        kind, value, offset = self.tokens.next()
        if kind == "punct" and value in _CLOSER:
            self.open_block(name, value, offset, True)
        elif kind in ("string", "word"):
            self.scalar(name, kind, value, offset)
            self.list_rest(name)
        else:
            raise self.error("bad list element", offset)

    def list_rest(self, name: bytes) -> None:
        """After a list element: `]` ends the list, `,` comes before the next element."""
        kind, value, offset = self.tokens.next()
        if kind == "punct" and value == b"]":
            return
        if kind != "punct" or value != b",":
            raise self.error("expected ',' or ']' in a list", offset)
        self.list_value(name)

    def scalar(self, name: bytes, kind: str, value: bytes, offset: int) -> None:
        if kind == "string":
            raw = _unescape(value[1:-1], self.path, offset + 1)
            while self.tokens.peek()[0] == "string":  # "a" "b" concatenates
                _, more, more_offset = self.tokens.next()
                raw += _unescape(more[1:-1], self.path, more_offset + 1)
            self.on_scalar(name, raw, True, offset)
        else:
            self.on_scalar(name, value, False, offset)

    def open_block(self, name: bytes, opener: bytes, offset: int, in_list: bool) -> None:
        if len(self.stack) >= _MAX_DEPTH:
            raise self.error("blocks nested deeper than {}".format(_MAX_DEPTH), offset)
        where = self.field_path()
        self.stack.append((name, _CLOSER[opener], in_list))
        if where == () and name == b"graph":
            self.graph_name, self.graph_name_seen, self.ops = "", False, []
        elif where == _GRAPH and name == b"op":
            self.op = _OpBuilder()
        elif where in (_OP, _OP[:2] + (b"output_desc",)) and name == b"attr":
            self.entry = {}
        elif where == _OP and name == b"output_desc":
            self.op.outputs.append([None, None])
        elif where == _OP_ATTR_VALUE or where == _OUT_ATTR_VALUE:
            self.entry.setdefault("first", (name, offset))

    def close_block(self) -> None:
        name, _, in_list = self.stack.pop()
        where = self.field_path()
        if where == () and name == b"graph":
            self.finished.append(GraphSummary(self.graph_name, self.ops))
        elif where == _GRAPH and name == b"op":
            self.ops.append(self.op.build())
            self.op = None
        elif where == _OP and name == b"attr":
            self.close_op_attr()
        elif where == _OP + (b"output_desc",) and name == b"attr":
            self.close_output_attr()
        if in_list:
            self.list_rest(name)

    # ---- extraction
    def on_scalar(self, name: bytes, value: bytes, is_string: bool, offset: int) -> None:
        where = self.field_path()
        if where == _GRAPH:
            if name == b"name" and is_string:
                self.graph_name = value.decode("utf-8", "replace")
                self.graph_name_seen = True
        elif where == _OP:
            if name == b"id":
                self.op.id = _int(value, self.path, offset)
            elif is_string and name in (b"name", b"type", b"input"):
                text = value.decode("utf-8", "replace")
                if name == b"input":
                    self.op.inputs.append(text)
                elif name == b"name":
                    self.op.name = text
                else:
                    self.op.type = text
        elif where == _OP_ATTR or where == _OUT_ATTR:
            if name == b"key" and is_string:
                self.entry["key"] = value.decode("utf-8", "replace")
                self.entry["key_offset"] = offset
        elif where == _OP_ATTR_VALUE or where == _OUT_ATTR_VALUE:
            self.entry.setdefault("first", (name, offset))
            if name == b"b" and where == _OP_ATTR_VALUE:
                self.entry["b"] = _bool(value, self.path, offset)
            elif name == b"s" and is_string:
                self.entry["s"] = value.decode("utf-8", "replace")
            elif name == b"i":
                self.entry["i"] = _int(value, self.path, offset)
        elif where == _OP_ATTR_LIST:
            if name == b"s" and is_string:
                self.entry.setdefault("list_s", []).append(value.decode("utf-8", "replace"))

    def entry_value(self, field: bytes, rule: str) -> Any:
        """The entry's value, whose first field must be ``field``."""
        first = self.entry.get("first")
        if first is None or first[0] != field or field.decode() not in self.entry:
            offset = first[1] if first is not None else self.entry.get("key_offset")
            raise self.error(rule, offset)
        return self.entry[field.decode()]

    def close_op_attr(self) -> None:
        key = self.entry.get("key")
        if key == _NO_TASK:
            self.op.no_task = self.entry_value(b"b", _NO_TASK + " must be a bool")
        elif key == _ORIGINAL_NAMES:
            self.op.original_op_names = tuple(self.entry.get("list_s", ()))

    def close_output_attr(self) -> None:
        key = self.entry.get("key")
        if self.stack[-1][0] != b"output_desc":
            return
        if key == _ORIGIN_NAME:
            self.op.outputs[-1][0] = self.entry_value(b"s", _ORIGIN_NAME + " must be a string")
        elif key == _ORIGIN_INDEX:
            self.op.outputs[-1][1] = self.entry_value(b"i",
                                                      _ORIGIN_INDEX + " must be an integer")


def _scan_graphs(data: Any, path: str, fast_ops: bool, skip: int = 0) -> Iterator[GraphSummary]:
    scan = _GeneralScan(data, path, fast_ops)
    yielded = 0
    while scan.step():
        if scan.finished:
            for graph in scan.finished:
                if yielded >= skip:
                    yield graph
                yielded += 1
            del scan.finished[:]


# --------------------------------------------------------------------------- public scan API


class _Mapped(object):
    """Read-only memory map of a file (an empty file maps to b"")."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self._file = open(self.path, "rb")
        try:
            size = os.fstat(self._file.fileno()).st_size
            self.data = (mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                         if size else b"")  # type: Any
        except BaseException:
            self._file.close()
            raise

    def __enter__(self) -> "_Mapped":
        return self

    def __exit__(self, *exc: Any) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        self._file.close()


def iter_graphs(path: PathLike) -> Iterator[GraphSummary]:
    """Yield each graph of a ge_proto text file in file order, one at a time.

    Raises GraphFormatError (path, byte offset, rule) on malformed text; graphs before the
    fault have been yielded by then.
    """
    with _Mapped(path) as mapped:
        yielded = 0
        try:
            for graph in _scan_graphs(mapped.data, mapped.path, True):
                yield graph
                yielded += 1
        except _NotCanonical:
            _LOG.debug("%s: op block outside a graph; rescanning without the fast path",
                       mapped.path)
            for graph in _scan_graphs(mapped.data, mapped.path, False, skip=yielded):
                yield graph


def scan_graph(path: PathLike) -> List[GraphSummary]:
    """All graphs of a ge_proto text file (see :func:`iter_graphs`)."""
    return list(iter_graphs(path))


def first_graph_name(path: PathLike) -> str:
    """``graph[0].name``, read from the start of the file only ("" if unset).

    This is the dump ``model_name`` folder of a Build graph (§2.1). Raises GraphFormatError
    if the file holds no graph or is malformed before the name.
    """
    with _Mapped(path) as mapped:
        scan = _GeneralScan(mapped.data, mapped.path, fast_ops=False)
        while scan.step():
            if scan.graph_name_seen or scan.finished:
                return scan.graph_name
        raise GraphFormatError(mapped.path, "no graph in file", len(mapped.data))


def op_types(path: PathLike) -> Dict[str, int]:
    """Op type -> number of ops of that type, over every graph of the file."""
    counts = {}  # type: Dict[str, int]
    for graph in iter_graphs(path):
        for op in graph.ops:
            counts[op.type] = counts.get(op.type, 0) + 1
    return counts


def contains_op_type(path: PathLike, types: Iterable[str]) -> bool:
    """True as soon as an op of one of ``types`` (exact type names) is seen."""
    wanted = frozenset(types)
    return any(op.type in wanted for graph in iter_graphs(path) for op in graph.ops)


# --------------------------------------------------------------------------- full parse

def _line_col_to_offset(text: str, line: int, column: int) -> int:
    """Byte offset of a 1-based (line, column) position in ``text`` (UTF-8)."""
    lines = text.split("\n")
    line = max(1, min(line, len(lines)))
    before = sum(len(item.encode("utf-8")) + 1 for item in lines[:line - 1])
    return before + len(lines[line - 1][:max(column - 1, 0)].encode("utf-8"))


def _parse_into(text: str, model: Any, allow_unknown: bool) -> None:
    if not allow_unknown:
        text_format.Parse(text, model)
        return
    try:
        text_format.Parse(text, model, allow_unknown_extension=True, allow_unknown_field=True)
    except TypeError:  # protobuf older than 3.8 (below our 3.20.3 floor): strict parse
        _LOG.warning("this protobuf cannot skip unknown fields; parsing strictly")
        text_format.Parse(text, model, allow_unknown_extension=True)


def parse_model_text(text: Union[str, bytes], path: str = "<text>",
                     allow_unknown: bool = True) -> Any:
    """Parse ge_proto text into a ``ge.proto.ModelDef`` message.

    With ``allow_unknown`` (default), fields and extensions the schema lacks (files from a
    newer GE) are skipped; unknown *enum value names* still fail, as in protobuf itself.
    Raises GraphFormatError with the byte offset protobuf reported.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GraphFormatError(path, "text is not UTF-8", exc.start) from None
    model = ge_schema.ModelDef()
    try:
        _parse_into(text, model, allow_unknown)
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        offset = None if line is None else _line_col_to_offset(text, line, column or 1)
        raise GraphFormatError(path, "text format: {}".format(exc), offset) from None
    return model


def parse_model(path: PathLike, allow_unknown: bool = True) -> Any:
    """Read a ge_proto text file into a full ``ge.proto.ModelDef`` (whole file in memory)."""
    path = os.fspath(path)
    with open(path, "rb") as handle:
        data = handle.read()
    return parse_model_text(data, path, allow_unknown)


# --------------------------------------------------------------------------- msaccucmp JSON

#: Fields ``atc --mode=5`` drops from the JSON (weights, offsets, sizes; §2.7).
JSON_BLACK_FIELDS = frozenset(("output", "data_offset", "data", "workspace", "workspace_bytes",
                               "memory_size", "weight_size", "size", "bt", "quantize_factor"))
_JSON_MAX_DEPTH = 20  # deeper messages come out as null, as in atc
_PRINTABLE = frozenset(range(0x20, 0x7F))
_C_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}


def _is_repeated(field: Any) -> bool:
    # protobuf 7 dropped FieldDescriptor.label; releases before 5.x lack is_repeated.
    flag = getattr(field, "is_repeated", None)
    if flag is None:
        return field.label == _FD.LABEL_REPEATED
    return bool(flag() if callable(flag) else flag)


def _c_escape(raw: bytes) -> str:
    """C-style escape as protobuf's CEscape: \\n \\r \\t \\" \\' \\\\, other non-printables octal."""
    out = []
    for byte in bytearray(raw):
        if byte in _C_ESCAPES:
            out.append(_C_ESCAPES[byte])
        elif byte in _PRINTABLE:
            out.append(chr(byte))
        else:
            out.append("\\{:03o}".format(byte))
    return "".join(out)


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


def write_msaccucmp_json(path_or_model: Any, json_path: PathLike) -> None:
    """Write :func:`to_msaccucmp_json` to ``json_path`` (UTF-8, indent 4), atomically."""
    document = to_msaccucmp_json(path_or_model)
    json_path = os.fspath(json_path)
    tmp_path = json_path + ".tmp"
    with open(tmp_path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=4, ensure_ascii=False)
        handle.write("\n")
    os.replace(tmp_path, json_path)


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
        return '"' + _c_escape(raw) + '"'
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
        items = value if _is_repeated(field) else (value,)
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


# --------------------------------------------------------------------------- builders

_LIST_KINDS = ((bool, "b", "VT_LIST_BOOL"), (int, "i", "VT_LIST_INT"),
               (float, "f", "VT_LIST_FLOAT"), ((str, bytes), "s", "VT_LIST_STRING"))


def set_attr(attrs: Any, key: str, value: Any) -> None:
    """Set map entry ``attrs[key]`` (an ``attr`` map of OpDef/TensorDescriptor/GraphDef)
    from a Python value: bool -> b, int -> i, float -> f, str/bytes -> s, a list of one
    of those -> list with its val_type, an AttrDef -> copied."""
    target = attrs[key]
    target.Clear()
    if hasattr(value, "DESCRIPTOR"):
        target.CopyFrom(value)
    elif isinstance(value, bool):
        target.b = value
    elif isinstance(value, int):
        target.i = value
    elif isinstance(value, float):
        target.f = value
    elif isinstance(value, (str, bytes)):
        target.s = value.encode("utf-8") if isinstance(value, str) else value
    elif isinstance(value, (list, tuple)):
        _set_list(target.list, key, value)
    else:
        raise TypeError("attr {!r}: unsupported value type {}".format(key, type(value).__name__))


def _set_list(target: Any, key: str, values: Sequence[Any]) -> None:
    for kind, field, val_type in _LIST_KINDS:
        if all(isinstance(v, kind) and not (kind is int and isinstance(v, bool))
               for v in values):
            if field == "s":
                values = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
            getattr(target, field).extend(values)
            target.val_type = ge_schema.LIST_VALUE_TYPE_NAMES.index(val_type)
            return
    raise TypeError("attr {!r}: list items must all be bool, int, float or str".format(key))


def _dtype_value(dtype: Union[str, int]) -> int:
    return dtype if isinstance(dtype, int) else ge_schema.data_type_value(dtype)


def make_tensor_desc(dtype: Union[str, int], shape: Sequence[int], layout: str = "ND",
                     origin_format: Optional[str] = None,
                     origin_shape: Optional[Sequence[int]] = None,
                     origin_dtype: Optional[Union[str, int]] = None,
                     origin_name: Optional[str] = None,
                     origin_output_index: Optional[int] = None,
                     size: Optional[int] = None,
                     attrs: Optional[Dict[str, Any]] = None) -> Any:
    """A TensorDescriptor with the attrs GE's serializer always adds (§2.4: origin_format,
    origin_format_for_int, format_for_int, origin_shape_initialized, origin_shape,
    origin_data_type) and, when ``origin_name`` is given, the data-dump origin attrs
    (_datadump_origin_name/_output_index/_format/_data_type). Origin values default to
    the device ones."""
    from . import schema  # format names/values shared with the dump-file schema

    desc = ge_schema.TensorDescriptor(dtype=_dtype_value(dtype), layout=layout)
    desc.shape.dim.extend(shape)
    if size is not None:
        desc.size = size
    origin_format = layout if origin_format is None else origin_format
    origin_shape = list(shape) if origin_shape is None else list(origin_shape)
    origin_dtype_name = ge_schema.data_type_name(
        _dtype_value(dtype if origin_dtype is None else origin_dtype))
    set_attr(desc.attr, "format_for_int", schema.format_value(layout))
    set_attr(desc.attr, "origin_data_type", origin_dtype_name)
    set_attr(desc.attr, "origin_format", origin_format)
    set_attr(desc.attr, "origin_format_for_int", schema.format_value(origin_format))
    set_attr(desc.attr, "origin_shape_initialized", True)
    desc.attr["origin_shape"].list.val_type = ge_schema.LIST_VALUE_TYPE_NAMES.index(
        "VT_LIST_INT")
    desc.attr["origin_shape"].list.i.extend(origin_shape)
    if origin_name is not None:
        set_attr(desc.attr, _ORIGIN_NAME, origin_name)
        set_attr(desc.attr, _ORIGIN_INDEX, 0 if origin_output_index is None
                 else origin_output_index)
        set_attr(desc.attr, "_datadump_origin_format", origin_format)
        set_attr(desc.attr, "_datadump_origin_data_type", origin_dtype_name)
    for key, value in (attrs or {}).items():
        set_attr(desc.attr, key, value)
    return desc


def make_op(name: str, op_type: str, op_id: int, inputs: Sequence[str] = (),
            input_descs: Sequence[Any] = (), output_descs: Sequence[Any] = (),
            original_op_names: Optional[Sequence[str]] = None,
            no_task: Optional[bool] = None, stream_id: int = 0,
            attrs: Optional[Dict[str, Any]] = None) -> Any:
    """An OpDef as a Build graph holds it: ``inputs`` as "src:idx" ("src:-1" control),
    descs from :func:`make_tensor_desc`, ``_datadump_original_op_names`` (list s) and
    ``_no_task`` (b) when given, other attrs through :func:`set_attr`."""
    op = ge_schema.OpDef(name=name, type=op_type, id=op_id, stream_id=stream_id)
    op.input.extend(inputs)
    op.input_desc.extend(input_descs)
    op.output_desc.extend(output_descs)
    if original_op_names is not None:
        op.attr[_ORIGINAL_NAMES].list.val_type = ge_schema.LIST_VALUE_TYPE_NAMES.index(
            "VT_LIST_STRING")
        op.attr[_ORIGINAL_NAMES].list.s.extend(n.encode("utf-8") for n in original_op_names)
    if no_task is not None:
        set_attr(op.attr, _NO_TASK, no_task)
    for key, value in (attrs or {}).items():
        set_attr(op.attr, key, value)
    return op


def make_model(graphs: Sequence[Tuple[str, Sequence[Any]]], name: str = "") -> Any:
    """A ModelDef from (graph name, ops) pairs; graph[0] is the main graph."""
    model = ge_schema.ModelDef(name=name)
    for graph_name, ops in graphs:
        graph = model.graph.add(name=graph_name)
        graph.op.extend(ops)
    return model
