"""Bundle collection benchmark (issue 5 targets), ours vs coreutils side by side.

(a) copy mode + sha256 on a synthetic dump tree (default 2 GiB, 5,000 files) vs
    ``cp -r`` followed by ``sha256sum`` over the copy: target ours <= 1.0x their time;
(b) link mode (hard links; the BagIt manifest still hashes every byte) on the same tree vs
    ``cp -r``: target >= 20x faster;
(c) 10k / 50k / 100k small dump files, each collected in a fresh subprocess: peak RSS
    (ru_maxrss) under 300 MB and time per file roughly constant (linear growth).

Run: .venv/bin/python benchmarks/bench_bundle.py [--quick] [--small-only] [--workdir DIR]
Data goes under --workdir (default: a temporary folder beside the repository, on the same
file system as /work) and is removed at the end. Each timing is the best of --repeat runs;
``sync`` runs before every timed run so write-back of the previous run does not count.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from npu_dump_hook import bundle
from npu_dump_hook.formats.dump_file import encode_header, build_header
from npu_dump_hook.locate import LocatedRun, StepDir

GRAPH = "ge_default_20240101120000_1"
TIME_DIR = "20240101120000"
MIB = 1 << 20


# -- synthetic input ---------------------------------------------------------------------------
def _dump_bytes(op_name, payload):
    """A valid v2 dump file: u64 header length, DumpData header, one uint8 output payload."""
    header = encode_header(build_header(op_name, outputs=[np.frombuffer(payload, dtype=np.uint8)]))
    return len(header).to_bytes(8, "little") + header + payload


def make_tree(root, files, total_bytes):
    """Graph file + one step folder of ``files`` dump files of about total_bytes/files each."""
    os.makedirs(os.path.join(root, "graphs"))
    step = os.path.join(root, "dump", TIME_DIR, "0", GRAPH, "1", "0")
    os.makedirs(step)
    size = max(1, total_bytes // files)
    block = np.random.default_rng(0).integers(0, 256, size + files, dtype=np.uint8).tobytes()
    ops = []
    for i in range(files):
        op = "op_{}".format(i)
        ops.append(op)
        name = "Conv2D.{}.{}.2.{}".format(op, i, 1700000000000000 + i)
        with open(os.path.join(step, name), "wb") as out:
            out.write(_dump_bytes(op, block[i:i + size]))  # distinct bytes per file
    graph_file = os.path.join(root, "graphs", "ge_proto_00000001_graph_1_Build.txt")
    with open(graph_file, "w") as out:
        out.write('name: "{0}"\ngraph {{\n  name: "{0}"\n'.format(GRAPH))
        for i, op in enumerate(ops):
            out.write('  op {{\n    name: "{}"\n    type: "Conv2D"\n    id: {}\n  }}\n'.format(op, i))
        out.write("}\n")
    return LocatedRun(graph_file, GRAPH, {"method": "benchmark"}, os.path.join(root, "dump"),
                      [StepDir(TIME_DIR, "0", GRAPH, "1", "0", step)], [])


def tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(path) for f in fs)


# -- timing helpers ----------------------------------------------------------------------------
def _sync():
    subprocess.run(["sync"], check=False)


def best_of(repeat, setup, action):
    """Best wall time of ``action`` over ``repeat`` runs (``setup`` untimed before each)."""
    best = float("inf")
    for _ in range(repeat):
        setup()
        _sync()
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def ours(located, dest, link):
    return lambda: bundle.write_bundle(dest, located, backend="emulated", options={}, run={}, randomness=None,
                                       link=link, checksum="sha256", force=True)


def cp_r(src, dest):
    return lambda: subprocess.run(["cp", "-r", src, dest], check=True)


def cp_r_sha256sum(src, dest):
    def action():
        subprocess.run(["cp", "-r", src, dest], check=True)
        subprocess.run("find {} -type f -print0 | xargs -0 sha256sum > /dev/null".format(dest), shell=True,
                       check=True)
    return action


def remover(path):
    return lambda: shutil.rmtree(path, ignore_errors=True)


def verdict(ok):
    return "MET" if ok else "NOT MET"


# -- (a) and (b) -------------------------------------------------------------------------------
def bench_large(work, files, total, repeat):
    src = os.path.join(work, "large")
    t0 = time.perf_counter()
    located = make_tree(src, files, total)
    size = tree_bytes(src)
    print("tree: {} files, {:.2f} GiB (built in {:.1f} s)".format(files + 1, size / 2 ** 30, time.perf_counter() - t0))
    dump_src = os.path.join(src, "dump")
    out_ours, out_cp = os.path.join(work, "ours"), os.path.join(work, "cp")
    t_base = best_of(repeat, remover(out_cp), cp_r_sha256sum(dump_src, out_cp))
    t_copy = best_of(repeat, remover(out_ours), ours(located, out_ours, "copy"))
    ratio_a = t_copy / t_base
    print("(a) copy+sha256: ours {:.2f} s ({:.0f} MiB/s), cp -r + sha256sum {:.2f} s -> {:.2f}x their time "
          "(target <= 1.0x: {})".format(t_copy, size / MIB / t_copy, t_base, ratio_a, verdict(ratio_a <= 1.0)))
    t_cp = best_of(repeat, remover(out_cp), cp_r(dump_src, out_cp))
    t_link = best_of(repeat, remover(out_ours), ours(located, out_ours, "hardlink"))
    speedup = t_cp / t_link
    print("(b) hardlink: ours {:.2f} s, cp -r {:.2f} s -> {:.1f}x faster (target >= 20x: {})".format(
        t_link, t_cp, speedup, verdict(speedup >= 20)))
    for path in (out_ours, out_cp, src):
        shutil.rmtree(path, ignore_errors=True)
    return {"copy_ratio": ratio_a, "link_speedup": speedup}


# -- (c) many small files ----------------------------------------------------------------------
def child(src, dest, files):
    """Runs in a fresh interpreter: rebuild the LocatedRun, collect, report time and peak RSS."""
    step = os.path.join(src, "dump", TIME_DIR, "0", GRAPH, "1", "0")
    graph = os.path.join(src, "graphs", "ge_proto_00000001_graph_1_Build.txt")
    located = LocatedRun(graph, GRAPH, {}, os.path.join(src, "dump"), [StepDir(TIME_DIR, "0", GRAPH, "1", "0", step)])
    start = time.perf_counter()
    result = bundle.write_bundle(dest, located, backend="emulated", options={}, run={}, randomness=None,
                                 link="auto", checksum="sha256")
    elapsed = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"files": result.files, "seconds": elapsed, "rss_mb": rss_mb, "expected": files}))


def bench_small(work, counts):
    rows = []
    for n in counts:
        src = os.path.join(work, "small{}".format(n))
        make_tree(src, n, n * 256)
        dest = os.path.join(work, "small{}-out".format(n))
        _sync()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", src, dest, str(n)],
                              stdout=subprocess.PIPE, check=True, universal_newlines=True)
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print("(c) {:>7d} files: {:.2f} s ({:.0f} us/file), peak RSS {:.0f} MB (target < 300 MB: {})".format(
            n, row["seconds"], 1e6 * row["seconds"] / n, row["rss_mb"], verdict(row["rss_mb"] < 300)))
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
    per_file = [r["seconds"] / r["expected"] for r in rows]
    growth = per_file[-1] / per_file[0]
    print("(c) time per file, largest vs smallest: {:.2f}x (linear growth means ~1x; target <= 1.5x: {})".format(
        growth, verdict(growth <= 1.5)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (64 MiB / 200 files; 1k-10k small files)")
    parser.add_argument("--workdir", help="where to build data (default: temp folder beside the repository)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--small-only", action="store_true", help="run only part (c), the many-small-files run")
    parser.add_argument("--child", nargs=3, metavar=("SRC", "DEST", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    parent = args.workdir or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    work = tempfile.mkdtemp(prefix="bench-bundle-", dir=parent)
    files, total = (200, 64 * MIB) if args.quick else (5000, 2 * 2 ** 30)
    if args.small_only:
        total = 0  # part (c) alone needs well under 1 GiB
    free = shutil.disk_usage(work).free
    if free < 3 * total + 2 ** 30:
        sys.exit("need {:.1f} GiB free in {}, have {:.1f}".format((3 * total + 2 ** 30) / 2 ** 30, work, free / 2 ** 30))
    print("workdir {} ({:.0f} GiB free), {} CPUs".format(work, free / 2 ** 30, os.cpu_count()))
    try:
        if not args.small_only:
            bench_large(work, files, total, args.repeat)
        bench_small(work, (1000, 5000, 10000) if args.quick else (10000, 50000, 100000))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
