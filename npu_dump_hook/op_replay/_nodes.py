"""The bundle's TF graph text as data: NodeDef blocks found by name, parsed one at a time,
and the rule deciding which ops may be rebuilt (TensorFlow-free; the NodeDef class is passed in).

Refused (with the reason in the result): an op type no TensorFlow here registers, one whose
OpDef is stateful (py_func / PyFunc, readers, file and checkpoint ops, variables, random ops,
Print: their effects or values are not a function of the inputs), any type named like a
file, reader, writer, checkpoint or py_func op (whatever its OpDef says), an op calling a
function (an attr of type func), and an op with a reference input (a TF1 variable update).
"""
import re
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["NodeIndex", "refusal", "tensor_name", "external_inputs", "DENIED_WORDS"]

_NODE = re.compile(r'^node \{\n  name: "((?:[^"\\\n]|\\.)*)"', re.M)
#: Words that refuse an op type whatever its OpDef says (case-insensitive substrings).
DENIED_WORDS = ("pyfunc", "py_func", "file", "reader", "writer", "save", "restore", "checkpoint", "summary",
                "print", "iterator", "dataset", "queue", "variable", "assign", "random")


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
    for arg in op_def.input_arg:
        if arg.is_ref:
            return "{} ({}): reference input {} (a variable update)".format(node.name, kind, arg.name)
    for name in node.attr:
        value = node.attr[name]
        if value.HasField("func") or (value.HasField("list") and len(value.list.func)):
            return "{} ({}): attr {} calls a function".format(node.name, kind, name)
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
