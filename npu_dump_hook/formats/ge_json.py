"""The msaccucmp JSON form of a GE graph: what ``atc --mode=5`` writes (reference §2.7).

msaccucmp's ``-f`` takes this JSON; :func:`write_msaccucmp_json` writes it next to a bundle's
Build graph.

:func:`to_msaccucmp_json` walks a parsed ``ModelDef``. :func:`write_msaccucmp_json` given a
ge_proto text file first tries a direct, streaming conversion (:mod:`._ge_json_lines`): text
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

A file whose writer noted its JSON form (:mod:`.ge_handover`: the emulator's Build graph, made
from its nodes by :mod:`npu_dump_hook.emulator.graph_json`) gets that text while it is the very
file noted, unchanged; :func:`item_json` gives such a writer the pieces it is made of.
"""
import gc
import json
import logging
import os
from typing import Any, Dict, List, Union

from google.protobuf.descriptor import FieldDescriptor as _FD

# the direct text -> JSON path, in modules of its own: _ge_json_lines (lines), _ge_json_frames
# (open messages), _ge_json_values (scalar values and field tables)
from ._ge_json_lines import convert_lines as _convert_lines
from .ge_handover import handed_json as _handed_json
from ._ge_json_values import INDENT as _INDENT, JSON_BLACK_FIELDS, JSON_MAX_DEPTH as _JSON_MAX_DEPTH
from ._ge_text_wire import Decline as _Decline
from .ge_text import is_repeated as _is_repeated, c_escape as _c_escape, parse_model, parse_model_text

__all__ = ["to_msaccucmp_json", "write_msaccucmp_json", "JSON_BLACK_FIELDS", "item_json"]

PathLike = Union[str, "os.PathLike[str]"]
_LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------- msaccucmp JSON

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


def item_json(message: Any, depth: int, level: int) -> str:
    """The JSON text :func:`write_msaccucmp_json` writes for ``message`` as an item of a
    repeated message field, at JSON ``depth`` (the model is 0, a graph 1, an op 2, a tensor
    desc 3) and indentation ``level`` (a graph's op items are at 4): a writer that prints a
    graph in parts (the emulator's) assembles the file's JSON form from these."""
    value = _json_message(message, depth) if message.ByteSize() else None
    # json.dumps escapes a newline inside a string: every newline of the text is layout
    return json.dumps(value, indent=4, ensure_ascii=False).replace("\n", _INDENT[level])


# --------------------------------------------------------------------------- direct text -> JSON
#
# See _ge_json_lines. Here: the buffered output it writes to, and the fallback to the parse.

_OUT_BUFFER = 1 << 20


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
    handed = _handed_json(path)  # (the file its writer noted, unchanged: ge_handover)
    if handed is not None:
        _LOG.debug("msaccucmp JSON of %s: the form its writer noted", path)
        _write_text(handed, json_path)
        return
    with open(path, "rb") as handle:
        data = handle.read()
    if _write_direct(data, json_path + ".tmp"):
        os.replace(json_path + ".tmp", json_path)
        return
    model = parse_model_text(data, path)
    del data
    _write_parsed(model, json_path)


def _write_text(text: str, json_path: str) -> None:
    tmp_path = json_path + ".tmp"
    with open(tmp_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp_path, json_path)


def _write_parsed(model: Any, json_path: str) -> None:
    """Write :func:`to_msaccucmp_json` of ``model`` with json.dump (the document in memory)."""
    tmp_path = json_path + ".tmp"
    document = to_msaccucmp_json(model)
    with open(tmp_path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=4, ensure_ascii=False)
        handle.write("\n")
    os.replace(tmp_path, json_path)
