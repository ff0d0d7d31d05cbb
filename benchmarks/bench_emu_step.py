"""The emulated NPU's writing of one captured step's dump files, this tree vs another checkout
(issue 21, RNN cost): ``EmulatedNpu._write_ops`` of the 20-step static RNN (~1,330 GE dump files),
replayed on the very tensors of a real dumped run.

One untimed ``npu-dump-hook run --backend emulated`` of ``tests/helpers/rnn_scripts.py static``
(with this tree) pickles what ``_write_ops`` is called with (``_emu_step_capture/sitecustomize.py``);
then fresh processes alternate between ``--before DIR`` and this tree, each replaying the step
``--inner`` times into new folders (under ``--dir``, default a temporary folder in /tmp; fresh
emulator state each time, notes forgotten, cyclic GC off as in ``write_step``), and print the
median user, system and total CPU and wall seconds of a replay; the summary gives the medians over
the processes and the ratio after/before. The first replay's files and write-time notes of both
trees are compared (must be byte-identical: same capture, same timestamps). Then the same for
``EmulatedNpu._write_graph`` (the Build graph's text and its JSON form and ops handed over, as the
first ``write_step`` writes them): its text, JSON and ops must be identical, the graph's
timestamped name apart. TensorFlow is imported
by the recording run only; the Build graph's nodes are those of the recording tree.

Run: .venv/bin/python benchmarks/bench_emu_step.py --before DIR [--repeat 3] [--inner 5] [--python PY]
"""
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from _before_after import before_after_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "helpers", "rnn_scripts.py")

_CHILD = r"""
import copy, gc, hashlib, json, os, pickle, resource, sys, tempfile, time, types
from npu_dump_hook.emulator.backend import EmulatedNpu
from npu_dump_hook import _ledger, _written
state_file, parent, inner = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(state_file, "rb") as handle:
    saved = pickle.load(handle)
capture = types.SimpleNamespace(**saved["capture"])
rows, first = [], None
gc.disable()
for _ in range(inner):
    npu = EmulatedNpu.__new__(EmulatedNpu)
    npu.__dict__.update(copy.deepcopy(saved["state"]))
    npu._task_ids, npu._name_prefixes, npu._placed = {}, {}, set()
    step_dir = tempfile.mkdtemp(dir=parent)
    _written.forget_all(); _ledger.forget_all()
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    files = npu._write_ops(saved["nodes"], capture, step_dir)
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall
    rows.append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall))
    if first is None:
        first, notes = step_dir, hashlib.sha256()
        for name in sorted(os.listdir(step_dir)):
            path = os.path.join(step_dir, name)
            notes.update(repr((name, _ledger.dump_health(path), _written.written_facts(path))).encode())
rows.sort(key=lambda r: r[0] + r[1])
from npu_dump_hook.formats import ge_handover
graph_rows, graph_digest = [], None
for _ in range(inner):  # the Build graph's text and its hand-over, written as write_step does the first time
    npu = EmulatedNpu.__new__(EmulatedNpu)
    npu.__dict__.update(copy.deepcopy(saved["state"]))
    npu.graph_file, npu.report = None, {}
    os.environ["DUMP_GRAPH_PATH"] = tempfile.mkdtemp(dir=parent)
    ge_handover.forget_graphs()
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    npu._write_graph(saved["nodes"])
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall
    graph_rows.append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall))
    if graph_digest is None:  # text and handed JSON and ops, the graph's timestamped name taken out
        with open(npu.graph_file, encoding="utf-8") as handle:
            text = handle.read()
        handed = (ge_handover.handed_json(npu.graph_file), ge_handover.handed_ops(npu.graph_file))
        graph_digest = hashlib.sha256(repr((text, handed)).replace(npu.graph_name, "G").encode()).hexdigest()
graph_rows.sort(key=lambda r: r[0] + r[1])
print(json.dumps({"files": files, "row": rows[len(rows) // 2], "first": first, "notes": notes.hexdigest(),
                  "graph_row": graph_rows[len(graph_rows) // 2], "graph": graph_digest}))
"""


def _record(python: str, work: str) -> str:
    state = os.path.join(work, "step.pkl")
    out = os.path.join(work, "recording")
    env = dict(os.environ, NPU_BENCH_EMU_STEP_OUT=state,
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "benchmarks", "_emu_step_capture"), ROOT]))
    subprocess.run([python, "-m", "npu_dump_hook", "run", "-q", "--backend", "emulated", "--output-dir", out, "--",
                    python, SCRIPT, "static", out, "1"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return state


def _replay(python: str, root: str, state: str, parent: str, inner: int) -> dict:
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([python, "-c", _CHILD, state, parent, str(inner)], env=env, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _same_tree(left: str, right: str) -> bool:
    names = sorted(os.listdir(left))
    if names != sorted(os.listdir(right)):
        return False
    _match, mismatch, errors = filecmp.cmpfiles(left, right, names, shallow=False)
    return not mismatch and not errors


def _summary(rows: dict, key: str, files) -> None:
    """Before and after medians of the replays' ``key`` rows (user, sys, wall) and their CPU ratio."""
    medians = {}
    for side in ("before", "after"):
        user, system, wall = (statistics.median(r[key][i] for r in rows[side]) for i in range(3))
        cpus = [r[key][0] + r[key][1] for r in rows[side]]
        medians[side] = statistics.median(cpus)
        print("{:6}  user {:.3f}  sys {:.3f}  cpu {:.3f} [{:.3f}-{:.3f}]  wall {:.3f}{}".format(
            side, user, system, medians[side], min(cpus), max(cpus), wall,
            "  ({:.0f} us CPU a file)".format(medians[side] / files * 1e6) if files else ""))
    print("after/before CPU {:.2f}x".format(medians["after"] / medians["before"]))


def main() -> int:
    parser = before_after_parser(__doc__.split("\n")[0], 5, "replays per process (its median is kept)")
    parser.add_argument("--dir", default=None, help="folder for the replays' files (default: a new one in /tmp)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_emu_step_", dir=args.dir)
    try:
        state = _record(args.python, work)
        rows = {"before": [], "after": []}  # type: dict
        for _ in range(args.repeat):
            for side, root in (("before", os.path.abspath(args.before)), ("after", ROOT)):
                rows[side].append(_replay(args.python, root, state, work, args.inner))
        print("EmulatedNpu._write_ops, {} files; medians of {} alternating processes x median of {} replays; "
              "load {}".format(rows["after"][0]["files"], args.repeat, args.inner,
                               " ".join("{:.1f}".format(x) for x in os.getloadavg())))
        _summary(rows, "row", rows["after"][0]["files"])
        same = (_same_tree(rows["before"][0]["first"], rows["after"][0]["first"])
                and rows["before"][0]["notes"] == rows["after"][0]["notes"])
        print("files and write-time notes identical: {}".format("yes" if same else "NO"))
        print("EmulatedNpu._write_graph (the Build graph's text written, its JSON form and ops handed over)")
        graph_same = rows["before"][0].get("graph") == rows["after"][0]["graph"]
        if "graph_row" in rows["before"][0]:
            _summary(rows, "graph_row", None)
        print("graph text, JSON and ops identical: {}".format("yes" if graph_same else "NO"))
        return 0 if same and graph_same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
