"""What a script builds after the hook began, taken in at the captured step.

Under ``MonitoredSession``/``Estimator`` the graph is finalized right after ``begin()``: nothing
is built later. A plain session (:class:`~npu_dump_hook.session.NpuDumpSession`, by hand or
through the runner) keeps its graph editable, and scripts do build after wrapping: Keras makes
its train function and its optimizer's variables (Adam's ``m``/``v``, ``iterations``) in the
first ``fit``; a string-handle iterator's pipeline is often made after the session. At the
captured step, when the graph has grown since ``begin()``::

    late = LateGraph(graph, variables, written)   # end of begin(): what the hook saw
    late.grown()                                  # captured step: built since, graph editable
    late.variables()                              # every global variable now (None: no new one)
    late.graph_def()                              # the model graph as the step ran it
    late.randomness(report)                       # random sources built since: audited, reported

The hook then saves every variable in the initial state and hashes it in the state
fingerprints (a golden run restores them), rewrites ``tf/graph.pbtxt`` as the captured step's
graph, and adds the late random sources to the randomness report. The hook's own ops (names
under ``npu_dump_hook_*`` scopes) are never part of the model graph. Random sources built after
``begin()`` cannot be pinned or stripped (their ops may have run already): their action says so,
and clock seeds among them are listed as not reproducible; input replay gives the golden run
their values (docs/bundle-format.md).
"""
from typing import Any, Dict, Iterable, List, Optional

from .. import _tf
from .._graph_functions import SUFFIX
from ..determinism import CLOCK_SEEDED, audit
from ._capture_plan import OWN_OPS_PREFIX

__all__ = ["LateGraph", "LATE_NOTE"]

#: Appended to the action of a random source built after the hook began.
LATE_NOTE = "built after the hook began: audited at the captured step, not pinned"


class LateGraph(object):
    """The graph as ``begin()`` left it, to tell what the script built after it (module doc)."""

    def __init__(self, graph: Any, variables: List[Any], written: Iterable[str]) -> None:
        self.graph = graph
        self.version = graph.version
        #: The ops themselves (identity hash; TF 1.15 reads each name through the C API, ~1 us an op).
        self.known = set(graph.get_operations())
        #: The global variables at ``begin()``.
        self.begun = list(variables)
        self._variables = {v.name for v in variables}
        self._written = set(written)  # the model ops graph.pbtxt holds

    def grown(self) -> bool:
        """The graph is editable and has ops it did not have at the end of ``begin()``."""
        return not self.graph.finalized and self.graph.version != self.version

    def _new_ops(self) -> List[Any]:
        return [op for op in self.graph.get_operations()
                if op not in self.known and not op.name.startswith(OWN_OPS_PREFIX)]

    def variables(self) -> Optional[List[Any]]:
        """Every global variable of the graph when some were made after ``begin()``, else None."""
        now = list(self.graph.get_collection(_tf.tf_v1().GraphKeys.GLOBAL_VARIABLES))
        return now if any(v.name not in self._variables for v in now) else None

    def graph_def(self) -> Any:
        """The model graph with the ops built after ``begin()`` (the hook's own left out)."""
        keep = self._written | {op.name for op in self._new_ops()}
        full = self.graph.as_graph_def(add_shapes=True)
        nodes = [node for node in full.node if node.name in keep]
        del full.node[:]
        full.node.extend(nodes)
        return full

    def randomness(self, report: Dict[str, Any]) -> List[Dict[str, str]]:
        """The random sources built after ``begin()`` (not in ``report``'s sources), audited now and
        added to ``report`` (``sources``; clock seeds also to ``not_reproducible``)."""
        seen = {(s["op"], s["type"]) for s in report.get("sources", ())}
        late = []  # type: List[Dict[str, str]]
        for source in audit(self.graph):
            function = source["op"].split("/", 1)[0]
            if (source["op"], source["type"]) in seen or function.endswith(SUFFIX):
                continue  # seen at begin(), or the hook's edited copy of a function
            if source["op"].startswith(OWN_OPS_PREFIX):
                continue
            late.append(dict(source, action="{}; {}".format(source["action"], LATE_NOTE)))
        if late:
            report.setdefault("sources", []).extend(late)
            report.setdefault("not_reproducible", []).extend(
                s for s in late if s["action"].startswith(CLOCK_SEEDED))
        return late
