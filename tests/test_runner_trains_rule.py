"""The runner's ``trains(graph)`` sees an optimizer update inside a functional ``cond`` body (issue #21).

Found by hand with a model-zoo-style script on TF 2.15 (``NPULossScaleOptimizer`` applies its
gradients in ``tf.cond(finite, apply, no_op)``, an ``If`` whose branches are graph functions):
the graph was taken for one that does not train, so the session was not wrapped at its
initializer run; that run sent TensorFlow every op, the hook's later edits (dropout stripped,
emulated numerics) had no effect, and ``compare`` of a healthy ascend run failed at the dropout.
"""
import numpy as np
import tensorflow as tf

from npu_dump_hook.runner._sessions import trains
from npu_dump_hook.train.training_step import TrainingStepDetector

v1 = tf.compat.v1


def _loss_scaled_graph(functional):
    graph = tf.Graph()
    with graph.as_default():
        if functional:
            v1.enable_control_flow_v2()
        try:
            x = v1.placeholder(tf.float32, [None, 4])
            w = v1.get_variable("w", initializer=np.ones((4, 1), np.float32), use_resource=True)
            loss = tf.reduce_mean(tf.matmul(x, w))
            opt = v1.train.GradientDescentOptimizer(0.1)
            grads = opt.compute_gradients(loss)
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g, _ in grads])
            tf.cond(finite, lambda: opt.apply_gradients(grads), tf.no_op, name="apply_if_finite")
        finally:
            if functional:
                v1.disable_control_flow_v2()
    return graph


def test_an_update_inside_a_functional_cond_makes_the_graph_one_that_trains():
    graph = _loss_scaled_graph(functional=True)
    types = {op.type for op in graph.get_operations()}
    assert types & {"If", "StatelessIf"}, types  # the update is in a branch function, not the main graph
    assert not TrainingStepDetector(graph).verdict(graph.get_operations()).training
    assert trains(graph)


def test_a_graph_without_updates_still_does_not_train():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.bool, [])
        tf.cond(x, lambda: tf.constant(1.0), lambda: tf.constant(2.0))
    assert not trains(graph)
