"""The direct msaccucmp JSON conversion of GE graph text: ge_proto text laid out one field per
line becomes the JSON text of :func:`.ge_json.to_msaccucmp_json` line by line, without
protobuf messages (:func:`convert_lines`); ``Decline`` when it cannot be sure of the result
(the caller then parses the file).

The text is read line by line as ge_text's fast parse reads it (one field or block delimiter
per line), and each value is converted to its JSON text by :mod:`._ge_json_values`: the same values
the fast parse would encode give the same JSON. A stack of open messages (_Message) collects
the JSON entries of each; a message's text is made when its block closes. The op items of a
graph and the graph items of the model are written out as they close instead (the graph's
and the model's earlier entries first), so memory holds one op. Three memos skip work:
each line's meaning per message type (_LineMemo: keys, types, shapes repeat), the JSON of
each block seen before where it closes as the canonical layout does (_BlockMemo), and one
regex per layout for an op made of plain scalar lines (_Leaves: the small graphs of many
dump files). Declined (_Decline: the fallback then parses the file), besides what the fast
parse declines: fields out of declaration order or a repeated field's items not together
(the JSON groups them), map keys not strictly ascending, unknown fields, comments, messages
nested deeper than the JSON depth limit, a singular float or double outside a oneof (none
in ge.proto), and escapes or bytes the raw text does not allow (its UTF-8 is checked string
by string).
"""
import re
from itertools import islice
from typing import Any, Dict, List, Optional, Tuple

from google.protobuf.descriptor import FieldDescriptor as _FD

from . import ge_ir_schema as ge_schema
from ._ge_json_frames import (LineMemo as _LineMemo, Message as _Message, Sink as _Sink, WRITTEN as _WRITTEN,
                              add_entry as _add_entry, child_result as _child_result, end_field as _end_field,
                              message_text as _message_text, put_child as _put_child, start_field as _start_field)
from ._ge_json_values import (INDENT as _INDENT, JSON_MAX_DEPTH as _JSON_MAX_DEPTH, MAP as _MAP,
                              SCALAR as _SCALAR, json_table as _json_table)
from ._ge_text_guard import CHUNK_CHARS as _CHUNK_CHARS
from ._ge_text_wire import CLOSE as _CLOSE, Decline as _Decline, FIELD_HEAD as _FIELD_HEAD, INT_RANGES as _INT_RANGES

__all__ = ["convert_lines"]


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
    head = _FIELD_HEAD.match(line)
    if head is None:
        if _CLOSE.match(line):
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
    if kind in _INT_RANGES:
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
    the values. Built once per shape, with the checks of convert_lines that depend on the
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


def convert_lines(data: bytes, out: _Sink) -> None:
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
        end = data.find(b"\n", start + _CHUNK_CHARS)
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
