"""mapping.csv reading, writing and the libstdc++ name hash (reference §4)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.errors import NameFormatError
from npu_dump_hook.formats.mapping_csv import (
    append_mapping,
    parse_mapping_text,
    read_mapping,
    std_hash_name,
    write_mapping,
)


def test_read_golden_file_with_repeats_crlf_commas_and_blank_lines(tmp_path):
    path = tmp_path / "mapping.csv"
    path.write_bytes(
        b"123,Conv2D.conv1.1.2.1700000000123456\n"
        b"123,Conv2D.conv1.1.2.1700000000123456\n"  # repeated chunk line
        b"\n"
        b"456,Add.a,b.3.4.1700000000123456\r\n"
        b"789,Relu.r.5.6.1700000000123456"  # no final newline
    )
    assert read_mapping(path) == {
        "123": "Conv2D.conv1.1.2.1700000000123456",
        "456": "Add.a,b.3.4.1700000000123456",
        "789": "Relu.r.5.6.1700000000123456",
    }


def test_empty_file_is_an_empty_mapping(tmp_path):
    path = tmp_path / "mapping.csv"
    path.write_bytes(b"")
    assert read_mapping(path) == {}


@pytest.mark.parametrize(
    "data, rule, offset",
    [
        (b"1,a\n2,../etc/passwd\n", "line 2: file name '../etc/passwd' contains a path separator '/'", 6),
        (b"1,a\n22,..\n", "line 2: file name '..' contains '..'", 7),
        (b"1,x..y\n", "line 1: file name 'x..y' contains '..'", 2),
        (b"1,a\\b\n", "line 1: file name 'a\\\\b' contains a path separator '\\'", 2),
        (b"1,a\x00b\n", "contains NUL", 2),
        (b"1,\n", "line 1: empty file name", 2),
        (b"1,a\nabc\n", "line 2: expected '{hash},{name}', found no comma", 4),
        (b"1,a\nx1,b\n", "line 2: hash 'x1' is not all digits", 4),
        (b",b\n", "line 1: hash '' is not all digits", 0),
        (b"1,a\n1,b\n", "line 2: hash 1 maps to 'a' and 'b'", 4),
        (b"1,a\n2,\xff\n", "line 2: not UTF-8", 6),
    ],
)
def test_malformed_lines(tmp_path, data, rule, offset):
    path = tmp_path / "mapping.csv"
    path.write_bytes(data)
    with pytest.raises(NameFormatError) as info:
        read_mapping(path)
    assert info.value.path == str(path)
    assert info.value.offset == offset
    assert rule in info.value.rule


def test_write_then_append_gives_the_writer_s_lines(tmp_path):
    path = tmp_path / "mapping.csv"
    write_mapping(path, {"1": "A.a.1.2.3", "2": "B.b.1.2.3"})
    append_mapping(path, "3", "C.c.1.2.3.csv")
    append_mapping(path, "3", "C.c.1.2.3.csv")
    assert path.read_bytes() == b"1,A.a.1.2.3\n2,B.b.1.2.3\n3,C.c.1.2.3.csv\n3,C.c.1.2.3.csv\n"
    assert read_mapping(path) == {"1": "A.a.1.2.3", "2": "B.b.1.2.3", "3": "C.c.1.2.3.csv"}


@pytest.mark.parametrize(
    "hashed, name, rule",
    [("12a", "x", "is not all digits"), ("1", "a/b", "path separator"), ("1", "a\nb", "line break"), ("1", "..", "'..'")],
)
def test_writer_rejects_what_the_reader_would(tmp_path, hashed, name, rule):
    with pytest.raises(NameFormatError, match=rule):
        append_mapping(tmp_path / "mapping.csv", hashed, name)
    assert not (tmp_path / "mapping.csv").exists()


_NAMES = st.text(
    alphabet=st.characters(blacklist_characters="/\\\x00\r\n", blacklist_categories=("Cs",)), min_size=1, max_size=30
).filter(lambda s: ".." not in s and s.strip() != "")


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.dictionaries(st.integers(0, 2**64 - 1).map(str), _NAMES, max_size=8))
def test_write_read_round_trip(tmp_path_factory, mapping):
    path = tmp_path_factory.mktemp("m") / "mapping.csv"
    write_mapping(path, mapping)
    assert read_mapping(path) == mapping


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.binary(max_size=60))
def test_reader_raises_only_name_format_error(data):
    try:
        result = parse_mapping_text(data, "m.csv")
    except NameFormatError as exc:
        assert exc.path == "m.csv"
        return
    assert all(key.isdigit() for key in result)


# Golden values printed by g++ 11 (libstdc++, x86-64): std::hash<std::string>{}(s).
@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "6142509188972423790"),
        ("a", "4993892634952068459"),
        ("abcdefgh", "8664279048047335611"),
        ("abcdefghi", "13036955925923793583"),
        ("Conv2D.conv1.1.2.1700000000123456", "10981764720131403780"),
        (
            "/tmp/dump/20240101000000/0/ge_default_1/1/0/MatMul.dense_MatMul.3.4.1700000000000001",
            "17680125013128444750",
        ),
    ],
)
def test_std_hash_matches_libstdcxx(text, expected):
    assert std_hash_name(text) == expected
