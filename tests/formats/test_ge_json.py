"""The msaccucmp JSON writer's direct text -> JSON path (``write_msaccucmp_json`` of a file): the
same bytes as the parse-then-dump path (``_write_parsed``) on every input that path accepts, the
same GraphFormatError (rule and offset) on every input it refuses, and taken (not declined) on
the canonical layout GE writes.
"""
import collections
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_dump_hook.errors import GraphFormatError
from npu_dump_hook.formats import ge_graph, ge_ir_schema, ge_json, ge_text

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data", "formats", "ge")
GOLDEN = os.path.join(DATA, "ge_proto_00000007_graph_1_Build.txt")
OUTCOMES = collections.Counter()  # fuzzed inputs: (outcome, direct path taken)
FUZZ = dict(deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                   HealthCheck.function_scoped_fixture])


def golden_bytes():
    with open(GOLDEN, "rb") as handle:
        return handle.read()


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def outcome(call, path, out):
    """("ok", bytes written) or ("error", rule, offset) of a writer."""
    try:
        call(path, out)
    except GraphFormatError as exc:
        assert not os.path.exists(out + ".tmp")
        return ("error", exc.rule, exc.offset)
    assert not os.path.exists(out + ".tmp")
    return ("ok", read(out))


def before(path, out):
    """What write_msaccucmp_json did before the direct path (and does when it declines)."""
    ge_json._write_parsed(ge_text.parse_model(path), out)


def compare(folder, data, name="ge_proto_00000001_graph_1_Build.txt"):
    """Both writers' outcomes on ``data``, asserted equal; whether the direct path took it."""
    path = os.path.join(str(folder), name)
    with open(path, "wb") as handle:
        handle.write(data)
    now = outcome(ge_json.write_msaccucmp_json, path, path + ".now.json")
    old = outcome(before, path, path + ".before.json")
    assert now == old
    direct = ge_json._write_direct(data, path + ".direct.json")
    if direct:
        assert read(path + ".direct.json") == now[1]
    assert not os.path.exists(path + ".direct.json.tmp")
    return now, direct


def small_graph(ops):
    """bench_bundle's graph: one ``op { name type id }`` per dump file."""
    body = "".join('  op {{\n    name: "op_{}"\n    type: "Conv2D"\n    id: {}\n  }}\n'.format(i, i)
                   for i in range(ops))
    return ('name: "g"\ngraph {\n  name: "g"\n' + body + "}\n").encode()


def edge_model():
    """A model that walks the JSON rules: black fields, nulls, oneof zeros, floats, bytes, nesting."""
    model = ge_ir_schema.ModelDef(name="m", version=3)
    model.attr["model_attr"].s = b"x"
    graph = model.graph.add(name="g")
    graph.input.append("in:0")
    graph.output.append("dropped:0")  # black-listed
    op = graph.op.add(name="n \u65e5\t\"q\"", type="T", id=0, stream_id=-1)
    op.attr["big"].f = 1234567.0  # "%g" has 11 characters: the number
    op.attr["neg"].f = -0.5
    op.attr["tiny"].f = 1e-30
    op.attr["zero"].i = 0  # a oneof member set to 0 is present
    op.attr["no"].b = False
    op.attr["empty_s"].s = b""
    op.attr["bt"].bt = b"\x00\x01"  # black-listed: the value is null
    op.attr["raw"].s = bytes(range(0x5C)) + bytes(range(0x5D, 256))  # C-escaped (\\ before a letter: declined)
    op.attr["fl"].list.f.extend([0.5, 2.0, 0.1, -3.25e38])  # repeated floats stay numbers
    op.attr["ls"].list.s.extend([b"ok", b"\xff\xfe", "\u00e9".encode("utf-8"), b"'q'"])
    op.attr["ls"].list.val_type = 1
    op.attr["nested"].func.name = "f"
    op.attr["nested"].func.attr["inner"].list.i.extend([1, -2, 3])
    op.attr["tensor"].t.data = b"abc"  # TensorDef: data black-listed
    op.attr["tensor"].t.desc.dtype = 1
    op.attr["sub"].g.name = "subgraph"
    op.attr["sub"].g.op.add(name="inner_op")
    op.attr["ll"].list_list_int.list_list_i.add().list_i.extend([4, 5])
    op.attr["ll"].list_list_int.list_list_i.add()
    op.attr["empty_value"].SetInParent()
    op.input.extend(["a:0", "b:1"])
    op.is_input_const.extend([True, False])
    op.workspace.extend([1, 2])
    op.input_desc.add(dtype=0, layout="ND").shape.dim.extend([8, 0, -1])  # DT_FLOAT is 0: omitted
    op.output_desc.add(size=16)  # only black-listed content: null
    op.output_desc.add()  # empty: null
    op.output_desc.add(has_out_attr=True, real_dim_cnt=4)
    graph.op.add()  # an empty op: null
    graph.op.add(name="last", attr_groups=ge_ir_schema.AttrGroups())
    graph.attr["graph_attr"].i = 7
    model.graph.add()  # an empty graph: null
    model.graph.add(name="only_name")
    return model


# --------------------------------------------------------------------------- canonical input

@pytest.mark.parametrize("crlf", [False, True])
def test_golden_graph_takes_the_direct_path_with_the_same_bytes(tmp_path, crlf):
    data = golden_bytes()
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    now, direct = compare(tmp_path, data)
    assert direct and now[0] == "ok"


@pytest.mark.parametrize("ops", [0, 1, 3000])
def test_small_graph_takes_the_direct_path(tmp_path, ops):
    now, direct = compare(tmp_path, small_graph(ops))
    assert direct and now[0] == "ok"


def test_edge_rules_give_the_same_bytes_on_the_direct_path(tmp_path):
    text = ge_graph.format_model(edge_model()).encode("utf-8")
    now, direct = compare(tmp_path, text)
    assert direct and b'"op": [' in now[1] and b"null" in now[1]


def test_repeated_blocks_from_the_block_memo_give_the_same_bytes(tmp_path):
    data = golden_bytes()
    head, body = data[:data.index(b"  op {")], data[data.index(b"  op {"):data.rindex(b"}")]
    copies = b"".join(re.sub(rb"id: \d+", b"id: %d" % i, body) for i in range(40))
    now, direct = compare(tmp_path, head + copies + b"}\n")
    assert direct and now[1].count(b'"name": "net/conv1/Conv2D"') == 40


def test_the_output_is_written_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(ge_json, "_OUT_BUFFER", 64)
    writes = []

    class Handle(object):
        def write(self, text):
            writes.append(text)

    ge_json._convert_lines(small_graph(50), ge_json._Sink(Handle()))
    assert len(writes) > 20 and max(len(piece) for piece in writes) < 400
    path = str(tmp_path / "g.txt")
    with open(path, "wb") as handle:
        handle.write(small_graph(50))
    before(path, path + ".json")
    assert "".join(writes).encode("utf-8") == read(path + ".json")


def test_a_model_object_is_written_as_before(tmp_path):
    model = edge_model()
    ge_json.write_msaccucmp_json(model, str(tmp_path / "a.json"))
    ge_json._write_parsed(model, str(tmp_path / "b.json"))
    assert read(str(tmp_path / "a.json")) == read(str(tmp_path / "b.json"))


# --------------------------------------------------------------------------- declined input

GOLDEN_OP = (b'  op {\n    name: "x"\n    type: "T"\n    attr {\n      key: "b"\n      value {\n        i: 1\n'
             b'      }\n    }\n    id: 5\n  }\n')
DECLINED = {
    "comment": b'graph {\n  name: "g" # c\n}\n',
    "one_line_block": b'graph { name: "g" }\n',
    "fields_out_of_order": b'graph {\n  op {\n    id: 5\n    name: "x"\n  }\n}\n',
    "repeated_not_together": b'graph {\n  op {\n    input: "a"\n    name: "x"\n    input: "b"\n  }\n}\n',
    "ops_around_an_attr": b'graph {\n' + GOLDEN_OP + b'  attr {\n    key: "k"\n    value {\n      i: 1\n    }\n'
                          b'  }\n' + GOLDEN_OP + b'}\n',
    "map_keys_unsorted": GOLDEN_OP.replace(b'key: "b"', b'key: "c"')[:-4]
                         + GOLDEN_OP[GOLDEN_OP.index(b"    attr {"):GOLDEN_OP.index(b"    id:")] + b"  }\n",
    "map_key_twice": GOLDEN_OP[:-4] + GOLDEN_OP[GOLDEN_OP.index(b"    attr {"):GOLDEN_OP.index(b"    id:")] + b"  }\n",
    "singular_twice": b'graph {\n  name: "a"\n  name: "b"\n}\n',
    "oneof_twice": b'graph {\n  op {\n    attr {\n      key: "k"\n      value {\n        i: 1\n        b: true\n'
                   b'      }\n    }\n  }\n}\n',
    "unknown_field": b'graph {\n  future: 3\n  name: "g"\n}\n',
    "unknown_block": b'graph {\n  future {\n  }\n}\n',
    "enum_number": b'graph {\n  op {\n    output_desc {\n      dtype: 3\n    }\n  }\n}\n',
    "deep": b"graph {\n  op {\n" + b"    attr {\n      key: \"k\"\n      value {\n        func {\n" * 7
            + b"        }\n      }\n    }\n" * 7 + b"  }\n}\n",
    "single_quotes": b"graph {\n  name: 'g'\n}\n",
    "string_escapes_text_format_only": b'graph {\n  name: "\\u00e9\\?"\n}\n',
    "hex_and_octal": b'graph {\n  op {\n    id: 0x1F\n    stream_id: 017\n  }\n}\n',
    "float_forms": b'graph {\n  op {\n    attr {\n      key: "f"\n      value {\n        f: 1e40\n      }\n'
                   b'    }\n  }\n}\n',
    "unbalanced": b'graph {\n  name: "g"\n',
    "extra_close": b'graph {\n}\n}\n',
    "bad_utf8_in_string": b'graph {\n  name: "\xff"\n}\n',
    "bad_utf8_in_bytes": b'graph {\n  op {\n    attr {\n      key: "k"\n      value {\n        s: "\xff"\n'
                         b'      }\n    }\n  }\n}\n',
    "invalid_utf8_escape_in_string": b'graph {\n  name: "\\377"\n}\n',
    "int32_range": b'version: 4294967296\n',
    "empty_value": b"graph {\n  name:\n}\n",
    "blank_lines_and_tabs": b'\n\ngraph {\n\t name: "g"\n\n}\n\n',
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_input_the_direct_path_cannot_prove_is_left_to_the_parse(tmp_path, name):
    compare(tmp_path, DECLINED[name])


def test_refused_input_raises_the_parse_error_and_leaves_no_file(tmp_path):
    now, direct = compare(tmp_path, b'graph {\n  op {\n    name: "x"\n    bogus\n  }\n}\n')
    assert now[0] == "error" and now[2] is not None and not direct
    assert not os.path.exists(str(tmp_path / "ge_proto_00000001_graph_1_Build.txt.now.json"))


def test_an_unwritable_target_fails_as_before(tmp_path):
    path = str(tmp_path / "g.txt")
    with open(path, "wb") as handle:
        handle.write(golden_bytes())
    with pytest.raises(OSError):
        ge_json.write_msaccucmp_json(path, str(tmp_path / "missing" / "g.json"))
    with open(path, "wb") as handle:
        handle.write(b"graph { bogus }\n")
    with pytest.raises(GraphFormatError):  # the input is checked first, as before
        ge_json.write_msaccucmp_json(path, str(tmp_path / "missing" / "g.json"))


# --------------------------------------------------------------------------- fuzzing

PIECES = [b"{", b"}", b"\n", b"\r\n", b" ", b"\t", b'"', b"'", b"\\", b"\\x4", b"\\377", b"\\u00e9", b"#",
          b"\n    id: 0\n", b"\n    id: 7\n", b"\n      i: -3\n", b"\n      f: 1.5\n", b"\n      f: 1e40\n",
          b"\n      f: 123456789\n", b"\n      b: t\n", b'\n      s: "\\x41"\n', b'\n      s: ""\n',
          b"\n    future: 3\n", b"\n        dtype: DT_FLOAT\n", b"\n        dtype: 3\n", b"\n  }\n  op {\n",
          b"\n      list {\n        i: 1\n        i: 2\n      }\n", b'\n    input: "a"\n', b"\n    id: 0x1F\n",
          b'\n    name: ""\n', b"\n    has_out_attr: false\n", b"\n        size: 9\n", b'      key: "_no_task"\n',
          b'      key: "zzz"\n', b"\n      value {\n      }\n", b"\xff", b"\xe6\x97\xa5", b"\x00", b"-0"]


@settings(max_examples=300, **FUZZ)
@given(edits=st.lists(st.tuples(st.integers(0, 3200), st.sampled_from(["insert", "delete", "replace"]),
                                st.sampled_from(PIECES), st.integers(1, 30), st.booleans()), max_size=3),
       copies=st.integers(1, 3))
def test_fuzzed_graphs_give_the_same_bytes_or_the_same_error(tmp_path, edits, copies):
    data = golden_bytes()
    if copies > 1:  # repeated ops, for the block memo
        head, body = data[:data.index(b"  op {")], data[data.index(b"  op {"):data.rindex(b"}")]
        data = head + body * copies + b"}\n"
    data = bytearray(data)
    for at, action, piece, length, at_line in edits:
        if at_line:  # at a line start, whole lines: edits that often keep the text valid
            at = data.find(b"\n", at) + 1
            piece = piece.strip(b"\n") + b"\n"
            length = max(1, data.find(b"\n", at) + 1 - at)
        if action == "insert":
            data[at:at] = piece
        elif action == "delete":
            del data[at:at + length]
        else:
            data[at:at + (length if at_line else len(piece))] = piece
    now, direct = compare(tmp_path, bytes(data))
    OUTCOMES[now[0], "direct" if direct else "declined"] += 1


def test_the_fuzzed_inputs_took_both_paths_and_both_outcomes():
    """(runs after the fuzz test, in file order) the fuzz reached every branch worth comparing."""
    print("msaccucmp JSON fuzz outcomes:", dict(OUTCOMES))
    if not OUTCOMES:
        pytest.skip("the fuzz test did not run")
    for key in (("ok", "direct"), ("ok", "declined"), ("error", "declined")):
        assert OUTCOMES[key] >= 10, dict(OUTCOMES)


# op blocks of scalar lines only (read with one regex per layout when every value is plain)
LEAF_LINES = [  # (field, values), in declaration order
    ("name", [b'"a"', b'""', b'"q\\"x"', b'"\xe6\x97\xa5"', b"'s'"]),
    ("type", [b'"Conv2D"', b'""']),
    ("input", [b'"x:0"', b'""', b'"a\\\\b"']),
    ("has_out_attr", [b"true", b"false", b"t", b"1"]),
    ("id", [b"0", b"5", b"-3", b"123456789", b"4294967296", b"-0", b"007", b"0x1F", b"99999999999999999999"]),
    ("stream_id", [b"-1", b"0"]),
    ("src_index", [b"0", b"-7"]),
    ("workspace", [b"4", b"0"]),  # black-listed
    ("is_input_const", [b"false", b"true"]),
    ("subgraph_name", [b'"s"']),
]


@settings(max_examples=200, **FUZZ)
@given(ops=st.lists(st.lists(st.tuples(st.integers(0, len(LEAF_LINES) - 1), st.integers(0, 8), st.integers(1, 3)),
                             max_size=6), min_size=1, max_size=4),
       model_version=st.sampled_from([b"", b"version: 3\n", b"version: -3\n", b"version: 0\n"]))
def test_leaf_ops_give_the_same_bytes_or_the_same_error(tmp_path, ops, model_version):
    blocks = []
    for lines in ops:
        body = []
        for field, value, repeat in sorted(lines):
            name, values = LEAF_LINES[field]
            body += [b"    %s: %s\n" % (name.encode(), values[value % len(values)])] * repeat
        blocks.append(b"  op {\n" + b"".join(body) + b"  }\n")
    data = b'name: "m"\n' + model_version + b'graph {\n  name: "g"\n' + b"".join(blocks) + b"}\ngraph {\n  name: \"h\"\n}\n"
    compare(tmp_path, data)


def test_leaf_ops_with_plain_values_take_the_direct_path(tmp_path):
    data = (b'graph {\n  op {\n    name: "a"\n    type: "T"\n    input: "x:0"\n    input: ""\n    has_out_attr: true\n'
            b'    id: -3\n    workspace: 4\n    is_input_const: false\n  }\n  op {\n    id: 0\n  }\n  op {\n  }\n}\n'
            b'graph {\n  name: "h"\n}\n')
    now, direct = compare(tmp_path, data)
    assert direct and b"null" in now[1] and b'"workspace"' not in now[1]


def test_blocks_closed_with_trailing_blanks_are_read_line_by_line(tmp_path):
    data = golden_bytes()
    head, body = data[:data.index(b"  op {")], data[data.index(b"  op {"):data.rindex(b"}")]
    data = re.sub(rb"(?m)^( *)\}$", rb"\g<0> \t", head + body * 3 + b"}\n")
    now, direct = compare(tmp_path, data)
    assert direct and now[0] == "ok"
