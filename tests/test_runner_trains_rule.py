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


def _graphs_with_and_without_training():
    """(name, graph): an optimizer step, a global-step increment, a load of fed weights, an
    initializer and a Saver restore only (the last three update no variable by the rule)."""
    made = []
    for kind in ("optimizer", "global_step", "load", "initializer_and_restore"):
        graph = tf.Graph()
        with graph.as_default():
            w = v1.get_variable("w", initializer=np.ones((2, 1), np.float32))
            if kind == "optimizer":
                x = v1.placeholder(tf.float32, [None, 2])
                v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, w)))
            elif kind == "global_step":
                v1.assign_add(v1.train.get_or_create_global_step(), 1)
            elif kind == "load":
                v1.assign(w, v1.placeholder(tf.float32, [2, 1]))
            else:
                v1.global_variables_initializer()
                v1.train.Saver([w])
        made.append((kind, graph))
    return made


def test_trains_asks_each_op_what_the_walk_of_every_op_would_find():
    # trains() asks the update rule of every op directly; a run of all the graph's ops walks
    # exactly those ops, so both must agree whatever the graph holds.
    answers = {}
    for kind, graph in _graphs_with_and_without_training():
        walked = TrainingStepDetector(graph).verdict(graph.get_operations()).training
        assert trains(graph) is walked, kind
        answers[kind] = walked
    assert answers == {"optimizer": True, "global_step": True, "load": False, "initializer_and_restore": False}


def test_a_sessions_first_runs_reuse_its_creations_answer_only_where_it_still_holds():
    """``_graph_trains``: the answer noted at the session's creation is kept when it was yes (a graph
    never loses its update ops) or the graph gained no op; a no on a graph that grew is asked again."""
    from npu_dump_hook.runner._sessions import _TRAINS, _graph_trains

    graph = tf.Graph()
    with graph.as_default():
        w = v1.get_variable("w", initializer=np.ones((2, 1), np.float32), use_resource=True)
        loss = tf.reduce_sum(w)
    state = {_TRAINS: (graph.version, trains(graph))}
    assert _graph_trains(state, graph) is False  # nothing added since: the noted no
    with graph.as_default():
        v1.train.GradientDescentOptimizer(0.1).minimize(loss)  # grown into a training graph
    assert _graph_trains(state, graph) is True  # a no on a grown graph is not trusted
    assert _graph_trains({}, graph) is True  # nothing noted: asked
    state = {_TRAINS: (graph.version, True)}
    with graph.as_default():
        v1.global_variables_initializer()  # an initializer built after the session (the static RNN script)
    assert _graph_trains(state, graph) is True
