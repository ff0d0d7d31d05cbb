"""Fuzzing every file-format reader: only the package's own errors may escape, memory and time stay bounded.

Readers: dump files (v2 and legacy: ``read_header``, ``DumpFile.open``, ``array`` with
``raw``/``copy``/``original_shape``, i.e. the device-format conversions), Opdebug payloads and
files, stats CSV, mapping.csv, the name parsers and ``npy.debug_event_to_npy``. Inputs come
from hypothesis strategies that know each format's grammar (and break it), from mutations of
valid files, and from hand-written special cases. Budget: fixed example counts,
``derandomize=True``, no example database; the whole file runs in about 20 s (Python 3.11)
to 30 s (3.7) on 2 cores.

Peak memory is measured as RSS growth (``ru_maxrss``) in a forked child of a fresh
interpreter, so protobuf's C allocations count too; time linearity compares n against 4n.
"""
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import forked_rss, fuzz_outcomes, timing
from helpers.wire import ld, varint, vi
from npu_dump_hook.formats import device_format, mapping_csv, names, stats_csv
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, KINDS, dtype_info, read_header, write_dump_file
from npu_dump_hook.formats.npy import NUMPY_OF_TF_ENUM, debug_event_to_npy
from npu_dump_hook.formats.opdebug import decode_opdebug, read_opdebug_file, write_opdebug_file

MIB = 1024 * 1024
FUZZ = dict(deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                   HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])

#: reader -> Counter of outcomes: "ok", "NpuDumpError subclass name", or "ESCAPE <type>"
OUTCOMES = fuzz_outcomes.new_tally()


def attempt(reader, call, *args, **kwargs):
    """Run ``call``, tallied in OUTCOMES (helpers.fuzz_outcomes)."""
    return fuzz_outcomes.attempt(OUTCOMES, reader, call, *args, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def fuzz_totals():
    yield
    fuzz_outcomes.report(OUTCOMES, "fuzz totals")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz_readers")


# --- protobuf wire format ----------------------------------------------------------

INTERESTING = [0, 1, 2, 3, 4, 7, 16, 17, 127, 128, 255, 256, 2047, 2048, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32,
               2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1]
numbers = st.one_of(st.sampled_from(INTERESTING), st.integers(0, 2 ** 64 - 1), st.integers(0, 64))
small = st.integers(0, 6)
dims_lists = st.one_of(
    st.lists(st.integers(0, 4), max_size=5), st.lists(st.integers(0, 4), max_size=5),  # mostly real shapes
    st.lists(st.integers(1, 1), min_size=30, max_size=70),  # more dims than numpy (or the reader) holds
    st.lists(st.one_of(st.integers(0, 5), st.sampled_from(INTERESTING)), max_size=8),
)
DATA_TYPES = list(range(0, 44)) + [100, 2 ** 31 - 1]
FORMAT_VALUES = [0, 1, 2, 3, 4, 16, 27, 29, 30, 31, 32, 33, 49, 50, 255, 1000]


@st.composite
def wire_shape(draw, clean=False):
    dims = draw(dims_lists)
    if draw(st.booleans()):
        body = ld(1, b"".join(varint(d) for d in dims))  # packed
    else:
        body = b"".join(vi(1, d) for d in dims)
    if not clean and draw(st.integers(0, 9)) == 0:
        body += draw(unknown_field())
    return body, dims


@st.composite
def unknown_field(draw):
    number = draw(st.sampled_from([12, 13, 15, 20, 100, 2 ** 29 - 1, 2 ** 29]))
    wire = draw(st.sampled_from([0, 1, 2, 5, 3, 4, 6, 7]))
    tag = varint(number << 3 | wire)
    if wire == 0:
        return tag + varint(draw(numbers))
    if wire == 1:
        return tag + b"\x00" * 8
    if wire == 5:
        return tag + b"\x00" * 4
    if wire == 2:
        return tag + varint(3) + b"abc"
    return tag  # groups and invalid wire types


@st.composite
def wire_tensor(draw, kind, clean=False):
    """An OpOutput/OpInput/OpBuffer/Workspace message; returns (bytes, declared size).

    ``clean``: a header the writer could have produced (valid UTF-8, no unknown fields)."""
    fields = []
    size = 0
    if kind in ("output", "input"):
        data_type = draw(st.sampled_from(DATA_TYPES))
        fields.append(vi(1, data_type))
        fields.append(vi(2, draw(st.sampled_from(FORMAT_VALUES))))
        body, dims = draw(wire_shape(clean))
        fields.append(ld(3, body))
        count = 1
        for dim in dims:
            count *= dim
        bits = dtype_info(data_type)[1]
        exact = (count * bits + 7) // 8 if bits else draw(st.integers(0, 64))
        size = draw(st.one_of(st.just(exact), st.just(exact), st.just(exact), st.integers(0, 64), numbers))
        if size > 4096:
            size = draw(st.one_of(st.just(size), st.integers(0, 64)))
        fields.append(vi(6 if kind == "output" else 5, size))
        if draw(st.booleans()):
            original, _ = draw(wire_shape(clean))
            fields.append(ld(7 if kind == "output" else 6, original))
        if kind == "output" and draw(st.booleans()):
            name = draw(st.text(max_size=8)).encode("utf-8", "surrogatepass") if clean else draw(st.binary(max_size=8))
            fields.append(ld(4, ld(1, name) + vi(2, draw(numbers)) + vi(4, draw(small))))
        if kind == "output" and draw(st.integers(0, 4)) == 0:
            fields.append(ld(10, vi(1, draw(numbers)) + vi(2, draw(numbers))) * draw(st.integers(0, 66)))
    else:
        size = draw(st.integers(0, 64) if clean else st.one_of(st.integers(0, 64), numbers))
        fields.append(vi(3, size))
    if not clean and draw(st.integers(0, 5)) == 0:
        fields.append(draw(unknown_field()))
    if not clean and draw(st.integers(0, 9)) == 0:  # a field with the wrong wire type
        fields.append(vi(3, draw(numbers)))
    order = draw(st.permutations(range(len(fields)))) if draw(st.integers(0, 4)) == 0 else range(len(fields))
    return b"".join(fields[i] for i in order), size


KIND_FIELD = {"output": 3, "input": 4, "buffer": 5, "workspace": 8}


@st.composite
def wire_dump_data(draw, legacy=False, clean=False):
    """A DumpData message (bytes) and the total payload size its tensors declare."""
    versions = [b"2.0"] if clean else [b"2.0", b"2.0", b"1.0", b"", b"\xff", b"2.0\x00"]
    parts = [ld(1, draw(st.sampled_from(versions)) if not legacy else b"1.0")]
    if draw(st.booleans()):
        parts.append(vi(2, draw(numbers)))
    total = 0
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(KINDS))
        body, size = draw(wire_tensor(kind, clean))
        if legacy and kind in ("output", "input"):
            body += ld(5 if kind == "output" else 4, draw(st.binary(max_size=32)))
        parts.append(ld(KIND_FIELD[kind], body))
        total += size
    if draw(st.booleans()):
        parts.append(ld(6, draw(st.text(max_size=12)).encode("utf-8", "surrogatepass") if clean
                        else draw(st.binary(max_size=12))))
    if draw(st.integers(0, 3)) == 0:
        parts.append(ld(7, ld(1, b"_sgt_json_info") + ld(2, b"{}")))
    if not clean and draw(st.integers(0, 6)) == 0:
        parts.append(draw(unknown_field()))
    return b"".join(parts), total


@st.composite
def mutated(draw, data):
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        op = draw(st.integers(0, 3))
        where = draw(st.integers(0, len(data) - 1))
        if op == 0:
            data[where] ^= draw(st.integers(1, 255))
        elif op == 1:
            del data[where:]
        elif op == 2:
            data.insert(where, draw(st.integers(0, 255)))
        else:
            data[where] = draw(st.sampled_from([0x00, 0x0C, 0x80, 0xFF]))
    return bytes(data)


@st.composite
def dump_files(draw):
    if draw(st.integers(0, 4)) == 0:  # legacy: the whole file is one DumpData
        header, _ = draw(wire_dump_data(legacy=True))
        return draw(mutated(header))
    if draw(st.booleans()):  # what a writer could produce: exercises array() and the conversions
        header, payload = draw(wire_dump_data(clean=True))
        return struct.pack("<Q", len(header)) + header + b"\x01" * min(payload, 1 << 16)
    header, payload = draw(wire_dump_data())
    payload = min(payload, 4096)
    prefix = struct.pack("<Q", draw(st.one_of(st.just(len(header)), st.just(len(header)), numbers)))
    tail = draw(st.one_of(st.just(b"\x00" * payload), st.just(b"\x01" * payload), st.binary(max_size=64)))
    data = prefix + header + tail
    return draw(mutated(data)) if draw(st.booleans()) else data


def exercise_dump_file(path, strict):
    header = attempt("read_header", read_header, path, strict)
    if header is not None:
        header.summary()
    dump = attempt("DumpFile.open", DumpFile.open, path, strict)
    if dump is None:
        return
    with dump:
        for info in dump.tensors():
            for kwargs in ({}, {"raw": True}, {"raw": True, "copy": True}, {"original_shape": True},
                           {"original_shape": True, "raw": True}):
                attempt("DumpFile.array", dump.array, info.kind, info.index, **kwargs)


@settings(max_examples=300, **FUZZ)
@given(data=dump_files(), strict=st.booleans())
def test_fuzz_dump_files(scratch, data, strict):
    path = str(scratch / "dump")
    with open(path, "wb") as handle:
        handle.write(data)
    exercise_dump_file(path, strict)


def _special_dump_files():
    golden = bytes.fromhex("0a03322e3010c0c480c1c1c482031a1d080110021a040a02020222090a05612f622e63"
                           "200230103a040a0202023205612f622e63")
    payload = np.arange(4, dtype=np.float32).tobytes()
    v2 = struct.pack("<Q", len(golden)) + golden + payload
    cases = {
        "empty": b"", "one byte": b"\x00", "eight zero bytes": b"\x00" * 8, "nine bytes": b"\x00" * 9,
        "all 0xff": b"\xff" * 64, "length 2**64-1": b"\xff" * 8 + golden, "length 0": b"\x00" * 8 + golden,
        "nano magic": b"\x10" + b"\x00" * 7 + b"\x5a" * 4 + b"\x00" * 8, "golden": v2,
        "golden, payload cut": v2[:-1], "golden, trailing byte": v2 + b"\x00",
        "header only": struct.pack("<Q", len(golden)) + golden,
        "legacy first byte, v2 body": b"\x32" + b"\x00" * 7 + golden,
        "varint of 11 bytes": struct.pack("<Q", 14) + b"\x10" + b"\xff" * 10 + b"\x01" + b"\x00\x00",
        "end-group tag": struct.pack("<Q", 7) + b"\x0a\x032.0\x0c\x00",
        "start-group tag": struct.pack("<Q", 7) + b"\x0a\x032.0\x0b\x00",
        "field 0": struct.pack("<Q", 2) + b"\x00\x00",
        "nested length past end": struct.pack("<Q", 7) + b"\x0a\x032.0\x1a\x7f",
        "packed dims cut": struct.pack("<Q", 12) + b"\x0a\x032.0" + ld(3, ld(3, b"\x0a\x02\x80\x80"))[:7],
        "output, dims 2**64-1 x 0": struct.pack("<Q", 0) + b"",
        "invalid utf-8 op name": struct.pack("<Q", 9) + b"\x0a\x032.0\x32\x02\xff\xfe",
        "legacy, huge declared size": ld(1, b"1.0") + ld(3, vi(1, 1) + ld(3, ld(1, varint(2))) + vi(6, 2 ** 64 - 1)),
        "legacy, data larger than size": ld(1, b"1.0") + ld(3, vi(1, 4) + ld(5, b"abc") + vi(6, 2)),
    }
    huge = b"\x0a\x032.0" + ld(3, vi(1, 1) + ld(3, ld(1, varint(2 ** 64 - 1) + varint(0))) + vi(6, 0)
                               + ld(7, ld(1, varint(0) + varint(2 ** 63))))
    cases["output, dims 2**64-1 x 0"] = struct.pack("<Q", len(huge)) + huge
    return cases


SPECIAL_DUMP_FILES = _special_dump_files()


@pytest.mark.parametrize("name", sorted(SPECIAL_DUMP_FILES))
@pytest.mark.parametrize("strict", [False, True])
def test_special_dump_files(tmp_path, name, strict):
    path = str(tmp_path / "dump")
    with open(path, "wb") as handle:
        handle.write(SPECIAL_DUMP_FILES[name])
    exercise_dump_file(path, strict)


# --- device formats ----------------------------------------------------------------

original_dims = st.lists(st.one_of(st.integers(0, 40), st.sampled_from([2 ** 31, 2 ** 62, 2 ** 63, 2 ** 64 - 1])),
                         max_size=8)


@settings(max_examples=400, **FUZZ)
@given(data_shape=st.lists(st.integers(0, 18), max_size=7), dtype=st.sampled_from(["u1", "<f2", "<f4", "<f8"]),
       fmt=st.sampled_from(list(device_format.CONVERTIBLE_FORMATS) + ["ND", "NCHW", "NHWC", "FRACTAL_ZN_LSTM"]),
       original=original_dims,
       original_format=st.sampled_from([None, "NCHW", "NHWC", "HWCN", "NCDHW", "NDHWC", "ND", "RESERVED"]))
def test_fuzz_device_format_to_original(data_shape, dtype, fmt, original, original_format):
    count = 1
    for dim in data_shape:
        count *= dim
    if count > 1 << 16:
        data_shape = [min(dim, 2) for dim in data_shape]
    data = np.zeros(data_shape, dtype=dtype)
    result = attempt("to_original", device_format.to_original, data, fmt, original, original_format, "fuzz")
    if result is not None:
        assert result.shape == tuple(original) or (not original and result is data)


# --- Opdebug -----------------------------------------------------------------------

@settings(max_examples=400, **FUZZ)
@given(payload=st.one_of(
    st.binary(max_size=3000),
    st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 2), st.integers(0, 5), st.integers(0, 200),
              st.binary(max_size=200)).map(
        lambda t: struct.pack("<6I", 0x5A5A5A5A, t[0] % 3, 1, t[2], 0, t[3]) + t[4]),
    st.binary(min_size=2048, max_size=2048),
))
def test_fuzz_opdebug_payloads(payload):
    record = attempt("decode_opdebug", decode_opdebug, payload, "fuzz", 100)
    if record is not None:
        record.as_dict()


def _opdebug_seed():
    import tempfile
    from npu_dump_hook.formats.opdebug import OpdebugRecord, OverflowEntry
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "Opdebug.Node_OpDebug.1.2.1700000000000000")
        record = OpdebugRecord("new", (OverflowEntry("AIC", (("task_id", 3),), (1,)),), 0, 1, 0, 88)
        write_opdebug_file(path, record, dump_time=1)
        with open(path, "rb") as handle:
            return handle.read()


OPDEBUG_SEED = _opdebug_seed()


@settings(max_examples=150, **FUZZ)
@given(data=mutated(OPDEBUG_SEED))
def test_fuzz_opdebug_files(scratch, data):
    path = str(scratch / "Opdebug.Node_OpDebug.1.2.3")
    with open(path, "wb") as handle:
        handle.write(data)
    found = attempt("read_opdebug_file", read_opdebug_file, path)
    if found is not None:
        found[1].as_dict()


def test_opdebug_file_with_a_huge_payload_is_refused_before_reading(tmp_path):
    path = str(tmp_path / "Opdebug.Node_OpDebug.1.2.3")
    write_dump_file(path, "Node_OpDebug", outputs=[DumpTensor(np.zeros(1 << 20, dtype=np.uint8))])
    from npu_dump_hook.errors import StatsFormatError
    with pytest.raises(StatsFormatError, match="Opdebug payload of 1048576 bytes"):
        read_opdebug_file(path)


# --- stats CSV ---------------------------------------------------------------------

CELLS = ["Input", "Output", "input", "0", "1", "16", "007", "-", "UNKNOW", "DT_FLOAT", "DT_BF16", "NCHW", "NC1HWC0",
         "1x4", "2x3x4", "1x", "x1", "1xx2", "1.5", "-2", ".5", "5.", "1e10", "1e", "nan", "-inf", "Infinity", "NA",
         "", " ", "99999999999999999999", "123456789012345678901", "1" * 300, "\x00", "\xe9", ","]
cells = st.one_of(st.sampled_from(CELLS), st.text(max_size=6))


@st.composite
def stats_texts(draw):
    columns = draw(st.one_of(
        st.just(list(stats_csv.STATS_HEADER)),
        st.lists(st.sampled_from(stats_csv.STAT_ITEMS), unique=True).map(
            lambda items: list(stats_csv.BASE_COLUMNS) + ["Count"] + sorted(items, key=stats_csv.STAT_ITEMS.index)),
        st.lists(st.sampled_from(list(stats_csv.STATS_HEADER) + ["l2norm", "x"]), max_size=15),
    ))
    lines = [",".join(columns)]
    for _ in range(draw(st.integers(0, 5))):
        width = len(columns) + draw(st.sampled_from([0, 0, 0, -1, 1, 50]))
        lines.append(",".join(draw(cells) for _ in range(max(width, 0))))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["", "\r", " ", "\n\n"])))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = end.join(lines) + draw(st.sampled_from(["", end]))
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=250, **FUZZ)
@given(data=st.one_of(stats_texts(), stats_texts().flatmap(mutated), st.binary(max_size=200)))
def test_fuzz_stats_csv(data):
    attempt("parse_stats_text", stats_csv.parse_stats_text, data, "fuzz.csv")


SPECIAL_STATS = {
    "empty": b"", "newline": b"\n", "header only": ",".join(stats_csv.STATS_HEADER).encode(),
    "header + 65 KiB line": (",".join(stats_csv.STATS_HEADER) + "\n" + "1" * 70000).encode(),
    "header + NUL": (",".join(stats_csv.STATS_HEADER) + "\n\x00").encode(),
    "10 MB of commas": b"," * (10 * MIB),
    "5000-digit index": (",".join(stats_csv.STATS_HEADER) + "\nInput," + "9" * 5000
                         + ",16,DT_FLOAT,NCHW,1x4,1,1,1,4,0,0,0\n").encode(),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_STATS))
def test_special_stats_csv(tmp_path, name):
    path = tmp_path / "s.csv"
    path.write_bytes(SPECIAL_STATS[name])
    attempt("read_stats_csv", stats_csv.read_stats_csv, path)


# --- mapping.csv -------------------------------------------------------------------

HASHES = ["123", "0", "18446744073709551615", "9" * 300, "", "12a", "-1", " 1", "١٢٣"]
MAPPED = ["Add.a.1.2.3", "a,b", "..", "a/b", "a\\b", "a\x00b", "", " ", "é", "Add.a." + "1" * 5000 + ".2.3", "x" * 600]


@st.composite
def mapping_texts(draw):
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        shape = draw(st.integers(0, 9))
        if shape == 0:
            lines.append(draw(st.sampled_from(["", " ", "\r", "\t"])))
        elif shape == 1:
            lines.append(draw(st.text(max_size=10)))
        else:
            lines.append(draw(st.one_of(st.sampled_from(HASHES), st.text("0123456789", max_size=25))) + ","
                         + draw(st.one_of(st.sampled_from(MAPPED), st.text(max_size=12))))
        if lines and draw(st.integers(0, 4)) == 0:
            lines.append(lines[-1])  # the writer repeats lines
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return (end.join(lines) + draw(st.sampled_from(["", end]))).encode("utf-8", "surrogatepass")


@settings(max_examples=300, **FUZZ)
@given(data=st.one_of(mapping_texts(), mapping_texts().flatmap(mutated), st.binary(max_size=200)))
def test_fuzz_mapping_csv(data):
    mapping = attempt("parse_mapping_text", mapping_csv.parse_mapping_text, data, "mapping.csv")
    for hashed in mapping or ():
        attempt("parse_dump_name", names.parse_dump_name, hashed, mapping)


@pytest.mark.parametrize("data", [b"", b"\n" * 1000, b"," * 1000, b"1,\xff\xfe", b"1," + b"a" * (MIB + 1),
                                  b"\xef\xbb\xbf1,a\n", b"1,a\n1,b\n", b"1,a\r\r\n2,b"],
                         ids=["empty", "newlines", "commas", "bad-utf8", "long-line", "bom", "conflict", "double-cr"])
def test_special_mapping_csv(tmp_path, data):
    path = tmp_path / "mapping.csv"
    path.write_bytes(data)
    attempt("read_mapping", mapping_csv.read_mapping, path)


# --- names -------------------------------------------------------------------------

name_text = st.text(st.sampled_from("Aa0_-./\\ \t\x00é" + "0123456789" * 3), max_size=40)


@st.composite
def dump_names(draw):
    fields = [draw(st.sampled_from(["Add", "Add", "Opdebug", "Conv2D", "", "a b", "a/b"])),
              draw(st.sampled_from(["op", "op", "Node_OpDebug", "x_lxslice3", "p_sgt_graph_1_y", "", "a.b"]))]
    for _ in range(draw(st.sampled_from([2, 3, 6, 7, 2, 3, 6, 7, 0, 1, 4, 8, 9]))):  # mostly 4, 5, 8, 9 fields
        fields.append(draw(st.one_of(st.text("0123456789", min_size=1, max_size=20),
                                     st.text("0123456789", min_size=1, max_size=20),
                                     st.sampled_from(["0", "4", "5", "1700000000123456", "", "x", "1" * 255,
                                                      "1" * 256, "1" * 5000]))))
    return ".".join(fields) + draw(st.sampled_from(["", "", ".csv", ".npy"]))


@settings(max_examples=400, **FUZZ)
@given(name=st.one_of(dump_names(), dump_names(), name_text, st.text("0123456789", min_size=1, max_size=3)),
       mapped=st.one_of(st.none(), dump_names(), name_text))
def test_fuzz_name_parsers(name, mapped):
    mapping = {name: mapped} if mapped is not None else None
    parsed = attempt("parse_dump_name", names.parse_dump_name, name, mapping)
    if parsed is not None:
        assert parsed.file_name and parsed.base_op_name is not None and parsed.sortable_timestamp in (True, False)
    attempt("parse_npy_name", names.parse_npy_name, name)
    attempt("parse_graph_file_name", names.parse_graph_file_name, "ge_proto_" + name + ".txt")
    attempt("parse_time_dir", names.parse_time_dir, name)
    attempt("golden_npy_name", names.golden_npy_name, name, 0, 1700000000123456)
    names.base_op_name(name)
    names.sanitize(name)


# --- npy ---------------------------------------------------------------------------

TF_ENUMS = sorted(NUMPY_OF_TF_ENUM) + [0, 7, 20, 200]


@st.composite
def debug_events(draw):
    enum = draw(st.sampled_from(TF_ENUMS))
    dims = draw(st.lists(st.one_of(st.integers(0, 4), st.sampled_from([2 ** 32, 2 ** 63, 2 ** 64 - 1])),
                         max_size=draw(st.sampled_from([4, 40]))))
    shape = b"".join(ld(2, vi(1, dim) + (ld(2, b"n") if draw(st.booleans()) else b"")) for dim in dims)
    if draw(st.integers(0, 5)) == 0:
        shape += vi(3, 1)  # unknown_rank
    count = 1
    for dim in dims:
        count *= dim
    itemsize = np.dtype(NUMPY_OF_TF_ENUM.get(enum, "u1")).itemsize
    length = count * itemsize if count * itemsize <= 4096 else draw(st.integers(0, 64))
    length = draw(st.one_of(st.just(length), st.integers(0, 64)))
    proto = vi(1, enum) + ld(2, shape) + ld(4, draw(st.binary(min_size=min(length, 4096), max_size=min(length, 4096))))
    event = b"\x09" + b"\x00" * 8 + ld(5, ld(1, ld(1, b"tag") + ld(8, proto)))
    return draw(mutated(event))


@settings(max_examples=200, **FUZZ)
@given(data=debug_events(), move=st.booleans())
def test_fuzz_debug_event_to_npy(scratch, data, move):
    source, target = str(scratch / "event"), str(scratch / "event.npy")
    with open(source, "wb") as handle:
        handle.write(data)
    found = attempt("debug_event_to_npy", debug_event_to_npy, source, target, move)
    if found is not None:
        dtype, shape = found
        loaded = np.load(target)
        assert loaded.dtype == np.dtype(dtype) and loaded.shape == shape
    for leftover in (source, target):
        if os.path.exists(leftover):
            os.remove(leftover)


@pytest.mark.parametrize("enum", [3, 14], ids=["int32", "bfloat16"])
def test_debug_event_with_a_shape_numpy_cannot_hold_is_refused(tmp_path, enum):
    # int64 np.prod wrapped 2**32 x 2**32 to 0 bytes: int32 wrote an .npy numpy cannot load,
    # bfloat16 failed with a bare ValueError from reshape.
    shape = ld(2, vi(1, 2 ** 32)) + ld(2, vi(1, 2 ** 32))
    event = b"\x09" + b"\x00" * 8 + ld(5, ld(1, ld(1, b"t") + ld(8, vi(1, enum) + ld(2, shape) + ld(4, b""))))
    source = tmp_path / "event"
    source.write_bytes(event)
    from npu_dump_hook.errors import DumpFileError
    with pytest.raises(DumpFileError, match="TensorProto shape"):
        debug_event_to_npy(str(source), str(tmp_path / "out.npy"))
    assert not (tmp_path / "out.npy").exists()


# --- peak memory -------------------------------------------------------------------

_READERS = r"""
from npu_dump_hook.formats import dump_file, mapping_csv, names, npy, opdebug, stats_csv

def run(reader, arg):
    if reader == "read_header":
        dump_file.read_header(arg)
    elif reader == "DumpFile.open":
        with dump_file.DumpFile.open(arg) as dump:
            for info in dump.tensors():
                dump.array(info.kind, info.index, raw=True)
    elif reader == "read_mapping":
        mapping_csv.read_mapping(arg)
    elif reader == "read_stats_csv":
        stats_csv.read_stats_csv(arg)
    elif reader == "read_opdebug_file":
        opdebug.read_opdebug_file(arg)
    elif reader == "debug_event_to_npy":
        npy.debug_event_to_npy(arg, arg + ".npy")
    elif reader == "parse_dump_name":
        with open(arg) as handle:
            text = handle.read()
        names.parse_dump_name("1", {"1": text})
"""


def measure(cases):
    """[(peak RSS growth in bytes, seconds, outcome)] for (reader, path) cases, each in a fork of one fresh child."""
    return forked_rss.measure(_READERS, cases)


def _write(path, data):
    with open(str(path), "wb") as handle:
        handle.write(data)
    return str(path)


def _v2(path, header, payload=0):
    path = _write(path, struct.pack("<Q", len(header)) + header)
    if payload:
        with open(path, "r+b") as handle:
            handle.truncate(8 + len(header) + payload)
    return path


def _worst_case_files(folder):
    """(reader, path, bound in bytes, what) for the worst cases of every reader."""
    version = ld(1, b"2.0")
    cases = []

    def header_case(name, header, note):
        path = _v2(folder / name, header)
        cases.append(("read_header", path, 4 * len(header) + 64 * MIB, note))

    # 1. headers: the reproduction (3,000,000 empty outputs in 6 MB), and the heaviest headers
    #    just under each limit (what the limits let through is the real bound).
    header_case("empty_outputs", version + b"\x1a\x00" * 3000000, "3,000,000 empty outputs (6 MB)")
    full = []
    for i in range((1 << 20) // 52):
        dims = [1000 + i % 7, 0, 300, 301, 302, 303, 304, 305]
        shape_bytes = ld(1, b"".join(varint(d) for d in dims))
        full.append(ld(3, vi(1, 1) + vi(2, 2) + ld(3, shape_bytes) + ld(4, ld(1, b"orig/%08d" % i) + vi(2, 3))
                       + vi(6, 0) + ld(7, shape_bytes) + vi(8, 5) + vi(9, 2 ** 40 + i) + ld(10, vi(1, 1))))
    header_case("max_full_tensors", version + b"".join(full), "20,164 full outputs, 16 dims each (item limit)")
    many_dims = b"".join(ld(3, vi(1, 1) + ld(3, ld(1, varint(0) + b"".join(varint(1000 + i + j) for j in range(63)))))
                         for i in range((1 << 20) // 134))
    header_case("max_dims", version + many_dims, "7,825 outputs of 64 distinct large dims")
    header_case("max_unknown", version + b"".join(ld(3, vi(12, 1) * 15) for _ in range((1 << 20) // 16 - 10)),
                "65,526 outputs of 15 unknown fields")
    header_case("max_attrs", version + b"".join(ld(7, ld(1, b"k%06d" % i) + ld(2, b"v%06d" % i)) for i in range(65536)),
                "65,536 attrs")
    header_case("long_op_name", version + ld(6, b"a" * (16 * MIB)), "16 MiB op name")
    big = str(folder / "length_2_31")
    with open(big, "wb") as handle:
        handle.write(struct.pack("<Q", 2 ** 31 - 1) + version)
        handle.truncate(8 + 2 ** 31 - 1 + 100)
    cases.append(("read_header", big, 16 * MIB, "header length 2**31-1 in a 2 GiB (sparse) file"))
    legacy = _write(folder / "legacy", ld(3, vi(1, 4) + ld(3, ld(1, varint(16 * MIB))) + ld(5, b"\x01" * (16 * MIB)))
                    + ld(1, b"1.0"))
    cases.append(("DumpFile.open", legacy, 4 * os.path.getsize(legacy) + 64 * MIB, "legacy file, one 16 MiB tensor"))
    # 3. line readers: the 10 MB stats line, the most rows, and mapping.csv files of many lines
    header = ",".join(stats_csv.STATS_HEADER) + "\n"
    line = _write(folder / "stats_line.csv", (header + "12," * (10 * 1000 * 1000 // 3) + "\n").encode())
    rows = _write(folder / "stats_rows.csv", (header + "".join(
        "Input,{0},{0},DT_FLOAT,NCHW,1x{0}x3,1.5,2.5,3.5,{0},0,0,0\n".format(i) for i in range(65536))).encode())
    blank = _write(folder / "stats_blank.csv", header.encode() + b"\n" * (16 * MIB))
    for path, note in ((line, "one 10 MB line"), (rows, "65,536 rows"), (blank, "16 MiB of blank lines")):
        cases.append(("read_stats_csv", path, 4 * os.path.getsize(path) + 64 * MIB, note))
    short = _write(folder / "mapping_short.csv", b"".join(b"%d,a\n" % i for i in range(1500000)))
    real = _write(folder / "mapping_real.csv", "".join(
        "{:020d},Conv2D.{}.1.2.{:016d}\n".format(i, "x" * 260, i) for i in range(60000)).encode())
    repeated = _write(folder / "mapping_repeated.csv", b"123,Add.a.1.2.3\n" * 1000000)
    for path, note in ((short, "1,500,000 distinct short lines (the 9M-line case, scaled)"),
                       (real, "60,000 real lines"), (repeated, "1,000,000 repeated lines")):
        cases.append(("read_mapping", path, 4 * os.path.getsize(path) + 64 * MIB, note))
    # names, Opdebug, npy
    dots = _write(folder / "dots", b"a." * (5 * MIB))
    cases.append(("parse_dump_name", dots, 4 * os.path.getsize(dots) + 64 * MIB, "10 MiB name of dots"))
    opdebug_big = str(folder / "Opdebug.Node_OpDebug.1.2.3")
    payload = 1 << 30  # declared by a small header; the file is sparse
    opdebug_header = version + ld(3, vi(1, 4) + vi(2, 2) + ld(3, ld(1, varint(payload))) + vi(6, payload)) + ld(
        6, b"Node_OpDebug")
    with open(opdebug_big, "wb") as handle:
        handle.write(struct.pack("<Q", len(opdebug_header)) + opdebug_header)
        handle.truncate(8 + len(opdebug_header) + payload)
    cases.append(("read_opdebug_file", opdebug_big, 16 * MIB, "Opdebug file declaring a 1 GiB payload"))
    tensor = 16 * MIB
    event = _write(folder / "event", b"\x09" + b"\x00" * 8 + ld(5, ld(1, ld(1, b"t") + ld(8, vi(1, 4) + ld(
        2, ld(2, vi(1, tensor))) + ld(4, b"\x07" * tensor)))))
    cases.append(("debug_event_to_npy", event, 16 * MIB, "16 MiB uint8 DebugIdentity tensor, copied"))
    return cases


def _pure_python_protobuf():
    from google.protobuf.internal import api_implementation

    return api_implementation.Type() == "python"


@pytest.mark.skipif(_pure_python_protobuf(), reason="the bounds are stated for protobuf's C++ and upb backends; "
                    "the pure-Python one (protobuf 3.20.3 on Python 3.11) keeps every field as a Python object")
def test_peak_memory_of_every_reader_stays_within_its_bound(tmp_path):
    cases = _worst_case_files(tmp_path)
    results = measure([(reader, path) for reader, path, _bound, _note in cases])
    lines = []
    for (reader, path, bound, note), (peak, seconds, outcome) in zip(cases, results):
        lines.append("{:<18} {:<52} size {:>7.1f} MB  peak +{:>6.1f} MB  bound {:>7.1f} MB  {:5.2f} s  {}".format(
            reader, note, os.path.getsize(path) / 1e6, peak / 1e6, bound / 1e6, seconds, outcome[:70]))
    report = "\n".join(lines)
    if os.environ.get("NPU_FUZZ_REPORT"):
        with open(os.environ["NPU_FUZZ_REPORT"], "a") as handle:
            handle.write(report + "\n")
    print("\n" + report)
    for (reader, path, bound, note), (peak, seconds, outcome) in zip(cases, results):
        assert not outcome.startswith("ESCAPE"), (note, outcome)
        assert peak <= bound, "{} {}: peak {} > bound {}\n{}".format(reader, note, peak, bound, report)


# --- linear time -------------------------------------------------------------------

def _ratio(tmp_path, make, call, n):
    small, large = make(tmp_path / "small", n), make(tmp_path / "large", 4 * n)
    call(small)  # warm up (imports, caches)
    return timing.best_time(call, large) / timing.best_time(call, small)


def _header_file(path, n):
    output = ld(3, vi(1, 1) + vi(2, 2) + ld(3, ld(1, b"\x02\x03")) + vi(6, 24) + ld(4, ld(1, b"orig/name")))
    return _v2(path, ld(1, b"2.0") + output * n, 24 * n)


def _unknown_fields_file(path, n):
    return _v2(path, ld(1, b"2.0") + vi(100, 1) * n)


def _mapping_file(path, n):
    return _write(path, "".join("{:020d},Add.{}.1.2.{:016d}\n".format(i, "x" * 60, i) for i in range(n)).encode())


def _stats_file(path, n):
    rows = "".join("Output,{0},16,DT_FLOAT,NCHW,1x{0},1.5,-2,0.25,4,0,0,0\n".format(i) for i in range(n))
    return _write(path, (",".join(stats_csv.STATS_HEADER) + "\n" + rows).encode())


def _long_name_file(path, n):
    return _write(path, ("Add." + "sgt_graph_1" * n + "_lxslice1.1.2.3").encode())


def _parse_long_name(path):
    with open(path) as handle:
        text = handle.read()
    names.parse_dump_name("1", {"1": text}).base_op_name


LINEAR = {
    "read_header (tensors)": (_header_file, read_header, 2500),
    "read_header (unknown fields)": (_unknown_fields_file, read_header, 50000),
    "read_mapping": (_mapping_file, mapping_csv.read_mapping, 8000),
    "read_stats_csv": (_stats_file, stats_csv.read_stats_csv, 2000),
    "parse_dump_name": (_long_name_file, _parse_long_name, 100000),
}


@pytest.mark.parametrize("reader", sorted(LINEAR))
def test_time_is_linear_in_the_input(tmp_path, reader):
    make, call, n = LINEAR[reader]
    ratio = _ratio(tmp_path, make, call, n)
    if ratio >= 10:  # a busy machine: measure once more before calling it superlinear
        ratio = min(ratio, _ratio(tmp_path, make, call, n))
    assert ratio < 10, "{}: 4x the input took {:.1f}x the time (linear: ~4, quadratic: ~16)".format(reader, ratio)
