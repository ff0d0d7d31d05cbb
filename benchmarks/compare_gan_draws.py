"""Healthy GAN draws against compare's expected precision per op class (docs/compare.md,
"Expected precision per op class").

The GAN of ``tests/helpers/replay_scripts.py`` feeds ``np.random`` noise and batches. Under the
runner numpy's generator is seeded by the randomness policy (``--seed``, default fixed), so a
draw is a seed: draw N runs the test's workflow with ``--seed`` FIRST+N through the command line
(NPU run on the emulated ``ascend`` profile without a fault, ``--golden-for`` run, compare) and prints the
verdict and, for every breaching row with an upstream row, its class, its own relative
Euclidean distance over the largest upstream one (``ratio``) and the allowance the class gives
it (``allowed``: the class factor, times the cancellation excess for a bilinear op). A healthy
draw must pass; the summary counts the ones that do not. About 40 s a draw on one free core::

    PYTHONPATH=. python benchmarks/compare_gan_draws.py [--draws N] [--fault generator/g1/MatMul]
        [--first-seed S] [--every-row] [--jsonl FILE]
"""
import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile

from npu_dump_hook.compare import compare, op_precision
from npu_dump_hook.compare import _analysis

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, os.pardir, "tests", "helpers", "replay_scripts.py")


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_DUMP")
           and k not in ("DUMP_GRAPH_PATH", "RANK_ID", "DEVICE_ID", "ASCEND_DEVICE_ID")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def _run(folder, flags):
    os.makedirs(folder)
    argv = [sys.executable, "-m", "npu_dump_hook", "run", "--output-dir", os.path.join(folder, "out")] + flags + [
        "--", sys.executable, SCRIPT, "gan", folder]
    done = subprocess.run(argv, cwd=folder, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = done.stdout.decode().splitlines()
    if done.returncode != 0 or not lines or not os.path.isdir(lines[-1]):
        raise RuntimeError(done.stderr.decode()[-2000:])
    return lines[-1]


def draw(root, seed, fault=None):
    """One NPU run (``--seed seed``), golden run and compare: the CompareResult."""
    flags = ["--backend", "emulated", "--emulate-profile", "ascend", "--seed", str(seed)]
    if fault:
        flags += ["--fault", "{}=scale=1.05".format(fault)]
    npu = _run(os.path.join(root, "npu"), flags)
    golden = _run(os.path.join(root, "golden"), ["--golden-for", npu])
    return compare(npu, golden, workers=1)


def _distance(row):
    return (row.metrics or {}).get("RelativeEuclideanDistance")


def _norm(row):
    """The golden tensor's Frobenius norm, read here (what compare keeps, when it keeps it)."""
    kept = getattr(row, "golden_norm", None)
    if kept is not None or not row.golden_path:
        return kept
    import numpy as np
    return float(np.linalg.norm(np.load(row.golden_path).astype(np.float64).ravel()))


def breaching(result, every=False):
    """One record per breaching row with an upstream distance (``every``: also the rows within
    the thresholds, which show how close healthy rows come to their allowance)."""
    found = []
    tainted = _analysis._tainted(result.rows)
    for row in result.rows:
        own = _distance(row)
        upstream = [d for d in (_distance(u) for u in row.upstream) if d is not None]
        if not (row.breached or every) or own is None or not upstream:
            continue
        klass, factor = op_precision(row.op_type, row.direction, row.slot)
        allowed = getattr(_analysis, "allowance", None)
        ratio = own / max(upstream) if max(upstream) > 0 else float("inf")
        # the flat rule before the cancellation excess: a root cause beyond the class factor
        old_root = bool(row.breached) and not any(tainted.get(id(u), False) for u in row.upstream) and (
            ratio > factor if factor is not None else max(upstream) <= 0)
        found.append(dict(
            tensor=row.tensor, op_type=row.op_type, klass=klass, status=row.status, own=own, breached=row.breached,
            inherited=max(upstream), ratio=ratio, old_root=old_root,
            allowed=allowed(row) if allowed else None, explained=_analysis._explained(row),
            ground_truth=row.ground_truth, shape=list(row.original_shape),
            golden_norm=_norm(row),
            upstream=[dict(tensor=u.tensor, shape=list(u.original_shape), distance=_distance(u),
                           golden_norm=_norm(u)) for u in row.upstream]))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=15)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--fault", default=None, help="an op to fault with scale=1.05 (default: healthy)")
    parser.add_argument("--jsonl", default=None, help="append one JSON line per draw to this file")
    parser.add_argument("--every-row", action="store_true", help="record rows within the thresholds too")
    args = parser.parse_args(argv)
    logging.getLogger("npu_dump_hook").setLevel(logging.ERROR)
    failed = failed_before = 0
    for number in range(args.draws):
        root = tempfile.mkdtemp(prefix="gan_draw_")
        try:
            result = draw(root, args.first_seed + number, args.fault)
            first = result.doc["first_divergence"] or {}
            rows = breaching(result, args.every_row)
            old_exit = 1 if result.exit_code or any(rec["old_root"] for rec in rows) else 0
            failed += result.exit_code != 0
            failed_before += old_exit
            print("draw {:>2} seed {} exit {} (flat factors: {}) root causes {} first {}".format(
                number, args.first_seed + number, result.exit_code, old_exit, len(result.doc["root_causes"]),
                first.get("npu_op")))
            for rec in rows:
                if not rec["breached"]:
                    continue
                print("   {:<10} {:<14} {:<60} ratio {:7.3g} allowed {} {}{}".format(
                    rec["status"], rec["klass"], rec["tensor"][:60], rec["ratio"],
                    "-" if rec["allowed"] is None else "{:.3g}".format(rec["allowed"]),
                    "explained" if rec["explained"] else "", " (flat factor: root cause)" if rec["old_root"] else ""))
            if args.jsonl:
                with open(args.jsonl, "a") as handle:
                    handle.write(json.dumps(dict(draw=number, seed=args.first_seed + number, exit=result.exit_code,
                                                 old_exit=old_exit, fault=args.fault, first=first.get("npu_op"),
                                                 rows=rows)) + "\n")
            sys.stdout.flush()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print("{} of {} draws {} (with the flat class factors: {})".format(
        failed, args.draws, "failed (healthy: want 0)" if not args.fault else "failed (faulted: want all)",
        failed_before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
