"""GE graph dumps (``ge_proto_*.txt``): the scanner; the full parse, the text writer, the msaccucmp
JSON and the builders live in :mod:`.ge_text`, :mod:`.ge_json` and :mod:`.ge_build` and are
importable from here too.

Format (reference ascend-dump-formats.md §2.3): protobuf text format of ``ge.proto.ModelDef``
(:mod:`.ge_schema`) as C++ ``TextFormat::Print`` writes it — the *canonical layout*: one field
or block delimiter per line, 2 spaces of indentation per nesting level, ``name {`` opens and
``}`` closes a block, fields in field-number order, map entries as ``attr { key: ... value
{...} }`` sorted by key, strings double-quoted with C escapes (never a raw newline inside).

Scanning (:func:`iter_graphs`) extracts per graph its name and per op the name, type, id,
inputs, ``_no_task``, ``_datadump_original_op_names`` and, per output_desc,
``_datadump_origin_name`` / ``_datadump_origin_output_index`` (§2.4, §2.5):

* the general path: a tokenizer that follows the full text-format grammar (``<>``,
  ``;``/``,``, comments, one-line blocks, list values, single quotes, adjacent-string
  concatenation) and tracks the field path of open blocks; it reads the file skeleton and
  every op the fast path declines, and raises :class:`GraphFormatError` (byte offset, rule)
  on malformed text;
* a fast path for the op blocks of a graph (:class:`_FastOps`): an op is split at its double
  quotes; the text between the strings, strings emptied and digits made 0, must be laid out
  exactly as C++ writes it (one field or delimiter per line, 2 spaces per nesting level,
  nothing else). Then that text is the op's whole token structure, so what the general
  path would extract from it is worked out once per such skeleton and per set of attr keys
  and replayed on each op's strings and numbers; blanks and CR at line ends (trailing
  whitespace, CRLF files) are dropped first, as they are never inside a string. Any other
  op (comments, blank lines, tabs or other indentation, several fields on a line, a string
  with a raw newline or a bad escape, a conversion whose outcome the skeleton cannot tell)
  is declined and read by the general path, from where the declined op starts.

The result is the general path's on every input (tested: fuzzed layouts, same result or
same error at the same offset), and the work is linear in the input size either way. Peak
memory stays under 16 x the file size + 64 MB: the tokenizer matches no regex whose repeated
group grows with the input (blanks and comments are skipped 64 pieces per match, a string's
end is found with bytes.find, escapes are resolved in 64 KiB pieces), so what is held is the
file's bytes and one OpSummary per op (for 100,000 empty ``op {}`` blocks, ~17x their text).
"""
import codecs
import gc
import logging
import mmap
import operator
import os
import re
from typing import (Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence,
                    Tuple, Union)

from ..errors import GraphFormatError
from . import ge_ir_schema as ge_schema  # the GE-IR (ge.proto) messages
from .._forked import ForkedCall, fork_is_safe
from ._text_lines import NOT_PLAIN_ESCAPE as _NOT_PLAIN_ESCAPE, string_end as _string_end
# The rest of the GE-graph API, in modules of their own, importable from here as before:
from .ge_build import make_model, make_op, make_tensor_desc, set_attr
from .ge_json import JSON_BLACK_FIELDS, to_msaccucmp_json, write_msaccucmp_json
from .ge_text import format_model, parse_model, parse_model_text, write_graph_text

__all__ = [
    "OutputOrigin",
    "OpSummary",
    "GraphSummary",
    "GraphCount",
    "iter_graphs",
    "iter_graph_counts",
    "iter_ops",
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


class GraphCount(NamedTuple):
    """One GraphDef's name and number of ops (see :func:`iter_graph_counts`)."""

    name: str
    op_count: int


# --------------------------------------------------------------------------- strings

_ESCAPE = re.compile(
    rb'\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))', re.S)
_SIMPLE_ESCAPES = {
    b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f",
    b"v": b"\v", b"\\": b"\\", b"'": b"'", b'"': b'"', b"?": b"?",
}


_UNESCAPE_PIECE = 1 << 16  # a long string is resolved in pieces of this many bytes
_LONGEST_ESCAPE = 10  # \U0010FFFF


def _unescape(raw: bytes, path: str, offset: int) -> bytes:
    """Bytes of a text-format string body (without quotes); C escapes resolved, in pieces of
    at most _UNESCAPE_PIECE bytes cut between escapes (memory: the result and one piece)."""
    if b"\\" not in raw:
        return raw
    if len(raw) <= _UNESCAPE_PIECE:
        return _unescape_piece(raw, path, offset)
    pieces = []
    start, size = 0, len(raw)
    while start < size:
        cut = min(start + _UNESCAPE_PIECE, size)
        if cut < size:
            last = raw.rfind(b"\\", cut - _LONGEST_ESCAPE, cut)
            if last >= 0:  # parity of the run of backslashes ending there, from an escape boundary
                run = last + 1 - start - len(raw[start:last + 1].rstrip(b"\\"))
                cut = last if run % 2 else last + 1
        pieces.append(_unescape_piece(raw[start:cut], path, offset + start))
        start = cut
    return b"".join(pieces)


def _unescape_piece(raw: bytes, path: str, offset: int) -> bytes:
    if _NOT_PLAIN_ESCAPE.search(raw) is None:
        return codecs.escape_decode(raw)[0]

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

_NO_TASK = ge_schema.ATTR_NO_TASK
_ORIGINAL_NAMES = ge_schema.ATTR_ORIGINAL_OP_NAMES
_ORIGIN_NAME = ge_schema.ATTR_ORIGIN_NAME
_ORIGIN_INDEX = ge_schema.ATTR_ORIGIN_OUTPUT_INDEX


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


# --------------------------------------------------------------------------- general path

_WORD = rb"[-+]?[\w.]+(?:[-+][\w.]+)?"
# A repeated group costs the regex engine memory per repetition until the match ends (about
# 150 bytes each: 3.3M comment lines took 1.3 GB as one skip match, a 10 MB string of escapes
# 800 MB), so blanks and comments are skipped in matches of at most _SKIP_REPEAT pieces, and a
# string token is only its opening quote: _string_end finds the rest with bytes.find.
_SKIP_REPEAT = 64
_TOKEN_RE = re.compile(
    rb"(?P<skip>(?:\s+|\#[^\n]*){1,%d})" % _SKIP_REPEAT
    + rb"|(?P<string>[\"'])"
    rb"|(?P<word>" + _WORD + rb")"
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


class _Tokens(object):
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


class _GeneralScan(object):
    """Follows the text-format grammar, keeping the field path of open blocks.

    With ``fast`` (a :class:`_FastOps`), each op of a graph is first offered to the fast
    path, which reads it if its block is canonical and declines otherwise.
    """

    def __init__(self, data: Any, path: str, fast: Optional["_FastOps"] = None) -> None:
        self.tokens = _Tokens(data, path)
        self.path = path
        self.fast = fast
        self.stack = []  # type: List[Tuple[bytes, bytes, bool]]  # (name, closer, in list)
        self.graph_name = ""
        self.graph_name_seen = False
        self.ops = []  # type: List[OpSummary]
        self.op = None  # type: Optional[_OpBuilder]
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
            self.op = _OpBuilder()
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


# --------------------------------------------------------------------------- fast path

_OP_LINE = b"\n  op {\n"
_OP_LINE_RE = re.compile(rb"\n  op \{[ \t\r]*\n")  # an op line; _OP_LINE as GE writes it
_OP_CLOSE_RE = re.compile(rb"\n  \}[ \t\r]*\n")
_LINE_END_BLANKS_RE = re.compile(rb"[ \t\r]+(?=\n)")
_WINDOW = 1 << 20  # bytes of data split at a time
#: Below this file size a scan is not shared with forked workers: a fork and the hand-back of
#: the results cost more than the share saves.
_PARALLEL_MIN_BYTES = 4 << 20
#: Summaries are handed back from a worker at about the cost of scanning a 1 KB op, so a scan
#: that builds them is shared only when the file's ops are larger than that on average (GE
#: Build graphs: about 1.5 KB); an op count is always worth sharing.
_PARALLEL_MIN_OP_BYTES = 1 << 10
_SAMPLE_BYTES = 1 << 20  # where the average op size is estimated
#: At most this many processes share a scan, and one more than the file has _PARALLEL_MIN_BYTES:
#: more only add forks and shape caches built again (a 64-core host, a 60 MB graph).
_MAX_WORKERS = 8
#: The digits of a skeleton all become 0. Whether a conversion of the general path succeeds
#: does not depend on digit values except for a bool made of digits or an int with the base
#: prefix -0 (see _digit_sensitive): those are converted again for each op.
_DIGITS_TO_0 = bytes.maketrans(b"0123456789", b"0000000000")
_SKELETON_DEPTH = 24  # block nesting inside an op the skeleton pattern follows
_MAX_SHAPES = 4096
_MAX_SHAPE_BYTES = 32 << 20
_MAX_VARIANTS = 256
_BAIL = object()  # a skeleton or variant the fast path leaves to the general path


def _skeleton_lines(level: int) -> bytes:
    """Pattern of the lines of a block at nesting ``level`` (2 spaces each) in canonical layout:
    ``name: ""`` (a string), ``name: word``, or ``name {`` + lines one level deeper + ``}``."""
    indent = b" " * (2 * level)
    scalar = rb': (?:""|' + _WORD + rb")\n"
    if level >= _SKELETON_DEPTH:
        return rb"(?:" + indent + rb"[A-Za-z_]\w*" + scalar + rb")*"
    return (rb"(?:" + indent + rb"[A-Za-z_]\w*(?:" + scalar + rb"| \{\n"
            + _skeleton_lines(level + 1) + indent + rb"\}\n))*")


#: The lines of an op block after its ``op {`` line, in canonical layout and strings emptied,
#: up to the ``}`` that closes it (see _FastOps).
_SKELETON_RE = re.compile(_skeleton_lines(2) + rb"  \}")

_Loc = Tuple[int, int, int]  # a word: index in the op's parts of its segment, start, end


def _int_base0(raw: bytes) -> int:
    return _int(raw, "", 0)


def _digit_sensitive(kind: bytes, word: bytes) -> bool:
    """Whether _bool (kind b"b") or _int (b"i") of a skeleton word (digits made 0) may
    succeed for some digits and fail for others. _int of a word that does not look like
    "0x..."/"-0..." here takes base 10 whatever the digits were, which accepts any digits."""
    if kind == b"b":
        return word.translate(None, b"0123456789") != word
    return word[:2].lower() in (b"0x", b"-0") and len(word) > 2


#: Where (inside an op) the general path reads fields or opens blocks it acts on.
_ACTING = frozenset(((), (b"attr",), (b"attr", b"value"), (b"attr", b"value", b"list"),
                     (b"output_desc",), (b"output_desc", b"attr"),
                     (b"output_desc", b"attr", b"value")))


class _Shape(object):
    """What the general path would do with every op of one skeleton, as string indices and
    word locations; keys (attr names) are strings, so their effect is resolved per variant."""

    __slots__ = ("name", "type", "inputs", "id", "attrs", "outputs", "checks", "strings",
                 "key_slots", "key_get", "variants", "last_keys", "last_build")

    def __init__(self) -> None:
        self.name = None  # type: Optional[int]
        self.type = None  # type: Optional[int]
        self.inputs = []  # type: List[int]
        self.id = None  # type: Optional[Tuple[int, int, int, Any]]  # word, converter
        # op attr entries: (key, first value field, last b, list s); output_desc attr
        # entries: (key, first value field, last s, last i); key/s as string indices
        self.attrs = []  # type: List[Tuple[Any, ...]]
        self.outputs = []  # type: List[List[Tuple[Any, ...]]]
        self.checks = []  # type: List[Tuple[Any, int, int, int]]  # to redo for each op
        self.strings = 0  # strings in an op of this shape
        self.key_slots = ()  # type: Tuple[int, ...]
        self.key_get = _getter(())  # type: Any
        self.variants = {}  # type: Dict[Tuple[bytes, ...], Any]
        self.last_keys = None  # type: Optional[Tuple[bytes, ...]]  # and its variant:
        self.last_build = None  # type: Any

    @classmethod
    def of(cls, skeleton: bytes) -> Optional["_Shape"]:
        """The shape of a canonical op skeleton, or None when the skeleton is not canonical or
        when an op of this skeleton would make the general path convert a string (whose
        content the skeleton does not hold) or fail a conversion that fails for every op of
        the skeleton."""
        if _SKELETON_RE.fullmatch(skeleton) is None:
            return None
        shape = cls()
        where = ()  # type: Tuple[bytes, ...]  # the open blocks inside the op
        acts = True  # whether the general path acts on fields at ``where``
        entry = []  # type: List[Any]  # the attr entry being read
        strings = 0  # strings before the current line
        segment = 0  # offset in the skeleton of the current segment between strings
        offset = 0
        lines = skeleton[:-3].split(b"\n")[:-1]
        index = 0
        try:
            while index < len(lines):
                line = lines[index]
                index += 1
                end = offset + len(line)
                last = line[-1:]
                if last == b"}":  # (a canonical line ends with "", a word, { or })
                    name = where[-1]
                    where = where[:-1]
                    acts = where in _ACTING
                    if name == b"attr" and where == ():
                        shape.attrs.append((entry[0], entry[1], entry[2], tuple(entry[5])))
                    elif name == b"attr" and where == (b"output_desc",):
                        shape.outputs[-1].append((entry[0], entry[1], entry[3], entry[4]))
                elif last == b"{":
                    indent = len(line) - len(line.lstrip(b" "))
                    name = line[indent:-2]
                    if acts:
                        if name == b"attr" and (where == () or where == (b"output_desc",)):
                            entry = [None, None, None, None, None, []]
                        elif name == b"output_desc" and where == ():
                            shape.outputs.append([])
                        elif where == (b"attr", b"value") or where == (
                                b"output_desc", b"attr", b"value"):
                            entry[1] = name if entry[1] is None else entry[1]
                    if where + (name,) not in _ACTING:
                        # Nothing inside is acted on (every prefix of an acting path acts):
                        # count its strings and go on after its closing line, which in
                        # canonical layout is the first line after it that has its indent.
                        close = skeleton.find(b"\n" + line[:indent] + b"}\n", end)
                        found = skeleton.count(b'""', end, close)
                        if found:
                            strings += found
                            segment = skeleton.find(b"\n", skeleton.rfind(b'""', end, close))
                        index += skeleton.count(b"\n", end + 1, close + 1) + 1
                        offset = close + indent + 3
                        continue
                    where += (name,)
                    acts = True
                elif acts:
                    name, value = line.lstrip(b" ").split(b": ", 1)
                    string = strings if value == b'""' else None
                    word = (2 * strings, end - len(value) - segment, end - segment)
                    shape._field(where, name, string, word, value, entry)
                    if string is not None:
                        strings += 1
                        segment = end
                elif last == b'"':
                    strings += 1
                    segment = end
                offset = end + 1
        except (GraphFormatError, ValueError):
            return None
        shape.strings = strings
        slots = [entry[0] for entry in shape.attrs]
        slots += [entry[0] for entries in shape.outputs for entry in entries]
        shape.key_slots = tuple(slot for slot in slots if slot is not None)
        shape.key_get = _getter(shape.key_slots)
        return shape

    def _convert(self, kind: bytes, value: bytes, string: Optional[int], word: _Loc) -> Any:
        """A conversion the general path makes: checked now, or for each op if its outcome
        depends on digits; ValueError if it would convert a string. For an int, the
        location with what converts the word as _int does (int() where _int takes base 10)."""
        if string is not None:
            raise ValueError("a string the general path converts")
        convert = _bool if kind == b"b" else _int
        sensitive = _digit_sensitive(kind, value)
        if sensitive:
            self.checks.append((convert,) + word)
        else:
            convert(value, "", 0)
        return word + (_int_base0 if sensitive else int,)

    def _field(self, where: Tuple[bytes, ...], name: bytes, string: Optional[int],
               word: _Loc, value: bytes, entry: List[Any]) -> None:
        """One scalar field, as _GeneralScan.on_scalar takes it (raises ValueError or
        GraphFormatError where the fast path must leave the op to the general path)."""
        if where == ():
            if name == b"id":
                self.id = self._convert(b"i", value, string, word)
            elif string is not None and name == b"name":
                self.name = string
            elif string is not None and name == b"type":
                self.type = string
            elif string is not None and name == b"input":
                self.inputs.append(string)
        elif where == (b"attr",) or where == (b"output_desc", b"attr"):
            if name == b"key" and string is not None:
                entry[0] = string
        elif where == (b"attr", b"value") or where == (b"output_desc", b"attr", b"value"):
            entry[1] = name if entry[1] is None else entry[1]
            if name == b"b" and where == (b"attr", b"value"):
                self._convert(b"b", value, string, word)
                entry[2] = word
            elif name == b"s" and string is not None:
                entry[3] = string
            elif name == b"i":
                entry[4] = self._convert(b"i", value, string, word)
        elif where == (b"attr", b"value", b"list"):
            if name == b"s" and string is not None:
                entry[5].append(string)

    def variant(self, keys: Tuple[bytes, ...]) -> Any:
        """The builder (see _compile_builder) of the summary of an op of this shape whose
        attr keys are ``keys``, as close_op_attr and close_output_attr would decide; or
        _BAIL."""
        found = self.variants.get(keys)
        if found is not None:
            return found
        if any(key.find(b"\\") >= 0 or key.find(b"\x00") >= 0 for key in keys):
            found = _BAIL  # an escaped key may spell one we look for
        else:
            found = self._resolve(dict(zip(self.key_slots, keys)))
        if len(self.variants) < _MAX_VARIANTS:
            self.variants[keys] = found
        return found

    def _resolve(self, key_of: Dict[int, bytes]) -> Any:
        no_task = names = None
        for key, first, b_word, list_s in self.attrs:
            key = key_of.get(key)
            if key == b"_no_task":
                if first != b"b" or b_word is None:
                    return _BAIL  # entry_value raises
                no_task = b_word
            elif key == b"_datadump_original_op_names":
                names = list_s
        outputs = []
        for entries in self.outputs:
            origin = index = None
            for key, first, s_string, i_word in entries:
                key = key_of.get(key)
                if key == b"_datadump_origin_name":
                    if first != b"s" or s_string is None:
                        return _BAIL
                    origin = s_string
                elif key == b"_datadump_origin_output_index":
                    if first != b"i" or i_word is None:
                        return _BAIL
                    index = i_word
            outputs.append((origin, index))
        return _compile_builder(self, no_task, names, outputs)


_BUILD_GLOBALS = {"new_": tuple.__new__, "OpSummary_": OpSummary, "OutputOrigin_": OutputOrigin,
                  "TRUE_": _TRUE, "int_": int, "base0": _int_base0, "check_bool": _bool,
                  "check_int": _int}  # the first five are bound as closure cells
_FACTORIES = {}  # type: Dict[str, Any]  # source of a builder factory -> the factory
_MAX_FACTORIES = 2048


def _compile_builder(shape: _Shape, no_task: Optional[_Loc], names: Optional[Tuple[int, ...]],
                     outputs: List[Tuple[Optional[int], Any]]) -> Any:
    """A function ``build(parts, strings, decode)`` giving the OpSummary of an op: ``parts``
    are the op's segments between double quotes, ``strings`` the odd ones, ``decode`` None
    (decode the strings it needs in one go, joined by newlines, which no string holds) or
    what decodes one. It is straight-line code
    without loops or look-ups (the generic version took a quarter of the scan time),
    written once per structure (numbers of inputs, names and outputs, which values are
    present) and bound to this shape's string indices and word offsets, which are its
    only data: compiling costs more than one variant's ops save."""
    numbers = []  # type: List[int]  # the factory's arguments a0, a1, ...
    wanted = []  # type: List[int]  # the strings to decode, by index

    def text(index: Optional[int]) -> str:
        if index is None:
            return "None"
        wanted.append(index)
        return "t[%d]" % (len(wanted) - 1)

    def word(loc: Sequence[Any]) -> str:
        numbers.extend(loc[:3])
        return "parts[a%d][a%d:a%d]" % (len(numbers) - 3, len(numbers) - 2, len(numbers) - 1)

    def number(loc: Any) -> str:
        if loc is None:
            return "None"
        return "%s(%s)" % ("base0" if loc[3] is _int_base0 else "int", word(loc))

    body = []
    for check in shape.checks:  # conversions whose outcome varies with the digits
        body.append("        %s(%s, '', 0)" % ("check_bool" if check[0] is _bool else "check_int",
                                              word(check[1:])))
    name = text(shape.name) if shape.name is not None else '""'
    op_type = text(shape.type) if shape.type is not None else '""'
    inputs = "".join(text(index) + ", " for index in shape.inputs)
    names_text = ("None" if names is None
                  else "(" + "".join(text(index) + ", " for index in names) + ")")
    origins = "".join("new(OutputOrigin, (%s, %s)), " % (text(origin), number(index))
                      for origin, index in outputs)
    op_id = "0" if shape.id is None else number(shape.id)
    no_task_text = "False" if no_task is None else word(no_task) + " in TRUE"
    if wanted:
        body.append('        raw = get(strings)')
        body.append('        t = (b"\\n".join(raw).decode("utf-8", "replace").split("\\n")'
                    " if decode is None else list(map(decode, raw)))")
    body.append("        return new(OpSummary, (%s, %s, %s, (%s), %s, %s, (%s)))" % (
        name, op_type, op_id, inputs, no_task_text, names_text, origins))
    source = "\n".join(
        ["def make(get%s):" % "".join(", a%d" % i for i in range(len(numbers))),
         "    new, OpSummary, OutputOrigin = new_, OpSummary_, OutputOrigin_",
         "    TRUE, int = TRUE_, int_",
         "    def build(parts, strings, decode):"] + body + ["    return build"])
    factory = _FACTORIES.get(source)
    if factory is None:
        namespace = dict(_BUILD_GLOBALS)
        exec(compile(source, "<ge_graph op builder>", "exec"), namespace)
        factory = namespace["make"]
        if len(_FACTORIES) < _MAX_FACTORIES:
            _FACTORIES[source] = factory
    return factory(_getter(wanted), *numbers)


def _getter(indices: Sequence[int]) -> Any:
    """A callable giving the items at ``indices`` of a list, as a tuple."""
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    if indices:
        index = indices[0]
        return lambda items: (items[index],)
    return lambda items: ()


def _without_line_end_blanks(text: bytes) -> bytes:
    """``text`` without the spaces, tabs and CRs that end its lines (and itself). In valid
    text these are never inside a string, which cannot span a newline; in text with a
    string left open the string keeps its newline, and the fast path declines it."""
    if text.find(b"\r\n") >= 0:
        text = text.replace(b"\r\n", b"\n")
    for _ in range(3):  # each round drops one blank per line end: a few are the norm
        if text.find(b" \n") < 0 and text.find(b"\t\n") < 0 and text.find(b"\r\n") < 0:
            break
        text = text.replace(b" \n", b"\n").replace(b"\t\n", b"\n").replace(b"\r\n", b"\n")
    else:
        text = _LINE_END_BLANKS_RE.sub(b"", text)
    return text.rstrip(b" \t\r")


def _escaped(raw: bytes) -> str:
    """A string neutralised by _FastOps (see there) as text: escapes restored, resolved."""
    if raw.find(b"\\") >= 0 or raw.find(b"\x00") >= 0:
        raw = raw.replace(b"\x00\x01", b"\\\\").replace(b"\x00\x02", b'\\"')
        raw = _unescape(raw, "", 0)
    return raw.decode("utf-8", "replace")


class _FastOps(object):
    """Reads op blocks in canonical layout without tokenizing them, and declines the rest.

    The general path offers the fast path the op blocks of a graph (:meth:`ops_at`). The
    data is split, a window at a time, at the lines ``  op {``; each piece is one op block
    from its second line to its closing ``  }`` if the op is canonical (otherwise it may
    hold a different op structure, or text after the op). The piece is split at its double
    quotes into strings and the text between them; that text, with every string emptied and
    every digit made 0, is the op's *skeleton*. The skeleton must match the canonical layout
    exactly (one field or delimiter per line, ``name: value``/``name {``/``}``, indentation
    2 x nesting, and nothing else: no comments, tabs, blank lines or one-line blocks), and
    no string may hold a raw newline or a bad escape. The text between the strings is then
    the op's whole token structure, the same (up to digits) for every op of the skeleton,
    so what the general path would do with such an op is worked out once per skeleton
    (:class:`_Shape`) and per set of attr keys, and replayed on each op's strings and words
    by a builder written for it (:func:`_compile_builder`). An op whose only deviation is
    blanks or CR at line ends (trailing whitespace, CRLF) is read once they are dropped.
    For anything else (an op that ends elsewhere, a line that is not canonical, a string
    the general path would convert) the fast path declines: the general path reads that
    op, so the result is always the general path's.

    Escaped backslashes and quotes are first replaced by two bytes each (``\\x00\\x01``,
    ``\\x00\\x02``) so that every remaining double quote delimits a string; such a text
    must not hold NUL itself. Each byte is split once (plus one op per window), so declined
    ops cost linear time too.
    """

    def __init__(self, data: Any, path: str, count_only: bool = False) -> None:
        self.data = data
        self.size = len(data)
        self.path = path
        self.count_only = count_only  # True stands for each op's summary (see _summary)
        # op word offset -> the ForkedCall reading the canonical ops from there (hand_off)
        self.handoffs = {}  # type: Dict[int, ForkedCall]
        self._breaks = set()  # type: set  # piece starts where ops_at stops: a handoff follows
        # skeleton length -> [(skeleton, _Shape or _BAIL)]
        self.shapes = {}  # type: Dict[int, List[Tuple[bytes, Any]]]
        self._shapes_of_length = self.shapes.get
        self.shape_count = self.shape_bytes = 0
        self._pieces = [b""]  # type: List[bytes]  # a window of data split at _line
        self._line = _OP_LINE  # the op line the window is split at (with its blanks or CR)
        self._next = 1  # index in _pieces of the next piece to read
        self._at = -1  # offset in data of _pieces[_next]
        self._declined = -1  # offset of the op word of the op last declined

    def _load(self, start: int, line: bytes) -> None:
        """Split at ``line`` the window of data that begins with the ``line`` at ``start``,
        up to the last one within _WINDOW bytes (or the next one, or the end)."""
        pieces = self.data[start:start + _WINDOW].split(line)
        if start + _WINDOW < self.size:  # the last piece is cut: the next window has it
            if len(pieces) > 2:
                pieces.pop()
            else:  # an op longer than a window
                cut = self.data.find(line, start + 1)
                pieces = (self.data[start:cut] if cut >= 0 else self.data[start:]).split(line)
        self._pieces = pieces
        self._line = line
        self._next = 1
        self._at = start + len(line)

    def _seek(self, at: int, line: bytes) -> bool:
        """Move to the piece that starts at ``at`` in data, if the window holds it."""
        if line != self._line:
            return False
        while self._at < at and self._next < len(self._pieces):
            self._at += len(self._pieces[self._next]) + len(line)
            self._next += 1
        return self._at == at and self._next < len(self._pieces)

    def ops_at(self, pos: int) -> Optional[Tuple[List[OpSummary], int]]:
        """(summaries, offset after the last) of the canonical op blocks following one
        another from the op whose ``op`` word is at ``pos``; None if that op is not
        canonical (or if no op starts there)."""
        if pos == self._declined or pos < 3:
            return None
        if self.handoffs:
            found = self._handed_back(pos)
            if found is not None:
                return found
        line = self.data[pos - 3:pos + 5]
        if line != _OP_LINE:  # blanks or CR at the end of the op line?
            newline = self.data.find(b"\n", pos, pos + 64)
            line = self.data[pos - 3:newline + 1]
            if newline < 0 or _OP_LINE_RE.fullmatch(line) is None:
                return None
        at = pos - 3 + len(line)  # where the op's second line starts
        if not self._seek(at, line):
            self._load(pos - 3, line)
        pieces, index, summary_of, breaks = self._pieces, self._next, self._summary, self._breaks
        strip = line != _OP_LINE  # then other lines likely end with blanks or CR too
        ops = []  # type: List[OpSummary]
        append = ops.append
        stop = -1  # where an op that ends inside its piece ends
        try:
            for index in range(index, len(pieces)):
                piece = pieces[index]
                summary = summary_of(_without_line_end_blanks(piece) if strip else piece)
                if summary is None:
                    summary, length = self._reread(piece)
                    if summary is None:
                        self._declined = at + 3 - len(line)
                        break
                    strip = True  # the next ops likely have blanks at line ends too
                    if length != len(piece) + 1:  # the general path reads the rest
                        append(summary)
                        stop = at + length
                        break
                append(summary)
                at += len(piece) + len(line)  # where the next piece starts
                if breaks and at in breaks:  # a worker has read on from the next op
                    index += 1
                    break
            else:
                index = len(pieces)
        finally:
            self._next, self._at = index, at
        if not ops:
            return None
        return ops, stop if stop >= 0 else at - len(line) + 1

    def _reread(self, piece: bytes) -> Tuple[Optional[OpSummary], int]:
        """For a piece that is not one canonical op: the summary of the op it starts with,
        if that op is canonical once blanks and CRs at line ends are dropped, and how much
        of the piece it takes (len + 1 for all of it)."""
        stripped = _without_line_end_blanks(piece)
        if len(stripped) != len(piece):
            summary = self._summary(stripped)
            if summary is not None:
                return summary, len(piece) + 1
        # the op may close before the next op line, with graph fields after it
        close = _OP_CLOSE_RE.search(piece)
        if close is not None and close.end() < len(piece):
            summary = self._summary(_without_line_end_blanks(piece[:close.start() + 4]))
            if summary is not None:
                return summary, close.end()
        return None, 0

    def _summary(self, text: bytes, join_skeleton: Any = b'""'.join, join: Any = b"".join,
                 digits_to_0: bytes = _DIGITS_TO_0, bail: Any = _BAIL) -> Optional[OpSummary]:
        """The summary of one op from the text after its op line to its closing ``}``, or
        None if the op is not canonical. (Run once per op: the keyword arguments make
        constants local; bytes.find, not "in": on Python 3.7 "in" first raises and clears
        a TypeError.)"""
        escaped = text.find(b"\\") >= 0
        if escaped:
            if text.find(b"\x00") >= 0:
                return None
            if text.find(b"\\\\") >= 0:
                text = text.replace(b"\\\\", b"\x00\x01")
            text = text.replace(b'\\"', b"\x00\x02")
        parts = text.split(b'"')
        if not len(parts) & 1:
            return None  # an odd number of quotes
        skeleton = join_skeleton(parts[0::2]).translate(digits_to_0)
        # looked up by length, then compared: hashing the skeleton would read it once more
        for known, shape in self._shapes_of_length(len(skeleton), ()):
            if known == skeleton:
                break
        else:
            shape = self._new_shape(skeleton)
        if shape is bail:
            return None
        strings = parts[1::2]
        joined = join(strings)
        if joined.find(b"\n") >= 0:
            return None  # a string left open at the end of its line
        keys = shape.key_get(strings)
        if keys == shape.last_keys:  # compares bytes; a dict look-up also hashes them
            build = shape.last_build
        else:
            build = shape.last_build = shape.variant(keys)
            shape.last_keys = keys
        if build is bail:
            return None
        try:
            decode = None
            if escaped:
                _unescape(joined, self.path, 0)
                decode = _escaped
            if self.count_only:  # the builder runs only for the checks it makes
                return not shape.checks or build(parts, strings, decode) is not None
            return build(parts, strings, decode)
        except GraphFormatError:
            return None  # the general path reports it, at its offset

    # ---- sharing the scan with forked workers
    def hand_off(self, workers: int) -> None:
        """Fork ``workers - 1`` children, each reading the canonical ops that follow one
        another from an op line near the start of its share of the file (where this scan
        will stop and take their result instead: :meth:`_handed_back`). What a child hands
        back is what :meth:`ops_at` here would give from that op on, so the result is the
        same whether or not a child succeeds, is used, or is abandoned."""
        if self.size < _PARALLEL_MIN_BYTES:
            return
        workers = min(workers, _MAX_WORKERS, 1 + self.size // max(1, _PARALLEL_MIN_BYTES))
        if workers < 2 or not fork_is_safe():
            return
        if not self.count_only:
            ops_in_sample = self.data[:_SAMPLE_BYTES].count(_OP_LINE)
            if ops_in_sample * _PARALLEL_MIN_OP_BYTES > min(self.size, _SAMPLE_BYTES):
                return
        cuts = []  # type: List[int]  # offsets of the "\n" of op lines
        for share in range(1, workers):
            cut = self.data.find(_OP_LINE, self.size * share // workers)
            if cut < 0:
                break
            if not cuts or cut > cuts[-1]:
                cuts.append(cut)
        for cut, limit in zip(cuts, cuts[1:] + [self.size]):
            try:
                call = ForkedCall(_read_share, self.data, self.path, cut, limit, self.count_only)
            except OSError:  # no fork (limits, memory): this scan reads the rest itself
                break
            self.handoffs[cut + 3] = call
            self._breaks.add(cut + len(_OP_LINE))

    def abandon_handoffs(self) -> None:
        """Stop and reap the children whose share was not taken."""
        calls, self.handoffs = list(self.handoffs.values()), {}
        self._breaks = set()
        for call in calls:
            call.abandon()

    def _handed_back(self, pos: int) -> Optional[Tuple[List[Any], int]]:
        """A child's (summaries, offset after the last) for the op at ``pos``, or None (no
        child started there, or it failed or found no canonical op: this scan reads on)."""
        call = self.handoffs.pop(pos, None)
        if call is None:
            return None
        self._breaks.discard(pos - 3 + len(_OP_LINE))
        ok, found = call.result()
        if not ok or found is None:
            return None
        ops, stop = found
        if self.count_only:
            return [True] * ops, stop
        new = tuple.__new__
        return [new(OpSummary, (name, op_type, op_id, inputs, no_task, names,
                                tuple([new(OutputOrigin, output) for output in outputs])))
                for name, op_type, op_id, inputs, no_task, names, outputs in ops], stop

    def _new_shape(self, skeleton: bytes) -> Any:
        shape = _Shape.of(skeleton) or _BAIL
        if self.shape_count < _MAX_SHAPES and self.shape_bytes < _MAX_SHAPE_BYTES:
            self.shapes.setdefault(len(skeleton), []).append((skeleton, shape))
            self.shape_count += 1
            self.shape_bytes += len(skeleton)
        return shape


def _read_share(data: Any, path: str, cut: int, limit: int,
                count_only: bool) -> Optional[Tuple[Any, int]]:
    """In a forked child (see _FastOps.hand_off): the canonical ops that follow one another
    from the op line at ``cut`` up to the op line at ``limit`` (or the end), chained as the
    general path chains ops_at calls: (count or plain-tuple summaries, offset after the
    last); None if the first op is not canonical."""
    gc.disable()  # as in _scan_steps; this process ends after the share
    if not count_only:  # the builders make plain tuples (marshal takes no namedtuple)
        _FACTORIES.clear()
        _BUILD_GLOBALS["new_"] = _plain_tuple
    fast = _FastOps(data, path, count_only)
    if limit < len(data):
        fast._breaks.add(limit + len(_OP_LINE))
    tokens = _Tokens(data, path)
    ops = []  # type: List[Any]
    stop = None  # type: Optional[int]
    pos = cut + 3
    while True:
        found = fast.ops_at(pos)
        if found is None:
            break
        ops.extend(found[0])
        stop = found[1]
        if stop == limit + 1:  # the next op is the next share's
            break
        tokens.pos = stop
        pos = tokens.skip()  # what the general path does before offering the next op
    if stop is None:
        return None
    if count_only:
        return len(ops), stop
    # (only the fast path made these ops, with the plain-tuple builders)
    return ops, stop


def _plain_tuple(cls: Any, fields: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """The builders' ``tuple.__new__(cls, fields)`` in a forked worker: ``fields`` itself."""
    return fields


def _scan_graphs(data: Any, path: str, fast_ops: bool = True, workers: int = 1,
                 count_only: bool = False, batch: int = 0) -> Iterator[GraphSummary]:
    """The graphs of ``data``; ``workers`` > 1 shares the fast path's work with forked
    children where that is safe; with ``count_only`` each op of a graph's ``ops`` may be
    True instead of its summary (for counting); ``batch``: see _scan_steps."""
    fast = _FastOps(data, path, count_only) if fast_ops else None
    scan = _GeneralScan(data, path, fast)
    if fast is not None:
        fast.hand_off(workers)
    try:
        for graph in _scan_steps(scan, batch):
            yield graph
    finally:
        if fast is not None:
            fast.abandon_handoffs()


def _scan_steps(scan: "_GeneralScan", batch: int = 0) -> Iterator[GraphSummary]:
    """The finished graphs of ``scan``; with ``batch``, also every ``batch`` or so ops of the
    graph being read as a GraphSummary of those ops alone (the graph's summary then holds
    only the ops after them)."""
    more = True
    while more:
        # The scan allocates only what it keeps and temporaries that refcounting frees: the
        # cycle collector, run every 700 allocations, would go over the growing result again
        # and again for nothing (up to 40% of the time). It is paused while the scan works,
        # never while the caller runs.
        collect = gc.isenabled()
        gc.disable()
        try:
            while not scan.finished and more and not (batch and len(scan.ops) >= batch):
                more = scan.step()
            finished, scan.finished = scan.finished, []
            if batch and finished and scan.ops is finished[-1].ops:
                scan.ops = []  # (the next graph's block gives it a new list anyway)
            elif batch and len(scan.ops) >= batch:
                finished.append(GraphSummary(scan.graph_name, scan.ops))
                scan.ops = []  # close_block and the fast path go on with this list
        finally:
            if collect:
                gc.enable()
        for graph in finished:
            yield graph


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


def iter_graphs(path: PathLike, workers: int = 1) -> Iterator[GraphSummary]:
    """Yield each graph of a ge_proto text file in file order, one at a time.

    Raises GraphFormatError (path, byte offset, rule) on malformed text; graphs before the
    fault have been yielded by then. ``workers`` > 1 shares the reading of a large file
    (4 MB and more) with that many processes in all (at most 8, one more than the file has
    4 MB shares; with ops of 1 KB on average or more), forked from this one, where forking is
    safe (:func:`npu_dump_hook._forked.fork_is_safe`: no other Python thread; never pass it in a process
    that runs TensorFlow); the result is the same.
    """
    with _Mapped(path) as mapped:
        for graph in _scan_graphs(mapped.data, mapped.path, workers=workers):
            yield graph


_OP_BATCH = 4096  # ops iter_ops holds at most (besides a window's worth from the fast path)


def iter_ops(path: PathLike) -> Iterator[OpSummary]:
    """Every op of every graph of the file in file order, as :func:`iter_graphs` reads them
    (the same errors, at the same points), without holding a graph's ops: memory stays that of
    a batch of ops, not of 100,000 summaries."""
    with _Mapped(path) as mapped:
        for part in _scan_graphs(mapped.data, mapped.path, batch=_OP_BATCH):
            for op in part.ops:
                yield op


def iter_graph_counts(path: PathLike, workers: int = 1) -> Iterator[GraphCount]:
    """Yield each graph's name and op count, as :func:`iter_graphs` would give them (the same
    errors, at the same points), without building the op summaries."""
    with _Mapped(path) as mapped:
        for graph in _scan_graphs(mapped.data, mapped.path, workers=workers, count_only=True):
            yield GraphCount(graph.name, len(graph.ops))


def scan_graph(path: PathLike) -> List[GraphSummary]:
    """All graphs of a ge_proto text file (see :func:`iter_graphs`)."""
    return list(iter_graphs(path))


def first_graph_name(path: PathLike) -> str:
    """``graph[0].name``, read from the start of the file only ("" if unset).

    This is the dump ``model_name`` folder of a Build graph (§2.1). Raises GraphFormatError
    if the file holds no graph or is malformed before the name.
    """
    with _Mapped(path) as mapped:
        scan = _GeneralScan(mapped.data, mapped.path)
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
