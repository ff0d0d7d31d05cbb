"""The statistics compare's shortcuts give what the general paths give: Row.of_values the Row a
TensorResult makes, the CSV reader's tuples the full reader's rows (a final symlink or a FIFO is
never read by the shortcut), and the garbage collector is paused only while a compare builds its
document (pure Python: no TF needed)."""
import gc
import os
from dataclasses import astuple

import numpy as np
import pytest

from npu_dump_hook.compare._match import OpEntry
from npu_dump_hook.compare._rows import Row
from npu_dump_hook.compare._stats_fast import read_stats_cells
from npu_dump_hook.compare._worker import TensorResult
from npu_dump_hook.compare.stats import paused_cycle_collection
from npu_dump_hook.formats.names import parse_dump_name
from npu_dump_hook.formats.stats_csv import StatsRow, compute_stats, read_stats_csv, write_stats_csv


class _Ref(object):
    def __init__(self, name):
        self.name = parse_dump_name(name)
        self.path = name


@pytest.mark.parametrize("iteration", [None, 3])
@pytest.mark.parametrize("reason", ["", "no golden file: no golden statistics for a.0"])
def test_of_values_is_the_row_a_tensor_result_makes(iteration, reason):
    entry = OpEntry(4, 2, "net/a", "Add", ("net/a", "net/b"), _Ref("Add.net_a.7.0.1700000000000050.csv"), None,
                    iteration)
    metrics = None if reason else {"RelativeEuclideanDistance": 0.25}
    tensor = TensorResult("input", 1, "DT_FLOAT", "NaN", (2, 3), "NC1HWC0", (2, 4), ("net/x", 0), None, "float32",
                          metrics, None, None, reason, reason, bool(reason))
    general = Row(entry, tensor, timestamp=1700000000000050)
    fast = Row.of_values(entry, 1700000000000050, "input", 1, "DT_FLOAT", (2, 3), "NC1HWC0", (2, 4), ("net/x", 0),
                         "float32", metrics, reason, bool(reason))
    assert vars(fast) == vars(general) and sorted(vars(fast)) == sorted(vars(general))
    assert fast.tensor == "net/a:input:1" + ("" if iteration is None else "@3") and fast.task_id == 7


def test_a_row_without_a_tensor_says_why_and_names_no_tensor():
    entry = OpEntry(4, 2, "net/a", "Add", ("net/a",), None, None, 3)
    row = Row(entry, None, "no dump file: net/a (Add) has no dump file in the step folder", 1700000000000050)
    assert (row.direction, row.slot, row.tensor, row.task_id, row.timestamp) == ("output", 0, "", None,
                                                                                 1700000000000050)
    assert (row.npu_dtype, row.golden_dtype, row.address, row.shape, row.original_shape) == ("NaN", "NaN", "NaN",
                                                                                            (), ())
    assert row.fail_reason == row.reason == "no dump file: net/a (Add) has no dump file in the step folder"
    assert (row.metrics, row.golden, row.cells, row.overflow, row.shape_note) == (None, None, None, False, "")
    assert not row.compared and row.reason_category == "no dump file" and row.iteration == 3


def test_the_csv_shortcut_reads_what_the_full_reader_reads_and_never_a_link_or_fifo(tmp_path):
    rows = [StatsRow("Input", 0, 64, "DT_FLOAT", "ND", (4, 4), **compute_stats(np.arange(16, dtype=np.float32))),
            StatsRow("Output", 0, 64, "DT_FLOAT", "ND", (16,), **compute_stats(np.ones(16, np.float32)))]
    path = str(tmp_path / "Add.a.2.0.1700000000000000.csv")
    write_stats_csv(path, rows)
    expected = [astuple(row) for row in read_stats_csv(path).rows]
    assert read_stats_cells(path) == expected and len(expected) == 2
    link = str(tmp_path / "Add.b.3.0.1700000000000001.csv")
    os.symlink(path, link)
    assert read_stats_cells(link) == expected  # the full reader (it follows the link, as before)
    if hasattr(os, "mkfifo"):
        fifo = str(tmp_path / "Add.c.4.0.1700000000000002.csv")
        os.mkfifo(fifo)
        from npu_dump_hook._files import read_small_regular

        assert read_small_regular(fifo, 1 << 20) is None and read_small_regular(link, 1 << 20) is None  # refused
        assert read_small_regular(path, 1 << 20) == open(path, "rb").read()  # opened without blocking


def test_the_collector_is_paused_only_inside_and_left_as_found(tmp_path):
    assert gc.isenabled()
    with paused_cycle_collection():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_cycle_collection():
            pass
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        with paused_cycle_collection():
            raise ValueError("boom")
    assert gc.isenabled()
