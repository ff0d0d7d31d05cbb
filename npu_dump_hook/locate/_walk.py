"""Small filesystem helpers shared by the graph and dump-folder searches."""
import datetime
import logging
import os
from typing import Iterable, List, Optional, Union

__all__ = ["LOG", "PathLike", "not_older", "local_time", "scandir", "subdirs", "link_note", "unique", "warn"]

LOG = logging.getLogger("npu_dump_hook.locate")

PathLike = Union[str, "os.PathLike[str]"]


def not_older(mtime: float, since: Optional[float]) -> bool:
    return since is None or int(mtime) >= int(since)


def local_time(since: float) -> str:
    return datetime.datetime.fromtimestamp(since).isoformat(timespec="seconds")


def scandir(folder: str) -> List["os.DirEntry[str]"]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:
        return []


def subdirs(folder: str, links: Optional[List[str]] = None) -> List["os.DirEntry[str]"]:
    """Real folders directly in ``folder``, never a symlink to one.

    Symlinks that point at a folder are not followed; their paths are appended to ``links``
    when given, so the caller can report the ones whose names it would have taken.
    """
    found = []
    for entry in scandir(folder):
        try:
            if entry.is_dir(follow_symlinks=False):
                found.append(entry)
            elif links is not None and entry.is_symlink() and os.path.isdir(entry.path):
                links.append(entry.path)
        except OSError:  # vanished meanwhile
            continue
    return found


def link_note(path: str, where: str) -> str:
    """The warning for a symlinked folder that is not followed."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return "skipped symlinked folder {} -> {} ({}: symlinks are never followed)".format(path, target, where)


def unique(paths: Iterable[str]) -> List[str]:
    seen, out = set(), []
    for path in paths:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            out.append(path)
    return out


def warn(notes: List[str], message: str) -> None:
    LOG.warning("%s", message)
    notes.append(message)
