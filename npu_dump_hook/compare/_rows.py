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
        if tensor is None:
            self.direction, self.slot = "output", 0
            self.npu_dtype = self.golden_dtype = self.address = "NaN"
            self.shape = self.original_shape = ()  # type: Tuple[int, ...]
            self.npu_format = ""
            self.golden = None  # type: Optional[Tuple[str, int]]
            self.golden_path = None  # type: Optional[str]
            self.metrics = None  # type: Optional[Dict[str, Optional[float]]]
            self.std = None  # type: Any
            self.cells = None  # type: Optional[List[str]]
            self.fail_reason = self.reason = reason
            self.overflow = False
            self.tensor = ""
            self.shape_note = ""
            return
        self.direction, self.slot = tensor.direction, tensor.slot
        self.tensor = "{}:{}:{}".format(entry.name, tensor.direction, tensor.slot) + (
            "" if entry.iteration is None else "@{}".format(entry.iteration))
        self.npu_dtype, self.golden_dtype, self.address = tensor.npu_dtype, tensor.golden_dtype, tensor.address
        self.shape, self.original_shape, self.npu_format = tensor.shape, tensor.original_shape, tensor.npu_format
        self.golden, self.golden_path = tensor.golden, tensor.golden_path
        self.metrics, self.std, self.cells = tensor.values, tensor.std, tensor.cells
        self.fail_reason, self.reason, self.overflow = tensor.fail_reason, tensor.reason, tensor.overflow
        self.shape_note = tensor.shape_note  # "" unless compared flattened (another shape, as many elements)

    @classmethod
    def of_values(cls, entry: OpEntry, timestamp: Optional[int], direction: str, slot: int, npu_dtype: str,
                  shape: Tuple[int, ...], npu_format: str, original_shape: Tuple[int, ...],
                  golden: Optional[Tuple[str, int]], golden_dtype: str, metrics: Optional[Dict[str, Optional[float]]],
                  reason: str, overflow: bool) -> "Row":
        """``Row(entry, TensorResult(direction, slot, npu_dtype, "NaN", shape, npu_format, original_shape,
        golden, None, golden_dtype, metrics, None, None, reason, reason, overflow), timestamp=timestamp)``
        without building the TensorResult: the statistics compare makes one a tensor, thousands of them
        (tests/compare/test_rows.py holds the two the same)."""
        row = cls.__new__(cls)
        row.index, row.order, row.op_type, row.npu_op = entry.index, 0, entry.op_type, entry.name
        row.ground_truth, row.position = list(entry.ground_truth), entry.position
        row.task_id = entry.dump.name.task_id if entry.dump is not None else None
        row.iteration, row.timestamp, row.status = entry.iteration, timestamp, "not_compared"
        row.breached, row.propagated, row.upstream, row.number = [], False, [], 0
        row.direction, row.slot = direction, slot
        row.tensor = "{}:{}:{}".format(entry.name, direction, slot) + (
            "" if entry.iteration is None else "@{}".format(entry.iteration))
        row.npu_dtype, row.golden_dtype, row.address = npu_dtype, golden_dtype, "NaN"
        row.shape, row.original_shape, row.npu_format = shape, original_shape, npu_format
        row.golden, row.golden_path = golden, None
        row.metrics, row.std, row.cells = metrics, None, None
        row.fail_reason, row.reason, row.overflow = reason, reason, overflow
        row.shape_note = ""
        return row

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
