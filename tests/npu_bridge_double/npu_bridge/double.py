"""Double-only helpers: what the adapter's C++ and GE do with the session config.

Not part of the real npu_bridge API; they emulate reference §1.2 and §11 items 4-5 so
tests can check that a config would be accepted at session time.
"""
import os
import re

_ENUMS = {"dump_mode": ("input", "output", "all"), "dump_debug_mode": ("aicore_overflow", "atomic_overflow", "all"),
          "dump_data": ("tensor", "stats")}
_STEP = re.compile(r"^\d+(-\d+)?(\|\d+(-\d+)?)*$")


class SessionConfigError(Exception):
    """What the adapter or GE would report (or abort on) at session creation."""


def read_npu_options(config):
    """Keys of every NpuOptimizer entry, last entry holding a key wins: {key: AttrValue}."""
    result = {}
    for entry in config.graph_options.rewrite_options.custom_optimizers:
        if entry.name == "NpuOptimizer":
            for key, value in entry.parameter_map.items():
                result[key] = value
    return result


def validate_session_config(config):
    """Raise SessionConfigError where the adapter or GE would; return the resolved options."""
    opts = read_npu_options(config)
    enable_dump = opts["enable_dump"].b if "enable_dump" in opts else False
    enable_debug = opts["enable_dump_debug"].b if "enable_dump_debug" in opts else False
    if enable_dump or enable_debug:
        if "dump_path" not in opts:
            raise SessionConfigError("if use dump function, dump_path must be set.")
        path = opts["dump_path"].s.decode()
        if not os.path.isdir(path):
            raise SessionConfigError("the path {} is not directory.".format(path))
        if not os.access(path, os.R_OK | os.W_OK):
            raise SessionConfigError("the path {} does't have read, write permissions.".format(path))
    if enable_dump:
        if "dump_step" in opts:
            step = opts["dump_step"].s.decode()
            items = step.split("|")
            if not _STEP.match(step) or len(items) > 100 or any(
                    int(i.split("-")[0]) >= int(i.split("-")[1]) for i in items if "-" in i):
                raise SessionConfigError("dump_step {!r} rejected by GE".format(step))
        _check_enum(opts, "dump_mode")
    if enable_debug:
        _check_enum(opts, "dump_debug_mode")
    if "dump_data" in opts:
        _check_enum(opts, "dump_data")
    if enable_dump and enable_debug:
        raise SessionConfigError("ge.exec.enableDump and ge.exec.enableDumpDebug cannot be set to 1 at the same time")
    return opts


def _check_enum(opts, key):
    if key in opts and opts[key].s.decode() not in _ENUMS[key]:
        raise SessionConfigError("{} should be one of {}".format(key, _ENUMS[key]))
