"""GE graph text (``ge_proto_*.txt``) both ways: the full parse into ``ge.proto.ModelDef`` and the
text GE writes (C++ ``TextFormat::Print`` layout), for the emulator and round trips.

:func:`parse_model` builds the whole message with ``google.protobuf.text_format`` (unknown
fields and extensions skipped); :func:`format_model` prints a message in the canonical layout
:mod:`.ge_graph`'s scanner reads fastest.
"""
import logging
import math
import os
import struct
from typing import Any, List, Union

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor as _FD

from ..errors import GraphFormatError
from . import ge_ir_schema as ge_schema

__all__ = ["parse_model", "parse_model_text", "format_model", "write_graph_text", "is_repeated", "c_escape"]

PathLike = Union[str, "os.PathLike[str]"]
_LOG = logging.getLogger(__name__)
_PRINTABLE = frozenset(range(0x20, 0x7F))
_C_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}


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


def c_escape(raw: bytes) -> str:
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
