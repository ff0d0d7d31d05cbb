"""A full disk or a file-size limit never aborts the training process and is never taken for the
end of the data (issue 20, item 7): the room check before TensorFlow's debug writer streams, and
the initial-state checkpoint under RLIMIT_FSIZE, in real training processes."""
import errno
import os
import resource
import signal
import sys

import pytest
import tensorflow as tf

from npu_dump_hook import BundleError, DumpOptions, NpuDumpHook
from npu_dump_hook.sample_models import mlp_session
from npu_dump_hook.train._capture_plan import BUDGET_ENV, floor_nbytes, static_nbytes
from npu_dump_hook.train._space import HEADROOM, PER_FILE, TEST_FREE_ENV, check_room, file_size_limit, free_bytes

from helpers.runs import clean_env, run


def test_the_room_check_reads_the_real_free_space(tmp_path):
    stat = os.statvfs(str(tmp_path))
    free = free_bytes(str(tmp_path / "not" / "yet"))  # the nearest existing folder's file system
    assert abs(free - stat.f_bavail * stat.f_frsize) < 64 << 20  # other writers may run meanwhile
    check_room(str(tmp_path), [1000, None, 5000])
    with pytest.raises(OSError) as info:
        check_room(str(tmp_path), [free // 2, free // 2 + (1 << 20)])
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path)
    assert "not enough free space" in info.value.strerror


def test_the_room_check_reads_the_real_file_size_limit(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
        assert file_size_limit() == 1 << 20
        check_room(str(tmp_path), [1000])
        with pytest.raises(OSError) as info:
            check_room(str(tmp_path), [2 << 20])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert info.value.errno == errno.EFBIG and "RLIMIT_FSIZE" in info.value.strerror


def _streaming_hook(monkeypatch, strict):
    monkeypatch.setenv(BUDGET_ENV, "0")  # every tensor streams through TF's debug writer
    # a nearly full disk: room for the estimated dump and golden (about 1 MiB, so the size check
    # before the step passes: tests/test_size_estimate.py), not for the streamed capture's headroom
    monkeypatch.setenv(TEST_FREE_ENV, str(4 << 20))
    return NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", strict=strict)


def test_a_nearly_full_disk_refuses_the_streamed_capture_with_our_error(in_tmp_cwd, monkeypatch):
    hook = _streaming_hook(monkeypatch, strict=True)
    with pytest.raises(BundleError, match="preparing the capture of step 0 failed: not enough free space") as info:
        mlp_session.train(hook.options, hooks=[hook])
    assert info.value.path == os.path.join(hook.layout.capture_dir, "dumps")
    assert not os.path.exists(hook.layout.capture_dir)
    # the batch dimension of a repeat().batch() dataset is None: those sizes are said to be unknown
    assert "tensor size(s) were unknown before the step" in str(info.value), str(info.value)


def test_unknown_sizes_count_at_their_lower_bound_and_the_message_says_so(tmp_path, monkeypatch):
    with tf.Graph().as_default():
        batch = tf.compat.v1.placeholder(tf.float32, [None, 512])
        unranked = tf.compat.v1.placeholder(tf.float64)
        names = tf.compat.v1.placeholder(tf.string, [None])
        assert static_nbytes(batch) is None and floor_nbytes(batch) == 512 * 4
        assert floor_nbytes(unranked) == 8 and floor_nbytes(tf.zeros([3, 2])) == 24
        assert floor_nbytes(names) >= 0
    room = HEADROOM + 2 * PER_FILE + 1000 + 2048 - 1  # 1000 known bytes + one floor of 2048, less one byte
    monkeypatch.setenv(TEST_FREE_ENV, str(room))
    check_room(str(tmp_path), [1000, None], [0, 2047])  # fits: a floor one byte smaller
    check_room(str(tmp_path), [1000])  # no unknown size: nothing said about one
    with pytest.raises(OSError) as info:
        check_room(str(tmp_path), [1000, None], [0, 2048])  # an unknown size was 0 bytes before: it fitted
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path)
    assert "at least {} bytes needed".format(room + 1) in info.value.strerror, info.value.strerror
    assert "1 of 2 tensor size(s) were unknown before the step" in info.value.strerror
    with pytest.raises(OSError) as info:
        check_room(str(tmp_path), [None], [room])
    assert "1 of 1 tensor size(s) were unknown" in info.value.strerror


def test_a_nearly_full_disk_not_strict_trains_on_uncaptured(in_tmp_cwd, monkeypatch):
    hook = _streaming_hook(monkeypatch, strict=False)
    assert len(mlp_session.train(hook.options, hooks=[hook])) == 1
    assert hook.failures[0]["doing"] == "preparing the capture of step 0"
    assert "No space" in hook.failures[0]["error"] or "not enough free space" in hook.failures[0]["error"]
    assert not os.path.exists(hook.layout.capture_dir)


#: A training script whose file-size limit drops to LIMIT bytes once the session exists (SIGXFSZ
#: ignored, so a write past it fails with EFBIG instead of killing the process).
SCRIPT = """
import os, resource, signal, sys
import tensorflow as tf
from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.sample_models import mlp_session

class Limit(tf.compat.v1.train.SessionRunHook):
    def after_create_session(self, session, coord):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(os.environ["LIMIT"]), resource.RLIM_INFINITY))

hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out",
                   strict=sys.argv[1] == "strict", save_initial_state=sys.argv[2] == "save")
mlp_session.train(hook.options, hooks=[Limit(), hook])
print("FAILURES", [f["doing"] + " | " + f["error"] for f in hook.failures])
"""


def _limited(tmp_path, strict, save, limit, **env):
    return run([sys.executable, "-c", SCRIPT, strict, save], tmp_path,
               clean_env(LIMIT=str(limit), **env), timeout=240)


def test_a_file_size_limit_while_saving_the_initial_state_is_our_error_not_the_end_of_data(tmp_path):
    code, out, err = _limited(tmp_path, "strict", "save", 512)
    assert code == 1 and code != -signal.SIGABRT, err[-3000:]
    assert "BundleError: NpuDumpHook: saving the initial state to" in err, err[-3000:]
    assert os.path.join("init", "") in err and "no training step ran" not in err
    code, out, err = _limited(tmp_path, "lenient", "save", 512)
    assert code == 0, err[-3000:]
    (failures,) = [line for line in out if line.startswith("FAILURES")]
    assert "saving the initial state to" in failures and "BundleError" in failures, failures
    assert "no training step ran" not in failures


def test_a_file_size_limit_never_lets_tensorflow_abort_the_streamed_capture(tmp_path):
    code, out, err = _limited(tmp_path, "strict", "nosave", 2048, **{BUDGET_ENV: "0"})
    assert code == 1 and code != -signal.SIGABRT, err[-3000:]
    assert "preparing the capture of step 0 failed" in err and "RLIMIT_FSIZE" in err, err[-3000:]
    assert os.path.join(".capture", "dumps") in err


def test_loop_body_watches_count_in_the_room_check(tmp_path, monkeypatch):
    # A TF 1.x while loop whose body tensors (4,000 bytes each) TF's debug watches write at every
    # iteration: the rest of the step fits the budget (fetched, nothing streamed), so only the
    # loop-body watches need disk room, and they are counted (at least one iteration each).
    from npu_dump_hook.train.capture import TensorCapture

    v1 = tf.compat.v1
    was_v2 = v1.control_flow_v2_enabled()
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as graph:
            start = tf.zeros([1000], name="start")
            _, total = v1.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2.0 + 1.0), [tf.constant(0), start])
            capture = TensorCapture(graph, str(tmp_path / "scratch"), memory_budget=1 << 30)
            body = [p for p in capture._plans.values() if p.per_iteration]
            assert body and max(p.floor for p in body) == 4000
            context = v1.train.SessionRunContext(v1.train.SessionRunArgs(total), None)
            monkeypatch.setenv(TEST_FREE_ENV, str(HEADROOM + 4000))  # room for one body tensor, not all
            with pytest.raises(OSError) as info:
                capture.run_args(context)
            assert info.value.errno == errno.ENOSPC and "not enough free space" in info.value.strerror
            monkeypatch.setenv(TEST_FREE_ENV, str(1 << 40))
            capture.run_args(context)  # enough room: the step is prepared
            assert capture.last_path == "fetch"
    finally:
        if was_v2:
            v1.enable_control_flow_v2()
