"""The capture's worker threads (writes during the step, the read after it) survive a fork."""
import os
import sys

import pytest

from npu_dump_hook.train._capture_reads import worker


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_worker_thread():
    parent = worker("fork-test")
    assert parent.submit(os.getpid).result(timeout=30) == os.getpid()  # the parent's thread is running
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread does not exist here
        ok = False
        try:
            mine = worker("fork-test")
            ok = mine is not parent and mine.submit(os.getpid).result(timeout=30) == os.getpid()
        except BaseException as exc:  # a hang shows as a timeout here
            sys.stderr.write("child: {!r}\n".format(exc))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert worker("fork-test") is parent
