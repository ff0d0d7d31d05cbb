"""npu_dump_hook._forked: a function run in a forked child hands back its result or (False, None)."""
import os
import subprocess
import sys
import threading
import time

import pytest

from npu_dump_hook import _forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")


def _pid_and(value):
    return os.getpid(), value


def test_result_comes_from_the_child():
    call = _forked.ForkedCall(_pid_and, [1, ("two", None, b"3")])
    ok, (pid, value) = call.result()
    assert ok and pid != os.getpid() and value == [1, ("two", None, b"3")]
    assert call.result() == (False, None)  # taken once; the child is reaped


def test_large_results_pass_the_pipe():
    call = _forked.ForkedCall(lambda: b"x" * (5 << 20))
    assert call.result() == (True, b"x" * (5 << 20))


@pytest.mark.parametrize("fn", [
    lambda: 1 // 0,                      # raises
    lambda: os._exit(7),                 # exits without a result
    lambda: object(),                    # not marshal-able
    lambda: os.kill(os.getpid(), 9),     # killed
], ids=["raises", "exits", "unmarshalable", "killed"])
def test_a_failing_child_gives_false_and_never_raises(fn):
    assert _forked.ForkedCall(fn).result() == (False, None)


def test_abandon_stops_a_child_that_still_runs():
    call = _forked.ForkedCall(time.sleep, 60)
    start = time.monotonic()
    call.abandon()
    assert time.monotonic() - start < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(call._pid, os.WNOHANG)
    assert call.result() == (False, None)


def test_child_never_runs_the_parents_code_after_the_call(tmp_path):
    # a child that returned into the caller would write this file too
    marker = tmp_path / "after"
    call = _forked.ForkedCall(int, "5")
    with open(str(marker), "a") as handle:
        handle.write("{}\n".format(os.getpid()))
    assert call.result() == (True, 5)
    assert marker.read_text().split() == [str(os.getpid())]


def test_fork_is_safe_in_a_fresh_process_only_without_other_threads():
    # (this test process may have TensorFlow loaded or threads left by other tests)
    fresh = subprocess.run([sys.executable, "-c", "from npu_dump_hook import _forked; "
                            "print(_forked.fork_is_safe())"], stdout=subprocess.PIPE, check=True)
    assert fresh.stdout.split() == [b"True"]
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not _forked.fork_is_safe()
    finally:
        stop.set()
        thread.join()
    assert _forked.usable_cores() >= 1


def test_a_fork_that_fails_leaves_no_descriptor(monkeypatch):
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    monkeypatch.setattr(os, "fork", no_fork)
    with pytest.raises(OSError):
        _forked.ForkedCall(int, "1")
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


def test_fork_is_not_safe_once_tensorflow_is_loaded(monkeypatch):
    import types

    monkeypatch.setitem(__import__("sys").modules, "tensorflow", types.ModuleType("tensorflow"))
    assert not _forked.fork_is_safe()
