"""Opdebug overflow payloads: new (magic 0x5A5A5A5A) and old fixed layouts (reference §3.1)."""
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.errors import StatsFormatError
from npu_dump_hook.formats.opdebug import (
    OpdebugRecord,
    OverflowEntry,
    decode_opdebug,
    encode_opdebug,
    read_opdebug_file,
    write_opdebug_file,
)


def _pad(data: bytes, size: int = 2048) -> bytes:
    return data + bytes(size - len(data))


# magic, version 0, valid 1, acc_type 0 (AIC), rsv 0, data_len 88, written out by hand
NEW_AIC_HEADER = bytes.fromhex("5a5a5a5a" "00000000" "01000000" "00000000" "00000000" "58000000")


def test_new_layout_aic_golden():
    words = [7, 3, 42, 0, 5, 1, 0x1000, 0x2000, 9, 2, 0x80]
    payload = _pad(NEW_AIC_HEADER + struct.pack("<11Q", *words))
    record = decode_opdebug(payload)
    assert (record.layout, record.version, record.valid, record.acc_type, record.data_len) == ("new", 0, 1, 0, 88)
    (entry,) = record.entries
    assert entry.unit == "AIC"
    assert entry.as_dict() == {
        "model_id": 7,
        "stream_id": 3,
        "task_id": 42,
        "task_type": 0,
        "context_id": 5,
        "thread_id": 1,
        "pc_start": 0x1000,
        "para_base": 0x2000,
        "core_id": 9,
        "block_id": 2,
        "status": 0x80,
    }
    assert entry.get("task_id") == 42 and entry.get("nope") is None
    assert encode_opdebug(record) == payload


def test_new_layout_version_1_has_four_status_words():
    header = bytes.fromhex("5a5a5a5a" "01000000" "01000000" "01000000" "00000000" "70000000")  # AIV, 112 B
    payload = _pad(header + struct.pack("<14Q", *range(1, 15)))
    record = decode_opdebug(payload)
    (entry,) = record.entries
    assert entry.unit == "AIV"
    assert entry.get("block_id") == 10
    assert entry.status == (11, 12, 13, 14)
    assert encode_opdebug(record) == payload


def test_new_layout_aicpu_and_sdma():
    aicpu = _pad(bytes.fromhex("5a5a5a5a" "00000000" "01000000" "02000000" "00000000" "40000000") + struct.pack("<8Q", *range(8)))
    entry = decode_opdebug(aicpu).entries[0]
    assert entry.unit == "AICPU"
    assert [name for name, _v in entry.values] == ["model_id", "stream_id", "task_id", "task_type", "context_id", "cpu_id", "thread_id"]
    assert entry.status == (7,)
    sdma = _pad(bytes.fromhex("5a5a5a5a" "00000000" "00000000" "03000000" "00000000" "50000000") + struct.pack("<10Q", *range(10)))
    record = decode_opdebug(sdma)
    assert record.valid == 0  # kept, not judged
    assert record.entries[0].unit == "SDMA" and record.entries[0].get("channel_id") == 8


def test_old_layout_golden():
    payload = bytearray(2048)
    struct.pack_into("<6Q", payload, 0, 1, 2, 3, 4, 5, 6)
    struct.pack_into("<6Q", payload, 128, 11, 12, 13, 14, 15, 16)
    struct.pack_into("<6Q", payload, 256, 21, 22, 23, 24, 25, 26)
    struct.pack_into("<Q", payload, 512, 0xDEAD)
    struct.pack_into("<Q", payload, 768, 0xBEEF)
    struct.pack_into("<3Q", payload, 1024, 0x77, 5, 0x10)
    record = decode_opdebug(bytes(payload))
    assert record.layout == "old" and record.version is None
    dha, l2, core = record.entries
    assert (dha.unit, dha.get("model_id"), dha.get("para_base"), dha.status) == ("DHA_ATOMIC", 1, 6, (0xDEAD,))
    assert (l2.unit, l2.get("task_id"), l2.status) == ("L2_ATOMIC", 13, (0xBEEF,))
    assert (core.unit, core.get("stream_id"), core.get("kernel_code"), core.get("block_idx"), core.status) == (
        "AI_CORE", 22, 0x77, 5, (0x10,)
    )
    assert encode_opdebug(record) == bytes(payload)
    assert record.as_dict()["entries"][2]["kernel_code"] == 0x77


@pytest.mark.parametrize(
    "payload, rule, offset",
    [
        (b"\x5a\x5a\x5a", "shorter than 4 bytes", 100),
        (bytes.fromhex("5a5a5a5a") + bytes(10), "header needs 24 bytes", 100),
        (_pad(bytes.fromhex("5a5a5a5a" "00000000" "01000000" "04000000" "00000000" "58000000")), "acc_type 4 is not 0-3", 112),
        (_pad(bytes.fromhex("5a5a5a5a" "00000000" "01000000" "00000000" "00000000" "e9070000")), "data_len 2025 runs past the 2048-byte payload", 120),
        (_pad(bytes.fromhex("5a5a5a5a" "00000000" "01000000" "00000000" "00000000" "50000000")), "data_len 80 is smaller than the 88 bytes of AIC fields", 120),
        (_pad(bytes.fromhex("5a5a5a5a" "01000000" "01000000" "00000000" "00000000" "58000000")), "data_len 88 is smaller than the 112 bytes", 120),
        (bytes(2047), "must be 2048 bytes (old layout), found 2047", 100),
        (bytes(4096), "found 4096", 100),
    ],
)
def test_malformed(payload, rule, offset):
    with pytest.raises(StatsFormatError) as info:
        decode_opdebug(payload, "Opdebug.Node_OpDebug.1.2.3", base_offset=100)
    assert info.value.path == "Opdebug.Node_OpDebug.1.2.3"
    assert rule in info.value.rule
    assert info.value.offset == offset


def test_encoder_rejects_inconsistent_records():
    with pytest.raises(ValueError, match="does not match acc_type"):
        encode_opdebug(OpdebugRecord("new", (OverflowEntry("AIC", (), (1,)),), acc_type=2))
    with pytest.raises(ValueError, match="exactly one entry"):
        encode_opdebug(OpdebugRecord("new", ()))
    with pytest.raises(ValueError, match="old-layout Opdebug units"):
        encode_opdebug(OpdebugRecord("old", (OverflowEntry("AIC", (), (1,)),)))
    with pytest.raises(ValueError, match="does not fit"):
        encode_opdebug(OpdebugRecord("new", (OverflowEntry("AIC", (("task_id", 2**64),), (0,)),)))


_U64 = st.integers(0, 2**64 - 1)


@st.composite
def new_records(draw):
    acc_type = draw(st.integers(0, 3))
    version = draw(st.integers(0, 2))
    names = {
        0: ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "pc_start", "para_base", "core_id", "block_id"),
        2: ("model_id", "stream_id", "task_id", "task_type", "context_id", "cpu_id", "thread_id"),
        3: ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "src_addr", "dst_addr", "channel_id"),
    }[2 if acc_type == 2 else 3 if acc_type == 3 else 0]
    status_words = 4 if version == 1 and acc_type < 2 else 1
    unit = ("AIC", "AIV", "AICPU", "SDMA")[acc_type]
    values = tuple((name, draw(_U64)) for name in names)
    status = tuple(draw(_U64) for _ in range(status_words))
    data_len = (len(names) + status_words) * 8 + draw(st.integers(0, 64))
    return OpdebugRecord("new", (OverflowEntry(unit, values, status),), version, draw(st.integers(0, 2**32 - 1)), acc_type, data_len)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(new_records())
def test_new_layout_round_trip(record):
    assert decode_opdebug(encode_opdebug(record)) == record


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.binary(max_size=2100), st.booleans())
def test_decoder_raises_only_stats_format_error(data, magic):
    if magic:
        data = bytes.fromhex("5a5a5a5a") + data
    try:
        decode_opdebug(data, "f")
    except StatsFormatError as exc:
        assert exc.path == "f" and exc.offset is not None


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(4, 27), st.integers(0, 255)), min_size=1, max_size=4), st.integers(24, 2048))
def test_mutated_new_header_decodes_or_raises_stats_format_error(mutations, length):
    payload = bytearray(_pad(NEW_AIC_HEADER + struct.pack("<11Q", *range(11))))
    for offset, value in mutations:
        payload[offset] = value
    try:
        record = decode_opdebug(bytes(payload[:length]), "f")
    except StatsFormatError:
        return
    assert record.layout == "new" and len(record.entries) == 1


def test_opdebug_file_round_trip_through_the_dump_container(tmp_path):
    record = decode_opdebug(_pad(NEW_AIC_HEADER + struct.pack("<11Q", *range(11))))
    path = tmp_path / "Opdebug.Node_OpDebug.3.2.1700000000123456"
    write_opdebug_file(path, record, dump_time=1700000000123456)
    data = path.read_bytes()
    (header_len,) = struct.unpack_from("<Q", data, 0)
    assert len(data) == 8 + header_len + 2048
    assert data[8 + header_len : 8 + header_len + 4] == bytes.fromhex("5a5a5a5a")
    header, again = read_opdebug_file(path)
    assert again == record
    (output,) = header.outputs
    assert (output.dtype_name, output.format_name, output.shape, output.size) == ("DT_UINT8", "ND", (2048,), 2048)
    assert (header.op_name, header.dump_time, output.original_name) == ("Node_OpDebug", 1700000000123456, "Node_OpDebug")


def test_opdebug_file_with_two_outputs_is_rejected(tmp_path):
    from npu_dump_hook.formats.dump_file import write_dump_file

    path = tmp_path / "Opdebug.Node_OpDebug.3.2.1"
    write_dump_file(path, "Node_OpDebug", outputs=[np.zeros(4, np.uint8), np.zeros(4, np.uint8)], dump_time=1)
    with pytest.raises(StatsFormatError, match="exactly one output, found 2"):
        read_opdebug_file(path)
