"""A partial dump (``dump_layer``): rows of ops not dumped by choice are "not selected", not
missing, and the document's ``coverage`` says how much of the choice was dumped (docs/compare.md,
"Partial dumps").

An op is *selected* as :mod:`npu_dump_hook.bundle.selection` defines it (its NPU name or one of its
original TF op names is in ``dump_layer``), the definition the emulated NPU, the bundle's
``coverage`` and ``inspect`` share. A row of an op without a dump file is
``not selected: ...`` when the op is not selected, and keeps ``no dump file: ...`` when it is:
a chosen op the dump does not hold is missing, and ``coverage.missing`` names it.
"""
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..bundle.selection import is_selected, layer_names
from ._rows import REASON_NO_DUMP, REASON_NOT_SELECTED, Row

__all__ = ["REASON_NOT_SELECTED", "dump_layer_of_bundle", "mark_not_selected", "coverage_of_undumped",
           "coverage_line"]

_LISTED = 50


def dump_layer_of_bundle(bundle_json: Optional[Dict[str, Any]]) -> List[str]:
    """The ``dump_layer`` names recorded in an NPU bundle's options (empty: every op was dumped)."""
    return layer_names(bundle_json)


def _selected(row: Row, layers: Any) -> bool:
    return is_selected(row.npu_op, row.ground_truth, layers)


def mark_not_selected(rows: Sequence[Row], layer: Sequence[str]) -> Optional[Dict[str, Any]]:
    """Relabel the no-dump rows of unselected ops; the ``coverage`` part of the document (None
    for a full dump)."""
    if not layer:
        return None
    layers = set(layer)
    dumped, missing, not_selected = set(), [], set()  # type: Any, List[str], Any
    for row in rows:
        if row.reason_category != REASON_NO_DUMP:
            dumped.add(row.npu_op)
        elif _selected(row, layers):
            missing.append(row.npu_op)
        else:
            row.reason = row.fail_reason = "{}: {} ({}) is not in dump_layer".format(
                REASON_NOT_SELECTED, row.npu_op, row.op_type)
            not_selected.add(row.npu_op)
    return {"dump_layer": list(layer), "dumped_ops": len(dumped), "not_selected_ops": len(not_selected),
            "missing_ops": len(missing), "missing": missing[:_LISTED]}


def coverage_of_undumped(dumped_ops: int, undumped: Iterable[Tuple[str, Sequence[str]]],
                         layer: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The ``coverage`` part of a compare that has no rows for ops without a file (the statistics
    compare): ``undumped`` are the (name, original names) of the graph's ops with a task and no
    stats CSV; None for a full dump."""
    if not layer:
        return None
    layers = set(layer)
    missing, not_selected = [], 0  # type: List[str], int
    for name, originals in undumped:
        if is_selected(name, originals, layers):
            missing.append(name)
        else:
            not_selected += 1
    return {"dump_layer": list(layer), "dumped_ops": dumped_ops, "not_selected_ops": not_selected,
            "missing_ops": len(missing), "missing": missing[:_LISTED]}


def coverage_line(coverage: Optional[Dict[str, Any]]) -> List[str]:
    """The summary line of a partial dump's coverage (none for a full dump)."""
    if not coverage:
        return []
    line = "partial dump (dump_layer, {} name(s)): {} op(s) dumped, {} not selected (not dumped by choice)".format(
        len(coverage["dump_layer"]), coverage["dumped_ops"], coverage["not_selected_ops"])
    if coverage["missing_ops"]:
        line += "; {} chosen op(s) MISSING: {}".format(coverage["missing_ops"], ", ".join(coverage["missing"][:5]))
    return [line]
