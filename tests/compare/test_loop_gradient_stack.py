"""Issue #21 (control flow, compare side): the gradient of a TF 1.x while loop (``dynamic_rnn``)
reads the forward values through a stack (StackPushV2 in the forward loop, StackPopV2 in the
gradient loop), whose only edge is the handle, a resource GE writes as a control input. A
forward error reaching a gradient op that way is inherited ("propagated"), not a new root cause.

The graphs are written as the emulator writes them (resource inputs as ``src:-1``); the
end-to-end check on a real dynamic_rnn is tests/test_rnn_workflow.py."""
import numpy as np

from npu_dump_hook.compare import compare
from npu_dump_hook.compare._analysis import _same_or_previous
from npu_dump_hook.compare._match import OpEntry
from npu_dump_hook.compare._rows import Row
from npu_dump_hook.compare._loops import stack_values

from helpers.compare_synth import Synth


def _gradient_through_stack(root, forward_fault=1.0, gradient_fault=1.0):
    """x -> while/Tanh -(push)-> stack -(pop)-> grad/Mul <- grad/dy; returns the Synth."""
    synth = Synth(root)
    x = np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4)
    tanh = np.tanh(x)
    dy = x * np.float32(0.25)
    synth.op("x", "Data", x, no_task=True)
    synth.op("while/Tanh", "Tanh", tanh, inputs=["x:0"], npu=tanh * np.float32(forward_fault))
    synth.op("grad/f_acc", "StackV2", np.zeros([], np.int32), no_task=True, golden=False)
    synth.op("grad/Enter", "Enter", np.zeros([], np.int32), inputs=["grad/f_acc:-1"], no_task=True, golden=False)
    synth.op("grad/StackPushV2", "StackPushV2", tanh, inputs=["while/Tanh:0", "grad/Enter:-1"], no_task=True,
             golden=False)
    synth.op("grad/dy", "Relu", dy, inputs=["x:0"])
    synth.op("grad/StackPopV2/Enter", "Enter", np.zeros([], np.int32), inputs=["grad/f_acc:-1"], no_task=True,
             golden=False)
    synth.op("grad/StackPopV2", "StackPopV2", tanh, inputs=["grad/StackPopV2/Enter:-1"], no_task=True,
             golden=False)
    product = dy * tanh
    synth.op("grad/Mul", "Mul", product, inputs=["grad/dy:0", "grad/StackPopV2:0"],
             npu=product * np.float32(forward_fault * gradient_fault))
    return synth


def _root_causes(result):
    return [result.doc["rows"][i]["npu_op"] for i in result.doc["root_causes"]]


def test_the_pop_is_linked_to_what_was_pushed_onto_its_stack(tmp_path):
    synth = _gradient_through_stack(tmp_path)
    synth.write()
    from npu_dump_hook.compare._graph import load_graph
    assert stack_values(load_graph(synth.graph)) == {"grad/StackPopV2": [("while/Tanh", 0)]}


def test_a_forward_error_popped_by_the_gradient_is_propagated_not_a_root_cause(tmp_path):
    """Before: grad/Mul was a second root cause beside the faulted forward op."""
    graph, step, golden = _gradient_through_stack(tmp_path, forward_fault=1.05).write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1, result.summary_text()
    assert _root_causes(result) == ["while/Tanh"], result.summary_text()
    statuses = {r["npu_op"]: r["status"] for r in result.doc["rows"] if r["tensor"]}
    assert statuses == {"while/Tanh": "root_cause", "grad/dy": "ok", "grad/Mul": "propagated"}


def test_an_error_of_the_gradient_op_itself_stays_a_root_cause(tmp_path):
    graph, step, golden = _gradient_through_stack(tmp_path, gradient_fault=1.05).write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1 and _root_causes(result) == ["grad/Mul"], result.summary_text()


def test_a_healthy_gradient_through_a_stack_passes(tmp_path):
    graph, step, golden = _gradient_through_stack(tmp_path).write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 0 and result.doc["summary"]["breached"] == 0, result.summary_text()


def _row(name, iteration, order):
    row = Row(OpEntry(order, order, name, "Mul", (name,), None, None, iteration), None, "")
    row.order = order
    return row


def test_gradient_iteration_k_pops_the_forward_iteration_n_minus_1_minus_k():
    """Last in, first out: of 4 forward iterations, gradient iteration 0 reads forward iteration 3;
    an ordinary loop edge still reads the same iteration."""
    forward = [_row("while/Tanh", k, k) for k in range(4)]
    iterations = {(r.npu_op, r.slot, r.iteration): r for r in forward}
    pushes = {("while/Tanh", 0): 4}
    gradient = [_row("grad/Mul", k, 10 + k) for k in range(4)]
    popped = [_same_or_previous(forward[0], g, iterations, True, pushes).iteration for g in gradient]
    assert popped == [3, 2, 1, 0]
    assert [_same_or_previous(forward[0], g, iterations).iteration for g in gradient] == [0, 1, 2, 3]


def _graph(ops):
    from npu_dump_hook.compare._graph import Graph
    from npu_dump_hook.formats.ge_graph import OpSummary, OutputOrigin

    return Graph("g", [OpSummary(name, op_type, position, tuple(inputs), False, None, (OutputOrigin(None, None),))
                       for position, (name, op_type, inputs) in enumerate(ops)])


def _loop(prefix, source):
    """A TF 1.x while loop's skeleton: Enter -> Merge <-> NextIteration, Switch -> body / Exit."""
    return [(prefix + "/Enter", "Enter", [source]), (prefix + "/Merge", "Merge", [prefix + "/Enter:0",
                                                                                  prefix + "/NextIteration:0"]),
            (prefix + "/Switch", "Switch", [prefix + "/Merge:0"]), (prefix + "/body", "Tanh", [prefix + "/Switch:1"]),
            (prefix + "/NextIteration", "NextIteration", [prefix + "/body:0"]),
            (prefix + "/Exit", "Exit", [prefix + "/Switch:0"])]


def test_a_loop_inside_a_loop_body_is_found_and_loops_one_after_another_are_not():
    from npu_dump_hook.compare._loops import nested_loops

    one_after_another = _loop("a", "x:0") + _loop("b", "a/Exit:0")
    assert nested_loops(_graph([("x", "Data", [])] + one_after_another)) == []
    nested = _loop("outer", "x:0") + _loop("outer/inner", "outer/body:0")
    assert nested_loops(_graph([("x", "Data", [])] + nested)) == ["outer/inner/Enter"]
