"""Tar archives of bundles: the one suffix rule, the one member check, pack, extract, read one member.

A member is accepted only when its name is relative without ``..`` and it is a regular file
or a folder (:func:`checked_member`); everything that opens an archive goes through it.
"""
import os
import shutil
import stat
import tarfile
import zlib
from typing import IO, Iterator, List, Optional, Tuple

from ..errors import BundleError, UnsafePathError
from ._fs import CHUNK_SIZE, safe_join, safe_relpath

__all__ = ["archive_format", "strip_archive_ext", "checked_member", "pack_archive", "extract_archive",
           "iter_members", "looks_like_tar"]

_SUFFIXES = ((".tar.gz", "tar.gz"), (".tgz", "tar.gz"), (".tar", "tar"))
# What reading a truncated or corrupt (compressed) tar raises, besides tarfile's own errors.
_DAMAGED = (tarfile.TarError, EOFError, zlib.error, UnicodeError)


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
    """The member's safe relative name; UnsafePathError for absolute/``..`` names, links and special files."""
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
    return rel


def _open(archive: str) -> tarfile.TarFile:
    try:
        return tarfile.open(archive, "r:*")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BundleError("{} is not a readable tar archive: {}".format(archive, exc), archive)


def iter_members(archive: str) -> Iterator[Tuple[str, tarfile.TarInfo, "tarfile.TarFile"]]:
    """``(safe name, member, open tar)`` for every member, each checked before it is yielded."""
    with _open(archive) as tar:
        try:
            for member in tar:
                yield checked_member(member, archive), member, tar
        except _DAMAGED as exc:
            raise BundleError("{} is a damaged tar archive: {}".format(archive, exc), archive)


def extract_archive(archive: str, dest_dir: str) -> List[str]:
    """Extract ``archive`` (tar, any compression) into the existing folder ``dest_dir``.

    Every member is checked before it is written (:func:`checked_member`). Returns the
    top-level names extracted.
    """
    tops = []  # type: List[str]
    try:
        for rel, member, tar in iter_members(archive):
            top = rel.split("/", 1)[0]
            if top not in tops:
                tops.append(top)
            _extract_member(tar, member, rel, archive, dest_dir)
    except _DAMAGED as exc:  # a member's data ends early or does not inflate
        raise BundleError("{} is a damaged tar archive: {}".format(archive, exc), archive)
    except OSError as exc:
        raise BundleError("{}: extracting failed: {}".format(archive, exc), archive)
    return tops


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, rel: str, archive: str, dest_dir: str) -> None:
    target = safe_join(dest_dir, rel)
    if member.isdir():
        os.makedirs(target, exist_ok=True)
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    src = tar.extractfile(member)  # type: Optional[IO[bytes]]
    if src is None:  # pragma: no cover - isfile() members always have data
        raise BundleError("archive {}: member {!r} has no data".format(archive, member.name), archive)
    with src, open(target, "wb") as out:
        shutil.copyfileobj(src, out, CHUNK_SIZE)


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
