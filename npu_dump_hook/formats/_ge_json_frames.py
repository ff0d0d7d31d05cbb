"""The open messages of the direct msaccucmp JSON conversion (:mod:`._ge_json_lines`) and how
their JSON text is assembled: entries collected per message, repeated fields grouped into
arrays, and the streamed fields (the ops of a graph, the graphs of the model) written out to
the output as each item closes, so that memory holds one op.

:class:`Message` is one open block; :func:`start_field`, :func:`add_entry`, :func:`put_child`,
:func:`end_field`, :func:`child_result` and :func:`message_text` are the steps the conversion
takes on it. Text that would not come out as ``json.dump`` writes the parsed model raises
``Decline`` (fields out of declaration order, a oneof given twice, map keys not ascending).
"""
import json
from typing import Any, Dict, List, Optional, Tuple

from ._ge_json_values import INDENT as _INDENT
from ._ge_text_wire import Decline as _Decline

__all__ = ["Sink", "Message", "LineMemo", "WRITTEN", "add_entry", "end_field", "start_field", "put_child",
           "child_result", "message_text"]

#: What the JSON text is written to: ``write(text)`` and ``flush()`` (ge_json's buffered file).
Sink = Any
WRITTEN = object()  # a streamed message's text: already written


class Message(object):
    """An open message: its fields, the JSON level of its object, the entries made so far
    (JSON text, each '"name": value'), the declaration index of the last field given, the
    items of the repeated field being read, whether it serializes to anything."""

    __slots__ = ("table", "level", "entries", "last", "items", "item_key", "nonempty", "oneof",
                 "parent", "field", "stream", "committed", "count", "streamed", "last_key", "entry", "block",
                 "memo", "heads")

    def __init__(self, table: Dict[bytes, Tuple[Any, ...]], level: int, parent: Optional["Message"],
                 field: Any, stream: bool, entry: bool, memos: "LineMemo") -> None:
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


class LineMemo(object):
    """Per message type (field table): line -> _classify result, and the heads _classify
    remembers; made on first use, kept for one conversion."""

    def __init__(self) -> None:
        self.memos = {}  # type: Dict[int, Tuple[Dict[bytes, Any], Dict[bytes, Any]]]

    def of(self, table: Dict[bytes, Tuple[Any, ...]]) -> Tuple[Dict[bytes, Any], Dict[bytes, Any]]:
        memos = self.memos.get(id(table))
        if memos is None:
            memos = self.memos[id(table)] = ({}, {})
        return memos


def add_entry(frame: Message, entry: str, out: Sink) -> None:
    if frame.committed:
        out.write(("," if frame.count else "") + _INDENT[frame.level + 1] + entry)
        frame.count += 1
    else:
        frame.entries.append(entry)


def end_field(frame: Message, out: Sink) -> None:
    """Close the repeated field being read: its array becomes an entry (or is ended, streamed)."""
    if frame.streamed:
        out.write(_INDENT[frame.level + 1] + "]")
        frame.streamed = 0
    elif frame.items is not None:
        items, frame.items = frame.items, None
        if items:
            inner = _INDENT[frame.level + 2]
            add_entry(frame, frame.item_key + "[" + inner + ("," + inner).join(items)
                       + _INDENT[frame.level + 1] + "]", out)


def _commit(frame: Message, out: Sink) -> None:
    """Write the opening of ``frame`` and its entries so far (and its parents', first)."""
    inner = _INDENT[frame.level + 1]
    out.write((_begin_item(frame.parent, out) if frame.parent is not None else "") + "{" + "".join(("," if index else "") + inner + entry for index, entry in enumerate(frame.entries)))
    frame.count = len(frame.entries)
    frame.entries = []
    frame.committed = True


def _begin_item(frame: Message, out: Sink) -> str:
    """What comes before the next item of the streamed field ``frame`` is reading (to write)."""
    if not frame.committed:
        _commit(frame, out)
    frame.streamed += 1
    if frame.streamed > 1:
        return "," + _INDENT[frame.level + 2]
    frame.count += 1
    return ("," if frame.count > 1 else "") + _INDENT[frame.level + 1] + frame.item_key + "[" + _INDENT[frame.level + 2]


def message_text(frame: Message, out: Sink) -> Any:
    """The JSON text of a closed message: None if it serializes to nothing, WRITTEN if streamed."""
    end_field(frame, out)
    entries = frame.entries
    if frame.committed:
        out.write(_INDENT[frame.level] + "}")
        return WRITTEN
    if frame.entry:  # {"key": ..., "value": ...}, the key even when ""
        entries.insert(0, '"key": ' + (frame.last_key or '""'))
    elif not frame.nonempty:
        return None
    if not entries:
        return "null"
    inner = _INDENT[frame.level + 1]
    return "{" + inner + ("," + inner).join(entries) + _INDENT[frame.level] + "}"


def child_result(child: Message, out: Sink) -> Tuple[Any, Optional[str]]:
    """(JSON text, its map key if a map entry) of the closed message ``child`` (message_text)."""
    text = message_text(child, out)
    if not child.entry:
        return text, None
    key_text = child.last_key or '""'
    return text, (json.loads(key_text) if "\\" in key_text else key_text[1:-1])


def put_child(frame: Message, info: Tuple[Any, ...], text: Any, map_key: Optional[str], out: Sink) -> None:
    """Put a closed message (its field ``info``, its child_result) into ``frame``, its parent."""
    if text is WRITTEN:
        return
    if map_key is not None:  # the keys of a map must come sorted, once each: the JSON lists them sorted
        if frame.last_key is not None and not frame.last_key < map_key:
            raise _Decline()
        frame.last_key = map_key
    key = info[6]
    if not info[2]:
        if text is not None and key is not None:
            add_entry(frame, key + text, out)
        return
    if key is None:
        return
    if text is None:
        text = "null"
    if frame.stream and info[9]:
        out.write(_begin_item(frame, out) + text)
    else:
        frame.items.append(text)


def start_field(frame: Message, info: Tuple[Any, ...], out: Sink) -> None:
    """Check that the field of ``info`` may come now in ``frame`` (declaration order, oneof,
    given once) and start its array if it is repeated."""
    index = info[0]
    if index < frame.last:
        raise _Decline()
    if frame.streamed or frame.items is not None:
        end_field(frame, out)
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
