"""collect.wait_for_settle: GE writes asynchronously; collection waits until nothing changes."""
import logging
import os
import threading
import time

from npu_dump_hook.collect import wait_for_settle

def test_wait_for_settle_waits_for_a_writer(tmp_path):
    target = tmp_path / "0" / "ge_default" / "1" / "0"
    target.mkdir(parents=True)
    stop_at = []

    def writer():
        path = target / "MatMul.x.1.0.1796000000000000"
        for _ in range(12):
            with open(str(path), "ab") as handle:
                handle.write(b"x" * 64)
            time.sleep(0.05)
        (target / "late_file").write_bytes(b"y")
        stop_at.append(time.monotonic())

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert wait_for_settle([str(tmp_path)], quiet_seconds=0.3, timeout=10, poll=0.02) is True
        settled_at = time.monotonic()
    finally:
        thread.join()
    assert stop_at, "writer did not finish before wait_for_settle returned"
    assert settled_at - stop_at[0] >= 0.3 - 0.05


def test_wait_for_settle_times_out_while_files_keep_changing(tmp_path, caplog):
    done = threading.Event()

    def writer():
        index = 0
        while not done.is_set():
            (tmp_path / "f{}".format(index)).write_bytes(b"z")
            index += 1
            time.sleep(0.02)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        started = time.monotonic()
        assert wait_for_settle(str(tmp_path), quiet_seconds=0.5, timeout=0.6, poll=0.05) is False
        assert time.monotonic() - started < 2.0
    finally:
        done.set()
        thread.join()
    assert "dump still changing" in caplog.text


def test_wait_for_settle_on_missing_and_quiet_paths(tmp_path):
    (tmp_path / "a").write_bytes(b"1")
    started = time.monotonic()
    assert wait_for_settle([str(tmp_path), str(tmp_path / "missing")], quiet_seconds=0.1, timeout=5, poll=0.02)
    assert time.monotonic() - started < 1.0
