"""v2 / legacy dump files: golden bytes, layout, validation rules in order, dtypes, laziness."""
import builtins
import logging
import os
import struct

import numpy as np
import pytest

from npu_dump_hook.errors import DumpFileError, OptionError
from npu_dump_hook.formats import dump_file as dfm
from npu_dump_hook.formats import dump_schema
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, read_header, write_dump_file

GOLDEN_52 = bytes.fromhex(
    "0a03322e3010c0c480c1c1c482031a1d080110021a040a02020222090a05612f622e63"
    "200230103a040a0202023205612f622e63"
)
# Same header with original_op.format NCHW (0): the field disappears (reference §1.7: 50 bytes).
GOLDEN_50 = bytes.fromhex(
    "0a03322e3010c0c480c1c1c48203" "1a1b" "08011002" "1a040a020202" "2207" "0a05612f622e63"
    "3010" "3a040a020202" "3205612f622e63"
)
T0 = 1700000000123456


def _golden_tensor(**kw):
    return DumpTensor(np.array([[0.0, 1.0], [2.0, 3.0]], dtype=np.float32), original_name="a/b.c", **kw)


def test_build_header_matches_golden_52_bytes():
    header = dfm.build_header("a/b.c", outputs=[_golden_tensor()], dump_time=T0)
    assert dfm.encode_header(header) == GOLDEN_52


def test_original_format_nchw_gives_golden_50_bytes():
    header = dfm.build_header("a/b.c", outputs=[_golden_tensor(original_format="NCHW")], dump_time=T0)
    assert dfm.encode_header(header) == GOLDEN_50


def test_written_file_is_prefix_header_payload(tmp_path):
    path = tmp_path / "Add.a_b_c.1.2.1700000000123456"
    size = write_dump_file(path, "a/b.c", outputs=[_golden_tensor()], dump_time=T0)
    # u64 LE 52 | header | float32 LE 0.0 1.0 2.0 3.0
    expected = bytes.fromhex("3400000000000000") + GOLDEN_52 + bytes.fromhex("000000000000803f0000004000004040")
    assert path.read_bytes() == expected
    assert size == 8 + 52 + 16
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind


def _mixed_file(tmp_path):
    path = tmp_path / "mixed"
    write_dump_file(
        path, "op",
        inputs=[np.array([1, 2], dtype=np.int32), np.array([True, False, True])],
        outputs=[np.array([1.5, -2.0], dtype=np.float16)],
        buffers=[b"abc"], workspaces=[b"xy"], dump_time=5, attrs={"_sgt_json_info": "{}"},
    )
    return path


def test_payload_order_inputs_outputs_buffers_workspaces(tmp_path):
    path = _mixed_file(tmp_path)
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    start = 8 + header_len
    # int32 1, 2 | bools 1 0 1 | float16 1.5 (0x3e00) -2.0 (0xc000) | "abc" | "xy"
    assert raw[start:] == bytes.fromhex("0100000002000000" "010001" "003e00c0") + b"abc" + b"xy"
    with DumpFile.open(path) as dump:
        assert dump.version == "v2" and dump.header_len == header_len
        offsets = [t.offset for t in dump.tensors()]
        assert offsets == [start, start + 8, start + 11, start + 15, start + 18]
        assert dump.array("input", 0).tolist() == [1, 2]
        assert dump.array("input", 1).tolist() == [True, False, True]
        assert dump.array("output", 0).tolist() == [1.5, -2.0]
        assert dump.array("buffer", 0).tobytes() == b"abc"
        assert dump.array("workspace", 0).tobytes() == b"xy"
        summary = dump.summary()
    assert summary["op_name"] == "op" and summary["dump_time"] == 5 and summary["format"] == "v2"
    assert summary["attrs"] == {"_sgt_json_info": "{}"}
    assert summary["inputs"][1] == {"index": 1, "dtype": "DT_BOOL", "format": "ND", "shape": [3],
                                    "original_shape": [3], "size": 3, "original_name": None}
    assert summary["outputs"][0]["dtype"] == "DT_FLOAT16"
    assert summary["workspaces"] == [{"index": 0, "dtype": "DT_UINT8", "format": "ND", "shape": [2],
                                      "original_shape": [2], "size": 2, "original_name": None}]


def test_arrays_are_read_only_memory_maps_and_survive_close(tmp_path):
    path = _mixed_file(tmp_path)
    dump = DumpFile.open(path)
    view = dump.array("input", 0)
    copied = dump.array("input", 0, copy=True)
    dump.close()
    assert not view.flags.writeable and copied.flags.writeable
    assert view.tolist() == copied.tolist() == [1, 2]


_SURVIVE_CLOSE_SCRIPT = """
import gc, sys
import numpy as np
from npu_dump_hook.formats.dump_file import DumpFile
dump = DumpFile.open(sys.argv[1])
views = [dump.array("input", 0), dump.array("output", 0), dump.array("buffer", 0)]
views.append(views[1].view(np.uint16).reshape(2))  # a view of a view: base chain only
dump.close()
del dump
gc.collect()
print([v.tolist() for v in views])
"""


def test_arrays_outlive_their_dump_file_in_a_separate_process(tmp_path):
    # numpy < 1.20 read mmap objects through the old buffer protocol: arrays kept no export on
    # the map and close() unmapped memory they still pointed at, a segfault on the next read.
    # A child process turns such a crash into a failure instead of killing the test run.
    import subprocess
    import sys

    path = _mixed_file(tmp_path)
    done = subprocess.run([sys.executable, "-c", _SURVIVE_CLOSE_SCRIPT, str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.decode().strip() == "[[1, 2], [1.5, -2.0], [97, 98, 99], [15872, 49152]]"


class _CountingFile(object):
    def __init__(self, inner, counter):
        self._inner, self._counter = inner, counter

    def read(self, n=-1):
        data = self._inner.read(n)
        self._counter.append(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._inner.close()


def test_read_header_reads_only_prefix_and_header(tmp_path, monkeypatch):
    path = tmp_path / "big"
    write_dump_file(path, "big", outputs=[np.zeros(1 << 18, dtype=np.float32)], dump_time=1)
    header_len = struct.unpack("<Q", path.read_bytes()[:8])[0]
    reads = []
    monkeypatch.setattr(dfm, "open", lambda *a, **k: _CountingFile(builtins.open(*a, **k), reads), raising=False)
    header = read_header(path)
    assert header.outputs[0].size == 4 << 18
    assert sum(reads) <= 12 + header_len  # prefix (+4 bytes of magic check) and the header


def test_read_header_bytes_decodes_a_common_file_without_opening_it(tmp_path):
    path = tmp_path / "dump"
    write_dump_file(path, "op", outputs=[np.arange(6, dtype=np.float32).reshape(2, 3)], dump_time=T0)
    data = path.read_bytes()
    header = dfm.read_header_bytes(str(tmp_path / "gone"), data, len(data))  # no such file: never opened
    assert header.summary() == dict(read_header(path).summary(), warnings=[])
    assert header.path == str(tmp_path / "gone")


def test_read_header_bytes_reads_the_file_when_the_head_lacks_the_header(tmp_path):
    path = tmp_path / "dump"
    write_dump_file(path, "op", outputs=[np.zeros(4, dtype=np.float32)], dump_time=T0)
    data = path.read_bytes()
    header_len = struct.unpack("<Q", data[:8])[0]
    got = dfm.read_header_bytes(path, data[:8 + header_len - 1], len(data))
    assert got.summary() == read_header(path).summary()
    with pytest.raises(FileNotFoundError):  # it needed the file: the head holds only part of the header
        dfm.read_header_bytes(tmp_path / "gone", data[:8 + header_len - 1], len(data))


@pytest.mark.parametrize("content, strict", [
    (b"", False), (b"\x01" * 8, False),  # too small
    (struct.pack("<Q", 4) + b"\x5a\x5a\x5a\x5a" + b"\0" * 8, False),  # Nano
    (struct.pack("<Q", 2 ** 40) + b"\0" * 8, False),  # forged length: nothing allocated
    (struct.pack("<Q", 3) + b"\x0a\x05\x32", False),  # field past its message
    (struct.pack("<Q", 2) + b"\x0b\x0c", False),  # a group (wire type 3)
    (None, True),  # trailing bytes, strict
])
def test_read_header_bytes_refuses_as_read_header_does(tmp_path, content, strict):
    path = tmp_path / "dump"
    if content is None:
        write_dump_file(path, "op", outputs=[np.zeros(4, dtype=np.float32)], dump_time=T0)
        content = path.read_bytes() + b"tail"
    path.write_bytes(content)
    with pytest.raises(DumpFileError) as expected:
        read_header(path, strict=strict)
    with pytest.raises(DumpFileError) as got:
        dfm.read_header_bytes(path, content, len(content), strict=strict)
    assert (got.value.rule, got.value.offset) == (expected.value.rule, expected.value.offset)


def test_read_header_bytes_reads_legacy_files_from_the_file(tmp_path):
    legacy = dump_schema.DumpData(version="1.0", op_name="old")
    legacy.output.add(data_type=1, size=8, data=b"\0" * 8).shape.dim.extend([2])
    path = tmp_path / "legacy"
    path.write_bytes(legacy.SerializeToString())
    data = path.read_bytes()
    assert dfm.read_header_bytes(path, data, len(data)).version == "legacy"


# --- validation, in documented order -------------------------------------------

def _header_bytes(**fields):
    header = dump_schema.DumpData(version="2.0", op_name="x")
    out = header.output.add(data_type=fields.get("data_type", 1), size=fields.get("size", 16))
    out.shape.dim.extend(fields.get("shape", [2, 2]))
    return header.SerializeToString()


def _write(tmp_path, data, name="f"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _error(path, strict=False):
    with pytest.raises(DumpFileError) as info:
        DumpFile.open(path, strict=strict)
    assert info.value.path == str(path)
    return info.value


def test_rule1_file_too_small(tmp_path):
    err = _error(_write(tmp_path, b"\x01" * 8))
    assert err.offset == 0 and "too small (8 bytes)" in err.rule


def test_rule2_nano_tlv_refused(tmp_path):
    err = _error(_write(tmp_path, struct.pack("<Q", 4) + b"\x5a\x5a\x5a\x5a" + b"\0" * 8))
    assert err.offset == 8 and "Nano TLV" in err.rule


@pytest.mark.parametrize("header_len", [0, 2 ** 31, 2 ** 64 - 1])
def test_rule3_header_length_out_of_bounds_allocates_nothing(tmp_path, header_len):
    err = _error(_write(tmp_path, struct.pack("<Q", header_len) + b"\0" * 64))
    assert err.offset == 0 and "header length {} outside [1, 2**31)".format(header_len) in err.rule


def test_rule3_header_length_past_eof(tmp_path):
    err = _error(_write(tmp_path, struct.pack("<Q", 100) + b"\x0a" * 50))
    assert err.offset == 0 and "header length 100 runs past end of file (58 bytes)" in err.rule


def test_rule4_header_does_not_decode(tmp_path):
    err = _error(_write(tmp_path, struct.pack("<Q", 4) + b"\xff\xff\xff\xff"))
    assert err.offset == 8 and "header does not decode as DumpData" in err.rule


def test_rule5_payload_overrun_names_the_tensor_and_its_offset(tmp_path):
    header = _header_bytes()
    err = _error(_write(tmp_path, struct.pack("<Q", len(header)) + header + b"\0" * 15))
    assert err.offset == 8 + len(header)
    assert "payload of output[0] (16 bytes) runs past end of file" in err.rule


def test_rule5_is_checked_before_rule6(tmp_path):
    header = _header_bytes(size=12)  # both too short a file and a wrong element count
    err = _error(_write(tmp_path, struct.pack("<Q", len(header)) + header + b"\0" * 4))
    assert "runs past end of file" in err.rule


def test_rule6_element_count_disagrees_with_size(tmp_path):
    header = _header_bytes(size=12)
    err = _error(_write(tmp_path, struct.pack("<Q", len(header)) + header + b"\0" * 12))
    assert err.offset == 8 + len(header)
    assert "output[0]: shape [2, 2] x DT_FLOAT (32 bits) needs 16 bytes but size is 12" in err.rule


def test_rule6_bit_packed_int4_size(tmp_path):
    header = _header_bytes(data_type=28, shape=[3], size=1)  # 3 int4 values need 2 bytes
    err = _error(_write(tmp_path, struct.pack("<Q", len(header)) + header + b"\0"))
    assert "needs 2 bytes but size is 1" in err.rule


def test_rule7_trailing_bytes_warn_or_fail_when_strict(tmp_path, caplog):
    header = _header_bytes()
    end = 8 + len(header) + 16
    path = _write(tmp_path, struct.pack("<Q", len(header)) + header + b"\0" * 16 + b"xyz")
    with caplog.at_level(logging.WARNING, logger=dfm.__name__):
        dump = DumpFile.open(path)
    assert dump.warnings == ["3 trailing bytes after the last payload (at byte {})".format(end)]
    assert "3 trailing bytes" in caplog.text
    err = _error(path, strict=True)
    assert err.offset == end and err.rule == "3 trailing bytes after the last payload"


def test_header_with_other_version_is_read_as_v2_with_warning(tmp_path):
    header = dump_schema.DumpData(version="", op_name="x").SerializeToString()
    dump = DumpFile.open(_write(tmp_path, struct.pack("<Q", len(header)) + header))
    assert dump.version == "v2" and "is not '2.0'" in dump.warnings[0]


# --- legacy proto-only files -----------------------------------------------------

def _legacy_bytes(size_field=None):
    header = dump_schema.DumpData(version="1.0", op_name="old/op", dump_time=7)
    out = header.output.add(data_type=7, format=2, data=np.array([5, -6, 7], dtype="<i4").tobytes())
    out.shape.dim.append(3)
    if size_field is not None:
        out.size = size_field
    inp = header.input.add(data_type=2, data=np.array([0.5], dtype="<f2").tobytes())
    inp.shape.dim.append(1)
    return header.SerializeToString()


def test_legacy_file_is_detected_and_read(tmp_path):
    path = _write(tmp_path, _legacy_bytes())
    with DumpFile.open(path) as dump:
        assert dump.version == "legacy" and dump.header_len is None
        assert dump.op_name == "old/op" and dump.dump_time == 7
        assert dump.outputs[0].offset is None and dump.outputs[0].size == 12
        assert dump.array("output", 0).tolist() == [5, -6, 7]
        assert dump.array("input", 0).tolist() == [0.5]


def test_legacy_size_field_must_match_data(tmp_path):
    err = _error(_write(tmp_path, _legacy_bytes(size_field=16)))
    assert "legacy output[0]: size 16 but data holds 12 bytes" in err.rule


# --- dtypes --------------------------------------------------------------------

@pytest.mark.parametrize("dtype, name", [
    ("<f2", "DT_FLOAT16"), ("<f4", "DT_FLOAT"), ("<f8", "DT_DOUBLE"), ("i1", "DT_INT8"),
    ("u1", "DT_UINT8"), ("<i2", "DT_INT16"), ("<u2", "DT_UINT16"), ("<i4", "DT_INT32"),
    ("<u4", "DT_UINT32"), ("<i8", "DT_INT64"), ("<u8", "DT_UINT64"), ("?", "DT_BOOL"),
    ("<c8", "DT_COMPLEX64"), ("<c16", "DT_COMPLEX128"),
])
def test_numpy_dtypes_round_trip(tmp_path, dtype, name):
    values = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    path = tmp_path / "t"
    write_dump_file(path, "op", outputs=[values])
    with DumpFile.open(path) as dump:
        info = dump.outputs[0]
        assert info.dtype_name == name and info.dtype == np.dtype(dtype)
        got = dump.array("output", 0)
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, values)


def test_big_endian_arrays_are_written_little_endian(tmp_path):
    path = tmp_path / "be"
    write_dump_file(path, "op", outputs=[np.array([1.0], dtype=">f4")])
    assert path.read_bytes()[-4:] == bytes.fromhex("0000803f")


def test_bf16_raw_bits_and_exact_widening(tmp_path, monkeypatch):
    bits = np.array([0x3F80, 0xC000, 0x3FC0], dtype=np.uint16)  # 1.0, -2.0, 1.5
    path = tmp_path / "bf"
    write_dump_file(path, "op", outputs=[DumpTensor(bits, data_type="DT_BF16")])
    monkeypatch.setattr(dfm, "_ml_dtypes", None)  # behave as without ml_dtypes
    with DumpFile.open(path) as dump:
        assert dump.outputs[0].dtype is None
        with pytest.raises(DumpFileError, match="DT_BF16.*without the optional package ml_dtypes"):
            dump.array("output", 0)
        raw = dump.array("output", 0, raw=True)
    assert raw.dtype == np.uint16 and raw.tolist() == [0x3F80, 0xC000, 0x3FC0]
    assert dfm.bfloat16_bits_to_float32(raw).tolist() == [1.0, -2.0, 1.5]


def test_bf16_with_ml_dtypes(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([1.0, -2.0, 1.5], dtype=ml_dtypes.bfloat16)
    path = tmp_path / "bf"
    write_dump_file(path, "op", outputs=[values])
    assert path.read_bytes()[-6:] == bytes.fromhex("803f00c0c03f")
    with DumpFile.open(path) as dump:
        assert dump.outputs[0].dtype_name == "DT_BF16"
        got = dump.array("output", 0)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16) and got.astype(np.float32).tolist() == [1.0, -2.0, 1.5]


def test_types_numpy_lacks_need_raw(tmp_path):
    path = tmp_path / "h8"
    write_dump_file(path, "op", outputs=[
        DumpTensor(np.array([[1, 2], [3, 4]], dtype=np.uint8), data_type="DT_HIFLOAT8"),
        DumpTensor(np.array([0x21, 0x03], dtype=np.uint8), data_type="DT_INT4", shape=[3]),
    ])
    with DumpFile.open(path) as dump:
        with pytest.raises(DumpFileError, match="DT_HIFLOAT8, which numpy cannot hold; pass raw=True"):
            dump.array("output", 0)
        assert dump.array("output", 0, raw=True).tolist() == [[1, 2], [3, 4]]
        assert dump.array("output", 1, raw=True).tolist() == [0x21, 0x03]  # packed bytes, flat


def test_original_shape_conversion_through_dump_file(tmp_path):
    device = np.array([[[[[0, 10, 20, 0], [1, 11, 21, 0]]]]], dtype=np.float32)  # NC1HWC0, C0=4
    path = tmp_path / "conv"
    write_dump_file(path, "conv", outputs=[DumpTensor(
        device, format="NC1HWC0", original_shape=[1, 1, 2, 3], original_name="conv", original_format="NHWC")])
    with DumpFile.open(path) as dump:
        assert dump.outputs[0].original_format == "NHWC"
        assert dump.array("output", 0, original_shape=True).tolist() == [[[[0, 10, 20], [1, 11, 21]]]]


def test_writer_rejects_bad_arguments(tmp_path):
    with pytest.raises(OptionError, match="no DumpData data type"):
        write_dump_file(tmp_path / "x", "op", outputs=[np.array(["a"])])
    with pytest.raises(OptionError, match="do not match shape"):
        DumpTensor(np.zeros(3, dtype=np.float32), shape=[2, 2])
    with pytest.raises(OptionError, match="not a DumpData enum name"):
        DumpTensor(np.zeros(3, dtype=np.float32), format="NOPE")
    assert os.listdir(tmp_path) == []


def test_tensor_index_out_of_range(tmp_path):
    with DumpFile.open(_mixed_file(tmp_path)) as dump:
        with pytest.raises(OptionError, match="has 1 output tensor"):
            dump.array("output", 1)
        with pytest.raises(OptionError, match="kind"):
            dump.tensors("outputs")


@pytest.mark.parametrize("varint, rule", [
    (b"\xff" * 11 + b"\x01", "varint longer than 10 bytes"),
    (b"\xff" * 10, "varint longer than 10 bytes"),   # ten continuation bytes, nothing after
    (b"\xff" * 9, "truncated varint"),
    (b"\xff\xff", "truncated varint"),
])
def test_broken_varints_are_named_at_their_offset(tmp_path, varint, rule):
    header = b"\x08" + varint  # field 1 (varint) whose value never ends
    path = tmp_path / "Add.add.1.2.1700000000000000"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(DumpFileError) as error:
        read_header(str(path))
    assert rule in error.value.rule and error.value.offset == 9


def test_open_small_reads_the_file_once_and_matches_open(tmp_path, monkeypatch):
    path = _mixed_file(tmp_path)
    with DumpFile.open(path) as dump:
        expected = (dump.summary(), [dump.array(kind, index).tolist() for kind, index in
                                     (("input", 0), ("input", 1), ("output", 0))])
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    with DumpFile.open_small(path) as dump:
        got = (dump.summary(), [dump.array(kind, index).tolist() for kind, index in
                                (("input", 0), ("input", 1), ("output", 0))])
        assert not dump.array("output", 0).flags.writeable
    assert got == expected and opened == [str(path)]


def test_open_small_refuses_as_open_does(tmp_path):
    path = tmp_path / "dump"
    write_dump_file(path, "op", outputs=[np.zeros(4, dtype=np.float32)], dump_time=T0)
    path.write_bytes(path.read_bytes()[:-2])  # payload past the end of file
    with pytest.raises(DumpFileError) as expected:
        DumpFile.open(path)
    with pytest.raises(DumpFileError) as got:
        DumpFile.open_small(path)
    assert (got.value.rule, got.value.offset) == (expected.value.rule, expected.value.offset)
    big = tmp_path / "big"  # over the limit: read as open() reads it
    write_dump_file(big, "op", outputs=[np.arange(64, dtype=np.float32)], dump_time=T0)
    with DumpFile.open_small(big, limit=16) as dump:
        assert dump.array("output", 0).tolist() == list(range(64))


def test_write_dump_file_in_place_writes_the_same_bytes(tmp_path):
    atomic, in_place = tmp_path / "a" / "f", tmp_path / "b" / "f"
    atomic.parent.mkdir()
    in_place.parent.mkdir()
    sizes = [write_dump_file(path, "a/b.c", outputs=[_golden_tensor()], dump_time=T0, atomic=flag)
             for path, flag in ((atomic, True), (in_place, False))]
    assert sizes[0] == sizes[1] and atomic.read_bytes() == in_place.read_bytes()
    assert os.listdir(in_place.parent) == ["f"]


def test_write_dump_file_in_place_removes_a_file_it_could_not_finish(tmp_path, monkeypatch):
    from npu_dump_hook.formats import _dump_writer

    def failing(array):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(_dump_writer, "_little_endian_bytes", failing)  # stops after the header
    with pytest.raises(OSError):
        write_dump_file(tmp_path / "f", "op", outputs=[np.zeros(1, np.float32)], atomic=False)
    assert os.listdir(tmp_path) == []


def test_write_dump_file_in_place_streams_large_payloads_with_the_same_bytes(tmp_path, monkeypatch):
    """Over _ONE_WRITE_BYTES the in-place write streams through a file object: same bytes, and a
    file it could not finish is removed there too."""
    from npu_dump_hook.formats import _dump_writer
    monkeypatch.setattr(_dump_writer, "_ONE_WRITE_BYTES", 0)
    atomic, streamed = tmp_path / "a", tmp_path / "b"
    sizes = [write_dump_file(path, "a/b.c", outputs=[_golden_tensor()], dump_time=T0, atomic=flag)
             for path, flag in ((atomic, True), (streamed, False))]
    assert sizes[0] == sizes[1] == len(streamed.read_bytes()) and atomic.read_bytes() == streamed.read_bytes()
    real = _dump_writer._little_endian_bytes
    monkeypatch.setattr(_dump_writer, "_little_endian_bytes",
                        lambda array: real(array) if array.size > 1 else (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.raises(OSError):
        write_dump_file(tmp_path / "c", "op", outputs=[np.zeros(4, np.float32)], inputs=[np.zeros(1, np.float32)],
                        atomic=False)
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


def test_write_dump_file_in_place_one_write_resumes_a_short_write_and_removes_a_failed_file(tmp_path, monkeypatch):
    """The one-call write of a small file continues after a short os.write, and a file whose
    write fails is removed."""
    from npu_dump_hook.formats import _dump_writer
    real_write, calls = os.write, []

    def short(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(data[:3]))
    monkeypatch.setattr(_dump_writer.os, "write", short)
    size = write_dump_file(tmp_path / "f", "a/b.c", outputs=[_golden_tensor()], dump_time=T0, atomic=False)
    monkeypatch.setattr(_dump_writer.os, "write", real_write)
    write_dump_file(tmp_path / "g", "a/b.c", outputs=[_golden_tensor()], dump_time=T0)
    assert (tmp_path / "f").read_bytes() == (tmp_path / "g").read_bytes() and size == calls[0]
    assert len(calls) == -(-size // 3)  # 3 bytes a call, until all of it is written

    def failing(fd, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(_dump_writer.os, "write", failing)
    with pytest.raises(OSError):
        write_dump_file(tmp_path / "h", "op", outputs=[np.zeros(1, np.float32)], atomic=False)
    assert sorted(os.listdir(tmp_path)) == ["f", "g"]
