"""The in-process ledger of dump files just written (npu_dump_hook/_ledger.py): the NaN/Inf counts
noted at write time are exactly what reading the file back finds, and they are handed back only for
the same unchanged file (a hard link of it), never for a copy, a rewrite, a symlink or a file never
noted. Pure Python: dump files written with the package's own writer, read with its own reader."""
import os
import shutil

import numpy as np
import pytest

from npu_dump_hook import _ledger
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, dtype_info, write_dump_file


@pytest.fixture(autouse=True)
def _empty_ledger():
    _ledger.forget_all()
    yield
    _ledger.forget_all()


def _tensors():
    """Inputs and outputs covering NaN, -Inf, +Inf, float16, integers, bool, a scalar, an empty tensor."""
    bad = np.arange(12, dtype=np.float32).reshape(3, 4)
    bad[0, 1], bad[1, 2], bad[2, 3] = np.nan, -np.inf, np.inf
    half = np.array([1, np.inf, np.nan, np.nan], dtype=np.float16)
    inputs = [DumpTensor(bad), DumpTensor(np.arange(5, dtype=np.int32)), DumpTensor(np.float64(2.5))]
    outputs = [DumpTensor(half), DumpTensor(np.array([True, False])), DumpTensor(np.zeros((0, 3), np.float32))]
    return inputs, outputs


def _read_counts(path):
    """What the golden-free checks find by reading the file (the reader, then the same counting)."""
    found = []
    with DumpFile.open_small(path) as dump:
        for kind in ("input", "output"):
            for info in dump.tensors(kind):
                if info.dtype is not None:
                    found.append((kind, info.index) + _ledger.non_finite_counts(dump.array(kind, info.index)))
    return tuple(found)


def _written(folder, name="Add.add.1.2.1700000000000000"):
    path = os.path.join(str(folder), name)
    inputs, outputs = _tensors()
    write_dump_file(path, "add", outputs=outputs, inputs=inputs)
    _ledger.note_dump_file(path, inputs, outputs)
    return path


def test_noted_counts_are_what_reading_the_file_finds(tmp_path):
    path = _written(tmp_path)
    noted = _ledger.dump_health(path)
    assert noted == _read_counts(path)
    assert noted[0] == ("input", 0, 12, 1, 1, 1) and noted[3] == ("output", 0, 4, 2, 0, 1)


def test_a_hard_link_is_the_same_file_and_gets_the_counts(tmp_path):
    path = _written(tmp_path)
    os.mkdir(str(tmp_path / "bundle"))
    link = str(tmp_path / "bundle" / os.path.basename(path))
    os.link(path, link)
    assert _ledger.dump_health(link) == _read_counts(link)


def test_a_copy_a_symlink_or_a_file_never_noted_is_read(tmp_path):
    path = _written(tmp_path)
    os.mkdir(str(tmp_path / "other"))
    copy = str(tmp_path / "other" / os.path.basename(path))
    shutil.copy2(path, copy)  # same name, size and mtime, another inode
    assert _ledger.dump_health(copy) is None
    symlink = str(tmp_path / "other" / "via-link")
    os.symlink(path, symlink)
    assert _ledger.dump_health(symlink) is None
    assert _ledger.dump_health(str(tmp_path / "missing")) is None
    _ledger.forget_all()
    assert _ledger.dump_health(path) is None


def test_a_rewritten_file_is_read_again(tmp_path):
    path = _written(tmp_path)
    before = os.stat(path)
    inputs, outputs = _tensors()
    outputs[0] = DumpTensor(np.ones(4, dtype=np.float16))  # now finite, same size
    write_dump_file(path, "add", outputs=outputs, inputs=inputs, atomic=False)  # in place: same inode
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    assert os.stat(path).st_ino == before.st_ino and os.stat(path).st_size == before.st_size
    assert _ledger.dump_health(path) is None
    assert _read_counts(path)[3] == ("output", 0, 4, 0, 0, 0)
    shorter = DumpTensor(np.ones(2, dtype=np.float16))
    write_dump_file(path, "add", outputs=[shorter], inputs=inputs, atomic=False)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime, another size
    assert _ledger.dump_health(path) is None


def test_a_renamed_file_is_read_again(tmp_path):
    path = _written(tmp_path)
    moved = str(tmp_path / "Add.other.1.2.1700000000000001")
    os.rename(path, moved)  # same inode, size and mtime: the name tells it is not the noted file
    assert _ledger.dump_health(moved) is None


def test_a_tensor_held_in_another_dtype_than_the_reader_views_is_not_noted(tmp_path):
    path = str(tmp_path / "Cast.cast.1.2.1700000000000000")
    bits = DumpTensor(np.array([0x3F80, 0x7FC0], dtype=np.uint16), data_type="DT_BF16", shape=(2,))
    write_dump_file(path, "cast", outputs=[bits])
    _ledger.note_dump_file(path, [], [bits])
    if dtype_info(bits.data_type)[2] is None:  # no ml_dtypes: the reader skips the tensor, so does the ledger
        assert _ledger.dump_health(path) == _read_counts(path) == ()
    else:  # uint16 storage, bfloat16 values: left to the reader
        assert _ledger.dump_health(path) is None


def test_the_ledger_forgets_the_oldest_beyond_its_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(_ledger._noted, "max_entries", 2)  # (the store built with MAX_NOTED)
    paths = [_written(tmp_path, "Add.add.1.2.170000000000000{}".format(k)) for k in range(3)]
    assert _ledger.dump_health(paths[0]) is None
    assert _ledger.dump_health(paths[1]) is not None and _ledger.dump_health(paths[2]) is not None
