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
    NPU_DUMP_HOOK_<KEYWORD>  an NpuDumpHook keyword, one variable each (ENV_RUN_HOOK_OPTIONS, built
                             from the table in :mod:`npu_dump_hook.settings`):
                             MAX_STEPS, RANDOMNESS, SEED, BACKEND (golden; alias reference),
                             EMULATE_PRECISION, REFERENCE (capture the golden tensors: 1/0),
                             SAVE_INITIAL_STATE, OUTPUT_DIR, BUNDLE_DIR, STRICT, RANKS ("0,1"),
                             GRAPH_KEYWORD, LINK, CHECKSUM, ARCHIVE, EMULATE_PROFILE (exact|ascend),
                             FAULTS (below), INITIAL_STATE (an NPU bundle: the golden run, the
                             CLI's --golden-for), ON_MISMATCH (error|warn)
    NPU_DUMP_HOOK_FAULTS     the emulated backend's ``faults=`` in one variable: entries
                             ``OP=SPEC`` separated by ``;``, e.g. "conv2/Conv2D=scale=1.05;fc1/MatMul=nan".
                             OP is the TF op name, everything before the entry's first ``=`` (TF op
                             names hold neither ``=`` nor ``;``); SPEC is the rest: scale=X,
                             add_noise=S, nondeterministic=S, overflow or nan. Blanks around OP and SPEC and empty
                             entries are ignored; an op given twice is an error
    NPU_DUMP_HOOK_STOP       plain tf.compat.v1.Session scripts: "exit" (default: the process ends
                             with status 0 after the dumped step) or "continue"
    NPU_DUMP_HOOK_LOG_LEVEL  DEBUG/INFO/WARNING/ERROR: the runner prints the package's log records
                             at that level on stderr (the CLI's -v/-q/--debug)
    NPU_DUMP_HOOK_KEEP_CHECKPOINTS  "1": an Estimator trains in the script's model_dir (default: in
                             {run folder}/model_dir, so no dump-run checkpoint lands in model_dir)
    NPU_DUMP_HOOK_ALLOW_NO_BUNDLE  "1": a script that ends without a bundle keeps its status
                             (default: the runner exits 4, EXIT_NO_BUNDLE, instead of 0)
    NPU_DUMP_HOOK_FLAGS      the variables above that ``npu-dump-hook run`` set from its flags
                             (space-separated; it sets it): an error about one names the flag

Variables of the Ascend stack that npu_dump_hook reads or sets (see
docs/reference/npu-bridge-dump-api.md §5): DUMP_GRAPH_PATH, DUMP_GE_GRAPH,
DUMP_GRAPH_LEVEL, ASCEND_WORK_PATH, NPU_COLLECT_PATH, ASCEND_DEVICE_ID,
DEVICE_ID, RANK_ID, RANK_SIZE, JOB_ID.

The emulated HCCL (npu_dump_hook.emulator.hccl): NPU_DUMP_HOOK_HCCL_DIR (the ranks' rendezvous
folder), NPU_DUMP_HOOK_HCCL_TIMEOUT (seconds a collective waits for every rank).
"""

__all__ = [
    "ENV_OPTIONS",
    "DUMP_OPTION_FLAGS",
    "RUNS_BEFORE_MARK",
    "ENV_CAPTURE_BUDGET",
    "ENV_RUN",
    "ENV_RUN_HOOK_OPTIONS",
    "ENV_RUN_STOP",
    "FAULTS_SEPARATOR",
    "FAULT_OP_SEPARATOR",
    "STOP_MODES",
    "ENV_RUN_LOG_LEVEL",
    "ENV_RUN_KEEP_CHECKPOINTS",
    "ENV_RUN_ALLOW_NO_BUNDLE",
    "ENV_RUN_FLAGS",
    "ENV_DUMP_GRAPH_PATH",
    "ENV_DUMP_GE_GRAPH",
    "ENV_DUMP_GRAPH_LEVEL",
    "ENV_ASCEND_WORK_PATH",
    "ENV_NPU_COLLECT_PATH",
    "ENV_ASCEND_DEVICE_ID",
    "ENV_DEVICE_ID",
    "ENV_RANK_ID",
    "ENV_RANK_SIZE",
    "ENV_JOB_ID",
    "ENV_HCCL_DIR",
    "ENV_HCCL_TIMEOUT",
    "HCCL_COLLECTIVE_TYPES",
    "NPU_OPTIMIZER_NAME",
    "BUNDLE_SCHEMA",
    "BACKEND_CHOICES",
    "BACKEND_ALIASES",
    "GOLDEN_BACKEND",
    "RECORDED_BACKENDS",
    "RECORDED_GOLDEN_BACKEND",
    "RECORDED_BACKEND_ALIASES",
    "ON_MISMATCH",
    "LINK_MODES",
    "CHECKSUMS",
    "ARCHIVES",
    "INCOMPLETE_STEP_MARKER",
    "COMPLETE_STEP_MARKER",
]

# The keywords' own names and value lists live with their rows in the settings table.
from .settings import (  # noqa: E402 - after __all__, as the names it lists
    ARCHIVES,
    BACKEND_ALIASES,
    BACKEND_CHOICES,
    CHECKSUMS,
    ENV_RUN,
    ENV_RUN_ALLOW_NO_BUNDLE,
    ENV_RUN_FLAGS,
    ENV_RUN_HOOK_OPTIONS,
    ENV_RUN_KEEP_CHECKPOINTS,
    ENV_RUN_LOG_LEVEL,
    ENV_RUN_STOP,
    FAULT_OP_SEPARATOR,
    FAULTS_SEPARATOR,
    GOLDEN_BACKEND,
    LINK_MODES,
    ON_MISMATCH,
    STOP_MODES,
)

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

#: DumpOptions field -> the ``npu-dump-hook run`` flag that sets its variable (an error names it).
DUMP_OPTION_FLAGS = {
    "dump_path": "--dump-path",
    "dump_step": "--dump-step",
    "dump_mode": "--dump-mode",
    "dump_layer": "--dump-layer",
    "dump_data": "--dump-data",
    "dump_debug_mode": "--dump-debug-mode",
}

ENV_CAPTURE_BUDGET = "NPU_DUMP_HOOK_CAPTURE_BUDGET"

ENV_DUMP_GRAPH_PATH = "DUMP_GRAPH_PATH"
ENV_DUMP_GE_GRAPH = "DUMP_GE_GRAPH"
ENV_DUMP_GRAPH_LEVEL = "DUMP_GRAPH_LEVEL"
ENV_ASCEND_WORK_PATH = "ASCEND_WORK_PATH"
ENV_NPU_COLLECT_PATH = "NPU_COLLECT_PATH"
ENV_ASCEND_DEVICE_ID = "ASCEND_DEVICE_ID"
ENV_DEVICE_ID = "DEVICE_ID"
ENV_RANK_ID = "RANK_ID"
ENV_RANK_SIZE = "RANK_SIZE"
ENV_JOB_ID = "JOB_ID"
#: The emulated HCCL's rendezvous folder shared by the ranks of one job (npu_dump_hook.emulator.hccl).
ENV_HCCL_DIR = "NPU_DUMP_HOOK_HCCL_DIR"
#: Seconds an emulated collective waits for every rank (default 300).
ENV_HCCL_TIMEOUT = "NPU_DUMP_HOOK_HCCL_TIMEOUT"

#: GE op types of the HCCL collectives whose outputs are the same on every rank (the cross-rank check
#: of ``compare`` over a rank index; what the emulated HCCL makes).
HCCL_COLLECTIVE_TYPES = ("HcomAllReduce", "HcomAllGather", "HcomBroadcast")

#: The runner's mark on a ``tf.compat.v1.Session`` it watches (``session.__dict__``): how many runs
#: went to the bare session before it was wrapped (:mod:`npu_dump_hook.session` warns of them
#: instead of running its own probe).
RUNS_BEFORE_MARK = "_npu_dump_hook_runs_before"

#: Name of the custom-optimizer entry the Ascend TF adapter reads its options from.
NPU_OPTIMIZER_NAME = "NpuOptimizer"

BUNDLE_SCHEMA = "npu_dump_hook/bundle@1"

#: bundle.json's name of the golden backend (golden tensors, no graph, no dump): ``"reference"``,
#: the format's recorded name since bundle@1, kept so bundles in users' hands stay valid.
RECORDED_GOLDEN_BACKEND = "reference"
#: What bundle.json's ``backend`` may record: who wrote the data (what writers write).
RECORDED_BACKENDS = ("npu", "emulated", RECORDED_GOLDEN_BACKEND)
#: Other spellings readers accept for a recorded ``backend``, each read as the value it names.
RECORDED_BACKEND_ALIASES = {"golden": RECORDED_GOLDEN_BACKEND}

#: Left in a dump step folder whose writing failed part-way or never finished: the emulator writes
#: it before the step's first file and turns it into :data:`COMPLETE_STEP_MARKER` after the last
#: (a killed run leaves it); with backend "npu" the hook writes it into the run's own dump folder
#: until the run ends. Collection refuses such a folder instead of bundling a silently smaller dump.
INCOMPLETE_STEP_MARKER = ".npu_dump_hook_incomplete"
#: The completion mark of a step folder the emulator finished: JSON naming the writer (pid, host,
#: time folder) and every file it wrote there; collection refuses a folder holding other files.
COMPLETE_STEP_MARKER = ".npu_dump_hook_complete"
