"""The msaccucmp JSON form of the emulator's Build graph and the ops the bundle's op scan reads,
made from its nodes when the text is written, so the bundle writer need neither convert nor scan
the text (:mod:`npu_dump_hook.formats.ge_handover`).

Converting the text back line by line cost 0.32 s (TF 2.15) / 0.49 s (TF 1.15) CPU for an
unrolled 20-step RNN's 2.5 MB graph, scanning it 0.07 / 0.08 s. Here the JSON is put together
from pieces made once: an op's own fields (name, type, inputs, task attrs, id) once per op shape
(:func:`.ge_model.op_shape`), through :func:`.ge_json.item_json` (the converter's parse-path walk
and ``json`` call) of an op whose strings and id are marks (:func:`.ge_model.marked_op`), made a
%-format of the escaped values; each distinct tensor desc once (keyed as
:class:`.ge_model._DescTexts` keys its text), split where the origin name goes. The pieces are
the converter's own output for a marked op, so the result is its output for the real one byte
for byte (tests compare both on hand-made, RNN and fused ascend graphs). An op without a name or
type (which the JSON leaves out) gives None: the text is then converted.
"""
import json
import logging
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..formats import ge_ir_schema
from ..formats.ge_handover import MAX_JSON_CHARS, HandedOp, note_graph
from ..formats.ge_json import item_json
from ..formats.ge_text import c_escape
from .ge_model import _desc_origin, _fill_desc, _head, _mark, escaped_all, marked_op, op_format, op_shape, op_strings

__all__ = ["graph_json", "hand_over_graph_json"]

_LOG = logging.getLogger(__name__)

_OP_DEPTH, _OP_LEVEL = 2, 4  # a graph's op items in the model's JSON
_DESC_DEPTH, _DESC_LEVEL = 3, 6  # an op's desc items
_MARK = re.compile(r"\\u0001(\d+)\\u0001")  # a mark as json.dumps writes it inside a string
_ORIGIN_MARK = "\x01origin\x01"
_encode = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) uses for a str


def _escaped(text: str) -> str:
    """``text`` as it is inside a JSON string."""
    return _encode(text)[1:-1]


def _escaped_bytes(text: str) -> str:
    """``text`` as a single bytes field (an attr's ``s``) is inside a JSON string: C-escaped UTF-8."""
    if _PLAIN.match(text):  # (most names)
        return text
    return _escaped(c_escape(text.encode("utf-8")))


_PLAIN = re.compile(r"[ !#-&(-\[\]-~]*\Z")  # printable ASCII without " ' \: as it is in both escapes


_ORIGIN_JSON = _escaped_bytes(_ORIGIN_MARK)


class _OpJson(object):
    """The JSON of each op's own fields from a %-format made once per op shape (ge_model.op_shape)."""

    def __init__(self) -> None:
        self.formats = {}  # type: Dict[Tuple[Any, ...], str]

    def text(self, node: Any, no_task: bool, order: int) -> str:
        """The op's own-field JSON without its closing ``}`` (its descs follow)."""
        form = self.form(op_shape(node, no_task, order))
        values = escaped_all(op_strings(node), _escaped, "\\u0000")  # type: List[Any]
        if order:
            values.append(order)
        return form % tuple(values)

    def form(self, shape: Tuple[Any, ...]) -> str:
        """The %-format of the own-field JSON of an op of ``shape`` (ge_model.op_shape), without its closing ``}``."""
        form = self.formats.get(shape)
        if form is None:
            text = item_json(marked_op(shape), _OP_DEPTH, _OP_LEVEL)
            if not text.endswith(_OP_CLOSING):
                raise ValueError("unexpected op JSON layout: {!r}".format(text))
            form = self.formats[shape] = op_format(text[:-len(_OP_CLOSING)], _MARK, shape[3])
        return form


class _DescJson(object):
    """The JSON of each distinct tensor desc of one graph (keyed as ge_model._DescTexts keys
    their text), as the text before and after its origin name (None: it has none)."""

    def __init__(self) -> None:
        self.texts = {}  # type: Dict[Tuple[Any, ...], Tuple[str, Optional[str]]]

    def put(self, out: List[str], tensor: Any, output: bool) -> None:
        """Append the desc's JSON to ``out``."""
        origin = _desc_origin(tensor, output)
        split = self.split(tensor, output, origin)
        out.append(split[0])
        if split[1] is not None:
            out.append(_escaped_bytes(origin[0]))
            out.append(split[1])

    def split(self, tensor: Any, output: bool, origin: Optional[Tuple[str, int]]) -> Tuple[str, Optional[str]]:
        """The desc's JSON before and after its origin name (``origin``: its _desc_origin)."""
        value = tensor.value
        key = (output, value.held, value.shape, tensor.tf_dtype, origin[1] if origin is not None else None)
        split = self.texts.get(key)
        if split is None:
            split = self.texts[key] = _desc_json(tensor, origin)
        return split

    def put_field(self, out: List[str], name: str, tensors: Sequence[Any], output: bool) -> None:
        """Append the op's entry of its ``name`` descs (after its own fields) to ``out``."""
        out.append(",{}\"{}\": [{}".format(_INDENTS[_OP_LEVEL + 1], name, _INDENTS[_DESC_LEVEL]))
        for number, tensor in enumerate(tensors):
            if number:
                out.append(_DESC_SEPARATOR)
            self.put(out, tensor, output)
        out.append(_FIELD_CLOSING)


def _desc_json(tensor: Any, origin: Optional[Tuple[str, int]]) -> Tuple[str, Optional[str]]:
    """The JSON of a desc like ``tensor``'s, split where its origin name goes (_DescJson)."""
    value = tensor.value
    desc = ge_ir_schema.TensorDescriptor()
    _fill_desc(desc, value.held, value.shape, tensor.tf_dtype,
               (_ORIGIN_MARK, origin[1]) if origin is not None else None)
    text = item_json(desc, _DESC_DEPTH, _DESC_LEVEL)
    if text.count(_ORIGIN_JSON) != (0 if origin is None else 1):
        raise ValueError("unexpected desc JSON layout: {!r}".format(text))
    if origin is None:
        return text, None
    before, _mark_text, after = text.partition(_ORIGIN_JSON)
    return before, after


_INDENTS = ["\n" + " " * (4 * level) for level in range(8)]
_OP_CLOSING = _INDENTS[_OP_LEVEL] + "}"
_OP_SEPARATOR = "," + _INDENTS[_OP_LEVEL]
_DESC_SEPARATOR = "," + _INDENTS[_DESC_LEVEL]
_FIELD_CLOSING = _INDENTS[_OP_LEVEL + 1] + "]"


def _document(graph_name: str) -> Tuple[str, str]:
    """The model's JSON before and after its graph's op items."""
    model = _head(graph_name)
    model.graph[0].op.add().name = _mark(0)
    text = item_json(model, 0, 0)
    item = "{" + _INDENTS[_OP_LEVEL + 1] + '"name": "' + _escaped(_mark(0)) + '"' + _OP_CLOSING
    before, found, after = text.partition(item)
    if not found or item in after:
        raise ValueError("unexpected model JSON layout: {!r}".format(text))
    return before, after


def graph_json(graph_name: str, nodes: Sequence[Any], input_descs: bool = False) -> Optional[str]:
    """The msaccucmp JSON form (final newline included) of ``ge_model.graph_text(graph_name,
    nodes, input_descs)``, or None when it is not made here (no nodes, an op without a name or
    type): the text is then converted."""
    return _graph_json_and_ops(graph_name, nodes, input_descs)[0]


def _graph_json_and_ops(graph_name: str, nodes: Sequence[Any], input_descs: bool,
                        json_form: bool = True) -> Tuple[Optional[str], List[HandedOp]]:
    """(:func:`graph_json` (None without ``json_form``), the ops as the bundle's op scan reads
    them from the text)."""
    ops, templates, descs = [], _OpJson(), _DescJson()  # type: List[HandedOp], _OpJson, _DescJson
    out = [] if json_form else None  # type: Optional[List[str]]  # the op items' pieces
    for order, node in enumerate(nodes):
        no_task = node.no_task
        originals = node.original_names
        ops.append(HandedOp(node.name, no_task, None if originals is None else tuple(originals), node.type or ""))
        if out is None:
            continue
        if not node.name or not node.type:  # (the JSON leaves an empty string out)
            out = None
            continue
        if order:
            out.append(_OP_SEPARATOR)
        out.append(templates.text(node, no_task, order))
        if input_descs and node.inputs:
            descs.put_field(out, "input_desc", node.inputs, False)
        if node.outputs:
            descs.put_field(out, "output_desc", node.outputs, True)
        out.append(_OP_CLOSING)
    if not out:
        return None, ops
    before, after = _document(graph_name)
    return before + "".join(out) + after + "\n", ops


def hand_over_graph_json(path: str, graph_name: str, nodes: Sequence[Any], input_descs: bool = False,
                         text_chars: int = 0) -> None:
    """Note the JSON form and the ops of the Build graph just written at ``path`` from ``nodes``
    for the bundle writer (:func:`.ge_handover.note_graph`); ``text_chars``: the graph text's
    length, when its JSON form (~3x) would be over ge_handover.MAX_JSON_CHARS only the ops are."""
    try:
        text, ops = _graph_json_and_ops(graph_name, nodes, input_descs,
                                        json_form=3 * text_chars <= MAX_JSON_CHARS)
    except ValueError as exc:  # a printed form not as expected: the bundle writer reads the file
        _LOG.warning("Build graph %s: its JSON form and ops are not handed over (%s); they are read from the file",
                     path, exc)
        return
    note_graph(path, text, ops, graph_name)
