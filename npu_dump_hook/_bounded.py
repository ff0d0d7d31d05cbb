"""One bounded in-process store, for the package's write-time notes and its module-level caches.

Several modules keep facts for later in the same process (the sha256 of files just written, a dump
file's NaN/Inf counts, the Build graph's JSON form, the stem of a golden ``.npy`` name, the numpy
dtype of a TF dtype); each must stay bounded for a run of any size. :class:`BoundedStore` is that
one pattern, in two policies a store's owner picks per call:

- :meth:`BoundedStore.put`: the newest wins. The entry becomes the newest (a key put again moves
  to the end, its old value dropped), then the oldest entries are dropped, oldest first, while the
  store holds more than ``max_entries`` entries or, when it counts bytes, more than ``max_bytes``
  bytes (``size_of(value)`` summed over what it holds). An entry bigger than ``max_bytes`` on its
  own drops everything, itself last: the store is then empty.
- :meth:`BoundedStore.add_if_room`: the first ones stay. The entry is kept only while the store
  holds fewer than ``max_entries`` entries and, when it counts bytes, would hold at most
  ``max_bytes`` with it (a cache of values recomputed when absent); nothing is dropped for it.

Thread safety: every change (put, add, clear) is made under the store's :attr:`~BoundedStore.lock`
(a ``threading.Lock``), so the counts and bytes stay exact when the capture's writer threads note
files while the main thread notes others. :meth:`BoundedStore.get` is the underlying OrderedDict's own lookup, without the lock: it keeps the
hot path to one C call, and one lookup is atomic under CPython's GIL for keys whose hash and
comparison run no Python code (the notes' keys: tuples of ints); a store keyed otherwise (a TF
dtype) is used from one thread. A caller that wants its lookup ordered with the changes takes
:attr:`~BoundedStore.lock` around it (``_written.still_noted`` does).
Stdlib only (the writers of :mod:`npu_dump_hook.formats` use it).
"""
import collections
import threading
from typing import Any, Callable, Generic, Optional, TypeVar

__all__ = ["BoundedStore"]

K = TypeVar("K")
V = TypeVar("V")

_ABSENT = object()


class BoundedStore(Generic[K, V]):
    """Values by key, at most ``max_entries`` of them and, with ``size_of``, at most ``max_bytes``
    bytes of them (module doc: the two policies, eviction order, thread safety).

    ``max_entries``, ``max_bytes``: the bounds, read at each change (a test may lower them).
    ``size_of``: the bytes a value counts for, given with ``max_bytes`` and only with it."""

    def __init__(self, max_entries: int, max_bytes: Optional[int] = None,
                 size_of: Optional[Callable[[V], int]] = None) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
            raise ValueError("BoundedStore: max_entries must be an int >= 0, got {!r}".format(max_entries))
        if (max_bytes is None) != (size_of is None):
            raise ValueError("BoundedStore: max_bytes and size_of go together (a byte bound needs the bytes of a value)")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        #: Bytes held, ``size_of`` summed over the values (0 when bytes are not counted).
        self.nbytes = 0
        self._size_of = size_of
        self._entries = collections.OrderedDict()  # type: collections.OrderedDict
        #: ``get(key, default=None)``: the value kept under ``key``, else ``default``. The
        #: OrderedDict's own C method, bound once: a lookup costs what a dict's does.
        self.get = self._entries.get  # type: Callable[..., Any]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` as the newest entry, then drop the oldest beyond the bounds."""
        size_of = self._size_of
        size = 0 if size_of is None else size_of(value)
        with self.lock:
            entries = self._entries
            old = entries.pop(key, _ABSENT)
            if old is not _ABSENT and size_of is not None:
                self.nbytes -= size_of(old)
            entries[key] = value
            self.nbytes += size
            while len(entries) > self.max_entries or (self.max_bytes is not None and self.nbytes > self.max_bytes):
                _key, dropped = entries.popitem(last=False)
                if size_of is not None:
                    self.nbytes -= size_of(dropped)

    def add_if_room(self, key: K, value: V) -> bool:
        """Keep ``value`` under ``key`` (in the place of a value held under it) if the store holds
        fewer than ``max_entries`` entries and, counting bytes, would then hold at most
        ``max_bytes``; else keep nothing and answer False."""
        size_of = self._size_of
        with self.lock:
            entries = self._entries
            if len(entries) >= self.max_entries:
                return False
            if size_of is not None:
                old = entries.get(key, _ABSENT)
                nbytes = self.nbytes + size_of(value) - (0 if old is _ABSENT else size_of(old))
                if nbytes > self.max_bytes:  # type: ignore[operator]  # (max_bytes goes with size_of)
                    return False
                self.nbytes = nbytes
            entries[key] = value
            return True

    def clear(self) -> None:
        """Drop every entry."""
        with self.lock:
            self._entries.clear()
            self.nbytes = 0
