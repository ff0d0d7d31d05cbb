"""Failure semantics of the hook's own work: strict=True raises our error naming the path,
strict=False logs and lets training finish; nothing half-done looks complete afterwards."""
import errno
import json
import logging
import os

import pytest

from npu_dump_hook import BundleError, DumpOptions, NpuDumpHook
from npu_dump_hook.bundle import _fs
from npu_dump_hook.constants import INCOMPLETE_STEP_MARKER
from npu_dump_hook.emulator import backend as emulator_backend
from npu_dump_hook.train import _capture_write as capture_write
from npu_dump_hook.train import capture
from npu_dump_hook.sample_models import mlp_session


def _disk_full_after(monkeypatch, module, name, calls, seen=None, only_into=None):
    """Let ``module.name`` succeed ``calls`` times, then raise ENOSPC (as a full disk would);
    functions given the same ``seen`` list share one count. With ``only_into`` only calls whose
    target path contains it count and fail."""
    real = getattr(module, name)
    seen = [] if seen is None else seen

    def flaky(*args, **kwargs):
        if args and isinstance(args[0], tuple):
            target = args[0][1]
        else:
            # write_dump_file(path, ...) names its target first, write_npy(array, path) second
            target = args[0] if args and isinstance(args[0], str) else (args[1] if len(args) > 1 else None)
        if only_into is not None and only_into not in str(target):
            return real(*args, **kwargs)
        seen.append(1)
        if len(seen) > calls:
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)


def _hook(strict, **kwargs):
    return NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", strict=strict, **kwargs)


def _marked_steps(root):
    return [folder for folder, _, files in os.walk(root) if INCOMPLETE_STEP_MARKER in files]


def test_disk_full_in_the_emulated_dump_strict_raises_naming_the_path(in_tmp_cwd, monkeypatch):
    _disk_full_after(monkeypatch, emulator_backend, "write_dump_file", 3)
    hook = _hook(strict=True)
    with pytest.raises(BundleError) as info:
        mlp_session.train(hook.options, hooks=[hook])
    message = str(info.value)
    assert "writing the dump of step 0 failed" in message and "No space left on device" in message
    assert os.path.join(os.getcwd(), "dump") in message and info.value.path.startswith(os.path.join(os.getcwd(), "dump"))
    (marked,) = _marked_steps("dump")  # the partial step folder says so
    with open(os.path.join(marked, INCOMPLETE_STEP_MARKER)) as handle:
        assert "No space left on device" in handle.read()
    assert not os.path.exists(os.path.join(hook.run_dir, ".capture"))  # no scratch left behind


def test_disk_full_in_the_emulated_dump_not_strict_finishes_training(in_tmp_cwd, monkeypatch, caplog):
    _disk_full_after(monkeypatch, emulator_backend, "write_dump_file", 3)
    hook = _hook(strict=False)
    with caplog.at_level(logging.ERROR, logger="npu_dump_hook.hook"):
        losses = mlp_session.train(hook.options, hooks=[hook])
    assert len(losses) == 1  # the training step itself ran and returned
    assert "writing the dump of step 0 failed (strict=False: training continues)" in caplog.text
    with open(os.path.join(hook.run_dir, "run.json")) as handle:
        failures = json.load(handle)["failures"]
    assert [f["doing"] for f in failures][0] == "writing the dump of step 0"
    assert _marked_steps("dump") and not os.path.exists(os.path.join(hook.run_dir, ".capture"))


def test_a_failed_golden_capture_never_looks_complete(in_tmp_cwd, monkeypatch):
    # The golden .npy conversion fails part-way: the folder must not stay "golden" without its manifest.
    # Fetched steps write with write_npy, streamed ones convert dump files: fail whichever runs.
    # Only writes into the golden folder count: the capture also writes scratch files first (TF 1.15
    # variable snapshots, the values of in-place updates), which must not be the ones that fail.
    seen = []
    _disk_full_after(monkeypatch, capture_write, "convert", 20, seen, only_into=os.sep + "golden" + os.sep)
    _disk_full_after(monkeypatch, capture_write, "write_npy", 20, seen, only_into=os.sep + "golden" + os.sep)
    hook = _hook(strict=False)
    mlp_session.train(hook.options, hooks=[hook])
    assert hook.failures and hook.failures[0]["doing"] == "writing the dump of step 0"
    assert not os.path.exists(hook.layout.golden_dir)
    assert os.path.isdir(hook.layout.golden_dir + ".incomplete")


def test_unwritable_bundle_dir_not_strict_finishes_training(in_tmp_cwd, monkeypatch, caplog):
    _disk_full_after(monkeypatch, _fs, "place_file", 0)
    hook = _hook(strict=False)
    with caplog.at_level(logging.ERROR, logger="npu_dump_hook.hook"):
        losses = mlp_session.train(hook.options, hooks=[hook])
    assert len(losses) == 1 and hook.bundle is None
    assert "collecting the bundle into {} failed".format(hook.bundle_dir) in caplog.text
    assert not os.listdir(hook.bundle_dir) if os.path.isdir(hook.bundle_dir) else True


def test_unwritable_bundle_dir_strict_raises_our_error(in_tmp_cwd, monkeypatch):
    _disk_full_after(monkeypatch, _fs, "place_file", 0)
    hook = _hook(strict=True)
    with pytest.raises(BundleError, match="No space left on device") as info:
        mlp_session.train(hook.options, hooks=[hook])
    assert hook.bundle_dir in str(info.value)  # the error names where it was writing


def test_a_capture_that_cannot_start_leaves_the_step_uncaptured_when_not_strict(in_tmp_cwd, monkeypatch):
    def fail(self, run_context):
        raise OSError(errno.EACCES, "Permission denied", self.scratch_dir)

    monkeypatch.setattr(capture.TensorCapture, "run_args", fail)
    hook = _hook(strict=False)
    assert len(mlp_session.train(hook.options, hooks=[hook])) == 1
    assert [f["doing"] for f in hook.failures][0] == "preparing the capture of step 0"
    assert "Permission denied" in hook.failures[0]["error"]
    strict = _hook(strict=True)
    with pytest.raises(BundleError, match="preparing the capture of step 0 failed: Permission denied: .*capture"):
        mlp_session.train(strict.options, hooks=[strict])


def test_collect_refuses_a_step_folder_a_failed_dump_left_incomplete(in_tmp_cwd, monkeypatch, capsys):
    from npu_dump_hook.cli import main

    _disk_full_after(monkeypatch, emulator_backend, "write_dump_file", 3)
    hook = _hook(strict=False)
    mlp_session.train(hook.options, hooks=[hook])  # its own collection refuses too (logged, strict=False)
    assert "left incomplete by a failed dump" in hook.failures[-1]["error"]
    code = main(["collect", "--dump-path", hook.options.dump_path, "--graph-dir", hook.layout.graph_dir,
                 "--out", "later"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "left incomplete by a failed dump" in err and "No space left on device" in err
    assert not os.path.exists("later")
