"""The bundle's TF graph text as data: NodeDef blocks found by name, parsed one at a time,
and the rule deciding which ops may be rebuilt (TensorFlow-free; the NodeDef class is passed in).

Refused (with the reason in the result): an op type no TensorFlow here registers, one whose
OpDef is stateful (py_func / PyFunc, readers, file and checkpoint ops, variables, random ops,
Print: their effects or values are not a function of the inputs), any type named like a
file, reader, writer, checkpoint, debug, copy or py_func op (whatever its OpDef says), an op
with an attr that names a place outside the graph (``debug_urls``, ``memory_region_name``,
``descriptor_source``, ``debug_ops_spec``: TensorFlow marks ``DebugIdentity``, ``Copy``,
``ImmutableConst`` and ``DecodeProtoV2`` pure, yet they write or read files through these), an
op with a string, resource or variant input (file names, tables and handles: the numeric ops
replay is for take none), an op calling a function (an attr of type func), and an op with a
reference input (a TF1 variable update).
"""
import re
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["NodeIndex", "refusal", "tensor_name", "external_inputs", "DENIED_WORDS", "DENIED_ATTR_WORDS"]

_NODE = re.compile(r'^node \{\n  name: "((?:[^"\\\n]|\\.)*)"', re.M)
#: Words that refuse an op type whatever its OpDef says (case-insensitive substrings).
DENIED_WORDS = ("pyfunc", "py_func", "file", "reader", "writer", "save", "restore", "checkpoint", "summary",
                "print", "iterator", "dataset", "queue", "variable", "assign", "random", "debug", "copy",
                "immutable", "proto", "vocab", "load", "table", "lookup", "rpc", "send", "recv")
#: Attr names (case-insensitive substrings) that point outside the graph: a URL, path or spec.
DENIED_ATTR_WORDS = ("url", "path", "file", "region", "descriptor", "spec")
#: DataType enum values of string, resource and variant (types.proto), kept TF-free here.
_DENIED_DTYPES = {7: "string", 20: "resource", 21: "variant"}


def _unescape(text: str) -> str:
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in text else text


class NodeIndex(object):
    """The ``node {}`` blocks of a GraphDef text (``tf.io.write_graph``'s layout) by node name;
    :meth:`node` parses one block into a NodeDef (``parse(text) -> GraphDef``)."""

    def __init__(self, text: str, parse: Any) -> None:
        self._text = text
        self._parse = parse
        self._spans = {}  # type: Dict[str, Tuple[int, int]]
        for match in _NODE.finditer(text):
            end = text.find("\n}\n", match.start())
            end = len(text) if end < 0 else end + 3
            self._spans[_unescape(match.group(1))] = (match.start(), end)
        self._parsed = {}  # type: Dict[str, Any]

    def __contains__(self, name: str) -> bool:
        return name in self._spans

    def node(self, name: str) -> Optional[Any]:
        """The NodeDef named ``name``, or None when the graph has none."""
        if name not in self._parsed:
            span = self._spans.get(name)
            if span is None:
                return None
            nodes = list(self._parse(self._text[span[0]:span[1]]).node)
            self._parsed[name] = nodes[0] if len(nodes) == 1 and nodes[0].name == name else None
        return self._parsed[name]


def tensor_name(reference: str) -> Optional[str]:
    """A NodeDef input (``op``, ``op:1``) as a tensor name ``op:i``; None for a control input."""
    if reference.startswith("^"):
        return None
    name, _, index = reference.rpartition(":")
    if name and index.isdigit():
        return reference
    return reference + ":0"


def refusal(node: Any, op_def: Optional[Any]) -> Optional[str]:
    """Why ``node`` (a NodeDef) must not be rebuilt from a bundle's graph, or None."""
    kind = node.op
    if op_def is None:
        return "{} ({}): no such op type in this TensorFlow".format(node.name, kind)
    lowered = kind.lower()
    for word in DENIED_WORDS:
        if word in lowered:
            return "{} ({}): a {} op is never run from a bundle's graph".format(node.name, kind, word)
    if op_def.is_stateful:
        return "{} ({}): stateful op (its effect or value is not a function of its inputs)".format(node.name, kind)
    return _input_refusal(node, op_def) or _attr_refusal(node)


def _input_dtypes(node: Any, arg: Any) -> List[int]:
    """The DataType values input ``arg`` of ``node`` takes (fixed, from a type attr, or a list)."""
    if arg.type:
        return [arg.type]
    if arg.type_attr and arg.type_attr in node.attr:
        return [node.attr[arg.type_attr].type]
    if arg.type_list_attr and arg.type_list_attr in node.attr:
        return list(node.attr[arg.type_list_attr].list.type)
    return []


def _input_refusal(node: Any, op_def: Any) -> Optional[str]:
    for arg in op_def.input_arg:
        if arg.is_ref:
            return "{} ({}): reference input {} (a variable update)".format(node.name, node.op, arg.name)
        for dtype in _input_dtypes(node, arg):
            if dtype in _DENIED_DTYPES:
                return "{} ({}): {} input {} (a name or handle, not a number)".format(
                    node.name, node.op, _DENIED_DTYPES[dtype], arg.name)
    return None


def _attr_refusal(node: Any) -> Optional[str]:
    for name in node.attr:
        value = node.attr[name]
        if value.HasField("func") or (value.HasField("list") and len(value.list.func)):
            return "{} ({}): attr {} calls a function".format(node.name, node.op, name)
        if any(word in name.lower() for word in DENIED_ATTR_WORDS):
            return "{} ({}): attr {} names a place outside the graph".format(node.name, node.op, name)
    return None


def external_inputs(chain: List[Any]) -> List[str]:
    """The tensors the chain of NodeDefs reads from outside itself, in order of first use."""
    inside = set(node.name for node in chain)
    seen = []  # type: List[str]
    for node in chain:
        for reference in node.input:
            tensor = tensor_name(reference)
            if tensor is not None and tensor.rpartition(":")[0] not in inside and tensor not in seen:
                seen.append(tensor)
    return seen
