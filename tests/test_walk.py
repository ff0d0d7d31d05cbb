"""StepWalk: the one walk of a run's executed ops (feeds end it, foreign fetches are left out)."""
import tensorflow as tf

from npu_dump_hook.fingerprints import batch_tensors_of
from npu_dump_hook.train.walk import GraphIndex, StepWalk
from npu_dump_hook.training_step import TrainingStepDetector

v1 = tf.compat.v1


def _graph():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2], name="x")
        w = v1.get_variable("w", [2], initializer=v1.ones_initializer())
        y = tf.identity(x * w, name="y")
        loss = tf.reduce_sum(y, name="loss")
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        tf.identity(w, name="unused")
    return graph, x, y, loss, train


def test_the_walk_follows_data_and_control_inputs_and_stops_at_feeds():
    graph, x, y, loss, train = _graph()
    walk = StepWalk(GraphIndex(graph), loss, {x: [1.0, 2.0]})
    assert {"loss", "y", "mul"} <= set(walk.ran) and "unused" not in walk.ran and "x" not in walk.ran
    assert ("x", True) in [(op.name, fed_only) for op, fed_only in walk.executed()]
    fed = StepWalk(GraphIndex(graph), loss, {y: [1.0, 2.0]})
    assert "mul" not in fed.ran and "y" not in fed.ran
    assert [op.name for op, fed_only in fed.executed() if fed_only] == ["y"]


def test_foreign_fetches_are_left_out_and_the_order_is_topological():
    graph, x, _, loss, _ = _graph()
    walk = StepWalk(GraphIndex(graph), [loss, object(), None], {x: [1.0, 2.0]})
    assert [e.name for e in walk.elements] == ["loss:0"]
    order = [op.name for op, _ in walk.executed()]
    assert order.index("x") < order.index("mul") < order.index("y") < order.index("loss")


def test_one_walk_serves_the_detector_and_the_batch_fingerprints():
    graph, x, _, loss, train = _graph()
    detector = TrainingStepDetector(graph)
    walk = detector.walk(train, {x: [1.0, 2.0]})
    assert detector.verdict_for(walk).training and not detector.verdict(loss, {x: [1.0, 2.0]}).training
    chosen, skipped = batch_tensors_of(walk)
    assert [(t.name, source) for t, source in chosen] == [("x:0", "feed")] and skipped == []
