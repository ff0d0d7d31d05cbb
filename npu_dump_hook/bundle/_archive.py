"""Tar archives of bundles: the one suffix rule, the one member check, pack, extract, read one member.

A member is accepted only when its name is relative without ``..`` and it is a regular file
or a folder (:func:`checked_member`); everything that opens an archive goes through it.

Reading is bounded (docs/bundle-format.md rule 7): the uncompressed tar stream (member
headers and data, i.e. the listed member sizes) may not exceed :func:`expansion_limit` of
the archive's size -- ``max(RATIO_FREE_BYTES, MAX_RATIO * archive bytes)``, never more than
``MAX_EXPANDED_BYTES`` -- so a small compressed archive cannot make a reader decompress or
write gigabytes. The stream is counted as it is decompressed, so an archive that exceeds the
bound is refused as soon as it does, before anything more is read. :func:`extract_archive`
checks every member (names, types, total size) before it writes anything, then writes each
member's listed size at most; :func:`extract_bag` is that extraction for a bundle archive
(where its bag is, and optionally only some of its files): what ``verify`` and
:func:`~npu_dump_hook.bundle.open_bundle` both use, inside :func:`terminating_cleanly` so a
SIGTERM during the extraction still removes the temporary folder.
"""
import bz2
import gzip
import io
import lzma
import os
import stat
import tarfile
import zlib
from typing import IO, Any, Callable, Iterator, List, Optional, Tuple

from ..errors import BundleError, UnsafePathError
from ._bagit import BAGIT_TXT
from .._signals import Terminated, terminating_cleanly  # noqa: F401 (re-exported)
from ._fs import CHUNK_SIZE, safe_join, safe_relpath

__all__ = ["archive_format", "strip_archive_ext", "checked_member", "pack_archive", "extract_archive", "extract_bag",
           "iter_members", "looks_like_tar", "expansion_limit", "MAX_RATIO", "RATIO_FREE_BYTES",
           "MAX_EXPANDED_BYTES", "member_limit", "FREE_MEMBERS", "BYTES_PER_MEMBER", "MAX_MEMBERS",
           "terminating_cleanly", "Terminated"]

_SUFFIXES = ((".tar.gz", "tar.gz"), (".tgz", "tar.gz"), (".tar", "tar"))
# What reading a truncated or corrupt (compressed) tar raises, besides tarfile's own errors.
_DAMAGED = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, UnicodeError)

#: Largest accepted ratio of uncompressed tar stream to archive bytes. gzip -9 of real dump
#: data (float tensors) gives 1.1-3:1 and gzip cannot exceed ~1030:1, so only archives that
#: are almost all zeros or repeated bytes pass 200:1; a bomb of N archive bytes expands to
#: 200 N at most.
MAX_RATIO = 200
#: Expansion always accepted, whatever the ratio (small bundles of zero tensors compress well).
RATIO_FREE_BYTES = 256 << 20
#: Absolute cap on the uncompressed tar stream, whatever the archive's size (1 TiB).
MAX_EXPANDED_BYTES = 1 << 40
#: Members always accepted, whatever the archive's size.
FREE_MEMBERS = 20000
#: Archive bytes per member above FREE_MEMBERS: a real member (a tar header naming a dump file,
#: with data) never compresses below ~100 bytes, an empty member to ~6 (400,000 in 2.4 MB).
BYTES_PER_MEMBER = 64
#: Absolute cap on the members of an archive (a bundle of ~1,000,000 files).
MAX_MEMBERS = 1000000
_TAR_TAIL = 20 << 10  # end-of-archive blocks and record padding, not counted against the bound


def expansion_limit(archive_bytes: int) -> int:
    """Most bytes the uncompressed tar stream of an archive of ``archive_bytes`` may hold."""
    return min(MAX_EXPANDED_BYTES, max(RATIO_FREE_BYTES, MAX_RATIO * max(0, archive_bytes)))


def member_limit(archive_bytes: int) -> int:
    """Most members an archive of ``archive_bytes`` may hold (docs/bundle-format.md rule 7)."""
    return min(MAX_MEMBERS, max(FREE_MEMBERS, max(0, archive_bytes) // BYTES_PER_MEMBER))


def archive_format(path: str) -> Optional[str]:
    """``"tar"``, ``"tar.gz"`` or None, from the file name (``.tar``, ``.tar.gz``, ``.tgz``)."""
    low = path.lower()
    for suffix, fmt in _SUFFIXES:
        if low.endswith(suffix):
            return fmt
    return None


def strip_archive_ext(path: str) -> str:
    """``path`` without its archive suffix (unchanged when it has none)."""
    low = path.lower()
    for suffix, _ in _SUFFIXES:
        if low.endswith(suffix):
            return path[: -len(suffix)]
    return path


def looks_like_tar(path: str) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def checked_member(member: tarfile.TarInfo, archive: str) -> str:
    """The member's safe relative name; UnsafePathError for absolute/``..`` names, links and special files.

    A folder member naming the archive root itself (``.`` or ``./``, as ``tar -C dir -cf x .``
    writes) is accepted and returns ``""``: it creates nothing.
    """
    if (member.isdir() and not member.name.startswith("/")
            and not [part for part in member.name.split("/") if part not in ("", ".")]):
        return ""
    try:
        rel = safe_relpath(member.name)
    except UnsafePathError as exc:
        raise UnsafePathError("archive {}: member {!r}: {}".format(archive, member.name, exc), archive)
    if member.issym() or member.islnk():
        raise UnsafePathError("archive {}: member {!r} is a link (not allowed in a bundle)".format(
            archive, member.name), archive)
    if not (member.isfile() or member.isdir()):
        raise UnsafePathError("archive {}: member {!r} is a device, FIFO or other special file".format(
            archive, member.name), archive)
    if member.issparse():
        raise UnsafePathError("archive {}: member {!r} is a sparse file (its listed size is not its data; "
                              "bundle writers never write one)".format(archive, member.name), archive)
    return rel


class _BoundedStream(io.RawIOBase):
    """The decompressed tar stream, counted: reading or seeking past ``limit`` bytes raises
    UnsafePathError; a decompression failure raises BundleError (a damaged archive)."""

    def __init__(self, raw: Any, limit: int, archive: str, archive_bytes: int) -> None:
        super().__init__()
        self._raw = raw
        self._pos = 0
        self._limit = limit
        self._archive = archive
        self._archive_bytes = archive_bytes

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def _refuse(self, upto: int) -> None:
        raise UnsafePathError(
            "archive {}: expands to more than {} bytes ({} at least) from {} bytes; refused before "
            "reading further (bound: max({} MiB, {}x the archive), at most {} GiB; docs/bundle-format.md "
            "rule 7)".format(self._archive, self._limit - _TAR_TAIL, upto, self._archive_bytes,
                             RATIO_FREE_BYTES >> 20, MAX_RATIO, MAX_EXPANDED_BYTES >> 30), self._archive)

    def _damaged(self, exc: BaseException) -> None:
        raise BundleError("{}: a damaged tar archive: {}".format(self._archive, exc), self._archive)

    def read(self, size: int = -1) -> bytes:
        room = self._limit - self._pos
        want = room + 1 if size is None or size < 0 else min(size, room + 1)
        try:
            data = self._raw.read(want)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            self._damaged(exc)
        self._pos += len(data)
        if self._pos > self._limit:
            self._refuse(self._pos)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        else:
            raise io.UnsupportedOperation("the tar stream cannot seek from its end")
        if target > self._limit:
            self._refuse(target)
        try:
            self._raw.seek(target)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            self._damaged(exc)
        self._pos = target
        return target


def _decompressor(fh: IO[bytes]) -> Any:
    """The decompressed view of the archive file ``fh`` (gzip, bzip2, xz or none), by magic bytes."""
    fh.seek(0)
    magic = fh.read(6)
    fh.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=fh, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(fh, mode="rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(fh, mode="rb")
    return fh


def _open_file(archive: str) -> IO[bytes]:
    try:
        fh = open(archive, "rb")
    except OSError as exc:
        raise BundleError("{}: not a readable tar archive: {}".format(archive, exc.strerror or exc), archive)
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise BundleError("{}: not a readable tar archive: not a regular file".format(archive), archive)
    return fh


def _open_tar(fh: IO[bytes], archive: str) -> tarfile.TarFile:
    """A tar reader over the bounded, decompressed stream of the open archive file ``fh``."""
    size = os.fstat(fh.fileno()).st_size
    stream = _BoundedStream(_decompressor(fh), expansion_limit(size) + _TAR_TAIL, archive, size)
    try:
        return tarfile.open(fileobj=stream, mode="r:")
    except _DAMAGED as exc:
        raise BundleError("{}: not a readable tar archive: {}".format(archive, exc), archive)


def iter_members(archive: str) -> Iterator[Tuple[str, tarfile.TarInfo, "tarfile.TarFile"]]:
    """``(safe name, member, open tar)`` for every member, each checked before it is yielded
    (the root folder member ``.`` is skipped); the stream is bounded (:func:`expansion_limit`)."""
    with _open_file(archive) as fh:
        with _open_tar(fh, archive) as tar:
            try:
                for member in tar:
                    rel = checked_member(member, archive)
                    if rel:
                        yield rel, member, tar
            except _DAMAGED as exc:
                raise BundleError("{}: a damaged tar archive: {}".format(archive, exc), archive)


def _member_list(fh: IO[bytes], archive: str) -> List[Tuple[str, bool, int]]:
    """Pass 1: every member checked (name, type, total listed size), nothing written."""
    listed = []  # type: List[Tuple[str, bool, int]]
    total = 0
    archive_bytes = os.fstat(fh.fileno()).st_size
    limit, most = expansion_limit(archive_bytes), member_limit(archive_bytes)
    with _open_tar(fh, archive) as tar:
        try:
            while True:
                member = tar.next()
                if member is None:
                    break
                if len(listed) >= most:
                    raise UnsafePathError("archive {}: more than {} members in {} bytes; refused before anything is "
                                          "written (bound: max({}, archive bytes / {}), at most {}; "
                                          "docs/bundle-format.md rule 7)".format(
                                              archive, most, archive_bytes, FREE_MEMBERS, BYTES_PER_MEMBER,
                                              MAX_MEMBERS), archive)
                rel = checked_member(member, archive)
                total += member.size if member.isfile() else 0
                if total > limit:
                    raise UnsafePathError("archive {}: members list {} bytes or more, above the bound of {} "
                                          "bytes for a {}-byte archive (docs/bundle-format.md rule 7)".format(
                                              archive, total, limit, os.fstat(fh.fileno()).st_size), archive)
                listed.append((rel, member.isdir(), member.size if member.isfile() else 0))
                tar.members = []  # keep memory flat: the names are all pass 2 needs
        except _DAMAGED as exc:
            raise BundleError("{}: a damaged tar archive: {}".format(archive, exc), archive)
    return listed


def extract_archive(archive: str, dest_dir: str) -> List[str]:
    """Extract ``archive`` (tar, any compression) into the existing folder ``dest_dir``.

    Every member is checked (:func:`checked_member`, and the total against
    :func:`expansion_limit`) before anything is written; then each member's listed size is
    written at most. Returns the top-level names extracted.
    """
    return _extract(archive, dest_dir, None)[0]


def extract_bag(archive: str, dest_dir: str, keep: Optional[Callable[[str], bool]] = None) -> str:
    """Extract the bundle ``archive`` into the existing folder ``dest_dir`` as
    :func:`extract_archive` does (every member checked before anything is written) and
    return the bag's root: ``dest_dir`` when ``bagit.txt`` is at the archive's top or the
    archive holds several top-level names, else its one top-level folder.

    With ``keep``, only the files whose bag-relative name (``data/bundle.json``, ...)
    ``keep(name)`` accepts are written; the others are checked all the same.
    """
    top = _extract(archive, dest_dir, keep)[1]
    return dest_dir if top is None else os.path.join(dest_dir, top)


def _bag_top(listed: List[Tuple[str, bool, int]]) -> Optional[str]:
    """The one top-level folder that holds the bag, or None when the bag is the archive's top."""
    tops = []  # type: List[str]
    for rel, is_dir, _size in listed:
        if rel == BAGIT_TXT and not is_dir:
            return None
        top = rel.split("/", 1)[0]
        if rel and top not in tops:
            tops.append(top)
    return tops[0] if len(tops) == 1 else None


def _extract(archive: str, dest_dir: str,
             keep: Optional[Callable[[str], bool]]) -> Tuple[List[str], Optional[str]]:
    """(top-level names, the bag's top folder or None) of ``archive`` extracted into ``dest_dir``."""
    tops = []  # type: List[str]
    with _open_file(archive) as fh:
        listed = _member_list(fh, archive)
        bag_top = _bag_top(listed)
        fh.seek(0)
        try:
            with _open_tar(fh, archive) as tar:
                for number, member in enumerate(tar):
                    rel = checked_member(member, archive)
                    if number >= len(listed) or listed[number] != (rel, member.isdir(),
                                                                   member.size if member.isfile() else 0):
                        raise BundleError("{}: changed while being read (member {!r})".format(archive, member.name),
                                          archive)
                    tar.members = []
                    if not rel:
                        continue
                    top = rel.split("/", 1)[0]
                    if top not in tops:
                        tops.append(top)
                    if keep is None or (member.isfile() and keep(_bag_rel(rel, bag_top))):
                        _extract_member(tar, member, rel, archive, dest_dir)
        except _DAMAGED as exc:  # a member's data ends early or does not inflate
            raise BundleError("{}: a damaged tar archive: {}".format(archive, exc), archive)
        except OSError as exc:
            raise BundleError("{}: extracting into {} failed: {}".format(
                archive, exc.filename or dest_dir, exc.strerror or exc), archive)
    return tops, bag_top


def _bag_rel(rel: str, bag_top: Optional[str]) -> str:
    """A member's name relative to the bag root (``""`` for a member outside the bag's folder)."""
    if bag_top is None:
        return rel
    return rel[len(bag_top) + 1:] if rel.startswith(bag_top + "/") else ""


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, rel: str, archive: str, dest_dir: str) -> None:
    target = safe_join(dest_dir, rel)
    if member.isdir():
        os.makedirs(target, exist_ok=True)
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    src = tar.extractfile(member)  # type: Optional[IO[bytes]]
    if src is None:  # pragma: no cover - isfile() members always have data
        raise BundleError("archive {}: member {!r} has no data".format(archive, member.name), archive)
    left = member.size
    with src, open(target, "xb") as out:
        while left > 0:
            chunk = src.read(min(CHUNK_SIZE, left))
            if not chunk:
                raise BundleError("{}: a damaged tar archive: member {!r} ends {} bytes early".format(
                    archive, member.name, left), archive)
            out.write(chunk)
            left -= len(chunk)


def pack_archive(src_dir: str, out_path: str, fmt: str, arcroot: str) -> None:
    """Pack ``src_dir`` into ``out_path`` (``fmt`` "tar" or "tar.gz") under the top folder
    ``arcroot``. Members are folders and regular files only, sorted, owner-neutral."""
    if fmt not in ("tar", "tar.gz"):
        raise BundleError("archive format {!r} is not tar or tar.gz".format(fmt), out_path)
    arcroot = safe_relpath(arcroot)
    mode = "w:gz" if fmt == "tar.gz" else "w"
    with tarfile.open(out_path, mode, format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_tarinfo(arcroot, os.stat(src_dir), tarfile.DIRTYPE))
        for dirpath, dirnames, filenames in os.walk(src_dir):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, src_dir)
            prefix = arcroot if rel_dir == "." else arcroot + "/" + rel_dir.replace(os.sep, "/")
            for d in dirnames:
                tar.addfile(_tarinfo(prefix + "/" + d, os.stat(os.path.join(dirpath, d)), tarfile.DIRTYPE))
            for f in sorted(filenames):
                full = os.path.join(dirpath, f)
                st = os.lstat(full)
                if not stat.S_ISREG(st.st_mode):
                    raise BundleError("refusing to archive non-regular file {}".format(full), full)
                with open(full, "rb") as fh:
                    tar.addfile(_tarinfo(prefix + "/" + f, st, tarfile.REGTYPE), fh)


def _tarinfo(name: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mtime = int(st.st_mtime)
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = st.st_size if kind == tarfile.REGTYPE else 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
