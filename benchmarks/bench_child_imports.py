"""CPU the runner's child spends importing the package, this checkout against ``--before DIR``.

What ``npu-dump-hook run``'s child imports of npu_dump_hook once TensorFlow is loaded (the
script imports it first; its cost is the plain script's too), measured in a fresh interpreter
per run, alternating the two checkouts, with bytecode (an untimed run of each writes it; the
``__pycache__`` folders made are removed at the end):

    child    npu_dump_hook.runner._child and npu_dump_hook.hook: what the child loads before the
             script's first training step (a golden run -- --golden-for -- loads no more)
    +checks  then npu_dump_hook.compare: what a dump run adds at its end for the golden-free
             checks (NaN/Inf origin, overflow report) on its bundle

Printed per checkout and column: the median and min-max CPU milliseconds (the main thread's CPU time:
TensorFlow's own threads keep working after its import and would count in the process's) of
``--repeat`` runs, the after/before ratio of the medians and the load. The
end-to-end figure is ``bench_rnn_cost.py --bytecode [--golden]``; this one isolates the imports,
which that one's spread (seconds under load) hides.

Run: .venv/bin/python benchmarks/bench_child_imports.py --before DIR [--repeat 5] [--python PY]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLUMNS = ("child", "+checks")
PROBE = """
import json, time
import numpy, tensorflow  # noqa: F401 - the script's imports, before the child's own
start = time.thread_time()
import npu_dump_hook.runner._child, npu_dump_hook.hook  # noqa: F401,E401
child = time.thread_time()
import npu_dump_hook.compare  # noqa: F401
print(json.dumps({"child": child - start, "+checks": time.thread_time() - start}))
"""


def _probe(python, root):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2")
    # cwd: ``-c`` puts the working folder first on sys.path, before PYTHONPATH
    done = subprocess.run([python, "-c", PROBE], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit("probe failed under {}: {}".format(root, done.stderr.decode()[-2000:]))
    return json.loads(done.stdout.decode().splitlines()[-1])


def _caches(roots):
    packages = [os.path.join(root, "npu_dump_hook") for root in roots]
    return {os.path.join(folder, name) for package in packages for folder, names, _ in os.walk(package)
            for name in names if name == "__pycache__"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="DIR", required=True,
                        help="the baseline checkout (e.g. a git archive of main)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    rows = {"after": (ROOT, []), "before": (os.path.abspath(args.before), [])}
    caches = _caches([root for root, _ in rows.values()])
    try:
        for root, _ in rows.values():
            _probe(args.python, root)  # writes the bytecode: untimed
        for _ in range(args.repeat):
            for root, runs in rows.values():
                runs.append(_probe(args.python, root))
    finally:
        for made in _caches([root for root, _ in rows.values()]) - caches:
            shutil.rmtree(made, ignore_errors=True)
    print("{} ({} runs each, alternating; load {:.1f})".format(args.python, args.repeat, os.getloadavg()[0]))
    print("{:<8}".format("") + "".join("{:>26}".format(c + " CPU ms") for c in COLUMNS))
    medians = {}
    for name, (_, runs) in rows.items():
        cells = []
        for column in COLUMNS:
            values = sorted(1000 * run[column] for run in runs)
            medians[name, column] = statistics.median(values)
            cells.append("{:>9.1f} [{:.1f}-{:.1f}]".format(medians[name, column], values[0], values[-1]))
        print("{:<8}".format(name) + "".join("{:>26}".format(cell) for cell in cells))
    print("{:<8}".format("ratio") + "".join("{:>25.2f}x".format(medians["after", c] / medians["before", c])
                                             for c in COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
