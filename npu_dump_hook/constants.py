"""Environment variables and fixed names, in one place.

Variables read by npu_dump_hook itself (all optional)::

    NPU_DUMP_ENABLE          "1"/"true"/"yes" or "0"/"false"/"no" -> DumpOptions.enable_dump
    NPU_DUMP_PATH            -> DumpOptions.dump_path
    NPU_DUMP_STEP            -> DumpOptions.dump_step       (GE grammar, e.g. "0|5|10-20")
    NPU_DUMP_MODE            -> DumpOptions.dump_mode       (input|output|all)
    NPU_DUMP_LAYER           -> DumpOptions.dump_layer      (space-separated op names)
    NPU_DUMP_DATA            -> DumpOptions.dump_data       (tensor|stats)
    NPU_DUMP_DEBUG_ENABLE    -> DumpOptions.enable_dump_debug
    NPU_DUMP_DEBUG_MODE      -> DumpOptions.dump_debug_mode (aicore_overflow|atomic_overflow|all)

    NPU_DUMP_HOOK_CAPTURE_BUDGET  bytes a captured step may fetch directly (default 256 MiB);
                             larger steps stream tensors to disk one at a time

Variables read by :mod:`npu_dump_hook.runner` (``npu-dump-hook run`` sets them for its child)::

    NPU_DUMP_HOOK_RUN        "0"/"false"/... : the runner runs the script without injecting anything
    NPU_DUMP_HOOK_<KEYWORD>  an NpuDumpHook keyword, one variable each (ENV_RUN_HOOK_OPTIONS):
                             MAX_STEPS, RANDOMNESS, SEED, BACKEND, EMULATE_PRECISION, REFERENCE,
                             SAVE_INITIAL_STATE, OUTPUT_DIR, BUNDLE_DIR, STRICT, RANKS ("0,1"),
                             GRAPH_KEYWORD, LINK, CHECKSUM, ARCHIVE, EMULATE_PROFILE (exact|ascend),
                             FAULTS (below), INITIAL_STATE (an NPU bundle: the golden run, the
                             CLI's --golden-for), ON_MISMATCH (error|warn)
    NPU_DUMP_HOOK_FAULTS     the emulated backend's ``faults=`` in one variable: entries
                             ``OP=SPEC`` separated by ``;``, e.g. "conv2/Conv2D=scale=1.05;fc1/MatMul=nan".
                             OP is the TF op name, everything before the entry's first ``=`` (TF op
                             names hold neither ``=`` nor ``;``); SPEC is the rest: scale=X,
                             add_noise=S, overflow or nan. Blanks around OP and SPEC and empty
                             entries are ignored; an op given twice is an error
    NPU_DUMP_HOOK_STOP       plain tf.compat.v1.Session scripts: "exit" (default: the process ends
                             with status 0 after the dumped step) or "continue"
    NPU_DUMP_HOOK_LOG_LEVEL  DEBUG/INFO/WARNING/ERROR: the runner prints the package's log records
                             at that level on stderr (the CLI's -v/-q/--debug)
    NPU_DUMP_HOOK_KEEP_CHECKPOINTS  "1": an Estimator trains in the script's model_dir (default: in
                             {run folder}/model_dir, so no dump-run checkpoint lands in model_dir)

Variables of the Ascend stack that npu_dump_hook reads or sets (see
reference/npu-bridge-dump-api.md §5): DUMP_GRAPH_PATH, DUMP_GE_GRAPH,
DUMP_GRAPH_LEVEL, ASCEND_WORK_PATH, NPU_COLLECT_PATH, ASCEND_DEVICE_ID,
DEVICE_ID, RANK_ID, RANK_SIZE.
"""

__all__ = [
    "ENV_OPTIONS",
    "ENV_CAPTURE_BUDGET",
    "ENV_RUN",
    "ENV_RUN_HOOK_OPTIONS",
    "ENV_RUN_STOP",
    "FAULTS_SEPARATOR",
    "FAULT_OP_SEPARATOR",
    "STOP_MODES",
    "ENV_RUN_LOG_LEVEL",
    "ENV_RUN_KEEP_CHECKPOINTS",
    "ENV_DUMP_GRAPH_PATH",
    "ENV_DUMP_GE_GRAPH",
    "ENV_DUMP_GRAPH_LEVEL",
    "ENV_ASCEND_WORK_PATH",
    "ENV_NPU_COLLECT_PATH",
    "ENV_ASCEND_DEVICE_ID",
    "ENV_DEVICE_ID",
    "ENV_RANK_ID",
    "ENV_RANK_SIZE",
    "NPU_OPTIMIZER_NAME",
    "BUNDLE_SCHEMA",
    "BACKEND_CHOICES",
    "RECORDED_BACKENDS",
    "ON_MISMATCH",
    "LINK_MODES",
    "CHECKSUMS",
    "ARCHIVES",
    "INCOMPLETE_STEP_MARKER",
]

#: DumpOptions field -> environment variable read by DumpOptions.from_env().
ENV_OPTIONS = {
    "enable_dump": "NPU_DUMP_ENABLE",
    "dump_path": "NPU_DUMP_PATH",
    "dump_step": "NPU_DUMP_STEP",
    "dump_mode": "NPU_DUMP_MODE",
    "dump_layer": "NPU_DUMP_LAYER",
    "dump_data": "NPU_DUMP_DATA",
    "enable_dump_debug": "NPU_DUMP_DEBUG_ENABLE",
    "dump_debug_mode": "NPU_DUMP_DEBUG_MODE",
}

ENV_CAPTURE_BUDGET = "NPU_DUMP_HOOK_CAPTURE_BUDGET"

#: The runner's switch: set to a false value, ``python -m npu_dump_hook.runner`` injects nothing.
ENV_RUN = "NPU_DUMP_HOOK_RUN"
#: NpuDumpHook keyword -> environment variable read by npu_dump_hook.runner.
ENV_RUN_HOOK_OPTIONS = {
    "max_steps": "NPU_DUMP_HOOK_MAX_STEPS",
    "randomness": "NPU_DUMP_HOOK_RANDOMNESS",
    "seed": "NPU_DUMP_HOOK_SEED",
    "backend": "NPU_DUMP_HOOK_BACKEND",
    "emulate_precision": "NPU_DUMP_HOOK_EMULATE_PRECISION",
    "reference": "NPU_DUMP_HOOK_REFERENCE",
    "save_initial_state": "NPU_DUMP_HOOK_SAVE_INITIAL_STATE",
    "output_dir": "NPU_DUMP_HOOK_OUTPUT_DIR",
    "bundle_dir": "NPU_DUMP_HOOK_BUNDLE_DIR",
    "strict": "NPU_DUMP_HOOK_STRICT",
    "ranks": "NPU_DUMP_HOOK_RANKS",
    "graph_keyword": "NPU_DUMP_HOOK_GRAPH_KEYWORD",
    "link": "NPU_DUMP_HOOK_LINK",
    "checksum": "NPU_DUMP_HOOK_CHECKSUM",
    "archive": "NPU_DUMP_HOOK_ARCHIVE",
    "emulate_profile": "NPU_DUMP_HOOK_EMULATE_PROFILE",
    "faults": "NPU_DUMP_HOOK_FAULTS",
    "initial_state": "NPU_DUMP_HOOK_INITIAL_STATE",
    "on_mismatch": "NPU_DUMP_HOOK_ON_MISMATCH",
}
#: NPU_DUMP_HOOK_FAULTS: what separates its ``OP=SPEC`` entries, and an entry's op from its spec.
FAULTS_SEPARATOR = ";"
FAULT_OP_SEPARATOR = "="
#: Plain-session scripts under the runner: ``exit`` (default) or ``continue`` after the dumped steps.
ENV_RUN_STOP = "NPU_DUMP_HOOK_STOP"
#: What ``NpuDumpSession(stop=)``, ``--stop`` and NPU_DUMP_HOOK_STOP accept.
STOP_MODES = ("exit", "continue")
#: Level of the package's log records the runner prints on stderr (unset: Python's default, warnings).
ENV_RUN_LOG_LEVEL = "NPU_DUMP_HOOK_LOG_LEVEL"
#: "1": an Estimator script under the runner trains in its own model_dir (default: the run folder's).
ENV_RUN_KEEP_CHECKPOINTS = "NPU_DUMP_HOOK_KEEP_CHECKPOINTS"

ENV_DUMP_GRAPH_PATH = "DUMP_GRAPH_PATH"
ENV_DUMP_GE_GRAPH = "DUMP_GE_GRAPH"
ENV_DUMP_GRAPH_LEVEL = "DUMP_GRAPH_LEVEL"
ENV_ASCEND_WORK_PATH = "ASCEND_WORK_PATH"
ENV_NPU_COLLECT_PATH = "NPU_COLLECT_PATH"
ENV_ASCEND_DEVICE_ID = "ASCEND_DEVICE_ID"
ENV_DEVICE_ID = "DEVICE_ID"
ENV_RANK_ID = "RANK_ID"
ENV_RANK_SIZE = "RANK_SIZE"

#: Name of the custom-optimizer entry the Ascend TF adapter reads its options from.
NPU_OPTIMIZER_NAME = "NpuOptimizer"

BUNDLE_SCHEMA = "npu_dump_hook/bundle@1"

#: What ``backend=`` (hook) and ``--backend`` (CLI) accept. ``"reference"``: the golden run
#: (CPU/GPU tensors only, no NPU dump), usually with ``initial_state=`` an NPU bundle.
BACKEND_CHOICES = ("auto", "npu", "emulated", "reference")
#: What bundle.json's ``backend`` may record: who wrote the data.
RECORDED_BACKENDS = ("npu", "emulated", "reference")
#: What a golden run does when its fingerprints differ from the NPU bundle's (``on_mismatch=``).
ON_MISMATCH = ("error", "warn")
#: How payload files enter a bundle (``link=``, ``--link``).
LINK_MODES = ("auto", "hardlink", "copy")
#: Payload checksums (``checksum=``, ``--checksum``).
CHECKSUMS = ("sha256", "none")
#: Archive formats a bundle can be packed into (``archive=``, ``--archive``).
ARCHIVES = ("tar", "tar.gz")
#: Left in a dump step folder whose writing failed part-way (the emulator writes it; collection
#: refuses such a folder instead of bundling a silently smaller dump).
INCOMPLETE_STEP_MARKER = ".npu_dump_hook_incomplete"
