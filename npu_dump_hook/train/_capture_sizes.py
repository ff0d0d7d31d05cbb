"""Sizes a step's feeds decide: the shapes of tensors whose static shape is unknown (a batch
dimension left ``None``) once the fed values' shapes are known -- the one rule for "how big is each
tensor in this step" that both the capture and the size estimate use. The capture fetches such a
step within the memory budget instead of streaming it (see :mod:`npu_dump_hook.train.capture`);
the size estimate (:mod:`.sizing`) counts their exact bytes instead of guessing the batch.

The shapes come from TensorFlow's own shape inference over a copy of the graph whose fed tensors
have the fed shapes (:func:`npu_dump_hook._tf.shapes_with_feeds`); a shape it infers fully is the
shape the step computes. A tensor it cannot pin down (data-dependent sizes such as ``Unique`` or
``Where``, an unknown batch that comes from a pipeline rather than a feed) stays unknown, and
the step streams as before. One inference per graph version and set of fed shapes: the size
estimate, the warm-up step before the captured one and the captured step share it (the hook's
size check asks the capture's :class:`FedSizes`).
"""
import logging
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import _tf
from .walk import graph_elements

__all__ = ["FedSizes", "fed_shapes", "fetch_sizes"]

logger = logging.getLogger("npu_dump_hook._capture")


def fed_shapes(graph: Any, feed_dict: Any) -> Dict[str, Tuple[int, ...]]:
    """``{fed tensor name: shape of its fed value}`` for the feeds that are one tensor of ``graph``
    (a composite feed such as a ``SparseTensor``, or a key of another graph, is left out)."""
    shapes = {}  # type: Dict[str, Tuple[int, ...]]
    for key, value in (feed_dict or {}).items():
        elements = graph_elements(graph, key)
        if len(elements) != 1 or not hasattr(elements[0], "dtype"):
            continue
        try:
            shape = value.shape if isinstance(value, np.ndarray) else np.shape(value)
            shapes[elements[0].name] = tuple(int(d) for d in shape)
        except (TypeError, ValueError):  # a ragged list: TensorFlow will refuse it, not our business
            continue
    return shapes


class FedSizes(object):
    """Byte sizes of tensors of ``graph`` as a step's feeds decide them (module doc)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self._key = None  # type: Any
        self._shapes = {}  # type: Dict[str, Tuple[int, ...]]

    def shapes(self, feed_dict: Any) -> Dict[str, Tuple[int, ...]]:
        """``{tensor name: shape}`` of every tensor of the graph whose shape the step's feeds fully
        decide (the fed ones included); ``{}`` when nothing is fed. Read, never changed, by callers."""
        fed = fed_shapes(self.graph, feed_dict)
        if not fed:
            return {}
        key = (self.graph.version, tuple(sorted(fed.items())))
        if key != self._key:
            self._key, self._shapes = key, self._infer(fed)
        return self._shapes

    def nbytes(self, tensors: List[Any], feed_dict: Any) -> Dict[str, int]:
        """``{tensor name: bytes}`` for those of ``tensors`` whose shape the feeds fully decide."""
        shapes = self.shapes(feed_dict)
        if not shapes:
            return {}
        sizes = {}  # type: Dict[str, int]
        itemsizes = {}  # type: Dict[Any, int]   per dtype: a graph has few, each read is a TF call
        for tensor in tensors:
            name = tensor.name
            shape = shapes.get(name)
            if shape is None:
                continue
            dtype = tensor.dtype
            itemsize = itemsizes.get(dtype)
            if itemsize is None:
                itemsize = itemsizes[dtype] = dtype.base_dtype.size
            count = 1
            for dim in shape:  # Python ints: exact, and ~10x cheaper than np.prod per tensor (numpy 1.18)
                count *= dim
            sizes[name] = count * itemsize
        return sizes

    def _infer(self, fed: Dict[str, Tuple[int, ...]]) -> Dict[str, Tuple[int, ...]]:
        try:
            return _tf.shapes_with_feeds(self.graph, fed)
        except Exception as exc:  # noqa: BLE001 - no inference means the step streams, as it did before
            logger.debug("capture: shapes from the fed values not inferred (%s: %s); unknown sizes stream",
                         type(exc).__name__, exc)
            return {}


def fetch_sizes(direct: List[Tuple[Any, Any]], budget: int, sizes: FedSizes,
                feed_dict: Any) -> Optional[Dict[str, int]]:
    """``{tensor name: bytes}`` of the ``(tensor, plan)`` pairs of unknown static size when every
    pair's size is known (statically or from the feeds) and all fit ``budget`` together; None
    when they do not (the step streams). The inference runs only when the known sizes fit."""
    known = sum(plan.nbytes or 0 for _, plan in direct)
    unknown = [tensor for tensor, plan in direct if plan.nbytes is None]
    if known > budget:
        return None
    resolved = sizes.nbytes(unknown, feed_dict) if unknown else {}
    if len(resolved) < len(unknown) or known + sum(resolved.values()) > budget:
        return None
    return resolved
