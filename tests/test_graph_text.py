"""``tf/graph.pbtxt`` (``dump_run.write_graph_text``) holds ``tf.io.write_graph``'s bytes, real TensorFlow, both stacks.

On protobuf's C++ implementation (TF 1.15) the writer prints with ``str(message)`` instead of the
pure-Python ``text_format``: these graphs hold what the two printers could spell differently
(float attributes and values that are not short decimals, NaN, infinities, -0.0, int64 extremes,
bytes that need escapes, non-ASCII text, an unknown shape, a function library).
"""
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from npu_dump_hook.errors import BundleError
from npu_dump_hook.train.dump_run import write_graph_text

v1 = tf.compat.v1


def _tricky_graph(library=False):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        floats = np.array([0.1, 1 / 3.0, -0.0, 1e-45, 3.4e38, math.pi, float("nan"), float("inf"), -float("inf")],
                          np.float32)
        tf.constant(floats, name="floats_content")
        tf.constant(1 / 3.0, tf.float32, name="third")
        tf.constant(0.1, tf.float64, name="tenth64")
        tf.constant(np.float16(0.1), name="half")
        tf.constant(np.iinfo(np.int64).min, tf.int64, name="int64_min")
        tf.constant([b"quote\" back\\ nl\n tab\t", b"\x00\xff\x80", u"\u00e9t\u00e9 \u6f22".encode("utf-8")],
                    name="strings")
        tf.constant(True, name="flag")
        v1.nn.leaky_relu(x, alpha=0.123456789, name="leaky")  # a float attribute
        v1.nn.dropout(x, rate=0.3, seed=7, name="drop")

        if library:  # its maps with integer keys (arg_attr) print differently in C++: write_graph writes it
            @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
            def scaled(value):
                return value * 0.7

            scaled(x)
    return graph.as_graph_def(add_shapes=True)


@pytest.mark.parametrize("library", [False, True], ids=["plain", "function_library"])
def test_the_written_text_is_write_graphs(tmp_path, library):
    graph_def = _tricky_graph(library)
    assert graph_def.HasField("library") == library
    v1.train.write_graph(graph_def, str(tmp_path / "tf"), "expected.pbtxt")
    ours = str(tmp_path / "ours" / "graph.pbtxt")  # its folder does not exist yet: made
    write_graph_text(graph_def, ours)
    with open(str(tmp_path / "tf" / "expected.pbtxt"), "rb") as expected, open(ours, "rb") as written:
        assert written.read() == expected.read()
    parsed = v1.GraphDef()
    with open(ours) as text:
        text_format.Parse(text.read(), parsed)
    assert parsed.node[0].name == graph_def.node[0].name and len(parsed.node) == len(graph_def.node)


def test_a_failed_write_names_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text(u"not a folder")
    target = os.path.join(str(blocker), "graph.pbtxt")
    with pytest.raises(BundleError, match="writing the model graph to .*file/graph.pbtxt failed"):
        write_graph_text(_tricky_graph(), target)


def test_node_fields_the_fast_printer_does_not_write_itself(tmp_path):
    """Hand-edited nodes: an empty attribute value, a device, names that need escapes, a node with
    debug info and a full type (printed after the skeleton), the deprecated ``version`` field; same bytes as write_graph."""
    graph_def = _tricky_graph()
    graph_def.node[0].attr["empty"].CopyFrom(v1.AttrValue())
    graph_def.node[0].device = "/job:localhost/replica:0/task:0/device:CPU:0"
    graph_def.node[1].name = u"quote\" back\\ \u00e9t\u00e9\n"
    graph_def.node[1].input.append(u"tab\there:0")
    graph_def.node[2].experimental_debug_info.original_node_names.append("origin")
    # full types (TF 2.x's If/While carry one): after debug info, and on a node of its own
    for number in (2, 3) if "experimental_type" in v1.NodeDef.DESCRIPTOR.fields_by_name else ():  # TF 2.x
        graph_def.node[number].experimental_type.type_id = 10001
        graph_def.node[number].experimental_type.args.add(type_id=1000 + number)
    graph_def.version = 7
    v1.train.write_graph(graph_def, str(tmp_path), "expected.pbtxt")
    ours = str(tmp_path / "graph.pbtxt")
    write_graph_text(graph_def, ours)
    with open(str(tmp_path / "expected.pbtxt"), "rb") as expected, open(ours, "rb") as written:
        assert written.read() == expected.read()
