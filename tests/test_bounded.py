"""The package's one bounded store (npu_dump_hook/_bounded.py): ``put`` keeps the newest and drops
the oldest first beyond a count or a byte bound (each exactly at its edge), ``add_if_room`` keeps
the first ones and drops nothing, the bytes held stay exact (also with threads putting at once),
and each owner's store is built with that owner's documented bounds. Pure Python."""
import threading
import time

import pytest

from npu_dump_hook import _bounded, _ledger, _written
from npu_dump_hook._bounded import BoundedStore
from npu_dump_hook.formats import ge_handover, names


def _keys(store, candidates):
    """The candidates the store holds (in the candidates' order: the store's own order shows in what it drops)."""
    return [key for key in candidates if key in store]


def _put(store, key, value):
    store.put(key, value, len(value))


def _add(store, key, value):
    return store.add_if_room(key, value, len(value))


def test_put_keeps_the_newest_up_to_the_count_bound_and_drops_the_oldest_first():
    store = BoundedStore(3)
    for key in "abc":
        store.put(key, key.upper())
    assert len(store) == 3 and store.get("a") == "A"  # at the bound: nothing dropped
    store.put("d", "D")
    assert _keys(store, "abcd") == ["b", "c", "d"] and store.get("a") is None
    store.put("b", "B2")  # put again: the newest now, with its new value
    store.put("e", "E")
    assert _keys(store, "abcde") == ["b", "d", "e"] and store.get("b") == "B2"
    assert store.get("c", "absent") == "absent"


def test_put_keeps_the_newest_up_to_the_byte_bound_and_counts_bytes_exactly():
    store = BoundedStore(100, max_bytes=10)
    _put(store, "a", b"1234")
    _put(store, "b", b"123456")
    assert _keys(store, "ab") == ["a", "b"] and store.nbytes == 10  # exactly at the bound: kept
    _put(store, "c", b"1")
    assert _keys(store, "abc") == ["b", "c"] and store.nbytes == 7
    _put(store, "b", b"12")  # a value put again counts for its new bytes only, and is the newest
    assert store.nbytes == 3 and _keys(store, "bc") == ["b", "c"]
    _put(store, "d", b"1234567")  # 10 bytes: at the bound, kept
    assert _keys(store, "bcd") == ["b", "c", "d"] and store.nbytes == 10
    _put(store, "e", b"1")  # one over: the oldest, c (put before b was put again), goes
    assert _keys(store, "bcde") == ["b", "d", "e"] and store.nbytes == 10


def test_a_value_over_the_byte_bound_on_its_own_empties_the_store():
    store = BoundedStore(100, max_bytes=10)
    _put(store, "a", b"1")
    _put(store, "big", b"x" * 11)
    assert len(store) == 0 and store.nbytes == 0 and store.get("big") is None
    _put(store, "b", b"1")
    assert store.get("b") == b"1" and store.nbytes == 1


def test_both_bounds_hold_at_once():
    store = BoundedStore(2, max_bytes=100)
    for key in "abc":
        _put(store, key, b"x")
    assert _keys(store, "abc") == ["b", "c"] and store.nbytes == 2


def test_add_if_room_keeps_the_first_ones_and_drops_nothing():
    store = BoundedStore(2)
    assert store.add_if_room("a", 1) and store.add_if_room("b", 2)
    assert not store.add_if_room("c", 3)  # full: the newcomer is not kept, nothing is dropped
    assert not store.add_if_room("a", 10)  # full: not even a new value for a key held
    assert _keys(store, "abc") == ["a", "b"] and store.get("a") == 1
    store = BoundedStore(2)
    store.add_if_room("a", 1)
    assert store.add_if_room("a", 5) and store.get("a") == 5 and len(store) == 1  # room: replaced in place


def test_add_if_room_holds_the_byte_bound_to_its_edge():
    store = BoundedStore(10, max_bytes=5)
    assert _add(store, "a", "123") and _add(store, "b", "12")  # 5 bytes: at the bound
    assert not _add(store, "c", "1") and store.nbytes == 5
    assert _add(store, "a", "1") and store.nbytes == 3  # its old bytes are given back


def test_a_store_of_no_entries_keeps_nothing():
    store = BoundedStore(0)
    store.put("a", 1)
    assert not store.add_if_room("b", 2) and len(store) == 0


def test_clear_drops_every_entry_and_its_bytes():
    store = BoundedStore(5, max_bytes=50)
    _put(store, "a", b"123")
    store.clear()
    assert len(store) == 0 and store.nbytes == 0 and store.get("a") is None


@pytest.mark.parametrize("arguments", [dict(max_entries=-1), dict(max_entries=True), dict(max_entries=2.0),
                                       dict(max_entries=None), dict(max_entries=2, max_bytes=-1)])
def test_bounds_that_make_no_store_are_refused(arguments):
    with pytest.raises(ValueError, match="BoundedStore: max_"):
        BoundedStore(**arguments)


def test_bytes_are_refused_where_they_cannot_be_counted():
    with pytest.raises(ValueError, match="counts no bytes"):
        BoundedStore(5).put("a", b"1", 1)
    with pytest.raises(ValueError, match="counts no bytes"):
        BoundedStore(5).add_if_room("a", b"1", 1)
    store = BoundedStore(5, max_bytes=10)
    with pytest.raises(ValueError, match=">= 0"):
        store.put("a", b"1", -1)
    assert len(store) == 0 and store.nbytes == 0  # refused before anything was kept


def test_threads_putting_at_once_keep_the_bounds_and_the_bytes_exact():
    store = BoundedStore(50, max_bytes=400)

    def put_many(thread):
        for number in range(1000):
            time.sleep(0)  # let another thread run: without the store's lock their changes interleave
            value = b"x" * (number % 13)
            store.put((thread, number % 80), value, len(value))

    threads = [threading.Thread(target=put_many, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = [store.get((thread, number)) for thread in range(4) for number in range(80)]
    held = [value for value in held if value is not None]
    assert len(held) == len(store) <= 50 and store.nbytes == sum(map(len, held)) <= 400


def test_each_owner_builds_its_store_with_its_documented_bounds():
    assert (_written._noted.max_entries, _written._noted.max_bytes) == (_written.MAX_NOTED, _written.MAX_HEAD_BYTES)
    assert (_ledger._noted.max_entries, _ledger._noted.max_bytes) == (_ledger.MAX_NOTED, None)
    assert (ge_handover._noted.max_entries, ge_handover._noted.max_bytes) == (ge_handover.MAX_GRAPHS, None)
    assert names._GOLDEN_STEMS.max_entries == names._GOLDEN_STEMS_SIZE
    assert _bounded.__all__ == ["BoundedStore"]
