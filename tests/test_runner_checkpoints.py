"""npu_dump_hook.runner: the script's checkpoint folders stay the script's (issue #20, item 2).

An unmodified script (tests/helpers/checkpointing_script.py) first trains by itself, leaving
checkpoints in its folder D; then under the runner, real TensorFlow on the emulated backend,
in a fresh interpreter: its MonitoredTrainingSession(checkpoint_dir=D), its own
CheckpointSaverHook(D) and its Saver.save(sess, D/model.ckpt) in a loop all save under
{run folder}/checkpoints, the dump and golden runs alike, and D keeps its bytes.
"""
import hashlib
import os
import sys

import pytest

from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.runner._checkpoints import CHECKPOINTS, CheckpointRedirect

from helpers.runs import HELPERS, assert_one_training_bundle, clean_env, run

SCRIPT = os.path.join(HELPERS, "checkpointing_script.py")
RUNNER = [sys.executable, "-m", "npu_dump_hook.runner"]
CLI = [sys.executable, "-m", "npu_dump_hook"]


def _contents(folder):
    """``{relative path: sha256}`` of every file under ``folder``."""
    result = {}
    for root, _, names in os.walk(str(folder)):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                result[os.path.relpath(path, str(folder))] = hashlib.sha256(handle.read()).hexdigest()
    return result


def _train_by_itself(tmp_path, kind, folder, steps=3):
    """The script run as ``python SCRIPT`` (no runner): its checkpoints in ``folder``."""
    code, lines, err = run([sys.executable, SCRIPT, kind, str(folder), str(steps)], tmp_path, clean_env())
    assert code == 0, err[-3000:]
    return lines


def _run_folder(output_dir):
    runs = [name for name in os.listdir(str(output_dir)) if name != "bundles"]
    assert len(runs) == 1, runs
    return os.path.join(str(output_dir), runs[0])


def _checkpoint_indexes(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(".index"))


@pytest.fixture(scope="module")
def monitored(tmp_path_factory):
    """A MonitoredTrainingSession(checkpoint_dir=D) script: D at step 3, then its dump run."""
    tmp_path = tmp_path_factory.mktemp("monitored")
    user_dir = tmp_path / "D"
    _train_by_itself(tmp_path, "monitored", user_dir)
    before = _contents(user_dir)
    code, lines, err = run(RUNNER + [SCRIPT, "monitored", str(user_dir)], tmp_path,
                           clean_env(NPU_DUMP_HOOK_OUTPUT_DIR=str(tmp_path / "out")))
    assert code == 0, err[-3000:]
    return {"tmp": tmp_path, "D": user_dir, "before": before, "lines": lines, "err": err}


def test_monitored_training_session_trains_in_the_run_folder_from_the_scripts_checkpoint(monitored):
    assert _contents(monitored["D"]) == monitored["before"]  # not one byte written into D
    assert monitored["lines"][-2] == "global step 4"  # resumed from D's latest checkpoint (step 3)
    doc = assert_one_training_bundle(monitored["tmp"] / "out", monitored["lines"], config_printed=False)
    assert doc["run"]["steps"] == 1
    saved = os.path.join(_run_folder(monitored["tmp"] / "out"), CHECKPOINTS)
    assert _checkpoint_indexes(saved) == ["model.ckpt-3.index", "model.ckpt-4.index"]  # the seed, the dumped step
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(saved))  # summaries went along
    assert "the MonitoredTrainingSession trains in {}".format(saved) in monitored["err"]


def test_the_golden_run_trains_from_the_bundle_only_and_writes_nothing_into_the_scripts_folder(monitored):
    tmp_path, user_dir = monitored["tmp"], monitored["D"]
    npu_bundle = os.path.join(str(tmp_path / "out" / "bundles"), os.listdir(str(tmp_path / "out" / "bundles"))[0])
    _train_by_itself(tmp_path, "monitored", user_dir)  # D moves on to step 6: not the bundle's state
    before = _contents(user_dir)
    argv = CLI + ["run", "--output-dir", str(tmp_path / "golden"), "--golden-for", npu_bundle, "--",
                  SCRIPT, "monitored", str(user_dir)]
    code, lines, err = run(argv, tmp_path, clean_env())
    assert code == 0, err[-3000:]
    assert _contents(user_dir) == before
    assert lines[-2] == "global step 4"  # from the bundle's state (step 3), not from D's step 6
    golden = lines[-1]
    assert verify_bundle(golden) == [] and read_bundle(golden)["golden_for"]["path"] == npu_bundle
    assert verify_bundle(npu_bundle) == [] and read_bundle(npu_bundle)["run"]["steps"] == 1
    saved = os.path.join(_run_folder(tmp_path / "golden"), CHECKPOINTS)
    assert _checkpoint_indexes(saved) == ["model.ckpt-0.index", "model.ckpt-4.index"]  # not seeded from D


def test_the_scripts_own_checkpoint_saver_hook_saves_into_the_run_folder(tmp_path):
    """Its Saver keeps one checkpoint and restored D's: D's must not be the one it deletes."""
    user_dir = tmp_path / "D"
    _train_by_itself(tmp_path, "saver_hook", user_dir)
    before = _contents(user_dir)
    code, lines, err = run(RUNNER + [SCRIPT, "saver_hook", str(user_dir)], tmp_path,
                           clean_env(NPU_DUMP_HOOK_OUTPUT_DIR=str(tmp_path / "out")))
    assert code == 0, err[-3000:]
    assert _contents(user_dir) == before
    assert lines[-2] == "global step 4"  # restored from D (step 3)
    assert_one_training_bundle(tmp_path / "out", lines, config_printed=False)
    saved = os.path.join(_run_folder(tmp_path / "out"), CHECKPOINTS)
    assert _checkpoint_indexes(saved) == ["model.ckpt-4.index"]
    assert "graph.pbtxt" in os.listdir(saved)


def test_saver_save_in_a_plain_session_loop_saves_into_the_run_folder(tmp_path):
    user_dir = tmp_path / "D"
    _train_by_itself(tmp_path, "saver", user_dir)
    before = _contents(user_dir)
    env = clean_env(NPU_DUMP_HOOK_OUTPUT_DIR=str(tmp_path / "out"), NPU_DUMP_HOOK_STOP="continue",
                    NPU_DUMP_HOOK_LOG_LEVEL="INFO")
    code, lines, err = run(RUNNER + [SCRIPT, "saver", str(user_dir), "3"], tmp_path, env)
    assert code == 0, err[-3000:]
    assert _contents(user_dir) == before
    saved = os.path.join(_run_folder(tmp_path / "out"), CHECKPOINTS)
    prefixes = [line.split(" ", 1)[1] for line in lines if line.startswith("saved ")]
    assert len(prefixes) == 3 and all(os.path.dirname(p) == saved for p in prefixes), prefixes
    assert [os.path.basename(p) for p in prefixes] == ["model.ckpt-4", "model.ckpt-5", "model.ckpt-6"]
    assert _checkpoint_indexes(saved) == ["model.ckpt-5.index", "model.ckpt-6.index"]  # its max_to_keep=2
    logged = [line for line in err.splitlines() if "checkpoints the script writes into" in line]
    assert len(logged) == 1 and str(user_dir) in logged[0] and saved in logged[0], logged


def test_keep_checkpoints_leaves_a_dump_run_in_the_scripts_folder(tmp_path):
    user_dir = tmp_path / "D"
    _train_by_itself(tmp_path, "monitored", user_dir)
    env = clean_env(NPU_DUMP_HOOK_OUTPUT_DIR=str(tmp_path / "out"), NPU_DUMP_HOOK_KEEP_CHECKPOINTS="1")
    code, lines, err = run(RUNNER + [SCRIPT, "monitored", str(user_dir)], tmp_path, env)
    assert code == 0, err[-3000:]
    assert "model.ckpt-4.index" in os.listdir(str(user_dir))  # asked for
    assert not os.path.exists(os.path.join(_run_folder(tmp_path / "out"), CHECKPOINTS))


# -- the folder mapping itself (no TensorFlow) ------------------------------------------------


def test_each_folder_of_the_script_maps_to_one_folder_of_the_run(tmp_path):
    run_dir = tmp_path / "run"
    redirect = CheckpointRedirect(str(run_dir), golden=True)
    root = str(run_dir / CHECKPOINTS)
    assert redirect.save_path(str(tmp_path / "a" / "model.ckpt")) == os.path.join(root, "model.ckpt")
    assert redirect.save_path(str(tmp_path / "b" / "best")) == os.path.join(root, "2", "best")
    assert redirect.folder(str(tmp_path / "a")) == root and os.path.isdir(os.path.join(root, "2"))
    inside = str(run_dir / "model_dir" / "model.ckpt")
    assert redirect.save_path(inside) == inside  # already the run's (an Estimator's redirected model_dir)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_training_sessions_summaries_follow_its_checkpoints_only_from_the_same_folder(tmp_path):
    redirect = CheckpointRedirect(str(tmp_path / "run"), golden=True)
    root = str(tmp_path / "run" / CHECKPOINTS)
    same = {"checkpoint_dir": str(tmp_path / "D"), "summary_dir": str(tmp_path / "D")}
    redirect.training_session(same)
    assert same == {"checkpoint_dir": root, "summary_dir": root}
    other = {"checkpoint_dir": str(tmp_path / "D"), "summary_dir": str(tmp_path / "logs")}
    redirect.training_session(other)
    assert other == {"checkpoint_dir": root, "summary_dir": str(tmp_path / "logs")}
    none = {"checkpoint_dir": None}
    redirect.training_session(none)
    assert none == {"checkpoint_dir": None}


def test_a_saver_forgets_the_scripts_checkpoints_before_saving_into_the_run(tmp_path):
    """Else max_to_keep would delete the checkpoint it restored from the script's folder."""

    class Saver(object):
        _last_checkpoints = [(str(tmp_path / "D" / "model.ckpt-3"), 1.0),
                             (str(tmp_path / "run" / CHECKPOINTS / "model.ckpt-4"), 2.0)]
        _checkpoints_to_be_deleted = [(str(tmp_path / "D" / "model.ckpt-2"), 0.5)]

    saver = Saver()
    CheckpointRedirect(str(tmp_path / "run"), golden=False).forget_outside(saver)
    assert saver._last_checkpoints == [(str(tmp_path / "run" / CHECKPOINTS / "model.ckpt-4"), 2.0)]
    assert saver._checkpoints_to_be_deleted == []
