"""TF 1.x ``while_loop`` structure compare needs beyond the graph edges: what a gradient loop's
stack pop returns, and whether loops are nested.

``tf.gradients`` of a ``while_loop`` (``dynamic_rnn``) keeps every forward value the gradient
needs in a stack: the forward loop runs ``StackPushV2(handle, value)`` each iteration, the
gradient loop ``StackPopV2(handle)`` (last in, first out). The pop's only input is the handle
(a resource: GE writes it as a control edge), so the graph edges say the gradient does not
depend on the forward value at all, and a forward error reaching the gradient through the
stack would make every gradient row it breaches look like a new root cause.

:func:`stack_values` gives each pop the value edges of the pushes to the same stack (found by
walking the pushes' and pops' inputs, data or control, through Enter/RefEnter/Identity to the
``StackV2``/``Stack`` op), so the analysis links the pop to what was pushed. Iteration ``k``
of the gradient loop pops what iteration ``n - 1 - k`` of the forward loop pushed
(:func:`popped_iteration`).

:func:`nested_loops` finds loops inside loop bodies (a ``while_loop`` in another one's body):
there an inner op's iteration k is its k-th run in the step, the outer and inner iterations
flattened, which compare says in a warning (docs/compare.md, "Loop iterations").
"""
from typing import Dict, List, Optional, Tuple

from ._graph import Graph, split_input

__all__ = ["STACK_TYPES", "stack_values", "popped_iteration", "nested_loops"]

STACK_TYPES = frozenset(("StackV2", "Stack"))
_PUSH_TYPES = frozenset(("StackPushV2", "StackPush"))
_POP_TYPES = frozenset(("StackPopV2", "StackPop"))
#: What a stack handle goes through between the stack op and its push/pop.
_HANDLE_FORWARDING = frozenset(("Enter", "RefEnter", "Identity", "RefIdentity"))
_ENTER_TYPES = frozenset(("Enter", "RefEnter"))
_EXIT_TYPES = frozenset(("Exit", "RefExit"))
_MAX_WALK = 16


def _source_name(text: str) -> Optional[str]:
    """The producer named by a data or control input (``src:idx``, ``src:-1``, ``^src``)."""
    if not text:
        return None
    if text.startswith("^"):
        return text[1:]
    name, sep, _index = text.rpartition(":")
    return name if sep else text


def _stack_of(graph: Graph, name: str) -> Optional[str]:
    """The stack op whose handle reaches op ``name`` through its inputs (None: none)."""
    pending, seen = [name], set()
    for _ in range(_MAX_WALK):
        following = []
        for current in pending:
            op = graph.op(current)
            for text in op.inputs if op is not None else ():
                source = _source_name(text)
                producer = graph.op(source) if source is not None else None
                if producer is None or source in seen:
                    continue
                seen.add(source)
                if producer.type in STACK_TYPES:
                    return source
                if producer.type in _HANDLE_FORWARDING:
                    following.append(source)
        if not following:
            return None
        pending = following
    return None


def stack_values(graph: Graph) -> Dict[str, List[Tuple[str, int]]]:
    """Pop op name -> the value edges (producer, output) pushed onto its stack; the handle
    edge of a push (when written as a data input) is left out."""
    pushed = {}  # type: Dict[str, List[Tuple[str, int]]]
    pops = {}  # type: Dict[str, str]
    for op in graph.ops:
        if op.type not in _PUSH_TYPES and op.type not in _POP_TYPES:
            continue
        stack = _stack_of(graph, op.name)
        if stack is None:
            continue
        if op.type in _POP_TYPES:
            pops[op.name] = stack
            continue
        for text in op.inputs:
            edge = split_input(text)
            if edge is not None and _stack_of_edge(graph, edge[0]) != stack:
                pushed.setdefault(stack, []).append(edge)
    return {pop: pushed[stack] for pop, stack in pops.items() if stack in pushed}


def _stack_of_edge(graph: Graph, source: str) -> Optional[str]:
    """The stack ``source`` is (or forwards the handle of), else None."""
    op = graph.op(source)
    if op is None:
        return None
    if op.type in STACK_TYPES:
        return source
    return _stack_of(graph, source) if op.type in _HANDLE_FORWARDING else None


def popped_iteration(pop_iteration: int, pushes: int) -> int:
    """The forward iteration whose push iteration ``pop_iteration`` of the gradient loop pops
    (last in, first out), of ``pushes`` forward iterations."""
    return pushes - 1 - pop_iteration


def nested_loops(graph: Graph) -> List[str]:
    """The Enter ops of loops that sit inside another loop's body: reached from an Enter by data
    edges without leaving through an Exit (one walk from every Enter at once: linear in ops)."""
    consumers = {}  # type: Dict[str, List[str]]
    for op in graph.ops:
        for text in op.inputs:
            edge = split_input(text)
            if edge is not None:
                consumers.setdefault(edge[0], []).append(op.name)
    enters = [op.name for op in graph.ops if op.type in _ENTER_TYPES]
    seen = set(enters)
    pending = list(enters)
    nested = []  # type: List[str]
    while pending:
        name = pending.pop()
        for consumer in consumers.get(name, ()):
            op = graph.op(consumer)
            if op is None or op.type in _EXIT_TYPES:
                continue
            if op.type in _ENTER_TYPES and consumer not in nested:
                nested.append(consumer)
            if consumer not in seen:
                seen.add(consumer)
                pending.append(consumer)
    return nested
