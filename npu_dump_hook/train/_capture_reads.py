"""Variable values the capture reads outside the captured step's own work, within the memory budget.

Why (see :mod:`npu_dump_hook.train.capture`): a TF 1.x reference variable's output and its
``w/read`` alias the buffer the step's ``Apply*``/``Assign*`` ops update in place, and an in-place
update's variable inputs are recorded as the values before the step and its outputs as the
values after it. Those values are read by ``session.run`` calls of the variables alone (no other
op runs), in groups whose static sizes add up to at most the memory budget, each value written
to a scratch ``.npy`` at once; the last group read before the step is written by a worker thread
while the step runs when it fits the budget beside the step's fetched tensors (``spare``).

Contract::

    reads = VariableReads(graph, scratch_root, memory_budget)   # graph editable: handle readers made
    before, updates = reads.plan(executed, fed, edges, names)   # run_args: what the step reads / updates
    snapshots = reads.before(session, before, also=state, spare=n)  # run_args: values before the step
    reads.warm(session)                                         # optional, at session creation (see warm)
    reads.written()                                             # finish: their scratch files are complete
    updated = reads.after(session, updates)                     # finish: values after the step

``also`` is another reader of the same moment (the state fingerprints,
:class:`npu_dump_hook.train.fingerprints.StateReader`: ``variables``, ``open()``, ``take(variable,
value)``, ``close()``): its variables join the same ``session.run`` calls, so each variable is
read once before the captured step. A variable is fetched once per read however many of its
tensors or readers ask for it. The read after the step repeats the fetch lists of the read
before it when they cover the updated variables, so TensorFlow reuses the executor it built.
"""
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple  # noqa: F401 (type comments)

from .. import _tf
from ..errors import BackendError
from ..formats.npy import write_npy
from ._capture_plan import (WRITE_SCOPE, as_stored_array, is_update_type, needs_handle_reader, reference_variable,
                            static_nbytes, variable_handle)

__all__ = ["VariableReads", "read_values", "budget_groups", "worker", "UNINITIALIZED_BEFORE"]

UNINITIALIZED_BEFORE = "uninitialized variable: no value before this step"


def read_values(session: Any, elements: Sequence[Any]) -> List[Any]:
    """The values of ``elements`` in one ``session.run``; None for a variable without a value yet."""
    errors = _tf.tf_v1().errors
    try:
        return list(session.run(list(elements)))
    except errors.FailedPreconditionError:
        pass  # some are uninitialized: read one by one to tell which
    values = []  # type: List[Any]
    for element in elements:
        try:
            values.append(session.run(element))
        except errors.FailedPreconditionError:
            values.append(None)
    return values


def budget_groups(items: Sequence[Any], sizes: Sequence[int], budget: int) -> List[List[Any]]:
    """``items`` in order, in groups whose ``sizes`` add up to at most ``budget`` (one item at least)."""
    groups, group, total = [], [], 0  # type: List[List[Any]], List[Any], int
    for item, size in zip(items, sizes):
        if group and total + size > budget:
            groups.append(group)
            group, total = [], 0
        group.append(item)
        total += size
    if group:
        groups.append(group)
    return groups


def make_handle_readers(graph: Any, ops: Optional[List[Any]] = None) -> Dict[str, Any]:
    """One ``ReadVariableOp`` per resource variable an op updates in place, made while the graph is
    editable (``{handle tensor name: reader output}``); run only by the reads before and after the
    step. ``ops``: only among these (those an editable graph gained since), else the whole graph."""
    ops = graph.get_operations() if ops is None else ops
    handles = [op for op in ops if op.type == "VarHandleOp" and needs_handle_reader(op)]
    readers = {}  # type: Dict[str, Any]
    if not handles:
        return readers
    raw_ops = _tf.tf_v1().raw_ops
    with graph.as_default(), graph.control_dependencies(None), graph.name_scope(WRITE_SCOPE + "/"):
        for handle_op in handles:
            with graph.device(handle_op.device):
                readers[handle_op.outputs[0].name] = raw_ops.ReadVariableOp(
                    resource=handle_op.outputs[0], dtype=handle_op.get_attr("dtype"), name="read")
    return readers


class _Fetch(object):
    """One variable read: the element fetched, the variable's holder op, and who wants the value."""

    def __init__(self, element: Any, holder: str) -> None:
        self.element = element
        self.holder = holder
        self.stored_as = element  # the tensor whose dtype the .npy keeps
        self.keys = []  # type: List[Any]
        self.variable = None  # type: Any   the ``also`` reader's variable


class VariableReads(object):
    """Reads of variable values before and after the captured step (see the module doc)."""

    def __init__(self, graph: Any, scratch_root: str, memory_budget: int) -> None:
        self.scratch_root = scratch_root
        self.memory_budget = memory_budget
        self._graph = graph
        self._readers = make_handle_readers(graph)
        self._warmed = None  # type: Optional[List[Tuple[str, Any]]]   (holder, element) read by warm()
        self._files = 0
        self._last_groups = []  # type: List[List[_Fetch]]
        self._writing = None  # type: Any   the last group's scratch writes, going on during the step

    def add_readers(self, graph: Any, ops: List[Any]) -> None:
        """Readers for the resource variables among ``ops``, which the graph gained after the plan."""
        self._readers.update(make_handle_readers(graph, ops))

    def plan(self, executed: List[Tuple[Any, bool]], fed: Any, edges: Any,
             input_names: Any = None) -> Tuple[list, list]:
        """``(before, updates)``: the resource handles the step's ops take, each as ``(handle, reader)``,
        and the executed in-place updates as ``(op, [(variable input name, value tensor)])``.
        ``input_names(op)``: the names of ``edges(op)[0]`` when the caller has them read already."""
        updates = []  # type: List[Tuple[Any, List[Tuple[str, Any]]]]
        handle_reads = {}  # type: Dict[str, Tuple[Any, Any]]
        may_hold = {}  # type: Dict[Any, bool]   per TF dtype: a resource handle or a reference (few are)
        for op, fed_only in executed:
            if fed_only:
                continue
            variables = []  # type: List[Tuple[str, Any]]
            inputs = edges(op)[0]
            names = input_names(op) if input_names is not None else [tensor.name for tensor in inputs]
            for tensor, name in zip(inputs, names):
                dtype = tensor.dtype
                holds = may_hold.get(dtype)
                if holds is None:
                    holds = may_hold[dtype] = dtype.base_dtype.name == "resource" or dtype != dtype.base_dtype
                value = None if not holds or name in fed else self._value_of_variable_input(tensor)
                if value is None:
                    continue
                variables.append((name, value))
                if tensor.dtype.base_dtype.name == "resource":
                    handle = variable_handle(tensor).outputs[0]
                    handle_reads.setdefault(handle.name, (handle, value))
            if variables and is_update_type(op.type):
                updates.append((op, variables))
        return list(handle_reads.values()), updates

    def _value_of_variable_input(self, tensor: Any) -> Any:
        """What a separate ``session.run`` fetches for the variable behind an update op's input: the
        ``VariableV2`` reference, or the reader made for a resource handle; else None."""
        if tensor.dtype.base_dtype.name == "resource":
            handle = variable_handle(tensor)
            return self._readers.get(handle.outputs[0].name) if handle is not None else None
        if tensor.dtype != tensor.dtype.base_dtype:
            return reference_variable(tensor)
        return None

    def before(self, session: Any, reads: List[Tuple[Any, Any]], also: Any = None,
               spare: int = 0) -> Dict[str, Any]:
        """``{tensor name: (scratch file, dtype, shape) or reason}`` for each ``(tensor, value tensor)``.

        The last group's scratch files are written by a thread while the step runs when that group
        fits in ``spare`` bytes (what the budget leaves beside the step's fetched tensors);
        :meth:`written` waits for them.
        """
        fetches = {}  # type: Dict[str, _Fetch]
        if also is not None:
            for variable in also.variables:
                fetches.setdefault(variable.op.name, _Fetch(variable, variable.op.name)).variable = variable
        for tensor, value in reads:
            fetch = fetches.setdefault(_holder(value), _Fetch(value, _holder(value)))
            fetch.keys.append(tensor.name)
            fetch.stored_as = value
        if also is not None:
            also.open()
        warmed = self._as_warmed(fetches)
        snapshots = self._read(session, warmed or list(fetches.values()), "v", also, spare=spare,
                               one_group=warmed is not None)
        if also is not None:
            also.close()
        return snapshots

    def warm(self, session: Any) -> bool:
        """Read, once, every variable a captured step may need read before it (each reference
        variable and each resource variable an op updates in place), values dropped: TensorFlow
        builds that fetch list's executor now, at session creation, and :meth:`before` and
        :meth:`after` reuse it by reading the same list whenever it holds what the step needs (a
        separate read's executor would otherwise be built inside the captured step, since the
        session has never run that fetch list). Only when the list fits the memory budget as one
        read and every variable has a value; False (and nothing kept) otherwise.
        """
        pairs = {}  # type: Dict[str, Any]
        for value in self._variable_values():
            pairs.setdefault(_holder(value), value)
        elements = list(pairs.values())
        if not elements or sum(static_nbytes(element) or 0 for element in elements) > self.memory_budget:
            return False
        try:
            session.run(elements)
        except _tf.tf_v1().errors.OpError:
            return False  # e.g. a variable not initialized yet: the step's own read list is used
        self._warmed = list(pairs.items())
        return True

    def _variable_values(self) -> List[Any]:
        """What a read fetches for each variable of the graph it may read: the handle readers and the
        ``VariableV2`` reference outputs (an op without inputs that :func:`reference_variable` names)."""
        values = list(self._readers.values())
        for op in self._graph.get_operations():
            if not op.inputs and op.outputs:
                variable = reference_variable(op.outputs[0])
                if variable is not None:
                    values.append(variable)
        return values

    def _as_warmed(self, fetches: Dict[str, _Fetch]) -> Optional[List[_Fetch]]:
        """``fetches`` in the order :meth:`warm` read them, the other warmed variables added (read, not
        kept), when the warmed list fetches every one of them by the same element; else None."""
        warmed = self._warmed
        if not warmed or not fetches:
            return None
        elements = dict(warmed)
        for holder, fetch in fetches.items():
            element = elements.get(holder)
            if element is None or getattr(fetch.element, "name", None) != element.name:
                return None
        return [fetches.get(holder) or _Fetch(element, holder) for holder, element in warmed]

    def written(self) -> None:
        """Wait for the scratch files :meth:`before` left to its thread (re-raises its error)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def after(self, session: Any, updates: List[Tuple[Any, List[Tuple[str, Any]]]]) -> Dict[str, List[Any]]:
        """The values of the variables each update op changed, read after the step:
        ``{op name: [(scratch file, dtype, shape) or reason, ...]}`` in the op's variable order."""
        wanted = [value for _, variables in updates for _, value in variables]
        if not wanted:
            return {}
        if session is None:
            raise BackendError("TensorCapture.finish(): no session from run_args() to read the updated variables")
        fetches = self._fetches_after(wanted)
        try:
            values = self._read(session, fetches, "u", None, reuse=True)
        except _tf.tf_v1().errors.OpError as exc:
            raise BackendError("TensorCapture.finish(): reading the variables the step updated failed: {}".format(
                exc.message))
        result, position = {}, 0  # type: Dict[str, List[Any]], int
        for op, variables in updates:
            result[op.name] = [values[position + k] for k in range(len(variables))]
            position += len(variables)
        return result

    def _fetches_after(self, wanted: List[Any]) -> List[_Fetch]:
        """One fetch per variable, the positions in ``wanted`` as keys; the last read's groups when
        they hold every one (same fetch lists: TensorFlow reuses the executor it built)."""
        fresh = {}  # type: Dict[str, _Fetch]
        for position, value in enumerate(wanted):
            fetch = fresh.setdefault(_holder(value), _Fetch(value, _holder(value)))
            fetch.keys.append(position)
        known = {fetch.holder for group in self._last_groups for fetch in group}
        if not known or any(holder not in known for holder in fresh):
            self._last_groups = []
            return list(fresh.values())
        for group in self._last_groups:
            for fetch in group:
                mine = fresh.get(fetch.holder)
                fetch.variable = None
                fetch.keys = mine.keys if mine is not None else []
                fetch.stored_as = mine.stored_as if mine is not None else fetch.stored_as
        return [fetch for group in self._last_groups for fetch in group]

    def _read(self, session: Any, fetches: List[_Fetch], prefix: str, also: Any,
              reuse: bool = False, spare: int = 0, one_group: bool = False) -> Dict[Any, Any]:
        """Read ``fetches`` group by group (``one_group``: in one read, as :meth:`warm` checked they
        fit); each value goes to ``also`` and to one scratch file per key (the last group's from a
        thread when its static size fits in ``spare`` bytes)."""
        self.written()
        snapshots = {}  # type: Dict[Any, Any]
        if prefix == "v":
            self._last_groups = []
        if not fetches:
            return snapshots
        os.makedirs(self.scratch_root, exist_ok=True)
        if reuse and self._last_groups:
            groups = self._last_groups
        elif one_group:
            groups = [fetches]
        else:
            groups = budget_groups(fetches, [static_nbytes(f.element) or 0 for f in fetches], self.memory_budget)
        self._last_groups = groups if prefix == "v" else []
        for number, group in enumerate(groups):
            if reuse and not any(f.keys for f in group):
                continue  # no updated variable in this group
            jobs = []  # type: List[Tuple[Any, str]]
            for fetch, value in zip(group, read_values(session, [f.element for f in group])):
                if fetch.variable is not None and also is not None:
                    also.take(fetch.variable, value)
                for key in fetch.keys:
                    snapshots[key] = UNINITIALIZED_BEFORE if value is None else self._scratch(value, fetch, prefix,
                                                                                              jobs)
                del value
            last = number == len(groups) - 1
            if last and sum(static_nbytes(f.element) or spare + 1 for f in group) <= spare:
                self._writing = worker("write").submit(_write_all, jobs)
            else:
                _write_all(jobs)
        return snapshots

    def _scratch(self, value: Any, fetch: _Fetch, prefix: str,
                 jobs: List[Tuple[Any, str]]) -> Tuple[str, str, Tuple[int, ...]]:
        """The scratch file of one value: named and described now, its write queued in ``jobs``."""
        path = os.path.join(self.scratch_root, "{}{}.npy".format(prefix, self._files))
        self._files += 1
        array = as_stored_array(value, fetch.stored_as)
        jobs.append((array, path))
        return path, array.dtype.name, tuple(int(d) for d in array.shape)


_WORKERS = {}  # type: Dict[Tuple[str, int], Any]


def worker(name: str) -> Any:
    """A one-thread executor for one kind of capture work that overlaps TensorFlow's, started on
    first use; one per process (threads do not survive a fork, so a forked child gets its own)."""
    key = (name, os.getpid())
    if key not in _WORKERS:
        _WORKERS[key] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="npu_dump_hook_" + name)
    return _WORKERS[key]


def _write_all(jobs: List[Tuple[Any, str]]) -> None:
    for array, path in jobs:
        write_npy(array, path)


def _holder(value: Any) -> str:
    """The op that holds the variable a value tensor reads: ``VariableV2`` or ``VarHandleOp``."""
    op = value.op
    if op.type == "ReadVariableOp":
        return op.inputs[0].op.name
    return op.name
