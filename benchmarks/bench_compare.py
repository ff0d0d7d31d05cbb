"""``npu-dump-hook compare`` vs msaccucmp on the same synthetic bundle: speed, memory, agreement.

Issue 24 targets (issue 13 asked 5x): ours at least 10x faster than msaccucmp on a 1,000-op /
0.5 GB bundle and on 10,000 ops (``--ops 10000 --elements 7373``), peak RSS under 500 MB, every
metric of every common row equal to msaccucmp's within 1e-6 (relative or absolute), and the set
of compared rows msaccucmp's (at most 1% differ), all in the same run.

* msaccucmp (PyPI ``mindstudio-probe==26.2.0``) runs in its own venv (default
  ``.venv-msprobe``, created and filled with pip when missing) through
  ``benchmarks/_msaccucmp_harness.py``, which replaces only its CANN C header decoder
  (``BigDumpDataParser._parse_dump_to_json``) with one built on npu_dump_hook's schema. The
  replacement reads only the header where msaccucmp's reads the whole file, so msaccucmp's
  time here is, if anything, lower than its real one.
* ours: ``npu-dump-hook compare STEP GOLDEN --graph BUILD.txt --csv F`` from this venv,
  when the command exists; always also ``compute_metrics`` called directly (one process) on
  the same dump/.npy pairs, which checks the metric definitions against msaccucmp's numbers
  whatever the state of the command.
* Bundle (written once per --ops/--elements into --workdir and reused): a chain of N ops
  ``net/block_NNNN/<Type>``, each dump file holding its input (the previous op's NPU output)
  and its output (``dump_mode="all"``), v2 files written by ``write_dump_file``; a Build
  graph (ge_build + ge_text) and its msaccucmp JSON (ge_json); golden ``.npy`` files named
  as npu_dump_hook.reference names them. The NPU values are the golden ones with 1e-3
  relative noise; a quarter of the ops dump float16, every 10th output is NC1HWC0 (origin
  NCHW), every 8th op is a fused node whose output origin is another TF op
  (``_datadump_origin_name``), and a few ops carry zeros (both sides, or only the golden),
  a NaN, an Inf, or a scalar; every 50th op's input is dumped flat (``[N]``, what a folded
  Reshape/Flatten leaves on the device) where its producer's golden is 4-D with as many
  elements: msaccucmp compares it flattened, and so do we (a ``shape_note``).
* Our package is byte-compiled first (``compileall``), as ``pip install`` leaves it and as
  msaccucmp's venv is: this environment sets PYTHONDONTWRITEBYTECODE, and compiling the
  package's sources on every start cost ours ~0.2 s of CPU per run.
* ``--repeat N`` runs the two sides alternately N times (the machine is shared: single runs
  vary by 2x with the load, printed before and after); the ratio of each pair and of the
  medians is printed. ``--profile`` also runs ``compare`` in this process on one core under
  cProfile and prints where the time goes (reading, format conversion, metrics, matching and
  analysis, reports, the pool), the imports' CPU in a fresh interpreter and the pool's start.

``--same-as OLD.csv`` also checks our CSV byte for byte against one written by another version of
the package on the same bundle (a speed change must leave every cell as it was).

Wall time and peak RSS of each side are measured around its subprocess (``os.wait4`` gives
the child's own ``ru_maxrss``; the process tree's summed RSS is sampled from /proc every
0.25 s (a scan of /proc: about 2% of a core), which counts memory-mapped file pages too).

    .venv/bin/python benchmarks/bench_compare.py [--ops 1000] [--elements 73728] [--workdir DIR]
        [--msprobe-venv .venv-msprobe] [--workers N] [--skip-msaccucmp] [--clean] [--repeat N] [--profile]
        [--same-as OLD.csv]
"""
import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from decimal import Decimal, InvalidOperation

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from npu_dump_hook.compare._blas import single_blas_thread  # noqa: E402
from npu_dump_hook.compare.metrics import METRIC_NAMES, compute_metrics  # noqa: E402
from npu_dump_hook.formats.device_format import from_original  # noqa: E402
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, write_dump_file  # noqa: E402
from npu_dump_hook.formats.ge_build import make_model, make_op, make_tensor_desc  # noqa: E402
from npu_dump_hook.formats.ge_json import write_msaccucmp_json  # noqa: E402
from npu_dump_hook.formats.ge_text import format_model  # noqa: E402
from npu_dump_hook.formats.names import format_dump_name, format_npy_name, sanitize  # noqa: E402

MSPROBE = "mindstudio-probe==26.2.0"
GRAPH_NAME = "ge_default_20261201000000_1"
T0 = 1700000000000000
SPEED_TARGET = 10.0
ROW_SET_TARGET = 0.01  # share of compared rows that may be only one side's
BUNDLE_VERSION = "v2"  # v2: the flat inputs (the folder name changes with what the bundle holds)
RSS_TARGET_MB = 500
TOLERANCE = Decimal("1e-6")
OP_TYPES = ("Add", "Mul", "BiasAdd", "Relu", "Sub", "Maximum", "RealDiv", "Square")


# -- the synthetic bundle ------------------------------------------------------------------------
class _Plan(object):
    """What op i looks like: dtype, layout, fusion and edge case."""

    def __init__(self, i: int, n: int) -> None:
        self.name = "net/block_{:04d}/{}".format(i, OP_TYPES[i % len(OP_TYPES)])
        self.type = OP_TYPES[i % len(OP_TYPES)]
        self.float16 = i % 4 == 1
        self.nc1hwc0 = i % 10 == 3
        self.fused = i % 8 == 5
        self.origin = self.name + "_orig" if self.fused else self.name
        self.case = {7: "zeros", 13: "golden_zeros", 29: "nan", 31: "inf", 47: "scalar"}.get(i % 50, "")
        if self.case == "scalar":
            self.nc1hwc0 = False
        self.flat_input = i % 50 == 19  # its input dumped as [N] (its producer's golden is 4-D)


def _values(rng, plan: _Plan, shape) -> tuple:
    """(golden float32, NPU values in the NPU dtype) of one op's output."""
    if plan.case == "scalar":
        shape = ()
    golden = rng.standard_normal(shape).astype(np.float32) * np.float32(2) + np.float32(0.5)
    golden = np.asarray(golden, np.float32)
    npu = golden * (np.float32(1) + np.float32(1e-3) * rng.standard_normal(shape).astype(np.float32))
    npu = np.asarray(npu, np.float32)
    if plan.case == "zeros":
        golden[...] = 0
        npu[...] = 0
    elif plan.case == "golden_zeros":
        golden[...] = 0
    elif plan.case == "nan":
        npu.reshape(-1)[5] = np.nan
    elif plan.case == "inf":
        npu.reshape(-1)[9] = 1e6  # beyond float16: inf on the device
    if plan.float16 or plan.case == "inf":
        with np.errstate(over="ignore"):
            npu = npu.astype(np.float16)
    return golden, npu


def _dtype_name(array: np.ndarray) -> str:
    return "DT_FLOAT16" if array.dtype == np.float16 else "DT_FLOAT"


def write_bundle(root: str, ops: int, elements: int) -> dict:
    """Write the bundle under root; return its paths and the manifest of tensor pairs."""
    side = int(round((elements // 16) ** 0.5))
    shape = (1, 16, side, max(1, elements // (16 * side)))
    rng = np.random.default_rng(1234)
    graph_dir = os.path.join(root, "graph")
    step = os.path.join(root, "dump", "20261201000000", "0", GRAPH_NAME, "1", "0")
    golden_dir = os.path.join(root, "golden")
    for folder in (graph_dir, step, golden_dir):
        os.makedirs(folder, exist_ok=True)
    op_defs, pairs = [], []
    previous = None  # (name, NPU array, golden path)
    for i in range(ops):
        plan = _Plan(i, ops)
        golden, npu = _values(rng, plan, shape)
        golden_path = os.path.join(golden_dir, format_npy_name(plan.origin, 0, T0 + i))
        np.save(golden_path, golden)
        fmt = "NC1HWC0" if plan.nc1hwc0 else "ND"
        device = from_original(npu, "NC1HWC0", "NCHW") if plan.nc1hwc0 else npu
        layout = "NCHW" if npu.ndim == 4 else "ND"
        desc = make_tensor_desc(_dtype_name(npu), device.shape, layout=fmt if plan.nc1hwc0 else layout,
                                origin_format=layout, origin_shape=npu.shape,
                                origin_name=plan.origin, origin_output_index=0)
        inputs, input_tensors = [], []
        if previous is not None:
            inputs = [previous[0] + ":0"]
            source = previous[1].reshape(-1) if plan.flat_input else previous[1]
            input_tensors = [DumpTensor(np.ascontiguousarray(source), original_shape=source.shape)]
        op_defs.append(make_op(plan.name, plan.type, i, inputs=inputs, output_descs=[desc],
                               original_op_names=[plan.origin] if plan.fused else None))
        stamp = T0 + 10 * i
        dump_path = os.path.join(step, format_dump_name(sanitize(plan.type), sanitize(plan.name), 2 + i, 0, stamp))
        output = DumpTensor(np.ascontiguousarray(device), format=fmt, original_shape=npu.shape,
                            original_name=plan.origin, original_output_index=0, original_format=layout)
        write_dump_file(dump_path, plan.name, outputs=[output], inputs=input_tensors, dump_time=stamp)
        pairs.append({"npu_op": plan.name, "tensor": plan.name + ":output:0", "dump": dump_path, "kind": "output",
                      "slot": 0, "golden": golden_path, "case": plan.case})
        if previous is not None:
            pairs.append({"npu_op": plan.name, "tensor": plan.name + ":input:0", "dump": dump_path, "kind": "input",
                          "slot": 0, "golden": previous[2], "case": "flat_input" if plan.flat_input else ""})
        previous = (plan.name, npu, golden_path)
    graph = os.path.join(graph_dir, "ge_proto_00000001_Build.txt")
    with open(graph, "w") as handle:
        handle.write(format_model(make_model([(GRAPH_NAME, op_defs)], name=GRAPH_NAME)))
    graph_json = os.path.join(graph_dir, "ge_proto_00000001_Build.json")
    write_msaccucmp_json(graph, graph_json)
    info = {"ops": ops, "elements": elements, "graph": graph, "graph_json": graph_json, "step": step,
            "golden": golden_dir, "pairs": pairs, "dump_bytes": _folder_bytes(step),
            "golden_bytes": _folder_bytes(golden_dir)}
    with open(os.path.join(root, "manifest.json"), "w") as handle:
        json.dump(info, handle)
    return info


def _bundle_name(ops: int, elements: int) -> str:
    return "bundle_{}_{}x{}".format(BUNDLE_VERSION, ops, elements)


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))


def bundle(workdir: str, ops: int, elements: int) -> dict:
    """The bundle for (ops, elements) under workdir, written unless a complete one is there."""
    root = os.path.join(workdir, _bundle_name(ops, elements))
    manifest = os.path.join(root, "manifest.json")
    if os.path.isfile(manifest):
        with open(manifest) as handle:
            return json.load(handle)
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    info = write_bundle(root, ops, elements)
    print("wrote bundle {} ({} ops, {:.0f} MB dumps, {:.0f} MB golden) in {:.0f} s".format(
        root, ops, info["dump_bytes"] / 1e6, info["golden_bytes"] / 1e6, time.perf_counter() - started))
    return info


# -- running and measuring -----------------------------------------------------------------------
def _tree_rss_kb(root_pid: int) -> int:
    """Summed VmRSS of root_pid and its descendants (kB)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(entry)) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    total = 0
    for pid in tree:
        try:
            with open("/proc/{}/status".format(pid)) as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def run_measured(argv, label: str, env=None) -> dict:
    """Run argv; wall time, exit code, the child's ru_maxrss and the sampled tree RSS peak."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            done.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = []
    reader = threading.Thread(target=lambda: output.append(proc.stdout.read()), daemon=True)
    reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8
    text = output[0].decode("utf-8", "replace") if output else ""
    return {"label": label, "wall": wall, "rc": proc.returncode, "maxrss_mb": usage.ru_maxrss / 1024.0,
            "tree_rss_mb": peak[0] / 1024.0, "cpu": usage.ru_utime + usage.ru_stime, "output": text}


def ensure_msprobe(venv: str) -> str:
    """The msprobe venv's python; the venv is created and mindstudio-probe installed when missing."""
    python = os.path.join(venv, "bin", "python")
    probe = [python, "-c", "import importlib.util,sys; sys.exit(importlib.util.find_spec('msprobe') is None)"]
    if os.path.isfile(python) and subprocess.call(probe) == 0:
        return python
    if not os.path.isfile(python):
        print("creating {} for msaccucmp".format(venv))
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    print("installing {} into {}".format(MSPROBE, venv))
    subprocess.check_call([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", MSPROBE])
    return python


def run_msaccucmp(python: str, info: dict, out_dir: str) -> tuple:
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    argv = [python, os.path.join(HERE, "_msaccucmp_harness.py"), "compare", "-m", info["step"], "-g",
            info["golden"], "-f", info["graph_json"], "-out", out_dir]
    result = run_measured(argv, "msaccucmp")
    found = sorted(glob.glob(os.path.join(out_dir, "**", "result_*.csv"), recursive=True))
    if not found:
        tail = result["output"][-3000:]
        raise SystemExit("msaccucmp wrote no result_*.csv (exit {}):\n{}".format(result["rc"], tail))
    return result, found[-1]


def our_command() -> str:
    return os.path.join(os.path.dirname(sys.executable), "npu-dump-hook")


def has_compare_command() -> bool:
    try:
        out = subprocess.run([our_command(), "compare", "--help"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def run_ours(info: dict, csv_path: str, workers) -> dict:
    argv = [our_command(), "compare", info["step"], info["golden"], "--graph", info["graph"], "--csv", csv_path]
    if workers:
        argv += ["--workers", str(workers)]
    return run_measured(argv, "ours")


def run_direct(info: dict) -> tuple:
    """compute_metrics on every manifest pair in this process: ({(npu_op, tensor): (cells, reason)}, wall s, cpu s)."""
    rows = {}
    with single_blas_thread():  # as the command's workers run it
        return _direct(info, rows)


def _direct(info: dict, rows: dict) -> tuple:
    started, cpu = time.perf_counter(), time.process_time()
    for pair in info["pairs"]:
        with DumpFile.open(pair["dump"]) as dump:
            npu = dump.array(pair["kind"], pair["slot"], original_shape=True)
            golden = np.load(pair["golden"], mmap_mode="r")
            result = compute_metrics(npu, golden, os.path.realpath(pair["dump"]), os.path.realpath(pair["golden"]))
            rows[(pair["npu_op"], pair["tensor"])] = (result.csv_cells(), result.fail_reason)
            del npu
    return rows, time.perf_counter() - started, time.process_time() - cpu


# -- agreement -----------------------------------------------------------------------------------
def read_csv(path: str) -> tuple:
    """(header, {(NPUDump, TensorIndex): row dict}) of an msaccucmp-style CSV."""
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = {}
        for cells in reader:
            if len(cells) != len(header):
                continue
            row = dict(zip(header, cells))  # the two DataType columns: the second wins, both kept below
            row["_cells"] = cells
            rows[(row["NPUDump"], row["TensorIndex"])] = row
    return header, rows


def metric_cells(row: dict, header) -> list:
    start = header.index(METRIC_NAMES[0])
    return row["_cells"][start:start + len(METRIC_NAMES)]


def _numbers(cell: str) -> list:
    return [part for part in cell.replace("(", " ").replace(")", " ").replace(";", " ").replace(",", " ").split()]


def cells_agree(ours: str, theirs: str) -> bool:
    """Equal text, or every number within 1e-6 absolute or relative (NaN/inf must match exactly)."""
    if ours == theirs:
        return True
    left, right = _numbers(ours), _numbers(theirs)
    if len(left) != len(right) or not left:
        return False
    for a, b in zip(left, right):
        try:
            da, db = Decimal(a), Decimal(b)
        except InvalidOperation:
            return False
        if not (da.is_finite() and db.is_finite()):
            if str(da) != str(db):
                return False
            continue
        diff = abs(da - db)
        if diff > TOLERANCE and diff > TOLERANCE * abs(db):
            return False
    return True


def compared(cells) -> bool:
    """A row msaccucmp counts as compared: at least one metric is not its NaN."""
    return any(c != "NaN" for c in cells)


def agreement(ours: dict, theirs: dict, label: str) -> dict:
    """Compare two {key: (cells, reason)} maps; print the differences; return the counts."""
    our_set = set(k for k, v in ours.items() if compared(v[0]))
    their_set = set(k for k, v in theirs.items() if compared(v[0]))
    common = sorted(our_set & their_set)
    bad_rows, bad_cells, worst = [], 0, {}
    reason_diffs = []
    for key in common:
        mine, other = ours[key], theirs[key]
        wrong = [(name, a, b) for name, a, b in zip(METRIC_NAMES, mine[0], other[0]) if not cells_agree(a, b)]
        if wrong:
            bad_rows.append((key, wrong))
            bad_cells += len(wrong)
        if mine[1] != other[1]:
            reason_diffs.append((key, mine[1], other[1]))
        for name, a, b in zip(METRIC_NAMES, mine[0], other[0]):
            worst[name] = max(worst.get(name, 0.0), _gap(a, b))
    print("\n== agreement: {} vs msaccucmp".format(label))
    print("compared rows: ours {}, msaccucmp {}, common {}".format(len(our_set), len(their_set), len(common)))
    for key in sorted(our_set - their_set)[:10]:
        print("  only ours:      {} {}".format(*key))
    for key in sorted(their_set - our_set)[:10]:
        print("  only msaccucmp: {} {}".format(*key))
    print("metric cells outside 1e-6: {} in {} rows".format(bad_cells, len(bad_rows)))
    for key, wrong in bad_rows[:10]:
        print("  {} {}: {}".format(key[0], key[1], "; ".join("{} ours {} theirs {}".format(*w) for w in wrong)))
    print("largest relative-or-absolute gap per metric: " + ", ".join(
        "{} {:.1e}".format(name, worst.get(name, 0.0)) for name in METRIC_NAMES))
    print("CompareFailReason differences: {}".format(len(reason_diffs)))
    for key, mine, other in reason_diffs[:5]:
        print("  {} {}:\n    ours:      {!r}\n    msaccucmp: {!r}".format(key[0], key[1], mine[:300], other[:300]))
    return {"ours": len(our_set), "theirs": len(their_set), "common": len(common), "bad_cells": bad_cells,
            "only_ours": len(our_set - their_set), "only_theirs": len(their_set - our_set),
            "reason_diffs": len(reason_diffs), "common_keys": set(common), "label": label.split(" ")[0]}


def _gap(a: str, b: str) -> float:
    """min(absolute, relative) difference of the numbers of two cells (0 when not comparable)."""
    gap = 0.0
    for x, y in zip(_numbers(a), _numbers(b)):
        try:
            dx, dy = float(x), float(y)
        except ValueError:
            continue
        if not (np.isfinite(dx) and np.isfinite(dy)):
            continue
        diff = abs(dx - dy)
        gap = max(gap, min(diff, diff / abs(dy) if dy else diff))
    return gap


def csv_rows(path: str) -> dict:
    header, rows = read_csv(path)
    return dict((key, (metric_cells(row, header), row.get("CompareFailReason", ""))) for key, row in rows.items())


# -- main ----------------------------------------------------------------------------------------
def _side_line(result: dict) -> str:
    return "{:<26} {:>8.2f} s  cpu {:>7.2f} s  maxrss {:>6.0f} MB  tree rss {:>6.0f} MB  exit {}".format(
        result["label"], result["wall"], result["cpu"], result["maxrss_mb"], result["tree_rss_mb"], result["rc"])


def _load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _median(values: list) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def compile_ours() -> None:
    """Byte-compile the package as pip install does (module doc)."""
    subprocess.check_call([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "npu_dump_hook")])


def _run_pairs(args, info: dict, out_root: str) -> tuple:
    """msaccucmp and ours alternately ``--repeat`` times: (their results, our results, their CSV, our CSV)."""
    theirs_dir = os.path.join(out_root, "msaccucmp")
    ours_csv = os.path.join(out_root, "ours.csv")
    found = sorted(glob.glob(os.path.join(theirs_dir, "**", "result_*.csv"), recursive=True))
    python = None if args.skip_msaccucmp and found else ensure_msprobe(args.msprobe_venv)
    theirs, ours, their_csv = [], [], found[-1] if found else None
    if not has_compare_command():
        raise SystemExit("npu-dump-hook compare is not available from " + our_command())
    compile_ours()
    for repeat in range(args.repeat):
        print("run {} of {} ({})".format(repeat + 1, args.repeat, _load()))
        if python is not None:
            result, their_csv = run_msaccucmp(python, info, theirs_dir)
            theirs.append(result)
            print("  " + _side_line(result))
        result = run_ours(info, ours_csv, args.workers)
        ours.append(result)
        print("  " + _side_line(result))
        if theirs:
            print("  ratio msaccucmp / ours: {:.1f}x wall, {:.1f}x cpu".format(
                theirs[-1]["wall"] / result["wall"], theirs[-1]["cpu"] / max(result["cpu"], 1e-9)))
    if not os.path.isfile(ours_csv):
        raise SystemExit("npu-dump-hook compare wrote no CSV (exit {}):\n{}".format(ours[-1]["rc"],
                                                                                ours[-1]["output"][-2000:]))
    return theirs, ours, their_csv, ours_csv


def _speed_lines(info: dict, theirs: list, ours: list) -> bool:
    """Print the medians, the ratio and the peak RSS; True when both targets are met."""
    print("\n== speed and memory ({} ops, {:.0f} MB dumps + {:.0f} MB golden; {})".format(
        info["ops"], info["dump_bytes"] / 1e6, info["golden_bytes"] / 1e6, _load()))
    rss = max(max(r["maxrss_mb"], r["tree_rss_mb"]) for r in ours)
    rss_met = rss < RSS_TARGET_MB
    print("our peak RSS: {:.0f} MB (target < {} MB: {})".format(rss, RSS_TARGET_MB, "met" if rss_met else "NOT met"))
    if not theirs:
        print("(msaccucmp not run: --skip-msaccucmp)")
        return rss_met
    walls = [(t["wall"], o["wall"]) for t, o in zip(theirs, ours)]
    cpus = [(t["cpu"], o["cpu"]) for t, o in zip(theirs, ours)]
    print("median of {} run(s): msaccucmp {:.2f} s wall / {:.2f} s cpu, ours {:.2f} s wall / {:.2f} s cpu".format(
        len(walls), _median([w[0] for w in walls]), _median([c[0] for c in cpus]), _median([w[1] for w in walls]),
        _median([c[1] for c in cpus])))
    ratios = [t / o for t, o in walls]
    ratio = _median(ratios)
    print("speed ratio msaccucmp / ours (median of the pairs {}): {:.1f}x wall (target >= {:.0f}x: {}), "
          "{:.1f}x cpu".format(", ".join("{:.1f}x".format(r) for r in ratios), ratio, SPEED_TARGET,
                               "met" if ratio >= SPEED_TARGET else "NOT met",
                               _median([t / max(o, 1e-9) for t, o in cpus])))
    return rss_met and ratio >= SPEED_TARGET


def _row_set_met(stat: dict, flat_keys: set) -> bool:
    flat = len(flat_keys & stat["common_keys"])
    differ = stat["only_ours"] + stat["only_theirs"]
    union = stat["common"] + differ
    share = differ / float(union) if union else 0.0
    print("row set ({}): {} compared by both ({} of them inputs dumped flat, compared flattened), {} only ours, "
          "{} only msaccucmp: {:.2%} differ (target <= {:.0%}: {})".format(
              stat["label"], stat["common"], flat, stat["only_ours"], stat["only_theirs"], share, ROW_SET_TARGET,
              "met" if share <= ROW_SET_TARGET else "NOT met"))
    return share <= ROW_SET_TARGET and stat["bad_cells"] == 0


def _same_csv(reference: str, ours: str) -> bool:
    with open(reference, "rb") as left, open(ours, "rb") as right:
        same = left.read() == right.read()
    print("our CSV vs {}: {}".format(reference, "byte-identical" if same else "DIFFERENT"))
    return same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--elements", type=int, default=73728, help="elements per tensor (default 73728: 0.5 GB of dumps at 1,000 ops)")
    parser.add_argument("--workdir", default=os.path.join(REPO, "build", "bench_compare"))
    parser.add_argument("--msprobe-venv", default=os.path.join(REPO, ".venv-msprobe"))
    parser.add_argument("--workers", type=int, help="--workers for npu-dump-hook compare")
    parser.add_argument("--skip-msaccucmp", action="store_true", help="reuse the last msaccucmp CSV of this bundle")
    parser.add_argument("--clean", action="store_true", help="remove the bundle at the end (default: kept for reuse)")
    parser.add_argument("--repeat", type=int, default=1, help="alternate runs of the two sides (default 1)")
    parser.add_argument("--profile", action="store_true", help="also: where our time goes (cProfile, one core)")
    parser.add_argument("--same-as", metavar="CSV", help="our CSV of this bundle from another version: must be "
                        "byte-identical (a speed change must not change a cell)")
    args = parser.parse_args(argv)

    os.makedirs(args.workdir, exist_ok=True)
    info = bundle(args.workdir, args.ops, args.elements)
    print("bundle: {} ops, {} tensor pairs, {:.0f} MB of dump files, {:.0f} MB golden; {} cores, {}".format(
        info["ops"], len(info["pairs"]), info["dump_bytes"] / 1e6, info["golden_bytes"] / 1e6, os.cpu_count(),
        _load()))
    out_root = os.path.join(args.workdir, "out_{}_{}x{}".format(BUNDLE_VERSION, args.ops, args.elements))
    theirs_runs, ours_runs, their_csv, ours_csv = _run_pairs(args, info, out_root)
    if their_csv is None:
        raise SystemExit("no msaccucmp CSV for this bundle: run once without --skip-msaccucmp")
    theirs = csv_rows(their_csv)
    print("msaccucmp CSV: {} ({} rows)".format(their_csv, len(theirs)))
    direct, direct_s, direct_cpu = run_direct(info)
    status = {"direct": agreement(direct, theirs, "compute_metrics on the same pairs"),
              "command": agreement(csv_rows(ours_csv), theirs, "npu-dump-hook compare --csv")}
    print("({:.2f} s wall, {:.2f} s cpu: compute_metrics alone, in this process, {} pairs, reading included)".format(
        direct_s, direct_cpu, len(info["pairs"])))
    speed_met = _speed_lines(info, theirs_runs, ours_runs)
    flat = set((pair["npu_op"], pair["tensor"]) for pair in info["pairs"] if pair["case"] == "flat_input")
    rows_met = all([_row_set_met(stat, flat) for stat in status.values()])
    if args.same_as:
        rows_met = _same_csv(args.same_as, ours_csv) and rows_met
    print("agreement: {}".format("every common metric within 1e-6, row sets within 1%" if rows_met else "DIFFERENCES"))
    if args.profile:
        from _compare_profile import profile_compare

        profile_compare(info, our_command())
    if args.clean:
        shutil.rmtree(os.path.join(args.workdir, _bundle_name(args.ops, args.elements)), ignore_errors=True)
    return 0 if rows_met and speed_met else 1


if __name__ == "__main__":
    sys.exit(main())
