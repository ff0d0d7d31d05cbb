"""``npu-dump-hook demo``: train a bundled sample model for one step with the hook."""
import argparse
import os
from typing import Any

from ..bundle import read_bundle

from ._bundle import format_bundle
from ._exit import EXIT_OK

__all__ = ["run"]


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
        print("  " * depth + os.path.basename(folder) + "/")
        for name in sorted(files):
            if shown >= limit:
                print("  " * (depth + 1) + "...")
                return
            print("  " * (depth + 1) + name)
            shown += 1


def run(args: argparse.Namespace) -> int:
    _quiet_tensorflow()
    from ..hook import NpuDumpHook  # loads TensorFlow: after its logging is quieted

    out = os.path.abspath(args.out)
    hook = NpuDumpHook(output_dir=out, backend=args.backend)
    print("npu-dump-hook demo: training the {} sample model (the script asks for 1000 steps)".format(args.model))
    _train(args.model, hook, hook.run_dir)
    summary = hook.summary
    print("steps run: {} (global step {} -> {})".format(
        summary["steps"], summary["global_step"]["before"], summary["global_step"]["after"]))
    randomness = summary["randomness"]
    print("randomness '{}': {} source(s), {} not handled".format(
        randomness["policy"], len(randomness["sources"]), len(randomness["not_handled"])))
    for source in randomness["sources"]:
        print("  {:<14} {:<60} {}".format(source["category"], source["op"][:60], source["action"]))
    print("initial state: {}".format(summary["initial_state"] or "not saved"))
    emulator = summary.get("emulator")
    if emulator:
        print("\nemulated NPU ({} precision): Build graph {}".format(emulator["emulate_precision"], emulator["graph_file"]))
        print("dump tree:")
        _tree(hook.options.dump_path)
    if hook.golden_dir:
        print("\nreference (golden) tensors:")
        _tree(hook.golden_dir, limit=8)
    if hook.bundle is not None:
        print("\nbundle: {}".format(hook.bundle.location))
        for line in format_bundle(read_bundle(hook.bundle.location)):
            print(line)
    return EXIT_OK
