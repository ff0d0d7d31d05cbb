"""The captured step's window runs with Python's cyclic collector paused, and the caller's state after.

A real MonitoredSession on a small model (both stacks): a probe hook placed after the
``ReferenceCapture`` hook (or ``NpuDumpHook``'s golden run) sees the collector inside the captured
step (its ``before_run`` runs after ours, its ``after_run`` after ours has returned) and in the other steps.
"""
import gc

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import NpuDumpHook
from npu_dump_hook.reference import ReferenceCapture
from npu_dump_hook.train.collector import CollectorPause

v1 = tf.compat.v1


class Reference(v1.train.SessionRunHook):
    def __init__(self, golden_dir, step):
        self.reference = ReferenceCapture(golden_dir, step=step)

    def begin(self):
        self.reference.begin()

    def before_run(self, run_context):
        return self.reference.before_run(run_context)

    def after_run(self, run_context, run_values):
        self.reference.after_run(run_context, run_values)


class Probe(v1.train.SessionRunHook):
    """Records gc.isenabled() in each step's before_run and after_run (it runs after Reference in both)."""

    def __init__(self):
        self.seen = []

    def before_run(self, run_context):
        self.seen.append(("before", gc.isenabled()))

    def after_run(self, run_context, run_values):
        self.seen.append(("after", gc.isenabled()))


def _train(tmp_path, step, steps, hook=None):
    rng = np.random.RandomState(5)
    reference, probe = hook or Reference(str(tmp_path / "golden"), step), Probe()
    with tf.Graph().as_default():
        x = tf.constant(rng.rand(4, 3).astype(np.float32))
        w = v1.get_variable("w", initializer=tf.constant(rng.rand(3, 2).astype(np.float32)))
        loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with v1.train.MonitoredSession(hooks=[reference, probe]) as session:
            for _ in range(steps):
                if session.should_stop():
                    break
                session.run(train_op)
    return (reference.reference if isinstance(reference, Reference) else reference), probe.seen


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_paused_for_the_captured_step_only_and_restored(tmp_path, enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        reference, seen = _train(tmp_path, step=1, steps=3)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert reference.report is not None and reference.report["files"] > 0
    # Step 1 (the captured one): paused inside the step, the caller's state once its after_run returned.
    assert seen == [("before", enabled), ("after", enabled), ("before", False), ("after", enabled),
                    ("before", enabled), ("after", enabled)]
    assert after is enabled


@pytest.mark.parametrize("backend", ["reference", "emulated"])
@pytest.mark.parametrize("enabled", [True, False])
def test_the_hooks_captured_step_and_end_pause_the_collector(tmp_path, monkeypatch, enabled, backend):
    from npu_dump_hook.train.output import BundleOutput
    in_write = []
    write = BundleOutput.write

    def probed_write(self, *args, **kwargs):
        in_write.append(gc.isenabled())
        return write(self, *args, **kwargs)
    monkeypatch.setattr(BundleOutput, "write", probed_write)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        hook = NpuDumpHook(output_dir=str(tmp_path / "out"), backend=backend)
        hook, seen = _train(tmp_path, step=0, steps=3, hook=hook)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert hook.bundle is not None and hook.failures == []
    # Step 0 is the golden or emulated dump step, after which the hook stops the training: paused
    # inside it and while end() writes the bundle, restored after.
    assert seen == [("before", False), ("after", enabled)]
    assert in_write == [False]
    assert after is enabled


def test_a_pause_resumes_only_what_it_paused():
    was = gc.isenabled()
    try:
        gc.enable()
        pause = CollectorPause()
        pause.pause()
        pause.pause()  # a second pause while paused changes nothing
        assert not gc.isenabled() and pause.paused
        pause.resume()
        assert gc.isenabled() and not pause.paused
        pause.resume()  # nothing paused: nothing to do
        assert gc.isenabled()
        gc.disable()
        pause.pause()  # the caller disabled it: resume must not enable it
        pause.resume()
        assert not gc.isenabled() and not pause.paused
    finally:
        (gc.enable if was else gc.disable)()


def test_a_failed_capture_step_gives_the_collector_back_at_end(tmp_path):
    was = gc.isenabled()
    gc.enable()
    try:
        reference = ReferenceCapture(str(tmp_path / "golden"), step=0)
        reference._collector.pause()  # as a captured step that raised before after_run leaves it
        assert not gc.isenabled()
        reference.end()
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()

