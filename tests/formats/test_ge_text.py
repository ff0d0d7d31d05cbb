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
