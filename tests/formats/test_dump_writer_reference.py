"""The dump-file writer's fast paths (header built from cached per-tensor entries, payload arrays
joined as they are, the file's identity from its open descriptor) write the very bytes of the
reference writer: one protobuf header message per file (``build_header``/``encode_header``) and
each payload's little-endian bytes; the reader decodes them back to the arrays written."""
import os
import random

import numpy as np
import pytest

from npu_dump_hook import _ledger, _written
from npu_dump_hook.formats import _dump_writer, dump_schema
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, build_header, encode_header, write_dump_file

T0 = 1700000000123456
_PREFIX_BYTES = 8


def _random_array(rng):
    shape = tuple(rng.choice([0, 1, 2, 3, 7]) for _ in range(rng.randint(0, 3)))
    dtype = np.dtype(rng.choice(["<f4", "<f2", "<i4", "<i8", "|b1", "|u1", ">f4", ">i8"]))
    array = (np.arange(int(np.prod(shape)), dtype=np.int64) % 5).astype(dtype).reshape(shape)
    if array.ndim == 2 and rng.random() < 0.3:
        array = array.T  # not C-contiguous: written through the little-endian copy
    return array


def _random_tensor(rng, output):
    args = {}
    if rng.random() < 0.4:
        args["original_shape"] = tuple(rng.randint(0, 5) for _ in range(rng.randint(0, 3)))
    if output and rng.random() < 0.7:
        args.update(original_name=rng.choice(["", "a/b", "x" * rng.randint(1, 150), "\u00fc/n"]),
                    original_output_index=rng.choice([0, 1, -1]))
    if rng.random() < 0.3:
        args["format"] = rng.choice(["ND", "NCHW", "NC1HWC0"])
    if rng.random() < 0.2:
        args["address"] = rng.randint(0, 1 << 40)
    if rng.random() < 0.2:
        args["sub_format"] = rng.randint(-2, 2)
    return DumpTensor(_random_array(rng), **args)


def _reference_bytes(op_name, outputs, inputs, version="2.0"):
    header = encode_header(build_header(op_name, outputs, inputs, dump_time=T0, version=version))
    payloads = [np.ascontiguousarray(t.array, dtype=t.array.dtype.newbyteorder("<")).tobytes() for t in inputs + outputs]
    return len(header).to_bytes(_PREFIX_BYTES, "little") + header + b"".join(payloads)


@pytest.mark.parametrize("atomic", [False, True])
def test_written_files_are_the_reference_writers_bytes_and_read_back(tmp_path, atomic):
    rng = random.Random(21)
    for number in range(150):
        outputs = [_random_tensor(rng, True) for _ in range(rng.randint(0, 3))]
        inputs = [_random_tensor(rng, False) for _ in range(rng.randint(0, 2))]
        if not outputs and not inputs:
            continue
        op_name = rng.choice(["op", "rnn/lstm_cell/MatMul_{}".format(number), ""])
        version = rng.choice(["2.0", "2.0", "1.0"])
        path = tmp_path / "f{}".format(number)
        size = write_dump_file(path, op_name, outputs=outputs, inputs=inputs, dump_time=T0, version=version,
                               atomic=atomic)
        expected = _reference_bytes(op_name, outputs, inputs, version)
        assert path.read_bytes() == expected and size == len(expected), number
        if version != "2.0":
            continue
        with DumpFile.open(path) as dump:
            for kind, group in (("output", outputs), ("input", inputs)):
                for index, tensor in enumerate(group):
                    if tensor.original_shape == tensor.shape:
                        np.testing.assert_array_equal(dump.array(kind, index), tensor.array)


def test_a_field_protobuf_refuses_is_refused_after_an_equal_int_was_written(tmp_path):
    good = DumpTensor(np.zeros(2, np.float32), address=1)
    write_dump_file(tmp_path / "a", "op", outputs=[good], dump_time=T0, atomic=False)
    bad = DumpTensor(np.zeros(2, np.float32))
    bad.address = 1.0  # equal to 1, but not an integer field's value
    with pytest.raises(TypeError):
        write_dump_file(tmp_path / "b", "op", outputs=[bad], dump_time=T0, atomic=False)
    with pytest.raises(TypeError):
        build_header("op", outputs=[bad], dump_time=T0)


def test_the_noted_identity_is_the_closed_files_and_serves_the_ledger_without_an_lstat(tmp_path, monkeypatch):
    path = str(tmp_path / "f")
    tensor = DumpTensor(np.array([1.0, np.nan, np.inf], np.float32))
    write_dump_file(path, "op", outputs=[tensor], dump_time=T0, atomic=False)
    assert _written.just_noted(path) == _written.file_identity(path)
    assert _written.just_noted(path + "x") is None
    monkeypatch.setattr(_written.os, "lstat", None)  # any lstat now fails the note
    _ledger.note_dump_file(path, [], [tensor])
    monkeypatch.undo()
    assert _ledger.dump_health(path) == (("output", 0, 3, 1, 0, 1),)
    assert _written.written_facts(path)[0] == os.path.getsize(path)


def test_header_entries_decode_as_the_schema_says():
    tensor = DumpTensor(np.zeros((2, 3), np.float16), original_name="a", original_output_index=1)
    header = dump_schema.DumpData()
    header.ParseFromString(encode_header(build_header("op", outputs=[tensor], dump_time=T0)))
    fast = dump_schema.DumpData()
    fast.ParseFromString(_dump_writer._tensors_header("op", [tensor], [], T0, "2.0"))
    assert fast == header and list(fast.output[0].shape.dim) == [2, 3] and fast.output[0].original_op.output_index == 1


@pytest.mark.parametrize("version", ["2.0", "1.0", "", "\u00fc"])
def test_header_start_and_end_fields_are_protobufs_for_any_time_name_and_version(version):
    tensor = DumpTensor(np.zeros(3, np.float32))
    # each twice: the first call of a version goes through a message and keeps its field, the second not
    for dump_time in (T0, 0, 1, 127, 128, (1 << 64) - 1, T0, 0):
        for op_name in ("op", "", "\u00fc/\u4e2d", "x" * 200):
            expected = encode_header(build_header(op_name, outputs=[tensor], dump_time=dump_time, version=version))
            assert _dump_writer._tensors_header(op_name, [tensor], [], dump_time, version) == expected


@pytest.mark.parametrize("dump_time, op_name", [(-1, "op"), (1 << 64, "op"), (T0, "\ud800")])
def test_header_fields_protobuf_refuses_are_refused_after_the_version_is_known(dump_time, op_name):
    tensor = DumpTensor(np.zeros(3, np.float32))
    _dump_writer._tensors_header("op", [tensor], [], T0, "2.0")  # the version's field is kept by now
    with pytest.raises((ValueError, TypeError, UnicodeError)):
        build_header(op_name, outputs=[tensor], dump_time=dump_time)
    with pytest.raises((ValueError, TypeError, UnicodeError)):
        _dump_writer._tensors_header(op_name, [tensor], [], dump_time, "2.0")
