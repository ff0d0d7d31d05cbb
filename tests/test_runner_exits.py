"""The bundle path stays the last line on stdout however the script leaves (issue 20, point 10):
``os._exit`` after training skips every exit handler, and a script that trains in a forked child
has its hook and bundle in the child."""
import os
import signal
import subprocess
import sys
import time

from helpers.runs import HELPERS, clean_env, run
from npu_dump_hook._phases import TEST_PAUSE_ENV

CLI = [sys.executable, "-m", "npu_dump_hook", "run"]

#: The unmodified MonitoredTrainingSession script of tests/helpers, trained HOW: "os_exit" (then
#: os._exit(0), no exit handler runs), "fork" (in a multiprocessing child started with fork),
#: "print" (then a line of its own: the path must be printed again after it).
SCRIPT = """
import multiprocessing, os, sys
sys.path.insert(0, {helpers!r})
import unmodified_monitored

how = sys.argv[1]
if how == "fork":
    child = multiprocessing.get_context("fork").Process(target=unmodified_monitored.main)
    child.start()
    child.join()
    print("child exit", child.exitcode)
    sys.exit(child.exitcode)
unmodified_monitored.main()
sys.stdout.flush()
if how == "os_exit":
    os._exit(0)
print("done")
"""


def _run(tmp_path, how):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(helpers=HELPERS))
    argv = CLI + ["--output-dir", str(tmp_path / "out"), "--", str(script), how]
    code, lines, err = run(argv, tmp_path, clean_env(), timeout=300)
    bundles = os.path.join(str(tmp_path), "out", "bundles")
    (name,) = os.listdir(bundles)
    return code, lines, err, os.path.join(bundles, name)


def test_os_exit_after_training_still_leaves_the_bundle_path_last(tmp_path):
    code, lines, err, bundle = _run(tmp_path, "os_exit")
    assert code == 0, err[-3000:]
    # printed when written (the script printed "steps 1" after it) and, as the child ran no exit
    # handler, by the command once the child had exited
    assert lines[-2:] == ["steps 1", bundle], lines[-5:]


def test_a_line_printed_after_the_bundle_is_followed_by_the_path_again(tmp_path):
    code, lines, err, bundle = _run(tmp_path, "print")
    assert code == 0, err[-3000:]
    assert lines[-2:] == ["done", bundle], lines[-5:]


def test_a_bundle_written_by_a_forked_child_is_reported_by_the_runner(tmp_path):
    code, lines, err, bundle = _run(tmp_path, "fork")
    assert code == 0, err[-3000:]
    assert lines[-1] == bundle, lines[-5:]
    assert "child exit 0" in lines
    assert "nothing was dumped" not in err and "no training was seen" not in err, err[-3000:]


def test_a_script_exiting_non_zero_without_a_bundle_keeps_its_status_and_is_not_told_status_4(tmp_path):
    # The line "no bundle was written: exit status 4" is printed only when 4 is the status the run
    # ends with: a script's own non-zero status (sys.exit(3), 143 after a SIGTERM) is kept as it is.
    for status, says_4 in ((3, False), (0, True)):
        script = tmp_path / "exits_{}.py".format(status)
        script.write_text("import sys\nsys.exit({})\n".format(status))
        argv = CLI + ["--output-dir", str(tmp_path / "out"), "--", str(script)]
        code, _, err = run(argv, tmp_path, clean_env(), timeout=120)
        assert code == (4 if says_4 else status), err[-3000:]
        assert ("no bundle was written: exit status 4" in err) is says_4, err[-3000:]


def test_a_sigterm_while_the_hook_captures_ends_the_run_without_a_bundle_or_a_traceback(tmp_path):
    # A plain ``with Session()`` script (the guide's) gets SIGTERM while the hook writes the captured
    # step's golden tensors: the hook turns it into Terminated (a SystemExit, status 143) so its
    # clean-ups run; the session's __exit__ must take that as a failure (no end(), no bundle), not
    # as the script's own sys.exit: else TensorFlow's SessionCloseThread ends the hook's run from a
    # half-captured step and prints that thread's traceback.
    flag = tmp_path / "reached"
    env = dict(clean_env(), **{TEST_PAUSE_ENV: "capture@{}".format(flag)})
    argv = CLI + ["--output-dir", str(tmp_path / "out"), "--", os.path.join(HELPERS, "unmodified_session.py")]
    proc = subprocess.Popen(argv, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert flag.exists(), proc.communicate()[1].decode()[-3000:]
        time.sleep(0.2)  # the pid is written: the child sleeps in the phase
        os.kill(int(flag.read_text()), signal.SIGTERM)
        _out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "Exception in thread" not in err, err[-3000:]
    bundles = tmp_path / "out" / "bundles"
    assert not bundles.exists() or not os.listdir(str(bundles)), os.listdir(str(bundles))
