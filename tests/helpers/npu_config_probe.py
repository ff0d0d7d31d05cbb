"""What the NpuOptimizer entry of a live session's config says (for the unmodified test scripts).

It reads the config a ``tf.compat.v1.Session`` was made with (``BaseSession._config``, TF 1.15
and 2.x) and prints ``npu config: enable_dump=<bool> dump_path=<path or ->``: under the runner,
the dump options must have reached the config of the session that trains.
"""
import tensorflow as tf


def describe(session):
    config = getattr(session, "_config", None)
    params = {}
    if config is not None:
        for entry in config.graph_options.rewrite_options.custom_optimizers:
            if entry.name == "NpuOptimizer":
                params.update(entry.parameter_map.items())
    enable = bool(params["enable_dump"].b) if "enable_dump" in params else False
    path = params["dump_path"].s.decode() if "dump_path" in params else "-"
    return "npu config: enable_dump={} dump_path={}".format(enable, path)


class PrintNpuConfig(tf.compat.v1.train.SessionRunHook):
    """Prints :func:`describe` of the session a MonitoredSession made, after ``prefix``."""

    def __init__(self, prefix=""):
        self.prefix = prefix

    def after_create_session(self, session, coord):
        print(self.prefix + describe(session))
