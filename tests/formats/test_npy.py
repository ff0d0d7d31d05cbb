"""formats.npy: DebugIdentity file dumps (hand-encoded Event protobufs) to .npy, in place or copied."""
import hashlib
import os

import numpy as np
import pytest

from npu_dump_hook import _written
from npu_dump_hook.errors import DumpFileError
from npu_dump_hook.formats.npy import debug_event_to_npy, read_npy, write_npy


def _event_file(path, tensor_bytes):
    """A DebugIdentity-like Event: wall_time, then summary.value.tensor (hand-encoded protobuf)."""
    with open(path, "wb") as handle:
        handle.write(tensor_bytes)


def _ld(field, payload):
    length, out = len(payload), b""
    while True:
        byte = length & 0x7F
        length >>= 7
        out += bytes([byte | (0x80 if length else 0)])
        if not length:
            break
    return bytes([(field << 3) | 2]) + out + payload


def _event(tensor_proto):
    wall_time = b"\x09" + np.float64(1.0).tobytes()
    return wall_time + _ld(5, _ld(1, _ld(1, b"t1") + _ld(8, tensor_proto)))


def test_debug_event_to_npy_reads_a_hand_encoded_event(tmp_path):
    content = np.arange(6, dtype=np.int32).tobytes()
    shape = _ld(2, b"\x08\x02") + _ld(2, b"\x08\x03")
    proto = b"\x08\x03" + _ld(2, shape) + _ld(4, content)  # DT_INT32, [2, 3]
    source, target = str(tmp_path / "ev"), str(tmp_path / "out.npy")
    _event_file(source, _event(proto))
    assert debug_event_to_npy(source, target) == ("int32", (2, 3))
    np.testing.assert_array_equal(np.load(target), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("proto,rule", [
    (b"\x08\x07" + _ld(2, b""), "supported dtype"),  # DT_STRING
    (b"\x08\x03" + _ld(2, _ld(2, b"\x08\x04")) + _ld(4, b"\x00" * 8), "holds 8 bytes, shape (4,) needs 16"),
    (b"\x08\x03\xff", "varint"),
])
def test_debug_event_to_npy_rejects_bad_files(tmp_path, proto, rule):
    source = str(tmp_path / "ev")
    _event_file(source, _event(proto))
    with pytest.raises(DumpFileError) as error:
        debug_event_to_npy(source, str(tmp_path / "out.npy"))
    assert rule in str(error.value) and source in str(error.value)


def test_debug_event_to_npy_rejects_a_file_without_a_tensor(tmp_path):
    source = str(tmp_path / "ev")
    _event_file(source, b"\x09" + b"\x00" * 8)
    with pytest.raises(DumpFileError, match="field 5 missing"):
        debug_event_to_npy(source, str(tmp_path / "out.npy"))


def test_debug_event_to_npy_move_turns_the_dump_into_the_npy(tmp_path):
    content = np.array([1.5, -2.0], np.float32).tobytes()
    proto = b"\x08\x01" + _ld(2, _ld(2, b"\x08\x02")) + _ld(4, content)  # DT_FLOAT, [2]
    padded_event = b"\x09" + np.float64(1.0).tobytes() + _ld(5, _ld(1, _ld(1, b"t" * 120) + _ld(8, proto)))
    source, target = str(tmp_path / "ev"), str(tmp_path / "out.npy")
    _event_file(source, padded_event + _ld(9, b"metadata after the tensor"))
    assert debug_event_to_npy(source, target, move=True) == ("float32", (2,))
    assert not os.path.exists(source)
    # The header fills exactly the bytes before the tensor; the protobuf tail is cut off.
    assert os.path.getsize(target) == len(padded_event)
    with open(target, "rb") as handle:
        header_end = 10 + int.from_bytes(handle.read(10)[8:10], "little")
    assert header_end == len(padded_event) - len(content)
    np.testing.assert_array_equal(np.load(target), [1.5, -2.0])
    np.testing.assert_array_equal(np.load(target, mmap_mode="r"), [1.5, -2.0])


@pytest.mark.parametrize("array", [np.float32(2.5).reshape(()), np.arange(6, dtype=np.int16).reshape(2, 3),
                                   np.zeros((0, 4), np.float64), np.arange(40000, dtype=np.float32)],
                         ids=["scalar", "small", "empty", "over-one-write"])
def test_write_npy_matches_np_save_and_loads_back(tmp_path, array):
    ours, theirs = str(tmp_path / "ours.npy"), str(tmp_path / "theirs.npy")
    assert write_npy(array, ours) == (array.dtype.name, array.shape)
    np.save(theirs, array)
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        assert a.read() == b.read()  # np.save's layout byte for byte (v1.0 header padded to 64)


def test_debug_event_to_npy_move_copies_when_the_prefix_is_too_short(tmp_path):
    content = np.arange(3, dtype=np.int64).tobytes()
    proto = b"\x08\x09" + _ld(2, _ld(2, b"\x08\x03")) + _ld(4, content)  # DT_INT64, [3]
    source, target = str(tmp_path / "ev"), str(tmp_path / "out.npy")
    _event_file(source, _event(proto))
    assert debug_event_to_npy(source, target, move=True) == ("int64", (3,))
    assert not os.path.exists(source)
    with open(target, "rb") as handle:
        assert (10 + int.from_bytes(handle.read(10)[8:10], "little")) % 64 == 0  # a regular aligned header
    np.testing.assert_array_equal(np.load(target), [0, 1, 2])


# --------------------------------------------------------------------------- fetch path vs streaming path


def test_write_npy_golden_bytes(tmp_path):
    target = str(tmp_path / "a.npy")
    assert write_npy(np.array([[1, 2]], dtype="<i2"), target) == ("int16", (1, 2))
    header = b"{'descr': '<i2', 'fortran_order': False, 'shape': (1, 2), }"
    expected = b"\x93NUMPY\x01\x00" + (118).to_bytes(2, "little") + header + b" " * (117 - len(header)) + b"\n"
    with open(target, "rb") as handle:
        assert handle.read() == expected + b"\x01\x00\x02\x00"
    np.save(str(tmp_path / "b.npy"), np.array([[1, 2]], dtype="<i2"))
    with open(str(tmp_path / "b.npy"), "rb") as handle:
        assert handle.read() == expected + b"\x01\x00\x02\x00"  # the same bytes as np.save


def test_write_npy_header_cache_tells_byte_orders_and_shapes_apart(tmp_path):
    """The cached header is per (dtype, shape): the same shape in the other byte order, or the same
    dtype in another shape, gets its own header (np.save's bytes each time)."""
    arrays = [np.arange(6, dtype="<i4").reshape(2, 3), np.arange(6, dtype=">i4").reshape(2, 3),
              np.arange(6, dtype="<i4").reshape(3, 2), np.arange(6, dtype="<i4").reshape(2, 3) + 1]
    for number, array in enumerate(arrays):
        ours, theirs = str(tmp_path / "o{}.npy".format(number)), str(tmp_path / "t{}.npy".format(number))
        assert write_npy(array, ours) == (array.dtype.name, array.shape)
        np.save(theirs, array)
        with open(ours, "rb") as a, open(theirs, "rb") as b:
            assert a.read() == b.read()


@pytest.mark.parametrize("array", [np.float32(2.5).reshape(()), np.arange(6, dtype=np.int16).reshape(2, 3),
                                   np.zeros((0, 4), np.float64), np.array([True, False]), np.array([1 + 2j], np.complex64),
                                   np.array(["ab", "c"]), np.arange(6).reshape(2, 3).T, np.arange(300000, dtype=np.float32)],
                         ids=["scalar", "small", "empty", "bool", "complex", "unicode", "fortran", "over-1MiB"])
def test_read_npy_gives_what_np_load_gives(tmp_path, array):
    path = str(tmp_path / "a.npy")
    np.save(path, array)  # np.save's header: the plain one for C order, other forms go to np.load
    got = read_npy(path)
    assert got.dtype == array.dtype and got.shape == array.shape and not got.flags.writeable
    np.testing.assert_array_equal(got, array)


def test_read_npy_leaves_a_file_whose_size_disagrees_to_np_load(tmp_path):
    path = str(tmp_path / "a.npy")
    write_npy(np.arange(4, dtype=np.int32), path)
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[:-1])  # a truncated payload: np.load's refusal, not a shorter array
    with pytest.raises(ValueError):
        read_npy(path)
    with open(path, "wb") as handle:
        handle.write(data + b"tail")  # trailing bytes: what np.load makes of them
    np.testing.assert_array_equal(read_npy(path), np.load(path, mmap_mode="r"))


@pytest.mark.parametrize("array", [np.array([True, False, True]), np.arange(6, dtype=np.uint8).reshape(3, 2),
                                   np.arange(4, dtype=np.float16), np.arange(3, dtype=np.complex64) * 1j,
                                   np.arange(6, dtype=np.int64).reshape(2, 3).T,
                                   np.array(["2020-01-01", "2021-06-30"], dtype="datetime64[D]"),
                                   np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]), np.float64(-0.5).reshape(())],
                         ids=["bool", "uint8", "float16", "complex64", "not-contiguous", "datetime", "structured",
                              "scalar"])
def test_write_npy_notes_the_sha256_of_the_bytes_it_wrote(tmp_path, array):
    # The array itself is written and hashed where its buffer is its bytes; other kinds through a byte view.
    _written.forget_all()
    ours, theirs = str(tmp_path / "ours.npy"), str(tmp_path / "theirs.npy")
    assert write_npy(array, ours) == (array.dtype.name, array.shape)
    np.save(theirs, np.array(array, order="C"))  # always written in C order
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        data = a.read()
        assert data == b.read()
    assert _written.written_facts(ours)[:2] == (len(data), hashlib.sha256(data).hexdigest())
    _written.forget_all()


def test_write_npy_refuses_an_object_array(tmp_path):
    with pytest.raises(TypeError):
        write_npy(np.array([1, "a"], dtype=object), str(tmp_path / "o.npy"))
