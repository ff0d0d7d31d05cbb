"""The JSON text of one scalar value of GE graph text, for the direct msaccucmp JSON conversion
(:mod:`._ge_json_lines`), and the per-message-type field tables that say how each field is
converted.

A converter takes the value as the fast parse reads it (:mod:`._ge_text_wire`: the bytes after
``name: ``) and gives the text ``json.dump(indent=4, ensure_ascii=False)`` writes for the
value :func:`.ge_json.to_msaccucmp_json` makes of it, or raises :class:`Decline` when it cannot
be sure of it. :func:`json_table` gives, per field of a message type, its declaration index,
kind, converter and JSON key (see there). :data:`JSON_BLACK_FIELDS` and :data:`JSON_MAX_DEPTH`
are the rules of atc's JSON both conversions share.
"""
import codecs
import json
import re
from typing import Any, Dict, Tuple

from google.protobuf.descriptor import FieldDescriptor as _FD

from ._ge_text_wire import (BOOLS as _BOOLS, DECIMAL as _DECIMAL, Decline as _Decline, FLOAT as _FLOAT,
                       FLOAT_WORDS as _FLOAT_WORDS, HEX as _HEX, INT_RANGES as _INT_RANGES,
                       field_table as _field_table)
from ._text_lines import string_end as _string_end, NOT_PLAIN_ESCAPE as _NOT_PLAIN_ESCAPE
from .ge_text import c_escape as _c_escape

__all__ = ["JSON_BLACK_FIELDS", "JSON_MAX_DEPTH", "INDENT", "SCALAR", "MESSAGE", "MAP", "json_table"]

#: Fields ``atc --mode=5`` drops from the JSON (weights, offsets, sizes; §2.7).
JSON_BLACK_FIELDS = frozenset(("output", "data_offset", "data", "workspace", "workspace_bytes",
                               "memory_size", "weight_size", "size", "bt", "quantize_factor"))
JSON_MAX_DEPTH = 20  # deeper messages come out as null, as in atc

_encode_string = json.encoder.encode_basestring  # what json.dump(ensure_ascii=False) uses
_PLAIN_STRING = re.compile(rb'"[ !#-\[\]-~]*"\Z')  # printable ASCII without " or \
_PLAIN_BYTES = re.compile(rb'"[ !#-&(-\[\]-~]*"\Z')  # ... nor ' (which c_escape escapes)
INDENT = ["\n" + " " * (4 * level) for level in range(2 * JSON_MAX_DEPTH + 8)]
SCALAR, MESSAGE, MAP = 0, 1, 2
_STREAMED = {("ModelDef", "graph"), ("GraphDef", "op")}
_JSON_TABLES = {}  # type: Dict[Any, Dict[bytes, Tuple[Any, ...]]]


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
    if _DECIMAL.match(value):
        number = int(value)
    elif _HEX.match(value):
        number = int(value, 16)
    else:
        raise _Decline()
    if not detail[0] <= number <= detail[1]:
        raise _Decline()
    return str(number)


def _json_bool(value: bytes, detail: Any) -> str:
    flag = _BOOLS.get(value)
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
    number = _FLOAT_WORDS.get(value)
    if number is None:
        if not _FLOAT.match(value):
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


def json_table(descriptor: Any) -> Dict[bytes, Tuple[Any, ...]]:
    """name -> (declaration index, SCALAR/MESSAGE/MAP, repeated, oneof, converter, detail,
    '"name": ' (None: a black field), default JSON text of a singular scalar, field
    descriptor, streamed, the key of a map entry) for the fields of a message type."""
    table = _JSON_TABLES.get(descriptor)
    if table is not None:
        return table
    table = {}
    wire_table = _field_table(descriptor)
    for index, field in enumerate(descriptor.fields):
        name = field.name.encode()
        kind, _tag, repeated, oneof, detail = wire_table[name]
        shape, convert, default = SCALAR, _decline, None
        if field.type == _FD.TYPE_MESSAGE:
            shape = MAP if field.message_type.GetOptions().map_entry else MESSAGE
        elif kind in _INT_RANGES:
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
