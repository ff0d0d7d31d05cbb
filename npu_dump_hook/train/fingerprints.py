"""State and batch fingerprints: "same start, same batch" for two runs of one model.

Every hooked run records, for its captured step (``run.json`` and ``bundle.json``, key
``fingerprints``, see docs/bundle-format.md §2.2)::

    {"algorithm": "sha256", "step": 0,
     "state": [{"name": "dense/kernel", "dtype": "float32", "shape": [4, 8], "sha256": "..."}, ...],
     "batch": [{"name": "IteratorGetNext:0", "source": "iterator", "op_type": "IteratorGetNext",
                "dtype": "float32", "shape": [16, 4], "sha256": "..."}, ...],
     "skipped": [{"name": ..., "reason": ...}]}

``sha256`` is taken over the value's bytes in C order, little-endian (string tensors: each
element as an 8-byte little-endian length then its bytes), so the digest depends on the
values, dtype and shape only, never on the machine. ``state`` lists every global variable
(sorted by name) as restored or initialised, read right before the captured step; ``batch``
every ``IteratorGetNext``/``IteratorGetNextSync``/``GetNext`` output the captured step
executes, every queue dequeue (``QueueDequeue*``) and ``py_func`` (``PyFunc``, ``EagerPyFunc``)
output it executes, and every value it is fed (``feed_dict``), sorted by name; ``source`` says
which (``iterator``, ``queue``, ``py_func``, ``feed``: :data:`~npu_dump_hook.bundle.schema.INPUT_SOURCES`).
An NPU run keeps these values for the golden run's replay (:mod:`npu_dump_hook.train.inputs`).

Two parts:

* pure hashing and comparison (:func:`array_digest`, :func:`compare`), no TensorFlow; the
  section's shape check :func:`section_problems` is the bundle format's
  (:func:`npu_dump_hook.bundle.schema.fingerprint_problems`, re-exported here);
* the session side the hook drives (:class:`StateReader`, :func:`batch_tensors`): TensorFlow
  graph and session objects are received and their methods called; nothing here imports
  TensorFlow. The batch tensors come from the step's one walk
  (:class:`~npu_dump_hook.train.walk.StepWalk`, :func:`batch_tensors_of`); on the captured step of
  a run that captures tensors the state is read in the capture's own read before the step
  (:meth:`StateReader.open`/``take``/``close``), so each variable is read once.

Cost: the state is read in a separate ``session.run`` before the step (the step's in-place
updates would otherwise race with the read of TF 1.x reference variables), in groups of at
most the capture memory budget (:data:`npu_dump_hook.train._capture_plan.DEFAULT_MEMORY_BUDGET`,
``$NPU_DUMP_HOOK_CAPTURE_BUDGET``); each group is hashed and dropped before the next is read.
The batch tensors are added to the captured step's own fetches, so nothing extra is computed.

Also importable as ``npu_dump_hook.fingerprints`` (the same module object).
"""
import hashlib
import logging
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..bundle.schema import FINGERPRINT_ALGORITHM as ALGORITHM
from ..bundle.schema import fingerprint_problems as section_problems
from ._capture_reads import budget_groups, read_values
from .walk import GraphIndex, StepWalk

__all__ = ["ALGORITHM", "BATCH_OP_TYPES", "INPUT_OP_SOURCES", "array_digest", "fingerprints_section", "StateReader",
           "batch_tensors", "batch_tensors_of", "batch_entries", "compare", "Comparison", "section_problems", "CAUSES"]

logger = logging.getLogger("npu_dump_hook.fingerprints")  # its name before it moved into train/

#: Op types whose outputs are the batch a step reads from its input pipeline (TF's iterators;
#: ``GetNext`` is the Ascend adapter's device-side form).
BATCH_OP_TYPES = frozenset(("IteratorGetNext", "IteratorGetNextSync", "GetNext"))
#: Further input ops whose outputs are a step's batch, by ``source``: queue dequeues (queue runners,
#: ``numpy_input_fn``, ``tf.train.batch``) and Python functions run inside the step.
INPUT_OP_SOURCES = dict([(t, "iterator") for t in BATCH_OP_TYPES] + [
    (t, "queue") for t in ("QueueDequeue", "QueueDequeueV2", "QueueDequeueMany", "QueueDequeueManyV2",
                           "QueueDequeueUpTo", "QueueDequeueUpToV2")] + [
    (t, "py_func") for t in ("PyFunc", "PyFuncStateless", "EagerPyFunc")])
_NO_ARRAY = frozenset(("resource", "variant"))
_HASH_CHUNK = 1 << 24

#: The likely cause of each kind of difference, as the mismatch message states it.
CAUSES = {
    "state_values": "different initial state: the NPU bundle's checkpoint was not restored (initial_state, "
                    "restore_initial_state=False) or the model was initialised differently (another seed)",
    "state_variables": "different model code: variables added, removed, renamed or reshaped",
    "batch_values": "different batch, not replayed from the NPU bundle (see the note): in-graph shuffle not "
                    "removed (randomness='strip' removes it), a different data order or data seed, other data "
                    "files, or other feed_dict values (numpy/Python shuffles: keep the NPU run's inputs within "
                    "max_input_bytes so the golden run replays them)",
    "batch_inputs": "different model code or input pipeline: the step reads other inputs, or inputs of another "
                    "dtype or shape (batch size, preprocessing)",
}


# --------------------------------------------------------------------------- hashing


def array_digest(value: Any) -> Dict[str, Any]:
    """``{"dtype", "shape", "sha256"}`` of an array value (see the module doc for the bytes hashed)."""
    # a bytes scalar as an object array: numpy's fixed-width form would drop trailing NUL bytes
    array = np.array(value, dtype=object) if isinstance(value, bytes) else np.asarray(value)
    digest = hashlib.sha256()
    if array.dtype.kind in ("O", "S", "U"):
        for item in array.reshape(-1):
            data = item if isinstance(item, bytes) else str(item).encode("utf-8")
            digest.update(struct.pack("<Q", len(data)))
            digest.update(data)
        dtype = "string"
    else:
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        for start in range(0, flat.size, _HASH_CHUNK):
            digest.update(memoryview(flat[start:start + _HASH_CHUNK]))
        dtype = array.dtype.name
    return {"dtype": dtype, "shape": [int(d) for d in array.shape], ALGORITHM: digest.hexdigest()}


def fingerprints_section(step: Optional[int], state: Optional[List[Dict[str, Any]]],
                         batch: Optional[List[Dict[str, Any]]],
                         skipped: Sequence[Mapping[str, str]] = ()) -> Dict[str, Any]:
    """The ``fingerprints`` value of run.json and bundle.json (None for a part not recorded)."""
    return {"algorithm": ALGORITHM, "step": step,
            "state": None if state is None else sorted(state, key=lambda e: e["name"]),
            "batch": None if batch is None else sorted(batch, key=lambda e: e["name"]),
            "skipped": [dict(s) for s in skipped]}


# --------------------------------------------------------------------------- session side


class StateReader(object):
    """Reads and hashes variables before a step, within a memory budget.

    ``variables`` are ``tf.Variable`` objects (fetching one gives its value, for reference and
    resource variables alike, without creating an op: the graph may be finalized).
    """

    def __init__(self, variables: Sequence[Any], memory_budget: int) -> None:
        self.variables = sorted(variables, key=lambda v: v.op.name)
        self.memory_budget = memory_budget
        #: The last read's ``(state entries, skipped)``; None before the first.
        self.last = None  # type: Optional[Tuple[List[Dict[str, Any]], List[Dict[str, str]]]]
        self._entries, self._skipped = [], []  # type: List[Dict[str, Any]], List[Dict[str, str]]

    def groups(self) -> List[List[Any]]:
        """The variables in groups whose static sizes add up to at most the budget (one at least)."""
        return budget_groups(self.variables, [_static_nbytes(v) for v in self.variables], self.memory_budget)

    def read(self, session: Any) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]]]:
        """``(state entries, skipped)``: each variable hashed, or skipped with the reason."""
        self.open()
        for group in self.groups():
            for variable, value in zip(group, read_values(session, group)):
                self.take(variable, value)
                del value
        return self.close()

    def open(self) -> None:
        """Start a read whose values :meth:`take` receives (the capture's read before the step
        calls these three, so the variables are read once: :mod:`npu_dump_hook.train._capture_reads`)."""
        self._entries, self._skipped = [], []  # type: List[Dict[str, Any]], List[Dict[str, str]]

    def take(self, variable: Any, value: Any) -> None:
        """Hash one variable's value (None: the variable had no value yet)."""
        name = variable.op.name
        if value is None:
            self._skipped.append({"name": name, "reason": "uninitialized variable: no value before the captured step"})
            return
        entry = {"name": name}
        entry.update(array_digest(value))
        self._entries.append(entry)

    def close(self) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]]]:
        """End the read: ``(state entries, skipped)``, also kept as :attr:`last`."""
        self.last = (self._entries, self._skipped)
        return self.last


def _static_nbytes(variable: Any) -> int:
    shape = variable.get_shape()
    if not shape.is_fully_defined():
        return 0
    return int(shape.num_elements()) * variable.dtype.base_dtype.size


def batch_tensors(graph: Any, fetches: Any, feed_dict: Any) -> Tuple[List[Tuple[Any, str]], List[Dict[str, str]]]:
    """The tensors that are the step's batch: ``([(tensor, source)], skipped)``.

    Walks back from ``fetches`` through data and control inputs as TensorFlow prunes (fed
    tensors end the walk) and takes every output of the :data:`INPUT_OP_SOURCES` ops reached;
    fed tensors are taken as well (fetching a fed tensor returns the fed value).
    """
    return batch_tensors_of(StepWalk(GraphIndex(graph), fetches, feed_dict))


def batch_tensors_of(walk: StepWalk) -> Tuple[List[Tuple[Any, str]], List[Dict[str, str]]]:
    """:func:`batch_tensors` of a run already walked (:class:`~npu_dump_hook.train.walk.StepWalk`)."""
    found = {}  # type: Dict[str, Tuple[Any, str]]
    for op in walk.ran.values():
        source = INPUT_OP_SOURCES.get(op.type)
        if source == "py_func" and _reads_variables(walk, op):
            continue  # a py_func inside the model computes from it: not an input
        if source is not None:
            for tensor in op.outputs:
                found[tensor.name] = (tensor, source)
    for name, tensor in walk.fed.items():
        if hasattr(tensor, "op"):
            found[name] = (tensor, "feed")
    graph = walk.index.graph
    chosen, skipped = [], []  # type: List[Tuple[Any, str]], List[Dict[str, str]]
    for name in sorted(found):
        tensor, source = found[name]
        reason = ""
        if tensor.dtype.base_dtype.name in _NO_ARRAY:
            reason = "{} tensor: no array value".format(tensor.dtype.base_dtype.name)
        elif not graph.is_fetchable(tensor):
            reason = "not fetchable in this graph"
        if reason:
            skipped.append({"name": name, "reason": reason})
        else:
            chosen.append((tensor, source))
    return chosen, skipped


_VARIABLE_OPS = frozenset(("VariableV2", "Variable", "VarHandleOp", "ReadVariableOp", "ResourceGather"))


def _reads_variables(walk: StepWalk, op: Any) -> bool:
    """True when ``op`` (run by the step) computes from a variable: walked back through the ops
    the step runs, fed tensors ending the walk."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        if current.type in _VARIABLE_OPS:
            return True
        inputs, _controls = walk.index.edges(current)
        stack.extend(t.op for t in inputs if t.name not in walk.fed and t.op.name in walk.ran)
    return False


def batch_entries(tensors: Sequence[Tuple[Any, str]], values: Sequence[Any]) -> List[Dict[str, Any]]:
    """Batch entries from the tensors :func:`batch_tensors` chose and the values the step returned."""
    entries = []
    for (tensor, source), value in zip(tensors, values):
        entry = {"name": tensor.name, "source": source, "op_type": tensor.op.type}
        entry.update(array_digest(value))
        entries.append(entry)
    return entries


# --------------------------------------------------------------------------- comparison


class Comparison(object):
    """What differs between two ``fingerprints`` sections (``expected``: the NPU bundle's)."""

    def __init__(self, state: Dict[str, List[str]], batch: Dict[str, List[str]], notes: List[str]) -> None:
        #: ``{"values", "missing", "extra", "mismatched"}``: variable names.
        self.state = state
        #: the same for the batch inputs (tensor names).
        self.batch = batch
        #: parts that could not be compared (not recorded in one of the runs).
        self.notes = notes

    @property
    def match(self) -> bool:
        return not any(self.state.values()) and not any(self.batch.values())

    def causes(self) -> List[str]:
        causes = []
        if self.state["values"]:
            causes.append(CAUSES["state_values"])
        if self.state["missing"] or self.state["extra"] or self.state["mismatched"]:
            causes.append(CAUSES["state_variables"])
        if self.batch["values"]:
            causes.append(CAUSES["batch_values"])
        if self.batch["missing"] or self.batch["extra"] or self.batch["mismatched"]:
            causes.append(CAUSES["batch_inputs"])
        return causes

    def message(self, target: str, hints: Sequence[str] = ()) -> str:
        """One sentence per differing part, naming what differs, then the likely causes."""
        parts = []
        for what, label, diff in (("initial state", "variable", self.state), ("batch", "input", self.batch)):
            for kind, words in (("values", "differ in value"), ("mismatched", "differ in dtype or shape"),
                                ("missing", "are missing here (in the NPU bundle only)"),
                                ("extra", "are extra here (not in the NPU bundle)")):
                if diff[kind]:
                    parts.append("{}: {} {}(s) {}: {}".format(what, len(diff[kind]), label, words,
                                                              _names(diff[kind])))
        text = "fingerprints differ from NPU bundle {}: {}".format(target, "; ".join(parts) or "nothing")
        causes = self.causes()
        if causes:
            text += ". Likely cause: " + "; or ".join(causes)
        if hints:
            text += ". Note: " + "; ".join(hints)
        return text

    def as_dict(self) -> Dict[str, Any]:
        return {"match": self.match, "state": self.state, "batch": self.batch, "notes": self.notes,
                "causes": self.causes()}


def _names(names: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(names[:limit])
    return shown + (" ... ({} more)".format(len(names) - limit) if len(names) > limit else "")


def compare(expected: Optional[Mapping[str, Any]], actual: Optional[Mapping[str, Any]]) -> Comparison:
    """Compare two ``fingerprints`` sections part by part; a part missing from either is a note."""
    notes = []  # type: List[str]
    parts = {}
    for part in ("state", "batch"):
        left = (expected or {}).get(part)
        right = (actual or {}).get(part)
        if left is None or right is None:
            notes.append("{} not compared: not recorded in the {}".format(
                part, "NPU bundle" if left is None else "this run"))
            parts[part] = _diff({}, {})
        else:
            parts[part] = _diff({e["name"]: e for e in left}, {e["name"]: e for e in right})
    return Comparison(parts["state"], parts["batch"], notes)


def _diff(left: Mapping[str, Mapping[str, Any]], right: Mapping[str, Mapping[str, Any]]) -> Dict[str, List[str]]:
    result = {"values": [], "missing": [], "extra": [], "mismatched": []}  # type: Dict[str, List[str]]
    for name in sorted(set(left) | set(right)):
        if name not in right:
            result["missing"].append(name)
        elif name not in left:
            result["extra"].append(name)
        elif (left[name].get("dtype"), list(left[name].get("shape") or [])) != (
                right[name].get("dtype"), list(right[name].get("shape") or [])):
            result["mismatched"].append(name)
        elif left[name].get(ALGORITHM) != right[name].get(ALGORITHM):
            result["values"].append(name)
    return result
