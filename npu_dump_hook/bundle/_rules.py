"""The reading rules of docs/bundle-format.md section 4: the checks of the paths bundle.json
names, shared by :class:`~npu_dump_hook.bundle.BundleView` (before it hands a path out) and
``verify`` (which lists the same rules as problems)::

    read_paths(doc)                   (where, path, files[] entry or None) of every path a
                                      consumer reads: files[].path, graph.file, graph.json
    unsafe_read_paths(doc)            (where, path, rule) of those _fs.safe_relpath refuses
    symlink_on(data_dir, parts)       the first of data/, data/a, data/a/b ... that is a symlink
    file_rule(local, entry)           lstat of a payload file: a regular file of the listed size
    size_rule(entry, size)            a size that is not the listed one
    sha256_rule(entry, digest)        a null sha256 where one is required, or another digest
    manifest_rule(root, rel, digest)  the bag's manifest row for ``rel`` is absent or another digest
    open_regular(path)                a read handle that never blocks on a FIFO nor follows a link
                                      (npu_dump_hook._files, shared with formats and compare)

Each ``*_rule`` returns None when the rule holds, else the rule broken in words (the caller
names the bundle and the path). Nothing here follows a symlink or opens a special file.
"""
import os
import stat
from typing import Any, List, Mapping, Optional, Sequence, Set, Tuple

from .._files import open_regular, special_kind
from ..errors import UnsafePathError
from . import _fs
from ._bagit import MANIFEST, manifest_digest
from ._spec import DATA_DIR, VERIFIED_PARTS

__all__ = ["read_paths", "unsafe_read_paths", "symlink_on", "file_rule", "size_rule", "sha256_rule", "needs_sha256",
           "manifest_rule", "open_regular", "special_kind"]


def read_paths(doc: Mapping[str, Any]) -> List[Tuple[str, Any, Optional[Mapping[str, Any]]]]:
    """(where in bundle.json, the path it records, its files[] entry or None) of every payload path
    a consumer may read; paths that are not strings are left to the type checks."""
    return [("files[{}]".format(at) if entry is not None else "graph.{}".format(at), path, entry)
            for at, path, entry in _recorded(doc)]


def _recorded(doc: Mapping[str, Any]) -> List[Tuple[Any, str, Optional[Mapping[str, Any]]]]:
    """:func:`read_paths` with the files[] index or graph key for where (nothing formatted yet)."""
    found = []  # type: List[Tuple[Any, str, Optional[Mapping[str, Any]]]]
    listed = doc.get("files")
    for number, entry in enumerate(listed if isinstance(listed, list) else []):
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"]:
            found.append((number, entry["path"], entry))
    graph = doc.get("graph")
    for key in ("file", "json"):
        value = graph.get(key) if isinstance(graph, dict) else None
        if isinstance(value, str) and value:
            found.append((key, value, None))
    return found


def _every_path(doc: Mapping[str, Any]) -> List[Any]:
    """The ``path`` of every files[] entry and graph.file/graph.json, gathered at C speed: a superset
    of the read paths when each entry is an object with a path ([None]: not so, look at each)."""
    listed = doc.get("files")
    graph = doc.get("graph")
    try:
        paths = [entry["path"] for entry in listed] if isinstance(listed, list) else []
    except (TypeError, KeyError):  # an entry that is no object or has no path: read_paths skips it
        return [None]
    if isinstance(graph, dict):
        paths.extend(graph[key] for key in ("file", "json") if graph.get(key))
    return paths


def unsafe_read_paths(doc: Mapping[str, Any]) -> List[Tuple[str, str, str]]:
    """(where, path, rule) of the :func:`read_paths` that :func:`._fs.safe_relpath` (verify's rule)
    refuses: absolute, ``..``, NUL, empty. Strings only, no file looked at; a document whose paths
    are all plain is passed at C speed (:func:`._fs.plainly_relative`), so opening a bundle listing
    100,000s of files costs next to nothing more."""
    if _fs.plainly_relative(_every_path(doc)):
        return []
    found = []
    for where, path, _entry in read_paths(doc):
        try:
            _fs.safe_relpath(path)
        except UnsafePathError as exc:
            found.append((where, path, str(exc)))
    return found


def symlink_on(data_dir: str, parts: Sequence[str], clean: Optional[Set[Tuple[str, ...]]] = None) -> Optional[str]:
    """``data/...`` of the first of ``data_dir`` and its components along ``parts`` that is a
    symlink (never followed), or None; stops at the first component that does not exist.

    ``clean``: the caller's set of ``parts`` prefixes already found to exist and be no symlink
    (``()``: ``data_dir`` itself); those are not looked at again and the folders found clean
    are added. A caller checking many files of one folder (a bundle's 1,000s of dump files)
    then makes one ``lstat`` per file instead of one per path component."""
    start = 0  # the first depth looked at: every shallower one is a known clean folder
    if clean is not None:
        while start < len(parts) and tuple(parts[:start]) in clean:
            start += 1
    current = os.path.join(data_dir, *parts[:start - 1]) if start else data_dir
    for depth in range(start, len(parts) + 1):
        if depth:
            current = os.path.join(current, parts[depth - 1])
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            return "/".join([DATA_DIR] + list(parts[:depth]))
        if clean is not None and depth < len(parts):  # a folder on the way (the last part may be a file)
            clean.add(tuple(parts[:depth]))
    return None


def file_rule(local: str, entry: Optional[Mapping[str, Any]]) -> Optional[str]:
    """None when ``local`` is absent (the caller decides what absence means) or a regular file
    of the size ``entry`` lists; else the rule it breaks."""
    try:
        found = os.lstat(local)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "cannot be looked at: {}".format(exc.strerror or exc)
    kind = special_kind(found.st_mode)
    if kind is not None:
        return "is {} (a bundle holds regular files only; not read)".format(kind)
    return size_rule(entry, found.st_size) if entry is not None else None


def size_rule(entry: Mapping[str, Any], size: int) -> Optional[str]:
    listed = entry.get("size")
    if isinstance(listed, int) and not isinstance(listed, bool) and listed != size:
        return "size {} but bundle.json says {}".format(size, listed)
    return None


def needs_sha256(path: str) -> bool:
    """True for payload paths whose files are restored, so must be verifiable (init/, inputs/)."""
    return path.split("/", 1)[0] in VERIFIED_PARTS


def sha256_rule(entry: Mapping[str, Any], digest: Optional[str]) -> Optional[str]:
    """The sha256 rule of a files[] ``entry`` whose bytes hash to ``digest`` (None: not hashed):
    a null sha256 is "not verifiable" where :func:`needs_sha256`, another digest a change."""
    listed = entry.get("sha256")
    if listed is None and needs_sha256(str(entry.get("path"))):
        return "not verifiable: bundle.json lists no sha256 for it (required under {}/)".format(
            "/, ".join(VERIFIED_PARTS))
    if isinstance(listed, str) and digest is not None and digest != listed:
        return "sha256 differs from bundle.json"
    return None


def manifest_rule(root: str, rel: str, digest: str) -> Optional[str]:
    """The rule broken by the bag at ``root`` whose payload file ``rel`` (``data/...``) hashes to
    ``digest``: no regular manifest-sha256.txt (never through a symlink, never a FIFO), no row
    for ``rel`` in it, or a row with another sha256. The manifest is streamed up to that row
    (:func:`._bagit.manifest_digest`); the tag manifest is not looked at (``verify`` checks it)."""
    try:
        with open_regular(os.path.join(root, MANIFEST)) as handle:
            listed = manifest_digest(handle, rel)
    except FileNotFoundError:
        return "the bag has no {} to check it against (a bundle is a BagIt bag)".format(MANIFEST)
    except OSError as exc:  # a symlink (ELOOP), a FIFO or folder (open_regular's error), unreadable
        return "{} cannot be read: {}".format(MANIFEST, exc.strerror or exc)
    if listed is None:
        return "{} has no row for it".format(MANIFEST)
    if listed != digest:
        return "sha256 {} but its row in {} says {}: edited after the bundle was written".format(
            digest, MANIFEST, listed)
    return None
