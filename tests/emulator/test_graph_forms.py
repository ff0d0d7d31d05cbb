"""The Build graph's text and JSON form made in one pass (graph_forms) are ge_model.graph_text's
and graph_json's, byte for byte, and its ops the ones graph_json hands over: hand-made nodes of
every kind (repeated cells whose whole-op form is reused, names that need escapes, an op the JSON
leaves out), both desc settings. Pure Python, no TensorFlow."""
import logging

import pytest

from npu_dump_hook.emulator import ge_model, graph_forms, graph_json
from npu_dump_hook.emulator.npu_graph import NpuNode

from .test_ge_model_text import _nodes, _odd_nodes


@pytest.mark.parametrize("input_descs", [False, True])
@pytest.mark.parametrize("make", [_nodes, _odd_nodes, lambda: _nodes()[:3] + [NpuNode("untyped", "", "", [], [], [])]])
def test_one_pass_makes_both_forms_and_the_ops_as_before(input_descs, make):
    nodes = make()
    text, json_text, ops = graph_forms.graph_forms("ge_default_20260101000000_1", nodes, input_descs)
    assert text == ge_model.graph_text("ge_default_20260101000000_1", nodes, input_descs)
    before_json, before_ops = graph_json._graph_json_and_ops("ge_default_20260101000000_1", nodes, input_descs)
    assert json_text == before_json and ops == before_ops and len(ops) == len(nodes)


def test_the_whole_op_form_is_made_once_per_layout():
    """The unrolled cells' MatMul ops share one whole-op form: the per-op path is not taken for them."""
    nodes = _nodes()
    forms = graph_forms._Forms(False)
    cells = [node for node in nodes if node.name.startswith("rnn/cell_")]
    keys = {(ge_model.op_shape(node, node.no_task, 5), None, graph_forms._desc_keys(node.outputs)) for node in cells}
    assert len(cells) == 3 and len(keys) == 1
    text_form, json_form = forms.whole(keys.pop(), cells[0])
    values = tuple(ge_model.op_strings(cells[2])) + (5, cells[2].name)
    assert text_form % values == "  op {\n" + ge_model._OpTexts().text(cells[2], 5) + "".join(
        ge_model._DescTexts().text(t, True) for t in cells[2].outputs) + "  }\n"
    assert '"name": "rnn/cell_2/MatMul"' in json_form % values


def test_no_nodes_and_a_json_form_over_the_cap_hand_the_ops_only(monkeypatch):
    assert graph_forms.graph_forms("g", []) == (ge_model.graph_text("g", []), None, [])
    nodes = _nodes()
    text = ge_model.graph_text("g", nodes)
    monkeypatch.setattr(graph_forms, "MAX_JSON_CHARS", 3 * len(text))
    assert graph_forms.graph_forms("g", nodes)[1] is not None  # at the cap: made
    monkeypatch.setattr(graph_forms, "MAX_JSON_CHARS", 3 * len(text) - 1)
    found, json_text, ops = graph_forms.graph_forms("g", nodes)
    assert found == text and json_text is None and len(ops) == len(nodes)


def test_a_json_form_not_as_expected_gives_the_text_and_hands_nothing_over(monkeypatch, caplog):
    nodes = _nodes()
    monkeypatch.setattr(graph_json, "item_json", lambda message, depth, level: "{}")
    with caplog.at_level(logging.WARNING):
        text, handed = graph_forms.text_and_handover("g", nodes, False)
    assert text == ge_model.graph_text("g", nodes) and handed is None
    assert "not handed over" in caplog.text
