"""Rows: one per compared (or not comparable) NPU tensor, assembled from the match plan and
the workers' results, in msaccucmp's row order, with their execution order.

Row order (the CSV's and the JSON's): msaccucmp's -- by ``index`` (the op's fusion group in
graph order), within an op its inputs then its outputs by slot; ops without a dump file
(that are not ``_no_task``) get one row saying so; dump files no graph op claims come last.

Execution order (``order``, 0..n-1, the x axis of plots and what "first" means): by dump
timestamp, then task id, then graph position (topology), then inputs before outputs and by
slot; rows without a dump file go last.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._match import OpEntry
from ._worker import REASON_DUMP, FileResult, TensorResult

__all__ = ["Row", "build_rows", "REASON_NO_DUMP", "REASON_NOT_SELECTED"]

REASON_NO_DUMP = "no dump file"
#: A partial dump (dump_layer): the op was not chosen, so it has no dump file by choice (._selection).
REASON_NOT_SELECTED = "not selected"
_LAST = float("inf")


class Row(object):
    """One row; the fields of the JSON document plus what analysis needs."""

    def __init__(self, entry: OpEntry, tensor: Optional[TensorResult], reason: str = "",
                 timestamp: Optional[int] = None) -> None:
        if tensor is None:  # no tensor read: the op's one row, saying why
            self._init(entry, timestamp, "output", 0, "NaN", "NaN", "NaN", (), (), "", None, None, None, None, None,
                       reason, reason, False, "", False)
            return
        self._init(entry, timestamp, tensor.direction, tensor.slot, tensor.npu_dtype, tensor.golden_dtype,
                   tensor.address, tensor.shape, tensor.original_shape, tensor.npu_format, tensor.golden,
                   tensor.golden_path, tensor.values, tensor.std, tensor.cells, tensor.fail_reason, tensor.reason,
                   tensor.overflow, tensor.shape_note, True)

    @classmethod
    def of_values(cls, entry: OpEntry, timestamp: Optional[int], direction: str, slot: int, npu_dtype: str,
                  shape: Tuple[int, ...], npu_format: str, original_shape: Tuple[int, ...],
                  golden: Optional[Tuple[str, int]], golden_dtype: str, metrics: Optional[Dict[str, Optional[float]]],
                  reason: str, overflow: bool) -> "Row":
        """``Row(entry, TensorResult(direction, slot, npu_dtype, "NaN", shape, npu_format, original_shape,
        golden, None, golden_dtype, metrics, None, None, reason, reason, overflow), timestamp=timestamp)``
        without building the TensorResult: the statistics compare makes one a tensor, thousands of them
        (tests/compare/test_stats_fast_paths.py holds the two the same)."""
        row = cls.__new__(cls)
        row._init(entry, timestamp, direction, slot, npu_dtype, golden_dtype, "NaN", shape, original_shape, npu_format,
                  golden, None, metrics, None, None, reason, reason, overflow, "", True)
        return row

    def _init(self, entry: OpEntry, timestamp: Optional[int], direction: str, slot: int, npu_dtype: str,
              golden_dtype: str, address: str, shape: Tuple[int, ...], original_shape: Tuple[int, ...],
              npu_format: str, golden: Optional[Tuple[str, int]], golden_path: Optional[str],
              metrics: Optional[Dict[str, Optional[float]]], std: Any, cells: Optional[List[str]], fail_reason: str,
              reason: str, overflow: bool, shape_note: str, named: bool) -> None:
        """Every field, set once for both ways a row is made (positional: thousands of rows a compare).
        ``named``: a tensor was read, ``tensor`` names it (``op:direction:slot[@iteration]``)."""
        self.index = entry.index
        self.order = 0
        self.op_type = entry.op_type
        self.npu_op = entry.name
        self.ground_truth = list(entry.ground_truth)
        self.position = entry.position
        self.task_id = entry.dump.name.task_id if entry.dump is not None else None
        self.iteration = entry.iteration  # type: Optional[int]
        self.timestamp = timestamp
        self.status = "not_compared"
        self.breached = []  # type: List[str]
        self.propagated = False
        self.upstream = []  # type: List[Row]
        self.number = 0  # position in the row list
        self.direction, self.slot = direction, slot
        self.tensor = "{}:{}:{}".format(entry.name, direction, slot) + (
            "" if entry.iteration is None else "@{}".format(entry.iteration)) if named else ""
        self.npu_dtype, self.golden_dtype, self.address = npu_dtype, golden_dtype, address
        self.shape, self.original_shape, self.npu_format = shape, original_shape, npu_format
        self.golden, self.golden_path = golden, golden_path
        self.metrics, self.std, self.cells = metrics, std, cells
        self.fail_reason, self.reason, self.overflow = fail_reason, reason, overflow
        self.shape_note = shape_note  # "" unless compared flattened (another shape, as many elements)

    @property
    def compared(self) -> bool:
        return self.metrics is not None and not self.reason

    @property
    def reason_category(self) -> str:
        return self.reason.split(":", 1)[0] if self.reason else ""

    def order_key(self) -> Tuple[Any, ...]:
        return (self.timestamp if self.timestamp is not None else _LAST,
                self.task_id if self.task_id is not None else _LAST,
                self.position if self.position is not None else _LAST,
                0 if self.direction == "input" else 1, self.slot)


def _rows_of(entry: OpEntry, result: Optional[FileResult]) -> List[Row]:
    if entry.dump is None:
        return [Row(entry, None, "{}: {} ({}) has no dump file in the step folder".format(
            REASON_NO_DUMP, entry.name, entry.op_type))]
    stamp = entry.dump.name.timestamp
    if result is None or result.error:
        detail = result.error if result is not None else "{}: not read".format(REASON_DUMP)
        return [Row(entry, None, detail, stamp)]
    stamp = result.dump_time or stamp
    tensors = sorted(result.tensors, key=lambda t: (t.direction != "input", t.slot))
    if not tensors:
        return [Row(entry, None, "{}: {} holds no input or output tensor".format(REASON_DUMP, entry.dump.path),
                    stamp)]
    return [Row(entry, tensor, timestamp=stamp) for tensor in tensors]


def build_rows(entries: Sequence[OpEntry], results: Dict[int, FileResult]) -> List[Row]:
    """Rows in msaccucmp's order, ``order`` and ``number`` set (see the module doc)."""
    rows = []  # type: List[Row]
    for entry in sorted(entries, key=lambda e: e.index):  # stable: graph order within a group
        rows.extend(_rows_of(entry, results.get(entry.job.job) if entry.job is not None else None))
    for number, row in enumerate(rows):
        row.number = number
    for order, row in enumerate(sorted(rows, key=Row.order_key)):
        row.order = order
    return rows
