"""Atomic destinations: build a bundle (or archive) beside its destination, rename it into place.

:class:`Staging` builds the result in a uniquely named hidden folder
  beside the destination (``.{name}.staging-{pid}-{random}``) and renames it into place
  only when complete. An existing non-empty destination is refused with
  :class:`~npu_dump_hook.errors.BundleExistsError` unless ``force``; with ``force`` the old
  destination is replaced only after the new one is complete. Staging folders left by a
  killed process are swept by the next run into the same folder, whatever their name.

What a forced replacement guarantees (:meth:`Staging.commit` with ``force``):

* a file over a file (archives): one ``os.replace``: the destination always holds the old
  or the new file;
* a folder: on Linux, ``renameat2(RENAME_EXCHANGE)`` (kernel >= 3.15; ext4, xfs, btrfs,
  tmpfs and most local file systems) swaps the two names in one step, so the destination
  always holds the old or the new complete bundle; the old one, now under the staging name,
  is removed afterwards;
* elsewhere (other systems, NFS, a seccomp filter refusing the call) the old bundle is
  renamed aside to ``.{name}.old-{pid}-{random}`` and the new one renamed in immediately
  after: for the time between two ``rename`` calls the destination name is absent. A crash
  in that window leaves the old bundle complete under the ``.old-`` name, and the next write
  to the same destination puts it back before it does anything else.
"""
import ctypes
import ctypes.util
import errno
import logging
import os
import platform
import shutil
import sys
import uuid
from typing import Any, Callable, List, Optional

from ..errors import BundleExistsError

__all__ = ["Staging", "is_nonempty", "sweep_stale_staging", "sweep_stale_siblings", "exchange_paths"]

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
    """Remove staging/old folders for ``dest`` left by processes that no longer run.

    When ``dest`` itself is absent and a dead process left an ``.old-`` folder (it was killed
    between the two renames of a forced replacement), that previous bundle is renamed back to
    ``dest`` first instead of being removed.
    """
    dest = os.path.abspath(dest)
    parent, name = os.path.split(dest)
    removed = []  # type: List[str]
    if not os.path.isdir(parent):
        return removed
    for tag in (_OLD_TAG, _STAGING_TAG):
        prefix = "." + name + tag
        stale = []
        for entry in sorted(os.listdir(parent)):
            if not entry.startswith(prefix):
                continue
            pid_text = entry[len(prefix):].split("-", 1)[0]
            if pid_text.isdigit() and not _pid_alive(int(pid_text)):
                stale.append(os.path.join(parent, entry))
        if tag == _OLD_TAG and stale and not os.path.lexists(dest):
            keep = max(stale, key=lambda p: os.lstat(p).st_mtime)
            try:
                os.rename(keep, dest)
                logger.warning("restored %s from %s (a forced replacement was interrupted)", dest, keep)
                stale.remove(keep)
            except OSError as exc:
                logger.warning("could not restore %s from %s: %s", dest, keep, exc)
        for path in stale:
            _remove(path)
            removed.append(path)
    return removed


def sweep_stale_siblings(dest: str) -> List[str]:
    """:func:`sweep_stale_staging` for every name beside ``dest`` that a dead process left a
    staging or ``.old-`` folder for: each run collects into its own folder name, so a run killed
    while collecting leaves ``.{its name}.staging-*``, which the next run (another name) sweeps."""
    parent = os.path.dirname(os.path.abspath(dest))
    names = set()
    try:
        entries = os.listdir(parent)
    except OSError:
        return []
    for entry in entries:
        for tag in (_OLD_TAG, _STAGING_TAG):
            name, found, rest = entry[1:].rpartition(tag)
            if entry.startswith(".") and found and name and rest.split("-", 1)[0].isdigit():
                names.add(name)
    removed = []  # type: List[str]
    for name in sorted(names):
        removed.extend(sweep_stale_staging(os.path.join(parent, name)))
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
        sweep_stale_siblings(self.dest)  # first: it may put back a bundle an interrupted swap left aside
        _check_destination(self.dest, force)
        parent = os.path.dirname(self.dest)
        os.makedirs(parent, exist_ok=True)
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
        if exchange_paths(self.path, self.dest):  # one step: dest never absent
            _remove(self.path)  # now the previous bundle
            return
        old = _unique_sibling(self.dest, _OLD_TAG)
        os.rename(self.dest, old)
        try:
            os.rename(self.path, self.dest)
        except BaseException:
            os.rename(old, self.dest)  # put the previous result back
            raise
        _remove(old)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# renameat2 syscall numbers (for a libc without the wrapper, e.g. glibc < 2.28 on older images).
_SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276, "riscv64": 276, "loongarch64": 276,
                  "i386": 353, "i686": 353, "armv7l": 382, "armv8l": 382, "ppc64": 357, "ppc64le": 357,
                  "s390x": 347}
# errno values meaning "no atomic exchange here": fall back to two renames.
_NO_EXCHANGE = frozenset(e for e in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", None),
                                     errno.EPERM, errno.EXDEV) if e is not None)
_renameat2 = None  # type: Optional[Callable[[bytes, bytes], int]]
_renameat2_probed = False


def _load_renameat2() -> Optional[Callable[[bytes, bytes], int]]:
    """``f(a, b) -> 0 | errno`` exchanging two paths, or None when this system has no renameat2."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None
    wrapper = getattr(libc, "renameat2", None)
    if wrapper is not None:
        wrapper.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        wrapper.restype = ctypes.c_int

        def call(a: bytes, b: bytes) -> int:
            return 0 if wrapper(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE) == 0 else ctypes.get_errno()
        return call
    number = _SYS_RENAMEAT2.get(platform.machine().lower())
    syscall = getattr(libc, "syscall", None)
    if number is None or syscall is None:
        return None
    syscall.restype = ctypes.c_long

    def call_syscall(a: bytes, b: bytes) -> int:
        result = syscall(ctypes.c_long(number), ctypes.c_long(_AT_FDCWD), ctypes.c_char_p(a),
                         ctypes.c_long(_AT_FDCWD), ctypes.c_char_p(b), ctypes.c_ulong(_RENAME_EXCHANGE))
        return 0 if result == 0 else ctypes.get_errno()
    return call_syscall


def exchange_paths(a: str, b: str) -> bool:
    """Swap the names ``a`` and ``b`` atomically (Linux ``renameat2(RENAME_EXCHANGE)``).

    False, with nothing changed, when this system or file system cannot; OSError for any
    other failure.
    """
    global _renameat2, _renameat2_probed
    if not _renameat2_probed:
        _renameat2 = _load_renameat2()
        _renameat2_probed = True
    if _renameat2 is None:
        return False
    code = _renameat2(os.fsencode(a), os.fsencode(b))
    if code == 0:
        return True
    if code in _NO_EXCHANGE:
        logger.debug("renameat2(RENAME_EXCHANGE) %s <-> %s unavailable (%s); two renames", a, b, os.strerror(code))
        return False
    raise OSError(code, os.strerror(code), a, None, b)


def _rename_no_clobber(src: str, dest: str) -> None:
    """Move ``src`` to ``dest`` unless ``dest`` holds something (an empty folder is replaced)."""
    if os.path.isdir(src):
        os.rename(src, dest)  # fails with ENOTEMPTY/ENOTDIR unless dest is absent or an empty folder
        return
    if os.path.isdir(dest) and not os.path.islink(dest) and not is_nonempty(dest):
        os.rmdir(dest)
    os.link(src, dest)  # EEXIST instead of silently replacing a file that appeared meanwhile
    os.unlink(src)


