"""The golden run's input replay: the NPU step's kept input values fed into the same tensors.

Contract (``GoldenRun`` drives it; see docs/bundle-format.md §2.4 for the ``inputs`` manifest)::

    replay = InputReplay(target_path, target.input_values(scratch))  # each value's sha256 checked
    feeds = replay.feeds(graph, user_feed_dict)   # captured step, before_run: ReplayError naming
                                                  # every tensor that cannot be fed, else the feeds
    replay.undo()                                 # after_run: the user's feed_dict as it was
    replay.record()                               # golden_for.replayed

How the values reach the step: a tensor the script itself feeds (a placeholder of its
``feed_dict``) gets the NPU value in the script's own ``feed_dict`` for that one run (the
original value is put back in ``after_run``; ``MonitoredSession`` refuses a hook feed that
overlaps the caller's); every other tensor (an iterator's, a queue dequeue's or a py_func's
output) is fed by the hook's ``SessionRunArgs``, so TensorFlow prunes the iterator, queue or
py_func and the step computes from the NPU step's batch by construction. The batch
fingerprints then match; the state fingerprints are checked as before.
"""
import logging
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple  # noqa: F401 (type comments)

import numpy as np

from .._inert import printable
from ..errors import OptionError, ReplayError
from .fingerprints import array_digest
from .inputs import unpack_strings
from .guard import HOOK_LOGGER

__all__ = ["InputReplay"]

logger = logging.getLogger(HOOK_LOGGER)


class InputReplay(object):
    """The kept input values of one NPU bundle, ready to feed (see the module doc)."""

    def __init__(self, target: str, values: Sequence[Tuple[Mapping[str, Any], Any]]) -> None:
        self.target = target
        self._values = {}  # type: Dict[str, Tuple[Mapping[str, Any], Any]]
        for entry, value in values:
            if entry["dtype"] == "string" and getattr(value, "dtype", None) == np.uint8 and value.ndim == 1:
                try:
                    value = unpack_strings(value, entry["shape"])
                except ValueError as exc:
                    raise OptionError("initial_state", "{}: data/{}".format(target, entry["file"]),
                                      "does not hold packed strings: {}".format(exc)) from exc
            digest = array_digest(value)
            if (digest["dtype"], digest["shape"], digest["sha256"]) != (entry["dtype"], list(entry["shape"]),
                                                                         entry["sha256"]):
                raise OptionError("initial_state", "{}: data/{}".format(target, entry["file"]),
                                  "holds another value than bundle.json inputs records for {} (dtype, shape or "
                                  "sha256 differ)".format(entry["name"]))
            self._values[entry["name"]] = (entry, value)
        self._undo = []  # type: List[Tuple[Dict[Any, Any], Any, Any]]
        self._fed = []  # type: List[str]

    def __len__(self) -> int:
        return len(self._values)

    def feeds(self, graph: Any, user_feed: Any) -> Dict[Any, Any]:
        """The hook's feeds for the captured step (the script's own fed tensors are set in ``user_feed``)."""
        resolved, problems = {}, []  # type: Dict[str, Tuple[Any, Any]], List[Dict[str, str]]
        for name in sorted(self._values):
            entry, value = self._values[name]
            tensor, reason = _resolve(graph, name, entry, value)
            if reason is None:
                resolved[name] = (tensor, value)
            else:
                problems.append({"name": name, "reason": reason})
        if problems:
            raise ReplayError("golden run for {}: {} of the NPU step's input(s) cannot be fed into this graph: {}"
                              " (same script and model code as the NPU run? replay_inputs=False / "
                              "--no-replay-inputs lets the script make its own batch)".format(
                                  self.target, len(problems),
                                  "; ".join("{} ({})".format(p["name"], p["reason"]) for p in problems)),
                              self.target, problems)
        overridden = set()
        if isinstance(user_feed, dict):
            for key in list(user_feed):
                name = _element_name(graph, key)
                if name in resolved:
                    self._undo.append((user_feed, key, user_feed[key]))
                    user_feed[key] = resolved[name][1]
                    overridden.add(name)
        self._fed = sorted(resolved)
        logger.info("NpuDumpHook: golden run replays %d input value(s) of NPU bundle %s (%d in the script's "
                    "feed_dict)", len(resolved), printable(self.target), len(overridden))
        return {tensor: value for name, (tensor, value) in resolved.items() if name not in overridden}

    def undo(self) -> None:
        """The script's feed_dict values as they were before :meth:`feeds`."""
        undo, self._undo = self._undo, []
        for feed, key, value in reversed(undo):
            feed[key] = value

    def record(self) -> Dict[str, Any]:
        """``golden_for.replayed``: what was fed (names, sources, total bytes)."""
        tensors = [{"name": name, "source": self._values[name][0].get("source"),
                    "sha256": self._values[name][0].get("sha256")} for name in self._fed]
        size = sum(int(getattr(self._values[name][1], "nbytes", 0)) for name in self._fed)
        return {"count": len(tensors), "bytes": size, "tensors": tensors, "reason": None}


def _element_name(graph: Any, key: Any) -> Optional[str]:
    try:
        return graph.as_graph_element(key, allow_tensor=True, allow_operation=False).name
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def _resolve(graph: Any, name: str, entry: Mapping[str, Any], value: Any) -> Tuple[Any, Optional[str]]:
    """``(tensor, None)`` or ``(None, why it cannot be fed)``."""
    try:
        tensor = graph.get_tensor_by_name(name)
    except (KeyError, ValueError, TypeError):
        return None, "not a tensor of this graph"
    if not graph.is_feedable(tensor):
        return None, "not feedable in this graph"
    here = tensor.dtype.base_dtype.name
    if here != entry["dtype"]:
        return None, "dtype {} here, {} in the NPU bundle".format(here, entry["dtype"])
    if not tensor.shape.is_compatible_with(value.shape):
        here_shape = "of unknown rank" if tensor.shape.dims is None else tensor.shape.as_list()
        return None, "shape {} here, {} in the NPU bundle".format(here_shape, list(value.shape))
    return tensor, None
