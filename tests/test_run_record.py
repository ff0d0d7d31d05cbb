"""run_record: the run-folder layout, the one run section, run.json written atomically."""
import datetime
import json
import os

import pytest

from npu_dump_hook import DumpOptions
from npu_dump_hook.constants import RECORDED_BACKENDS
from npu_dump_hook.run_record import RUN_SECTION_KEYS, RunLayout, RunRecord, run_section

STARTED = datetime.datetime(2026, 12, 1, 8, 0, 0).timestamp()


def _record(tmp_path, **overrides):
    layout = RunLayout.new(str(tmp_path / "out"), rank=None, now=datetime.datetime(2026, 12, 1, 8, 0, 0), pid=42)
    os.makedirs(layout.root, exist_ok=True)
    values = dict(layout=layout, options=DumpOptions(), backend="emulated", started=STARTED, ended=STARTED + 3,
                  steps=1, max_steps=1, captured_step=0, global_step={"before": 0, "after": 1}, rank=None,
                  device_id=0, randomness={"policy": "strip", "sources": []}, graph_dump_env={}, tf_version="x")
    values.update(overrides)
    return RunRecord(**values)


def test_layout_names_every_part_of_the_run_folder(tmp_path):
    layout = RunLayout.new(str(tmp_path), rank=3, now=datetime.datetime(2026, 12, 1, 8, 0, 0), pid=42)
    assert layout.name == "20261201080000_42_rank3"
    parts = {os.path.relpath(getattr(layout, name), layout.root) for name in
             ("graph_dir", "dump_dir", "tf_graph", "init_prefix", "golden_dir", "capture_dir", "run_json")}
    assert parts == {"graph", "dump", os.path.join("tf", "graph.pbtxt"), os.path.join("init", "model.ckpt"),
                     "golden", ".capture", "run.json"}


def test_run_section_has_every_contract_key_even_when_unknown():
    section = run_section(steps=2, extra="kept")
    assert list(section)[: len(RUN_SECTION_KEYS)] == list(RUN_SECTION_KEYS)
    assert section["steps"] == 2 and section["started"] is None and section["extra"] == "kept"


def test_record_run_section_and_summary(tmp_path):
    record = _record(tmp_path, emulator={"backend": "emulated"})
    section = record.run_section()
    assert set(RUN_SECTION_KEYS) <= set(section)
    assert section["global_step"] == {"before": 0, "after": 1} and section["emulator"] == {"backend": "emulated"}
    assert section["started"].startswith("2026-12-01T08:00:00") and "run_dir" not in section
    summary = record.summary()
    assert summary["run_dir"] == record.layout.root and summary["backend"] in RECORDED_BACKENDS
    with pytest.raises(Exception):
        record.steps = 5  # frozen: collection sees what end() saw


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    record = _record(tmp_path)
    path = record.write()
    with open(path) as handle:
        assert json.load(handle)["steps"] == 1
    assert sorted(os.listdir(record.layout.root)) == ["run.json"]

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        _record(tmp_path, steps=7).write()
    with open(path) as handle:
        assert json.load(handle)["steps"] == 1  # the old run.json is intact
    assert sorted(os.listdir(record.layout.root)) == ["run.json"]


def test_golden_and_init_dirs_only_when_they_exist(tmp_path):
    record = _record(tmp_path, initial_state=None)
    assert record.golden_dir is None and record.init_dir is None
    os.makedirs(record.layout.golden_dir)
    with_init = _record(tmp_path, initial_state=record.layout.init_prefix)
    assert with_init.golden_dir == record.layout.golden_dir
    assert with_init.init_dir == os.path.dirname(record.layout.init_prefix)
