"""The capture's fetch path: a ``session.run`` fetch whose values reach the capture engine, not the
hook's results (:class:`FetchedValues`), through a fetch conversion registered with TensorFlow's
session (private ``tensorflow.python.client.session`` API, via ``_tf.register_fetch_conversion``).
Used by :mod:`npu_dump_hook.train.capture`.
"""
import logging
from typing import Any, List, Optional  # noqa: F401 (type comments)

from .. import _tf

__all__ = ["FetchedValues", "register_fetch_conversion"]

logger = logging.getLogger("npu_dump_hook._capture")


class FetchedValues(object):
    """A ``session.run`` fetch of many tensors whose values land here, not in the hook's results.

    The capture engine is driven through ``run_args``/``finish`` and never sees ``run_values``;
    a registered fetch conversion (``fetch_function`` -> tensors + contraction) hands the
    values over the moment ``session.run`` returns them.
    """

    def __init__(self, tensors: List[Any], keep: bool = True) -> None:
        self.tensors = tensors
        self.keep = keep  # False: a warm-up fetch, whose values are dropped as they arrive
        self.values = None  # type: Optional[List[Any]]

    def receive(self, values: List[Any]) -> None:
        if self.keep:
            self.values = list(values)


_FETCH_REGISTERED = []  # type: List[bool]


def register_fetch_conversion() -> bool:
    """Teach ``Session.run`` to fetch :class:`FetchedValues` (private TF API; False when absent)."""
    if not _FETCH_REGISTERED:
        done = _tf.register_fetch_conversion(FetchedValues, lambda sink: (list(sink.tensors), sink.receive))
        if not done:
            logger.warning("capture: this TensorFlow has no session-run fetch conversions; streaming only")
        _FETCH_REGISTERED.append(done)
    return _FETCH_REGISTERED[0]
