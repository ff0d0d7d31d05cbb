"""The Build graph text printed in parts (ge_model.graph_text: each distinct tensor desc printed
once, the origin name put in) is the text of the whole ModelDef printed by protobuf reflection
(model_text(build_model(...))), byte for byte; its msaccucmp JSON form made from the nodes
(graph_json) is the converter's output for that text. Pure Python: hand-made nodes, no TensorFlow."""
import pytest

from npu_dump_hook.bundle.describe import graph_ops
from npu_dump_hook.emulator import ge_model, graph_json, layout
from npu_dump_hook.emulator.npu_graph import NodeTensor, NpuNode, Value
from npu_dump_hook.formats import ge_handover, ge_json, ge_text
from npu_dump_hook.locate import graphs as locate_graphs

ND = layout.Held("float32", "ND", "ND")
HALF_5HD = layout.Held("float16", "NC1HWC0", "NHWC")
HALF_NZ = layout.Held("float16", "FRACTAL_NZ", "ND")


def _out(node, index, shape, held=ND, dtype="float32", origin=True):
    return NodeTensor("{}:{}".format(node, index), Value(node + ":" + str(index), shape, held), dtype,
                      (node, index) if origin else None)


def _in(source, shape, held=ND, dtype="float32"):
    return NodeTensor(source, Value(source, shape, held), dtype)


def _nodes():
    """Ops of every kind, repeated descs under different origin names (an unrolled cell's), names
    that need escapes, unknown and scalar shapes, device formats, control inputs."""
    nodes = [NpuNode("x", "Data", "Placeholder", [], [], [_out("x", 0, (4, 8, 8, 3))]),
             NpuNode("k", "Const", "Const", [], [], [_out("k", 0, ())]),
             NpuNode("it", "IteratorV2", "IteratorV2", [], [], [_out("it", 0, None, dtype="resource")])]
    for step in range(3):
        name = "rnn/cell_{}/MatMul".format(step)
        nodes.append(NpuNode(name, "MatMulV2", "MatMul", [_in("x:0", (4, 320), HALF_NZ, "float16"), _in("k:0", ())],
                             ["it"], [_out(name, 0, (4, 320), HALF_NZ), _out(name, 1, None, origin=False)]))
    nodes.append(NpuNode('odd "name\\ é\t', "Relu", "Relu", [_in("x:0", (4, 8, 8, 3))], [],
                         [_out('odd "name\\ é\t', 0, (4, 8, 8, 3), HALF_5HD, "float16")]))
    nodes.append(NpuNode("fused/BiasAdd", "MatMulV2", "MatMul", [_in("x:0", None)], ["k", "k"],
                         [_out("fused/BiasAdd", 0, (2, 2))], kind="fused",
                         original_names=["fused/MatMul", "fused/BiasAdd"], original_types=["MatMul", "BiasAdd"]))
    nodes.append(NpuNode("trans_Cast_1", "Cast", "Cast", [_in("x:0", (4, 8, 8, 3))], [],
                         [_out("trans_Cast_1", 0, (4, 8, 8, 3), origin=False)], kind="trans",
                         original_names=[""], original_types=[""]))
    nodes.append(NpuNode("w/Apply", "ApplyGradientDescent", "ResourceApplyGradientDescent",
                         [_in("w:0", (2, 2)), _in("lr:0", ())], [], [_out("w/Apply", 0, (2, 2))], kind="update"))
    return nodes


@pytest.mark.parametrize("input_descs", [False, True])
@pytest.mark.parametrize("make", ["_nodes", "_odd_nodes"])
def test_graph_text_is_the_model_printed_whole(input_descs, make):
    nodes = globals()[make]()
    whole = ge_model.model_text(ge_model.build_model("ge_default_20260101000000_1", nodes, input_descs))
    parts = ge_model.graph_text("ge_default_20260101000000_1", nodes, input_descs)
    assert parts == whole
    assert parts.count("output_desc {") == sum(len(n.outputs) for n in nodes)
    assert parts.count('"rnn/cell_2/MatMul"') == 2  # its name and its output's origin: the kept desc got it
    assert not ge_text._ENTRY_TEXTS  # the kept map entries are dropped with the graph


def test_graph_text_of_no_nodes():
    assert ge_model.graph_text("g", []) == ge_model.model_text(ge_model.build_model("g", []))


def _converted(tmp_path, text):
    """(path, the converter's JSON) of graph ``text`` written to a file nobody noted."""
    path = str(tmp_path / "ge_proto_00000000_Build.txt")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    ge_handover.forget_graphs()
    ge_json.write_msaccucmp_json(path, path + ".json")
    with open(path + ".json", encoding="utf-8") as handle:
        return path, handle.read()


def _odd_nodes():
    """_nodes with names the batched escape must not take (a backslash-u text, a NUL), one it
    takes (quote, non-ASCII, tab), an op with no outputs and one of no originals' types."""
    nodes = _nodes()
    nodes.append(NpuNode("lit\\u0000eral", "Relu", "Relu", [_in("x:0", None)], ["lit\\u0000eral"],
                         [_out("lit\\u0000eral", 0, (1,))]))
    nodes.append(NpuNode("nul\x00name", "NoOp", "NoOp", [], ["x", "nul\x00name"], []))
    nodes.append(NpuNode("quote\"é'\ttab", "Relu", "Relu", [_in("x:0", (1,))], ["x"],
                         [_out("quote\"é'\ttab", 0, (1,))]))  # escaped, in one call for all its strings
    nodes.append(NpuNode("f2/Add", "Add", "Add", [_in("x:0", (1,))], [], [_out("f2/Add", 0, (1,))], kind="fused",
                         original_names=["f2/Add"], original_types=None))
    return nodes


@pytest.mark.parametrize("input_descs", [False, True])
@pytest.mark.parametrize("make", [_nodes, _odd_nodes])
def test_graph_json_is_the_converted_text_and_ops_the_scanned(tmp_path, input_descs, make):
    """The JSON form made from the nodes is the converter's output for the text, byte for byte;
    the handed ops give the bundle's op scan what scanning the text gives."""
    nodes = make()
    path, converted = _converted(tmp_path, ge_model.graph_text("ge_default_20260101000000_1", nodes, input_descs))
    assert graph_json.graph_json("ge_default_20260101000000_1", nodes, input_descs) == converted
    graph_json.hand_over_graph_json(path, "ge_default_20260101000000_1", nodes, input_descs)
    handed = ge_handover.handed_ops(path)
    assert len(handed) == len(nodes) and ge_handover.handed_json(path) == converted
    for layers in ((), ("fused/MatMul", "rnn/cell_1/MatMul", "k")):
        assert graph_ops(path, layers, handed) == graph_ops(path, layers)
    _assert_graph_choice_reads_the_handed_graph(path)


def _assert_graph_choice_reads_the_handed_graph(path):
    """The Build graph choice's facts (locate.graphs) from the handed graph name and ops are the
    scanned file's; then the notes are forgotten."""
    assert ge_handover.handed_graph(path) is not None
    handed = locate_graphs._scan_graph(path)
    ge_handover.forget_graphs()
    assert ge_handover.handed_graph(path) is None
    assert handed == locate_graphs._scan_graph(path)


def test_graph_json_declines_what_it_does_not_make(tmp_path):
    """No nodes, or an op without a type (the JSON leaves it out): None, and the text is converted;
    the ops are still handed over."""
    assert graph_json.graph_json("g", []) is None
    nodes = _nodes()[:3] + [NpuNode("untyped", "", "", [], [], [])]
    path, converted = _converted(tmp_path, ge_model.graph_text("g", nodes))
    assert graph_json.graph_json("g", nodes) is None
    graph_json.hand_over_graph_json(path, "g", nodes)
    assert ge_handover.handed_json(path) is None and len(ge_handover.handed_ops(path)) == 4
    ge_json.write_msaccucmp_json(path, path + ".again")
    with open(path + ".again", encoding="utf-8") as handle:
        assert handle.read() == converted
    _assert_graph_choice_reads_the_handed_graph(path)


def test_a_graph_whose_json_would_be_over_the_cap_hands_its_ops_only(tmp_path):
    nodes = _nodes()
    text = ge_model.graph_text("g", nodes)
    path, _converted_json = _converted(tmp_path, text)
    graph_json.hand_over_graph_json(path, "g", nodes, False, ge_handover.MAX_JSON_CHARS // 3 + 1)
    assert ge_handover.handed_json(path) is None and len(ge_handover.handed_ops(path)) == len(nodes)
    graph_json.hand_over_graph_json(path, "g", nodes, False, len(text))
    assert ge_handover.handed_json(path) is not None
    ge_handover.forget_graphs()


def test_a_form_not_as_expected_hands_nothing_over(tmp_path, monkeypatch, caplog):
    """A marked op printed otherwise than expected (a layout this module does not know) is not
    guessed at: nothing is handed over, with a warning, and the bundle writer reads the file."""
    nodes = _nodes()
    path, _json_text = _converted(tmp_path, ge_model.graph_text("g", nodes))
    monkeypatch.setattr(graph_json, "item_json", lambda message, depth, level: "{}")
    graph_json.hand_over_graph_json(path, "g", nodes)
    assert ge_handover.handed_json(path) is None and ge_handover.handed_ops(path) is None
    assert "not handed over" in caplog.text
