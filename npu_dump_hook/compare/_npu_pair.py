"""NPU vs NPU: the second NPU bundle of ``compare NPU_A NPU_B`` as the golden side, and the
``--determinism`` verdict (docs/compare.md, "NPU vs NPU").

Every output of B's dump is converted from its device format to its original shape (the same
conversion as for A) and written, in a temporary folder removed afterwards, as the msaccucmp
``.npy`` of the original TF tensor it stands for (``_datadump_origin_name``/output index
through Cast/TransData, or the dump header's ``original_op``). A's tensors are then matched to
B's exactly as to golden tensors: by original TF op and output, so a fused node on one side
meets the same original op's output on the other, whatever either side fused. An op of one
side whose output is internal to a fused node of the other has no counterpart: its rows are
``no golden file`` and do not make the comparison incomplete (:data:`PAIR_UNMATCHED`).
"""
import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import CompareError, NpuDumpError
from ._golden import GoldenSide, golden_key
from ._graph import load_graph
from ._match import build_plan
from ._npu import NpuSide, load_npu
from ._rows import Row
from ._worker import _NO_VALUES, REASON_NO_GOLDEN, _HeldDumpFile, _npu_array, _plan_for

__all__ = ["is_npu_bundle", "npu_golden_side", "PAIR_UNMATCHED", "differing_rows", "DETERMINISM_THRESHOLDS"]

#: Reason category that is not an incomplete comparison between two NPU sides.
PAIR_UNMATCHED = REASON_NO_GOLDEN
_NPU_BACKENDS = ("npu", "emulated")
#: ``--determinism``: any difference at all breaches (relative Euclidean distance > 0), scalars too.
DETERMINISM_THRESHOLDS = {"cosine_min": None, "magnitude_err_max": None, "rel_euclid_max": 0.0,
                          "max_rel_err": None, "mean_rel_err": None, "check_scalars": True}


def is_npu_bundle(path: Optional[str]) -> bool:
    """Whether ``path`` is a bundle folder or ``.tar``/``.tar.gz`` archive whose bundle.json says
    an NPU (or emulated NPU) run with a dump (then ``compare`` runs NPU vs NPU). An archive is
    read for its bundle.json only here (the dump is extracted when the side is loaded)."""
    from ..bundle import archive_format, open_bundle

    if path is None or not (os.path.isdir(path) or (os.path.isfile(path) and archive_format(path))):
        return False

    try:
        with open_bundle(path, parts=()) as view:
            doc = view.doc
    except (NpuDumpError, OSError, ValueError):
        return False
    dump = doc.get("dump") if isinstance(doc, dict) else None
    return doc.get("backend") in _NPU_BACKENDS and isinstance(dump, dict) and bool(dump.get("chains"))


def _export(side: NpuSide, folder: str) -> int:
    """Write every output of ``side``'s dump as a golden .npy (module doc); returns how many.
    The Cast/TransData nodes GE inserted are their own tensors (a float16 or device-format copy
    of the TF tensor before them, matched by their own name: ``walk=False``)."""
    graph = load_graph(side.graph_path or "")
    entries = [e for e in build_plan(graph, side.dumps, walk=False).entries if e.job is not None]
    written = set()  # type: Set[str]
    for entry in entries:
        try:
            dump = _HeldDumpFile.open_held(entry.job.path)
        except (NpuDumpError, OSError):
            continue  # unreadable on B: A's rows say "no golden file"
        with dump:
            for slot in range(len(dump.outputs)):
                _write_output(entry.job, dump, slot, folder, written)
    return len(written)


def _write_output(job: Any, dump: Any, slot: int, folder: str, written: Set[str]) -> None:
    target = _plan_for(job, dump, "output", slot)
    info = dump.tensor("output", slot)
    if target is None or info.dtype is None or info.dtype_name in _NO_VALUES:
        return
    key = golden_key(*target)
    if key in written:
        return
    try:
        array = np.ascontiguousarray(_npu_array(job, dump, info, "output", slot))
    except (NpuDumpError, OSError):
        return
    np.save(os.path.join(folder, "{}.0000000000000000.npy".format(key)), array)
    written.add(key)


class _PairOwner(object):
    """Closes B's NPU side and removes the exported folder."""

    def __init__(self, side: NpuSide, folder: str) -> None:
        self.side, self.folder = side, folder

    def close(self) -> None:
        try:
            self.side.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def npu_golden_side(path: str, step: Optional[int] = None) -> GoldenSide:
    """B's dump as a golden side of kind ``"npu"`` (module doc); CompareError when B has no
    output to compare."""
    side = load_npu(path, None, step)
    folder = tempfile.mkdtemp(prefix="npu_dump_hook_npu_pair_")
    try:
        if not _export(side, folder):
            raise CompareError("NPU {}: no dumped output could be read".format(path), path)
        return GoldenSide(path, "npu", folder, side.bundle_json, owner=_PairOwner(side, folder),
                          in_tree_links=False)
    except BaseException:
        side.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise


def pair_incomplete(rows: Sequence[Row]) -> List[str]:
    """:func:`._analysis.uncompared` without the rows that have no counterpart on the other NPU
    side (fused away there: module doc)."""
    from ._analysis import uncompared

    return uncompared([r for r in rows if r.reason_category != PAIR_UNMATCHED])


def differing_rows(rows: Sequence[Row]) -> List[Row]:
    """Compared rows whose two tensors are not identical, in execution order (``--determinism``)."""
    found = []
    for row in sorted(rows, key=lambda r: r.order):
        if not row.compared:
            continue
        metrics = row.metrics or {}
        values = [metrics.get(k) for k in ("MaxAbsoluteError", "RelativeEuclideanDistance")]
        if row.overflow or any(v is not None and (v != v or v > 0) for v in values):
            found.append(row)
    return found


def determinism_doc(rows: Sequence[Row]) -> Tuple[Dict[str, Any], List[Row]]:
    """The JSON ``determinism`` section: ``ops`` (NPU op names whose outputs differ, execution
    order), ``rows`` (their row numbers), ``first``."""
    differing = [r for r in differing_rows(rows) if r.direction == "output"]
    ops = []  # type: List[str]
    for row in differing:
        if row.npu_op not in ops:
            ops.append(row.npu_op)
    return {"ops": ops, "rows": [r.number for r in differing], "first": ops[0] if ops else None}, differing
