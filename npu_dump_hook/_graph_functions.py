"""Random sources inside the graph's function library (tf.data functions, ``make_one_shot_iterator``).

A dataset built for ``make_one_shot_iterator`` (and the map functions of any dataset) lives
in a function of the graph library, not in the main graph: its ``ShuffleDataset`` and random
ops are what actually feed the step, while a main-graph copy of the same pipeline is often
dead. TensorFlow cannot replace a function in place (TF 1.15 cannot remove one), so a
function that needs edits is copied under a new name (``{name}_npu_dump_hook``), edited, added
to the graph, and every reference to the old one (main-graph op attrs such as
``OneShotIterator.dataset_factory``, and function-valued attrs inside other rewritten
functions) is pointed at the copy.

Live vs dead: a function is live when a main-graph op references it, directly or through
other functions; random sources in functions nothing references are reported as dead copies
and left alone.

Edits (FunctionDef level; references are ``node:output_arg:index`` strings):

* strip: ``ShuffleDataset*`` nodes are bypassed (their consumers read their input dataset);
  ``ShuffleAndRepeatDataset*`` becomes ``RepeatDataset`` over the same input and count;
* pin (and strip for what it does not remove): stateful random nodes with seed = seed2 = 0 get
  ``seed``/``seed2`` attributes derived from their names; the seed inputs of shuffles are the
  function's ``Const`` nodes, which get the pinned values.

Stateful nodes whose user seeds are a clock reading (the caller's rule, passed as ``clock``)
are reported ``clock-seeded`` under every policy; their seeds are kept.
"""
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import _tf

__all__ = ["rewrite_functions", "SUFFIX", "ClockRule"]

SUFFIX = "_npu_dump_hook"
_SHUFFLES = frozenset(("ShuffleDataset", "ShuffleDatasetV2", "ShuffleDatasetV3"))
_SHUFFLE_AND_REPEAT = frozenset(("ShuffleAndRepeatDataset", "ShuffleAndRepeatDatasetV2"))
#: ``rule((seed, seed2), what_happened)``: the action of a node seeded from the clock, else None.
ClockRule = Callable[[Tuple[int, int], str], Optional[str]]


def rewrite_functions(graph: Any, stateful: Set[str], shuffles: Set[str], pin: bool, strip: bool,
                      seed: int, derive: Callable[[str], int],
                      clock: ClockRule) -> List[Dict[str, str]]:
    """Edit the live random sources of ``graph``'s functions as the policy says; returns report entries.

    ``clock``: which user seeds are clock readings (the rule is the caller's)."""
    if not _tf.graph_may_hold_functions(graph):
        return []  # TF 1.15 counts none: spare serializing the whole graph (~0.02 s, 2,000 ops)
    library = {f.signature.name: f for f in graph.as_graph_def(add_shapes=False).library.function}
    if not library:
        return []  # no function to edit: skip reading every op's NodeDef (a TF 1.x graph's usual case)
    random_types = stateful | shuffles | _SHUFFLE_AND_REPEAT
    users = _main_graph_users(graph, library)
    live = _reachable(set(users), library)
    entries = []  # type: List[Dict[str, str]]
    edited = {}  # type: Dict[str, Any]
    for name in sorted(library):
        nodes = [n for n in library[name].node_def if n.op in random_types]
        if not nodes:
            continue
        if name not in live:
            dead = "dead copy: no op of the graph uses function {}".format(name)
            entries.extend(_entry(name, n, dead + "; left as is" if pin else "reported (" + dead + ")") for n in nodes)
            continue
        if not pin:
            entries.extend(_entry(name, n, _clock_action(clock, n, "reported", name) or
                                  "reported (inside graph function {})".format(name)) for n in nodes)
            continue
        copy = type(library[name])()
        copy.CopyFrom(library[name])
        entries.extend(_edit(copy, name, stateful, strip, seed, derive, clock))
        edited[name] = copy
    if edited:
        _register(graph, library, edited, live, users)
    return entries


def _entry(function: str, node: Any, action: str) -> Dict[str, str]:
    category = "shuffle" if "Shuffle" in node.op else "stateful"
    return {"op": "{}/{}".format(function, node.name), "type": node.op, "category": "function_" + category,
            "action": action}


# -- which functions are live ------------------------------------------------------------------
def func_names(attrs: Any) -> List[str]:
    names = []
    for value in attrs.values():
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names.extend(f.name for f in value.list.func)
    return names


def _main_graph_users(graph: Any, library: Dict[str, Any]) -> Dict[str, List[Tuple[Any, str]]]:
    """``{function: [(main-graph op, attr name), ...]}`` for the functions main-graph ops name."""
    users = {}  # type: Dict[str, List[Tuple[Any, str]]]
    for op in graph.get_operations():
        for key, value in op.node_def.attr.items():
            for name in func_names({key: value}):
                if name in library:
                    users.setdefault(name, []).append((op, key))
    return users


def _reachable(roots: Set[str], library: Dict[str, Any]) -> Set[str]:
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        for node in library[name].node_def:
            stack.extend(func_names(node.attr))
    return seen


# -- editing one function -------------------------------------------------------------------
def _clock_action(clock: ClockRule, node: Any, what_happened: str, function: str) -> Optional[str]:
    """``clock``'s action for a stateful ``node`` (shuffle seeds are inputs, not attrs), else None."""
    if "seed" not in node.attr or "seed2" not in node.attr:
        return None
    seeds = (node.attr["seed"].i, node.attr["seed2"].i)
    return clock(seeds, "{}, inside graph function {}".format(what_happened, function))


def _edit(fdef: Any, name: str, stateful: Set[str], strip: bool, seed: int, derive: Callable[[str], int],
          clock: ClockRule) -> List[Dict[str, str]]:
    entries = []
    for node in list(fdef.node_def):
        where = "{}/{}".format(name, node.name)
        if node.op in stateful:
            if node.attr["seed"].i or node.attr["seed2"].i:
                entries.append(_entry(name, node, _clock_action(clock, node, "kept", name) or
                                      "kept user seeds (inside graph function {})".format(name)))
                continue
            node.attr["seed"].i, node.attr["seed2"].i = seed, derive(where)
            entries.append(_entry(name, node, "pinned inside graph function {} (seed={}, seed2={})".format(
                name, seed, derive(where))))
        elif node.op in _SHUFFLES or node.op in _SHUFFLE_AND_REPEAT:
            entries.append(_entry(name, node, _shuffle(fdef, node, name, strip, seed, derive(where))))
    return entries


def _shuffle(fdef: Any, node: Any, name: str, strip: bool, seed: int, seed2: int) -> str:
    if strip and node.op in _SHUFFLES:
        _bypass(fdef, node, node.input[0])
        return "removed inside graph function {} (consumers read {})".format(name, node.input[0])
    if strip:  # ShuffleAndRepeat: the repeat stays
        inputs = [node.input[0], node.input[4]] + [i for i in node.input if i.startswith("^")]
        keep = {key: node.attr[key] for key in ("output_types", "output_shapes")}
        node.op = "RepeatDataset"
        del node.input[:]
        node.input.extend(inputs)
        node.attr.clear()
        for key, value in keep.items():
            node.attr[key].CopyFrom(value)
        return "removed inside graph function {} (ShuffleAndRepeat -> Repeat)".format(name)
    if node.op == "ShuffleDatasetV2" or len(node.input) < 4:
        return "not handled: {} inside graph function {} takes its seeds from a seed generator".format(node.op, name)
    for index, value in ((2, seed), (3, seed2)):
        const = _const_node(fdef, node.input[index])
        if const is None:
            return "not handled: the seed of {} in graph function {} is not a constant".format(node.name, name)
        tensor = const.attr["value"].tensor
        tensor.ClearField("tensor_content")
        tensor.int64_val[:] = [value]
    return "pinned inside graph function {} (seed={}, seed2={})".format(name, seed, seed2)


def _const_node(fdef: Any, reference: str) -> Any:
    node_name = reference.split(":", 1)[0]
    for node in fdef.node_def:
        if node.name == node_name and node.op == "Const":
            return node
    return None


def _bypass(fdef: Any, node: Any, source: str) -> None:
    """Remove ``node``: whatever read its (single) output reads ``source``."""
    prefix = node.name + ":"
    for other in fdef.node_def:
        other.input[:] = [source if i.startswith(prefix) else i for i in other.input]
    for key in list(fdef.ret):
        if fdef.ret[key].startswith(prefix):
            fdef.ret[key] = source
    kept = [n for n in fdef.node_def if n.name != node.name]
    del fdef.node_def[:]
    fdef.node_def.extend(kept)


# -- putting the copies in place -----------------------------------------------------------------
def _register(graph: Any, library: Dict[str, Any], edited: Dict[str, Any], live: Set[str],
              users: Dict[str, List[Tuple[Any, str]]]) -> None:
    """Add the edited copies (and copies of live functions that call them), then repoint users."""
    renamed = dict.fromkeys(edited)  # type: Dict[str, Any]
    changed = True
    while changed:  # a live function that calls a renamed one is renamed too
        changed = False
        for name in sorted(live - set(renamed)):
            if any(callee in renamed for node in library[name].node_def for callee in func_names(node.attr)):
                copy = type(library[name])()
                copy.CopyFrom(library[name])
                edited[name] = copy
                renamed[name] = None
                changed = True
    for name, fdef in edited.items():
        fdef.signature.name = name + SUFFIX
        for node in fdef.node_def:
            _rename_refs(node.attr, renamed)
    for name in _callees_first(edited, renamed):
        _tf.add_function_def(graph, edited[name])
    attr = _tf.attr_value_pb2()
    for name in renamed:
        for op, key in users.get(name, ()):
            value = attr.AttrValue()
            value.CopyFrom(op.node_def.attr[key])
            _rename_refs({key: value}, renamed)
            op._set_attr(key, value)  # noqa: SLF001 - TF has no public way to edit an op's attr


def _rename_refs(attrs: Any, renamed: Dict[str, Any]) -> None:
    for value in attrs.values():
        if value.HasField("func") and value.func.name in renamed:
            value.func.name += SUFFIX
        elif value.HasField("list"):
            for func in value.list.func:
                if func.name in renamed:
                    func.name += SUFFIX


def _callees_first(edited: Dict[str, Any], renamed: Dict[str, Any]) -> List[str]:
    order, seen = [], set()  # type: List[str], Set[str]

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for node in edited[name].node_def:
            for callee in func_names(node.attr):
                base = callee[: -len(SUFFIX)] if callee.endswith(SUFFIX) else callee
                if base in edited:
                    visit(base)
        order.append(name)

    for name in sorted(edited):
        visit(name)
    return order
