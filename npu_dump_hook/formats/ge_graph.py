"""GE graph dumps (``ge_proto_*.txt``): the scanner; the full parse, the text writer, the msaccucmp
JSON and the builders live in :mod:`.ge_text`, :mod:`.ge_json` and :mod:`.ge_build` and are
importable from here too.

Format (docs/reference/ascend-dump-formats.md §2.3): protobuf text format of ``ge.proto.ModelDef``
(:mod:`.ge_schema`) as C++ ``TextFormat::Print`` writes it — the *canonical layout*: one field
or block delimiter per line, 2 spaces of indentation per nesting level, ``name {`` opens and
``}`` closes a block, fields in field-number order, map entries as ``attr { key: ... value
{...} }`` sorted by key, strings double-quoted with C escapes (never a raw newline inside).

Scanning (:func:`iter_graphs`) extracts per graph its name and per op the name, type, id,
inputs, ``_no_task``, ``_datadump_original_op_names`` and, per output_desc,
``_datadump_origin_name`` / ``_datadump_origin_output_index`` (§2.4, §2.5):

* the general path (:mod:`._ge_scan_general`): a tokenizer that follows the full text-format grammar (``<>``,
  ``;``/``,``, comments, one-line blocks, list values, single quotes, adjacent-string
  concatenation) and tracks the field path of open blocks; it reads the file skeleton and
  every op the fast path declines, and raises :class:`GraphFormatError` (byte offset, rule)
  on malformed text;
* a fast path for the op blocks of a graph (:mod:`._ge_scan_fast`, with the skeleton shapes of
  :mod:`._ge_scan_shape`): an op is split at its double
  quotes; the text between the strings, strings emptied and digits made 0, must be laid out
  exactly as C++ writes it (one field or delimiter per line, 2 spaces per nesting level,
  nothing else). Then that text is the op's whole token structure, so what the general
  path would extract from it is worked out once per such skeleton and per set of attr keys
  and replayed on each op's strings and numbers; blanks and CR at line ends (trailing
  whitespace, CRLF files) are dropped first, as they are never inside a string. Any other
  op (comments, blank lines, tabs or other indentation, several fields on a line, a string
  with a raw newline or a bad escape, a conversion whose outcome the skeleton cannot tell)
  is declined and read by the general path, from where the declined op starts.

The result is the general path's on every input (tested: fuzzed layouts, same result or
same error at the same offset), and the work is linear in the input size either way. Peak
memory stays under 16 x the file size + 64 MB: the tokenizer matches no regex whose repeated
group grows with the input (blanks and comments are skipped 64 pieces per match, a string's
end is found with bytes.find, escapes are resolved in 64 KiB pieces), so what is held is the
file's bytes and one OpSummary per op (for 100,000 empty ``op {}`` blocks, ~17x their text).

This module drives the scan: it runs the general path with the fast path, shares a large
file's ops with forked workers (``workers=``), and reads files through a memory map.
"""
import gc
import logging
import mmap
import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from .._forked import ForkedCall, fork_is_safe
from ..errors import GraphFormatError
from . import ge_ir_schema as ge_schema  # the GE-IR (ge.proto) messages
# The scanner's parts, in modules of their own (the private names tests reach, as before):
from ._ge_scan_fast import FastOps as _FastOps, OP_LINE as _OP_LINE
from ._ge_scan_general import GeneralScan as _GeneralScan, OpBuilder as _OpBuilder, Tokens as _Tokens
from ._ge_scan_shape import use_plain_tuples
from ._ge_summary import GraphCount, GraphSummary, OpSummary, OutputOrigin
# The rest of the GE-graph API, in modules of their own, importable from here as before:
from .ge_build import make_model, make_op, make_tensor_desc, set_attr
from .ge_json import JSON_BLACK_FIELDS, to_msaccucmp_json, write_msaccucmp_json
from .ge_text import format_model, parse_model, parse_model_text, write_graph_text

__all__ = [
    "OutputOrigin",
    "OpSummary",
    "GraphSummary",
    "GraphCount",
    "iter_graphs",
    "iter_graph_counts",
    "iter_ops",
    "scan_graph",
    "first_graph_name",
    "op_types",
    "contains_op_type",
    "parse_model",
    "parse_model_text",
    "to_msaccucmp_json",
    "write_msaccucmp_json",
    "JSON_BLACK_FIELDS",
    "format_model",
    "write_graph_text",
    "set_attr",
    "make_tensor_desc",
    "make_op",
    "make_model",
]

_LOG = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]


# --------------------------------------------------------------------------- the scan

_WINDOW = 1 << 20  # bytes of data the fast path splits at a time
#: Below this file size a scan is not shared with forked workers: a fork and the hand-back of
#: the results cost more than the share saves.
_PARALLEL_MIN_BYTES = 4 << 20
#: Summaries are handed back from a worker at about the cost of scanning a 1 KB op, so a scan
#: that builds them is shared only when the file's ops are larger than that on average (GE
#: Build graphs: about 1.5 KB); an op count is always worth sharing.
_PARALLEL_MIN_OP_BYTES = 1 << 10
_SAMPLE_BYTES = 1 << 20  # where the average op size is estimated
#: At most this many processes share a scan, and one more than the file has _PARALLEL_MIN_BYTES:
#: more only add forks and shape caches built again (a 64-core host, a 60 MB graph).
_MAX_WORKERS = 8


def _hand_off(fast: _FastOps, workers: int) -> None:
    """Fork ``workers - 1`` children, each reading the canonical ops that follow one
    another from an op line near the start of its share of the file (where the scan of
    ``fast`` will stop and take their result instead: ``FastOps._handed_back``). What a child hands
    back is what ``fast.ops_at`` would give from that op on, so the result is the
    same whether or not a child succeeds, is used, or is abandoned."""
    if fast.size < _PARALLEL_MIN_BYTES:
        return
    workers = min(workers, _MAX_WORKERS, 1 + fast.size // max(1, _PARALLEL_MIN_BYTES))
    if workers < 2 or not fork_is_safe():
        return
    if not fast.count_only:
        ops_in_sample = fast.data[:_SAMPLE_BYTES].count(_OP_LINE)
        if ops_in_sample * _PARALLEL_MIN_OP_BYTES > min(fast.size, _SAMPLE_BYTES):
            return
    cuts = []  # type: List[int]  # offsets of the "\n" of op lines
    for share in range(1, workers):
        cut = fast.data.find(_OP_LINE, fast.size * share // workers)
        if cut < 0:
            break
        if not cuts or cut > cuts[-1]:
            cuts.append(cut)
    for cut, limit in zip(cuts, cuts[1:] + [fast.size]):
        try:
            call = ForkedCall(_read_share, fast.data, fast.path, cut, limit, fast.count_only)
        except OSError:  # no fork (limits, memory): this scan reads the rest itself
            break
        fast.expect_handoff(cut, call)


def _read_share(data: Any, path: str, cut: int, limit: int,
                count_only: bool) -> Optional[Tuple[Any, int]]:
    """In a forked child (see _hand_off): the canonical ops that follow one another
    from the op line at ``cut`` up to the op line at ``limit`` (or the end), chained as the
    general path chains ops_at calls: (count or plain-tuple summaries, offset after the
    last); None if the first op is not canonical."""
    gc.disable()  # as in _scan_steps; this process ends after the share
    if not count_only:  # the builders make plain tuples (marshal takes no namedtuple)
        use_plain_tuples()
    fast = _FastOps(data, path, count_only, _WINDOW)
    if limit < len(data):
        fast.stop_before(limit)
    tokens = _Tokens(data, path)
    ops = []  # type: List[Any]
    stop = None  # type: Optional[int]
    pos = cut + 3
    while True:
        found = fast.ops_at(pos)
        if found is None:
            break
        ops.extend(found[0])
        stop = found[1]
        if stop == limit + 1:  # the next op is the next share's
            break
        tokens.pos = stop
        pos = tokens.skip()  # what the general path does before offering the next op
    if stop is None:
        return None
    if count_only:
        return len(ops), stop
    # (only the fast path made these ops, with the plain-tuple builders)
    return ops, stop


def _scan_graphs(data: Any, path: str, fast_ops: bool = True, workers: int = 1,
                 count_only: bool = False, batch: int = 0) -> Iterator[GraphSummary]:
    """The graphs of ``data``; ``workers`` > 1 shares the fast path's work with forked
    children where that is safe; with ``count_only`` each op of a graph's ``ops`` may be
    True instead of its summary (for counting); ``batch``: see _scan_steps."""
    fast = _FastOps(data, path, count_only, _WINDOW) if fast_ops else None
    scan = _GeneralScan(data, path, fast)
    if fast is not None:
        _hand_off(fast, workers)
    try:
        for graph in _scan_steps(scan, batch):
            yield graph
    finally:
        if fast is not None:
            fast.abandon_handoffs()


def _scan_steps(scan: "_GeneralScan", batch: int = 0) -> Iterator[GraphSummary]:
    """The finished graphs of ``scan``; with ``batch``, also every ``batch`` or so ops of the
    graph being read as a GraphSummary of those ops alone (the graph's summary then holds
    only the ops after them)."""
    more = True
    while more:
        # The scan allocates only what it keeps and temporaries that refcounting frees: the
        # cycle collector, run every 700 allocations, would go over the growing result again
        # and again for nothing (up to 40% of the time). It is paused while the scan works,
        # never while the caller runs.
        collect = gc.isenabled()
        gc.disable()
        try:
            while not scan.finished and more and not (batch and len(scan.ops) >= batch):
                more = scan.step()
            finished, scan.finished = scan.finished, []
            if batch and finished and scan.ops is finished[-1].ops:
                scan.ops = []  # (the next graph's block gives it a new list anyway)
            elif batch and len(scan.ops) >= batch:
                finished.append(GraphSummary(scan.graph_name, scan.ops))
                scan.ops = []  # close_block and the fast path go on with this list
        finally:
            if collect:
                gc.enable()
        for graph in finished:
            yield graph


# --------------------------------------------------------------------------- public scan API


class _Mapped(object):
    """Read-only memory map of a file (an empty file maps to b"")."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self._file = open(self.path, "rb")
        try:
            size = os.fstat(self._file.fileno()).st_size
            self.data = (mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                         if size else b"")  # type: Any
        except BaseException:
            self._file.close()
            raise

    def __enter__(self) -> "_Mapped":
        return self

    def __exit__(self, *exc: Any) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        self._file.close()


def iter_graphs(path: PathLike, workers: int = 1) -> Iterator[GraphSummary]:
    """Yield each graph of a ge_proto text file in file order, one at a time.

    Raises GraphFormatError (path, byte offset, rule) on malformed text; graphs before the
    fault have been yielded by then. ``workers`` > 1 shares the reading of a large file
    (4 MB and more) with that many processes in all (at most 8, one more than the file has
    4 MB shares; with ops of 1 KB on average or more), forked from this one, where forking is
    safe (:func:`npu_dump_hook._forked.fork_is_safe`: no other Python thread; never pass it in a process
    that runs TensorFlow); the result is the same.
    """
    with _Mapped(path) as mapped:
        for graph in _scan_graphs(mapped.data, mapped.path, workers=workers):
            yield graph


_OP_BATCH = 4096  # ops iter_ops holds at most (besides a window's worth from the fast path)


def iter_ops(path: PathLike) -> Iterator[OpSummary]:
    """Every op of every graph of the file in file order, as :func:`iter_graphs` reads them
    (the same errors, at the same points), without holding a graph's ops: memory stays that of
    a batch of ops, not of 100,000 summaries."""
    with _Mapped(path) as mapped:
        for part in _scan_graphs(mapped.data, mapped.path, batch=_OP_BATCH):
            for op in part.ops:
                yield op


def iter_graph_counts(path: PathLike, workers: int = 1) -> Iterator[GraphCount]:
    """Yield each graph's name and op count, as :func:`iter_graphs` would give them (the same
    errors, at the same points), without building the op summaries."""
    with _Mapped(path) as mapped:
        for graph in _scan_graphs(mapped.data, mapped.path, workers=workers, count_only=True):
            yield GraphCount(graph.name, len(graph.ops))


def scan_graph(path: PathLike) -> List[GraphSummary]:
    """All graphs of a ge_proto text file (see :func:`iter_graphs`)."""
    return list(iter_graphs(path))


def first_graph_name(path: PathLike) -> str:
    """``graph[0].name``, read from the start of the file only ("" if unset).

    This is the dump ``model_name`` folder of a Build graph (§2.1). Raises GraphFormatError
    if the file holds no graph or is malformed before the name.
    """
    with _Mapped(path) as mapped:
        scan = _GeneralScan(mapped.data, mapped.path)
        while scan.step():
            if scan.graph_name_seen or scan.finished:
                return scan.graph_name
        raise GraphFormatError(mapped.path, "no graph in file", len(mapped.data))


def op_types(path: PathLike) -> Dict[str, int]:
    """Op type -> number of ops of that type, over every graph of the file."""
    counts = {}  # type: Dict[str, int]
    for graph in iter_graphs(path):
        for op in graph.ops:
            counts[op.type] = counts.get(op.type, 0) + 1
    return counts


def contains_op_type(path: PathLike, types: Iterable[str]) -> bool:
    """True as soon as an op of one of ``types`` (exact type names) is seen."""
    wanted = frozenset(types)
    return any(op.type in wanted for graph in iter_graphs(path) for op in graph.ops)
