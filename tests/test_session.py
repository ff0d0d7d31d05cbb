"""NpuDumpSession: plain tf.compat.v1.Session scripts (the guide's sess.run mode) get their one-step bundle."""
import os
import subprocess
import sys

import pytest

from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.errors import OptionError

HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers")


def _run_guide(stop, tmp_path):
    done = subprocess.run([sys.executable, os.path.join(HELPERS, "guide_session.py"), stop, str(tmp_path)],
                          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    return done.returncode, done.stdout.decode().splitlines(), done.stderr.decode()


def _assert_training_bundle(path):
    assert verify_bundle(path) == []
    doc = read_bundle(path)
    dumped = [f["op_name"] for f in doc["files"] if f["kind"] == "dump"]
    assert any(name.startswith("gradients") for name in dumped)  # the training step, not the init run
    assert doc["run"]["steps"] == 1 and doc["backend"] == "emulated"
    return doc


def test_guide_script_stops_after_one_step_exit_0_bundle_path_last(tmp_path):
    code, lines, err = _run_guide("exit", tmp_path)
    assert code == 0, err[-2000:]
    assert not any(line.startswith("iterations") for line in lines)  # the loop was ended by the wrapper
    bundle = lines[-1]
    assert bundle.startswith(str(tmp_path)) and os.path.isdir(bundle)
    _assert_training_bundle(bundle)


def test_guide_script_with_stop_continue_trains_on_and_bundles_once(tmp_path):
    code, lines, err = _run_guide("continue", tmp_path)
    assert code == 0, err[-2000:]
    assert lines[-1] == "iterations 100"
    bundles = os.listdir(os.path.join(str(tmp_path), "bundles"))
    assert len(bundles) == 1
    _assert_training_bundle(os.path.join(str(tmp_path), "bundles", bundles[0]))


def test_stop_must_be_a_known_mode():
    from npu_dump_hook import NpuDumpSession

    with pytest.raises(OptionError, match="stop"):
        NpuDumpSession(object(), stop="later")
