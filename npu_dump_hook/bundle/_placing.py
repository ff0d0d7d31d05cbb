"""Placing the payload and streaming data/bundle.json around it (:func:`write_payload_and_json`).

What it writes in the staging folder::

    STAGE/
      data/<rel>            every planned file, hard-linked or copied (a staged one is only hashed)
      data/bundle.json      head keys, "files" (one line per entry, in plan order), coverage, warnings
      .files-<k>.part       share k's bundle.json lines while its child runs (gone before return)

Many small files cost Python time per file (link, read, hash, name, header, JSON line), not
I/O, and one thread runs that Python. Where forking is safe (``npu_dump_hook._forked``: no other
thread, no TensorFlow; so the CLI and scripts that only collect, never a training process) and
the files are many and small, the sorted plan is cut into one share per core::

    cuts = _share_cuts(plan, workers)        # [0, len(plan)], or one share per core
    fork a child for each share but the first: it places and describes its files and writes
        their lines to its part file; shared counters tell the parent how far it got
    place the first share here, writing its lines (progress: these files + the children's)
    for each child's share, in plan order:
        take it: its part file appended to bundle.json, its manifest rows, counts, op names
            and warnings added, or, if the child failed in any way (raised, killed, exited,
            handed back something else): remove what it placed, place the share here

So the bundle, and any error (named as :class:`FileError`), is the one a single process gives.
"""
import gc
import hashlib
import json
import mmap
import os
import struct
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .._forked import ForkedCall, fork_is_safe, usable_cores
from ..formats.names import base_op_name
from . import _fs
from ._listing import DumpListing
from ._spec import BUNDLE_JSON, DATA_DIR
from .describe import (CoverageTally, GraphOps, control_flow_coverage, coverage, describe_dump_folder_file_named,
                       not_applicable_coverage)

__all__ = ["FileError", "Tally", "write_payload_and_json"]

_FORK_MIN_SHARE = 2048  # files per share below which a fork costs more than it saves
_FORK_MAX_MEAN_BYTES = _fs.INLINE_BYTES  # larger files: the thread pool already hashes them on every core
_PART_CHUNK = 1 << 20
_COUNT_EVERY = 64  # files between two progress counts (a child's, and the parent's look at them)
_COUNT_BYTES = 64 << 20  # bytes placed after which the parent hands its count over sooner
_NEVER = 1 << 64  # more files and bytes than a child's count can say
_LINES_FLUSH = 256  # bundle.json lines joined, encoded and hashed at once


class FileError(OSError):
    """An OS error placing one payload file (``what`` names the source and the operation)."""

    def __init__(self, cause: OSError, what: str, target: str) -> None:
        super().__init__(cause.errno, cause.strerror, target)
        self.cause, self.what, self.target = cause, what, target


class Tally(object):
    """What placement accumulates: BagIt payload rows, link/copy counts, the dumped op names' coverage,
    and ``listing``: the dump-folder files placed in this process (:class:`._listing.DumpListing`; None
    when there is none to hand over)."""

    def __init__(self, dumped: Any = None, listing: Optional[DumpListing] = None) -> None:
        self.payload = []  # type: List[Tuple[str, int, str]]
        self.counts = {"hardlink": 0, "copy": 0, "staged": 0}
        self.dumped = dumped if dumped is not None else CoverageTally(None)
        self.coverage = {}  # type: Dict[str, Any]
        self.listing = listing


class _HashingWriter(object):
    """A binary file that counts and hashes what is written (bundle.json is hashed once)."""

    def __init__(self, path: str) -> None:
        self._out = open(path, "wb")
        self._digest = hashlib.sha256()
        self.size = 0
        self.entries = 0  # ``files`` entries written (the first has no comma before it)

    def write(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def write_bytes(self, data: bytes) -> None:
        self._out.write(data)
        self._digest.update(data)
        self.size += len(data)

    def close(self) -> str:
        self._out.close()
        return self._digest.hexdigest()


class _NameList(list):
    """A child share's dumped op names, in the order the parent's CoverageTally takes them."""

    add = list.append


class _ChildCounts(object):
    """Files and bytes each child has placed so far, in an anonymous map shared with the parent
    (made before the forks), for progress only: what the parent reports never counts a file twice."""

    _SLOT = struct.Struct("<QQ")

    def __init__(self, children: int) -> None:
        self._map = mmap.mmap(-1, self._SLOT.size * max(1, children))
        self.reported = [[0, 0] for _ in range(children)]  # what the parent has reported of each

    def store(self, child: int, files: int, nbytes: int) -> None:
        """In child ``child`` (0-based): it has placed ``files`` files of ``nbytes`` bytes."""
        self._SLOT.pack_into(self._map, child * self._SLOT.size, files, nbytes)

    def news(self) -> Tuple[int, int]:
        """Files and bytes the children placed since the last call (marked as reported)."""
        files = nbytes = 0
        for child, seen in enumerate(self.reported):
            now_files, now_bytes = self._SLOT.unpack_from(self._map, child * self._SLOT.size)
            if now_files > seen[0]:
                files, nbytes = files + now_files - seen[0], nbytes + max(0, now_bytes - seen[1])
                seen[0], seen[1] = now_files, max(now_bytes, seen[1])
        return files, nbytes

    def stop(self, child: int) -> int:
        """Count no more of child ``child`` (its share is redone here, which counts its own
        files); the files of it already reported."""
        reported = self.reported[child][0]
        self.reported[child] = [_NEVER, _NEVER]  # what it stored later is not news
        return reported

    def close(self) -> None:
        self._map.close()


# ------------------------------------------------------------------------------------ writing
def write_payload_and_json(stage: str, head: Dict[str, Any], plan: List[Any], ops: Optional[GraphOps],
                           link: str, checksum: str, report: Any, workers: Optional[int],
                           warnings: List[str], dumps: bool = True,
                           control_flow: Optional[Mapping[str, Any]] = None) -> Tally:
    """Place every planned file and write data/bundle.json around the stream of entries:
    head keys, ``files`` (one line per entry), then ``coverage`` and ``warnings``. A bundle
    that holds no NPU dump by definition (``dumps=False``: reference) has coverage not applicable.
    ``control_flow``: the hook's census of the captured step's control-flow ops (adds
    ``coverage.control_flow``/``not_executed`` and, when some have no dump file, a warning)."""
    data = os.path.join(stage, DATA_DIR)
    for rel_dir in sorted({p.rel.rpartition("/")[0] for p in plan}):
        os.makedirs(_fs.safe_join(data, rel_dir), exist_ok=True)
    tally = Tally(CoverageTally(ops), DumpListing.of_head(head))
    out = _HashingWriter(os.path.join(data, BUNDLE_JSON))
    try:
        out.write("{\n")
        for key, value in head.items():
            out.write(" {}: {},\n".format(json.dumps(key), json.dumps(value, sort_keys=True)))
        out.write(' "files": [')
        _Shares(stage, plan, link, checksum, report, workers, warnings).write(out, tally)
        tally.coverage = coverage(ops, tally.dumped) if dumps else not_applicable_coverage()
        if dumps and control_flow:
            note = control_flow_coverage(tally.coverage, control_flow, tally.dumped)
            if note:
                warnings.append(note)
        out.write("\n ],\n \"coverage\": {},\n \"warnings\": {}\n}}\n".format(
            json.dumps(tally.coverage), json.dumps(warnings)))
    finally:
        digest = out.close()
    tally.payload.append((BUNDLE_JSON, out.size, digest))
    return tally


def _json_encoder() -> Any:
    """``json.dumps(entry)`` for an entry of plain dicts, lists, strings, numbers and None: the C
    encoder json.dumps itself builds on every call, with its default arguments, built once (half
    the cost of a file's line). Without a circular check: an entry is built here, never circular.
    Where the C encoder is missing, json.dumps."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.dumps
    encode = make(None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None,
                  ": ", ", ", False, False, True)  # as json.dumps: ensure_ascii, allow_nan, unsorted keys
    return lambda entry: "".join(encode(entry, 0))


_entry_json = _json_encoder()


def _share_cuts(plan: List[Any], workers: Optional[int]) -> List[int]:
    """Where the plan is cut into shares: ``[0, ..., len(plan)]``; one share unless forking
    pays (many files, small on average, forking safe, more than one core and worker)."""
    shares = min(usable_cores(), workers or usable_cores(), len(plan) // _FORK_MIN_SHARE)
    if shares < 2 or sum(p.size for p in plan) > _FORK_MAX_MEAN_BYTES * len(plan) or not fork_is_safe():
        return [0, len(plan)]
    return [len(plan) * k // shares for k in range(shares)] + [len(plan)]


class _Shares(object):
    """The plan's shares, placed here and by forked children (see the module docstring)."""

    def __init__(self, stage: str, plan: List[Any], link: str, checksum: str, report: Any,
                 workers: Optional[int], warnings: List[str]) -> None:
        self.stage, self.data, self.plan = stage, os.path.join(stage, DATA_DIR), plan
        self.link, self.checksum, self.report, self.workers, self.warnings = link, checksum, report, workers, warnings
        self.cuts = _share_cuts(plan, workers)
        self.counts = _ChildCounts(len(self.cuts) - 2)

    def write(self, out: _HashingWriter, tally: Tally) -> None:
        """Place every share, writing their lines to ``out`` in plan order."""
        children = self._fork()
        if children:  # the children's files are not listed here: no listing to hand over
            tally.listing = None
        collecting = gc.isenabled()
        if children:  # one thread (fork_is_safe): pausing the collector affects nothing else
            gc.disable()
        try:
            self._write_here(out, tally, 0)
            for child, call in enumerate(children):
                if not self._take(out, tally, child, call):
                    self._clear(child + 1)
                    self._write_here(out, tally, child + 1, counted=self.counts.stop(child))
        finally:
            if collecting:
                gc.enable()
            for child, call in enumerate(children):
                if call is not None:
                    call.abandon()
                _remove(self._part_path(child))
            self.counts.close()

    def _fork(self) -> List[Optional[ForkedCall]]:
        """A forked child for each share but the first (None where the fork failed: that share
        is then placed here)."""
        children = []  # type: List[Optional[ForkedCall]]
        for child in range(len(self.cuts) - 2):
            try:
                children.append(ForkedCall(_in_child, self, child))
            except OSError:
                children.append(None)
        return children

    def _write_here(self, out: _HashingWriter, tally: Tally, share: int, counted: int = 0) -> None:
        """Place and describe share ``share`` in this process, writing its bundle.json lines;
        ``counted``: how many of its first files progress already has (placed by a failed child)."""
        start, stop = self.cuts[share], self.cuts[share + 1]
        data, link, checksum = self.data, self.link, self.checksum
        share_plan = self.plan[start:stop]
        if all(p.size < _fs.INLINE_BYTES for p in share_plan):  # all run here anyway: no pool to start and feed
            placed_items = (place_one(data, p, link, checksum) for p in share_plan)  # type: Any
        else:
            placed_items = _fs.parallel_map(lambda p: place_one(data, p, link, checksum), share_plan,
                                            self.workers, inline=lambda p: p.size < _fs.INLINE_BYTES)
        lines = []  # type: List[str]  # written every _LINES_FLUSH files: one encode and hash
        try:
            self._place_here(placed_items, out, tally, counted, lines)
        finally:  # (a FileError: the lines before it are written, as one by one)
            out.write("".join(lines))

    def _place_here(self, placed_items: Any, out: _HashingWriter, tally: Tally, counted: int,
                    lines: List[str]) -> None:
        """Tally, list and write the lines of ``placed_items``; progress (these files, past the
        first ``counted``, and the children's) is counted here and handed to the report every
        _COUNT_EVERY files or _COUNT_BYTES bytes and at the end: a few dozen calls for 1,000s of
        small files, and a large file still moves the bar."""
        children = bool(self.counts.reported)
        held_files = held_bytes = 0
        try:
            for done, (item, placed, entry) in enumerate(placed_items, 1):
                rel = entry["path"]  # item.rel, read once by place_one
                parsed = tally_one(tally, rel, placed, entry, self.warnings)
                if tally.listing is not None and not tally.listing.add(rel, placed.size, parsed):
                    tally.listing = None
                lines.append((",\n  " if out.entries else "\n  ") + _entry_json(entry))
                out.entries += 1
                if len(lines) >= _LINES_FLUSH:
                    out.write("".join(lines))
                    del lines[:]
                if done > counted:
                    held_files, held_bytes = held_files + 1, held_bytes + placed.size
                if done % _COUNT_EVERY == 0 or held_bytes >= _COUNT_BYTES:
                    files, nbytes = self.counts.news() if children else (0, 0)
                    files, nbytes, held_files, held_bytes = files + held_files, nbytes + held_bytes, 0, 0
                    if files:  # (handed over before the call: a callback that raises never sees them twice)
                        self.report.update(files, nbytes)
        finally:
            if held_files:
                self.report.update(held_files, held_bytes)

    def place_in_child(self, child: int) -> Tuple[List[Tuple[str, int, str]], Dict[str, int], List[str], List[str]]:
        """In forked child ``child``: place and describe its share (never the first), write its
        bundle.json lines to its part file; return the manifest rows, link/copy counts, dumped op
        names and warnings, all marshal-able."""
        # no collector here: it would walk (and copy, page by page) the parent's whole heap,
        # and the child makes no cycles worth collecting before it exits
        gc.disable()
        start, stop = self.cuts[child + 1], self.cuts[child + 2]
        tally = Tally(_NameList())
        warnings = []  # type: List[str]
        nbytes = 0
        with open(self._part_path(child), "w", encoding="utf-8") as lines:
            for index in range(start, stop):
                item, placed, entry = place_one(self.data, self.plan[index], self.link, self.checksum)
                tally_one(tally, entry["path"], placed, entry, warnings)
                lines.write(",\n  " + _entry_json(entry))  # the first share is never empty
                nbytes += placed.size
                if (index - start + 1) % _COUNT_EVERY == 0:
                    self.counts.store(child, index - start + 1, nbytes)
        return tally.payload, tally.counts, list(tally.dumped), warnings

    def _take(self, out: _HashingWriter, tally: Tally, child: int, call: Optional[ForkedCall]) -> bool:
        """Append a child's share to bundle.json and the tally; False (nothing taken) if it failed."""
        ok, value = call.result() if call is not None else (False, None)
        if not ok or not _is_share_result(value, self.cuts[child + 2] - self.cuts[child + 1]):
            return False
        rows, counts, names, share_warnings = value
        with open(self._part_path(child), "rb") as part:
            while True:
                chunk = part.read(_PART_CHUNK)
                if not chunk:
                    break
                out.write_bytes(chunk)
        out.entries += len(rows)
        tally.payload.extend(rows)
        for how, count in counts.items():
            tally.counts[how] += count
        for name in names:
            tally.dumped.add(name)
        self.warnings.extend(share_warnings)
        seen = self.counts.reported[child]
        share_bytes = sum(size for _rel, size, _sha in rows)
        self.report.update(len(rows) - seen[0], max(0, share_bytes - seen[1]))
        seen[0], seen[1] = len(rows), share_bytes
        return True

    def _clear(self, share: int) -> None:
        """Remove what a failed child may have placed of share ``share`` (never a staged file:
        that one was there before and is only hashed)."""
        for index in range(self.cuts[share], self.cuts[share + 1]):
            item = self.plan[index]
            if not item.staged:
                _remove(target_path(self.data, item))

    def _part_path(self, child: int) -> str:
        return os.path.join(self.stage, ".files-{}.part".format(child + 1))


def _in_child(shares: _Shares, child: int) -> Any:
    return shares.place_in_child(child)


def _is_share_result(value: Any, expected_rows: int) -> bool:
    """Whether ``value`` has the shape :meth:`_Shares.place_in_child` returns, a row per file."""
    if not (isinstance(value, tuple) and len(value) == 4):
        return False
    rows, counts, names, share_warnings = value
    return (isinstance(rows, list) and len(rows) == expected_rows and isinstance(counts, dict)
            and set(counts) <= {"hardlink", "copy", "staged"} and isinstance(names, list)
            and isinstance(share_warnings, list))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ------------------------------------------------------------------------------- one file
def target_path(data: str, item: Any) -> str:
    """Where planned ``item`` goes under ``data``."""
    return _under(data, item.rel)


def _under(data: str, rel: str) -> str:
    """Where the planned file of bundle path ``rel`` goes under ``data``."""
    # rel was checked by _fs.safe_relpath (prefix) and built from directory entry names
    # (never "", "." or ".."), all with "/": a plain join is the same path, without re-checking
    # every file (about 5 us of 100k small files' per-file cost)
    return data + os.sep + rel if os.sep == "/" else _fs.safe_join(data, rel)


def place_one(data: str, item: Any, link: str, checksum: str) -> Tuple[Any, _fs.PlacedFile, Dict[str, Any]]:
    """Place planned ``item`` under ``data``: (item, how it was placed, its bundle.json entry)."""
    rel, kind = item.rel, item.kind  # (a dump file's rel is built at each read: read once here)
    target = _under(data, rel)
    try:
        if item.staged:
            size, digest = _fs.sha256_file(target)
            placed = _fs.PlacedFile(size, digest, "staged")
        else:
            # the manifest needs digests; a dump file's header is then decoded from the bytes hashed
            placed = _fs.place_file(item.src, target, link=link, checksum=True, keep_head=kind == "dump")
    except OSError as exc:
        if item.staged:
            raise FileError(exc, "hashing", target) from exc
        action = "copying" if link == "copy" else "linking or copying"
        raise FileError(exc, "{} {} to".format(action, item.src), target) from exc
    entry = {"path": rel, "size": placed.size, "sha256": placed.sha256 if checksum == "sha256" else None}
    if kind == "dump":
        described, parsed = describe_dump_folder_file_named(rel, target, item.mapping, placed.head, placed.size,
                                                            placed.fields)
        entry.update(described)
        if parsed is not None:
            entry["_parsed"] = parsed  # for tally_one (a reader's listing), never written
        if placed.head is not None or placed.fields is not None:  # results wait in a window: keep no file bytes there
            placed = _fs.PlacedFile(placed.size, placed.sha256, placed.how)
    else:
        entry["kind"] = kind
    if item.parse_error is not None:
        entry["parse_error"] = item.parse_error
    return item, placed, entry


def tally_one(tally: Tally, rel: str, placed: _fs.PlacedFile, entry: Dict[str, Any], warnings: List[str]) -> Any:
    """Count one placed file: its manifest row, how it was placed, its warning, its op name. Returns
    the DumpName :func:`place_one` parsed from its name (None: none), taken out of ``entry``."""
    tally.payload.append((rel, placed.size, placed.sha256 or ""))
    tally.counts[placed.how] += 1
    if "_warning" in entry:
        warning = entry.pop("_warning")
        if warning:
            warnings.append(warning)
    parsed = entry.pop("_parsed", None)
    if entry["kind"] in ("dump", "stats") and entry.get("op_name"):
        name = entry["op_name"]
        # base_op_name strips only a "_lxslice{N}" suffix and a "..._sgt_graph_{N}_" prefix
        tally.dumped.add(base_op_name(name) if "_lxslice" in name or "sgt_graph_" in name else name)
    return parsed
