"""Which ``session.run`` call is an online-inference iteration (``mode="infer"``; ``"auto"`` in a
script that never trains).

The rule, over the ops a run executes (its :class:`~npu_dump_hook.train.walk.StepWalk`): a run is
an inference iteration when it

* reads an input batch: a fed tensor (``feed_dict``; a bool flag such as ``is_training`` alone
  is no batch), an ``IteratorGetNext``/``IteratorGetNextSync``/``GetNext`` op or a queue dequeue, and
* executes the model: it reads a variable (``VariableV2``, ``VarHandleOp``: a restored checkpoint,
  SavedModel variables) or a weight constant (a floating ``Const`` of more than one element: a
  frozen ``GraphDef`` carries its weights that way),

and is no set-up run: a variable's initializer, a table initializer, a Saver restore
(``RestoreV2``), a load (a variable overwritten with a fed or constant value: Keras
``set_weights``), ``string_handle`` or an iterator's initializer. A run on constants only (a
warm-up) reads no input and is skipped too. Skipped runs are logged and counted as training's
skipped runs are (:mod:`npu_dump_hook.train.steps`).

Which rule ``mode="auto"`` takes (:meth:`ModeChoice.decide`, :func:`script_trains`): the training
rule once a run updates a trainable variable, or when the script built such an update into the
graph (an optimizer: a training script's ``sess.run(cost, feed)`` before training, or its
evaluation right after a restore, is then no inference iteration: the training step that follows
is dumped); inference at the first run that is an inference iteration on a graph the script built
no update into. Updates that came with a loaded model -- a SavedModel (``loader.load``), an
``import_meta_graph`` -- do not count: a SavedModel keeps its optimizer, yet its script only
infers. So the wrong run is never dumped: the choice is made before the run it counts. The one
case it gets wrong: a script that resumes training from an imported meta graph
(``import_meta_graph``, no Python-built optimizer) and runs a fed evaluation before its first
training step is taken for inference: give it ``mode="train"``.

Pure graph analysis over TensorFlow objects; it imports no TensorFlow itself.
"""
from typing import Any, Dict, List, Optional, Set  # noqa: F401 (type comments)

from .. import _tf
from .fingerprints import BATCH_OP_TYPES
from .training_step import is_load
from .walk import StepWalk

__all__ = ["InferenceDetector", "InferenceVerdict", "ModeChoice", "script_trains", "INPUT_OP_TYPES",
           "SETUP_OP_TYPES"]

#: Ops whose outputs are an input batch (iterators, the adapter's GetNext, queue dequeues).
INPUT_OP_TYPES = BATCH_OP_TYPES | frozenset((
    "QueueDequeue", "QueueDequeueV2", "QueueDequeueMany", "QueueDequeueManyV2", "QueueDequeueUpTo",
    "QueueDequeueUpToV2",
))
#: Ops that hold a model variable.
VARIABLE_OP_TYPES = frozenset(("VariableV2", "Variable", "VarHandleOp"))
#: Ops that make a run a set-up run (restore, table and iterator initializers, string_handle).
SETUP_OP_TYPES = frozenset((
    "RestoreV2", "Restore", "RestoreSlice", "IteratorToStringHandle", "MakeIterator", "InitializeTable",
    "InitializeTableV2", "InitializeTableFromTextFile", "InitializeTableFromTextFileV2", "LookupTableImportV2",
))
_RESTORE_TYPES = frozenset(("RestoreV2", "Restore", "RestoreSlice"))
_EXAMPLES = 3


class InferenceVerdict(object):
    """Whether one run is an inference iteration, and why (op names either way)."""

    def __init__(self, iteration: bool, reason: str, inputs: List[str], model: List[str],
                 fetches: List[str], restore: bool = False) -> None:
        self.iteration = iteration
        #: The run restores variables from a checkpoint (a Saver restore, a SavedModel load).
        self.restore = restore
        #: Why not (empty for an iteration): what the log line says.
        self.reason = reason
        #: The input tensors or ops the run reads (first few).
        self.inputs = inputs
        #: Variables or weight constants it reads (first few).
        self.model = model
        self.fetches = fetches

    def as_dict(self) -> Dict[str, Any]:
        return {"inference": self.iteration, "fetches": self.fetches, "inputs": self.inputs, "model": self.model}


class InferenceDetector(object):
    """Tells inference iterations from other runs of one graph; verdicts cached per fetch/feed set."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self._cache = {}  # type: Dict[Any, InferenceVerdict]
        self._initializers = None  # type: Optional[Set[str]]

    def verdict_for(self, walk: StepWalk) -> InferenceVerdict:
        if walk.key not in self._cache:
            self._cache[walk.key] = self._judge(walk)
        return self._cache[walk.key]

    def _judge(self, walk: StepWalk) -> InferenceVerdict:
        fetches = list(walk.key[0])
        ran = walk.ran
        setup = sorted(name for name, op in ran.items()
                       if op.type in SETUP_OP_TYPES or name in self._initializer_ops() or is_load(op))
        inputs = sorted(name for name, tensor in walk.fed.items() if _batch_feed(tensor))
        inputs += sorted(name for name, op in ran.items() if op.type in INPUT_OP_TYPES)
        model = sorted(name for name, op in ran.items() if op.type in VARIABLE_OP_TYPES or _weight_constant(op))
        if setup:
            reason = "a set-up run ({})".format(", ".join(setup[:_EXAMPLES]))
        elif not inputs:
            reason = "it reads no input batch (no feed, iterator or queue)"
        elif not model:
            reason = "it reads no model variable or weight constant"
        else:
            reason = ""
        restore = any(op.type in _RESTORE_TYPES for op in ran.values())
        return InferenceVerdict(not reason, reason, inputs[:_EXAMPLES], model[:_EXAMPLES], fetches, restore)

    def _initializer_ops(self) -> Set[str]:
        if self._initializers is None:
            initializers = set()  # type: Set[str]
            for key in ("variables", "local_variables"):
                for variable in self.graph.get_collection(key):
                    op = getattr(variable, "initializer", None)
                    if op is not None:
                        initializers.add(op.name)
            for op in self.graph.get_collection("table_initializer"):
                initializers.add(getattr(op, "name", ""))
            self._initializers = initializers
        return self._initializers


class ModeChoice(object):
    """``mode`` (``auto``/``train``/``infer``) resolved to the rule that counts runs (see the module doc)."""

    def __init__(self, mode: str) -> None:
        self.requested = mode
        #: ``"train"`` or ``"infer"`` once decided; None before (auto, no run decided yet).
        self.chosen = mode if mode != "auto" else None  # type: Optional[str]

    def decide(self, training_run: bool, inference_run: bool, graph_trains: Any) -> Optional[str]:
        """The rule for this run, deciding ``auto`` at its first training or inference run;
        ``graph_trains()`` tells whether the script built a training update into the graph
        (:func:`script_trains`: a loaded SavedModel's optimizer does not count)."""
        if self.chosen is None:
            if training_run:
                self.chosen = "train"
            elif inference_run:
                self.chosen = "train" if graph_trains() else "infer"
        return self.chosen

    @property
    def recorded(self) -> str:
        """What run.json and bundle.json say (``train`` when nothing decided)."""
        return self.chosen or "train"


def script_trains(detector: Any) -> bool:
    """Whether the graph of ``detector`` (a TrainingStepDetector) holds a training update the
    script built (an optimizer, ``global_step.assign_add``); updates imported with a loaded model
    (a SavedModel, a meta graph: :func:`npu_dump_hook._tf.op_was_imported`) do not count."""
    return any(not _tf.op_was_imported(op) for op in detector.update_ops(detector.graph.get_operations()))


def _batch_feed(tensor: Any) -> bool:
    """A fed tensor that can be a batch (a bool scalar such as ``is_training`` is a switch)."""
    dtype = getattr(tensor, "dtype", None)
    return dtype is not None and dtype.base_dtype.name != "bool"


def _weight_constant(op: Any) -> bool:
    """A floating constant of more than one element (a frozen graph's weights)."""
    if op.type != "Const" or not op.outputs:
        return False
    tensor = op.outputs[0]
    if not tensor.dtype.base_dtype.is_floating:
        return False
    shape = tensor.shape
    return shape.is_fully_defined() and shape.num_elements() > 1
