"""The bounded stores' hot path, this tree vs another checkout: what one captured step of the 20-step
static RNN asks of them (~1,330 dump files noted by ``_written`` and ``_ledger``, ~2,000 golden
``.npy`` files noted and named by ``golden_npy_name``, a dtype looked up per tensor, then the
bundle writer's and the end checks' look-ups of the dump files' notes). The ``.npy`` notes are
given a fabricated identity (distinct inodes, no file); the dump files are real, written once by
the parent (600 bytes each) and shared by every process, so the timed work is the Python work
of noting, naming and looking up, plus one lstat a look-up.

Fresh processes alternate between ``--before DIR`` and this tree; each runs the step ``--inner``
times (stores emptied before each, cyclic GC off) and reports the median CPU and wall seconds of
a step; the summary gives the medians over the processes and the ratio after/before. Both trees'
answers (the facts handed back, the names made) are compared: they must be identical.

Run: .venv/bin/python benchmarks/bench_bounded.py --before DIR [--repeat 3] [--inner 7] [--python PY]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

from _before_after import before_after_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import gc, hashlib, json, os, resource, sys, time
import numpy as np
from npu_dump_hook import _ledger, _written
from npu_dump_hook.formats import names
from npu_dump_hook.formats.dump_file import DumpTensor
from npu_dump_hook.train import _capture_plan
inner, folder = int(sys.argv[1]), sys.argv[2]
DUMPS, GOLDEN = 1330, 2000
part = b"x" * 600
head = part[:120]
tensors = [DumpTensor(np.arange(6, dtype=np.float32).reshape(2, 3))]
dump_paths = [os.path.join(folder, "MatMul.op{}.3.0.1700000000000001".format(k)) for k in range(DUMPS)]
dump_ids = [_written.file_identity(path) for path in dump_paths]
npy_paths = ["/bench/golden/op{}.0.1700000000000001.npy".format(k) for k in range(GOLDEN)]
ops = ["rnn/while/lstm_cell_{}/MatMul:0".format(k) for k in range(GOLDEN)]
dtype = type("FakeTensor", (), {})()
try:
    import tensorflow as tf  # the stored-dtype cache is keyed by TF dtypes
    dtype.dtype = tf.float32
except ImportError:
    dtype = None


def step():
    for path, identity in zip(dump_paths, dump_ids):
        _written.note_written(path, (part,), head, None, identity, len(part))
        _ledger.note_dump_file(path, tensors, tensors)
    made = []
    for number, path in enumerate(npy_paths):
        _written.note_written(path, (part,), None, None, (2, number, len(part), 7, path.rsplit("/", 1)[1]), len(part))
        made.append(names.golden_npy_name(ops[number], 0, 1700000000000001 + number))
        if dtype is not None:
            _capture_plan.as_stored_array(np.float32(1.0), dtype)
    for path in dump_paths:
        made.append(_written.written_facts(path)[1] + repr(_ledger.dump_health(path)))
    return made


def forget():
    _written.forget_all(); _ledger.forget_all(); names._GOLDEN_STEMS.clear()


rows, answer = [], None
gc.disable()
for _ in range(inner):
    forget()
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    made = step()
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall
    rows.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall))
    if answer is None:
        facts = hashlib.sha256(repr(made).encode())
        for key in sorted(_written._noted._entries if hasattr(_written._noted, "_entries") else _written._noted):
            facts.update(repr(_written._noted.get(key)).encode())
        for key in sorted(_ledger._noted._entries if hasattr(_ledger._noted, "_entries") else _ledger._noted):
            facts.update(repr(_ledger._noted.get(key)).encode())
        answer = facts.hexdigest()
rows.sort()
print(json.dumps({"row": rows[len(rows) // 2], "answer": answer}))
"""


def _dump_files(folder: str) -> None:
    """The step's dump files, 600 bytes each (what the notes say of them)."""
    for number in range(1330):
        with open(os.path.join(folder, "MatMul.op{}.3.0.1700000000000001".format(number)), "wb") as handle:
            handle.write(b"x" * 600)


def _run(python: str, root: str, inner: int, folder: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([python, "-c", _CHILD, str(inner), folder], env=env, check=True, cwd=root,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = before_after_parser(__doc__.split("\n")[0], 7, "steps per process (its median is kept)")
    args = parser.parse_args()
    rows = {"before": [], "after": []}  # type: dict
    with tempfile.TemporaryDirectory(prefix="bench_bounded_") as folder:
        _dump_files(folder)
        for _ in range(args.repeat):
            for side, root in (("before", os.path.abspath(args.before)), ("after", ROOT)):
                rows[side].append(_run(args.python, root, args.inner, folder))
    print("bounded stores, one RNN step's notes and names; medians of {} alternating processes x median of {} "
          "steps; load {}".format(args.repeat, args.inner, " ".join("{:.1f}".format(x) for x in os.getloadavg())))
    medians = {}
    for side in ("before", "after"):
        cpus = [r["row"][0] for r in rows[side]]
        medians[side] = statistics.median(cpus)
        print("{:6}  cpu {:.4f} [{:.4f}-{:.4f}]  wall {:.4f}".format(
            side, medians[side], min(cpus), max(cpus), statistics.median(r["row"][1] for r in rows[side])))
    print("after/before CPU {:.2f}x".format(medians["after"] / medians["before"]))
    same = len({r["answer"] for side in rows for r in rows[side]}) == 1
    print("answers identical: {}".format("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
