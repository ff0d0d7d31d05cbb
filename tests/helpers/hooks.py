"""Small real SessionRunHooks used by tests to observe a run (not doubles of anything)."""
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


class FetchHook(v1.train.SessionRunHook):
    """Fetches named tensors in every step; keeps the values of the first step."""

    def __init__(self, names):
        self.names = list(names)
        self.values = None

    def before_run(self, run_context):
        graph = run_context.session.graph
        return v1.train.SessionRunArgs({n: graph.get_tensor_by_name(n) for n in self.names})

    def after_run(self, run_context, run_values):
        if self.values is None:
            self.values = {k: np.asarray(v) for k, v in run_values.results.items()}


class VariablesAtEndHook(v1.train.SessionRunHook):
    """Reads every trainable variable when the session ends."""

    def __init__(self):
        self.values = None

    def end(self, session):
        variables = v1.trainable_variables()
        self.values = dict(zip([v.op.name for v in variables], session.run(variables)))
