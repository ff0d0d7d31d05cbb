"""What a bundle writer placed under ``data/dump``, handed to a reader in the same process.

The hook's run summary checks the bundle it has just written (NaN/Inf origin, overflow report;
:func:`npu_dump_hook.compare.golden_free_checks`). Re-opening it (bundle.json parsed and
type-checked, every listed dump file's path checked) and walking its dump tree again cost more
than the checks themselves on a step of 1,000s of small dump files. The writer knows that tree:
:class:`DumpListing` keeps it (folder -> file name -> size) with the two things a reader picks
by, the Build graph's path and the captured step.

It is a claim, not proof: the reader compares it with the folders on disk (one ``scandir`` per
folder: the same folders, the same regular files of the same sizes, no symlink, no special file)
and reads the bundle as usual, under its reading rules, when anything differs; the dump files' contents are checked file by file against their
write-time notes by whoever reads them (:mod:`npu_dump_hook._ledger`). A bundle of more than
:data:`LISTING_MAX_FILES` dump-folder files, or one placed partly by forked children, has none.

It also hands over the dump names the writer parsed to describe the files (``parsed``), so the
reader does not parse the same names again: only plain names (a hashed one is resolved through
its folder's mapping.csv, which the reader reads itself), for at most :data:`PARSED_MAX_FILES` files.
"""
from typing import Any, Dict, Optional

from ._graph_text import is_compressed

__all__ = ["DumpListing", "LISTING_MAX_FILES", "PARSED_MAX_FILES"]

#: Dump-folder files above which no listing is kept (memory stays flat in the file count: ~100
#: bytes a file, so at most a few MB).
LISTING_MAX_FILES = 1 << 15
#: Dump-folder files whose parsed names are handed over at most (~0.5 KB a name: a few MB).
PARSED_MAX_FILES = 1 << 13
_DUMP_PREFIX = "dump/"


class DumpListing(object):
    """``graph``: the Build graph's data-relative path (None: none, or stored compressed: a reader
    then opens the bundle, which expands it); ``captured_step``: the run's
    captured step (None: not recorded); ``folders``: data-relative folder under ``dump/`` -> the
    names of the files placed there -> their sizes; ``parsed``: the same folder -> file name -> its
    parsed plain dump name (:class:`~npu_dump_hook.formats.names.DumpName`), for the files that have one."""

    __slots__ = ("graph", "captured_step", "folders", "files", "parsed")

    def __init__(self, graph: Optional[str], captured_step: Any) -> None:
        self.graph = graph
        self.captured_step = captured_step
        self.folders = {}  # type: Dict[str, Dict[str, int]]
        self.files = 0
        self.parsed = {}  # type: Dict[str, Dict[str, Any]]

    @classmethod
    def of_head(cls, head: Dict[str, Any]) -> "DumpListing":
        """An empty listing for the bundle.json head keys ``head`` (``graph.file``, ``run.captured_step``)."""
        graph, run = head.get("graph"), head.get("run")
        graph_file = graph.get("file") if isinstance(graph, dict) else None
        return cls(graph_file if isinstance(graph_file, str) and not is_compressed(graph_file) else None,
                   run.get("captured_step") if isinstance(run, dict) else None)

    def add(self, rel: str, size: int, parsed: Any = None) -> bool:
        """Note payload file ``rel`` (data-relative) of ``size`` bytes if it lies under ``dump/``, with
        ``parsed``, the DumpName its plain name parsed to (None: not a dump name, or a hashed one);
        False once the listing is over :data:`LISTING_MAX_FILES` files (the caller then drops it)."""
        if not rel.startswith(_DUMP_PREFIX):
            return True
        self.files += 1
        folder, _, name = rel.rpartition("/")
        names = self.folders.get(folder)
        if names is None:
            names = self.folders[folder] = {}
        names[name] = size
        if parsed is not None and parsed.hashed_name is None and self.files <= PARSED_MAX_FILES:
            self.parsed.setdefault(folder, {})[name] = parsed
        return self.files <= LISTING_MAX_FILES
