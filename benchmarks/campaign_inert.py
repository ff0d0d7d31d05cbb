"""Issue #20's campaign, re-run: hostile inputs against every consumer, counted.

    .venv/bin/python benchmarks/campaign_inert.py              # every case (a few minutes: trains)
    .venv/bin/python benchmarks/campaign_inert.py --no-train   # only the cases that train nothing

Each case builds its hostile input in a fresh folder (bundles, dump trees and golden folders made
with tests/helpers/compare_synth.py, as the tests do; training runs of the sample MLP for the
interrupted-run and file-size cases), runs one ``npu-dump-hook`` command (or a training script)
in its own process under a timeout, and is classified:

* **escape**: a non-package exception reached the user: the CLI's "internal error: ..." line, a
  Python traceback on stderr without ``--debug``, or an exit status no documented one (0-3,
  143 for SIGTERM, a script's own) -- e.g. SIGABRT;
* **hang**: the timeout (``--timeout``, default 120 s) passed;
* **silently wrong**: exit status 0 on an input with a planted problem (a fault, an uncomparable
  file, an interrupted dump, a path out of the bundle), or an escape sequence from a name
  reaching the terminal output;
* **read outside the tree**: the process opened a file under the case's ``outside/`` folder
  (the planted victim), seen by a Python audit hook (``sys.addaudithook``, Python >= 3.8; on
  3.7 this column says n/a). TensorFlow's own C++ reads are not seen: the golden-run cases
  check instead that the run refused before training.

Prints one line per case and the four totals; exit status 0 when all four are 0.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import numpy as np  # noqa: E402

from helpers.compare_synth import Synth, chain  # noqa: E402

CLI_WRAPPER = """
import os, sys
outside = os.environ["CAMPAIGN_OUTSIDE"]
seen = []
def audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path = os.path.abspath(os.fsdecode(args[0]))
        if path.startswith(outside) and path not in seen:
            seen.append(path)
            sys.__stderr__.write("CAMPAIGN-OUTSIDE-READ " + path + "\\n")
if hasattr(sys, "addaudithook"):
    sys.addaudithook(audit)
from npu_dump_hook.cli import main
sys.exit(main(sys.argv[1:]))
"""
TRAIN = """
import os, resource, signal, sys
import tensorflow as tf
from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.sample_models import mlp_session

class Limit(tf.compat.v1.train.SessionRunHook):
    def after_create_session(self, session, coord):
        if os.environ.get("LIMIT"):
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (int(os.environ["LIMIT"]), resource.RLIM_INFINITY))

hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", strict=False)
mlp_session.train(hook.options, hooks=[Limit(), hook])
"""
ESC = "\x1b[1A\x1b[2K\rverdict: PASS"


# --------------------------------------------------------------------------- builders
def _synth(root, fault_at=None):
    synth = Synth(root)
    start = np.linspace(1, 2, 24, dtype=np.float32).reshape(4, 6)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 3, start, fault_at=fault_at)
    return synth


def _golden_file(golden, op="op/add_1"):
    return os.path.join(golden, [n for n in os.listdir(golden) if n.startswith(op.replace("/", "_") + ".")][0])


def _dump_file(step, op="op/add_1"):
    return os.path.join(step, [n for n in os.listdir(step) if ".{}.".format(op.replace("/", "_")) in n][0])


def _victim(case):
    """The planted files outside the case's tree."""
    outside = os.path.join(case, "outside")
    os.makedirs(outside, exist_ok=True)
    for name, data in (("model.ckpt.index", b"victim index"), ("victim.bin", b"root:x:0:0:victim")):
        with open(os.path.join(outside, name), "wb") as handle:
            handle.write(data)
    return outside


def _doc_edit(bundle, edit):
    path = os.path.join(bundle, "data", "bundle.json")
    with open(path) as handle:
        doc = json.load(handle)
    edit(doc)
    with open(path, "w") as handle:
        json.dump(doc, handle)


def spoiled_compare(spoil, fault_at=None):
    """compare NPU_STEP GOLDEN --graph G after ``spoil(graph, step, golden, case)``."""
    def build(case):
        synth = _synth(os.path.join(case, "run"), fault_at)
        graph, step, golden = synth.write()
        spoil(graph, step, golden, case)
        return ["compare", step, golden, "--graph", graph, "--workers", "1"]
    return build


def spoiled_bundle(command, spoil, fault_at=None):
    """``command`` on a synthetic bundle after ``spoil(bundle, case)``."""
    def build(case):
        synth = _synth(os.path.join(case, "run"), fault_at)
        synth.write()
        bundle = synth.bundle()
        spoil(bundle, case)
        return list(command) + [bundle] + (["--workers", "1"] if command[0] == "compare" else [])
    return build


def _pickled(graph, step, golden, case):
    path = _golden_file(golden)
    os.remove(path)
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)


def _replace_in(path, old, new):
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data.replace(old, new))


def _truncate(path):
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) - 16)


def _cycle(case):
    synth = Synth(os.path.join(case, "run"))
    value = np.linspace(1, 2, 16, dtype=np.float32)
    synth.op("a", "Mul", value, inputs=["b:0"], npu=value * np.float32(1.5))
    synth.op("b", "Relu", value, inputs=["a:0"], npu=value * np.float32(1.5))
    graph, step, golden = synth.write()
    return ["compare", step, golden, "--graph", graph, "--workers", "1"]


def _escape_names(case):
    synth = Synth(os.path.join(case, "run"))
    value = np.linspace(1, 2, 12, dtype=np.float32)
    synth.op("x", "Data", value, no_task=True)
    synth.op("evil", "Mul", value, inputs=["x:0"], npu=value * np.float32(1.5),
             original_names=["scope/Mul" + ESC + "\x07"])
    graph, step, golden = synth.write()
    return ["compare", step, golden, "--graph", graph, "--workers", "1"]


def _graph_outside(bundle, case):
    outside = _victim(case)
    shutil.copy(os.path.join(bundle, "data", "graph", "ge_proto_00000001_Build.txt"),
                os.path.join(outside, "ge_proto_00000001_Build.txt"))
    _doc_edit(bundle, lambda doc: doc["graph"].update(file="../../outside/ge_proto_00000001_Build.txt"))


def _symlinked_dump(bundle, case):
    outside = _victim(case)
    step = os.path.join(bundle, "data", "dump", "20261201000000", "0")
    for folder, _, files in os.walk(step):
        for name in files:
            if ".op_add_1." in name:
                os.remove(os.path.join(folder, name))
                os.symlink(os.path.join(outside, "victim.bin"), os.path.join(folder, name))


def _symlinked_golden(bundle, case):
    outside = _victim(case)
    golden = os.path.join(bundle, "data", "golden")
    path = _golden_file(golden)
    np.save(os.path.join(outside, "stolen.npy"), np.load(path))
    os.remove(path)
    os.symlink(os.path.join(outside, "stolen.npy"), path)


def _fifo_dump(graph, step, golden, case):
    os.mkfifo(os.path.join(step, "Add.op_add_9.20.0.1700000000000090"))


def _fifo_mapping(graph, step, golden, case):
    os.mkfifo(os.path.join(step, "mapping.csv"))


def _deep(bundle, case):
    with open(os.path.join(bundle, "data", "bundle.json"), "w") as handle:
        handle.write("[" * 100000 + "]" * 100000)


def _lists(bundle, case):
    _doc_edit(bundle, lambda doc: doc.update(graph=["x"], options="dump_mode", run=[1]))


def golden_run(spoil):
    """``run --golden-for`` a hand-made NPU bundle whose init/ is spoiled: refused before training."""
    def build(case):
        outside = _victim(case)
        data = os.path.join(case, "npu", "data")
        os.makedirs(os.path.join(data, "init"))
        entries = []
        for rel, payload in (("init/model.ckpt.index", b"index bytes"),
                             ("init/model.ckpt.data-00000-of-00001", b"weights")):
            with open(os.path.join(data, *rel.split("/")), "wb") as handle:
                handle.write(payload)
            import hashlib
            entries.append({"path": rel, "kind": "init", "size": len(payload),
                            "sha256": hashlib.sha256(payload).hexdigest()})
        spoil(data, entries, outside)
        with open(os.path.join(data, "bundle.json"), "w") as handle:
            json.dump({"backend": "emulated", "created": "now", "run": {"captured_step": 0}, "files": entries}, handle)
        script = os.path.join(ROOT, "tests", "helpers", "unmodified_monitored.py")
        return ["run", "--output-dir", os.path.join(case, "out"), "--golden-for", os.path.join(case, "npu"),
                "--", script]
    return build


def _init_dotdot(data, entries, outside):
    import hashlib
    entries[0].update(path="init/../../outside/model.ckpt.index", size=12,
                      sha256=hashlib.sha256(b"victim index").hexdigest())


def _init_symlink(data, entries, outside):
    path = os.path.join(data, "init", "model.ckpt.index")
    os.remove(path)
    os.symlink(os.path.join(outside, "model.ckpt.index"), path)


def _init_null_sha(data, entries, outside):
    for entry in entries:
        entry["sha256"] = None


def interrupted(pause, send, then):
    """A training run stopped by ``send`` in phase ``pause`` (test-only pause), then ``then``
    (collect or compare of what it left) must not pass."""
    def build(case):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                   NPU_DUMP_HOOK_TEST_PAUSE="{}@{}".format(pause, os.path.join(case, "reached")))
        with open(os.path.join(case, "train.err"), "wb") as err:
            proc = subprocess.Popen([sys.executable, "-c", TRAIN], cwd=case, env=env, stdout=subprocess.DEVNULL,
                                    stderr=err)
            deadline = time.monotonic() + 300
            while not os.path.exists(os.path.join(case, "reached")) and proc.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.2)
            proc.send_signal(send)
            proc.wait(timeout=120)
        run_dir = [os.path.join(case, "out", n) for n in os.listdir(os.path.join(case, "out")) if n != "bundles"][0]
        if then == "collect":
            return ["collect", "--dump-path", os.path.join(case, "dump"), "--graph-dir",
                    os.path.join(run_dir, "graph"), "--out", os.path.join(case, "later")]
        steps = [f for f, d, files in os.walk(os.path.join(case, "dump")) if not d and files]
        return ["compare", steps[0], os.path.join(run_dir, "golden.incomplete"), "--graph",
                os.path.join(run_dir, "graph")]
    return build


def file_size_limit(case):
    """Not a CLI command: the training script itself under RLIMIT_FSIZE (SIGXFSZ ignored)."""
    return {"train": TRAIN, "env": {"LIMIT": "2048", "NPU_DUMP_HOOK_CAPTURE_BUDGET": "0"}}


# (name, issue item, builder, planted problem?, trains?)
CASES = [
    ("pickled golden", 9, spoiled_compare(_pickled), True, False),
    ("<f3 golden", 10, spoiled_compare(lambda g, s, gd, c: _replace_in(_golden_file(gd), b"'<f4'", b"'<f3'")),
     True, False),
    ("truncated golden", 9, spoiled_compare(lambda g, s, gd, c: _truncate(_golden_file(gd))), True, False),
    ("truncated dump", 9, spoiled_compare(lambda g, s, gd, c: _truncate(_dump_file(s))), True, False),
    ("shape mismatch", 9, spoiled_compare(
        lambda g, s, gd, c: np.save(_golden_file(gd)[:-4], np.zeros((5, 5), np.float32))), True, False),
    ("lying .npy header", 9, spoiled_compare(
        lambda g, s, gd, c: _replace_in(_golden_file(gd), b"'shape': (4, 6)", b"'shape': (40, 6)")), True, False),
    ("fault in a chain", 3, spoiled_compare(lambda *a: None, fault_at=1), True, False),
    ("fault in a cycle", 3, _cycle, True, False),
    ("ESC in op names", 6, _escape_names, True, False),
    ("FIFO named like a dump file", 8, spoiled_compare(_fifo_dump), True, False),
    ("FIFO mapping.csv", 8, spoiled_compare(_fifo_mapping), True, False),
    ("graph.file out of the bundle (compare)", 5, spoiled_bundle(["compare"], _graph_outside), True, False),
    ("graph.file out of the bundle (verify)", 5, spoiled_bundle(["verify"], _graph_outside), True, False),
    ("symlinked dump file (compare)", 5, spoiled_bundle(["compare"], _symlinked_dump), True, False),
    ("symlinked golden file (compare)", 5, spoiled_bundle(["compare"], _symlinked_golden), True, False),
    ("100,000-deep bundle.json (verify)", 10, spoiled_bundle(["verify"], _deep), True, False),
    ("100,000-deep bundle.json (inspect)", 10, spoiled_bundle(["inspect"], _deep), True, False),
    ("100,000-deep bundle.json (compare)", 10, spoiled_bundle(["compare"], _deep), True, False),
    ("lists for objects (verify)", 10, spoiled_bundle(["verify"], _lists), True, False),
    ("lists for objects (inspect)", 10, spoiled_bundle(["inspect"], _lists), True, False),
    ("lists for objects (compare)", 10, spoiled_bundle(["compare"], _lists), True, False),
    ("healthy bundle (control)", 0, spoiled_bundle(["compare"], lambda b, c: None), False, False),
    ("golden run: init/../ path", 1, golden_run(_init_dotdot), True, True),
    ("golden run: symlinked init file", 1, golden_run(_init_symlink), True, True),
    ("golden run: null sha256", 1, golden_run(_init_null_sha), True, True),
    ("SIGINT during the dump, then collect", 4, interrupted("dump", signal.SIGINT, "collect"), True, True),
    ("SIGKILL during the dump, then collect", 4, interrupted("dump", signal.SIGKILL, "collect"), True, True),
    ("SIGTERM during the dump, then compare", 4, interrupted("dump", signal.SIGTERM, "compare"), True, True),
    ("RLIMIT_FSIZE during a streamed capture", 7, file_size_limit, False, True),
]


# --------------------------------------------------------------------------- running
def run_case(name, builder, planted, timeout):
    case = tempfile.mkdtemp(prefix="campaign-")
    try:
        spec = builder(case)
        outside = os.path.join(case, "outside") + os.sep
        env = dict(os.environ, CAMPAIGN_OUTSIDE=outside, TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        env.pop("NPU_DUMP_HOOK_TEST_PAUSE", None)
        if isinstance(spec, dict):  # a training script of its own
            argv = [sys.executable, "-c", spec["train"]]
            env.update(spec["env"])
        else:
            argv = [sys.executable, "-c", CLI_WRAPPER] + spec
        try:
            done = subprocess.run(argv, cwd=case, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"case": name, "hang": 1, "escape": 0, "wrong": 0, "outside": 0, "status": "timeout"}
        out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
        code = done.returncode
        reads = err.count("CAMPAIGN-OUTSIDE-READ ")
        cleaned = "\n".join(line for line in err.splitlines() if not line.startswith("CAMPAIGN-OUTSIDE-READ "))
        escape = int("internal error:" in cleaned or ("Traceback (most recent call last)" in cleaned
                                                      and not isinstance(spec, dict) and spec[0] != "run")
                     or code < 0 or code not in (0, 1, 2, 3, 143))
        wrong = int((planted and code == 0) or "\x1b" in out or "\x1b" in cleaned)
        return {"case": name, "hang": 0, "escape": escape, "wrong": wrong, "outside": reads, "status": code,
                "tail": (cleaned.strip().splitlines() or [""])[-1][:160]}
    finally:
        shutil.rmtree(case, ignore_errors=True)


def _self_check(timeout):
    """The read detector sees a read it must see: ``parse`` of the planted victim itself."""
    def build(case):
        path = os.path.join(_victim(case), "Add.add.2.0.1700000000000000")
        with open(path, "wb") as handle:
            handle.write(b"not a dump")
        return ["parse", path]
    return run_case("detector self-check", build, False, timeout)["outside"] > 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--no-train", action="store_true", help="skip the cases that run TensorFlow training")
    args = parser.parse_args()
    totals = {"escape": 0, "hang": 0, "wrong": 0, "outside": 0}
    audit = hasattr(sys, "addaudithook") and _self_check(args.timeout)
    print("read detector (audit hook): {}".format("sees a planted read" if audit else "n/a"))
    print("{:<44} {:>4} {:>6} {:>6} {:>6} {:>8} {:>7}  last stderr line".format(
        "case", "item", "escape", "hang", "wrong", "outside", "status"))
    for name, item, builder, planted, trains in CASES:
        if trains and args.no_train:
            continue
        result = run_case(name, builder, planted, args.timeout)
        for key in totals:
            totals[key] += result[key]
        print("{:<44} {:>4} {:>6} {:>6} {:>6} {:>8} {:>7}  {}".format(
            name, item, result["escape"], result["hang"], result["wrong"],
            result["outside"] if audit else "n/a", result["status"], ascii(result.get("tail", ""))[1:-1]))
        sys.stdout.flush()
    print("\ncampaign: escapes {escape}, hangs {hang}, silently wrong {wrong}, reads outside the tree {outside}"
          .format(**{k: (v if k != "outside" or audit else "n/a (Python < 3.8)") for k, v in totals.items()}))
    return 0 if not any(totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
