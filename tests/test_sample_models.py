"""Each sample model runs with the hook as a user would: as a script and through its API."""
import os
import subprocess
import sys

import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("module", ["mlp_session", "text_model"])
def test_session_models_stop_after_one_step(in_tmp_cwd, module):
    import importlib

    model = importlib.import_module("npu_dump_hook.sample_models." + module)
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
    losses = model.train(hook.options, hooks=[hook], steps=1000)
    assert len(losses) == 1 and losses[0] > 0
    assert hook.summary["global_step"] == {"before": 0, "after": 1}
    assert hook.summary["randomness"]["not_handled"] == []


@pytest.mark.parametrize("script", ["cnn_estimator.py", "mlp_session.py", "text_model.py"])
def test_scripts_run_as_users_run_them(in_tmp_cwd, script):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "sample_models", script), "--output-dir", "out"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = out.stdout.strip().splitlines()[-1].split("run folder: ")[1]
    assert os.path.exists(os.path.join(run_dir, "run.json"))
