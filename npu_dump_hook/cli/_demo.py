"""``npu-dump-hook demo``: train a bundled sample model for one step with the hook.

Plain ``demo`` (the first act): one run on the emulated NPU with the exact profile, whose bundle
carries its own golden tensors (everything equal).

``demo --compare`` (the second act), the workflow of a real comparison:

1. this process: the emulated NPU run with the realistic profile (``emulate_profile="ascend"``:
   float16 Cube ops, GE fusion, device formats) and one injected kernel fault (default
   :data:`DEFAULT_FAULT_OPS` of the model with :data:`DEFAULT_FAULT_SPEC`; ``--fault OP=SPEC``
   to choose), into ``OUT/npu``;
2. a second process (``python -m npu_dump_hook demo --golden-for NPU_BUNDLE``, as a CPU/GPU
   machine would run it): the golden run of the same model, ``backend="reference"`` with
   ``initial_state=`` the NPU bundle, into ``OUT/golden``;
3. this process: :func:`npu_dump_hook.compare.compare` of the two bundles, its summary, an
   HTML report (``OUT/compare.html``) and the command that repeats it. Exit 0 when the first
   divergence names the faulted op (the comparison caught the bad kernel), 1 when it does not.
"""
import argparse
import os
import subprocess
import sys
from typing import Any, Dict, Optional

from ..bundle import read_bundle

from ._bundle import format_bundle
from ._exit import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from ._output import say

__all__ = ["run", "DEFAULT_FAULT_OPS", "DEFAULT_FAULT_SPEC", "GOLDEN_LINE"]

#: The op ``demo --compare`` injects its fault into, per sample model: a Cube op in the middle
#: of the forward pass, so ops upstream of it stay equal and the ops downstream inherit its error.
DEFAULT_FAULT_OPS = {"cnn": "conv2/Conv2D", "mlp": "hidden2/MatMul", "text": "logits/MatMul"}
#: The default fault: a kernel 5% off, far beyond float16 rounding.
DEFAULT_FAULT_SPEC = "scale=1.05"
#: The line the golden run (``demo --golden-for``) prints its bundle's path on.
GOLDEN_LINE = "golden bundle: "


def _quiet_tensorflow() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import warnings

    warnings.filterwarnings("ignore", message=".*is deprecated.*")
    from .._tf import quiet_tensorflow_logs

    quiet_tensorflow_logs()


def _train(model: str, hook: Any, workdir: str) -> None:
    if model == "cnn":
        from ..sample_models import cnn_estimator

        cnn_estimator.train(os.path.join(workdir, "model"), hooks=[hook], steps=1000)
    elif model == "mlp":
        from ..sample_models import mlp_session

        mlp_session.train(hook.options, hooks=[hook], steps=1000)
    else:
        from ..sample_models import text_model

        text_model.train(hook.options, hooks=[hook], steps=1000)


def _tree(root: str, limit: int = 25) -> None:
    shown = 0
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        depth = os.path.relpath(folder, root).count(os.sep) + (folder != root)
        say("  " * depth + os.path.basename(folder) + "/")
        for name in sorted(files):
            if shown >= limit:
                say("  " * (depth + 1) + "...")
                return
            say("  " * (depth + 1) + name)
            shown += 1


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    if getattr(args, "initial_state", None):
        return _golden_run(args)
    if getattr(args, "compare", False):
        return _compare_acts(args)
    return _first_act(args)


def _check_options(args: argparse.Namespace) -> None:
    """Options that only make sense together: usage errors before anything trains."""
    golden, compare = getattr(args, "initial_state", None), getattr(args, "compare", False)
    if golden and compare:
        raise CliError("demo: --golden-for is the second process of --compare, not an option of it", EXIT_USAGE)
    if getattr(args, "faults", None) and not compare:
        raise CliError("demo: --fault needs --compare (the plain demo's run is everything-equal)", EXIT_USAGE)
    if compare and args.backend not in ("auto", "emulated"):
        raise CliError("demo: --compare injects a fault into the emulated NPU: --backend {} does not fit".format(
            args.backend), EXIT_USAGE)
    if golden and not os.path.exists(golden):
        raise CliError("demo: --golden-for {}: no such file or folder".format(golden), EXIT_USAGE)


# --------------------------------------------------------------------------- act 1


def _first_act(args: argparse.Namespace) -> int:
    _quiet_tensorflow()
    from ..hook import NpuDumpHook  # loads TensorFlow: after its logging is quieted

    out = os.path.abspath(args.out)
    hook = NpuDumpHook(output_dir=out, backend=args.backend)
    say("npu-dump-hook demo: training the {} sample model (the script asks for 1000 steps)".format(args.model))
    _train(args.model, hook, hook.run_dir)
    summary = hook.summary
    say("steps run: {} (global step {} -> {})".format(
        summary["steps"], summary["global_step"]["before"], summary["global_step"]["after"]))
    randomness = summary["randomness"]
    say("randomness '{}': {} source(s), {} not handled".format(
        randomness["policy"], len(randomness["sources"]), len(randomness["not_handled"])))
    for source in randomness["sources"]:
        say("  {:<14} {:<60} {}".format(source["category"], source["op"][:60], source["action"]))
    say("initial state: {}".format(summary["initial_state"] or "not saved"))
    emulator = summary.get("emulator")
    if emulator:
        say("\nemulated NPU ({} precision): Build graph {}".format(emulator["emulate_precision"], emulator["graph_file"]))
        say("dump tree:")
        _tree(hook.options.dump_path)
    if hook.golden_dir:
        say("\nreference (golden) tensors:")
        _tree(hook.golden_dir, limit=8)
    if hook.bundle is not None:
        say("\nbundle: {}".format(hook.bundle.location))
        for line in format_bundle(read_bundle(hook.bundle.location)):
            say(line)
    return EXIT_OK


# --------------------------------------------------------------------------- act 2


def _faults(args: argparse.Namespace) -> Dict[str, str]:
    from ._run import faults_from_flags

    return faults_from_flags(args.faults) or {DEFAULT_FAULT_OPS[args.model]: DEFAULT_FAULT_SPEC}


def _compare_acts(args: argparse.Namespace) -> int:
    faults = _faults(args)
    out = os.path.abspath(args.out)
    npu_bundle = _npu_run(args.model, os.path.join(out, "npu"), faults)
    golden_bundle = _golden_in_second_process(args, npu_bundle, os.path.join(out, "golden"))
    return _compare(npu_bundle, golden_bundle, os.path.join(out, "compare.html"), faults)


def _npu_run(model: str, out: str, faults: Dict[str, str]) -> str:
    """Act 1: the emulated NPU run (profile ascend, the faults) in this process; its bundle path."""
    _quiet_tensorflow()
    from ..hook import NpuDumpHook  # loads TensorFlow: after its logging is quieted

    text = ", ".join("{}={}".format(op, spec) for op, spec in faults.items())
    say("npu-dump-hook demo --compare")
    say("1. the NPU run (emulated NPU, profile ascend: float16 Cube ops, GE fusion, device formats; "
          "injected fault {}): training the {} sample model".format(text, model))
    hook = NpuDumpHook(output_dir=out, backend="emulated", emulate_profile="ascend", faults=faults, verbose=False)
    _train(model, hook, hook.run_dir)
    if hook.bundle is None:
        raise CliError("demo: the NPU run wrote no bundle (run folder {}; see its run.json)".format(hook.run_dir))
    doc = read_bundle(hook.bundle.location)
    coverage = doc.get("coverage") or {}
    graph = (hook.summary.get("emulator") or {}).get("graph") or {}
    say("   steps run: {}; dumped {}/{} ops, {} fused node(s), no golden tensors (this run's numerics "
          "are the NPU's)".format(hook.summary["steps"], coverage.get("dumped", "?"), coverage.get("expected", "?"),
                                  len(graph.get("fused") or ())))
    say("   NPU bundle:    {}".format(hook.bundle.location))
    return hook.bundle.location


def _child_env() -> Dict[str, str]:
    """This environment, with this copy of the package first on the child's path."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _golden_in_second_process(args: argparse.Namespace, npu_bundle: str, out: str) -> str:
    """Act 2: ``python -m npu_dump_hook demo --golden-for NPU_BUNDLE`` in a child; its bundle path."""
    command = [sys.executable, "-m", "npu_dump_hook", "demo", "--model", args.model, "--out", out,
               "--golden-for", npu_bundle]
    if getattr(args, "quiet", False):
        command.append("-q")
    say("2. the golden run in a second process (backend reference, initial state from the NPU bundle):")
    say("   $ " + " ".join(_quoted(word) for word in command))
    sys.stdout.flush()
    child = subprocess.Popen(command, env=_child_env(), stdout=subprocess.PIPE, universal_newlines=True)
    golden = None  # type: Optional[str]
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith(GOLDEN_LINE):
            golden = line[len(GOLDEN_LINE):].rstrip("\n")
        else:
            say("   | " + line.rstrip("\n"))
    code = child.wait()
    if code != 0 or golden is None:
        raise CliError("demo: the golden run (second process) failed with status {}{}".format(
            code, "" if code else " and printed no bundle"), EXIT_ERROR)
    say("   golden bundle: {}".format(golden))
    return golden


def _quoted(word: str) -> str:
    import shlex

    return shlex.quote(word)


def _golden_run(args: argparse.Namespace) -> int:
    """The second process of ``--compare`` (or a user's, on a CPU/GPU machine): the golden run."""
    _quiet_tensorflow()
    from ..hook import NpuDumpHook  # loads TensorFlow: after its logging is quieted

    hook = NpuDumpHook(output_dir=os.path.abspath(args.out), backend=args.backend,
                       initial_state=os.path.abspath(args.initial_state), verbose=False)
    say("golden run: training the {} sample model from the initial state of {}".format(
        args.model, hook.target.path if hook.target is not None else args.initial_state))
    _train(args.model, hook, hook.run_dir)
    if hook.bundle is None:
        raise CliError("demo: the golden run wrote no bundle (run folder {}; see its run.json)".format(hook.run_dir))
    doc = read_bundle(hook.bundle.location)
    target = doc.get("golden_for") or {}
    fingerprints = doc.get("fingerprints") or {}
    say("golden step {}: fingerprints {} the NPU bundle's ({} variable(s), {} input(s)); {} golden tensor(s)".format(
        target.get("captured_step"), "match" if target.get("match") else "DIFFER from",
        len(fingerprints.get("state") or ()), len(fingerprints.get("batch") or ()),
        sum(1 for entry in doc["files"] if entry["kind"] == "golden" and entry["path"].endswith(".npy"))))
    say(GOLDEN_LINE + hook.bundle.location)
    return EXIT_OK


# --------------------------------------------------------------------------- act 3


def _compare(npu_bundle: str, golden_bundle: str, html: str, faults: Dict[str, str]) -> int:
    command = "npu-dump-hook compare {} {} --html report.html".format(_quoted(npu_bundle), _quoted(golden_bundle))
    try:
        from ..compare import compare
        from ..compare import render_html
    except ImportError as exc:  # a copy of the package without the compare command
        say("3. compare the two bundles (npu_dump_hook.compare is not importable here: {}):".format(exc))
        say("   " + command)
        return EXIT_OK
    say("3. the comparison (npu-dump-hook compare NPU GOLDEN):")
    sys.stdout.flush()
    result = compare(npu_bundle, golden_bundle)
    from .._atomic import atomic_write_bytes

    atomic_write_bytes(html, render_html(result.doc).encode("utf-8"))
    for line in result.summary_text(5).splitlines():
        say("   " + line)
    say("   HTML report: {}".format(html))
    say("\nrepeat the comparison (exit 1: a threshold breached), with its HTML report:\n  " + command)
    return _caught(result.first_divergence, faults)


def _caught(first: Optional[Dict[str, Any]], faults: Dict[str, str]) -> int:
    """EXIT_OK when the first divergence is a faulted op (or a fused node holding one)."""
    names = set()  # type: Any
    if first:
        names = set(first.get("original_ops") or ()) | {first.get("npu_op")}
    hit = sorted(op for op in faults if op in names)
    if hit:
        say("\nthe comparison caught the injected fault: first divergence {} (original op(s) {})".format(
            first["npu_op"], ", ".join(first.get("original_ops") or [first["npu_op"]])))
        return EXIT_OK
    found = first["npu_op"] if first else "none"
    say("\nnpu-dump-hook demo: the first divergence ({}) is not the faulted op ({})".format(
        found, ", ".join(sorted(faults))), file=sys.stderr)
    return EXIT_CHECK_FAILED
