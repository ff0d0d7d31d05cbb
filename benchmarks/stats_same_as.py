"""The statistics compare's outputs, byte for byte, between two versions of the package: a speed
change to the stats compare must not change a cell.

Cases: ``bench_stats.py``'s synthetic speed run (``--rows`` rows, a chain of ops, no fault), the
same run with faults (a scaled op, a NaN, an Inf, a padded device format, rows without golden
statistics), that one with ``ops=`` selecting part of the rows and with tighter limits, and any
``--pair NPU GOLDEN`` given (e.g. emulated stats bundles and their golden bundles). For each,
``compare()``'s CSV, JSON document (``summary.elapsed_s`` set to 0: a time), terminal summary and
HTML report are written to ``DIR/<case>.*``.

    # with the old version on the path, then the new:
    PYTHONPATH=OLD_TREE .venv/bin/python benchmarks/stats_same_as.py --write OLD_DIR [--pair NPU GOLDEN ...]
    PYTHONPATH=NEW_TREE .venv/bin/python benchmarks/stats_same_as.py --same-as OLD_DIR [--pair NPU GOLDEN ...]

Exit status 0 when every file is identical (``--same-as``), 1 otherwise.
"""
import argparse
import filecmp
import json
import os
import shutil
import sys
import tempfile

import numpy as np

import npu_dump_hook  # first: the version on PYTHONPATH, not the tree bench_stats puts first on sys.path
from npu_dump_hook.compare import compare, render_html

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_stats import write_synthetic  # noqa: E402

#: op number -> what the NPU value becomes there (the golden keeps the true value).
FAULTS = {
    40: lambda v: v * np.float32(1.05),          # a root cause, propagated down the chain
    41: lambda v: v * np.float32(1.02),          # within the limits, after a breach
    300: lambda v: np.where(np.arange(v.size) == 3, np.nan, v).astype(v.dtype),   # an overflow row
    301: lambda v: np.where(np.arange(v.size) == 0, np.inf, v).astype(v.dtype),
    302: lambda v: v + np.float32(1e-7),
    700: lambda v: -v,
}


def _outputs(result, folder, case):
    doc = result.doc
    doc["summary"]["elapsed_s"] = 0.0  # a time, not an output to compare
    texts = {"csv": result.csv(), "json": json.dumps(doc, indent=1, allow_nan=True),
             "txt": result.summary_text(), "html": render_html(doc)}
    for ext, text in texts.items():
        with open(os.path.join(folder, "{}.{}".format(case, ext)), "w") as handle:
            handle.write(text)


def _cases(tmp, rows, pairs):
    ops = rows // 2 + 1
    graph, stats_dir, _, golden, _ = write_synthetic(os.path.join(tmp, "clean"), ops, 16, tensors=False)
    yield "synthetic", lambda: compare(stats_dir, golden, graph=graph, workers=1)
    graph, stats_dir, _, golden, _ = write_synthetic(os.path.join(tmp, "faulted"), ops, 16, tensors=False,
                                                     faults=FAULTS, drop_golden=(7, 500), padded=(90, 91))
    yield "faulted", lambda: compare(stats_dir, golden, graph=graph, workers=1)
    yield "faulted_ops", lambda: compare(stats_dir, golden, graph=graph, workers=1, ops=r"block_00[0-4]")
    yield "faulted_tight", lambda: compare(stats_dir, golden, graph=graph, workers=1,
                                           stats_thresholds={"value_rel_max": 1e-7, "norm_rel_max": None})
    for number, (npu, gold) in enumerate(pairs):
        yield "pair{}".format(number), lambda npu=npu, gold=gold: compare(npu, gold, workers=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="DIR", help="write the outputs here")
    group.add_argument("--same-as", metavar="DIR", help="outputs another version wrote: must be byte-identical")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--pair", nargs=2, action="append", default=[], metavar=("NPU", "GOLDEN"))
    args = parser.parse_args(argv)
    print("package: " + os.path.dirname(npu_dump_hook.__file__))
    # one fixed folder: the NPU and golden paths are in every output
    tmp = os.path.join(tempfile.gettempdir(), "npu_dump_hook_stats_same_as")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        out = args.write or os.path.join(tmp, "new")
        os.makedirs(out, exist_ok=True)
        names = []
        for case, run in _cases(tmp, args.rows, args.pair):
            _outputs(run(), out, case)
            names.extend("{}.{}".format(case, ext) for ext in ("csv", "json", "txt", "html"))
        if args.write:
            print("wrote {} files to {}".format(len(names), out))
            return 0
        same, differ, missing = filecmp.cmpfiles(args.same_as, out, names, shallow=False)
        for name in names:
            print("  {:<24} {}".format(name, "identical" if name in same else "DIFFERS" if name in differ
                                       else "missing"))
        print("outputs: {} of {} byte-identical".format(len(same), len(names)))
        return 0 if len(same) == len(names) else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
