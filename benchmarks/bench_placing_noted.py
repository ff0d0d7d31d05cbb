"""CPU of the bundle writer on files this process just wrote (issue 21: the hook's ``end()``), side by side.

The hook's bundle writer places ~3,500 small files an emulated step wrote moments before in the
same process (1,328 dump files, ~2,000 golden ``.npy``), each with a write-time note
(:mod:`npu_dump_hook._written`): its cost is Python per file, not I/O. This bench rebuilds that
situation from the run folder of one ``npu-dump-hook run --backend emulated`` (``--run DIR``: its
``dump/``, ``graph/`` and ``golden/``): each file is written again under a scratch folder and
noted as the writers note it (a dump file with its header bytes and tensor fields), then
``write_bundle`` writes the bundle ``--times`` times (fresh destination each, notes kept), and the
process CPU of each ``write_payload_and_json`` (placing + bundle.json) and whole ``write_bundle``
is recorded. One fresh interpreter per checkout per round, checkouts alternating (``--before
DIR``: another checkout, e.g. a ``git archive`` of main); printed: the median and min-max per
checkout, in ms.

Run: .venv-tf115/bin/python benchmarks/bench_placing_noted.py --run OUT/RUN [--before DIR] [--rounds 5] [--times 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r'''
import json, os, sys, time
from npu_dump_hook import _written
from npu_dump_hook.bundle import _placing, write as bundle_write
from npu_dump_hook.formats.dump_file import quick_tensor_fields
from npu_dump_hook.locate import locate_run

run, scratch, times = sys.argv[1], sys.argv[2], int(sys.argv[3])
for top in ("dump", "graph", "golden"):
    for folder, _dirs, names in os.walk(os.path.join(run, top)):
        out_dir = os.path.join(scratch, os.path.relpath(folder, run))
        os.makedirs(out_dir, exist_ok=True)
        for name in names:
            with open(os.path.join(folder, name), "rb") as handle:
                data = handle.read()
            target = os.path.join(out_dir, name)
            with open(target, "wb") as handle:
                handle.write(data)
            if top == "graph":
                continue
            head = fields = None
            if top == "dump" and name != "mapping.csv":
                head, fields = data[:1 << 16], quick_tensor_fields(data[:1 << 16], len(data))
            _written.note_written(target, (data,), head, fields)
placing = []
inner = _placing.write_payload_and_json
def timed(*args, **kwargs):
    start = time.process_time()
    try:
        return inner(*args, **kwargs)
    finally:
        placing.append(time.process_time() - start)
bundle_write.write_payload_and_json = timed
located = locate_run(os.path.join(scratch, "dump"), graph_dirs=[os.path.join(scratch, "graph")])
whole = []
for number in range(times):
    start = time.process_time()
    bundle_write.write_bundle(os.path.join(scratch, "bundle{}".format(number)), located, backend="emulated",
                              golden_dir=os.path.join(scratch, "golden"))
    whole.append(time.process_time() - start)
print(json.dumps({"placing": placing, "whole": whole}))
'''


def _one(python, tree, run, times):
    with tempfile.TemporaryDirectory(prefix="bench_placing_") as scratch:
        done = subprocess.run([python, "-c", _CHILD, run, scratch, str(times)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=tree), check=False)
        if done.returncode != 0:
            sys.exit("failed ({}):\n{}".format(tree, done.stderr.decode()[-3000:]))
        return json.loads(done.stdout.decode().splitlines()[-1])


def _row(title, values):
    ms = [v * 1000 for v in values]
    return "{:<8} {:>8.1f} ms  ({:.1f}-{:.1f}, {} runs)".format(title, statistics.median(ms), min(ms), max(ms), len(ms))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="an emulated run's folder (holding dump/, graph/, golden/)")
    parser.add_argument("--before", help="another checkout to compare with")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--times", type=int, default=5, help="bundles written per process")
    args = parser.parse_args()
    trees = [("after", ROOT)] + ([("before", os.path.abspath(args.before))] if args.before else [])
    results = {title: {"placing": [], "whole": []} for title, _tree in trees}
    for _round in range(args.rounds):
        for title, tree in (trees if _round % 2 == 0 else trees[::-1]):
            found = _one(args.python, tree, os.path.abspath(args.run), args.times)
            for key in ("placing", "whole"):
                results[title][key] += found[key][1:]  # the first bundle also warms imports and caches
    for key, what in (("placing", "write_payload_and_json (placing + bundle.json), CPU"),
                      ("whole", "write_bundle, CPU")):
        print(what)
        for title, _tree in trees:
            print("  " + _row(title, results[title][key]))


if __name__ == "__main__":
    main()
