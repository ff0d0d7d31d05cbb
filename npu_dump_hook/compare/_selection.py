"""A partial dump (``dump_layer``): rows of ops not dumped by choice are "not selected", not
missing, and the document's ``coverage`` says how much of the choice was dumped (docs/compare.md,
"Partial dumps").

An op is *selected* when its NPU name or one of its original TF op names is in ``dump_layer``
(the emulated NPU and the adapter select so). A row of an op without a dump file is
``not selected: ...`` when the op is not selected, and keeps ``no dump file: ...`` when it is:
a chosen op the dump does not hold is missing, and ``coverage.missing`` names it.
"""
from typing import Any, Dict, List, Optional, Sequence

from ._rows import REASON_NO_DUMP, REASON_NOT_SELECTED, Row

__all__ = ["REASON_NOT_SELECTED", "dump_layer_of_bundle", "mark_not_selected", "coverage_line"]

_LISTED = 50


def dump_layer_of_bundle(bundle_json: Optional[Dict[str, Any]]) -> List[str]:
    """The ``dump_layer`` names recorded in an NPU bundle's options (empty: every op was dumped)."""
    options = (bundle_json or {}).get("options") if isinstance(bundle_json, dict) else None
    layer = options.get("dump_layer") if isinstance(options, dict) else None
    return layer.split() if isinstance(layer, str) else []


def _selected(row: Row, layers: Any) -> bool:
    return row.npu_op in layers or any(name in layers for name in row.ground_truth)


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


def coverage_line(coverage: Optional[Dict[str, Any]]) -> List[str]:
    """The summary line of a partial dump's coverage (none for a full dump)."""
    if not coverage:
        return []
    line = "partial dump (dump_layer, {} name(s)): {} op(s) dumped, {} not selected (not dumped by choice)".format(
        len(coverage["dump_layer"]), coverage["dumped_ops"], coverage["not_selected_ops"])
    if coverage["missing_ops"]:
        line += "; {} chosen op(s) MISSING: {}".format(coverage["missing_ops"], ", ".join(coverage["missing"][:5]))
    return [line]
