import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
DOUBLE_DIR = os.path.join(TESTS_DIR, "npu_bridge_double")


@pytest.fixture
def npu_bridge_double():
    """Put the npu_bridge double on sys.path for one test, then remove every trace of it."""
    sys.path.insert(0, DOUBLE_DIR)
    try:
        import npu_bridge.npu_init  # noqa: F401

        yield sys.modules["npu_bridge"]
    finally:
        sys.path.remove(DOUBLE_DIR)
        for name in [m for m in sys.modules if m == "npu_bridge" or m.startswith("npu_bridge.")]:
            del sys.modules[name]


@pytest.fixture
def in_tmp_cwd(tmp_path, monkeypatch):
    """Run in an empty working directory, with no dump/graph variables inherited."""
    monkeypatch.chdir(tmp_path)
    for var in ("DUMP_GRAPH_PATH", "NPU_DUMP_ENABLE", "NPU_DUMP_PATH", "NPU_DUMP_STEP", "NPU_DUMP_MODE",
                "NPU_DUMP_LAYER", "NPU_DUMP_DATA", "NPU_DUMP_DEBUG_ENABLE", "NPU_DUMP_DEBUG_MODE",
                "RANK_ID", "DEVICE_ID", "ASCEND_DEVICE_ID"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path
