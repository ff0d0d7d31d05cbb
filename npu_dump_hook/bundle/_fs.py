"""File-system primitives for bundles: safe paths, walking a source tree, link-or-copy, hashing.

Contract (normative for everything in this module):

* **Never modify the source.** Source files are only opened for reading or hard-linked
  (a hard link changes the inode's link count and ctime, never its bytes or mtime).
* **Never follow a symlink out of the source tree.** :func:`walk_files` yields a symlink
  only when it resolves to a regular file inside the tree (the target is then read);
  links to outside files, links to directories, devices, FIFOs and sockets are skipped
  and reported as warnings. A root that is itself a symlink is not walked (reported), and
  with ``in_tree_links=False`` (checking a bag) every symlink is reported, none is read.
* **Safe relative paths.** :func:`safe_relpath` rejects absolute paths, ``..``, NUL and
  empty names with :class:`~npu_dump_hook.errors.UnsafePathError`.
* **Link modes.** ``hardlink`` links (error if impossible), ``copy`` copies, ``auto`` links
  when possible (same file system, permitted) and copies otherwise. Copies without hashing
  use ``shutil.copyfile`` (``os.sendfile`` / ``copy_file_range`` kernel paths); copies with
  hashing read each byte once, hashing and writing the same buffer.
Atomic destinations are :mod:`._staging`; archives :mod:`._archive`.
"""
import collections
import errno
import hashlib
import logging
import itertools
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Deque, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .._atomic import atomic_write_bytes
from ..constants import LINK_MODES
from .._written import written_facts
from ..errors import BundleError, UnsafePathError

__all__ = [
    "LINK_MODES",
    "CHUNK_SIZE",
    "INLINE_BYTES",
    "safe_relpath",
    "plainly_relative",
    "safe_join",
    "is_within",
    "warn",
    "SourceFile",
    "walk_files",
    "PlacedFile",
    "place_file",
    "sha256_file",
    "sha256_file_head",
    "HEAD_BYTES",
    "parallel_map",
    "default_workers",
    "atomic_write_bytes",
]

logger = logging.getLogger(__name__)

CHUNK_SIZE = 1 << 20
#: Files below this size are cheaper to handle in the calling thread than to hand to a
#: worker: their cost is Python overhead, which threads only serialise on the GIL (with
#: GIL hand-offs at every system call, a pool made 3,000 small files ~2x slower).
INLINE_BYTES = 256 << 10
_INLINE_BACKLOG = 1024  # inline results held back behind one slow worker item
_FIRST_READ = 64 << 10  # sha256_file's first read (os.read: 8 instead of 12 us for a small file)
#: How many first bytes of a file :func:`sha256_file_head` and ``place_file(keep_head=True)`` return.
HEAD_BYTES = _FIRST_READ
# errno values meaning "a hard link is not possible here", for link="auto" fallback.
_LINK_FALLBACK_ERRNOS = frozenset(
    e for e in (errno.EXDEV, errno.EPERM, errno.EACCES, errno.EMLINK, errno.ENOTSUP,
                getattr(errno, "EOPNOTSUPP", errno.ENOTSUP), errno.ENOSYS) if e is not None
)


# -- safe paths ---------------------------------------------------------------------------
def safe_relpath(rel: str) -> str:
    """Return ``rel`` as a normalized POSIX relative path, or raise UnsafePathError.

    Rejected: non-strings, empty paths, NUL bytes, absolute paths (``/x``, ``C:/x``
    style drive roots), and any ``..`` component. ``.`` and empty components are dropped.
    """
    if not isinstance(rel, str) or not rel:
        raise UnsafePathError("empty or non-string path {!r}".format(rel), rel)
    if "\x00" in rel:
        raise UnsafePathError("path {!r} contains NUL".format(rel), rel)
    if rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        raise UnsafePathError("path {!r} is absolute".format(rel), rel)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafePathError("path {!r} escapes its root ('..')".format(rel), rel)
    if not parts:
        raise UnsafePathError("path {!r} names the root itself".format(rel), rel)
    return "/".join(parts)


def plainly_relative(paths: Sequence[str]) -> bool:
    """True only when :func:`safe_relpath` accepts every string of ``paths``, decided mostly on
    their joined text at C speed (a large bundle lists 100,000s of paths): none holds ``..`` or
    NUL, none starts absolute or with a drive, none is empty or all dots and slashes. False: some
    may be refused -- ask :func:`safe_relpath` of each, the rule itself (this is only its quick pass)."""
    try:
        text = "\n".join(paths)
    except TypeError:  # not all strings
        return False
    if ".." in text or "\x00" in text or text.startswith("/") or "\n/" in text:
        return False
    if ":" in text and any(path[1:2] == ":" for path in paths):
        return False
    return all(map(str.strip, paths, itertools.repeat("./")))  # some name in each


def safe_join(root: str, rel: str) -> str:
    """``root`` joined with the checked relative path ``rel`` (see :func:`safe_relpath`)."""
    return os.path.join(root, *safe_relpath(rel).split("/"))


def is_within(path: str, root: str) -> bool:
    """True when the absolute ``path`` is ``root`` or below it (compared as strings)."""
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root + os.sep)


# -- walking a source tree ----------------------------------------------------------------
class SourceFile(NamedTuple):
    """A regular file found under a source root: ``rel`` (POSIX, relative to the root),
    ``path`` (what to read: the file itself, or the in-tree target of a symlink), ``size``."""

    rel: str
    path: str
    size: int


def walk_files(root: str, warnings: Optional[List[str]] = None, in_tree_links: bool = True,
               skipped: Optional[List[str]] = None, quiet: bool = False) -> Iterator[SourceFile]:
    """Yield the regular files under ``root`` in sorted order, without following links out.

    Skipped entries (links leaving the tree, links to folders, special files) are logged
    and appended to ``warnings`` when given, and their messages to ``skipped`` (what a caller that
    must account for every entry, such as compare, counts). A ``root`` that is itself a symlink is not
    walked at all (reported the same way). ``in_tree_links=False`` (for checking a bag,
    whose payload must hold no symlink at all) skips and reports every symlink, including
    one to a regular file inside the tree. ``quiet``: skipped entries are not logged (a caller that
    only measures a tree the bundle writer walks and reports again, such as the size check).
    """
    root = os.path.abspath(root)
    if os.path.islink(root):
        _skip(warnings, skipped, "skipped symlinked folder {} -> {} (symlinks to folders are never followed)".format(
            root, _readlink(root)), quiet)
        return
    real_root = os.path.realpath(root)
    stack = [("", root)]
    while stack:
        rel_dir, abs_dir = stack.pop()
        subdirs = []
        # os.path.join(abs_dir, name) for an entry's name (never empty, never holding a separator), joined once
        prefix, rel_prefix = os.path.join(abs_dir, ""), rel_dir + "/" if rel_dir else ""
        for name, found in _classified_entries(abs_dir, rel_dir, real_root, in_tree_links):
            if isinstance(found, int):  # a regular file's size
                yield SourceFile(rel_prefix + name, prefix + name, found)
            elif isinstance(found, SourceFile):
                yield found
            elif isinstance(found, _Folder):
                subdirs.append(found)
            else:
                _skip(warnings, skipped, found.message, quiet)
        stack.extend(reversed(subdirs))


class _Folder(NamedTuple):
    """A folder found by :func:`walk_files`, to walk after its parent's files."""

    rel: str
    path: str


class _Skipped(NamedTuple):
    """An entry :func:`walk_files` does not yield, and why (reported in name order)."""

    message: str


def _classified_entries(abs_dir: str, rel_dir: str, real_root: str, in_tree_links: bool) -> List[Tuple[str, Any]]:
    """(name, what) of the entries of one folder, sorted by name; ``what`` is the size of a regular
    file, else a SourceFile (an in-tree link), _Folder or _Skipped. Each directory entry is
    classified as it is listed and then dropped: a folder of 100,000 files never holds 100,000
    ``os.DirEntry`` objects, or their full paths, at once (the caller builds those one by one)."""
    found = []  # type: List[Tuple[str, Any]]
    with os.scandir(abs_dir) as it:
        for entry in it:
            name = entry.name
            if entry.is_file(follow_symlinks=False):
                found.append((name, entry.stat(follow_symlinks=False).st_size))
            else:
                found.append((name, _classify_entry(entry, name if not rel_dir else rel_dir + "/" + name,
                                                    real_root, in_tree_links)))
    found.sort(key=lambda pair: pair[0])
    return found


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _classify_entry(entry: "os.DirEntry", rel: str, real_root: str, in_tree_links: bool) -> Any:
    if entry.is_symlink():
        target = os.path.realpath(entry.path)
        if (in_tree_links and is_within(target, real_root) and os.path.isfile(target)
                and not os.path.islink(target)):
            return SourceFile(rel, target, os.stat(target).st_size)
        if in_tree_links:
            why = "a folder, missing, or outside the source tree"
        else:
            why = "no symlink may be inside a bundle; not followed"
        return _Skipped("skipped symlink {} -> {} ({})".format(entry.path, _readlink(entry.path), why))
    if entry.is_dir(follow_symlinks=False):
        return _Folder(rel, entry.path)
    if entry.is_file(follow_symlinks=False):
        return SourceFile(rel, entry.path, entry.stat(follow_symlinks=False).st_size)
    return _Skipped("skipped special file {} (not a regular file)".format(entry.path))


def _skip(warnings: Optional[List[str]], skipped: Optional[List[str]], message: str, quiet: bool) -> None:
    if quiet:
        if warnings is not None:
            warnings.append(message)
    else:
        warn(warnings, message)
    if skipped is not None:
        skipped.append(message)


def warn(warnings: Optional[List[str]], message: str) -> None:
    logger.warning("%s", message)
    if warnings is not None:
        warnings.append(message)


# -- placing (link or copy) and hashing ---------------------------------------------------
class PlacedFile(NamedTuple):
    """Outcome of :func:`place_file`: bytes placed, sha256 hex (or None), ``how``
    (``"hardlink"`` or ``"copy"``) and, with ``keep_head``, the file's first bytes
    (at most HEAD_BYTES: what the hashing read; None when nothing was read)."""

    size: int
    sha256: Optional[str]
    how: str
    head: Optional[bytes] = None
    #: with ``keep_head``, a dump file this process wrote: its header's tensor fields as noted
    #: (:mod:`npu_dump_hook._written`), what decoding ``head`` would give; None: decode
    fields: Optional[Any] = None


_thread_state = threading.local()


def _chunk_buffer() -> Tuple[bytearray, memoryview]:
    """This thread's CHUNK_SIZE read buffer and its view, allocated once per thread:
    zero-filling a fresh 1 MiB buffer costs more than hashing a small file."""
    found = getattr(_thread_state, "buffer", None)
    if found is None:
        buf = bytearray(CHUNK_SIZE)
        found = _thread_state.buffer = (buf, memoryview(buf))
    return found


def sha256_file(path: str, chunk_size: int = CHUNK_SIZE) -> Tuple[int, str]:
    """(size, sha256 hex) of the file at ``path``, streamed in ``chunk_size`` pieces.

    The first _FIRST_READ bytes come from one ``os.read`` (most dump files end there: no file
    object, no buffer to fill), the rest are read into this thread's reused buffer.
    """
    size, digest, _head = sha256_file_head(path, chunk_size)
    return size, digest


def sha256_file_head(path: str, chunk_size: int = CHUNK_SIZE) -> Tuple[int, str, bytes]:
    """(size, sha256 hex, first bytes) of the file at ``path``: :func:`sha256_file` plus the
    first HEAD_BYTES bytes (the whole file when smaller), from the same read: a dump file's
    header can then be decoded without opening the file again."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        first = os.read(fd, _FIRST_READ)
        digest = hashlib.sha256(first)  # releases the GIL for more than 2 KiB
        size = len(first)
        if size == _FIRST_READ:
            if chunk_size == CHUNK_SIZE:
                buf, view = _chunk_buffer()
            else:
                buf = bytearray(chunk_size)
                view = memoryview(buf)
            while True:
                n = os.readv(fd, [buf])
                if not n:
                    break
                digest.update(view[:n])
                size += n
    finally:
        os.close(fd)
    return size, digest.hexdigest(), first


def place_file(src: str, dst: str, link: str = "auto", checksum: bool = True, keep_head: bool = False) -> PlacedFile:
    """Put the bytes of ``src`` at ``dst`` (which must not exist) by ``link`` mode.

    With ``checksum`` the sha256 is computed from the single read that also copies
    (copy), or from one read of the linked inode (hardlink), or, for a hard link of a small
    file this process just wrote, from its bytes as written (:mod:`npu_dump_hook._written`).
    With ``keep_head`` (and ``checksum``) ``head`` holds the first HEAD_BYTES bytes of that read
    (of a noted file: its first bytes noted, a dump file's prefix and header).
    """
    if link not in LINK_MODES:
        raise BundleError("link mode {!r} is not one of {}".format(link, ", ".join(LINK_MODES)), dst)
    if link in ("auto", "hardlink"):
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError as exc:
            if link == "hardlink" or exc.errno not in _LINK_FALLBACK_ERRNOS:
                raise BundleError("cannot hard-link {} to {}: {}".format(src, dst, exc.strerror), dst)
            logger.debug("hard link %s -> %s impossible (%s); copying", src, dst, exc.strerror)
        else:
            if checksum:
                size, digest, head, fields = _linked_facts(dst, keep_head)
                return PlacedFile(size, digest, "hardlink", head if keep_head else None, fields if keep_head else None)
            return PlacedFile(os.stat(dst).st_size, None, "hardlink")
    return _copy(src, dst, checksum, keep_head)


def _linked_facts(dst: str, keep_head: bool) -> Tuple[int, str, Optional[bytes], Optional[Any]]:
    """(size, sha256 hex, first bytes, header fields or None) of the file just linked at ``dst``: noted when this process
    wrote it (:func:`npu_dump_hook._written.written_facts`, the same file by one lstat: no open, no
    read), else read. With ``keep_head`` a noted file must have its first bytes noted too (a dump
    file's prefix and header), else it is read."""
    known = written_facts(dst)
    if known is not None and (known[2] is not None or not keep_head):
        return known
    return sha256_file_head(dst) + (None,)


def _copy(src: str, dst: str, checksum: bool, keep_head: bool = False) -> PlacedFile:
    st = os.stat(src)
    head = None  # type: Optional[bytes]
    if not checksum:
        shutil.copyfile(src, dst)  # kernel fast path (sendfile / copy_file_range)
        size, digest = os.stat(dst).st_size, None
    else:
        size, digest, head = _copy_hashing(src, dst)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))  # keep the dump's timestamps
    return PlacedFile(size, digest, "copy", head if keep_head else None)


def _copy_hashing(src: str, dst: str) -> Tuple[int, str, bytes]:
    """(size, sha256 hex, first HEAD_BYTES bytes) of ``src``, copied to ``dst`` in one read."""
    digest = hashlib.sha256()
    size = 0
    head = b""
    buf, view = _chunk_buffer()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with open(src, "rb", buffering=0) as fin:
            while True:
                n = fin.readinto(buf)
                if not n:
                    break
                chunk = view[:n]
                if not size:
                    head = bytes(view[:min(n, HEAD_BYTES)])
                digest.update(chunk)  # releases the GIL for large buffers
                written = 0
                while written < n:
                    written += os.write(fd, chunk[written:])
                size += n
    finally:
        os.close(fd)
    return size, digest.hexdigest(), head


def default_workers() -> int:
    """A small thread pool: I/O and hashing overlap well with 2-4 threads."""
    return max(2, min(4, (os.cpu_count() or 1) * 2))


class _RanInline(object):
    """The outcome of an item run in the calling thread, queued like a finished future."""

    __slots__ = ("_value", "_error")

    def __init__(self, fn: Callable[[Any], Any], item: Any) -> None:
        self._value = self._error = None  # type: Any
        try:
            self._value = fn(item)
        except Exception as exc:  # raised in input order, when its turn comes
            self._error = exc

    def done(self) -> bool:
        return True

    def cancel(self) -> bool:
        return False

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


def parallel_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: Optional[int] = None,
                 window: Optional[int] = None, inline: Optional[Callable[[Any], bool]] = None) -> Iterator[Any]:
    """``map(fn, items)`` on a thread pool, results in input order, at most ``window``
    calls in flight (so 100,000 items never mean 100,000 pending futures).

    Items for which ``inline(item)`` is true run in the calling thread instead (cheap
    items, where handing over to a thread costs more than the work); they go on while
    earlier items are still running on the pool.
    """
    workers = workers or default_workers()
    if workers <= 1:
        for item in items:
            yield fn(item)
        return
    window = window or workers * 4
    pending = collections.deque()  # type: Deque[Any]
    in_flight = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            for item in items:
                if inline is not None and inline(item):
                    if not pending:  # nothing earlier to wait for: its result (or error) is next in order
                        yield fn(item)
                        continue
                    pending.append(_RanInline(fn, item))
                else:
                    pending.append(pool.submit(fn, item))
                    in_flight += 1
                # hand out what is ready; wait only when too much is queued
                while pending and (pending[0].done() or in_flight >= window or len(pending) >= _INLINE_BACKLOG):
                    head = pending.popleft()
                    if not isinstance(head, _RanInline):
                        in_flight -= 1
                    yield head.result()
            while pending:
                yield pending.popleft().result()
        finally:
            for fut in pending:
                fut.cancel()
