"""Which executed ops of the captured step sit in control flow: the honest part of the coverage.

A dump (NPU or emulated) and a golden capture see ops in TF 1.x ``tf.while_loop`` bodies,
``tf.cond`` branches and the bodies of functional ``If``/``While``/``StatelessIf``/``Case`` ops
differently from straight-line ops: loop bodies run once per iteration, an untaken branch does
not run at all, and function bodies are no main-graph ops. :func:`census` lists them for the
step the hook captured, so the bundle can say how many executed ops sit there and how many
have dump files (``coverage.control_flow``, docs/bundle-format.md), and warn when some have none::

    {"while": [TF op names], "cond": [...], "untaken": [...], "pruned": [...],
     "functions": [{"op": name, "type": "StatelessIf", "body": [node names]}]}

``while``/``cond``: executed ops that get a device task (not Switch/Merge/Enter/Exit and the
other ops GE runs on the host, :data:`~npu_dump_hook.emulator.ge_model.NO_TASK_TYPES`) inside a
TF 1.x loop body, or in a cond branch or downstream of a ``Switch`` up to its ``Merge`` (a cond's
gradient has no cond context, but only one side of it runs). ``untaken``: those ``cond`` ops that produced no value in the
step (known only when the step was captured: the capture finds the untaken branch dead);
``pruned``: those ``while`` ops whose every output had no value in any iteration of the captured
step: TensorFlow's graph optimizer removed them before the step ran (e.g. a gradient no update
reads, kept only by a ``tuple`` control edge; an arithmetic on constants, folded), so TF's debug
watch, the emulated NPU and the golden capture never saw them: they did not run, as an untaken
branch did not;
``functions``: each executed functional control-flow op and the task-getting nodes of its
branch/body functions (nested calls included), named ``{function}/{node}``.
"""
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .._graph_functions import func_names as _func_names
from ..emulator.ge_model import NO_TASK_TYPES
from ._capture_plan import maybe_dead, while_or_cond

__all__ = ["FUNCTIONAL_TYPES", "census", "DEAD_REASON_MARK"]

#: Functional control-flow ops whose branches/bodies are functions of the graph library.
FUNCTIONAL_TYPES = frozenset(("If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"))
#: The capture's skip reasons of a dead output (an untaken TF 1.x cond branch, the untaken side of a
#: ``Switch`` and what it feeds, e.g. a cond's gradient) start with this.
DEAD_REASON_MARK = "no value in this step"
#: Ops on handles (optionals, tensor lists: what cond_v2/while_v2 keep intermediates in): no task.
_HANDLE_PREFIXES = ("Optional", "TensorList")
_NO_TASK_NODES = NO_TASK_TYPES | frozenset(("_Arg", "_Retval", "Placeholder", "PlaceholderWithDefault"))


def census(executed: Iterable[Tuple[Any, bool]], graph: Any, captured: Any = None) -> Dict[str, Any]:
    """The control-flow census of a step (module doc). ``executed``: ``(op, fed_only)`` as
    :meth:`~npu_dump_hook.train.walk.StepWalk.executed` gives them; ``captured``: the step's
    :class:`~npu_dump_hook.train.capture.CaptureResult`, when it was captured (it tells the
    untaken TF 1.x branches and, from the captured predicate, which branch an ``If``/``Case`` took)."""
    skipped = captured.skipped if captured is not None else None
    loops, conds, functional = [], [], []  # type: List[str], List[str], List[Any]
    executed = list(executed)
    ops = [op for op, _ in executed]
    dead = maybe_dead(ops, {op.name: (list(op.inputs), list(op.control_inputs)) for op in ops})
    for op, fed_only in executed:
        if fed_only:
            continue
        if op.type in FUNCTIONAL_TYPES:
            functional.append(op)
        if op.type in _NO_TASK_NODES:
            continue
        flow = while_or_cond(op)
        if flow == "while":
            loops.append(op.name)
        elif flow == "cond" or op.name in dead:  # a cond's gradient is no cond context, but a Switch feeds it
            conds.append(op.name)
    return {"while": sorted(loops), "cond": sorted(conds), "untaken": _no_value(conds, skipped),
            "pruned": _no_value(loops, skipped), "functions": _function_bodies(graph, functional, captured)}


def _no_value(names: List[str], skipped: Optional[Iterable[Any]]) -> List[str]:
    """Those of ``names`` whose every output the capture found without a value in the step: an untaken
    cond branch, a loop-body op that never ran (an op without outputs cannot tell: it stays executed)."""
    if skipped is None:
        return []
    dead = {}  # type: Dict[str, bool]
    for entry in skipped:
        name = entry.tensor_name.rpartition(":")[0]
        dead[name] = dead.get(name, True) and entry.reason.startswith(DEAD_REASON_MARK)
    return sorted(name for name in names if dead.get(name))


def _function_bodies(graph: Any, functional: List[Any], captured: Any) -> List[Dict[str, Any]]:
    """Each functional op with the nodes of the functions it ran: a loop's condition and body; the
    taken branch of an ``If``/``Case`` when the captured predicate tells it, else every branch
    (``branch`` null: which one ran is unknown, so all are listed)."""
    if not functional:
        return []
    library = {f.signature.name: f for f in graph.as_graph_def(add_shapes=False).library.function}
    bodies = []
    for op in functional:
        functions, taken = _functions_run(op, captured)
        nodes = []  # type: List[str]
        _body_nodes(library, functions, nodes, set())
        bodies.append({"op": op.name, "type": op.type, "branch": taken, "body": nodes})
    return bodies


def _functions_run(op: Any, captured: Any) -> Tuple[List[str], Optional[str]]:
    """``(function names, taken branch attr or None)`` of a functional op in this step."""
    attrs = op.node_def.attr
    if op.type in ("While", "StatelessWhile"):
        return _func_names({key: attrs[key] for key in ("cond", "body") if key in attrs}), None
    branches = (["then_branch", "else_branch"] if op.type in ("If", "StatelessIf")
                else ["branches[{}]".format(i) for i in range(len(attrs["branches"].list.func))])
    chosen = _taken_branch(op, captured, len(branches))
    if chosen is None:
        return _func_names({key: attrs[key] for key in ("then_branch", "else_branch", "branches") if key in attrs}), None
    if op.type in ("If", "StatelessIf"):
        return [attrs[branches[chosen]].func.name], branches[chosen]
    return [attrs["branches"].list.func[chosen].name], branches[chosen]


def _taken_branch(op: Any, captured: Any, count: int) -> Optional[int]:
    """The branch index an ``If`` (predicate true: 0, false: 1) or ``Case`` (clamped index) took,
    from its captured input 0; None when that input was not captured."""
    name = op.inputs[0].name if op.inputs else ""
    if captured is None or name not in captured.by_name:
        return None
    value = captured.array(name)
    if op.type in ("If", "StatelessIf"):
        return 0 if value.size and bool(value.reshape(-1)[0]) else 1
    index = int(value.reshape(-1)[0])
    return index if 0 <= index < count else count - 1  # Case: out of range runs the last (default) branch


def _body_nodes(library: Dict[str, Any], functions: List[str], out: List[str], seen: Set[str]) -> None:
    for name in functions:
        if name in seen or name not in library:
            continue
        seen.add(name)
        for node in library[name].node_def:
            if node.op in FUNCTIONAL_TYPES or _func_names(node.attr):
                _body_nodes(library, _func_names(node.attr), out, seen)
            if node.op not in _NO_TASK_NODES and node.op not in library and not node.op.startswith(_HANDLE_PREFIXES):
                out.append("{}/{}".format(name, node.name))

