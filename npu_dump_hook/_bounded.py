"""One bounded in-process store, for the package's write-time notes and its module-level caches.

Several modules keep facts for later in the same process (the sha256 of files just written, a dump
file's NaN/Inf counts, the Build graph's JSON form, the stem of a golden ``.npy`` name, the numpy
dtype of a TF dtype); each must stay bounded for a run of any size. :class:`BoundedStore` is that
one pattern, in two policies a store's owner picks per call:

- :meth:`BoundedStore.put`: the newest wins. The entry becomes the newest (a key put again moves
  to the end, its old value dropped), then the oldest entries are dropped, oldest first, while the
  store holds more than ``max_entries`` entries or, when it counts bytes, more than ``max_bytes``
  bytes (the ``nbytes`` each value was put with, summed over what it holds). An entry bigger than
  ``max_bytes`` on its own drops everything, itself last: the store is then empty.
- :meth:`BoundedStore.add_if_room`: the first ones stay. The entry is kept only while the store
  holds fewer than ``max_entries`` entries and, when it counts bytes, would hold at most
  ``max_bytes`` with it (a cache of values recomputed when absent); nothing is dropped for it.

Thread safety: every change (put, add, clear) is made under the store's :attr:`~BoundedStore.lock`
(a ``threading.Lock``), so the counts and bytes stay exact when the capture's writer threads note
files while the main thread notes others. :meth:`BoundedStore.get` is the underlying OrderedDict's
own lookup, without the lock: it keeps the hot path to one C call, and one lookup is atomic under
CPython's GIL for keys whose hash and comparison run no Python code (the notes' keys: tuples of
ints; the golden stems': str); a store keyed otherwise (a TF dtype) is used from one thread. The
values the notes keep are tuples, never changed in place, so a lookup hands back a whole value.
A caller that wants its lookup ordered with the changes takes :attr:`~BoundedStore.lock` around it.
Stdlib only (the writers of :mod:`npu_dump_hook.formats` use it).
"""
import collections
import threading
from typing import Any, Callable, Dict, Generic, Optional, TypeVar

__all__ = ["BoundedStore"]

K = TypeVar("K")
V = TypeVar("V")

_ABSENT = object()


class BoundedStore(Generic[K, V]):
    """Values by key, at most ``max_entries`` of them and, with ``max_bytes``, at most that many
    bytes of them, a value counting for the ``nbytes`` it was put with (module doc: the two
    policies, eviction order, thread safety). The bounds are read at each change (a test may
    lower them)."""

    __slots__ = ("max_entries", "max_bytes", "lock", "nbytes", "get", "_sizes", "_entries")
    # (invariant: nbytes is the sum of _sizes, which holds the keys put with nbytes > 0 only)

    def __init__(self, max_entries: int, max_bytes: Optional[int] = None) -> None:
        for name, bound in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if (bound is not None or name == "max_entries") and (
                    isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
                raise ValueError("BoundedStore: {} must be an int >= 0, got {!r}".format(name, bound))
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        #: Bytes held: the ``nbytes`` of the values held (0 in a store without ``max_bytes``).
        self.nbytes = 0
        self._sizes = {}  # type: Dict[K, int]  # the nbytes of each value held that counts some
        self._entries = collections.OrderedDict()  # type: collections.OrderedDict
        #: ``get(key, default=None)``: the value kept under ``key``, else ``default``. The
        #: OrderedDict's own C method, bound once: a lookup costs what a dict's does.
        self.get = self._entries.get  # type: Callable[..., Any]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def put(self, key: K, value: V, nbytes: int = 0) -> None:
        """Keep ``value`` under ``key`` as the newest entry, counting for ``nbytes`` bytes, then drop
        the oldest while a bound is passed."""
        if nbytes and (nbytes < 0 or self.max_bytes is None):
            self._refuse(nbytes)
        with self.lock:
            entries = self._entries
            if entries.pop(key, _ABSENT) is not _ABSENT and self.nbytes:  # (put again: to the end)
                self.nbytes -= self._sizes.pop(key, 0)
            entries[key] = value
            if nbytes:
                self._sizes[key] = nbytes
                self.nbytes += nbytes
            if len(entries) > self.max_entries or (self.nbytes and self.nbytes > self.max_bytes):  # type: ignore[operator]
                self._drop_oldest()

    def add_if_room(self, key: K, value: V, nbytes: int = 0) -> bool:
        """Keep ``value`` under ``key`` (in the place of a value held under it), counting for
        ``nbytes`` bytes, if the store holds fewer than ``max_entries`` entries and would then hold
        at most ``max_bytes`` bytes; else keep nothing and answer False."""
        if nbytes and (nbytes < 0 or self.max_bytes is None):
            self._refuse(nbytes)
        with self.lock:
            entries = self._entries
            if len(entries) >= self.max_entries:
                return False
            if nbytes or self.nbytes:
                held = self.nbytes - self._sizes.get(key, 0) + nbytes
                if held and held > self.max_bytes:  # type: ignore[operator]
                    return False
                self.nbytes = held
                self._sizes.pop(key, None)
                if nbytes:
                    self._sizes[key] = nbytes
            entries[key] = value
            return True

    def clear(self) -> None:
        """Drop every entry."""
        with self.lock:
            self._entries.clear()
            self._sizes.clear()
            self.nbytes = 0

    def _refuse(self, nbytes: int) -> None:
        raise ValueError("BoundedStore: a value counting for {} bytes, in a store {}".format(
            nbytes, "that counts no bytes (no max_bytes)" if self.max_bytes is None else "(bytes are >= 0)"))

    def _drop_oldest(self) -> None:
        """Drop the oldest entries while a bound is passed (under the lock)."""
        entries, sizes = self._entries, self._sizes
        while len(entries) > self.max_entries or (self.nbytes and self.nbytes > self.max_bytes):  # type: ignore[operator]
            key, _dropped = entries.popitem(last=False)
            if self.nbytes:
                self.nbytes -= sizes.pop(key, 0)
