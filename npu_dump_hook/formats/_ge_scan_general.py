"""The general path of the GE graph scanner: a tokenizer that follows the whole protobuf text
format grammar (``<>``, ``;``/``,``, comments, one-line blocks, list values, single quotes,
adjacent-string concatenation) and a scan (:class:`GeneralScan`) that tracks the field path of
open blocks and extracts per graph its name and per op the fields of :class:`.OpSummary`.

:meth:`GeneralScan.step` consumes one field or block end; finished graphs collect in
``finished``. Malformed text raises GraphFormatError (path, byte offset, rule). Given a fast
path (:class:`._ge_scan_fast.FastOps`), the scan first offers it each op of a graph, and reads
the op itself where the fast path declines. The tokenizer matches no regex whose repeated group
grows with the input (blanks and comments are skipped 64 pieces per match, a string's end is
found with bytes.find), so its memory does not grow with a run of blanks, comments or escapes.
"""
import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import GraphFormatError
from . import ge_ir_schema as ge_schema  # the GE-IR (ge.proto) messages
from ._ge_scan_values import bool_value as _bool, int_value as _int, unescape as _unescape
from ._ge_summary import GraphSummary, OpSummary, OutputOrigin
from ._text_lines import string_end as _string_end

__all__ = ["WORD", "OpBuilder", "Tokens", "GeneralScan"]

# --------------------------------------------------------------------------- op assembly

_NO_TASK = ge_schema.ATTR_NO_TASK
_ORIGINAL_NAMES = ge_schema.ATTR_ORIGINAL_OP_NAMES
_ORIGIN_NAME = ge_schema.ATTR_ORIGIN_NAME
_ORIGIN_INDEX = ge_schema.ATTR_ORIGIN_OUTPUT_INDEX


class OpBuilder(object):
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


# --------------------------------------------------------------------------- general path

WORD = rb"[-+]?[\w.]+(?:[-+][\w.]+)?"
# A repeated group costs the regex engine memory per repetition until the match ends (about
# 150 bytes each: 3.3M comment lines took 1.3 GB as one skip match, a 10 MB string of escapes
# 800 MB), so blanks and comments are skipped in matches of at most _SKIP_REPEAT pieces, and a
# string token is only its opening quote: _string_end finds the rest with bytes.find.
_SKIP_REPEAT = 64
_TOKEN_RE = re.compile(
    rb"(?P<skip>(?:\s+|\#[^\n]*){1,%d})" % _SKIP_REPEAT
    + rb"|(?P<string>[\"'])"
    rb"|(?P<word>" + WORD + rb")"
    rb"|(?P<punct>[{}<>:\[\],;])"
)
_SKIP_RE = re.compile(rb"(?:\s+|\#[^\n]*){1,%d}" % _SKIP_REPEAT)
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


class Tokens(object):
    """Tokens of protobuf text format with one token of lookahead; skips blanks and comments."""

    def __init__(self, data: Any, path: str) -> None:
        self.data = data
        self._size = len(data)
        self._path = path
        self.pos = 0
        self.peeked = None  # type: Optional[_Token]

    def _scan(self) -> _Token:
        while self.pos < self._size:
            match = _TOKEN_RE.match(self.data, self.pos)
            if match is None:
                raise GraphFormatError(self._path, "unexpected character {!r}".format(
                    self.data[self.pos:self.pos + 1]), self.pos)
            self.pos = match.end()
            kind = match.lastgroup
            if kind == "string":
                start = match.start()
                end = _string_end(self.data, start)
                if end < 0:  # unterminated, or a raw newline inside
                    raise GraphFormatError(self._path, "unexpected character {!r}".format(
                        self.data[start:start + 1]), start)
                self.pos = end
                return kind, self.data[start:end], start
            if kind != "skip":
                return kind, match.group(), match.start()
        return "eof", b"", self._size

    def skip(self) -> int:
        """Move past blanks and comments (no token may be peeked); the offset reached."""
        match = _SKIP_RE.match(self.data, self.pos)
        while match is not None:
            self.pos = match.end()
            match = _SKIP_RE.match(self.data, self.pos)
        return self.pos

    def peek(self) -> _Token:
        if self.peeked is None:
            self.peeked = self._scan()
        return self.peeked

    def next(self) -> _Token:
        token = self.peek()
        self.peeked = None
        return token


class GeneralScan(object):
    """Follows the text-format grammar, keeping the field path of open blocks.

    With ``fast`` (a :class:`._ge_scan_fast.FastOps`), each op of a graph is first offered to the fast
    path, which reads it if its block is canonical and declines otherwise.
    """

    def __init__(self, data: Any, path: str, fast: Optional[Any] = None) -> None:
        self.tokens = Tokens(data, path)
        self.path = path
        self.fast = fast
        self.stack = []  # type: List[Tuple[bytes, bytes, bool]]  # (name, closer, in list)
        self.graph_name = ""
        self.graph_name_seen = False
        self.ops = []  # type: List[OpSummary]
        self.op = None  # type: Optional[OpBuilder]
        self.entry = {}  # type: Dict[str, Any]
        self.name_offset = 0  # of the name of the field being read (errors about the entry)
        self.finished = []  # type: List[GraphSummary]

    def error(self, rule: str, offset: int) -> GraphFormatError:
        return GraphFormatError(self.path, rule, offset)

    def field_path(self) -> Tuple[bytes, ...]:
        return tuple(name for name, _, _ in self.stack)

    # ---- grammar
    def step(self) -> bool:
        """Consume one field or one block end; False at the end of the text."""
        if self.fast is not None and len(self.stack) == 1 and self.stack[0][0] == b"graph":
            peeked = self.tokens.peeked  # after a string: peeked for a string to append
            if peeked is None:
                found = self.fast.ops_at(self.tokens.skip())
            elif peeked[1] == b"op" and peeked[0] == "word":
                found = self.fast.ops_at(peeked[2])
            else:
                found = None
            if found is not None:
                self.ops.extend(found[0])
                self.tokens.peeked = None
                self.tokens.pos = found[1]
                return True
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
        name = self.field_name(kind, value, offset)
        self.name_offset = offset
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
            self.op = OpBuilder()
        elif where in (_OP, _OP[:2] + (b"output_desc",)) and name == b"attr":
            self.entry = {}
        elif where == _OP and name == b"output_desc":
            self.op.outputs.append([None, None])
        elif where == _OP_ATTR_VALUE or where == _OUT_ATTR_VALUE:
            self.entry.setdefault("first", (name, self.name_offset))

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
            self.entry.setdefault("first", (name, self.name_offset))
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
