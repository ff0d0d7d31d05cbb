"""Shapes a step's feeds decide (``_tf.shapes_with_feeds``, used by the capture's fetch-or-stream
choice), real TensorFlow, both stacks: what TensorFlow's shape inference gives on a copy of the
graph whose fed tensors have the fed shapes. TF 1.15 reads them through the C importer alone
(no Python ``Operation`` per op); that path must give what ``import_graph_def`` gives.
"""
import numpy as np
import tensorflow as tf

from npu_dump_hook import _tf

v1 = tf.compat.v1


def _graph():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 6], name="x")
        y = v1.placeholder(tf.int64, [None], name="y")
        w = v1.get_variable("w", initializer=tf.constant(np.ones((6, 3), np.float32)))
        logits = tf.matmul(x, w, name="logits")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        tf.unique(y, name="unique")  # a data-dependent size: never fully known
        v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return graph


def test_fed_shapes_decide_the_step_sizes_and_both_import_paths_agree(monkeypatch):
    graph = _graph()
    fed = {"x:0": (4, 6), "y:0": (4,)}
    shapes = _tf.shapes_with_feeds(graph, fed)
    assert shapes["x:0"] == (4, 6) and shapes["logits:0"] == (4, 3) and shapes["loss:0"] == ()
    assert shapes["gradients/logits_grad/MatMul:0"] == (4, 6)
    assert "unique:0" not in shapes and graph.get_tensor_by_name("logits:0").get_shape().as_list() == [None, 3]
    monkeypatch.setattr(_tf, "_shapes_of_c_import", lambda *args: None)  # import_graph_def's way
    assert _tf.shapes_with_feeds(graph, fed) == shapes
    monkeypatch.undo()
    with tf.Graph().as_default() as scratch:
        inputs = {name: v1.placeholder(graph.get_tensor_by_name(name).dtype, shape) for name, shape in fed.items()}
        direct = _tf._shapes_of_c_import(graph, scratch, inputs, "copy")
    # Both stacks read the C importer's shapes (TF 1.15: TF_GraphGetTensorShapeHelper; TF 2.x: bare
    # PyOperations); the same answer as import_graph_def's way, fed tensors left to shapes_with_feeds.
    assert direct is not None and len(direct) > 30
    assert {name: shape for name, shape in direct.items() if name not in fed} == {
        name: shape for name, shape in shapes.items() if name not in fed}


def test_fed_sizes_are_the_inferred_shapes_times_the_itemsize():
    from npu_dump_hook.train._capture_sizes import FedSizes

    graph = _graph()
    tensors = [graph.get_tensor_by_name(name) for name in ("logits:0", "loss:0", "y:0", "unique:0",
                                                       "gradients/logits_grad/MatMul:0")]
    feeds = {tensors[2]: np.zeros(4, np.int64), graph.get_tensor_by_name("x:0"): np.zeros((4, 6), np.float32)}
    sizes = FedSizes(graph).nbytes(tensors, feeds)
    # float32 (4, 3); a float32 scalar; the fed int64 (4,); a gradient's float32 (4, 6); the
    # data-dependent Unique output left out (unknown even with the feeds)
    assert sizes == {"logits:0": 48, "loss:0": 4, "y:0": 32, "gradients/logits_grad/MatMul:0": 96}
    assert FedSizes(graph).nbytes(tensors, {}) == {}  # nothing fed: nothing decided
