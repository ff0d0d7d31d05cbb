"""Which step folders collection takes as complete (issue 20, items 4 and 9): the emulator's
completion mark lists every file it wrote, so files of another process in the same step folder,
or files gone, are refused; an NPU run marks its own dump folder until it ends, never the user's."""
import json
import os
import shutil

import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.backends import RealNpu
from npu_dump_hook.cli import main
from npu_dump_hook.constants import COMPLETE_STEP_MARKER, INCOMPLETE_STEP_MARKER
from npu_dump_hook.errors import LocateError
from npu_dump_hook.locate import find_step_dirs
from npu_dump_hook.run_record import RunLayout
from npu_dump_hook.sample_models import mlp_session
from npu_dump_hook.train.dump_run import DumpRun


@pytest.fixture
def dumped(in_tmp_cwd):
    """One emulated run's dump (not collected): (hook, its one step folder)."""
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    mlp_session.train(hook.options, hooks=[hook])
    (step,) = [s["dir"] for s in hook.summary["emulator"]["steps"]]
    return hook, step


def _collect(hook, capsys):
    capsys.readouterr()
    code = main(["collect", "--dump-path", "dump", "--graph-dir", hook.layout.graph_dir, "--out", "later"])
    return code, capsys.readouterr().err


def test_the_completion_mark_lists_every_file_the_run_wrote(dumped, capsys):
    hook, step = dumped
    with open(os.path.join(step, COMPLETE_STEP_MARKER)) as handle:
        mark = json.load(handle)
    assert mark["writer"]["pid"] == os.getpid()
    assert sorted(mark["files"]) == sorted(n for n in os.listdir(step) if not n.startswith("."))
    assert not os.path.exists(os.path.join(step, INCOMPLETE_STEP_MARKER))
    code, err = _collect(hook, capsys)
    assert code == 0, err
    bundled = [n for _, _, files in os.walk("later") for n in files]
    assert COMPLETE_STEP_MARKER not in bundled  # collection's check, not data


def test_collect_refuses_a_step_folder_holding_another_process_files(dumped, capsys):
    hook, step = dumped
    name = sorted(n for n in os.listdir(step) if not n.startswith("."))[0]
    # another writer's file for the same op: same name pattern, another timestamp
    parts = name.split(".")
    parts[-1] = str(int(parts[-1]) + 7)
    shutil.copy(os.path.join(step, name), os.path.join(step, ".".join(parts)))
    code, err = _collect(hook, capsys)
    assert code == 3 and "mixes the files of two processes" in err and ".".join(parts) in err, err
    assert "pid {}".format(os.getpid()) in err and not os.path.exists("later")


def test_collect_refuses_a_completed_step_folder_missing_a_file(dumped, capsys):
    hook, step = dumped
    name = sorted(n for n in os.listdir(step) if not n.startswith("."))[-1]
    os.unlink(os.path.join(step, name))
    code, err = _collect(hook, capsys)
    assert code == 3 and "wrote but which are gone" in err and name in err, err


def _npu_run(tmp_path, dump_path=None):
    layout = RunLayout(str(tmp_path / "run"))
    options = DumpOptions(enable_dump=True, dump_path=dump_path or layout.dump_dir)
    return DumpRun(layout, options, RealNpu(), reference=False, ranks=None, save_initial_state=False), layout


def test_an_npu_run_marks_its_own_dump_folder_until_it_ends(tmp_path):
    run, layout = _npu_run(tmp_path)
    run.session_started()
    marker = os.path.join(layout.dump_dir, INCOMPLETE_STEP_MARKER)
    assert os.path.isfile(marker)
    step = os.path.join(layout.dump_dir, "20250101000000", "0", "ge_default_1", "1", "0")
    os.makedirs(step)  # what GE wrote before the process was killed
    open(os.path.join(step, "Add.add.2.0.1700000000000000"), "w").close()
    with pytest.raises(LocateError, match="dump folder .* was left incomplete .*has not ended"):
        find_step_dirs(layout.dump_dir, "ge_default_1")
    run.run_ended()
    assert not os.path.exists(marker)
    assert [s.step for s in find_step_dirs(layout.dump_dir, "ge_default_1")] == ["0"]


def test_an_npu_run_never_writes_into_the_users_dump_folder(tmp_path):
    users = tmp_path / "users_dump"
    users.mkdir()
    run, _ = _npu_run(tmp_path, str(users))
    run.session_started()
    run.run_ended()
    assert os.listdir(str(users)) == []
