"""The sha256 of small files this process just wrote, so the bundle writer need not read them back.

An emulated NPU step writes 1,000s of small files (an unrolled RNN: ~1,300 dump files and
~2,000 captured ``.npy`` tensors), and moments later, in the same process, the bundle writer
hard-links each into the bundle and opened and read every one again for its sha256 (and a dump
file's header). The bytes were in memory when the file was written: :func:`note_written`
hashes them there (no system call), :func:`written_facts` hands size, digest, the noted first
bytes and, for a dump file, its header's tensor fields as the bundle's description decodes them
(taken from the header message the bytes were serialized from) back for a path that is still
the same file.

Honesty rule, as :mod:`npu_dump_hook._ledger`'s: a fact is handed back only for the very file it
was taken from, unchanged as far as one ``lstat`` can tell: same device and inode (a hard link of
it is the same file), same size, same modification time to the nanosecond, same file name, a
regular file. Anything else (a copy, a rewrite, a symlink, a file never noted, one over
:data:`NOTE_MAX_BYTES`) answers None and the caller reads the file as before. A rewrite that keeps
the size inside one tick of the file system's clock would go unseen by the writer: the manifest
then holds the digest of the bytes written, and ``verify``, which always hashes the files, reports
the file as changed. Stdlib only (the writers of :mod:`npu_dump_hook.formats` import it).
"""
import hashlib
import os
import stat
import threading
from typing import Any, Iterable, Mapping, Optional, Tuple, Union

from ._bounded import BoundedStore

__all__ = ["note_written", "file_identity", "fd_identity", "just_noted", "still_noted", "written_facts", "forget_all", "NOTE_MAX_BYTES", "MAX_NOTED", "MAX_HEAD_BYTES"]

#: Files larger than this are not noted: their cost is their bytes (hashed by the bundle's
#: threads, the GIL released), not the per-file system calls this saves.
NOTE_MAX_BYTES = 1 << 20
#: Files remembered at most, the oldest forgotten first (~200 bytes a file without its head).
MAX_NOTED = 1 << 16
#: First bytes (a dump file's prefix and header) kept at most in all, the oldest forgotten first.
MAX_HEAD_BYTES = 16 << 20
#: The one path separator where it is the only one (POSIX): a str path's file name is then what
#: follows its last occurrence, as os.path.basename takes it without that function's per-call
#: checks (~0.25 us of a look-up's ~4 on Python 3.7); elsewhere (a second separator) None.
_SEP = os.sep if os.altsep is None else None

#: (device, inode) -> (identity, size, sha256 hex, head, fields), each counting for its head's
#: bytes; a writer thread notes too.
_noted = BoundedStore(MAX_NOTED, MAX_HEAD_BYTES)  # type: BoundedStore[Tuple[int, int], Tuple[Any, ...]]
#: Per thread: (path, identity) of the file this thread noted last (:func:`just_noted`).
_last = threading.local()


def file_identity(path: str) -> Optional[Tuple[int, int, int, int, str]]:
    """(device, inode, size, mtime ns, file name) of the regular file ``path``, from one lstat."""
    try:
        return _identity(os.lstat(path), path)
    except OSError:
        return None


def fd_identity(fd: int, path: str) -> Optional[Tuple[int, int, int, int, str]]:
    """:func:`file_identity` of the file a writer has open as ``fd`` at ``path``, from one fstat
    (no path lookup), taken after its last write: the same tuple an lstat of ``path`` gives once
    it is closed, for a regular file. None when it is not a regular file or fstat fails. A
    mismatch (e.g. ``path`` a symlink) only makes the lookup answer None: the file is read."""
    try:
        return _identity(os.fstat(fd), path)
    except OSError:
        return None


def _identity(st: os.stat_result, path: str) -> Optional[Tuple[int, int, int, int, str]]:
    """The identity tuple of stat result ``st`` of ``path``, or None when it is not a regular file."""
    if not stat.S_ISREG(st.st_mode):
        return None
    name = path[path.rfind(_SEP) + 1:] if _SEP and type(path) is str else os.path.basename(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, name


def note_written(path: str, parts: Iterable[Any], head: Optional[bytes] = None, fields: Any = None,
                 identity: Optional[Tuple[int, int, int, int, str]] = None, size: Optional[int] = None) -> None:
    """Record the size and sha256 of the file just written at ``path`` from ``parts``, the
    bytes-like pieces it was written from, in order; ``head``: its first bytes, and ``fields``:
    what a reader decodes from them (a dump file's tensor fields, see
    :func:`npu_dump_hook.formats.dump_file.quick_tensor_fields`), kept with it. ``identity``:
    the file's :func:`fd_identity` taken by the writer after its last write (default: an lstat
    of ``path`` now). ``size``: the parts' total bytes, when the writer knows it (then a part may
    be any C-contiguous buffer, e.g. a numpy array, whose ``len`` is not its byte count). Never
    raises: a file whose identity cannot be taken, or whose size is not the parts', is simply not
    noted (the identity's size, from the file system, is checked against it)."""
    _last.noted = None
    if size is None:
        parts = list(parts)
        size = sum(map(len, parts))
    if size > NOTE_MAX_BYTES:  # before hashing: a big file costs its bytes, never noted
        return
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    if identity is None:
        identity = file_identity(path)
    if identity is None or identity[2] != size:
        return
    _last.noted = (path, identity)
    _noted.put(identity[:2], (identity, size, digest.hexdigest(), head, fields), len(head) if head is not None else 0)


def just_noted(path: str) -> Optional[Tuple[int, int, int, int, str]]:
    """The identity :func:`note_written` noted for ``path`` in this thread's last call (None when
    that call was for another path or noted nothing), so a second note of the same file just
    written (:func:`npu_dump_hook._ledger.note_dump_file`) need not lstat it again."""
    last = getattr(_last, "noted", None)
    return last[1] if last is not None and last[0] == path else None


def written_facts(path: str) -> Optional[Tuple[int, str, Optional[bytes], Any]]:
    """(size, sha256 hex, noted first bytes or None, noted fields or None) of the file at ``path``
    if it is still the file noted (module doc), else None."""
    found = still_noted(_noted, None, path)
    if found is None:
        return None
    return found[1], found[2], found[3], found[4]


def still_noted(noted: Union[BoundedStore[Tuple[int, int], Tuple[Any, ...]], Mapping[Tuple[int, int], Tuple[Any, ...]]],
                lock: Any, path: str) -> Optional[Tuple[Any, ...]]:
    """The entry ``noted`` keeps for the file at ``path``, keyed by (device, inode) with the whole
    :func:`file_identity` first, when that file is still the one noted; else None. The one
    matching rule of this module, :mod:`npu_dump_hook._ledger` and
    :mod:`npu_dump_hook.formats.ge_handover`. ``lock``: taken around the lookup, or None for a
    :class:`~npu_dump_hook._bounded.BoundedStore`, whose lookup is one atomic C call (its doc)."""
    if not noted:
        return None
    identity = file_identity(path)
    if identity is None:
        return None
    if lock is None:
        found = noted.get(identity[:2])
    else:
        with lock:
            found = noted.get(identity[:2])
    if found is None or found[0] != identity:
        return None
    return found


def forget_all() -> None:
    """Drop every noted fact (tests; a caller that wants every file read)."""
    _noted.clear()
