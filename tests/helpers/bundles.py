"""A small Build graph plus one dump step folder, and bundles written from it (shared by bundle and CLI tests)."""
import hashlib
import os

import numpy as np

from npu_dump_hook import bundle
from npu_dump_hook.formats.dump_file import write_dump_file
from npu_dump_hook.formats.mapping_csv import write_mapping
from npu_dump_hook.locate import LocatedRun, StepDir

GRAPH_NAME = "ge_default_20240101120000_1"
TIME_DIR = "20240101120000"
CONV = "Conv2D.conv1_Conv2D.3.2.1700000000000001"
RELU = "Relu.relu1.4.2.1700000000000002"
LONG_OP = "tower_0/" + "very_long_scope_" * 20 + "MatMul"
LONG_NAME = "MatMul.{}.6.2.1700000000000003".format(LONG_OP.replace("/", "_"))
HASHED = "12345678901234567890"
STATS = "Add.add1.7.2.1700000000000004.csv"
FFTS = "Mul.mul1_lxslice1.8.2.1700000000000005.4.1.0.0"

GRAPH_TEXT = """name: "{name}"
graph {{
  name: "{name}"
  op {{
    name: "conv1/Conv2D"
    type: "Conv2D"
    id: 1
  }}
  op {{
    name: "relu1"
    type: "Relu"
    id: 2
  }}
  op {{
    name: "{long}"
    type: "MatMul"
    id: 3
  }}
  op {{
    name: "add1"
    type: "Add"
    id: 4
  }}
  op {{
    name: "mul1"
    type: "Mul"
    id: 5
  }}
  op {{
    name: "reshape1"
    type: "Reshape"
    attr {{
      key: "_no_task"
      value {{
        b: true
      }}
    }}
    id: 6
  }}
  op {{
    name: "sub1"
    type: "Sub"
    id: 7
  }}
}}
""".format(name=GRAPH_NAME, long=LONG_OP)

TOP_KEYS = {"schema", "backend", "created", "versions", "options", "run", "randomness", "graph", "dump",
            "files", "coverage", "warnings", "fingerprints"}


def make_run(root, device="0", step="0"):
    """A small Build graph + one dump step folder; returns (LocatedRun, source dirs)."""
    graphs = root / "graphs"
    graphs.mkdir(parents=True, exist_ok=True)
    graph_file = graphs / "ge_proto_00000123_graph_1_Build.txt"
    graph_file.write_text(GRAPH_TEXT)
    step_dir = root / "dump" / TIME_DIR / device / GRAPH_NAME / "1" / step
    step_dir.mkdir(parents=True)
    x = np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1)
    write_dump_file(str(step_dir / CONV), "conv1/Conv2D", outputs=[x], inputs=[x, np.ones((1, 1), np.float16)])
    write_dump_file(str(step_dir / RELU), "relu1", outputs=[np.zeros(3, np.int32)])
    write_dump_file(str(step_dir / HASHED), LONG_OP, outputs=[np.zeros((2, 2), np.float32)])
    write_mapping(str(step_dir / "mapping.csv"), [(HASHED, LONG_NAME)])
    (step_dir / STATS).write_text("Input/Output,Index,Data Size,Data Type,Format,Shape\n")
    write_dump_file(str(step_dir / FFTS), "mul1", outputs=[np.zeros(2, np.float32)])
    (step_dir / "notes.txt").write_text("free text")
    located = LocatedRun(str(graph_file), GRAPH_NAME, {"method": "test", "candidates": []}, str(root / "dump"),
                         [StepDir(TIME_DIR, device, GRAPH_NAME, "1", step, str(step_dir))], [])
    return located


def write(dest, located, **kwargs):
    kwargs.setdefault("backend", "emulated")
    kwargs.setdefault("options", {"dump_mode": "all"})
    kwargs.setdefault("run", {"steps": 1, "global_step": 0, "rank": 0, "device_id": 0})
    kwargs.setdefault("randomness", {"policy": "audit", "ops": []})
    return bundle.write_bundle(str(dest), located, **kwargs)


def tree_state(root):
    """{relative path: (sha256, mtime_ns, size)} of every file under root."""
    state = {}
    for dirpath, _dirs, files in os.walk(str(root)):
        for name in files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            digest = hashlib.sha256(open(full, "rb").read()).hexdigest() if not os.path.islink(full) else "link"
            state[os.path.relpath(full, str(root))] = (digest, st.st_mtime_ns, st.st_size)
    return state


def entries_by_name(doc):
    return {e["path"].rsplit("/", 1)[-1]: e for e in doc["files"]}


def list_bundle_json(bag):
    """Give data/bundle.json of ``bag`` the row in manifest-sha256.txt its bytes have now, as the
    writer lists it (a hand-made or hand-edited bundle.json: open_bundle refuses one its manifest
    does not list); the other rows are kept, the manifest made when there is none."""
    bag = str(bag)
    with open(os.path.join(bag, "data", "bundle.json"), "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    manifest = os.path.join(bag, "manifest-sha256.txt")
    rows = []
    if os.path.isfile(manifest):
        with open(manifest) as handle:
            rows = [line for line in handle.read().splitlines() if not line.endswith("  data/bundle.json")]
    with open(manifest, "w") as handle:
        handle.write("".join(row + "\n" for row in sorted(rows + ["{}  data/bundle.json".format(digest)],
                                                          key=lambda row: row.split("  ", 1)[-1])))
    return bag
