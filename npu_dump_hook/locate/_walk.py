"""Small filesystem helpers shared by the graph and dump-folder searches."""
import datetime
import logging
import os
from typing import Iterable, List, Optional, Union

__all__ = ["LOG", "PathLike", "not_older", "local_time", "scandir", "unique", "warn"]

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
