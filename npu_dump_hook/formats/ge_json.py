"""The msaccucmp JSON form of a GE graph: what ``atc --mode=5`` writes (reference §2.7).

msaccucmp's ``-f`` takes this JSON; :func:`write_msaccucmp_json` writes it next to a bundle's
Build graph.
"""
import json
import os
from typing import Any, Dict, List, Union

from google.protobuf.descriptor import FieldDescriptor as _FD

from .ge_text import is_repeated as _is_repeated, c_escape as _c_escape, parse_model

__all__ = ["to_msaccucmp_json", "write_msaccucmp_json", "JSON_BLACK_FIELDS"]

PathLike = Union[str, "os.PathLike[str]"]


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


def write_msaccucmp_json(path_or_model: Any, json_path: PathLike) -> None:
    """Write :func:`to_msaccucmp_json` to ``json_path`` (UTF-8, indent 4), atomically."""
    document = to_msaccucmp_json(path_or_model)
    json_path = os.fspath(json_path)
    tmp_path = json_path + ".tmp"
    with open(tmp_path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=4, ensure_ascii=False)
        handle.write("\n")
    os.replace(tmp_path, json_path)
