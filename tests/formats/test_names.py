"""Dump / graph / .npy / time-folder name grammar (reference §1.1, §2.1, §5, §6)."""
import datetime
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.errors import NameFormatError
from npu_dump_hook.formats.names import (
    NPU_DUMP_PATTERN,
    NUMPY_DUMP_PATTERN,
    DumpName,
    SanitizedIndex,
    base_op_name,
    format_dump_name,
    format_npy_name,
    format_time_dir,
    golden_npy_name,
    is_build_graph_file,
    is_hashed_name,
    match_tf_names,
    parse_dump_name,
    parse_graph_file_name,
    parse_npy_name,
    parse_time_dir,
    sanitize,
)

TS = 1700000000123456


# ----------------------------------------------------------------------------- dump names


def test_normal_name():
    parsed = parse_dump_name("Conv2D.resnet_conv1_Conv2D.12.3.1700000000123456")
    assert parsed == DumpName("Conv2D", "resnet_conv1_Conv2D", 12, 3, TS)
    assert parsed.kind == "dump"
    assert not parsed.is_ffts
    assert parsed.sortable_timestamp


def test_old_name_without_stream_id():
    parsed = parse_dump_name("MatMul.dense_MatMul.7.1700000000123456")
    assert (parsed.task_id, parsed.stream_id, parsed.timestamp) == (7, None, TS)
    assert parsed.file_name == "MatMul.dense_MatMul.7.1700000000123456"


def test_ffts_plus_name():
    name = "Add.partition0_rank1_new_sub_graph1_sgt_graph_0_add_lxslice1.5.2.1700000000123456.4.11.1.0"
    parsed = parse_dump_name(name)
    assert parsed.is_ffts
    assert (parsed.task_id, parsed.stream_id, parsed.timestamp) == (5, 2, TS)
    assert (parsed.task_type, parsed.context_id, parsed.thread_id, parsed.device_id) == (4, 11, 1, 0)
    assert parsed.slice_index == 1
    assert parsed.base_op_name == "add"
    assert parsed.file_name == name


def test_ffts_plus_name_without_stream_id():
    parsed = parse_dump_name("Add.add.5.1700000000123456.4.11.1.0")
    assert (parsed.task_id, parsed.stream_id, parsed.timestamp, parsed.context_id) == (5, None, TS, 11)


def test_stats_name():
    parsed = parse_dump_name("Relu.relu.1.2.1700000000123456.csv")
    assert parsed.kind == "stats"
    assert parsed.op_name == "relu"
    assert parsed.file_name == "Relu.relu.1.2.1700000000123456.csv"


def test_opdebug_name():
    parsed = parse_dump_name("Opdebug.Node_OpDebug.1.2.1700000000123456")
    assert parsed.kind == "opdebug"
    assert parse_dump_name("Opdebug.Node_OpDebug.1.2.1700000000123456.4.3.0.1").kind == "opdebug"


def test_path_is_reduced_to_its_last_component(tmp_path):
    parsed = parse_dump_name(tmp_path / "Relu.relu.1.2.3")
    assert parsed.op_name == "relu"


def test_hashed_name_resolved_through_mapping():
    mapping = {"10981764720131403780": "Conv2D.conv1.1.2.1700000000123456"}
    parsed = parse_dump_name("10981764720131403780", mapping)
    assert parsed.hashed_name == "10981764720131403780"
    assert (parsed.op_type, parsed.op_name, parsed.stream_id) == ("Conv2D", "conv1", 2)
    assert parsed.file_name == "Conv2D.conv1.1.2.1700000000123456"


def test_hashed_name_without_mapping_is_an_error():
    with pytest.raises(NameFormatError, match="hashed.*not found in mapping.csv") as info:
        parse_dump_name("123456789")
    assert info.value.path == "123456789"
    with pytest.raises(NameFormatError, match="not found"):
        parse_dump_name("123456789", {"1": "A.b.1.2.3"})


def test_hashed_name_mapped_to_a_non_dump_name():
    with pytest.raises(NameFormatError, match="not a dump file name"):
        parse_dump_name("42", {"42": "43"})


def test_is_hashed_name():
    assert is_hashed_name("0123456789")
    assert is_hashed_name("/x/y/42")
    assert not is_hashed_name("42.csv")
    assert not is_hashed_name("42\n")
    assert not is_hashed_name("")


@pytest.mark.parametrize(
    "name, rule",
    [
        ("Relu.relu.1", "expected 4, 5, 8 or 9 dot-separated fields (optionally + .csv), found 3"),
        ("A.b.1.2.3.4", "found 6"),
        ("A.b.1.2.3.npy", "found 6"),
        ("A.b.1.2.3.4.5.6.7.8", "found 10"),
        (".b.1.2.3", "op_type is empty"),
        ("A..1.2.3", "op_name is empty"),
        ("A.b.x.2.3", "task_id must be an unsigned decimal integer, found 'x'"),
        ("A.b.1.-2.3", "stream_id must be an unsigned decimal integer, found '-2'"),
        ("A.b.1.2.3x", "timestamp must be an unsigned decimal integer, found '3x'"),
        ("A b.c.1.2.3", "op_type contains ' ' (sanitized names hold no space"),
        ("A.b\\c.1.2.3", "op_name contains '\\\\' (sanitized names hold no space"),
        ("A.b\x01.1.2.3", "op_name contains '\\x01'"),
        ("A.b.1.2.3.5.1.1.1", "task_type field must be a digit 0-4, found 5"),
        ("A.b.1.2.3.output.0.npy", "context_id must be an unsigned decimal integer, found 'output'"),
        ("A.b.1.2." + "1" * 256, "timestamp longer than 255 digits"),
    ],
)
def test_malformed_dump_names(name, rule):
    with pytest.raises(NameFormatError) as info:
        parse_dump_name(name)
    assert info.value.path == name
    assert info.value.offset is None
    assert rule in info.value.rule


def test_format_sanitizes_and_builds_every_variant():
    assert format_dump_name("Conv2D", "a/b.c d\\e", 1, 2, TS) == "Conv2D.a_b_c_d_e.1.2.1700000000123456"
    assert format_dump_name("MatMul", "m", 1, None, 99) == "MatMul.m.1.99"
    assert format_dump_name("Add", "x", 1, 2, 3, context_id=4, thread_id=5, device_id=6) == "Add.x.1.2.3.4.4.5.6"
    assert format_dump_name("Add", "x", 1, 2, 3, stats=True) == "Add.x.1.2.3.csv"
    assert format_dump_name("Add", "x", 1, 2, 3, task_type=1, context_id=0, thread_id=0, device_id=0).endswith(
        ".3.1.0.0.0"
    )


@pytest.mark.parametrize(
    "kwargs, rule",
    [
        (dict(context_id=1), "go together"),
        (dict(task_type=4), "task_type is only written in FFTS"),
        (dict(task_type=7, context_id=1, thread_id=1, device_id=1), "task_type must be 0-4"),
    ],
)
def test_format_rejects_inconsistent_ffts_fields(kwargs, rule):
    with pytest.raises(NameFormatError, match=rule):
        format_dump_name("Add", "x", 1, 2, 3, **kwargs)


def test_format_rejects_bad_numbers_and_empty_names():
    with pytest.raises(NameFormatError, match="task_id must be a non-negative int, got -1"):
        format_dump_name("Add", "x", -1, 2, 3)
    with pytest.raises(NameFormatError, match="timestamp must be a non-negative int, got '3'"):
        format_dump_name("Add", "x", 1, 2, "3")
    with pytest.raises(NameFormatError, match="op_name is empty"):
        format_dump_name("Add", "", 1, 2, 3)


def test_sanitize_and_base_name():
    assert sanitize("scope/sub.op name\\x") == "scope_sub_op_name_x"
    assert sanitize("a\tb") == "a\tb"  # only the four characters the writer replaces
    assert base_op_name("p0_sgt_graph_12_conv_lxslice3") == "conv"
    assert base_op_name("conv_lxslice") == "conv_lxslice"
    assert base_op_name("conv") == "conv"


def test_msaccucmp_pattern_accepts_our_names():
    for name in (
        format_dump_name("Conv2D", "a/b", 1, 2, TS),
        format_dump_name("Conv2D", "a", 1, None, TS),
        format_dump_name("Add", "x", 1, 2, TS, context_id=4, thread_id=5, device_id=6),
    ):
        match = NPU_DUMP_PATTERN.match(name)
        assert match is not None
    assert NPU_DUMP_PATTERN.match("Conv2D.a_b.1.2.1700000000123456").group(1) == "a_b"


_FIELD = st.text(alphabet="ABCXYZabcxyz019_-", min_size=1, max_size=12)
_UINTS = st.integers(min_value=0, max_value=2**64 - 1)


@st.composite
def dump_names(draw):
    ffts = draw(st.booleans())
    stream = draw(st.one_of(st.none(), _UINTS))
    kwargs = {}
    if ffts:
        kwargs = dict(
            task_type=draw(st.integers(0, 4)), context_id=draw(_UINTS), thread_id=draw(_UINTS), device_id=draw(_UINTS)
        )
    op_type = draw(_FIELD)
    op_name = draw(_FIELD)
    kind = "stats" if draw(st.booleans()) else ("opdebug" if (op_type, op_name) == ("Opdebug", "Node_OpDebug") else "dump")
    return DumpName(op_type, op_name, draw(_UINTS), stream, draw(_UINTS), kind=kind, **kwargs)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(dump_names())
def test_format_parse_round_trip(name):
    text = name.file_name
    assert parse_dump_name(text) == name
    assert NPU_DUMP_PATTERN.match(text) is not None


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.text(max_size=40))
def test_parse_never_raises_anything_but_name_format_error(text):
    try:
        parsed = parse_dump_name(text.replace("/", "_"))
    except NameFormatError:
        return
    assert parse_dump_name(parsed.file_name) == parsed


# ----------------------------------------------------------------------------- TF name matching


def test_match_tf_names_unique_ambiguous_and_missing():
    tf_names = ["scope/conv", "scope_conv2", "a/b", "a.b", "a b", "x/y_lxslice"]
    match = match_tf_names("scope_conv", tf_names)
    assert match.candidates == ("scope/conv",)
    assert match.unique == "scope/conv" and not match.ambiguous
    ambiguous = match_tf_names("a_b", tf_names)
    assert ambiguous.candidates == ("a b", "a.b", "a/b")
    assert ambiguous.ambiguous and ambiguous.unique is None
    assert match_tf_names("nothing", tf_names).candidates == ()


def test_match_strips_ffts_decorations_only_when_no_exact_match():
    index = SanitizedIndex(["scope/conv", "conv_lxslice2"])
    assert index.match("p0_sgt_graph_0_scope_conv_lxslice1").unique == "scope/conv"
    assert index.match("conv_lxslice2").unique == "conv_lxslice2"
    assert index.match("p0_sgt_graph_0_scope_conv_lxslice1", strip_ffts=False).candidates == ()


# ----------------------------------------------------------------------------- graph files


@pytest.mark.parametrize(
    "name, fields",
    [
        ("ge_proto_00292_Build.txt", ("ge_proto", 292, 5, None, "Build", False)),
        ("ge_proto_00000012_graph_3_Build.txt", ("ge_proto", 12, 8, 3, "Build", False)),
        ("ge_proto_00000001_graph_1_PreRunAfterNormalizeGraph.txt", ("ge_proto", 1, 8, 1, "PreRunAfterNormalizeGraph", False)),
        ("ge_proto_00000007_aclop_graph_2_Build.txt", ("ge_proto", 7, 8, 2, "Build", True)),
        ("ge_proto_00001_after_some_pass.txt", ("ge_proto", 1, 5, None, "after_some_pass", False)),
        ("ge_onnx_00000012_graph_3_Build.pbtxt", ("ge_onnx", 12, 8, 3, "Build", False)),
        ("ge_onnx_00012_graph_3_Build.pbtxt", ("ge_onnx", 12, 5, 3, "Build", False)),
    ],
)
def test_graph_file_names(name, fields):
    parsed = parse_graph_file_name(name)
    assert (parsed.kind, parsed.index, parsed.index_width, parsed.graph_id, parsed.stage, parsed.aclop) == fields


def test_build_graph_detection_and_onnx_ignored():
    assert is_build_graph_file("/some/dir/ge_proto_00000012_graph_3_Build.txt")
    assert is_build_graph_file("ge_proto_00292_Build.txt")
    onnx = parse_graph_file_name("ge_onnx_00000012_graph_3_Build.pbtxt")
    assert not onnx.usable_for_mapping and not onnx.is_build
    assert not is_build_graph_file("ge_onnx_00000012_graph_3_Build.pbtxt")
    assert not is_build_graph_file("ge_proto_00000012_graph_3_PreRunBegin.txt")
    assert not is_build_graph_file("ge_proto_00000012_graph_3_Build.txt.bak")


@pytest.mark.parametrize(
    "name",
    ["ge_proto_Build.txt", "ge_proto_00001_.txt", "ge_proto_00001_Build.pbtxt", "ge_onnx_00001_Build.txt",
     "xge_proto_00001_Build.txt", "ge_proto_00001_Build.txt\n", "Conv2D.a.1.2.3"],
)
def test_not_graph_file_names(name):
    assert parse_graph_file_name(name) is None


# ----------------------------------------------------------------------------- reference .npy


def test_format_npy_name_replaces_slash_and_dot():
    name = format_npy_name("scope/bn.1/FusedBatchNorm", 2, TS)
    assert name == "scope_bn_1_FusedBatchNorm.2.1700000000123456.npy"
    assert NUMPY_DUMP_PATTERN.match(name).group(1) == "scope_bn_1_FusedBatchNorm.2"
    assert parse_npy_name(name).key == "scope_bn_1_FusedBatchNorm.2"
    assert parse_npy_name(name).timestamp == TS


@pytest.mark.parametrize(
    "args, rule",
    [
        (("a", 0, 170000000012345), "16-digit"),
        (("a", 0, 17000000001234567), "16-digit"),
        (("a", -1, TS), "output_index must be a non-negative int"),
        (("a>b", 0, TS), "pattern rejects"),
        (("a b", 0, TS), "pattern rejects"),
    ],
)
def test_format_npy_name_errors(args, rule):
    with pytest.raises(NameFormatError, match=rule):
        format_npy_name(*args)


def test_parse_npy_name_rejects_other_files():
    with pytest.raises(NameFormatError, match="pattern"):
        parse_npy_name("a.1.2.3.npy.bak")
    with pytest.raises(NameFormatError):
        parse_npy_name("a.1700000000123456.npy")  # no output index


# ----------------------------------------------------------------------------- time folders


def test_time_dirs():
    assert parse_time_dir("20240229235959") == datetime.datetime(2024, 2, 29, 23, 59, 59)
    assert parse_time_dir("/dump/20240101000000") == datetime.datetime(2024, 1, 1)
    assert parse_time_dir("20230229000000") is None  # not a leap year
    assert parse_time_dir("2024010100000") is None
    assert parse_time_dir("20240101000000\n") is None
    assert parse_time_dir("0") is None
    assert format_time_dir(datetime.datetime(2024, 3, 5, 7, 8, 9)) == "20240305070809"


@pytest.mark.parametrize("op_name", ["rnn/lstm/add_3", "a.b/c", "weird name:x"])
def test_golden_npy_name_of_an_op_named_before_is_the_checked_name(op_name):
    # The second and later names of an op come from its remembered stem: the same names as checked ones,
    # and fields the pattern rejects still raise (no remembered stem lets a bad name through).
    first = golden_npy_name(op_name, 0, 1700000000000000)
    assert NUMPY_DUMP_PATTERN.fullmatch(first)
    for index, stamp in ((0, 1700000000000000), (7, 1799999999999999), (12, 1000000000000000)):
        name = golden_npy_name(op_name, index, stamp)
        assert name == format_npy_name(op_name.replace(" ", "_").replace(":", "_"), index, stamp)
    for index, stamp in ((True, 1700000000000000), (-1, 1700000000000000), (0, 170000000000000),
                         (0, -170000000000000), (0, 17000000000000000)):
        with pytest.raises(NameFormatError):
            golden_npy_name(op_name, index, stamp)


@pytest.mark.parametrize("args", [("Add", "a\tb", 1, 2, 3), ("Add", "x", True, 2, 3), ("Add", "x", 1, False, 3),
                                  ("Add", "x", 1, 2, -3), ("Add", "x", 1, -2, 3), ("", "x", 1, 2, 3),
                                  ("Add", "x", 1, 2, 3.0)])
def test_the_common_name_checks_as_every_name(args):
    """The plain name of a dump file (no FFTS+ field, a stream id) is built without the general
    loop; it refuses what that loop refuses."""
    with pytest.raises(NameFormatError):
        format_dump_name(*args)


def test_the_common_name_is_the_general_form():
    big = 10 ** 40
    assert format_dump_name("A b", "c/d", big, 0, big, stats=True) == "A_b.c_d.{0}.0.{0}.csv".format(big)
    assert format_dump_name("MatMul", "\u00fc/n", 0, 0, 0) == "MatMul.\u00fc_n.0.0.0"


class _Numbered(int):
    """An int subclass with its own str(): a name writes str() of a number, as it always did."""

    def __str__(self):
        return "seven"


def test_one_path_keeps_the_rules_of_every_field():
    # non-printable but not a control character: allowed (only controls and separators are refused)
    assert format_dump_name("Add", "a\u00a0b", 1, 2, 3) == "Add.a\u00a0b.1.2.3"
    with pytest.raises(NameFormatError, match="op_type contains '\\\\x7f'"):
        format_dump_name("A\x7f", "x", 1, 2, 3)
    assert format_dump_name("Add", "x", _Numbered(7), 2, 3) == "Add.x.seven.2.3"
    assert format_dump_name("Add", "x", 1, None, _Numbered(7), stats=True) == "Add.x.1.seven.csv"
    # the first bad number is named, the common fields before the FFTS+ ones
    with pytest.raises(NameFormatError, match="task_id must be"):
        format_dump_name("Add", "x", -1, 2, 3, context_id=-1, thread_id=0, device_id=0)
    with pytest.raises(NameFormatError, match="context_id must be a non-negative int, got -1"):
        format_dump_name("Add", "x", 1, 2, 3, context_id=-1, thread_id=0, device_id=0)
    with pytest.raises(NameFormatError, match="device_id must be a non-negative int, got True"):
        format_dump_name("Add", "x", 1, None, 3, context_id=0, thread_id=0, device_id=True)
    assert format_dump_name("Add", "x", 1, None, 3, context_id=0, thread_id=0, device_id=0) == "Add.x.1.3.4.0.0.0"


@pytest.mark.parametrize("op_name", ["fresh_a/b.c/MatMul", "fresh-b/x_1", "fresh\u00e9/y", "fresh>z", "fresh.", ""])
def test_golden_npy_name_of_a_first_seen_name_is_the_checked_one(op_name):
    """A name seen for the first time takes the fast stem check: the same name as format_npy_name's,
    or (characters the pattern rejects) the renamed one; an empty name still fails its check."""
    flat = op_name.replace("/", "_").replace(".", "_")
    if not flat:
        with pytest.raises(NameFormatError):
            golden_npy_name(op_name, 0, 1700000000000000)
        return
    expected = format_npy_name(re.sub(r"[^A-Za-z0-9_-]", "_", flat), 2, 1700000000000001)
    assert golden_npy_name(op_name, 2, 1700000000000001) == expected
    assert golden_npy_name(op_name, 3, 1700000000000002) == expected.replace(".2.1700000000000001.", ".3.1700000000000002.")
    with pytest.raises(NameFormatError, match="16-digit"):
        golden_npy_name(op_name, 0, 17)


def test_sanitize_replaces_exactly_the_characters_its_pattern_names():
    # sanitize's chained replaces and the pattern built from names._SANITIZED are one rule: a character
    # added to one and not the other fails here
    from npu_dump_hook.formats import names

    every = "".join(chr(code) for code in range(1, 0x250))
    assert names.sanitize(every) == names._SANITIZE.sub("_", every)
    assert {char for char in every if names.sanitize(char) == "_" != char} == set(names._SANITIZED)
