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

Variables of the Ascend stack that npu_dump_hook reads or sets (see
reference/npu-bridge-dump-api.md §5): DUMP_GRAPH_PATH, DUMP_GE_GRAPH,
DUMP_GRAPH_LEVEL, ASCEND_WORK_PATH, NPU_COLLECT_PATH, ASCEND_DEVICE_ID,
DEVICE_ID, RANK_ID, RANK_SIZE.
"""

__all__ = [
    "ENV_OPTIONS",
    "ENV_CAPTURE_BUDGET",
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

#: What ``backend=`` (hook) and ``--backend`` (CLI) accept.
BACKEND_CHOICES = ("auto", "npu", "emulated")
#: What bundle.json's ``backend`` may record: who wrote the data.
RECORDED_BACKENDS = ("npu", "emulated", "reference")
#: How payload files enter a bundle (``link=``, ``--link``).
LINK_MODES = ("auto", "hardlink", "copy")
#: Payload checksums (``checksum=``, ``--checksum``).
CHECKSUMS = ("sha256", "none")
#: Archive formats a bundle can be packed into (``archive=``, ``--archive``).
ARCHIVES = ("tar", "tar.gz")
#: Left in a dump step folder whose writing failed part-way (the emulator writes it; collection
#: refuses such a folder instead of bundling a silently smaller dump).
INCOMPLETE_STEP_MARKER = ".npu_dump_hook_incomplete"
