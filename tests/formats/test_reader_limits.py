"""Regression tests: what the format readers refuse, and that they refuse it with our errors.

Each test is built from a reproduction of a reader problem: headers that amplified memory
180-500x, header lengths read whole before decoding, bare ValueErrors from shapes numpy
cannot hold and from numbers over Python's int-string limit, line readers that blew a
10 MB line or millions of short lines up into hundreds of MB. Memory and time are measured
in test_fuzz_readers.py.
"""
import struct

import numpy as np
import pytest

from npu_dump_hook.errors import DumpFileError, FormatError, NameFormatError, OptionError, StatsFormatError
from npu_dump_hook.formats import device_format, mapping_csv, stats_csv
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, read_header, write_dump_file
from npu_dump_hook.formats.names import parse_dump_name, parse_graph_file_name, parse_npy_name

from helpers.wire import ld, varint, vi

MIB = 1024 * 1024
LIMIT_TENSORS = 65536  # dump_file.MAX_TENSORS
LIMIT_DIMS = 64  # dump_file.MAX_DIMS
LIMIT_ITEMS = 1 << 20  # dump_file.MAX_HEADER_ITEMS (a dim counts two)


# --- hand-encoded DumpData wire format (helpers.wire) -------------------------------

def shape(dims):
    return ld(1, b"".join(varint(d) for d in dims))


VERSION = ld(1, b"2.0")


def write_v2(path, header, payload=b""):
    with open(str(path), "wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header + payload)
    return str(path)


def output(data_type=1, dims=(), size=0, original=None, fmt=2):
    body = vi(1, data_type) + vi(2, fmt) + ld(3, shape(dims)) + vi(6, size)
    if original is not None:
        body += ld(7, shape(original))
    return ld(3, body)


# --- 1. header cost ---------------------------------------------------------------

def test_more_tensors_than_the_limit_are_refused_before_protobuf_parses_them(tmp_path):
    # The reproduction listed 3,000,000 empty outputs in 6 MB (9.8 s, 1.09 GB); 100,000 show it.
    path = write_v2(tmp_path / "dump", VERSION + b"\x1a\x00" * 100000)
    with pytest.raises(DumpFileError) as error:
        read_header(path)
    assert error.value.path == path
    assert "more than 65536 tensors" in error.value.rule
    assert error.value.offset == 8 + len(VERSION) + 2 * LIMIT_TENSORS  # the 65,537th tensor


def test_the_tensor_limit_counts_all_kinds_together(tmp_path):
    header = VERSION + b"\x1a\x00" * 30000 + b"\x22\x00" * 30000 + b"\x2a\x00" * 3000 + b"\x42\x00" * 3000
    path = write_v2(tmp_path / "dump", header)
    with pytest.raises(DumpFileError, match="more than 65536 tensors"):
        read_header(path)


def test_a_header_at_the_tensor_limit_is_read(tmp_path):
    path = write_v2(tmp_path / "dump", VERSION + b"\x1a\x00" * (LIMIT_TENSORS - 1) + b"\x42\x00")
    header = read_header(path)
    assert len(header.outputs) == LIMIT_TENSORS - 1 and len(header.workspaces) == 1


def test_header_length_over_64_mib_is_refused_before_reading(tmp_path):
    # One flipped bit in the length of a large dump: the reader used to read 2 GiB and decode it.
    path = str(tmp_path / "big")
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", 2 ** 31 - 1) + VERSION)
        handle.truncate(8 + 2 ** 31 - 1 + 100)  # sparse: costs no disk
    with pytest.raises(DumpFileError) as error:
        read_header(path)
    assert error.value.offset == 0 and "64 MiB" in error.value.rule and error.value.path == path


def test_header_length_just_over_the_read_limit_is_refused(tmp_path):
    path = str(tmp_path / "big")
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", 64 * MIB + 1) + VERSION)
        handle.truncate(8 + 64 * MIB + 1)
    with pytest.raises(DumpFileError, match="exceeds the reader's limit of 67108864 bytes"):
        read_header(path)


def test_a_header_cut_at_an_end_group_tag_is_refused_by_every_protobuf_backend(tmp_path):
    # protobuf's C++ backend (TF 1.15 images) parsed the prefix before the tag, warned, and accepted it.
    header = VERSION + ld(6, b"op") + b"\x0c" + b"\x00" * 20
    path = write_v2(tmp_path / "dump", header)
    with pytest.raises(DumpFileError) as error:
        read_header(path)
    assert "does not decode as DumpData" in error.value.rule and "wire type 4" in error.value.rule
    assert error.value.offset == 8 + len(VERSION) + 4


@pytest.mark.parametrize("tensor", [
    ld(3, ld(3, shape([1] * 65))),
    ld(3, ld(3, b"\x08\x01" * 65)),
    ld(3, ld(3, shape([1] * 40)) + ld(3, shape([1] * 40))),
    ld(3, ld(7, shape([1] * 65))),
    ld(4, ld(6, shape([1] * 65))),
    ld(3, ld(10, b"") * 65),
    ld(3, ld(3, shape([2 ** 63] * 70))),
], ids=["packed", "unpacked", "shape-given-twice-is-merged", "original_shape", "input-original_shape",
        "dim_range", "long-packed-dims-not-counted"])
def test_more_dims_than_the_limit_are_refused(tmp_path, tensor):
    path = write_v2(tmp_path / "dump", VERSION + tensor)
    with pytest.raises(DumpFileError) as error:
        read_header(path)
    assert "more than 64" in error.value.rule and "[0]" in error.value.rule


def test_dims_count_two_items(tmp_path):
    # 8,100 outputs of 64 dims: 8,100 x (3 fields + 64 x 2) items > 2**20
    header = VERSION + ld(3, ld(3, shape([7] * 64))) * 8100
    with pytest.raises(DumpFileError, match="more than 1048576 items"):
        read_header(write_v2(tmp_path / "dump", header))
    read_header(write_v2(tmp_path / "dump", VERSION + ld(3, ld(3, shape([0] + [7] * 63))) * 7000))


def test_more_attrs_than_the_limit_are_refused(tmp_path):
    path = write_v2(tmp_path / "dump", VERSION + ld(7, ld(1, b"k")) * (LIMIT_TENSORS + 1))
    with pytest.raises(DumpFileError, match="more than 65536 attrs"):
        read_header(path)


def test_more_fields_than_the_limit_are_refused(tmp_path):
    # unknown varint fields: the C++ backend keeps a record of each
    path = write_v2(tmp_path / "dump", VERSION + vi(10, 0) * LIMIT_ITEMS)
    with pytest.raises(DumpFileError, match=r"more than 1048576 items \(protobuf fields at any depth"):
        read_header(path)


def test_a_legacy_file_over_the_limits_is_refused_with_the_legacy_rule(tmp_path):
    path = str(tmp_path / "legacy")
    with open(path, "wb") as handle:
        handle.write(b"\x1a\x00" * (LIMIT_TENSORS + 10) + ld(1, b"1.0"))
    with pytest.raises(DumpFileError, match="legacy file exceeds the reader's limits: more than 65536 tensors"):
        read_header(path)


def test_a_legacy_file_is_still_read(tmp_path):
    path = str(tmp_path / "legacy")
    data = np.arange(4, dtype=np.float32).tobytes()
    with open(path, "wb") as handle:
        handle.write(ld(1, b"1.0") + ld(3, vi(1, 1) + vi(2, 2) + ld(3, shape([2, 2])) + ld(5, data) + vi(6, 16)))
    with DumpFile.open(path) as dump:
        assert dump.version == "legacy"
        assert dump.array("output", 0).tolist() == [[0, 1], [2, 3]]


def test_the_writer_refuses_a_header_the_reader_would_refuse(tmp_path):
    with pytest.raises(OptionError, match="more than 65536 tensors"):
        write_dump_file(tmp_path / "dump", "op", buffers=[b""] * (LIMIT_TENSORS + 1))
    assert not list(tmp_path.iterdir())


# --- 2. shapes numpy cannot hold ---------------------------------------------------

def _numpy_holds(ndim):
    try:
        np.empty((1,) * ndim)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("ndim", [33, 64, 65])
def test_shapes_with_more_dims_than_numpy_holds_are_dump_file_errors(tmp_path, ndim):
    path = write_v2(tmp_path / "dump", VERSION + output(dims=[1] * ndim, size=4), b"\x00" * 4)
    try:
        with DumpFile.open(path) as dump:
            got = dump.array("output", 0)
    except DumpFileError as error:
        assert not _numpy_holds(ndim) or ndim > LIMIT_DIMS
        assert error.path == path and "dims" in error.rule
        return
    assert _numpy_holds(ndim) and got.shape == (1,) * ndim


@pytest.mark.parametrize("dims", [(0, 2 ** 63), (0, 2 ** 64 - 1), (2 ** 62, 0, 4), (0, 2 ** 61, 2)])
def test_zero_element_shapes_with_huge_dims_are_dump_file_errors(tmp_path, dims):
    path = write_v2(tmp_path / "dump", VERSION + output(dims=dims, size=0))
    with DumpFile.open(path) as dump:
        with pytest.raises(DumpFileError) as error:
            dump.array("output", 0)
    assert error.value.path == path and "output[0]" in error.value.rule


@pytest.mark.parametrize("fmt,device,original", [
    (2, (0,), (0, 2 ** 63)),  # ND: reshape to original
    (2, (0,), (0, 2 ** 64 - 1)),
    (2, (1,), (1,) * 65),
    (29, (0, 1, 1, 16, 16), (0, 2 ** 63, 5, 5)),  # FRACTAL_NZ
    (29, (0, 1, 1, 16, 16), (2 ** 62, 0, 4, 5, 5)),
])
def test_original_shapes_numpy_cannot_hold_are_dump_file_errors(tmp_path, fmt, device, original):
    count = int(np.prod(device))
    path = write_v2(tmp_path / "dump", VERSION + output(dims=device, size=4 * count, original=original, fmt=fmt),
                    b"\x00" * (4 * count))
    try:
        dump = DumpFile.open(path)
    except DumpFileError as error:  # more than 64 dims: refused with the header
        assert len(original) > LIMIT_DIMS and "more than 64 dims" in str(error)
        return
    with dump:
        with pytest.raises(DumpFileError) as error:
            dump.array("output", 0, original_shape=True)
    assert error.value.path == path and "output[0]" in error.value.rule


def test_original_shape_with_33_dims_on_numpy_1(tmp_path):
    original = (1,) * 33
    path = write_v2(tmp_path / "dump", VERSION + output(dims=(1,), size=4, original=original), b"\x00" * 4)
    with DumpFile.open(path) as dump:
        if _numpy_holds(33):
            assert dump.array("output", 0, original_shape=True).shape == original
        else:
            with pytest.raises(DumpFileError, match="33 dims"):
                dump.array("output", 0, original_shape=True)


def test_device_format_conversions_refuse_shapes_numpy_cannot_hold():
    with pytest.raises(FormatError, match="original shape"):
        device_format.to_original(np.empty(0, np.float32), "ND", (0, 2 ** 63), source="src")
    with pytest.raises(FormatError, match="ND shape"):
        device_format.fractal_nz_to_nd(np.empty((0, 1, 1, 16, 16), np.float32), (0, 2 ** 63, 5, 5), source="src")
    with pytest.raises(FormatError):
        device_format.to_original(np.empty(1, np.float32), "ND", (1,) * 65, source="src")


def test_shape_problem_follows_numpy():
    for shape, itemsize in [((0, 2 ** 63), 1), ((0, 2 ** 62, 2), 1), ((0, 2 ** 61, 2), 8), ((1,) * 65, 1),
                            ((0, 2 ** 62), 1), ((0, 2 ** 60), 8), ((3, 0, 2 ** 40), 4), ((1,) * 32, 1)]:
        size = 1
        for dim in shape:
            size *= dim
        try:  # reshape, as the readers do (numpy 1.18's np.empty of such shapes raises MemoryError)
            np.empty(size, dtype="u{}".format(itemsize)).reshape(shape)
            numpy_ok = True
        except ValueError:
            numpy_ok = False
        assert (device_format.shape_problem(shape, itemsize) is None) == numpy_ok, (shape, itemsize)


def test_from_original_without_a_layout_is_an_option_error():
    with pytest.raises(OptionError):
        device_format.from_original(np.zeros((1, 2, 2, 3)), "NC1HWC0", "ND")


# --- 2. numbers over Python's int-string limit ---------------------------------------

LONG = "1" * 5000  # over 3.11's 4,300-digit int() limit


def test_a_long_number_in_a_name_from_mapping_csv_is_a_name_format_error(tmp_path):
    path = tmp_path / "mapping.csv"
    path.write_text("123,Add.op.{}.2.1700000000123456\n".format(LONG))
    mapping = mapping_csv.read_mapping(path)  # a collection reads it, then parses every hashed name
    with pytest.raises(NameFormatError, match="task_id longer than 255 digits"):
        parse_dump_name("123", mapping)


@pytest.mark.parametrize("name", [
    "Add.op.1.{}.1700000000123456".format(LONG),
    "Add.op.1.2.{}".format(LONG),
    "Add.op.1.2.1700000000123456.4.{}.0.0".format(LONG),
    "Add.op.1.2.1700000000123456.4.0.0.{}.csv".format(LONG),
])
def test_long_numbers_in_dump_names_are_name_format_errors(name):
    with pytest.raises(NameFormatError, match="longer than 255 digits"):
        parse_dump_name(name)


def test_long_numbers_in_npy_and_graph_names():
    with pytest.raises(NameFormatError, match="longer than 255 digits"):
        parse_npy_name("op.{}.1700000000123456.npy".format(LONG))
    assert parse_graph_file_name("ge_proto_{}_Build.txt".format(LONG)) is None
    assert parse_graph_file_name("ge_proto_00000001_graph_{}_Build.txt".format(LONG)) is None
    assert parse_graph_file_name("ge_proto_00000001_graph_1_Build.txt").index == 1


def test_a_name_of_a_million_dots_is_refused_with_the_field_count():
    with pytest.raises(NameFormatError, match="found 1000001"):
        parse_dump_name("." * 1000000)


# --- 3. line readers ---------------------------------------------------------------

HEADER = ",".join(stats_csv.STATS_HEADER) + "\n"
ROW = "Input,0,16,DT_FLOAT,NCHW,1x4,1.5,-2,0.25,4,0,0,0\n"


def test_a_10_mb_stats_line_is_refused_at_its_start():
    data = (HEADER + "12," * (10 * 1000 * 1000 // 3) + "\n").encode()
    with pytest.raises(StatsFormatError) as error:
        stats_csv.parse_stats_text(data, "s.csv")
    assert error.value.offset == len(HEADER) and "line 2: longer than 65536 bytes" in error.value.rule


def test_a_stats_row_with_too_many_cells_names_their_count():
    with pytest.raises(StatsFormatError, match="line 2: 5001 cells, the header has 13"):
        stats_csv.parse_stats_text((HEADER + "1," * 5000 + "\n").encode(), "s.csv")


def test_stats_rows_over_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(stats_csv, "MAX_ROWS", 10)
    assert len(stats_csv.parse_stats_text((HEADER + ROW * 10).encode()).rows) == 10
    with pytest.raises(StatsFormatError, match="line 12: more than 10 rows"):
        stats_csv.parse_stats_text((HEADER + ROW * 11).encode())


@pytest.mark.parametrize("row,rule", [
    ("Input,{},16,DT_FLOAT,NCHW,1x4,1.5,-2,0.25,4,0,0,0".format(LONG), "Index"),
    ("Input,0,16,DT_FLOAT,NCHW,1x4,1.5,-2,0.25,{},0,0,0".format(LONG), "Count"),
    ("Input,0,16,DT_FLOAT,NCHW,{},1.5,-2,0.25,4,0,0,0".format(LONG), "Shape"),
    ("Input,0,16,DT_FLOAT,NCHW,{},1.5,-2,0.25,4,0,0,0".format("x".join(["1"] * 65)), "more than 64 dims"),
    ("Input,0,123456789012345678901,DT_FLOAT,NCHW,1x4,1.5,-2,0.25,4,0,0,0", "at most 20 digits"),
])
def test_long_numbers_and_shapes_in_stats_cells_are_stats_format_errors(row, rule):
    with pytest.raises(StatsFormatError, match=rule):
        stats_csv.parse_stats_text((HEADER + row + "\n").encode(), "s.csv")


def test_stats_lines_after_many_blank_lines_keep_their_numbers_and_offsets():
    data = (HEADER + "\n" * 100000 + "\r\n" + ROW + "bad\n").encode()
    with pytest.raises(StatsFormatError) as error:
        stats_csv.parse_stats_text(data, "s.csv")
    assert error.value.offset == len(HEADER) + 100002 + len(ROW)
    assert "line 100004" in error.value.rule
    assert len(stats_csv.parse_stats_text((HEADER + "\n" * 100000 + ROW).encode()).rows) == 1


def test_a_file_of_only_blank_lines_has_an_empty_header():
    with pytest.raises(StatsFormatError, match="line 1: header"):
        stats_csv.parse_stats_text(b"\n\n\n")
    with pytest.raises(StatsFormatError, match="empty file"):
        stats_csv.parse_stats_text(b"")


def test_a_mapping_csv_of_millions_of_short_lines_is_refused_at_its_memory_budget(monkeypatch):
    # The reproduction: 9M lines '{i},a' (89 MB) made a 0.94 GB dict. The budget is
    # 3 x input + 32 MiB; shrink the constant part to show it on a small file.
    monkeypatch.setattr(mapping_csv, "_BUDGET_BASE", 1 * MIB)
    data = "".join("{},a\n".format(i) for i in range(100000)).encode()
    with pytest.raises(NameFormatError) as error:
        mapping_csv.parse_mapping_text(data, "mapping.csv")
    assert "bytes of memory" in error.value.rule and error.value.offset < len(data)


def test_a_mapping_csv_of_real_lines_fits_the_budget():
    lines = "".join("{:020d},Conv2D.{}.1.2.{:016d}\n".format(i, "x" * 260, i) for i in range(20000))
    assert len(mapping_csv.parse_mapping_text(lines.encode())) == 20000


def test_repeated_mapping_lines_cost_nothing():
    data = b"123,Add.a.1.2.3\r\n" * 200000 + b"\n" * 100000 + b"456,Add.b.1.2.3"
    assert mapping_csv.parse_mapping_text(data) == {"123": "Add.a.1.2.3", "456": "Add.b.1.2.3"}


def test_a_mapping_line_over_1_mib_is_refused():
    data = b"1,a\n2," + b"b" * (MIB + 1) + b"\n"
    with pytest.raises(NameFormatError) as error:
        mapping_csv.parse_mapping_text(data, "mapping.csv")
    assert error.value.offset == 4 and "line 2: longer than 1048576 bytes" in error.value.rule
    name = "c" * (MIB - 2)
    assert mapping_csv.parse_mapping_text(("1," + name + "\r\n").encode()) == {"1": name}


def test_mapping_errors_keep_line_numbers_and_offsets_across_chunks():
    head = b"1,a\n" * 100000 + b"\n" * 300000  # spans several 256 KiB chunks
    data = head + b"x,b\n"
    with pytest.raises(NameFormatError) as error:
        mapping_csv.parse_mapping_text(data, "mapping.csv")
    assert error.value.offset == len(head) and "line 400001" in error.value.rule
    with pytest.raises(NameFormatError) as error:
        mapping_csv.parse_mapping_text(head + b"9,\xff\n", "mapping.csv")
    assert error.value.offset == len(head) + 2 and "not UTF-8" in error.value.rule


def test_the_writer_refuses_too_many_dims_and_walks_a_large_header(tmp_path):
    """A small header within the limits is written without the reader's walk; one with a shape
    over MAX_DIMS still gets the walk's refusal, and a header too large to bound without the walk
    (over MAX_HEADER_ITEMS // 2 bytes) is walked and written."""
    flat = DumpTensor(np.zeros(1, np.float32), shape=(1,) * (LIMIT_DIMS + 1))
    with pytest.raises(OptionError, match="more than 64 dims"):
        write_dump_file(tmp_path / "dims", "op", outputs=[flat])
    assert not list(tmp_path.iterdir())
    write_dump_file(tmp_path / "edge", "op", outputs=[DumpTensor(np.zeros(1, np.float32), shape=(1,) * LIMIT_DIMS)])
    big = {"note": "x" * (1 << 19)}
    write_dump_file(tmp_path / "big", "op", outputs=[np.arange(3, dtype=np.float32)], attrs=big)
    with DumpFile.open(str(tmp_path / "big")) as dump:
        assert dump.array("output", 0).tolist() == [0, 1, 2]
