"""Which ``session.run`` calls are *the* training step (the iteration a dump must capture).

The rule: a run is a training step when the ops it executes (walked back from its fetches
through data and control inputs; fed tensors end the walk, as TensorFlow prunes) include an
op that writes a trainable variable or the global step:

* an optimizer update: ``Apply*``, ``ResourceApply*``, ``SparseApply*``, ``ResourceSparseApply*``
  (every ``tf.compat.v1.train`` optimizer, Keras optimizers in graph mode);
* an in-place write on a trainable variable or the global step: ``Assign``, ``AssignAdd``,
  ``AssignSub`` and their ``*VariableOp`` forms, ``ScatterAdd``/``ScatterSub``/``ScatterUpdate``
  and their resource forms (hand-written SGD, ``global_step.assign_add``),

except a variable's own initializer, a Saver's restore (an ``Assign`` fed by ``RestoreV2``) and a
load: an overwrite (``Assign``, ``AssignVariableOp``, ``ScatterUpdate`` and its resource form)
whose value is a placeholder or a constant, as Keras ``set_weights``/``load_weights`` and
``w.assign(array)`` write it (the value does not come from the model). So ``sess.run(init)``,
``sess.run(cost)`` before training, evaluation fetches, metric updates and the checkpoint-saving
session of ``model_to_estimator`` (``set_weights``) are not counted; they are logged as skipped
with what they ran.

Pure graph analysis over TensorFlow objects; it imports no TensorFlow itself. What a run
executes is a :class:`~npu_dump_hook.train.walk.StepWalk` (the one walk a hook's captured step
shares with the capture plan and the batch fingerprints): :meth:`TrainingStepDetector.verdict_for`
takes one, :meth:`TrainingStepDetector.verdict` makes one.

Also importable as ``npu_dump_hook.training_step`` (the same module object).
"""
import re
from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401 (type comments)

from .. import _tf
from .walk import GraphIndex, StepWalk

__all__ = ["TrainingStepDetector", "StepVerdict", "OPTIMIZER_UPDATE", "is_load"]

#: Op types of optimizer updates.
OPTIMIZER_UPDATE = re.compile(r"^(?:Resource)?(?:Sparse)?Apply[A-Z]")
_WRITE_TYPES = frozenset((
    "Assign", "AssignAdd", "AssignSub", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "ScatterAdd", "ScatterSub", "ScatterUpdate", "ResourceScatterAdd", "ResourceScatterSub",
    "ResourceScatterUpdate",
))
_RESTORE_TYPES = frozenset(("RestoreV2", "Restore", "RestoreSlice"))
#: Writes that replace the value (not add to it), and the value sources that make them a load.
_OVERWRITE_TYPES = frozenset(("Assign", "AssignVariableOp", "ScatterUpdate", "ResourceScatterUpdate"))
_LOADED_VALUE_TYPES = frozenset(("Placeholder", "PlaceholderV2", "PlaceholderWithDefault", "Const"))
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

    def __init__(self, graph: Any, index: Optional[GraphIndex] = None) -> None:
        self.graph = graph
        #: The graph's edges, read once (a hook shares it with its capture).
        self.index = index if index is not None else GraphIndex(graph)
        self._cache = {}  # type: Dict[Tuple[Tuple[str, ...], Tuple[str, ...]], StepVerdict]
        self._targets = None  # type: Optional[Set[str]]
        self._initializers = None  # type: Optional[Set[str]]

    def verdict(self, fetches: Any, feed_dict: Any = None) -> StepVerdict:
        """The verdict for a run of ``fetches`` with ``feed_dict`` (both as ``session.run`` takes them)."""
        return self.verdict_for(self.walk(fetches, feed_dict))

    def walk(self, fetches: Any, feed_dict: Any = None) -> StepWalk:
        """The :class:`StepWalk` of one run (walked only when its ops are asked for)."""
        self.index.forget_if_editable()  # an editable graph may gain edges between runs
        return StepWalk(self.index, fetches, feed_dict)

    def verdict_for(self, walk: StepWalk) -> StepVerdict:
        """The verdict for the run ``walk`` describes; the ops are walked for a new fetch/feed set only."""
        if walk.key not in self._cache:
            writes = [name for name, op in walk.ran.items() if self._is_update(op)]
            self._cache[walk.key] = StepVerdict(bool(writes), sorted(writes)[:_EXAMPLES], list(walk.key[0]))
        return self._cache[walk.key]

    def update_ops(self, ops: Any) -> List[Any]:
        """The ops among ``ops`` that update a trainable variable or the global step (the rule above)."""
        return [op for op in ops if self._is_update(op)]

    # -- which ops update the model ---------------------------------------------------------
    def _is_update(self, op: Any) -> bool:
        op_type = self.index.type(op)  # read once per op (TF 1.15's accessor goes through the C API)
        if OPTIMIZER_UPDATE.match(op_type):
            return True
        if op_type not in _WRITE_TYPES or not op.inputs:
            return False
        if op.name in self._initializer_ops():
            return False
        if len(op.inputs) > 1 and _source_op(op.inputs[-1]).type in _RESTORE_TYPES:
            return False  # Saver restore (TF 2 puts an Identity between RestoreV2 and the assign)
        if is_load(op):
            return False  # set_weights / load: a fed or constant value, not computed by the model
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


def is_load(op: Any) -> bool:
    """Whether ``op`` overwrites a variable with a fed or constant value (Keras ``set_weights``,
    ``load_weights``, ``w.assign(array)``): a load, neither training nor inference."""
    return op.type in _OVERWRITE_TYPES and len(op.inputs) > 1 and \
        _source_op(op.inputs[-1]).type in _LOADED_VALUE_TYPES


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
