"""Which ops one ``session.run`` executes: walked once per run call, shared by its consumers.

Contract::

    index = GraphIndex(graph)                            # once per graph (edges read lazily, kept)
    walk = StepWalk(index, fetches, feed_dict)           # once per run call
    walk.key        # (fetch names, fed names): equal keys execute the same ops
    walk.ran        # {op name: op}: the ops that run
    walk.executed() # [(op, fed_only)] in topological order (ties in graph creation order)
    walk.fed        # {fed tensor name: tensor}

The rule is TensorFlow's pruning: walk back from the fetches through data and control inputs;
a fed tensor ends the walk (its producer does not run for it). An op reached only through
feeds is listed as ``fed_only`` (its fed outputs hold the fed values; it does not run).
Fetches that are no element of this graph (a fetch-conversion object, another graph's
tensor) are left out: nothing to walk. Training-step detection
(:mod:`npu_dump_hook.train.training_step`), the capture plan (:mod:`npu_dump_hook.train.capture`) and the
batch fingerprints (:mod:`npu_dump_hook.train.fingerprints`) consume the same walk.

TensorFlow objects are received, never imported (``_tf`` only for ``nest``).
"""
import heapq
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401 (type comments)

from .. import _tf

__all__ = ["GraphIndex", "StepWalk", "graph_elements"]


def graph_elements(graph: Any, structure: Any) -> List[Any]:
    """The graph elements (tensors, ops) of a fetch or feed structure; foreign leaves are left out."""
    elements = []
    for leaf in _tf.tf_v1().nest.flatten(structure, expand_composites=True):
        if leaf is None:
            continue
        try:
            elements.append(graph.as_graph_element(leaf, allow_tensor=True, allow_operation=True))
        except (TypeError, ValueError, KeyError):
            continue  # not of this graph (e.g. a fetch conversion object): nothing to walk
    return elements


class GraphIndex(object):
    """A graph's edges, op names and creation order, read once: TF's accessors build new lists
    (and, on TF 1.15, new name strings through the C API) on each call."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        #: Keyed by the op object (identity hash: no TF accessor call to find an entry).
        self._edges = {}  # type: Dict[Any, Tuple[List[Any], List[Any]]]
        self._input_names = {}  # type: Dict[Any, List[str]]
        self._names = {}  # type: Dict[Any, str]
        self._types = {}  # type: Dict[Any, str]
        self._creation = {}  # type: Dict[str, int]
        #: ``graph.version`` when the edges were last forgotten (see :meth:`forget_if_editable`).
        self._version = _version_of(graph)

    def edges(self, op: Any) -> Tuple[List[Any], List[Any]]:
        """``(input tensors, control-input ops)`` of ``op``."""
        found = self._edges.get(op)
        if found is None:
            found = self._edges[op] = (list(op.inputs), list(op.control_inputs))
        return found

    def name(self, op: Any) -> str:
        """``op.name``, read once (an op's name never changes)."""
        found = self._names.get(op)
        if found is None:
            found = self._names[op] = op.name
        return found

    def type(self, op: Any) -> str:
        """``op.type``, read once."""
        found = self._types.get(op)
        if found is None:
            found = self._types[op] = op.type
        return found

    def input_names(self, op: Any) -> List[str]:
        """The names of ``op``'s input tensors, in :meth:`edges` order."""
        found = self._input_names.get(op)
        if found is None:
            name = self.name
            found = self._input_names[op] = ["{}:{}".format(name(t.op), t.value_index) for t in self.edges(op)[0]]
        return found

    def read_all(self, ops: List[Any]) -> None:
        """Read every op's edges now (outside a training step) and note the creation order."""
        self._forget_if_changed()
        self._creation = {self.name(op): i for i, op in enumerate(ops)}
        for op in ops:
            self.edges(op)

    def forget_if_editable(self) -> None:
        """An editable graph may gain ops and edges between steps: read them again. Ops and their
        edges are made together (TF's graph builders wire an op's inputs, and those of the ops it
        closes, such as a loop's ``Merge``, while they create ops; the hook's own rewiring, the
        randomness policy and the emulator's numerics, runs in ``begin()`` before this index reads
        an edge), so an unchanged ``graph.version`` (it grows with every op created) means edges
        read since are still the graph's: kept, not read again through TF's accessors (2,000 ops:
        ~30 ms on TF 1.15)."""
        if not self.graph.finalized:
            self._forget_if_changed()

    def consumers_added(self, before: Any) -> None:
        """The ops made since ``graph.version`` was ``before`` only read existing tensors (the
        capture's dump ops): no edge read so far changed, so those stay (when read at ``before``)."""
        if before is not None and before == self._version:
            self._version = _version_of(self.graph)

    def _forget_if_changed(self) -> None:
        version = _version_of(self.graph)
        if version is None or version != self._version:
            self._edges, self._input_names, self._version = {}, {}, version

    def creation_order(self, names: Any) -> Dict[str, int]:
        if any(name not in self._creation for name in names):
            self._creation = {self.name(op): i for i, op in enumerate(self.graph.get_operations())}
        return self._creation

    def topological(self, ops: Dict[str, Any]) -> List[Any]:
        """Kahn's order over data and control edges, ties by creation; cycles (TF 1.x loops) broken by creation."""
        index = self.creation_order(ops)
        indegree = dict.fromkeys(ops, 0)
        consumers = {name: [] for name in ops}  # type: Dict[str, List[str]]
        op_name = self.name
        for name, op in ops.items():
            inputs, controls = self.edges(op)
            for producer in {op_name(t.op) for t in inputs} | {op_name(c) for c in controls}:
                if producer in ops and producer != name:
                    indegree[name] += 1
                    consumers[producer].append(name)
        ready = [(index[name], name) for name, degree in indegree.items() if degree == 0]
        heapq.heapify(ready)
        waiting = sorted((index[name], name) for name in ops)
        ordered, done, cursor = [], set(), 0  # type: List[Any], Set[str], int
        while len(ordered) < len(ops):
            if not ready:  # a cycle: release the earliest-created op still waiting
                while waiting[cursor][1] in done:
                    cursor += 1
                heapq.heappush(ready, waiting[cursor])
            _, name = heapq.heappop(ready)
            if name in done:
                continue
            done.add(name)
            ordered.append(ops[name])
            for consumer in consumers[name]:
                indegree[consumer] -= 1
                if indegree[consumer] == 0 and consumer not in done:
                    heapq.heappush(ready, (index[consumer], consumer))
        return ordered


def _version_of(graph: Any) -> Any:
    """``graph.version`` (None for a stand-in without one: edges are then always read again)."""
    return getattr(graph, "version", None)


class StepWalk(object):
    """The ops one run of ``fetches`` with ``feed_dict`` executes (see the module doc)."""

    def __init__(self, index: GraphIndex, fetches: Any, feed_dict: Any = None) -> None:
        self.index = index
        graph = index.graph
        #: ``{fed tensor name: tensor}`` (feed keys that are tensors of this graph).
        self.fed = {}  # type: Dict[str, Any]
        for key in (feed_dict or {}):
            for element in graph_elements(graph, key):
                self.fed[element.name] = element
        #: The fetches as graph elements (foreign ones left out).
        self.elements = graph_elements(graph, fetches)
        self.key = (tuple(sorted(e.name for e in self.elements)), tuple(sorted(self.fed)))
        self._ran = None  # type: Optional[Dict[str, Any]]
        self._fed_only = {}  # type: Dict[str, Any]
        self._executed = None  # type: Optional[List[Tuple[Any, bool]]]

    @property
    def ran(self) -> Dict[str, Any]:
        """``{op name: op}`` of the ops that run (walked on first use)."""
        if self._ran is None:
            self._walk()
        return self._ran  # type: ignore[return-value]

    def executed(self) -> List[Tuple[Any, bool]]:
        """``[(op, fed_only)]``: the ops that run and those only reached through feeds, in topological order."""
        if self._executed is None:
            ran = self.ran
            ops = dict(self._fed_only)
            ops.update(ran)
            name = self.index.name
            self._executed = [(op, name(op) not in ran) for op in self.index.topological(ops)]
        return self._executed

    def _walk(self) -> None:
        fed, edges, name, input_names = self.fed, self.index.edges, self.index.name, self.index.input_names
        ran = {}  # type: Dict[str, Any]
        stack = []  # type: List[Any]
        for element in self.elements:
            if element.name in fed:
                self._fed_only[element.op.name] = element.op
            else:
                stack.append(getattr(element, "op", element))
        while stack:
            op = stack.pop()
            op_name = name(op)
            if op_name in ran:
                continue
            ran[op_name] = op
            inputs, controls = edges(op)
            for tensor, tensor_name in zip(inputs, input_names(op)):
                if tensor_name in fed:
                    self._fed_only.setdefault(name(tensor.op), tensor.op)
                elif name(tensor.op) not in ran:
                    stack.append(tensor.op)
            stack.extend(control for control in controls if name(control) not in ran)
        self._ran = ran
