"""Issue #20 item 8, the last blocking opens: a FIFO put where a file was checked (after the
folder walk, before the read) is refused through the descriptor, never waited on -- the dump
reader of compare's worker, the golden loader (also its numpy fallback), mapping.csv, and the
shared helper npu_dump_hook._files.open_regular. Every call runs under a timeout."""
import os

import numpy as np
import pytest

from npu_dump_hook._files import NotRegularFile, open_regular
from npu_dump_hook.compare._golden import load_golden
from npu_dump_hook.compare._worker import REASON_DUMP, REASON_SPECIAL_FILE, FileJob, compare_file
from npu_dump_hook.errors import NameFormatError
from npu_dump_hook.formats.mapping_csv import read_mapping

from helpers.timing import bounded
from helpers.compare_synth import Synth

TIMEOUT_S = 60


def _bounded(call):
    return bounded(call, TIMEOUT_S, "blocked on a FIFO")


@pytest.fixture
def fifo(tmp_path):
    path = str(tmp_path / "swapped")
    os.mkfifo(path)
    return path


def test_open_regular_refuses_a_fifo_a_folder_and_a_final_link(tmp_path, fifo):
    with pytest.raises(NotRegularFile) as caught:
        _bounded(lambda: open_regular(fifo))
    assert caught.value.kind == "a FIFO" and fifo in str(caught.value)
    with pytest.raises(NotRegularFile, match="a folder"):
        open_regular(str(tmp_path))
    target = tmp_path / "file"
    target.write_bytes(b"abc")
    link = tmp_path / "link"
    os.symlink(str(target), str(link))
    with pytest.raises(OSError):
        open_regular(str(link))
    with open_regular(str(link), follow_links=True) as handle:  # a path the user names may be a link
        assert handle.read() == b"abc"
    os.symlink(fifo, str(tmp_path / "to-fifo"))
    with pytest.raises(NotRegularFile):
        _bounded(lambda: open_regular(str(tmp_path / "to-fifo"), follow_links=True))


def test_read_mapping_refuses_a_fifo_naming_it(fifo):
    with pytest.raises(NameFormatError) as caught:
        _bounded(lambda: read_mapping(fifo))
    assert caught.value.path == fifo and "a FIFO" in caught.value.rule


def test_the_worker_refuses_a_dump_file_swapped_for_a_fifo(fifo):
    result = _bounded(lambda: compare_file(FileJob(0, fifo, (), ())))
    assert result.error == "{}: {} is a FIFO (skipped)".format(REASON_SPECIAL_FILE, fifo) and result.tensors == []


def test_the_worker_never_follows_a_dump_file_swapped_for_a_link(tmp_path, fifo):
    link = str(tmp_path / "Relu.a.2.0.1700000000000000")
    os.symlink(fifo, link)
    result = _bounded(lambda: compare_file(FileJob(0, link, (), ())))
    assert result.error.startswith(REASON_DUMP) and result.tensors == []


def test_the_worker_reads_a_dump_file_through_one_descriptor(tmp_path):
    """Every payload read (small ones copied, large ones mapped) goes through the descriptor
    opened first: the path replaced by a FIFO after the open changes nothing."""
    synth = Synth(tmp_path)
    small, large = np.linspace(1, 2, 12, dtype=np.float32), np.linspace(1, 2, 300000, dtype=np.float32)
    synth.op("small", "Relu", small)
    synth.op("large", "Relu", large)
    _, step, golden = synth.write()
    from npu_dump_hook.compare import _worker
    from npu_dump_hook.compare._golden import index_npy_dir

    _worker.init_worker(index_npy_dir(golden)[0])
    for name in sorted(os.listdir(step)):
        path = os.path.join(step, name)
        dump = _worker._HeldDumpFile.open_held(path)
        with dump:
            os.rename(path, path + ".moved")
            os.mkfifo(path)
            array = _bounded(lambda: dump.array("output", 0, copy=dump.outputs[0].size <= 1 << 20))
            assert array.size in (small.size, large.size)
            np.testing.assert_array_equal(array, small if array.size == small.size else large)


def test_load_golden_refuses_a_fifo(fifo):
    with pytest.raises(NotRegularFile):
        _bounded(lambda: load_golden(fifo))


@pytest.mark.parametrize("count", [12, 400000], ids=["read", "mapped"])
def test_load_golden_numpy_fallback_reads_the_descriptor(tmp_path, count):
    """A header np.save would not write (fortran order) is numpy's to read: from the open
    descriptor, never by name (the path holds a FIFO by then)."""
    array = np.asfortranarray(np.linspace(0, 1, count, dtype=np.float32).reshape(-1, 4))
    path = str(tmp_path / "a.0.1700000000000000.npy")
    np.save(path, array)
    real_open = os.open

    def open_then_swap(name, flags, *rest):
        fd = real_open(name, flags, *rest)
        if name == path:
            os.rename(path, path + ".moved")
            os.mkfifo(path)
        return fd

    os.open = open_then_swap
    try:
        loaded = _bounded(lambda: load_golden(path))
    finally:
        os.open = real_open
    np.testing.assert_array_equal(loaded, array)
