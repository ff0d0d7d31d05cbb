"""``text_format.MessageToString(graph_def, float_format='')`` (what ``tf.io.write_graph`` writes),
the same text at about a third of the CPU, for protobuf's Python printer (upb, TF 2.x).

The generic printer walks every field of every node through descriptors and escapes every string
character by character. A GraphDef is thousands of nodes of one shape: here the NodeDef skeleton
(``name``, ``op``, ``input``, ``device``, the ``attr`` map in sorted key order, as ``PrintMessage``
prints a map) is written directly, and each attribute value is printed by ``text_format`` itself,
once per distinct value (the same ``T: DT_FLOAT`` recurs on most nodes). A node's other fields
(``experimental_type``, debug info: numbered after ``attr``, so printed after it) go through
``text_format`` after the skeleton, also once per distinct value; everything after the nodes
(``library``, ``versions``) goes through ``text_format`` whole.
tests/test_graph_text.py checks the bytes against ``tf.io.write_graph``.
"""
import re
from typing import Any, Dict, List  # noqa: F401 (type comments)

__all__ = ["graph_def_text"]

#: Printable ASCII without ``"``, ``'``, ``\\``: what ``text_encoding.CEscape`` leaves as it is.
_PLAIN = re.compile(r"[ !#-&(-\[\]-~]*\Z")
#: The NodeDef fields written here; any other (debug info, full type) is printed by text_format after them.
_SKELETON = frozenset(("name", "op", "input", "device", "attr"))


def graph_def_text(graph_def: Any) -> str:
    """The text form of ``graph_def`` exactly as ``text_format.MessageToString(graph_def,
    float_format='')`` prints it."""
    from google.protobuf import text_format

    values = {}  # type: Dict[Any, str]
    parts = []  # type: List[str]
    for node in graph_def.node:
        _node_text(node, values, parts)
    rest = type(graph_def)()
    for field, value in graph_def.ListFields():
        if field.name == "node":
            continue
        if field.message_type is None:
            setattr(rest, field.name, value)
        else:
            getattr(rest, field.name).CopyFrom(value)
    parts.append(text_format.MessageToString(rest, float_format=""))
    return "".join(parts)


def _node_text(node: Any, values: Dict[Any, str], parts: List[str]) -> None:
    """Append one NodeDef of the skeleton's fields; ``values`` caches attribute value texts by
    their serialized bytes (equal bytes, equal message, equal text)."""
    from google.protobuf import text_format

    add = parts.append
    add("node {\n")
    if node.name:
        add("  name: " + _quoted(node.name) + "\n")
    if node.op:
        add("  op: " + _quoted(node.op) + "\n")
    for name in node.input:
        add("  input: " + _quoted(name) + "\n")
    if node.device:
        add("  device: " + _quoted(node.device) + "\n")
    attr = node.attr
    for key in sorted(attr):
        value = attr[key]
        serialized = value.SerializeToString(deterministic=True)
        text = values.get(serialized)
        if text is None:
            text = values[serialized] = text_format.MessageToString(value, float_format="", indent=6)
        add("  attr {\n    key: " + _quoted(key) + "\n    value {\n" + text + "    }\n  }\n")
    extra = [field.name for field, _value in node.ListFields() if field.name not in _SKELETON]
    if extra:
        add(_extra_text(node, extra, values))
    add("}\n")


def _extra_text(node: Any, fields: List[str], values: Dict[Any, str]) -> str:
    """The NodeDef fields after ``attr`` (``experimental_type``: TF 2.x gives one to each ``If``/``While``
    and its gradient ops), printed by ``text_format`` once per distinct value. Their field numbers
    all follow ``attr``'s, so the printer writes them last, after the skeleton, at the node's indent."""
    from google.protobuf import text_format

    rest = type(node)()
    for name in fields:
        getattr(rest, name).CopyFrom(getattr(node, name))
    key = ("extra", rest.SerializeToString(deterministic=True))  # a tuple: never an attribute's key
    text = values.get(key)
    if text is None:
        text = values[key] = text_format.MessageToString(rest, float_format="", indent=2)
    return text


def _quoted(text: str) -> str:
    """A string field as the printer writes it: its UTF-8 bytes C-escaped, in double quotes."""
    if _PLAIN.match(text):
        return '"' + text + '"'
    from google.protobuf import text_encoding

    return '"' + text_encoding.CEscape(text.encode("utf-8"), False) + '"'
