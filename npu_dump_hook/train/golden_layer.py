"""The golden run of a ``dump_layer`` bundle: the golden tensors compare needs for the chosen ops.

When the NPU bundle a golden run reproduces was dumped with ``dump_layer`` (its ``bundle.json``
``options.dump_layer``: the targeted second dump of the large-model path), its golden folder
keeps, right after the capture of the step, the ``.npy`` files of (docs/bundle-format.md,
"Golden of a partial dump"):

* the chosen ops' outputs (what their dump files' outputs are compared with);
* the outputs of the ops feeding them (their dump files' inputs, under ``dump_mode`` input/all);
* the outputs of the ops they feed (a chosen op fused with its consumers is dumped under the
  last member's output: ``conv1/Conv2D`` in ``conv1/Conv2Dconv1/Relu``), one op away, walked
  through Identity-like ops.

The other files are removed and ``golden_manifest.json`` lists what is kept, with
``dump_layer`` and the number of files dropped: the capture writes a step's tensors once, the
bundle keeps a small part of them. The golden of a *statistics* ``dump_layer`` bundle
(``golden_stats.json``, :mod:`.golden_stats`, written first) keeps the statistics of the same
tensors only (``dump_layer.dropped_statistics``: how many were dropped).
"""
import json
import logging
import os
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from ..bundle.selection import layer_names

__all__ = ["dump_layer_of", "keep_ops", "prune_golden", "golden_of_dump_layer"]

logger = logging.getLogger(__name__)

_MANIFEST = "golden_manifest.json"
_FORWARDING = frozenset(("Identity", "IdentityN", "ReadVariableOp", "Cast", "Reshape", "StopGradient"))


def dump_layer_of(doc: Optional[Dict[str, Any]]) -> List[str]:
    """The ``options.dump_layer`` names of a bundle document (empty: every op was dumped)."""
    return layer_names(doc)


def _op(graph: Any, name: str) -> Any:
    try:
        return graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return None


def _neighbours(op: Any) -> Iterable[Any]:
    for tensor in op.inputs:
        yield tensor.op
    for tensor in op.outputs:
        for consumer in tensor.consumers():
            yield consumer


def keep_ops(graph: Any, layer: Iterable[str]) -> Set[str]:
    """The chosen ops and their neighbours (module doc) in the TF ``graph``."""
    kept = set()  # type: Set[str]
    for name in layer:
        op = _op(graph, name)
        if op is None:
            continue
        kept.add(name)
        frontier = list(_neighbours(op))
        while frontier:
            other = frontier.pop()
            if other.name in kept:
                continue
            kept.add(other.name)
            if other.type in _FORWARDING:
                frontier.extend(_neighbours(other))
    return kept


def prune_golden(golden_dir: str, kept: Set[str], layer: List[str]) -> Dict[str, Any]:
    """Remove the golden files of ops not in ``kept``; the golden report's entries."""
    path = os.path.join(golden_dir, _MANIFEST)
    with open(path, "r", encoding="utf-8") as handle:
        manifest = json.load(handle)
    keep, drop = [], []  # type: List[Dict[str, Any]], List[str]
    for entry in manifest.get("files") or []:
        if str(entry.get("tensor") or "").rpartition(":")[0] in kept:
            keep.append(entry)
        else:
            drop.append(entry["file"])
    manifest["files"] = keep
    manifest["dump_layer"] = {"ops": layer, "dropped_files": len(drop)}
    found = {"files": len(keep), "dump_layer_dropped": len(drop)}  # type: Dict[str, Any]
    if isinstance(manifest.get("statistics"), str):  # the golden of a stats bundle: statistics, not files
        kept_stats, dropped_stats = _prune_statistics(os.path.join(golden_dir, manifest["statistics"]), kept)
        manifest["dump_layer"]["dropped_statistics"] = dropped_stats
        found.update(statistics_tensors=kept_stats, dump_layer_dropped_statistics=dropped_stats)
    _write_json(path, manifest)
    for name in drop:
        os.remove(os.path.join(golden_dir, name))
    logger.info("golden of a dump_layer bundle: %d file(s) kept, %d dropped", len(keep), len(drop))
    return found


def _prune_statistics(path: str, kept: Set[str]) -> Tuple[int, int]:
    """Keep in the golden statistics file at ``path`` the tensors of the ``kept`` ops only;
    (tensors kept, tensors dropped)."""
    with open(path, "r", encoding="utf-8") as handle:
        doc = json.load(handle)
    tensors = doc.get("tensors") or []
    doc["tensors"] = [t for t in tensors if str(t.get("tensor") or "").rpartition(":")[0] in kept]
    _write_json(path, doc)
    logger.info("golden statistics of a dump_layer bundle: %d tensor(s) kept, %d dropped", len(doc["tensors"]),
                len(tensors) - len(doc["tensors"]))
    return len(doc["tensors"]), len(tensors) - len(doc["tensors"])


def _write_json(path: str, doc: Dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` whole or not at all (write, then rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, separators=(",", ":"), allow_nan=False)
        handle.write("\n")
    os.replace(tmp, path)


def golden_of_dump_layer(target: Any, dump: Any, guard: Any, graph: Any) -> None:
    """After the captured step of a golden run (``target``: the NPU bundle, None when this is no
    golden run; ``dump``: the run's DumpRun): a dump_layer bundle's golden keeps what compare needs."""
    if target is None or dump.reference_report is None:
        return
    layer = dump_layer_of(target.doc)
    if not layer:
        return
    with guard("keeping the golden tensors of dump_layer bundle {} in {}".format(target.path, dump.golden_dir)):
        dump.reference_report.update(prune_golden(dump.golden_dir, keep_ops(graph, layer), layer))
