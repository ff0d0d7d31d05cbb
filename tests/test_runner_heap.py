"""The runner's heap freeze (runner/_heap.py): the objects alive when the hook is made leave the
cyclic collector's walks until the script ends, and come back whole (pure Python, no TF)."""
import gc
import weakref

import pytest

from npu_dump_hook.runner._heap import HeapFreeze


class _Cycle(object):
    def __init__(self):
        self.me = self


@pytest.fixture
def thawed():
    """Every test starts and ends with nothing frozen and the collector enabled."""
    enabled = gc.isenabled()
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_freeze_keeps_older_objects_out_of_collections_and_thaw_gives_them_back(thawed):
    heap = HeapFreeze()
    old = _Cycle()
    gone = weakref.ref(old)
    gc.collect()  # still referenced: it survives into the oldest generation
    gc.disable()  # no collection between the cycles' making and the freeze
    del old  # now an unreachable cycle of the oldest generation
    young = _Cycle()
    young_gone = weakref.ref(young)
    del young  # an unreachable cycle of the youngest generation
    gc.enable()
    heap.freeze()
    assert heap.frozen and gc.get_freeze_count() > 0
    assert young_gone() is None  # the young generations' garbage is freed, not frozen
    gc.collect()
    assert gone() is not None  # frozen: no collection walks it
    heap.freeze()  # once only
    heap.thaw()
    assert not heap.frozen and gc.get_freeze_count() == 0
    gc.collect()  # the frozen garbage is collected after the thaw, as without the freeze
    assert gone() is None
    heap.thaw()  # nothing left to thaw: a no-op
    assert gc.get_freeze_count() == 0


def test_a_disabled_collector_or_a_process_that_froze_itself_is_left_alone(thawed):
    gc.disable()
    heap = HeapFreeze()
    heap.freeze()
    assert not heap.frozen and gc.get_freeze_count() == 0
    gc.enable()
    gc.freeze()  # the script's own freeze
    own = gc.get_freeze_count()
    heap.freeze()
    heap.thaw()
    assert not heap.frozen and gc.get_freeze_count() == own  # never unfrozen by the runner


class _Backend(object):
    """What release_after_bundle reads of a hook's backend: the emulator's shared Build graph."""

    def __init__(self):
        from npu_dump_hook.emulator.npu_graph import SharedBuild

        self.shared_build = SharedBuild()


class _Hook(object):
    def __init__(self, backend):
        self.backend = backend


def test_release_after_bundle_forgets_the_build_and_the_write_time_notes(tmp_path):
    from npu_dump_hook import _written
    from npu_dump_hook.runner._heap import release_after_bundle

    path = str(tmp_path / "written.bin")
    with open(path, "wb") as handle:
        handle.write(b"payload")
    _written.note_written(path, [b"payload"])
    assert _written.written_facts(path) is not None
    backend = _Backend()
    backend.shared_build._last = object()  # a build kept from the run (its nodes, values)
    release_after_bundle(_Hook(backend))
    assert backend.shared_build._last is None
    assert _written.written_facts(path) is None  # forgotten: a later reader hashes the file itself


def test_release_after_bundle_with_a_backend_without_a_shared_build_still_forgets_the_notes(tmp_path):
    from npu_dump_hook import _written
    from npu_dump_hook.runner._heap import release_after_bundle

    path = str(tmp_path / "written.bin")
    with open(path, "wb") as handle:
        handle.write(b"payload")
    _written.note_written(path, [b"payload"])
    release_after_bundle(_Hook(object()))  # the NPU or golden backend: no emulator build
    assert _written.written_facts(path) is None
