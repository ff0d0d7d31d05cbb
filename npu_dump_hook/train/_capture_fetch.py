"""The capture's fetch path: a ``session.run`` fetch whose values reach the capture engine, not the
hook's results (:class:`FetchedValues`), through a fetch conversion registered with TensorFlow's
session (private ``tensorflow.python.client.session`` API, via ``_tf.register_fetch_conversion``).
Used by :mod:`npu_dump_hook.train.capture`.
"""
import logging
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple  # noqa: F401 (type comments)

from .. import _tf

__all__ = ["FetchedValues", "register_fetch_conversion"]

logger = logging.getLogger("npu_dump_hook._capture")


class FetchedValues(object):
    """A ``session.run`` fetch of many tensors whose values land here, not in the hook's results.

    The capture engine is driven through ``run_args``/``finish`` and never sees ``run_values``;
    a registered fetch conversion (``fetch_function`` -> tensors + contraction) hands the
    values over the moment ``session.run`` returns them.

    ``ops``: operations run with the step (the capture's dump ops), no value kept. They ride in this
    one fetch rather than in a list beside it: every level of a nested fetch structure makes
    ``session.run`` walk all the fetched tensors once more in Python (TF 1.15: ~13 ms a level for
    2,000 tensors, ``benchmarks/bench_fetch_structure.py``).
    """

    def __init__(self, tensors: List[Any], keep: bool = True, ops: Sequence[Any] = ()) -> None:
        self.tensors = tensors
        self.ops = list(ops)
        self.keep = keep  # False: a warm-up fetch, whose values are dropped as they arrive
        self.values = None  # type: Optional[List[Any]]
        self._named = None  # type: Optional[List[Tuple[str, List[Any]]]]

    def also_fetch(self, named: Mapping[str, Any]) -> bool:
        """Carry the caller's own fetches too, ``{key: list of tensors}``: this fetch's value in
        ``session.run``'s results is then ``{key: list of their values}``, as a dict of those lists
        beside it would give, one nesting level less. False (nothing carried) for another structure."""
        if not all(isinstance(tensors, list) for tensors in named.values()):
            return False
        self._named = [(key, list(tensors)) for key, tensors in named.items()]
        return True

    def fetches(self) -> List[Any]:
        """What ``session.run`` fetches for it: the tensors, the ops (their values are None), the carried ones."""
        fetched = self.tensors + self.ops if self.ops else list(self.tensors)
        for _, tensors in self._named or ():
            fetched.extend(tensors)
        return fetched

    def receive(self, values: List[Any]) -> Optional[Dict[str, List[Any]]]:
        """The step's values: this fetch's kept, the carried ones returned (``session.run``'s result for it)."""
        if self.keep:
            self.values = list(values[:len(self.tensors)])
        if self._named is None:
            return None
        results, start = {}, len(self.tensors) + len(self.ops)
        for key, tensors in self._named:
            results[key] = list(values[start:start + len(tensors)])
            start += len(tensors)
        return results


_FETCH_REGISTERED = []  # type: List[bool]


def register_fetch_conversion() -> bool:
    """Teach ``Session.run`` to fetch :class:`FetchedValues` (private TF API; False when absent)."""
    if not _FETCH_REGISTERED:
        done = _tf.register_fetch_conversion(FetchedValues, lambda sink: (sink.fetches(), sink.receive))
        if not done:
            logger.warning("capture: this TensorFlow has no session-run fetch conversions; streaming only")
        _FETCH_REGISTERED.append(done)
    return _FETCH_REGISTERED[0]
