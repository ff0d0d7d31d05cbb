"""ge_text helpers: ``c_escape`` (protobuf CEscape, used by the text writer and the msaccucmp JSON)."""
import pytest

from npu_dump_hook.formats import ge_text


def reference_c_escape(raw):
    """CEscape spelled out byte by byte: \\n \\r \\t \\" \\' \\\\, printable ASCII as is, the rest octal."""
    named = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}
    return "".join(named[byte] if byte in named else chr(byte) if 0x20 <= byte < 0x7F else "\\%03o" % byte
                   for byte in bytearray(raw))


@pytest.mark.parametrize("raw", [b"", b"plain text", bytes(range(256)), bytes(range(255, -1, -1)) * 3,
                                 "\u65e5\u672c \"q\" 'a' \\".encode("utf-8"), b"\x00\x7f\x80\xff\n\r\t"])
def test_c_escape_is_cescape(raw):
    assert ge_text.c_escape(raw) == reference_c_escape(raw)
    assert ge_text.c_escape(bytearray(raw)) == reference_c_escape(raw)


def test_c_escaped_text_reads_back():
    raw = bytes(range(256))
    model = ge_text.parse_model_text('graph {\n  name: "x"\n  op {\n    attr {\n      key: "k"\n      value {\n'
                                     '        s: "' + ge_text.c_escape(raw) + '"\n      }\n    }\n  }\n}\n')
    assert model.graph[0].op[0].attr["k"].s == raw


def _model_with_repeated_attrs():
    from npu_dump_hook.formats import ge_ir_schema
    model = ge_ir_schema.ModelDef()
    graph = model.graph.add()
    graph.name = "g"
    for number in range(4):
        op = graph.op.add()
        op.name = "op{}".format(number)
        op.attr["_fe_imply_type"].i = 6  # the same entry on every op
        op.attr["k"].s = b"same" if number % 2 else b"other"  # one key, two values
        op.attr["list"].list.i.extend([1, number])
        desc = op.output_desc.add()
        desc.attr["_fe_imply_type"].i = 6  # the same entry one level deeper: other indent
        desc.attr["k"].i = 6  # the same value bytes under another key
    return model


def test_repeated_map_entries_are_written_as_each_would_be_alone(monkeypatch):
    """format_model keeps the text of repeated attr entries (by indent, map, key and value
    bytes): the text is the one written without keeping any, and reads back to the model."""
    model = _model_with_repeated_attrs()
    kept = ge_text.format_model(model)
    assert ge_text.format_model(model) == kept and not ge_text._ENTRY_TEXTS  # cleared after each model
    monkeypatch.setattr(ge_text, "_ENTRY_TEXTS_MAX", 0)
    assert ge_text.format_model(model) == kept
    assert ge_text.parse_model_text(kept) == model
    assert kept.count('key: "_fe_imply_type"') == 8 and kept.count('s: "same"') == 2
