"""ge_graph: streaming scan (fast + general path), full parse, msaccucmp JSON, text writer."""
import json
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.errors import GraphFormatError
from npu_dump_hook.formats import ge_graph, ge_ir_schema
from npu_dump_hook.formats.ge_graph import GraphSummary, OpSummary, OutputOrigin

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data", "formats", "ge")
GOLDEN = os.path.join(DATA, "ge_proto_00000007_graph_1_Build.txt")
SPLIT_NAME = 'net/split "q{" \u65e5'

# Written by hand from the golden file.
EXPECTED = [
    GraphSummary("ge_default_20240613143502_1", [
        OpSummary("atomic_addr_clean0_71", "AtomicAddrClean", 1, (), False, None, ()),
        OpSummary("IteratorV2", "Data", 2, (), True, None, (OutputOrigin(None, None),)),
        OpSummary("net/conv1/Conv2D", "Conv2D", 3,
                  ("IteratorV2:0", "net/conv1/w:0", "atomic_addr_clean0_71:-1"), False,
                  ("net/conv1/Conv2D", "net/conv1/BiasAdd", "net/conv1/Relu"),
                  (OutputOrigin("net/conv1/Relu", 0),)),
        OpSummary("trans_TransData_4", "TransData", 4, ("net/conv1/Conv2D:0",), False, ("",),
                  (OutputOrigin(None, None),)),
        OpSummary(SPLIT_NAME, "SplitD", 5, ("trans_TransData_4:0",), False, None,
                  (OutputOrigin(SPLIT_NAME, 1), OutputOrigin(None, 2))),
    ]),
    GraphSummary("sub_graph_1", [
        OpSummary("sub/Add", "Add", 6, ("sub/x:0", "sub/y:0"), False, None, ()),
    ]),
]


def golden_bytes():
    with open(GOLDEN, "rb") as handle:
        return handle.read()


def write(tmp_path, data, name="ge_proto_00001_Build.txt"):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def summaries_from_model(model):
    """The scan result computed independently from the fully parsed message."""
    graphs = []
    for graph in model.graph:
        ops = []
        for op in graph.op:
            names = None
            if "_datadump_original_op_names" in op.attr:
                names = tuple(s.decode() for s in op.attr["_datadump_original_op_names"].list.s)
            no_task = op.attr["_no_task"].b if "_no_task" in op.attr else False
            outputs = []
            for desc in op.output_desc:
                name = index = None
                if "_datadump_origin_name" in desc.attr:
                    name = desc.attr["_datadump_origin_name"].s.decode()
                if "_datadump_origin_output_index" in desc.attr:
                    index = desc.attr["_datadump_origin_output_index"].i
                outputs.append(OutputOrigin(name, index))
            ops.append(OpSummary(op.name, op.type, op.id, tuple(op.input), no_task, names,
                                 tuple(outputs)))
        graphs.append(GraphSummary(graph.name, ops))
    return graphs


# ---------------------------------------------------------------- scanning


def test_scan_golden_matches_hand_written_expectation():
    assert ge_graph.scan_graph(GOLDEN) == EXPECTED


def test_golden_ops_all_take_the_fast_path():
    data = golden_bytes()
    starts = [m.start() + 3 for m in re.finditer(rb"\n  op \{\n", data)]
    assert len(starts) == 6
    fast = ge_graph._FastOps(data, GOLDEN)
    ops, end = fast.ops_at(starts[0])  # one batch: the ops of graph[0]
    assert ops == EXPECTED[0].ops and data[end:end + 2] == b"}\n"
    ops, end = fast.ops_at(starts[5])
    assert ops == EXPECTED[1].ops and data[end:] == b"}\n"


def test_fast_and_general_paths_agree_on_golden():
    data = golden_bytes()
    fast = list(ge_graph._scan_graphs(data, GOLDEN, True))
    general = list(ge_graph._scan_graphs(data, GOLDEN, False))
    assert fast == general == EXPECTED


def test_scanner_agrees_with_full_parse_on_every_op():
    model = ge_graph.parse_model(GOLDEN, allow_unknown=False)
    assert summaries_from_model(model) == ge_graph.scan_graph(GOLDEN)


def test_iter_graphs_is_lazy_and_ordered():
    graphs = ge_graph.iter_graphs(GOLDEN)
    assert next(graphs).name == "ge_default_20240613143502_1"
    assert next(graphs).name == "sub_graph_1"
    assert next(graphs, None) is None


@pytest.mark.parametrize("layout", ["one_line", "four_spaces", "tabs_comments_angles"])
def test_non_canonical_layouts_give_the_same_summary(tmp_path, layout):
    text = golden_bytes().decode("utf-8")
    if layout == "one_line":
        text = " ".join(line.strip() for line in text.splitlines())
    elif layout == "four_spaces":
        text = re.sub(r"(?m)^( +)", lambda m: m.group(1) * 2, text)
    else:
        text = text.replace("      shape {\n        dim: 8\n        dim: 4\n      }",
                            "      shape: <\n        dim: 8\n        dim: 4\n      >", 1)
        text = "# a comment line\n" + re.sub(r"(?m)^( +)", lambda m: "\t" * len(m.group(1)),
                                              text)
        text = text.replace('type: "Add"', 'type: "Add";  # trailing comment')
        assert text.count(">") == 1
    assert ge_graph.scan_graph(write(tmp_path, text)) == EXPECTED


def test_list_syntax_and_string_concatenation(tmp_path):
    text = ('graph { name: "g" op { name: "a" "b" type: \'T\' input: ["x:0", "y:1"] '
            'attr { value { list { s: ["p", "q"] } } key: "_datadump_original_op_names" } '
            'output_desc: [{ attr { key: "_datadump_origin_output_index" value { i: 0x3 } } }, '
            '{ }] id: 9 } }\n')
    expected = [GraphSummary("g", [OpSummary("ab", "T", 9, ("x:0", "y:1"), False, ("p", "q"),
                                             (OutputOrigin(None, 3), OutputOrigin(None, None)))])]
    assert ge_graph.scan_graph(write(tmp_path, text)) == expected


def test_empty_file_has_no_graphs(tmp_path):
    assert ge_graph.scan_graph(write(tmp_path, b"")) == []


def test_unknown_fields_are_skipped_by_the_scanner(tmp_path):
    text = golden_bytes().replace(b"    id: 3\n", b"    id: 3\n    future_block {\n      op {\n"
                                  b'        name: "not an op"\n      }\n    }\n    future: 1\n')
    assert ge_graph.scan_graph(write(tmp_path, text)) == EXPECTED


def test_op_outside_a_graph_is_not_taken_for_a_graph_op(tmp_path):
    # An indented `op {` under a model-level attr is not an op of any graph.
    text = (b'attr {\n  key: "x"\n  value {\n    g {\n      name: "inner"\n    }\n  }\n}\n'
            + golden_bytes())
    assert ge_graph.scan_graph(write(tmp_path, text)) == EXPECTED
    odd = b'attr_groups {\n  op {\n    name: "zz"\n  }\n}\n' + golden_bytes()
    assert ge_graph.scan_graph(write(tmp_path, odd, "odd.txt")) == EXPECTED


def test_first_graph_name_op_types_contains_op_type():
    assert ge_graph.first_graph_name(GOLDEN) == "ge_default_20240613143502_1"
    assert ge_graph.op_types(GOLDEN) == {"AtomicAddrClean": 1, "Data": 1, "Conv2D": 1,
                                         "TransData": 1, "SplitD": 1, "Add": 1}
    assert ge_graph.contains_op_type(GOLDEN, ["IteratorV2", "Add"])
    assert not ge_graph.contains_op_type(GOLDEN, ["IteratorGetNext"])


def test_first_graph_name_reads_only_the_start(tmp_path):
    text = golden_bytes() + b"graph { op { name: @@@ broken"
    assert ge_graph.first_graph_name(write(tmp_path, text)) == "ge_default_20240613143502_1"
    with pytest.raises(GraphFormatError, match="no graph"):
        ge_graph.first_graph_name(write(tmp_path, b'name: "model"\n', "empty.txt"))


# ---------------------------------------------------------------- malformed input


def _error(tmp_path, data):
    path = write(tmp_path, data)
    with pytest.raises(GraphFormatError) as info:
        ge_graph.scan_graph(path)
    assert info.value.path == path
    assert path in str(info.value)
    return info.value


def test_truncated_file_is_reported_at_its_end(tmp_path):
    data = golden_bytes()
    cut = data.index(b"    output_desc {", data.index(b"net/conv1/Conv2D"))
    error = _error(tmp_path, data[:cut])
    assert error.offset == cut
    assert error.rule == "end of file inside block 'op'"
    error = _error(tmp_path, data[:cut + 10])  # mid-line: "output" without a value
    assert error.offset == cut + 10
    assert "after field 'output'" in error.rule


def test_unbalanced_closing_brace(tmp_path):
    data = golden_bytes() + b"}\n"
    error = _error(tmp_path, data)
    assert error.offset == len(data) - 2
    assert "unbalanced" in error.rule


def test_garbage_character(tmp_path):
    data = golden_bytes().replace(b'  name: "sub_graph_1"\n', b'  name: "sub_graph_1"\n  @oops\n')
    error = _error(tmp_path, data)
    assert error.offset == data.index(b"@oops")
    assert "unexpected character" in error.rule


def test_garbage_anywhere_in_an_op_is_reported(tmp_path):
    # Also in parts of an op the scanner does not extract anything from.
    data = golden_bytes().replace(b"    id: 4\n", b"    id: 4\n    @oops\n")
    error = _error(tmp_path, data)
    assert error.offset == data.index(b"@oops")
    assert "unexpected character" in error.rule
    with pytest.raises(GraphFormatError) as info:
        ge_graph.parse_model(write(tmp_path, data))
    assert data.index(b"@oops") - 4 <= info.value.offset <= data.index(b"@oops")
    data = golden_bytes().replace(b"          i: 0\n", b"          i: 0 i\n")
    error = _error(tmp_path, data)
    assert error.rule == "expected ':' and a value or '{' after field 'i'"
    assert error.offset == data.index(b" i\n") + 3 + data[data.index(b" i\n") + 3:].index(b"}")


def test_missing_colon(tmp_path):
    data = golden_bytes().replace(b'    type: "SplitD"', b'    type "SplitD"')
    error = _error(tmp_path, data)
    assert error.offset == data.index(b'"SplitD"')
    assert "expected ':'" in error.rule


def test_invalid_escape_offset_points_at_the_backslash(tmp_path):
    data = golden_bytes().replace(b'name: "sub/Add"', b'name: "sub/\\qAdd"')
    error = _error(tmp_path, data)
    assert error.offset == data.index(b"\\qAdd")
    assert "invalid escape \\q" in error.rule


def test_bad_integer_id(tmp_path):
    data = golden_bytes().replace(b"    id: 5\n", b"    id: five\n")
    error = _error(tmp_path, data)
    assert error.offset == data.index(b"five")
    assert "expected an integer" in error.rule


def test_bad_bool_and_wrong_origin_types(tmp_path):
    data = golden_bytes().replace(b"        b: true\n", b"        b: maybe\n")
    assert _error(tmp_path, data).offset == data.index(b"maybe")
    entry = b'key: "_datadump_origin_name"\n        value {\n          '
    data = golden_bytes().replace(entry + b's: "net/conv1/Relu"', entry + b"i: 7")
    error = _error(tmp_path, data)
    assert error.offset == data.index(b"i: 7")
    assert error.rule == "_datadump_origin_name must be a string"
    data = golden_bytes().replace(b"          i: 2\n", b'          s: "2"\n')
    error = _error(tmp_path, data)
    assert error.offset == data.index(b's: "2"')
    assert error.rule == "_datadump_origin_output_index must be an integer"


def test_unterminated_string(tmp_path):
    data = golden_bytes().replace(b'    name: "sub/Add"', b'    name: "sub/Add')
    error = _error(tmp_path, data)
    assert error.offset == data.index(b'"sub/Add')


def test_nesting_bomb_is_refused(tmp_path):
    data = b"graph { " + b"attr { " * 150
    error = _error(tmp_path, data)
    assert "nested deeper than 100" in error.rule


# ---------------------------------------------------------------- full parse


def test_parse_model_reads_the_golden_file():
    model = ge_graph.parse_model(GOLDEN, allow_unknown=False)
    conv = model.graph[0].op[2]
    assert conv.stream_id == 1
    assert conv.output_desc[0].dtype == 2  # DT_FLOAT16
    assert list(conv.output_desc[0].shape.dim) == [8, 1, 4, 4, 16]
    assert conv.output_desc[0].size == 2048
    assert conv.attr["_sgt_json_info"].s == b'{"thread": "a}b", "x": "\\\\"}\n  }\n'
    assert abs(conv.attr["alpha"].f - 0.2) < 1e-7


def test_unknown_fields_tolerated_by_default_and_refused_when_strict(tmp_path):
    data = golden_bytes().replace(b"    id: 3\n", b"    id: 3\n    future_field: 7\n"
                                  b"    future_block {\n      x: \"y\"\n    }\n")
    path = write(tmp_path, data)
    model = ge_graph.parse_model(path)
    assert model.graph[0].op[2].id == 3
    with pytest.raises(GraphFormatError) as info:
        ge_graph.parse_model(path, allow_unknown=False)
    assert "future_field" in info.value.rule
    line_start = data.index(b"    future_field")
    assert line_start <= info.value.offset <= line_start + len(b"    future_field")


def test_parse_model_error_offsets(tmp_path):
    data = golden_bytes().replace(b"    id: 6\n", b"    id: six\n")
    with pytest.raises(GraphFormatError) as info:
        ge_graph.parse_model(write(tmp_path, data))
    assert data.index(b"six") - 8 <= info.value.offset <= data.index(b"six")
    with pytest.raises(GraphFormatError) as info:
        ge_graph.parse_model(write(tmp_path, b'graph { name: "\xff" }', "bad.txt"))
    assert info.value.offset == 15 and "UTF-8" in info.value.rule


# ---------------------------------------------------------------- msaccucmp JSON


def test_msaccucmp_json_of_golden_op():
    document = ge_graph.to_msaccucmp_json(GOLDEN)
    assert [g["name"] for g in document["graph"]] == ["ge_default_20240613143502_1",
                                                     "sub_graph_1"]
    conv = document["graph"][0]["op"][2]
    assert conv == {
        "name": "net/conv1/Conv2D",
        "type": "Conv2D",
        "input": ["IteratorV2:0", "net/conv1/w:0", "atomic_addr_clean0_71:-1"],
        "attr": [
            {"key": "_datadump_original_op_names",
             "value": {"list": {"s": ["net/conv1/Conv2D", "net/conv1/BiasAdd",
                                      "net/conv1/Relu"], "val_type": "VT_LIST_STRING"}}},
            {"key": "_no_task", "value": {"b": False}},
            {"key": "_sgt_json_info",
             "value": {"s": '{\\"thread\\": \\"a}b\\", \\"x\\": \\"\\\\\\\\\\"}\\n  }\\n'}},
            {"key": "alpha", "value": {"f": "0.2"}},
        ],
        "id": 3,
        "stream_id": 1,
        "input_desc": [{"dtype": "DT_FLOAT", "shape": {"dim": [8, 4]}, "layout": "ND",
                        "attr": [{"key": "_datadump_origin_name",
                                  "value": {"s": "must/not/be/read"}}]}],
        "output_desc": [{
            "dtype": "DT_FLOAT16", "shape": {"dim": [8, 1, 4, 4, 16]}, "layout": "NC1HWC0",
            "attr": [
                {"key": "_datadump_origin_format", "value": {"s": "NHWC"}},
                {"key": "_datadump_origin_name", "value": {"s": "net/conv1/Relu"}},
                {"key": "_datadump_origin_output_index", "value": {"i": 0}},
                {"key": "origin_shape", "value": {"list": {"i": [8, 4, 4, 3],
                                                           "val_type": "VT_LIST_INT"}}},
            ]}],  # "size" is on atc's black list
    }
    split = document["graph"][0]["op"][4]
    # A single bytes field is C-escaped (octal for non-ASCII) as atc does.
    assert split["output_desc"][0]["attr"][0]["value"]["s"] == (
        'net/split \\"q{\\" \\346\\227\\245')
    assert split["name"] == SPLIT_NAME  # string fields are kept as they are
    assert document["graph"][0]["op"][0] == {
        "name": "atomic_addr_clean0_71", "type": "AtomicAddrClean",
        "attr": [{"key": "_fe_imply_type", "value": {"i": 6}}], "id": 1}


def test_msaccucmp_json_edge_rules():
    model = ge_ir_schema.ModelDef()
    graph = model.graph.add(name="g")
    graph.output.append("dropped:0")  # GraphDef.output is black-listed
    op = graph.op.add(name="n", type="T")
    op.attr["big"].f = 1234567.0  # "%g" is "1.23457e+06", 11 chars: atc keeps the number
    op.attr["neg"].f = -0.5
    op.attr["zero"].i = 0  # a oneof member set to 0 is present
    op.attr["bt"].bt = b"\x00\x01"  # black-listed inside AttrDef
    op.attr["fl"].list.f.extend([0.5, 2.0])  # repeated floats stay numbers
    op.output_desc.add(size=16)  # only black-listed content: null, as atc writes it
    op.output_desc.add()  # empty: null
    op.input_desc.add(dtype=99)
    document = ge_graph.to_msaccucmp_json(model)
    assert document == {"graph": [{"name": "g", "op": [{
        "name": "n", "type": "T",
        "attr": [{"key": "big", "value": {"f": 1234567.0}},
                 {"key": "bt", "value": None},
                 {"key": "fl", "value": {"list": {"f": [0.5, 2.0]}}},
                 {"key": "neg", "value": {"f": "-0.5"}},
                 {"key": "zero", "value": {"i": 0}}],
        "input_desc": [{"dtype": "UNKNOWN_ENUM_VALUE_DataType_99"}],
        "output_desc": [None, None]}]}]}


def test_write_msaccucmp_json(tmp_path):
    out = tmp_path / "graph.json"
    ge_graph.write_msaccucmp_json(GOLDEN, str(out))
    with open(str(out), encoding="utf-8") as handle:
        assert json.load(handle) == ge_graph.to_msaccucmp_json(GOLDEN)
    assert not os.path.exists(str(out) + ".tmp")


# ---------------------------------------------------------------- writer and builders


def test_format_model_reproduces_the_hand_written_golden_text():
    model = ge_graph.parse_model(GOLDEN, allow_unknown=False)
    assert ge_graph.format_model(model) == golden_bytes().decode("ascii")


def test_format_float_like_cplusplus():
    op = ge_ir_schema.OpDef(name="f")
    for key, value in (("a", 1.0), ("b", 1e-05), ("c", 0.1), ("d", 16777217.0),
                       ("e", float("inf")), ("g", -0.0), ("h", 3.4028234663852886e38)):
        op.attr[key].f = value
    text = ge_graph.format_model(ge_ir_schema.ModelDef(graph=[ge_ir_schema.GraphDef(op=[op])]))
    found = re.findall(r'key: "(\w)"\n +value \{\n +f: (\S+)', text)
    assert found == [("a", "1"), ("b", "1e-05"), ("c", "0.1"), ("d", "16777216"),
                     ("e", "inf"), ("g", "-0"), ("h", "3.40282347e+38")]


def test_builders_and_writer_round_trip(tmp_path):
    desc = ge_graph.make_tensor_desc("DT_FLOAT16", [1, 1, 2, 2, 16], "NC1HWC0",
                                     origin_format="NHWC", origin_shape=[1, 2, 2, 3],
                                     origin_dtype="DT_FLOAT", origin_name="tf/Relu",
                                     origin_output_index=0)
    attrs = desc.attr
    assert attrs["format_for_int"].i == 3 and attrs["origin_format_for_int"].i == 1
    assert attrs["origin_format"].s == b"NHWC" and attrs["origin_data_type"].s == b"DT_FLOAT"
    assert list(attrs["origin_shape"].list.i) == [1, 2, 2, 3]
    assert attrs["origin_shape"].list.val_type == 2  # VT_LIST_INT
    assert attrs["origin_shape_initialized"].b is True
    assert attrs["_datadump_origin_name"].s == b"tf/Relu"
    assert attrs["_datadump_origin_format"].s == b"NHWC"
    assert attrs["_datadump_origin_data_type"].s == b"DT_FLOAT"
    op = ge_graph.make_op("fused", "Conv2D", 7, ["x:0", "c:-1"], [desc], [desc],
                          original_op_names=["tf/Conv2D", "tf/Relu"], no_task=False,
                          attrs={"_fe_imply_type": 6, "flags": [True, False],
                                 "names": ["a"], "alpha": 0.5})
    assert op.attr["_datadump_original_op_names"].list.val_type == 1  # VT_LIST_STRING
    assert list(op.attr["flags"].list.b) == [True, False]
    model = ge_graph.make_model([("ge_default_1", [op]), ("sub", [])])
    path = str(tmp_path / "ge_proto_00000001_graph_1_Build.txt")
    ge_graph.write_graph_text(path, model)
    assert ge_graph.scan_graph(path) == [
        GraphSummary("ge_default_1", [OpSummary("fused", "Conv2D", 7, ("x:0", "c:-1"), False,
                                                ("tf/Conv2D", "tf/Relu"),
                                                (OutputOrigin("tf/Relu", 0),))]),
        GraphSummary("sub", [])]
    assert ge_graph.parse_model(path, allow_unknown=False) == model
    with pytest.raises(TypeError):
        ge_graph.set_attr(op.attr, "bad", [1, "x"])


_NAME_CHARS = st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FFF)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(names=st.lists(st.text(_NAME_CHARS, max_size=12), min_size=1, max_size=4),
       index=st.integers(-5, 2 ** 40), no_task=st.booleans(), op_id=st.integers(0, 2 ** 40))
def test_random_names_agree_across_writer_scanner_and_full_parse(names, index, no_task, op_id):
    desc = ge_graph.make_tensor_desc("DT_FLOAT", [2], "ND", origin_name=names[0],
                                     origin_output_index=index)
    ops = [ge_graph.make_op(name, "T" + name, op_id, inputs=[name + ":0"], output_descs=[desc],
                            original_op_names=names, no_task=no_task) for name in names]
    model = ge_graph.make_model([(names[-1], ops)])
    data = ge_graph.format_model(model).encode("ascii")
    fast = list(ge_graph._scan_graphs(data, "mem", True))
    general = list(ge_graph._scan_graphs(data, "mem", False))
    parsed = ge_graph.parse_model_text(data, allow_unknown=False)
    assert fast == general == summaries_from_model(parsed) == summaries_from_model(model)
    assert fast[0].ops[0].outputs == (OutputOrigin(names[0], index),)


# ---------------------------------------------------------------- non-canonical layouts (exactness)
#
# Each test compares the scanner with the full protobuf parse and with the general
# (tokenizer-only) path, on text that is valid but not laid out as C++ TextFormat writes it.


def _expected(data):
    return summaries_from_model(ge_graph.parse_model_text(data))


def _general(data):
    return list(ge_graph._scan_graphs(data, "mem", False))


def _fast(data):
    return list(ge_graph._scan_graphs(data, "mem", True))


def _assert_exact(tmp_path, data, name="ge_proto_00001_Build.txt"):
    expected = _expected(data)
    scanned = ge_graph.scan_graph(write(tmp_path, data, name))
    assert [len(g.ops) for g in scanned] == [len(g.ops) for g in expected]
    assert [op.name for g in scanned for op in g.ops] == [op.name for g in expected for op in g.ops]
    assert scanned == expected
    assert _fast(data) == _general(data) == expected
    return scanned


def _many_ops_bytes(count=40):
    """A canonical one-graph file of ``count`` ops, every one with origins and names."""
    ops = []
    for index in range(count):
        name = "net/layer{}/conv".format(index)
        desc = ge_graph.make_tensor_desc("DT_FLOAT16", [1, 2, 3, 4, 16], "NC1HWC0",
                                         origin_name=name, origin_output_index=index % 3)
        ops.append(ge_graph.make_op(
            name, "Conv2D", index + 1, ["net/layer{}/conv:0".format(index - 1), "w:0"],
            input_descs=[desc], output_descs=[desc, desc],
            original_op_names=[name, name + "/Relu"], no_task=bool(index % 2),
            attrs={"_op_slice_info": '{"x": "a}b \\"q\\""}', "alpha": 0.5}))
    return ge_graph.format_model(ge_graph.make_model([("g_many", ops), ("sub", ops[:2])])).encode()


_OP_CLOSER_BEFORE_OP = b"\n  }\n  op {\n"


@pytest.mark.parametrize("junk", [b" ", b"\t", b"\r", b" \t \r"],
                         ids=["space", "tab", "cr", "mixed"])
def test_trailing_whitespace_on_one_op_closer_keeps_every_op(tmp_path, junk):
    for data in (golden_bytes(), _many_ops_bytes()):
        assert data.count(_OP_CLOSER_BEFORE_OP) >= 3
        bad = data.replace(_OP_CLOSER_BEFORE_OP, b"\n  }" + junk + b"\n  op {\n", 1)
        _assert_exact(tmp_path, bad)
        # the second op of the file: the one the old scanner swallowed
        second = bad.replace(_OP_CLOSER_BEFORE_OP, b"\n  }" + junk + b"\n  op {\n", 1)
        _assert_exact(tmp_path, second)


@pytest.mark.parametrize("junk", [b" ", b"\t", b"\r", b"  "], ids=["space", "tab", "cr", "two"])
def test_trailing_whitespace_on_every_closer_keeps_every_op(tmp_path, junk):
    for data in (golden_bytes(), _many_ops_bytes()):
        every_op = data.replace(b"\n  }\n", b"\n  }" + junk + b"\n")
        assert len(_assert_exact(tmp_path, every_op)[0].ops) > 1
        # every op closer of graph[0] but the last one, or of graph[0] only (the old scanner
        # then read the whole main graph as one op: 40 -> 1)
        count = data.count(b"\n  }\n", 0, data.index(b"\n}\n"))
        all_but_last = data.replace(b"\n  }\n", b"\n  }" + junk + b"\n", count - 1)
        assert len(_assert_exact(tmp_path, all_but_last)[0].ops) > 1
        first_graph = all_but_last.replace(b"\n  }\n", b"\n  }" + junk + b"\n", 1)
        assert len(_assert_exact(tmp_path, first_graph)[0].ops) > 1
        every_block = re.sub(rb"(?m)^( *)\}$", lambda m: m.group() + junk, data)
        assert len(_assert_exact(tmp_path, every_block)[0].ops) > 1


def test_crlf_files_keep_every_op(tmp_path):
    for data in (golden_bytes(), _many_ops_bytes()):
        _assert_exact(tmp_path, data.replace(b"\n", b"\r\n"))
        # mixed: only some lines end with CRLF, or only the first half of the file
        lines = data.split(b"\n")
        mixed = b"\n".join(line + b"\r" if i % 3 == 0 else line for i, line in enumerate(lines))
        _assert_exact(tmp_path, mixed)
        half = len(lines) // 2
        _assert_exact(tmp_path, b"\r\n".join(lines[:half]) + b"\r\n" + b"\n".join(lines[half:]))


def test_comments_and_blank_lines_inside_ops(tmp_path):
    for data in (golden_bytes(), _many_ops_bytes()):
        commented = re.sub(rb"(?m)^( *)(\w+ \{)$",
                           lambda m: m.group(1) + b'# a "comment" } with { braces\n' + m.group(),
                           data)
        commented = re.sub(rb"(?m)^( *)\}$", lambda m: m.group() + b"  # } op {", commented)
        _assert_exact(tmp_path, commented)
        blank = data.replace(b" {\n", b" {\n\n").replace(b"  }\n", b"  }\n   \n")
        _assert_exact(tmp_path, blank)


def test_misindented_inner_closer_is_not_taken_for_the_op_closer(tmp_path):
    data = golden_bytes()
    alpha = b'      key: "alpha"\n      value {\n        f: 0.2\n      }\n    }\n'
    assert data.count(alpha) == 1
    bad = data.replace(alpha, alpha[:-6] + b"  }\n")  # the attr closer at op-closer indentation
    scanned = _assert_exact(tmp_path, bad)
    assert scanned == EXPECTED
    # a whole op body written at the indentation of the graph fields
    flat = re.sub(rb"(?m)^    ", b"  ", data, count=40)
    _assert_exact(tmp_path, flat)


def test_strings_with_braces_quotes_and_escapes(tmp_path):
    data = _many_ops_bytes(6)
    tricky = [
        b'net/a\\"}\\n  }\\n  op {',      # escaped quote, braces, escaped newlines
        b"net/b\\\\",                        # an escaped backslash right before the quote
        b"net/c\\\\\\\"x",                   # escaped backslash then escaped quote
        b"net/d \\303\\251 \\x41 \\'",       # octal, hex and single-quote escapes
        b"}\\n  }\\n",                        # looks like closers
        b"net/e \x00\x01 \x00\x02 raw NUL",       # raw NUL bytes (no escapes in the op)
    ]
    for index, raw in enumerate(tricky):
        data = data.replace(b'"net/layer%d/conv"' % index, b'"' + raw + b'"')
    scanned = _assert_exact(tmp_path, data)
    names = [op.name for op in scanned[0].ops]
    assert names[0] == 'net/a"}\n  }\n  op {' and names[1] == "net/b\\"
    assert names[2] == 'net/c\\"x' and names[3] == "net/d \u00e9 A '"
    assert names[5] == "net/e \x00\x01 \x00\x02 raw NUL"


def test_one_line_and_mixed_layout_ops(tmp_path):
    data = golden_bytes()
    lines = data.split(b"\n")
    # join every third line with the next one: several fields and closers per line
    joined = b"\n".join(l + (b" " if i % 3 == 0 else b"\n") for i, l in enumerate(lines)
                        ).replace(b"\n\n", b"\n")
    _assert_exact(tmp_path, joined)
    _assert_exact(tmp_path, data.replace(b"  op {\n", b"  op\n  {\n"))
    _assert_exact(tmp_path, data.replace(b"    attr {\n", b"    attr: {\n"))


def test_ops_sharing_a_layout_but_not_keys_or_values(tmp_path):
    # Same lines apart from string contents and digits: the scanner must read each op's own keys.
    ops = []
    for index, key in enumerate(["_no_task", "_no_tas", "_no_task", "_datadump_origin_name",
                                 "_datadump_original_op_names", "x"] * 2):
        ops.append(ge_graph.make_op("op%d" % index, "T", index, attrs={key: True},
                                    output_descs=[ge_graph.make_tensor_desc(
                                        "DT_FLOAT", [index + 1], "ND",
                                        origin_name="o%d" % index, origin_output_index=index)]))
    data = ge_graph.format_model(ge_graph.make_model([("g", ops)])).encode()
    scanned = _assert_exact(tmp_path, data)
    assert [op.no_task for op in scanned[0].ops][:3] == [True, False, True]
    # a value that only differs in its digits can still be invalid: the error must be the same
    bad = data.replace(b"    id: 7\n", b"    id: -07\n")
    with pytest.raises(GraphFormatError) as fast_error:
        _fast(bad)
    with pytest.raises(GraphFormatError) as general_error:
        _general(bad)
    assert fast_error.value.offset == general_error.value.offset == bad.index(b"-07")


class _CountingBytes(bytes):
    """bytes whose find() and slicing add the number of bytes they scan to ``work``."""

    def find(self, sub, start=0, end=None):  # noqa: D401
        stop = len(self) if end is None else min(end, len(self))
        found = bytes.find(self, sub, start, stop)
        self.work += (found + len(sub) if found >= 0 else stop) - start
        return found

    def __getitem__(self, item):
        if isinstance(item, slice):
            self.work += len(range(*item.indices(len(self))))
        return bytes.__getitem__(self, item)


def _scan_work(data):
    counted = _CountingBytes(data)
    counted.work = 0
    graphs = list(ge_graph._scan_graphs(counted, "mem", True))
    return graphs, counted.work


@pytest.mark.parametrize("closer", [b"\n  } \n", b"\n  }\r\n"], ids=["space", "cr"])
def test_scan_work_is_linear_on_non_canonical_closers(closer):
    """4x the ops must cost about 4x the bytes scanned (the quadratic scanner: ~16x)."""
    def graph(count):
        data = _many_ops_bytes(count).replace(b"\n  }\n", closer)
        return data, _general(data)

    small, small_expected = graph(60)
    large, large_expected = graph(240)
    small_graphs, small_work = _scan_work(small)
    large_graphs, large_work = _scan_work(large)
    assert small_graphs == small_expected and large_graphs == large_expected
    assert len(large_graphs[0].ops) == 4 * len(small_graphs[0].ops)
    ratio = large_work / small_work
    assert ratio < 6, "bytes scanned grew {:.1f}x for 4x the ops".format(ratio)


_MUTATIONS = st.lists(st.tuples(st.sampled_from(["space", "tab", "cr", "blank", "comment",
                                                  "indent", "join", "brace_string"]),
                                st.integers(0, 10 ** 6)), min_size=1, max_size=6)


def mutated(data, mutations):
    """``data`` with each (kind, where) of _MUTATIONS applied at line ``where`` (modulo)."""
    lines = data.split(b"\n")
    for kind, where in mutations:
        at = where % len(lines)
        if kind == "space":
            lines[at] += b" "
        elif kind == "tab":
            lines[at] += b"\t"
        elif kind == "cr":
            lines[at] += b"\r"
        elif kind == "blank":
            lines.insert(at, b"")
        elif kind == "comment":
            lines.insert(at, b'  # "x" } op {')
        elif kind == "indent":
            lines[at] = lines[at].lstrip(b" ") if where % 2 else b"  " + lines[at]
        elif kind == "join" and at + 1 < len(lines):
            lines[at:at + 2] = [lines[at] + b" " + lines[at + 1].lstrip(b" ")]
        elif kind == "brace_string":
            lines[at] = lines[at].replace(b'"', b'"} {\\" ', 1).replace(b'\\" "', b'\\" x"', 1)
    return b"\n".join(lines)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(mutations=_MUTATIONS)
def test_random_layout_changes_give_the_general_result(mutations):
    """Fast path == general path (same result or same error) whatever is changed where."""
    data = mutated(_many_ops_bytes(4), mutations)
    try:
        expected = _general(data)
    except GraphFormatError as error:
        with pytest.raises(GraphFormatError) as info:
            _fast(data)
        assert (info.value.offset, info.value.rule) == (error.offset, error.rule)
        return
    assert _fast(data) == expected


def test_canonical_files_are_read_by_the_fast_path_alone(monkeypatch):
    def general_op(self):
        raise AssertionError("op {!r} read by the general path".format(self.name))

    monkeypatch.setattr(ge_graph._OpBuilder, "build", general_op)
    data = golden_bytes()
    assert _fast(data) == EXPECTED
    assert len(_fast(_many_ops_bytes())[0].ops) == 40


@pytest.mark.parametrize("window", [1, 300, 2000, 7000])
def test_windows_of_any_size_give_the_same_result(monkeypatch, window):
    # ops longer than a window, windows ending anywhere, declined ops at window ends
    monkeypatch.setattr(ge_graph, "_WINDOW", window)
    for data in (_many_ops_bytes(12), golden_bytes()):
        assert _fast(data) == _general(data)
        bad = data.replace(b"\n  }\n", b"\n  } \n", 3)
        assert _fast(bad) == _general(bad)


@pytest.mark.parametrize("change", ["crlf", "closer_blanks", "every_line_blanks"])
def test_blanks_at_line_ends_and_crlf_are_read_by_the_fast_path(monkeypatch, tmp_path, change):
    data = _many_ops_bytes()
    if change == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif change == "closer_blanks":
        data = re.sub(rb"(?m)^( *)\}$", lambda m: m.group() + b" \t", data)
    else:
        data = data.replace(b"\n", b" \r\n")
    expected = _expected(data)
    monkeypatch.setattr(ge_graph._OpBuilder, "build", None)  # the general path reads no op
    assert ge_graph.scan_graph(write(tmp_path, data)) == expected


def _same_as_general(data):
    try:
        expected = _general(data)
    except GraphFormatError as error:
        with pytest.raises(GraphFormatError) as info:
            _fast(data)
        assert (info.value.offset, info.value.rule) == (error.offset, error.rule)
        return None
    assert _fast(data) == expected
    return expected


@pytest.mark.parametrize("old, new", [
    (b"    id: 3\n", b"    id: 0x1F\n"),                    # base-0 int, rechecked per op
    (b"    id: 3\n", b"    id: -12\n"),
    (b"    id: 3\n", b"    id: -012\n"),                    # int() refuses it: an error
    (b"    id: 3\n", b'    id: "3"\n'),                     # a string id: general path
    (b"        b: false\n", b"        b: 0\n"),              # a bool made of digits
    (b"        b: false\n", b"        b: 2\n"),              # ... that is not one
    (b'      key: "_no_task"', b'      key: "_no\\137task"'),  # an escaped key
    (b"          i: 0\n", b"          i: -0\n"),
    (b"          i: 0\n", b"          i: 0x0\n"),
    (b"        b: false\n", b"        list {\n          b: false\n        }\n"),  # no b first
])
def test_unusual_values_give_the_general_result(tmp_path, old, new):
    data = golden_bytes()
    assert old in data
    changed = data.replace(old, new, 1)
    expected = _same_as_general(changed)
    if expected is None:  # the general path refuses it (and so does the fast path)
        return
    try:
        parsed = _expected(changed)
    except GraphFormatError:  # protobuf is stricter than the scanner (a quoted id)
        return
    assert expected == parsed == ge_graph.scan_graph(write(tmp_path, changed))


def test_scan_leaves_the_cycle_collector_as_it_found_it():
    import gc

    assert gc.isenabled()
    graphs = ge_graph.iter_graphs(GOLDEN)
    next(graphs)
    assert gc.isenabled()  # between graphs, the caller runs with it on
    list(graphs)
    with pytest.raises(GraphFormatError):
        _fast(golden_bytes().replace(b"    id: 4\n", b"    id: 4\n    @oops\n"))
    assert gc.isenabled()
    gc.disable()
    try:
        _fast(golden_bytes())
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("batch", [1, 3, 4096])
def test_iter_ops_gives_every_op_in_order_without_holding_them(tmp_path, monkeypatch, batch):
    monkeypatch.setattr(ge_graph, "_OP_BATCH", batch)
    for data in (golden_bytes(), _many_ops_bytes(25), _many_ops_bytes(7).replace(b"\n  }\n", b"\n  } \n")):
        path = write(tmp_path, data)
        expected = [op for graph in ge_graph.scan_graph(path) for op in graph.ops]
        assert list(ge_graph.iter_ops(path)) == expected
    held = []
    original = ge_graph._scan_steps

    def spy(scan, size=0):
        for part in original(scan, size):
            held.append(len(part.ops))
            yield part

    monkeypatch.setattr(ge_graph, "_scan_steps", spy)
    monkeypatch.setattr(ge_graph, "_WINDOW", 300)  # the fast path gives a window's ops at once
    tiny = ge_graph.format_model(ge_graph.make_model([("g", [
        ge_graph.make_op("op_{}".format(i), "Add", i) for i in range(50)])])).encode()
    assert len(list(ge_graph.iter_ops(write(tmp_path, tiny)))) == 50
    assert sum(held) == 50
    if batch < 50:  # parts of a batch plus at most a window's ops (300 bytes: 6 ops)
        assert max(held) <= batch + 6


def test_iter_ops_raises_where_iter_graphs_does(tmp_path):
    bad = golden_bytes().replace(b"    id: 5\n", b"    id: five\n")
    path = write(tmp_path, bad)
    with pytest.raises(GraphFormatError) as expected:
        list(ge_graph.iter_graphs(path))
    with pytest.raises(GraphFormatError) as got:
        list(ge_graph.iter_ops(path))
    assert (got.value.offset, got.value.rule) == (expected.value.offset, expected.value.rule)
