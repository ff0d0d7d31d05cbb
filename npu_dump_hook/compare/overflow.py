"""The overflow report of an ``enable_dump_debug`` run, without a golden (docs/compare.md,
"Checks that need no golden").

Each ``Opdebug.Node_OpDebug.*`` file of the step folder is decoded
(:func:`npu_dump_hook.formats.opdebug.read_opdebug_file`, reference §3.1); each unit entry that
reports an overflow (every entry of the new layout; of the old layout's three blocks, those with
a non-zero status) names the task that overflowed by ``task_id`` and ``stream_id``. The Opdebug
file's own task id is not the op's, so the op is the dump file of the same step folder with that
task and stream id (GE dumps the overflowing op beside its Opdebug record), the latest one not
after the record when several match; its graph op (by sanitized name, as compare matches dump
files) gives the original TF op(s) through ``_datadump_original_op_names``. Entries are listed
in time order (the Opdebug file's timestamp, then its name): the first is the one to look at,
since what follows an overflow usually overflows because of it.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import FormatError
from ..formats.names import base_op_name, sanitize
from ..formats.opdebug import LAYOUT_OLD, read_opdebug_file
from ._graph import Graph

__all__ = ["overflow_report"]


def _by_task(refs: Sequence[Any]) -> Dict[Tuple[int, int], List[Any]]:
    found = {}  # type: Dict[Tuple[int, int], List[Any]]
    for ref in refs:
        found.setdefault((ref.name.task_id, ref.name.stream_id), []).append(ref)
    for group in found.values():
        group.sort(key=lambda r: (r.name.timestamp, r.path))
    return found


def _dump_for(candidates: Sequence[Any], when: int) -> Optional[Any]:
    before = [r for r in candidates if r.name.timestamp <= when]
    return (before or list(candidates) or [None])[-1]


def _op_of(by_key: Dict[str, Any], ref: Any) -> Tuple[Optional[str], Optional[str], List[str]]:
    """(graph op name, type, original ops) of a dump file; the file's own names when no op claims it."""
    op = by_key.get(base_op_name(ref.name.op_name))
    if op is None:
        return ref.name.op_name, ref.name.op_type, [ref.name.op_name]
    originals = [op.name] if op.original_op_names is None else [n for n in op.original_op_names if n]
    return op.name, op.type, originals


def _reports(entry: Any, layout: str) -> bool:
    return layout != LAYOUT_OLD or any(entry.status)


def overflow_report(graph: Graph, opdebug: Sequence[Any], dumps: Sequence[Any]) -> Dict[str, Any]:
    """The JSON part ``checks.overflow``: ``entries`` in time order (first: the one to look at),
    ``unreadable`` Opdebug files with the reader's message."""
    tasks = _by_task(dumps)
    by_key = {}  # type: Dict[str, Any]
    for op in graph.ops:
        by_key.setdefault(sanitize(op.name), op)
    entries, unreadable = [], []  # type: List[Dict[str, Any]], List[Dict[str, str]]
    for ref in sorted(opdebug, key=lambda r: (r.name.timestamp, r.path)):
        try:
            _, record = read_opdebug_file(ref.path)
        except (OSError, ValueError, FormatError) as exc:
            unreadable.append({"file": ref.path, "reason": str(exc)})
            continue
        for entry in record.entries:
            if not _reports(entry, record.layout):
                continue
            task, stream = entry.get("task_id"), entry.get("stream_id")
            dump = _dump_for(tasks.get((task, stream), ()), ref.name.timestamp)
            npu_op, op_type, originals = _op_of(by_key, dump) if dump is not None else (None, None, [])
            entries.append({
                "order": len(entries), "timestamp": ref.name.timestamp, "file": ref.path, "unit": entry.unit,
                "model_id": entry.get("model_id"), "task_id": task, "stream_id": stream,
                "status": list(entry.status), "npu_op": npu_op, "op_type": op_type, "original_ops": originals,
                "dump_file": dump.path if dump is not None else None})
    return {"opdebug_files": len(opdebug), "entries": entries, "unreadable": unreadable}
