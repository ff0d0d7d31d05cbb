"""The variable read before the captured step, warmed at session creation: same values, one fetch list.

``ReferenceCapture.after_create_session`` reads every variable the step may need once, so TF builds
that read's executor then; the read before the step (and after it) fetches the same list. The values
must still be the ones before the step's updates: checked against the same capture without warming
and against the variables read by hand, for SGD, momentum and Adam (reference variables on TF 1.15,
resource variables on TF 2).
"""
import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook.reference import ReferenceCapture
from npu_dump_hook.train import _capture_reads

v1 = tf.compat.v1

OPTIMIZERS = {
    "sgd": lambda: v1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: v1.train.MomentumOptimizer(0.1, 0.9),
    "adam": lambda: v1.train.AdamOptimizer(0.01),
}


class WarmedReference(v1.train.SessionRunHook):
    """ReferenceCapture with (``warm``) or without its after_create_session."""

    def __init__(self, golden_dir, warm, step=0):
        self.reference = ReferenceCapture(golden_dir, step=step)
        self.warm = warm

    def begin(self):
        self.reference.begin()

    def after_create_session(self, session, coord):
        self.warmed = self.reference.after_create_session(session, coord) if self.warm else None

    def before_run(self, run_context):
        return self.reference.before_run(run_context)

    def after_run(self, run_context, run_values):
        self.reference.after_run(run_context, run_values)


def _model(optimizer):
    rng = np.random.RandomState(3)
    x = tf.constant(rng.rand(4, 5).astype(np.float32), name="x")
    y = tf.constant(rng.rand(4, 2).astype(np.float32), name="y")
    hidden = v1.layers.dense(x, 3, activation=tf.nn.relu, name="fc1",
                             kernel_initializer=v1.constant_initializer(rng.rand(5, 3)))
    out = v1.layers.dense(hidden, 2, name="fc2", kernel_initializer=v1.constant_initializer(rng.rand(3, 2)))
    loss = tf.reduce_mean((out - y) ** 2, name="loss")
    return OPTIMIZERS[optimizer]().minimize(loss, global_step=v1.train.get_or_create_global_step())


def _capture(tmp_path, optimizer, warm, step):
    """Runs ``step + 1`` steps with the capture at ``step``; returns (result, variables before and after it,
    the element lists of every read the capture ran)."""
    hook = WarmedReference(str(tmp_path / ("warm" if warm else "cold") / "golden"), warm, step=step)
    reads = []
    real = _capture_reads.read_values

    def recording(session, elements):
        reads.append([element.name for element in elements])
        return real(session, elements)

    _capture_reads.read_values = recording
    try:
        with tf.Graph().as_default():
            train_op = _model(optimizer)
            with v1.train.MonitoredSession(hooks=[hook]) as session:
                raw = session._tf_sess()
                for _ in range(step):
                    session.run(train_op)
                variables = v1.global_variables()
                before = {v.op.name: raw.run(v) for v in variables}
                session.run(train_op)
                after = {v.op.name: raw.run(v) for v in variables}
    finally:
        _capture_reads.read_values = real
    assert hook.warmed is (True if warm else None)
    return hook.reference.result, before, after, reads


def _described(result):
    return [(t.tensor_name, t.op_type, t.dtype, t.shape, t.order) for t in result.tensors], \
        [(s.tensor_name, s.reason) for s in result.skipped]


@pytest.mark.parametrize("step", [0, 1])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_warmed_reads_give_the_values_before_the_step(tmp_path, optimizer, step):
    cold, before, after, cold_reads = _capture(tmp_path, optimizer, warm=False, step=step)
    warm, warm_before, _, warm_reads = _capture(tmp_path, optimizer, warm=True, step=step)
    # The read before the step and the read after it fetch one list: every variable (the warmed one).
    assert len(warm_reads) == 2 and warm_reads[0] == warm_reads[1], warm_reads
    assert len(warm_reads[0]) == len(before) and len(cold_reads) == 2 and set(cold_reads[0]) <= set(warm_reads[0])
    assert _described(warm) == _described(cold)
    for tensor in cold.tensors:
        expected = cold.array(tensor.tensor_name)
        np.testing.assert_array_equal(warm.array(tensor.tensor_name), expected, err_msg=tensor.tensor_name)
    # Each update's variable inputs are the values before the step, its outputs those after it.
    slots = 0
    for update, variables in warm.updates.items():
        for index, name in enumerate(variables):
            holder = name.split(":")[0]
            holder = holder[:-len("/read")] if holder.endswith("/read") else holder
            np.testing.assert_array_equal(warm.array(name), warm_before[holder], err_msg=name)
            np.testing.assert_array_equal(warm.array("{}:{}".format(update, index)), after[holder], err_msg=update)
            slots += not np.array_equal(before[holder], after[holder])
    assert slots >= {"sgd": 5, "momentum": 9, "adam": 13}[optimizer]  # weights, global step, slots changed
