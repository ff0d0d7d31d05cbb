"""The golden run of a stats bundle: statistics per tensor instead of tensors.

When the NPU bundle a golden run reproduces was dumped with ``dump_data="stats"`` (its
``bundle.json`` ``options.dump_data``), the golden folder of the captured step is turned, right
after its capture, into one statistics file and no tensors (docs/bundle-format.md,
"Golden statistics")::

    data/golden/golden_stats.json   {"schema": "npu_dump_hook/golden_stats@1", "tensors": [
        {"key", "tensor", "op_type", "dtype", "shape", "order", "timestamp",
         "count", "max", "min", "avg", "nan", "neg_inf", "pos_inf", "l2norm"}, ...]}
    data/golden/golden_manifest.json   its ``files`` emptied, ``statistics`` naming the file above

``key`` is msaccucmp's look-up key of the tensor (``{op name with / and . -> _}.{output index}``),
the one compare matches NPU tensors by; the statistics are those of GE's stats CSV as
:func:`npu_dump_hook.formats.stats_csv.compute_stats` computes them (max, min and avg over the
finite elements; null when there is none), plus ``l2norm``: the Euclidean norm of the finite
elements. The ``.npy`` files are removed once the file is written (atomically): during the
capture the step's tensors are on disk once, as for a tensor golden run.
"""
import json
import logging
import os
from typing import Any, Dict, List, Optional

import numpy as np

from ..formats.names import parse_npy_name
from ..formats.stats_csv import tensor_statistics
from ..bundle.selection import is_stats_options

__all__ = ["STATS_FILE", "STATS_SCHEMA", "is_stats_bundle", "tensor_statistics", "write_golden_stats",
           "golden_statistics"]

logger = logging.getLogger(__name__)

STATS_FILE = "golden_stats.json"
STATS_SCHEMA = "npu_dump_hook/golden_stats@1"
_MANIFEST = "golden_manifest.json"


def is_stats_bundle(doc: Optional[Dict[str, Any]]) -> bool:
    """The bundle document records ``options.dump_data == "stats"``."""
    return is_stats_options((doc or {}).get("options"))


def write_golden_stats(golden_dir: str) -> Dict[str, Any]:
    """Replace the ``.npy`` files the manifest of ``golden_dir`` lists by ``golden_stats.json``;
    return the summary entries to add to the run's golden report."""
    manifest_path = os.path.join(golden_dir, _MANIFEST)
    with open(manifest_path, "r", encoding="utf-8") as handle:
        manifest = json.load(handle)
    tensors = []  # type: List[Dict[str, Any]]
    for entry in manifest.get("files") or []:
        path = os.path.join(golden_dir, entry["file"])
        array = np.load(path, mmap_mode="r", allow_pickle=False)
        row = {"key": parse_npy_name(entry["file"]).key, "tensor": entry.get("tensor"), "op_type": entry.get("op_type"),
               "dtype": entry.get("dtype"), "shape": entry.get("shape"), "order": entry.get("order"),
               "timestamp": entry.get("timestamp")}
        row.update(tensor_statistics(np.asarray(array)))
        del array
        tensors.append(row)
    _write_json(os.path.join(golden_dir, STATS_FILE), {"schema": STATS_SCHEMA, "tensors": tensors})
    files = [entry["file"] for entry in manifest.get("files") or []]
    manifest["files"], manifest["statistics"] = [], STATS_FILE
    _write_json(manifest_path, manifest)
    for name in files:
        os.remove(os.path.join(golden_dir, name))
    logger.info("golden statistics: %d tensor(s) in %s, their .npy files removed", len(tensors),
                os.path.join(golden_dir, STATS_FILE))
    return {"statistics": STATS_FILE, "files": 0, "statistics_tensors": len(tensors)}


def _write_json(path: str, doc: Dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, separators=(",", ":"), allow_nan=False)
        handle.write("\n")
    os.replace(tmp, path)


def golden_statistics(target: Any, dump: Any, guard: Any) -> None:
    """After the captured step of a golden run (``target``: the NPU bundle, None when this is no
    golden run; ``dump``: the run's DumpRun): a stats bundle's golden becomes statistics."""
    if target is None or dump.reference_report is None or not is_stats_bundle(target.doc):
        return
    with guard("writing the golden statistics of stats bundle {} to {}".format(target.path, dump.golden_dir)):
        dump.reference_report.update(write_golden_stats(dump.golden_dir))
