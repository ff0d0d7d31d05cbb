"""The Build graph's text and its msaccucmp JSON form made in one pass over the nodes.

:func:`.ge_model.graph_text` and :func:`.graph_json.hand_over_graph_json` each walked the 2,000
nodes of an unrolled RNN's graph, computed each op's layout key, strings and escapes, and looked
up each tensor desc: 0.09 s CPU apiece on TF 1.15 (Python 3.7), a third of the emulator's write of
the step. Here each op is keyed once by its layout (:func:`.ge_model.op_shape`) and its descs'
keys, and that key gives a %-format of the whole op for each form, made once from the pieces those
two modules make (an unrolled RNN repeats its cell's few dozen layouts). An op whose strings are
all plain (printable ASCII without ``"``, ``'`` or ``\\``: every escape leaves them as they are,
the common name) is then one ``%`` per form with the same values; any other op, or one the JSON
leaves out, takes those modules' own per-op path. The output is theirs byte for byte
(tests/emulator/test_graph_forms.py on hand-made graphs of every node kind, benchmarks/bench_emu_step.py
on the RNN's).
"""
import logging
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..formats.ge_handover import MAX_JSON_CHARS, HandedOp
from ..formats.ge_text import format_fields, forget_entry_texts
from . import ge_model, graph_json

__all__ = ["graph_forms", "text_and_handover"]

_LOG = logging.getLogger(__name__)

#: Strings every escape (C text, JSON) leaves as they are: printable ASCII without " ' \ (a property of
#: each character, so a concatenation of strings is plain if and only if each of them is)
_PLAIN = re.compile("[ !#-&(-\\[\\]-~]*\\Z")
_OP_OPEN, _OP_END = "  op {\n", "  }\n"


def _template(text: str) -> str:
    """``text`` as a literal part of a %-format."""
    return text.replace("%", "%%")


class _Forms(object):
    """The per-op pieces of both forms (ge_model's and graph_json's makers) and the whole-op
    %-formats put together from them, per (op shape, input desc keys, output desc keys)."""

    def __init__(self, input_descs: bool) -> None:
        self.input_descs = input_descs
        self.op_texts, self.desc_texts = ge_model._OpTexts(), ge_model._DescTexts()
        self.op_json, self.desc_json = graph_json._OpJson(), graph_json._DescJson()
        self.wholes = {}  # type: Dict[Tuple[Any, ...], Tuple[str, str]]

    def whole(self, key: Tuple[Any, ...], node: Any) -> Tuple[str, str]:
        """(text, JSON) %-formats of an op keyed ``key`` like ``node``, taking its strings, then its
        id when not 0, then its outputs' origin names (the order both printed forms take them in)."""
        found = self.wholes.get(key)
        if found is None:
            found = self.wholes[key] = (self._text_form(key[0], node), self._json_form(key[0], node))
        return found

    def _text_form(self, shape: Tuple[Any, ...], node: Any) -> str:
        parts = [_OP_OPEN, self.op_texts.form(shape)]
        for tensors, output in ((node.inputs if self.input_descs else (), False), (node.outputs, True)):
            for tensor in tensors:
                origin = ge_model._desc_origin(tensor, output)
                text = _template(self.desc_texts.marked(tensor, output, origin))
                parts.append(text if origin is None else text.replace(ge_model._QUOTED_MARK, '"%s"', 1))
        parts.append(_OP_END)
        return "".join(parts)

    def _json_form(self, shape: Tuple[Any, ...], node: Any) -> str:
        parts = [] if shape[3] else [graph_json._OP_SEPARATOR]
        parts.append(self.op_json.form(shape))
        for name, tensors, output in (("input_desc", node.inputs if self.input_descs else (), False),
                                      ("output_desc", node.outputs, True)):
            if not tensors:
                continue
            pieces = []  # type: List[str]
            for tensor in tensors:
                before, after = self.desc_json.split(tensor, output, ge_model._desc_origin(tensor, output))
                pieces.append(_template(before) if after is None else _template(before) + "%s" + _template(after))
            field = []  # type: List[str]
            self.desc_json.put_field(field, name, (), output)  # the field's opening and closing
            parts.append(field[0] + _template(graph_json._DESC_SEPARATOR).join(pieces) + field[1])
        parts.append(graph_json._OP_CLOSING)
        return "".join(parts)


def _desc_keys(tensors: Sequence[Any]) -> Tuple[Any, ...]:
    """What each desc's printed form depends on (its origin name apart), as the desc makers key it."""
    return tuple([(t.value.held, t.value.shape, t.tf_dtype, None if t.origin is None else t.origin[1])
                  for t in tensors])


def graph_forms(graph_name: str, nodes: Sequence[Any], input_descs: bool = False
                ) -> Tuple[str, Optional[str], List[HandedOp]]:
    """(``ge_model.graph_text(graph_name, nodes, input_descs)``, its JSON form as
    ``graph_json.hand_over_graph_json`` hands it over (None when not made: no nodes, an op without
    a name or type, a JSON form whose text is over ge_handover.MAX_JSON_CHARS / 3), the handed ops).
    ValueError as those functions raise it (a printed form not as expected)."""
    head = format_fields(ge_model._head(graph_name))
    closing = "}\n"  # the graph is the model's last field and its ops the graph's last: they go before it
    text = [head[:-len(closing)]]
    json_ops = []  # type: Optional[List[str]]
    ops = []  # type: List[HandedOp]
    forms = _Forms(input_descs)
    try:
        for order, node in enumerate(nodes):
            if json_ops is not None and not order % 1024 and 3 * sum(map(len, text)) > MAX_JSON_CHARS:
                json_ops = None  # its JSON form is not kept: not made (bounded memory)
            no_task, originals, name, op_type = node.no_task, node.original_names, node.name, node.type
            ops.append(HandedOp(name, no_task, None if originals is None else tuple(originals), op_type or ""))
            values = ge_model.op_strings(node)
            count = len(values)
            values.extend([t.origin[0] for t in node.outputs if t.origin is not None])
            if name and op_type and _PLAIN.match("".join(values)):
                key = (ge_model.op_shape(node, no_task, order), _desc_keys(node.inputs) if input_descs else None,
                       _desc_keys(node.outputs))
                text_form, json_form = forms.whole(key, node)
                if order:
                    values.insert(count, order)
                values = tuple(values)
                text.append(text_form % values)
                if json_ops is not None:
                    json_ops.append(json_form % values)
                continue
            text.append(_OP_OPEN + forms.op_texts.text(node, order))
            if input_descs:
                text.extend(forms.desc_texts.text(tensor, False) for tensor in node.inputs)
            text.extend(forms.desc_texts.text(tensor, True) for tensor in node.outputs)
            text.append(_OP_END)
            json_ops = _json_op(json_ops, forms, node, no_task, order)
    finally:
        forget_entry_texts()
    text.append(closing)
    whole = "".join(text)
    if not json_ops or 3 * len(whole) > MAX_JSON_CHARS:
        return whole, None, ops
    before, after = graph_json._document(graph_name)
    return whole, before + "".join(json_ops) + after + "\n", ops


def _json_op(out: Optional[List[str]], forms: _Forms, node: Any, no_task: bool, order: int) -> Optional[List[str]]:
    """``out`` with the op's JSON appended by graph_json's own per-op path (None: not made)."""
    if out is None or not node.name or not node.type:  # (the JSON leaves an empty string out)
        return None
    if order:
        out.append(graph_json._OP_SEPARATOR)
    out.append(forms.op_json.text(node, no_task, order))
    if forms.input_descs and node.inputs:
        forms.desc_json.put_field(out, "input_desc", node.inputs, False)
    if node.outputs:
        forms.desc_json.put_field(out, "output_desc", node.outputs, True)
    out.append(graph_json._OP_CLOSING)
    return out


def text_and_handover(graph_name: str, nodes: Sequence[Any], input_descs: bool
                      ) -> Tuple[str, Optional[Tuple[Optional[str], List[HandedOp]]]]:
    """(the Build graph text, (its JSON form, ops) for :func:`.ge_handover.note_graph`, or None):
    :func:`graph_forms`, or where a printed form is not as expected the text printed in parts
    (which raises when its own form is the one not as expected) and nothing handed over, with a
    warning: the bundle writer then reads the file, as after graph_json.hand_over_graph_json's."""
    try:
        text, json_text, ops = graph_forms(graph_name, nodes, input_descs)
    except ValueError as exc:
        text = ge_model.graph_text(graph_name, nodes, input_descs)
        _LOG.warning("Build graph %s: its JSON form and ops are not handed over (%s); they are read from the file",
                     graph_name, exc)
        return text, None
    return text, (json_text, ops)
