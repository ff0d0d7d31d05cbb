"""Scripts run under ``npu-dump-hook run`` / ``python -m npu_dump_hook.runner`` in a fresh
process, and the one bundle such a run must leave."""
import os
import subprocess

from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.cli import main as cli_main

HELPERS = os.path.dirname(os.path.abspath(__file__))
#: The unmodified training scripts (no npu_dump_hook in them) and what each prints last itself.
ESTIMATOR = os.path.join(HELPERS, "unmodified_estimator.py")
MONITORED = os.path.join(HELPERS, "unmodified_monitored.py")
SESSION = os.path.join(HELPERS, "unmodified_session.py")
INTERACTIVE = os.path.join(HELPERS, "unmodified_interactive.py")
PROBE = os.path.join(HELPERS, "script_probe.py")
_NOT_INHERITED = ("DUMP_GRAPH_PATH", "RANK_ID", "DEVICE_ID", "ASCEND_DEVICE_ID")


def clean_env(**extra):
    """This environment without dump, hook or rank variables; TensorFlow's C++ logs quiet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_DUMP") and k not in _NOT_INHERITED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def run(argv, cwd, env, timeout=300):
    """``(exit status, stdout lines, stderr)`` of ``argv``."""
    done = subprocess.run(argv, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout)
    return done.returncode, done.stdout.decode().splitlines(), done.stderr.decode()


def assert_one_training_bundle(output_dir, stdout_lines, config_printed=True):
    """Exactly one hook ran (one run folder, one bundle), its bundle is the last line printed,
    verifies (``npu-dump-hook verify`` exits 0) and dumps the training step, gradients included;
    the session that trained had the dump options in its config (the script printed it)."""
    output_dir = str(output_dir)
    bundles = sorted(os.listdir(os.path.join(output_dir, "bundles")))
    runs = sorted(name for name in os.listdir(output_dir) if name != "bundles")
    assert len(bundles) == 1 and len(runs) == 1, (bundles, runs)
    path = os.path.join(output_dir, "bundles", bundles[0])
    assert stdout_lines and stdout_lines[-1] == path, stdout_lines[-3:]
    assert verify_bundle(path) == []
    assert cli_main(["verify", "-q", path]) == 0
    doc = read_bundle(path)
    dumped = [entry["op_name"] for entry in doc["files"] if entry["kind"] == "dump"]
    assert any(name.startswith("gradients") for name in dumped), dumped
    assert doc["run"]["steps"] == 1 and doc["backend"] == "emulated"
    configs = [line for line in stdout_lines if line.startswith("npu config: ")]
    expected = ["npu config: enable_dump=True dump_path={}".format(doc["options"]["dump_path"])]
    assert configs == (expected if config_printed else []), configs
    return doc
