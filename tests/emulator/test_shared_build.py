"""The Build graph built once (npu_graph.SharedBuild): the size estimate's build is handed to the
emulator's write of the step when the step's capture gives the same graph, and built again when the
graph changed. The captures are the estimate's static ones of a real TF graph (no step runs):
cheap, and their shapes are exactly what a test needs to vary.
"""
import tensorflow as tf

from npu_dump_hook.emulator import ge_model, npu_graph
from npu_dump_hook.train._sizing_graph import static_capture, static_plan
from npu_dump_hook.train.walk import GraphIndex, StepWalk

v1 = tf.compat.v1


def _graph(activation=tf.nn.relu):
    """A dense layer on a batch of unknown size, its loss and an SGD step."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 16], name="x")
        w = v1.get_variable("w", initializer=tf.ones([16, 32]))
        b = v1.get_variable("b", initializer=tf.zeros([32]))
        hidden = activation(tf.nn.bias_add(tf.matmul(x, w), b), name="hidden")
        loss = tf.reduce_mean(hidden, name="loss")
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return graph, train_op


def _capture(graph, fetch, batch):
    """The static capture of one step, the unknown batch dimension taken as ``batch``."""
    walk = StepWalk(GraphIndex(graph), fetch)
    executed = walk.executed()

    def dims(tensor):
        shape = tensor.get_shape()
        return None if shape.ndims is None else tuple(batch if d is None else d for d in shape.as_list())

    return static_capture(executed, dims, index=walk.index), executed


def _described(nodes):
    """Everything a node carries, comparable."""
    return [(n.name, n.type, n.tf_type, n.kind, tuple(n.inputs), tuple(n.control_inputs), tuple(n.outputs),
             n.original_names, n.original_types) for n in nodes]


def _fresh():
    """The test graph, its step's static capture at batch 4, the ascend plan and an empty SharedBuild."""
    graph, train_op = _graph()
    estimated, executed = _capture(graph, train_op, 4)
    return graph, train_op, estimated, static_plan(executed, True), npu_graph.SharedBuild()


def test_the_same_graph_is_built_once_and_other_batch_sizes_get_their_own_shapes():
    graph, train_op, estimated, plan, shared = _fresh()  # float16 MatMul: fusion, FRACTAL_NZ, Cast/TransData
    first = shared.nodes(estimated, plan, True)
    assert any(n.kind == "fused" for n in first) and any(n.kind == "trans" for n in first)
    assert shared.nodes(estimated, plan, True) is first and shared.reused == 1
    wrote, _ = _capture(graph, train_op, 8)  # the step's own batch differs from the estimate's guess
    again = shared.nodes(wrote, plan, True)
    assert shared.reused == 2
    assert _described(again) == _described(npu_graph.build_nodes(wrote, plan, True))
    assert _described(first) == _described(npu_graph.build_nodes(estimated, plan, True))  # left as it was
    assert ("x:0", (8, 16)) in {(t.value.tensor, t.value.shape) for n in again for t in n.outputs}


def test_a_changed_graph_plan_or_profile_is_built_again_never_reused():
    graph, train_op, estimated, plan, shared = _fresh()
    first = shared.nodes(estimated, plan, True)
    changed_graph, changed_op = _graph(tf.nn.tanh)  # as many ops, of other types
    changed, changed_executed = _capture(changed_graph, changed_op, 4)
    assert len(changed.executed_ops) == len(estimated.executed_ops)
    built = shared.nodes(changed, plan, True)  # the same plan object: the ops tell the graphs apart
    assert shared.reused == 0 and built is not first
    assert _described(built) == _described(npu_graph.build_nodes(changed, plan, True))
    assert any("Tanh" in (n.original_types or ()) for n in built)
    # the same ops under another plan object, or without the ascend profile: built again
    same_plan = static_plan(changed_executed, True)
    assert _described(shared.nodes(changed, same_plan, True)) == _described(built) and shared.reused == 0
    plain = shared.nodes(changed, same_plan, False)
    assert shared.reused == 0 and not any(n.kind in ("fused", "trans") for n in plain)
    assert _described(plain) == _described(npu_graph.build_nodes(changed, same_plan, False))


def _reranked(graph, train_op, shape):
    """The static capture with ``x`` given another static shape, as a step of another rank would."""
    capture, _ = _capture(graph, train_op, 4)
    record = next(op for op in capture.executed_ops if op.name == "x")
    record.output_shapes[0] = shape
    capture.by_name["x:0"] = capture.by_name["x:0"]._replace(shape=shape)
    return capture


def test_a_rank_change_that_changes_a_held_form_builds_again():
    graph, train_op, estimated, plan, shared = _fresh()
    shared.nodes(estimated)
    three_d = _reranked(graph, train_op, (4, 4, 1))  # ND as the 2-D one: the nodes are kept, the shape new
    again = shared.nodes(three_d)
    assert shared.reused == 1
    assert _described(again) == _described(npu_graph.build_nodes(three_d))
    four_d = _reranked(graph, train_op, (2, 2, 2, 4))  # 4-D: its origin format is NHWC
    built = shared.nodes(four_d)
    assert shared.reused == 1
    assert _described(built) == _described(npu_graph.build_nodes(four_d))
    shared.nodes(estimated, plan, True)
    ascend = shared.nodes(three_d, plan, True)  # ascend: any rank change counts
    assert shared.reused == 1
    assert _described(ascend) == _described(npu_graph.build_nodes(three_d, plan, True))


def test_forget_drops_the_last_build_and_the_next_call_builds_the_same_nodes_again():
    graph, train_op, estimated, plan, shared = _fresh()
    first = shared.nodes(estimated, plan, True)
    shared.forget()  # the owner's run ended (runner/_heap.release_after_bundle)
    again = shared.nodes(estimated, plan, True)
    assert again is not first and shared.reused == 0  # built again, not answered from a kept build
    assert _described(again) == _described(first)
    assert shared.nodes(estimated, plan, True) is again and shared.reused == 1  # kept again from then on


def test_with_value_is_replace_of_the_value_alone():
    """NodeTensor.with_value names every field: a field added to NodeTensor and not to it fails here."""
    held = npu_graph.layout.Held("float32", "NHWC", "NHWC")
    old, new = npu_graph.Value("a:0", (2, 3), held), npu_graph.Value("a:0", (4, 3), held, "b:0")
    tensor = npu_graph.NodeTensor("a:0", old, "DT_FLOAT", ("a", 0))
    assert npu_graph.NodeTensor._fields == ("source", "value", "tf_dtype", "origin")
    assert tensor.with_value(new) == tensor._replace(value=new) == ("a:0", new, "DT_FLOAT", ("a", 0))


def test_no_task_is_worked_out_from_the_outputs_the_node_is_built_with():
    """``NpuNode.no_task`` is set once, when the node is made: the builder makes each node with its
    outputs (an op of string outputs only, here AsString, has no task by its output dtypes alone)
    and a reshaped copy carries the same answer."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 16], name="x")
        w = v1.get_variable("w", initializer=tf.ones([16, 4]))
        loss = tf.reduce_mean(tf.matmul(x, w))
        train_op = tf.group(v1.train.GradientDescentOptimizer(0.1).minimize(loss), tf.strings.as_string(loss))
    shared = npu_graph.SharedBuild()
    for batch in (4, 8):  # the second: a reshape of the first build, its copies made anew
        nodes = shared.nodes(_capture(graph, train_op, batch)[0])
        by_rule = [n.kind not in ("fused", "trans", "update") and ge_model.is_no_task(
            n.type, [t.tf_dtype for t in n.outputs], n.tf_type) for n in nodes]
        assert [n.no_task for n in nodes] == by_rule
        strings = [n for n in nodes if n.tf_type == "AsString"]
        assert strings and all(n.no_task and n.type not in ge_model.NO_TASK_TYPES for n in strings)
        assert not all(n.no_task for n in nodes)
    assert shared.reused == 1
