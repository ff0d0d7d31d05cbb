"""Per-file cost of the emulated dump's writers: this tree vs another checkout (issue 21, RNN cost).

An emulated step of the 20-step static RNN writes ~1,330 GE dump files (``write_dump_file`` in
place, then ``_ledger.note_dump_file``) and ~1,950 ``.npy`` files (``write_npy``); each is small,
so the cost is per-file Python work plus the file system's create. This bench writes ``--files``
of each, shaped as the RNN's (an output with its own original op name, two inputs; float32
32x16 and 32), in a fresh process per run, alternating this tree and ``--before DIR`` (e.g. a
``git archive`` of main), and prints the median user and system CPU microseconds per file of
each and the ratio after/before (the file system's create is in the system time: compare the
user time for the Python work). TensorFlow is not imported.

Run: .venv/bin/python benchmarks/bench_emu_write.py --before DIR [--repeat 5] [--files 1500]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, resource, sys, tempfile
import numpy as np
from npu_dump_hook.formats.dump_file import DumpTensor, write_dump_file
from npu_dump_hook.formats.npy import write_npy
from npu_dump_hook import _ledger
count, folder = int(sys.argv[1]), sys.argv[2]
weights, bias = np.ones((32, 16), np.float32), np.ones((32,), np.float32)
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime
def dump_files():
    for i in range(count):
        out = [DumpTensor(weights, original_name="rnn/lstm_cell/op_%d" % i, original_data_type=0)]
        ins = [DumpTensor(weights), DumpTensor(bias)]
        path = os.path.join(folder, "MatMul.rnn_lstm_cell_op_%d.%d.0.%d" % (i, 1000 + i, 1700000000000000 + i))
        write_dump_file(path, "rnn/lstm_cell/op_%d" % i, outputs=out, inputs=ins, dump_time=1700000000000000 + i,
                        atomic=False)
        _ledger.note_dump_file(path, ins, out)
def npy_files():
    for i in range(count):
        write_npy(weights, os.path.join(folder, "t%d.npy" % i))
found = {}
for name, work in (("dump", dump_files), ("npy", npy_files)):
    user, system = cpu()
    work()
    user2, system2 = cpu()
    found[name] = [(user2 - user) / count * 1e6, (system2 - system) / count * 1e6]
print(json.dumps(found))
"""


def _run(root: str, files: int, parent: str) -> dict:
    folder = tempfile.mkdtemp(dir=parent)
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(files), folder], env=env, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="another checkout's root (its npu_dump_hook package)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=1500)
    args = parser.parse_args()
    rows = {"after": [], "before": []}  # type: dict
    # Removed only at the end: creating files right after removing 1,000s (ext4, here) costs
    # several times the create alone, which would drown the per-file Python work measured.
    parent = tempfile.mkdtemp(prefix="bench_emu_write_")
    try:
        for _ in range(args.repeat):
            rows["before"].append(_run(os.path.abspath(args.before), args.files, parent))
            rows["after"].append(_run(ROOT, args.files, parent))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    print("per file, CPU us (median of {} alternating fresh processes, {} files each); load {}".format(
        args.repeat, args.files, " ".join("{:.1f}".format(x) for x in os.getloadavg())))
    for kind in ("dump", "npy"):
        medians = {}
        for row in ("before", "after"):
            user = statistics.median(r[kind][0] for r in rows[row])
            system = statistics.median(r[kind][1] for r in rows[row])
            medians[row] = (user, system)
            print("{:5} {:6}  user {:7.1f}  sys {:7.1f}  user+sys {:7.1f}".format(
                kind, row, user, system, user + system))
        ratio_user = medians["after"][0] / medians["before"][0]
        ratio_all = sum(medians["after"]) / sum(medians["before"])
        print("{:5} after/before  user {:.2f}x  user+sys {:.2f}x".format(kind, ratio_user, ratio_all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
