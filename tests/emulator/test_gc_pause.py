"""npu_graph.cyclic_gc_paused: the collector is off inside, restored as it was after (also when
the body raises), and never switched on by it when the caller had it off."""
import gc

import pytest

from npu_dump_hook.emulator.npu_graph import cyclic_gc_paused


def test_collector_paused_and_restored():
    was = gc.isenabled()
    try:
        gc.enable()
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(KeyError):
            with cyclic_gc_paused():
                raise KeyError("x")
        assert gc.isenabled()
        gc.disable()
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
