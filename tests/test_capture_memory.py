"""The captured step's written arrays kept in memory for the emulated NPU (train._capture_memory): pure Python."""
import numpy as np

from npu_dump_hook.formats.npy import read_npy, write_npy
from npu_dump_hook.train._capture_memory import IN_MEMORY_BYTES, hold_written
from npu_dump_hook.train._capture_results import CapturedTensor, CaptureResult


def _tensor(path, index):
    return CapturedTensor(op_name="op{}".format(index), op_type="Add", output_index=0, dtype="", shape=(),
                          path=path, order=index, timestamp_us=1700000000000000 + index)


def _written(tmp_path, arrays):
    jobs = [(array, str(tmp_path / "t{}.npy".format(i))) for i, array in enumerate(arrays)]
    tensors = [_tensor(path, i) for i, (_, path) in enumerate(jobs)]
    for tensor, (array, path) in zip(tensors, jobs):
        tensor.dtype, tensor.shape = write_npy(array, path)
    return tensors, jobs


def test_held_copies_are_the_files_bytes_and_not_the_written_buffers(tmp_path):
    source = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    arrays = [source, np.array(7, dtype=np.int64), np.zeros((0, 3), np.float16), source[:, 1].copy()]
    tensors, jobs = _written(tmp_path, arrays)
    assert hold_written(tensors, jobs, IN_MEMORY_BYTES) == sum(a.nbytes for a in arrays)
    for tensor in tensors:
        on_disk = read_npy(tensor.path)
        assert (tensor.in_memory.dtype, tensor.in_memory.shape) == (on_disk.dtype, on_disk.shape)
        assert tensor.in_memory.tobytes() == on_disk.tobytes()
        assert not tensor.in_memory.flags.writeable
    source += 1  # a buffer TensorFlow could reuse: the held copy does not follow it
    assert tensors[0].in_memory.tobytes() == read_npy(tensors[0].path).tobytes()
    assert not np.shares_memory(tensors[0].in_memory, source)


def test_budget_bounds_the_bytes_held_the_rest_read_from_the_files(tmp_path):
    arrays = [np.full(256, i, dtype=np.float32) for i in range(5)]  # 1 KiB each
    tensors, jobs = _written(tmp_path, arrays)
    assert hold_written(tensors, jobs, budget=2500) == 2048
    assert [t.in_memory is not None for t in tensors] == [True, True, False, False, False]
    assert 0 < IN_MEMORY_BYTES


def test_files_not_written_from_an_array_and_object_arrays_are_not_held(tmp_path):
    tensors, jobs = _written(tmp_path, [np.ones(3, np.float32)])
    moved = _tensor(str(tmp_path / "dump_file.npy"), 1)  # a converted dump file: its job's source is a path
    hold_written(tensors + [moved], jobs + [(str(tmp_path / "event"), moved.path)], IN_MEMORY_BYTES)
    assert tensors[0].in_memory is not None and moved.in_memory is None
    strings = _tensor(str(tmp_path / "s.npy"), 2)
    hold_written([strings], [(np.array(["a"], dtype=object), strings.path)], IN_MEMORY_BYTES)
    assert strings.in_memory is None


def test_release_drops_every_copy_and_keeps_the_records(tmp_path):
    tensors, jobs = _written(tmp_path, [np.ones(3, np.float32), np.ones(2, np.int32)])
    assert hold_written(tensors, jobs, 0) == 0 and tensors[0].in_memory is None  # 0: keep none
    hold_written(tensors, jobs, IN_MEMORY_BYTES)
    result = CaptureResult(tensors=tensors, skipped=[], executed_ops=[])
    plain = [_tensor(t.path, i) for i, t in enumerate(tensors)]
    for record, tensor in zip(plain, tensors):
        record.dtype, record.shape = tensor.dtype, tensor.shape
    assert plain == tensors  # the in-memory copy takes no part in a record's equality
    result.release_arrays()
    assert [t.in_memory for t in result.tensors] == [None, None]
    assert [t.shape for t in result.tensors] == [(3,), (2,)]
