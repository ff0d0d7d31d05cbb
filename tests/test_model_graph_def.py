"""``dump_run.model_graph_def`` (tf/graph.pbtxt's message) is ``as_graph_def(add_shapes=True)``'s, real
TensorFlow, both stacks; ``_tf.graph_may_hold_functions`` never says "none" of a graph that has one.

On TF 1.15 without a function library the shapes are filled by the package (one proto per distinct
shape); these graphs hold what that fill must get right: an unknown rank, unknown dimensions, a
scalar, ops without outputs, several outputs per op, a reference variable, shapes shared by many
tensors. With a library TensorFlow's own is used (it also annotates the functions' nodes).
"""
import tensorflow as tf

from npu_dump_hook import _tf
from npu_dump_hook.train.dump_run import model_graph_def

v1 = tf.compat.v1


def _shapes_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        anything = v1.placeholder(tf.float32, None, name="unknown_rank")
        v1.placeholder(tf.int32, [], name="scalar")
        w = v1.Variable(tf.ones([3, 2]), name="w", use_resource=False)  # a reference variable (TF 1.x)
        y = tf.matmul(x, w, name="y")
        tf.split(y, 2, axis=1, name="halves")  # one op, two outputs
        tf.unstack(tf.reshape(anything, [-1, 4, 2]), axis=1, name="rows")
        for i in range(5):
            y = tf.nn.relu(y + float(i), name="same_shape_{}".format(i))
        tf.group(y, name="no_outputs")
        v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))
    return graph


def _library_graph():
    graph = tf.Graph()
    with graph.as_default():
        dataset = tf.data.Dataset.range(10).map(lambda v: v * 2).shuffle(5, seed=1)
        v1.data.make_one_shot_iterator(dataset).get_next(name="batch")
    return graph


def _same_message(graph):
    ours = model_graph_def(graph)
    theirs = graph.as_graph_def(add_shapes=True)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)
    return ours


def test_the_shapes_are_tensorflows_add_shapes():
    graph = _shapes_graph()
    graph_def = _same_message(graph)
    assert "no_outputs" in {n.name for n in graph_def.node if "_output_shapes" not in n.attr}  # as TF leaves it
    shapes = {node.name: node.attr["_output_shapes"].list.shape for node in graph_def.node}  # (adds empty ones)
    assert shapes["unknown_rank"][0].unknown_rank
    assert [d.size for d in shapes["x"][0].dim] == [-1, 3]
    assert len(shapes["halves"]) == 2
    assert len({s.SerializeToString() for node in graph_def.node for s in shapes[node.name]}) < len(graph_def.node)


def test_a_graph_with_a_function_library_is_told_apart_and_keeps_tensorflows_shapes():
    counts = hasattr(_pywrap(), "TF_GraphNumFunctions")  # TF 1.15 binds the count; TF 2.x does not
    assert _tf.graph_may_hold_functions(_shapes_graph()) is (not counts)
    graph = _library_graph()
    assert _tf.graph_may_hold_functions(graph)
    graph_def = _same_message(graph)
    assert graph_def.library.function  # the dataset's functions, annotated by TensorFlow itself


def _pywrap():
    from tensorflow.python import pywrap_tensorflow

    return pywrap_tensorflow


def test_a_node_not_paired_with_its_op_is_looked_up_by_name():
    """The nodes are paired with ``get_operations()`` by position and each pair's names compared:
    where they differ (here: a name reader that never agrees) the node's op is looked up by name,
    and the message is still TensorFlow's."""
    graph = _shapes_graph()
    ours = model_graph_def(graph, lambda op: "not " + op.name)
    theirs = graph.as_graph_def(add_shapes=True)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)
