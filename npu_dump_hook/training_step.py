"""Which ``session.run`` calls are *the* training step (the iteration a dump must capture).

The rule: a run is a training step when the ops it executes (walked back from its fetches
through data and control inputs; fed tensors end the walk, as TensorFlow prunes) include an
op that writes a trainable variable or the global step:

* an optimizer update: ``Apply*``, ``ResourceApply*``, ``SparseApply*``, ``ResourceSparseApply*``
  (every ``tf.compat.v1.train`` optimizer, Keras optimizers in graph mode);
* an in-place write on a trainable variable or the global step: ``Assign``, ``AssignAdd``,
  ``AssignSub`` and their ``*VariableOp`` forms, ``ScatterAdd``/``ScatterSub``/``ScatterUpdate``
  and their resource forms (hand-written SGD, ``global_step.assign_add``),

except a variable's own initializer and a Saver's restore (an ``Assign`` fed by ``RestoreV2``).
So ``sess.run(init)``, ``sess.run(cost)`` before training, evaluation fetches and metric
updates are not counted; they are logged as skipped with what they ran.

Pure graph analysis over TensorFlow objects; it imports no TensorFlow itself.
"""
import re
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401 (type comments)

from . import _tf

__all__ = ["TrainingStepDetector", "StepVerdict", "OPTIMIZER_UPDATE"]

#: Op types of optimizer updates.
OPTIMIZER_UPDATE = re.compile(r"^(?:Resource)?(?:Sparse)?Apply[A-Z]")
_WRITE_TYPES = frozenset((
    "Assign", "AssignAdd", "AssignSub", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "ScatterAdd", "ScatterSub", "ScatterUpdate", "ResourceScatterAdd", "ResourceScatterSub",
    "ResourceScatterUpdate",
))
_RESTORE_TYPES = frozenset(("RestoreV2", "Restore", "RestoreSlice"))
_PASS_THROUGH = frozenset(("Identity", "ReadVariableOp"))
_EXAMPLES = 3


class StepVerdict(object):
    """Whether one run is a training step, and the evidence (op names) either way."""

    def __init__(self, training: bool, writes: List[str], fetches: List[str]) -> None:
        self.training = training
        #: Update ops the run executes (first few), the reason it counts.
        self.writes = writes
        #: The run's fetches as names, for the record and the log line.
        self.fetches = fetches

    def as_dict(self) -> Dict[str, Any]:
        return {"training": self.training, "fetches": self.fetches, "updates": self.writes}


class TrainingStepDetector(object):
    """Tells training steps from other runs of one graph; verdicts are cached per fetch/feed set."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self._cache = {}  # type: Dict[Tuple[Tuple[str, ...], Tuple[str, ...]], StepVerdict]
        self._targets = None  # type: Optional[Set[str]]
        self._initializers = None  # type: Optional[Set[str]]

    def verdict(self, fetches: Any, feed_dict: Any = None) -> StepVerdict:
        """The verdict for a run of ``fetches`` with ``feed_dict`` (both as ``session.run`` takes them)."""
        elements = self._elements(fetches)
        fed = self._fed(feed_dict)
        key = (tuple(sorted(e.name for e in elements)), tuple(sorted(fed)))
        if key not in self._cache:
            writes = [op.name for op in self._executed(elements, fed) if self._is_update(op)]
            self._cache[key] = StepVerdict(bool(writes), sorted(writes)[:_EXAMPLES], list(key[0]))
        return self._cache[key]

    # -- what a run executes -------------------------------------------------------------
    def _elements(self, fetches: Any) -> List[Any]:
        elements = []
        for leaf in _tf.tf_v1().nest.flatten(fetches, expand_composites=True):
            if leaf is None:
                continue
            try:
                elements.append(self.graph.as_graph_element(leaf, allow_tensor=True, allow_operation=True))
            except (TypeError, ValueError, KeyError):
                continue  # not of this graph (e.g. a fetch conversion object): nothing to walk
        return elements

    def _fed(self, feed_dict: Any) -> Set[str]:
        fed = set()  # type: Set[str]
        for key in (feed_dict or {}):
            for element in self._elements(key):
                fed.add(element.name)
        return fed

    @staticmethod
    def _executed(elements: List[Any], fed: Set[str]) -> List[Any]:
        seen = {}  # type: Dict[str, Any]
        stack = [getattr(element, "op", element) for element in elements if element.name not in fed]
        while stack:
            op = stack.pop()
            if op.name in seen:
                continue
            seen[op.name] = op
            stack.extend(t.op for t in op.inputs if t.name not in fed and t.op.name not in seen)
            stack.extend(c for c in op.control_inputs if c.name not in seen)
        return list(seen.values())

    # -- which ops update the model ---------------------------------------------------------
    def _is_update(self, op: Any) -> bool:
        if OPTIMIZER_UPDATE.match(op.type):
            return True
        if op.type not in _WRITE_TYPES or not op.inputs:
            return False
        if op.name in self._initializer_ops():
            return False
        if len(op.inputs) > 1 and _source_op(op.inputs[-1]).type in _RESTORE_TYPES:
            return False  # Saver restore (TF 2 puts an Identity between RestoreV2 and the assign)
        return _variable_op(op.inputs[0]) in self._written_variables()

    def _written_variables(self) -> Set[str]:
        """Names of the ops holding trainable variables and the global step."""
        if self._targets is None:
            v1 = _tf.tf_v1()
            with self.graph.as_default():
                variables = list(v1.trainable_variables())
                step = v1.train.get_global_step(self.graph)
            if step is not None:
                variables.append(step)
            self._targets = {_variable_op(_handle(v)) for v in variables}
        return self._targets

    def _initializer_ops(self) -> Set[str]:
        if self._initializers is None:
            v1 = _tf.tf_v1()
            with self.graph.as_default():
                variables = list(v1.global_variables()) + list(v1.local_variables())
            self._initializers = {v.initializer.name for v in variables if getattr(v, "initializer", None) is not None}
        return self._initializers


def _handle(variable: Any) -> Any:
    """The tensor a variable's writes take as their first input (ref or resource handle)."""
    handle = getattr(variable, "handle", None)
    if handle is not None and handle.dtype.base_dtype.name == "resource":
        return handle
    return variable.op.outputs[0]


def _source_op(tensor: Any) -> Any:
    """The op behind ``tensor``, through Identity / ReadVariableOp."""
    op = tensor.op
    while op.type in _PASS_THROUGH and op.inputs:
        op = op.inputs[0].op
    return op


def _variable_op(tensor: Any) -> str:
    """The name of the op that holds the variable behind ``tensor``."""
    return _source_op(tensor).name
