"""Facts of small files this process just wrote (npu_dump_hook/_written.py): the sha256 and a dump
file's header description noted at write time are exactly what the bundle writer finds by reading
the file, and they are used only for the same unchanged file (a hard link of it), never for a
copy, a rewrite, a file over the size bound or a file never noted. Pure Python: files written by
the package's own writers, placed and described by the bundle's own functions."""
import hashlib
import os

import numpy as np
import pytest

from npu_dump_hook import _written
from npu_dump_hook.bundle import _fs
from npu_dump_hook.bundle.describe import describe_dump_folder_file
from npu_dump_hook.formats.dump_file import DumpTensor, write_dump_file
from npu_dump_hook.formats.npy import write_npy

NAME = "MatMul.rnn_lstm_MatMul.3.0.1700000000000001"


@pytest.fixture(autouse=True)
def _nothing_noted():
    _written.forget_all()
    yield
    _written.forget_all()


def _tensors():
    """Float, float16, integers, bool, a scalar, an empty tensor, a device format, an original shape
    and an original op (what the emulated NPU writes)."""
    inputs = [DumpTensor(np.arange(12, dtype=np.float32).reshape(3, 4)), DumpTensor(np.arange(5, dtype=np.int32)),
              DumpTensor(np.float64(2.5)), DumpTensor(np.array([True, False]))]
    outputs = [DumpTensor(np.ones((1, 1, 16, 16), np.float16), format="FRACTAL_NZ", original_shape=(3, 5),
                          original_name="rnn/lstm/MatMul", original_output_index=0),
               DumpTensor(np.zeros((0, 3), np.float32))]
    return inputs, outputs


def _dump(folder, name=NAME):
    os.makedirs(str(folder), exist_ok=True)
    path = os.path.join(str(folder), name)
    inputs, outputs = _tensors()
    write_dump_file(path, "rnn/lstm/MatMul", outputs=outputs, inputs=inputs, dump_time=1700000000000001, atomic=False)
    return path


def _read_facts(path):
    """(size, sha256) and the description the bundle writer makes by reading the file."""
    with open(path, "rb") as handle:
        data = handle.read()
    return (len(data), hashlib.sha256(data).hexdigest()), describe_dump_folder_file(NAME, path, None)


def _placed(src, folder, link="auto"):
    os.makedirs(str(folder), exist_ok=True)
    target = os.path.join(str(folder), os.path.basename(src))
    placed = _fs.place_file(src, target, link=link, checksum=True, keep_head=True)
    return target, placed


def test_a_linked_dump_file_is_placed_and_described_from_its_noted_facts_as_reading_it_would(tmp_path):
    src = _dump(tmp_path / "dump")
    target, placed = _placed(src, tmp_path / "bundle")
    assert placed.how == "hardlink" and placed.fields is not None  # taken from the note, not read
    noted_entry = describe_dump_folder_file(NAME, target, None, placed.head, placed.size, placed.fields)
    (size, digest), read_entry = _read_facts(target)
    assert (placed.size, placed.sha256) == (size, digest)
    assert noted_entry == read_entry
    assert read_entry["header"]["outputs"][0] == {"dtype": "DT_FLOAT16", "shape": [1, 1, 16, 16],
                                                  "format": "FRACTAL_NZ", "original_shape": [3, 5]}


def test_a_linked_npy_file_gets_the_sha256_of_its_bytes(tmp_path):
    src = str(tmp_path / "t.npy")
    write_npy(np.arange(10, dtype=np.float32), src)
    assert _written.written_facts(src) is not None
    _target, placed = _placed(src, tmp_path / "bundle")
    with open(src, "rb") as handle:
        data = handle.read()
    assert (placed.size, placed.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert np.array_equal(np.load(src), np.arange(10, dtype=np.float32))


def test_a_copy_is_read(tmp_path):
    src = _dump(tmp_path / "dump")
    target, placed = _placed(src, tmp_path / "bundle", link="copy")
    assert placed.how == "copy" and placed.fields is None
    assert _written.written_facts(target) is None  # another inode


def test_a_rewritten_file_is_read_not_taken_from_the_note(tmp_path):
    src = _dump(tmp_path / "dump")
    noted = _written.written_facts(src)
    with open(src, "r+b") as handle:  # same size, other bytes, a later modification time
        handle.seek(-4, os.SEEK_END)
        handle.write(b"\x01\x02\x03\x04")
    st = os.stat(src)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1000000000))
    assert _written.written_facts(src) is None
    _target, placed = _placed(src, tmp_path / "bundle")
    (size, digest), _entry = _read_facts(src)
    assert placed.sha256 == digest != noted[1] and placed.fields is None


def test_a_renamed_link_is_not_the_noted_file(tmp_path):
    src = _dump(tmp_path / "dump")
    other = str(tmp_path / "other")
    os.link(src, other)
    assert _written.written_facts(other) is None and _written.written_facts(src) is not None


def test_a_file_over_the_bound_is_not_noted(tmp_path):
    big = np.zeros(_written.NOTE_MAX_BYTES // 4 + 1, np.float32)
    path = str(tmp_path / "big.npy")
    write_npy(big, path)
    assert _written.written_facts(path) is None
    small = str(tmp_path / "small.npy")
    write_npy(big[:8], small)
    assert _written.written_facts(small) is not None


def test_the_heads_held_are_bounded_oldest_first(tmp_path, monkeypatch):
    monkeypatch.setattr(_written._noted, "max_bytes", 1000)  # (the store built with MAX_HEAD_BYTES)
    paths = []
    for index in range(4):
        path = str(tmp_path / "f{}".format(index))
        with open(path, "wb") as handle:
            handle.write(b"x" * 400)
        _written.note_written(path, (b"x" * 400,), b"x" * 400)
        paths.append(path)
    assert [_written.written_facts(p) is not None for p in paths] == [False, False, True, True]


def test_parts_that_are_not_the_file_are_not_noted(tmp_path):
    path = str(tmp_path / "f")
    with open(path, "wb") as handle:
        handle.write(b"abc")
    _written.note_written(path, (b"abcd",))
    assert _written.written_facts(path) is None


def test_parts_of_a_given_size_are_hashed_as_buffers(tmp_path):
    # A writer that knows the size may pass arrays (len() is not their byte count); a wrong size notes nothing.
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = str(tmp_path / "f")
    with open(path, "wb") as handle:
        handle.write(b"head" + array.tobytes())
    _written.note_written(path, (b"head", array), size=4 + array.nbytes)
    with open(path, "rb") as handle:
        data = handle.read()
    assert _written.written_facts(path)[:2] == (len(data), hashlib.sha256(data).hexdigest())
    _written.forget_all()
    _written.note_written(path, (b"head", array), size=4 + len(array))
    assert _written.written_facts(path) is None
