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


def test_an_editable_graph_keeps_its_edges_until_it_gains_ops_and_its_dump_ops_change_nothing():
    """The index reads an editable graph's edges again only when the graph gained ops since (a new
    op may rewire an older one); the capture's dump ops, which only consume tensors, do not count."""
    from npu_dump_hook.train._capture_plan import Plan, make_dump_ops

    graph, x, y, loss, _ = _graph()
    index = GraphIndex(graph)
    index.read_all(graph.get_operations())
    edges = index.edges(loss.op)
    index.forget_if_editable()
    assert index.edges(loss.op) is edges  # nothing changed: kept, not read through TF again
    made = make_dump_ops(graph, [(y, Plan(number=0, nbytes=8))], "/nonexistent", index)
    index.forget_if_editable()
    assert made == 1 and index.edges(loss.op) is edges
    with graph.as_default():
        doubled = tf.identity(x * 2.0, name="doubled")
    loss.op._update_input(0, doubled)  # noqa: SLF001 - an older op rewired after a new op was made
    index.forget_if_editable()
    walk = StepWalk(index, loss, {x: [1.0, 2.0]})
    assert index.edges(loss.op) is not edges and "doubled" in walk.ran and "y" not in walk.ran
