"""Issue #20 items 3 and 10 (analysis): a cycle in the Build graph never hides a root cause
(loop back-edges ignored, execution order decides), and the analysis is linear in ops."""
import numpy as np

from npu_dump_hook.compare import compare
from npu_dump_hook.compare._analysis import analyse
from npu_dump_hook.compare._graph import Graph
from npu_dump_hook.compare._rows import Row
from npu_dump_hook.compare._thresholds import DEFAULT_THRESHOLDS
from npu_dump_hook.formats.ge_graph import OpSummary, OutputOrigin

from helpers.compare_synth import T0, Synth


def _statuses(result):
    return {r["npu_op"]: r["status"] for r in result.doc["rows"] if r["direction"] == "output"}


def test_a_two_op_cycle_with_a_fault_fails_naming_the_faulted_op(tmp_path):
    """a (x1.5 fault) -> b = Relu(a) -> a: before, both were "propagated" and the verdict PASS."""
    synth = Synth(tmp_path)
    value = np.linspace(1, 2, 16, dtype=np.float32)
    synth.op("a", "Mul", value, inputs=["b:0"], npu=value * np.float32(1.5))
    synth.op("b", "Relu", value, inputs=["a:0"], npu=value * np.float32(1.5))
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1, result.summary_text()
    assert result.doc["first_divergence"]["npu_op"] == "a"
    assert _statuses(result) == {"a": "root_cause", "b": "propagated"}
    assert "verdict: FAIL" in result.summary_text()


def _while_loop(root, fault):
    """A TF1 while_loop as the emulator writes it: Enter -> Merge -> Switch -> body -> NextIteration
    -> Merge, Switch -> Exit -> after. Each op's latest dump is kept (msaccucmp's rule), so the
    body and NextIteration are from the last iteration, Merge, Switch and Exit from the final check."""
    synth = Synth(root)
    x = np.linspace(1, 2, 24, dtype=np.float32).reshape(4, 6)
    loop = x * np.float32(4.0)  # the value around the loop at the last iteration

    def npu(value, faulted):
        return value * np.float32(fault) if faulted else value

    synth.op("x", "Data", x, no_task=True)
    synth.op("while/Enter", "Enter", x, inputs=["x:0"], timestamp=T0 + 1)
    synth.op("while/Merge", "Merge", loop, inputs=["while/Enter:0", "while/NextIteration:0"],
             npu=npu(loop, True), timestamp=T0 + 10)
    synth.op("while/Switch", "Switch", [loop, loop], inputs=["while/Merge:0"], npu=[npu(loop, True)] * 2,
             timestamp=T0 + 11)
    synth.op("while/body", "Mul", loop, inputs=["while/Switch:1"], npu=npu(loop, True), timestamp=T0 + 8)
    synth.op("while/NextIteration", "NextIteration", loop, inputs=["while/body:0"], npu=npu(loop, True),
             timestamp=T0 + 9)
    synth.op("while/Exit", "Exit", loop, inputs=["while/Switch:0"], npu=npu(loop, True), timestamp=T0 + 12)
    synth.op("after", "Relu", loop, inputs=["while/Exit:0"], npu=npu(loop, True), timestamp=T0 + 13)
    return synth


def test_a_fault_inside_a_while_loop_fails_naming_the_faulted_op(tmp_path):
    graph, step, golden = _while_loop(tmp_path, 1.5).write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1, result.summary_text()
    assert result.doc["first_divergence"]["npu_op"] == "while/body"
    assert [result.doc["rows"][i]["npu_op"] for i in result.doc["root_causes"]] == ["while/body"]
    statuses = _statuses(result)
    assert statuses.pop("while/Enter") == "ok" and statuses.pop("while/body") == "root_cause"
    assert set(statuses.values()) == {"propagated"}


def test_a_healthy_while_loop_passes(tmp_path):
    graph, step, golden = _while_loop(tmp_path, 1.0).write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 0 and result.doc["summary"]["breached"] == 0


def test_a_self_loop_is_still_a_root_cause(tmp_path):
    synth = Synth(tmp_path)
    value = np.linspace(1, 2, 16, dtype=np.float32)
    synth.op("acc", "Add", value, inputs=["acc:0"], npu=value * np.float32(1.5))
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1 and result.doc["first_divergence"]["npu_op"] == "acc"


class _CountingGraph(Graph):
    lookups = 0

    def op(self, name):
        _CountingGraph.lookups += 1
        return Graph.op(self, name)


def _uncompared_chain(count):
    """``count`` ops in a chain, none with a compared row (the wrong golden folder), as rows."""
    from npu_dump_hook.compare._match import OpEntry

    ops = [OpSummary("op{}".format(i), "Add", i, ("op{}:0".format(i - 1),) if i else (), False, None,
                     (OutputOrigin(None, None),)) for i in range(count)]
    graph = _CountingGraph("g", ops)
    rows = []
    for op in ops:
        row = Row(OpEntry(op.id, op.id, op.name, op.type, (op.name,), None, None), None, "no golden file: x")
        row.tensor, row.order = op.name + ":output:0", op.id
        rows.append(row)
    return graph, rows


def _lookups(count):
    graph, rows = _uncompared_chain(count)
    _CountingGraph.lookups = 0
    analyse(rows, graph, DEFAULT_THRESHOLDS)
    return _CountingGraph.lookups


def test_the_analysis_is_linear_in_ops_without_a_compared_row():
    """Before: every row looked through the whole chain above it (8,000 ops: 153 s)."""
    small, large = _lookups(2000), _lookups(20000)
    assert large <= 12 * small, (small, large)  # linear: 10x; quadratic was 100x


def test_a_long_cycle_of_ops_without_a_compared_row_is_looked_through_once():
    graph, rows = _uncompared_chain(5000)
    ops = list(graph.ops)
    ops[0] = ops[0]._replace(inputs=("op4999:0",))  # close the chain into a cycle
    graph = _CountingGraph("g", ops)
    _CountingGraph.lookups = 0
    analyse(rows, graph, DEFAULT_THRESHOLDS)
    assert _CountingGraph.lookups <= 10 * 5000
