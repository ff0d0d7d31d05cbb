"""bundle.describe: the coverage tally that keeps no list of every dumped name agrees with coverage();
a dump_layer dump's coverage says which ops were left out by choice (not missing)."""
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.bundle.describe import CoverageTally, GraphOps, coverage

names = st.text("abc_/", min_size=1, max_size=3)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(expected=st.sets(names), others=st.sets(names), dumped=st.lists(names), with_graph=st.booleans(),
       chosen=st.none() | st.sets(names))
def test_coverage_tally_gives_what_coverage_gives(expected, others, dumped, with_graph, chosen):
    selected = None if chosen is None else sorted(chosen & expected)
    ops = GraphOps(sorted(expected), set(expected) | set(others), len(expected | others), selected) \
        if with_graph else None
    tally = CoverageTally(ops)
    counts = {}
    for name in dumped:
        tally.add(name)
        counts[name] = counts.get(name, 0) + 1
    assert coverage(ops, tally) == tally.result() == coverage(ops, counts)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(expected=st.sets(names, min_size=1), chosen=st.sets(names), dumped=st.sets(names))
def test_a_dump_layer_coverage_adds_up_and_only_chosen_ops_are_missing(expected, chosen, dumped):
    selected = sorted(chosen & expected)
    cov = coverage(GraphOps(sorted(expected), set(expected), len(expected), selected), dumped)
    assert cov["selected"] == len(selected)
    assert set(cov["missing"]) == set(selected) - dumped  # a chosen op without its file
    assert cov["not_selected"] == len(expected - set(selected) - dumped)  # left out by choice
    assert cov["expected"] == cov["dumped"] + len(cov["missing"]) + cov["not_selected"]


def test_the_graph_scan_selects_by_name_or_original_name(tmp_path):
    """One definition (npu_dump_hook.bundle.selection): a fused node is chosen through one of its members."""
    from npu_dump_hook.bundle.describe import graph_ops
    from npu_dump_hook.formats.ge_build import make_model, make_op
    from npu_dump_hook.formats.ge_text import format_model

    ops = [make_op("x", "Data", 0), make_op("conv1/Conv2Dconv1/Relu", "Conv2D", 1, inputs=["x:0"],
                                            original_op_names=["conv1/Conv2D", "conv1/Relu"]),
           make_op("pool1/MaxPool", "MaxPool", 2, inputs=["conv1/Conv2Dconv1/Relu:0"]),
           make_op("loss", "Mean", 3, inputs=["pool1/MaxPool:0"])]
    path = str(tmp_path / "ge_proto_00000001_Build.txt")
    with open(path, "w") as handle:
        handle.write(format_model(make_model([("g", ops)], name="g")))
    assert graph_ops(path).selected is None
    found = graph_ops(path, ["conv1/Relu", "loss"])
    assert found.selected == ["conv1_Conv2Dconv1_Relu", "loss"]
    cov = coverage(found, {"conv1_Conv2Dconv1_Relu": 1, "x": 1})
    assert cov["missing"] == ["loss"] and cov["not_selected"] == 1 and cov["selected"] == 2


def test_verify_checks_a_dump_layer_coverage():
    """The counts add up and the choice is recorded in options.dump_layer (bundle-format.md, coverage)."""
    from npu_dump_hook.bundle.verify import check_bundle_json

    def coverage_problems(options, cov):
        return [p for p in check_bundle_json({"options": options, "coverage": cov}) if p.startswith("coverage:")]

    good = {"expected": 5, "dumped": 2, "missing": ["c"], "not_in_graph": [], "selected": 2, "not_selected": 2}
    assert coverage_problems({"dump_layer": "a c"}, good) == []
    assert coverage_problems({}, good) == ["coverage: selected/not_selected without options.dump_layer "
                                           "(nothing was chosen)"]
    assert coverage_problems({"dump_layer": "a c"}, dict(good, not_selected=1)) == [
        "coverage: expected 5 is not dumped 2 + missing 1 + not_selected 1"]
    assert coverage_problems({}, dict(good, selected=None, not_selected=None)) == [
        "coverage: selected/not_selected without options.dump_layer (nothing was chosen)"]


def test_control_flow_counts_pruned_loop_ops_as_not_executed_and_fused_ops_with_their_node(tmp_path):
    """The hook's census (train/control_flow.py) against the dump files: a loop-body op the capture saw no
    value of (pruned by TensorFlow) did not run, unless a dump file says it did; an op fused into a node of
    another name is dumped with that node (issue 21: the RNN's warning named 13 such ops)."""
    from npu_dump_hook.bundle.describe import control_flow_coverage, graph_ops
    from npu_dump_hook.formats.ge_build import make_model, make_op
    from npu_dump_hook.formats.ge_text import format_model

    ops = [make_op("x", "Data", 0), make_op("while/MatMul", "MatMul", 1, inputs=["x:0"],
                                            original_op_names=["while/MatMul", "while/BiasAdd"]),
           make_op("while/grad/Mul_1", "Mul", 2, inputs=["x:0"]), make_op("while/grad/Sum_1", "Sum", 3, inputs=["x:0"]),
           make_op("while/Tanh", "Tanh", 4, inputs=["while/MatMul:0"])]
    path = str(tmp_path / "ge_proto_00000001_Build.txt")
    with open(path, "w") as handle:
        handle.write(format_model(make_model([("g", ops)], name="g")))
    tally = CoverageTally(graph_ops(path))
    for name in ("x", "while_MatMul", "while_grad_Sum_1"):  # Sum_1's file: it ran after all
        tally.add(name)
    cov = tally.result()
    assert cov["missing"] == ["while_Tanh", "while_grad_Mul_1"] and cov["expected"] == 5, cov
    census = {"while": ["while/BiasAdd", "while/MatMul", "while/Tanh", "while/grad/Mul_1", "while/grad/Sum_1"],
              "pruned": ["while/grad/Mul_1", "while/grad/Sum_1"]}
    warning = control_flow_coverage(cov, census, tally)
    assert cov["not_executed"] == ["while_grad_Mul_1"]  # pruned, and no file says otherwise
    assert cov["missing"] == ["while_Tanh"] and cov["expected"] == 4, cov
    flow = cov["control_flow"]
    assert flow["while"] == {"executed": 4, "dumped": 3} and flow["not_dumped"] == ["while_Tanh"], flow
    assert warning.startswith("control flow: 1 of 4 executed op(s)") and "while_Tanh" in warning, warning
