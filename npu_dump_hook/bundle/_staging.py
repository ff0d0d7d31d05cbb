"""Atomic destinations: build a bundle (or archive) beside its destination, rename it into place.

:class:`Staging` builds the result in a uniquely named hidden folder
  beside the destination (``.{name}.staging-{pid}-{random}``) and renames it into place
  only when complete. An existing non-empty destination is refused with
  :class:`~npu_dump_hook.errors.BundleExistsError` unless ``force``; with ``force`` the old
  destination is moved aside only after the new one is complete, and removed after the
  swap. Staging folders left by a killed process are swept by the next run.
"""
import errno
import logging
import os
import shutil
import uuid
from typing import Any, List

from ..errors import BundleExistsError

__all__ = ["Staging", "is_nonempty", "sweep_stale_staging"]

logger = logging.getLogger(__name__)

_STAGING_TAG = ".staging-"
_OLD_TAG = ".old-"


def is_nonempty(path: str) -> bool:
    """True when ``path`` exists and is a non-empty folder or any non-folder."""
    if os.path.isdir(path) and not os.path.islink(path):
        with os.scandir(path) as it:
            return any(True for _ in it)
    return os.path.lexists(path)


def _check_destination(dest: str, force: bool) -> None:
    if not force and is_nonempty(dest):
        raise BundleExistsError("destination {} exists and is not empty (pass force=True to replace it)".format(dest), dest)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_staging(dest: str) -> List[str]:
    """Remove staging/old folders for ``dest`` left by processes that no longer run."""
    parent, name = os.path.split(os.path.abspath(dest))
    removed = []
    if not os.path.isdir(parent):
        return removed
    for tag in (_STAGING_TAG, _OLD_TAG):
        prefix = "." + name + tag
        for entry in os.listdir(parent):
            if not entry.startswith(prefix):
                continue
            pid_text = entry[len(prefix):].split("-", 1)[0]
            if pid_text.isdigit() and not _pid_alive(int(pid_text)):
                _remove(os.path.join(parent, entry))
                removed.append(os.path.join(parent, entry))
    return removed


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.unlink(path)
        except OSError:
            pass


def _unique_sibling(dest: str, tag: str, suffix: str = "") -> str:
    parent, name = os.path.split(os.path.abspath(dest))
    return os.path.join(parent, ".{}{}{}-{}{}".format(name, tag, os.getpid(), uuid.uuid4().hex[:12], suffix))


class Staging:
    """A hidden folder (or file, ``as_file=True``) beside ``dest``, renamed into place by
    :meth:`commit`; removed by :meth:`abort` or when the ``with`` block raises."""

    def __init__(self, dest: str, force: bool = False, as_file: bool = False, suffix: str = "") -> None:
        self.dest = os.path.abspath(dest)
        self.force = force
        _check_destination(self.dest, force)
        parent = os.path.dirname(self.dest)
        os.makedirs(parent, exist_ok=True)
        sweep_stale_staging(self.dest)
        self.path = _unique_sibling(self.dest, _STAGING_TAG, suffix)
        if not as_file:
            os.mkdir(self.path)
        self.committed = False

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None or not self.committed:
            self.abort()

    def abort(self) -> None:
        """Remove the staging folder (idempotent)."""
        _remove(self.path)

    def commit(self) -> str:
        """Rename the finished staging folder (or file) to ``dest``; return ``dest``."""
        if self.force and is_nonempty(self.dest):
            self._swap_forced()
        else:
            try:
                _rename_no_clobber(self.path, self.dest)
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                    raise BundleExistsError(
                        "destination {} appeared and is not empty (pass force=True to replace it)".format(self.dest), self.dest)
                raise
        self.committed = True
        return self.dest

    def _swap_forced(self) -> None:
        if not os.path.isdir(self.path) and not os.path.isdir(self.dest):
            os.replace(self.path, self.dest)  # file over file: one atomic step
            return
        old = _unique_sibling(self.dest, _OLD_TAG)
        os.rename(self.dest, old)
        try:
            os.rename(self.path, self.dest)
        except BaseException:
            os.rename(old, self.dest)  # put the previous result back
            raise
        _remove(old)


def _rename_no_clobber(src: str, dest: str) -> None:
    """Move ``src`` to ``dest`` unless ``dest`` holds something (an empty folder is replaced)."""
    if os.path.isdir(src):
        os.rename(src, dest)  # fails with ENOTEMPTY/ENOTDIR unless dest is absent or an empty folder
        return
    if os.path.isdir(dest) and not os.path.islink(dest) and not is_nonempty(dest):
        os.rmdir(dest)
    os.link(src, dest)  # EEXIST instead of silently replacing a file that appeared meanwhile
    os.unlink(src)


