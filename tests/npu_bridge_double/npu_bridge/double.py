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


def record_sessions(path):
    """Append one JSON line to ``path`` per TensorFlow session made from now on: the NPU options
    its config carries as the C++ session gets them (read at ``BaseSession.__init__``, below every
    Python patch of ``tf.compat.v1.Session``: what the adapter reads at session creation), whether
    the adapter/GE checks accept them, and the session's ``id`` and graph ops at creation; and one
    line per ``run`` naming the session and its fetches. Double-only: the real adapter records
    nothing, it reads the same config in C++."""
    import json

    from tensorflow.python.client import session as tf_session

    base = tf_session.BaseSession
    made, ran = base.__init__, base.run

    def write(entry):
        with open(path, "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def __init__(self, target="", graph=None, config=None):
        made(self, target, graph, config)
        entry = {"event": "session", "session": id(self), "graph_ops": len(self.graph.get_operations()),
                 "options": {}, "error": None}
        if config is not None:
            try:
                options = validate_session_config(config)
            except SessionConfigError as exc:
                entry["error"], options = str(exc), read_npu_options(config)
            entry["options"] = {key: _plain(value) for key, value in options.items()}
        write(entry)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        names = [getattr(f, "name", str(f)) for f in (fetches if isinstance(fetches, (list, tuple)) else [fetches])]
        write({"event": "run", "session": id(self), "fetches": names, "fed": len(feed_dict or {})})
        return ran(self, fetches, feed_dict, options, run_metadata)

    base.__init__, base.run = __init__, run


def _plain(value):
    """An AttrValue as JSON: its set field."""
    field = value.WhichOneof("value")
    result = getattr(value, field) if field else None
    return result.decode() if isinstance(result, bytes) else result
