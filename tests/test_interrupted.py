"""An interrupted run is never passed off as complete (issue 20, item 4).

A real training script (the sample MLP under NpuDumpHook, emulated NPU + golden capture) runs in
its own process and is stopped by a real signal (or an exception) in each phase of the hook's work:
the golden capture, the emulated dump, the golden files before their manifest, the collection.
The test-only pause (``NPU_DUMP_HOOK_TEST_PAUSE``, npu_dump_hook._phases) holds the process in the
phase until the test has signalled it. Afterwards nothing it left may pass for complete:
``collect`` refuses the dump, ``compare`` refuses its step folder, no golden folder without its
manifest, no scratch (``.capture/``), no staging folder (a SIGKILLed one is swept by the next run).
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from npu_dump_hook.cli import main
from npu_dump_hook.compare._golden import load_golden_side
from npu_dump_hook.compare._npu import load_npu
from npu_dump_hook.constants import COMPLETE_STEP_MARKER, INCOMPLETE_STEP_MARKER
from npu_dump_hook.errors import CompareError
from npu_dump_hook._phases import TEST_PAUSE_ENV

from helpers.runs import clean_env

#: The exit status of an uncaught KeyboardInterrupt: 1 up to Python 3.7, killed by SIGINT since 3.8.
INT = 1 if sys.version_info < (3, 8) else -signal.SIGINT

SCRIPT = """
import sys
from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.sample_models import mlp_session
hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
mlp_session.train(hook.options, hooks=[hook])
print("BUNDLE", hook.bundle.location if hook.bundle else None)
"""


def _train(cwd, pause=None, send=None):
    """Run SCRIPT in ``cwd``; with ``pause`` (``phase`` or ``phase!raise``) and ``send`` (a signal),
    wait for the process to reach the phase, signal it, and return its exit status."""
    env = clean_env()
    flag = os.path.join(str(cwd), "reached")
    if pause is not None:
        env[TEST_PAUSE_ENV] = pause if pause.endswith("!raise") else "{}@{}".format(pause, flag)
    with open(os.path.join(str(cwd), "stderr.txt"), "ab") as err:
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=str(cwd), env=env,
                                stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_ctrl_c_as_in_a_terminal)
        try:
            if send is not None:
                deadline = time.monotonic() + 240
                while not os.path.exists(flag) and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert os.path.exists(flag), _stderr(cwd)
                time.sleep(0.2)  # the pid is written: the process sleeps in the phase
                proc.send_signal(send)
            return proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()


def _ctrl_c_as_in_a_terminal():
    """SIGINT handled by default in the script, as for a user at a terminal: a test run started in
    the background (``cmd &`` in a non-interactive shell) inherits SIGINT ignored, and Python then
    never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stderr(cwd):
    with open(os.path.join(str(cwd), "stderr.txt"), errors="replace") as handle:
        return handle.read()[-3000:]


def _run_dir(cwd):
    (name,) = [n for n in os.listdir(os.path.join(str(cwd), "out")) if n != "bundles"]
    return os.path.join(str(cwd), "out", name)


def _step_dirs(cwd):
    return [folder for folder, dirs, files in os.walk(os.path.join(str(cwd), "dump"))
            if not dirs and any(not f.startswith(".") for f in files)
            or INCOMPLETE_STEP_MARKER in files]


def _collect_later(cwd, capsys):
    """``npu-dump-hook collect`` of what the run left: (exit status, stderr)."""
    capsys.readouterr()
    code = main(["collect", "--dump-path", os.path.join(str(cwd), "dump"), "--graph-dir",
                 os.path.join(_run_dir(cwd), "graph"), "--out", os.path.join(str(cwd), "later")])
    return code, capsys.readouterr().err


def _no_golden_without_manifest(run_dir):
    golden = os.path.join(run_dir, "golden")
    assert not os.path.isdir(golden) or os.path.isfile(os.path.join(golden, "golden_manifest.json"))


def _no_leftovers(cwd):
    run_dir = _run_dir(cwd)
    assert not os.path.exists(os.path.join(run_dir, ".capture")), os.listdir(run_dir)
    _no_golden_without_manifest(run_dir)
    bundles = os.path.join(str(cwd), "out", "bundles")
    assert not any(".staging-" in n for n in os.listdir(bundles)) if os.path.isdir(bundles) else True


@pytest.mark.parametrize("pause,send,status", [
    ("dump", signal.SIGINT, INT),
    ("dump", signal.SIGTERM, 143),
    ("dump!raise", None, 1),
])
def test_a_dump_stopped_part_way_is_refused_by_collect_and_compare(tmp_path, capsys, pause, send, status):
    assert _train(tmp_path, pause, send) == status, _stderr(tmp_path)
    _no_leftovers(tmp_path)
    (step,) = _step_dirs(tmp_path)
    assert os.path.isfile(os.path.join(step, INCOMPLETE_STEP_MARKER))
    assert not os.path.exists(os.path.join(step, COMPLETE_STEP_MARKER))
    assert len([n for n in os.listdir(step) if not n.startswith(".")]) == 2  # two of the step's files
    code, err = _collect_later(tmp_path, capsys)
    assert code == 3 and "left incomplete by a failed dump, or an interrupted or killed one" in err, err
    assert not os.path.exists(os.path.join(str(tmp_path), "later"))
    with pytest.raises(CompareError, match="left incomplete"):
        load_npu(step, graph=os.path.join(_run_dir(tmp_path), "graph"))


def test_a_sigkilled_dump_leaves_its_begin_marker(tmp_path, capsys):
    assert _train(tmp_path, "dump", signal.SIGKILL) == -signal.SIGKILL
    (step,) = _step_dirs(tmp_path)
    with open(os.path.join(step, INCOMPLETE_STEP_MARKER)) as handle:
        assert "never completed" in handle.read()
    code, err = _collect_later(tmp_path, capsys)
    assert code == 3 and "never completed" in err, err


@pytest.mark.parametrize("pause,send,status", [
    ("capture", signal.SIGINT, INT),
    ("capture", signal.SIGTERM, 143),
    ("capture!raise", None, 1),
    ("golden", signal.SIGTERM, 143),
    ("golden", signal.SIGINT, INT),
])
def test_an_interrupted_capture_leaves_no_scratch_and_no_golden_that_looks_complete(tmp_path, pause, send, status):
    assert _train(tmp_path, pause, send) == status, _stderr(tmp_path)
    _no_leftovers(tmp_path)
    run_dir = _run_dir(tmp_path)
    if pause.startswith("golden"):  # the .npy files were written: set aside, never "golden"
        assert os.listdir(os.path.join(run_dir, "golden.incomplete"))
    assert not os.path.exists(os.path.join(str(tmp_path), "out", "bundles")) or \
        not os.listdir(os.path.join(str(tmp_path), "out", "bundles"))


@pytest.mark.parametrize("send,status", [(signal.SIGINT, INT), (signal.SIGTERM, 143)])
def test_an_interrupted_collection_leaves_no_staging_folder(tmp_path, send, status):
    assert _train(tmp_path, "collect", send) == status, _stderr(tmp_path)
    bundles = os.path.join(str(tmp_path), "out", "bundles")
    assert os.listdir(bundles) == []  # neither the bundle nor its staging folder


def test_a_staging_folder_a_killed_collection_left_is_swept_by_the_next_run(tmp_path):
    assert _train(tmp_path, "collect", signal.SIGKILL) == -signal.SIGKILL
    bundles = os.path.join(str(tmp_path), "out", "bundles")
    (stale,) = os.listdir(bundles)
    assert ".staging-" in stale
    assert _train(tmp_path) == 0, _stderr(tmp_path)
    (bundle,) = os.listdir(bundles)  # the next run's bundle, the stale staging folder gone
    assert ".staging-" not in bundle


def test_a_sigkilled_golden_capture_leaves_its_begin_marker_and_compare_refuses_it(tmp_path, capsys):
    """SIGKILL runs no handler: golden/ keeps its .npy files, no manifest, and is never renamed
    golden.incomplete. The begin marker written before its first file says so, and compare refuses
    the folder with "incomplete (killed)" instead of comparing a part of the step."""
    assert _train(tmp_path, "golden", signal.SIGKILL) == -signal.SIGKILL
    run_dir = _run_dir(tmp_path)
    golden = os.path.join(run_dir, "golden")
    assert not os.path.exists(os.path.join(golden, "golden_manifest.json"))
    assert any(name.endswith(".npy") for name in os.listdir(golden)), os.listdir(golden)
    with open(os.path.join(golden, INCOMPLETE_STEP_MARKER)) as handle:
        assert "golden capture began" in handle.read()
    (step,) = _step_dirs(tmp_path)  # the emulated dump of the step completed before the kill
    capsys.readouterr()
    code = main(["compare", step, golden, "--graph", _graph_file(run_dir)])
    err = capsys.readouterr().err
    assert code == 3 and "incomplete (killed)" in err and "never completed" in err, err
    with pytest.raises(CompareError, match=r"incomplete \(killed\)"):
        load_golden_side(golden, None)


def test_a_completed_golden_capture_has_no_begin_marker(tmp_path):
    assert _train(tmp_path) == 0, _stderr(tmp_path)
    golden = os.path.join(_run_dir(tmp_path), "golden")
    assert os.path.isfile(os.path.join(golden, "golden_manifest.json"))
    assert not os.path.exists(os.path.join(golden, INCOMPLETE_STEP_MARKER))
    assert load_golden_side(golden, None).kind == "npy_dir"


def _graph_file(run_dir):
    (name,) = [n for n in os.listdir(os.path.join(run_dir, "graph")) if n.endswith("_Build.txt")]
    return os.path.join(run_dir, "graph", name)
