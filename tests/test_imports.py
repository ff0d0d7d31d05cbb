"""Import rules: `_tf.py` is the only package module that imports TensorFlow, and importing the
TF-free modules loads none of it (Ascend images: the package must load before TF is configured)."""
import ast
import os
import subprocess
import sys

import npu_dump_hook

PACKAGE_DIR = os.path.dirname(os.path.abspath(npu_dump_hook.__file__))
TF_ROOTS = ("tensorflow", "tensorflow_core", "tensorflow_estimator", "keras", "npu_bridge")
# The sample models are user scripts shipped with the package: they import TF as users do.
USER_CODE = ("sample_models",)


def _package_modules():
    for folder, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d not in USER_CODE and d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(folder, name), PACKAGE_DIR)


def _imported_roots(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno


def test_only_tf_module_imports_tensorflow():
    offenders = []
    modules = list(_package_modules())
    assert "_tf.py" in modules and len(modules) > 20
    for module in modules:
        if module == "_tf.py":
            continue
        for root, line in _imported_roots(os.path.join(PACKAGE_DIR, module)):
            if root in TF_ROOTS:
                offenders.append("{}:{} imports {}".format(module, line, root))
    assert offenders == []


def test_importing_the_package_and_tf_free_modules_loads_no_tensorflow():
    modules = ["npu_dump_hook", "npu_dump_hook.cli", "npu_dump_hook.formats", "npu_dump_hook.bundle",
               "npu_dump_hook.locate", "npu_dump_hook.reference", "npu_dump_hook.emulator",
               "npu_dump_hook.collect", "npu_dump_hook.run_record", "npu_dump_hook.backends",
               "npu_dump_hook.cli._bundle", "npu_dump_hook.cli._parse", "npu_dump_hook.cli._since",
               "npu_dump_hook.config", "npu_dump_hook.determinism", "npu_dump_hook._capture"]
    # npu_dump_hook.hook is not among them: NpuDumpHook subclasses SessionRunHook (Estimator
    # checks the type), so that module loads TensorFlow, on first use of the name only.
    code = ("import sys\n"
            "for name in {!r}: __import__(name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {!r})\n"
            "print(','.join(bad))\n").format(modules, TF_ROOTS)
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.decode().strip() == ""
