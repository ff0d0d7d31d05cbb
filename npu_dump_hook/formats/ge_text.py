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
import logging
import math
import os
import re
import struct
from typing import Any, Dict, List, Optional, Tuple, Union

from google.protobuf.descriptor import FieldDescriptor as _FD

from ..errors import GraphFormatError
from . import ge_ir_schema as ge_schema
# the two ways of the full parse, in modules of their own (importable from here as before):
from ._ge_text_guard import MAX_NESTING, parse_lines as _parse_lines
from ._ge_text_wire import fast_wire as _fast_wire
from ._proto import is_repeated

__all__ = ["MAX_NESTING", "parse_model", "parse_model_text", "format_model", "format_fields", "forget_entry_texts",
           "write_graph_text", "is_repeated", "c_escape"]

PathLike = Union[str, "os.PathLike[str]"]
_LOG = logging.getLogger(__name__)
_PRINTABLE = frozenset(range(0x20, 0x7F))
#: printable ASCII but the three c_escape escapes (" ' \\), to the end: text c_escape leaves as it is
_NOTHING_TO_ESCAPE = re.compile(r"[ !#-&(-\[\]-~]*\Z")
_C_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}


# --------------------------------------------------------------------------- full parse

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
        if isinstance(value, str) and _NOTHING_TO_ESCAPE.match(value):
            return '"' + value + '"'  # most names and attrs: printable ASCII without quotes or backslashes
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


#: field descriptor -> (name, repeated, message, map (key field, value field) or None): what the
#: writer asks of every field of every node, looked up once (GetOptions() builds a message per call)
_FIELD_PLANS = {}  # type: Dict[Any, Tuple[str, bool, bool, Optional[Tuple[Any, Any]]]]


def _field_plan(field: Any) -> Tuple[str, bool, bool, Optional[Tuple[Any, Any]]]:
    plan = _FIELD_PLANS.get(field)
    if plan is None:
        entry = field.message_type
        pair = None
        if entry is not None and entry.GetOptions().map_entry:
            pair = (entry.fields_by_name["key"], entry.fields_by_name["value"])
        plan = _FIELD_PLANS[field] = (field.name, is_repeated(field), field.type == _FD.TYPE_MESSAGE, pair)
    return plan


#: A map's entries with message values (a node's attrs, its tensor descs' attrs) repeat across a
#: graph's nodes: an entry's text, by (indent, map, key, value type, value wire bytes), is made
#: once per :func:`format_model`. Equal bytes are equal messages, so it is the text written otherwise.
_ENTRY_TEXTS = {}  # type: Dict[Tuple[str, str, Any, Any, Any, bytes], str]
_ENTRY_TEXTS_MAX = 8192  # entries kept (small attr values); beyond it, each is formatted every time
_VALUE_BYTES_MAX = 256  # larger values are rarely repeated: not kept


def _map_entry_text(name: str, key_field: Any, key: Any, message: Any, indent: str) -> str:
    wire = message.SerializeToString(deterministic=True)
    memo = (indent, name, key_field, key, message.DESCRIPTOR, wire)
    text = _ENTRY_TEXTS.get(memo)
    if text is None:
        inner = indent + "  "
        out = ["{}{} {{\n{}key: {}\n{}value {{\n".format(indent, name, inner, _format_scalar(key_field, key),
                                                        inner)]
        _format_message(message, inner + "  ", out)
        out.append(inner + "}\n" + indent + "}\n")
        text = "".join(out)
        if len(wire) <= _VALUE_BYTES_MAX and len(_ENTRY_TEXTS) < _ENTRY_TEXTS_MAX:
            _ENTRY_TEXTS[memo] = text
    return text


def _format_map(name: str, pair: Tuple[Any, Any], value: Any, indent: str, out: List[str]) -> None:
    key_field, value_field = pair
    inner = indent + "  "
    if value_field.type == _FD.TYPE_MESSAGE:
        for key in sorted(value):
            out.append(_map_entry_text(name, key_field, key, value[key], indent))
        return
    for key in sorted(value):
        out.append("{}{} {{\n{}key: {}\n".format(indent, name, inner, _format_scalar(key_field, key)))
        out.append("{}value: {}\n".format(inner, _format_scalar(value_field, value[key])))
        out.append(indent + "}\n")


def _format_message(message: Any, indent: str, out: List[str]) -> None:
    inner = indent + "  "
    for field, value in message.ListFields():  # field-number order, like C++
        name, repeated, is_message, pair = _field_plan(field)
        if pair is not None:
            _format_map(name, pair, value, indent, out)
            continue
        items = value if repeated else (value,)
        if is_message:
            opening, closing = "{}{} {{\n".format(indent, name), indent + "}\n"
            for item in items:
                out.append(opening)
                _format_message(item, inner, out)
                out.append(closing)
        else:
            prefix = "{}{}: ".format(indent, name)
            for item in items:
                out.append(prefix + _format_scalar(field, item) + "\n")


def format_model(model: Any) -> str:
    """ge_proto text of a ModelDef, laid out as GE's C++ TextFormat::Print writes it."""
    out = []  # type: List[str]
    try:
        _format_message(model, "", out)
    finally:
        _ENTRY_TEXTS.clear()
    return "".join(out)


def format_fields(message: Any, indent: str = "") -> str:
    """The lines of ``message``'s set fields at ``indent``, exactly as :func:`format_model` prints
    them inside the message's parent: for a writer that prints a model in parts (the emulator's
    Build graph, whose repeated parts it prints once). Map entries' texts are kept across calls
    (bounded, see :data:`_ENTRY_TEXTS`) until :func:`forget_entry_texts`."""
    out = []  # type: List[str]
    _format_message(message, indent, out)
    return "".join(out)


def forget_entry_texts() -> None:
    """Drop the map entries' texts :func:`format_fields` kept (a writer calls it when its model is done)."""
    _ENTRY_TEXTS.clear()


def write_graph_text(path: PathLike, model: Any) -> None:
    """Write :func:`format_model` to ``path`` (ASCII-safe: non-ASCII bytes are escaped)."""
    with open(os.fspath(path), "w", encoding="utf-8", newline="\n") as handle:
        handle.write(format_model(model))


#: code point (a byte decoded as latin-1) -> its C escape, for the bytes c_escape escapes
_C_ESCAPE_TABLE = {byte: _C_ESCAPES.get(byte, "\\{:03o}".format(byte)) for byte in range(256)
                   if byte in _C_ESCAPES or byte not in _PRINTABLE}


def c_escape(raw: bytes) -> str:
    """C-style escape as protobuf's CEscape: \\n \\r \\t \\" \\' \\\\, other non-printables octal."""
    return bytes(raw).decode("latin-1").translate(_C_ESCAPE_TABLE)
