"""Issue #20 item 10 (clean-up on SIGTERM), over a whole ``npu-dump-hook compare`` of an archive:
a real CLI process sent SIGTERM while it compares (a slow hook point: its per-file comparison
made to wait) exits 143 and leaves no extracted temporary folder and no worker behind; a SIGTERM
handler of the embedding program is kept."""
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time

import numpy as np
import pytest

from npu_dump_hook._signals import terminating_cleanly
from npu_dump_hook.cli import _compare

from helpers.compare_synth import Synth, chain

TIMEOUT_S = 60
# The CLI with compare_file (in the process, and in forked pool workers) made slow: it says it
# runs (a marker file), then waits; the CLI's own main and exit status are untouched.
_SLOW_CLI = textwrap.dedent("""\
    import os, sys, time
    from npu_dump_hook.compare import _pool
    from npu_dump_hook.cli import main

    real = _pool.compare_file

    def slow(job):
        open(os.path.join(os.environ["MARKS"], str(os.getpid())), "w").close()
        time.sleep(120)
        return real(job)

    _pool.compare_file = slow
    sys.exit(main(sys.argv[1:]))
    """)


def _archive(root):
    synth = Synth(root)
    start = np.linspace(1, 2, 24, dtype=np.float32)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 8, start)
    folder = synth.bundle()
    archive = os.path.join(str(root), "npu.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="npu")
    return archive


def _wait_for(check):
    deadline = time.monotonic() + TIMEOUT_S
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/{}/stat".format(pid)) as handle:  # a zombie is gone for our purpose
        return handle.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to see the workers")
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_mid_compare_removes_the_extraction_and_exits_143(tmp_path, workers):
    archive = _archive(tmp_path / "run")
    temp, marks = tmp_path / "tmp", tmp_path / "marks"
    temp.mkdir()
    marks.mkdir()
    env = dict(os.environ, TMPDIR=str(temp), MARKS=str(marks))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd()] + sys.path if p)
    process = subprocess.Popen([sys.executable, "-c", _SLOW_CLI, "compare", archive, "--workers", workers],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: os.listdir(str(marks)))  # comparing: the archive is extracted
        assert [n for n in os.listdir(str(temp)) if n.startswith("npu_dump_hook-open-")]
        comparing = [int(n) for n in os.listdir(str(marks))]
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, err.decode(errors="replace")
    assert os.listdir(str(temp)) == []
    _wait_for(lambda: not any(_alive(pid) for pid in comparing))  # no worker left comparing


def test_a_sigterm_handler_of_the_caller_is_kept():
    def users(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, users)
    try:
        with terminating_cleanly():
            assert signal.getsignal(signal.SIGTERM) is users
        assert signal.getsignal(signal.SIGTERM) is users
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_default_is_restored_after_the_compare():
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM already has a handler in this process")
    with pytest.raises(SystemExit) as info:
        with terminating_cleanly():
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert info.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
