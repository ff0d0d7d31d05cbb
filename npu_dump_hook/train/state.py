"""The captured step's state and batch fingerprints, recorded for run.json and the golden comparison.

Contract (see :mod:`npu_dump_hook.train.fingerprints` for what is hashed)::

    prints = StepFingerprints(inputs=None)      # inputs: a StepInputs keeping the batch values (NPU run)
    prints.begin(variables)                     # the global variables, read before the captured step
    fetches = prints.batch_fetches(walk, guard) # before it: the batch tensors, from the step's one walk
    prints.reader                               # join the capture's read before the step (read once) ...
    prints.read_state(session, guard)           # ... or read now (when no capture read took them)
    prints.take_batch(results, guard)           # after it: hash the batch values the step returned (and
                                                # hand them to ``inputs``, which keeps them for the replay)
    prints.section(captured_step)               # the ``fingerprints`` section (None if never recorded)
"""
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401 (type comments)

from ._capture_plan import resolve_memory_budget
from .fingerprints import StateReader, batch_entries, batch_tensors_of, fingerprints_section
from .guard import FailureGuard
from .inputs import StepInputs
from .walk import StepWalk

__all__ = ["StepFingerprints"]


class StepFingerprints(object):
    """State and batch fingerprints of one captured step (see the module doc)."""

    def __init__(self, inputs: Optional[StepInputs] = None) -> None:
        #: Keeps the captured step's batch values for a golden run's replay (None: hashes only).
        self.inputs = inputs
        self.reader = None  # type: Optional[StateReader]
        self.state = None  # type: Optional[List[Dict[str, Any]]]
        self.batch = None  # type: Optional[List[Dict[str, Any]]]
        self._state_skipped = []  # type: List[Dict[str, str]]
        self._batch_skipped = []  # type: List[Dict[str, str]]
        self._plan = None  # type: Optional[List[Tuple[Any, str]]]

    def begin(self, variables: List[Any]) -> None:
        self.reader = StateReader(variables, resolve_memory_budget(None))

    def batch_fetches(self, walk: StepWalk, step: int, guard: FailureGuard) -> List[Any]:
        """The batch tensors to fetch with the captured step (its own fetches: nothing extra runs)."""
        with guard("choosing the batch tensors of step {}".format(step)):
            self._plan, skipped = batch_tensors_of(walk)
            self._batch_skipped.extend(skipped)
        return [tensor for tensor, _ in self._plan or ()]

    def read_state(self, session: Any, step: int, guard: FailureGuard) -> None:
        """The state before the step: what the capture's read took, else a read of its own now."""
        if self.state is not None or self.reader is None:
            return
        if self.reader.last is not None:
            self._keep_state(self.reader.last)
            return
        with guard("reading the state fingerprints before step {}".format(step)):
            self._keep_state(self.reader.read(session))

    def _keep_state(self, read: Tuple[List[Dict[str, Any]], List[Dict[str, str]]]) -> None:
        self.state, skipped = read
        self._state_skipped.extend(skipped)

    def take_batch(self, results: Any, step: int, guard: FailureGuard) -> None:
        """Hash the batch values the captured step returned (``results["batch"]``)."""
        if self._plan is None:
            return
        plan, self._plan = self._plan, None
        values = results["batch"] if plan else []
        with guard("hashing the batch of step {}".format(step)):
            self.batch = batch_entries(plan, values)
        if self.inputs is not None and self.batch is not None:
            with guard("keeping the inputs of step {} for the golden run's replay".format(step)):
                self.inputs.keep(plan, values, self.batch, step)

    def section(self, captured_step: int) -> Optional[Dict[str, Any]]:
        """The ``fingerprints`` section (None when the captured step never ran)."""
        if self.state is None and self.batch is None:
            return None
        return fingerprints_section(captured_step, self.state, self.batch,
                                    self._state_skipped + self._batch_skipped)
