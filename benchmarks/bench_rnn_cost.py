"""Cost of one dumped step of a 20-step static RNN (issue 21 point 5: target <= 1.5x the script's own time).

The script is tests/helpers/rnn_scripts.py ``static`` (``static_rnn`` LSTM unrolled over 20 time
steps, plain Session, numpy feed, one training step). Side by side, each in a fresh process,
alternating, best of ``--repeat``:

    plain   python rnn_scripts.py static WORK 1
    dumped  npu-dump-hook run --backend emulated -q --output-dir OUT -- python rnn_scripts.py static WORK 1

Printed: wall and CPU seconds of each (the whole process: TensorFlow import, graph building, the
step; the dumped run also writes the emulated dump, the golden tensors and the verified bundle),
the CPU split into user and system seconds (writing ~3,500 files per step is mostly system time,
which a tmpfs and a disk folder make differ), and the ratio dumped/plain against the 1.5x target. ``--python`` picks the stack (default: this
interpreter; e.g. .venv-tf115/bin/python for TF 1.15). On a shared machine the wall ratio moves
with the load: compare the CPU ratio too.

Each row also gives the median and the spread (min-max) of its runs. ``--before DIR`` adds a row
``before``: the same dumped run with the package of another checkout ``DIR`` (e.g. a ``git
archive`` of main), alternating with the others, for a before/after figure from one run.

``--out-dir DIR`` makes the work folder (the runs' current folder, the script's files, the dumped
runs' outputs) under ``DIR`` instead of ``TMPDIR``; the first and the last lines say where it was
and its file-system type (from /proc/mounts), so a tmpfs run and a disk run are told apart.

``--golden`` times the second process of the workflow instead: the ``dumped`` and ``before`` rows
run ``npu-dump-hook run --golden-for BUNDLE`` (the reference backend) of the bundle an untimed
emulated run of this checkout made first.

``--bytecode`` runs every row as an installed package runs: with bytecode. A ``pip install``
(editable or not) leaves Python free to write ``__pycache__``, so only a first run compiles; a
machine with ``PYTHONDONTWRITEBYTECODE=1`` (this one) compiles the package from source in both
processes of every dumped run (~0.5 s CPU), which the plain script never pays (TensorFlow's
``.pyc`` were written when pip installed it). With the flag the rows run without that variable
and one untimed run of each row first writes the package's ``__pycache__`` (of this checkout
and of ``--before``'s; checked against the sources by Python at each import), so the timed runs
read bytecode on both sides; the ``__pycache__`` folders it made are removed at the end (a later
run without the flag would read them). Without it the figures include the compiling.
(``PYTHONPYCACHEPREFIX`` would leave the checkouts alone, but Python 3.7 does not have it.)

``--phases`` adds, after the timed runs, one untimed dumped run of each dumped row with the phase
timer (``benchmarks/_phase_timer/sitecustomize.py``): the wall and CPU seconds of the hook's phases
(begin, before_run, after_run, end) and of the named steps inside them (the size estimate, the
capture, the emulated dump, the bundle writer, the Build graph's JSON, the golden-free checks), then
the runner's work outside those phases (the CPU used when the script starts, the hook's making at
the session's creation, the wrap at the first training run, the pending collection, the release
after the bundle), side by side with ``--before``'s. It wraps functions, it does not profile: the figures are the real
costs, give or take a few microseconds per call.

Run: .venv/bin/python benchmarks/bench_rnn_cost.py [--repeat 3] [--python PY] [--script SHAPE] [--before DIR]
     [--bytecode] [--phases] [--golden] [--out-dir DIR]
"""
import argparse
import collections
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "helpers", "rnn_scripts.py")
TARGET = 1.5


class Run(collections.namedtuple("Run", "wall user sys last_line")):
    """One timed process: wall seconds, user and system CPU seconds (its children's included)."""

    @property
    def cpu(self):
        return self.user + self.sys


def _timed(argv, cwd, env):
    """The :class:`Run` of ``argv`` (its last stdout line kept: the dumped run prints the bundle)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit("failed ({}): {}\n{}".format(done.returncode, " ".join(argv), done.stderr.decode()[-3000:]))
    lines = done.stdout.decode().splitlines()
    return Run(wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, lines[-1] if lines else "")


def _file_system(path):
    """The type of the file system ``path`` is on (the longest mount point above it in /proc/mounts)."""
    path = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            rows = [line.split()[1:3] for line in mounts]
    except OSError:
        return kind
    for point, fs_type in rows:
        point = point.replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fs_type
    return kind


def _dumped(args, work, env, out):
    flags = ["--golden-for", args.golden_bundle] if args.golden_bundle else ["--backend", "emulated"]
    result = _timed([args.python, "-m", "npu_dump_hook", "run", "-q"] + flags + [
                     "--output-dir", os.path.join(work, out), "--", args.python, SCRIPT, args.script, work, "1"],
                    work, env)
    if not os.path.isdir(result.last_line):
        sys.exit("the dumped run printed no bundle path: {!r}".format(result.last_line))
    return result


PHASE_TIMER = os.path.join(ROOT, "benchmarks", "_phase_timer")


def _phases(args, work, env, out):
    """``{phase: (calls, wall s, CPU s)}`` of one untimed dumped run under the phase timer."""
    record = os.path.join(work, out + ".phases")
    _dumped(args, work, dict(env, PYTHONPATH=PHASE_TIMER + os.pathsep + env["PYTHONPATH"],
                             NPU_BENCH_PHASE_OUT=record), out)
    with open(record) as handle:
        rows = [line.rstrip("\n").split("\t") for line in handle]
    return {name: (int(calls), float(wall), float(cpu)) for name, calls, wall, cpu in rows}


def _phase_table(columns):
    """One row per phase, wall and CPU seconds per column (``[(title, phases)]``)."""
    names = []
    for _title, phases in columns:
        names += [name for name in phases if name not in names]
    width = max(len(name) for name in names) + 2
    print("\nphases of the dumped child (one untimed run each; seconds)")
    print("".ljust(width) + "".join("{:>22}".format(title + " wall/CPU") for title, _ in columns))
    for name in names:
        cells = ["{:>10.3f} /{:>8.3f}".format(*phases[name][1:]) if name in phases else "{:>22}".format("-")
                 for _title, phases in columns]
        print(name.ljust(width) + "".join("{:>22}".format(cell) for cell in cells))


def _with_bytecode(args, work, env):
    """``env`` that lets Python write bytecode, after an untimed run of each row wrote it."""
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    _timed([args.python, SCRIPT, args.script, work, "1"], work, env)
    _dumped(args, work, env, "warm")
    if args.before:
        _dumped(args, work, dict(env, PYTHONPATH=os.path.abspath(args.before)), "warm_before")
    return env


def _caches(args):
    """The ``__pycache__`` folders of the package (this checkout's, ``--before``'s) and tests."""
    roots = [os.path.join(ROOT, "npu_dump_hook"), os.path.join(ROOT, "tests")]
    if args.before:
        roots.append(os.path.join(os.path.abspath(args.before), "npu_dump_hook"))
    return {os.path.join(folder, name) for root in roots for folder, names, _ in os.walk(root)
            for name in names if name == "__pycache__"}


def _spread(values):
    """``"median [min-max]"`` of ``values``."""
    values = sorted(values)
    return "{:>6.2f} [{:.2f}-{:.2f}]".format(statistics.median(values), values[0], values[-1])


def _spread_table(plain, dumped, before):
    """Median and min-max of wall, user, system and total CPU per row, and the median ratios to ``plain``."""
    print("{:<8}".format("") + "".join("{:>20}".format(title) for title in ("wall s", "user s", "sys s", "CPU s"))
          + "   (median [min-max] of {} runs)".format(len(plain)))
    medians = {}
    for name, rows in (("plain", plain), ("dumped", dumped), ("before", before)):
        if not rows:
            continue
        medians[name] = (statistics.median(r.wall for r in rows), statistics.median(r.cpu for r in rows))
        print("{:<8}".format(name) + "".join("{:>20}".format(_spread(getattr(r, field) for r in rows))
                                             for field in ("wall", "user", "sys", "cpu")))
    for name in ("dumped", "before"):
        if name in medians:
            print("median ratio {:<7} {:>6.2f}x wall {:>6.2f}x CPU".format(
                name, medians[name][0] / medians["plain"][0], medians[name][1] / medians["plain"][1]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--script", default="static", help="rnn_scripts.py shape (default: static)")
    parser.add_argument("--before", metavar="DIR", help="also time the dumped run with the package of checkout DIR")
    parser.add_argument("--bytecode", action="store_true",
                        help="every row reads bytecode written by an untimed run of each (module doc)")
    parser.add_argument("--phases", action="store_true",
                        help="also print the dumped child's phases, timed in one more run of each dumped row")
    parser.add_argument("--out-dir", metavar="DIR",
                        help="make the dumped runs' outputs and the work folders in DIR (default: a temporary "
                             "folder under TMPDIR), e.g. a tmpfs or a disk folder to tell the two apart")
    parser.add_argument("--golden", action="store_true",
                        help="the dumped and before rows are the golden run (run --golden-for) of the bundle "
                             "an untimed dumped run of this checkout made first")
    args = parser.parse_args(argv)
    args.golden_bundle = None
    if args.out_dir is not None and not os.path.isdir(args.out_dir):
        parser.error("--out-dir {}: no such folder".format(args.out_dir))
    if os.sep in args.python:  # the runs start in a temporary folder: a relative path would not name it there
        args.python = os.path.abspath(args.python)
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    env = {k: v for k, v in env.items() if not k.startswith("NPU_DUMP") and k != "DUMP_GRAPH_PATH"}
    work = tempfile.mkdtemp(prefix="bench_rnn_", dir=args.out_dir)
    where = "outputs and work folders under {} ({})".format(work, _file_system(work))
    print(where, flush=True)
    plain, dumped, before = [], [], []  # type: ignore[var-annotated]
    caches = _caches(args)
    try:
        if args.golden:
            args.golden_bundle = _dumped(args, work, env, "npu").last_line
        if args.bytecode:
            env = _with_bytecode(args, work, env)
        for attempt in range(args.repeat):
            plain.append(_timed([args.python, SCRIPT, args.script, work, "1"], work, env))
            dumped.append(_dumped(args, work, env, "out{}".format(attempt)))
            if args.before:
                before.append(_dumped(args, work, dict(env, PYTHONPATH=os.path.abspath(args.before)),
                                      "before{}".format(attempt)))
        if args.phases:
            phases = [("dumped", _phases(args, work, env, "phases"))]
            if args.before:
                phases.append(("before", _phases(args, work, dict(env, PYTHONPATH=os.path.abspath(args.before)),
                                                 "phases_before")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for made in _caches(args) - caches if args.bytecode else ():
            shutil.rmtree(made, ignore_errors=True)
    if args.golden:
        print("rows dumped/before: the golden run (--golden-for) of {}".format(args.golden_bundle))
    _spread_table(plain, dumped, before)
    if args.phases:
        _phase_table(phases)
    best_plain = min(plain, key=lambda r: r.wall)
    best_dumped = min(dumped, key=lambda r: r.wall)
    cpu_plain = min(r.cpu for r in plain)
    cpu_dumped = min(r.cpu for r in dumped)
    print(where)
    print("{} ({}), best of {}; load {:.1f}{}".format(args.script, args.python, args.repeat, os.getloadavg()[0],
                                                     "; bytecode cached for every row" if args.bytecode else
                                                     "; as the environment compiles (PYTHONDONTWRITEBYTECODE={})".format(
                                                         os.environ.get("PYTHONDONTWRITEBYTECODE", ""))))
    print("{:<8} {:>9} {:>9}".format("", "wall s", "CPU s"))
    print("{:<8} {:>9.2f} {:>9.2f}".format("plain", best_plain.wall, cpu_plain))
    print("{:<8} {:>9.2f} {:>9.2f}".format("dumped", best_dumped.wall, cpu_dumped))
    wall_ratio, cpu_ratio = best_dumped.wall / best_plain.wall, cpu_dumped / cpu_plain
    print("ratio    {:>8.2f}x {:>8.2f}x   (target <= {}x: {})".format(
        wall_ratio, cpu_ratio, TARGET, "met" if wall_ratio <= TARGET else "NOT met"))
    return 0 if wall_ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
