"""A ``--fault`` on an op inside a TF 2.x loop body says why it is no op of the graph (issue #21 tryout).

Found by hand: ``dynamic_rnn`` on TF 2.15 (control flow v2) with ``--fault rnn/while/lstm_cell/MatMul=...``
failed with "names no op of the graph" and nothing else, although the op exists in the
``while`` body function, which the emulated NPU neither rewrites nor dumps.
"""
import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook.emulator import numerics
from npu_dump_hook.errors import OptionError

v1 = tf.compat.v1


def _functional_loop_graph():
    graph = tf.Graph()
    with graph.as_default():
        v1.enable_control_flow_v2()
        try:
            w = tf.constant(np.ones((2, 2), np.float32))
            with tf.name_scope("rnn"):
                v1.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.matmul(h, w, name="step_matmul")),
                              [tf.constant(0), tf.ones((2, 2))])
        finally:
            v1.disable_control_flow_v2()
    return graph


def test_a_fault_on_an_op_of_a_loop_body_function_names_the_function_and_the_way_out():
    graph = _functional_loop_graph()
    with pytest.raises(OptionError) as caught:
        numerics.apply(graph, fp16=False, faults={"rnn/while/step_matmul": "scale=1.05"})
    message = str(caught.value)
    assert "names no op of the graph" in message and "inside graph function" in message, message
    assert "step_matmul" in message and "disable_control_flow_v2" in message, message


def test_a_fault_on_a_name_nowhere_in_the_graph_gets_no_function_hint():
    graph = _functional_loop_graph()
    with pytest.raises(OptionError) as caught:
        numerics.apply(graph, fp16=False, faults={"no/such/op": "scale=1.05"})
    assert "names no op of the graph" in str(caught.value) and "graph function" not in str(caught.value)
